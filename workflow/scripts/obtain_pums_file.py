"""Rule obtain_pums_file: find (or download once) the PUMS person file and validate its header.

The file stays in ``acs.data_root`` (never a Snakemake output); the rule's output is a small report.
"""

from disaggregated_eval import acs, io

log = io.rule_logger(snakemake.log[0], "obtain_pums_file")  # noqa: F821 (snakemake is injected)

params = snakemake.params
log.info(
    "PUMS person file %s %s %s under %s (download=%s)",
    params.year,
    params.horizon,
    params.state,
    params.data_root,
    params.download,
)
path = acs.obtain_person_file(
    params.data_root,
    year=params.year,
    horizon=params.horizon,
    state=params.state,
    download=params.download,
)
report = acs.validate_person_file(path, year=params.year, tasks=list(params.tasks))
log.info("validated %s: %s", path, report)
io.write_json(report, snakemake.output.report)

"""Rule extract_acs_task: one folktables task, encoded and split 80/20 (SPEC 3)."""

from disaggregated_eval import acs, io

log = io.rule_logger(snakemake.log[0], "extract_acs_task")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
path = acs.person_file_path(params.data_root, year=params.year, horizon=params.horizon, state=params.state)
log.info("extracting %s from %s", dataset, path)
frame = acs.extract_task(path, dataset, year=params.year)
log.info("%d rows after the task filter", len(frame))
train, test, schema = acs.encode_and_split(frame, dataset, test_size=params.test_size, seed=params.seed)
# Per (group, label) counts of the filtered frame: the input of the cohort table (Table B4).
counts = frame.groupby(["a", "y"]).size().rename("n").reset_index()
io.write_table(train, snakemake.output.train)
io.write_table(test, snakemake.output.test)
io.write_json(schema, snakemake.output.schema)
io.write_table(counts, snakemake.output.counts)
log.info("wrote %d train and %d test rows", len(train), len(test))

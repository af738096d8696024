"""Rule extract_acs_task: one folktables task, checked, encoded and split 80/20 (paper Supplementary A.4)."""

from disaggregated_eval import acs, io

log = io.rule_logger(snakemake.log[0], "extract_acs_task")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
path = acs.person_file_path(params.data_root, year=params.year, horizon=params.horizon, state=params.state)
log.info("extracting %s from %s", dataset, path)
frame = acs.extract_task(path, dataset, year=params.year)
log.info("%d rows after the task filter", len(frame))
# Every group needs enough rows of each label for the model stage's folds: stop here, not after the
# fits. The fold counts only gate this check (the outputs do not depend on them), so they are read from
# the configuration rather than passed as params: changing them does not rerun the extraction and,
# through its rewritten outputs, the outcome models.
folds = snakemake.config["models"]
counts = acs.check_cohort(
    frame, dataset, cv_folds=folds["cv_folds"], crossfit_folds=folds["crossfit_folds"], test_size=params.test_size
)
train, test, schema = acs.encode_and_split(frame, dataset, test_size=params.test_size, seed=params.seed)
io.write_table(train, snakemake.output.train)
io.write_table(test, snakemake.output.test)
io.write_json(schema, snakemake.output.schema)
# Per (group, label) counts of the filtered frame: the input of the cohort table (Table B4).
io.write_table(counts, snakemake.output.counts)
log.info("wrote %d train and %d test rows", len(train), len(test))

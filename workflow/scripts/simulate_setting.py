"""Rule simulate_setting: draw the train and test sets of one simulation setting (paper Supplementary A.3.1)."""

from disaggregated_eval import io, simulate, vocabulary

log = io.rule_logger(snakemake.log[0], "simulate_setting")  # noqa: F821 (snakemake is injected)

setting = snakemake.wildcards.dataset
params = snakemake.params
log.info("simulating %s: n_train=%d, n_test=%d, seed=%d", setting, params.n_train, params.n_test, params.seed)
train, test = simulate.simulate_setting(setting, n_train=params.n_train, n_test=params.n_test, seed=params.seed)
schema = {
    "dataset": setting,
    "study": "simulation",
    "features": ["x"],
    "categorical": [],
    "label": "y",
    "group": "a",
    "group_labels": list(vocabulary.SIMULATION_GROUP_LABELS),
}
io.write_table(train, snakemake.output.train)
io.write_table(test, snakemake.output.test)
io.write_json(schema, snakemake.output.schema)
log.info("wrote %d train and %d test rows", len(train), len(test))

"""Rule plot_selection_bounds: bounds against Gamma per metric and slice, truth marked (one setting)."""

from disaggregated_eval import io, plots, vocabulary

log = io.rule_logger(snakemake.log[0], "plot_selection_bounds")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
model, margins = snakemake.params.model, snakemake.params.margins
rows = io.read_table(snakemake.input.replicates[0])
first = rows[(rows["replicate"] == rows["replicate"].min()) & (rows["model"] == model) & (rows["margins"] == margins)]
truth = io.read_table(snakemake.input.truth)
strength = io.read_table(snakemake.input.strength)
gamma_star = strength.loc[(strength["margins"] == margins) & (strength["min_selection"] == 0), "gamma_box"].iloc[0]
written = plots.plot_selection_bounds(
    first,
    truth[truth["model"] == model],
    gamma_star=float(gamma_star),
    title=(
        f"{vocabulary.DATASET_LABELS.get(dataset, dataset)}: {vocabulary.MODEL_LABELS.get(model, model)}, "
        f"weighted to the target's P(A); one selected test set"
    ),
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])

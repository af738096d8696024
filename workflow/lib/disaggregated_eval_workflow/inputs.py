"""Reading the workflow's intermediate files in the rule scripts, checked against each other.

The score files of the model stage hold one row per test row, in the test set's order
(``docs/design.md``, "Model stage"). A score file that does not (a file shortened by hand, copied
from another run, or cut by a full disk) would otherwise be aligned on the row index by pandas and
surface much later as a misleading message about missing values; :func:`read_scores` stops it at
once, naming the file and both row counts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from disaggregated_eval import io

__all__ = ["read_scores"]


def read_scores(
    paths: Sequence[str | os.PathLike[str]],
    *,
    n_rows: int,
    test_path: str | os.PathLike[str],
    models: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The score columns of one or more score files, side by side, each checked to match the test set.

    Parameters
    ----------
    paths : sequence of path-like
        Score files (``scores.parquet``, ``bayes_scores.parquet``), one column per model.
    n_rows : int
        Rows of the test set the scores belong to.
    test_path : path-like
        That test set (named in the message).
    models : sequence of str, optional
        Model columns to return, in this order; default every column of every file.

    Returns
    -------
    pandas.DataFrame
        ``n_rows`` rows (index ``0 .. n_rows - 1``), the score columns.

    Raises
    ------
    ValueError
        If a file's row count differs from ``n_rows`` (naming the file, its rows and the test set's),
        or a requested model column is in no file (naming the files and their columns).
    """
    frames = []
    for path in paths:
        frame = io.read_table(path)
        if len(frame) != n_rows:
            raise ValueError(
                f"score file {path} has {len(frame)} rows but the test set {test_path} has {n_rows}; they must "
                "match row for row (rerun the model stage, e.g. with --forcerun fit_outcome_models)"
            )
        frames.append(frame.reset_index(drop=True))
    scores = pd.concat(frames, axis=1)
    if models is None:
        return scores
    missing = [m for m in models if m not in scores.columns]
    if missing:
        raise ValueError(
            f"score files {[str(p) for p in paths]} lack the model columns {missing}; they have {list(scores.columns)}"
        )
    return scores[list(models)]

"""Former home of the outcome and weight models; a re-export kept for one release.

The module was split in two:

- :mod:`disaggregated_eval.outcome_models`: :func:`fit_classifier` (the grid-searched gradient
  boosting every model is fitted with), :class:`OutcomeModels`, :func:`fit_outcome_models`;
- :mod:`disaggregated_eval.weight_models`: the weight models ``P(A = a | V)``
  (:func:`fit_weight_models`, :func:`crossfit_group_proba`, :func:`score_frame`,
  :func:`selected_max_leaf_nodes`, :data:`SELECTION_COLUMNS`, ...).

Import from those modules; this one only re-exports their public names (the same objects) so that
code written against ``disaggregated_eval.models`` keeps working, and will be removed in the next
release.
"""

from __future__ import annotations

from .outcome_models import OutcomeModels, fit_classifier, fit_outcome_models
from .weight_models import (
    FITTED_ON_TEST,
    FITTED_ON_TRAIN,
    R_CLIP,
    R_FEATURE,
    SELECTION_COLUMNS,
    crossfit_fold_ids,
    crossfit_group_proba,
    fit_weight_models,
    logit_score,
    score_frame,
    selected_max_leaf_nodes,
)

__all__ = [
    "R_FEATURE",
    "R_CLIP",
    "FITTED_ON_TRAIN",
    "FITTED_ON_TEST",
    "SELECTION_COLUMNS",
    "fit_classifier",
    "OutcomeModels",
    "fit_outcome_models",
    "logit_score",
    "score_frame",
    "crossfit_fold_ids",
    "crossfit_group_proba",
    "fit_weight_models",
    "selected_max_leaf_nodes",
]

"""Per-example acquisition: which feature group to compute next for one example, from the
values it has computed (``ConditionedAcquisition``, gated against the per-set rule), a
greedy per-example baseline, the held-out loss table and its exact superset search."""

from algorithms.acquisition.greedy import GreedyNeighbours
from algorithms.acquisition.losses import LOSSES, row_losses
from algorithms.acquisition.policy import (
    NOT_WORTH,
    NOTHING_FITS,
    Candidate,
    ConditionedAcquisition,
    Decision,
)
from algorithms.acquisition.predictors import masked_predictor, set_predictor
from algorithms.acquisition.search import best_superset, best_superset_reference
from algorithms.acquisition.table import LossTable, mask_costs

__all__ = ["LOSSES", "NOTHING_FITS", "NOT_WORTH", "Candidate", "ConditionedAcquisition",
           "Decision", "GreedyNeighbours", "LossTable", "best_superset",
           "best_superset_reference", "mask_costs", "masked_predictor", "row_losses",
           "set_predictor"]

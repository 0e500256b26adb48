"""Anytime linear prediction over costed feature groups (Hu, Grubb, Bagnell, Hebert).

``SufficientStatistics`` (streaming, mergeable) → ``sequence_groups`` / ``doubling_sequence`` /
``group_lasso_order`` (greedy CS-G-OMP, CS-G-FR, no-whiten, single; Doubling; Group Lasso
baseline) → ``AnytimeLinearModel`` (the served artifact).
"""

from algorithms.anytime.doubling import doubling_eligible, doubling_sequence
from algorithms.anytime.greedy import CRITERIA, SequenceResult, sequence_groups, sequence_in_order
from algorithms.anytime.model import METHODS, AnytimeLinearModel
from algorithms.anytime.statistics import SufficientStatistics

__all__ = [
    "CRITERIA",
    "METHODS",
    "AnytimeLinearModel",
    "SequenceResult",
    "SufficientStatistics",
    "doubling_eligible",
    "doubling_sequence",
    "sequence_groups",
    "sequence_in_order",
]

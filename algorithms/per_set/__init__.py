"""Per-set answers: honest validation figures of a model for any computed set of feature
groups (``SetFigures``, with Platt calibration for classification) and ``PerSetChoice``,
which answers each computed set with the better of an anytime linear model and GBFS."""

from algorithms.per_set.choice import HALVES, PerSetChoice
from algorithms.per_set.figures import SetFigures, ValidationFigures, platt_fit

__all__ = ["HALVES", "PerSetChoice", "SetFigures", "ValidationFigures", "platt_fit"]

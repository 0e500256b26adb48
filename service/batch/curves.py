"""What every batch family's fit and answers share: the error of a fit that cannot
succeed, the per-set figures on held-out rows and the curves along a sequence of groups,
and the dense rows of a computed set.

Figures go through :class:`algorithms.per_set.figures.SetFigures` (cached per set); a curve
of J groups costs J + 1 figures.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

Progress = Callable[[float], None]
FIGURE_NAMES = {"regression": ("explained_variance", "rmse"),
                "classification": ("error", "log_loss")}
TRAIN_ROWS = 5000  # training rows the curves of a GBFS version are measured on, at most


class FitError(ValueError):
    """A retrain that cannot succeed on this data (too few examples, a singular fit...)."""


def set_figures(score, rows: tuple[np.ndarray, np.ndarray], task: str, layout):
    """:class:`~algorithms.per_set.figures.SetFigures` of ``score(X, S)`` on ``rows``
    (a multi-class model's: :class:`~algorithms.per_set.multiclass.MulticlassSetFigures`,
    ``score`` giving (n, K) class scores and the rows' targets class indices)."""
    from algorithms.per_set.figures import SetFigures

    if getattr(layout, "classes", None) is not None:
        from algorithms.per_set.multiclass import MulticlassSetFigures

        return MulticlassSetFigures(score, rows[0], rows[1], n_classes=len(layout.classes),
                                    groups=layout.groups, costs=layout.costs)

    return SetFigures(score, rows[0], rows[1], task=task, groups=layout.groups,
                      costs=layout.costs)


def curve(figures, order: list[int], task: str) -> dict[str, list[float]]:
    """The figures of every prefix of ``order`` (0..J groups) by name."""
    names = FIGURE_NAMES[task]
    prefixes = [figures.figures(order[:j]) for j in range(len(order) + 1)]
    return {name: [float(getattr(f, name)) for f in prefixes] for name in names}


def greedy_order(figures, n_groups: int) -> list[int]:
    """Groups in the order of ``figures.next_group`` from the empty set (the greedy
    sequence of validation gain per unit cost). O(J²) figures, each cached."""
    order: list[int] = []
    while (step := figures.next_group(order)) is not None:
        order.append(int(step[0]))
    return order + [g for g in range(n_groups) if g not in order]


def rmse(prediction: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def masked_dense(X: sp.csr_matrix, features: np.ndarray) -> np.ndarray:
    """Dense rows with every feature outside ``features`` set to 0 (not computed)."""
    dense = X.toarray()
    mask = np.zeros(dense.shape[1], dtype=bool)
    mask[features] = True
    dense[:, ~mask] = 0.0
    return dense

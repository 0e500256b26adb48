"""The ranking of a fitted NVSD's units (variables, or groups for ``"gl"``) by their
derivative norms, and the nested supports it makes: what the relaxed estimator refits on
and what a fitted NVSD answers ``next_group`` with."""

from __future__ import annotations

from typing import Any

import numpy as np


def ranked_units(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """Ranking of a fitted NVSD: ``(units, unit_of)``.

    ``units`` (int64) are the variables (the groups for ``regularizer="gl"``) with a non-zero
    derivative norm (group norm ``||(||d_a f||_n)_{a in g}||_2``), by decreasing norm, ties
    lower index first; ``unit_of`` (d,) maps each variable to its unit. O(d log d).
    """
    norms = np.asarray(model.derivative_norms_, dtype=float)
    reg = model.make_regularizer(norms.size)
    gl = model.regularizer == "gl"
    unit_of = np.asarray(reg.group_of if gl else np.arange(norms.size), dtype=np.int64)
    unit_norms = reg.group_norms(norms) if gl else norms
    order = np.lexsort((np.arange(unit_norms.size), -unit_norms))
    positive = unit_norms[order] > 0
    stop = positive.size if positive.all() else int(np.argmin(positive))
    return order[:stop].astype(np.int64), unit_of


def ranked_supports(model: Any) -> list[np.ndarray]:
    """Nested supports of a fitted NVSD: top-1, top-2, ... variables by derivative norm.

    For ``regularizer="gl"`` the steps are whole groups, ordered by group norm. Variables
    (groups) with a zero norm are never added. Ties: lower index first. O(d^2).
    """
    units, unit_of = ranked_units(model)
    supports, chosen = [], np.zeros(unit_of.size, dtype=bool)
    for unit in units:
        chosen |= unit_of == unit
        supports.append(np.flatnonzero(chosen).astype(np.int64))
    return supports

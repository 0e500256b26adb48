"""Selection accuracy: Tanimoto distance between supports (NVSD paper, sec. 4.3)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def _as_set(support: Iterable[int] | np.ndarray) -> set[int]:
    arr = np.asarray(support)
    if arr.dtype == bool:
        arr = np.flatnonzero(arr)
    return {int(a) for a in arr.reshape(-1)}


def tanimoto_distance(
    true_support: Iterable[int] | np.ndarray, learned_support: Iterable[int] | np.ndarray
) -> float:
    """``1 - |A & B| / |A | B|`` (0 when both are empty). O(d).

    Supports are boolean masks (d,) or collections of variable indices.
    """
    a, b = _as_set(true_support), _as_set(learned_support)
    union = len(a | b)
    return 0.0 if union == 0 else 1.0 - len(a & b) / union

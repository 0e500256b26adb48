r"""The held-out loss table: per-row losses of a predictor for every set of groups.

Rows ``X`` (n x d, held out from the predictor's fit) with targets ``y``; a *pool* of at
most 16 group ids, bit ``b`` of a mask standing for group ``pool[b]``. Column ``m`` holds
``L[m, i] = loss(y_i, predict(x_i with the features outside mask m set to NaN))``, the
loss row ``i`` would suffer having computed exactly the groups of ``m``. Columns are
computed lazily (:meth:`LossTable.ensure`, one stacked predictor call per chunk of
``chunk_rows`` rows) and kept: memory ``8 n 2^P`` bytes for a pool of ``P`` groups, time
``n |new masks|`` predicted rows. ``mask_cost[m]`` is the summed cost of the groups of
``m`` (O(2^P) once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from algorithms.acquisition.losses import row_losses

MAX_POOL = 16
Predict = Callable[[np.ndarray], np.ndarray]


def mask_costs(costs: np.ndarray) -> np.ndarray:
    """``out[m] = sum_{b in m} costs[b]`` for every mask of ``len(costs)`` bits. O(2^P)."""
    costs = np.asarray(costs, dtype=np.float64)
    out = np.zeros(1 << costs.size, dtype=np.float64)
    for b, c in enumerate(costs):
        out[1 << b: 1 << (b + 1)] = out[: 1 << b] + c
    return out


class LossTable:
    """Lazy per-row held-out losses of ``predict`` for every set of the ``pool`` groups.

    ``predict(X)`` answers rows whose uncomputed features are NaN (n,) or (n, K);
    ``groups`` are every group's feature indices, ``costs`` one per group, ``loss`` one of
    :data:`algorithms.acquisition.losses.LOSSES`. Groups outside the pool are never
    revealed to the predictor here. ``predict_set(groups)``, when given, answers every
    window row knowing exactly ``groups`` (sorted ids) instead: one call per column, no
    masked copies.
    """

    def __init__(self, predict: Predict, X: np.ndarray, y: np.ndarray, *,
                 groups: Sequence[Sequence[int]], costs: Sequence[float], loss: str,
                 pool: Sequence[int], chunk_rows: int = 200_000,
                 predict_set: Callable[[tuple[int, ...]], np.ndarray] | None = None) -> None:
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64).ravel()
        if self.X.ndim != 2 or self.y.shape != (self.X.shape[0],) or self.X.shape[0] < 1:
            raise ValueError(f"need X (n >= 1, d) and y (n,), got {self.X.shape}, "
                             f"{self.y.shape}")
        self.pool = np.asarray(pool, dtype=np.int64).ravel()
        if self.pool.size > MAX_POOL or np.unique(self.pool).size != self.pool.size:
            raise ValueError(f"pool must hold at most {MAX_POOL} distinct group ids")
        self.groups = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
        self.costs = np.asarray(costs, dtype=np.float64).ravel()
        self.predict, self.loss, self.chunk_rows = predict, loss, int(chunk_rows)
        self.predict_set = predict_set
        self.mask_cost = mask_costs(self.costs[self.pool])
        self.full = (1 << self.pool.size) - 1
        n = self.X.shape[0]
        self.values = np.zeros((self.full + 1, n), dtype=np.float64)
        self.done = np.zeros(self.full + 1, dtype=bool)
        # bit b's features, for masking
        self._bit_features = [self.groups[g] for g in self.pool]

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    def mask_of(self, computed: Iterable[int]) -> int:
        """The mask of the pool groups among ``computed`` (other groups are dropped)."""
        where = {int(g): b for b, g in enumerate(self.pool)}
        mask = 0
        for g in computed:
            b = where.get(int(g))
            if b is not None:
                mask |= 1 << b
        return mask

    def groups_of(self, mask: int) -> tuple[int, ...]:
        """The group ids of a mask, sorted."""
        return tuple(sorted(int(self.pool[b]) for b in range(self.pool.size)
                            if mask >> b & 1))

    def masked(self, X: np.ndarray, mask: int) -> np.ndarray:
        """A copy of ``X`` with every feature outside the groups of ``mask`` NaN."""
        keep = np.zeros(X.shape[1], dtype=bool)
        for b, features in enumerate(self._bit_features):
            if mask >> b & 1:
                keep[features] = True
        out = np.array(X, dtype=np.float64, copy=True)
        out[:, ~keep] = np.nan
        return out

    def ensure(self, masks: Iterable[int]) -> None:
        """Compute the columns of ``masks`` not computed yet (stacked predictor calls)."""
        masks = np.unique(np.asarray(list(masks) if not isinstance(masks, np.ndarray)
                                     else masks, dtype=np.int64))
        todo = [int(m) for m in masks[~self.done[masks]]]
        n = self.n_rows
        if self.predict_set is not None:
            for m in todo:
                out = np.asarray(self.predict_set(self.groups_of(m)))
                self.values[m] = row_losses(self.loss, self.y, out)
                self.done[m] = True
            return
        per_call = max(1, self.chunk_rows // n)
        for start in range(0, len(todo), per_call):
            part = todo[start:start + per_call]
            stacked = np.concatenate([self.masked(self.X, m) for m in part])
            out = np.asarray(self.predict(stacked))
            y = np.tile(self.y, len(part))
            losses = row_losses(self.loss, y, out).reshape(len(part), n)
            self.values[part] = losses
            self.done[part] = True

    def supersets(self, mask: int, room: float | None) -> np.ndarray:
        """Every superset of ``mask`` whose extra cost fits ``room`` (None: no cap), int64."""
        free = self.full & ~mask
        subs = mask | _submasks(free)
        extra = self.mask_cost[subs] - self.mask_cost[mask]
        if room is not None:
            subs = subs[extra <= room + 1e-12 * max(1.0, abs(room))]
        return subs

    def column_means(self, masks: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Mean loss of each mask over ``rows`` (None: all rows); computes what is missing."""
        self.ensure(masks)
        block = self.values[masks]
        return block.mean(axis=1) if rows is None else block[:, rows].mean(axis=1)


def _submasks(free: int) -> np.ndarray:
    """Every submask of ``free`` (including 0), int64. O(2^popcount)."""
    bits = [b for b in range(free.bit_length()) if free >> b & 1]
    out = np.zeros(1, dtype=np.int64)
    for b in bits:
        out = np.concatenate([out, out | (1 << b)])
    return out


__all__ = ["MAX_POOL", "LossTable", "mask_costs"]

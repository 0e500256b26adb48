r"""Per-example, non-myopic, cost-aware acquisition: which group to compute next for *this*
example, given the values it has computed (after the acquisition conditioned oracle of
Valancius, Lennon, Oliva, "Acquisition Conditioned Oracle for Nongreedy Active Feature
Acquisition", ICML 2024), gated against the per-set rule.

Held-out window: rows ``(x_i, y_i)`` the predictor's fit never saw and the per-row losses
``L[m, i]`` of the predictor for every set ``m`` of the pool groups
(:class:`~algorithms.acquisition.table.LossTable`). For an example ``x`` that computed the
groups ``S`` (mask ``s``):

1. neighbours ``N``: the ``k`` window rows nearest to ``x`` on the computed features,
   each feature standardised by the window's sd, the squared distance summed group by
   group in increasing group id, ties to the lower row (O(n |F_S| + n log k)); every
   row when ``S`` is empty;
2. plan ``m* = argmin_{m ⊇ s, c(m) <= max_cost} mean_{i in N} L[m, i] + lam c(m)``, exact
   over the supersets (:func:`~algorithms.acquisition.search.best_superset`, O(2^(P-|s|)
   k));
3. ``m* != s``: compute the cheapest missing group of ``m*`` (ties: the larger one-step
   gain over ``N``), so a group worth nothing alone is bought when it makes the next
   purchase right; ``m* = s``: with an exchange rate, stop ("no group worth its cost");
   without one (a hard budget only), the per-set choice. No missing group fits: stop
   ("nothing left within max_cost").

The expected gain is the plan's drop ``d_i = L[s, i] - L[m*, i]`` over ``N``:
``mean(d) ± 1.96 sd(d) / sqrt(k)``; ``candidates`` give every missing group's one-step drop
over ``N``, its cost and the ratio.

Gate (``gate=True``): the window is split in halves ``A``, ``B`` (``random_state``); for
every row of ``B`` (at most ``gate_rows / 2`` of them, drawn at random) and every cap in
``gate_caps`` (fractions of the pool's total cost), an episode from the empty set runs
twice, with neighbours from ``A`` and with the per-set rule over ``A`` (largest mean gain
per unit cost), and the final losses are averaged over the caps; then the halves swap,
so every row that ran gives one paired difference. The
per-example rule is kept only when it lowers the mean loss by more than ``gate_z``
standard errors of those differences; otherwise every decision is the per-set one
(``fallback``, default the per-set rule over the whole window), so on data where values
do not change the best next group the policy is the per-set rule. Fitting: ``n 2^P``
predicted rows for the whole table (decisions then only read it), then
``min(n, gate_rows) |caps|`` episodes of at most ``P`` decisions, each O(n |F_S| / 2 +
2^(P-|s|) k) in :mod:`~algorithms.acquisition.kernels` (the first decision of every
episode, from the empty set, is made once per half and cap).

More than ``max_groups`` groups: the pool is the first ``max_groups`` of the per-set
greedy order (``J^2 / 2`` predictor calls on the window); beyond the pool the per-set
order continues.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from algorithms.acquisition import kernels
from algorithms.acquisition.losses import LOSSES, row_losses
from algorithms.acquisition.table import MAX_POOL, LossTable, Predict
from algorithms.batch import cost_slack

NOTHING_FITS = "nothing left within max_cost"
NOT_WORTH = "no group worth its cost"
BLIND_DECISIONS = 4096  # decisions kept that read no value of the example (per policy)
Fallback = Callable[[tuple[int, ...], float | None], "int | None"]


@dataclass(frozen=True)
class Candidate:
    """A missing group: its one-step expected loss drop, cost and drop per unit cost, and
    whether its cost fits what the cap leaves."""

    group: int
    cost: float
    expected_gain: float | None
    gain_per_cost: float | None
    within_max_cost: bool = True


@dataclass(frozen=True)
class Decision:
    """One decision: ``group`` to compute next (None with ``stop_reason``), the expected
    drop of the held-out loss once ``plan`` is computed with its 95 % ``interval``,
    ``per_example`` (False: the per-set rule chose) and the ``candidates``."""

    group: int | None
    cost: float | None
    expected_gain: float | None
    interval: tuple[float, float] | None
    stop_reason: str | None
    plan: tuple[int, ...]
    per_example: bool
    candidates: tuple[Candidate, ...] = field(default=())


def _mean_interval(d: np.ndarray) -> tuple[float, tuple[float, float]]:
    mean = float(d.mean())
    half = 1.96 * float(d.std(ddof=1)) / np.sqrt(d.size) if d.size > 1 else float("inf")
    return mean, (float(mean - half), float(mean + half))


def missing_within(costs: np.ndarray, S: tuple[int, ...], max_cost: float | None
                   ) -> tuple[float | None, list[int]]:
    """(what ``max_cost`` leaves after ``S``, or None; the groups outside ``S`` whose cost
    fits it, with ``cost_slack`` of what is left). O(J)."""
    spent = float(costs[list(S)].sum()) if S else 0.0
    room = None if max_cost is None else float(max_cost) - spent
    slack = 0.0 if room is None else cost_slack(room)
    return room, [g for g in range(len(costs)) if g not in S and
                  (room is None or costs[g] <= room + slack)]


class ConditionedAcquisition:
    """Per-example acquisition over a fitted budgeted predictor (module docstring).

    Parameters: ``n_neighbors`` (k), ``max_groups`` (P <= 16: the exact search's pool),
    ``gate`` (learn whether per-example beats per-set; False: always per-example, i.e.
    plain AACO), ``gate_z``, ``gate_caps``, ``gate_rows`` (the episodes run for at most
    this many window rows, a random half from each half; None: every row),
    ``random_state``.
    ``fit(predict, X, y, groups=, costs=, loss=, pool=None, fallback=None)``: ``predict``
    answers rows whose uncomputed features are NaN; ``X, y`` the held-out window;
    ``fallback(S, max_cost) -> group | None`` the per-set rule to fall back to; ``table``
    another policy's :class:`LossTable` of the same rows, shared instead of recomputed.
    Fitted: ``table_``, ``pool_``, ``per_example_`` (the gate's verdict), ``gate_``.
    """

    def __init__(self, *, n_neighbors: int = 30, max_groups: int = 12, gate: bool = True,
                 gate_z: float = 2.0, gate_caps: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
                 gate_rows: int | None = 2000, random_state: int = 0) -> None:
        self.n_neighbors = n_neighbors
        self.max_groups = max_groups
        self.gate = gate
        self.gate_z = gate_z
        self.gate_caps = gate_caps
        self.gate_rows = gate_rows
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def fit(self, predict: Predict, X: np.ndarray, y: np.ndarray, *,
            groups: Sequence[Sequence[int]], costs: Sequence[float], loss: str,
            pool: Sequence[int] | None = None, fallback: Fallback | None = None,
            table: LossTable | None = None) -> ConditionedAcquisition:
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        if not 1 <= int(self.max_groups) <= MAX_POOL:
            raise ValueError(f"max_groups must be in [1, {MAX_POOL}], got {self.max_groups}")
        if int(self.n_neighbors) < 2:
            raise ValueError(f"n_neighbors must be >= 2, got {self.n_neighbors}")
        X = np.ascontiguousarray(X, dtype=np.float64)
        self.groups_ = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
        self.costs_ = np.asarray(costs, dtype=np.float64).ravel()
        if self.costs_.shape != (len(self.groups_),) or np.any(self.costs_ < 0):
            raise ValueError(f"costs must be {len(self.groups_)} numbers >= 0")
        J = len(self.groups_)
        self.sequence_ = None
        if table is not None:   # share another policy's table (same window and pool)
            if table.X.shape != X.shape or not np.array_equal(table.X, X, equal_nan=True):
                raise ValueError("table must hold the rows X")
            pool = table.pool
        elif pool is None:
            if self.max_groups >= J:
                pool = range(J)
            else:
                self.sequence_ = self._per_set_sequence(predict, X, y, loss)
                pool = self.sequence_[: self.max_groups]
        self.pool_ = np.asarray(list(pool), dtype=np.int64)
        self.table_ = table if table is not None else LossTable(
            predict, X, y, groups=self.groups_, costs=self.costs_, loss=loss, pool=self.pool_)
        self.mean_ = X.mean(axis=0)
        sd = X.std(axis=0)
        self.scale_ = np.where(sd > 0, sd, 1.0)
        self.fallback_ = fallback
        self.rows_ = np.arange(X.shape[0], dtype=np.int64)
        self._flatten()
        self.per_example_, self.gate_ = True, None
        if self.gate:
            self.gate_ = self._run_gate()
            self.per_example_ = bool(self.gate_["per_example"])
        return self

    def _flatten(self) -> None:
        """The flat arrays of :mod:`~algorithms.acquisition.kernels`; the whole loss table
        (``n 2^P`` predicted rows, once), so that a decision only reads it."""
        table = self.table_
        table.ensure(np.arange(table.full + 1, dtype=np.int64))
        sizes = [g.size for g in self.groups_]
        self._goff = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self._goff[1:])
        self._gfeat = (np.concatenate(self.groups_) if self.groups_ else
                       np.zeros(0)).astype(np.int64)
        self._bit_of = np.full(len(self.groups_), -1, dtype=np.int64)
        self._bit_of[table.pool] = np.arange(table.pool.size)
        self._sequence = np.asarray(self.sequence_ or [], dtype=np.int64)
        self._XT = np.ascontiguousarray(table.X.T)
        self._blind: dict = {}  # decisions that read no value of x (see decide)
        self._colmean = kernels.column_means(table.values, self.rows_)

    def _ins(self, S: Iterable[int]) -> np.ndarray:
        ins = np.zeros(len(self.groups_), dtype=np.bool_)
        ins[list(S)] = True
        return ins

    def _per_set_sequence(self, predict: Predict, X: np.ndarray, y: np.ndarray,
                          loss: str) -> list[int]:
        """Greedy per-set order of every group by mean window loss drop per unit cost."""
        J = len(self.groups_)
        keep = np.zeros(X.shape[1], dtype=bool)
        order: list[int] = []
        eps = 1e-9 * max(float(self.costs_.max()), 1.0)

        def mean_loss(k: np.ndarray) -> float:
            Z = X.copy()
            Z[:, ~k] = np.nan
            return float(row_losses(loss, y, predict(Z)).mean())

        current = mean_loss(keep)
        while len(order) < J:
            best = None
            for g in range(J):
                if g in order:
                    continue
                k = keep.copy()
                k[self.groups_[g]] = True
                value = mean_loss(k)
                ratio = (current - value) / max(float(self.costs_[g]), eps)
                if best is None or ratio > best[0]:
                    best = (ratio, g, value)
            order.append(best[1])
            keep[self.groups_[best[1]]] = True
            current = best[2]
        return order

    # --------------------------------------------------------------- decisions
    def _features(self, S: Iterable[int]) -> np.ndarray:
        parts = [self.groups_[g] for g in S]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def neighbours(self, x: np.ndarray, S: Sequence[int], rows: np.ndarray) -> np.ndarray:
        """The ``n_neighbors`` rows (of ``rows``) nearest to ``x`` on the features of ``S``
        (standardised, summed group by group; NaN components ignored; ties: the lower
        row), sorted; all of ``rows`` when ``S`` is empty. O(|rows| |F_S|)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(rows.size, dtype=np.int64)
        count = kernels.neighbours(self._XT, rows, np.asarray(x, dtype=np.float64),
                                   self._gfeat, self._goff, self.scale_, self._ins(S),
                                   int(self.n_neighbors), np.empty(rows.size),
                                   np.empty(rows.size), out)
        return out[:count]

    def _per_set_choice(self, S: tuple[int, ...], room: float | None,
                        rows: np.ndarray) -> int | None:
        """The per-set rule over ``rows``: largest mean loss drop per unit cost among the
        pool groups that fit (ties: lower id); then the per-set order beyond the pool."""
        table = self.table_
        mask = table.mask_of(S)
        fits = [b for b in range(table.pool.size) if not mask >> b & 1 and
                (room is None or table.mask_cost[1 << b] <= room + 1e-12 * max(1, abs(room)))]
        if fits:
            masks = np.array([mask] + [mask | 1 << b for b in fits], dtype=np.int64)
            means = table.column_means(masks, None if rows is self.rows_ else rows)
            eps = 1e-9 * max(float(self.costs_.max()), 1.0)
            ratio = (means[0] - means[1:]) / np.maximum(table.mask_cost[masks[1:]], eps)
            best = max(range(len(fits)), key=lambda j: (ratio[j], -table.pool[fits[j]]))
            return int(table.pool[fits[best]])
        have = set(S)
        for g in (self.sequence_ or ()):
            if g not in have and (room is None or self.costs_[g] <= room + 1e-12 * max(
                    1, abs(room))):
                return int(g)
        return None

    def decide(self, x: np.ndarray, computed: Iterable[int], *, max_cost: float | None = None,
               exchange_rate: float | None = None, every_missing: bool = False) -> Decision:
        """The next group for the example ``x`` (d,; NaN outside the computed groups);
        ``every_missing``: the candidates include the missing groups over the cap too
        (``within_max_cost`` False)."""
        self._check_fitted()
        S = tuple(sorted({int(g) for g in computed}))
        blind = not self.per_example_ or not any(self._goff[g + 1] > self._goff[g] for g in S)
        if not blind:
            return self._decide(np.asarray(x, dtype=np.float64), S, max_cost, exchange_rate,
                                self.rows_, self.per_example_, self.fallback_, every_missing)
        # every window row is a neighbour: the decision does not read x, kept per set
        key = (S, max_cost, exchange_rate, every_missing, self.per_example_)
        hit = self._blind.get(key)
        if hit is None:
            hit = self._decide(np.asarray(x, dtype=np.float64), S, max_cost, exchange_rate,
                               self.rows_, self.per_example_, self.fallback_, every_missing)
            if len(self._blind) >= BLIND_DECISIONS:
                self._blind.clear()
            self._blind[key] = hit
        return hit

    def _check_fitted(self) -> None:
        if not hasattr(self, "table_"):
            raise ValueError("this policy is not fitted yet: call fit() first")

    def _decide(self, x: np.ndarray, S: tuple[int, ...], max_cost: float | None,
                exchange_rate: float | None, rows: np.ndarray, per_example: bool,
                fallback: Fallback | None, every_missing: bool = False) -> Decision:
        table, costs = self.table_, self.costs_
        room, missing = missing_within(costs, S, max_cost)
        if not missing and not every_missing:
            return Decision(None, None, None, None, NOTHING_FITS, S, per_example)
        ins = self._ins(S)
        near = np.empty(rows.size, dtype=np.int64)
        if per_example:
            count = kernels.neighbours(self._XT, rows, x, self._gfeat, self._goff, self.scale_,
                                       ins, int(self.n_neighbors), np.empty(rows.size),
                                       np.empty(rows.size), near)
        else:
            near[:], count = rows, rows.size
        gains = np.empty(table.pool.size)
        kind, g, plan = kernels.decide_core(
            costs, self._bit_of, table.pool, table.values, table.mask_cost, self._sequence,
            ins, near, count, self._colmean if rows is self.rows_ else
            kernels.column_means(table.values, rows),
            np.nan if max_cost is None else float(max_cost),
            np.nan if exchange_rate is None else float(exchange_rate), per_example,
            fallback is not None, gains)
        near = near[:count]
        candidates = self._gain_candidates(S, missing, gains, every_missing)
        if kind == kernels.STOP_NOTHING:
            return Decision(None, None, None, None, NOTHING_FITS, S, per_example,
                            candidates if missing else ())
        if kind == kernels.STOP_NOT_WORTH:
            return Decision(None, None, None, None, NOT_WORTH, S, per_example, candidates)
        mask = table.mask_of(S)
        if kind == kernels.FALLBACK:
            g = fallback(S, max_cost)
            if g is None:
                return Decision(None, None, None, None, NOTHING_FITS, S, per_example,
                                candidates)
            plan = table.mask_of((*S, g))
        if plan == mask:   # g outside the pool: no held-out figure
            return Decision(int(g), float(costs[g]), None, None, None, tuple(sorted(
                (*S, g))), per_example, candidates)
        gain, interval = _mean_interval(table.values[mask, near] - table.values[plan, near])
        plan_groups = tuple(sorted(set(S) | set(table.groups_of(plan))))
        return Decision(int(g), float(costs[g]), gain, interval, None, plan_groups,
                        per_example, candidates)

    def _gain_candidates(self, S: tuple[int, ...], missing: list[int], gains: np.ndarray,
                         every_missing: bool) -> tuple[Candidate, ...]:
        """The missing groups (and with ``every_missing`` those over the cap) with the
        kernel's one-step gains (None outside the pool), by group id. O(J)."""
        fits = set(missing)
        groups = [g for g in range(len(self.groups_)) if g not in S] if every_missing \
            else missing
        out = []
        for g in groups:
            cost, b = float(self.costs_[g]), int(self._bit_of[g])
            gain = None if b < 0 else float(gains[b])
            ratio = None if gain is None or cost <= 0 else gain / cost
            out.append(Candidate(g, cost, gain, ratio, g in fits))
        return tuple(out)

    def _candidates(self, mask: int, missing: list[int], near: np.ndarray
                    ) -> tuple[Candidate, ...]:
        table = self.table_
        where = {int(g): b for b, g in enumerate(table.pool)}
        out = []
        base = table.values[mask, near].mean()
        for g in missing:
            cost = float(self.costs_[g])
            b = where.get(g)
            if b is None:
                out.append(Candidate(g, cost, None, None))
                continue
            gain = float(base - table.values[mask | 1 << b, near].mean())
            out.append(Candidate(g, cost, gain, gain / cost if cost > 0 else None))
        return tuple(out)

    # --------------------------------------------------------------------- gate
    def episode(self, x: np.ndarray, *, max_cost: float | None,
                exchange_rate: float | None = None, rows: np.ndarray | None = None,
                per_example: bool | None = None, fallback: Fallback | None = None,
                use_fallback: bool = True) -> list[int]:
        """The groups acquired, in order, for ``x`` from the empty set until a stop."""
        rows = self.rows_ if rows is None else rows
        per_example = self.per_example_ if per_example is None else per_example
        fallback = (self.fallback_ if use_fallback else None) if fallback is None else fallback
        S: tuple[int, ...] = ()
        order = []
        while True:
            d = self._decide(x, S, max_cost, exchange_rate, rows, per_example, fallback)
            if d.group is None:
                return order
            order.append(d.group)
            S = tuple(sorted((*S, d.group)))

    def _run_gate(self) -> dict:
        table = self.table_
        rng = np.random.default_rng(int(self.random_state))
        perm = rng.permutation(table.n_rows)
        half = table.n_rows // 2
        folds = (perm[:half], perm[half:])
        limit = None if self.gate_rows is None else max(1, int(self.gate_rows) // 2)
        ours, theirs = np.zeros(table.n_rows), np.zeros(table.n_rows)
        scored = np.zeros(table.n_rows, dtype=bool)
        total = float(table.mask_cost[table.full])
        for A, B in (folds, folds[::-1]):
            A, B = np.sort(A), np.sort(B[:limit])  # (the episodes' rows: a random subset)
            scored[B] = True
            for f in self.gate_caps:
                cap = float(f) * total
                final = np.empty(B.size, dtype=np.int64)
                for per_example in (False, True):  # the per-set path is the same for all
                    targets = B if per_example else B[:1]
                    kernels.gate_episodes(
                        self._XT, self.scale_, self._gfeat, self._goff, self.costs_,
                        self._bit_of, table.pool, table.values, table.mask_cost,
                        self._sequence, int(self.n_neighbors), A, targets, cap, per_example,
                        final)
                    got = table.values[final if per_example else final[0], B]
                    if per_example:
                        ours[B] += got
                    else:
                        theirs[B] += got
        ours, theirs = ours[scored], theirs[scored]
        diff = (ours - theirs) / len(self.gate_caps)
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("inf")
        return {"per_example": bool(diff.mean() < -float(self.gate_z) * se),
                "per_example_loss": float(ours.mean() / len(self.gate_caps)),
                "per_set_loss": float(theirs.mean() / len(self.gate_caps)),
                "difference": float(diff.mean()), "stderr": se, "rows": int(diff.size)}


__all__ = ["NOTHING_FITS", "NOT_WORTH", "Candidate", "ConditionedAcquisition", "Decision"]

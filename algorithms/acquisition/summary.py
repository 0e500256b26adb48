r"""What a fitted :class:`~algorithms.acquisition.policy.ConditionedAcquisition` does, told on
its own held-out window: episodes from the empty set at a few exchange rates.

Episodes are cross-fitted with the gate's halves ``A``, ``B`` (the same permutation of
``random_state``): for each row ``i`` of ``B`` (at most ``rows / 2`` of each half, drawn at
random), the policy restricted to ``A`` (``A``'s neighbours, ``A``'s per-set means; the
gate's verdict and the ``fallback`` as fitted) starts from ``S = {}`` and acquires
``decide(x_i, S, exchange_rate=lam)`` until it stops; then the halves swap. So no row
informs its own choices, and the loss at the stop, ``L[S_end, i]`` of the loss table, is
a held-out figure (the predictor never saw the window). Per exchange rate ``lam``:

* ``first_choice`` / ``second_choice``: how many episodes bought each group first /
  second (``group`` None: stopped before), shares of the episodes run;
* ``mean_cost``: the mean of ``sum_{g in S_end} c_g`` (groups beyond the pool included);
  ``mean_groups``: the mean ``|S_end|``;
* ``loss``: the mean of ``L[S_end, i]`` (the pool's groups of ``S_end``: groups beyond
  the pool are not in the table); ``metric``: for 0/1 targets with log-loss the accuracy
  (row ``i`` is right when ``p_i(y_i) > 1/2``, i.e. ``L < ln 2``; exactly 1/2 counts half),
  for squared error the explained variance ``1 - mean L / var(y)`` over the same rows,
  else None.

The default exchange rates are ``lam_0 * (0.1, 0.3, 1, 3)`` rounded to three significant
digits, with ``lam_0 = (mean L[{}] - mean L[pool]) / c(pool)`` over the window (the
average loss drop per unit cost of computing every pool group; at ``lam_0`` the whole pool
just pays), and None (no exchange rate: every group is bought, the order is still the
policy's). Every group free: None only.

Cost: ``R |rates|`` episodes of at most ``J`` decisions (``R`` rows), each
O(n/2 |F_S| + 2^(P-|s|) k) (k-NN over a half, the superset search), plus two
``column_means`` (O(2^P n)); decisions that read no value of the example (the first one,
and every one of a per-set policy) are kept per set, as the policy does.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from algorithms.acquisition import kernels
from algorithms.acquisition.policy import ConditionedAcquisition

MULTIPLIERS = (0.1, 0.3, 1.0, 3.0)
SUMMARY_ROWS = 600
LN2 = math.log(2.0)


def unit_rate(policy: ConditionedAcquisition) -> float | None:
    """``lam_0`` (module docstring; where the pool lowers nothing, the loss of the empty
    set per unit of the pool's cost), None when every pool group is free. O(n)."""
    table = policy.table_
    total = float(table.mask_cost[table.full])
    if not total > 0:
        return None
    empty, full = (float(table.values[m].mean()) for m in (0, table.full))
    unit = (empty - full) / total
    if not unit > 0 or not math.isfinite(unit):
        unit = max(abs(empty), 1e-12) / total
    return unit


def default_rates(policy: ConditionedAcquisition) -> list[float | None]:
    """``lam_0`` times :data:`MULTIPLIERS`, three significant digits, then None. O(n)."""
    unit = unit_rate(policy)
    return [None] if unit is None else [float(f"{m * unit:.3g}") for m in MULTIPLIERS] + [None]


def metric_name(policy: ConditionedAcquisition) -> str | None:
    """"accuracy" (log-loss, 0/1 targets), "explained_variance" (squared error), or None."""
    table = policy.table_
    if table.loss == "squared":
        return "explained_variance"
    return "accuracy" if np.all((table.y == 0) | (table.y == 1)) else None


def metric_of(name: str | None, losses: np.ndarray, y: np.ndarray) -> float | None:
    """The metric of per-row losses (module docstring). O(n)."""
    if name == "accuracy":
        tie = np.isclose(losses, LN2, rtol=0.0, atol=1e-12)
        return float(np.mean(np.where(tie, 0.5, losses < LN2)))
    if name == "explained_variance":
        var = float(np.var(y))
        return 0.0 if var <= 0 else 1.0 - float(np.mean(losses)) / var
    return None


def halves(policy: ConditionedAcquisition, rows: int = SUMMARY_ROWS
           ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(A, B), (B', A')]``: the gate's halves of the window, each with the rows of the
    other half that run episodes (at most ``rows / 2``, the first of the permutation),
    sorted. O(n)."""
    n = policy.table_.n_rows
    perm = np.random.default_rng(int(policy.random_state)).permutation(n)
    folds = (perm[: n // 2], perm[n // 2:])
    limit = max(1, int(rows) // 2)
    return [(np.sort(A), np.sort(B[:limit])) for A, B in (folds, folds[::-1])]


def restricted(policy: ConditionedAcquisition, rows: np.ndarray) -> ConditionedAcquisition:
    """A shallow copy of the fitted ``policy`` whose window is ``rows``: its neighbours and
    per-set means come from those rows only (the table, scales, gate and fallback are
    shared). O(2^P |rows|)."""
    view = copy.copy(policy)
    view.rows_ = np.asarray(rows, dtype=np.int64)
    view._colmean = kernels.column_means(policy.table_.values, view.rows_)
    view._blind = {}
    return view


def _shares(counter: Counter, total: int) -> list[dict]:
    """``[{group, count, share}]``, most chosen first (ties: lower id, None last)."""
    keys = sorted(counter, key=lambda g: (-counter[g], g is None, -1 if g is None else g))
    return [{"group": g, "count": int(counter[g]), "share": counter[g] / total}
            for g in keys]


def summarize(policy: ConditionedAcquisition, *,
              exchange_rates: Sequence[float | None] | None = None,
              rows: int = SUMMARY_ROWS, pause: Callable[[], None] | None = None) -> dict:
    """The summary of the fitted ``policy`` (module docstring): ``per_example`` (the
    gate's verdict), ``gate``, ``rows`` (episodes per rate), ``window_rows``, ``pool``,
    ``loss``, ``metric``, ``unit_rate`` (``lam_0``) and one entry per exchange rate.
    ``pause()`` is called before each row's episodes (a caller's yield point)."""
    policy._check_fitted()
    table = policy.table_
    rates = default_rates(policy) if exchange_rates is None else list(exchange_rates)
    for lam in rates:
        if lam is not None and not (math.isfinite(lam) and lam >= 0):
            raise ValueError(f"exchange rates must be finite and >= 0, got {lam!r}")
    metric = metric_name(policy)
    firsts = [Counter() for _ in rates]
    seconds = [Counter() for _ in rates]
    cost = np.zeros(len(rates))
    size = np.zeros(len(rates))
    final: list[list[float]] = [[] for _ in rates]
    ran: list[int] = []
    for A, B in halves(policy, rows):
        view = restricted(policy, A)
        for i in B:
            if pause is not None:
                pause()
            ran.append(int(i))
            x = table.X[i]
            for r, lam in enumerate(rates):
                S: tuple[int, ...] = ()
                path: list[int] = []
                while True:
                    d = view.decide(x, S, exchange_rate=lam)
                    if d.group is None:
                        break
                    path.append(d.group)
                    S = tuple(sorted((*S, d.group)))
                firsts[r][path[0] if path else None] += 1
                seconds[r][path[1] if len(path) > 1 else None] += 1
                cost[r] += float(policy.costs_[list(S)].sum()) if S else 0.0
                size[r] += len(S)
                final[r].append(float(table.values[table.mask_of(S), i]))
    n = len(ran)
    y = table.y[ran]
    out = []
    for r, lam in enumerate(rates):
        losses = np.asarray(final[r])
        out.append({"exchange_rate": lam, "mean_cost": float(cost[r] / n),
                    "mean_groups": float(size[r] / n), "loss": float(losses.mean()),
                    "metric": metric_of(metric, losses, y),
                    "first_choice": _shares(firsts[r], n),
                    "second_choice": _shares(seconds[r], n)})
    unit = unit_rate(policy)
    return {"per_example": bool(policy.per_example_), "gate": policy.gate_, "rows": n,
            "window_rows": int(table.n_rows), "pool": [int(g) for g in table.pool],
            "loss": table.loss, "metric": metric,
            "unit_rate": unit, "exchange_rates": out}


__all__ = ["MULTIPLIERS", "SUMMARY_ROWS", "default_rates", "halves", "metric_name",
           "metric_of", "restricted", "summarize", "unit_rate"]

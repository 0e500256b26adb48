"""Baseline: cost-weighted Group Lasso path order (Hu et al.'s comparison), from statistics.

Groups are whitened (``β_g = L_gᵀ w_g`` with ``L_g L_gᵀ = C_gg``), then along a decreasing
``α`` grid we solve ``min_β ½ βᵀC̃β − b̃ᵀβ + α Σ_g c(g) ‖β_g‖₂`` (``C̃``, ``b̃`` the whitened
statistics) and order groups by the first ``α`` at which they are non-zero (ties: larger
``‖β_g‖/c(g)`` first; groups that never enter follow by ``‖b̃_g‖/c(g)``). The quadratic is
written as least squares on pseudo-data ``A`` (m, m) with ``AᵀA = C̃`` and ``Aᵀỹ = b̃`` so a
well-kept solver can be used: celer's ``GroupLasso(weights=c)`` (optional dependency,
imported lazily; ``pip install celer``). Zero-cost groups get the weight ``1e-6·mean(c)``
(celer requires positive weights). Cost: an eigendecomposition O(m³) plus the path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from algorithms.anytime.greedy import normalize_groups


def _whitened_pseudo_data(C: np.ndarray, b: np.ndarray, groups: Sequence[np.ndarray]
                          ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Pseudo-data ``A``, ``ỹ`` of the group-whitened problem and the new group positions."""
    perm = np.concatenate(groups)
    Cp, bp = C[np.ix_(perm, perm)], b[perm]
    m = len(perm)
    whiten = np.zeros((m, m))
    positions, start = [], 0
    for g in groups:
        d = len(g)
        vals, vecs = np.linalg.eigh(Cp[start:start + d, start:start + d])
        keep = vals > 1e-10 * max(vals.max(), 1e-300)
        inv_sqrt = np.where(keep, 1.0 / np.sqrt(np.where(keep, vals, 1.0)), 0.0)
        whiten[start:start + d, start:start + d] = (vecs * inv_sqrt) @ vecs.T
        positions.append(np.arange(start, start + d))
        start += d
    Ct = whiten @ Cp @ whiten
    bt = whiten @ bp
    vals, vecs = np.linalg.eigh(0.5 * (Ct + Ct.T))
    keep = vals > 1e-12 * max(vals.max(), 1e-300)
    vals, vecs = vals[keep], vecs[:, keep]
    A = np.sqrt(vals)[:, None] * vecs.T
    y = (vecs.T @ bt) / np.sqrt(vals)
    return A, y, positions


def group_lasso_order(C: np.ndarray, b: np.ndarray, groups: Sequence[Sequence[int]], costs, *,
                      n_alphas: int = 60, eps: float = 1e-4, tol: float = 1e-8) -> np.ndarray:
    """Order of entry of ``groups`` along the cost-weighted Group Lasso path, (J,) int64.

    ``C`` (D, D), ``b`` (D,) standardized statistics; ``n_alphas`` geometric grid points from
    ``α_max = max_g ‖b̃_g‖ / c(g)`` down to ``eps·α_max``, warm-started.
    """
    try:
        from celer import GroupLasso
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the Group Lasso baseline needs celer: pip install celer") from exc
    groups, costs = normalize_groups(groups, costs, len(b))
    positive = costs[costs > 0]
    weights = np.where(costs > 0, costs, 1e-6 * (positive.mean() if len(positive) else 1.0))
    A, y, positions = _whitened_pseudo_data(C, b, groups)
    rows = A.shape[0]
    grad = A.T @ y
    static = np.array([np.linalg.norm(grad[p]) for p in positions]) / weights
    alpha_max = float(static.max())
    J = len(groups)
    entry = np.full(J, np.iinfo(np.int64).max)
    strength = np.zeros(J)
    if alpha_max > 0:
        scale = np.sqrt(rows)
        model = GroupLasso(groups=[p.tolist() for p in positions], alpha=alpha_max,
                           weights=weights, fit_intercept=False, warm_start=True, tol=tol,
                           max_iter=200)
        for step, alpha in enumerate(alpha_max * np.geomspace(1.0, eps, n_alphas)):
            model.alpha = float(alpha)
            model.fit(scale * A, scale * y)
            norms = np.array([np.linalg.norm(model.coef_[p]) for p in positions])
            new = (norms > 0) & (entry == np.iinfo(np.int64).max)
            entry[new] = step
            strength[new] = norms[new] / weights[new]
            if (entry < np.iinfo(np.int64).max).all():
                break
    # lexsort: last key is primary
    return np.lexsort((-static, -strength, entry)).astype(np.int64)

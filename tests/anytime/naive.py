"""Slow plain-numpy oracles for the anytime tests (direct solves, exhaustive search)."""

from __future__ import annotations

import itertools

import numpy as np


def standardized(X: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``C = X̃ᵀX̃/n + αI``, ``b = X̃ᵀỹ/n`` from data directly."""
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    n = len(y)
    return Xs.T @ Xs / n + alpha * np.eye(X.shape[1]), Xs.T @ ys / n


def union(groups, subset) -> np.ndarray:
    return (np.concatenate([groups[g] for g in subset]) if len(subset)
            else np.zeros(0, dtype=np.int64))


def objective(C, b, groups, subset) -> float:
    """``F(S) = ½ b_Sᵀ C_S⁻¹ b_S`` by a direct solve."""
    idx = union(groups, subset)
    if len(idx) == 0:
        return 0.0
    return 0.5 * float(b[idx] @ np.linalg.solve(C[np.ix_(idx, idx)], b[idx]))


def gradient(C, b, groups, subset) -> np.ndarray:
    """``r = b − C_{:,S} w(S)`` (D,)."""
    idx = union(groups, subset)
    if len(idx) == 0:
        return b.copy()
    w = np.linalg.solve(C[np.ix_(idx, idx)], b[idx])
    return b - C[:, idx] @ w


def criterion(method, C, b, groups, subset, g) -> float:
    """Unscaled criterion of group ``g`` given ``subset`` (no division by cost)."""
    r = gradient(C, b, groups, subset)[groups[g]]
    if method == "cs-g-omp":
        return float(r @ np.linalg.solve(C[np.ix_(groups[g], groups[g])], r))
    if method == "cs-g-fr":
        return objective(C, b, groups, list(subset) + [g]) - objective(C, b, groups, subset)
    if method == "no-whiten":
        return float(r @ r)
    if method == "single":
        return float(np.max(r ** 2))
    raise ValueError(method)


def greedy_order(method, C, b, groups, costs) -> list[int]:
    """Greedy sequence by direct solves per candidate and step."""
    order: list[int] = []
    left = set(range(len(groups)))
    while left:
        best = max(sorted(left), key=lambda g: criterion(method, C, b, groups, order, g)
                   / costs[g])
        order.append(best)
        left.remove(best)
    return order


def all_objectives(C, b, groups) -> dict[frozenset, float]:
    """F of every subset of groups (2^J solves)."""
    J = len(groups)
    return {frozenset(s): objective(C, b, groups, s)
            for r in range(J + 1) for s in itertools.combinations(range(J), r)}


def best_within(values: dict[frozenset, float], costs, budget: float) -> float:
    """Exhaustive optimum ``max {F(S) : c(S) <= budget}``."""
    return max(v for s, v in values.items() if sum(costs[g] for g in s) <= budget + 1e-12)


def submodularity_ratio(values: dict[frozenset, float], n_groups: int) -> float:
    """``γ = min_{L, T∩L=∅} Σ_{g∈T} [F(L+g) − F(L)] / [F(L∪T) − F(L)]`` (Das and Kempe)."""
    gamma = 1.0
    everything = frozenset(range(n_groups))
    for L in values:
        rest = sorted(everything - L)
        for r in range(2, len(rest) + 1):
            for T in itertools.combinations(rest, r):
                joint = values[L | frozenset(T)] - values[L]
                if joint <= 1e-12:
                    continue
                single = sum(values[L | {g}] - values[L] for g in T)
                gamma = min(gamma, single / joint)
    return gamma


def spectral_gamma(C, groups) -> float:
    """``λ_min(D^{-1/2} C D^{-1/2})`` with ``D = blockdiag(C_gg)`` (groups whitened)."""
    idx = union(groups, range(len(groups)))
    Cp = C[np.ix_(idx, idx)]
    whiten = np.zeros_like(Cp)
    start = 0
    for g in groups:
        d = len(g)
        vals, vecs = np.linalg.eigh(Cp[start:start + d, start:start + d])
        whiten[start:start + d, start:start + d] = (vecs / np.sqrt(vals)) @ vecs.T
        start += d
    return float(np.linalg.eigvalsh(whiten @ Cp @ whiten).min())

"""Slow plain-numpy oracle: exact CART over all bin thresholds, and GBFS boosting with it.

No histograms, no subtraction trick, no numba: every candidate split ``code <= b`` of every
node is evaluated by masking the node's rows and summing directly. Same growth order
(level by level, left to right), same tie rule (first wins unless beaten by > REL_TIE) and the same
penalized score as ``algorithms.gbfs._tree``. Feature groups: a split on ``f`` makes every
feature of ``f``'s group free (penalty 0) for the rest of the tree and all later trees.
Missing values (code 255): every threshold is tried with the node's missing rows on the
right, then on the left; with none, missing values go to the larger child. Masked copies:
copy ``k`` of row ``i`` drops each group with probability ``p_ik`` (the estimator's draw,
re-derived here row by row).
"""

from __future__ import annotations

import numpy as np

from algorithms.gbfs import binning

REL_TOL = 1e-12
REL_TIE = 1e-10
MISSING = 255


def naive_tree(codes, grad, hess, rows, n_bins, penalty, max_depth, min_leaf, force_root,
               min_weight=2e-3, lam=0.0, newton=False, min_child=0.0, groups=None):
    """Return (feature, threshold, value, default_left) heap arrays; ``penalty`` is updated
    in place: after a
    split on ``f`` every feature of the group (in ``groups``, a list of lists) holding ``f``
    gets penalty 0 (only ``f`` itself without ``groups``).

    Split denominators are ``count + lam`` (or ``sum hess + lam`` with ``newton``, where both
    children also need ``sum hess >= min_child``); leaves are ``sum g / (sum hess + lam)``.
    """
    n_nodes = 2 ** (max_depth + 1) - 1
    feature = np.full(n_nodes, -1, dtype=np.int32)
    threshold = np.zeros(n_nodes, dtype=np.int32)
    value = np.zeros(n_nodes, dtype=np.float64)
    default_left = np.zeros(n_nodes, dtype=np.uint8)
    members: dict[int, np.ndarray] = {0: np.asarray(rows)}
    value[0] = _leaf(grad[rows], hess[rows], lam)
    for level in range(max_depth):
        for j in range(2**level - 1, 2 ** (level + 1) - 1):
            if j not in members or len(members[j]) < 2 * min_leaf:
                continue
            if hess[members[j]].sum() < min_weight:
                continue
            idx = members[j]
            g = grad[idx]
            h = hess[idx]
            total, count = g.sum(), len(idx)
            denom = h.sum() if newton else count
            best = (-np.inf, 0.0, -1, -1, False)
            tie = REL_TIE * np.sum(g * g)
            for f in range(codes.shape[1]):
                missing = codes[idx, f] == MISSING
                sides = (False, True) if missing.any() else (False,)
                for b, side in ((b, side) for b in range(n_bins[f]) for side in sides):
                    left = (codes[idx, f] <= b) | (missing & side)
                    n_left = int(left.sum())
                    n_right = count - n_left
                    if n_left < min_leaf or n_right < min_leaf:
                        continue
                    if newton:
                        d_left, d_right = h[left].sum(), h[~left].sum()
                        if d_left < min_child or d_right < min_child:
                            continue
                    else:
                        d_left, d_right = n_left, n_right
                    gain = 0.5 * (g[left].sum() ** 2 / (d_left + lam)
                                  + g[~left].sum() ** 2 / (d_right + lam)
                                  - total**2 / (denom + lam))
                    if gain - penalty[f] > best[0] + tie:
                        to_left = side if missing.any() else n_left >= n_right
                        best = (gain - penalty[f], gain, f, b, to_left)
            score, gain, f, b, to_left = best
            tol = REL_TOL * np.sum(g * g)
            if f < 0 or not (score > tol or (force_root and j == 0 and gain > tol)):
                continue
            feature[j], threshold[j], default_left[j] = f, b, to_left
            for group in groups if groups is not None else [[f]]:
                if f in group:
                    penalty[group] = 0.0
            left = (codes[idx, f] <= b) | ((codes[idx, f] == MISSING) & to_left)
            members[2 * j + 1], members[2 * j + 2] = idx[left], idx[~left]
            w = hess[idx]
            value[2 * j + 1] = _leaf(g[left], w[left], lam)
            value[2 * j + 2] = _leaf(g[~left], w[~left], lam)
    return feature, threshold, value, default_left


def masked_codes(codes, groups, copies, mask_rate, random_state):
    """The rows followed by ``copies`` masked copies, drawn as ``GBFS._masked_rows`` draws:
    one rate per copied row, then one uniform per (copied row, group)."""
    n = codes.shape[0]
    rng = np.random.default_rng([0 if random_state is None else random_state, 0x6D61736B])
    rates = rng.random((copies * n, 1)) if mask_rate is None else None
    draws = rng.random((copies * n, len(groups)))
    out = [codes]
    for k in range(copies):
        block = codes.copy()
        for i in range(n):
            rate = mask_rate if rates is None else rates[k * n + i, 0]
            for g, members in enumerate(groups):
                if draws[k * n + i, g] < rate:
                    block[i, members] = MISSING
        out.append(block)
    return np.concatenate(out)


def naive_gbfs(X, y, *, loss="logistic", n_estimators=10, learning_rate=0.1, max_depth=3,
               feature_penalty=0.0, costs=None, max_bins=255, min_samples_leaf=1,
               leaf_values="newton",
               min_split_hessian=2e-3, reg_lambda=0.0, split_gain="gradient",
               min_child_hessian=1e-3, groups=None, group_costs=None, masked_copies=0,
               mask_rate=0.5, random_state=None, default_lefts=None):
    """Plain gradient boosting with ``naive_tree``; returns (features, thresholds, values, F)
    with F the scores of the unmasked rows (``default_lefts``, a list, gets each tree's).

    ``y`` is 0/1 for the logistic loss. Bins come from ``algorithms.gbfs.binning``. With
    ``groups`` the penalty of ``f`` is ``feature_penalty * group_costs[g]`` for the group
    ``g`` holding it. ``masked_copies`` > 0 boosts on ``masked_codes`` (a number
    ``feature_penalty`` only; no subsample).
    """
    edges, offsets = binning.fit_bin_edges(X, max_bins)
    codes = binning.apply_bins(X, edges, offsets)
    n = codes.shape[0]
    if masked_copies:
        layout = groups if groups is not None else [[f] for f in range(X.shape[1])]
        codes = masked_codes(codes, layout, masked_copies, mask_rate, random_state)
        y = np.tile(np.asarray(y, dtype=np.float64), masked_copies + 1)
    n_bins = np.diff(offsets) + 1
    y = np.asarray(y, dtype=np.float64)
    if loss == "logistic":
        p = y.mean()
        scores = np.full(len(y), np.log(p / (1 - p)))
    else:
        scores = np.full(len(y), y.mean())
    penalty = feature_penalty * (np.ones(X.shape[1]) if costs is None
                                 else np.asarray(costs, float))
    if groups is not None:
        group_costs = np.ones(len(groups)) if group_costs is None else group_costs
        penalty = np.zeros(X.shape[1])
        for group, cost in zip(groups, group_costs, strict=True):
            penalty[group] = feature_penalty * cost
    used = False
    trees = []
    for _ in range(n_estimators):
        grad = y - 1.0 / (1.0 + np.exp(-scores)) if loss == "logistic" else y - scores
        p = 1.0 / (1.0 + np.exp(-scores))
        newton = loss == "logistic" and leaf_values == "newton"
        hess = p * (1.0 - p) if newton else np.ones(len(y))
        tree = naive_tree(codes, grad, hess, np.arange(len(y)), n_bins, penalty, max_depth,
                          min_samples_leaf, not used, min_split_hessian, reg_lambda,
                          split_gain == "newton", min_child_hessian, groups)
        used = used or bool(np.any(tree[0] >= 0))
        trees.append(tree)
        scores = scores + learning_rate * _leaf_values(codes, *tree)
    stack = [np.array([t[k] for t in trees]) for k in range(4)]
    if default_lefts is not None:
        default_lefts.append(stack[3])
    return stack[0], stack[1], stack[2], scores[:n]


def _leaf(g, w, lam=0.0):
    return g.sum() / (w.sum() + lam) if w.sum() + lam > 1e-150 else 0.0


def _leaf_values(codes, feature, threshold, value, default_left):
    out = np.empty(codes.shape[0])
    for i in range(codes.shape[0]):
        j = 0
        while feature[j] >= 0:
            c = codes[i, feature[j]]
            left = c <= threshold[j] or (c == MISSING and default_left[j])
            j = 2 * j + 1 if left else 2 * j + 2
        out[i] = value[j]
    return out

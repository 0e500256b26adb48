"""Numba kernels: one histogram regression tree with the GBFS feature penalty, and prediction.

A tree of depth ``D`` is stored as a complete binary heap of ``2^(D+1) - 1`` nodes: node
``j`` has children ``2j + 1`` (left, ``code <= threshold``) and ``2j + 2``; ``feature[j] ==
-1`` marks a leaf (or an unreached slot). ``value[j] = sum g_i / sum w_i`` over the node's
rows: the mean negative gradient for ``w = 1``, a Newton (TreeBoost) step for ``w = l''``.
Kernels trust their input (validated by :mod:`algorithms.gbfs.estimator`).

Split score (the decrease of the paper's Eq. 14 objective, see ``estimator`` docs)::

    score(f, b) = 1/2 (G_L^2 / n_L + G_R^2 / n_R - G^2 / n) - penalty[f]

where ``G`` sums the negative gradients ``g_i`` of the node's rows and ``penalty[f] =
mu c_g`` (``mu``: the estimator's ``feature_penalty``) while no feature of ``f``'s group
``g`` is used by an earlier tree or by the nodes
of this tree already split (``phi_g = 1``), else 0 (singleton groups: ``mu c_f phi_f``, the
paper). Options (estimator's ``reg_lambda`` / ``split_gain``): every denominator ``n``
becomes ``n + lam``, or ``H + lam`` with the Newton gain (``H`` = sum of ``hess`` over the
rows, histogrammed alongside ``g``); leaves are then ``G / (W + lam)``.
``lam = 0`` with the plain gain runs exactly the paper's arithmetic. Growth is level by
level, nodes left to right; the sibling with fewer rows gets a histogram, the other is
``parent - sibling`` (subtraction trick).

Missing values (code ``MISSING``: NaN, or a feature of a group the row does not have) get
a histogram bin of their own (index ``n_bins[f]``), and every split learns a *default
direction*, as XGBoost's sparsity-aware split finding does: each threshold ``b`` is scored
twice, with the missing rows sent right (``L = rows with code <= b``) and sent left
(``L`` plus the missing rows), and the better is kept (right first, so left must win by
more than the tie tolerance). ``b = B_f - 1`` (every present row left, the missing rows
right) is a split on missingness itself. A node whose rows have no missing value for the
chosen feature sends missing values to its larger child. Without missing values the
candidates, and so the trees, are exactly the paper's.
Cost per tree: O(n d D) to histogram plus O(2^D d B) to scan; no Python in the loop.
The kernels release the GIL (``nogil``): a fit in a worker thread never stalls the service's
event loop for longer than the Python between two kernel calls.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.gbfs.binning import MISSING

REL_TOL = 1e-12  # a split must remove more than REL_TOL * sum_{i in node} g_i^2
REL_TIE = 1e-10  # scores this close (relative to sum g^2) tie: lowest feature, then bin


@njit(cache=True, nogil=True)
def _histogram(codes, grad, hess, rows, start, end, hist_sum, hist_cnt, hist_hess, slot,
               n_bins, with_hess):
    """Fill ``hist_*[slot]`` with per-(feature, bin) sums of ``grad``, counts and (only if
    ``with_hess``) sums of ``hess``; missing codes count in bin ``n_bins[f]``."""
    d = codes.shape[1]
    for f in range(d):
        for b in range(n_bins[f] + 1):
            hist_sum[slot, f, b] = 0.0
            hist_cnt[slot, f, b] = 0
            if with_hess:
                hist_hess[slot, f, b] = 0.0
    for k in range(start, end):
        r = rows[k]
        g = grad[r]
        h = hess[r]
        for f in range(d):
            b = codes[r, f]
            if b == MISSING:
                b = n_bins[f]
            hist_sum[slot, f, b] += g
            hist_cnt[slot, f, b] += 1
            if with_hess:
                hist_hess[slot, f, b] += h


@njit(cache=True, nogil=True)
def _subtract(parent_sum, parent_cnt, parent_hess, pslot, hist_sum, hist_cnt, hist_hess,
              small, large, n_bins, with_hess):
    """``hist[large] = parent[pslot] - hist[small]`` (the sibling subtraction trick)."""
    for f in range(n_bins.shape[0]):
        for b in range(n_bins[f] + 1):
            hist_sum[large, f, b] = parent_sum[pslot, f, b] - hist_sum[small, f, b]
            hist_cnt[large, f, b] = parent_cnt[pslot, f, b] - hist_cnt[small, f, b]
    if with_hess:
        for f in range(n_bins.shape[0]):
            for b in range(n_bins[f] + 1):
                hist_hess[large, f, b] = parent_hess[pslot, f, b] - hist_hess[small, f, b]


@njit(cache=True, nogil=True)
def _best_split(hist_sum, hist_cnt, hist_hess, slot, n_bins, penalty, total, count, weight,
                min_leaf, min_child_weight, lam, newton, tie):
    """Best (score, gain, feature, bin, default_left) of one node by the penalized score.

    Denominators are ``n + lam`` (``newton`` False, the paper's criterion) or ``H + lam``
    (``newton``: sums of ``l''``; each child then also needs ``H >= min_child_weight``;
    ``hist_hess`` is only read then). Each threshold is tried with the node's missing rows
    (bin ``n_bins[f]``) on the right, then on the left (module docstring). A later
    candidate wins only by more than ``tie``, so rounding-level ties go to the lowest
    feature, then bin, then missing-right, whatever the summation order. O(d B).
    """
    best_score = -np.inf
    best_gain = 0.0
    best_f = -1
    best_b = -1
    best_left = False
    parent_den = weight if newton else count
    parent = total * total / (parent_den + lam)
    for f in range(n_bins.shape[0]):
        mb = n_bins[f]
        m_sum = hist_sum[slot, f, mb]
        m_cnt = hist_cnt[slot, f, mb]
        m_den = hist_hess[slot, f, mb] if newton else float(m_cnt)
        left = 0.0
        n_left = 0
        den_left = 0.0
        for b in range(mb):
            if hist_cnt[slot, f, b] == 0 and (n_left > 0 or m_cnt == 0):
                continue  # same partition as bin b - 1, which wins the tie
            left += hist_sum[slot, f, b]
            n_left += hist_cnt[slot, f, b]
            den_left += hist_hess[slot, f, b] if newton else hist_cnt[slot, f, b]
            if count - n_left < min_leaf:
                break  # the right child only shrinks from here, missing rows or not
            for side in range(2 if m_cnt > 0 else 1):
                l_sum = left + m_sum * side
                l_cnt = n_left + m_cnt * side
                l_den = den_left + m_den * side
                r_cnt = count - l_cnt
                if l_cnt < min_leaf or r_cnt < min_leaf:
                    continue
                r_den = parent_den - l_den
                if newton and (l_den < min_child_weight or r_den < min_child_weight):
                    continue
                right = total - l_sum
                gain = 0.5 * (l_sum * l_sum / (l_den + lam) + right * right / (r_den + lam)
                              - parent)
                score = gain - penalty[f]
                if score > best_score + tie:
                    best_score = score
                    best_gain = gain
                    best_f = f
                    best_b = b
                    best_left = side == 1 if m_cnt > 0 else n_left >= count - n_left
    return best_score, best_gain, best_f, best_b, best_left


@njit(cache=True, nogil=True)
def _partition(codes, grad, hess, rows, tmp, start, end, f, b, default_left, stats):
    """Stable in-place partition of ``rows[start:end]`` by ``codes[r, f] <= b`` (missing
    codes: by ``default_left``).

    Returns the split position; ``stats`` gets (G, sum g^2, W) of the left and right part.
    """
    n_left = 0
    n_right = 0
    g_left = 0.0
    g_right = 0.0
    sq_left = 0.0
    sq_right = 0.0
    w_left = 0.0
    w_right = 0.0
    for k in range(start, end):
        r = rows[k]
        g = grad[r]
        c = codes[r, f]
        if c <= b or (c == MISSING and default_left):
            rows[start + n_left] = r
            n_left += 1
            g_left += g
            sq_left += g * g
            w_left += hess[r]
        else:
            tmp[n_right] = r
            n_right += 1
            g_right += g
            sq_right += g * g
            w_right += hess[r]
    for k in range(n_right):
        rows[start + n_left + k] = tmp[k]
    stats[0], stats[1], stats[2] = g_left, sq_left, w_left
    stats[3], stats[4], stats[5] = g_right, sq_right, w_right
    return start + n_left


@njit(cache=True, nogil=True)
def _leaf(total, weight, lam):
    """Leaf value ``G / (W + lam)`` (0 when ``W + lam`` vanishes)."""
    return total / (weight + lam) if weight + lam > 1e-150 else 0.0


@njit(cache=True, nogil=True)
def _grow_tree(codes, grad, hess, rows, n_bins, penalty, max_depth, min_leaf, min_weight,
               force_root, hist_a_sum, hist_a_cnt, hist_b_sum, hist_b_cnt, tmp, lam, newton,
               min_child_weight, hist_a_hess, hist_b_hess, group_of, group_indptr,
               group_members):
    """Grow one penalized regression tree on ``grad`` over ``rows`` (int32, reordered).

    Splits use the score above (with ``lam`` added to every denominator; ``newton`` puts
    the sums of ``hess`` in place of the counts, see ``_best_split``); leaf values are
    ``sum g / (sum hess + lam)`` (``hess`` float64, n). A node splits only if it has
    ``>= 2 min_leaf`` rows and ``sum hess >= min_weight``.

    ``penalty`` (float64, d) is ``mu c_g phi_g`` and is updated in place: once this tree
    splits on a feature of group ``g``, every member of ``g`` gets penalty 0 (O(|g|) per
    split). Groups are a CSR (members of ``g``: ``group_members[group_indptr[g]:
    group_indptr[g + 1]]``) with ``group_of[f]`` the group of ``f`` (all int64); singleton
    groups give the paper's per-feature rule. ``force_root`` makes the root split whenever it
    removes any squared error (used while the ensemble has no feature). Workspaces:
    ``hist_*`` of shape (2^(D-1), d, B_max + 1) (the ``*_hess`` ones are only touched with
    ``newton``, else any float64 3-D array will do) and ``tmp`` (len(rows),). Returns
    (feature int32, threshold int32, value float64, default_left uint8, gain float64: the
    unpenalized gain of each split), each of length 2^(D+1) - 1.
    """
    n_nodes = 2 ** (max_depth + 1) - 1
    feature = np.full(n_nodes, -1, dtype=np.int32)
    threshold = np.zeros(n_nodes, dtype=np.int32)
    value = np.zeros(n_nodes, dtype=np.float64)
    default_left = np.zeros(n_nodes, dtype=np.uint8)
    split_gain = np.zeros(n_nodes, dtype=np.float64)
    start = np.zeros(n_nodes, dtype=np.int64)
    end = np.zeros(n_nodes, dtype=np.int64)
    total = np.zeros(n_nodes, dtype=np.float64)
    square = np.zeros(n_nodes, dtype=np.float64)
    weight = np.zeros(n_nodes, dtype=np.float64)
    alive = np.zeros(n_nodes, dtype=np.bool_)
    stats = np.zeros(6, dtype=np.float64)
    m = rows.shape[0]
    end[0] = m
    alive[0] = True
    for k in range(m):
        g = grad[rows[k]]
        total[0] += g
        square[0] += g * g
        weight[0] += hess[rows[k]]
    value[0] = _leaf(total[0], weight[0], lam)
    parent_sum, parent_cnt, parent_hess = hist_a_sum, hist_a_cnt, hist_a_hess
    child_sum, child_cnt, child_hess = hist_b_sum, hist_b_cnt, hist_b_hess
    if max_depth > 0 and m >= 2 * min_leaf:
        _histogram(codes, grad, hess, rows, 0, m, parent_sum, parent_cnt, parent_hess, 0,
                   n_bins, newton)
    for level in range(max_depth):
        first = 2**level - 1
        last_level = level + 1 == max_depth
        for j in range(first, 2 * first + 1):
            count = end[j] - start[j]
            if not alive[j] or count < 2 * min_leaf or weight[j] < min_weight:
                continue
            slot = j - first
            score, gain, f, b, to_left = _best_split(
                parent_sum, parent_cnt, parent_hess, slot, n_bins, penalty, total[j], count,
                weight[j], min_leaf, min_child_weight, lam, newton, REL_TIE * square[j])
            tol = REL_TOL * square[j]
            take = score > tol or (force_root and j == 0 and gain > tol)
            if f < 0 or not take:
                continue
            feature[j] = f
            threshold[j] = b
            default_left[j] = 1 if to_left else 0
            split_gain[j] = gain
            grp = group_of[f]
            for k in range(group_indptr[grp], group_indptr[grp + 1]):
                penalty[group_members[k]] = 0.0
            mid = _partition(codes, grad, hess, rows, tmp, start[j], end[j], f, b, to_left,
                             stats)
            left, right = 2 * j + 1, 2 * j + 2
            start[left], end[left], start[right], end[right] = start[j], mid, mid, end[j]
            total[left], square[left], weight[left] = stats[0], stats[1], stats[2]
            total[right], square[right], weight[right] = stats[3], stats[4], stats[5]
            value[left] = _leaf(stats[0], stats[2], lam)
            value[right] = _leaf(stats[3], stats[5], lam)
            alive[left] = True
            alive[right] = True
            if last_level:
                continue
            small, large = 2 * slot, 2 * slot + 1
            if mid - start[j] > end[j] - mid:
                small, large = large, small
            s = left if small == 2 * slot else right
            _histogram(codes, grad, hess, rows, start[s], end[s], child_sum, child_cnt,
                       child_hess, small, n_bins, newton)
            _subtract(parent_sum, parent_cnt, parent_hess, slot, child_sum, child_cnt,
                      child_hess, small, large, n_bins, newton)
        parent_sum, child_sum = child_sum, parent_sum
        parent_cnt, child_cnt = child_cnt, parent_cnt
        parent_hess, child_hess = child_hess, parent_hess
    return feature, threshold, value, default_left, split_gain


@njit(cache=True, nogil=True)
def _add_tree_binned(codes, feature, threshold, default_left, value, scale, out):
    """``out[i] += scale * value[leaf(codes[i])]`` for one tree on binned rows."""
    for i in range(codes.shape[0]):
        j = 0
        while feature[j] >= 0:
            c = codes[i, feature[j]]
            go_left = c <= threshold[j] or (c == MISSING and default_left[j] != 0)
            j = 2 * j + 1 if go_left else 2 * j + 2
        out[i] += scale * value[j]


@njit(cache=True, nogil=True)
def _add_trees_raw(X, feature, split_value, default_left, value, first, stop, scale, out):
    """``out[i] += sum_{first <= t < stop} scale * value[t, leaf_t(X[i])]`` (trees in order).

    ``feature``, ``split_value`` (the raw edge ``x <= e_b`` of each split), ``default_left``
    (where a NaN, a missing value, goes) and ``value`` have shape (T, 2^(D+1) - 1). Per row
    the additions happen in tree order, so the result is bit-identical to adding the trees
    one at a time. O(n (stop - first) D).
    """
    for i in range(X.shape[0]):
        acc = out[i]
        for t in range(first, stop):
            j = 0
            while feature[t, j] >= 0:
                x = X[i, feature[t, j]]
                go_left = x <= split_value[t, j] if x == x else default_left[t, j] != 0
                j = 2 * j + 1 if go_left else 2 * j + 2
            acc += scale * value[t, j]
        out[i] = acc

"""Quantile binning of dense features into at most 255 ``uint8`` codes.

A feature ``f`` gets strictly increasing edges ``e_0 < ... < e_{B_f-2}`` (``B_f <= 255``
bins). The code of a value is the number of edges strictly below it,
``code(x) = #{k : e_k < x}`` (``np.searchsorted(edges, x, side="left")``), so
``code(x) <= b  <=>  x <= e_b``: a split "code <= b" on binned training data is the split
"x <= e_b" on raw data, and prediction never needs to bin.

Edges are midpoints between consecutive distinct values when a feature has at most
``max_bins`` of them, else midpoints between the distinct values that bracket the
``k / max_bins`` quantiles; NaN (a missing value) is left out of the edges and coded
``MISSING`` (255, never a bin: ``B_f <= 255`` bins use codes 0..254). Fitting is
O(d n log n); coding is O(d n log B).
"""

from __future__ import annotations

import numpy as np

MAX_BINS = 255
MISSING = 255  # the code of a missing value (NaN, or a feature of an uncomputed group)


def _feature_edges(column: np.ndarray, max_bins: int) -> np.ndarray:
    """Edges of one feature (float64, length <= max_bins - 1); NaN is ignored."""
    column = column[~np.isnan(column)]
    distinct = np.unique(column)
    if distinct.size <= 1:
        return np.empty(0, dtype=np.float64)
    if distinct.size > max_bins:
        levels = np.arange(1, max_bins, dtype=np.float64) / max_bins
        quantiles = np.quantile(column, levels, method="inverted_cdf")
        # position of each quantile among the distinct values; cut just above it
        upper = np.unique(np.searchsorted(distinct, quantiles, side="left"))
        upper = upper[upper < distinct.size - 1]
        return (distinct[upper] + distinct[upper + 1]) / 2.0
    return (distinct[:-1] + distinct[1:]) / 2.0


def fit_bin_edges(X: np.ndarray, max_bins: int = MAX_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Quantile bin edges of every column of ``X`` (n, d), flattened.

    Returns
    -------
    edges : float64 (sum_f (B_f - 1),)
        Edges of all features, feature by feature.
    offsets : int64 (d + 1,)
        Feature ``f``'s edges are ``edges[offsets[f]:offsets[f + 1]]``; ``B_f`` is their
        count plus one.
    """
    if not 2 <= max_bins <= MAX_BINS:
        raise ValueError(f"max_bins must be in [2, {MAX_BINS}], got {max_bins}")
    per_feature = [_feature_edges(X[:, f], max_bins) for f in range(X.shape[1])]
    offsets = np.zeros(X.shape[1] + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([e.size for e in per_feature])
    edges = np.concatenate(per_feature) if per_feature else np.empty(0, dtype=np.float64)
    return edges.astype(np.float64), offsets


def apply_bins(X: np.ndarray, edges: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Codes ``uint8 (n, d)`` (C order) of ``X`` under the given edges, ``MISSING`` for
    NaN. O(n d log B)."""
    codes = np.empty(X.shape, dtype=np.uint8)
    for f in range(X.shape[1]):
        feature_edges = edges[offsets[f] : offsets[f + 1]]
        codes[:, f] = np.searchsorted(feature_edges, X[:, f], side="left")
        codes[np.isnan(X[:, f]), f] = MISSING
    return codes


def n_bins_per_feature(offsets: np.ndarray) -> np.ndarray:
    """``B_f`` for every feature, int32 (d,)."""
    return (np.diff(offsets) + 1).astype(np.int32)

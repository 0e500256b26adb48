"""CSR validation: the branch-free fast path never accepts what the row-by-row check rejects,
and the check-and-copy of wire views agrees with it (a plain-Python reference decides)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.sparse._validate import (
    DUPLICATE,
    NEGATIVE,
    NOT_FINITE,
    OK,
    TOO_LARGE,
    _rows_increasing,
    check_rows,
)
from service._kernels import check_copy_rows


def reference(indptr, indices, values, n_features):
    """(code, row) of the first problem, row by row, in the kernels' order of checks."""
    for row in range(len(indptr) - 1):
        seen = set()
        duplicate = False
        for k in range(indptr[row], indptr[row + 1]):
            index, value = int(indices[k]), float(values[k])
            if index < 0:
                return NEGATIVE, row
            if index >= n_features:
                return TOO_LARGE, row
            if not math.isfinite(value):
                return NOT_FINITE, row
            duplicate |= index in seen
            seen.add(index)
        if duplicate:
            return DUPLICATE, row
    return OK, -1


@st.composite
def batches(draw):
    n_features = draw(st.integers(1, 12))
    lengths = draw(st.lists(st.integers(0, 6), min_size=0, max_size=6))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    nnz = int(indptr[-1])
    rows = []
    for length in lengths:   # mostly valid sorted rows, so the fast path is exercised
        row = sorted(draw(st.sets(st.integers(0, n_features - 1), min_size=min(length,
                                                                                 n_features),
                                  max_size=min(length, n_features))))
        rows.append((row + [0] * length)[:length])
    indices = np.array([i for row in rows for i in row], dtype=np.int32)
    values = np.array(draw(st.lists(st.floats(-3, 3), min_size=nnz, max_size=nnz)),
                      dtype=np.float64)
    for _ in range(draw(st.integers(0, 2))):   # plant problems
        if nnz == 0:
            break
        k = draw(st.integers(0, nnz - 1))
        kind = draw(st.sampled_from(["negative", "large", "nan", "inf", "swap", "copy"]))
        if kind == "negative":
            indices[k] = -draw(st.integers(1, 5))
        elif kind == "large":
            indices[k] = n_features + draw(st.integers(0, 5))
        elif kind == "nan":
            values[k] = np.nan
        elif kind == "inf":
            values[k] = -np.inf if draw(st.booleans()) else np.inf
        elif kind == "swap" and k + 1 < nnz:
            indices[k], indices[k + 1] = indices[k + 1], indices[k]
        elif kind == "copy" and k + 1 < nnz:
            indices[k + 1] = indices[k]
    return indptr, indices, values, n_features


@settings(max_examples=400, deadline=None)
@given(batches())
def test_check_rows_agrees_with_the_reference(batch):
    indptr, indices, values, n_features = batch
    code, row, _ = check_rows(indptr, indices, values, n_features)
    assert (code, row) == reference(indptr, indices, values, n_features)


@settings(max_examples=400, deadline=None)
@given(batches(), st.booleans())
def test_check_copy_agrees_and_copies(batch, float32):
    indptr, indices, values, n_features = batch
    wire = values.astype(np.float32) if float32 else values
    code, row, _, indices_out, values_out = check_copy_rows(indptr, indices, wire, n_features)
    assert (code, row) == reference(indptr, indices, wire, n_features)
    if code == OK:
        assert np.array_equal(indices_out, indices)
        assert values_out.dtype == np.float64
        assert np.array_equal(values_out, wire.astype(np.float64))


def test_rows_increasing_ignores_row_boundaries_and_empty_rows():
    indices = np.array([3, 5, 1, 2, 0], dtype=np.int32)
    assert _rows_increasing(np.array([0, 2, 2, 4, 4, 5], dtype=np.int64), indices)
    assert not _rows_increasing(np.array([0, 3, 5], dtype=np.int64), indices)
    assert _rows_increasing(np.array([0, 0, 0], dtype=np.int64), indices[:0])

"""The prefetch hints: they compile for the index types the kernels use, accept addresses
past an array's end (a hint never faults) and change no result."""

import numpy as np
import pytest
from numba import njit

from algorithms.sparse._prefetch import STREAM_AHEAD, prefetch, stream_ahead


@njit(cache=True)
def _sum_with_hints(indices, values, far):
    total = 0.0
    for k in range(len(values)):
        stream_ahead(indices, values, k)
        prefetch(values, np.uint32(indices[k]))
        prefetch(values, far)
        total += values[np.uint32(indices[k])]
    return total


@njit(cache=True)
def _sum_plain(indices, values):
    total = 0.0
    for k in range(len(values)):
        total += values[np.uint32(indices[k])]
    return total


@pytest.mark.parametrize("far", [0, STREAM_AHEAD * 64, 1 << 40, -(1 << 20)])
def test_hints_past_the_end_are_harmless_and_change_nothing(far):
    rng = np.random.default_rng(0)
    values = rng.normal(size=100)
    indices = rng.integers(0, 100, size=100).astype(np.int32)
    assert _sum_with_hints(indices, values, np.int64(far)) == _sum_plain(indices, values)


def test_two_dimensional_arrays_take_a_flat_index():
    @njit
    def touch(table, feature):
        prefetch(table, 2 * feature)
        return table[feature, 1]

    table = np.arange(20.0).reshape(10, 2)
    assert touch(table, 7) == 15.0

"""float_bits: the bitcast the SOFS candidate test relies on."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

from algorithms.sparse._bytes import float_bits


@njit(cache=True)
def _bits(x):
    return float_bits(x)


@njit(cache=True)
def _in_half_open_range(x, limit):
    """0 < x <= limit by one unsigned compare, as in SOFS's kernel."""
    return float_bits(x) - np.uint64(1) < float_bits(limit)


def test_bits_are_numpys_view():
    for x in (0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, 5e-324, np.finfo(float).max):
        assert _bits(x) == np.array(x).view(np.uint64)


finite = st.floats(allow_nan=False, allow_infinity=True, width=64)


@given(finite, st.floats(min_value=0.0, allow_nan=False, allow_infinity=True))
def test_one_unsigned_compare_is_the_range_test(x, limit):
    assert _in_half_open_range(x, limit) == (0.0 < x <= limit)

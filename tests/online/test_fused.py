"""The kernels' fused multiply-add rounds once, as IEEE-754 fusedMultiplyAdd."""

import math

import numpy as np
import pytest
from numba import njit

from algorithms.online._fused import fma


@njit
def _fma(a, b, c):
    return fma(a, b, c)


def test_fma_rounds_once():
    a, b = 1.0 + 2.0**-52, 1.0 - 2.0**-52   # a b = 1 - 2^-104 exactly
    assert a * b - 1.0 == 0.0                 # two roundings lose it
    assert _fma(a, b, -1.0) == -(2.0**-104)   # one rounding keeps it


@pytest.mark.parametrize("seed", range(3))
def test_fma_matches_exact_rational_arithmetic(seed):
    from fractions import Fraction
    rng = np.random.default_rng(seed)
    for a, b, c in rng.standard_normal((200, 3)) * rng.choice([1e-3, 1.0, 1e3], (200, 3)):
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        assert _fma(a, b, c) == float(exact)   # Fraction -> float rounds to nearest


def test_fma_special_values():
    assert math.isnan(_fma(math.inf, 0.0, 1.0))
    assert _fma(math.inf, 2.0, 1.0) == math.inf
    assert math.copysign(1.0, _fma(-0.0, 1.0, 0.0)) == 1.0   # -0 + +0 = +0

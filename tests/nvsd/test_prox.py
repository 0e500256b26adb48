"""Closed-form proximal operators against direct numerical minimization."""

import numpy as np
import pytest
import scipy.optimize

from algorithms.nvsd.prox import make_regularizer

CASES = [
    ("l", {}),
    ("gl", {"groups": [[0, 2], [1], [3]]}),
    ("gl", {"groups": [[0, 2], [1], [3]], "group_weight": "sqrt"}),
    ("en", {"l1_ratio": 0.3}),
    ("en", {"l1_ratio": 1.0}),
]


@pytest.mark.parametrize(("kind", "kwargs"), CASES)
@pytest.mark.parametrize("t", [0.05, 0.6, 3.0])
def test_prox_matches_direct_minimization(kind, kwargs, t):
    rng = np.random.default_rng(7)
    d, n = 4, 3
    reg = make_regularizer(kind, d, **kwargs)
    v = rng.standard_normal((d, n))
    v[3] *= 0.05  # a small block, thresholded for most t
    x = reg.prox(v, t)

    def obj(z):
        return 0.5 * np.sum((z - v.reshape(-1)) ** 2) + t * reg.value(z.reshape(d, n))

    best = min(
        (scipy.optimize.minimize(obj, start, method="Powell",
                                 options={"xtol": 1e-10, "ftol": 1e-14, "maxiter": 200000})
         for start in (v.reshape(-1), x.reshape(-1) + 1e-3, np.zeros(d * n))),
        key=lambda r: r.fun,
    )
    assert obj(x.reshape(-1)) <= best.fun + 1e-9
    np.testing.assert_allclose(x.reshape(-1), best.x, atol=1e-4)


def test_prox_zeroes_blocks_below_threshold_and_values():
    reg = make_regularizer("l", 2)
    v = np.array([[3.0, 4.0], [0.1, 0.1]])  # ||v_0|| = 5, n = 2
    x = reg.prox(v, t=np.sqrt(2) * 1.0)  # threshold t / sqrt(n) = 1
    np.testing.assert_allclose(x[0], v[0] * 0.8)
    np.testing.assert_array_equal(x[1], 0.0)
    np.testing.assert_allclose(reg.value(v), (5 + np.sqrt(0.02)) / np.sqrt(2))


def test_regularizer_validation():
    with pytest.raises(ValueError):
        make_regularizer("gl", 3)
    with pytest.raises(ValueError):
        make_regularizer("gl", 3, groups=[[0, 1]])
    with pytest.raises(ValueError):
        make_regularizer("gl", 3, groups=[[0, 1], [1, 2]])
    with pytest.raises(ValueError):
        make_regularizer("en", 3, l1_ratio=0.0)
    with pytest.raises(ValueError):
        make_regularizer("x", 3)
    labels = make_regularizer("gl", 4, groups=[5, 5, 7, 5]).group_of
    np.testing.assert_array_equal(labels, [0, 0, 1, 0])

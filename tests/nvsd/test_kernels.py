"""Kernel first and second derivatives against central finite differences."""

import numpy as np
import pytest

from algorithms.nvsd.kernels import GaussianKernel, PolynomialKernel, derivative_gram, make_kernel

KERNELS = [PolynomialKernel(3, 1.0), PolynomialKernel(2, 0.5), PolynomialKernel(1, 1.0),
           GaussianKernel(1.3)]


def _points(seed=0, m1=4, m2=5, d=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m1, d)), rng.standard_normal((m2, d))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: f"{k.name}{k.params()}")
def test_first_derivative_matches_finite_differences(kernel):
    S, T = _points()
    h = 1e-6
    first = kernel.first(S, T)
    for a in range(S.shape[1]):
        e = np.zeros(S.shape[1])
        e[a] = h
        fd = (kernel.value(S + e, T) - kernel.value(S - e, T)) / (2 * h)
        np.testing.assert_allclose(first[a], fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: f"{k.name}{k.params()}")
def test_second_derivative_matches_finite_differences(kernel):
    S, T = _points(1)
    h = 1e-6
    second = kernel.second(S, T)
    for b in range(T.shape[1]):
        e = np.zeros(T.shape[1])
        e[b] = h
        # d/dt_b of d k / d s_a
        fd = (kernel.first(S, T + e) - kernel.first(S, T - e)) / (2 * h)
        np.testing.assert_allclose(second[:, b], fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: f"{k.name}{k.params()}")
def test_gram_is_symmetric_psd_and_matches_seed_identities(kernel):
    X, _ = _points(2, m1=6, d=3)
    n, d = X.shape
    K, G, H = derivative_gram(kernel, X)
    Q = np.block([[K, G.T], [G, H]])
    np.testing.assert_allclose(Q, Q.T, atol=1e-10 * np.abs(Q).max())
    assert np.linalg.eigvalsh(Q).min() > -1e-8 * np.abs(Q).max()
    L = kernel.second(X, X)
    for a in range(d):
        for b in range(d):  # L^{ab}_ij = L^{ba}_ji
            np.testing.assert_allclose(L[a, b], L[b, a].T, atol=1e-10 * np.abs(L).max())


def test_make_kernel_validates():
    assert make_kernel("gaussian", sigma=2.0).params() == {"sigma": 2.0}
    with pytest.raises(ValueError):
        make_kernel("laplace")
    with pytest.raises(ValueError):
        PolynomialKernel(0)
    with pytest.raises(ValueError):
        GaussianKernel(0.0)

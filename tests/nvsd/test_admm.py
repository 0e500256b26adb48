"""ADMM solver: optimality (KKT), objective against a direct minimizer, kernel ridge at tau=0."""

import numpy as np
import pytest
import scipy.optimize
from sklearn.kernel_ridge import KernelRidge

from algorithms.nvsd import (
    DenseNVSDProblem,
    GaussianKernel,
    NVSDProblem,
    PolynomialKernel,
    kkt_residual,
    make_regularizer,
    solve_admm,
    solve_admm_inexact,
    solve_path,
    tau_max,
)
from algorithms.nvsd.kernels import evaluate_function

N, D = 12, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(N)
    return X, y


@pytest.fixture(scope="module", params=["polynomial", "gaussian"])
def problem(request, data):
    kernel = PolynomialKernel(3, 1.0) if request.param == "polynomial" else GaussianKernel(1.5)
    return NVSDProblem(kernel, data[0])


REGS = [("l", 0.05, 1e-2), ("gl", 0.1, 1e-2), ("en", 0.1, 1e-3)]


def _reg(kind):
    return make_regularizer(kind, D, groups=[[0, 1], [2]], l1_ratio=0.4)


@pytest.mark.parametrize(("kind", "tau", "nu"), REGS)
def test_kkt_residual_goes_to_tolerance(problem, data, kind, tau, nu):
    y = data[1]
    reg = _reg(kind)
    res = solve_admm(problem, y, reg, tau, nu, tol=1e-8, max_iter=20000, record=True)
    assert res.converged
    kkt = kkt_residual(problem, y, res, reg, tau, nu)
    assert max(kkt.values()) < 1e-6, kkt
    hist = res.history
    assert hist["primal"][-1] < 1e-6 * max(hist["primal"])
    # objective goes down from the start and settles on the final value
    assert hist["objective"][-1] < hist["objective"][0]
    tail = np.array(hist["objective"][-10:])
    assert np.ptp(tail) < 1e-7 * abs(tail[-1])
    np.testing.assert_allclose(hist["objective"][-1], res.objective, rtol=1e-6)


@pytest.mark.parametrize(("kind", "tau", "nu"), REGS)
def test_objective_matches_direct_minimizer(problem, data, kind, tau, nu):
    """Minimize over w with Q = R R^T (f = sum of representers) by BFGS on a smoothed norm."""
    y = data[1]
    reg = _reg(kind)
    res = solve_admm(problem, y, reg, tau, nu, tol=1e-9, max_iter=20000)
    Q = np.block([[problem.K, problem.G.T], [problem.G, problem.H]])
    w, V = np.linalg.eigh(Q)
    keep = w > 1e-10 * w.max()
    R = V[:, keep] * np.sqrt(w[keep])

    def obj(v):
        u = R @ v
        phi = u[N:].reshape(D, N)
        norms = np.sqrt((phi**2).sum(1) / N + 1e-14)
        smooth = np.sqrt(norms**2)
        if kind == "gl":
            pen = reg.weights @ np.sqrt(np.bincount(reg.group_of, smooth**2))
        elif kind == "en":
            pen = reg.l1_ratio * smooth.sum() + (1 - reg.l1_ratio) * (smooth**2).sum()
        else:
            pen = smooth.sum()
        return np.mean((y - u[:N]) ** 2) + tau * pen + nu * v @ v

    start = np.linalg.lstsq(R, np.concatenate([problem.K, problem.G]) @ res.alpha
                            + np.concatenate([problem.G.T, problem.H]) @ res.beta.reshape(-1),
                            rcond=None)[0]
    ref = scipy.optimize.minimize(obj, np.zeros_like(start), method="BFGS",
                                  options={"gtol": 1e-10, "maxiter": 5000})
    assert res.objective <= ref.fun + 1e-8
    assert res.objective >= ref.fun - 1e-6 * abs(ref.fun)
    assert obj(start) == pytest.approx(res.objective, rel=1e-6)


def test_tau_zero_is_kernel_ridge(data):
    X, y = data
    nu = 1e-2
    for kernel, sk in [(PolynomialKernel(3, 1.0), {"kernel": "poly", "degree": 3, "coef0": 1.0,
                                                   "gamma": 1.0}),
                       (GaussianKernel(1.5), {"kernel": "rbf", "gamma": 1 / (2 * 1.5**2)})]:
        problem = NVSDProblem(kernel, X)
        res = solve_admm(problem, y, make_regularizer("l", D), 0.0, nu, tol=1e-8)
        ref = KernelRidge(alpha=N * nu, **sk).fit(X, y)
        Xt = np.random.default_rng(3).standard_normal((20, D))
        pred = evaluate_function(kernel, X, res.alpha, res.beta, Xt)
        np.testing.assert_allclose(pred, ref.predict(Xt), rtol=1e-6, atol=1e-6)


def test_phi_are_partial_derivatives_of_f(problem, data):
    X, y = data
    res = solve_admm(problem, y, _reg("gl"), 0.1, 1e-2, tol=1e-10, max_iter=20000)
    h = 1e-5
    for a in range(D):
        e = np.zeros(D)
        e[a] = h
        fd = (evaluate_function(problem.kernel, X, res.alpha, res.beta, X + e)
              - evaluate_function(problem.kernel, X, res.alpha, res.beta, X - e)) / (2 * h)
        np.testing.assert_allclose(fd, res.phi[a], atol=1e-6 * max(1.0, np.abs(res.phi).max()))


def test_tau_max_gives_empty_support_and_path_enters(problem, data):
    y = data[1]
    reg = _reg("l")
    top = tau_max(problem, y, reg, 1e-2)
    results = solve_path(problem, y, reg, top * np.array([1.05, 0.5, 0.1]), 1e-2, tol=1e-7)
    norms = [reg.block_norms(r.phi) for r in results]
    assert norms[0].max() < 1e-8 * norms[-1].max()  # empty support up to ADMM accuracy
    assert np.count_nonzero(norms[-1]) >= 1
    # warm start from a cold solve reaches the same optimum
    cold = solve_admm(problem, y, reg, 0.1 * top, 1e-2, tol=1e-7)
    assert results[-1].objective == pytest.approx(cold.objective, rel=1e-6)


def test_nu_must_be_positive(problem, data):
    with pytest.raises(ValueError):
        solve_admm(problem, data[1], _reg("l"), 0.1, 0.0)


@pytest.mark.parametrize(("kind", "tau", "nu"), REGS)
def test_inexact_solver_matches_direct(problem, data, kind, tau, nu):
    X, y = data
    reg = _reg(kind)
    dense = DenseNVSDProblem(problem.kernel, X)
    exact = solve_admm(problem, y, reg, tau, nu, tol=1e-8, max_iter=20000)
    inexact = solve_admm_inexact(dense, y, reg, tau, nu, tol=1e-8, max_iter=20000)
    assert inexact.converged
    assert inexact.objective == pytest.approx(exact.objective, rel=1e-8)
    np.testing.assert_allclose(reg.block_norms(inexact.phi), reg.block_norms(exact.phi),
                               atol=1e-5 * reg.block_norms(exact.phi).max())
    assert max(kkt_residual(dense, y, inexact, reg, tau, nu).values()) < 1e-5

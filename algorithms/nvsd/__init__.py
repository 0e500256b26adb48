"""NVSD: structured nonlinear variable selection by ADMM (Gregorova et al., UAI 2018)."""

from .admm import ADMMResult, NVSDProblem, kkt_residual, solve_admm
from .estimator import NVSD
from .inexact import DenseNVSDProblem, solve_admm_inexact
from .kernels import GaussianKernel, PolynomialKernel, derivative_gram, make_kernel
from .path import nvsd_path, solve_path, tau_grid, tau_max
from .prox import Regularizer, make_regularizer
from .ranking import ranked_supports, ranked_units
from .relaxed import (
    RelaxedNVSD,
    RelaxedSelection,
    SubsetKernelRidge,
    select_relaxed,
)

__all__ = [
    "NVSD", "ADMMResult", "DenseNVSDProblem", "GaussianKernel", "NVSDProblem",
    "PolynomialKernel", "Regularizer", "RelaxedNVSD", "RelaxedSelection", "SubsetKernelRidge",
    "derivative_gram", "kkt_residual", "make_kernel", "make_regularizer", "nvsd_path",
    "ranked_supports", "ranked_units", "select_relaxed", "solve_admm", "solve_admm_inexact",
    "solve_path", "tau_grid", "tau_max",
]

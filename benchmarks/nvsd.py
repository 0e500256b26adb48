"""NVSD benchmark on the paper's synthetic experiments E1-E3 (Gregorova et al., UAI 2018).

    python benchmarks/nvsd.py [--quick] [--reps R] [--sizes 30,50,100] [--experiments E1,E2,E3]

For every experiment, training size n and replication: train (n), validation (n) and test
(1,000) sets from the generator; hyperparameters are chosen on the validation set; the table
reports mean test RMSE and Tanimoto distance to the true support {1,2,3,7,8,9}.

Methods: Krls (kernel ridge, all inputs), Oracle (kernel ridge on the six relevant inputs),
HSIC (pyHSICLasso, n_jobs=1, top-k features, then kernel ridge; k chosen on validation),
NVSD(L), NVSD(GL), NVSD(EN) (tau path x nu grid, x mu grid for EN; the paper's estimator,
support = non-zero derivative norms) and relaxed NVSD(.)+KRR (``select_relaxed``: kernel ridge
refitted on the top-k inputs, or top-k groups for GL, of each path point's derivative-norm
ranking; path point, k and ridge chosen on validation).
Writes benchmarks/results/nvsd.json. Runs BLAS single-threaded (shared machine); fit times are
CPU seconds of this process (build + cold ADMM), so other jobs on the machine do not inflate them.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.kernel_ridge import KernelRidge  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.datasets.nvsd_synthetic import EXPERIMENTS, RELEVANT, D  # noqa: E402
from algorithms.metrics.selection import tanimoto_distance  # noqa: E402
from algorithms.nvsd import NVSD, nvsd_path, select_relaxed  # noqa: E402

KRR_ALPHAS = np.logspace(-6, 1, 8)
NUS = (1e-3, 1e-1, 1.0)
MUS = (0.25, 0.5, 0.75)  # elastic-net mix, NVSD(EN) only
N_TAUS = 8
HSIC_KS = (3, 6, 9, 12)
NVSD_METHODS = (("NVSD(L)", "l"), ("NVSD(GL)", "gl"), ("NVSD(EN)", "en"))


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def sk_kernel(exp: dict) -> dict:
    if exp["kernel"] == "gaussian":
        return {"kernel": "rbf", "gamma": 1.0 / (2.0 * exp["kernel_params"]["sigma"] ** 2)}
    p = exp["kernel_params"]
    return {"kernel": "poly", "degree": p["degree"], "coef0": p["offset"], "gamma": 1.0}


def krr_select(exp, cols, data) -> tuple[float, float]:
    """Kernel ridge on columns ``cols``, alpha chosen on validation -> (val, test) RMSE."""
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data
    cols = list(cols)
    if not cols:
        c = float(np.mean(ytr))
        return rmse(yva, c), rmse(yte, c)
    best = None
    for alpha in KRR_ALPHAS:
        model = KernelRidge(alpha=alpha, **sk_kernel(exp)).fit(Xtr[:, cols], ytr)
        val = rmse(model.predict(Xva[:, cols]), yva)
        if best is None or val < best[0]:
            best = (val, model)
    return best[0], rmse(best[1].predict(Xte[:, cols]), yte)


def run_hsic(exp, data) -> dict:
    try:
        from pyHSICLasso import HSICLasso
    except ImportError:
        return {"rmse": float("nan"), "tanimoto": float("nan"), "error": "pyHSICLasso missing"}
    (Xtr, ytr), _, _ = data
    lasso = HSICLasso()
    with contextlib.redirect_stdout(io.StringIO()):
        lasso.input(Xtr, ytr)
        lasso.regression(max(HSIC_KS), B=0, M=1, n_jobs=1)
    order = list(lasso.get_index())
    best = None
    for k in HSIC_KS:
        cols = order[:k]
        val, test = krr_select(exp, cols, data)
        if best is None or val < best[0]:
            best = (val, test, cols)
    return {"rmse": best[1], "tanimoto": tanimoto_distance(RELEVANT, best[2])}


def run_nvsd(exp, reg, data, problem, build) -> tuple[dict, dict]:
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data
    base = NVSD(regularizer=reg, kernel=exp["kernel"], **exp["kernel_params"],
                groups=exp["groups"], l1_ratio=0.5, tol=1e-3)
    path = []
    for nu, mu in [(nu, mu) for nu in NUS for mu in (MUS if reg == "en" else (0.5,))]:
        params = {**base.get_params(), "nu": nu, "l1_ratio": mu}
        params.pop("tau")
        path += nvsd_path(Xtr, ytr, problem=problem, n_taus=N_TAUS, ratio=1e-3, **params)
    model = min(path, key=lambda m: rmse(m.predict(Xva), yva))
    cold = NVSD(**model.get_params())
    t0 = time.process_time()
    cold.fit(Xtr, ytr, problem=problem)
    fit_seconds = build + time.process_time() - t0
    raw = {"rmse": rmse(model.predict(Xte), yte),
           "tanimoto": tanimoto_distance(RELEVANT, model.support_),
           "fit_seconds": fit_seconds, "n_iter": cold.n_iter_, "tau": model.tau, "nu": model.nu,
           "mu": model.l1_ratio,
           "support_size": int(model.support_.sum())}
    t0 = time.perf_counter()
    relaxed = select_relaxed(path, Xtr, ytr, Xva, yva, alphas=tuple(KRR_ALPHAS))
    refit = {"rmse": rmse(relaxed.model.predict(Xte), yte),
             "tanimoto": tanimoto_distance(RELEVANT, relaxed.support),
             "support_size": int(relaxed.support.size), "alpha": relaxed.alpha,
             "select_seconds": time.perf_counter() - t0}
    return raw, refit


def run_one(name: str, n: int, rep: int) -> dict:
    exp = EXPERIMENTS[name]
    rng = np.random.default_rng([int(name[1:]), n, rep])
    data = tuple(exp["make"](m, rng) for m in (n, n, 1000))
    out = {}
    out["Krls"] = dict(zip(("val", "rmse"), krr_select(exp, range(D), data), strict=True))
    out["Krls"]["tanimoto"] = tanimoto_distance(RELEVANT, range(D))
    out["Oracle"] = dict(zip(("val", "rmse"), krr_select(exp, RELEVANT, data), strict=True))
    out["Oracle"]["tanimoto"] = 0.0
    out["HSIC"] = run_hsic(exp, data)
    t0 = time.process_time()
    problem = NVSD(kernel=exp["kernel"], **exp["kernel_params"]).make_problem(data[0][0])
    build = time.process_time() - t0  # shared by all tau, nu and the three regularizers
    for label, reg in NVSD_METHODS:
        out[label], out[label + "+KRR"] = run_nvsd(exp, reg, data, problem, build)
    return out


METHOD_ORDER = ("Krls", "Oracle", "HSIC", "NVSD(L)", "NVSD(GL)", "NVSD(EN)", "NVSD(L)+KRR",
                "NVSD(GL)+KRR", "NVSD(EN)+KRR")


def summarize(results: dict) -> dict:
    summary = {}
    for key, reps in results.items():
        summary[key] = {}
        for method in METHOD_ORDER:
            rows = [r[method] for r in reps]
            entry = {}
            for field in ("rmse", "tanimoto", "fit_seconds"):
                vals = [r[field] for r in rows if field in r]
                if vals:
                    entry[field] = float(np.mean(vals))
                    entry[field + "_std"] = float(np.std(vals))
            summary[key][method] = entry
    return summary


def print_table(summary: dict) -> str:
    keys = list(summary)
    lines = ["| method | " + " | ".join(keys) + " |", "| --- |" + " --- |" * len(keys)]
    for method in METHOD_ORDER:
        cells = []
        for key in keys:
            e = summary[key][method]
            cells.append(f"{e['rmse']:.3f} / {e['tanimoto']:.2f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print("mean test RMSE / Tanimoto distance (lower is better)")
    print(text)
    for key in keys:
        times = {m: summary[key][m].get("fit_seconds") for m in ("NVSD(L)", "NVSD(GL)", "NVSD(EN)")}
        print(f"{key}: NVSD fit CPU seconds (build + cold ADMM at the chosen tau, nu): "
              + ", ".join(f"{m} {t:.2f}" for m, t in times.items()))
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 replications instead of 50")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--sizes", default="30,50,100")
    parser.add_argument("--experiments", default="E1,E2,E3")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "nvsd.json"))
    args = parser.parse_args(argv)
    reps = args.reps or (10 if args.quick else 50)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, list] = {}
    start = time.perf_counter()
    for name in args.experiments.split(","):
        for n in sizes:
            key = f"{name} n={n}"
            results[key] = []
            for rep in range(reps):
                results[key].append(run_one(name, n, rep))
                print(f"{key} rep {rep + 1}/{reps} done ({time.perf_counter() - start:.0f}s)",
                      file=sys.stderr, flush=True)
    summary = summarize(results)
    table = print_table(summary)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"reps": reps, "sizes": sizes, "nus": list(NUS), "mus": list(MUS),
               "n_taus": N_TAUS, "krr_alphas": KRR_ALPHAS.tolist(),
               "seconds": time.perf_counter() - start, "summary": summary, "table": table,
               "results": results}
    out.write_text(json.dumps(payload, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""The peers a user would pick instead, on the same X1 split: scikit-learn SGDClassifier
(hinge, l2 and l1 with its real non-zeros), River (on a subset) and Vowpal Wabbit (one pass
over its own text format). Used by ``benchmarks/online.py``."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from algorithms.sparse import CSRBatch


def run_sklearn(X, y, n_train):
    from sklearn.linear_model import SGDClassifier
    train, test = X.row_slice(0, n_train).to_scipy(), X.row_slice(n_train, X.n_rows).to_scipy()
    rows = []
    for penalty, alpha in [("l2", 1e-4), ("l1", 1e-4), ("l1", 1e-3)]:
        model = SGDClassifier(loss="hinge", penalty=penalty, alpha=alpha, random_state=0)
        model.partial_fit(train, y[:n_train], classes=[-1, 1])
        rows.append({"method": f"sklearn SGD hinge {penalty} alpha={alpha}", "B": "all",
                     "test_acc": float((model.predict(test) == y[n_train:]).mean()),
                     "nonzeros": int(np.count_nonzero(model.coef_))})
    return rows


def run_river(X, y, n_train, subset):
    try:
        from river import linear_model
    except ImportError:
        return [{"method": "river (not installed)"}]
    rows = []
    for name, model in [("river Perceptron", linear_model.Perceptron()),
                        ("river LogisticRegression", linear_model.LogisticRegression())]:
        start = time.perf_counter()
        for i in range(subset):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            model.learn_one(dict(zip(X.indices[lo:hi].tolist(), X.values[lo:hi].tolist(),
                                     strict=True)), bool(y[i] > 0))
        seconds = time.perf_counter() - start
        correct = 0
        tests = range(n_train, min(X.n_rows, n_train + 5000))
        for i in tests:
            lo, hi = X.indptr[i], X.indptr[i + 1]
            guess = model.predict_one(dict(zip(X.indices[lo:hi].tolist(),
                                               X.values[lo:hi].tolist(), strict=True)))
            correct += (1 if guess else -1) == y[i]
        rows.append({"method": f"{name} (first {subset} train)", "B": "all",
                     "test_acc": correct / len(tests),
                     "examples_per_s": subset / seconds})
    return rows


def write_vw(path: Path, X: CSRBatch, y: np.ndarray) -> None:
    with open(path, "w") as out:
        for i in range(X.n_rows):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            features = " ".join(f"{j}:{v:.7g}" for j, v in zip(X.indices[lo:hi].tolist(),
                                                                X.values[lo:hi].tolist(),
                                                                strict=True))
            out.write(f"{int(y[i])} | {features}\n")


def vw_nonzeros(readable_model: str) -> int:
    """Non-zero weights of a VW model as it predicts. With ``--l1`` VW stores the weights
    untruncated next to the accumulated penalty ``l1_state`` and applies the truncation
    sign(w) max(|w| - l1_state, 0) when it predicts, so a stored weight counts only when
    |w| > l1_state (the stored weights alone: 20,001 "non-zeros" at any --l1)."""
    penalty = re.search(r"^l1_state (\S+)$", readable_model, flags=re.MULTILINE)
    gravity = float(penalty.group(1)) if penalty else 0.0
    weights = re.findall(r"^\d+:(\S+)", readable_model, flags=re.MULTILINE)
    return sum(abs(float(w)) > gravity for w in weights)


def run_vw(X, y, n_train, workdir: Path):
    try:
        import vowpalwabbit
    except ImportError:
        return [{"method": "vowpal wabbit (not installed)"}], {}
    train_path, test_path = workdir / "train.vw", workdir / "test.vw"
    write_vw(train_path, X.row_slice(0, n_train), y[:n_train])
    write_vw(test_path, X.row_slice(n_train, X.n_rows), y[n_train:])
    rows, timing = [], {}
    for label, extra in [("vw logistic", ""), ("vw logistic --l1 1e-5", "--l1 1e-5"),
                         ("vw logistic --l1 5e-5", "--l1 5e-5"),
                         ("vw logistic --l1 1e-4", "--l1 1e-4")]:
        model, readable = workdir / "model.vw", workdir / "model.txt"
        start = time.perf_counter()
        vowpalwabbit.Workspace(f"-d {train_path} --loss_function logistic --quiet "
                               f"-f {model} --readable_model {readable} {extra}").finish()
        seconds = time.perf_counter() - start
        predictions = workdir / "predictions.txt"
        vowpalwabbit.Workspace(f"-t -i {model} -d {test_path} -p {predictions} "
                               "--quiet").finish()
        scores = np.loadtxt(predictions)
        nonzeros = vw_nonzeros(readable.read_text())
        rows.append({"method": label, "B": "all",
                     "test_acc": float((np.where(scores >= 0, 1, -1) == y[n_train:]).mean()),
                     "nonzeros": nonzeros})
        timing.setdefault("vw_file_seconds", seconds)
    return rows, timing

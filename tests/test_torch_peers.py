"""The benchmark's neural peers (benchmarks/torch_peers.py: GDFS and DIME over costed
groups), on small generated sets: caps respected, the exchange rate stops DIME, the
informative group bought first, and the benchmark's ``--add gdfs,dime`` run. Skipped
without PyTorch (a benchmark extra, never a dependency of the service)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lightgbm")

from benchmarks.torch_peers import DIME, GDFS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _one_informative_group(n=600, seed=0):
    """Four groups of two features; only group 2 carries the label (cost 2, the others 1)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 8))
    y = (X[:, 4] + 0.5 * X[:, 5] + 0.2 * rng.standard_normal(n) > 0).astype(float)
    groups = [[0, 1], [2, 3], [4, 5], [6, 7]]
    return X, y, groups, np.array([1.0, 1.0, 2.0, 1.0])


@pytest.mark.parametrize("cls", [GDFS, DIME])
def test_peer_buys_the_informative_group_first_and_respects_caps(cls):
    X, y, groups, costs = _one_informative_group()
    model = cls(groups, costs, "binary", random_state=0).fit(X[:400], y[:400], X[400:500],
                                                            y[400:500])
    for cap in (0.5, 1.0, 2.0, 3.5, 5.0):
        sets = model.episodes(X[500:], max_cost=cap)
        assert all(costs[list(S)].sum() <= cap + 1e-9 for S in sets), cap
    sets = model.episodes(X[500:], max_cost=2.0)
    assert np.mean([S == (2,) for S in sets]) > 0.9
    p = model.predict_output(X[500:], sets)
    assert p.shape == (100,) and np.all((p >= 0) & (p <= 1))
    assert np.mean((p > 0.5) == (y[500:] > 0.5)) > 0.8


def test_dime_exchange_rate_stops_and_regression_and_classes_answer():
    X, y, groups, costs = _one_informative_group()
    dime = DIME(groups, costs, "binary", random_state=0).fit(X[:400], y[:400], X[400:500],
                                                            y[400:500])
    assert all(S == () for S in dime.episodes(X[500:], max_cost=None, exchange_rate=1e6))
    assert all(len(S) == 4 for S in dime.episodes(X[500:], max_cost=None,
                                                   exchange_rate=-1e6))
    target = X[:, 4] * 2.0 + 1.0
    reg = GDFS(groups, costs, "regression", random_state=0).fit(X[:400], target[:400],
                                                              X[400:500], target[400:500])
    full = reg.predict_output(X[500:], [(0, 1, 2, 3)] * 100)
    assert np.mean((full - target[500:]) ** 2) < 0.25 * np.var(target)
    classes = (X[:, 4] > 0).astype(int) + 2 * (X[:, 6] > 0)
    multi = DIME(groups, costs, "multiclass", n_classes=4, random_state=0).fit(
        X[:400], classes[:400], X[400:500], classes[400:500])
    probs = multi.predict_output(X[500:], [(0, 1, 2, 3)] * 100)
    assert probs.shape == (100, 4) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_add_torch_peers_keeps_every_other_policy(tmp_path):
    out = tmp_path / "acquisition_quality.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "acquisition_quality.py"), "--quick",
               "--datasets", "cube-nm", "--n", "600", "--no-spambase", "--out", str(out)]
    subprocess.run(command, check=True, timeout=300, cwd=ROOT, stdout=subprocess.DEVNULL)
    before = json.loads(out.read_text())
    subprocess.run([*command[:2], "--add", "gdfs,dime", "--out", str(out)], check=True,
                   timeout=300, cwd=ROOT, stdout=subprocess.DEVNULL)
    after = json.loads(out.read_text())
    (old,), (new,) = before["results"], after["results"]
    for policy, entry in old["policies"].items():
        assert new["policies"][policy] == entry, policy
    for policy in ("gdfs", "dime"):
        caps = new["policies"][policy]["caps"]
        assert all(c["mean_cost"] <= c["cap"] + 1e-9 for c in caps)
        assert 0.0 <= after["aggregates"]["cube-nm"][policy]["area"] <= 1.0
    assert after["runs"][-1]["policies"] == ["gdfs", "dime"]

"""The acquisition benchmark's smoke mode on a tiny configuration: every policy, finite
figures, the bounds above the policies."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lightgbm")
pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {"ours", "aaco", "greedy-knn", "per-set", "random", "cegb", "full", "oracle"}


@pytest.mark.slow
def test_quick_acquisition_benchmark_has_every_policy(tmp_path):
    out = tmp_path / "acquisition_quality.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "acquisition_quality.py"), "--quick",
                    "--datasets", "cube-nm", "--n", "600", "--out", str(out)],
                   check=True, timeout=300, cwd=ROOT, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    assert result["config"]["seeds"] == 1 and result["spambase"] is None
    entry = result["aggregates"]["cube-nm"]
    assert set(entry) >= POLICIES
    for policy in POLICIES:
        assert math.isfinite(entry[policy]["area"]), policy
    # the product as deployed: the gated policy over auto's predictor, answered by it
    assert 0.0 <= entry["ours-auto"]["area"] <= 1.0
    (run,) = result["results"]
    for policy in ("ours", "aaco", "greedy-knn", "per-set", "random", "oracle"):
        caps = run["policies"][policy]["caps"]
        assert [c["fraction"] for c in caps] == result["config"]["cap_fractions"]
        assert all(c["mean_cost"] <= c["cap"] + 1e-9 for c in caps), policy
    # the hindsight oracle bounds every policy at every cap
    for j, oracle in enumerate(run["policies"]["oracle"]["caps"]):
        for policy in ("ours", "per-set", "random"):
            assert oracle["accuracy"] >= run["policies"][policy]["caps"][j]["accuracy"] - 1e-9
    assert entry["ours"]["area"] >= entry["per-set"]["area"] - 0.02


@pytest.mark.slow
def test_spambase_protocol_on_a_small_csv(tmp_path):
    """GDFS's protocol runs end to end on a CSV shaped like Spambase's (features, then the
    0/1 outcome): every policy at every k, ``auto``'s sequence opening with the forward
    path over specialists (the two features with signal), and with every feature known
    every policy's answer the same."""
    rng = np.random.default_rng(0)
    X = rng.exponential(size=(500, 6))
    y = (X[:, 1] + 0.8 * X[:, 4] + 0.5 * rng.normal(size=500) > 1.8).astype(float)
    csv = tmp_path / "spam.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", comments="",
               header=",".join([f"Cont {f + 1}" for f in range(6)] + ["Outcome"]))
    sys.path.insert(0, str(ROOT))
    from benchmarks.acquisition_quality import SPAMBASE_K, SPAMBASE_POLICIES, run_spambase

    out = run_spambase(csv, steps=2, folds=2)
    assert [r["k"] for r in out["rows"]] == list(SPAMBASE_K)
    assert out["order"][:2] == out["forward"]["order"]
    assert sorted(out["forward"]["order"]) == [1, 4]       # the two features with signal
    assert set(out["auto_answerers"]) <= {"anytime", "gbfs", "specialist"}
    for row in out["rows"]:
        for policy in SPAMBASE_POLICIES:
            assert 0.0 <= row[f"{policy}_auroc"] <= 100.0, (row["k"], policy)
    last = out["rows"][-1]
    assert len({last[f"{p}_auroc"] for p in SPAMBASE_POLICIES if p != "per-set"}) == 1
    assert out["rows"][1]["auto_auroc"] > out["rows"][0]["auto_auroc"] > 60.0


def _payload(results, datasets, **config):
    """A payload shaped as the benchmark writes it (committed results as its rows)."""
    from benchmarks.acquisition_quality import aggregate

    committed = json.loads((ROOT / "benchmarks" / "acquisition_quality.json").read_text())
    return {"config": {**committed["config"], "datasets": datasets, **config},
            "machine": {"cpus": len(datasets)},
            "datasets": {name: committed["datasets"].get(name, {"kind": "binary"})
                         for name in datasets},
            "results": results, "aggregates": aggregate(results),
            "spambase": None}


def test_merge_keeps_the_other_sets_and_replaces_the_rerun_ones():
    """``--merge``: a partial run replaces its own sets' results, adds new sets, keeps
    every other set's results and aggregates and the earlier Spambase part, and refuses a
    run whose configuration (seeds) differs."""
    import copy

    sys.path.insert(0, str(ROOT))
    from benchmarks.acquisition_quality import merge_payload

    committed = json.loads((ROOT / "benchmarks" / "acquisition_quality.json").read_text())
    by_set = {}
    for r in committed["results"]:
        by_set.setdefault(r["dataset"], []).append(r)
    a, b = sorted(by_set)[:2]
    old = _payload(by_set[a] + by_set[b], [a, b])
    old["spambase"] = {"rows": [{"k": 1}]}
    rerun = copy.deepcopy(by_set[b])
    for r in rerun:
        r["policies"]["ours"]["area"] += 0.25
    added = copy.deepcopy(by_set[a])
    for r in added:
        r["dataset"] = "added-set"
    new = _payload(rerun + added, [b, "added-set", "not-run"])
    merged = merge_payload(old, new)

    assert merged["config"]["datasets"] == [a, b, "added-set"]
    assert [(r["dataset"], r["seed"]) for r in merged["results"]] == \
        [(name, s) for name in (a, b, "added-set") for s in range(len(by_set[a]))]
    assert merged["aggregates"][a] == old["aggregates"][a]
    assert merged["aggregates"][b]["ours"]["area"] == pytest.approx(
        old["aggregates"][b]["ours"]["area"] + 0.25)
    assert merged["aggregates"][b]["ours"]["vs_per-set"] == pytest.approx(
        old["aggregates"][b]["ours"]["vs_per-set"] + 0.25)
    assert merged["aggregates"]["added-set"] == old["aggregates"][a]
    assert set(merged["datasets"]) == {a, b, "added-set"}
    assert merged["spambase"] == old["spambase"]
    assert [run["datasets"] for run in merged["runs"]] == [[a, b], [b, "added-set"]]
    # a second merge appends to the runs; a Spambase part of the new run replaces the old
    again = merge_payload(merged, {**_payload(by_set[a], [a]), "spambase": {"rows": []}})
    assert len(again["runs"]) == 3 and again["spambase"] == {"rows": []}
    assert again["aggregates"][b] == merged["aggregates"][b]
    with pytest.raises(ValueError, match="seeds"):
        merge_payload(old, _payload(rerun, [b], seeds=old["config"]["seeds"] + 1))


def test_split_runs_at_most_test_episodes_of_the_test_rows():
    """The 60/20/20 split; past ``TEST_EPISODES`` test rows, the episodes run on a seeded
    random subset of them (sorted, disjoint from the training rows and the window, the
    same on every call), and the merge refuses runs whose episode counts differ."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.acquisition_quality import TEST_EPISODES, Data, merge_payload, split

    def data(n):
        X = np.zeros((n, 2))
        return Data(X, (np.arange(n) % 2).astype(float), "binary", [[0], [1]],
                    np.ones(2), ["a", "b"], "test")

    train, val, test = split(data(2000), 0)
    assert (train.size, val.size, test.size) == (1200, 400, 400)
    n = 10 * TEST_EPISODES
    train, val, test = split(data(n), 1)
    assert (train.size, val.size, test.size) == (0.6 * n, 0.2 * n, TEST_EPISODES)
    assert np.all(np.diff(test) > 0)
    assert not set(test) & (set(train) | set(val))
    assert np.array_equal(split(data(n), 1)[2], test)
    assert not np.array_equal(split(data(n), 2)[2], test)
    with pytest.raises(ValueError, match="test_episodes"):
        merge_payload(_payload([], []), _payload([], [], test_episodes=TEST_EPISODES + 1))

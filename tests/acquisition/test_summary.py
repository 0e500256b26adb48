"""The policy's summary (``algorithms.acquisition.summary``) against a brute-force episode
loop: the plain numpy decisions of ``tests/acquisition/reference.py`` over the other half
of the window, one row and one exchange rate at a time, and the loss and metric at the
stop from the predictor itself (not the loss table)."""

import math
from collections import Counter

import numpy as np
import pytest
from scipy.special import expit

from algorithms.acquisition import ConditionedAcquisition
from algorithms.acquisition.losses import row_losses
from algorithms.acquisition.summary import default_rates, summarize
from algorithms.datasets.acquisition_synthetic import make_cube_nm
from tests.acquisition.reference import ReferenceAcquisition
from tests.acquisition.test_policy import cube_nm_bayes

GROUPS = [[0], [1, 2], [3], [4]]
COSTS = [1.0, 2.0, 1.5, 0.5]
W = np.array([0.3, 1.2, -0.9, 0.8, 0.1])


def tiny(task: str, n: int = 48, seed: int = 5):
    """A tiny window where which group pays depends on the values: the sign of x0 says
    whether block (1, 2) or x3 carries the target; a fixed predictor of the known values
    (NaN read as 0)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    signal = np.where(X[:, 0] > 0, X[:, 1] - X[:, 2], 1.5 * X[:, 3])
    if task == "classification":
        y = (signal + 0.3 * rng.normal(size=n) > 0).astype(float)

        def predict(Z):
            Z = np.nan_to_num(Z)
            return expit(np.where(Z[:, 0] > 0, 2 * (Z[:, 1] - Z[:, 2]), 3 * Z[:, 3]) +
                         Z @ W * 0.2)
        return X, y, predict, "log"
    y = signal + 0.3 * rng.normal(size=n)

    def predict(Z):
        Z = np.nan_to_num(Z)
        return np.where(Z[:, 0] > 0, Z[:, 1] - Z[:, 2], 1.5 * Z[:, 3]) + 0.1 * Z @ W
    return X, y, predict, "squared"


def brute_force(policy, reference, predict, X, y, loss, rates, rows):
    """Every summary figure by hand: the gate's halves, then an episode per row and rate
    with the reference's decisions over the other half."""
    n = X.shape[0]
    perm = np.random.default_rng(policy.random_state).permutation(n)
    folds = (perm[: n // 2], perm[n // 2:])
    out = []
    for lam in rates:
        firsts, seconds, costs, sizes, losses, right, ran = (Counter(), Counter(), [], [], [],
                                                             [], [])
        for A, B in (folds, folds[::-1]):
            for i in np.sort(B[: rows // 2]):
                S, path = (), []
                while True:
                    d = reference._decide(X[i], S, None, lam, np.sort(A),
                                          policy.per_example_, None)
                    if d.group is None:
                        break
                    path.append(d.group)
                    S = tuple(sorted((*S, d.group)))
                firsts[path[0] if path else None] += 1
                seconds[path[1] if len(path) > 1 else None] += 1
                costs.append(sum(COSTS[g] for g in S))
                sizes.append(len(S))
                z = np.full(X.shape[1], np.nan)
                keep = [f for g in S for f in GROUPS[g]]
                z[keep] = X[i, keep]
                p = predict(z[None])
                losses.append(row_losses(loss, y[i:i + 1], p)[0])
                right.append(0.5 if p[0] == 0.5 else float((p[0] > 0.5) == (y[i] > 0.5)))
                ran.append(i)
        ys = y[ran]
        metric = float(np.mean(right)) if loss == "log" else \
            1.0 - float(np.mean(losses)) / float(np.var(ys))
        out.append({"exchange_rate": lam, "firsts": firsts, "seconds": seconds,
                    "mean_cost": np.mean(costs), "mean_groups": np.mean(sizes),
                    "loss": np.mean(losses), "metric": metric, "rows": len(ran)})
    return out


def counts(entries):
    return Counter({e["group"]: e["count"] for e in entries})


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("per_example", [True, False])
def test_summary_equals_a_brute_force_episode_loop(task, per_example):
    X, y, predict, loss = tiny(task)
    fit = {"groups": GROUPS, "costs": COSTS, "loss": loss}
    policy = ConditionedAcquisition(n_neighbors=5, gate=False).fit(predict, X, y, **fit)
    reference = ReferenceAcquisition(n_neighbors=5, gate=False).fit(predict, X, y, **fit)
    policy.per_example_ = reference.per_example_ = per_example
    rates = default_rates(policy)
    assert rates[-1] is None and len(rates) == 5 and all(r > 0 for r in rates[:-1])
    got = summarize(policy, rows=40)
    want = brute_force(policy, reference, predict, X, y, loss, rates, 40)
    assert got["rows"] == 40 and got["window_rows"] == 48 and got["pool"] == [0, 1, 2, 3]
    assert got["metric"] == ("accuracy" if loss == "log" else "explained_variance")
    assert got["per_example"] is per_example
    varied = False
    for entry, ref in zip(got["exchange_rates"], want, strict=True):
        assert entry["exchange_rate"] == ref["exchange_rate"]
        assert counts(entry["first_choice"]) == ref["firsts"]
        assert counts(entry["second_choice"]) == ref["seconds"]
        for key in ("first_choice", "second_choice"):
            assert sum(e["count"] for e in entry[key]) == 40
            assert math.isclose(sum(e["share"] for e in entry[key]), 1.0)
            assert [e["count"] for e in entry[key]] == sorted(
                (e["count"] for e in entry[key]), reverse=True)
        for key in ("mean_cost", "mean_groups", "loss", "metric"):
            assert entry[key] == pytest.approx(ref[key], rel=1e-9, abs=1e-12), key
        varied |= len(ref["seconds"]) > 2   # (a per-set rule: one per half at most)
    none = got["exchange_rates"][-1]   # no exchange rate: every group is bought
    assert none["mean_cost"] == pytest.approx(sum(COSTS)) and none["mean_groups"] == 4
    assert got["exchange_rates"][-2]["mean_cost"] < none["mean_cost"]   # 3 λ0 stops early
    for entry in got["exchange_rates"]:   # the first choice reads no value: one a half
        assert len(entry["first_choice"]) <= 2
        if not per_example:   # nor does any per-set choice
            assert len(entry["second_choice"]) <= 2
    assert varied == per_example   # the values steer the per-example second choice


def test_on_cube_nm_it_buys_the_context_then_the_block_it_names():
    """CUBE-NM with its Bayes predictor at 0.3 lam_0: the first choice is the context for
    every row, the second the block the context names, each about a third; it spends less
    than every group and is far more accurate than the empty set (1/2)."""
    X, y, groups, costs, _ = make_cube_nm(600, seed=3)
    policy = ConditionedAcquisition().fit(cube_nm_bayes, X, y, groups=groups, costs=costs,
                                          loss="log")
    got = summarize(policy, exchange_rates=[default_rates(policy)[1], None], rows=200)
    assert got["per_example"] and got["rows"] == 200
    rate, every = got["exchange_rates"]
    assert rate["first_choice"] == [{"group": 0, "count": 200, "share": 1.0}]
    second = {e["group"]: e["share"] for e in rate["second_choice"]}
    assert set(second) == {1, 2, 3} and min(second.values()) > 0.2, second
    assert 4.0 <= rate["mean_cost"] < 9.0 and rate["metric"] > 0.85, rate
    assert every["mean_cost"] == 10.0 and every["first_choice"][0]["group"] == 0


def test_bad_exchange_rates_are_refused():
    X, y, predict, loss = tiny("regression")
    policy = ConditionedAcquisition(n_neighbors=5, gate=False).fit(
        predict, X, y, groups=GROUPS, costs=COSTS, loss=loss)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="exchange rates"):
            summarize(policy, exchange_rates=[bad])
    with pytest.raises(ValueError, match="not fitted"):
        summarize(ConditionedAcquisition())

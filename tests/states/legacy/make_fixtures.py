"""How the states in this folder were made: by the code of commit 08758a9, the last one
before every state got the one envelope (``algorithms/states.py``). They are fixtures of
the old layouts, so never regenerate them: run with today's code this script writes
today's layout. ``expected.json`` holds what each state answered then (probe inputs and
outputs); ``tests/test_legacy_states.py`` checks that today's code still loads each one
and answers the same.

    git worktree add /tmp/old 08758a9 && cd /tmp/old
    python tests/states/legacy/make_fixtures.py <this folder>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics
from algorithms.gbfs import GBFS
from algorithms.nvsd import NVSD, RelaxedNVSD
from algorithms.online import LEARNERS
from algorithms.serialization import dumps_state

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
EXPECTED: dict = {}


def save(name: str, blob: bytes, **expected) -> None:
    (OUT / f"{name}.state").write_bytes(blob)
    EXPECTED[name] = expected


def sparse_rows(rng, n, d, per_row):
    rows = []
    for _ in range(n):
        row = np.zeros(d)
        at = rng.choice(d, size=per_row, replace=False)
        row[at] = rng.normal(size=per_row)
        rows.append(row)
    X = np.array(rows)
    w = np.zeros(d)
    w[:4] = [2.0, -1.5, 1.0, 0.5]
    y = np.where(X @ w + 0.1 * rng.normal(size=n) >= 0, 1, -1)
    return X, y


def online() -> None:
    rng = np.random.default_rng(0)
    X, y = sparse_rows(rng, 60, 30, 6)
    probe, probe_y = X[40:], y[40:]
    for name, cls in LEARNERS.items():
        params = {"n_features": 30}
        if cls.selects:
            params["budget"] = 6
        learner = cls(**params).partial_fit(X[:40], y[:40])
        scores = learner.decision_function(probe)
        resumed = learner.progressive_fit(probe, probe_y)
        learner2 = cls(**params).partial_fit(X[:40], y[:40])
        save(f"online-{name}", dumps_state(learner2.state_dict()),
             probe=probe.tolist(), probe_y=probe_y.tolist(), scores=scores.tolist(),
             resumed_scores=resumed.tolist())
    # a selector over more than 2^21 features: the cuckoo feature map
    d = (1 << 21) + 5
    cols = rng.integers(0, d, size=(50, 5))
    vals = rng.normal(size=(50, 5))
    indptr = np.arange(0, 251, 5)
    big = sp.csr_matrix((vals.ravel(), cols.ravel(), indptr), shape=(50, d))
    big.sum_duplicates()
    labels = np.where(vals[:, 0] >= 0, 1, -1)
    learner = LEARNERS["fofs"](n_features=d, budget=8).partial_fit(big[:40], labels[:40])
    scores = learner.decision_function(big[40:])
    probe = big[40:].tocoo()
    save("online-fofs-hashed", dumps_state(learner.state_dict()),
         probe_rows=probe.row.tolist(), probe_cols=probe.col.tolist(),
         probe_values=probe.data.tolist(), n_features=d, scores=scores.tolist())


def online_snapshot() -> None:
    from service.online.host import ModelHost
    from service.schemas import ModelSpec

    rng = np.random.default_rng(1)
    X, y = sparse_rows(rng, 50, 30, 6)
    spec = ModelSpec(name="m", algorithm="sofs", budget=6, n_features=30, params={"r": 0.5},
                     created_at=1.0)
    host = ModelHost(spec)
    host.install((host.learner.partial_fit(X[:40], y[:40]), {
        "log_id": "1700000000000-3", "progressive_examples": 40, "progressive_correct": 31,
        "feature_names": {0: "first", 3: "fourth"}}))
    blob, _ = host.snapshot_blob()
    save("service-online-snapshot", blob, spec=spec.model_dump(mode="json"),
         probe=X[40:].tolist(), scores=host.learner.decision_function(X[40:]).tolist())


def anytime() -> None:
    from algorithms.datasets.anytime_synthetic import make_anytime_groups

    data = make_anytime_groups(n_samples=120, n_plain_groups=3, n_copies=2, seed=3)
    X, y = data.X, data.y
    model = AnytimeLinearModel(groups=data.groups, costs=data.costs, method="cs-g-fr",
                               budget=30.0, alpha=1e-3)
    model.fit(X[:90], y[:90], X_val=X[90:], y_val=y[90:])
    probe = X[90:96]
    save("anytime-linear-model", model.to_bytes(), probe=probe.tolist(),
         full=model.predict(probe).tolist(), budget_5=model.predict(probe, budget=5.0).tolist(),
         groups_02=model.predict(probe, groups=[0, 2]).tolist(),
         next_after_0=model.next_group([0]), next_budget=model.next_group([], budget=4.0),
         sequence=model.sequence_.tolist())
    stats = SufficientStatistics.from_data(X[:50], y[:50])
    save("anytime-sufficient-statistics", stats.to_bytes(), n=stats.n,
         mean_y=stats.mean_y, myy=stats.myy, mean_x=stats.mean_x.tolist())


def gbfs() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 6))
    y = (X[:, 0] + 0.5 * X[:, 3] > 0).astype(int)
    grouped = GBFS(n_estimators=4, max_depth=2, mu=0.5, feature_groups=[[0, 1], [2, 3], [4, 5]],
                   group_costs=[1.0, 2.0, 0.5], random_state=0, subsample=0.8).fit(X, y)
    probe = X[:6]
    save("gbfs-grouped", grouped.to_bytes(), probe=probe.tolist(),
         scores=grouped.decision_function(probe).tolist(),
         scores_groups_0=grouped.decision_function(probe, computed=[0, 1]).tolist(),
         next_after_none=grouped.next_group(set()),
         selected_groups=grouped.selected_groups_.tolist())
    target = X[:, 1] - X[:, 2] ** 2
    plain = GBFS(loss="squared", n_estimators=3, max_depth=3, mu=0.1, reg_lambda=1.0,
                 split_gain="newton", feature_costs=np.arange(1.0, 7.0)).fit(X, target)
    save("gbfs-squared", plain.to_bytes(), probe=probe.tolist(),
         predictions=plain.predict(probe).tolist(),
         computed_1=plain.predict(probe, computed=[1]).tolist(),
         selected=plain.selected_features_.tolist())


def nvsd() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(24, 4))
    y = X[:, 0] ** 2 + X[:, 1] + 0.05 * rng.normal(size=24)
    model = NVSD(regularizer="gl", groups=[[0, 1], [2], [3]], tau=0.05, nu=1e-2,
                 max_iter=300).fit(X, y)
    probe = X[:5] + 0.1
    save("nvsd", model.to_bytes(), probe=probe.tolist(),
         predictions=model.predict(probe).tolist(),
         support=model.support_.tolist())
    save("nvsd-unfitted", NVSD(regularizer="en", mu=0.3, tau=2.0).to_bytes(),
         params=NVSD(regularizer="en", mu=0.3, tau=2.0).get_params())
    relaxed = RelaxedNVSD(nus=(1e-2,), n_taus=3, alphas=(1e-3, 1e-1), regularizer="l",
                          max_iter=200).fit(X, y)
    save("relaxed-nvsd", relaxed.to_bytes(), probe=probe.tolist(),
         predictions=relaxed.predict(probe).tolist(),
         computed_0=relaxed.predict(probe, computed=[0]).tolist(),
         next_unit_none=relaxed.next_unit([]), support=relaxed.support_.tolist(),
         mu_=relaxed.mu_)


GROUPS = [{"name": "a", "features": ["a1", "a2"], "cost": 1.0},
          {"name": "b", "features": ["b1"], "cost": 2.0},
          {"name": "c", "features": ["c1", "c2"], "cost": 0.5}]


def artifacts() -> None:
    from service.batch import artifact as artifacts
    from service.batch.spec import BatchLayout, split_params
    from service.batch.worker.fit import fit
    from service.batch.worker.fold_state import BatchFoldState
    from service.schemas import ModelSpec

    rng = np.random.default_rng(6)
    X = rng.normal(size=(70, 5))
    y_reg = X[:, 0] - 2 * X[:, 2] + X[:, 3] * X[:, 4] + 0.1 * rng.normal(size=70)
    y_cls = np.where(X[:, 0] + X[:, 3] > 0, 1.0, -1.0)
    cases = [
        ("cs-g-omp", "regression", {"validation_fraction": 0.2}),
        ("gbfs", "classification", {"n_estimators": 4, "max_depth": 2, "mu": 0.3}),
        ("nvsd", "regression", {"nus": [1e-2], "n_taus": 3, "alphas": [1e-3, 1e-1],
                                "max_iter": 200, "window": {"size": 40}}),
        ("nvsd", "regression", {"estimator": "plain", "tau": 0.05, "nu": 1e-2,
                                "max_iter": 200, "window": {"size": 40}}),
    ]
    for algorithm, task, params in cases:
        spec = ModelSpec(name="d", algorithm=algorithm, task=task, groups=GROUPS,
                         params=params, created_at=1.0)
        layout, batch_params = BatchLayout(spec), split_params(spec)
        y = y_cls if task == "classification" else y_reg
        state = BatchFoldState(spec.family, layout, batch_params)
        for k in range(7):
            rows = slice(10 * k, 10 * k + 10)
            state.apply_entry(f"17000000000{k:02d}-0", _csr(X[rows]), y[rows])
        training, validation = state.training_copy()
        model, metrics = fit(spec.family, spec.algorithm, spec.task, layout, batch_params,
                             training, validation)
        meta = {"version": 1, "created_at": 2.0, "family": spec.family,
                "algorithm": spec.algorithm, "task": spec.task, "params": spec.params,
                "estimator": batch_params.estimator, "job": "j", "examples_used": 50,
                "validation_examples": 20, "trained_through": state.applied_id,
                "metrics": metrics}
        stats = validation if spec.family == "anytime" else None
        blob = artifacts.pack(model, stats, meta)
        loaded = artifacts.unpack(blob, spec.family, layout)
        probe = sp.csr_matrix(X[:4])
        answers = {json.dumps(S): loaded.answer(probe, S, budget)
                   for S, budget in (([], None), ([0], 2.5), ([0, 2], None), ([0, 1, 2], None))}
        name = f"artifact-{algorithm}-{params.get('estimator', 'default')}"
        save(name, blob, spec=spec.model_dump(mode="json"), probe=X[:4].tolist(),
             answers=answers, sequence=loaded.sequence())
        fold = state.state_dict()
        fold["svc_model"] = spec.model_dump(mode="json")
        save(f"fold-{algorithm}-{params.get('estimator', 'default')}", dumps_state(fold),
             spec=spec.model_dump(mode="json"), examples=state.examples,
             applied_id=state.applied_id, train_examples=state.train_examples,
             validation_examples=state.validation_examples)


def _csr(X):
    from algorithms.sparse import as_csr_batch

    return as_csr_batch(X)


if __name__ == "__main__":
    online()
    online_snapshot()
    anytime()
    gbfs()
    nvsd()
    artifacts()
    (OUT / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")

"""How the states in this folder were made: by the code of commit d70ab54, the last one
before the batch families became adapters (``service/batch/families``) and the artifact
went through the library's envelope. They are fixtures of artifact format 2 and of the
unversioned batch fold snapshot, so never regenerate them: run with today's code this
script writes today's layout. ``expected.json`` holds what each state answered then
(probe rows, answers, sequences); ``tests/test_v2_states.py`` checks that today's code
loads each one and answers exactly the same.

    git worktree add /tmp/old d70ab54 && cd /tmp/old
    python tests/states/v2/make_fixtures.py <this folder>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from algorithms.serialization import dumps_state
from algorithms.sparse import as_csr_batch
from service.batch import artifact as artifacts
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.fit import fit
from service.batch.worker.fold_state import BatchFoldState
from service.schemas import ModelSpec

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
EXPECTED: dict = {}
GROUPS = [{"name": "a", "features": ["a1", "a2"], "cost": 1.0},
          {"name": "b", "features": ["b1"], "cost": 2.0},
          {"name": "c", "features": ["c1", "c2"], "cost": 0.5}]
CASES = [
    ("cs-g-omp", "regression", {"validation_fraction": 0.2}),
    ("cs-g-omp", "classification", {"validation_fraction": 0.3}),
    ("gbfs", "regression", {"n_estimators": 5, "max_depth": 2}),
    ("gbfs", "classification", {"n_estimators": 4, "max_depth": 2, "mu": 0.3}),
    ("nvsd", "regression", {"nus": [1e-2], "n_taus": 3, "alphas": [1e-3, 1e-1],
                            "max_iter": 200, "window": {"size": 40}}),
    ("nvsd", "regression", {"estimator": "plain", "tau": 0.05, "nu": 1e-2,
                            "max_iter": 200, "window": {"size": 40}}),
    ("auto", "classification", {"gbfs_params": {"n_estimators": 4, "max_depth": 2}}),
]
SETS = (([], None), ([], 1.2), ([0], 2.5), ([2], 0.4), ([0, 2], None), ([0, 1, 2], None))


def name_of(algorithm: str, task: str, params: dict) -> str:
    return f"{algorithm}-{task}-{params.get('estimator', 'default')}"


def main() -> None:
    rng = np.random.default_rng(29)
    X = rng.normal(size=(90, 5))
    y_reg = X[:, 0] - 2 * X[:, 2] + X[:, 3] * X[:, 4] + 0.1 * rng.normal(size=90)
    y_cls = np.where(X[:, 0] + X[:, 3] + 0.3 * rng.normal(size=90) > 0, 1.0, -1.0)
    probe = sp.csr_matrix(X[:5])
    for algorithm, task, params in CASES:
        spec = ModelSpec(name="d", algorithm=algorithm, task=task, groups=GROUPS,
                         params=params, created_at=1.0)
        layout, batch_params = BatchLayout(spec), split_params(spec)
        y = y_cls if task == "classification" else y_reg
        state = BatchFoldState(spec.family, layout, batch_params)
        for k in range(9):
            rows = slice(10 * k, 10 * k + 10)
            state.apply_entry(f"17000000000{k:02d}-0", as_csr_batch(X[rows]), y[rows])
        training, validation = state.training_copy()
        held_out = state.held_out_copy()
        model, metrics = fit(spec.family, spec.algorithm, spec.task, layout, batch_params,
                             training, validation)
        meta = {"version": 3, "created_at": 2.0, "family": spec.family,
                "algorithm": spec.algorithm, "task": spec.task, "params": spec.params,
                "estimator": batch_params.estimator, "job": "j",
                "examples_used": state.train_examples,
                "validation_examples": state.validation_examples,
                "trained_through": state.applied_id, "metrics": metrics}
        stats = validation if spec.family == "anytime" else None
        blob = artifacts.pack(model, stats, meta, artifacts.held_out_for(spec.family, held_out))
        loaded = artifacts.unpack(blob, spec.family, layout)
        answers = {json.dumps([S, budget]): loaded.answer(probe, S, budget)
                   for S, budget in SETS}
        budget_sets = {str(b): loaded.budget_set(b) for b in (0.0, 0.5, 1.5, 3.5, 10.0)}
        name = name_of(algorithm, task, params)
        (OUT / f"artifact-{name}.state").write_bytes(blob)
        EXPECTED[f"artifact-{name}"] = {
            "spec": spec.model_dump(mode="json"), "probe": X[:5].tolist(),
            "answers": answers, "sequence": loaded.sequence(), "budget_sets": budget_sets}
        fold = state.state_dict()
        fold["svc_model"] = spec.model_dump(mode="json")
        (OUT / f"fold-{name}.state").write_bytes(dumps_state(fold))
        EXPECTED[f"fold-{name}"] = {
            "spec": spec.model_dump(mode="json"), "examples": state.examples,
            "applied_id": state.applied_id, "train_examples": state.train_examples,
            "validation_examples": state.validation_examples,
            "held_out_rows": None if held_out is None else len(held_out[1])}
    (OUT / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

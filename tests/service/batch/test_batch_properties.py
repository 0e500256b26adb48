"""Properties of budgeted answers: for random statistics and random subsets S ⊂ T the
expected training explained variance of T is at least that of S, and the next group is
never one already computed (nor over the budget)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics
from service.batch.artifact import Artifact
from service.batch.jobs import VersionMeta
from service.batch.families.anytime import expected_ev
from service.batch.spec import BatchLayout
from service.schemas import ModelCreate


@st.composite
def problems(draw):
    sizes = draw(st.lists(st.integers(1, 3), min_size=2, max_size=6))
    costs = draw(st.lists(st.floats(0.1, 5.0), min_size=len(sizes), max_size=len(sizes)))
    seed = draw(st.integers(0, 2**31 - 1))
    n = draw(st.integers(sum(sizes) + 2, 80))
    method = draw(st.sampled_from(["cs-g-omp", "cs-g-fr", "no-whiten", "single"]))
    T = draw(st.sets(st.integers(0, len(sizes) - 1)))
    S = draw(st.sets(st.sampled_from(sorted(T)))) if T else set()
    budget = draw(st.none() | st.floats(0.0, 20.0))
    return sizes, costs, seed, n, method, sorted(S), sorted(T), budget


def artifact(sizes, costs, seed, n, method) -> Artifact:
    rng = np.random.default_rng(seed)
    D = sum(sizes)
    X = rng.standard_normal((n, D)) @ rng.standard_normal((D, D))
    y = X @ rng.standard_normal(D) + rng.standard_normal(n)
    groups = [{"name": f"g{j}", "features": [f"g{j}f{i}" for i in range(s)], "cost": c}
              for j, (s, c) in enumerate(zip(sizes, costs, strict=True))]
    spec = ModelCreate(name="p", algorithm=method, groups=groups)
    layout = BatchLayout(spec)
    model = AnytimeLinearModel(groups=layout.groups, costs=layout.costs,
                               method=method).fit_statistics(SufficientStatistics.from_data(X, y))
    return Artifact(VersionMeta(version=1, task="regression"), "anytime", model, None,
                    layout)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_expected_variance_is_monotone_and_next_group_is_new(problem):
    sizes, costs, seed, n, method, S, T, budget = problem
    served = artifact(sizes, costs, seed, n, method)
    ev_S, basis = expected_ev(served, S)
    ev_T, _ = expected_ev(served, T)
    assert basis == "train"
    assert ev_T >= ev_S - 1e-6 * max(1.0, abs(ev_S))
    for computed in (S, T):
        choice = served.next_group(computed, budget)
        if choice is not None:
            g = served.layout.group_index[choice["name"]]
            assert g not in computed
            if budget is not None:
                assert served.layout.cost_of(computed) + choice["cost"] <= budget + 1e-9

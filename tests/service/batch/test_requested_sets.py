"""The requested-sets sketch (Space-Saving) keeps the heavy hitters of a skewed stream
within its guarantee (every count over-estimates by at most N/k; every set above N/k is
kept), from many threads at once; processes' published counts merge per incarnation; the
auto family puts pinned sets first, then the most requested, up to max_specialists."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np

from service.batch import requested_sets
from service.batch.families import family_of
from service.batch.layout import BatchLayout
from service.batch.requested_sets import SpaceSaving, encode, merge, ranked
from service.batch.spec import split_params
from service.schemas import ModelCreate
from tests.support.batch_data import DIABETES_GROUPS


def _stream(n: int, seed: int) -> list[tuple[int, ...]]:
    """80 % of the requests on 5 sets, the rest Zipf-spread over 500 others."""
    rng = np.random.default_rng(seed)
    heavy = [(0,), (0, 1), (1, 2), (0, 2, 3), (3,)]
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            out.append(heavy[int(rng.integers(5))])
        else:
            k = min(int(rng.zipf(1.3)), 500)
            out.append(tuple(range(10, 10 + k % 7)) + (100 + k,))
    return out


def test_space_saving_keeps_the_heavy_hitters_within_its_guarantee():
    stream = _stream(20_000, 0)
    truth = Counter(stream)
    sketch = SpaceSaving(k=16)
    for S in stream:
        sketch.add([(S, 1)])
    N = len(stream)
    assert sketch.total == N and len(sketch.counts) == 16
    for S, count in sketch.counts.items():
        assert truth[S] <= count <= truth[S] + N / 16
        assert sketch.guaranteed(S) <= truth[S]
    for S, true in truth.items():
        if true > N / 16:
            assert S in sketch.counts
    assert {S for S, _ in sketch.top(5)} == {S for S, _ in truth.most_common(5)}


def test_threads_lose_no_counts():
    sketch = SpaceSaving(k=8)
    sets = [(g,) for g in range(4)]

    def work():
        for _ in range(2000):
            sketch.add([(S, 2) for S in sets])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert dict(sketch.top()) == {S: 4 * 2000 * 2 for S in sets}


def test_record_skips_the_empty_set_and_processes_merge_per_incarnation():
    requested_sets.forget("m")
    requested_sets.record("m", "i1", [((2, 0), 3), ((), 5), ((1,), 1)])
    requested_sets.record("m", "i1", [((2, 0), 1)])
    sketch = requested_sets.sketch_for("m", "i1")
    assert dict(sketch.top()) == {(2, 0): 4, (1,): 1}
    other = SpaceSaving()
    other.add([((1,), 7)])
    published = [encode("i1", sketch), encode("i1", other), encode("old", other), b"junk"]
    assert merge(published, "i1") == {(2, 0): 4, (1,): 8}
    assert ranked(merge(published, "i1")) == [(1,), (2, 0)]
    requested_sets.forget("m")
    assert dict(requested_sets.sketch_for("m", "i1").top()) == {}
    requested_sets.forget("m")


def test_auto_puts_pinned_sets_first_then_the_most_requested():
    spec = ModelCreate(name="a", algorithm="auto", groups=DIABETES_GROUPS,
                       params={"specialist_sets": [["glucose", "exam"]],
                               "max_specialists": 3})
    params, layout = split_params(spec), BatchLayout(spec)
    family = family_of(spec.family)
    out = family.specialist_params(params, layout, [(1, 3), (0,), (2,), (0, 1)])
    assert out.algorithm["specialist_sets"] == [["glucose", "exam"], ["demographics"],
                                                ["lipids"]]
    assert family.specialist_params(params, layout, [(1, 3)]) is params
    model = family.build_estimator("auto", "regression", layout, out)
    assert model.specialist_sets == [[1, 3], [0], [2]]


def test_size_and_fit_time_estimates_count_the_specialists():
    from service.batch.spec import estimate_fit_seconds, estimate_sizes

    def estimates(**params):
        spec = ModelCreate(name="a", algorithm="auto", groups=DIABETES_GROUPS,
                           params={"gbfs_params": {"n_estimators": 100}, **params})
        split = split_params(spec)
        return estimate_sizes(spec, split).artifact, estimate_fit_seconds(spec, split)

    none, two, eight = (estimates(max_specialists=0), estimates(max_specialists=2),
                        estimates())
    per_version = 25 * 100 * 31 + 8 * 10 * 255 + 8 * 10   # one specialist at most
    assert two[0] - none[0] == 2 * per_version and eight[0] - none[0] == 8 * per_version
    assert none[1] < two[1] < eight[1]

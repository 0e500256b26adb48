"""A read of FBX1 entries parsed as one block (service/batch/worker/ingest.py
parse_batch_entries) gives what parsing entry by entry gives, and declines (None) every read
that entry-by-entry parsing would reject in part; folding the block equals folding the
entries."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.anytime import SufficientStatistics
from service import fbx1
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.fold_state import BatchFoldState, held_out
from service.batch.worker.ingest import parse_batch_entries, parse_batch_entry
from service.schemas import ModelCreate

GROUPS = [{"name": f"g{g}", "features": [f"g{g}_f{k}" for k in range(5)], "cost": 1.0 + g}
          for g in range(4)]


def layout(task="regression"):
    spec = ModelCreate(name="m", algorithm="cs-g-omp", task=task, groups=GROUPS)
    return spec, BatchLayout(spec)


def payloads(seed: int, sizes, value_bytes=8, labels=False):
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        X = sp.random(n, 20, density=0.4, format="csr", random_state=rng.integers(1 << 30))
        y = rng.choice([-1.0, 1.0], n) if labels else rng.normal(size=n) * 100
        out.append(fbx1.encode_batch(X.indptr, X.indices, X.data, y, targets=True,
                                     value_bytes=value_bytes))
    return out


@pytest.mark.parametrize("value_bytes", [8, 4])
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, "uint8"])
def test_a_block_parses_like_its_entries(value_bytes, kind):
    _, lay = layout()
    raw = payloads(1, [1, 1, 3, 1, 7, 1, 2], value_bytes)
    convert = (lambda b: np.frombuffer(b, dtype=np.uint8)) if kind == "uint8" else kind
    fields = [{b"fmt": b"bin", b"data": convert(b)} for b in raw]
    batch, counts = parse_batch_entries(fields, lay, "regression")
    one = [parse_batch_entry({b"fmt": b"bin", b"data": b}, lay, "regression") for b in raw]
    assert counts == [len(b) for b in one]
    want = sp.vstack([b.X.to_scipy() for b in one], format="csr")
    got = batch.X.to_scipy()
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)
    np.testing.assert_array_equal(batch.labels, np.concatenate([b.labels for b in one]))


def bad_payloads():
    good = payloads(2, [2])[0]
    nan_target = bytearray(good)
    nan_target[-8:] = np.array([np.nan]).tobytes()
    big_index = fbx1.encode_batch([0, 1], [25], [1.0], [0.5], targets=True)
    duplicate = fbx1.encode_batch([0, 2], [3, 3], [1.0, 2.0], [0.5], targets=True)
    inf_value = fbx1.encode_batch([0, 1], [3], [np.inf], [0.5], targets=True)
    lengths = bytearray(fbx1.encode_batch([0, 1, 2], [3, 4], [1.0, 2.0], [0.5, 1.5],
                                          targets=True))
    lengths[16:20] = np.array([2], dtype="<u4").tobytes()  # rows 2 + 1 != nnz 2
    labels = fbx1.encode_batch([0, 1], [3], [1.0], np.array([1], dtype=np.int8))
    return {"nan target": bytes(nan_target), "index past D": big_index,
            "duplicate index": duplicate, "infinite value": inf_value,
            "row lengths": bytes(lengths), "int8 labels": labels, "short": good[:10],
            "empty": fbx1.encode_batch([0], [], [], np.zeros(0), targets=True)}


@pytest.mark.parametrize("name", sorted(bad_payloads()))
def test_a_read_with_a_bad_entry_is_left_to_entry_by_entry_parsing(name):
    _, lay = layout()
    good = payloads(3, [1, 2])
    fields = [{b"fmt": b"bin", b"data": b} for b in (good[0], bad_payloads()[name], good[1])]
    assert parse_batch_entries(fields, lay, "regression") is None


def test_other_formats_and_classification_labels_are_left_alone():
    _, lay = layout("classification")
    ok = payloads(4, [2, 1], labels=True)
    assert parse_batch_entries([{b"fmt": b"bin", b"data": b} for b in ok], lay,
                               "classification") is not None
    not_pm1 = payloads(4, [2])
    assert parse_batch_entries([{b"fmt": b"bin", b"data": b} for b in ok + not_pm1], lay,
                               "classification") is None
    assert parse_batch_entries([{b"fmt": b"libsvm", b"data": b"1 1:2\n"}], lay,
                               "classification") is None
    assert parse_batch_entries([{b"data": ok[0]}], lay, "classification") is None  # no fmt
    assert parse_batch_entries([], lay, "classification") is None


def test_folding_the_block_equals_folding_the_entries_and_one_pass():
    spec, lay = layout()
    raw = payloads(5, [1] * 40 + [30, 1, 1, 25])
    ids = [f"{1700000000000 + k}-0" for k in range(len(raw))]
    by_entry = BatchFoldState(spec.family, lay, split_params(spec))
    parsed = [parse_batch_entry({b"fmt": b"bin", b"data": b}, lay, "regression") for b in raw]
    by_entry.apply_entries([(i, b.X, b.labels) for i, b in zip(ids, parsed, strict=True)])
    block = BatchFoldState(spec.family, lay, split_params(spec))
    batch, counts = parse_batch_entries([{b"fmt": b"bin", b"data": b} for b in raw], lay,
                                        "regression")
    block.apply_block(ids, counts, batch.X.to_scipy(), batch.labels)
    assert block.applied_id == by_entry.applied_id == ids[-1]
    assert block.examples == by_entry.examples == sum(counts)
    for a, b in ((block.train, by_entry.train), (block.validation, by_entry.validation)):
        assert a.n == b.n
        np.testing.assert_array_equal(a.mxx, b.mxx)  # the same block: the same bits
    X = sp.vstack([b.X.to_scipy() for b in parsed]).toarray()
    y = np.concatenate([b.labels for b in parsed])
    fraction = split_params(spec).validation_fraction
    held = np.concatenate([held_out(i, c, fraction) for i, c in zip(ids, counts, strict=True)])
    one_pass = SufficientStatistics.from_data(X[~held], y[~held], X.shape[1])
    scale = np.abs(one_pass.mxx).max()
    np.testing.assert_allclose(block.train.mxx, one_pass.mxx, rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(block.train.mean_x, one_pass.mean_x, rtol=1e-10, atol=1e-12)

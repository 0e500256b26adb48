"""Log entries of a multi-class batch model (what a producer XADDs, and what the service
appends for a JSON body): FBX1 targets are class indices; the block fast path takes them,
an entry with a label outside 0..K-1 falls back to entry-by-entry parsing, which refuses
that entry naming the item and label (the fold dead-letters it)."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.sparse import CSRBatch
from service.batch.spec import BatchLayout
from service.batch.worker.ingest import parse_batch_document, parse_batch_entries, parse_batch_entry
from service.errors import InputError
from service.ingest import ExampleBatch
from service.schemas import ModelCreate

GROUPS = [{"name": "a", "features": ["x"], "cost": 1}, {"name": "b", "features": ["z"],
                                                       "cost": 2}]


def layout(classes=("cat", "dog", "owl")) -> BatchLayout:
    return BatchLayout(ModelCreate(name="m", algorithm="gbfs", task="classification",
                                   groups=GROUPS, params={"classes": list(classes)}))


def entry(targets) -> dict:
    n = len(targets)
    batch = ExampleBatch(CSRBatch(np.arange(n + 1, dtype=np.int64), np.zeros(n, np.int32),
                                  np.ones(n), 2), np.asarray(targets, dtype=np.float64))
    return {b"fmt": b"bin", b"data": batch.encode()}


def test_json_labels_become_the_indices_the_entries_carry():
    shapes = layout()
    batch, _ = parse_batch_document({"examples": [
        {"features": {"a": {"x": 1.0}}, "label": "owl"},
        {"features": {"b": {"z": 2.0}}, "label": "cat"}]}, shapes, "classification")
    np.testing.assert_array_equal(batch.labels, [2.0, 0.0])
    again = parse_batch_entry({b"fmt": b"bin", b"data": batch.encode()}, shapes,
                              "classification")
    np.testing.assert_array_equal(again.labels, [2.0, 0.0])


def test_a_block_of_index_entries_and_a_bad_one():
    shapes = layout()
    block, counts = parse_batch_entries([entry([0, 1]), entry([2])], shapes,
                                        "classification")
    np.testing.assert_array_equal(block.labels, [0.0, 1.0, 2.0])
    assert counts == [2, 1]
    assert parse_batch_entries([entry([0]), entry([3])], shapes, "classification") is None
    for bad, shown in (([3.0], "3.0"), ([0.5], "0.5"), ([-1.0], "-1.0")):
        with pytest.raises(InputError, match=f"label {shown} is not a class index 0..2"):
            parse_batch_entry(entry(bad), shapes, "classification")


def test_a_binary_model_still_reads_plus_minus_one():
    binary = BatchLayout(ModelCreate(name="m", algorithm="gbfs", task="classification",
                                     groups=GROUPS, params={}))
    assert binary.classes is None
    block, _ = parse_batch_entries([entry([1, -1])], binary, "classification")
    np.testing.assert_array_equal(block.labels, [1.0, -1.0])
    assert parse_batch_entries([entry([2])], binary, "classification") is None

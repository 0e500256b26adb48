"""The chaos test's state check (load_tests/chaos.py ``same``): a fold of the chaos traffic in
blocks, as the service folds it, passes against one pass entry by entry although its sums run
in another order; a missing example or a float off by 1e-6 relative fails; counts exact."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "load_tests"))

import chaos  # noqa: E402

from service.batch.spec import BatchLayout, split_params  # noqa: E402
from service.batch.worker.fold_state import BatchFoldState  # noqa: E402
from service.batch.worker.ingest import parse_batch_entry  # noqa: E402
from service.schemas import ModelCreate  # noqa: E402


def traffic(n_entries: int) -> list[tuple[bytes, dict]]:
    run = chaos.Run("http://unused", "redis://unused", 3, "http://unused")
    return [(f"{1700000000000 + k}-0".encode(), {b"fmt": b"bin", b"data": run.batch_entry()})
            for k in range(n_entries)]


def folded_in_blocks(entries, block: int) -> dict:
    """What the service does: entries read together fold as one block."""
    spec = ModelCreate(**chaos.BATCH)
    state = BatchFoldState(spec.family, BatchLayout(spec), split_params(spec))
    parsed = [(i.decode(), parse_batch_entry(f, state.layout, spec.task)) for i, f in entries]
    for start in range(0, len(parsed), block):
        state.apply_entries([(i, b.X, b.labels) for i, b in parsed[start:start + block]])
    return state.state_dict()


@pytest.fixture(scope="module")
def log():
    return traffic(200)


def test_a_fold_in_blocks_equals_one_pass_within_the_stated_tolerance(log):
    expected = chaos.batch_oracle(log)
    served = folded_in_blocks(log, 37)
    assert chaos.same(served, expected) == []
    assert served["examples"] == expected["examples"] == 2000
    assert chaos.RTOL == 1e-9


def test_the_summation_order_difference_is_real_so_bit_for_bit_would_fail(log):
    """The case the check used to get wrong: block sums differ from one pass in the last
    bits (an exact comparison, rtol 0, names them)."""
    expected = chaos.batch_oracle(log)
    served = folded_in_blocks(log, 37)
    assert chaos.same(served, expected, rtol=0.0) != []
    for key, value in expected.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
            scale = np.abs(value).max()
            assert np.abs(served[key] - value).max() <= 1e-12 * scale, key


def test_a_missing_example_fails(log):
    expected = chaos.batch_oracle(log)
    short = list(log)
    # the last entry with one example fewer: counts and sums both differ
    entry_id, fields = short[-1]
    spec = ModelCreate(**chaos.BATCH)
    layout = BatchLayout(spec)
    batch = parse_batch_entry(fields, layout, spec.task)
    state = BatchFoldState(spec.family, layout, split_params(spec))
    for i, f in short[:-1]:
        b = parse_batch_entry(f, layout, spec.task)
        state.apply_entry(i.decode(), b.X, b.labels)
    X = batch.X.to_scipy()[:-1]
    state.apply_block([entry_id.decode()], [X.shape[0]], X, batch.labels[:-1])
    differs = chaos.same(state.state_dict(), expected)
    assert "examples" in differs
    assert any(key not in ("examples",) for key in differs)


def test_a_float_off_by_a_millionth_fails_and_counts_are_exact(log):
    expected = chaos.batch_oracle(log)
    key = next(k for k, v in expected.items()
               if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size)
    off = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in expected.items()}
    flat = off[key].reshape(-1)
    j = int(np.abs(flat).argmax())
    flat[j] *= 1 + 1e-6
    assert chaos.same(off, expected) == [key]
    assert chaos.same({**expected, "examples": expected["examples"] + 1}, expected) == \
        ["examples"]


@pytest.mark.parametrize(("left", "right", "differs"), [
    (np.array([1.0, np.nan, np.inf]), np.array([1.0 + 1e-12, np.nan, np.inf]), False),
    (np.array([1.0, np.nan]), np.array([1.0, 0.0]), True),
    (np.array([np.inf]), np.array([-np.inf]), True),
    (np.array([1, 2], dtype=np.int64), np.array([1, 2], dtype=np.int64), False),
    (np.array([1, 2], dtype=np.int64), np.array([1, 3], dtype=np.int64), True),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0]), True),
    (np.zeros(0), np.zeros(0), False),
    (0.5, 0.5 * (1 + 1e-13), False),
    (0.5, 0.5 * (1 + 1e-6), True),
    (3, 3, False),
    (3, 4, True),
    ("1-0", "1-0", False),
    (1.0, None, True),
])
def test_values(left, right, differs):
    assert (chaos.same({"k": left}, {"k": right}) == ["k"]) is differs

"""The prefetch hints: each compiles to one read hint for the line ``STREAM_AHEAD`` entries
ahead (``stream_ahead``) or at the index given (``prefetch``), accepts addresses past an
array's end (a hint never faults) and changes no result. Whether they pay is measured by
``benchmarks/online.py`` (training throughput), not here."""

import platform
import re

import numpy as np
import pytest
from numba import njit

from algorithms.sparse._prefetch import STREAM_AHEAD, prefetch, stream_ahead


@njit(cache=True)
def _sum_with_hints(indices, values, far):
    total = 0.0
    for k in range(len(values)):
        stream_ahead(indices, values, k)
        prefetch(values, np.uint32(indices[k]))
        prefetch(values, far)
        total += values[np.uint32(indices[k])]
    return total


@njit(cache=True)
def _sum_plain(indices, values):
    total = 0.0
    for k in range(len(values)):
        total += values[np.uint32(indices[k])]
    return total


@njit
def _stream(indices, values, k):
    stream_ahead(indices, values, k)


@njit
def _hint(values, index):
    prefetch(values, index)


def _compiled(function, *args) -> tuple[str, str]:
    function(*args)
    signature = function.signatures[0]
    return function.inspect_llvm(signature), function.inspect_asm(signature)


def _hints(llvm: str) -> list[str]:
    return re.findall(r"call void @llvm\.prefetch[.\w]*\(ptr [^,]+, (i32 \d+, i32 \d+, "
                      r"i32 \d+)\)", llvm)


@pytest.mark.parametrize("far", [0, STREAM_AHEAD * 64, 1 << 40, -(1 << 20)])
def test_hints_past_the_end_are_harmless_and_change_nothing(far):
    rng = np.random.default_rng(0)
    values = rng.normal(size=100)
    indices = rng.integers(0, 100, size=100).astype(np.int32)
    assert _sum_with_hints(indices, values, np.int64(far)) == _sum_plain(indices, values)


def test_stream_ahead_hints_both_arrays_stream_ahead_entries_on():
    llvm, asm = _compiled(_stream, np.zeros(4, np.int32), np.zeros(4), np.int64(1))
    # two read hints (rw 0), kept in every cache level (locality 3), of data (type 1)
    assert _hints(llvm) == ["i32 0, i32 3, i32 1"] * 2
    assert f"add i64 %arg.k, {STREAM_AHEAD}" in llvm
    if platform.machine() in ("x86_64", "AMD64"):
        offsets = sorted(re.findall(r"prefetcht0\s+(\d+)\(", asm), key=int)
        # the entry STREAM_AHEAD ahead: 4-byte indices, 8-byte values
        assert offsets == [str(4 * STREAM_AHEAD), str(8 * STREAM_AHEAD)]


def test_prefetch_hints_the_line_of_the_entry_given():
    llvm, asm = _compiled(_hint, np.zeros(4), np.uint32(3))
    assert _hints(llvm) == ["i32 0, i32 3, i32 1"]
    assert re.search(r"zext i32 %arg\.index to i64", llvm)   # unsigned: no sign extension
    if platform.machine() in ("x86_64", "AMD64"):
        assert re.search(r"prefetcht0\s+\(%\w+,%\w+,8\)", asm)   # base + 8 * index


def test_a_hint_for_anything_but_an_array_and_an_integer_does_not_compile():
    from numba.core.errors import TypingError

    @njit
    def wrong(values):
        prefetch(values, 1.5)

    with pytest.raises(TypingError):
        wrong(np.zeros(3))


def test_two_dimensional_arrays_take_a_flat_index():
    @njit
    def touch(table, feature):
        prefetch(table, 2 * feature)
        return table[feature, 1]

    table = np.arange(20.0).reshape(10, 2)
    assert touch(table, 7) == 15.0

"""The benchmarks' shared timing helper (benchmarks/_report.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _report import SelfTimed, best_times_interleaved  # noqa: E402


def test_interleaved_rounds_call_each_function_in_turn_and_keep_the_best():
    calls = []
    reported = iter([0.3, 0.1, 0.2])

    def self_timed():
        calls.append("self")
        return SelfTimed(next(reported))

    def wall_timed():
        calls.append("wall")
        return 0.0   # a plain float is a result, not a time

    best = best_times_interleaved({"self": self_timed, "wall": wall_timed}, rounds=3)
    assert calls == ["self", "wall"] * 3
    assert best["self"] == 0.1   # the smallest seconds the function reported
    assert 0.0 < best["wall"] < 1.0   # measured around the call

"""The benchmarks' shared timing helper (benchmarks/_report.py)."""

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _report  # noqa: E402
from _report import SelfTimed, best_times_interleaved  # noqa: E402


class FakeClock:
    """``time.perf_counter`` that a wall-timed function moves by a known amount."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_interleaved_rounds_call_each_function_in_turn_and_keep_the_best(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(_report, "time", SimpleNamespace(perf_counter=clock))
    calls = []
    reported = iter([0.3, 0.1, 0.2])
    took = iter([0.5, 0.25, 0.75])

    def self_timed():
        calls.append("self")
        clock.now += 9.0   # its own seconds count, not the wall time around it
        return SelfTimed(next(reported))

    def wall_timed():
        calls.append("wall")
        clock.now += next(took)
        return 42.0   # a plain float is a result, not a time

    best = best_times_interleaved({"self": self_timed, "wall": wall_timed}, rounds=3)
    assert calls == ["self", "wall"] * 3
    assert best["self"] == 0.1   # the smallest seconds the function reported
    assert best["wall"] == 0.25   # the shortest wall time measured around the call

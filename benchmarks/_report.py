"""Shared helpers of the benchmark scripts: tables, JSON results, machine info, timing."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                            "platform": platform.platform()}
    try:
        import numba
        import numpy
        import scipy
        info.update(numpy=numpy.__version__, scipy=scipy.__version__, numba=numba.__version__)
    except ImportError:
        pass
    return info


def table(rows: list[dict[str, Any]], columns: list[str], title: str = "") -> str:
    """Render rows as a GitHub-markdown table (also readable in a terminal)."""
    def cell(value):
        if isinstance(value, float):
            if abs(value) < 10:
                return f"{value:,.4f}"
            return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
        return "" if value is None else str(value)
    lines = [f"\n### {title}\n"] if title else []
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("| " + " | ".join("---" for _ in columns) + " |")
    for row in rows:
        lines.append("| " + " | ".join(cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **payload}
    path.write_text(json.dumps(payload, indent=2, default=float))
    return path


class SelfTimed(float):
    """Seconds a function measured itself (a subprocess timing only its learning loop);
    returned by a function given to ``best_times_interleaved``, it replaces the wall time."""


def best_times_interleaved(functions: dict[str, Callable[[], Any]],
                          rounds: int = 5) -> dict[str, float]:
    """Smallest time (seconds) of each function over ``rounds`` rounds that call every
    function once, in turn: the wall time, or the ``SelfTimed`` seconds a function returns.
    On a shared machine whose speed drifts by tens of percent within minutes, timing each
    function's repeats back to back put that drift into the ratios between them;
    interleaved, every function meets the same slow and fast spells."""
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            result = function()
            elapsed = time.perf_counter() - start
            best[name] = min(best[name], result if isinstance(result, SelfTimed) else elapsed)
    return best


def best_time(function: Callable[[], Any], repeat: int = 3) -> float:
    """Smallest wall time of ``repeat`` calls (seconds)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best

"""Shared helpers of the load tests' measuring processes: CPU from /proc, and the main of a
role process that runs one coroutine on a spec the harness pickled (both ends are ours)."""

from __future__ import annotations

import asyncio
import math
import os
import pickle
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` (NaN when it is gone or unknown)."""
    if not pid:
        return math.nan
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return math.nan


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy, all cores (/proc/stat)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        return (sum(fields) - fields[3] - fields[4]) / TICK
    except (OSError, ValueError, IndexError):
        return math.nan


def run_role(main, spec_path: str, out_path: str) -> int:
    """Run ``main(spec)`` (a coroutine function) on uvloop when installed, else asyncio, and
    pickle its result dict, with the loop's name under ``"loop"``, to ``out_path``."""
    with open(spec_path, "rb") as fh:
        spec = pickle.load(fh)
    try:
        import uvloop

        result = uvloop.run(main(spec))
        result["loop"] = "uvloop"
    except ImportError:
        result = asyncio.run(main(spec))
        result["loop"] = "asyncio"
    with open(out_path, "wb") as fh:
        pickle.dump(result, fh)
    return 0

"""How much memory a new model may take: refuse at construction what could not be held.

NumPy's large ``zeros`` are mapped lazily, so an allocation beyond the machine's memory
succeeds and the process is killed later, when the pages are touched. A model whose
constructor knows its state size checks it here first.
"""

from __future__ import annotations

import os
from pathlib import Path


class StateTooLargeError(ValueError):
    """A model's state would not fit in the memory this process can still use."""


def available_bytes() -> int | None:
    """Memory this process can still take without swapping: Linux's ``MemAvailable``,
    lowered to the cgroup's remaining limit where one is set; None where neither is known."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
                break
    except (OSError, ValueError, IndexError):
        pass
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            limits.append(int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    if not limits:
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    return max(min(limits), 0)


def check_fits(what: str, needed: int) -> None:
    """Raise :class:`StateTooLargeError` naming ``what`` when ``needed`` bytes exceed
    :func:`available_bytes` (nothing is checked where the available memory is unknown)."""
    available = available_bytes()
    if available is not None and needed > available:
        raise StateTooLargeError(f"{what} needs {needed:,} bytes of state, but only "
                            f"{available:,} bytes of memory are available")

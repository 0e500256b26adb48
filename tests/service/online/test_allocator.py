"""The C allocator keeps freed ingestion buffers for reuse: a buffer of a stream entry's
size comes from the heap, not a fresh mmap, and once freed it stays there and serves the next
one (no page faults per buffer: ``service/allocator.py``; the time it saves is the binary
stream's throughput in the service benchmarks, not a test's business)."""

import subprocess
import sys
from pathlib import Path

import pytest

from service.allocator import retain_freed_memory

ROOT = Path(__file__).resolve().parents[3]

# Allocates, touches and frees a buffer of ~0.6 MB twice; prints what glibc's mallinfo2
# says: bytes in mmapped chunks while the first one lives, free heap bytes after it is
# freed, heap growth from the first allocation to the second.
CHURN = """
import ctypes, sys
import numpy as np
sys.path.insert(0, {root!r})
from service.allocator import retain_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
assert retain_freed_memory({retain}) == bool({retain})
before = libc.mallinfo2()
buffer = np.empty(600_000, dtype=np.uint8)
buffer[:] = 1
alive = libc.mallinfo2()
del buffer
freed = libc.mallinfo2()
again = np.empty(600_000, dtype=np.uint8)
again[:] = 1
second = libc.mallinfo2()
print(alive.hblkhd - before.hblkhd, freed.fordblks, second.arena - alive.arena)
"""


def churn(retain: int) -> tuple[int, int, int]:
    out = subprocess.run([sys.executable, "-c", CHURN.format(root=str(ROOT), retain=retain)],
                         check=True, capture_output=True, text=True).stdout
    mmapped, free_after, growth = map(int, out.strip().splitlines()[-1].split())
    return mmapped, free_after, growth


def _has_mallinfo2() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")   # glibc >= 2.33
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _has_mallinfo2(),
                    reason="glibc's mallopt and mallinfo2")
def test_retained_buffers_come_from_the_heap_and_are_reused():
    mmapped, free_after, growth = churn(64 << 20)
    assert mmapped == 0               # from the heap, not a fresh mmap
    assert free_after >= 600_000      # freed into the heap, not handed back
    assert growth == 0                # the next buffer reuses it
    mmapped, _, _ = churn(0)          # glibc's defaults: a fresh mmap, unmapped on free
    assert mmapped >= 600_000


def test_zero_keeps_the_defaults():
    assert retain_freed_memory(0) is False

"""Keep freed buffers in the C heap instead of handing them back to the kernel.

glibc serves allocations above ``M_MMAP_THRESHOLD`` (128 KiB at start, raised dynamically
up to 32 MiB) with a fresh ``mmap`` and gives them back on ``free``; heap space above
``M_TRIM_THRESHOLD`` is returned too. The ingestion path allocates buffers of a stream
entry's or request's size (0.1–60 MB) for every read, decode and micro-batch, so each one
was paid again in page faults: the kernel zeroes and maps every 4 KiB page on first touch
(about a fifth of the server's CPU time while a binary stream was consumed). Fixing both
thresholds keeps such buffers for reuse; what the heap may hold unused stays bounded by the
trim threshold per malloc arena.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger("featurebudget")

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's ceiling on 64-bit (HEAP_MAX_SIZE / 2)


def retain_freed_memory(trim_threshold: int) -> bool:
    """Set glibc's mmap threshold to min(trim_threshold, 32 MiB) and its trim threshold to
    ``trim_threshold`` bytes. True when applied; False when ``trim_threshold`` is 0 (keep
    the defaults) or the C library is not glibc. O(1)."""
    if trim_threshold <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    applied = (mallopt(M_MMAP_THRESHOLD, min(trim_threshold, MMAP_THRESHOLD_MAX)) == 1 and
               mallopt(M_TRIM_THRESHOLD, min(trim_threshold, 2**31 - 1)) == 1)
    if not applied:
        log.warning("could not tune the C allocator (mallopt refused)")
    return applied

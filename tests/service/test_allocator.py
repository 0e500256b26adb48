"""The C allocator keeps freed ingestion buffers for reuse (no page faults per buffer)."""

import subprocess
import sys
from pathlib import Path

import pytest

from service.allocator import retain_freed_memory

ROOT = Path(__file__).resolve().parents[2]

# Two threads allocate, touch and free buffers of a stream entry's size (~0.5 MB), as the
# parser and apply threads do; prints the minor page faults per buffer.
CHURN = """
import resource, sys, threading
import numpy as np
sys.path.insert(0, {root!r})
from service.allocator import retain_freed_memory
assert retain_freed_memory({retain}) == bool({retain})

def churn():
    for i in range(200):
        a = np.empty((60_000 + (i % 7) * 1000) * 8, dtype=np.uint8)
        a[:] = 1
        b = a.view(np.float64).copy()
        del a, b

before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
threads = [threading.Thread(target=churn) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 400)
"""


def faults_per_buffer(retain: int) -> float:
    out = subprocess.run([sys.executable, "-c", CHURN.format(root=str(ROOT), retain=retain)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_retained_buffers_are_reused_without_page_faults():
    # one fresh 0.5 MB buffer costs ~120 faults; reused ones cost none
    assert faults_per_buffer(64 << 20) < 5


def test_zero_keeps_the_defaults():
    assert retain_freed_memory(0) is False

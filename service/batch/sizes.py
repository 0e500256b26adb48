"""What a batch model costs: the sizes of its parts in bytes (:class:`SizeEstimate`), the
measured constants the families' estimates use, and the sizes of the held-out parts.

Every constant below was measured on the development machine (2 shared cores, OpenBLAS;
tracemalloc peaks of a warm process, as tests/service/operations/test_model_sizes.py measures them,
and wall times of service.batch.worker.fit.fit) and is documented in docs/operations.md. A
process's first retrain also compiles / loads kernels (about 15 MB more, once).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

from service.batch.layout import Window


def validation_size(window: Window, fraction: float) -> int:
    """Rows kept of the held-out part: in proportion to the training window."""
    if fraction <= 0:
        return 0
    return max(1, int(math.ceil(window.size * fraction / (1.0 - fraction))))


HELD_OUT_ROWS = 5000  # anytime classification: held-out rows kept for per-set figures
HELD_OUT_BYTES = 64 << 20  # ... and at most this many bytes of them


def held_out_capacity(n_features: int) -> int:
    """Rows of the anytime classification models' reservoir of held-out rows
    (``fold_state``): ``HELD_OUT_ROWS``, fewer when D is so large that they would pass
    ``HELD_OUT_BYTES`` (at least 100)."""
    return int(max(100, min(HELD_OUT_ROWS, HELD_OUT_BYTES // (8 * max(n_features, 1)))))


HEADER_BYTES = 64 << 10  # archive headers, metadata, small arrays of a blob
ANYTIME_FIT_SQUARES = 7.5  # an anytime fit's peak, in D x D float64 arrays (measured 7.3 at
# D = 1,000: the statistics' copies, the standardized Gram, the sequencing workspace, the
# packed version); group-lasso's pseudo-data: 9 (measured 8.3)
ANYTIME_LOAD_SQUARES = 5  # loading an anytime version, beyond its blob (measured 5.1)
NVSD_KERNEL_BLOCKS = 4.5  # an NVSD fit's peak in (n·D)² float64 (measured 4.1)
SNAPSHOT_COPIES = {"statistics": 1.75, "window": 2.75}  # serializing a snapshot of S bytes holds
# about this many times S (measured 1.56 statistics, 2.6 windows)


@dataclass(frozen=True)
class SizeEstimate:
    """What a batch model costs, in bytes, by part (``parts``; the 422 of a creation that
    does not fit names each):

    - ``fold_state``: the fold's statistics or windows (memory of the folding process);
    - ``snapshot``: one snapshot, stored by the backend, and ``snapshot_write``: the
      memory that serializing and writing it takes (the blob included);
    - ``fit_peak``: a retrain's working memory at its peak (the copies it fits on, the
      estimator's workspace, the version it packs), or loading that version, the larger;
    - ``served``: the served version in the memory of every serving process;
    - ``versions_kept``: ``versions`` versions of ``artifact`` bytes in the backend (the
      ``versions_kept`` newest and the current one).
    """

    fold_state: int
    snapshot: int
    snapshot_write: int
    fit_peak: int
    served: int
    artifact: int
    versions: int

    @property
    def versions_kept(self) -> int:
        return self.versions * self.artifact

    @property
    def peak_bytes(self) -> int:
        """Memory of one process that folds, retrains and serves, a snapshot being written
        meanwhile (the fold writes snapshots while a retrain runs)."""
        return self.fold_state + self.snapshot_write + self.fit_peak + self.served

    @property
    def stored_bytes(self) -> int:
        """What the backend stores: the snapshot and the kept versions."""
        return self.snapshot + self.versions_kept

    def parts(self) -> dict[str, int]:
        """Part -> bytes; their sum is :attr:`total`."""
        return {"fold_state": self.fold_state,
                "snapshot": self.snapshot + self.snapshot_write,
                "fit_peak": self.fit_peak, "served_version": self.served,
                "versions_kept": self.versions_kept}

    @property
    def total(self) -> int:
        return self.peak_bytes + self.stored_bytes


PART_NAMES = {"fold_state": "fold state", "snapshot": "snapshot (stored, and written)",
              "fit_peak": "fit peak", "served_version": "served version",
              "versions_kept": "kept versions"}


def statistics_bytes(D: int) -> int:
    """Bytes of one set of sufficient statistics over ``D`` features, with headers."""
    return 8 * (D * D + 3 * D) + HEADER_BYTES


def gbfs_options(own: Any) -> dict[str, Any]:
    """GBFS's keyword arguments, its defaults filled in, updated with ``own`` (a dict of
    them, or anything else: ignored)."""
    from algorithms.gbfs import GBFS

    options = {name: p.default for name, p in inspect.signature(GBFS.__init__).parameters.items()
               if p.default is not inspect.Parameter.empty}
    if isinstance(own, dict):
        options.update(own)
    return options


def int_option(value, default: int, low: int = 0, high: int = 1 << 20) -> int:
    """``value`` when it is an int in ``[low, high]``, else ``default``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return int(value) if ok else default


# Fit-time constants (seconds per unit of work), measured as above; see docs/operations.md.
ANYTIME_CUBE_SECONDS = 5e-11  # per D³ (factorizations, BLAS; measured 4.6e-11)
ANYTIME_GROUP_SECONDS = 3e-10  # per J·D² (scoring each candidate group; measured 2.8e-10)
GROUP_LASSO_SECONDS = 1.4e-9  # per α·iteration·D² (celer's path at its iteration bound)
GBFS_CELL_SECONDS = 2.5e-9  # per row·feature·level of histograms (measured 1.6e-9)
GBFS_SPLIT_SECONDS = 2e-9  # per node·feature·bin of split search (measured 1.5e-9)
GBFS_FIGURE_SECONDS = 1e-9  # per row·tree·level of the version's per-set figures
NVSD_SECONDS = 5e-10  # per τ·(n·D)³ (measured 1.3e-10 on easy, 3.2e-10 on noisy data; the
# 215-245 s fits at n·D = 2,400 on 24 τ: 6.9e-10)
FIT_FIXED_SECONDS = 0.2

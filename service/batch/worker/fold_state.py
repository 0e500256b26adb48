"""The fold of a batch model's log: sufficient statistics or bounded windows (the kind its
family's adapter names: ``service.batch.families``), each with a training and a held-out
validation part.

Held-out rule: example ``k`` (0-based) of the log entry with id ``e`` is held out when
``u(e, k) < validation_fraction``, with ``u = splitmix64(crc32(e) · 2³² + k) / 2⁶⁴``: a
deterministic function of the log position, so a replay after a crash splits exactly as the
first pass did.

Entries read together are folded as one block, in log order (``apply_entries``): their rows
are stacked, split into the training and the held-out part by the rule below, and each part
goes into the statistics as one update (one BLAS product ``XᵀX`` and one O(D²) pairwise merge
per part per block, so one-example entries cost what bulk entries cost), or into the windows
row by row in log order. Windows after a replay equal one uninterrupted pass bit for bit,
however the entries were grouped into reads; statistics equal it to rounding (the merge
order differs; 1e-10 relative is tested). (A block whose non-zeros fill at least a quarter
of its rows x D is folded as a dense array, through BLAS.)

Classification models of a statistics family also keep a reservoir of held-out *rows* beside the
validation statistics (``held_out_rows``: ``spec.held_out_capacity`` rows, at most 5,000
and 64 MiB), on which a version's error, log-loss and calibrated probabilities are
measured per computed set; states written before it load with an empty one. They also keep
a reservoir of *training* rows (``train_rows``, the same capacity) that a version's logistic
answers are refitted on (``service.batch.families.anytime``); states written before it load
with an empty one, and their versions answer with the regression until every training
example has passed through it.

Windows: ``newest`` keeps the last N examples (a ring); ``reservoir`` keeps a uniform sample
of N (Vitter's algorithm R) where the t-th example offered (t >= N) replaces slot
``j = splitmix64(seed ⊕ t) mod (t + 1)`` when ``j < N``: deterministic given the seed and the
log order, with no generator state to store. Memory O(D²) (anytime) or O(N·D) (windows);
folding a block costs O(nnz·D + D²) (anytime) or O(nnz + m·D) (windows, m examples).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import scipy.sparse as sp

from algorithms.anytime import SufficientStatistics
from algorithms.sparse import CSRBatch
from algorithms.sparse._validate import MAX_ABS_VALUE
from service.batch.families import STATISTICS, family_of
from service.batch.layout import BatchLayout, BatchParams, Window
from service.batch.sizes import held_out_capacity, validation_size

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
DENSE_FRACTION = 0.25  # entries at least this dense update the statistics as dense arrays
KIND = "featurebudget-batch-fold"
FORMAT_VERSION = 1  # the envelope of algorithms.states: kind + format_version


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer of uint64 ``x`` (vectorized, wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (np.asarray(x, dtype=np.uint64) + _GOLDEN).astype(np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def held_out(entry_id: str, n_rows: int, fraction: float) -> np.ndarray:
    """Which of an entry's ``n_rows`` examples are validation examples (bool (n_rows,))."""
    if fraction <= 0:
        return np.zeros(n_rows, dtype=bool)
    base = np.uint64(zlib.crc32(str(entry_id).encode())) << np.uint64(32)
    u = splitmix64(base + np.arange(n_rows, dtype=np.uint64)) >> np.uint64(11)
    return u.astype(np.float64) * 2.0 ** -53 < fraction


def held_out_block(entry_ids: list[str], counts: list[int], fraction: float) -> np.ndarray:
    """:func:`held_out` of consecutive entries (``counts[i]`` examples of entry
    ``entry_ids[i]``) as one mask: one vectorized splitmix64 for the block. O(rows)."""
    total = int(sum(counts))
    if fraction <= 0 or total == 0:
        return np.zeros(total, dtype=bool)
    if len(counts) == 1:
        return held_out(entry_ids[0], total, fraction)
    bases = np.fromiter((zlib.crc32(str(e).encode()) for e in entry_ids), dtype=np.uint64,
                        count=len(entry_ids)) << np.uint64(32)
    counts_arr = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(counts_arr) - counts_arr
    k = np.arange(total, dtype=np.int64) - np.repeat(starts, counts_arr)
    u = splitmix64(np.repeat(bases, counts_arr) + k.astype(np.uint64)) >> np.uint64(11)
    return u.astype(np.float64) * 2.0 ** -53 < fraction


def _stack(entries: list[tuple[str, CSRBatch, np.ndarray]], n_features: int
           ) -> tuple[sp.csr_matrix, np.ndarray]:
    """The entries' rows as one CSR matrix and their targets (float64), concatenating
    the flat arrays once. O(rows + nnz)."""
    if len(entries) == 1:
        _, X, labels = entries[0]
        return X.to_scipy(), np.asarray(labels, dtype=np.float64)
    batches = [X for _, X, _ in entries]
    counts = np.fromiter((X.n_rows for X in batches), dtype=np.int64, count=len(batches))
    lengths = np.concatenate([np.diff(X.indptr) for X in batches])
    indptr = np.zeros(int(counts.sum()) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate([X.indices for X in batches])
    values = np.concatenate([X.values for X in batches])
    y = np.concatenate([np.asarray(labels, dtype=np.float64) for _, _, labels in entries])
    return sp.csr_matrix((values, indices, indptr), shape=(len(indptr) - 1, n_features)), y


class RowWindow:
    """A bounded window of dense rows (``capacity`` x D) and their targets."""

    def __init__(self, window: Window, capacity: int, n_features: int) -> None:
        self.window = window
        self.capacity = int(capacity)
        self.X = np.zeros((self.capacity, n_features), dtype=np.float64)
        self.y = np.zeros(self.capacity, dtype=np.float64)
        self.seen = 0  # examples offered so far

    @property
    def count(self) -> int:
        return min(self.seen, self.capacity)

    def _slots(self, m: int) -> np.ndarray:
        """Slot of each of the next ``m`` examples (-1: not kept), in offer order."""
        t = self.seen + np.arange(m, dtype=np.int64)
        if self.window.kind == "newest":
            return t % self.capacity
        slots = t.copy()
        late = t >= self.capacity
        if late.any():
            seed = np.uint64(self.window.seed)
            j = splitmix64(seed ^ t[late].astype(np.uint64)) % (t[late] + 1).astype(np.uint64)
            slots[late] = np.where(j < self.capacity, j.astype(np.int64), -1)
        return slots

    def offer(self, X: sp.csr_matrix, y: np.ndarray) -> None:
        """Offer rows in order (a later row taking the same slot wins). O(nnz + m·D)."""
        m = X.shape[0]
        if m == 0:
            return
        slots = self._slots(m)
        self.seen += m
        keep = slots >= 0
        # last offer wins: keep each slot's last occurrence only
        rows = np.flatnonzero(keep)
        if len(rows):
            _, last = np.unique(slots[rows][::-1], return_index=True)
            rows = rows[::-1][last]
        if not len(rows):
            return
        target = slots[rows]
        self.X[target] = 0.0
        sub = X[rows]
        row_of = np.repeat(np.arange(len(rows)), np.diff(sub.indptr))
        self.X[target[row_of], sub.indices] = sub.data
        self.y[target] = y[rows]

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the kept rows: chronological for ``newest``, slot order otherwise."""
        count = self.count
        if self.window.kind == "newest" and self.seen > self.capacity:
            order = np.roll(np.arange(self.capacity), -(self.seen % self.capacity))
            return self.X[order].copy(), self.y[order].copy()
        return self.X[:count].copy(), self.y[:count].copy()

    def state(self, prefix: str) -> dict[str, Any]:
        count = self.count
        return {f"{prefix}.X": self.X[:count].copy(), f"{prefix}.y": self.y[:count].copy(),
                f"{prefix}.seen": int(self.seen)}

    def load(self, state: dict[str, Any], prefix: str, *, signed: bool = False,
             classes: int | None = None) -> None:
        """Replace the rows with ``state``'s, checked (ValueError): shapes, finite values,
        and with ``signed`` (classification) labels -1 or +1, with ``classes`` (a
        multi-class model of K classes) class indices 0..K-1."""
        seen = state.get(f"{prefix}.seen")
        X, y = state.get(f"{prefix}.X"), state.get(f"{prefix}.y")
        if isinstance(seen, bool) or not isinstance(seen, int) or not 0 <= seen < 1 << 62:
            raise ValueError(f"{prefix}.seen must be a non-negative integer below 2^62")
        count = min(seen, self.capacity)
        if not isinstance(X, np.ndarray) or X.dtype != np.float64 or \
                X.shape != (count, self.X.shape[1]):
            raise ValueError(f"{prefix}.X must be float64 of shape {(count, self.X.shape[1])}")
        if not isinstance(y, np.ndarray) or y.dtype != np.float64 or y.shape != (count,):
            raise ValueError(f"{prefix}.y must be float64 of shape {(count,)}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError(f"{prefix} holds NaN or infinite values")
        if not (np.all(np.abs(X) < MAX_ABS_VALUE) and np.all(np.abs(y) < MAX_ABS_VALUE)):
            raise ValueError(f"{prefix} holds values out of range (|x| < 2^50)")
        if classes is not None and not np.all((y >= 0) & (y < classes) & (y == np.floor(y))):
            raise ValueError(f"{prefix}.y must hold class indices 0..{classes - 1} (a "
                             f"model of {classes} classes)")
        if signed and classes is None and not np.all(np.abs(y) == 1.0):
            raise ValueError(f"{prefix}.y must hold labels -1 or +1 (a classification model)")
        self.X[:count], self.y[:count], self.seen = X, y, seen


class BatchFoldState:
    """What a batch model's fold has made of its log so far, and the last entry applied."""

    def __init__(self, family: str, layout: BatchLayout, params: BatchParams) -> None:
        self.family = family
        self.statistics = family_of(family).fold_kind == STATISTICS
        self.layout = layout
        self.params = params
        D = layout.n_features
        self.held_out_rows: RowWindow | None = None
        self.train_rows: RowWindow | None = None
        if self.statistics:
            self.train: Any = SufficientStatistics(D)
            self.validation: Any = SufficientStatistics(D)
            if layout.spec.task == "classification" and params.validation_fraction > 0:
                self.held_out_rows = RowWindow(Window("reservoir", 0, 0),
                                               held_out_capacity(D), D)
            if layout.spec.task == "classification":
                self.train_rows = RowWindow(Window("reservoir", 0, 1), held_out_capacity(D), D)
        else:
            window = params.window
            self.train = RowWindow(window, window.size, D)
            self.validation = RowWindow(window, max(1, validation_size(
                window, params.validation_fraction)), D)
        self.applied_id: str | None = None
        self.examples = 0  # every example folded, training and validation

    # ------------------------------------------------------------------ folding
    def apply_entry(self, entry_id: str, X: CSRBatch, y: np.ndarray) -> None:
        """Fold one log entry's examples in (call in log order, once per entry)."""
        self.apply_entries([(entry_id, X, y)])

    def apply_entries(self, entries: list[tuple[str, CSRBatch, np.ndarray]]) -> None:
        """Fold log entries ``(id, X, y)`` (in log order, each once) as one block: rows
        stacked, split by the held-out rule, one update per part. O(Σ nnz_row² + D²) per
        block (statistics, in place: ``SufficientStatistics.update``) plus O(rows + nnz) of
        stacking: the entries' flat arrays are concatenated once, no matrix per entry."""
        if not entries:
            return
        matrix, y = _stack(entries, self.layout.n_features)
        self.apply_block([entry_id for entry_id, _, _ in entries],
                         [X.n_rows for _, X, _ in entries], matrix, y)

    def apply_block(self, entry_ids: list[str], counts: list[int], matrix: sp.csr_matrix,
                    y: np.ndarray) -> None:
        """Fold consecutive log entries whose rows are already stacked (``counts[i]`` rows
        of entry ``entry_ids[i]``, in log order, in ``matrix`` / ``y``): the held-out mask
        of the block, then one update per part (:meth:`apply_entries`)."""
        held = held_out_block(entry_ids, counts, self.params.validation_fraction)
        for part, rows in ((self.train, ~held), (self.validation, held)):
            if rows.any():
                self._add(part, matrix[rows] if not rows.all() else matrix, y[rows])
        if self.held_out_rows is not None and held.any():
            self.held_out_rows.offer(matrix[held], y[held])
        if self.train_rows is not None and not held.all():
            self.train_rows.offer(matrix[~held] if held.any() else matrix, y[~held])
        self.examples += matrix.shape[0]
        self.applied_id = entry_ids[-1]

    def _add(self, part, matrix: sp.csr_matrix, y: np.ndarray) -> None:
        if self.statistics:
            m, D = matrix.shape
            if matrix.nnz >= DENSE_FRACTION * m * D:  # dense rows: the BLAS path, centred
                part.update(matrix.toarray(), y)
            else:
                part.update(matrix, y)
        else:
            part.offer(matrix, y)

    @property
    def train_examples(self) -> int:
        return int(self.train.n) if self.statistics else self.train.count

    @property
    def validation_examples(self) -> int:
        return int(self.validation.n) if self.statistics else self.validation.count

    def training_copy(self) -> tuple[Any, Any]:
        """(training, validation) data for a fit, independent of later folding: statistics
        copies or ``(X, y)`` windows (validation None when empty)."""
        if self.statistics:
            validation = self.validation.copy() if self.validation.n else None
            return self.train.copy(), validation
        validation = self.validation.data() if self.validation.count else None
        return self.train.data(), validation

    def training_rows_copy(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The training rows ``(X, y)`` of a statistics family's classification reservoir,
        when every training example folded has been offered to it (a uniform sample of
        them); None otherwise (no reservoir, or a state written before it)."""
        rows = self.train_rows
        if rows is None or not rows.count or rows.seen != int(self.train.n):
            return None
        return rows.data()

    def held_out_copy(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Held-out rows ``(X, y)`` a version measures its per-set figures on: the
        validation window (window families) or the classification reservoir of a
        statistics family; None when there are none."""
        rows = self.held_out_rows if self.statistics else self.validation
        return rows.data() if rows is not None and rows.count else None

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"kind": KIND, "format_version": FORMAT_VERSION,
                                 "family": self.family,
                                 "n_features": self.layout.n_features,
                                 "examples": int(self.examples),
                                 "applied_id": self.applied_id or ""}
        for prefix, part in (("train", self.train), ("validation", self.validation)):
            if self.statistics:
                state.update({f"{prefix}.{k}": v for k, v in part.state_dict().items()})
            else:
                state.update(part.state(prefix))
        if self.held_out_rows is not None:
            state.update(self.held_out_rows.state("held_out"))
        if self.train_rows is not None:
            state.update(self.train_rows.state("train_rows"))
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        """Replace the state with ``state``, checked completely first (ValueError)."""
        fresh = BatchFoldState(self.family, self.layout, self.params)
        if state.get("kind") != KIND:
            raise ValueError(f"not a batch-fold state (kind {state.get('kind')!r})")
        version = state.get("format_version", 0)  # 0: written before the version member
        if isinstance(version, bool) or not isinstance(version, int) or \
                version not in (0, FORMAT_VERSION):
            raise ValueError(f"batch-fold state has format_version {version!r}; this code "
                             f"reads {FORMAT_VERSION} and states written before it")
        if state.get("family") != self.family:
            raise ValueError(f"state is of a {state.get('family')!r} model, this model is "
                             f"{self.family!r}")
        if state.get("n_features") != self.layout.n_features:
            raise ValueError(f"state has {state.get('n_features')!r} features, this model "
                             f"{self.layout.n_features}")
        examples, applied = state.get("examples"), state.get("applied_id")
        if isinstance(examples, bool) or not isinstance(examples, int) or \
                not 0 <= examples < 1 << 62:
            raise ValueError("examples must be a non-negative integer below 2^62")
        if not isinstance(applied, str):
            raise ValueError("applied_id must be a string")
        signed = self.layout.spec.task == "classification"
        labels = {"signed": signed, "classes": None if self.layout.classes is None else
                  len(self.layout.classes)}
        for prefix in ("train", "validation"):
            part = getattr(fresh, prefix)
            if self.statistics:
                part = _load_statistics(state, prefix, self.layout.n_features)
                setattr(fresh, prefix, part)
            else:
                part.load(state, prefix, **labels)
        if fresh.train_rows is not None and "train_rows.seen" in state:
            fresh.train_rows.load(state, "train_rows", **labels)  # absent before: empty
        if fresh.held_out_rows is not None and "held_out.seen" in state:
            fresh.held_out_rows.load(state, "held_out", **labels)  # absent before it existed: empty
        fresh.examples, fresh.applied_id = examples, applied or None
        self.train, self.validation = fresh.train, fresh.validation
        self.held_out_rows = fresh.held_out_rows
        self.train_rows = fresh.train_rows
        self.examples, self.applied_id = fresh.examples, fresh.applied_id


def _load_statistics(state: dict[str, Any], prefix: str, D: int) -> SufficientStatistics:
    sub = {k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + ".")}
    try:
        stats = SufficientStatistics.from_state_dict(sub)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{prefix} statistics are incomplete: {exc!r}") from exc
    if stats.n_features != D or stats.n < 0:
        raise ValueError(f"{prefix} statistics have {stats.n_features} features, expected {D}")
    values = np.concatenate([stats.mean_x, stats.mxx.ravel(), stats.mxy,
                             [stats.mean_y, stats.myy]])
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{prefix} statistics hold NaN or infinite values")
    if stats.n == 0 and np.any(values != 0):
        raise ValueError(f"{prefix} statistics of no example must be zero")
    if stats.myy < 0 or np.any(np.diag(stats.mxx) < 0):
        raise ValueError(f"{prefix} statistics have negative sums of squares")
    return stats

"""Fast libsvm / svmlight reader and writer.

Line format: ``label [qid:q] index:value index:value ... [# comment]``. Blank lines and
comment lines are skipped (they still count for line numbers). Indices are 1-based by
default (``zero_based=False``), 0-based with ``zero_based=True``, or detected with
``"auto"`` (0-based when any index is 0). Values are correctly rounded: a numba pass
parses numbers of at most 19 significant digits (``_decimal.exact_float``: Clinger's fast
path, or an exact division for up to 27 decimal places); the rare other tokens are
re-parsed by numpy. One pass over the bytes, O(size); rows come out with sorted indices.
The numba kernels are in ``algorithms.sparse._libsvm_kernels``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from algorithms.sparse._libsvm_kernels import (
    _DUPLICATE,
    _MESSAGES,
    _NL,
    _NON_FINITE,
    _OK,
    _count_bytes,
    _parse,
    _sort_rows,
)
from algorithms.sparse.csr import CSRBatch, join_indptrs, join_rows

PARALLEL_MIN_BYTES = 1 << 20   # inputs at least this large are parsed by several threads


class LibsvmFormatError(ValueError):
    """A malformed libsvm line; ``line`` is 1-based, ``column`` 1-based within it."""

    def __init__(self, line: int, column: int, message: str, source: str = "") -> None:
        self.line, self.column, self.reason = line, column, message
        where = f"{source}:" if source else "line "
        super().__init__(f"{where}{line}:{column}: {message}")


@dataclass
class _Chunk:
    """One parsed chunk: 0-based-or-raw indices as int64, before the n_features check."""

    buf: np.ndarray
    line_base: Callable[[], int]   # 1-based number of the chunk's first line (for errors)
    lines: int                     # lines the chunk holds
    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    min_index: int


def _parse_chunk(buf: np.ndarray, one_based: bool, line_base: Callable[[], int],
                 source: str, counts: tuple[int, int] | None = None,
                 out: tuple[np.ndarray, np.ndarray] | None = None) -> _Chunk:
    """Parse complete lines; errors number lines from ``line_base()`` (only then computed).
    ``counts``: ``_count_bytes(buf)`` if known; ``out``: index / value arrays with room for
    every colon of ``buf`` to parse into (default: new ones)."""
    newlines, colons = counts if counts is not None else _count_bytes(buf)
    if out is None:
        out = np.empty(int(colons), dtype=np.int32), np.empty(int(colons), dtype=np.float64)
    indices, values = out
    (labels, indptr, rows, nnz, code, line, column, hard_slots, hard_spans, n_hard,
     min_index, increasing) = _parse(buf, int(newlines) + 1, indices, values, one_based)
    if code != _OK:
        raise LibsvmFormatError(line + line_base() - 1, column, _MESSAGES[code], source)
    labels, indptr = labels[:rows], indptr[:rows + 1]
    indices, values = indices[:nnz], values[:nnz]
    if n_hard:
        spans = hard_spans[:n_hard]
        parsed = np.array([bytes(buf[a:b]) for a, b in spans]).astype(np.float64)
        slots = hard_slots[:n_hard]
        values[slots[slots >= 0]] = parsed[slots >= 0]
        labels[-1 - slots[slots < 0]] = parsed[slots < 0]
    chunk = _Chunk(buf, line_base, int(line), labels, indptr, indices, values, int(min_index))
    if not increasing:
        duplicate_row = _sort_rows(indptr, indices, values)
        if duplicate_row >= 0:
            _fail(chunk, duplicate_row, _MESSAGES[_DUPLICATE], source,
                  lambda index, value, seen: "index" if index in seen else None)
    if n_hard:  # only numbers outside the fast path can be infinite
        if not np.all(np.isfinite(values)):
            _fail(chunk, _row_of_entry(indptr, int(np.argmin(np.isfinite(values)))),
                  _MESSAGES[_NON_FINITE], source,
                  lambda index, value, seen: None if math.isfinite(value) else "value")
        if not np.all(np.isfinite(labels)):
            _fail(chunk, int(np.argmin(np.isfinite(labels))), "the label is not finite",
                  source)
    return chunk


def _row_of_entry(indptr: np.ndarray, entry: int) -> int:
    return int(np.searchsorted(indptr, entry, side="right")) - 1


def _fail(chunk: _Chunk, row: int, message: str, source: str, offending=None):
    """Raise for ``row`` of the chunk; ``offending(index, value, seen)`` picks the token to
    point at ("index" or "value" of it; column 1, the line, without it)."""
    number, raw = _row_line(chunk.buf, row)
    column = _token_column(raw, offending) if offending is not None else 1
    raise LibsvmFormatError(number + chunk.line_base() - 1, column, message, source)


def _token_column(raw: bytes, offending) -> int:
    """1-based column of the index or value (as ``offending(index, value, seen indices)``
    answers "index" or "value") of the first offending ``index:value`` token of a line; 1
    when none is. Error path only."""
    seen: set[int] = set()
    position = 0
    for number, token in enumerate(raw.split(b"#", 1)[0].split()):
        position = raw.index(token, position)
        index, colon, value = token.partition(b":")
        if number and colon and index != b"qid":
            part = offending(int(index), float(value), seen)
            if part:
                return position + 1 + (len(index) + 1 if part == "value" else 0)
            seen.add(int(index))
        position += len(token)
    return 1


def _split_lines(buf: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split ``buf`` into up to ``parts`` byte ranges that end at newlines."""
    bounds = [0]
    for k in range(1, parts):
        cut = max(int(len(buf) * k / parts), bounds[-1])
        newline = np.flatnonzero(buf[cut:cut + (1 << 20)] == _NL)
        while not len(newline) and cut < len(buf):
            cut += 1 << 20
            newline = np.flatnonzero(buf[cut:cut + (1 << 20)] == _NL)
        if not len(newline):
            break
        bounds.append(cut + int(newline[0]) + 1)
    bounds.append(len(buf))
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def _finish(chunks: list[_Chunk], n_features: int | None, zero_based, source: str,
            shared: tuple[np.ndarray, np.ndarray] | None = None):
    """Join chunks, apply ``zero_based="auto"`` and check ``n_features``. ``shared``: the
    arrays the chunks were parsed into, used as they are when the chunks fill them."""
    if shared is not None and sum(len(c.indices) for c in chunks) == len(shared[0]):
        indptr, (indices, values) = join_indptrs([c.indptr for c in chunks]), shared
    else:
        indptr, indices, values = join_rows([c.indptr for c in chunks],
                                            [c.indices for c in chunks],
                                            [c.values for c in chunks])
    labels = np.concatenate([c.labels for c in chunks]) if chunks else np.zeros(0)
    nnz = len(indices)
    if zero_based == "auto" and nnz and min(c.min_index for c in chunks) > 0:
        indices -= 1          # no index 0 seen: the file is 1-based
    width = int(indices.max()) + 1 if nnz else 1
    if n_features is None:
        n_features = width
    elif width > n_features:
        row = _row_of_entry(indptr, int(np.argmax(indices)))
        for chunk in chunks:
            if row < len(chunk.labels):
                shown = width - 1 + (zero_based is False)  # as written in the file
                _fail(chunk, row, f"feature index {shown} is out of range for {n_features} "
                      "features", source,
                      lambda index, value, seen, shown=shown: "index" if index == shown
                      else None)
            row -= len(chunk.labels)
    return CSRBatch(indptr.astype(np.int64, copy=False), indices.astype(np.int32, copy=False),
                    values, int(n_features)), labels


def parse_libsvm(data: bytes | bytearray | memoryview | np.ndarray, n_features: int | None = None,
                 zero_based: bool | str = False, source: str = "", threads: int | None = None):
    """Parse libsvm text. Returns ``(CSRBatch, labels float64)``.

    ``n_features`` defaults to the largest index + 1; an index >= ``n_features`` is an
    error naming its line. Raises :class:`LibsvmFormatError` on a malformed line. Inputs
    over 16 MB are parsed by ``threads`` threads (default: the CPU count) in parallel.
    """
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    chunks, shared = _parse_parallel(buf, zero_based is False, lambda: 1, source, threads)
    return _finish(chunks, n_features, zero_based, source, shared)


def _parse_parallel(buf: np.ndarray, one_based: bool, line_base: Callable[[], int],
                    source: str, threads: int | None
                    ) -> tuple[list[_Chunk], tuple[np.ndarray, np.ndarray] | None]:
    """Parse ``buf`` (complete lines) in up to ``threads`` line-aligned parts at once, each
    into its own slice of one pair of output arrays (sized by the colons of each part), so
    that joining the parts copies nothing when every colon was a feature. Returns the
    parts and those arrays (None for a single part)."""
    parts = 1 if len(buf) < PARALLEL_MIN_BYTES else max(1, threads or os.cpu_count() or 1)
    ranges = _split_lines(buf, parts)
    if len(ranges) <= 1:
        return [_parse_chunk(buf[a:b], one_based, line_base, source) for a, b in ranges], None
    counts = [tuple(int(c) for c in _count_bytes(buf[a:b])) for a, b in ranges]
    starts = np.cumsum([0] + [colons for _, colons in counts])
    shared = np.empty(starts[-1], dtype=np.int32), np.empty(starts[-1], dtype=np.float64)

    def work(k):
        a, b = ranges[k]
        part_base = line_base if a == 0 else (
            lambda: line_base() + int(_count_bytes(buf[:a])[0]))
        out = shared[0][starts[k]:starts[k + 1]], shared[1][starts[k]:starts[k + 1]]
        return _parse_chunk(buf[a:b], one_based, part_base, source, counts[k], out)

    return list(_pool().map(work, range(len(ranges)))), shared


_POOL: list[ThreadPoolExecutor] = []
_INITIALIZER: list[Callable[[], None] | None] = [None]


def set_worker_initializer(initializer: Callable[[], None] | None) -> None:
    """Run ``initializer`` in each parser thread when it starts (a server lowers their CPU
    priority so that its request threads come first); takes effect on threads started
    after the call."""
    _INITIALIZER[0] = initializer


def _start_worker() -> None:
    if _INITIALIZER[0] is not None:
        _INITIALIZER[0]()


def _pool() -> ThreadPoolExecutor:
    """The parser's worker threads, created once (numba kernels release the GIL)."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max(2, os.cpu_count() or 1),
                                        thread_name_prefix="libsvm",
                                        initializer=_start_worker))
    return _POOL[0]


def line_of_row(buf, row: int) -> int:
    """1-based line number of the ``row``-th example of the text ``buf`` (any buffer;
    blank and comment lines are skipped). For error messages: O(size)."""
    return _row_line(buf, row)[0]


def _row_line(buf, row: int) -> tuple[int, bytes]:
    """(1-based line number, the line's bytes) of the ``row``-th example. O(size)."""
    text = bytes(buf).split(b"\n")
    seen = -1
    for number, raw in enumerate(text, start=1):
        content = raw.split(b"#", 1)[0].strip()
        if content:
            seen += 1
            if seen == row:
                return number, raw
    return len(text), b""


def _map_file(path: str | os.PathLike) -> np.ndarray:
    """The file's bytes as a read-only uint8 array, memory-mapped (no copy)."""
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r")


def load_libsvm(path: str | os.PathLike, n_features: int | None = None,
                zero_based: bool | str = False, threads: int | None = None):
    """Read a libsvm file (see :func:`parse_libsvm`); the file is memory-mapped."""
    return parse_libsvm(_map_file(path), n_features, zero_based, source=os.fspath(path),
                        threads=threads)


def iter_libsvm(path: str | os.PathLike, n_features: int, zero_based: bool = False,
                chunk_bytes: int = 16 << 20,
                threads: int | None = None) -> Iterator[tuple[CSRBatch, np.ndarray]]:
    """Stream a libsvm file as ``(CSRBatch, labels)`` chunks of about ``chunk_bytes``.

    The next chunk is read and parsed (by ``threads`` threads; the parser releases the
    GIL) in the background while the caller works on the current one, as the SOFS paper's
    two-thread loader does. Memory is O(chunk_bytes).
    """
    if zero_based not in (True, False):
        raise ValueError("iter_libsvm needs zero_based=True or False")
    source = os.fspath(path)

    def blocks() -> Iterator[np.ndarray]:
        data = _map_file(path)
        start = 0
        while start < len(data):
            stop = min(start + chunk_bytes, len(data))
            if stop < len(data):
                newline = np.flatnonzero(data[stop:stop + (1 << 20)] == _NL)
                while not len(newline) and stop < len(data):
                    stop += 1 << 20
                    newline = np.flatnonzero(data[stop:stop + (1 << 20)] == _NL)
                stop = stop + int(newline[0]) + 1 if len(newline) else len(data)
            yield data[start:stop]
            start = stop

    lines_before = [0]     # parses run one after another in the single background thread

    def parse(buf):
        base = lines_before[0] + 1
        chunks, shared = _parse_parallel(buf, not zero_based, lambda: base, source, threads)
        lines_before[0] += sum(chunk.lines for chunk in chunks)
        return _finish(chunks, n_features, zero_based, source, shared)

    with ThreadPoolExecutor(1) as reader:
        pending = None
        for buf in blocks():
            future = reader.submit(parse, buf)
            if pending is not None:
                yield pending.result()
            pending = future
        if pending is not None:
            yield pending.result()


def write_libsvm(target: str | os.PathLike | BinaryIO, batch: CSRBatch, labels,
                 zero_based: bool = False, precision: int | None = None) -> None:
    """Write ``batch`` with ``labels`` as libsvm lines.

    Values use Python's shortest round-trip ``repr`` (exact) unless ``precision`` gives a
    number of significant digits (``%.{precision}g``). Labels that are whole numbers are
    written as integers.
    """
    labels = np.asarray(labels, dtype=np.float64)
    if len(labels) != batch.n_rows:
        raise ValueError(f"{len(labels)} labels for {batch.n_rows} rows")
    offset = 0 if zero_based else 1
    value_format = repr if precision is None else f"%.{int(precision)}g".__mod__
    with contextlib.ExitStack() as stack:
        if isinstance(target, str | os.PathLike):
            target = stack.enter_context(open(target, "wb"))
        for row in range(batch.n_rows):
            lo, hi = batch.indptr[row], batch.indptr[row + 1]
            label = labels[row]
            parts = [str(int(label)) if label == int(label) else repr(float(label))]
            parts += [f"{i + offset}:{value_format(float(v))}"
                      for i, v in zip(batch.indices[lo:hi].tolist(),
                                      batch.values[lo:hi].tolist(), strict=True)]
            target.write((" ".join(parts) + "\n").encode())

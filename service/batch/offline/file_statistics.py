"""Sufficient statistics of (X, y) from files: partitions, their statistics, the merge tree.

A libsvm file is cut into byte ranges of about ``block_bytes``; a line belongs to the range
its first byte lies in. A Parquet file is cut into its row groups. Each partition gives
training and validation :class:`~algorithms.anytime.SufficientStatistics` (O(nnz·D + D²)
per chunk of rows, O(D²) memory besides the partition's rows), and the partitions are
merged by :func:`tree_reduce`: groups of ``split_every`` merged left to right with Chan's
pairwise update, level by level, O(P·D²) in all and ``ceil(log_k P)`` levels deep. The tree
depends on the partitions alone, so every executor (this process, one Dask worker, many)
gives the same bits.

Held-out rule for files: the row whose line starts at byte ``o`` of a libsvm file (the
``o``-th row of a Parquet file) named ``f`` is a validation row when
``splitmix64(crc32(basename(f))·2³² + o) / 2⁶⁴ < validation_fraction`` (wrapping
arithmetic): the log's rule (``service.batch.worker.fold_state.held_out``) with the file name as
the entry id and the row's position in the file as ``k``. It does not depend on the
partitioning, the workers, or the directory the files are read from.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import scipy.sparse as sp

from algorithms.anytime import SufficientStatistics
from algorithms.sparse._validate import MAX_ABS_VALUE
from algorithms.sparse.libsvm import LibsvmFormatError, parse_libsvm
from service.batch.worker.fold_state import DENSE_FRACTION, splitmix64

T = TypeVar("T")
LIBSVM_SUFFIXES = (".svm", ".libsvm", ".txt", ".svmlight", ".dat")
PARQUET_SUFFIXES = (".parquet", ".pq")
_NL, _HASH, _BLANKS = 10, 35, (32, 9, 13)  # newline, '#', space / tab / CR


class FileInputError(ValueError):
    """A file that cannot be read as the model's examples; the message names the file
    (and the line or column)."""


@dataclass(frozen=True)
class Reading:
    """How to read the files: dimension ``D``, task, index base, held-out fraction; for
    Parquet the feature columns in index order and the target column."""

    n_features: int
    task: str = "regression"
    zero_based: bool = False
    validation_fraction: float = 0.0
    columns: tuple[str, ...] | None = None  # Parquet: feature names (default "0".."D-1")
    target_column: str | None = None        # Parquet: default "label" / "target"
    chunk_rows: int = 16384                  # rows per statistics update
    threads: int = 1                         # parser threads per partition


@dataclass(frozen=True)
class Partition:
    """Bytes ``start:stop`` of a libsvm file, or row groups ``start:stop`` of a Parquet
    file whose first row is row ``first_row`` of the file."""

    path: str
    fmt: str
    start: int
    stop: int
    first_row: int = 0


@dataclass
class PartStatistics:
    """Training and validation statistics of some partitions, and their row count."""

    train: SufficientStatistics
    validation: SufficientStatistics
    rows: int
    partitions: int = 1


# ---------------------------------------------------------------------- planning
def expand_paths(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Files in the order given; a directory stands for its files (sorted, no dot files).
    FileInputError for a path that does not exist or an empty selection."""
    out: list[str] = []
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            out += sorted(os.path.join(path, name) for name in os.listdir(path)
                          if not name.startswith(".") and
                          os.path.isfile(os.path.join(path, name)))
        elif os.path.isfile(path):
            out.append(path)
        else:
            raise FileInputError(f"{path}: no such file or directory")
    if not out:
        raise FileInputError("no input files")
    return out


def file_format(path: str, fmt: str = "auto") -> str:
    """``libsvm`` or ``parquet``: ``fmt`` unless ``auto``, else by the file's suffix
    (Parquet: .parquet / .pq; anything else is read as libsvm)."""
    if fmt != "auto":
        if fmt not in ("libsvm", "parquet"):
            raise FileInputError(f"unknown format {fmt!r} (libsvm, parquet or auto)")
        return fmt
    return "parquet" if path.lower().endswith(PARQUET_SUFFIXES) else "libsvm"


def plan_partitions(paths: Sequence[str], fmt: str = "auto",
                    block_bytes: int = 64 << 20) -> list[Partition]:
    """The partitions of ``paths`` (libsvm: ``block_bytes`` ranges; Parquet: row groups)."""
    if block_bytes < 1:
        raise ValueError("block_bytes must be >= 1")
    parts: list[Partition] = []
    for path in paths:
        kind = file_format(path, fmt)
        if kind == "parquet":
            parquet = _pyarrow_parquet()
            try:
                meta = parquet.ParquetFile(path).metadata
            except Exception as exc:  # noqa: BLE001 - pyarrow raises several types
                raise FileInputError(f"{path}: not a Parquet file: {exc}") from exc
            first = 0
            for group in range(meta.num_row_groups):
                parts.append(Partition(path, kind, group, group + 1, first))
                first += meta.row_group(group).num_rows
            continue
        size = os.path.getsize(path)
        parts += [Partition(path, kind, a, min(a + block_bytes, size))
                  for a in range(0, size, block_bytes)]
    return parts


# ---------------------------------------------------------------------- one partition
def held_out_rows(path: str, positions: np.ndarray, fraction: float) -> np.ndarray:
    """Which rows at ``positions`` (byte offsets / row numbers) of file ``path`` are held
    out (see the module docstring)."""
    if fraction <= 0:
        return np.zeros(len(positions), dtype=bool)
    base = np.uint64(zlib.crc32(os.path.basename(path).encode())) << np.uint64(32)
    with np.errstate(over="ignore"):
        keys = np.asarray(positions, dtype=np.uint64) + base
    return (splitmix64(keys) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 < fraction


def partition_statistics(part: Partition, reading: Reading) -> PartStatistics:
    """Statistics of one partition; FileInputError naming the file and line."""
    if part.fmt == "parquet":
        X, y, positions = _read_parquet(part, reading)
    else:
        X, y, positions = _read_libsvm(part, reading)
    _check_values(part, X, y, positions, reading.task)
    D = reading.n_features
    train, validation = SufficientStatistics(D), SufficientStatistics(D)
    held = held_out_rows(part.path, positions, reading.validation_fraction)
    for stats, rows in ((train, ~held), (validation, held)):
        if rows.all():
            _update(stats, X, y, reading.chunk_rows)
        elif rows.any():
            _update(stats, X[rows], y[rows], reading.chunk_rows)
    return PartStatistics(train, validation, int(X.shape[0]))


def _update(stats: SufficientStatistics, X: sp.csr_matrix, y: np.ndarray, chunk: int) -> None:
    """Fold rows in chunks: sparse products, or BLAS on dense chunks that are at least
    ``DENSE_FRACTION`` full (the batch fold's rule). O(nnz·D + D²) per chunk."""
    for a in range(0, X.shape[0], chunk):
        block, target = X[a:a + chunk], y[a:a + chunk]
        if block.nnz >= DENSE_FRACTION * block.shape[0] * block.shape[1]:
            stats.update(block.toarray(), target)
        else:
            stats.update(block, target)


def _check_values(part: Partition, X: sp.csr_matrix, y: np.ndarray, positions: np.ndarray,
                  task: str) -> None:
    """The service's limits (|x|, |y| < 2^50, finite; classification labels ±1); the error
    names the line (libsvm) or the row number (Parquet) in the file."""
    def where(row: int) -> str:
        position = int(positions[row])
        if part.fmt == "libsvm":
            return f"{part.path}:{_lines_before(part.path, position) + 1}"
        return f"{part.path}: row {position}"

    bad_x = ~(np.abs(X.data) < MAX_ABS_VALUE)
    if bad_x.any():
        row = int(np.searchsorted(X.indptr, np.argmax(bad_x), side="right") - 1)
        raise FileInputError(f"{where(row)}: a feature value is not finite or outside "
                             "|x| < 2^50")
    bad_y = ~(np.abs(y) < MAX_ABS_VALUE)
    if task == "classification":
        bad_y |= ~np.isin(y, (-1.0, 1.0))
    if bad_y.any():
        row = int(np.argmax(bad_y))
        rule = "-1 or +1 (a classification model)" if task == "classification" else \
            "finite with |y| < 2^50"
        raise FileInputError(f"{where(row)}: the target {float(y[row])!r} is not {rule}")


def _read_libsvm(part: Partition, reading: Reading):
    """(X csr, y, byte offset of each row's line) of the lines starting in the range."""
    buf, begin = read_line_block(part.path, part.start, part.stop)
    D = reading.n_features
    if not len(buf):
        return sp.csr_matrix((0, D)), np.zeros(0), np.zeros(0, dtype=np.int64)
    try:
        batch, y = parse_libsvm(buf, n_features=D, zero_based=reading.zero_based,
                                threads=reading.threads)
    except LibsvmFormatError as exc:
        line = _lines_before(part.path, begin) + exc.line
        raise FileInputError(f"{part.path}:{line}:{exc.column}: {exc.reason}") from None
    positions = begin + data_line_starts(buf)
    if len(positions) != batch.n_rows:  # the parser's rule and ours disagree: never silent
        raise FileInputError(f"{part.path}: found {len(positions)} data lines but parsed "
                             f"{batch.n_rows} rows in bytes {begin}..")
    return batch.to_scipy(), np.asarray(y, dtype=np.float64), positions


def read_line_block(path: str, start: int, stop: int) -> tuple[np.ndarray, int]:
    """The bytes of the lines whose first byte is in ``[start, stop)`` (uint8 array) and the
    file offset of the first one. O(stop - start + one line)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        stop = min(stop, size)
        if start >= stop:
            return np.zeros(0, dtype=np.uint8), start
        if start > 0:
            handle.seek(start - 1)
            head = handle.read(stop - start + 1)
            newline = head.find(b"\n")
            if newline < 0:  # the range lies inside a line that started before it
                return np.zeros(0, dtype=np.uint8), start
            begin, data = start + newline, bytearray(head[newline + 1:])
        else:
            begin, data = 0, bytearray(handle.read(stop))
        if data and data[-1] != _NL:  # the last line runs on past the range: finish it
            while True:
                piece = handle.read(1 << 20)
                if not piece:
                    break
                cut = piece.find(b"\n")
                if cut >= 0:
                    data += piece[:cut + 1]
                    break
                data += piece
    return np.frombuffer(data, dtype=np.uint8), begin


def data_line_starts(buf: np.ndarray) -> np.ndarray:
    """Offsets in ``buf`` of the lines that hold a row: the parser skips blank lines and
    comments (``#`` after optional white space). O(len(buf))."""
    starts = np.concatenate(([0], np.flatnonzero(buf == _NL) + 1))
    starts = starts[starts < len(buf)]
    first = buf[starts]
    data = ~np.isin(first, (*_BLANKS, _NL, _HASH))
    for k in np.flatnonzero(np.isin(first, _BLANKS)):  # indented lines: rare, checked one
        pos = int(starts[k])                           # by one
        while pos < len(buf) and buf[pos] in _BLANKS:
            pos += 1
        data[k] = pos < len(buf) and buf[pos] not in (_NL, _HASH)
    return starts[data].astype(np.int64)


def _lines_before(path: str, offset: int) -> int:
    """Newlines in the file's first ``offset`` bytes (error messages only)."""
    count = 0
    with open(path, "rb") as handle:
        while offset > 0:
            piece = handle.read(min(offset, 1 << 24))
            if not piece:
                break
            count += piece.count(b"\n")
            offset -= len(piece)
    return count


def _pyarrow_parquet():
    try:
        import pyarrow.parquet as parquet
    except ImportError as exc:
        raise FileInputError("reading Parquet needs pyarrow: pip install "
                             "'featurebudget[dask]'") from exc
    return parquet


def _read_parquet(part: Partition, reading: Reading):
    """(X csr, y, row number in the file) of row groups ``start:stop``: the target column
    and feature columns named as the model's features (nulls are 0; a feature without a
    column is 0 everywhere; any other column is an error)."""
    import pyarrow.compute as pc

    parquet = _pyarrow_parquet()
    D = reading.n_features
    names = reading.columns or tuple(str(i) for i in range(D))
    index = {name: i for i, name in enumerate(names)}
    target = reading.target_column or ("label" if reading.task == "classification"
                                       else "target")
    table = parquet.ParquetFile(part.path).read_row_groups(range(part.start, part.stop))
    if target not in table.column_names:
        raise FileInputError(f"{part.path}: no target column {target!r} (columns: "
                             f"{table.column_names[:10]})")
    unknown = [c for c in table.column_names if c != target and c not in index]
    if unknown:
        raise FileInputError(f"{part.path}: column {unknown[0]!r} is not a feature of the "
                             f"model (features: {list(names[:10])}...)")
    m = table.num_rows
    dense = np.zeros((m, D))
    for name in table.column_names:
        column = table.column(name)
        try:
            values = pc.cast(column, "float64").to_numpy(zero_copy_only=False)
        except Exception as exc:  # noqa: BLE001 - pyarrow's cast errors
            raise FileInputError(f"{part.path}: column {name!r} is not numeric: {exc}") \
                from None
        if name == target:
            if column.null_count:
                raise FileInputError(f"{part.path}: the target column {name!r} has nulls")
            y = values
        else:
            dense[:, index[name]] = np.nan_to_num(values, nan=0.0) if column.null_count \
                else values
    positions = part.first_row + np.arange(m, dtype=np.int64)
    return sp.csr_matrix(dense), y, positions


# ---------------------------------------------------------------------- merging
def merge_parts(*parts: PartStatistics) -> PartStatistics:
    """The parts merged left to right (Chan's pairwise update per pair). O(len · D²)."""
    first = parts[0]
    train, validation = first.train.copy(), first.validation.copy()
    rows, count = first.rows, first.partitions
    for part in parts[1:]:
        train.merge(part.train, inplace=True)
        validation.merge(part.validation, inplace=True)
        rows += part.rows
        count += part.partitions
    return PartStatistics(train, validation, rows, count)


def tree_levels(n: int, split_every: int) -> list[list[range]]:
    """The merge tree over ``n`` leaves: per level, the ranges of the previous level's
    items merged into each item of this level."""
    if split_every < 2:
        raise ValueError("split_every must be >= 2")
    levels = []
    while n > 1:
        level = [range(a, min(a + split_every, n)) for a in range(0, n, split_every)]
        levels.append(level)
        n = len(level)
    return levels


def tree_reduce(items: Iterable[T], merge: Callable[..., T], split_every: int = 4) -> T:
    """``items`` reduced by ``merge`` along :func:`tree_levels` (the tree a Dask run
    follows), consuming them one at a time: O(split_every · depth) items held at once."""
    if split_every < 2:
        raise ValueError("split_every must be >= 2")
    pending: list[list[T]] = []  # per level, the items not merged yet (in order)
    for item in items:
        level = 0
        while True:
            if len(pending) == level:
                pending.append([])
            pending[level].append(item)
            if len(pending[level]) < split_every:
                break
            item, pending[level] = merge(*pending[level]), []
            level += 1
    for level, rest in enumerate(pending):  # the partial groups, bottom up
        if len(rest) == 1 and not any(pending[level + 1:]):
            return rest[0]
        if rest:
            if len(pending) == level + 1:
                pending.append([])
            pending[level + 1].append(merge(*rest))
    raise ValueError("nothing to reduce")

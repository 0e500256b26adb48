"""What ``featurebudget predict`` reads: a libsvm, JSON-lines or Parquet file as chunks of
``/predict`` example objects, each example numbered by its place in the file, errors naming
the file's own line (Parquet: row). Memory: one chunk; time: O(file).

- libsvm: ``label index:value ...`` (the label is read and left out), the model's index
  base (``libsvm_zero_based``); sent as ``{"indices", "values"}`` (0-based).
- JSON lines: one example object a line, as ``/predict`` takes it (``indices`` / ``values``
  or ``features``; a ``label`` or ``target`` is left to the service, which ignores it).
- Parquet: one row an example, columns named as the model's features (a batch model's
  feature names; an online model's 0-based indices); ``label`` / ``target`` columns are
  left out; a null is a value the row does not carry (a batch model's row carries the
  groups it has a value of).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_LEFT_OUT = ("label", "target")


class PredictError(Exception):
    """A scoring run that stopped: one line for the user. ``status``: 2 for the files
    (unreadable, an example the model refuses), 1 for the service."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Rows:
    """Consecutive examples of the file: ``examples[k]`` is example ``start + k + 1``."""

    examples: list[dict]
    start: int          # examples of the file before this chunk
    consumed: float     # bytes of the file read through its end (for the progress bar)
    where: object = field(repr=False, default=None)  # k -> "line N" / "row N"


def input_format(path: str, fmt: str = "auto") -> str:
    """``libsvm``, ``jsonl`` or ``parquet``: ``fmt`` unless ``auto``, else by the suffix
    (.parquet / .pq, .jsonl / .ndjson / .json; anything else libsvm)."""
    if fmt != "auto":
        return fmt
    lower = path.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    return "jsonl" if lower.endswith(JSONL_SUFFIXES) else "libsvm"


def iter_rows(path: str, fmt: str, info, batch_size: int, skip: int) -> Iterator[Rows]:
    """The file's examples after the first ``skip``, ``batch_size`` per :class:`Rows`;
    ``info``: the model (:class:`clients.http.ModelInfo`)."""
    kind = input_format(path, fmt)
    if kind == "libsvm":
        return _libsvm_rows(path, info, batch_size, skip)
    if kind == "jsonl":
        return _jsonl_rows(path, batch_size, skip)
    return _parquet_rows(path, info, batch_size, skip)


# ---------------------------------------------------------------------- libsvm
def _libsvm_rows(path: str, info, batch_size: int, skip: int) -> Iterator[Rows]:
    from algorithms.sparse.libsvm import LibsvmFormatError, parse_libsvm
    from clients.loader import iter_chunks

    zero_based = bool(info.raw.get("libsvm_zero_based", False))
    for chunk in iter_chunks(path, batch_size, skip):
        try:
            X, _ = parse_libsvm(chunk.data, zero_based=zero_based, threads=1)
        except LibsvmFormatError as exc:
            raise PredictError(f"{path}, line {chunk.file_line(exc.line)}, column "
                               f"{exc.column}: {exc.reason}", status=2) from None
        indptr, indices, values = X.indptr.tolist(), X.indices.tolist(), X.values.tolist()
        examples = [{"indices": indices[a:b], "values": values[a:b]}
                    for a, b in zip(indptr[:-1], indptr[1:], strict=True)]
        yield Rows(examples, chunk.start, chunk.consumed,
                   lambda k, chunk=chunk: f"line {_example_line(chunk, k)}")


def _example_line(chunk, k: int) -> int:
    """The file line of the chunk's ``k``-th example (0-based). O(chunk)."""
    from clients.loader import _is_example

    seen = -1
    for number, line in enumerate(chunk.data.split(b"\n")):
        if _is_example(line):
            seen += 1
            if seen == k:
                return chunk.file_line(number + 1)
    return chunk.last_line


# ---------------------------------------------------------------------- JSON lines
def _jsonl_rows(path: str, batch_size: int, skip: int) -> Iterator[Rows]:
    import orjson

    examples: list[dict] = []
    lines: list[int] = []
    seen = consumed = 0
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            consumed += len(line)
            if not line.strip():
                continue
            seen += 1
            if seen <= skip:
                continue
            try:
                example = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise PredictError(f"{path}, line {number}: not valid JSON: {exc}",
                                   status=2) from None
            if not isinstance(example, dict):
                raise PredictError(f"{path}, line {number}: an example is a JSON object "
                                   "({\"indices\", \"values\"} or {\"features\"}), not "
                                   f"{type(example).__name__}", status=2)
            examples.append(example)
            lines.append(number)
            if len(examples) >= batch_size:
                yield Rows(examples, seen - len(examples), consumed,
                           lambda k, lines=lines: f"line {lines[k]}")
                examples, lines = [], []
    if examples:
        yield Rows(examples, seen - len(examples), consumed,
                   lambda k, lines=lines: f"line {lines[k]}")


# ---------------------------------------------------------------------- Parquet
def _parquet_rows(path: str, info, batch_size: int, skip: int) -> Iterator[Rows]:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise PredictError("reading Parquet needs pyarrow: pip install "
                           "'featurebudget[dask]'", status=2) from None
    try:
        reader = parquet.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors for a file it cannot read
        raise PredictError(f"{path}: not a Parquet file: {exc}", status=2) from None
    names = [c for c in reader.schema_arrow.names if c not in _LEFT_OUT]
    to_example = _parquet_example(path, info, names)
    total, size = max(1, reader.metadata.num_rows), os.path.getsize(path)
    start = 0
    for batch in reader.iter_batches(batch_size=batch_size, columns=names):
        first, start = start, start + batch.num_rows
        if start <= skip:
            continue
        offset = max(0, skip - first)
        columns = [_floats(path, name, batch.column(name)).tolist()[offset:]
                   for name in names]
        examples = [to_example(row) for row in zip(*columns, strict=True)] if columns \
            else [to_example(()) for _ in range(batch.num_rows - offset)]
        first += offset
        yield Rows(examples, first, size * start / total,
                   lambda k, first=first: f"row {first + k + 1}")


def _floats(path: str, name: str, column):
    """A column as float64 (nulls NaN); PredictError naming a column that is not numeric."""
    import pyarrow.compute as pc

    try:
        return pc.cast(column, "float64").to_numpy(zero_copy_only=False)
    except Exception as exc:  # noqa: BLE001 - pyarrow's cast errors
        raise PredictError(f"{path}: column {name!r} is not numeric: {exc}",
                           status=2) from None


def _parquet_example(path: str, info, names: list[str]):
    """``row values -> example object`` for the model; PredictError for a column that is
    not one of its features."""
    if info.is_batch:
        group_of = {f: g["name"] for g in info.groups or [] for f in g["features"]}
        unknown = [n for n in names if n not in group_of]
        if unknown:
            raise PredictError(f"{path}: column {unknown[0]!r} is not a feature of model "
                               f"{info.name!r} (its features: {list(group_of)[:10]})",
                               status=2)
        groups = [group_of[n] for n in names]

        def batch_example(row) -> dict:
            features: dict[str, dict[str, float]] = {}
            for name, group, value in zip(names, groups, row, strict=True):
                if value == value:  # (NaN: a null, a value the row does not carry)
                    features.setdefault(group, {})[name] = value
            return {"features": features}
        return batch_example
    if info.hash_bits is not None:
        raise PredictError(f"{path}: Parquet columns are read as indices; model "
                           f"{info.name!r} hashes named features (give JSON lines with "
                           "\"features\")", status=2)
    try:
        indices = [int(n) for n in names]
    except ValueError:
        bad = next(n for n in names if not n.lstrip("-").isdigit())
        raise PredictError(f"{path}: column {bad!r} is not a 0-based feature index of "
                           f"model {info.name!r}", status=2) from None

    order = sorted(range(len(names)), key=indices.__getitem__)  # indices ascending

    def online_example(row) -> dict:
        pairs = [(indices[k], row[k]) for k in order if row[k] == row[k] and row[k] != 0.0]
        return {"indices": [i for i, _ in pairs], "values": [v for _, v in pairs]}
    return online_example

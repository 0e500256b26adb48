"""The serving view: what a process that does not fold a model needs to answer for it.

An online model's predictions are ``w · x`` over its non-zero weights (at most B for the
selecting learners), so the folding process publishes, after each applied micro-batch,
the pairs ``(index, weight)`` with the log id they include and the counters inspect shows.
Every other API process checks the published token before it answers (one Redis round trip)
and fetches the view when it changed: after ``?wait=true`` returns, every process answers
from a state that includes those examples (read-your-writes).

Wire format (``FBV1``): magic, ``<I`` header length, JSON header (log id, apply time,
counters, count n, names of the top features), n int64 indices (sorted, unique), n float64
weights. Decoding checks every field: a view is data, never code.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np
import orjson

from service._kernels import view_scores
from service.storage import id_key

MAGIC = b"FBV1"
_HEADER = struct.Struct("<I")
_MAX_HEADER = 16 << 20


class ViewFormatError(ValueError):
    """A published view that does not decode (or not for this model)."""


@dataclass(frozen=True)
class ServingView:
    log_id: str
    applied_at: float  # wall-clock time the owner applied ``log_id``
    n_examples: int
    n_updates: int
    progressive_examples: int
    progressive_correct: int
    indices: np.ndarray  # int64, sorted, unique
    values: np.ndarray  # float64, finite
    names: dict[int, str] = field(default_factory=dict)

    @property
    def position(self) -> tuple[int, int]:
        return id_key(self.log_id)

    def decision_function(self, X) -> np.ndarray:
        """``w · x`` per row of a CSRBatch. O(nnz · log n)."""
        scores = np.empty(X.n_rows, dtype=np.float64)
        if X.n_rows:
            view_scores(X.indptr, X.indices, X.values, self.indices, self.values, scores)
        return scores

    def encode(self) -> bytes:
        header = orjson.dumps({
            "log_id": self.log_id, "applied_at": self.applied_at, "n_examples": self.n_examples,
            "n_updates": self.n_updates, "progressive_examples": self.progressive_examples,
            "progressive_correct": self.progressive_correct, "n": len(self.indices),
            "names": {str(k): v for k, v in self.names.items()}})
        return b"".join((MAGIC, _HEADER.pack(len(header)), header,
                         np.ascontiguousarray(self.indices, dtype="<i8").tobytes(),
                         np.ascontiguousarray(self.values, dtype="<f8").tobytes()))


def _count(header: dict, name: str) -> int:
    value = header.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ViewFormatError(f"view field {name!r} must be a non-negative integer")
    return value


def decode(blob: bytes, n_features: int) -> ServingView:
    """Bytes -> a checked view of a model over ``n_features``; ViewFormatError otherwise."""
    if len(blob) < len(MAGIC) + _HEADER.size or blob[:4] != MAGIC:
        raise ViewFormatError("not a serving view (magic)")
    (size,) = _HEADER.unpack_from(blob, 4)
    start = 4 + _HEADER.size
    if size > _MAX_HEADER or start + size > len(blob):
        raise ViewFormatError("serving view header is cut")
    try:
        header = orjson.loads(blob[start:start + size])
    except orjson.JSONDecodeError as exc:
        raise ViewFormatError(f"serving view header: {exc}") from exc
    if not isinstance(header, dict):
        raise ViewFormatError("serving view header is not an object")
    log_id = header.get("log_id")
    try:
        id_key(log_id)
    except (TypeError, ValueError) as exc:
        raise ViewFormatError(f"serving view log id {log_id!r}") from exc
    applied_at = header.get("applied_at")
    if not isinstance(applied_at, float | int) or not math.isfinite(applied_at):
        raise ViewFormatError("serving view applied_at must be a finite number")
    n = _count(header, "n")
    arrays = blob[start + size:]
    if len(arrays) != 16 * n:
        raise ViewFormatError(f"serving view holds {len(arrays)} bytes for {n} weights")
    indices = np.frombuffer(arrays, dtype="<i8", count=n).astype(np.int64)
    values = np.frombuffer(arrays, dtype="<f8", count=n, offset=8 * n).astype(np.float64)
    if n and (indices[0] < 0 or indices[-1] >= n_features or np.any(np.diff(indices) <= 0)):
        raise ViewFormatError("serving view indices are not sorted, unique, in range")
    if not np.all(np.isfinite(values)):
        raise ViewFormatError("serving view holds a non-finite weight")
    raw_names = header.get("names") or {}
    if not isinstance(raw_names, dict):
        raise ViewFormatError("serving view names must be an object")
    names = {}
    for key, value in raw_names.items():
        if not (key.isdigit() and int(key) < n_features and isinstance(value, str)):
            raise ViewFormatError(f"serving view name {key!r}")
        names[int(key)] = value
    examples = _count(header, "progressive_examples")
    correct = _count(header, "progressive_correct")
    if correct > examples:
        raise ViewFormatError("serving view counts more correct than examples")
    return ServingView(log_id=log_id, applied_at=float(applied_at),
                       n_examples=_count(header, "n_examples"),
                       n_updates=_count(header, "n_updates"),
                       progressive_examples=examples, progressive_correct=correct,
                       indices=indices, values=values, names=names)


def top_names(indices: np.ndarray, values: np.ndarray, names: dict[int, str],
              limit: int) -> dict[int, str]:
    """Names of the ``limit`` largest |weights| (what inspect lists)."""
    if not names:
        return {}
    order = np.argsort(-np.abs(values), kind="stable")[:limit]
    return {int(indices[k]): names[int(indices[k])] for k in order
            if int(indices[k]) in names}


def token_position(token: str | None) -> tuple[int, int]:
    """The log position a serving view token ("<log id> <nonce>") stands for."""
    return id_key(token.partition(" ")[0]) if token else (-1, -1)

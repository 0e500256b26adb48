"""Embedded backend: pending predictions (delayed feedback) kept in a journal file.

A prediction id the API returned must still take feedback after a crash or restart, as
with Redis (where a pending prediction is a key with a TTL). Records are appended to
``pending.journal`` with one ``write`` call each::

    <u32 payload length><u32 crc32(payload)> payload
    payload = op (b"p" put / b"d" done) + <f64 expiry, wall clock> + <u16 len> model
              + <u16 len> prediction id + blob (put only)

Opening replays the journal (a torn tail is cut off, as in the log) into a dict of live
entries; expired ones are dropped. When dead records outnumber live ones (and the file is
past ``compact_bytes``), the journal is rewritten atomically with the live entries only, so
the file and the memory stay proportional to what is pending. put/pop O(1) amortized.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from pathlib import Path

_FRAME = struct.Struct("<II")
_HEAD = struct.Struct("<cdH")
_LEN = struct.Struct("<H")
MAX_PENDING_BLOB = 1 << 30  # as the log's MAX_RECORD: a request body is limited far below


class PendingJournal:
    """Pending predictions of every model of one data directory (single process)."""

    def __init__(self, path: Path, *, fsync: bool = False, compact_bytes: int = 1 << 20,
                 purge_above: int = 10000, clock=time.time) -> None:
        self.path = Path(path)
        self.purge_above = purge_above
        self.fsync = fsync
        self.compact_bytes = compact_bytes
        self.clock = clock
        self.entries: dict[tuple[str, str], tuple[float, bytes]] = {}
        self.dead = 0
        self.torn_bytes = 0
        self._replay()
        self._handle = open(self.path, "ab", buffering=0)  # noqa: SIM115

    def put(self, model: str, prediction_id: str, blob: bytes, ttl_seconds: float) -> None:
        """Record a pending prediction; durable against a process crash once this returns."""
        if len(blob) > MAX_PENDING_BLOB:
            raise ValueError(f"pending prediction of {len(blob)} bytes is too large")
        now = self.clock()
        if len(self.entries) > self.purge_above:
            self._purge_expired(now)
        expiry = now + ttl_seconds
        key = (model, prediction_id)
        if key in self.entries:
            self.dead += 1
        self._write(_record(b"p", expiry, model, prediction_id, blob))
        self.entries[key] = (expiry, blob)
        self._maybe_compact()

    def pop(self, model: str, prediction_id: str) -> bytes | None:
        """Remove and return the blob; None when unknown or expired."""
        item = self.entries.pop((model, prediction_id), None)
        if item is None:
            return None
        self._write(_record(b"d", 0.0, model, prediction_id, b""))
        self.dead += 2
        self._maybe_compact()
        return item[1] if item[0] >= self.clock() else None

    def drop_model(self, model: str) -> None:
        """Forget every pending prediction of ``model`` (the model was deleted)."""
        for key in [k for k in self.entries if k[0] == model]:
            self.pop(*key)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    # ------------------------------------------------------------------ internals
    def _write(self, record: bytes) -> None:
        self._handle.write(record)
        if self.fsync:
            os.fsync(self._handle.fileno())

    def _replay(self) -> None:
        data = self.path.read_bytes() if self.path.exists() else b""
        offset, now = 0, self.clock()
        while offset + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, offset)
            end = offset + _FRAME.size + length
            if end > len(data) or length > MAX_PENDING_BLOB + 1024:
                break
            payload = data[offset + _FRAME.size:end]
            if zlib.crc32(payload) != crc:
                break
            op, expiry, model, prediction_id, blob = _parse(payload)
            if op == b"p":
                self.entries[(model, prediction_id)] = (expiry, blob)
            else:
                self.entries.pop((model, prediction_id), None)
            offset = end
        if offset != len(data):  # torn tail of a write cut short by a crash
            self.torn_bytes = len(data) - offset
            with open(self.path, "r+b") as handle:
                handle.truncate(offset)
        self.entries = {k: v for k, v in self.entries.items() if v[0] >= now}
        self.dead = 0
        if offset and (self.torn_bytes or len(self.entries) == 0 or offset > self.compact_bytes):
            self._rewrite()

    def _purge_expired(self, now: float) -> None:
        expired = [k for k, (expiry, _) in self.entries.items() if expiry < now]
        for key in expired:
            del self.entries[key]
        self.dead += len(expired)

    def _maybe_compact(self) -> None:
        if self.dead > max(len(self.entries), 64) and self._handle.tell() > self.compact_bytes:
            self._handle.close()
            self._rewrite()
            self._handle = open(self.path, "ab", buffering=0)  # noqa: SIM115

    def _rewrite(self) -> None:
        now = self.clock()
        self.entries = {k: v for k, v in self.entries.items() if v[0] >= now}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(b"".join(_record(b"p", expiry, model, pid, blob)
                                  for (model, pid), (expiry, blob) in self.entries.items()))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        self.dead = 0


def _record(op: bytes, expiry: float, model: str, prediction_id: str, blob: bytes) -> bytes:
    name, pid = model.encode(), prediction_id.encode()
    payload = b"".join((_HEAD.pack(op, expiry, len(name)), name, _LEN.pack(len(pid)), pid, blob))
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _parse(payload: bytes) -> tuple[bytes, float, str, str, bytes]:
    op, expiry, name_len = _HEAD.unpack_from(payload, 0)
    at = _HEAD.size
    model = payload[at:at + name_len].decode()
    at += name_len
    (pid_len,) = _LEN.unpack_from(payload, at)
    at += _LEN.size
    prediction_id = payload[at:at + pid_len].decode()
    return op, expiry, model, prediction_id, payload[at + pid_len:]

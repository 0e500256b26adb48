"""Embedded backend: an append-only segmented log and atomic snapshot files per model.

Layout under the data directory::

    models/<m>/model.json           config (written atomically: temp file, fsync, rename)
    models/<m>/snapshot.fbs         latest snapshot (same)
    models/<m>/log/<seq:020d>.seg   log segments; the name is the first id in the segment
    models/<m>/deadletter.jsonl     rejected entries with the reason
    models/<m>/artifacts/<v>.fba    batch models: version v's fitted model (+ <v>.json metadata)
    models/<m>/version              batch models: the current version (and version_seq: the last
                                    number handed out); jobs.json: retrain job records;
                                    cancels.json: jobs whose cancellation was requested
    pending.journal                 pending predictions awaiting feedback (service.storage.pending)

A log record is ``<u32 payload length><u32 crc32(seq + payload)><u64 seq>`` + payload, where
the payload is one format byte (``b`` bin, ``j`` json, ``l`` libsvm) and the data, or ``n``
(bin with feature names): ``<u32 length>`` + the names (JSON) + the data; a payload may be
prefixed by ``k<u16 length><idempotency key>``: the key of the request that appended it,
found again by the scan on open, so a retried request is recognized after a crash too. Ids are
consecutive integers from 1. On open, each segment is scanned; the first record whose frame
or checksum does not hold is a torn tail (a write cut short by a crash) and the segment is
truncated there. A record is written with one ``write`` call before the append returns, so
a process crash (SIGKILL) never loses an acknowledged entry; with ``fsync=True`` neither
does a power loss. One process owns a data directory (an exclusive ``flock``). Appends and
reads hold the log's lock; big ones (and any that would wait for the lock) run on a
background thread (:mod:`service.priority`), so the event loop never waits for the disk.
Snapshots and versions of any size are written whole (temp file, fsync, rename) and read
on a worker thread.
"""

from __future__ import annotations

import asyncio
import bisect
import fcntl
import json
import os
import re
import shutil
import struct
import threading
import time
import urllib.parse
import uuid
import zlib
from collections import OrderedDict
from pathlib import Path

from service import fbx1
from service.priority import fits_loop, in_background, loop_seconds
from service.storage.base import (
    Appended,
    LogEntry,
    LogReader,
    ModelChangedError,
    Storage,
    id_key,
    incarnation_of,
)
from service.storage.pending import PendingJournal

_FRAME = struct.Struct("<IIQ")
_FORMAT_CODES = {b"bin": b"b", b"json": b"j", b"libsvm": b"l"}
_FORMAT_NAMES = {v: k for k, v in _FORMAT_CODES.items()}
_NAMES = struct.Struct("<I")
_KEY = struct.Struct("<H")
KEYS_KEPT = 100_000  # idempotency keys remembered per model (the newest)
MAX_RECORD = 1 << 30  # a longer frame is a torn tail on open (service.fbx1.MAX_ENTRY_BYTES)
_JOIN_BYTES = 64 << 10  # smaller pieces of a record are joined into one write


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` so a reader sees the old or the new file, never a part."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        if fsync:
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    if fsync:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


class _Segment:
    def __init__(self, path: Path, first_seq: int) -> None:
        self.path = path
        self.first_seq = first_seq
        self.offsets: list[int] = []  # offset of record k (seq first_seq + k)
        self.size = 0

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self.offsets)


class LocalLog:
    """One model's segmented log (single process)."""

    def __init__(self, directory: Path, *, segment_bytes: int, fsync: bool) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.segments: list[_Segment] = []
        self.torn_bytes = 0
        self._handle = None
        self.appended = asyncio.Event()  # set on the event loop after each append
        self.lock = threading.Lock()  # one append / read / trim at a time
        # idempotency key -> (log id, examples the request appended; None: not known)
        self.keys: OrderedDict[bytes, tuple[str, int | None]] = OrderedDict()
        directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(directory.glob("*.seg")):
            segment = _Segment(path, int(path.stem))
            self._scan(segment)
            self.segments.append(segment)
        if not self.segments:
            self._new_segment(1)
        self._handle = open(self.segments[-1].path, "ab", buffering=0)  # noqa: SIM115

    def _scan(self, segment: _Segment) -> None:
        data = segment.path.read_bytes()
        offset, seq = 0, segment.first_seq
        while offset + _FRAME.size <= len(data):
            length, crc, record_seq = _FRAME.unpack_from(data, offset)
            end = offset + _FRAME.size + length
            if record_seq != seq or length > MAX_RECORD or end > len(data):
                break
            payload = data[offset + _FRAME.size:end]
            if zlib.crc32(payload, zlib.crc32(struct.pack("<Q", seq))) != crc:
                break
            if payload[:1] == b"k":  # (the request's count: its record's, the only one
                (size,) = _KEY.unpack_from(payload, 1)  # of a request that uses a key)
                self._remember(bytes(payload[1 + _KEY.size:1 + _KEY.size + size]), str(seq),
                               fbx1.batch_rows(_fields(memoryview(payload))[b"data"]))
            segment.offsets.append(offset)
            offset, seq = end, seq + 1
        if offset != len(data):  # torn tail: cut it off
            self.torn_bytes += len(data) - offset
            with open(segment.path, "r+b") as handle:
                handle.truncate(offset)
                handle.flush()
                os.fsync(handle.fileno())
        segment.size = offset

    def _new_segment(self, first_seq: int) -> None:
        path = self.directory / f"{first_seq:020d}.seg"
        path.touch()
        self.segments.append(_Segment(path, first_seq))

    @property
    def last_seq(self) -> int:
        return self.segments[-1].next_seq - 1

    def _remember(self, key: bytes, log_id: str, examples: int | None) -> None:
        self.keys[key] = (log_id, examples)
        self.keys.move_to_end(key)
        while len(self.keys) > KEYS_KEPT:
            self.keys.popitem(last=False)

    def append(self, entries: list[tuple], key: bytes | None = None) -> list[str]:
        """Append ``(format, data)`` or ``(format, data, names)`` records; one write call for
        the batch; ``key`` (an idempotency key) goes with the first record. O(bytes)."""
        with self.lock:
            return self._append(entries, key)

    def append_once(self, entries: list[tuple], key: bytes,
                    examples: int | None = None) -> Appended:
        """Append unless ``key`` was used before: (ids, False), or ([first id], True) with
        the first append's ``examples``."""
        with self.lock:
            return self._append_once(entries, key, examples)

    def _append_once(self, entries: list[tuple], key: bytes,
                     examples: int | None = None) -> Appended:
        known = self.keys.get(key)
        if known is not None:
            return Appended([known[0]], True, known[1])
        return Appended(self._append(entries, key, examples), False, examples)

    def _append(self, entries: list[tuple], key: bytes | None = None,
                examples: int | None = None) -> list[str]:
        segment = self.segments[-1]
        if segment.size >= self.segment_bytes and segment.offsets:
            self._handle.close()
            self._new_segment(segment.next_seq)
            segment = self.segments[-1]
            self._handle = open(segment.path, "ab", buffering=0)  # noqa: SIM115
        pieces, ids, offsets = [], [], []
        seq, offset = segment.next_seq, segment.size
        for number, (fmt, data, *names) in enumerate(entries):
            if names and names[0]:
                head = b"n" + _NAMES.pack(len(names[0])) + names[0]
            else:
                head = _FORMAT_CODES.get(fmt, b"l")
            if key is not None and number == 0:
                head = b"k" + _KEY.pack(len(key)) + key + head
            size = len(head) + len(data)
            if size > MAX_RECORD:  # the scan on open would cut it (and all after)
                raise ValueError(f"a log record of {size:,} bytes is over the limit "
                                 f"of {MAX_RECORD:,}")
            crc = zlib.crc32(data, zlib.crc32(head, zlib.crc32(struct.pack("<Q", seq))))
            pieces += (_FRAME.pack(size, crc, seq) + head, data)
            offsets.append(offset)
            ids.append(str(seq))
            offset += _FRAME.size + size
            seq += 1
        self._write(pieces)
        if self.fsync:
            os.fsync(self._handle.fileno())
        segment.offsets.extend(offsets)
        segment.size = offset
        if key is not None:
            self._remember(key, ids[0], examples)
        return ids

    def _write(self, pieces: list) -> None:
        """Write ``pieces`` in order: small ones joined, a large one (a body's examples, MBs)
        written from the caller's buffer, never copied (a copy holds the GIL: ~2 ms per
        10 MB, which the event loop waits out)."""
        small: list = []
        for piece in pieces:
            if len(piece) < _JOIN_BYTES:
                small.append(piece)
                continue
            if small:
                self._write_all(b"".join(small))
                small = []
            self._write_all(piece)
        if small:
            self._write_all(b"".join(small))

    def _write_all(self, data) -> None:
        view, written = memoryview(data), 0
        while written < len(view):
            written += self._handle.write(view[written:])

    def read(self, after_seq: int, count: int) -> list[LogEntry]:
        """Records with seq > after_seq, at most ``count``."""
        with self.lock:
            return self._read(after_seq, count)

    def _read(self, after_seq: int, count: int) -> list[LogEntry]:
        seq = max(after_seq + 1, self.segments[0].first_seq)
        out: list[LogEntry] = []
        position = bisect.bisect_right([s.first_seq for s in self.segments], seq) - 1
        while position < len(self.segments) and len(out) < count:
            segment = self.segments[position]
            k = seq - segment.first_seq
            if k < len(segment.offsets):
                stop = min(len(segment.offsets), k + count - len(out))
                start_offset = segment.offsets[k]
                end_offset = segment.offsets[stop] if stop < len(segment.offsets) \
                    else segment.size
                with open(segment.path, "rb") as handle:
                    handle.seek(start_offset)
                    data = memoryview(handle.read(end_offset - start_offset))
                offset = 0
                for record_seq in range(seq, segment.first_seq + stop):
                    length, _, _ = _FRAME.unpack_from(data, offset)  # (views: no copy of a
                    payload = data[offset + _FRAME.size:offset + _FRAME.size + length]  # MB)
                    out.append(LogEntry(str(record_seq), _fields(payload)))
                    offset += _FRAME.size + length
                seq = segment.first_seq + stop
            position += 1
        return out

    def trim(self, keep_from_seq: int) -> None:
        """Delete whole segments whose records are all < keep_from_seq: taken out of the log
        under the lock, their files removed after it (unlinking a 64 MB file takes tens of
        ms: appends and reads do not wait for it)."""
        with self.lock:
            dropped = self._trim(keep_from_seq)
        for path in dropped:
            path.unlink(missing_ok=True)

    def _trim(self, keep_from_seq: int) -> list[Path]:
        dropped = []
        while len(self.segments) > 1 and self.segments[1].first_seq <= keep_from_seq:
            dropped.append(self.segments.pop(0).path)
        return dropped

    def close(self) -> None:
        with self.lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    async def run(self, size: int | None, method, *args):
        """``method`` (an unlocked ``_append`` / ``_read`` ...) under the lock: on the event
        loop when appending ``size`` bytes fits the loop's budget
        (:func:`~service.priority.fits_loop`) and the lock is free, else (and always for
        ``size`` None: reads, whose size is not known before, and with ``fsync``: an fsync
        takes milliseconds) on a background thread."""
        if size is not None and not self.fsync and \
                fits_loop(loop_seconds("append_bytes", size)) and \
                self.lock.acquire(blocking=False):
            try:
                return method(*args)
            finally:
                self.lock.release()

        def locked():
            with self.lock:
                return method(*args)

        return await in_background(locked)


def _fields(payload: bytes | memoryview) -> dict:
    """A record's payload as stream-entry fields (``fmt``, ``data``, maybe ``names``);
    ``data`` is a slice of ``payload`` (a view of a view: no copy)."""
    code = bytes(payload[:1])
    if code == b"k":  # the idempotency key: the fold does not need it
        (size,) = _KEY.unpack_from(payload, 1)
        payload = payload[1 + _KEY.size + size:]
        code = bytes(payload[:1])
    if code == b"n":
        (length,) = _NAMES.unpack_from(payload, 1)
        start = 1 + _NAMES.size
        return {b"fmt": b"bin", b"names": bytes(payload[start:start + length]),
                b"data": payload[start + length:]}
    return {b"fmt": _FORMAT_NAMES.get(code, b"libsvm"), b"data": payload[1:]}


def _records(entries: list[dict[bytes, bytes]]) -> list[tuple]:
    return [(e.get(b"fmt", b"bin"), e[b"data"], e.get(b"names")) for e in entries]


def _record_bytes(entries: list[dict[bytes, bytes]]) -> int:
    return sum(len(e[b"data"]) + len(e.get(b"names") or b"") for e in entries)


class _LocalReader(LogReader):
    def __init__(self, log: LocalLog) -> None:
        self.log = log
        self.position = 0

    async def start(self, after_id: str | None) -> None:
        self.position = int(after_id) if after_id else 0

    async def read(self, count: int, block_ms: int) -> list[LogEntry]:
        if self.log.last_seq <= self.position:
            self.log.appended.clear()
            if self.log.last_seq <= self.position:
                try:
                    await asyncio.wait_for(self.log.appended.wait(), block_ms / 1000)
                except TimeoutError:
                    return []
        entries = await self.log.run(None, self.log._read, self.position, count)
        if entries:
            self.position = int(entries[-1].id)
        return entries

    async def ack(self, ids: list[str]) -> None:
        return None


class LocalStorage(Storage):
    kind = "local"
    log_id_form = "a number"  # ids are consecutive integers from 1
    log_id_pattern = re.compile(r"^\d+$")

    def __init__(self, data_dir: str | os.PathLike, *, segment_bytes: int = 64 << 20,
                 fsync: bool = False) -> None:
        self.root = Path(data_dir)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self._logs: dict[str, LocalLog] = {}
        self._pending: PendingJournal | None = None
        self._lock_handle = None
        self._status: dict[str, bytes] = {}
        self._requested: dict[str, dict[str, bytes]] = {}  # model -> process -> counts
        self._incarnations: dict[str, str] = {}  # model -> the stored incarnation
        self._listeners: list[asyncio.Queue] = []
        self._job_listeners: list[asyncio.Queue] = []

    @property
    def description(self) -> str:
        return f"local backend in {self.root.resolve()}"

    def holds_service_data(self) -> bool:
        return (self.root / "models").is_dir()

    async def open(self) -> None:
        (self.root / "models").mkdir(parents=True, exist_ok=True)
        self._lock_handle = open(self.root / ".lock", "a+")  # noqa: SIM115
        try:
            fcntl.flock(self._lock_handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RuntimeError(f"data directory {self.root} is in use by another process; "
                               "the embedded backend serves from one process (use Redis "
                               "for several workers)") from exc
        self._pending = PendingJournal(self.root / "pending.journal", fsync=self.fsync)

    async def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        if self._pending is not None:
            self._pending.close()
            self._pending = None
        if self._lock_handle is not None:
            self._lock_handle.close()
            self._lock_handle = None

    async def ping(self) -> None:
        if not (self.root / "models").is_dir():
            raise RuntimeError(f"data directory {self.root} is missing")

    def _dir(self, model: str) -> Path:
        return self.root / "models" / model

    def _log(self, model: str) -> LocalLog:
        log = self._logs.get(model)
        if log is None:
            if not (self._dir(model) / "model.json").exists():
                raise KeyError(model)
            log = LocalLog(self._dir(model) / "log", segment_bytes=self.segment_bytes,
                           fsync=self.fsync)
            self._logs[model] = log
        return log

    async def save_model(self, name: str, spec: bytes, *, create: bool) -> bool:
        directory = self._dir(name)
        if create and (directory / "model.json").exists():
            return False
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(directory / "model.json", spec)
        self._incarnations[name] = incarnation_of(spec)
        return True

    def _check_incarnation(self, name: str, incarnation: str | None) -> None:
        """ModelChangedError unless the stored model is ``incarnation`` (None: any). O(1)
        once the model's config was read."""
        if incarnation is None:
            return
        known = self._incarnations.get(name)
        if known is None:
            path = self._dir(name) / "model.json"
            if not path.exists():
                raise ModelChangedError(name)
            known = self._incarnations[name] = incarnation_of(path.read_bytes())
        if known != incarnation:
            raise ModelChangedError(name)

    async def load_models(self) -> dict[str, bytes]:
        models = {}
        for path in sorted((self.root / "models").glob("*/model.json")):
            models[path.parent.name] = path.read_bytes()
        return models

    async def delete_model(self, name: str) -> bool:
        directory = self._dir(name)
        if not (directory / "model.json").exists():
            return False
        self._incarnations.pop(name, None)
        log = self._logs.pop(name, None)
        if log is not None:
            log.close()
        trash = self.root / "trash"
        trash.mkdir(exist_ok=True)
        target = trash / f"{name}.{uuid.uuid4().hex}"
        os.replace(directory, target)  # atomic: the model is gone in one step
        shutil.rmtree(target, ignore_errors=True)
        self._pending.drop_model(name)
        self._status.pop(name, None)
        self._requested.pop(name, None)
        return True

    async def append(self, model: str, entries: list[dict[bytes, bytes]], *,
                     incarnation: str | None = None) -> list[str]:
        self._check_incarnation(model, incarnation)  # (one process: no step between them)
        log = self._log(model)
        ids = await log.run(_record_bytes(entries), log._append, _records(entries))
        log.appended.set()
        return ids

    async def append_once(self, model: str, entries: list[dict[bytes, bytes]], key: str,
                          retention_seconds: float, *, examples: int | None = None,
                          incarnation: str | None = None) -> Appended:
        self._check_incarnation(model, incarnation)
        log = self._log(model)
        appended = await log.run(_record_bytes(entries), log._append_once,
                                 _records(entries), key.encode(), examples)
        log.appended.set()
        return appended

    async def log_end(self, model: str) -> str | None:
        last = self._log(model).last_seq
        return str(last) if last > 0 else None

    async def trim(self, model: str, keep_from_id: str) -> None:
        log = self._log(model)
        await in_background(log.trim, int(keep_from_id))

    def reader(self, model: str, consumer: str) -> LogReader:
        return _LocalReader(self._log(model))

    async def deadletter(self, model: str, entry: LogEntry, reason: str) -> None:
        record = {"id": entry.id, "reason": reason, "time": time.time(),
                  "fmt": (entry.fields.get(b"fmt") or b"").decode(),
                  "data": bytes(entry.fields.get(b"data", b"")[:65536]).decode("latin-1")}
        with open(self._dir(model) / "deadletter.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")

    async def read_deadletters(self, model: str, count: int = 100) -> list[dict]:
        path = self._dir(model) / "deadletter.jsonl"
        if not path.exists():
            return []
        lines = path.read_text().splitlines()[-count:]
        return [json.loads(line) for line in lines]

    async def save_snapshot(self, model: str, blob: bytes, log_id: str | None, *,
                            owner: str | None = None) -> bool:
        directory = self._dir(model)  # one process owns the data directory: no lease to check
        if not directory.exists():
            return False
        # the write and its fsyncs take up to ~100 ms: off the event loop
        await asyncio.to_thread(atomic_write, directory / "snapshot.fbs", blob)
        return True

    async def load_snapshot(self, model: str) -> bytes | None:
        path = self._dir(model) / "snapshot.fbs"
        return await asyncio.to_thread(path.read_bytes) if path.exists() else None

    async def snapshot_position(self, model: str) -> str | None:
        return None

    async def put_pending(self, model: str, prediction_id: str, blob: bytes,
                          ttl_seconds: float) -> None:
        self._pending.put(model, prediction_id, blob, ttl_seconds)

    async def pop_pending(self, model: str, prediction_id: str) -> bytes | None:
        return self._pending.pop(model, prediction_id)

    # ------------------------------------------------------------------ batch models
    def _read_int(self, path: Path) -> int | None:
        try:
            return int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _artifacts(self, model: str) -> Path:
        return self._dir(model) / "artifacts"

    async def next_version(self, model: str) -> int:
        path = self._dir(model) / "version_seq"
        stored = [int(p.stem) for p in self._artifacts(model).glob("*.fba")]
        version = max([self._read_int(path) or 0, *stored]) + 1
        atomic_write(path, str(version).encode(), fsync=self.fsync)
        return version

    async def publish_artifact(self, model: str, version: int, blob: bytes, meta: bytes, *,
                               owner: str | None = None) -> bool:
        if not (self._dir(model) / "model.json").exists():
            return False
        directory = self._artifacts(model)
        directory.mkdir(exist_ok=True)
        await asyncio.to_thread(atomic_write, directory / f"{int(version)}.fba", blob)
        await asyncio.to_thread(atomic_write, directory / f"{int(version)}.json", meta)
        await self._make_current(model, int(version))
        return True

    async def _make_current(self, model: str, version: int) -> None:
        """Point the model at ``version`` (its fsyncs take tens of ms: off the loop) and tell
        the listeners."""
        await asyncio.to_thread(atomic_write, self._dir(model) / "version",
                                str(version).encode())
        self._notify(model, version)

    def _notify(self, model: str, version: int) -> None:
        for queue in self._listeners:
            queue.put_nowait((model, version))

    async def load_artifact(self, model: str, version: int) -> bytes | None:
        path = self._artifacts(model) / f"{int(version)}.fba"
        try:  # (hundreds of MB at large D: off the event loop)
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def list_artifacts(self, model: str) -> dict[int, bytes]:
        out = {}
        for path in self._artifacts(model).glob("*.json"):
            if path.stem.isdigit() and path.with_suffix(".fba").exists():
                out[int(path.stem)] = path.read_bytes()
        return dict(sorted(out.items()))

    async def delete_artifacts(self, model: str, versions: list[int]) -> None:
        for version in versions:
            for suffix in (".json", ".fba"):
                (self._artifacts(model) / f"{int(version)}{suffix}").unlink(missing_ok=True)

    async def current_version(self, model: str) -> int | None:
        return self._read_int(self._dir(model) / "version")

    async def set_current_version(self, model: str, version: int) -> bool:
        if not (self._artifacts(model) / f"{int(version)}.fba").exists():
            return False
        await self._make_current(model, int(version))
        return True

    async def version_events(self):
        queue: asyncio.Queue = asyncio.Queue()
        self._listeners.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._listeners.remove(queue)

    async def notify_job(self, model: str) -> None:
        for queue in self._job_listeners:
            queue.put_nowait(model)

    async def job_events(self):
        queue: asyncio.Queue = asyncio.Queue()
        self._job_listeners.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._job_listeners.remove(queue)

    def _jobs_path(self, model: str) -> Path:
        return self._dir(model) / "jobs.json"

    def _read_jobs(self, model: str) -> dict[str, str]:
        path = self._jobs_path(model)
        return json.loads(path.read_text()) if path.exists() else {}

    async def save_job(self, model: str, job_id: str, record: bytes) -> None:
        if not self._dir(model).exists():
            return
        jobs = self._read_jobs(model)
        jobs[job_id] = record.decode()
        atomic_write(self._jobs_path(model), json.dumps(jobs).encode(), fsync=self.fsync)

    async def load_jobs(self, model: str) -> dict[str, bytes]:
        return {k: v.encode() for k, v in self._read_jobs(model).items()}

    async def delete_jobs(self, model: str, job_ids: list[str]) -> None:
        jobs = self._read_jobs(model)
        for job_id in job_ids:
            jobs.pop(job_id, None)
        if self._dir(model).exists():
            atomic_write(self._jobs_path(model), json.dumps(jobs).encode(), fsync=self.fsync)

    def _cancels_path(self, model: str) -> Path:
        return self._dir(model) / "cancels.json"

    async def request_cancel(self, model: str, job_id: str) -> None:
        if not self._dir(model).exists():
            return
        path = self._cancels_path(model)
        cancels = json.loads(path.read_text()) if path.exists() else {}
        cancels[job_id] = time.time()
        atomic_write(path, json.dumps(cancels).encode(), fsync=self.fsync)

    async def cancel_requests(self, model: str) -> set[str]:
        path = self._cancels_path(model)
        try:
            return set(json.loads(path.read_text()))
        except (FileNotFoundError, ValueError):
            return set()

    async def storage_room(self, model: str) -> int | None:
        """Free bytes of the data directory's file system."""
        try:
            return int(shutil.disk_usage(self.root).free)
        except OSError:
            return None

    async def save_status(self, model: str, status: bytes) -> None:
        self._status[model] = status

    async def load_status(self, model: str) -> bytes | None:
        return self._status.get(model)

    async def save_requested_sets(self, model: str, process_id: str, counts: bytes) -> None:
        """Kept in memory: only this process serves and fits the data directory's models."""
        self._requested.setdefault(model, {})[process_id] = counts

    async def load_requested_sets(self, model: str) -> dict[str, bytes]:
        return dict(self._requested.get(model, {}))


def file_path(url: str) -> Path:
    """``file://<dir>`` -> ``<dir>`` (``file:///srv/data`` -> ``/srv/data``, ``file://data``
    -> ``data``, relative to the working directory)."""
    return Path(urllib.parse.unquote(url.partition("://")[2]))


def open_url(url: str, settings) -> LocalStorage:
    """The scheme table's factory for ``file://<dir>`` (:mod:`service.storage.schemes`)."""
    return LocalStorage(file_path(url), segment_bytes=settings.log_segment_bytes,
                        fsync=settings.fsync)


__all__ = ["LocalLog", "LocalStorage", "atomic_write", "file_path", "id_key", "open_url"]

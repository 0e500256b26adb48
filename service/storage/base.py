"""The storage abstraction: model configs, per-model logs, snapshots, pending predictions.

Two backends implement it: :mod:`service.storage.local` (embedded default: files in a data
directory) and :mod:`service.storage.redis` (Redis streams); the scheme table
(:mod:`service.storage.schemes`) picks one. Log ids are strings that compare by
:func:`id_key` (Redis ``ms-seq``; local ``seq``); what else an id says is the backend's to
tell (:meth:`Storage.id_time`, :meth:`Storage.is_log_id`): no code outside this package
asks which backend it has.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass


def id_key(log_id: str | bytes | None) -> tuple[int, int]:
    """Sort key of a log id; ``None`` (nothing) sorts first."""
    if log_id is None:
        return (-1, -1)
    if isinstance(log_id, bytes):
        log_id = log_id.decode()
    ms, _, seq = log_id.partition("-")
    return (int(ms), int(seq or 0))


class Appended(tuple):
    """``(ids, repeat)`` of :meth:`Storage.append_once` (unpacks as that pair), and
    ``examples``: how many examples the append that first used the key holds, as that
    append said (None when not known: a key written by an earlier version)."""

    def __new__(cls, ids: list[str], repeat: bool, examples: int | None = None) -> Appended:
        self = super().__new__(cls, (ids, repeat))
        self.examples = examples
        return self


async def _never():
    """An async iterator that never yields (the events of a single-process backend)."""
    import asyncio

    await asyncio.Event().wait()
    yield ""  # pragma: no cover - never reached


class ModelChangedError(KeyError):
    """The append named an incarnation of the model that is not the stored one (the model
    was deleted, or deleted and created again under its name): nothing was appended."""


def incarnation_of(spec: bytes) -> str:
    """The incarnation of a stored model config ("" for a config stored before
    incarnations, or one that is not a JSON object)."""
    import orjson

    try:
        value = orjson.loads(spec).get("incarnation", "")
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


@dataclass
class LogEntry:
    id: str
    fields: dict  # bytes keys: b"data", optional b"fmt"


class LogReader(abc.ABC):
    """One consumer of one model's log: delivers entries after a position, in log order."""

    @abc.abstractmethod
    async def start(self, after_id: str | None) -> None:
        """Position the reader right after ``after_id`` (``None``: the log's start)."""

    @abc.abstractmethod
    async def read(self, count: int, block_ms: int) -> list[LogEntry]:
        """Up to ``count`` entries; waits up to ``block_ms`` when none is there."""

    @abc.abstractmethod
    async def ack(self, ids: list[str]) -> None:
        """Acknowledge entries that were applied (or dead-lettered)."""

    async def reclaim(self, applied_id: str | None) -> int:
        """Acknowledge stale pending entries of dead consumers (<= applied); count."""
        return 0


class Storage(abc.ABC):
    kind: str = "abstract"  # the backend's name, for output only (/readyz, messages)
    shared: bool = False  # whether several processes may share it
    log_id_form: str = "any string"  # how a log id looks, for messages
    log_id_pattern: re.Pattern | None = None  # None: any string

    @property
    def description(self) -> str:
        """The backend and where it keeps its data, for start-up lines (no secret: a
        password in a URL is masked), e.g. ``local backend in /data``."""
        return f"{self.kind} backend"

    def holds_service_data(self) -> bool:
        """Whether the storage already holds the service's data, before :meth:`open` (which
        may create it): a data directory with its ``models/``; a server, yes (it is asked
        when opened). For commands that must not start a fresh, empty storage."""
        return True

    def is_log_id(self, text: str) -> bool:
        """Whether ``text`` has the form of this backend's log ids; O(len(text))."""
        return self.log_id_pattern is None or self.log_id_pattern.match(text) is not None

    def id_time(self, log_id: str) -> float | None:
        """When the entry ``log_id`` was appended (epoch seconds), when its id says so;
        None when ids carry no time. O(1)."""
        return None

    async def open(self) -> None:  # noqa: B027 - optional hook
        pass

    async def close(self) -> None:  # noqa: B027
        pass

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise when the storage is unreachable."""

    # models
    @abc.abstractmethod
    async def save_model(self, name: str, spec: bytes, *, create: bool) -> bool:
        """Store a model config; with ``create``, False when the name is taken."""

    @abc.abstractmethod
    async def load_models(self) -> dict[str, bytes]: ...

    @abc.abstractmethod
    async def delete_model(self, name: str) -> bool:
        """Delete config, log, snapshot; False when there was no such model."""

    # log
    @abc.abstractmethod
    async def append(self, model: str, entries: list[dict[bytes, bytes]], *,
                     incarnation: str | None = None) -> list[str]:
        """Append entries atomically in order; return their ids (durable once returned).
        With ``incarnation``: only if the stored model is that incarnation, checked in the
        same step as the append (ModelChangedError, and nothing appended, otherwise)."""

    @abc.abstractmethod
    async def append_once(self, model: str, entries: list[dict[bytes, bytes]], key: str,
                          retention_seconds: float, *, examples: int | None = None,
                          incarnation: str | None = None) -> Appended:
        """Append like :meth:`append` unless ``key`` was used within the retention window:
        then append nothing and answer the ids of the first append. The append and the key
        are written in one step (a crash keeps both or neither). ``(ids, was_a_repeat)``,
        with ``.examples``: the first append's ``examples`` (how many it holds).
        ``incarnation``: as in :meth:`append`."""

    @abc.abstractmethod
    async def log_end(self, model: str) -> str | None: ...

    @abc.abstractmethod
    async def trim(self, model: str, keep_from_id: str) -> None:
        """Drop entries strictly before ``keep_from_id`` (never one still needed)."""

    @abc.abstractmethod
    def reader(self, model: str, consumer: str) -> LogReader: ...

    @abc.abstractmethod
    async def deadletter(self, model: str, entry: LogEntry, reason: str) -> None: ...

    @abc.abstractmethod
    async def read_deadletters(self, model: str, count: int = 100) -> list[dict]: ...

    # snapshots: the state and the id of the last entry it includes, written together
    @abc.abstractmethod
    async def save_snapshot(self, model: str, blob: bytes, log_id: str | None, *,
                            owner: str | None = None) -> bool:
        """Write state and log id atomically; with ``owner``, only while ``owner`` holds the
        model's lease (fencing), and never over a snapshot that includes a later entry.
        False when refused."""

    @abc.abstractmethod
    async def load_snapshot(self, model: str) -> bytes | None: ...

    @abc.abstractmethod
    async def snapshot_position(self, model: str) -> str | None: ...

    # pending predictions (delayed feedback)
    @abc.abstractmethod
    async def put_pending(self, model: str, prediction_id: str, blob: bytes,
                          ttl_seconds: float) -> None: ...

    @abc.abstractmethod
    async def pop_pending(self, model: str, prediction_id: str) -> bytes | None: ...

    # ownership (one process folds a model's log at a time)
    async def acquire_lease(self, model: str, owner: str, ttl_seconds: float, *,
                            renew_only: bool = False) -> bool:
        """Renew ``owner``'s lease, or take a free one (not with ``renew_only``: an owner
        whose lease lapsed must reload the snapshot before it folds again)."""
        return True

    async def release_lease(self, model: str, owner: str) -> None:  # noqa: B027
        pass

    async def publish_applied(self, model: str, log_id: str) -> None:  # noqa: B027
        pass

    async def heartbeat(self, model: str, owner: str) -> None:  # noqa: B027
        """The folding process says it is alive (with each lease renewal)."""

    async def heartbeats(self, models: list[str]) -> dict[str, tuple[float, str]]:
        """Model -> (seconds since its folding process's last heartbeat, that process);
        models without one are left out. Empty on a single-process backend."""
        return {}

    async def applied_position(self, model: str) -> str | None:
        return None

    # placement (service.placement): the live processes of a role
    async def members(self, role: str, process_id: str, *, joined: float,
                      expires: float) -> dict[str, float]:
        """Register ``process_id`` until ``expires`` (wall clock); every live member of the
        role -> when it joined. A member that has not renewed for two thirds of its period
        is not live (it missed two renewals: likely killed). A single-process backend has
        one member."""
        return {process_id: joined}

    async def leave(self, role: str, process_id: str) -> None:  # noqa: B027
        """Unregister at a clean stop."""

    async def live_members(self, role: str, lease_seconds: float) -> list[str]:
        """The live members of ``role`` (renewed within two thirds of ``lease_seconds``),
        read without registering. Empty on a single-process backend."""
        return []

    async def stream_models(self) -> set[str]:
        """The model names of every log stream a producer may write to (O(keys) on Redis:
        a SCAN). Empty on a single-process backend."""
        return set()

    async def lease_holder(self, model: str) -> str | None:
        """The process holding the model's lease, None when it is free."""
        return None

    # the serving view (service.online.view): what every process answers from (shared backends)
    async def publish_view(self, model: str, token: str, blob: bytes, *,
                           owner: str | None = None) -> bool:
        """Store the view ``blob`` under ``token`` ("<log id> <nonce>") and the applied
        position, only while ``owner`` holds the lease and never over a view of a later log
        id. False when refused. No-op (True) on a single-process backend."""
        return True

    async def fetch_view(self, model: str, known_token: str | None
                         ) -> tuple[str | None, bytes | None]:
        """(token, blob): the blob only when the token differs from ``known_token``; one
        round trip."""
        return None, None

    async def view_token(self, model: str) -> str | None:
        return None

    # batch models: versioned artifacts, a current-version pointer, retrain jobs, status.
    # (A batch fold's own state is its snapshot: save_snapshot / load_snapshot.)
    @abc.abstractmethod
    async def next_version(self, model: str) -> int:
        """A version number above every one handed out before for this model."""

    @abc.abstractmethod
    async def publish_artifact(self, model: str, version: int, blob: bytes, meta: bytes, *,
                               owner: str | None = None) -> bool:
        """Store version ``version`` and make it current, atomically, then notify every
        process; with ``owner`` only while it holds the model's lease. False when refused."""

    @abc.abstractmethod
    async def load_artifact(self, model: str, version: int) -> bytes | None: ...

    @abc.abstractmethod
    async def list_artifacts(self, model: str) -> dict[int, bytes]:
        """Version -> metadata (JSON bytes) of every stored version."""

    @abc.abstractmethod
    async def delete_artifacts(self, model: str, versions: list[int]) -> None: ...

    @abc.abstractmethod
    async def current_version(self, model: str) -> int | None: ...

    @abc.abstractmethod
    async def set_current_version(self, model: str, version: int) -> bool:
        """Point the model at a stored version (rollback) and notify; False if it is gone."""

    @abc.abstractmethod
    def version_events(self):
        """Async iterator of ``(model, version)`` for every publish or rollback."""

    @abc.abstractmethod
    async def notify_job(self, model: str) -> None:
        """Tell the processes that fold ``model`` that a job was queued."""

    @abc.abstractmethod
    def job_events(self):
        """Async iterator of model names, one per :meth:`notify_job`."""

    async def request_snapshot(self, model: str) -> None:  # noqa: B027 - one process
        """Ask the process that folds ``model`` to write a snapshot now (shared backends;
        one process folds every model itself)."""

    def snapshot_requests(self):
        """Async iterator of model names, one per :meth:`request_snapshot`."""
        return _never()

    async def notify_models(self, model: str) -> None:  # noqa: B027 - one process: no-op
        """Tell every process that ``model`` was created or deleted (shared backends)."""

    def model_events(self):
        """Async iterator of model names, one per :meth:`notify_models` of any process
        (a single-process backend has none: it waits forever)."""
        return _never()

    @abc.abstractmethod
    async def save_job(self, model: str, job_id: str, record: bytes) -> None: ...

    @abc.abstractmethod
    async def load_jobs(self, model: str) -> dict[str, bytes]: ...

    @abc.abstractmethod
    async def delete_jobs(self, model: str, job_ids: list[str]) -> None: ...

    # cancelling retrain jobs: a request any process makes, the folding process reads
    async def request_cancel(self, model: str, job_id: str) -> None:
        """Ask that job ``job_id`` of ``model`` stop (``DELETE /jobs/{id}``); kept until the
        model is deleted. This default keeps requests in this process (one process)."""
        self.__dict__.setdefault("_cancel_requests", {}).setdefault(model, set()).add(job_id)

    async def cancel_requests(self, model: str) -> set[str]:
        """The ids of ``model``'s jobs whose cancellation was requested."""
        return set(self.__dict__.get("_cancel_requests", {}).get(model, ()))

    async def storage_room(self, model: str) -> int | None:
        """Bytes the backend can still store (a model's snapshot and versions); None when it
        sets no limit this service can read."""
        return None

    @abc.abstractmethod
    async def save_status(self, model: str, status: bytes) -> None:
        """The batch fold's counters, readable by every process."""

    @abc.abstractmethod
    async def load_status(self, model: str) -> bytes | None: ...

    # which computed sets /predict asks for (service.batch.requested_sets): each API
    # process writes its own counts, the folding process reads them all
    async def save_requested_sets(self, model: str, process_id: str, counts: bytes) -> None:
        """Store ``process_id``'s requested-set counts of ``model`` (replacing its last
        ones). This default keeps them in this process (one process)."""
        self.__dict__.setdefault("_requested_sets", {}).setdefault(model, {})[
            process_id] = counts

    async def load_requested_sets(self, model: str) -> dict[str, bytes]:
        """Every process's last requested-set counts of ``model``: process id -> counts."""
        return dict(self.__dict__.get("_requested_sets", {}).get(model, {}))

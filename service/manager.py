"""The model manager: the live :class:`ModelHost` of every model and its fold task.

Routes call these methods (create, delete, append, predict, feedback, snapshots); the
methods never touch a learner's weights except through the log and the fold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid

from service import fbx1, metrics
from service.answers import AnswerPool
from service.batch.serving.models import BatchModels
from service.errors import (
    BodyTooLargeError,
    ConflictError,
    InputError,
    InsufficientStorageError,
    ModelExistsError,
    ModelNotFoundError,
    UnavailableError,
)
from service.fold_loop import cancel_and_wait
from service.following import follow_model_events, follow_snapshot_requests
from service.ingest import ExampleBatch
from service.model_interface import Host
from service.online.models import OnlineModels
from service.placement import Membership
from service.priority import loop_seconds, offload
from service.schemas import ModelCreate, ModelSpec
from service.storage import ModelChangedError, Storage

log = logging.getLogger("featurebudget.manager")


class RepeatedRequest(Exception):  # noqa: N818 - a signal, not an error
    """An Idempotency-Key seen before: nothing was appended; ``ids`` are the first ones,
    ``examples`` how many examples the first request appended (None: not known, a key
    written by an earlier version)."""

    def __init__(self, ids: list[str], examples: int | None = None) -> None:
        super().__init__("repeated request")
        self.ids = ids
        self.examples = examples


class ModelManager:
    """Which models this process hosts, whatever their kind: create, delete, look up,
    follow other processes' creates and deletes (shared backends), and append examples.
    Everything else a route asks of a model is a method of its host
    (:class:`~service.model_interface.Host`), served by the model's kind: :class:`OnlineModels` or
    :class:`BatchModels`."""

    def __init__(self, storage: Storage, settings, answers: AnswerPool | None = None) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.restored = False
        self.failed: dict[str, str] = {}  # models whose snapshot could not be loaded
        self._failed_incarnations: dict[str, str] = {}
        self._refresh_task: asyncio.Task | None = None
        self._events_task: asyncio.Task | None = None
        self._requests_task: asyncio.Task | None = None
        # which models this process hosts changes under this lock (create, delete, the
        # refresh that follows other processes, an on-demand load): otherwise a refresh that
        # read the stored models just before a delete brings the deleted model back, and a
        # create racing a refresh hosts the model twice
        self._membership = asyncio.Lock()
        self.placement = Membership(storage, settings, "online", self.process_id,
                                    lambda: list(self.online.hosts)) if storage.shared else None
        self.online = OnlineModels(storage, settings, self.process_id, self.placement)
        self.batch = BatchModels(storage, settings, self.process_id, answers)
        self.kinds = {self.online.kind: self.online, self.batch.kind: self.batch}

    @property
    def hosts(self):
        """The online models' hosts (the batch ones: ``batch.hosts``)."""
        return self.online.hosts

    @property
    def folds(self):
        return self.online.folds

    def kind(self, spec: ModelCreate):
        """The service of ``spec``'s kind (online or batch)."""
        return self.kinds["batch" if spec.is_batch else "online"]

    def hosted(self, name: str) -> Host | None:
        return self.online.hosts.get(name) or self.batch.hosts.get(name)

    def all_hosts(self) -> list[Host]:
        """Every model this process serves, by name."""
        return sorted([*self.online.hosts.values(), *self.batch.hosts.values()],
                      key=lambda h: h.name)

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        for raw in (await self.storage.load_models()).values():
            await self._host(ModelSpec.model_validate_json(raw))
        await self.batch.start()
        self.restored = True
        if self.storage.shared:
            await self.placement.refresh(force=True)  # a member from the start, models or not
            self._refresh_task = asyncio.create_task(self._refresh_models())
            self._events_task = asyncio.create_task(follow_model_events(self.storage,
                                                                        self.sync))
            self._requests_task = asyncio.create_task(follow_snapshot_requests(
                self.storage, lambda name: self.online.folds.get(name)
                or self.batch.fold(name)))

    async def stop(self) -> None:
        await cancel_and_wait((self._refresh_task, self._events_task, self._requests_task))
        await self.online.stop()
        if self.placement is not None:
            with contextlib.suppress(Exception):
                await self.placement.leave()
        await self.batch.stop()

    def known(self, name: str) -> bool:
        return self.hosted(name) is not None or name in self.failed

    def incarnation(self, name: str) -> str | None:
        """The incarnation this process serves under ``name`` (None: none)."""
        host = self.hosted(name)
        if host is not None:
            return host.incarnation
        return self._failed_incarnations.get(name)

    async def _host(self, spec: ModelSpec) -> Host | None:
        """Restore a model (snapshot, then its fold replays the log after it); None when
        its snapshot cannot be loaded: the model is kept out of service (its log and
        snapshot stay as they are) and ``failed`` says why."""
        metrics.init_model(spec)  # its counters at 0 from now on (not "no data")
        try:
            return await self.kind(spec).host(spec)
        except InputError as exc:  # e.g. written by an incompatible version
            log.error("model %s: cannot load its snapshot: %s", spec.name, exc.detail)
            self.failed[spec.name] = exc.detail
            self._failed_incarnations[spec.name] = spec.incarnation
            return None

    async def _refresh_models(self) -> None:
        """Shared backend: follow models created / deleted by other processes."""
        while True:
            await asyncio.sleep(2.0)
            with contextlib.suppress(Exception):
                await self.placement.refresh()
            with contextlib.suppress(Exception):
                await self.sync()

    async def sync(self) -> None:
        """Host what the store holds, by identity: a model deleted and created again under
        the same name (another incarnation) replaces the one held here."""
        async with self._membership:
            stored = {name: ModelSpec.model_validate_json(raw)
                      for name, raw in (await self.storage.load_models()).items()}
            for name, spec in stored.items():
                held = self.incarnation(name)
                if held is not None and held != spec.incarnation:
                    log.info("model %s was deleted and created again elsewhere: serving "
                             "the new one", name)
                    await self._drop(name)
                    held = None
                if held is None:
                    await self._host(spec)
            for name in [n for n in [*self.online.hosts, *self.batch.hosts, *self.failed]
                         if n not in stored]:
                await self._drop(name)

    async def _drop(self, name: str) -> None:
        self.failed.pop(name, None)
        self._failed_incarnations.pop(name, None)
        await self.batch.drop(name)
        await self.online.drop(name)
        metrics.forget_model(name)

    async def forget_stale(self, host: Host) -> None:
        """The store no longer holds ``host``'s incarnation: follow the store now (drop it,
        and host the model created again under its name, if any)."""
        if self.hosted(host.name) is host:
            with contextlib.suppress(Exception):
                await self.sync()

    # -------------------------------------------------------------- models
    def model_bytes(self, spec: ModelCreate) -> int:
        """The state one model holds in this process (learner, or fold + fit + artifact)."""
        return self.kind(spec).model_bytes(spec)

    def _check_total(self, request: ModelCreate) -> None:
        """507 when the new model would take all models past the process budget."""
        budget = self.settings.total_model_budget()
        held = sum(self.model_bytes(h.spec) for h in self.all_hosts())
        needed = self.model_bytes(request)
        if held + needed > budget:
            raise InsufficientStorageError(
                f"model {request.name!r} needs {needed:,} bytes; the models of this process "
                f"hold {held:,} of a budget of {budget:,} bytes "
                "(FEATUREBUDGET_MAX_TOTAL_MODEL_BYTES); delete a model or raise the budget",
                [{"field": "name", "message": "over the process's model memory budget"}])

    async def create(self, request: ModelCreate) -> Host:
        await self.kind(request).validate(request, self._check_total)
        spec = ModelSpec(**request.model_dump(), created_at=time.time(),
                         incarnation=uuid.uuid4().hex)
        async with self._membership:
            if not await self.storage.save_model(spec.name, spec.model_dump_json().encode(),
                                                 create=True):
                raise ModelExistsError(f"model {spec.name!r} already exists")
            if self.known(spec.name):  # an earlier incarnation, deleted by another process
                await self._drop(spec.name)
            host = await self._host(spec)
        await self._announce(spec.name)
        if host is None:
            raise UnavailableError(f"model {spec.name!r} is out of service: "
                                   f"{self.failed[spec.name]}")
        return host

    async def get(self, name: str) -> Host:
        host = self.hosted(name)
        if host is None and self.storage.shared:  # created by another process just now
            async with self._membership:
                raw = (await self.storage.load_models()).get(name)
                if raw is not None and not self.known(name):
                    await self._host(ModelSpec.model_validate_json(raw))
                host = self.hosted(name)
        if host is None:
            if name in self.failed:
                raise UnavailableError(f"model {name!r} is out of service: {self.failed[name]}")
            raise ModelNotFoundError(f"no model named {name!r}")
        return host

    async def delete(self, name: str) -> None:
        if name in self.failed:  # out of service: deletable anyway
            async with self._membership:
                await self._drop(name)
                await self.storage.delete_model(name)
            return
        await self.get(name)
        async with self._membership:
            await self._drop(name)
            if not await self.storage.delete_model(name):
                raise ModelNotFoundError(f"no model named {name!r}")
        await self._announce(name)

    async def _announce(self, name: str) -> None:
        """Tell the other processes that ``name`` was created or deleted (they follow at
        once instead of at their next periodic check)."""
        with contextlib.suppress(Exception):  # (the periodic check covers a lost message)
            await self.storage.notify_models(name)

    def serving_errors(self) -> dict[str, str]:
        """Models whose current version this process cannot serve (it serves the version it
        had, or none), and why."""
        return {name: host.load_error for name, host in self.batch.hosts.items()
                if host.load_error}

    async def unfolded_models(self) -> list[str]:
        """Models no process folds now: the folding process stopped renewing its lease
        (e.g. killed; another takes over when the lease expires), or none ever took it
        (a batch model on a shared backend with no ``featurebudget worker`` running).
        One line each; a model younger than one lease period is given that time first."""
        if not self.storage.shared:
            return []
        hosts = self.all_hosts()
        lease = self.settings.lease_seconds
        limit = lease * 2 / 3  # renewals come every lease / 3
        beats = await self.storage.heartbeats([h.name for h in hosts])
        now, lines = time.time(), []
        for host in hosts:
            if host.name in beats:
                age, owner = beats[host.name]
                if age > limit:
                    lines.append(f"model {host.name}: not folded for {age:.1f} s (process "
                                 f"{owner} stopped renewing its lease; another takes over "
                                 f"within {max(0.0, lease - age):.1f} s)")
            elif now - host.spec.created_at > lease:
                who = "a `featurebudget worker` (no process runs the batch worker)" \
                    if host.kind == "batch" else "an API process"
                lines.append(f"model {host.name}: no process folds it; it needs {who}")
        return lines

    # -------------------------------------------------------------- log
    async def append(self, host: Host, batches: list[ExampleBatch], fmt: str,
                     *, idempotency_key: str | None = None) -> list[str]:
        """Append validated batches (one log entry each) in the binary format. With an
        ``idempotency_key`` used before (within the retention) nothing is appended and the
        first append's ids are answered (RepeatedRequest says so)."""
        entries = []
        for batch in batches:  # names travel in the entry: a fold over the log, like weights
            data = await offload(batch.encode, cost=0.0 if batch.raw is not None else
                                 loop_seconds("encode_nnz", batch.X.nnz))
            entry = {b"fmt": b"bin", b"data": data}
            if batch.names:
                entry[b"names"] = fbx1.encode_names(batch.names)
            size = len(data) + len(entry.get(b"names", b""))
            if size > fbx1.MAX_ENTRY_BYTES:  # Redis would refuse it; the embedded log
                raise BodyTooLargeError(  # would take it and cut it off on its next open
                    f"the examples take {size:,} bytes in the log; one request's entry is at "
                    f"most {fbx1.MAX_ENTRY_BYTES:,} bytes: send fewer examples per request")
            entries.append(entry)
        examples = sum(len(b) for b in batches)
        incarnation = host.incarnation or None  # (None: a model stored before incarnations)
        try:
            if idempotency_key is None:
                ids = await self.storage.append(host.name, entries, incarnation=incarnation)
                repeat = False
            else:
                appended = await self.storage.append_once(
                    host.name, entries, idempotency_key,
                    self.settings.idempotency_retention_seconds, examples=examples,
                    incarnation=incarnation)
                (ids, repeat), first = appended, appended.examples
        except ModelChangedError as exc:  # deleted (and maybe created again) meanwhile
            await self.forget_stale(host)
            raise ConflictError(
                f"model {host.name!r} was deleted or created again while this request was "
                "handled: nothing was appended; check the model and retry") from exc
        except KeyError as exc:
            raise ModelNotFoundError(f"no model named {host.name!r}") from exc
        if repeat:
            metrics.EXAMPLES_REPEATED.labels(host.name).inc(examples)
            raise RepeatedRequest(ids, first)
        metrics.EXAMPLES_INGESTED.labels(host.name, fmt).inc(examples)
        return ids

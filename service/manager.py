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
import struct
import time
import uuid

import numpy as np

from algorithms.online import LEARNERS
from service import metrics, wire
from service.batch.host import BatchHost
from service.batch.models import BatchModels, validate_batch_spec
from service.errors import (
    BodyTooLargeError,
    InputError,
    InsufficientStorageError,
    ModelExistsError,
    ModelNotFoundError,
    NotOwnerError,
    UnavailableError,
    WaitTimeoutError,
)
from service.fold import ModelFold
from service.host import ModelHost, new_learner
from service.ingest import ExampleBatch
from service.placement import Membership
from service.priority import in_background
from service.schemas import ModelCreate, ModelSpec
from service.storage import Storage, id_key
from service.view import ViewFormatError
from service.view import decode as decode_view

log = logging.getLogger("featurebudget.manager")
_SCORE = struct.Struct("<d")
_INLINE_VIEW_BYTES = 256 << 10  # decode bigger serving views off the event loop
_INLINE_ENCODE_NNZ = 8192  # encode bigger batches for the log off the event loop


def token_position(token: str | None) -> tuple[int, int]:
    """The log position a serving view token ("<log id> <nonce>") stands for."""
    return id_key(token.partition(" ")[0]) if token else (-1, -1)


async def wait_visible(storage: Storage, host: ModelHost, log_id: str, timeout: float) -> bool:
    """Shared backend: until the serving view every process answers from includes
    ``log_id`` (the owner knows what it published; others read the view's token)."""
    deadline = time.monotonic() + timeout
    target = id_key(log_id)
    while True:
        if host.owner and host.view_published >= target:
            return True
        if (not host.owner or id_key(host.applied_id) >= target) and \
                token_position(await storage.view_token(host.name)) >= target:
            return True  # (also: published by the process that folded it before this one)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if host.owner:
            await host.wait_applied_event(min(remaining, 0.05))
        else:
            await asyncio.sleep(min(remaining, 0.005))


async def wait_position(storage: Storage, model: str, log_id: str, timeout: float,
                        local=None) -> bool:
    """Until ``log_id`` is applied: through this process's fold (``local(log_id, timeout)``)
    when it folds the model, else by the position the folding process publishes."""
    if local is not None:
        return await local(log_id, timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if id_key(await storage.applied_position(model)) >= id_key(log_id):
            return True
        await asyncio.sleep(0.02)
    return False


class RepeatedRequest(Exception):  # noqa: N818 - a signal, not an error
    """An Idempotency-Key seen before: nothing was appended; ``ids`` are the first ones,
    ``examples`` how many examples the first request appended (None: not known, a key
    written by an earlier version)."""

    def __init__(self, ids: list[str], examples: int | None = None) -> None:
        super().__init__("repeated request")
        self.ids = ids
        self.examples = examples


class ModelManager:
    def __init__(self, storage: Storage, settings) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.hosts: dict[str, ModelHost] = {}
        self.folds: dict[str, ModelFold] = {}
        self.restored = False
        self.failed: dict[str, str] = {}  # models whose snapshot could not be loaded
        self._refresh_task: asyncio.Task | None = None
        # which models this process hosts changes under this lock (create, delete, the
        # refresh that follows other processes, an on-demand load): otherwise a refresh that
        # read the stored models just before a delete brings the deleted model back, and a
        # create racing a refresh hosts the model twice
        self._membership = asyncio.Lock()
        self.placement = Membership(storage, settings, "online", self.process_id,
                                    lambda: list(self.hosts)) if storage.shared else None
        self.batch = BatchModels(storage, settings, self.process_id)

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        for raw in (await self.storage.load_models()).values():
            await self._host(ModelSpec.model_validate_json(raw))
        await self.batch.start()
        self.restored = True
        if self.storage.shared:
            await self.placement.refresh(force=True)  # a member from the start, models or not
            self._refresh_task = asyncio.create_task(self._refresh_models())

    async def stop(self) -> None:
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresh_task
        await asyncio.gather(*(fold.stop() for fold in self.folds.values()),
                             return_exceptions=True)
        self.folds.clear()
        if self.placement is not None:
            with contextlib.suppress(Exception):
                await self.placement.leave()
        await self.batch.stop()

    def known(self, name: str) -> bool:
        return name in self.hosts or name in self.batch.hosts or name in self.failed

    async def _host(self, spec: ModelSpec) -> ModelHost | BatchHost:
        """Restore a model (snapshot, then its fold replays the log after it)."""
        metrics.init_model(spec)  # its counters at 0 from now on (not "no data")
        if spec.is_batch:
            return await self.batch.host(spec)
        host = ModelHost(spec, feature_names_max=self.settings.feature_names_max,
                         chunk_examples=self.settings.apply_chunk_examples)
        blob = await self.storage.load_snapshot(spec.name)
        if blob is not None:
            try:
                host.load_blob(blob, check_spec=False)
            except InputError as exc:  # e.g. written by an incompatible version: keep the
                # model out of service (the log and snapshot stay as they are) and say why
                log.error("model %s: cannot load its snapshot: %s", spec.name, exc.detail)
                self.failed[spec.name] = exc.detail
                return host
        self.hosts[spec.name] = host
        fold = ModelFold(host, self.storage, self.settings, self.process_id, self.placement)
        self.folds[spec.name] = fold
        fold.publish_gauges()
        fold.start()
        return host

    async def _refresh_models(self) -> None:
        """Shared backend: follow models created / deleted by other processes."""
        while True:
            await asyncio.sleep(2.0)
            with contextlib.suppress(Exception):
                await self.placement.refresh()
            with contextlib.suppress(Exception):
                async with self._membership:
                    stored = await self.storage.load_models()
                    for name, raw in stored.items():
                        if not self.known(name):
                            await self._host(ModelSpec.model_validate_json(raw))
                    for name in [n for n in [*self.hosts, *self.batch.hosts]
                                 if n not in stored]:
                        await self._drop(name)

    async def _drop(self, name: str) -> None:
        await self.batch.drop(name)
        fold = self.folds.pop(name, None)
        self.hosts.pop(name, None)
        if fold is not None:
            await fold.stop(final_snapshot=False)
        metrics.forget_model(name)

    # -------------------------------------------------------------- models
    def model_bytes(self, spec: ModelCreate) -> int:
        """The state one model holds in this process (learner, or fold + fit + artifact)."""
        if spec.is_batch:
            from service.batch.spec import memory_bytes, split_params

            return memory_bytes(spec, split_params(spec))
        cls = LEARNERS[spec.algorithm]
        return cls.memory_bytes(n_features=spec.dimension, budget=spec.budget)

    def _check_total(self, request: ModelCreate) -> None:
        """507 when the new model would take all models past the process budget."""
        budget = self.settings.total_model_budget()
        held = sum(self.model_bytes(h.spec) for h in [*self.hosts.values(),
                                                       *self.batch.hosts.values()])
        needed = self.model_bytes(request)
        if held + needed > budget:
            raise InsufficientStorageError(
                f"model {request.name!r} needs {needed:,} bytes; the models of this process "
                f"hold {held:,} of a budget of {budget:,} bytes "
                "(FEATUREBUDGET_MAX_TOTAL_MODEL_BYTES); delete a model or raise the budget",
                [{"field": "name", "message": "over the process's model memory budget"}])

    async def create(self, request: ModelCreate) -> ModelHost | BatchHost:
        if request.is_batch:
            validate_batch_spec(request, self.settings,
                                await self.storage.storage_room(request.name))
            self._check_total(request)
        else:  # sizes before the trial construction allocates anything
            if self.model_bytes(request) <= self.settings.max_model_bytes:
                self._check_total(request)  # (larger: new_learner's 422 names the limit)
            new_learner(request, self.settings.max_model_bytes)  # validates it all, sizes too
        spec = ModelSpec(**request.model_dump(), created_at=time.time())
        async with self._membership:
            if not await self.storage.save_model(spec.name, spec.model_dump_json().encode(),
                                                 create=True):
                raise ModelExistsError(f"model {spec.name!r} already exists")
            return await self._host(spec)

    async def get(self, name: str) -> ModelHost | BatchHost:
        host = self.hosts.get(name) or self.batch.hosts.get(name)
        if host is None and self.storage.shared:  # created by another process just now
            async with self._membership:
                raw = (await self.storage.load_models()).get(name)
                if raw is not None and not self.known(name):
                    host = await self._host(ModelSpec.model_validate_json(raw))
                host = self.hosts.get(name) or self.batch.hosts.get(name)
        if host is None:
            if name in self.failed:
                raise UnavailableError(f"model {name!r} is out of service: {self.failed[name]}")
            raise ModelNotFoundError(f"no model named {name!r}")
        return host

    async def delete(self, name: str) -> None:
        if self.failed.pop(name, None) is not None:  # out of service: deletable anyway
            await self.storage.delete_model(name)
            return
        await self.get(name)
        async with self._membership:
            await self.batch.drop(name)
            fold = self.folds.pop(name, None)
            if fold is not None:
                await fold.stop(final_snapshot=False)
            self.hosts.pop(name, None)
            if not await self.storage.delete_model(name):
                raise ModelNotFoundError(f"no model named {name!r}")
        metrics.forget_model(name)

    async def describe(self, host: ModelHost | BatchHost, *, features: bool = True) -> dict:
        log_end = await self.storage.log_end(host.name)
        if isinstance(host, BatchHost):
            return await self.batch.describe(host, log_end)
        await self.refresh_view(host)
        return host.describe(features=features, limit=self.settings.selected_features_max,
                             log_end=log_end)

    async def unfolded_models(self) -> list[str]:
        """Models whose folding process stopped renewing its lease (e.g. killed): nothing is
        folded until the lease expires and another process takes over. One line each."""
        if not self.storage.shared:
            return []
        names = [*self.hosts, *self.batch.hosts]
        limit = self.settings.lease_seconds * 2 / 3  # renewals come every lease / 3
        return [f"model {name}: not folded for {age:.1f} s (process {owner} stopped "
                f"renewing its lease; another takes over within "
                f"{max(0.0, self.settings.lease_seconds - age):.1f} s)"
                for name, (age, owner) in sorted((await self.storage.heartbeats(names)).items())
                if age > limit]

    # -------------------------------------------------------------- log
    async def append(self, host: ModelHost | BatchHost, batches: list[ExampleBatch], fmt: str,
                     *, idempotency_key: str | None = None) -> list[str]:
        """Append validated batches (one log entry each) in the binary format. With an
        ``idempotency_key`` used before (within the retention) nothing is appended and the
        first append's ids are answered (``host.last_repeat`` says so)."""
        entries = []
        for batch in batches:  # names travel in the entry: a fold over the log, like weights
            big = batch.raw is None and batch.X.nnz > _INLINE_ENCODE_NNZ
            data = await in_background(batch.encode) if big else batch.encode()
            entry = {b"fmt": b"bin", b"data": data}
            if batch.names:
                entry[b"names"] = wire.encode_names(batch.names)
            size = len(data) + len(entry.get(b"names", b""))
            if size > wire.MAX_ENTRY_BYTES:  # Redis would refuse it; the embedded log
                raise BodyTooLargeError(  # would take it and cut it off on its next open
                    f"the examples take {size:,} bytes in the log; one request's entry is at "
                    f"most {wire.MAX_ENTRY_BYTES:,} bytes: send fewer examples per request")
            entries.append(entry)
        examples = sum(len(b) for b in batches)
        try:
            if idempotency_key is None:
                ids, repeat = await self.storage.append(host.name, entries), False
            else:
                appended = await self.storage.append_once(
                    host.name, entries, idempotency_key,
                    self.settings.idempotency_retention_seconds, examples=examples)
                (ids, repeat), first = appended, appended.examples
        except KeyError as exc:
            raise ModelNotFoundError(f"no model named {host.name!r}") from exc
        if repeat:
            metrics.EXAMPLES_REPEATED.labels(host.name).inc(examples)
            raise RepeatedRequest(ids, first)
        metrics.EXAMPLES_INGESTED.labels(host.name, fmt).inc(examples)
        return ids

    async def wait_applied(self, host: ModelHost | BatchHost, log_id: str) -> None:
        """Until ``log_id`` is applied and, for an online model on a shared backend, in the
        serving view every process answers from (read-your-writes)."""
        timeout = self.settings.wait_timeout_seconds
        if isinstance(host, BatchHost):
            fold = self.batch.fold(host.name)
            local = fold.wait_applied if fold is not None and fold.owner else None
            ok = await wait_position(self.storage, host.name, log_id, timeout, local)
        elif self.storage.shared:
            ok = await wait_visible(self.storage, host, log_id, timeout)
        else:
            ok = await host.wait_applied(log_id, timeout)
        if not ok:
            raise WaitTimeoutError(f"entries up to {log_id} were not applied within {timeout} "
                                   "s; they are in the log and will be")

    # -------------------------------------------------------------- predictions
    async def refresh_view(self, host: ModelHost) -> None:
        """A process that does not fold the model: fetch the serving view when its token
        changed (one round trip), so that this answer includes everything a ``?wait=true``
        acknowledged before the request arrived. Concurrent requests share one fetch that
        started after they arrived. On a storage error the process answers from what it
        holds (and logs it)."""
        if not self.storage.shared or host.owner:
            return
        arrived = time.monotonic()
        while host.view_flight is not None:
            started, flight = host.view_flight
            await asyncio.shield(flight)
            if started >= arrived:
                return
        flight = asyncio.get_running_loop().create_future()
        host.view_flight = (time.monotonic(), flight)
        try:
            token, blob = await self.storage.fetch_view(host.name, host.view_token)
            if blob is not None:
                view = decode_view(blob, host.n_features) if len(blob) < _INLINE_VIEW_BYTES \
                    else await asyncio.to_thread(decode_view, blob, host.n_features)
                host.view, host.view_token = view, token
                metrics.READ_STALENESS.labels(host.name).observe(
                    max(0.0, time.time() - view.applied_at))
        except ViewFormatError as exc:
            log.error("model %s: published serving view refused: %s", host.name, exc)
        except Exception as exc:  # storage down: answer from what this process holds
            log.warning("model %s: serving view not refreshed: %s", host.name, exc)
        finally:
            host.view_flight = None
            flight.set_result(None)

    async def predict(self, host: ModelHost, batch: ExampleBatch,
                      with_ids: bool) -> tuple[np.ndarray, list[str] | None]:
        await self.refresh_view(host)
        learner = host.serving() or host.learner  # lock-free read (see docs/architecture.md)
        started = time.perf_counter()
        if len(batch) > 256:
            scores = await asyncio.to_thread(learner.decision_function, batch.X)
        else:
            scores = learner.decision_function(batch.X)
        metrics.PREDICT_SECONDS.labels(host.name).observe(time.perf_counter() - started)
        metrics.PREDICTIONS.labels(host.name).inc(len(batch))
        ids = None
        if with_ids:
            ids = []
            ttl = self.settings.prediction_ttl_seconds
            for row in range(len(batch)):
                prediction_id = uuid.uuid4().hex
                X = batch.X.row_slice(row, row + 1)
                blob = _SCORE.pack(float(scores[row])) + wire.encode_batch(
                    X.indptr, X.indices, X.values, np.ones(1, dtype=np.int8))
                await self.storage.put_pending(host.name, prediction_id, blob, ttl)
                ids.append(prediction_id)
        return scores, ids

    async def feedback(self, host: ModelHost, prediction_id: str, label: int) -> dict | None:
        """Learn from a labelled earlier prediction (appended to the log like any example)."""
        blob = await self.storage.pop_pending(host.name, prediction_id)
        if blob is None:
            metrics.FEEDBACK.labels(host.name, "unknown").inc()
            return None
        (score,) = _SCORE.unpack_from(blob, 0)
        indptr, indices, values, _ = wire.decode_batch(blob[_SCORE.size:])
        data = wire.encode_batch(indptr, indices, values, np.array([label], dtype=np.int8))
        (log_id,) = await self.storage.append(host.name, [{b"fmt": b"bin", b"data": data}])
        predicted = 1 if score >= 0 else -1
        metrics.FEEDBACK.labels(host.name, "correct" if predicted == label else "wrong").inc()
        metrics.EXAMPLES_INGESTED.labels(host.name, "feedback").inc()
        return {"score": score, "predicted_label": predicted, "label": label,
                "correct": predicted == label, "log_id": log_id}

    # -------------------------------------------------------------- snapshots
    async def export_snapshot(self, host: ModelHost) -> bytes:
        if self.storage.shared and not host.owner:
            blob = await self.storage.load_snapshot(host.name)
            if blob is not None:
                return blob
        blob, _ = await asyncio.to_thread(host.snapshot_blob)
        return blob

    async def restore_snapshot(self, host: ModelHost, blob: bytes) -> None:
        """Replace the model with ``blob``, as of the log's current end: entries appended
        before this call and not yet applied are superseded, later ones are applied."""
        # parse and check everything off the event loop, before anything changes
        parsed = await asyncio.to_thread(host.check_blob, blob)
        fold = self.folds.get(host.name)
        if self.storage.shared and not host.owner and fold is not None:
            await fold.hold_lease()
        if self.storage.shared and not host.owner:
            raise NotOwnerError("this process does not own the model's fold; retry")
        async with host.fold_lock:
            log_end = await self.storage.log_end(host.name)
            host.install(parsed)
            if fold is not None:
                fold.publish_gauges()
            with host.lock:  # the snapshot's own id belongs to another log
                host.applied_id = log_end
            host.reposition = True
            if fold is not None and not await fold.snapshot():
                raise NotOwnerError("this process lost the model's fold while restoring; "
                                    "retry")
            if fold is not None:
                await fold.publish_view(now=True)
        host.notify_applied()

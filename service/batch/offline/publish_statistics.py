"""Publish statistics computed outside the log as an anytime model's fold state.

The batch fold's state is its snapshot: statistics + the id of the last log entry they
include (``service.batch.worker.fold_worker``). Publishing writes such a snapshot, so the
batch worker that takes the model up next loads it and folds the log on **after** the
position written:

* ``after_log_id="end"``: the log's end at the moment of publishing (read while this
  process holds the fold, so no entry is folded meanwhile); the files replace everything
  the log held so far.
* ``after_log_id=ID``: the entries after ``ID`` are folded on top of the files. ``ID`` must
  lie between the position of the current snapshot (the log may be trimmed below it) and
  the log's end; ``None``: the log's start, for a model whose fold has written no position.
* ``merge=True``: the files' statistics are added to the fold's own state (its snapshot),
  whose position stays (``after_log_id`` is not used).

The write is one snapshot of the two statistics, O(D²) bytes.

Safety: the write takes the fold the way a batch worker does. On Redis this process takes
the model's lease (refused while a worker holds it: stop the model's batch workers first)
and writes through the fenced snapshot script, which also refuses a snapshot of an earlier
position than the stored one; the lease is released at the end, and a worker takes the
model over from the published snapshot. On the embedded backend the data directory's lock
is the fold's: publishing needs the service stopped. Everything is checked before the one
atomic write: an error publishes nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from service.batch.families import FAMILIES, STATISTICS
from service.batch.spec import BatchLayout, BatchParams, split_params
from service.batch.worker.fold_state import BatchFoldState
from service.schemas import ModelSpec
from service.snapshot_file import make_snapshot
from service.storage import Storage, id_key

END = "end"
class PublishError(RuntimeError):
    """Publishing was refused; nothing was written."""


@dataclass
class Target:
    """An anytime batch model that statistics can be published into."""

    spec: ModelSpec
    layout: BatchLayout
    params: BatchParams

    @property
    def n_features(self) -> int:
        return self.layout.n_features


async def model_target(storage: Storage, model: str) -> Target:
    """The model ``model``; PublishError unless it exists and keeps sufficient statistics."""
    raw = (await storage.load_models()).get(model)
    if raw is None:
        raise PublishError(f"there is no model {model!r}")
    spec = ModelSpec.model_validate_json(raw)
    keeping = [adapter for adapter in FAMILIES.values() if adapter.fold_kind == STATISTICS]
    if spec.family not in {adapter.name for adapter in keeping}:
        kinds = " or ".join(adapter.name for adapter in keeping)
        algorithms = ", ".join(a for adapter in keeping for a in adapter.algorithms)
        raise PublishError(
            f"model {model!r} is a {spec.family} model ({spec.algorithm}); only {kinds} "
            f"models ({algorithms}) keep sufficient statistics")
    return Target(spec, BatchLayout(spec), split_params(spec))


async def publish_statistics(storage: Storage, model: str, statistics, *,
                             after_log_id: str | None = END, merge: bool = False,
                             retrain: bool = False, lease_seconds: float = 30.0
                             ) -> dict[str, Any]:
    """Write ``statistics`` (a
    :class:`~service.batch.offline.distributed_statistics.FileStatistics`) as model
    ``model``'s fold state (see the module docstring for ``after_log_id`` and ``merge``);
    with ``retrain``, queue a retrain job on it. Returns what was published."""
    target = await model_target(storage, model)
    if statistics.train.n_features != target.n_features:
        raise PublishError(f"the statistics have {statistics.train.n_features} features, "
                           f"model {model!r} has {target.n_features}")
    owner = f"fit-statistics:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if storage.shared and not await storage.acquire_lease(model, owner, lease_seconds):
        raise PublishError(_held(model, await storage.lease_holder(model)))
    try:
        return await _publish(storage, target, statistics, after_log_id, merge, retrain,
                              owner if storage.shared else None)
    finally:
        if storage.shared:
            await storage.release_lease(model, owner)


async def _publish(storage: Storage, target: Target, statistics, after_log_id, merge: bool,
                   retrain: bool, owner: str | None) -> dict[str, Any]:
    from algorithms.serialization import dumps_state
    from service.batch.worker.fold_worker import load_fold_blob, new_job

    model, spec = target.spec.name, target.spec
    current = BatchFoldState(spec.family, target.layout, target.params)
    blob = await storage.load_snapshot(model)
    if blob is not None:
        try:
            load_fold_blob(current, blob)
        except ValueError as exc:
            raise PublishError(f"the stored snapshot of model {model!r} cannot be read "
                               f"({exc}); nothing was published") from exc
    log_end = await storage.log_end(model)
    state = BatchFoldState(spec.family, target.layout, target.params)
    if merge:
        state = current
        state.train = current.train.merge(statistics.train)
        state.validation = current.validation.merge(statistics.validation)
        state.examples = current.examples + int(statistics.train.n + statistics.validation.n)
    else:
        position = _position(storage, after_log_id, current.applied_id, log_end)
        state.train, state.validation = statistics.train.copy(), statistics.validation.copy()
        state.examples = int(statistics.train.n + statistics.validation.n)
        state.applied_id = position
    raw = state.state_dict()
    try:  # the checks the worker makes when it loads a snapshot
        BatchFoldState(spec.family, target.layout, target.params).load_state(dict(raw))
    except ValueError as exc:
        raise PublishError(f"the statistics cannot be published: {exc}") from exc
    blob = await asyncio.to_thread(dumps_state, make_snapshot(raw, {
        "model": spec.model_dump(mode="json")}))
    if not await storage.save_snapshot(model, blob, state.applied_id, owner=owner):
        raise PublishError(f"the snapshot write of model {model!r} was refused (the lease "
                           "was lost, or a newer snapshot was written meanwhile); nothing "
                           "was published")
    job = None
    if retrain:
        job = new_job("fit-statistics", state.applied_id)
        await storage.save_job(model, job["id"], json.dumps(job).encode())
        await storage.notify_job(model)
    status = {"applied_id": state.applied_id, "examples": state.examples,
              "train_examples": state.train_examples,
              "validation_examples": state.validation_examples, "owner": None,
              "updated_at": time.time()}
    await storage.save_status(model, json.dumps(status).encode())
    return {"model": model, "mode": "merge" if merge else "replace",
            "log_position": state.applied_id, "previous_log_position": current.applied_id,
            "log_end": log_end, "examples": state.examples,
            "train_examples": state.train_examples,
            "validation_examples": state.validation_examples,
            "job": None if job is None else job["id"]}


def _position(storage: Storage, after_log_id, snapshot_id: str | None,
              log_end: str | None) -> str | None:
    """The position to write: checked against the snapshot's and the log's end."""
    if after_log_id == END:
        position = log_end
    elif after_log_id is None:
        position = None
    else:
        position = str(after_log_id)
        if not storage.is_log_id(position):
            raise PublishError(f"{position!r} is not a log id of the {storage.kind} backend "
                               f"({storage.log_id_form})")
        if id_key(position) > id_key(log_end):
            raise PublishError(f"log id {position} is after the log's end ({log_end}): "
                               "entries appended later would be skipped")
    if id_key(position) < id_key(snapshot_id):
        raise PublishError(
            f"the fold's snapshot already includes the log up to {snapshot_id}, and the log "
            f"may be trimmed below it; publish after a position >= {snapshot_id} (or "
            "'end'), or merge into the fold's state")
    return position


def publish(settings, model: str, statistics, **options) -> dict[str, Any]:
    """:func:`publish_statistics` through the storage ``settings`` name (Redis, or the
    embedded data directory, which must not be in use)."""
    return asyncio.run(_with_storage(settings, publish_statistics, model, statistics,
                                     **options))


def target_of(settings, model: str, *, free: bool = False) -> Target:
    """:func:`model_target` through the storage ``settings`` name; with ``free``, also
    PublishError while a batch worker holds the model's lease (checked again when
    publishing: this early check spares computing statistics that cannot be published)."""
    async def check(storage: Storage, name: str) -> Target:
        target = await model_target(storage, name)
        holder = await storage.lease_holder(name) if free and storage.shared else None
        if holder is not None:
            raise PublishError(_held(name, holder))
        return target

    return asyncio.run(_with_storage(settings, check, model))


def _held(model: str, holder: str | None) -> str:
    return (f"model {model!r} is being folded by process {holder}; stop the batch workers "
            "that fold it (`featurebudget worker`, or API processes with "
            "FEATUREBUDGET_BATCH_WORKER=true), then publish")


async def _with_storage(settings, function, *args, **kwargs):
    from service.storage import make_storage

    storage = make_storage(settings)
    if not storage.holds_service_data():
        raise PublishError(f"{settings.data_dir} is not a data directory of the service "
                           "(no models/ folder); give --data-dir or --redis-url")
    try:
        await storage.open()
    except RuntimeError as exc:
        if "in use" in str(exc):
            raise PublishError(f"{exc}. The running service folds its models from there: "
                               "stop it, publish, start it again") from exc
        raise
    try:
        return await function(storage, *args, **kwargs)
    finally:
        await storage.close()

"""The online models of an API process: a :class:`~service.online.host.ModelHost` and a
:class:`~service.online.fold.ModelFold` per model, and what the routes ask of them (predictions,
feedback, descriptions, snapshots, waiting for the fold).

The routes call these through the host (:mod:`service.model_interface`); the methods never touch a
learner's weights except through the log and the fold.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import time
import uuid
from typing import Any

import numpy as np

from algorithms.online import LEARNERS
from algorithms.online.base import signed_labels
from service import fbx1, metrics
from service.errors import (
    ConflictError,
    NotOwnerError,
    item_error,
)
from service.fold_loop import LeaseLost
from service.following import current_snapshot
from service.ingest import ExampleBatch, parse_json_examples
from service.online.fold import ModelFold
from service.online.host import ModelHost, check_learner
from service.online.view import ViewFormatError
from service.online.view import decode as decode_view
from service.priority import in_background
from service.schemas import ModelCreate, ModelSpec
from service.storage import ModelChangedError, Storage

log = logging.getLogger("featurebudget.manager")
_SCORE = struct.Struct("<d")
_INLINE_VIEW_BYTES = 256 << 10  # decode bigger serving views off the event loop
_INLINE_STATE_BYTES = 1 << 20  # allocate bigger learners off the event loop
_PREDICT_FIELDS = {"examples", "return_prediction_ids"}


def untrained(name: str) -> str:
    """The warning of a prediction by a model that has learned from no example."""
    return (f"model {name!r} has learned from no examples yet: every score is 0 and every "
            f"label +1 until labelled examples are applied (POST /v1/models/{name}/examples; "
            "?wait=true answers once they are)")


class OnlineModels:
    """Every online model of this process, and the routes' calls on one of them."""

    kind = "online"

    def __init__(self, storage: Storage, settings, process_id: str, placement=None) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.placement = placement  # shared backends: which process folds which model
        self.hosts: dict[str, ModelHost] = {}
        self.folds: dict[str, ModelFold] = {}

    # -------------------------------------------------------------- lifecycle
    def model_bytes(self, spec: ModelCreate) -> int:
        """The learner's state in bytes (O(1): from the declared sizes)."""
        return LEARNERS[spec.algorithm].memory_bytes(n_features=spec.dimension,
                                                     budget=spec.budget)

    async def validate(self, request: ModelCreate, check_total) -> None:
        """Sizes first, then every argument the learner's constructor checks, from the
        parameters alone (:func:`~service.online.host.check_learner`: O(1), nothing allocated);
        InputError naming the field."""
        if self.model_bytes(request) <= self.settings.max_model_bytes:
            check_total(request)  # (larger: check_learner's 422 names the limit)
        check_learner(request, self.settings.max_model_bytes)

    async def host(self, spec: ModelSpec) -> ModelHost:
        """Restore a model (its snapshot, then its fold replays the log after it);
        InputError when the snapshot cannot be loaded (the model stays out of service).
        A learner of more than ``_INLINE_STATE_BYTES`` is allocated off the event loop."""
        build = functools.partial(ModelHost, spec, models=self,
                                  feature_names_max=self.settings.feature_names_max,
                                  chunk_examples=self.settings.apply_chunk_examples)
        small = spec.algorithm not in LEARNERS or \
            self.model_bytes(spec) <= _INLINE_STATE_BYTES  # (unknown: ModelHost says so)
        host = build() if small else await in_background(build)
        blob = await self.storage.load_snapshot(spec.name)
        if blob is not None:
            host.load_blob(blob, check_spec=False)
        self.hosts[spec.name] = host
        fold = ModelFold(host, self.storage, self.settings, self.process_id, self.placement)
        self.folds[spec.name] = fold
        fold.publish_gauges()
        fold.start()
        return host

    async def drop(self, name: str) -> None:
        fold = self.folds.pop(name, None)
        self.hosts.pop(name, None)
        if fold is not None:
            await fold.stop(final_snapshot=False)

    async def stop(self) -> None:
        await asyncio.gather(*(fold.stop() for fold in self.folds.values()),
                             return_exceptions=True)
        self.folds.clear()

    # -------------------------------------------------------------- reading
    async def describe(self, host: ModelHost, *, features: bool) -> dict[str, Any]:
        log_end = await self.storage.log_end(host.name)
        await self.refresh_view(host)
        return host.public(features=features, limit=self.settings.selected_features_max,
                             log_end=log_end)

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
        host.begin_view_fetch(flight)
        try:
            token, blob = await self.storage.fetch_view(host.name, host.view_token)
            if blob is not None:
                view = decode_view(blob, host.n_features) if len(blob) < _INLINE_VIEW_BYTES \
                    else await asyncio.to_thread(decode_view, blob, host.n_features)
                host.install_view(view, token)
                metrics.READ_STALENESS.labels(host.name).observe(
                    max(0.0, time.time() - view.applied_at))
        except ViewFormatError as exc:
            log.error("model %s: published serving view refused: %s", host.name, exc)
        except Exception as exc:  # storage down: answer from what this process holds
            log.warning("model %s: serving view not refreshed: %s", host.name, exc)
        finally:
            host.end_view_fetch()
            flight.set_result(None)

    # -------------------------------------------------------------- predictions
    async def predict(self, host: ModelHost, document: dict, require_write) -> dict[str, Any]:
        """``POST /predict``: margins and labels, and with ``return_prediction_ids`` an id
        per example for ``/feedback`` (which writes: the caller must be allowed to)."""
        unknown = set(document) - _PREDICT_FIELDS
        if unknown:
            name = sorted(unknown)[0]
            hint = " (computed_groups and budget are for batch models)" \
                if name in ("computed_groups", "budget", "max_cost") else ""
            raise item_error(f"unknown fields {sorted(unknown)}{hint}", field=name)
        with_ids = document.get("return_prediction_ids", False)
        if not isinstance(with_ids, bool):
            raise item_error("must be true or false", field="return_prediction_ids")
        if with_ids:  # an id is only good for feedback, which writes
            await require_write()
        batch = parse_json_examples(document["examples"], host.n_features, host.hasher,
                                    require_labels=False)
        scores, ids, examples = await self.scores(host, batch, with_ids)
        return {"model": host.name, "log_position": host.applied_id,
                "scores": scores.tolist(), "labels": signed_labels(scores).tolist(),
                "prediction_ids": ids, "examples_applied": examples,
                "warnings": [] if examples else [untrained(host.name)]}

    async def scores(self, host: ModelHost, batch: ExampleBatch,
                     with_ids: bool) -> tuple[np.ndarray, list[str] | None, int]:
        """The margins of ``batch``, the prediction ids (``with_ids``), and how many
        examples the state that answered has learned from."""
        await self.refresh_view(host)
        view = host.serving()  # lock-free read (see docs/architecture.md)
        learner = view or host.learner
        examples = int(view.n_examples if view is not None else host.learner.n_examples_)
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
                blob = _SCORE.pack(float(scores[row])) + fbx1.encode_batch(
                    X.indptr, X.indices, X.values, np.ones(1, dtype=np.int8))
                await self.storage.put_pending(host.name, prediction_id, blob, ttl)
                ids.append(prediction_id)
        return scores, ids, examples

    async def feedback(self, host: ModelHost, prediction_id: str, label: int) -> dict | None:
        """Learn from a labelled earlier prediction (appended to the log like any example)."""
        blob = await self.storage.pop_pending(host.name, prediction_id)
        if blob is None:
            metrics.FEEDBACK.labels(host.name, "unknown").inc()
            return None
        (score,) = _SCORE.unpack_from(blob, 0)
        indptr, indices, values, _ = fbx1.decode_batch(blob[_SCORE.size:])
        data = fbx1.encode_batch(indptr, indices, values, np.array([label], dtype=np.int8))
        entry = {b"fmt": b"bin", b"data": data}
        try:
            (log_id,) = await self.storage.append(host.name, [entry],
                                                  incarnation=host.incarnation or None)
        except ModelChangedError as exc:
            raise ConflictError(f"model {host.name!r} was deleted or created again: the "
                                "prediction belongs to the deleted model") from exc
        predicted = int(signed_labels(score))
        metrics.FEEDBACK.labels(host.name, "correct" if predicted == label else "wrong").inc()
        metrics.EXAMPLES_INGESTED.labels(host.name, "feedback").inc()
        return {"score": score, "predicted_label": predicted, "label": label,
                "correct": predicted == label, "log_id": log_id}

    # -------------------------------------------------------------- snapshots
    async def export_snapshot(self, host: ModelHost) -> bytes:
        """The state with its log id: the folding process's own; through any other process
        the stored snapshot once it includes the log as it is now (the folding process is
        asked for one when it does not: :func:`~service.following.current_snapshot`)."""
        if self.storage.shared and not host.owner:
            blob = await current_snapshot(self.storage, host.name,
                                          self.settings.wait_timeout_seconds)
            if blob is not None:
                return blob
        blob, _ = await asyncio.to_thread(host.snapshot_blob)
        return blob

    async def restore_snapshot(self, host: ModelHost, blob: bytes) -> dict[str, Any]:
        """Replace the model with ``blob``, as of the log's current end: entries appended
        before this call and not yet applied are superseded, later ones are applied."""
        # parse and check everything off the event loop, before anything changes
        parsed = await asyncio.to_thread(host.check_blob, blob)
        try:
            await self.folds[host.name].restore(parsed)
        except LeaseLost as exc:
            raise NotOwnerError(str(exc)) from exc
        host.notify_applied()
        return {"model": host.name, "examples_applied": int(host.learner.n_examples_),
                "log_position": host.applied_id}


__all__ = ["OnlineModels", "untrained"]

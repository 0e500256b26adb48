"""Live models: one :class:`ModelHost` per model (learner, log position, counters, lock).

A model is a fold over its log: ``state_n = learner.partial_fit(state_{n-1}, entry_n)``.
The host applies micro-batches (in a worker thread, under ``lock``), records the id of the
last applied entry with the state, and writes snapshots holding both. Only the
:mod:`service.online.fold` mutates a learner; routes append to the log.

``ModelHost`` is composed of its concerns: this module holds its fields, their writers, the
fold's side and snapshots; :class:`~service.online.host_reads.HostReads` what it answers
from and its description (the serving view), and
:class:`~service.online.host_predictions.HostPredictions` predictions and feedback. The
bases read the fields and call the writers here; nothing else assigns a host's fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import numpy as np

from algorithms.online.base import signed_labels
from algorithms.serialization import dumps_state
from service.errors import ConflictError, NotOwnerError, UnsupportedMediaTypeError
from service.fold_loop import LeaseLost
from service.following import current_snapshot
from service.ingest import (
    ExampleBatch,
    decode_bin,
    parse_json_body,
    parse_libsvm_body,
)
from service.model_interface import Host
from service.online.host_predictions import HostPredictions
from service.online.host_reads import HostReads
from service.online.learner import make_hasher, new_learner
from service.online.snapshot import parse_snapshot
from service.online.view import ServingView, token_position
from service.priority import yield_to_predictions
from service.schemas import ModelSpec
from service.snapshot_file import make_snapshot
from service.storage import id_key


class ModelHost(HostReads, HostPredictions, Host):
    """One online model in this process: its learner, log position and counters; the
    route-facing methods of :class:`~service.model_interface.Host` are its own (and its
    bases'), reaching the storage, settings and fold through ``models``
    (:class:`~service.online.models.OnlineModels`, the registry). Every field is written
    here: the fold and the bases call the writers below."""

    kind = "online"

    def __init__(self, spec: ModelSpec, *, models=None, feature_names_max: int = 100_000,
                 chunk_examples: int = 256) -> None:
        self.spec = spec
        self.models = models
        self.chunk_examples = chunk_examples
        self.learner = new_learner(spec)
        self.hasher = make_hasher(spec.hash_bits)
        self.applied_id: str | None = None
        self.progressive_examples = 0
        self.progressive_correct = 0
        self.names: dict[int, str] = {}
        self.feature_names_max = feature_names_max
        self.lock = threading.Lock()  # held while the learner changes
        self.owner = False  # this process folds the model (holds its lease)
        self._applied_event = asyncio.Event()
        self.view: ServingView | None = None  # newest published view (other processes)
        self.view_token: str | None = None
        self.view_flight: tuple[float, asyncio.Future] | None = None  # a fetch under way
        self.view_published = (-1, -1)  # owner: position of the last view it published
        self.applied_at = 0.0  # wall-clock time applied_id was applied (or restored)

    @property
    def n_features(self) -> int:
        return self.spec.dimension

    # -------------------------------------------------------------- the fields' writers
    def set_owner(self, owner: bool) -> None:
        """Whether this process folds the model, as its fold learns it (the lease)."""
        self.owner = owner

    def view_was_published(self, position: tuple[int, int]) -> None:
        """The owner published its serving view at ``position``."""
        self.view_published = position

    def restore_position(self, log_id: str | None) -> None:
        """After a restore: the log position the installed state stands for (a snapshot's
        own id belongs to another log)."""
        with self.lock:
            self.applied_id = log_id

    def begin_view_fetch(self, flight: asyncio.Future) -> None:
        """A fetch of the serving view is under way; concurrent requests wait on
        ``flight``."""
        self.view_flight = (time.monotonic(), flight)

    def install_view(self, view: ServingView, token: str) -> None:
        self.view, self.view_token = view, token

    def end_view_fetch(self) -> None:
        self.view_flight = None

    # -------------------------------------------------------------- the routes' interface
    def parse_examples(self, body: bytes, media_type: str) -> tuple[ExampleBatch, str]:
        """JSON / NDJSON, libsvm text or FBX1 binary -> ``(batch, format)``."""
        if media_type in ("application/json", "application/x-ndjson", ""):
            return parse_json_body(body, self.n_features, self.hasher), "json"
        if media_type in ("text/plain", "text/x-libsvm", "application/x-libsvm"):
            return parse_libsvm_body(body, self.n_features,
                                     zero_based=self.spec.libsvm_zero_based), "libsvm"
        if media_type in ("application/octet-stream", "application/x-featurebudget-batch"):
            return decode_bin(body, self.n_features, field="body", keep_raw=True), "bin"
        raise UnsupportedMediaTypeError(
            f"content type {media_type!r} is not supported; use application/json, "
            "text/plain (libsvm) or application/octet-stream (FBX1 binary)")

    async def applied_through(self, log_id: str) -> bool:
        """Embedded: applied by this process's fold. Shared backend: in the serving view
        every process answers from (the owner knows what it published; others read the
        view's token, which a process that folded it before this one may have published)."""
        storage = self.models.storage
        if not storage.shared:
            return self.models.folds[self.name].has_applied(log_id)
        target = id_key(log_id)
        if self.owner and self.view_published >= target:
            return True
        return (not self.owner or id_key(self.applied_id) >= target) and \
            token_position(await storage.view_token(self.name)) >= target

    async def next_change(self, timeout: float) -> None:
        if not self.models.storage.shared:
            await self.models.folds[self.name].next_applied(timeout)
        elif self.owner:
            await self.wait_applied_event(min(timeout, 0.05))
        else:
            await asyncio.sleep(min(timeout, 0.005))

    async def selected_features(self) -> list[dict]:
        return (await self.describe())["selected_features"]

    def refuse(self, what: str) -> ConflictError:
        return ConflictError(f"{self.name!r} is an online model ({self.spec.algorithm}): it "
                             "learns every example as it is folded and has no retrains or "
                             f"versions ({what} is for batch models)")

    # -------------------------------------------------------------- fold
    def apply_all(self, batches: list[ExampleBatch], last_id: str) -> tuple[int, int]:
        """Fold ``batches`` in order, then record ``last_id``, all under the lock: a
        snapshot sees the state before or after the whole micro-batch, never inside it."""
        with self.lock:
            if id_key(last_id) <= id_key(self.applied_id):
                return 0, 0
            n = correct = 0
            for batch in batches:
                if not len(batch):
                    continue
                if batch.names:  # first: a describe between two kernel calls (it reads the
                    self.remember_names(batch.names)  # live counters) names what it counts
                scores = self._progressive_fit(batch)
                predicted = signed_labels(scores)
                n += len(batch)
                correct += int(np.count_nonzero(predicted == batch.labels))
            self.progressive_examples += n
            self.progressive_correct += correct
            self.applied_id = last_id
            self.applied_at = time.time()
        return n, correct

    def _progressive_fit(self, batch: ExampleBatch) -> np.ndarray:
        """One ordered pass, in pieces of ``chunk_examples`` rows: between two kernel calls
        the GIL is free, so the event loop (predictions) never waits for a whole batch."""
        n, step = len(batch), self.chunk_examples
        if n <= step:
            return self.learner.progressive_fit(batch.X, batch.labels)
        scores = np.empty(n, dtype=np.float64)
        for start in range(0, n, step):
            stop = min(n, start + step)
            scores[start:stop] = self.learner.progressive_fit(batch.X.row_slice(start, stop),
                                                              batch.labels[start:stop])
            yield_to_predictions()
        return scores

    def notify_applied(self) -> None:
        event, self._applied_event = self._applied_event, asyncio.Event()
        event.set()

    async def wait_applied_event(self, timeout: float) -> None:
        """Until the next micro-batch is applied (or its view published), at most
        ``timeout``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._applied_event.wait(), timeout)

    def remember_names(self, names: dict[int, str]) -> None:
        room = self.feature_names_max - len(self.names)
        if room <= 0:
            return
        for index, name in names.items():
            if index not in self.names:
                self.names[index] = name
                room -= 1
                if room <= 0:
                    return

    # -------------------------------------------------------------- snapshots
    async def export_snapshot(self) -> bytes:
        """The state with its log id: the folding process's own; through any other process
        the stored snapshot once it includes the log as it is now (the folding process is
        asked for one when it does not: :func:`~service.following.current_snapshot`)."""
        if self.models.storage.shared and not self.owner:
            blob = await current_snapshot(self.models.storage, self.name,
                                          self.models.settings.wait_timeout_seconds)
            if blob is not None:
                return blob
        blob, _ = await asyncio.to_thread(self.snapshot_blob)
        return blob

    async def restore_snapshot(self, blob: bytes) -> dict[str, Any]:
        """Replace the model with ``blob``, as of the log's current end: entries appended
        before this call and not yet applied are superseded, later ones are applied."""
        # parse and check everything off the event loop, before anything changes
        parsed = await asyncio.to_thread(self.check_blob, blob)
        try:
            await self.models.folds[self.name].restore(parsed)
        except LeaseLost as exc:
            raise NotOwnerError(str(exc)) from exc
        self.notify_applied()
        return {"model": self.name, "examples_applied": int(self.learner.n_examples_),
                "log_position": self.applied_id}

    def snapshot_blob(self) -> tuple[bytes, str | None]:
        """Serialized state + the id of the last entry it includes (taken together)."""
        with self.lock:
            log_id = self.applied_id
            state = make_snapshot(self.learner.state_dict(), {
                "log_id": log_id or "", "progressive_examples": self.progressive_examples,
                "progressive_correct": self.progressive_correct,
                "feature_names": [[int(k), v] for k, v in self.names.items()],
                "model": self.spec.model_dump(mode="json")})
        return dumps_state(state), log_id

    def check_blob(self, blob: bytes, *, check_spec: bool = True):
        """Parse a snapshot completely and check it fits this model (with ``check_spec``:
        the same algorithm, dimension, budget and hyperparameters, compared before anything
        is allocated); ``(learner, metadata)`` or InputError. Nothing changes here."""
        return parse_snapshot(blob, self.spec if check_spec else None,
                              feature_names_max=self.feature_names_max)

    def install(self, parsed) -> None:
        """Swap a parsed snapshot in, in one step under the lock."""
        learner, extra = parsed
        with self.lock:
            self.learner = learner
            self.applied_id = extra["log_id"] or None
            self.progressive_examples = extra["progressive_examples"]
            self.progressive_correct = extra["progressive_correct"]
            self.names = extra["feature_names"]
            self.applied_at = time.time()

    def load_blob(self, blob: bytes, *, check_spec: bool = True) -> None:
        """Replace the state with a snapshot's; InputError (and no change) when it does not
        fit."""
        self.install(self.check_blob(blob, check_spec=check_spec))

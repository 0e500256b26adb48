"""Live models: one :class:`ModelHost` per model (learner, log position, counters, lock).

A model is a fold over its log: ``state_n = learner.partial_fit(state_{n-1}, entry_n)``.
The host applies micro-batches (in a worker thread, under ``lock``), records the id of the
last applied entry with the state, and writes snapshots holding both. Only the
:mod:`service.online.fold` mutates a learner; routes append to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from typing import Any

import numpy as np

from algorithms.online import LEARNERS, learner_from_state
from algorithms.online.base import signed_labels
from algorithms.serialization import StateFormatError, dumps_state, loads_state
from algorithms.states import state_kind
from service.errors import ConflictError, InputError, UnsupportedMediaTypeError, item_error
from service.ingest import (
    ExampleBatch,
    decode_bin,
    parse_json_body,
    parse_libsvm_body,
)
from service.model_interface import Host
from service.online.view import ServingView, top_names
from service.priority import yield_to_predictions
from service.schemas import ModelCreate, ModelSpec
from service.snapshot_file import (
    FLAT,
    Snapshot,
    SnapshotFormatError,
    make_snapshot,
    open_snapshot,
)
from service.storage import id_key

# the service's members of an online model's snapshot (service.snapshot_file)
_SERVICE_KEYS = ("log_id", "progressive_examples", "progressive_correct", "feature_names",
                 "model", "format_version")
# the layout of a flat snapshot's service members (``svc_format_version``; 0: written
# before the member existed); snapshots in the envelope carry its format version instead
FLAT_SERVICE_FORMAT_VERSION = 1


def check_learner(spec: ModelCreate, max_bytes: int | None = None) -> int:
    """Every check the construction of ``spec``'s learner makes, from the parameters alone
    (nothing of the model's size is allocated): the state's size in bytes, or InputError
    naming the field. With ``max_bytes`` a larger state is refused (a dense learner over
    2^31 features would need 34 GB). O(1)."""
    cls = LEARNERS.get(spec.algorithm)
    if cls is None:
        raise item_error(f"unknown algorithm {spec.algorithm!r}; known: {sorted(LEARNERS)}",
                         field="algorithm")
    if spec.budget is not None and not cls.selects:
        selecting = sorted(name for name, c in LEARNERS.items() if c.selects)
        raise item_error(f"{spec.algorithm} keeps every feature: budget is for the learners "
                         f"that select ({', '.join(selecting)})", field="budget")
    if max_bytes is not None:
        needed = cls.memory_bytes(n_features=spec.dimension, budget=spec.budget)
        if needed > max_bytes:
            field = "hash_bits" if spec.hash_bits is not None else "n_features"
            raise item_error(f"{spec.algorithm} over {spec.dimension} features needs "
                             f"{needed:,} bytes of state, more than the limit of "
                             f"{max_bytes:,} (FEATUREBUDGET_MAX_MODEL_BYTES)", field=field)
    check_param_names(spec.algorithm, cls, spec.params)
    with _as_input_error(spec):
        return cls.check_arguments(spec.dimension, budget=spec.budget, **spec.params)


_MODEL_FIELDS = ("n_features", "budget")  # the learner's arguments the model's fields give


def check_param_names(algorithm: str, cls, params: dict) -> None:
    """InputError naming the first of ``params`` that ``cls`` does not take: a field of the
    model given as a parameter (``budget``, ``n_features``), or an unknown name (the known
    ones listed, as batch models list theirs). O(parameters)."""
    for name in _MODEL_FIELDS:
        if name in params:
            raise item_error(f"{name} is a field of the model, not a parameter of "
                             f"{algorithm}: give it beside params, as \"{name}\": ...",
                             field=f"params.{name}")
    known = [name for name in cls._get_param_names() if name not in _MODEL_FIELDS]
    unknown = sorted(set(params) - set(known) - set(getattr(cls, "_renamed", {})))
    if unknown:
        raise item_error(f"unknown parameters {unknown} for {algorithm}; known: {known}",
                         field=f"params.{unknown[0]}")


def new_learner(spec: ModelCreate, max_bytes: int | None = None):
    """Construct the learner a spec describes (checked first: :func:`check_learner`);
    InputError naming the field otherwise."""
    check_learner(spec, max_bytes)
    with _as_input_error(spec):
        return LEARNERS[spec.algorithm](n_features=spec.dimension, budget=spec.budget,
                                        **spec.params)


@contextlib.contextmanager
def _as_input_error(spec: ModelCreate):
    """A learner's TypeError / ValueError as the InputError of the field it is about."""
    try:
        yield
    except TypeError as exc:
        raise item_error(f"{spec.algorithm}: {exc}", field="params") from exc
    except ValueError as exc:
        message = str(exc)
        field = "budget" if "budget" in message else "params"
        raise item_error(message, field=field) from exc


def make_hasher(bits: int | None):
    """``(namespace, name) -> index`` for hashed models (MurmurHash3, 2**bits): a
    :class:`~algorithms.sparse.hashing.FeatureHasher`, which also hashes many names of a
    namespace at once (``indices``)."""
    if bits is None:
        return None
    from algorithms.sparse.hashing import FeatureHasher

    return FeatureHasher(bits)



def token_position(token: str | None) -> tuple[int, int]:
    """The log position a serving view token ("<log id> <nonce>") stands for."""
    return id_key(token.partition(" ")[0]) if token else (-1, -1)

class ModelHost(Host):
    """One online model in this process: its learner, log position and counters; the
    route-facing methods of :class:`~service.model_interface.Host` are calls into ``models``
    (:class:`~service.online.models.OnlineModels`). Every field is written here: the fold
    and the service call the writers below."""

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

    async def predict(self, document: dict, require_write) -> dict[str, Any]:
        return await self.models.predict(self, document, require_write)

    async def describe(self, *, features: bool = True) -> dict[str, Any]:
        return await self.models.describe(self, features=features)

    async def export_snapshot(self) -> bytes:
        return await self.models.export_snapshot(self)

    async def restore_snapshot(self, blob: bytes) -> dict[str, Any]:
        return await self.models.restore_snapshot(self, blob)

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

    async def feedback(self, prediction_id: str, label: int) -> dict | None:
        return await self.models.feedback(self, prediction_id, label)

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

    # -------------------------------------------------------------- reading
    def make_view(self, names_limit: int) -> ServingView:
        """The serving view of the current state (owner; taken under the lock). O(B) for
        the selecting learners, O(d) for OGD / AROW."""
        with self.lock:
            learner = self.learner
            indices, values = learner.weights()
            return ServingView(
                log_id=self.applied_id or "0-0", applied_at=self.applied_at,
                n_examples=int(learner.n_examples_), n_updates=int(learner.n_updates_),
                progressive_examples=self.progressive_examples,
                progressive_correct=self.progressive_correct,
                indices=np.asarray(indices, dtype=np.int64),
                values=np.asarray(values, dtype=np.float64),
                names=top_names(indices, values, self.names, names_limit))

    def serving(self):
        """What to answer from: the learner, or a newer published view (see
        :mod:`service.online.view`). A process that does not fold the model answers from the view
        when it is at least as new; one that has just taken the fold over (from an older
        snapshot, replaying the log after it) answers from the view it served before until
        its learner has caught up, so its answers never go back in the log."""
        view = self.view
        if view is None:
            return None
        applied = id_key(self.applied_id)
        if view.position > applied or (view.position == applied and not self.owner):
            return view
        return None

    def public(self, *, features: bool, limit: int, log_end: str | None) -> dict[str, Any]:
        view = self.serving()
        if view is not None:
            indices, values, names = view.indices, view.values, view.names
            examples, updates, position = view.n_examples, view.n_updates, view.log_id
            progressive, correct = view.progressive_examples, view.progressive_correct
            applied_at = view.applied_at
        else:
            learner = self.learner
            indices, values = learner.weights()
            names = self.names
            examples, updates = int(learner.n_examples_), int(learner.n_updates_)
            position = self.applied_id
            progressive, correct = self.progressive_examples, self.progressive_correct
            applied_at = self.applied_at
        public: dict[str, Any] = dict(
            name=self.name, algorithm=self.spec.algorithm, params=self.spec.params,
            budget=self.spec.budget, n_features=self.n_features, hash_bits=self.spec.hash_bits,
            libsvm_zero_based=self.spec.libsvm_zero_based,
            created_at=self.spec.created_at, incarnation=self.spec.incarnation,
            examples_applied=examples, updates=updates,
            log_position=position, log_end=log_end,
            progressive_accuracy=correct / progressive if progressive else None,
            progressive_examples=progressive, n_selected=int(len(indices)), owner=self.owner,
            applied_at=applied_at or None)
        if features:
            order = np.argsort(-np.abs(values), kind="stable")[:limit]
            public["selected_features"] = [
                {"index": int(indices[k]), "weight": float(values[k]),
                 "name": names.get(int(indices[k]))} for k in order]
        return public


def parse_snapshot(blob: bytes, spec: ModelSpec | None = None, *,
                   feature_names_max: int = 100_000):
    """Snapshot bytes -> (learner, service metadata), everything checked; InputError naming
    the member otherwise. With ``spec`` the state must be of exactly that configuration
    (checked from the declared parameters before the learner's arrays are allocated), and
    its arrays may not add up to more than that learner's state needs."""
    limit = None
    if spec is not None:
        cls = LEARNERS[spec.algorithm]
        limit = 2 * cls.memory_bytes(n_features=spec.dimension, budget=spec.budget) + (1 << 20)
        limit += 64 * feature_names_max
    try:
        state = loads_state(blob, max_bytes=limit) if limit else loads_state(blob)
    except StateFormatError as exc:
        raise item_error(f"not a valid snapshot: {exc}", field="body") from exc
    try:
        snapshot = open_snapshot(state)
    except SnapshotFormatError as exc:
        raise item_error(str(exc), field=exc.field) from exc
    state = snapshot.model
    unknown = sorted(set(snapshot.service) - set(_SERVICE_KEYS))
    if unknown and snapshot.prefix != FLAT:  # (a flat file's svc_* were never checked so)
        raise item_error("not a member of an online model's snapshot",
                         field=snapshot.field(unknown[0]))
    extra = _check_service_keys(snapshot, feature_names_max)
    if spec is not None:
        _check_configuration(state, spec)
    try:
        learner = learner_from_state(state)
    except (KeyError, TypeError, ValueError, ArithmeticError, IndexError) as exc:
        raise InputError(f"snapshot state does not describe a learner: {exc}",
                         [{"field": "body", "message": str(exc)}]) from exc
    if extra["feature_names"] and max(extra["feature_names"]) >= learner.n_features:
        raise item_error("a feature name's index is outside the model's dimension",
                         field=snapshot.field("feature_names"))
    return learner, extra


def _count(value, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 62:
        raise item_error(f"must be a non-negative integer below 2^62, got {value!r}",
                         field=field)  # (a count that fits the serving view's int64s)
    return value


def _check_service_keys(snapshot: Snapshot, names_max: int) -> dict:
    """The service's members of a snapshot, typed and consistent (errors name each member
    as the file does: ``service.log_id``, or ``svc_log_id`` in a flat file)."""
    extra = {key: snapshot.service.get(key) for key in _SERVICE_KEYS}
    field = snapshot.field
    version = extra["format_version"]
    if snapshot.prefix == FLAT:
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or version not in (0, FLAT_SERVICE_FORMAT_VERSION)):
            raise item_error(f"this code reads the service members of format "
                             f"{FLAT_SERVICE_FORMAT_VERSION} (and snapshots written before "
                             f"it), got {version!r}", field=field("format_version"))
    elif version is not None:
        raise item_error("not a member of an online model's snapshot (its format version "
                         "is the snapshot's own)", field=field("format_version"))
    # absent members are None; no truth test, which an array member would make raise
    log_id = "" if extra["log_id"] is None else extra["log_id"]
    if not isinstance(log_id, str) or len(log_id) > 64:
        raise item_error("must be a log id string", field=field("log_id"))
    if log_id:
        try:
            id_key(log_id)
        except ValueError as exc:
            raise item_error(f"{log_id!r} is not a log id", field=field("log_id")) from exc
    examples = _count(extra["progressive_examples"], field("progressive_examples"))
    correct = _count(extra["progressive_correct"], field("progressive_correct"))
    if correct > examples:
        raise item_error(f"{correct} correct of {examples} examples",
                         field=field("progressive_correct"))
    raw_names = [] if extra["feature_names"] is None else extra["feature_names"]
    if not isinstance(raw_names, list) or len(raw_names) > names_max:
        raise item_error(f"must be a list of at most {names_max} [index, name] pairs",
                         field=field("feature_names"))
    names: dict[int, str] = {}
    for pair in raw_names:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)
                and not isinstance(pair[0], bool) and pair[0] >= 0
                and isinstance(pair[1], str) and len(pair[1]) <= 1024):
            raise item_error(f"entry {pair!r} is not an [index, name] pair",
                             field=field("feature_names"))
        names[pair[0]] = pair[1]
    return {"log_id": log_id, "progressive_examples": examples,
            "progressive_correct": correct, "feature_names": names}


def _check_configuration(state: dict, spec: ModelSpec) -> None:
    """The snapshot is of this model's configuration: algorithm, dimension, budget and every
    hyperparameter (defaults included). Compared on the declared values, so nothing is
    allocated for a snapshot that does not fit."""
    kind, _ = state_kind(state)  # the envelope's kind, or "algorithm" before the envelope
    if kind != spec.algorithm:
        raise item_error(f"snapshot is a {kind!r} model, this model is "
                         f"{spec.algorithm!r}", field="algorithm")
    params = state.get("params")
    if not isinstance(params, dict):
        raise item_error("snapshot has no parameters", field="params")
    cls = LEARNERS[spec.algorithm]
    expected = {name: p.default for name, p in
                inspect.signature(cls.__init__).parameters.items()
                if name != "self" and p.default is not inspect.Parameter.empty}
    expected.update(spec.params, n_features=spec.dimension, budget=spec.budget)
    for name in sorted(set(expected) | set(params)):
        mine, theirs = expected.get(name, "(absent)"), params.get(name, "(absent)")
        if mine != theirs:
            field = name if name in ("n_features", "budget") else f"params.{name}"
            raise item_error(f"snapshot has {name} = {theirs!r}, this model {mine!r}; a "
                             "snapshot restores the state of a model of the same "
                             "configuration", field=field)

"""An online model's snapshot file read back: the learner and the service's members
(log id, progressive counters, feature names), every member checked.

A snapshot (:mod:`service.snapshot_file`) holds the learner's state and the service's
members; the host writes it (:meth:`~service.online.host.ModelHost.snapshot_blob`) and
reads it through :func:`parse_snapshot`. Checking is O(size of the file); a snapshot for a
given model is checked against its configuration before the learner's arrays are allocated.
"""

from __future__ import annotations

import inspect

from algorithms.online import LEARNERS, learner_from_state
from algorithms.serialization import StateFormatError, loads_state
from algorithms.states import state_kind
from service.errors import InputError, item_error
from service.schemas import ModelSpec
from service.snapshot_file import FLAT, Snapshot, SnapshotFormatError, open_snapshot
from service.storage import id_key

# the service's members of an online model's snapshot (service.snapshot_file)
_SERVICE_KEYS = ("log_id", "progressive_examples", "progressive_correct", "feature_names",
                 "model", "format_version")
# the layout of a flat snapshot's service members (``svc_format_version``; 0: written
# before the member existed); snapshots in the envelope carry its format version instead
FLAT_SERVICE_FORMAT_VERSION = 1


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

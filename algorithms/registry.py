"""One registry of every model family's classes by the ``kind`` of their state, and the
loaders that rebuild any model from its state.

It sits above the families (each imports only the envelope, ``algorithms.states``) and
below the service, which maps a stored state's kind to its class here instead of by hand.
A new family adds its class to :func:`model_kinds` and a case to the check suite
(``tests/test_estimator_checks.py``).

``model_from_state(state)`` / ``model_from_bytes(data)`` rebuild any model from its state;
``model_to_bytes(model)`` is ``dumps_state(model.state_dict())``. Lookups are O(1) (the
tables are built once per call of the two ``*_kinds`` functions, O(families)).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics
from algorithms.gbfs import GBFS
from algorithms.nvsd import NVSD, RelaxedNVSD, SubsetKernelRidge
from algorithms.online import LEARNERS
from algorithms.per_set import PerSetChoice
from algorithms.serialization import dumps_state, loads_state
from algorithms.states import describe, state_kind

BATCH_MODELS = (AnytimeLinearModel, GBFS, NVSD, RelaxedNVSD, PerSetChoice)
PARTS = (SufficientStatistics, SubsetKernelRidge)  # states that are parts of models


def model_kinds() -> dict[str, type]:
    """Every model family's classes by kind: the online learners (``LEARNERS``), then
    the batch models (``AnytimeLinearModel``, ``GBFS``, ``NVSD``, ``RelaxedNVSD``,
    ``PerSetChoice``)."""
    return {**{cls.kind: cls for cls in LEARNERS.values()},
            **{cls.kind: cls for cls in BATCH_MODELS}}


def state_kinds() -> dict[str, type]:
    """Every kind of state -> the class whose ``from_state_dict`` reads it: the models of
    :func:`model_kinds` plus the parts they are made of (anytime sufficient statistics,
    the kernel-ridge refits of RelaxedNVSD)."""
    return {**model_kinds(), **{cls.kind: cls for cls in PARTS}}


def class_of(kind: str) -> type:
    """The class that reads states of ``kind``; ValueError naming the known kinds."""
    kinds = state_kinds()
    if kind not in kinds:
        raise ValueError(f"unknown kind of state {kind!r}; known: {sorted(kinds)}")
    return kinds[kind]


def model_from_state(state: Any):
    """The model (or model part) ``state`` describes, whatever its kind; ValueError when
    it is not a state this package could have written (unknown kind, unsupported version,
    contents the kind's checks refuse)."""
    kind, _ = state_kind(state)
    kinds = state_kinds()
    if kind not in kinds:
        if not isinstance(state, Mapping):
            raise ValueError(f"state must be a dict, got {type(state).__name__}")
        raise ValueError(f"unknown kind of state {describe(state)!r}; known: "
                         f"{sorted(kinds)}")
    return kinds[kind].from_state_dict(state)


def model_from_bytes(data: bytes, *, max_bytes: int = 1 << 34):
    """:func:`model_from_state` of ``loads_state(data, max_bytes=...)``; a ValueError
    (``StateFormatError`` for a malformed archive) otherwise."""
    return model_from_state(loads_state(data, max_bytes=max_bytes))


def model_to_bytes(model) -> bytes:
    """``dumps_state(model.state_dict())``: the bytes :func:`model_from_bytes` reads."""
    return dumps_state(model.state_dict())


__all__ = ["BATCH_MODELS", "PARTS", "class_of", "model_from_bytes", "model_from_state",
           "model_kinds", "model_to_bytes", "state_kinds"]

"""The shared protocol and loop of the online learners (binary, labels in {-1, +1}).

Every learner makes one ordered pass: for each example it computes the score
``w . x`` with the current weights, then updates (test-then-train). The per-example loop
runs inside one numba kernel per batch; a subclass supplies that kernel (``_fit_rows``),
a scoring kernel (``_score_rows``), its state arrays and its weights. Validation happens
here, once per batch, never in the kernels.

Unlike the batch models (``algorithms.batch``: ``__init__`` stores, ``fit`` checks), a
learner's constructor checks its arguments and allocates its whole state (at most
``memory_bytes`` bytes, refused with ``StateTooLargeError`` when more than the memory still
available): the state is the model, updated in place from the first ``partial_fit`` on,
and a learner that could not run must not exist.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from algorithms.memory import check_fits
from algorithms.online._featuremap import map_bytes
from algorithms.serialization import dumps_state, loads_state
from algorithms.sparse import CSRBatch, as_csr_batch
from algorithms.sparse.csr import MAX_FEATURES
from algorithms.states import FORMAT_VERSION, KIND, envelope, open_envelope

_TOP_SET_BYTES_PER_SLOT = 4 * 8 + 3 * 8   # slot arrays (the feature map: ``map_bytes``)
_SMALL_STATE_BYTES = 128   # a learner's fixed-size arrays (top set meta, FOFS's norm state)
_MAX_COUNT = int(np.iinfo(np.int64).max)   # counters reach the kernels as float / int64


class OnlineLearner:
    """Base class: ``partial_fit``, ``progressive_fit``, ``decision_function``, ``predict``,
    ``selected_features``, ``weights``, ``state_dict`` / ``from_state_dict``,
    ``to_bytes`` / ``from_bytes``.

    Subclasses set ``name`` (also the kind of their state, ``algorithms.states``),
    ``selects`` (whether ``budget`` bounds the non-zeros) and the names of their state
    arrays; their constructor allocates those arrays (as ``self._<name>``) after calling
    this one; they implement ``_fit_rows``, ``_score_rows`` and ``weights``, and may
    override ``_check_state`` and ``_after_load``.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""          # = name (set for each subclass)
    format_version: ClassVar[int] = 1  # of the state's payload (0: before the envelope)
    selects: ClassVar[bool] = False
    _bytes_per_feature: ClassVar[int] = 0     # dense per-feature state
    _state_arrays: ClassVar[tuple[str, ...]] = ()
    # Per-feature arrays of shape (d, k) saved sparsely: name -> the k values of an
    # untouched feature (a row equal to them is not saved).
    _sparse_arrays: ClassVar[dict[str, tuple[float, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.name

    def __init__(self, *, n_features: int, budget: int | None = None) -> None:
        self.n_features = int(n_features)
        self.budget = None if budget is None else int(budget)
        if not 1 <= self.n_features <= MAX_FEATURES:   # a batch's indices are int32
            raise ValueError(f"n_features must be in [1, {MAX_FEATURES}], got {n_features}")
        if self.selects:
            if self.budget is None or self.budget < 1:
                raise ValueError(f"{self.name}: budget must be an integer >= 1, got {budget}")
        elif self.budget is not None and self.budget < 1:
            raise ValueError(f"{self.name}: budget must be >= 1 or None, got {budget}")
        check_fits(f"{self.name} over {self.n_features:,} features",
                   type(self).memory_bytes(n_features=self.n_features, budget=self.budget))
        self.n_examples_ = 0
        self.n_updates_ = 0

    # ----------------------------------------------------------------- public protocol
    def partial_fit(self, X, y) -> OnlineLearner:
        """Learn from the rows of ``X`` in order (one pass). Returns ``self``."""
        self.progressive_fit(X, y)
        return self

    def progressive_fit(self, X, y) -> np.ndarray:
        """Learn from ``X`` in order; return each row's score *before* it was learned."""
        batch = self._batch(X)
        labels = self._labels(y, batch.n_rows)
        scores = np.empty(batch.n_rows, dtype=np.float64)
        if batch.n_rows:
            self.n_updates_ += int(self._fit_rows(batch, labels, scores))
            self.n_examples_ += batch.n_rows
        return scores

    def decision_function(self, X) -> np.ndarray:
        """Scores ``w . x`` for each row of ``X`` (float64, shape (n,)). O(nnz)."""
        batch = self._batch(X)
        scores = np.empty(batch.n_rows, dtype=np.float64)
        if batch.n_rows:
            self._score_rows(batch, scores)
        return scores

    def predict(self, X) -> np.ndarray:
        """Labels in {-1, +1} (int8); a score of exactly 0 predicts +1."""
        return np.where(self.decision_function(X) >= 0.0, 1, -1).astype(np.int8)

    def selected_features(self) -> np.ndarray:
        """Sorted indices of the non-zero weights (at most ``budget`` for selectors)."""
        return self.weights()[0]

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices int64, values float64) of the non-zero weights, sorted by index."""
        raise NotImplementedError

    @classmethod
    def memory_bytes(cls, *, n_features: int, budget: int | None = None) -> int:
        """Bytes of state a learner of this shape allocates (dense per-feature arrays plus,
        for selectors, the top set of min(B, d) features): check before constructing."""
        total = cls._bytes_per_feature * int(n_features)
        if cls.selects and budget is not None:
            capacity = max(min(int(budget), int(n_features)), 1)
            total += (_TOP_SET_BYTES_PER_SLOT * (capacity + 1) + _SMALL_STATE_BYTES
                      + map_bytes(capacity, int(n_features)))
        return total

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments (JSON-able)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume bit-exactly, in the envelope of
        ``algorithms.states`` (kind = ``name``): params, counters and state arrays (the
        ``_sparse_arrays`` as the rows that differ from an untouched feature's)."""
        payload: dict[str, Any] = {"params": self.get_params(),
                                   "n_examples": self.n_examples_,
                                   "n_updates": self.n_updates_}
        for key in self._state_arrays:
            payload[key] = getattr(self, "_" + key).copy()
        for key, fill in self._sparse_arrays.items():
            dense = getattr(self, "_" + key)
            touched = np.flatnonzero(np.any(dense != np.asarray(fill), axis=1))
            payload[key + "_index"] = touched.astype(np.int64)
            payload[key + "_value"] = dense[touched]
        return envelope(self.name, self.format_version, payload)

    @classmethod
    def state_members(cls) -> frozenset[str]:
        """The keys of :meth:`state_dict` (no more, no fewer)."""
        return frozenset({KIND, FORMAT_VERSION, *cls._payload_members()})

    @classmethod
    def _payload_members(cls) -> set[str]:
        keys = {"params", "n_examples", "n_updates", *cls._state_arrays}
        for key in cls._sparse_arrays:
            keys |= {key + "_index", key + "_value"}
        return keys

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> OnlineLearner:
        """Inverse of :meth:`state_dict`, also of the states written before the envelope
        (``"algorithm": name``, the same payload). A ValueError naming the member unless
        ``state`` is one a learner of this class could have saved: exactly its members,
        params the constructor accepts, counters 0 <= n_updates <= n_examples, arrays of
        the right shapes and dtypes whose contents the kernels can run on
        (``_check_state``; index ranges, structure, finite values). Vectorized, O(state
        size); nothing is checked per example afterwards."""
        _, state = open_envelope(state, cls.name, (0, cls.format_version))
        expected = cls._payload_members()
        missing = sorted(expected.difference(state))
        unknown = sorted(repr(key) for key in state if key not in expected)
        if missing or unknown:
            raise ValueError(f"state of {cls.name!r}: missing members {missing}, unknown "
                             f"members [{', '.join(unknown)}]")
        learner = cls._from_params(state["params"])
        learner.n_examples_ = check_integer("n_examples", state["n_examples"], 0, _MAX_COUNT)
        learner.n_updates_ = check_integer("n_updates", state["n_updates"], 0,
                                           learner.n_examples_, "n_examples")
        for key in cls._state_arrays:
            current = getattr(learner, "_" + key)
            array = as_array(key, state[key])
            if array.shape != current.shape or array.dtype != current.dtype:
                raise ValueError(f"state array {key!r} has shape {array.shape} and dtype "
                                 f"{array.dtype}, expected {current.shape} {current.dtype}")
            setattr(learner, "_" + key, np.array(array, order="C", copy=True))
        rows = {}
        for key in cls._sparse_arrays:
            dense = getattr(learner, "_" + key)
            index, value = sparse_rows(key, state[key + "_index"], state[key + "_value"],
                                       dense.shape)
            dense[index] = value
            rows[key] = (index, value)
        learner._check_state(rows)
        learner._after_load()
        return learner

    @classmethod
    def _from_params(cls, params: Any) -> OnlineLearner:
        """The constructor on ``params``: each a known argument of its type (the
        constructor checks the values); any failure a ValueError."""
        if not isinstance(params, Mapping):
            raise ValueError(f"state member 'params' must be a dict, got "
                             f"{type(params).__name__}")
        signature = inspect.signature(cls.__init__).parameters
        for key, value in params.items():
            parameter = signature.get(key) if isinstance(key, str) and key != "self" else None
            if parameter is None:
                raise ValueError(f"state member 'params': unknown parameter {key!r} of "
                                 f"{cls.name!r}")
            if key in ("n_features", "budget"):
                kinds, what = (numbers.Integral,), "an integer"
                if key == "budget" and not cls.selects:
                    kinds, what = (numbers.Integral, type(None)), "an integer or None"
            elif isinstance(parameter.default, float):
                kinds, what = (numbers.Real,), "a number"
            elif isinstance(parameter.default, str):
                kinds, what = (str,), "a string"
            else:
                continue
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise ValueError(f"state member 'params': {key} must be {what}, got "
                                 f"{value!r}")
        try:
            return cls(**params)
        except (TypeError, ValueError, OverflowError, MemoryError) as exc:
            raise ValueError(f"state member 'params' is invalid for {cls.name!r}: "
                             f"{exc}") from exc

    def to_bytes(self) -> bytes:
        """:meth:`state_dict` in the safe archive format (``algorithms.serialization``)."""
        return dumps_state(self.state_dict())

    @classmethod
    def from_bytes(cls, data: bytes, *, max_bytes: int = 1 << 34) -> OnlineLearner:
        """Inverse of :meth:`to_bytes`; ValueError on a malformed or foreign state."""
        return cls.from_state_dict(loads_state(data, max_bytes=max_bytes))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------- subclass interface
    def _fit_rows(self, batch: CSRBatch, labels: np.ndarray, scores: np.ndarray) -> int:
        raise NotImplementedError

    def _score_rows(self, batch: CSRBatch, scores: np.ndarray) -> None:
        raise NotImplementedError

    def _check_state(self, rows: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """ValueError (naming the member) unless the loaded arrays are a state the kernels
        can run on; ``rows``: the saved (index, value) of each sparse array. Called by
        ``from_state_dict`` before ``_after_load``; vectorized."""

    def _after_load(self) -> None:
        """Rebuild derived structures after loading a state (checked by ``_check_state``)."""

    # ------------------------------------------------------------------ validation
    def _batch(self, X) -> CSRBatch:
        return as_csr_batch(X, self.n_features)

    @staticmethod
    def _labels(y, n_rows: int) -> np.ndarray:
        labels = np.asarray(y, dtype=np.float64).reshape(-1)
        if labels.shape[0] != n_rows:
            raise ValueError(f"y has {labels.shape[0]} labels for {n_rows} examples")
        bad = (labels != 1.0) & (labels != -1.0)
        if bad.any():
            position = int(np.argmax(bad))
            raise ValueError(f"label {float(labels[position])!r} at row {position} is not -1 or +1")
        return labels


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Validate a hyperparameter: finite and > 0 (or >= 0)."""
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value}")
    return value


# ------------------------------------------------------------- loading a state's members
def check_integer(member: str, value: Any, low: int, high: int, high_name: str = "") -> int:
    """An integer (not a bool, float or string) in [low, high] as int; else ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"state member {member!r} must be an integer, got {value!r}")
    value = int(value)
    if not low <= value <= high:
        raise ValueError(f"state member {member!r} is {value}, outside [{low}, "
                         f"{high_name or high}]")
    return value


def as_array(member: str, value: Any) -> np.ndarray:
    """``value`` as an array of a real numeric dtype (no object, string, complex)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"state member {member!r} is not an array: {exc}") from exc
    if array.dtype.kind not in "biuf":
        raise ValueError(f"state member {member!r} has dtype {array.dtype}, not a number")
    return array


def sparse_rows(key: str, index: Any, value: Any, shape: tuple[int, ...]):
    """(index int64, value float64) of a sparsely saved (d, k) array: strictly increasing
    row indices in [0, d) and one row of k values each; else ValueError."""
    index, value = as_array(key + "_index", index), as_array(key + "_value", value)
    if index.dtype.kind not in "iu" or index.ndim != 1:
        raise ValueError(f"state member {key + '_index'!r} must be a 1-D integer array, got "
                         f"{index.dtype} of shape {index.shape}")
    if value.dtype.kind not in "iuf" or value.shape != (len(index),) + tuple(shape[1:]):
        raise ValueError(f"state member {key + '_value'!r} must be a numeric array of shape "
                         f"{(len(index),) + tuple(shape[1:])}, got {value.dtype} "
                         f"{value.shape}")
    if len(index) and ((index.min() < 0) | (index.max() >= shape[0])):
        raise ValueError(f"state member {key + '_index'!r} holds rows outside [0, "
                         f"{shape[0]})")
    index = index.astype(np.int64, copy=False)
    if (np.diff(index) <= 0).any():
        raise ValueError(f"state member {key + '_index'!r} is not strictly increasing")
    return index, value.astype(np.float64, copy=False)


def check_finite(member: str, array: np.ndarray, what: str = "entry") -> None:
    """ValueError naming the first NaN or infinite entry of ``array``."""
    finite = np.isfinite(array)
    if not finite.all():
        at = np.unravel_index(int(np.argmin(finite)), array.shape)
        raise ValueError(f"state member {member!r}: {what} {tuple(map(int, at))} is "
                         f"{float(array[at])}, not finite")

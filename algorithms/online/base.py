"""The shared protocol and loop of the online learners (binary, labels in {-1, +1}).

Every learner makes one ordered pass: for each example it computes the score
``w . x`` with the current weights, then updates (test-then-train). The per-example loop
runs inside one numba kernel per batch; a subclass supplies that kernel (``_fit_rows``),
a scoring kernel (``_score_rows``), its state arrays and its weights. Validation happens
here, once per batch, never in the kernels.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import numpy as np

from algorithms.online._featuremap import map_bytes
from algorithms.sparse import CSRBatch, as_csr_batch

_TOP_SET_BYTES_PER_SLOT = 4 * 8 + 3 * 8   # slot arrays (the feature map: ``map_bytes``)
_SMALL_STATE_BYTES = 128   # a learner's fixed-size arrays (top set meta, FOFS's norm state)


class OnlineLearner:
    """Base class: ``partial_fit``, ``progressive_fit``, ``decision_function``, ``predict``,
    ``selected_features``, ``weights``, ``state_dict`` / ``from_state_dict``.

    Subclasses set ``name``, ``selects`` (whether ``budget`` bounds the non-zeros), the
    names of their state arrays and scalars, and implement ``_allocate``, ``_fit_rows``,
    ``_score_rows`` and ``weights``.
    """

    name: ClassVar[str] = ""
    selects: ClassVar[bool] = False
    _bytes_per_feature: ClassVar[int] = 0     # dense per-feature state
    _state_arrays: ClassVar[tuple[str, ...]] = ()
    _state_scalars: ClassVar[tuple[str, ...]] = ()
    # Per-feature arrays of shape (d, k) saved sparsely: name -> the k values of an
    # untouched feature (a row equal to them is not saved).
    _sparse_arrays: ClassVar[dict[str, tuple[float, ...]]] = {}

    def __init__(self, *, n_features: int, budget: int | None = None) -> None:
        self.n_features = int(n_features)
        self.budget = None if budget is None else int(budget)
        if self.n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if self.selects:
            if self.budget is None or self.budget < 1:
                raise ValueError(f"{self.name}: budget must be an integer >= 1, got {budget}")
        elif self.budget is not None and self.budget < 1:
            raise ValueError(f"{self.name}: budget must be >= 1 or None, got {budget}")
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
        """Everything needed to resume bit-exactly: params, counters and state arrays."""
        state: dict[str, Any] = {"algorithm": self.name, "params": self.get_params(),
                                 "n_examples": self.n_examples_, "n_updates": self.n_updates_}
        for key in self._state_scalars:
            state[key] = getattr(self, "_" + key)
        for key in self._state_arrays:
            state[key] = getattr(self, "_" + key).copy()
        for key, fill in self._sparse_arrays.items():
            dense = getattr(self, "_" + key)
            touched = np.flatnonzero(np.any(dense != np.asarray(fill), axis=1))
            state[key + "_index"] = touched.astype(np.int64)
            state[key + "_value"] = dense[touched]
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> OnlineLearner:
        """Inverse of :meth:`state_dict`; validates names, shapes and dtypes."""
        if state.get("algorithm") != cls.name:
            raise ValueError(f"state is for {state.get('algorithm')!r}, not {cls.name!r}")
        learner = cls(**state["params"])
        learner.n_examples_ = int(state["n_examples"])
        learner.n_updates_ = int(state["n_updates"])
        for key in cls._state_scalars:
            setattr(learner, "_" + key, type(getattr(learner, "_" + key))(state[key]))
        for key in cls._state_arrays:
            current = getattr(learner, "_" + key)
            array = np.asarray(state[key])
            if array.shape != current.shape or array.dtype != current.dtype:
                raise ValueError(f"state array {key!r} has shape {array.shape} and dtype "
                                 f"{array.dtype}, expected {current.shape} {current.dtype}")
            setattr(learner, "_" + key, np.array(array, copy=True))
        for key in cls._sparse_arrays:
            dense = getattr(learner, "_" + key)
            index = np.asarray(state[key + "_index"], dtype=np.int64)
            value = np.asarray(state[key + "_value"], dtype=np.float64)
            if index.ndim != 1 or value.shape != (len(index),) + dense.shape[1:] or (
                    len(index) and (index.min() < 0 or index.max() >= len(dense))):
                raise ValueError(f"state arrays {key}_index / {key}_value are inconsistent")
            dense[index] = value
        learner._after_load()
        return learner

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------- subclass interface
    def _fit_rows(self, batch: CSRBatch, labels: np.ndarray, scores: np.ndarray) -> int:
        raise NotImplementedError

    def _score_rows(self, batch: CSRBatch, scores: np.ndarray) -> None:
        raise NotImplementedError

    def _after_load(self) -> None:
        """Rebuild derived structures after loading a state."""

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

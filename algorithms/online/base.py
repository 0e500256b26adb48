"""The shared protocol and loop of the online learners (binary classifiers).

Every learner makes one ordered pass: for each example it computes the score
``w . x`` with the current weights, then updates (test-then-train). The per-example loop
runs inside one numba kernel per batch; a subclass supplies that kernel (``_fit_rows``),
a scoring kernel (``_score_rows``), its state arrays and its weights. Validation happens
here, once per batch, never in the kernels.

A learner is a scikit-learn classifier (``algorithms.estimator``): ``__init__`` stores its
arguments, every one has a default, and ``fit`` / ``partial_fit(X, y, classes=None)`` /
``predict`` / ``decision_function`` / ``score`` / ``classes_`` / ``coef_`` are scikit-learn's,
with any two labels (numbers, strings, booleans); a data frame's string column names are
kept as ``feature_names_in_`` and checked at every later call (``algorithms.feature_names``).
The learner's state (at most ``memory_bytes`` bytes, refused with ``StateTooLargeError``
when more than the memory still available) is allocated when its dimension is known:

- ``n_features=d`` given: at once, by the constructor, which checks every argument first (a
  learner that could not run is never built: the service creates a model by constructing
  its learner). X may be narrower than d (the same examples in a larger space) or one 1-D
  row; ``set_params`` rebuilds and re-checks at once too.
- ``n_features=None`` (the default): at the first ``fit`` / ``partial_fit``, from the
  width of X (``n_features_in_``); afterwards X must have exactly that many columns.

Labels: the kernels learn -1 / +1. Labels that are all -1 or +1 need no classes (the
service's, and every state's: ``classes_`` is then ``[-1, 1]``, int8); other labels name
their two classes on the first call (``fit`` finds them in ``y``; ``partial_fit`` takes
``classes=``, or finds both in its first batch), ``classes_[1]`` learned as +1. States do
not record ``classes_`` (their format is unchanged): a loaded learner answers -1 / +1.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from algorithms.estimator import (
    ClassifierMixin,
    Estimator,
    as_matrix_like,
    binary_classes,
    check_matrix_shape,
    check_n_features,
    column_or_1d,
    not_fitted,
)
from algorithms.feature_names import check_feature_names
from algorithms.memory import check_fits
from algorithms.online._featuremap import map_bytes
from algorithms.serialization import dumps_state, loads_state
from algorithms.sparse import CSRBatch, as_csr_batch
from algorithms.sparse.csr import MAX_FEATURES
from algorithms.states import FORMAT_VERSION, KIND, envelope, open_envelope

_TOP_SET_BYTES_PER_SLOT = 4 * 8 + 3 * 8   # slot arrays (the feature map: ``map_bytes``)
_SMALL_STATE_BYTES = 128   # a learner's fixed-size arrays (top set meta, FOFS's norm state)
_MAX_COUNT = int(np.iinfo(np.int64).max)   # counters reach the kernels as float / int64
SIGNED_CLASSES = np.array([-1, 1], dtype=np.int8)   # ``classes_`` of -1 / +1 labels


def signed_labels(scores) -> np.ndarray:
    """-1 / +1 labels of margins (int8): +1 where the score is >= 0. O(n)."""
    return np.where(np.asarray(scores) >= 0.0, 1, -1).astype(np.int8)
DEFAULT_BUDGET = 100   # the selecting learners' default B


def _is_signed(classes: np.ndarray) -> bool:
    return classes.dtype.kind in "iuf" and classes[0] == -1 and classes[1] == 1


def _unchanged(old: Any, new: Any) -> bool:
    try:
        return old is new or (type(old) is type(new) and bool(old == new))
    except (TypeError, ValueError):
        return False


class OnlineLearner(ClassifierMixin, Estimator):
    """Base class: ``fit``, ``partial_fit``, ``progressive_fit``, ``decision_function``,
    ``predict``, ``score``, ``selected_features``, ``weights``, ``state_dict`` /
    ``from_state_dict``, ``to_bytes`` / ``from_bytes``.

    Subclasses set ``name`` (also the kind of their state, ``algorithms.states``),
    ``selects`` (whether ``budget`` bounds the non-zeros) and the names of their state
    arrays; their constructor stores its arguments after calling this one and ends with
    ``self._build_if_shaped()``; they implement ``_hyperparameters`` (their arguments
    checked), ``_allocate`` (the state arrays, as ``self._<name>``), ``_fit_rows``,
    ``_score_rows`` and ``weights``, and may override ``_check_state`` and ``_after_load``.
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

    def __init__(self, *, n_features: int | None = None, budget: int | None = None) -> None:
        self.n_features = n_features
        self.budget = budget

    # ------------------------------------------------------------------ building
    def _hyperparameters(self) -> dict[str, Any]:
        """The arguments other than ``n_features`` and ``budget``, checked, as the values
        the kernels get (stored as ``self._<name>``); ValueError naming the first bad one."""
        return {}

    def _allocate(self) -> None:
        """Allocate the state arrays for ``self._n_features`` and ``self._budget``."""

    def _check_shape(self, n_features: Any) -> tuple[int, int | None]:
        try:
            n = int(n_features)
            budget = None if self.budget is None else int(self.budget)
        except OverflowError as exc:
            raise ValueError(f"{self.name}: n_features and budget must be integers, got "
                             f"{n_features!r} and {self.budget!r}") from exc
        if not 1 <= n <= MAX_FEATURES:   # a batch's indices are int32
            raise ValueError(f"n_features must be in [1, {MAX_FEATURES}], got {n_features}")
        if self.selects:
            if budget is None or budget < 1:
                raise ValueError(f"{self.name}: budget must be an integer >= 1, got "
                                 f"{self.budget}")
        elif budget is not None and budget < 1:
            raise ValueError(f"{self.name}: budget must be >= 1 or None, got {self.budget}")
        return n, budget

    def _checked(self, n_features: Any) -> tuple[int, int | None, dict[str, Any]]:
        """Every argument checked for ``n_features`` features, nothing allocated: (d, B,
        the hyperparameters' values); ValueError naming the first bad one."""
        n, budget = self._check_shape(n_features)
        check_fits(f"{self.name} over {n:,} features",
                   type(self).memory_bytes(n_features=n, budget=budget))
        return n, budget, self._hyperparameters()

    @classmethod
    def check_arguments(cls, n_features: int, **arguments: Any) -> int:
        """The constructor's checks of ``cls(n_features=n_features, **arguments)`` without
        building it: the state's size in bytes (``memory_bytes``), or the TypeError /
        ValueError the constructor would raise. O(1): no array is allocated."""
        learner = cls(**arguments)   # n_features=None: arguments stored, nothing built
        n, budget, _ = learner._checked(n_features)
        return cls.memory_bytes(n_features=n, budget=budget)

    def _build(self, n_features: Any) -> None:
        """Check every argument for ``n_features`` features and allocate a fresh state."""
        n, budget, values = self._checked(n_features)
        before = set(vars(self))
        self._n_features, self._budget = n, budget
        self._strict = self.n_features is None   # shaped by the data: exactly its width
        for key, value in values.items():
            setattr(self, "_" + key, value)
        self._allocate()
        self.n_features_in_ = n
        self.n_examples_ = 0
        self.n_updates_ = 0
        self._built = (set(vars(self)) - before) | {"_built", "classes_", "feature_names_in_"}

    def _build_if_shaped(self) -> None:
        """Build at once when ``n_features`` is given (the constructor's last step)."""
        if self.n_features is not None:
            self._build(self.n_features)

    def _unbuild(self) -> None:
        """Forget the state and everything learned (back to the constructor's result)."""
        for key in self.__dict__.pop("_built", ()):
            self.__dict__.pop(key, None)

    def _is_built(self) -> bool:
        return "_built" in self.__dict__

    def set_params(self, **params: Any) -> OnlineLearner:
        """Set arguments (scikit-learn's ``set_params``). A built learner keeps what it has
        learned when ``n_features`` and ``budget`` stay (the other arguments are checked at
        once and apply from the next example); a new ``n_features`` or ``budget`` drops the
        state (rebuilt at once when ``n_features`` is given, else at the next fit). On a
        ValueError the arguments stay as they were."""
        old = {name: getattr(self, name) for name in self._get_param_names()}
        super().set_params(**params)
        try:
            if not self._is_built():
                self._build_if_shaped()
            elif _unchanged(old["n_features"], self.n_features) and \
                    _unchanged(old["budget"], self.budget):
                values = self._hyperparameters()
                for key, value in values.items():
                    setattr(self, "_" + key, value)
            else:
                if self.n_features is not None:
                    self._check_shape(self.n_features)
                self._hyperparameters()
                self._unbuild()
                self._build_if_shaped()
        except Exception:
            for name, value in old.items():
                setattr(self, name, value)
            raise
        return self

    # ----------------------------------------------------------------- public protocol
    def fit(self, X, y) -> OnlineLearner:
        """scikit-learn's ``fit``: forget what was learned, take the two classes of ``y``
        and make one ordered pass over ``X`` (as ``partial_fit`` from a fresh learner).
        Returns ``self``."""
        X = as_matrix_like(X)
        check_matrix_shape(X)
        classes = binary_classes(column_or_1d(y))
        self._unbuild()
        self._build_if_shaped()
        self._learn(X, y, classes, reset_names=True)
        return self

    def partial_fit(self, X, y, classes=None) -> OnlineLearner:
        """Learn from the rows of ``X`` in order (one pass). ``classes``: the two labels,
        on the first call (not needed for -1 / +1 labels, nor when the first batch holds
        both). Returns ``self``."""
        self._learn(X, y, classes, reset_names=self._first_call())
        return self

    def progressive_fit(self, X, y) -> np.ndarray:
        """Learn from ``X`` in order; return each row's score *before* it was learned."""
        return self._learn(X, y, None, reset_names=self._first_call())

    def _first_call(self) -> bool:
        """Whether nothing was learned yet (the call that records ``feature_names_in_``)."""
        return not self._is_built() or self.n_examples_ == 0

    def _learn(self, X, y, classes, *, reset_names: bool) -> np.ndarray:
        built = self._is_built()
        if not reset_names:
            check_feature_names(self, X, reset=False)
        batch = self._batch(X) if built else self._first_batch(X)
        labels, classes = self._labels(y, batch.n_rows, classes)
        if not built:
            self._build(batch.n_features)
        if classes is not None and "classes_" not in self.__dict__:
            self.classes_ = classes
        if reset_names:
            check_feature_names(self, X, reset=True)
        scores = np.empty(batch.n_rows, dtype=np.float64)
        if batch.n_rows:
            self.n_updates_ += int(self._fit_rows(batch, labels, scores))
            self.n_examples_ += batch.n_rows
        return scores

    def decision_function(self, X) -> np.ndarray:
        """Scores ``w . x`` for each row of ``X`` (float64, shape (n,)); positive for
        ``classes_[1]``. O(nnz)."""
        if not self._is_built():
            raise not_fitted(self)
        check_feature_names(self, X, reset=False)
        batch = self._batch(X)
        scores = np.empty(batch.n_rows, dtype=np.float64)
        if batch.n_rows:
            self._score_rows(batch, scores)
        return scores

    def predict(self, X) -> np.ndarray:
        """Labels in ``classes_`` (-1 / +1 as int8 for -1 / +1 labels and loaded states);
        a score of exactly 0 predicts ``classes_[1]``."""
        positive = self.decision_function(X) >= 0.0
        return self.__dict__.get("classes_", SIGNED_CLASSES)[positive.astype(np.intp)]

    def selected_features(self) -> np.ndarray:
        """Sorted indices of the non-zero weights (at most ``budget`` for selectors)."""
        return self.weights()[0]

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices int64, values float64) of the non-zero weights, sorted by index."""
        raise NotImplementedError

    @property
    def coef_(self) -> np.ndarray:
        """The weights as scikit-learn's linear classifiers hold them (what
        ``SelectFromModel`` reads): shape (1, n_features_in_), float64, zero outside the
        selected features; positive weights vote for ``classes_[1]``. Dense: O(d) memory and
        time per access (``weights()`` is the sparse form). NotFittedError before fitting."""
        if not self._is_built():
            raise not_fitted(self)
        indices, values = self.weights()
        coef = np.zeros((1, self._n_features), dtype=np.float64)
        coef[0, indices] = values
        return coef

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False   # binary
        return tags

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

    def _state_params(self) -> dict[str, Any]:
        """The checked constructor arguments (JSON-able), in the constructor's order: the
        state's ``params`` (``n_features`` as built)."""
        if not self._is_built():
            raise not_fitted(self)
        return {name: getattr(self, "_" + name) for name in self._signature_names()}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume bit-exactly, in the envelope of
        ``algorithms.states`` (kind = ``name``): params, counters and state arrays (the
        ``_sparse_arrays`` as the rows that differ from an untouched feature's)."""
        payload: dict[str, Any] = {"params": self._state_params(),
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
        absent = [key for key in ("n_features", "budget") if key not in params
                  and (key == "n_features" or cls.selects)]   # the shape: never a default
        if absent:
            raise ValueError(f"state member 'params' is invalid for {cls.name!r}: it lacks "
                             f"{', '.join(absent)}")
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
        """``X`` as a batch over the learner's features: exactly ``n_features_in_``
        columns when the learner was shaped by its data, at most ``n_features`` (or one
        1-D row) when it was given; complex numbers are refused."""
        if self._strict:
            X = as_matrix_like(X)
            check_matrix_shape(X, min_samples=0)
            batch = as_csr_batch(X)
            check_n_features(self, batch.n_features)
            return batch
        return as_csr_batch(X, self._n_features)

    def _first_batch(self, X) -> CSRBatch:
        """``X`` as a batch that shapes a learner built with ``n_features=None``."""
        X = as_matrix_like(X)
        check_matrix_shape(X, min_samples=0)
        return as_csr_batch(X)

    def _labels(self, y, n_rows: int, classes) -> tuple[np.ndarray, np.ndarray | None]:
        """(labels as -1.0 / +1.0, the classes to record): -1 / +1 labels are taken as they
        are (vectorized, no copy for float64) unless other classes were named; other labels
        map ``classes[1]`` to +1 and ``classes[0]`` to -1. ValueError (nothing recorded)
        for a label outside the classes, classes that change, or classes that cannot be
        found (one class in a first batch without ``classes=``)."""
        known = self.__dict__.get("classes_")
        if classes is not None:
            classes = binary_classes(np.asarray(classes).reshape(-1))
            if known is not None and (known.shape != classes.shape or
                                      not np.all(known == classes)):
                raise ValueError(f"classes {classes.tolist()} differ from the classes_ "
                                 f"{known.tolist()} of the earlier calls")
            known = classes
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1 and y.shape[0] > 1:
            y = column_or_1d(y)
        y = y.reshape(-1)
        if y.shape[0] != n_rows:
            raise ValueError(f"y has {y.shape[0]} labels for {n_rows} examples")
        if (known is None or _is_signed(known)) and y.dtype.kind in "iuf":
            labels = y.astype(np.float64, copy=False)
            bad = (labels != 1.0) & (labels != -1.0)
            if not bad.any():
                return labels, SIGNED_CLASSES if known is None else known
            if known is not None:
                position = int(np.argmax(bad))
                raise ValueError(f"label {float(labels[position])!r} at row {position} is "
                                 f"not -1 or +1 (the classes_ {known.tolist()})")
        if known is None:
            if n_rows == 0:
                return np.zeros(0), None
            try:
                known = binary_classes(y)
            except ValueError as exc:
                raise ValueError(f"{exc}; pass classes= (the two labels) to the first "
                                 "partial_fit") from exc
        positive, negative = y == known[1], y == known[0]
        bad = ~(positive | negative)
        if bad.any():
            position = int(np.argmax(bad))
            raise ValueError(f"label {y[position]!r} at row {position} is not one of the "
                             f"classes_ {known.tolist()}")
        return np.where(positive, 1.0, -1.0), known


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

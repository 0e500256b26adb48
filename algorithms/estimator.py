"""The estimators' base classes: scikit-learn's when it is installed, stand-ins otherwise.

scikit-learn is not a dependency of the package (the service runs without it; it is in the
``test`` and ``bench`` extras). When it can be imported, :class:`Estimator` subclasses its
``BaseEstimator`` and :class:`ClassifierMixin` / :class:`RegressorMixin` *are* its mixins,
so every model of the package is a scikit-learn estimator: ``clone``, ``Pipeline``,
``GridSearchCV``, ``cross_val_score`` and ``check_estimator`` take it as one of their own.
Without scikit-learn the same names are small stand-ins with the same ``get_params`` /
``set_params`` / ``score`` semantics, so a model behaves alike either way.

On top of scikit-learn's conventions the project keeps its own: deprecated spellings of
renamed arguments (``_renamed``) are accepted by a constructor but are not parameters
(``get_params`` leaves them out), and ``repr`` lists every parameter in the constructor's
order. The helpers below validate input the way scikit-learn's checks expect (messages
included) without needing it.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import warnings
from collections import defaultdict
from collections.abc import Callable
from types import MethodType
from typing import Any, ClassVar

import numpy as np

try:
    from sklearn.base import BaseEstimator as _Base
    from sklearn.base import ClassifierMixin, RegressorMixin
    from sklearn.exceptions import DataConversionWarning, NotFittedError

    HAVE_SKLEARN = True
except ImportError:   # the stand-ins: same names, same semantics, no scikit-learn
    HAVE_SKLEARN = False

    class NotFittedError(ValueError, AttributeError):
        """A method that needs a fitted model was called before ``fit``."""

    class DataConversionWarning(UserWarning):
        """Input was converted (a column vector ``y`` raveled)."""

    class _Base:
        """``get_params`` / ``set_params`` as scikit-learn's ``BaseEstimator`` has them:
        the constructor's keyword arguments, read back from the same-named attributes."""

        @classmethod
        def _get_param_names(cls) -> list[str]:
            init = cls.__init__
            if init is object.__init__:
                return []
            parameters = inspect.signature(init).parameters.values()
            if any(p.kind is p.VAR_POSITIONAL for p in parameters):
                raise RuntimeError(f"{cls.__name__}: estimators take keyword arguments only")
            return sorted(p.name for p in parameters
                          if p.name != "self" and p.kind is not p.VAR_KEYWORD)

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            """The constructor's arguments (``deep``: those of nested estimators too, as
            ``name__argument``)."""
            params: dict[str, Any] = {}
            for name in self._get_param_names():
                value = getattr(self, name)
                if deep and hasattr(value, "get_params") and not isinstance(value, type):
                    params.update((f"{name}__{key}", item)
                                  for key, item in value.get_params().items())
                params[name] = value
            return params

        def set_params(self, **params: Any) -> Any:
            """Set constructor arguments (``name__argument`` of nested estimators)."""
            if not params:
                return self
            valid = self.get_params(deep=True)
            nested: dict[str, dict[str, Any]] = defaultdict(dict)
            for key, value in params.items():
                name, nested_mark, rest = key.partition("__")
                if name not in valid:
                    raise ValueError(f"Invalid parameter {name!r} for estimator {self}. "
                                     f"Valid parameters are: {sorted(valid)!r}.")
                if nested_mark:
                    nested[name][rest] = value
                else:
                    setattr(self, name, value)
                    valid[name] = value
            for name, sub in nested.items():
                valid[name].set_params(**sub)
            return self

    class ClassifierMixin:
        """``score``: mean accuracy of ``predict``."""

        _estimator_type = "classifier"

        def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
            hits = np.asarray(self.predict(X) == np.asarray(y), dtype=np.float64)
            return float(np.average(hits, weights=sample_weight))

    class RegressorMixin:
        """``score``: the coefficient of determination R^2 of ``predict``."""

        _estimator_type = "regressor"

        def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
            y = np.asarray(y, dtype=np.float64)
            residual = y - np.asarray(self.predict(X), dtype=np.float64)
            weights = np.ones_like(y) if sample_weight is None else \
                np.asarray(sample_weight, dtype=np.float64)
            mean = np.average(y, weights=weights)
            total = float(weights @ (y - mean) ** 2)
            error = float(weights @ residual ** 2)
            if total == 0.0:
                return 1.0 if error == 0.0 else 0.0
            return 1.0 - error / total


class Estimator(_Base):
    """Base of every model: scikit-learn's ``BaseEstimator`` (or its stand-in), whose
    parameters leave out the deprecated spellings ``_renamed`` (old name -> new)."""

    _renamed: ClassVar[dict[str, str]] = {}

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return [name for name in super()._get_param_names() if name not in cls._renamed]

    def set_params(self, **params: Any) -> Any:
        """scikit-learn's ``set_params``; the deprecated spellings are taken as the
        constructor takes them (a DeprecationWarning, the value set under the new name)."""
        return super().set_params(**self._current_names(params))

    @classmethod
    def _current_names(cls, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with deprecated spellings renamed (DeprecationWarning); a TypeError
        when a parameter is given under both names with different values."""
        out = {key: value for key, value in params.items() if key not in cls._renamed}
        for old, value in params.items():
            if old not in cls._renamed:
                continue
            new = cls._renamed[old]
            warnings.warn(f"{cls.__name__}: {old}= is deprecated, use {new}=",
                          DeprecationWarning, stacklevel=3)
            if new in out and out[new] is not value:
                raise TypeError(f"{cls.__name__}: give {new}= or its deprecated spelling "
                                f"{old}=, not both")
            out[new] = value
        return out

    @classmethod
    def _signature_names(cls) -> list[str]:
        """The parameters in the constructor's order (``repr``, stored states)."""
        names = cls._get_param_names()
        order = list(inspect.signature(cls.__init__).parameters)
        return sorted(names, key=order.index)

    def __repr__(self) -> str:
        params = self.get_params(deep=False)
        names = self._signature_names()
        names += [name for name in params if name not in names]   # RelaxedNVSD's NVSD ones
        args = ", ".join(f"{name}={params[name]!r}" for name in names)
        return f"{type(self).__name__}({args})"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True    # scipy sparse (and CSRBatch) input is taken
        return tags


class available_if:   # noqa: N801 (used as a decorator, as scikit-learn's of that name)
    """Decorator: the method exists only on a model for which ``check(model)`` is true
    (``hasattr`` is False otherwise): ``predict_proba`` of a model that has probabilities
    for its present parameters only."""

    def __init__(self, check: Callable[[Any], bool]) -> None:
        self.check = check

    def __call__(self, method: Callable) -> available_if:
        self.method = method
        functools.update_wrapper(self, method)
        return self

    def __get__(self, model: Any, owner: type | None = None) -> Any:
        if model is None:
            return self.method
        if not self.check(model):
            raise AttributeError(f"this {type(model).__name__} has no "
                                 f"{self.method.__name__} for its parameters")
        return MethodType(self.method, model)


def sklearn_tags_as(tags: Any, kind: str) -> Any:
    """scikit-learn ``tags`` of a model that is a ``kind`` ("classifier" or "regressor")
    for its present parameters (GBFS's loss, PerSetChoice's task)."""
    from sklearn.utils import ClassifierTags, RegressorTags

    tags.estimator_type = kind
    tags.classifier_tags = ClassifierTags(multi_class=False) if kind == "classifier" else None
    tags.regressor_tags = RegressorTags() if kind == "regressor" else None
    return tags


# ------------------------------------------------------------------------- input checks
def not_fitted(model: Any) -> NotFittedError:
    """The error of a method called before ``fit``."""
    return NotFittedError(f"This {type(model).__name__} instance is not fitted yet. Call "
                          "'fit' with appropriate arguments before using this estimator.")


def check_matrix_shape(X: Any, *, min_samples: int = 1) -> None:
    """ValueError for complex numbers, a 1-D array, and a matrix without columns or with
    fewer than ``min_samples`` rows (scikit-learn's messages). Reads only ``X``'s dtype and
    shape, where it has them (scipy sparse and CSRBatch are 2-D)."""
    dtype = getattr(X, "dtype", None)
    shape = getattr(X, "shape", None)
    if dtype is None or shape is None:
        return
    if np.dtype(dtype).kind == "c":
        raise ValueError("Complex data not supported")
    if len(shape) == 1:
        raise ValueError(f"Expected 2D array, got 1D array instead: shape {shape}. Reshape "
                         "your data using array.reshape(-1, 1) if it holds a single "
                         "feature or array.reshape(1, -1) if it holds a single sample.")
    if len(shape) == 2:
        if shape[0] < min_samples:
            raise ValueError(f"Found array with {shape[0]} sample(s) (shape={tuple(shape)}) "
                             f"while a minimum of {min_samples} is required.")
        if shape[1] == 0:
            raise ValueError(f"Found array with 0 feature(s) (shape={tuple(shape)}) while a "
                             "minimum of 1 is required.")


def as_matrix_like(X: Any) -> Any:
    """``X`` unchanged when it is an array, scipy sparse or CSRBatch; a list (of lists) as
    an array, so that its shape can be checked."""
    if hasattr(X, "shape") and hasattr(X, "dtype"):
        return X
    if isinstance(X, (list, tuple)):
        return np.asarray(X)
    return X


def check_n_features(model: Any, width: int) -> None:
    """ValueError unless ``width`` is the model's ``n_features_in_`` (scikit-learn's
    message)."""
    expected = model.n_features_in_
    if width != expected:
        raise ValueError(f"X has {width} features, but {type(model).__name__} is expecting "
                         f"{expected} features as input.")


def column_or_1d(y: Any, n: int | None = None, *, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D array: a column vector ``(n, 1)`` is raveled with a
    DataConversionWarning (scikit-learn's behaviour); None, other 2-D shapes and a wrong
    length are a ValueError."""
    if y is None:
        raise ValueError(f"requires y to be passed, but the target {name} is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(DataConversionWarning(
            f"A column-vector {name} was passed when a 1d array was expected. Please "
            f"change the shape of {name} to (n_samples,), for example using ravel()."),
            stacklevel=3)
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"{name} should be a 1d array, got an array of shape {y.shape} "
                         "instead.")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"X has {n} rows but {name} has {y.shape[0]} values")
    return y


def label_array(y: np.ndarray) -> np.ndarray:
    """Labels ``y`` with a dtype of numbers, booleans or strings (an object array of
    strings or of numbers converted); ValueError ("Unknown label type") otherwise."""
    if y.dtype.kind == "O":
        kinds = {type(v) for v in y.tolist()}
        if all(issubclass(k, (str, np.str_)) for k in kinds):
            y = y.astype(str)
        elif all(issubclass(k, (numbers.Real, np.bool_)) for k in kinds):
            y = y.astype(np.float64)
        else:
            raise ValueError(f"Unknown label type: labels of types "
                             f"{sorted(k.__name__ for k in kinds)}")
    if y.dtype.kind not in "biufUS":
        raise ValueError(f"Unknown label type: labels of dtype {y.dtype}")
    return y


def binary_classes(y: np.ndarray, what: str = "a classifier") -> np.ndarray:
    """The two sorted classes of the labels ``y`` (numbers, strings or booleans); a
    ValueError naming the problem otherwise (``what`` needs them): continuous targets
    (floats that are not whole numbers: scikit-learn's "Unknown label type"), NaN, one
    class, more than two."""
    classes = label_classes(y, what)
    if classes.size != 2:
        raise ValueError(f"Only binary classification is supported: {what} needs 2 "
                         f"classes, got {classes.size} classes")
    return classes


def label_classes(y: np.ndarray, what: str = "a classifier") -> np.ndarray:
    """The sorted classes (at least two) of the labels ``y``, checked as by
    :func:`binary_classes` but for any number of classes. O(n log n)."""
    y = label_array(y)
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
        if np.any(y != np.round(y)):
            raise ValueError("Unknown label type: continuous. A classifier needs class "
                             "labels, not real-valued targets.")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"{what} needs 2 classes, got {classes.size} class "
                         f"({classes.tolist()})")
    return classes


__all__ = ["HAVE_SKLEARN", "ClassifierMixin", "DataConversionWarning", "Estimator",
           "NotFittedError", "RegressorMixin", "as_matrix_like", "available_if",
           "binary_classes", "label_array", "label_classes",
           "check_matrix_shape", "check_n_features", "column_or_1d", "not_fitted",
           "sklearn_tags_as"]

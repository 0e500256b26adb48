"""The batch models' protocol (scikit-learn's) and the deprecated spellings it replaced.

``AnytimeLinearModel``, ``GBFS``, ``NVSD``, ``RelaxedNVSD`` and ``PerSetChoice`` subclass
:class:`BatchModel`, a scikit-learn estimator when scikit-learn is installed
(``algorithms.estimator``: ``BaseEstimator`` with ``RegressorMixin`` or ``ClassifierMixin``,
``clone``, ``score``, ``n_features_in_``; stand-ins with the same semantics otherwise):

- ``__init__`` stores its keyword arguments as attributes and checks nothing; every one
  has a default; ``fit`` checks them (:meth:`BatchModel.check_params`, callable on its
  own: the service does so when a model is created) and learns; ``get_params()`` returns
  them, so ``type(m)(**m.get_params())`` is an unfitted copy.
- What a caller has computed is ``computed_groups``, ids of the model's feature groups
  (``groups`` of the anytime model, ``feature_groups`` of GBFS, ``groups`` of a
  group-lasso NVSD; without groups, group ``f`` is feature ``f``): ``predict(X,
  computed_groups=S)`` predicts with what ``S`` yields, ``next_group(S)`` is the group to
  compute next (None when computing more would not change the prediction).
- ``selected_features()``: sorted indices of the features the fitted model uses.
- ``state_dict()`` / ``from_state_dict()`` / ``to_bytes()`` / ``from_bytes()`` in the one
  envelope of ``algorithms.states``.

The online learners (``algorithms.online``) follow the same conventions with one
exception: given ``n_features``, their constructor checks its arguments and allocates the
state (at most ``memory_bytes`` bytes) at once, because the state *is* the model, updated
in place from the first ``partial_fit``; without it, at the first ``fit`` /
``partial_fit``.

Renamed arguments keep their old spelling as a deprecated alias (a DeprecationWarning, the
value taken under the new name, a TypeError when both are given with different values); a
deprecated constructor argument defaults to None (not given) and is not a parameter
(``get_params`` leaves it out). ``canonical_params`` renames old spellings silently (for
stored configurations, e.g. the service's specs).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from algorithms.estimator import Estimator, check_matrix_shape
from algorithms.serialization import dumps_state, loads_state
from algorithms.sparse import CSRBatch


class _Deprecated:
    """Default of a deprecated alias: tells "not given" from every value."""

    def __repr__(self) -> str:
        return "<deprecated>"


DEPRECATED: Any = _Deprecated()

COST_RTOL = 1e-12  # a cost within this relative slack of a cap is within the cap


def cost_slack(max_cost: float) -> float:
    """The slack a cost cap ``max_cost`` allows: ``COST_RTOL · max(|max_cost|, 1)``, so that
    a set whose summed costs round past the cap in the last bits still fits. O(1)."""
    return COST_RTOL * max(abs(float(max_cost)), 1.0)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


def deprecated_alias(owner: str, old: str, new: str, old_value: Any, new_value: Any,
                     new_default: Any = None, *, note: str = "", stacklevel: int = 3) -> Any:
    """The value of argument ``new`` when the caller may have used its old spelling
    ``old``: ``new_value`` if ``old_value`` is :data:`DEPRECATED` (not given), else
    ``old_value`` with a DeprecationWarning (``note`` appended); a TypeError when both were
    given (``new_value`` other than ``new_default``) with different values."""
    if old_value is DEPRECATED:
        return new_value
    if not _same(new_value, new_default) and not _same(new_value, old_value):
        raise TypeError(f"{owner}: give {new}= or its deprecated spelling {old}=, not both")
    warnings.warn(f"{owner}: {old}= is deprecated, use {new}={note}", DeprecationWarning,
                  stacklevel=stacklevel)
    return old_value


def canonical_params(cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with the deprecated spellings of ``cls``'s arguments renamed (no
    warning); a TypeError when a parameter is given under both names."""
    names = getattr(cls, "_renamed", {})
    out: dict[str, Any] = {}
    for key, value in params.items():
        new = names.get(key, key)
        if new in out:
            raise TypeError(f"{cls.__name__}: give {new}= or its deprecated spelling "
                            f"{key}=, not both")
        out[new] = value
    return out


def as_dense(X: Any, *, allow_nan: bool = False, min_samples: int = 0) -> np.ndarray:
    """``X`` (dense array-like, scipy sparse or :class:`CSRBatch`) as a new-or-same
    C-ordered float64 2-D array with at least ``min_samples`` rows and one column, checked
    finite (``allow_nan``: NaN, a missing value, is accepted, infinities are not) and not
    complex; ValueError otherwise (TypeError for what is not a matrix at all)."""
    if isinstance(X, CSRBatch):
        X = X.to_scipy()
    if sp.issparse(X):
        check_matrix_shape(X, min_samples=min_samples)
        X = X.toarray()
    try:
        if not hasattr(X, "dtype"):
            X = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"X must be a numeric matrix (array, scipy sparse or CSRBatch), "
                        f"got {type(X).__name__}: {exc}") from exc
    check_matrix_shape(X, min_samples=min_samples)
    try:
        X = np.ascontiguousarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"X must be a numeric matrix (array, scipy sparse or CSRBatch), "
                        f"got {type(X).__name__}: {exc}") from exc
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if allow_nan:
        if np.any(np.isinf(X)):
            raise ValueError("X contains infinite values")
    elif not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values")
    return X


class BatchModel(Estimator):
    """Base class of the batch models: the protocol above. Subclasses set ``kind`` (their
    state's kind, see ``algorithms.states``), ``format_version`` and ``_renamed`` (old
    spelling -> argument), put ``RegressorMixin`` or ``ClassifierMixin`` first among their
    bases, and implement ``check_params``, ``fit``, ``predict``, ``next_group``,
    ``selected_features``, ``state_dict`` and ``from_state_dict``."""

    kind: ClassVar[str] = ""
    format_version: ClassVar[int] = 1
    allow_nan: ClassVar[bool] = False  # NaN in X is a missing value (else it is refused)
    _renamed: ClassVar[dict[str, str]] = {}              # old argument -> argument
    _renamed_attributes: ClassVar[dict[str, str]] = {}   # old fitted attribute -> attribute

    def __getattr__(self, name: str) -> Any:
        """The deprecated names of renamed arguments and fitted attributes, read-only."""
        cls = type(self)
        new = None if name.startswith("__") else (
            cls._renamed.get(name) or cls._renamed_attributes.get(name))
        if new is None:
            raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
        warnings.warn(f"{cls.__name__}.{name} is deprecated, use .{new}", DeprecationWarning,
                      stacklevel=2)
        return getattr(self, new)

    def check_params(self, n_features: int) -> None:
        """ValueError / TypeError naming the first parameter ``fit`` would refuse for data
        of ``n_features`` columns."""
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        """:meth:`state_dict` in the safe archive format (``algorithms.serialization``)."""
        return dumps_state(self.state_dict())

    @classmethod
    def from_bytes(cls, data: bytes, *, max_bytes: int = 1 << 34):
        """Inverse of :meth:`to_bytes`; ValueError on a malformed or foreign state."""
        return cls.from_state_dict(loads_state(data, max_bytes=max_bytes))


__all__ = ["DEPRECATED", "BatchModel", "as_dense", "canonical_params", "deprecated_alias"]

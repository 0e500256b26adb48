"""Column names of a data frame as scikit-learn's ``feature_names_in_``, set at ``fit`` and
checked at every later call with scikit-learn's own messages (its
``check_dataframe_column_names_consistency`` holds), without needing scikit-learn.

A data frame is anything 2-D with ``columns`` (pandas, polars); its names count only when
every one is a string, as in scikit-learn. Arrays, scipy sparse matrices and CSRBatch carry
no names. Each call is O(1) for unnamed input and O(d) for a data frame.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def names_of(X: Any) -> np.ndarray | None:
    """The column names of ``X`` (object array) when it is a data frame whose columns are
    all strings; None otherwise. TypeError for string and non-string names mixed."""
    if isinstance(X, np.ndarray) or not hasattr(X, "shape"):
        return None
    columns = getattr(X, "columns", None)
    if columns is None or callable(columns):
        return None
    names = np.asarray(list(columns), dtype=object)
    if names.size == 0:
        return None
    kinds = {type(name) for name in names.tolist()}
    if all(issubclass(kind, str) for kind in kinds):
        return names
    if any(issubclass(kind, str) for kind in kinds):
        raise TypeError("Feature names are only supported if all input features have string "
                        f"names, but your input has {sorted(k.__qualname__ for k in kinds)} "
                        "as feature name / column name types. Convert them all to strings "
                        "(X.columns = X.columns.astype(str)) or none of them.")
    return None


def _listed(names: list[str]) -> str:
    shown = [f"- {name}\n" for name in names[:5]]
    return "".join(shown) + ("- ...\n" if len(names) > 5 else "")


def check_feature_names(model: Any, X: Any, *, reset: bool) -> None:
    """``reset``: record ``X``'s names as ``model.feature_names_in_`` (or forget the
    attribute when ``X`` has none). Otherwise compare them with the recorded ones: a
    ValueError naming the unseen, missing or reordered names; a UserWarning when only one
    side has names (scikit-learn's wording)."""
    names = names_of(X)
    if reset:
        if names is not None:
            model.feature_names_in_ = names
        else:
            model.__dict__.pop("feature_names_in_", None)
        return
    fitted = model.__dict__.get("feature_names_in_")
    kind = type(model).__name__
    if names is None or fitted is None:
        if names is not None:
            warnings.warn(f"X has feature names, but {kind} was fitted without feature names",
                          UserWarning, stacklevel=3)
        elif fitted is not None:
            warnings.warn(f"X does not have valid feature names, but {kind} was fitted with "
                          "feature names", UserWarning, stacklevel=3)
        return
    if len(names) == len(fitted) and bool(np.all(names == fitted)):
        return
    unseen = sorted(set(names.tolist()) - set(fitted.tolist()))
    missing = sorted(set(fitted.tolist()) - set(names.tolist()))
    message = "The feature names should match those that were passed during fit.\n"
    if unseen:
        message += "Feature names unseen at fit time:\n" + _listed(unseen)
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + _listed(missing)
    if not unseen and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"
    raise ValueError(message)


__all__ = ["check_feature_names", "names_of"]

"""Checked reads from a loaded state: a clear ``ValueError`` rather than a wrong model."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def get_array(state: dict[str, Any], key: str, shape: tuple[int | None, ...] | None = None,
              kinds: str = "f") -> np.ndarray:
    """``state[key]`` as an array whose dtype kind is in ``kinds`` and whose shape matches
    ``shape`` (``None`` entries match any length); float arrays must be finite. O(size)."""
    if key not in state:
        raise ValueError(f"state has no {key!r}")
    value = state[key]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
        raise ValueError(f"state {key!r} must be an array of dtype kind {kinds!r}")
    if shape is not None and (value.ndim != len(shape) or any(
            want not in (None, got) for want, got in zip(shape, value.shape, strict=True))):
        raise ValueError(f"state {key!r} has shape {value.shape}, expected {shape}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise ValueError(f"state {key!r} has non-finite values")
    return value


def get_number(state: dict[str, Any], key: str, *, integer: bool = False) -> Any:
    """``state[key]`` as a finite float (an int when ``integer``)."""
    value = state.get(key)
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kinds) \
            or not math.isfinite(value):
        raise ValueError(f"state {key!r} must be a finite {'integer' if integer else 'number'},"
                         f" got {value!r}")
    return int(value) if integer else float(value)


def sub_state(state: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The entries under ``prefix`` with the prefix removed."""
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}

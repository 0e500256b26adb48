"""What a version must satisfy before it is stored or served: the checks every route, the
sequence page and the warm-up rely on, run on a candidate so that a version that passes
answers every route with finite numbers.

- :func:`check_json_values`: ``meta`` holds JSON values only (finite numbers, bounded
  depth and size), so ``/versions`` and ``GET /v1/models/{m}`` can always answer it;
- :func:`check_curves`: a sequence row's figures, one finite number per prefix;
- :func:`bounded_linear`: linear scores that no request can make overflow;
- :func:`probe_rows`: the rows a candidate is probed on (``service.batch.serving.candidate``).

The family's own ranges (coefficients, kernel parameters, leaf values) are its adapter's
``check_artifact``; :func:`service.batch.serving.candidate.candidate` runs them all.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from algorithms.sparse._validate import MAX_ABS_VALUE

PROBE_ROWS = 16
MAX_META_ITEMS = 1 << 20
MAX_META_DEPTH = 16
MAX_ABS_INPUT = MAX_ABS_VALUE  # the largest |x| (and |y|) an example may carry


def check_json_values(value: Any, where: str = "meta") -> None:
    """ValueError unless ``value`` is made of dicts with string keys, lists, strings, bools,
    None and finite numbers, at most ``MAX_META_DEPTH`` deep and ``MAX_META_ITEMS`` items.
    O(items)."""
    stack = [(value, where, 0)]
    items = 0
    while stack:
        node, path, depth = stack.pop()
        items += 1
        if items > MAX_META_ITEMS or depth > MAX_META_DEPTH:
            raise ValueError(f"{where} is too large or too deeply nested")
        if node is None or isinstance(node, bool | str):
            continue
        if isinstance(node, int):
            if abs(node) >= 1 << 63:
                raise ValueError(f"{path} is an integer out of range")
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                raise ValueError(f"{path} must be finite, got {node!r}")
            continue
        if isinstance(node, dict):
            for key, child in node.items():
                if not isinstance(key, str):
                    raise ValueError(f"{path} has a key that is not a string")
                stack.append((child, f"{path}.{key}", depth + 1))
            continue
        if isinstance(node, list):
            stack.extend((child, f"{path}[{k}]", depth + 1) for k, child in enumerate(node))
            continue
        raise ValueError(f"{path} is not a JSON value ({type(node).__name__})")


def check_curves(curves: Any, names, length: int, where: str, *,
                 optional: bool = False) -> None:
    """ValueError unless ``curves`` maps each of ``names`` to ``length`` finite numbers
    (None allowed when ``optional``)."""
    if curves is None and optional:
        return
    if not isinstance(curves, dict):
        raise ValueError(f"{where} must be an object of curves")
    for name in names:
        check_numbers(curves.get(name), length, f"{where}.{name}")


def check_numbers(values: Any, length: int, where: str, *, optional: bool = False) -> None:
    """ValueError unless ``values`` is a list of ``length`` finite numbers (or None when
    ``optional``)."""
    if values is None and optional:
        return
    if not isinstance(values, list) or len(values) != length or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in values):
        raise ValueError(f"{where} must be {length} finite numbers")


def check_names(values: Any, layout, where: str, *, length: int | None = None) -> list[int]:
    """The group ids of ``values``, a list of distinct group names of ``layout`` (of
    ``length`` names when given); ValueError otherwise."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values) or \
            len(set(values)) != len(values) or \
            any(v not in layout.group_index for v in values) or \
            (length is not None and len(values) != length):
        raise ValueError(f"{where} must be distinct group names of this model")
    return [layout.group_index[v] for v in values]


def bounded_linear(coef: np.ndarray, intercept: np.ndarray, where: str) -> None:
    """ValueError unless every row's ``Σ|coef|·2^50 + |intercept|`` (the largest score a
    request can reach) is finite and below 1e300. O(size)."""
    reach = np.abs(np.atleast_2d(coef)).sum(axis=1) * MAX_ABS_INPUT + \
        np.abs(np.atleast_1d(intercept))
    if not np.all(np.isfinite(reach)) or np.any(reach > 1e300):
        raise ValueError(f"{where}: coefficients out of range (a request's score would "
                         "overflow)")


def finite_tree(value: Any, where: str) -> None:
    """ValueError naming the first non-finite number in an answer."""
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int | float | np.floating | np.integer):
        if not math.isfinite(float(value)):
            raise ValueError(f"{where} is {value!r}")
        return
    if isinstance(value, dict):
        for key, child in value.items():
            finite_tree(child, f"{where}.{key}")
        return
    if isinstance(value, list | tuple):
        for k, child in enumerate(value):
            finite_tree(child, f"{where}[{k}]")
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ValueError(f"{where} holds non-finite numbers")
        return


def probe_rows(artifact, *extra: np.ndarray) -> np.ndarray:
    """Dense probe rows: zeros, the version's held-out rows (at most ``PROBE_ROWS``) and
    ``extra`` rows, as float64 (n, D)."""
    D = artifact.layout.n_features
    parts = [np.zeros((1, D))]
    if artifact.held_out is not None:
        parts.append(np.asarray(artifact.held_out[0][:PROBE_ROWS], dtype=np.float64))
    parts += [np.atleast_2d(np.asarray(e, dtype=np.float64))[:PROBE_ROWS] for e in extra]
    return np.vstack([p for p in parts if p.size and p.shape[1] == D] or [np.zeros((1, D))])

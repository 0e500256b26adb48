"""Examples from arrays and frames: numpy arrays, pandas DataFrames and scipy sparse
matrices (or rows) as the service's JSON examples.

Nothing here imports numpy, pandas or scipy: an object is recognised by the package of its
type and read through its own methods (``tolist``, ``tocsr``, ``itertuples``), so the
client runs where none of them is installed. What :func:`as_examples` takes:

- a list of dicts, sent as given (numpy scalars and arrays in them become JSON numbers and
  lists when the body is written);
- a 2-D numpy array, or a list of 1-D arrays or of lists of numbers: one example per row,
  ``indices`` the columns of its entries that are not NaN (NaN is a missing value: a batch
  model's group with no value present is not computed);
- a scipy sparse matrix or array, or a list of sparse rows: one example per row, its stored
  entries;
- a pandas DataFrame (or a Series, one example): one example per row, NaN left out.
  Integer column labels are indices; two-level columns are (group or namespace, feature)
  names; other names are a batch model's features, placed in their groups by
  ``feature_groups`` (``{feature: group}``; see :func:`needs_groups`).

Time O(rows × columns) for dense input, O(stored entries) for sparse input.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

Example = dict[str, Any]


def _package(obj: Any) -> str:
    return type(obj).__module__.partition(".")[0]


def _is_frame(obj: Any) -> bool:
    return _package(obj) == "pandas" and hasattr(obj, "columns")


def _is_series(obj: Any) -> bool:
    return _package(obj) == "pandas" and hasattr(obj, "index") and not hasattr(obj, "columns")


def _is_sparse(obj: Any) -> bool:
    return _package(obj) == "scipy" and hasattr(obj, "tocsr")


def _is_array(obj: Any) -> bool:
    return _package(obj) == "numpy" and hasattr(obj, "ndim") and hasattr(obj, "tolist")


def _is_int(label: Any) -> bool:
    if isinstance(label, bool | float | str):
        return False
    try:
        operator.index(label)
    except TypeError:
        return False
    return True


def _labels(obj: Any) -> list[Any]:
    return list(obj.columns if hasattr(obj, "columns") else obj.index)


def needs_groups(examples: Any) -> bool:
    """Whether :func:`as_examples` needs the model's ``{feature: group}`` for
    ``examples``: a DataFrame or Series labelled by plain names (not integers, not
    (group, feature) pairs). O(columns)."""
    if not (_is_frame(examples) or _is_series(examples)):
        return False
    index = examples.columns if hasattr(examples, "columns") else examples.index
    return getattr(index, "nlevels", 1) == 1 and not all(_is_int(c) for c in _labels(examples))


def as_examples(examples: Any, *,
                feature_groups: dict[str, str] | None = None) -> list[Example]:
    """``examples`` in any form of the module docstring as a list of JSON examples.
    ValueError / TypeError naming what cannot be read."""
    if isinstance(examples, dict):
        raise TypeError("examples is a list of examples: give one example as [example]")
    if _is_frame(examples):
        return _named_rows(_labels(examples), examples.columns,
                           examples.itertuples(index=False, name=None), feature_groups)
    if _is_series(examples):
        return _named_rows(_labels(examples), examples.index, [examples.tolist()],
                           feature_groups)
    if _is_sparse(examples):
        return _sparse_rows(examples)
    if _is_array(examples):
        if examples.ndim != 2:
            raise ValueError(f"a numpy array of examples has one row per example (2-D); this "
                             f"one has {examples.ndim} dimension(s) (x.reshape(1, -1) is one "
                             "example)")
        return [_dense(row) for row in examples.tolist()]
    out: list[Example] = []
    for k, item in enumerate(examples):
        if isinstance(item, dict):
            out.append(item)
        elif _is_sparse(item):
            out.extend(_sparse_rows(item))
        elif _is_array(item) and item.ndim == 1:
            out.append(_dense(item.tolist()))
        elif isinstance(item, list | tuple):
            out.append(_dense(item))
        else:
            raise TypeError(f"example {k}: a dict, a 1-D numpy array, a list of numbers or "
                            f"a sparse row, not {type(item).__name__}")
    return out


def _present(value: Any) -> bool:
    return value is not None and value == value  # NaN != NaN


def _dense(row: Sequence[Any], columns: Sequence[int] | None = None) -> Example:
    """A dense row (NaN and None left out) as indices and values."""
    columns = range(len(row)) if columns is None else columns
    kept = [(j, float(v)) for j, v in zip(columns, row, strict=True) if _present(v)]
    return {"indices": [j for j, _ in kept], "values": [v for _, v in kept]}


def _sparse_rows(matrix: Any) -> list[Example]:
    """A scipy sparse matrix's rows as indices and values (duplicates summed, sorted)."""
    csr = matrix.tocsr(copy=True)
    if not getattr(csr, "has_canonical_format", True):
        csr.sum_duplicates()
    indptr, indices, data = csr.indptr.tolist(), csr.indices.tolist(), csr.data.tolist()
    return [{"indices": indices[a:b], "values": data[a:b]}
            for a, b in zip(indptr, indptr[1:], strict=False)]


def _named_rows(labels: list[Any], index: Any, rows: Iterable[Sequence[Any]],
                feature_groups: dict[str, str] | None) -> list[Example]:
    """Rows of a frame whose columns are ``labels`` (``index``: the pandas index)."""
    levels = getattr(index, "nlevels", 1)
    if levels > 2:
        raise ValueError(f"columns with {levels} levels: give integer columns (indices), "
                         "(group, feature) pairs or feature names")
    if levels == 1 and all(_is_int(c) for c in labels):
        columns = [operator.index(c) for c in labels]
        return [_dense(row, columns) for row in rows]
    pairs = labels if levels == 2 else [_group_of(c, feature_groups) for c in labels]
    out = []
    for row in rows:
        features: dict[str, dict[str, float]] = {}
        for (group, feature), value in zip(pairs, row, strict=True):
            if _present(value):
                features.setdefault(str(group), {})[str(feature)] = float(value)
        out.append({"features": features})
    return out


def _group_of(column: Any, feature_groups: dict[str, str] | None) -> tuple[str, str]:
    if feature_groups is None:
        raise ValueError(f"column {column!r}: named columns are a batch model's features "
                         "(or use (namespace, name) column pairs, or integer columns)")
    group = feature_groups.get(str(column))
    if group is None:
        known = ", ".join(sorted(feature_groups)[:20])
        raise ValueError(f"column {column!r} is no feature of the model (its features: "
                         f"{known})")
    return group, str(column)


def with_outcomes(examples: list[Example], labels: Any = None,
                  targets: Any = None) -> list[Example]:
    """``examples`` with ``label`` (or ``target``) set from ``labels`` (``targets``), a
    sequence, numpy array or pandas Series as long as ``examples``. O(n)."""
    if labels is None and targets is None:
        return examples
    if labels is not None and targets is not None:
        raise TypeError("give labels (classification) or targets (regression), not both")
    key, values = ("label", labels) if labels is not None else ("target", targets)
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    if len(values) != len(examples):
        raise ValueError(f"{len(examples)} examples and {len(values)} {key}s")
    return [{**example, key: value} for example, value in zip(examples, values, strict=True)]

"""The classes of a multi-class batch model (``params.classes``).

A classification model created with ``params.classes`` (a gbfs model) has K >= 3 classes:
a list of distinct labels, all strings or all integers, or an integer K meaning the labels
0..K-1. Without it a classification model is binary (labels -1/+1 or 0/1), as before.

Where labels travel:

* a JSON example's ``label`` is one of the classes (the string or the integer itself; a
  number with no fraction matches the integer class of that value);
* the numeric wire formats (libsvm text, FBX1 bodies, entries XADDed to a model's log) and
  everything the service keeps (the log, the fold's windows, a version's held-out rows)
  carry the class's **index** in ``params.classes`` as a float64 target (with the classes
  0..K-1 index and label are the same number).

Every check is O(1) per label; a bad label is a 422 naming the example and the label.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from service.errors import item_error

MAX_CLASSES = 256
MAX_LABEL_CHARS = 200
_MAX_INT = 1 << 53


class Classes:
    """K class labels (strings or integers) and their indices."""

    def __init__(self, values: list) -> None:
        self.values = list(values)
        self.strings = isinstance(self.values[0], str)
        self.index = {v: k for k, v in enumerate(self.values)}

    def __len__(self) -> int:
        return len(self.values)

    @cached_property
    def listed(self) -> str:
        shown = self.values if len(self) <= 12 else [*self.values[:12], "..."]
        return repr(shown)

    def index_of(self, label, item: int, field: str = "label") -> float:
        """The float index of a JSON label; 422 naming ``item`` and the label."""
        if isinstance(label, bool) or not isinstance(label, str | int | float):
            raise item_error(f"label {label!r} must be one of this model's classes "
                             f"{self.listed}", item=item, field=field)
        if isinstance(label, float) and label.is_integer() and abs(label) < _MAX_INT:
            label = int(label)
        k = self.index.get(label)
        if k is None:
            kind = "strings" if self.strings else "integers"
            mixed = isinstance(label, str) != self.strings
            why = f" (this model's classes are {kind})" if mixed else ""
            raise item_error(f"label {label!r} is not one of this model's classes "
                             f"{self.listed}{why}", item=item, field=field)
        return float(k)

    def check_indices(self, targets: np.ndarray, where=lambda row: {"item": row}) -> None:
        """422 unless every target of a numeric format is a class index 0..K-1 (the
        first bad one named: ``where(row)``, its item or line). O(n)."""
        y = np.asarray(targets, dtype=np.float64)
        bad = np.flatnonzero(~((y >= 0) & (y < len(self)) & (y == np.floor(y))))
        if len(bad):
            raise item_error(f"label {y[bad[0]].item()!r} is not a class index 0..{len(self) - 1}"
                             f" (numeric formats carry the index of the label in "
                             f"params.classes {self.listed})", field="label",
                             **where(int(bad[0])))

    def indices_ok(self, targets: np.ndarray) -> bool:
        """Whether every target is a class index (the fold's fast path)."""
        y = np.asarray(targets, dtype=np.float64)
        return bool(np.all((y >= 0) & (y < len(self)) & (y == np.floor(y))))

    def labels(self, indices) -> list:
        """The user's labels of class indices."""
        return [self.values[int(k)] for k in indices]


def parse_classes(raw) -> Classes:
    """``params.classes``: an integer K >= 3 (the classes 0..K-1) or a list of K >= 3
    distinct labels, all strings (1..200 characters) or all integers (|v| < 2^53), at
    most 256; 422 naming the problem."""
    field = "params.classes"
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 3 <= raw <= MAX_CLASSES:
            raise item_error(f"must be a number of classes in [3, {MAX_CLASSES}] (two "
                             "classes: a binary model, labels -1/+1 or 0/1, without "
                             "params.classes)", field=field)
        return Classes(list(range(raw)))
    if not isinstance(raw, list) or not 3 <= len(raw) <= MAX_CLASSES:
        raise item_error(f"must be a list of 3 to {MAX_CLASSES} class labels (strings or "
                         "integers) or their number; two classes: a binary model, labels "
                         "-1/+1 or 0/1, without params.classes", field=field)
    if all(isinstance(v, str) for v in raw):
        bad = [v for v in raw if not 1 <= len(v) <= MAX_LABEL_CHARS]
        if bad:
            raise item_error(f"label {bad[0]!r} must have 1 to {MAX_LABEL_CHARS} characters",
                             field=field)
    elif not all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < _MAX_INT
                 for v in raw):
        raise item_error("labels must be all strings or all integers (|v| < 2^53), not "
                         "mixed", field=field)
    if len(set(raw)) != len(raw):
        seen: set = set()
        duplicate = next(v for v in raw if v in seen or seen.add(v))
        raise item_error(f"label {duplicate!r} is listed twice", field=field)
    return Classes(raw)


def classes_of(spec) -> Classes | None:
    """The classes of a stored (already checked) batch spec, or None (not multi-class)."""
    params = getattr(spec, "params", None) or {}
    raw = params.get("classes")
    if raw is None or getattr(spec, "task", None) != "classification":
        return None
    return parse_classes(raw)


__all__ = ["MAX_CLASSES", "Classes", "classes_of", "parse_classes"]

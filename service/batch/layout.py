"""A batch spec's feature layout and the service's parameters of a batch model.

A batch model's features are those of its groups, concatenated in the order given: group
``g`` holds the indices ``offsets[g] .. offsets[g + 1] - 1``. Building a layout is
O(D); every lookup after is O(1) or O(size of the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from service.batch.classes import classes_of
from service.errors import item_error


@dataclass(frozen=True)
class Window:
    """The bounded training window of gbfs / nvsd: the newest ``size`` examples, or a
    uniform reservoir of ``size`` over everything folded (seeded, see fold_state)."""

    kind: str
    size: int
    seed: int


@dataclass(frozen=True)
class BatchParams:
    validation_fraction: float
    retrain_every_examples: int | None
    retrain_every_seconds: float | None
    window: Window | None
    estimator: str | None  # nvsd: "relaxed" (default) or "plain"
    algorithm: dict[str, Any]  # the estimator's own keyword arguments


class BatchLayout:
    """Feature layout of a batch spec: names <-> indices, feature -> group, costs."""

    def __init__(self, spec: Any) -> None:
        """``spec``: a batch ``service.schemas.ModelCreate``."""
        self.spec = spec
        self.group_names = [g.name for g in spec.groups]
        self.costs = np.array([g.cost for g in spec.groups], dtype=np.float64)
        sizes = [len(g.features) for g in spec.groups]
        self.offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.offsets[1:])
        self.n_features = int(self.offsets[-1])
        self.n_groups = len(sizes)
        self.group_of = np.repeat(np.arange(self.n_groups, dtype=np.int64), sizes)
        self.group_index = {name: g for g, name in enumerate(self.group_names)}
        self.feature_index = [{name: int(self.offsets[g]) + k for k, name in
                               enumerate(group.features)} for g, group in enumerate(spec.groups)]
        self.classes = classes_of(spec)  # K >= 3 classes (service.batch.classes), or None

    @cached_property
    def feature_names(self) -> list[str]:
        return [name for group in self.spec.groups for name in group.features]

    def group_features(self, g: int) -> np.ndarray:
        return np.arange(self.offsets[g], self.offsets[g + 1], dtype=np.int64)

    @cached_property
    def groups(self) -> list[np.ndarray]:
        return [self.group_features(g) for g in range(self.n_groups)]

    def group_ids(self, names, field: str = "computed_groups") -> list[int]:
        """Group names -> ids; a 422 naming the first unknown one."""
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise item_error("must be a list of group names", field=field)
        ids = []
        for name in names:
            g = self.group_index.get(name)
            if g is None:
                raise item_error(f"unknown group {name!r}; this model has "
                                 f"{self.group_names}", field=field)
            ids.append(g)
        return sorted(set(ids))

    def features_of(self, groups) -> np.ndarray:
        parts = [self.groups[g] for g in sorted(groups)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def cost_of(self, groups) -> float:
        return float(sum(self.costs[g] for g in groups))

"""Common state of the selecting learners (PET, FOFS, SOFS): a top set of <= B features.

Only kept features have non-zero weights, so the weights live in the top set's slots; the
memory of PET and FOFS is O(B) plus, for d <= 2^21, a direct feature -> slot table of 2
bytes per feature (``_featuremap``), which scores an example ~1.5x faster than the hash
(SOFS adds its dense 16 bytes per feature).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from algorithms.online import _featuremap, _topset
from algorithms.online.base import DEFAULT_BUDGET, OnlineLearner
from algorithms.sparse import CSRBatch


class SelectingLearner(OnlineLearner):
    """An online learner whose weights are stored in a top set of capacity min(B, d)."""

    selects = True
    _state_arrays = ("slot_ints", "slot_floats", "meta")
    # The fit kernel's summation order, which decision_function repeats (see _score_rows):
    # two lanes of adds, or one chain (FOFS)
    _two_lane_scores: ClassVar[bool] = True
    # A kept feature's key is |its stored value| (PET, FOFS); SOFS keys variances
    _keys_are_abs_values: ClassVar[bool] = True

    def __init__(self, *, n_features: int | None = None, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(n_features=n_features, budget=budget)

    def _allocate(self) -> None:
        arrays = _topset.allocate(min(self._budget, self._n_features), self._n_features)
        for key, array in arrays.items():
            setattr(self, "_" + key, array)

    def _check_state(self, rows) -> None:
        _topset.check(self._slot_ints, self._slot_floats, self._meta,
                      n_features=self._n_features,
                      keys_are_abs_values=self._keys_are_abs_values)

    def _after_load(self) -> None:
        self._map_entries = _topset.rebuild_map(self._slot_ints, self._meta,
                                                self._map_entries)
        _featuremap.check_map(self._map_entries, self._slot_ints, self._meta)

    def _weight_scale(self) -> float:
        """Factor from stored slot values to weights (FOFS keeps a lazy scale)."""
        return 1.0

    def _score_rows(self, batch: CSRBatch, scores: np.ndarray) -> None:
        _topset._score_rows(batch.indptr, batch.indices, batch.values, self._map_entries,
                            self._meta, self._slot_floats, self._weight_scale(),
                            self._two_lane_scores, scores)

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        features, values = _topset.kept(self._slot_ints, self._slot_floats, self._meta)
        values = values * self._weight_scale()
        nonzero = values != 0.0
        return features[nonzero], values[nonzero]

    def _kernel_state(self) -> tuple:
        return (self._slot_ints, self._slot_floats, self._map_entries, self._meta)


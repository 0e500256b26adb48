"""Grouped data for batch-model tests: scikit-learn's diabetes with named groups, and the
anytime synthetic set; helpers to turn rows into the service's named examples and to build
the in-process reference from the same log (the held-out rule of the fold)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from algorithms.anytime import SufficientStatistics
from service.batch.worker.fold_state import held_out

DIABETES_GROUPS = [
    {"name": "demographics", "features": ["age", "sex"], "cost": 1.0},
    {"name": "exam", "features": ["bmi", "bp"], "cost": 2.0},
    {"name": "lipids", "features": ["s1", "s2", "s3"], "cost": 3.0},
    {"name": "glucose", "features": ["s4", "s5", "s6"], "cost": 4.0},
]
NO_POLICY = {"retrain_every_examples": None, "retrain_every_seconds": None}


def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X, y


def named_examples(X, y, groups, start: int, stop: int, *, field: str = "target",
                   skip_groups=()) -> list[dict]:
    """Rows ``start:stop`` as ``{"features": {group: {name: value}}, field: y}``."""
    out = []
    for row in range(start, stop):
        features, column = {}, 0
        for group in groups:
            values = {}
            for name in group["features"]:
                values[name] = float(X[row, column])
                column += 1
            if group["name"] not in skip_groups:
                features[group["name"]] = values
        item = {"features": features}
        if y is not None:
            item[field] = float(y[row])
        out.append(item)
    return out


def split_like_the_fold(entries: list[tuple[str, np.ndarray, np.ndarray]], fraction: float):
    """(train X, train y, validation X, validation y) of logged entries [(id, X, y)], by the
    fold's held-out rule."""
    parts = ([], [], [], [])
    for entry_id, X, y in entries:
        held = held_out(entry_id, len(y), fraction)
        parts[0].append(X[~held])
        parts[1].append(y[~held])
        parts[2].append(X[held])
        parts[3].append(y[held])
    return tuple(np.concatenate(p) for p in parts)


def reference_statistics(entries, fraction: float, D: int):
    """The training and validation statistics one pass over ``entries`` gives, entry by
    entry (the fold's order)."""
    train, validation = SufficientStatistics(D), SufficientStatistics(D)
    for entry_id, X, y in entries:
        held = held_out(entry_id, len(y), fraction)
        if (~held).any():
            train.update(X[~held], y[~held])
        if held.any():
            validation.update(X[held], y[held])
    return train, validation


def assert_same_fold(folded: dict, expected: dict) -> None:
    """Two fold states alike: windows and counters bit for bit; statistics (float sums,
    merged per read block) to 1e-10 relative."""
    assert folded.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, np.ndarray) and value.dtype == np.float64 and \
                not key.endswith((".X", ".y")):
            np.testing.assert_allclose(folded[key], value, rtol=1e-10,
                                       atol=1e-10 * max(1.0, float(np.abs(value).max(
                                           initial=0.0))), err_msg=key)
        elif isinstance(value, np.ndarray):
            assert folded[key].tobytes() == value.tobytes(), key
        elif isinstance(value, float):
            assert folded[key] == pytest.approx(value, rel=1e-10, abs=1e-10), key
        else:
            assert folded[key] == value, key

"""The synthetic data of the SOFS paper (Wu, Hoi et al., after FGM): X1 and X2-like streams.

Every sample has the ``n_informative`` informative features (fixed random positions,
values N(0, 1)) plus ``n_noise`` noise dimensions drawn without replacement from the other
d - n_informative dimensions (values N(0, 1)). With w* ~ U(0, 1) on the informative
features, the label is y = sign(w* . x*), x* the noise-free sample. X1 is 100,000 x 20,000
with 200 informative and 400 noise features; X2 is 1M x 1B with 500 and 500.

Memory is O(chunk_size * (n_informative + n_noise)) whatever d: no dense arrays.
The stream is determined by (seed, chunk_size).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from algorithms.sparse import CSRBatch, concat_batches


@dataclass(frozen=True)
class SyntheticTask:
    """The fixed part of a task: informative positions and the true weights."""

    n_features: int
    informative: np.ndarray      # sorted int64 positions, shape (n_informative,)
    true_weights: np.ndarray     # float64 U(0, 1), shape (n_informative,)
    n_noise: int


def make_task(n_features: int = 20_000, n_informative: int = 200, n_noise: int = 400,
              seed: int = 0) -> SyntheticTask:
    if not 0 < n_informative <= n_features:
        raise ValueError("need 0 < n_informative <= n_features")
    if not 0 <= n_noise <= n_features - n_informative:
        raise ValueError("need 0 <= n_noise <= n_features - n_informative")
    rng = np.random.default_rng([seed, 0])
    informative = np.sort(_distinct(rng, n_features, n_informative)).astype(np.int64)
    return SyntheticTask(n_features, informative, rng.uniform(0.0, 1.0, n_informative),
                         n_noise)


def _distinct(rng: np.random.Generator, population: int, k: int) -> np.ndarray:
    """``k`` distinct integers from [0, population), O(k log k) expected for k << population."""
    if k > population // 4:
        return rng.permutation(population)[:k]
    chosen = np.unique(rng.integers(0, population, size=k))
    while len(chosen) < k:
        extra = rng.integers(0, population, size=k - len(chosen))
        chosen = np.unique(np.concatenate([chosen, extra]))
    return rng.permutation(chosen)[:k]


def _noise_positions(rng, task: SyntheticTask, rows: int) -> np.ndarray:
    """(rows, n_noise) distinct non-informative positions per row."""
    others = task.n_features - len(task.informative)
    k = task.n_noise
    draws = rng.integers(0, others, size=(rows, k))
    draws.sort(axis=1)
    while True:   # redraw duplicates within a row until none are left
        duplicate = np.zeros_like(draws, dtype=bool)
        duplicate[:, 1:] = draws[:, 1:] == draws[:, :-1]
        if not duplicate.any():
            break
        draws[duplicate] = rng.integers(0, others, size=int(duplicate.sum()))
        draws.sort(axis=1)
    # Map [0, others) onto the dimensions that are not informative.
    shifted = task.informative - np.arange(len(task.informative))
    return draws + np.searchsorted(shifted, draws, side="right")


def stream(task: SyntheticTask, n_samples: int, chunk_size: int = 10_000,
           seed: int = 0) -> Iterator[tuple[CSRBatch, np.ndarray]]:
    """Yield ``(CSRBatch, labels)`` chunks of the task's samples, rows sorted by index."""
    n_informative = len(task.informative)
    width = n_informative + task.n_noise
    for chunk, start in enumerate(range(0, n_samples, chunk_size)):
        rows = min(chunk_size, n_samples - start)
        rng = np.random.default_rng([seed, 1, chunk])
        clean = rng.standard_normal((rows, n_informative))
        labels = np.where(clean @ task.true_weights >= 0.0, 1.0, -1.0)
        positions = np.empty((rows, width), dtype=np.int64)
        values = np.empty((rows, width), dtype=np.float64)
        positions[:, :n_informative] = task.informative
        values[:, :n_informative] = clean
        positions[:, n_informative:] = _noise_positions(rng, task, rows)
        values[:, n_informative:] = rng.standard_normal((rows, task.n_noise))
        order = np.argsort(positions, axis=1, kind="stable")
        positions = np.take_along_axis(positions, order, axis=1)
        values = np.take_along_axis(values, order, axis=1)
        indptr = np.arange(rows + 1, dtype=np.int64) * width
        yield (CSRBatch(indptr, positions.reshape(-1).astype(np.int32), values.reshape(-1),
                        task.n_features), labels)


def make_x1(n_samples: int = 100_000, n_features: int = 20_000, n_informative: int = 200,
            n_noise: int = 400, seed: int = 0) -> tuple[CSRBatch, np.ndarray, SyntheticTask]:
    """The whole X1 data set in memory: ``(CSRBatch, labels, task)``."""
    task = make_task(n_features, n_informative, n_noise, seed)
    return (*concatenate(stream(task, n_samples, seed=seed)), task)


def concatenate(chunks) -> tuple[CSRBatch, np.ndarray]:
    """Join ``(CSRBatch, labels)`` chunks into one batch."""
    batches, labels = zip(*chunks, strict=True)
    return concat_batches(list(batches)), np.concatenate(labels)

"""Sufficient statistics of sharded files on a ``dask.distributed`` cluster (the
``featurebudget[dask]`` extra), or in this process.

:func:`fit_statistics` plans the partitions here (file sizes, Parquet row groups: the paths
must name the same files for this process and every worker, e.g. a shared filesystem),
runs one task per partition (:func:`~service.batch.offline.file_statistics.partition_statistics`),
then merges their results along the tree of
:func:`~service.batch.offline.file_statistics.tree_levels`, one task per node: ``ceil(log_k P)``
levels of k-way merges (Chan's pairwise update), O(P·D²) work and O(D²) bytes moved per
edge. A task whose worker dies is run again by Dask (the scheduler reschedules lost tasks,
``distributed.scheduler.allowed-failures``); a task that raises is retried ``retries``
times; a file that cannot be read fails the run at once with the file's error. The tree is
the same for any executor, so the result does not depend on the workers: a Dask run and
``client=None`` give the same bits. Dask is imported only when a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from algorithms.anytime import SufficientStatistics
from service.batch.offline.file_statistics import (
    FileInputError,
    PartStatistics,
    Reading,
    expand_paths,
    merge_parts,
    partition_statistics,
    plan_partitions,
    tree_levels,
    tree_reduce,
)

INSTALL_HINT = "the Dask cluster needs the extra: pip install 'featurebudget[dask]'"


@dataclass
class FileStatistics:
    """What :func:`fit_statistics` computed: training and validation statistics of every
    row of the files, split by the files' held-out rule."""

    train: SufficientStatistics
    validation: SufficientStatistics
    rows: int
    files: int
    partitions: int
    validation_fraction: float
    seconds: float

    @property
    def n_features(self) -> int:
        return self.train.n_features

    def summary(self) -> dict:
        return {"files": self.files, "partitions": self.partitions, "rows": self.rows,
                "train_examples": int(self.train.n),
                "validation_examples": int(self.validation.n),
                "validation_fraction": self.validation_fraction,
                "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class _Failed:
    """A partition's input error, carried through the merge tree as a value (so that Dask
    does not retry what would fail again)."""

    message: str


def _partition_task(part, reading: Reading):
    try:
        return partition_statistics(part, reading)
    except FileInputError as exc:
        return _Failed(str(exc))


def _merge_task(*parts):
    failed = next((p for p in parts if isinstance(p, _Failed)), None)
    return failed if failed is not None else merge_parts(*parts)


def fit_statistics(paths: Sequence[str | os.PathLike], n_features: int, *,
                   client=None, task: str = "regression", zero_based: bool = False,
                   validation_fraction: float = 0.0, columns: Sequence[str] | None = None,
                   target_column: str | None = None, fmt: str = "auto",
                   block_bytes: int = 64 << 20, split_every: int = 4,
                   retries: int = 2) -> FileStatistics:
    """Training / validation statistics of the rows of ``paths`` (libsvm or Parquet files,
    directories of them) with ``n_features`` features.

    ``client``: a ``distributed.Client`` (its cluster computes the partitions and the merge
    tree), or None to compute them here, one after the other. FileInputError names a file
    (and line) that cannot be read as examples of this dimension and task.
    """
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError("validation_fraction must be in [0, 1)")
    started = time.perf_counter()
    files = expand_paths(paths)
    parts = plan_partitions(files, fmt, block_bytes)
    reading = Reading(int(n_features), task, bool(zero_based), float(validation_fraction),
                      tuple(columns) if columns is not None else None, target_column)
    if not parts:  # only empty files
        D = reading.n_features
        merged = PartStatistics(SufficientStatistics(D), SufficientStatistics(D), 0, 0)
    elif client is None:
        merged = tree_reduce((partition_statistics(p, reading) for p in parts), merge_parts,
                             split_every)
    else:
        merged = _on_cluster(client, parts, reading, split_every, retries)
    if isinstance(merged, _Failed):
        raise FileInputError(merged.message)
    return FileStatistics(merged.train, merged.validation, merged.rows, len(files),
                          len(parts), reading.validation_fraction,
                          time.perf_counter() - started)


def _on_cluster(client, parts, reading: Reading, split_every: int, retries: int):
    """The partition tasks and the merge tree as Dask futures; the root's value."""
    token = uuid.uuid4().hex[:12]
    level = client.map(_partition_task, parts, reading=reading, retries=retries,
                       key=[f"fb-statistics-{token}-part-{i}" for i in range(len(parts))])
    every = list(level)
    try:
        for depth, groups in enumerate(tree_levels(len(parts), split_every)):
            level = [client.submit(_merge_task, *(level[k] for k in group), retries=retries,
                                   key=f"fb-statistics-{token}-merge-{depth}-{j}")
                     for j, group in enumerate(groups)]
            every += level
        return level[0].result()
    finally:
        client.cancel(every)


# A worker process that frees a partition's arrays returns their pages at once under Dask's
# trim threshold (glibc then maps every array above 128 KiB afresh): 1.5x the CPU seconds of
# the same partitions in-process (1e6 rows, D = 200, benchmarks/statistics_dask.py); without
# it the heap is reused. A cluster of your own: set its nanny's pre-spawn-environ alike.
LOCAL_CONFIG = {"distributed.worker.profile.enabled": False}


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None,
                **cluster_options) -> Iterator:
    """A ``distributed.Client`` of the scheduler at ``scheduler``, or of a LocalCluster of
    ``workers`` worker processes that lives as long as the block: one thread each (default
    the CPU count), its dashboard on a free loopback port, without the statistical profiler
    (:data:`LOCAL_CONFIG`) and without Dask's ``MALLOC_TRIM_THRESHOLD_`` (see above)."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise RuntimeError(INSTALL_HINT) from exc
    if scheduler:
        with Client(scheduler) as client:
            yield client
        return
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    options = dict(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                   processes=True, dashboard_address="127.0.0.1:0")
    options.update(cluster_options)
    with dask.config.set({**LOCAL_CONFIG, "distributed.nanny.pre-spawn-environ": environ}), \
            LocalCluster(**options) as cluster, Client(cluster) as client:
        yield client


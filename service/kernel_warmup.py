"""The first call of every numba kernel a process runs, at start-up: numba loads each from
its on-disk cache (compiling it on a miss), so the first request is not the slow one.

:func:`warm_kernels` (every API process: the online learners and the ingestion parsers)
and :func:`warm_batch_kernels` (processes that fold batch models: anytime, GBFS and the
per-example acquisition's search).
"""

from __future__ import annotations

import contextlib

import numpy as np

from service import fbx1


def warm_kernels() -> None:
    """Compile / load every learner's kernels once, so the first request is not slow."""
    from algorithms.online import LEARNERS
    from algorithms.sparse import CSRBatch

    X = CSRBatch(np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int32),
                 np.array([1.0, -1.0]), 4)
    for cls in LEARNERS.values():
        learner = cls(n_features=4, budget=2)
        learner.progressive_fit(X, np.array([1.0]))
        learner.progressive_fit(X, np.array([1], dtype=np.int8))  # labels as ingested
        learner.decision_function(X)
    # the ingestion parsers, for read-only (bytes: REST) and writable (uint8 arrays: stream
    # entries received in place) buffers alike
    from service.ingest import parse_entry

    samples = [(b"bin", fbx1.encode_batch(X.indptr, X.indices, X.values,
                                          np.array([1], dtype=np.int8), value_bytes=width))
               for width in (4, 8)]  # float32 and float64 values
    samples += [(b"libsvm", b"1 1:1 2:-1\n"),
                (b"json", b'{"examples": [{"indices": [0, 1], "values": [0.1234567890123456789'
                          b', 1e-30], "label": 1}]}')]
    for fmt, data in samples:
        for buffer in (bytes(data), np.frombuffer(data, dtype=np.uint8).copy()):
            with contextlib.suppress(Exception):
                parse_entry({b"fmt": fmt, b"data": buffer}, 4, None)


def warm_batch_kernels() -> None:
    """Compile / load the anytime and GBFS kernels once (cached on disk after the first)."""
    import numpy as np

    from algorithms.anytime import AnytimeLinearModel
    from algorithms.gbfs import GBFS

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.1 * rng.standard_normal(40)
    model = AnytimeLinearModel(groups=[[0, 1], [2], [3]], costs=[1.0, 1.0, 2.0]).fit(X, y)
    model.next_group([0])
    # a model as a served version holds it (read-only arrays from its bytes): the solves of
    # every set of it, each set's next group, factors extended from the prefix and from
    # cached subsets alike
    served = AnytimeLinearModel.from_bytes(model.to_bytes())
    for S in ([1], [2], [0, 2], [1, 2], [0, 1, 2], [0, 1], [0]):
        served.coef_for_groups(S)
        served.next_group(S)
    # what a model with sets over SMALL_SOLVE features (or a dependent direction) calls from
    # Python; small sets reach these kernels only from inside other kernels
    from algorithms.anytime import _kernels

    A = np.eye(2)
    _kernels.cholesky_pivoted(A, np.zeros(2), np.empty_like(A))
    _kernels.forward_solve(A, np.ones(2), np.empty(2))
    GBFS(loss="squared", n_estimators=2, max_depth=2, feature_groups=[[0, 1], [2, 3]],
         group_costs=[1.0, 1.0]).fit(X, y).predict(X)
    # the per-example acquisition's superset search (POST /next with examples)
    from algorithms.acquisition import ConditionedAcquisition

    policy = ConditionedAcquisition(max_groups=3).fit(
        lambda Z: np.nan_to_num(Z).sum(axis=1), X[:, :3], y, groups=[[0], [1], [2]],
        costs=[1.0, 1.0, 2.0], loss="squared")
    x = X[0, :3].copy()
    x[1:] = np.nan
    policy.decide(x, [0], max_cost=3.0, exchange_rate=0.01)
    policy.neighbours(x, [0], policy.rows_)  # (decisions call it on a per-example policy only)

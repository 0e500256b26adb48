"""``featurebudget worker``: the batch worker as its own process (Redis backend).

Opens the storage, folds every batch model whose lease it wins, runs their retrains, follows
models created and deleted elsewhere, serves its Prometheus metrics on ``metrics_port``, and
on SIGTERM / SIGINT writes a final snapshot of each model it owns and releases the leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
import uuid

from service.allocator import retain_freed_memory
from service.batch.worker import BatchWorker
from service.settings import Settings
from service.storage import make_storage

log = logging.getLogger("featurebudget.worker")


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
    GBFS(loss="squared", n_estimators=2, max_depth=2, feature_groups=[[0, 1], [2, 3]],
         group_costs=[1.0, 1.0]).fit(X, y).predict(X)


async def run_worker(settings: Settings, *, metrics_port: int | None = None,
                     stop: asyncio.Event | None = None) -> None:
    from service.startup import backend_description

    retain_freed_memory(settings.malloc_retain_bytes)
    starting = time.perf_counter()
    log.info("batch worker starting on the %s", backend_description(settings))
    if metrics_port:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr=settings.metrics_host)
        log.info("batch worker metrics on http://%s:%d/metrics", settings.metrics_host,
                 metrics_port)
    storage = make_storage(settings)
    await storage.open()
    process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}:worker"
    await asyncio.to_thread(warm_batch_kernels)
    worker = BatchWorker(storage, settings, process_id)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(sig, stop.set)
    await worker.start(follow=True)
    log.warning("batch worker %s ready in %.1f s on the %s: %d batch models (%s)", process_id,
                time.perf_counter() - starting, backend_description(settings),
                len(worker.folds), ", ".join(sorted(worker.folds)) or "none yet")
    try:
        await stop.wait()
    finally:
        await worker.stop()
        await storage.close()

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
from service.batch.worker.fold_worker import BatchWorker
from service.kernel_warmup import warm_batch_kernels
from service.settings import Settings
from service.storage import make_storage

log = logging.getLogger("featurebudget.worker")


async def run_worker(settings: Settings, *, metrics_port: int | None = None,
                     stop: asyncio.Event | None = None) -> None:
    retain_freed_memory(settings.malloc_retain_bytes)
    starting = time.perf_counter()
    storage = make_storage(settings)
    log.info("batch worker starting on the %s", storage.description)
    if metrics_port:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr=settings.metrics_host)
        log.info("batch worker metrics on http://%s:%d/metrics", settings.metrics_host,
                 metrics_port)
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
                time.perf_counter() - starting, storage.description,
                len(worker.folds), ", ".join(sorted(worker.folds)) or "none yet")
    try:
        await stop.wait()
    finally:
        await worker.stop()
        await storage.close()

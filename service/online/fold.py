"""The online fold: read a model's log in order, apply micro-batches, ack, snapshot.

Per model, one task runs :meth:`ModelFold.run`. With a shared backend (Redis) it first
holds the model's lease; a process without the lease follows the published snapshots
instead. The owner:

1. loads the latest snapshot (state + id of the last applied entry) and positions its
   reader right after that id, so everything after it is replayed in order;
2. reads up to ``microbatch_max_entries`` entries, parses them (the same functions as the
   REST routes) on a pool of parser threads, sends malformed ones to the dead-letter
   stream, and applies the rest in log order in a worker thread (the numba parsers and
   kernels release the GIL). While one micro-batch is applied the next one is already read
   and parsed (at most two micro-batches in memory, each of at most
   ``microbatch_max_bytes`` when entries are alike: the read count adapts to entry sizes);
3. acknowledges the entries, publishes the serving view (:mod:`service.online.view`: the non-zero
   weights and counters every other API process answers from), and every N examples / T
   seconds writes a snapshot, then trims the log below the snapshot's id.

Applying is idempotent by id (entries at or before the applied id are skipped), so a crash
at any point followed by a restart applies every logged example exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor

from service import metrics
from service.errors import InputError
from service.fold_loop import Fold
from service.ingest import ExampleBatch, parse_entry
from service.online.host import ModelHost
from service.priority import in_background, lower_priority
from service.storage import LogEntry, Storage

log = logging.getLogger("featurebudget.fold")

_PARSERS: ThreadPoolExecutor | None = None
_PARSERS_LOCK = threading.Lock()


def parser_pool() -> ThreadPoolExecutor:
    """The process's entry parsers (one thread per CPU, at the background priority of
    :mod:`service.priority`; the parsers release the GIL)."""
    global _PARSERS
    with _PARSERS_LOCK:
        if _PARSERS is None:
            _PARSERS = ThreadPoolExecutor(max(1, os.cpu_count() or 1),
                                          thread_name_prefix="featurebudget-parse",
                                          initializer=lower_priority)
        return _PARSERS


Parsed = list[Future]  # per entry: ExampleBatch, or the reason it is rejected (str)


class ModelFold(Fold):
    """An online model's fold (module docstring): the loop of :class:`Fold`, with entries
    parsed on the parser pool while the previous block is applied, and the serving view
    published after each block."""

    kind = "fold"
    state_loaded_with_model = True  # the manager restored the snapshot into the host

    def __init__(self, host: ModelHost, storage: Storage, settings, process_id: str,
                 membership=None) -> None:
        super().__init__(host.name, host.incarnation, storage, settings, process_id,
                         membership)
        self.host = host
        self._prefetch: asyncio.Task | None = None
        self._view_due = 0.0  # monotonic time the next serving view may be published
        self._view_dirty = False  # applied entries not in the published view yet
        self.snapshot_id = host.applied_id  # the state restored with the model
        if not storage.shared:
            self.owner = True

    # ------------------------------------------------------------ ownership lives on the host
    @property
    def owner(self) -> bool:
        return self.host.owner

    @owner.setter
    def owner(self, value: bool) -> None:
        self.host.set_owner(value)

    @property
    def applied_id(self) -> str | None:
        return self.host.applied_id

    # ------------------------------------------------------------ the kind's hooks
    def load(self, blob: bytes) -> None:
        self.host.load_blob(blob, check_spec=False)

    def state_blob(self) -> tuple[bytes, str | None]:
        return self.host.snapshot_blob()

    def replace_state(self, parsed, log_id: str | None) -> None:
        self.host.install(parsed)
        self.host.restore_position(log_id)

    async def after_restore(self) -> None:
        await self.publish_view(now=True)

    async def follow(self) -> None:
        """Not the owner: load the owner's newer snapshots."""
        position = await self.storage.snapshot_position(self.name)
        if position and position != self.snapshot_id:
            blob = await self.storage.load_snapshot(self.name)
            if blob is not None:
                self.host.load_blob(blob, check_spec=False)
                self.snapshot_id = self.host.applied_id
                self.publish_gauges()

    async def before_step(self) -> None:
        if self._view_dirty and time.monotonic() >= self._view_due:
            await self.publish_view()
            self.host.notify_applied()

    def start_work(self, entries: list[LogEntry]) -> list[Future]:
        """Parse the entries on the parser pool (per entry: a batch, or the reason it is
        rejected)."""
        pool = parser_pool()
        return [pool.submit(self._parse, entry) for entry in entries]

    async def read_block(self):
        """The prefetched block if there is one, else a fresh read; then (``prefetch``)
        read and parse the next block while this one is applied."""
        if self._prefetch is not None:
            entries, parsed = await self._prefetch
            self._prefetch = None
        else:
            entries, parsed = await self._read_and_parse()
        if entries and self.settings.prefetch:
            self._prefetch = asyncio.create_task(self._read_and_parse())
        return entries, parsed

    async def _read_and_parse(self) -> tuple[list[LogEntry], Parsed]:
        count = self.read_count()
        entries = await self.reader.read(count, self.settings.consumer_block_ms)
        if entries:
            self._entry_bytes = max(len(e.fields.get(b"data", b"")) for e in entries)
        return entries, self.start_work(entries)

    def forget_read_ahead(self) -> None:
        """Forget a read ahead (its entries are delivered again after re-positioning)."""
        if self._prefetch is not None:
            self._prefetch.cancel()
            self._prefetch = None
        self.reader = None

    def _parse(self, entry: LogEntry) -> ExampleBatch | str:
        """Parser thread: one entry -> batch, or the reason it goes to the dead letters."""
        host = self.host
        try:
            return parse_entry(entry.fields, host.n_features, host.hasher,
                               zero_based=host.spec.libsvm_zero_based)
        except InputError as exc:
            return exc.detail
        except Exception as exc:  # never block the stream on one entry
            return f"{type(exc).__name__}: {exc}"

    def apply_block(self, entries: list[LogEntry], parsed: Parsed) -> tuple[int, list]:
        """Worker thread: wait for the parsed entries, apply the good ones in log order."""
        batches: list[ExampleBatch] = []
        rejected = []
        for entry, future in zip(entries, parsed, strict=True):
            result = future.result()
            if isinstance(result, str):
                rejected.append((entry, result))
            else:
                batches.append(result)
        return self.host.apply_all(batches, entries[-1].id)[0], rejected

    async def after_apply(self) -> None:
        if self.storage.shared and self.host.applied_id:
            await self.publish_view()
        self.host.notify_applied()

    async def take_over(self, *, load: bool) -> None:
        await super().take_over(load=load)
        self._view_due = 0.0

    # ------------------------------------------------------------ serving view and gauges
    async def publish_view(self, *, now: bool = False) -> None:
        """Publish the serving view (fenced by the lease; shared backends). A view of V bytes
        is followed by the next one no sooner than V / ``serving_view_bytes_per_second``
        (selectors: every micro-batch; a dense learner over 2^20 features: ~2 per second);
        ``now`` ignores that (after a restore)."""
        host = self.host
        if not self.storage.shared or not host.owner or host.applied_id is None:
            return
        clock = time.monotonic()
        if not now and clock < self._view_due:
            self._view_dirty = True
            await self.storage.publish_applied(host.name, host.applied_id)
            return
        limit = self.settings.selected_features_max
        if host.n_features > 1 << 16 and not host.learner.selects:  # O(d): off the loop
            view = await in_background(host.make_view, limit)
        else:
            view = host.make_view(limit)
        blob = view.encode()
        token = f"{view.log_id} {uuid.uuid4().hex[:12]}"
        if await self.storage.publish_view(host.name, token, blob, owner=self.process_id):
            host.view_was_published(view.position)
        else:  # another process holds the lease (or published a later view): it folds now
            log.warning("serving view of model %s refused: another process holds its lease",
                        host.name)
            self.owner = False
            self.forget_read_ahead()
        self._view_dirty = False
        self._view_due = clock + len(blob) / self.settings.serving_view_bytes_per_second

    def publish_gauges(self) -> None:
        """The learner's gauges from its current state (also after a restore or restart)."""
        host = self.host
        learner = host.learner
        if host.progressive_examples:
            metrics.PROGRESSIVE_ACCURACY.labels(host.name).set(
                host.progressive_correct / host.progressive_examples)
        metrics.EXAMPLES_SEEN.labels(host.name).set(learner.n_examples_)
        metrics.SELECTED_FEATURES.labels(host.name).set(len(learner.weights()[0]))

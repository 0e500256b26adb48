"""The embedded backend's log: framing, torn tails, segments and trimming."""

from __future__ import annotations

import asyncio
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from service.storage.local import LocalLog, LocalStorage
from service.storage.pending import PendingJournal


def test_torn_tail_is_detected_and_truncated(tmp_path):
    log = LocalLog(tmp_path, segment_bytes=1 << 20, fsync=False)
    ids = log.append([(b"libsvm", b"1 1:1"), (b"libsvm", b"-1 2:1")])
    assert ids == ["1", "2"]
    log.close()
    segment = next(tmp_path.glob("*.seg"))
    intact = segment.stat().st_size
    with open(segment, "ab") as handle:  # a record cut short by a crash
        handle.write(b"\x20\x00\x00\x00garbage")
    log = LocalLog(tmp_path, segment_bytes=1 << 20, fsync=False)
    assert log.torn_bytes == 11 and segment.stat().st_size == intact
    assert [e.fields[b"data"] for e in log.read(0, 10)] == [b"1 1:1", b"-1 2:1"]
    assert log.append([(b"bin", b"x")]) == ["3"]


def test_corrupt_record_checksum_truncates_from_there(tmp_path):
    log = LocalLog(tmp_path, segment_bytes=1 << 20, fsync=False)
    log.append([(b"libsvm", b"1 1:1"), (b"libsvm", b"1 2:1"), (b"libsvm", b"1 3:1")])
    log.close()
    segment = next(tmp_path.glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # flip a bit of the last record
    segment.write_bytes(bytes(data))
    log = LocalLog(tmp_path, segment_bytes=1 << 20, fsync=False)
    assert log.last_seq == 2


def test_segments_roll_and_trim_keeps_needed_entries(tmp_path):
    log = LocalLog(tmp_path, segment_bytes=64, fsync=True)
    for k in range(20):
        log.append([(b"libsvm", b"1 %d:1" % (k + 1))])
    assert len(list(tmp_path.glob("*.seg"))) > 3
    log.trim(12)
    entries = log.read(11, 100)
    assert [e.id for e in entries] == [str(k) for k in range(12, 21)]
    assert log.segments[0].first_seq <= 12
    log.close()
    reopened = LocalLog(tmp_path, segment_bytes=64, fsync=True)
    assert reopened.last_seq == 20
    assert reopened.read(19, 5)[0].fields[b"data"] == b"1 20:1"


def test_data_dir_is_owned_by_one_process(tmp_path):
    async def run():
        first = LocalStorage(tmp_path)
        await first.open()
        second = LocalStorage(tmp_path)
        try:
            await second.open()
        except RuntimeError as exc:
            assert "in use" in str(exc)
        else:
            raise AssertionError("a second process could open the data directory")
        await first.close()
    asyncio.run(run())
    assert os.path.exists(tmp_path / ".lock")


def test_pending_journal_replays_puts_and_pops_and_cuts_a_torn_tail(tmp_path):
    clock = [1000.0]
    path = tmp_path / "pending.journal"
    journal = PendingJournal(path, clock=lambda: clock[0])
    journal.put("m", "a", b"blob-a", 10)
    journal.put("m", "b", b"blob-b", 10)
    journal.put("n", "a", b"other", 1)
    assert journal.pop("m", "a") == b"blob-a"
    journal.close()
    with open(path, "ab") as handle:  # a put cut short by a crash
        handle.write(b"\x40\x00\x00\x00\x01\x02")
    clock[0] += 2  # n/a expires meanwhile
    journal = PendingJournal(path, clock=lambda: clock[0])
    assert journal.torn_bytes == 6
    assert journal.pop("m", "a") is None and journal.pop("n", "a") is None
    assert journal.pop("m", "b") == b"blob-b"
    journal.put("m", "c", b"blob-c", 5)
    clock[0] += 6
    assert journal.pop("m", "c") is None  # expired
    journal.close()


def test_pending_journal_compacts_and_stays_bounded(tmp_path):
    path = tmp_path / "pending.journal"
    journal = PendingJournal(path, compact_bytes=4096)
    for k in range(5000):
        journal.put("m", str(k), b"x" * 100, 60)
        assert journal.pop("m", str(k)) == b"x" * 100
    journal.put("m", "kept", b"y", 60)
    assert path.stat().st_size < 3 * 4096
    journal.drop_model("m")
    journal.close()
    assert PendingJournal(path).entries == {}


def test_local_storage_keeps_pending_predictions_across_reopen(tmp_path):
    async def scenario():
        storage = LocalStorage(tmp_path)
        await storage.open()
        await storage.put_pending("m", "p1", b"state", 30)
        await storage.close()
        storage = LocalStorage(tmp_path)
        await storage.open()
        assert await storage.pop_pending("m", "p1") == b"state"
        assert await storage.pop_pending("m", "p1") is None
        await storage.close()

    asyncio.run(scenario())


_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from("abcd"), st.binary(max_size=40),
              st.integers(1, 5)),
    st.tuples(st.just("pop"), st.sampled_from("abcd")),
    st.tuples(st.just("tick"), st.integers(1, 3)),
    st.tuples(st.just("reopen"),),
), max_size=40)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_pending_journal_matches_a_dict_through_reopens_and_compactions(tmp_path_factory, ops):
    """Any sequence of puts, pops, clock ticks and restarts (with compaction forced often)
    leaves the journal answering exactly as an in-memory dict with expiry would."""
    path = tmp_path_factory.mktemp("journal") / "pending.journal"
    clock = [0.0]
    model: dict[str, tuple[float, bytes]] = {}

    def open_journal():
        return PendingJournal(path, compact_bytes=64, purge_above=2, clock=lambda: clock[0])

    journal = open_journal()
    for op in ops:
        if op[0] == "put":
            _, key, blob, ttl = op
            journal.put("m", key, blob, ttl)
            model[key] = (clock[0] + ttl, blob)
        elif op[0] == "pop":
            item = model.pop(op[1], None)
            expected = item[1] if item is not None and item[0] >= clock[0] else None
            assert journal.pop("m", op[1]) == expected
        elif op[0] == "tick":
            clock[0] += op[1]
        else:
            journal.close()
            journal = open_journal()
    for key in "abcd":
        item = model.pop(key, None)
        expected = item[1] if item is not None and item[0] >= clock[0] else None
        assert journal.pop("m", key) == expected
    journal.close()


def test_concurrent_appends_big_and_small_keep_order_and_content(tmp_path):
    """Appends of a few bytes (on the event loop) and of MBs (on background threads) at
    once: consecutive ids in the order the appends took the lock, every record intact, a
    repeated idempotency key answered once, and a reader that follows along sees them all."""
    async def scenario():
        storage = LocalStorage(tmp_path, segment_bytes=3 << 20)
        await storage.open()
        await storage.save_model("m", b"{}", create=True)
        sizes = [10, 2 << 20, 100, 300_000, 5, 1 << 20, 70_000, 1] * 4
        payloads = [bytes([k % 251]) * size for k, size in enumerate(sizes)]
        reader = storage.reader("m", "c")
        await reader.start(None)
        seen = []

        async def follow():
            while len(seen) < len(payloads) - 1:  # (the last one repeats a key)
                seen.extend(await reader.read(5, 50))

        following = asyncio.ensure_future(follow())
        results = await asyncio.gather(
            *[storage.append("m", [{b"fmt": b"bin", b"data": p}]) for p in payloads[:-2]],
            storage.append_once("m", [{b"fmt": b"bin", b"data": payloads[-2]}], "k", 60),
            storage.append_once("m", [{b"fmt": b"bin", b"data": payloads[-1]}], "k", 60))
        await asyncio.wait_for(following, 30)
        (once, first_repeat), (again, second_repeat) = results[-2:]
        assert once == again and first_repeat != second_repeat  # one of them appended
        kept = payloads[-1] if first_repeat else payloads[-2]
        ids = [r[0] for r in results[:-2]] + once
        assert sorted(int(i) for i in ids) == list(range(1, len(payloads)))
        by_id = dict(zip(ids, [*payloads[:-2], kept], strict=True))
        assert [e.id for e in seen] == [str(k) for k in range(1, len(payloads))]
        assert all(e.fields[b"data"] == by_id[e.id] for e in seen)
        await storage.close()

    asyncio.run(scenario())


def test_a_small_append_runs_on_the_loop_unless_each_append_is_fsynced(tmp_path):
    """Within the loop's budget an append runs inline (the lock free); with ``fsync`` (an
    fsync takes milliseconds) every append runs on a background thread."""
    import threading

    def where(*entries):
        return threading.current_thread()

    async def thread_of(log):
        return await log.run(100, where, [("bin", b"x")]), threading.current_thread()

    for fsync, inline in ((False, True), (True, False)):
        log = LocalLog(tmp_path / str(fsync), segment_bytes=1 << 20, fsync=fsync)
        ran_on, loop_thread = asyncio.run(thread_of(log))
        assert (ran_on is loop_thread) == inline
        log.close()

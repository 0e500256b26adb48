"""The embedded backend's log: framing, torn tails, segments and trimming."""

from __future__ import annotations

import asyncio
import os

from service.storage.local import LocalLog, LocalStorage


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

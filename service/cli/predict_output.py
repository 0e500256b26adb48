"""Where ``featurebudget predict`` writes: JSON lines or CSV, one record per example, each
with ``example`` (its 1-based place in the input file), appended a chunk at a time.

An output that already holds records is never overwritten silently: ``--resume`` goes on
after its last complete record (a line cut short by a crash is dropped first),
``--overwrite`` starts it again, and without either the run stops before scoring anything.
O(1) memory besides one chunk's records.
"""

from __future__ import annotations

import csv
import io
import os

import orjson

from service.cli.predict_input import PredictError

_TAIL = 1 << 16  # bytes read back from the end of an output at a time


def output_format(path: str, fmt: str | None) -> str:
    """``csv`` or ``jsonl``: ``fmt`` when given, else csv for a .csv ``path``."""
    if fmt:
        return fmt
    return "csv" if path.lower().endswith(".csv") else "jsonl"


def columns(batch: bool, classification: bool) -> list[str]:
    """The record's fields: an online model's score and label; a batch model's
    prediction (label and probability for classification), cost, groups used and next
    group."""
    if not batch:
        return ["example", "score", "label"]
    answer = ["prediction", "label", "probability"] if classification else ["prediction"]
    return ["example", *answer, "cost", "groups_used", "next_group"]


class Output:
    """An open output file; :meth:`write` appends records and flushes."""

    def __init__(self, path: str, fmt: str, fields: list[str]) -> None:
        self.path, self.fmt, self.fields = path, fmt, fields
        self.handle = None

    # ------------------------------------------------------------ opening, resuming
    def open(self, *, resume: bool, overwrite: bool) -> int:
        """Open for appending; the examples already scored (the last record's
        ``example``; 0 for a new or empty file). PredictError when it holds records and
        neither ``resume`` nor ``overwrite`` is given, or they are not this model's."""
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            size = 0
        except OSError as exc:
            raise PredictError(f"cannot read {self.path}: {exc.strerror or exc}",
                               status=2) from None
        appending = bool(size) and not overwrite
        try:
            done = self._last_example(size, resume) if appending else 0
            self.handle = open(self.path, "r+b" if appending else "wb")
            if appending:
                complete = self._complete_bytes(size)
                self.handle.truncate(complete)  # (a line cut short by a crash)
                self.handle.seek(complete)
            if not appending or not complete:
                self.handle.write(self._header())
        except OSError as exc:
            raise PredictError(f"cannot write {self.path}: {exc.strerror or exc}",
                               status=2) from None
        return done

    def _header(self) -> bytes:
        if self.fmt != "csv":
            return b""
        return (",".join(self.fields) + "\n").encode()

    def _complete_bytes(self, size: int) -> int:
        """The length of the file through its last newline."""
        with open(self.path, "rb") as handle:
            end = size
            while end > 0:
                start = max(0, end - _TAIL)
                handle.seek(start)
                newline = handle.read(end - start).rfind(b"\n")
                if newline >= 0:
                    return start + newline + 1
                end = start
        return 0

    def _last_example(self, size: int, resume: bool) -> int:
        """The ``example`` of the last complete record (0: none); PredictError unless the
        file is this model's predictions and ``resume`` is given."""
        complete = self._complete_bytes(size)
        if not complete:
            return 0
        with open(self.path, "rb") as handle:
            head = handle.readline()
            handle.seek(max(0, complete - _TAIL))
            lines = handle.read(complete - max(0, complete - _TAIL)).split(b"\n")
        last = lines[-2] if len(lines) >= 2 else b""
        if self.fmt == "csv" and head.rstrip(b"\r\n") != self._header().rstrip(b"\n"):
            raise PredictError(f"{self.path} is not a CSV of this model's predictions (its "
                               f"first line is not {','.join(self.fields)}): --overwrite "
                               "starts it again, or give another --out", status=2)
        if self.fmt == "csv" and complete == len(head):
            return 0  # a header and no record
        try:
            example = int(last.split(b",", 1)[0]) if self.fmt == "csv" else \
                int(orjson.loads(last)["example"])
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            raise PredictError(f"{self.path}: its last complete line is not a prediction "
                               "record with an example number: --overwrite starts it "
                               "again, or give another --out", status=2) from None
        if not resume:
            raise PredictError(f"{self.path} already holds predictions (through example "
                               f"{example:,}): --resume goes on after them, --overwrite "
                               "starts it again", status=2)
        return example

    # ------------------------------------------------------------ writing
    def write(self, records: list[dict]) -> None:
        """Append ``records`` (one write, flushed). O(records)."""
        if self.fmt == "csv":
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")
            writer.writerows([_csv_value(r.get(f)) for f in self.fields] for r in records)
            data = text.getvalue().encode()
        else:
            data = b"".join(orjson.dumps(r) + b"\n" for r in records)
        try:
            self.handle.write(data)
            self.handle.flush()
        except OSError as exc:
            raise PredictError(f"cannot write {self.path}: {exc.strerror or exc}",
                               status=2) from None

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def _csv_value(value):
    """A CSV cell: a list (groups; a multi-class model's class scores or probabilities)
    joined by ';', the next group by its name, None empty."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(map(str, value))
    if isinstance(value, dict):
        return value.get("name", "")
    return value

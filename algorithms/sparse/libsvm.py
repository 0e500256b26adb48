"""Fast libsvm / svmlight reader and writer.

Line format: ``label [qid:q] index:value index:value ... [# comment]``. Blank lines and
comment lines are skipped (they still count for line numbers). Indices are 1-based by
default (``zero_based=False``), 0-based with ``zero_based=True``, or detected with
``"auto"`` (0-based when any index is 0). Values are correctly rounded: a numba pass
parses numbers with at most 15 significant digits and a decimal exponent within +-22
exactly (Clinger's fast path); the rare other tokens are re-parsed by numpy. One pass over
the bytes, O(size); rows come out with sorted indices.
"""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO

import numpy as np
from numba import njit

from algorithms.sparse.csr import MAX_FEATURES, CSRBatch

_OK, _BAD_LABEL, _BAD_INDEX, _NO_COLON, _BAD_VALUE, _INDEX_TOO_LARGE, _ZERO_INDEX, \
    _DUPLICATE, _NON_FINITE = range(9)
_MESSAGES = {
    _BAD_LABEL: "the label is not a number",
    _BAD_INDEX: "expected a non-negative integer feature index",
    _NO_COLON: "expected 'index:value'",
    _BAD_VALUE: "the feature value is not a number",
    _INDEX_TOO_LARGE: f"the feature index is larger than {MAX_FEATURES}",
    _ZERO_INDEX: "feature index 0 in a 1-based file (pass zero_based=True or 'auto')",
    _DUPLICATE: "the same feature index appears twice",
    _NON_FINITE: "the value is not finite",
}
_POW10 = np.array([10.0 ** k for k in range(23)])
_SPACE, _TAB, _CR, _NL, _HASH, _COLON = 32, 9, 13, 10, 35, 58


class LibsvmFormatError(ValueError):
    """A malformed libsvm line; ``line`` is 1-based, ``column`` 1-based within it."""

    def __init__(self, line: int, column: int, message: str, source: str = "") -> None:
        self.line, self.column, self.reason = line, column, message
        where = f"{source}:" if source else "line "
        super().__init__(f"{where}{line}:{column}: {message}")


@njit(cache=True, inline="always")
def _is_space(c):
    return c == _SPACE or c == _TAB or c == _CR  # noqa: SIM109 (numba-friendly)


@njit(cache=True)
def _parse_number(buf, pos, end, pow10):
    """Parse a decimal float at ``pos``. Returns (value, next position, status):
    status 0 exact, 1 invalid, 2 valid but outside the exact fast path."""
    negative = False
    if pos < end and (buf[pos] == 45 or buf[pos] == 43):  # '-' '+'
        negative = buf[pos] == 45
        pos += 1
    mantissa = np.int64(0)
    digits = 0        # significant digits kept in the mantissa
    exponent = 0      # decimal exponent adjustment
    seen_digit = False
    hard = False
    while pos < end and 48 <= buf[pos] <= 57:
        seen_digit = True
        if mantissa != 0 or buf[pos] != 48:
            if digits < 18:
                mantissa = mantissa * 10 + (buf[pos] - 48)
                digits += 1
            else:
                exponent += 1
                hard = True
        pos += 1
    if pos < end and buf[pos] == 46:  # '.'
        pos += 1
        while pos < end and 48 <= buf[pos] <= 57:
            seen_digit = True
            if mantissa != 0 or buf[pos] != 48:
                if digits < 18:
                    mantissa = mantissa * 10 + (buf[pos] - 48)
                    digits += 1
                    exponent -= 1
                else:
                    hard = True
            else:
                exponent -= 1
            pos += 1
    if not seen_digit:
        return 0.0, pos, 1
    if pos < end and (buf[pos] == 101 or buf[pos] == 69):  # 'e' 'E'
        pos += 1
        exp_negative = False
        if pos < end and (buf[pos] == 45 or buf[pos] == 43):
            exp_negative = buf[pos] == 45
            pos += 1
        if pos >= end or not (48 <= buf[pos] <= 57):
            return 0.0, pos, 1
        written = 0
        while pos < end and 48 <= buf[pos] <= 57:
            if written < 100000:
                written = written * 10 + (buf[pos] - 48)
            pos += 1
        exponent += -written if exp_negative else written
    if mantissa == 0:
        value = 0.0
    elif hard or digits > 15 or exponent > 22 or exponent < -22:
        return 0.0, pos, 2
    elif exponent >= 0:
        value = mantissa * pow10[exponent]
    else:
        value = mantissa / pow10[-exponent]
    return (-value if negative else value), pos, 0


@njit(cache=True)
def _parse(buf, max_rows, max_nnz, one_based, pow10):
    """Parse all lines (rows unsorted). Returns arrays, (error code, line, column), the
    spans of tokens outside the exact fast path, and the smallest index seen."""
    n = len(buf)
    labels = np.empty(max_rows, dtype=np.float64)
    indptr = np.zeros(max_rows + 1, dtype=np.int64)
    indices = np.empty(max_nnz, dtype=np.int64)
    values = np.empty(max_nnz, dtype=np.float64)
    hard_slots = np.empty(max_nnz + max_rows, dtype=np.int64)   # >= 0 value, < 0 label
    hard_spans = np.empty((max_nnz + max_rows, 2), dtype=np.int64)
    n_hard = 0
    rows = 0
    nnz = 0
    line = 0
    pos = 0
    min_index = np.int64(MAX_FEATURES)
    while pos < n:
        line += 1
        line_start = pos
        end = pos
        while end < n and buf[end] != _NL:
            end += 1
        stop = end          # content stops at a comment
        for k in range(pos, end):
            if buf[k] == _HASH:
                stop = k
                break
        while pos < stop and _is_space(buf[pos]):
            pos += 1
        if pos == stop:     # blank or comment line
            pos = end + 1
            continue
        value, nxt, status = _parse_number(buf, pos, stop, pow10)
        if status == 1 or (nxt < stop and not _is_space(buf[nxt])):
            return (labels, indptr, indices, values, rows, nnz, _BAD_LABEL, line,
                    pos - line_start + 1, hard_slots, hard_spans, n_hard, min_index)
        if status == 2:
            hard_slots[n_hard] = -1 - rows
            hard_spans[n_hard, 0] = pos
            hard_spans[n_hard, 1] = nxt
            n_hard += 1
        labels[rows] = value
        pos = nxt
        while True:
            while pos < stop and _is_space(buf[pos]):
                pos += 1
            if pos >= stop:
                break
            token = pos
            if stop - pos > 4 and buf[pos] == 113 and buf[pos + 1] == 105 and \
                    buf[pos + 2] == 100 and buf[pos + 3] == _COLON:   # 'qid:' is skipped
                pos += 4
                while pos < stop and not _is_space(buf[pos]):
                    pos += 1
                continue
            index = np.int64(0)
            while pos < stop and 48 <= buf[pos] <= 57:
                if index <= MAX_FEATURES:
                    index = index * 10 + (buf[pos] - 48)
                pos += 1
            if pos == token:
                return (labels, indptr, indices, values, rows, nnz, _BAD_INDEX, line,
                        token - line_start + 1, hard_slots, hard_spans, n_hard, min_index)
            if pos >= stop or buf[pos] != _COLON:
                return (labels, indptr, indices, values, rows, nnz, _NO_COLON, line,
                        token - line_start + 1, hard_slots, hard_spans, n_hard, min_index)
            if one_based:
                if index == 0:
                    return (labels, indptr, indices, values, rows, nnz, _ZERO_INDEX, line,
                            token - line_start + 1, hard_slots, hard_spans, n_hard,
                            min_index)
                index -= 1
            if index >= MAX_FEATURES:
                return (labels, indptr, indices, values, rows, nnz, _INDEX_TOO_LARGE, line,
                        token - line_start + 1, hard_slots, hard_spans, n_hard, min_index)
            pos += 1
            value_start = pos
            value, nxt, status = _parse_number(buf, pos, stop, pow10)
            if status == 1 or (nxt < stop and not _is_space(buf[nxt])):
                return (labels, indptr, indices, values, rows, nnz, _BAD_VALUE, line,
                        value_start - line_start + 1, hard_slots, hard_spans, n_hard,
                        min_index)
            if status == 2:
                hard_slots[n_hard] = nnz
                hard_spans[n_hard, 0] = value_start
                hard_spans[n_hard, 1] = nxt
                n_hard += 1
            pos = nxt
            indices[nnz] = index
            values[nnz] = value
            min_index = min(min_index, index)
            nnz += 1
        rows += 1
        indptr[rows] = nnz
        pos = end + 1
    return (labels, indptr, indices, values, rows, nnz, _OK, line, 0, hard_slots,
            hard_spans, n_hard, min_index)


@njit(cache=True)
def _sort_rows(indptr, indices, values):
    """Sort each row by index (insertion sort: rows are usually sorted already).
    Returns the first row holding a duplicate index, or -1. O(nnz) on sorted rows."""
    for row in range(len(indptr) - 1):
        lo, hi = indptr[row], indptr[row + 1]
        for k in range(lo + 1, hi):
            j = k
            while j > lo and indices[j - 1] > indices[j]:
                indices[j - 1], indices[j] = indices[j], indices[j - 1]
                values[j - 1], values[j] = values[j], values[j - 1]
                j -= 1
        for k in range(lo + 1, hi):
            if indices[k] == indices[k - 1]:
                return row
    return -1


def parse_libsvm(data: bytes | bytearray | memoryview | np.ndarray, n_features: int | None = None,
                 zero_based: bool | str = False, source: str = ""):
    """Parse libsvm text. Returns ``(CSRBatch, labels float64)``.

    ``n_features`` defaults to the largest index + 1; an index >= ``n_features`` is an
    error naming its line. Raises :class:`LibsvmFormatError` on a malformed line.
    """
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    max_rows = int(np.count_nonzero(buf == _NL)) + 1
    max_nnz = int(np.count_nonzero(buf == _COLON))
    (labels, indptr, indices, values, rows, nnz, code, line, column, hard_slots,
     hard_spans, n_hard, min_index) = _parse(buf, max_rows, max_nnz, zero_based is False,
                                             _POW10)
    if code != _OK:
        raise LibsvmFormatError(line, column, _MESSAGES[code], source)
    labels, indptr = labels[:rows], indptr[:rows + 1]
    indices, values = indices[:nnz], values[:nnz]
    if n_hard:
        spans = hard_spans[:n_hard]
        text = np.array([bytes(buf[a:b]) for a, b in spans])
        parsed = text.astype(np.float64)
        slots = hard_slots[:n_hard]
        values[slots[slots >= 0]] = parsed[slots >= 0]
        labels[-1 - slots[slots < 0]] = parsed[slots < 0]
    duplicate_row = _sort_rows(indptr, indices, values)
    if duplicate_row >= 0:
        raise LibsvmFormatError(_line_of_row(buf, duplicate_row), 1, _MESSAGES[_DUPLICATE],
                                source)
    if zero_based == "auto" and nnz and min_index > 0:
        indices -= 1          # no index 0 seen: the file is 1-based
    if not np.all(np.isfinite(values)):
        bad_row = int(np.searchsorted(indptr, int(np.argmin(np.isfinite(values))), "right")) - 1
        raise LibsvmFormatError(_line_of_row(buf, bad_row), 1, _MESSAGES[_NON_FINITE], source)
    if not np.all(np.isfinite(labels)):
        bad_row = int(np.argmin(np.isfinite(labels)))
        raise LibsvmFormatError(_line_of_row(buf, bad_row), 1, "the label is not finite", source)
    width = int(indices.max()) + 1 if nnz else 1
    if n_features is None:
        n_features = width
    elif width > n_features:
        bad_row = int(np.searchsorted(indptr, int(np.argmax(indices)), "right")) - 1
        raise LibsvmFormatError(_line_of_row(buf, bad_row), 1,
                                f"feature index {width - 1 + (zero_based is False)} is out of "
                                f"range for {n_features} features", source)
    batch = CSRBatch(indptr, indices.astype(np.int32), values, int(n_features))
    return batch, labels


def _line_of_row(buf: np.ndarray, row: int) -> int:
    """1-based line number of the ``row``-th example (skipping blank/comment lines)."""
    text = bytes(buf).split(b"\n")
    seen = -1
    for number, raw in enumerate(text, start=1):
        content = raw.split(b"#", 1)[0].strip()
        if content:
            seen += 1
            if seen == row:
                return number
    return len(text)


def load_libsvm(path: str | os.PathLike, n_features: int | None = None,
                zero_based: bool | str = False):
    """Read a libsvm file (see :func:`parse_libsvm`)."""
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_libsvm(data, n_features, zero_based, source=os.fspath(path))


def write_libsvm(target: str | os.PathLike | BinaryIO, batch: CSRBatch, labels,
                 zero_based: bool = False, precision: int | None = None) -> None:
    """Write ``batch`` with ``labels`` as libsvm lines.

    Values use Python's shortest round-trip ``repr`` (exact) unless ``precision`` gives a
    number of significant digits (``%.{precision}g``). Labels that are whole numbers are
    written as integers.
    """
    labels = np.asarray(labels, dtype=np.float64)
    if len(labels) != batch.n_rows:
        raise ValueError(f"{len(labels)} labels for {batch.n_rows} rows")
    offset = 0 if zero_based else 1
    value_format = repr if precision is None else f"%.{int(precision)}g".__mod__
    with contextlib.ExitStack() as stack:
        if isinstance(target, str | os.PathLike):
            target = stack.enter_context(open(target, "wb"))
        for row in range(batch.n_rows):
            lo, hi = batch.indptr[row], batch.indptr[row + 1]
            label = labels[row]
            parts = [str(int(label)) if label == int(label) else repr(float(label))]
            parts += [f"{i + offset}:{value_format(float(v))}"
                      for i, v in zip(batch.indices[lo:hi].tolist(),
                                      batch.values[lo:hi].tolist(), strict=True)]
            target.write((" ".join(parts) + "\n").encode())

"""The numba kernels of the libsvm reader (``algorithms.sparse.libsvm``): number and line
scanning, byte counts, row sorting. One pass over the bytes, no GIL, no Python per token."""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.sparse._bytes import byte_at, byte_pattern, u64_at, zero_bytes
from algorithms.sparse._decimal import (
    MAX_DIGITS,
    exact_float,
    significant_digits,
    unsigned_digits,
)
from algorithms.sparse.csr import MAX_FEATURES

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
_SPACE, _TAB, _CR, _NL, _HASH, _COLON = 32, 9, 13, 10, 35, 58


@njit(cache=True, inline="always")
def _is_space(c):
    return c == _SPACE or c == _TAB or c == _CR  # noqa: SIM109 (numba-friendly)


@njit(cache=True, inline="always")
def _ends_token(c):
    """A number ends at a space, tab, CR, newline or comment."""
    return _is_space(c) or c == _NL or c == _HASH  # noqa: SIM109 (numba-friendly)


@njit(cache=True, inline="always", error_model="numpy")
def _parse_number(address, pos, end):
    """Parse a decimal float at ``pos`` of the buffer at ``address`` (see ``_bytes``).
    Returns (value, next position, status): status 0 exact, 1 invalid, 2 valid but outside
    the exact paths of ``exact_float`` (more than 19 significant digits, leading zeros not
    counted, or an exponent out of their range)."""
    negative = False
    if pos < end:  # an optional '-' or '+', without a branch (signs are unpredictable)
        negative = byte_at(address, pos) == 45
        pos += np.int64(negative | (byte_at(address, pos) == 43))
    first = pos
    mantissa, pos = unsigned_digits(address, pos, end, np.uint64(0))
    digits = pos - first  # counted from positions: no counter updates per digit
    exponent = 0
    if pos < end and byte_at(address, pos) == 46:  # '.'
        pos += 1
        start = pos
        mantissa, pos = unsigned_digits(address, pos, end, mantissa)
        exponent = start - pos
        digits -= exponent
    if digits == 0:
        return 0.0, pos, 1
    if digits > MAX_DIGITS:  # e.g. repr of 0.000123...: leading zeros do not count
        digits = significant_digits(address, first, pos, digits)
    if pos < end and (byte_at(address, pos) == 101 or byte_at(address, pos) == 69):  # 'e' 'E'
        pos += 1
        exp_negative = False
        if pos < end and (byte_at(address, pos) == 45 or byte_at(address, pos) == 43):
            exp_negative = byte_at(address, pos) == 45
            pos += 1
        if pos >= end or not (48 <= byte_at(address, pos) <= 57):
            return 0.0, pos, 1
        written = 0
        while pos < end and 48 <= byte_at(address, pos) <= 57:
            if written < 100000:
                written = written * 10 + (byte_at(address, pos) - 48)
            pos += 1
        exponent += -written if exp_negative else written
    if digits > MAX_DIGITS:
        return 0.0, pos, 2
    value, exact = exact_float(mantissa, exponent)
    if not exact:
        return 0.0, pos, 2
    return (-value if negative else value), pos, 0


_NEWLINES, _COLONS = byte_pattern(_NL), byte_pattern(_COLON)


@njit(cache=True, nogil=True)
def _count_bytes(buf):
    """(number of newlines, number of colons): bounds for rows and non-zeros. O(size),
    eight bytes per step (``zero_bytes``: 4-5x the speed of a byte loop here; guard: the
    libsvm end-to-end table of benchmarks/online.py)."""
    n = len(buf)
    address = buf.ctypes.data
    lines = np.uint64(0)
    colons = np.uint64(0)
    pos = 0
    while pos + 8 <= n:
        word = u64_at(address, pos)
        lines += zero_bytes(word ^ _NEWLINES)
        colons += zero_bytes(word ^ _COLONS)
        pos += 8
    total_lines, total_colons = np.int64(lines), np.int64(colons)
    for k in range(pos, n):  # the last n mod 8 bytes
        total_lines += buf[k] == _NL
        total_colons += buf[k] == _COLON
    return total_lines, total_colons


@njit(cache=True, inline="always")
def _skip_to_line_end(address, pos, n):
    while pos < n and byte_at(address, pos) != _NL:
        pos += 1
    return pos


@njit(cache=True, nogil=True, error_model="numpy")
def _parse(buf, max_rows, indices, values, one_based):
    """Parse all lines in one pass (rows unsorted) into ``indices`` / ``values`` (room for
    every colon of ``buf``). Returns labels, indptr, counts, (error code, line, column), the
    spans of tokens outside the exact fast path, and the smallest index."""
    n = len(buf)
    # Every byte is read through the address (``byte_at``): no reference counting per inline
    # call, and none of the negative-index wraparound that ``buf[pos]`` pays for a signed
    # ``pos`` (reading the tokens' bytes by address: one-thread parse +12%, side by side;
    # guard: the libsvm end-to-end table of benchmarks/online.py)
    address = buf.ctypes.data
    max_nnz = len(indices)
    labels = np.empty(max_rows, dtype=np.float64)
    indptr = np.zeros(max_rows + 1, dtype=np.int64)
    hard_slots = np.empty(max_nnz + max_rows, dtype=np.int64)   # >= 0 value, < 0 label
    hard_spans = np.empty((max_nnz + max_rows, 2), dtype=np.int64)
    n_hard = 0
    rows = 0
    nnz = 0
    line = 0
    pos = 0
    code = _OK
    column = 0
    min_index = np.int64(MAX_FEATURES)
    increasing = True  # every row's indices strictly increase (no sort, no duplicates)
    while pos < n:
        line += 1
        line_start = pos
        while pos < n and _is_space(byte_at(address, pos)):
            pos += 1
        if pos >= n:
            break
        first = byte_at(address, pos)
        if first == _NL or first == _HASH:  # noqa: SIM109 (numba-friendly); blank or comment
            pos = _skip_to_line_end(address, pos, n) + 1
            continue
        value, nxt, status = _parse_number(address, pos, n)
        if status == 1 or (nxt < n and not _ends_token(byte_at(address, nxt))):
            code, column = _BAD_LABEL, pos - line_start + 1
            break
        if status == 2:
            hard_slots[n_hard] = -1 - rows
            hard_spans[n_hard, 0] = pos
            hard_spans[n_hard, 1] = nxt
            n_hard += 1
        labels[rows] = value
        pos = nxt
        previous = np.int64(-1)
        while True:
            while pos < n and _is_space(byte_at(address, pos)):
                pos += 1
            if pos >= n or byte_at(address, pos) == _NL:
                break
            if byte_at(address, pos) == _HASH:
                pos = _skip_to_line_end(address, pos, n)
                break
            token = pos
            if n - pos > 4 and byte_at(address, pos) == 113 and byte_at(address, pos + 1) == 105 \
                    and byte_at(address, pos + 2) == 100 \
                    and byte_at(address, pos + 3) == _COLON:   # 'qid:' is skipped
                pos += 4
                while pos < n and not (_is_space(byte_at(address, pos))
                                       or byte_at(address, pos) == _NL):
                    pos += 1
                continue
            index = np.int64(0)
            while pos < n:
                digit = np.uint64(byte_at(address, pos)) - np.uint64(48)
                if digit > 9:
                    break
                if index <= MAX_FEATURES:
                    index = index * 10 + np.int64(digit)
                pos += 1
            if pos == token:
                code, column = _BAD_INDEX, token - line_start + 1
                break
            if pos >= n or byte_at(address, pos) != _COLON:
                code, column = _NO_COLON, token - line_start + 1
                break
            if one_based:
                if index == 0:
                    code, column = _ZERO_INDEX, token - line_start + 1
                    break
                index -= 1
            if index >= MAX_FEATURES:
                code, column = _INDEX_TOO_LARGE, token - line_start + 1
                break
            pos += 1
            value_start = pos
            value, nxt, status = _parse_number(address, pos, n)
            if status == 1 or (nxt < n and not _ends_token(byte_at(address, nxt))):
                code, column = _BAD_VALUE, value_start - line_start + 1
                break
            if status == 2:
                hard_slots[n_hard] = nnz
                hard_spans[n_hard, 0] = value_start
                hard_spans[n_hard, 1] = nxt
                n_hard += 1
            pos = nxt
            indices[nnz] = index
            values[nnz] = value
            min_index = min(min_index, index)
            increasing &= index > previous
            previous = index
            nnz += 1
        if code != _OK:
            break
        rows += 1
        indptr[rows] = nnz
        pos += 1     # past the newline
    return (labels, indptr, rows, nnz, code, line, column, hard_slots, hard_spans, n_hard,
            min_index, increasing)


@njit(cache=True, nogil=True)
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

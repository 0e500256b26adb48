"""A numba scanner for the common shape of a JSON examples body (one pass, no GIL).

``{"examples": [{"indices": [int, ...], "values": [number, ...], "label": 1 | -1}, ...]}``
(or the bare list), keys in any order, JSON whitespace anywhere. Anything else (other
keys, escapes in keys, named features, labels written ``1.0``, numbers outside the exact
paths below, malformed JSON) makes the scanner give up, and the caller parses the body with
orjson instead, which accepts and rejects exactly as before: the scanner is only a faster
route to the same arrays, never a different judgement.

Numbers are correctly rounded: a mantissa of at most 19 significant digits with a decimal
exponent within +-22 is exact by Clinger's fast path when the mantissa is below 2^53;
otherwise, for negative exponents down to -27, by an exact integer division ``M / 5^k``
with round-half-even on 53 bits (``k`` = the decimal places). Other numbers give up.
A fraction's digits are read eight at a time (``service._swar``) while eight remain. The
conversion is shared with the libsvm reader (``algorithms.sparse._decimal``); the inline
helpers read the body by address (``algorithms.sparse._bytes``): no reference counting per
number.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.sparse._bytes import byte_at, decimal_digits, u64_at
from algorithms.sparse._decimal import (
    MAX_DIGITS,
    exact_float,
    significant_digits,
    unsigned_digits,
)
from service._swar import all_digits, eight_digits

GIVE_UP = 1  # status of a body the scanner does not handle (parse it with orjson)

_ZERO = np.uint64(0)
_KEY_INDICES = np.frombuffer(b"indices", dtype=np.uint8)
_KEY_VALUES = np.frombuffer(b"values", dtype=np.uint8)
_KEY_LABEL = np.frombuffer(b"label", dtype=np.uint8)
_KEY_EXAMPLES = np.frombuffer(b"examples", dtype=np.uint8)


@njit(cache=True, inline="always")
def _skip_ws(buf, pos, end):
    while pos < end:
        c = byte_at(buf, pos)
        if c != 32 and c != 10 and c != 13 and c != 9:
            break
        pos += 1
    return pos


MORE, CLOSED, BAD = 1, 0, -1


@njit(cache=True, inline="always")
def _after_item(buf, pos, end, closer):
    """After an array element or object member: (MORE, position of the next one) on ',',
    (CLOSED, position past ``closer``) on the closing bracket, (BAD, pos) otherwise."""
    pos = _skip_ws(buf, pos, end)
    if pos < end and byte_at(buf, pos) == 44:
        return MORE, _skip_ws(buf, pos + 1, end)
    if pos < end and byte_at(buf, pos) == closer:
        return CLOSED, pos + 1
    return BAD, pos


@njit(cache=True, inline="always")
def _number(buf, pos, end):
    """A JSON number at ``pos`` -> (value, next position, is_integer, ok)."""
    start = pos
    if pos >= end:
        return 0.0, pos, False, False
    negative = byte_at(buf, pos) == 45
    pos += np.int64(negative)  # no branch: signs are unpredictable
    if pos >= end or not (48 <= byte_at(buf, pos) <= 57):
        return 0.0, pos, False, False
    mantissa = _ZERO
    first = pos  # the first digit; leading zeros are counted out below, rarely
    if byte_at(buf, pos) == 48:  # a leading zero stands alone
        pos += 1
        if pos < end and 48 <= byte_at(buf, pos) <= 57:
            return 0.0, pos, False, False
    else:
        mantissa, pos = unsigned_digits(buf, pos, end, mantissa)
    digits = pos - first
    exponent = 0
    integer = True
    if pos < end and byte_at(buf, pos) == 46:  # '.'
        integer = False
        pos += 1
        fraction = pos
        while pos + 8 <= end:  # eight digits at a time while they are all digits
            word = u64_at(buf, pos)
            if not all_digits(word):
                break
            mantissa = mantissa * np.uint64(100000000) + eight_digits(word)
            pos += 8
        mantissa, pos = unsigned_digits(buf, pos, end, mantissa)
        if pos == fraction:
            return 0.0, pos, False, False
        exponent = fraction - pos
        digits += pos - fraction
    if digits > MAX_DIGITS:
        digits = significant_digits(buf, first, pos, digits)
    if pos < end and (byte_at(buf, pos) == 101 or byte_at(buf, pos) == 69):  # 'e' 'E'
        integer = False
        pos += 1
        exp_negative = False
        if pos < end and (byte_at(buf, pos) == 45 or byte_at(buf, pos) == 43):
            exp_negative = byte_at(buf, pos) == 45
            pos += 1
        if pos >= end or not (48 <= byte_at(buf, pos) <= 57):
            return 0.0, pos, False, False
        written = 0
        while pos < end and 48 <= byte_at(buf, pos) <= 57:
            if written < 100000:
                written = written * 10 + (byte_at(buf, pos) - 48)
            pos += 1
        exponent += -written if exp_negative else written
    if digits > MAX_DIGITS or (integer and digits > 18):
        return 0.0, start, integer, False
    if mantissa == _ZERO:
        value = 0.0
        if negative and not integer:
            value = -0.0
        return value, pos, integer, True
    value, exact = exact_float(mantissa, exponent)
    if not exact:
        return 0.0, start, integer, False
    if integer:  # orjson makes an int of it (|value| < 2^63: at most 18 digits)
        value = float(np.int64(mantissa))
    return (-value if negative else value), pos, integer, True


@njit(cache=True, inline="always")
def _integer(buf, pos, end):
    """A non-negative JSON integer below 2^31 at ``pos`` -> (value, next position, ok).
    Not ok for anything else (a sign, fraction or exponent, a leading zero, too many
    digits): the caller gives up, and orjson and the validation judge such a body."""
    start = pos
    value, pos = decimal_digits(buf, pos, end, np.int64(0))
    digits = pos - start
    if digits == 0 or digits > 10 or (digits > 1 and byte_at(buf, start) == 48):
        return 0, pos, False
    if pos < end:
        c = byte_at(buf, pos)
        if c == 46 or c == 101 or c == 69:  # '.' 'e' 'E'
            return 0, pos, False
    return value, pos, value <= 2147483647


@njit(cache=True, inline="always")
def _key(buf, pos, end, key):
    """``pos`` at a '"': (next position after the closing quote, matched)."""
    n = len(key)
    if pos + n + 1 >= end:
        return pos, False
    for i in range(n):
        if byte_at(buf, pos + 1 + i) != key[i]:
            return pos, False
    if byte_at(buf, pos + 1 + n) != 34:
        return pos, False
    return pos + n + 2, True


@njit(cache=True)
def _array(buf, pos, end, indices, values, slot, integers):
    """The elements of a JSON array after its '[' -> (ok, position after the ']', count):
    into ``indices[slot:]`` as integers when ``integers``, else into ``values[slot:]`` as
    numbers. A loop of its own, with a fast path for a ',' right after an element."""
    count = 0
    pos = _skip_ws(buf, pos, end)
    if pos < end and byte_at(buf, pos) == 93:
        return True, pos + 1, 0
    room = len(indices) - slot
    while count < room:
        if integers:
            index, pos, ok = _integer(buf, pos, end)
            indices[slot + count] = index
        else:
            value, pos, _, ok = _number(buf, pos, end)
            values[slot + count] = value
        if not ok:
            return False, pos, count
        count += 1
        if pos + 1 < end and byte_at(buf, pos) == 44 and \
                45 <= byte_at(buf, pos + 1) <= 57:  # ',' then '-' or a digit
            pos += 1
            continue
        step, pos = _after_item(buf, pos, end, 93)
        if step != MORE:
            return step == CLOSED, pos, count
    return False, pos, count


@njit(cache=True, nogil=True)
def _scan(body, capacity, max_examples, k_examples, k_indices, k_values, k_label):
    """-> (status, n, lengths, labels, indices, values, nnz); status 0 when handled.
    ``capacity`` bounds the array elements, ``max_examples`` the examples: the arrays are
    sized once (growing them inside the loop measured 15% slower)."""
    end = len(body)
    buf = body.ctypes.data  # the helpers read by address (see algorithms.sparse._bytes)
    lengths = np.empty(max_examples, dtype=np.int64)
    labels = np.empty(max_examples, dtype=np.int8)
    indices = np.empty(capacity, dtype=np.int32)
    values = np.empty(capacity, dtype=np.float64)
    nnz = 0
    n = 0
    pos = _skip_ws(buf, 0, end)
    wrapped = False
    if pos < end and byte_at(buf, pos) == 123:  # {"examples": [...]}
        wrapped = True
        pos = _skip_ws(buf, pos + 1, end)
        if pos >= end or byte_at(buf, pos) != 34:
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        pos, ok = _key(buf, pos, end, k_examples)
        if not ok:
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        pos = _skip_ws(buf, pos, end)
        if pos >= end or byte_at(buf, pos) != 58:
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        pos = _skip_ws(buf, pos + 1, end)
    if pos >= end or byte_at(buf, pos) != 91:
        return GIVE_UP, n, lengths, labels, indices, values, nnz
    pos = _skip_ws(buf, pos + 1, end)
    while True:  # one example object per turn
        if pos >= end or byte_at(buf, pos) != 123:
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        pos = _skip_ws(buf, pos + 1, end)
        seen_indices = seen_values = seen_label = False
        n_indices = n_values = 0
        label = 0
        row_start = nnz
        while True:  # one member per turn
            if pos >= end or byte_at(buf, pos) != 34:
                return GIVE_UP, n, lengths, labels, indices, values, nnz
            which = 0
            after, ok = _key(buf, pos, end, k_indices)
            if ok:
                which = 1
            else:
                after, ok = _key(buf, pos, end, k_values)
                if ok:
                    which = 2
                else:
                    after, ok = _key(buf, pos, end, k_label)
                    if ok:
                        which = 3
            if which == 0:
                return GIVE_UP, n, lengths, labels, indices, values, nnz
            pos = _skip_ws(buf, after, end)
            if pos >= end or byte_at(buf, pos) != 58:
                return GIVE_UP, n, lengths, labels, indices, values, nnz
            pos = _skip_ws(buf, pos + 1, end)
            if which == 3:
                if seen_label:
                    return GIVE_UP, n, lengths, labels, indices, values, nnz
                seen_label = True
                value, pos, integer, ok = _number(buf, pos, end)
                if not ok or not integer or (value != 1.0 and value != -1.0):
                    return GIVE_UP, n, lengths, labels, indices, values, nnz
                label = 1 if value > 0 else -1
            else:
                if (which == 1 and seen_indices) or (which == 2 and seen_values):
                    return GIVE_UP, n, lengths, labels, indices, values, nnz
                if pos >= end or byte_at(buf, pos) != 91:
                    return GIVE_UP, n, lengths, labels, indices, values, nnz
                ok, pos, count = _array(buf, pos + 1, end, indices, values, row_start,
                                        which == 1)
                if not ok:
                    return GIVE_UP, n, lengths, labels, indices, values, nnz
                if which == 1:
                    seen_indices = True
                    n_indices = count
                else:
                    seen_values = True
                    n_values = count
            step, pos = _after_item(buf, pos, end, 125)
            if step == MORE:
                continue
            if step == CLOSED:
                break
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        if not (seen_indices and seen_values and seen_label) or n_indices != n_values:
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        nnz = row_start + n_indices
        if n >= len(lengths):  # cannot happen: an example takes 32 bytes or more
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        lengths[n] = n_indices
        labels[n] = label
        n += 1
        step, pos = _after_item(buf, pos, end, 93)
        if step == MORE:
            continue
        if step == CLOSED:
            break
        return GIVE_UP, n, lengths, labels, indices, values, nnz
    pos = _skip_ws(buf, pos, end)
    if wrapped:
        if pos >= end or byte_at(buf, pos) != 125:
            return GIVE_UP, n, lengths, labels, indices, values, nnz
        pos = _skip_ws(buf, pos + 1, end)
    if pos != end:
        return GIVE_UP, n, lengths, labels, indices, values, nnz
    return 0, n, lengths, labels, indices, values, nnz


def scan_examples(body: bytes):
    """(indptr int64, indices int32, values float64, labels int8) of a body of the common
    shape, or None: then parse it with orjson (see the module docstring)."""
    buf = np.frombuffer(body, dtype=np.uint8)
    # Bounds from the size alone (counting commas and keys first cost a quarter of the
    # scan): an element takes at least 2 bytes ("1,"), an example at least 32
    # ('{"indices":[],"values":[],"label":1}'). The arrays are reserved, not touched: only
    # what the body fills becomes resident.
    status, n, lengths, labels, indices, values, nnz = _scan(
        buf, len(buf) // 2 + 16, len(buf) // 32 + 1, _KEY_EXAMPLES,
        _KEY_INDICES, _KEY_VALUES, _KEY_LABEL)
    if status != 0 or n == 0:
        return None
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths[:n], out=indptr[1:])
    return indptr, indices[:nnz], values[:nnz], labels[:n]

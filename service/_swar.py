"""Eight decimal digits at a time (SWAR) for the JSON scanner's long fractions (the libsvm
parser's 7-8 digit values measured no gain from it). Little-endian; a byte is a digit when
its high nibble is 3 both as it is and plus 6."""

from __future__ import annotations

import numpy as np
from numba import njit

import algorithms  # noqa: F401  (first: it points numba's cache at the folder of its key)

_ASCII_ZEROS = np.uint64(0x3030303030303030)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_SIX = np.uint64(0x0606060606060606)
_NONE = np.uint64(0)


@njit(cache=True, inline="always")
def all_digits(word):
    """True when the eight bytes of ``word`` are all ASCII digits."""
    return (((word & _HIGH_NIBBLES) ^ _ASCII_ZEROS)
            | (((word + _SIX) & _HIGH_NIBBLES) ^ _ASCII_ZEROS)) == _NONE


@njit(cache=True, inline="always")
def eight_digits(word):
    """The value (uint64) of eight ASCII digits, the first in the lowest byte: pairs, then
    quads, then the eight, by three multiplications."""
    x = word - _ASCII_ZEROS
    x = (x * np.uint64(10) + (x >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    x = (x * np.uint64(100) + (x >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    return (x * np.uint64(10000) + (x >> np.uint64(32))) & np.uint64(0xFFFFFFFF)

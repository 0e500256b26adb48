"""Byte reads by address, byte counting and float bits, for the numba kernels.

Passing an array to a numba function, inline ones included, costs an atomic increment and
decrement of its reference count per call wherever numba cannot prove the pair redundant,
which it could not across the branches of the number parsers: called once per number,
those pairs took 45% of the libsvm reader's time and 65% of the JSON scanner's. The
helpers take the buffer's address (``buf.ctypes.data``) and read through it; the caller
holds the array (keeping it alive) and checks every position against its length. Guards:
the libsvm end-to-end table of ``benchmarks/online.py``, and the service's JSON ingestion
(``load_tests/service_load.py``).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def byte_at(typingctx, address, pos):
    """The byte (uint8) at ``address + pos``. One load; no bounds check."""
    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return builder.load(builder.gep(pointer, [args[1]]))
    return types.uint8(address, pos), codegen


@intrinsic
def u64_at(typingctx, address, pos):
    """The eight bytes at ``address + pos`` as one little-endian uint64: a single unaligned
    load (numba would emit eight byte loads). No bounds check."""
    def codegen(context, builder, signature, args):
        pointer = builder.gep(builder.inttoptr(args[0], ir.IntType(8).as_pointer()), [args[1]])
        return builder.load(builder.bitcast(pointer, ir.IntType(64).as_pointer()), align=1)
    return types.uint64(address, pos), codegen


@intrinsic
def float_bits(typingctx, x):
    """The IEEE-754 bits of a float64 as a uint64 (a bitcast, no instruction). For x >= +0
    the bits order like the values; negative x maps above every positive one."""
    if not isinstance(x, types.Float) or x.bitwidth != 64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@intrinsic
def popcount(typingctx, x):
    """The number of set bits of a uint64: one instruction (LLVM ctpop)."""
    def codegen(context, builder, signature, args):
        count = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(count, [args[0]])
    return types.uint64(types.uint64), codegen


_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)


@njit(cache=True, inline="always")
def zero_bytes(word):
    """How many of the eight bytes of ``word`` are zero (exact: adding 0x7F to each byte's
    low seven bits sets its high bit unless they are all zero, and cannot carry into the
    next byte)."""
    t = (word & _LOW7) + _LOW7
    return popcount(~(t | word | _LOW7))


def byte_pattern(byte: int) -> np.uint64:
    """``byte`` repeated in all eight bytes of a uint64: ``zero_bytes(word ^ pattern)``
    counts that byte in ``word``."""
    return np.uint64(0x0101010101010101 * byte)


@njit(cache=True, inline="always")
def decimal_digits(address, pos, end, value):
    """Append the decimal digits at ``address + pos`` to ``value`` (int64): (value * 10^k +
    their value, the position after them). The caller bounds the digit count (int64 wraps
    past 18 digits). The JSON scanner's integers; the float readers take
    ``_decimal.unsigned_digits``."""
    while pos < end:
        digit = np.uint64(byte_at(address, pos)) - np.uint64(48)
        if digit > 9:
            break
        value = value * 10 + np.int64(digit)
        pos += 1
    return value, pos

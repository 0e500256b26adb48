"""Correctly rounded decimal -> float64 for the numba number readers (the libsvm reader,
the service's JSON scanner).

A number is read as an unsigned 64-bit mantissa M of at most 19 significant digits and a
decimal exponent e, its value M * 10^e. ``exact_float`` rounds it correctly, or says it
cannot: by Clinger's fast path when M <= 2^53 and |e| <= 22 (M and 10^|e| are exact
doubles, one correctly rounded multiplication or division), else for -27 <= e < 0 by the
integer division M / 5^k scaled by 2^-k (k = -e) with round-half-even on 53 bits: one
128-bit product with a precomputed reciprocal, or the exact long division in the ~1 in 500
cases where the product cannot decide the rounding. Anything else is left to the caller's
slow path (Python's ``float``, orjson).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from algorithms.sparse._bytes import byte_at

MAX_DIGITS = 19   # significant digits an unsigned 64-bit mantissa always holds
_POW10 = np.array([10.0 ** k for k in range(23)])
_POW5 = np.array([5 ** k for k in range(28)], dtype=np.uint64)
_RECIP_SHIFT = np.array([63 + (5 ** k).bit_length() for k in range(28)], dtype=np.int64)
_RECIP = np.array([0] + [(1 << int(_RECIP_SHIFT[k])) // 5 ** k for k in range(1, 28)],
                  dtype=np.uint64)  # floor(2^shift / 5^k) in [2^63, 2^64); k = 0 unused
_POW2_MIN = -160  # 2^e for the exponents _divide_fast can produce (-142 .. 8)
_POW2 = np.array([2.0**e for e in range(_POW2_MIN, 17)])
_TWO53 = np.uint64(1 << 53)
_TWO54 = np.uint64(1 << 54)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_TEN = np.uint64(10)
_ASCII_ZERO = np.uint64(48)


@intrinsic
def _leading_zeros(typingctx, x):
    """Leading zero bits of a uint64 (64 for 0): one instruction (LLVM ctlz)."""
    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
    return types.uint64(types.uint64), codegen


@njit(cache=True, inline="always")
def _bit_length(x):
    return 64 - np.int64(_leading_zeros(x))


@intrinsic
def _mul_128(typingctx, a, b):
    """The 128-bit product of two uint64 as (high, low): one widening multiply."""
    def codegen(context, builder, signature, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        low = builder.trunc(product, ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, [high, low])
    return types.UniTuple(types.uint64, 2)(types.uint64, types.uint64), codegen


@njit(cache=True)
def _divide(mantissa, k, divisor):
    """mantissa / 10^k correctly rounded (round half to even), 0 <= k <= 27, mantissa > 0,
    ``divisor`` = 5^k."""
    q = mantissa // divisor
    r = mantissa - q * divisor
    shift = 0
    room = 64 - _bit_length(divisor)  # r < divisor: r << room cannot overflow
    while q < _TWO54:  # append quotient bits until there are 55 (53 + guard + 1)
        step = min(room, 55 - _bit_length(q))
        c = np.uint64(step)
        r <<= c
        digit = r // divisor
        q = (q << c) | digit
        r -= digit * divisor
        shift += step
    extra = _bit_length(q) - 53
    e = np.uint64(extra)
    top = q >> e
    rest = q & ((_ONE << e) - _ONE)
    half = _ONE << np.uint64(extra - 1)
    if rest > half or (rest == half and (r != _ZERO or (top & _ONE) == _ONE)):
        top += _ONE
    return math.ldexp(float(top), extra - shift - k)


@njit(cache=True, inline="always")
def _divide_fast(mantissa, k, reciprocal, shift, divisor):
    """mantissa / 10^k correctly rounded, 1 <= k <= 27: one 64x64 -> 128-bit product with
    ``reciprocal`` = floor(2^shift / 5^k) in [2^63, 2^64) gives the quotient to within
    2^64 in its low 64 bits; when that cannot move the rounding of the 53 kept bits the
    result is exact, else (about 1 in 500 numbers) the exact long division decides."""
    z = 64 - _bit_length(mantissa)
    high, low = _mul_128(mantissa << np.uint64(z), reciprocal)
    drop = 11 if high >= (_ONE << np.uint64(63)) else 10  # bits of `high` below the kept 53
    kept = high >> np.uint64(drop)
    rest = high & ((_ONE << np.uint64(drop)) - _ONE)
    half = _ONE << np.uint64(drop - 1)
    if rest + _ONE < half:
        pass  # the dropped bits stay below one half whatever the error: round down
    elif rest > half or (rest == half and low > _ZERO):
        kept += _ONE  # the dropped bits exceed one half: round up
    else:
        return _divide(mantissa, k, divisor)
    return float(kept) * _POW2[64 + drop - shift - z - k - _POW2_MIN]  # exact: a power of 2


@njit(cache=True, inline="always")
def exact_float(mantissa, exponent):
    """(mantissa * 10^exponent correctly rounded, True), or (0.0, False) outside the exact
    paths; ``mantissa`` a uint64 of at most ``MAX_DIGITS`` significant digits."""
    if mantissa == _ZERO:
        return 0.0, True
    if mantissa <= _TWO53 and -22 <= exponent <= 22:
        m = float(mantissa)
        return (m * _POW10[exponent] if exponent >= 0 else m / _POW10[-exponent]), True
    if exponent == 0:
        return float(mantissa), True   # the conversion rounds correctly
    if -27 <= exponent < 0:
        k = -exponent
        return _divide_fast(mantissa, k, _RECIP[k], _RECIP_SHIFT[k], _POW5[k]), True
    return 0.0, False


@njit(cache=True, inline="always")
def unsigned_digits(address, pos, end, mantissa):
    """Append the decimal digits at ``address + pos`` to the uint64 ``mantissa``: (mantissa
    * 10^k + their value, the position after them). It wraps past 19 significant digits;
    callers count them (``significant_digits``) before they use it."""
    while pos < end:
        digit = np.uint64(byte_at(address, pos)) - _ASCII_ZERO
        if digit > 9:
            break
        mantissa = mantissa * _TEN + digit
        pos += 1
    return mantissa, pos


@njit(cache=True, inline="always")
def significant_digits(address, first, end, digits):
    """``digits`` (the digits of the number spelled from ``first`` to ``end``, a '.' in
    between allowed) less its leading zeros, which neither count nor grow the mantissa.
    Callers need it only when ``digits`` exceeds ``MAX_DIGITS``."""
    for k in range(first, end):
        c = byte_at(address, k)
        if c != 48 and c != 46:
            break
        digits -= c == 48
    return digits

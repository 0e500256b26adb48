"""Fused multiply-add for the kernels: ``fma(a, b, c) = a * b + c`` with one rounding.

Written out rather than left to ``fastmath={"contract"}``, which lets LLVM fuse whichever
products it likes: two kernels that must agree bit for bit (SOFS with B >= d and AROW) could
then round differently. ``llvm.fma`` is one instruction on x86-64 CPUs with FMA3 (2013 on)
and is computed exactly in software elsewhere, so a result never depends on the compiler.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["fma"]


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c for float64 arguments, rounded once (IEEE-754 fusedMultiplyAdd)."""
    if not all(isinstance(v, types.Float) for v in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fused = builder.module.declare_intrinsic(
            "llvm.fma", [double], ir.FunctionType(double, [double, double, double]))
        operands = [context.cast(builder, v, t, types.float64)
                    for v, t in zip(args, signature.args, strict=True)]
        return builder.call(fused, operands)
    return types.float64(a, b, c), codegen

"""Software prefetch hints for the kernels that stream a CSR batch.

A learner's score loop reads ``indices`` and ``values`` once, front to back, and gathers a
weight per entry. Left to the hardware prefetcher, the stream arrived too late on the
machines measured: the gathers filled the load queue and the stream stalled on DRAM (an
X1 score loop ran at half the speed of a loop that only reads the batch). Asking for the
entry ``STREAM_AHEAD`` positions ahead on every step restores the stream's speed
(~2x for the score loop, +40% for OGD, side by side; guard: the training-throughput table
of ``benchmarks/online.py``). A prefetch is only a hint: it never faults, so addresses past
the end of an array are harmless, and it changes no result.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

# Entries ahead of the current one: 4 KiB of float64 values, far enough to cover DRAM
# latency at the loop's speed (256 was 15% slower on X1; 1024 the same as 512; guard:
# benchmarks/online.py).
STREAM_AHEAD = 512

_I8_PTR = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def _as_int64(builder, value, numba_type):
    """An integer of any width and signedness as an LLVM i64."""
    if value.type == _I64:
        return value
    extend = builder.sext if numba_type.signed else builder.zext
    return extend(value, _I64)


def _emit_prefetch(context, builder, array_type, array, index):
    """Emit llvm.prefetch(read, high locality, data) of ``&array.flat[index]`` (index an
    i64); plain integer arithmetic (no inbounds GEP), since the address may lie past the
    end."""
    data = context.make_array(array_type)(context, builder, array).data
    itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
    offset = builder.mul(index, ir.Constant(_I64, itemsize))
    address = builder.inttoptr(builder.add(builder.ptrtoint(data, _I64), offset), _I8_PTR)
    hint = builder.module.declare_intrinsic(
        "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [_I8_PTR, _I32, _I32, _I32]))
    builder.call(hint, [address, ir.Constant(_I32, 0), ir.Constant(_I32, 3),
                        ir.Constant(_I32, 1)])


@intrinsic
def prefetch(typingctx, array, index):
    """Hint the cache line holding ``array.flat[index]`` (C-contiguous array, integer
    index; no bounds check needed). One instruction, no result."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        index = _as_int64(builder, args[1], signature.args[1])
        _emit_prefetch(context, builder, signature.args[0], args[0], index)
        return context.get_dummy_value()
    return types.void(array, index), codegen


@intrinsic
def stream_ahead(typingctx, indices, values, position):
    """Prefetch ``indices[position + STREAM_AHEAD]`` and ``values[position +
    STREAM_AHEAD]``: call once per entry of a loop over a CSR batch."""
    if not all(isinstance(a, types.Array) for a in (indices, values)) or not isinstance(
            position, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ahead = builder.add(_as_int64(builder, args[2], signature.args[2]),
                            ir.Constant(_I64, STREAM_AHEAD))
        _emit_prefetch(context, builder, signature.args[0], args[0], ahead)
        _emit_prefetch(context, builder, signature.args[1], args[1], ahead)
        return context.get_dummy_value()
    return types.void(indices, values, position), codegen

"""Log entries whose ``data`` is any buffer (the Redis reader gives big values as uint8
arrays) parse exactly like the same bytes, in every format, and fail the same way."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from service import fbx1
from service.errors import InputError
from service.ingest import parse_entry

LIBSVM = b"1 3:0.5 7:-2\n-1 1:1e-3\n"
JSON = orjson.dumps({"examples": [{"indices": [2, 6], "values": [0.5, -2.0], "label": 1},
                                  {"indices": [0], "values": [0.001], "label": -1}]})
BINARY = fbx1.encode_batch(np.array([0, 2, 3]), np.array([2, 6, 0]),
                           np.array([0.5, -2.0, 1e-3]), np.array([1, -1]))


def _as(kind: str, data: bytes):
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    array = np.empty(len(data), dtype=np.uint8)
    array[:] = np.frombuffer(data, dtype=np.uint8)
    return array


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "uint8 array"])
@pytest.mark.parametrize("fmt", [b"libsvm", b"json", b"bin", None])
def test_any_buffer_parses_like_bytes(kind, fmt):
    for data in (LIBSVM, JSON, BINARY):
        if fmt is not None and fbx1.infer_format(data) != fmt.decode():
            continue
        fields = {b"data": _as(kind, data)}
        if fmt is not None:
            fields[b"fmt"] = fmt
        got = parse_entry(fields, 10, None)
        want = parse_entry({b"data": data}, 10, None)
        assert got.X.indptr.tolist() == want.X.indptr.tolist() == [0, 2, 3]
        assert got.X.indices.tolist() == want.X.indices.tolist() == [2, 6, 0]
        assert got.X.values.tobytes() == want.X.values.tobytes()
        assert got.labels.tolist() == [1, -1]


@pytest.mark.parametrize("data", [b"  \n{\"examples\": []}", b"[]", b"FBX1", b"1 1:1\n"])
def test_format_inference_reads_any_buffer(data):
    assert fbx1.infer_format(_as("uint8 array", data)) == fbx1.infer_format(data)


@pytest.mark.parametrize("data, message", [
    (b"1 1:1\n\n2 1:1\n", r"line 3, field .label.: label 2.0 is not -1 or \+1"),
    (b"1 1:1 1:2\n", "appears twice"),
    (b"FBX1 truncated", "binary batch"),
])
def test_errors_are_the_same_for_any_buffer(data, message):
    details = []
    for kind in ("bytes", "uint8 array"):
        with pytest.raises(InputError, match=message) as error:
            parse_entry({b"data": _as(kind, data)}, 10, None)
        details.append((error.value.detail, repr(getattr(error.value, "errors", None))))
    assert details[0] == details[1]

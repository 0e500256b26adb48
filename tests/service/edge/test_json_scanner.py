"""The numba JSON scanner: exactly the arrays (and errors) of the orjson path, or gives up."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from service import _json, ingest
from service._json import _number, scan_examples
from service.errors import InputError, MalformedBodyError


def _scan_number(token: bytes):
    buf = np.frombuffer(token, dtype=np.uint8)  # alive while _number reads its address
    return _number(buf.ctypes.data, 0, len(buf))


def test_numbers_are_correctly_rounded_or_given_up():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.random(4000), rng.standard_normal(4000),
                             rng.random(4000) * 10.0 ** rng.integers(-12, 12, 4000),
                             rng.random(2000).astype(np.float32).astype(float)])
    pick = random.Random(0)
    tokens = [orjson.dumps(v) for v in values.tolist()]
    tokens += [b"%.*e" % (pick.randint(0, 20), v) for v in values[:3000].tolist()]
    tokens += [b"%.*f" % (pick.randint(0, 25), v) for v in values[:3000].tolist()]
    tokens += [str(pick.randint(-10**18, 10**18)).encode() for _ in range(1000)]
    tokens += [b"9007199254740993", b"0.1", b"-0.0", b"-0", b"0", b"1e22", b"1e23",
               b"0.30000000000000004", b"123456789012345678.9", b"2.5e-27", b"1e-28",
               b"1.7976931348623157e308", b"5e-324"]
    handled = 0
    for token in tokens:
        value, end, integer, ok = _scan_number(token)
        if not ok:
            continue
        handled += 1
        expected = float(orjson.loads(token))
        assert end == len(token), token
        assert np.float64(value).tobytes() == np.float64(expected).tobytes(), token
        assert integer == isinstance(orjson.loads(token), int), token
    usual = 8000  # shortest round-trip reprs of values of usual magnitudes: all handled
    assert sum(_scan_number(t)[3] for t in tokens[:usual]) >= 0.999 * usual
    assert handled > 0.9 * len(tokens)
    for token in [b"01", b"1.", b".5", b"+1", b"-", b"1e", b"1e+", b"--1", b"1.e5", b"-01"]:
        _, end, _, ok = _scan_number(token)
        assert not ok or end != len(token), token


def test_numbers_next_to_a_rounding_midpoint():
    """Decimal strings within one unit of the 17th-19th digit of the midpoint between two
    neighbouring doubles: where a one-multiply estimate cannot decide the rounding."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    pick = random.Random(5)
    handled = 0
    for _ in range(3000):
        low = pick.random() * 10.0 ** pick.randint(-8, 3)
        middle = (Decimal(low) + Decimal(float(np.nextafter(low, np.inf)))) / 2
        digits = pick.randint(16, 19)
        mantissa, exponent = format(middle, f".{digits}e").split("e")
        for nudge in (-1, 0, 1):
            token = f"{Decimal(mantissa) + nudge * Decimal(10) ** -digits}e{exponent}".encode()
            value, end, _, ok = _scan_number(token)
            if ok:
                handled += 1
                assert end == len(token), token
                assert np.float64(value).tobytes() == np.float64(float(token)).tobytes(), token
    assert handled > 5000


def _slow(body: bytes, n_features: int):
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ("malformed",)
    try:
        batch = ingest.parse_json_examples(document, n_features, None)
    except InputError as exc:
        return ("error", exc.detail, repr(getattr(exc, "errors", None)))
    return ("ok", batch.X.indptr.tobytes(), batch.X.indices.tobytes(),
            batch.X.values.tobytes(), batch.labels.tobytes())


def _fast(body: bytes, n_features: int):
    try:
        batch = ingest.parse_json_body(body, n_features, None)
    except MalformedBodyError:
        return ("malformed",)
    except InputError as exc:
        return ("error", exc.detail, repr(getattr(exc, "errors", None)))
    return ("ok", batch.X.indptr.tobytes(), batch.X.indices.tobytes(),
            batch.X.values.tobytes(), batch.labels.tobytes())


def test_same_batches_and_errors_as_the_orjson_path():
    rng = np.random.default_rng(1)
    scanned = 0
    for trial in range(700):
        examples = []
        for _ in range(int(rng.integers(1, 5))):
            k = int(rng.integers(0, 6))
            examples.append({
                "indices": sorted(rng.choice(1000, k, replace=False).tolist()),
                "values": (rng.standard_normal(k) * 10.0 ** rng.integers(-8, 4)).tolist(),
                "label": int(rng.choice([-1, 1]))})
        body = orjson.dumps({"examples": examples} if trial % 2 else examples)
        mutation = trial % 7
        if mutation == 1:
            p = int(rng.integers(0, len(body)))
            body = body[:p] + bytes([body[p] ^ 1]) + body[p + 1:]
        elif mutation == 2:
            body = body.replace(b"1,", b"1 , ", 3).replace(b":", b" :\n\t", 2)
        elif mutation == 3:
            body = body.replace(b'"label":1', b'"label":1.0').replace(b'"label":-1',
                                                                    b'"label":2')
        elif mutation == 4:
            body = body.replace(b'"indices":[', b'"indices":[-3,', 1)
        elif mutation == 5:
            body = body[:int(rng.integers(0, len(body)))]
        elif mutation == 6:
            body = body.replace(b'"indices":[', b'"indices":[5,5,', 1)
        scanned += scan_examples(body) is not None
        assert _fast(body, 1000) == _slow(body, 1000), body[:300]
    assert scanned > 200


@pytest.mark.parametrize("body", [
    b'{"examples": [{"features": {"a": {"b": 1}}, "label": 1}]}',
    b'[{"indices": [1], "values": [1], "label": 1.0}]',
    b'[{"indices": [1], "values": [1], "label": 1, "weight": 2}]',
    b'[{"ind\\u0069ces": [1], "values": [1], "label": 1}]',
    b'[{"indices": [1], "indices": [2], "values": [1], "label": 1}]',
    b'[{"indices": [1.0], "values": [1], "label": 1}]',
    b'[{"indices": [1], "values": [1e-40], "label": 1}]',
    b'{"examples": [], "x": 1}',
    b'[]',
    b'[{"indices": [1], "values": [1], "label": 1}] x',
])
def test_gives_up_on_anything_else(body):
    assert scan_examples(body) is None


def test_reads_in_place_buffers_too():
    body = b' {"examples" : [ {"label": -1, "values": [0.5, -2e-3], "indices": [7, 3]} ] } '
    for buffer in (body, bytearray(body)):
        indptr, indices, values, labels = scan_examples(buffer)
        assert indptr.tolist() == [0, 2] and indices.tolist() == [7, 3]
        assert values.tolist() == [0.5, -2e-3] and labels.tolist() == [-1]


def test_numbers_inside_arrays_next_to_every_separator():
    """Numbers scanned in place in a longer body (eight digits at a time where eight
    bytes remain): fractions of 1-20 digits followed by each byte JSON allows after a
    number, and by bytes that must stop the digits ('.', '/', ':', letters)."""
    pick = random.Random(7)
    bodies = []
    for _ in range(3000):
        digits = "".join(pick.choice("0123456789") for _ in range(pick.randint(1, 20)))
        sign = pick.choice(["", "-"])
        token = f"{sign}{pick.choice(['0', '7', '12'])}.{digits}"
        if pick.random() < 0.2:
            token += pick.choice(["e", "E"]) + pick.choice(["", "-", "+"]) + \
                str(pick.randint(0, 9))
        after = pick.choice([",", "]", " ]", "\n,", ",-1.5", ", 0.25", "]", "e", ".", "/",
                             ":", "x", "0]"])
        bodies.append(f"[{token}{after}1.25]".encode() if after.endswith(",") or
                      after.startswith(",") else f"[{token}{after}".encode())
    for body in bodies:
        try:
            expected = [float(v) for v in orjson.loads(body)]
        except (orjson.JSONDecodeError, TypeError):
            expected = None
        buf = np.frombuffer(body, dtype=np.uint8)
        out = np.zeros(8)
        ok, end, count = _json._array(buf.ctypes.data, 1, len(buf), np.zeros(8, np.int32),
                                      out, 0, False)
        if ok:  # the scanner never accepts what orjson rejects, and agrees on each value
            assert expected is not None, body
            assert end == len(body.rstrip()), body
            assert out[:count].tobytes() == np.array(expected).tobytes(), body
        elif expected is not None:  # giving up is allowed, but only for the rare numbers
            assert any(len(t.strip().lstrip("-").replace(".", "").lstrip("0")) > 17 or "e" in
                       t.lower() for t in body.decode()[1:].rstrip("]").split(",")), body

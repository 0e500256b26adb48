"""A fuzzer of the HTTP API of a running ``featurebudget serve``: schemathesis over the
OpenAPI document (stateless, positive and negative, and stateful along the document's
links), plus hypothesis strategies for the bodies the document cannot describe (libsvm
text, FBX1 binary, structured JSON examples, snapshot blobs).

Every answer is checked the same way:

* no 5xx, and no connection error;
* a 4xx is ``application/problem+json`` with ``title``, ``status`` (the answer's) and a
  non-empty ``detail``; a 400 / 422 also lists ``errors`` each naming where (field, item or
  line);
* a 4xx changed nothing: the list of models, and the target model's inspect output, its
  snapshot bytes and (batch models) versions and jobs, are the same before and after;
* the schemathesis conformance checks (status codes, content types, response schemas and
  headers, negative data rejected), and a body built valid by a strategy here is accepted.

Shared by ``tests/service/edge/test_fuzz_api.py`` (bounded) and ``load_tests/fuzz.py`` (long).
The caller starts the server; :class:`Fuzzer` creates its fixture models on it.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import math
import random
import struct
import time
import warnings
import zipfile
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import numpy as np
import requests
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from service import fbx1

PROBLEM = "application/problem+json"
NO_POLICY = {"retrain_every_examples": None, "retrain_every_seconds": None}
GROUPS = [{"name": "g0", "features": ["a", "b"], "cost": 1.0},
          {"name": "g1", "features": ["c"], "cost": 2.0},
          {"name": "g2", "features": ["d", "e"], "cost": 3.0}]
# fixture models: an indexed online model, a hashed one with 0-based libsvm, a batch model
FIXTURES = {
    "m": {"name": "m", "algorithm": "sofs", "n_features": 64, "budget": 8},
    "z": {"name": "z", "algorithm": "pet", "hash_bits": 10, "budget": 8,
          "libsvm_zero_based": True},
    "b": {"name": "b", "algorithm": "cs-g-omp", "groups": GROUPS, "params": NO_POLICY},
}
DIMENSION = {"m": 64, "z": 1 << 10, "b": 5}
# operations whose validity depends on the model or on data the document cannot describe
# (parameters of each algorithm, memory limits, feature indices, snapshot contents): a
# schema-valid request may be a 422 there
MODEL_DEPENDENT = {"POST /v1/models", "POST /v1/models/{model}/examples",
                   "POST /v1/models/{model}/predict", "POST /v1/models/{model}/next",
                   "PUT /v1/models/{model}/snapshot", "POST /v1/models/{model}/rollback"}
SNAPSHOT_MEDIA = "application/vnd.featurebudget.state"
ALL_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


# ============================================================================ strategies
def _number_text(value: float, style: int) -> str:
    return (repr(value), f"{value:.7g}", f"{value:.17e}", f"{value:f}")[style % 4]


EDGE_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e308", "-1e308", "1e309",
                "1125899906842624", "1.1258999068426e15", "4.9e-324", "1e-400", "-0", "-0.0",
                "0x10", "1e", "--1", "+1", ".5", "5.", "1_0", "", "١", "1e99999",
                "99999999999999999999999", "0" * 400 + "1"]
EDGE_INDICES = ["0", "-1", "1", "2147483647", "2147483648", "4294967296", "-2147483649",
                "99999999999999999999", "1.5", "1e3", "", "a", "0x1", "+3"]


@st.composite
def libsvm_valid(draw, n_features: int, *, zero_based: bool = False,
                 targets: bool = False) -> tuple[bytes, int]:
    """A libsvm body the service must accept, and its number of examples."""
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        if targets:
            label = _number_text(draw(FINITE), draw(st.integers(0, 3)))
        else:
            label = draw(st.sampled_from(["1", "-1", "+1", "1.0", "-1.0"]))
        indices = sorted(draw(st.sets(st.integers(0, n_features - 1), max_size=8)))
        pairs = [f"{i if zero_based else i + 1}:"
                 f"{_number_text(draw(FINITE), draw(st.integers(0, 3)))}" for i in indices]
        line = " ".join([label, *pairs])
        if draw(st.integers(0, 5)) == 0:
            line += " # a comment: 1:2"
        lines.append(line)
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    body = ending.join(lines) + draw(st.sampled_from(["", ending]))
    return body.encode(), len(lines)


@st.composite
def libsvm_soup(draw, n_features: int) -> bytes:
    """Lines of labels, pairs and garbage near the edges of the format."""
    label = st.sampled_from(["1", "-1", "0", "2", "+1", "1e0", "nan", "x", "", "-", "1:1"])
    index = st.one_of(st.sampled_from(EDGE_INDICES),
                      st.integers(-2, n_features + 2).map(str))
    value = st.one_of(st.sampled_from(EDGE_NUMBERS), FINITE.map(repr))
    pair = st.builds(lambda i, s, v: f"{i}{s}{v}", index,
                     st.sampled_from([":", ":", ":", "::", "=", ": ", ""]), value)
    sep = st.sampled_from([" ", " ", "\t", "  ", "\v", "\f", "\x00", "\u00a0", ""])
    tail = st.sampled_from(["", "", " # note", " qid:3", "#", "\x00"])
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        parts = [draw(label)] + draw(st.lists(pair, max_size=6))
        if draw(st.booleans()):
            parts = draw(st.permutations(parts))
        joiner = draw(sep)
        lines.append(joiner.join(parts) + draw(tail))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r", "\n\n"]))
    return ending.join(lines).encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw, base: st.SearchStrategy[bytes]) -> bytes:
    """``base``'s bytes with a few flips, deletions, insertions or a cut."""
    body = bytearray(draw(base))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 4))
        if not body:
            body += bytes([draw(st.integers(0, 255))])
            continue
        at = draw(st.integers(0, len(body) - 1))
        if kind == 0:
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == 1:
            del body[at:at + draw(st.integers(1, 8))]
        elif kind == 2:
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == 3:
            body = body[:at]
        else:
            body[at] = draw(st.sampled_from(b":\n\r \t#-+.e0\x00\xff"))
    return bytes(body)


@st.composite
def fbx1_valid(draw, n_features: int, *, targets: bool = False) -> tuple[bytes, int]:
    """An FBX1 batch the service must accept, and its number of examples."""
    n = draw(st.integers(1, 8))
    indptr, indices, values = [0], [], []
    for _ in range(n):
        row = sorted(draw(st.sets(st.integers(0, n_features - 1), max_size=6)))
        indices += row
        values += [draw(FINITE) for _ in row]
        indptr.append(len(indices))
    if targets:
        labels = np.array([draw(FINITE) for _ in range(n)], dtype=np.float64)
    else:
        labels = np.array([draw(st.sampled_from([-1, 1])) for _ in range(n)], dtype=np.int8)
    width = draw(st.sampled_from([4, 8]))
    body = fbx1.encode_batch(np.array(indptr), np.array(indices, dtype=np.int32),
                             np.array(values, dtype=np.float64), labels, value_bytes=width,
                             targets=targets)
    return body, n


_HEADER = struct.Struct("<4sBBHII")


@st.composite
def fbx1_tampered(draw, n_features: int, *, targets: bool = False) -> bytes:
    """A valid FBX1 batch with one part of it wrong: a header field, a count, an index, a
    value, a label, its length."""
    body, n = draw(fbx1_valid(n_features, targets=targets))
    magic, width, flags, reserved, n_rows, nnz = _HEADER.unpack_from(body)
    out = bytearray(body)
    part = draw(st.sampled_from(["magic", "width", "flags", "reserved", "n", "nnz", "count",
                                 "index", "value", "label", "cut", "extend"]))
    counts_at = _HEADER.size
    indices_at = counts_at + 4 * n_rows
    values_at = indices_at + 4 * nnz
    labels_at = values_at + width * nnz
    if part == "magic":
        out[0:4] = draw(st.sampled_from([b"FBX2", b"fbx1", b"\0\0\0\0", b"FBX"]))[:4].ljust(4)
    elif part == "width":
        out[4] = draw(st.sampled_from([0, 1, 2, 3, 5, 16, 255, 12 - width]))
    elif part == "flags":
        out[5] = draw(st.sampled_from([0, 1, 2, 3, 128, 255]))
    elif part == "reserved":
        struct.pack_into("<H", out, 6, draw(st.sampled_from([1, 256, 65535])))
    elif part == "n":
        struct.pack_into("<I", out, 8, draw(st.sampled_from(
            [0, max(0, n_rows - 1), n_rows + 1, 2**31, 2**32 - 1])))
    elif part == "nnz":
        struct.pack_into("<I", out, 12, draw(st.sampled_from(
            [0, max(0, nnz - 1), nnz + 1, 2**31, 2**32 - 1])))
    elif part == "count":
        row = draw(st.integers(0, n_rows - 1))
        struct.pack_into("<I", out, counts_at + 4 * row,
                         draw(st.sampled_from([0, nnz + 1, 2**31, 2**32 - 1])))
    elif part == "index" and nnz:
        k = draw(st.integers(0, nnz - 1))
        struct.pack_into("<i", out, indices_at + 4 * k, draw(st.sampled_from(
            [-1, n_features, n_features + 7, 2**31 - 1, -(2**31)])))
    elif part == "value" and nnz:
        k = draw(st.integers(0, nnz - 1))
        bad = draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e300, 2.0**50,
                                    3.4e38, -1e20]))
        struct.pack_into("<f" if width == 4 else "<d", out, values_at + width * k,
                         bad if width == 8 or abs(bad) < 3.4e38 or not math.isfinite(bad)
                         else 3.4e38)
    elif part == "label":
        k = draw(st.integers(0, n_rows - 1))
        if flags & fbx1.FLAG_TARGETS:
            struct.pack_into("<d", out, labels_at + 8 * k,
                             draw(st.sampled_from([math.nan, math.inf, 1e300])))
        else:
            struct.pack_into("<b", out, labels_at + k, draw(st.sampled_from([0, 2, -2, 127,
                                                                             -128])))
    elif part == "cut":
        out = out[:draw(st.integers(0, len(out) - 1))]
    else:
        out += draw(st.binary(min_size=1, max_size=16))
    return bytes(out)


@st.composite
def json_examples(draw, n_features: int, *, batch: bool = False,
                  hashed: bool = False) -> tuple[bytes, bool]:
    """A JSON examples body near the edges: (body, whether it must be accepted)."""
    number = st.one_of(FINITE, st.sampled_from([0.0, -0.0, 1e15, 1.1258999068426e15]))
    edge = st.one_of(st.sampled_from([1e308, -1e308, 2.0**50, 1e16]),
                     st.integers(-(2**70), 2**70), st.text(max_size=3), st.none(),
                     st.booleans(), st.lists(st.integers(0, 3), max_size=2))
    valid = draw(st.booleans())
    examples = []
    for _ in range(draw(st.integers(1, 6))):
        if not batch and (not hashed or draw(st.booleans())):  # index / value lists
            indices = sorted(draw(st.sets(st.integers(0, n_features - 1), max_size=6)))
            values = [draw(number) for _ in indices]
            example: dict[str, Any] = {"indices": indices, "values": values}
        elif batch:
            features = {}
            for group in GROUPS:
                if draw(st.booleans()):
                    features[group["name"]] = {f: draw(number) for f in group["features"]
                                               if draw(st.booleans())}
            example = {"features": features}
        else:
            example = {"features": {draw(st.sampled_from(["w", "meta", "x.y"])): {
                draw(st.text("abcdef^ ", min_size=1, max_size=4)): draw(number)
                for _ in range(draw(st.integers(0, 3)))}}}
        if batch:
            example["target"] = draw(number)
        else:
            example["label"] = draw(st.sampled_from([1, -1]))
        if not valid:
            key = draw(st.sampled_from(["indices", "values", "label", "target", "features",
                                        "extra"]))
            example[key] = draw(edge)
        examples.append(example)
    body = json.dumps({"examples": examples}, allow_nan=True).encode()
    return body, valid


def zip_members(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def zip_of(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w",
                                                    compression=compression) as archive:
        warnings.simplefilter("ignore")  # duplicate names are one of the mutations
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy_header(raw: bytes) -> tuple[int, str, bytes]:
    """(header start, header text, payload) of a .npy member (version 1 or 2)."""
    major = raw[6] if len(raw) > 7 else 1
    start = 10 if major == 1 else 12
    size = int.from_bytes(raw[8:start], "little")
    return start, raw[start:start + size].decode("latin-1"), raw[start + size:]


def _with_npy_header(raw: bytes, header: str) -> bytes:
    start, _, payload = _npy_header(raw)
    text = header.encode("latin-1")
    return raw[:start - (2 if start == 10 else 4)] + len(text).to_bytes(
        2 if start == 10 else 4, "little") + text + payload


@st.composite
def snapshot_blobs(draw, bases: list[bytes]) -> bytes:
    """A snapshot of one of ``bases`` with something wrong in it: its bytes, its zip
    structure, an ``.npy`` header or payload, or the decoded state (types, values)."""
    from algorithms.serialization import dumps_state, loads_state

    blob = draw(st.sampled_from(bases))
    kind = draw(st.sampled_from(["bytes", "members", "npy", "state", "compressed", "zip"]))
    if kind == "bytes":
        return draw(mutated(st.just(blob)))
    members = list(zip_members(blob).items())
    if kind == "members":
        op = draw(st.sampled_from(["drop", "duplicate", "rename", "extra", "reorder",
                                   "empty"]))
        k = draw(st.integers(0, len(members) - 1))
        if op == "drop":
            del members[k]
        elif op == "duplicate":
            members.append(members[k])
        elif op == "rename":
            members[k] = (draw(st.sampled_from(["../x.npy", "a/b.npy", "meta.json", "x.npy",
                                                members[k][0] + ".npy", "d/", "\u00e9.npy"])),
                          members[k][1])
        elif op == "extra":
            members.append((draw(st.sampled_from(["extra.npy", "extra.json", "extra.pkl"])),
                            draw(st.binary(max_size=64))))
        elif op == "reorder":
            members = draw(st.permutations(members))
        else:
            members[k] = (members[k][0], b"")
        return zip_of(members)
    if kind == "npy":
        npys = [i for i, (name, _) in enumerate(members) if name.endswith(".npy")]
        if not npys:
            return zip_of(members)
        k = draw(st.sampled_from(npys))
        name, raw = members[k]
        start, header, payload = _npy_header(raw)
        op = draw(st.sampled_from(["descr", "shape", "order", "header", "payload", "cut"]))
        if op == "descr":
            new = header.replace(header[header.index("'descr'"):].split(",")[0],
                                 "'descr': " + draw(st.sampled_from(
                                     ["'|O'", "'<U4'", "'<c16'", "'>f8'", "'<f2'", "'|b1'",
                                      "'<M8[s]'", "'V8'", "'<i8'", "'<u4'", "'<f4'"])), 1)
            raw = _with_npy_header(raw, new)
        elif op == "shape":
            shape = draw(st.sampled_from(["()", "(0,)", "(-1,)", "(1, 1)", "(2**40,)",
                                          "(1099511627776,)", "(3, 4, 5)", "(1.5,)", "'x'",
                                          "(18446744073709551615,)"]))
            at = header.index("'shape':")
            end = header.index(")", at) + 1 if "(" in header[at:] else header.index(",", at)
            raw = _with_npy_header(raw, header[:at] + "'shape': " + shape + header[end:])
        elif op == "order":
            raw = _with_npy_header(raw, header.replace("False", "True", 1))
        elif op == "header":
            raw = _with_npy_header(raw, draw(st.sampled_from(
                ["{}", "{'descr': '<f8'}", "[1, 2]", "{'descr': '<f8', 'fortran_order': False, "
                 "'shape': (1,), 'extra': __import__('os')}", "{{{", "", "None"])) + "\n")
        elif op == "payload":
            raw = raw[:start] + header.encode("latin-1") + draw(mutated(st.just(payload)))
        else:
            raw = raw[:draw(st.integers(0, len(raw)))]
        members[k] = (name, raw)
        return zip_of(members)
    if kind == "compressed":
        method = draw(st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2,
                                       zipfile.ZIP_LZMA]))
        return zip_of(members, method)
    if kind == "zip":  # raw zip header fields
        out = bytearray(blob)
        at = draw(st.sampled_from([4, 6, 8, 14, 18, 22, 26]))  # version, flags, method, crc,
        width = 2 if at in (4, 6, 8, 26) else 4                  # sizes, name length
        value = draw(st.sampled_from([0, 1, 8, 12, 14, 63, 99, 2**width * 8 - 1]))
        out[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
        if draw(st.booleans()):  # the central directory's copy too
            central = out.rfind(b"PK\x01\x02")
            if central >= 0:
                out[central + at + 2:central + at + 2 + width] = out[at:at + width]
        return bytes(out)
    state = loads_state(blob)
    key = draw(st.sampled_from(sorted(state)))
    current = state[key]
    replacement = draw(st.one_of(
        st.sampled_from([None, True, "x", [], {}, [1, 2, 3], -1, 0, 2**63, 10**30,
                         float("inf"), float("nan"), -1.5]),
        st.just(np.zeros(0)),
        st.just(np.full(3, np.nan)),
        st.just(np.arange(5, dtype=np.int64) - 3),
        st.just(np.asarray(current).astype(np.float32)) if isinstance(current, np.ndarray)
        else st.just({"nested": current}),
        st.just(np.asarray(current)[::-1].copy()) if isinstance(current, np.ndarray)
        else st.just([current]),
        st.just(np.asarray(current)[:-1].copy()) if isinstance(current, np.ndarray)
        and np.asarray(current).ndim and len(current) else st.just(str(current)),
    ))
    if isinstance(current, dict) and draw(st.booleans()) and current:  # one entry of params
        inner = draw(st.sampled_from(sorted(current)))
        replacement = {**current, inner: draw(st.sampled_from(
            [None, "x", -1, 0, 10**12, float("nan"), [1], 2**31]))}
    state[key] = replacement
    try:
        return dumps_state(state)
    except Exception:  # a value the writer itself refuses: send the unchanged key, cut
        return blob[:len(blob) // 2]


# ============================================================================ the fuzzer
class Answer:
    """Status, headers (one value per name, lower-case) and body of a requests or a
    schemathesis response."""

    def __init__(self, response) -> None:
        self.status_code = response.status_code
        self.content = response.content
        headers = {}
        for name, value in response.headers.items():
            headers[name.lower()] = value[0] if isinstance(value, list) else value
        self.headers = headers

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.content)


def differences(before: dict, after: dict) -> list[str]:
    """What differs between two :meth:`Fuzzer.state` results: fields of the inspect
    outputs, members of the snapshots (compared decoded: a zip records its write time),
    versions, jobs, the list of models."""
    from algorithms.serialization import loads_state

    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if isinstance(a, bytes) and isinstance(b, bytes):
            try:
                left, right = loads_state(a), loads_state(b)
            except Exception:  # noqa: BLE001 - not decodable: the bytes differ
                out.append(f"{key} (bytes)")
                continue
            members = [k for k in sorted(set(left) | set(right))
                       if not _same(left.get(k), right.get(k))]
            if members:
                out.append(f"{key} members {members}")
        elif isinstance(a, dict) and isinstance(b, dict):
            fields = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            out.append(f"{key} fields {fields}")
        elif isinstance(a, list) and isinstance(b, list):
            out.append(f"{key}: {sorted(set(b) - set(a))} appeared, "
                       f"{sorted(set(a) - set(b))} went")
        else:
            out.append(key)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return a == b


class Fuzzer:
    """Runs the suites against ``base_url``; ``failures`` collects what broke (deduplicated
    by kind and operation, with one reproduction each) and ``stats`` counts answers."""

    def __init__(self, base_url: str, *, seed: int = 0, log: Callable[[str], None] | None = None,
                 max_failures_per_kind: int = 3) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = requests.Session()
        self.seed = seed
        self.log = log or (lambda message: None)
        self.stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.failures: list[dict] = []
        self._failure_counts: collections.Counter = collections.Counter()
        self.max_failures_per_kind = max_failures_per_kind
        self._before: dict | None = None
        self.job_id: str | None = None
        self.blobs: dict[str, bytes] = {}
        self._schema = None
        self.in_scenario = False  # stateful: models created by a scenario live until its end
        self.scenarios = 0
        self.history: collections.deque = collections.deque(maxlen=8)  # for the reports
        self.suite = "setup"  # the suite running (run_libsvm -> "libsvm", ...)
        self.suite_failures: collections.Counter = collections.Counter()
        self.rng = random.Random(seed)
        self.specs: dict[str, dict] = dict(FIXTURES)  # how each known model was created
        self.operations: dict[str, collections.Counter] = collections.defaultdict(
            collections.Counter)

    # ---------------------------------------------------------------- plumbing
    def url(self, path: str) -> str:
        return self.base_url + path

    def get(self, path: str, **kw) -> requests.Response:
        return self.session.get(self.url(path), timeout=60, **kw)

    def send(self, method: str, path: str, **kw) -> requests.Response:
        return self.session.request(method, self.url(path), timeout=60, **kw)

    def fail(self, kind: str, where: str, message: str, reproduce: str = "") -> None:
        key = (kind, where)
        self._failure_counts[key] += 1
        self.suite_failures[self.suite] += 1
        if self._failure_counts[key] <= self.max_failures_per_kind:
            self.failures.append({"kind": kind, "where": where, "message": message[:2000],
                                  "reproduce": reproduce[:2000]})
            self.log(f"FAILURE {kind} at {where}: {message[:300]}")

    def failure_counts(self) -> dict[str, int]:
        return {f"{kind} @ {where}": n for (kind, where), n in self._failure_counts.items()}

    # ---------------------------------------------------------------- fixtures and state
    def setup(self) -> None:
        """Create the fixture models (any left from an earlier run are replaced), train them
        a little, retrain the batch model once; keep their snapshots as mutation seeds."""
        for name in self.model_names():
            self.send("DELETE", f"/v1/models/{name}")
        self.restore_fixtures()
        self.blobs = {name: self.get(f"/v1/models/{name}/snapshot").content
                      for name in FIXTURES}
        self._before = None

    def restore_fixtures(self) -> None:
        rng = np.random.default_rng(self.seed)
        existing = set(self.model_names())
        for name, body in FIXTURES.items():
            if name in existing:
                continue
            response = self.send("POST", "/v1/models", json=body)
            if response.status_code == 409:  # stored, not hosted here yet (another process)
                self.send("DELETE", f"/v1/models/{name}")
                response = self.send("POST", "/v1/models", json=body)
            assert response.status_code == 201, response.text
            examples = []
            for _ in range(40):
                if name == "b":
                    features = {g["name"]: {f: float(rng.normal()) for f in g["features"]}
                                for g in GROUPS}
                    examples.append({"features": features, "target": float(rng.normal())})
                else:
                    idx = sorted(rng.choice(DIMENSION[name], 5, replace=False).tolist())
                    examples.append({"indices": idx, "values": rng.normal(size=5).tolist(),
                                     "label": int(rng.choice([-1, 1]))})
            response = self.send("POST", f"/v1/models/{name}/examples?wait=true",
                                 json={"examples": examples})
            assert response.status_code == 202, response.text
            if name == "b":
                job = self.send("POST", "/v1/models/b/retrain").json()
                self.job_id = job["id"]
        self.settle()

    def model_names(self) -> list[str]:
        return sorted(m["name"] for m in self.get("/v1/models").json()["models"])

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until every model has applied its log, and batch models have no job queued
        or running and serve their current version."""
        deadline = time.monotonic() + timeout
        for name in self.model_names():
            while True:
                info = self.get(f"/v1/models/{name}", params={"features": "false"})
                if info.status_code == 404:
                    break
                info = info.json()
                done = info.get("log_position") == info.get("log_end")
                if done and "family" in info:
                    jobs = self.get(f"/v1/models/{name}/jobs").json()["jobs"]
                    current = self.get(f"/v1/models/{name}/versions").json().get("current")
                    done = (all(j["status"] not in ("queued", "running") for j in jobs)
                            and current == info.get("version"))
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.01)

    def state(self, targets: list[str]) -> dict:
        """What a rejected request must not change: the models' names, each model's inspect
        output, and for ``targets`` the snapshot bytes (+ versions and jobs)."""
        out: dict[str, Any] = {"models": self.model_names()}
        for name in out["models"]:
            if name in targets or not targets:
                out[name] = self.get(f"/v1/models/{name}").json()
        for name in targets:
            if name not in out["models"]:  # and not in the storage (another process, or a
                out[f"{name}:status"] = self.get(  # half-done create, would host it now)
                    f"/v1/models/{quote(name, safe='')}").status_code
                continue
            out[f"{name}:snapshot"] = self.get(f"/v1/models/{name}/snapshot").content
            if "family" in out[name]:
                out[f"{name}:versions"] = self.get(f"/v1/models/{name}/versions").json()
                out[f"{name}:jobs"] = sorted((j["id"], j["status"]) for j in
                                             self.get(f"/v1/models/{name}/jobs").json()["jobs"])
        return out

    def cleanup(self) -> None:
        """Delete models the fuzzing created, recreate deleted fixtures."""
        names = self.model_names()
        for name in names:
            if name not in FIXTURES:
                self.send("DELETE", f"/v1/models/{name}")
        self.specs = {**FIXTURES, **{k: v for k, v in self.specs.items()
                                     if k in names and self.in_scenario}}
        if not set(FIXTURES) <= set(names):
            self.restore_fixtures()

    # ---------------------------------------------------------------- one request
    def check(self, suite: str, where: str, response: requests.Response | None,
              before: dict | None, targets: list[str], reproduce: str,
              error: Exception | None = None) -> None:
        """The checks every answer gets; records failures, updates the state baseline."""
        if response is None:
            self.stats[suite]["error"] += 1
            self.fail("connection error", where, f"{type(error).__name__}: {error}", reproduce)
            self.session = requests.Session()
            self._before = None
            return
        response = Answer(response)
        status = response.status_code
        self.stats[suite][f"{status // 100}xx"] += 1
        self.stats[suite]["cases"] += 1
        self.operations[where][status] += 1
        self.history.append(f"{where} -> {status}")
        if status >= 500:
            self.fail(f"{status}", where, response.text, reproduce)
            self._before = None  # whatever it did, look again
            return
        if 400 <= status < 500:
            self.check_problem(where, response, reproduce)
            if before is not None:
                after = self.state(targets)
                changed = differences({k: before.get(k) for k in after}, after)
                if changed:
                    self.fail("state changed by a rejected request", where,
                              f"{status}: {response.text[:300]}; changed: {changed}; "
                              f"the requests before: {list(self.history)[:-1]}", reproduce)
                    self._before = None
                else:
                    self._before = {**before, **after}
        else:
            self._before = None  # a write may have been accepted: settle, then look again
            if not self.in_scenario:
                self.cleanup()
            self.settle()

    def check_problem(self, where: str, response: requests.Response, reproduce: str) -> None:
        status = response.status_code
        content_type = response.headers.get("content-type", "")
        if not content_type.startswith(PROBLEM):
            self.fail("4xx not problem+json", where, f"{status} {content_type}: "
                      f"{response.text[:300]}", reproduce)
            return
        try:
            body = response.json()
        except ValueError:
            self.fail("4xx body not JSON", where, response.text[:300], reproduce)
            return
        if not (isinstance(body, dict) and body.get("status") == status
                and isinstance(body.get("title"), str) and body["title"]
                and isinstance(body.get("detail"), str) and body["detail"].strip()):
            self.fail("4xx problem without title / status / detail", where,
                      f"{status}: {response.text[:300]}", reproduce)
            return
        if status in (400, 422):
            errors = body.get("errors")
            if not errors or not all(isinstance(e, dict) and e.get("message") and
                                     any(k in e for k in ("field", "item", "line"))
                                     for e in errors):
                self.fail(f"{status} without errors naming the field, item or line", where,
                          response.text[:300], reproduce)

    def baseline(self, targets: list[str]) -> dict:
        """The state before a request (the last one seen while nothing was accepted),
        completed with what this request's ``targets`` need."""
        before = self._before
        def complete(t: str) -> bool:
            if t in before["models"]:
                return t in before and f"{t}:snapshot" in before
            return f"{t}:status" in before

        if before is None or not all(complete(t) for t in targets) or (
                not targets and any(n not in before for n in before["models"])):
            fresh = self.state(targets)
            self._before = fresh if before is None else {**before, **fresh}
        return self._before

    def raw(self, suite: str, method: str, path: str, body: bytes, content_type: str,
            model: str, expect: int | None = None, accepted: int | None = None) -> None:
        """One request with a raw body; ``expect`` / ``accepted``: what a valid body gets."""
        before = self.baseline([model])
        reproduce = (f"curl -X {method} -H 'content-type: {content_type}' "
                     f"--data-binary @body '{self.url(path)}'  # body: {body[:300]!r}")
        try:
            response = self.send(method, path, data=body,
                                 headers={"content-type": content_type})
        except requests.RequestException as exc:
            self.check(suite, f"{suite} {model}", None, None, [model], reproduce, exc)
            return
        if expect is not None and response.status_code != expect:
            self.fail("valid body refused", f"{suite} {model}",
                      f"{response.status_code}: {response.text[:300]}", reproduce)
        elif accepted is not None and response.json().get("accepted") != accepted:
            self.fail("wrong number of examples accepted", f"{suite} {model}",
                      f"expected {accepted}: {response.text[:300]}", reproduce)
        self.check(suite, f"{suite} {model}", response, before, [model], reproduce)
        if response.status_code == 200 and method == "PUT":
            self.check_restored(suite, model, reproduce)

    def check_restored(self, suite: str, model: str, reproduce: str) -> None:
        """A restored snapshot still gives a finite model that predicts."""
        info = self.get(f"/v1/models/{model}")
        weights = [f["weight"] for f in info.json().get("selected_features") or []]
        if info.status_code != 200 or not all(w is not None and math.isfinite(w)
                                              for w in weights):
            self.fail("restored model not finite", f"{suite} {model}", info.text[:300],
                      reproduce)
        if model != "b":
            example = {"indices": [0, 1], "values": [1.0, -1.0]}
            answer = self.send("POST", f"/v1/models/{model}/predict",
                               json={"examples": [example]})
            scores = answer.json().get("scores") if answer.status_code == 200 else None
            if not scores or not all(s is not None and math.isfinite(s) for s in scores):
                self.fail("restored model does not predict", f"{suite} {model}",
                          f"{answer.status_code}: {answer.text[:300]}", reproduce)

    # ---------------------------------------------------------------- body suites
    def _hypothesis(self, test, max_examples: int, seed: int) -> None:
        configured = settings(max_examples=max_examples, deadline=None, database=None,
                              verbosity=Verbosity.quiet,
                              phases=[Phase.explicit, Phase.generate],
                              suppress_health_check=list(HealthCheck))(test)
        with contextlib.suppress(Unsatisfiable):  # e.g. negative data for an operation
            hypothesis_seed(seed)(configured)()  # without parameters

    def run_libsvm(self, max_examples: int, seed: int = 0) -> None:
        self.suite = "libsvm"
        def case(data):
            model = data.draw(st.sampled_from(sorted(FIXTURES)))
            zero = model == "z"
            valid = libsvm_valid(DIMENSION[model], zero_based=zero, targets=model == "b")
            choice = data.draw(st.integers(0, 2))
            if choice == 0:
                body, n = data.draw(valid)
                self.raw("libsvm", "POST", f"/v1/models/{model}/examples?wait=true", body,
                         "text/plain", model, expect=202, accepted=n)
            elif choice == 1:
                body = data.draw(libsvm_soup(DIMENSION[model]))
                self.raw("libsvm", "POST", f"/v1/models/{model}/examples", body,
                         "text/plain", model)
            else:
                body = data.draw(mutated(valid.map(lambda pair: pair[0])))
                self.raw("libsvm", "POST", f"/v1/models/{model}/examples", body,
                         "text/plain", model)

        self._hypothesis(given(st.data())(case), max_examples, seed)

    def run_fbx1(self, max_examples: int, seed: int = 0) -> None:
        self.suite = "fbx1"
        def case(data):
            model = data.draw(st.sampled_from(sorted(FIXTURES)))
            targets = model == "b"
            choice = data.draw(st.integers(0, 3))
            media = data.draw(st.sampled_from(["application/octet-stream",
                                               "application/x-featurebudget-batch"]))
            if choice == 0:
                body, n = data.draw(fbx1_valid(DIMENSION[model], targets=targets))
                self.raw("fbx1", "POST", f"/v1/models/{model}/examples?wait=true", body,
                         media, model, expect=202, accepted=n)
                return
            if choice == 1:
                body = data.draw(fbx1_tampered(DIMENSION[model], targets=targets))
            elif choice == 2:
                body = data.draw(mutated(fbx1_valid(DIMENSION[model], targets=targets)
                                         .map(lambda pair: pair[0])))
            else:
                body = b"FBX1" + data.draw(st.binary(max_size=64))
            self.raw("fbx1", "POST", f"/v1/models/{model}/examples", body, media, model)

        self._hypothesis(given(st.data())(case), max_examples, seed)

    def run_json(self, max_examples: int, seed: int = 0) -> None:
        self.suite = "json"
        def case(data):
            model = data.draw(st.sampled_from(sorted(FIXTURES)))
            body, valid = data.draw(json_examples(DIMENSION[model], batch=model == "b",
                                                  hashed=model == "z"))
            if data.draw(st.integers(0, 3)) == 0:
                body, valid = data.draw(mutated(st.just(body))), False
            self.raw("json", "POST", f"/v1/models/{model}/examples", body,
                     "application/json", model, expect=202 if valid else None)

        self._hypothesis(given(st.data())(case), max_examples, seed)

    def run_snapshots(self, max_examples: int, seed: int = 0) -> None:
        self.suite = "snapshots"
        def case(data):
            model = data.draw(st.sampled_from(sorted(FIXTURES)))
            base = self.blobs[model]
            if data.draw(st.integers(0, 9)) == 0:
                body = data.draw(st.sampled_from([base, *self.blobs.values()]))
            else:
                body = data.draw(snapshot_blobs([base]))
            self.raw("snapshot", "PUT", f"/v1/models/{model}/snapshot", body, SNAPSHOT_MEDIA,
                     model)

        self._hypothesis(given(st.data())(case), max_examples, seed)
        for name, blob in self.blobs.items():  # put the fixtures back as they were
            self.send("PUT", f"/v1/models/{name}/snapshot", data=blob)
        self._before = None

    def run_methods(self) -> None:
        """Every path with every method it does not declare: 405 problem+json, Allow
        listing exactly the declared ones."""
        self.suite = "methods"
        document = self.get("/openapi.json").json()
        for path, item in document["paths"].items():
            declared = {m.upper() for m in item}
            concrete = path.replace("{model}", "m").replace("{job_id}", self.job_id or "x")
            for method in ALL_METHODS:
                if method in declared or (method == "HEAD" and "GET" in declared):
                    continue
                response = self.send(method, concrete)
                where = f"{method} {path}"
                self.stats["methods"]["cases"] += 1
                self.stats["methods"][f"{response.status_code // 100}xx"] += 1
                if response.status_code != 405:
                    self.fail("undeclared method not 405", where, str(response.status_code))
                    continue
                allowed = {m.strip() for m in response.headers.get("allow", "").split(",")}
                if allowed - {"HEAD"} != declared:
                    self.fail("405 Allow differs from the document", where,
                              f"Allow {sorted(allowed)}, declared {sorted(declared)}")
                self.check_problem(where, response, f"curl -X {method} {self.url(concrete)}")

    # ---------------------------------------------------------------- schemathesis
    def schema(self):
        if self._schema is None:
            import schemathesis

            schemathesis.openapi.media_type(SNAPSHOT_MEDIA, snapshot_blobs(
                list(self.blobs.values())))
            schemathesis.openapi.media_type("text/plain", st.one_of(
                libsvm_valid(64).map(lambda pair: pair[0]), libsvm_soup(64)))
            schemathesis.openapi.media_type("application/octet-stream", st.one_of(
                fbx1_valid(64).map(lambda pair: pair[0]), fbx1_tampered(64)))
            self._schema = schemathesis.openapi.from_url(self.url("/openapi.json"))
        return self._schema

    def _checks(self):
        from schemathesis.checks import not_a_server_error
        from schemathesis.specs.openapi import checks

        return [not_a_server_error, checks.status_code_conformance,
                checks.content_type_conformance, checks.response_schema_conformance,
                checks.response_headers_conformance, checks.negative_data_rejection,
                checks.use_after_free, checks.ensure_resource_availability]

    # ---------------------------------------------------------------- valid bodies
    def creatable(self) -> dict:
        """The body of a model creation the service accepts (small models)."""
        rng = self.rng
        name = f"s{rng.randrange(10**6)}"
        if rng.random() < 0.6:
            algorithm = rng.choice(["pet", "fofs", "sofs", "ogd", "arow"])
            body: dict[str, Any] = {"name": name, "algorithm": algorithm}
            if rng.random() < 0.5:
                body["n_features"] = rng.randint(1, 300)
            else:
                body["hash_bits"] = rng.randint(1, 12)
            if algorithm not in ("ogd", "arow"):
                body["budget"] = rng.randint(1, 20)
            body["libsvm_zero_based"] = rng.random() < 0.3
            return body
        algorithm = rng.choice(["cs-g-omp", "cs-g-fr", "doubling", "single", "gbfs"])
        groups = [{"name": f"g{g}", "features": [f"f{g}_{k}" for k in range(rng.randint(1, 3))],
                   "cost": round(rng.uniform(0, 5), 2)} for g in range(rng.randint(1, 4))]
        body = {"name": name, "algorithm": algorithm, "groups": groups}
        if algorithm == "gbfs":
            body.update(task=rng.choice(["regression", "classification"]),
                        params={"n_estimators": 5})
        return body

    def valid_examples(self, spec: dict, *, labels: bool = True) -> list[dict]:
        rng = self.rng
        out = []
        for _ in range(rng.randint(1, 8)):
            if spec.get("groups"):
                example: dict[str, Any] = {"features": {
                    g["name"]: {f: rng.gauss(0, 1) for f in g["features"] if rng.random() < 0.8}
                    for g in spec["groups"] if rng.random() < 0.8}}
                if labels and spec.get("task") == "classification":
                    example["label"] = rng.choice([-1, 1])
                elif labels:
                    example["target"] = rng.gauss(0, 10)
            elif spec.get("hash_bits"):
                example = {"features": {rng.choice(["w", "meta"]): {
                    f"t{rng.randrange(50)}": rng.gauss(0, 1) for _ in range(rng.randint(0, 4))}}}
            else:
                d = spec["n_features"]
                indices = sorted(rng.sample(range(d), min(d, rng.randint(0, 6))))
                example = {"indices": indices, "values": [rng.gauss(0, 1) for _ in indices]}
            if labels and not spec.get("groups"):
                example["label"] = rng.choice([-1, 1])
            out.append(example)
        return out

    def repair(self, case, probability: float) -> None:
        """With ``probability``, give a positive case a body the service accepts: a small
        model to create, examples or a prediction request that fit the target model (so
        scenarios go on past the first call: create -> examples -> predict -> feedback)."""
        if self.rng.random() >= probability:
            return
        label = case.operation.label
        model = (case.path_parameters or {}).get("model")
        spec = self.specs.get(model) if isinstance(model, str) else None
        if label == "POST /v1/models":
            case.body, case.media_type = self.creatable(), "application/json"
        elif label == "POST /v1/models/{model}/examples" and spec:
            case.body = {"examples": self.valid_examples(spec)}
            case.media_type = "application/json"
        elif label == "POST /v1/models/{model}/predict" and spec:
            body: dict[str, Any] = {"examples": self.valid_examples(spec, labels=False)}
            if not spec.get("groups"):
                body["return_prediction_ids"] = self.rng.random() < 0.5
            case.body, case.media_type = body, "application/json"

    def execute(self, suite: str, case, *, recorder=None, repair: float = 0.0) -> Any:
        """Send a schemathesis case and check its answer."""
        from schemathesis.core.failures import FailureGroup

        mode = getattr(getattr(getattr(case, "meta", None), "generation", None), "mode", None)
        if mode is not None and mode.is_positive:
            self.repair(case, repair)
        label = case.operation.label
        model = (case.path_parameters or {}).get("model")
        if label == "POST /v1/models" and isinstance(case.body, dict):
            model = case.body.get("name")  # an existing name must be refused untouched
        targets = [model] if isinstance(model, str) else []
        before = self.baseline(targets)
        try:
            reproduce = case.as_curl_command()
        except Exception:  # noqa: BLE001 - a case curl cannot express
            reproduce = repr(case)
        try:
            response = case.call(base_url=self.base_url, session=self.session, timeout=60)
        except requests.RequestException as exc:
            self.check(suite, label, None, None, targets, reproduce, exc)
            return None
        if label == "POST /v1/models" and response.status_code == 201 and \
                isinstance(case.body, dict):
            self.specs[case.body["name"]] = case.body
        self.check(suite, label, response, before, targets, reproduce)
        try:
            case.validate_response(response, checks=self._checks(), recorder=recorder,
                                   transport_kwargs={"base_url": self.base_url,
                                                     "session": self.session})
        except FailureGroup as group:
            for failure in group.exceptions:
                self.fail(f"schemathesis: {failure.title}", label, failure.message, reproduce)
        if (mode is not None and mode.is_positive and response.status_code == 422
                and label not in MODEL_DEPENDENT):
            self.fail("schema-valid request refused", label, response.text[:300], reproduce)
        return response

    def run_schema(self, max_examples: int, seed: int = 0) -> None:
        """Every operation, positive data and (where a query or JSON body can be invalid)
        negative data; positive cases target the fixture models (and the batch model's real
        job) as often as a free ``model`` / ``job_id``, and a quarter get a body that fits
        the target (:meth:`repair`)."""
        self.suite = "schema"
        from schemathesis import GenerationMode

        document = self.get("/openapi.json").json()
        for result in self.schema().get_all_operations():
            operation = result.ok()
            names = {p.name for p in operation.path_parameters}
            raw = document["paths"][operation.path][operation.method.lower()]
            negatable = any(p["in"] == "query" for p in raw.get("parameters", ())) or \
                "application/json" in raw.get("requestBody", {}).get("content", {})
            modes = [GenerationMode.POSITIVE] + [GenerationMode.NEGATIVE] * negatable
            for mode in modes:  # (a free string or bytes has no invalid values to send)
                fixed: list[dict] = [{}]  # (negative data: free path parameters, or
                if mode is GenerationMode.POSITIVE:  # some operations leave nothing to negate)
                    if "model" in names:
                        fixed += [{"model": name} for name in FIXTURES]
                    if "job_id" in names and self.job_id:
                        fixed += [{"model": "b", "job_id": self.job_id}]
                strategies = [operation.as_strategy(generation_mode=mode, path_parameters=f or
                                                    None) for f in fixed]
                strategy = st.one_of(strategies)
                suite = f"schema {mode.value}"

                self._hypothesis(given(st.data())(self._schema_case(suite, strategy)),
                                 max_examples, seed)
                self.cleanup()

    def _schema_case(self, suite: str, strategy):
        def case(data):
            self.execute(suite, data.draw(strategy), repair=0.25)

        return case

    def run_stateful(self, max_examples: int, steps: int, seed: int = 0) -> None:
        """schemathesis's state machine along the document's links (create -> examples ->
        predict -> feedback, retrain -> job, ...), each step checked as above."""
        self.suite = "stateful"
        fuzzer = self
        base = self.schema().as_state_machine()

        class Machine(base):  # type: ignore[misc, valid-type]
            def setup(self) -> None:
                fuzzer._before = None
                fuzzer.in_scenario = True
                fuzzer.scenarios += 1

            def call(self, case, **kwargs):
                self._last = fuzzer.execute("stateful", case, recorder=getattr(
                    self, "recorder", None), repair=0.6)
                if self._last is None:
                    raise ConnectionError("no answer")
                return self._last

            def validate_response(self, response, case, additional_checks=None, **kwargs):
                return None  # checked in call()

            def teardown(self) -> None:
                fuzzer.in_scenario = False
                fuzzer.cleanup()
                super().teardown()

        from hypothesis.errors import FlakyStrategyDefinition
        from hypothesis.stateful import run_state_machine_as_test

        # a scenario's data depends on the server's answers (ids, names through links),
        # which hypothesis sees as a flaky strategy when a prefix repeats: start again
        # with another seed for the scenarios left
        self.scenarios = 0
        for restart in range(100):
            left = max_examples - self.scenarios
            if left <= 0:
                break
            configured = settings(max_examples=left, stateful_step_count=steps,
                                  deadline=None, database=None, verbosity=Verbosity.quiet,
                                  phases=[Phase.explicit, Phase.generate],
                                  suppress_health_check=list(HealthCheck))
            try:
                run_state_machine_as_test(hypothesis_seed(seed * 1000 + restart)(Machine),
                                          settings=configured)
                break
            except FlakyStrategyDefinition:
                self.in_scenario = False
                self.cleanup()
            except Exception as exc:  # noqa: BLE001 - recorded; the checks say what broke
                self.fail("stateful run stopped", "stateful", f"{type(exc).__name__}: {exc}")
                break
        self.in_scenario = False
        self.cleanup()

    # ---------------------------------------------------------------- report
    def summary(self) -> dict:
        return {"stats": {suite: dict(counts) for suite, counts in self.stats.items()},
                "operations": {where: {str(k): v for k, v in sorted(counts.items())}
                               for where, counts in sorted(self.operations.items())},
                "failures": self.failures, "failure_counts": self.failure_counts()}

"""The wire formats shared by the service and its producers (numpy only; clients import it).

Redis keys (``{m}`` is the model name, which is also the Redis Cluster hash tag)::

    featurebudget:{m}:examples    the model's log: a Redis stream any producer may XADD to
    featurebudget:{m}:deadletter  malformed log entries, with the reason
    featurebudget:{m}:snapshot    the latest snapshot (state + id of the last applied entry)
    featurebudget:{m}:lease       which process folds the log into the learner
    featurebudget:{m}:heartbeat   "<time> <process>" of the folding process's last lease renewal
    featurebudget:{m}:applied     id of the last applied entry (for ?wait=true elsewhere)
    featurebudget:{m}:view        hash: the serving view (``state``) every API process answers
                                  from, and its ``token`` ("<log id> <nonce>")
    featurebudget:{m}:idempotency hash: Idempotency-Key -> the log ids its request appended
                                  (and idempotency_times: when, to expire old keys)
    featurebudget:{m}:artifacts   batch models: hash version -> metadata (JSON)
    featurebudget:{m}:artifact:V  batch models: the fitted model of version V (safe format)
    featurebudget:{m}:version     batch models: the version every API process serves
    featurebudget:{m}:version_seq batch models: the last version number handed out
    featurebudget:{m}:jobs        batch models: hash job id -> retrain job record (JSON)
    featurebudget:{m}:status      batch models: the fold's counters (JSON), for every process
    featurebudget:{m}:spec        Redis Cluster only: the model config (JSON); the model
                                  exists iff this key does (see service.storage.redis)
    featurebudget:models          hash: model name -> model config (JSON); on a cluster an
                                  index listing every model (and names of none)
    featurebudget:members:<role>  hash: live process -> "<joined> <expires>" (service.placement)
    featurebudget:versions        pub/sub channel: "<model> <version>" on every publish
    featurebudget:jobs            pub/sub channel: "<model>" when a retrain job is queued

A stream entry has a field ``data``, an optional field ``fmt`` and, for hashed models, an
optional field ``names``: a JSON object ``{"<index>": "<namespace>^<name>"}`` naming the
hashed features of the entry (the API writes it for named features, so names are a fold
over the log like the weights).

* ``fmt=libsvm``: one or more ``label idx:val ...`` lines (``\\n``-separated), labels ±1;
  indices 1-based unless the model was created with ``libsvm_zero_based``.
* ``fmt=json``: one example object, a list of them, or ``{"examples": [...]}``; each is
  ``{"indices": [...], "values": [...], "label": ±1}`` (0-based) or
  ``{"features": {"namespace": {"name": value}}, "label": ±1}`` for hashed models.
* ``fmt=bin``: the compact binary batch below (what ``StreamProducer`` writes).

Without ``fmt`` the format is inferred (``FBX1`` magic -> bin, ``{``/``[`` -> json, else
libsvm).

Compact binary batch ``FBX1`` (little-endian)::

    offset 0   4s   magic b"FBX1"
    offset 4   u8   bytes per value: 4 (float32) or 8 (float64)
    offset 5   u8   flags: bit 0 set = targets are float64 (batch regression models)
    offset 6   u16  reserved (0)
    offset 8   u32  n, number of examples
    offset 12  u32  nnz, total non-zeros
    offset 16  u32[n]     non-zeros per example
               i32[nnz]   feature indices (0-based), example after example
               f32|f64[nnz] values
               i8[n]      labels, -1 or +1 (flag bit 0 clear)
               f64[n]     targets, finite     (flag bit 0 set)
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = b"FBX1"
_HEADER = struct.Struct("<4sBBHII")
HEADER_BYTES = _HEADER.size

KEY_PREFIX = "featurebudget"
MODELS_KEY = f"{KEY_PREFIX}:models"
VERSIONS_CHANNEL = f"{KEY_PREFIX}:versions"
JOBS_CHANNEL = f"{KEY_PREFIX}:jobs"
MODELS_CHANNEL = f"{KEY_PREFIX}:models-changed"  # a model created or deleted
SNAPSHOTS_CHANNEL = f"{KEY_PREFIX}:snapshot-requests"  # write a snapshot now
CONSUMER_GROUP = "featurebudget-learners"
FLAG_TARGETS = 1


def log_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:examples"


def deadletter_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:deadletter"


def snapshot_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:snapshot"


def lease_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:lease"


def applied_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:applied"


def members_key(role: str) -> str:
    return f"{KEY_PREFIX}:members:{role}"


def view_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:view"


def heartbeat_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:heartbeat"


def artifacts_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:artifacts"


def artifact_key(model: str, version: int) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:artifact:{int(version)}"


def version_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:version"


def version_seq_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:version_seq"


def jobs_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:jobs"


def status_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:status"


def cancels_key(model: str) -> str:
    """Job id -> when its cancellation was requested (``DELETE /jobs/{id}``)."""
    return f"{KEY_PREFIX}:{{{model}}}:cancels"


def chunk_prefix(model: str) -> str:
    """Prefix of the chunks of a model's large values (``<prefix><chunk id>:<k>``)."""
    return f"{KEY_PREFIX}:{{{model}}}:chunk:"


def chunk_key(model: str, chunk_id: str, k: int) -> str:
    return f"{chunk_prefix(model)}{chunk_id}:{int(k)}"


def requested_sets_key(model: str) -> str:
    """Process id -> its counts of the computed sets ``/predict`` asked for (JSON)."""
    return f"{KEY_PREFIX}:{{{model}}}:requested_sets"


def model_keys(model: str) -> list[str]:
    """Every fixed key of one model (artifact blobs are listed in ``artifacts_key``; chunks of
    large values in the snapshot's ``chunks`` field and in chunked artifact values)."""
    return [log_key(model), snapshot_key(model), deadletter_key(model), applied_key(model),
            lease_key(model), artifacts_key(model), version_key(model),
            version_seq_key(model), jobs_key(model), status_key(model),
            idempotency_key(model), idempotency_times_key(model), heartbeat_key(model),
            view_key(model), cancels_key(model), requested_sets_key(model)]


def spec_key(model: str) -> str:
    """Redis Cluster only: the model's config, in the model's slot (whether it exists)."""
    return f"{KEY_PREFIX}:{{{model}}}:spec"


def idempotency_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:idempotency"


def idempotency_times_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:idempotency_times"


def pending_key(model: str, prediction_id: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:prediction:{prediction_id}"


CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}  # scheme -> TLS


def cluster_url(url: str) -> dict | None:
    """``redis+cluster://[user:password@]host:port[,host:port...][/]`` (``rediss+cluster``:
    TLS) -> ``{"nodes": [(host, port), ...], "username", "password", "ssl"}``, the startup
    nodes of a Redis Cluster; None for any other URL (a single Redis server). ValueError
    when a cluster URL is malformed (no node, a port missing, a database other than 0)."""
    import urllib.parse

    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in CLUSTER_SCHEMES:
        return None
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    if path not in ("", "0") or query:
        raise ValueError(f"a Redis Cluster URL has no database or options: {url!r}")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    nodes = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a Redis Cluster URL lists host:port pairs: {url!r}")
        nodes.append((host.strip("[]"), int(port)))
    return {"nodes": nodes, "username": urllib.parse.unquote(username) or None,
            "password": urllib.parse.unquote(password) or None,
            "ssl": CLUSTER_SCHEMES[scheme.lower()]}


SENTINEL_SCHEMES = ("redis+sentinel",)
SENTINEL_FORM = "redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]"


def sentinel_url(url: str) -> dict | None:
    """``redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]`` ->
    ``{"sentinels": [(host, port), ...], "master", "db", "username", "password"}``: Redis
    Sentinels and the name of the master they watch (the credentials are the master's; the
    sentinels are reached without). None for any other URL. ValueError when a sentinel URL
    is malformed (no sentinel, a port missing, no master name, a database that is no number,
    options)."""
    import urllib.parse

    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.lower().endswith("+sentinel"):
        return None
    if scheme.lower() not in SENTINEL_SCHEMES:
        raise ValueError(f"unsupported Redis Sentinel scheme {scheme!r} (TLS is not supported); "
                         f"use {SENTINEL_FORM}")
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    if query:
        raise ValueError(f"a Redis Sentinel URL has no options: {url!r}")
    master, _, db = path.partition("/")
    master = urllib.parse.unquote(master)
    if not master:
        raise ValueError(f"a Redis Sentinel URL names the master the sentinels watch: "
                         f"{SENTINEL_FORM}, got {url!r}")
    db = db.rstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"the database of a Redis Sentinel URL is a number: {url!r}")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    sentinels = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a Redis Sentinel URL lists the sentinels as host:port pairs: "
                             f"{SENTINEL_FORM}, got {url!r}")
        sentinels.append((host.strip("[]"), int(port)))
    return {"sentinels": sentinels, "master": master, "db": int(db or 0),
            "username": urllib.parse.unquote(username) or None,
            "password": urllib.parse.unquote(password) or None}


# Limits of one log entry, checked before the append (the API, StreamProducer) and read by
# the fold (an entry past them would be a dead letter: acknowledged, never applied).
MAX_NAMES = 100_000  # distinct named indices per log entry (one request)
MAX_NAME_CHARS = 1024  # characters of one "namespace^name"
MAX_ENTRY_BYTES = 256 << 20  # data + names of one entry: under Redis's default bulk limit
# (512 MB) and the embedded log's record limit (service.storage.local.MAX_RECORD)


# Idempotent append. KEYS: the model's idempotency hash (key -> ids) and its time index
# (sorted set), the log. ARGV: now ms, retention ms, the key, how many examples the entries
# hold ('' = not said), then fmt, data, names ('' = none) per entry. Keys older than the
# retention are dropped first (a hundred a call); a repeat answers the first append's ids
# and example count ('' when not known) and appends nothing. The count is kept in the
# field "<key> n" (a key has no space).
# A repeat writes its key's value again (the same value): the call is then a write, so a
# WAIT after it on the same connection confirms the first append too (Redis >= 7.2 ties
# WAIT to the connection's last write).
APPEND_ONCE_LUA = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1] - ARGV[2], 'LIMIT', 0, 100)
for _, old in ipairs(expired) do
  redis.call('HDEL', KEYS[1], old, old .. ' n')
  redis.call('ZREM', KEYS[2], old)
end
local known = redis.call('HGET', KEYS[1], ARGV[3])
if known then
  redis.call('HSET', KEYS[1], ARGV[3], known)
  return {1, known, redis.call('HGET', KEYS[1], ARGV[3] .. ' n') or ''}
end
local ids = {}
for i = 5, #ARGV, 3 do
  local id
  if ARGV[i + 2] ~= '' then
    id = redis.call('XADD', KEYS[3], '*', 'fmt', ARGV[i], 'data', ARGV[i + 1],
                    'names', ARGV[i + 2])
  else
    id = redis.call('XADD', KEYS[3], '*', 'fmt', ARGV[i], 'data', ARGV[i + 1])
  end
  table.insert(ids, id)
end
local joined = table.concat(ids, ' ')
redis.call('HSET', KEYS[1], ARGV[3], joined)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[3] .. ' n', ARGV[4])
end
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[3])
return {0, joined, ARGV[4]}
"""


def batch_rows(data) -> int | None:
    """The example count in an ``FBX1`` payload's header (None when it is not one)."""
    view = memoryview(data).cast("B")
    if len(view) < HEADER_BYTES or bytes(view[:4]) != MAGIC:
        return None
    return _HEADER.unpack_from(view, 0)[4]


def encode_names(names: dict[int, str]) -> bytes:
    """The ``names`` field of an entry: ``{"index": "namespace^name"}`` as JSON."""
    import json

    return json.dumps({str(k): v for k, v in names.items()}, separators=(",", ":")).encode()


def decode_names(raw, n_features: int) -> dict[int, str]:
    """Parse and check a ``names`` field; WireFormatError when malformed."""
    import json

    try:
        document = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireFormatError(f"names is not a JSON object: {exc}") from exc
    if not isinstance(document, dict) or len(document) > MAX_NAMES:
        raise WireFormatError(f"names must be an object of at most {MAX_NAMES} entries")
    out = {}
    for key, value in document.items():
        if not (key.isdigit() and int(key) < n_features and isinstance(value, str)
                and len(value) <= MAX_NAME_CHARS):
            raise WireFormatError(f"names entry {key!r}: {value!r} is not index -> name")
        out[int(key)] = value
    return out


class WireFormatError(ValueError):
    """A binary batch whose layout is inconsistent."""


def encode_batch(indptr, indices, values, labels, *, value_bytes: int = 8,
                 targets: bool = False) -> bytes:
    """Encode a CSR batch with labels (int8 ±1) or, with ``targets``, float64 targets as an
    ``FBX1`` payload. O(nnz)."""
    if value_bytes not in (4, 8):
        raise ValueError("value_bytes must be 4 or 8")
    indptr = np.asarray(indptr, dtype=np.int64)
    lengths = np.diff(indptr).astype("<u4")
    n, nnz = len(lengths), int(indptr[-1] - indptr[0])
    vdtype = "<f4" if value_bytes == 4 else "<f8"
    parts = [
        _HEADER.pack(MAGIC, value_bytes, FLAG_TARGETS if targets else 0, 0, n, nnz),
        lengths.tobytes(),
        np.asarray(indices, dtype="<i4")[indptr[0]:indptr[0] + nnz].tobytes(),
        np.asarray(values, dtype=vdtype)[indptr[0]:indptr[0] + nnz].tobytes(),
        np.asarray(labels).astype("<f8" if targets else "<i1").tobytes(),
    ]
    return b"".join(parts)


def decode_views(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode an ``FBX1`` payload without copying its arrays -> (indptr int64, indices
    int32, values float32|float64, labels int8 | targets float64), the last three read-only
    views of ``data`` (targets when the header's flag bit 0 is set).

    Checks the layout only (sizes, label set); feature validity is checked by the caller
    against the model. Raises :class:`WireFormatError`. O(n) plus no copy of the non-zeros.
    """
    if len(data) < HEADER_BYTES:
        raise WireFormatError("binary batch shorter than its 16-byte header")
    magic, value_bytes, flags, _, n, nnz = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise WireFormatError("binary batch does not start with the magic FBX1")
    if value_bytes not in (4, 8):
        raise WireFormatError(f"binary batch has value width {value_bytes}, expected 4 or 8")
    if flags & ~FLAG_TARGETS:
        raise WireFormatError(f"binary batch has unknown flags {flags:#x}")
    label_bytes = 8 if flags & FLAG_TARGETS else 1
    expected = HEADER_BYTES + 4 * n + 4 * nnz + value_bytes * nnz + label_bytes * n
    if len(data) != expected:
        raise WireFormatError(
            f"binary batch of n={n}, nnz={nnz} must be {expected} bytes, got {len(data)}")
    offset = HEADER_BYTES
    lengths = np.frombuffer(data, dtype="<u4", count=n, offset=offset)
    offset += 4 * n
    indices = np.frombuffer(data, dtype="<i4", count=nnz, offset=offset)
    offset += 4 * nnz
    vdtype = "<f4" if value_bytes == 4 else "<f8"
    values = np.frombuffer(data, dtype=vdtype, count=nnz, offset=offset)
    offset += value_bytes * nnz
    labels = np.frombuffer(data, dtype="<f8" if label_bytes == 8 else "<i1", count=n,
                           offset=offset)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if indptr[-1] != nnz:
        raise WireFormatError(f"row lengths sum to {int(indptr[-1])}, header says nnz={nnz}")
    if label_bytes == 8:
        bad = np.flatnonzero(~(np.abs(labels) < 2.0 ** 50))
        if len(bad):
            raise WireFormatError(f"example {int(bad[0])}: target is NaN, infinite or "
                                  "outside |y| < 2^50")
        return indptr, indices, values, labels
    bad = np.flatnonzero((labels != 1) & (labels != -1))
    if len(bad):
        raise WireFormatError(f"example {int(bad[0])}: label {int(labels[bad[0]])} is not -1 or +1")
    return indptr, indices, values, labels


def decode_batch(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode an ``FBX1`` payload -> (indptr int64, indices int32, values float64, labels int8),
    arrays of their own (see :func:`decode_views`; targets stay float64). Raises
    :class:`WireFormatError`. O(nnz).
    """
    indptr, indices, values, labels = decode_views(data)
    return (indptr, indices.astype(np.int32), values.astype(np.float64),
            labels.astype(np.float64 if labels.dtype.kind == "f" else np.int8))


def infer_format(data) -> str:
    """The format of an entry without an explicit ``fmt`` field (``data``: any buffer)."""
    view = memoryview(data).cast("B")
    if bytes(view[:4]) == MAGIC:
        return "bin"
    start = 0
    while start < len(view) and view[start] in b" \t\r\n":
        start += 1
    if bytes(view[start:start + 1]) in (b"{", b"["):
        return "json"
    return "libsvm"

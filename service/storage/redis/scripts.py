"""The Redis backend's Lua scripts (each one step on the server: fenced writes, model
creation and deletion, appends), registered on a client by :func:`register`, and the small
result helpers the writers share. Every script touches the keys of one slot (one model's, or
the index's). Each runs in O(the keys and entries it touches)."""

from __future__ import annotations

from service.storage.redis.lua_chunks import CHUNK_LUA

# Idempotent append (the service's appends and StreamProducer's). KEYS: the model's
# idempotency hash (key -> ids) and its time index (sorted set), the log. ARGV: now ms,
# retention ms, the key, how many examples the entries hold ('' = not said), then fmt, data,
# names ('' = none) per entry. Keys older than the retention are dropped first (a hundred a
# call); a repeat answers the first append's ids and example count ('' when not known) and
# appends nothing. The count is kept in the
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

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1], KEYS[2]) end
return 0
"""


# Fenced snapshot write. KEYS: snapshot hash, lease. ARGV: state (or its manifest), log id,
# owner ('' = no lease check), the replaced chunks' TTL (ms), chunk prefix, the staged chunks
# ("<id> <n> <bytes>", '' for a value written whole). Refuses (returns 0) when another
# process holds the lease, or when the stored snapshot already includes a later log entry:
# a stale owner that wakes up after its lease expired can neither overwrite a newer snapshot
# nor let the log be trimmed below its replay. -1: a staged chunk is gone (expired before
# the commit; nothing written).
_SAVE_SNAPSHOT = CHUNK_LUA + """
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  drop_chunks(ARGV[5], ARGV[6])
  return 0
end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if ms == nil then return nil end
  return tonumber(ms), tonumber(seq)
end
local old = redis.call('HGET', KEYS[1], 'log_id')
if old and old ~= '' then
  local old_ms, old_seq = parse(old)
  local new_ms, new_seq = parse(ARGV[2])
  if new_ms == nil or (old_ms ~= nil and (new_ms < old_ms or
                                          (new_ms == old_ms and new_seq < old_seq))) then
    drop_chunks(ARGV[5], ARGV[6])
    return 0
  end
end
if ARGV[6] ~= '' and keep_chunks(ARGV[5], ARGV[6]) == 0 then
  drop_chunks(ARGV[5], ARGV[6])
  return -1
end
local replaced = redis.call('HGET', KEYS[1], 'chunks')
if replaced and replaced ~= ARGV[6] then expire_chunks(ARGV[5], replaced, ARGV[4]) end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'log_id', ARGV[2], 'chunks', ARGV[6])
return 1
"""

# Fenced publish of an online model's serving view. KEYS: view hash, lease, applied key.
# ARGV: owner ('' = no check), token ("<log id> <nonce>"), state. Refuses (0) when another
# process holds the lease or the stored view includes a later log entry.
_PUBLISH_VIEW = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local function parse(token)
  local ms, seq = string.match(token, '^(%d+)-(%d+) ')
  if ms == nil then return nil end
  return tonumber(ms), tonumber(seq)
end
local old = redis.call('HGET', KEYS[1], 'token')
local new_ms, new_seq = parse(ARGV[2])
if new_ms == nil then return 0 end
if old then
  local old_ms, old_seq = parse(old)
  if old_ms ~= nil and (new_ms < old_ms or (new_ms == old_ms and new_seq < old_seq)) then
    return 0
  end
end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'token', ARGV[2])
redis.call('SET', KEYS[3], string.match(ARGV[2], '^(%S+)'))
return 1
"""
# KEYS: view hash. ARGV: the token the caller holds. -> {token} or {token, state}.
_FETCH_VIEW = """
local token = redis.call('HGET', KEYS[1], 'token')
if not token then return {} end
if token == ARGV[1] then return {token} end
return {token, redis.call('HGET', KEYS[1], 'state')}
"""

# Fenced publish of a batch model's version. KEYS: lease, artifacts hash, artifact blob,
# current-version key. ARGV: owner ('' = no check), version, blob (or its manifest), meta,
# channel, model, chunk prefix, the staged chunks ('' for a blob written whole). 0: refused
# (the lease); -1: a staged chunk is gone (nothing written).
_PUBLISH = CHUNK_LUA + """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  drop_chunks(ARGV[7], ARGV[8])
  return 0
end
if ARGV[8] ~= '' and keep_chunks(ARGV[7], ARGV[8]) == 0 then
  drop_chunks(ARGV[7], ARGV[8])
  return -1
end
local replaced = value_ref(KEYS[3])
if replaced and replaced ~= ARGV[8] then drop_chunks(ARGV[7], replaced) end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
redis.call('SET', KEYS[4], ARGV[2])
redis.call('PUBLISH', ARGV[5], ARGV[6] .. ' ' .. ARGV[2])
return 1
"""
# Rollback: KEYS: artifacts hash, current-version key. ARGV: version, channel, model.
_SET_CURRENT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' ' .. ARGV[1])
return 1
"""

# Create a model. KEYS: models hash, then the model's fixed keys (redis_keys.model_keys), the
# artifacts hash last. ARGV: name, spec. Anything left under the model's name (entries XADDed
# to a stream of a model that did not exist, keys of a deleted model) goes first, in the same
# step, so a new model never folds another's entries.
_CREATE = CHUNK_LUA + """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


# Redis Cluster: the same steps, one slot per script (see the module docstring).
# Create, in the model's slot. KEYS: the spec key, the model's fixed keys, the artifacts hash
# last. ARGV: spec. Refuses (0) when the model exists; else drops leftovers, writes the spec.
_CLUSTER_CREATE = CHUNK_LUA + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
# Delete, in the model's slot. KEYS: as _CLUSTER_CREATE. -> the deleted spec, or nil.
_CLUSTER_DELETE = CHUNK_LUA + """
local spec = redis.call('GET', KEYS[1])
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end
return spec
"""
# Unlist, in the index's slot. KEYS: models hash. ARGV: name, the spec just deleted.
_CLUSTER_UNLIST = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""
# Atomic append of several entries: on a cluster (MULTI over a cluster client depends on the
# redis-py version), and with MIN_REPLICAS (one connection, then WAIT on it). KEYS: the log.
# ARGV: per entry its number of fields, then field, value, ...
_APPEND = """
local ids, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local fields = {}
  for j = 1, 2 * n do fields[j] = ARGV[i + j] end
  table.insert(ids, redis.call('XADD', KEYS[1], '*', unpack(fields)))
  i = i + 2 * n + 1
end
return ids
"""
# Delete a model, one server. KEYS: models hash, then as _CLUSTER_DELETE. ARGV: name.
# -> whether it was listed.
_DELETE = CHUNK_LUA + """
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
return removed
"""
# Prune versions (with their chunks). KEYS: artifacts hash, then the blobs. ARGV: chunk
# prefix, then the versions.
_DELETE_ARTIFACTS = CHUNK_LUA + """
for i = 2, #KEYS do
  drop_chunks(ARGV[1], value_ref(KEYS[i]))
  redis.call('DEL', KEYS[i])
end
redis.call('HDEL', KEYS[1], unpack(ARGV, 2))
return 1
"""


# The appends of one incarnation: nothing unless the stored config is that incarnation.
# KEYS[1] log, KEYS[2] the key holding the config (the index hash: ARGV[1] is the model's
# name; the cluster's spec key: ARGV[1] is ''). ARGV[2] the incarnation, then as _APPEND.
# Each entry also gets the field inc = the incarnation (a fold of an older model of the
# name leaves it alone). -> the ids, or the error STALE.
_INCARNATION_CHECK = """
local function spec_of(key, field)
  if field ~= '' then return redis.call('HGET', key, field) end
  return redis.call('GET', key)
end
local function is_incarnation(spec, incarnation)
  return spec and string.find(spec, '"incarnation":"' .. incarnation .. '"', 1, true)
end
"""
_APPEND_CHECKED = _INCARNATION_CHECK + """
if not is_incarnation(spec_of(KEYS[2], ARGV[1]), ARGV[2]) then
  return redis.error_reply('STALE the model was deleted or created again')
end
local ids, i = {}, 3
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local fields = {}
  for j = 1, 2 * n do fields[j] = ARGV[i + j] end
  table.insert(fields, 'inc')
  table.insert(fields, ARGV[2])
  table.insert(ids, redis.call('XADD', KEYS[1], '*', unpack(fields)))
  i = i + 2 * n + 1
end
return ids
"""


# attribute of the storage -> script (registered lazily: no round trip until first used)
SCRIPTS = {
    "_append_entries": _APPEND, "_append_checked": _APPEND_CHECKED,
    "_cluster_create": _CLUSTER_CREATE,
    "_cluster_delete": _CLUSTER_DELETE, "_cluster_unlist": _CLUSTER_UNLIST,
    "_renew": _RENEW, "_release": _RELEASE, "_save_snapshot": _SAVE_SNAPSHOT,
    "_publish": _PUBLISH, "_create": _CREATE, "_set_current": _SET_CURRENT,
    "_publish_view": _PUBLISH_VIEW, "_fetch_view": _FETCH_VIEW, "_delete": _DELETE,
    "_delete_artifacts": _DELETE_ARTIFACTS,
}


def register(storage, client) -> None:
    """Each script of :data:`SCRIPTS` (and the idempotent append) as an attribute."""

    for name, script in SCRIPTS.items():
        setattr(storage, name, client.register_script(script))
    storage._append_once = client.register_script(APPEND_ONCE_LUA)
    storage._append_once_checked = client.register_script(append_once_checked())


def append_once_checked() -> str:
    """The idempotent append of one incarnation: KEYS as the idempotent append's, then the
    key holding the config; ARGV as its, then the config's field ('' for a spec key) and
    the incarnation. STALE (and nothing written) unless the config is that incarnation; the
    entries carry the field inc."""

    body = APPEND_ONCE_LUA
    loop = "for i = 5, #ARGV, 3 do"
    fields = "'fmt', ARGV[i], 'data', ARGV[i + 1]"
    assert loop in body and body.count(fields) == 2
    body = body.replace(loop, "for i = 5, #ARGV - 2, 3 do")
    body = body.replace(fields, fields + ", 'inc', ARGV[#ARGV]")
    return _INCARNATION_CHECK + """
if not is_incarnation(spec_of(KEYS[4], ARGV[#ARGV - 1]), ARGV[#ARGV]) then
  return redis.error_reply('STALE the model was deleted or created again')
end
""" + body


def always(result) -> bool:
    return True


def not_none(result) -> bool:
    return result is not None


def text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

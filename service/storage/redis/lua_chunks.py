"""The Lua library of chunked large values, included by every script that writes, replaces
or drops one (:mod:`service.storage.redis.scripts`; the Python side is
:mod:`service.storage.redis.values`)."""

from __future__ import annotations

# Large values (snapshots, versions) are written in chunks: ``chunk_bytes`` each, under keys
# ``featurebudget:{m}:chunk:<id>:<k>`` of a fresh id, staged with a TTL (a writer that dies
# leaves nothing for long), then committed by the fenced script that makes them the value:
# it checks the lease (and the snapshot's order), checks that every staged chunk is there,
# PERSISTs them, stores the manifest ``CHUNKS_TAG <id> <n> <bytes>`` where the value was, and
# gives the chunks of the snapshot it replaces a short TTL (:func:`replaced_ttl_ms`: readers
# that started on it finish), all in one step. Chunks are never written again under their
# id, so a reader that got every chunk of a manifest has that value; one that finds a chunk
# gone (replaced, and its grace over) reads the new manifest. A refused commit deletes its
# staged chunks. Model creation and deletion drop every chunk the
# snapshot and the versions refer to.
CHUNKS_TAG = b"FBCHUNKS1 "
CHUNK_LUA = """
local tag = '""" + CHUNKS_TAG.decode() + """'
local function drop_chunks(prefix, ref)
  if not ref or ref == '' then return end
  local id, n = string.match(ref, '^(%S+) (%d+)')
  if id == nil then return end
  for k = 0, tonumber(n) - 1 do redis.call('DEL', prefix .. id .. ':' .. k) end
end
local function expire_chunks(prefix, ref, ms)
  if not ref or ref == '' then return end
  local id, n = string.match(ref, '^(%S+) (%d+)')
  if id == nil then return end
  for k = 0, tonumber(n) - 1 do redis.call('PEXPIRE', prefix .. id .. ':' .. k, ms) end
end
local function keep_chunks(prefix, ref)
  local id, n = string.match(ref, '^(%S+) (%d+)')
  if id == nil then return 0 end
  for k = 0, tonumber(n) - 1 do
    if redis.call('EXISTS', prefix .. id .. ':' .. k) == 0 then return 0 end
  end
  for k = 0, tonumber(n) - 1 do redis.call('PERSIST', prefix .. id .. ':' .. k) end
  return 1
end
local function value_ref(key)
  local head = redis.call('GETRANGE', key, 0, 255)
  if head and string.sub(head, 1, #tag) == tag then return string.sub(head, #tag + 1) end
  return nil
end
local function drop_model_chunks(prefix)
  local chunks = prefix .. 'chunk:'
  drop_chunks(chunks, redis.call('HGET', prefix .. 'snapshot', 'chunks'))
  for _, version in ipairs(redis.call('HKEYS', prefix .. 'artifacts')) do
    drop_chunks(chunks, value_ref(prefix .. 'artifact:' .. version))
  end
end
"""

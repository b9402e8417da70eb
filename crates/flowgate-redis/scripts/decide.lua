-- Flowgate decide: one or more requests, each of one or more items (limits), in one call.
--
-- Requests are decided in order, each all-or-nothing: its items see the states as the requests
-- before it left them (and an earlier item of the same request on the same key, that item's
-- tentative state); its new states are kept only if every enforced item admits (a shadow item,
-- enforce 0, that admits is kept with them; one that rejects is not). So requests of one call
-- that share a key see each other exactly as if they had arrived one after another.
-- The script only admits and records: its reply carries the admissions and each key's state
-- before the call, and the client replays the requests on those states with the Rust
-- transitions to report each decision (remaining, reset, retry, wait), checking that it admits
-- alike.
--
-- KEYS: the call's distinct state keys (each read once and, if changed, written once), each
--       under one limit (the client sends a request that gives a key another limit than an
--       earlier one of the call, a rule changed between them, in a call of its own).
-- ARGV[1]: the call, one binary string (decimal arguments would cost Redis more to parse than
--          the decisions):
--   '<ddHI4'   now (0: Redis's TIME; else a test clock, with the next field), extra expiry in ms,
--              the number of parameter blocks (distinct limits), the number of items;
--   '<Bdddddd' per block: algorithm code, limit, and up to five parameters (see each file);
--   per item, 5 bytes: cost (255: the cost follows as '<d'), block (from 1), key index (from 1,
--              two bytes, low first), flags (1: enforced, 2: the request's last item, 4: the
--              call's only item on its key); then the
--              cost if it did not fit, and, for a concurrency item with a cost, the lease id
--              ('<d'). (string.byte reads them at a third of struct.unpack's cost.)
-- ARGV[2] (when some key is in several requests of the call): per key, '<d', the cost of all
--          the call's items on it if several requests share it (and it is no concurrency or
--          warm-up key),
--          else 0. Such a key is decided in bulk when that total fits at its first item: every
--          item on it is admitted, whichever requests are, since its state only grows with them;
--          the key then takes, at the end, the total of the requests admitted, in one admission
--          (the same state as one admission after another at one instant). A global or
--          per-channel limit shared by a call's requests so costs one decision per call.
-- ARGV[3] (when the call writes reservations' records, on a single Redis): the number of state
--          keys (KEYS past them: records.lua's `expiry`, then each record's key); then per
--          record, in the order of the requests: the index (from 1) of its request's last item,
--          and its four arguments as records.lua's `put_record` takes them. A
--          record is written when its request is admitted (ARGV[2] is then '' when no key is
--          shared).
-- Returns { now, the admissions (one byte per item, 1 or 0), the keys' states before the call
--          (a string each, or nil), and with ARGV[3] the records (one byte each: 1 written, 0 its
--          request refused, 2 it could not be written) }.
--
-- An algorithm's admit(v, now, cost, lease, its parameters) answers whether it admits and, when
-- it admits with a cost, the new state, when that is empty again and when `v` was; and may answer
-- the new state as a patch instead: what replaces `v` from byte `at` (from 0) on, as Redis's
-- SETRANGE writes it. A patch of the call's only item on its key is written so; any other is
-- made whole at once, for the items after it to read.

local call = ARGV[1]
local byte, redis_call = string.byte, redis.call
local now, slack, nblocks, nitems, at = unpack_at('<ddHI4', call)
if now == 0 then
  local t = redis_call('TIME')
  now, slack = t[1] * 1000000 + t[2], nil
end

-- Each block: its algorithm's admit, whether it grants leases, its limit, then the parameters
-- its admit takes (its file's `params`).
local blocks = {}
for b = 1, nblocks do
  local code, limit, x, y, z, u, w
  code, limit, x, y, z, u, w, at = unpack_at('<Bdddddd', call, at)
  ALG[code] = ALG[code] or make(code)
  blocks[b] = { ALG[code].admit, code == CONCURRENCY, limit, ALG[code].params(limit, x, y, z, u, w) }
end

-- A copy of `t`'s first `n` slots, made at its size at once (Lua grows a table by rehashing it
-- at each power of two, which cost more than the decisions).
local function sized(t, n)
  if n <= 4000 then
    return { unpack(t, 1, n) }
  end
  local c = {}
  for j = 1, n do
    c[j] = t[j]
  end
  return c
end

-- The keys' states before the call (MGET in slices that unpack can hold); then, as the admitted
-- requests leave them, their states (strings, as stored), when they are empty again, and when
-- their state before the call was (admit answers it with the first change: the write keeps the
-- key's expiry when it did not move, without reading the old state again).
-- The records to write with their requests' admissions: where the next one's arguments begin
-- and its request's last item; each one's outcome.
local nkeys, rec_at, rec_item, nrec, recorded = #KEYS, nil, nil, 0, nil
if ARGV[3] then
  nkeys, rec_at, recorded = tonumber(ARGV[3]), 4, {}
  rec_item = tonumber(ARGV[4])
end
local before = redis_call('MGET', unpack(KEYS, 1, min(nkeys, 4000)))
for from = 4001, nkeys, 4000 do
  local part = redis_call('MGET', unpack(KEYS, from, min(nkeys, from + 3999)))
  for j = 1, #part do
    before[from + j - 1] = part[j]
  end
end
local states, idle, idle_before = sized(before, nkeys), sized(before, nkeys), sized(before, nkeys)
-- Keys decided in bulk: their block, and the cost the call's admitted requests take.
local totals = ARGV[2]
if totals == '' then
  totals = nil
end
local bulk, taken = {}, {}
-- Keys whose new state is a patch of their state before the call: the byte it starts at.
local patched = {}
local admissions = nitems <= 4000 and { byte(call, 1, nitems) } or {}

-- The last item's block, unpacked (its parameters as locals: a field read is a table lookup).
local pb, admit, leases, limit, p1, p2, p3, p4, p5 = 0
-- The request being decided: whether it is still admitted, its tentative writes (key, state and
-- when it is empty again, `staged` of them, but for its last item's), and its items on keys
-- decided in bulk (key and cost, `nbulk` of them); in lists reused by every request (a table per
-- request cost more than its decisions).
local admitted, staged, nbulk = true, 0, 0
local staged_key, staged_state, staged_idle, staged_patch = {}, {}, {}, {}
local bulk_key, bulk_cost = {}, {}
for i = 1, nitems do
  local cost, b, k1, k2, flags = byte(call, at, at + 4)
  at = at + 5
  local k = k1 + 256 * k2
  if cost == 255 then
    cost, at = unpack_at('<d', call, at)
  end
  if b ~= pb then
    local blk = blocks[b]
    pb, admit, leases, limit = b, blk[1], blk[2], blk[3]
    p1, p2, p3, p4, p5 = blk[4], blk[5], blk[6], blk[7], blk[8]
  end
  local lease = 0
  if leases and cost > 0 then
    lease, at = unpack_at('<d', call, at)
  end
  local v = states[k]
  if staged > 0 then
    for j = staged, 1, -1 do
      -- (an earlier item of this request on the same key: its tentative state)
      if staged_key[j] == k then
        v = staged_state[j]
        break
      end
    end
  end
  local ok, new, new_idle, old_idle, patch = false
  if totals and bulk[k] == nil and cost > 0 then
    -- The call's first item on the key: decided in bulk if the call's total on it fits.
    local tot = unpack_at('<d', totals, 8 * k - 7)
    bulk[k] = tot > cost and limit > 0 and admit(v, now, tot, 0, p1, p2, p3, p4, p5) and b
    taken[k] = bulk[k] and tot
  end
  if bulk[k] then
    ok = true
    nbulk = nbulk + 1
    bulk_key[nbulk], bulk_cost[nbulk] = k, cost
  elseif limit > 0 or cost == 0 then
    -- (a limit of 0 admits nothing but a look)
    ok, new, new_idle, old_idle, patch = admit(v, now, cost, lease, p1, p2, p3, p4, p5)
    if patch and flags < 4 then
      new, patch = sub(v, 1, patch) .. new .. sub(v, patch + #new + 1), nil
    end
  end
  admissions[i] = ok and 1 or 0
  if new and v == before[k] then
    idle_before[k] = old_idle
  end
  if not ok and flags % 2 == 1 then
    admitted = false
  end
  if flags % 4 < 2 then
    if new then
      staged = staged + 1
      staged_key[staged], staged_state[staged], staged_idle[staged] = k, new, new_idle
      staged_patch[staged] = patch or false
    end
  else
    -- The request's last item: its writes are kept if it is admitted.
    if admitted then
      for j = 1, staged do
        local key = staged_key[j]
        states[key], idle[key] = staged_state[j], staged_idle[j]
        if staged_patch[j] then
          patched[key] = staged_patch[j]
        end
      end
      if new then
        states[k], idle[k] = new, new_idle
        if patch then
          patched[k] = patch
        end
      end
    else
      for j = 1, nbulk do
        taken[bulk_key[j]] = taken[bulk_key[j]] - bulk_cost[j]
      end
    end
    if rec_item == i then
      nrec = nrec + 1
      local ok = admitted and pcall(put_record, KEYS[nkeys + 1], KEYS[nkeys + 1 + nrec], ARGV,
        rec_at + 1)
      recorded[nrec] = admitted and (ok and 1 or 2) or 0
      rec_at = rec_at + 5
      rec_item = tonumber(ARGV[rec_at])
    end
    admitted, staged, nbulk = true, 0, 0
  end
end

-- The keys decided in bulk take what the admitted requests took, in one admission.
for k, b in pairs(bulk) do
  if b and taken[k] > 0 then
    local blk = blocks[b]
    local _, new, new_idle, old_idle, patch =
      blk[1](before[k], now, taken[k], 0, blk[4], blk[5], blk[6], blk[7], blk[8])
    states[k], idle[k], idle_before[k] = new, new_idle, old_idle
    if patch then
      patched[k] = patch
    end
  end
end

-- Each changed key written once, expiring when its state is empty again: at the next whole
-- second of Redis's clock after that (so that an expiry that did not move need not be written:
-- the key is then overwritten in place, SETRANGE, for a value of the same length or a patch, or
-- with KEEPTTL, each about half the cost of a SET with an expiry), or with a test clock the ms
-- after it plus the slack. (Numbers are given as strings: Redis formats one with %.17g, which
-- costs more.)
for k = 1, nkeys do
  local v, old, at = states[k], before[k], patched[k]
  if at or v ~= old then
    local key, idle_at = KEYS[k], idle[k]
    local e, e0 = idle_at + 999999, old and idle_before[k] + 999999
    e = (e - e % 1000000) / 1000
    if slack or not (old and e == (e0 - e0 % 1000000) / 1000) then
      -- A new expiry.
      local ex, ms = 'PXAT', string.format('%d', e)
      if slack then
        ex, ms = 'PX', string.format('%d', max(1, idiv(max(idle_at - now, 0) + 999, 1000) + slack))
      end
      if at then
        redis_call('SETRANGE', key, string.format('%d', at), v)
        redis_call(ex == 'PX' and 'PEXPIRE' or 'PEXPIREAT', key, ms)
      else
        redis_call('SET', key, v, ex, ms)
      end
    elseif at then
      redis_call('SETRANGE', key, string.format('%d', at), v)
    elseif #v == #old then
      redis_call('SETRANGE', key, '0', v)
    else
      redis_call('SET', key, v, 'KEEPTTL')
    end
  end
end

local parts = {}
for from = 1, nitems, 4000 do
  parts[#parts + 1] = string.char(unpack(admissions, from, min(nitems, from + 3999)))
end
if nkeys <= 4000 and not recorded then
  return { now, table.concat(parts), unpack(before, 1, nkeys) }
end
local reply = { now, table.concat(parts) }
for k = 1, nkeys do
  reply[k + 2] = before[k]
end
if recorded then
  reply[nkeys + 3] = string.char(unpack(recorded))
end
return reply

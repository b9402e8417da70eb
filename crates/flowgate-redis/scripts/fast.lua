-- Flowgate decide, fast path: straight-line code with one function definition, `put` (Redis
-- creates every closure again on each call). Assembled at startup as this driver with the
-- `-- @@fast` fragment of each algorithm's file in the dispatch marked below.
--
-- One or more requests, each of one or more items (limits), decided in order, each request
-- all-or-nothing: its items are checked against the state before the request, and their writes
-- are made only if every enforced item admits (shadow items, enforce 0, that admit are recorded
-- with it; those that reject are not). Requests are decided one after the other, so requests of
-- one call that share a key see each other exactly as if they had arrived one after another.
-- The keys of ONE request must be distinct (the client sends requests that repeat a key to
-- driver.lua instead).
--
-- The script only admits and records. Every state is a binary string (see each algorithm's
-- file); for each item the script answers its admission and the state the item was decided on,
-- and the client derives the whole decision (remaining, reset, retry, wait) from that state with
-- the same Rust transition the memory store runs. The client checks the script's admission
-- against its own (they agree: tests/properties.rs), so it never reports what Redis did not do.
--
-- Each distinct key of the call is read once (one MGET for the whole call; the states are kept in
-- a table as the call changes them) and written once, after its request (a key of one request)
-- or after the last request (a key several share), if some admitted request changed it: a
-- limit shared by the requests of a call (a global or per-channel rule) costs one read and one
-- write per call, not per request. A key is written with its expiry
-- rounded up to the next whole second of Redis's clock: a key whose expiry does not move is
-- overwritten in place (SETRANGE, when the new state has the old one's length: a SETRANGE that
-- grows a string leaves it Redis's greedy spare room) or written with KEEPTTL, which cost Redis
-- less than a new expiry (and SETRANGE's integer reply costs the script less than SET's status,
-- which Redis hands to Lua as a new table). Every writer of these keys
-- rounds so (common.lua `expiry`), so the expiry a key has is known from its state. No number is
-- passed to redis.call: Redis would format it with %.17g, which costs more than the SET itself.
--
-- KEYS[k]: the distinct state keys of the call (see each algorithm's file for its type).
-- ARGV[1]: the call, as one binary string (read with struct.unpack: Redis builds ARGV as a table
--          grown one element at a time, and Lua's tonumber runs strtod twice, so decimal
--          arguments cost more than the decisions):
--          '<ddHI4B': an explicit `now` in microseconds since the epoch, 0 to read the clock with
--          redis.call('TIME') (production; anything else is TEST ONLY: the store's clock
--          override, and expiries are then relative, exact to the ms, plus the next number);
--          extra expiry in ms added to every key (0 in production; test-only slack); the number
--          B of distinct parameter blocks (limits) in the call; the number of items; 1 if some
--          item is shared (below), else 0.
--          Then B blocks of '<Bdddd': algorithm code (1 token/leaky bucket, 2 fixed window,
--          3 sliding window, 4 sliding log, 5 concurrency), limit, and the algorithm's
--          parameters P1..P3: 1: T, tau = burst * T, max_wait; 3: window, bucket width,
--          buckets; 2, 4, 5: window (then 0, 0).
--          Then the items, in order: per item 7 bytes, read with string.byte (a third of the
--          cost of struct.unpack's format): the cost (255: the cost follows, '<d'), the block
--          (from 1), the key (its index in KEYS) as two bytes, low first, enforce (1 or 0),
--          shared (0 if its key is in no other request of the call; else 1 on the call's first
--          item on that key, 2 on a later one), last (1 on the last item of a request); then,
--          on the first item on a shared key (shared 1), the costs of all the call's items on
--          that key ('<d', `tot`); then, for a concurrency item whose fragment runs with a cost
--          (limit and cost above 0), the lease id to grant ('<d', read by the fragment).
-- Returns { now, the script's admission of every item in order (a string of one byte each, 1
--          or 0: a reply of one element per item costs Redis and the client more than the
--          states themselves), then for each item in order but a later item on a shared key
--          (shared 2), the key's state before the request (a string, or nil when it has none) }.
--          A key that several requests of the call share carries its state (before the call) on
--          its first item only: the client replays the call's requests on that state with the
--          Rust transition, so a hot key's state (a whole concurrency lease list or sliding log)
--          travels once per call, and a global or per-channel limit adds one byte per request
--          to the reply.
-- Each fragment sees: cost, limit and P1..P3 (its block), k (its key's index), tot, IT and ip
-- (concurrency reads its lease there), now, prod, spack, sunpack (struct), unpack, srep, ssub,
-- sformat (string), SF (a cache of strings made in this call: the sliding log's offsets and
-- formats at positive indexes, the sliding window's formats at negative ones), Z, and the state
-- `s` (string or false; `x0` is set, not nil or false, when `s` is a shared key's state made in
-- this call, see below). It sets `allowed` (1 when it admits) and, when it admits with a cost,
-- `nv` (the new state), `ex` (when that is empty again, us) and `ex0` (when `s` was, -1 if
-- none), and may set `off` (on a key of one request only: `nv` is then not the whole state but
-- what replaces the end of `s` from that byte on; see `put`). For a key several requests of the call share (`shared`), a fragment may
-- keep its state within the call as a table instead of a string ({ b, o, P, n, held }: the
-- string `held` as '<I4', then `b` from byte `o` on, then P[1 .. n]; see concurrency.lua) or as a
-- number (a TAT, packed '<d'; see gcra.lua), made into the string once, when the key is written;
-- its next request then sees that table or number as `s` (a key's state is a number only once a
-- request of the call wrote it: X[k]). Only a shared key's state is ever a table or a number.
-- Bulk: on the call's first item on a shared key (shared 1), a fragment that admits with a cost
-- may find that `tot` more fits (the costs of all the call's items on the key, this one's
-- included). The key then admits every one of them whichever requests are admitted (its state
-- only grows with them), so the fragment sets Z[k] = tot and makes `nv` (and `ex`) the state
-- after all of them (every algorithm but concurrency, whose state lists each lease). The loop
-- below then records the key in L instead of V, admits its later items without deciding them,
-- and writes it once, after the last request, less what rejected requests gave back.

local spack, sunpack, unpack, sbyte = struct.pack, struct.unpack, unpack, string.byte
local IT = ARGV[1]
-- (ip: the position of what follows)
local clock, slack, nb, nitems, dup, ip = sunpack('<ddHI4B', IT)
local prod = clock == 0
local now = clock
if prod then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- (arithmetic converts each with one strtod)
end
local mmax, call, sformat, srep, ssub = math.max, redis.call, string.format, string.rep, string.sub
local tconcat = table.concat
local SF = {}
local nkeys = #KEYS
-- Writes key KEYS[k]'s new state v, empty again at ex (us); ex0: when its state before (s) was
-- empty again, -1 if none; off: nil, or the byte (a decimal string) from which v replaces the
-- end of s (a key of one request, so the key holds s; see sliding_log.lua). The script's one
-- function (Redis makes its closure once per call): writing at once the last item of a request
-- that is admitted costs less than staging it.
local function put(k, v, ex, ex0, s, off)
  local key = KEYS[k]
  if prod then
    -- common.lua `expiry`: the next whole second (ms since the epoch) at or after the instant
    -- the state is empty (% is exact on these integers, below 2^53).
    local e = ex + 999999
    e = (e - e % 1000000) / 1000
    if ex0 >= 0 then
      local e0 = ex0 + 999999
      if e == (e0 - e0 % 1000000) / 1000 then
        -- The key exists (its state was read in this script, whose clock Redis freezes) and
        -- keeps its expiry: a value of the same length is overwritten in place.
        if off then
          call('SETRANGE', key, off, v)
        elseif #v == #s then
          call('SETRANGE', key, '0', v)
        else
          call('SET', key, v, 'KEEPTTL')
        end
        return
      end
    end
    -- (a string: Redis formats a number argument with %.17g, ten times the cost)
    if off then
      call('SETRANGE', key, off, v)
      call('PEXPIREAT', key, sformat('%d', e))
    else
      call('SET', key, v, 'PXAT', sformat('%d', e))
    end
  else
    local t = ex - now + 999
    t = mmax(1, (t - t % 1000) / 1000 + slack)
    if off then
      call('SETRANGE', key, off, v)
      call('PEXPIRE', key, t)
    else
      call('SET', key, v, 'PX', t)
    end
  end
end
-- The states, in slices that unpack can hold.
local V = call('MGET', unpack(KEYS, 1, math.min(nkeys, 4000)))
for from = 4001, nkeys, 4000 do
  local more = call('MGET', unpack(KEYS, from, math.min(nkeys, from + 3999)))
  for i = 1, #more do
    V[from + i - 1] = more[i]
  end
end
-- The blocks: block j (from 1) is BP[j] = { code, limit, P1, P2, P3 }.
local BP = {}
for j = 1, nb do
  local c, l, p1, p2, p3
  c, l, p1, p2, p3, ip = sunpack('<Bdddd', IT, ip)
  BP[j] = { c, l, p1, p2, p3 }
end
local pb, code, limit, P1, P2, P3 = -1, 0, 0, 0, 0, 0 -- the block of the last item
-- (Tables are built with room for their usual size: `nil` entries of a constructor size its
-- array part, so that it is not grown, and copied, one element at a time.)
-- The writes of the request being decided to keys no other request of the call has, but for its
-- last item's (written at once when the request is admitted): key index, value, ex, ex0, old
-- state and off each.
local G = { nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil }
-- The keys in several requests of the call (`shared`): an admitted item replaces the key's state
-- in V at once (the keys of one request are distinct, so no item of its request reads it), and
-- U[i .. i + 2] (key index, its state and X before) lets a rejected request put them back.
-- X[k]: when key k's state in V, made in this call, is empty again (us); nil while V holds the
-- state before the call. F[j .. j + 2]: a key's index, its ex0 and state before the call, once
-- per key, from its first admitted item on (W[k] once it is there); written after the last
-- request when X[k] is set.
-- Z[k]: for a key decided in bulk (below), the cost its admitted requests take in all (the
-- call's total on it, less the items of rejected requests); L[j .. j + 7]: such a key's index,
-- its algorithm's code, its nv, ex and ex0 as if every item of the call on it were admitted,
-- its state before the call, the call's total on it (tot) and its block's P1.
local U, X, F, W, Z, L, nd, nl, tot = nil, nil, nil, nil, nil, nil, 0, 0, 0
if dup == 1 then
  U, X, F, W, Z, L = {}, {}, {}, {}, {}, {}
end
-- The reply (out[2], the admissions, is made from A at the end) and the admissions, by item.
local out = { now, '', nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil }
local A = { nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil }
local oi = 2
local done = 0
-- (The item loop compares its small integer fields with < and >, not == and ~=: Redis's Lua
-- 5.1 calls a function for every == between two values of one type, while an order comparison
-- of two numbers is inline.)
while done < nitems do
  local admitted = true
  local ns, nu = 0, 0
  local ip0 = ip -- (where the request's items start)
  repeat
    done = done + 1
    -- (locals made by the call itself land in their registers: no copies; `until` sees `last`)
    local cost, b, k, k1, enforce, shared, last = sbyte(IT, ip, ip + 6)
    ip = ip + 7
    k = k + k1 * 256
    if cost > 254 then
      cost, ip = sunpack('<d', IT, ip)
    end
    -- (one pass: `break` ends an item on a key decided in bulk)
    repeat
      -- (a shared key's X, read once: nil until an admitted item of the call replaced its state)
      local x0 = false
      if shared > 0 then
        if shared < 2 then
          tot, ip = sunpack('<d', IT, ip)
        elseif Z[k] then
          -- A later item on a key decided in bulk (see Bulk above): admitted, counted in Z[k].
          A[done] = 1
          break
        end
        x0 = X[k]
      end
      if b ~= pb then
        pb = b
        local bk = BP[b]
        -- (one at a time: each read goes straight to its register)
        code = bk[1]
        limit = bk[2]
        P1 = bk[3]
        P2 = bk[4]
        P3 = bk[5]
      end
      local allowed = 0
      local s0 = V[k]
      local s = s0
      local nv, ex, off, ex0 = nil, nil, nil, -1
      if limit > 0 or cost < 1 then
@ALGORITHMS@
      end
      A[done] = allowed
      -- (a later item on a shared key carries no state: the client replays the earlier ones)
      if shared < 2 then
        out[oi + 1] = s
        oi = oi + 1
      end
      if not nv then
      elseif shared < 1 then
        if last > 0 and admitted then
          -- (the request's last item, admitting, and every item before it too: recorded)
          put(k, nv, ex, ex0, s, off)
        else
          -- (one store per statement: a multiple assignment copies every value first)
          G[ns + 1] = k
          G[ns + 2] = nv
          G[ns + 3] = ex
          G[ns + 4] = ex0
          G[ns + 5] = s
          G[ns + 6] = off
          ns = ns + 6
        end
      elseif shared < 2 and Z[k] then
        -- Decided in bulk (the fragment set Z[k]): nv is the state after every item of the call
        -- on the key, written after the last request, less what rejected requests give back.
        L[nl + 1] = k
        L[nl + 2] = code
        L[nl + 3] = nv
        L[nl + 4] = ex
        L[nl + 5] = ex0
        L[nl + 6] = s
        L[nl + 7] = tot
        L[nl + 8] = P1
        nl = nl + 8
      else
        U[nu + 1] = k
        U[nu + 2] = s0
        U[nu + 3] = x0
        nu = nu + 3
        V[k] = nv
        X[k] = ex
        if not x0 and not W[k] then
          W[k] = true
          F[nd + 1] = k
          F[nd + 2] = ex0
          F[nd + 3] = s
          nd = nd + 3
        end
      end
      if allowed < 1 and enforce > 0 then
        admitted = false
      end
    until true
  until last > 0
  if admitted then
    for j = 1, ns, 6 do
      put(G[j], G[j + 1], G[j + 2], G[j + 3], G[j + 4], G[j + 5])
    end
  else
    for i = 1, nu, 3 do
      local k = U[i]
      V[k] = U[i + 1]
      X[k] = U[i + 2]
    end
    if nl > 0 then
      -- The request's items on keys decided in bulk take nothing: read its items again.
      local q = ip0
      while q < ip do
        local c, b2, k2, k3, _, sh = sbyte(IT, q, q + 5)
        q = q + 7
        if c == 255 then
          c, q = sunpack('<d', IT, q)
        end
        if sh == 1 then
          q = q + 8 -- (tot)
        end
        local bk = BP[b2]
        if bk[1] == 5 and bk[2] > 0 and c > 0 then
          q = q + 8 -- (a concurrency item's lease)
        end
        k2 = k2 + k3 * 256
        local z = sh ~= 0 and Z[k2]
        if z then
          Z[k2] = z - c
        end
      end
    end
  end
end
-- The keys decided in bulk: their state after every item of the call on them (nv), less what
-- the items of rejected requests gave back (d): from a bucket's TAT (a number), d * T; from a
-- window's count or a log's newest entry, and from the total, d (the rest of the state does
-- not depend on the cost: the window or bucket and the entry's instant are the call's).
for j = 1, nl, 8 do
  local k = L[j]
  local adm = Z[k]
  if adm > 0 then
    local code, v, ex, d = L[j + 1], L[j + 2], L[j + 3], L[j + 6] - adm
    if code == 1 then
      if d > 0 then
        v = v - d * L[j + 7]
        ex = v
      end
      v = spack('<d', v)
    elseif d > 0 then
      local n = #v
      if code == 2 then
        local e, c = sunpack('<dI4', v)
        v = spack('<dI4', e, c - d)
      elseif code == 3 then
        -- (the head's count first, the total last)
        v = spack('<I4', sunpack('<I4', v) - d) .. ssub(v, 5, n - 8)
          .. spack('<d', sunpack('<d', v, n - 7) - d)
      else
        -- (the newest entry and the trailer last)
        local t, c, dead, used = sunpack('<dI4I4I4', v, n - 19)
        v = ssub(v, 1, n - 20) .. spack('<dI4I4I4', t, c - d, dead, used - d)
      end
    end
    put(k, v, ex, L[j + 4], L[j + 5])
  end
end
-- After the last request, the shared keys' states (a string, a number or a table), made into
-- strings.
for j = 1, nd, 3 do
  local k = F[j]
  local x = X[k]
  if x then
    local v = V[k]
    local tv = type(v)
    if tv == 'number' then
      v = spack('<d', v)
    elseif tv == 'table' then
      local parts, P = { spack('<I4', v.held), ssub(v.b, v.o) }, v.P
      for i = 1, v.n do
        parts[i + 2] = P[i]
      end
      v = tconcat(parts)
    end
    put(k, v, x, F[j + 1], F[j + 2])
  end
end
-- (string.char takes the admissions in slices that unpack can hold)
if nitems <= 4000 then
  out[2] = string.char(unpack(A, 1, nitems))
else
  local parts = {}
  for from = 1, nitems, 4000 do
    parts[#parts + 1] = string.char(unpack(A, from, math.min(nitems, from + 3999)))
  end
  out[2] = tconcat(parts)
end
return out

-- Flowgate decide: one or more requests, each of one or more items (limits), decided in order;
-- each request all-or-nothing. Within a request every item is checked against the tentative
-- state left by the items before it (two items with the same key see each other); the request
-- is recorded only if every enforced item admits it; shadow items (enforce 0) that admit are
-- recorded with it, shadow items that reject are not. Rejected requests write nothing.
--
-- KEYS[k]: the state key of the k-th item over all requests, in order (one key per item; see
--          each algorithm's file for its type).
-- ARGV[1]: '' to read the clock with redis.call('TIME') (production), or an explicit `now` in
--          microseconds since the epoch (TEST ONLY: the store's clock override).
-- ARGV[2]: extra expiry in ms added to every key (0 in production; test-only slack for clock
--          overrides).
-- ARGV[3]: the number of requests R.
-- Then for each request: its number of items n, followed by n items of ITEM_ARGS parameters
-- each (see read_item).
-- Returns integers: { now, then for every item in order: allowed (1/0), remaining,
--          reset_after (us), retry_after (us, -1 for none), wait (us) }. A concurrency item that
--          is allowed with a cost above 0 holds the lease id it was sent (the client knows it).

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local slack = tonumber(ARGV[2])
local requests = tonumber(ARGV[3])

local committed = {} -- key -> state as this call has left it (loaded on first use)
local out = { now }
local a, k = 4, 1

for _ = 1, requests do
  local n = tonumber(ARGV[a])
  a = a + 1
  local items = {}
  for i = 1, n do
    local p = read_item(a)
    p.key = KEYS[k]
    items[i] = p
    a = a + ITEM_ARGS
    k = k + 1
  end
  -- Work on copies when the request has several items, so that a rejection records nothing.
  local work = {}
  local admitted = true
  local ds = {}
  for i = 1, n do
    local p = items[i]
    local alg = ALG[p.alg]
    local s = work[p.key]
    if not s then
      s = committed[p.key]
      if not s then
        s = alg.load(p.key, p, now)
        committed[p.key] = s
      end
      if n > 1 then
        s = copy(s)
      end
      work[p.key] = s
    end
    local d
    if p.limit == 0 and p.cost > 0 then
      d = decision() -- can never pass
    else
      d = alg.check(p, s, now, p.cost)
      if d.allowed and p.cost > 0 then
        alg.apply(p, s, now, p.cost)
        s.dirty = p.alg
      end
    end
    if not d.allowed and p.enforce then
      admitted = false
    end
    ds[i] = d
  end
  if admitted and n > 1 then
    for key, s in pairs(work) do
      committed[key] = s
    end
  end
  for i = 1, n do
    local d = ds[i]
    local allowed = 0
    if d.allowed then
      allowed = 1
    end
    out[#out + 1] = allowed
    out[#out + 1] = d.remaining
    out[#out + 1] = d.reset
    out[#out + 1] = d.retry
    out[#out + 1] = d.wait
  end
end

for key, s in pairs(committed) do
  if s.dirty then
    ALG[s.dirty].store(key, s, now, slack)
  end
end
return out

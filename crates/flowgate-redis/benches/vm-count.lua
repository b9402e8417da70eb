-- Lua VM instructions the fast decide script runs per request, 1 rule against the field's 3 rules
-- (global, channel, user; token buckets that admit everything), counted by a count hook in a
-- stand-alone Lua 5.1 (Redis's Lua) with Redis's struct library: deterministic, unlike rates, and
-- per source line with `lines`. See vm-count.sh.
--   lua5.1 vm-count.lua <struct.so> <assembled fast.lua> [lines] [algorithm code of the 1 rule]
-- (1 token bucket, 2 fixed window, 3 sliding window, 4 sliding log, 5 concurrency: 100 per s; each
-- call 10 ms after the one before)
local so, script, lines = arg[1], arg[2], arg[3] == 'lines'
local ONE = tonumber(arg[4] or '1')
local clock = 1700000000000000
struct = package.loadlib(so, 'luaopen_struct')()
local store = {}
-- Redis, as far as the fast script uses it.
redis = {
  call = function(cmd, ...)
    local a = { ... }
    if cmd == 'TIME' then
      return { tostring(math.floor(clock / 1000000)), tostring(clock % 1000000) }
    elseif cmd == 'MGET' then
      local r = {}
      for i = 1, #a do
        r[i] = store[a[i]] or false
      end
      return r
    elseif cmd == 'SET' then
      store[a[1]] = a[2]
      return { ok = 'OK' }
    elseif cmd == 'SETRANGE' then
      local old, at = store[a[1]] or '', tonumber(a[2])
      if #old < at then
        old = old .. string.rep('\0', at - #old)
      end
      local v = old:sub(1, at) .. a[3] .. old:sub(at + #a[3] + 1)
      store[a[1]] = v
      return #v
    elseif cmd == 'PEXPIREAT' or cmd == 'PEXPIRE' then
      return 1
    end
    error('unexpected command ' .. cmd)
  end,
}
local chunk = assert(loadfile(script))
local src = {}
for l in io.lines(script) do
  src[#src + 1] = l
end
-- One coalesced call of `nreq` requests, encoded as the client does (call.rs, scripts.rs).
-- Block b: limit, T (us), tau = limit * T (burst = limit), no delay.
local BLOCKS = {
  [1] = { { 100, 10000 } },
  [3] = { { 1000000, 1 }, { 100000, 10 }, { 100, 10000 } },
}
local function build(nreq, rules, round)
  local keys, kidx, uses, reqs = {}, {}, {}, {}
  for r = 1, nreq do
    local u = (round * nreq + r) % (ONE == 1 and 1000000 or 54) -- (other algorithms: keys reused)
    local names = { { 'user:' .. u, 0 } }
    if rules == 3 then
      names = { { 'global', 0 }, { 'channel:' .. (u % 10), 1 }, { 'user:' .. u, 2 } }
    end
    reqs[r] = names
    for _, n in ipairs(names) do
      if not kidx[n[1]] then
        keys[#keys + 1] = n[1]
        kidx[n[1]] = #keys
        uses[#keys] = 0
      end
      uses[kidx[n[1]]] = uses[kidx[n[1]]] + 1
    end
  end
  local nitems = nreq * rules
  local parts = { struct.pack('<ddHI4B', 0, 0, rules, nitems, (#keys < nitems) and 1 or 0) }
  for _, b in ipairs(BLOCKS[rules]) do
    if rules == 1 and ONE ~= 1 then
      -- limit, then window (2, 4, 5), or window, bucket width and buckets (3: 10 buckets)
      local p = ONE == 3 and { 1000000, 100000, 10 } or { 1000000, 0, 0 }
      parts[#parts + 1] = struct.pack('<Bdddd', ONE, 100, p[1], p[2], p[3])
    else
      parts[#parts + 1] = struct.pack('<Bdddd', 1, b[1], b[2], b[1] * b[2], 0)
    end
  end
  local seen = {}
  for r = 1, nreq do
    for i, n in ipairs(reqs[r]) do
      local k = kidx[n[1]]
      local shared = 0
      if uses[k] > 1 then
        shared = seen[k] and 2 or 1
      end
      seen[k] = true
      parts[#parts + 1] = string.char(1, n[2] + 1, k % 256, math.floor(k / 256), 1, shared,
        (i == #reqs[r]) and 1 or 0)
      if shared == 1 then
        parts[#parts + 1] = struct.pack('<d', uses[k]) -- the key's costs in all (tot)
      end
      if rules == 1 and ONE == 5 then
        parts[#parts + 1] = struct.pack('<d', r) -- the lease id
      end
    end
  end
  return keys, table.concat(parts)
end
local count, H = 0, {}
local function hook()
  local info = debug.getinfo(2, 'Sl')
  if info.source == '@' .. script then
    count = count + 1
    H[info.currentline] = (H[info.currentline] or 0) + 1
  end
end
local NREQ, ROUNDS = 27, 5
for _, rules in ipairs(ONE == 1 and { 1, 3 } or { 1 }) do
  store, H = {}, {}
  local total = 0
  for round = 0, ROUNDS do
    local keys, call = build(NREQ, rules, round)
    KEYS, ARGV = keys, { call }
    count = 0
    debug.sethook(hook, '', 1)
    local out = chunk()
    debug.sethook()
    assert(#out[2] == NREQ * rules and not out[2]:find('\0'), 'a request was rejected')
    clock = clock + 10000
    if round == 0 then
      H = {} -- (the first call creates the keys)
    else
      total = total + count
    end
  end
  print(string.format('%d rule(s): %.1f VM instructions per request (%d requests per call)',
    rules, total / (ROUNDS * NREQ), NREQ))
  if lines then
    local ls = {}
    for l in pairs(H) do
      ls[#ls + 1] = l
    end
    table.sort(ls)
    for _, l in ipairs(ls) do
      local per = H[l] / (ROUNDS * NREQ)
      if per >= 0.1 then
        print(string.format('%5d %6.1f  %s', l, per, src[l]:sub(1, 90)))
      end
    end
  end
end

-- The cost of the pieces a decide script is made of, inside Redis's Lua (see lua-costs.sh):
-- each mode repeats one piece and returns microseconds per piece.
-- KEYS: 27 keys (a coalesced call's worth). ARGV[1]: the mode; ARGV[2]: value bytes (the log
-- modes: entries).
local sunpack, spack = struct.unpack, struct.pack
local mode, n = ARGV[1], #KEYS
local v = string.rep('x', tonumber(ARGV[2]))
for i = 1, n do
  redis.call('SET', KEYS[i], v, 'PX', '100000')
end
local item, old = {}, {}
for i = 1, n do
  item[i] = string.char(1, 1, i, 0, 1, 0, 1) -- fast.lua's 7-byte item
  old[i] = spack('<dHHBBB', 1, 0, i, 1, 0, 1) -- the 15-byte item it replaced (session 9)
end
local IT, OLD = table.concat(item), table.concat(old)
-- A sliding log of ARGV[2] entries (12 bytes each) and its total, and the format that makes the
-- new log of it in one pack (sliding_log.lua).
local L = string.rep('abcdefghijkl', tonumber(ARGV[2])) .. 'TTTT'
local LF = string.format('<dI4c%dI4', #L - 4)
local s, Q, acc = spack('<d', 1e15), {}, 0
local reps, per = 2000, n
local t0 = redis.call('TIME')
for _ = 1, reps do
  if mode == 'mget' then -- reading a key (per key of one MGET)
    redis.call('MGET', unpack(KEYS))
  elseif mode == 'set' then -- writing a state whose length changed
    for i = 1, n do redis.call('SET', KEYS[i], v, 'KEEPTTL') end
  elseif mode == 'setrange' then -- writing a state of the same length and expiry
    for i = 1, n do redis.call('SETRANGE', KEYS[i], '0', v) end
  elseif mode == 'pxat' then -- writing a state whose expiry moved
    for i = 1, n do redis.call('SET', KEYS[i], v, 'PXAT', '99999999999999') end
  elseif mode == 'decode' then -- decoding an item of the call string
    local ip = 1
    for _ = 1, n do
      local cost, b, k, k1, enforce, shared, last = string.byte(IT, ip, ip + 6)
      ip = ip + 7
      k = k + k1 * 256
      if cost == 255 then
        cost, ip = sunpack('<d', IT, ip)
      end
      acc = acc + k + b
    end
  elseif mode == 'decode-struct' then -- the same with struct.unpack, as before session 9
    local ip = 1
    for _ = 1, n do
      local cost, b, k, enforce, shared, last
      cost, b, k, enforce, shared, last, ip = sunpack('<dHHBBB', OLD, ip)
      acc = acc + k + b
    end
  elseif mode == 'log-pack' then -- a new sliding log made in one pack (sliding_log.lua)
    for i = 1, n do
      acc = acc + #spack(LF, 1.7e15 + i, 1, L, 99)
    end
  elseif mode == 'log-concat' then -- the same made by concatenation (tried, not kept)
    for i = 1, n do
      acc = acc + #(spack('<dI4', 1.7e15 + i, 1) .. string.sub(L, 1, #L - 4) .. spack('<I4', 99))
    end
  elseif mode == 'tat-string' then -- a shared TAT kept as a string: unpack and pack
    for _ = 1, n do
      local tat = sunpack('<d', s)
      s = spack('<d', tat + 1)
    end
  elseif mode == 'tat-number' then -- a shared TAT kept as a number
    for _ = 1, n do
      Q[5] = (Q[5] or 0) + 1
    end
  end
end
local t1 = redis.call('TIME')
return tostring(((t1[1] - t0[1]) * 1e6 + t1[2] - t0[2]) / (reps * per))

-- The cost of the pieces a decide script is made of, inside Redis's Lua (see lua-costs.sh):
-- each mode repeats one piece and returns microseconds per piece.
-- KEYS: 27 keys (a coalesced call's worth). ARGV[1]: the mode; ARGV[2]: value bytes.
local sunpack, spack = struct.unpack, struct.pack
local mode, n = ARGV[1], #KEYS
local v = string.rep('x', tonumber(ARGV[2]))
for i = 1, n do
  redis.call('SET', KEYS[i], v, 'PX', '100000')
end
local item = {}
for i = 1, n do
  item[i] = string.char(1, 0, 0, i, 0, 1, 0, 1)
end
local IT = table.concat(item)
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
      local cost, b, b1, k, k1 = string.byte(IT, ip, ip + 7)
      ip = ip + 8
      b = b + b1 * 256
      k = k + k1 * 256
      if cost == 255 then
        cost, ip = sunpack('<d', IT, ip)
      end
      acc = acc + k + b
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

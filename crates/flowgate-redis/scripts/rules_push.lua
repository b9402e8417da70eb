-- A new version of the rules shared by the cluster (the server's rules/shared.rs): stored only
-- if the version in force is the one the change was based on, so that a push made on a stale
-- read is refused, never lost; then announced.
--
-- KEYS[1]: the number of the version in force, flowgate:{rules}:version (absent: none yet).
-- ARGV[1]: the version the change is based on: a number, 'empty' (only if none is stored yet),
--          or '' (whatever is in force).
-- ARGV[2]: the prefix of a version's key, flowgate:{rules}:v: (version n is the hash
--          ARGV[2]..n: doc, author, action, diff, summary, at_ms). It shares KEYS[1]'s hash tag,
--          so every key the script writes is in KEYS[1]'s Redis Cluster slot.
-- ARGV[3]: the document (JSON); ARGV[4]: its author; ARGV[5]: the action (push, rollback,
--          seed); ARGV[6]: the diff from the version before; ARGV[7]: its summary.
-- ARGV[8]: the channel on which the new version's number is published, flowgate:rules.
-- ARGV[9]: how many versions are kept: the one that many before the new one is deleted.
-- Returns {the version in force after the call, 1 (stored as it), 0 (not stored: a version
-- exists and the base was 'empty') or -1 (not stored: the base is not the version in force)}.
-- The time stored is Redis's (TIME), in milliseconds.

local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local base = ARGV[1]
if base == 'empty' then
  if cur ~= 0 then return {cur, 0} end
elseif base ~= '' and tonumber(base) ~= cur then
  return {cur, -1}
end
local n = cur + 1
local t = redis.call('TIME')
local at = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', ARGV[2] .. n, 'doc', ARGV[3], 'author', ARGV[4], 'action', ARGV[5],
  'diff', ARGV[6], 'summary', ARGV[7], 'at_ms', at)
redis.call('SET', KEYS[1], n)
if n > tonumber(ARGV[9]) then redis.call('DEL', ARGV[2] .. (n - tonumber(ARGV[9]))) end
redis.call('PUBLISH', ARGV[8], n)
return {n, 1}

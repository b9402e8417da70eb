-- The alerts' evaluator lease: one node of the cluster evaluates the alerts (the server's
-- observe/alerts/cluster.rs). Called every second by every node on Redis: the holder renews its
-- lease, another takes it once it has lapsed.
--
-- KEYS[1]: the lease, flowgate:{alerts}:leader (a string: the holder's id, with an expiry).
-- ARGV[1]: the caller's evaluator id (unique per process).
-- ARGV[2]: the lease's length in milliseconds.
-- Returns 1 (the caller held it: renewed), 2 (it was free: taken now, by the caller) or 0
-- (another holds it: nothing written).

local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0

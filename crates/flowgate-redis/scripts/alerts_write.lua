-- The alerts' states, replaced by the evaluator that holds the lease (alerts_lease.lua), fenced:
-- a node whose lease lapsed writes nothing (the server's observe/alerts/cluster.rs).
--
-- KEYS[1]: the lease, flowgate:{alerts}:leader.
-- KEYS[2]: the states, flowgate:{alerts}:state (a hash: alert name -> its state as JSON).
--          Both keys share one hash tag, so one Redis Cluster slot.
-- ARGV[1]: the caller's evaluator id.
-- ARGV[2..]: alert, state, alert, state, ...: every state, replacing those stored.
-- Returns 1 (written) or 0 (the lease is another's: nothing written).

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
if #ARGV > 1 then redis.call('HSET', KEYS[2], unpack(ARGV, 2)) end
return 1

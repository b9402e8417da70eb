-- Flowgate charge: charges and refunds (costs learned after the work), each applied to its key in
-- order, never refused for being over the limit: a charge counts up to the limit's max_debt
-- beyond it, a refund gives back down to empty (docs/algorithms.md, "Charges, debt and refunds").
-- Each algorithm that takes charges has a `charge` in its file, the twin of its Rust `charge`
-- and `refund`; the client replays the items on the states before the call with the Rust
-- transition to report each answer, checking that it applied alike.
--
-- KEYS: the call's distinct state keys.
-- ARGV[1]: as decide.lua's call string, but each block's fourth parameter is the limit's
--          max_debt, and an item's flags byte is 0 for a charge, 1 for a refund, 2 for the
--          release of a reservation; a release's item ends with one more '<d': the instant the
--          reservation took its units, or for a fixed window the end of the window holding that
--          instant (the client computes it: calendar periods need a time zone database).
-- Returns { now, the units each item applied (a list), the keys' states before the call }.

local nkeys = #KEYS
local before = redis.call('MGET', unpack(KEYS))
local now, slack, states, idle, applied = charges(ARGV[1], before, 1, nkeys)
write_charged(1, nkeys, now, slack, states, idle)
return { now, applied, unpack(before, 1, nkeys) }

-- Flowgate release: gives back a concurrency lease.
-- KEYS[1]: flowgate:{<key>}:c (see concurrency.lua).
-- ARGV[1]: the lease id (decimal).
-- Returns 1 when the lease was held, 0 otherwise.
return conc_release(KEYS[1], ARGV[1])

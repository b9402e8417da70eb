-- Flowgate: what every script shares. Assembled before the algorithm files; the algorithm codes
-- (GCRA, FIXED_WINDOW, SLIDING_WINDOW, SLIDING_LOG, CONCURRENCY, WARMUP) are defined above this file by
-- the Rust code that assembles the scripts (scripts.rs), their one definition.
--
-- Numbers are Lua doubles, exact for integers below 2^53; flowgate-core's validation keeps every
-- quantity below that. Time is integer microseconds since the Unix epoch. Every state is a
-- little-endian binary string (Lua's `struct`).

-- The algorithms by code, each the table its file returns, made by `make(code)` (assembled after
-- this file) the first time a call needs it: making every file's closures at each call cost
-- more than a decision.
local ALG = {}

-- The library functions every file uses, as locals (a global is two table lookups).
local pack, unpack_at, sub, max, min = struct.pack, struct.unpack, string.sub, math.max, math.min

-- Every instant or index a script writes is an integer in [0, BOUND), 2^52; a state holding
-- anything else counts as none.
local BOUND = 4503599627370496

-- floor(a / b) for integers a >= 0, b > 0 (exact: % and the division of a multiple are, below
-- 2^53).
local function idiv(a, b)
  return (a - a % b) / b
end

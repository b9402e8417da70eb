//! Real `redis-server` processes for tests (written with the Redis store).

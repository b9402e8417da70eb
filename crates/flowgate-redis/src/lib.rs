//! The Redis store (in progress).

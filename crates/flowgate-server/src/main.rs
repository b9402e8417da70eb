//! The `flowgate` binary.
fn main() {}

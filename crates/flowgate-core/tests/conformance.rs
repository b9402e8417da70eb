//! The memory store passes the store conformance suite.

use flowgate_core::{ManualClock, MemoryStore};

#[tokio::test]
async fn memory_store_conforms() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::with_clock(clock.clone());
    flowgate_testkit::conformance::run(&store, &clock, "memory").await;
}

#[tokio::test]
async fn memory_store_conforms_for_charges() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::with_clock(clock.clone());
    flowgate_testkit::conformance::run_charges(&store, &clock, "memory").await;
}

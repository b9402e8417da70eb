//! The Redis queue store: the queue conformance table on a single server and on a 3-master
//! Redis Cluster (the script reads the table's ManualClock), and instances spread over the
//! cluster's masters.

mod common;

use common::{bounded, cluster, single, test_options};
use flowgate_core::ManualClock;
use flowgate_core::queue::{NewJob, QueueSpec, QueueStore};
use flowgate_testkit::redis::{RedisCluster, RedisServer, raw_command};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server_passes_the_queue_conformance_table() {
    let server = RedisServer::start();
    let clock = ManualClock::new(0);
    let store = single(&server, test_options(&clock)).await.queues();
    bounded(
        60,
        flowgate_testkit::queue_conformance::run(&store, &clock, "single:"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_passes_the_queue_conformance_table_and_spreads_instances() {
    let nodes = RedisCluster::start(3);
    let clock = ManualClock::new(0);
    let store = cluster(&nodes, test_options(&clock)).await.queues();
    bounded(
        60,
        flowgate_testkit::queue_conformance::run(&store, &clock, "cluster:"),
    )
    .await;
    // Thirty per-channel instances: each lives in one slot, and every master holds some.
    let spec = QueueSpec::new(
        "pay",
        "refunds",
        vec![flowgate_core::Matcher::parse("channel")],
        "1/s".parse().unwrap(),
    )
    .unwrap();
    for c in 0..30 {
        let instance = format!("pay:refunds:channel=C{c}");
        store
            .submit(&spec, &instance, &[NewJob::new("x")])
            .await
            .unwrap();
    }
    for n in nodes.nodes() {
        let keys = raw_command(n.port(), "DBSIZE").unwrap();
        let count: u64 = keys.trim().trim_start_matches(':').parse().unwrap();
        assert!(count > 0, "a master holds no queue key");
    }
    assert!(store.instances().await.unwrap().len() >= 30);
}

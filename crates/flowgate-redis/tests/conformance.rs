//! The Redis store passes the store conformance suite, on a single server and on a 3-master
//! Redis Cluster, with the test-only clock override (the scripts read the suite's ManualClock);
//! and the charges' table, on both.

mod common;

use common::{bounded, cluster, single, test_options};
use flowgate_core::ManualClock;
use flowgate_testkit::redis::{RedisCluster, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server_conforms() {
    let server = RedisServer::start();
    let clock = ManualClock::new(0);
    let store = single(&server, test_options(&clock)).await;
    bounded(
        60,
        flowgate_testkit::conformance::run(&store, &clock, "single"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server_without_coalescing_conforms() {
    let server = RedisServer::start();
    let clock = ManualClock::new(0);
    let store = single(&server, test_options(&clock).coalesce(false)).await;
    bounded(
        60,
        flowgate_testkit::conformance::run(&store, &clock, "direct"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_conforms() {
    let nodes = RedisCluster::start(3);
    let clock = ManualClock::new(0);
    let store = cluster(&nodes, test_options(&clock)).await;
    bounded(
        60,
        flowgate_testkit::conformance::run(&store, &clock, "cluster"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server_conforms_for_charges() {
    let server = RedisServer::start();
    let clock = ManualClock::new(0);
    let store = single(&server, test_options(&clock)).await;
    bounded(
        60,
        flowgate_testkit::conformance::run_charges(&store, &clock, "single"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_conforms_for_charges() {
    let nodes = RedisCluster::start(3);
    let clock = ManualClock::new(0);
    let store = cluster(&nodes, test_options(&clock)).await;
    bounded(
        60,
        flowgate_testkit::conformance::run_charges(&store, &clock, "cluster"),
    )
    .await;
}

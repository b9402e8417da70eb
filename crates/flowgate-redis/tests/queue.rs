//! The Redis queue store: the queue conformance table on a single server and on a 3-master
//! Redis Cluster (the script reads the table's ManualClock), instances spread over the
//! cluster's masters, an instance that holds a job stays listed when another node forgets it at
//! the same time, and the list of instances waits out Redis as long as any queue call does.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{bounded, cluster, live_options, single, test_options};
use flowgate_core::ManualClock;
use flowgate_core::queue::{NewJob, QueueSpec, QueueStore};
use flowgate_redis::{RedisOptions, RedisStore};
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

/// A TCP proxy to Redis that, while closed, holds what a client sends from its first `SREM` on
/// (the command that unlists a forgotten queue instance), until it is opened.
struct SremGate {
    port: u16,
    closed: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
}

impl SremGate {
    fn start(redis: u16) -> SremGate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let closed = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicBool::new(false));
        let (c, h) = (closed.clone(), held.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let mut upstream = TcpStream::connect(("127.0.0.1", redis)).unwrap();
                let (mut down, mut up) =
                    (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut up, &mut down));
                let (c, h) = (c.clone(), h.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    // (the end of the previous read too: a command split across two reads)
                    let mut seen: Vec<u8> = Vec::new();
                    loop {
                        let n = match client.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        seen.extend_from_slice(&buf[..n]);
                        if c.load(Ordering::SeqCst)
                            && seen.windows(10).any(|w| w == b"$4\r\nSREM\r\n")
                        {
                            h.store(true, Ordering::SeqCst);
                            while c.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                        seen.drain(..seen.len().saturating_sub(9));
                        if upstream.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        SremGate { port, closed, held }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Waits until an `SREM` is held.
    async fn holding(&self) {
        while !self.held.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Node A reads an empty instance's state (its queue watcher): the script forgets it, and A
/// unlists it in a command of its own after the script. Node B submits a job to the instance in
/// between, listing it before and after its script, and A's removal comes last (held here by a
/// proxy; on a busy machine A's task is merely scheduled late). The instance holds a job: it
/// must stay listed, or `GET /v1/queues` and the queue gauges never show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_forgotten_while_a_job_is_submitted_stays_listed() {
    let server = RedisServer::start();
    let gate = SremGate::start(server.port());
    let a = RedisStore::connect_with(&gate.url(), live_options())
        .await
        .unwrap()
        .queues();
    let b = single(&server, live_options()).await.queues();
    let spec = QueueSpec::new(
        "pay",
        "refunds",
        vec![flowgate_core::Matcher::parse("channel")],
        "1/s".parse().unwrap(),
    )
    .unwrap();
    let instance = "pay:refunds:channel=WPG";
    gate.closed.store(true, Ordering::SeqCst);
    let read = {
        let (a, spec) = (a.clone(), spec.clone());
        tokio::spawn(async move { a.stats(&spec, instance).await })
    };
    bounded(10, gate.holding()).await;
    b.submit(&spec, instance, &[NewJob::new("x")])
        .await
        .unwrap();
    gate.closed.store(false, Ordering::SeqCst);
    let stats = bounded(10, read).await.unwrap().unwrap();
    assert!(
        b.instances().await.unwrap().iter().any(|i| i == instance),
        "an instance holding a job is not listed"
    );
    // A read it again after unlisting it: it answers what the instance now holds.
    assert_eq!(stats.map(|s| s.ready), Some(1));
    // Forgotten with nothing in between, an instance leaves the list.
    let empty = "pay:refunds:channel=EMPTY";
    b.submit(&spec, empty, &[NewJob::new("x")]).await.unwrap();
    b.purge(&spec, empty).await.unwrap();
    assert!(b.instances().await.unwrap().iter().any(|i| i == empty));
    assert!(a.stats(&spec, empty).await.unwrap().is_none());
    assert!(!b.instances().await.unwrap().iter().any(|i| i == empty));
}

/// The list of instances is kept by plain commands beside the queue's scripts: they are queue
/// calls too, bounded by the queue's deadline (5 s), not by a decision's (25 ms by default). A
/// Redis that holds its clients for 300 ms (here `CLIENT PAUSE`; a big script, a fork, a busy
/// machine) delays a submit and the listing, and fails neither: a submit whose listing after its
/// script failed would answer an error for jobs it stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_of_instances_waits_out_redis_as_queue_calls_do() {
    let server = RedisServer::start();
    let store = single(&server, RedisOptions::default()).await;
    assert!(store.deadline() < Duration::from_millis(300));
    let queues = store.queues();
    let spec = QueueSpec::new(
        "pay",
        "refunds",
        vec![flowgate_core::Matcher::parse("channel")],
        "1/s".parse().unwrap(),
    )
    .unwrap();
    let instance = "pay:refunds:channel=WPG";
    let pause = raw_command(server.port(), "CLIENT PAUSE 300 ALL").unwrap();
    assert!(pause.starts_with("+OK"), "{pause}");
    queues
        .submit(&spec, instance, &[NewJob::new("x")])
        .await
        .unwrap();
    let pause = raw_command(server.port(), "CLIENT PAUSE 300 ALL").unwrap();
    assert!(pause.starts_with("+OK"), "{pause}");
    assert_eq!(queues.instances().await.unwrap(), [instance]);
}

//! No queue call holds Redis for long, measured by Redis itself. In a file of its own, so that no
//! other test runs beside it: SLOWLOG counts wall time, and a redis-server starved of the CPU by
//! other tests' servers would look slow.

mod common;

use common::{bounded, single, test_options};
use flowgate_core::ManualClock;
use flowgate_core::queue::{NewJob, QueueSpec, QueueStore};
use flowgate_testkit::redis::{RedisServer, raw_command};

/// The longest time (µs) Redis spent on each kind of call since `SLOWLOG RESET`, from its
/// slow log: queue script calls by their operation, other commands by name.
fn longest_calls(port: u16) -> std::collections::BTreeMap<String, i64> {
    use redis::Value;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let log: Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(&mut con)
        .unwrap();
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        _ => String::new(),
    };
    let mut out = std::collections::BTreeMap::new();
    let Value::Array(entries) = log else {
        return out;
    };
    for e in entries {
        let Value::Array(f) = e else { continue };
        let (Some(Value::Int(us)), Some(Value::Array(args))) = (f.get(2), f.get(3)) else {
            continue;
        };
        let name = args.first().map(&text).unwrap_or_default();
        // EVALSHA sha numkeys key... op: the op names the queue call.
        let kind = match name.as_str() {
            "EVALSHA" | "EVAL" => {
                let keys: usize = args
                    .get(2)
                    .map(&text)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                args.get(3 + keys).map(&text).unwrap_or(name)
            }
            _ => name,
        };
        let longest = out.entry(kind).or_insert(0);
        *longest = (*longest).max(*us);
    }
    out
}

/// No queue call holds Redis for long, measured by Redis itself (SLOWLOG: none over 50 ms; each
/// call's own longest is a few ms, printed with --nocapture and quoted in BENCHMARKS.md): a batch of 10,000 jobs of 3 KB (30 MB, staged in chunks and renamed into place), a
/// batch of 1,000 jobs with idempotency keys (the most one submit takes) and its resubmission
/// (1,000 duplicates, described in chunks), 2,000 leases
/// whose leases all expire at once (swept 100 at a time) into the dead letters, a requeue of
/// them all and a purge of everything (100 jobs per call). Before, one such submit was one
/// script call of 0.3-0.7 s. The batch stays all or nothing, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_queue_call_holds_redis_for_long() {
    let server = RedisServer::start();
    let port = server.port();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = single(&server, test_options(&clock)).await.queues();
    let spec = QueueSpec::new(
        "pay",
        "bulk",
        vec![flowgate_core::Matcher::parse("channel")],
        "1000/s".parse().unwrap(),
    )
    .and_then(|s| s.with_max_depth(20_000))
    .and_then(|s| s.with_max_attempts(1))
    .and_then(|s| s.with_lease(std::time::Duration::from_secs(1)))
    .unwrap();
    let inst = "pay:bulk:channel=BIG";
    let job = |i: usize| {
        let mut p = format!("{{\"refund\":{i},\"memo\":\"").into_bytes();
        p.resize(2_998, b'x');
        p.extend_from_slice(b"\"}");
        NewJob::new(p)
    };
    let jobs: Vec<NewJob> = (0..10_000).map(job).collect();
    let keyed: Vec<NewJob> = (10_000..11_000)
        .map(|i| job(i).with_key(format!("r-{i}")))
        .collect();
    raw_command(port, "CONFIG SET slowlog-log-slower-than 1000").unwrap();
    raw_command(port, "CONFIG SET slowlog-max-len 100000").unwrap();
    raw_command(port, "SLOWLOG RESET").unwrap();

    let out = bounded(60, store.submit(&spec, inst, &jobs)).await.unwrap();
    assert_eq!(out.len(), 10_000);
    assert!(
        out.iter()
            .enumerate()
            .all(|(i, s)| { s.id == i as u64 + 1 && !s.duplicate && s.position == Some(i as u64) })
    );
    let out = bounded(60, store.submit(&spec, inst, &keyed))
        .await
        .unwrap();
    assert!(
        out.iter()
            .enumerate()
            .all(|(i, s)| s.id == 10_001 + i as u64)
    );
    // Resubmitted: every job a duplicate, with its state and place in line.
    let again = bounded(60, store.submit(&spec, inst, &keyed))
        .await
        .unwrap();
    assert!(again.iter().enumerate().all(|(i, s)| {
        s.id == 10_001 + i as u64
            && s.duplicate
            && s.state == flowgate_core::queue::JobStatus::Ready
            && s.position == Some(10_000 + i as u64)
    }));
    // One job under a known key with another payload: nothing is stored.
    let mut conflict = jobs[..3].to_vec();
    conflict.push(NewJob::new("other").with_key("r-10007"));
    let err = store.submit(&spec, inst, &conflict).await.unwrap_err();
    assert!(
        matches!(
            err,
            flowgate_core::queue::QueueError::KeyConflict {
                index: 3,
                id: 10_008,
                ..
            }
        ),
        "{err:?}"
    );
    for n in 1..=2_000u64 {
        let got = store.lease(&spec, inst, 10_000_000, n).await.unwrap();
        assert!(matches!(got, flowgate_core::queue::LeaseOutcome::Leased(ref j) if j.id == n));
    }
    clock.advance(std::time::Duration::from_secs(10));
    // 2,000 leases expired at once, the last attempt each: swept 100 per call.
    let mut dead = Vec::new();
    for _ in 0..20 {
        dead.push(store.stats(&spec, inst).await.unwrap().unwrap().dead);
    }
    assert_eq!(dead, (1..=20).map(|n| n * 100).collect::<Vec<u64>>());
    assert_eq!(store.requeue_dead(&spec, inst, None).await.unwrap(), 2_000);
    assert_eq!(store.purge(&spec, inst).await.unwrap(), 11_000);
    // (the figures of BENCHMARKS.md, with --nocapture: every call over 1 ms, by kind)
    let longest = longest_calls(port);
    eprintln!("longest calls over 1 ms (µs): {longest:?}");
    assert!(
        longest.values().all(|&us| us < 50_000),
        "a Redis command took more than 50 ms: {longest:?}"
    );
    // Nothing left but the instance's record: no batch hash, no staged batch, no key.
    let keys = raw_command(port, "KEYS flowgate:q:*").unwrap();
    assert!(
        !keys.contains(":b:") && !keys.contains(":s:") && !keys.contains(":k\r"),
        "{keys}"
    );
    // The keys were forgotten with their jobs: the same batch goes in again.
    let back = store.submit(&spec, inst, &keyed[..10]).await.unwrap();
    assert!(back.iter().all(|s| !s.duplicate));
}

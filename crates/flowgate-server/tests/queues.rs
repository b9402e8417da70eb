//! The queue endpoints in-process on the embedded store, with a manual clock: the refund
//! scenario end to end, dead letters, every bad input, hot reload of a queue, and what
//! `GET /v1/queues` and `/metrics` show.

mod common;

use std::time::Duration;

use common::{TestServer, http, post_json, wait_until, write};
use serde_json::{Value, json};

const QUEUES: &str = r#"
domain = "payments"

[[queue]]
name = "refunds"
match = ["biz=REFUND", "channel"]
rate = "1/s"
max_depth = 5
lease = "30s"
max_attempts = 2
retry_backoff = "10s"
max_payload = 64
"#;

fn wpg() -> Value {
    json!("biz=REFUND, channel=WPG")
}

async fn start() -> TestServer {
    TestServer::start_with(&[("queues.toml", QUEUES)], |mut c| {
        c.credentials
            .add_token(
                "admin",
                flowgate_server::auth::Scope::Admin,
                "secret-0123456789abcdef0123456789abcdef",
            )
            .unwrap();
        c
    })
    .await
}

async fn lease(s: &TestServer) -> common::HttpResponse {
    post_json(
        s.http(),
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": wpg(), "wait_ms": 0}),
    )
    .await
}

async fn admin(s: &TestServer, path: &str, body: Value) -> common::HttpResponse {
    http(
        s.http(),
        "POST",
        path,
        &[
            ("content-type", "application/json"),
            (
                "authorization",
                "Bearer secret-0123456789abcdef0123456789abcdef",
            ),
        ],
        &body.to_string(),
    )
    .await
}

#[tokio::test]
async fn refunds_are_released_one_per_second_acked_retried_and_dead_lettered() {
    let s = start().await;
    let r = post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": wpg(), "jobs": [
            {"payload": {"refund": 1}, "key": "r-1"},
            {"payload": {"refund": 2}, "key": "r-2"},
            {"payload_base64": "AAEC"},
        ]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let b = r.json();
    assert_eq!(b["instance"], "payments:refunds:biz=REFUND,channel=WPG");
    let jobs = b["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(
        (jobs[2]["id"].as_u64(), jobs[2]["position"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(
        jobs[1]["release_at_ms"].as_u64().unwrap() - jobs[0]["release_at_ms"].as_u64().unwrap(),
        1000
    );
    // Resubmitting a key answers the same job.
    let again = post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": wpg(), "payload": {"refund": 1}, "key": "r-1"}),
    )
    .await
    .json();
    assert_eq!(
        (again["id"].as_u64(), again["duplicate"].as_bool()),
        (Some(1), Some(true))
    );

    // The first is released now, the second not before one second has passed.
    let first = lease(&s).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.json();
    assert_eq!(
        (first["id"].as_u64(), first["attempt"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(first["payload"], json!({"refund": 1}));
    assert_eq!(lease(&s).await.status, 204);
    s.clock.advance(Duration::from_millis(1000));
    let second = lease(&s).await.json();
    assert_eq!(second["id"], 2);

    // Ack the first (twice: the second is refused), nack the second.
    let ack = |t: &Value| json!({"token": t});
    let r = post_json(s.http(), "/v1/queues/ack", ack(&first["token"])).await;
    assert_eq!((r.status, r.json()["acked"].as_bool()), (200, Some(true)));
    let r = post_json(s.http(), "/v1/queues/ack", ack(&first["token"])).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (409, Some("not_held"))
    );
    let r = post_json(
        s.http(),
        "/v1/queues/nack",
        json!({"token": second["token"], "retry_after_ms": 5000}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["state"], "retry");

    // The third (bytes) comes next, its payload as base64.
    s.clock.advance(Duration::from_millis(1000));
    let third = lease(&s).await.json();
    assert_eq!(
        (third["id"].as_u64(), third["payload_base64"].as_str()),
        (Some(3), Some("AAEC"))
    );
    post_json(s.http(), "/v1/queues/ack", ack(&third["token"])).await;

    // The retry after its delay, and its last attempt fails: dead letters.
    s.clock.advance(Duration::from_millis(5000));
    let retry = lease(&s).await.json();
    assert_eq!(
        (retry["id"].as_u64(), retry["attempt"].as_u64()),
        (Some(2), Some(2))
    );
    let r = post_json(
        s.http(),
        "/v1/queues/nack",
        json!({"token": retry["token"]}),
    )
    .await;
    assert_eq!(r.json()["state"], "dead");
    let dead = post_json(
        s.http(),
        "/v1/queues/dead",
        json!({"domain": "payments", "descriptor": wpg()}),
    )
    .await
    .json();
    assert_eq!(dead["jobs"][0]["id"], 2);
    assert_eq!(dead["jobs"][0]["payload"], json!({"refund": 2}));
    assert_eq!(dead["jobs"][0]["attempts"], 2);

    // Requeue needs the admin token; then it is released again with fresh attempts.
    let body = json!({"domain": "payments", "descriptor": wpg()});
    let r = post_json(s.http(), "/v1/queues/dead/requeue", body.clone()).await;
    assert_eq!(r.status, 401);
    let r = admin(&s, "/v1/queues/dead/requeue", body.clone()).await;
    assert_eq!((r.status, r.json()["requeued"].as_u64()), (200, Some(1)));
    s.clock.advance(Duration::from_millis(1000));
    let again = lease(&s).await.json();
    assert_eq!(
        (again["id"].as_u64(), again["attempt"].as_u64()),
        (Some(2), Some(1))
    );

    // The state, then a purge.
    let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
    let i = &q["instances"][0];
    assert_eq!(i["descriptor"], "biz=REFUND, channel=WPG");
    assert_eq!(
        (
            i["depth"].as_u64(),
            i["in_flight"].as_u64(),
            i["acked_total"].as_u64(),
            i["dead_total"].as_u64()
        ),
        (Some(1), Some(1), Some(2), Some(1))
    );
    assert_eq!(
        (i["waiting"].as_u64(), i["reserved"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(q["queues"][0]["rate"], "1/s");
    // The dashboard's figures define depth the same way: every job held, in flight included.
    let shown = wait_until(Duration::from_secs(5), || async {
        let v = http(s.http(), "GET", "/v1/stats?window=1", &[], "")
            .await
            .json();
        let q = &v["queues"][0];
        (q["depth"].as_u64(), q["in_flight"].as_u64()) == (Some(1), Some(1))
    })
    .await;
    assert!(shown, "/v1/stats' depth differs from /v1/queues'");
    let r = admin(&s, "/v1/queues/purge", body.clone()).await;
    assert_eq!(r.json()["purged"], 1);
    let r = post_json(s.http(), "/v1/queues/ack", ack(&again["token"])).await;
    assert_eq!(r.status, 409);
}

#[tokio::test]
async fn bad_input_is_a_clear_error_and_changes_nothing() {
    let s = start().await;
    let submit = |body: Value| post_json(s.http(), "/v1/queues/submit", body);
    let cases = [
        (
            json!({"domain": "payments", "descriptor": "biz=PAY, channel=WPG", "payload": 1}),
            404,
            "unknown_queue",
            "no queue",
        ),
        (
            json!({"domain": "payments", "descriptor": wpg(), "payload": "x".repeat(100)}),
            413,
            "payload_too_large",
            "max_payload of 64",
        ),
        (
            json!({"domain": "payments", "descriptor": wpg()}),
            400,
            "bad_request",
            "missing `payload`",
        ),
        (
            json!({"domain": "payments", "descriptor": wpg(), "jobs": [{"payload": 1}, {"payload": 2, "not_before_ms": "soon"}]}),
            400,
            "bad_request",
            "`jobs[1].not_before_ms`",
        ),
        (
            json!({"domain": "payments", "descriptor": wpg(), "payload": 1, "colour": "red"}),
            400,
            "bad_request",
            "unknown field `colour`",
        ),
        (
            json!({"domain": "payments", "descriptor": wpg(), "jobs": []}),
            400,
            "bad_request",
            "no job",
        ),
        (
            json!({"descriptor": wpg(), "payload": 1}),
            400,
            "bad_request",
            "missing field `domain`",
        ),
    ];
    for (body, status, error, detail) in cases {
        let r = submit(body.clone()).await;
        assert_eq!(r.status, status, "{body}: {}", r.body);
        let j = r.json();
        assert_eq!(j["error"], error, "{body}: {}", r.body);
        assert!(
            j["detail"].as_str().unwrap().contains(detail),
            "{body}: {}",
            r.body
        );
    }
    // A full queue stores nothing of a batch that does not fit.
    let five: Vec<Value> = (0..5).map(|i| json!({"payload": i})).collect();
    assert_eq!(
        submit(json!({"domain": "payments", "descriptor": wpg(), "jobs": five}))
            .await
            .status,
        200
    );
    let r = submit(json!({"domain": "payments", "descriptor": wpg(), "jobs": [{"payload": 5}, {"payload": 6}]})).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (429, Some("queue_full"))
    );
    let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
    assert_eq!(q["instances"][0]["submitted_total"], 5);
    // Tokens.
    for (token, status, error) in [
        (json!("junk"), 400, "bad_token"),
        (json!("1f.1.payments:nope:x=y"), 400, "bad_token"),
        (
            json!("1f.99.payments:refunds:biz=REFUND,channel=WPG"),
            409,
            "not_held",
        ),
    ] {
        let r = post_json(s.http(), "/v1/queues/ack", json!({"token": token})).await;
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (status, Some(error)),
            "{token}"
        );
    }
    let r = post_json(s.http(), "/v1/queues/nack", json!({"token": 5})).await;
    assert!(
        r.json()["detail"].as_str().unwrap().contains("`token`"),
        "{}",
        r.body
    );
    let r = post_json(
        s.http(),
        "/v1/queues/lease",
        json!({"domain": "payments", "descriptor": wpg(), "wait_ms": 3_600_000}),
    )
    .await;
    assert_eq!(r.status, 400);
    // Nothing was lost: the five jobs are all there.
    let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
    assert_eq!(q["instances"][0]["depth"], 5);
}

#[tokio::test]
async fn a_reloaded_rate_applies_to_the_next_release_and_a_removed_queue_drains() {
    let s = start().await;
    let jobs: Vec<Value> = (0..4).map(|i| json!({"payload": i})).collect();
    post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": wpg(), "jobs": jobs}),
    )
    .await;
    assert_eq!(lease(&s).await.status, 200);
    assert_eq!(lease(&s).await.status, 204);
    // 1/s becomes 10/s: the next release is 1 s after the last (the schedule already set), the
    // one after 100 ms later.
    write(
        &s.path("queues.toml"),
        &QUEUES.replace("rate = \"1/s\"", "rate = \"10/s\""),
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
            q["queues"][0]["rate"] == "10/s"
        })
        .await
    );
    s.clock.advance(Duration::from_millis(1000));
    assert_eq!(lease(&s).await.status, 200);
    assert_eq!(lease(&s).await.status, 204);
    s.clock.advance(Duration::from_millis(100));
    assert_eq!(lease(&s).await.status, 200);
    // The queue is removed: no more submissions, but its last job can still be leased.
    write(&s.path("queues.toml"), "domain = \"payments\"\n");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
            q["queues"].as_array().is_some_and(Vec::is_empty)
        })
        .await
    );
    let r = post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": wpg(), "payload": 9}),
    )
    .await;
    assert_eq!(r.status, 404);
    let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
    assert_eq!(q["instances"][0]["retired"], true);
    s.clock.advance(Duration::from_millis(100));
    let last = lease(&s).await;
    assert_eq!((last.status, last.json()["id"].as_u64()), (200, Some(4)));
    let r = post_json(
        s.http(),
        "/v1/queues/ack",
        json!({"token": last.json()["token"]}),
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_long_poll_is_answered_by_a_submission_and_metrics_show_the_queue() {
    let s = start().await;
    let addr = s.http();
    let poll = tokio::spawn(async move {
        post_json(
            addr,
            "/v1/queues/lease",
            json!({"domain": "payments", "descriptor": wpg(), "wait_ms": 10_000}),
        )
        .await
    });
    // The submission is meant to come while the lease waits; a waiting lease shows nowhere
    // (not in `/v1/queues`, not in the metrics), so it is given 200 ms to start waiting. Were
    // the submission first, the lease would still be answered at once.
    tokio::time::sleep(Duration::from_millis(200)).await;
    post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": wpg(), "payload": {"refund": 7}}),
    )
    .await;
    let r = tokio::time::timeout(Duration::from_secs(2), poll)
        .await
        .expect("the long poll is answered at once")
        .unwrap();
    assert_eq!(
        (r.status, r.json()["payload"]["refund"].as_u64()),
        (200, Some(7))
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let m = http(s.http(), "GET", "/metrics", &[], "").await.body;
            m.contains("flowgate_queue_jobs{domain=\"payments\",queue=\"refunds\",instance=\"payments:refunds:biz=REFUND,channel=WPG\",state=\"in_flight\"} 1")
        })
        .await
    );
    let m = http(s.http(), "GET", "/metrics", &[], "").await.body;
    assert!(
        m.contains("flowgate_queue_operations_total{op=\"lease\",result=\"ok\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn each_admin_operation_does_its_own_work_and_no_other() {
    let s = start().await;
    let r = post_json(
        s.http(),
        "/v1/queues/submit",
        json!({"domain": "payments", "descriptor": wpg(), "jobs": [
            {"payload": 1}, {"payload": 2}, {"payload": 3},
        ]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Jobs 1 and 2 fail their two attempts (dead letters); job 3 stays leased.
    let dead_ids = || async {
        let dead = post_json(
            s.http(),
            "/v1/queues/dead",
            json!({"domain": "payments", "descriptor": wpg()}),
        )
        .await
        .json();
        let ids: Vec<u64> = dead["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        ids
    };
    for _ in 0..20 {
        if dead_ids().await.len() == 2 {
            break;
        }
        s.clock.advance(Duration::from_secs(11));
        let got = lease(&s).await;
        if got.status != 200 {
            continue;
        }
        let job = got.json();
        if job["id"] != 3 {
            let r = post_json(
                s.http(),
                "/v1/queues/nack",
                json!({"token": job["token"], "retry_after_ms": 0}),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    }
    assert_eq!(dead_ids().await, vec![1, 2]);
    let body = |ids: Option<Vec<u64>>| {
        let mut b = json!({"domain": "payments", "descriptor": wpg()});
        if let Some(ids) = ids {
            b["ids"] = json!(ids);
        }
        b
    };

    // A purge takes no ids: refused, nothing deleted.
    let r = admin(&s, "/v1/queues/purge", body(Some(vec![1]))).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("bad_request"))
    );
    assert!(
        r.body.contains("`ids` is for the dead letters"),
        "{}",
        r.body
    );
    assert_eq!(dead_ids().await, vec![1, 2]);
    // Purging a dead letter deletes that one only.
    let r = admin(&s, "/v1/queues/dead/purge", body(Some(vec![1]))).await;
    assert_eq!(
        (r.status, r.json()["purged"].as_u64()),
        (200, Some(1)),
        "{}",
        r.body
    );
    assert_eq!(dead_ids().await, vec![2]);
    // Requeueing moves the rest back: no dead letters, the job leased again.
    let r = admin(&s, "/v1/queues/dead/requeue", body(None)).await;
    assert_eq!(
        (r.status, r.json()["requeued"].as_u64()),
        (200, Some(1)),
        "{}",
        r.body
    );
    assert!(dead_ids().await.is_empty());
    s.clock.advance(Duration::from_secs(1));
    assert_eq!(lease(&s).await.json()["id"], 2);
    // A purge deletes every job of the instance: the two leased.
    let r = admin(&s, "/v1/queues/purge", body(None)).await;
    assert_eq!(
        (r.status, r.json()["purged"].as_u64()),
        (200, Some(2)),
        "{}",
        r.body
    );
    let q = http(s.http(), "GET", "/v1/queues", &[], "").await.json();
    assert_eq!(q["instances"][0]["depth"].as_u64(), Some(0), "{q}");
}

//! The server the HTTP and gRPC fuzz targets (`fuzz.rs`, `fuzz_grpc.rs`) send to: rules of every
//! algorithm, a delay-mode rule, a concurrency rule and a queue, with an admin token.
#![allow(dead_code, unreachable_pub, missing_docs)]

use super::common;

/// The server's rules and queue: every algorithm a body can reach, a delay-mode rule, a
/// concurrency rule (leases), and a queue.
pub const SERVER_RULES: &str = r#"
domain = "api"

[[rule]]
name = "per-client"
match = "client"
limit = "2/10s"
algorithm = "sliding_log"

[[rule]]
name = "shaped"
match = "channel=WPG"
limit = "10/s"
algorithm = "leaky_bucket"
mode = "delay"
max_wait = "150ms"

[[rule]]
name = "in-flight"
match = "export"
limit = "1/1m"
algorithm = "concurrency"

[[rule]]
name = "per-user"
match = "user"
limit = "100/s"
algorithm = "token_bucket"
burst = 10

[[rule]]
name = "per-ip"
match = "ip"
limit = "5/day"

[[rule]]
name = "paths"
match = "path=files/*"
limit = "20/m"
algorithm = "sliding_window"

[[queue]]
name = "jobs"
match = ["biz=JOB", "channel"]
rate = "1000/s"
burst = 100
max_payload = 4096
max_depth = 1000
"#;

/// The admin token the server takes.
pub const ADMIN: &str = "fuzz-admin-token-0123456789abcdef0123456789abcdef";

/// A runtime and a server for the HTTP and gRPC targets.
pub fn server() -> (tokio::runtime::Runtime, common::TestServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let t = rt.block_on(common::TestServer::start_with(
        &[("rules.toml", SERVER_RULES)],
        |mut c| {
            c.credentials
                .add_token("admin", flowgate_server::auth::Scope::Admin, ADMIN)
                .unwrap();
            c
        },
    ));
    (rt, t)
}

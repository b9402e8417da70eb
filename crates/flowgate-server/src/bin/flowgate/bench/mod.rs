//! `flowgate bench`: a load generator for a running server, over Envoy's gRPC API or the HTTP
//! API, with a closed loop of `concurrency` requests in flight over `connections` connections,
//! keys drawn uniformly from `keys` (1 = one hot key), a warm-up that is not measured, a live
//! progress display, and a report: throughput, OK / over-limit / error counts, latency
//! p50/p90/p99/max (HdrHistogram, microseconds), and a one-line JSON summary.

mod floor;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use serde_json::json;
use tonic::transport::Channel;

pub(crate) use self::floor::{FloorArgs, floor};

/// Which API to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BenchApi {
    /// Envoy's rate-limit service over gRPC.
    Grpc,
    /// `POST /v1/check` over HTTP/1.1.
    Http,
    /// `POST /v1/reserve` (estimate 1) then `POST /v1/commit` of its id (cost 1) over HTTP/1.1:
    /// one request of the report is the pair.
    Reserve,
    /// No server: a [`flowgate::Limiter`] in this process on the store of `--redis-url` (or the
    /// memory store) with the rules of `--config` (the library-level reference).
    Library,
}

/// `flowgate bench`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The API to load.
    #[arg(long, value_enum, default_value = "grpc")]
    pub(crate) api: BenchApi,
    /// The server's address (default: the API's default address).
    #[arg(long)]
    pub(crate) addr: Option<SocketAddr>,
    /// Requests in flight.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// gRPC connections (HTTP/2, multiplexed); over HTTP/1.1 each request in flight has its own.
    #[arg(long, default_value_t = 1)]
    pub(crate) connections: usize,
    /// Distinct descriptor values: 1 is one hot key.
    #[arg(long, default_value_t = 1)]
    pub(crate) keys: u64,
    /// Measured duration (`10s`, `1m`, ...).
    #[arg(long, default_value = "10s", value_parser = parse_dur)]
    pub(crate) duration: Duration,
    /// Warm-up before measuring.
    #[arg(long, default_value = "2s", value_parser = parse_dur)]
    pub(crate) warmup: Duration,
    /// The domain.
    #[arg(long, default_value = "bench")]
    pub(crate) domain: String,
    /// The descriptor key; values are `0 .. keys`.
    #[arg(long, default_value = "key")]
    pub(crate) key: String,
    /// A label for the JSON summary (e.g. `memory`, `redis`, `floor`).
    #[arg(long, default_value = "")]
    pub(crate) label: String,
    /// For `--api library`: the rules.
    #[arg(long, default_value = "examples/bench.toml")]
    pub(crate) config: std::path::PathBuf,
    /// For `--api library`: the Redis URL (else the memory store).
    #[arg(long)]
    pub(crate) redis_url: Option<String>,
    /// Print only the JSON summary.
    #[arg(long)]
    pub(crate) quiet: bool,
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    flowgate::rule::parse_duration(s).map_err(|e| e.to_string())
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    ok: AtomicU64,
    over: AtomicU64,
    errors: AtomicU64,
}

enum Outcome {
    Ok,
    Over,
    Error,
}

enum Conn {
    Library(Arc<flowgate::Limiter<flowgate_server::Backend>>),
    Grpc(RateLimitServiceClient<Channel>),
    Http(
        hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        SocketAddr,
    ),
    Reserve(
        hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        SocketAddr,
    ),
}

/// Posts `body` to `path` on `send` (connecting again to `addr` if the connection closed);
/// answers the status and the body.
async fn post(
    send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    path: &str,
    body: String,
) -> Option<(u16, Bytes)> {
    if send.ready().await.is_err() {
        *send = http_conn(addr).await.ok()?;
    }
    let req = hyper::Request::post(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .ok()?;
    let resp = send.send_request(req).await.ok()?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.ok()?.to_bytes();
    Some((status, body))
}

/// An HTTP status as an outcome.
fn outcome(status: Option<u16>) -> Outcome {
    match status {
        Some(200) => Outcome::Ok,
        Some(429) => Outcome::Over,
        _ => Outcome::Error,
    }
}

async fn http_conn(
    addr: SocketAddr,
) -> anyhow::Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

impl Conn {
    async fn call(&mut self, domain: &str, key: &str, value: String) -> Outcome {
        match self {
            Conn::Library(limiter) => {
                let req =
                    flowgate::Request::new(domain, vec![flowgate::Descriptor::new([(key, value)])]);
                let v = limiter.check(&req).await;
                if v.statuses.iter().any(|s| s.error.is_some()) {
                    Outcome::Error
                } else if v.allowed {
                    Outcome::Ok
                } else {
                    Outcome::Over
                }
            }
            Conn::Grpc(client) => {
                let req = RateLimitRequest {
                    domain: domain.to_owned(),
                    descriptors: vec![RateLimitDescriptor {
                        entries: vec![Entry {
                            key: key.to_owned(),
                            value,
                        }],
                        ..Default::default()
                    }],
                    hits_addend: 0,
                };
                match client.should_rate_limit(req).await {
                    Ok(r) if r.get_ref().overall_code == 1 => Outcome::Ok,
                    Ok(r) if r.get_ref().overall_code == 2 => Outcome::Over,
                    _ => Outcome::Error,
                }
            }
            Conn::Http(send, addr) => {
                let body = json!({"domain": domain, "descriptors": [format!("{key}={value}")]});
                outcome(
                    post(send, *addr, "/v1/check", body.to_string())
                        .await
                        .map(|r| r.0),
                )
            }
            Conn::Reserve(send, addr) => {
                let body = json!({"domain": domain, "descriptors": [format!("{key}={value}")], "estimate": 1});
                let Some((status, answer)) =
                    post(send, *addr, "/v1/reserve", body.to_string()).await
                else {
                    return Outcome::Error;
                };
                if status != 200 {
                    return outcome(Some(status));
                }
                let id = serde_json::from_slice::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_owned));
                let Some(id) = id else {
                    return Outcome::Error;
                };
                let body = json!({"id": id, "cost": 1});
                outcome(
                    post(send, *addr, "/v1/commit", body.to_string())
                        .await
                        .map(|r| r.0),
                )
            }
        }
    }
}

/// A small, fast PRNG for key choice (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The result of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Summary {
    /// The label given.
    pub(crate) label: String,
    /// `grpc` or `http`.
    pub(crate) api: &'static str,
    /// Requests in flight.
    pub(crate) concurrency: usize,
    /// Connections.
    pub(crate) connections: usize,
    /// Key space.
    pub(crate) keys: u64,
    /// Measured seconds.
    pub(crate) seconds: f64,
    /// Requests answered in the measured period.
    pub(crate) requests: u64,
    /// Requests per second.
    pub(crate) throughput: f64,
    /// Admitted.
    pub(crate) ok: u64,
    /// Over limit.
    pub(crate) over_limit: u64,
    /// Failed.
    pub(crate) errors: u64,
    /// Latency percentiles, microseconds.
    pub p50_us: u64,
    /// p90.
    pub p90_us: u64,
    /// p99.
    pub p99_us: u64,
    /// Max.
    pub(crate) max_us: u64,
}

/// Runs the benchmark and prints the report.
///
/// # Errors
/// When the server cannot be reached.
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let s = bench(&args).await?;
    if !args.quiet {
        eprintln!(
            "{} {}: {:.0} req/s over {:.1}s ({} requests: {} ok, {} over limit, {} errors); latency p50 {} us, p90 {} us, p99 {} us, max {} us",
            s.api,
            s.label,
            s.throughput,
            s.seconds,
            s.requests,
            s.ok,
            s.over_limit,
            s.errors,
            s.p50_us,
            s.p90_us,
            s.p99_us,
            s.max_us
        );
    }
    println!("{}", serde_json::to_string(&s)?);
    Ok(())
}

/// Runs the benchmark.
///
/// # Errors
/// When the server cannot be reached.
pub(crate) async fn bench(args: &BenchArgs) -> anyhow::Result<Summary> {
    let concurrency = args.concurrency.max(1);
    let (api, addr) = match args.api {
        BenchApi::Grpc => (
            "grpc",
            args.addr
                .unwrap_or(flowgate_server::DEFAULT_GRPC_ADDR.parse()?),
        ),
        BenchApi::Http => (
            "http",
            args.addr
                .unwrap_or(flowgate_server::DEFAULT_HTTP_ADDR.parse()?),
        ),
        BenchApi::Reserve => (
            "reserve",
            args.addr
                .unwrap_or(flowgate_server::DEFAULT_HTTP_ADDR.parse()?),
        ),
        BenchApi::Library => ("library", flowgate_server::DEFAULT_GRPC_ADDR.parse()?),
    };
    let library = match args.api {
        BenchApi::Library => {
            let set = flowgate_config::load(&args.config)?.rules;
            let backend = match &args.redis_url {
                Some(url) => {
                    flowgate_server::Backend::redis(url, flowgate_redis::DEFAULT_DEADLINE).await?
                }
                None => flowgate_server::Backend::memory(
                    flowgate_server::ServerClock::System(flowgate::clock::SystemClock::new()),
                    flowgate::store::DEFAULT_MAX_KEYS,
                ),
            };
            Some(Arc::new(flowgate::Limiter::new(set, backend)))
        }
        _ => None,
    };
    let connections = match args.api {
        BenchApi::Grpc => args.connections.clamp(1, concurrency),
        BenchApi::Http | BenchApi::Reserve => concurrency,
        BenchApi::Library => 1,
    };
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        conns.push(Some(match args.api {
            BenchApi::Library => Conn::Library(Arc::clone(
                library
                    .as_ref()
                    .ok_or_else(|| anyhow::anyhow!("no limiter"))?,
            )),
            BenchApi::Grpc => {
                let ch = Channel::from_shared(format!("http://{addr}"))?
                    .tcp_nodelay(true)
                    .connect()
                    .await
                    .with_context(|| format!("cannot connect to {addr}"))?;
                Conn::Grpc(RateLimitServiceClient::new(ch))
            }
            BenchApi::Http => Conn::Http(
                http_conn(addr)
                    .await
                    .with_context(|| format!("cannot connect to {addr}"))?,
                addr,
            ),
            BenchApi::Reserve => Conn::Reserve(
                http_conn(addr)
                    .await
                    .with_context(|| format!("cannot connect to {addr}"))?,
                addr,
            ),
        }));
    }
    let counts = Arc::new(Counts::default());
    let measuring = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::with_capacity(concurrency);
    for w in 0..concurrency {
        let mut conn = match conns.get_mut(w % connections).and_then(Option::take) {
            // A gRPC connection is shared (HTTP/2 multiplexes); put it back for the next worker.
            Some(Conn::Grpc(c)) => {
                conns[w % connections] = Some(Conn::Grpc(c.clone()));
                Conn::Grpc(c)
            }
            Some(Conn::Library(l)) => {
                conns[w % connections] = Some(Conn::Library(Arc::clone(&l)));
                Conn::Library(l)
            }
            // Each HTTP/1.1 worker owns its connection.
            Some(http) => http,
            None => Conn::Http(http_conn(addr).await?, addr),
        };
        let counts = Arc::clone(&counts);
        let measuring = Arc::clone(&measuring);
        let stop = Arc::clone(&stop);
        let domain = args.domain.clone();
        let key = args.key.clone();
        let keys = args.keys.max(1);
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
        workers.push(tokio::spawn(async move {
            let mut rng =
                Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1).wrapping_mul(0x1234_5678_9ABC_DEF1));
            while !stop.load(Ordering::Relaxed) {
                let k = if keys == 1 { 0 } else { rng.next() % keys };
                let start = quanta::Instant::now();
                let out = conn.call(&domain, &key, k.to_string()).await;
                let us = start.elapsed().as_micros() as u64;
                if measuring.load(Ordering::Relaxed) {
                    let _ = hist.record(us.max(1));
                    counts.sent.fetch_add(1, Ordering::Relaxed);
                    match out {
                        Outcome::Ok => counts.ok.fetch_add(1, Ordering::Relaxed),
                        Outcome::Over => counts.over.fetch_add(1, Ordering::Relaxed),
                        Outcome::Error => counts.errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
            hist
        }));
    }
    drop(conns);
    let progress = if args.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let p = indicatif::ProgressBar::new(args.duration.as_secs().max(1));
        p.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:30}] {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        p.set_message("warming up");
        p
    };
    tokio::time::sleep(args.warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let start = quanta::Instant::now();
    let mut last = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_at = start;
    loop {
        tick.tick().await;
        let elapsed = start.elapsed();
        if elapsed >= args.duration {
            break;
        }
        let sent = counts.sent.load(Ordering::Relaxed);
        let now = quanta::Instant::now();
        let rate = (sent - last) as f64 / (now - last_at).as_secs_f64().max(1e-9);
        last = sent;
        last_at = now;
        progress.set_position(elapsed.as_secs());
        progress.set_message(format!(
            "{rate:.0} req/s, {sent} sent, {} over limit, {} errors",
            counts.over.load(Ordering::Relaxed),
            counts.errors.load(Ordering::Relaxed)
        ));
    }
    measuring.store(false, Ordering::Relaxed);
    let seconds = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    progress.finish_and_clear();
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for w in workers {
        if let Ok(h) = w.await {
            let _ = total.add(&h);
        }
    }
    let requests = counts.sent.load(Ordering::Relaxed);
    Ok(Summary {
        label: args.label.clone(),
        api,
        concurrency,
        connections,
        keys: args.keys.max(1),
        seconds,
        requests,
        throughput: requests as f64 / seconds.max(1e-9),
        ok: counts.ok.load(Ordering::Relaxed),
        over_limit: counts.over.load(Ordering::Relaxed),
        errors: counts.errors.load(Ordering::Relaxed),
        p50_us: total.value_at_quantile(0.50),
        p90_us: total.value_at_quantile(0.90),
        p99_us: total.value_at_quantile(0.99),
        max_us: total.max(),
    })
}

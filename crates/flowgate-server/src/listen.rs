//! The listening ends of the server: the HTTP and gRPC ports' accept loops, bounded in
//! connections and time, each request carrying its connection's [`Peer`], both stopped by one
//! shutdown signal and finishing what is in flight.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::peer::Peer;
use crate::server::ServerError;

/// The most concurrent gRPC streams (requests) on one connection.
const GRPC_MAX_STREAMS: u32 = 1_024;

pub(crate) async fn signal(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// A listener bound to `addr`, and the address it got.
pub(crate) async fn listen(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let bind = |source| ServerError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    Ok((listener, local))
}

/// What each HTTP connection reads of the server while it serves.
#[derive(Clone)]
pub(crate) struct HttpConns {
    /// Whether requests carry their connection's [`Peer`] (the server has credentials).
    pub(crate) peers: Arc<std::sync::atomic::AtomicBool>,
    /// While the node drains, every answer carries `Connection: close`: an HTTP/1.1 caller
    /// opens its next connection anew, which its load balancer (or Kubernetes Service) sends
    /// to a node still ready, instead of reusing one that closes with the ports. (HTTP/2 drops
    /// the header; its connections get a GOAWAY when the ports close.)
    pub(crate) lifecycle: crate::probes::Lifecycle,
}

/// `Connection: close`.
const CLOSE: http::HeaderValue = http::HeaderValue::from_static("close");

/// Serves HTTP on one connection's transport until it closes (or, on shutdown, finishes what
/// is in flight); every request carries `peer` in its extensions.
async fn serve_http_conn<I>(
    builder: hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    io: I,
    app: axum::Router,
    peer: Peer,
    conns: HttpConns,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tower::ServiceExt as _;
    // One `Arc` clone per request: the connection's `Peer` is shared, not rebuilt. Only while
    // the server has credentials: without, no route reads it (the admin routes are off, every
    // other route is open), and a decision saves the insert.
    let HttpConns {
        peers: wanted,
        lifecycle,
    } = conns;
    let app = app
        .map_request(move |mut req: http::Request<hyper::body::Incoming>| {
            if wanted.load(std::sync::atomic::Ordering::Acquire) {
                req.extensions_mut().insert(peer.clone());
            }
            req
        })
        .map_response(move |r| {
            let mut r = crate::http::nosniff(r);
            if lifecycle.draining() {
                r.headers_mut().insert(http::header::CONNECTION, CLOSE);
            }
            r
        });
    let service = hyper_util::service::TowerToHyperService::new(app);
    let conn = builder
        .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(io), service)
        .into_owned();
    let _ = watcher.watch(conn).await;
}

/// The HTTP/JSON API (`app`), until `shutdown`; each request carries its connection's [`Peer`] as
/// `conns` says, every answer `X-Content-Type-Options: nosniff`, and, while the node drains,
/// `Connection: close`.
///
/// Connections are bounded: at most `max_connections` at once (beyond, new ones wait in the
/// listen backlog), and a client must send a request's whole header within `header_timeout`,
/// the first one as each next one on a kept-alive connection, or the connection is closed (a
/// slow or idle client cannot hold a connection). With `tls`, each connection's handshake runs
/// on its own task and must finish within `header_timeout` too. HTTP/2 connections carry at
/// most [`GRPC_MAX_STREAMS`] concurrent streams and are pinged as the gRPC port's are.
pub(crate) fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    conns: HttpConns,
    shutdown: watch::Receiver<bool>,
    max_connections: usize,
    header_timeout: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> JoinHandle<Result<(), ServerError>> {
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    use hyper_util::server::conn::auto;
    tokio::spawn(async move {
        let permits = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout);
        // HTTP/2 (with TLS, by ALPN) as on the gRPC port: bounded streams, idle peers pinged.
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(GRPC_MAX_STREAMS)
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(10));
        let stop = signal(shutdown);
        tokio::pin!(stop);
        loop {
            let permit = tokio::select! {
                p = Arc::clone(&permits).acquire_owned() => p,
                () = &mut stop => break,
            };
            let Ok(permit) = permit else { break };
            let (stream, addr) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "http: cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            let _ = stream.set_nodelay(true);
            let (builder, app, watcher, tls, wanted) = (
                builder.clone(),
                app.clone(),
                graceful.watcher(),
                tls.clone(),
                conns.clone(),
            );
            let peer = Peer::new(Some(addr));
            tokio::spawn(async move {
                match tls {
                    None => serve_http_conn(builder, stream, app, peer, wanted, watcher).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(header_timeout, acceptor.accept(stream)).await {
                            Ok(Ok(tls)) => {
                                peer.handshake_done(tls.get_ref().1);
                                serve_http_conn(builder, tls, app, peer, wanted, watcher).await;
                            }
                            Ok(Err(e)) => tracing::debug!(error = %e, "http: TLS handshake failed"),
                            Err(_) => tracing::debug!("http: TLS handshake not finished in time"),
                        }
                    }
                }
                drop(permit);
            });
        }
        drop(listener);
        graceful.shutdown().await;
        Ok(())
    })
}

/// The gRPC `services` (Envoy's rate-limit service, the reports), until `shutdown`; each
/// request carries its connection's [`Peer`]. At most `max_connections` at once,
/// each closed if it sends nothing (with `tls`: finishes no handshake) within `first_byte` of
/// connecting; at most
/// [`GRPC_MAX_STREAMS`] concurrent streams per connection; HTTP/2 keep-alive pings every 30 s,
/// a peer that does not answer within 10 s is closed.
pub(crate) fn serve_grpc(
    listener: TcpListener,
    services: tonic::service::Routes,
    shutdown: watch::Receiver<bool>,
    max_connections: usize,
    first_byte: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> JoinHandle<Result<(), ServerError>> {
    tokio::spawn(async move {
        let incoming = crate::grpc_conn::incoming(listener, max_connections, first_byte, tls);
        tonic::transport::Server::builder()
            .max_concurrent_streams(Some(GRPC_MAX_STREAMS))
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)))
            .add_routes(services)
            .serve_with_incoming_shutdown(incoming, signal(shutdown))
            .await
            .map_err(|e| ServerError::Serve {
                api: "grpc",
                detail: e.to_string(),
            })
    })
}

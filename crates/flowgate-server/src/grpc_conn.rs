//! The gRPC port's connections, bounded: at most a number at once (beyond, new ones wait in the
//! listen backlog), and a client that sends nothing within a timeout of connecting is closed,
//! so idle connections cannot take every place. (tonic bounds what comes after: streams per
//! connection, HTTP/2 keep-alive.)
//!
//! With TLS, a connection does its handshake when tonic first reads or writes it, on that
//! connection's own task (the accept loop only accepts), and the same timeout covers the
//! handshake and the first bytes after it: a client that never finishes a handshake is closed
//! as one that sends nothing.
//!
//! A connection's tonic `ConnectInfo` is its [`Peer`], which tonic takes when it accepts the
//! connection (before the handshake) and inserts into each request's extensions: the verified
//! client certificate's names are filled in when the handshake completes, before any request
//! can be read. (`tonic::Request::remote_addr` looks for tonic's own `TcpConnectInfo` and so
//! answers None here: use [`Peer::addr`].)

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;

use crate::peer::Peer;

/// A connection's transport.
enum Link {
    /// Plain TCP.
    Plain(TcpStream),
    /// A TLS handshake under way.
    Handshake(Box<tokio_rustls::Accept<TcpStream>>),
    /// TLS, after its handshake.
    Tls(Box<TlsStream<TcpStream>>),
    /// A handshake failed: the connection is over.
    Failed,
}

/// An accepted connection holding its place until it closes.
pub(crate) struct Bounded {
    link: Link,
    peer: Peer,
    _place: OwnedSemaphorePermit,
    /// Until the first byte arrives (after the TLS handshake, with TLS): when the client must
    /// have sent it.
    first: Option<Pin<Box<Sleep>>>,
}

impl Connected for Bounded {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.peer.clone()
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the TLS handshake failed")
}

impl Bounded {
    /// Ready for data: within the first-byte time, the TLS handshake (if any) done.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(first) = self.first.as_mut()
            && first.as_mut().poll(cx).is_ready()
        {
            self.link = Link::Failed;
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client sent nothing in time",
            )));
        }
        if let Link::Handshake(accept) = &mut self.link {
            match Pin::new(accept.as_mut()).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(tls)) => {
                    self.peer.handshake_done(tls.get_ref().1);
                    self.link = Link::Tls(Box::new(tls));
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "grpc: TLS handshake failed");
                    self.link = Link::Failed;
                    return Poll::Ready(Err(e));
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    /// The transport ready for data.
    fn io(&mut self) -> io::Result<Pin<&mut (dyn Io + Unpin)>> {
        match &mut self.link {
            Link::Plain(s) => Ok(Pin::new(s)),
            Link::Tls(s) => Ok(Pin::new(s.as_mut())),
            Link::Handshake(_) | Link::Failed => Err(closed()),
        }
    }
}

/// What a transport is.
trait Io: AsyncRead + AsyncWrite {}
impl<T: AsyncRead + AsyncWrite> Io for T {}

impl AsyncRead for Bounded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Err(e) = ready!(this.poll_ready(cx)) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        let read = match this.io() {
            Ok(io) => io.poll_read(cx, buf),
            Err(e) => return Poll::Ready(Err(e)),
        };
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.first = None;
        }
        read
    }
}

impl AsyncWrite for Bounded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_ready(cx))?;
        this.io()?.poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_ready(cx))?;
        this.io()?.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.link {
            Link::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Link::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Link::Handshake(_) | Link::Failed => Poll::Ready(Ok(())),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_ready(cx))?;
        this.io()?.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        match &self.link {
            Link::Plain(s) => s.is_write_vectored(),
            Link::Tls(s) => s.is_write_vectored(),
            Link::Handshake(_) | Link::Failed => false,
        }
    }
}

/// The connections of `listener`, at most `max` at once, each closed if it sends nothing within
/// `first_byte` (with `tls`, if it does not finish its handshake and send its first bytes
/// within it).
pub(crate) fn incoming(
    listener: TcpListener,
    max: usize,
    first_byte: Duration,
    tls: Option<TlsAcceptor>,
) -> impl Stream<Item = io::Result<Bounded>> {
    let places = Arc::new(Semaphore::new(max.max(1)));
    futures::stream::unfold((listener, places), move |(listener, places)| {
        let tls = tls.clone();
        async move {
            let place = Arc::clone(&places).acquire_owned().await.ok()?;
            loop {
                match listener.accept().await {
                    Ok((stream, addr)) => {
                        let _ = stream.set_nodelay(true);
                        let peer = Peer::new(Some(addr));
                        let link = match &tls {
                            Some(acceptor) => Link::Handshake(Box::new(acceptor.accept(stream))),
                            None => Link::Plain(stream),
                        };
                        let conn = Bounded {
                            link,
                            peer,
                            _place: place,
                            first: Some(Box::pin(tokio::time::sleep(first_byte))),
                        };
                        return Some((Ok(conn), (listener, places)));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "grpc: cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }
    })
}

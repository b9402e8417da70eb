//! The gRPC port's connections, bounded: at most a number at once (beyond, new ones wait in the
//! listen backlog), and a client that sends nothing within a timeout of connecting is closed,
//! so idle connections cannot take every place. (tonic bounds what comes after: streams per
//! connection, HTTP/2 keep-alive.)

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// An accepted connection holding its place until it closes.
pub(crate) struct Bounded {
    stream: TcpStream,
    _place: OwnedSemaphorePermit,
    /// Until the first byte arrives: when the client must have sent it.
    first: Option<Pin<Box<Sleep>>>,
}

impl Connected for Bounded {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Bounded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(first) = self.first.as_mut()
            && first.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client sent nothing in time",
            )));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.first = None;
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
        Pin::new(&mut self.stream).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The connections of `listener`, at most `max` at once, each closed if it sends nothing within
/// `first_byte`.
pub(crate) fn incoming(
    listener: TcpListener,
    max: usize,
    first_byte: Duration,
) -> impl Stream<Item = io::Result<Bounded>> {
    let places = Arc::new(Semaphore::new(max.max(1)));
    futures::stream::unfold((listener, places), move |(listener, places)| async move {
        let place = Arc::clone(&places).acquire_owned().await.ok()?;
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let conn = Bounded {
                        stream,
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
    })
}

//! [`CommitBody`]: a response body that commits its reservation from its trailers.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use flowgate_core::{MemoryStore, Store};
use http::{HeaderMap, HeaderName};
use http_body::{Body, Frame, SizeHint};

use crate::reservation::Reservation;

pin_project_lite::pin_project! {
    /// The body of [`super::ReserveLayer`]'s answers: the inner service's body passed through,
    /// committing the reservation when a trailer carries the actual cost; the estimate when the
    /// body ends without one or is dropped before its end. The layer's own answers (a request
    /// without an estimate) are a fixed body.
    pub struct CommitBody<B, S: Store = MemoryStore> {
        #[pin]
        inner: Option<B>,
        fixed: Option<Bytes>,
        pending: Option<(Reservation<S>, HeaderName)>,
    }
}

impl<B, S: Store> CommitBody<B, S> {
    /// The inner body, committing nothing.
    pub(crate) fn plain(inner: B) -> Self {
        Self {
            inner: Some(inner),
            fixed: None,
            pending: None,
        }
    }

    /// The inner body, committing `reservation` from trailer `usage`.
    pub(crate) fn committing(inner: B, reservation: Reservation<S>, usage: HeaderName) -> Self {
        Self {
            inner: Some(inner),
            fixed: None,
            pending: Some((reservation, usage)),
        }
    }

    /// A body of the layer's own.
    pub(crate) fn fixed(bytes: impl Into<Bytes>) -> Self {
        Self {
            inner: None,
            fixed: Some(bytes.into()),
            pending: None,
        }
    }
}

/// The actual cost in header `name` of `headers`: a decimal integer. `Err` when present but not
/// one.
pub(crate) fn usage_in(headers: &HeaderMap, name: &HeaderName) -> Result<Option<u64>, ()> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or(()),
    }
}

impl<B: Body<Data = Bytes>, S: Store> Body for CommitBody<B, S> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            return Poll::Ready(this.fixed.take().map(|b| Ok(Frame::data(b))));
        };
        let frame = ready!(inner.poll_frame(cx));
        match &frame {
            Some(Ok(f)) => {
                if let Some(trailers) = f.trailers_ref() {
                    commit_from(this.pending, trailers);
                }
            }
            // The end without a usage trailer: the estimate, now rather than when the body is
            // dropped.
            None => drop(this.pending.take()),
            Some(Err(_)) => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Some(b) => b.is_end_stream(),
            None => self.fixed.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.inner, &self.fixed) {
            (Some(b), _) => b.size_hint(),
            (None, Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            (None, None) => SizeHint::with_exact(0),
        }
    }
}

/// Commits the pending reservation with the usage in `trailers`, if they carry it.
fn commit_from<S: Store>(pending: &mut Option<(Reservation<S>, HeaderName)>, trailers: &HeaderMap) {
    let Some((_, name)) = pending.as_ref() else {
        return;
    };
    match usage_in(trailers, name) {
        Ok(Some(actual)) => {
            if let Some((reservation, _)) = pending.take() {
                reservation.commit_later(actual);
            }
        }
        Ok(None) => {}
        Err(()) => tracing::warn!(
            trailer = %name,
            "response trailer is not a whole number of units: the reservation commits its estimate"
        ),
    }
}

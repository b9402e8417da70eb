//! How Redis client errors become [`StoreError`]s.

use flowgate_core::StoreError;
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Classifies a client error: timeouts, lost or refused connections, a loading or busy server and
/// cluster trouble are [`StoreError::Unavailable`] (or [`StoreError::Timeout`]); a script error or
/// a malformed reply is [`StoreError::Internal`].
pub(crate) fn store_error(e: &RedisError) -> StoreError {
    if e.is_timeout() {
        return StoreError::Timeout;
    }
    let unavailable = e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_cluster_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::ReadOnly
            )
        );
    if unavailable {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Internal(e.to_string())
    }
}

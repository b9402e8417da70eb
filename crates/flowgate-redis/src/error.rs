//! How Redis client errors become [`StoreError`]s.

use flowgate_core::StoreError;
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Classifies a client error: timeouts, lost or refused connections, credentials Redis refuses
/// (a password changed under the nodes: no call can succeed until it is right again), a loading
/// or busy server and cluster trouble are [`StoreError::Unavailable`] (or
/// [`StoreError::Timeout`]); a script error or a malformed reply is [`StoreError::Internal`].
pub(crate) fn store_error(e: &RedisError) -> StoreError {
    if e.is_timeout() {
        return StoreError::Timeout;
    }
    let unavailable = e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_cluster_error()
        || e.kind() == ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_credentials_are_an_outage_a_script_error_is_not() {
        let auth = RedisError::from((
            ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        assert!(matches!(store_error(&auth), StoreError::Unavailable(_)));
        let script = RedisError::from((ErrorKind::Client, "a script failed"));
        assert!(matches!(store_error(&script), StoreError::Internal(_)));
    }
}

//! The credentials file, read again on `SIGHUP` and every [`super::RELOAD_EVERY`]: the
//! credentials in force become the flags' and the file's. A file that cannot be read or does not
//! parse is logged once (file, line and what is wrong, never a secret) and the credentials in
//! force stay; so do they when the file is unchanged.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Auth, Credentials};
use crate::tls::Hangup;

/// The credentials of the flags and of a file's text.
///
/// # Errors
/// `path:line: what is wrong`, or a name or token given both in the flags and in the file.
pub(crate) fn combine(
    flags: &Credentials,
    path: &std::path::Path,
    text: &str,
) -> Result<Credentials, String> {
    let source = path.display().to_string();
    let mut file = Credentials::new();
    file.add_lines(&source, text)?;
    let mut all = flags.clone();
    all.extend(&file).map_err(|e| format!("{source}: {e}"))?;
    Ok(all)
}

/// Follows a credentials file.
pub(crate) struct Reloader {
    flags: Credentials,
    path: PathBuf,
    seen: String,
    failed: Option<String>,
}

impl Reloader {
    /// Following `path`, whose text `seen` is in force beside `flags`.
    pub(crate) fn new(flags: Credentials, path: PathBuf, seen: String) -> Self {
        Self {
            flags,
            path,
            seen,
            failed: None,
        }
    }

    /// Reads the file again, and puts a changed one in force; `trigger` (`SIGHUP` or `timer`)
    /// says in the log what made it read the file.
    async fn check(&mut self, auth: &Auth, trigger: &'static str) {
        let text = match tokio::fs::read_to_string(&self.path).await {
            Ok(t) => t,
            Err(e) => {
                return self.fail(format!(
                    "cannot read the credentials file {}: {e}",
                    self.path.display()
                ));
            }
        };
        if text == self.seen {
            return;
        }
        match combine(&self.flags, &self.path, &text) {
            Ok(creds) => {
                self.seen = text;
                self.failed = None;
                tracing::info!(file = %self.path.display(), trigger, "credentials file reloaded");
                auth.replace(creds);
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, message: String) {
        if self.failed.as_deref() != Some(message.as_str()) {
            tracing::error!(error = %message, "credentials file not used: the credentials in force stay");
            self.failed = Some(message);
        }
    }

    /// Follows the file until `shutdown`.
    pub(crate) fn spawn(
        mut self,
        auth: Arc<Auth>,
        mut shutdown: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        // Listening now, not in the task: a SIGHUP that came before the task first ran would
        // find no handler, and end the process (its default action).
        let mut hangup = Hangup::listen();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(super::RELOAD_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                let trigger = tokio::select! {
                    _ = every.tick() => "timer",
                    () = hangup.recv() => "SIGHUP",
                    _ = shutdown.changed() => return,
                };
                self.check(&auth, trigger).await;
            }
        })
    }
}

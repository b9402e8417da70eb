//! A real Alertmanager process for tests (Debian's `prometheus-alertmanager`, or `alertmanager`
//! on the `PATH`), on a free loopback port, in its own temporary directory, clustering off,
//! routing every alert to one webhook receiver; killed on drop.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// How many times readiness is probed before start-up is given up, and how long apart (about
/// 20 s in all: counted in tries, as the Redis spawners do, since time is read through
/// `flowgate_core::clock` only).
const READY_TRIES: u32 = 400;
const READY_PAUSE: Duration = Duration::from_millis(50);

/// One Alertmanager process, killed on drop.
#[derive(Debug)]
pub struct Alertmanager {
    port: u16,
    child: Child,
    _dir: TempDir,
}

fn binary() -> PathBuf {
    for p in [
        "/usr/bin/prometheus-alertmanager",
        "/usr/bin/alertmanager",
        "/usr/local/bin/alertmanager",
    ] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    PathBuf::from("alertmanager")
}

/// A plain HTTP/1.0 GET on 127.0.0.1:`port`: the status code and the body.
///
/// # Errors
/// When the connection or the read fails.
pub fn get(port: u16, path: &str) -> io::Result<(u16, String)> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

impl Alertmanager {
    /// Starts one that sends every alert to the webhook `receiver` (`http://127.0.0.1:P/hook`),
    /// grouped by `alertname`, waiting `group_wait` before a group's first notification and
    /// `group_interval` between a group's notifications, resolved ones included.
    ///
    /// # Panics
    /// When it cannot start (not installed, no free port) or is not ready in time: a test
    /// cannot run without it.
    pub fn start(receiver: &str, group_wait: &str, group_interval: &str) -> Self {
        Self::try_start(receiver, group_wait, group_interval)
            .unwrap_or_else(|e| panic!("cannot start Alertmanager ({}): {e}", binary().display()))
    }

    /// As [`Alertmanager::start`].
    ///
    /// # Errors
    /// When the process cannot be spawned or is not ready in time.
    pub fn try_start(receiver: &str, group_wait: &str, group_interval: &str) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("flowgate-alertmanager-")
            .tempdir()?;
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            format!(
                "route:\n  receiver: hook\n  group_by: [alertname]\n  group_wait: {group_wait}\n  group_interval: {group_interval}\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: {receiver}\n        send_resolved: true\n"
            ),
        )?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut child = Command::new(binary())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        for _ in 0..READY_TRIES {
            if get(port, "/-/ready").is_ok_and(|(s, _)| s == 200) {
                return Ok(Self {
                    port,
                    child,
                    _dir: dir,
                });
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(io::Error::other(format!("Alertmanager exited: {status}")));
            }
            std::thread::sleep(READY_PAUSE);
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(io::Error::other("Alertmanager not ready in time"))
    }

    /// Its base URL: `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The alerts it holds (`GET /api/v2/alerts`), as JSON text.
    ///
    /// # Errors
    /// When it does not answer 200.
    pub fn alerts(&self) -> io::Result<String> {
        match get(self.port, "/api/v2/alerts")? {
            (200, body) => Ok(body),
            (status, body) => Err(io::Error::other(format!("{status}: {body}"))),
        }
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

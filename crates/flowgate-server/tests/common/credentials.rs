#![allow(dead_code, unreachable_pub)]
//! A credentials file rotated under a running `flowgate serve` (SIGHUP), waited on by the
//! server's own word.

use std::path::Path;
use std::time::Duration;

use crate::common::{Proc, write};

/// How long a server may take to notice a change.
const WITHIN: Duration = Duration::from_secs(15);

/// Sends SIGHUP to `p`.
pub fn hangup(p: &Proc) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &p.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -HUP failed");
}

/// Writes `text` to the credentials file `path` of `p` and sends SIGHUP, until the server logs
/// that a SIGHUP made it read the file. A change its timer read first (between the write and the
/// signal) is written again, with a comment that makes it new.
pub async fn rotate(p: &Proc, path: &Path, text: &str) {
    const RELOADED: &str = "credentials file reloaded";
    for attempt in 0..3 {
        let before = p.logged(RELOADED);
        write(path, &format!("# rotation {attempt}\n{text}"));
        hangup(p);
        p.wait_logged(RELOADED, before, WITHIN).await;
        let log = p.log.lock().unwrap();
        let last = log.iter().rev().find(|l| l.contains(RELOADED));
        if last.is_some_and(|l| l.contains(r#"trigger="SIGHUP""#)) {
            return;
        }
    }
    panic!("the server read the credentials file on its timer only, never on SIGHUP");
}

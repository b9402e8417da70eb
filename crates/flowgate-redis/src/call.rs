//! One decide script call: the requests it carries and their decisions.

use std::sync::Arc;

use flowgate_core::{Clock, Micros, StoreError};

use crate::conn::Conn;
use crate::scripts::{ITEM_ARGS, Raw, decide_script, parse_decide};

/// One request (a batch of items), encoded for the decide script.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    /// One Redis key per item.
    pub(crate) keys: Vec<String>,
    /// `ITEM_ARGS` parameters per item.
    pub(crate) args: Vec<u64>,
}

impl Encoded {
    pub(crate) fn items(&self) -> usize {
        self.keys.len()
    }
}

/// Where the scripts read the time: Redis's `TIME`, or (test only) an overriding clock.
#[derive(Clone, Default)]
pub(crate) struct TimeSource(pub(crate) Option<Arc<dyn Clock>>);

/// Extra expiry with a clock override: the test's clock may run slower than Redis's.
const OVERRIDE_SLACK_MS: u64 = 600_000;

impl TimeSource {
    fn now_arg(&self) -> String {
        self.0
            .as_ref()
            .map(|c| c.now().to_string())
            .unwrap_or_default()
    }

    fn slack(&self) -> u64 {
        if self.0.is_some() {
            OVERRIDE_SLACK_MS
        } else {
            0
        }
    }
}

/// Decides `requests` in one script call; answers the `now` the script used and the decisions of
/// every item of every request, in order.
pub(crate) async fn decide(
    conn: &Conn,
    time: &TimeSource,
    requests: &[&Encoded],
) -> Result<(Micros, Vec<Raw>), StoreError> {
    let codes = requests
        .iter()
        .flat_map(|r| r.args.iter().step_by(ITEM_ARGS).copied());
    let mut inv = decide_script(codes).prepare_invoke();
    inv.arg(time.now_arg())
        .arg(time.slack())
        .arg(requests.len());
    let mut items = 0;
    for r in requests {
        inv.arg(r.items()).arg(&r.args[..]);
        for k in &r.keys {
            inv.key(k.as_str());
        }
        items += r.items();
    }
    let reply = conn.invoke(&inv).await?;
    parse_decide(reply, items)
}

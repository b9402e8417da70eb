//! The cluster's figures on made-up snapshots: outages, new nodes, clocks ahead and behind,
//! and what failed publishes carry.

use super::*;

fn admitted(n: u64) -> Counts {
    Counts {
        admitted: n,
        failure_policy: n,
        ..Counts::default()
    }
}

/// Node `node`'s figures for second `at`: rule `d/r`, `per_second` counted each second
/// from `from` to `at`.
fn snapshot(node: &str, at: i64, from: i64, per_second: u64) -> NodeSnapshot {
    NodeSnapshot {
        node: node.into(),
        started: 0,
        at,
        degraded: false,
        p50_ms: None,
        p99_ms: None,
        rules: vec![NodeRule {
            domain: "d".into(),
            name: "r".into(),
            totals: admitted(per_second * (at as u64)),
            seconds: (from..=at)
                .map(|s| Second::of(s, &admitted(per_second)))
                .collect(),
            top_admitted: Vec::new(),
            top_rejected: Vec::new(),
            debts: Vec::new(),
        }],
        refused: Vec::new(),
    }
}

fn nodes(ids: &[&str]) -> Vec<NodeView> {
    ids.iter()
        .map(|id| NodeView {
            id: (*id).into(),
            live: true,
            ..NodeView::default()
        })
        .collect()
}

fn series(c: &ClusterState, n: usize, at: i64) -> Vec<u64> {
    let key = ("d".to_owned(), "r".to_owned());
    c.history[&key]
        .last(n, at)
        .iter()
        .map(|c| c.admitted)
        .collect()
}

/// Two nodes count 50 a second each; neither can publish from second 105 to 114 (Redis
/// down), then both carry the seconds they missed: each second of the outage is drawn at
/// its place with its 100, and no second holds more.
#[test]
fn seconds_missed_by_an_outage_are_placed_at_their_own_seconds() {
    let mut c = ClusterState::default();
    let both = nodes(&["a", "b"]);
    for at in 100..105 {
        let s = vec![snapshot("a", at, at - 4, 50), snapshot("b", at, at - 4, 50)];
        c.update(at, both.clone(), s);
    }
    assert_eq!(series(&c, 5, 104), [100; 5]);
    // Back at 115: a's figures carry 105..=115; b's first publish lands after a's read.
    c.update(115, both.clone(), vec![snapshot("a", 115, 105, 50)]);
    assert_eq!(c.revised_from, Some(105));
    assert_eq!(series(&c, 16, 115), [&[100; 5][..], &[50; 11]].concat());
    c.update(
        116,
        both.clone(),
        vec![snapshot("a", 116, 105, 50), snapshot("b", 116, 105, 50)],
    );
    assert_eq!(c.revised_from, Some(105));
    assert_eq!(series(&c, 17, 116), [100; 17]);
    // Carried again: nothing is counted twice.
    c.update(
        117,
        both,
        vec![snapshot("a", 117, 105, 50), snapshot("b", 117, 113, 50)],
    );
    assert_eq!(c.revised_from, None);
    assert_eq!(series(&c, 18, 117), [100; 18]);
}

/// Redis restarted empty twice, close together: the first read after each lists only the
/// node that published first (a), and b, still carrying the seconds the first outage made
/// it miss, publishes them again after the second. They are not counted twice.
#[test]
fn a_node_missing_from_one_read_is_not_taken_again() {
    let mut c = ClusterState::default();
    let (both, only_a) = (nodes(&["a", "b"]), nodes(&["a"]));
    let two = |at: i64, from_a: i64, from_b: i64| {
        vec![snapshot("a", at, from_a, 50), snapshot("b", at, from_b, 50)]
    };
    for at in 100..105 {
        c.update(at, both.clone(), two(at, at - 4, at - 4));
    }
    // Down from 105 to 109; back empty at 110: b's first publish comes after this read.
    c.update(110, only_a.clone(), vec![snapshot("a", 110, 105, 50)]);
    for at in 111..115 {
        c.update(at, both.clone(), two(at, 105, 105));
    }
    // Down again from 115 to 119, back empty at 120; b still carries from 105.
    c.update(120, only_a, vec![snapshot("a", 120, 105, 50)]);
    c.update(121, both, two(121, 105, 105));
    assert_eq!(series(&c, 22, 121), [100; 22]);
}

/// A node first seen contributes the seconds it publishes, at their places; a reader ahead of
/// a node's clock takes the node's later seconds at a later read.
#[test]
fn a_new_node_and_a_clock_ahead() {
    let mut c = ClusterState::default();
    c.update(200, nodes(&["a"]), vec![snapshot("a", 201, 197, 10)]);
    assert_eq!(series(&c, 5, 200), [0, 10, 10, 10, 10]);
    c.update(201, nodes(&["a"]), vec![snapshot("a", 202, 198, 10)]);
    assert_eq!(series(&c, 5, 201), [10; 5]);
}

/// A node whose clock is 10 s behind: its seconds land 10 s back, and they are not taken for
/// an outage's (which would make a page read the whole window again every second).
#[test]
fn a_clock_behind_revises_nothing() {
    let mut c = ClusterState::default();
    for at in 300..303 {
        c.update(at, nodes(&["a"]), vec![snapshot("a", at - 10, at - 14, 10)]);
    }
    assert_eq!(c.revised_from, None);
    assert_eq!(series(&c, 17, 302), [&[10; 7][..], &[0; 10]].concat());
}

#[test]
fn publishing_carries_what_failed_publishes_missed() {
    let mut p = Publishing::default();
    assert_eq!(p.from(100), 96, "the recent window");
    p.succeeded(100);
    p.failed(101);
    p.failed(102);
    assert_eq!(p.from(103), 96, "the recent window before the failure");
    for at in 103..120 {
        p.failed(at);
    }
    p.succeeded(120);
    assert_eq!(
        p.from(121),
        96,
        "every second since the last success, and its window"
    );
    for at in 121..(120 + i64::from(CARRY)) {
        assert_eq!(p.from(at), 96);
        p.succeeded(at);
    }
    assert_eq!(
        p.from(200),
        196,
        "carried by {CARRY} publishes, then dropped"
    );
    // At most the history's length back.
    let mut p = Publishing::default();
    p.failed(1);
    assert_eq!(p.from(10_000), 10_000 - HISTORY_SECONDS as i64 + 1);
}

/// A reader that missed a node's last publish before an outage (it read the one before, then
/// its own exchanges failed) finds that second in the node's first publishes after it.
#[test]
fn the_last_second_before_an_outage_is_carried() {
    let mut c = ClusterState::default();
    let mut p = Publishing::default();
    let a = nodes(&["a"]);
    for at in 100..105 {
        let from = p.from(at);
        p.succeeded(at);
        c.update(at, a.clone(), vec![snapshot("a", at, from, 50)]);
    }
    // a published 105, but the reader's read at 105 found a's 104.
    let from = p.from(104);
    p.succeeded(105);
    c.update(105, a.clone(), vec![snapshot("a", 104, from, 50)]);
    for at in 106..112 {
        p.failed(at);
    }
    let from = p.from(112);
    p.succeeded(112);
    c.update(112, a, vec![snapshot("a", 112, from, 50)]);
    assert_eq!(series(&c, 13, 112), [50; 13]);
}

//! Hosts in network namespaces for the partition tests: Redis and two nodes, each in its own
//! namespace, joined by point-to-point veth links, and the test's callers in the root namespace.
//!
//! ```text
//!   root (callers) ──caller link A── node A ──store link A──┐
//!                  ──caller link B── node B ──store link B──┴── redis
//! ```
//!
//! A link is cut by making it drop every frame silently: each end's neighbour entry for the
//! other end is pinned to a MAC address no interface has, so every frame reaches the other end
//! addressed to another host and is dropped there (as a switch port that blackholes). No RST,
//! no ICMP: connections hang and connects time out, the hard case of a real partition. (netem
//! and tc drop actions need kernel modules that are not always there; this needs `ip` alone.)
//! Healing deletes the pinned entries; ARP finds the real addresses again.
//!
//! Everything made here is named `fg<pid><n>…` (unique per test process and topology), deleted
//! first if a process of the same pid left it behind, and deleted on drop, after a panic too.
//! Making it needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), `ip`, and veth in the kernel:
//! [`Topology::make`] answers [`Unavailable`] where it cannot, for the test to skip.
#![allow(dead_code, unreachable_pub)]

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Why namespaces cannot be made here.
#[derive(Debug)]
pub struct Unavailable(pub String);

/// The MAC address a cut link's frames are sent to: locally administered, unicast, and no
/// interface's.
const NOWHERE: &str = "02:66:67:00:00:01";

/// The port Redis listens on in its namespace.
pub const REDIS_PORT: u16 = 6379;
/// The ports each node serves in its namespace.
pub const HTTP_PORT: u16 = 8080;
pub const GRPC_PORT: u16 = 8081;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Runs `ip args…`; its standard error when it fails.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`ip` cannot be run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip args…` and panics, naming it, when it fails (the namespaces exist by then, so a
/// failure is a defect of the harness, not a missing capability).
fn ip_ok(args: &[&str]) {
    if let Err(e) = ip(args) {
        panic!("{e}");
    }
}

/// Output of `ip args…`, empty when it fails.
fn ip_out(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// One end of a link: its namespace (`None`: the root namespace), interface and address.
#[derive(Clone, Debug)]
pub struct End {
    pub ns: Option<String>,
    pub dev: String,
    pub addr: Ipv4Addr,
}

impl End {
    /// `ip` with `-n <ns>` for an end in a namespace.
    fn ip(&self, args: &[&str]) -> Result<(), String> {
        match &self.ns {
            Some(ns) => {
                let mut all = vec!["-n", ns.as_str()];
                all.extend_from_slice(args);
                ip(&all)
            }
            None => ip(args),
        }
    }
}

/// A point-to-point veth link between two ends, on a /30.
#[derive(Clone, Debug)]
pub struct Link {
    pub name: &'static str,
    pub a: End,
    pub b: End,
}

/// One end of a [`Link`]: `A` (the callers' or the node's), `B` (the node's or Redis's).
#[derive(Clone, Copy, Debug)]
pub enum Side {
    A,
    B,
}

impl Link {
    fn ends(&self, sender: Side) -> (&End, &End) {
        match sender {
            Side::A => (&self.a, &self.b),
            Side::B => (&self.b, &self.a),
        }
    }

    /// Drops every frame `sender` sends on the link from now on, silently; the other way still
    /// carries frames (an asymmetric partition).
    pub fn cut_from(&self, sender: Side) {
        let (me, peer) = self.ends(sender);
        let peer = peer.addr.to_string();
        let pin = ["neigh", "replace", &peer, "lladdr", NOWHERE, "dev", &me.dev];
        me.ip(&[&pin[..], &["nud", "permanent"]].concat())
            .unwrap_or_else(|e| panic!("cutting link {}: {e}", self.name));
    }

    /// Drops every frame from now on, silently, both ways.
    pub fn cut(&self) {
        self.cut_from(Side::A);
        self.cut_from(Side::B);
    }

    /// Carries frames again (ARP finds each end's real address).
    pub fn heal(&self) {
        for sender in [Side::A, Side::B] {
            let (me, peer) = self.ends(sender);
            let peer = peer.addr.to_string();
            // `all`: a pinned (permanent) entry too.
            me.ip(&["neigh", "flush", "to", &peer, "dev", &me.dev, "nud", "all"])
                .unwrap_or_else(|e| panic!("healing link {}: {e}", self.name));
        }
    }
}

/// A process started in a namespace, killed (SIGKILL) and reaped on drop.
pub struct NsChild(pub Child);

impl Drop for NsChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What was made, deleted on drop: deleting a namespace deletes its processes' network, its
/// veth ends and their peers.
#[derive(Default)]
struct Made {
    namespaces: Vec<String>,
    /// Veth ends in the root namespace (gone with their peers, unless a process still holds
    /// the peer's namespace).
    root_devs: Vec<String>,
}

impl Made {
    /// Makes namespace `ns`, its loopback up.
    fn namespace(&mut self, ns: &str) -> Result<(), Unavailable> {
        ip(&["netns", "add", ns]).map_err(Unavailable)?;
        self.namespaces.push(ns.to_owned());
        ip(&["-n", ns, "link", "set", "lo", "up"]).map_err(Unavailable)
    }

    /// Makes a veth link named `name` between namespaces `a` (`None`: the root namespace) and
    /// `b`, its ends `<base><tag>0` and `<base><tag>1` at `a_addr` and `b_addr` on a /30.
    fn link(
        &mut self,
        name: &'static str,
        (base, tag): (&str, &str),
        (a, a_addr): (Option<&str>, Ipv4Addr),
        (b, b_addr): (&str, Ipv4Addr),
    ) -> Result<Link, Unavailable> {
        let (dev_a, dev_b) = (format!("{base}{tag}0"), format!("{base}{tag}1"));
        ip(&[
            "link", "add", &dev_a, "type", "veth", "peer", "name", &dev_b,
        ])
        .map_err(|e| Unavailable(format!("no veth links: {e}")))?;
        if a.is_none() {
            self.root_devs.push(dev_a.clone());
        }
        let a = End {
            ns: a.map(str::to_owned),
            dev: dev_a,
            addr: a_addr,
        };
        let b = End {
            ns: Some(b.to_owned()),
            dev: dev_b,
            addr: b_addr,
        };
        for end in [&a, &b] {
            if let Some(ns) = &end.ns {
                ip_ok(&["link", "set", &end.dev, "netns", ns]);
            }
            let cidr = format!("{}/30", end.addr);
            end.ip(&["addr", "add", &cidr, "dev", &end.dev])
                .and_then(|()| end.ip(&["link", "set", &end.dev, "up"]))
                .unwrap_or_else(|e| panic!("link {name}: {e}"));
        }
        Ok(Link { name, a, b })
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        for dev in &self.root_devs {
            let _ = ip(&["link", "del", dev]);
        }
    }
}

/// Redis and two nodes as hosts in namespaces, the callers in the root namespace.
pub struct Topology {
    pub redis_ns: String,
    pub node_ns: [String; 2],
    /// Callers (root) to node A and node B.
    pub caller: [Link; 2],
    /// Node A and node B to Redis.
    pub store: [Link; 2],
    made: Made,
}

impl Topology {
    /// Makes the namespaces and links, or says why it cannot (not root, no `ip`, no veth).
    pub fn make() -> Result<Topology, Unavailable> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("fg{}{n}", std::process::id());
        let net = free_block(std::process::id() * 8 + n).map_err(Unavailable)?;
        let [r, a, b] = ["r", "a", "b"].map(|s| format!("{base}{s}"));
        // Leftovers of a process that had this pid: deleting its namespaces deletes its links.
        for ns in [&r, &a, &b] {
            let _ = ip(&["netns", "del", ns]);
        }
        for dev in ["ca0", "cb0"] {
            let _ = ip(&["link", "del", &format!("{base}{dev}")]);
        }
        let mut made = Made::default();
        for ns in [&r, &a, &b] {
            made.namespace(ns)?;
        }
        let host = |k: u8| Ipv4Addr::new(net[0], net[1], net[2], k);
        let caller = [
            made.link("caller A", (&base, "ca"), (None, host(1)), (&a, host(2)))?,
            made.link("caller B", (&base, "cb"), (None, host(5)), (&b, host(6)))?,
        ];
        let store = [
            made.link(
                "store A",
                (&base, "sa"),
                (Some(&a), host(9)),
                (&r, host(10)),
            )?,
            made.link(
                "store B",
                (&base, "sb"),
                (Some(&b), host(13)),
                (&r, host(14)),
            )?,
        ];
        Ok(Topology {
            redis_ns: r,
            node_ns: [a, b],
            caller,
            store,
            made,
        })
    }

    /// Node `i`'s address on its caller link (where the callers reach it).
    pub fn node_addr(&self, i: usize) -> Ipv4Addr {
        self.caller[i].b.addr
    }

    /// Redis's address on node `i`'s store link.
    pub fn redis_addr_for(&self, i: usize) -> Ipv4Addr {
        self.store[i].b.addr
    }

    /// Redis's URL as node `i` reaches it.
    pub fn redis_url_for(&self, i: usize) -> String {
        format!("redis://{}:{REDIS_PORT}/", self.redis_addr_for(i))
    }

    /// A command that runs `program` in namespace `ns`.
    pub fn command(ns: &str, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, program]);
        cmd
    }

    /// Starts `redis-server` in its namespace, listening on both store links (persistence off,
    /// in `dir`), and waits until it answers.
    pub fn start_redis(&self, dir: &std::path::Path) -> NsChild {
        let binds = format!("{} {}", self.redis_addr_for(0), self.redis_addr_for(1));
        let child = Self::command(&self.redis_ns, "redis-server")
            .args(["--bind", &binds, "--port", &REDIS_PORT.to_string()])
            .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian's redis-server package) can be run");
        let redis = NsChild(child);
        let addr = self.redis_addr_for(0).to_string();
        for _ in 0..200 {
            let pong = Self::command(&self.redis_ns, "redis-cli")
                .args(["-h", &addr, "-p", &REDIS_PORT.to_string(), "ping"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"PONG"));
            if pong {
                return redis;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server in namespace {} never answered", self.redis_ns);
    }
}

/// A /24 in 10.192.0.0/10 that no address or route of the root namespace overlaps, picked from
/// `seed` onwards: its first three octets.
fn free_block(seed: u32) -> Result<[u8; 3], String> {
    let taken: Vec<(u32, u32)> = [
        ip_out(&["-4", "-o", "route", "show", "table", "all"]),
        ip_out(&["-4", "-o", "addr", "show"]),
    ]
    .iter()
    .flat_map(|text| {
        text.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    })
    .filter_map(|word| prefix(&word))
    .collect();
    for k in 0..4096u32 {
        let i = (seed.wrapping_add(k)) % (1 << 14);
        let block = (10u32 << 24) | (192 << 16) | (i << 8);
        let clash = taken.iter().any(|&(net, len)| {
            let len = len.min(24);
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            net & mask == block & mask
        });
        if !clash {
            let [a, b, c, _] = block.to_be_bytes();
            return Ok([a, b, c]);
        }
    }
    Err("no free 10.192.0.0/10 block for the test's links".to_owned())
}

/// `10.1.2.0/24` (or an address alone, as /32) as a number and a length.
fn prefix(word: &str) -> Option<(u32, u32)> {
    let (addr, len) = word.split_once('/').unwrap_or((word, "32"));
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    (len <= 32).then_some((u32::from(addr), len))
}

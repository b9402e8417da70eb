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

/// Redis and two nodes as hosts in namespaces, the callers in the root namespace.
pub struct Topology {
    /// Namespaces made, deleted on drop.
    namespaces: Vec<String>,
    /// Interfaces left in the root namespace, deleted on drop.
    root_devs: Vec<String>,
    pub redis_ns: String,
    pub node_ns: [String; 2],
    /// Callers (root) to node A and node B.
    pub caller: [Link; 2],
    /// Node A and node B to Redis.
    pub store: [Link; 2],
}

impl Topology {
    /// Makes the namespaces and links, or says why it cannot (not root, no `ip`, no veth).
    pub fn make() -> Result<Topology, Unavailable> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("fg{}{n}", std::process::id());
        let net = free_block(std::process::id() * 8 + n).map_err(Unavailable)?;
        let names = ["r", "a", "b"].map(|s| format!("{base}{s}"));
        // Leftovers of a process that had this pid: deleting its namespaces deletes its links.
        for ns in &names {
            let _ = ip(&["netns", "del", ns]);
        }
        for dev in ["ca0", "cb0"] {
            let _ = ip(&["link", "del", &format!("{base}{dev}")]);
        }
        let mut topo = Topology {
            namespaces: Vec::new(),
            root_devs: Vec::new(),
            redis_ns: names[0].clone(),
            node_ns: [names[1].clone(), names[2].clone()],
            caller: [placeholder(), placeholder()],
            store: [placeholder(), placeholder()],
        };
        for ns in &names {
            ip(&["netns", "add", ns]).map_err(Unavailable)?;
            topo.namespaces.push(ns.clone());
            ip(&["-n", ns, "link", "set", "lo", "up"]).map_err(Unavailable)?;
        }
        let host = |k: u8| Ipv4Addr::new(net[0], net[1], net[2], k);
        let plan = [
            ("caller A", "ca", None, &names[1], 0u8),
            ("caller B", "cb", None, &names[2], 4),
            ("store A", "sa", Some(&names[1]), &names[0], 8),
            ("store B", "sb", Some(&names[2]), &names[0], 12),
        ];
        let mut links = Vec::new();
        for (name, tag, a_ns, b_ns, at) in plan {
            let (dev_a, dev_b) = (format!("{base}{tag}0"), format!("{base}{tag}1"));
            ip(&[
                "link", "add", &dev_a, "type", "veth", "peer", "name", &dev_b,
            ])
            .map_err(|e| Unavailable(format!("no veth links: {e}")))?;
            if a_ns.is_none() {
                topo.root_devs.push(dev_a.clone());
            }
            let a = End {
                ns: a_ns.cloned(),
                dev: dev_a,
                addr: host(at + 1),
            };
            let b = End {
                ns: Some(b_ns.clone()),
                dev: dev_b,
                addr: host(at + 2),
            };
            for end in [&a, &b] {
                if let Some(ns) = &end.ns {
                    ip_ok(&["link", "set", &end.dev, "netns", ns]);
                }
                let cidr = format!("{}/30", end.addr);
                end.ip(&["addr", "add", &cidr, "dev", &end.dev])
                    .unwrap_or_else(|e| panic!("{e}"));
                end.ip(&["link", "set", &end.dev, "up"])
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            links.push(Link { name, a, b });
        }
        let mut links = links.into_iter();
        topo.caller = [links.next().unwrap(), links.next().unwrap()];
        topo.store = [links.next().unwrap(), links.next().unwrap()];
        Ok(topo)
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

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        // Gone with their peers already, unless a process still holds a namespace.
        for dev in &self.root_devs {
            let _ = ip(&["link", "del", dev]);
        }
    }
}

fn placeholder() -> Link {
    let end = End {
        ns: None,
        dev: String::new(),
        addr: Ipv4Addr::UNSPECIFIED,
    };
    Link {
        name: "",
        a: end.clone(),
        b: end,
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

//! The crates' layering, read from their manifests: a crate depends only on crates below it, so
//! that what is below never reaches up (the compiler then refuses an upward `use`), and the server
//! names the library's types by one path (`flowgate::`, never `flowgate_core::`). A crate added
//! to the workspace must be placed here.

use std::collections::BTreeSet;
use std::path::Path;

/// The product's crates, lowest first, and the crates of the workspace each may depend on
/// (normal, optional and dev dependencies alike; `flowgate-testkit`, test support, is a
/// dev-dependency of any).
const LAYERS: [(&str, &[&str]); 6] = [
    ("flowgate-core", &[]),
    ("flowgate-redis", &["flowgate-core"]),
    ("flowgate", &["flowgate-core", "flowgate-redis"]),
    ("flowgate-config", &["flowgate-core", "flowgate"]),
    (
        "flowgate-observe",
        &["flowgate", "flowgate-redis", "flowgate-config"],
    ),
    // The server names core types through `flowgate` (its `rule`, `store`, `clock`, ...
    // modules): one path per type.
    (
        "flowgate-server",
        &[
            "flowgate",
            "flowgate-redis",
            "flowgate-config",
            "flowgate-observe",
        ],
    ),
];

/// Test support, below nothing and above the core it tests.
const TESTKIT: (&str, &[&str]) = ("flowgate-testkit", &["flowgate-core"]);

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn manifest(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace's members, by package name.
fn members() -> Vec<(String, toml::Table)> {
    let root = manifest(&workspace().join("Cargo.toml"));
    let members = root["workspace"]["members"]
        .as_array()
        .expect("workspace.members");
    members
        .iter()
        .map(|m| {
            let m = workspace()
                .join(m.as_str().expect("a path"))
                .join("Cargo.toml");
            let t = manifest(&m);
            let name = t["package"]["name"]
                .as_str()
                .expect("package.name")
                .to_owned();
            (name, t)
        })
        .collect()
}

/// The workspace crates `t` depends on in its dependency tables (a `path`, or `workspace =
/// true` naming a workspace crate), but itself.
fn ours(name: &str, t: &toml::Table, names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = t.get(table).and_then(toml::Value::as_table) else {
            continue;
        };
        for (dep, spec) in deps {
            let package = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(dep);
            if names.contains(package) && package != name {
                out.insert(package.to_owned());
            }
        }
    }
    out
}

/// What breaks the layering: each crate's dependencies on the workspace against its layer.
fn violations(members: &[(String, toml::Table)]) -> Vec<String> {
    let names: BTreeSet<String> = members.iter().map(|(n, _)| n.clone()).collect();
    let mut out = Vec::new();
    for (name, t) in members {
        let Some((_, allowed)) = LAYERS.iter().chain([&TESTKIT]).find(|(n, _)| n == name) else {
            out.push(format!("{name}: not placed in a layer (tests/layers.rs)"));
            continue;
        };
        for dep in ours(name, t, &names) {
            if !allowed.contains(&dep.as_str()) && dep != TESTKIT.0 {
                out.push(format!("{name} depends on {dep}, which is not below it"));
            }
        }
    }
    out
}

#[test]
fn every_crate_depends_only_on_the_crates_below_it() {
    let v = violations(&members());
    assert!(v.is_empty(), "{}", v.join("\n"));
}

/// The check itself refuses what it is for: an upward dependency, the core named by the server,
/// and a crate placed nowhere.
#[test]
fn an_upward_dependency_is_refused() {
    let mut members = members();
    let with = |members: &mut Vec<(String, toml::Table)>, name: &str, dep: &str| {
        let (_, t) = members.iter_mut().find(|(n, _)| n == name).expect(name);
        let deps = t
            .entry("dependencies")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .expect("a table");
        deps.insert(dep.to_owned(), toml::Value::Table(toml::Table::new()));
    };
    let mut upward = members.clone();
    with(&mut upward, "flowgate-config", "flowgate-server");
    assert_eq!(
        violations(&upward),
        ["flowgate-config depends on flowgate-server, which is not below it"]
    );
    let mut core = members.clone();
    with(&mut core, "flowgate-server", "flowgate-core");
    assert_eq!(
        violations(&core),
        ["flowgate-server depends on flowgate-core, which is not below it"]
    );
    members.push(("flowgate-new".to_owned(), toml::Table::new()));
    assert_eq!(
        violations(&members),
        ["flowgate-new: not placed in a layer (tests/layers.rs)"]
    );
}

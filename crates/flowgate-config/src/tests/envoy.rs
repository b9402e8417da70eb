//! envoyproxy/ratelimit's YAML.

use super::*;

#[test]
fn loads_the_envoy_examples_directory() {
    let loaded = load(&examples().join("envoy")).unwrap();
    let (config, set) = (loaded.config, loaded.rules);
    assert_eq!(config.files.len(), 2);
    assert_eq!(
        find(&set, "mongo_cps", "database=users"),
        Some("database_users")
    );
    assert_eq!(find(&set, "mongo_cps", "database=other"), None);
    // Value-specific beats key-only; nested entries must match in depth.
    assert_eq!(
        find(&set, "rl", "source_cluster=proxy, destination_cluster=bar"),
        Some("source_cluster_proxy.destination_cluster_bar")
    );
    assert_eq!(
        find(&set, "rl", "source_cluster=proxy, destination_cluster=foo"),
        Some("source_cluster_proxy.destination_cluster")
    );
    assert_eq!(find(&set, "rl", "source_cluster=proxy"), None);
    assert_eq!(
        find(&set, "rl", "remote_address=10.0.0.2"),
        Some("per-address")
    );
    let blocked = set
        .find("rl", &"remote_address=10.0.0.1".parse().unwrap())
        .unwrap();
    assert_eq!(blocked.limit.as_ref().unwrap().limit(), 0);
    let day = set
        .find("rl", &"category=account".parse().unwrap())
        .unwrap();
    assert_eq!(day.limit.as_ref().unwrap().window(), 86_400_000_000);
    assert_eq!(
        day.limit.as_ref().unwrap().algorithm(),
        Algorithm::FixedWindow
    );
    let ua = set
        .find("rl", &"user_agent=curl/8".parse().unwrap())
        .unwrap();
    assert!(ua.shadow && ua.detailed_metric);
    assert!(
        set.find("rl", &"health_check=x".parse().unwrap())
            .unwrap()
            .limit
            .is_none()
    );
    // `replaces`: the partner's rule drops the per-address rule.
    let req = Request::new(
        "rl",
        vec![
            "remote_address=1.2.3.4".parse().unwrap(),
            "partner=acme".parse().unwrap(),
        ],
    );
    let m = set.resolve(&req);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].rule.name, "partner_acme");
}

#[test]
fn envoy_errors_name_file_line_and_field() {
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 3\n",
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(5), "descriptors[0].rate_limit.unit"),
        "{e}"
    );
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limitt:\n      unit: second\n",
    )
    .unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("rate_limitt"), "{e}");
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: many\n",
    )
    .unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert_eq!(e.field, "requests_per_unit", "{e}");
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
    )
    .unwrap_err();
    assert!(e.message.contains("unlimited"), "{e}");
    let e = parse("r.yaml", Format::EnvoyYaml, "domain: \"\"\n").unwrap_err();
    assert_eq!(e.field, "domain");
    let e = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
    )
    .unwrap_err();
    assert!(e.message.contains("duplicate"), "{e}");
}

#[test]
fn envoy_numeric_values_and_null_lists_load() {
    let rules = parse(
        "r.yaml",
        Format::EnvoyYaml,
        "domain: d\ndescriptors:\n  - key: code\n    value: 200\n    rate_limit: {unit: SECOND, requests_per_unit: 3}\n    descriptors:\n",
    )
    .unwrap();
    assert_eq!(rules[0].item.name, "code_200");
    assert_eq!(rules[0].item.limit.as_ref().unwrap().limit(), 3);
}

/// Envoy's YAML may hold a null in a rule's metadata (`owner:`); TOML has none, so the rule keeps
/// its metadata without it, and is written back as TOML and read back the same (the fuzzer found
/// a YAML file whose rules could not be written as TOML).
#[test]
fn a_null_in_metadata_is_dropped_and_the_rule_written_back_as_toml() {
    let yaml = "domain: metadata\ndescriptors:\n  - key: key1\n    rate_limit: { unit: second, requests_per_unit: 5 }\n    metadata:\n      name: service_1\n      tags: [a, ~, b]\n      owner:\n";
    let config = read_texts(&[("m.yaml".to_owned(), yaml.to_owned())]).unwrap();
    let rule = &config.rules[0].item;
    let metadata: serde_json::Value =
        serde_json::from_str(rule.metadata.as_deref().unwrap()).unwrap();
    assert_eq!(
        metadata,
        serde_json::json!({"name": "service_1", "tags": ["a", "b"]})
    );
    let doc = crate::schema::FileDoc {
        rule: vec![crate::schema::RuleDoc::of(rule)],
        ..Default::default()
    };
    let text = ::toml::to_string(&doc).unwrap();
    let back = read_texts(&[("back.toml".to_owned(), text)]).unwrap();
    assert_eq!(back.rules[0].item.metadata, rule.metadata);
}

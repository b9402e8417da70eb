//! Generated envoyproxy/ratelimit YAML files.

use flowgate_testkit::fuzz::hostile_number;
use proptest::prelude::*;

use super::{Wrong, opt};

/// A YAML scalar: valid, hostile, or a number where a string is expected.
pub(crate) fn yaml_scalar(valid: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => Wrong(4).word(valid).prop_map(|w| serde_json::to_string(&w).unwrap_or_default()),
        1 => hostile_number(),
        1 => Just("null".to_owned()),
        1 => Just("[]".to_owned()),
        1 => Just("{}".to_owned()),
    ]
}

/// An envoyproxy/ratelimit descriptor list `depth` deep at most, as YAML lines at `indent`.
pub(crate) fn yaml_descriptors(depth: u32) -> impl Strategy<Value = Vec<String>> {
    let leaf = (
        yaml_scalar(&["database", "path", "user", "key", ""]),
        opt(yaml_scalar(&["users", "files/*", "a*b", ""])),
        opt((
            yaml_scalar(&["second", "minute", "day", "year", "fortnight"]),
            hostile_number(),
            any::<bool>(),
            opt(yaml_scalar(&["per-db", ""])),
            prop::collection::vec(opt(yaml_scalar(&["other", ""])), 0..2),
        )),
        any::<[bool; 5]>(),
    )
        .prop_map(|(key, value, rate, flags)| {
            let mut d = vec![format!("- key: {key}")];
            if let Some(v) = value {
                d.push(format!("  value: {v}"));
            }
            if let Some((unit, n, unlimited, name, replaces)) = rate {
                d.push("  rate_limit:".to_owned());
                d.push(format!("    unit: {unit}"));
                d.push(format!("    requests_per_unit: {n}"));
                if unlimited {
                    d.push("    unlimited: true".to_owned());
                }
                if let Some(name) = name {
                    d.push(format!("    name: {name}"));
                }
                if !replaces.is_empty() {
                    d.push("    replaces:".to_owned());
                    for r in replaces {
                        match r {
                            Some(n) => d.push(format!("      - name: {n}")),
                            None => d.push("      - {}".to_owned()),
                        }
                    }
                }
            }
            for (flag, name) in flags.iter().zip([
                "shadow_mode",
                "detailed_metric",
                "quota_mode",
                "value_to_metric",
                "share_threshold",
            ]) {
                if *flag {
                    d.push(format!("  {name}: true"));
                }
            }
            d
        });
    leaf.prop_recursive(depth, 24, 3, |inner| {
        (inner.clone(), prop::collection::vec(inner, 0..3)).prop_map(|(mut head, children)| {
            if !children.is_empty() {
                head.push("  descriptors:".to_owned());
                for line in children.into_iter().flatten() {
                    head.push(format!("    {line}"));
                }
            }
            head
        })
    })
}

/// An envoyproxy/ratelimit file generated from its schema, hostile values included.
pub(crate) fn yaml_doc() -> impl Strategy<Value = String> {
    (
        yaml_scalar(&["mongo_cps", "api", ""]),
        prop::collection::vec(yaml_descriptors(3), 0..4),
    )
        .prop_map(|(domain, list)| {
            let mut text = format!("domain: {domain}\n");
            if !list.is_empty() {
                text.push_str("descriptors:\n");
                for line in list.into_iter().flatten() {
                    text.push_str(&format!("  {line}\n"));
                }
            }
            text
        })
}

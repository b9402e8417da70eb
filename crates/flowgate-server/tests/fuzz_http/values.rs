//! Generated JSON values for the fuzz targets' bodies: valid, wrong-typed and clean values of
//! each field's shape, hostile scalars and deep nesting.

use flowgate_testkit::fuzz::{hostile_number, hostile_text};
use proptest::prelude::*;

use super::schema::{Field, Shape};
use crate::generate::opt;

/// A JSON string of `s`.
pub(crate) fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Any JSON text: scalars with hostile numbers and strings, nested arrays and objects, and
/// (raw) nesting thousands deep.
pub(crate) fn any_json() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        hostile_number(),
        Just("1e400".to_owned()),
        Just("-0.0".to_owned()),
        hostile_text().prop_map(|t| json_str(&t)),
    ];
    let nested = leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((hostile_text(), inner), 0..4).prop_map(|v| {
                let fields: Vec<String> = v
                    .iter()
                    .map(|(k, x)| format!("{}:{x}", json_str(k)))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    });
    prop_oneof![
        8 => nested,
        1 => (1usize..5000).prop_map(|d| format!("{}{}", "[".repeat(d), "]".repeat(d))),
        1 => (1usize..5000).prop_map(|d| format!("{}1{}", "{\"a\":".repeat(d), "}".repeat(d))),
    ]
}

/// A descriptor as a body gives it: valid text, hostile text, or Envoy's object with hostile
/// entries.
pub(crate) fn descriptor_json() -> impl Strategy<Value = String> + Clone {
    let text = prop_oneof![
        4 => prop::sample::select(&[
            "client=a",
            "biz=JOB, channel=x",
            "channel=WPG",
            "export=1",
            "user=u",
            "ip=1.2.3.4",
            "path=files/a",
        ][..])
        .prop_map(str::to_owned),
        1 => hostile_text(),
    ];
    let entry = (
        prop_oneof![3 => Just("client".to_owned()), 1 => hostile_text()],
        opt(hostile_text()),
    )
        .prop_map(|(k, v)| match v {
            Some(v) => format!(r#"{{"key":{},"value":{}}}"#, json_str(&k), json_str(&v)),
            None => format!(r#"{{"key":{}}}"#, json_str(&k)),
        });
    prop_oneof![
        3 => text.clone().prop_map(|t| json_str(&t)),
        1 => (prop::collection::vec(entry, 0..4), opt(hostile_number())).prop_map(|(es, h)| {
            match h {
                Some(h) => format!(r#"{{"entries":[{}],"hits_addend":{h}}}"#, es.join(",")),
                None => format!(r#"{{"entries":[{}]}}"#, es.join(",")),
            }
        }),
    ]
}

/// An object of `fields`: each required one, and each other one two times in five.
pub(crate) fn object_value(fields: &[Field]) -> BoxedStrategy<String> {
    let values: Vec<BoxedStrategy<Option<String>>> = fields
        .iter()
        .map(|f| {
            let name = json_str(&f.name);
            let v = valid_value(&f.shape).prop_map(move |v| format!("{name}:{v}"));
            if f.required {
                v.prop_map(Some).boxed()
            } else {
                prop::option::weighted(0.4, v).boxed()
            }
        })
        .collect();
    values
        .prop_map(|v| {
            format!(
                "{{{}}}",
                v.into_iter().flatten().collect::<Vec<_>>().join(",")
            )
        })
        .boxed()
}

/// A well-typed value of `shape` (its content may still be refused: hostile strings, numbers
/// out of range, too many descriptors).
pub(crate) fn valid_value(shape: &Shape) -> BoxedStrategy<String> {
    match shape {
        Shape::Str => prop_oneof![
            3 => Just("api".to_owned()),
            1 => hostile_text(),
        ]
        .prop_map(|s| json_str(&s))
        .boxed(),
        Shape::B64 => prop_oneof![
            Just("aGVsbG8=".to_owned()),
            Just("".to_owned()),
            hostile_text(),
        ]
        .prop_map(|s| json_str(&s))
        .boxed(),
        Shape::Enum(values) => prop_oneof![
            3 => prop::sample::select(values.clone()),
            1 => hostile_text(),
        ]
        .prop_map(|s| json_str(&s))
        .boxed(),
        Shape::U64 { max: None } => prop_oneof![0u64..100, any::<u64>()]
            .prop_map(|n| n.to_string())
            .boxed(),
        // Up to 30, or above the maximum: a wait never lasts long.
        Shape::U64 { max: Some(max) } => prop_oneof![0u64..30, max.saturating_add(1)..u64::MAX]
            .prop_map(|n| n.to_string())
            .boxed(),
        Shape::Num => prop_oneof![
            (0u32..100_000).prop_map(|n| format!("{n}.5")),
            hostile_number(),
        ]
        .boxed(),
        Shape::Bool => any::<bool>().prop_map(|b| b.to_string()).boxed(),
        Shape::Any => any_json().boxed(),
        Shape::Desc => descriptor_json().boxed(),
        // A list of descriptors is also sent over its bound of 64.
        Shape::List(inner) if **inner == Shape::Desc => prop_oneof![
            8 => prop::collection::vec(descriptor_json(), 0..4),
            1 => prop::collection::vec(descriptor_json(), 60..70),
        ]
        .prop_map(|v| format!("[{}]", v.join(",")))
        .boxed(),
        Shape::List(inner) => prop::collection::vec(valid_value(inner), 0..4)
            .prop_map(|v| format!("[{}]", v.join(",")))
            .boxed(),
        Shape::Object(fields) => object_value(fields),
    }
}

/// A value no field of `shape` takes (a wrong JSON type, or a number out of range); `None` for
/// any JSON.
pub(crate) fn wrong_value(shape: &Shape) -> Option<BoxedStrategy<String>> {
    let not_string = prop_oneof![
        Just("7".to_owned()),
        Just("true".to_owned()),
        Just("[]".to_owned()),
        Just("{\"x\":1}".to_owned()),
        Just("-1.5e3".to_owned()),
    ];
    let not_number = prop_oneof![
        Just("-1".to_owned()),
        Just("1.5".to_owned()),
        Just("1e400".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("\"5\"".to_owned()),
        Just("true".to_owned()),
        Just("[1]".to_owned()),
        Just("{}".to_owned()),
    ];
    Some(match shape {
        Shape::Str | Shape::B64 | Shape::Enum(_) => not_string.boxed(),
        Shape::U64 { .. } => not_number.boxed(),
        Shape::Num => prop_oneof![
            Just("\"5\"".to_owned()),
            Just("true".to_owned()),
            Just("[1]".to_owned()),
            Just("{}".to_owned()),
        ]
        .boxed(),
        Shape::Bool => prop_oneof![Just("1".to_owned()), Just("\"yes\"".to_owned())].boxed(),
        Shape::Desc => prop_oneof![
            Just("7".to_owned()),
            Just("true".to_owned()),
            Just("[\"a=b\"]".to_owned()),
            Just("\"no equals sign\"".to_owned()),
            Just("{\"entries\":7}".to_owned()),
            Just("{\"entries\":[],\"extra\":1}".to_owned()),
        ]
        .boxed(),
        Shape::List(_) => prop_oneof![
            Just("7".to_owned()),
            Just("\"a=b\"".to_owned()),
            Just("{}".to_owned()),
            Just("[true]".to_owned()),
        ]
        .boxed(),
        Shape::Object(_) => prop_oneof![
            Just("7".to_owned()),
            Just("\"x\"".to_owned()),
            Just("[]".to_owned()),
        ]
        .boxed(),
        // Every JSON value is a payload.
        Shape::Any => return None,
    })
}

/// A value of `shape` that its route takes: the other fields of a body with a field at fault,
/// so that the fault is the first error.
pub(crate) fn clean_value(shape: &Shape) -> BoxedStrategy<String> {
    match shape {
        Shape::Str => Just("\"api\"".to_owned()).boxed(),
        Shape::B64 => Just("\"aGVsbG8=\"".to_owned()).boxed(),
        Shape::Enum(values) => Just(json_str(values.first().map_or("", String::as_str))).boxed(),
        Shape::U64 { .. } => (0u64..5).prop_map(|n| n.to_string()).boxed(),
        Shape::Num => Just("1.5".to_owned()).boxed(),
        Shape::Bool => any::<bool>().prop_map(|b| b.to_string()).boxed(),
        Shape::Any => Just("{\"n\":1}".to_owned()).boxed(),
        Shape::Desc => prop::sample::select(&["\"client=a\"", "\"biz=JOB, channel=x\""][..])
            .prop_map(str::to_owned)
            .boxed(),
        Shape::List(inner) => clean_value(inner).prop_map(|v| format!("[{v}]")).boxed(),
        Shape::Object(fields) => {
            let required: Vec<BoxedStrategy<String>> = fields
                .iter()
                .filter(|f| f.required)
                .map(|f| {
                    let name = json_str(&f.name);
                    clean_value(&f.shape)
                        .prop_map(move |v| format!("{name}:{v}"))
                        .boxed()
                })
                .collect();
            required
                .prop_map(|v| format!("{{{}}}", v.join(",")))
                .boxed()
        }
    }
}

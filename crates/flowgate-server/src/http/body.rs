//! Request bodies: JSON objects parsed by serde, an error naming the field at fault
//! (`descriptors[1].entries[0].key: invalid type: integer `7`, expected a string`); and the
//! descriptor, in either of its forms, that every route takes.

use std::fmt;

use flowgate::{Descriptor, Entry};
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, MapAccess, Visitor};

use super::ApiError;

/// Parses a JSON body, naming the field at fault.
pub(super) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // (serde would take a struct from an array too)
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at_root = path.is_empty() || path == ".";
        let detail = if (inner.is_syntax() || inner.is_eof()) && at_root {
            format!("the body is not valid JSON: {inner}")
        } else if inner.is_syntax() || inner.is_eof() {
            // (a number out of range, a truncated value: the field names where)
            format!("the body is not valid JSON: `{path}`: {inner}")
        } else if at_root {
            inner.to_string()
        } else {
            format!("`{path}`: {inner}")
        };
        ApiError::bad_request(detail)
    })
}

/// A descriptor as a body gives it: `"k=v, k2=v2"` text, or Envoy's
/// `{"entries": [{"key": …, "value": …}], "hits_addend": …}`.
#[derive(Debug)]
pub(super) struct DescriptorField(pub(super) Descriptor);

/// A descriptor's two forms, as the document describes them (read by hand, below, so that an
/// error names the form's own fault).
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "only its schema is used")]
enum DescriptorForms {
    /// `"key=value, key2=value2"`; an entry without `=` has an empty value.
    Text(String),
    /// Envoy's form.
    Envoy(EnvoyDescriptor),
}

impl utoipa::PartialSchema for DescriptorField {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <DescriptorForms as utoipa::PartialSchema>::schema()
    }
}

impl utoipa::ToSchema for DescriptorField {
    fn name() -> std::borrow::Cow<'static, str> {
        "Descriptor".into()
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <DescriptorForms as utoipa::ToSchema>::schemas(schemas);
    }
}

/// Envoy's form of a descriptor.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct EnvoyDescriptor {
    /// Its entries, in order.
    entries: Vec<EntryField>,
    /// This descriptor's own cost (0 only looks), over the request's.
    #[serde(default)]
    hits_addend: Option<u64>,
}

/// An entry of Envoy's form.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Entry)]
struct EntryField {
    /// Its key.
    key: String,
    /// Its value (none: empty).
    #[serde(default)]
    value: Option<String>,
}

impl<'de> Deserialize<'de> for DescriptorField {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // (by hand rather than an untagged enum, whose error names neither form's fault)
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = DescriptorField;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#""key=value, ..." text or {"entries": [{"key": ..., "value": ...}]}"#)
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<DescriptorField, E> {
                s.parse::<Descriptor>()
                    .map(DescriptorField)
                    .map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DescriptorField, A::Error> {
                let e = EnvoyDescriptor::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(DescriptorField(Descriptor {
                    entries: e
                        .entries
                        .into_iter()
                        .map(|x| Entry {
                            key: x.key,
                            value: x.value.unwrap_or_default(),
                        })
                        .collect(),
                    cost: e.hits_addend,
                }))
            }
        }
        d.deserialize_any(Either)
    }
}

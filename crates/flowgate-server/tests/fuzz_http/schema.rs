//! The HTTP API as the fuzz targets read it from the server's OpenAPI document: each JSON
//! route's body fields and what each holds.

use serde_json::Value;

/// What a body field holds, as the API's OpenAPI document describes it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Shape {
    /// A string.
    Str,
    /// Base64 text (`contentEncoding: base64`).
    B64,
    /// One of these strings.
    Enum(Vec<String>),
    /// An unsigned integer, at most `max` (a bounded wait: a case never long-polls).
    U64 { max: Option<u64> },
    /// A number.
    Num,
    /// A boolean.
    Bool,
    /// Any JSON (a job's payload).
    Any,
    /// A descriptor: text or Envoy's object (the document's `Descriptor`).
    Desc,
    /// A list.
    List(Box<Shape>),
    /// An object: its fields.
    Object(Vec<Field>),
}

/// A field of an object: its name, shape and whether it is required.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) shape: Shape,
    pub(crate) required: bool,
}

/// A JSON route of the document: its path, whether it takes the admin token, its body.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub(crate) path: String,
    pub(crate) admin: bool,
    pub(crate) fields: Vec<Field>,
}

/// `schema` with its `$ref` followed (the name of the component it named, if any).
pub(crate) fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> (&'a Value, Option<&'a str>) {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap_or("");
            (&doc["components"]["schemas"][name], Some(name))
        }
        None => (schema, None),
    }
}

impl Shape {
    /// The shape of `schema` in `doc`.
    fn of(doc: &Value, schema: &Value) -> Shape {
        let (s, name) = resolve(doc, schema);
        if name == Some("Descriptor") {
            return Shape::Desc;
        }
        // `T | null` (an `Option`): the shape of `T`.
        if let Some(any) = s["oneOf"].as_array().or(s["anyOf"].as_array()) {
            let not_null: Vec<&Value> = any.iter().filter(|x| x["type"] != "null").collect();
            if let [one] = not_null[..] {
                return Shape::of(doc, one);
            }
        }
        let ty = match &s["type"] {
            Value::Array(types) => types
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or(""),
            t => t.as_str().unwrap_or(""),
        };
        match ty {
            "string" if s["contentEncoding"] == "base64" => Shape::B64,
            "string" => match s["enum"].as_array() {
                Some(values) => Shape::Enum(
                    values
                        .iter()
                        .filter_map(|v| Some(v.as_str()?.to_owned()))
                        .collect(),
                ),
                None => Shape::Str,
            },
            "integer" => Shape::U64 {
                max: s["maximum"].as_u64(),
            },
            "number" => Shape::Num,
            "boolean" => Shape::Bool,
            "array" => Shape::List(Box::new(Shape::of(doc, &s["items"]))),
            "object" => Shape::Object(fields(doc, s)),
            _ => Shape::Any,
        }
    }
}

/// The fields of the object schema `s`.
pub(crate) fn fields(doc: &Value, s: &Value) -> Vec<Field> {
    let required: Vec<&str> = s["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = s["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, p)| Field {
            name: name.clone(),
            shape: Shape::of(doc, p),
            required: required.contains(&name.as_str()),
        })
        .collect()
}

/// Every operation of the document whose body is JSON only, with its body's fields: the
/// routes a generated body is sent to (`PUT /v1/rules`, which also reads TOML and YAML, has a
/// target of its own).
pub(crate) fn json_routes(doc: &Value) -> Vec<Route> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (_, op) in item.as_object().into_iter().flatten() {
            let content = &op["requestBody"]["content"];
            let Some(types) = content.as_object() else {
                continue;
            };
            if types.len() != 1 || !types.contains_key("application/json") {
                continue;
            }
            let (body, _) = resolve(doc, &content["application/json"]["schema"]);
            let admin = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s.get("admin").is_some());
            out.push(Route {
                path: path.clone(),
                admin,
                fields: fields(doc, body),
            });
        }
    }
    out
}

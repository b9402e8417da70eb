//! The HTTP fuzz target's readers of the OpenAPI document and generators of values.

pub(crate) mod schema;
pub(crate) mod values;

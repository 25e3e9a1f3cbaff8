//! API machinery shared by every resource: selectors, patches, content negotiation, name
//! validation, Table output, protobuf bodies and the structural schemas of custom resources.

pub mod gotime;
pub mod managed;
pub mod negotiation;
pub mod patch;
pub mod pretty;
pub mod protobuf;
pub mod restful;
pub mod schema;
pub mod selectors;
pub mod table;
pub mod validation;

/// A field of an object's `metadata`. (`Value::pointer` allocates two strings per path
/// segment, and this is read on every write's path.)
pub(crate) fn meta_field<'a>(
    object: &'a serde_json::Value,
    field: &str,
) -> Option<&'a serde_json::Value> {
    object.get("metadata")?.get(field)
}

/// The word Go's `encoding/json` uses for a JSON value's type in its unmarshal errors
/// (`cannot unmarshal string into Go struct field ...`).
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

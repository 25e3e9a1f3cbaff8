//! API machinery shared by every resource: selectors, patches, content negotiation, name
//! validation, Table output, protobuf bodies and the structural schemas of custom resources.

pub mod duplicates;
pub mod gojson_syntax;
pub mod gotime;
pub mod goyaml;
pub mod jsonpatch;
pub mod jsonpath;
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

/// Go's `%q` for a string, shared with the policy crate's messages.
pub(crate) use kubegate_policy::quote::go_quote;

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

/// A copy of `value` whose objects have their keys sorted (serde_json keeps insertion
/// order), as Go's `json.Marshal` writes a map.
pub(crate) fn sorted_keys(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            serde_json::Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_keys(&map[k])))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sorted_keys).collect())
        }
        other => other.clone(),
    }
}

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

/// Go's `%q` for a string (`strconv.Quote`): printable characters kept, others escaped.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

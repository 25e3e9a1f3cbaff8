//! Field-error helpers beyond those in [`crate::status`], worded as apimachinery's
//! `field.Error` renders them (`Invalid value: 80: ...`, `Too long: ...`, `Too many: ...`),
//! including how Go prints non-string bad values (`80`, `[]string{"a"}`).

use serde_json::Value;

use crate::status::{field_invalid, StatusCause};

/// `Invalid value` with a value already rendered as Go would print it (numbers bare,
/// strings quoted, slices as `[]string{...}`).
pub(crate) fn invalid_raw(field: &str, rendered: &str, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {rendered}: {detail}"),
        field: field.into(),
    }
}

/// One `Invalid value` cause per message from a `machinery::validation` check.
pub(crate) fn invalid_each(field: &str, value: &str, messages: Vec<String>) -> Vec<StatusCause> {
    messages
        .iter()
        .map(|m| field_invalid(field, value, m))
        .collect()
}

/// `field.TooLong(path, "", max)`: the value itself is never echoed.
pub(crate) fn too_long(field: &str, max: usize) -> StatusCause {
    // kube 1.33's words: plural whatever the number (1.34 says "1 byte").
    StatusCause {
        reason: "FieldValueTooLong".into(),
        message: format!("Too long: may not be more than {max} bytes"),
        field: field.into(),
    }
}

/// `field.TooMany(path, actual, max)`.
pub(crate) fn too_many(field: &str, actual: usize, max: usize) -> StatusCause {
    // kube 1.33's words: plural whatever the number (1.34 says "1 item").
    StatusCause {
        reason: "FieldValueTooMany".into(),
        message: format!("Too many: {actual}: must have at most {max} items"),
        field: field.into(),
    }
}

/// `ValidateImmutableField`: `Invalid value: <new>: field is immutable` when they differ.
pub(crate) fn immutable(
    field: &str,
    new: Option<&Value>,
    old: Option<&Value>,
) -> Option<StatusCause> {
    let normalize = |v: Option<&Value>| match v {
        Some(Value::Null) | None => None,
        Some(other) => Some(other.clone()),
    };
    if normalize(new) == normalize(old) {
        return None;
    }
    Some(invalid_raw(field, &go_value(new), "field is immutable"))
}

/// A JSON value printed the way kube's field errors print Go values: strings quoted,
/// numbers and booleans bare, unset as `null`, anything structured as compact JSON (Go would
/// print its struct syntax, which JSON users cannot act on anyway).
pub(crate) fn go_value(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "null".into(),
        Some(Value::String(s)) => format!("\"{s}\""),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(other) => other.to_string(),
    }
}

/// A Go `[]string` as `%#v` prints it: `[]string{"10.96.0.10"}`.
pub(crate) fn go_string_slice(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// `field.Path.Key(k)`: `data[tls.crt]` (no quotes, as kube prints map keys).
pub(crate) fn key_path(base: &str, key: &str) -> String {
    format!("{base}[{key}]")
}

/// `field.Path.Index(i)`: `spec.ports[1]`.
pub(crate) fn index_path(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_field_error() {
        assert_eq!(
            too_long("data", 1048576).message,
            "Too long: may not be more than 1048576 bytes"
        );
        assert_eq!(
            too_many("endpoints", 1001, 1000).message,
            "Too many: 1001: must have at most 1000 items"
        );
        assert_eq!(go_string_slice(&["10.0.0.1"]), "[]string{\"10.0.0.1\"}");
        let c = immutable(
            "type",
            Some(&json!("Opaque")),
            Some(&json!("kubernetes.io/tls")),
        );
        assert_eq!(
            c.map(|c| c.message),
            Some("Invalid value: \"Opaque\": field is immutable".into())
        );
        assert!(immutable("x", None, Some(&Value::Null)).is_none());
        assert_eq!(key_path("data", "tls.crt"), "data[tls.crt]");
    }
}

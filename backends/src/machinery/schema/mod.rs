//! Structural schemas for custom resources, as apiextensions-apiserver uses them: read a CRD
//! version's `openAPIV3Schema` once ([`Schema::from_json`]), check it is structural
//! ([`validate_structural`]) and that its defaults are sound ([`validate_defaults`]), then for
//! each custom resource:
//!
//! - [`apply_defaults`] on decode (request bodies and stored objects alike),
//! - [`prune`] unknown fields (the returned paths feed `fieldValidation=Warn/Strict`),
//! - [`validate`] against the schema, with kube's field paths and messages.
//!
//! Objects under `x-kubernetes-embedded-resource` are also checked and cleaned as kube does
//! on decode ([`decode_request`], [`coerce_embedded`]) and validated as resources (their
//! `apiVersion`, `kind` and ObjectMeta `metadata`, part of [`validate`]).
//!
//! Pure functions on `serde_json::Value`; the registry decides when to call them. CEL rules
//! (`x-kubernetes-validations`, carried in [`Schema::x_validations`]) are evaluated by
//! [`validate_cel`] and compile-checked for CRDs by [`compile_errors`].

pub(crate) mod cel;
mod defaulting;
mod embedded;
mod formats;
mod objectmeta;
pub(crate) use objectmeta::go_unstructured_type;
mod pattern;
mod pruning;
mod ratcheting;
mod structural;
mod structural_validation;
mod validation;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::status::StatusCause;

pub use self::cel::{compile_errors, field_path_valid, validate_cel, validate_cel_value};
pub use defaulting::{
    apply_defaults, default, prune_non_nullable_nulls_without_defaults, validate_defaults,
};
pub use embedded::{
    coerce_embedded, embedded_decode_error, validate_embedded, validate_managed_fields,
};
pub use formats::{effective_format, format_matches};
pub use pattern::Pattern;
pub use pruning::prune;
pub(crate) use ratcheting::unchanged_at;
pub use structural::{AdditionalProperties, Schema};
pub use structural_validation::validate_structural;
pub use validation::{validate, validate_value};

type Causes = Vec<StatusCause>;

/// What kube's `unstructuredSchemaCoercer` does to a custom resource decoded from a request:
/// unknown fields pruned, `null`s the schema neither allows nor defaults dropped, embedded
/// resources coerced. Returns the paths of the unknown fields dropped (pruned ones first,
/// then those of embedded metadata), or the error kube fails the decode with (a 400) when
/// an embedded resource does not decode.
pub fn decode_request(object: &mut Value, schema: &Schema) -> Result<Vec<String>, String> {
    // The root `metadata` goes through Go's ObjectMeta first (kube's
    // `GetObjectMetaWithOptions`): its unknown fields are reported first and dropped, and
    // it is written back as ObjectMeta encodes; one that does not decode fails the decode.
    let mut unknown = decode_root_metadata(object)?;
    unknown.extend(prune(object, Some(schema), true));
    prune_non_nullable_nulls_without_defaults(object, Some(schema));
    if let Some(error) = embedded_decode_error(object, schema) {
        return Err(error);
    }
    unknown.extend(coerce_embedded(object, schema));
    Ok(unknown)
}

/// The root `metadata` of a custom resource as kube decodes it into ObjectMeta: rewritten in
/// ObjectMeta's encoding, with the paths (`metadata.x`) of the fields ObjectMeta does not have.
fn decode_root_metadata(object: &mut Value) -> Result<Vec<String>, String> {
    let Some(meta) = object.get_mut("metadata") else {
        return Ok(Vec::new());
    };
    let decoded = objectmeta::decode(meta)?;
    *meta = decoded.meta;
    Ok(decoded
        .unknown
        .into_iter()
        .map(|path| format!("metadata.{path}"))
        .collect())
}

/// The error kube's decode of a custom resource fails with: its root `metadata` or an
/// embedded resource that does not decode.
pub fn decode_error(object: &Value, schema: &Schema) -> Option<String> {
    if let Some(meta) = object.get("metadata") {
        if let Err(error) = objectmeta::decode(meta) {
            return Some(error);
        }
    }
    embedded_decode_error(object, schema)
}

/// `field.Path.Child`: `spec.names`.
pub(crate) fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

/// `field.Path.Key`: `properties[spec]`.
pub(crate) fn key(base: &str, k: &str) -> String {
    format!("{base}[{k}]")
}

/// `field.Path.Index`: `versions[0]`.
pub(crate) fn index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

/// A cause as `field.Error.Error()` renders it (`<field>: <message>`), the key kube sorts
/// structural-schema errors by.
pub(crate) fn render(cause: &StatusCause) -> String {
    format!("{}: {}", cause.field, cause.message)
}

/// A value as `field.Error` prints it: strings quoted, numbers and booleans bare, `null`,
/// anything structured as compact JSON.
pub(crate) fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::String(s) => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Bool(b) => b.to_string(),
        // field.ErrorBody's fallback for what is neither a string nor a number: `%#v`.
        other => go_sharp_v(other),
    }
}

/// Go's `%#v` of a value decoded from JSON into `interface{}`: `map[string]interface
/// {}{"a":1, "b":"x"}` (keys sorted), `[]interface {}{"a", 1}`, `interface {}(nil)` inside
/// them.
pub(crate) fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let shown: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| {
                    format!(
                        "{}:{}",
                        go_sharp_v(&Value::String(k.clone())),
                        go_sharp_v(v)
                    )
                })
                .collect();
            format!("map[string]interface {{}}{{{}}}", shown.join(", "))
        }
    }
}

/// A float64 as Go's `%v` prints it: shortest digits, exponent form below 1e-4 and from
/// 1e21 (`1e+21`, `1e-05`).
pub(crate) fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let abs = f.abs();
    if f == 0.0 || (1e-4..1e21).contains(&abs) {
        return format!("{f}");
    }
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let (sign, digits) = match exp.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exp),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}

/// `field.Invalid` with a value already rendered.
pub(crate) fn invalid_raw(field: &str, rendered: &str, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {rendered}: {detail}"),
        field: field.into(),
    }
}

/// `field.TooLong(path, "", max)`.
pub(crate) fn too_long(field: &str, max: i64) -> StatusCause {
    // kube 1.33's words: plural whatever the number (1.34 says "1 byte").
    StatusCause {
        reason: "FieldValueTooLong".into(),
        message: format!("Too long: may not be more than {max} bytes"),
        field: field.into(),
    }
}

/// `field.TooMany(path, actual, max)`.
pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> StatusCause {
    // kube 1.33's words: plural whatever the number (1.34 says "1 item").
    StatusCause {
        reason: "FieldValueTooMany".into(),
        message: format!("Too many: {actual}: must have at most {max} items"),
        field: field.into(),
    }
}

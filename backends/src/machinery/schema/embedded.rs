//! Objects under `x-kubernetes-embedded-resource: true` schema nodes (at any depth: properties,
//! `additionalProperties`, `items`), as apiextensions-apiserver's `schema/objectmeta` package
//! treats them:
//!
//! - [`embedded_decode_error`] and [`coerce_embedded`] are kube's `CoerceWithOptions` on
//!   decode: `apiVersion` and `kind` must be strings and `metadata` must decode as an
//!   ObjectMeta (else the request is a 400), then `metadata` is written back as ObjectMeta
//!   encodes, which drops the fields ObjectMeta does not have (reported as unknown fields,
//!   `spec.template.metadata.foo`) and empty values;
//! - [`validate_embedded`] is kube's `objectmeta.Validate` (`validateEmbeddedResource`):
//!   `apiVersion` and `kind` required, `apiVersion` a group/version, `kind` DNS-1035 in any
//!   case, and `metadata` validated like an object's (names as path segments, labels,
//!   annotations, owner references, finalizers, managed fields).
//!
//! Structural pruning keeps `apiVersion`, `kind` and `metadata` of embedded resources whole
//! (see `pruning.rs`); this is what cleans their metadata instead.

use std::ops::ControlFlow;

use serde_json::{Map, Value};

use super::objectmeta;
use super::structural::Schema;
use super::{child, go_value, invalid_raw, too_long, Causes};
use crate::machinery::validation::{is_dns1035_label, validate_object_meta, NameRule};
use crate::status::field_required;

/// kube's `FieldManagerMaxLength`.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;
/// kube's `MaxSubresourceNameLength`.
const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;

/// A bad value as `field.Error` prints it; a Go `nil` becomes the string `"null"`.
fn rendered(value: &Value) -> String {
    match value {
        Value::Null => "\"null\"".into(),
        other => go_value(other),
    }
}

/// Appends `.name` (a property) to `path`; returns the length to truncate back to.
fn push_child(path: &mut String, name: &str) -> usize {
    let len = path.len();
    if len > 0 {
        path.push('.');
    }
    path.push_str(name);
    len
}

/// Appends `[key]` (an `additionalProperties` entry, kube's `Path.Key`).
fn push_key(path: &mut String, key: &str) -> usize {
    let len = path.len();
    path.push('[');
    path.push_str(key);
    path.push(']');
    len
}

fn push_index(path: &mut String, i: usize) -> usize {
    push_key(path, &i.to_string())
}

/// The schema of an object's field and its path, as kube's `objectmeta` walks descend: a
/// property by `.name`, an `additionalProperties` entry by `[name]`; `None` when neither
/// describes it.
fn field_schema<'s>(s: &'s Schema, k: &str, path: &mut String) -> Option<(&'s Schema, usize)> {
    if let Some(p) = s.properties.get(k) {
        return Some((p, push_child(path, k)));
    }
    s.additional_properties_schema()
        .map(|a| (a, push_key(path, k)))
}

/// Whether any node of `s` is an embedded resource: most schemas have none, and then the
/// object is not walked at all (these checks run on every write and every stored read).
fn contains_embedded(s: &Schema) -> bool {
    s.x_embedded_resource
        || s.properties.values().any(contains_embedded)
        || s.items.as_deref().is_some_and(contains_embedded)
        || s.additional_properties_schema()
            .is_some_and(contains_embedded)
}

/// What [`visit`] calls for each embedded resource: its path and fields.
type VisitEmbedded<'a, 'v, B> = dyn FnMut(&str, &'v Map<String, Value>) -> ControlFlow<B> + 'a;

/// Calls `visit_embedded` with the path and fields of every object `s` marks as an embedded
/// resource, parents before children; stops when it breaks.
fn visit<'v, B>(
    value: &'v Value,
    s: &Schema,
    path: &mut String,
    visit_embedded: &mut VisitEmbedded<'_, 'v, B>,
) -> ControlFlow<B> {
    match value {
        Value::Object(map) => {
            if s.x_embedded_resource {
                visit_embedded(path, map)?;
            }
            for (k, v) in map {
                if !(v.is_object() || v.is_array()) {
                    continue;
                }
                let Some((schema, len)) = field_schema(s, k, path) else {
                    continue;
                };
                let flow = visit(v, schema, path, visit_embedded);
                path.truncate(len);
                flow?;
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else {
                return ControlFlow::Continue(());
            };
            for (i, item) in items.iter().enumerate() {
                if !(item.is_object() || item.is_array()) {
                    continue;
                }
                let len = push_index(path, i);
                let flow = visit(item, item_schema, path, visit_embedded);
                path.truncate(len);
                flow?;
            }
        }
        _ => {}
    }
    ControlFlow::Continue(())
}

/// The error kube's `CoerceWithOptions` (without `DropInvalidFields`) fails a decoded custom
/// resource with, rendered as `field.Error` prints (`spec.template.kind: Invalid value: 5:
/// must be a string`); `None` when every embedded resource decodes.
pub fn embedded_decode_error(object: &Value, schema: &Schema) -> Option<String> {
    if !contains_embedded(schema) {
        return None;
    }
    let mut path = String::new();
    let flow = visit(object, schema, &mut path, &mut |at, fields| {
        for (k, v) in fields {
            match k.as_str() {
                "apiVersion" | "kind" if !v.is_string() => {
                    return ControlFlow::Break(format!(
                        "{}: Invalid value: {}: must be a string",
                        child(at, k),
                        rendered(v)
                    ));
                }
                "metadata" => {
                    if let Err(e) = objectmeta::decode(v) {
                        return ControlFlow::Break(format!(
                            "{}: Invalid value: {}: {e}",
                            child(at, "metadata"),
                            rendered(v)
                        ));
                    }
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    });
    match flow {
        ControlFlow::Break(e) => Some(e),
        ControlFlow::Continue(()) => None,
    }
}

/// kube's `CoerceWithOptions` with `DropInvalidFields` (its decode of stored objects; after
/// [`embedded_decode_error`] found nothing it is also its decode of requests): in every
/// embedded resource a non-string `apiVersion` or `kind` goes and `metadata` is rewritten as
/// ObjectMeta encodes it. Returns the paths of the metadata fields dropped as unknown
/// (`spec.template.metadata.foo`), sorted.
pub fn coerce_embedded(object: &mut Value, schema: &Schema) -> Vec<String> {
    if !contains_embedded(schema) {
        return Vec::new();
    }
    let mut unknown = Vec::new();
    let mut path = String::new();
    coerce_value(object, schema, &mut path, &mut unknown);
    unknown.sort();
    unknown
}

fn coerce_value(value: &mut Value, s: &Schema, path: &mut String, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if s.x_embedded_resource {
                coerce_resource(map, path, unknown);
            }
            for (k, v) in map.iter_mut() {
                if !(v.is_object() || v.is_array()) {
                    continue;
                }
                let Some((schema, len)) = field_schema(s, k, path) else {
                    continue;
                };
                coerce_value(v, schema, path, unknown);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else {
                return;
            };
            for (i, item) in items.iter_mut().enumerate() {
                if !(item.is_object() || item.is_array()) {
                    continue;
                }
                let len = push_index(path, i);
                coerce_value(item, item_schema, path, unknown);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn coerce_resource(map: &mut Map<String, Value>, path: &str, unknown: &mut Vec<String>) {
    for k in ["apiVersion", "kind"] {
        if map.get(k).is_some_and(|v| !v.is_string()) {
            map.remove(k);
        }
    }
    let Some(meta) = map.get_mut("metadata") else {
        return;
    };
    // Metadata that is no object at all is left as it is (kube passes it through).
    if let Ok(decoded) = objectmeta::decode_dropping_malformed(meta) {
        let prefix = child(path, "metadata");
        unknown.extend(decoded.unknown.iter().map(|f| format!("{prefix}.{f}")));
        *meta = decoded.meta;
    }
}

/// kube's `objectmeta.Validate(nil, object, schema, false)`: every embedded resource's
/// `apiVersion`, `kind` and `metadata`.
pub fn validate_embedded(schema: &Schema, object: &Value) -> Causes {
    if !contains_embedded(schema) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    let mut path = String::new();
    let _ = visit::<()>(object, schema, &mut path, &mut |at, fields| {
        validate_resource(at, fields, &mut causes);
        ControlFlow::Continue(())
    });
    causes
}

/// kube's `validateEmbeddedResource`.
fn validate_resource(path: &str, fields: &Map<String, Value>, causes: &mut Causes) {
    for k in ["apiVersion", "kind"] {
        if !fields.contains_key(k) {
            causes.push(field_required(&child(path, k), "must not be empty"));
        }
    }
    for k in ["apiVersion", "kind", "metadata"] {
        let Some(v) = fields.get(k) else {
            continue;
        };
        let at = child(path, k);
        match (k, v) {
            ("apiVersion" | "kind", Value::String(s)) if s.is_empty() => {
                causes.push(invalid_raw(&at, "\"\"", "must not be empty"));
            }
            ("apiVersion", Value::String(s)) => {
                // `schema.ParseGroupVersion`: `version` or `group/version`.
                if s.matches('/').count() > 1 {
                    causes.push(invalid_raw(
                        &at,
                        &go_value(v),
                        &format!("unexpected GroupVersion string: {s}"),
                    ));
                }
            }
            ("kind", Value::String(s)) => {
                let errs = is_dns1035_label(&s.to_lowercase());
                if !errs.is_empty() {
                    causes.push(invalid_raw(
                        &at,
                        &go_value(v),
                        &format!(
                            "may have mixed case, but should otherwise match: {}",
                            errs.join(",")
                        ),
                    ));
                }
            }
            ("apiVersion" | "kind", other) => {
                causes.push(invalid_raw(&at, &rendered(other), "must be a string"));
            }
            _ => validate_metadata(&at, v, causes),
        }
    }
}

/// kube validates embedded metadata as ObjectMeta on create, with names as path segments, a
/// namespace only when one is set, and a stand-in name when there is none (embedded
/// resources need not be named).
fn validate_metadata(path: &str, value: &Value, causes: &mut Causes) {
    let mut meta = match objectmeta::decode(value) {
        Ok(decoded) => decoded.meta,
        Err(e) => {
            causes.push(invalid_raw(path, &rendered(value), &e));
            return;
        }
    };
    let Some(fields) = meta.as_object_mut() else {
        return;
    };
    if fields
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        fields.insert("name".into(), Value::String("fakename".into()));
    }
    let namespaced = fields
        .get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    // The shared ObjectMeta validation reports under `metadata`; here it sits at `path`.
    for mut cause in validate_object_meta(&meta, namespaced, NameRule::PathSegment) {
        if let Some(rest) = cause.field.strip_prefix("metadata") {
            cause.field = format!("{path}{rest}");
        }
        causes.push(cause);
    }
    validate_managed_fields(path, meta.get("managedFields"), causes);
}

/// kube's `ValidateManagedFields` of the `managedFields` under `path` (`metadata`), as its
/// ObjectMeta validation runs it on every object written.
pub fn validate_managed_fields(path: &str, entries: Option<&Value>, causes: &mut Causes) {
    let Some(entries) = entries.and_then(Value::as_array) else {
        return;
    };
    let managed = child(path, "managedFields");
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("{managed}[{i}]");
        let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let operation = text("operation");
        if !matches!(operation, "Apply" | "Update") {
            causes.push(invalid_raw(
                &child(&at, "operation"),
                &go_value(&Value::String(operation.into())),
                "must be `Apply` or `Update`",
            ));
        }
        let fields_type = text("fieldsType");
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            causes.push(invalid_raw(
                &child(&at, "fieldsType"),
                &go_value(&Value::String(fields_type.into())),
                "must be `FieldsV1`",
            ));
        }
        let manager = text("manager");
        let manager_path = child(&at, "manager");
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            causes.push(too_long(&manager_path, FIELD_MANAGER_MAX_LENGTH as i64));
        }
        for (position, c) in manager.char_indices() {
            if !is_go_printable(c) {
                causes.push(invalid_raw(
                    &manager_path,
                    &go_value(&Value::String(manager.into())),
                    &format!(
                        "invalid character U+{:04X} (at position {position})",
                        u32::from(c)
                    ),
                ));
            }
        }
        if text("subresource").len() > MAX_SUBRESOURCE_NAME_LENGTH {
            causes.push(too_long(
                &child(&at, "subresource"),
                MAX_SUBRESOURCE_NAME_LENGTH as i64,
            ));
        }
    }
}

/// Go's `unicode.IsPrint`, near enough: no control characters and no spaces but U+0020.
fn is_go_printable(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace())
}

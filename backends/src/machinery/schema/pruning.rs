//! Dropping the fields a schema does not declare, as kube's `structuralpruning` does on every
//! write and read of a custom resource: object fields that are neither a property nor covered
//! by `additionalProperties` go, except below `x-kubernetes-preserve-unknown-fields: true`
//! (where only the declared parts are pruned further). `apiVersion`, `kind` and `metadata` of
//! the resource root and of every `x-kubernetes-embedded-resource` are never pruned here (kube
//! coerces metadata separately: `embedded.rs` for embedded resources).

use serde_json::Value;

use super::structural::{AdditionalProperties, Schema};

const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// kube's `PruneWithOptions`: prunes `object` in place and returns the paths of the fields it
/// dropped (`spec.foo`, `spec.items[0].bar`), sorted, for `fieldValidation=Warn/Strict`.
/// `is_resource_root` treats `schema` as an embedded resource (the object root).
pub fn prune(object: &mut Value, schema: Option<&Schema>, is_resource_root: bool) -> Vec<String> {
    let empty;
    let schema = match schema {
        Some(s) => Some(s),
        // A resource root without a schema still keeps its apiVersion, kind and metadata.
        None if is_resource_root => {
            empty = Schema::default();
            Some(&empty)
        }
        None => None,
    };
    let mut unknown = Vec::new();
    // Runs on every write and read of a custom resource: the schema is not copied to mark the
    // root, and a field's path is only spelled out when the field is dropped.
    let mut path = String::new();
    prune_value(object, schema, is_resource_root, &mut path, &mut unknown);
    unknown.sort();
    unknown
}

/// Appends `.key` (or `key` at the root) to `path`; returns the length to truncate back to.
fn push_key(path: &mut String, key: &str) -> usize {
    let len = path.len();
    if len > 0 {
        path.push('.');
    }
    path.push_str(key);
    len
}

fn push_index(path: &mut String, i: usize) -> usize {
    use std::fmt::Write;
    let len = path.len();
    // Writing to a `String` cannot fail.
    let _ = write!(path, "[{i}]");
    len
}

fn unknown_field(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The schema `additionalProperties` gives a field (`None` when it is a boolean: kube then
/// prunes everything below).
fn additional(s: &Schema) -> Option<Option<&Schema>> {
    match &s.additional_properties {
        Some(AdditionalProperties::Schema(a)) => Some(Some(a)),
        Some(AdditionalProperties::Allows(_)) => Some(None),
        None => None,
    }
}

/// `root`: `value` is the resource root, pruned as an embedded resource whatever `s` says.
fn prune_value(
    value: &mut Value,
    s: Option<&Schema>,
    root: bool,
    path: &mut String,
    unknown: &mut Vec<String>,
) {
    if let Some(s) = s.filter(|s| s.preserves_unknown_fields()) {
        skip_prune(value, s, root, path, unknown);
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(s) = s else {
                for k in map.keys() {
                    unknown.push(unknown_field(path, k));
                }
                map.clear();
                return;
            };
            let embedded = root || s.x_embedded_resource;
            // What becomes of a field: kept as is (resource metadata), pruned by a schema, or
            // dropped.
            let field = |k: &str| -> Option<Option<Option<&Schema>>> {
                if embedded && META_FIELDS.contains(&k) {
                    return Some(None);
                }
                match s.properties.get(k) {
                    Some(p) => Some(Some(Some(p))),
                    None => additional(s).map(Some),
                }
            };
            // Most objects have no unknown field: they are walked without `retain`, which
            // rebuilds an order-preserving map's index.
            let mut any_dropped = false;
            for (k, v) in map.iter_mut() {
                match field(k) {
                    Some(Some(schema)) => {
                        let len = push_key(path, k);
                        prune_value(v, schema, false, path, unknown);
                        path.truncate(len);
                    }
                    Some(None) => {}
                    None => any_dropped = true,
                }
            }
            if any_dropped {
                map.retain(|k, _| {
                    if field(k).is_some() {
                        return true;
                    }
                    if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                        unknown.push(unknown_field(path, k));
                    }
                    false
                });
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                let len = push_index(path, i);
                prune_value(item, item_schema, false, path, unknown);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: unknown fields stay, declared ones are
/// pruned by their own schema.
fn skip_prune(
    value: &mut Value,
    s: &Schema,
    root: bool,
    path: &mut String,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let embedded = root || s.x_embedded_resource;
            for (k, v) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let schema = match s.properties.get(k) {
                    Some(p) => Some(p),
                    None => match additional(s) {
                        Some(a) => a,
                        None => continue,
                    },
                };
                let len = push_key(path, k);
                prune_value(v, schema, false, path, unknown);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = push_index(path, i);
                    skip_prune(item, item_schema, false, path, unknown);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

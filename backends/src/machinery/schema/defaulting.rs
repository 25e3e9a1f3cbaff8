//! Defaults from a CRD schema, as kube's `structuraldefaulting` applies them to custom
//! resources when they are decoded (from a request and from storage, so old objects get new
//! defaults on read): a missing field with a `default` gets it, and so does a `null` where
//! the field is not `nullable`; a non-nullable `null` without a default is dropped first.
//! Also kube's check of the defaults themselves when a CRD is written (`ValidateDefaults`).

use serde_json::Value;

use super::pruning::prune;
use super::structural::Schema;
use super::validation::validate_value;
use super::{child, go_value, invalid_raw, key, Causes};

fn non_nullable_null(value: &Value, s: Option<&Schema>) -> bool {
    value.is_null() && s.is_some_and(|s| !s.nullable)
}

/// kube's `Default(x, s)`: fills in defaults below `value`, recursively.
pub fn default(value: &mut Value, s: &Schema) {
    match value {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else {
                    continue;
                };
                let missing = match map.get(k) {
                    None => true,
                    Some(v) => non_nullable_null(v, Some(prop)),
                };
                if missing {
                    map.insert(k.clone(), d.clone());
                }
            }
            let additional = s.additional_properties_schema();
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    default(v, prop);
                } else if let Some(a) = additional {
                    if non_nullable_null(v, Some(a)) {
                        *v = a.default.clone().unwrap_or(Value::Null);
                    }
                    default(v, a);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else {
                return;
            };
            for item in items.iter_mut() {
                if non_nullable_null(item, Some(item_schema)) {
                    *item = item_schema.default.clone().unwrap_or(Value::Null);
                }
                default(item, item_schema);
            }
        }
        _ => {}
    }
}

/// kube's `PruneNonNullableNullsWithoutDefaults`: drops object fields that are `null` where
/// the schema says neither `nullable` nor `default`.
pub fn prune_non_nullable_nulls_without_defaults(value: &mut Value, s: Option<&Schema>) {
    match value {
        Value::Object(map) => {
            let drop = |k: &str, v: &Value| {
                v.is_null()
                    && s.and_then(|s| s.field(k))
                        .is_some_and(|f| !f.nullable && f.default.is_none())
            };
            // `retain` only when something goes: it rebuilds an order-preserving map's index.
            if map.iter().any(|(k, v)| drop(k, v)) {
                map.retain(|k, v| !drop(k, v));
            }
            for (k, v) in map.iter_mut() {
                if v.is_object() || v.is_array() {
                    prune_non_nullable_nulls_without_defaults(v, s.and_then(|s| s.field(k)));
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for item in items.iter_mut() {
                prune_non_nullable_nulls_without_defaults(item, item_schema);
            }
        }
        _ => {}
    }
}

/// What kube does to a custom resource on decode: nulls without defaults dropped, then
/// defaults applied.
pub fn apply_defaults(object: &mut Value, s: &Schema) {
    prune_non_nullable_nulls_without_defaults(object, Some(s));
    default(object, s);
}

/// kube's `ValidateDefaults` for a CRD schema at `path`: every `default` must be pruned
/// already (`must not have unknown fields`) and valid against its own schema; defaults inside
/// `metadata`, `apiVersion` and `kind` of a resource are checked against their schema only.
pub fn validate_defaults(path: &str, s: &Schema, require_pruned: bool) -> Causes {
    let mut root = s.clone();
    root.x_embedded_resource = true;
    let mut errs = Vec::new();
    walk(path, &root, false, require_pruned, &mut errs);
    errs
}

/// The node's CEL rules on its default (kube validates a default that passes its schema with
/// them): as an update to itself, then, with CRD validation ratcheting, as a value set where
/// there was none (what `optionalOldSelf` rules see on a create).
fn default_rule_errors(default_path: &str, s: &Schema, d: &Value) -> Causes {
    // A resource root is the schema's top (where defaults are forbidden) or an embedded
    // resource.
    let is_root = s.x_embedded_resource;
    let mut errs = super::validate_cel_value(s, d, Some(d), is_root);
    if errs.is_empty() {
        errs = super::validate_cel_value(s, d, None, is_root);
    }
    for cause in &mut errs {
        cause.field = if cause.field.is_empty() || cause.field == "<nil>" {
            default_path.to_string()
        } else if cause.field.starts_with('[') {
            format!("{default_path}{}", cause.field)
        } else {
            format!("{default_path}.{}", cause.field)
        };
    }
    errs
}

fn walk(path: &str, s: &Schema, inside_meta: bool, require_pruned: bool, errs: &mut Causes) {
    let inside_meta = inside_meta && !s.x_embedded_resource;
    if let Some(d) = &s.default {
        let default_path = child(path, "default");
        if !inside_meta && require_pruned {
            let mut pruned = d.clone();
            prune(&mut pruned, Some(s), s.x_embedded_resource);
            if &pruned != d {
                errs.push(invalid_raw(
                    &default_path,
                    &go_value(d),
                    "must not have unknown fields",
                ));
            }
        }
        let schema_errors = validate_value(Some(&default_path), s, d);
        if schema_errors.is_empty() {
            errs.extend(default_rule_errors(&default_path, s, d));
        } else {
            errs.extend(schema_errors);
        }
    }
    if let Some(items) = &s.items {
        walk(
            &child(path, "items"),
            items,
            inside_meta,
            require_pruned,
            errs,
        );
    }
    for (k, p) in &s.properties {
        let meta =
            s.x_embedded_resource && matches!(k.as_str(), "metadata" | "apiVersion" | "kind");
        walk(
            &key(&child(path, "properties"), k),
            p,
            inside_meta || meta,
            require_pruned,
            errs,
        );
    }
}

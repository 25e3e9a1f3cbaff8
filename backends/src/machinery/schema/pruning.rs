//! Dropping the fields a schema does not declare, as kube's `structuralpruning` does on every
//! write and read of a custom resource: object fields that are neither a property nor covered
//! by `additionalProperties` go, except below `x-kubernetes-preserve-unknown-fields: true`
//! (where only the declared parts are pruned further). `apiVersion`, `kind` and `metadata` of
//! the resource root and of every `x-kubernetes-embedded-resource` are never pruned here (kube
//! coerces metadata separately).

use serde_json::Value;

use super::structural::{AdditionalProperties, Schema};

const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// kube's `PruneWithOptions`: prunes `object` in place and returns the paths of the fields it
/// dropped (`spec.foo`, `spec.items[0].bar`), sorted, for `fieldValidation=Warn/Strict`.
/// `is_resource_root` treats `schema` as an embedded resource (the object root).
pub fn prune(object: &mut Value, schema: Option<&Schema>, is_resource_root: bool) -> Vec<String> {
    let root;
    let schema = if is_resource_root {
        let mut s = schema.cloned().unwrap_or_default();
        s.x_embedded_resource = true;
        root = s;
        Some(&root)
    } else {
        schema
    };
    let mut unknown = Vec::new();
    prune_value(object, schema, "", &mut unknown);
    unknown.sort();
    unknown
}

fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
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

fn prune_value(value: &mut Value, s: Option<&Schema>, path: &str, unknown: &mut Vec<String>) {
    if let Some(s) = s.filter(|s| s.preserves_unknown_fields()) {
        skip_prune(value, s, path, unknown);
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(s) = s else {
                for k in map.keys() {
                    unknown.push(join_key(path, k));
                }
                map.clear();
                return;
            };
            map.retain(|k, v| {
                if s.x_embedded_resource && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                if let Some(p) = s.properties.get(k) {
                    prune_value(v, Some(p), &join_key(path, k), unknown);
                    return true;
                }
                if let Some(a) = additional(s) {
                    prune_value(v, a, &join_key(path, k), unknown);
                    return true;
                }
                if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                    unknown.push(join_key(path, k));
                }
                false
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(item, item_schema, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: unknown fields stay, declared ones are
/// pruned by their own schema.
fn skip_prune(value: &mut Value, s: &Schema, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if s.x_embedded_resource && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(p) = s.properties.get(k) {
                    prune_value(v, Some(p), &join_key(path, k), unknown);
                } else if let Some(a) = additional(s) {
                    prune_value(v, a, &join_key(path, k), unknown);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_schema, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

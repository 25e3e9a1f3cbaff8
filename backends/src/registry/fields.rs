//! Unknown fields: detection for `fieldValidation=Strict|Warn` (every field the kind's
//! OpenAPI schema does not declare, with kube's dotted paths such as `spec.ports[0].foo`)
//! and pruning, because kube's typed decoding drops such fields before anything is stored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

/// A kind's schema with every definition it references.
struct Schema {
    root: Value,
    defs: Map<String, Value>,
}

/// Schemas are generated once per definition and kept.
fn schema(definition: &str) -> Option<Arc<Schema>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<Schema>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().unwrap_or_else(|p| p.into_inner());
    guard
        .entry(definition.to_string())
        .or_insert_with(|| {
            crate::openapi::schema_for_definition(definition)
                .map(|(root, defs)| Arc::new(Schema { root, defs }))
        })
        .clone()
}

/// Every field of `object` its kind's schema does not declare (empty when the kind has no
/// known schema).
pub fn unknown_fields(definition: &str, object: &Value) -> Vec<String> {
    let Some(schema) = schema(definition) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk(&schema, &schema.root, object, "", &mut out, 0);
    out
}

/// Removes every field the kind's schema does not declare (nothing when the kind has no
/// known schema).
pub fn prune_unknown_fields(definition: &str, object: &mut Value) {
    if let Some(schema) = schema(definition) {
        prune(&schema, &schema.root, object, 0);
    }
}

fn prune(schema: &Schema, node: &Value, value: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let node = resolve(schema, node);
    if node
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = node.get("properties").and_then(Value::as_object) {
                map.retain(|key, _| props.contains_key(key));
                for (key, child) in map.iter_mut() {
                    if let Some(child_schema) = props.get(key) {
                        prune(schema, child_schema, child, depth + 1);
                    }
                }
            } else if let Some(additional) =
                node.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in map.values_mut() {
                    prune(schema, additional, child, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = node.get("items") {
                for item in items.iter_mut() {
                    prune(schema, item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Follows `$ref` (and single-element `allOf`) to the schema that describes a value.
fn resolve<'a>(schema: &'a Schema, mut node: &'a Value) -> &'a Value {
    for _ in 0..16 {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or(r);
            match schema.defs.get(name) {
                Some(target) => node = target,
                None => return node,
            }
        } else if let Some([only]) = node
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            node = only;
        } else {
            return node;
        }
    }
    node
}

fn walk(
    schema: &Schema,
    node: &Value,
    value: &Value,
    path: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > 64 {
        return;
    }
    let node = resolve(schema, node);
    if node
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = node.get("properties").and_then(Value::as_object) {
                for (key, child) in map {
                    let child_path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    match props.get(key) {
                        Some(child_schema) => {
                            walk(schema, child_schema, child, &child_path, out, depth + 1)
                        }
                        None => out.push(child_path),
                    }
                }
            } else if let Some(additional) =
                node.get("additionalProperties").filter(|a| a.is_object())
            {
                for (key, child) in map {
                    let child_path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    walk(schema, additional, child, &child_path, out, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = node.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(
                        schema,
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        out,
                        depth + 1,
                    );
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_unknown_fields_with_paths() {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labelz": {"a": "b"}, "labels": {"ok": "yes"}},
            "data": {"anything": "goes"},
            "bogus": 1
        });
        let mut unknown = unknown_fields("io.k8s.api.core.v1.ConfigMap", &cm);
        unknown.sort();
        assert_eq!(
            unknown,
            vec!["bogus".to_string(), "metadata.labelz".to_string()]
        );
    }

    #[test]
    fn walks_into_lists() {
        let svc = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80, "prot": "TCP"}]}
        });
        assert_eq!(
            unknown_fields("io.k8s.api.core.v1.Service", &svc),
            vec!["spec.ports[0].prot".to_string()]
        );
    }

    #[test]
    fn pruning_removes_exactly_the_unknown_fields() {
        let mut svc = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "labelz": {}},
            "spec": {"ports": [{"port": 80, "prot": "TCP"}], "selector": {"app": "x"}},
            "bogus": true
        });
        prune_unknown_fields("io.k8s.api.core.v1.Service", &mut svc);
        assert_eq!(
            svc,
            json!({
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}
            })
        );
    }

    #[test]
    fn unknown_definitions_report_nothing() {
        assert!(unknown_fields("com.example.Nope", &json!({"a": 1})).is_empty());
    }
}

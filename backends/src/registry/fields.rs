//! Unknown fields: detection for `fieldValidation=Strict|Warn` (every field the kind's
//! OpenAPI schema does not declare, with kube's dotted paths such as `spec.ports[0].foo`)
//! and pruning, because kube's typed decoding drops such fields before anything is stored.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

/// A kind's schema with every definition it references.
pub(super) struct Schema {
    pub(super) root: Value,
    pub(super) defs: Map<String, Value>,
}

/// Schemas are generated once per definition and kept.
pub(super) fn schema(definition: &str) -> Option<Arc<Schema>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<Schema>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().unwrap_or_else(|p| p.into_inner());
    // Every write asks: the common case finds its schema without building a key.
    if let Some(known) = guard.get(definition) {
        return known.clone();
    }
    guard
        .entry(definition.to_string())
        .or_insert_with(|| {
            crate::openapi::schema_for_definition(definition)
                .map(|(root, defs)| Arc::new(Schema { root, defs }))
        })
        .clone()
}

/// Removes every field the kind's schema does not declare and returns their dotted paths
/// (nothing when the kind has no known schema). One pass serves both `fieldValidation`
/// (the paths) and storage (the pruned object).
pub fn prune_unknown_fields(definition: &str, object: &mut Value) -> Vec<String> {
    let mut removed = Vec::new();
    if let Some(schema) = schema(definition) {
        prune(
            &schema,
            &schema.root,
            object,
            &mut String::new(),
            &mut removed,
            0,
        );
    }
    removed
}

/// Extends the dotted path in place by `key` (every write walks its object: one buffer grows
/// and shrinks instead of a string per field); returns the length to truncate back to.
fn push_key(path: &mut String, key: &str) -> usize {
    let len = path.len();
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
    len
}

/// The dotted path with `key` appended, for a field that is reported.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn prune(
    schema: &Schema,
    node: &Value,
    value: &mut Value,
    path: &mut String,
    removed: &mut Vec<String>,
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
                map.retain(|key, _| {
                    let known = props.contains_key(key);
                    if !known {
                        removed.push(join(path, key));
                    }
                    known
                });
                for (key, child) in map.iter_mut() {
                    if let Some(child_schema) = props.get(key) {
                        let len = push_key(path, key);
                        prune(schema, child_schema, child, path, removed, depth + 1);
                        path.truncate(len);
                    }
                }
            } else if let Some(additional) =
                node.get("additionalProperties").filter(|a| a.is_object())
            {
                for (key, child) in map.iter_mut() {
                    let len = push_key(path, key);
                    prune(schema, additional, child, path, removed, depth + 1);
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = node.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    // Writing into a String cannot fail.
                    let _ = write!(path, "[{i}]");
                    prune(schema, item_schema, item, path, removed, depth + 1);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Follows `$ref` (and single-element `allOf`) to the schema that describes a value.
fn resolve<'a>(schema: &'a Schema, node: &'a Value) -> &'a Value {
    resolve_named(schema, node).0
}

/// [`resolve`], with the name of the last definition a `$ref` led to (the Go type).
pub(super) fn resolve_named<'a>(
    schema: &'a Schema,
    mut node: &'a Value,
) -> (&'a Value, Option<&'a str>) {
    let mut named = None;
    for _ in 0..16 {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or(r);
            match schema.defs.get_key_value(name) {
                Some((key, target)) => {
                    node = target;
                    named = Some(key.as_str());
                }
                None => return (node, named),
            }
        } else if let Some([only]) = node
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            node = only;
        } else {
            return (node, named);
        }
    }
    (node, named)
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
        let mut cm = cm;
        let mut unknown = prune_unknown_fields("io.k8s.api.core.v1.ConfigMap", &mut cm);
        unknown.sort();
        assert_eq!(
            unknown,
            vec!["bogus".to_string(), "metadata.labelz".to_string()]
        );
    }

    #[test]
    fn walks_into_lists() {
        let mut svc = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80, "prot": "TCP"}]}
        });
        assert_eq!(
            prune_unknown_fields("io.k8s.api.core.v1.Service", &mut svc),
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
        assert!(prune_unknown_fields("com.example.Nope", &mut json!({"a": 1})).is_empty());
    }
}

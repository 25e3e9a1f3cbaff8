//! kube's correlation of an update's new value with its old one (apiserver's
//! `common.CorrelatedObject`), which decides validation ratcheting (`CRDValidationRatcheting`):
//! an error raised at a node is dropped when the nearest node that correlates with an old value
//! equals it. Fields correlate by name where the schema declares them; list items only in
//! `x-kubernetes-list-type: map` lists, by their keys; everything else is compared whole.

use std::collections::HashMap;

use serde_json::Value;

use super::structural::Schema;

/// `MapList.Get`: the first old item whose keys equal `item`'s, in a `map` list with keys.
/// An item lacking a key, or with a key that is not a scalar, correlates with nothing.
pub(crate) fn correlated_item<'a>(
    list: &Schema,
    old: &'a [Value],
    item: &Value,
) -> Option<&'a Value> {
    MapList::new(list, old)?.get(item)
}

/// The old items of a `map` list by their keys, built once for the items of a new list (kube's
/// `MapList`): looking each new item up in it keeps correlating a whole list linear.
pub(crate) struct MapList<'a, 's> {
    list: &'s Schema,
    by_keys: HashMap<String, &'a Value>,
}

impl<'a, 's> MapList<'a, 's> {
    /// `None` unless `list` is a `map` list with keys.
    pub(crate) fn new(list: &'s Schema, old: &'a [Value]) -> Option<MapList<'a, 's>> {
        if list.x_list_type.as_deref() != Some("map") || list.x_list_map_keys.is_empty() {
            return None;
        }
        let mut by_keys = HashMap::with_capacity(old.len());
        for item in old {
            if let Some(keys) = map_keys(list, item) {
                // The first item with these keys is the one correlated.
                by_keys.entry(key_text(&keys)).or_insert(item);
            }
        }
        Some(MapList { list, by_keys })
    }

    /// The old item with `item`'s keys.
    pub(crate) fn get(&self, item: &Value) -> Option<&'a Value> {
        let keys = map_keys(self.list, item)?;
        self.by_keys.get(&key_text(&keys)).copied()
    }
}

/// Key values as one text (JSON keeps `1` and `"1"`, `1` and `1.0` apart, as kube's keys do).
fn key_text(keys: &[&Value]) -> String {
    serde_json::to_string(keys).unwrap_or_default()
}

/// An item's values of its list's map keys, when it has them all and they are scalars.
fn map_keys<'v>(list: &Schema, item: &'v Value) -> Option<Vec<&'v Value>> {
    let fields = item.as_object()?;
    list.x_list_map_keys
        .iter()
        .map(|k| {
            fields
                .get(k)
                .filter(|v| matches!(v, Value::Bool(_) | Value::Number(_) | Value::String(_)))
        })
        .collect()
}

/// `CorrelatedObject.Key`'s schema: the declared property, else `additionalProperties`'.
fn field_schema<'s>(schema: &'s Schema, field: &str) -> Option<&'s Schema> {
    schema
        .properties
        .get(field)
        .or_else(|| schema.additional_properties_schema())
}

/// `CorrelatedObject.Key`: the new and old values of `field` and its schema, when both
/// objects have it and the schema declares it.
pub(crate) fn correlated_field<'a, 's>(
    schema: &'s Schema,
    new: &'a Value,
    old: &'a Value,
    field: &str,
) -> Option<(&'a Value, &'a Value, &'s Schema)> {
    let (Value::Object(new), Value::Object(old)) = (new, old) else {
        return None;
    };
    let (new, old) = (new.get(field)?, old.get(field)?);
    Some((new, old, field_schema(schema, field)?))
}

/// `CorrelatedObject.Index`: the `i`th new item, its correlated old item and their schema.
fn correlated_index<'a, 's>(
    schema: &'s Schema,
    new: &'a Value,
    old: &'a Value,
    i: usize,
) -> Option<(&'a Value, &'a Value, &'s Schema)> {
    let (Value::Array(new), Value::Array(old)) = (new, old) else {
        return None;
    };
    let item = new.get(i)?;
    let old_item = correlated_item(schema, old, item)?;
    Some((item, old_item, schema.items.as_deref()?))
}

/// `CorrelatedObject.CachedDeepEqual`: whether `new` equals `old`, comparing fields and
/// `map` list items through their correlation. As in kube, an object holding a field its
/// schema does not declare (kept by `x-kubernetes-preserve-unknown-fields`) never counts as
/// equal, nor does a `map` list with an item that correlates with nothing.
pub(crate) fn correlated_equal(schema: &Schema, new: &Value, old: &Value) -> bool {
    match (new, old) {
        (Value::Null, Value::Null) => true,
        (Value::Array(new_items), Value::Array(old_items)) => {
            if new_items.len() != old_items.len() {
                return false;
            }
            let Some(items) = schema.items.as_deref() else {
                return new == old;
            };
            let Some(old_by_keys) = MapList::new(schema, old_items) else {
                return new == old;
            };
            new_items.iter().all(|item| {
                old_by_keys
                    .get(item)
                    .is_some_and(|old_item| correlated_equal(items, item, old_item))
            })
        }
        (Value::Object(new_map), Value::Object(old_map)) => {
            new_map.len() == old_map.len()
                && new_map.keys().all(|k| {
                    correlated_field(schema, new, old, k)
                        .is_some_and(|(n, o, s)| correlated_equal(s, n, o))
                })
        }
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => new == old,
    }
}

/// Whether a schema error at the field path `path` (`spec.a`, `spec.m[key]`, `spec.l[0].b`)
/// is ratcheted: its nearest node that correlates with an old value (kube's schema validators
/// recurse through correlated nodes and ratchet at each) equals that old value. `kind` and
/// `apiVersion` at the root never correlate.
pub(crate) fn unchanged_at(schema: &Schema, path: &str, new: &Value, old: &Value) -> bool {
    let Some(segments) = field_path_segments(path) else {
        return false;
    };
    let (mut schema, mut new, mut old) = (schema, new, old);
    for (depth, segment) in segments.into_iter().enumerate() {
        if depth == 0 && (segment == "kind" || segment == "apiVersion") {
            break;
        }
        let next = match new {
            Value::Array(_) => segment
                .parse::<usize>()
                .ok()
                .and_then(|i| correlated_index(schema, new, old, i)),
            _ => correlated_field(schema, new, old, segment),
        };
        match next {
            Some((n, o, s)) => (new, old, schema) = (n, o, s),
            None => break,
        }
    }
    correlated_equal(schema, new, old)
}

/// The names and keys of a field error's path (`spec.m[key].x` → spec, m, key, x).
fn field_path_segments(path: &str) -> Option<Vec<&str>> {
    let mut segments = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            segments.push(&inner[..end]);
            rest = &inner[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end > 0 {
                segments.push(&rest[..end]);
            }
            rest = &rest[end..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    Some(segments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Schema {
        Schema::from_json(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer", "maximum": 10}}}},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"a": {"type": "string", "maxLength": 1}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 2}}
        }}}}))
    }

    #[test]
    fn map_list_items_ratchet_by_their_keys() {
        let schema = schema();
        let old = json!({"spec": {"ports": [{"name": "a", "port": 99}, {"name": "b", "port": 1}]}});
        // Reordered, another item changed: the item keyed `a` is unchanged.
        let new = json!({"spec": {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 99}]}});
        assert!(unchanged_at(&schema, "spec.ports[1].port", &new, &old));
        assert!(!unchanged_at(&schema, "spec.ports[0].port", &new, &old));
        // An item with a new key correlates with nothing: decided by the whole list.
        let new = json!({"spec": {"ports": [{"name": "c", "port": 99}]}});
        assert!(!unchanged_at(&schema, "spec.ports[0].port", &new, &old));
        // A reordered map list is equal to its old value.
        let new = json!({"spec": {"ports": [{"name": "b", "port": 1}, {"name": "a", "port": 99}]}});
        assert!(unchanged_at(&schema, "spec.ports", &new, &old));
    }

    #[test]
    fn other_lists_ratchet_only_as_a_whole() {
        let schema = schema();
        let old = json!({"spec": {"tags": ["long", "b"]}});
        assert!(unchanged_at(&schema, "spec.tags[0]", &old.clone(), &old));
        let new = json!({"spec": {"tags": ["long", "c"]}});
        assert!(!unchanged_at(&schema, "spec.tags[0]", &new, &old));
        let new = json!({"spec": {"tags": ["b", "long"]}});
        assert!(!unchanged_at(&schema, "spec.tags[1]", &new, &old));
    }

    #[test]
    fn fields_and_map_values_correlate_by_name() {
        let schema = schema();
        let old = json!({"spec": {"name": "toolong", "labels": {"x": "long", "y": "1"}}});
        let new = json!({"spec": {"name": "toolong", "labels": {"x": "long", "y": "2"}}});
        assert!(unchanged_at(&schema, "spec.name", &new, &old));
        assert!(unchanged_at(&schema, "spec.labels[x]", &new, &old));
        assert!(!unchanged_at(&schema, "spec.labels[y]", &new, &old));
        // A required field missing from both is judged by its parent.
        assert!(!unchanged_at(&schema, "spec.missing", &new, &old));
        assert!(unchanged_at(&schema, "spec.missing", &old.clone(), &old));
    }

    #[test]
    fn undeclared_fields_never_compare_equal() {
        let schema = schema();
        let old = json!({"spec": {"free": {"a": "long", "extra": 1}}});
        // `a` itself correlates and is unchanged...
        assert!(unchanged_at(&schema, "spec.free.a", &old.clone(), &old));
        // ...but `free`, holding an undeclared field, is never equal, as in kube.
        assert!(!correlated_equal(&schema, &old, &old));
        assert!(!unchanged_at(&schema, "spec.free", &old.clone(), &old));
    }

    #[test]
    fn keys_must_be_present_scalars() {
        let schema = schema();
        let list = &schema.properties["spec"].properties["ports"];
        let old = [
            json!({"port": 1}),
            json!({"name": {"x": 1}}),
            json!({"name": "a"}),
        ];
        assert_eq!(correlated_item(list, &old, &json!({"port": 1})), None);
        assert_eq!(
            correlated_item(list, &old, &json!({"name": {"x": 1}})),
            None
        );
        assert_eq!(
            correlated_item(list, &old, &json!({"name": "a", "port": 3})),
            Some(&old[2])
        );
    }

    #[test]
    fn field_error_paths_split_into_names_and_keys() {
        assert_eq!(field_path_segments("spec.a"), Some(vec!["spec", "a"]));
        assert_eq!(
            field_path_segments("spec.m[k.x].b[0]"),
            Some(vec!["spec", "m", "k.x", "b", "0"])
        );
        assert_eq!(field_path_segments(""), Some(vec![]));
        assert_eq!(field_path_segments("spec[unclosed"), None);
    }
}

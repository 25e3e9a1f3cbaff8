//! Go's typed decoding of built-in kinds, generically: kube-apiserver decodes every request
//! body into the kind's Go struct before anything else looks at it, so a field of the wrong
//! JSON type (`"data": {"a": 1}` in a ConfigMap, `"holderIdentity": 5` in a Lease) is a 400,
//! never a stored object that typed clients (client-go informers) then fail to decode. Walks
//! the body along the kind's OpenAPI schema (the same k8s-openapi schemas unknown fields are
//! found with) and words the first mismatch as Go's `UnmarshalTypeError`: `json: cannot
//! unmarshal number into Go struct field ConfigMap.data of type string`. As in Go, `null` and
//! absent fields are zero values, map keys and list indices are not part of the field path,
//! and fields the schema does not declare are left to the unknown-field handling. Time fields
//! (`metav1.Time`, `metav1.MicroTime`) are parsed as Go parses them, so a time kube would
//! refuse is refused with `time.Parse`'s words, and one it accepts in another form (an
//! offset, a fraction `Time` drops) is written back as kube encodes it, in UTC.

use serde_json::Value;

use super::fields::{resolve_named, schema, Schema};
use crate::machinery::gotime::{self, Layout};
use crate::machinery::json_kind;

/// Decodes `object` as its Go type would and writes back what that changes: the first value
/// its Go field cannot hold is the error, in Go's words; time fields are rewritten in the form
/// kube encodes them in. Nothing is checked when `definition` has no known schema (custom
/// resources are checked against their own schemas elsewhere).
pub fn decode(definition: &str, object: &mut Value) -> Result<(), String> {
    let Some(schema) = schema(definition) else {
        return Ok(());
    };
    let root_name = definition.rsplit('.').next().unwrap_or(definition);
    let mut rewrite = false;
    if let Some(error) = check(
        &schema,
        &schema.root,
        object,
        root_name,
        &mut Vec::new(),
        &mut rewrite,
    ) {
        return Err(error);
    }
    // Clients send times as kube writes them, and strings as strings; only a body with a time
    // in another form, or a `null` string, is walked a second time.
    if rewrite {
        rewrite_values(&schema, &schema.root, object, 0);
    }
    Ok(())
}

/// The first value of `object` its Go field cannot hold, in Go's words; `None` when every
/// field fits.
#[cfg(test)]
fn type_mismatch(definition: &str, object: &Value) -> Option<String> {
    decode(definition, &mut object.clone()).err()
}

/// Rewrites what Go's decoding changes under `node` (the walk [`check`] passed): every time
/// field in kube's form, and the `null` items of string maps and string lists as the empty
/// strings Go decodes them into.
fn rewrite_values(schema: &Schema, node: &Value, value: &mut Value, depth: usize) {
    if depth > 64 || value.is_null() {
        return;
    }
    let (node, named) = resolve_named(schema, node);
    if flag(node, "x-kubernetes-preserve-unknown-fields")
        || flag(node, "x-kubernetes-int-or-string")
    {
        return;
    }
    match node.get("type").and_then(Value::as_str) {
        Some("string") if is_time(node) => {
            if let Ok(canonical) = gotime::canonical(value, Layout::of_definition(named)) {
                *value = canonical;
            }
        }
        Some("array") => {
            if let (Value::Array(items), Some(item_schema)) = (value, node.get("items")) {
                let strings = is_plain_string(schema, item_schema);
                for item in items {
                    if strings && item.is_null() {
                        *item = Value::String(String::new());
                    }
                    rewrite_values(schema, item_schema, item, depth + 1);
                }
            }
        }
        Some("object") | None => {
            let Value::Object(map) = value else { return };
            let properties = node.get("properties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            let strings =
                properties.is_none() && additional.is_some_and(|a| is_plain_string(schema, a));
            for (key, child) in map.iter_mut() {
                if strings && child.is_null() {
                    *child = Value::String(String::new());
                }
                let child_schema = match properties {
                    Some(properties) => properties.get(key),
                    None => additional,
                };
                if let Some(child_schema) = child_schema {
                    rewrite_values(schema, child_schema, child, depth + 1);
                }
            }
        }
        Some(_) => {}
    }
}

/// A Go `string`: a string schema that is neither a time nor base64 bytes.
fn is_plain_string(schema: &Schema, node: &Value) -> bool {
    let (node, _) = resolve_named(schema, node);
    node.get("type").and_then(Value::as_str) == Some("string")
        && node
            .get("format")
            .is_none_or(|f| f != "date-time" && f != "byte")
        && !flag(node, "x-kubernetes-int-or-string")
}

/// A `date-time` string: a `metav1.Time` or `metav1.MicroTime` field.
fn is_time(node: &Value) -> bool {
    node.get("format").and_then(Value::as_str) == Some("date-time")
}

/// Checks `value` against `node`. `owner` is the Go struct holding the field being decoded and
/// `path` the field names from the root, as Go names them in the error (joined with dots only
/// when there is one: every write of a built-in kind runs this walk).
fn check<'a>(
    schema: &'a Schema,
    node: &'a Value,
    value: &'a Value,
    owner: &str,
    path: &mut Vec<&'a str>,
    rewrite: &mut bool,
) -> Option<String> {
    if path.len() > 64 || value.is_null() {
        return None;
    }
    let (node, named) = resolve_named(schema, node);
    let mismatch = |go_type: String| Some(unmarshal_error(value, owner, &path.join("."), &go_type));
    if flag(node, "x-kubernetes-preserve-unknown-fields") {
        return None;
    }
    if flag(node, "x-kubernetes-int-or-string") {
        // IntOrString decodes itself with the standard library's decoder into an int32,
        // whose error kube's decoder does not put in context (it is another type than its
        // own): no struct field, the int32 named, a number shown as written.
        return match value {
            Value::String(_) => None,
            Value::Number(n) if fits_int32(n) => None,
            Value::Number(n) => Some(format!(
                "json: cannot unmarshal number {n} into Go value of type int32"
            )),
            other => Some(unmarshal_error_found(json_kind(other), "", "", "int32")),
        };
    }
    match node.get("type").and_then(Value::as_str) {
        Some("string") if is_time(node) => {
            // metav1.Time decodes the value itself: a string `time.Parse` refuses, or anything
            // but a string, fails inside it.
            let layout = Layout::of_definition(named);
            match gotime::unmarshal(value, layout) {
                Ok(Some(t)) => {
                    *rewrite |= !value
                        .as_str()
                        .is_some_and(|text| gotime::is_canonical(text, &t, layout));
                    None
                }
                Ok(None) => None,
                Err(error) => Some(error),
            }
        }
        Some("string") => {
            if value.is_string() {
                return None;
            }
            mismatch(go_type(schema, node, named))
        }
        Some("integer") => match value {
            Value::Number(n) => {
                let fits = if node.get("format").and_then(Value::as_str) == Some("int32") {
                    fits_int32(n)
                } else {
                    n.is_i64() || n.is_u64()
                };
                if fits {
                    None
                } else {
                    // Go names the literal it could not fit: `number 1.5`.
                    Some(unmarshal_error_found(
                        &format!("number {n}"),
                        owner,
                        &path.join("."),
                        &go_type(schema, node, named),
                    ))
                }
            }
            _ => mismatch(go_type(schema, node, named)),
        },
        Some("number") if !value.is_number() => mismatch(go_type(schema, node, named)),
        Some("boolean") if !value.is_boolean() => mismatch(go_type(schema, node, named)),
        Some("number" | "boolean") => None,
        Some("array") => {
            let Value::Array(items) = value else {
                return mismatch(go_type(schema, node, named));
            };
            let item_schema = node.get("items")?;
            *rewrite |= items.iter().any(Value::is_null) && is_plain_string(schema, item_schema);
            items
                .iter()
                .find_map(|item| check(schema, item_schema, item, owner, path, rewrite))
        }
        Some("object") | None => {
            let properties = node.get("properties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && additional.is_none() {
                // No fields declared: anything goes (a `RawExtension`, apiextensions' `JSON`
                // for a schema's `default`, which the generated schema calls an object).
                return None;
            }
            let Value::Object(map) = value else {
                return mismatch(go_type(schema, node, named));
            };
            let Some(properties) = properties else {
                // A map: its values, under the map's own field name (a `null` string value
                // decodes as "", written back below).
                *rewrite |= map.values().any(Value::is_null)
                    && additional.is_some_and(|a| is_plain_string(schema, a));
                return additional.and_then(|additional| {
                    map.values()
                        .find_map(|child| check(schema, additional, child, owner, path, rewrite))
                });
            };
            // The fields of this struct are reported as its own.
            let owner = named.map_or(owner, short_name);
            for (key, child) in map {
                if let Some(child_schema) = properties.get(key) {
                    path.push(key);
                    let error = check(schema, child_schema, child, owner, path, rewrite);
                    path.pop();
                    if error.is_some() {
                        return error;
                    }
                }
            }
            None
        }
        Some(_) => None,
    }
}

fn flag(node: &Value, name: &str) -> bool {
    node.get(name).and_then(Value::as_bool) == Some(true)
}

fn fits_int32(n: &serde_json::Number) -> bool {
    n.as_i64().is_some_and(|i| i32::try_from(i).is_ok())
}

/// `io.k8s.api.core.v1.ServicePort` → `ServicePort`.
fn short_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

/// The Go type a schema node decodes into, as Go prints it in the error (`string`, `int32`,
/// `[]v1.ServicePort`, `map[string]string`, `[]uint8` for base64 bytes).
fn go_type(schema: &Schema, node: &Value, named: Option<&str>) -> String {
    let format = node.get("format").and_then(Value::as_str);
    match node.get("type").and_then(Value::as_str) {
        Some("string") if format == Some("byte") => "[]uint8".into(),
        Some("string") => "string".into(),
        Some("integer") if format == Some("int64") => "int64".into(),
        Some("integer") => "int32".into(),
        Some("number") => "float64".into(),
        Some("boolean") => "bool".into(),
        Some("array") => {
            let item = node.get("items").map(|items| {
                let (item, item_name) = resolve_named(schema, items);
                go_type(schema, item, item_name)
            });
            format!("[]{}", item.unwrap_or_else(|| "interface {}".into()))
        }
        _ => {
            if node.get("properties").is_some() {
                if let Some(name) = named {
                    // `io.k8s.api.core.v1.ServicePort` → `v1.ServicePort`.
                    let mut parts = name.rsplit('.');
                    let short = parts.next().unwrap_or(name);
                    return match parts.next() {
                        Some(package) => format!("{package}.{short}"),
                        None => short.to_string(),
                    };
                }
                return "struct".into();
            }
            match node.get("additionalProperties").filter(|a| a.is_object()) {
                Some(additional) => {
                    let (value, value_name) = resolve_named(schema, additional);
                    format!("map[string]{}", go_type(schema, value, value_name))
                }
                None => "map[string]interface {}".into(),
            }
        }
    }
}

fn unmarshal_error(value: &Value, owner: &str, path: &str, go_type: &str) -> String {
    unmarshal_error_found(json_kind(value), owner, path, go_type)
}

fn unmarshal_error_found(found: &str, owner: &str, path: &str, go_type: &str) -> String {
    if path.is_empty() {
        format!("json: cannot unmarshal {found} into Go value of type {go_type}")
    } else {
        format!(
            "json: cannot unmarshal {found} into Go struct field {owner}.{path} of type {go_type}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mismatch(definition: &str, object: Value) -> Option<String> {
        type_mismatch(&format!("io.k8s.api.{definition}"), &object)
    }

    #[test]
    fn null_strings_in_maps_and_lists_decode_as_empty_strings() {
        let mut cm = json!({"metadata": {"name": "c", "labels": {"x": null, "y": "1"},
            "finalizers": [null, "a.io/f"]},
            "data": {"LOG_LEVEL": null, "OTHER": "x"}, "binaryData": {"b": null}});
        decode("io.k8s.api.core.v1.ConfigMap", &mut cm).expect("decodes");
        assert_eq!(cm["data"], json!({"LOG_LEVEL": "", "OTHER": "x"}));
        assert_eq!(cm["metadata"]["labels"], json!({"x": "", "y": "1"}));
        assert_eq!(cm["metadata"]["finalizers"], json!(["", "a.io/f"]));
        // Bytes are not strings: left as they are.
        assert_eq!(cm["binaryData"], json!({"b": null}));
        let mut service = json!({"spec": {"selector": {"app": null}, "type": null}});
        decode("io.k8s.api.core.v1.Service", &mut service).expect("decodes");
        assert_eq!(
            service["spec"],
            json!({"selector": {"app": ""}, "type": null})
        );
    }

    #[test]
    fn times_are_parsed_as_go_parses_them_and_written_back_in_utc() {
        let mut lease = json!({"metadata": {"name": "l"},
            "spec": {"holderIdentity": "me",
                     "renewTime": "2026-11-29T02:00:00.500000+01:00",
                     "acquireTime": "2026-11-29T01:00:00.000000Z"}});
        decode("io.k8s.api.coordination.v1.Lease", &mut lease).expect("a good lease");
        assert_eq!(
            lease["spec"],
            json!({"holderIdentity": "me",
                   "renewTime": "2026-11-29T01:00:00.500000Z",
                   "acquireTime": "2026-11-29T01:00:00.000000Z"})
        );
        let mut event = json!({"metadata": {"name": "e"},
            "lastTimestamp": "2026-11-29T01:00:00.25-02:00",
            "series": {"count": 2, "lastObservedTime": "2026-11-29T01:00:00.000001Z"}});
        decode("io.k8s.api.core.v1.Event", &mut event).expect("a good event");
        assert_eq!(event["lastTimestamp"], json!("2026-11-29T03:00:00Z"));
        assert_eq!(
            event["series"]["lastObservedTime"],
            json!("2026-11-29T01:00:00.000001Z")
        );

        let micro = "2006-01-02T15:04:05.000000Z07:00";
        for (definition, object, error) in [
            (
                "io.k8s.api.core.v1.Event",
                json!({"eventTime": "2026-11-29T01:00:00Z"}),
                format!(
                    r#"parsing time "2026-11-29T01:00:00Z" as "{micro}": cannot parse "Z" as ".000000""#
                ),
            ),
            (
                "io.k8s.api.coordination.v1.Lease",
                json!({"spec": {"renewTime": "garbage"}}),
                format!(r#"parsing time "garbage" as "{micro}": cannot parse "garbage" as "2006""#),
            ),
            (
                "io.k8s.api.core.v1.Event",
                json!({"lastTimestamp": "yesterday"}),
                r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006""#
                    .to_string(),
            ),
            (
                "io.k8s.api.core.v1.Event",
                json!({"firstTimestamp": 7}),
                "json: cannot unmarshal number into Go value of type string".to_string(),
            ),
        ] {
            let mut object = object;
            let before = object.clone();
            assert_eq!(decode(definition, &mut object), Err(error));
            assert_eq!(object, before, "a refused body is left as it was");
        }
    }

    #[test]
    fn well_typed_objects_pass() {
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "labels": {"a": "b"}, "annotations": null,
                         "creationTimestamp": null, "generation": 3},
            "spec": {"ports": [{"port": 80, "targetPort": "http", "protocol": "TCP"},
                               {"port": 81, "targetPort": 8081, "nodePort": null}],
                     "selector": {"app": "x"}, "clusterIPs": ["10.96.0.10"],
                     "publishNotReadyAddresses": true},
            "unknownField": [1, 2]
        });
        assert_eq!(mismatch("core.v1.Service", service), None);
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                     "renewTime": "2026-11-27T00:00:00.000000Z"}
        });
        assert_eq!(mismatch("coordination.v1.Lease", lease), None);
    }

    #[test]
    fn a_map_value_of_the_wrong_type_is_named_as_go_does() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                        "data": {"a": 1}});
        assert_eq!(
            mismatch("core.v1.ConfigMap", cm).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )
        );
        let labels = json!({"metadata": {"name": "c", "labels": {"a": true}}});
        assert_eq!(
            mismatch("core.v1.ConfigMap", labels).as_deref(),
            Some("json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string")
        );
    }

    #[test]
    fn scalars_lists_and_structs_of_the_wrong_type_are_refused() {
        let cases = [
            ("coordination.v1.Lease", json!({"spec": {"holderIdentity": 5}}),
             "json: cannot unmarshal number into Go struct field LeaseSpec.spec.holderIdentity of type string"),
            ("coordination.v1.Lease", json!({"spec": {"leaseDurationSeconds": 1.5}}),
             "json: cannot unmarshal number 1.5 into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"),
            ("coordination.v1.Lease", json!({"spec": {"leaseDurationSeconds": 3_000_000_000_u64}}),
             "json: cannot unmarshal number 3000000000 into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"),
            ("core.v1.ConfigMap", json!({"immutable": "true"}),
             "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool"),
            ("core.v1.Namespace", json!({"spec": {"finalizers": "kubernetes"}}),
             "json: cannot unmarshal string into Go struct field NamespaceSpec.spec.finalizers of type []string"),
            ("core.v1.Service", json!({"spec": {"ports": {"port": 80}}}),
             "json: cannot unmarshal object into Go struct field ServiceSpec.spec.ports of type []v1.ServicePort"),
            ("core.v1.Service", json!({"spec": {"ports": [{"port": "80"}]}}),
             "json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32"),
            ("core.v1.Service", json!({"spec": {"ports": [{"port": 80, "targetPort": true}]}}),
             "json: cannot unmarshal bool into Go value of type int32"),
            ("core.v1.Service", json!({"spec": {"ports": [{"port": 80, "targetPort": 80.5}]}}),
             "json: cannot unmarshal number 80.5 into Go value of type int32"),
            ("core.v1.Secret", json!({"stringData": {"a": 1}}),
             "json: cannot unmarshal number into Go struct field Secret.stringData of type string"),
            ("core.v1.ConfigMap", json!({"metadata": "x"}),
             "json: cannot unmarshal string into Go struct field ConfigMap.metadata of type v1.ObjectMeta"),
            ("core.v1.ConfigMap", json!({"metadata": {"creationTimestamp": 5}}),
             "json: cannot unmarshal number into Go value of type string"),
        ];
        for (definition, object, expected) in cases {
            assert_eq!(
                mismatch(definition, object.clone()).as_deref(),
                Some(expected),
                "{definition} {object}"
            );
        }
    }

    #[test]
    fn free_form_values_are_not_checked() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "default": 3, "maximum": 10.5, "minimum": 0,
                         "enum": [1, 2, 3], "example": 2},
                "name": {"type": "string", "maxLength": 63, "pattern": "^a", "default": "a"},
                "closed": {"type": "object", "additionalProperties": false},
                "open": {"type": "object", "additionalProperties": {"type": "string"}},
                "list": {"type": "array", "items": {"type": "string"}, "default": []},
                "tuple": {"type": "array", "items": [{"type": "string"}]},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "needs": {"type": "object", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
            },
            "required": ["size"],
            "x-kubernetes-validations": [{"rule": "self.size > 0", "message": "positive"}],
        }}}]}});
        assert_eq!(
            type_mismatch(
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
                &crd
            ),
            None
        );
    }

    #[test]
    fn unknown_definitions_are_not_checked() {
        assert_eq!(
            type_mismatch("com.example.v1.Widget", &json!({"spec": 1})),
            None
        );
    }
}

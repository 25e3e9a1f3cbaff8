//! Go's `encoding/json` round trip of a built-in object, on its JSON: kube-apiserver decodes
//! every body into the kind's Go struct and encodes that again, so an `omitempty` value field
//! holding its zero value (`""`, `0`, `false`, `null`, an empty list or map) is not stored and
//! not answered (`data: {}` in a ConfigMap, `selector: {}` in a Service, `secrets: []` in a
//! ServiceAccount). Everything else stays as it is, fields the tables do not know included.
//! Driven by the per-message tables of the protobuf conversion (`messages.rs`), so a field's
//! mode is written down once.

use std::collections::BTreeMap;

use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// A message or scalar type as Go's JSON encoding treats it.
pub(super) trait Shape {
    /// Whether Go decodes `value` into this type's zero value, which `omitempty` leaves out.
    /// Go never leaves out a struct (a message, a time, a quantity), so they say no.
    fn is_go_zero(_value: &Value) -> bool {
        false
    }

    /// Rewrites `value` as Go writes this type back.
    fn shape(_value: &mut Value) {}

    /// What Go writes for a `null` list item of this type, when that is not `null`: a
    /// message's zero struct (`[null]` in a Service's ports decodes as a zero port, which
    /// defaulting and validation then see).
    fn null_item() -> Option<Value> {
        None
    }
}

impl Shape for String {
    fn is_go_zero(value: &Value) -> bool {
        matches!(value, Value::Null) || value.as_str() == Some("")
    }
}

impl Shape for bool {
    fn is_go_zero(value: &Value) -> bool {
        matches!(value, Value::Null | Value::Bool(false))
    }
}

fn is_zero_number(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

impl Shape for i32 {
    fn is_go_zero(value: &Value) -> bool {
        is_zero_number(value)
    }
}

impl Shape for i64 {
    fn is_go_zero(value: &Value) -> bool {
        is_zero_number(value)
    }
}

impl Shape for f64 {
    fn is_go_zero(value: &Value) -> bool {
        is_zero_number(value)
    }
}

/// `[]byte`, written as base64: empty is zero.
impl Shape for Vec<u8> {
    fn is_go_zero(value: &Value) -> bool {
        String::is_go_zero(value)
    }
}

impl Shape for metav1::Time {}
impl Shape for metav1::MicroTime {}
impl Shape for metav1::FieldsV1 {}
impl Shape for IntOrString {}
impl Shape for Quantity {}
/// `ExtraValue` is a `[]string`, only ever a map's value here.
impl Shape for authnv1::ExtraValue {}
impl Shape for authzv1::ExtraValue {}

impl<T: Shape> Shape for Box<T> {
    fn is_go_zero(value: &Value) -> bool {
        T::is_go_zero(value)
    }
    fn shape(value: &mut Value) {
        T::shape(value)
    }
    fn null_item() -> Option<Value> {
        T::null_item()
    }
}

/// A proto2 optional field: the type inside decides.
impl<T: Shape> Shape for Option<T> {
    fn is_go_zero(value: &Value) -> bool {
        T::is_go_zero(value)
    }
    fn shape(value: &mut Value) {
        T::shape(value)
    }
    fn null_item() -> Option<Value> {
        T::null_item()
    }
}

/// A Go slice: nil and empty are zero.
impl<T: Shape> Shape for Vec<T> {
    fn is_go_zero(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Array(items) => items.is_empty(),
            _ => false,
        }
    }
    fn shape(value: &mut Value) {
        if let Value::Array(items) = value {
            for item in items {
                match (&item, T::null_item()) {
                    (Value::Null, Some(zero)) => *item = zero,
                    _ => T::shape(item),
                }
            }
        }
    }
}

/// A Go map: nil and empty are zero.
impl<T: Shape> Shape for BTreeMap<String, T> {
    fn is_go_zero(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Object(entries) => entries.is_empty(),
            _ => false,
        }
    }
    fn shape(value: &mut Value) {
        if let Value::Object(entries) = value {
            entries.values_mut().for_each(T::shape);
        }
    }
}

/// Shapes a JSON object field by field, with the mode names of the tables. `_field` only
/// names the message field, so that its Rust type picks the [`Shape`] impl.
pub(super) struct Shaper<'a>(pub(super) &'a mut Map<String, Value>);

impl Shaper<'_> {
    /// A Go value field tagged `omitempty`: left out when zero.
    pub(super) fn omit<M, F: Shape>(self, key: &str, _field: impl Fn(&M) -> &F) -> Self {
        if let Some(value) = self.0.get_mut(key) {
            if F::is_go_zero(value) {
                self.0.shift_remove(key);
            } else {
                F::shape(value);
            }
        }
        self
    }

    /// A Go pointer field: kept whenever set (`false`, `0` and `""` mean something); `null`
    /// decodes as nil, which `omitempty` leaves out. (The served kinds' pointer fields all
    /// have `omitempty`; TokenRequest's `boundObjectRef`, which has not, is never stored.)
    pub(super) fn ptr<M, F: Shape>(self, key: &str, _field: impl Fn(&M) -> &F) -> Self {
        match self.0.get_mut(key) {
            Some(Value::Null) => {
                self.0.shift_remove(key);
            }
            Some(value) => F::shape(value),
            None => {}
        }
        self
    }

    /// A Go field without `omitempty`: always kept, `null` included.
    pub(super) fn req<M, F: Shape>(self, key: &str, _field: impl Fn(&M) -> &F) -> Self {
        if let Some(value) = self.0.get_mut(key) {
            F::shape(value);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::go_json_round_trip;

    fn round_trip(api_version: &str, kind: &str, mut object: serde_json::Value) -> String {
        go_json_round_trip(api_version, kind, &mut object);
        object.to_string()
    }

    #[test]
    fn omitempty_zero_values_go_and_everything_else_stays() {
        let configmap = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "generateName": "", "labels": {}},
            "data": {}, "binaryData": {}, "immutable": false, "extra": {}
        });
        assert_eq!(
            round_trip("v1", "ConfigMap", configmap),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"immutable":false,"extra":{}}"#
        );
        // `null` is Go's nil (pointers) or zero value (maps, strings): left out either way.
        let configmap = json!({"metadata": {"name": "a", "labels": null, "namespace": null},
            "data": null, "immutable": null});
        assert_eq!(
            round_trip("v1", "ConfigMap", configmap),
            r#"{"metadata":{"name":"a"}}"#
        );
    }

    #[test]
    fn nested_messages_lists_and_maps_are_shaped_too() {
        let service = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {
                "selector": {}, "externalIPs": [], "clusterIP": "",
                "ports": [{"name": "", "port": 80, "nodePort": 0, "targetPort": 0}],
                "allocateLoadBalancerNodePorts": false
            },
            "status": {"loadBalancer": {"ingress": []}}
        });
        assert_eq!(
            round_trip("v1", "Service", service),
            r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":0}],"allocateLoadBalancerNodePorts":false},"status":{"loadBalancer":{}}}"#
        );
        // A `null` list item of a message type is Go's zero struct.
        let service = json!({"spec": {"ports": [null, {"port": 81}]},
            "metadata": {"ownerReferences": [null]}});
        assert_eq!(
            round_trip("v1", "Service", service),
            r#"{"spec":{"ports":[{"port":0},{"port":81}]},"metadata":{"ownerReferences":[{"apiVersion":"","kind":"","name":"","uid":""}]}}"#
        );
        // `rules` has no omitempty: Go writes it back, null included.
        let role = json!({"kind": "Role", "metadata": {"name": "r"}, "rules": null});
        assert_eq!(
            round_trip("rbac.authorization.k8s.io/v1", "Role", role),
            r#"{"kind":"Role","metadata":{"name":"r"},"rules":null}"#
        );
    }

    #[test]
    fn schemas_inside_a_custom_resource_definition_are_shaped() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "required": [], "properties": {
                "spec": {"type": "object", "properties": {}, "x-kubernetes-preserve-unknown-fields": false,
                    "items": {"type": "string", "format": ""}}}}}}]}});
        assert_eq!(
            round_trip("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd),
            r#"{"spec":{"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":false,"items":{"type":"string"}}}}}}]}}"#
        );
    }

    #[test]
    fn kinds_without_a_table_are_left_alone() {
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"a": {}}});
        assert_eq!(
            round_trip("example.com/v1", "Widget", custom),
            r#"{"apiVersion":"example.com/v1","kind":"Widget","spec":{"a":{}}}"#
        );
    }
}

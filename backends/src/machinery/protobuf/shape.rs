//! Go's round trip of a built-in object, on its JSON: kube-apiserver decodes every body into
//! the kind's Go struct, encodes that again and stores it as protobuf, so
//! - an `omitempty` value field holding its zero value (`""`, `0`, `false`, `null`, an empty
//!   list or map) is not stored and not answered (`data: {}` in a ConfigMap, `selector: {}`
//!   in a Service, `secrets: []` in a ServiceAccount), nor is a `null` pointer;
//! - a `null` where Go has a value type is that type's zero value (`""`, `0`, `false`, a
//!   message's zero struct: `ports: [null]` is a zero port that defaulting then fills in);
//! - a list or map without `omitempty` that is empty comes back `null`, as protobuf keeps
//!   no empty collections (an EndpointSlice's `endpoints: []`).
//!
//! Everything else stays as it is, fields the tables do not know included. Driven by the
//! per-message tables of the protobuf conversion (`messages.rs`), so a field's mode is
//! written down once.

use std::collections::BTreeMap;

use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// Which round trip: Go's decoding and encoding of a request body (what kube's field manager
/// and strategies see), or that and the protobuf storage after them (what is stored and read
/// back: empty lists and maps without `omitempty` become `null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Decode,
    Store,
}

/// A message or scalar type as Go's JSON encoding treats it.
pub(super) trait Shape {
    /// Whether Go decodes `value` into this type's zero value, which `omitempty` leaves out.
    /// Go never leaves out a struct (a message, a time, a quantity), so they say no.
    fn is_go_zero(_value: &Value) -> bool {
        false
    }

    /// Rewrites `value` (not `null`) as Go writes this type back in `pass`.
    fn shape(_value: &mut Value, _pass: Pass) {}

    /// What Go writes for a `null` decoded into this type where it is not left out: the zero
    /// value of a value type; `None` for what stays `null` (pointers, slices, maps, times).
    fn decoded_null() -> Option<Value> {
        None
    }

    /// Whether an empty value of this type is stored as `null` (slices and maps, which
    /// protobuf cannot tell from nil).
    fn empty_is_nil() -> bool {
        false
    }
}

/// Shapes `value` as a `T` where Go writes it whatever it holds (a field without
/// `omitempty`, a list item, a map value).
fn shape_kept<T: Shape>(value: &mut Value, pass: Pass) {
    let empty = match value {
        Value::Null => {
            if let Some(zero) = T::decoded_null() {
                *value = zero;
            }
            return;
        }
        Value::Array(items) => items.is_empty(),
        Value::Object(entries) => entries.is_empty(),
        _ => false,
    };
    if empty && T::empty_is_nil() && pass == Pass::Store {
        *value = Value::Null;
    } else {
        T::shape(value, pass);
    }
}

impl Shape for String {
    fn is_go_zero(value: &Value) -> bool {
        matches!(value, Value::Null) || value.as_str() == Some("")
    }
    fn decoded_null() -> Option<Value> {
        Some(Value::String(String::new()))
    }
}

impl Shape for bool {
    fn is_go_zero(value: &Value) -> bool {
        matches!(value, Value::Null | Value::Bool(false))
    }
    fn decoded_null() -> Option<Value> {
        Some(Value::Bool(false))
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
    fn decoded_null() -> Option<Value> {
        Some(Value::from(0))
    }
}

impl Shape for i64 {
    fn is_go_zero(value: &Value) -> bool {
        is_zero_number(value)
    }
    fn decoded_null() -> Option<Value> {
        Some(Value::from(0))
    }
}

impl Shape for f64 {
    fn is_go_zero(value: &Value) -> bool {
        is_zero_number(value)
    }
    fn decoded_null() -> Option<Value> {
        Some(Value::from(0))
    }
}

/// `[]byte`, written as base64: empty is zero; nil is `null`.
impl Shape for Vec<u8> {
    fn is_go_zero(value: &Value) -> bool {
        String::is_go_zero(value)
    }
}

impl Shape for metav1::Time {}
impl Shape for metav1::MicroTime {}
impl Shape for metav1::FieldsV1 {}
/// Go's zero `IntOrString` is the int 0.
impl Shape for IntOrString {
    fn decoded_null() -> Option<Value> {
        Some(Value::from(0))
    }
}
/// Go writes the zero `Quantity` as "0".
impl Shape for Quantity {
    fn decoded_null() -> Option<Value> {
        Some(Value::String("0".into()))
    }
}
/// `ExtraValue` is a `[]string`, only ever a map's value here.
impl Shape for authnv1::ExtraValue {}
impl Shape for authzv1::ExtraValue {}

/// Wrappers whose JSON is the wrapped type's: a box, and a proto2 optional field.
macro_rules! shape_as_inner {
    ($($wrapper:ident),*) => {$(
        impl<T: Shape> Shape for $wrapper<T> {
            fn is_go_zero(value: &Value) -> bool {
                T::is_go_zero(value)
            }
            fn shape(value: &mut Value, pass: Pass) {
                T::shape(value, pass)
            }
            fn decoded_null() -> Option<Value> {
                T::decoded_null()
            }
            fn empty_is_nil() -> bool {
                T::empty_is_nil()
            }
        }
    )*};
}

shape_as_inner!(Box, Option);

/// A Go slice: nil and empty are zero.
impl<T: Shape> Shape for Vec<T> {
    fn is_go_zero(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Array(items) => items.is_empty(),
            _ => false,
        }
    }
    fn shape(value: &mut Value, pass: Pass) {
        if let Value::Array(items) = value {
            items
                .iter_mut()
                .for_each(|item| shape_item::<T>(item, pass));
        }
    }
    fn empty_is_nil() -> bool {
        true
    }
}

/// A list item or map value: `null` decodes as the type's zero value; anything else is
/// shaped as the type (an empty list inside a list stays).
fn shape_item<T: Shape>(item: &mut Value, pass: Pass) {
    match item {
        Value::Null => {
            if let Some(zero) = T::decoded_null() {
                *item = zero;
            }
        }
        _ => T::shape(item, pass),
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
    fn shape(value: &mut Value, pass: Pass) {
        if let Value::Object(entries) = value {
            entries
                .values_mut()
                .for_each(|entry| shape_item::<T>(entry, pass));
        }
    }
    fn empty_is_nil() -> bool {
        true
    }
}

/// Shapes a JSON object field by field, with the mode names of the tables. `_field` only
/// names the message field, so that its Rust type picks the [`Shape`] impl.
pub(super) struct Shaper<'a>(pub(super) &'a mut Map<String, Value>, pub(super) Pass);

impl Shaper<'_> {
    /// A Go value field tagged `omitempty`: left out when zero.
    pub(super) fn omit<M, F: Shape>(self, key: &str, _field: impl Fn(&M) -> &F) -> Self {
        if let Some(value) = self.0.get_mut(key) {
            if F::is_go_zero(value) {
                self.0.shift_remove(key);
            } else {
                F::shape(value, self.1);
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
            Some(value) => F::shape(value, self.1),
            None => {}
        }
        self
    }

    /// A Go field without `omitempty`: always kept, with Go's zero value for a `null` value
    /// type and `null` for an empty list or map.
    pub(super) fn req<M, F: Shape>(self, key: &str, _field: impl Fn(&M) -> &F) -> Self {
        if let Some(value) = self.0.get_mut(key) {
            shape_kept::<F>(value, self.1);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{go_json_shaper, Pass};

    fn round_trip(api_version: &str, kind: &str, mut object: serde_json::Value) -> String {
        if let Some(shape) = go_json_shaper(api_version, kind) {
            shape(&mut object, Pass::Store);
        }
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
        // Without omitempty: a null value type is its zero value, an empty list null (what
        // protobuf storage gives back), a map value or list item null its type's zero.
        let binding = json!({"roleRef": {"apiGroup": null, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u", "apiGroup": null}],
            "metadata": {"labels": {"a": null}, "finalizers": [null]}});
        assert_eq!(
            round_trip("rbac.authorization.k8s.io/v1", "RoleBinding", binding),
            r#"{"roleRef":{"apiGroup":"","kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"u"}],"metadata":{"labels":{"a":""},"finalizers":[""]}}"#
        );
        let slice = json!({"addressType": "IPv4", "endpoints": [], "ports": [{"port": null}]});
        assert_eq!(
            round_trip("discovery.k8s.io/v1", "EndpointSlice", slice),
            r#"{"addressType":"IPv4","endpoints":null,"ports":[{}]}"#
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

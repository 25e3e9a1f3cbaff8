//! Reading the parts of RBAC objects this module needs out of `serde_json::Value`, with Go's
//! decoding rules: an absent or `null` field reads as its zero value.

use serde_json::{Map, Value};

use crate::authz::rbac::PolicyRule;

/// `metadata.name`, or `""`.
pub(super) fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.<key>` (`labels` or `annotations`) as a map; empty when absent, `null` or not an
/// object, since Go decodes all of those to a nil map.
pub(super) fn string_map<'a>(object: &'a Value, key: &str) -> &'a Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    object
        .get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// The elements of the array at `object[key]`; empty when absent or `null`.
pub(super) fn array<'a>(object: &'a Value, key: &str) -> &'a [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The role's `rules`, parsed. A rule that does not parse is left out: it grants nothing to
/// the authorizer either, so reconciliation should not count it as present.
pub(super) fn rules(role: &Value) -> Vec<PolicyRule> {
    array(role, "rules")
        .iter()
        .filter_map(|r| serde_json::from_value(r.clone()).ok())
        .collect()
}

/// A rule in the form kube's `equality.Semantic.DeepEqual` compares: field by field, lists in
/// order, an absent list equal to an empty one. Unparseable rules compare as raw JSON.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RuleKey {
    Parsed(PolicyRule),
    Raw(Value),
}

impl RuleKey {
    pub(super) fn of(rule: &Value) -> Self {
        match serde_json::from_value(rule.clone()) {
            Ok(parsed) => RuleKey::Parsed(parsed),
            Err(_) => RuleKey::Raw(rule.clone()),
        }
    }
}

/// Sets `metadata.<key>` on `object`, creating `metadata` when it is missing or not an object.
/// Existing keys keep their place, so a written object reads like the stored one.
pub(super) fn set_metadata_field(object: &mut Map<String, Value>, key: &str, value: Value) {
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => {
            metadata.insert(key.to_string(), value);
        }
        _ => {
            let mut metadata = Map::new();
            metadata.insert(key.to_string(), value);
            object.insert("metadata".to_string(), Value::Object(metadata));
        }
    }
}

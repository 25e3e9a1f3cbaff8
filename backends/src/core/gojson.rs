//! Go's typed JSON decoding, as kube-apiserver applies it to request bodies before anything
//! else looks at them: a field of the wrong JSON type is a 400 worded as Go's
//! `UnmarshalTypeError` inside kube's decode error (`Role in version "v1" cannot be handled as
//! a Role: json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type
//! []string`), and `null` or an absent field is Go's zero value. Also renders values as kube's
//! field errors print them (`field.Error` JSON-encodes anything that is not a string, number
//! or bool).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::machinery::json_kind;
use crate::status::{ApiError, ApiResult};

/// Type-checks the fields of one kind's body. `go_struct` is the innermost Go struct holding
/// the field and `path` its full dotted JSON path from the object root, which is how Go names
/// the field in the error (`PolicyRule.rules.verbs`).
pub(crate) struct GoJson {
    kind: &'static str,
}

impl GoJson {
    pub(crate) fn new(kind: &'static str) -> Self {
        GoJson { kind }
    }

    /// The kind being decoded, which is also the Go struct holding its top-level fields.
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    /// The 400 for a value of the wrong JSON type.
    pub(crate) fn mismatch(
        &self,
        value: &Value,
        go_struct: &str,
        path: &str,
        go_type: &str,
    ) -> ApiError {
        let found = json_kind(value);
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {found} into Go struct field {go_struct}.{path} of type {go_type}",
            kind = self.kind
        ))
    }

    /// A struct-valued field (`go_type` is its Go type, e.g. `v1.RoleRef`); `None` when it is
    /// absent or `null` (Go's zero struct, or a nil pointer).
    pub(crate) fn object<'a>(
        &self,
        value: Option<&'a Value>,
        go_struct: &str,
        path: &str,
        go_type: &str,
    ) -> ApiResult<Option<&'a Map<String, Value>>> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => Err(self.mismatch(other, go_struct, path, go_type)),
        }
    }

    /// A list of structs or values (`go_type` is the slice type, e.g. `[]v1.PolicyRule`).
    pub(crate) fn array<'a>(
        &self,
        value: Option<&'a Value>,
        go_struct: &str,
        path: &str,
        go_type: &str,
    ) -> ApiResult<&'a [Value]> {
        match value {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(self.mismatch(other, go_struct, path, go_type)),
        }
    }

    /// A string field; `go_type` is `string` or a named string type (`v1.LabelSelectorOperator`).
    pub(crate) fn typed_string(
        &self,
        value: Option<&Value>,
        go_struct: &str,
        path: &str,
        go_type: &str,
    ) -> ApiResult<String> {
        match value {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.mismatch(other, go_struct, path, go_type)),
        }
    }

    pub(crate) fn string(
        &self,
        value: Option<&Value>,
        go_struct: &str,
        path: &str,
    ) -> ApiResult<String> {
        self.typed_string(value, go_struct, path, "string")
    }

    pub(crate) fn boolean(
        &self,
        value: Option<&Value>,
        go_struct: &str,
        path: &str,
    ) -> ApiResult<bool> {
        match value {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.mismatch(other, go_struct, path, "bool")),
        }
    }

    /// A list of strings; `go_type` is the list's Go type (`[]string`, `v1.ExtraValue`). An
    /// element of the wrong type is reported with the element type, as Go does.
    pub(crate) fn strings(
        &self,
        value: Option<&Value>,
        go_struct: &str,
        path: &str,
        go_type: &str,
    ) -> ApiResult<Vec<String>> {
        self.array(value, go_struct, path, go_type)?
            .iter()
            .map(|item| self.string(Some(item), go_struct, path))
            .collect()
    }

    /// A `map[string]string`.
    pub(crate) fn string_map(
        &self,
        value: Option<&Value>,
        go_struct: &str,
        path: &str,
    ) -> ApiResult<BTreeMap<String, String>> {
        let Some(map) = self.object(value, go_struct, path, "map[string]string")? else {
            return Ok(BTreeMap::new());
        };
        map.iter()
            .map(|(k, v)| Ok((k.clone(), self.string(Some(v), go_struct, path)?)))
            .collect()
    }

    /// A `map[string]<list of strings>` such as `extra` (`value_type` is the list's Go type,
    /// `v1.ExtraValue`).
    pub(crate) fn string_lists_map(
        &self,
        value: Option<&Value>,
        go_struct: &str,
        path: &str,
        value_type: &str,
    ) -> ApiResult<BTreeMap<String, Vec<String>>> {
        let map_type = format!("map[string]{value_type}");
        let Some(map) = self.object(value, go_struct, path, &map_type)? else {
            return Ok(BTreeMap::new());
        };
        map.iter()
            .map(|(k, v)| {
                let values = self.strings(Some(v), go_struct, path, value_type)?;
                Ok((k.clone(), values))
            })
            .collect()
    }
}

/// A value as apimachinery's `field.Error` prints a non-scalar bad value: Go's JSON encoding,
/// which escapes `<`, `>` and `&` (they only ever occur inside strings, so replacing them in
/// the encoded text is exact).
pub(crate) fn go_json(value: &Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// A `[]string` bad value as kube 1.33's `field.Error` prints it (Go's `%#v`):
/// `[]string{"/healthz", "/metrics"}`.
pub(crate) fn go_syntax_strings(values: &[String]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| kubegate_policy::quote::go_quote(v))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A struct of string fields as kube 1.33's `field.Error` prints it (Go's `%#v`):
/// `rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"r"}`.
pub(crate) fn go_syntax_struct(type_name: &str, fields: &[(&str, &str)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{name}:{}", kubegate_policy::quote::go_quote(value)))
        .collect();
    format!("{type_name}{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mismatches_name_the_innermost_struct_and_the_full_path() {
        let go = GoJson::new("Role");
        let err = go
            .strings(Some(&json!("get")), "PolicyRule", "rules.verbs", "[]string")
            .err()
            .map(|e| (e.code, e.message));
        assert_eq!(
            err,
            Some((
                400,
                "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string".to_string()
            ))
        );
        let err = go
            .strings(Some(&json!([1])), "PolicyRule", "rules.verbs", "[]string")
            .err()
            .map(|e| e.message);
        assert!(err.is_some_and(|m| m.ends_with("PolicyRule.rules.verbs of type string")));
        assert_eq!(
            go.strings(Some(&json!(["a", null])), "P", "x", "[]string")
                .ok(),
            Some(vec!["a".to_string(), String::new()])
        );
        assert_eq!(go.string(None, "P", "x").ok(), Some(String::new()));
        assert!(go.boolean(Some(&json!("true")), "P", "x").is_err());
        assert!(go
            .string_lists_map(Some(&json!({"a": "b"})), "S", "spec.extra", "v1.ExtraValue")
            .err()
            .is_some_and(|e| e.message.ends_with("S.spec.extra of type v1.ExtraValue")));
    }

    #[test]
    fn bad_values_print_as_go_prints_them() {
        assert_eq!(
            go_json(&json!({"Path": "/a<b>&c", "Verb": "get"})),
            r#"{"Path":"/a\u003cb\u003e\u0026c","Verb":"get"}"#
        );
        assert_eq!(
            go_syntax_strings(&["/healthz".into(), "/metrics".into()]),
            r#"[]string{"/healthz", "/metrics"}"#
        );
        assert_eq!(
            go_syntax_struct(
                "authorization.NonResourceAttributes",
                &[("Path", "/a<b>&\"c"), ("Verb", "get")]
            ),
            r#"authorization.NonResourceAttributes{Path:"/a<b>&\"c", Verb:"get"}"#
        );
    }
}

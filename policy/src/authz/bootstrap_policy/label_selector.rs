//! `metav1.LabelSelector` objects (`matchLabels` + `matchExpressions`) matched against an
//! object's labels, as `metav1.LabelSelectorAsSelector(...).Matches(...)` does — what
//! ClusterRole `aggregationRule.clusterRoleSelectors` hold.

use serde_json::{Map, Value};

/// Does the `metav1.LabelSelector` `selector` match `labels`?
///
/// As kube: every `matchLabels` pair and every `matchExpressions` term must hold (`In`,
/// `NotIn`, `Exists`, `DoesNotExist`); an empty selector (`{}`) matches everything; a `null`
/// selector (Go's nil pointer) matches nothing. A selector kube would reject (unknown operator,
/// `In` without values, `Exists` with values, malformed keys or values) matches nothing.
pub fn label_selector_matches(selector: &Value, labels: &Map<String, Value>) -> bool {
    LabelSelector::parse(selector).is_ok_and(|s| s.matches(labels))
}

/// A parsed selector: `None` for nil (nothing), else requirements that must all hold (no
/// requirements: everything).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LabelSelector(Option<Vec<Requirement>>);

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    /// `In`, and each `matchLabels` pair (kube's `Equals` matches the same way).
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// kube's `LabelSelectorAsSelector`: the selector, or why kube would refuse it.
    pub(super) fn parse(selector: &Value) -> Result<Self, String> {
        let object = match selector {
            Value::Null => return Ok(LabelSelector(None)),
            Value::Object(object) => object,
            other => return Err(format!("label selector must be an object, not {other}")),
        };
        let mut requirements = Vec::new();
        match object.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(match_labels)) => {
                for (key, value) in match_labels {
                    let value = value
                        .as_str()
                        .ok_or_else(|| format!("matchLabels[{key}] must be a string"))?;
                    requirements.push(Requirement::new(key, Operator::In, vec![value.into()])?);
                }
            }
            Some(_) => return Err("matchLabels must be an object".into()),
        }
        match object.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(expressions)) => {
                for expression in expressions {
                    requirements.push(Requirement::from_expression(expression)?);
                }
            }
            Some(_) => return Err("matchExpressions must be a list".into()),
        }
        Ok(LabelSelector(Some(requirements)))
    }

    pub(super) fn matches(&self, labels: &Map<String, Value>) -> bool {
        match &self.0 {
            None => false,
            Some(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }
}

impl Requirement {
    fn from_expression(expression: &Value) -> Result<Self, String> {
        let key = expression
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let operator = match expression.get("operator").and_then(Value::as_str) {
            Some("In") => Operator::In,
            Some("NotIn") => Operator::NotIn,
            Some("Exists") => Operator::Exists,
            Some("DoesNotExist") => Operator::DoesNotExist,
            other => {
                return Err(format!(
                    "{:?} is not a valid label selector operator",
                    other.unwrap_or_default()
                ))
            }
        };
        let values = match expression.get("values") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(values)) => values
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("values must be strings")?,
            Some(_) => return Err("values must be a list".into()),
        };
        Requirement::new(key, operator, values)
    }

    /// kube's `labels.NewRequirement` checks.
    fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        if !is_qualified_name(key) {
            return Err(format!("invalid label key {key:?}"));
        }
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err("for 'in', 'notin' operators, values set can't be empty".into())
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err("values set must be empty for exists and does not exist".into())
            }
            _ => {}
        }
        if let Some(bad) = values.iter().find(|v| !is_label_value(v)) {
            return Err(format!("invalid label value {bad:?}"));
        }
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    fn matches(&self, labels: &Map<String, Value>) -> bool {
        let value = labels.get(&self.key).and_then(Value::as_str);
        let in_values = |v: &str| self.values.iter().any(|want| want == v);
        match self.operator {
            Operator::In => value.is_some_and(in_values),
            Operator::NotIn => !value.is_some_and(in_values),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// kube's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain.
fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        None => is_name_part(key),
        Some((prefix, name)) => {
            !prefix.is_empty() && is_dns1123_subdomain(prefix) && is_name_part(name)
        }
    }
}

/// The name part of a qualified name: 1-63 characters, alphanumeric at both ends, `-_.`
/// inside.
fn is_name_part(name: &str) -> bool {
    !name.is_empty() && is_label_value(name)
}

/// `IsValidLabelValue`: empty, or up to 63 characters of the name-part form.
fn is_label_value(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let bytes = value.as_bytes();
    bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Subdomain`: up to 253 characters of dot-separated lowercase labels.
fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn selector_table() {
        let l = labels(json!({"app": "web", "tier": "front", "example.com/team": "a"}));
        let cases = [
            (json!({}), true, "empty matches everything"),
            (Value::Null, false, "null matches nothing"),
            (
                json!({"matchLabels": {"app": "web"}}),
                true,
                "matchLabels hit",
            ),
            (
                json!({"matchLabels": {"app": "db"}}),
                false,
                "matchLabels wrong value",
            ),
            (
                json!({"matchLabels": {"app": "web", "tier": "back"}}),
                false,
                "all must hold",
            ),
            (
                json!({"matchLabels": {"example.com/team": "a"}}),
                true,
                "prefixed key",
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}),
                true,
                "In",
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}),
                false,
                "In miss",
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}),
                true,
                "NotIn",
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}),
                false,
                "NotIn hit",
            ),
            (
                json!({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]}),
                true,
                "NotIn absent key",
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                true,
                "Exists",
            ),
            (
                json!({"matchExpressions": [{"key": "missing", "operator": "Exists"}]}),
                false,
                "Exists miss",
            ),
            (
                json!({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"}]}),
                true,
                "DoesNotExist",
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": null}]}),
                false,
                "DoesNotExist present",
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}),
                false,
                "labels and expressions both hold",
            ),
            (
                json!({"matchLabels": null, "matchExpressions": null}),
                true,
                "nulls read as empty",
            ),
            // Selectors kube refuses match nothing.
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["web"]}]}),
                false,
                "bad operator",
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}),
                false,
                "In without values",
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["front"]}]}),
                false,
                "Exists with values",
            ),
            (
                json!({"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}),
                false,
                "bad key",
            ),
            (
                json!({"matchLabels": {"app": "not valid!"}}),
                false,
                "bad value",
            ),
            (
                json!({"matchLabels": {"app": 1}}),
                false,
                "non-string value",
            ),
            (json!("app=web"), false, "string selector"),
        ];
        for (selector, want, why) in cases {
            assert_eq!(
                label_selector_matches(&selector, &l),
                want,
                "{why}: {selector}"
            );
        }
    }

    #[test]
    fn key_and_value_syntax() {
        for key in [
            "a",
            "app",
            "a.b-c_d",
            "example.com/x",
            "rbac.authorization.k8s.io/aggregate-to-view",
        ] {
            assert!(is_qualified_name(key), "{key}");
        }
        for key in [
            "",
            "-a",
            "a-",
            "/a",
            "a/",
            "Example.com/a",
            "a/b/c",
            &"x".repeat(64),
        ] {
            assert!(!is_qualified_name(key), "{key}");
        }
        assert!(is_label_value(""));
        assert!(is_label_value("true"));
        assert!(!is_label_value("-x"));
    }
}

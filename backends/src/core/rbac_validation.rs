//! kube's `pkg/apis/rbac/validation`: policy rules, a ClusterRole's `aggregationRule`, a
//! binding's `roleRef` and `subjects`, and `roleRef` immutability, with kube's field paths and
//! messages. Also apimachinery's label-selector checks (`ValidateLabelSelector`,
//! `ValidateLabelSelectorRequirement`), which the access reviews reuse for their selectors.
//!
//! Objects reach these functions after the strategy has put them in Go's shape (defaults
//! applied, types checked), so a missing field reads as Go's zero value.

use std::collections::BTreeMap;

use serde_json::Value;

use super::causes::{index_path, invalid_raw};
use super::gojson::{go_syntax_strings, go_syntax_struct};
use super::{items, str_at};
use crate::machinery::selectors::from_label_selector_json;
use crate::machinery::validation::{
    is_dns1123_subdomain, is_path_segment_name, is_qualified_name, is_valid_label_value,
};
use crate::status::{
    field_forbidden, field_invalid, field_not_supported, field_required, StatusCause,
};

/// The API group of RBAC, the only `roleRef.apiGroup` kube accepts.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The strings of a list field (Go's zero value, no strings, when unset).
pub(crate) fn strings_at(value: Option<&Value>) -> Vec<String> {
    items(value)
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect()
}

/// `ValidatePolicyRule` for every entry of `rules`; `namespaced` for a Role, whose rules
/// cannot name non-resource URLs.
pub(crate) fn validate_rules(object: &Value, namespaced: bool) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    for (i, rule) in items(object.get("rules")).iter().enumerate() {
        causes.extend(validate_policy_rule(
            rule,
            namespaced,
            &index_path("rules", i),
        ));
    }
    causes
}

/// kube's `ValidatePolicyRule`.
fn validate_policy_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<StatusCause> {
    let list = |key: &str| strings_at(rule.get(key));
    let mut causes = Vec::new();
    if list("verbs").is_empty() {
        causes.push(field_required(
            &format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = list("nonResourceURLs");
    if !urls.is_empty() {
        let field = format!("{path}.nonResourceURLs");
        if namespaced {
            causes.push(invalid_raw(
                &field,
                &go_syntax_strings(&urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !list("apiGroups").is_empty()
            || !list("resources").is_empty()
            || !list("resourceNames").is_empty()
        {
            causes.push(invalid_raw(
                &field,
                &go_syntax_strings(&urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return causes;
    }
    if list("apiGroups").is_empty() {
        causes.push(field_required(
            &format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if list("resources").is_empty() {
        causes.push(field_required(
            &format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    causes
}

/// The aggregation-rule part of `ValidateClusterRole`. `allow_invalid_label_values` is kube's
/// `AllowInvalidLabelValueInSelector`, set on update when the stored role already had such a
/// selector (so it stays updatable).
pub(crate) fn validate_aggregation_rule(
    object: &Value,
    allow_invalid_label_values: bool,
) -> Vec<StatusCause> {
    let Some(rule) = object.get("aggregationRule").filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let base = "aggregationRule.clusterRoleSelectors";
    let selectors = items(rule.get("clusterRoleSelectors"));
    let mut causes = Vec::new();
    if selectors.is_empty() {
        causes.push(field_required(
            base,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, selector) in selectors.iter().enumerate() {
        let path = index_path(base, i);
        causes.extend(validate_label_selector(
            selector,
            allow_invalid_label_values,
            &path,
        ));
        // kube converts the selector too and reports a failure with the (nil) result as the
        // value, whatever the checks above already said.
        if from_label_selector_json(selector).is_err() {
            causes.push(invalid_raw(&path, "null", "invalid label selector."));
        }
    }
    causes
}

/// kube's `hasInvalidLabelValueInLabelSelector` for a ClusterRole: whether any aggregation
/// selector fails the strict selector checks.
pub(crate) fn has_invalid_label_selector(object: &Value) -> bool {
    let rule = object.get("aggregationRule").unwrap_or(&Value::Null);
    items(rule.get("clusterRoleSelectors"))
        .iter()
        .any(|s| !validate_label_selector(s, false, "").is_empty())
}

/// apimachinery's `ValidateLabelSelector` (unknown operators refused).
fn validate_label_selector(
    selector: &Value,
    allow_invalid_label_values: bool,
    path: &str,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let labels_path = format!("{path}.matchLabels");
    // Go ranges over the map in random order; sorted keeps the causes stable.
    let labels: BTreeMap<&String, &Value> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    for (key, value) in labels {
        for m in is_qualified_name(key) {
            causes.push(field_invalid(&labels_path, key, &m));
        }
        let value = value.as_str().unwrap_or("");
        for m in is_valid_label_value(value) {
            causes.push(field_invalid(&labels_path, value, &m));
        }
    }
    for (i, requirement) in items(selector.get("matchExpressions")).iter().enumerate() {
        causes.extend(validate_label_selector_requirement(
            requirement,
            false,
            allow_invalid_label_values,
            &index_path(&format!("{path}.matchExpressions"), i),
        ));
    }
    causes
}

/// apimachinery's `ValidateLabelSelectorRequirement`. The access reviews allow unknown
/// operators (a newer client may know operators this server does not).
pub(crate) fn validate_label_selector_requirement(
    requirement: &Value,
    allow_unknown_operator: bool,
    allow_invalid_label_values: bool,
    path: &str,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let operator = str_at(requirement, "/operator");
    let values = strings_at(requirement.get("values"));
    match operator {
        "In" | "NotIn" => {
            if values.is_empty() {
                causes.push(field_required(
                    &format!("{path}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                causes.push(field_forbidden(
                    &format!("{path}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
        }
        _ => {
            if !allow_unknown_operator {
                causes.push(field_invalid(
                    &format!("{path}.operator"),
                    operator,
                    "not a valid selector operator",
                ));
            }
        }
    }
    let key = str_at(requirement, "/key");
    for m in is_qualified_name(key) {
        causes.push(field_invalid(&format!("{path}.key"), key, &m));
    }
    if !allow_invalid_label_values {
        for (i, value) in values.iter().enumerate() {
            for m in is_valid_label_value(value) {
                causes.push(field_invalid(
                    &index_path(&format!("{path}.values"), i),
                    value,
                    &m,
                ));
            }
        }
    }
    causes
}

/// The `roleRef` and `subjects` checks of `ValidateRoleBinding` (`cluster: false`) and
/// `ValidateClusterRoleBinding` (`cluster: true`).
pub(crate) fn validate_binding(object: &Value, cluster: bool) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let api_group = str_at(object, "/roleRef/apiGroup");
    if api_group != RBAC_GROUP {
        causes.push(field_not_supported(
            "roleRef.apiGroup",
            api_group,
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if cluster {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    let kind = str_at(object, "/roleRef/kind");
    if !kinds.contains(&kind) {
        causes.push(field_not_supported("roleRef.kind", kind, kinds));
    }
    let name = str_at(object, "/roleRef/name");
    if name.is_empty() {
        causes.push(field_required("roleRef.name", ""));
    } else {
        for m in is_path_segment_name(name) {
            causes.push(field_invalid("roleRef.name", name, &m));
        }
    }
    for (i, subject) in items(object.get("subjects")).iter().enumerate() {
        causes.extend(validate_subject(
            subject,
            !cluster,
            &index_path("subjects", i),
        ));
    }
    causes
}

/// kube's `ValidateRoleBindingSubject`.
fn validate_subject(subject: &Value, namespaced: bool, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let name = str_at(subject, "/name");
    let api_group = str_at(subject, "/apiGroup");
    if name.is_empty() {
        causes.push(field_required(&format!("{path}.name"), ""));
    }
    match str_at(subject, "/kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for m in is_dns1123_subdomain(name) {
                    causes.push(field_invalid(&format!("{path}.name"), name, &m));
                }
            }
            if !api_group.is_empty() {
                causes.push(field_not_supported(
                    &format!("{path}.apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if !namespaced && str_at(subject, "/namespace").is_empty() {
                causes.push(field_required(&format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != RBAC_GROUP {
                causes.push(field_not_supported(
                    &format!("{path}.apiGroup"),
                    api_group,
                    &[RBAC_GROUP],
                ));
            }
        }
        other => causes.push(field_not_supported(
            &format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    causes
}

/// The `roleRef` immutability of `ValidateRoleBindingUpdate`: the bad value is the new
/// reference, printed as kube prints its internal `rbac.RoleRef` (JSON without tags, so
/// with Go's field names).
pub(crate) fn validate_role_ref_update(object: &Value, old: &Value) -> Option<StatusCause> {
    let role_ref = |o: &Value| {
        (
            str_at(o, "/roleRef/apiGroup").to_string(),
            str_at(o, "/roleRef/kind").to_string(),
            str_at(o, "/roleRef/name").to_string(),
        )
    };
    let (api_group, kind, name) = role_ref(object);
    if (api_group.clone(), kind.clone(), name.clone()) == role_ref(old) {
        return None;
    }
    let rendered = go_syntax_struct(
        "rbac.RoleRef",
        &[("APIGroup", &api_group), ("Kind", &kind), ("Name", &name)],
    );
    Some(invalid_raw("roleRef", &rendered, "cannot change roleRef"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(causes: Vec<StatusCause>) -> Vec<String> {
        causes
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn policy_rules_as_kube() {
        let role = json!({"rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": []},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics"], "resources": ["pods"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "secrets"], "resourceNames": ["a"]},
        ]});
        assert_eq!(
            messages(validate_rules(&role, true)),
            vec![
                "rules[1].verbs: Required value: verbs must contain at least one value",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[1].resources: Required value: resource rules must supply at least one resource",
                r#"rules[2].nonResourceURLs: Invalid value: []string{"/healthz", "/metrics"}: namespaced rules cannot apply to non-resource URLs"#,
                r#"rules[2].nonResourceURLs: Invalid value: []string{"/healthz", "/metrics"}: rules cannot apply to both regular resources and non-resource URLs"#,
            ]
        );
        // A ClusterRole may hold non-resource rules, alone.
        let role = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert!(validate_rules(&role, false).is_empty());
    }

    #[test]
    fn aggregation_rules_need_a_valid_selector() {
        let ok = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}},
        ]}});
        assert!(validate_aggregation_rule(&ok, false).is_empty());
        assert_eq!(
            messages(validate_aggregation_rule(&json!({"aggregationRule": {}}), false)),
            vec!["aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"]
        );
        let bad = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Maybe", "values": ["x"]}]},
        ]}});
        assert_eq!(
            messages(validate_aggregation_rule(&bad, false)),
            vec![
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[1].operator: Invalid value: \"Maybe\": not a valid selector operator",
                "aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.",
            ]
        );
        let bad_value = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["not ok"]}]},
        ]}});
        assert!(has_invalid_label_selector(&bad_value));
        assert!(!has_invalid_label_selector(&ok));
        let relaxed = messages(validate_aggregation_rule(&bad_value, true));
        assert_eq!(
            relaxed,
            vec!["aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector."]
        );
    }

    #[test]
    fn bindings_as_kube() {
        let binding = json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
            ],
        });
        assert!(validate_binding(&binding, false).is_empty());
        assert!(validate_binding(&binding, true).is_empty());

        let binding = json!({
            "roleRef": {"apiGroup": "example.com", "kind": "Role", "name": "a/b"},
            "subjects": [
                {"kind": "ServiceAccount", "apiGroup": "v1", "name": "Bad_Name"},
                {"kind": "User", "name": "alice"},
                {"kind": "Robot", "name": ""},
            ],
        });
        assert_eq!(
            messages(validate_binding(&binding, true)),
            vec![
                "roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
                "subjects[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "subjects[0].apiGroup: Unsupported value: \"v1\": supported values: \"\"",
                "subjects[0].namespace: Required value",
                "subjects[1].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "subjects[2].name: Required value",
                "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        // A RoleBinding may bind a Role, and its service accounts default to its namespace.
        let binding = json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}],
        });
        assert!(validate_binding(&binding, false).is_empty());
        assert_eq!(
            messages(validate_binding(&json!({"roleRef": {}}), false)),
            vec![
                "roleRef.apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
            ]
        );
    }

    #[test]
    fn role_ref_is_immutable() {
        let old = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
        assert!(validate_role_ref_update(&old, &old).is_none());
        let new = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}});
        assert_eq!(
            validate_role_ref_update(&new, &old).map(|c| format!("{}: {}", c.field, c.message)),
            Some(r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#.to_string())
        );
    }
}

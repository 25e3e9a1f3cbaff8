//! Start-up reconciliation of the bootstrap ClusterRoles, ClusterRoleBindings, Roles and
//! RoleBindings with what is stored, as kube's `pkg/registry/rbac/reconciliation` runs it from
//! kube-apiserver (`Confirm: true`, `RemoveExtraPermissions: false`, `RemoveExtraSubjects:
//! false`): add what the bootstrap object has and the stored one lacks, never take away what
//! users added. Namespaced objects follow the same rules as cluster ones (kube runs one
//! `computeReconciledRole` / `computeReconciledRoleBinding` over both), less what only a
//! ClusterRole has (`aggregationRule`).
//!
//! - Labels and annotations are merged in; a value already stored wins.
//! - Missing rules are found with [`covers`] and appended, broken down to single-verb rules
//!   as kube appends them. A role whose bootstrap form is aggregated has no rules of its own,
//!   so its rules are left to the aggregation controller.
//! - Missing `aggregationRule` selectors are appended; an `aggregationRule` the bootstrap role
//!   does not have is removed (kube does this even in union mode).
//! - Missing binding subjects are appended; a binding whose `roleRef` differs is recreated,
//!   since `roleRef` is immutable. Subjects and `roleRef` are compared after kube's API
//!   defaulting of `apiGroup`, as kube compares them as stored.
//! - A stored object annotated `rbac.authorization.kubernetes.io/autoupdate: "false"` is left
//!   alone.

use serde_json::{Map, Value};

use super::objects;
use super::policy::AUTOUPDATE_ANNOTATION;
use crate::authz::rbac::{covers, RoleRef, Subject};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What to write to bring a stored ClusterRoleBinding or RoleBinding in line.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciled {
    /// Create this object (when nothing was stored) or update the stored one to it (it keeps
    /// the stored metadata, `resourceVersion` included, for a compare-and-swap update).
    Write(Value),
    /// The stored binding's `roleRef` differs and cannot be changed: delete the stored object
    /// (with its `uid` as precondition) and create this one.
    Recreate(Value),
}

/// The object to write so `existing` (as stored, or `None` when missing) carries the bootstrap
/// ClusterRole `expected`; `None` when nothing needs writing, including when the stored role
/// opted out with `autoupdate: "false"`.
///
/// When `existing` is `None` the result is `expected` itself, to create; otherwise it is
/// `existing` with the additions, to update.
pub fn reconcile_cluster_role(existing: Option<&Value>, expected: &Value) -> Option<Value> {
    reconcile_rule_owner(existing, expected, true)
}

/// The object to write so `existing` (as stored in the bootstrap role's namespace, or `None`
/// when missing) carries the bootstrap Role `expected`; `None` when nothing needs writing,
/// including when the stored role opted out with `autoupdate: "false"`. Like
/// [`reconcile_cluster_role`] without aggregation, which Roles do not have.
pub fn reconcile_role(existing: Option<&Value>, expected: &Value) -> Option<Value> {
    reconcile_rule_owner(existing, expected, false)
}

/// kube's `computeReconciledRole` in union mode, over a ClusterRole (`cluster`) or a Role.
fn reconcile_rule_owner(
    existing: Option<&Value>,
    expected: &Value,
    cluster: bool,
) -> Option<Value> {
    let Some(existing) = existing else {
        return Some(expected.clone());
    };
    if is_protected(existing) {
        return None;
    }
    // A stored object that is not a JSON object cannot be patched; replacing it is all that
    // can bring it in line.
    let Value::Object(mut reconciled) = existing.clone() else {
        return Some(expected.clone());
    };
    let mut changed = merge_metadata(&mut reconciled, existing, expected);

    // Expected rules the stored ones do not cover. For aggregated roles `expected` has none, so
    // nothing is ever missing: the aggregation controller owns those rules.
    let (_, missing) = covers(&objects::rules(existing), &objects::rules(expected));
    if !missing.is_empty() {
        let mut rules = objects::array(existing, "rules").to_vec();
        rules.extend(missing.iter().filter_map(|r| serde_json::to_value(r).ok()));
        reconciled.insert("rules".into(), Value::Array(rules));
        changed = true;
    }

    // A Role's rule owner has no aggregation rule in kube (`RoleRuleOwner` answers nil), so
    // whatever a stored Role carries there is neither compared nor touched.
    if cluster {
        changed |= reconcile_aggregation_rule(&mut reconciled, existing, expected);
    }
    changed.then_some(Value::Object(reconciled))
}

/// The write that brings the stored ClusterRoleBinding `existing` (or `None` when missing) in
/// line with the bootstrap `expected`; `None` when nothing needs writing, including when the
/// stored binding opted out with `autoupdate: "false"`.
pub fn reconcile_cluster_role_binding(
    existing: Option<&Value>,
    expected: &Value,
) -> Option<Reconciled> {
    reconcile_binding(existing, expected)
}

/// The write that brings the stored RoleBinding `existing` (in the bootstrap binding's
/// namespace, or `None` when missing) in line with the bootstrap `expected`: the same rules as
/// [`reconcile_cluster_role_binding`] (subjects unioned, a changed `roleRef` recreated,
/// `autoupdate: "false"` respected).
pub fn reconcile_role_binding(existing: Option<&Value>, expected: &Value) -> Option<Reconciled> {
    reconcile_binding(existing, expected)
}

/// kube's `computeReconciledRoleBinding` in union mode, for either kind of binding.
fn reconcile_binding(existing: Option<&Value>, expected: &Value) -> Option<Reconciled> {
    let Some(existing) = existing else {
        return Some(Reconciled::Write(expected.clone()));
    };
    // Checked before the roleRef, as kube does: an opted-out binding is never recreated.
    if is_protected(existing) {
        return None;
    }
    if role_ref(existing) != role_ref(expected) {
        return Some(Reconciled::Recreate(expected.clone()));
    }
    let Value::Object(mut reconciled) = existing.clone() else {
        return Some(Reconciled::Recreate(expected.clone()));
    };
    let mut changed = merge_metadata(&mut reconciled, existing, expected);

    let stored: Vec<Subject> = subjects(existing).map(|(_, s)| s).collect();
    let mut missing: Vec<(&Value, Subject)> = Vec::new();
    for (value, subject) in subjects(expected) {
        if !stored.contains(&subject) && !missing.iter().any(|(_, m)| *m == subject) {
            missing.push((value, subject));
        }
    }
    if !missing.is_empty() {
        let mut all = objects::array(existing, "subjects").to_vec();
        all.extend(missing.into_iter().map(|(value, _)| value.clone()));
        reconciled.insert("subjects".into(), Value::Array(all));
        changed = true;
    }
    changed.then_some(Reconciled::Write(Value::Object(reconciled)))
}

/// kube's opt-out: exactly `"false"`; anything else (absent, `"true"`, junk) reconciles.
fn is_protected(existing: &Value) -> bool {
    objects::string_map(existing, "annotations")
        .get(AUTOUPDATE_ANNOTATION)
        .and_then(Value::as_str)
        == Some("false")
}

/// Merges `expected`'s annotations and labels under `existing`'s (stored values win) into
/// `reconciled`; whether either changed.
fn merge_metadata(reconciled: &mut Map<String, Value>, existing: &Value, expected: &Value) -> bool {
    let mut changed = false;
    for key in ["annotations", "labels"] {
        let stored = objects::string_map(existing, key);
        let mut merged = objects::string_map(expected, key).clone();
        for (k, v) in stored {
            merged.insert(k.clone(), v.clone());
        }
        if merged != *stored {
            objects::set_metadata_field(reconciled, key, Value::Object(merged));
            changed = true;
        }
    }
    changed
}

/// kube's aggregation-rule half of `computeReconciledRole` in union mode; whether it changed
/// `reconciled`.
fn reconcile_aggregation_rule(
    reconciled: &mut Map<String, Value>,
    existing: &Value,
    expected: &Value,
) -> bool {
    let expected_rule = aggregation_rule(expected);
    let existing_rule = aggregation_rule(existing);
    match (expected_rule, existing_rule) {
        (None, None) => false,
        // The bootstrap role is not aggregated: an aggregation rule would overwrite its rules,
        // so kube drops it.
        (None, Some(_)) => {
            reconciled.remove("aggregationRule");
            true
        }
        (Some(expected_rule), existing_rule) => {
            let stored: &[Value] = existing_rule
                .map(|r| objects::array(r, "clusterRoleSelectors"))
                .unwrap_or_default();
            let stored_keys: Vec<Value> = stored.iter().map(selector_key).collect();
            let missing: Vec<Value> = objects::array(expected_rule, "clusterRoleSelectors")
                .iter()
                .filter(|s| !stored_keys.contains(&selector_key(s)))
                .cloned()
                .collect();
            if missing.is_empty() {
                return false;
            }
            let mut rule = match existing_rule {
                Some(Value::Object(rule)) => rule.clone(),
                _ => Map::new(),
            };
            let mut selectors = stored.to_vec();
            selectors.extend(missing);
            rule.insert("clusterRoleSelectors".into(), Value::Array(selectors));
            reconciled.insert("aggregationRule".into(), Value::Object(rule));
            true
        }
    }
}

/// `aggregationRule`, treating `null` as absent (Go's nil pointer).
fn aggregation_rule(role: &Value) -> Option<&Value> {
    role.get("aggregationRule").filter(|v| !v.is_null())
}

/// A label selector in the form `equality.Semantic.DeepEqual` compares: absent or `null`
/// `matchLabels`, `matchExpressions` and `values` equal empty ones; lists in order.
fn selector_key(selector: &Value) -> Value {
    let non_null = |v: Option<&Value>, empty: Value| match v {
        None | Some(Value::Null) => empty,
        Some(v) => v.clone(),
    };
    let expressions: Vec<Value> = objects::array(selector, "matchExpressions")
        .iter()
        .map(|e| {
            serde_json::json!({
                "key": non_null(e.get("key"), Value::String(String::new())),
                "operator": non_null(e.get("operator"), Value::String(String::new())),
                "values": non_null(e.get("values"), Value::Array(vec![])),
            })
        })
        .collect();
    serde_json::json!({
        "matchLabels": non_null(selector.get("matchLabels"), Value::Object(Map::new())),
        "matchExpressions": expressions,
    })
}

/// The binding's `roleRef`, with kube's defaulting (`SetDefaults_ClusterRoleBinding`: an empty
/// `apiGroup` is rbac.authorization.k8s.io), since kube compares objects as the API server
/// stores them. One that does not parse reads as the zero value, which never equals a
/// bootstrap roleRef, so the binding is recreated.
fn role_ref(binding: &Value) -> RoleRef {
    let mut role_ref: RoleRef = binding
        .get("roleRef")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default();
    if role_ref.api_group.is_empty() {
        role_ref.api_group = RBAC_GROUP.to_string();
    }
    role_ref
}

/// The binding's subjects that parse, each with its JSON as written, defaulted as kube's
/// `SetDefaults_Subject` does (`User` and `Group` get apiGroup rbac.authorization.k8s.io), so
/// a stored `{kind: Group, name: system:masters}` counts as the bootstrap subject.
fn subjects(binding: &Value) -> impl Iterator<Item = (&Value, Subject)> {
    objects::array(binding, "subjects").iter().filter_map(|v| {
        let mut subject: Subject = serde_json::from_value(v.clone()).ok()?;
        if subject.api_group.is_empty() && matches!(subject.kind.as_str(), "User" | "Group") {
            subject.api_group = RBAC_GROUP.to_string();
        }
        Some((v, subject))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::bootstrap_policy::{cluster_role_bindings, cluster_roles};
    use serde_json::json;

    fn bootstrap_role(name: &str) -> Value {
        cluster_roles()
            .into_iter()
            .find(|r| r["metadata"]["name"] == name)
            .unwrap()
    }

    fn bootstrap_binding(name: &str) -> Value {
        cluster_role_bindings()
            .into_iter()
            .find(|r| r["metadata"]["name"] == name)
            .unwrap()
    }

    /// `object` as the store would hand it back: with server-set metadata.
    fn stored(mut object: Value) -> Value {
        object["metadata"]["resourceVersion"] = json!("42");
        object["metadata"]["uid"] = json!("0b9e-uid");
        object
    }

    fn rules_of(v: &Value) -> Vec<Value> {
        v["rules"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn missing_role_is_created() {
        let expected = bootstrap_role("system:basic-user");
        assert_eq!(reconcile_cluster_role(None, &expected), Some(expected));
    }

    #[test]
    fn up_to_date_role_needs_nothing() {
        for expected in cluster_roles() {
            let existing = stored(expected.clone());
            assert_eq!(
                reconcile_cluster_role(Some(&existing), &expected),
                None,
                "{expected}"
            );
        }
    }

    #[test]
    fn user_added_rules_survive() {
        let expected = bootstrap_role("system:basic-user");
        let mut existing = stored(expected.clone());
        let extra = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        existing["rules"].as_array_mut().unwrap().push(extra);
        assert_eq!(reconcile_cluster_role(Some(&existing), &expected), None);
    }

    #[test]
    fn removed_bootstrap_rule_is_put_back_broken_down() {
        let expected = bootstrap_role("system:basic-user");
        let mut existing = stored(expected.clone());
        let user_rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        // Drop the selfsubjectreviews rule and narrow the review rule to one resource.
        existing["rules"] = json!([
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]},
            user_rule,
        ]);
        let got = reconcile_cluster_role(Some(&existing), &expected).unwrap();
        assert_eq!(
            rules_of(&got),
            [
                existing["rules"][0].clone(),
                existing["rules"][1].clone(),
                json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"]}),
                json!({"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]}),
            ]
        );
        // The stored metadata is kept for the CAS update.
        assert_eq!(got["metadata"]["resourceVersion"], "42");
        assert_eq!(got["metadata"]["uid"], "0b9e-uid");
        // Once written, nothing more to do.
        assert_eq!(reconcile_cluster_role(Some(&got), &expected), None);
    }

    #[test]
    fn null_rules_read_as_empty() {
        let expected = bootstrap_role("system:public-info-viewer");
        let mut existing = stored(expected.clone());
        existing["rules"] = Value::Null;
        let got = reconcile_cluster_role(Some(&existing), &expected).unwrap();
        assert_eq!(rules_of(&got).len(), 5, "one per URL");
    }

    #[test]
    fn autoupdate_false_is_left_alone() {
        let expected = bootstrap_role("system:discovery");
        let mut existing = stored(expected.clone());
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        existing["rules"] = json!([]);
        existing["metadata"]["labels"] = json!({});
        assert_eq!(reconcile_cluster_role(Some(&existing), &expected), None);
        // Anything but exactly "false" reconciles.
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("False");
        assert!(reconcile_cluster_role(Some(&existing), &expected).is_some());
    }

    #[test]
    fn labels_and_annotations_are_merged_stored_values_win() {
        let expected = bootstrap_role("edit");
        let mut existing = stored(expected.clone());
        existing["metadata"]["labels"] =
            json!({"team": "a", "kubernetes.io/bootstrapping": "custom"});
        existing["metadata"]["annotations"] = json!({"note": "mine"});
        let got = reconcile_cluster_role(Some(&existing), &expected).unwrap();
        assert_eq!(
            got["metadata"]["labels"],
            json!({
                "kubernetes.io/bootstrapping": "custom",
                "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                "team": "a",
            })
        );
        assert_eq!(
            got["metadata"]["annotations"],
            json!({"rbac.authorization.kubernetes.io/autoupdate": "true", "note": "mine"})
        );
        assert_eq!(got["metadata"]["resourceVersion"], "42");

        // Labels and annotations missing entirely.
        let mut bare = stored(expected.clone());
        bare["metadata"].as_object_mut().unwrap().remove("labels");
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        let got = reconcile_cluster_role(Some(&bare), &expected).unwrap();
        assert_eq!(got["metadata"]["labels"], expected["metadata"]["labels"]);
        assert_eq!(
            got["metadata"]["annotations"],
            expected["metadata"]["annotations"]
        );
    }

    #[test]
    fn aggregated_role_rules_are_left_to_the_controller() {
        let expected = bootstrap_role("view");
        let mut existing = stored(expected.clone());
        // Whatever aggregation wrote, reconciliation neither adds nor removes.
        existing["rules"] = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
        assert_eq!(reconcile_cluster_role(Some(&existing), &expected), None);
        existing["rules"] = Value::Null;
        assert_eq!(reconcile_cluster_role(Some(&existing), &expected), None);
    }

    #[test]
    fn aggregation_rule_selectors_are_unioned() {
        let expected = bootstrap_role("view");
        let user_selector = json!({"matchLabels": {"example.com/aggregate-to-view": "true"}});
        let cases: Vec<(&str, Value, Option<Value>)> = vec![
            (
                "missing aggregationRule is added",
                Value::Null,
                Some(expected["aggregationRule"].clone()),
            ),
            (
                "user selector kept, bootstrap one appended",
                json!({"clusterRoleSelectors": [user_selector]}),
                Some(
                    json!({"clusterRoleSelectors": [user_selector, expected["aggregationRule"]["clusterRoleSelectors"][0]]}),
                ),
            ),
            (
                "semantically equal selector counts as present",
                json!({"clusterRoleSelectors": [
                    {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}, "matchExpressions": null},
                ]}),
                None,
            ),
        ];
        for (why, stored_rule, want) in cases {
            let mut existing = stored(expected.clone());
            existing["aggregationRule"] = stored_rule;
            let got = reconcile_cluster_role(Some(&existing), &expected);
            assert_eq!(got.map(|g| g["aggregationRule"].clone()), want, "{why}");
        }
    }

    #[test]
    fn unexpected_aggregation_rule_is_removed() {
        let expected = bootstrap_role("system:basic-user");
        let mut existing = stored(expected.clone());
        existing["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]});
        let got = reconcile_cluster_role(Some(&existing), &expected).unwrap();
        assert!(got.get("aggregationRule").is_none());
        assert_eq!(got["rules"], expected["rules"]);
    }

    #[test]
    fn missing_binding_is_created() {
        let expected = bootstrap_binding("cluster-admin");
        assert_eq!(
            reconcile_cluster_role_binding(None, &expected),
            Some(Reconciled::Write(expected))
        );
    }

    #[test]
    fn up_to_date_bindings_need_nothing() {
        for expected in cluster_role_bindings() {
            let existing = stored(expected.clone());
            assert_eq!(
                reconcile_cluster_role_binding(Some(&existing), &expected),
                None
            );
        }
    }

    #[test]
    fn binding_subjects_are_unioned() {
        let expected = bootstrap_binding("system:public-info-viewer");
        let alice =
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"});
        let mut existing = stored(expected.clone());
        // Unauthenticated removed, a user added.
        existing["subjects"] = json!([alice, expected["subjects"][0]]);
        let Some(Reconciled::Write(got)) =
            reconcile_cluster_role_binding(Some(&existing), &expected)
        else {
            panic!("want a write");
        };
        assert_eq!(
            got["subjects"],
            json!([alice, expected["subjects"][0], expected["subjects"][1]])
        );
        assert_eq!(got["metadata"]["resourceVersion"], "42");
        assert_eq!(reconcile_cluster_role_binding(Some(&got), &expected), None);

        // Subjects absent entirely.
        let mut bare = stored(expected.clone());
        bare.as_object_mut().unwrap().remove("subjects");
        let Some(Reconciled::Write(got)) = reconcile_cluster_role_binding(Some(&bare), &expected)
        else {
            panic!("want a write");
        };
        assert_eq!(got["subjects"], expected["subjects"]);
    }

    #[test]
    fn subjects_and_role_ref_compare_after_kube_defaulting() {
        let expected = bootstrap_binding("cluster-admin");
        let mut existing = stored(expected.clone());
        existing["roleRef"] = json!({"kind": "ClusterRole", "name": "cluster-admin"});
        existing["subjects"] = json!([{"kind": "Group", "name": "system:masters"}]);
        assert_eq!(
            reconcile_cluster_role_binding(Some(&existing), &expected),
            None
        );
        // A ServiceAccount keeps the empty group, so it is a different subject.
        existing["subjects"] =
            json!([{"kind": "ServiceAccount", "name": "system:masters", "namespace": "x"}]);
        assert!(matches!(
            reconcile_cluster_role_binding(Some(&existing), &expected),
            Some(Reconciled::Write(_))
        ));
    }

    #[test]
    fn binding_labels_merged() {
        let expected = bootstrap_binding("system:basic-user");
        let mut existing = stored(expected.clone());
        existing["metadata"]["labels"] = json!({"team": "a"});
        let Some(Reconciled::Write(got)) =
            reconcile_cluster_role_binding(Some(&existing), &expected)
        else {
            panic!("want a write");
        };
        assert_eq!(
            got["metadata"]["labels"],
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", "team": "a"})
        );
    }

    #[test]
    fn changed_role_ref_recreates() {
        let expected = bootstrap_binding("system:discovery");
        let mut existing = stored(expected.clone());
        existing["roleRef"]["name"] = json!("view");
        assert_eq!(
            reconcile_cluster_role_binding(Some(&existing), &expected),
            Some(Reconciled::Recreate(expected.clone()))
        );
        // Protected wins over a roleRef change.
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        assert_eq!(
            reconcile_cluster_role_binding(Some(&existing), &expected),
            None
        );
    }

    fn bootstrap_namespaced(objects: Vec<Value>, namespace: &str, name: &str) -> Value {
        objects
            .into_iter()
            .find(|o| o["metadata"]["name"] == name && o["metadata"]["namespace"] == namespace)
            .unwrap()
    }

    #[test]
    fn namespaced_objects_reconcile_like_cluster_ones() {
        use crate::authz::bootstrap_policy::{namespace_role_bindings, namespace_roles};
        // Missing: created as bootstrapped; up to date: nothing to write.
        for expected in namespace_roles() {
            assert_eq!(reconcile_role(None, &expected), Some(expected.clone()));
            assert_eq!(
                reconcile_role(Some(&stored(expected.clone())), &expected),
                None
            );
        }
        for expected in namespace_role_bindings() {
            assert_eq!(
                reconcile_role_binding(None, &expected),
                Some(Reconciled::Write(expected.clone()))
            );
            assert_eq!(
                reconcile_role_binding(Some(&stored(expected.clone())), &expected),
                None
            );
        }
    }

    #[test]
    fn edited_bootstrap_role_gets_its_rule_back_and_keeps_the_users() {
        let expected = bootstrap_namespaced(
            crate::authz::bootstrap_policy::namespace_roles(),
            "kube-system",
            "extension-apiserver-authentication-reader",
        );
        let mut existing = stored(expected.clone());
        let user_rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]});
        // The user narrowed the verbs to `get` and added a rule of their own.
        existing["rules"] = json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["extension-apiserver-authentication"]},
            user_rule,
        ]);
        existing["metadata"]["labels"] = json!({"team": "a"});
        let got = reconcile_role(Some(&existing), &expected).unwrap();
        // kube appends the uncovered verbs one rule each, names kept.
        let missing = |verb: &str| json!({"verbs": [verb], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["extension-apiserver-authentication"]});
        assert_eq!(
            rules_of(&got),
            [
                existing["rules"][0].clone(),
                user_rule,
                missing("list"),
                missing("watch"),
            ]
        );
        assert_eq!(
            got["metadata"]["labels"],
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", "team": "a"})
        );
        assert_eq!(got["metadata"]["namespace"], "kube-system");
        assert_eq!(got["metadata"]["resourceVersion"], "42");
        assert_eq!(reconcile_role(Some(&got), &expected), None);

        // Opted out: left as the user made it.
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        assert_eq!(reconcile_role(Some(&existing), &expected), None);
    }

    #[test]
    fn a_role_never_gains_or_loses_an_aggregation_rule() {
        let expected = bootstrap_namespaced(
            crate::authz::bootstrap_policy::namespace_roles(),
            "kube-public",
            "system:controller:bootstrap-signer",
        );
        let mut existing = stored(expected.clone());
        existing["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]});
        assert_eq!(reconcile_role(Some(&existing), &expected), None);
        // The same object reconciled as a ClusterRole would lose it.
        assert!(reconcile_cluster_role(Some(&existing), &expected).is_some());
    }

    #[test]
    fn role_binding_subjects_are_unioned_and_role_ref_changes_recreate() {
        let expected = bootstrap_namespaced(
            crate::authz::bootstrap_policy::namespace_role_bindings(),
            "kube-system",
            "system::leader-locking-kube-scheduler",
        );
        let mut existing = stored(expected.clone());
        let robot = json!({"kind": "ServiceAccount", "name": "robot", "namespace": "x"});
        // The scheduler's ServiceAccount removed; the user kept; a ServiceAccount added.
        existing["subjects"] = json!([
            {"kind": "User", "name": "system:kube-scheduler"},
            robot,
        ]);
        let Some(Reconciled::Write(got)) = reconcile_role_binding(Some(&existing), &expected)
        else {
            panic!("want a write");
        };
        assert_eq!(
            got["subjects"],
            json!([
                {"kind": "User", "name": "system:kube-scheduler"},
                robot,
                {"kind": "ServiceAccount", "name": "kube-scheduler", "namespace": "kube-system"},
            ])
        );
        assert_eq!(reconcile_role_binding(Some(&got), &expected), None);

        existing["roleRef"]["kind"] = json!("ClusterRole");
        assert_eq!(
            reconcile_role_binding(Some(&existing), &expected),
            Some(Reconciled::Recreate(expected.clone()))
        );
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        assert_eq!(reconcile_role_binding(Some(&existing), &expected), None);
    }

    #[test]
    fn protected_binding_is_left_alone() {
        let expected = bootstrap_binding("cluster-admin");
        let mut existing = stored(expected.clone());
        existing["subjects"] = json!([]);
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        assert_eq!(
            reconcile_cluster_role_binding(Some(&existing), &expected),
            None
        );
    }
}

//! The rules an aggregated ClusterRole should hold, as kube's ClusterRole aggregation
//! controller (`pkg/controller/clusterroleaggregation`) computes them: the union of the rules
//! of every ClusterRole its `aggregationRule.clusterRoleSelectors` select.

use serde_json::Value;

use super::label_selector::LabelSelector;
use super::objects::{self, RuleKey};

/// The rules `role` should have from aggregation over `all_cluster_roles`, or `None` when it
/// has no `aggregationRule` or its rules are already right.
///
/// As kube: for each selector in turn, the ClusterRoles it selects, sorted by name and
/// skipping `role` itself, contribute each rule not already collected (compared field by field,
/// an absent list equal to an empty one). A role whose selectors select nothing is due an
/// empty rule list. If any selector is invalid, kube gives up on the role without writing,
/// so this returns `None`.
pub fn aggregated_rules(role: &Value, all_cluster_roles: &[Value]) -> Option<Vec<Value>> {
    let aggregation_rule = role.get("aggregationRule").filter(|v| !v.is_null())?;
    let selectors = objects::array(aggregation_rule, "clusterRoleSelectors")
        .iter()
        .map(LabelSelector::parse)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let name = objects::name(role);

    let mut rules: Vec<Value> = Vec::new();
    let mut keys: Vec<RuleKey> = Vec::new();
    for selector in &selectors {
        let mut selected: Vec<&Value> = all_cluster_roles
            .iter()
            .filter(|other| selector.matches(objects::string_map(other, "labels")))
            .collect();
        selected.sort_by(|a, b| objects::name(a).cmp(objects::name(b)));
        for other in selected {
            if objects::name(other) == name {
                continue;
            }
            for rule in objects::array(other, "rules") {
                let key = RuleKey::of(rule);
                if !keys.contains(&key) {
                    keys.push(key);
                    rules.push(rule.clone());
                }
            }
        }
    }

    let current: Vec<RuleKey> = objects::array(role, "rules")
        .iter()
        .map(RuleKey::of)
        .collect();
    (current != keys).then_some(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::bootstrap_policy::cluster_roles;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": rules,
        })
    }

    fn aggregated(name: &str, selectors: Value, rules: Value) -> Value {
        let mut r = role(name, json!({}), rules);
        r["aggregationRule"] = json!({ "clusterRoleSelectors": selectors });
        r
    }

    fn r(verb: &str, resource: &str) -> Value {
        json!({"verbs": [verb], "apiGroups": [""], "resources": [resource]})
    }

    #[test]
    fn aggregation_table() {
        let sel = json!([{"matchLabels": {"agg": "true"}}]);
        let roles = vec![
            // Out of name order on purpose.
            role(
                "zeta",
                json!({"agg": "true"}),
                json!([r("get", "pods"), r("get", "secrets")]),
            ),
            role(
                "alpha",
                json!({"agg": "true"}),
                json!([r("get", "pods"), r("list", "pods")]),
            ),
            role("unlabelled", json!({}), json!([r("delete", "pods")])),
            role(
                "other",
                json!({"agg": "false"}),
                json!([r("create", "pods")]),
            ),
        ];
        let want = vec![r("get", "pods"), r("list", "pods"), r("get", "secrets")];
        let cases: Vec<(&str, Value, Option<Vec<Value>>)> = vec![
            (
                "sorted by name, deduplicated",
                aggregated("target", sel.clone(), json!([])),
                Some(want.clone()),
            ),
            (
                "rules null reads as empty",
                aggregated("target", sel.clone(), Value::Null),
                Some(want.clone()),
            ),
            (
                "unchanged",
                aggregated("target", sel.clone(), Value::Array(want.clone())),
                None,
            ),
            (
                "same rules, absent lists equal empty ones",
                aggregated(
                    "target",
                    sel.clone(),
                    json!([
                        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": []},
                        {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "nonResourceURLs": null},
                        r("get", "secrets"),
                    ]),
                ),
                None,
            ),
            (
                "order matters, as kube compares lists",
                aggregated(
                    "target",
                    sel.clone(),
                    json!([r("list", "pods"), r("get", "pods"), r("get", "secrets")]),
                ),
                Some(want.clone()),
            ),
            (
                "user rules on an aggregated role are replaced",
                aggregated(
                    "target",
                    sel.clone(),
                    json!([
                        r("get", "pods"),
                        r("list", "pods"),
                        r("get", "secrets"),
                        r("get", "nodes")
                    ]),
                ),
                Some(want.clone()),
            ),
            (
                "no aggregationRule",
                role("target", json!({}), json!([])),
                None,
            ),
            (
                "nothing selected empties the rules",
                aggregated(
                    "target",
                    json!([{"matchLabels": {"nobody": "true"}}]),
                    json!([r("get", "pods")]),
                ),
                Some(vec![]),
            ),
            (
                "selectors in order, each sorted",
                aggregated(
                    "target",
                    json!([
                        {"matchLabels": {"agg": "false"}},
                        {"matchExpressions": [{"key": "agg", "operator": "In", "values": ["true"]}]},
                    ]),
                    json!([]),
                ),
                Some(vec![
                    r("create", "pods"),
                    r("get", "pods"),
                    r("list", "pods"),
                    r("get", "secrets"),
                ]),
            ),
            (
                "matchExpressions Exists",
                aggregated(
                    "target",
                    json!([{"matchExpressions": [{"key": "agg", "operator": "Exists"}]}]),
                    json!([]),
                ),
                Some(vec![
                    r("get", "pods"),
                    r("list", "pods"),
                    r("create", "pods"),
                    r("get", "secrets"),
                ]),
            ),
            (
                "matchExpressions DoesNotExist",
                aggregated(
                    "target",
                    json!([{"matchExpressions": [{"key": "agg", "operator": "DoesNotExist"}]}]),
                    json!([]),
                ),
                // `target` itself has no `agg` label but is skipped.
                Some(vec![r("delete", "pods")]),
            ),
            (
                "invalid selector: leave alone",
                aggregated(
                    "target",
                    json!([{"matchExpressions": [{"key": "agg", "operator": "Bogus"}]}]),
                    json!([]),
                ),
                None,
            ),
        ];
        for (why, target, want) in cases {
            let mut all = roles.clone();
            all.push(target.clone());
            assert_eq!(aggregated_rules(&target, &all), want, "{why}");
        }
    }

    #[test]
    fn skips_itself() {
        let me = {
            let mut me = aggregated("me", json!([{"matchLabels": {"agg": "true"}}]), json!([]));
            me["metadata"]["labels"] = json!({"agg": "true"});
            me["rules"] = json!([r("get", "pods")]);
            me
        };
        let other = role("other", json!({"agg": "true"}), json!([r("list", "pods")]));
        assert_eq!(
            aggregated_rules(&me, &[me.clone(), other]),
            Some(vec![r("list", "pods")])
        );
    }

    #[test]
    fn bootstrap_roles_aggregate_like_kube() {
        let mut roles = cluster_roles();
        let rules_of = |roles: &[Value], name: &str| -> Vec<Value> {
            roles
                .iter()
                .find(|r| r["metadata"]["name"] == name)
                .unwrap()["rules"]
                .as_array()
                .unwrap()
                .clone()
        };
        // Run the controller to a fixed point, as its watch would.
        for _ in 0..4 {
            for i in 0..roles.len() {
                if let Some(rules) = aggregated_rules(&roles[i], &roles) {
                    roles[i]["rules"] = Value::Array(rules);
                }
            }
        }
        let view = rules_of(&roles, "view");
        let edit = rules_of(&roles, "edit");
        let admin = rules_of(&roles, "admin");
        assert_eq!(view, rules_of(&roles, "system:aggregate-to-view"));
        // edit: aggregate-to-edit first (sorted before view), then view's.
        let mut want_edit = rules_of(&roles, "system:aggregate-to-edit");
        want_edit.extend(view.clone());
        assert_eq!(edit, want_edit);
        // admin: edit's (sorted before system:...), then aggregate-to-admin.
        let mut want_admin = edit.clone();
        want_admin.extend(rules_of(&roles, "system:aggregate-to-admin"));
        assert_eq!(admin, want_admin);
        for role in &roles {
            assert_eq!(aggregated_rules(role, &roles), None, "fixed point");
        }
    }
}

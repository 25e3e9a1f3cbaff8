//! RBAC objects (`/apis/rbac.authorization.k8s.io/v1`): `roles` and `rolebindings`
//! (namespaced), `clusterroles` and `clusterrolebindings` (cluster-scoped), stored and served
//! as kube-apiserver does (kube's `pkg/registry/rbac/*`): names are path segments, nothing
//! has status or tracks generation, no short names or categories, and `rules` / `subjects`
//! have no patch strategy (a strategic merge patch replaces them whole).
//!
//! Each write is decoded as Go would (wrong JSON types are a 400), defaulted as kube's
//! `SetDefaults_*` do (`roleRef.apiGroup`, a subject's `apiGroup` by kind) and put in the
//! shape kube stores (empty lists left out or `null`, as Go writes them), then validated by
//! [`super::rbac_validation`]. Table rows follow kube: roles get the default columns (`Name`,
//! `Created At`), bindings kube's printer (`Role`, `Age`, and the subjects with `-o wide`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::gojson::GoJson;
use super::rbac_validation::{
    has_invalid_label_selector, strings_at, validate_aggregation_rule, validate_binding,
    validate_role_ref_update, validate_rules, RBAC_GROUP,
};
use super::{age, base_def, items, str_at, Names};
use crate::machinery::validation::NameRule;
use crate::resource::{age_column, name_column, ResourceDef, Strategy, TableColumn};
use crate::status::{ApiError, StatusCause};

/// The `rbac.authorization.k8s.io/v1` resources, in the order discovery lists them.
pub fn defs() -> Vec<ResourceDef> {
    vec![
        clusterrolebindings_def(),
        clusterroles_def(),
        rolebindings_def(),
        roles_def(),
    ]
}

/// The Role resource.
pub fn roles_def() -> ResourceDef {
    role_def(false)
}

/// The ClusterRole resource.
pub fn clusterroles_def() -> ResourceDef {
    role_def(true)
}

/// The RoleBinding resource.
pub fn rolebindings_def() -> ResourceDef {
    binding_def(false)
}

/// The ClusterRoleBinding resource.
pub fn clusterrolebindings_def() -> ResourceDef {
    binding_def(true)
}

fn role_def(cluster: bool) -> ResourceDef {
    let names = if cluster {
        Names {
            group: RBAC_GROUP,
            version: "v1",
            plural: "clusterroles",
            singular: "clusterrole",
            kind: "ClusterRole",
            namespaced: false,
            definition: "io.k8s.api.rbac.v1.ClusterRole",
        }
    } else {
        Names {
            group: RBAC_GROUP,
            version: "v1",
            plural: "roles",
            singular: "role",
            kind: "Role",
            namespaced: true,
            definition: "io.k8s.api.rbac.v1.Role",
        }
    };
    let mut def = base_def(names, Arc::new(RoleStrategy { cluster }));
    // kube has no printer for roles: its default table convertor answers.
    def.columns = vec![name_column(), created_at_column()];
    def
}

fn binding_def(cluster: bool) -> ResourceDef {
    let names = if cluster {
        Names {
            group: RBAC_GROUP,
            version: "v1",
            plural: "clusterrolebindings",
            singular: "clusterrolebinding",
            kind: "ClusterRoleBinding",
            namespaced: false,
            definition: "io.k8s.api.rbac.v1.ClusterRoleBinding",
        }
    } else {
        Names {
            group: RBAC_GROUP,
            version: "v1",
            plural: "rolebindings",
            singular: "rolebinding",
            kind: "RoleBinding",
            namespaced: true,
            definition: "io.k8s.api.rbac.v1.RoleBinding",
        }
    };
    let mut def = base_def(names, Arc::new(BindingStrategy { cluster }));
    let (role, users, groups, sas) = if cluster {
        (
            "roleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            "Users in the clusterRoleBinding",
            "Groups in the clusterRoleBinding",
            "ServiceAccounts in the clusterRoleBinding",
        )
    } else {
        (
            "roleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            "Users in the roleBinding",
            "Groups in the roleBinding",
            "ServiceAccounts in the roleBinding",
        )
    };
    let column = |name: &'static str, description: &'static str, priority| TableColumn {
        name: name.into(),
        type_: "string".into(),
        format: "".into(),
        description: description.into(),
        priority,
    };
    def.columns = vec![
        name_column(),
        column("Role", role, 0),
        age_column(),
        column("Users", users, 1),
        column("Groups", groups, 1),
        column("ServiceAccounts", sas, 1),
    ];
    def
}

/// The `Created At` column of kube's default table convertor.
fn created_at_column() -> TableColumn {
    TableColumn {
        name: "Created At".into(),
        type_: "date".into(),
        ..age_column()
    }
}

/// The `Created At` cell: the creation time in UTC as RFC 3339, Go's zero time when unset.
fn created_at(object: &Value) -> String {
    object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| {
            t.with_timezone(&Utc)
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        })
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".into())
}

/// kube's role and cluster role strategies (`cluster` for ClusterRole).
pub struct RoleStrategy {
    cluster: bool,
}

impl Strategy for RoleStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        let go = GoJson::new(if self.cluster { "ClusterRole" } else { "Role" });
        check_rules(&go, object)?;
        if self.cluster {
            check_aggregation_rule(&go, object)?;
        }
        Ok(())
    }

    fn prepare_for_create(&self, object: &mut Value) {
        shape_role(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        shape_role(object);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let mut causes = validate_rules(object, !self.cluster);
        if self.cluster {
            causes.extend(validate_aggregation_rule(object, false));
        }
        causes
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let mut causes = validate_rules(object, !self.cluster);
        if self.cluster {
            causes.extend(validate_aggregation_rule(
                object,
                has_invalid_label_selector(old),
            ));
        }
        causes
    }

    /// kube's role and cluster role strategies allow create on update.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(created_at(object))]
    }
}

/// kube's role binding and cluster role binding strategies.
pub struct BindingStrategy {
    cluster: bool,
}

impl Strategy for BindingStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        let kind = if self.cluster {
            "ClusterRoleBinding"
        } else {
            "RoleBinding"
        };
        let go = GoJson::new(kind);
        for subject in go.array(object.get("subjects"), kind, "subjects", "[]v1.Subject")? {
            let subject = go.object(Some(subject), kind, "subjects", "v1.Subject")?;
            for key in ["kind", "apiGroup", "name", "namespace"] {
                go.string(
                    subject.and_then(|s| s.get(key)),
                    "Subject",
                    &format!("subjects.{key}"),
                )?;
            }
        }
        let role_ref = go.object(object.get("roleRef"), kind, "roleRef", "v1.RoleRef")?;
        for key in ["apiGroup", "kind", "name"] {
            go.string(
                role_ref.and_then(|r| r.get(key)),
                "RoleRef",
                &format!("roleRef.{key}"),
            )?;
        }
        Ok(())
    }

    fn prepare_for_create(&self, object: &mut Value) {
        shape_binding(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        shape_binding(object);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_binding(object, self.cluster)
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let mut causes = validate_binding(object, self.cluster);
        causes.extend(validate_role_ref_update(object, old));
        causes
    }

    /// kube's role binding and cluster role binding strategies allow create on update.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        let (users, groups, service_accounts) = subjects_strings(object);
        vec![
            json!(format!(
                "{}/{}",
                str_at(object, "/roleRef/kind"),
                str_at(object, "/roleRef/name")
            )),
            json!(age(object)),
            json!(users.join(", ")),
            json!(groups.join(", ")),
            json!(service_accounts.join(", ")),
        ]
    }
}

/// kube's `rbac.SubjectsStrings`: user names, group names and `namespace/name` of service
/// accounts (other kinds are not shown).
fn subjects_strings(object: &Value) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for subject in items(object.get("subjects")) {
        let name = str_at(subject, "/name").to_string();
        match str_at(subject, "/kind") {
            "ServiceAccount" => sas.push(format!("{}/{name}", str_at(subject, "/namespace"))),
            "User" => users.push(name),
            "Group" => groups.push(name),
            _ => {}
        }
    }
    (users, groups, sas)
}

/// Go's type checks of `rules` (`[]v1.PolicyRule`, every field a `[]string`).
fn check_rules(go: &GoJson, object: &Value) -> Result<(), ApiError> {
    let kind = go.kind();
    for rule in go.array(object.get("rules"), kind, "rules", "[]v1.PolicyRule")? {
        let rule = go.object(Some(rule), kind, "rules", "v1.PolicyRule")?;
        for key in RULE_FIELDS {
            go.strings(
                rule.and_then(|r| r.get(key)),
                "PolicyRule",
                &format!("rules.{key}"),
                "[]string",
            )?;
        }
    }
    Ok(())
}

/// Go's type checks of a ClusterRole's `aggregationRule` (`*v1.AggregationRule` holding
/// `[]metav1.LabelSelector`).
fn check_aggregation_rule(go: &GoJson, object: &Value) -> Result<(), ApiError> {
    let Some(rule) = go.object(
        object.get("aggregationRule"),
        "ClusterRole",
        "aggregationRule",
        "v1.AggregationRule",
    )?
    else {
        return Ok(());
    };
    let path = "aggregationRule.clusterRoleSelectors";
    for selector in go.array(
        rule.get("clusterRoleSelectors"),
        "AggregationRule",
        path,
        "[]v1.LabelSelector",
    )? {
        let Some(selector) =
            go.object(Some(selector), "AggregationRule", path, "v1.LabelSelector")?
        else {
            continue;
        };
        go.string_map(
            selector.get("matchLabels"),
            "LabelSelector",
            &format!("{path}.matchLabels"),
        )?;
        let expressions = format!("{path}.matchExpressions");
        for requirement in go.array(
            selector.get("matchExpressions"),
            "LabelSelector",
            &expressions,
            "[]v1.LabelSelectorRequirement",
        )? {
            let requirement = go.object(
                Some(requirement),
                "LabelSelector",
                &expressions,
                "v1.LabelSelectorRequirement",
            )?;
            let field = |key: &str| requirement.and_then(|r| r.get(key));
            let at = |key: &str| format!("{expressions}.{key}");
            go.string(field("key"), "LabelSelectorRequirement", &at("key"))?;
            go.typed_string(
                field("operator"),
                "LabelSelectorRequirement",
                &at("operator"),
                "v1.LabelSelectorOperator",
            )?;
            go.strings(
                field("values"),
                "LabelSelectorRequirement",
                &at("values"),
                "[]string",
            )?;
        }
    }
    Ok(())
}

/// A `PolicyRule`'s fields in Go's order.
const RULE_FIELDS: [&str; 5] = [
    "verbs",
    "apiGroups",
    "resources",
    "resourceNames",
    "nonResourceURLs",
];

/// A list field as Go writes it: `null` when empty (the field has no `omitempty`).
fn required_list(values: Vec<String>) -> Value {
    if values.is_empty() {
        Value::Null
    } else {
        json!(values)
    }
}

/// Inserts an `omitempty` list field only when it has entries.
fn put_list(map: &mut Map<String, Value>, key: &str, values: Vec<String>) {
    if !values.is_empty() {
        map.insert(key.into(), json!(values));
    }
}

/// A Role or ClusterRole in the shape kube decodes: `rules` always written (`null` when
/// unset; an empty list is stored as `null`), each rule's `verbs` always written, its other lists only when set; an
/// `aggregationRule` kept only when set, its selectors in Go's shape.
fn shape_role(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let rules: Vec<Value> = items(map.get("rules"))
        .iter()
        .map(|rule| {
            let mut shaped = Map::new();
            shaped.insert("verbs".into(), required_list(strings_at(rule.get("verbs"))));
            for key in &RULE_FIELDS[1..] {
                put_list(&mut shaped, key, strings_at(rule.get(*key)));
            }
            Value::Object(shaped)
        })
        .collect();
    // An empty list stays one until the object is stored (as protobuf, which gives `null`
    // back): kube's field manager sees the `[]` a client sent, and records its writer.
    let sent_list = map.get("rules").is_some_and(Value::is_array);
    map.insert(
        "rules".into(),
        if rules.is_empty() && !sent_list {
            Value::Null
        } else {
            Value::Array(rules)
        },
    );
    match map.get("aggregationRule") {
        None => {}
        Some(Value::Null) => {
            map.remove("aggregationRule");
        }
        Some(rule) => {
            let selectors: Vec<Value> = items(rule.get("clusterRoleSelectors"))
                .iter()
                .map(shape_label_selector)
                .collect();
            let mut shaped = Map::new();
            if !selectors.is_empty() {
                shaped.insert("clusterRoleSelectors".into(), Value::Array(selectors));
            }
            map.insert("aggregationRule".into(), Value::Object(shaped));
        }
    }
}

/// A `metav1.LabelSelector` as Go writes it (both fields `omitempty`).
fn shape_label_selector(selector: &Value) -> Value {
    let mut shaped = Map::new();
    if let Some(labels) = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        shaped.insert("matchLabels".into(), Value::Object(labels.clone()));
    }
    let expressions: Vec<Value> = items(selector.get("matchExpressions"))
        .iter()
        .map(|r| {
            let mut req = Map::new();
            req.insert("key".into(), json!(str_at(r, "/key")));
            req.insert("operator".into(), json!(str_at(r, "/operator")));
            put_list(&mut req, "values", strings_at(r.get("values")));
            Value::Object(req)
        })
        .collect();
    if !expressions.is_empty() {
        shaped.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Value::Object(shaped)
}

/// A binding in the shape kube stores, with kube's v1 defaults: `roleRef` always written
/// (its `apiGroup` defaulting to RBAC's group), `subjects` only when set, each with the
/// `apiGroup` its kind implies (`SetDefaults_Subject`).
fn shape_binding(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let subjects: Vec<Value> = items(map.get("subjects"))
        .iter()
        .map(|s| {
            let kind = str_at(s, "/kind");
            let mut api_group = str_at(s, "/apiGroup");
            if api_group.is_empty() && matches!(kind, "User" | "Group") {
                api_group = RBAC_GROUP;
            }
            let mut shaped = Map::new();
            shaped.insert("kind".into(), json!(kind));
            if !api_group.is_empty() {
                shaped.insert("apiGroup".into(), json!(api_group));
            }
            shaped.insert("name".into(), json!(str_at(s, "/name")));
            let namespace = str_at(s, "/namespace");
            if !namespace.is_empty() {
                shaped.insert("namespace".into(), json!(namespace));
            }
            Value::Object(shaped)
        })
        .collect();
    if subjects.is_empty() {
        map.remove("subjects");
    } else {
        map.insert("subjects".into(), Value::Array(subjects));
    }
    let role_ref = map.get("roleRef").cloned().unwrap_or(Value::Null);
    let mut api_group = str_at(&role_ref, "/apiGroup");
    if api_group.is_empty() {
        api_group = RBAC_GROUP;
    }
    map.insert(
        "roleRef".into(),
        json!({
            "apiGroup": api_group,
            "kind": str_at(&role_ref, "/kind"),
            "name": str_at(&role_ref, "/name"),
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(def: &ResourceDef) -> Arc<dyn Strategy> {
        def.strategy.clone()
    }

    fn messages(causes: Vec<StatusCause>) -> Vec<String> {
        causes
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn every_rbac_kind_allows_create_on_update_like_kube() {
        let defs = defs();
        assert_eq!(defs.len(), 4);
        for def in &defs {
            assert!(def.strategy.allow_create_on_update(), "{}", def.plural);
        }
        // Other kinds keep the registry's default.
        assert!(!crate::resource::DefaultStrategy.allow_create_on_update());
    }

    #[test]
    fn definitions_match_kube() {
        let defs = defs();
        let facts: Vec<_> = defs
            .iter()
            .map(|d| {
                (
                    d.plural.as_str(),
                    d.singular.as_str(),
                    d.kind.as_str(),
                    d.list_kind.as_str(),
                    d.namespaced,
                    d.storage_prefix.as_str(),
                )
            })
            .collect();
        assert_eq!(
            facts,
            vec![
                (
                    "clusterrolebindings",
                    "clusterrolebinding",
                    "ClusterRoleBinding",
                    "ClusterRoleBindingList",
                    false,
                    "/rbac.authorization.k8s.io/clusterrolebindings"
                ),
                (
                    "clusterroles",
                    "clusterrole",
                    "ClusterRole",
                    "ClusterRoleList",
                    false,
                    "/rbac.authorization.k8s.io/clusterroles"
                ),
                (
                    "rolebindings",
                    "rolebinding",
                    "RoleBinding",
                    "RoleBindingList",
                    true,
                    "/rbac.authorization.k8s.io/rolebindings"
                ),
                (
                    "roles",
                    "role",
                    "Role",
                    "RoleList",
                    true,
                    "/rbac.authorization.k8s.io/roles"
                ),
            ]
        );
        for d in &defs {
            assert_eq!(d.api_version(), "rbac.authorization.k8s.io/v1");
            assert!(d.short_names.is_empty() && d.categories.is_empty());
            assert!(d.subresources.is_empty());
            assert!(d.patch_meta.is_empty(), "rules and subjects are atomic");
            assert_eq!(d.verbs.len(), 8);
            assert!(!d.strategy.tracks_generation());
            assert_eq!(d.strategy.name_rule(), NameRule::PathSegment);
            assert!(d.definition.starts_with("io.k8s.api.rbac.v1."));
        }
        let role = roles_def();
        let columns: Vec<_> = role
            .columns
            .iter()
            .map(|c| (c.name.as_ref(), c.type_.as_ref()))
            .collect();
        assert_eq!(columns, vec![("Name", "string"), ("Created At", "date")]);
        let binding = rolebindings_def();
        let columns: Vec<_> = binding
            .columns
            .iter()
            .map(|c| (c.name.as_ref(), c.priority))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("Name", 0),
                ("Role", 0),
                ("Age", 0),
                ("Users", 1),
                ("Groups", 1),
                ("ServiceAccounts", 1)
            ]
        );
    }

    #[test]
    fn roles_are_stored_in_go_shape() {
        let s = strategy(&roles_def());
        let mut role = json!({
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"], "resourceNames": []}],
        });
        s.prepare_for_create(&mut role);
        assert_eq!(
            role["rules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        // An empty list stays one for the field manager (storage makes it `null`); none is
        // `null` at once.
        let mut empty = json!({"metadata": {"name": "r"}, "rules": []});
        s.prepare_for_create(&mut empty);
        assert_eq!(empty, json!({"metadata": {"name": "r"}, "rules": []}));
        let mut none = json!({"metadata": {"name": "r"}});
        s.prepare_for_create(&mut none);
        assert_eq!(none, json!({"metadata": {"name": "r"}, "rules": null}));

        let s = strategy(&clusterroles_def());
        let mut aggregated = json!({
            "metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "k", "operator": "Exists", "values": []}]},
            ]},
        });
        s.prepare_for_create(&mut aggregated);
        assert_eq!(
            aggregated,
            json!({
                "metadata": {"name": "view"},
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]},
                ]},
                "rules": null,
            })
        );
        let mut cleared = json!({"aggregationRule": null, "rules": null});
        s.prepare_for_update(&mut cleared, &Value::Null);
        assert_eq!(cleared, json!({"rules": null}));
    }

    #[test]
    fn bindings_get_kube_defaults() {
        let s = strategy(&rolebindings_def());
        let mut binding = json!({
            "metadata": {"name": "b", "namespace": "ns"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                {"name": "alice", "kind": "User"},
                {"kind": "Group", "name": "devs", "apiGroup": ""},
            ],
        });
        s.prepare_for_create(&mut binding);
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
        );
        assert_eq!(
            binding["subjects"],
            json!([
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
            ])
        );
        // Go's key order, so the bytes match kube's.
        let keys: Vec<&String> = binding["subjects"][1]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["kind", "apiGroup", "name"]);
        assert!(s.validate(&binding).is_empty());

        let mut bare = json!({"metadata": {"name": "b"}, "subjects": []});
        s.prepare_for_create(&mut bare);
        assert_eq!(
            bare,
            json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "", "name": ""}})
        );
        assert_eq!(
            messages(s.validate(&bare)),
            vec![
                "roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
            ]
        );
    }

    #[test]
    fn role_ref_cannot_change_on_update() {
        let s = strategy(&clusterrolebindings_def());
        let mut old = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "Group", "name": "devs"}]});
        s.prepare_for_create(&mut old);
        // Changing subjects is fine; an explicit default apiGroup is the same roleRef.
        let mut new = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
        s.prepare_for_update(&mut new, &old);
        assert!(s.validate_update(&new, &old).is_empty());
        let mut new = json!({"roleRef": {"kind": "ClusterRole", "name": "admin"}});
        s.prepare_for_update(&mut new, &old);
        assert_eq!(
            messages(s.validate_update(&new, &old)),
            vec![
                r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"admin"}: cannot change roleRef"#
            ]
        );
    }

    #[test]
    fn strategies_validate_with_kube_paths() {
        let role = strategy(&roles_def());
        let mut bad = json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        role.prepare_for_create(&mut bad);
        assert_eq!(
            messages(role.validate(&bad)),
            vec![
                r#"rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to non-resource URLs"#
            ]
        );
        let cluster_role = strategy(&clusterroles_def());
        assert!(cluster_role.validate(&bad).is_empty());
        let mut aggregated = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        cluster_role.prepare_for_create(&mut aggregated);
        assert_eq!(
            messages(cluster_role.validate(&aggregated)),
            vec!["aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"]
        );

        // An old role with an invalid selector value may keep it on update; a new one may not.
        let with_bad_value = json!({"rules": null, "aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["bad value"]}]},
        ]}});
        let create = messages(cluster_role.validate(&with_bad_value));
        assert_eq!(create.len(), 2, "{create:?}");
        assert!(create[0].starts_with(
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values[0]: Invalid value: \"bad value\""
        ));
        let update = messages(cluster_role.validate_update(&with_bad_value, &with_bad_value));
        assert_eq!(
            update,
            vec!["aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector."]
        );
    }

    #[test]
    fn ill_typed_bodies_are_bad_requests() {
        let cases = [
            (
                roles_def(),
                json!({"kind": "Role", "rules": [{"verbs": "get"}]}),
                "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string",
            ),
            (
                roles_def(),
                json!({"kind": "Role", "rules": {}}),
                "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal object into Go struct field Role.rules of type []v1.PolicyRule",
            ),
            (
                clusterroles_def(),
                json!({"kind": "ClusterRole", "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": 1}}]}}),
                "ClusterRole in version \"v1\" cannot be handled as a ClusterRole: json: cannot unmarshal number into Go struct field LabelSelector.aggregationRule.clusterRoleSelectors.matchLabels of type string",
            ),
            (
                rolebindings_def(),
                json!({"roleRef": "view"}),
                "RoleBinding in version \"v1\" cannot be handled as a RoleBinding: json: cannot unmarshal string into Go struct field RoleBinding.roleRef of type v1.RoleRef",
            ),
            (
                clusterrolebindings_def(),
                json!({"subjects": [{"kind": "User", "name": 7}]}),
                "ClusterRoleBinding in version \"v1\" cannot be handled as a ClusterRoleBinding: json: cannot unmarshal number into Go struct field Subject.subjects.name of type string",
            ),
        ];
        for (def, body, want) in cases {
            let err = def.strategy.check_decode(&body).err();
            assert_eq!(
                err.map(|e| (e.code, e.message)),
                Some((400, want.to_string())),
                "{body}"
            );
        }
        let mut fine = json!({"kind": "Role", "rules": [{"verbs": ["get"], "apiGroups": null}]});
        assert!(roles_def().strategy.check_decode(&fine).is_ok());
        roles_def().strategy.prepare_for_create(&mut fine);
        assert_eq!(fine["rules"], json!([{"verbs": ["get"]}]));
    }

    #[test]
    fn table_cells_as_kube_prints_them() {
        let role = json!({"metadata": {"name": "r", "creationTimestamp": "2024-05-01T10:00:00Z"}});
        assert_eq!(
            roles_def().strategy.table_cells(&role),
            vec![json!("2024-05-01T10:00:00Z")]
        );
        assert_eq!(
            clusterroles_def()
                .strategy
                .table_cells(&json!({"metadata": {}})),
            vec![json!("0001-01-01T00:00:00Z")]
        );
        let binding = json!({
            "metadata": {"name": "b", "creationTimestamp": "2024-05-01T10:00:00Z"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ci"},
            ],
        });
        let cells = rolebindings_def().strategy.table_cells(&binding);
        assert_eq!(cells.len(), 5);
        assert_eq!(cells[0], "ClusterRole/view");
        assert!(cells[1].as_str().is_some_and(|a| !a.is_empty()));
        assert_eq!(
            cells[2..],
            [
                json!("alice, bob"),
                json!("devs"),
                json!("ci/builder, ci/default")
            ]
        );
        let cells = clusterrolebindings_def()
            .strategy
            .table_cells(&json!({"roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}}));
        assert_eq!(cells[0], "ClusterRole/cluster-admin");
        assert_eq!(cells[2..], [json!(""), json!(""), json!("")]);
    }
}

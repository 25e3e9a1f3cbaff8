//! Tests for RBAC: rule matching, subject matching, role resolution, index updates, covers,
//! escalation messages, and an ignored micro benchmark of decisions.

use std::sync::Arc;

use serde_json::{json, Value};

use super::escalation::compact_rules;
use super::*;
use crate::authz::{Attributes, Authorizer, Decision, NonResourceRule, ResourceRule};
use crate::request_info::RequestInfo;
use crate::user::UserInfo;

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: strings(groups),
        resources: strings(resources),
        ..PolicyRule::default()
    }
}

fn named(mut rule: PolicyRule, names: &[&str]) -> PolicyRule {
    rule.resource_names = strings(names);
    rule
}

fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: strings(urls),
        ..PolicyRule::default()
    }
}

/// A resource request; `resource` may be `res/sub`.
fn req(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> RequestInfo {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    RequestInfo {
        is_resource_request: true,
        verb: verb.into(),
        api_group: group.into(),
        api_version: "v1".into(),
        namespace: namespace.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        path: format!("/apis/{group}/v1/{resource}"),
        ..RequestInfo::default()
    }
}

fn non_resource(verb: &str, path: &str) -> RequestInfo {
    RequestInfo {
        verb: verb.into(),
        path: path.into(),
        ..RequestInfo::default()
    }
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo::new(name, strings(groups))
}

fn rules_json(rules: &[PolicyRule]) -> Value {
    serde_json::to_value(rules).unwrap()
}

fn role(namespace: &str, name: &str, rules: &[PolicyRule]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"namespace": namespace, "name": name},
        "rules": rules_json(rules),
    })
}

fn cluster_role(name: &str, rules: &[PolicyRule]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules_json(rules),
    })
}

fn subject(kind: &str, name: &str, namespace: &str) -> Value {
    let mut s = json!({"kind": kind, "name": name});
    if kind != "ServiceAccount" {
        s["apiGroup"] = json!("rbac.authorization.k8s.io");
    }
    if !namespace.is_empty() {
        s["namespace"] = json!(namespace);
    }
    s
}

fn role_binding(
    namespace: &str,
    name: &str,
    role_kind: &str,
    role: &str,
    subjects: Vec<Value>,
) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"namespace": namespace, "name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    })
}

fn cluster_role_binding(name: &str, role: &str, subjects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn decide(index: &Arc<RbacIndex>, user: &UserInfo, request: &RequestInfo) -> Decision {
    RbacAuthorizer::new(Arc::clone(index)).decide(user, request)
}

fn allowed(index: &Arc<RbacIndex>, user: &UserInfo, request: &RequestInfo) -> bool {
    decide(index, user, request).is_allowed()
}

// ---------------------------------------------------------------------------------------------
// Rule matching
// ---------------------------------------------------------------------------------------------

#[test]
fn rule_matching_table() {
    let cases: Vec<(&str, PolicyRule, RequestInfo, bool)> = vec![
        // verbs
        (
            "exact verb",
            rule(&["get"], &[""], &["pods"]),
            req("get", "", "pods", "ns", "p"),
            true,
        ),
        (
            "other verb",
            rule(&["get"], &[""], &["pods"]),
            req("list", "", "pods", "ns", ""),
            false,
        ),
        (
            "verb star",
            rule(&["*"], &[""], &["pods"]),
            req("deletecollection", "", "pods", "ns", ""),
            true,
        ),
        (
            "verbs are case sensitive",
            rule(&["GET"], &[""], &["pods"]),
            req("get", "", "pods", "ns", ""),
            false,
        ),
        (
            "no verbs",
            rule(&[], &[""], &["pods"]),
            req("get", "", "pods", "ns", ""),
            false,
        ),
        // API groups
        (
            "core group",
            rule(&["get"], &[""], &["pods"]),
            req("get", "", "pods", "", ""),
            true,
        ),
        (
            "core rule, apps request",
            rule(&["get"], &[""], &["deployments"]),
            req("get", "apps", "deployments", "", ""),
            false,
        ),
        (
            "apps rule, core request",
            rule(&["get"], &["apps"], &["pods"]),
            req("get", "", "pods", "", ""),
            false,
        ),
        (
            "group star",
            rule(&["get"], &["*"], &["deployments"]),
            req("get", "apps", "deployments", "", ""),
            true,
        ),
        (
            "group star covers core",
            rule(&["get"], &["*"], &["pods"]),
            req("get", "", "pods", "", ""),
            true,
        ),
        (
            "no groups",
            rule(&["get"], &[], &["pods"]),
            req("get", "", "pods", "", ""),
            false,
        ),
        // resources
        (
            "resource star",
            rule(&["get"], &[""], &["*"]),
            req("get", "", "secrets", "ns", "s"),
            true,
        ),
        (
            "resource star covers subresources",
            rule(&["get"], &[""], &["*"]),
            req("get", "", "pods/log", "ns", "p"),
            true,
        ),
        (
            "resource does not cover subresource",
            rule(&["get"], &[""], &["pods"]),
            req("get", "", "pods/log", "ns", "p"),
            false,
        ),
        (
            "subresource exact",
            rule(&["get"], &[""], &["pods/log"]),
            req("get", "", "pods/log", "ns", "p"),
            true,
        ),
        (
            "subresource rule, resource request",
            rule(&["get"], &[""], &["pods/log"]),
            req("get", "", "pods", "ns", "p"),
            false,
        ),
        (
            "other subresource",
            rule(&["get"], &[""], &["pods/log"]),
            req("get", "", "pods/exec", "ns", "p"),
            false,
        ),
        (
            "other resource same subresource",
            rule(&["get"], &[""], &["pods/status"]),
            req("get", "", "nodes/status", "", "n"),
            false,
        ),
        (
            "star subresource",
            rule(&["update"], &["apps"], &["*/scale"]),
            req("update", "apps", "deployments/scale", "ns", "d"),
            true,
        ),
        (
            "star subresource other sub",
            rule(&["update"], &["apps"], &["*/scale"]),
            req("update", "apps", "deployments/status", "ns", "d"),
            false,
        ),
        (
            "star subresource, no subresource",
            rule(&["update"], &["apps"], &["*/scale"]),
            req("update", "apps", "deployments", "ns", "d"),
            false,
        ),
        (
            "star subresource is a suffix match of the whole sub",
            rule(&["get"], &[""], &["*/log"]),
            req("get", "", "pods/catalog", "ns", "p"),
            false,
        ),
        (
            "resource prefix is no match",
            rule(&["get"], &[""], &["pod"]),
            req("get", "", "pods", "ns", ""),
            false,
        ),
        (
            "no resources",
            rule(&["get"], &[""], &[]),
            req("get", "", "pods", "ns", ""),
            false,
        ),
        // resource names
        (
            "name listed",
            named(rule(&["get"], &[""], &["configmaps"]), &["a", "b"]),
            req("get", "", "configmaps", "ns", "b"),
            true,
        ),
        (
            "name not listed",
            named(rule(&["get"], &[""], &["configmaps"]), &["a"]),
            req("get", "", "configmaps", "ns", "c"),
            false,
        ),
        (
            "names never match a list",
            named(rule(&["list"], &[""], &["configmaps"]), &["a"]),
            req("list", "", "configmaps", "ns", ""),
            false,
        ),
        (
            "no names: every name",
            rule(&["get"], &[""], &["configmaps"]),
            req("get", "", "configmaps", "ns", "anything"),
            true,
        ),
        // non-resource URLs
        (
            "url exact",
            urls(&["get"], &["/healthz"]),
            non_resource("get", "/healthz"),
            true,
        ),
        (
            "url other",
            urls(&["get"], &["/healthz"]),
            non_resource("get", "/livez"),
            false,
        ),
        (
            "url exact is not a prefix",
            urls(&["get"], &["/healthz"]),
            non_resource("get", "/healthz/etcd"),
            false,
        ),
        (
            "url star",
            urls(&["get"], &["*"]),
            non_resource("get", "/anything/at/all"),
            true,
        ),
        (
            "url prefix star",
            urls(&["get"], &["/apis/*"]),
            non_resource("get", "/apis/apps/v1"),
            true,
        ),
        (
            "url prefix star matches the bare prefix",
            urls(&["get"], &["/apis/*"]),
            non_resource("get", "/apis/"),
            true,
        ),
        (
            "url prefix star not without slash",
            urls(&["get"], &["/apis/*"]),
            non_resource("get", "/apis"),
            false,
        ),
        (
            "url prefix star other path",
            urls(&["get"], &["/apis/*"]),
            non_resource("get", "/api/v1"),
            false,
        ),
        (
            "url several stars trimmed",
            urls(&["get"], &["/debug**"]),
            non_resource("get", "/debug/pprof"),
            true,
        ),
        (
            "url star in the middle is literal",
            urls(&["get"], &["/a/*/b"]),
            non_resource("get", "/a/x/b"),
            false,
        ),
        (
            "url verb",
            urls(&["get"], &["/healthz"]),
            non_resource("post", "/healthz"),
            false,
        ),
        (
            "url verb star",
            urls(&["*"], &["/healthz"]),
            non_resource("post", "/healthz"),
            true,
        ),
        // resource and non-resource rules do not cross
        (
            "url rule, resource request",
            urls(&["*"], &["*"]),
            req("get", "", "pods", "ns", ""),
            false,
        ),
        (
            "resource rule, url request",
            rule(&["*"], &["*"], &["*"]),
            non_resource("get", "/healthz"),
            false,
        ),
        (
            "resource rule, url request named like it",
            rule(&["get"], &[""], &["/healthz"]),
            non_resource("get", "/healthz"),
            false,
        ),
    ];
    for (label, rule, request, want) in cases {
        assert_eq!(rule_allows(&request, &rule), want, "{label}");
    }
}

#[test]
fn policy_rule_serde_matches_kube() {
    let rule = PolicyRule {
        verbs: vec![],
        non_resource_urls: strings(&["/x"]),
        ..PolicyRule::default()
    };
    // verbs always, empty lists otherwise omitted, kube's `nonResourceURLs` spelling
    assert_eq!(
        serde_json::to_value(&rule).unwrap(),
        json!({"verbs": [], "nonResourceURLs": ["/x"]})
    );
    let parsed: PolicyRule = serde_json::from_value(json!({
        "verbs": ["get"], "apiGroups": null, "resources": ["pods"], "resourceNames": ["a"]
    }))
    .unwrap();
    assert_eq!(parsed, named(rule_(&["get"], &[], &["pods"]), &["a"]));
    let subject: Subject =
        serde_json::from_value(json!({"kind": "ServiceAccount", "name": "d", "namespace": "n"}))
            .unwrap();
    assert_eq!(
        subject,
        Subject {
            kind: "ServiceAccount".into(),
            api_group: String::new(),
            name: "d".into(),
            namespace: "n".into()
        }
    );
    let role_ref: RoleRef = serde_json::from_value(json!({"kind": "Role", "name": "r"})).unwrap();
    assert_eq!(role_ref.name, "r");
    assert_eq!(RbacKind::ClusterRoleBinding.plural(), "clusterrolebindings");
    assert_eq!(RbacKind::ALL.len(), 4);
}

fn rule_(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    rule(verbs, groups, resources)
}

// ---------------------------------------------------------------------------------------------
// Subjects, reasons and role resolution
// ---------------------------------------------------------------------------------------------

fn index_with(objects: Vec<(RbacKind, Value)>) -> Arc<RbacIndex> {
    let index = Arc::new(RbacIndex::new());
    index.reset(objects);
    index
}

#[test]
fn subjects_match_as_in_kube() {
    let reader = rule(&["get"], &[""], &["pods"]);
    let index = index_with(vec![
        (RbacKind::Role, role("ns", "reader", &[reader])),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "by-user",
                "Role",
                "reader",
                vec![subject("User", "alice", "")],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "by-group",
                "Role",
                "reader",
                vec![subject("Group", "devs", "")],
            ),
        ),
        // a ServiceAccount subject without namespace is in the binding's namespace
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "by-local-sa",
                "Role",
                "reader",
                vec![subject("ServiceAccount", "local", "")],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "by-other-sa",
                "Role",
                "reader",
                vec![subject("ServiceAccount", "remote", "elsewhere")],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "all-sas-of-ci",
                "Role",
                "reader",
                vec![subject("Group", "system:serviceaccounts:ci", "")],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "unknown-kind",
                "Role",
                "reader",
                vec![subject("Robot", "r2", "")],
            ),
        ),
        (
            RbacKind::ClusterRole,
            cluster_role("node-reader", &[rule(&["get"], &[""], &["nodes"])]),
        ),
        // in a cluster role binding, a ServiceAccount needs its namespace
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding(
                "nodes-sa",
                "node-reader",
                vec![subject("ServiceAccount", "local", "")],
            ),
        ),
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding(
                "nodes-sa-ns",
                "node-reader",
                vec![subject("ServiceAccount", "watcher", "ns")],
            ),
        ),
    ]);
    let get_pod = req("get", "", "pods", "ns", "p");
    let get_node = req("get", "", "nodes", "", "n");
    let cases: Vec<(&str, UserInfo, &RequestInfo, bool)> = vec![
        ("user by name", user("alice", &[]), &get_pod, true),
        ("user names are exact", user("Alice", &[]), &get_pod, false),
        ("user by group", user("bob", &["devs"]), &get_pod, true),
        (
            "group names are not user names",
            user("devs", &[]),
            &get_pod,
            false,
        ),
        (
            "local service account",
            user("system:serviceaccount:ns:local", &[]),
            &get_pod,
            true,
        ),
        (
            "local name, other namespace",
            user("system:serviceaccount:other:local", &[]),
            &get_pod,
            false,
        ),
        (
            "service account elsewhere",
            user("system:serviceaccount:elsewhere:remote", &[]),
            &get_pod,
            true,
        ),
        (
            "not that service account",
            user("system:serviceaccount:ns:remote", &[]),
            &get_pod,
            false,
        ),
        (
            "service accounts by group",
            user(
                "system:serviceaccount:ci:builder",
                &["system:serviceaccounts", "system:serviceaccounts:ci"],
            ),
            &get_pod,
            true,
        ),
        (
            "unknown subject kinds match nobody",
            user("r2", &[]),
            &get_pod,
            false,
        ),
        (
            "cluster binding SA without namespace",
            user("system:serviceaccount:ns:local", &[]),
            &get_node,
            false,
        ),
        (
            "cluster binding SA with namespace",
            user("system:serviceaccount:ns:watcher", &[]),
            &get_node,
            true,
        ),
    ];
    for (label, who, request, want) in cases {
        assert_eq!(allowed(&index, &who, request), want, "{label}");
    }
}

#[test]
fn allow_reasons_read_as_kube() {
    let all = rule(&["*"], &["*"], &["*"]);
    let index = index_with(vec![
        (
            RbacKind::ClusterRole,
            cluster_role("cluster-admin", &[all.clone(), urls(&["*"], &["*"])]),
        ),
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding(
                "cluster-admin",
                "cluster-admin",
                vec![subject("Group", "system:masters", "")],
            ),
        ),
        (
            RbacKind::Role,
            role("ns", "r", &[rule(&["get"], &[""], &["configmaps"])]),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "rb",
                "Role",
                "r",
                vec![subject("User", "someone", ""), subject("User", "u", "")],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "sa",
                "Role",
                "r",
                vec![subject("ServiceAccount", "default", "")],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "sa-elsewhere",
                "Role",
                "r",
                vec![subject("ServiceAccount", "bot", "tools")],
            ),
        ),
        (
            RbacKind::ClusterRole,
            cluster_role("view", &[rule(&["get", "list"], &[""], &["pods"])]),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "ns",
                "view",
                "ClusterRole",
                "view",
                vec![subject("Group", "viewers", "")],
            ),
        ),
    ]);
    let cm = req("get", "", "configmaps", "ns", "c");
    assert_eq!(
        decide(&index, &user("admin", &["system:masters"]), &cm),
        Decision::Allow(
            r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
                .into()
        )
    );
    assert_eq!(
        decide(&index, &user("u", &[]), &cm),
        Decision::Allow(r#"RBAC: allowed by RoleBinding "rb/ns" of Role "r" to User "u""#.into())
    );
    assert_eq!(
        decide(&index, &user("system:serviceaccount:ns:default", &[]), &cm),
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "sa/ns" of Role "r" to ServiceAccount "default/ns""#
                .into()
        )
    );
    assert_eq!(
        decide(&index, &user("system:serviceaccount:tools:bot", &[]), &cm),
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "sa-elsewhere/ns" of Role "r" to ServiceAccount "bot/tools""#
                .into()
        )
    );
    assert_eq!(
        decide(
            &index,
            &user("v", &["viewers"]),
            &req("list", "", "pods", "ns", "")
        ),
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "view/ns" of ClusterRole "view" to Group "viewers""#
                .into()
        )
    );
    // cluster role bindings are visited first: the superuser's reason is the cluster binding
    // even though a role binding would also allow
    assert_eq!(
        decide(&index, &user("u", &["system:masters"]), &cm),
        Decision::Allow(
            r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
                .into()
        )
    );
    // nothing allows: no opinion with an empty reason
    assert_eq!(
        decide(
            &index,
            &user("u", &[]),
            &req("delete", "", "configmaps", "ns", "c")
        ),
        Decision::NoOpinion(String::new())
    );
    assert_eq!(
        decide(&index, &user("nobody", &[]), &cm),
        Decision::NoOpinion(String::new())
    );
    // names with characters Go quotes are escaped as %q does
    let odd = index_with(vec![
        (RbacKind::ClusterRole, cluster_role("r\"1", &[all])),
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding("b\\1", "r\"1", vec![subject("User", "caf\u{e9}\n", "")]),
        ),
    ]);
    assert_eq!(
        decide(&odd, &user("caf\u{e9}\n", &[]), &cm),
        Decision::Allow(
            "RBAC: allowed by ClusterRoleBinding \"b\\\\1\" of ClusterRole \"r\\\"1\" to User \"caf\u{e9}\\n\"".into()
        )
    );
}

#[tokio::test]
async fn authorizer_trait_is_wired() {
    let index = index_with(vec![
        (
            RbacKind::ClusterRole,
            cluster_role("health", &[urls(&["get"], &["/healthz", "/livez"])]),
        ),
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding(
                "health",
                "health",
                vec![subject("Group", "system:authenticated", "")],
            ),
        ),
    ]);
    let authorizer = RbacAuthorizer::new(Arc::clone(&index));
    assert_eq!(authorizer.name(), "RBAC");
    let who = user("u", &["system:authenticated"]);
    let request = non_resource("get", "/livez");
    let decision = authorizer
        .authorize(&Attributes {
            user: &who,
            request: &request,
        })
        .await;
    assert_eq!(
        decision,
        Decision::Allow(
            r#"RBAC: allowed by ClusterRoleBinding "health" of ClusterRole "health" to Group "system:authenticated""#
                .into()
        )
    );
}

#[test]
fn missing_roles_are_errors_and_no_opinion() {
    let index = index_with(vec![(
        RbacKind::ClusterRoleBinding,
        cluster_role_binding("gone", "x", vec![subject("User", "u", "")]),
    )]);
    let request = req("get", "", "pods", "ns", "");
    assert_eq!(
        decide(&index, &user("u", &[]), &request),
        Decision::NoOpinion(r#"RBAC: clusterrole.rbac.authorization.k8s.io "x" not found"#.into())
    );
    // the error does not stop other bindings from allowing
    index.upsert(
        RbacKind::Role,
        &role("ns", "pods", &[rule(&["get"], &[""], &["pods"])]),
    );
    index.upsert(
        RbacKind::RoleBinding,
        &role_binding("ns", "pods", "Role", "pods", vec![subject("User", "u", "")]),
    );
    assert!(allowed(&index, &user("u", &[]), &request));

    // several errors aggregate as `[e1, e2]`; a Role is looked up in the binding's namespace
    index.upsert(
        RbacKind::RoleBinding,
        &role_binding(
            "other",
            "missing-role",
            "Role",
            "pods",
            vec![subject("User", "u", "")],
        ),
    );
    index.upsert(
        RbacKind::RoleBinding,
        &role_binding(
            "other",
            "weird",
            "Something",
            "pods",
            vec![subject("User", "u", "")],
        ),
    );
    assert_eq!(
        decide(&index, &user("u", &[]), &req("get", "", "pods", "other", "")),
        Decision::NoOpinion(
            r#"RBAC: [clusterrole.rbac.authorization.k8s.io "x" not found, role.rbac.authorization.k8s.io "pods" not found, unsupported role reference kind: "Something"]"#
                .into()
        )
    );
    // repeated messages are shown once, as kube's aggregate does
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &cluster_role_binding("gone-too", "x", vec![subject("User", "u", "")]),
    );
    assert_eq!(
        decide(&index, &user("u", &[]), &req("get", "", "pods", "", "")),
        Decision::NoOpinion(r#"RBAC: clusterrole.rbac.authorization.k8s.io "x" not found"#.into())
    );

    let role_ref = |kind: &str, name: &str| RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    };
    assert_eq!(
        index.role_ref_rules(&role_ref("ClusterRole", "x"), ""),
        Err(r#"clusterrole.rbac.authorization.k8s.io "x" not found"#.into())
    );
    assert_eq!(
        index.role_ref_rules(&role_ref("Role", "pods"), "ns"),
        Ok(vec![rule(&["get"], &[""], &["pods"])])
    );
    assert_eq!(
        index.role_ref_rules(&role_ref("Role", "pods"), "other"),
        Err(r#"role.rbac.authorization.k8s.io "pods" not found"#.into())
    );
    assert_eq!(
        index.role_ref_rules(&role_ref("Role", "pods"), ""),
        Err(r#"role.rbac.authorization.k8s.io "pods" not found"#.into())
    );
    assert_eq!(
        index.role_ref_rules(&role_ref("Group", "pods"), "ns"),
        Err(r#"unsupported role reference kind: "Group""#.into())
    );

    // rules_for lists the rules found and the errors
    let (rules, errors) = index.rules_for(&user("u", &[]), "ns");
    assert_eq!(rules, vec![rule(&["get"], &[""], &["pods"])]);
    assert_eq!(
        errors,
        vec![
            r#"clusterrole.rbac.authorization.k8s.io "x" not found"#.to_string(),
            r#"clusterrole.rbac.authorization.k8s.io "x" not found"#.to_string()
        ]
    );
}

#[test]
fn cluster_role_bound_by_role_binding_applies_in_its_namespace_only() {
    let index = index_with(vec![
        (
            RbacKind::ClusterRole,
            cluster_role("edit", &[rule(&["*"], &["", "apps"], &["*"])]),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "team-a",
                "edit",
                "ClusterRole",
                "edit",
                vec![subject("User", "dev", "")],
            ),
        ),
    ]);
    let dev = user("dev", &[]);
    assert!(allowed(
        &index,
        &dev,
        &req("delete", "apps", "deployments", "team-a", "d")
    ));
    assert!(!allowed(
        &index,
        &dev,
        &req("delete", "apps", "deployments", "team-b", "d")
    ));
    // cluster-scoped requests see cluster role bindings only
    assert!(!allowed(
        &index,
        &dev,
        &req("list", "apps", "deployments", "", "")
    ));
    assert!(!allowed(
        &index,
        &dev,
        &req("get", "", "namespaces", "", "team-a")
    ));
    assert_eq!(index.rules_for(&dev, "").0, Vec::<PolicyRule>::new());
    assert_eq!(index.rules_for(&dev, "team-a").0.len(), 1);
    assert_eq!(index.rules_for(&dev, "team-b").0.len(), 0);
}

#[test]
fn rules_for_splits_resource_and_non_resource_rules() {
    let mixed = PolicyRule {
        verbs: strings(&["get"]),
        api_groups: strings(&[""]),
        resources: strings(&["pods"]),
        non_resource_urls: strings(&["/metrics"]),
        ..PolicyRule::default()
    };
    let index = index_with(vec![
        (
            RbacKind::ClusterRole,
            cluster_role("c", &[urls(&["get"], &["/healthz"])]),
        ),
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding("c", "c", vec![subject("User", "u", "")]),
        ),
        (
            RbacKind::ClusterRoleBinding,
            cluster_role_binding("missing", "nope", vec![subject("User", "u", "")]),
        ),
        (
            RbacKind::Role,
            role(
                "ns",
                "r",
                &[named(rule(&["get"], &[""], &["secrets"]), &["s"]), mixed],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding("ns", "r", "Role", "r", vec![subject("User", "u", "")]),
        ),
    ]);
    let info = RbacAuthorizer::new(index).rules_for(&user("u", &[]), "ns");
    assert_eq!(
        info.resource_rules,
        vec![
            ResourceRule {
                verbs: strings(&["get"]),
                api_groups: strings(&[""]),
                resources: strings(&["secrets"]),
                resource_names: strings(&["s"]),
            },
            ResourceRule {
                verbs: strings(&["get"]),
                api_groups: strings(&[""]),
                resources: strings(&["pods"]),
                resource_names: vec![],
            },
        ]
    );
    assert_eq!(
        info.non_resource_rules,
        vec![
            NonResourceRule {
                verbs: strings(&["get"]),
                non_resource_urls: strings(&["/healthz"]),
            },
            NonResourceRule {
                verbs: strings(&["get"]),
                non_resource_urls: strings(&["/metrics"]),
            },
        ]
    );
    assert!(!info.incomplete);
    assert_eq!(
        info.errors,
        vec![r#"clusterrole.rbac.authorization.k8s.io "nope" not found"#.to_string()]
    );
}

// ---------------------------------------------------------------------------------------------
// Index updates
// ---------------------------------------------------------------------------------------------

#[test]
fn index_updates_are_incremental() {
    let index = Arc::new(RbacIndex::new());
    assert!(index.is_empty());
    let get_cm = req("get", "", "configmaps", "ns", "c");
    let list_cm = req("list", "", "configmaps", "ns", "");
    let alice = user("alice", &[]);
    let bob = user("bob", &["team"]);

    index.upsert(
        RbacKind::Role,
        &role("ns", "r", &[rule(&["get"], &[""], &["configmaps"])]),
    );
    index.upsert(
        RbacKind::RoleBinding,
        &role_binding("ns", "b", "Role", "r", vec![subject("User", "alice", "")]),
    );
    assert!(allowed(&index, &alice, &get_cm));
    assert!(!allowed(&index, &alice, &list_cm));
    assert!(!allowed(&index, &bob, &get_cm));

    // a role edit takes effect without touching the binding
    index.upsert(
        RbacKind::Role,
        &role("ns", "r", &[rule(&["get", "list"], &[""], &["configmaps"])]),
    );
    assert!(allowed(&index, &alice, &list_cm));
    assert_eq!(index.len(RbacKind::Role), 1);

    // upsert replaces: the binding moves from alice to bob's group
    index.upsert(
        RbacKind::RoleBinding,
        &role_binding("ns", "b", "Role", "r", vec![subject("Group", "team", "")]),
    );
    assert!(!allowed(&index, &alice, &get_cm));
    assert!(allowed(&index, &bob, &get_cm));
    assert_eq!(index.len(RbacKind::RoleBinding), 1);

    // a binding created before its role starts working when the role appears
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &cluster_role_binding("late", "late", vec![subject("User", "alice", "")]),
    );
    assert!(!allowed(&index, &alice, &req("get", "", "nodes", "", "n")));
    index.upsert(
        RbacKind::ClusterRole,
        &cluster_role("late", &[rule(&["get"], &[""], &["nodes"])]),
    );
    assert!(allowed(&index, &alice, &req("get", "", "nodes", "", "n")));

    // removing the role leaves the binding, which now fails to resolve
    index.remove(RbacKind::Role, "ns", "r");
    assert_eq!(
        decide(&index, &bob, &get_cm),
        Decision::NoOpinion(r#"RBAC: role.rbac.authorization.k8s.io "r" not found"#.into())
    );
    // removing the binding removes it from every subject key
    index.remove(RbacKind::RoleBinding, "ns", "b");
    assert_eq!(
        decide(&index, &bob, &get_cm),
        Decision::NoOpinion(String::new())
    );
    assert_eq!(index.len(RbacKind::RoleBinding), 0);
    // the namespace argument is ignored for cluster kinds; removing what is absent is fine
    index.remove(RbacKind::ClusterRoleBinding, "whatever", "late");
    index.remove(RbacKind::ClusterRoleBinding, "", "late");
    index.remove(RbacKind::RoleBinding, "nowhere", "nothing");
    assert!(!allowed(&index, &alice, &req("get", "", "nodes", "", "n")));
    assert_eq!(index.len(RbacKind::ClusterRoleBinding), 0);
    assert_eq!(index.len(RbacKind::ClusterRole), 1);

    // same name in two namespaces are two objects
    index.upsert(RbacKind::Role, &role("a", "r", &[]));
    index.upsert(RbacKind::Role, &role("b", "r", &[]));
    assert_eq!(index.len(RbacKind::Role), 2);

    // reset replaces everything
    index.reset(vec![(RbacKind::ClusterRole, cluster_role("only", &[]))]);
    assert_eq!(RbacKind::ALL.map(|k| index.len(k)), [0, 1, 0, 0]);
}

#[test]
fn malformed_objects_are_skipped() {
    let index = Arc::new(RbacIndex::new());
    let alice = user("alice", &[]);
    let get_cm = req("get", "", "configmaps", "ns", "c");
    for bad in [
        json!(null),
        json!("role"),
        json!({}),
        json!({"metadata": "x"}),
        json!({"metadata": {"name": 5}}),
        json!({"metadata": {"name": ""}}),
        // a Role needs a namespace
        json!({"metadata": {"name": "r"}, "rules": []}),
    ] {
        index.upsert(RbacKind::Role, &bad);
        index.upsert(RbacKind::RoleBinding, &bad);
    }
    assert!(index.is_empty());

    // null lists read as empty, as Go's decoder reads them (aggregated ClusterRoles are
    // stored with `"rules": null`)
    index.upsert(
        RbacKind::ClusterRole,
        &json!({"metadata": {"name": "agg"}, "rules": null}),
    );
    index.upsert(RbacKind::RoleBinding, &json!({"metadata": {"name": "b", "namespace": "ns"}, "subjects": null, "roleRef": {"kind": "Role", "name": "r"}}));
    assert_eq!(index.len(RbacKind::ClusterRole), 1);
    assert_eq!(index.len(RbacKind::RoleBinding), 1);

    // a cluster kind ignores a namespace it should not have
    index.upsert(RbacKind::ClusterRole, &json!({"metadata": {"name": "cr", "namespace": "x"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}));
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &cluster_role_binding("crb", "cr", vec![subject("User", "alice", "")]),
    );
    assert!(allowed(&index, &alice, &get_cm));

    // a malformed update of a known object drops the old grants
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &json!({"metadata": {"name": "crb"}, "subjects": "alice"}),
    );
    assert!(!allowed(&index, &alice, &get_cm));
    assert_eq!(index.len(RbacKind::ClusterRoleBinding), 0);
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &cluster_role_binding("crb", "cr", vec![subject("User", "alice", "")]),
    );
    index.upsert(
        RbacKind::ClusterRole,
        &json!({"metadata": {"name": "cr"}, "rules": [{"verbs": "get"}]}),
    );
    assert_eq!(
        decide(&index, &alice, &get_cm),
        Decision::NoOpinion(r#"RBAC: clusterrole.rbac.authorization.k8s.io "cr" not found"#.into())
    );
}

#[test]
fn a_binding_matched_twice_is_visited_once() {
    let index = index_with(vec![(
        RbacKind::ClusterRoleBinding,
        cluster_role_binding(
            "twice",
            "missing",
            vec![
                subject("User", "u", ""),
                subject("Group", "g1", ""),
                subject("Group", "g2", ""),
                subject("User", "u", ""),
            ],
        ),
    )]);
    let (_, errors) = index.rules_for(&user("u", &["g1", "g2", "g1"]), "");
    assert_eq!(errors.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Covers, compact strings and escalation
// ---------------------------------------------------------------------------------------------

#[test]
fn covers_breaks_rules_down() {
    let owner = vec![rule(&["get", "list"], &[""], &["pods", "configmaps"])];
    assert_eq!(
        covers(&owner, &[rule(&["get"], &[""], &["pods"])]),
        (true, vec![])
    );
    assert_eq!(covers(&owner, &[]), (true, vec![]));
    assert_eq!(
        covers(
            &owner,
            &[rule(&["get", "delete"], &["", "apps"], &["pods"])]
        ),
        (
            false,
            vec![
                rule(&["delete"], &[""], &["pods"]),
                rule(&["get"], &["apps"], &["pods"]),
                rule(&["delete"], &["apps"], &["pods"]),
            ]
        )
    );
    // a `*` owner covers everything, including non-resource URLs it names
    let star = vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])];
    assert_eq!(
        covers(
            &star,
            &[
                named(rule(&["escalate"], &["x.io"], &["things/status"]), &["a"]),
                urls(&["post"], &["/api/x"])
            ]
        ),
        (true, vec![])
    );
    // resource rules do not cover non-resource URLs
    assert_eq!(
        covers(&star[..1], &[urls(&["get"], &["/healthz"])]),
        (false, vec![urls(&["get"], &["/healthz"])])
    );
    // subresources: exact or `*/sub`; a resource does not cover its subresources
    let scale = vec![rule(&["update"], &["apps"], &["*/scale", "deployments"])];
    assert!(
        covers(
            &scale,
            &[rule(&["update"], &["apps"], &["statefulsets/scale"])]
        )
        .0
    );
    assert!(
        !covers(
            &scale,
            &[rule(&["update"], &["apps"], &["deployments/status"])]
        )
        .0
    );
    assert!(!covers(&scale, &[rule(&["update"], &["apps"], &["*"])]).0);
    // resource names: an owner limited to names covers only those names
    let limited = vec![named(rule(&["get"], &[""], &["secrets"]), &["a", "b"])];
    assert!(
        covers(
            &limited,
            &[named(rule(&["get"], &[""], &["secrets"]), &["b"])]
        )
        .0
    );
    assert_eq!(
        covers(
            &limited,
            &[named(rule(&["get"], &[""], &["secrets"]), &["a", "c"])]
        ),
        (
            false,
            vec![named(rule(&["get"], &[""], &["secrets"]), &["c"])]
        )
    );
    assert!(!covers(&limited, &[rule(&["get"], &[""], &["secrets"])]).0);
    assert!(
        covers(
            &[rule(&["get"], &[""], &["secrets"])],
            &[named(rule(&["get"], &[""], &["secrets"]), &["x"])]
        )
        .0
    );
    // non-resource URLs: exact, or a prefix before trailing stars
    let health = vec![urls(&["get"], &["/healthz", "/apis/*"])];
    assert!(
        covers(
            &health,
            &[urls(&["get"], &["/healthz", "/apis/apps", "/apis/*"])]
        )
        .0
    );
    assert_eq!(
        covers(&health, &[urls(&["get", "post"], &["/healthz/etcd"])]),
        (
            false,
            vec![
                urls(&["get"], &["/healthz/etcd"]),
                urls(&["post"], &["/healthz/etcd"])
            ]
        )
    );
    // verbs `*` requested is only covered by `*`
    assert!(!covers(&owner, &[rule(&["*"], &[""], &["pods"])]).0);
    // a rule with no verbs, groups or resources breaks down to nothing: covered
    assert!(covers(&[], &[rule(&[], &[""], &["pods"])]).0);
}

#[test]
fn compact_string_is_kubes() {
    assert_eq!(
        compact_string(&rule(&["get", "list"], &[""], &["pods"])),
        r#"{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}"#
    );
    assert_eq!(
        compact_string(&named(
            rule(&["get"], &["apps"], &["deployments"]),
            &["web"]
        )),
        r#"{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get"]}"#
    );
    assert_eq!(
        compact_string(&urls(&["get"], &["/healthz", "/a\"b"])),
        r#"{NonResourceURLs:["/healthz" "/a\"b"], Verbs:["get"]}"#
    );
    assert_eq!(compact_string(&PolicyRule::default()), "{}");
    // compacting merges simple rules across verbs and keeps the others
    let mut compacted = compact_rules(vec![
        rule(&["get"], &[""], &["pods"]),
        urls(&["get"], &["/x"]),
        rule(&["list"], &[""], &["pods"]),
        named(rule(&["get"], &[""], &["pods"]), &["a"]),
        named(rule(&["list"], &[""], &["pods"]), &["a"]),
    ]);
    compacted.sort_by_key(compact_string);
    assert_eq!(
        compacted,
        vec![
            // `ResourceNames:` sorts before `Verbs:`
            named(rule(&["get", "list"], &[""], &["pods"]), &["a"]),
            rule(&["get", "list"], &[""], &["pods"]),
            urls(&["get"], &["/x"]),
        ]
    );
}

#[test]
fn escalation_message_is_kubes() {
    let index = index_with(vec![
        (
            RbacKind::Role,
            role("ns", "r", &[rule(&["get", "list"], &[""], &["pods"])]),
        ),
        (
            RbacKind::RoleBinding,
            role_binding("ns", "r", "Role", "r", vec![subject("User", "bob", "")]),
        ),
    ]);
    let bob = user("bob", &["dev", "system:authenticated"]);
    assert_eq!(
        confirm_no_escalation(&index, &bob, "ns", &[rule(&["get"], &[""], &["pods"])]),
        Ok(())
    );
    assert_eq!(
        confirm_no_escalation(
            &index,
            &bob,
            "ns",
            &[
                rule(&["get", "watch", "delete"], &[""], &["pods", "secrets"]),
                urls(&["get"], &["/healthz"]),
            ]
        ),
        Err("user \"bob\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"watch\" \"delete\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"watch\" \"delete\"]}\n\
             {NonResourceURLs:[\"/healthz\"], Verbs:[\"get\"]}"
            .into())
    );
    // outside the namespace bob holds nothing; resolution errors are appended
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &cluster_role_binding("broken", "gone", vec![subject("Group", "dev", "")]),
    );
    assert_eq!(
        confirm_no_escalation(&index, &bob, "other", &[rule(&["get"], &[""], &["pods"])]),
        Err("user \"bob\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}; resolution errors: [clusterrole.rbac.authorization.k8s.io \"gone\" not found]"
            .into())
    );
    index.upsert(
        RbacKind::ClusterRoleBinding,
        &cluster_role_binding("broken2", "gone2", vec![subject("User", "bob", "")]),
    );
    let err = confirm_no_escalation(
        &index,
        &user("bob", &["dev"]),
        "",
        &[rule(&["get"], &[""], &["pods"])],
    )
    .unwrap_err();
    assert!(
        err.ends_with("; resolution errors: [[clusterrole.rbac.authorization.k8s.io \"gone\" not found, clusterrole.rbac.authorization.k8s.io \"gone2\" not found]]"),
        "{err}"
    );
    // a user without groups prints `[]`
    let err =
        confirm_no_escalation(&index, &user("x", &[]), "", &[urls(&["get"], &["/x"])]).unwrap_err();
    assert!(
        err.starts_with("user \"x\" (groups=[]) is attempting"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Micro benchmark
// ---------------------------------------------------------------------------------------------

/// 1,000 Roles and 10,000 RoleBindings over 100 namespaces, plus kube's bootstrap-like
/// cluster bindings for `system:authenticated`; prints p50/p99 of one decision. Run with
/// `cargo test --release -p kubegate-policy --lib authz::rbac::tests::bench -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_decisions_10k_bindings() {
    use std::time::Instant;

    let index = Arc::new(RbacIndex::new());
    // bootstrap-like cluster roles every authenticated user gets
    index.upsert(
        RbacKind::ClusterRole,
        &cluster_role(
            "system:discovery",
            &[urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
    );
    index.upsert(
        RbacKind::ClusterRole,
        &cluster_role(
            "system:basic-user",
            &[
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
    );
    for name in ["system:discovery", "system:basic-user"] {
        index.upsert(
            RbacKind::ClusterRoleBinding,
            &cluster_role_binding(
                name,
                name,
                vec![subject("Group", "system:authenticated", "")],
            ),
        );
    }
    for i in 0..200 {
        index.upsert(
            RbacKind::ClusterRoleBinding,
            &cluster_role_binding(
                &format!("crb-{i}"),
                "system:basic-user",
                vec![subject("User", &format!("admin-{i}"), "")],
            ),
        );
    }
    let namespaces = 100;
    for i in 0..1_000 {
        let ns = format!("ns-{}", i % namespaces);
        index.upsert(
            RbacKind::Role,
            &role(
                &ns,
                &format!("role-{i}"),
                &[
                    rule(
                        &["get", "list", "watch"],
                        &[""],
                        &["pods", "services", "endpoints"],
                    ),
                    rule(
                        &["get", "list"],
                        &["apps"],
                        &["deployments", "replicasets", "statefulsets"],
                    ),
                    named(
                        rule(&["get", "update"], &[""], &["configmaps"]),
                        &[&format!("cm-{i}")],
                    ),
                    rule(&["create", "delete"], &["batch"], &["jobs", "cronjobs"]),
                ],
            ),
        );
    }
    let start = Instant::now();
    for i in 0..10_000 {
        let ns_index = i % namespaces;
        let ns = format!("ns-{ns_index}");
        // the roles in this namespace are role-{ns_index + 100k}
        let role_name = format!("role-{}", ns_index + 100 * ((i / namespaces) % 10));
        let subjects = vec![
            subject("User", &format!("user-{i}"), ""),
            subject("Group", &format!("group-{}", i % 500), ""),
            subject("ServiceAccount", &format!("sa-{i}"), ""),
        ];
        index.upsert(
            RbacKind::RoleBinding,
            &role_binding(&ns, &format!("rb-{i}"), "Role", &role_name, subjects),
        );
    }
    println!(
        "10,000 role bindings indexed one by one in {:?}",
        start.elapsed()
    );
    assert_eq!(index.len(RbacKind::RoleBinding), 10_000);
    assert_eq!(index.len(RbacKind::Role), 1_000);

    let authorizer = RbacAuthorizer::new(Arc::clone(&index));
    let mut cases = Vec::new();
    for i in (0..10_000).step_by(37) {
        let ns = format!("ns-{}", i % namespaces);
        let who = user(
            &format!("user-{i}"),
            &["system:authenticated", &format!("group-{}", (i + 1) % 500)],
        );
        // allowed by the last rule of a role binding (after the cluster rules), allowed by a
        // name, denied (every rule visited)
        cases.push((
            who.clone(),
            req("delete", "batch", "cronjobs", &ns, "x"),
            true,
        ));
        cases.push((
            who.clone(),
            req("list", "apps", "statefulsets", &ns, ""),
            true,
        ));
        cases.push((who.clone(), req("delete", "", "secrets", &ns, "s"), false));
        cases.push((
            user(
                &format!("system:serviceaccount:{ns}:sa-{i}"),
                &[
                    "system:authenticated",
                    "system:serviceaccounts",
                    &format!("system:serviceaccounts:{ns}"),
                ],
            ),
            req("watch", "", "pods", &ns, ""),
            true,
        ));
        cases.push((who, non_resource("get", "/apis/apps/v1"), true));
    }
    for (who, request, want) in &cases {
        assert_eq!(
            authorizer.decide(who, request).is_allowed(),
            *want,
            "{who:?} {request:?}"
        );
    }
    // The walk itself (every decision computed), then the same requests answered from the
    // decision cache (every one a hit: the index does not change meanwhile).
    let measure = |label: &str, decide: &dyn Fn(&UserInfo, &RequestInfo) -> Decision| {
        let mut samples = Vec::with_capacity(cases.len() * 50);
        for _ in 0..50 {
            for (who, request, _) in &cases {
                let start = Instant::now();
                let decision = decide(who, request);
                let elapsed = start.elapsed();
                std::hint::black_box(decision);
                samples.push(elapsed);
            }
        }
        samples.sort();
        let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
        println!(
            "{} decisions over 10,000 RoleBindings / 1,000 Roles, {label}: p50 {:?}, p99 {:?}, max {:?}",
            samples.len(),
            pct(0.50),
            pct(0.99),
            samples[samples.len() - 1]
        );
    };
    measure("evaluated", &|who, request| {
        authorizer.evaluate(who, request)
    });
    measure("decision cache hits", &|who, request| {
        authorizer.decide(who, request)
    });
}

#[test]
fn index_and_authorizer_are_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RbacIndex>();
    assert_send_sync::<RbacAuthorizer>();
    // readers on several threads while a writer updates
    let index = Arc::new(RbacIndex::new());
    index.upsert(
        RbacKind::ClusterRole,
        &cluster_role("r", &[rule(&["get"], &[""], &["pods"])]),
    );
    let writer = {
        let index = Arc::clone(&index);
        std::thread::spawn(move || {
            for i in 0..200 {
                index.upsert(
                    RbacKind::ClusterRoleBinding,
                    &cluster_role_binding(&format!("b{i}"), "r", vec![subject("User", "u", "")]),
                );
            }
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let index = Arc::clone(&index);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let _ = decide(&index, &user("u", &[]), &req("get", "", "pods", "", ""));
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for reader in readers {
        reader.join().unwrap();
    }
    assert!(allowed(
        &index,
        &user("u", &[]),
        &req("get", "", "pods", "", "")
    ));
    assert_eq!(index.len(RbacKind::ClusterRoleBinding), 200);
}

#[test]
fn remembered_decisions_follow_every_index_change() {
    // One authorizer throughout, so its decision cache is in play.
    let index = Arc::new(RbacIndex::new());
    let authorizer = RbacAuthorizer::new(Arc::clone(&index));
    let bob = user("bob", &["system:authenticated"]);
    let get = req("get", "", "configmaps", "team-a", "app");
    assert!(!authorizer.decide(&bob, &get).is_allowed());
    assert!(!authorizer.decide(&bob, &get).is_allowed());

    index.upsert(
        RbacKind::Role,
        &role(
            "team-a",
            "reader",
            &[rule(&["get"], &[""], &["configmaps"])],
        ),
    );
    index.upsert(
        RbacKind::RoleBinding,
        &role_binding(
            "team-a",
            "bob-reads",
            "Role",
            "reader",
            vec![subject("User", "bob", "")],
        ),
    );
    assert!(
        authorizer.decide(&bob, &get).is_allowed(),
        "a new binding was not seen"
    );
    assert!(authorizer.decide(&bob, &get).is_allowed());

    // Narrowing the role, then removing the binding, each take effect at once.
    index.upsert(
        RbacKind::Role,
        &role(
            "team-a",
            "reader",
            &[rule(&["list"], &[""], &["configmaps"])],
        ),
    );
    assert!(
        !authorizer.decide(&bob, &get).is_allowed(),
        "a narrowed role still allowed"
    );
    index.upsert(
        RbacKind::Role,
        &role(
            "team-a",
            "reader",
            &[rule(&["get"], &[""], &["configmaps"])],
        ),
    );
    assert!(authorizer.decide(&bob, &get).is_allowed());
    index.remove(RbacKind::RoleBinding, "team-a", "bob-reads");
    assert!(
        !authorizer.decide(&bob, &get).is_allowed(),
        "a removed binding still allowed"
    );
    // A relist replacing everything also counts as a change.
    index.reset(vec![
        (
            RbacKind::Role,
            role(
                "team-a",
                "reader",
                &[rule(&["get"], &[""], &["configmaps"])],
            ),
        ),
        (
            RbacKind::RoleBinding,
            role_binding(
                "team-a",
                "bob-reads",
                "Role",
                "reader",
                vec![subject("User", "bob", "")],
            ),
        ),
    ]);
    assert!(
        authorizer.decide(&bob, &get).is_allowed(),
        "a relist was not seen"
    );
}

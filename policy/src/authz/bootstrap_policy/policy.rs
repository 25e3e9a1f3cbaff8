//! The default ClusterRoles and ClusterRoleBindings kube-apiserver (v1.33) bootstraps, as kube's
//! `bootstrappolicy.ClusterRoles()` / `ClusterRoleBindings()` build them: the user-facing roles
//! (`cluster-admin`, `admin`, `edit`, `view` and the `system:aggregate-to-*` roles that feed the
//! last three) and the discovery, self-review, public-info and monitoring roles every client
//! leans on. Roles for kube's own components (nodes, scheduler, controllers) are left out:
//! kubegate runs none of them. The namespaced Roles and RoleBindings are in
//! [`super::namespace_policy`].
//!
//! Every object carries kube's `kubernetes.io/bootstrapping: rbac-defaults` label and the
//! `rbac.authorization.kubernetes.io/autoupdate: "true"` annotation (`addDefaultMetadata`).

use serde_json::{json, Map, Value};

/// Label on every bootstrap object, so `kubectl get clusterroles -l ...` finds them.
pub const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";
/// Value of [`BOOTSTRAPPING_LABEL`].
pub const BOOTSTRAPPING_VALUE: &str = "rbac-defaults";
/// Annotation that opts an object in (`"true"`) or out (`"false"`) of start-up reconciliation.
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// ClusterRoles labelled `"true"` with this are aggregated into `admin`.
pub const AGGREGATE_TO_ADMIN_LABEL: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// ClusterRoles labelled `"true"` with this are aggregated into `edit`.
pub const AGGREGATE_TO_EDIT_LABEL: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// ClusterRoles labelled `"true"` with this are aggregated into `view`.
pub const AGGREGATE_TO_VIEW_LABEL: &str = "rbac.authorization.k8s.io/aggregate-to-view";

pub(super) const RBAC_API_VERSION: &str = "rbac.authorization.k8s.io/v1";
pub(super) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

// The verb sets policy.go names.
pub(super) const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

// API groups, by policy.go's names.
pub(super) const LEGACY: &str = "";
const APPS: &str = "apps";
const AUTHENTICATION: &str = "authentication.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTOSCALING: &str = "autoscaling";
const BATCH: &str = "batch";
pub(super) const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const EXTENSIONS: &str = "extensions";
const POLICY: &str = "policy";
const NETWORKING: &str = "networking.k8s.io";

/// The bootstrap ClusterRoles, in the order kube creates them.
pub fn cluster_roles() -> Vec<Value> {
    vec![
        // A "root" role which can do absolutely anything.
        role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        // Just enough to tell whether the server is ready and negotiate API versions.
        role(
            "system:discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        // Read access to the monitoring endpoints; the splatted health checks show individual
        // checks, which may say more about the cluster than the aggregate does.
        role(
            "system:monitoring",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        // Lets a "normal" user learn about themselves.
        role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &[AUTHORIZATION],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(&["create"], &[AUTHENTICATION], &["selfsubjectreviews"]),
            ],
        ),
        // Insensitive cluster information, for everyone including anonymous users.
        role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(
                &["get"],
                &["/livez", "/readyz", "/healthz", "/version", "/version/"],
            )],
        ),
        // Namespace admin: `edit` plus the power to grant permissions. Its rules come from
        // aggregation only.
        aggregated_role("admin", &[], AGGREGATE_TO_ADMIN_LABEL),
        // Namespace editor: all user-level actions, none of the privileged ones (`/status`,
        // quota, limits) that control the namespace itself.
        aggregated_role("edit", &[AGGREGATE_TO_ADMIN_LABEL], AGGREGATE_TO_EDIT_LABEL),
        // Namespace viewer: read-only access to non-escalating resources.
        aggregated_role("view", &[AGGREGATE_TO_EDIT_LABEL], AGGREGATE_TO_VIEW_LABEL),
        role(
            "system:aggregate-to-admin",
            &[AGGREGATE_TO_ADMIN_LABEL],
            vec![
                rule(
                    &["create"],
                    &[AUTHORIZATION],
                    &["localsubjectaccessreviews"],
                ),
                rule(READ_WRITE, &[RBAC_GROUP], &["roles", "rolebindings"]),
            ],
        ),
        role(
            "system:aggregate-to-edit",
            &[AGGREGATE_TO_EDIT_LABEL],
            aggregate_to_edit_rules(),
        ),
        role(
            "system:aggregate-to-view",
            &[AGGREGATE_TO_VIEW_LABEL],
            aggregate_to_view_rules(),
        ),
        // Lets delegating API servers (extension servers behind kubegate) check tokens and
        // access with the review APIs.
        role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
                rule(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
            ],
        ),
        // Lets ServiceAccounts (workload identity federation) read the issuer's discovery
        // document and keys.
        role(
            "system:service-account-issuer-discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
    ]
}

fn aggregate_to_edit_rules() -> Vec<Value> {
    vec![
        // Read on escalating resources, which `view` leaves out.
        rule(
            READ,
            &[LEGACY],
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], &[LEGACY], &["serviceaccounts"]),
        rule(
            WRITE,
            &[LEGACY],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], &[LEGACY], &["pods/eviction"]),
        // No `endpoints` since 1.22 (CVE-2021-25740): writing them can point Services at
        // backends the writer could not otherwise reach.
        rule(
            WRITE,
            &[LEGACY],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], &[LEGACY], &["serviceaccounts/token"]),
        rule(
            WRITE,
            &[APPS],
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(WRITE, &[AUTOSCALING], &["horizontalpodautoscalers"]),
        rule(WRITE, &[BATCH], &["jobs", "cronjobs"]),
        rule(
            WRITE,
            &[EXTENSIONS],
            &[
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "ingresses",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        rule(WRITE, &[POLICY], &["poddisruptionbudgets"]),
        rule(WRITE, &[NETWORKING], &["networkpolicies", "ingresses"]),
        // Leases for leader election, so namespace workloads need not use ConfigMaps.
        rule(READ_WRITE, &[COORDINATION], &["leases"]),
    ]
}

fn aggregate_to_view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            &[LEGACY],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            &[LEGACY],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        // Reading namespaces at namespace scope means reading *this* namespace: a hint of
        // which namespaces one has access to.
        rule(READ, &[LEGACY], &["namespaces"]),
        rule(READ, &[DISCOVERY], &["endpointslices"]),
        rule(
            READ,
            &[APPS],
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        rule(
            READ,
            &[AUTOSCALING],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &[BATCH],
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        rule(
            READ,
            &[EXTENSIONS],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        rule(
            READ,
            &[POLICY],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &[NETWORKING],
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}

/// The bootstrap ClusterRoleBindings, in the order kube creates them.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", &["system:masters"]),
        binding("system:monitoring", &["system:monitoring"]),
        binding("system:discovery", &["system:authenticated"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        binding(
            "system:service-account-issuer-discovery",
            &["system:serviceaccounts"],
        ),
    ]
}

/// A resource rule. Lists are sorted, as kube's `RuleOrDie` sorts them, so the objects read
/// exactly like the ones kube writes.
pub(super) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({
        "verbs": sorted(verbs),
        "apiGroups": sorted(groups),
        "resources": sorted(resources),
    })
}

/// A non-resource URL rule, sorted like [`rule`].
fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({
        "verbs": sorted(verbs),
        "nonResourceURLs": sorted(urls),
    })
}

pub(super) fn sorted(items: &[&str]) -> Vec<String> {
    let mut items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    items.sort();
    items
}

/// The metadata `addDefaultMetadata` gives every bootstrap object, plus `extra_labels` set to
/// `"true"` (the aggregation labels).
pub(super) fn metadata(name: &str, extra_labels: &[&str]) -> Value {
    let mut labels = Map::new();
    labels.insert(BOOTSTRAPPING_LABEL.into(), BOOTSTRAPPING_VALUE.into());
    for label in extra_labels {
        labels.insert((*label).into(), "true".into());
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": { AUTOUPDATE_ANNOTATION: "true" },
    })
}

fn role(name: &str, labels: &[&str], rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(name, labels),
        "rules": rules,
    })
}

/// A ClusterRole whose rules the aggregation controller fills from the ClusterRoles labelled
/// `aggregate_label: "true"`. kube writes `"rules": null` here; an empty list means the same
/// and spares readers that expect a list.
fn aggregated_role(name: &str, labels: &[&str], aggregate_label: &str) -> Value {
    json!({
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(name, labels),
        "rules": [],
        "aggregationRule": {
            "clusterRoleSelectors": [
                { "matchLabels": { aggregate_label: "true" } },
            ],
        },
    })
}

fn binding(role_name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|group| json!({ "kind": "Group", "apiGroup": RBAC_GROUP, "name": group }))
        .collect();
    json!({
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": metadata(role_name, &[]),
        "roleRef": { "apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role_name },
        "subjects": subjects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::bootstrap_policy::label_selector_matches;

    fn find<'a>(objects: &'a [Value], name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn the_required_roles_exist_in_kube_order() {
        let names: Vec<String> = cluster_roles()
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "cluster-admin",
                "system:discovery",
                "system:monitoring",
                "system:basic-user",
                "system:public-info-viewer",
                "admin",
                "edit",
                "view",
                "system:aggregate-to-admin",
                "system:aggregate-to-edit",
                "system:aggregate-to-view",
                "system:auth-delegator",
                "system:service-account-issuer-discovery",
            ]
        );
    }

    #[test]
    fn every_object_has_default_metadata_and_kind() {
        let roles = cluster_roles();
        let bindings = cluster_role_bindings();
        for (objects, kind) in [(&roles, "ClusterRole"), (&bindings, "ClusterRoleBinding")] {
            for o in objects.iter() {
                assert_eq!(o["apiVersion"], "rbac.authorization.k8s.io/v1");
                assert_eq!(o["kind"], kind);
                assert_eq!(
                    o["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults",
                    "{o}"
                );
                assert_eq!(
                    o["metadata"]["annotations"],
                    json!({"rbac.authorization.kubernetes.io/autoupdate": "true"})
                );
            }
        }
    }

    #[test]
    fn aggregation_labels_and_rules_chain_like_kube() {
        let roles = cluster_roles();
        // (role, aggregation labels it carries, label its aggregationRule selects)
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("admin", &[], Some(AGGREGATE_TO_ADMIN_LABEL)),
            (
                "edit",
                &[AGGREGATE_TO_ADMIN_LABEL],
                Some(AGGREGATE_TO_EDIT_LABEL),
            ),
            (
                "view",
                &[AGGREGATE_TO_EDIT_LABEL],
                Some(AGGREGATE_TO_VIEW_LABEL),
            ),
            (
                "system:aggregate-to-admin",
                &[AGGREGATE_TO_ADMIN_LABEL],
                None,
            ),
            ("system:aggregate-to-edit", &[AGGREGATE_TO_EDIT_LABEL], None),
            ("system:aggregate-to-view", &[AGGREGATE_TO_VIEW_LABEL], None),
            ("cluster-admin", &[], None),
        ];
        for (name, labels, selects) in cases {
            let role = find(&roles, name);
            let mut want = Map::new();
            want.insert(BOOTSTRAPPING_LABEL.into(), BOOTSTRAPPING_VALUE.into());
            for l in *labels {
                want.insert((*l).into(), "true".into());
            }
            assert_eq!(role["metadata"]["labels"], Value::Object(want), "{name}");
            match selects {
                Some(label) => {
                    let mut match_labels = Map::new();
                    match_labels.insert((*label).into(), "true".into());
                    assert_eq!(
                        role["aggregationRule"],
                        json!({"clusterRoleSelectors": [{"matchLabels": match_labels}]}),
                        "{name}"
                    );
                    assert_eq!(role["rules"], json!([]), "{name} has rules of its own");
                }
                None => assert!(role.get("aggregationRule").is_none(), "{name}"),
            }
        }
    }

    #[test]
    fn view_selects_aggregate_to_view_and_edit_selects_view() {
        let roles = cluster_roles();
        let selector_of =
            |name: &str| find(&roles, name)["aggregationRule"]["clusterRoleSelectors"][0].clone();
        let labels_of = |name: &str| {
            find(&roles, name)["metadata"]["labels"]
                .as_object()
                .unwrap()
                .clone()
        };
        assert!(label_selector_matches(
            &selector_of("view"),
            &labels_of("system:aggregate-to-view")
        ));
        assert!(label_selector_matches(
            &selector_of("edit"),
            &labels_of("view")
        ));
        assert!(label_selector_matches(
            &selector_of("edit"),
            &labels_of("system:aggregate-to-edit")
        ));
        assert!(label_selector_matches(
            &selector_of("admin"),
            &labels_of("edit")
        ));
        assert!(!label_selector_matches(
            &selector_of("view"),
            &labels_of("system:aggregate-to-edit")
        ));
        assert!(!label_selector_matches(
            &selector_of("admin"),
            &labels_of("cluster-admin")
        ));
    }

    #[test]
    fn rule_lists_are_sorted_like_rule_or_die() {
        for role in cluster_roles() {
            for rule in role["rules"].as_array().unwrap() {
                for (_, list) in rule.as_object().unwrap() {
                    let items: Vec<&str> = list
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap())
                        .collect();
                    let mut sorted = items.clone();
                    sorted.sort();
                    assert_eq!(items, sorted, "{rule}");
                }
            }
        }
    }

    #[test]
    fn selected_rules_match_kube() {
        let roles = cluster_roles();
        let rules = |name: &str| find(&roles, name)["rules"].as_array().unwrap().clone();

        assert_eq!(
            rules("cluster-admin"),
            [
                json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
            ]
        );
        assert_eq!(
            rules("system:public-info-viewer"),
            [
                json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]})
            ]
        );
        assert_eq!(
            rules("system:discovery")[0]["nonResourceURLs"],
            json!([
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
                "/version/"
            ])
        );
        assert_eq!(
            rules("system:monitoring")[0]["nonResourceURLs"],
            json!([
                "/healthz",
                "/healthz/*",
                "/livez",
                "/livez/*",
                "/metrics",
                "/metrics/slis",
                "/readyz",
                "/readyz/*"
            ])
        );
        assert_eq!(rules("system:basic-user").len(), 2);
        assert_eq!(rules("system:aggregate-to-admin").len(), 2);
        assert_eq!(rules("system:aggregate-to-edit").len(), 13);
        assert_eq!(rules("system:aggregate-to-view").len(), 10);

        let edit = rules("system:aggregate-to-edit");
        assert_eq!(
            edit[12],
            json!({
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
            })
        );
        // Endpoints are readable through view but not writable through edit.
        let writes_endpoints = edit.iter().any(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.contains(&json!("endpoints")))
        });
        assert!(!writes_endpoints);
        assert_eq!(
            rules("system:aggregate-to-view")[3],
            json!({"verbs": ["get", "list", "watch"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]})
        );
    }

    #[test]
    fn bindings_grant_the_right_groups() {
        let bindings = cluster_role_bindings();
        let cases: &[(&str, &[&str])] = &[
            ("cluster-admin", &["system:masters"]),
            ("system:monitoring", &["system:monitoring"]),
            ("system:discovery", &["system:authenticated"]),
            ("system:basic-user", &["system:authenticated"]),
            (
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
            (
                "system:service-account-issuer-discovery",
                &["system:serviceaccounts"],
            ),
        ];
        assert_eq!(bindings.len(), cases.len());
        for (name, groups) in cases {
            let b = find(&bindings, name);
            assert_eq!(
                b["roleRef"],
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name})
            );
            let want: Vec<Value> = groups
                .iter()
                .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
                .collect();
            assert_eq!(b["subjects"], Value::Array(want), "{name}");
            // Every binding points at a bootstrap role.
            find(&cluster_roles(), name);
        }
    }
}

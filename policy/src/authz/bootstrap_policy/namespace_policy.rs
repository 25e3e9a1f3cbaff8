//! The namespaced Roles and RoleBindings kube-apiserver (v1.33) bootstraps into `kube-system`
//! and `kube-public`, as kube's `bootstrappolicy.NamespaceRoles()` /
//! `NamespaceRoleBindings()` (`namespace_policy.go`) build them. The one that matters to
//! everyone is `kube-system/extension-apiserver-authentication-reader`: extension API servers
//! are bound to it to read the `extension-apiserver-authentication` ConfigMap.
//!
//! Every object carries the same default metadata as the cluster-wide ones
//! (`kubernetes.io/bootstrapping: rbac-defaults`, `autoupdate: "true"`) and its namespace.

use serde_json::{json, Value};

use super::policy::{
    metadata, rule, sorted, COORDINATION, LEGACY, RBAC_API_VERSION, RBAC_GROUP, READ,
};

/// `kube-system`, where most of the namespaced bootstrap policy lives.
pub const NAMESPACE_SYSTEM: &str = "kube-system";
/// `kube-public`, where the bootstrap signer keeps `cluster-info`.
pub const NAMESPACE_PUBLIC: &str = "kube-public";

/// The ConfigMap in `kube-system` that tells extension API servers whom to trust.
const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// Prefix of the roles of kube-controller-manager's controllers (`saRolePrefix`).
const CONTROLLER_PREFIX: &str = "system:controller:";
const EVENTS: &str = "events.k8s.io";
const KUBE_CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const KUBE_SCHEDULER: &str = "system:kube-scheduler";

/// The bootstrap Roles: those of `kube-system` then those of `kube-public`, each namespace's
/// in the order kube registers them (kube keeps them in a map by namespace).
pub fn namespace_roles() -> Vec<Value> {
    let controller = |name: &str| format!("{CONTROLLER_PREFIX}{name}");
    vec![
        // Finding the authentication configuration a delegating server starts with.
        role(
            NAMESPACE_SYSTEM,
            "extension-apiserver-authentication-reader",
            vec![named_rule(
                READ,
                &[LEGACY],
                &["configmaps"],
                &[AUTHENTICATION_CONFIGMAP],
            )],
        ),
        // The bootstrap signer inspects kube-system's token Secrets.
        role(
            NAMESPACE_SYSTEM,
            &controller("bootstrap-signer"),
            vec![rule(READ, &[LEGACY], &["secrets"])],
        ),
        // Cloud providers' ConfigMaps (deprecated since 1.10, still bootstrapped).
        role(
            NAMESPACE_SYSTEM,
            &controller("cloud-provider"),
            vec![rule(
                &["create", "get", "list", "watch"],
                &[LEGACY],
                &["configmaps"],
            )],
        ),
        // The token cleaner removes expired token Secrets, only in kube-system.
        role(
            NAMESPACE_SYSTEM,
            &controller("token-cleaner"),
            vec![
                rule(&["get", "list", "watch", "delete"], &[LEGACY], &["secrets"]),
                events_rule(),
            ],
        ),
        // Leader locking of kube-controller-manager (and its coordinated leader election).
        role(
            NAMESPACE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            vec![
                rule(&["watch"], &[LEGACY], &["configmaps"]),
                named_rule(
                    &["get", "update"],
                    &[LEGACY],
                    &["configmaps"],
                    &["kube-controller-manager"],
                ),
                rule(
                    &["get", "watch", "list", "create", "update"],
                    &[COORDINATION],
                    &["leases"],
                ),
            ],
        ),
        // Leader locking of kube-scheduler.
        role(
            NAMESPACE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            vec![
                rule(&["watch"], &[LEGACY], &["configmaps"]),
                named_rule(
                    &["get", "update"],
                    &[LEGACY],
                    &["configmaps"],
                    &["kube-scheduler"],
                ),
            ],
        ),
        // The bootstrap signer writes the signed `cluster-info` ConfigMap.
        role(
            NAMESPACE_PUBLIC,
            &controller("bootstrap-signer"),
            vec![
                rule(READ, &[LEGACY], &["configmaps"]),
                named_rule(&["update"], &[LEGACY], &["configmaps"], &["cluster-info"]),
                events_rule(),
            ],
        ),
    ]
}

/// The bootstrap RoleBindings, ordered like [`namespace_roles`].
pub fn namespace_role_bindings() -> Vec<Value> {
    let controller = |name: &str| format!("{CONTROLLER_PREFIX}{name}");
    let sa = |name: &str| service_account(NAMESPACE_SYSTEM, name);
    vec![
        // Named apart from its role (kube renames `delegatedAuthBinding`).
        binding(
            NAMESPACE_SYSTEM,
            "system::extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            vec![user(KUBE_CONTROLLER_MANAGER), user(KUBE_SCHEDULER)],
        ),
        binding(
            NAMESPACE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-controller-manager",
            vec![
                user(KUBE_CONTROLLER_MANAGER),
                sa("kube-controller-manager"),
                sa("leader-election-controller"),
            ],
        ),
        binding(
            NAMESPACE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            "system::leader-locking-kube-scheduler",
            vec![user(KUBE_SCHEDULER), sa("kube-scheduler")],
        ),
        binding(
            NAMESPACE_SYSTEM,
            &controller("bootstrap-signer"),
            &controller("bootstrap-signer"),
            vec![sa("bootstrap-signer")],
        ),
        binding(
            NAMESPACE_SYSTEM,
            &controller("cloud-provider"),
            &controller("cloud-provider"),
            vec![sa("cloud-provider")],
        ),
        binding(
            NAMESPACE_SYSTEM,
            &controller("token-cleaner"),
            &controller("token-cleaner"),
            vec![sa("token-cleaner")],
        ),
        // The signer's ServiceAccount lives in kube-system, its role in kube-public.
        binding(
            NAMESPACE_PUBLIC,
            &controller("bootstrap-signer"),
            &controller("bootstrap-signer"),
            vec![sa("bootstrap-signer")],
        ),
    ]
}

/// policy.go's `eventsRule()`: recording events through either events API.
fn events_rule() -> Value {
    rule(
        &["create", "update", "patch"],
        &[LEGACY, EVENTS],
        &["events"],
    )
}

/// A resource rule limited to `names` (`.Names(...)`), sorted as `RuleOrDie` sorts.
fn named_rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    let mut rule = rule(verbs, groups, resources);
    rule["resourceNames"] = json!(sorted(names));
    rule
}

fn role(namespace: &str, name: &str, rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": RBAC_API_VERSION,
        "kind": "Role",
        "metadata": namespaced(metadata(name, &[]), namespace),
        "rules": rules,
    })
}

fn binding(namespace: &str, name: &str, role_name: &str, subjects: Vec<Value>) -> Value {
    json!({
        "apiVersion": RBAC_API_VERSION,
        "kind": "RoleBinding",
        "metadata": namespaced(metadata(name, &[]), namespace),
        "roleRef": { "apiGroup": RBAC_GROUP, "kind": "Role", "name": role_name },
        "subjects": subjects,
    })
}

/// `metadata` with `namespace` after `name`, where kube's ObjectMeta puts it.
fn namespaced(metadata: Value, namespace: &str) -> Value {
    let Value::Object(fields) = metadata else {
        return metadata;
    };
    let mut out = serde_json::Map::new();
    for (key, value) in fields {
        let is_name = key == "name";
        out.insert(key, value);
        if is_name {
            out.insert("namespace".into(), json!(namespace));
        }
    }
    Value::Object(out)
}

/// `rbacv1helpers`' `.Users(name)` subject.
fn user(name: &str) -> Value {
    json!({ "kind": "User", "apiGroup": RBAC_GROUP, "name": name })
}

/// `rbacv1helpers`' `.SAs(namespace, name)` subject (no apiGroup, as kube writes it).
fn service_account(namespace: &str, name: &str) -> Value {
    json!({ "kind": "ServiceAccount", "name": name, "namespace": namespace })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objects: &'a [Value], namespace: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["metadata"]["name"] == name && o["metadata"]["namespace"] == namespace)
            .unwrap_or_else(|| panic!("{namespace}/{name} missing"))
    }

    fn ids(objects: &[Value]) -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn roles_and_bindings_are_kubes() {
        assert_eq!(
            ids(&namespace_roles()),
            [
                "kube-system/extension-apiserver-authentication-reader",
                "kube-system/system:controller:bootstrap-signer",
                "kube-system/system:controller:cloud-provider",
                "kube-system/system:controller:token-cleaner",
                "kube-system/system::leader-locking-kube-controller-manager",
                "kube-system/system::leader-locking-kube-scheduler",
                "kube-public/system:controller:bootstrap-signer",
            ]
        );
        assert_eq!(
            ids(&namespace_role_bindings()),
            [
                "kube-system/system::extension-apiserver-authentication-reader",
                "kube-system/system::leader-locking-kube-controller-manager",
                "kube-system/system::leader-locking-kube-scheduler",
                "kube-system/system:controller:bootstrap-signer",
                "kube-system/system:controller:cloud-provider",
                "kube-system/system:controller:token-cleaner",
                "kube-public/system:controller:bootstrap-signer",
            ]
        );
    }

    #[test]
    fn every_object_has_default_metadata_and_kind() {
        let roles = namespace_roles();
        let bindings = namespace_role_bindings();
        for (objects, kind) in [(&roles, "Role"), (&bindings, "RoleBinding")] {
            for o in objects.iter() {
                assert_eq!(o["apiVersion"], "rbac.authorization.k8s.io/v1");
                assert_eq!(o["kind"], kind);
                assert_eq!(
                    o["metadata"]["labels"],
                    json!({"kubernetes.io/bootstrapping": "rbac-defaults"}),
                    "{o}"
                );
                assert_eq!(
                    o["metadata"]["annotations"],
                    json!({"rbac.authorization.kubernetes.io/autoupdate": "true"})
                );
                // kube only bootstraps into reserved `kube-` namespaces.
                let ns = o["metadata"]["namespace"].as_str().unwrap();
                assert!(ns.starts_with("kube-"), "{o}");
                let keys: Vec<&String> = o["metadata"].as_object().unwrap().keys().collect();
                assert_eq!(keys, ["name", "namespace", "labels", "annotations"]);
            }
        }
    }

    #[test]
    fn the_authentication_reader_reads_only_its_configmap() {
        let roles = namespace_roles();
        let reader = find(
            &roles,
            "kube-system",
            "extension-apiserver-authentication-reader",
        );
        assert_eq!(
            reader["rules"],
            json!([{
                "verbs": ["get", "list", "watch"],
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["extension-apiserver-authentication"],
            }])
        );
        let bindings = namespace_role_bindings();
        let binding = find(
            &bindings,
            "kube-system",
            "system::extension-apiserver-authentication-reader",
        );
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
        );
        assert_eq!(
            binding["subjects"],
            json!([
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-controller-manager"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-scheduler"},
            ])
        );
    }

    #[test]
    fn controller_and_leader_locking_rules_match_kube() {
        let roles = namespace_roles();
        let rules = |ns: &str, name: &str| find(&roles, ns, name)["rules"].clone();
        let events = json!({"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]});
        assert_eq!(
            rules("kube-system", "system:controller:token-cleaner"),
            json!([
                {"verbs": ["delete", "get", "list", "watch"], "apiGroups": [""], "resources": ["secrets"]},
                events,
            ])
        );
        assert_eq!(
            rules("kube-system", "system:controller:cloud-provider"),
            json!([{"verbs": ["create", "get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}])
        );
        assert_eq!(
            rules("kube-system", "system:controller:bootstrap-signer"),
            json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["secrets"]}])
        );
        assert_eq!(
            rules("kube-public", "system:controller:bootstrap-signer"),
            json!([
                {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]},
                {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"]},
                events,
            ])
        );
        assert_eq!(
            rules(
                "kube-system",
                "system::leader-locking-kube-controller-manager"
            ),
            json!([
                {"verbs": ["watch"], "apiGroups": [""], "resources": ["configmaps"]},
                {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kube-controller-manager"]},
                {"verbs": ["create", "get", "list", "update", "watch"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]},
            ])
        );
        assert_eq!(
            rules("kube-system", "system::leader-locking-kube-scheduler"),
            json!([
                {"verbs": ["watch"], "apiGroups": [""], "resources": ["configmaps"]},
                {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kube-scheduler"]},
            ])
        );
    }

    #[test]
    fn bindings_point_at_their_namespaces_roles_and_controllers() {
        let roles = namespace_roles();
        let bindings = namespace_role_bindings();
        let sa = |name: &str| json!({"kind": "ServiceAccount", "name": name, "namespace": "kube-system"});
        let cases: &[(&str, &str, Value)] = &[
            (
                "kube-system",
                "system::leader-locking-kube-controller-manager",
                json!([
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-controller-manager"},
                    sa("kube-controller-manager"),
                    sa("leader-election-controller"),
                ]),
            ),
            (
                "kube-system",
                "system::leader-locking-kube-scheduler",
                json!([
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-scheduler"},
                    sa("kube-scheduler"),
                ]),
            ),
            (
                "kube-system",
                "system:controller:bootstrap-signer",
                json!([sa("bootstrap-signer")]),
            ),
            (
                "kube-system",
                "system:controller:cloud-provider",
                json!([sa("cloud-provider")]),
            ),
            (
                "kube-system",
                "system:controller:token-cleaner",
                json!([sa("token-cleaner")]),
            ),
            (
                "kube-public",
                "system:controller:bootstrap-signer",
                json!([sa("bootstrap-signer")]),
            ),
        ];
        for (ns, name, subjects) in cases {
            let b = find(&bindings, ns, name);
            assert_eq!(&b["subjects"], subjects, "{ns}/{name}");
            assert_eq!(b["roleRef"]["kind"], "Role");
            assert_eq!(b["roleRef"]["name"], *name);
        }
        // Every binding's role is bootstrapped in the binding's namespace.
        for b in &bindings {
            let ns = b["metadata"]["namespace"].as_str().unwrap();
            find(&roles, ns, b["roleRef"]["name"].as_str().unwrap());
        }
    }
}

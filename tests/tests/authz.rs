//! RBAC end to end with the real kubectl: a ServiceAccount's token is forbidden until a
//! RoleBinding grants `view`; `kubectl auth can-i` (SelfSubjectAccessReview, also as another
//! user, and `--list`: SelfSubjectRulesReview) agrees with what requests get; ClusterRole
//! aggregation grows `view`; escalation through roles and bindings is refused; the bootstrap
//! policy is reconciled on restart while users' edits (and `autoupdate: "false"`) survive.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::{assert_owns, eventually, managed_entry, Kubegate};
use serde_json::Value;

/// kubectl flags that talk to the server with only a bearer token (no client certificate).
fn with_token(gate: &Kubegate, token: &str) -> Vec<String> {
    vec![
        "--kubeconfig=/dev/null".into(),
        format!("--server={}", gate.url()),
        format!(
            "--certificate-authority={}",
            gate.data_dir.join("pki/ca.crt").display()
        ),
        format!("--token={token}"),
    ]
}

/// Runs kubectl as the token's owner: (succeeded, stdout, stderr).
fn as_token(gate: &Kubegate, token: &str, args: &[&str]) -> (bool, String, String) {
    let flags = with_token(gate, token);
    let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
    all.extend_from_slice(args);
    let out = gate.kubectl(&all);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh token for a ServiceAccount (created if missing).
fn sa_token(gate: &Kubegate, namespace: &str, name: &str) -> String {
    let _ = gate.kubectl(&["-n", namespace, "create", "serviceaccount", name]);
    gate.ok(&["-n", namespace, "create", "token", name])
        .trim()
        .to_string()
}

/// `kubectl auth can-i` answers `yes` (exit 0) or `no` (exit 1) on stdout.
fn can_i(gate: &Kubegate, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = gate.kubectl(&all);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn rules_of(role: &Value) -> Vec<Value> {
    role["rules"].as_array().cloned().unwrap_or_default()
}

#[test]
fn serviceaccount_is_forbidden_until_bound_and_can_i_agrees() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "team-a"]);
    gate.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "app",
        "--from-literal=a=1",
    ]);
    let token = sa_token(&gate, "team-a", "robot");
    let user = "system:serviceaccount:team-a:robot";

    // Nothing granted yet: kube's 403 wording, for a list and for a named get.
    let (ok, _, err) = as_token(&gate, &token, &["-n", "team-a", "get", "configmaps"]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "configmaps is forbidden: User \"{user}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
        )),
        "{err}"
    );
    let (ok, _, err) = as_token(&gate, &token, &["-n", "team-a", "get", "configmap", "app"]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "configmaps \"app\" is forbidden: User \"{user}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
        )),
        "{err}"
    );
    // Non-resource paths are judged too; /version is public (system:public-info-viewer).
    let (ok, _, err) = as_token(&gate, &token, &["get", "--raw", "/metrics"]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "forbidden: User \"{user}\" cannot get path \"/metrics\""
        )),
        "{err}"
    );
    let (ok, out, _) = as_token(&gate, &token, &["get", "--raw", "/version"]);
    assert!(ok && out.contains("gitVersion"), "{out}");
    // ServiceAccounts may read the issuer's discovery document (kube's
    // system:service-account-issuer-discovery binding).
    let (ok, out, err) = as_token(
        &gate,
        &token,
        &["get", "--raw", "/.well-known/openid-configuration"],
    );
    assert!(ok && out.contains("jwks_uri"), "{out}{err}");
    assert_eq!(
        can_i(&gate, &["list", "configmaps", "-n", "team-a", "--as", user]),
        "no"
    );

    // Bind `view` in team-a: the ServiceAccount may read there, not write, not elsewhere.
    gate.ok(&[
        "-n",
        "team-a",
        "create",
        "rolebinding",
        "robot-view",
        "--clusterrole=view",
        "--serviceaccount=team-a:robot",
    ]);
    let listed = eventually(Duration::from_secs(5), || {
        as_token(&gate, &token, &["-n", "team-a", "get", "configmaps"]).0
    });
    assert!(listed, "the RoleBinding never took effect");
    let (ok, out, _) = as_token(
        &gate,
        &token,
        &["-n", "team-a", "get", "configmap", "app", "-o", "name"],
    );
    assert!(ok);
    assert_eq!(out.trim(), "configmap/app");
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "-n",
            "team-a",
            "create",
            "configmap",
            "nope",
            "--from-literal=b=2",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "User \"{user}\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
        )),
        "{err}"
    );
    let (ok, _, err) = as_token(&gate, &token, &["-n", "default", "get", "configmaps"]);
    assert!(!ok && err.contains("in the namespace \"default\""), "{err}");

    // `kubectl auth can-i`: as the admin impersonating, and as the token's owner.
    assert_eq!(
        can_i(&gate, &["list", "configmaps", "-n", "team-a", "--as", user]),
        "yes"
    );
    assert_eq!(
        can_i(
            &gate,
            &["create", "configmaps", "-n", "team-a", "--as", user]
        ),
        "no"
    );
    assert_eq!(
        can_i(
            &gate,
            &["list", "configmaps", "-n", "default", "--as", user]
        ),
        "no"
    );
    let (_, out, _) = as_token(
        &gate,
        &token,
        &["auth", "can-i", "get", "configmaps", "-n", "team-a"],
    );
    assert_eq!(out.trim(), "yes");
    let (_, out, _) = as_token(
        &gate,
        &token,
        &["auth", "can-i", "delete", "configmaps", "-n", "team-a"],
    );
    assert_eq!(out.trim(), "no");
    // The admin (system:masters) may do anything.
    assert_eq!(can_i(&gate, &["create", "clusterrolebindings"]), "yes");
    // `--list` (SelfSubjectRulesReview) shows the view rules for configmaps.
    let (ok, out, err) = as_token(&gate, &token, &["auth", "can-i", "--list", "-n", "team-a"]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("configmaps"))
        .unwrap_or_else(|| panic!("no configmaps line in:\n{out}"));
    assert!(line.contains("[get list watch]"), "{line}");
    assert!(
        out.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{out}"
    );

    // Unbinding takes the access away again.
    gate.ok(&["-n", "team-a", "delete", "rolebinding", "robot-view"]);
    let revoked = eventually(Duration::from_secs(5), || {
        !as_token(&gate, &token, &["-n", "team-a", "get", "configmaps"]).0
    });
    assert!(revoked, "deleting the RoleBinding did not revoke access");
}

#[test]
fn aggregation_grows_view_and_escalation_is_refused() {
    let gate = Kubegate::start();

    // The bootstrap roles are there, `view` filled by aggregation.
    let view = gate.json(&["get", "clusterrole", "view", "-o", "json"]);
    assert!(
        view["aggregationRule"]["clusterRoleSelectors"].is_array(),
        "{view}"
    );
    let before = rules_of(&view);
    assert!(
        before.iter().any(|r| r["resources"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|x| x == "configmaps"))),
        "view has no configmaps rule: {view}"
    );
    assert_eq!(
        view["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );

    // A new ClusterRole labelled aggregate-to-view: view grows.
    gate.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: crontab-reader\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-view: \"true\"\nrules:\n- apiGroups: [stable.example.com]\n  resources: [crontabs]\n  verbs: [get, list, watch]\n",
    );
    let grown = eventually(Duration::from_secs(5), || {
        let view = gate.json(&["get", "clusterrole", "view", "-o", "json"]);
        rules_of(&view)
            .iter()
            .any(|r| r["apiGroups"][0] == "stable.example.com")
    });
    assert!(grown, "view did not aggregate crontab-reader");
    // Removing the label takes the rule away again.
    gate.ok(&[
        "label",
        "clusterrole",
        "crontab-reader",
        "rbac.authorization.k8s.io/aggregate-to-view-",
    ]);
    let shrunk = eventually(Duration::from_secs(5), || {
        let view = gate.json(&["get", "clusterrole", "view", "-o", "json"]);
        !rules_of(&view)
            .iter()
            .any(|r| r["apiGroups"][0] == "stable.example.com")
    });
    assert!(shrunk, "view kept the rule of a role no longer selected");

    // The rules are the aggregation controller's, recorded as kube records them (it applies
    // them with force), so a server-side apply that sets them conflicts with it, as a
    // `helm upgrade` shipping `rules: []` on an aggregated role does against kube.
    let view = gate.json(&[
        "get",
        "clusterrole",
        "view",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    assert_owns(
        managed_entry(&view, "clusterrole-aggregation-controller", ""),
        "Apply",
        "/f:rules",
    );
    assert_owns(
        managed_entry(&view, "kube-apiserver", ""),
        "Update",
        "/f:aggregationRule",
    );
    let out = gate.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=helm", "-f", "-"],
        Some("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: view\nrules: []\n"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("conflict with \"clusterrole-aggregation-controller\": .rules"),
        "{stderr}"
    );

    // A role whose selectors come to match nothing has no rules, and the controller gives
    // the field up (kube's apply configuration leaves an empty list out).
    gate.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: gatherer\naggregationRule:\n  clusterRoleSelectors:\n  - matchLabels:\n      gather: \"yes\"\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: gathered\n  labels:\n    gather: \"yes\"\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get]\n",
    );
    let gathered = eventually(Duration::from_secs(5), || {
        rules_of(&gate.json(&["get", "clusterrole", "gatherer", "-o", "json"])).len() == 1
    });
    assert!(gathered, "gatherer did not aggregate gathered");
    gate.ok(&["label", "clusterrole", "gathered", "gather-"]);
    let given_up = eventually(Duration::from_secs(5), || {
        let role = gate.json(&[
            "get",
            "clusterrole",
            "gatherer",
            "-o",
            "json",
            "--show-managed-fields",
        ]);
        // kube serializes a ClusterRole without rules as `"rules": null`.
        role.get("rules").is_none_or(Value::is_null)
            && !role["metadata"]["managedFields"]
                .as_array()
                .is_some_and(|m| {
                    m.iter()
                        .any(|e| e["manager"] == "clusterrole-aggregation-controller")
                })
    });
    assert!(
        given_up,
        "{}",
        gate.json(&[
            "get",
            "clusterrole",
            "gatherer",
            "-o",
            "json",
            "--show-managed-fields"
        ])
    );

    // An editor who may also manage bindings and roles, but holds only `edit`.
    let token = sa_token(&gate, "default", "editor");
    let user = "system:serviceaccount:default:editor";
    gate.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: rbac-writer\nrules:\n- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterrolebindings, rolebindings, roles, clusterroles]\n  verbs: [create, get, list, update, patch, delete]\n",
    );
    gate.ok(&[
        "create",
        "clusterrolebinding",
        "editor-edit",
        "--clusterrole=edit",
        "--serviceaccount=default:editor",
    ]);
    gate.ok(&[
        "create",
        "clusterrolebinding",
        "editor-rbac",
        "--clusterrole=rbac-writer",
        "--serviceaccount=default:editor",
    ]);
    assert!(eventually(Duration::from_secs(5), || {
        as_token(&gate, &token, &["get", "clusterrolebindings"]).0
    }));

    // Binding cluster-admin: refused, with kube's escalation message.
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "create",
            "clusterrolebinding",
            "grab",
            "--clusterrole=cluster-admin",
            "--user=eve",
        ],
    );
    assert!(!ok, "an editor bound cluster-admin");
    assert!(
        err.contains(&format!(
            "clusterrolebindings.rbac.authorization.k8s.io \"grab\" is forbidden: user \"{user}\""
        )) && err.contains("is attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    let missing = gate.kubectl(&["get", "clusterrolebinding", "grab"]);
    assert!(!missing.status.success(), "a refused binding was stored");

    // Binding a role that does not exist, without `bind`: kube's 404 for the role.
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "-n",
            "default",
            "create",
            "rolebinding",
            "dangling",
            "--role=nope",
            "--user=eve",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("roles.rbac.authorization.k8s.io \"nope\" not found"),
        "{err}"
    );

    // Binding `view`, whose rules `edit` holds, is fine.
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "-n",
            "default",
            "create",
            "rolebinding",
            "share-view",
            "--clusterrole=view",
            "--user=eve",
        ],
    );
    assert!(ok, "{err}");
    // Pointing that binding at cluster-admin is judged as a grant first, as kube's RBAC
    // storage judges it before validation (which would call the roleRef immutable): a 403.
    let binding = gate.json(&[
        "-n",
        "default",
        "get",
        "rolebinding",
        "share-view",
        "-o",
        "json",
    ]);
    let mut changed = binding.clone();
    changed["roleRef"]["name"] = serde_json::json!("cluster-admin");
    let flags = with_token(&gate, &token);
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend_from_slice(&["replace", "-f", "-"]);
    let out = gate.kubectl_stdin(&args, Some(&changed.to_string()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "an editor re-pointed a binding at cluster-admin"
    );
    assert!(
        err.contains("is attempting to grant RBAC permissions not currently held"),
        "{err}"
    );

    // A Role granting what the editor holds (edit covers reading secrets) is fine; a
    // ClusterRole granting what it does not (deleting namespaces) is refused.
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "-n",
            "default",
            "create",
            "role",
            "secret-reader",
            "--verb=get",
            "--resource=secrets",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "create",
            "clusterrole",
            "ns-deleter",
            "--verb=delete",
            "--resource=namespaces",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("clusterroles.rbac.authorization.k8s.io \"ns-deleter\" is forbidden")
            && err.contains("{APIGroups:[\"\"], Resources:[\"namespaces\"], Verbs:[\"delete\"]}"),
        "{err}"
    );
    // With `escalate` on clusterroles, the same create is allowed.
    gate.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: escalator\nrules:\n- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterroles]\n  verbs: [escalate]\n",
    );
    gate.ok(&[
        "create",
        "clusterrolebinding",
        "editor-escalate",
        "--clusterrole=escalator",
        "--serviceaccount=default:editor",
    ]);
    let allowed = eventually(Duration::from_secs(5), || {
        as_token(
            &gate,
            &token,
            &[
                "create",
                "clusterrole",
                "ns-deleter",
                "--verb=delete",
                "--resource=namespaces",
            ],
        )
        .0
    });
    assert!(allowed, "escalate did not permit the ClusterRole");
}

#[test]
fn bootstrap_policy_is_reconciled_and_user_edits_survive_restarts() {
    let mut gate = Kubegate::start();
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:aggregate-to-admin",
        "system:aggregate-to-edit",
        "system:aggregate-to-view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:monitoring",
    ] {
        gate.ok(&["get", "clusterrole", name]);
    }
    let masters = gate.json(&["get", "clusterrolebinding", "cluster-admin", "-o", "json"]);
    assert_eq!(masters["subjects"][0]["name"], "system:masters");
    let public = gate.json(&[
        "get",
        "clusterrolebinding",
        "system:public-info-viewer",
        "-o",
        "json",
    ]);
    let subjects: Vec<&str> = public["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        subjects.contains(&"system:authenticated") && subjects.contains(&"system:unauthenticated"),
        "{public}"
    );

    // A user's extra rule on a bootstrap role survives; a deleted bootstrap role comes back; a
    // role marked autoupdate "false" keeps the user's trimmed rules.
    gate.ok(&[
        "patch",
        "clusterrole",
        "system:basic-user",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":["example.com"],"resources":["widgets"],"verbs":["get"]}}]"#,
    ]);
    gate.ok(&["delete", "clusterrole", "system:public-info-viewer"]);
    gate.ok(&[
        "annotate",
        "--overwrite",
        "clusterrole",
        "system:monitoring",
        "rbac.authorization.kubernetes.io/autoupdate=false",
    ]);
    gate.ok(&[
        "patch",
        "clusterrole",
        "system:monitoring",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/rules","value":[]}]"#,
    ]);
    // A binding's removed bootstrap subject is put back.
    gate.ok(&["patch", "clusterrolebinding", "system:discovery", "--type=json", "-p", r#"[{"op":"replace","path":"/subjects","value":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"someone"}]}]"#]);

    gate.restart();

    let basic = gate.json(&["get", "clusterrole", "system:basic-user", "-o", "json"]);
    assert!(
        rules_of(&basic)
            .iter()
            .any(|r| r["apiGroups"][0] == "example.com"),
        "{basic}"
    );
    assert!(
        rules_of(&basic).iter().any(|r| r["resources"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|x| x == "selfsubjectaccessreviews"))),
        "{basic}"
    );
    let public = gate.json(&[
        "get",
        "clusterrole",
        "system:public-info-viewer",
        "-o",
        "json",
    ]);
    assert!(!rules_of(&public).is_empty(), "{public}");
    let monitoring = gate.json(&["get", "clusterrole", "system:monitoring", "-o", "json"]);
    assert!(
        rules_of(&monitoring).is_empty(),
        "autoupdate=false was overridden: {monitoring}"
    );
    let discovery = gate.json(&[
        "get",
        "clusterrolebinding",
        "system:discovery",
        "-o",
        "json",
    ]);
    let names: Vec<&str> = discovery["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        names.contains(&"someone") && names.contains(&"system:authenticated"),
        "{discovery}"
    );
}

/// A PUT of a missing Service, Endpoints, Event or Lease creates it (kube's
/// `AllowCreateOnUpdate`), and only for a user who may `create` it as well as `update` it;
/// a Lease update must name a resourceVersion.
#[test]
fn a_put_creates_kinds_that_allow_it_when_the_user_may_create() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "team-p"]);
    gate.ok(&[
        "-n",
        "team-p",
        "create",
        "role",
        "updater",
        "--verb=get,update",
        "--resource=services,leases.coordination.k8s.io",
    ]);
    gate.ok(&[
        "-n",
        "team-p",
        "create",
        "rolebinding",
        "updater",
        "--role=updater",
        "--user=upd",
    ]);
    let service = r#"{"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "team-p"},
        "spec": {"ports": [{"port": 80}]}}"#;
    let refused = gate.kubectl_stdin(&["replace", "--as", "upd", "-f", "-"], Some(service));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    // kube 1.33's `withAuthorization` words it as its `ForbiddenStatusError` for `create`.
    assert!(
        stderr.contains(r#"error when replacing "STDIN": services "web" is forbidden: User "upd" cannot create resource "services" in API group "" in the namespace "team-p""#),
        "{stderr}"
    );
    let (code, _) = gate.curl("GET", "/api/v1/namespaces/team-p/services/web", &[], None);
    assert_eq!(code, 404, "a refused create-on-update stores nothing");
    gate.ok(&[
        "-n",
        "team-p",
        "create",
        "role",
        "creator",
        "--verb=create",
        "--resource=services,leases.coordination.k8s.io",
    ]);
    gate.ok(&[
        "-n",
        "team-p",
        "create",
        "rolebinding",
        "creator",
        "--role=creator",
        "--user=upd",
    ]);
    let created = gate.ok_stdin(&["replace", "--as", "upd", "-f", "-"], service);
    assert!(created.contains("service/web replaced"), "{created}");
    let stored = gate.json(&["-n", "team-p", "get", "service", "web", "-o", "json"]);
    assert!(
        stored["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| !ip.is_empty()),
        "a service created by PUT is allocated like any other: {stored}"
    );

    let lease = |rv: &str| {
        format!(
            r#"{{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {{"name": "lock", "namespace": "team-p"{rv}}},
            "spec": {{"holderIdentity": "a"}}}}"#
        )
    };
    let path = "/apis/coordination.k8s.io/v1/namespaces/team-p/leases/lock";
    let (code, body) = gate.curl(
        "PUT",
        path,
        &["Content-Type: application/json"],
        Some(lease("").as_bytes()),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let (code, body) = gate.curl(
        "PUT",
        path,
        &["Content-Type: application/json"],
        Some(lease("").as_bytes()),
    );
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        r#"leases.coordination.k8s.io "lock" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
    );
}

/// kube-controller-manager's ServiceAccount controllers, in-process: a new namespace gets the
/// `default` ServiceAccount and `kube-root-ca.crt` (the CA kubectl trusts), and a
/// `kubernetes.io/service-account-token` Secret is filled with a token that authenticates as
/// its ServiceAccount, and is deleted with it.
#[test]
fn namespaces_get_their_default_account_root_ca_and_token_secrets() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "team-s"]);
    let ready = eventually(Duration::from_secs(10), || {
        gate.kubectl(&["-n", "team-s", "get", "serviceaccount", "default"])
            .status
            .success()
            && gate
                .kubectl(&["-n", "team-s", "get", "configmap", "kube-root-ca.crt"])
                .status
                .success()
    });
    assert!(
        ready,
        "the default service account or kube-root-ca.crt did not come"
    );
    let root_ca = || {
        gate.json(&[
            "-n",
            "team-s",
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-o",
            "json",
        ])
    };
    let ca = std::fs::read_to_string(gate.data_dir.join("pki/ca.crt")).unwrap();
    assert_eq!(root_ca()["data"]["ca.crt"], ca.as_str());
    // Its data and its description come back when edited away, as kube's publisher puts them
    // back; what else is on it stays.
    gate.ok(&[
        "-n",
        "team-s",
        "annotate",
        "configmap",
        "kube-root-ca.crt",
        "kubernetes.io/description-",
        "team/owner=ops",
    ]);
    gate.ok(&[
        "-n",
        "team-s",
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"edited","extra":"x"},"binaryData":{"blob":"AAE="}}"#,
    ]);
    let restored = eventually(Duration::from_secs(10), || {
        let cm = root_ca();
        cm["data"] == serde_json::json!({"ca.crt": ca.as_str()})
            && cm["metadata"]["annotations"]["kubernetes.io/description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Contains a CA bundle"))
    });
    let cm = root_ca();
    assert!(restored, "{cm}");
    assert_eq!(cm["metadata"]["annotations"]["team/owner"], "ops", "{cm}");
    assert_eq!(cm["binaryData"]["blob"], "AAE=", "{cm}");
    // `kubectl create token default` works in a fresh namespace, as against kube.
    let token = gate.ok(&["-n", "team-s", "create", "token", "default"]);
    assert!(!token.trim().is_empty());

    gate.ok(&["-n", "team-s", "create", "serviceaccount", "ci"]);
    let secret = r#"{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "ci-token", "namespace": "team-s",
                     "annotations": {"kubernetes.io/service-account.name": "ci"}}}"#;
    gate.ok_stdin(&["create", "-f", "-"], secret);
    let filled = eventually(Duration::from_secs(10), || {
        let secret = gate.json(&["-n", "team-s", "get", "secret", "ci-token", "-o", "json"]);
        secret["data"]["token"].is_string()
    });
    assert!(filled, "the token secret was not filled");
    let secret = gate.json(&["-n", "team-s", "get", "secret", "ci-token", "-o", "json"]);
    use base64::Engine;
    let decode = |key: &str| {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(secret["data"][key].as_str().unwrap())
            .unwrap();
        String::from_utf8(raw).unwrap()
    };
    assert_eq!(decode("namespace"), "team-s");
    assert_eq!(decode("ca.crt"), ca);
    let account_uid = gate.ok(&[
        "-n",
        "team-s",
        "get",
        "sa",
        "ci",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"],
        account_uid.trim()
    );
    let (ok, out, err) = as_token(
        &gate,
        &decode("token"),
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "system:serviceaccount:team-s:ci");
    // Its Secret records the day the token was last used, as kube's legacy token tracking does.
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let tracked = eventually(Duration::from_secs(10), || {
        let secret = gate.json(&["-n", "team-s", "get", "secret", "ci-token", "-o", "json"]);
        secret["metadata"]["labels"]["kubernetes.io/legacy-token-last-used"] == today.as_str()
    });
    assert!(
        tracked,
        "{}",
        gate.json(&["-n", "team-s", "get", "secret", "ci-token", "-o", "json"])
    );

    gate.ok(&["-n", "team-s", "delete", "serviceaccount", "ci"]);
    let deleted = eventually(Duration::from_secs(10), || {
        !gate
            .kubectl(&["-n", "team-s", "get", "secret", "ci-token"])
            .status
            .success()
    });
    assert!(deleted, "the token secret outlived its service account");
}

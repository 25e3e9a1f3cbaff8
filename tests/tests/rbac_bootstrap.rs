//! The namespaced RBAC bootstrap policy and create-on-update of RBAC objects, end to end with
//! the real kubectl: kube's Roles and RoleBindings in `kube-system` and `kube-public` are
//! served as kube writes them, `extension-apiserver-authentication-reader` lets a bound
//! ServiceAccount read exactly its ConfigMap, edits are reconciled on restart unless opted out
//! (`autoupdate: "false"`), `kubectl replace` of a missing Role creates it, and escalation
//! prevention (and the `create` permission) still judge such a create.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

const READER: &str = "extension-apiserver-authentication-reader";

/// Runs kubectl as the bearer of `token` (no client certificate), with optional stdin:
/// (succeeded, stdout, stderr).
fn as_token(
    gate: &Kubegate,
    token: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    let mut all: Vec<String> = vec![
        "--kubeconfig=/dev/null".into(),
        format!("--server={}", gate.url()),
        format!(
            "--certificate-authority={}",
            gate.data_dir.join("pki/ca.crt").display()
        ),
        format!("--token={token}"),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = gate.kubectl_stdin(&all, stdin);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh token for a ServiceAccount (created, with its namespace, if missing).
fn sa_token(gate: &Kubegate, namespace: &str, name: &str) -> String {
    let _ = gate.kubectl(&["create", "namespace", namespace]);
    let _ = gate.kubectl(&["-n", namespace, "create", "serviceaccount", name]);
    gate.ok(&["-n", namespace, "create", "token", name])
        .trim()
        .to_string()
}

/// `kubectl auth can-i` answers `yes` or `no` on stdout.
fn can_i(gate: &Kubegate, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = gate.kubectl(&all);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn rules_of(role: &Value) -> Vec<Value> {
    role["rules"].as_array().cloned().unwrap_or_default()
}

/// `namespace/name` of every item of a `kubectl get -o json` list.
fn ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    ids.sort();
    ids
}

/// kube's rule for the reader role, in the shape `kubectl -o yaml` prints it.
const READER_RULE_YAML: &str = "rules:
- apiGroups:
  - \"\"
  resourceNames:
  - extension-apiserver-authentication
  resources:
  - configmaps
  verbs:
  - get
  - list
  - watch
";

#[test]
fn namespaced_bootstrap_policy_is_kubes_and_the_reader_role_works() {
    let gate = Kubegate::start();

    let yaml = gate.ok(&["-n", "kube-system", "get", "role", READER, "-o", "yaml"]);
    assert!(yaml.contains(READER_RULE_YAML), "{yaml}");
    assert!(yaml.contains("kind: Role\n"), "{yaml}");
    assert!(
        yaml.contains("    kubernetes.io/bootstrapping: rbac-defaults\n"),
        "{yaml}"
    );
    assert!(
        yaml.contains("    rbac.authorization.kubernetes.io/autoupdate: \"true\"\n"),
        "{yaml}"
    );
    let role = gate.json(&["-n", "kube-system", "get", "role", READER, "-o", "json"]);
    assert_eq!(
        role["rules"],
        json!([{
            "apiGroups": [""],
            "resourceNames": ["extension-apiserver-authentication"],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch"],
        }])
    );

    let binding = gate.json(&[
        "-n",
        "kube-system",
        "get",
        "rolebinding",
        "system::extension-apiserver-authentication-reader",
        "-o",
        "json",
    ]);
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": READER})
    );
    assert_eq!(
        binding["subjects"],
        json!([
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"},
        ])
    );

    // Every namespaced bootstrap object, found by kube's label.
    let label = "-l=kubernetes.io/bootstrapping=rbac-defaults";
    let roles = gate.json(&["get", "roles", "-A", label, "-o", "json"]);
    assert_eq!(
        ids(&roles),
        [
            "kube-public/system:controller:bootstrap-signer",
            "kube-system/extension-apiserver-authentication-reader",
            "kube-system/system::leader-locking-kube-controller-manager",
            "kube-system/system::leader-locking-kube-scheduler",
            "kube-system/system:controller:bootstrap-signer",
            "kube-system/system:controller:cloud-provider",
            "kube-system/system:controller:token-cleaner",
        ]
    );
    let bindings = gate.json(&["get", "rolebindings", "-A", label, "-o", "json"]);
    assert_eq!(
        ids(&bindings),
        [
            "kube-public/system:controller:bootstrap-signer",
            "kube-system/system::extension-apiserver-authentication-reader",
            "kube-system/system::leader-locking-kube-controller-manager",
            "kube-system/system::leader-locking-kube-scheduler",
            "kube-system/system:controller:bootstrap-signer",
            "kube-system/system:controller:cloud-provider",
            "kube-system/system:controller:token-cleaner",
        ]
    );
    let signer = gate.json(&[
        "-n",
        "kube-public",
        "get",
        "rolebinding",
        "system:controller:bootstrap-signer",
        "-o",
        "json",
    ]);
    assert_eq!(
        signer["subjects"],
        json!([{"kind": "ServiceAccount", "name": "bootstrap-signer", "namespace": "kube-system"}])
    );

    // The bootstrap binding itself grants kube-controller-manager's user the read.
    let cm = "configmap/extension-apiserver-authentication";
    assert_eq!(
        can_i(
            &gate,
            &[
                "get",
                cm,
                "-n",
                "kube-system",
                "--as",
                "system:kube-controller-manager"
            ]
        ),
        "yes"
    );

    // A ServiceAccount bound to nothing may not read the ConfigMap; bound to the reader role,
    // it may read that ConfigMap and nothing else in kube-system.
    let sa = "system:serviceaccount:x:y";
    let token = sa_token(&gate, "x", "y");
    assert_eq!(
        can_i(&gate, &["get", cm, "-n", "kube-system", "--as", sa]),
        "no"
    );
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "extension-apiserver-authentication",
        ],
        None,
    );
    assert!(!ok);
    assert!(
        err.contains(&format!("configmaps \"extension-apiserver-authentication\" is forbidden: User \"{sa}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\"")),
        "{err}"
    );
    gate.ok(&[
        "-n",
        "kube-system",
        "create",
        "rolebinding",
        "x-y-reads-auth",
        &format!("--role={READER}"),
        "--serviceaccount=x:y",
    ]);
    assert!(
        eventually(Duration::from_secs(5), || can_i(
            &gate,
            &["get", cm, "-n", "kube-system", "--as", sa]
        ) == "yes"),
        "the reader role did not grant the read"
    );
    let (ok, out, err) = as_token(
        &gate,
        &token,
        &[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "extension-apiserver-authentication",
            "-o",
            "json",
        ],
        None,
    );
    assert!(ok, "{err}");
    let read: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        read["metadata"]["name"],
        "extension-apiserver-authentication"
    );
    // Named: no other ConfigMap, no list, no write, not elsewhere.
    for args in [
        vec!["get", "configmap/other", "-n", "kube-system"],
        vec!["list", "configmaps", "-n", "kube-system"],
        vec!["update", cm, "-n", "kube-system"],
        vec!["get", cm, "-n", "default"],
    ] {
        let mut args = args;
        args.extend(["--as", sa]);
        assert_eq!(can_i(&gate, &args), "no", "{args:?}");
    }
}

#[test]
fn edited_namespaced_bootstrap_objects_are_reconciled_on_restart() {
    let mut gate = Kubegate::start();
    // Narrow the reader role to `get` and add a rule of one's own.
    gate.ok(&[
        "-n",
        "kube-system",
        "patch",
        "role",
        READER,
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/rules","value":[{"apiGroups":[""],"resources":["configmaps"],"resourceNames":["extension-apiserver-authentication"],"verbs":["get"]},{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}]}]"#,
    ]);
    // Empty a role that opted out of reconciliation.
    gate.ok(&[
        "-n",
        "kube-system",
        "annotate",
        "--overwrite",
        "role",
        "system:controller:token-cleaner",
        "rbac.authorization.kubernetes.io/autoupdate=false",
    ]);
    gate.ok(&[
        "-n",
        "kube-system",
        "patch",
        "role",
        "system:controller:token-cleaner",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/rules","value":[]}]"#,
    ]);
    // Delete a role and a binding; trim a binding's subjects.
    gate.ok(&[
        "-n",
        "kube-public",
        "delete",
        "role",
        "system:controller:bootstrap-signer",
    ]);
    gate.ok(&[
        "-n",
        "kube-system",
        "delete",
        "rolebinding",
        "system::extension-apiserver-authentication-reader",
    ]);
    gate.ok(&[
        "-n",
        "kube-system",
        "patch",
        "rolebinding",
        "system::leader-locking-kube-scheduler",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/subjects","value":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"someone"}]}]"#,
    ]);
    // Before the restart the edits stand.
    let reader = gate.json(&["-n", "kube-system", "get", "role", READER, "-o", "json"]);
    assert_eq!(rules_of(&reader).len(), 2, "{reader}");

    gate.restart();

    // The reader role gets kube's verbs back (as kube appends them, one per rule) and keeps
    // the user's rule.
    let reader = gate.json(&["-n", "kube-system", "get", "role", READER, "-o", "json"]);
    let auth_rule = |verb: &str| json!({"apiGroups": [""], "resourceNames": ["extension-apiserver-authentication"], "resources": ["configmaps"], "verbs": [verb]});
    assert_eq!(
        reader["rules"],
        json!([
            auth_rule("get"),
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            auth_rule("list"),
            auth_rule("watch"),
        ]),
        "{reader}"
    );
    let opted_out = gate.json(&[
        "-n",
        "kube-system",
        "get",
        "role",
        "system:controller:token-cleaner",
        "-o",
        "json",
    ]);
    assert!(
        rules_of(&opted_out).is_empty(),
        "autoupdate=false was overridden: {opted_out}"
    );
    let signer = gate.json(&[
        "-n",
        "kube-public",
        "get",
        "role",
        "system:controller:bootstrap-signer",
        "-o",
        "json",
    ]);
    assert_eq!(rules_of(&signer).len(), 3, "{signer}");
    assert_eq!(
        signer["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    let binding = gate.json(&[
        "-n",
        "kube-system",
        "get",
        "rolebinding",
        "system::extension-apiserver-authentication-reader",
        "-o",
        "json",
    ]);
    assert_eq!(binding["roleRef"]["name"], READER);
    let scheduler = gate.json(&[
        "-n",
        "kube-system",
        "get",
        "rolebinding",
        "system::leader-locking-kube-scheduler",
        "-o",
        "json",
    ]);
    assert_eq!(
        scheduler["subjects"],
        json!([
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "someone"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"},
            {"kind": "ServiceAccount", "name": "kube-scheduler", "namespace": "kube-system"},
        ]),
        "{scheduler}"
    );
    assert!(
        gate.log().contains("reconciled bootstrap Role"),
        "no reconciliation logged"
    );
}

fn role_yaml(namespace: &str, name: &str, rule: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\n  namespace: {namespace}\nrules:\n- {rule}\n"
    )
}

#[test]
fn replace_of_missing_rbac_objects_creates_them_and_escalation_still_applies() {
    let gate = Kubegate::start();

    // `kubectl replace` of a missing Role: kubectl's GET is a 404, its PUT a 201.
    let yaml = role_yaml(
        "default",
        "pod-reader",
        "{apiGroups: [\"\"], resources: [pods], verbs: [get]}",
    );
    let out = gate.kubectl_stdin(&["replace", "-f", "-", "-v=6"], Some(&yaml));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stdout.trim(),
        "role.rbac.authorization.k8s.io/pod-reader replaced"
    );
    assert!(
        stderr.lines().any(|l| l.contains("PUT")
            && l.contains("/roles/pod-reader")
            && l.contains("201 Created")),
        "{stderr}"
    );
    let role = gate.json(&["-n", "default", "get", "role", "pod-reader", "-o", "json"]);
    assert_eq!(role["rules"][0]["verbs"], json!(["get"]));
    // Again: now an update, 200.
    let out = gate.kubectl_stdin(&["replace", "-f", "-", "-v=6"], Some(&yaml));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("PUT") && l.contains("/roles/pod-reader") && l.contains("200 OK")),
        "{stderr}"
    );

    // The other three kinds too.
    gate.ok_stdin(
        &["replace", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: pod-readers\n  namespace: default\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: pod-reader\nsubjects:\n- kind: User\n  name: jane\n",
    );
    gate.ok_stdin(
        &["replace", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: node-reader\nrules:\n- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [get]\n",
    );
    gate.ok_stdin(
        &["replace", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: node-readers\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: node-reader\nsubjects:\n- kind: User\n  name: jane\n",
    );
    let binding = gate.json(&[
        "-n",
        "default",
        "get",
        "rolebinding",
        "pod-readers",
        "-o",
        "json",
    ]);
    assert_eq!(binding["subjects"][0]["name"], "jane");
    gate.ok(&["get", "clusterrole", "node-reader"]);
    gate.ok(&["get", "clusterrolebinding", "node-readers"]);
    assert!(eventually(Duration::from_secs(5), || can_i(
        &gate,
        &["get", "nodes", "--as", "jane"]
    ) == "yes"));
    // Other kinds still answer 404 to a PUT of a missing object.
    let err = String::from_utf8_lossy(
        &gate
            .kubectl_stdin(
                &["replace", "-f", "-"],
                Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nope\n  namespace: default\n"),
            )
            .stderr,
    )
    .into_owned();
    assert!(err.contains("configmaps \"nope\" not found"), "{err}");

    // An editor of `team` (kube's `edit`) who may also write Roles there.
    let token = sa_token(&gate, "team", "editor");
    let user = "system:serviceaccount:team:editor";
    gate.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "editor-edit",
        "--clusterrole=edit",
        "--serviceaccount=team:editor",
    ]);
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &role_yaml(
            "team",
            "role-writer",
            "{apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [get, create, update]}",
        ),
    );
    gate.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "editor-role-writer",
        "--role=role-writer",
        "--serviceaccount=team:editor",
    ]);
    assert!(eventually(Duration::from_secs(5), || {
        can_i(&gate, &["create", "roles", "-n", "team", "--as", user]) == "yes"
    }));

    // A Role granting what `edit` does not hold: refused through PUT, with kube's message.
    let grab = role_yaml(
        "team",
        "grab",
        "{apiGroups: [\"\"], resources: [resourcequotas], verbs: [create]}",
    );
    let (ok, _, err) = as_token(&gate, &token, &["replace", "-f", "-"], Some(&grab));
    assert!(!ok, "an editor created a Role granting more than edit");
    assert!(
        err.contains(&format!(
            "roles.rbac.authorization.k8s.io \"grab\" is forbidden: user \"{user}\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:team\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:"
        )) && err.contains("{APIGroups:[\"\"], Resources:[\"resourcequotas\"], Verbs:[\"create\"]}"),
        "{err}"
    );
    assert!(!gate
        .kubectl(&["-n", "team", "get", "role", "grab"])
        .status
        .success());

    // Within `edit`'s rules: created through PUT.
    let fine = role_yaml(
        "team",
        "fine",
        "{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list]}",
    );
    let (ok, out, err) = as_token(&gate, &token, &["replace", "-f", "-"], Some(&fine));
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "role.rbac.authorization.k8s.io/fine replaced");
    gate.ok(&["-n", "team", "get", "role", "fine"]);

    // Allowed to update Roles but not to create them: the PUT may not create.
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &role_yaml(
            "team",
            "role-writer",
            "{apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [get, update]}",
        ),
    );
    assert!(eventually(Duration::from_secs(5), || {
        can_i(&gate, &["create", "roles", "-n", "team", "--as", user]) == "no"
    }));
    let other = role_yaml(
        "team",
        "other",
        "{apiGroups: [\"\"], resources: [configmaps], verbs: [get]}",
    );
    let (ok, _, err) = as_token(&gate, &token, &["replace", "-f", "-"], Some(&other));
    assert!(!ok, "a PUT created a Role its writer may not create");
    assert!(
        err.contains("roles.rbac.authorization.k8s.io \"other\" is forbidden"),
        "{err}"
    );
    assert!(!gate
        .kubectl(&["-n", "team", "get", "role", "other"])
        .status
        .success());
    // Updating an existing Role still works for them.
    let (ok, _, err) = as_token(
        &gate,
        &token,
        &["replace", "-f", "-"],
        Some(&role_yaml(
            "team",
            "fine",
            "{apiGroups: [\"\"], resources: [configmaps], verbs: [get]}",
        )),
    );
    assert!(ok, "{err}");
}

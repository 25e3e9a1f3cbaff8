//! The issue's kubectl journey against a real kubegate: namespaces, configmaps, client-side
//! apply and re-apply, YAML output, label selectors, api-resources, explain, and namespace
//! deletion that removes the namespace's content first.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::{eventually, Kubegate};

const APP_V1: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  labels:
    tier: web
data:
  color: blue
  size: "1"
"#;

const APP_V2: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  labels:
    tier: web
data:
  color: green
"#;

#[test]
fn kubectl_journey() {
    let gate = Kubegate::start();

    // kubectl get ns: the four default namespaces, Active.
    let out = gate.ok(&["get", "ns"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(ns))
            .unwrap_or_else(|| panic!("namespace {ns} missing from:\n{out}"));
        assert!(line.contains("Active"), "{line}");
    }
    assert!(out.starts_with("NAME"), "table header expected:\n{out}");
    assert!(out.lines().next().unwrap().contains("STATUS"), "{out}");

    // Create a namespace and a configmap in it.
    assert!(gate
        .ok(&["create", "ns", "team-a"])
        .contains("namespace/team-a created"));
    let out = gate.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "app",
        "--from-literal=a=1",
    ]);
    assert!(out.contains("configmap/app created"), "{out}");
    let cm = gate.json(&["-n", "team-a", "get", "cm", "app", "-o", "json"]);
    assert_eq!(cm["data"]["a"], "1");
    assert_eq!(cm["metadata"]["namespace"], "team-a");
    assert!(cm["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    assert!(cm["metadata"]["creationTimestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let rv1: u64 = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // Client-side apply, then re-apply with a change (a key removed, a value changed).
    let out = gate.ok_stdin(&["-n", "team-a", "apply", "-f", "-"], APP_V1);
    assert!(out.contains("configmap/web created"), "{out}");
    let out = gate.ok_stdin(&["-n", "team-a", "apply", "-f", "-"], APP_V1);
    assert!(out.contains("configmap/web unchanged"), "{out}");
    let out = gate.ok_stdin(&["-n", "team-a", "apply", "-f", "-"], APP_V2);
    assert!(out.contains("configmap/web configured"), "{out}");
    let web = gate.json(&["-n", "team-a", "get", "cm", "web", "-o", "json"]);
    assert_eq!(web["data"]["color"], "green");
    assert!(
        web["data"].get("size").is_none(),
        "apply must remove dropped keys: {web}"
    );
    assert!(
        web["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .is_some_and(|a| a.contains("green"))
    );
    let rv2: u64 = web["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);

    // YAML output.
    let yaml = gate.ok(&["-n", "team-a", "get", "cm", "app", "-o", "yaml"]);
    assert!(yaml.contains("kind: ConfigMap"), "{yaml}");
    assert!(yaml.contains("  a: \"1\""), "{yaml}");
    assert!(yaml.contains("name: app"), "{yaml}");

    // Table output with the columns kubectl shows for configmaps.
    let table = gate.ok(&["-n", "team-a", "get", "cm"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{table}");
    let app_row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("app "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(app_row[1], "1", "{table}");

    // Label selectors.
    let selected = gate.ok(&["-n", "team-a", "get", "cm", "-l", "tier=web", "-o", "name"]);
    assert_eq!(selected.trim(), "configmap/web");
    let selected = gate.ok(&["-n", "team-a", "get", "cm", "-l", "tier!=web", "-o", "name"]);
    assert!(
        selected.contains("configmap/app") && !selected.contains("configmap/web"),
        "{selected}"
    );
    let none = gate.kubectl(&["-n", "team-a", "get", "cm", "-l", "tier=db"]);
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("No resources found in team-a namespace.")
    );

    // Discovery: api-resources lists every built-in resource with its short names.
    let resources = gate.ok(&["api-resources"]);
    for (name, short, version, namespaced, kind) in [
        ("configmaps", "cm", "v1", "true", "ConfigMap"),
        ("namespaces", "ns", "v1", "false", "Namespace"),
        ("secrets", "", "v1", "true", "Secret"),
        ("services", "svc", "v1", "true", "Service"),
        ("serviceaccounts", "sa", "v1", "true", "ServiceAccount"),
        ("leases", "", "coordination.k8s.io/v1", "true", "Lease"),
        (
            "endpointslices",
            "",
            "discovery.k8s.io/v1",
            "true",
            "EndpointSlice",
        ),
    ] {
        let row = resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from api-resources:\n{resources}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert!(
            cols.contains(&version) && cols.contains(&namespaced) && cols.contains(&kind),
            "{row}"
        );
        if !short.is_empty() {
            assert!(cols.contains(&short), "{row}");
        }
    }

    // explain, from the served OpenAPI.
    let explain = gate.ok(&["explain", "configmap.data"]);
    assert!(
        explain.contains("KIND:") && explain.contains("ConfigMap"),
        "{explain}"
    );
    assert!(
        explain.contains("FIELD:") && explain.contains("data"),
        "{explain}"
    );
    assert!(
        explain.to_lowercase().contains("configuration data"),
        "{explain}"
    );

    // Namespace deletion: Terminating while content goes, then the namespace goes.
    let out = gate.ok(&["delete", "ns", "team-a", "--wait=false"]);
    assert!(out.contains("namespace \"team-a\" deleted"), "{out}");
    assert!(
        eventually(Duration::from_secs(30), || {
            !gate.kubectl(&["get", "ns", "team-a"]).status.success()
        }),
        "namespace team-a was not deleted:\n{}",
        gate.ok(&["get", "ns", "team-a", "-o", "yaml"])
    );
    let err = gate.fails(&["get", "ns", "team-a"]);
    assert!(err.contains("namespaces \"team-a\" not found"), "{err}");
    // Its content is gone with it.
    let (code, body) = gate.curl("GET", "/api/v1/namespaces/team-a/configmaps", &[], None);
    assert_eq!(code, 200);
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");
    // Creating in a missing namespace is refused with kube's message.
    let err = gate.fails(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "late",
        "--from-literal=a=1",
    ]);
    assert!(err.contains("namespaces \"team-a\" not found"), "{err}");
}

#[test]
fn namespace_with_finalized_content_stays_terminating_until_released() {
    let gate = Kubegate::start();
    gate.ok(&["create", "ns", "team-b"]);
    gate.ok_stdin(
        &["-n", "team-b", "apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\ndata: {a: b}\n",
    );
    gate.ok(&["delete", "ns", "team-b", "--wait=false"]);
    // The namespace is Terminating and refuses new content while the held object remains.
    assert!(eventually(Duration::from_secs(10), || {
        gate.ok(&["get", "ns", "team-b", "-o", "jsonpath={.status.phase}"]) == "Terminating"
    }));
    let err = gate.fails(&[
        "-n",
        "team-b",
        "create",
        "configmap",
        "new",
        "--from-literal=a=1",
    ]);
    assert!(
        err.contains(
            "unable to create new content in namespace team-b because it is being terminated"
        ),
        "{err}"
    );
    // A subresource create is a create too (NamespaceLifecycle admits every create); a
    // generated name is made after admission, so the refusal names the prefix.
    let err = gate.fails(&["-n", "team-b", "create", "token", "default"]);
    assert!(
        err.contains("serviceaccounts \"default\" is forbidden: unable to create new content in namespace team-b because it is being terminated"),
        "{err}"
    );
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/team-b/secrets",
        &["Content-Type: application/json"],
        Some(br#"{"apiVersion":"v1","kind":"Secret","metadata":{"generateName":"gen-"}}"#),
    );
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["details"]["name"], "gen-", "{status}");
    // Updates are still admitted while it terminates.
    gate.ok(&["-n", "team-b", "label", "cm", "held", "still=here"]);
    let held = gate.json(&["-n", "team-b", "get", "cm", "held", "-o", "json"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    // Releasing the finalizer lets the object and then the namespace go.
    gate.ok(&[
        "-n",
        "team-b",
        "patch",
        "cm",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(eventually(Duration::from_secs(30), || {
        !gate.kubectl(&["get", "ns", "team-b"]).status.success()
    }));
}

/// A namespace finalized by force while content remains leaves that content behind, and
/// NamespaceLifecycle admits no update of it (only deletes) until the namespace exists again:
/// its finalizers can then be released.
#[test]
fn content_a_force_finalized_namespace_left_behind_is_only_deletable() {
    let gate = Kubegate::start();
    gate.ok(&["create", "ns", "gone"]);
    gate.ok_stdin(
        &["-n", "gone", "apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\n",
    );
    gate.ok(&["delete", "ns", "gone", "--wait=false"]);
    let mut namespace = gate.json(&["get", "ns", "gone", "-o", "json"]);
    namespace["spec"]["finalizers"] = serde_json::json!([]);
    gate.ok_stdin(
        &[
            "replace",
            "--raw",
            "/api/v1/namespaces/gone/finalize",
            "-f",
            "-",
        ],
        &namespace.to_string(),
    );
    assert!(eventually(Duration::from_secs(10), || {
        !gate.kubectl(&["get", "ns", "gone"]).status.success()
    }));
    for args in [
        vec!["-n", "gone", "label", "cm", "held", "a=b"],
        vec![
            "-n",
            "gone",
            "patch",
            "cm",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    ] {
        let err = gate.fails(&args);
        assert!(
            err.contains("namespaces \"gone\" not found"),
            "{args:?}: {err}"
        );
    }
    let held = gate.json(&["-n", "gone", "get", "cm", "held", "-o", "json"]);
    assert_eq!(
        held["metadata"]["finalizers"],
        serde_json::json!(["example.com/hold"])
    );
    // With the namespace back, the finalizer can go, and the object with it.
    gate.ok(&["create", "ns", "gone"]);
    gate.ok(&[
        "-n",
        "gone",
        "patch",
        "cm",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(eventually(Duration::from_secs(10), || {
        !gate
            .kubectl(&["-n", "gone", "get", "cm", "held"])
            .status
            .success()
    }));
}

/// What kube-apiserver stores is what Go's encoding/json writes for the decoded object:
/// `omitempty` fields holding their zero value are gone after a create, an update and a
/// patch, while pointer fields (`immutable: false`) and fields without `omitempty` (a Role's
/// `rules: null`) stay.
#[test]
fn objects_come_back_as_kubes_go_encoding_writes_them() {
    let gate = Kubegate::start();
    let manifest = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: empty, labels: {}, annotations: {}}
data: {}
binaryData: {}
immutable: false
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {}
  externalIPs: []
  ports: [{name: "", port: 80, nodePort: 0}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot}
secrets: []
imagePullSecrets: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: none}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: emptied}
rules: []
"#;
    gate.ok_stdin(&["create", "-f", "-"], manifest);

    let configmap = gate.json(&["get", "configmap", "empty", "-o", "json"]);
    let mut keys: Vec<&str> = configmap
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["apiVersion", "immutable", "kind", "metadata"],
        "{configmap}"
    );
    let mut meta_keys: Vec<&str> = configmap["metadata"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    meta_keys.sort_unstable();
    assert_eq!(
        meta_keys,
        [
            "creationTimestamp",
            "name",
            "namespace",
            "resourceVersion",
            "uid"
        ],
        "{configmap}"
    );
    assert_eq!(configmap["immutable"], false, "{configmap}");

    let service = gate.json(&["get", "service", "web", "-o", "json"]);
    let spec = &service["spec"];
    for gone in ["selector", "externalIPs"] {
        assert!(spec.get(gone).is_none(), "{gone} in {service}");
    }
    assert_eq!(
        spec["ports"],
        serde_json::json!([{"port": 80, "protocol": "TCP", "targetPort": 80}]),
        "{service}"
    );

    let account = gate.json(&["get", "serviceaccount", "robot", "-o", "json"]);
    for gone in ["secrets", "imagePullSecrets"] {
        assert!(account.get(gone).is_none(), "{gone} in {account}");
    }
    let role = gate.json(&["get", "role", "none", "-o", "json"]);
    assert_eq!(role["rules"], serde_json::Value::Null, "{role}");
    assert!(role.as_object().unwrap().contains_key("rules"), "{role}");
    // An empty list the client sent is its writer's (kube's field manager sees the decoded
    // `[]`), and comes back `null`, as protobuf storage gives it back.
    let emptied = gate.json(&[
        "get",
        "role",
        "emptied",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    assert_eq!(emptied["rules"], serde_json::Value::Null, "{emptied}");
    assert_eq!(
        emptied["metadata"]["managedFields"][0]["fieldsV1"],
        serde_json::json!({"f:rules": {}}),
        "{emptied}"
    );

    // Updates and patches go the same way: a merge patch that empties `data` leaves none.
    gate.ok(&[
        "patch",
        "configmap",
        "empty",
        "--type=merge",
        "-p",
        r#"{"data": {"a": "1"}}"#,
    ]);
    gate.ok(&[
        "patch",
        "configmap",
        "empty",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/data/a"}]"#,
    ]);
    let configmap = gate.json(&["get", "configmap", "empty", "-o", "json"]);
    assert!(configmap.get("data").is_none(), "{configmap}");
    let replaced = gate.json(&["get", "serviceaccount", "robot", "-o", "json"]);
    let mut replaced = replaced;
    replaced["automountServiceAccountToken"] = serde_json::json!(false);
    replaced["secrets"] = serde_json::json!([]);
    gate.ok_stdin(&["replace", "-f", "-"], &replaced.to_string());
    let account = gate.json(&["get", "serviceaccount", "robot", "-o", "json"]);
    assert!(account.get("secrets").is_none(), "{account}");
    assert_eq!(account["automountServiceAccountToken"], false, "{account}");
}

/// `kubectl explain` reads the CRD schema's own schema (JSONSchemaProps, whose properties
/// include `$ref` and `allOf`) from OpenAPI v3.
#[test]
fn explain_reads_the_crd_schema_of_schemas() {
    let gate = Kubegate::start();
    let out = gate.ok(&["explain", "crd.spec.versions.schema.openAPIV3Schema"]);
    assert!(out.contains("allOf\t<[]JSONSchemaProps>"), "{out}");
    assert!(out.contains("$ref\t<string>"), "{out}");
    let recursive = gate.ok(&["explain", "crd", "--recursive"]);
    assert!(recursive.contains("openAPIV3Schema"), "{recursive}");
}

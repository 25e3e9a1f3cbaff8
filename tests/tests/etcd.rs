//! End-to-end storage on etcd with the real etcd and kubectl: two kubegate replicas share
//! one etcd (a change through one is seen through the other: objects, watches, RBAC, CRDs);
//! etcd going away makes requests fail fast and readiness fail, and kubegate recovers on its
//! own when etcd returns; `kubegate migrate` copies an embedded data dir into etcd.

use std::process::Command;
use std::time::{Duration, Instant};

use kubegate_tests::etcd::Etcd;
use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.shared.example.com
spec:
  group: shared.example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// kubectl with a ServiceAccount token against `gate` (no client certificate).
fn as_token(gate: &Kubegate, token: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "--kubeconfig=/dev/null".to_string(),
        format!("--server={}", gate.url()),
        format!(
            "--certificate-authority={}",
            gate.data_dir.join("pki/ca.crt").display()
        ),
        format!("--token={token}"),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    gate.kubectl(&refs)
}

#[test]
fn two_replicas_share_one_etcd() {
    let etcd = Etcd::start();
    let url = etcd.url();
    let a = Kubegate::start_with(&["--etcd-servers", &url]);
    let b = Kubegate::start_sharing(&a, &["--etcd-servers", &url]);
    // With etcd the data dir holds certificates and keys only.
    assert!(!a.data_dir.join("kubegate.redb").exists());
    assert!(!b.data_dir.join("kubegate.redb").exists());

    // Objects written through one replica are read through the other.
    a.ok(&["create", "namespace", "shared"]);
    a.ok(&[
        "-n",
        "shared",
        "create",
        "configmap",
        "one",
        "--from-literal=k=v1",
    ]);
    let seen = eventually(Duration::from_secs(5), || {
        b.kubectl(&[
            "-n",
            "shared",
            "get",
            "configmap",
            "one",
            "-o",
            "jsonpath={.data.k}",
        ])
        .stdout
            == b"v1"
    });
    assert!(seen, "replica b never saw a's ConfigMap");
    let uid_a = a.ok(&[
        "-n",
        "shared",
        "get",
        "cm",
        "one",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let uid_b = b.ok(&[
        "-n",
        "shared",
        "get",
        "cm",
        "one",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert_eq!(uid_a, uid_b);

    // A watch on one replica sees writes through the other, in order.
    let watch = b.stream(&["-n", "shared", "get", "configmaps", "-w", "-o", "name"]);
    a.ok(&["-n", "shared", "create", "configmap", "two"]);
    assert!(
        watch
            .wait_for(Duration::from_secs(10), |l| l.contains("configmap/two"))
            .is_some(),
        "b's watch missed a's create"
    );

    // Watch-driven controllers: a ServiceAccount and a RoleBinding made through a authorize
    // requests through b, with a token issued by a.
    a.ok(&["-n", "shared", "create", "serviceaccount", "reader"]);
    let token = a.ok(&["-n", "shared", "create", "token", "reader"]);
    let token = token.trim();
    let denied = as_token(&b, token, &["-n", "shared", "get", "configmaps"]);
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    a.ok(&[
        "-n",
        "shared",
        "create",
        "rolebinding",
        "reader-view",
        "--clusterrole=view",
        "--serviceaccount=shared:reader",
    ]);
    let allowed = eventually(Duration::from_secs(5), || {
        as_token(&b, token, &["-n", "shared", "get", "configmaps"])
            .status
            .success()
    });
    assert!(allowed, "b never applied the RoleBinding made through a");

    // A CRD created through a is served by b.
    a.ok_stdin(&["apply", "-f", "-"], CRD);
    let served = eventually(Duration::from_secs(10), || {
        b.kubectl(&["get", "--raw", "/apis/shared.example.com/v1/gizmos"])
            .status
            .success()
    });
    assert!(
        served,
        "b never served a's CRD:\n{}",
        kubegate_tests::tail(&b.log(), 20)
    );
}

#[test]
fn kubegate_fails_fast_without_etcd_and_recovers_when_it_returns() {
    let mut etcd = Etcd::start();
    let url = etcd.url();
    let gate = Kubegate::start_with(&["--etcd-servers", &url]);
    gate.ok(&["create", "configmap", "before", "--from-literal=k=v"]);

    etcd.stop();
    // Readiness says why.
    let not_ready = eventually(Duration::from_secs(10), || {
        let out = gate.kubectl(&["get", "--raw", "/readyz/etcd"]);
        !out.status.success()
    });
    assert!(not_ready, "readyz/etcd kept passing with etcd gone");
    // kube's readiness-only check says the same.
    assert!(!gate
        .kubectl(&["get", "--raw", "/readyz/etcd-readiness"])
        .status
        .success());
    // A request that needs storage fails with a Status instead of hanging.
    let started = Instant::now();
    let write = gate.kubectl(&["create", "configmap", "during", "--request-timeout=40s"]);
    let took = started.elapsed();
    assert!(!write.status.success(), "a write succeeded without etcd");
    let stderr = String::from_utf8_lossy(&write.stderr);
    assert!(
        stderr.contains("etcd"),
        "the error should say storage is the problem: {stderr}"
    );
    // ... as a Status with a 5xx code kube uses for storage outages.
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/json"],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"raw"}}"#),
    );
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status body");
    assert!(code == 503 || code == 504, "{code} {status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], code);
    assert!(
        took < Duration::from_secs(35),
        "the write hung for {took:?} (it must fail, not wait for the client's timeout)"
    );

    etcd.restart();
    let recovered = eventually(Duration::from_secs(30), || {
        gate.kubectl(&["create", "configmap", "after"])
            .status
            .success()
    });
    assert!(
        recovered,
        "kubegate did not recover:\n{}",
        kubegate_tests::tail(&gate.log(), 30)
    );
    let names = gate.ok(&["get", "configmaps", "-o", "name"]);
    assert!(
        names.contains("configmap/before") && names.contains("configmap/after"),
        "{names}"
    );
    // Readiness follows within its next probe (a second apart), not necessarily at once.
    for check in ["/readyz/etcd", "/readyz/etcd-readiness"] {
        assert!(
            eventually(Duration::from_secs(10), || gate
                .kubectl(&["get", "--raw", check])
                .status
                .success()),
            "{check}"
        );
    }
}

#[test]
fn migrate_copies_an_embedded_data_dir_into_etcd() {
    let mut source = Kubegate::start();
    source.ok(&["create", "namespace", "moved"]);
    source.ok(&[
        "-n",
        "moved",
        "create",
        "configmap",
        "cfg",
        "--from-literal=a=1",
    ]);
    let uid = source.ok(&[
        "-n",
        "moved",
        "get",
        "cm",
        "cfg",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert_eq!(source.terminate(Duration::from_secs(10)), Some(0));

    let etcd = Etcd::start();
    let migrate = |extra: &[&str]| {
        Command::new(kubegate_tests::binary())
            .arg("migrate")
            .arg("--from")
            .arg(&source.data_dir)
            .args(["--etcd-servers", &etcd.url()])
            .args(extra)
            .output()
            .expect("run kubegate migrate")
    };
    let out = migrate(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("copied "));
    // A prefix that holds data is refused unless forced.
    let again = migrate(&[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert!(migrate(&["--force"]).status.success());

    let gate = Kubegate::start_sharing(&source, &["--etcd-servers", &etcd.url()]);
    assert_eq!(
        gate.ok(&[
            "-n",
            "moved",
            "get",
            "cm",
            "cfg",
            "-o",
            "jsonpath={.metadata.uid}"
        ]),
        uid
    );
    assert_eq!(
        gate.ok(&[
            "-n",
            "moved",
            "get",
            "cm",
            "cfg",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "1"
    );
}

#[test]
fn replicas_starting_together_bootstrap_once() {
    // Both replicas start from the same certificates and keys, at the same moment, on an
    // empty etcd: their bootstrap writes race, and both must come up.
    let seed = Kubegate::start();
    let etcd = Etcd::start();
    let url = etcd.url();
    let (a, b) = std::thread::scope(|scope| {
        let one = scope.spawn(|| Kubegate::start_sharing(&seed, &["--etcd-servers", &url]));
        let two = scope.spawn(|| Kubegate::start_sharing(&seed, &["--etcd-servers", &url]));
        (
            one.join().expect("replica one"),
            two.join().expect("replica two"),
        )
    });
    for gate in [&a, &b] {
        let namespaces = gate.ok(&["get", "namespaces", "-o", "name"]);
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            assert!(
                namespaces.contains(&format!("namespace/{ns}")),
                "{namespaces}"
            );
        }
        assert!(gate
            .ok(&["get", "clusterrole", "cluster-admin", "-o", "name"])
            .contains("cluster-admin"));
    }
    // One set of bootstrap objects, not two.
    let bindings = a.ok(&["get", "clusterrolebindings", "-o", "name"]);
    assert_eq!(
        bindings
            .lines()
            .filter(|l| *l == "clusterrolebinding.rbac.authorization.k8s.io/cluster-admin")
            .count(),
        1
    );
}

#[test]
fn a_continue_token_is_served_by_a_replica_started_after_it_was_issued() {
    let etcd = Etcd::start();
    let url = etcd.url();
    let a = Kubegate::start_with(&["--etcd-servers", &url]);
    a.ok(&["create", "namespace", "paged"]);
    let published = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        a.kubectl(&["-n", "paged", "get", "configmap", "kube-root-ca.crt"])
            .status
            .success()
    });
    assert!(published, "kube-root-ca.crt was not published");
    for i in 0..5 {
        a.ok(&["-n", "paged", "create", "configmap", &format!("cm{i}")]);
    }
    let names = |page: &serde_json::Value| -> Vec<String> {
        page["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let first = a.json(&[
        "get",
        "--raw",
        "/api/v1/namespaces/paged/configmaps?limit=2",
    ]);
    let at = first["metadata"]["resourceVersion"].clone();
    let mut seen = names(&first);
    let mut token = first["metadata"]["continue"].as_str().map(str::to_string);
    assert!(token.is_some(), "{first}");
    // Changes after the first page are not part of the list.
    a.ok(&["-n", "paged", "delete", "configmap", "cm3"]);
    a.ok(&["-n", "paged", "create", "configmap", "cm9"]);
    // b's cache starts after the token's revision: only etcd still has that revision, as
    // for a replica behind a load balancer or a cache whose event history has rolled over.
    let b = Kubegate::start_sharing(&a, &["--etcd-servers", &url]);
    while let Some(t) = token {
        let escaped = t
            .replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D");
        let page = b.json(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/paged/configmaps?limit=2&continue={escaped}"),
        ]);
        assert_eq!(page["metadata"]["resourceVersion"], at, "{page}");
        seen.extend(names(&page));
        token = page["metadata"]["continue"].as_str().map(str::to_string);
    }
    // With the namespace's `kube-root-ca.crt`, published by the root CA publisher.
    assert_eq!(
        seen,
        ["cm0", "cm1", "cm2", "cm3", "cm4", "kube-root-ca.crt"]
    );
}

/// A value in etcd that is not an object (written past kubegate: etcdctl, a restore, another
/// server sharing the prefix) is kube's corrupt object: reads of it answer a 500 `Status`
/// naming its key as etcd holds it (prefix included, as kube's message), never its bytes with
/// a 200; the other objects are served as before.
#[test]
fn a_corrupt_value_in_etcd_is_a_500_not_its_bytes() {
    let etcd = Etcd::start();
    let url = etcd.url();
    let gate = Kubegate::start_with(&["--etcd-servers", &url]);
    gate.ok(&["create", "configmap", "good", "--from-literal=k=v"]);
    // etcd's JSON gateway takes base64 keys and values.
    use base64::Engine;
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    let put = format!(
        r#"{{"key":"{}","value":"{}"}}"#,
        b64(b"/registry/configmaps/default/bad"),
        b64(b"k8s\x00garbage")
    );
    let out = Command::new("curl")
        .args(["-sS", "-X", "POST", "-d", &put])
        .arg(format!("{url}/v3/kv/put"))
        .output()
        .expect("curl");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("revision"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let status_of = |path: &str| {
        let (code, body) = gate.curl("GET", path, &[], None);
        let status: serde_json::Value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| panic!("{path}: {code} {}", String::from_utf8_lossy(&body)));
        (code, status)
    };
    let read = eventually(Duration::from_secs(10), || {
        status_of("/api/v1/namespaces/default/configmaps/bad").0 == 500
    });
    assert!(
        read,
        "{:?}",
        status_of("/api/v1/namespaces/default/configmaps/bad")
    );
    let (_, status) = status_of("/api/v1/namespaces/default/configmaps/bad");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "InternalError");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Internal error occurred: StorageError: corrupt object")
            && message.contains("Key: /registry/configmaps/default/bad,"),
        "{message}"
    );
    let (code, status) = status_of("/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 500, "{status}");
    assert!(status["message"]
        .as_str()
        .unwrap_or_default()
        .contains("corrupt object"));
    // Everything else reads as before.
    let (code, good) = status_of("/api/v1/namespaces/default/configmaps/good");
    assert_eq!(code, 200, "{good}");
    assert_eq!(good["data"]["k"], "v");
    let err = gate.fails(&["get", "configmap", "bad"]);
    assert!(err.contains("corrupt object"), "{err}");
}

/// Two replicas asked at the same moment for one Service address (or node port) never both
/// give it: each allocation is claimed in etcd, and the claim decides between them (their
/// watch caches learn of each other's Services only milliseconds later). A deleted Service's
/// claims are given back before the delete is answered.
#[test]
fn replicas_never_give_one_service_value_twice() {
    let etcd = Etcd::start();
    let url = etcd.url();
    let a = Kubegate::start_with(&["--etcd-servers", &url]);
    let b = Kubegate::start_sharing(&a, &["--etcd-servers", &url]);
    let service = |name: &str, ip: &str, node_port: u16| {
        serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name},
            "spec": {"type": "NodePort", "clusterIP": ip,
                     "ports": [{"port": 80, "nodePort": node_port}]}})
        .to_string()
    };
    let path = "/api/v1/namespaces/default/services";
    let json = ["Content-Type: application/json"];
    for round in 0..8u16 {
        let ip = format!("10.96.60.{}", round + 10);
        let node_port = 31200 + round;
        let body_a = service(&format!("a-{round}"), &ip, node_port);
        let body_b = service(&format!("b-{round}"), &ip, node_port);
        let (one, two) = std::thread::scope(|scope| {
            let first = scope.spawn(|| a.curl("POST", path, &json, Some(body_a.as_bytes())));
            let second = scope.spawn(|| b.curl("POST", path, &json, Some(body_b.as_bytes())));
            (
                first.join().expect("replica a"),
                second.join().expect("replica b"),
            )
        });
        let codes = [one.0, two.0];
        assert_eq!(
            codes.iter().filter(|c| **c == 201).count(),
            1,
            "round {round}: {codes:?} {} {}",
            String::from_utf8_lossy(&one.1),
            String::from_utf8_lossy(&two.1)
        );
        let refused = if one.0 == 201 { &two.1 } else { &one.1 };
        assert!(
            String::from_utf8_lossy(refused).contains("is already allocated"),
            "round {round}: {}",
            String::from_utf8_lossy(refused)
        );
    }
    // Deleted through one replica, a Service's values can be given at once through the other.
    let holder = a.ok(&["get", "services", "-o", "name"]);
    let name = holder
        .lines()
        .find_map(|l| l.strip_prefix("service/").filter(|n| n.ends_with("-0")))
        .expect("the round 0 winner")
        .to_string();
    a.ok(&["delete", "service", &name]);
    let (code, body) = b.curl(
        "POST",
        path,
        &json,
        Some(service("again", "10.96.60.10", 31200).as_bytes()),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
}

/// A write too large for etcd only because of its managedFields is stored without them, as
/// kube's create, update and patch handlers try once more; an apply is not, and etcd's error
/// comes back as kube answers it (a 500 with etcd's words).
#[test]
fn a_write_too_large_for_etcd_is_retried_without_managed_fields() {
    // Room for the data but not for the data and its field set as well.
    let etcd = Etcd::start_with(&["--max-request-bytes=40000"]);
    let gate = Kubegate::start_with(&["--etcd-servers", &etcd.url()]);
    gate.ok(&["create", "namespace", "big"]);
    let data: serde_json::Map<String, Value> = (0..1500)
        .map(|i| (format!("key{i:05}"), json!("")))
        .collect();
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wide", "namespace": "big"}, "data": data});
    let created = gate.ok_stdin(&["create", "-o", "json", "-f", "-"], &configmap.to_string());
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["data"].as_object().map(|d| d.len()), Some(1500));
    assert!(
        created["metadata"].get("managedFields").is_none(),
        "stored without its field set: {}",
        created["metadata"]
    );
    let stored = gate.json(&["-n", "big", "get", "configmap", "wide", "-o", "json"]);
    assert_eq!(stored["data"].as_object().map(|d| d.len()), Some(1500));

    // A server-side apply of the same is refused with etcd's error.
    let mut applied = configmap.clone();
    applied["metadata"]["name"] = json!("applied");
    let out = gate.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=big", "-f", "-"],
        Some(&applied.to_string()),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("etcdserver: request is too large"),
        "{stderr}"
    );
    let (code, _) = gate.curl(
        "GET",
        "/api/v1/namespaces/big/configmaps/applied",
        &[],
        None,
    );
    assert_eq!(code, 404, "nothing half-written");
}

//! Acknowledged writes survive `kill -9`: write, kill the server hard, restart on the same
//! data dir, read everything back.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use kubegate_tests::Kubegate;

#[test]
fn acknowledged_writes_survive_kill_9() {
    let mut gate = Kubegate::start();
    gate.ok(&["create", "ns", "durable"]);
    let published = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        gate.kubectl(&["-n", "durable", "get", "configmap", "kube-root-ca.crt"])
            .status
            .success()
    });
    assert!(published, "kube-root-ca.crt was not published");
    for i in 0..20 {
        gate.ok(&[
            "-n",
            "durable",
            "create",
            "configmap",
            &format!("cm{i}"),
            &format!("--from-literal=i={i}"),
        ]);
    }
    gate.ok(&[
        "-n",
        "durable",
        "patch",
        "cm",
        "cm3",
        "--type=merge",
        "-p",
        r#"{"data":{"i":"patched"}}"#,
    ]);
    gate.ok(&["-n", "durable", "delete", "cm", "cm4"]);
    // kubectl rebuilds lists client-side; read the server's list for its resourceVersion.
    let (code, body) = gate.curl("GET", "/api/v1/namespaces/durable/configmaps", &[], None);
    assert_eq!(code, 200);
    let before: serde_json::Value = serde_json::from_slice(&body).unwrap();
    // The 19 left, and the namespace's `kube-root-ca.crt` (published as kube publishes it).
    assert_eq!(before["items"].as_array().unwrap().len(), 20);
    let rv_before: u64 = before["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let old_pid = gate.pid();

    gate.kill9();
    gate.restart();
    assert_ne!(gate.pid(), old_pid);

    let after = gate.json(&["-n", "durable", "get", "cm", "-o", "json"]);
    let names: Vec<&str> = after["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 20, "{names:?}");
    assert!(names.contains(&"kube-root-ca.crt"));
    assert!(!names.contains(&"cm4"));
    let cm3 = gate.json(&["-n", "durable", "get", "cm", "cm3", "-o", "json"]);
    assert_eq!(cm3["data"]["i"], "patched");
    // Revisions keep increasing across restarts.
    gate.ok(&[
        "-n",
        "durable",
        "create",
        "configmap",
        "after",
        "--from-literal=a=b",
    ]);
    let after_cm = gate.json(&["-n", "durable", "get", "cm", "after", "-o", "json"]);
    let rv_after: u64 = after_cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv_after > rv_before, "{rv_after} <= {rv_before}");
    // The generated CA and admin credentials were reused: kubectl kept working unchanged.
    assert!(gate.log().contains("generated cluster CA"));
}

#[test]
fn sigterm_shuts_down_cleanly_and_data_is_kept() {
    let mut gate = Kubegate::start();
    gate.ok(&["create", "ns", "graceful"]);
    let code = gate.terminate(std::time::Duration::from_secs(20));
    assert_eq!(code, Some(0), "log:\n{}", gate.log());
    assert!(gate.log().contains("kubegate stopped"));
    gate.restart();
    assert!(gate.ok(&["get", "ns", "graceful"]).contains("Active"));
}

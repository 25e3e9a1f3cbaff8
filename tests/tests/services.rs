//! Services' cluster IPs and node ports are unique, as kube's allocators keep them: a value
//! another Service holds is refused in kube's words, values kubegate picks skip those in use,
//! and a deleted Service's values are free again.

use std::collections::BTreeSet;

use kubegate_tests::Kubegate;

#[test]
fn cluster_ips_and_node_ports_are_never_given_twice() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "svc"]);
    let create = |args: &[&str]| {
        let mut all = vec!["-n", "svc", "create", "service"];
        all.extend_from_slice(args);
        gate.kubectl(&all)
    };
    let ok = |args: &[&str]| {
        let out = create(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let refused = |args: &[&str]| {
        let out = create(args);
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    ok(&["nodeport", "x1", "--tcp=80", "--node-port=30080"]);
    let err = refused(&["nodeport", "x2", "--tcp=80", "--node-port=30080"]);
    assert!(
        err.contains(
            "Service \"x2\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        ),
        "{err}"
    );
    ok(&["clusterip", "c1", "--tcp=80", "--clusterip=10.96.5.5"]);
    let err = refused(&["clusterip", "c2", "--tcp=80", "--clusterip=10.96.5.5"]);
    assert!(
        err.contains(
            "spec.clusterIPs: Invalid value: []string{\"10.96.5.5\"}: failed to allocate IP 10.96.5.5: provided IP is already allocated"
        ),
        "{err}"
    );
    // The address of default/kubernetes is held too.
    let err = refused(&["clusterip", "c3", "--tcp=80", "--clusterip=10.96.0.1"]);
    assert!(err.contains("provided IP is already allocated"), "{err}");

    // Values kubegate picks skip those in use: many Services, no two alike.
    for i in 0..40 {
        ok(&["nodeport", &format!("auto-{i}"), "--tcp=80"]);
    }
    let services = gate.json(&["-n", "svc", "get", "services", "-o", "json"]);
    let items = services["items"].as_array().expect("items");
    let mut ips = BTreeSet::new();
    let mut ports = BTreeSet::new();
    for item in items {
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        assert!(
            ips.insert(item["spec"]["clusterIP"].to_string()),
            "{name}: cluster IP given twice"
        );
        for port in item["spec"]["ports"].as_array().into_iter().flatten() {
            if let Some(node_port) = port["nodePort"].as_i64() {
                assert!(
                    ports.insert(node_port),
                    "{name}: node port {node_port} given twice"
                );
            }
        }
    }
    assert_eq!(items.len(), 42, "x1, c1 and 40 more");

    // An update may keep what the Service holds, not take another's.
    let patched = gate.kubectl(&[
        "-n",
        "svc",
        "patch",
        "service",
        "auto-0",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/spec/ports/0/nodePort", "value": 30080}]"#,
    ]);
    assert!(!patched.status.success());
    assert!(String::from_utf8_lossy(&patched.stderr).contains("provided port is already allocated"));

    // A dry run, or a create refused for another reason, keeps nothing for itself.
    ok(&[
        "clusterip",
        "dry",
        "--tcp=80",
        "--clusterip=10.96.24.24",
        "--dry-run=server",
    ]);
    let err = refused(&[
        "clusterip",
        "Bad_Name",
        "--tcp=80",
        "--clusterip=10.96.24.25",
    ]);
    assert!(err.contains("Invalid value: \"Bad_Name\""), "{err}");
    ok(&["clusterip", "real-1", "--tcp=80", "--clusterip=10.96.24.24"]);
    ok(&["clusterip", "real-2", "--tcp=80", "--clusterip=10.96.24.25"]);

    // A deleted Service's values are free again.
    gate.ok(&["-n", "svc", "delete", "service", "x1", "c1"]);
    ok(&["nodeport", "x2", "--tcp=80", "--node-port=30080"]);
    ok(&["clusterip", "c2", "--tcp=80", "--clusterip=10.96.5.5"]);
}

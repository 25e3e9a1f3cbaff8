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
    // A create refused for its namespace, or for a name already taken, keeps nothing either.
    let out = gate.kubectl(&[
        "-n",
        "nowhere",
        "create",
        "service",
        "clusterip",
        "lost",
        "--tcp=80",
        "--clusterip=10.96.24.26",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("namespaces \"nowhere\" not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = refused(&["clusterip", "real-1", "--tcp=80", "--clusterip=10.96.24.27"]);
    assert!(err.contains("already exists"), "{err}");
    ok(&["clusterip", "real-3", "--tcp=80", "--clusterip=10.96.24.26"]);
    ok(&["clusterip", "real-4", "--tcp=80", "--clusterip=10.96.24.27"]);

    // A health check node port outside the range is the allocator's 500, as kube's.
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/svc/services",
        &["Content-Type: application/json"],
        Some(br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"hc"},"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":20000,"ports":[{"port":80}]}}"#),
    );
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "Internal error occurred: failed to allocate requested HealthCheck NodePort 20000: provided port is not in the valid range. The range of valid ports is 30000-32767"
    );

    // A deleted Service's values are free again.
    gate.ok(&["-n", "svc", "delete", "service", "x1", "c1"]);
    ok(&["nodeport", "x2", "--tcp=80", "--node-port=30080"]);
    ok(&["clusterip", "c2", "--tcp=80", "--clusterip=10.96.5.5"]);
}

/// What kube's allocators and `GetWarningsForService` make of values written loosely: an
/// address with leading zeros (or IPv4-mapped) is the address it spells, held or not as that
/// one is, and accepted with kube's warning; the range's network and broadcast addresses are
/// not in it; values kubegate picks stay out of the static bands users pick from (KEP-3070,
/// KEP-3668); a load balancer ingress address gets `ipMode: VIP`.
#[test]
fn loosely_written_addresses_static_bands_and_defaults_are_kubes() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "loose"]);
    let create = |args: &[&str]| {
        let mut all = vec!["-n", "loose", "create", "service"];
        all.extend_from_slice(args);
        gate.kubectl(&all)
    };
    let refused = |args: &[&str]| {
        let out = create(args);
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    // 10.96.0.01 is 10.96.0.1, default/kubernetes's.
    let err = refused(&["clusterip", "zeros", "--tcp=80", "--clusterip=10.96.0.01"]);
    assert!(
        err.contains("failed to allocate IP 10.96.0.01: provided IP is already allocated"),
        "{err}"
    );
    let out = create(&["clusterip", "plain", "--tcp=80", "--clusterip=10.100.0.99"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for spelling in ["010.100.000.099", "::ffff:10.100.0.99"] {
        let err = refused(&[
            "clusterip",
            "again",
            "--tcp=80",
            &format!("--clusterip={spelling}"),
        ]);
        assert!(
            err.contains("provided IP is already allocated"),
            "{spelling}: {err}"
        );
    }
    let out = create(&[
        "clusterip",
        "loose-ok",
        "--tcp=80",
        "--clusterip=10.100.000.100",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let warning = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        warning.contains(
            "Warning: spec.clusterIPs[0]: non-standard IP address \"10.100.000.100\" will be considered invalid in a future Kubernetes release: use \"10.100.0.100\""
        ),
        "{warning}"
    );
    let err = refused(&["clusterip", "again", "--tcp=80", "--clusterip=10.100.0.100"]);
    assert!(err.contains("provided IP is already allocated"), "{err}");

    // Network and broadcast addresses are outside what the allocator gives.
    for address in ["10.96.0.0", "10.111.255.255"] {
        let err = refused(&[
            "clusterip",
            "edge",
            "--tcp=80",
            &format!("--clusterip={address}"),
        ]);
        assert!(
            err.contains(&format!(
                "failed to allocate IP {address}: the provided IP ({address}) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
            )),
            "{err}"
        );
    }

    // Picked values stay out of the static bands: 10.96.0.0-255, node ports 30000-30085.
    for i in 0..30 {
        let out = create(&["nodeport", &format!("auto-{i}"), "--tcp=80,443"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let services = gate.json(&["-n", "loose", "get", "services", "-o", "json"]);
    for item in services["items"].as_array().into_iter().flatten() {
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        if !name.starts_with("auto-") {
            continue;
        }
        let ip: std::net::Ipv4Addr = item["spec"]["clusterIP"]
            .as_str()
            .and_then(|ip| ip.parse().ok())
            .expect("a cluster IP");
        assert!(
            !ip.to_string().starts_with("10.96.0."),
            "{name}: {ip} in the static band"
        );
        for port in item["spec"]["ports"].as_array().into_iter().flatten() {
            let node_port = port["nodePort"].as_i64().unwrap_or_default();
            assert!(
                (30086..=32767).contains(&node_port),
                "{name}: node port {node_port} in the static band"
            );
        }
    }

    // A load balancer ingress with an address is defaulted to ipMode VIP; a hostname is not.
    let out = create(&["loadbalancer", "lb", "--tcp=80"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `kubectl patch --subresource=status` of a Service in `loose`, its output.
    let patch_status = |name: &str, status: &str| {
        gate.kubectl(&[
            "-n",
            "loose",
            "patch",
            "service",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ])
    };
    let patched = patch_status(
        "lb",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"1.2.3.4"},{"hostname":"lb.example.com"}]}}}"#,
    );
    assert!(
        patched.status.success(),
        "{}",
        String::from_utf8_lossy(&patched.stderr)
    );
    let refusal = |out: std::process::Output| {
        assert!(!out.status.success(), "the status write was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let lb = gate.json(&["-n", "loose", "get", "service", "lb", "-o", "json"]);
    assert_eq!(
        lb["status"]["loadBalancer"]["ingress"],
        serde_json::json!([{"ip": "1.2.3.4", "ipMode": "VIP"}, {"hostname": "lb.example.com"}]),
        "{lb}"
    );
    // A status write is validated as kube's ValidateServiceStatusUpdate does, and a refused
    // one leaves the stored status as it was.
    let refused = refusal(patch_status(
        "lb",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"bogus"},{"hostname":"1.2.3.4"}]}}}"#,
    ));
    for expected in [
        r#"status.loadBalancer.ingress[0].ip: Invalid value: "bogus": must be a valid IP address"#,
        r#"status.loadBalancer.ingress[1].hostname: Invalid value: "1.2.3.4": must be a DNS name, not an IP address"#,
    ] {
        assert!(refused.contains(expected), "{expected} in {refused}");
    }
    let unchanged = gate.json(&["-n", "loose", "get", "service", "lb", "-o", "json"]);
    assert_eq!(unchanged["status"], lb["status"], "{unchanged}");
    gate.ok(&[
        "-n",
        "loose",
        "create",
        "service",
        "clusterip",
        "status-less",
        "--tcp=80",
    ]);
    let refused = refusal(patch_status(
        "status-less",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}}}"#,
    ));
    assert!(
        refused.contains(
            "status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"
        ),
        "{refused}"
    );

    // A field the type ignores is accepted with kube's warning.
    let out = gate.kubectl_stdin(
        &["-n", "loose", "create", "-f", "-"],
        Some(
            r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"named"},
            "spec":{"type":"ClusterIP","externalName":"db.example.com","ports":[{"port":80}]}}"#,
        ),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "Warning: spec.externalName is ignored when spec.type is not \"ExternalName\""
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

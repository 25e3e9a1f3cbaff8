//! `apiregistration.k8s.io/v1` APIServices with the real kubectl: a valid APIService is
//! applied and listed with kube-aggregator's columns (NAME, SERVICE, AVAILABLE, AGE), its
//! service port is defaulted to 443, and invalid ones are refused with kube's messages (and
//! kubegate's for the `kubegate.io/backend-url` annotation) without being stored.
//!
//! kubegate also registers its own local APIServices and runs an availability controller, so
//! nothing here depends on how many APIServices exist or on the AVAILABLE value.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use kubegate_tests::Kubegate;

/// A remote APIService backed by `default/widgets-api`, verified with a CA bundle.
const VALID: &str = r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.widgets.example.com
spec:
  group: widgets.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service:
    namespace: default
    name: widgets-api
  caBundle: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
"#;

/// `kubectl apply -f -` of `manifest`, which must fail; returns stderr.
fn apply_fails(gate: &Kubegate, manifest: &str) -> String {
    let out = gate.kubectl_stdin(&["apply", "-f", "-"], Some(manifest));
    assert!(
        !out.status.success(),
        "apply unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn apiservices_are_served_like_kube_aggregator() {
    let gate = Kubegate::start();

    let created = gate.ok_stdin(&["apply", "-f", "-"], VALID);
    assert!(
        created.contains("apiservice.apiregistration.k8s.io/v1alpha1.widgets.example.com created"),
        "{created}"
    );

    // kube-aggregator's table: NAME, SERVICE, AVAILABLE, AGE.
    let list = gate.ok(&["get", "apiservices"]);
    let header: Vec<&str> = list
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SERVICE", "AVAILABLE", "AGE"], "{list}");
    let row = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some("v1alpha1.widgets.example.com"))
        .unwrap_or_else(|| panic!("the APIService is not listed:\n{list}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.get(1), Some(&"default/widgets-api"), "{row}");

    // Looked up by its singular name too, and defaulted as kube's v1 defaults do.
    let one = gate.ok(&["get", "apiservice", "v1alpha1.widgets.example.com"]);
    assert!(one.contains("default/widgets-api"), "{one}");
    let port = gate.ok(&[
        "get",
        "apiservice",
        "v1alpha1.widgets.example.com",
        "-o",
        "jsonpath={.spec.service.port}",
    ]);
    assert_eq!(port.trim(), "443");

    // The name must be <version>.<group>.
    let bad_name = VALID.replace("name: v1alpha1.widgets.example.com", "name: widgets");
    let err = apply_fails(&gate, &bad_name);
    assert!(
        err.contains(
            "metadata.name: Invalid value: \"widgets\": must be `spec.version+\".\"+spec.group`: \"v1alpha1.widgets.example.com\""
        ),
        "{err}"
    );

    // insecureSkipTLSVerify and a CA bundle exclude each other.
    let both = VALID.replace("  caBundle:", "  insecureSkipTLSVerify: true\n  caBundle:");
    let both = both.replace("v1alpha1", "v1beta1");
    let err = apply_fails(&gate, &both);
    assert!(
        err.contains(
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"
        ),
        "{err}"
    );

    // kubegate's backend-url annotation refuses plain http.
    let http = r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.gadgets.example.com
  annotations:
    kubegate.io/backend-url: http://gadgets.example.com:8080
spec:
  group: gadgets.example.com
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
"#;
    let err = apply_fails(&gate, http);
    assert!(
        err.contains(
            "metadata.annotations[kubegate.io/backend-url]: Invalid value: \"http://gadgets.example.com:8080\": https is required"
        ),
        "{err}"
    );

    // Nothing invalid was stored.
    for name in [
        "widgets",
        "v1beta1.widgets.example.com",
        "v1.gadgets.example.com",
    ] {
        let err = gate.fails(&["get", "apiservice", name]);
        assert!(
            err.contains(&format!(
                "apiservices.apiregistration.k8s.io \"{name}\" not found"
            )),
            "{err}"
        );
    }

    // The same annotation over https is a valid backend.
    let https = http.replace("http://", "https://");
    let created = gate.ok_stdin(&["apply", "-f", "-"], &https);
    assert!(
        created.contains("v1.gadgets.example.com created"),
        "{created}"
    );
}

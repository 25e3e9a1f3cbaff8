//! End-to-end `x-kubernetes-embedded-resource` fields with the real kubectl, as kube's
//! apiextensions-apiserver handles them: an embedded object missing `apiVersion` and `kind`
//! is refused with 422 naming both fields (also inside a list), a bad label in embedded
//! metadata is refused, a `kind` that is no string fails the decode (400), fields ObjectMeta
//! does not have are unknown fields in embedded metadata (refused by kubectl's strict field
//! validation, a warning and dropped under `--validate=warn`), and a good object round-trips
//! unchanged, on create and on replace.

use kubegate_tests::crd_fixtures::serve_crd;
use kubegate_tests::Kubegate;
use serde_json::{json, Value};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: workloads.embed.example.com
spec:
  group: embed.example.com
  scope: Namespaced
  names:
    plural: workloads
    singular: workload
    kind: Workload
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas:
                type: integer
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              sidecars:
                type: array
                items:
                  type: object
                  x-kubernetes-embedded-resource: true
                  x-kubernetes-preserve-unknown-fields: true
"#;

const COLLECTION: &str = "/apis/embed.example.com/v1/namespaces/default/workloads";

/// A Workload named `name` with `spec`.
fn workload(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "embed.example.com/v1",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// `kubectl create -f -` of `object`, expected to fail: its stderr.
fn create_fails(gate: &Kubegate, object: &Value) -> String {
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(&object.to_string()));
    assert!(
        !out.status.success(),
        "create unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A raw POST of `object` to the collection: status code and body.
fn post(gate: &Kubegate, object: &Value) -> (u16, Value) {
    let (code, body) = gate.curl(
        "POST",
        COLLECTION,
        &["Content-Type: application/json"],
        Some(object.to_string().as_bytes()),
    );
    let parsed = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "POST {COLLECTION}: bad JSON ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    (code, parsed)
}

#[test]
fn embedded_resources_are_validated_coerced_and_round_trip_like_kube() {
    let gate = Kubegate::start();
    serve_crd(&gate, CRD, "workloads.embed.example.com");

    // apiVersion and kind are required: a 422 naming both, with kube's messages.
    let missing = workload(
        "missing",
        json!({"template": {"metadata": {"name": "p"}, "spec": {}}}),
    );
    let stderr = create_fails(&gate, &missing);
    for expected in [
        "spec.template.apiVersion: Required value: must not be empty",
        "spec.template.kind: Required value: must not be empty",
    ] {
        assert!(stderr.contains(expected), "{expected} not in: {stderr}");
    }
    let (code, status) = post(&gate, &missing);
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid", "{status}");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .map(|causes| causes.iter().filter_map(|c| c["field"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        fields,
        ["spec.template.apiVersion", "spec.template.kind"],
        "{status}"
    );

    // In a list of embedded resources, the item is named by its index.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let stderr = create_fails(
        &gate,
        &workload(
            "list",
            json!({"sidecars": [pod, {"apiVersion": "v1", "metadata": {}}]}),
        ),
    );
    assert!(
        stderr.contains("spec.sidecars[1].kind: Required value: must not be empty"),
        "{stderr}"
    );

    // Embedded metadata is validated as ObjectMeta: label keys and values.
    let stderr = create_fails(
        &gate,
        &workload(
            "badlabel",
            json!({"template": {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"labels": {"bad key": "web"}}}}),
        ),
    );
    assert!(
        stderr.contains("spec.template.metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters"),
        "{stderr}"
    );

    // A kind that is no string does not decode: 400 with kube's decode error.
    let (code, status) = post(
        &gate,
        &workload(
            "badkind",
            json!({"template": {"apiVersion": "v1", "kind": 5}}),
        ),
    );
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "Workload in version \"v1\" cannot be handled as a Workload: spec.template.kind: Invalid value: 5: must be a string",
        "{status}"
    );
    for name in ["missing", "list", "badlabel", "badkind"] {
        let out = gate.kubectl(&["get", "workload", name]);
        assert!(!out.status.success(), "{name} was stored");
    }

    // Fields ObjectMeta does not have are unknown fields: refused under kubectl's default
    // strict field validation ...
    let pruned = workload(
        "pruned",
        json!({"template": {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "p", "junk": 1, "labels": {"app": "web"}},
                            "spec": {"anything": ["goes"]}}}),
    );
    let stderr = create_fails(&gate, &pruned);
    assert!(
        stderr.contains("strict decoding error: unknown field \"spec.template.metadata.junk\""),
        "{stderr}"
    );
    // ... a warning under `--validate=warn`, and dropped; the rest of the embedded object
    // is preserved.
    let out = gate.kubectl_stdin(
        &["create", "--validate=warn", "-f", "-"],
        Some(&pruned.to_string()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("unknown field \"spec.template.metadata.junk\""),
        "{stderr}"
    );
    let stored = gate.json(&["get", "workload", "pruned", "-o", "json"]);
    assert_eq!(
        stored["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "labels": {"app": "web"}},
               "spec": {"anything": ["goes"]}}),
        "{stored}"
    );

    // A good object round-trips unchanged, and so does an update of it.
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "labels": {"app.kubernetes.io/name": "web"},
            "annotations": {"example.com/note": "kept"},
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    });
    let good = workload(
        "good",
        json!({"replicas": 1, "template": deployment, "sidecars": [pod]}),
    );
    let created = gate.ok_stdin(&["create", "-f", "-"], &good.to_string());
    assert!(
        created.contains("workload.embed.example.com/good created"),
        "{created}"
    );
    let stored = gate.json(&["get", "workload", "good", "-o", "json"]);
    assert_eq!(stored["spec"], good["spec"], "{stored}");

    let mut updated = stored.clone();
    updated["spec"]["template"]["metadata"]["labels"]["tier"] = json!("front");
    gate.ok_stdin(&["replace", "-f", "-"], &updated.to_string());
    let replaced = gate.json(&["get", "workload", "good", "-o", "json"]);
    assert_eq!(replaced["spec"], updated["spec"], "{replaced}");
}

//! Server-side apply and managed fields with the real kubectl: `kubectl apply --server-side`
//! creates, merges, conflicts with other managers' fields (kube's message), takes them with
//! `--force-conflicts`, removes what it stops applying, takes over from client-side apply,
//! merges list-map items by key on a custom resource and applies its status subresource; and
//! bad apply requests get kube's Status bodies and change nothing.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use kubegate_tests::crd_fixtures::serve_crd;
use kubegate_tests::Kubegate;
use serde_json::{json, Value};

/// `{manager: fieldsV1}` of an object, read with `--show-managed-fields`.
fn owners(gate: &Kubegate, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend(["-o", "json", "--show-managed-fields"]);
    let object = gate.json(&full);
    let mut out = serde_json::Map::new();
    for entry in object["metadata"]["managedFields"].as_array().unwrap() {
        let mut key = entry["manager"].as_str().unwrap().to_string();
        if let Some(sub) = entry.get("subresource").and_then(Value::as_str) {
            key = format!("{key}/{sub}");
        }
        assert_eq!(entry["fieldsType"], "FieldsV1", "{entry}");
        out.insert(key, entry["fieldsV1"].clone());
    }
    Value::Object(out)
}

fn apply(gate: &Kubegate, manifest: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["apply", "--server-side", "-f", "-"];
    args.extend(extra);
    gate.kubectl_stdin(&args, Some(manifest))
}

fn apply_ok(gate: &Kubegate, manifest: &str, extra: &[&str]) -> String {
    let out = apply(gate, manifest, extra);
    assert!(
        out.status.success(),
        "apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn configmap(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n{data}")
}

#[test]
fn apply_creates_merges_conflicts_and_prunes() {
    let gate = Kubegate::start();
    gate.ok(&[
        "create",
        "configmap",
        "app",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    assert_eq!(
        owners(&gate, &["get", "cm", "app"]),
        json!({"kubectl-create": {"f:data": {".": {}, "f:a": {}, "f:b": {}}}})
    );

    // Changing a field kubectl-create owns is a conflict, and nothing changes.
    let out = apply(&gate, &configmap("  a: \"9\"\n  c: \"3\"\n"), &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a"#
        ),
        "{stderr}"
    );
    assert_eq!(
        gate.json(&["get", "cm", "app", "-o", "json"])["data"],
        json!({"a": "1", "b": "2"})
    );

    // Applying the value it already has shares the field; forcing takes it.
    apply_ok(&gate, &configmap("  a: \"1\"\n  c: \"3\"\n"), &[]);
    let shared = owners(&gate, &["get", "cm", "app"]);
    assert_eq!(shared["kubectl"], json!({"f:data": {"f:a": {}, "f:c": {}}}));
    assert_eq!(
        shared["kubectl-create"],
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}})
    );
    let out = apply_ok(
        &gate,
        &configmap("  a: \"9\"\n  c: \"3\"\n"),
        &["--force-conflicts"],
    );
    assert!(out.contains("configmap/app serverside-applied"), "{out}");
    let forced = owners(&gate, &["get", "cm", "app"]);
    assert_eq!(
        forced["kubectl-create"],
        json!({"f:data": {".": {}, "f:b": {}}})
    );
    assert_eq!(
        gate.json(&["get", "cm", "app", "-o", "json"])["data"],
        json!({"a": "9", "b": "2", "c": "3"})
    );

    // A label another manager added stays when the applier stops applying its own.
    apply_ok(
        &gate,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  labels: {mine: x}\ndata:\n  a: \"9\"\n  c: \"3\"\n",
        &[],
    );
    gate.ok(&["label", "cm", "app", "theirs=y"]);
    assert_eq!(
        owners(&gate, &["get", "cm", "app"])["kubectl-label"],
        json!({"f:metadata": {"f:labels": {"f:theirs": {}}}})
    );
    apply_ok(&gate, &configmap("  a: \"9\"\n"), &[]);
    let now = gate.json(&["get", "cm", "app", "-o", "json"]);
    assert_eq!(
        now["data"],
        json!({"a": "9", "b": "2"}),
        "c was the applier's alone"
    );
    assert_eq!(now["metadata"]["labels"], json!({"theirs": "y"}));

    // Re-applying the same configuration writes nothing.
    let rv = now["metadata"]["resourceVersion"].clone();
    apply_ok(&gate, &configmap("  a: \"9\"\n"), &[]);
    let again = gate.json(&["get", "cm", "app", "-o", "json"]);
    assert_eq!(again["metadata"]["resourceVersion"], rv);

    // A dry run answers the merged object and stores nothing.
    let dry = apply_ok(
        &gate,
        &configmap("  a: \"9\"\n  d: \"4\"\n"),
        &["--dry-run=server", "-o", "json"],
    );
    let dry: Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(dry["data"]["d"], "4");
    assert!(gate.json(&["get", "cm", "app", "-o", "json"])["data"]
        .get("d")
        .is_none());

    // Apply creates what does not exist.
    let out = apply_ok(
        &gate,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: fresh\nstringData:\n  k: v\n",
        &["--field-manager=deployer"],
    );
    assert!(out.contains("secret/fresh serverside-applied"), "{out}");
    assert_eq!(
        gate.json(&["get", "secret", "fresh", "-o", "json"])["data"]["k"],
        "dg=="
    );
    let fresh = owners(&gate, &["get", "secret", "fresh"]);
    assert!(fresh.get("deployer").is_some(), "{fresh}");
}

#[test]
fn server_side_apply_takes_over_from_client_side_apply() {
    let gate = Kubegate::start();
    let v1 = configmap("  a: \"1\"\n  b: \"1\"\n");
    gate.ok_stdin(&["apply", "-f", "-"], &v1);
    // The same manifest, then a changed one, apply server-side without conflicts.
    apply_ok(&gate, &v1, &[]);
    apply_ok(&gate, &configmap("  a: \"2\"\n"), &[]);
    let object = gate.json(&["get", "cm", "app", "-o", "json"]);
    assert_eq!(object["data"], json!({"a": "2"}));
    let annotation = object["metadata"]["annotations"]
        ["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap();
    let last: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(last["data"], json!({"a": "2"}), "{annotation}");
    let managers = owners(&gate, &["get", "cm", "app"]);
    assert_eq!(
        managers["kubectl"],
        json!({"f:data": {"f:a": {}}}),
        "{managers}"
    );
    // Back to client-side apply: it still works from the annotation.
    gate.ok_stdin(&["apply", "-f", "-"], &configmap("  a: \"3\"\n"));
    assert_eq!(
        gate.json(&["get", "cm", "app", "-o", "json"])["data"],
        json!({"a": "3"})
    );
}

const WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.count}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              tags: {type: array, items: {type: string}, x-kubernetes-list-type: set}
              items:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    value: {type: string}
          status:
            type: object
            properties:
              ready: {type: boolean}
              count: {type: integer}
"#;

fn widget(body: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w}}\n{body}")
}

#[test]
fn custom_resources_merge_list_items_by_key_and_apply_status() {
    let gate = Kubegate::start();
    serve_crd(&gate, WIDGETS, "widgets.example.com");
    apply_ok(
        &gate,
        &widget("spec:\n  size: 1\n  tags: [a]\n  items:\n  - {name: first, value: \"1\"}\n"),
        &["--field-manager=team-a"],
    );
    apply_ok(
        &gate,
        &widget("spec:\n  tags: [b]\n  items:\n  - {name: second, value: \"2\"}\n"),
        &["--field-manager=team-b"],
    );
    let spec = gate.json(&["get", "widget", "w", "-o", "json"])["spec"].clone();
    assert_eq!(
        spec,
        json!({"size": 1, "tags": ["a", "b"], "items": [{"name": "first", "value": "1"}, {"name": "second", "value": "2"}]})
    );
    let managers = owners(&gate, &["get", "widget", "w"]);
    assert_eq!(
        managers["team-b"],
        json!({"f:spec": {"f:items": {r#"k:{"name":"second"}"#: {".": {}, "f:name": {}, "f:value": {}}},
                          "f:tags": {r#"v:"b""#: {}}}})
    );
    // Another team's item is theirs.
    let out = apply(
        &gate,
        &widget("spec:\n  items:\n  - {name: first, value: \"9\"}\n"),
        &["--field-manager=team-b"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(r#"conflict with "team-a": .spec.items[name="first"].value"#),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Team b dropping its item removes only that item.
    apply_ok(
        &gate,
        &widget("spec:\n  tags: [b]\n"),
        &["--field-manager=team-b"],
    );
    assert_eq!(
        gate.json(&["get", "widget", "w", "-o", "json"])["spec"]["items"],
        json!([{"name": "first", "value": "1"}])
    );

    // Status goes through its subresource, owned there; the object's endpoint ignores it.
    apply_ok(
        &gate,
        &widget("status: {ready: true}\n"),
        &["--subresource=status", "--field-manager=controller"],
    );
    apply_ok(
        &gate,
        &widget("spec:\n  size: 2\nstatus: {ready: false}\n"),
        &["--field-manager=team-a", "--force-conflicts"],
    );
    let object = gate.json(&["get", "widget", "w", "-o", "json"]);
    assert_eq!(object["status"], json!({"ready": true}));
    assert_eq!(object["spec"]["size"], 2);
    let managers = owners(&gate, &["get", "widget", "w"]);
    assert_eq!(
        managers["controller/status"],
        json!({"f:status": {"f:ready": {}}})
    );

    // Scaling is recorded as a change of the object through the scale subresource (kubectl
    // scale names no field manager: its User-Agent does), so an apply that would undo it
    // conflicts with the scaler.
    gate.ok(&["scale", "widget", "w", "--replicas=5"]);
    // The scale subresource's Table has kube's scale columns.
    let table = gate.ok(&["get", "widget", "w", "--subresource=scale"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "DESIRED", "AVAILABLE", "AGE"], "{table}");
    let row: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(&row[..2], ["w", "5"], "{table}");
    let managers = owners(&gate, &["get", "widget", "w"]);
    assert_eq!(
        managers["kubectl/scale"],
        json!({"f:spec": {"f:size": {}}}),
        "{managers}"
    );
    let out = apply(
        &gate,
        &widget("spec:\n  size: 2\n"),
        &["--field-manager=team-a"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            r#"conflict with "kubectl" with subresource "scale" using example.com/v1: .spec.size"#
        ),
        "{stderr}"
    );
    assert!(managers["team-a"].get("f:status").is_none(), "{managers}");
}

/// A `null` in an apply configuration is kept by the merge, as structured-merge-diff keeps
/// it, and decoded as Go decodes it: a string map's value becomes `""`, owned by the applier.
#[test]
fn nulls_in_an_apply_configuration_are_decoded_not_dropped() {
    let gate = Kubegate::start();
    apply_ok(
        &gate,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nulls\n  labels: {l: null}\ndata: {k: null, v: \"1\"}\n",
        &["--field-manager=x"],
    );
    let cm = gate.json(&["get", "configmap", "nulls", "-o", "json"]);
    assert_eq!(cm["data"], json!({"k": "", "v": "1"}), "{cm}");
    assert_eq!(cm["metadata"]["labels"], json!({"l": ""}), "{cm}");
    let managers = owners(&gate, &["get", "configmap", "nulls"]);
    assert_eq!(
        managers["x"]["f:data"],
        json!({"f:k": {}, "f:v": {}}),
        "{managers}"
    );
}

/// What the server assigns after kube's field manager recorded a write (a Service's cluster
/// IPs, families and node ports; a namespace's `kubernetes` finalizer) belongs to no writer:
/// an applier setting them later meets no conflict with the creator.
#[test]
fn server_assigned_fields_belong_to_no_writer() {
    let gate = Kubegate::start();
    gate.ok(&["create", "service", "nodeport", "web", "--tcp=80"]);
    let managers = owners(&gate, &["get", "service", "web"]);
    let spec = managers["kubectl-create"]["f:spec"].clone();
    for assigned in [
        "f:clusterIP",
        "f:clusterIPs",
        "f:ipFamilies",
        "f:ipFamilyPolicy",
    ] {
        assert!(spec.get(assigned).is_none(), "{assigned} in {managers}");
    }
    assert!(spec.get("f:ports").is_some(), "{managers}");
    let port = spec["f:ports"]
        .as_object()
        .and_then(|ports| ports.iter().find(|(key, _)| key.starts_with("k:")))
        .map(|(_, port)| port.clone())
        .unwrap_or_default();
    assert!(port.get("f:nodePort").is_none(), "{managers}");
    assert!(port.get("f:port").is_some(), "{managers}");
    // Defaults are the creator's, as kube defaults while decoding.
    assert!(spec.get("f:sessionAffinity").is_some(), "{managers}");
    apply_ok(
        &gate,
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ipFamilyPolicy: PreferDualStack\n",
        &["--field-manager=other"],
    );

    gate.ok(&["create", "namespace", "team"]);
    let managers = owners(&gate, &["get", "namespace", "team"]);
    assert!(
        managers["kubectl-create"].get("f:spec").is_none(),
        "{managers}"
    );
    apply_ok(
        &gate,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\nspec: {finalizers: [kubernetes]}\n",
        &["--field-manager=other"],
    );
}

/// A custom resource's metadata is typed as kube types it (the static ObjectMeta schema):
/// an applier owns the labels and annotations it sets, not the maps, so re-applying without
/// them leaves other managers' keys; finalizers are a set two appliers share.
#[test]
fn custom_resources_metadata_is_typed_for_apply() {
    let gate = Kubegate::start();
    serve_crd(&gate, WIDGETS, "widgets.example.com");
    let labelled = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  labels: {a: \"1\"}\n  annotations: {x: \"1\"}\nspec: {size: 1}\n";
    apply_ok(&gate, labelled, &["--field-manager=x"]);
    gate.ok(&["label", "widget", "w", "d=1"]);
    gate.ok(&["annotate", "widget", "w", "z=1"]);
    let managers = owners(&gate, &["get", "widget", "w"]);
    assert_eq!(
        managers["x"]["f:metadata"],
        json!({"f:labels": {"f:a": {}}, "f:annotations": {"f:x": {}}}),
        "{managers}"
    );
    apply_ok(&gate, &widget("spec: {size: 1}\n"), &["--field-manager=x"]);
    let meta = gate.json(&["get", "widget", "w", "-o", "json"])["metadata"].clone();
    assert_eq!(meta["labels"], json!({"d": "1"}), "{meta}");
    assert_eq!(meta["annotations"], json!({"z": "1"}), "{meta}");

    let finalized = |finalizer: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  finalizers: [{finalizer}]\n"
        )
    };
    apply_ok(&gate, &finalized("example.com/a"), &["--field-manager=ma"]);
    apply_ok(&gate, &finalized("example.com/b"), &["--field-manager=mb"]);
    let meta = gate.json(&["get", "widget", "w", "-o", "json"])["metadata"].clone();
    assert_eq!(
        meta["finalizers"],
        json!(["example.com/a", "example.com/b"]),
        "{meta}"
    );
    gate.ok(&[
        "patch",
        "widget",
        "w",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
}

fn status(body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)));
    assert_eq!(v["kind"], "Status", "{v}");
    v
}

const APPLY: &str = "Content-Type: application/apply-patch+yaml";

#[test]
fn bad_apply_requests_get_kube_status_bodies_and_change_nothing() {
    let gate = Kubegate::start();
    gate.ok(&["create", "configmap", "app", "--from-literal=a=1"]);
    let path = "/api/v1/namespaces/default/configmaps/app";
    let body = configmap("  a: \"2\"\n");

    let (code, out) = gate.curl("PATCH", path, &[APPLY], Some(body.as_bytes()));
    assert_eq!(code, 422);
    assert_eq!(
        status(&out)["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );

    let (code, out) = gate.curl(
        "PATCH",
        &format!("{path}?fieldManager=m&force=true"),
        &["Content-Type: application/merge-patch+json"],
        Some(br#"{"data":{"a":"2"}}"#),
    );
    assert_eq!(code, 422);
    assert_eq!(
        status(&out)["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );

    let (code, out) = gate.curl(
        "PATCH",
        &format!("{path}?fieldManager=m"),
        &[APPLY],
        Some(b"apiVersion: v1\nkind: Secret\nmetadata: {name: app}\n"),
    );
    assert_eq!(code, 400);
    assert_eq!(
        status(&out)["message"],
        "invalid object type: /v1, Kind=Secret"
    );

    let (code, out) = gate.curl(
        "PATCH",
        &format!("{path}?fieldManager=m"),
        &[APPLY],
        Some(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"),
    );
    assert_eq!(code, 400);
    assert_eq!(
        status(&out)["message"],
        "the name of the object (other) does not match the name on the URL (app)"
    );

    let (code, out) = gate.curl(
        "PATCH",
        &format!("{path}?fieldManager=m"),
        &[APPLY],
        Some(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, managedFields: []}\n"),
    );
    assert_eq!(code, 400);
    assert_eq!(
        status(&out)["message"],
        "metadata.managedFields must be nil"
    );

    let (code, out) = gate.curl(
        "PATCH",
        &format!("{path}?fieldManager=m"),
        &[APPLY],
        Some(b"a: [b"),
    );
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&out));
    assert_eq!(status(&out)["reason"], "BadRequest");

    // The conflict as a Status: 409 Conflict with one FieldManagerConflict cause per field.
    let (code, out) = gate.curl(
        "PATCH",
        &format!("{path}?fieldManager=m"),
        &[APPLY],
        Some(body.as_bytes()),
    );
    assert_eq!(code, 409);
    let s = status(&out);
    assert_eq!(s["reason"], "Conflict");
    assert_eq!(
        s["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl-create\" using v1", "field": ".data.a"}])
    );

    let object = gate.json(&["get", "cm", "app", "-o", "json", "--show-managed-fields"]);
    assert_eq!(object["data"], json!({"a": "1"}));
    assert_eq!(
        object["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Creating through apply needs `create`: a user who may only patch can apply to what
    // exists, not bring new objects into being (403 with kube's wording for it: the
    // authorizer's reason alone, which RBAC leaves empty).
    gate.ok(&[
        "create",
        "role",
        "patcher",
        "--verb=get,patch",
        "--resource=configmaps",
    ]);
    gate.ok(&[
        "create",
        "rolebinding",
        "patcher",
        "--role=patcher",
        "--user=patcher",
    ]);
    apply_ok(&gate, &configmap("  a: \"1\"\n"), &["--as=patcher"]);
    let out = apply(
        &gate,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: brand-new\n",
        &["--as=patcher"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"Error from server (Forbidden): configmaps "brand-new" is forbidden"#),
        "{stderr}"
    );
    assert!(!gate.kubectl(&["get", "cm", "brand-new"]).status.success());
}

/// Corners of managed fields as kube 1.33 has them: an apply that creates ignores the
/// resourceVersion it names; metadata written through a Service's `/status` is kept (kube's
/// status strategy resets only `spec`), so its owner owns something real; `managedFields: []`
/// resets them; entries a client writes are validated.
#[test]
fn managed_fields_corners_as_kube() {
    let gate = Kubegate::start();
    // Apply creating with a resourceVersion: created.
    let rv = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rv1\n  resourceVersion: \"5\"\ndata:\n  a: \"1\"\n";
    apply_ok(&gate, rv, &["--field-manager=m"]);
    let created = gate.json(&["get", "configmap", "rv1", "-o", "json"]);
    assert_eq!(created["data"]["a"], "1");

    // Fields the kind does not declare fail the apply, whatever fieldValidation says (kube's
    // field manager cannot make the configuration a typed object).
    let bogus =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rv1\nbogus: 1\ndata:\n  a: \"1\"\n";
    for validation in ["Ignore", "Warn", "Strict"] {
        let (code, answer) = gate.curl(
            "PATCH",
            &format!(
                "/api/v1/namespaces/default/configmaps/rv1?fieldManager=m&fieldValidation={validation}"
            ),
            &["Content-Type: application/apply-patch+yaml"],
            Some(bogus.as_bytes()),
        );
        let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        assert_eq!(code, 500, "{validation}: {answer}");
        assert_eq!(
            answer["message"],
            "failed to create typed patch object (default/rv1; /v1, Kind=ConfigMap): .bogus: field not declared in schema",
            "{validation}"
        );
    }

    // Metadata through /status.
    gate.ok(&["create", "service", "clusterip", "s2", "--tcp=80:80"]);
    let status = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s2\n  labels:\n    fromstatus: \"yes\"\nstatus:\n  conditions:\n  - type: Ready\n    status: \"True\"\n    reason: Ok\n    message: ok\n    lastTransitionTime: \"2024-01-01T00:00:00Z\"\n";
    apply_ok(
        &gate,
        status,
        &["--field-manager=lb", "--subresource=status"],
    );
    let service = gate.json(&[
        "get",
        "service",
        "s2",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    assert_eq!(
        service["metadata"]["labels"]["fromstatus"], "yes",
        "{service}"
    );
    assert_eq!(
        service["status"]["conditions"][0]["type"], "Ready",
        "{service}"
    );

    // `managedFields: []` resets them.
    gate.ok(&[
        "patch",
        "configmap",
        "rv1",
        "--type=merge",
        "-p",
        r#"{"metadata":{"managedFields":[]}}"#,
    ]);
    let reset = gate.json(&[
        "get",
        "configmap",
        "rv1",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    assert!(
        reset["metadata"].get("managedFields").is_none(),
        "{}",
        reset["metadata"]
    );

    // A manager name over 128 bytes is refused as kube's ObjectMeta validation refuses it
    // (the entry keeps a field the write does not take from it, so it stays).
    let long = "m".repeat(130);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mf3",
        "managedFields": [{"manager": long, "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:zzz": {}}}}]},
        "data": {"a": "1"}});
    let (code, answer) = gate.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/json"],
        Some(body.to_string().as_bytes()),
    );
    let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    assert_eq!(code, 422, "{answer}");
    assert!(
        answer["message"].as_str().unwrap_or_default().contains(
            "metadata.managedFields[0].manager: Too long: may not be more than 128 bytes"
        ),
        "{answer}"
    );
}

//! End-to-end custom resources with the real kubectl: a CRD with two versions becomes
//! Established and its instances are served like kube's apiextensions-apiserver serves them
//! (printer columns, short names, categories, schema defaulting/pruning/validation, the
//! status subresource, both versions over one storage, watch, explain), and deleting the CRD
//! deletes its instances first, serving them (creates refused) until the last one is gone.

use std::time::Duration;

use kubegate_tests::crd_fixtures::serve_crd;
use kubegate_tests::{eventually, Kubegate};
use serde_json::Value;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
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
            description: The desired schedule.
            properties:
              cronSpec:
                type: string
                description: When to run, in cron format.
              image:
                type: string
              replicas:
                type: integer
                minimum: 0
                default: 1
          status:
            type: object
            properties:
              replicas:
                type: integer
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    selectableFields:
    - jsonPath: .spec.image
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const MY_CRONTAB: &str = r#"apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: my
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
  unknownField: dropped
"#;

fn fresh_ok(gate: &Kubegate, args: &[&str]) -> String {
    let out = gate.kubectl_fresh(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        kubegate_tests::tail(&gate.log(), 30)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn established(gate: &Kubegate) {
    serve_crd(gate, CRD, "crontabs.stable.example.com");
}

#[test]
fn custom_resources_are_served_like_kube() {
    let gate = Kubegate::start();
    established(&gate);
    let crd = gate.json(&["get", "crd", "crontabs.stable.example.com", "-o", "json"]);
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "CronTab");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    let conditions = crd["status"]["conditions"].to_string();
    assert!(
        conditions.contains("NamesAccepted") && conditions.contains("InitialNamesAccepted"),
        "{conditions}"
    );

    // Unknown fields: refused under Strict (kubectl's default), dropped with a warning under
    // Warn; defaults applied on the way in.
    let strict = gate.kubectl_stdin(&["create", "-f", "-"], Some(MY_CRONTAB));
    let strict_err = String::from_utf8_lossy(&strict.stderr);
    assert!(
        !strict.status.success()
            && strict_err.contains("strict decoding error: unknown field \"spec.unknownField\""),
        "{strict_err}"
    );
    let warned = gate.kubectl_stdin(&["apply", "--validate=warn", "-f", "-"], Some(MY_CRONTAB));
    assert!(
        String::from_utf8_lossy(&warned.stderr).contains("unknown field \"spec.unknownField\""),
        "{}",
        String::from_utf8_lossy(&warned.stderr)
    );
    let created = String::from_utf8_lossy(&warned.stdout).to_string();
    assert!(
        created.contains("crontab.stable.example.com/my created"),
        "{created}"
    );
    let my = gate.json(&["get", "crontab", "my", "-o", "json"]);
    assert_eq!(my["spec"]["replicas"], 1, "{my}");
    assert!(my["spec"].get("unknownField").is_none(), "{my}");
    assert_eq!(my["metadata"]["generation"], 1);

    // Printer columns, short name, category.
    let table = fresh_ok(&gate, &["get", "crontabs"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SPEC", "REPLICAS"], "{table}");
    let row = table.lines().nth(1).unwrap_or("");
    assert!(
        row.starts_with("my ") && row.contains("* * * * */5") && row.trim_end().ends_with(" 1"),
        "{table}"
    );
    assert!(fresh_ok(&gate, &["get", "ct", "-o", "name"]).contains("crontab.stable.example.com/my"));
    let all = fresh_ok(&gate, &["get", "all", "-o", "name"]);
    assert!(all.contains("crontab.stable.example.com/my"), "{all}");
    let resources = fresh_ok(&gate, &["api-resources", "--api-group=stable.example.com"]);
    assert!(
        resources.contains("crontabs") && resources.contains("ct") && resources.contains("CronTab"),
        "{resources}"
    );

    // Merge patch bumps the generation; a strategic merge patch is refused as kube does.
    gate.ok(&[
        "patch",
        "crontab",
        "my",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    let my = gate.json(&["get", "crontab", "my", "-o", "json"]);
    assert_eq!(my["spec"]["replicas"], 3);
    assert_eq!(my["metadata"]["generation"], 2);
    let smp = gate.fails(&["patch", "crontab", "my", "-p", r#"{"spec":{"replicas":4}}"#]);
    assert!(
        smp.contains("strategic merge patch")
            || smp.contains("UnsupportedMediaType")
            || smp.contains("unknown format"),
        "{smp}"
    );

    // Schema validation with kube's message, nothing stored.
    let invalid = gate.fails(&[
        "patch",
        "crontab",
        "my",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":-1}}"#,
    ]);
    assert!(invalid.contains("spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"), "{invalid}");
    let wrong = gate.kubectl_stdin(
        &["create", "-f", "-"],
        Some("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: wrong\nspec:\n  replicas: many\n"),
    );
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && stderr.contains("spec.replicas"),
        "{stderr}"
    );
    assert!(!gate.kubectl(&["get", "crontab", "wrong"]).status.success());

    // The status subresource: status only through it, spec never through it.
    gate.ok(&[
        "patch",
        "crontab",
        "my",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"replicas":7}}"#,
    ]);
    assert!(gate.json(&["get", "crontab", "my", "-o", "json"])["status"].is_null());
    gate.ok(&[
        "patch",
        "crontab",
        "my",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"replicas":7},"spec":{"replicas":0}}"#,
    ]);
    let my = gate.json(&["get", "crontab", "my", "-o", "json"]);
    assert_eq!(my["status"]["replicas"], 7);
    assert_eq!(my["spec"]["replicas"], 3);
    assert_eq!(
        my["metadata"]["generation"], 2,
        "status changes keep the generation"
    );

    // The scale subresource: an autoscaling/v1 Scale over spec.replicas / status.replicas.
    let scaled = gate.ok(&["scale", "crontab", "my", "--replicas", "5"]);
    assert!(
        scaled.contains("crontab.stable.example.com/my scaled"),
        "{scaled}"
    );
    let my = gate.json(&["get", "crontab", "my", "-o", "json"]);
    assert_eq!(my["spec"]["replicas"], 5);
    assert_eq!(my["metadata"]["generation"], 3, "a scale changes the spec");
    let scale: Value = serde_json::from_str(&gate.ok(&[
        "get",
        "--raw",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/my/scale",
    ]))
    .expect("Scale");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["replicas"], 7);
    let negative = gate.fails(&["scale", "crontab", "my", "--replicas", "-1"]);
    assert!(negative.contains("replicas"), "{negative}");
    let precondition = gate.fails(&[
        "scale",
        "crontab",
        "my",
        "--replicas",
        "6",
        "--current-replicas",
        "2",
    ]);
    assert!(
        precondition.contains("Expected replicas to be 2, was 5"),
        "{precondition}"
    );
    assert_eq!(
        gate.json(&["get", "crontab", "my", "-o", "json"])["spec"]["replicas"],
        5
    );

    // The other version reads the same object, with kube's deprecation warning.
    let deprecated = gate.kubectl(&["get", "crontabs.v1beta1.stable.example.com", "my"]);
    assert!(
        String::from_utf8_lossy(&deprecated.stderr).contains(
            "Warning: stable.example.com/v1beta1 CronTab is deprecated; use stable.example.com/v1 CronTab"
        ),
        "{}",
        String::from_utf8_lossy(&deprecated.stderr)
    );
    let beta = gate.json(&[
        "get",
        "crontabs.v1beta1.stable.example.com",
        "my",
        "-o",
        "json",
    ]);
    assert_eq!(beta["apiVersion"], "stable.example.com/v1beta1");
    assert_eq!(beta["spec"]["cronSpec"], "* * * * */5");

    // Watch sees changes.
    let watch = gate.stream(&["get", "crontabs", "-w", "-o", "name"]);
    gate.ok(&[
        "patch",
        "crontab",
        "my",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"image":"v2"}}"#,
    ]);
    assert!(watch
        .wait_for(Duration::from_secs(10), |l| l
            .contains("crontab.stable.example.com/my"))
        .is_some());

    // explain reads the CRD's schema.
    let explained = eventually(Duration::from_secs(10), || {
        String::from_utf8_lossy(&gate.kubectl_fresh(&["explain", "crontab.spec"]).stdout)
            .contains("cronSpec")
    });
    assert!(
        explained,
        "{}",
        String::from_utf8_lossy(&gate.kubectl_fresh(&["explain", "crontab.spec"]).stderr)
    );
    let spec = fresh_ok(&gate, &["explain", "crontab.spec.cronSpec"]);
    assert!(spec.contains("When to run, in cron format."), "{spec}");

    // An APIService for the group-version, as kube's crdregistration makes it.
    let apiservice = gate.json(&["get", "apiservice", "v1.stable.example.com", "-o", "json"]);
    assert_eq!(
        apiservice["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    assert_eq!(apiservice["spec"]["groupPriorityMinimum"], 1000);

    // Deleting the CRD deletes its instances, then the CRD; the group goes from discovery.
    gate.ok(&["create", "namespace", "other"]);
    gate.ok_stdin(
        &["apply", "--validate=false", "-n", "other", "-f", "-"],
        &MY_CRONTAB.replace("name: my", "name: theirs"),
    );
    gate.ok(&[
        "delete",
        "crd",
        "crontabs.stable.example.com",
        "--timeout=30s",
    ]);
    assert!(!gate
        .kubectl(&["get", "crd", "crontabs.stable.example.com"])
        .status
        .success());
    let gone = eventually(Duration::from_secs(10), || {
        !gate
            .kubectl_fresh(&["get", "crontabs", "-A"])
            .status
            .success()
    });
    assert!(gone, "crontabs still served after the CRD was deleted");
    assert!(!gate
        .kubectl(&["get", "apiservice", "v1.stable.example.com"])
        .status
        .success());
    // Re-created, it starts empty: the instances were deleted, not hidden.
    established(&gate);
    let listed = fresh_ok(&gate, &["get", "crontabs", "-A", "-o", "name"]);
    assert!(
        listed.trim().is_empty(),
        "instances survived their CRD: {listed}"
    );
}

#[test]
fn custom_resources_are_served_again_after_a_restart() {
    let mut gate = Kubegate::start();
    established(&gate);
    gate.ok_stdin(&["apply", "--validate=false", "-f", "-"], MY_CRONTAB);
    gate.restart();
    let out = fresh_ok(&gate, &["get", "crontab", "my", "-o", "json"]);
    let my: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(my["spec"]["image"], "my-awesome-cron-image");
}

#[test]
fn name_conflicts_and_defaults_on_read() {
    let gate = Kubegate::start();
    established(&gate);
    gate.ok_stdin(&["apply", "--validate=false", "-f", "-"], MY_CRONTAB);

    // A second CRD in the same group claiming the same kind (and list kind): NamesAccepted=False, not
    // Established, and the first keeps serving.
    let rival = CRD
        .replace(
            "name: crontabs.stable.example.com",
            "name: crontabs2.stable.example.com",
        )
        .replace("plural: crontabs", "plural: crontabs2")
        .replace("singular: crontab", "singular: crontab2")
        .replace("shortNames: [ct]", "shortNames: [ct2]");
    gate.ok_stdin(&["apply", "-f", "-"], &rival);
    let conflicted = eventually(Duration::from_secs(10), || {
        let crd = gate.json(&["get", "crd", "crontabs2.stable.example.com", "-o", "json"]);
        crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "NamesAccepted" && c["status"] == "False")
    });
    assert!(
        conflicted,
        "{}",
        gate.ok(&["get", "crd", "crontabs2.stable.example.com", "-o", "yaml"])
    );
    let crd = gate.json(&["get", "crd", "crontabs2.stable.example.com", "-o", "json"]);
    let names_accepted = crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "NamesAccepted")
        .cloned()
        .unwrap_or_default();
    // kube checks every name and reports the last conflict found: the list kind.
    assert_eq!(
        names_accepted["reason"], "ListKindConflict",
        "{names_accepted}"
    );
    assert_eq!(
        names_accepted["message"], "\"CronTabList\" is already in use",
        "{names_accepted}"
    );
    assert!(!gate.kubectl_fresh(&["get", "crontabs2"]).status.success());
    assert!(gate.kubectl_fresh(&["get", "crontabs"]).status.success());

    // A default added to the schema later shows on read of objects stored before it.
    let with_default = CRD.replace(
        "              image:\n                type: string\n",
        "              image:\n                type: string\n              timezone:\n                type: string\n                default: UTC\n",
    );
    assert_ne!(with_default, CRD);
    gate.ok_stdin(&["apply", "-f", "-"], &with_default);
    let defaulted = eventually(Duration::from_secs(10), || {
        gate.json(&["get", "crontab", "my", "-o", "json"])["spec"]["timezone"] == "UTC"
    });
    assert!(
        defaulted,
        "{}",
        gate.ok(&["get", "crontab", "my", "-o", "yaml"])
    );
}

#[test]
fn a_terminating_crds_objects_stay_served_so_their_finalizers_can_be_removed() {
    let gate = Kubegate::start();
    established(&gate);
    // An instance with a finalizer of its own holds the CRD's deletion.
    gate.ok_stdin(
        &["apply", "--validate=false", "-f", "-"],
        &MY_CRONTAB.replace(
            "  name: my\n",
            "  name: my\n  finalizers: [example.com/hold]\n",
        ),
    );
    // As in kube, a custom resource is never overwritten by an update that names no
    // resourceVersion.
    let (code, body) = gate.curl(
        "PUT",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/my",
        &["Content-Type: application/json"],
        Some(br#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"my"},"spec":{"cronSpec":"x"}}"#),
    );
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&body));
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(
        status["message"],
        r#"crontabs.stable.example.com "my" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
    );
    // The root metadata is decoded as ObjectMeta: a field it does not have is an unknown
    // field (an error under Strict) and is never stored.
    let path = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    let with_bogus_meta = br#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"meta","bogusmeta":1},"spec":{}}"#;
    let (code, body) = gate.curl(
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        &["Content-Type: application/json"],
        Some(with_bogus_meta),
    );
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(
        status["message"],
        r#"CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "metadata.bogusmeta""#
    );
    let (code, body) = gate.curl(
        "POST",
        path,
        &["Content-Type: application/json"],
        Some(with_bogus_meta),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let stored: Value = serde_json::from_slice(&body).expect("the object");
    assert!(stored["metadata"].get("bogusmeta").is_none(), "{stored}");
    // A selectable field filters lists (and watches) as kube's field selectors do.
    let selected = |selector: &str| {
        fresh_ok(
            &gate,
            &[
                "get",
                "crontabs",
                "--field-selector",
                selector,
                "-o",
                "name",
            ],
        )
    };
    assert_eq!(
        selected("spec.image=my-awesome-cron-image").trim(),
        "crontab.stable.example.com/my"
    );
    assert_eq!(
        selected("spec.image!=my-awesome-cron-image").trim(),
        "crontab.stable.example.com/meta"
    );
    assert_eq!(selected("spec.image=other").trim(), "");
    let out = gate.kubectl(&["get", "crontabs", "--field-selector", "spec.cronSpec=x"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("field label not supported: spec.cronSpec"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A body must name its kind, as kube's unstructured decoder requires.
    let (code, body) = gate.curl(
        "POST",
        "/apis/stable.example.com/v1/namespaces/default/crontabs",
        &["Content-Type: application/json"],
        Some(br#"{"metadata":{"name":"kindless"},"spec":{}}"#),
    );
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(
        status["message"],
        r#"the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{"metadata":{"name":"kindless"},"spec":{}}' ({"metadata":{"name":"kindless" ...)"#
    );
    gate.ok(&[
        "delete",
        "crd",
        "crontabs.stable.example.com",
        "--wait=false",
    ]);
    let terminating = eventually(Duration::from_secs(10), || {
        gate.ok(&[
            "get",
            "crd",
            "crontabs.stable.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Terminating\")].reason}",
        ]) == "InstanceDeletionInProgress"
    });
    assert!(
        terminating,
        "the CRD never reported its deletion in progress"
    );
    // Still served: the instance is read, listed and patched as kube serves it.
    let marked = fresh_ok(
        &gate,
        &[
            "get",
            "crontab",
            "my",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    );
    assert!(!marked.is_empty(), "the instance is not being deleted");
    // A new one is refused, with kube's words; discovery lists no create, patch or update.
    let out = gate.kubectl_stdin(
        &["create", "--validate=false", "-f", "-"],
        Some(&MY_CRONTAB.replace("name: my", "name: late")),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error from server (MethodNotAllowed)")
            && stderr
                .contains("create not allowed while custom resource definition is terminating"),
        "{stderr}"
    );
    let (code, body) = gate.curl("GET", "/apis/stable.example.com/v1", &[], None);
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&body).expect("a resource list");
    let crontabs = list["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "crontabs"))
        .expect("crontabs listed");
    assert_eq!(
        crontabs["verbs"],
        serde_json::json!(["delete", "deletecollection", "get", "list", "watch"])
    );
    // Its owner removes the finalizer: the instance goes, and then the CRD.
    gate.ok(&[
        "patch",
        "crontab",
        "my",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let gone = eventually(Duration::from_secs(15), || {
        !gate
            .kubectl(&["get", "crd", "crontabs.stable.example.com"])
            .status
            .success()
    });
    assert!(gone, "the CRD stayed after its last instance went");
}

#[test]
fn a_tightened_schema_does_not_hold_objects_with_old_values() {
    let gate = Kubegate::start();
    established(&gate);
    gate.ok_stdin(&["apply", "--validate=false", "-f", "-"], MY_CRONTAB);
    // The schema is tightened under an existing object: its image is now too long.
    gate.ok(&[
        "patch",
        "crd",
        "crontabs.stable.example.com",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/image/maxLength","value":3}]"#,
    ]);
    // Once the new schema is served, a new too-long value is refused with its message...
    let refused = eventually(Duration::from_secs(10), || {
        let out = gate.kubectl(&[
            "patch",
            "crontab",
            "my",
            "--type=merge",
            "-p",
            r#"{"spec":{"image":"still-too-long"}}"#,
        ]);
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("spec.image: Too long")
    });
    assert!(refused, "the tightened schema never applied");
    // ... while an update that leaves the old too-long image alone is accepted (validation
    // ratcheting, as kube's CRDValidationRatcheting), so the object can still be labelled or
    // have its finalizers removed.
    gate.ok(&["label", "crontab", "my", "tier=gold", "--overwrite"]);
    assert_eq!(
        gate.ok(&["get", "crontab", "my", "-o", "jsonpath={.spec.image}"]),
        "my-awesome-cron-image"
    );
}

/// kubectl's client-side apply and diff of a custom resource: kubectl reads the OpenAPI
/// document, finds no strategic merge patch on the resource's PATCH, and sends a merge patch,
/// as against kube.
#[test]
fn client_side_apply_and_diff_work_on_custom_resources() {
    let gate = Kubegate::start();
    established(&gate);
    let crontab = |image: &str| {
        format!(
            "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: applied\nspec:\n  cronSpec: \"* * * * */5\"\n  image: {image}\n"
        )
    };
    let created = gate.ok_stdin(&["apply", "-f", "-"], &crontab("one"));
    assert!(created.contains("cron"), "{created}");
    let changed = crontab("two");
    let diff = gate.kubectl_stdin(&["diff", "-f", "-"], Some(&changed));
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(
        diff.status.code(),
        Some(1),
        "kubectl diff: {}\n{shown}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(
        shown.contains("-  image: one") && shown.contains("+  image: two"),
        "{shown}"
    );
    let applied = gate.ok_stdin(&["apply", "-f", "-"], &changed);
    assert!(applied.contains("configured"), "{applied}");
    let object = gate.json(&["get", "crontab", "applied", "-o", "json"]);
    assert_eq!(object["spec"]["image"], "two", "{object}");
    let again = gate.ok_stdin(&["apply", "-f", "-"], &changed);
    assert!(again.contains("unchanged"), "{again}");
    let same = gate.kubectl_stdin(&["diff", "-f", "-"], Some(&changed));
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );
}

/// kube's storage decoder prunes a stored object with the schema of the version it was stored
/// as: a field a looser served version let in is not read back through any version.
#[test]
fn stored_objects_are_pruned_with_their_storage_versions_schema_on_read() {
    let gate = Kubegate::start();
    established(&gate);
    let loose = "apiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: loose\nspec:\n  cronSpec: \"* * * * *\"\n  extra: kept-by-v1beta1\n";
    gate.ok_stdin(&["apply", "--validate=false", "-f", "-"], loose);
    for version in ["v1", "v1beta1"] {
        let object = gate.json(&[
            "get",
            &format!("crontabs.{version}.stable.example.com"),
            "loose",
            "-o",
            "json",
        ]);
        assert_eq!(
            object["spec"]["cronSpec"], "* * * * *",
            "{version}: {object}"
        );
        assert!(object["spec"].get("extra").is_none(), "{version}: {object}");
    }
}

/// Creates a CRD, polls it on one connection until it is `Established`, and at once creates an
/// instance: prints the instance's status code for each of five CRDs.
const ESTABLISHED_RACE_PY: &str = r#"
import http.client, json, ssl, sys
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
def call(method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body else None,
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")
codes = []
for i in range(5):
    group = "race%d.example.com" % i
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets." + group},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}
    call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    for _ in range(2000):
        _, got = call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." + group)
        conditions = (got.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            break
    code, _ = call("POST", "/apis/%s/v1/namespaces/default/widgets" % group,
                   {"apiVersion": group + "/v1", "kind": "Widget", "metadata": {"name": "first"}})
    codes.append(code)
print(json.dumps(codes))
"#;

/// A CRD reported `Established` is served already: a client that waits for the condition
/// and creates an instance at once (as envtest and controller tests do) is not refused.
#[test]
fn a_crd_reported_established_is_already_served() {
    let gate = Kubegate::start();
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(ESTABLISHED_RACE_PY)
        .arg(gate.port.to_string())
        .arg(gate.data_dir.join("pki"))
        .output()
        .expect("python3");
    let codes: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(codes, serde_json::json!([201, 201, 201, 201, 201]));
}

/// A CRD in a protected group (`*.k8s.io`) reports its API review state in the
/// `KubernetesAPIApprovalPolicyConformant` condition, as kube's API approval controller does.
#[test]
fn protected_groups_report_their_api_approval() {
    let gate = Kubegate::start();
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.tools.k8s.io",
                     "annotations": {"api-approved.kubernetes.io": "unapproved, experimental"}},
        "spec": {"group": "tools.k8s.io", "scope": "Namespaced",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    gate.ok_stdin(&["create", "-f", "-"], &crd.to_string());
    let condition = || -> Value {
        let crd = gate.json(&["get", "crd", "gizmos.tools.k8s.io", "-o", "json"]);
        crd["status"]["conditions"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| c["type"] == "KubernetesAPIApprovalPolicyConformant")
                    .cloned()
            })
            .unwrap_or(Value::Null)
    };
    assert!(
        eventually(Duration::from_secs(10), || !condition().is_null()),
        "no approval condition"
    );
    let c = condition();
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(c["reason"], "UnapprovedAnnotation", "{c}");
    assert_eq!(
        c["message"], "not approved: \"unapproved, experimental\"",
        "{c}"
    );
}

/// Deleting a CRD leaves its objects' watches open until it is gone: a watcher sees each
/// instance deleted (one held by a finalizer too), as kube keeps a terminating CRD's storage.
#[test]
fn watches_of_a_deleted_crds_objects_see_them_go() {
    let gate = Kubegate::start();
    established(&gate);
    gate.ok_stdin(&["apply", "--validate=false", "-f", "-"], MY_CRONTAB);
    gate.ok_stdin(
        &["apply", "--validate=false", "-f", "-"],
        &MY_CRONTAB.replace(
            "  name: my\n",
            "  name: held\n  finalizers: [example.com/hold]\n",
        ),
    );
    let list = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    let (_, body) = gate.curl("GET", list, &[], None);
    let listed: Value = serde_json::from_slice(&body).expect("a list");
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let events = tempfile::NamedTempFile::new().expect("a file");
    let pki = gate.data_dir.join("pki");
    let mut watch = std::process::Command::new("curl")
        .args(["-sSN", "--max-time", "60", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .arg(format!("{}{list}?watch=1&resourceVersion={rv}", gate.url()))
        .stdout(events.reopen().expect("the file"))
        .spawn()
        .expect("curl");
    gate.ok(&[
        "delete",
        "crd",
        "crontabs.stable.example.com",
        "--wait=false",
    ]);
    // `my` goes; `held` waits for its finalizer, which is then removed.
    let terminating = eventually(Duration::from_secs(20), || {
        let (code, body) = gate.curl("GET", &format!("{list}/held"), &[], None);
        code == 200
            && serde_json::from_slice::<Value>(&body)
                .is_ok_and(|o| o["metadata"]["deletionTimestamp"].is_string())
    });
    assert!(terminating, "held was never marked for deletion");
    let (code, body) = gate.curl(
        "PATCH",
        &format!("{list}/held"),
        &["Content-Type: application/merge-patch+json"],
        Some(br#"{"metadata":{"finalizers":null}}"#),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let gone = eventually(Duration::from_secs(20), || {
        gate.curl(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com",
            &[],
            None,
        )
        .0 == 404
    });
    assert!(gone, "the CRD was never deleted");
    // The watch ends on its own once the CRD is gone (after its grace); it is stopped by its
    // pid otherwise.
    let ended = eventually(Duration::from_secs(10), || {
        matches!(watch.try_wait(), Ok(Some(_)))
    });
    if !ended {
        let _ = watch.kill();
    }
    let _ = watch.wait();
    let seen: Vec<(String, String)> = std::fs::read_to_string(events.path())
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|event| {
            (
                event["type"].as_str().unwrap_or("").to_string(),
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let has = |kind: &str, name: &str| seen.iter().any(|(k, n)| k == kind && n == name);
    assert!(has("DELETED", "my"), "{seen:?}");
    assert!(has("MODIFIED", "held"), "{seen:?}");
    assert!(has("DELETED", "held"), "{seen:?}");
    assert!(ended, "the watch did not end once the CRD was gone");
}

/// A custom resource's schema in OpenAPI v2 is what kube's `ToStructuralOpenAPIV2` leaves of
/// it (v3 keeps it whole): no `oneOf`, a nullable field untyped, nothing declared under
/// `x-kubernetes-preserve-unknown-fields`.
#[test]
fn openapi_v2_has_custom_schemas_as_kube_converts_them() {
    let gate = Kubegate::start();
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "blobs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "blobs", "singular": "blob", "kind": "Blob"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": {
                       "choice": {"type": "object", "oneOf": [{"required": ["a"]}],
                                  "properties": {"a": {"type": "string"}}},
                       "maybe": {"type": "string", "nullable": true},
                       "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                "properties": {"known": {"type": "string"}}}}}}}}}]}
    });
    serve_crd(&gate, &crd.to_string(), "blobs.example.com");
    let spec = || -> Value {
        let v2: Value =
            serde_json::from_str(&gate.ok(&["get", "--raw", "/openapi/v2"])).expect("openapi v2");
        v2["definitions"]
            .as_object()
            .and_then(|defs| {
                defs.values()
                    .find(|d| d["x-kubernetes-group-version-kind"][0]["kind"] == "Blob")
            })
            .map(|d| d["properties"]["spec"].clone())
            .unwrap_or(Value::Null)
    };
    assert!(
        eventually(Duration::from_secs(10), || !spec().is_null()),
        "no Blob definition in /openapi/v2"
    );
    let spec = spec();
    assert!(
        spec["properties"]["choice"].get("oneOf").is_none(),
        "{spec}"
    );
    assert_eq!(spec["properties"]["maybe"], serde_json::json!({}), "{spec}");
    assert_eq!(
        spec["properties"]["free"],
        serde_json::json!({"x-kubernetes-preserve-unknown-fields": true}),
        "{spec}"
    );
}

const SCALED_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: scs.sc.example.com
spec:
  group: sc.example.com
  names: {kind: Sc, plural: scs}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.sel}
"#;

/// The replicas a `scale` subresource reads are judged as apiextensions judges them
/// (`ValidateScaleSpec`, `ValidateScaleStatus`): an int32 that is not negative, a selector
/// that is a string, in the custom resource's words, whichever way they are written; a Scale
/// of an object without spec replicas is kube's 500; a body of another kind is invalid.
#[test]
fn scale_replicas_are_validated_as_apiextensions_validates_them() {
    let gate = Kubegate::start();
    serve_crd(&gate, SCALED_CRD, "scs.sc.example.com");
    let collection = "/apis/sc.example.com/v1/namespaces/default/scs";
    let send = |method: &str, path: &str, content_type: &str, body: &str| -> (u16, Value) {
        let header = format!("Content-Type: {content_type}");
        let (code, body) = gate.curl(method, path, &[header.as_str()], Some(body.as_bytes()));
        (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
    };
    let create = |body: &str| send("POST", collection, "application/json", body);

    let (code, status) = create(
        r#"{"apiVersion":"sc.example.com/v1","kind":"Sc","metadata":{"name":"neg"},"spec":{"replicas":-1}}"#,
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Sc.sc.example.com \"neg\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"
    );
    let (code, status) = create(
        r#"{"apiVersion":"sc.example.com/v1","kind":"Sc","metadata":{"name":"str"},"spec":{"replicas":"two"}}"#,
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Sc.sc.example.com \"str\" is invalid: .spec.replicas: Invalid value: 0: .spec.replicas accessor error: two is of the type string, expected int64"
    );
    // A body of another kind: apiextensions' ValidateTypeMeta, named by the kind it claims.
    let (code, status) = create(
        r#"{"apiVersion":"sc.example.com/v1","kind":"Gadget","metadata":{"name":"k"},"spec":{}}"#,
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Gadget.sc.example.com \"k\" is invalid: kind: Invalid value: \"Gadget\": must be Sc"
    );

    // No spec replicas yet: the object is fine, its Scale is kube's 500.
    let (code, _) = create(
        r#"{"apiVersion":"sc.example.com/v1","kind":"Sc","metadata":{"name":"s0"},"spec":{}}"#,
    );
    assert_eq!(code, 201);
    let (code, status) = send(
        "GET",
        &format!("{collection}/s0/scale"),
        "application/json",
        "",
    );
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "Internal error occurred: the spec replicas field \".spec.replicas\" does not exist"
    );
    // `kubectl scale` writes them, and the Scale reads.
    gate.ok(&["scale", "scs", "s0", "--replicas", "2"]);
    let (code, scale) = send(
        "GET",
        &format!("{collection}/s0/scale"),
        "application/json",
        "",
    );
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["replicas"], 0);

    // Through the object, the status and the Scale: out of range, negative, mistyped.
    let merge = "application/merge-patch+json";
    let (code, status) = send(
        "PATCH",
        &format!("{collection}/s0"),
        merge,
        r#"{"spec":{"replicas":3000000000}}"#,
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Sc.sc.example.com \"s0\" is invalid: .spec.replicas: Invalid value: 3000000000: should be less than or equal to 2147483647"
    );
    let (code, status) = send(
        "PATCH",
        &format!("{collection}/s0/status"),
        merge,
        r#"{"status":{"replicas":-4,"sel":5}}"#,
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Sc.sc.example.com \"s0\" is invalid: [.status.replicas: Invalid value: -4: should be a non-negative integer, .status.sel: Invalid value: \"\": .status.sel accessor error: 5 is of the type int64, expected string]"
    );
    let (code, status) = send(
        "PATCH",
        &format!("{collection}/s0/scale"),
        merge,
        r#"{"spec":{"replicas":-1}}"#,
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Sc.sc.example.com \"s0\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"
    );
    let (code, status) = send(
        "PATCH",
        &format!("{collection}/s0/scale"),
        merge,
        r#"{"spec":{"replicas":3000000000}}"#,
    );
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal number 3000000000 into Go struct field ScaleSpec.spec.replicas of type int32"
    );
    // Nothing of it was stored.
    let object = gate.json(&["get", "scs", "s0", "-o", "json"]);
    assert_eq!(object["spec"]["replicas"], 2, "{object}");
    assert!(object.get("status").is_none(), "{object}");
}

const GIZMO_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.mv.example.com}
spec:
  group: mv.example.com
  names: {kind: Gizmo, plural: gizmos}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {a: {type: string}, onlyv1: {type: string, default: d1}}}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {a: {type: string}, onlyv2: {type: string, default: d2}}}}}}
"#;

/// Reading through a version that is not the storage version is kube's versioning codec: the
/// stored object defaulted with the storage version's schema (defaults added to it later
/// included), then pruned with the read version's; the read version's own defaults never
/// appear, and what only the written version declares is not stored.
#[test]
fn other_versions_read_the_stored_versions_defaults_pruned_to_their_schema() {
    let gate = Kubegate::start();
    serve_crd(&gate, GIZMO_CRD, "gizmos.mv.example.com");
    gate.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion":"mv.example.com/v1","kind":"Gizmo","metadata":{"name":"g1","namespace":"default"},"spec":{"a":"x"}}"#,
    );
    gate.ok(&[
        "patch",
        "crd",
        "gizmos.mv.example.com",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/newf","value":{"type":"string","default":"NEW"}}]"#,
    ]);
    let read = |version: &str| {
        let path = format!("/apis/mv.example.com/{version}/namespaces/default/gizmos/g1");
        let spec = || gate.json(&["get", "--raw", &path])["spec"].clone();
        // The schema change reaches the served definitions asynchronously.
        eventually(Duration::from_secs(10), || {
            spec().get("newf").is_some() || version != "v1"
        });
        spec()
    };
    assert_eq!(
        read("v1"),
        serde_json::json!({"a": "x", "onlyv1": "d1", "newf": "NEW"})
    );
    assert_eq!(read("v2"), serde_json::json!({"a": "x"}));
    // A write through v2: defaulted in v2, stored as v1 (pruned with v1's schema), answered
    // as v2 reads what was stored.
    let current = gate.json(&[
        "get",
        "--raw",
        "/apis/mv.example.com/v2/namespaces/default/gizmos/g1",
    ]);
    let mut replaced = current.clone();
    replaced["spec"]["a"] = serde_json::json!("y");
    let answer = gate.ok_stdin(
        &[
            "replace",
            "--raw",
            "/apis/mv.example.com/v2/namespaces/default/gizmos/g1",
            "-f",
            "-",
        ],
        &replaced.to_string(),
    );
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["spec"], serde_json::json!({"a": "y"}));
    assert_eq!(
        read("v1"),
        serde_json::json!({"a": "y", "onlyv1": "d1", "newf": "NEW"})
    );
}

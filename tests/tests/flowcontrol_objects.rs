//! `flowcontrol.apiserver.k8s.io/v1` FlowSchemas and PriorityLevelConfigurations with the real
//! kubectl: discovery and `kubectl explain`, kube's printer columns, kube's defaults and
//! validation messages, generation and the `status` subresource, and kube-apiserver's APF
//! bootstrap configuration, reconciled at every start with the `apf.kubernetes.io/autoupdate-spec`
//! rules (suggested objects follow the annotation, mandatory ones are always restored), at
//! start and again while running, each write recorded under kube's field managers.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use kubegate_tests::{assert_owns, managed_entry, Kubegate};
use serde_json::Value;

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// A user FlowSchema relying on kube's defaults (matching precedence, queuing).
const MINE: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: mine
spec:
  priorityLevelConfiguration:
    name: mine
  distinguisherMethod:
    type: ByNamespace
  rules:
  - subjects:
    - kind: User
      user:
        name: alice
    resourceRules:
    - verbs: ["get", "list"]
      apiGroups: [""]
      resources: ["configmaps"]
      namespaces: ["team-a"]
"#;

const MINE_LEVEL: &str = r#"apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: mine
spec:
  type: Limited
  limited:
    limitResponse:
      type: Queue
      queuing: {}
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

/// The header cells and the row of `name` of a `kubectl get` table.
fn table_row(table: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let words = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    let header = words(table.lines().next().unwrap_or_default());
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} is not listed:\n{table}"));
    (header, words(row))
}

/// A row without its AGE cell (`age_at` is the AGE column's index).
fn without_age(row: &[String], age_at: usize) -> Vec<&str> {
    row.iter()
        .enumerate()
        .filter(|(i, _)| *i != age_at)
        .map(|(_, c)| c.as_str())
        .collect()
}

fn get_json(gate: &Kubegate, resource: &str, name: &str) -> Value {
    gate.json(&["get", resource, name, "-o", "json"])
}

#[test]
fn flowcontrol_objects_are_served_like_kube() {
    let gate = Kubegate::start();

    // Discovery: both resources, cluster-scoped, no short names.
    let resources = gate.ok(&["api-resources", "--api-group", GROUP, "--no-headers"]);
    let rows: Vec<Vec<&str>> = resources
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec![
                "flowschemas",
                "flowcontrol.apiserver.k8s.io/v1",
                "false",
                "FlowSchema"
            ],
            vec![
                "prioritylevelconfigurations",
                "flowcontrol.apiserver.k8s.io/v1",
                "false",
                "PriorityLevelConfiguration"
            ],
        ],
        "{resources}"
    );
    let explain = gate.ok(&["explain", "flowschema.spec"]);
    assert!(explain.contains("KIND:       FlowSchema"), "{explain}");
    assert!(
        explain.contains("matchingPrecedence\t<integer>"),
        "{explain}"
    );
    assert!(
        explain.contains(
            "priorityLevelConfiguration\t<PriorityLevelConfigurationReference> -required-"
        ),
        "{explain}"
    );

    // kube's printers, over the bootstrap objects.
    let levels = gate.ok(&["get", "prioritylevelconfigurations"]);
    let (header, exempt) = table_row(&levels, "exempt");
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ],
        "{levels}"
    );
    assert_eq!(
        without_age(&exempt, 6),
        ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]
    );
    let (_, catch_all) = table_row(&levels, "catch-all");
    assert_eq!(
        without_age(&catch_all, 6),
        ["catch-all", "Limited", "5", "<none>", "<none>", "<none>"]
    );
    let (_, workload_low) = table_row(&levels, "workload-low");
    assert_eq!(
        without_age(&workload_low, 6),
        ["workload-low", "Limited", "100", "128", "6", "50"]
    );
    assert_eq!(levels.lines().count(), 1 + 8, "{levels}");

    // MISSINGPL comes from the Dangling condition kubegate's APF controller writes.
    let settled = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        let schemas = gate.ok(&["get", "flowschemas"]);
        schemas
            .lines()
            .skip(1)
            .all(|l| l.trim_end().ends_with("False"))
    });
    assert!(settled, "{}", gate.ok(&["get", "flowschemas"]));
    let schemas = gate.ok(&["get", "flowschemas"]);
    let (header, exempt) = table_row(&schemas, "exempt");
    assert_eq!(
        header,
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ],
        "{schemas}"
    );
    assert_eq!(
        without_age(&exempt, 4),
        ["exempt", "exempt", "1", "<none>", "False"]
    );
    // As kube's printer: in the order they are matched, by precedence, then name.
    let order: Vec<&str> = schemas
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(order.first(), Some(&"exempt"), "{schemas}");
    assert_eq!(order.get(1), Some(&"probes"), "{schemas}");
    assert_eq!(order.last(), Some(&"catch-all"), "{schemas}");
    let precedences: Vec<i64> = schemas
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
        .collect();
    assert!(precedences.windows(2).all(|w| w[0] <= w[1]), "{schemas}");
    let (_, global) = table_row(&schemas, "global-default");
    assert_eq!(
        without_age(&global, 4),
        [
            "global-default",
            "global-default",
            "9900",
            "ByUser",
            "False"
        ]
    );
    assert_eq!(schemas.lines().count(), 1 + 13, "{schemas}");
    let probes = get_json(&gate, "flowschema", "probes");
    assert_eq!(
        probes["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );
    assert_eq!(
        probes["spec"]["rules"][0]["nonResourceRules"][0]["nonResourceURLs"],
        serde_json::json!(["/healthz", "/readyz", "/livez"])
    );

    // Invalid objects are refused with kube's messages and not stored.
    let bad = MINE
        .replace(
            "name: mine\nspec:",
            "name: bad\nspec:\n  matchingPrecedence: 10001",
        )
        .replace("type: ByNamespace", "type: ByTeam");
    let err = apply_fails(&gate, &bad);
    assert!(err.contains("The FlowSchema \"bad\" is invalid:"), "{err}");
    assert!(
        err.contains(
            "spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"
        ),
        "{err}"
    );
    assert!(
        err.contains("spec.distinguisherMethod.type: Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:\"ByTeam\"}: supported values: \"ByNamespace\", \"ByUser\""),
        "{err}"
    );
    let err = gate.fails(&["get", "flowschema", "bad"]);
    assert!(
        err.contains("flowschemas.flowcontrol.apiserver.k8s.io \"bad\" not found"),
        "{err}"
    );
    let entropy = MINE_LEVEL.replace("name: mine", "name: wide").replace(
        "queuing: {}",
        "queuing:\n        queues: 512\n        handSize: 8",
    );
    let err = apply_fails(&gate, &entropy);
    assert!(
        err.contains("spec.limited.limitResponse.queuing.handSize: Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 should not be greater than 60"),
        "{err}"
    );
    let err = gate.fails(&[
        "patch",
        "prioritylevelconfiguration",
        "catch-all",
        "--type=merge",
        "-p",
        r#"{"spec":{"limited":{"nominalConcurrencyShares":6}}}"#,
    ]);
    assert!(
        err.contains("spec of 'catch-all' must equal the fixed value"),
        "{err}"
    );
    let wrong_type = r#"{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"typed"},"spec":{"matchingPrecedence":"high"}}"#;
    let err = apply_fails(&gate, wrong_type);
    assert!(
        err.contains("json: cannot unmarshal string into Go struct field FlowSchemaSpec.spec.matchingPrecedence of type int32"),
        "{err}"
    );

    // A user priority level and flow schema, defaulted as kube's v1 defaults do.
    let created = gate.ok_stdin(&["apply", "-f", "-"], MINE_LEVEL);
    assert!(
        created.contains("prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/mine created"),
        "{created}"
    );
    let level = get_json(&gate, "prioritylevelconfiguration", "mine");
    assert_eq!(
        level["spec"]["limited"],
        serde_json::json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
            "limitResponse": {"type": "Queue",
                "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
    );
    let created = gate.ok_stdin(&["apply", "-f", "-"], MINE);
    assert!(
        created.contains("flowschema.flowcontrol.apiserver.k8s.io/mine created"),
        "{created}"
    );
    let mine = get_json(&gate, "flowschema", "mine");
    assert_eq!(mine["spec"]["matchingPrecedence"], 1000);
    assert_eq!(mine["metadata"]["generation"], 1);
    let found = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        let (_, row) = table_row(&gate.ok(&["get", "flowschema", "mine"]), "mine");
        without_age(&row, 4) == ["mine", "mine", "1000", "ByNamespace", "False"]
    });
    assert!(found, "{}", gate.ok(&["get", "flowschema", "mine"]));

    // Spec changes bump the generation; metadata changes do not.
    gate.ok(&[
        "patch",
        "flowschema",
        "mine",
        "--type=merge",
        "-p",
        r#"{"spec":{"matchingPrecedence":700}}"#,
    ]);
    gate.ok(&["label", "flowschema", "mine", "team=a"]);
    let mine = get_json(&gate, "flowschema", "mine");
    assert_eq!(mine["spec"]["matchingPrecedence"], 700);
    assert_eq!(mine["metadata"]["generation"], 2);

    // The status subresource writes status only; the main resource keeps status.
    gate.ok(&[
        "patch",
        "flowschema",
        "mine",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"spec":{"matchingPrecedence":800},"status":{"conditions":[{"type":"Dangling","status":"False","reason":"Found"}]}}"#,
    ]);
    gate.ok(&[
        "patch",
        "flowschema",
        "mine",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Dangling","status":"True"}]}}"#,
    ]);
    let mine = get_json(&gate, "flowschema", "mine");
    assert_eq!(mine["spec"]["matchingPrecedence"], 700);
    assert_eq!(mine["metadata"]["generation"], 2);
    assert_eq!(mine["status"]["conditions"][0]["status"], "False");
    let (_, row) = table_row(&gate.ok(&["get", "flowschema", "mine"]), "mine");
    assert_eq!(row.last().map(String::as_str), Some("False"), "{row:?}");
    let status = gate.json(&[
        "get",
        "--raw",
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/mine/status",
    ]);
    assert_eq!(status["kind"], "FlowSchema");
    assert_eq!(status["status"]["conditions"][0]["reason"], "Found");

    // Delete.
    let deleted = gate.ok(&["delete", "flowschema", "mine"]);
    assert!(
        deleted.contains("flowschema.flowcontrol.apiserver.k8s.io \"mine\" deleted"),
        "{deleted}"
    );
    let err = gate.fails(&["get", "flowschema", "mine"]);
    assert!(
        err.contains("flowschemas.flowcontrol.apiserver.k8s.io \"mine\" not found"),
        "{err}"
    );
}

#[test]
fn bootstrap_configuration_is_reconciled_at_start() {
    let mut gate = Kubegate::start();
    let annotation = "apf.kubernetes.io/autoupdate-spec";
    let shares = |gate: &Kubegate, name: &str| {
        get_json(gate, "prioritylevelconfiguration", name)["spec"]["limited"]
            ["nominalConcurrencyShares"]
            .clone()
    };

    // An operator takes workload-low over (autoupdate-spec "false") and edits global-default
    // while leaving it managed ("true").
    gate.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "workload-low",
        "--type=merge",
        "-p",
        r#"{"metadata":{"annotations":{"apf.kubernetes.io/autoupdate-spec":"false"}},"spec":{"limited":{"nominalConcurrencyShares":7}}}"#,
    ]);
    gate.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "global-default",
        "--type=merge",
        "-p",
        r#"{"spec":{"limited":{"nominalConcurrencyShares":21}}}"#,
    ]);
    // The exempt level's spec.exempt is the operator's to tune.
    gate.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "exempt",
        "--type=merge",
        "-p",
        r#"{"spec":{"exempt":{"nominalConcurrencyShares":10}}}"#,
    ]);
    // Mandatory objects deleted.
    gate.ok(&["delete", "flowschema", "catch-all"]);
    gate.ok(&["delete", "prioritylevelconfiguration", "catch-all"]);
    // A bootstrap object kube no longer ships (still marked auto-updated), and a user one.
    for (name, annotated) in [("retired", true), ("users-own", false)] {
        let annotations = if annotated {
            format!("  annotations:\n    {annotation}: \"true\"\n")
        } else {
            String::new()
        };
        let manifest = format!(
            "apiVersion: {GROUP}/v1\nkind: PriorityLevelConfiguration\nmetadata:\n  name: {name}\n{annotations}spec:\n  type: Limited\n  limited:\n    limitResponse:\n      type: Reject\n"
        );
        gate.ok_stdin(&["apply", "-f", "-"], &manifest);
    }
    assert_eq!(shares(&gate, "workload-low"), 7);
    assert_eq!(shares(&gate, "global-default"), 21);

    gate.restart();

    // "false" survives; "true" is restored; mandatory objects are back.
    let low = get_json(&gate, "prioritylevelconfiguration", "workload-low");
    assert_eq!(low["spec"]["limited"]["nominalConcurrencyShares"], 7);
    assert_eq!(low["metadata"]["annotations"][annotation], "false");
    let global = get_json(&gate, "prioritylevelconfiguration", "global-default");
    assert_eq!(global["spec"]["limited"]["nominalConcurrencyShares"], 20);
    assert_eq!(global["metadata"]["annotations"][annotation], "true");
    let exempt = get_json(&gate, "prioritylevelconfiguration", "exempt");
    assert_eq!(exempt["spec"]["exempt"]["nominalConcurrencyShares"], 10);
    let catch_all = get_json(&gate, "flowschema", "catch-all");
    assert_eq!(catch_all["spec"]["matchingPrecedence"], 10000);
    assert_eq!(catch_all["metadata"]["annotations"][annotation], "true");
    assert_eq!(shares(&gate, "catch-all"), 5);

    // The retired bootstrap object is gone; the user's own stays.
    let err = gate.fails(&["get", "prioritylevelconfiguration", "retired"]);
    assert!(
        err.contains(
            "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io \"retired\" not found"
        ),
        "{err}"
    );
    let own = get_json(&gate, "prioritylevelconfiguration", "users-own");
    assert!(
        own["metadata"]["annotations"].get(annotation).is_none(),
        "{own}"
    );
}

/// kube-apiserver ensures the bootstrap configuration again every minute, not only at start:
/// with the interval at one second, a deleted mandatory FlowSchema and an edited auto-updated
/// priority level come back while kubegate runs, and an operator's opt-out stays. The objects
/// carry kube's field managers: the ensurer's `Update` and the `Dangling` condition the
/// configuration controller applies.
#[test]
fn bootstrap_configuration_is_ensured_again_while_running() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "flowControl:\n  bootstrapResyncInterval: 1s\n",
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", &config.path().to_string_lossy()]);
    let managed = |resource: &str, name: &str| {
        gate.json(&["get", resource, name, "-o", "json", "--show-managed-fields"])
    };
    let shares = |name: &str| {
        get_json(&gate, "prioritylevelconfiguration", name)["spec"]["limited"]
            ["nominalConcurrencyShares"]
            .clone()
    };

    // As kube writes them: the ensurer creates every object, the controller applies the
    // Dangling condition (once the schema has been judged).
    let producer = "api-priority-and-fairness-config-producer-v1";
    let consumer = "api-priority-and-fairness-config-consumer-v1";
    let level = managed("prioritylevelconfiguration", "global-default");
    assert_owns(
        managed_entry(&level, producer, ""),
        "Update",
        "/f:spec/f:limited/f:nominalConcurrencyShares",
    );
    let judged = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        managed("flowschema", "catch-all")["metadata"]["managedFields"]
            .as_array()
            .is_some_and(|m| m.iter().any(|e| e["manager"] == consumer))
    });
    assert!(judged, "{}", managed("flowschema", "catch-all"));
    let schema = managed("flowschema", "catch-all");
    assert_owns(
        managed_entry(&schema, consumer, "status"),
        "Apply",
        "/f:status/f:conditions",
    );
    assert_eq!(managed_entry(&schema, producer, "")["operation"], "Update");
    // Resyncs of an object already as it should be write nothing.
    let untouched = get_json(&gate, "prioritylevelconfiguration", "exempt");

    // The opt-out first: every resync that restores the others comes after it.
    gate.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "workload-low",
        "--type=merge",
        "-p",
        r#"{"metadata":{"annotations":{"apf.kubernetes.io/autoupdate-spec":"false"}},"spec":{"limited":{"nominalConcurrencyShares":7}}}"#,
    ]);
    gate.ok(&["delete", "flowschema", "catch-all"]);
    gate.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "global-default",
        "--type=merge",
        "-p",
        r#"{"spec":{"limited":{"nominalConcurrencyShares":21}}}"#,
    ]);

    let restored = kubegate_tests::eventually(std::time::Duration::from_secs(15), || {
        shares("global-default") == 20
            && gate
                .kubectl(&["get", "flowschema", "catch-all", "-o", "name"])
                .status
                .success()
    });
    assert!(
        restored,
        "not restored: global-default {}, catch-all {}",
        shares("global-default"),
        gate.kubectl(&["get", "flowschema", "catch-all"]).status
    );
    let catch_all = get_json(&gate, "flowschema", "catch-all");
    assert_eq!(catch_all["spec"]["matchingPrecedence"], 10000);
    // The ensurer took the field the patch set back.
    let level = managed("prioritylevelconfiguration", "global-default");
    assert_owns(
        managed_entry(&level, producer, ""),
        "Update",
        "/f:spec/f:limited/f:nominalConcurrencyShares",
    );
    // The resyncs that restored them left the operator's level theirs, and the untouched
    // one as it was (same resourceVersion: not rewritten).
    let low = get_json(&gate, "prioritylevelconfiguration", "workload-low");
    assert_eq!(low["spec"]["limited"]["nominalConcurrencyShares"], 7);
    assert_eq!(
        low["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "false"
    );
    assert_eq!(
        get_json(&gate, "prioritylevelconfiguration", "exempt")["metadata"]["resourceVersion"],
        untouched["metadata"]["resourceVersion"]
    );
}

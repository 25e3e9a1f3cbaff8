//! Tests of the flow-control engine: classification against kube's bootstrap FlowSchemas,
//! shuffle sharding, fair queuing, rejections, borrowing, config updates and work estimates.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::{advance, sleep, Instant};

use super::borrowing::{compute_allocation, AllocItem};
use super::classify::{hash_flow_id, matches_flow_schema};
use super::shuffle::Dealer;
use super::*;
use crate::request_info::{resolve, RequestInfo};
use crate::user::UserInfo;

// ---------------------------------------------------------------------------------------
// Object builders

fn pl_queue(
    name: &str,
    shares: i64,
    queues: i64,
    hand: i64,
    qll: i64,
    lendable: Option<i64>,
) -> Value {
    let mut limited = json!({
        "nominalConcurrencyShares": shares,
        "limitResponse": {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": qll}}
    });
    if let Some(l) = lendable {
        limited["lendablePercent"] = json!(l);
    }
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "uid": format!("uid-pl-{name}")},
        "spec": {"type": "Limited", "limited": limited}})
}

fn pl_reject(name: &str, shares: i64) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-pl-{name}")},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": 0,
            "limitResponse": {"type": "Reject"}}}})
}

fn pl_exempt() -> Value {
    json!({"metadata": {"name": "exempt", "uid": "uid-pl-exempt"},
        "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}})
}

fn everything() -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    })
}

fn fs(
    name: &str,
    pl: &str,
    precedence: i64,
    distinguisher: Option<&str>,
    rules: Vec<Value>,
) -> Value {
    let mut spec = json!({"priorityLevelConfiguration": {"name": pl}, "matchingPrecedence": precedence, "rules": rules});
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    json!({"metadata": {"name": name, "uid": format!("uid-fs-{name}")}, "spec": spec})
}

fn rules(subjects: Value, body: Value) -> Value {
    let mut r = body;
    r["subjects"] = subjects;
    r
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn sa(namespace: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": name}})
}

/// kube's bootstrap configuration (mandatory and suggested objects).
fn bootstrap() -> (Vec<Value>, Vec<Value>) {
    let pls = vec![
        pl_exempt(),
        pl_reject("catch-all", 5),
        pl_queue("system", 30, 64, 6, 50, Some(33)),
        pl_queue("node-high", 40, 64, 6, 50, Some(25)),
        pl_queue("leader-election", 10, 16, 4, 50, Some(0)),
        pl_queue("workload-high", 40, 128, 6, 50, Some(50)),
        pl_queue("workload-low", 100, 128, 6, 50, Some(90)),
        pl_queue("global-default", 20, 128, 6, 50, Some(50)),
    ];
    let fss = vec![
        fs(
            "exempt",
            "exempt",
            1,
            None,
            vec![rules(json!([group("system:masters")]), everything())],
        ),
        fs(
            "probes",
            "exempt",
            2,
            None,
            vec![rules(
                json!([
                    group("system:unauthenticated"),
                    group("system:authenticated")
                ]),
                json!({"nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}),
            )],
        ),
        fs(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            vec![rules(
                json!([
                    user("system:kube-controller-manager"),
                    user("system:kube-scheduler"),
                    sa("kube-system", "*")
                ]),
                json!({"resourceRules": [{"verbs": ["get", "create", "update"], "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"], "namespaces": ["*"]}]}),
            )],
        ),
        fs(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            vec![rules(
                json!([group("system:nodes")]),
                json!({"resourceRules": [
                    {"verbs": ["*"], "apiGroups": [""], "resources": ["nodes", "nodes/status"], "clusterScope": true, "namespaces": ["*"]},
                    {"verbs": ["*"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "namespaces": ["*"]}
                ]}),
            )],
        ),
        fs(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            vec![rules(json!([group("system:nodes")]), everything())],
        ),
        fs(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            vec![rules(
                json!([user("system:kube-controller-manager")]),
                everything(),
            )],
        ),
        fs(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            vec![rules(json!([sa("kube-system", "*")]), everything())],
        ),
        fs(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            vec![rules(
                json!([group("system:serviceaccounts")]),
                everything(),
            )],
        ),
        fs(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            vec![rules(
                json!([
                    group("system:unauthenticated"),
                    group("system:authenticated")
                ]),
                everything(),
            )],
        ),
        fs(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            vec![rules(
                json!([
                    group("system:unauthenticated"),
                    group("system:authenticated")
                ]),
                everything(),
            )],
        ),
    ];
    (fss, pls)
}

fn info(method: &str, path: &str, query: &str) -> Arc<RequestInfo> {
    match resolve(method, path, query) {
        Ok(info) => Arc::new(info),
        Err(e) => panic!("resolve {method} {path}: {e}"),
    }
}

fn who(name: &str, groups: &[&str]) -> Arc<UserInfo> {
    Arc::new(UserInfo::new(
        name,
        groups.iter().map(|g| g.to_string()).collect(),
    ))
}

fn digest<'a>(info: &'a Arc<RequestInfo>, user: &'a Arc<UserInfo>) -> RequestDigest<'a> {
    RequestDigest {
        request_info: info,
        user,
        timeout: None,
        memo: None,
    }
}

fn level<'a>(snapshot: &'a [PriorityLevelSnapshot], name: &str) -> &'a PriorityLevelSnapshot {
    match snapshot.iter().find(|l| l.name == name) {
        Some(l) => l,
        None => panic!("no level {name} in {snapshot:?}"),
    }
}

fn options(total_seats: usize) -> FlowControlOptions {
    FlowControlOptions {
        total_seats,
        request_wait_limit: Duration::from_secs(15),
    }
}

// ---------------------------------------------------------------------------------------
// Classification

#[test]
fn classification_against_bootstrap_flow_schemas() {
    let fc = FlowControl::new(FlowControlOptions::default());
    let (fss, pls) = bootstrap();
    let report = fc.update_config(&fss, &pls);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert!(report.flow_schemas.iter().all(|s| !s.dangling));

    let auth = "system:authenticated";
    // (method, path, query, user, flow schema, distinguisher)
    type Case<'a> = (&'a str, &'a str, &'a str, Arc<UserInfo>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        // (method, path, query, user, flow schema, distinguisher)
        (
            "GET",
            "/api/v1/pods",
            "",
            who("admin", &["system:masters", auth]),
            "exempt",
            "",
        ),
        (
            "GET",
            "/healthz",
            "",
            UserInfo::shared_anonymous(),
            "probes",
            "",
        ),
        ("GET", "/livez", "", who("bob", &[auth]), "probes", ""),
        (
            "POST",
            "/healthz",
            "",
            who("bob", &[auth]),
            "global-default",
            "bob",
        ),
        (
            "PUT",
            "/api/v1/nodes/n1/status",
            "",
            who("system:node:n1", &["system:nodes", auth]),
            "system-node-high",
            "system:node:n1",
        ),
        (
            "GET",
            "/api/v1/nodes/n1",
            "",
            who("system:node:n1", &["system:nodes", auth]),
            "system-node-high",
            "system:node:n1",
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            "",
            who("system:node:n1", &["system:nodes", auth]),
            "system-node-high",
            "system:node:n1",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p",
            "",
            who("system:node:n1", &["system:nodes", auth]),
            "system-nodes",
            "system:node:n1",
        ),
        (
            "GET",
            "/api/v1/nodes/n1/proxy",
            "",
            who("system:node:n1", &["system:nodes", auth]),
            "system-nodes",
            "system:node:n1",
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm",
            "",
            who("system:kube-controller-manager", &[auth]),
            "system-leader-election",
            "system:kube-controller-manager",
        ),
        (
            "DELETE",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm",
            "",
            who("system:kube-controller-manager", &[auth]),
            "kube-controller-manager",
            "kube-system",
        ),
        (
            "GET",
            "/apis/apps/v1/namespaces/web/deployments",
            "",
            who("system:kube-controller-manager", &[auth]),
            "kube-controller-manager",
            "web",
        ),
        (
            "GET",
            "/apis/apps/v1/deployments",
            "",
            who("system:kube-controller-manager", &[auth]),
            "kube-controller-manager",
            "",
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x",
            "",
            who(
                "system:serviceaccount:kube-system:foo",
                &["system:serviceaccounts", auth],
            ),
            "system-leader-election",
            "system:serviceaccount:kube-system:foo",
        ),
        (
            "GET",
            "/api/v1/namespaces/a/pods",
            "",
            who(
                "system:serviceaccount:kube-system:foo",
                &["system:serviceaccounts", auth],
            ),
            "kube-system-service-accounts",
            "a",
        ),
        (
            "GET",
            "/api/v1/namespaces/a/pods",
            "",
            who(
                "system:serviceaccount:kube-systemx:foo",
                &["system:serviceaccounts", auth],
            ),
            "service-accounts",
            "system:serviceaccount:kube-systemx:foo",
        ),
        (
            "GET",
            "/api/v1/namespaces/a/pods",
            "",
            who(
                "system:serviceaccount:app:foo",
                &["system:serviceaccounts", auth],
            ),
            "service-accounts",
            "system:serviceaccount:app:foo",
        ),
        (
            "GET",
            "/api",
            "",
            UserInfo::shared_anonymous(),
            "global-default",
            "system:anonymous",
        ),
        (
            "LIST",
            "/apis/apps/v1/namespaces/x/deployments",
            "",
            who("alice", &[auth]),
            "global-default",
            "alice",
        ),
        // No group a schema names: kube falls back to catch-all.
        // catch-all rejects rather than queues, so it has no flow distinguisher.
        (
            "GET",
            "/api/v1/pods",
            "",
            who("stranger", &[]),
            "catch-all",
            "",
        ),
    ];
    // Every case is classified without a memo, then with a memo of its own (computed, then
    // remembered), then with one memo all cases share (users switch between cases), twice.
    let shared = ClassificationMemo::default();
    for pass in 0..2 {
        for (method, path, query, u, want_fs, want_dist) in &cases {
            let ri = info(method, path, query);
            let own = ClassificationMemo::default();
            let memos = [None, Some(&own), Some(&own), Some(&shared)];
            let mut flow_hash = None;
            for (round, memo) in memos.into_iter().enumerate() {
                let c = fc.classify(&RequestDigest {
                    memo,
                    ..digest(&ri, u)
                });
                let what = format!("{method} {path} as {}, pass {pass} round {round}", u.name);
                assert_eq!(c.matched.flow_schema, *want_fs, "{what}");
                assert_eq!(c.matched.flow_schema_uid, format!("uid-fs-{want_fs}"));
                assert_eq!(c.details.flow_distinguisher(), *want_dist, "{what}");
                // The flow (and so the hand dealt) is the same whether remembered or not.
                assert_eq!(*flow_hash.get_or_insert(c.hash), c.hash, "{what}");
            }
        }
    }
    let ri = info("GET", "/api/v1/pods", "");
    let c = fc.classify(&digest(&ri, &who("admin", &["system:masters"])));
    assert!(c.exempt);
    assert_eq!(c.matched.priority_level, "exempt");
    assert_eq!(c.matched.priority_level_uid, "uid-pl-exempt");
}

#[test]
fn a_connection_memo_follows_configuration_changes() {
    let fc = FlowControl::new(FlowControlOptions::default());
    let (fss, pls) = bootstrap();
    fc.update_config(&fss, &pls);
    let memo = ClassificationMemo::default();
    let ri = info("GET", "/api/v1/namespaces/ns1/configmaps", "");
    let bob = who("bob", &["system:authenticated"]);
    let classify = |fc: &FlowControl| {
        fc.classify(&RequestDigest {
            memo: Some(&memo),
            ..digest(&ri, &bob)
        })
        .matched
        .flow_schema
        .to_string()
    };
    assert_eq!(classify(&fc), "global-default");
    assert_eq!(classify(&fc), "global-default");
    // A schema for bob alone, ahead of global-default: the remembered subjects are stale.
    let mut with_bob = fss.clone();
    with_bob.push(fs(
        "bob-first",
        "workload-low",
        500,
        Some("ByUser"),
        vec![rules(json!([user("bob")]), everything())],
    ));
    fc.update_config(&with_bob, &pls);
    assert_eq!(classify(&fc), "bob-first");
    fc.update_config(&fss, &pls);
    assert_eq!(classify(&fc), "global-default");
    // Two engines never mistake each other's configurations for their own.
    let other = FlowControl::new(FlowControlOptions::default());
    other.update_config(&with_bob, &pls);
    assert_eq!(classify(&other), "bob-first");
    assert_eq!(classify(&fc), "global-default");

    // Flows told apart by namespace are hashed per request; by user, per user. One memo, the
    // same answers as without it.
    let kcm = who("system:kube-controller-manager", &["system:authenticated"]);
    let requests = [
        (&kcm, "/api/v1/namespaces/a/configmaps"),
        (&kcm, "/api/v1/namespaces/b/configmaps"),
        (&kcm, "/api/v1/namespaces/a/configmaps"),
        (&bob, "/api/v1/namespaces/a/configmaps"),
        (&bob, "/api/v1/namespaces/b/configmaps"),
    ];
    let shared = ClassificationMemo::default();
    let mut hashes = Vec::new();
    for (user, path) in requests {
        let ri = info("GET", path, "");
        let plain = fc.classify(&digest(&ri, user));
        let remembered = fc.classify(&RequestDigest {
            memo: Some(&shared),
            ..digest(&ri, user)
        });
        assert_eq!(plain.matched.flow_schema, remembered.matched.flow_schema);
        assert_eq!(plain.hash, remembered.hash, "{} {path}", user.name);
        hashes.push(remembered.hash);
    }
    assert_ne!(hashes[0], hashes[1], "namespaces a and b are two flows");
    assert_eq!(hashes[0], hashes[2]);
    assert_eq!(hashes[3], hashes[4], "bob is one flow in any namespace");
}

#[test]
fn resource_rule_details_match_as_kube() {
    let schema = |rule: Value| {
        config::parse_flow_schema(&fs(
            "s",
            "p",
            10,
            None,
            vec![rules(json!([group("*")]), json!({"resourceRules": [rule]}))],
        ))
        .unwrap_or_else(|e| panic!("{e:?}"))
    };
    let u = who("u", &["g"]);
    let check = |rule: Value, method: &str, path: &str, want: bool| {
        let ri = info(method, path, "");
        assert_eq!(
            matches_flow_schema(&digest(&ri, &u), &schema(rule.clone())),
            want,
            "{rule} vs {method} {path}"
        );
    };
    // A cluster-scope-only rule as Go stores it: `namespaces` is written `null` (no
    // `omitempty`), and matches cluster-scoped requests only.
    let nodes = json!({"verbs": ["list"], "apiGroups": [""], "resources": ["nodes"], "clusterScope": true, "namespaces": null});
    check(nodes.clone(), "GET", "/api/v1/nodes", true);
    check(nodes, "GET", "/api/v1/namespaces/a/nodes", false);
    let pods_status = json!({"verbs": ["update"], "apiGroups": [""], "resources": ["pods/status"], "namespaces": ["*"]});
    check(
        pods_status.clone(),
        "PUT",
        "/api/v1/namespaces/a/pods/p/status",
        true,
    );
    check(
        pods_status.clone(),
        "PUT",
        "/api/v1/namespaces/a/pods/p",
        false,
    );
    check(
        pods_status,
        "PATCH",
        "/api/v1/namespaces/a/pods/p/status",
        false,
    );
    let pods = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["pods"], "namespaces": ["a", "b"]});
    check(pods.clone(), "GET", "/api/v1/namespaces/b/pods", true);
    check(pods.clone(), "GET", "/api/v1/namespaces/c/pods", false);
    // Cluster-wide requests need clusterScope.
    check(pods.clone(), "GET", "/api/v1/pods", false);
    let pods_cluster =
        json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "clusterScope": true});
    check(pods_cluster.clone(), "GET", "/api/v1/pods", true);
    check(pods_cluster, "GET", "/api/v1/namespaces/a/pods", false);
    // A wildcard only counts alone, as kube's containsString.
    let mixed =
        json!({"verbs": ["*", "get"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]});
    check(mixed.clone(), "GET", "/api/v1/namespaces/a/pods/p", true);
    check(mixed, "GET", "/api/v1/namespaces/a/pods", false);
    let group_rule =
        json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*"], "namespaces": ["*"]});
    check(
        group_rule.clone(),
        "GET",
        "/apis/apps/v1/namespaces/a/deployments",
        true,
    );
    check(group_rule, "GET", "/api/v1/namespaces/a/pods", false);
}

#[test]
fn non_resource_urls_and_subjects_match_as_kube() {
    let u = who("carol", &["devs"]);
    let check =
        |subject: Value, urls: Value, path: &str, want: bool| {
            let s = config::parse_flow_schema(&fs("s", "p", 10, None, vec![rules(
            json!([subject.clone()]),
            json!({"nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": urls.clone()}]}),
        )]))
        .unwrap_or_else(|e| panic!("{e:?}"));
            let ri = info("GET", path, "");
            assert_eq!(
                matches_flow_schema(&digest(&ri, &u), &s),
                want,
                "{subject} {urls} vs {path}"
            );
        };
    check(user("carol"), json!(["/metrics"]), "/metrics", true);
    check(
        user("carol"),
        json!(["/metrics"]),
        "/metrics/cadvisor",
        true,
    );
    check(user("carol"), json!(["/metrics"]), "/metricsx", false);
    check(user("carol"), json!(["/logs/*"]), "/logs/a/b", true);
    check(user("carol"), json!(["/logs/*"]), "/logs", false);
    check(user("carol"), json!(["/openapi*"]), "/openapi/v2", true);
    check(user("carol"), json!(["*"]), "/anything", true);
    check(user("*"), json!(["/version"]), "/version", true);
    check(user("dave"), json!(["/version"]), "/version", false);
    check(group("devs"), json!(["/version"]), "/version", true);
    check(group("ops"), json!(["/version"]), "/version", false);
    check(group("*"), json!(["/version"]), "/version", true);
    check(
        json!({"kind": "User"}),
        json!(["/version"]),
        "/version",
        false,
    );
    check(sa("ns", "*"), json!(["/version"]), "/version", false);
}

#[test]
fn dangling_schemas_fall_through_and_are_reported() {
    let fc = FlowControl::new(options(100));
    let fss = vec![
        fs(
            "first",
            "missing",
            5,
            None,
            vec![rules(json!([group("*")]), everything())],
        ),
        fs(
            "second",
            "real",
            6,
            None,
            vec![rules(json!([group("*")]), everything())],
        ),
    ];
    let pls = vec![pl_queue("real", 10, 4, 2, 10, None)];
    let report = fc.update_config(&fss, &pls);
    let first = &report.flow_schemas[0];
    assert!(first.dangling);
    assert_eq!(first.condition.type_, "Dangling");
    assert_eq!(first.condition.status, "True");
    assert_eq!(first.condition.reason, "NotFound");
    assert_eq!(
        first.condition.message,
        "This FlowSchema references the PriorityLevelConfiguration object named \"missing\" but there is no such object"
    );
    let second = &report.flow_schemas[1];
    assert!(!second.dangling);
    assert_eq!(
        (second.condition.status, second.condition.reason),
        ("False", "Found")
    );
    assert!(!second.condition.is_current_in(&fss[1]));
    let with_status = json!({"status": {"conditions": [{"type": "Dangling", "status": "False", "reason": "Found",
        "message": second.condition.message}]}});
    assert!(second.condition.is_current_in(&with_status));

    let ri = info("GET", "/api/v1/pods", "");
    let u = who("x", &["system:authenticated"]);
    assert_eq!(fc.classify(&digest(&ri, &u)).matched.flow_schema, "second");
    // Mandatory objects are supplied around the configured ones, in matching order.
    assert_eq!(
        fc.flow_schema_order(),
        vec!["exempt", "second", "catch-all"]
    );
}

#[test]
fn bad_objects_are_skipped_with_reasons_and_never_panic() {
    let fc = FlowControl::new(options(100));
    let pls = vec![
        Value::Null,
        json!({"metadata": {"name": "nameless-spec"}}),
        json!({"metadata": {"name": "x"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue",
            "queuing": {"queues": 2, "handSize": 5}}}}}),
        json!({"metadata": {"name": "y"}, "spec": {"type": "Exempt", "exempt": {}}}),
        json!({"metadata": {"name": "z"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": "many",
            "limitResponse": {"type": "Reject"}}}}),
        json!({"metadata": {"name": "w"}, "spec": {"type": "Limited", "limited": {"lendablePercent": 101,
            "limitResponse": {"type": "Reject"}}}}),
        json!({"metadata": {"name": "ok"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue"}}}}),
        json!({"metadata": {"name": "ok"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}}),
    ];
    let fss = vec![
        json!(42),
        json!({"metadata": {"name": "d"}, "spec": {"priorityLevelConfiguration": {"name": "ok"},
            "distinguisherMethod": {"type": "ByPhase"}}}),
        json!({"metadata": {"name": "e"}, "spec": {}}),
        json!({"metadata": {"name": "fine"}, "spec": {"priorityLevelConfiguration": {"name": "ok"}}}),
    ];
    let report = fc.update_config(&fss, &pls);
    let skipped: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|s| (s.kind, s.name.as_str()))
        .collect();
    for want in [
        ("PriorityLevelConfiguration", ""),
        ("PriorityLevelConfiguration", "nameless-spec"),
        ("PriorityLevelConfiguration", "x"),
        ("PriorityLevelConfiguration", "y"),
        ("PriorityLevelConfiguration", "z"),
        ("PriorityLevelConfiguration", "w"),
        ("PriorityLevelConfiguration", "ok"),
        ("FlowSchema", ""),
        ("FlowSchema", "d"),
        ("FlowSchema", "e"),
    ] {
        assert!(skipped.contains(&want), "{want:?} not in {skipped:?}");
    }
    assert!(report.skipped.iter().all(|s| !s.reason.is_empty()));
    // The defaults were applied to the usable one: 64 queues, hand 8, 50 long, 30 shares.
    let snap = fc.snapshot();
    let ok = level(&snap, "ok");
    assert_eq!(
        ok.behavior,
        LevelBehavior::Queue(config::Queuing {
            queues: 64,
            hand_size: 8,
            queue_length_limit: 50
        })
    );
    assert_eq!(report.flow_schemas.len(), 1);
    assert!(!report.flow_schemas[0].dangling);
    // 30 shares against the imagined catch-all's 5 (exempt has 0).
    assert_eq!(ok.nominal_limit, (100.0f64 * 30.0 / 35.0).ceil() as usize);
}

#[test]
fn before_any_config_only_mandatory_levels_exist() {
    let fc = FlowControl::new(options(600));
    let snap = fc.snapshot();
    assert_eq!(snap.len(), 2);
    assert_eq!(level(&snap, "catch-all").nominal_limit, 600);
    assert_eq!(level(&snap, "catch-all").behavior, LevelBehavior::Reject);
    assert_eq!(level(&snap, "exempt").nominal_limit, 0);
    let ri = info("GET", "/api/v1/pods", "");
    assert_eq!(
        fc.classify(&digest(&ri, &who("a", &["system:authenticated"])))
            .matched
            .flow_schema,
        "catch-all"
    );
    assert_eq!(
        fc.classify(&digest(&ri, &who("a", &["system:masters"])))
            .matched
            .flow_schema,
        "exempt"
    );
}

// ---------------------------------------------------------------------------------------
// Shuffle sharding

#[test]
fn shuffle_sharding_is_deterministic_and_deals_distinct_cards() {
    let dealer = Dealer::new(64, 6).unwrap_or_else(|e| panic!("{e}"));
    let mut hands = std::collections::HashSet::new();
    for i in 0..500u64 {
        let hash = hash_flow_id("global-default", &format!("user-{i}"));
        let hand = dealer.deal(hash);
        assert_eq!(hand, dealer.deal(hash));
        assert_eq!(hand.len(), 6);
        let mut sorted = hand.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 6, "{hand:?}");
        assert!(hand.iter().all(|&c| c < 64));
        hands.insert(hand);
    }
    assert!(
        hands.len() > 490,
        "hands should rarely repeat: {}",
        hands.len()
    );
    assert_eq!(hash_flow_id("a", "b"), hash_flow_id("a", "b"));
    assert_ne!(hash_flow_id("ab", ""), hash_flow_id("a", "b"));
    // kube's dealer on a known value: 2-card hands from 4 cards, hash 5 = digits (1, 1).
    assert_eq!(Dealer::new(4, 2).map(|d| d.deal(5)), Ok(vec![1, 2]));
    assert!(Dealer::new(4, 5).is_err());
    assert!(Dealer::new(0, 1).is_err());
    assert!(Dealer::new(1 << 20, 4).is_err());
}

#[test]
fn shuffle_sharding_spreads_hands_evenly_over_the_deck() {
    // Every queue should be dealt into about the same share of hands: over 20,000 flows with
    // 6-card hands from 64 queues, each queue is in ~1,875 hands.
    let dealer = Dealer::new(64, 6).unwrap_or_else(|e| panic!("{e}"));
    let mut dealt = [0u32; 64];
    let flows = 20_000u32;
    for i in 0..flows {
        for card in dealer.deal(hash_flow_id("workload-low", &format!("ns-{i}"))) {
            dealt[card] += 1;
        }
    }
    let mean = f64::from(flows * 6) / 64.0;
    for (queue, &n) in dealt.iter().enumerate() {
        let deviation = (f64::from(n) - mean).abs() / mean;
        assert!(
            deviation < 0.1,
            "queue {queue} is in {n} hands, {:.0}% off the mean {mean:.0}",
            deviation * 100.0
        );
    }
    // The first card of a hand (the one a light flow usually lands in) is spread too.
    let mut first = [0u32; 64];
    for i in 0..flows {
        first[dealer.deal(hash_flow_id("workload-low", &format!("u-{i}")))[0]] += 1;
    }
    let mean = f64::from(flows) / 64.0;
    assert!(
        first
            .iter()
            .all(|&n| (f64::from(n) - mean).abs() / mean < 0.25),
        "{first:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Dispatch

/// One queuing level `work` (plus a Reject catch-all with 1 share) in a server of `seats`.
fn single_level(seats: usize, shares: i64, queues: i64, hand: i64, qll: i64) -> FlowControl {
    let fc = FlowControl::new(FlowControlOptions {
        total_seats: seats,
        request_wait_limit: Duration::from_secs(60),
    });
    let fss = vec![fs(
        "work",
        "work",
        100,
        Some("ByUser"),
        vec![rules(json!([group("*")]), everything())],
    )];
    let pls = vec![
        pl_exempt(),
        pl_reject("catch-all", 1),
        pl_queue("work", shares, queues, hand, qll, Some(0)),
    ];
    let report = fc.update_config(&fss, &pls);
    assert!(report.skipped.is_empty());
    fc
}

async fn admit_as(
    fc: &FlowControl,
    name: &str,
    estimate: WorkEstimate,
) -> Result<Admission, Rejection> {
    let ri = info("GET", "/api/v1/namespaces/a/pods", "");
    let u = who(name, &["system:authenticated"]);
    fc.admit(&digest(&ri, &u), estimate).await
}

#[tokio::test(start_paused = true)]
async fn fair_queuing_shares_seats_between_a_heavy_and_a_light_flow() {
    // `work` gets ceil(2 * 99/100) = 2 seats. Hand size 1 gives each flow exactly one queue
    // (with larger hands kube lets a heavy flow spread over up to handSize queues).
    let fc = single_level(2, 99, 64, 1, 50);
    assert_eq!(level(&fc.snapshot(), "work").current_limit, 2);
    let served: Arc<std::sync::Mutex<HashMap<&'static str, Vec<Instant>>>> = Default::default();
    let start = Instant::now();
    let mut tasks = Vec::new();
    // "heavy" keeps 20 requests outstanding, "light" 2; each holds its seat for 1 s.
    for (name, outstanding) in [("heavy", 20), ("light", 2)] {
        for _ in 0..outstanding {
            let fc = fc.clone();
            let served = served.clone();
            tasks.push(tokio::spawn(async move {
                while Instant::now() < start + Duration::from_secs(200) {
                    match admit_as(&fc, name, WorkEstimate::seats(1)).await {
                        Ok(admission) => {
                            sleep(Duration::from_secs(1)).await;
                            drop(admission);
                            served
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .entry(name)
                                .or_default()
                                .push(Instant::now());
                        }
                        Err(rejection) => panic!("unexpected rejection {rejection:?}"),
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let served = served.lock().unwrap_or_else(|e| e.into_inner());
    // Count seat-seconds completed in a window where both flows are backlogged.
    let window = |name: &str| {
        served[name]
            .iter()
            .filter(|t| {
                **t > start + Duration::from_secs(20) && **t <= start + Duration::from_secs(180)
            })
            .count() as f64
    };
    let (heavy, light) = (window("heavy"), window("light"));
    assert!(
        heavy + light >= 300.0,
        "the 2 seats should be busy: {heavy} + {light}"
    );
    let ratio = heavy / light;
    assert!(
        (0.8..=1.25).contains(&ratio),
        "heavy {heavy} vs light {light}"
    );
    let snap = fc.snapshot();
    assert_eq!(level(&snap, "work").seats_in_use, 0);
    assert_eq!(level(&snap, "work").waiting_requests, 0);
}

#[tokio::test(start_paused = true)]
async fn full_queue_rejects_and_waiters_time_out() {
    let fc = single_level(1, 99, 1, 1, 2);
    let holder = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let fc = fc.clone();
            tokio::spawn(async move { admit_as(&fc, "b", WorkEstimate::seats(1)).await })
        })
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(level(&fc.snapshot(), "work").waiting_requests, 2);
    // Per pair: one executing, two waiting with a seat each.
    assert_eq!(
        fc.pair_counts(),
        [PairCounts {
            flow_schema: "work".into(),
            priority_level: "work".into(),
            executing_requests: 1,
            waiting_seats: 2,
        }]
    );
    let rejected = admit_as(&fc, "c", WorkEstimate::seats(1))
        .await
        .err()
        .unwrap_or_else(|| panic!("admitted"));
    assert_eq!(rejected.reason, RejectReason::QueueFull);
    assert_eq!(rejected.reason.as_str(), "queue-full");
    assert_eq!(rejected.matched.priority_level, "work");
    assert_eq!(rejected.matched.priority_level_uid, "uid-pl-work");
    assert_eq!(rejected.retry_after_seconds, 1);
    // The waiters have no deadline: they wait the default limit (60 s here), then time out.
    let before = Instant::now();
    for waiter in waiters {
        let outcome = waiter.await.unwrap_or_else(|e| panic!("{e}"));
        let rejection = outcome.err().unwrap_or_else(|| panic!("admitted"));
        assert_eq!(rejection.reason, RejectReason::TimeOut);
        assert_eq!(rejection.waited, Duration::from_secs(60));
    }
    assert_eq!(Instant::now() - before, Duration::from_secs(60));
    let snap = fc.snapshot();
    let work = level(&snap, "work");
    assert_eq!(work.counters.rejected_queue_full, 1);
    assert_eq!(work.counters.rejected_time_out, 2);
    assert_eq!(work.waiting_requests, 0);
    drop(holder);
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 0);
    assert!(fc.pair_counts().is_empty());
}

#[tokio::test(start_paused = true)]
async fn wait_limit_is_a_quarter_of_the_request_timeout() {
    let fc = single_level(1, 99, 1, 1, 5);
    let _holder = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let ri = info("GET", "/api/v1/namespaces/a/pods", "");
    let u = who("b", &["system:authenticated"]);
    let d = RequestDigest {
        request_info: &ri,
        user: &u,
        timeout: Some(Duration::from_secs(8)),
        memo: None,
    };
    let c = fc.classify(&d);
    assert_eq!(c.wait_limit, Duration::from_secs(2));
    let rejection = fc
        .admit_classified(c, WorkEstimate::seats(1))
        .await
        .err()
        .unwrap_or_else(|| panic!("admitted"));
    assert_eq!(
        (rejection.reason, rejection.waited),
        (RejectReason::TimeOut, Duration::from_secs(2))
    );
    assert_eq!(
        fc.options().wait_limit(Some(Duration::from_secs(3600))),
        MAX_REQUEST_WAIT_LIMIT
    );
    assert_eq!(
        FlowControlOptions::default().wait_limit(None),
        Duration::from_secs(15)
    );
}

#[tokio::test(start_paused = true)]
async fn waiter_is_dispatched_when_a_seat_frees() {
    let fc = single_level(1, 99, 4, 2, 5);
    let holder = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let fc2 = fc.clone();
    let waiter = tokio::spawn(async move {
        admit_as(&fc2, "b", WorkEstimate::seats(1))
            .await
            .map(|a| a.waited())
    });
    sleep(Duration::from_secs(3)).await;
    drop(holder);
    let waited = waiter
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(waited, Duration::from_secs(3));
    assert_eq!(level(&fc.snapshot(), "work").counters.dispatched, 2);
}

#[tokio::test(start_paused = true)]
async fn reject_level_rejects_at_its_limit_with_retry_after() {
    // catch-all (Reject, 5 shares) alone: all 2 seats.
    let fc = FlowControl::new(options(2));
    let first = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let second = admit_as(&fc, "b", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(first.matched().priority_level, "catch-all");
    let mut retry = Vec::new();
    for second_tick in 0..6 {
        for _ in 0..40 {
            let r = admit_as(&fc, "c", WorkEstimate::seats(1))
                .await
                .err()
                .unwrap_or_else(|| panic!("admitted"));
            assert_eq!(r.reason, RejectReason::ConcurrencyLimit);
            retry.push(r.retry_after_seconds);
        }
        let _ = second_tick;
        advance(Duration::from_secs(1)).await;
    }
    assert_eq!(retry[0], 1);
    // Many drops per second make kube's Retry-After back off.
    assert!(*retry.last().unwrap_or(&0) > 1, "{retry:?}");
    assert_eq!(
        level(&fc.snapshot(), "catch-all")
            .counters
            .rejected_concurrency_limit,
        240
    );
    drop((first, second));
    assert!(admit_as(&fc, "c", WorkEstimate::seats(1)).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn exempt_requests_never_queue_but_are_counted() {
    let fc = FlowControl::new(options(4));
    let ri = info("DELETE", "/api/v1/namespaces/a/pods/p", "");
    let u = who("root", &["system:masters"]);
    let mut held = Vec::new();
    for _ in 0..50 {
        let admission = fc
            .admit(&digest(&ri, &u), WorkEstimate::seats(3))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(admission.waited(), Duration::ZERO);
        held.push(admission);
    }
    let snap = fc.snapshot();
    let exempt = level(&snap, "exempt");
    assert_eq!(
        (
            exempt.seats_in_use,
            exempt.executing_requests,
            exempt.waiting_requests
        ),
        (150, 50, 0)
    );
    drop(held);
    assert_eq!(level(&fc.snapshot(), "exempt").seats_in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn wide_requests_wait_for_enough_free_seats() {
    let fc = single_level(4, 99, 1, 1, 10);
    assert_eq!(level(&fc.snapshot(), "work").current_limit, 4);
    let mut narrow = Vec::new();
    for _ in 0..3 {
        narrow.push(
            admit_as(&fc, "a", WorkEstimate::seats(1))
                .await
                .unwrap_or_else(|e| panic!("{e:?}")),
        );
    }
    let fc2 = fc.clone();
    let wide = tokio::spawn(async move { admit_as(&fc2, "b", WorkEstimate::seats(3)).await });
    tokio::task::yield_now().await;
    // One seat is free, but the request needs three.
    let snap = fc.snapshot();
    assert_eq!(
        (
            level(&snap, "work").seats_in_use,
            level(&snap, "work").waiting_seats
        ),
        (3, 3)
    );
    narrow.pop();
    tokio::task::yield_now().await;
    assert_eq!(level(&fc.snapshot(), "work").waiting_requests, 1);
    narrow.pop();
    let admission = wide
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 4);
    // A request wider than the whole limit runs alone once nothing else executes.
    drop(admission);
    drop(narrow);
    let huge = admit_as(&fc, "c", WorkEstimate::seats(9))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 9);
    drop(huge);
}

/// A [`SeatGauge`] that only counts.
#[derive(Default)]
struct CountingGauge(std::sync::atomic::AtomicI64);

impl SeatGauge for CountingGauge {
    fn add(&self, seats: i64) {
        self.0.fetch_add(seats, std::sync::atomic::Ordering::SeqCst);
    }
}

impl CountingGauge {
    fn get(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn a_release_guard_counts_the_widest_seats_until_they_are_released() {
    let fc = single_level(10, 99, 1, 1, 10);
    let gauge = Arc::new(CountingGauge::default());
    // Final seats wider than the initial ones linger after the request.
    let estimate = WorkEstimate {
        initial_seats: 1,
        final_seats: 3,
        additional_latency: Duration::from_millis(5),
    };
    let mut admission = admit_as(&fc, "a", estimate)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    admission.on_release(ReleaseGuard::new(gauge.clone(), 3));
    assert_eq!(gauge.get(), 3);
    drop(admission);
    assert_eq!(
        gauge.get(),
        3,
        "counted off before the final seats' latency passed"
    );
    sleep(Duration::from_millis(6)).await;
    assert_eq!(gauge.get(), 0);
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 0);

    // No final seats: counted off when the request ends (a watch: at initialization).
    let mut watch = admit_as(&fc, "w", WorkEstimate::seats(2))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    watch.on_release(ReleaseGuard::new(gauge.clone(), 2));
    assert_eq!(gauge.get(), 2);
    watch.initialization_done();
    assert_eq!(gauge.get(), 0);
    drop(watch);
    assert_eq!(gauge.get(), 0, "counted off twice");
}

#[tokio::test(start_paused = true)]
async fn final_seats_linger_and_watch_seats_release_at_initialization() {
    let fc = single_level(10, 99, 1, 1, 10);
    let estimate = WorkEstimate {
        initial_seats: 1,
        final_seats: 3,
        additional_latency: Duration::from_millis(5),
    };
    let admission = admit_as(&fc, "a", estimate)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 3);
    drop(admission);
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 3);
    assert_eq!(level(&fc.snapshot(), "work").executing_requests, 0);
    sleep(Duration::from_millis(6)).await;
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 0);

    let mut watch = admit_as(&fc, "w", WorkEstimate::seats(4))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 4);
    watch.initialization_done();
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 0);
    assert_eq!(watch.matched().flow_schema, "work");
    drop(watch);
    assert_eq!(level(&fc.snapshot(), "work").seats_in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn dropped_waiter_frees_its_queue_slot() {
    let fc = single_level(1, 99, 1, 1, 1);
    let holder = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let abandoned = tokio::time::timeout(
        Duration::from_millis(100),
        admit_as(&fc, "b", WorkEstimate::seats(1)),
    )
    .await;
    assert!(abandoned.is_err(), "should still be waiting");
    let snap = fc.snapshot();
    assert_eq!(level(&snap, "work").waiting_requests, 0);
    assert_eq!(level(&snap, "work").counters.cancelled, 1);
    // The slot is free again: the next request queues rather than being refused.
    let fc2 = fc.clone();
    let next =
        tokio::spawn(async move { admit_as(&fc2, "c", WorkEstimate::seats(1)).await.is_ok() });
    tokio::task::yield_now().await;
    assert_eq!(level(&fc.snapshot(), "work").waiting_requests, 1);
    drop(holder);
    assert!(next.await.unwrap_or(false));
}

/// A waiter whose client went away leaves its queue at once, counted as cancelled and
/// refused for `time-out` (kube's rejection of a waiter whose context ended).
#[tokio::test(start_paused = true)]
async fn a_waiter_whose_client_went_away_is_refused_and_cancelled() {
    let fc = single_level(1, 99, 1, 1, 1);
    let holder = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let ri = info("GET", "/api/v1/namespaces/a/pods", "");
    let u = who("b", &["system:authenticated"]);
    let classification = fc.classify(&digest(&ri, &u));
    let Admitting::Queued(queued) = fc.begin(classification, WorkEstimate::seats(1)) else {
        panic!("should queue behind the holder");
    };
    let (gone_tx, gone_rx) = tokio::sync::oneshot::channel::<()>();
    let fc2 = fc.clone();
    let waiting = tokio::spawn(async move {
        queued
            .wait_unless(&fc2, async {
                let _ = gone_rx.await;
            })
            .await
    });
    tokio::task::yield_now().await;
    assert_eq!(level(&fc.snapshot(), "work").waiting_requests, 1);
    drop(gone_tx);
    let outcome = waiting.await.unwrap_or_else(|e| panic!("{e:?}"));
    let rejection = outcome.expect_err("refused");
    assert_eq!(rejection.reason, RejectReason::TimeOut);
    let snap = fc.snapshot();
    assert_eq!(level(&snap, "work").waiting_requests, 0);
    assert_eq!(level(&snap, "work").counters.cancelled, 1);
    assert_eq!(level(&snap, "work").counters.rejected_time_out, 0);
    drop(holder);
    assert_eq!(level(&fc.snapshot(), "work").counters.dispatched, 1);
}

#[tokio::test(start_paused = true)]
async fn config_update_keeps_queued_requests() {
    let fc = single_level(1, 99, 4, 2, 10);
    let holder = admit_as(&fc, "a", WorkEstimate::seats(1))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let fc2 = fc.clone();
    let waiter = tokio::spawn(async move {
        admit_as(&fc2, "b", WorkEstimate::seats(1))
            .await
            .map(|a| a.matched().clone())
    });
    tokio::task::yield_now().await;
    // Reconfigure the level (more queues) and move the schema to another level.
    let fss = vec![fs(
        "work",
        "other",
        100,
        Some("ByUser"),
        vec![rules(json!([group("*")]), everything())],
    )];
    let pls = vec![
        pl_exempt(),
        pl_reject("catch-all", 1),
        pl_queue("work", 99, 8, 2, 10, Some(0)),
        pl_queue("other", 50, 4, 2, 10, None),
    ];
    fc.update_config(&fss, &pls);
    let snap = fc.snapshot();
    assert_eq!(level(&snap, "work").waiting_requests, 1);
    assert_eq!(level(&snap, "work").queues, 8);
    // Now remove the level altogether: it drains instead of dropping its requests.
    let pls = vec![
        pl_exempt(),
        pl_reject("catch-all", 1),
        pl_queue("other", 50, 4, 2, 10, None),
    ];
    fc.update_config(&fss, &pls);
    let snap = fc.snapshot();
    assert!(level(&snap, "work").quiescing);
    assert_eq!(level(&snap, "work").waiting_requests, 1);
    drop(holder);
    let matched = waiter
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(matched.priority_level, "work");
    // Drained: the engine is told at once (kube's maybeReap), and reaping retires it.
    assert!(fc.snapshot().iter().any(|l| l.name == "work"));
    tokio::time::timeout(Duration::from_millis(10), fc.drained().notified())
        .await
        .expect("the drained level was signalled");
    fc.reap_drained();
    assert!(fc.snapshot().iter().all(|l| l.name != "work"));
}

// ---------------------------------------------------------------------------------------
// Borrowing

#[test]
fn allocation_respects_bounds_and_sum() {
    let items = [
        AllocItem {
            target: 10.0,
            lower_bound: 5.0,
            upper_bound: 100.0,
        },
        AllocItem {
            target: 10.0,
            lower_bound: 5.0,
            upper_bound: 100.0,
        },
    ];
    let (allocs, _) = compute_allocation(40, &items).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allocs, vec![20.0, 20.0]);
    let items = [
        AllocItem {
            target: 50.0,
            lower_bound: 10.0,
            upper_bound: 30.0,
        },
        AllocItem {
            target: 1.0,
            lower_bound: 1.0,
            upper_bound: 100.0,
        },
    ];
    let (allocs, _) = compute_allocation(40, &items).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        (allocs[0] - 30.0).abs() < 1e-9 && (allocs[1] - 10.0).abs() < 1e-9,
        "{allocs:?}"
    );
    assert!(compute_allocation(1, &items).is_err());
}

#[tokio::test(start_paused = true)]
async fn busy_level_borrows_from_idle_one_and_gives_back() {
    let fc = FlowControl::new(FlowControlOptions {
        total_seats: 100,
        request_wait_limit: Duration::from_secs(60),
    });
    let fss = vec![
        fs(
            "a",
            "a",
            100,
            Some("ByUser"),
            vec![rules(json!([user("alice")]), everything())],
        ),
        fs(
            "b",
            "b",
            100,
            Some("ByUser"),
            vec![rules(json!([user("bob")]), everything())],
        ),
    ];
    let pls = vec![
        pl_exempt(),
        pl_reject("catch-all", 1),
        pl_queue("a", 50, 8, 2, 100, Some(50)),
        pl_queue("b", 50, 8, 2, 100, Some(50)),
    ];
    fc.update_config(&fss, &pls);
    let snap = fc.snapshot();
    let nominal = level(&snap, "a").nominal_limit;
    assert_eq!(nominal, 50);
    assert_eq!(level(&snap, "a").lower_limit, 25);

    // alice keeps 80 seats in demand; bob is idle.
    let mut held = Vec::new();
    let mut waiting = Vec::new();
    for _ in 0..80 {
        let fc = fc.clone();
        waiting.push(tokio::spawn(async move {
            admit_as(&fc, "alice", WorkEstimate::seats(1)).await
        }));
    }
    tokio::task::yield_now().await;
    for _ in 0..3 {
        sleep(BORROWING_ADJUSTMENT_PERIOD).await;
        fc.adjust_borrowing();
    }
    let snap = fc.snapshot();
    let (a, b) = (level(&snap, "a"), level(&snap, "b"));
    assert!(a.current_limit > nominal, "a should borrow: {a:?}");
    assert!(
        b.current_limit < nominal && b.current_limit >= b.lower_limit,
        "b lends: {b:?}"
    );
    assert!(a.seats_in_use > nominal, "borrowed seats are used: {a:?}");

    // bob's demand returns: his level gets at least its nominal limit back at the next pass.
    for _ in 0..50 {
        let fc = fc.clone();
        held.push(tokio::spawn(async move {
            let ri = info("GET", "/api/v1/namespaces/a/pods", "");
            let u = who("bob", &["system:authenticated"]);
            let admission = fc.admit(&digest(&ri, &u), WorkEstimate::seats(1)).await;
            sleep(Duration::from_secs(30)).await;
            admission.is_ok()
        }));
    }
    sleep(Duration::from_secs(5)).await;
    sleep(BORROWING_ADJUSTMENT_PERIOD).await;
    fc.adjust_borrowing();
    let snap = fc.snapshot();
    let (a, b) = (level(&snap, "a"), level(&snap, "b"));
    assert!(b.current_limit >= nominal, "b gets its seats back: {b:?}");
    assert!(
        a.current_limit <= 100 - b.current_limit + 1,
        "a gives back: {a:?} {b:?}"
    );
    drop(waiting);
    for h in held {
        assert!(h.await.unwrap_or(false));
    }
}

// ---------------------------------------------------------------------------------------
// Work estimation

struct Counts(HashMap<(&'static str, &'static str), u64>);

impl ObjectCounts for Counts {
    fn object_count(&self, group: &str, resource: &str) -> Option<u64> {
        self.0
            .iter()
            .find(|((g, r), _)| *g == group && *r == resource)
            .map(|(_, n)| *n)
    }
}

fn estimator(tracker: &WatchTracker) -> WorkEstimator {
    let counts = Counts(HashMap::from([
        (("", "pods"), 250),
        (("", "secrets"), 5000),
        (("apps", "deployments"), 40),
    ]));
    WorkEstimator::new(
        WorkEstimatorConfig::default(),
        Arc::new(counts),
        Arc::new(tracker.clone()),
    )
}

#[test]
fn list_and_watch_estimates_follow_kube() {
    let tracker = WatchTracker::new();
    let e = estimator(&tracker);
    let seats = |method: &str, path: &str, query: &str, max: u64| {
        e.estimate_raw(&info(method, path, query), query, max)
            .initial_seats
    };
    // From the watch cache (consistent list, or any resourceVersion): every stored object.
    assert_eq!(seats("GET", "/api/v1/pods", "", 0), 3);
    assert_eq!(
        seats("GET", "/api/v1/pods", "resourceVersion=0&limit=10", 0),
        3
    );
    // From storage (exact resourceVersion with a limit): twice the limit.
    assert_eq!(
        seats("GET", "/api/v1/pods", "resourceVersion=7&limit=100", 0),
        2
    );
    assert_eq!(
        seats(
            "GET",
            "/api/v1/pods",
            "resourceVersionMatch=Exact&resourceVersion=7",
            0
        ),
        5
    );
    // From storage with a selector: all stored plus the limit.
    assert_eq!(
        seats(
            "GET",
            "/api/v1/pods",
            "continue=abc&limit=50&labelSelector=a%3Db",
            0
        ),
        3
    );
    // Capped at the maximum, and at the level's max seats.
    assert_eq!(seats("GET", "/api/v1/secrets", "", 0), 10);
    assert_eq!(seats("GET", "/api/v1/secrets", "", 4), 4);
    // One object by name, unknown resources, other verbs: one seat.
    assert_eq!(
        seats("GET", "/api/v1/pods", "fieldSelector=metadata.name%3Dp", 0),
        1
    );
    assert_eq!(seats("GET", "/apis/apps/v1/deployments", "", 0), 1);
    assert_eq!(seats("GET", "/apis/example.com/v1/widgets", "", 0), 1);
    assert_eq!(seats("GET", "/api/v1/namespaces/a/pods/p", "", 0), 1);
    // A malformed limit is charged the maximum.
    assert_eq!(seats("GET", "/api/v1/pods", "limit=lots", 0), 10);
    // Watches cost one seat, as kube 1.33 charges them (WatchList off), whatever their
    // resourceVersion; a watch that asks for its initial events as a list costs like that
    // list (kube's estimate with WatchList on).
    assert_eq!(seats("GET", "/api/v1/pods", "watch=true", 0), 1);
    assert_eq!(
        seats("GET", "/api/v1/pods", "watch=true&resourceVersion=0", 0),
        1
    );
    assert_eq!(
        seats("GET", "/api/v1/pods", "watch=true&resourceVersion=55", 0),
        1
    );
    assert_eq!(
        seats(
            "GET",
            "/api/v1/pods",
            "watch=true&resourceVersion=55&sendInitialEvents=true",
            0
        ),
        3
    );
}

#[test]
fn mutation_estimates_count_interested_watchers() {
    let tracker = WatchTracker::new();
    let e = estimator(&tracker);
    let update = info("PUT", "/api/v1/namespaces/a/pods/p", "");
    assert_eq!(e.estimate(&update, &[], 0), WorkEstimate::seats(1));
    let mut registrations = Vec::new();
    for i in 0..25 {
        let path = match i % 3 {
            0 => "/api/v1/pods",
            1 => "/api/v1/namespaces/a/pods",
            _ => "/api/v1/namespaces/b/pods",
        };
        registrations.push(tracker.register(&info("GET", path, "watch=true")));
    }
    // Node-scoped pod watches are indexed away, as in kube.
    registrations.push(tracker.register(&info(
        "GET",
        "/api/v1/pods",
        "watch=true&fieldSelector=spec.nodeName%3Dn1",
    )));
    // 9 cluster-wide + 8 in namespace a are interested.
    assert_eq!(tracker.interested_watchers(&update), 17);
    let estimate = e.estimate(&update, &[], 0);
    assert_eq!(estimate.initial_seats, 1);
    assert_eq!(estimate.final_seats, 2);
    assert_eq!(estimate.additional_latency, Duration::from_millis(5));
    // The final seats are narrowed to the level's max seats, keeping the work.
    let narrow = e.estimate(&update, &[], 1);
    assert_eq!(
        (narrow.final_seats, narrow.additional_latency),
        (1, Duration::from_millis(10))
    );
    // ServiceAccount tokens produce no events.
    let token = info(
        "POST",
        "/api/v1/namespaces/a/serviceaccounts/default/token",
        "",
    );
    assert_eq!(e.estimate(&token, &[], 0), WorkEstimate::seats(1));
    drop(registrations);
    assert_eq!(tracker.interested_watchers(&update), 0);
}

#[test]
fn level_max_seats_follow_kube() {
    let fc = FlowControl::new(FlowControlOptions::default());
    let (fss, pls) = bootstrap();
    fc.update_config(&fss, &pls);
    let ri = info("GET", "/api/v1/pods", "");
    let c = fc.classify(&digest(&ri, &who("alice", &["system:authenticated"])));
    assert_eq!(c.matched.priority_level, "global-default");
    // global-default: nominal ceil(600 * 20 / 245) = 49; min(ceil(49 * 0.15), 49 / 6) = 8.
    assert_eq!(level(&fc.snapshot(), "global-default").nominal_limit, 49);
    assert_eq!(c.max_seats, 8);
}

#[tokio::test(start_paused = true)]
async fn absurd_estimates_do_not_panic() {
    let fc = single_level(3, 99, 4, 2, 2);
    let huge = WorkEstimate {
        initial_seats: u64::MAX,
        final_seats: u64::MAX,
        additional_latency: Duration::MAX,
    };
    let first = admit_as(&fc, "a", huge)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    // Final seats wider than the limit are narrowed only for queued requests; this one ran at once.
    let second = tokio::time::timeout(Duration::from_secs(1), admit_as(&fc, "b", huge)).await;
    assert!(second.is_err(), "a second huge request must wait");
    drop(first);
    let ri = info("GET", "/", "");
    let root = who("root", &["system:masters"]);
    let a = fc.admit(&digest(&ri, &root), huge).await;
    let b = fc.admit(&digest(&ri, &root), huge).await;
    assert!(a.is_ok() && b.is_ok());
}

#[test]
fn subjects_are_resolved_from_their_kind_and_member() {
    let subjects = json!([
        user("alice"),
        group("*"),
        sa("kube-system", "*"),
        // A kind without its member, a member of another kind, an unknown kind.
        {"kind": "User"},
        {"kind": "Group", "user": {"name": "alice"}},
        {"kind": "Robot", "user": {"name": "alice"}},
    ]);
    let schema = config::parse_flow_schema(&fs(
        "s",
        "p",
        10,
        None,
        vec![rules(subjects, json!({"nonResourceRules": []}))],
    ))
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        schema.rules[0].subjects,
        vec![
            config::Subject::User("alice".into()),
            config::Subject::Group("*".into()),
            config::Subject::ServiceAccount {
                namespace: "kube-system".into(),
                name: "*".into()
            },
            config::Subject::Nobody,
            config::Subject::Nobody,
            config::Subject::Nobody,
        ]
    );
}

#[test]
fn rules_of_the_other_request_kind_never_match() {
    // Subjects match everyone; only non-resource rules: a resource request matches nothing.
    let schema = config::parse_flow_schema(&fs(
        "s",
        "p",
        10,
        None,
        vec![rules(
            json!([group("*")]),
            json!({"nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}),
        )],
    ))
    .unwrap_or_else(|e| panic!("{e:?}"));
    let u = who("u", &["g"]);
    let resource = info("GET", "/api/v1/namespaces/a/pods", "");
    let non_resource = info("GET", "/healthz", "");
    assert!(!matches_flow_schema(&digest(&resource, &u), &schema));
    assert!(matches_flow_schema(&digest(&non_resource, &u), &schema));
}

#[test]
fn an_attachment_is_made_once_and_typed() {
    let attachment = Attachment::default();
    let mut made = 0;
    let first = attachment.get_or_init(|| {
        made += 1;
        String::from("pair state")
    });
    assert_eq!(first.map(String::as_str), Some("pair state"));
    let again = attachment.get_or_init(|| -> String { unreachable!("made twice") });
    assert_eq!(again.map(String::as_str), Some("pair state"));
    assert_eq!(made, 1);
    assert_eq!(attachment.get_or_init(|| 7_u32), None, "another type");
    // Not part of a pair's identity.
    assert_eq!(attachment, Attachment::default());
}

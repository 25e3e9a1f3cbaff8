//! The ABAC and Webhook authorization modes end to end, with users from a static token file:
//! an ABAC policy file (read-only namespace access, group rules, non-resource paths) and a
//! SubjectAccessReview webhook fixture (allow, deny with a reason, the reviews it receives,
//! caching, and an outage that must never turn into an allow).

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kubegate_tests::fixtures::SubjectAccessReviewWebhook;
use kubegate_tests::{tail, Kubegate};
use serde_json::{json, Value};

/// Users of the token file: (token, name, uid, groups).
const USERS: &[(&str, &str, &str, &str)] = &[
    ("alice-token", "alice", "alice-uid", "team-a-readers"),
    ("bob-token", "bob", "bob-uid", ""),
    ("carol-token", "carol", "carol-uid", "ops,auditors"),
    ("dave-token", "dave", "dave-uid", ""),
];

/// A kubegate config file enabling the static tokens of [`USERS`]; returns its path.
fn token_config(dir: &Path) -> PathBuf {
    let tokens = dir.join("tokens.csv");
    let lines: Vec<String> = USERS
        .iter()
        .map(|(token, name, uid, groups)| match *groups {
            // An empty groups column would be one group named "" (as in kube).
            "" => format!("{token},{name},{uid}"),
            groups => format!("{token},{name},{uid},\"{groups}\""),
        })
        .collect();
    std::fs::write(&tokens, lines.join("\n") + "\n").unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!("authentication:\n  tokenAuthFile: {}\n", tokens.display()),
    )
    .unwrap();
    config
}

fn token(user: &str) -> &'static str {
    USERS.iter().find(|u| u.1 == user).unwrap().0
}

/// kubectl as `user`, with only a bearer token (no kubeconfig, no client certificate).
fn kubectl_as(gate: &Kubegate, user: &str, args: &[&str]) -> Output {
    let mut all = vec![
        "--kubeconfig=/dev/null".to_string(),
        format!("--server={}", gate.url()),
        format!(
            "--certificate-authority={}",
            gate.data_dir.join("pki/ca.crt").display()
        ),
        format!("--token={}", token(user)),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    gate.kubectl(&all)
}

/// kubectl as `user`, expected to succeed: stdout.
fn ok_as(gate: &Kubegate, user: &str, args: &[&str]) -> String {
    let out = kubectl_as(gate, user, args);
    assert!(
        out.status.success(),
        "{user}: kubectl {args:?} failed: {}\n--- server log tail ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        tail(&gate.log(), 30)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl as `user`, expected to fail: stderr.
fn fails_as(gate: &Kubegate, user: &str, args: &[&str]) -> String {
    let out = kubectl_as(gate, user, args);
    assert!(
        !out.status.success(),
        "{user}: kubectl {args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A raw request as `user` (curl, bearer token): (status, JSON body or Null).
fn request_as(
    gate: &Kubegate,
    user: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method])
        .arg("--cacert")
        .arg(gate.data_dir.join("pki/ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {}", token(user))]);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json"])
            .args(["--data-binary", &body.to_string()]);
    }
    let out = cmd.arg(format!("{}{path}", gate.url())).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (
        code.trim().parse().unwrap(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// An ABAC v1beta1 policy line.
fn policy(spec: Value) -> String {
    json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec})
        .to_string()
}

/// The admin (system:masters, allowed by every chain) creates namespace team-a with a
/// ConfigMap `settings`.
fn seed(gate: &Kubegate) {
    gate.ok(&["create", "namespace", "team-a"]);
    gate.ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team-a",
        "--from-literal=color=blue",
    ]);
}

/// The log must never show a bearer token.
fn assert_no_tokens_logged(gate: &Kubegate) {
    let log = gate.log();
    for (token, ..) in USERS {
        assert!(!log.contains(token), "token {token} appears in the log");
    }
}

#[test]
fn abac_policy_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = token_config(dir.path());
    let policy_file = dir.path().join("abac.jsonl");
    let lines = [
        "# Discovery for every authenticated user (a prefix ending in *).".to_string(),
        policy(
            json!({"group": "system:authenticated", "nonResourcePath": "/api*", "readonly": true}),
        ),
        String::new(),
        "# alice reads everything in team-a, and may GET /version.".to_string(),
        policy(
            json!({"user": "alice", "namespace": "team-a", "resource": "*", "apiGroup": "*", "readonly": true}),
        ),
        policy(json!({"user": "alice", "nonResourcePath": "/version", "readonly": true})),
        "# The ops group manages ConfigMaps everywhere.".to_string(),
        policy(json!({"group": "ops", "namespace": "*", "resource": "configmaps", "apiGroup": ""})),
        "# Everyone may ask what they may do (SelfSubjectRulesReview).".to_string(),
        policy(
            json!({"group": "system:authenticated", "namespace": "*", "resource": "selfsubjectrulesreviews", "apiGroup": "authorization.k8s.io"}),
        ),
        "# An unversioned (v0) line: dave, every verb, namespace team-b only.".to_string(),
        r#"{"user": "dave", "namespace": "team-b"}"#.to_string(),
    ];
    std::fs::write(&policy_file, lines.join("\n") + "\n").unwrap();
    let gate = Kubegate::start_with(&[
        "--config",
        config.to_str().unwrap(),
        "--authorization-mode=ABAC",
        &format!("--authorization-policy-file={}", policy_file.display()),
    ]);
    seed(&gate);

    // alice: read-only in team-a.
    let listed = ok_as(&gate, "alice", &["get", "cm", "-n", "team-a"]);
    assert!(listed.contains("settings"), "{listed}");
    let got = ok_as(
        &gate,
        "alice",
        &["get", "cm", "settings", "-n", "team-a", "-o", "json"],
    );
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["data"]["color"], "blue");
    let denied = fails_as(
        &gate,
        "alice",
        &[
            "create",
            "configmap",
            "mine",
            "-n",
            "team-a",
            "--from-literal=a=b",
        ],
    );
    assert!(
        denied.contains(r#"configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "team-a""#),
        "{denied}"
    );
    // The same over the wire: kube's Forbidden status, with ABAC's reason.
    let (code, status) = request_as(
        &gate,
        "alice",
        "POST",
        "/api/v1/namespaces/team-a/configmaps",
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}})),
    );
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["details"]["kind"], "configmaps");
    assert_eq!(
        status["message"],
        r#"configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "team-a": No policy matched."#
    );
    // Outside team-a alice reads nothing.
    let denied = fails_as(&gate, "alice", &["get", "cm", "-n", "default"]);
    assert!(
        denied.contains(r#"User "alice" cannot list resource "configmaps" in API group "" in the namespace "default""#),
        "{denied}"
    );

    // bob has discovery only.
    let denied = fails_as(&gate, "bob", &["get", "cm", "-n", "team-a"]);
    assert!(
        denied.contains(r#"configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "team-a""#),
        "{denied}"
    );

    // carol, through the ops group, may write ConfigMaps in any namespace, and nothing else.
    ok_as(
        &gate,
        "carol",
        &[
            "create",
            "configmap",
            "from-ops",
            "-n",
            "team-a",
            "--from-literal=a=b",
        ],
    );
    assert!(gate.ok(&["get", "cm", "-n", "team-a"]).contains("from-ops"));
    let denied = fails_as(&gate, "carol", &["get", "secrets", "-n", "team-a"]);
    assert!(
        denied.contains(r#"User "carol" cannot list resource "secrets""#),
        "{denied}"
    );

    // The v0 line: dave may do anything in team-b (namespaces are cluster-scoped, so the
    // admin creates it), nothing in team-a.
    gate.ok(&["create", "namespace", "team-b"]);
    ok_as(
        &gate,
        "dave",
        &[
            "create",
            "configmap",
            "d",
            "-n",
            "team-b",
            "--from-literal=a=b",
        ],
    );
    ok_as(&gate, "dave", &["delete", "configmap", "d", "-n", "team-b"]);
    fails_as(&gate, "dave", &["get", "cm", "-n", "team-a"]);

    // Non-resource paths: /version for alice by an exact rule; bob has no rule for it.
    let version = ok_as(&gate, "alice", &["get", "--raw", "/version"]);
    let version: Value = serde_json::from_str(&version).unwrap();
    assert!(version["gitVersion"].is_string(), "{version}");
    let denied = fails_as(&gate, "bob", &["get", "--raw", "/version"]);
    assert!(
        denied.contains(r#"User "bob" cannot get path "/version""#),
        "{denied}"
    );
    let (code, status) = request_as(&gate, "bob", "GET", "/version", None);
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        r#"forbidden: User "bob" cannot get path "/version": No policy matched."#
    );
    // The discovery rule is read-only and a prefix: GET /apis passes, POST /api does not.
    assert_eq!(request_as(&gate, "bob", "GET", "/apis", None).0, 200);
    assert_eq!(
        request_as(&gate, "bob", "POST", "/api", Some(&json!({}))).0,
        403
    );
    // What ABAC allows, SelfSubjectRulesReview lists (kube's ABAC RulesFor): in team-a,
    // alice's read-only rule; path rules name no namespace, so (as in kube) they are listed
    // only for the cluster scope.
    let rules = ok_as(&gate, "alice", &["auth", "can-i", "--list", "-n", "team-a"]);
    assert!(
        rules
            .lines()
            .any(|l| l.starts_with("*.*") && l.contains("[get list watch]")),
        "{rules}"
    );
    assert!(!rules.contains("/version"), "{rules}");
    assert_no_tokens_logged(&gate);
}

#[test]
fn abac_policy_errors_stop_startup() {
    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("abac.jsonl");
    std::fs::write(
        &policy_file,
        format!(
            "{}\n# fine so far\n{{\"user\": \"alice\", \"resorce\": \"pods\"}}\n",
            policy(json!({"user": "admin", "namespace": "*", "resource": "*", "apiGroup": "*"}))
        ),
    )
    .unwrap();
    let out = Command::new(kubegate_tests::binary())
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "--secure-port",
            &kubegate_tests::free_port().to_string(),
            "--bind-address=127.0.0.1",
            "--authorization-mode=ABAC",
            &format!("--authorization-policy-file={}", policy_file.display()),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error reading policy file {}, line 3:",
            policy_file.display()
        )) && stderr.contains("unknown field `resorce`"),
        "{stderr}"
    );

    // A policy file without the ABAC mode is a configuration error, reported with its path.
    let out = Command::new(kubegate_tests::binary())
        .args(["serve", "--authorization-mode=RBAC"])
        .arg(format!(
            "--authorization-policy-file={}",
            policy_file.display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("authorization.policyFile: Forbidden"),
        "{stderr}"
    );
}

/// The SubjectAccessReviews the fixture received for `user`.
fn reviews_for(webhook: &SubjectAccessReviewWebhook, user: &str) -> Vec<Value> {
    webhook
        .reviews()
        .into_iter()
        .filter(|r| r["spec"]["user"] == user)
        .collect()
}

#[test]
fn webhook_subject_access_reviews() {
    let mut webhook = SubjectAccessReviewWebhook::start(json!({
        "alice": {"allowed": true, "reason": "alice is on the list"},
        "bob": {"allowed": false, "denied": true, "reason": "bob is blocked by the fixture webhook"},
    }));
    let dir = tempfile::tempdir().unwrap();
    let config = token_config(dir.path());
    let gate = Kubegate::start_with(&[
        "--config",
        config.to_str().unwrap(),
        "--authorization-mode=Webhook",
        &format!(
            "--authorization-webhook-config-file={}",
            webhook.kubeconfig().display()
        ),
        "--authorization-webhook-version=v1",
    ]);
    seed(&gate);
    assert!(
        webhook.reviews().is_empty(),
        "system:masters is allowed before the webhook is asked"
    );

    // alice: allowed by the webhook.
    let listed = ok_as(&gate, "alice", &["get", "cm", "-n", "team-a"]);
    assert!(listed.contains("settings"), "{listed}");
    let alice = reviews_for(&webhook, "alice");
    let list = alice
        .iter()
        .find(|r| r["spec"]["resourceAttributes"]["resource"] == "configmaps")
        .unwrap_or_else(|| panic!("no configmaps review in {alice:?}"));
    assert_eq!(list["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(list["kind"], "SubjectAccessReview");
    assert_eq!(list["spec"]["user"], "alice");
    assert_eq!(list["spec"]["uid"], "alice-uid");
    assert_eq!(
        list["spec"]["groups"],
        json!(["team-a-readers", "system:authenticated"])
    );
    assert_eq!(
        list["spec"]["resourceAttributes"],
        json!({"namespace": "team-a", "verb": "list", "version": "v1", "resource": "configmaps"})
    );
    assert!(
        list["spec"].get("nonResourceAttributes").is_none(),
        "{list}"
    );
    // A non-resource request is reviewed with nonResourceAttributes.
    ok_as(&gate, "alice", &["get", "--raw", "/version"]);
    let version = reviews_for(&webhook, "alice")
        .into_iter()
        .find(|r| r["spec"].get("nonResourceAttributes").is_some())
        .unwrap_or_else(|| panic!("no non-resource review in {:?}", webhook.reviews()));
    assert_eq!(
        version["spec"]["nonResourceAttributes"],
        json!({"path": "/version", "verb": "get"})
    );
    assert!(
        version["spec"].get("resourceAttributes").is_none(),
        "{version}"
    );
    // A named object: get with a name.
    ok_as(&gate, "alice", &["get", "cm", "settings", "-n", "team-a"]);
    assert!(
        reviews_for(&webhook, "alice").iter().any(|r| r["spec"]
            ["resourceAttributes"]
            == json!({"namespace": "team-a", "verb": "get", "version": "v1", "resource": "configmaps", "name": "settings"})),
        "{:?}",
        webhook.reviews()
    );

    // A list's selectors go as requirements (kube's AuthorizeWithSelectors); the name from
    // `metadata.name` too, as before.
    ok_as(
        &gate,
        "alice",
        &[
            "get",
            "cm",
            "-n",
            "team-a",
            "-l",
            "app in (web,api),tier!=db,!legacy,rank>2",
            "--field-selector",
            "metadata.name=settings,metadata.namespace!=x",
        ],
    );
    let selected = reviews_for(&webhook, "alice")
        .into_iter()
        .find(|r| {
            r["spec"]["resourceAttributes"]
                .get("labelSelector")
                .is_some()
        })
        .unwrap_or_else(|| panic!("no review with selectors in {:?}", webhook.reviews()));
    assert_eq!(
        selected["spec"]["resourceAttributes"],
        json!({"namespace": "team-a", "verb": "list", "version": "v1", "resource": "configmaps",
            "name": "settings",
            "fieldSelector": {"requirements": [
                {"key": "metadata.name", "operator": "In", "values": ["settings"]},
                {"key": "metadata.namespace", "operator": "NotIn", "values": ["x"]}]},
            "labelSelector": {"requirements": [
                {"key": "app", "operator": "In", "values": ["api", "web"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "NotIn", "values": ["db"]}]}})
    );

    // bob: denied, and the 403 carries the webhook's reason.
    let denied = fails_as(
        &gate,
        "bob",
        &["get", "--raw", "/api/v1/namespaces/team-a/configmaps"],
    );
    assert!(
        denied.contains(r#"configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "team-a": bob is blocked by the fixture webhook"#),
        "{denied}"
    );
    let (code, status) = request_as(
        &gate,
        "bob",
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        None,
    );
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        r#"configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "team-a": bob is blocked by the fixture webhook"#
    );
    // kubectl --raw also asked for /version; the list itself was reviewed once, the
    // denial being cached for the second request.
    let bob_lists: Vec<Value> = reviews_for(&webhook, "bob")
        .into_iter()
        .filter(|r| r["spec"]["resourceAttributes"]["resource"] == "configmaps")
        .collect();
    assert_eq!(bob_lists.len(), 1, "the denial was cached: {bob_lists:?}");
    assert_eq!(
        bob_lists[0]["spec"]["groups"],
        json!(["system:authenticated"])
    );

    // carol: the webhook has no opinion, so nothing allows her.
    let (code, status) = request_as(
        &gate,
        "carol",
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        None,
    );
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        r#"configmaps is forbidden: User "carol" cannot list resource "configmaps" in API group "" in the namespace "team-a": the fixture webhook has no opinion"#
    );

    // Allowed answers are cached too: asking again does not reach the webhook.
    let before = webhook.reviews().len();
    ok_as(
        &gate,
        "alice",
        &["get", "--raw", "/api/v1/namespaces/team-a/configmaps"],
    );
    assert_eq!(webhook.reviews().len(), before);

    // The webhook goes away.
    webhook.stop();
    // dave was never asked about: no cache entry, and the review cannot be made, so the
    // request fails with kube's 500 (WithAuthorization's InternalError), never an allow and
    // never a 403 a client would take for an answer.
    let path = "/api/v1/namespaces/team-a/configmaps";
    let (code, status) = request_as(&gate, "dave", "GET", path, None);
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["reason"], "InternalError", "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("Internal error occurred: \"{path}\": ")),
        "{message}"
    );
    assert!(!message.contains(token("dave")), "{message}");
    let failed = fails_as(&gate, "dave", &["get", "--raw", path]);
    assert!(failed.contains("InternalError"), "{failed}");
    // alice's question about a new object is not cached either.
    let (code, _) = request_as(
        &gate,
        "alice",
        "GET",
        "/api/v1/namespaces/team-a/configmaps/other",
        None,
    );
    assert_eq!(code, 500);
    // An access review asked while the webhook is down says why it could not decide.
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "dave", "resourceAttributes": {"namespace": "team-a", "verb": "list",
            "resource": "configmaps"}}});
    let (code, body) = gate.curl(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &["Content-Type: application/json"],
        Some(review.to_string().as_bytes()),
    );
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["status"]["allowed"], false, "{answer}");
    assert!(answer["status"].get("denied").is_none(), "{answer}");
    assert!(
        !answer["status"]["evaluationError"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{answer}"
    );
    let log = gate.log();
    assert!(
        log.contains("Failed to make webhook authorizer request"),
        "{}",
        tail(&log, 30)
    );
    // Cached allowed answers live on for their TTL (5m by default), as in kube.
    ok_as(
        &gate,
        "alice",
        &["get", "--raw", "/api/v1/namespaces/team-a/configmaps"],
    );
    assert_no_tokens_logged(&gate);
}

#[test]
fn abac_then_webhook_with_v1beta1_reviews() {
    let webhook = SubjectAccessReviewWebhook::start(json!({
        "alice": {"allowed": true},
    }));
    let dir = tempfile::tempdir().unwrap();
    let config = token_config(dir.path());
    let policy_file = dir.path().join("abac.jsonl");
    std::fs::write(
        &policy_file,
        policy(
            json!({"user": "alice", "namespace": "team-a", "resource": "*", "apiGroup": "*", "readonly": true}),
        ) + "\n",
    )
    .unwrap();
    let gate = Kubegate::start_with(&[
        "--config",
        config.to_str().unwrap(),
        "--authorization-mode=ABAC,Webhook",
        &format!("--authorization-policy-file={}", policy_file.display()),
        &format!(
            "--authorization-webhook-config-file={}",
            webhook.kubeconfig().display()
        ),
        // kube's default version: v1beta1.
        "--authorization-webhook-cache-authorized-ttl=0s",
    ]);
    seed(&gate);

    // ABAC allows the read: the webhook is not asked.
    let (code, _) = request_as(
        &gate,
        "alice",
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        None,
    );
    assert_eq!(code, 200);
    assert!(webhook.reviews().is_empty(), "{:?}", webhook.reviews());
    // ABAC has no opinion on the write: the webhook allows it, in a v1beta1 review.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}});
    let (code, created) = request_as(
        &gate,
        "alice",
        "POST",
        "/api/v1/namespaces/team-a/configmaps",
        Some(&body),
    );
    assert_eq!(code, 201, "{created}");
    let reviews = webhook.reviews();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0]["apiVersion"], "authorization.k8s.io/v1beta1");
    assert_eq!(
        reviews[0]["spec"]["group"],
        json!(["team-a-readers", "system:authenticated"])
    );
    assert!(reviews[0]["spec"].get("groups").is_none());
    assert_eq!(reviews[0]["spec"]["resourceAttributes"]["verb"], "create");
    // A zero authorized TTL: the next write is asked again.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w2"}});
    let (code, _) = request_as(
        &gate,
        "alice",
        "POST",
        "/api/v1/namespaces/team-a/configmaps",
        Some(&body),
    );
    assert_eq!(code, 201);
    assert_eq!(webhook.reviews().len(), 2);
}

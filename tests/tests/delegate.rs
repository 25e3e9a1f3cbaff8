//! End-to-end fronting of a cluster (`delegate:`): a second kubegate plays the existing
//! cluster, the first stands in front of it with its own built-in group-versions switched off
//! (`runtimeConfig`), discovers the delegate's, registers them as APIServices and proxies to
//! them with the caller's identity — as `Impersonate-*` headers on kubegate's own credential,
//! or as front-proxy `X-Remote-*` headers on a front-proxy certificate the delegate trusts.
//! Driven with the real kubectl on both sides.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use kubegate_tests::wardle::make_front_proxy_ca;
use kubegate_tests::{eventually, Kubegate};
use serde_json::Value;

const ALICE_TOKEN: &str = "alice-token-0123456789";

/// The front kubegate's configuration: fast probes and discovery, the delegate, and
/// `runtimeConfig`. `credentials` is the YAML of the delegate's credential fields.
fn front_config(
    dir: &Path,
    delegate: &Kubegate,
    credentials: &str,
    runtime_config: &str,
    authorization: &str,
) -> std::path::PathBuf {
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ALICE_TOKEN},alice,alice-uid,\"devs,qa\"\n"),
    )
    .expect("tokens");
    let config = dir.join("front.yaml");
    std::fs::write(
        &config,
        format!(
            "aggregator:\n  availabilityCheckInterval: 1s\n  discoveryRefreshInterval: 1s\n  probeTimeout: 2s\n\
             authentication:\n  tokenAuthFile: {tokens}\n\
             authorization:\n  modes: [{authorization}]\n\
             delegate:\n  server: {server}\n  caFile: {ca}\n  syncInterval: 1s\n{credentials}\
             runtimeConfig:\n{runtime_config}",
            tokens = tokens.display(),
            server = delegate.url(),
            ca = delegate.data_dir.join("pki/ca.crt").display(),
        ),
    )
    .expect("config");
    config
}

/// The delegate credentials of a front that impersonates with the cluster's admin
/// certificate (system:masters may impersonate).
fn impersonating_as_admin(cluster: &Kubegate) -> String {
    let pki = cluster.data_dir.join("pki");
    format!(
        "  identityForwarding: impersonate\n  clientCertFile: {}\n  clientKeyFile: {}\n",
        pki.join("admin.crt").display(),
        pki.join("admin.key").display()
    )
}

/// kubectl against `gate` as alice (her token), with a fresh discovery cache.
fn as_alice(gate: &Kubegate, args: &[&str]) -> Output {
    as_bearer(gate, ALICE_TOKEN, args)
}

/// kubectl against `gate` with only a bearer token and a fresh discovery cache.
fn as_bearer(gate: &Kubegate, token: &str, args: &[&str]) -> Output {
    let cache = tempfile::tempdir().expect("cache dir");
    let mut all = vec![
        "--kubeconfig=/dev/null".to_string(),
        format!("--server={}", gate.url()),
        format!(
            "--certificate-authority={}",
            gate.data_dir.join("pki/ca.crt").display()
        ),
        format!("--token={token}"),
        format!("--cache-dir={}", cache.path().display()),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    gate.kubectl(&refs)
}

/// RBAC on `gate` letting alice impersonate any user (`alice-impersonates`).
fn let_alice_impersonate_users(gate: &Kubegate) {
    gate.ok(&[
        "create",
        "clusterrole",
        "impersonator",
        "--verb=impersonate",
        "--resource=users",
    ]);
    gate.ok(&[
        "create",
        "clusterrolebinding",
        "alice-impersonates",
        "--clusterrole=impersonator",
        "--user=alice",
    ]);
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `Available` status of an APIService on `gate`.
fn available(gate: &Kubegate, name: &str) -> String {
    stdout(&gate.kubectl(&[
        "get",
        "apiservice",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
    ]))
    .trim()
    .to_string()
}

/// Waits until the delegate's core group is registered and available on the front.
fn wait_delegated(front: &Kubegate, names: &[&str]) {
    for name in names {
        let ok = eventually(Duration::from_secs(30), || available(front, name) == "True");
        assert!(
            ok,
            "APIService {name} never became available on the front: {}\n{}",
            stdout(&front.kubectl(&["get", "apiservices"])),
            kubegate_tests::tail(&front.log(), 30)
        );
    }
}

/// `kubectl auth whoami -o json` through the front as alice: what the delegate saw.
fn whoami(front: &Kubegate, extra: &[&str]) -> Value {
    let mut args = vec!["auth", "whoami", "-o", "json"];
    args.extend_from_slice(extra);
    let out = as_alice(front, &args);
    assert!(out.status.success(), "whoami failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("SelfSubjectReview JSON")
}

#[test]
fn fronting_a_cluster_with_impersonation() {
    // The "cluster": a kubegate with RBAC, whose admin (system:masters) may impersonate.
    let mut cluster = Kubegate::start();
    let dir = tempfile::tempdir().expect("dir");
    let credentials = impersonating_as_admin(&cluster);
    let config = front_config(
        dir.path(),
        &cluster,
        &credentials,
        "  api/all: false\n",
        "AlwaysAllow",
    );
    let front = Kubegate::start_with(&["--config", &config.to_string_lossy()]);
    wait_delegated(
        &front,
        &[
            "v1.",
            "v1.rbac.authorization.k8s.io",
            "v1.authentication.k8s.io",
        ],
    );

    // Every group-version but APIServices is the cluster's; APIServices stay the front's.
    let listing = front.ok(&["get", "apiservices"]);
    let row = |name: &str| -> Vec<String> {
        listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row: {listing}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("v1.")[1..3], ["Delegate", "True"]);
    assert_eq!(row("v1.apiregistration.k8s.io")[1..3], ["Local", "True"]);
    let resources = |gate: &Kubegate| -> Vec<String> {
        let out = gate.kubectl_fresh(&["api-resources", "-o", "name"]);
        assert!(out.status.success(), "api-resources: {}", stderr(&out));
        let mut names: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
        names.sort();
        names
    };
    // Merged discovery follows availability in the background.
    let expected = resources(&cluster);
    let merged = eventually(Duration::from_secs(10), || resources(&front) == expected);
    assert!(
        merged,
        "front: {:?}\ncluster: {expected:?}",
        resources(&front)
    );

    // Merged OpenAPI has the cluster's core group too: kubectl explain works through the front.
    let explained = eventually(Duration::from_secs(10), || {
        let out = front.kubectl_fresh(&["explain", "configmaps.data"]);
        out.status.success() && stdout(&out).contains("FIELD: data")
    });
    assert!(
        explained,
        "kubectl explain configmaps through the front: {}",
        stderr(&front.kubectl_fresh(&["explain", "configmaps.data"]))
    );
    let (code, _) = front.curl("GET", "/openapi/v3/api/v1", &[], None);
    assert_eq!(code, 200, "the core group's v3 document");

    // Objects written on either side are the same objects.
    cluster.ok(&["create", "namespace", "only-on-cluster"]);
    assert_eq!(
        front
            .ok(&["get", "namespace", "only-on-cluster", "-o", "name"])
            .trim(),
        "namespace/only-on-cluster"
    );
    front.ok(&["create", "configmap", "from-front", "--from-literal=a=1"]);
    assert_eq!(
        cluster.ok(&["get", "configmap", "from-front", "-o", "jsonpath={.data.a}"]),
        "1"
    );
    cluster.ok(&["create", "configmap", "from-cluster", "--from-literal=b=2"]);
    assert_eq!(
        front.ok(&[
            "get",
            "configmap",
            "from-cluster",
            "-o",
            "jsonpath={.data.b}"
        ]),
        "2"
    );

    // The cluster sees the caller (impersonated), not the front's credential.
    let review = whoami(&front, &[]);
    assert_eq!(review["status"]["userInfo"]["username"], "alice");
    assert_eq!(review["status"]["userInfo"]["uid"], "alice-uid");
    let groups = review["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains("devs") && groups.contains("qa") && groups.contains("system:authenticated"),
        "{groups}"
    );
    // The cluster's ServiceAccount tokens: judged by the cluster, with kubegate's credential.
    cluster_service_account_token_works_through(&front, &cluster);
    // ... so the cluster's own RBAC decides: alice may do nothing there yet.
    let denied = as_alice(&front, &["get", "configmaps", "-n", "default"]);
    assert!(
        stderr(&denied).contains(
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        "{}",
        stderr(&denied)
    );
    cluster.ok(&[
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
        "-n",
        "default",
    ]);
    let allowed = eventually(Duration::from_secs(10), || {
        stdout(&as_alice(
            &front,
            &["get", "configmaps", "-n", "default", "-o", "name"],
        ))
        .contains("configmap/from-cluster")
    });
    assert!(allowed, "alice's view binding on the cluster did not apply");
    let create = as_alice(&front, &["create", "configmap", "nope", "-n", "default"]);
    assert!(
        stderr(&create).contains("User \"alice\" cannot create resource \"configmaps\""),
        "{}",
        stderr(&create)
    );

    // Impersonation on the cluster's requests is the cluster's to allow (the front's
    // AlwaysAllow allows anything, and its credential impersonates): asked with a
    // SubjectAccessReview, the cluster refuses alice until it grants her.
    let as_other = |name: &str| {
        as_alice(
            &front,
            &[
                "get",
                "configmaps",
                "-n",
                "default",
                "-o",
                "name",
                &format!("--as={name}"),
            ],
        )
    };
    let refused = as_other("bob");
    assert!(
        stderr(&refused).contains(
            "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        ),
        "{}",
        stderr(&refused)
    );
    let_alice_impersonate_users(&cluster);
    cluster.ok(&[
        "create",
        "rolebinding",
        "carol-view",
        "--clusterrole=view",
        "--user=carol",
        "-n",
        "default",
    ]);
    // (Another name than bob: the front reuses the cluster's refusals for a few seconds.)
    let allowed = eventually(Duration::from_secs(10), || {
        stdout(&as_other("carol")).contains("configmap/from-cluster")
    });
    assert!(allowed, "{}", stderr(&as_other("carol")));
    // A grant the cluster revokes stops working within seconds (answers are reused 10 s).
    cluster.ok(&["delete", "clusterrolebinding", "alice-impersonates"]);
    let revoked = eventually(Duration::from_secs(25), || {
        stderr(&as_other("carol")).contains("cannot impersonate resource \"users\"")
    });
    assert!(revoked, "{}", stdout(&as_other("carol")));

    // Watches stream through.
    let watch = front.stream(&["get", "configmaps", "-n", "default", "-w", "-o", "name"]);
    cluster.ok(&["create", "configmap", "watched", "--from-literal=c=3"]);
    assert!(
        watch
            .wait_for(Duration::from_secs(15), |l| l.contains("configmap/watched"))
            .is_some(),
        "the front's watch never saw a change made on the cluster"
    );

    // The cluster goes down: its APIServices turn unavailable and its requests get 503,
    // while the front's own APIServices keep working; it comes back on its own.
    cluster.terminate(Duration::from_secs(10));
    let down = eventually(Duration::from_secs(20), || {
        available(&front, "v1.") == "False"
    });
    assert!(down, "v1. stayed available with the cluster down");
    let failed = front.kubectl(&["get", "namespaces"]);
    assert!(!failed.status.success());
    assert!(
        stderr(&failed).contains("ServiceUnavailable")
            || stderr(&failed).contains("the server is currently unable to handle the request"),
        "{}",
        stderr(&failed)
    );
    assert!(front
        .ok(&["get", "apiservices"])
        .contains("FailedDiscoveryCheck"));
    cluster.restart();
    let back = eventually(Duration::from_secs(30), || {
        front
            .kubectl(&["get", "namespace", "only-on-cluster"])
            .status
            .success()
    });
    assert!(back, "the front never recovered once the cluster was back");
}

/// A ServiceAccount token `cluster` issues authenticates at `front` (a TokenReview there), as
/// that ServiceAccount; one the cluster does not accept is a 401.
fn cluster_service_account_token_works_through(front: &Kubegate, cluster: &Kubegate) {
    cluster.ok(&["create", "serviceaccount", "bot"]);
    let token = cluster.ok(&["create", "token", "bot"]).trim().to_string();
    let out = as_bearer(front, &token, &["auth", "whoami", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(&out),
        kubegate_tests::tail(&front.log(), 20)
    );
    let review: Value = serde_json::from_slice(&out.stdout).expect("SelfSubjectReview JSON");
    assert_eq!(
        review["status"]["userInfo"]["username"],
        "system:serviceaccount:default:bot"
    );
    let groups = review["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains("system:serviceaccounts:default"),
        "{groups}"
    );
    // Deleted on the cluster, its ServiceAccount's token stops working (after the cached
    // answer's 10 s at most).
    cluster.ok(&["delete", "serviceaccount", "bot"]);
    let refused = eventually(Duration::from_secs(20), || {
        stderr(&as_bearer(front, &token, &["auth", "whoami"])).contains("Unauthorized")
    });
    assert!(
        refused,
        "{}",
        stderr(&as_bearer(front, &token, &["auth", "whoami"]))
    );
}

#[test]
fn fronting_a_cluster_with_front_proxy_headers() {
    let dir = tempfile::tempdir().expect("dir");
    let front_proxy = make_front_proxy_ca(dir.path());
    // The cluster trusts the front-proxy CA for X-Remote-* identities.
    let cluster_config = dir.path().join("cluster.yaml");
    std::fs::write(
        &cluster_config,
        format!(
            "authentication:\n  requestHeader:\n    clientCAFile: {}\n    allowedNames: [front-proxy-client]\n",
            front_proxy.ca_cert.display()
        ),
    )
    .expect("cluster config");
    let cluster = Kubegate::start_with(&["--config", &cluster_config.to_string_lossy()]);
    let credentials = format!(
        "  identityForwarding: frontProxy\n  clientCertFile: {}\n  clientKeyFile: {}\n",
        front_proxy.client_cert.display(),
        front_proxy.client_key.display()
    );
    // Only the core group and SelfSubjectReviews are the cluster's; RBAC stays the front's,
    // so both sides authorize.
    let config = front_config(
        dir.path(),
        &cluster,
        &credentials,
        "  api/v1: false\n  authentication.k8s.io/v1: false\n",
        "RBAC",
    );
    let front = Kubegate::start_with(&["--config", &config.to_string_lossy()]);
    wait_delegated(&front, &["v1.", "v1.authentication.k8s.io"]);
    // The cluster's RBAC group is claimed by the front's own.
    let rbac = front.json(&[
        "get",
        "apiservice",
        "v1.rbac.authorization.k8s.io",
        "-o",
        "json",
    ]);
    assert!(rbac["metadata"]["annotations"]["kubegate.io/delegate"].is_null());

    // X-Remote-* carry the caller; the cluster believes them because of the certificate.
    let review = whoami(&front, &[]);
    assert_eq!(review["status"]["userInfo"]["username"], "alice");
    assert_eq!(review["status"]["userInfo"]["uid"], "alice-uid");

    // A token the cluster issued (a ServiceAccount's) is the cluster's to judge: the front
    // asks it with a TokenReview, as kubegate's own identity there.
    cluster_service_account_token_works_through(&front, &cluster);

    // Impersonation is decided by the front and, for the cluster's requests, by the cluster
    // too (the real user goes with the Impersonate-* headers): the admin may on both.
    let out = front.kubectl_fresh(&[
        "auth",
        "whoami",
        "-o",
        "json",
        "--as=bob",
        "--as-group=testers",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let review: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(review["status"]["userInfo"]["username"], "bob");
    assert!(review["status"]["userInfo"]["groups"]
        .to_string()
        .contains("testers"));

    // A client's own X-Remote-User never reaches the cluster.
    let (code, body) = front.curl(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[
            "Content-Type: application/json",
            "X-Remote-User: mallory",
            "X-Remote-Group: system:masters",
        ],
        Some(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).expect("json");
    let user = review["status"]["userInfo"].to_string();
    assert!(!user.contains("mallory"), "{user}");
    assert!(
        user.contains("system:masters"),
        "the admin's own groups: {user}"
    );

    // A GET from an HTTP/1.1 client is forwarded to the cluster over HTTP/2 (kubegate offers
    // h2) and its answer goes back as HTTP/1.1, whichever of the two each side speaks.
    for (client, (code, body)) in [
        (
            "HTTP/1.1",
            front.curl_http1("GET", "/api/v1/namespaces/default", &[], None),
        ),
        (
            "HTTP/2",
            front.curl("GET", "/api/v1/namespaces/default", &[], None),
        ),
    ] {
        assert_eq!(code, 200, "{client}: {}", String::from_utf8_lossy(&body));
        let namespace: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(namespace["metadata"]["name"], "default", "{client}");
    }

    // Both sides authorize: a binding on the cluster alone is not enough, nor one on the
    // front alone.
    let list = |gate: &Kubegate| as_alice(gate, &["get", "configmaps", "-n", "default"]);
    assert!(stderr(&list(&front)).contains("cannot list resource \"configmaps\""));
    cluster.ok(&[
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
        "-n",
        "default",
    ]);
    let still = list(&front);
    assert!(
        stderr(&still).contains("User \"alice\" cannot list resource \"configmaps\""),
        "the front's RBAC must still refuse: {}",
        stderr(&still)
    );
    front.ok(&[
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
        "-n",
        "default",
    ]);
    let allowed = eventually(Duration::from_secs(10), || list(&front).status.success());
    assert!(allowed, "{}", stderr(&list(&front)));

    // The cluster decides impersonation on its requests, as kube-apiserver does: alice may
    // impersonate on the front, not on the cluster, so the cluster refuses her...
    let_alice_impersonate_users(&front);
    // (authorization.k8s.io is the front's: its answer is the front's RBAC.)
    let front_allows = eventually(Duration::from_secs(10), || {
        stdout(&as_alice(
            &front,
            &["auth", "can-i", "impersonate", "users"],
        ))
        .trim()
            == "yes"
    });
    assert!(
        front_allows,
        "the front's RBAC never allowed alice to impersonate"
    );
    // (A SelfSubjectReview created as such: `kubectl auth whoami` hides a 403's message.)
    let review = dir.path().join("review.json");
    std::fs::write(
        &review,
        r#"{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}"#,
    )
    .expect("review");
    let review = review.to_string_lossy().to_string();
    let as_bob = || {
        as_alice(
            &front,
            &[
                "create",
                "-f",
                &review,
                "--validate=false",
                "-o",
                "json",
                "--as=bob",
            ],
        )
    };
    let refused = eventually(Duration::from_secs(10), || {
        stderr(&as_bob()).contains(
            "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
        )
    });
    assert!(refused, "{}", stderr(&as_bob()));
    // ...until the cluster allows it too.
    let_alice_impersonate_users(&cluster);
    let allowed = eventually(Duration::from_secs(10), || as_bob().status.success());
    assert!(allowed, "{}", stderr(&as_bob()));
    let review: Value = serde_json::from_slice(&as_bob().stdout).expect("json");
    assert_eq!(review["status"]["userInfo"]["username"], "bob");

    // The cluster's namespaces are the ones the front's own kinds are written into: a grant
    // in a namespace only the cluster holds is taken (kube's NamespaceLifecycle checks the
    // namespaces its API serves).
    front.ok(&["create", "namespace", "team-z"]);
    let (code, _) = cluster.curl("GET", "/api/v1/namespaces/team-z", &[], None);
    assert_eq!(code, 200, "the namespace is the cluster's");
    front.ok(&[
        "-n",
        "team-z",
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
    ]);
    let binding = front.json(&[
        "-n",
        "team-z",
        "get",
        "rolebinding",
        "alice-view",
        "-o",
        "json",
    ]);
    assert_eq!(binding["subjects"][0]["name"], "alice");
}

#[test]
fn runtime_config_names_only_served_group_versions() {
    let dir = tempfile::tempdir().expect("dir");
    for (value, expected) in [
        (
            "widgets.example.com/v1=false",
            "runtimeConfig[widgets.example.com/v1]: Invalid value",
        ),
        (
            "apiregistration.k8s.io/v1=false",
            "this group-version cannot be switched off",
        ),
        (
            "api/all=maybe",
            "--runtime-config: invalid value of api/all",
        ),
    ] {
        let out = std::process::Command::new(kubegate_tests::binary())
            .args(["serve", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--secure-port", &kubegate_tests::free_port().to_string()])
            .args(["--bind-address", "127.0.0.1", "--runtime-config", value])
            .output()
            .expect("run kubegate");
        assert!(!out.status.success(), "{value} was accepted");
        let text = stderr(&out);
        assert!(text.contains(expected), "{value}: {text}");
    }
}

#[test]
fn a_switched_off_group_version_is_not_served_without_a_delegate() {
    let gate = Kubegate::start_with(&["--runtime-config", "coordination.k8s.io/v1=false"]);
    let resources = stdout(&gate.kubectl_fresh(&["api-resources", "-o", "name"]));
    assert!(!resources.contains("leases"), "{resources}");
    assert!(resources.contains("configmaps"), "{resources}");
    let (code, body) = gate.curl("GET", "/apis/coordination.k8s.io/v1/leases", &[], None);
    assert_eq!(code, 404, "{}", String::from_utf8_lossy(&body));
    assert!(gate
        .ok(&["get", "apiservices", "-o", "name"])
        .lines()
        .all(|l| l != "apiservice.apiregistration.k8s.io/v1.coordination.k8s.io"));
}

/// A CRD written through the front to the cluster is usable through the front as soon as the
/// cluster serves it (kube serves a CRD once it is Established), not on the next discovery
/// sync: the front fetches the cluster's discovery again right after such a write.
#[test]
fn a_crd_written_through_the_front_is_served_through_it_at_once() {
    let cluster = Kubegate::start();
    let dir = tempfile::tempdir().expect("dir");
    let credentials = impersonating_as_admin(&cluster);
    let config = front_config(
        dir.path(),
        &cluster,
        &credentials,
        "  api/all: false\n",
        "AlwaysAllow",
    );
    // Syncs far apart: only the prompt re-fetch can make the new CRD usable in time.
    let slow = std::fs::read_to_string(&config)
        .expect("config")
        .replace(
            "discoveryRefreshInterval: 1s",
            "discoveryRefreshInterval: 120s",
        )
        .replace("syncInterval: 1s", "syncInterval: 120s");
    std::fs::write(&config, slow).expect("config");
    let front = Kubegate::start_with(&["--config", &config.to_string_lossy()]);
    wait_delegated(&front, &["v1.apiextensions.k8s.io"]);
    // As a user scripts it: apply the CRD, wait for Established, and use it at once (the
    // front's discovery catches up with the cluster before it answers): a new group, then
    // more kinds in it.
    let group = "late.example.com";
    for n in 0..3 {
        let crd = format!(
            r#"{{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
              "metadata": {{"name": "gizmos{n}.{group}"}},
              "spec": {{"group": "{group}", "scope": "Namespaced",
                "names": {{"plural": "gizmos{n}", "singular": "gizmo{n}", "kind": "Gizmo{n}"}},
                "versions": [{{"name": "v1", "served": true, "storage": true,
                  "schema": {{"openAPIV3Schema": {{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}]}}}}"#
        );
        front.ok_stdin(&["apply", "-f", "-"], &crd);
        front.ok(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            &format!("crd/gizmos{n}.{group}"),
        ]);
        front.ok_stdin(
            &["apply", "-f", "-"],
            &format!(
                r#"{{"apiVersion": "{group}/v1", "kind": "Gizmo{n}", "metadata": {{"name": "g", "namespace": "default"}}}}"#
            ),
        );
        let on_cluster = cluster.ok(&[
            "get",
            &format!("gizmos{n}.{group}"),
            "-n",
            "default",
            "-o",
            "name",
        ]);
        assert_eq!(on_cluster.trim(), format!("gizmo{n}.{group}/g"));
    }
    // A deleted CRD leaves the front's discovery at once.
    front.ok(&["delete", "crd", &format!("gizmos2.{group}")]);
    let gone = front.fails(&["get", &format!("gizmos2.{group}")]);
    assert!(
        gone.contains("the server doesn't have a resource type"),
        "{gone}"
    );
}

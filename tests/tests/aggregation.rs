//! End-to-end aggregation: kubegate in front of the sample extension API server (wardle),
//! registered with an APIService and reached through an ExternalName Service, driven by the
//! real kubectl. Covers discovery and OpenAPI merging, proxying with the caller's identity,
//! header stripping, path normalization, availability (backend down and back), and the
//! refused-upgrade tunnel of CVE-2018-1002105.

use std::time::Duration;

use kubegate_tests::wardle::{
    wait_until_served, Wardle, WardleOptions, CHUNKED_ANSWER, DROP_WHEN_REUSED,
    ENDLESS_INFORMATIONAL, INFORMATIONAL_ANSWER, REDIRECT_ANSWER, REDIRECT_TARGET, SLOW_ANSWER,
    SLOW_SECONDS, UNASKED_SWITCH,
};
use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

const APISERVICE: &str = "v1alpha1.wardle.example.com";

/// kubegate probing and refreshing its backends every second.
fn fast_probing_gate() -> Kubegate {
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        "aggregator:\n  availabilityCheckInterval: 1s\n  discoveryRefreshInterval: 1s\n  probeTimeout: 2s\n",
    )
    .expect("write config");
    let config_path = config.path().to_string_lossy().to_string();
    Kubegate::start_with(&["--config", &config_path])
}

/// kubegate with fast probes, and wardle trusting kubegate's generated front-proxy CA.
fn start() -> (Kubegate, Wardle) {
    let gate = fast_probing_gate();
    let front_proxy_ca = gate.data_dir.join("pki").join("front-proxy-ca.crt");
    let wardle = Wardle::start(WardleOptions::new(front_proxy_ca));
    (gate, wardle)
}

/// Registers wardle (see [`kubegate_tests::wardle::register`]; Endpoints cannot point at
/// loopback addresses, `endpoints.rs` covers them in a private network namespace) and waits
/// until its group is served.
fn register(gate: &Kubegate, wardle: &Wardle) {
    kubegate_tests::wardle::register(gate, wardle);
    wait_until_served(gate);
}

/// A body sent on to a backend has no limit at kubegate (kube-aggregator streams any body; the
/// backend applies its own), while a local request's over `--max-request-bytes` is a 413.
#[test]
fn bodies_for_a_backend_are_not_held_to_kubegates_limit() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    let big = "x".repeat(4 * 1024 * 1024);
    let flunder = json!({
        "apiVersion": "wardle.example.com/v1alpha1",
        "kind": "Flunder",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"reference": big}
    });
    gate.ok_stdin(&["create", "-f", "-"], &flunder.to_string());
    let stored = gate.json(&["get", "flunder", "big", "-n", "default", "-o", "json"]);
    assert_eq!(
        stored["spec"]["reference"].as_str().map(str::len),
        Some(big.len())
    );
    let configmap = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"},
        "data": {"big": big}
    });
    let refused = gate.kubectl_stdin(&["create", "-f", "-"], Some(&configmap.to_string()));
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Request entity too large"), "{stderr}");
}

/// An ExternalName Service's backend is verified as the Service's in-cluster name, as
/// kube-aggregator does, not as the host it is dialled at: a certificate naming `localhost`
/// but not `api.wardle.svc` fails the discovery check.
#[test]
fn an_external_name_backend_is_verified_as_the_services_name() {
    let gate = fast_probing_gate();
    let mut options = WardleOptions::new(gate.data_dir.join("pki").join("front-proxy-ca.crt"));
    options.dns_names = vec!["other.wardle.svc".to_string()];
    let wardle = Wardle::start(options);
    kubegate_tests::wardle::register(&gate, &wardle);
    let message = || {
        let out = gate.kubectl(&[
            "get",
            "apiservice",
            APISERVICE,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].message}",
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert!(
        eventually(Duration::from_secs(20), || message()
            .contains("not valid for name \"api.wardle.svc\"")),
        "{}",
        message()
    );
    assert_eq!(available(&gate), "False");
}

fn available(gate: &Kubegate) -> String {
    let out = gate.kubectl(&[
        "get",
        "apiservice",
        APISERVICE,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn flunder(name: &str) -> String {
    json!({
        "apiVersion": "wardle.example.com/v1alpha1",
        "kind": "Flunder",
        "metadata": {"name": name, "namespace": "default", "labels": {"tier": "web"}},
        "spec": {"reference": "ref"}
    })
    .to_string()
}

/// The last request the backend logged for `method` on a path containing `fragment`.
fn last_request(wardle: &Wardle, method: &str, fragment: &str) -> Value {
    wardle
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["method"] == method && r["path"].as_str().unwrap_or("").contains(fragment))
        .unwrap_or_else(|| panic!("backend saw no {method} {fragment}"))
}

#[test]
fn wardle_is_discovered_and_served_with_the_callers_identity() {
    let (gate, wardle) = start();
    register(&gate, &wardle);

    let listing = gate.ok(&["get", "apiservices"]);
    let line = listing
        .lines()
        .find(|l| l.starts_with(APISERVICE))
        .unwrap_or_else(|| panic!("no wardle row: {listing}"));
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(columns[1..3], ["wardle/api", "True"], "{listing}");
    assert!(
        listing.contains("v1.apps") || listing.contains("v1.   "),
        "{listing}"
    );

    // Merged discovery: kubectl api-resources lists the backend's resources.
    let resources =
        String::from_utf8_lossy(&gate.kubectl_fresh(&["api-resources"]).stdout).to_string();
    assert!(resources.contains("namespaces"), "{resources}");
    let row = resources
        .lines()
        .find(|l| l.starts_with("flunders"))
        .expect("flunders row");
    assert!(
        row.contains("wardle.example.com/v1alpha1") && row.contains("Flunder"),
        "{row}"
    );

    // Create, get and list through kubegate; the backend sees the admin's identity from
    // kubegate's front-proxy certificate, and no credential of the client's.
    gate.ok_stdin(&["create", "-f", "-"], &flunder("one"));
    let post = last_request(&wardle, "POST", "/flunders");
    assert_eq!(post["cn"], "front-proxy-client", "{post}");
    assert_eq!(post["user"], "kubegate-admin", "{post}");
    let groups = post["groups"].as_array().cloned().unwrap_or_default();
    assert!(groups.contains(&json!("system:masters")), "{post}");
    assert!(groups.contains(&json!("system:authenticated")), "{post}");
    let header_values = post["header_values"].to_string().to_lowercase();
    assert!(!header_values.contains("authorization"), "{post}");
    // The client's address goes on in X-Forwarded-For, as kube-aggregator's proxy adds it.
    assert_eq!(
        post["header_values"]["x-forwarded-for"],
        json!(["127.0.0.1"]),
        "{post}"
    );
    // The Host is kube-aggregator's: the ExternalName Service's host and port (the TLS name
    // is `api.wardle.svc`); a forwarded GET and kubegate's own probes carry the same.
    let host = format!("localhost:{}", wardle.port());
    assert_eq!(post["host"], json!(host), "{post}");
    let got = gate.json(&["get", "flunder", "one", "-n", "default", "-o", "json"]);
    assert_eq!(got["spec"]["reference"], "ref");
    let get = last_request(&wardle, "GET", "/flunders/one");
    assert_eq!(get["host"], json!(host), "{get}");
    let probe = wardle
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["user"] == "system:kube-aggregator")
        .expect("a probe or document fetch");
    assert_eq!(probe["host"], json!(host), "{probe}");
    let all = gate.ok(&["get", "flunders", "-A"]);
    assert!(
        all.lines()
            .any(|l| l.starts_with("default") && l.contains("one")),
        "{all}"
    );
    let selected = gate.ok(&["get", "flunders", "-A", "-l", "tier=web", "-o", "name"]);
    assert!(
        selected.contains("flunder.wardle.example.com/one"),
        "{selected}"
    );

    // Impersonation: the backend sees the impersonated user, not the admin.
    gate.ok(&[
        "get",
        "flunders",
        "-n",
        "default",
        "--as",
        "bob",
        "--as-group",
        "devs",
        "--as-group",
        "system:masters",
    ]);
    let as_bob = last_request(&wardle, "GET", "/namespaces/default/flunders");
    assert_eq!(as_bob["user"], "bob", "{as_bob}");
    assert!(
        as_bob["groups"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("devs"))),
        "{as_bob}"
    );
    assert!(
        !as_bob["header_values"]
            .to_string()
            .to_lowercase()
            .contains("impersonate"),
        "{as_bob}"
    );

    // A forged identity header from the client never reaches the backend.
    let (code, body) = gate.curl(
        "GET",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one",
        &[
            "X-Remote-User: mallory",
            "X-Remote-Group: system:masters",
            "X-Remote-Extra-Scopes: all",
            "X-Forwarded-For: 6.6.6.6",
        ],
        None,
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let forged = last_request(&wardle, "GET", "/flunders/one");
    assert_eq!(forged["user"], "kubegate-admin", "{forged}");
    // A client's own X-Forwarded-For stays, followed by the address it really came from.
    assert_eq!(
        forged["header_values"]["x-forwarded-for"],
        json!(["6.6.6.6, 127.0.0.1"]),
        "{forged}"
    );
    assert!(!forged.to_string().contains("mallory"), "{forged}");
    assert!(
        !forged.to_string().to_lowercase().contains("scopes"),
        "{forged}"
    );

    // Watch streams through.
    let watch = gate.stream(&[
        "get",
        "flunders",
        "-n",
        "default",
        "-w",
        "--output-watch-events",
    ]);
    assert!(watch
        .wait_for(Duration::from_secs(10), |l| l.contains("one"))
        .is_some());
    gate.ok_stdin(&["create", "-f", "-"], &flunder("two"));
    assert!(
        watch
            .wait_for(Duration::from_secs(10), |l| l.contains("ADDED")
                && l.contains("two"))
            .is_some(),
        "watch did not see the new flunder"
    );
    drop(watch);

    // Merged OpenAPI: kubectl explain reads the backend's schema through kubegate.
    let explained = eventually(Duration::from_secs(10), || {
        String::from_utf8_lossy(&gate.kubectl_fresh(&["explain", "flunders.spec"]).stdout)
            .contains("reference")
    });
    assert!(explained, "kubectl explain flunders.spec never worked");
    let index = gate.json(&["get", "--raw", "/openapi/v3"]);
    assert!(
        index["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"].is_string(),
        "{index}"
    );

    // The group's APIGroup document is kubegate's own; the version's list is the backend's.
    let group = gate.json(&["get", "--raw", "/apis/wardle.example.com"]);
    assert_eq!(group["preferredVersion"]["version"], "v1alpha1", "{group}");
    let list = gate.json(&["get", "--raw", "/apis/wardle.example.com/v1alpha1"]);
    assert_eq!(
        list["groupVersion"], "wardle.example.com/v1alpha1",
        "{list}"
    );

    // Metrics per APIService.
    let metrics = gate.ok(&["get", "--raw", "/metrics"]);
    assert!(
        metrics.contains(&format!(
            "kubegate_proxy_requests_total{{apiservice=\"{APISERVICE}\",code=\"200\"}}"
        )),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("proxy"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(metrics.contains(&format!(
        "aggregator_unavailable_apiservice{{name=\"{APISERVICE}\"}} 0"
    )));
}

#[test]
fn a_backend_is_probed_again_for_its_own_changes_only() {
    // Probes and document fetches only on change: the interval is out of the picture.
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        "aggregator:\n  availabilityCheckInterval: 1h\n  discoveryRefreshInterval: 1h\n  probeTimeout: 2s\n",
    )
    .expect("write config");
    let config_path = config.path().to_string_lossy().to_string();
    let gate = Kubegate::start_with(&["--config", &config_path]);
    let front_proxy_ca = gate.data_dir.join("pki").join("front-proxy-ca.crt");
    let wardle = Wardle::start(WardleOptions::new(front_proxy_ca));
    register(&gate, &wardle);
    // The availability write and the discovery fetch that follow registration have landed.
    std::thread::sleep(Duration::from_secs(1));
    wardle.clear_requests();

    // Other APIServices come and go (as CRDs register their groups): the routing table changes
    // each time, but wardle's APIService does not, so it is neither probed nor fetched again.
    for i in 0..5 {
        let local = json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": format!("v1.local{i}.example.com")},
            "spec": {"group": format!("local{i}.example.com"), "version": "v1",
                     "groupPriorityMinimum": 100, "versionPriority": 10}
        });
        gate.ok_stdin(&["create", "-f", "-"], &local.to_string());
    }
    gate.ok(&["delete", "apiservice", "v1.local0.example.com"]);
    std::thread::sleep(Duration::from_secs(2));
    let seen: Vec<String> = wardle
        .requests()
        .iter()
        .map(|r| r["path"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(seen.is_empty(), "wardle was asked again: {seen:?}");
    assert_eq!(available(&gate), "True");

    // A change to its own spec is probed and fetched at once.
    gate.ok(&[
        "patch",
        "apiservice",
        APISERVICE,
        "--type=merge",
        "-p",
        r#"{"spec":{"versionPriority":20}}"#,
    ]);
    let probed = eventually(Duration::from_secs(10), || {
        let paths: Vec<String> = wardle
            .requests()
            .iter()
            .map(|r| r["path"].as_str().unwrap_or("").to_string())
            .collect();
        paths
            .iter()
            .any(|p| p.starts_with("/apis/wardle.example.com/v1alpha1"))
            && paths.iter().any(|p| p == "/apis")
    });
    assert!(
        probed,
        "no probe and fetch after the spec change: {:?}",
        wardle.requests()
    );
}

#[test]
fn authorization_and_path_normalization_come_before_the_backend() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    wardle.clear_requests();

    // A ServiceAccount without permissions is refused by kubegate with kube's message.
    gate.ok(&["create", "serviceaccount", "nobody", "-n", "default"]);
    let token = gate.ok(&["create", "token", "nobody", "-n", "default"]);
    let server = gate.url();
    let denied = gate.kubectl(&[
        "--server",
        &server,
        "--token",
        token.trim(),
        "--certificate-authority",
        &gate.data_dir.join("pki/ca.crt").to_string_lossy(),
        "--kubeconfig",
        "/dev/null",
        "get",
        "flunders",
        "-n",
        "default",
    ]);
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.contains("flunders.wardle.example.com is forbidden: User \"system:serviceaccount:default:nobody\" cannot list resource \"flunders\" in API group \"wardle.example.com\" in the namespace \"default\""),
        "{stderr}"
    );

    // Paths that would escape the authorized group-version are refused before routing.
    for path in [
        "/apis/wardle.example.com/v1alpha1/../../../api/v1/namespaces",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/%2e%2e/%2e%2e/x",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/a%2Fb",
        "/apis/wardle.example.com//v1alpha1/flunders",
    ] {
        let (code, body) = gate.curl("GET", path, &["Accept: application/json"], None);
        assert!(
            code == 400 || code == 404,
            "{path}: {code} {}",
            String::from_utf8_lossy(&body)
        );
        let status: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        assert_eq!(status["kind"], "Status", "{path}: {status}");
    }
    // Only kubegate answered: none of those requests reached the backend (probes and
    // discovery fetches by kubegate itself aside).
    let reached: Vec<Value> = wardle
        .requests()
        .into_iter()
        .filter(|r| r["user"] != "system:kube-aggregator")
        .collect();
    assert!(reached.is_empty(), "{reached:?}");
}

#[test]
fn a_dead_backend_is_unavailable_and_stale_without_slowing_the_rest() {
    let (gate, mut wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder("kept"));

    wardle.stop();
    let down = eventually(Duration::from_secs(15), || available(&gate) == "False");
    assert!(down, "APIService stayed available with its backend down");
    let condition = gate.json(&["get", "apiservice", APISERVICE, "-o", "json"]);
    let reason = condition["status"]["conditions"][0]["reason"].clone();
    assert_eq!(reason, "FailedDiscoveryCheck", "{condition}");
    // kube's words, naming the address dialled (localhost's, for the ExternalName Service).
    let message = condition["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let port = wardle.port();
    let words = |address: &str| {
        let url = format!("https://{address}:{port}/apis/wardle.example.com/v1alpha1");
        format!(
            "failing or missing response from {url}: Get \"{url}\": dial tcp {address}:{port}: connect: connection refused"
        )
    };
    assert!(
        message == words("127.0.0.1") || message == words("[::1]"),
        "{condition}"
    );
    let listing = gate.ok(&["get", "apiservices"]);
    assert!(
        listing.contains("False (FailedDiscoveryCheck)"),
        "{listing}"
    );

    // Its requests get a 503 Status a client can decode; everything else still works.
    let (code, body) = gate.curl(
        "GET",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
        &[],
        None,
    );
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    let status: Value = serde_json::from_slice(&body).expect("a Status body");
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains(APISERVICE),
        "{status}"
    );
    assert!(gate.ok(&["get", "ns"]).contains("kube-system"));
    let out = gate.kubectl_fresh(&["api-resources"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("namespaces") && stdout.contains("configmaps"),
        "{stdout}"
    );
    // The stale group is still listed from the last good copy, marked Stale.
    let aggregated = gate.curl(
        "GET",
        "/apis",
        &["Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"],
        None,
    );
    let doc: Value = serde_json::from_slice(&aggregated.1).expect("aggregated discovery");
    let wardle_group = doc["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|i| i["metadata"]["name"] == "wardle.example.com")
        })
        .cloned()
        .expect("wardle group listed");
    assert_eq!(
        wardle_group["versions"][0]["freshness"], "Stale",
        "{wardle_group}"
    );
    let metrics = gate.ok(&["get", "--raw", "/metrics"]);
    assert!(metrics.contains(&format!(
        "aggregator_unavailable_apiservice{{name=\"{APISERVICE}\"}} 1"
    )));
    // One transition to unavailable, one count, however many probes fail after it.
    assert!(
        metrics.contains(&format!(
            "aggregator_unavailable_apiservice_total{{name=\"{APISERVICE}\",reason=\"FailedDiscoveryCheck\"}} 1\n"
        )),
        "{metrics}"
    );

    // The backend comes back: so does the group.
    wardle.restart();
    let back = eventually(Duration::from_secs(15), || available(&gate) == "True");
    assert!(back, "APIService did not recover");
    let kept = gate.json(&["get", "flunder", "kept", "-n", "default", "-o", "json"]);
    assert_eq!(kept["metadata"]["name"], "kept");
    let fresh_again = eventually(Duration::from_secs(10), || {
        let (_, body) = gate.curl(
            "GET",
            "/apis",
            &["Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"],
            None,
        );
        // curl's user agent gets kube's indented JSON: read it, not its bytes.
        let doc: Value = serde_json::from_slice(&body).unwrap_or_default();
        let freshness: Vec<&str> = doc["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|group| group["versions"].as_array().into_iter().flatten())
            .filter_map(|version| version["freshness"].as_str())
            .collect();
        freshness.contains(&"Current") && !freshness.contains(&"Stale")
    });
    assert!(
        fresh_again,
        "discovery stayed stale after the backend returned"
    );

    // A deleted APIService leaves no gauge series behind (kube's ForgetAPIService).
    gate.ok(&["delete", "apiservice", APISERVICE]);
    let forgotten = eventually(Duration::from_secs(10), || {
        !gate.ok(&["get", "--raw", "/metrics"]).contains(&format!(
            "aggregator_unavailable_apiservice{{name=\"{APISERVICE}\"}}"
        ))
    });
    assert!(forgotten, "the deleted APIService's gauge stayed");
}

/// The namespace's deletion condition of `type_`, as (status, message).
fn namespace_condition(gate: &Kubegate, namespace: &str, type_: &str) -> Option<(String, String)> {
    let out = gate.kubectl(&["get", "namespace", namespace, "-o", "json"]);
    let ns: Value = serde_json::from_slice(&out.stdout).ok()?;
    let condition = ns["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        condition["status"].as_str()?.to_string(),
        condition["message"].as_str()?.to_string(),
    ))
}

#[test]
fn deleting_a_namespace_deletes_its_objects_in_the_backend_once_it_can_be_reached() {
    let (gate, mut wardle) = start();
    register(&gate, &wardle);
    gate.ok(&["create", "namespace", "pets"]);
    let in_pets = flunder("rex").replace("\"default\"", "\"pets\"");
    gate.ok_stdin(&["create", "-f", "-"], &in_pets);
    gate.ok_stdin(&["create", "-f", "-"], &flunder("kept"));

    // With the backend down, what the namespace holds there is unknown: the namespace waits,
    // and says why, as kube's namespace controller does.
    wardle.stop();
    let down = eventually(Duration::from_secs(15), || available(&gate) == "False");
    assert!(down, "APIService stayed available with its backend down");
    gate.ok(&["delete", "namespace", "pets", "--wait=false"]);
    let expected = "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: wardle.example.com/v1alpha1: stale GroupVersion discovery: wardle.example.com/v1alpha1";
    let reported = eventually(Duration::from_secs(15), || {
        namespace_condition(&gate, "pets", "NamespaceDeletionDiscoveryFailure")
            == Some(("True".into(), expected.into()))
    });
    assert!(
        reported,
        "{:?}",
        namespace_condition(&gate, "pets", "NamespaceDeletionDiscoveryFailure")
    );
    let phase = gate.ok(&["get", "namespace", "pets", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase.trim(), "Terminating");

    // Back: the namespace's flunders are deleted through the backend, as the namespace
    // controller, and the namespace goes; other namespaces' flunders stay.
    wardle.restart();
    let gone = eventually(Duration::from_secs(30), || {
        let out = gate.kubectl(&["get", "namespace", "pets"]);
        String::from_utf8_lossy(&out.stderr).contains("NotFound")
    });
    assert!(gone, "the namespace stayed after its backend returned");
    let deleted = last_request(&wardle, "DELETE", "/namespaces/pets/flunders");
    assert_eq!(
        deleted["user"], "system:serviceaccount:kube-system:namespace-controller",
        "{deleted}"
    );
    assert_eq!(deleted["cn"], "front-proxy-client", "{deleted}");
    let left = gate.json(&["get", "flunders", "-A", "-o", "json"]);
    let names: Vec<&str> = left["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["kept"], "{left}");
}

#[test]
fn missing_service_and_endpoints_are_reported() {
    let (gate, wardle) = start();
    let apiservice = wardle.apiservice("wardle", "api");
    gate.ok_stdin(&["apply", "-f", "-"], &apiservice.to_string());
    let reason = |gate: &Kubegate| {
        let out = gate.kubectl(&[
            "get",
            "apiservice",
            APISERVICE,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].reason}",
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert!(eventually(Duration::from_secs(10), || reason(&gate)
        == "ServiceNotFound"));
    gate.ok(&["create", "namespace", "wardle"]);
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "api", "namespace": "wardle"},
        "spec": {"ports": [{"port": wardle.port()}]}});
    gate.ok_stdin(&["apply", "-f", "-"], &service.to_string());
    assert!(eventually(Duration::from_secs(10), || reason(&gate)
        == "EndpointsNotFound"));
    let (code, body) = gate.curl(
        "GET",
        "/apis/wardle.example.com/v1alpha1/flunders",
        &[],
        None,
    );
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
}

/// A python client that sends `requests` back to back on one TLS connection and prints
/// everything it reads until the server closes or 5s pass.
const PIPELINE_PY: &str = r#"
import socket, ssl, sys, time
port, cafile, payload = int(sys.argv[1]), sys.argv[2], sys.stdin.buffer.read()
ctx = ssl.create_default_context(cafile=cafile)
with socket.create_connection(("127.0.0.1", port)) as raw:
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(payload)
        s.settimeout(5)
        out = b""
        deadline = time.time() + 5
        try:
            while time.time() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except Exception:
            pass
        sys.stdout.buffer.write(out)
"#;

/// [`pipeline`] with kubegate's admin client certificate.
fn pipeline_as_admin(gate: &Kubegate, payload: &str) -> String {
    let admin = PIPELINE_PY.replace(
        "ctx = ssl.create_default_context(cafile=cafile)\n",
        "ctx = ssl.create_default_context(cafile=cafile)\n\
         pki = cafile.rsplit('/', 1)[0]\n\
         ctx.load_cert_chain(pki + '/admin.crt', pki + '/admin.key')\n",
    );
    assert_ne!(admin, PIPELINE_PY, "the client script changed");
    let out = python_client(
        &admin,
        gate,
        gate.data_dir.join("pki/ca.crt"),
        payload.as_bytes(),
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn pipeline(gate: &Kubegate, payload: &str) -> String {
    let out = python_client(
        PIPELINE_PY,
        gate,
        gate.data_dir.join("pki/ca.crt"),
        payload.as_bytes(),
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Runs `script` with kubegate's port and `path` as its arguments and `stdin` as its input.
fn python_client(
    script: &str,
    gate: &Kubegate,
    path: std::path::PathBuf,
    stdin: &[u8],
) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(gate.port.to_string())
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write");
    child.wait_with_output().expect("python output")
}

#[test]
fn a_refused_upgrade_leaves_no_tunnel_cve_2018_1002105() {
    let tokens = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(tokens.path(), "exec-only-token,execer,uid-1\n").expect("write tokens");
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        "aggregator:\n  availabilityCheckInterval: 1s\n  probeTimeout: 2s\n",
    )
    .expect("write config");
    let gate = Kubegate::start_with(&[
        "--config",
        &config.path().to_string_lossy(),
        "--token-auth-file",
        &tokens.path().to_string_lossy(),
    ]);
    let wardle = Wardle::start(WardleOptions::new(
        gate.data_dir.join("pki/front-proxy-ca.crt"),
    ));
    register(&gate, &wardle);
    // "execer" may only exec into flunders; nothing else.
    gate.ok(&[
        "create",
        "clusterrole",
        "flunder-exec",
        "--verb=get,create",
        "--resource=flunders.wardle.example.com/exec",
    ]);
    gate.ok(&[
        "create",
        "clusterrolebinding",
        "execer",
        "--clusterrole=flunder-exec",
        "--user=execer",
    ]);
    wardle.clear_requests();

    let exec = |name: &str| {
        format!(
            "GET /apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{name}/exec HTTP/1.1\r\n\
             Host: 127.0.0.1\r\nAuthorization: Bearer exec-only-token\r\n\
             Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
        )
    };
    let smuggled = "GET /apis/wardle.example.com/v1alpha1/fischers HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                    X-Remote-User: mallory\r\nX-Remote-Group: system:masters\r\n\r\n";

    // The backend refuses the upgrade; the request sent after it on the same connection must
    // not reach the backend (it would arrive under kubegate's certificate).
    let answer = pipeline(&gate, &format!("{}{}", exec("refused"), smuggled));
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let seen: Vec<Value> = wardle
        .requests()
        .into_iter()
        .filter(|r| r["user"] != "system:kube-aggregator")
        .collect();
    assert!(
        seen.iter()
            .all(|r| !r["path"].as_str().unwrap_or("").contains("fischers")),
        "the smuggled request reached the backend: {seen:?}"
    );
    assert!(!answer.contains("FischerList"), "{answer}");
    assert!(
        seen.iter().any(
            |r| r["path"].as_str().unwrap_or("").contains("/refused/exec") && r["user"] == "execer"
        ),
        "{seen:?}"
    );

    // An accepted upgrade becomes a tunnel to the backend, as exec needs.
    let answer = pipeline(
        &gate,
        &format!("{}hello through the tunnel", exec("upgrade-ok")),
    );
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    assert!(answer.contains("hello through the tunnel"), "{answer}");
}

/// A python client that sends each request of a JSON list on one HTTP/1.1 keep-alive TLS
/// connection (client certificate `admin`), reading each response before sending the next,
/// and prints one JSON line per request: status, the local port (the same port throughout
/// means one connection) and the response body.
const KEEPALIVE_PY: &str = r#"
import http.client, json, ssl, sys
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
for method, path, body, chunked, *extra in json.load(sys.stdin):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    headers.update(extra[0] if extra else {})
    if body is not None and chunked:
        data = body.encode()
        body = iter([data[:7], data[7:]])
    conn.request(method, path, body=body, headers=headers, encode_chunked=bool(chunked))
    port_used = conn.sock.getsockname()[1]
    response = conn.getresponse()
    print(json.dumps({"status": response.status, "port": port_used,
                      "headers": [[k.lower(), v] for k, v in response.getheaders()],
                      "body": response.read().decode("utf-8", "replace")}), flush=True)
"#;

/// Sends `requests` (`[method, path, body, chunked, {extra headers}?]`, see [`KEEPALIVE_PY`])
/// in turn on one HTTP/1.1 connection as the admin; one answer (`status`, `port`, `headers`,
/// `body`) per request, or a panic with the client's errors and kubegate's log.
fn on_one_http11_connection(gate: &Kubegate, requests: &Value) -> Vec<Value> {
    answers(KEEPALIVE_PY, gate, requests)
}

/// Runs a python client of this file that sends `requests` as the admin and prints one JSON
/// answer per line; panics, with the client's errors and kubegate's log, unless every
/// request got one.
fn answers(script: &str, gate: &Kubegate, requests: &Value) -> Vec<Value> {
    let out = python_client(
        script,
        gate,
        gate.data_dir.join("pki"),
        requests.to_string().as_bytes(),
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON answer per line"))
        .collect();
    assert_eq!(
        answers.len(),
        requests.as_array().map_or(0, Vec::len),
        "{answers:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        kubegate_tests::tail(&gate.log(), 20)
    );
    answers
}

#[test]
fn http11_connections_carry_local_and_proxied_requests_in_turn() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    let flunders = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders";
    let requests = json!([
        ["GET", "/api/v1/namespaces/default", null, false],
        ["POST", flunders, flunder("h1-length"), false],
        ["GET", "/api/v1/namespaces/kube-system", null, false],
        ["POST", flunders, flunder("h1-chunked"), true],
        ["GET", format!("{flunders}/h1-length"), null, false],
        ["GET", "/version", null, false],
    ]);
    let answers = on_one_http11_connection(&gate, &requests);
    let body = |i: usize| -> Value {
        serde_json::from_str(answers[i]["body"].as_str().expect("body")).expect("JSON body")
    };
    let statuses: Vec<u64> = answers
        .iter()
        .map(|a| a["status"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(statuses, [200, 201, 200, 201, 200, 200], "{answers:?}");
    // One connection throughout: kubegate kept it open across the hand-offs both ways.
    assert!(
        answers.iter().all(|a| a["port"] == answers[0]["port"]),
        "{answers:?}"
    );
    assert_eq!(body(0)["metadata"]["name"], "default");
    assert_eq!(body(1)["metadata"]["name"], "h1-length");
    assert_eq!(body(2)["metadata"]["name"], "kube-system");
    assert_eq!(body(3)["metadata"]["name"], "h1-chunked");
    assert_eq!(body(4)["spec"]["reference"], "ref");
    assert!(body(5)["gitVersion"].is_string(), "{answers:?}");
    // The backend got both bodies whole (it stored what it parsed), from the caller.
    let posts: Vec<Value> = wardle
        .requests()
        .into_iter()
        .filter(|r| {
            r["method"] == "POST" && r["path"].as_str().unwrap_or("").ends_with("/flunders")
        })
        .collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert!(
        posts.iter().all(|r| r["user"] == "kubegate-admin"),
        "{posts:?}"
    );
    for name in ["h1-length", "h1-chunked"] {
        let stored = gate.json(&["get", "flunder", name, "-o", "json"]);
        assert_eq!(stored["spec"]["reference"], "ref", "{stored}");
        assert_eq!(stored["metadata"]["labels"]["tier"], "web", "{stored}");
    }
    let listed = gate.ok(&["get", "flunders", "-o", "name"]);
    assert!(
        listed.contains("h1-length") && listed.contains("h1-chunked"),
        "{listed}"
    );
}

/// A python client that writes every request of its input (a JSON list of raw HTTP/1.1
/// requests) in one send on one TLS connection as the admin, then reads the answers one after
/// the other (`Content-Length` or chunked bodies) and prints one JSON line per answer.
const PIPELINED_PY: &str = r#"
import json, socket, ssl, sys
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
requests = json.load(sys.stdin)
with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall("".join(requests).encode())
        f = s.makefile("rb")
        for _ in requests:
            status = f.readline()
            if not status:
                break
            headers = {}
            while True:
                line = f.readline().decode().rstrip("\r\n")
                if not line:
                    break
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if headers.get("transfer-encoding") == "chunked":
                body = b""
                while True:
                    size = int(f.readline().split(b";")[0], 16)
                    chunk = f.read(size + 2)
                    if size == 0:
                        break
                    body += chunk[:-2]
            else:
                body = f.read(int(headers.get("content-length", "0")))
            print(json.dumps({"status": int(status.split()[1]),
                              "body": body.decode("utf-8", "replace")}), flush=True)
"#;

#[test]
fn pipelined_http11_requests_are_answered_in_order_local_and_proxied() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder("piped"));
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: kubegate\r\nAccept: application/json\r\n\r\n")
    };
    let flunders = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders";
    let piped = format!("{flunders}/piped");
    let created = flunder("piped-post");
    // The POST goes through pingora's proxy, replayed from the connection's record, which
    // must hold the bytes read with the requests before it.
    let post = |path: &str, body: &str, last: bool| {
        let close = if last { "Connection: close\r\n" } else { "" };
        format!(
            "POST {path} HTTP/1.1\r\nHost: kubegate\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{close}\r\n{body}",
            body.len()
        )
    };
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "piped-cm"}, "data": {"k": "v"}})
    .to_string();
    // Forwarded first, then local, forwarded again, local (a body too), and the proxy's
    // last: every hand-off, each with the next request already read.
    let requests = json!([
        get(&piped),
        get("/api/v1/namespaces/default"),
        get(&piped),
        get("/version"),
        post("/api/v1/namespaces/default/configmaps", &configmap, false),
        get("/api/v1/namespaces/default/configmaps/piped-cm"),
        post(flunders, &created, true),
    ]);
    let answers = answers(PIPELINED_PY, &gate, &requests);
    let context = format!("{answers:?}");
    let statuses: Vec<u64> = answers
        .iter()
        .map(|a| a["status"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 201, 200, 201], "{context}");
    let body = |i: usize| -> Value {
        serde_json::from_str(answers[i]["body"].as_str().expect("body")).expect("JSON body")
    };
    assert_eq!(body(0)["metadata"]["name"], "piped", "{context}");
    assert_eq!(body(1)["metadata"]["name"], "default", "{context}");
    assert_eq!(body(2)["metadata"]["name"], "piped", "{context}");
    assert!(body(3)["gitVersion"].is_string(), "{context}");
    assert_eq!(body(4)["metadata"]["name"], "piped-cm", "{context}");
    assert_eq!(body(5)["data"]["k"], "v", "{context}");
    assert_eq!(body(6)["metadata"]["name"], "piped-post", "{context}");
    let stored = gate.json(&["get", "flunder", "piped-post", "-o", "json"]);
    assert_eq!(stored["spec"]["reference"], "ref", "{stored}");
    let gets = wardle
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "GET" && r["path"] == piped.as_str())
        .count();
    assert_eq!(gets, 2, "the backend saw each forwarded GET once");
}

/// The codes the backend logged for GETs of the flunder `name` (0: closed unanswered).
fn get_codes(wardle: &Wardle, name: &str) -> Vec<u64> {
    let suffix = format!("/flunders/{name}");
    wardle
        .requests()
        .iter()
        .filter(|r| r["method"] == "GET" && r["path"].as_str().unwrap_or("").ends_with(&suffix))
        .map(|r| r["code"].as_u64().unwrap_or(u64::MAX))
        .collect()
}

#[test]
fn a_get_on_a_pooled_connection_the_backend_closed_is_retried_on_a_new_one() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(DROP_WHEN_REUSED));
    let path =
        format!("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{DROP_WHEN_REUSED}");
    // The first GET opens the front's pooled connection to the backend; the second reuses it
    // and the backend closes it unanswered, so kubegate must send it again on a new one.
    for round in 1..=2 {
        let (code, body) = gate.curl("GET", &path, &["Accept: application/json"], None);
        let body = String::from_utf8_lossy(&body);
        assert_eq!(
            code,
            200,
            "GET {round}: {body}\n{}",
            kubegate_tests::tail(&gate.log(), 20)
        );
        let object: Value = serde_json::from_str(&body).expect("a flunder");
        assert_eq!(object["metadata"]["name"], DROP_WHEN_REUSED);
    }
    assert_eq!(
        get_codes(&wardle, DROP_WHEN_REUSED),
        [200, 0, 200],
        "the backend sees: answered on a new connection, dropped on the reused one, answered on another new one"
    );
}

#[test]
fn hop_by_hop_request_headers_do_not_reach_the_backend() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder("hop"));
    // HTTP/1.1: over HTTP/2 a client may not send connection-specific headers at all.
    let hop_headers = json!({
        "Accept": "application/json",
        "Connection": "keep-alive, X-Hop-Only",
        "X-Hop-Only": "1",
        "Keep-Alive": "timeout=5",
        "Proxy-Connection": "keep-alive",
        "X-End-To-End": "1",
    });
    let requests = json!([[
        "GET",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/hop",
        null,
        false,
        hop_headers
    ]]);
    let answer = &on_one_http11_connection(&gate, &requests)[0];
    assert_eq!(answer["status"], 200, "{answer}");
    let seen = last_request(&wardle, "GET", "/flunders/hop");
    let names: Vec<&str> = seen["headers"]
        .as_array()
        .expect("header names")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(names.contains(&"x-end-to-end"), "{names:?}");
    for hop in ["x-hop-only", "keep-alive", "proxy-connection"] {
        assert!(
            !names.contains(&hop),
            "{hop} reached the backend: {names:?}"
        );
    }
}

#[test]
fn a_chunked_answer_loses_its_hop_by_hop_headers_on_either_protocol() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(CHUNKED_ANSWER));
    let path =
        format!("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{CHUNKED_ANSWER}");
    // HTTP/1.1, twice on one connection: the answer is re-framed (no length: chunked) and the
    // connection stays usable.
    let requests = json!([["GET", path, null, false], ["GET", path, null, false]]);
    let answers = on_one_http11_connection(&gate, &requests);
    assert_eq!(answers[0]["port"], answers[1]["port"], "one connection");
    for answer in &answers {
        assert_eq!(answer["status"], 200, "{answer}");
        let object: Value =
            serde_json::from_str(answer["body"].as_str().expect("body")).expect("JSON body");
        assert_eq!(object["metadata"]["name"], CHUNKED_ANSWER);
        let headers = answer["headers"].as_array().expect("headers");
        let has = |name: &str| headers.iter().any(|h| h[0] == name);
        assert!(has("x-backend-end-to-end"), "{headers:?}");
        assert!(!has("x-backend-hop"), "{headers:?}");
        assert!(!has("keep-alive"), "{headers:?}");
        let connection: Vec<&Value> = headers.iter().filter(|h| h[0] == "connection").collect();
        assert!(
            connection
                .iter()
                .all(|h| !h[1].as_str().unwrap_or("").contains("X-Backend-Hop")),
            "{headers:?}"
        );
    }
    // HTTP/2 has no connection-specific headers at all.
    let (code, body) = gate.curl("GET", &path, &["Accept: application/json"], None);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let object: Value = serde_json::from_slice(&body).expect("JSON body");
    assert_eq!(object["metadata"]["name"], CHUNKED_ANSWER);
}

/// `apiserver_current_inflight_requests{request_kind="readOnly"}`.
fn read_only_in_flight(gate: &Kubegate) -> i64 {
    let (_, body) = gate.curl("GET", "/metrics", &[], None);
    String::from_utf8_lossy(&body)
        .lines()
        .find(|l| {
            l.starts_with("apiserver_current_inflight_requests{")
                && l.contains("request_kind=\"readOnly\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map_or(-1, |v| v as i64)
}

#[test]
fn a_client_that_goes_away_while_the_backend_works_is_let_go() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(SLOW_ANSWER));
    let path =
        format!("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{SLOW_ANSWER}");
    // The gauge counts the /metrics GET that reads it, too.
    let idle = read_only_in_flight(&gate);
    assert!(idle >= 0, "no readOnly in-flight gauge");
    for protocol in ["--http1.1", "--http2"] {
        // curl gives up after 1 s; the backend answers only after SLOW_SECONDS.
        let pki = gate.data_dir.join("pki");
        let out = std::process::Command::new("curl")
            .args(["-sS", protocol, "--max-time", "1", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .arg(format!("{}{path}", gate.url()))
            .output()
            .expect("curl");
        assert!(
            !out.status.success(),
            "{protocol}: the GET should have timed out"
        );
        // The request stops counting (its seats and its in-flight slot go back) well before
        // the backend would have answered.
        let released = eventually(Duration::from_secs(SLOW_SECONDS / 2), || {
            read_only_in_flight(&gate) == idle
        });
        assert!(
            released,
            "{protocol}: in flight: {} (idle: {idle})",
            read_only_in_flight(&gate)
        );
    }
}

/// A backend's discovery document (`/apis/<group>/<version>`) has kube's 5 s: a slow backend
/// is a quick 503, not a discovery held up until the request's deadline.
#[test]
fn a_backend_slow_to_give_its_discovery_document_fails_in_five_seconds() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    // (The answer itself shows the 5 s applied: the backend would answer 200 after
    // SLOW_SECONDS, and the request's own deadline is a minute.)
    let (code, body) = gate.curl("GET", "/apis/wardle.example.com/v1alpha1?slow=1", &[], None);
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(code, 503, "{status}");
    assert_eq!(
        status["message"],
        "error trying to reach service: context deadline exceeded"
    );
    drop(wardle);
}

/// A backend whose probe fails is probed again with kube's backoff (5 ms doubling), not only
/// every `availabilityCheckInterval`: one that comes up moments later is Available moments
/// later.
#[test]
fn a_failing_backend_is_probed_again_soon() {
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        "aggregator:\n  availabilityCheckInterval: 60s\n  probeTimeout: 2s\n",
    )
    .expect("write config");
    let gate = Kubegate::start_with(&["--config", &config.path().to_string_lossy()]);
    let front_proxy_ca = gate.data_dir.join("pki").join("front-proxy-ca.crt");
    let mut wardle = Wardle::start(WardleOptions::new(front_proxy_ca));
    wardle.stop();
    kubegate_tests::wardle::register(&gate, &wardle);
    assert!(
        eventually(Duration::from_secs(10), || available(&gate) == "False"),
        "{}",
        available(&gate)
    );
    wardle.restart();
    assert!(
        eventually(Duration::from_secs(20), || available(&gate) == "True"),
        "still {} long after the backend came back (the next regular probe is a minute away)",
        available(&gate)
    );
}

/// A backend that dies while its answer streams (a watch) fails the response, as Go's proxy
/// aborts it: the HTTP/1.1 connection is closed mid-body, the HTTP/2 stream reset; no error
/// Status is written into a response that then ends as if it were complete.
#[test]
fn a_backend_that_dies_mid_answer_fails_the_response() {
    let (gate, mut wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder("streamed"));
    let path = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders?watch=1";
    for protocol in ["--http1.1", "--http2"] {
        let pki = gate.data_dir.join("pki");
        let watch = std::process::Command::new("curl")
            .args(["-sS", "-N", protocol, "--max-time", "20", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .arg(format!("{}{path}", gate.url()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("curl");
        // The first event has arrived when the backend is stopped.
        std::thread::sleep(Duration::from_secs(2));
        wardle.stop();
        let out = watch.wait_with_output().expect("curl ends");
        let body = String::from_utf8_lossy(&out.stdout);
        assert!(body.contains("\"ADDED\""), "{protocol}: {body}");
        assert!(!body.contains("\"Status\""), "{protocol}: {body}");
        assert!(
            !out.status.success(),
            "{protocol}: the response ended as if complete: {body}"
        );
        wardle.restart();
        wait_until_served(&gate);
    }
}

/// A request to a backend keeps kube's deadline: `?timeout=` (or the server's) ends a slow
/// answer with kube's 504, over HTTP/1.1 and HTTP/2, and a `?timeout=` that does not parse is
/// kube's 400.
#[test]
fn a_backend_slower_than_the_requests_deadline_is_kubes_timeout() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(SLOW_ANSWER));
    let path =
        format!("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{SLOW_ANSWER}");
    for protocol in ["--http1.1", "--http2"] {
        let started = std::time::Instant::now();
        let (code, body) =
            gate.curl_as(&[protocol], "GET", &format!("{path}?timeout=1s"), &[], None);
        let status: Value = serde_json::from_slice(&body).expect("a Status");
        assert_eq!(code, 504, "{protocol}: {status}");
        assert_eq!(status["reason"], "Timeout", "{status}");
        assert_eq!(
            status["message"],
            "Timeout: request did not complete within the allotted timeout"
        );
        assert!(
            started.elapsed() < Duration::from_secs(SLOW_SECONDS),
            "{protocol}: answered at the deadline, not by the backend"
        );
    }
    let (code, body) = gate.curl("GET", &format!("{path}?timeout=abc"), &[], None);
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        r#"invalid timeout specified in the request URL - time: invalid duration "abc""#
    );
}

#[test]
fn a_backend_that_switches_protocols_unasked_opens_no_tunnel() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(UNASKED_SWITCH));
    let path =
        format!("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{UNASKED_SWITCH}");
    // One HTTP/1.1 connection: the GET the backend answers 101 gets a 503, and the same
    // connection then carries an ordinary request to kubegate, not bytes to a tunnel.
    let requests = json!([["GET", path, null, false], ["GET", "/version", null, false]]);
    let answers = on_one_http11_connection(&gate, &requests);
    assert_eq!(answers[0]["status"], 503, "{}", answers[0]);
    let status: Value =
        serde_json::from_str(answers[0]["body"].as_str().expect("body")).expect("a Status");
    assert_eq!(status["kind"], "Status");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("switched protocols"),
        "{status}"
    );
    assert_eq!(answers[1]["status"], 200, "{}", answers[1]);
    let version: Value =
        serde_json::from_str(answers[1]["body"].as_str().expect("body")).expect("JSON");
    assert!(version["gitVersion"].is_string(), "{version}");
    assert_eq!(answers[0]["port"], answers[1]["port"], "one connection");
}

/// A backend's redirect is not passed on (kube-aggregator's
/// `--aggregator-reject-forwarding-redirect`, CVE-2022-3172): a client following it would take
/// its credentials wherever the backend points. Forwarded GETs, proxied writes and upgrades
/// alike.
#[test]
fn a_backends_redirects_are_refused() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(REDIRECT_ANSWER));
    let path =
        format!("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/{REDIRECT_ANSWER}");
    // The forwarded GET's connection stays open; a proxied write's closes after the answer,
    // as for every failure pingora's proxy answers.
    let requests = json!([["GET", path, null, false], ["GET", "/version", null, false]]);
    let mut answers = on_one_http11_connection(&gate, &requests);
    assert_eq!(answers[1]["status"], 200, "{}", answers[1]);
    let requests = json!([["PUT", path, flunder(REDIRECT_ANSWER), false]]);
    answers.truncate(1);
    answers.extend(on_one_http11_connection(&gate, &requests));
    for answer in &answers {
        assert_eq!(answer["status"], 502, "{answer}");
        let headers = answer["headers"].as_array().expect("headers");
        assert!(
            headers.iter().all(|h| h[0] != "location"),
            "no Location goes out: {answer}"
        );
        let status: Value =
            serde_json::from_str(answer["body"].as_str().expect("body")).expect("a Status");
        assert_eq!(
            status["message"],
            "the backend attempted to redirect this request, which is not permitted",
            "{status}"
        );
        assert!(!answer["body"]
            .as_str()
            .unwrap_or("")
            .contains(REDIRECT_TARGET));
    }
    // kubectl does not follow anything either.
    let out = gate.kubectl(&["get", "--raw", &path]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the backend attempted to redirect this request"),
        "{stderr}"
    );
    // An upgrade the backend answers with a redirect is kube's "invalid upgrade response".
    let exec = format!(
        "GET {path}/exec HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n\
         Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
    );
    let answer = pipeline_as_admin(&gate, &exec);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("invalid upgrade response: status code 302"),
        "{answer}"
    );
    assert!(!answer.contains(REDIRECT_TARGET), "{answer}");
}

#[test]
fn informational_answers_are_skipped_and_endless_ones_refused() {
    let (gate, wardle) = start();
    register(&gate, &wardle);
    gate.ok_stdin(&["create", "-f", "-"], &flunder(INFORMATIONAL_ANSWER));
    gate.ok_stdin(&["create", "-f", "-"], &flunder(ENDLESS_INFORMATIONAL));
    let flunders = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders";
    // Python's client takes any status but 100 as the final answer: a forwarded 103 would
    // show up here as the answer itself.
    let requests = json!([
        [
            "GET",
            format!("{flunders}/{INFORMATIONAL_ANSWER}"),
            null,
            false
        ],
        [
            "GET",
            format!("{flunders}/{ENDLESS_INFORMATIONAL}"),
            null,
            false
        ],
        ["GET", "/version", null, false],
    ]);
    let answers = on_one_http11_connection(&gate, &requests);
    assert_eq!(answers[0]["status"], 200, "{}", answers[0]);
    let object: Value =
        serde_json::from_str(answers[0]["body"].as_str().expect("body")).expect("JSON");
    assert_eq!(object["metadata"]["name"], INFORMATIONAL_ANSWER, "{object}");
    // More informational answers than Go's transport waits through: a 503 Status that says
    // why, on a connection that goes on serving.
    assert_eq!(answers[1]["status"], 503, "{}", answers[1]);
    let status: Value =
        serde_json::from_str(answers[1]["body"].as_str().expect("body")).expect("a Status");
    assert_eq!(status["kind"], "Status", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("too many informational answers"),
        "{status}"
    );
    assert_eq!(answers[2]["status"], 200, "{}", answers[2]);
    assert!(
        answers.iter().all(|a| a["port"] == answers[0]["port"]),
        "one connection: {answers:?}"
    );
}

#[test]
fn a_backend_without_a_group_list_is_discovered_from_its_group_version() {
    let gate = fast_probing_gate();
    let mut opts = WardleOptions::new(gate.data_dir.join("pki").join("front-proxy-ca.crt"));
    // /apis answers 404: as kube-aggregator, kubegate converts /apis/<group>/<version>.
    opts.group_list = false;
    let wardle = Wardle::start(opts);
    register(&gate, &wardle);
    let current = eventually(Duration::from_secs(15), || {
        let (_, body) = gate.curl(
            "GET",
            "/apis",
            &["Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"],
            None,
        );
        let doc: Value = serde_json::from_slice(&body).unwrap_or_default();
        doc["items"]
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .find(|i| i["metadata"]["name"] == "wardle.example.com")
            })
            .is_some_and(|group| {
                group["versions"][0]["freshness"] == "Current"
                    && group["versions"][0]["resources"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|r| r["resource"] == "flunders"))
            })
    });
    assert!(
        current,
        "the group-version never became Current from its legacy list"
    );
}

/// A backend that publishes only Swagger 2.0 (no `/openapi/v3`) gets its v3 document from
/// the v2 one converted, as kube-aggregator does, so `kubectl explain` (which reads v3)
/// works for its resources.
#[test]
fn a_backend_with_only_openapi_v2_is_served_converted_in_v3() {
    let gate = fast_probing_gate();
    let mut opts = WardleOptions::new(gate.data_dir.join("pki").join("front-proxy-ca.crt"));
    opts.openapi_v3 = false;
    let wardle = Wardle::start(opts);
    register(&gate, &wardle);
    let key = "apis/wardle.example.com/v1alpha1";
    let listed = eventually(Duration::from_secs(15), || {
        let (_, body) = gate.curl("GET", "/openapi/v3", &[], None);
        let index: Value = serde_json::from_slice(&body).unwrap_or_default();
        index["paths"][key]["serverRelativeURL"].is_string()
    });
    assert!(listed, "/openapi/v3 never listed {key}");
    let (status, body) = gate.curl("GET", &format!("/openapi/v3/{key}"), &[], None);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["openapi"], "3.0.0");
    assert!(doc.get("definitions").is_none() && doc.get("swagger").is_none());
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    assert!(
        schemas
            .keys()
            .any(|k| k.ends_with("wardle.v1alpha1.Flunder")),
        "{:?}",
        schemas.keys().collect::<Vec<_>>()
    );
    assert!(!String::from_utf8_lossy(&body).contains("#/definitions/"));
    let explained = eventually(Duration::from_secs(10), || {
        String::from_utf8_lossy(&gate.kubectl_fresh(&["explain", "flunders.spec"]).stdout)
            .contains("FIELDS")
    });
    assert!(explained, "kubectl explain flunders.spec never worked");
    // Only the v2 document was asked for: the fixture logs every request.
    let asked: Vec<String> = wardle
        .requests()
        .iter()
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .filter(|p| p.starts_with("/openapi"))
        .collect();
    assert!(asked.iter().any(|p| p == "/openapi/v2"), "{asked:?}");
    assert!(
        !asked.iter().any(|p| p.starts_with("/openapi/v3/")),
        "{asked:?}"
    );
}

/// `kubectl get` of the published `kube-system/extension-apiserver-authentication`, as JSON.
const GET_AUTHENTICATION_CONFIGMAP: [&str; 7] = [
    "-n",
    "kube-system",
    "get",
    "configmap",
    "extension-apiserver-authentication",
    "-o",
    "json",
];

#[test]
fn the_extension_authentication_configmap_is_restored_when_edited_or_deleted() {
    let gate = Kubegate::start();
    let data = || -> Option<Value> {
        let out = gate.kubectl(&GET_AUTHENTICATION_CONFIGMAP);
        out.status.success().then(|| {
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or_default()["data"].clone()
        })
    };
    let published = data().expect("published at start");
    assert!(
        published["client-ca-file"]
            .as_str()
            .is_some_and(|ca| ca.contains("BEGIN CERTIFICATE")),
        "{published}"
    );
    assert_eq!(
        published["requestheader-allowed-names"],
        json!("[\"front-proxy-client\"]")
    );
    // Edited: kubegate adds back what it needs. As kube's trust controller, it combines what
    // is stored with its own (another server's names and CAs stay), never replaces it.
    gate.ok(&[
        "-n",
        "kube-system",
        "patch",
        "configmap",
        "extension-apiserver-authentication",
        "--type=merge",
        "-p",
        r#"{"data":{"requestheader-allowed-names":"[\"other-proxy\"]"}}"#,
    ]);
    let restored = eventually(Duration::from_secs(10), || {
        data().is_some_and(|d| {
            d["requestheader-allowed-names"] == json!("[\"other-proxy\",\"front-proxy-client\"]")
                && d["client-ca-file"] == published["client-ca-file"]
        })
    });
    assert!(restored, "kubegate's name was not added back: {:?}", data());
    // Deleted: published again, so an extension server starting now still finds it.
    gate.ok(&[
        "-n",
        "kube-system",
        "delete",
        "configmap",
        "extension-apiserver-authentication",
    ]);
    let back = eventually(Duration::from_secs(10), || {
        data().as_ref() == Some(&published)
    });
    assert!(back, "the ConfigMap did not come back: {:?}", data());
}

/// With `--requestheader-*` configured, the published settings are the configured ones, as
/// kube publishes them, plus the CA and name of the proxy certificate kubegate generated
/// (which the configured CA did not sign), so extension servers trust both front proxies.
#[test]
fn the_extension_authentication_configmap_publishes_the_configured_request_header() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, _key) =
        kubegate_tests::openssl::make_ca(dir.path(), "front", "operator-front-proxy-ca");
    let operator_ca = std::fs::read_to_string(&ca).unwrap();
    let gate = Kubegate::start_with(&[
        &format!("--requestheader-client-ca-file={}", ca.display()),
        "--requestheader-allowed-names=operator-proxy",
        "--requestheader-username-headers=X-Remote-User,X-Forwarded-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ]);
    let data = gate.json(&GET_AUTHENTICATION_CONFIGMAP)["data"].clone();
    let published_ca = data["requestheader-client-ca-file"]
        .as_str()
        .unwrap_or_default();
    let generated_ca =
        std::fs::read_to_string(gate.data_dir.join("pki/front-proxy-ca.crt")).unwrap();
    assert!(published_ca.contains(operator_ca.trim()), "{published_ca}");
    assert!(published_ca.contains(generated_ca.trim()), "{published_ca}");
    assert_eq!(
        data["requestheader-allowed-names"],
        json!("[\"operator-proxy\",\"front-proxy-client\"]")
    );
    assert_eq!(
        data["requestheader-username-headers"],
        json!("[\"X-Remote-User\",\"X-Forwarded-User\"]")
    );
}

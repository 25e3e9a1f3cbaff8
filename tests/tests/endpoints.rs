//! End-to-end: where a remote APIService's requests go when it has several addresses, with
//! the real kubectl and sample extension API servers. kube's validation refuses loopback
//! addresses in Endpoints and EndpointSlices, so these tests run in a private network namespace
//! (`kubegate_tests::netns`) whose loopback interface also holds two TEST-NET-1 addresses.
//!
//! - A Service backed by Endpoints, then EndpointSlices (as kube-aggregator resolves one):
//!   requests spread over the ready endpoints, a not-ready endpoint left out, `MissingEndpoints`
//!   (503) when none is ready, and EndpointSlices taking precedence over Endpoints.
//! - A backend URL whose host name resolves to both addresses (a private `/etc/hosts`): as Go's
//!   dialer, requests go to one address until it refuses a connection, then to the next, for
//!   both forwarded GETs and proxied requests with a body.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use kubegate_tests::netns::{enter_private_network, enter_private_network_with_hosts};
use kubegate_tests::wardle::{wait_until_served, Wardle, WardleOptions};
use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

const APISERVICE: &str = "v1alpha1.wardle.example.com";
const FLUNDERS: &str = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders";
/// The Service port the APIService names; the backends listen on another (the target port).
const SERVICE_PORT: u16 = 443;
const FIRST: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));
const SECOND: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 11));

/// A port free on `address` a moment ago.
fn free_port_on(address: IpAddr) -> u16 {
    TcpListener::bind(SocketAddr::new(address, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port on {address}: {e}"))
}

/// A backend on `address`; `sibling` lends its serving CA, so one `caBundle` trusts both.
fn backend(gate: &Kubegate, address: IpAddr, port: u16, sibling: Option<&Wardle>) -> Wardle {
    let mut options = WardleOptions::new(gate.data_dir.join("pki").join("front-proxy-ca.crt"));
    options.address = address;
    options.port = Some(port);
    options.serving_ca = sibling.map(Wardle::serving_ca);
    Wardle::start(options)
}

/// The Available condition's status and reason.
fn availability(gate: &Kubegate) -> (String, String) {
    let out = gate.kubectl(&[
        "get",
        "apiservice",
        APISERVICE,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status} {.status.conditions[?(@.type==\"Available\")].reason}",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut words = text.split_whitespace().map(str::to_string);
    (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    )
}

/// The Endpoints object `wardle/api` with these ready and not-ready addresses.
fn endpoints(port: u16, ready: &[IpAddr], not_ready: &[IpAddr]) -> String {
    let ips = |list: &[IpAddr]| -> Vec<Value> {
        list.iter()
            .map(|ip| json!({"ip": ip.to_string()}))
            .collect()
    };
    json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "api", "namespace": "wardle"},
        "subsets": [{
            "addresses": ips(ready),
            "notReadyAddresses": ips(not_ready),
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }],
    })
    .to_string()
}

/// How many flunder lists each backend received.
fn lists(backends: &[&Wardle]) -> Vec<usize> {
    backends
        .iter()
        .map(|b| {
            b.requests()
                .iter()
                .filter(|r| {
                    r["method"] == "GET"
                        && r["path"].as_str().is_some_and(|p| p.starts_with(FLUNDERS))
                })
                .count()
        })
        .collect()
}

/// Clears both request logs, lists flunders `n` times through kubegate, and returns how many
/// lists each backend served.
fn spread(gate: &Kubegate, first: &Wardle, second: &Wardle, n: usize) -> Vec<usize> {
    first.clear_requests();
    second.clear_requests();
    for _ in 0..n {
        let (code, body) = gate.curl("GET", FLUNDERS, &[], None);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    lists(&[first, second])
}

#[test]
fn a_service_backed_apiservice_reaches_its_ready_endpoints() {
    enter_private_network(&[FIRST, SECOND]);
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        "aggregator:\n  availabilityCheckInterval: 1s\n  discoveryRefreshInterval: 1s\n  probeTimeout: 2s\n",
    )
    .expect("write config");
    let config_path = config.path().to_string_lossy().to_string();
    let gate = Kubegate::start_with(&["--config", &config_path]);
    let port = free_port_on(FIRST);
    let first = backend(&gate, FIRST, port, None);
    let mut second = backend(&gate, SECOND, port, Some(&first));

    // A Service without a selector, its Endpoints written by hand (as for a backend outside
    // the cluster's pods), and the APIService naming the Service's port.
    gate.ok(&["create", "namespace", "wardle"]);
    let mut apiservice = first.apiservice("wardle", "api");
    apiservice["spec"]["service"]["port"] = json!(SERVICE_PORT);
    let objects = json!({
        "apiVersion": "v1", "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "api", "namespace": "wardle"},
             "spec": {"ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": port}]}},
            serde_json::from_str::<Value>(&endpoints(port, &[FIRST, SECOND], &[])).expect("json"),
            apiservice,
        ]
    });
    gate.ok_stdin(&["apply", "-f", "-"], &objects.to_string());
    wait_until_served(&gate);
    assert_eq!(availability(&gate), ("True".into(), "Passed".into()));

    // kubectl reaches the backends through the Service; both ready endpoints get requests.
    let listing = gate.json(&["get", "flunders", "-A", "-o", "json"]);
    assert_eq!(listing["kind"], "List", "{listing}");
    assert_eq!(listing["items"], json!([]), "{listing}");
    let served = spread(&gate, &first, &second, 8);
    assert_eq!(served.iter().sum::<usize>(), 8, "{served:?}");
    assert!(
        served.iter().all(|n| *n >= 2),
        "requests were not spread over both endpoints: {served:?}"
    );
    // The backend saw the caller through kubegate's front-proxy identity.
    let seen = first
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["path"].as_str().is_some_and(|p| p.starts_with(FLUNDERS)))
        .expect("a list on the first backend");
    assert_eq!(seen["cn"], "front-proxy-client", "{seen}");
    assert_eq!(seen["user"], "kubegate-admin", "{seen}");

    // The second endpoint turns not ready: it gets nothing more.
    gate.ok_stdin(&["apply", "-f", "-"], &endpoints(port, &[FIRST], &[SECOND]));
    let only_first = eventually(Duration::from_secs(10), || {
        spread(&gate, &first, &second, 4) == [4, 0]
    });
    assert!(
        only_first,
        "a not-ready endpoint still got requests: {:?}",
        lists(&[&first, &second])
    );

    // A ready endpoint where nothing answers: as in kube, whose probe passes when any of its
    // attempts does, the APIService stays available while another endpoint answers, and a
    // request that meets the dead endpoint's refused connect goes on to the live one.
    second.stop();
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &endpoints(port, &[FIRST, SECOND], &[]),
    );
    // Several probe periods (1 s) with the dead endpoint listed.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        availability(&gate),
        ("True".into(), "Passed".into()),
        "{}",
        gate.ok(&["get", "apiservice", APISERVICE, "-o", "yaml"])
    );
    first.clear_requests();
    for _ in 0..6 {
        let (code, body) = gate.curl("GET", FLUNDERS, &[], None);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert_eq!(lists(&[&first]), [6]);
    second.restart();

    // No ready endpoint at all: unavailable with kube's reason, and a 503 Status.
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &endpoints(port, &[], &[FIRST, SECOND]),
    );
    let missing = eventually(Duration::from_secs(10), || {
        availability(&gate) == ("False".into(), "MissingEndpoints".into())
    });
    assert!(
        missing,
        "expected MissingEndpoints, got {:?}: {}",
        availability(&gate),
        gate.ok(&["get", "apiservice", APISERVICE, "-o", "yaml"])
    );
    let (code, body) = gate.curl("GET", FLUNDERS, &[], None);
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    let status: Value = serde_json::from_slice(&body).expect("a Status body");
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");

    // An EndpointSlice for the Service takes precedence over the Endpoints object: only the
    // second backend, ready, on the slice's port.
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "api-1", "namespace": "wardle",
                     "labels": {"kubernetes.io/service-name": "api"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [SECOND.to_string()], "conditions": {"ready": true}},
            {"addresses": [FIRST.to_string()], "conditions": {"ready": false}},
        ],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    gate.ok_stdin(&["apply", "-f", "-"], &slice.to_string());
    let back = eventually(Duration::from_secs(20), || {
        availability(&gate) == ("True".into(), "Passed".into())
    });
    assert!(back, "never available again: {:?}", availability(&gate));
    let only_second = eventually(Duration::from_secs(10), || {
        spread(&gate, &first, &second, 4) == [0, 4]
    });
    assert!(
        only_second,
        "the EndpointSlice's ready endpoint was not the one used: {:?}",
        lists(&[&first, &second])
    );
}

/// Starts kubegate with availability probes only on change, so that requests (and, every
/// `discovery_refresh`, document fetches) alone decide which of a host's addresses is used.
fn start_probing_on_change(discovery_refresh: &str) -> Kubegate {
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        format!(
            "aggregator:\n  availabilityCheckInterval: 1h\n  discoveryRefreshInterval: {discovery_refresh}\n  probeTimeout: 2s\n"
        ),
    )
    .expect("write config");
    let config_path = config.path().to_string_lossy().to_string();
    Kubegate::start_with(&["--config", &config_path])
}

/// The host name both addresses are given in the private `/etc/hosts`.
const HOST: &str = "wardle.test";

/// A backend on one of [`HOST`]'s addresses; `sibling` lends its serving CA.
fn host_backend(gate: &Kubegate, address: IpAddr, port: u16, sibling: Option<&Wardle>) -> Wardle {
    let mut options = WardleOptions::new(gate.data_dir.join("pki").join("front-proxy-ca.crt"));
    options.address = address;
    options.port = Some(port);
    options.dns_names = vec![HOST.to_string()];
    options.serving_ca = sibling.map(Wardle::serving_ca);
    Wardle::start(options)
}

/// Registers the APIService at `https://HOST:port`, while only the second address answers,
/// and waits until it is available and discovered.
fn register_host(gate: &Kubegate, port: u16, ca_bundle: String) {
    let apiservice = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": APISERVICE,
                     "annotations": {"kubegate.io/backend-url": format!("https://{HOST}:{port}")}},
        "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                 "groupPriorityMinimum": 1000, "versionPriority": 15,
                 "caBundle": ca_bundle},
    });
    gate.ok_stdin(&["apply", "-f", "-"], &apiservice.to_string());
    // The probe moves on to the address that answers.
    wait_until_served(gate);
    assert_eq!(availability(gate), ("True".into(), "Passed".into()));
}

/// Two backends on [`HOST`]'s addresses with only the second answering, and the APIService
/// registered and served. Holds the private `/etc/hosts` while the test runs.
struct HostSetup {
    _hosts: tempfile::NamedTempFile,
    gate: Kubegate,
    first: Wardle,
    second: Wardle,
}

fn host_setup(discovery_refresh: &str) -> HostSetup {
    let hosts =
        enter_private_network_with_hosts(&[FIRST, SECOND], &[(HOST, FIRST), (HOST, SECOND)]);
    let gate = start_probing_on_change(discovery_refresh);
    let port = free_port_on(FIRST);
    let mut first = host_backend(&gate, FIRST, port, None);
    let second = host_backend(&gate, SECOND, port, Some(&first));
    // The name's first address refuses connections to begin with.
    first.stop();
    register_host(&gate, port, second.ca_bundle_base64());
    HostSetup {
        _hosts: hosts,
        gate,
        first,
        second,
    }
}

/// kubegate's `kubegate_proxy_upstream_connect_errors_total` lines.
fn connect_errors(gate: &Kubegate) -> Vec<String> {
    let (_, metrics) = gate.curl("GET", "/metrics", &[], None);
    String::from_utf8_lossy(&metrics)
        .lines()
        .filter(|l| l.starts_with("kubegate_proxy_upstream_connect_errors_total{"))
        .map(str::to_string)
        .collect()
}

/// Flunders whose names each backend saw created.
fn creates(backend: &Wardle) -> usize {
    backend
        .requests()
        .iter()
        .filter(|r| {
            r["method"] == "POST" && r["path"].as_str().is_some_and(|p| p.starts_with(FLUNDERS))
        })
        .count()
}

fn flunder(name: &str) -> String {
    json!({
        "apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"reference": "ref"},
    })
    .to_string()
}

#[test]
fn a_host_with_two_addresses_is_dialled_in_order_and_fails_over() {
    // No document fetch after the first: only requests move from one address to the next.
    let HostSetup {
        _hosts,
        gate,
        mut first,
        mut second,
    } = host_setup("1h");

    // A create (proxied with its body) and lists (forwarded) all reach the second address.
    gate.ok_stdin(&["create", "-f", "-"], &flunder("one"));
    assert_eq!(creates(&second), 1, "{:?}", second.requests());
    for _ in 0..3 {
        let (code, body) = gate.curl("GET", FLUNDERS, &[], None);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert_eq!(lists(&[&second]), [3]);

    // The second address goes away and the first comes back: the next forwarded GET fails
    // to connect, moves on (wrapping around) and is answered; the ones after go there at once.
    second.stop();
    first.restart();
    for _ in 0..3 {
        let (code, body) = gate.curl("GET", FLUNDERS, &[], None);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert_eq!(lists(&[&first]), [3]);

    // And back again, this time first met by a request with a body (pingora's proxy path).
    first.stop();
    second.restart();
    second.clear_requests();
    gate.ok_stdin(&["create", "-f", "-"], &flunder("two"));
    assert_eq!(creates(&second), 1, "{:?}", second.requests());
    let (code, body) = gate.curl("GET", &format!("{FLUNDERS}/two"), &[], None);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));

    // Each refused connection was counted; the requests themselves all succeeded.
    assert_eq!(
        connect_errors(&gate),
        [format!(
            "kubegate_proxy_upstream_connect_errors_total{{apiservice=\"{APISERVICE}\"}} 2"
        )]
    );
}

#[test]
fn document_fetches_move_on_from_a_hosts_address_that_refuses() {
    let HostSetup {
        _hosts,
        gate,
        mut first,
        mut second,
    } = host_setup("1s");

    // The second address goes away and the first comes back. Before any request, the next
    // discovery refresh finds the current address refusing and fetches from the first.
    second.stop();
    first.restart();
    let fetched = eventually(Duration::from_secs(10), || {
        first
            .requests()
            .iter()
            .any(|r| r["method"] == "GET" && r["path"] == "/apis")
    });
    assert!(
        fetched,
        "discovery was never fetched from the first address"
    );
    // Requests then go there at once: none meets a refused connection.
    for _ in 0..3 {
        let (code, body) = gate.curl("GET", FLUNDERS, &[], None);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert_eq!(lists(&[&first]), [3]);
    assert!(
        connect_errors(&gate).is_empty(),
        "{:?}",
        connect_errors(&gate)
    );
    // And the group stays discoverable (not stale).
    let resources =
        String::from_utf8_lossy(&gate.kubectl_fresh(&["api-resources"]).stdout).to_string();
    assert!(resources.contains("flunders"), "{resources}");
}

//! End-to-end flow control: API Priority and Fairness classifies every request into a
//! FlowSchema and priority level (seen in the `X-Kubernetes-PF-*` response headers), a
//! FlowSchema created with kubectl moves a user's requests, a one-seat `Reject` level answers
//! 429 with `Retry-After` under concurrent load while exempt users are never held back,
//! dangling FlowSchemas get their condition, the metrics count it all; and the max-in-flight
//! mode limits without APF.

use std::process::Command;
use std::time::Duration;

use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

const ALICE: &str = "alice-token-flowcontrol";

/// kubegate with a token for alice and `extra` flags; everyone may do anything (flow control
/// is what is under test).
fn start(dir: &std::path::Path, extra: &[&str]) -> Kubegate {
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, format!("{ALICE},alice,alice-uid,devs\n")).expect("tokens");
    let tokens = tokens.to_string_lossy().to_string();
    let mut args = vec![
        "--token-auth-file",
        tokens.as_str(),
        "--authorization-mode",
        "AlwaysAllow",
    ];
    args.extend_from_slice(extra);
    Kubegate::start_with(&args)
}

/// One request with curl: (status, headers lower-cased, body). `token` None uses the admin
/// client certificate.
fn request(
    gate: &Kubegate,
    token: Option<&str>,
    path: &str,
) -> (u16, Vec<(String, String)>, String) {
    request_with(gate, token, path, &[])
}

/// [`request`] over HTTP/1.1 with `extra` request headers.
fn request_with(
    gate: &Kubegate,
    token: Option<&str>,
    path: &str,
    extra: &[&str],
) -> (u16, Vec<(String, String)>, String) {
    let pki = gate.data_dir.join("pki");
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-D", "-", "--cacert"])
        .arg(pki.join("ca.crt"));
    if !extra.is_empty() {
        cmd.arg("--http1.1");
        for header in extra {
            cmd.arg("-H").arg(header);
        }
    }
    match token {
        Some(t) => {
            cmd.arg("-H").arg(format!("Authorization: Bearer {t}"));
        }
        None => {
            cmd.arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"));
        }
    }
    let out = cmd
        .arg(format!("{}{path}", gate.url()))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn uid(gate: &Kubegate, kind: &str, name: &str) -> String {
    gate.ok(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"])
}

/// `count` requests to `path` sent at the same moment over connections opened beforehand
/// (Python threads behind a barrier); returns each (status, Retry-After, FlowSchema UID,
/// body unless 200).
fn burst(
    gate: &Kubegate,
    token: Option<&str>,
    path: &str,
    count: usize,
) -> Vec<(u16, String, String, String)> {
    let pki = gate.data_dir.join("pki");
    let script = r#"
import http.client, json, ssl, sys, threading
port, path, count, ca, cert, key, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
ctx = ssl.create_default_context(cafile=ca)
if token == "-":
    ctx.load_cert_chain(cert, key)
barrier = threading.Barrier(count)
results = [None] * count
def run(i):
    conn = http.client.HTTPSConnection("127.0.0.1", int(port), context=ctx, timeout=60)
    conn.connect()
    headers = {} if token == "-" else {"Authorization": "Bearer " + token}
    barrier.wait()
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    results[i] = [r.status, r.getheader("Retry-After") or "", r.getheader("X-Kubernetes-PF-FlowSchema-UID") or "",
                  body.decode("utf-8", "replace") if r.status != 200 else ""]
threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(gate.port.to_string())
        .arg(path)
        .arg(count.to_string())
        .arg(pki.join("ca.crt"))
        .arg(pki.join("admin.crt"))
        .arg(pki.join("admin.key"))
        .arg(token.unwrap_or("-"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "burst failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Vec<(u16, String, String, String)> =
        serde_json::from_slice(&out.stdout).expect("burst results");
    parsed
}

/// Enough ConfigMaps that listing them holds a seat for a while.
fn fill(gate: &Kubegate, count: usize) {
    let blob = "x".repeat(4096);
    let items: Vec<Value> = (0..count)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("filler-{i}"), "namespace": "default"},
                   "data": {"blob": blob}})
        })
        .collect();
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    );
}

#[test]
fn requests_are_classified_and_a_reject_level_answers_429() {
    let dir = tempfile::tempdir().expect("dir");
    // One seat per limited level: every level's nominal share rounds up to 1.
    let gate = start(
        dir.path(),
        &[
            "--max-requests-inflight",
            "1",
            "--max-mutating-requests-inflight",
            "0",
        ],
    );

    // The admin (system:masters) is in the exempt FlowSchema; alice falls to global-default.
    let (status, headers, _) = request(&gate, None, "/api/v1/namespaces/default/configmaps");
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "x-kubernetes-pf-flowschema-uid"),
        Some(uid(&gate, "flowschema", "exempt").as_str())
    );
    assert_eq!(
        header(&headers, "x-kubernetes-pf-prioritylevel-uid"),
        Some(uid(&gate, "prioritylevelconfiguration", "exempt").as_str())
    );
    let (status, headers, _) = request(&gate, Some(ALICE), "/api/v1/namespaces/default/configmaps");
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "x-kubernetes-pf-flowschema-uid"),
        Some(uid(&gate, "flowschema", "global-default").as_str())
    );

    // A FlowSchema whose level does not exist yet is Dangling and matches nothing.
    let schema = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "alice"},
        "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 500,
                 "distinguisherMethod": {"type": "ByUser"},
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                               "namespaces": ["*"], "clusterScope": true}]}]}
    });
    gate.ok_stdin(&["apply", "-f", "-"], &schema.to_string());
    let dangling = |status: &str| {
        eventually(Duration::from_secs(10), || {
            gate.ok(&[
                "get",
                "flowschema",
                "alice",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Dangling\")].status}",
            ]) == status
        })
    };
    assert!(dangling("True"), "the FlowSchema never became Dangling");
    let table = gate.ok(&["get", "flowschema", "alice"]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.trim_end().ends_with("True")),
        "{table}"
    );
    let (_, headers, _) = request(&gate, Some(ALICE), "/api/v1/namespaces/default/configmaps");
    assert_eq!(
        header(&headers, "x-kubernetes-pf-flowschema-uid"),
        Some(uid(&gate, "flowschema", "global-default").as_str()),
        "a dangling FlowSchema must fall through"
    );

    // The level appears: alice's requests move to it, and it rejects past its one seat.
    let level = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "tiny"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                 "limitResponse": {"type": "Reject"}}}
    });
    gate.ok_stdin(&["apply", "-f", "-"], &level.to_string());
    assert!(dangling("False"), "the FlowSchema stayed Dangling");
    let alice_uid = uid(&gate, "flowschema", "alice");
    let tiny_uid = uid(&gate, "prioritylevelconfiguration", "tiny");
    let moved = eventually(Duration::from_secs(10), || {
        let (_, headers, _) = request(&gate, Some(ALICE), "/api/v1/namespaces/default/configmaps");
        header(&headers, "x-kubernetes-pf-flowschema-uid") == Some(alice_uid.as_str())
            && header(&headers, "x-kubernetes-pf-prioritylevel-uid") == Some(tiny_uid.as_str())
    });
    // Upgrade headers on a request that is not long-running do not take it past flow
    // control (kube decides by verb and subresource alone).
    let (status, headers, _) = request_with(
        &gate,
        Some(ALICE),
        "/api/v1/namespaces/default/configmaps",
        &["Connection: Upgrade", "Upgrade: websocket"],
    );
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "x-kubernetes-pf-prioritylevel-uid"),
        Some(tiny_uid.as_str()),
        "an Upgrade header bypassed flow control: {headers:?}"
    );
    assert!(moved, "alice's requests never reached the new FlowSchema");

    fill(&gate, 300);
    let path = "/api/v1/namespaces/default/configmaps";
    let results = burst(&gate, Some(ALICE), path, 24);
    let rejected: Vec<_> = results.iter().filter(|r| r.0 == 429).collect();
    let served = results.iter().filter(|r| r.0 == 200).count();
    assert!(
        !rejected.is_empty(),
        "no 429 from a one-seat Reject level: {results:?}"
    );
    assert!(served >= 1, "nothing was served: {results:?}");
    assert_eq!(served + rejected.len(), results.len(), "{results:?}");
    for (_, retry_after, schema_uid, body) in &rejected {
        let seconds: u64 = retry_after.parse().unwrap_or(0);
        assert!((1..=32).contains(&seconds), "Retry-After {retry_after:?}");
        assert_eq!(schema_uid, &alice_uid);
        // The 429 is a kube Status.
        let status: Value = serde_json::from_str(body).expect("Status");
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["code"], 429);
        assert_eq!(
            status["message"],
            "Too many requests, please try again later."
        );
    }

    // Exempt users are never held back, whatever alice does.
    let admin = burst(&gate, None, path, 24);
    assert!(admin.iter().all(|r| r.0 == 200), "{admin:?}");

    // kube's debug dumps, for those allowed to read them.
    let (status, headers, levels) = request(
        &gate,
        None,
        "/debug/api_priority_and_fairness/dump_priority_levels",
    );
    assert_eq!(status, 200, "{levels}");
    assert!(header(&headers, "content-type").is_some_and(|t| t.starts_with("text/plain")));
    assert!(
        levels.starts_with("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing,"),
        "{levels}"
    );
    let tiny_row = levels
        .lines()
        .find(|l| l.starts_with("tiny,"))
        .unwrap_or_else(|| panic!("no tiny row:\n{levels}"));
    let rejected_count: u64 = tiny_row
        .split(',')
        .nth(7)
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    assert!(rejected_count >= rejected.len() as u64, "{tiny_row}");
    let (status, _, queues) = request(&gate, None, "/debug/api_priority_and_fairness/dump_queues");
    assert_eq!(status, 200);
    assert!(queues.starts_with("PriorityLevelName, Index,"), "{queues}");
    let (status, _, _) = request(
        &gate,
        Some(ALICE),
        "/debug/api_priority_and_fairness/dump_requests",
    );
    // alice may do anything here (AlwaysAllow); what matters is that the path is served.
    assert_eq!(status, 200);
    // Any value of includeRequestDetails asks for the details, as in kube.
    for value in ["1", "true"] {
        let (_, _, dump) = request(
            &gate,
            None,
            &format!(
                "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails={value}"
            ),
        );
        let head = dump.lines().next().unwrap_or_default();
        assert!(head.contains("UserName"), "{value}: {head}");
    }
    let (_, _, dump) = request(
        &gate,
        None,
        "/debug/api_priority_and_fairness/dump_requests",
    );
    assert!(
        !dump.lines().next().unwrap_or_default().contains("UserName"),
        "{dump}"
    );

    // The metrics say so too.
    let (_, _, metrics) = request(&gate, None, "/metrics");
    let rejected_line = metrics
        .lines()
        .find(|l| {
            l.starts_with("apiserver_flowcontrol_rejected_requests_total")
                && l.contains("flow_schema=\"alice\"")
                && l.contains("reason=\"concurrency-limit\"")
        })
        .unwrap_or_else(|| panic!("no rejected counter for alice:\n{metrics}"));
    let count: f64 = rejected_line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(count >= rejected.len() as f64, "{rejected_line}");
    // Each refusal is a request kubegate terminated itself, as kube counts them.
    let terminations: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_terminations_total{") && l.contains("code=\"429\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        terminations >= rejected.len() as f64,
        "{terminations} terminations for {} refusals:\n{metrics}",
        rejected.len()
    );
    for name in [
        "apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"alice\",priority_level=\"tiny\"}",
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"tiny\"} 1",
        "apiserver_flowcontrol_current_limit_seats{priority_level=\"tiny\"}",
        "apiserver_flowcontrol_lower_limit_seats{priority_level=\"tiny\"}",
        "apiserver_flowcontrol_upper_limit_seats{priority_level=\"tiny\"}",
        "apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",flow_schema=\"alice\",priority_level=\"tiny\"}",
        "apiserver_flowcontrol_current_executing_seats{flow_schema=\"alice\",priority_level=\"tiny\"} 0",
        // Counted when scraped: alice's requests are over; the scrape itself, the admin's,
        // is executing in the exempt level.
        "apiserver_flowcontrol_current_executing_requests{flow_schema=\"alice\",priority_level=\"tiny\"} 0",
        "apiserver_flowcontrol_current_inqueue_seats{flow_schema=\"alice\",priority_level=\"tiny\"} 0",
        "apiserver_flowcontrol_current_executing_requests{flow_schema=\"exempt\",priority_level=\"exempt\"} 1",
        // Refused on arrival: kube labels their wait execute="false".
        "apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"false\",flow_schema=\"alice\",priority_level=\"tiny\"}",
    ] {
        assert!(metrics.contains(name), "missing {name}");
    }
    // Exempt requests (the admin's, all along) never wait, and kube does not time them.
    assert!(
        !metrics.lines().any(|l| l
            .starts_with("apiserver_flowcontrol_request_wait_duration_seconds")
            && l.contains("priority_level=\"exempt\"")),
        "exempt requests were timed as waiting"
    );
    assert!(
        metrics.contains(
            "apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"exempt\",priority_level=\"exempt\"}"
        ),
        "the admin's requests were not counted as exempt"
    );
}

/// kubegate with one seat in all (`--max-requests-inflight 1`), a one-share `Queue` priority
/// level `level` with `queuing`, and the FlowSchema `alice` sending alice's requests there
/// (by user when `by_user`), once her requests are seen to land in it.
fn alice_queued_at_one_seat(
    dir: &std::path::Path,
    level: &str,
    queuing: serde_json::Value,
    by_user: bool,
) -> Kubegate {
    let gate = start(
        dir,
        &[
            "--max-requests-inflight",
            "1",
            "--max-mutating-requests-inflight",
            "0",
        ],
    );
    let mut schema = json!({"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 500,
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                      "namespaces": ["*"], "clusterScope": true}]}]});
    if by_user {
        schema["distinguisherMethod"] = json!({"type": "ByUser"});
    }
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
         "metadata": {"name": level},
         "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                  "borrowingLimitPercent": 0,
                  "limitResponse": {"type": "Queue", "queuing": queuing}}}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
         "metadata": {"name": "alice"}, "spec": schema}
    ]});
    gate.ok_stdin(&["apply", "-f", "-"], &objects.to_string());
    let alice_uid = uid(&gate, "flowschema", "alice");
    let moved = eventually(Duration::from_secs(10), || {
        let (_, headers, _) = request(&gate, Some(ALICE), "/api/v1/namespaces/default/configmaps");
        header(&headers, "x-kubernetes-pf-flowschema-uid") == Some(alice_uid.as_str())
    });
    assert!(moved, "alice's requests never reached {level}");
    gate
}

#[test]
fn queued_requests_wait_their_turn_instead_of_failing() {
    let dir = tempfile::tempdir().expect("dir");
    // A one-seat level that queues: a burst is served in turn, none refused.
    let gate = alice_queued_at_one_seat(
        dir.path(),
        "narrow",
        json!({"queues": 4, "handSize": 2, "queueLengthLimit": 50}),
        true,
    );
    fill(&gate, 600);
    let results = burst(
        &gate,
        Some(ALICE),
        "/api/v1/namespaces/default/configmaps",
        16,
    );
    assert!(results.iter().all(|r| r.0 == 200), "{results:?}");
    // Some of them really waited in the queue (a one-seat level and 16 LISTs at once): the
    // wait histogram has observations above its 5 ms bucket.
    let (_, _, metrics) = request(&gate, None, "/metrics");
    let series = |suffix: &str| -> f64 {
        metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "apiserver_flowcontrol_request_wait_duration_seconds_{suffix}"
                )) && l.contains("flow_schema=\"alice\"")
                    && l.contains("execute=\"true\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let count = series("count");
    let within_5ms = metrics
        .lines()
        .find(|l| {
            l.starts_with("apiserver_flowcontrol_request_wait_duration_seconds_bucket")
                && l.contains("flow_schema=\"alice\"")
                && l.contains("execute=\"true\"")
                && l.contains("le=\"0.005\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(count);
    assert!(count >= 16.0, "{count} admissions recorded");
    assert!(
        count - within_5ms >= 1.0,
        "no request waited over 5 ms in a one-seat level under a burst of 16 ({within_5ms} of {count} within 5 ms)"
    );
}

#[test]
fn max_in_flight_mode_limits_without_apf() {
    let dir = tempfile::tempdir().expect("dir");
    let gate = start(
        dir.path(),
        &[
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight",
            "1",
        ],
    );
    fill(&gate, 300);
    let path = "/api/v1/namespaces/default/configmaps";
    let (status, headers, _) = request(&gate, Some(ALICE), path);
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-kubernetes-pf-flowschema-uid"), None);
    let results = burst(&gate, Some(ALICE), path, 24);
    let rejected: Vec<_> = results.iter().filter(|r| r.0 == 429).collect();
    assert!(!rejected.is_empty(), "{results:?}");
    assert!(rejected.iter().all(|r| r.1 == "1"), "{results:?}");
    // system:masters is never limited.
    let admin = burst(&gate, None, path, 24);
    assert!(admin.iter().all(|r| r.0 == 200), "{admin:?}");
}

/// A request waiting in its queue whose client gives up leaves the queue at once and never
/// runs, as kube's waiter does when its request context ends: a slow-body POST holds the
/// level's only seat, a GET queues behind it and its client times out.
#[test]
fn a_waiting_request_whose_client_goes_away_leaves_its_queue() {
    let dir = tempfile::tempdir().expect("dir");
    let gate = alice_queued_at_one_seat(
        dir.path(),
        "single",
        json!({"queues": 1, "handSize": 1, "queueLengthLimit": 5}),
        false,
    );
    let row = |gate: &Kubegate| -> Vec<String> {
        let (_, _, dump) = request(
            gate,
            None,
            "/debug/api_priority_and_fairness/dump_priority_levels",
        );
        dump.lines()
            .find(|l| l.starts_with("single,"))
            .unwrap_or_else(|| panic!("no row for single:\n{dump}"))
            .split(',')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // Columns: name, active queues, idle, quiescing, waiting, executing, dispatched,
    // rejected, timed out, cancelled.
    let dispatched_before: u64 = row(&gate)[6].parse().unwrap();

    // The seat holder: a POST whose body comes 4 s after its header.
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slow"}}).to_string();
    let script = format!(
        r#"
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))), server_hostname="127.0.0.1")
body = sys.argv[3].encode()
sock.sendall(("POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
    "Authorization: Bearer {ALICE}\r\nContent-Type: application/json\r\n"
    "Content-Length: %d\r\n\r\n" % len(body)).encode())
time.sleep(4)
sock.sendall(body)
print(sock.recv(65536).split(b"\r\n")[0].decode())
"#
    );
    let port = gate.url().rsplit(':').next().unwrap().to_string();
    let holder = Command::new("python3")
        .args(["-c", &script, &port])
        .arg(gate.data_dir.join("pki").join("ca.crt"))
        .arg(&body)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let holding = eventually(Duration::from_secs(3), || row(&gate)[5] == "1");
    assert!(holding, "{:?}", row(&gate));

    // A GET behind it whose client gives up after 1 s.
    let pki = gate.data_dir.join("pki");
    let gave_up = Command::new("curl")
        .args(["-sS", "--http1.1", "--max-time", "1", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("-H")
        .arg(format!("Authorization: Bearer {ALICE}"))
        .arg(format!(
            "{}/api/v1/namespaces/default/configmaps",
            gate.url()
        ))
        .output()
        .expect("curl");
    assert!(
        !gave_up.status.success(),
        "the GET should still have been waiting"
    );
    let left = eventually(Duration::from_secs(2), || {
        let r = row(&gate);
        r[4] == "0" && r[9] == "1"
    });
    assert!(left, "the abandoned GET is still queued: {:?}", row(&gate));
    // Only the POST ran (and the dump requests, which are exempt): the abandoned GET never did.
    let after = row(&gate);
    let dispatched_after: u64 = after[6].parse().unwrap();
    assert_eq!(dispatched_after, dispatched_before + 1, "{after:?}");
    assert_eq!(
        after[8], "0",
        "kube never counts TimedoutRequests: {after:?}"
    );

    // The level is deleted while the POST holds its seat: it drains (quiescing), and goes as
    // soon as the POST is done, not at the next borrowing pass (kube's maybeReap).
    gate.ok(&["delete", "flowschema", "alice"]);
    gate.ok(&["delete", "prioritylevelconfiguration", "single"]);
    let quiescing = eventually(Duration::from_secs(2), || row(&gate)[3] == "true");
    assert!(quiescing, "{:?}", row(&gate));
    let answer = holder.wait_with_output().expect("holder");
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout).trim(),
        "HTTP/1.1 201 Created"
    );
    let listed = || {
        let (_, _, dump) = request(
            &gate,
            None,
            "/debug/api_priority_and_fairness/dump_priority_levels",
        );
        dump.lines().any(|l| l.starts_with("single,"))
    };
    let gone = eventually(Duration::from_secs(2), || !listed());
    assert!(gone, "the drained level stayed: {:?}", row(&gate));
}

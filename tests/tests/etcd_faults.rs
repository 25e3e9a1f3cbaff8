//! Fault tests of kubegate on etcd, with the real etcd, kubectl and curl on loopback:
//!
//! - an APIService registered through one replica routes on another (the routing table and
//!   availability are watch-driven, so every replica serves what any replica registered);
//! - etcd killed and restarted under a stream of creates: a write either succeeds and stays,
//!   or fails promptly with a 5xx `Status`; nothing acknowledged is lost, and a watch
//!   (resumed from its last resourceVersion whenever kubegate ends it) delivers every object
//!   exactly once;
//! - a replica killed with `kill -9` while a client writes through it: the other replica keeps
//!   serving reads, writes and watches, and has everything the dead one acknowledged.
//!
//! Every process (etcd, kubegate, wardle, curl, kubectl) is a child stopped by pid.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kubegate_tests::etcd::Etcd;
use kubegate_tests::wardle::{Wardle, WardleOptions};
use kubegate_tests::{eventually, tail, Kubegate};
use serde_json::{json, Value};

const APISERVICE: &str = "v1alpha1.wardle.example.com";

/// The longest a failed write may take: a write must fail with a `Status`, never hang until
/// the client gives up (kubegate's own bound on an etcd request is 15 s).
const FAILED_WRITE_BOUND: Duration = Duration::from_secs(35);

// ---------------------------------------------------------------------------------------
// Raw HTTP with curl, timed, usable from other threads.

/// Where to send raw requests: a replica's URL with the admin client certificate. Owned, so
/// a writer thread can keep using it while the test kills the replica.
#[derive(Clone)]
struct Client {
    url: String,
    pki: PathBuf,
}

impl Client {
    fn of(gate: &Kubegate) -> Client {
        Client {
            url: gate.url(),
            pki: gate.data_dir.join("pki"),
        }
    }

    fn curl(&self) -> Command {
        let mut cmd = Command::new("curl");
        cmd.arg("-sS")
            .arg("--cacert")
            .arg(self.pki.join("ca.crt"))
            .arg("--cert")
            .arg(self.pki.join("admin.crt"))
            .arg("--key")
            .arg(self.pki.join("admin.key"));
        cmd
    }

    /// One request: (HTTP status, 0 when none came back; body). curl itself gives up after
    /// `max_time`, so a hung server fails the test instead of hanging it.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        max_time: u64,
    ) -> (u16, String) {
        let mut cmd = self.curl();
        cmd.args(["-X", method, "--max-time", &max_time.to_string()])
            .args(["-H", "Accept: application/json"])
            .args(["-o", "-", "-w", "\n%{http_code}"]);
        if let Some(body) = body {
            cmd.args([
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                body,
            ]);
        }
        let out = cmd
            .arg(format!("{}{path}", self.url))
            .stdin(Stdio::null())
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
        let mut body = body.to_string();
        if !out.stderr.is_empty() {
            body.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        (code.trim().parse().unwrap_or(0), body)
    }

    /// A consistent list of ConfigMaps in `namespace`: name -> (uid, resourceVersion), and
    /// the list's resourceVersion. `None` while kubegate cannot answer.
    fn configmaps(&self, namespace: &str) -> Option<(BTreeMap<String, String>, u64)> {
        let (code, body) = self.request(
            "GET",
            &format!("/api/v1/namespaces/{namespace}/configmaps"),
            None,
            30,
        );
        if code != 200 {
            return None;
        }
        let list: Value = serde_json::from_str(&body).ok()?;
        let rv = list["metadata"]["resourceVersion"].as_str()?.parse().ok()?;
        let items = list["items"]
            .as_array()?
            .iter()
            .map(|item| {
                (
                    item["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    item["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        Some((items, rv))
    }
}

/// One create the writer tried.
#[derive(Debug, Clone)]
struct Attempt {
    name: String,
    started: Instant,
    took: Duration,
    code: u16,
    body: String,
}

impl Attempt {
    /// Acknowledged: kubegate answered 201 Created.
    fn acked(&self) -> bool {
        self.code == 201
    }

    /// The uid kubegate answered with.
    fn uid(&self) -> String {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| v["metadata"]["uid"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// A client thread creating ConfigMaps `<prefix>0001`, `<prefix>0002`, ... back to back, recording
/// every outcome. Stopped (and joined) by [`Writer::finish`] or on drop.
struct Writer {
    stop: Arc<AtomicBool>,
    attempts: Arc<Mutex<Vec<Attempt>>>,
    handle: Option<JoinHandle<()>>,
}

impl Writer {
    /// `query` goes on every POST (e.g. `?timeout=3s`, the per-request timeout kube clients
    /// send with `--request-timeout`).
    fn start(client: Client, namespace: &str, prefix: &str, query: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let path = format!("/api/v1/namespaces/{namespace}/configmaps{query}");
        let prefix = prefix.to_string();
        let handle = {
            let stop = Arc::clone(&stop);
            let attempts = Arc::clone(&attempts);
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Acquire) {
                    n += 1;
                    let name = format!("{prefix}{n:04}");
                    let body = json!({
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": name},
                        "data": {"n": n.to_string()},
                    })
                    .to_string();
                    let started = Instant::now();
                    let (code, body) = client.request("POST", &path, Some(&body), 60);
                    let attempt = Attempt {
                        name,
                        started,
                        took: started.elapsed(),
                        code,
                        body,
                    };
                    attempts
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(attempt);
                    if code == 0 {
                        // Nothing listening: do not spin.
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
        };
        Writer {
            stop,
            attempts,
            handle: Some(handle),
        }
    }

    fn attempts(&self) -> Vec<Attempt> {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until `check` holds for the attempts so far; panics with them after `timeout`.
    fn wait_until(&self, what: &str, timeout: Duration, check: impl Fn(&[Attempt]) -> bool) {
        let ok = eventually(timeout, || check(&self.attempts()));
        assert!(
            ok,
            "writer: {what} never happened:\n{}",
            summary(&self.attempts())
        );
    }

    fn finish(mut self) -> Vec<Attempt> {
        self.halt();
        self.attempts()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// One line per attempt, for failure messages.
fn summary(attempts: &[Attempt]) -> String {
    let origin = attempts.first().map(|a| a.started);
    attempts
        .iter()
        .map(|a| {
            let at = origin.map_or(0.0, |o| a.started.duration_since(o).as_secs_f64());
            let detail = if a.acked() {
                String::new()
            } else {
                a.body.chars().take(200).collect()
            };
            format!(
                "{} +{at:.2}s took {:.2}s -> {} {detail}",
                a.name,
                a.took.as_secs_f64(),
                a.code
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------
// A raw watch that resumes from the last resourceVersion it saw, as a client's reflector does.

/// One event delivered by a watch stream.
#[derive(Debug, Clone)]
struct Event {
    kind: String,
    name: String,
    rv: u64,
    /// Which stream (0 = the first; each resumption is the next) delivered it.
    stream: usize,
}

#[derive(Debug, Default)]
struct WatchLog {
    events: Vec<Event>,
    /// The last resourceVersion seen (an event's or a bookmark's).
    last_rv: u64,
    /// Streams opened so far (1 + resumptions).
    streams: usize,
    /// How each stream ended, and anything that was not an event.
    notes: Vec<String>,
    /// An ERROR event (410 Expired, say) ended the watch: resuming cannot be exact.
    error: Option<String>,
}

/// `GET <collection>?watch=1&resourceVersion=<rv>` with curl on a thread; when kubegate ends
/// the stream, it is opened again from the last resourceVersion seen. Stopped on drop.
struct ResumingWatch {
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<WatchLog>>,
    handle: Option<JoinHandle<()>>,
}

impl ResumingWatch {
    /// `query` is added to every request (e.g. `&timeoutSeconds=1`).
    fn start(client: Client, collection: &str, query: &str, from_rv: u64) -> ResumingWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(WatchLog {
            last_rv: from_rv,
            ..WatchLog::default()
        }));
        let handle = {
            let stop = Arc::clone(&stop);
            let log = Arc::clone(&log);
            let path = format!("{collection}?watch=1&allowWatchBookmarks=true{query}");
            std::thread::spawn(move || watch_loop(&client, &path, &stop, &log))
        };
        ResumingWatch {
            stop,
            log,
            handle: Some(handle),
        }
    }

    fn with_log<T>(&self, f: impl FnOnce(&WatchLog) -> T) -> T {
        f(&self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for ResumingWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

fn watch_loop(client: &Client, path: &str, stop: &AtomicBool, log: &Mutex<WatchLog>) {
    let lock = || log.lock().unwrap_or_else(|e| e.into_inner());
    while !stop.load(Ordering::Acquire) {
        let (stream, from) = {
            let mut log = lock();
            log.streams += 1;
            (log.streams - 1, log.last_rv)
        };
        let url = format!("{}{path}&resourceVersion={from}", client.url);
        let mut child = client
            .curl()
            .arg("-N")
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run curl");
        let stdout = child.stdout.take().expect("curl stdout");
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stopped = loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let mut log = lock();
                    record(&mut log, stream, &line);
                    if log.error.is_some() {
                        break true;
                    }
                }
                Err(RecvTimeoutError::Timeout) if stop.load(Ordering::Acquire) => break true,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break false,
            }
        };
        // Child::kill signals curl's pid only.
        let _ = child.kill();
        let status = child.wait();
        let _ = reader.join();
        let stderr = child
            .stderr
            .take()
            .map(|mut e| {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut e, &mut s);
                s
            })
            .unwrap_or_default();
        let mut log = lock();
        if stopped {
            return;
        }
        let note = format!(
            "stream {stream} (from rv {from}) ended at rv {}: curl {status:?} {}",
            log.last_rv,
            stderr.trim()
        );
        log.notes.push(note);
        drop(log);
        // A client waits a moment before re-watching.
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn record(log: &mut WatchLog, stream: usize, line: &str) {
    let Ok(frame) = serde_json::from_str::<Value>(line) else {
        log.notes.push(format!("stream {stream}: not JSON: {line}"));
        return;
    };
    let kind = frame["type"].as_str().unwrap_or("").to_string();
    let object = &frame["object"];
    let rv = object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok());
    match (kind.as_str(), rv) {
        ("ADDED" | "MODIFIED" | "DELETED", Some(rv)) => {
            log.events.push(Event {
                kind,
                name: object["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                rv,
                stream,
            });
            log.last_rv = rv;
        }
        ("BOOKMARK", Some(rv)) => log.last_rv = log.last_rv.max(rv),
        ("ERROR", _) => log.error = Some(format!("stream {stream}: {line}")),
        _ => log
            .notes
            .push(format!("stream {stream}: not an event: {line}")),
    }
}

// ---------------------------------------------------------------------------------------
// 1. An APIService registered through replica A routes on replica B.

/// kubectl against `gate` with a bearer token and no client certificate, with its own
/// discovery cache so it sees the server's current discovery.
fn as_token(gate: &Kubegate, token: &str, args: &[&str]) -> Output {
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

#[test]
fn an_apiservice_registered_through_one_replica_routes_on_the_other() {
    let etcd = Etcd::start();
    let url = etcd.url();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("kubegate.yaml");
    std::fs::write(
        &config,
        "aggregator:\n  availabilityCheckInterval: 1s\n  discoveryRefreshInterval: 1s\n  probeTimeout: 2s\n",
    )
    .expect("write config");
    let config = config.to_string_lossy().to_string();
    // Only b knows this token: a request made with it can only have come through b.
    const TOKEN: &str = "carol-token-only-on-b";
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{TOKEN},carol,carol-uid,system:masters\n"))
        .expect("write tokens");
    let tokens = tokens.to_string_lossy().to_string();

    let a = Kubegate::start_with(&["--etcd-servers", &url, "--config", &config]);
    let b = Kubegate::start_sharing(
        &a,
        &[
            "--etcd-servers",
            &url,
            "--config",
            &config,
            "--token-auth-file",
            &tokens,
        ],
    );
    let wardle = Wardle::start(WardleOptions::new(
        a.data_dir.join("pki/front-proxy-ca.crt"),
    ));

    // Registered through a only, as aggregation.rs does: an ExternalName Service `localhost`
    // (verified as `api.wardle.svc`, which wardle's certificate names) and the APIService.
    kubegate_tests::wardle::register(&a, &wardle);

    // b reports it Available and serves the group.
    let up = eventually(Duration::from_secs(30), || available(&b) == "True");
    assert!(
        up,
        "b never reported the APIService Available: {}\n--- a ---\n{}\n--- b ---\n{}",
        b.ok(&["get", "apiservice", APISERVICE, "-o", "yaml"]),
        tail(&a.log(), 20),
        tail(&b.log(), 20)
    );
    let discovered = eventually(Duration::from_secs(15), || {
        String::from_utf8_lossy(&as_token(&b, TOKEN, &["api-resources"]).stdout)
            .contains("flunders")
    });
    assert!(
        discovered,
        "flunders never appeared in b's discovery:\n{}",
        tail(&b.log(), 30)
    );
    // The token is b's alone: a does not know carol.
    let refused = as_token(&a, TOKEN, &["get", "flunders", "-A"]);
    assert!(!refused.status.success());
    assert!(
        // client-go's words for a 401.
        String::from_utf8_lossy(&refused.stderr)
            .contains("the server has asked for the client to provide credentials"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // Create, list and get flunders through b, as carol.
    wardle.clear_requests();
    let flunder = json!({
        "apiVersion": "wardle.example.com/v1alpha1",
        "kind": "Flunder",
        "metadata": {"name": "via-b", "namespace": "default"},
        "spec": {"reference": "routed-by-b"}
    });
    let created = b.kubectl_stdin(
        &[
            "--kubeconfig=/dev/null",
            &format!("--server={}", b.url()),
            &format!(
                "--certificate-authority={}",
                b.data_dir.join("pki/ca.crt").display()
            ),
            &format!("--token={TOKEN}"),
            &format!("--cache-dir={}", dir.path().join("cache").display()),
            "create",
            "-f",
            "-",
        ],
        Some(&flunder.to_string()),
    );
    assert!(
        created.status.success(),
        "create through b failed: {}\n{}",
        String::from_utf8_lossy(&created.stderr),
        tail(&b.log(), 30)
    );
    let all = as_token(&b, TOKEN, &["get", "flunders", "-A"]);
    let all_out = String::from_utf8_lossy(&all.stdout);
    assert!(
        all.status.success(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    assert!(
        all_out
            .lines()
            .any(|l| l.starts_with("default") && l.contains("via-b")),
        "{all_out}"
    );
    let got = as_token(
        &b,
        TOKEN,
        &[
            "get",
            "flunder",
            "via-b",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.reference}",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&got.stdout), "routed-by-b");

    // Wardle saw carol (b's caller), vouched for by the shared front-proxy client certificate.
    let requests = wardle.requests();
    let post = requests
        .iter()
        .rev()
        .find(|r| r["method"] == "POST" && r["path"].as_str().unwrap_or("").contains("/flunders"))
        .unwrap_or_else(|| panic!("wardle saw no create: {requests:?}"));
    assert_eq!(post["cn"], "front-proxy-client", "{post}");
    assert_eq!(post["authenticated"], true, "{post}");
    assert_eq!(post["user"], "carol", "{post}");
    let groups = post["groups"].as_array().cloned().unwrap_or_default();
    assert!(groups.contains(&json!("system:masters")), "{post}");
    assert!(groups.contains(&json!("system:authenticated")), "{post}");
    assert!(
        !post["header_values"].to_string().contains(TOKEN),
        "the caller's token reached the backend: {post}"
    );
    let lists: Vec<&Value> = requests
        .iter()
        .filter(|r| r["method"] == "GET" && r["path"].as_str().unwrap_or("").contains("flunders"))
        .collect();
    assert!(!lists.is_empty(), "{requests:?}");
    for r in lists {
        assert_eq!(r["user"], "carol", "{r}");
    }
}

// ---------------------------------------------------------------------------------------
// 2. etcd killed and restarted mid-load.

#[test]
fn etcd_killed_and_restarted_mid_load_loses_nothing_acknowledged() {
    const NS: &str = "faults";
    // Each create asks for a 3 s deadline, as `kubectl --request-timeout=3s` would (ample for
    // a create on a busy machine; it bounds the outage the test needs to see failures).
    const QUERY: &str = "?timeout=3s";
    let mut etcd = Etcd::start();
    let gate = Kubegate::start_with(&["--etcd-servers", &etcd.url()]);
    gate.ok(&["create", "namespace", NS]);
    let client = Client::of(&gate);
    let collection = format!("/api/v1/namespaces/{NS}/configmaps");

    let (_, rv) = client.configmaps(NS).expect("list before the load");
    // Two watches from that list: one left open as long as kubegate keeps it, one that asks
    // kubegate to end it every second (as reflectors set timeoutSeconds), so it is resumed
    // from its last resourceVersion many times, before, during and after the outage.
    let mut long_watch = ResumingWatch::start(client.clone(), &collection, "", rv);
    let mut short_watch =
        ResumingWatch::start(client.clone(), &collection, "&timeoutSeconds=1", rv);
    // Three client threads create back to back (so etcd dies with creates in flight)...
    let writers: Vec<Writer> = ["a", "b", "c"]
        .iter()
        .map(|w| Writer::start(client.clone(), NS, &format!("load-{w}-"), QUERY))
        .collect();
    // ... and one sends no deadline (as plain kubectl does), so its creates during the outage
    // wait on kubegate's own bound: they fail with a Status or succeed once etcd is back.
    let patient = Writer::start(client.clone(), NS, "slow-", "");

    for writer in &writers {
        writer.wait_until("5 acknowledged creates", Duration::from_secs(30), |a| {
            a.iter().filter(|a| a.acked()).count() >= 5
        });
    }
    let stopping = Instant::now();
    etcd.stop();
    let stopped = Instant::now();
    // The writers keep going for a few seconds: their creates fail (the checks below say how).
    for writer in &writers {
        writer.wait_until(
            "2 failed creates during the outage",
            Duration::from_secs(3 * FAILED_WRITE_BOUND.as_secs()),
            |a| a.iter().filter(|a| !a.acked()).count() >= 2,
        );
    }
    let restarting = Instant::now();
    etcd.restart();
    let restarted = Instant::now();
    for (writer, n) in writers.iter().map(|w| (w, 5)).chain([(&patient, 3)]) {
        writer.wait_until(
            "acknowledged creates after etcd returned",
            Duration::from_secs(60),
            |a| {
                a.iter()
                    .filter(|a| a.started > restarted && a.acked())
                    .count()
                    >= n
            },
        );
    }
    let mut attempts = patient.finish();
    for writer in writers {
        attempts.extend(writer.finish());
    }
    attempts.sort_by_key(|a| a.started);
    let report = summary(&attempts);

    // Each create either succeeded or failed as a 5xx Status, within a bound.
    let mut failed = 0;
    for a in attempts.iter().filter(|a| !a.acked()) {
        failed += 1;
        assert!(
            a.code == 503 || a.code == 504,
            "{} failed without a 5xx storage status:\n{report}",
            a.name
        );
        let status: Value = serde_json::from_str(&a.body)
            .unwrap_or_else(|e| panic!("{}: not a Status ({e}):\n{report}", a.name));
        assert_eq!(status["kind"], "Status", "{}:\n{report}", a.name);
        assert_eq!(status["code"], a.code, "{}:\n{report}", a.name);
        assert!(
            a.took < FAILED_WRITE_BOUND,
            "{} took {:?} to fail:\n{report}",
            a.name,
            a.took
        );
        // Only creates that overlapped the outage fail.
        assert!(
            a.started + a.took > stopping,
            "{} failed before etcd went away:\n{report}",
            a.name
        );
    }
    assert!(failed >= 6, "{report}");
    // Nothing is acknowledged while etcd is away.
    for a in attempts.iter().filter(|a| a.acked()) {
        assert!(
            a.started < stopped || a.started + a.took > restarting,
            "{} was acknowledged while etcd was down:\n{report}",
            a.name
        );
    }
    let recovered = attempts
        .iter()
        .find(|a| a.started > restarted && a.acked())
        .map(|a| a.started + a.took - restarted);

    // Nothing acknowledged is lost: every 201 is there, with the uid kubegate answered.
    let mut listed = None;
    let answered = eventually(Duration::from_secs(30), || {
        listed = client.configmaps(NS);
        listed.is_some()
    });
    assert!(
        answered,
        "no list after recovery:\n{}",
        tail(&gate.log(), 30)
    );
    let (objects, _) = listed.unwrap_or_default();
    let objects: BTreeMap<String, String> = objects
        .into_iter()
        .filter(|(name, _)| is_load(name))
        .collect();
    for a in attempts.iter().filter(|a| a.acked()) {
        assert_eq!(
            objects.get(&a.name),
            Some(&a.uid()),
            "acknowledged {} is missing or replaced:\n{report}",
            a.name
        );
    }
    let tried: BTreeSet<&str> = attempts.iter().map(|a| a.name.as_str()).collect();
    for name in objects.keys() {
        assert!(tried.contains(name.as_str()), "{name} was never created");
    }

    // Both watches (resumed whenever kubegate ended them) deliver every object exactly once.
    let mut notes = Vec::new();
    for (what, watch) in [("long", &mut long_watch), ("short", &mut short_watch)] {
        let (streams, events) = check_exactly_once(watch, &objects, rv, &report);
        notes.push(format!(
            "{what} watch: {events} events over {streams} stream(s)"
        ));
    }
    eprintln!(
        "etcd outage {:?}; first create acknowledged {recovered:?} after etcd returned; {} \
         creates, {} acknowledged, {failed} failed; failed creates that exist anyway: {:?}; {}",
        restarting - stopped,
        attempts.len(),
        attempts.iter().filter(|a| a.acked()).count(),
        attempts
            .iter()
            .filter(|a| !a.acked() && objects.contains_key(&a.name))
            .map(|a| &a.name)
            .collect::<Vec<_>>(),
        notes.join("; ")
    );
    if let Some(slowest) = attempts.iter().filter(|a| a.acked()).max_by_key(|a| a.took) {
        eprintln!(
            "slowest acknowledged create: {} in {:?}",
            slowest.name, slowest.took
        );
    }
    eprintln!(
        "failed creates:\n{}",
        summary(&attempts)
            .lines()
            .filter(|l| !l.contains("-> 201"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Whether `name` is one the writers of the etcd outage test create.
fn is_load(name: &str) -> bool {
    name.starts_with("load-") || name.starts_with("slow-")
}

/// Waits until `watch` has seen every object, stops it, and asserts it delivered each one
/// exactly once (one ADDED, in resourceVersion order after `from`, nothing else). Returns
/// (streams, events).
fn check_exactly_once(
    watch: &mut ResumingWatch,
    objects: &BTreeMap<String, String>,
    from: u64,
    report: &str,
) -> (usize, usize) {
    let caught_up = eventually(Duration::from_secs(15), || {
        watch.with_log(|log| {
            let seen: BTreeSet<&str> = log.events.iter().map(|e| e.name.as_str()).collect();
            log.error.is_some() || objects.keys().all(|n| seen.contains(n.as_str()))
        })
    });
    watch.halt();
    watch.with_log(|log| {
        let context = format!(
            "streams: {}\nnotes:\n{}\nevents:\n{:?}\nattempts:\n{report}",
            log.streams,
            log.notes.join("\n"),
            log.events
        );
        assert!(log.error.is_none(), "{:?}\n{context}", log.error);
        assert!(caught_up, "the watch missed objects\n{context}");
        let mut added: BTreeMap<&str, usize> = BTreeMap::new();
        let mut last = from;
        for e in &log.events {
            assert!(
                e.rv > last,
                "{} {} at rv {} (stream {}) after rv {last}: out of order or repeated\n{context}",
                e.kind,
                e.name,
                e.rv,
                e.stream
            );
            last = e.rv;
            if !is_load(&e.name) {
                // Not the writers' (none are expected, but another controller's object
                // is not this test's business).
                continue;
            }
            assert_eq!(e.kind, "ADDED", "{e:?}\n{context}");
            *added.entry(e.name.as_str()).or_default() += 1;
        }
        for (name, count) in &added {
            assert_eq!(*count, 1, "{name} was ADDED {count} times\n{context}");
            assert!(
                objects.contains_key(*name),
                "the watch added {name}, which does not exist\n{context}"
            );
        }
        (log.streams, log.events.len())
    })
}

// ---------------------------------------------------------------------------------------
// 3. A replica killed with kill -9 while writing.

#[test]
fn a_replica_killed_while_writing_leaves_the_other_serving() {
    const NS: &str = "survive";
    let etcd = Etcd::start();
    let url = etcd.url();
    let mut a = Kubegate::start_with(&["--etcd-servers", &url]);
    let b = Kubegate::start_sharing(&a, &["--etcd-servers", &url]);
    a.ok(&["create", "namespace", NS]);
    let seen = eventually(Duration::from_secs(10), || {
        b.kubectl(&["get", "namespace", NS]).status.success()
    });
    assert!(seen, "b never saw the namespace");
    // b watches the namespace from before the load.
    let watch = b.stream(&[
        "-n",
        NS,
        "get",
        "configmaps",
        "-w",
        "--watch-only",
        "-o",
        "name",
    ]);
    // Once the watch shows this, it is established (kubectl lists, then watches).
    b.ok(&["-n", NS, "create", "configmap", "watch-ready"]);
    let mut pings = 0;
    let ready = eventually(Duration::from_secs(15), || {
        pings += 1;
        b.ok(&[
            "-n",
            NS,
            "annotate",
            "--overwrite",
            "configmap",
            "watch-ready",
            &format!("ping={pings}"),
        ]);
        watch
            .wait_for(Duration::from_millis(500), |l| l.contains("watch-ready"))
            .is_some()
    });
    assert!(ready, "b's watch never started");

    let writer = Writer::start(Client::of(&a), NS, "load-", "?timeout=10s");
    writer.wait_until(
        "20 creates acknowledged by a",
        Duration::from_secs(30),
        |a| a.iter().filter(|a| a.acked()).count() >= 20,
    );
    a.kill9();
    let killed = Instant::now();
    writer.wait_until(
        "3 creates into the dead replica",
        Duration::from_secs(10),
        |a| a.iter().filter(|a| a.started > killed).count() >= 3,
    );
    let attempts = writer.finish();
    let report = summary(&attempts);
    let acked: Vec<&Attempt> = attempts.iter().filter(|a| a.acked()).collect();
    assert!(acked.len() >= 20, "{report}");
    // Nothing answers for a after its death.
    for attempt in attempts.iter().filter(|x| x.started > killed) {
        assert_eq!(attempt.code, 0, "a answered after kill -9:\n{report}");
    }

    // b serves reads: everything a acknowledged, with the uid a answered.
    assert_eq!(b.ok(&["get", "--raw", "/readyz"]).trim(), "ok");
    let list = b.json(&["-n", NS, "get", "configmaps", "-o", "json"]);
    // name -> (uid, data.n)
    let stored: BTreeMap<String, (String, String)> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"].as_str().unwrap_or("").to_string(),
                (
                    item["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                    item["data"]["n"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect();
    for attempt in &acked {
        let (uid, n) = stored.get(&attempt.name).unwrap_or_else(|| {
            panic!(
                "{} acknowledged by a is not readable through b:\n{report}",
                attempt.name
            )
        });
        assert_eq!(*uid, attempt.uid(), "{} was replaced", attempt.name);
        assert_eq!(
            format!("load-{n:0>4}"),
            attempt.name,
            "{}: other data",
            attempt.name
        );
    }
    // ... also one by one (the first and the last a acknowledged).
    for attempt in [acked[0], acked[acked.len() - 1]] {
        let uid = b.ok(&[
            "-n",
            NS,
            "get",
            "configmap",
            &attempt.name,
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        assert_eq!(uid, attempt.uid(), "{}", attempt.name);
    }

    // b serves writes, and its watch (open since before a died) keeps delivering.
    b.ok(&[
        "-n",
        NS,
        "create",
        "configmap",
        "after-kill",
        "--from-literal=by=b",
    ]);
    assert_eq!(
        b.ok(&[
            "-n",
            NS,
            "get",
            "configmap",
            "after-kill",
            "-o",
            "jsonpath={.data.by}"
        ]),
        "b"
    );
    let mut expected: BTreeSet<String> = acked
        .iter()
        .map(|a| format!("configmap/{}", a.name))
        .collect();
    expected.insert("configmap/after-kill".to_string());
    let mut watched = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !expected.is_subset(&watched) && Instant::now() < deadline {
        if let Some(line) = watch.next_line(Duration::from_millis(200)) {
            watched.insert(line.trim().to_string());
        }
    }
    let missing: Vec<&String> = expected.difference(&watched).collect();
    assert!(
        missing.is_empty(),
        "b's watch missed {missing:?}\n{}",
        tail(&b.log(), 20)
    );

    // b's controllers carry on alone: a namespace deleted through b is finalized and goes.
    b.ok(&["create", "namespace", "gone"]);
    b.ok(&["-n", "gone", "create", "configmap", "inside"]);
    b.ok(&["delete", "namespace", "gone", "--timeout=30s"]);
    let out = b.kubectl(&["get", "namespace", "gone"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

//! The wardle sample extension API server fixture on its own, driven with curl and openssl (no
//! kubegate): front-proxy authentication, the request log, resources and watch, discovery,
//! OpenAPI, exec upgrades (the refused one must leave the connection open, which is what the
//! CVE-2018-1002105 test through kubegate relies on), stop and restart.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kubegate_tests::eventually;
use kubegate_tests::wardle::{make_front_proxy_ca, FrontProxyCa, Wardle, WardleOptions};
use serde_json::{json, Value};

const V1ALPHA1: &str = "/apis/wardle.example.com/v1alpha1";
const FLUNDERS: &str = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders";
const FISCHERS: &str = "/apis/wardle.example.com/v1alpha1/fischers";
/// What kubectl sends for `/apis`.
const AGGREGATED_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
/// What kubectl get sends.
const TABLE_ACCEPT: &str =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

struct Response {
    code: u16,
    headers: String,
    body: String,
}

impl Response {
    /// The last value of a response header (case-insensitive name).
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .lines()
            .filter_map(|line| line.split_once(':'))
            .filter(|(key, _)| key.trim().eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim().to_string())
            .next_back()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}), HTTP {}: {}", self.code, self.body))
    }
}

/// One curl request to the fixture, trusting its serving CA. `args` are extra curl arguments
/// (identity, method, headers, body); `path` goes after the fixture's URL. Code 0 means no
/// HTTP answer (connection refused, handshake failure).
fn curl<S: AsRef<OsStr>>(wardle: &Wardle, args: &[S], path: &str) -> Response {
    let dir = tempfile::tempdir().unwrap();
    let (headers, body) = (dir.path().join("headers"), dir.path().join("body"));
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "--cacert"])
        .arg(wardle.ca_file())
        .arg("-D")
        .arg(&headers)
        .arg("-o")
        .arg(&body)
        .args(["-w", "%{http_code}"])
        .args(args)
        .arg(format!("{}{path}", wardle.url()))
        .output()
        .unwrap();
    Response {
        code: String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0),
        headers: std::fs::read_to_string(headers).unwrap_or_default(),
        body: std::fs::read_to_string(body).unwrap_or_default(),
    }
}

fn strs(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// curl arguments for a request from the front proxy: its client certificate and the user.
fn as_user(fp: &FrontProxyCa, user: &str) -> Vec<String> {
    vec![
        "--cert".into(),
        fp.client_cert.display().to_string(),
        "--key".into(),
        fp.client_key.display().to_string(),
        "-H".into(),
        format!("X-Remote-User: {user}"),
    ]
}

/// `as_user` plus a JSON body sent with `method`.
fn send(fp: &FrontProxyCa, method: &str, content_type: &str, body: &Value) -> Vec<String> {
    [
        as_user(fp, "alice"),
        strs(&["-X", method, "-H"]),
        vec![
            format!("Content-Type: {content_type}"),
            "--data-binary".into(),
            body.to_string(),
        ],
    ]
    .concat()
}

/// A front-proxy CA (in a temp dir, kept alive by the first element) and a fixture trusting
/// it with default options.
fn setup() -> (tempfile::TempDir, FrontProxyCa, Wardle) {
    let dir = tempfile::tempdir().unwrap();
    let fp = make_front_proxy_ca(dir.path());
    let wardle = Wardle::start(WardleOptions::new(&fp.ca_cert));
    (dir, fp, wardle)
}

fn flunder(name: &str) -> Value {
    json!({
        "apiVersion": "wardle.example.com/v1alpha1",
        "kind": "Flunder",
        "metadata": {"name": name},
        "spec": {"reference": "x"},
    })
}

fn create_flunder(wardle: &Wardle, fp: &FrontProxyCa, name: &str) -> Value {
    let r = curl(
        wardle,
        &send(fp, "POST", "application/json", &flunder(name)),
        FLUNDERS,
    );
    assert_eq!(r.code, 201, "{}", r.body);
    r.json()
}

/// openssl s_client to the fixture with the front-proxy client certificate, verifying the
/// serving certificate for `api.wardle.svc`: stdin and stdout are the raw TLS stream.
fn s_client(wardle: &Wardle, fp: &FrontProxyCa, extra: &[&str]) -> Child {
    Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(format!("127.0.0.1:{}", wardle.port()))
        .args([
            "-servername",
            "api.wardle.svc",
            "-verify_hostname",
            "api.wardle.svc",
        ])
        .args(["-verify_return_error", "-quiet", "-CAfile"])
        .arg(wardle.ca_file())
        .arg("-cert")
        .arg(&fp.client_cert)
        .arg("-key")
        .arg(&fp.client_key)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child's exit (killing it after `timeout`) and collects its output.
fn wait_output(mut child: Child, timeout: Duration) -> Output {
    let deadline = Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn front_proxy_authentication_follows_the_request_header_authenticator() {
    let (dir, fp, wardle) = setup();
    let no_args: [&str; 0] = [];
    for path in ["/healthz", "/livez", "/readyz"] {
        let r = curl(&wardle, &no_args, path);
        assert_eq!((r.code, r.body.as_str()), (200, "ok"), "{path}");
    }

    // No client certificate: the headers alone are not believed.
    let r = curl(&wardle, &["-H", "X-Remote-User: alice"], "/apis");
    assert_eq!(r.code, 401);
    assert_eq!(
        r.json(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})
    );
    // The certificate without X-Remote-User.
    let cert_only = strs(&[
        "--cert",
        &fp.client_cert.display().to_string(),
        "--key",
        &fp.client_key.display().to_string(),
    ]);
    assert_eq!(curl(&wardle, &cert_only, "/apis").code, 401);
    // A certificate from the front-proxy CA whose CN is not allowed.
    let (cert, key) = fp.client_certificate("someone-else");
    let other_cn = strs(&[
        "--cert",
        &cert.display().to_string(),
        "--key",
        &key.display().to_string(),
        "-H",
        "X-Remote-User: alice",
    ]);
    assert_eq!(curl(&wardle, &other_cn, "/apis").code, 401);
    // A certificate from another CA fails the handshake.
    let stranger_dir = dir.path().join("stranger");
    std::fs::create_dir(&stranger_dir).unwrap();
    let stranger = make_front_proxy_ca(&stranger_dir);
    assert_eq!(curl(&wardle, &as_user(&stranger, "alice"), "/apis").code, 0);

    let r = curl(&wardle, &as_user(&fp, "alice"), "/apis");
    assert_eq!(r.code, 200, "{}", r.body);

    let log = wardle.requests();
    let apis: Vec<&Value> = log.iter().filter(|e| e["path"] == "/apis").collect();
    assert_eq!(apis.len(), 4, "{log:#?}");
    assert_eq!(
        (&apis[0]["cn"], &apis[0]["user"], &apis[0]["authenticated"]),
        (&Value::Null, &json!("alice"), &json!(false))
    );
    assert_eq!(apis[0]["code"], 401);
    assert_eq!(apis[1]["cn"], "front-proxy-client");
    assert_eq!(apis[1]["user"], Value::Null);
    assert_eq!(apis[2]["cn"], "someone-else");
    assert_eq!(apis[2]["authenticated"], false);
    assert_eq!(apis[3]["authenticated"], true);
    assert_eq!(apis[3]["code"], 200);
    // The same log over HTTPS, without any identity.
    let served = curl(&wardle, &no_args, "/_requests").json();
    assert_eq!(served.as_array().map(Vec::len), Some(log.len()));
    wardle.clear_requests();
    assert!(wardle.requests().is_empty());

    // An empty allowed-names list takes any certificate the front-proxy CA signed.
    let mut opts = WardleOptions::new(&fp.ca_cert);
    opts.allowed_names.clear();
    let open = Wardle::start(opts);
    assert_eq!(curl(&open, &other_cn, "/apis").code, 200);
}

#[test]
fn flunders_and_fischers_crud_with_identity_in_the_request_log() {
    let (_dir, fp, wardle) = setup();
    let identity = strs(&[
        "-H",
        "X-Remote-Uid: 42",
        "-H",
        "X-Remote-Group: devs",
        "-H",
        "X-Remote-Group: system:authenticated",
        "-H",
        "X-Remote-Extra-Scopes: read",
        "-H",
        "X-Remote-Extra-Scopes: write",
        "-H",
        "X-Remote-Extra-Example.com%2FTeam: blue",
        "-H",
        "Authorization: Bearer should-not-be-here",
    ]);
    let create = [
        send(&fp, "POST", "application/json", &flunder("one")),
        identity,
    ]
    .concat();
    let r = curl(&wardle, &create, FLUNDERS);
    assert_eq!(r.code, 201, "{}", r.body);
    let one = r.json();
    assert_eq!(one["metadata"]["namespace"], "default");
    assert_eq!(one["metadata"]["generation"], 1);
    assert!(one["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty()));
    assert!(one["metadata"]["creationTimestamp"].is_string());
    let rv1: u64 = one["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let entry = wardle
        .requests()
        .into_iter()
        .find(|e| e["method"] == "POST")
        .unwrap();
    assert_eq!(entry["path"], FLUNDERS);
    assert_eq!(entry["cn"], "front-proxy-client");
    assert_eq!(entry["user"], "alice");
    assert_eq!(entry["uid"], "42");
    assert_eq!(entry["groups"], json!(["devs", "system:authenticated"]));
    assert_eq!(
        entry["extra"],
        json!({"scopes": ["read", "write"], "example.com/team": ["blue"]})
    );
    assert_eq!(
        entry["header_values"]["authorization"],
        json!(["Bearer should-not-be-here"])
    );
    assert_eq!(
        entry["header_values"]["x-remote-group"],
        json!(["devs", "system:authenticated"])
    );
    let headers = entry["headers"].as_array().unwrap();
    for name in ["x-remote-user", "authorization", "content-type", "host"] {
        assert!(headers.contains(&json!(name)), "{name} in {headers:?}");
    }
    assert_eq!(entry["code"], 201);

    let alice = as_user(&fp, "alice");
    let r = curl(
        &wardle,
        &send(&fp, "POST", "application/json", &flunder("one")),
        FLUNDERS,
    );
    assert_eq!(r.code, 409);
    assert_eq!(r.json()["reason"], "AlreadyExists");
    assert_eq!(
        r.json()["message"],
        "flunders.wardle.example.com \"one\" already exists"
    );
    let r = curl(&wardle, &alice, &format!("{FLUNDERS}/one"));
    assert_eq!(r.code, 200);
    assert_eq!(r.json()["metadata"]["uid"], one["metadata"]["uid"]);
    let r = curl(&wardle, &alice, &format!("{FLUNDERS}/nope"));
    assert_eq!(r.code, 404);
    assert_eq!(r.json()["reason"], "NotFound");
    assert_eq!(
        r.json()["message"],
        "flunders.wardle.example.com \"nope\" not found"
    );

    // Lists: per namespace, all namespaces, label selectors.
    let mut labelled = flunder("two");
    labelled["metadata"]["labels"] = json!({"app": "x"});
    let r = curl(
        &wardle,
        &send(&fp, "POST", "application/json", &labelled),
        "/apis/wardle.example.com/v1alpha1/namespaces/other/flunders",
    );
    assert_eq!(r.code, 201, "{}", r.body);
    let names = |path: &str| -> Vec<String> {
        let r = curl(&wardle, &alice, path);
        assert_eq!(r.code, 200, "{path}: {}", r.body);
        let list = r.json();
        assert_eq!(list["kind"], "FlunderList");
        assert!(list["metadata"]["resourceVersion"].is_string());
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(FLUNDERS), ["one"]);
    assert_eq!(names(&format!("{V1ALPHA1}/flunders")), ["one", "two"]);
    assert_eq!(
        names(&format!("{V1ALPHA1}/flunders?labelSelector=app%3Dx")),
        ["two"]
    );
    assert_eq!(
        names(&format!("{V1ALPHA1}/flunders?labelSelector=app!%3Dx")),
        ["one"]
    );
    assert_eq!(
        names(&format!(
            "{V1ALPHA1}/flunders?fieldSelector=metadata.namespace%3Ddefault"
        )),
        ["one"]
    );

    // Tables for kubectl get: kube's default columns, rows carrying PartialObjectMetadata.
    let r = curl(
        &wardle,
        &[
            alice.clone(),
            strs(&["-H", &format!("Accept: {TABLE_ACCEPT}")]),
        ]
        .concat(),
        FLUNDERS,
    );
    assert_eq!(r.code, 200);
    let table = r.json();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    let columns: Vec<(&str, &str, &str)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap(),
                c["format"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        columns,
        [("Name", "string", "name"), ("Created At", "date", "")]
    );
    assert_eq!(table["rows"][0]["cells"][0], "one");
    assert_eq!(
        table["rows"][0]["cells"][1],
        one["metadata"]["creationTimestamp"]
    );
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "one");

    // Update: a stale resourceVersion conflicts, the current one wins and bumps generation.
    let mut stale = one.clone();
    stale["metadata"]["resourceVersion"] = json!("1000");
    stale["spec"]["reference"] = json!("y");
    let r = curl(
        &wardle,
        &send(&fp, "PUT", "application/json", &stale),
        &format!("{FLUNDERS}/one"),
    );
    assert_eq!(r.code, 409);
    assert_eq!(r.json()["reason"], "Conflict");
    let mut fresh = one.clone();
    fresh["spec"]["reference"] = json!("y");
    let r = curl(
        &wardle,
        &send(&fp, "PUT", "application/json", &fresh),
        &format!("{FLUNDERS}/one"),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let updated = r.json();
    assert_eq!(updated["spec"]["reference"], "y");
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_eq!(updated["metadata"]["uid"], one["metadata"]["uid"]);
    let rv2: u64 = updated["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);

    // Patches: merge, strategic (as merge, directives dropped), JSON patch.
    let r = curl(
        &wardle,
        &send(
            &fp,
            "PATCH",
            "application/merge-patch+json",
            &json!({"spec": {"referenceType": "Fischer"}, "metadata": {"labels": {"a": "b"}}}),
        ),
        &format!("{FLUNDERS}/one"),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["referenceType"], "Fischer");
    assert_eq!(r.json()["spec"]["reference"], "y");
    let r = curl(
        &wardle,
        &send(
            &fp,
            "PATCH",
            "application/strategic-merge-patch+json",
            &json!({"spec": {"reference": null}, "metadata": {"$setElementOrder/x": [], "labels": {"c": "d"}}}),
        ),
        &format!("{FLUNDERS}/one"),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["spec"], json!({"referenceType": "Fischer"}));
    assert_eq!(r.json()["metadata"]["labels"], json!({"a": "b", "c": "d"}));
    let r = curl(
        &wardle,
        &send(
            &fp,
            "PATCH",
            "application/json-patch+json",
            &json!([{"op": "replace", "path": "/spec/referenceType", "value": "Flunder"}]),
        ),
        &format!("{FLUNDERS}/one"),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["referenceType"], "Flunder");
    let r = curl(
        &wardle,
        &send(&fp, "PATCH", "application/merge-patch+json", &json!({})),
        &format!("{FLUNDERS}/missing"),
    );
    assert_eq!(r.code, 404);

    // Delete answers a Success Status; the object is gone.
    let r = curl(
        &wardle,
        &[alice.clone(), strs(&["-X", "DELETE"])].concat(),
        &format!("{FLUNDERS}/one"),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "Success");
    assert_eq!(r.json()["details"]["name"], "one");
    assert_eq!(curl(&wardle, &alice, &format!("{FLUNDERS}/one")).code, 404);

    // Fischers are cluster-scoped.
    let fischer = json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer", "metadata": {"name": "f"}, "disallowedFlunders": ["one"]});
    let r = curl(
        &wardle,
        &send(&fp, "POST", "application/json", &fischer),
        FISCHERS,
    );
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(r.json()["metadata"].get("namespace").is_none());
    let r = curl(&wardle, &alice, FISCHERS);
    assert_eq!(r.json()["kind"], "FischerList");
    assert_eq!(r.json()["items"][0]["disallowedFlunders"], json!(["one"]));
    let r = curl(
        &wardle,
        &send(&fp, "POST", "application/json", &fischer),
        "/apis/wardle.example.com/v1alpha1/namespaces/default/fischers",
    );
    assert_eq!(r.code, 404);
    // A kind that does not match the resource.
    let r = curl(
        &wardle,
        &send(&fp, "POST", "application/json", &fischer),
        FLUNDERS,
    );
    assert_eq!(r.code, 400, "{}", r.body);
}

#[test]
fn watch_streams_added_then_modified_until_timeout() {
    let (_dir, fp, wardle) = setup();
    let created = create_flunder(&wardle, &fp, "w");
    let watch = curl_child(
        &wardle,
        &as_user(&fp, "alice"),
        &format!("{FLUNDERS}?watch=true&timeoutSeconds=3"),
    );
    // Update once the watch is being served (its log entry is written as it starts).
    assert!(eventually(Duration::from_secs(10), || {
        wardle.requests().iter().any(|e| {
            e["path"].as_str().is_some_and(|p| p.contains("watch=true")) && e["code"] == 200
        })
    }));
    let mut changed = created.clone();
    changed["spec"]["reference"] = json!("changed");
    let r = curl(
        &wardle,
        &send(&fp, "PUT", "application/json", &changed),
        &format!("{FLUNDERS}/w"),
    );
    assert_eq!(r.code, 200, "{}", r.body);

    let out = wait_output(watch, Duration::from_secs(20));
    // curl exits 0 only when the chunked stream was terminated properly at the timeout.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED"]);
    assert_eq!(events[1]["object"]["spec"]["reference"], "changed");

    // From a resourceVersion: only what happened after it.
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let r = curl(
        &wardle,
        &as_user(&fp, "alice"),
        &format!("{FLUNDERS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
    );
    assert_eq!(r.code, 200);
    assert_eq!(
        r.header("transfer-encoding").as_deref(),
        Some("chunked"),
        "{}",
        r.headers
    );
    let events: Vec<Value> = r
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{}", r.body);
    assert_eq!(events[0]["type"], "MODIFIED");

    // A Table watch (kubectl get -w): column definitions with the first event only.
    let r = curl(
        &wardle,
        &[
            as_user(&fp, "alice"),
            strs(&["-H", &format!("Accept: {TABLE_ACCEPT}")]),
        ]
        .concat(),
        &format!("{FLUNDERS}?watch=1&resourceVersion=0&timeoutSeconds=1"),
    );
    let event: Value = serde_json::from_str(r.body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["kind"], "Table");
    assert_eq!(event["object"]["rows"][0]["cells"][0], "w");
}

/// curl in the background (for a watch): stdout is the response body.
fn curl_child(wardle: &Wardle, args: &[String], path: &str) -> Child {
    Command::new("curl")
        .args(["-sS", "-N", "--max-time", "20", "--cacert"])
        .arg(wardle.ca_file())
        .args(args)
        .arg(format!("{}{path}", wardle.url()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn discovery_is_aggregated_when_asked_and_legacy_otherwise() {
    let (_dir, fp, wardle) = setup();
    let alice = as_user(&fp, "alice");
    let accept = |value: &str| [alice.clone(), strs(&["-H", &format!("Accept: {value}")])].concat();

    let r = curl(&wardle, &accept(AGGREGATED_ACCEPT), "/apis");
    assert_eq!(r.code, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let list = r.json();
    assert_eq!(list["kind"], "APIGroupDiscoveryList");
    assert_eq!(list["apiVersion"], "apidiscovery.k8s.io/v2");
    let group = &list["items"][0];
    assert_eq!(group["metadata"]["name"], "wardle.example.com");
    assert_eq!(group["versions"][0]["version"], "v1alpha1");
    let resources = group["versions"][0]["resources"].as_array().unwrap();
    let flunders = resources
        .iter()
        .find(|r| r["resource"] == "flunders")
        .unwrap();
    assert_eq!(flunders["scope"], "Namespaced");
    assert_eq!(flunders["singularResource"], "flunder");
    assert_eq!(
        flunders["responseKind"],
        json!({"group": "", "version": "", "kind": "Flunder"})
    );
    assert_eq!(
        flunders["verbs"],
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    let fischers = resources
        .iter()
        .find(|r| r["resource"] == "fischers")
        .unwrap();
    assert_eq!(fischers["scope"], "Cluster");
    assert_eq!(fischers["responseKind"]["kind"], "Fischer");

    // ETags: a matching If-None-Match is a 304.
    let etag = r.header("etag").unwrap();
    let r = curl(
        &wardle,
        &[
            accept(AGGREGATED_ACCEPT),
            strs(&["-H", &format!("If-None-Match: {etag}")]),
        ]
        .concat(),
        "/apis",
    );
    assert_eq!(r.code, 304);

    let r = curl(
        &wardle,
        &accept("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
        "/apis",
    );
    assert_eq!(r.json()["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    assert!(r.header("content-type").unwrap().contains("v=v2beta1"));

    for r in [
        curl(&wardle, &alice, "/apis"),
        curl(&wardle, &accept("application/json"), "/apis"),
    ] {
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json")
        );
        let list = r.json();
        assert_eq!(list["kind"], "APIGroupList");
        assert_eq!(
            list["groups"][0]["preferredVersion"],
            json!({"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"})
        );
    }
    let r = curl(&wardle, &alice, "/apis/wardle.example.com");
    assert_eq!(r.json()["kind"], "APIGroup");
    assert_eq!(r.json()["name"], "wardle.example.com");
    let r = curl(&wardle, &alice, V1ALPHA1);
    let list = r.json();
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["groupVersion"], "wardle.example.com/v1alpha1");
    let flunders = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "flunders")
        .unwrap();
    assert_eq!(flunders["namespaced"], true);
    assert_eq!(flunders["kind"], "Flunder");
    assert_eq!(flunders["singularName"], "flunder");

    // A server from before aggregated discovery answers the legacy list whatever is asked.
    let mut opts = WardleOptions::new(&fp.ca_cert);
    opts.aggregated_discovery = false;
    let old = Wardle::start(opts);
    let r = curl(&old, &accept(AGGREGATED_ACCEPT), "/apis");
    assert_eq!(r.code, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(r.json()["kind"], "APIGroupList");
}

/// Every `$ref` in `value` points at an existing schema in `schemas` (named under `prefix`).
fn assert_refs_resolve(value: &Value, prefix: &str, schemas: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                let name = target
                    .strip_prefix(prefix)
                    .unwrap_or_else(|| panic!("ref {target} outside {prefix}"));
                assert!(schemas.get(name).is_some(), "dangling ref {target}");
            }
            for item in map.values() {
                assert_refs_resolve(item, prefix, schemas);
            }
        }
        Value::Array(items) => {
            for item in items {
                assert_refs_resolve(item, prefix, schemas);
            }
        }
        _ => {}
    }
}

#[test]
fn openapi_v3_index_documents_and_v2() {
    let (dir, fp, wardle) = setup();
    let alice = as_user(&fp, "alice");
    let index = curl(&wardle, &alice, "/openapi/v3").json();
    let url = index["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(index["paths"]["apis/wardle.example.com"].is_object());
    let hash = url
        .strip_prefix("/openapi/v3/apis/wardle.example.com/v1alpha1?hash=")
        .unwrap()
        .to_string();
    let r = curl(&wardle, &alice, &url);
    assert_eq!(r.code, 200);
    assert_eq!(r.header("etag"), Some(format!("\"{hash}\"")));
    assert_eq!(
        r.header("cache-control").as_deref(),
        Some("public, immutable")
    );
    // The hash is the upper-case hex SHA-512 of the document, as kube-openapi computes it.
    let saved = dir.path().join("v1alpha1.json");
    std::fs::write(&saved, &r.body).unwrap();
    let digest = Command::new("openssl")
        .args(["dgst", "-sha512", "-r"])
        .arg(&saved)
        .output()
        .unwrap();
    let digest = String::from_utf8_lossy(&digest.stdout);
    assert_eq!(
        digest.split_whitespace().next().unwrap().to_uppercase(),
        hash
    );
    // A stale hash redirects to the current one.
    let r = curl(
        &wardle,
        &alice,
        "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=OLD",
    );
    assert_eq!(r.code, 301);
    assert_eq!(r.header("location"), Some(url.clone()));

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.0"));
    let schemas = &doc["components"]["schemas"];
    let flunder = &schemas["com.example.wardle.v1alpha1.Flunder"];
    assert_eq!(
        flunder["x-kubernetes-group-version-kind"],
        json!([{"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"}])
    );
    for field in ["apiVersion", "kind", "metadata", "spec", "status"] {
        assert!(flunder["properties"][field].is_object(), "{field}");
    }
    assert_eq!(
        flunder["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let spec = &schemas["com.example.wardle.v1alpha1.FlunderSpec"]["properties"];
    assert!(spec["reference"]["description"].is_string());
    assert_eq!(spec["referenceType"]["type"], "string");
    assert!(schemas["com.example.wardle.v1alpha1.FlunderList"].is_object());
    assert!(
        schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["name"]
            .is_object()
    );
    let item =
        &doc["paths"]["/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders/{name}"];
    assert_eq!(
        item["get"]["x-kubernetes-group-version-kind"],
        json!({"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"})
    );
    // kubectl looks for fieldValidation on the PATCH operation to validate server-side.
    assert!(item["patch"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation"));
    assert!(doc["paths"]["/apis/wardle.example.com/v1alpha1/fischers"]["get"].is_object());
    assert_refs_resolve(&doc, "#/components/schemas/", schemas);

    let r = curl(&wardle, &alice, "/openapi/v2");
    assert_eq!(r.code, 200);
    assert!(r.header("etag").is_some());
    let swagger = r.json();
    assert_eq!(swagger["swagger"], "2.0");
    let definitions = &swagger["definitions"];
    assert_eq!(
        definitions["com.example.wardle.v1alpha1.Flunder"]["properties"]["spec"]["$ref"],
        "#/definitions/com.example.wardle.v1alpha1.FlunderSpec"
    );
    assert_eq!(
        definitions["com.example.wardle.v1alpha1.Flunder"]["x-kubernetes-group-version-kind"][0]
            ["kind"],
        "Flunder"
    );
    assert_refs_resolve(&swagger, "#/definitions/", definitions);
}

#[test]
fn refused_upgrade_answers_400_and_keeps_the_connection_open() {
    let (_dir, fp, wardle) = setup();
    // Three pipelined requests on one TLS connection (the front proxy's certificate): a
    // refused exec upgrade, then a request whose identity headers the client chose itself,
    // then one that closes the connection. The second must be answered as HTTP: behind a
    // proxy that took the 400 for an upgrade, that is CVE-2018-1002105.
    let mut child = s_client(&wardle, &fp, &[]);
    let requests = format!(
        "POST {FLUNDERS}/refused/exec?command=sh HTTP/1.1\r\nHost: api.wardle.svc\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Remote-User: alice\r\nContent-Length: 0\r\n\r\n\
         GET {V1ALPHA1}/flunders HTTP/1.1\r\nHost: api.wardle.svc\r\nX-Remote-User: mallory\r\nX-Remote-Group: system:masters\r\n\r\n\
         GET /healthz HTTP/1.1\r\nHost: api.wardle.svc\r\nConnection: close\r\n\r\n"
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(requests.as_bytes())
        .unwrap();
    let out = wait_output(child, Duration::from_secs(20));
    let text = String::from_utf8_lossy(&out.stdout);
    // Bodies end without a newline: find the status lines by their prefix.
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .filter_map(|(at, _)| text[at..].lines().next())
        .collect();
    assert_eq!(
        statuses,
        [
            "HTTP/1.1 400 Bad Request",
            "HTTP/1.1 200 OK",
            "HTTP/1.1 200 OK"
        ],
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("\"reason\":\"BadRequest\""), "{text}");
    assert!(text.contains("\"kind\":\"FlunderList\""), "{text}");

    let log = wardle.requests();
    assert_eq!(log.len(), 3, "{log:#?}");
    assert_eq!(log[0]["code"], 400);
    assert_eq!(log[0]["method"], "POST");
    assert!(log[0]["headers"]
        .as_array()
        .unwrap()
        .contains(&json!("upgrade")));
    assert_eq!(log[1]["user"], "mallory");
    assert_eq!(log[1]["groups"], json!(["system:masters"]));
    assert_eq!(log[1]["cn"], "front-proxy-client");
    assert_eq!(log[1]["code"], 200);

    // Without the upgrade headers an exec is a plain 400 too.
    let r = curl(
        &wardle,
        &[as_user(&fp, "alice"), strs(&["-X", "POST"])].concat(),
        &format!("{FLUNDERS}/upgrade-ok/exec"),
    );
    assert_eq!(r.code, 400);
}

#[test]
fn accepted_upgrade_switches_protocols_and_echoes() {
    let (_dir, fp, wardle) = setup();
    // -no_ign_eof: closing stdin closes the connection, which ends the echo.
    let mut child = s_client(&wardle, &fp, &["-no_ign_eof"]);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a line from the fixture")
    };
    write!(
        stdin,
        "POST {FLUNDERS}/upgrade-ok/exec?command=sh HTTP/1.1\r\nHost: api.wardle.svc\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Remote-User: alice\r\n\r\n"
    )
    .unwrap();
    stdin.flush().unwrap();
    assert_eq!(next().trim_end(), "HTTP/1.1 101 Switching Protocols");
    let mut headers = Vec::new();
    loop {
        let line = next();
        if line.trim_end().is_empty() {
            break;
        }
        headers.push(line.trim_end().to_lowercase());
    }
    assert!(
        headers.contains(&"upgrade: spdy/3.1".to_string()),
        "{headers:?}"
    );
    assert!(
        headers.contains(&"connection: upgrade".to_string()),
        "{headers:?}"
    );
    for payload in ["ping-1", "GET /apis HTTP/1.1"] {
        writeln!(stdin, "{payload}").unwrap();
        stdin.flush().unwrap();
        assert_eq!(next(), payload);
    }
    drop(stdin);
    let out = wait_output(child, Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = wardle.requests();
    assert_eq!(log.len(), 1, "the echoed bytes are not requests: {log:#?}");
    assert_eq!(log[0]["code"], 101);
}

#[test]
fn stop_refuses_connections_and_restart_serves_the_same_port_and_objects() {
    let (_dir, fp, mut wardle) = setup();
    create_flunder(&wardle, &fp, "a");
    let b = create_flunder(&wardle, &fp, "b");
    let port = wardle.port();
    assert!(wardle.pid() > 0);
    let no_args: [&str; 0] = [];

    wardle.stop();
    assert_eq!(wardle.pid(), 0);
    assert_eq!(curl(&wardle, &no_args, "/healthz").code, 0);

    wardle.restart();
    assert_eq!(wardle.port(), port);
    assert!(wardle.pid() > 0);
    assert_eq!(curl(&wardle, &no_args, "/healthz").code, 200);
    let r = curl(&wardle, &as_user(&fp, "alice"), &format!("{FLUNDERS}/b"));
    assert_eq!(r.code, 200, "objects survive a restart: {}", r.body);
    assert_eq!(r.json()["metadata"]["uid"], b["metadata"]["uid"]);
    // Events from before the restart are gone: resuming from them is 410 Expired.
    let r = curl(
        &wardle,
        &as_user(&fp, "alice"),
        &format!("{FLUNDERS}?watch=1&resourceVersion=1&timeoutSeconds=1"),
    );
    let event: Value = serde_json::from_str(r.body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");

    // Restarting a running server works too.
    wardle.restart();
    assert_eq!(wardle.port(), port);
    assert_eq!(curl(&wardle, &no_args, "/healthz").code, 200);
    let resumed = create_flunder(&wardle, &fp, "c");
    let rv: u64 = resumed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rv, 3, "the resourceVersion counter continues");
}

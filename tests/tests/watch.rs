//! Watches: `kubectl get -w` sees ADDED/MODIFIED/DELETED live and in order, and a raw watch
//! resumed from a resourceVersion replays exactly the events after it.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::Kubegate;
use serde_json::Value;

#[test]
fn kubectl_get_watch_sees_changes_live() {
    let gate = Kubegate::start();
    gate.ok(&["create", "ns", "team-a"]);
    let stream = gate.stream(&[
        "-n",
        "team-a",
        "get",
        "cm",
        "-w",
        "--output-watch-events",
        "-o",
        "custom-columns=EVENT:.type,NAME:.object.metadata.name,A:.object.data.a",
    ]);
    // Let the watch establish before changing anything.
    std::thread::sleep(Duration::from_millis(1500));
    gate.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "app",
        "--from-literal=a=1",
    ]);
    let added = stream.wait_for(Duration::from_secs(15), |l| l.contains("app"));
    let added = added.expect("ADDED event for app");
    assert!(added.contains("ADDED") && added.contains(" 1"), "{added}");
    gate.ok(&[
        "-n",
        "team-a",
        "patch",
        "cm",
        "app",
        "--type=merge",
        "-p",
        r#"{"data":{"a":"2"}}"#,
    ]);
    let modified = stream
        .wait_for(Duration::from_secs(15), |l| l.contains("app"))
        .expect("MODIFIED");
    assert!(
        modified.contains("MODIFIED") && modified.contains(" 2"),
        "{modified}"
    );
    gate.ok(&["-n", "team-a", "delete", "cm", "app"]);
    let deleted = stream
        .wait_for(Duration::from_secs(15), |l| l.contains("app"))
        .expect("DELETED");
    assert!(deleted.contains("DELETED"), "{deleted}");
}

fn events(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad frame {l}: {e}")))
        .collect()
}

#[test]
fn raw_watch_orders_events_and_resumes_from_a_resource_version() {
    let gate = Kubegate::start();
    gate.ok(&["create", "ns", "w"]);
    gate.ok(&[
        "-n",
        "w",
        "create",
        "configmap",
        "one",
        "--from-literal=k=1",
    ]);
    let start = gate.json(&["-n", "w", "get", "cm", "one", "-o", "json"]);
    let start_rv = start["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    gate.ok(&[
        "-n",
        "w",
        "create",
        "configmap",
        "two",
        "--from-literal=k=2",
    ]);
    gate.ok(&[
        "-n",
        "w",
        "patch",
        "cm",
        "one",
        "--type=merge",
        "-p",
        r#"{"data":{"k":"3"}}"#,
    ]);
    gate.ok(&["-n", "w", "delete", "cm", "two"]);

    // Resume after `start_rv`: exactly the three later events, in order, with increasing RVs.
    let path = format!(
        "/api/v1/namespaces/w/configmaps?watch=1&resourceVersion={start_rv}&timeoutSeconds=2"
    );
    let (code, body) = gate.curl("GET", &path, &[], None);
    assert_eq!(code, 200);
    let evs = events(&body);
    let summary: Vec<(String, String)> = evs
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("ADDED".to_string(), "two".to_string()),
            ("MODIFIED".to_string(), "one".to_string()),
            ("DELETED".to_string(), "two".to_string()),
        ],
        "{evs:?}"
    );
    let rvs: Vec<u64> = evs
        .iter()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    assert!(rvs[0] > start_rv.parse::<u64>().unwrap());
    assert_eq!(evs[1]["object"]["data"]["k"], "3");

    // Without a resourceVersion: the current state as ADDED events.
    let (_, body) = gate.curl(
        "GET",
        "/api/v1/namespaces/w/configmaps?watch=1&timeoutSeconds=1",
        &[],
        None,
    );
    // The namespace's own `kube-root-ca.crt` is part of its current state.
    let evs: Vec<_> = events(&body)
        .into_iter()
        .filter(|e| e["object"]["metadata"]["name"] != "kube-root-ca.crt")
        .collect();
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["type"], "ADDED");
    assert_eq!(evs[0]["object"]["metadata"]["name"], "one");

    // A label-selected watch, with bookmarks allowed, still delivers only matching objects.
    let (_, body) = gate.curl("GET", "/api/v1/namespaces/w/configmaps", &[], None);
    let list: Value = serde_json::from_slice(&body).unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    gate.ok(&[
        "-n",
        "w",
        "create",
        "configmap",
        "plain",
        "--from-literal=k=1",
    ]);
    gate.ok_stdin(
        &["-n", "w", "apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labelled\n  labels: {app: x}\n",
    );
    let path = format!("/api/v1/namespaces/w/configmaps?watch=1&resourceVersion={rv}&labelSelector=app%3Dx&allowWatchBookmarks=true&timeoutSeconds=1");
    let (_, body) = gate.curl("GET", &path, &[], None);
    let names: Vec<String> = events(&body)
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, vec!["labelled".to_string()]);
}

#[test]
fn watch_from_a_compacted_revision_gets_410_expired() {
    // A tiny history makes older revisions unavailable quickly.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "storage:\n  eventHistory: 100\n  watchCacheHistory: 100\n",
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);
    gate.ok(&["create", "ns", "c"]);
    for i in 0..150 {
        gate.ok(&[
            "-n",
            "c",
            "create",
            "configmap",
            &format!("cm{i}"),
            "--from-literal=a=b",
        ]);
    }
    let (code, body) = gate.curl(
        "GET",
        "/api/v1/namespaces/c/configmaps?watch=1&resourceVersion=2&timeoutSeconds=1",
        &[],
        None,
    );
    assert_eq!(code, 200, "kube answers 200 and sends an ERROR event");
    let evs = events(&body);
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["type"], "ERROR");
    assert_eq!(evs[0]["object"]["code"], 410);
    assert_eq!(evs[0]["object"]["reason"], "Expired");
}

/// A WebSocket client as a browser is one: the token in the subprotocol, one event per
/// message. Prints the status line, the headers, then `MSG <opcode> <type> <name>` per event
/// and `CLOSE <payload hex>` at the end.
const WEBSOCKET_CLIENT: &str = r#"
import base64, json, os, socket, ssl, struct, sys
host, port, path, token, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
s = ctx.wrap_socket(socket.create_connection((host, port)), server_hostname=host)
key = base64.b64encode(os.urandom(16)).decode()
bearer = "base64url.bearer.authorization.k8s.io." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
s.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\nOrigin: https://{host}\r\n"
           f"Sec-WebSocket-Protocol: {bearer}, base64.binary.k8s.io\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, rest = buf.split(b"\r\n\r\n", 1)
for line in head.decode().splitlines():
    print(line)
print("KEY", key)
sys.stdout.flush()
def read(n):
    global rest
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError
        rest += chunk
    out, rest = rest[:n], rest[n:]
    return out
try:
    while True:
        b0, b1 = read(2)
        length = b1 & 0x7f
        if length == 126: length = struct.unpack(">H", read(2))[0]
        elif length == 127: length = struct.unpack(">Q", read(8))[0]
        payload = read(length)
        if b0 & 0x0f == 8:
            print("CLOSE", payload.hex())
            break
        event = json.loads(payload)
        print("MSG", b0 & 0x0f, event["type"], event["object"]["metadata"].get("name"))
        sys.stdout.flush()
except EOFError:
    print("EOF")
"#;

/// kube serves watches over WebSocket (browsers' dashboards watch this way): `101 Switching
/// Protocols` with RFC 6455's accept key and the subprotocol other than the token one, then one
/// text message per event, and a close frame when the watch ends.
#[test]
fn a_watch_over_websocket_gets_one_message_per_event() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "ws"]);
    gate.ok(&["create", "serviceaccount", "viewer"]);
    gate.ok(&[
        "create",
        "clusterrolebinding",
        "viewer",
        "--clusterrole=view",
        "--serviceaccount=default:viewer",
    ]);
    let token = gate.ok(&["create", "token", "viewer"]);
    let port = gate.url().rsplit(':').next().unwrap().to_string();
    let ca = gate.data_dir.join("pki/ca.crt");
    let client = std::process::Command::new("python3")
        .args(["-c", WEBSOCKET_CLIENT, "127.0.0.1", &port])
        .arg("/api/v1/namespaces/ws/configmaps?watch=1&timeoutSeconds=3&labelSelector=app%3Dweb")
        .arg(token.trim())
        .arg(&ca)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    std::thread::sleep(Duration::from_millis(800));
    gate.ok(&["-n", "ws", "create", "configmap", "one"]);
    gate.ok(&["-n", "ws", "label", "configmap", "one", "app=web"]);
    let out = client.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some("HTTP/1.1 101 Switching Protocols"),
        "{text}"
    );
    let header = |name: &str| {
        lines
            .iter()
            .find_map(|l| {
                l.split_once(": ")
                    .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            })
            .map(|(_, v)| v.to_string())
    };
    assert_eq!(
        header("sec-websocket-protocol").as_deref(),
        Some("base64.binary.k8s.io")
    );
    // RFC 6455: base64(SHA-1(key + GUID)), checked with openssl.
    let key = lines.iter().find_map(|l| l.strip_prefix("KEY ")).unwrap();
    let digest = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf '%s' '{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11' | openssl dgst -sha1 -binary | base64"
        ))
        .output()
        .unwrap();
    assert_eq!(
        header("sec-websocket-accept").as_deref(),
        Some(String::from_utf8_lossy(&digest.stdout).trim())
    );
    let messages: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("MSG"))
        .collect();
    assert_eq!(messages, ["MSG 1 ADDED one"], "{text}");
    assert_eq!(lines.last().copied(), Some("CLOSE 03e8"), "{text}");
}

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

//! End-to-end Event expiry (`--event-ttl`) with the real kubectl, on the embedded store and on
//! etcd: an Event is listed, then goes once a TTL has passed since its last write (a watcher
//! sees DELETED), while an Event kept updated stays; core/v1 and events.k8s.io/v1 Events are
//! the same objects and expire alike; Events written before a restart still expire.

use std::time::Duration;

use kubegate_tests::etcd::Etcd;
use kubegate_tests::{eventually, Kubegate};

/// Short enough for a quick test, long enough that an Event updated every second or so (two
/// kubectl runs) is never TTL-old, even when CI's parallel tests slow kubectl down.
const TTL: &str = "8s";
/// [`TTL`] as a duration.
const TTL_DURATION: Duration = Duration::from_secs(8);
/// Generous bound for an expiry to show (the TTL, the batching window, a slow machine).
const EXPIRY_WAIT: Duration = Duration::from_secs(30);

fn core_event(name: &str, message: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Event
metadata: {{name: {name}, namespace: default}}
involvedObject: {{kind: ConfigMap, name: app, namespace: default}}
reason: Testing
message: {message}
type: Normal
count: 1
"#
    )
}

fn events_v1_event(name: &str) -> String {
    format!(
        r#"apiVersion: events.k8s.io/v1
kind: Event
metadata: {{name: {name}, namespace: default}}
eventTime: "2024-01-01T00:00:00.000000Z"
reportingController: example.com/ttl-test
reportingInstance: ttl-test-1
action: Testing
reason: Testing
regarding: {{kind: ConfigMap, name: app, namespace: default}}
note: written through events.k8s.io/v1
type: Normal
"#
    )
}

/// The names of the Events in `default`, through core/v1.
fn event_names(gate: &Kubegate) -> Vec<String> {
    gate.ok(&[
        "-n",
        "default",
        "get",
        "events",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

fn exists(gate: &Kubegate, name: &str) -> bool {
    event_names(gate).iter().any(|n| n == name)
}

/// Writes Event `name` again (its count), as an event recorder does for a repeated event.
fn touch(gate: &Kubegate, name: &str, count: u32) {
    gate.ok(&[
        "-n",
        "default",
        "patch",
        "event",
        name,
        "--type=merge",
        "-p",
        &format!("{{\"count\":{count}}}"),
    ]);
}

/// Keeps `kept` updated until `done` says so (or the expiry wait runs out); returns whether
/// `done` came true and how many updates were made.
fn keep_updating_until(gate: &Kubegate, kept: &str, mut done: impl FnMut() -> bool) -> (bool, u32) {
    let mut count = 1;
    let ok = eventually(EXPIRY_WAIT, || {
        count += 1;
        touch(gate, kept, count);
        done()
    });
    (ok, count)
}

/// An Event left alone expires (the watcher sees DELETED, both APIs stop listing it) while an
/// Event updated all along stays; once its updates stop, it expires too.
fn expires_unless_updated(gate: &Kubegate) {
    let watch = gate.stream(&[
        "-n",
        "default",
        "get",
        "events",
        "--watch-only",
        "--output-watch-events",
        "-o",
        "jsonpath={.type} {.object.metadata.name}{\"\\n\"}",
    ]);
    gate.ok_stdin(
        &["create", "-f", "-"],
        &core_event("kept", "kept by updates"),
    );
    gate.ok_stdin(&["create", "-f", "-"], &core_event("dropped", "left alone"));
    gate.ok_stdin(&["create", "-f", "-"], &events_v1_event("dropped-v1"));
    let names = event_names(gate);
    for name in ["kept", "dropped", "dropped-v1"] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} not listed: {names:?}"
        );
    }
    assert!(
        watch
            .wait_for(Duration::from_secs(10), |l| l == "ADDED dropped")
            .is_some(),
        "the watcher never saw dropped ADDED"
    );

    let (gone, updates) = keep_updating_until(gate, "kept", || {
        let names = event_names(gate);
        !names.iter().any(|n| n == "dropped" || n == "dropped-v1")
    });
    assert!(
        gone,
        "dropped events still listed: {:?}\n{}",
        event_names(gate),
        kubegate_tests::tail(&gate.log(), 30)
    );
    assert!(updates > 2, "kept was updated only {updates} times");
    assert!(
        watch
            .wait_for(Duration::from_secs(10), |l| l == "DELETED dropped")
            .is_some(),
        "the watcher never saw dropped DELETED"
    );
    // Through events.k8s.io/v1 too: the same objects.
    let v1 = gate.ok(&[
        "-n",
        "default",
        "get",
        "events.v1.events.k8s.io",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
    ]);
    assert_eq!(v1.trim(), "kept", "events.k8s.io/v1 lists {v1:?}");

    // kept outlives the dropped ones as long as it is written: keep it updated for a further
    // TTL and more (a patch of a deleted Event would fail), checking it is still listed.
    let mut count = updates;
    let until = std::time::Instant::now() + TTL_DURATION + Duration::from_secs(2);
    while std::time::Instant::now() < until {
        count += 1;
        touch(gate, "kept", count);
        assert!(exists(gate, "kept"), "kept was deleted although updated");
        std::thread::sleep(Duration::from_millis(400));
    }
    // Left alone, it expires as well.
    assert!(
        eventually(EXPIRY_WAIT, || !exists(gate, "kept")),
        "kept never expired after its updates stopped"
    );
    assert!(
        watch
            .wait_for(Duration::from_secs(10), |l| l == "DELETED kept")
            .is_some(),
        "the watcher never saw kept DELETED"
    );
}

#[test]
fn events_expire_on_the_embedded_store() {
    let mut gate = Kubegate::start_with(&["--event-ttl", TTL]);
    expires_unless_updated(&gate);

    // Other objects are not touched.
    gate.ok(&["-n", "default", "create", "configmap", "stays"]);
    // An Event written before a restart still expires after it.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &core_event("before-restart", "written before a restart"),
    );
    assert!(exists(&gate, "before-restart"));
    gate.restart();
    assert!(
        eventually(EXPIRY_WAIT, || !exists(&gate, "before-restart")),
        "an event written before the restart never expired"
    );
    gate.ok(&["-n", "default", "get", "configmap", "stays"]);
}

#[test]
fn events_expire_on_etcd_through_leases() {
    let etcd = Etcd::start();
    let gate = Kubegate::start_with(&["--etcd-servers", &etcd.url(), "--event-ttl", TTL]);
    expires_unless_updated(&gate);
}

#[test]
fn a_bad_event_ttl_stops_the_start_with_its_field_path() {
    let out = std::process::Command::new(kubegate_tests::binary())
        .args(["serve", "--event-ttl", "0s", "--data-dir"])
        .arg(tempfile_dir().path())
        .output()
        .expect("run kubegate");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("eventTTL: Invalid value: \"0s\": must be greater than 0"),
        "{stderr}"
    );
}

fn tempfile_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

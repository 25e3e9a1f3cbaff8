//! The garbage collector with the real kubectl: dependents of a deleted owner are deleted
//! (`--cascade=background`, kubectl's default), kept and released (`--cascade=orphan`), or
//! deleted before their owner (`--cascade=foreground`, which waits for the dependents that
//! block it); owners of kinds not served here, and owners that exist, keep their dependents.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

/// A ConfigMap owned by `owners` (apiVersion, kind, name, uid, blockOwnerDeletion).
fn dependent(name: &str, owners: &[(&str, &str, &str, &str, bool)], finalizers: &[&str]) -> String {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(api_version, kind, owner, uid, block)| {
            json!({"apiVersion": api_version, "kind": kind, "name": owner, "uid": uid,
                   "blockOwnerDeletion": block})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "ownerReferences": refs,
                        "finalizers": finalizers}})
    .to_string()
}

fn uid(gate: &Kubegate, name: &str) -> String {
    gate.ok(&["get", "configmap", name, "-o", "jsonpath={.metadata.uid}"])
}

fn exists(gate: &Kubegate, name: &str) -> bool {
    gate.kubectl(&["get", "configmap", name]).status.success()
}

fn gone(gate: &Kubegate, name: &str) -> bool {
    eventually(Duration::from_secs(10), || !exists(gate, name))
}

/// A cluster-scoped object whose owner reference names a namespaced kind is invalid, and kube's
/// collector leaves it alone (`namespacedOwnerOfClusterScopedObjectErr`): it is never deleted,
/// whether an object of that name and uid exists in some namespace or not, and its references
/// stay as written.
#[test]
fn a_cluster_scoped_object_with_a_namespaced_owner_is_left_alone() {
    let gate = Kubegate::start();
    gate.ok(&["create", "configmap", "real-owner"]);
    let owner_uid = uid(&gate, "real-owner");
    let cluster_role = |name: &str, uid: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name, "ownerReferences": [
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "real-owner", "uid": uid}]}})
        .to_string()
    };
    gate.ok_stdin(
        &["create", "-f", "-"],
        &cluster_role("owned-by-cm", &owner_uid),
    );
    gate.ok_stdin(
        &["create", "-f", "-"],
        &cluster_role("owned-by-nothing", "00000000-0000-0000-0000-000000000000"),
    );
    // A namespaced dependent of a gone owner, created after them: once it is collected, the
    // collector has been through the cluster roles too.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &dependent(
            "witness",
            &[("v1", "ConfigMap", "gone", "u-gone", false)],
            &[],
        ),
    );
    assert!(gone(&gate, "witness"), "the collector did not run");
    std::thread::sleep(Duration::from_secs(1));
    for name in ["owned-by-cm", "owned-by-nothing"] {
        let role = gate.json(&["get", "clusterrole", name, "-o", "json"]);
        assert_eq!(
            role["metadata"]["ownerReferences"][0]["kind"], "ConfigMap",
            "{role}"
        );
    }
}

#[test]
fn dependents_follow_their_owners_deletion_policy() {
    let gate = Kubegate::start();

    // Background (kubectl's default): the owner goes at once, its dependents after it.
    gate.ok(&["create", "configmap", "owner-a"]);
    let a = uid(&gate, "owner-a");
    for name in ["dep-a1", "dep-a2"] {
        gate.ok_stdin(
            &["create", "-f", "-"],
            &dependent(name, &[("v1", "ConfigMap", "owner-a", &a, true)], &[]),
        );
    }
    // Also owned by an object of a kind nobody serves here: that owner is taken to exist.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &dependent(
            "dep-a3",
            &[
                ("v1", "ConfigMap", "owner-a", &a, false),
                ("example.com/v1", "Elsewhere", "x", "u-x", false),
            ],
            &[],
        ),
    );
    gate.ok(&["delete", "configmap", "owner-a"]);
    assert!(
        gone(&gate, "dep-a1") && gone(&gate, "dep-a2"),
        "background dependents stayed"
    );
    let released = eventually(Duration::from_secs(10), || {
        let refs = gate.json(&["get", "configmap", "dep-a3", "-o", "json"]);
        refs["metadata"]["ownerReferences"].as_array().map(Vec::len) == Some(1)
    });
    assert!(
        released,
        "the gone owner's reference was not taken out of dep-a3"
    );

    // Orphan: the dependent stays, without the reference.
    gate.ok(&["create", "configmap", "owner-b"]);
    let b = uid(&gate, "owner-b");
    gate.ok_stdin(
        &["create", "-f", "-"],
        &dependent("dep-b", &[("v1", "ConfigMap", "owner-b", &b, true)], &[]),
    );
    gate.ok(&["delete", "configmap", "owner-b", "--cascade=orphan"]);
    assert!(gone(&gate, "owner-b"), "the orphaning owner stayed");
    let orphaned = gate.json(&["get", "configmap", "dep-b", "-o", "json"]);
    assert!(
        orphaned["metadata"].get("ownerReferences").is_none(),
        "{orphaned}"
    );

    // Foreground: the owner waits, marked, for the dependent that blocks it.
    gate.ok(&["create", "configmap", "owner-c"]);
    let c = uid(&gate, "owner-c");
    gate.ok_stdin(
        &["create", "-f", "-"],
        &dependent(
            "dep-c",
            &[("v1", "ConfigMap", "owner-c", &c, true)],
            &["example.com/hold"],
        ),
    );
    gate.ok(&[
        "delete",
        "configmap",
        "owner-c",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let marked = eventually(Duration::from_secs(10), || {
        let dep = gate.json(&["get", "configmap", "dep-c", "-o", "json"]);
        dep["metadata"]["deletionTimestamp"].is_string()
    });
    assert!(marked, "the blocking dependent was not deleted first");
    let owner = gate.json(&["get", "configmap", "owner-c", "-o", "json"]);
    assert_eq!(
        owner["metadata"]["finalizers"],
        json!(["foregroundDeletion"]),
        "{owner}"
    );
    assert!(
        owner["metadata"]["deletionTimestamp"].is_string(),
        "{owner}"
    );
    gate.ok(&[
        "patch",
        "configmap",
        "dep-c",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    assert!(
        gone(&gate, "dep-c") && gone(&gate, "owner-c"),
        "the foreground deletion did not finish"
    );

    // A reference to an owner that is not there (or is another object of the same name) is
    // dangling from the start.
    gate.ok(&["create", "configmap", "owner-d"]);
    gate.ok_stdin(
        &["create", "-f", "-"],
        &dependent(
            "dep-d",
            &[("v1", "ConfigMap", "owner-d", "not-its-uid", false)],
            &[],
        ),
    );
    assert!(
        gone(&gate, "dep-d"),
        "a dependent of a replaced owner stayed"
    );
    assert!(exists(&gate, "owner-d"));
}

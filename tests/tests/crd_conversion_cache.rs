//! Custom resources are converted for the requested version once per stored object and CRD
//! state (the converted bytes are cached with the watch cache's object): repeated GETs and LISTs
//! through each served version keep answering with that version's `apiVersion`, an update is
//! served as updated, and a default added to one version's schema by a CRD update shows on read
//! through that version only (kube defaults on read from storage with the requested version's
//! schema), never from what was cached before the update.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::{eventually, Kubegate};
use serde_json::Value;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.cache.example.com
spec:
  group: cache.example.com
  scope: Namespaced
  names:
    plural: gadgets
    singular: gadget
    kind: Gadget
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
                default: 1
              color:
                type: string
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
              color:
                type: string
"#;

const V1: &str = "/apis/cache.example.com/v1/namespaces/default/gadgets";
const V1BETA1: &str = "/apis/cache.example.com/v1beta1/namespaces/default/gadgets";

fn established(gate: &Kubegate, crd: &str) {
    gate.ok_stdin(&["apply", "-f", "-"], crd);
    gate.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        "crd/gadgets.cache.example.com",
    ]);
    let served = eventually(Duration::from_secs(10), || {
        gate.kubectl(&["get", "--raw", V1BETA1]).status.success()
    });
    assert!(served, "{}", kubegate_tests::tail(&gate.log(), 30));
}

fn raw(gate: &Kubegate, path: &str) -> Value {
    serde_json::from_str(&gate.ok(&["get", "--raw", path])).unwrap()
}

/// The items of a LIST by name.
fn items(list: &Value) -> Vec<(String, Value)> {
    let mut items: Vec<(String, Value)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o.clone(),
            )
        })
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    items
}

fn gadget(api_version: &str, name: &str, spec: &str) -> String {
    format!("{{\"apiVersion\":\"{api_version}\",\"kind\":\"Gadget\",\"metadata\":{{\"name\":\"{name}\"}},\"spec\":{spec}}}")
}

#[test]
fn converted_reads_follow_the_version_the_object_and_the_crd() {
    let gate = Kubegate::start();
    established(&gate, CRD);
    gate.ok_stdin(
        &["create", "-f", "-"],
        &gadget("cache.example.com/v1", "a", r#"{"color":"red"}"#),
    );
    gate.ok_stdin(
        &["create", "-f", "-"],
        &gadget("cache.example.com/v1beta1", "b", r#"{"size":3}"#),
    );

    // Each version, twice (the second read is served from the cached conversion).
    for _ in 0..2 {
        for (path, version) in [(V1, "v1"), (V1BETA1, "v1beta1")] {
            let list = raw(&gate, path);
            let items = items(&list);
            assert_eq!(items.len(), 2, "{list}");
            for (name, item) in &items {
                assert_eq!(
                    item["apiVersion"],
                    format!("cache.example.com/{version}"),
                    "{name} via {version}"
                );
                let single = raw(&gate, &format!("{path}/{name}"));
                assert_eq!(&single, item, "GET and LIST of {name} via {version}");
            }
            // Defaulted on create through v1 (a), stored as sent through v1beta1 (b).
            assert_eq!(
                items[0].1["spec"],
                serde_json::json!({"color": "red", "size": 1})
            );
            assert_eq!(items[1].1["spec"], serde_json::json!({"size": 3}));
        }
    }

    // An update is served as updated through both versions.
    gate.ok(&[
        "patch",
        "gadgets.v1.cache.example.com",
        "b",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"color":"blue"}}"#,
    ]);
    for path in [V1, V1BETA1] {
        let b = raw(&gate, &format!("{path}/b"));
        assert_eq!(b["spec"]["color"], "blue", "{b}");
    }

    // A default added to v1's schema later: objects stored before it get it on read through v1,
    // not through v1beta1, whose schema has none.
    let with_default = CRD.replacen(
        "              color:\n                type: string\n",
        "              color:\n                type: string\n                default: green\n              shape:\n                type: string\n                default: round\n",
        1,
    );
    assert_ne!(with_default, CRD);
    established(&gate, &with_default);
    let defaulted = eventually(Duration::from_secs(10), || {
        let list = raw(&gate, V1);
        items(&list)
            .iter()
            .all(|(_, item)| item["spec"]["shape"] == "round")
    });
    assert!(defaulted, "{}", raw(&gate, V1));
    let v1 = items(&raw(&gate, V1));
    assert_eq!(v1[0].1["spec"]["color"], "red");
    assert_eq!(v1[1].1["spec"]["color"], "blue");
    assert_eq!(v1[1].1["spec"]["size"], 3);
    assert_eq!(raw(&gate, &format!("{V1}/a"))["spec"]["shape"], "round");
    let v1beta1 = items(&raw(&gate, V1BETA1));
    for (name, item) in &v1beta1 {
        assert_eq!(item["apiVersion"], "cache.example.com/v1beta1", "{name}");
        assert!(item["spec"].get("shape").is_none(), "{name}: {item}");
    }
}

//! `apiextensions.k8s.io/v1` CustomResourceDefinitions as objects, with the real kubectl:
//! kube's CronTab example is applied, stored with kube's v1 defaults and listed with kube's
//! columns (NAME, CREATED AT); `kubectl explain` describes the type; invalid CRDs are refused
//! with apiextensions-apiserver's messages and are not stored.
//!
//! Serving the custom resources a CRD defines is not part of this: no instance is created.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use kubegate_tests::Kubegate;

/// kube's CronTab example (`crontab-crd.yaml` in the Kubernetes docs).
const CRONTAB: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
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
                cronSpec:
                  type: string
                image:
                  type: string
                replicas:
                  type: integer
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
    - ct
"#;

/// `kubectl apply -f -` of `manifest`, which must fail; returns stderr.
fn apply_fails(gate: &Kubegate, manifest: &str) -> String {
    let out = gate.kubectl_stdin(&["apply", "-f", "-"], Some(manifest));
    assert!(
        !out.status.success(),
        "apply unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The CronTab example in another group (named `crontabs.<group>`), so each invalid variant
/// is a distinct object.
fn variant(group: &str) -> String {
    CRONTAB.replace("stable.example.com", group)
}

#[test]
fn crds_are_stored_listed_and_validated_like_kube() {
    let gate = Kubegate::start();

    let created = gate.ok_stdin(&["apply", "-f", "-"], CRONTAB);
    assert!(
        created.contains(
            "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"
        ),
        "{created}"
    );

    // kube's columns, and the short name `crd`.
    let list = gate.ok(&["get", "crd"]);
    let header: Vec<&str> = list
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"], "{list}");
    let row = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some("crontabs.stable.example.com"))
        .unwrap_or_else(|| panic!("the CRD is not listed:\n{list}"));
    let created_at = row.split_whitespace().nth(1).unwrap_or_default();
    assert!(
        created_at.len() == 20 && created_at.ends_with('Z') && created_at.contains('T'),
        "CREATED AT is not RFC 3339: {row}"
    );

    // Stored with kube's v1 defaults and the strategy's status and generation.
    let crd = gate.json(&[
        "get",
        "customresourcedefinition",
        "crontabs.stable.example.com",
        "-o",
        "json",
    ]);
    assert_eq!(crd["spec"]["conversion"]["strategy"], "None", "{crd}");
    assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList");
    assert_eq!(crd["spec"]["names"]["singular"], "crontab");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    assert_eq!(crd["metadata"]["generation"], 1);

    // A spec change bumps the generation; re-applying the same spec does not.
    let unchanged = gate.ok_stdin(&["apply", "-f", "-"], CRONTAB);
    assert!(unchanged.contains("unchanged"), "{unchanged}");
    let with_category = CRONTAB.replace(
        "    shortNames:",
        "    categories:\n    - all\n    shortNames:",
    );
    gate.ok_stdin(&["apply", "-f", "-"], &with_category);
    let generation = gate.ok(&[
        "get",
        "crd",
        "crontabs.stable.example.com",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    assert_eq!(generation.trim(), "2");

    // kubectl explain reads the type from the OpenAPI documents.
    let explain = gate.ok(&["explain", "customresourcedefinition.spec"]);
    assert!(explain.contains("CustomResourceDefinition"), "{explain}");
    for field in ["group", "names", "scope", "versions", "conversion"] {
        assert!(
            explain.lines().any(|l| l.trim_start().starts_with(field)),
            "explain lacks {field}:\n{explain}"
        );
    }

    // No storage version.
    let no_storage = variant("nostorage.example.com").replace("storage: true", "storage: false");
    let err = apply_fails(&gate, &no_storage);
    assert!(
        err.contains("The CustomResourceDefinition \"crontabs.nostorage.example.com\" is invalid")
            && err.contains("spec.versions: Invalid value:")
            && err.contains("must have exactly one version marked as storage version"),
        "{err}"
    );

    // A schema that is not structural.
    let non_structural = variant("nonstructural.example.com").replace(
        "                image:\n                  type: string\n",
        "                image:\n                  description: the image\n",
    );
    let err = apply_fails(&gate, &non_structural);
    assert!(
        err.contains(
            "spec.validation.openAPIV3Schema.properties[spec].properties[image].type: Required value: must not be empty for specified object fields"
        ),
        "{err}"
    );

    // The name must be <plural>.<group>.
    let bad_name = variant("badname.example.com")
        .replace("name: crontabs.badname.example.com", "name: crontabs");
    let err = apply_fails(&gate, &bad_name);
    assert!(
        err.contains(
            "metadata.name: Invalid value: \"crontabs\": must be spec.names.plural+\".\"+spec.group"
        ),
        "{err}"
    );

    // A group without a dot.
    let no_dot = variant("nodot");
    let err = apply_fails(&gate, &no_dot);
    assert!(
        err.contains(
            "spec.group: Invalid value: \"nodot\": should be a domain with at least one dot"
        ),
        "{err}"
    );

    // A conversion webhook must be reached over https.
    let webhook = variant("webhook.example.com").replace(
        "  scope: Namespaced\n",
        "  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [\"v1\"]\n      clientConfig:\n        url: http://convert.example.com/convert\n",
    );
    let err = apply_fails(&gate, &webhook);
    assert!(
        err.contains(
            "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
        ),
        "{err}"
    );

    // Nothing invalid was stored.
    for name in [
        "crontabs.nostorage.example.com",
        "crontabs.nonstructural.example.com",
        "crontabs",
        "crontabs.nodot",
        "crontabs.webhook.example.com",
    ] {
        let err = gate.fails(&["get", "crd", name]);
        assert!(
            err.contains(&format!(
                "customresourcedefinitions.apiextensions.k8s.io \"{name}\" not found"
            )),
            "{err}"
        );
    }
    let names = gate.ok(&["get", "crds", "-o", "name"]);
    assert_eq!(
        names.trim(),
        "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com"
    );
}

//! CRDs with `conversion.strategy: Webhook`, end to end with the real kubectl and a real
//! HTTPS webhook (`kubegate_tests::conversion_webhook`): objects are stored in the storage
//! version and converted by the webhook for the other one, reached through a Service (here an
//! ExternalName Service, as Endpoints may not point at loopback) or a URL, trusted through the
//! CRD's `caBundle`; a webhook that refuses makes reads of the other version fail with kube's
//! message while the storage version keeps working; kube's conversion webhook metrics count
//! both.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kubegate_tests::conversion_webhook::ConversionWebhook;
use kubegate_tests::{eventually, Kubegate};
use serde_json::{json, Value};

const CRD_NAME: &str = "crontabs.stable.example.com";

/// The CronTab CRD: v1 (storage, `spec.cronSpec`) and v2 (`spec.schedule`), converted by
/// the webhook at `client_config`.
fn crd(client_config: Value) -> String {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": client_config, "conversionReviewVersions": ["v1", "v1beta1"]}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("cronSpec")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("schedule")},
            ]
        }
    })
    .to_string()
}

fn get(gate: &Kubegate, resource: &str, name: &str) -> Value {
    gate.json(&["get", resource, name, "-n", "default", "-o", "json"])
}

#[test]
fn objects_are_converted_by_the_webhook_between_served_versions() {
    let gate = Kubegate::start();
    let webhook = ConversionWebhook::start();
    // The webhook's Service: an ExternalName for `localhost`, verified as `hook.webhooks.svc`,
    // which its certificate names.
    gate.ok(&["create", "namespace", "webhooks"]);
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "hook", "namespace": "webhooks"},
            "spec": {"type": "ExternalName", "externalName": "localhost"}})
        .to_string(),
    );
    let by_service = json!({
        "service": {"namespace": "webhooks", "name": "hook", "path": "/convert",
            "port": webhook.port()},
        "caBundle": webhook.ca_bundle_base64(),
    });
    gate.ok_stdin(&["apply", "-f", "-"], &crd(by_service));
    gate.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        &format!("crd/{CRD_NAME}"),
    ]);
    let served = eventually(Duration::from_secs(10), || {
        gate.kubectl(&["get", "--raw", "/apis/stable.example.com/v2/crontabs"])
            .status
            .success()
    });
    assert!(served, "{}", kubegate_tests::tail(&gate.log(), 30));

    // Written as v1 (the storage version): read as v2 through the webhook.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "nightly", "namespace": "default", "labels": {"team": "ops"}},
            "spec": {"cronSpec": "0 3 * * *"}})
        .to_string(),
    );
    assert!(webhook.reviews().is_empty(), "{:?}", webhook.reviews());
    let v2 = get(&gate, "crontabs.v2.stable.example.com", "nightly");
    assert_eq!(v2["apiVersion"], "stable.example.com/v2");
    assert_eq!(v2["spec"], json!({"schedule": "0 3 * * *"}));
    assert_eq!(
        v2["metadata"]["labels"],
        json!({"team": "ops", "converted-by": "webhook"})
    );
    let reviews = webhook.reviews();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    let review = &reviews[0]["review"];
    // Addressed as kube's webhook client addresses a Service, with its timeout and agent.
    assert_eq!(reviews[0]["path"], "/convert");
    assert_eq!(reviews[0]["query"], "timeout=30s");
    assert_eq!(
        reviews[0]["host"],
        format!("hook.webhooks.svc:{}", webhook.port())
    );
    assert_eq!(reviews[0]["user_agent"], "kube-apiserver-admission");
    assert!(review["request"]["objects"][0]["metadata"]
        .get("resourceVersion")
        .is_none());
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(
        review["request"]["desiredAPIVersion"],
        "stable.example.com/v2"
    );
    assert_eq!(
        review["request"]["objects"][0]["spec"],
        json!({"cronSpec": "0 3 * * *"})
    );

    // Written as v2: stored as v1 (kubectl reads it back as v1 without the webhook's label,
    // which only conversions add).
    gate.ok_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab",
            "metadata": {"name": "hourly", "namespace": "default"},
            "spec": {"schedule": "0 * * * *"}})
        .to_string(),
    );
    let v1 = get(&gate, "crontabs.v1.stable.example.com", "hourly");
    assert_eq!(v1["apiVersion"], "stable.example.com/v1");
    assert_eq!(v1["spec"], json!({"cronSpec": "0 * * * *"}));
    assert!(webhook
        .reviews()
        .iter()
        .any(|r| r["review"]["request"]["desiredAPIVersion"] == "stable.example.com/v1"));

    // Label selectors see the labels the webhook gave (kube matches what it serves).
    let labelled = gate.ok(&[
        "get",
        "crontabs.v2.stable.example.com",
        "-n",
        "default",
        "-l",
        "converted-by=webhook",
        "-o",
        "name",
    ]);
    assert_eq!(
        labelled.lines().collect::<Vec<_>>(),
        [
            "crontab.stable.example.com/hourly",
            "crontab.stable.example.com/nightly"
        ]
    );

    // The v2 list: both objects in v2; kubectl edits through v2 land in storage as v1.
    let list = gate.json(&[
        "get",
        "crontabs.v2.stable.example.com",
        "-n",
        "default",
        "-o",
        "json",
    ]);
    let schedules: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["spec"]["schedule"])
        .collect();
    assert_eq!(
        schedules,
        [&json!("0 * * * *"), &json!("0 3 * * *")],
        "{list}"
    );
    gate.ok(&[
        "patch",
        "crontabs.v2.stable.example.com",
        "nightly",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec":{"schedule":"30 3 * * *"}}"#,
    ]);
    let v1 = get(&gate, "crontabs.v1.stable.example.com", "nightly");
    assert_eq!(v1["spec"], json!({"cronSpec": "30 3 * * *"}));

    // A webhook by URL that refuses: v2 reads fail with kube's message, v1 still works.
    let refusing = json!({
        "url": format!("https://127.0.0.1:{}/fail", webhook.port()),
        "caBundle": webhook.ca_bundle_base64(),
    });
    gate.ok_stdin(&["apply", "-f", "-"], &crd(refusing));
    let refused = eventually(Duration::from_secs(10), || {
        !gate
            .kubectl(&[
                "get",
                "crontabs.v2.stable.example.com",
                "nightly",
                "-n",
                "default",
            ])
            .status
            .success()
    });
    assert!(refused, "{}", kubegate_tests::tail(&gate.log(), 30));
    let error = gate.fails(&[
        "get",
        "crontabs.v2.stable.example.com",
        "nightly",
        "-n",
        "default",
    ]);
    assert!(
        error.contains("conversion webhook for stable.example.com/v1, Kind=CronTab failed: conversion refused by the test webhook"),
        "{error}"
    );
    assert!(webhook.reviews().iter().any(|r| r["path"] == "/fail"));
    // A server-side dry run converts as the write would, and fails the same way.
    let dry_run = gate.fails(&[
        "patch",
        "crontabs.v2.stable.example.com",
        "nightly",
        "-n",
        "default",
        "--dry-run=server",
        "--type=merge",
        "-p",
        r#"{"spec":{"schedule":"1 1 * * *"}}"#,
    ]);
    assert!(
        dry_run.contains("conversion refused by the test webhook"),
        "{dry_run}"
    );
    let v1 = get(&gate, "crontabs.v1.stable.example.com", "nightly");
    assert_eq!(v1["spec"], json!({"cronSpec": "30 3 * * *"}));
    // Nothing half-written: a v2 create that cannot be converted stores nothing.
    let error = gate.kubectl_stdin(
        &["create", "-f", "-"],
        Some(
            &json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab",
                    "metadata": {"name": "never", "namespace": "default"},
                    "spec": {"schedule": "* * * * *"}})
            .to_string(),
        ),
    );
    assert!(!error.status.success());
    assert!(
        String::from_utf8_lossy(&error.stderr).contains("conversion refused by the test webhook")
    );
    let missing = gate.fails(&[
        "get",
        "crontabs.v1.stable.example.com",
        "never",
        "-n",
        "default",
    ]);
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );

    // kube's conversion webhook metrics count both outcomes.
    let metrics = gate.ok(&["get", "--raw", "/metrics"]);
    let value = |prefix: &str| -> f64 {
        metrics
            .lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in /metrics"))
    };
    assert!(
        value("apiserver_conversion_webhook_request_total{failure_type=\"\",result=\"success\"}")
            >= 3.0
    );
    assert!(value("apiserver_conversion_webhook_request_total{failure_type=\"conversion_webhook_malformed_response_failure\",result=\"failure\"}") >= 2.0);
    assert!(value("apiserver_crd_conversion_webhook_duration_seconds_count{crd_name=\"crontabs.stable.example.com\",from_version=\"v1\",succeeded=\"true\",to_version=\"v2\"}") >= 1.0);
    assert!(value("apiserver_crd_conversion_webhook_duration_seconds_count{crd_name=\"crontabs.stable.example.com\",from_version=\"v2\",succeeded=\"false\",to_version=\"v1\"}") >= 1.0);
}

#[test]
fn webhook_settings_are_validated_as_kube_validates_them() {
    let gate = Kubegate::start();
    let bad = crd(json!({"url": "http://user@example.com/convert?x=1"}));
    let out = gate.kubectl_stdin(&["apply", "-f", "-"], Some(&bad));
    assert!(!out.status.success());
    let error = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        "spec.conversion.webhookClientConfig.url: Invalid value: \"user\": user information is not permitted in the URL",
        "spec.conversion.webhookClientConfig.url: Invalid value: \"x=1\": query parameters are not permitted in the URL",
    ] {
        assert!(error.contains(expected), "{error}");
    }
    let missing = gate.fails(&["get", "crd", CRD_NAME]);
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );
}

//! Custom resources converted by a conversion webhook, through the registry's read and write
//! paths: an in-process webhook renames `spec.cronSpec` (v1, the storage version) to
//! `spec.schedule` (v2) and back, and counts what it is sent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::tests::{call, fixture, frames, request, Fixture};
use crate::core::crd_conversion::{ConversionTransport, ConversionTransports};
use crate::core::custom_resource::resource_defs_with;

#[derive(Default)]
struct Webhook {
    reviews: Mutex<Vec<Value>>,
    failing: AtomicBool,
}

#[async_trait::async_trait]
impl ConversionTransport for Webhook {
    async fn post(&self, review: Vec<u8>) -> Result<Value, String> {
        let review: Value = serde_json::from_slice(&review).map_err(|e| e.to_string())?;
        self.reviews.lock().unwrap().push(review.clone());
        if self.failing.load(Ordering::SeqCst) {
            return Err("Post \"https://hook.ns.svc:443/convert\": connection refused".into());
        }
        let desired = review["request"]["desiredAPIVersion"]
            .as_str()
            .unwrap_or("");
        let (from, to) = if desired.ends_with("/v2") {
            ("cronSpec", "schedule")
        } else {
            ("schedule", "cronSpec")
        };
        let converted: Vec<Value> = review["request"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut o = o.clone();
                if let Some(v) = o["spec"].as_object_mut().and_then(|s| s.remove(from)) {
                    o["spec"][to] = v;
                }
                o["apiVersion"] = json!(desired);
                o
            })
            .collect();
        Ok(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": review["request"]["uid"], "convertedObjects": converted,
                "result": {"status": "Success"}}}),
        )
    }
}

impl Webhook {
    fn sent(&self) -> Vec<usize> {
        self.reviews
            .lock()
            .unwrap()
            .iter()
            .map(|r| r["request"]["objects"].as_array().map_or(0, Vec::len))
            .collect()
    }
}

struct Transports(Arc<Webhook>);

impl ConversionTransports for Transports {
    fn transport(&self, _: &str, _: &Value) -> Result<Arc<dyn ConversionTransport>, String> {
        Ok(self.0.clone())
    }
}

fn crd() -> Value {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com", "uid": "crd-uid"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://hook.example/convert"}, "conversionReviewVersions": ["v1"]}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("cronSpec")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("schedule"),
                    "selectableFields": [{"jsonPath": ".spec.schedule"}]}]},
        "status": {"acceptedNames": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab",
                "listKind": "CronTabList"},
            "conditions": [{"type": "Established", "status": "True"}], "storedVersions": ["v1"]}})
}

async fn served_with_webhook() -> (Fixture, Arc<Webhook>) {
    let f = fixture().await;
    let webhook = Arc::new(Webhook::default());
    let defs = resource_defs_with(&crd(), Some(&Transports(webhook.clone())));
    assert_eq!(defs.len(), 2);
    f.registry.set_custom_resources(defs);
    (f, webhook)
}

const V1: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const V2: &str = "/apis/stable.example.com/v2/namespaces/default/crontabs";

fn crontab_v2(name: &str, schedule: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab",
        "metadata": {"name": name}, "spec": {"schedule": schedule}})
}

/// The object as stored (the watch cache's bytes, once the cache has caught up).
async fn stored(f: &Fixture, name: &str) -> Value {
    f.registry.sync_cache().await.unwrap();
    let cached = f
        .registry
        .cacher()
        .get(&format!("/stable.example.com/crontabs/default/{name}"))
        .expect("stored");
    serde_json::from_slice(&cached.bytes).unwrap()
}

#[tokio::test]
async fn writes_are_stored_in_the_storage_version_and_reads_converted_once() {
    let (f, webhook) = served_with_webhook().await;
    let (code, created) = call(&f, "POST", V2, Some(crontab_v2("a", "5 * * * *"))).await;
    assert_eq!(code, 201, "{created}");
    // kube answers with what it stored, converted back.
    assert_eq!(created["apiVersion"], "stable.example.com/v2");
    assert_eq!(created["spec"], json!({"schedule": "5 * * * *"}));
    assert_eq!(webhook.sent(), [1, 1]);
    let raw = stored(&f, "a").await;
    assert_eq!(raw["apiVersion"], "stable.example.com/v1");
    assert_eq!(raw["spec"], json!({"cronSpec": "5 * * * *"}));

    // The storage version reads without the webhook.
    let (code, v1) = call(&f, "GET", &format!("{V1}/a"), None).await;
    assert_eq!(
        (code, &v1["spec"]),
        (200, &json!({"cronSpec": "5 * * * *"}))
    );
    assert_eq!(webhook.sent(), [1, 1]);

    for name in ["b", "c"] {
        let (code, _) = call(
            &f,
            "POST",
            V1,
            Some(json!({"apiVersion": "stable.example.com/v1",
            "kind": "CronTab", "metadata": {"name": name}, "spec": {"cronSpec": name}})),
        )
        .await;
        assert_eq!(code, 201);
    }
    assert_eq!(webhook.sent(), [1, 1]);
    // A list converts what it has not converted before, in one review.
    let (code, list) = call(&f, "GET", V2, None).await;
    assert_eq!(code, 200, "{list}");
    let specs: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["spec"])
        .collect();
    assert_eq!(
        specs,
        [
            &json!({"schedule": "5 * * * *"}),
            &json!({"schedule": "b"}),
            &json!({"schedule": "c"})
        ]
    );
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["apiVersion"] == "stable.example.com/v2"));
    assert_eq!(webhook.sent(), [1, 1, 3]);
    // Converted forms are kept with the cached objects, as kube's watch cache keeps them.
    let (_, again) = call(&f, "GET", &format!("{V2}/b"), None).await;
    assert_eq!(again["spec"], json!({"schedule": "b"}));
    let (_, selected) = call(
        &f,
        "GET",
        &format!("{V2}?fieldSelector=spec.schedule%3Dc"),
        None,
    )
    .await;
    assert_eq!(selected["items"].as_array().unwrap().len(), 1);
    assert_eq!(selected["items"][0]["metadata"]["name"], "c");
    assert_eq!(webhook.sent(), [1, 1, 3]);

    // A patch reads the served form and stores the storage form.
    let mut patch = request(
        "PATCH",
        &format!("{V2}/b"),
        Some(json!({"spec": {"schedule": "b2"}})),
        "application/merge-patch+json",
    );
    patch.accept = Some("application/json".into());
    let response = f.registry.handle(patch).await;
    let crate::api::ApiResponse::Body(body) = response else {
        panic!("a body")
    };
    assert_eq!(body.status, 200);
    let patched: Value = serde_json::from_slice(&body.bytes()).unwrap();
    assert_eq!(patched["spec"], json!({"schedule": "b2"}));
    assert_eq!(stored(&f, "b").await["spec"], json!({"cronSpec": "b2"}));
}

#[tokio::test]
async fn watches_get_converted_events() {
    let (f, _webhook) = served_with_webhook().await;
    let (_, created) = call(
        &f,
        "POST",
        V1,
        Some(json!({"apiVersion": "stable.example.com/v1",
        "kind": "CronTab", "metadata": {"name": "w"}, "spec": {"cronSpec": "1"}})),
    )
    .await;
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch = f
        .registry
        .handle(request(
            "GET",
            &format!("{V2}?watch=true&resourceVersion={rv}"),
            None,
            "application/json",
        ))
        .await;
    let (code, _) = call(&f, "PUT", &format!("{V1}/w"), Some(json!({"apiVersion": "stable.example.com/v1",
        "kind": "CronTab", "metadata": {"name": "w", "resourceVersion": rv}, "spec": {"cronSpec": "2"}}))).await;
    assert_eq!(code, 200);
    let (code, _) = call(&f, "DELETE", &format!("{V1}/w"), None).await;
    assert_eq!(code, 200);
    let events = frames(watch, 2).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(events[0]["object"]["apiVersion"], "stable.example.com/v2");
    assert_eq!(events[0]["object"]["spec"], json!({"schedule": "2"}));
    assert_eq!(events[1]["type"], "DELETED");
    assert_eq!(events[1]["object"]["spec"], json!({"schedule": "2"}));
}

#[tokio::test]
async fn a_failing_webhook_is_a_500_and_writes_nothing() {
    let (f, webhook) = served_with_webhook().await;
    let (code, _) = call(
        &f,
        "POST",
        V1,
        Some(json!({"apiVersion": "stable.example.com/v1",
        "kind": "CronTab", "metadata": {"name": "x"}, "spec": {"cronSpec": "1"}})),
    )
    .await;
    assert_eq!(code, 201);
    webhook.failing.store(true, Ordering::SeqCst);
    let (code, status) = call(&f, "GET", &format!("{V2}/x"), None).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://hook.ns.svc:443/convert\": connection refused"
    );
    assert!(status.get("reason").is_none(), "{status}");
    let (code, _) = call(&f, "GET", V2, None).await;
    assert_eq!(code, 500);
    let (code, status) = call(&f, "POST", V2, Some(crontab_v2("y", "1"))).await;
    assert_eq!(code, 500, "{status}");
    f.registry.sync_cache().await.unwrap();
    assert!(f
        .registry
        .cacher()
        .get("/stable.example.com/crontabs/default/y")
        .is_none());
    // The storage version is still served, and the webhook's return brings v2 back.
    let (code, _) = call(&f, "GET", &format!("{V1}/x"), None).await;
    assert_eq!(code, 200);
    webhook.failing.store(false, Ordering::SeqCst);
    let (code, ok) = call(&f, "GET", &format!("{V2}/x"), None).await;
    assert_eq!((code, &ok["spec"]), (200, &json!({"schedule": "1"})));
}

/// kube tears a CRD's storage down when its spec changes, which ends its watches; clients
/// watch again under the new definition (here: another webhook).
#[tokio::test]
async fn watches_end_when_the_crd_definitions_are_replaced() {
    let (f, _webhook) = served_with_webhook().await;
    let watch = f
        .registry
        .handle(request(
            "GET",
            &format!("{V2}?watch=true"),
            None,
            "application/json",
        ))
        .await;
    let mut stream = super::tests::watch_of(watch);
    // The same definitions served again (an unrelated CRD changed) keep the watch.
    let same: Vec<crate::resource::ResourceDef> = f
        .registry
        .resources()
        .iter()
        .filter(|d| d.group == "stable.example.com")
        .map(|d| (**d).clone())
        .collect();
    f.registry.set_custom_resources(same);
    let open =
        tokio::time::timeout(std::time::Duration::from_millis(300), stream.frames.recv()).await;
    assert!(open.is_err(), "the watch ended: {open:?}");
    // New definitions, as a changed CRD builds, end it.
    let again = resource_defs_with(&crd(), Some(&Transports(Arc::new(Webhook::default()))));
    f.registry.set_custom_resources(again);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        while stream.frames.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the watch outlived its definitions");
}

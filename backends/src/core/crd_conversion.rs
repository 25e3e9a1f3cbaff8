//! Conversion webhooks for custom resources (`spec.conversion.strategy: Webhook`), as
//! apiextensions-apiserver's `webhookConverter`: the `ConversionReview` sent for objects stored
//! in another version than the one asked for, and kube's checks of the answer (the review's
//! kind and `uid`, `result.status`, as many objects as were sent, each of the desired
//! `apiVersion` and of the same kind, name, namespace and uid). Only a converted object's
//! labels and annotations are taken from the webhook; the rest of its metadata is the
//! original's (`restoreObjectMeta`). Failures are kube's 500s, worded as kube words them.
//!
//! The transport (HTTPS to the CRD's `clientConfig`) is the gateway's: [`ConversionTransport`].

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::str_at;
use crate::machinery::schema::{self, Schema};
use crate::machinery::validation::{is_qualified_name, is_valid_label_value};
use crate::status::ApiError;

/// The most objects one `ConversionReview` carries; a longer list is converted in several.
const MAX_OBJECTS_PER_REVIEW: usize = 100;

/// kube's limit on the total size of an object's annotations.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Posts one `ConversionReview` (JSON) to a CRD's webhook and returns the parsed answer, or
/// why there is none, as kube's client words it (`Post "<url>": <cause>`).
#[async_trait::async_trait]
pub trait ConversionTransport: Send + Sync {
    async fn post(&self, review: Vec<u8>) -> Result<Value, String>;

    /// Told the outcome of every review (kube's conversion webhook metrics).
    fn observe(&self, _outcome: &ReviewOutcome<'_>) {}
}

/// How one review went, as kube's conversion webhook metrics label it.
pub struct ReviewOutcome<'a> {
    /// The version of the (first) object sent, and the one asked for.
    pub from_version: &'a str,
    pub to_version: &'a str,
    pub elapsed: std::time::Duration,
    /// kube's `failure_type` (`conversion_webhook_call_failure`, ...); `None` on success.
    pub failure: Option<&'static str>,
}

/// kube's `ConversionWebhookErrorType`s.
const CALL_FAILURE: &str = "conversion_webhook_call_failure";
const MALFORMED_RESPONSE: &str = "conversion_webhook_malformed_response_failure";
const PARTIAL_RESPONSE: &str = "conversion_webhook_partial_response_failure";
const INVALID_CONVERTED_OBJECT: &str = "conversion_webhook_invalid_converted_object_failure";

/// Makes the transport for a CRD's `spec.conversion.webhook.clientConfig` (the gateway's HTTPS
/// client with the CRD's `caBundle`, resolving a `service` as kube does).
pub trait ConversionTransports: Send + Sync {
    fn transport(
        &self,
        crd_name: &str,
        client_config: &Value,
    ) -> Result<Arc<dyn ConversionTransport>, String>;
}

/// One CRD's conversion webhook, shared by the strategies of its versions.
pub struct ConversionWebhook {
    kind: String,
    /// The `ConversionReview` version sent: the first of `conversionReviewVersions` kube knows.
    review_version: Option<&'static str>,
    /// The transport, or why it could not be made (every conversion then fails with it).
    transport: Result<Arc<dyn ConversionTransport>, String>,
}

impl ConversionWebhook {
    /// The webhook of `crd`, if its conversion strategy is `Webhook`. Without `transports`
    /// (or when the transport cannot be made) conversions fail with the reason.
    pub fn from_crd(
        crd: &Value,
        kind: &str,
        transports: Option<&dyn ConversionTransports>,
    ) -> Option<Arc<ConversionWebhook>> {
        let conversion = crd.pointer("/spec/conversion")?;
        if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
            return None;
        }
        let crd_name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let review_version = conversion
            .pointer("/webhook/conversionReviewVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|v| match v {
                "v1" => Some("v1"),
                "v1beta1" => Some("v1beta1"),
                _ => None,
            });
        let client_config = conversion
            .pointer("/webhook/clientConfig")
            .unwrap_or(&Value::Null);
        let transport = match transports {
            Some(transports) => transports.transport(crd_name, client_config),
            None => Err("no conversion webhook client is configured".to_string()),
        };
        Some(Arc::new(ConversionWebhook {
            kind: kind.to_string(),
            review_version,
            transport,
        }))
    }

    /// The kind converted (for error messages).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// A webhook with a given transport (tests and embedders).
    pub fn with_transport(
        kind: &str,
        review_version: &'static str,
        transport: Arc<dyn ConversionTransport>,
    ) -> Arc<ConversionWebhook> {
        Arc::new(ConversionWebhook {
            kind: kind.to_string(),
            review_version: Some(review_version),
            transport: Ok(transport),
        })
    }

    /// Converts `objects` to `desired` (`<group>/<version>`), in reviews of at most
    /// [`MAX_OBJECTS_PER_REVIEW`]; objects already in `desired` are not sent.
    pub async fn convert(
        &self,
        objects: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let mut out = Vec::with_capacity(objects.len());
        let mut pending = Vec::new();
        for mut object in objects {
            if api_version(&object) == desired {
                out.push(Some(object));
            } else {
                // kube's webhook never sees a resourceVersion: storage holds objects without
                // one and sets it after decoding.
                let revision = object
                    .get_mut("metadata")
                    .and_then(Value::as_object_mut)
                    .and_then(|meta| meta.remove("resourceVersion"));
                out.push(None);
                pending.push((out.len() - 1, revision, object));
            }
        }
        while !pending.is_empty() {
            let rest = pending.split_off(pending.len().min(MAX_OBJECTS_PER_REVIEW));
            let mut slots = Vec::with_capacity(pending.len());
            let mut batch = Vec::with_capacity(pending.len());
            for (slot, revision, object) in pending {
                slots.push((slot, revision));
                batch.push(object);
            }
            let converted = self.review(batch, desired).await?;
            for ((slot, revision), mut object) in slots.into_iter().zip(converted) {
                if let (Some(revision), Some(meta)) = (
                    revision,
                    object.get_mut("metadata").and_then(Value::as_object_mut),
                ) {
                    meta.insert("resourceVersion".into(), revision);
                }
                out[slot] = Some(object);
            }
            pending = rest;
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// One `ConversionReview` for `objects`, none of which is in `desired`, observed by the
    /// transport.
    async fn review(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, ApiError> {
        let started = std::time::Instant::now();
        let from = objects
            .first()
            .map(|o| version_of(api_version(o)).to_string())
            .unwrap_or_default();
        let result = self.review_unobserved(objects, desired).await;
        if let Ok(transport) = &self.transport {
            transport.observe(&ReviewOutcome {
                from_version: &from,
                to_version: version_of(desired),
                elapsed: started.elapsed(),
                failure: result.as_ref().err().map(|(failure, _)| *failure),
            });
        }
        result.map_err(|(_, error)| error)
    }

    /// [`ConversionWebhook::review`]; a failure comes with kube's `failure_type`.
    async fn review_unobserved(
        &self,
        objects: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, (&'static str, ApiError)> {
        let gvk = objects
            .first()
            .map(|o| format!("{}, Kind={}", api_version(o), self.kind))
            .unwrap_or_default();
        let unknown = |message: String| ApiError::new(500, "", message);
        let failed = |why: String| unknown(format!("conversion webhook for {gvk} failed: {why}"));
        let review_version = self.review_version.ok_or_else(|| {
            (
                CALL_FAILURE,
                unknown("no supported conversion review versions".into()),
            )
        })?;
        let transport = self
            .transport
            .as_ref()
            .map_err(|why| (CALL_FAILURE, failed(why.clone())))?;
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        });
        let body =
            serde_json::to_vec(&review).map_err(|e| (CALL_FAILURE, ApiError::internal(e)))?;
        let answer = transport
            .post(body)
            .await
            .map_err(|why| (CALL_FAILURE, failed(why)))?;
        let converted = converted_objects(&answer, review_version, &uid)
            .map_err(|why| (MALFORMED_RESPONSE, failed(why)))?;
        if converted.len() != objects.len() {
            let message = format!(
                "conversion webhook for {gvk} returned {} objects, expected {}",
                converted.len(),
                objects.len()
            );
            return Err((PARTIAL_RESPONSE, unknown(message)));
        }
        let single = objects.len() == 1;
        let mut out = Vec::with_capacity(objects.len());
        for (index, (original, mut converted)) in objects.iter().zip(converted).enumerate() {
            // kube words a list's failures by index, and a single object's type checks "at
            // index 0" but its metadata checks without an index.
            let invalid_at = |why: String| {
                let message = if single {
                    format!(
                        "conversion webhook for {gvk} returned invalid object at index 0: {why}"
                    )
                } else {
                    format!(
                        "conversion webhook for {gvk} returned invalid converted object at index {index}: {why}"
                    )
                };
                (INVALID_CONVERTED_OBJECT, unknown(message))
            };
            let invalid = |why: String| {
                if single {
                    let message =
                        format!("conversion webhook for {gvk} returned invalid object: {why}");
                    (INVALID_CONVERTED_OBJECT, unknown(message))
                } else {
                    invalid_at(why)
                }
            };
            if !converted.is_object() {
                return Err(invalid_at(
                    "the converted object is not a JSON object".into(),
                ));
            }
            let got = api_version(&converted);
            if got != desired {
                return Err(invalid_at(format!(
                    "invalid groupVersion (expected {desired}, received {got})"
                )));
            }
            let (expected_kind, got_kind) = (kind(original), kind(&converted));
            if expected_kind != got_kind {
                return Err(invalid_at(format!(
                    "invalid kind (expected {expected_kind}, received {got_kind})"
                )));
            }
            validate_converted(original, &converted).map_err(invalid)?;
            restore_object_meta(original, &mut converted).map_err(|why| {
                let message = if single {
                    format!("conversion webhook for {gvk} returned invalid metadata: {why}")
                } else {
                    format!(
                        "conversion webhook for {gvk} returned invalid metadata in object at index {index}: {why}"
                    )
                };
                (INVALID_CONVERTED_OBJECT, unknown(message))
            })?;
            out.push(converted);
        }
        Ok(out)
    }
}

/// The version of a `<group>/<version>`.
fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

fn api_version(object: &Value) -> &str {
    str_at(object, "/apiVersion")
}

fn kind(object: &Value) -> &str {
    str_at(object, "/kind")
}

/// The answer's `response.convertedObjects`, after kube's checks of the review itself.
fn converted_objects(
    answer: &Value,
    review_version: &str,
    uid: &str,
) -> Result<Vec<Value>, String> {
    if review_version == "v1" {
        let (got_version, got_kind) = (api_version(answer), kind(answer));
        if got_version != "apiextensions.k8s.io/v1" || got_kind != "ConversionReview" {
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {got_version}, Kind={got_kind}"
            ));
        }
    }
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("no response provided")?;
    if review_version == "v1" {
        let got = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let status = result.get("status").and_then(Value::as_str).unwrap_or("");
    if status != "Success" {
        let message = result.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_string()
        });
    }
    Ok(response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// kube's `validateConvertedObject`.
fn validate_converted(original: &Value, converted: &Value) -> Result<(), String> {
    for (pointer, what) in [
        ("/metadata/name", "name"),
        ("/metadata/namespace", "namespace"),
        ("/metadata/uid", "UID"),
    ] {
        let (expected, got) = (str_at(original, pointer), str_at(converted, pointer));
        if expected != got {
            return Err(format!("must have the same {what}: {expected} != {got}"));
        }
    }
    Ok(())
}

/// kube's `restoreObjectMeta`: the converted object's metadata becomes the original's, with
/// the webhook's labels and annotations (validated when they changed).
fn restore_object_meta(original: &Value, converted: &mut Value) -> Result<(), String> {
    let response_meta = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(meta)) => meta.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ))
        }
    };
    let mut meta = match original.get("metadata") {
        Some(Value::Object(meta)) => meta.clone(),
        _ => Map::new(),
    };
    for field in ["labels", "annotations"] {
        let response_field = match response_meta.get(field) {
            None | Some(Value::Null) => {
                meta.remove(field);
                continue;
            }
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ))
            }
        };
        let original_field = meta.get(field).and_then(Value::as_object);
        let mut changed = original_field.map_or(0, Map::len) != response_field.len();
        let mut strings = HashMap::with_capacity(response_field.len());
        for (key, value) in response_field {
            let Some(text) = value.as_str() else {
                return Err(format!(
                    "metadata.{field}[{key}] must be a string, but is {} in converted object",
                    go_type(value)
                ));
            };
            changed |= original_field.and_then(|o| o.get(key)) != Some(value);
            strings.insert(key.as_str(), text);
        }
        if changed {
            let errors = if field == "labels" {
                label_errors(&strings)
            } else {
                annotation_errors(&strings)
            };
            match errors.len() {
                0 => {}
                1 => return Err(errors.into_iter().next().unwrap_or_default()),
                _ => return Err(format!("[{}]", errors.join(", "))),
            }
        }
        meta.insert(field.into(), Value::Object(response_field.clone()));
    }
    if let Some(map) = converted.as_object_mut() {
        map.insert("metadata".into(), Value::Object(meta));
    }
    Ok(())
}

/// kube's `ValidateLabels`, as its field errors print.
fn label_errors(labels: &HashMap<&str, &str>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut keys: Vec<_> = labels.iter().collect();
    keys.sort();
    for (key, value) in keys {
        for why in is_qualified_name(key) {
            errors.push(format!("metadata.labels: Invalid value: {key:?}: {why}"));
        }
        for why in is_valid_label_value(value) {
            errors.push(format!("metadata.labels: Invalid value: {value:?}: {why}"));
        }
    }
    errors
}

/// kube's `ValidateAnnotations` (reported under `metadata.annotation`, as kube's converter
/// names the path).
fn annotation_errors(annotations: &HashMap<&str, &str>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut keys: Vec<_> = annotations.iter().collect();
    keys.sort();
    let mut total = 0;
    for (key, value) in keys {
        for why in is_qualified_name(&key.to_lowercase()) {
            errors.push(format!(
                "metadata.annotation: Invalid value: {key:?}: {why}"
            ));
        }
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(format!(
            "metadata.annotation: Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"
        ));
    }
    errors
}

/// A JSON value's type as Go's `%T` names what `encoding/json` decodes it into.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A served version's use of its CRD's webhook: what its strategy converts with.
pub struct WebhookConversion {
    pub webhook: Arc<ConversionWebhook>,
    /// `<group>/<version>` served.
    pub served: String,
    /// `<group>/<storage version>`.
    pub storage: String,
    /// Every version's schema by `<group>/<version>`: what goes in and comes out of the
    /// webhook is pruned with its version's schema, as kube's `schemaCoercingConverter` does.
    pub schemas: Arc<HashMap<String, Arc<Schema>>>,
}

impl WebhookConversion {
    /// Whether a stored object needs the webhook to be served in this version.
    pub fn needs(&self, stored: &Value) -> bool {
        api_version(stored) != self.served
    }

    /// Stored objects (defaulted in their version: the strategy's `default_stored`)
    /// converted to the served version (the strategy's `decode_converted` prunes them).
    pub async fn to_served(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        let objects = objects.into_iter().map(|o| self.pruned(o)).collect();
        self.webhook.convert(objects, &self.served).await
    }

    /// A served object converted to the storage version, pruned with its schema.
    pub async fn to_storage(&self, object: Value) -> Result<Value, ApiError> {
        if self.served == self.storage {
            return Ok(object);
        }
        let object = self.pruned(object);
        let converted = self
            .webhook
            .convert(vec![object], &self.storage)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::internal("the conversion webhook returned no object"))?;
        Ok(self.pruned(converted))
    }

    fn pruned(&self, mut object: Value) -> Value {
        if let Some(schema) = self.schemas.get(api_version(&object)) {
            schema::prune(&mut object, Some(schema), true);
        }
        object
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// What a test's webhook answers to a review.
    type Answer = Box<dyn Fn(&Value) -> Value + Send + Sync>;

    /// A webhook in process: renames `spec.cronSpec` (v1) to `spec.schedule` (v2) and back,
    /// or answers what the test set.
    struct Fake {
        reviews: Mutex<Vec<Value>>,
        answer: Option<Answer>,
        /// (from, to, failure type) of every review observed.
        observed: Mutex<Vec<(String, String, Option<&'static str>)>>,
    }

    #[async_trait::async_trait]
    impl ConversionTransport for Fake {
        async fn post(&self, review: Vec<u8>) -> Result<Value, String> {
            let review: Value = serde_json::from_slice(&review).map_err(|e| e.to_string())?;
            self.reviews.lock().unwrap().push(review.clone());
            if let Some(answer) = &self.answer {
                return Ok(answer(&review));
            }
            Ok(convert_review(&review))
        }

        fn observe(&self, outcome: &ReviewOutcome<'_>) {
            self.observed.lock().unwrap().push((
                outcome.from_version.to_string(),
                outcome.to_version.to_string(),
                outcome.failure,
            ));
        }
    }

    fn convert_review(review: &Value) -> Value {
        let desired = review["request"]["desiredAPIVersion"].as_str().unwrap();
        let objects: Vec<Value> = review["request"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut o = o.clone();
                let (from, to) = if desired.ends_with("/v2") {
                    ("cronSpec", "schedule")
                } else {
                    ("schedule", "cronSpec")
                };
                if let Some(v) = o["spec"].as_object_mut().and_then(|s| s.remove(from)) {
                    o["spec"][to] = v;
                }
                o["apiVersion"] = json!(desired);
                o
            })
            .collect();
        json!({"apiVersion": review["apiVersion"], "kind": "ConversionReview", "response": {
            "uid": review["request"]["uid"], "convertedObjects": objects,
            "result": {"status": "Success"}}})
    }

    fn webhook(answer: Option<Answer>) -> (Arc<Fake>, Arc<ConversionWebhook>) {
        let fake = Arc::new(Fake {
            reviews: Mutex::new(Vec::new()),
            answer,
            observed: Mutex::new(Vec::new()),
        });
        (
            fake.clone(),
            ConversionWebhook::with_transport("CronTab", "v1", fake),
        )
    }

    fn crontab(version: &str, name: &str) -> Value {
        json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": "7", "labels": {"app": "a"}},
            "spec": {"cronSpec": "* * * * *"}})
    }

    #[tokio::test]
    async fn objects_in_another_version_are_converted_in_one_review() {
        let (fake, webhook) = webhook(None);
        let objects = vec![crontab("v1", "a"), crontab("v2", "b"), crontab("v1", "c")];
        let out = webhook
            .convert(objects, "stable.example.com/v2")
            .await
            .unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0]["spec"], json!({"schedule": "* * * * *"}));
        assert_eq!(out[0]["apiVersion"], "stable.example.com/v2");
        // Already in v2: not sent, returned as it was.
        assert_eq!(out[1]["spec"], json!({"cronSpec": "* * * * *"}));
        assert_eq!(out[2]["metadata"]["name"], "c");
        let reviews = fake.reviews.lock().unwrap();
        assert_eq!(reviews.len(), 1);
        assert_eq!(reviews[0]["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(reviews[0]["kind"], "ConversionReview");
        assert_eq!(
            reviews[0]["request"]["desiredAPIVersion"],
            "stable.example.com/v2"
        );
        let sent: Vec<&str> = reviews[0]["request"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(sent, ["a", "c"]);
        // No resourceVersion goes to the webhook; it comes back on the converted objects.
        assert!(reviews[0]["request"]["objects"][0]["metadata"]
            .get("resourceVersion")
            .is_none());
        assert_eq!(out[0]["metadata"]["resourceVersion"], "7");
        assert_eq!(
            *fake.observed.lock().unwrap(),
            [("v1".to_string(), "v2".to_string(), None)]
        );
    }

    #[tokio::test]
    async fn long_lists_are_sent_in_several_reviews() {
        let (fake, webhook) = webhook(None);
        let objects: Vec<Value> = (0..250).map(|i| crontab("v1", &format!("o{i}"))).collect();
        let out = webhook
            .convert(objects, "stable.example.com/v2")
            .await
            .unwrap();
        assert_eq!(out.len(), 250);
        assert_eq!(out[249]["metadata"]["name"], "o249");
        assert!(out.iter().all(|o| o["spec"]["schedule"] == "* * * * *"));
        let sizes: Vec<usize> = fake
            .reviews
            .lock()
            .unwrap()
            .iter()
            .map(|r| r["request"]["objects"].as_array().unwrap().len())
            .collect();
        assert_eq!(sizes, [100, 100, 50]);
    }

    #[tokio::test]
    async fn only_labels_and_annotations_are_taken_from_the_webhook() {
        let (_, webhook) = webhook(Some(Box::new(|review| {
            let mut answer = convert_review(review);
            let object = &mut answer["response"]["convertedObjects"][0];
            object["metadata"]["labels"] = json!({"app": "b", "converted": "yes"});
            object["metadata"]["resourceVersion"] = json!("999");
            object["metadata"]["finalizers"] = json!(["x/y"]);
            answer
        })));
        let out = webhook
            .convert(vec![crontab("v1", "a")], "stable.example.com/v2")
            .await
            .unwrap();
        assert_eq!(
            out[0]["metadata"]["labels"],
            json!({"app": "b", "converted": "yes"})
        );
        assert_eq!(out[0]["metadata"]["resourceVersion"], "7");
        assert!(out[0]["metadata"].get("finalizers").is_none());
    }

    #[tokio::test]
    async fn bad_answers_are_kube_s_errors() {
        type Edit = fn(&mut Value);
        let cases: Vec<(Edit, &str)> = vec![
            (|a| a["response"]["uid"] = json!("other"), "conversion webhook for stable.example.com/v1, Kind=CronTab failed: expected response.uid="),
            (|a| a["kind"] = json!("Status"), "conversion webhook for stable.example.com/v1, Kind=CronTab failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1, Kind=Status"),
            (|a| a["response"]["result"] = json!({"status": "Failure", "message": "cannot convert a"}), "conversion webhook for stable.example.com/v1, Kind=CronTab failed: cannot convert a"),
            (|a| a["response"]["result"] = json!({"status": "Failure"}), "failed: response.result.status was 'Failure', not 'Success'"),
            (|a| a.as_object_mut().unwrap().remove("response").map(drop).unwrap_or(()), "failed: no response provided"),
            (|a| a["response"]["convertedObjects"] = json!([]), "conversion webhook for stable.example.com/v1, Kind=CronTab returned 0 objects, expected 1"),
            (|a| a["response"]["convertedObjects"][0]["apiVersion"] = json!("stable.example.com/v1"), "returned invalid object at index 0: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v1)"),
            (|a| a["response"]["convertedObjects"][0]["kind"] = json!("Other"), "returned invalid object at index 0: invalid kind (expected CronTab, received Other)"),
            (|a| a["response"]["convertedObjects"][0]["metadata"]["name"] = json!("b"), "returned invalid object: must have the same name: a != b"),
            (|a| a["response"]["convertedObjects"][0]["metadata"]["uid"] = json!("u"), "returned invalid object: must have the same UID: uid-a != u"),
            (|a| a["response"]["convertedObjects"][0]["metadata"]["labels"] = json!({"a b": "c"}), "returned invalid metadata: metadata.labels: Invalid value: \"a b\": name part must consist of"),
            (|a| a["response"]["convertedObjects"][0]["metadata"]["annotations"] = json!({"k": 1}), "returned invalid metadata: metadata.annotations[k] must be a string, but is int64 in converted object"),
        ];
        let failure_types = [
            MALFORMED_RESPONSE,
            MALFORMED_RESPONSE,
            MALFORMED_RESPONSE,
            MALFORMED_RESPONSE,
            MALFORMED_RESPONSE,
            PARTIAL_RESPONSE,
            INVALID_CONVERTED_OBJECT,
            INVALID_CONVERTED_OBJECT,
            INVALID_CONVERTED_OBJECT,
            INVALID_CONVERTED_OBJECT,
            INVALID_CONVERTED_OBJECT,
            INVALID_CONVERTED_OBJECT,
        ];
        assert_eq!(cases.len(), failure_types.len());
        for ((edit, expected), failure_type) in cases.into_iter().zip(failure_types) {
            let (fake, webhook) = webhook(Some(Box::new(move |review| {
                let mut answer = convert_review(review);
                edit(&mut answer);
                answer
            })));
            let error = webhook
                .convert(vec![crontab("v1", "a")], "stable.example.com/v2")
                .await
                .unwrap_err();
            assert_eq!(error.code, 500);
            assert!(
                error.message.contains(expected),
                "{} does not contain {expected}",
                error.message
            );
            let observed = fake.observed.lock().unwrap();
            assert_eq!(observed.len(), 1);
            assert_eq!(observed[0].2, Some(failure_type), "{expected}");
        }
    }

    #[tokio::test]
    async fn a_webhook_without_transport_fails_with_the_reason() {
        let crd = json!({"metadata": {"name": "crontabs.stable.example.com"},
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v9", "v1beta1"]}}}});
        let webhook = ConversionWebhook::from_crd(&crd, "CronTab", None).unwrap();
        assert_eq!(webhook.review_version, Some("v1beta1"));
        let error = webhook
            .convert(vec![crontab("v1", "a")], "stable.example.com/v2")
            .await
            .unwrap_err();
        assert_eq!(
            error.message,
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: no conversion webhook client is configured"
        );
        // No webhook for the None strategy.
        let none = json!({"spec": {"conversion": {"strategy": "None"}}});
        assert!(ConversionWebhook::from_crd(&none, "CronTab", None).is_none());
    }
}

//! APIServices (`/apis/apiregistration.k8s.io/v1/apiservices`, cluster-scoped, category
//! `api-extensions`) with their `status` subresource, served as kube-aggregator serves them
//! (`pkg/registry/apiservice`): a create resets `status` (a local APIService, one with no
//! `spec.service`, is marked `Available` at once), an update keeps the stored `status`, a
//! status update keeps the stored spec and metadata; `spec.service.port` defaults to 443; the
//! Table has kube's `Service` and `Available` columns. Validation is in
//! `apiregistration_validation`, including kubegate's `kubegate.io/backend-url` annotation.
//!
//! Also the pure pieces kubegate's controllers build on: the automanaged APIService kube
//! registers for a built-in group-version ([`local_apiservice`] and
//! [`local_apiservice_needs_update`], kube's autoregister controller) and the `Available`
//! condition ([`available_condition`], [`set_available_condition`], kube's
//! `SetAPIServiceCondition`).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::apiregistration_validation::{
    has_service, validate_apiservice, validate_apiservice_status,
};
use super::b64::{decode_error, decode_std, encode_std};
use super::gojson::GoJson;
use super::{age, base_def, str_at, Names};
use crate::machinery::validation::NameRule;
use crate::resource::{
    age_column, name_column, ResourceDef, Strategy, SubresourceDef, TableColumn,
};
use crate::status::{ApiError, StatusCause};

pub use super::apiregistration_validation::{
    backend_url_annotation, is_delegated, parse_backend_url, BackendUrl, BACKEND_URL_ANNOTATION,
    DELEGATE_ANNOTATION,
};

/// The API group of APIServices.
pub const GROUP: &str = "apiregistration.k8s.io";

/// The label marking APIServices that kube-apiserver itself keeps registered
/// (`autoregister.AutoRegisterManagedLabel`).
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// [`AUTOMANAGED_LABEL`] for an APIService synced once when the server starts (built-in
/// group-versions).
pub const AUTOMANAGED_ON_START: &str = "onstart";

/// [`AUTOMANAGED_LABEL`] for an APIService kept in sync continuously (CRD group-versions).
pub const AUTOMANAGED_CONTINUOUSLY: &str = "true";

/// The priorities kube's CRD registration controller gives group-versions it has no entry for
/// in its table (`crdregistration_controller.go`).
pub const CRD_GROUP_PRIORITY_MINIMUM: i32 = 1000;
pub const CRD_VERSION_PRIORITY: i32 = 100;

/// The `Available` condition kube sets on a local APIService when it is created
/// (`NewLocalAvailableAPIServiceCondition`).
const LOCAL_REASON: &str = "Local";
const LOCAL_MESSAGE: &str = "Local APIServices are always available";

/// The APIService resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: GROUP,
            version: "v1",
            plural: "apiservices",
            singular: "apiservice",
            kind: "APIService",
            namespaced: false,
            definition: "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
        },
        Arc::new(ApiServiceStrategy),
    );
    def.categories = vec!["api-extensions".into()];
    def.subresources = vec![SubresourceDef {
        name: "status",
        kind: "APIService".into(),
        verbs: vec!["get", "patch", "update"],
    }];
    let column = |name: &'static str, description: &'static str| TableColumn {
        name: name.into(),
        type_: "string".into(),
        format: "".into(),
        description: description.into(),
        priority: 0,
    };
    def.columns = vec![
        name_column(),
        column(
            "Service",
            "The reference to the service that hosts this API endpoint.",
        ),
        column("Available", "Whether this service is available."),
        age_column(),
    ];
    def.patch_meta = &[("status.conditions", "merge", "type")];
    def
}

/// kube-aggregator's `apiServerStrategy` and `apiServerStatusStrategy`.
pub struct ApiServiceStrategy;

impl Strategy for ApiServiceStrategy {
    fn kube_finalizer_names(&self) -> bool {
        false
    }

    /// kube-aggregator's `apiServerStrategy.AllowUnconditionalUpdate`: an update must name the
    /// resourceVersion it read.
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn name_rule(&self) -> NameRule {
        // kube's name function starts with the path-segment checks; the `<version>.<group>`
        // rule is checked with the spec in `validate`.
        NameRule::PathSegment
    }

    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        check_types(object)
    }

    fn prepare_for_create(&self, object: &mut Value) {
        shape(object);
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
        // kube marks local APIServices available on create.
        if is_local(object) {
            let now = crate::registry::now_rfc3339();
            set_available_condition(object, true, LOCAL_REASON, LOCAL_MESSAGE, &now);
        }
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        shape(object);
        if let Some(map) = object.as_object_mut() {
            let status = old.get("status").cloned().unwrap_or_else(|| json!({}));
            map.insert("status".into(), status);
        }
    }

    fn prepare_for_status_update(&self, object: &mut Value, old: &Value) {
        let status = match object.get("status") {
            Some(s) if s.is_object() => s.clone(),
            _ => json!({}),
        };
        let rv = object.pointer("/metadata/resourceVersion").cloned();
        let mut next = old.clone();
        if let Some(map) = next.as_object_mut() {
            map.insert("status".into(), status);
        }
        if let (Some(meta), Some(rv)) =
            (next.get_mut("metadata").and_then(Value::as_object_mut), rv)
        {
            meta.insert("resourceVersion".into(), rv);
        }
        *object = next;
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_apiservice(object)
    }

    /// kube validates the spec on an update of the main resource and the status on an update
    /// of `status`; each carries the other part over unchanged from the stored (valid)
    /// object, so checking both is the same.
    fn validate_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        let mut causes = validate_apiservice(object);
        causes.extend(validate_apiservice_status(object));
        causes
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![
            json!(service_cell(object)),
            json!(available_cell(object)),
            json!(age(object)),
        ]
    }
}

/// Whether an APIService is served by this process: no `spec.service` and (kubegate's
/// extension) no `kubegate.io/backend-url` annotation.
pub fn is_local(apiservice: &Value) -> bool {
    !has_service(apiservice)
        && backend_url_annotation(apiservice).is_none()
        && !is_delegated(apiservice)
}

/// The SERVICE cell: `<namespace>/<name>`, or `Local`. An APIService backed by a
/// `kubegate.io/backend-url` shows its URL (kube has no such APIServices).
fn service_cell(object: &Value) -> String {
    if has_service(object) {
        return format!(
            "{}/{}",
            str_at(object, "/spec/service/namespace"),
            str_at(object, "/spec/service/name")
        );
    }
    match backend_url_annotation(object) {
        Some(url) => url.to_string(),
        None if is_delegated(object) => "Delegate".into(),
        None => "Local".into(),
    }
}

/// The AVAILABLE cell as kube's table convertor writes it: `True`; `False (<reason>)` (or
/// the bare status when there is no reason); `Unknown` without an `Available` condition.
fn available_cell(object: &Value) -> String {
    let Some(condition) = find_condition(object, "Available") else {
        return "Unknown".into();
    };
    let status = str_at(condition, "/status");
    let reason = str_at(condition, "/reason");
    if status == "True" || reason.is_empty() {
        status.to_string()
    } else {
        format!("{status} ({reason})")
    }
}

fn find_condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == kind)
}

/// The `Available` condition: (status is `True`, reason, message); `None` without one.
pub fn available_condition(apiservice: &Value) -> Option<(bool, String, String)> {
    let condition = find_condition(apiservice, "Available")?;
    Some((
        str_at(condition, "/status") == "True",
        str_at(condition, "/reason").to_string(),
        str_at(condition, "/message").to_string(),
    ))
}

/// kube's `SetAPIServiceCondition` for the `Available` condition: adds it when missing;
/// otherwise sets reason and message, and moves `lastTransitionTime` to `now` only when the
/// status changes. Returns whether anything changed (so a controller can skip the write).
pub fn set_available_condition(
    apiservice: &mut Value,
    status: bool,
    reason: &str,
    message: &str,
    now: &str,
) -> bool {
    let status = if status { "True" } else { "False" };
    let Some(root) = apiservice.as_object_mut() else {
        return false;
    };
    let status_obj = root.entry("status").or_insert_with(|| json!({}));
    if !status_obj.is_object() {
        *status_obj = json!({});
    }
    let Some(status_map) = status_obj.as_object_mut() else {
        return false;
    };
    let conditions = status_map.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(conditions) = conditions.as_array_mut() else {
        return false;
    };
    let existing = conditions
        .iter_mut()
        .filter_map(Value::as_object_mut)
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"));
    let Some(condition) = existing else {
        let mut condition = Map::new();
        condition.insert("type".into(), json!("Available"));
        condition.insert("status".into(), json!(status));
        condition.insert("lastTransitionTime".into(), json!(now));
        // `reason` and `message` are `omitempty`.
        if !reason.is_empty() {
            condition.insert("reason".into(), json!(reason));
        }
        if !message.is_empty() {
            condition.insert("message".into(), json!(message));
        }
        conditions.push(Value::Object(condition));
        return true;
    };
    let text = |c: &Map<String, Value>, key: &str| {
        c.get(key).and_then(Value::as_str).unwrap_or("").to_string()
    };
    let mut changed = false;
    if text(condition, "status") != status {
        condition.insert("status".into(), json!(status));
        condition.insert("lastTransitionTime".into(), json!(now));
        changed = true;
    }
    for (key, value) in [("reason", reason), ("message", message)] {
        if text(condition, key) != value {
            changed = true;
        }
        if value.is_empty() {
            condition.remove(key);
        } else {
            condition.insert(key.into(), json!(value));
        }
    }
    changed
}

/// The automanaged APIService kube-apiserver registers for a served group-version
/// (`makeAPIService` with kube's priority table, labelled `automanaged: onstart` by the
/// autoregister controller). A group-version without an entry in
/// [`crate::discovery::apiservice_priority`] is treated as kube treats a CRD group-version:
/// priorities 1000/100 and `automanaged: "true"` (synced continuously).
pub fn local_apiservice(group: &str, version: &str) -> Value {
    let (group_priority, version_priority, managed) =
        match crate::discovery::apiservice_priority(group, version) {
            Some((g, v)) => (g, v, AUTOMANAGED_ON_START),
            None => (
                CRD_GROUP_PRIORITY_MINIMUM,
                CRD_VERSION_PRIORITY,
                AUTOMANAGED_CONTINUOUSLY,
            ),
        };
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "APIService",
        "metadata": {
            "name": format!("{version}.{group}"),
            "labels": {AUTOMANAGED_LABEL: managed},
        },
        "spec": {
            "service": null,
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority,
        },
    })
}

/// The APIService kubegate registers for a group-version the delegate cluster serves:
/// `automanaged: "true"` (kept in sync with the delegate's discovery) and
/// `kubegate.io/delegate: "true"`. Priorities come from kube's table for known groups, else
/// as for a CRD group, with `version_priority` keeping the delegate's version order.
pub fn delegate_apiservice(group: &str, version: &str, version_priority: i32) -> Value {
    let (group_priority, version_priority) = crate::discovery::apiservice_priority(group, version)
        .unwrap_or((CRD_GROUP_PRIORITY_MINIMUM, version_priority));
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "APIService",
        "metadata": {
            "name": format!("{version}.{group}"),
            "labels": {AUTOMANAGED_LABEL: AUTOMANAGED_CONTINUOUSLY},
            "annotations": {DELEGATE_ANNOTATION: "true"},
        },
        "spec": {
            "service": null,
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority,
        },
    })
}

/// Whether a stored APIService must be rewritten to match [`local_apiservice`]'s `desired`:
/// its spec differs (compared as Go compares the decoded structs, so an absent field equals
/// its zero value) or a label of `desired` is missing or different. (kube's autoregister
/// controller leaves an existing APIService without its label alone; kubegate reclaims it.)
pub fn local_apiservice_needs_update(existing: &Value, desired: &Value) -> bool {
    if go_spec(existing.get("spec")) != go_spec(desired.get("spec")) {
        return true;
    }
    let labels = |o: &Value| o.pointer("/metadata/labels").cloned();
    let have = labels(existing).unwrap_or(Value::Null);
    match labels(desired) {
        Some(Value::Object(want)) => want.iter().any(|(k, v)| have.get(k) != Some(v)),
        _ => false,
    }
}

/// A spec as Go's `APIServiceSpec` holds it: zero values and `null`s dropped, the service's
/// port defaulted, the CA bundle decoded.
fn go_spec(spec: Option<&Value>) -> Map<String, Value> {
    let mut spec = match spec {
        Some(Value::Object(m)) => Value::Object(m.clone()),
        _ => json!({}),
    };
    shape_spec(&mut spec);
    let mut map = match spec {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for key in ["groupPriorityMinimum", "versionPriority"] {
        if map.get(key).and_then(Value::as_i64) == Some(0) {
            map.remove(key);
        }
    }
    if let Some(bundle) = map.get("caBundle").and_then(Value::as_str) {
        let bytes = decode_std(bundle).unwrap_or_default();
        map.insert("caBundle".into(), json!(bytes));
    }
    map
}

/// Puts an object in the shape kube stores (Go's `omitempty` fields left out, the int32
/// priorities always written, `spec.service.port` defaulted to 443 as
/// `SetDefaults_ServiceReference` does, the CA bundle in canonical base64).
fn shape(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    shape_spec(spec);
}

fn shape_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    spec.retain(|key, value| match (key.as_str(), &*value) {
        (_, Value::Null) => false,
        ("group" | "version" | "caBundle", Value::String(s)) => !s.is_empty(),
        ("insecureSkipTLSVerify", Value::Bool(b)) => *b,
        _ => true,
    });
    for key in ["groupPriorityMinimum", "versionPriority"] {
        spec.entry(key).or_insert_with(|| json!(0));
    }
    if let Some(Value::String(bundle)) = spec.get_mut("caBundle") {
        if let Ok(bytes) = decode_std(bundle) {
            *bundle = encode_std(&bytes);
        }
    }
    if let Some(Value::Object(service)) = spec.get_mut("service") {
        service.retain(|key, value| match (key.as_str(), &*value) {
            (_, Value::Null) => false,
            ("namespace" | "name", Value::String(s)) => !s.is_empty(),
            _ => true,
        });
        service.entry("port").or_insert_with(|| json!(443));
    }
}

/// Go's typed decoding of an APIService body: a field of the wrong JSON type, an int32 that
/// is not one, or a `caBundle` that is not base64 is a 400 before anything else runs.
fn check_types(object: &Value) -> Result<(), ApiError> {
    let go = GoJson::new("APIService");
    if let Some(spec) = go.object(
        object.get("spec"),
        "APIService",
        "spec",
        "v1.APIServiceSpec",
    )? {
        let s = "APIServiceSpec";
        if let Some(service) = go.object(
            spec.get("service"),
            s,
            "spec.service",
            "v1.ServiceReference",
        )? {
            let r = "ServiceReference";
            go.string(service.get("namespace"), r, "spec.service.namespace")?;
            go.string(service.get("name"), r, "spec.service.name")?;
            int32(&go, service.get("port"), r, "spec.service.port")?;
        }
        go.string(spec.get("group"), s, "spec.group")?;
        go.string(spec.get("version"), s, "spec.version")?;
        go.boolean(
            spec.get("insecureSkipTLSVerify"),
            s,
            "spec.insecureSkipTLSVerify",
        )?;
        match spec.get("caBundle") {
            None | Some(Value::Null) => {}
            Some(Value::String(b)) => {
                decode_std(b).map_err(|at| decode_error("APIService", at))?;
            }
            Some(other) => return Err(go.mismatch(other, s, "spec.caBundle", "[]uint8")),
        }
        int32(
            &go,
            spec.get("groupPriorityMinimum"),
            s,
            "spec.groupPriorityMinimum",
        )?;
        int32(&go, spec.get("versionPriority"), s, "spec.versionPriority")?;
    }
    if let Some(status) = go.object(
        object.get("status"),
        "APIService",
        "status",
        "v1.APIServiceStatus",
    )? {
        let path = "status.conditions";
        for condition in go.array(
            status.get("conditions"),
            "APIServiceStatus",
            path,
            "[]v1.APIServiceCondition",
        )? {
            let Some(c) = go.object(
                Some(condition),
                "APIServiceStatus",
                path,
                "v1.APIServiceCondition",
            )?
            else {
                continue;
            };
            let at = |key: &str| format!("{path}.{key}");
            let s = "APIServiceCondition";
            go.typed_string(c.get("type"), s, &at("type"), "v1.APIServiceConditionType")?;
            go.typed_string(c.get("status"), s, &at("status"), "v1.ConditionStatus")?;
            go.string(c.get("reason"), s, &at("reason"))?;
            go.string(c.get("message"), s, &at("message"))?;
            check_time(c.get("lastTransitionTime"))?;
        }
    }
    Ok(())
}

/// An `int32` field: a whole number in range, or Go's `UnmarshalTypeError`.
fn int32(go: &GoJson, value: Option<&Value>, go_struct: &str, path: &str) -> Result<(), ApiError> {
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) => {
            if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) {
                Ok(())
            } else {
                Err(ApiError::bad_request(format!(
                    "APIService in version \"v1\" cannot be handled as a APIService: json: cannot unmarshal number {n} into Go struct field {go_struct}.{path} of type int32"
                )))
            }
        }
        Some(other) => Err(go.mismatch(other, go_struct, path, "int32")),
    }
}

/// A `metav1.Time`: `null` or an RFC 3339 string.
fn check_time(value: Option<&Value>) -> Result<(), ApiError> {
    let prefix = "APIService in version \"v1\" cannot be handled as a APIService";
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s.is_empty() => Ok(()),
        Some(Value::String(s)) => chrono::DateTime::parse_from_rfc3339(s)
            .map(|_| ())
            .map_err(|_| {
                ApiError::bad_request(format!(
                    "{prefix}: parsing time {s:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {s:?} as RFC 3339"
                ))
            }),
        Some(other) => {
            let found = match other {
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::Array(_) => "array",
                _ => "object",
            };
            Err(ApiError::bad_request(format!(
                "{prefix}: json: cannot unmarshal {found} into Go value of type string"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn remote() -> Value {
        json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io", "creationTimestamp": Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()},
            "spec": {
                "group": "metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100,
                "service": {"namespace": "kube-system", "name": "metrics-server"},
                "insecureSkipTLSVerify": true,
            },
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        })
    }

    #[test]
    fn def_matches_kube() {
        let d = def();
        assert_eq!(d.api_version(), "apiregistration.k8s.io/v1");
        assert_eq!(d.list_kind, "APIServiceList");
        assert!(!d.namespaced);
        assert!(d.short_names.is_empty());
        assert_eq!(d.categories, vec!["api-extensions"]);
        assert_eq!(d.verbs, crate::resource::STANDARD_VERBS);
        assert!(d.has_subresource("status"));
        assert_eq!(d.storage_prefix, "/apiregistration.k8s.io/apiservices");
        let names: Vec<&str> = d.columns.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(names, ["Name", "Service", "Available", "Age"]);
        assert!(d.row_starts_with_name());
        assert!(!ApiServiceStrategy.tracks_generation());
    }

    #[test]
    fn create_resets_status_and_defaults_port() {
        let mut object = remote();
        ApiServiceStrategy.prepare_for_create(&mut object);
        assert_eq!(object["status"], json!({}));
        assert_eq!(object["spec"]["service"]["port"], 443);
        assert!(ApiServiceStrategy.validate(&object).is_empty());

        // A local APIService is available at once.
        let mut local = json!({"metadata": {"name": "v1.apps"},
            "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800,
                "versionPriority": 15, "service": null, "caBundle": "", "insecureSkipTLSVerify": false},
            "status": {"conditions": [{"type": "Available", "status": "False"}]}});
        ApiServiceStrategy.prepare_for_create(&mut local);
        let spec = local["spec"].as_object().cloned().unwrap_or_default();
        let mut keys: Vec<&String> = spec.keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "group",
                "groupPriorityMinimum",
                "version",
                "versionPriority"
            ]
        );
        assert_eq!(
            available_condition(&local),
            Some((true, "Local".into(), LOCAL_MESSAGE.into()))
        );
        assert_eq!(
            local["status"]["conditions"].as_array().map(Vec::len),
            Some(1)
        );

        // Backed by a URL: not local, so nothing is assumed about availability.
        let mut url = json!({"metadata": {"name": "v1.x.io",
                "annotations": {BACKEND_URL_ANNOTATION: "https://x.example:8443"}},
            "spec": {"group": "x.io", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}});
        ApiServiceStrategy.prepare_for_create(&mut url);
        assert_eq!(url["status"], json!({}));
        assert!(!is_local(&url));
    }

    #[test]
    fn update_keeps_status_and_status_update_keeps_spec() {
        let mut old = remote();
        ApiServiceStrategy.prepare_for_create(&mut old);
        set_available_condition(
            &mut old,
            false,
            "FailedDiscoveryCheck",
            "no",
            "2024-01-01T00:00:00Z",
        );
        let mut new = old.clone();
        new["spec"]["versionPriority"] = json!(20);
        new["status"] = json!({"conditions": [{"type": "Available", "status": "True"}]});
        ApiServiceStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["status"], old["status"]);
        assert_eq!(new["spec"]["versionPriority"], 20);

        let mut status = old.clone();
        status["spec"]["versionPriority"] = json!(30);
        status["metadata"]["labels"] = json!({"a": "b"});
        status["metadata"]["resourceVersion"] = json!("7");
        status["status"] =
            json!({"conditions": [{"type": "Available", "status": "True", "reason": "Passed"}]});
        ApiServiceStrategy.prepare_for_status_update(&mut status, &old);
        assert_eq!(status["spec"], old["spec"]);
        assert!(status["metadata"].get("labels").is_none());
        assert_eq!(status["metadata"]["resourceVersion"], "7");
        assert_eq!(available_cell(&status), "True");

        let mut bad = status.clone();
        bad["status"]["conditions"][0]["status"] = json!("Yes");
        let causes = ApiServiceStrategy.validate_update(&bad, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "status.conditions[0].status");
    }

    #[test]
    fn table_cells_match_kube() {
        let mut object = remote();
        let cells = ApiServiceStrategy.table_cells(&object);
        assert_eq!(cells[0], "kube-system/metrics-server");
        assert_eq!(cells[1], "True");
        assert_eq!(cells[2], "0s");
        object["status"]["conditions"][0] =
            json!({"type": "Available", "status": "False", "reason": "MissingEndpoints"});
        assert_eq!(available_cell(&object), "False (MissingEndpoints)");
        object["status"]["conditions"][0] = json!({"type": "Available", "status": "Unknown"});
        assert_eq!(available_cell(&object), "Unknown");
        object["status"] = json!({});
        assert_eq!(available_cell(&object), "Unknown");
        object["spec"]["service"] = Value::Null;
        assert_eq!(service_cell(&object), "Local");
        object["metadata"]["annotations"] = json!({BACKEND_URL_ANNOTATION: "https://b.example"});
        assert_eq!(service_cell(&object), "https://b.example");
    }

    #[test]
    fn delegated_apiservices() {
        let mut object = delegate_apiservice("apps", "v1", 7);
        assert_eq!(object["metadata"]["name"], "v1.apps");
        assert_eq!(
            object["metadata"]["annotations"][DELEGATE_ANNOTATION],
            "true"
        );
        assert_eq!(object["metadata"]["labels"][AUTOMANAGED_LABEL], "true");
        // A known group takes kube's priorities; an unknown one keeps the delegate's order.
        let (g, v) = crate::discovery::apiservice_priority("apps", "v1").unwrap_or((0, 0));
        assert_eq!(object["spec"]["groupPriorityMinimum"], g);
        assert_eq!(object["spec"]["versionPriority"], v);
        let other = delegate_apiservice("widgets.example.com", "v2", 99);
        assert_eq!(other["spec"]["groupPriorityMinimum"], 1000);
        assert_eq!(other["spec"]["versionPriority"], 99);

        ApiServiceStrategy.prepare_for_create(&mut object);
        assert!(!is_local(&object));
        // Not assumed available: the availability controller probes the delegate.
        assert_eq!(object["status"], json!({}));
        assert!(ApiServiceStrategy.validate(&object).is_empty());
        assert_eq!(service_cell(&object), "Delegate");

        let mut with_service = object.clone();
        with_service["spec"]["service"] = json!({"namespace": "a", "name": "b", "port": 443});
        let causes = ApiServiceStrategy.validate(&with_service);
        assert!(causes
            .iter()
            .any(|c| c.field == "metadata.annotations[kubegate.io/delegate]"
                && c.message
                    .contains("may not be set together with spec.service")));
        let mut with_url = object.clone();
        with_url["metadata"]["annotations"][BACKEND_URL_ANNOTATION] = json!("https://b.example");
        assert!(ApiServiceStrategy
            .validate(&with_url)
            .iter()
            .any(|c| c.message.contains("kubegate.io/backend-url")));
        let mut with_ca = object.clone();
        with_ca["spec"]["caBundle"] = json!("QUJD");
        assert!(ApiServiceStrategy.validate(&with_ca).iter().any(|c| c
            .message
            .contains("delegated APIServices may not have a caBundle")));
        let mut other_value = object;
        other_value["metadata"]["annotations"][DELEGATE_ANNOTATION] = json!("yes");
        let causes = ApiServiceStrategy.validate(&other_value);
        assert!(
            causes.iter().any(|c| c.reason == "FieldValueNotSupported"),
            "{causes:?}"
        );
    }

    #[test]
    fn local_apiservices() {
        let core = local_apiservice("", "v1");
        assert_eq!(core["metadata"]["name"], "v1.");
        assert_eq!(core["metadata"]["labels"][AUTOMANAGED_LABEL], "onstart");
        assert!(core["spec"]["service"].is_null());
        assert_eq!(core["spec"]["version"], "v1");
        let (g, v) = crate::discovery::apiservice_priority("", "v1").unwrap_or((0, 0));
        assert_eq!(core["spec"]["groupPriorityMinimum"], g);
        assert_eq!(core["spec"]["versionPriority"], v);

        let crd = local_apiservice("widgets.example.com", "v1alpha1");
        assert_eq!(crd["metadata"]["name"], "v1alpha1.widgets.example.com");
        assert_eq!(crd["spec"]["groupPriorityMinimum"], 1000);
        assert_eq!(crd["spec"]["versionPriority"], 100);
        assert_eq!(crd["metadata"]["labels"][AUTOMANAGED_LABEL], "true");

        // What the registry stores validates and needs no update.
        let mut stored = local_apiservice("coordination.k8s.io", "v1");
        ApiServiceStrategy.prepare_for_create(&mut stored);
        assert!(ApiServiceStrategy.validate(&stored).is_empty());
        let desired = local_apiservice("coordination.k8s.io", "v1");
        assert!(!local_apiservice_needs_update(&stored, &desired));
        let mut core_stored = core.clone();
        ApiServiceStrategy.prepare_for_create(&mut core_stored);
        assert!(core_stored["spec"].get("group").is_none());
        assert!(!local_apiservice_needs_update(&core_stored, &core));

        let mut changed = stored.clone();
        changed["spec"]["versionPriority"] = json!(1);
        assert!(local_apiservice_needs_update(&changed, &desired));
        let mut unlabelled = stored.clone();
        unlabelled["metadata"]["labels"] = json!({"other": "x"});
        assert!(local_apiservice_needs_update(&unlabelled, &desired));
        let mut remote_now = stored.clone();
        remote_now["spec"]["service"] = json!({"namespace": "a", "name": "b", "port": 443});
        assert!(local_apiservice_needs_update(&remote_now, &desired));
        let mut extra_label = stored;
        extra_label["metadata"]["labels"]["more"] = json!("x");
        assert!(!local_apiservice_needs_update(&extra_label, &desired));
    }

    #[test]
    fn condition_helpers_follow_set_apiservice_condition() {
        let mut object = json!({"metadata": {"name": "v1.x"}});
        assert_eq!(available_condition(&object), None);
        assert!(set_available_condition(
            &mut object,
            false,
            "MissingEndpoints",
            "none",
            "t1"
        ));
        assert_eq!(
            object["status"]["conditions"],
            json!([{"type": "Available", "status": "False", "lastTransitionTime": "t1",
                "reason": "MissingEndpoints", "message": "none"}])
        );
        // Same status, new reason: the transition time stays.
        assert!(set_available_condition(
            &mut object,
            false,
            "FailedDiscoveryCheck",
            "x",
            "t2"
        ));
        assert_eq!(
            object["status"]["conditions"][0]["lastTransitionTime"],
            "t1"
        );
        assert_eq!(
            object["status"]["conditions"][0]["reason"],
            "FailedDiscoveryCheck"
        );
        // Nothing new: unchanged.
        assert!(!set_available_condition(
            &mut object,
            false,
            "FailedDiscoveryCheck",
            "x",
            "t3"
        ));
        // Status flips: the transition time moves.
        assert!(set_available_condition(
            &mut object,
            true,
            "Passed",
            "all checks passed",
            "t4"
        ));
        assert_eq!(
            object["status"]["conditions"][0]["lastTransitionTime"],
            "t4"
        );
        assert_eq!(
            available_condition(&object),
            Some((true, "Passed".into(), "all checks passed".into()))
        );
        // Other conditions are left alone.
        if let Some(c) = object["status"]["conditions"].as_array_mut() {
            c.insert(0, json!({"type": "Other", "status": "True"}));
        }
        assert!(set_available_condition(&mut object, false, "", "", "t5"));
        let conditions = object["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0]["type"], "Other");
        assert_eq!(
            conditions[1],
            json!({"type": "Available", "status": "False", "lastTransitionTime": "t5"})
        );
    }

    #[test]
    fn decoding_is_typed_like_go() {
        let check = |body: Value| {
            ApiServiceStrategy
                .check_decode(&body)
                .err()
                .map(|e| e.message)
        };
        assert_eq!(check(remote()), None);
        let prefix = "APIService in version \"v1\" cannot be handled as a APIService: ";
        for (body, want) in [
            (
                json!({"spec": {"groupPriorityMinimum": "1"}}),
                "json: cannot unmarshal string into Go struct field APIServiceSpec.spec.groupPriorityMinimum of type int32",
            ),
            (
                json!({"spec": {"versionPriority": 1.5}}),
                "json: cannot unmarshal number 1.5 into Go struct field APIServiceSpec.spec.versionPriority of type int32",
            ),
            (
                json!({"spec": {"service": {"port": 3000000000_u64}}}),
                "json: cannot unmarshal number 3000000000 into Go struct field ServiceReference.spec.service.port of type int32",
            ),
            (
                json!({"spec": {"caBundle": "abc"}}),
                "illegal base64 data at input byte 0",
            ),
            (
                json!({"spec": {"caBundle": 5}}),
                "json: cannot unmarshal number into Go struct field APIServiceSpec.spec.caBundle of type []uint8",
            ),
            (
                json!({"spec": {"insecureSkipTLSVerify": "yes"}}),
                "json: cannot unmarshal string into Go struct field APIServiceSpec.spec.insecureSkipTLSVerify of type bool",
            ),
            (
                json!({"status": {"conditions": [{"status": true}]}}),
                "json: cannot unmarshal bool into Go struct field APIServiceCondition.status.conditions.status of type v1.ConditionStatus",
            ),
        ] {
            assert_eq!(check(body.clone()), Some(format!("{prefix}{want}")), "{body}");
        }
        assert!(
            check(json!({"status": {"conditions": [{"lastTransitionTime": "nope"}]}})).is_some()
        );
    }

    #[test]
    fn ca_bundle_is_stored_canonically() {
        let mut object = remote();
        object["spec"]["insecureSkipTLSVerify"] = json!(false);
        object["spec"]["caBundle"] = json!("Y2Eg\nYnVu\r\nZGxl");
        ApiServiceStrategy.prepare_for_create(&mut object);
        assert_eq!(object["spec"]["caBundle"], "Y2EgYnVuZGxl");
        assert!(object["spec"].get("insecureSkipTLSVerify").is_none());
    }
}

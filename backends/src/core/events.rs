//! Events (`/api/v1/namespaces/{ns}/events`, short name `ev`): kube's legacy event
//! validation (core/v1 writes get no more, for old clients), the field selectors kube
//! offers on events, and the `kubectl get events` row.
//!
//! Storage: core/v1 and events.k8s.io/v1 events are the same objects in kube (one etcd
//! prefix, `/registry/events`, read through either API with conversion), so both resources
//! use the prefix `/core/events`. The row and selector helpers here read either shape
//! (`involvedObject`/`regarding`, `message`/`note`, ...), so they work whichever version an
//! object was stored in; `events_v1` holds the conversion between the two shapes.

use std::sync::Arc;

use chrono::Utc;
use serde_json::{json, Value};

use super::causes::invalid_each;
use super::{base_def, translate_timestamp_since, Names};
use crate::machinery::validation::{is_dns1123_subdomain, is_qualified_name, NameRule};
use crate::resource::{name_column, FieldExtractor, ResourceDef, Strategy, TableColumn};
use crate::status::{field_invalid, field_required, StatusCause};

/// Length limits kube enforces on events that carry `eventTime` (new-style events).
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// The storage prefix both event resources share.
pub const EVENTS_STORAGE_PREFIX: &str = "/core/events";

/// The core/v1 Event resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "events",
            singular: "event",
            kind: "Event",
            namespaced: true,
            definition: "io.k8s.api.core.v1.Event",
        },
        Arc::new(EventStrategy),
    );
    def.short_names = vec!["ev".into()];
    def.storage_prefix = EVENTS_STORAGE_PREFIX.into();
    def.columns = columns();
    def.field_selectors = core_field_selectors();
    def
}

fn column(name: &'static str, description: &'static str, priority: u32) -> TableColumn {
    TableColumn {
        name: name.into(),
        type_: "string".into(),
        format: "".into(),
        description: description.into(),
        priority,
    }
}

/// kube's event columns. Unlike every other type, the row does not start with the name
/// (NAME is the last, wide-only column), so [`Strategy::table_cells`] returns the whole row.
pub(crate) fn columns() -> Vec<TableColumn> {
    let mut name = name_column();
    name.priority = 1;
    vec![
        column("Last Seen", "The time at which the most recent occurrence of this event was recorded.", 0),
        column("Type", "Type of this event (Normal, Warning), new types could be added in the future", 0),
        column("Reason", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0),
        column("Object", "The object that this event is about.", 0),
        column("Subobject", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.", 1),
        column("Source", "The component reporting this event. Should be a short machine understandable string.", 1),
        column("Message", "A human-readable description of the status of this operation.", 0),
        column("First Seen", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1),
        column("Count", "The number of times this event has occurred.", 1),
        name,
    ]
}

/// Whether a resource's Table rows start with NAME (false only for events): the registry
/// prepends the name cell to [`Strategy::table_cells`] only when this holds.
pub fn row_starts_with_name(def: &ResourceDef) -> bool {
    def.columns.first().is_some_and(|c| c.name == "Name")
}

/// One event in either stored shape: core/v1 names first, events.k8s.io/v1 names second.
pub(crate) struct EventView<'a>(pub &'a Value);

impl<'a> EventView<'a> {
    pub(crate) fn get(&self, core: &str, v1: &str) -> Option<&'a Value> {
        self.0
            .get(core)
            .filter(|v| !v.is_null())
            .or_else(|| self.0.get(v1).filter(|v| !v.is_null()))
    }

    pub(crate) fn str(&self, core: &str, v1: &str) -> &'a str {
        self.get(core, v1).and_then(Value::as_str).unwrap_or("")
    }

    pub(crate) fn involved(&self, field: &str) -> &'a str {
        self.get("involvedObject", "regarding")
            .and_then(|o| o.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub(crate) fn count(&self) -> i64 {
        self.get("count", "deprecatedCount")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    pub(crate) fn reporting_controller(&self) -> &'a str {
        self.str("reportingComponent", "reportingController")
    }

    /// kube's selectable `source`: the source component, else the reporting controller.
    pub(crate) fn source(&self) -> &'a str {
        let component = self
            .get("source", "deprecatedSource")
            .and_then(|s| s.get("component"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if component.is_empty() {
            self.reporting_controller()
        } else {
            component
        }
    }

    fn source_host(&self) -> &'a str {
        self.get("source", "deprecatedSource")
            .and_then(|s| s.get("host"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// A timestamp field that is set (Go's zero time serializes as null or is omitted).
    pub(crate) fn time(&self, core: &str, v1: &str) -> Option<&'a Value> {
        self.get(core, v1)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    }
}

/// The field selectors kube supports on core/v1 events.
fn core_field_selectors() -> Vec<(&'static str, FieldExtractor)> {
    vec![
        ("involvedObject.kind", |o| {
            Some(EventView(o).involved("kind").into())
        }),
        ("involvedObject.namespace", |o| {
            Some(EventView(o).involved("namespace").into())
        }),
        ("involvedObject.name", |o| {
            Some(EventView(o).involved("name").into())
        }),
        ("involvedObject.uid", |o| {
            Some(EventView(o).involved("uid").into())
        }),
        ("involvedObject.apiVersion", |o| {
            Some(EventView(o).involved("apiVersion").into())
        }),
        ("involvedObject.resourceVersion", |o| {
            Some(EventView(o).involved("resourceVersion").into())
        }),
        ("involvedObject.fieldPath", |o| {
            Some(EventView(o).involved("fieldPath").into())
        }),
        ("reason", |o| {
            Some(EventView(o).str("reason", "reason").into())
        }),
        ("reportingComponent", |o| {
            Some(EventView(o).reporting_controller().into())
        }),
        ("source", |o| Some(EventView(o).source().into())),
        ("type", |o| Some(EventView(o).str("type", "type").into())),
    ]
}

/// kube's `printEvent` row (all ten cells; the server always renders the wide row).
pub(crate) fn event_row(object: &Value) -> Vec<Value> {
    let now = Utc::now();
    let event = EventView(object);
    let since = |v: Option<&Value>| translate_timestamp_since(v, now);
    let first = match event.time("firstTimestamp", "deprecatedFirstTimestamp") {
        Some(t) => since(Some(t)),
        None => since(event.time("eventTime", "eventTime")),
    };
    let mut last = match event.time("lastTimestamp", "deprecatedLastTimestamp") {
        Some(t) => since(Some(t)),
        None => first.clone(),
    };
    let mut count = event.count();
    if let Some(series) = event.get("series", "series") {
        last = since(series.get("lastObservedTime"));
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        // Singleton events carry no count in the new API.
        count = 1;
    }
    let kind = event.involved("kind").to_lowercase();
    let name = event.involved("name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = event.source();
    let host = match event.source_host() {
        "" => event.str("reportingInstance", "reportingInstance"),
        h => h,
    };
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(event.str("type", "type")),
        json!(event.str("reason", "reason")),
        json!(target),
        json!(event.involved("fieldPath")),
        json!(source),
        json!(event.str("message", "note").trim()),
        json!(first),
        json!(count),
        json!(super::str_at(object, "/metadata/name")),
    ]
}

/// The reporting controller's field in core/v1 Events' validation errors.
const CORE_CONTROLLER_FIELD: &str = "reportingComponent";

/// kube's `legacyValidateEvent`, which every event write passes, whatever its version.
/// `controller_field` names the reporting controller as the request's version does
/// (`reportingComponent` in core/v1, `reportingController` in events.k8s.io/v1).
pub(crate) fn legacy_validate(object: &Value, controller_field: &str) -> Vec<StatusCause> {
    let event = EventView(object);
    let namespace = super::str_at(object, "/metadata/namespace");
    let involved_ns = event.involved("namespace");
    let mut causes = Vec::new();
    let mismatch = || {
        field_invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if event.time("eventTime", "eventTime").is_none() {
        let agrees = if involved_ns.is_empty() {
            // Old clients may put cluster-scoped objects' events in "default".
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved_ns
        };
        if !agrees {
            causes.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            causes.push(mismatch());
        }
        let controller = event.reporting_controller();
        if controller.is_empty() {
            causes.push(field_required(controller_field, ""));
        }
        causes.extend(invalid_each(
            controller_field,
            controller,
            is_qualified_name(controller),
        ));
        let limited = [
            (
                "reportingInstance",
                event.str("reportingInstance", "reportingInstance"),
                REPORTING_INSTANCE_LIMIT,
                true,
            ),
            ("action", event.str("action", "action"), ACTION_LIMIT, true),
            ("reason", event.str("reason", "reason"), REASON_LIMIT, true),
            ("message", event.str("message", "note"), NOTE_LIMIT, false),
        ];
        for (field, value, limit, required) in limited {
            if required && value.is_empty() {
                causes.push(field_required(field, ""));
            }
            if value.len() > limit {
                causes.push(field_invalid(
                    field,
                    "",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
    }
    causes.extend(invalid_each(
        "namespace",
        namespace,
        is_dns1123_subdomain(namespace),
    ));
    causes
}

/// What Go always serializes for a core/v1 Event (fields without `omitempty`, zero
/// timestamps as null), so stored events look like kube's.
fn fill_core_fields(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    for (key, empty) in [
        ("involvedObject", json!({})),
        ("source", json!({})),
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("eventTime", Value::Null),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
    ] {
        map.entry(key.to_string()).or_insert(empty);
    }
}

/// The core/v1 event strategy: legacy validation only, for backward compatibility.
pub struct EventStrategy;

impl Strategy for EventStrategy {
    fn kube_finalizer_names(&self) -> bool {
        false
    }

    /// kube's `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    /// core/v1 event names are only checked as path segments (kube runs no ObjectMeta
    /// validation of its own for legacy events).
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn prepare_for_create(&self, object: &mut Value) {
        fill_core_fields(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        fill_core_fields(object);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        legacy_validate(object, CORE_CONTROLLER_FIELD)
    }

    fn validate_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        legacy_validate(object, CORE_CONTROLLER_FIELD)
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        event_row(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Value {
        json!({
            "metadata": {"namespace": "default", "name": "web.17a", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "message": " pulled image \n", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2020-01-01T00:00:00Z", "lastTimestamp": "2020-01-01T00:00:00Z", "count": 3
        })
    }

    #[test]
    fn row_has_all_columns() {
        let row = event_row(&event());
        assert_eq!(row.len(), columns().len());
        assert_eq!(row[1], "Normal");
        assert_eq!(row[2], "Pulled");
        assert_eq!(row[3], "pod/web");
        assert_eq!(row[4], "spec.containers{app}");
        assert_eq!(row[5], "kubelet, node-1");
        assert_eq!(row[6], "pulled image");
        assert_eq!(row[8], json!(3));
        assert_eq!(row[9], "web.17a");
        assert!(!row_starts_with_name(&def()));
        assert!(row_starts_with_name(&super::super::configmaps::def()));
    }

    #[test]
    fn row_for_new_style_event() {
        let ev = json!({"metadata": {"name": "e"}, "eventTime": "2020-01-01T00:00:00.000000Z",
            "regarding": {"kind": "Node", "name": "n1"}, "note": "x", "reportingController": "ctl", "reportingInstance": "i-1",
            "series": {"count": 7, "lastObservedTime": "2020-01-01T00:00:00.000000Z"}});
        let row = event_row(&ev);
        assert_eq!(row[3], "node/n1");
        assert_eq!(row[5], "ctl, i-1");
        assert_eq!(row[6], "x");
        assert_eq!(row[8], json!(7));
        let singleton = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"}});
        let row = event_row(&singleton);
        assert_eq!(row[0], "<unknown>");
        assert_eq!(row[3], "node");
        assert_eq!(row[8], json!(1));
    }

    #[test]
    fn legacy_namespace_rules() {
        assert!(legacy_validate(&event(), CORE_CONTROLLER_FIELD).is_empty());
        let mut ev = event();
        ev["involvedObject"]["namespace"] = json!("other");
        let causes = legacy_validate(&ev, CORE_CONTROLLER_FIELD);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "involvedObject.namespace");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"other\": does not match event.namespace"
        );
        // A new-style event needs its reporting fields.
        let ev = json!({"metadata": {"namespace": "default", "name": "e"}, "eventTime": "2020-01-01T00:00:00.000000Z",
            "involvedObject": {"namespace": "default"}});
        let fields: Vec<String> = legacy_validate(&ev, CORE_CONTROLLER_FIELD)
            .into_iter()
            .map(|c| c.field)
            .collect();
        for f in [
            "reportingComponent",
            "reportingInstance",
            "action",
            "reason",
        ] {
            assert!(fields.iter().any(|x| x == f), "{f} missing from {fields:?}");
        }
    }

    #[test]
    fn selectors_read_either_shape() {
        let d = def();
        let ev = event();
        let get = |label: &str, o: &Value| d.field_extractor(label).and_then(|f| f(o));
        assert_eq!(get("involvedObject.name", &ev), Some("web".into()));
        assert_eq!(get("source", &ev), Some("kubelet".into()));
        assert_eq!(get("type", &ev), Some("Normal".into()));
        let v1 = json!({"regarding": {"name": "n"}, "reportingController": "ctl"});
        assert_eq!(get("involvedObject.name", &v1), Some("n".into()));
        assert_eq!(get("source", &v1), Some("ctl".into()));
        assert_eq!(get("reason", &v1), Some(String::new()));
    }

    #[test]
    fn core_fields_are_filled() {
        let mut ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod"}});
        EventStrategy.prepare_for_create(&mut ev);
        assert_eq!(ev["reportingComponent"], "");
        assert_eq!(ev["eventTime"], Value::Null);
        assert_eq!(ev["involvedObject"]["kind"], "Pod");
    }
}

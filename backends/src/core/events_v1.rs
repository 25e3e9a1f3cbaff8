//! Events in `events.k8s.io/v1` (`/apis/events.k8s.io/v1/namespaces/{ns}/events`): the
//! same objects as core/v1 events (same storage prefix, see `events`), with their own kind
//! definition, field names (`regarding`, `note`, `reportingController`, `deprecated*`),
//! field selectors and kube's strict validation for writes through this API. Field paths in
//! errors use kube's internal names (`involvedObject`, `firstTimestamp`), as kube reports
//! them.
//!
//! [`to_core`] and [`from_core`] convert between the two shapes; whatever stores events of
//! both versions under one prefix has to apply them so each API reads its own shape.

use std::sync::Arc;

use crate::machinery::schema::cel::netip::go_quote;
use serde_json::{json, Map, Value};

use super::causes::immutable;
use super::events::{columns, event_row, legacy_validate, EventView, EVENTS_STORAGE_PREFIX};
use super::{base_def, Names};
use crate::resource::{FieldExtractor, ResourceDef, Strategy};
use crate::status::{field_invalid, field_required, StatusCause};

/// Field renames between core/v1 (first) and events.k8s.io/v1 (second).
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The events.k8s.io/v1 Event resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "events.k8s.io",
            version: "v1",
            plural: "events",
            singular: "event",
            kind: "Event",
            namespaced: true,
            definition: "io.k8s.api.events.v1.Event",
        },
        Arc::new(EventsV1Strategy),
    );
    def.short_names = vec!["ev".into()];
    // One set of objects with core/v1 events, as in kube.
    def.storage_prefix = EVENTS_STORAGE_PREFIX.into();
    // kube prints both versions through the same (internal) printer.
    def.columns = columns();
    def.field_selectors = field_selectors();
    def
}

fn field_selectors() -> Vec<(&'static str, FieldExtractor)> {
    vec![
        ("regarding.kind", |o| {
            Some(EventView(o).involved("kind").into())
        }),
        ("regarding.namespace", |o| {
            Some(EventView(o).involved("namespace").into())
        }),
        ("regarding.name", |o| {
            Some(EventView(o).involved("name").into())
        }),
        ("regarding.uid", |o| {
            Some(EventView(o).involved("uid").into())
        }),
        ("regarding.apiVersion", |o| {
            Some(EventView(o).involved("apiVersion").into())
        }),
        ("regarding.resourceVersion", |o| {
            Some(EventView(o).involved("resourceVersion").into())
        }),
        ("regarding.fieldPath", |o| {
            Some(EventView(o).involved("fieldPath").into())
        }),
        ("reason", |o| {
            Some(EventView(o).str("reason", "reason").into())
        }),
        ("reportingController", |o| {
            Some(EventView(o).reporting_controller().into())
        }),
        ("source", |o| Some(EventView(o).source().into())),
        ("type", |o| Some(EventView(o).str("type", "type").into())),
    ]
}

fn renamed(object: &Value, api_version: &str, to_v1: bool) -> Value {
    let Some(map) = object.as_object() else {
        return object.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let target = RENAMES
            .iter()
            .find_map(|(core, v1)| match to_v1 {
                true if key == core => Some(*v1),
                false if key == v1 => Some(*core),
                _ => None,
            })
            .unwrap_or(key);
        out.insert(target.to_string(), value.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// A core/v1 Event as events.k8s.io/v1 shows it. Strings and counts v1 omits when empty
/// are dropped; struct fields Go always writes (`regarding`, `deprecatedSource`, the
/// timestamps as null) are present.
pub fn from_core(core: &Value) -> Value {
    let mut v1 = renamed(core, "events.k8s.io/v1", true);
    if let Some(map) = v1.as_object_mut() {
        map.retain(|key, value| match value {
            Value::Null => V1_NULL_WHEN_UNSET.contains(&key.as_str()),
            Value::String(s) => !s.is_empty(),
            Value::Number(n) => !(key == "deprecatedCount" && n.as_i64() == Some(0)),
            _ => true,
        });
    }
    fill_v1_fields(&mut v1);
    v1
}

/// An events.k8s.io/v1 Event as core/v1 shows (and kube stores) it.
pub fn to_core(v1: &Value) -> Value {
    let mut core = renamed(v1, "v1", false);
    if let Some(map) = core.as_object_mut() {
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
    core
}

/// The events.k8s.io/v1 strategy: legacy validation plus kube's strict rules.
pub struct EventsV1Strategy;

impl Strategy for EventsV1Strategy {
    /// kube's `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    // kube stores events.k8s.io/v1 events as core/v1 events (one resource, two versions).
    fn converts_storage(&self) -> bool {
        true
    }

    fn encode_for_storage(&self, object: Value) -> Value {
        to_core(&object)
    }

    fn decode_stored(&self, object: Value) -> Result<Value, crate::status::ApiError> {
        Ok(from_core(&object))
    }

    fn prepare_for_create(&self, object: &mut Value) {
        fill_v1_fields(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        fill_v1_fields(object);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let event = EventView(object);
        let mut causes = legacy_validate(object, "reportingController");
        causes.extend(validate_series(object));
        if event.time("eventTime", "eventTime").is_none() {
            causes.push(field_required("eventTime", ""));
        }
        let kind = event.str("type", "type");
        if kind != "Normal" && kind != "Warning" {
            causes.push(field_invalid(
                "type",
                "",
                &format!("has invalid value: {kind}"),
            ));
        }
        let unset = |field: &str| field_invalid(field, "", "needs to be unset");
        if event
            .time("firstTimestamp", "deprecatedFirstTimestamp")
            .is_some()
        {
            causes.push(unset("firstTimestamp"));
        }
        if event
            .time("lastTimestamp", "deprecatedLastTimestamp")
            .is_some()
        {
            causes.push(unset("lastTimestamp"));
        }
        if event.count() != 0 {
            causes.push(unset("count"));
        }
        let source = event.get("source", "deprecatedSource");
        let set = |key: &str| {
            source
                .and_then(|s| s.get(key))
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if set("component") || set("host") {
            causes.push(unset("source"));
        }
        causes
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let (new_event, old_event) = (EventView(object), EventView(old));
        let mut causes = legacy_validate(object, "reportingController");
        if new_event.get("series", "series") != old_event.get("series", "series") {
            causes.extend(validate_series(object));
        }
        // kube's list, including its repeated `reason`.
        let fields = [
            ("involvedObject", "regarding"),
            ("reason", "reason"),
            ("message", "note"),
            ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"),
            ("lastTimestamp", "deprecatedLastTimestamp"),
            ("count", "deprecatedCount"),
            ("reason", "reason"),
            ("type", "type"),
            ("eventTime", "eventTime"),
            ("action", "action"),
            ("related", "related"),
            ("reportingController", "reportingController"),
            ("reportingInstance", "reportingInstance"),
        ];
        for (core, v1) in fields {
            let pick = |e: &EventView<'_>| {
                if core == "reportingController" {
                    e.get("reportingComponent", v1).cloned()
                } else {
                    e.get(core, v1).cloned()
                }
            };
            let (new, old) = (pick(&new_event), pick(&old_event));
            let cause = immutable(
                core,
                empty_as_none(new.clone()).as_ref(),
                empty_as_none(old).as_ref(),
            );
            // kube prints a struct's value as Go's `%#v` does (a nil pointer as `null`).
            causes.extend(cause.map(|mut cause| {
                let shown = match (core, new.as_ref().filter(|v| !v.is_null())) {
                    ("involvedObject" | "related", Some(reference)) => {
                        Some(go_object_reference(reference))
                    }
                    ("source", source) => Some(go_event_source(source)),
                    _ => None,
                };
                if let Some(shown) = shown {
                    cause.message = format!("Invalid value: {shown}: field is immutable");
                }
                cause
            }));
        }
        causes
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        event_row(object)
    }
}

/// A `core.ObjectReference` as Go's `%#v` prints it.
fn go_object_reference(reference: &Value) -> String {
    let field = |key: &str| go_quote(reference.get(key).and_then(Value::as_str).unwrap_or(""));
    format!(
        "core.ObjectReference{{Kind:{}, Namespace:{}, Name:{}, UID:{}, APIVersion:{}, ResourceVersion:{}, FieldPath:{}}}",
        field("kind"),
        field("namespace"),
        field("name"),
        field("uid"),
        field("apiVersion"),
        field("resourceVersion"),
        field("fieldPath"),
    )
}

/// A `core.EventSource` as Go's `%#v` prints it.
fn go_event_source(source: Option<&Value>) -> String {
    let field = |key: &str| {
        go_quote(
            source
                .and_then(|s| s.get(key))
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
    };
    format!(
        "core.EventSource{{Component:{}, Host:{}}}",
        field("component"),
        field("host")
    )
}

/// Go compares zero values: an omitted string or map equals an empty one.
fn empty_as_none(value: Option<Value>) -> Option<Value> {
    match value {
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(Value::Number(n)) if n.as_i64() == Some(0) => None,
        other => other,
    }
}

fn validate_series(object: &Value) -> Vec<StatusCause> {
    let Some(series) = EventView(object).get("series", "series") else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        causes.push(field_invalid("series.count", "", "should be at least 2"));
    }
    if series
        .get("lastObservedTime")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        causes.push(field_required("series.lastObservedTime", ""));
    }
    causes
}

/// Fields Go always writes for an events.k8s.io/v1 Event, even when unset: zero times
/// serialize as null, and `omitempty` does not apply to structs.
const V1_NULL_WHEN_UNSET: &[&str] = &[
    "eventTime",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
];
const V1_EMPTY_OBJECT_WHEN_UNSET: &[&str] = &["regarding", "deprecatedSource"];

fn fill_v1_fields(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        for key in V1_NULL_WHEN_UNSET {
            map.entry(key.to_string()).or_insert(Value::Null);
        }
        for key in V1_EMPTY_OBJECT_WHEN_UNSET {
            map.entry(key.to_string()).or_insert_with(|| json!({}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1_event() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"namespace": "default", "name": "e1"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
            "action": "Sync", "reason": "Synced", "type": "Normal", "note": "done",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web"}
        })
    }

    #[test]
    fn strict_validation_accepts_a_proper_event() {
        let causes = EventsV1Strategy.validate(&v1_event());
        assert!(causes.is_empty(), "{causes:?}");
    }

    #[test]
    fn strict_validation_refuses_legacy_fields() {
        let mut ev = v1_event();
        ev["type"] = json!("Info");
        ev["deprecatedCount"] = json!(3);
        ev["series"] = json!({"count": 1});
        let causes: Vec<String> = EventsV1Strategy
            .validate(&ev)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert!(
            causes.contains(&"type: Invalid value: \"\": has invalid value: Info".to_string()),
            "{causes:?}"
        );
        assert!(
            causes.contains(&"count: Invalid value: \"\": needs to be unset".to_string()),
            "{causes:?}"
        );
        assert!(
            causes.contains(&"series.count: Invalid value: \"\": should be at least 2".to_string()),
            "{causes:?}"
        );
        assert!(
            causes.contains(&"series.lastObservedTime: Required value".to_string()),
            "{causes:?}"
        );
        let mut ev = v1_event();
        ev.as_object_mut().map(|m| m.remove("eventTime"));
        let fields: Vec<String> = EventsV1Strategy
            .validate(&ev)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert!(fields.contains(&"eventTime".to_string()), "{fields:?}");
    }

    #[test]
    fn update_keeps_fields_immutable() {
        let old = v1_event();
        let mut new = old.clone();
        new["note"] = json!("changed");
        let causes = EventsV1Strategy.validate_update(&new, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "message");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"changed\": field is immutable"
        );
        let mut relabel = old.clone();
        relabel["metadata"]["labels"] = json!({"a": "b"});
        assert!(EventsV1Strategy.validate_update(&relabel, &old).is_empty());
        // A struct's value as Go's %#v prints it.
        let mut moved = old.clone();
        moved["regarding"]["name"] = json!("y");
        let causes = EventsV1Strategy.validate_update(&moved, &old);
        assert_eq!(causes[0].field, "involvedObject");
        assert_eq!(
            causes[0].message,
            "Invalid value: core.ObjectReference{Kind:\"Deployment\", Namespace:\"default\", Name:\"y\", UID:\"\", APIVersion:\"\", ResourceVersion:\"\", FieldPath:\"\"}: field is immutable"
        );
    }

    #[test]
    fn conversion_round_trips() {
        let v1 = v1_event();
        let core = to_core(&v1);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["message"], "done");
        assert_eq!(core["reportingComponent"], "example.com/ctl");
        assert_eq!(core["firstTimestamp"], Value::Null);
        let back = from_core(&core);
        let mut expected = v1.clone();
        fill_v1_fields(&mut expected);
        assert_eq!(back, expected);
        let legacy = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "count": 2, "source": {"component": "kubelet"},
            "reportingComponent": "", "eventTime": null, "firstTimestamp": "2024-01-01T00:00:00Z"});
        let shown = from_core(&legacy);
        assert_eq!(shown["deprecatedCount"], 2);
        assert_eq!(shown["deprecatedSource"]["component"], "kubelet");
        assert_eq!(shown["deprecatedFirstTimestamp"], "2024-01-01T00:00:00Z");
        assert_eq!(shown["eventTime"], Value::Null);
        assert_eq!(shown["regarding"], json!({}));
        assert!(shown.get("reportingController").is_none());
    }

    #[test]
    fn definition_and_selectors() {
        let d = def();
        assert_eq!(d.group, "events.k8s.io");
        assert_eq!(d.storage_prefix, "/core/events");
        let ev = v1_event();
        assert_eq!(
            d.field_extractor("regarding.name").and_then(|f| f(&ev)),
            Some("web".into())
        );
        assert_eq!(
            d.field_extractor("reportingController")
                .and_then(|f| f(&ev)),
            Some("example.com/ctl".into())
        );
        assert_eq!(EventsV1Strategy.table_cells(&ev).len(), d.columns.len());
    }
}

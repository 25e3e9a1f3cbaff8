//! The built-in core resources kube-apiserver serves and kubegate serves the same way:
//! namespaces, configmaps, secrets, serviceaccounts, services, endpoints, events (core/v1
//! and events.k8s.io/v1), RBAC roles and bindings, leases, endpointslices, APIServices and
//! the API Priority and Fairness objects (FlowSchemas, PriorityLevelConfigurations),
//! plus the computed review resources (`authentication`, `authorization`) the gateway adds
//! with its authenticators and authorizers. Each type's module gives its
//! [`ResourceDef`] (names, scope, verbs, subresources, Table columns, field selectors,
//! strategic-merge-patch metadata, storage prefix) and its [`Strategy`] (kube's
//! `strategy.go` defaulting plus `validation.go` checks, with kube's field paths and
//! messages). This module holds what they share: the resource list, Age formatting as
//! `kubectl get` shows it, and small JSON accessors.

pub mod apiregistration;
mod apiregistration_validation;
pub mod authentication;
pub mod authorization;
pub mod b64;
pub(crate) mod causes;
pub mod configmaps;
pub mod crd;
pub mod crd_conversion;
pub mod crd_status;
mod crd_validation;
pub mod custom_resource;
pub mod endpoints;
pub mod endpointslices;
pub mod events;
pub mod events_v1;
pub mod flowcontrol;
pub mod flowcontrol_bootstrap;
mod flowcontrol_validation;
mod gojson;
pub mod leases;
pub mod namespaces;
mod netutil;
pub mod rbac;
mod rbac_validation;
pub mod secrets;
pub mod service_allocations;
pub mod serviceaccounts;
pub mod services;
mod services_alloc;
mod services_ip_rules;
mod services_validation;
pub mod tokenrequest;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::resource::{ResourceDef, Strategy, STANDARD_VERBS};

pub use configmaps::def as configmap_def;
pub use endpoints::def as endpoints_def;
pub use endpointslices::def as endpointslice_def;
pub use events::def as event_def;
pub use events_v1::def as events_v1_event_def;
pub(crate) use gojson::go_syntax_strings as gojson_strings;
pub use leases::def as lease_def;
pub use namespaces::def as namespace_def;
pub use secrets::def as secret_def;
pub use serviceaccounts::def as serviceaccount_def;
pub use services::def as service_def;

/// Every built-in resource, in the order discovery lists them.
pub fn builtin_resources() -> Vec<ResourceDef> {
    vec![
        namespaces::def(),
        configmaps::def(),
        secrets::def(),
        serviceaccounts::def(),
        services::def(),
        endpoints::def(),
        events::def(),
        // apiregistration.k8s.io ranks right after the core group in kube's group priorities.
        apiregistration::def(),
        events_v1::def(),
        // rbac.authorization.k8s.io ranks between events.k8s.io and coordination.k8s.io in
        // kube's group priorities.
        rbac::clusterrolebindings_def(),
        rbac::clusterroles_def(),
        rbac::rolebindings_def(),
        rbac::roles_def(),
        // apiextensions.k8s.io (16700) ranks between rbac.authorization.k8s.io (17000) and
        // coordination.k8s.io (16500).
        crd::def(),
        leases::def(),
        endpointslices::def(),
        // flowcontrol.apiserver.k8s.io (16100) ranks right after discovery.k8s.io (16200).
        flowcontrol::flowschemas_def(),
        flowcontrol::prioritylevelconfigurations_def(),
    ]
}

/// The naming facts of one resource; [`base_def`] fills in what every type shares.
pub(crate) struct Names {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// The OpenAPI definition name (`io.k8s.api.core.v1.ConfigMap`).
    pub definition: &'static str,
}

/// A [`ResourceDef`] with the standard verbs, `<Kind>List`, the storage prefix
/// `/<group or "core">/<plural>` and nothing type-specific; callers set the rest.
pub(crate) fn base_def(names: Names, strategy: Arc<dyn Strategy>) -> ResourceDef {
    let group_dir = if names.group.is_empty() {
        "core"
    } else {
        names.group
    };
    ResourceDef {
        group: names.group.into(),
        version: names.version.into(),
        plural: names.plural.into(),
        singular: names.singular.into(),
        kind: names.kind.into(),
        list_kind: format!("{}List", names.kind),
        short_names: Vec::new(),
        categories: Vec::new(),
        namespaced: names.namespaced,
        verbs: STANDARD_VERBS.to_vec(),
        subresources: Vec::new(),
        definition: names.definition.into(),
        columns: Vec::new(),
        field_selectors: Vec::new(),
        patch_meta: &[],
        storage_prefix: format!("/{group_dir}/{}", names.plural),
        strategy,
        virtual_handler: None,
        subresource_handlers: Vec::new(),
        admission: None,
        openapi_schema: None,
        field_model: Default::default(),
        go_shaper: Default::default(),
    }
}

/// The value at a JSON pointer as a string, `""` when absent or not a string (Go's zero
/// value, which is what kube's field selectors and printers see for an unset field).
pub(crate) fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `str_at` as an owned value, the shape field-selector extractors return.
pub(crate) fn field_at(object: &Value, pointer: &str) -> Option<String> {
    Some(str_at(object, pointer).to_string())
}

/// The object's namespace and name (`""` when unset).
pub(crate) fn namespace_and_name(object: &Value) -> (&str, &str) {
    (
        str_at(object, "/metadata/namespace"),
        str_at(object, "/metadata/name"),
    )
}

/// The JSON object under `key`, created (or replaced, when it is not an object) so callers
/// can default fields inside it.
pub(crate) fn child_object<'a>(
    parent: &'a mut Value,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let map = parent.as_object_mut()?;
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

/// A JSON object's entries, or none when the value is absent or not an object.
pub(crate) fn entries(value: Option<&Value>) -> Vec<(&String, &Value)> {
    value
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default()
}

/// A JSON array's items, or none when the value is absent or not an array.
pub(crate) fn items(value: Option<&Value>) -> &[Value] {
    value
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Number of entries in a map or list field (kube's `len()` of a nil map is 0).
pub(crate) fn len_at(object: &Value, pointer: &str) -> usize {
    match object.pointer(pointer) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// Treats an absent field, `null` and an empty map or list alike: Go decodes all of them
/// to an empty value, so kube's `DeepEqual` immutability checks cannot tell them apart.
pub(crate) fn same_collection(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn normalized(v: Option<&Value>) -> Option<&Value> {
        match v {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) if m.is_empty() => None,
            Some(Value::Array(a)) if a.is_empty() => None,
            other => other,
        }
    }
    normalized(a) == normalized(b)
}

/// The AGE cell kube's printers compute (`translateTimestampSince(creationTimestamp)`).
pub fn age(object: &Value) -> String {
    age_at(object, Utc::now())
}

/// [`age`] against a given clock, for tests and for consistent rows within one response.
pub fn age_at(object: &Value, now: DateTime<Utc>) -> String {
    translate_timestamp_since(object.pointer("/metadata/creationTimestamp"), now)
}

/// kube's `translateTimestampSince`: `<unknown>` for an unset or unparsable timestamp,
/// otherwise the elapsed time as [`human_duration`].
pub fn translate_timestamp_since(timestamp: Option<&Value>, now: DateTime<Utc>) -> String {
    let parsed = timestamp
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok());
    match parsed {
        Some(t) => human_duration(now.signed_duration_since(t.with_timezone(&Utc))),
        None => "<unknown>".into(),
    }
}

/// apimachinery's `duration.HumanDuration`: about two significant figures (`45s`, `5m3s`,
/// `3h10m`, `2d4h`, `1y20d`), `0s` for up to a second in the future (clock skew) and
/// `<invalid>` beyond that.
pub fn human_duration(d: chrono::Duration) -> String {
    let millis = d.num_milliseconds();
    // Go's int(d.Seconds()) truncates toward zero, as integer division does here.
    let seconds = millis / 1000;
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;
    use serde_json::json;

    #[test]
    fn human_duration_matches_apimachinery() {
        let cases = [
            (Duration::milliseconds(-2500), "<invalid>"),
            (Duration::milliseconds(-1500), "0s"),
            (Duration::seconds(0), "0s"),
            (Duration::seconds(119), "119s"),
            (Duration::seconds(120), "2m"),
            (Duration::seconds(303), "5m3s"),
            (Duration::minutes(10), "10m"),
            (Duration::minutes(179), "179m"),
            (Duration::minutes(190), "3h10m"),
            (Duration::hours(5), "5h"),
            (Duration::hours(47), "47h"),
            (Duration::hours(52), "2d4h"),
            (Duration::hours(72), "3d"),
            (Duration::days(300), "300d"),
            (Duration::days(365 * 2 + 20), "2y20d"),
            (Duration::days(365 * 3), "3y"),
            (Duration::days(365 * 9), "9y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn age_uses_creation_timestamp() {
        let now = DateTime::parse_from_rfc3339("2024-05-01T10:05:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("valid time");
        let obj = json!({"metadata": {"creationTimestamp": "2024-05-01T10:00:00Z"}});
        assert_eq!(age_at(&obj, now), "5m");
        assert_eq!(age_at(&json!({"metadata": {}}), now), "<unknown>");
    }

    /// Negotiation answers a client's first preference, protobuf included, for every kind
    /// that has a protobuf form; every built-in kind has one, as in kube (client-go's typed
    /// clients ask for protobuf first).
    #[test]
    fn every_builtin_kind_has_a_protobuf_form() {
        let missing: Vec<String> = builtin_resources()
            .iter()
            .filter(|def| !def.has_protobuf())
            .map(|def| format!("{} {}", def.api_version(), def.kind))
            .collect();
        assert!(missing.is_empty(), "no protobuf form: {missing:?}");
    }

    #[test]
    fn builtin_resources_have_kube_names() {
        let defs = builtin_resources();
        let find = |group: &str, plural: &str| {
            defs.iter()
                .find(|d| d.group == group && d.plural == plural)
                .unwrap_or_else(|| panic!("{group}/{plural} missing"))
        };
        assert_eq!(find("", "configmaps").short_names, vec!["cm"]);
        assert_eq!(find("", "services").categories, vec!["all"]);
        assert!(!find("", "namespaces").namespaced);
        assert_eq!(find("", "secrets").storage_prefix, "/core/secrets");
        assert_eq!(
            find("coordination.k8s.io", "leases").storage_prefix,
            "/coordination.k8s.io/leases"
        );
        // Both event resources are one set of objects, as in kube.
        assert_eq!(
            find("events.k8s.io", "events").storage_prefix,
            "/core/events"
        );
        assert_eq!(find("", "events").storage_prefix, "/core/events");
        assert_eq!(
            find("events.k8s.io", "events").definition,
            "io.k8s.api.events.v1.Event"
        );
        for d in &defs {
            assert!(!d.columns.is_empty(), "{} has no columns", d.plural);
        }
    }

    /// kube's `AllowCreateOnUpdate` and `AllowUnconditionalUpdate` per built-in kind (their
    /// registry strategies in kubernetes/pkg/registry).
    #[test]
    fn creates_on_update_and_unconditional_updates_as_kube() {
        let mut creating: Vec<String> = Vec::new();
        let mut conditional: Vec<String> = Vec::new();
        for d in builtin_resources() {
            let name = format!("{}.{}", d.plural, d.group);
            if d.strategy.allow_create_on_update() {
                creating.push(name.clone());
            }
            if !d.strategy.allow_unconditional_update() {
                conditional.push(name);
            }
        }
        creating.sort();
        creating.dedup();
        conditional.sort();
        conditional.dedup();
        assert_eq!(
            creating,
            [
                "clusterrolebindings.rbac.authorization.k8s.io",
                "clusterroles.rbac.authorization.k8s.io",
                "endpoints.",
                "events.",
                "events.events.k8s.io",
                "leases.coordination.k8s.io",
                "rolebindings.rbac.authorization.k8s.io",
                "roles.rbac.authorization.k8s.io",
                "services.",
            ]
        );
        assert_eq!(
            conditional,
            [
                "apiservices.apiregistration.k8s.io",
                "customresourcedefinitions.apiextensions.k8s.io",
                "leases.coordination.k8s.io"
            ]
        );
    }
}

//! Namespaces (`/api/v1/namespaces`, cluster-scoped, short name `ns`): kube's namespace
//! strategy. A new namespace is `Active` and carries the `kubernetes` finalizer in
//! `spec.finalizers` (the namespace controller removes it through `finalize` once the
//! namespace's content is gone); `spec.finalizers` and `status` cannot be changed by a
//! plain update; every namespace is labelled `kubernetes.io/metadata.name=<name>`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{age, base_def, child_object, field_at, items, str_at, Names};
use crate::machinery::validation::{is_qualified_name, NameRule};
use crate::resource::{
    age_column, name_column, ResourceDef, Strategy, SubresourceDef, TableColumn,
};
use crate::status::{field_invalid, StatusCause};

/// The finalizer the namespace controller owns (`api.FinalizerKubernetes`).
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// The label kube sets on every namespace to its own name (`v1.LabelMetadataName`).
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Finalizer names that need no domain prefix (`helper.IsStandardFinalizerName`).
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// The Namespace resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "namespaces",
            singular: "namespace",
            kind: "Namespace",
            namespaced: false,
            definition: "io.k8s.api.core.v1.Namespace",
        },
        Arc::new(NamespaceStrategy),
    );
    // kube serves no deletecollection on namespaces.
    def.verbs = vec![
        "create", "delete", "get", "list", "patch", "update", "watch",
    ];
    def.short_names = vec!["ns".into()];
    def.subresources = vec![
        SubresourceDef {
            name: "finalize",
            kind: "Namespace".into(),
            verbs: vec!["update"],
        },
        SubresourceDef {
            name: "status",
            kind: "Namespace".into(),
            verbs: vec!["get", "patch", "update"],
        },
    ];
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Status".into(),
            type_: "string".into(),
            format: "".into(),
            description: "The status of the namespace".into(),
            priority: 0,
        },
        age_column(),
    ];
    // kube's field label conversion for Namespace takes these two (its selectable fields
    // also carry `name`, which the conversion refuses first: `field label not supported`).
    def.field_selectors = vec![("status.phase", |o| field_at(o, "/status/phase"))];
    def.patch_meta = &[("status.conditions", "merge", "type")];
    def
}

/// kube's `namespaceStrategy` (plus its status and finalize variants).
pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    /// kube adds the `kubernetes` finalizer in PrepareForCreate, after the field manager.
    fn server_assigned_fields(&self, _object: &Value) -> Vec<String> {
        vec!["/spec/finalizers".to_string()]
    }

    fn prepare_for_create(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({"phase": "Active"}));
        }
        // The kubernetes finalizer is required at creation only; it is removed over the
        // namespace's life, so it is not a default applied on every write.
        if let Some(spec) = child_object(object, "spec") {
            let list = spec.entry("finalizers").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            if let Some(list) = list.as_array_mut() {
                if !list
                    .iter()
                    .any(|f| f.as_str() == Some(FINALIZER_KUBERNETES))
                {
                    list.push(json!(FINALIZER_KUBERNETES));
                }
            }
        }
        set_name_label(object);
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        // Only the finalize subresource may change spec.finalizers, only status may change
        // status.
        copy_from_old(object, old, "/spec/finalizers");
        if let Some(map) = object.as_object_mut() {
            match old.get("status") {
                Some(s) => map.insert("status".into(), s.clone()),
                None => map.remove("status"),
            };
        }
        set_name_label(object);
    }

    /// kube's namespace status strategy resets only `spec`: metadata written through
    /// `/status` is kept.
    fn prepare_for_status_update(&self, object: &mut Value, old: &Value) {
        crate::resource::keep_old_spec(object, old);
        set_name_label(object);
        // SetDefaults_NamespaceStatus runs on every decode.
        if let Some(status) = child_object(object, "status") {
            if status
                .get("phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                status.insert("phase".into(), json!("Active"));
            }
        }
        set_name_label(object);
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Label
    }

    fn begin_delete(&self, object: &mut Value) -> bool {
        // kube's namespace REST switches the phase on the first delete request, then waits
        // for spec.finalizers to empty (the namespace controller's work).
        if let Some(status) = child_object(object, "status") {
            status.insert("phase".into(), json!("Terminating"));
        }
        !items(object.pointer("/spec/finalizers")).is_empty()
    }

    fn ready_to_delete(&self, object: &Value) -> bool {
        items(object.pointer("/spec/finalizers")).is_empty()
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_finalizers(object, false)
    }

    fn validate_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        validate_finalizers(object, false)
    }

    /// kube's PodSecurity admission (on by default, after validation): a namespace's
    /// `pod-security.kubernetes.io/*` labels must name a level and a version, checked on
    /// create and on an update that changes what they say.
    fn begin_write(
        &self,
        object: &Value,
        old: Option<&Value>,
    ) -> Result<(), crate::status::ApiError> {
        let errors = pod_security_label_errors(object);
        if errors.is_empty() || old.is_some_and(|old| pod_security_label_errors(old) == errors) {
            return Ok(());
        }
        Err(crate::status::ApiError::invalid(
            "",
            "Namespace",
            str_at(object, "/metadata/name"),
            errors,
        ))
    }

    /// kube's `ValidateNamespaceStatusUpdate`: the phase follows `deletionTimestamp`.
    fn validate_status_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        let phase = str_at(object, "/status/phase");
        let deleting = object
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        match (deleting, phase) {
            (false, "Active") | (true, "Terminating") => Vec::new(),
            (false, _) => vec![field_invalid(
                "status.Phase",
                phase,
                "may only be 'Active' if `deletionTimestamp` is empty",
            )],
            (true, _) => vec![field_invalid(
                "status.Phase",
                phase,
                "may only be 'Terminating' if `deletionTimestamp` is not empty",
            )],
        }
    }

    /// kube's `ValidateNamespaceFinalizeUpdate`: finalizer errors at their index.
    fn validate_finalize_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        validate_finalizers(object, true)
    }

    /// kube's finalize strategy takes the request's object but for its status.
    fn prepare_for_finalize(&self, object: &mut Value, old: &Value) {
        if let Some(map) = object.as_object_mut() {
            match old.get("status") {
                Some(s) => map.insert("status".into(), s.clone()),
                None => map.remove("status"),
            };
        }
        set_name_label(object);
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(str_at(object, "/status/phase")), json!(age(object))]
    }
}

/// `ValidateNamespaceFinalizeUpdate`'s checks, which (unlike create and update) name each
/// list entry's index in the field path.
pub fn validate_finalize(object: &Value) -> Vec<StatusCause> {
    validate_finalizers(object, true)
}

fn validate_finalizers(object: &Value, indexed: bool) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    for (i, finalizer) in items(object.pointer("/spec/finalizers")).iter().enumerate() {
        let field = if indexed {
            format!("spec.finalizers[{i}]")
        } else {
            "spec.finalizers".to_string()
        };
        let name = finalizer.as_str().unwrap_or("");
        for message in is_qualified_name(name) {
            causes.push(field_invalid(&field, name, &message));
        }
        if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
            causes.push(field_invalid(
                &field,
                name,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    causes
}

/// Sets `kubernetes.io/metadata.name` to the object's name (kube's `SetDefaults_Namespace`
/// and `Canonicalize`); a nameless object (generateName not yet resolved) is left alone.
fn set_name_label(object: &mut Value) {
    let name = str_at(object, "/metadata/name").to_string();
    if name.is_empty() {
        return;
    }
    if let Some(labels) = child_object(object, "metadata").and_then(|m| {
        let entry = m.entry("labels").or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        entry.as_object_mut()
    }) {
        labels.insert(NAME_LABEL.into(), json!(name));
    }
}

/// Replaces the value at `pointer` (under `spec`) with the old object's, or removes it.
fn copy_from_old(object: &mut Value, old: &Value, pointer: &str) {
    let key = pointer.rsplit('/').next().unwrap_or("");
    let previous = old.pointer(pointer).cloned();
    match previous {
        Some(v) => {
            if let Some(spec) = child_object(object, "spec") {
                spec.insert(key.into(), v);
            }
        }
        None => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove(key);
            }
        }
    }
}

/// The PodSecurity labels, in the order kube's `PolicyToEvaluate` reads them: whether each
/// names a level (else a version).
const POD_SECURITY_LABELS: [(&str, bool); 6] = [
    ("pod-security.kubernetes.io/enforce", true),
    ("pod-security.kubernetes.io/enforce-version", false),
    ("pod-security.kubernetes.io/audit", true),
    ("pod-security.kubernetes.io/audit-version", false),
    ("pod-security.kubernetes.io/warn", true),
    ("pod-security.kubernetes.io/warn-version", false),
];

/// kube's `PolicyToEvaluate` errors for a namespace's PodSecurity labels.
fn pod_security_label_errors(object: &Value) -> Vec<StatusCause> {
    let Some(labels) = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for (label, is_level) in POD_SECURITY_LABELS {
        let Some(value) = labels.get(label) else {
            continue;
        };
        let value = value.as_str().unwrap_or("");
        let error = if is_level {
            (!matches!(value, "privileged" | "baseline" | "restricted"))
                .then_some("must be one of privileged, baseline, restricted")
        } else {
            (!is_pod_security_version(value)).then_some(r#"must be "latest" or "v1.x""#)
        };
        if let Some(error) = error {
            errors.push(field_invalid(
                &format!("metadata.labels[{label}]"),
                value,
                error,
            ));
        }
    }
    errors
}

/// `latest` or `v1.<minor>` (kube's `^v1\.([0-9]|[1-9][0-9]*)$`, within `int`).
fn is_pod_security_version(value: &str) -> bool {
    if value == "latest" {
        return true;
    }
    let Some(minor) = value.strip_prefix("v1.") else {
        return false;
    };
    !minor.is_empty()
        && minor.bytes().all(|b| b.is_ascii_digit())
        && (minor == "0" || !minor.starts_with('0'))
        && minor.parse::<i64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_security_labels_name_a_level_and_a_version() {
        let ns = |labels: Value| json!({"metadata": {"name": "t1", "labels": labels}});
        let bad = ns(json!({
            "pod-security.kubernetes.io/warn": "nope",
            "pod-security.kubernetes.io/enforce": "bogus",
            "pod-security.kubernetes.io/enforce-version": "v1.05",
        }));
        let error = NamespaceStrategy
            .begin_write(&bad, None)
            .expect_err("invalid labels");
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            r#"Namespace "t1" is invalid: [metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted, metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "v1.05": must be "latest" or "v1.x", metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "nope": must be one of privileged, baseline, restricted]"#
        );
        // An update that leaves the same errors is let through (kube checks changes only).
        assert!(NamespaceStrategy.begin_write(&bad, Some(&bad)).is_ok());
        let fine = ns(json!({
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "v1.33",
            "pod-security.kubernetes.io/audit-version": "latest",
            "pod-security.kubernetes.io/warn-version": "v1.0",
        }));
        assert!(NamespaceStrategy.begin_write(&fine, None).is_ok());
        assert!(NamespaceStrategy.begin_write(&bad, Some(&fine)).is_err());
    }

    #[test]
    fn create_defaults_phase_finalizer_and_label() {
        let mut ns = json!({"metadata": {"name": "team-a"}, "status": {"phase": "Terminating"}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["metadata"]["labels"][NAME_LABEL], "team-a");

        let mut ns = json!({"metadata": {"name": "b"}, "spec": {"finalizers": ["example.com/x"]}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["example.com/x", "kubernetes"])
        );
    }

    #[test]
    fn update_keeps_status_and_finalizers() {
        let old = json!({"metadata": {"name": "a", "labels": {NAME_LABEL: "a"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let mut new = json!({"metadata": {"name": "a", "labels": {"team": "x"}},
            "spec": {}, "status": {"phase": "Terminating"}});
        NamespaceStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(new["status"]["phase"], "Active");
        assert_eq!(
            new["metadata"]["labels"],
            json!({"team": "x", NAME_LABEL: "a"})
        );
    }

    #[test]
    fn status_update_keeps_the_old_spec_only() {
        // kube's namespace status strategy resets `spec`; metadata comes from the request.
        let old = json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let mut new = json!({"metadata": {"name": "a", "resourceVersion": "5", "labels": {"z": "1"}},
            "spec": {}, "status": {}});
        NamespaceStrategy.prepare_for_status_update(&mut new, &old);
        assert_eq!(new["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(new["status"]["phase"], "Active");
        assert_eq!(new["metadata"]["resourceVersion"], "5");
        assert_eq!(
            new["metadata"]["labels"],
            json!({"z": "1", "kubernetes.io/metadata.name": "a"})
        );
    }

    #[test]
    fn delete_waits_for_spec_finalizers() {
        let mut ns = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        assert!(NamespaceStrategy.begin_delete(&mut ns));
        assert_eq!(ns["status"]["phase"], "Terminating");
        assert!(!NamespaceStrategy.ready_to_delete(&ns));
        let mut empty = json!({"metadata": {"name": "a"}, "spec": {}});
        assert!(!NamespaceStrategy.begin_delete(&mut empty));
        assert!(NamespaceStrategy.ready_to_delete(&empty));
    }

    #[test]
    fn finalizer_names_are_validated() {
        let ns =
            json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes", "custom"]}});
        let causes = NamespaceStrategy.validate(&ns);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.finalizers");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
        );
        assert_eq!(validate_finalize(&ns)[0].field, "spec.finalizers[1]");
    }

    #[test]
    fn table_and_selectors() {
        let ns = json!({"metadata": {"name": "a", "creationTimestamp": "2020-01-01T00:00:00Z"}, "status": {"phase": "Active"}});
        let cells = NamespaceStrategy.table_cells(&ns);
        assert_eq!(cells[0], "Active");
        let d = def();
        assert_eq!(d.columns.len(), 3);
        assert_eq!(
            d.field_extractor("status.phase").and_then(|f| f(&ns)),
            Some("Active".into())
        );
        assert!(!d.supports_verb("deletecollection"));
        assert!(d.has_subresource("finalize"));
        // kube's field label conversion refuses `name` for namespaces.
        assert!(d.field_extractor("name").is_none());
    }

    /// kube's `ValidateNamespaceStatusUpdate` and `ValidateNamespaceFinalizeUpdate`, and the
    /// finalize strategy taking the request's object but for its status.
    #[test]
    fn status_and_finalize_writes_have_kubes_rules() {
        let old = json!({"metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let fields = |causes: Vec<StatusCause>| -> Vec<String> {
            causes
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        };
        let with_phase = |phase: &str, deleting: bool| {
            let mut ns = old.clone();
            ns["status"]["phase"] = json!(phase);
            if deleting {
                ns["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            ns
        };
        let strategy = NamespaceStrategy;
        assert!(strategy
            .validate_subresource_update("status", &with_phase("Active", false), &old)
            .is_empty());
        assert_eq!(
            fields(strategy.validate_subresource_update("status", &with_phase("Terminating", false), &old)),
            ["status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"]
        );
        assert_eq!(
            fields(strategy.validate_subresource_update("status", &with_phase("Active", true), &old)),
            ["status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"]
        );

        let mut finalize = json!({"metadata": {"name": "a", "annotations": {"a": "b"}},
            "spec": {"finalizers": ["kubernetes", "bad finalizer"]}, "status": {"phase": "Bogus"}});
        strategy.prepare_for_finalize(&mut finalize, &old);
        assert_eq!(finalize["metadata"]["annotations"], json!({"a": "b"}));
        assert!(
            finalize["metadata"]["labels"].get("x").is_none(),
            "{finalize}"
        );
        assert_eq!(finalize["status"], json!({"phase": "Active"}));
        let causes = fields(strategy.validate_subresource_update("finalize", &finalize, &old));
        assert!(
            !causes.is_empty() && causes.iter().all(|c| c.starts_with("spec.finalizers[1]: ")),
            "{causes:?}"
        );
    }
}

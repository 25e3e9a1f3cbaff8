//! CustomResourceDefinitions (`/apis/apiextensions.k8s.io/v1/customresourcedefinitions`,
//! cluster-scoped, short names `crd`/`crds`, category `api-extensions`) with their `status`
//! subresource, served as apiextensions-apiserver serves them
//! (`pkg/registry/customresourcedefinition/strategy.go`): a create resets `status` to empty
//! accepted names and records the storage version in `status.storedVersions`, an update keeps
//! the stored `status` (adding a new storage version to `storedVersions`) and bumps
//! `metadata.generation` only when the spec changes, a status update keeps the stored spec
//! and metadata. kube's v1 defaults apply (`names.singular`, `names.listKind`,
//! `conversion.strategy: None`, webhook service port 443). The Table has kube's columns
//! (NAME, CREATED AT).
//!
//! Validation is in `crd_validation`, the status conditions the controllers set in
//! `crd_status`, and the schema machinery custom resources need in
//! [`crate::machinery::schema`]. Serving the resources a CRD defines is not done here.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::crd_status::ensure_stored_version;
use super::crd_validation::{validate_crd, validate_crd_status_update, validate_crd_update};
use super::gojson::GoJson;
use super::{base_def, child_object, str_at, Names};
use crate::resource::{name_column, ResourceDef, Strategy, SubresourceDef, TableColumn};
use crate::status::{ApiError, StatusCause};

pub use super::crd_validation::API_APPROVED_ANNOTATION;

/// The API group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";

/// The finalizer kube puts on a CRD being deleted until its instances are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The CustomResourceDefinition resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: GROUP,
            version: "v1",
            plural: "customresourcedefinitions",
            singular: "customresourcedefinition",
            kind: "CustomResourceDefinition",
            namespaced: false,
            definition:
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        },
        Arc::new(CrdStrategy),
    );
    def.short_names = vec!["crd".into(), "crds".into()];
    def.categories = vec!["api-extensions".into()];
    def.subresources = vec![SubresourceDef {
        name: "status",
        kind: "CustomResourceDefinition".into(),
        verbs: vec!["get", "patch", "update"],
    }];
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Created At".into(),
            type_: "date".into(),
            format: "".into(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
            priority: 0,
        },
    ];
    def
}

/// apiextensions-apiserver's CRD `strategy` and `statusStrategy`.
pub struct CrdStrategy;

impl Strategy for CrdStrategy {
    fn kube_finalizer_names(&self) -> bool {
        false
    }

    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        check_types(object)?;
        // `caBundle` is a Go `[]byte`: a value that is not base64 fails decoding (400).
        if let Some(Value::String(bundle)) =
            object.pointer("/spec/conversion/webhook/clientConfig/caBundle")
        {
            super::b64::decode_std(bundle)
                .map_err(|at| super::b64::decode_error("CustomResourceDefinition", at))?;
        }
        Ok(())
    }

    fn prepare_for_create(&self, object: &mut Value) {
        set_defaults(object);
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), empty_status());
        }
        ensure_stored_version(object);
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        set_defaults(object);
        if let Some(map) = object.as_object_mut() {
            let status = old.get("status").cloned().unwrap_or_else(empty_status);
            map.insert("status".into(), status);
        }
        ensure_stored_version(object);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_crd(object)
    }

    /// kube validates the spec on an update of the main resource and the status on an update
    /// of `status`; each carries the other part over from the stored object, so checking both
    /// is the same.
    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        validate_crd_update(object, old)
    }

    /// A `status` write is checked as kube's ValidateUpdateCustomResourceDefinitionStatus
    /// checks it: the accepted names only (stored versions are the server's own record).
    fn validate_status_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        validate_crd_status_update(object)
    }

    /// kube's custom resource and CRD strategies refuse an update that names no
    /// resourceVersion.
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    /// kube's CRD registry `Delete`: the CRD stays, `Terminating`, with the cleanup
    /// finalizer until the finalizer controller has deleted its instances.
    fn begin_delete(&self, object: &mut Value) -> bool {
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            return false;
        };
        let finalizers = meta
            .entry("finalizers")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(list) = finalizers.as_array_mut() {
            if !list.iter().any(|f| f.as_str() == Some(CLEANUP_FINALIZER)) {
                list.push(json!(CLEANUP_FINALIZER));
            }
        }
        let now = crate::registry::now_rfc3339();
        super::crd_status::set_condition(
            object,
            &super::crd_status::terminating_condition(super::crd_status::Termination::Pending, ""),
            &now,
        );
        true
    }

    /// CREATED AT: the creation time in RFC 3339, UTC (kube's default table convertor).
    fn table_cells(&self, object: &Value) -> Vec<Value> {
        let created = str_at(object, "/metadata/creationTimestamp");
        let cell = chrono::DateTime::parse_from_rfc3339(created)
            .map(|t| {
                t.with_timezone(&chrono::Utc)
                    .format("%Y-%m-%dT%H:%M:%SZ")
                    .to_string()
            })
            .unwrap_or_else(|_| created.to_string());
        vec![json!(cell)]
    }
}

/// The status kube stores for a new CRD: no accepted names yet (`plural` and `kind` are not
/// `omitempty` in Go, so they appear empty).
fn empty_status() -> Value {
    json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []})
}

/// kube's v1 `SetDefaults_CustomResourceDefinitionSpec` and `SetDefaults_ServiceReference`,
/// plus the fields Go always serializes (`served`, `storage`).
pub fn set_defaults(crd: &mut Value) {
    let Some(spec) = child_object(crd, "spec") else {
        return;
    };
    let names = spec
        .entry("names")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(names) = names.as_object_mut() {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let empty = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").is_empty();
        if empty(names.get("singular")) {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if empty(names.get("listKind")) && !kind.is_empty() {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    if spec.get("conversion").is_none_or(Value::is_null) {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
    if let Some(service) = spec
        .get_mut("conversion")
        .and_then(|c| c.get_mut("webhook"))
        .and_then(|w| w.get_mut("clientConfig"))
        .and_then(|c| c.get_mut("service"))
        .and_then(Value::as_object_mut)
    {
        if service.get("port").is_none_or(Value::is_null) {
            service.insert("port".into(), json!(443));
        }
    }
    if let Some(versions) = spec.get_mut("versions").and_then(Value::as_array_mut) {
        for v in versions.iter_mut().filter_map(Value::as_object_mut) {
            for flag in ["served", "storage"] {
                if !v.get(flag).is_some_and(Value::is_boolean) {
                    v.insert(flag.into(), json!(false));
                }
            }
            if let Some(schema) = v
                .get_mut("schema")
                .and_then(|s| s.get_mut("openAPIV3Schema"))
            {
                drop_null_defaults(schema);
            }
        }
    }
}

/// `default: null` in a schema decodes to Go's nil `*JSON` and is not stored; the schema's own
/// nodes are walked (never a default's or an example's value, where a null is data).
fn drop_null_defaults(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    if node.get("default").is_some_and(Value::is_null) {
        node.remove("default");
    }
    for key in [
        "properties",
        "patternProperties",
        "definitions",
        "dependencies",
    ] {
        if let Some(children) = node.get_mut(key).and_then(Value::as_object_mut) {
            children.values_mut().for_each(drop_null_defaults);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(children) = node.get_mut(key).and_then(Value::as_array_mut) {
            children.iter_mut().for_each(drop_null_defaults);
        }
    }
    for key in ["not", "additionalProperties", "additionalItems"] {
        if let Some(child) = node.get_mut(key).filter(|c| c.is_object()) {
            drop_null_defaults(child);
        }
    }
    match node.get_mut("items") {
        Some(Value::Array(children)) => children.iter_mut().for_each(drop_null_defaults),
        Some(child @ Value::Object(_)) => drop_null_defaults(child),
        _ => {}
    }
}

/// Go's typed decoding of the fields the strategy and validation read: a wrong JSON type is
/// a 400, as kube's decoder answers it.
fn check_types(object: &Value) -> Result<(), ApiError> {
    let go = GoJson::new("CustomResourceDefinition");
    let Some(spec) = go.object(
        object.get("spec"),
        "CustomResourceDefinition",
        "spec",
        "v1.CustomResourceDefinitionSpec",
    )?
    else {
        return Ok(());
    };
    let s = "CustomResourceDefinitionSpec";
    go.string(spec.get("group"), s, "spec.group")?;
    go.typed_string(spec.get("scope"), s, "spec.scope", "v1.ResourceScope")?;
    go.boolean(
        spec.get("preserveUnknownFields"),
        s,
        "spec.preserveUnknownFields",
    )?;
    if let Some(names) = go.object(
        spec.get("names"),
        s,
        "spec.names",
        "v1.CustomResourceDefinitionNames",
    )? {
        let n = "CustomResourceDefinitionNames";
        for field in ["plural", "singular", "kind", "listKind"] {
            go.string(names.get(field), n, &format!("spec.names.{field}"))?;
        }
        for field in ["shortNames", "categories"] {
            go.strings(
                names.get(field),
                n,
                &format!("spec.names.{field}"),
                "[]string",
            )?;
        }
    }
    for version in go.array(
        spec.get("versions"),
        s,
        "spec.versions",
        "[]v1.CustomResourceDefinitionVersion",
    )? {
        let v = "CustomResourceDefinitionVersion";
        let Some(version) = go.object(
            Some(version),
            s,
            "spec.versions",
            "v1.CustomResourceDefinitionVersion",
        )?
        else {
            continue;
        };
        go.string(version.get("name"), v, "spec.versions.name")?;
        go.boolean(version.get("served"), v, "spec.versions.served")?;
        go.boolean(version.get("storage"), v, "spec.versions.storage")?;
        go.boolean(version.get("deprecated"), v, "spec.versions.deprecated")?;
        go.string(
            version.get("deprecationWarning"),
            v,
            "spec.versions.deprecationWarning",
        )?;
        if let Some(schema) = go.object(
            version.get("schema"),
            v,
            "spec.versions.schema",
            "v1.CustomResourceValidation",
        )? {
            go.object(
                schema.get("openAPIV3Schema"),
                "CustomResourceValidation",
                "spec.versions.schema.openAPIV3Schema",
                "v1.JSONSchemaProps",
            )?;
        }
    }
    if let Some(conversion) = go.object(
        spec.get("conversion"),
        s,
        "spec.conversion",
        "v1.CustomResourceConversion",
    )? {
        go.typed_string(
            conversion.get("strategy"),
            "CustomResourceConversion",
            "spec.conversion.strategy",
            "v1.ConversionStrategyType",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"},
                            "image": {"type": "string"},
                            "replicas": {"type": "integer"}}}}}}
                }]
            }
        })
    }

    #[test]
    fn null_defaults_are_not_kept() {
        let mut crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "default": null, "properties": {
                "a": {"type": "string", "default": null},
                "b": {"type": "object", "default": {"x": null}},
                "c": {"type": "array", "items": {"type": "integer", "default": null}}}}}}]}});
        set_defaults(&mut crd);
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert!(schema.get("default").is_none(), "{schema}");
        assert!(
            schema["properties"]["a"].get("default").is_none(),
            "{schema}"
        );
        assert_eq!(schema["properties"]["b"]["default"], json!({"x": null}));
        assert!(
            schema["properties"]["c"]["items"].get("default").is_none(),
            "{schema}"
        );
    }

    #[test]
    fn crd_def_matches_kube() {
        let d = def();
        assert_eq!(d.api_version(), "apiextensions.k8s.io/v1");
        assert_eq!(d.list_kind, "CustomResourceDefinitionList");
        assert!(!d.namespaced);
        assert_eq!(d.short_names, vec!["crd", "crds"]);
        assert_eq!(d.categories, vec!["api-extensions"]);
        assert!(d.has_subresource("status"));
        assert_eq!(
            d.storage_prefix,
            "/apiextensions.k8s.io/customresourcedefinitions"
        );
        let names: Vec<&str> = d.columns.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(names, ["Name", "Created At"]);
        assert!(CrdStrategy.tracks_generation());
    }

    #[test]
    fn crd_create_defaults_and_resets_status() {
        let mut crd = crontab();
        crd["status"] = json!({"storedVersions": ["v9"], "conditions": [{"type": "Established", "status": "True"}]});
        CrdStrategy.prepare_for_create(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "crontab");
        assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(
            crd["status"],
            json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]})
        );
        assert_eq!(CrdStrategy.validate(&crd), Vec::new());
    }

    #[test]
    fn crd_update_keeps_status_and_adds_storage_version() {
        let mut old = crontab();
        CrdStrategy.prepare_for_create(&mut old);
        old["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
        let mut new = old.clone();
        new["spec"]["versions"] = json!([
            {"name": "v1", "served": true, "storage": false,
             "schema": old["spec"]["versions"][0]["schema"].clone()},
            {"name": "v2", "served": true, "storage": true,
             "schema": old["spec"]["versions"][0]["schema"].clone()},
        ]);
        new["status"] = json!({});
        CrdStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["status"]["storedVersions"], json!(["v1", "v2"]));
        assert_eq!(new["status"]["conditions"], old["status"]["conditions"]);
        assert_eq!(CrdStrategy.validate_update(&new, &old), Vec::new());

        // Established: scope and kind may no longer change; group and plural never.
        let mut renamed = new.clone();
        renamed["spec"]["scope"] = json!("Cluster");
        renamed["spec"]["names"]["kind"] = json!("Other");
        renamed["spec"]["group"] = json!("other.example.com");
        let fields: Vec<String> = CrdStrategy
            .validate_update(&renamed, &old)
            .into_iter()
            .filter(|c| c.message.contains("field is immutable"))
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.scope", "spec.names.kind", "spec.group"]);
    }

    #[test]
    fn crd_table_shows_created_at() {
        let crd = json!({"metadata": {"creationTimestamp": "2024-05-01T10:00:00Z"}});
        assert_eq!(
            CrdStrategy.table_cells(&crd),
            vec![json!("2024-05-01T10:00:00Z")]
        );
    }

    #[test]
    fn crd_decoding_is_typed_like_go() {
        let check = |body: Value| CrdStrategy.check_decode(&body).err().map(|e| e.message);
        assert_eq!(check(crontab()), None);
        let prefix = "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: ";
        assert_eq!(
            check(json!({"spec": {"versions": [{"served": "yes"}]}})),
            Some(format!("{prefix}json: cannot unmarshal string into Go struct field CustomResourceDefinitionVersion.spec.versions.served of type bool"))
        );
        assert_eq!(
            check(json!({"spec": {"group": 5}})),
            Some(format!("{prefix}json: cannot unmarshal number into Go struct field CustomResourceDefinitionSpec.spec.group of type string"))
        );
    }
}

//! Custom resources: the [`ResourceDef`]s an Established CustomResourceDefinition serves, one
//! per served version, and their strategy (apiextensions-apiserver's `customResourceStrategy`):
//! structural defaulting and pruning, validation against the version's schema, the status
//! subresource split, `apiVersion` rewritten between versions (conversion `None`), and Table
//! rows from `additionalPrinterColumns`.

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::crd_conversion::{ConversionTransports, ConversionWebhook, WebhookConversion};
use super::crd_status::{is_condition_true, storage_version};
use super::str_at;
use crate::machinery::jsonpath;
use crate::machinery::schema::{self, Schema};
use crate::resource::{
    name_column, ResourceDef, Strategy, SubresourceDef, TableColumn, STANDARD_VERBS,
};
use crate::status::{ApiError, StatusCause};

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone)]
struct PrinterColumn {
    path: Vec<jsonpath::Node>,
    type_: String,
}

/// Whether kube's custom resource handler serves `crd`'s resources: once its names are
/// accepted (it is Established only after that, so a client that saw `Established` finds them
/// served).
pub fn is_served(crd: &Value) -> bool {
    is_condition_true(crd, "NamesAccepted") || is_condition_true(crd, "Established")
}

/// The resources `crd` serves now: none until its names are accepted ([`is_served`]). While
/// the CRD is being deleted its objects are still served, as kube serves them (only creates
/// are refused), so that their own finalizers can be removed and the deletion can finish.
pub fn resource_defs(crd: &Value) -> Vec<ResourceDef> {
    resource_defs_with(crd, None)
}

/// [`resource_defs`], converting with the CRD's webhook through `transports`.
pub fn resource_defs_with(
    crd: &Value,
    transports: Option<&dyn ConversionTransports>,
) -> Vec<ResourceDef> {
    if !is_served(crd) {
        return Vec::new();
    }
    storage_defs_with(crd, transports)
}

/// The resources `crd` defines, whatever its state: what its instances are read and deleted
/// through (the finalizer uses these once the CRD is no longer served).
pub fn storage_defs(crd: &Value) -> Vec<ResourceDef> {
    storage_defs_with(crd, None)
}

/// [`storage_defs`], converting with the CRD's webhook through `transports` (without them, a
/// webhook CRD's objects stored in another version cannot be read).
pub fn storage_defs_with(
    crd: &Value,
    transports: Option<&dyn ConversionTransports>,
) -> Vec<ResourceDef> {
    let group = str_at(crd, "/spec/group");
    let names = crd.pointer("/status/acceptedNames").unwrap_or(&Value::Null);
    let plural = str_at(names, "/plural");
    let kind = str_at(names, "/kind");
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Vec::new();
    }
    let Some(storage) = storage_version(crd) else {
        return Vec::new();
    };
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let singular = match str_at(names, "/singular") {
        "" => kind.to_lowercase(),
        s => s.to_string(),
    };
    let list_kind = match str_at(names, "/listKind") {
        "" => format!("{kind}List"),
        s => s.to_string(),
    };
    let namespaced = str_at(crd, "/spec/scope") != "Cluster";
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // Every version's schema by `<group>/<version>`: a stored object is pruned with the
    // schema of the version it was stored as, whichever version it is read through.
    let schemas: Arc<HashMap<String, Arc<Schema>>> = Arc::new(
        versions
            .iter()
            .filter_map(|v| {
                let name = str_at(v, "/name");
                let schema = v.pointer("/schema/openAPIV3Schema")?;
                (!name.is_empty()).then(|| {
                    (
                        format!("{group}/{name}"),
                        Arc::new(Schema::from_json(schema)),
                    )
                })
            })
            .collect(),
    );
    let webhook = ConversionWebhook::from_crd(crd, kind, transports);
    let mut defs = Vec::new();
    for version in versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
    {
        let name = str_at(version, "/name");
        if name.is_empty() {
            continue;
        }
        let schema_json = version.pointer("/schema/openAPIV3Schema");
        let status = version.pointer("/subresources/status").is_some();
        let scale = version.pointer("/subresources/scale").is_some();
        let printer: Vec<(TableColumn, PrinterColumn)> = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            // kube's table convertor stops at the first column client-go's JSONPath cannot
            // parse, keeping those before it.
            .map_while(printer_column)
            .collect();
        let mut columns = vec![name_column()];
        let mut cells = Vec::new();
        if printer.is_empty() {
            // kube's default for a CRD without printer columns: AGE from the creation time.
            columns.push(TableColumn {
                name: Cow::Borrowed("Age"),
                type_: Cow::Borrowed("date"),
                format: Cow::Borrowed(""),
                description: Cow::Borrowed("Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"),
                priority: 0,
            });
            cells.push(PrinterColumn {
                path: jsonpath::parse(".metadata.creationTimestamp").unwrap_or_default(),
                type_: "date".into(),
            });
        } else {
            for (column, cell) in printer {
                columns.push(column);
                cells.push(cell);
            }
        }
        let mut subresources = Vec::new();
        if status {
            subresources.push(SubresourceDef {
                name: "status",
                kind: kind.to_string(),
                verbs: vec!["get", "patch", "update"],
            });
        }
        if scale {
            subresources.push(SubresourceDef {
                name: "scale",
                kind: "Scale".into(),
                verbs: vec!["get", "patch", "update"],
            });
        }
        let scale_paths = version
            .pointer("/subresources/scale")
            .map(|scale| ScalePaths {
                spec_replicas: field_path(str_at(scale, "/specReplicasPath")),
                status_replicas: field_path(str_at(scale, "/statusReplicasPath")),
                label_selector: field_path(str_at(scale, "/labelSelectorPath")),
                spec_replicas_path: str_at(scale, "/specReplicasPath").to_string(),
                status_replicas_path: str_at(scale, "/statusReplicasPath").to_string(),
                label_selector_path: str_at(scale, "/labelSelectorPath").to_string(),
            });
        let deprecation = (version.get("deprecated").and_then(Value::as_bool) == Some(true)).then(
            || match version.get("deprecationWarning").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => default_deprecation_warning(group, name, kind, &versions),
            },
        );
        // `selectableFields`: the field label is the JSON path without its leading dot.
        let selectable: Vec<(String, Vec<String>)> = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .map(|f| str_at(f, "/jsonPath"))
                    .filter(|p| !p.is_empty())
                    .map(|p| (p.trim_start_matches('.').to_string(), field_path(p)))
                    .collect()
            })
            .unwrap_or_default();
        let strategy = CustomResourceStrategy {
            terminating: std::sync::atomic::AtomicBool::new(
                crd.pointer("/metadata/deletionTimestamp").is_some(),
            ),
            selectable,
            deprecation,
            scale: scale_paths,
            schema: schemas.get(&format!("{group}/{name}")).cloned(),
            stored_schemas: schemas.clone(),
            api_version: format!("{group}/{name}"),
            storage_api_version: format!("{group}/{storage}"),
            status_subresource: status,
            cells,
            webhook: webhook.as_ref().map(|webhook| WebhookConversion {
                webhook: webhook.clone(),
                served: format!("{group}/{name}"),
                storage: format!("{group}/{storage}"),
                schemas: schemas.clone(),
            }),
            conversion_id: NEXT_CONVERSION_ID.fetch_add(1, Ordering::Relaxed),
        };
        defs.push(ResourceDef {
            group: group.to_string(),
            version: name.to_string(),
            plural: plural.to_string(),
            singular: singular.clone(),
            kind: kind.to_string(),
            list_kind: list_kind.clone(),
            short_names: strings(names.get("shortNames")),
            categories: strings(names.get("categories")),
            namespaced,
            verbs: STANDARD_VERBS.to_vec(),
            subresources,
            definition: definition_name(group, name, kind),
            columns,
            field_selectors: Vec::new(),
            patch_meta: &[],
            storage_prefix: format!("/{group}/{plural}"),
            strategy: Arc::new(strategy),
            virtual_handler: None,
            subresource_handlers: Vec::new(),
            admission: None,
            openapi_schema: schema_json.map(|s| Arc::new(s.clone())),
            field_model: Default::default(),
            go_shaper: Default::default(),
        });
    }
    defs
}

/// kube's `defaultDeprecationWarning`: `<group>/<version> <Kind> is deprecated`, naming the
/// newest served, non-deprecated version newer than it when there is one.
fn default_deprecation_warning(
    group: &str,
    deprecated: &str,
    kind: &str,
    versions: &[Value],
) -> String {
    let mut message = format!("{group}/{deprecated} {kind} is deprecated");
    let newer = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .filter(|v| v.get("deprecated").and_then(Value::as_bool) != Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        // compare_versions orders the preferred (newer) version first.
        .filter(|v| crate::discovery::compare_versions(v, deprecated) == std::cmp::Ordering::Less)
        .min_by(|a, b| crate::discovery::compare_versions(a, b));
    if let Some(newest) = newer {
        message.push_str(&format!("; use {group}/{newest} {kind}"));
    }
    message
}

/// kube's OpenAPI definition name for a custom kind: the group reversed, then version and
/// kind (`com.example.stable.v1.CronTab`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn printer_column(column: &Value) -> Option<(TableColumn, PrinterColumn)> {
    let name = str_at(column, "/name");
    let type_ = str_at(column, "/type");
    let path = jsonpath::parse(str_at(column, "/jsonPath")).ok()?;
    if name.is_empty() {
        return None;
    }
    let description = match str_at(column, "/description") {
        "" => format!(
            "Custom resource definition column (in JSONPath format): {}",
            str_at(column, "/jsonPath")
        ),
        d => d.to_string(),
    };
    Some((
        TableColumn {
            name: Cow::Owned(name.to_string()),
            type_: Cow::Owned(type_.to_string()),
            format: Cow::Owned(str_at(column, "/format").to_string()),
            description: Cow::Owned(description),
            priority: column
                .get("priority")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(0),
        },
        PrinterColumn {
            path,
            type_: type_.to_string(),
        },
    ))
}

/// A printer column's cell as kube's table convertor makes it: `null` when the path finds
/// nothing or the value does not fit the column's type.
fn cell(column: &PrinterColumn, object: &Value) -> Value {
    // kube's table convertor takes the first value a path finds (`results[0][0]`), also for
    // a path that finds several (`.spec.items[*]`).
    // An evaluation error (an index out of range, say) is an empty cell, as kube's.
    let Ok(found) = jsonpath::find(object, &column.path) else {
        return Value::Null;
    };
    let Some(first) = found.first().map(|v| v.as_ref()) else {
        return Value::Null;
    };
    match (column.type_.as_str(), first) {
        ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => (*first).clone(),
        // Go's int64(float64): toward zero.
        ("integer", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f as i64)),
        ("number", Value::Number(_)) => (*first).clone(),
        ("boolean", Value::Bool(_)) => (*first).clone(),
        ("string", Value::String(_)) => (*first).clone(),
        ("date", Value::String(text)) => json!(date_cell(text, chrono::Utc::now())),
        ("string", other @ (Value::Number(_) | Value::Bool(_))) => json!(other.to_string()),
        // Go's JSON of a map: keys sorted.
        ("string", other @ (Value::Array(_) | Value::Object(_))) => {
            json!(sorted_keys(other).to_string())
        }
        _ => Value::Null,
    }
}

/// `value` with every object's keys in sorted order, as Go's encoder writes a map.
fn sorted_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_keys(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// A `date` column's cell as kube's table convertor writes it: the time since the timestamp
/// (`5m`, `3d`), `<unknown>` for none, `<invalid>` for a string that is not RFC 3339.
fn date_cell(text: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    use crate::machinery::gotime::{self, Layout};
    if text.is_empty() || text == "null" {
        return "<unknown>".into();
    }
    match gotime::parse(text, Layout::Rfc3339) {
        Ok(t) if gotime::is_zero(&t) => "<unknown>".into(),
        Ok(t) => super::human_duration(now.signed_duration_since(t)),
        Err(_) => "<invalid>".into(),
    }
}

/// kube's validation ratcheting (`CRDValidationRatcheting`, on by default since 1.30) for
/// the OpenAPI schema's errors: one on a value the update left as it was is not reported, so
/// an object stored under an older, looser schema can still be updated (its finalizers
/// removed, say) without first being made valid. "As it was" is kube's correlation of new and
/// old values (`schema::unchanged_at`): `map` list items by their keys, other lists whole.
fn ratchet(
    schema: &Schema,
    causes: Vec<StatusCause>,
    new: &Value,
    old: &Value,
) -> Vec<StatusCause> {
    causes
        .into_iter()
        .filter(|cause| !schema::unchanged_at(schema, &cause.field, new, old))
        .collect()
}

/// The fields a `scale` subresource reads and writes, as field names from the root.
#[derive(Debug, Clone)]
struct ScalePaths {
    spec_replicas: Vec<String>,
    status_replicas: Vec<String>,
    label_selector: Vec<String>,
    /// The paths as the CRD gives them (`.spec.replicas`), which kube's errors name.
    spec_replicas_path: String,
    status_replicas_path: String,
    label_selector_path: String,
}

/// kube's `unstructured.NestedFieldNoCopy`: the value at `path` (`None` when a step is
/// missing or null), or its error naming the step that is not an object.
fn nested_field<'a>(object: &'a Value, path: &[String]) -> Result<Option<&'a Value>, String> {
    let mut value = object;
    for (i, field) in path.iter().enumerate() {
        value = match value {
            Value::Null => return Ok(None),
            Value::Object(map) => match map.get(field) {
                Some(next) => next,
                None => return Ok(None),
            },
            other => {
                return Err(format!(
                    "{} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                    go_json_path(&path[..=i]),
                    go_percent_v(other),
                    schema::go_unstructured_type(other)
                ))
            }
        };
    }
    Ok(Some(value))
}

/// kube's `unstructured.NestedInt64`: an integer (as Go's JSON decoder keeps it: one that
/// fits an int64), absent, or an error naming what is there instead.
fn nested_int64(object: &Value, path: &[String]) -> Result<Option<i64>, String> {
    match nested_field(object, path)? {
        None => Ok(None),
        Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
        Some(other) => Err(format!(
            "{} accessor error: {} is of the type {}, expected int64",
            go_json_path(path),
            go_percent_v(other),
            schema::go_unstructured_type(other)
        )),
    }
}

/// kube's `unstructured.NestedString`.
fn nested_string(object: &Value, path: &[String]) -> Result<Option<String>, String> {
    match nested_field(object, path)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!(
            "{} accessor error: {} is of the type {}, expected string",
            go_json_path(path),
            go_percent_v(other),
            schema::go_unstructured_type(other)
        )),
    }
}

/// The `jsonPath` unstructured's errors print: `.spec.replicas`.
fn go_json_path(fields: &[String]) -> String {
    format!(".{}", fields.join("."))
}

/// Go's `%v` of a value decoded from JSON into `interface{}` (map keys sorted, as fmt
/// prints them).
fn go_percent_v(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => crate::machinery::schema::go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_percent_v).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let shown: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_percent_v(v)))
                .collect();
            format!("map[{}]", shown.join(" "))
        }
    }
}

/// kube's `ValidateScaleSpec` / `ValidateScaleStatus` for one replicas field: an int32 that
/// is not negative.
fn replicas_causes(object: &Value, path: &[String], named: &str) -> Vec<StatusCause> {
    let invalid = |value: i64, detail: &str| {
        vec![super::causes::invalid_raw(
            named,
            &value.to_string(),
            detail,
        )]
    };
    match nested_int64(object, path) {
        Err(error) => invalid(0, &error),
        Ok(Some(n)) if n < 0 => invalid(n, "should be a non-negative integer"),
        Ok(Some(n)) if n > i64::from(i32::MAX) => {
            invalid(n, &format!("should be less than or equal to {}", i32::MAX))
        }
        Ok(_) => Vec::new(),
    }
}

/// `.spec.replicas` as `["spec", "replicas"]` (validation allows only such simple paths).
fn field_path(path: &str) -> Vec<String> {
    jsonpath::field_names(path)
}

fn get_path<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    if path.is_empty() {
        return None;
    }
    path.iter().try_fold(object, |v, name| v.get(name.as_str()))
}

/// apiextensions-apiserver's `customResourceStrategy` for one served version.
pub struct CustomResourceStrategy {
    /// The CRD is being deleted: no new objects. Set in place when the deletion starts, so
    /// the definitions (and the watches of their objects) stay, as kube keeps a terminating
    /// CRD's storage until the CRD is gone.
    terminating: std::sync::atomic::AtomicBool,
    /// `selectableFields`: (field label, field names from the root).
    selectable: Vec<(String, Vec<String>)>,
    /// The `Warning` every request to a deprecated version gets.
    deprecation: Option<String>,
    scale: Option<ScalePaths>,
    schema: Option<Arc<Schema>>,
    /// Every version's schema by `<group>/<version>`, for pruning stored objects.
    stored_schemas: Arc<HashMap<String, Arc<Schema>>>,
    /// `<group>/<version>` this definition serves.
    api_version: String,
    /// `<group>/<storage version>`: what is stored.
    storage_api_version: String,
    status_subresource: bool,
    cells: Vec<PrinterColumn>,
    /// The CRD's conversion webhook, for a CRD with `conversion.strategy: Webhook`.
    webhook: Option<WebhookConversion>,
    /// Unique to this strategy (see [`Strategy::conversion_id`]): a CRD change builds new
    /// strategies, so objects read through them are converted again (defaults added by the
    /// change apply on read) and never served from what an older schema made of them.
    conversion_id: u64,
}

/// The next [`CustomResourceStrategy::conversion_id`] (0 means "do not cache").
static NEXT_CONVERSION_ID: AtomicU64 = AtomicU64::new(1);

impl CustomResourceStrategy {
    /// The schema's judgement of an update (ratcheted) and its CEL rules'.
    fn schema_update_causes(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        match &self.schema {
            Some(schema) => {
                let mut causes = ratchet(schema, schema::validate(schema, object), object, old);
                let cel = schema::validate_cel(schema, object, Some(old), &causes);
                causes.extend(cel);
                causes
            }
            None => Vec::new(),
        }
    }

    /// kube's `ValidateScaleSpec`.
    fn scale_spec_causes(&self, object: &Value) -> Vec<StatusCause> {
        match &self.scale {
            Some(paths) => replicas_causes(object, &paths.spec_replicas, &paths.spec_replicas_path),
            None => Vec::new(),
        }
    }

    /// kube's `ValidateScaleStatus`: the status replicas, and a label selector that is a
    /// string.
    fn scale_status_causes(&self, object: &Value) -> Vec<StatusCause> {
        let Some(paths) = &self.scale else {
            return Vec::new();
        };
        let mut causes =
            replicas_causes(object, &paths.status_replicas, &paths.status_replicas_path);
        if !paths.label_selector.is_empty() {
            if let Err(error) = nested_string(object, &paths.label_selector) {
                causes.push(super::causes::invalid_raw(
                    &paths.label_selector_path,
                    "\"\"",
                    &error,
                ));
            }
        }
        causes
    }

    /// Defaults and prunes a decoded object against the schema (kube does both on decode).
    fn normalize(&self, object: &mut Value) {
        integral_floats_as_integers(object);
        if let Some(schema) = &self.schema {
            schema::apply_defaults(object, schema);
            schema::prune(object, Some(schema), true);
        }
    }
}

/// Numbers as kube's unstructured decoding leaves them: a number written with a fraction or
/// an exponent is a float64, which Go writes back without them when it is whole (`2.0` and
/// `2e0` are stored as `2`, and read back as the integer 2, which `/scale` then finds).
fn integral_floats_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64() {
                // Within int64: Go writes such a float as plain digits, read back as an int.
                if f.fract() == 0.0 && f.abs() < 9.2e18 {
                    *value = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

impl Strategy for CustomResourceStrategy {
    fn kube_finalizer_names(&self) -> bool {
        false
    }

    fn is_custom_resource(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, object: &mut Value) {
        self.normalize(object);
        if self.status_subresource {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        self.normalize(object);
        if self.status_subresource {
            if let Some(map) = object.as_object_mut() {
                match old.get("status") {
                    Some(status) => {
                        map.insert("status".into(), status.clone());
                    }
                    None => {
                        map.remove("status");
                    }
                }
            }
        }
    }

    fn prepare_for_status_update(&self, object: &mut Value, old: &Value) {
        crate::resource::keep_all_but_status(object, old);
        self.normalize(object);
    }

    fn converts_storage(&self) -> bool {
        true
    }

    /// kube's encoder converts to the storage version and prunes with its schema: what only
    /// the served version declares is not stored.
    fn encode_for_storage(&self, mut object: Value) -> Value {
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), json!(self.storage_api_version));
        }
        if self.api_version != self.storage_api_version {
            if let Some(storage) = self.stored_schemas.get(&self.storage_api_version) {
                schema::prune(&mut object, Some(storage), true);
            }
        }
        object
    }

    fn default_stored(&self, mut object: Value) -> Value {
        let stored_as = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(stored) = self.stored_schemas.get(&stored_as) {
            schema::prune(&mut object, Some(stored), true);
            schema::coerce_embedded(&mut object, stored);
            schema::apply_defaults(&mut object, stored);
        }
        object
    }

    fn decode_converted(&self, mut object: Value) -> Value {
        if let Some(schema) = &self.schema {
            schema::prune(&mut object, Some(schema), true);
            schema::coerce_embedded(&mut object, schema);
        }
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), json!(self.api_version));
        }
        object
    }

    fn conversion_id(&self) -> u64 {
        self.conversion_id
    }

    fn decode_stored(&self, object: Value) -> Result<Value, ApiError> {
        // kube's storage decoder prunes with the schema of the version the object was stored
        // as (`unstructuredSchemaCoercer`): fields a schema change or a looser version let in
        // are not served.
        let stored_as = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(conversion) = &self.webhook {
            if stored_as != self.api_version {
                // `registry::convert` converts such objects first; reaching here means a read
                // path skipped it, and relabelling the object would serve it unconverted.
                return Err(ApiError::new(
                    500,
                    "",
                    format!(
                        "conversion webhook for {stored_as}, Kind={} failed: the object was not converted",
                        conversion.webhook.kind()
                    ),
                ));
            }
        }
        // kube's versioning codec: decoded, coerced (embedded resources: what does not
        // decode is dropped) and defaulted in the version it was stored as, then converted
        // (here, relabelled) and pruned with this version's schema. This version's own
        // defaults are not applied: reading through another version never adds them.
        let object = self.default_stored(object);
        Ok(self.decode_converted(object))
    }

    fn webhook_conversion(&self) -> Option<&WebhookConversion> {
        self.webhook.as_ref()
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let mut causes = match &self.schema {
            Some(schema) => {
                let mut causes = schema::validate(schema, object);
                let cel = schema::validate_cel(schema, object, None, &causes);
                causes.extend(cel);
                causes
            }
            None => Vec::new(),
        };
        causes.extend(self.scale_spec_causes(object));
        causes.extend(self.scale_status_causes(object));
        causes
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let mut causes = self.schema_update_causes(object, old);
        causes.extend(self.scale_spec_causes(object));
        causes.extend(self.scale_status_causes(object));
        causes
    }

    /// kube's `ValidateStatusUpdate`: the status as the schema has it and the scale's status
    /// fields (the spec a status write cannot change is not judged again).
    fn validate_status_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let mut causes = self.schema_update_causes(object, old);
        causes.extend(self.scale_status_causes(object));
        causes
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    /// apiextensions' converter: `metadata.namespace` only on namespaced resources, and
    /// `field label not supported: x`.
    fn default_field_labels(&self) -> bool {
        false
    }

    fn supports_strategic_merge_patch(&self) -> bool {
        false
    }

    /// kube's custom resource and CRD strategies refuse an update that names no
    /// resourceVersion.
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn terminating(&self) -> bool {
        self.terminating.load(std::sync::atomic::Ordering::Acquire)
    }

    fn mark_terminating(&self, terminating: bool) {
        self.terminating
            .store(terminating, std::sync::atomic::Ordering::Release);
    }

    fn requires_kind(&self) -> bool {
        true
    }

    fn selectable_field(&self, label: &str) -> bool {
        self.selectable.iter().any(|(l, _)| l == label)
    }

    /// kube compares a selectable field's value as text: a string as it is, a number or a
    /// boolean as Go prints it, an absent field as the empty string.
    fn selected_field_value(&self, label: &str, object: &Value) -> Option<String> {
        let (_, path) = self.selectable.iter().find(|(l, _)| l == label)?;
        Some(match get_path(object, path) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        })
    }

    fn deprecation_warning(&self) -> Option<&str> {
        self.deprecation.as_deref()
    }

    fn prune_unknown_fields(&self, object: &mut Value) -> Option<Vec<String>> {
        let schema = self.schema.as_ref()?;
        // An embedded resource that does not decode fails the whole decode in kube, before
        // unknown fields count: nothing is reported here and `check_decode` refuses it.
        Some(schema::decode_request(object, schema).unwrap_or_default())
    }

    /// kube's decode error for a root `metadata`, or an embedded resource's `apiVersion`,
    /// `kind` or `metadata`, that does not decode: `<Kind> in version "<v>" cannot be handled
    /// as a <Kind>: <field error>`.
    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        let Some(schema) = &self.schema else {
            return Ok(());
        };
        match schema::decode_error(object, schema) {
            None => Ok(()),
            Some(error) => {
                let kind = object
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let api_version = object
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or(&self.api_version);
                let version = api_version.rsplit('/').next().unwrap_or_default();
                Err(ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {error}"
                )))
            }
        }
    }

    /// kube's `scaleFromCustomResource`: absent replicas read as 0 (and the spec's absence is
    /// told), replicas as an int32, the selector when `labelSelectorPath` finds a string; a
    /// replicas field that is not an integer, or a selector that is not a string, is kube's
    /// accessor error.
    fn scale_of(&self, object: &Value) -> Option<Result<(Value, bool), String>> {
        let paths = self.scale.as_ref()?;
        Some((|| {
            let spec = nested_int64(object, &paths.spec_replicas)?;
            let status = nested_int64(object, &paths.status_replicas)?.unwrap_or(0);
            let selector = if paths.label_selector.is_empty() {
                None
            } else {
                nested_string(object, &paths.label_selector)?
            };
            let mut metadata = serde_json::Map::new();
            for field in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "creationTimestamp",
            ] {
                if let Some(v) = object.pointer(&format!("/metadata/{field}")) {
                    metadata.insert(field.into(), v.clone());
                }
            }
            // Go's int32 conversion (what validation lets in always fits).
            let mut scale_status = json!({"replicas": status as i32});
            if let Some(selector) = selector.filter(|s| !s.is_empty()) {
                scale_status["selector"] = json!(selector);
            }
            let scale = json!({
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": metadata,
                "spec": {"replicas": spec.unwrap_or(0) as i32},
                "status": scale_status,
            });
            Ok((scale, spec.is_some()))
        })())
    }

    fn scale_spec_replicas_path(&self) -> &str {
        self.scale
            .as_ref()
            .map_or("", |paths| paths.spec_replicas_path.as_str())
    }

    fn with_scale(&self, object: &Value, scale: &Value) -> Option<crate::status::ApiResult<Value>> {
        let paths = self.scale.as_ref()?;
        // The Scale decodes into Go's `ScaleSpec.Replicas int32`; what it holds is judged by
        // the custom resource's validation once written into it (kube's
        // `ValidateScaleSpec`, in the resource's words).
        let replicas = match scale.pointer("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(v) => match v.as_i64().and_then(|n| i32::try_from(n).ok()) {
                Some(n) => i64::from(n),
                None => {
                    let found = match v {
                        Value::String(_) => "string".to_string(),
                        Value::Bool(_) => "bool".to_string(),
                        Value::Array(_) => "array".to_string(),
                        Value::Object(_) => "object".to_string(),
                        number => format!("number {number}"),
                    };
                    return Some(Err(crate::status::ApiError::bad_request(format!(
                        "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {found} into Go struct field ScaleSpec.spec.replicas of type int32"
                    ))));
                }
            },
        };
        let mut next = object.clone();
        let Some((last, parents)) = paths.spec_replicas.split_last() else {
            return Some(Ok(next));
        };
        let mut target = &mut next;
        for name in parents {
            if !target.get(name.as_str()).is_some_and(Value::is_object) {
                target[name.as_str()] = json!({});
            }
            target = &mut target[name.as_str()];
        }
        target[last.as_str()] = json!(replicas);
        Some(Ok(next))
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        self.cells.iter().map(|c| cell(c, object)).collect()
    }

    /// apiextensions' `generateWarningsFromObj`: the finalizers a write adds, judged by
    /// `validateKubeFinalizerName`.
    fn warnings(&self, object: &Value, old: Option<&Value>) -> Vec<String> {
        let finalizers = |v: &Value| -> std::collections::BTreeSet<String> {
            v.pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let mut added = finalizers(object);
        if let Some(old) = old {
            for kept in finalizers(old) {
                added.remove(&kept);
            }
        }
        added
            .iter()
            .flat_map(|name| finalizer_name_warnings(name))
            .collect()
    }
}

/// apiextensions' `validateKubeFinalizerName`: a finalizer that is not a qualified name, or
/// that has no domain path and is not one of kube's own.
fn finalizer_name_warnings(name: &str) -> Vec<String> {
    const FIELD: &str = "metadata.finalizers";
    let quoted = Value::String(name.to_string()).to_string();
    let mut warnings: Vec<String> = crate::machinery::validation::is_qualified_name(name)
        .into_iter()
        .map(|problem| format!("{FIELD}: {quoted}: {problem}"))
        .collect();
    let standard = ["orphan", "foregroundDeletion", "kubernetes"];
    if !name.contains('/') && !standard.contains(&name) {
        let advice = if name.contains('.') {
            "prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers"
        } else {
            "prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"
        };
        warnings.push(format!("{FIELD}: {quoted}: {advice}"));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {
                             "cronSpec": {"type": "string"},
                             "replicas": {"type": "integer", "default": 1, "minimum": 0}}},
                         "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                     "additionalPrinterColumns": [
                         {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                         {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1}]},
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v0", "served": false, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}
                ]
            },
            "status": {
                "acceptedNames": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList", "shortNames": ["ct"], "categories": ["all"]},
                "conditions": [{"type": "Established", "status": "True"}],
                "storedVersions": ["v1"]
            }
        })
    }

    /// bench/crd.sh's Widget: 20 spec fields (17 bounded strings, a defaulted `replicas`) and two
    /// CEL rules, and a request body of ~1 KiB.
    fn widget_crd_and_body() -> (Value, Value) {
        let mut fields = serde_json::Map::new();
        for i in 0..17 {
            fields.insert(
                format!("field{i:02}"),
                json!({"type": "string", "maxLength": 128}),
            );
        }
        fields.insert(
            "replicas".into(),
            json!({"type": "integer", "minimum": 0, "default": 1}),
        );
        fields.insert(
            "minReplicas".into(),
            json!({"type": "integer", "minimum": 0}),
        );
        fields.insert("name".into(), json!({"type": "string"}));
        let crd = json!({
            "metadata": {"name": "widgets.bench.example.com", "uid": "u"},
            "spec": {"group": "bench.example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": fields,
                            "x-kubernetes-validations": [
                                {"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas"},
                                {"rule": "self.name.size() <= 63", "message": "name too long"}]}}}}}]},
            "status": {"acceptedNames": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "conditions": [{"type": "Established", "status": "True"}]}
        });
        let mut spec = serde_json::Map::new();
        for i in 0..17 {
            spec.insert(format!("field{i:02}"), json!("v".repeat(40)));
        }
        spec.insert("replicas".into(), json!(3));
        spec.insert("minReplicas".into(), json!(1));
        spec.insert("name".into(), json!("bench"));
        let body = json!({"apiVersion": "bench.example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default", "labels": {"app.kubernetes.io/name": "bench"}},
            "spec": spec});
        (crd, body)
    }

    /// What a create of a Widget costs in the strategy (pruning, defaulting, schema and CEL
    /// validation, the storage and served shapes), for profiling with callgrind:
    /// `valgrind --tool=callgrind <test binary> --ignored --exact
    /// core::custom_resource::tests::widget_create_pipeline`. Asserts only that it is valid.
    #[test]
    fn whole_numbers_written_as_floats_are_stored_as_integers() {
        let mut object = json!({"spec": {"replicas": 2.0, "ratio": 1e2, "half": 0.5,
            "list": [3.0, 4], "big": 1e300}});
        integral_floats_as_integers(&mut object);
        assert_eq!(object["spec"]["replicas"], json!(2));
        assert!(object["spec"]["replicas"].is_i64());
        assert_eq!(object["spec"]["ratio"], json!(100));
        assert_eq!(object["spec"]["half"], json!(0.5));
        assert_eq!(object["spec"]["list"], json!([3, 4]));
        assert!(object["spec"]["big"].is_f64());
    }

    #[test]
    #[ignore = "a profiling workload, not a check"]
    fn widget_create_pipeline() {
        let (crd, body) = widget_crd_and_body();
        let defs = resource_defs(&crd);
        let strategy = &defs[0].strategy;
        let text = serde_json::to_vec(&body).unwrap_or_default();
        for _ in 0..2000 {
            let mut object: Value = serde_json::from_slice(&text).unwrap_or_default();
            let unknown = strategy.prune_unknown_fields(&mut object);
            assert_eq!(unknown, Some(Vec::new()));
            strategy.prepare_for_create(&mut object);
            assert!(strategy.validate(&object).is_empty());
            let stored = serde_json::to_vec(&strategy.encode_for_storage(object.clone()));
            let served = strategy.decode_stored(object).unwrap_or_default();
            assert!(stored.is_ok() && served.is_object());
        }
    }

    #[test]
    fn served_versions_become_resources() {
        let defs = resource_defs(&crontab_crd());
        let versions: Vec<&str> = defs.iter().map(|d| d.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        let v1 = &defs[0];
        assert_eq!(v1.plural, "crontabs");
        assert_eq!(v1.short_names, ["ct"]);
        assert_eq!(v1.categories, ["all"]);
        assert!(v1.namespaced);
        assert_eq!(v1.storage_prefix, "/stable.example.com/crontabs");
        assert_eq!(defs[1].storage_prefix, v1.storage_prefix);
        assert_eq!(v1.definition, "com.example.stable.v1.CronTab");
        assert!(v1.has_subresource("status") && v1.has_subresource("scale"));
        assert!(!defs[1].has_subresource("status"));
        let columns: Vec<&str> = v1.columns.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(columns, ["Name", "Spec", "Replicas"]);
        assert_eq!(v1.columns[2].priority, 1);
        let default_columns: Vec<&str> = defs[1].columns.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(default_columns, ["Name", "Age"]);

        let mut not_established = crontab_crd();
        not_established["status"]["conditions"] = json!([]);
        assert!(resource_defs(&not_established).is_empty());
        // Being deleted, its objects are still served, but created no more, and discovery
        // lists no create, patch or update (kube's discovery controller).
        let mut deleting = crontab_crd();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let served = resource_defs(&deleting);
        assert_eq!(served.len(), 2);
        assert!(served[0].strategy.terminating());
        assert!(served[0].supports_verb("patch"));
        let mut listed = served[0].discovery_verbs();
        listed.sort();
        assert_eq!(
            listed,
            ["delete", "deletecollection", "get", "list", "watch"]
        );
        assert!(!defs[0].strategy.terminating());
        assert!(defs[0].discovery_verbs().contains(&"create"));
    }

    #[test]
    fn objects_are_defaulted_pruned_validated_and_stored_in_the_storage_version() {
        let defs = resource_defs(&crontab_crd());
        let v1 = &defs[0];
        let mut object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a"}, "spec": {"cronSpec": "* * * * */5", "unknown": 1},
            "status": {"replicas": 3}});
        v1.strategy.prepare_for_create(&mut object);
        assert_eq!(object["spec"]["replicas"], 1, "defaulted");
        assert!(object["spec"].get("unknown").is_none(), "pruned");
        assert!(
            object.get("status").is_none(),
            "status is the subresource's"
        );
        assert!(v1.strategy.validate(&object).is_empty());
        let mut bad = object.clone();
        bad["spec"]["replicas"] = json!(-1);
        let causes = v1.strategy.validate(&bad);
        // The schema's minimum, then the scale subresource's own check (kube reports both).
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(causes[0].field, "spec.replicas");
        assert_eq!(causes[1].field, ".spec.replicas");
        assert_eq!(
            causes[1].message,
            "Invalid value: -1: should be a non-negative integer"
        );

        // v1beta1 reads what v1 wrote, with its own apiVersion.
        let beta = &defs[1];
        let stored = beta.strategy.encode_for_storage(
            json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab"}),
        );
        assert_eq!(stored["apiVersion"], "stable.example.com/v1");
        let read = beta.strategy.decode_stored(object.clone()).unwrap();
        assert_eq!(read["apiVersion"], "stable.example.com/v1beta1");

        // The status subresource carries only status; the main resource keeps the old one.
        let mut old = object.clone();
        old["status"] = json!({"replicas": 2});
        let mut update = object.clone();
        update["status"] = json!({"replicas": 9});
        update["spec"]["cronSpec"] = json!("changed");
        v1.strategy.prepare_for_update(&mut update, &old);
        assert_eq!(update["status"]["replicas"], 2);
        let mut status = old.clone();
        status["status"] = json!({"replicas": 5});
        status["spec"]["cronSpec"] = json!("ignored");
        v1.strategy.prepare_for_status_update(&mut status, &old);
        assert_eq!(status["status"]["replicas"], 5);
        assert_eq!(status["spec"]["cronSpec"], old["spec"]["cronSpec"]);
    }

    #[test]
    fn embedded_resources_are_coerced_on_decode_and_refused_when_they_do_not_decode() {
        let mut crd = crontab_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["template"] = json!({"type": "object",
                "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true});
        let defs = resource_defs(&crd);
        let strategy = &defs[0].strategy;
        let mut object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a"}, "spec": {"cronSpec": "x", "odd": 1,
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1}}}});
        assert_eq!(
            strategy.prune_unknown_fields(&mut object),
            Some(vec![
                "spec.odd".to_string(),
                "spec.template.metadata.junk".to_string()
            ])
        );
        assert_eq!(object["spec"]["template"]["metadata"], json!({"name": "p"}));
        assert!(strategy.check_decode(&object).is_ok());

        let mut bad = object.clone();
        bad["spec"]["template"]["kind"] = json!(5);
        bad["spec"]["unknown"] = json!(1);
        // The decode error wins over unknown fields, as in kube.
        assert_eq!(strategy.prune_unknown_fields(&mut bad), Some(Vec::new()));
        let error = strategy.check_decode(&bad).err();
        assert_eq!(
            error.map(|e| (e.code, e.message)),
            Some((400, "CronTab in version \"v1\" cannot be handled as a CronTab: spec.template.kind: Invalid value: 5: must be a string".to_string()))
        );

        let mut missing = object.clone();
        missing["spec"]["template"] = json!({"metadata": {"labels": {"k": "v!"}}});
        let causes: Vec<String> = strategy
            .validate(&missing)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(causes.len(), 3, "{causes:?}");
        assert_eq!(
            causes[0],
            "spec.template.apiVersion: Required value: must not be empty"
        );
        assert_eq!(
            causes[1],
            "spec.template.kind: Required value: must not be empty"
        );
        assert!(
            causes[2].starts_with("spec.template.metadata.labels: Invalid value: \"v!\""),
            "{causes:?}"
        );
    }

    #[test]
    fn schema_errors_on_unchanged_values_are_ratcheted() {
        let mut crd = crontab_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["cronSpec"]["maxLength"] = json!(3);
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["tags"] =
            json!({"type": "array", "items": {"type": "string", "maxLength": 1}});
        let defs = resource_defs(&crd);
        let strategy = &defs[0].strategy;
        let old = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a", "finalizers": ["x.io/f"]},
            "spec": {"cronSpec": "* * * * */5", "replicas": 1, "tags": ["ab", "c"]}});
        // Only metadata changes: the old, now too long, values are not reported.
        let mut unchanged = old.clone();
        unchanged["metadata"]["finalizers"] = json!([]);
        assert!(strategy.validate_update(&unchanged, &old).is_empty());
        // A new too-long value is.
        let mut changed = old.clone();
        changed["spec"]["cronSpec"] = json!("*/10 * * * *");
        let causes = strategy.validate_update(&changed, &old);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.cronSpec");
        // A list correlates only as a whole: touching it reports its old bad item again.
        let mut listed = old.clone();
        listed["spec"]["tags"] = json!(["ab", "d"]);
        let causes = strategy.validate_update(&listed, &old);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.tags[0]");
        // On create nothing is ratcheted.
        assert!(!strategy.validate(&old).is_empty());
    }

    #[test]
    fn map_list_items_are_ratcheted_by_their_keys() {
        let mut crd = crontab_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["ports"] = json!({"type": "array",
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}});
        let defs = resource_defs(&crd);
        let strategy = &defs[0].strategy;
        let old = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a"},
            "spec": {"ports": [{"name": "web", "port": 8080}, {"name": "dns", "port": 53}]}});
        // Another item changes and the list is reordered: `web`'s old, now too large, port
        // is not reported, as kube correlates the item by its key.
        let mut new = old.clone();
        new["spec"]["ports"] = json!([{"name": "dns", "port": 54}, {"name": "web", "port": 8080}]);
        assert!(strategy.validate_update(&new, &old).is_empty());
        // Changing `web` itself reports it.
        new["spec"]["ports"][1]["port"] = json!(8081);
        let causes = strategy.validate_update(&new, &old);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.ports[1].port");
    }

    #[test]
    fn selectable_fields_are_compared_as_text() {
        let mut crd = crontab_crd();
        crd["spec"]["versions"][0]["selectableFields"] =
            json!([{"jsonPath": ".spec.cronSpec"}, {"jsonPath": ".spec.replicas"}]);
        let defs = resource_defs(&crd);
        let strategy = &defs[0].strategy;
        assert!(strategy.selectable_field("spec.cronSpec"));
        assert!(strategy.selectable_field("spec.replicas"));
        assert!(!strategy.selectable_field("spec.image"));
        assert!(
            !defs[1].strategy.selectable_field("spec.cronSpec"),
            "per version"
        );
        let object = json!({"spec": {"cronSpec": "*/5", "replicas": 3}});
        let value = |label: &str, o: &Value| strategy.selected_field_value(label, o);
        assert_eq!(value("spec.cronSpec", &object).as_deref(), Some("*/5"));
        assert_eq!(value("spec.replicas", &object).as_deref(), Some("3"));
        assert_eq!(value("spec.cronSpec", &json!({})).as_deref(), Some(""));
        assert_eq!(value("spec.image", &object), None);
    }

    #[test]
    fn added_finalizers_without_a_domain_path_are_warned_about() {
        let defs = resource_defs(&crontab_crd());
        let object =
            |finalizers: Value| json!({"metadata": {"name": "a", "finalizers": finalizers}});
        assert_eq!(
            defs[0]
                .strategy
                .warnings(&object(json!(["foo", "a.b", "example.com/x", "orphan"])), None),
            vec![
                "metadata.finalizers: \"a.b\": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers",
                "metadata.finalizers: \"foo\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers",
            ]
        );
        // On update, only those the write adds.
        assert!(defs[0]
            .strategy
            .warnings(&object(json!(["foo"])), Some(&object(json!(["foo"]))))
            .is_empty());
    }

    #[test]
    fn printer_columns_follow_their_json_paths() {
        let defs = resource_defs(&crontab_crd());
        let object = json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
                            "spec": {"cronSpec": "*/5", "replicas": 3}});
        assert_eq!(
            defs[0].strategy.table_cells(&object),
            vec![json!("*/5"), json!(3)]
        );
        // The default Age column is a date: its cell is the time since, as kube writes it.
        let age = defs[1].strategy.table_cells(&object);
        assert_eq!(
            age,
            vec![json!(date_cell("2026-01-01T00:00:00Z", chrono::Utc::now()))]
        );
        assert_ne!(age, vec![json!("2026-01-01T00:00:00Z")]);
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:05:30Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .expect("a time");
        assert_eq!(date_cell("2026-01-01T00:00:00Z", now), "5m30s");
        assert_eq!(date_cell("2025-12-30T00:05:30+00:00", now), "2d");
        assert_eq!(date_cell("yesterday", now), "<invalid>");
        assert_eq!(date_cell("", now), "<unknown>");
        assert_eq!(date_cell("0001-01-01T00:00:00Z", now), "<unknown>");
        assert_eq!(
            defs[0].strategy.table_cells(&json!({})),
            vec![Value::Null, Value::Null]
        );

        let conditions = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]},
            "metadata": {"labels": {"app.kubernetes.io/name": "x"}}, "items": [1, 2]});
        let column = |path: &str, type_: &str| PrinterColumn {
            path: jsonpath::parse(path).unwrap_or_default(),
            type_: type_.into(),
        };
        assert_eq!(
            cell(
                &column(".status.conditions[?(@.type==\"Ready\")].status", "string"),
                &conditions
            ),
            json!("True")
        );
        assert_eq!(
            cell(
                &column(r".metadata.labels['app\.kubernetes\.io/name']", "string"),
                &conditions
            ),
            json!("x")
        );
        // client-go reads `['a.b']` as `.a.b`: unescaped dots are steps.
        assert_eq!(
            cell(
                &column(".metadata.labels['app.kubernetes.io/name']", "string"),
                &conditions
            ),
            Value::Null
        );
        // The first of several values, as kube's `results[0][0]`.
        assert_eq!(cell(&column(".items[*]", "integer"), &conditions), json!(1));
        // A map in a string column: Go's JSON, keys sorted.
        let object = json!({"spec": {"m": {"x": "y", "a": [1]}}});
        assert_eq!(
            cell(&column(".spec.m", "string"), &object),
            json!(r#"{"a":[1],"x":"y"}"#)
        );
        assert_eq!(cell(&column(".items[1]", "integer"), &conditions), json!(2));
        assert_eq!(
            cell(&column(".items[0]", "boolean"), &conditions),
            Value::Null
        );
        assert!(jsonpath::parse(".a[").is_err());
    }
}

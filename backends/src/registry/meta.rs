//! Reading and writing `metadata` fields of JSON objects, and the checks every write makes on
//! an incoming object's type and identity (apiVersion, kind, name, namespace).

use serde_json::{Map, Value};

pub(crate) use crate::machinery::meta_field;
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};

/// The current time as kube writes timestamps (`2006-01-02T15:04:05Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `metadata.name`, or "".
pub fn object_name(object: &Value) -> &str {
    meta_field(object, "name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.namespace`, or "".
pub fn object_namespace(object: &Value) -> &str {
    meta_field(object, "namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata` as a mutable map, created if missing or not an object.
pub(crate) fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = object.as_object_mut().expect("object checked above");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("metadata checked above")
}

/// A string field of `metadata`.
pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    meta_field(object, field).and_then(Value::as_str)
}

/// `metadata.finalizers`.
pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    meta_field(object, "finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `metadata.resourceVersion` an incoming object asks for (a precondition), if any.
pub(crate) fn requested_revision(object: &Value) -> ApiResult<Option<u64>> {
    match object_resource_version(object) {
        // kube's versioner reads `0` as no resourceVersion: an unconditional update.
        Ok(0) => Ok(None),
        Ok(rv) => Ok(Some(rv)),
        // kube's store returns the versioner's error as it is: a 500 without a reason.
        Err(error) => Err(ApiError::new(500, "", error)),
    }
}

/// kube's `APIObjectVersioner.ObjectResourceVersion`: an object's resourceVersion as a
/// number, 0 when it has none, Go's `strconv.ParseUint` error when it does not parse.
pub(crate) fn object_resource_version(object: &Value) -> Result<u64, String> {
    match meta_str(object, "resourceVersion") {
        None | Some("") => Ok(0),
        Some(rv) => parse_uint(rv),
    }
}

/// Go's `strconv.ParseUint(s, 10, 64)`, with its error text.
pub(crate) fn parse_uint(text: &str) -> Result<u64, String> {
    let quoted = kubegate_policy::quote::go_quote(text);
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseUint: parsing {quoted}: invalid syntax"
        ));
    }
    text.parse()
        .map_err(|_| format!("strconv.ParseUint: parsing {quoted}: value out of range"))
}

/// Checks an incoming body's `apiVersion` and `kind` against the resource it was sent to,
/// filling them in when absent, as kube's decoder does with the endpoint's defaults.
pub(crate) fn check_type(
    object: &mut Value,
    def: &ResourceDef,
    expected_kind: &str,
) -> ApiResult<()> {
    let Some(map) = object.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    };
    let expected_api_version = def.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::String(expected_api_version.clone()));
        }
        Some(v) if v == expected_api_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected_api_version})"
            )))
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::String(expected_kind.to_string()));
        }
        Some(k) if k == expected_kind => {}
        // apiextensions' `ValidateTypeMeta`: a custom resource of another kind is invalid,
        // named by the kind it claims to be.
        Some(k) if def.strategy.is_custom_resource() && expected_kind == def.kind => {
            let name = map
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(ApiError::invalid(
                &def.group,
                k,
                name,
                vec![crate::core::causes::invalid_raw(
                    "kind",
                    &Value::String(k.to_string()).to_string(),
                    &format!("must be {expected_kind}"),
                )],
            ));
        }
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({expected_kind}) for the endpoint"
            )))
        }
    }
    if !matches!(
        map.get("metadata"),
        None | Some(Value::Object(_)) | Some(Value::Null)
    ) {
        return Err(ApiError::bad_request(
            "metadata in the body of the request must be an object",
        ));
    }
    Ok(())
}

/// Makes the object's namespace agree with the request path, as kube's `rest.FillObjectMetaSystemFields`
/// and namespace checks do.
pub(crate) fn check_namespace(
    object: &mut Value,
    def: &ResourceDef,
    path_namespace: &str,
) -> ApiResult<()> {
    let meta = metadata_mut(object);
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    match meta.get("namespace").and_then(Value::as_str) {
        None | Some("") => {
            meta.insert(
                "namespace".into(),
                Value::String(path_namespace.to_string()),
            );
            Ok(())
        }
        Some(ns) if ns == path_namespace => Ok(()),
        Some(_) => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
}

/// kube's `checkName` for an update or a patch: the object must name what the URL names.
pub(crate) fn check_name(object: &Value, url_name: &str) -> ApiResult<()> {
    match object_name(object) {
        "" => Err(ApiError::bad_request(format!(
            "the name of the object ({url_name} based on URL) was undeterminable: name must be provided"
        ))),
        name if name != url_name => Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        ))),
        _ => Ok(()),
    }
}

/// Whether two objects differ outside `metadata` (and outside `status`, when `status` is a
/// subresource of its own): a change that bumps `metadata.generation` for resources that
/// track it. Without a status subresource, kube counts a status change too (a custom
/// resource's `PrepareForUpdate` compares everything but metadata).
pub(crate) fn spec_changed(new: &Value, old: &Value, status_subresource: bool) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
            if status_subresource {
                m.remove("status");
            }
        }
        v
    };
    strip(new) != strip(old)
}

/// Whether an update changes anything at all (ignoring resourceVersion and managedFields);
/// kube skips the write for a no-op update.
pub(crate) fn unchanged(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            // Ownership changes are changes; a manager's timestamp alone is not (kube keeps
            // the stored timestamps of a no-op write).
            if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
                for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                    entry.remove("time");
                }
            }
        }
        v
    };
    strip(new) == strip(old)
}

/// kube's `dedupOwnerReferences`: drops an owner reference equal in every field to one before
/// it with the same uid (references that share a uid but differ stay), returning the warning
/// kube's handlers send, if any. `after_patch` picks the wording kube uses once a patch is
/// applied (its "after mutating admission" check; creates and updates are deduplicated first).
pub(crate) fn dedup_owner_references(object: &mut Value, after_patch: bool) -> Option<String> {
    let refs = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("ownerReferences"))
        .and_then(Value::as_array_mut)?;
    let mut kept: Vec<Value> = Vec::with_capacity(refs.len());
    let mut duplicates: Vec<String> = Vec::new();
    for reference in refs.drain(..) {
        let uid = reference.get("uid").and_then(Value::as_str).unwrap_or("");
        let seen = kept
            .iter()
            .any(|k| k.get("uid").and_then(Value::as_str).unwrap_or("") == uid);
        if seen && kept.contains(&reference) {
            duplicates.push(uid.to_string());
        } else {
            kept.push(reference);
        }
    }
    *refs = kept;
    if duplicates.is_empty() {
        return None;
    }
    let after = if after_patch {
        " after mutating admission happens"
    } else {
        ""
    };
    Some(format!(
        ".metadata.ownerReferences contains duplicate entries{after}; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: {}",
        duplicates.join(", ")
    ))
}

/// ObjectMeta's maps and lists are `omitempty` in Go: an object kube decodes and encodes again
/// loses an empty `labels`, `annotations`, `finalizers` or `ownerReferences` (what is left
/// after removing the last label, say).
pub(crate) fn drop_empty_meta_collections(object: &mut Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|key, value| {
        let collection = matches!(
            key.as_str(),
            "labels" | "annotations" | "finalizers" | "ownerReferences"
        );
        let empty = match value {
            Value::Object(map) => map.is_empty(),
            Value::Array(list) => list.is_empty(),
            _ => false,
        };
        !(collection && empty)
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::spec_changed;

    #[test]
    fn status_counts_toward_the_generation_only_without_its_own_subresource() {
        let old = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"ready": false}});
        let relabelled = json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "spec": {"x": 1}, "status": {"ready": false}});
        let status =
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"ready": true}});
        let spec = json!({"metadata": {"name": "a"}, "spec": {"x": 2}, "status": {"ready": false}});
        for subresource in [true, false] {
            assert!(!spec_changed(&relabelled, &old, subresource));
            assert!(spec_changed(&spec, &old, subresource));
        }
        assert!(!spec_changed(&status, &old, true));
        assert!(spec_changed(&status, &old, false));
    }
}

//! The `scale` subresource of custom resources: an `autoscaling/v1` Scale read from and
//! written back into the object through its strategy ([`Strategy::scale_of`],
//! [`Strategy::with_scale`]), with GET, PUT and PATCH as kube's scale REST handler serves them.
//!
//! [`Strategy::scale_of`]: crate::resource::Strategy::scale_of
//! [`Strategy::with_scale`]: crate::resource::Strategy::with_scale

use serde_json::{json, Value};

use super::apply::{check_no_force, Tracker};
use super::encode;
use super::meta::meta_field;
use super::write::{decode_request_body, WriteMode};
use super::Registry;
use crate::api::{ApiRequest, ApiResponse};
use crate::machinery::negotiation::{self, negotiate_output, PatchType};
use crate::machinery::patch;
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};

const SCALE_API_VERSION: &str = "autoscaling/v1";

impl Registry {
    pub(super) async fn scale(
        &self,
        def: &ResourceDef,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let info = &request.info;
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        let include =
            crate::machinery::table::IncludeObject::parse(request.param("includeObject"))?;
        // A Scale's Table has its own columns (apiextensions-apiserver's scale convertor).
        let respond = |scale: &Value| {
            if output.as_table {
                encode::json_value_response(200, &scale_table(scale, include), &output)
            } else {
                encode::json_value_response(200, scale, &output)
            }
        };
        let view = |object: &Value| {
            def.strategy
                .scale_of(object)
                .ok_or_else(|| ApiError::method_not_supported(&def.group_resource(), &info.verb))
        };
        // After a write, a Scale that cannot be read is the request's fault (kube's 400).
        let written_view = |object: &Value| {
            view(object)?
                .map(|(scale, _)| scale)
                .map_err(ApiError::bad_request)
        };
        match info.verb.as_str() {
            "get" => {
                let object = self.get_object(def, &info.namespace, &info.name).await?;
                // kube's ScaleREST.Get: an accessor error as it is (a 500), and a 500 for an
                // object whose spec has no replicas yet.
                match view(&object)? {
                    Err(error) => Err(ApiError::new(500, "", error)),
                    Ok((_, false)) => Err(ApiError::internal(format!(
                        "the spec replicas field {} does not exist",
                        serde_json::Value::String(
                            def.strategy.scale_spec_replicas_path().to_string()
                        )
                    ))),
                    Ok((scale, true)) => respond(&scale),
                }
            }
            "update" => {
                let mut scale = decode_request_body(request)?;
                check_scale_type(&mut scale)?;
                let tracker = Tracker::for_request(def, request, "UpdateOptions")?;
                let written = self
                    .update_object(
                        def,
                        &info.namespace,
                        &info.name,
                        "scale",
                        WriteMode {
                            tracker: tracker.as_ref(),
                            ..WriteMode::client(request)?
                        },
                        |current| apply(def, current, &scale),
                    )
                    .await?;
                respond(&written_view(&written.object)?)
            }
            "patch" => {
                let patch_type = negotiation::patch_type(request.content_type.as_deref())?;
                if patch_type != PatchType::Apply {
                    check_no_force(request)?;
                }
                let tracker = Tracker::for_request(def, request, "PatchOptions")?;
                let written = self
                    .update_object(
                        def,
                        &info.namespace,
                        &info.name,
                        "scale",
                        WriteMode {
                            tracker: tracker.as_ref(),
                            ..WriteMode::client(request)?
                        },
                        |current| {
                            // kube's scaleUpdatedObjectInfo: the Scale patched is the
                            // object's (an accessor error is a 500), with the smallest int32
                            // for replicas the spec does not have yet.
                            let before = match view(current)? {
                                Err(error) => return Err(ApiError::new(500, "", error)),
                                Ok((mut scale, found)) => {
                                    if !found {
                                        scale["spec"]["replicas"] = json!(i32::MIN);
                                    }
                                    scale
                                }
                            };
                            let mut after = match patch_type {
                                PatchType::Json => patch::json_patch(&before, &request.body)?,
                                // A Scale has no lists: a strategic merge patch is a merge patch.
                                PatchType::Merge | PatchType::StrategicMerge => {
                                    patch::merge_patch(&before, &request.body)?
                                }
                                PatchType::Apply => {
                                    return Err(ApiError::new(
                                        415,
                                        "UnsupportedMediaType",
                                        "server-side apply of the scale subresource is not supported by this server",
                                    ))
                                }
                            };
                            check_scale_type(&mut after)?;
                            // The resourceVersion rides along unchanged unless the patch set
                            // one: only then is it a precondition.
                            if meta_field(&after, "resourceVersion")
                                == meta_field(&before, "resourceVersion")
                            {
                                if let Some(meta) =
                                    after.get_mut("metadata").and_then(Value::as_object_mut)
                                {
                                    meta.remove("resourceVersion");
                                }
                            }
                            apply(def, current, &after)
                        },
                    )
                    .await?;
                respond(&written_view(&written.object)?)
            }
            other => Err(ApiError::method_not_supported(&def.group_resource(), other)),
        }
    }
}

/// A Scale as a Table, with apiextensions-apiserver's scale columns (`getScaleColumnsForVersion`:
/// Desired `.spec.replicas`, Available `.status.replicas`, Age) after the name.
fn scale_table(scale: &Value, include: crate::machinery::table::IncludeObject) -> Value {
    use crate::machinery::table::{age_cell, table, TableRow};
    use crate::resource::{name_column, TableColumn};
    let column = |name: &'static str, type_: &'static str, path: &str| TableColumn {
        name: name.into(),
        type_: type_.into(),
        format: "".into(),
        description: format!("Custom resource definition column (in JSONPath format): {path}")
            .into(),
        priority: 0,
    };
    let columns = [
        name_column(),
        column("Desired", "integer", ".spec.replicas"),
        column("Available", "integer", ".status.replicas"),
        column("Age", "date", ".metadata.creationTimestamp"),
    ];
    let replicas = |pointer: &str| scale.pointer(pointer).cloned().unwrap_or(Value::Null);
    let row = TableRow {
        cells: vec![
            meta_field(scale, "name").cloned().unwrap_or(Value::Null),
            replicas("/spec/replicas"),
            replicas("/status/replicas"),
            age_cell(scale),
        ],
        object: scale.clone(),
    };
    let rv = meta_field(scale, "resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    table(&columns, vec![row], rv, None, None, include)
}

/// `apiVersion` and `kind` of a Scale body, filled in when missing.
fn check_scale_type(scale: &mut Value) -> ApiResult<()> {
    let Some(map) = scale.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    };
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), json!(SCALE_API_VERSION));
        }
        Some(SCALE_API_VERSION) => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({other}) does not match the expected API version ({SCALE_API_VERSION})"
            )))
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), json!("Scale"));
        }
        Some("Scale") => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({other}) does not match the expected kind (Scale) for the endpoint"
            )))
        }
    }
    Ok(())
}

/// The stored object with the Scale written into it; a `resourceVersion` in the Scale is the
/// update's precondition, as kube's scale handler makes it.
fn apply(def: &ResourceDef, current: &Value, scale: &Value) -> ApiResult<Value> {
    let mut object = def
        .strategy
        .with_scale(current, scale)
        .ok_or_else(|| ApiError::method_not_supported(&def.group_resource(), "update"))??;
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        match meta_field(scale, "resourceVersion") {
            Some(rv) if rv.as_str().is_some_and(|s| !s.is_empty()) => {
                meta.insert("resourceVersion".into(), rv.clone());
            }
            _ => {
                meta.remove("resourceVersion");
            }
        }
    }
    Ok(object)
}

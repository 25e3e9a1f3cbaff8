//! Server-side apply (`PATCH` with `application/apply-patch+yaml`) and the `managedFields`
//! every client write records: the field manager of a request (its `fieldManager`, else its
//! User-Agent), the kind's shape, and what each endpoint resets.

use std::sync::Arc;

use serde_json::Value;

use super::meta::{check_namespace, meta_str, metadata_mut, now_rfc3339, object_name};
use super::write::{field_validation, prune_unknown_fields, respond, FieldValidation, WriteMode};
use super::Registry;
use crate::api::{ApiRequest, ApiResponse};
use crate::core::causes::too_long;
use crate::machinery::goyaml;
use crate::machinery::managed::{ApplyError, FieldManager, FieldSet, PathElement, TypeModel};
use crate::machinery::negotiation::Negotiated;
use crate::openapi::schema_for_definition;
use crate::resource::ResourceDef;
use crate::status::{self, ApiError, ApiResult, StatusCause, StatusDetails};

/// kube's `FieldManagerMaxLength`.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The kind's shape, built once per served version.
pub(crate) fn field_model(def: &ResourceDef) -> Arc<TypeModel> {
    def.field_model
        .get_or_init(|| {
            Arc::new(match &def.openapi_schema {
                Some(schema) => {
                    let meta = schema_for_definition(OBJECT_META);
                    TypeModel::build_custom(schema, meta.as_ref().map(|(r, d)| (r, d)))
                }
                None => match schema_for_definition(&def.definition) {
                    Some((root, definitions)) => TypeModel::build(&root, &definitions),
                    None => TypeModel::untyped(),
                },
            })
        })
        .clone()
}

/// The fields an endpoint resets and so never gives to its writers: with a status
/// subresource, the object's endpoint resets `.status` and `status` resets `.spec`, as the
/// `GetResetFields` of kube's strategies for these kinds (custom resources, services,
/// namespaces, APIServices) do; flow-control objects' status also resets `.metadata`.
fn reset_fields(def: &ResourceDef, subresource: &str) -> FieldSet {
    let mut set = FieldSet::new();
    if !def.subresources.iter().any(|s| s.name == "status") {
        return set;
    }
    let fields: &[&str] = match subresource {
        "status" if def.group == "flowcontrol.apiserver.k8s.io" => &["metadata", "spec"],
        "status" => &["spec"],
        _ => &["status"],
    };
    for f in fields {
        set.insert(&[PathElement::Field((*f).to_string())]);
    }
    set
}

/// Go's `unicode.IsPrint`, closely enough for manager names: no control or format
/// characters and no spaces other than U+0020.
fn is_print(c: char) -> bool {
    let format = matches!(c as u32, 0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F
        | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
        | 0xFEFF | 0xFFF9..=0xFFFB);
    !(c.is_control() || format || (c.is_whitespace() && c != ' '))
}

/// kube's `prefixFromUserAgent`: what comes before the first `/`, printable characters only,
/// at most 128 bytes.
fn manager_from_user_agent(user_agent: &str) -> String {
    let mut out = String::new();
    for c in user_agent.split('/').next().unwrap_or("").chars() {
        if !is_print(c) {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// kube's `ValidateFieldManager`.
pub(super) fn field_manager_causes(manager: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH));
    }
    for (i, c) in manager.char_indices() {
        if !is_print(c) {
            causes.push(status::field_invalid(
                "fieldManager",
                manager,
                &format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    causes
}

fn options_invalid(options_kind: &str, causes: Vec<StatusCause>) -> ApiError {
    ApiError::invalid("meta.k8s.io", options_kind, "", causes)
}

/// Records who writes which fields for one client request.
#[derive(Debug)]
pub(crate) struct Tracker {
    model: Arc<TypeModel>,
    reset: FieldSet,
    api_version: String,
    kind: String,
    subresource: String,
    manager: String,
    now: String,
    custom: bool,
}

impl Tracker {
    /// The tracker of a create, update or non-apply patch: validates `fieldManager` (422 on
    /// the request's options kind), defaulting it from the User-Agent. `None` for endpoints
    /// whose writes are not tracked (subresources other than `status` and `scale`; a scale
    /// write is recorded as the change of the parent object it makes, as kube's scale
    /// handler records it).
    pub(crate) fn for_request(
        def: &ResourceDef,
        request: &ApiRequest,
        options_kind: &str,
    ) -> ApiResult<Option<Tracker>> {
        let manager = request.param("fieldManager").unwrap_or("");
        let causes = field_manager_causes(manager);
        if !causes.is_empty() {
            return Err(options_invalid(options_kind, causes));
        }
        let subresource = request.info.subresource.as_str();
        if !matches!(subresource, "" | "status" | "scale") {
            return Ok(None);
        }
        let manager = if manager.is_empty() {
            manager_from_user_agent(request.user_agent.as_deref().unwrap_or(""))
        } else {
            manager.to_string()
        };
        Ok(Some(Tracker::new(def, subresource, manager)))
    }

    pub(crate) fn new(def: &ResourceDef, subresource: &str, manager: String) -> Tracker {
        Tracker {
            model: field_model(def),
            reset: reset_fields(def, subresource),
            api_version: def.api_version(),
            kind: def.kind.clone(),
            subresource: subresource.to_string(),
            manager,
            now: now_rfc3339(),
            custom: def.openapi_schema.is_some(),
        }
    }

    fn field_manager(&self) -> FieldManager<'_> {
        FieldManager {
            model: &self.model,
            api_version: &self.api_version,
            kind: &self.kind,
            subresource: &self.subresource,
            reset: &self.reset,
            custom: self.custom,
        }
    }

    /// A create: everything the object sets becomes the writer's.
    pub(crate) fn created(&self, object: &mut Value) {
        let fm = self.field_manager();
        fm.update(&fm.empty_object(), object, &self.manager, &self.now);
    }

    /// An update or patch of `live` into `new`.
    pub(crate) fn updated(&self, live: &Value, new: &mut Value) {
        self.field_manager()
            .update(live, new, &self.manager, &self.now);
    }

    /// `config` applied to the stored object `live`, ready to replace it.
    pub(crate) fn apply_to_live(
        &self,
        live: &Value,
        config: &Value,
        force: bool,
    ) -> ApiResult<Value> {
        let mut applied = self.apply(Some(live), config, force)?;
        // As for other patches: the stored resourceVersion riding along is not a
        // precondition; one the configuration sets is.
        if meta_str(&applied, "resourceVersion") == meta_str(live, "resourceVersion") {
            metadata_mut(&mut applied).remove("resourceVersion");
        }
        Ok(applied)
    }

    fn apply(&self, live: Option<&Value>, config: &Value, force: bool) -> ApiResult<Value> {
        self.field_manager()
            .apply(live, config, &self.manager, force, &self.now)
            .map_err(|e| match e {
                ApplyError::Conflicts(conflicts) => {
                    let causes = conflicts
                        .0
                        .iter()
                        .map(|(manager, path)| StatusCause {
                            reason: "FieldManagerConflict".into(),
                            message: format!("conflict with {manager}"),
                            field: crate::machinery::managed::path_string(path),
                        })
                        .collect();
                    ApiError {
                        code: 409,
                        reason: "Conflict",
                        message: conflicts.message(),
                        details: Some(Box::new(StatusDetails {
                            causes,
                            ..Default::default()
                        })),
                        continue_token: None,
                    }
                }
                ApplyError::BadRequest(m) => ApiError::bad_request(m),
                ApplyError::Internal(m) => ApiError::internal(m),
            })
    }
}

/// An apply configuration: YAML (JSON is YAML) holding one object, decoded and its errors
/// worded as kube's apply patcher does.
/// An apply configuration as kube's apply patcher reads it (`sigs.k8s.io/yaml.Unmarshal` into
/// a map), and go-yaml's strict complaint about its repeated keys, if any.
fn decode_apply_configuration(body: &[u8]) -> ApiResult<(Value, Option<String>)> {
    let decoded = goyaml::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "error decoding YAML: error converting YAML to JSON: {e}"
        ))
    })?;
    let strict = decoded.strict_error();
    match decoded.value {
        object @ Value::Object(_) => Ok((object, strict)),
        // An empty document or `null` is an object of no type.
        Value::Null => Err(ApiError::bad_request("invalid object type: /, Kind=")),
        other => Err(ApiError::bad_request(format!(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            }
        ))),
    }
}

/// `force` is for apply patches only (kube's `ValidatePatchOptions`).
pub(crate) fn check_no_force(request: &ApiRequest) -> ApiResult<()> {
    if request.query.iter().any(|(k, _)| k == "force") {
        return Err(options_invalid(
            "PatchOptions",
            vec![status::field_forbidden(
                "force",
                "may not be specified for non-apply patch",
            )],
        ));
    }
    Ok(())
}

/// The group/version/kind as Go prints a `GroupVersionKind` (`apps/v1, Kind=Deployment`,
/// `/v1, Kind=ConfigMap`).
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

impl Registry {
    /// An apply that creates must be allowed to `create` (kube's patch handler authorizes
    /// the create it amounts to).
    async fn authorize_create(&self, def: &ResourceDef, request: &ApiRequest) -> ApiResult<()> {
        let Some(authorizer) = self.authorizer() else {
            return Err(ApiError::internal(
                "no authorizer provided, unable to authorize a create on update",
            ));
        };
        let info = &request.info;
        let create = kubegate_policy::RequestInfo {
            verb: "create".to_string(),
            ..(*info.as_ref()).clone()
        };
        let attributes = kubegate_policy::Attributes {
            user: &request.user,
            request: &create,
        };
        // kube's withAuthorization: a 500 when the authorizer failed, else its
        // `ForbiddenStatusError`.
        let decision = authorizer.authorize(&attributes).await;
        match decision.error() {
            _ if decision.is_allowed() => Ok(()),
            Some(error) => Err(ApiError::internal(error)),
            None => Err(ApiError::forbidden_resource(
                &def.group_resource(),
                &info.name,
                &kubegate_policy::authz::forbidden_message(&attributes, decision.reason()),
            )),
        }
    }

    /// `PATCH` with an apply configuration: merged into the object (created when missing)
    /// with the manager's fields tracked, refused with 409 when it would change fields other
    /// managers own, unless `force=true`.
    pub(super) async fn apply_patch(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
        output: &Negotiated,
    ) -> ApiResult<ApiResponse> {
        let info = &request.info;
        // The options (a field manager is required) were checked with the others
        // (`write::check_write_options`).
        let manager = request.param("fieldManager").unwrap_or("");
        // As kube's parameter codec reads a `*bool`: `0` and `false` are false, all else true.
        let force = request.flag("force");
        let subresource = info.subresource.as_str();
        if !subresource.is_empty() && subresource != "status" {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!("apply patches are not supported on the {subresource} subresource"),
            ));
        }
        let (mut config, repeated_keys) = decode_apply_configuration(&request.body)?;
        let api_version = config
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
        if api_version != def.api_version() || kind != def.kind {
            return Err(ApiError::bad_request(format!(
                "invalid object type: {}",
                gvk_string(api_version, kind)
            )));
        }
        if !matches!(config.get("metadata"), None | Some(Value::Object(_))) {
            return Err(ApiError::bad_request(
                "metadata in the body of the request must be an object",
            ));
        }
        // An absent name is taken from the object the configuration is merged into; one that
        // differs from the URL's, or a create without one, is refused (kube's checkName).
        let config_name = object_name(&config).to_string();
        let name_mismatch = || {
            ApiError::bad_request(format!(
                "the name of the object ({config_name}) does not match the name on the URL ({})",
                info.name
            ))
        };
        if !config_name.is_empty() && config_name != info.name {
            return Err(name_mismatch());
        }
        // Lists the kind merges by key must name each item once (kube's field manager
        // refuses the configuration with a 500 when it cannot type it).
        let list_errors =
            crate::machinery::managed::associative_list_errors(&field_model(def), &config);
        if !list_errors.is_empty() {
            let errors = match list_errors.as_slice() {
                [one] => one.clone(),
                many => format!("errors:\n  {}", many.join("\n  ")),
            };
            return Err(ApiError::new(
                500,
                "",
                format!(
                    "failed to create typed patch object ({}/{}; {}): {errors}",
                    meta_str(&config, "namespace").unwrap_or(""),
                    config_name,
                    gvk_string(&def.api_version(), &def.kind),
                ),
            ));
        }
        check_namespace(&mut config, def, &info.namespace)?;
        let tracker = Tracker::new(def, subresource, manager.to_string());
        let mode = WriteMode {
            apply: true,
            ..WriteMode::client(request)?
        };
        // A configuration with fields the kind does not declare cannot be made a typed
        // object, whatever `fieldValidation` says: kube's field manager fails the apply with a
        // 500 naming them (structured-merge-diff's `field not declared in schema`).
        let validation = field_validation(request)?;
        let unknown = prune_unknown_fields(def, &mut config);
        if !unknown.is_empty() {
            return Err(undeclared_fields(
                def,
                &info.namespace,
                &info.name,
                &unknown,
            ));
        }
        // Repeated keys: kube's apply patcher asks go-yaml again, strictly, unless told to
        // ignore them.
        let repeated_key_warnings = match (validation, repeated_keys) {
            (FieldValidation::Strict, Some(error)) => {
                return Err(ApiError::bad_request(format!(
                    "error strict decoding YAML: error converting YAML to JSON: {error}"
                )))
            }
            (FieldValidation::Warn, Some(error)) => goyaml::strict_warnings(&error),
            _ => Vec::new(),
        };
        // Retried until it lands, as kube's store retries (only the request's deadline ends
        // it): a create that raced another one updates what that one made.
        loop {
            let updated = self
                .update_object(
                    def,
                    &info.namespace,
                    &info.name,
                    subresource,
                    mode,
                    |current| tracker.apply_to_live(current, &config, force),
                )
                .await;
            let (code, written) = match updated {
                Err(e) if e.code == 404 && subresource.is_empty() => {
                    if config_name.is_empty() {
                        // kube's checkName: the created object has no name to compare.
                        return Err(ApiError::bad_request(format!(
                            "the name of the object ({} based on URL) was undeterminable: name must be provided",
                            info.name
                        )));
                    }
                    if let Some(uid) = meta_str(&config, "uid").filter(|u| !u.is_empty()) {
                        return Err(ApiError::conflict(
                            &def.group_resource(),
                            &info.name,
                            &format!(
                                "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
                            ),
                        ));
                    }
                    self.authorize_create(def, request).await?;
                    let mut object = tracker.apply(None, &config, force)?;
                    // An apply creates through kube's update path, which stores the new
                    // object whatever resourceVersion it names (only a plain create refuses
                    // one).
                    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("resourceVersion");
                    }
                    match self.create_object(def, object, mode).await {
                        Err(e) if e.reason == "AlreadyExists" => continue,
                        created => (201, created?),
                    }
                }
                updated => (200, updated?),
            };
            let mut written = written;
            written.warnings.extend(repeated_key_warnings);
            return respond(code, def, output, written);
        }
    }
}

/// kube's error for an apply configuration with undeclared fields: `failed to create typed
/// patch object (<namespace>/<name>; <group>/<version>, Kind=<kind>): .<path>: field not
/// declared in schema` (several as structured-merge-diff lists them). `unknown` are the
/// fields' paths (`spec.x`).
fn undeclared_fields(
    def: &ResourceDef,
    namespace: &str,
    name: &str,
    unknown: &[String],
) -> ApiError {
    let errors: Vec<String> = unknown
        .iter()
        .map(|path| format!(".{path}: field not declared in schema"))
        .collect();
    let detail = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({namespace}/{name}; {}/{}, Kind={}): {detail}",
            def.group, def.version, def.kind
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_default_from_the_user_agent_like_kube() {
        assert_eq!(
            manager_from_user_agent("kubectl/v1.32.0 (linux/amd64) kubernetes/abc"),
            "kubectl"
        );
        assert_eq!(manager_from_user_agent("a\u{7}b\u{200b}c\u{a0}d/1"), "abcd");
        assert_eq!(manager_from_user_agent("my tool/1"), "my tool");
        assert_eq!(manager_from_user_agent(&"x".repeat(300)).len(), 128);
        assert_eq!(manager_from_user_agent(""), "");
    }

    #[test]
    fn invalid_field_managers_are_refused_as_kube_words_it() {
        let err = options_invalid("PatchOptions", field_manager_causes(&"m".repeat(129)));
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .starts_with("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long"),
            "{}",
            err.message
        );
        assert!(field_manager_causes("kubectl").is_empty());
        assert_eq!(gvk_string("v1", "ConfigMap"), "/v1, Kind=ConfigMap");
        assert_eq!(
            gvk_string("apps/v1", "Deployment"),
            "apps/v1, Kind=Deployment"
        );
    }
}

//! CREATE, UPDATE, PATCH, DELETE and DELETECOLLECTION: system metadata (uid, timestamps,
//! generation, resourceVersion), the resource's strategy, validation, namespace lifecycle,
//! `dryRun`, `fieldValidation`, finalizers and graceful deletion, and compare-and-swap writes
//! retried on conflict unless the client gave a resourceVersion precondition.

use std::sync::Arc;

use bytes::Bytes;
use serde::de::IgnoredAny;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{json, Map, Value};

use super::apply::{check_no_force, Tracker};
use super::encode;
use super::meta::{
    check_name, check_namespace, check_type, finalizers, meta_field, meta_str, metadata_mut,
    now_rfc3339, object_name, requested_revision, spec_changed, unchanged,
};
use super::{store_error, Registry};
use crate::api::{ApiRequest, ApiResponse};
use crate::machinery::gotime::Layout;
use crate::machinery::negotiation::{self, negotiate_output, Negotiated, PatchType};
use crate::machinery::patch::{self, PatchMeta, PatchMetaLookup, StaticPatchMeta};
use crate::machinery::protobuf::{self, Pass};
use crate::machinery::validation;
use crate::resource::{ResourceDef, SubresourceHandler, VirtualHandler};
use crate::status::{self, ApiError, ApiResult, GroupResource, StatusCause};
use crate::storage::{Revision, StoreError};
use kubegate_policy::UserInfo;

/// How many generated names a create tries before giving up (kube: 8).
const MAX_GENERATE_NAME_ATTEMPTS: usize = 8;

/// `fieldValidation` as the request gives it (kube defaults to Warn server-side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// What a write returns: the object and any `Warning` headers.
pub(crate) struct Written {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// How a write is made: for real or as a dry run, and by whom (`None` for kubegate's own
/// writes, which skip write admission).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WriteMode<'a> {
    pub dry_run: bool,
    pub requester: Option<&'a UserInfo>,
    /// A create made by an update request (PUT of a missing object), judged by
    /// [`crate::resource::WriteAdmission::admit_create_on_update`].
    pub create_on_update: bool,
    /// Records the write in `managedFields` once the strategy has prepared the object (so
    /// defaults and pruning are what is owned). `None` for kubegate's own writes and for
    /// applies, which record their fields while merging.
    pub tracker: Option<&'a Tracker>,
    /// The new object is a patched one: a `metadata.uid` it changed is an invalid update
    /// (422, field is immutable), where a PUT's is a precondition (409), as in kube, whose
    /// patcher passes no preconditions.
    pub patch: bool,
    /// A server-side apply: a write too large for the store is not tried again without its
    /// `managedFields`, as kube's patcher does not for applies.
    pub apply: bool,
}

impl<'a> WriteMode<'a> {
    /// A client's write, judged by write admission.
    pub(super) fn client(request: &'a ApiRequest) -> ApiResult<Self> {
        Ok(WriteMode {
            dry_run: dry_run(request)?,
            requester: Some(&request.user),
            create_on_update: false,
            tracker: None,
            patch: false,
            apply: false,
        })
    }
}

pub(super) fn field_validation(request: &ApiRequest) -> ApiResult<FieldValidation> {
    match request.param("fieldValidation").unwrap_or("") {
        "" | "Warn" => Ok(FieldValidation::Warn),
        "Ignore" => Ok(FieldValidation::Ignore),
        "Strict" => Ok(FieldValidation::Strict),
        other => Err(invalid_options(
            request,
            vec![field_validation_cause(other)],
        )),
    }
}

fn field_validation_cause(value: &str) -> status::StatusCause {
    status::field_not_supported("fieldValidation", value, &["", "Ignore", "Strict", "Warn"])
}

/// kube's `ValidateCreateOptions`, `ValidateUpdateOptions` and `ValidatePatchOptions` (for
/// `patch`, the request's patch type), before the body is read: every bad option of a write
/// in one 422 on the options kind, in kube's order.
pub(super) fn check_write_options(request: &ApiRequest, patch: Option<PatchType>) -> ApiResult<()> {
    let mut causes = Vec::new();
    let manager = request.param("fieldManager").unwrap_or("");
    match patch {
        Some(PatchType::Apply) if manager.is_empty() => causes.push(status::field_required(
            "fieldManager",
            "is required for apply patch",
        )),
        Some(PatchType::Apply) | None => {}
        Some(_) if request.query.iter().any(|(k, _)| k == "force") => causes.push(
            status::field_forbidden("force", "may not be specified for non-apply patch"),
        ),
        Some(_) => {}
    }
    causes.extend(super::apply::field_manager_causes(manager));
    let dry_runs: Vec<&str> = request
        .query
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect();
    causes.extend(dry_run_cause(&dry_runs));
    match request.param("fieldValidation").unwrap_or("") {
        "" | "Warn" | "Ignore" | "Strict" => {}
        other => causes.push(field_validation_cause(other)),
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid_options(request, causes))
    }
}

/// The options kind kube decodes a write's query into (`CreateOptions` for a POST...).
fn options_kind(request: &ApiRequest) -> &'static str {
    match request.method.as_str() {
        "POST" => "CreateOptions",
        "PUT" => "UpdateOptions",
        "PATCH" => "PatchOptions",
        _ => "DeleteOptions",
    }
}

/// kube's 422 for options that fail `Validate{Create,Update,Patch,Delete}Options`.
fn invalid_options(request: &ApiRequest, causes: Vec<status::StatusCause>) -> ApiError {
    ApiError::invalid("meta.k8s.io", options_kind(request), "", causes)
}

/// `ValidateDryRun`'s cause: every value must be `All`; the bad value is the whole list, as
/// kube 1.33 prints it (Go's `%#v`).
fn dry_run_cause(values: &[&str]) -> Option<status::StatusCause> {
    if values.iter().all(|v| *v == "All") {
        return None;
    }
    // kube 1.33 prints the `[]string` as Go's `%#v`.
    let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    let listed = crate::core::gojson_strings(&values);
    Some(status::StatusCause {
        reason: "FieldValueNotSupported".into(),
        message: format!("Unsupported value: {listed}: supported values: \"All\""),
        field: "dryRun".into(),
    })
}

fn dry_run(request: &ApiRequest) -> ApiResult<bool> {
    let values: Vec<&str> = request
        .query
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect();
    match dry_run_cause(&values) {
        Some(cause) => Err(invalid_options(request, vec![cause])),
        None => Ok(!values.is_empty()),
    }
}

/// Decodes a request body in its content type (JSON, YAML or protobuf).
pub(super) fn decode_request_body(request: &ApiRequest) -> ApiResult<Value> {
    decode_body_of(request, false).map(|(object, _)| object)
}

/// [`decode_request_body`] for a create or update of `def`'s objects, with kube's strict
/// decoding messages for the body's duplicate fields (`duplicate field "data.a"`), decoded
/// as Go decodes them into a built-in kind's struct or a custom resource's map.
/// A body that is not even an object of some kind is kube's `the object provided is
/// unrecognized (must be of type <Kind>)`; a protobuf envelope without a kind takes the
/// endpoint's.
fn decode_object_body(def: &ResourceDef, request: &ApiRequest) -> ApiResult<(Value, Vec<String>)> {
    let media = negotiation::request_body_type(request.content_type.as_deref())?;
    let api_version = def.api_version();
    let decoded = if request.body.is_empty() {
        // kube's decoders on nothing at all.
        Err(negotiation::BodyError::Unrecognized(
            if media == negotiation::MediaType::Protobuf {
                "empty data"
            } else {
                "couldn't get version/kind; json parse error: unexpected end of JSON input"
            }
            .into(),
        ))
    } else {
        negotiation::decode_body_for(
            media,
            &request.body,
            def.openapi_schema.is_none(),
            Some((&api_version, &def.kind)),
        )
    };
    let (object, duplicates) = decoded.map_err(|error| match error {
        negotiation::BodyError::Unrecognized(message) => unrecognized(def, &message, &request.body),
        negotiation::BodyError::Refused(error) => error,
    })?;
    Ok((object, duplicates))
}

/// kube's `transformDecodeError` for a body whose kind could not be read: the decoder's
/// message and the body summarized as `summarizeData` does (its first 30 bytes, as text when
/// it starts as JSON, else in hex).
fn unrecognized(def: &ResourceDef, message: &str, body: &[u8]) -> ApiError {
    const SUMMARY: usize = 30;
    let summary = match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') if body.len() > SUMMARY => {
            format!("{} ...", String::from_utf8_lossy(&body[..SUMMARY]))
        }
        Some(b'{') => String::from_utf8_lossy(body).into_owned(),
        Some(_) => {
            let hex: String = body
                .iter()
                .take(SUMMARY)
                .map(|b| format!("{b:02x}"))
                .collect();
            if body.len() > SUMMARY {
                format!("{hex} ...")
            } else {
                hex
            }
        }
    };
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {}): {message} ({summary})",
        def.kind
    ))
}

fn decode_body_of(request: &ApiRequest, typed: bool) -> ApiResult<(Value, Vec<String>)> {
    if request.body.is_empty() {
        return Err(ApiError::bad_request("the body of the request was empty"));
    }
    let media = negotiation::request_body_type(request.content_type.as_deref())?;
    negotiation::decode_body_noting_duplicates(media, &request.body, typed)
}

/// The strategic-merge-patch directives of a resource: its own plus ObjectMeta's.
struct ResourcePatchMeta<'a>(&'a ResourceDef);

impl PatchMetaLookup for ResourcePatchMeta<'_> {
    fn lookup(&self, path: &[&str]) -> Option<PatchMeta> {
        StaticPatchMeta(self.0.patch_meta)
            .lookup(path)
            .or_else(|| StaticPatchMeta(patch::OBJECT_META_PATCH_META).lookup(path))
    }
}

pub(super) fn warning_header(message: &str) -> String {
    format!("299 - {}", serde_json::Value::String(message.to_string()))
}

pub(super) fn respond(
    status: u16,
    def: &ResourceDef,
    output: &Negotiated,
    written: Written,
) -> ApiResult<ApiResponse> {
    let bytes = Bytes::from(serde_json::to_vec(&written.object).map_err(ApiError::internal)?);
    let mut response = encode::object_response(
        status,
        def,
        bytes,
        output,
        crate::machinery::table::IncludeObject::Metadata,
    )?;
    for w in written.warnings {
        response = response.with_header("Warning", warning_header(&w));
    }
    Ok(response)
}

/// Whether a 404 says that `def`'s object `name` is missing (kube's NotFound names the
/// resource and the object in its details).
fn names_object(error: &ApiError, def: &ResourceDef, name: &str) -> bool {
    error
        .details
        .as_ref()
        .is_none_or(|d| d.name == name && d.kind == def.plural && d.group == def.group)
}

/// Sets `metadata.resourceVersion` on an object returned to a client.
fn with_revision(mut object: Value, revision: Revision) -> Value {
    metadata_mut(&mut object).insert("resourceVersion".into(), json!(revision.to_string()));
    object
}

/// What the store keeps: the object in its stored shape, without its resourceVersion (the
/// revision is the truth), and the storage form itself when the CRD's conversion webhook made
/// it (the answer is converted back from it: [`answer_after_write`]).
async fn storage_bytes(def: &ResourceDef, object: &Value) -> ApiResult<(Bytes, Option<Value>)> {
    let converted = super::convert::storage_form(def, object).await?;
    let bytes = match &converted {
        Some(stored) => {
            serde_json::to_vec(&AsStored(&def.strategy.encode_for_storage(stored.clone())))
        }
        None if def.strategy.converts_storage() => {
            serde_json::to_vec(&AsStored(&def.strategy.encode_for_storage(object.clone())))
        }
        None => serde_json::to_vec(&AsStored(object)),
    };
    Ok((Bytes::from(bytes.map_err(ApiError::internal)?), converted))
}

/// Drops the fields `def`'s kind does not have from `object`; returns their paths
/// (`spec.x`), the strategy's own pruning first.
pub(super) fn prune_unknown_fields(def: &ResourceDef, object: &mut Value) -> Vec<String> {
    match def.strategy.prune_unknown_fields(object) {
        Some(unknown) => unknown,
        None => super::fields::prune_unknown_fields(&def.definition, object),
    }
}

/// Why a write did not reach the store: the object did not encode, or the store refused it.
enum Failed {
    Encoding(ApiError),
    Store(StoreError),
}

/// kube's answer to a write too large for etcd: once more without `managedFields` (which can
/// be large), unless it is an apply (kube's create, update and patch handlers). Says whether
/// there was anything to drop.
fn without_managed_fields_to_retry(mode: &WriteMode<'_>, object: &mut Value) -> bool {
    !mode.apply
        && object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove("managedFields"))
            .is_some()
}

/// What a dry-run write answers with: the object as it would be stored and read back, which
/// for a custom resource converted by its CRD's webhook means through the webhook both ways
/// (kube's dry-run storage runs the object through the storage codec), so a dry run fails
/// where the write would.
/// Tells a strategy that a create or update it prepared did not reach the store, unless
/// [`Abandoned::stored`] says it did: dropped on every early return (a dry run, a refusal, a
/// failed write, a conflict retried with a fresh preparation).
struct Abandoned<'a> {
    strategy: &'a dyn crate::resource::Strategy,
    namespace: String,
    name: String,
    stored: bool,
}

impl<'a> Abandoned<'a> {
    fn new(def: &'a ResourceDef, object: &Value) -> Self {
        Abandoned {
            strategy: def.strategy.as_ref(),
            namespace: super::object_namespace(object).to_string(),
            name: object_name(object).to_string(),
            stored: false,
        }
    }

    fn stored(&mut self) {
        self.stored = true;
    }
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if !self.stored {
            self.strategy.write_abandoned(&self.namespace, &self.name);
        }
    }
}

async fn dry_run_answer(def: &ResourceDef, object: Value) -> ApiResult<Value> {
    match super::convert::storage_form(def, &object).await? {
        Some(stored) => super::convert::served_after_write(def, stored).await,
        None => read_back(def, object),
    }
}

/// A custom resource written through one version is answered as that version reads what was
/// stored (kube decodes its store's output): the storage version's defaults, this version's
/// pruning.
fn read_back(def: &ResourceDef, object: Value) -> ApiResult<Value> {
    if !def.strategy.is_custom_resource() {
        return Ok(object);
    }
    let stored = def.strategy.encode_for_storage(object);
    // Written in the storage version: it is already as that version reads it.
    if stored.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str()) {
        return Ok(stored);
    }
    def.strategy.decode_stored(stored)
}

/// The object a write answers with, at `revision`: what was written, or, when the CRD's
/// webhook converted it for storage, the stored form converted back (as kube decodes what
/// its store returns).
async fn answer_after_write(
    def: &ResourceDef,
    object: Value,
    stored: Option<Value>,
    revision: Revision,
) -> ApiResult<Value> {
    match stored {
        Some(stored) => {
            let served =
                super::convert::served_after_write(def, with_revision(stored, revision)).await?;
            Ok(with_revision(served, revision))
        }
        None => Ok(with_revision(read_back(def, object)?, revision)),
    }
}

/// An object encoded as stored: as it is but for `metadata.resourceVersion`, left out without
/// copying the object to remove it.
struct AsStored<'a>(&'a Value);

impl Serialize for AsStored<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(members) = self.0 else {
            return self.0.serialize(serializer);
        };
        let mut out = serializer.serialize_map(Some(members.len()))?;
        for (key, value) in members {
            match value {
                Value::Object(meta) if key == "metadata" => {
                    out.serialize_entry(key, &MetaAsStored(meta))?
                }
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

struct MetaAsStored<'a>(&'a Map<String, Value>);

impl Serialize for MetaAsStored<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        for (key, value) in self.0 {
            if key != "resourceVersion" {
                out.serialize_entry(key, value)?;
            }
        }
        out.end()
    }
}

/// kube's decoding of a request body into the kind's Go type, which comes before anything
/// else looks at it: the strategy's own checks (base64, and worded kind by kind), then every
/// field's JSON type against the kind's schema, time fields parsed (and written back in
/// kube's form). Failures are 400s, and nothing is written.
fn check_decoding(def: &ResourceDef, object: &mut Value) -> ApiResult<()> {
    def.strategy.check_decode(object)?;
    super::go_types::decode(&def.definition, object).map_err(|error| decode_error(def, &error))
}

/// A custom resource's body must name its kind, as kube's unstructured decoder requires
/// (`Object 'Kind' is missing`, with the body summarized as kube's `summarizeData` does).
fn check_kind_named(def: &ResourceDef, object: &Value, body: &[u8]) -> ApiResult<()> {
    let named = object
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| !k.is_empty());
    if named || !def.strategy.requires_kind() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(body);
    Err(unrecognized(
        def,
        &format!("Object 'Kind' is missing in '{text}'"),
        body,
    ))
}

/// kube's 400 for a body its decoder refuses (`transformDecodeError`).
fn decode_error(def: &ResourceDef, error: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {error}",
        kind = def.kind,
        version = def.version,
    ))
}

/// kube's patcher's 422 for a patched object that does not decode: `patch: Invalid value:`
/// the patched object's JSON (keys sorted, as Go writes a map) for JSON and merge patches,
/// the patch as Go prints a map (`map[data:map[a:1]]`) for a strategic merge patch.
fn invalid_patch(
    patch_type: PatchType,
    patch_bytes: &[u8],
    patched: &Value,
    error: &str,
) -> ApiError {
    let value = match patch_type {
        PatchType::StrategicMerge => serde_json::from_slice::<Value>(patch_bytes)
            .map(|patch| go_print(&patch))
            .unwrap_or_default(),
        _ => serde_json::to_string(&crate::machinery::sorted_keys(patched)).unwrap_or_default(),
    };
    ApiError::invalid(
        "",
        "",
        "",
        vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: {error}",
                crate::machinery::go_quote(&value)
            ),
            field: "patch".into(),
        }],
    )
}

/// A decoded JSON value as Go's `%+v` prints it (maps with sorted keys, slices in brackets,
/// strings bare, `<nil>`).
fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_print).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_print(&map[k])))
                .collect();
            format!("map[{}]", fields.join(" "))
        }
    }
}

/// What the namespace lifecycle check reads of a Namespace, decoded without building the rest
/// of the object (every namespaced create reads it).
#[derive(Deserialize)]
struct NamespaceState {
    #[serde(default)]
    metadata: NamespaceMeta,
    #[serde(default)]
    status: NamespacePhase,
}

#[derive(Deserialize, Default)]
struct NamespaceMeta {
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct NamespacePhase {
    phase: Option<String>,
}

impl NamespaceState {
    fn terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
            || self.status.phase.as_deref() == Some("Terminating")
    }
}

/// kube's store refusing an update without `metadata.resourceVersion` for a kind that does not
/// allow unconditional updates: the resource (not the kind) qualifies the error, and the
/// missing version is Go's uint64 zero as `%#v` prints it.
fn resource_version_required(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::invalid(
        &def.group,
        &def.plural,
        name,
        vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: 0x0: must be specified for an update".into(),
            field: "metadata.resourceVersion".into(),
        }],
    )
}

fn invalid(def: &ResourceDef, object: &Value, causes: Vec<StatusCause>) -> ApiError {
    ApiError::invalid(&def.group, &def.kind, object_name(object), causes)
}

impl Registry {
    fn validate_meta(&self, def: &ResourceDef, object: &Value) -> Vec<StatusCause> {
        let meta = object.get("metadata").unwrap_or(&Value::Null);
        let mut causes =
            validation::validate_object_meta(meta, def.namespaced, def.strategy.name_rule());
        crate::machinery::schema::validate_managed_fields(
            "metadata",
            meta.get("managedFields"),
            &mut causes,
        );
        if def.strategy.kube_finalizer_names() {
            causes.extend(validation::validate_kube_finalizer_names(meta));
        }
        causes
    }

    /// Unknown fields per `fieldValidation` ([`Registry::unknown_fields`]) for a create or an
    /// update, whose strict decoding error is kube's 400 for a body it cannot decode.
    /// `earlier` are the body's other strict decoding errors (its duplicate fields).
    pub(super) fn handle_unknown_fields(
        &self,
        def: &ResourceDef,
        object: &mut Value,
        mode: FieldValidation,
        earlier: Vec<String>,
    ) -> ApiResult<Vec<String>> {
        self.unknown_fields(def, object, mode, earlier)
            .map_err(|error| decode_error(def, &error))
    }

    /// Drops the fields the kind does not have (in every mode: kube's typed decoding drops
    /// them, so they are never stored); their warnings under `Warn`, kube's strict decoding
    /// error (`strict decoding error: unknown field "x"`) under `Strict`, after the `earlier`
    /// strict errors of the body (duplicate fields, a patch's own).
    pub(super) fn unknown_fields(
        &self,
        def: &ResourceDef,
        object: &mut Value,
        mode: FieldValidation,
        earlier: Vec<String>,
    ) -> Result<Vec<String>, String> {
        let unknown = prune_unknown_fields(def, object);
        if unknown.is_empty() && earlier.is_empty() {
            return Ok(Vec::new());
        }
        let mut messages = earlier;
        messages.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
        if mode == FieldValidation::Strict {
            return Err(format!("strict decoding error: {}", messages.join(", ")));
        }
        Ok(if mode == FieldValidation::Warn {
            messages
                .iter()
                .flat_map(|m| crate::machinery::goyaml::strict_warnings(m))
                .collect()
        } else {
            Vec::new()
        })
    }

    /// kube's NamespaceLifecycle admission: refuses writes into a missing namespace, and
    /// creates (subresources' too: a token, an eviction) into a terminating one, with kube's
    /// messages. `name`: the object's as the request gave it.
    pub(crate) async fn check_namespace_lifecycle(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        creating: bool,
    ) -> ApiResult<()> {
        if !def.namespaced || self.options.namespaces_elsewhere {
            return Ok(());
        }
        let Some(ns_def) = self.find("", "namespaces") else {
            return Ok(());
        };
        let key = ns_def.key("", namespace);
        // None: missing; Some(terminating).
        let state = || -> ApiResult<Option<bool>> {
            let Some(cached) = self.cacher.get(&key) else {
                return Ok(None);
            };
            let ns: NamespaceState =
                serde_json::from_slice(&cached.bytes).map_err(ApiError::internal)?;
            Ok(Some(ns.terminating()))
        };
        // Like kube's NamespaceLifecycle admission: the cache may allow the write, but a
        // refusal is confirmed against the store (a namespace created moments ago, through
        // any replica, may not be cached yet), so creates skip the store round trip.
        let mut terminating = state()?;
        if terminating.is_none() || (creating && terminating == Some(true)) {
            self.sync_cache().await?;
            terminating = state()?;
        }
        let Some(terminating) = terminating else {
            return Err(ApiError::not_found(&ns_def.group_resource(), namespace));
        };
        if terminating && creating {
            let mut error = ApiError::forbidden_resource(
                &def.group_resource(),
                name,
                &format!("unable to create new content in namespace {namespace} because it is being terminated"),
            );
            if let Some(d) = error.details.as_mut() {
                d.causes.push(StatusCause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {namespace} is being terminated"),
                    field: "metadata.namespace".into(),
                });
            }
            return Err(error);
        }
        Ok(())
    }

    pub(super) async fn create(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if !request.info.name.is_empty() && request.info.subresource.is_empty() {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                "create",
            ));
        }
        if !request.info.subresource.is_empty() {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                "create",
            ));
        }
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        check_write_options(request, None)?;
        let (mut object, duplicates) = decode_object_body(def, request)?;
        check_kind_named(def, &object, &request.body)?;
        check_type(&mut object, def, &def.kind)?;
        if def.strategy.terminating() {
            // kube's CRD handler refuses a create while the CRD is being deleted before it
            // looks at the object: a 405 with its own message.
            let mut refused = ApiError::method_not_supported(&def.group_resource(), "create");
            refused.message =
                "create not allowed while custom resource definition is terminating".into();
            return Err(refused);
        }
        check_namespace(&mut object, def, &request.info.namespace)?;
        let mut warnings =
            self.handle_unknown_fields(def, &mut object, field_validation(request)?, duplicates)?;
        warnings.extend(super::meta::dedup_owner_references(&mut object, false));
        let tracker = Tracker::for_request(def, request, "CreateOptions")?;
        let mode = WriteMode {
            tracker: tracker.as_ref(),
            ..WriteMode::client(request)?
        };
        let mut written = self.create_object(def, object, mode).await?;
        written.warnings.extend(warnings);
        respond(201, def, &output, written)
    }

    /// Creates an object (already typed and namespaced): fills system metadata, applies the
    /// strategy, validates and writes it.
    pub(crate) async fn create_object(
        &self,
        def: &ResourceDef,
        object: Value,
        mode: WriteMode<'_>,
    ) -> ApiResult<Written> {
        let generated = object_name(&object).is_empty()
            && meta_str(&object, "generateName").is_some_and(|p| !p.is_empty());
        if !generated {
            return self.create_once(def, object, mode).await;
        }
        // kube retries a generated name that collides (RetryGenerateName).
        let mut last = None;
        for _ in 0..MAX_GENERATE_NAME_ATTEMPTS {
            match self.create_once(def, object.clone(), mode).await {
                Err(e) if e.reason == "AlreadyExists" => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| ApiError::internal("name generation failed")))
    }

    async fn create_once(
        &self,
        def: &ResourceDef,
        mut object: Value,
        mode: WriteMode<'_>,
    ) -> ApiResult<Written> {
        let dry_run = mode.dry_run;
        // kube's store refuses a resourceVersion that parses to a revision (one that does not,
        // or `0`, is replaced like any other) when it writes, after admission and validation,
        // and a dry run never gets there; its plain error is a 500 without a reason.
        let version_set = super::meta::object_resource_version(&object).is_ok_and(|rv| rv != 0);
        // kube decodes the body into its Go type before anything else looks at it: a mistyped
        // field the server would overwrite (`uid: 5`) is still the decoder's 400.
        check_decoding(def, &mut object)?;
        // kube's admission names the object as the request did: a generated name is made
        // after it (by the store's BeforeCreate), so its refusals name the prefix.
        let requested_name = match object_name(&object) {
            "" => meta_str(&object, "generateName").unwrap_or("").to_string(),
            name => name.to_string(),
        };
        {
            let meta = metadata_mut(&mut object);
            let name_missing = meta
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty();
            if name_missing {
                if let Some(prefix) = meta
                    .get("generateName")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
                {
                    let name = validation::generate_name(prefix);
                    meta.insert("name".into(), Value::String(name));
                }
            }
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
            meta.remove("selfLink");
            // A kind that tracks generations starts at 1; others keep what the client sent
            // (validated as kube's ObjectMeta validation does: not negative).
            if def.strategy.tracks_generation() {
                meta.insert("generation".into(), json!(1));
            }
        }
        super::meta::drop_empty_meta_collections(&mut object);
        go_round_trip(def, &mut object, Pass::Decode);
        let sent = sent_assigned_fields(def, &object);
        def.strategy.prepare_for_create(&mut object);
        let mut abandoned = Abandoned::new(def, &object);
        if let Some(tracker) = mode.tracker {
            record_write(&sent, &mut object, |view| tracker.created(view));
        }
        // Recorded as decoded, stored as protobuf gives it back (empty lists as `null`).
        go_round_trip(def, &mut object, Pass::Store);
        let namespace = super::object_namespace(&object).to_string();
        let name = object_name(&object).to_string();
        // A create reads nothing before its write (etcd's create-if-absent decides
        // AlreadyExists); only a dry run answers that from the cache, which must be current.
        if dry_run {
            self.sync_cache().await?;
        }
        // kube's NamespaceLifecycle is admission, before the storage looks at the object: a
        // create in a missing or terminating namespace is refused before validation, and
        // before anything is allocated for it.
        self.check_namespace_lifecycle(def, &namespace, &requested_name, true)
            .await?;
        // Write admission (RBAC's escalation check, a create-on-update's authorization) comes
        // before validation, as kube's RBAC storage and update handler judge the request
        // before the object: an escalating write of an invalid Role is a 403, not a 422.
        match (mode.requester, &def.admission) {
            (Some(user), Some(admission)) if mode.create_on_update => {
                admission.admit_create_on_update(user, &object).await?
            }
            (Some(user), Some(admission)) => admission.admit(user, &object, None).await?,
            // kube's answer when nothing can authorize the create an update would make.
            (Some(_), None) if mode.create_on_update => {
                return Err(ApiError::internal(
                    "no authorizer provided, unable to authorize a create on update",
                ))
            }
            _ => {}
        }
        let mut causes = self.validate_meta(def, &object);
        causes.extend(def.strategy.validate(&object));
        if !causes.is_empty() {
            return Err(invalid(def, &object, causes));
        }
        let warnings = def.strategy.warnings(&object, None);
        def.strategy.canonicalize(&mut object);
        if version_set && !dry_run {
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        def.strategy.begin_write(&object, None)?;
        let claimed = match def
            .strategy
            .claim(self.store().as_ref(), &object, None, dry_run)
        {
            Some(claiming) => {
                claiming.await?;
                !dry_run
            }
            None => false,
        };
        if dry_run {
            if self.cacher.get(&def.key(&namespace, &name)).is_some() {
                return Err(self.already_exists(def, &namespace, &name));
            }
            return Ok(Written {
                object: dry_run_answer(def, object).await?,
                warnings,
            });
        }
        let key = def.key(&namespace, &name);
        let mut created = self.store_create(def, &key, &object).await;
        if matches!(created, Err(Failed::Store(StoreError::TooLarge(_))))
            && without_managed_fields_to_retry(&mode, &mut object)
        {
            created = self.store_create(def, &key, &object).await;
        }
        let created = created.map_err(|error| match error {
            Failed::Store(StoreError::AlreadyExists(_)) => {
                self.already_exists(def, &namespace, &name)
            }
            Failed::Store(other) => store_error(other),
            Failed::Encoding(error) => error,
        });
        let (revision, stored) = match created {
            Ok(created) => created,
            Err(error) => {
                if claimed {
                    // Give back what this create claimed and the object stored under its name
                    // (if any) does not hold, as kube reverts a failed create's allocations.
                    let existing: Option<Value> = match self.store().get(&key).await {
                        Ok(Some(kv)) => serde_json::from_slice(&kv.value).ok(),
                        _ => None,
                    };
                    let after =
                        def.strategy
                            .after_write(self.store().as_ref(), existing.as_ref(), &object);
                    if let Some(after) = after {
                        after.await;
                    }
                }
                return Err(error);
            }
        };
        abandoned.stored();
        Ok(Written {
            object: answer_after_write(def, object, stored, revision).await?,
            warnings,
        })
    }

    /// A create of a resource that is computed, not stored (reviews).
    pub(super) async fn create_virtual(
        &self,
        def: &ResourceDef,
        handler: &dyn VirtualHandler,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if request.info.verb != "create" || !request.info.name.is_empty() {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                &request.info.verb,
            ));
        }
        let output = negotiate_output(request.accept.as_deref(), false, || def.has_protobuf())?;
        let mut object = decode_request_body(request)?;
        check_type(&mut object, def, &def.kind)?;
        if def.namespaced {
            check_namespace(&mut object, def, &request.info.namespace)?;
        }
        let answer = handler.create(request, object).await?;
        encode::json_value_response(201, &answer, &output)
    }

    /// A create on a subresource with its own handler (e.g. `serviceaccounts/x/token`).
    pub(super) async fn create_subresource(
        &self,
        def: &ResourceDef,
        handler: &dyn SubresourceHandler,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let info = &request.info;
        if info.verb != "create" {
            return Err(ApiError::method_not_supported(
                &GroupResource::new(
                    def.group.clone(),
                    format!("{}/{}", def.plural, info.subresource),
                ),
                &info.verb,
            ));
        }
        let output = negotiate_output(request.accept.as_deref(), false, || def.has_protobuf())?;
        let (kind, api_version) = handler.kind();
        let mut body = decode_request_body(request)?;
        if let Some(map) = body.as_object_mut() {
            match map.get("kind").and_then(Value::as_str) {
                None | Some("") => {
                    map.insert("kind".into(), json!(kind));
                }
                Some(k) if k == kind => {}
                Some(k) => {
                    return Err(ApiError::bad_request(format!(
                        "the kind in the data ({k}) does not match the expected kind ({kind}) for the endpoint"
                    )))
                }
            }
            map.entry("apiVersion")
                .or_insert_with(|| json!(api_version));
        } else {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        // Admission (NamespaceLifecycle) before the storage looks for the parent.
        self.check_namespace_lifecycle(def, &info.namespace, &info.name, true)
            .await?;
        let parent = self.get_object(def, &info.namespace, &info.name).await?;
        let (answer, warnings) = handler.create(request, &parent, body).await?;
        let mut response = encode::json_value_response(201, &answer, &output)?;
        for warning in warnings {
            response = response.with_header("Warning", warning_header(&warning));
        }
        Ok(response)
    }

    /// Writes a new object's storage bytes: its revision and the storage form when a
    /// conversion webhook made one.
    async fn store_create(
        &self,
        def: &ResourceDef,
        key: &str,
        object: &Value,
    ) -> Result<(Revision, Option<Value>), Failed> {
        let (bytes, stored) = storage_bytes(def, object).await.map_err(Failed::Encoding)?;
        let revision = self
            .store()
            .create(key, bytes)
            .await
            .map_err(Failed::Store)?;
        Ok((revision, stored))
    }

    /// Writes an updated object's storage bytes over `revision`.
    async fn store_update(
        &self,
        def: &ResourceDef,
        key: &str,
        object: &Value,
        revision: Revision,
    ) -> Result<(Revision, Option<Value>), Failed> {
        let (bytes, stored) = storage_bytes(def, object).await.map_err(Failed::Encoding)?;
        let revision = self
            .store()
            .update(key, bytes, revision)
            .await
            .map_err(Failed::Store)?;
        Ok((revision, stored))
    }

    /// 409 AlreadyExists, saying so when the existing object is on its way out.
    fn already_exists(&self, def: &ResourceDef, namespace: &str, name: &str) -> ApiError {
        let mut error = ApiError::already_exists(&def.group_resource(), name);
        let deleting = self
            .cacher
            .get(&def.key(namespace, name))
            .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .is_some_and(|o| meta_field(&o, "deletionTimestamp").is_some());
        if deleting {
            error.message = format!("object is being deleted: {}", error.message);
        }
        error
    }

    pub(super) async fn update(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        check_write_options(request, None)?;
        let (mut body, duplicates) = decode_object_body(def, request)?;
        check_kind_named(def, &body, &request.body)?;
        let info = &request.info;
        let expected_kind = def.kind.clone();
        check_type(&mut body, def, &expected_kind)?;
        check_namespace(&mut body, def, &info.namespace)?;
        check_name(&body, &info.name)?;
        let mut warnings =
            self.handle_unknown_fields(def, &mut body, field_validation(request)?, duplicates)?;
        warnings.extend(super::meta::dedup_owner_references(&mut body, false));
        let subresource = info.subresource.clone();
        let tracker = Tracker::for_request(def, request, "UpdateOptions")?;
        let mode = WriteMode {
            tracker: tracker.as_ref(),
            ..WriteMode::client(request)?
        };
        let create_on_update = subresource.is_empty() && def.strategy.allow_create_on_update();
        // kube's update parses the version first, whether the object exists or is created.
        let unconditional = match super::meta::object_resource_version(&body) {
            Ok(version) => version == 0,
            Err(error) => return Err(ApiError::new(500, "", error)),
        };
        // With create on update, a missing object is created and one created meanwhile is
        // updated, as kube's guaranteed update retries against what it finds.
        loop {
            let updated = self
                .update_object(def, &info.namespace, &info.name, &subresource, mode, |_| {
                    // Only an update of a stored object must name its version: a PUT that
                    // creates names none (kube's store checks once it found the object).
                    if unconditional && !def.strategy.allow_unconditional_update() {
                        return Err(resource_version_required(def, &info.name));
                    }
                    Ok(body.clone())
                })
                .await;
            let (status, written) = match updated {
                // Only this object missing creates it: a 404 about something else (the role a
                // binding names, say) is the answer.
                Err(e)
                    if create_on_update && e.code == 404 && names_object(&e, def, &info.name) =>
                {
                    match self.create_on_update(def, body.clone(), mode).await {
                        Err(e) if e.reason == "AlreadyExists" => continue,
                        created => (201, created?),
                    }
                }
                updated => (200, updated?),
            };
            let mut written = written;
            written.warnings.extend(warnings);
            return respond(status, def, &output, written);
        }
    }

    /// Creates the object a PUT names when nothing is stored under its name (kube's create
    /// on update): judged as a create, answered 201. A `resourceVersion` in the body is
    /// ignored, as kube's store ignores it when the update finds nothing; a `uid` is a
    /// precondition no missing object meets (409).
    async fn create_on_update(
        &self,
        def: &ResourceDef,
        mut object: Value,
        mode: WriteMode<'_>,
    ) -> ApiResult<Written> {
        if let Some(uid) = meta_str(&object, "uid").filter(|u| !u.is_empty()) {
            return Err(ApiError::conflict(
                &def.group_resource(),
                object_name(&object),
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: "),
            ));
        }
        metadata_mut(&mut object).remove("resourceVersion");
        let mode = WriteMode {
            create_on_update: true,
            ..mode
        };
        self.create_object(def, object, mode).await
    }

    pub(super) async fn patch(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        let patch_type = negotiation::patch_type(request.content_type.as_deref())?;
        check_write_options(request, Some(patch_type))?;
        if patch_type == PatchType::Apply {
            return self.apply_patch(def, request, &output).await;
        }
        check_no_force(request)?;
        let tracker = Tracker::for_request(def, request, "PatchOptions")?;
        if patch_type == PatchType::StrategicMerge && !def.strategy.supports_strategic_merge_patch()
        {
            // kube's custom-resource handler does not list strategic merge patch at all.
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let info = &request.info;
        let patch_bytes = request.body.clone();
        let lookup = ResourcePatchMeta(def);
        let mode = field_validation(request)?;
        // The body's own strict decoding errors, found once (the closure may run again).
        let body_errors = std::sync::OnceLock::new();
        // Warnings of the attempt that was written (the closure may run again on conflict).
        let warnings = std::sync::Mutex::new(Vec::new());
        let mut written = self
            .update_object(
                def,
                &info.namespace,
                &info.name,
                &info.subresource.clone(),
                WriteMode {
                    tracker: tracker.as_ref(),
                    patch: true,
                    ..WriteMode::client(request)?
                },
                |current| {
                    // kube decodes the body strictly first (under Warn and Strict), once it
                    // has the object: the body's own duplicate (and, for a JSON patch,
                    // unknown) fields are reported with the patched object's.
                    let body_errors = body_errors
                        .get_or_init(|| {
                            if mode == FieldValidation::Ignore {
                                Ok(Vec::new())
                            } else {
                                patch::strict_body_errors(patch_type, &patch_bytes)
                            }
                        })
                        .clone()?;
                    let mut patched = match patch_type {
                        PatchType::Json => patch::json_patch(current, &patch_bytes)?,
                        PatchType::Merge => patch::merge_patch(current, &patch_bytes)?,
                        PatchType::StrategicMerge => {
                            patch::strategic_merge_patch(current, &patch_bytes, &lookup)?
                        }
                        PatchType::Apply => {
                            return Err(ApiError::internal("apply patches are refused above"))
                        }
                    };
                    // The patched object is decoded into the kind's Go type as kube's patcher
                    // does: a field of the wrong type, or one the kind does not have (under
                    // Strict), fails the patch with a 422 on `patch`.
                    // (A refused decode leaves the object as it was; pruning does not, so the
                    // object a strict error names is kept, under Strict only.)
                    super::go_types::decode(&def.definition, &mut patched).map_err(|error| {
                        invalid_patch(patch_type, &patch_bytes, &patched, &error)
                    })?;
                    // The kind's own decode checks (base64 of `[]byte` fields) answer the same
                    // way; the unstructured converter a strategic merge patch goes through
                    // words a base64 error as a JSON decode.
                    def.strategy.check_decode(&patched).map_err(|refused| {
                        let prefix = format!(
                            "{kind} in version \"{version}\" cannot be handled as a {kind}: ",
                            kind = def.kind,
                            version = def.version,
                        );
                        let detail = refused
                            .message
                            .strip_prefix(&prefix)
                            .unwrap_or(&refused.message);
                        let detail = match patch_type {
                            PatchType::StrategicMerge if detail.starts_with("illegal base64") => {
                                format!("error decoding from json: {detail}")
                            }
                            _ => detail.to_string(),
                        };
                        invalid_patch(patch_type, &patch_bytes, &patched, &detail)
                    })?;
                    let unpruned = (mode == FieldValidation::Strict).then(|| patched.clone());
                    let found = self
                        .unknown_fields(def, &mut patched, mode, body_errors)
                        .map_err(|error| {
                            let named = unpruned.as_ref().unwrap_or(&patched);
                            invalid_patch(patch_type, &patch_bytes, named, &error)
                        })?;
                    let mut found = found;
                    found.extend(super::meta::dedup_owner_references(&mut patched, true));
                    *warnings.lock().unwrap_or_else(|p| p.into_inner()) = found;
                    // A patch may not move the object: its namespace and name stay the
                    // request's (kube's patcher checks both after patching).
                    check_namespace(&mut patched, def, &info.namespace)?;
                    check_name(&patched, &info.name)?;
                    // The current resourceVersion rides along in the patched object; it is a
                    // precondition only when the patch changed it (as kube's patcher sees
                    // it); otherwise conflicts are retried against the fresh object.
                    if meta_str(&patched, "resourceVersion") == meta_str(current, "resourceVersion")
                    {
                        metadata_mut(&mut patched).remove("resourceVersion");
                    }
                    Ok(patched)
                },
            )
            .await?;
        written
            .warnings
            .extend(warnings.into_inner().unwrap_or_else(|p| p.into_inner()));
        respond(200, def, &output, written)
    }

    /// The guaranteed-update loop: reads the current object, computes the new one with
    /// `mutate`, applies metadata rules, the strategy and validation, and writes it with CAS.
    /// A resourceVersion in the new object is a precondition (409 when stale); without one,
    /// conflicts are retried against the fresh object until the write lands, as kube's
    /// `GuaranteedUpdate` retries them: only the request's deadline ends it.
    pub(crate) async fn update_object<F>(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        subresource: &str,
        mode: WriteMode<'_>,
        mutate: F,
    ) -> ApiResult<Written>
    where
        F: Fn(&Value) -> ApiResult<Value>,
    {
        let dry_run = mode.dry_run;
        let key = def.key(namespace, name);
        let gr = def.group_resource();
        loop {
            self.sync_cache().await?;
            let cached = self
                .cacher
                .get(&key)
                .ok_or_else(|| ApiError::not_found(&gr, name))?;
            let current: Value = super::convert::served_value(def, &cached).await?;
            let mut object = mutate(&current)?;
            if !object.is_object() {
                return Err(ApiError::bad_request(
                    "the patched or updated object must be a JSON object",
                ));
            }
            // NamespaceLifecycle admits an update (of any subresource) only into a namespace
            // that exists: an object a force-finalized namespace left behind can only be
            // deleted.
            self.check_namespace_lifecycle(def, namespace, name, false)
                .await?;
            check_decoding(def, &mut object)?;
            super::meta::drop_empty_meta_collections(&mut object);
            go_round_trip(def, &mut object, Pass::Decode);
            if let Some(map) = object.as_object_mut() {
                map.insert("apiVersion".into(), json!(def.api_version()));
                map.insert("kind".into(), json!(def.kind));
            }
            let precondition = requested_revision(&object)?;
            if let Some(rv) = precondition {
                if rv != cached.revision {
                    return Err(ApiError::stale_resource_version(&gr, name));
                }
            }
            if object_name(&object) != name {
                return Err(invalid(
                    def,
                    &object,
                    vec![status::field_invalid(
                        "metadata.name",
                        object_name(&object),
                        "field is immutable",
                    )],
                ));
            }
            // A uid in the body is a precondition, as kube's update handler makes it; one a
            // patch changed is an immutable field changed.
            if let Some(uid) = meta_str(&object, "uid").filter(|u| !u.is_empty()) {
                let stored = meta_str(&current, "uid").unwrap_or("");
                if uid != stored && mode.patch {
                    return Err(invalid(
                        def,
                        &object,
                        vec![status::field_invalid(
                            "metadata.uid",
                            uid,
                            "field is immutable",
                        )],
                    ));
                }
                if uid != stored {
                    return Err(ApiError::conflict(
                        &gr,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {stored}"
                        ),
                    ));
                }
            }
            // No finalizer may be added once deletion has started (kube's
            // ValidateObjectMetaUpdate).
            if meta_field(&current, "deletionTimestamp").is_some() {
                let old = finalizers(&current);
                let added: Vec<String> = finalizers(&object)
                    .into_iter()
                    .filter(|f| !old.contains(f))
                    .collect();
                if !added.is_empty() {
                    let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                    return Err(invalid(
                        def,
                        &object,
                        vec![status::field_forbidden(
                            "metadata.finalizers",
                            &format!(
                                "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                                quoted.join(", ")
                            ),
                        )],
                    ));
                }
            }
            // System-owned metadata comes from the stored object, as kube's BeforeUpdate
            // takes it: a deletion timestamp the object has, a grace period the update leaves
            // out. What else the update says of those two is judged with the rest of the
            // validation (an immutable field), once the strategy has prepared the object.
            let old_meta = current.get("metadata").cloned().unwrap_or(json!({}));
            {
                let meta = metadata_mut(&mut object);
                for field in ["uid", "creationTimestamp", "generation", "namespace"] {
                    match old_meta.get(field) {
                        Some(v) => {
                            meta.insert(field.into(), v.clone());
                        }
                        None => {
                            meta.remove(field);
                        }
                    }
                }
                for field in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
                    let kept = old_meta.get(field).filter(|v| !v.is_null());
                    let overridden =
                        field == "deletionTimestamp" || meta.get(field).is_none_or(Value::is_null);
                    if let (Some(v), true) = (kept, overridden) {
                        meta.insert(field.into(), v.clone());
                    }
                }
                meta.remove("selfLink");
            }
            // The strategy takes everything but status from the stored object; the field
            // manager's record of this write stays (kube's ResetObjectMetaForStatus keeps
            // managedFields).
            let managed_fields = meta_field(&object, "managedFields").cloned();
            let sent = sent_assigned_fields(def, &object);
            match subresource {
                "status" => {
                    def.strategy
                        .prepare_for_status_update(&mut object, &current);
                    let meta = metadata_mut(&mut object);
                    match managed_fields {
                        Some(m) => meta.insert("managedFields".into(), m),
                        None => meta.remove("managedFields"),
                    };
                }
                "finalize" => def.strategy.prepare_for_finalize(&mut object, &current),
                _ => def.strategy.prepare_for_update(&mut object, &current),
            }
            let mut abandoned = Abandoned::new(def, &object);
            if let Some(tracker) = mode.tracker {
                record_write(&sent, &mut object, |view| tracker.updated(&current, view));
            }
            go_round_trip(def, &mut object, Pass::Store);
            let labels_changed = || {
                meta_field(&object, "labels").filter(|l| !l.is_null())
                    != meta_field(&current, "labels").filter(|l| !l.is_null())
            };
            if def.strategy.tracks_generation()
                && (spec_changed(&object, &current, def.has_subresource("status"))
                    || (def.strategy.generation_follows_labels() && labels_changed()))
            {
                let generation = meta_field(&current, "generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    + 1;
                metadata_mut(&mut object).insert("generation".into(), json!(generation));
            }
            // Write admission before validation, as on create.
            if let (Some(user), Some(admission)) = (mode.requester, &def.admission) {
                admission.admit(user, &object, Some(&current)).await?;
            }
            let mut causes = self.validate_meta(def, &object);
            if let Some(meta) = object.get("metadata").and_then(Value::as_object) {
                causes.extend(deletion_fields_changed(&old_meta, meta));
            }
            causes.extend(
                def.strategy
                    .validate_subresource_update(subresource, &object, &current),
            );
            if !causes.is_empty() {
                return Err(invalid(def, &object, causes));
            }
            let warnings = def.strategy.warnings(&object, Some(&current));
            def.strategy.canonicalize(&mut object);
            def.strategy.begin_write(&object, Some(&current))?;
            if let Some(claiming) =
                def.strategy
                    .claim(self.store().as_ref(), &object, Some(&current), dry_run)
            {
                claiming.await?;
            }
            // An object being deleted goes once its last finalizer is removed.
            let deleting = meta_field(&current, "deletionTimestamp").is_some();
            if deleting && finalizers(&object).is_empty() && def.strategy.ready_to_delete(&object) {
                if dry_run {
                    return Ok(Written { object, warnings });
                }
                return match self.store().delete(&key, Some(cached.revision)).await {
                    Ok((revision, _)) => {
                        if let Some(after) =
                            def.strategy
                                .after_write(self.store().as_ref(), None, &current)
                        {
                            after.await;
                        }
                        Ok(Written {
                            object: with_revision(object, revision),
                            warnings,
                        })
                    }
                    Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
                    Err(StoreError::Conflict { .. }) => {
                        Err(ApiError::stale_resource_version(&gr, name))
                    }
                    Err(StoreError::NotFound(_)) => Err(ApiError::not_found(&gr, name)),
                    Err(e) => Err(store_error(e)),
                };
            }
            if unchanged(&object, &current) {
                // Nothing to write: the stored object already holds what was prepared.
                abandoned.stored();
                return Ok(Written {
                    object: with_revision(current, cached.revision),
                    warnings,
                });
            }
            if dry_run {
                return Ok(Written {
                    object: with_revision(dry_run_answer(def, object).await?, cached.revision),
                    warnings,
                });
            }
            let mut written = self.store_update(def, &key, &object, cached.revision).await;
            if matches!(written, Err(Failed::Store(StoreError::TooLarge(_))))
                && without_managed_fields_to_retry(&mode, &mut object)
            {
                written = self.store_update(def, &key, &object, cached.revision).await;
            }
            let written = match written {
                Ok(written) => Ok(written),
                Err(Failed::Encoding(error)) => return Err(error),
                Err(Failed::Store(error)) => Err(error),
            };
            match written {
                Ok((revision, stored)) => {
                    abandoned.stored();
                    if let Some(after) =
                        def.strategy
                            .after_write(self.store().as_ref(), Some(&object), &current)
                    {
                        after.await;
                    }
                    return Ok(Written {
                        object: answer_after_write(def, object, stored, revision).await?,
                        warnings,
                    });
                }
                Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
                Err(StoreError::Conflict { .. }) => {
                    return Err(ApiError::stale_resource_version(&gr, name))
                }
                Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(&gr, name)),
                Err(e) => return Err(store_error(e)),
            }
        }
    }

    pub(super) async fn delete(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if !request.info.subresource.is_empty() {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                "delete",
            ));
        }
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        let options = DeleteOptions::from_request(request)?;
        let info = &request.info;
        let (status, object, deleted) = self
            .delete_object(def, &info.namespace, &info.name, &options)
            .await?;
        if deleted && !def.strategy.return_deleted_object() {
            let uid = meta_str(&object, "uid").unwrap_or("").to_string();
            let body = status::success_status(Some((&def.group_resource(), &info.name, &uid)));
            return encode::json_value_response(200, &body, &output);
        }
        // The object as a read answers it (kube's `transformResponseObject`): a metadata-only
        // or Table client gets that, not the object in a form it did not ask for.
        let bytes = serde_json::to_vec(&object).map_err(ApiError::internal)?;
        encode::object_response(
            status,
            def,
            bytes.into(),
            &output,
            super::read::include_object(request, &output)?,
        )
    }

    /// Deletes one object: immediately when it has no finalizers, otherwise by setting
    /// `deletionTimestamp` and leaving it to the finalizers' owners. Returns the HTTP status
    /// (200; 202 when the object stays and the client asked for `orphanDependents: false`, as
    /// kube's delete handler answers), the object, and whether it is gone.
    pub(crate) async fn delete_object(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> ApiResult<(u16, Value, bool)> {
        let key = def.key(namespace, name);
        let gr = def.group_resource();
        loop {
            self.sync_cache().await?;
            let cached = self
                .cacher
                .get(&key)
                .ok_or_else(|| ApiError::not_found(&gr, name))?;
            let current: Value = super::convert::served_value(def, &cached).await?;
            // kube's `rest.BeforeDelete` checks the preconditions first, naming the kind.
            let group_kind = crate::status::GroupResource::new(def.group.clone(), def.kind.clone());
            if let Some(uid) = &options.precondition_uid {
                let stored = meta_str(&current, "uid").unwrap_or("");
                if stored != uid.as_str() {
                    return Err(ApiError::conflict(
                        &group_kind,
                        name,
                        &format!(
                            "the UID in the precondition ({uid}) does not match the UID in record ({stored}). The object might have been deleted and then recreated"
                        ),
                    ));
                }
            }
            if let Some(rv) = &options.precondition_resource_version {
                if *rv != cached.revision.to_string() {
                    return Err(ApiError::conflict(
                        &group_kind,
                        name,
                        &format!(
                            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                            cached.revision
                        ),
                    ));
                }
            }
            super::namespaces::check_namespace_delete(def, &current)?;
            let mut marked = current.clone();
            if let Some(next) = options.garbage_collection_finalizers(&finalizers(&current)) {
                let meta = metadata_mut(&mut marked);
                if next.is_empty() {
                    meta.remove("finalizers");
                } else {
                    meta.insert("finalizers".into(), json!(next));
                }
            }
            let must_wait =
                def.strategy.begin_delete(&mut marked) || !finalizers(&marked).is_empty();
            if must_wait {
                if meta_field(&current, "deletionTimestamp").is_some() && marked == current {
                    // Already being deleted: nothing more to do.
                    return Ok((options.pending_status(), current, false));
                }
                {
                    let meta = metadata_mut(&mut marked);
                    if !meta.contains_key("deletionTimestamp") {
                        // kube's `markAsDeleting`: an object with a generation moves on to the
                        // next one, so controllers watching generations see the deletion.
                        if let Some(generation) = meta
                            .get("generation")
                            .and_then(Value::as_i64)
                            .filter(|g| *g > 0)
                        {
                            meta.insert("generation".into(), json!(generation + 1));
                        }
                        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
                        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                    }
                }
                if options.dry_run {
                    let answer = dry_run_answer(def, marked).await?;
                    return Ok((options.pending_status(), answer, false));
                }
                let (bytes, stored) = storage_bytes(def, &marked).await?;
                match self.store().update(&key, bytes, cached.revision).await {
                    Ok(revision) => {
                        self.settle_namespace_delete(def, revision).await;
                        return Ok((
                            options.pending_status(),
                            answer_after_write(def, marked, stored, revision).await?,
                            false,
                        ));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(&gr, name)),
                    Err(e) => return Err(store_error(e)),
                }
            }
            if options.dry_run {
                return Ok((200, current, true));
            }
            match self.store().delete(&key, Some(cached.revision)).await {
                Ok((revision, _)) => {
                    if let Some(after) =
                        def.strategy
                            .after_write(self.store().as_ref(), None, &current)
                    {
                        after.await;
                    }
                    return Ok((200, with_revision(current, revision), true));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(&gr, name)),
                Err(e) => return Err(store_error(e)),
            }
        }
    }

    /// Before a namespace's deletion is acknowledged, waits for this replica's cache to hold
    /// it: creates check namespaces against the cache, so content must not get into a
    /// namespace this replica has just answered as deleted (kube's NamespaceLifecycle forces
    /// live lookups after a namespace delete for the same reason). Best effort: past the
    /// wait the delete has happened all the same.
    async fn settle_namespace_delete(&self, def: &ResourceDef, revision: u64) {
        if def.group.is_empty() && def.plural == "namespaces" {
            let _ = self
                .cacher
                .wait_for_revision(revision, self.options.cache_wait)
                .await;
        }
    }

    pub(super) async fn delete_collection(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        let options = DeleteOptions::from_request(request)?;
        // Reuse LIST's selection rules (selectors, limit and continue, resourceVersion) by
        // listing first, as kube's DeleteCollection passes its list options to List; kube
        // answers with the list as it was read (its continue token included).
        let mut list_request = request.clone();
        std::sync::Arc::make_mut(&mut list_request.info).verb = "list".into();
        list_request.accept = Some("application/json".into());
        list_request.query.retain(|(k, _)| {
            matches!(
                k.as_str(),
                "labelSelector"
                    | "fieldSelector"
                    | "limit"
                    | "continue"
                    | "resourceVersion"
                    | "resourceVersionMatch"
            )
        });
        let listed = match self.list(def, &list_request).await? {
            ApiResponse::Body(b) => b.bytes(),
            ApiResponse::Watch(_) => return Err(ApiError::internal("unexpected watch")),
        };
        let mut list: Value = serde_json::from_slice(&listed).map_err(ApiError::internal)?;
        let items = list
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut deleted = Vec::new();
        for item in items {
            let namespace = super::object_namespace(&item).to_string();
            let name = object_name(&item).to_string();
            match self.delete_object(def, &namespace, &name, &options).await {
                Ok(_) => deleted.push(item),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        list["items"] = Value::Array(deleted);
        let resource_version = list
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if output.as_table {
            // The deleted items as a Table, as kube's `transformResponseObject` answers it.
            let mut keyed: Vec<_> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|item| {
                    (
                        def.strategy.table_sort_key(item),
                        encode::table_row(def, item.clone()),
                    )
                })
                .collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            let table = crate::machinery::table::table(
                &def.columns,
                keyed.into_iter().map(|(_, row)| row).collect(),
                &resource_version,
                None,
                None,
                super::read::include_object(request, &output)?,
            );
            return encode::json_value_response(200, &table, &output);
        }
        if output.as_partial_metadata {
            // A metadata-only client's deleted items, as a PartialObjectMetadataList.
            let meta = encode::ListMeta {
                resource_version: resource_version.parse().unwrap_or_default(),
                continue_token: None,
                remaining: None,
            };
            let items: Vec<bytes::Bytes> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|item| serde_json::to_vec(item).map(bytes::Bytes::from))
                .collect::<Result<_, _>>()
                .map_err(ApiError::internal)?;
            let partial = encode::partial_list(&items, &meta)?;
            return encode::json_value_response(200, &partial, &output);
        }
        encode::json_value_response(200, &list, &output)
    }
}

/// `metav1.DeleteOptions`, from the body and/or query.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub dry_run: bool,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub orphan_dependents: Option<bool>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground` (validated).
    pub propagation: Option<String>,
}

/// The finalizer through which the garbage collector orphans an object's dependents.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer that holds an object until the garbage collector deleted its dependents.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

impl DeleteOptions {
    /// kube's `deletionFinalizersForGarbageCollection` (every kind here deletes dependents by
    /// default): the finalizers an object being deleted gets for its dependents, or `None`
    /// when they stay as they are. An explicit policy wins; without one, a finalizer the
    /// object already has does.
    fn garbage_collection_finalizers(&self, finalizers: &[String]) -> Option<Vec<String>> {
        let explicit = match (self.orphan_dependents, self.propagation.as_deref()) {
            (Some(orphan), _) => Some((orphan, false)),
            (None, Some("Orphan")) => Some((true, false)),
            (None, Some("Foreground")) => Some((false, true)),
            (None, Some(_)) => Some((false, false)),
            (None, None) => None,
        };
        let (orphan, foreground) = explicit.unwrap_or_else(|| {
            match finalizers
                .iter()
                .find(|f| *f == ORPHAN_FINALIZER || *f == FOREGROUND_FINALIZER)
            {
                Some(f) if f == ORPHAN_FINALIZER => (true, false),
                Some(_) => (false, true),
                None => (false, false),
            }
        });
        let mut next: Vec<String> = finalizers
            .iter()
            .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
            .cloned()
            .collect();
        if orphan {
            next.push(ORPHAN_FINALIZER.to_string());
        }
        if foreground {
            next.push(FOREGROUND_FINALIZER.to_string());
        }
        let old: std::collections::BTreeSet<&String> = finalizers.iter().collect();
        let new: std::collections::BTreeSet<&String> = next.iter().collect();
        (old != new).then_some(next)
    }
}

impl DeleteOptions {
    /// The status of a delete that leaves the object in place (finalizers pending).
    fn pending_status(&self) -> u16 {
        if self.orphan_dependents == Some(false) {
            202
        } else {
            200
        }
    }

    fn from_request(request: &ApiRequest) -> ApiResult<DeleteOptions> {
        let mut options = DeleteOptions {
            dry_run: dry_run(request)?,
            ..Default::default()
        };
        if request.body.is_empty() {
            // kube decodes the query into the options when there is no body, and validates
            // them before anything is deleted.
            options.orphan_dependents = match request.param("orphanDependents") {
                None => None,
                Some(flag) => Some(parse_go_bool(flag).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "strconv.ParseBool: parsing \"{flag}\": invalid syntax"
                    ))
                })?),
            };
            let propagation = request.param("propagationPolicy");
            check_propagation(request, propagation, options.orphan_dependents)?;
            options.propagation = propagation.map(str::to_string);
            return Ok(options);
        }
        let body = decode_request_body(request)?;
        if let Some(kind) = body.get("kind").and_then(Value::as_str) {
            if kind != "DeleteOptions" {
                return Err(ApiError::bad_request(format!(
                    "the kind in the body ({kind}) is not DeleteOptions"
                )));
            }
        }
        if let Some(dry) = body.get("dryRun").and_then(Value::as_array) {
            let values: Vec<&str> = dry.iter().map(|v| v.as_str().unwrap_or("")).collect();
            if let Some(cause) = dry_run_cause(&values) {
                return Err(invalid_options(request, vec![cause]));
            }
            options.dry_run |= !values.is_empty();
        }
        if let Some(pre) = body.get("preconditions") {
            options.precondition_uid = pre.get("uid").and_then(Value::as_str).map(str::to_string);
            options.precondition_resource_version = pre
                .get("resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        options.orphan_dependents = body.get("orphanDependents").and_then(Value::as_bool);
        let propagation = body.get("propagationPolicy").and_then(Value::as_str);
        check_propagation(request, propagation, options.orphan_dependents)?;
        options.propagation = propagation.map(str::to_string);
        Ok(options)
    }
}

/// `ValidateDeleteOptions` on the propagation policy: one of kube's three, and not together
/// with the deprecated `orphanDependents`.
fn check_propagation(
    request: &ApiRequest,
    policy: Option<&str>,
    orphan_dependents: Option<bool>,
) -> ApiResult<()> {
    let Some(policy) = policy else {
        return Ok(());
    };
    let mut causes = Vec::new();
    if orphan_dependents.is_some() {
        causes.push(status::field_invalid(
            "propagationPolicy",
            policy,
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if !["Orphan", "Background", "Foreground"].contains(&policy) {
        causes.push(status::field_not_supported(
            "propagationPolicy",
            policy,
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid_options(request, causes))
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod namespace_state_tests {
    use super::NamespaceState;

    fn terminating(json: &str) -> bool {
        serde_json::from_str::<NamespaceState>(json)
            .expect("a namespace decodes")
            .terminating()
    }

    #[test]
    fn a_namespace_terminates_with_a_deletion_timestamp_or_the_terminating_phase() {
        assert!(!terminating(
            r#"{"metadata":{"name":"a","labels":{"x":"y"}},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}"#
        ));
        assert!(!terminating(r#"{"metadata":{"name":"a"}}"#));
        assert!(!terminating("{}"));
        // A null timestamp is Go's nil pointer: not being deleted.
        assert!(!terminating(r#"{"metadata":{"deletionTimestamp":null}}"#));
        assert!(terminating(
            r#"{"metadata":{"name":"a","deletionTimestamp":"2026-11-28T03:00:00Z"}}"#
        ));
        assert!(terminating(
            r#"{"metadata":{"name":"a"},"status":{"phase":"Terminating"}}"#
        ));
    }
}

#[cfg(test)]
mod stored_form_tests {
    use serde_json::json;

    use super::AsStored;

    #[test]
    fn the_stored_form_leaves_out_only_metadata_resource_version_and_keeps_the_order() {
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "5", "uid": "u", "labels": {"resourceVersion": "x"}},
            "data": {"resourceVersion": "kept"}
        });
        assert_eq!(
            serde_json::to_string(&AsStored(&object)).expect("encodes"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u","labels":{"resourceVersion":"x"}},"data":{"resourceVersion":"kept"}}"#
        );
        // Not an object, or metadata not one: encoded as it is.
        for odd in [json!([1]), json!({"metadata": "m", "resourceVersion": "1"})] {
            assert_eq!(
                serde_json::to_string(&AsStored(&odd)).expect("encodes"),
                odd.to_string()
            );
        }
    }
}

/// Go's JSON round trip of a built-in kind's object (nothing for custom resources). Decoded,
/// an empty `managedFields` list is not Go's nil: it is kept for the field manager, for which
/// it asks to reset the managed fields (kube's `isResetManagedFields`), and goes only when the
/// object is stored.
fn go_round_trip(def: &ResourceDef, object: &mut Value, pass: Pass) {
    let shaper = def
        .go_shaper
        .get_or_init(|| protobuf::go_json_shaper(&def.api_version(), &def.kind));
    if let Some(shape) = shaper {
        let reset = pass == Pass::Decode
            && object.pointer("/metadata/managedFields") == Some(&Value::Array(Vec::new()));
        shape(object, pass);
        if reset {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("managedFields".into(), Value::Array(Vec::new()));
            }
        }
    }
}

/// The strategy's `server_assigned_fields` of `object` as the client sent them (a pointer and
/// its value, `None` where the client left it out), before the strategy prepares it.
fn sent_assigned_fields(def: &ResourceDef, object: &Value) -> Vec<(String, Option<Value>)> {
    def.strategy
        .server_assigned_fields(object)
        .into_iter()
        .map(|pointer| {
            let value = object.pointer(&pointer).cloned();
            (pointer, value)
        })
        .collect()
}

/// Records a write in `object`'s managed fields with `record`, seen as kube's field manager
/// sees it: before the server assigned the fields in `sent`, with the values the client sent.
fn record_write(
    sent: &[(String, Option<Value>)],
    object: &mut Value,
    record: impl FnOnce(&mut Value),
) {
    if sent.is_empty() {
        record(object);
        return;
    }
    let mut view = object.clone();
    for (pointer, value) in sent {
        match value {
            Some(value) => set_pointer(&mut view, pointer, value.clone()),
            None => remove_pointer(&mut view, pointer),
        }
    }
    record(&mut view);
    let managed = meta_field(&view, "managedFields").cloned();
    let meta = metadata_mut(object);
    match managed {
        Some(managed) => meta.insert("managedFields".into(), managed),
        None => meta.remove("managedFields"),
    };
}

/// Sets the member or item at `pointer` (its parent must exist; otherwise nothing changes).
fn set_pointer(root: &mut Value, pointer: &str, value: Value) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    match root.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last.replace("~1", "/").replace("~0", "~"), value);
        }
        Some(Value::Array(items)) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = value;
            }
        }
        _ => {}
    }
}

/// Removes the member at `pointer`, if there is one.
fn remove_pointer(root: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(Value::Object(map)) = root.pointer_mut(parent) {
        map.shift_remove(&last.replace("~1", "/").replace("~0", "~"));
    }
}

/// What an update's metadata (after kube's BeforeUpdate kept a stored deletion timestamp and
/// grace period) says of the deletion fields that differs from the stored object: kube's
/// `ValidateObjectMetaUpdate` immutable-field errors. `new_meta` is the prepared object's.
fn deletion_fields_changed(old_meta: &Value, new_meta: &Map<String, Value>) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let stored = |field: &str| old_meta.get(field).filter(|v| !v.is_null());
    let sent = |field: &str| new_meta.get(field).filter(|v| !v.is_null());
    if stored("deletionTimestamp").is_none() {
        if let Some(value) = sent("deletionTimestamp") {
            let rendered = match crate::machinery::gotime::unmarshal(value, Layout::Rfc3339) {
                Ok(Some(time)) => crate::machinery::gotime::go_string(&time),
                _ => value.to_string(),
            };
            causes.push(crate::core::causes::invalid_raw(
                "metadata.deletionTimestamp",
                &rendered,
                "field is immutable",
            ));
        }
    }
    if let Some(value) = sent("deletionGracePeriodSeconds") {
        if stored("deletionGracePeriodSeconds") != Some(value) {
            causes.push(crate::core::causes::invalid_raw(
                "metadata.deletionGracePeriodSeconds",
                &value.to_string(),
                "field is immutable",
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    //! Create on update (PUT of a missing object) through the registry over a real store.

    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use kubegate_policy::{RequestInfo, UserInfo};
    use serde_json::{json, Value};

    use crate::api::{ApiRequest, ApiResponse};
    use crate::registry::{Registry, RegistryOptions};
    use crate::resource::WriteAdmission;
    use crate::status::{ApiError, ApiResult, GroupResource};
    use crate::storage::cacher::Cacher;
    use crate::storage::embedded::{EmbeddedOptions, EmbeddedStore};

    /// Records how it was asked; refuses roles named `forbidden`.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl WriteAdmission for Recorder {
        async fn admit(&self, _: &UserInfo, _: &Value, old: Option<&Value>) -> ApiResult<()> {
            let how = if old.is_some() { "update" } else { "create" };
            self.calls.lock().unwrap().push(how.into());
            Ok(())
        }

        async fn admit_create_on_update(&self, _: &UserInfo, object: &Value) -> ApiResult<()> {
            self.calls.lock().unwrap().push("create-on-update".into());
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            if name == "forbidden" {
                let gr = GroupResource::new(
                    "rbac.authorization.k8s.io".to_string(),
                    "roles".to_string(),
                );
                return Err(ApiError::forbidden_resource(&gr, name, "no"));
            }
            Ok(())
        }
    }

    struct Fixture {
        registry: Registry,
        admission: Arc<Recorder>,
        _dir: tempfile::TempDir,
    }

    /// The built-in resources, Roles judged by a [`Recorder`] unless `bare`.
    async fn fixture(bare: bool) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store =
            EmbeddedStore::open(&dir.path().join("s.redb"), EmbeddedOptions::default()).unwrap();
        let cacher = Cacher::start(store, 1000).await.unwrap();
        let admission = Arc::new(Recorder::default());
        let mut resources = crate::core::builtin_resources();
        if !bare {
            for def in resources.iter_mut().filter(|d| d.plural == "roles") {
                def.admission = Some(admission.clone());
            }
        }
        let registry = Registry::new(resources, cacher, RegistryOptions::default());
        registry.ensure_default_namespaces().await.unwrap();
        Fixture {
            registry,
            admission,
            _dir: dir,
        }
    }

    async fn call(
        f: &Fixture,
        method: &str,
        path_and_query: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let info: RequestInfo =
            kubegate_policy::request_info::resolve(method, path, query).unwrap();
        let request = ApiRequest {
            method: method.into(),
            info: info.into(),
            query: kubegate_policy::request_info::parse_query(query),
            content_type: Some("application/json".into()),
            content_length_sent: true,
            user_agent: None,
            accept: Some("application/json".into()),
            if_none_match: None,
            body: body.map(|b| Bytes::from(b.to_string())).unwrap_or_default(),
            user: Arc::new(UserInfo::new("jane", vec![])),
        };
        match f.registry.handle(request).await {
            ApiResponse::Body(b) => (
                b.status,
                serde_json::from_slice(&b.bytes()).unwrap_or(Value::Null),
            ),
            ApiResponse::Watch(_) => panic!("unexpected watch"),
        }
    }

    const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";

    fn role(name: &str, verbs: &[&str]) -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name},
            "rules": [{"verbs": verbs, "apiGroups": [""], "resources": ["pods"]}],
        })
    }

    fn calls(f: &Fixture) -> Vec<String> {
        std::mem::take(&mut *f.admission.calls.lock().unwrap())
    }

    #[tokio::test]
    async fn put_of_a_missing_role_creates_it_then_updates_it() {
        let f = fixture(false).await;
        let url = format!("{ROLES}/reader");
        // A resourceVersion in the body is ignored when nothing is stored.
        let mut body = role("reader", &["get"]);
        body["metadata"]["resourceVersion"] = json!("12345");
        let (code, created) = call(&f, "PUT", &url, Some(body)).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["metadata"]["namespace"], "default");
        assert!(created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()));
        assert_ne!(created["metadata"]["resourceVersion"], "12345");
        assert_eq!(calls(&f), ["create-on-update"]);

        let (code, got) = call(&f, "GET", &url, None).await;
        assert_eq!(code, 200);
        assert_eq!(got["rules"][0]["verbs"], json!(["get"]));

        // Now it exists: a plain update, 200, judged as an update.
        let (code, updated) = call(&f, "PUT", &url, Some(role("reader", &["get", "list"]))).await;
        assert_eq!(code, 200, "{updated}");
        assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
        assert_eq!(updated["rules"][0]["verbs"], json!(["get", "list"]));
        assert_eq!(calls(&f), ["update"]);
    }

    #[tokio::test]
    async fn create_on_update_is_judged_validated_and_dry_run_honoured() {
        let f = fixture(false).await;
        // Refused by admission: the error as is, nothing stored.
        let (code, status) = call(
            &f,
            "PUT",
            &format!("{ROLES}/forbidden"),
            Some(role("forbidden", &["get"])),
        )
        .await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(
            status["message"],
            "roles.rbac.authorization.k8s.io \"forbidden\" is forbidden: no"
        );
        assert_eq!(
            call(&f, "GET", &format!("{ROLES}/forbidden"), None).await.0,
            404
        );

        // Validated as a create.
        let mut bad = role("bad", &["get"]);
        bad["rules"][0]["verbs"] = json!([]);
        let (code, status) = call(&f, "PUT", &format!("{ROLES}/bad"), Some(bad)).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(call(&f, "GET", &format!("{ROLES}/bad"), None).await.0, 404);

        // A uid is a precondition nothing missing meets.
        let mut with_uid = role("uid", &["get"]);
        with_uid["metadata"]["uid"] = json!("abc");
        let (code, status) = call(&f, "PUT", &format!("{ROLES}/uid"), Some(with_uid)).await;
        assert_eq!(code, 409, "{status}");
        assert_eq!(
            status["message"],
            "Operation cannot be fulfilled on roles.rbac.authorization.k8s.io \"uid\": Precondition failed: UID in precondition: abc, UID in object meta: "
        );

        // Dry run: answered as created, nothing stored.
        let (code, _) = call(
            &f,
            "PUT",
            &format!("{ROLES}/dry?dryRun=All"),
            Some(role("dry", &["get"])),
        )
        .await;
        assert_eq!(code, 201);
        assert_eq!(call(&f, "GET", &format!("{ROLES}/dry"), None).await.0, 404);
    }

    #[tokio::test]
    async fn kinds_without_create_on_update_or_an_authorizer_do_not_create() {
        let f = fixture(true).await;
        // ConfigMaps do not allow create on update: kube's 404.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let (code, status) = call(
            &f,
            "PUT",
            "/api/v1/namespaces/default/configmaps/c",
            Some(cm),
        )
        .await;
        assert_eq!(code, 404, "{status}");
        assert_eq!(status["message"], "configmaps \"c\" not found");
        // Roles do, but nothing here could authorize the create: kube's internal error.
        let (code, status) =
            call(&f, "PUT", &format!("{ROLES}/r"), Some(role("r", &["get"]))).await;
        assert_eq!(code, 500, "{status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .contains("no authorizer provided, unable to authorize a create on update"),
            "{status}"
        );
        assert_eq!(call(&f, "GET", &format!("{ROLES}/r"), None).await.0, 404);
    }
}

#[cfg(test)]
mod garbage_collection_finalizer_tests {
    use super::{DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};

    fn options(orphan: Option<bool>, policy: Option<&str>) -> DeleteOptions {
        DeleteOptions {
            orphan_dependents: orphan,
            propagation: policy.map(str::to_string),
            ..Default::default()
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// kube's `deletionFinalizersForGarbageCollection`, case by case.
    #[test]
    fn the_deletion_policy_decides_the_garbage_collection_finalizers() {
        let mine = strings(&["example.com/x"]);
        let with = |f: &str| strings(&["example.com/x", f]);
        // No policy and no finalizer: background, nothing to add.
        assert_eq!(
            options(None, None).garbage_collection_finalizers(&mine),
            None
        );
        assert_eq!(
            options(None, Some("Foreground")).garbage_collection_finalizers(&mine),
            Some(with(FOREGROUND_FINALIZER))
        );
        assert_eq!(
            options(None, Some("Orphan")).garbage_collection_finalizers(&mine),
            Some(with(ORPHAN_FINALIZER))
        );
        assert_eq!(
            options(Some(true), None).garbage_collection_finalizers(&mine),
            Some(with(ORPHAN_FINALIZER))
        );
        // Background takes both away; an explicit policy replaces the other finalizer.
        assert_eq!(
            options(None, Some("Background"))
                .garbage_collection_finalizers(&with(ORPHAN_FINALIZER)),
            Some(mine.clone())
        );
        assert_eq!(
            options(None, Some("Orphan"))
                .garbage_collection_finalizers(&with(FOREGROUND_FINALIZER)),
            Some(with(ORPHAN_FINALIZER))
        );
        // Without a policy, a finalizer the object has stays.
        assert_eq!(
            options(None, None).garbage_collection_finalizers(&with(ORPHAN_FINALIZER)),
            None
        );
        assert_eq!(
            options(None, Some("Foreground"))
                .garbage_collection_finalizers(&with(FOREGROUND_FINALIZER)),
            None
        );
    }
}

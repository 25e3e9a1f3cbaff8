//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and Kubernetes strategic
//! merge patch (k8s.io/apimachinery `strategicpatch`, applied the way kube-apiserver applies
//! it), with kube-apiserver's status codes and messages for patches it rejects.
//!
//! Strategic merge patch needs to know, per field, whether a list is merged (and by which
//! key) or replaced. That knowledge comes from a [`PatchMetaLookup`]; resource definitions
//! usually list it as a [`StaticPatchMeta`] table of dotted paths.

// `ApiError` is large by design (it carries the whole Status); these functions return it as
// every registry operation does.
#![allow(clippy::result_large_err)]

use serde_json::{Map, Value};

use super::json_kind;
use super::negotiation::PatchType;
use crate::status::{field_invalid, ApiError, ApiResult};

/// kube-apiserver refuses JSON patches with more operations than this (`maxJSONPatchOperations`).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

// ---------------------------------------------------------------------------------------
// JSON patch and merge patch
// ---------------------------------------------------------------------------------------

/// Applies an RFC 6902 JSON patch to `doc`, with the leniencies of the library kube applies
/// it with ([`super::jsonpatch`]).
///
/// As kube-apiserver: a body that does not decode as a list of operations is 400 BadRequest;
/// more than 10000 operations is 413; an operation that cannot be applied (failed `test`,
/// missing path, unknown `op`) is 422 Invalid with the generic message
/// `the server rejected our request due to an error in our request`.
pub fn json_patch(doc: &Value, patch: &[u8]) -> ApiResult<Value> {
    let raw: Value = serde_json::from_slice(patch)
        .map_err(|e| ApiError::bad_request(json_syntax_message(patch, &e)))?;
    // kube decodes into `[]map[string]*json.RawMessage` first: shape errors are 400s (a
    // `null` operation is an empty one, refused when applied).
    let ops = match &raw {
        Value::Array(ops) => ops.as_slice(),
        // Go decodes `null` into an empty patch.
        Value::Null => &[],
        other => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                json_kind(other)
            )))
        }
    };
    if let Some(op) = ops.iter().find(|op| !(op.is_object() || op.is_null())) {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_kind(op)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                ops.len()
            ),
        ));
    }
    let mut out = doc.clone();
    super::jsonpatch::apply(&mut out, ops).map_err(|_| rejected())?;
    ensure_object(out)
}

/// What kube's strict decoding of a PATCH body finds before the patch is applied (under
/// `fieldValidation` Warn and Strict only): its messages (`duplicate field "data.a"`, `json
/// patch unknown field "[0].extra"`), to report with the patched object's own. A body that
/// does not decode into what kube decodes it into is its 400.
pub fn strict_body_errors(patch_type: PatchType, body: &[u8]) -> ApiResult<Vec<String>> {
    // JSON and merge patches' decode errors carry this prefix; strategic merge patches' not.
    let prefix = match patch_type {
        PatchType::Json | PatchType::Merge => "error decoding patch: ",
        PatchType::StrategicMerge | PatchType::Apply => "",
    };
    let decoded = super::duplicates::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("{prefix}{}", json_syntax_message(body, &e))))?;
    let cannot = |found: &Value, into: &str| {
        ApiError::bad_request(format!(
            "{prefix}json: cannot unmarshal {} into Go value of type {into}",
            json_kind(found)
        ))
    };
    match patch_type {
        PatchType::Json => {
            let mut errors = Vec::new();
            let ops = match &decoded.value {
                Value::Array(ops) => ops.as_slice(),
                Value::Null => &[],
                other => return Err(cannot(other, "[]handlers.jsonPatchOp")),
            };
            for (i, op) in ops.iter().enumerate() {
                let members = match op {
                    Value::Object(members) => members,
                    Value::Null => continue,
                    other => return Err(cannot(other, "handlers.jsonPatchOp")),
                };
                for (name, value) in members {
                    match name.as_str() {
                        "op" | "path" | "from" if !(value.is_string() || value.is_null()) => {
                            return Err(ApiError::bad_request(format!(
                                "{prefix}json: cannot unmarshal {} into Go struct field jsonPatchOp.{name} of type string",
                                json_kind(value)
                            )));
                        }
                        "op" | "path" | "from" | "value" => {}
                        _ => errors.push(format!("json patch unknown field \"[{i}].{name}\"")),
                    }
                }
            }
            let mut all: Vec<String> = super::duplicates::messages(&decoded.duplicates)
                .into_iter()
                .map(|m| format!("json patch {m}"))
                .collect();
            all.extend(errors);
            Ok(all)
        }
        _ => match &decoded.value {
            Value::Object(_) | Value::Null => Ok(super::duplicates::messages(&decoded.duplicates)),
            other => Err(cannot(other, "map[string]interface {}")),
        },
    }
}

/// Applies an RFC 7386 JSON merge patch to `doc`.
///
/// A body that is not JSON, or is `null` or a scalar, is 400 `Invalid JSON Patch` (the
/// evanphx/json-patch error kube-apiserver returns); a patch that turns the object into
/// something other than a JSON object is 422, as kube's decode of the result fails.
pub fn merge_patch(doc: &Value, patch: &[u8]) -> ApiResult<Value> {
    let patch: Value =
        serde_json::from_slice(patch).map_err(|_| ApiError::bad_request("Invalid JSON Patch"))?;
    match patch {
        Value::Object(_) => {
            let mut out = doc.clone();
            json_patch::merge(&mut out, &patch);
            ensure_object(out)
        }
        // A top-level array replaces the document (RFC 7386) and then cannot be an object.
        Value::Array(_) => ensure_object(patch),
        _ => Err(ApiError::bad_request("Invalid JSON Patch")),
    }
}

/// kube's 422 for a patch that applied but did not leave a usable object.
fn rejected() -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid",
        message: "the server rejected our request due to an error in our request".into(),
        details: Some(Box::default()),
        continue_token: None,
    }
}

/// A patched document must still be an object; kube reports the failed decode of the
/// result as an Invalid `patch` field.
fn ensure_object(value: Value) -> ApiResult<Value> {
    if value.is_object() {
        return Ok(value);
    }
    let detail = format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
        json_kind(&value)
    );
    Err(ApiError::invalid(
        "",
        "",
        "",
        vec![field_invalid("patch", &value.to_string(), &detail)],
    ))
}

/// A JSON parse error message, in the words of Go's `encoding/json`.
fn json_syntax_message(body: &[u8], err: &serde_json::Error) -> String {
    // Go's words when its scanner finds the error too; serde's for what only serde refuses
    // (a nesting deeper than serde's 128 levels).
    super::gojson_syntax::syntax_error(body).unwrap_or_else(|| err.to_string())
}

// ---------------------------------------------------------------------------------------
// Strategic merge patch: field metadata
// ---------------------------------------------------------------------------------------

/// How a field is patched (`patchStrategy` struct tag / `x-kubernetes-patch-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchStrategy {
    /// Lists merge: lists of maps by the merge key, lists of primitives as sets.
    Merge,
    /// The patch value replaces the field wholesale, maps included.
    Replace,
    /// Only meaningful to clients computing patches (they send `$retainKeys`); the server
    /// merges maps and replaces lists as for a field without a strategy.
    RetainKeys,
    /// `merge,retainKeys`: merges like [`PatchStrategy::Merge`].
    MergeRetainKeys,
}

impl PatchStrategy {
    /// Parses a strategy as written in struct tags: `merge`, `replace`, `retainKeys`,
    /// `merge,retainKeys` (either order).
    pub fn parse(s: &str) -> Option<PatchStrategy> {
        let mut merge = false;
        let mut retain = false;
        let mut replace = false;
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                MERGE_DIRECTIVE => merge = true,
                REPLACE_DIRECTIVE => replace = true,
                "retainKeys" => retain = true,
                _ => return None,
            }
        }
        match (merge, retain, replace) {
            (true, true, false) => Some(PatchStrategy::MergeRetainKeys),
            (true, false, false) => Some(PatchStrategy::Merge),
            (false, true, false) => Some(PatchStrategy::RetainKeys),
            (false, false, true) => Some(PatchStrategy::Replace),
            _ => None,
        }
    }

    fn merges_lists(self) -> bool {
        matches!(self, PatchStrategy::Merge | PatchStrategy::MergeRetainKeys)
    }
}

/// Patch metadata of one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchMeta {
    pub strategy: PatchStrategy,
    /// `patchMergeKey` for lists of maps (`name`, `containerPort`, `uid`, ...).
    pub merge_key: Option<String>,
}

/// Where strategic merge patch learns how fields are patched.
pub trait PatchMetaLookup {
    /// The metadata of the field at `path`: object field names from the root of the object,
    /// list elements being transparent (`["spec","template","spec","containers","ports"]`).
    /// `None` means no strategy: maps merge, lists are replaced.
    fn lookup(&self, path: &[&str]) -> Option<PatchMeta>;
}

/// A table of `(dotted path, strategy, merge key or "")`, e.g.
/// `("spec.ports", "merge", "port")`.
///
/// `metadata.finalizers` and `metadata.ownerReferences` (at the root or in any embedded
/// `metadata`, such as `spec.template.metadata`) fall back to [`OBJECT_META_PATCH_META`], since
/// every kind embeds the same ObjectMeta; entries in the table take precedence.
#[derive(Debug, Clone, Copy)]
pub struct StaticPatchMeta(pub &'static [(&'static str, &'static str, &'static str)]);

/// ObjectMeta's patch strategies (its `patchStrategy` tags).
pub const OBJECT_META_PATCH_META: &[(&str, &str, &str)] = &[
    ("metadata.finalizers", "merge", ""),
    ("metadata.ownerReferences", "merge", "uid"),
];

fn dotted_eq(dotted: &str, path: &[&str]) -> bool {
    let mut parts = dotted.split('.');
    for seg in path {
        if parts.next() != Some(*seg) {
            return false;
        }
    }
    parts.next().is_none()
}

fn meta_from_entry(strategy: &str, key: &str) -> Option<PatchMeta> {
    Some(PatchMeta {
        strategy: PatchStrategy::parse(strategy)?,
        merge_key: (!key.is_empty()).then(|| key.to_string()),
    })
}

impl PatchMetaLookup for StaticPatchMeta {
    fn lookup(&self, path: &[&str]) -> Option<PatchMeta> {
        if let Some((_, strategy, key)) = self.0.iter().find(|(p, _, _)| dotted_eq(p, path)) {
            return meta_from_entry(strategy, key);
        }
        if path.len() >= 2 {
            let tail = &path[path.len() - 2..];
            if let Some((_, strategy, key)) = OBJECT_META_PATCH_META
                .iter()
                .find(|(p, _, _)| dotted_eq(p, tail))
            {
                return meta_from_entry(strategy, key);
            }
        }
        None
    }
}

// ---------------------------------------------------------------------------------------
// Strategic merge patch: application
// ---------------------------------------------------------------------------------------

/// How kube-apiserver classifies strategic merge patch failures
/// (`interpretStrategicMergePatchError`).
#[derive(Debug)]
enum SmpError {
    /// Malformed directives: 400.
    BadRequest(String),
    /// Lists of lists: 422 with the generic message.
    Unprocessable,
    /// Everything else (missing merge keys, mismatched types, bad `$patch` values) reaches
    /// the client as an unclassified error: 500 with no reason, the error text as message.
    Other(String),
}

impl From<SmpError> for ApiError {
    fn from(e: SmpError) -> ApiError {
        match e {
            SmpError::BadRequest(m) => ApiError::bad_request(m),
            SmpError::Unprocessable => rejected(),
            SmpError::Other(m) => ApiError::new(500, "", m),
        }
    }
}

type SmpResult<T> = Result<T, SmpError>;

/// Applies a strategic merge patch to `doc` (server side, like kube-apiserver's
/// `StrategicMergeMapPatch`): maps merge recursively, `null` deletes, lists are replaced
/// unless their field has the `merge` strategy (lists of maps then merge by the merge key,
/// lists of primitives as sets), and the directives `$patch` (`replace`/`delete`, in maps and
/// list elements), `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
/// `$setElementOrder/<field>` are honoured.
///
/// Unlike kube, whose typed decode afterwards drops anything unknown, directives found in
/// values adopted wholesale (new fields, replaced lists and maps) are removed here, because
/// the result is stored as JSON as it is.
pub fn strategic_merge_patch(
    doc: &Value,
    patch: &[u8],
    meta: &dyn PatchMetaLookup,
) -> ApiResult<Value> {
    let patch: Value = serde_json::from_slice(patch)
        .map_err(|e| ApiError::bad_request(json_syntax_message(patch, &e)))?;
    let patch = match patch {
        Value::Object(m) => m,
        // Go unmarshals `null` into a nil map: an empty patch.
        Value::Null => Map::new(),
        other => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_kind(&other)
            )))
        }
    };
    let original = match doc {
        Value::Object(m) => m.clone(),
        _ => return Err(ApiError::bad_request("invalid JSON document")),
    };
    let mut path = Vec::new();
    let merged = merge_map(original, patch, &mut path, meta)?;
    Ok(Value::Object(merged))
}

/// Go's dynamic types of decoded JSON, which decide whether two values merge or replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoType {
    Nil,
    Bool,
    Int,
    Float,
    String,
    Slice,
    Map,
}

fn go_type(v: &Value) -> GoType {
    match v {
        Value::Null => GoType::Nil,
        Value::Bool(_) => GoType::Bool,
        // kube decodes patches preserving ints: `1` and `1.0` are different types.
        Value::Number(n) if n.is_f64() => GoType::Float,
        Value::Number(_) => GoType::Int,
        Value::String(_) => GoType::String,
        Value::Array(_) => GoType::Slice,
        Value::Object(_) => GoType::Map,
    }
}

fn go_type_name(v: &Value) -> &'static str {
    match go_type(v) {
        GoType::Nil => "%!s(<nil>)",
        GoType::Bool => "bool",
        GoType::Int => "int64",
        GoType::Float => "float64",
        GoType::String => "string",
        GoType::Slice => "[]interface {}",
        GoType::Map => "map[string]interface {}",
    }
}

/// Renders a value the way Go's `%v` prints decoded JSON, for error messages.
fn go_fmt(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_fmt).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => go_fmt_map(m),
    }
}

fn go_fmt_map(m: &Map<String, Value>) -> String {
    // Go prints map keys sorted.
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{k}:{}", m.get(*k).map(go_fmt).unwrap_or_default()))
        .collect();
    format!("map[{}]", parts.join(" "))
}

fn go_fmt_lists(lists: &[&[Value]]) -> String {
    let parts: Vec<String> = lists
        .iter()
        .map(|l| go_fmt(&Value::Array(l.to_vec())))
        .collect();
    format!("[{}]", parts.join(" "))
}

fn bad_arg_type(expected: &str, actual: &Value) -> SmpError {
    SmpError::Other(format!(
        "expected a {expected}, but received a {}",
        go_type_name(actual)
    ))
}

fn no_merge_key(m: &Map<String, Value>, key: &str) -> SmpError {
    SmpError::Other(format!(
        "map: {} does not contain declared merge key: {key}",
        go_fmt_map(m)
    ))
}

fn bad_patch_type(directive: &Value, m: &Map<String, Value>) -> SmpError {
    SmpError::Other(format!(
        "unknown patch type: {} in map: {}",
        go_fmt(directive),
        go_fmt_map(m)
    ))
}

/// The field metadata at `path`.
fn lookup(meta: &dyn PatchMetaLookup, path: &[String]) -> Option<PatchMeta> {
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    meta.lookup(&segments)
}

/// Keys that are patch directives rather than data.
fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE_MARKER
        || k == RETAIN_KEYS_DIRECTIVE
        || k.starts_with("$setElementOrder/")
        || k.starts_with("$deleteFromPrimitiveList/")
}

/// Prepares a patch value that is adopted as is: maps carrying `$patch` are dropped (kube's
/// `removeDirectives`), `null` map values are dropped (`discardNullValuesFromPatch`), and other
/// directive keys are removed (kube's typed decode would drop them). `None`: drop the value.
fn sanitize(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            Some(Value::Object(sanitize_map(m)))
        }
        Value::Array(a) => Some(Value::Array(sanitize_list(a))),
        other => Some(other),
    }
}

fn sanitize_map(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .filter_map(|(k, v)| sanitize(v).map(|v| (k, v)))
        .collect()
}

fn sanitize_list(a: Vec<Value>) -> Vec<Value> {
    a.into_iter().filter_map(sanitize).collect()
}

/// Trims `<prefix>/` from a directive key (kube's `extractKey`).
fn extract_key(s: &str, prefix: &str) -> SmpResult<String> {
    match s.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest.to_string()),
        _ => Err(SmpError::BadRequest(
            if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX {
                "invalid patch format of primitive list"
            } else {
                "invalid patch format of setElementOrder list"
            }
            .into(),
        )),
    }
}

/// Merges `patch` into `original` (kube's `mergeMap` with `MergeParallelList` and
/// `IgnoreUnmatchedNulls`, the server-side options).
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    path: &mut Vec<String>,
    meta: &dyn PatchMetaLookup,
) -> SmpResult<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
        return match directive.as_str() {
            Some(REPLACE_DIRECTIVE) => {
                patch.shift_remove(DIRECTIVE_MARKER);
                Ok(sanitize_map(patch))
            }
            Some(DELETE_DIRECTIVE) => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, &patch)),
        };
    }

    apply_retain_keys(&mut original, &mut patch)?;
    // Lists named by `$setElementOrder/<field>` are merged and ordered here and removed from
    // the patch, so the loop below does not merge them again.
    merge_ordered_lists(&mut original, &mut patch, path, meta)?;

    for (key, patch_v) in patch {
        let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            (extract_key(&key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?, true)
        } else {
            (key, false)
        };

        if patch_v.is_null() {
            original.shift_remove(&key);
            continue;
        }

        let orig_type = match original.get(&key) {
            Some(v) => go_type(v),
            None => {
                // A deletion list for a field that is not there changes nothing.
                if !is_delete_list {
                    if let Some(v) = sanitize(patch_v) {
                        original.insert(key, v);
                    }
                }
                continue;
            }
        };
        if orig_type != go_type(&patch_v) {
            if !is_delete_list {
                match sanitize(patch_v) {
                    Some(v) => {
                        original.insert(key, v);
                    }
                    None => {
                        original.shift_remove(&key);
                    }
                }
            }
            continue;
        }

        let orig_v = original
            .get_mut(&key)
            .map(std::mem::take)
            .unwrap_or_default();
        let merged = match (orig_v, patch_v) {
            (Value::Object(o), Value::Object(p)) => {
                path.push(key.clone());
                let strategy = lookup(meta, path).map(|m| m.strategy);
                let result = if strategy == Some(PatchStrategy::Replace) {
                    Ok(sanitize_map(p))
                } else {
                    merge_map(o, p, path, meta)
                };
                path.pop();
                Value::Object(result?)
            }
            (Value::Array(o), Value::Array(p)) => {
                path.push(key.clone());
                let field_meta = lookup(meta, path);
                let result =
                    merge_slice_handler(o, p, path, meta, field_meta.as_ref(), is_delete_list);
                path.pop();
                Value::Array(result?)
            }
            // Same primitive type: the patch value wins.
            (_, p) => p,
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// `$retainKeys`: drop every key of `original` not listed, after checking the patch only sets
/// listed keys (kube's `applyRetainKeysDirective`).
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> SmpResult<()> {
    let Some(retain) = patch.shift_remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let bad = || SmpError::BadRequest("invalid patch format of retainKeys".into());
    let Value::Array(list) = retain else {
        return Err(bad());
    };
    let listed = |k: &str| list.iter().any(|x| x.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !listed(k) {
            return Err(bad());
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// Handles every `$setElementOrder/<field>` of `patch` (kube's `mergePatchIntoOriginal`): merges
/// the field's list, then orders it by the directive; server-only items keep their relative
/// place from the live list.
fn merge_ordered_lists(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    path: &mut Vec<String>,
    meta: &dyn PatchMetaLookup,
) -> SmpResult<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.shift_remove(&key) else {
            continue;
        };
        let order = match order {
            Value::Array(a) => a,
            other => return Err(bad_arg_type("[]interface {}", &other)),
        };
        let field = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?;

        // kube fails on a `null` list here; treating it as absent is kinder and lets the
        // main merge handle a `null` in the patch (it deletes the field).
        let original_list = match original.get(&field) {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };
        let patch_list = match patch.get(&field) {
            None => None,
            Some(Value::Null) => continue,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };

        path.push(field.clone());
        let result = order_one_list(original_list, patch_list, &order, path, meta);
        path.pop();
        if let Some(list) = result? {
            original.insert(field.clone(), Value::Array(list));
        }
        patch.shift_remove(&field);
    }
    Ok(())
}

/// Merges and orders one `$setElementOrder` list; `None` when neither side has the list.
fn order_one_list(
    original_list: Option<Vec<Value>>,
    patch_list: Option<Vec<Value>>,
    order: &[Value],
    path: &mut Vec<String>,
    meta: &dyn PatchMetaLookup,
) -> SmpResult<Option<Vec<Value>>> {
    let field_meta = lookup(meta, path);
    let merge_key = field_meta
        .as_ref()
        .and_then(|m| m.merge_key.clone())
        .unwrap_or_default();
    validate_patch_with_set_order_list(patch_list.as_deref().unwrap_or(&[]), order, &merge_key)?;

    let server_order = original_list.clone().unwrap_or_default();
    let patch_values = patch_list.clone().unwrap_or_default();
    let merged = match (original_list, patch_list) {
        (Some(o), None) => o,
        (None, Some(p)) => sanitize_list(p),
        (Some(o), Some(p)) => merge_slice_handler(o, p, path, meta, field_meta.as_ref(), false)?,
        (None, None) => return Ok(None),
    };

    // kube errors out when neither list has an element; an empty result needs no ordering.
    let kind = match slice_element_type(&[&server_order, &patch_values]) {
        Ok(kind) => kind,
        Err(SmpError::Other(_)) if server_order.is_empty() && patch_values.is_empty() => {
            return Ok(Some(merged))
        }
        Err(e) => return Err(e),
    };
    let (patch_items, server_only) = if merge_key.is_empty() {
        partition_primitives(merged, order)
    } else {
        partition_maps(merged, order, &merge_key)?
    };
    normalize_element_order(
        patch_items,
        server_only,
        order,
        &server_order,
        &merge_key,
        kind,
    )
    .map(Some)
}

/// Checks that the items of the patch list appear in the same relative order as in the
/// `$setElementOrder` list (kube's `validatePatchWithSetOrderList`).
fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    order: &[Value],
    merge_key: &str,
) -> SmpResult<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let mut non_delete: Vec<&Value> = Vec::with_capacity(patch_list.len());
    for v in patch_list {
        if merge_key.is_empty() {
            non_delete.push(v);
            continue;
        }
        let Value::Object(m) = v else {
            return Err(bad_arg_type("map[string]interface {}", v));
        };
        if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
            non_delete.push(v);
        }
    }
    let (mut pi, mut si) = (0, 0);
    while pi < non_delete.len() && si < order.len() {
        if non_delete[pi]
            .as_object()
            .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
        {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(non_delete[pi], &order[si], merge_key)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < non_delete.len() && si >= order.len() {
        return Err(SmpError::Other(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER_PREFIX} list:\n{}\n",
            go_fmt(&Value::Array(patch_list.to_vec())),
            go_fmt(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> SmpResult<bool> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let l = left
        .as_object()
        .ok_or_else(|| bad_arg_type("map[string]interface {}", left))?;
    let r = right
        .as_object()
        .ok_or_else(|| bad_arg_type("map[string]interface {}", right))?;
    let lv = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
    let rv = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
    Ok(lv == rv)
}

/// Merges or replaces a list according to the field's strategy. Deletion lists
/// (`$deleteFromPrimitiveList`) apply whatever the strategy.
fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    path: &mut Vec<String>,
    meta: &dyn PatchMetaLookup,
    field_meta: Option<&PatchMeta>,
    is_delete_list: bool,
) -> SmpResult<Vec<Value>> {
    let merges = field_meta.is_some_and(|m| m.strategy.merges_lists());
    if merges || is_delete_list {
        let merge_key = field_meta
            .and_then(|m| m.merge_key.as_deref())
            .unwrap_or("");
        merge_slice(original, patch, path, meta, merge_key, is_delete_list)
    } else {
        Ok(sanitize_list(patch))
    }
}

/// The common element type of lists (kube's `sliceElementType`).
fn slice_element_type(lists: &[&[Value]]) -> SmpResult<GoType> {
    let mut prev: Option<GoType> = None;
    for list in lists {
        for v in list.iter() {
            let t = go_type(v);
            match prev {
                None => {
                    if t == GoType::Slice {
                        return Err(SmpError::Unprocessable);
                    }
                    prev = Some(t);
                }
                Some(p) if p != t => {
                    return Err(SmpError::Other(format!(
                        "list element types are not identical: {}",
                        go_fmt_lists(lists)
                    )))
                }
                Some(_) => {}
            }
        }
    }
    prev.ok_or_else(|| SmpError::Other("no elements in any of the given slices".into()))
}

/// Merges two lists (kube's `mergeSlice`): primitives as a set, maps by merge key; the
/// result keeps the patch's order for patched items and the live order for the rest.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    path: &mut Vec<String>,
    meta: &dyn PatchMetaLookup,
    merge_key: &str,
    is_delete_list: bool,
) -> SmpResult<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = slice_element_type(&[&original, &patch])?;

    if kind != GoType::Map {
        if is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let server_order = original.clone();
        let mut merged = original;
        for v in &patch {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        // Deduplicate like kube (whose set merge collapses duplicates already in the list).
        let mut deduped: Vec<Value> = Vec::with_capacity(merged.len());
        for v in merged {
            if !deduped.contains(&v) {
                deduped.push(v);
            }
        }
        let (patch_items, server_only) = partition_primitives(deduped, &patch);
        return normalize_element_order(patch_items, server_only, &patch, &server_order, "", kind);
    }

    if merge_key.is_empty() {
        return Err(SmpError::Other(format!(
            "cannot merge lists without merge key for {}",
            path.join(".")
        )));
    }
    let (original, patch) = merge_slice_with_special_elements(original, patch, merge_key)?;
    let server_order = original.clone();
    let merged =
        merge_slice_without_special_elements(original, patch.clone(), merge_key, path, meta)?;
    let (patch_items, server_only) = partition_maps(merged, &patch, merge_key)?;
    normalize_element_order(
        patch_items,
        server_only,
        &patch,
        &server_order,
        merge_key,
        kind,
    )
}

/// Applies list elements carrying `$patch` (`delete` removes every item with that key,
/// `replace` makes the rest of the patch list the new list) and returns the live list and
/// the patch without them.
fn merge_slice_with_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> SmpResult<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type("map[string]interface {}", &v));
        };
        let Some(directive) = m.get(DIRECTIVE_MARKER) else {
            plain.push(v);
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(key_value) = m.get(merge_key) else {
                    return Err(no_merge_key(m, merge_key));
                };
                original.retain(|o| o.get(merge_key) != Some(key_value));
            }
            // Keep going: other `$patch` elements of the list still need dropping.
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => {
                return Err(SmpError::Other(
                    "merging lists cannot yet be specified in the patch".into(),
                ))
            }
            _ => return Err(bad_patch_type(directive, m)),
        }
    }
    if replace {
        Ok((sanitize_list(plain), Vec::new()))
    } else {
        Ok((original, plain))
    }
}

/// Merges each patch item into the live item with the same merge key, appending new ones.
fn merge_slice_without_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
    path: &mut Vec<String>,
    meta: &dyn PatchMetaLookup,
) -> SmpResult<Vec<Value>> {
    for v in patch {
        let Value::Object(m) = v else {
            return Err(bad_arg_type("map[string]interface {}", &v));
        };
        let Some(key_value) = m.get(merge_key) else {
            return Err(no_merge_key(&m, merge_key));
        };
        let mut found = None;
        for (i, o) in original.iter().enumerate() {
            let Value::Object(om) = o else {
                return Err(SmpError::Other(format!("value for key {i} is not a map")));
            };
            if om.get(merge_key) == Some(key_value) {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => {
                let live = match std::mem::take(&mut original[i]) {
                    Value::Object(om) => om,
                    _ => Map::new(),
                };
                original[i] = Value::Object(merge_map(live, m, path, meta)?);
            }
            None => {
                if let Some(v) = sanitize(Value::Object(m)) {
                    original.push(v);
                }
            }
        }
    }
    Ok(original)
}

/// Splits primitives into those present in `by` and the rest.
fn partition_primitives(list: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    list.into_iter().partition(|v| by.contains(v))
}

/// Splits maps into those whose merge key appears in `by` and the rest.
fn partition_maps(
    list: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> SmpResult<(Vec<Value>, Vec<Value>)> {
    let mut inside = Vec::with_capacity(list.len());
    let mut outside = Vec::with_capacity(list.len());
    for v in list {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type("map[string]interface {}", &v));
        };
        let Some(key_value) = m.get(merge_key) else {
            return Err(no_merge_key(m, merge_key));
        };
        let mut found = false;
        for (i, b) in by.iter().enumerate() {
            let Value::Object(bm) = b else {
                return Err(SmpError::Other(format!("value for key {i} is not a map")));
            };
            if bm.get(merge_key) == Some(key_value) {
                found = true;
                break;
            }
        }
        if found {
            inside.push(v);
        } else {
            outside.push(v);
        }
    }
    Ok((inside, outside))
}

/// Position of `item` in `list`, comparing merge-key values for maps (kube's `index`).
fn index_of(list: &[Value], item: &Value, merge_key: &str, kind: GoType) -> Option<usize> {
    if kind == GoType::Map {
        let want = item.as_object().and_then(|m| m.get(merge_key));
        list.iter()
            .position(|v| v.as_object().and_then(|m| m.get(merge_key)) == want)
    } else {
        list.iter().position(|v| v == item)
    }
}

/// Orders patch items by `patch_order` and server-only items by `server_order`, then
/// interleaves them, server-only items keeping their place relative to the live list
/// (kube's `normalizeElementOrder`).
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> SmpResult<Vec<Value>> {
    let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    Ok(merge_sorted_slice(
        server_only,
        patch_items,
        server_order,
        merge_key,
        kind,
    ))
}

/// Stable sort of `to_sort` by position in `order` (kube's `normalizeSliceOrder`); items
/// marked `$patch: delete` go last.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> SmpResult<Vec<Value>> {
    let (to_sort, to_delete) = if kind == GoType::Map {
        for v in to_sort.iter().chain(order.iter()) {
            let Value::Object(m) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        to_sort.into_iter().partition(|v| {
            v.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE)
        })
    } else {
        (to_sort, Vec::new())
    };

    let mut keyed: Vec<(Option<usize>, Value)> = to_sort
        .into_iter()
        .map(|v| (index_of(order, &v, merge_key, kind), v))
        .collect();
    if keyed.iter().all(|(k, _)| k.is_some()) {
        keyed.sort_by_key(|(k, _)| *k);
    } else {
        // kube's comparison treats an item missing from `order` as "less" than anything;
        // reproduce Go's insertion sort so such lists come out the same.
        for i in 1..keyed.len() {
            let mut j = i;
            while j > 0 {
                let less = match (keyed[j].0, keyed[j - 1].0) {
                    (Some(a), Some(b)) => a < b,
                    _ => true,
                };
                if !less {
                    break;
                }
                keyed.swap(j, j - 1);
                j -= 1;
            }
        }
    }
    let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    out.extend(to_delete);
    Ok(out)
}

/// Interleaves two sorted lists: an item of `left` goes before the next item of `right` when
/// both are in `server_order` and it comes first there (kube's `mergeSortedSlice`).
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Vec<Value> {
    let left_pos: Vec<Option<usize>> = left
        .iter()
        .map(|v| index_of(server_order, v, merge_key, kind))
        .collect();
    let right_pos: Vec<Option<usize>> = right
        .iter()
        .map(|v| index_of(server_order, v, merge_key, kind))
        .collect();
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().zip(left_pos).peekable();
    let mut right = right.into_iter().zip(right_pos).peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((_, Some(l))), Some((_, Some(r)))) => l < r,
            (Some(_), Some(_)) => false,
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some((v, _)) = next {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The test schema of apimachinery's strategicpatch tests (`MergeItem`), in dotted paths.
    const MERGE_ITEM: StaticPatchMeta = StaticPatchMeta(&[
        ("mergingList", "merge", "name"),
        ("mergingList.mergingList", "merge", "name"),
        ("mergingList.mergingIntList", "merge", ""),
        ("mergingIntList", "merge", ""),
        ("mergeItemPtr", "merge", "name"),
        ("replacingItem", "replace", ""),
        ("retainKeysMap", "retainKeys", ""),
        ("retainKeysMap.mergingList", "merge", "name"),
        ("retainKeysMap.mergingIntList", "merge", ""),
        ("retainKeysMergingList", "merge,retainKeys", "name"),
    ]);

    /// Pod-like paths for realistic cases.
    const POD: StaticPatchMeta = StaticPatchMeta(&[
        ("spec.containers", "merge", "name"),
        ("spec.containers.ports", "merge", "containerPort"),
        ("spec.containers.env", "merge", "name"),
        ("spec.volumes", "merge,retainKeys", "name"),
    ]);

    fn smp(original: Value, patch: Value) -> Value {
        smp_with(&MERGE_ITEM, original, patch)
    }

    fn smp_with(meta: &dyn PatchMetaLookup, original: Value, patch: Value) -> Value {
        let body = serde_json::to_vec(&patch).expect("patch serializes");
        strategic_merge_patch(&original, &body, meta).expect("patch applies")
    }

    fn smp_err(original: Value, patch: Value) -> ApiError {
        let body = serde_json::to_vec(&patch).expect("patch serializes");
        match strategic_merge_patch(&original, &body, &MERGE_ITEM) {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => e,
        }
    }

    // --- strategic merge patch: cases from apimachinery's strategicpatch tests ---

    #[test]
    fn smp_merging_int_list_unions_scalars() {
        let out = smp(
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [2, 3]}),
        );
        assert_eq!(out, json!({"mergingIntList": [1, 2, 3]}));
    }

    #[test]
    fn smp_patch_delete_directive_on_nested_map_empties_it() {
        let out = smp(
            json!({"simpleMap": {"key1": 1, "key2": 1}}),
            json!({"simpleMap": {"$patch": "delete"}}),
        );
        assert_eq!(out, json!({"simpleMap": {}}));
    }

    #[test]
    fn smp_replace_directive_in_list_empties_merging_list() {
        let out = smp(
            json!({"mergingList": [{"name": 1}, {"name": 2}]}),
            json!({"mergingList": [{"$patch": "replace"}]}),
        );
        assert_eq!(out, json!({"mergingList": []}));
    }

    #[test]
    fn smp_replace_directive_in_list_keeps_the_other_items() {
        let out = smp(
            json!({"mergingList": [{"name": "a", "value": "1"}, {"name": "b"}]}),
            json!({"mergingList": [{"name": "c", "value": "3"}, {"$patch": "replace"}]}),
        );
        assert_eq!(out, json!({"mergingList": [{"name": "c", "value": "3"}]}));
    }

    #[test]
    fn smp_empty_merging_lists_stay_empty() {
        let out = smp(json!({"mergingList": []}), json!({"mergingList": []}));
        assert_eq!(out, json!({"mergingList": []}));
    }

    #[test]
    fn smp_replace_directive_at_the_root_replaces_everything() {
        let out = smp(json!({"name": 1, "value": 1}), json!({"$patch": "replace"}));
        assert_eq!(out, json!({}));
        let out = smp(
            json!({"name": 1, "value": 1}),
            json!({"other": "a", "$patch": "replace"}),
        );
        assert_eq!(out, json!({"other": "a"}));
    }

    #[test]
    fn smp_delete_directive_removes_all_duplicates() {
        let out = smp(
            json!({"mergingList": [
                {"name": 1}, {"name": 1}, {"name": 2, "value": "a"}, {"name": 3}, {"name": 3}
            ]}),
            json!({"mergingList": [
                {"name": 1, "$patch": "delete"}, {"name": 3, "$patch": "delete"}
            ]}),
        );
        assert_eq!(out, json!({"mergingList": [{"name": 2, "value": "a"}]}));
    }

    #[test]
    fn smp_merges_maps_in_list_by_key_and_keeps_patch_order() {
        let out = smp(
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]}),
            json!({"mergingList": [
                {"name": 3, "value": "c"}, {"name": 1, "value": "a"}, {"name": 2, "other": "x"}
            ]}),
        );
        assert_eq!(
            out,
            json!({"mergingList": [
                {"name": 3, "value": "c"},
                {"name": 1, "value": "a"},
                {"name": 2, "value": "b", "other": "x"}
            ]})
        );
    }

    #[test]
    fn smp_server_only_items_keep_their_live_position() {
        let out = smp(
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
        );
        assert_eq!(
            out,
            json!({"mergingList": [
                {"name": 2, "value": "b"}, {"name": 3, "value": "c"}, {"name": 1, "value": "a"}
            ]})
        );
        let out = smp(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [3, 1]}),
        );
        assert_eq!(out, json!({"mergingIntList": [2, 3, 1]}));
    }

    #[test]
    fn smp_null_deletes_fields_at_any_depth() {
        let out = smp(
            json!({"name": "n", "value": "v", "mergingList": [{"name": "a", "value": "x", "other": "y"}]}),
            json!({"value": null, "mergingList": [{"name": "a", "other": null}], "absent": null}),
        );
        assert_eq!(
            out,
            json!({"name": "n", "mergingList": [{"name": "a", "value": "x"}]})
        );
    }

    #[test]
    fn smp_nulls_in_new_values_are_discarded() {
        let out = smp(json!({}), json!({"simpleMap": {"a": "1", "b": null}}));
        assert_eq!(out, json!({"simpleMap": {"a": "1"}}));
    }

    #[test]
    fn smp_non_merging_lists_are_replaced() {
        let out = smp(
            json!({"nonMergingList": [{"name": 1}, {"name": 2}], "nonMergingIntList": [1, 2]}),
            json!({"nonMergingList": [{"name": 3}], "nonMergingIntList": [3]}),
        );
        assert_eq!(
            out,
            json!({"nonMergingList": [{"name": 3}], "nonMergingIntList": [3]})
        );
    }

    #[test]
    fn smp_replace_strategy_map_is_not_merged() {
        let out = smp(
            json!({"replacingItem": {"a": 1, "b": 2}, "simpleMap": {"a": "1"}}),
            json!({"replacingItem": {"c": 3}, "simpleMap": {"b": "2"}}),
        );
        assert_eq!(
            out,
            json!({"replacingItem": {"c": 3}, "simpleMap": {"a": "1", "b": "2"}})
        );
    }

    #[test]
    fn smp_delete_from_primitive_list() {
        let out = smp(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [2]}),
        );
        assert_eq!(out, json!({"mergingIntList": [1, 3]}));
        // Works without the merge strategy too.
        let out = smp(
            json!({"nonMergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/nonMergingIntList": [2]}),
        );
        assert_eq!(out, json!({"nonMergingIntList": [1, 3]}));
        // A missing item or list changes nothing, and never adds the list.
        let out = smp(
            json!({"mergingIntList": [1, 2]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
        );
        assert_eq!(out, json!({"mergingIntList": [1, 2]}));
        let out = smp(
            json!({"foo": ["bar"]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
        );
        assert_eq!(out, json!({"foo": ["bar"]}));
        let out = smp(
            json!({"mergingIntList": null}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
        );
        assert_eq!(out, json!({"mergingIntList": null}));
    }

    #[test]
    fn smp_set_element_order_with_add_and_delete_of_primitives() {
        let out = smp(
            json!({"mergingIntList": [1, 2, 3, 4]}),
            json!({
                "$setElementOrder/mergingIntList": [1, 2, 4],
                "$deleteFromPrimitiveList/mergingIntList": [3]
            }),
        );
        assert_eq!(out, json!({"mergingIntList": [1, 2, 4]}));
        let out = smp(
            json!({"mergingIntList": [1, 2, 3]}),
            json!({
                "$setElementOrder/mergingIntList": [1, 2, 4],
                "$deleteFromPrimitiveList/mergingIntList": [3],
                "mergingIntList": [4]
            }),
        );
        assert_eq!(out, json!({"mergingIntList": [1, 2, 4]}));
    }

    #[test]
    fn smp_set_element_order_reorders_and_merges_maps() {
        let out = smp(
            json!({"mergingList": [
                {"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"}, {"name": 3, "value": 3}
            ]}),
            json!({
                "$setElementOrder/mergingList": [{"name": 4}, {"name": 2}, {"name": 1}],
                "mergingList": [{"name": 4, "value": 4}, {"name": 3, "$patch": "delete"}]
            }),
        );
        assert_eq!(
            out,
            json!({"mergingList": [
                {"name": 4, "value": 4}, {"name": 2, "value": 2, "other": "b"}, {"name": 1, "other": "a"}
            ]})
        );
    }

    #[test]
    fn smp_set_element_order_places_server_only_items_by_live_order() {
        let out = smp(
            json!({"mergingList": [
                {"name": 1, "other": "a"}, {"name": 2, "value": 2}, {"name": 7}, {"name": 9},
                {"name": 8}, {"name": 3, "value": 3}, {"name": 4, "value": 4}
            ]}),
            json!({"$setElementOrder/mergingList": [{"name": 2}, {"name": 1}, {"name": 4}, {"name": 3}]}),
        );
        assert_eq!(
            out,
            json!({"mergingList": [
                {"name": 2, "value": 2}, {"name": 1, "other": "a"}, {"name": 7}, {"name": 9},
                {"name": 8}, {"name": 4, "value": 4}, {"name": 3, "value": 3}
            ]})
        );
        let out = smp(
            json!({"mergingList": [{"name": 1}, {"name": 3, "value": 3}, {"name": 4}, {"name": 2}, {"name": 9}]}),
            json!({"$setElementOrder/mergingList": [{"name": 4}, {"name": 2}, {"name": 3}, {"name": 1}]}),
        );
        assert_eq!(
            out,
            json!({"mergingList": [{"name": 4}, {"name": 2}, {"name": 3, "value": 3}, {"name": 1}, {"name": 9}]})
        );
    }

    #[test]
    fn smp_set_element_order_with_items_missing_from_the_list() {
        let out = smp(
            json!({"mergingList": [{"name": 1}, {"name": 3}]}),
            json!({
                "$setElementOrder/mergingList": [{"name": 3}, {"name": 2}, {"name": 1}],
                "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]
            }),
        );
        assert_eq!(
            out,
            json!({"mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]})
        );
        let out = smp(
            json!({"mergingIntList": [1, 3]}),
            json!({"$setElementOrder/mergingIntList": [3, 2, 1]}),
        );
        assert_eq!(out, json!({"mergingIntList": [3, 1]}));
    }

    #[test]
    fn smp_set_element_order_with_duplicates() {
        let out = smp(
            json!({"mergingIntList": [1, 2, 3, 2, 4]}),
            json!({"$setElementOrder/mergingIntList": [2, 1, 4, 3, 2]}),
        );
        assert_eq!(out, json!({"mergingIntList": [2, 2, 1, 4, 3]}));
        let out = smp(
            json!({"mergingList": [
                {"name": 1}, {"name": 2, "value": "dup1"}, {"name": 3}, {"name": 2, "value": "dup2"}, {"name": 4}
            ]}),
            json!({"$setElementOrder/mergingList": [{"name": 2}, {"name": 1}, {"name": 4}, {"name": 3}, {"name": 2}]}),
        );
        assert_eq!(
            out,
            json!({"mergingList": [
                {"name": 2, "value": "dup1"}, {"name": 2, "value": "dup2"}, {"name": 1}, {"name": 4}, {"name": 3}
            ]})
        );
    }

    #[test]
    fn smp_set_element_order_mismatch_is_an_error() {
        let e = smp_err(
            json!({"mergingList": [{"name": 1}, {"name": 3}, {"name": 2}]}),
            json!({
                "$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
                "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]
            }),
        );
        assert!(e.message.contains("doesn't match"), "{}", e.message);
        assert_eq!(e.code, 500);
    }

    #[test]
    fn smp_delete_and_reorder_in_two_lists() {
        let out = smp(
            json!({
                "mergingList": [{"name": "a", "value": "a"}, {"name": "b", "value": "b"}],
                "mergeItemPtr": [{"name": "c", "value": "c"}, {"name": "d", "value": "d"}]
            }),
            json!({
                "$setElementOrder/mergingList": [{"name": "b"}],
                "$setElementOrder/mergeItemPtr": [{"name": "d"}, {"name": "c"}],
                "mergingList": [{"$patch": "delete", "name": "a"}]
            }),
        );
        assert_eq!(
            out,
            json!({
                "mergingList": [{"name": "b", "value": "b"}],
                "mergeItemPtr": [{"name": "d", "value": "d"}, {"name": "c", "value": "c"}]
            })
        );
    }

    #[test]
    fn smp_retain_keys_clears_unlisted_fields() {
        let out = smp(
            json!({"retainKeysMap": {"name": "type1", "value": "foo"}}),
            json!({"retainKeysMap": {"$retainKeys": ["name", "other"], "name": "type2", "other": "bar"}}),
        );
        assert_eq!(
            out,
            json!({"retainKeysMap": {"name": "type2", "other": "bar"}})
        );
        // Without the directive a retainKeys field merges normally.
        let out = smp(
            json!({"retainKeysMap": {"name": "foo"}}),
            json!({"retainKeysMap": {"value": "bar"}}),
        );
        assert_eq!(
            out,
            json!({"retainKeysMap": {"name": "foo", "value": "bar"}})
        );
    }

    #[test]
    fn smp_retain_keys_in_list_items() {
        let out = smp(
            json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "a", "other": "x"}]}),
            json!({"retainKeysMergingList": [{"name": "foo", "$retainKeys": ["name", "value"], "value": "b"}]}),
        );
        assert_eq!(
            out,
            json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "b"}]})
        );
    }

    #[test]
    fn smp_retain_keys_rejects_patch_fields_not_listed() {
        let e = smp_err(
            json!({"retainKeysMap": {"name": "a"}}),
            json!({"retainKeysMap": {"$retainKeys": ["name"], "value": "b"}}),
        );
        assert_eq!(e.code, 400);
        assert_eq!(e.message, "invalid patch format of retainKeys");
        let e = smp_err(json!({}), json!({"$retainKeys": "name"}));
        assert_eq!(e.message, "invalid patch format of retainKeys");
    }

    #[test]
    fn smp_missing_merge_key_is_a_500_like_kube() {
        let e = smp_err(
            json!({"mergingList": [{"name": 1, "value": "a"}]}),
            json!({"mergingList": [{"value": "b"}]}),
        );
        assert_eq!(e.code, 500);
        assert_eq!(e.reason, "");
        assert_eq!(
            e.message,
            "map: map[value:b] does not contain declared merge key: name"
        );
    }

    #[test]
    fn smp_directive_errors_use_kube_wording() {
        let e = smp_err(
            json!({"simpleMap": {}}),
            json!({"simpleMap": {"$patch": "bogus"}}),
        );
        assert_eq!(
            e.message,
            "unknown patch type: bogus in map: map[$patch:bogus]"
        );
        let e = smp_err(
            json!({"mergingList": [{"name": "a"}]}),
            json!({"mergingList": [{"$patch": "merge"}]}),
        );
        assert_eq!(
            e.message,
            "merging lists cannot yet be specified in the patch"
        );
        let e = smp_err(json!({}), json!({"$setElementOrderX": []}));
        assert_eq!(e.code, 400);
        assert_eq!(e.message, "invalid patch format of setElementOrder list");
        let e = smp_err(json!({}), json!({"$deleteFromPrimitiveList": [1]}));
        assert_eq!(e.message, "invalid patch format of primitive list");
    }

    #[test]
    fn smp_lists_of_lists_are_unprocessable() {
        let e = smp_err(
            json!({"mergingIntList": [[1]]}),
            json!({"mergingIntList": [[2]]}),
        );
        assert_eq!(e.code, 422);
        assert_eq!(e.reason, "Invalid");
        assert_eq!(
            e.message,
            "the server rejected our request due to an error in our request"
        );
    }

    #[test]
    fn smp_mixed_element_types_are_an_error() {
        let e = smp_err(
            json!({"mergingIntList": [1]}),
            json!({"mergingIntList": ["a"]}),
        );
        assert_eq!(e.message, "list element types are not identical: [[1] [a]]");
    }

    #[test]
    fn smp_bad_bodies_are_bad_requests() {
        let doc = json!({"a": 1});
        let e = strategic_merge_patch(&doc, b"[1]", &MERGE_ITEM).expect_err("array patch");
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        let e = strategic_merge_patch(&doc, b"{nope", &MERGE_ITEM).expect_err("bad json");
        assert_eq!(e.code, 400);
        assert_eq!(
            strategic_merge_patch(&doc, b"null", &MERGE_ITEM).expect("null patch"),
            doc
        );
    }

    #[test]
    fn smp_nested_merging_lists() {
        let out = smp(
            json!({"mergingList": [
                {"name": 1, "mergingList": [{"name": 1, "value": 1}, {"name": 2, "value": 2}]},
                {"name": 2}
            ]}),
            json!({"mergingList": [
                {"name": 1, "mergingList": [{"name": 1, "other": 1}, {"name": 2, "$patch": "delete"}, {"name": 3}]}
            ]}),
        );
        assert_eq!(
            out,
            json!({"mergingList": [
                {"name": 1, "mergingList": [{"name": 1, "value": 1, "other": 1}, {"name": 3}]},
                {"name": 2}
            ]})
        );
    }

    #[test]
    fn smp_directives_in_new_values_are_not_stored() {
        let out = smp(
            json!({}),
            json!({
                "mergingList": [{"name": "a", "$patch": "delete"}, {"name": "b"}],
                "simpleMap": {"$patch": "delete"},
                "nonMergingList": [{"name": "c", "$setElementOrder/x": [], "$retainKeys": []}]
            }),
        );
        assert_eq!(
            out,
            json!({"mergingList": [{"name": "b"}], "nonMergingList": [{"name": "c"}]})
        );
    }

    #[test]
    fn smp_kubectl_apply_style_container_patch() {
        let live = json!({
            "metadata": {"name": "p", "labels": {"app": "x", "tier": "web"}, "finalizers": ["a"]},
            "spec": {"containers": [
                {"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "sidecar", "image": "side:1"}
            ]}
        });
        let patch = json!({
            "metadata": {"labels": {"tier": null, "new": "y"}, "finalizers": ["b"]},
            "spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                "containers": [{
                    "name": "app", "image": "app:2",
                    "$setElementOrder/ports": [{"containerPort": 80}, {"containerPort": 443}],
                    "ports": [{"containerPort": 443}],
                    "env": [{"name": "A", "$patch": "delete"}]
                }]
            }
        });
        let out = smp_with(&POD, live, patch);
        assert_eq!(
            out,
            json!({
                "metadata": {"name": "p", "labels": {"app": "x", "new": "y"}, "finalizers": ["b", "a"]},
                "spec": {"containers": [
                    {"name": "sidecar", "image": "side:1"},
                    {"name": "app", "image": "app:2",
                     "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}],
                     "env": [{"name": "B", "value": "2"}]}
                ]}
            })
        );
    }

    #[test]
    fn smp_owner_references_merge_by_uid() {
        let meta = StaticPatchMeta(&[]);
        let out = smp_with(
            &meta,
            json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "B"}, {"uid": "3", "name": "c"}]}}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"ownerReferences": [
                {"uid": "1", "name": "a"}, {"uid": "2", "name": "B"}, {"uid": "3", "name": "c"}
            ]}})
        );
    }

    #[test]
    fn static_patch_meta_lookup() {
        assert_eq!(
            POD.lookup(&["spec", "containers", "ports"]),
            Some(PatchMeta {
                strategy: PatchStrategy::Merge,
                merge_key: Some("containerPort".into())
            })
        );
        assert_eq!(
            POD.lookup(&["spec", "volumes"]).map(|m| m.strategy),
            Some(PatchStrategy::MergeRetainKeys)
        );
        assert_eq!(POD.lookup(&["spec"]), None);
        assert_eq!(POD.lookup(&["spec", "containers", "ports", "x"]), None);
        assert_eq!(
            POD.lookup(&["spec", "template", "metadata", "finalizers"]),
            Some(PatchMeta {
                strategy: PatchStrategy::Merge,
                merge_key: None
            })
        );
        assert_eq!(
            PatchStrategy::parse("retainKeys,merge"),
            Some(PatchStrategy::MergeRetainKeys)
        );
        assert_eq!(
            PatchStrategy::parse("replace"),
            Some(PatchStrategy::Replace)
        );
        assert_eq!(PatchStrategy::parse("bogus"), None);
    }

    // --- JSON patch ---

    #[test]
    fn json_patch_add_remove_replace() {
        let doc = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
        let out = json_patch(
            &doc,
            br#"[
                {"op": "add", "path": "/metadata/labels/y", "value": "2"},
                {"op": "remove", "path": "/metadata/labels/x"},
                {"op": "replace", "path": "/data/k", "value": "w"},
                {"op": "test", "path": "/metadata/name", "value": "a"}
            ]"#,
        )
        .expect("patch applies");
        assert_eq!(
            out,
            json!({"metadata": {"name": "a", "labels": {"y": "2"}}, "data": {"k": "w"}})
        );
    }

    #[test]
    fn json_patch_failed_test_is_422_with_kube_message() {
        let doc = json!({"metadata": {"name": "a"}});
        let e = json_patch(
            &doc,
            br#"[{"op":"test","path":"/metadata/name","value":"b"}]"#,
        )
        .expect_err("test fails");
        assert_eq!(e.code, 422);
        assert_eq!(e.reason, "Invalid");
        assert_eq!(
            e.message,
            "the server rejected our request due to an error in our request"
        );
        // Removing a missing path and unknown ops fail the same way.
        let e = json_patch(&doc, br#"[{"op":"remove","path":"/spec"}]"#).expect_err("missing");
        assert_eq!(e.code, 422);
        let e = json_patch(&doc, br#"[{"op":"frobnicate","path":"/a"}]"#).expect_err("bad op");
        assert_eq!(e.code, 422);
    }

    #[test]
    fn json_patch_malformed_bodies_are_400() {
        let doc = json!({});
        let e = json_patch(&doc, b"{\"op\":\"add\"}").expect_err("object body");
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        );
        let e = json_patch(&doc, b"[1]").expect_err("number op");
        assert_eq!(
            e.message,
            "json: cannot unmarshal number into Go value of type jsonpatch.Operation"
        );
        let e = json_patch(&doc, b"").expect_err("empty");
        assert_eq!(e.message, "unexpected end of JSON input");
        assert_eq!(
            json_patch(&doc, b"not json").expect_err("garbage").code,
            400
        );
    }

    #[test]
    fn json_patch_too_many_operations_is_413() {
        let op = r#"{"op":"test","path":"/a","value":1}"#;
        let body = format!("[{}]", vec![op; MAX_JSON_PATCH_OPERATIONS + 1].join(","));
        let e = json_patch(&json!({"a": 1}), body.as_bytes()).expect_err("too many");
        assert_eq!(e.code, 413);
        assert!(e.message.ends_with("is 10000, got 10001"), "{}", e.message);
    }

    #[test]
    fn json_patch_that_replaces_the_root_with_an_array_is_invalid() {
        let e = json_patch(
            &json!({"a": 1}),
            br#"[{"op":"replace","path":"","value":[5]}]"#,
        )
        .expect_err("array root");
        assert_eq!(e.code, 422);
        assert!(e.message.contains("patch: Invalid value"), "{}", e.message);
    }

    // --- merge patch ---

    #[test]
    fn merge_patch_merges_and_deletes() {
        let doc = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2]}});
        let out = merge_patch(
            &doc,
            br#"{"metadata": {"labels": {"x": null, "z": "3"}}, "spec": {"list": [3]}}"#,
        )
        .expect("patch applies");
        assert_eq!(
            out,
            json!({"metadata": {"name": "a", "labels": {"y": "2", "z": "3"}}, "spec": {"list": [3]}})
        );
    }

    #[test]
    fn merge_patch_rejects_non_objects_like_kube() {
        let doc = json!({"a": 1});
        for body in [&b"nope"[..], b"null", b"5", b"\"s\"", b""] {
            let e = merge_patch(&doc, body).expect_err("bad patch");
            assert_eq!(e.code, 400);
            assert_eq!(e.message, "Invalid JSON Patch");
        }
        assert_eq!(merge_patch(&doc, b"[1]").expect_err("array").code, 422);
    }
}

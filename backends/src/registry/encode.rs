//! Turning cached objects into response bodies: single objects, lists assembled from the
//! cache's pre-serialized bytes (no re-encoding), Table output for `kubectl get`, YAML, watch
//! frames, and the opaque `continue` tokens of paginated lists.

use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};

use super::meta::meta_field;
use crate::api::ApiResponse;
use crate::machinery::negotiation::{MediaType, Negotiated};
use crate::machinery::protobuf;
use crate::machinery::table::{self, IncludeObject, TableRow};
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};

/// Content type of JSON responses.
pub const JSON: &str = "application/json";
/// Content type of YAML responses.
pub const YAML: &str = "application/yaml";

/// Answers one object in the negotiated form. `bytes` is the object's JSON.
pub(crate) fn object_response(
    status: u16,
    def: &ResourceDef,
    bytes: Bytes,
    output: &Negotiated,
    include: IncludeObject,
) -> ApiResult<ApiResponse> {
    if output.as_table {
        let object: Value = serde_json::from_slice(&bytes).map_err(ApiError::internal)?;
        let rv = meta_field(&object, "resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let rows = vec![table_row(def, object)];
        let body = table::table(&def.columns, rows, &rv, None, None, include);
        return json_value_response(status, &body, output);
    }
    if output.as_partial_metadata {
        if output.as_partial_list == Some(true) {
            return Err(ApiError::not_acceptable(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                go_type_name(def, false)
            )));
        }
        let object: Value = serde_json::from_slice(&bytes).map_err(ApiError::internal)?;
        return json_value_response(status, &table::partial_object_metadata(&object), output);
    }
    match output.media {
        MediaType::Json => Ok(ApiResponse::json(status, bytes)),
        _ => {
            let object: Value = serde_json::from_slice(&bytes).map_err(ApiError::internal)?;
            json_value_response(status, &object, output)
        }
    }
}

/// Go's `%T` of the object kube's handler holds for `def` (its internal type, or unstructured
/// for a custom resource), as its 406s for a mismatched metadata-only request name it.
pub(crate) fn go_type_name(def: &ResourceDef, list: bool) -> String {
    let suffix = if list { "List" } else { "" };
    if def.strategy.is_custom_resource() {
        return format!("*unstructured.Unstructured{suffix}");
    }
    // Internal packages are named after the group's first label; core and events.k8s.io's
    // Events are the core group's.
    let package = match def.group.as_str() {
        "" | "events.k8s.io" => "core",
        group => group.split('.').next().unwrap_or(group),
    };
    format!("*{package}.{}{suffix}", def.kind)
}

/// A `PartialObjectMetadataList` (metadata-only clients such as garbage collectors).
pub(crate) fn partial_list(items: &[Bytes], meta: &ListMeta) -> ApiResult<Value> {
    let items = items
        .iter()
        .map(|b| {
            serde_json::from_slice::<Value>(b)
                .map(|o| table::partial_object_metadata(&o))
                .map_err(ApiError::internal)
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let mut list_meta = json!({"resourceVersion": meta.resource_version.to_string()});
    if let Some(token) = &meta.continue_token {
        list_meta["continue"] = json!(token);
    }
    if let Some(remaining) = meta.remaining {
        list_meta["remainingItemCount"] = json!(remaining);
    }
    Ok(json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "items": items,
    }))
}

/// Answers a list body (JSON, in parts) in the negotiated media type.
pub(crate) fn object_response_list(
    parts: Vec<Bytes>,
    output: &Negotiated,
) -> ApiResult<ApiResponse> {
    match output.media {
        MediaType::Json => Ok(ApiResponse::json_parts(200, parts)),
        _ => {
            let whole: Vec<u8> = parts.concat();
            let value: Value = serde_json::from_slice(&whole).map_err(ApiError::internal)?;
            json_value_response(200, &value, output)
        }
    }
}

/// Answers a JSON value in the negotiated media type (JSON, YAML, or protobuf for clients
/// that accept nothing else).
pub(crate) fn json_value_response(
    status: u16,
    value: &Value,
    output: &Negotiated,
) -> ApiResult<ApiResponse> {
    match output.media {
        MediaType::Yaml => yaml_response(status, value),
        MediaType::Protobuf => Ok(ApiResponse::with_type(
            status,
            protobuf::CONTENT_TYPE,
            protobuf::encode(value)?,
        )),
        MediaType::Json => {
            let body = serde_json::to_vec(value).map_err(ApiError::internal)?;
            Ok(ApiResponse::json(status, body))
        }
    }
}

fn yaml_response(status: u16, value: &Value) -> ApiResult<ApiResponse> {
    let text = crate::machinery::goyaml::to_string(value).map_err(ApiError::internal)?;
    Ok(ApiResponse::with_type(status, YAML, text))
}

/// One Table row for an object: NAME, then the strategy's cells.
pub(crate) fn table_row(def: &ResourceDef, object: Value) -> TableRow {
    let mut cells = Vec::with_capacity(def.columns.len());
    if def.row_starts_with_name() {
        cells.push(Value::String(super::object_name(&object).to_string()));
    }
    cells.extend(def.strategy.table_cells(&object));
    TableRow { cells, object }
}

/// Metadata of a list response.
pub(crate) struct ListMeta {
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// Builds a `<Kind>List` from pre-serialized items without re-encoding or copying them: the
/// parts are the list's head, then each item and the separator after it (see
/// [`crate::api::Body::more`]).
pub(crate) fn list_body(def: &ResourceDef, items: &[Bytes], meta: &ListMeta) -> Vec<Bytes> {
    let mut list_meta = json!({"resourceVersion": meta.resource_version.to_string()});
    if let Some(token) = &meta.continue_token {
        list_meta["continue"] = Value::String(token.clone());
    }
    if let Some(remaining) = meta.remaining {
        list_meta["remainingItemCount"] = json!(remaining);
    }
    let head =
        json!({"kind": def.list_kind, "apiVersion": def.api_version(), "metadata": list_meta});
    let mut head = head.to_string();
    // `head` ends with `}`: reopen it to append `"items":[...]`.
    head.pop();
    head.push_str(",\"items\":[");
    let mut parts = Vec::with_capacity(items.len() * 2 + 2);
    parts.push(Bytes::from(head));
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            parts.push(Bytes::from_static(b","));
        }
        parts.push(item.clone());
    }
    parts.push(Bytes::from_static(b"]}"));
    parts
}

/// What a `continue` token encodes: the revision the first page was read at and the last key
/// returned (relative to the collection prefix), like kube's `continueToken`. A revision of
/// -1 ([`LATEST`]) continues at the latest revision: kube hands such a token back with the
/// 410 for an expired one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ContinueToken {
    pub v: String,
    pub rv: i64,
    pub start: String,
}

/// The revision of a continue token that reads on at the latest revision.
pub(crate) const LATEST: i64 = -1;

/// kube's continue token: JSON `{"v","rv","start"}`, base64 URL-safe without padding.
pub(crate) fn encode_continue(rv: i64, start: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: start.to_string(),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// kube's `storage.DecodeContinue`, with its errors as the 400 its store answers
/// (`invalid continue token: continue key is not valid...`). Padded tokens (kubegate's
/// before it matched kube's encoding) are still taken.
pub(crate) fn decode_continue(token: &str) -> ApiResult<ContinueToken> {
    let bad = |why: String| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid{why}"
        ))
    };
    // Go's `base64.RawURLEncoding` is not strict: bits after the last whole byte are
    // ignored, so text that is not a token may decode to bytes (that are not JSON).
    const LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_encode_padding(false)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
            .with_decode_allow_trailing_bits(true),
    );
    let raw = LENIENT
        .decode(token)
        .or_else(|e| {
            base64::engine::general_purpose::URL_SAFE
                .decode(token)
                .map_err(|_| e)
        })
        .map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                base64::DecodeError::InvalidLength(len) => len.saturating_sub(1),
                base64::DecodeError::InvalidPadding => token.len().saturating_sub(1),
            };
            bad(format!(": illegal base64 data at input byte {at}"))
        })?;
    let token: ContinueToken = serde_json::from_slice(&raw).map_err(|e| {
        let reason =
            crate::machinery::gojson_syntax::syntax_error(&raw).unwrap_or_else(|| e.to_string());
        bad(format!(": {reason}"))
    })?;
    if token.v != "meta.k8s.io/v1" {
        return Err(bad(format!(
            ": server does not recognize this encoded version {}",
            token.v
        )));
    }
    if token.rv == 0 {
        return Err(bad(
            ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    if token.start.is_empty() {
        return Err(bad(
            ": encoded start key empty (version meta.k8s.io/v1)".into()
        ));
    }
    // kube's defence against path traversal: the key, rooted, must be its own `path.Clean`.
    // (The cache also bounds every list by its prefix; names may contain "..".)
    let rooted = token.start.strip_prefix('/').unwrap_or(&token.start);
    let clean = rooted
        .split('/')
        .all(|segment| !segment.is_empty() && segment != "." && segment != "..");
    if !clean {
        return Err(bad(format!(": {}", token.start)));
    }
    Ok(ContinueToken {
        start: rooted.to_string(),
        ..token
    })
}

/// One watch frame: `{"type":"ADDED","object":{...}}` and a newline.
pub(crate) fn watch_frame(event_type: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(event_type.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "team-a/app");
        let latest = decode_continue(&encode_continue(LATEST, "team-a/app")).unwrap();
        assert_eq!(latest.rv, LATEST);
        let d = decode_continue(&t).unwrap();
        assert_eq!(d.rv, 42);
        assert_eq!(d.start, "team-a/app");
        assert_eq!(
            decode_continue("not-base64!").unwrap_err().message,
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 10"
        );
        // Go's decoder takes text whose last bits do not make a byte; what it gives is not
        // JSON, in Go's words.
        assert_eq!(
            decode_continue("garbage").unwrap_err().message,
            "invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value"
        );
        // kube's encoding: no padding; padded tokens are still taken.
        assert!(!t.contains('='));
        let padded = base64::engine::general_purpose::URL_SAFE
            .encode(br#"{"v":"meta.k8s.io/v1","rv":1,"start":"/a/b"}"#);
        assert_eq!(decode_continue(&padded).unwrap().start, "a/b");
        let no_start = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"v":"meta.k8s.io/v1","rv":1,"start":""}"#);
        assert_eq!(
            decode_continue(&no_start).unwrap_err().message,
            "invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
        );
        let evil = base64::engine::general_purpose::URL_SAFE
            .encode(br#"{"v":"meta.k8s.io/v1","rv":1,"start":"../../secrets"}"#);
        assert!(decode_continue(&evil).is_err());
        assert!(decode_continue(&encode_continue(0, "a")).is_err());
        assert_eq!(
            decode_continue(&encode_continue(5, "ns/a..b"))
                .unwrap()
                .start,
            "ns/a..b"
        );
    }

    #[test]
    fn watch_frames_wrap_the_object() {
        let f = watch_frame("ADDED", br#"{"a":1}"#);
        let v: Value = serde_json::from_slice(&f).unwrap();
        assert_eq!(v["type"], "ADDED");
        assert_eq!(v["object"]["a"], 1);
        assert!(f.ends_with(b"\n"));
    }
}

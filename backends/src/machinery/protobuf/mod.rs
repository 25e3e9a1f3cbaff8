//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), both ways:
//! - request bodies (what client-go and kubectl may send): [`decode`] unwraps the `k8s\0` +
//!   `runtime.Unknown` envelope, decodes `raw` into the k8s-pb message for its (apiVersion,
//!   kind) and converts it to the JSON object kube would write for it, so the registry only
//!   ever works on JSON;
//! - responses to clients that accept only protobuf: [`encode`] turns such a JSON object (or
//!   one of its lists, or a `Status`) back into the envelope kube-apiserver writes, and
//!   [`encode_watch_event`] frames one watch event as kube streams protobuf watches.
//!
//! The JSON follows Go's `encoding/json` tags of k8s.io/api, which is what the same client would
//! have sent as JSON. Go's generated protobuf code writes every non-pointer field, even when it
//! is the zero value, so a proto2 field being *present* does not mean it was *set*:
//! - `omitempty` value fields (most strings, ints, lists, maps) are left out when zero;
//! - pointer fields (`*bool`, `*int32`, `*string`, `*Struct`) are written whenever present,
//!   zero included (`immutable: false`, `gracePeriodSeconds: 0` mean something);
//! - fields without `omitempty` are always written, with Go's zero value when absent.
//!
//! Where Go would write `null` (a zero `metav1.Time`), the field is left out instead.
//!
//! Encoding mirrors that: a value field missing from the JSON is written with Go's zero value
//! (`""`, `0`, `false`, an empty `Time`), a pointer field only when the JSON has it, so the
//! bytes are the ones kube-apiserver writes for the same object. The one known difference:
//! prost leaves an empty key or value out of a map entry where Go writes it (`"a": ""` in
//! `data`); every protobuf decoder reads both as the same entry.
//!
//! The message tables are in `messages.rs`, the conversion machinery in `convert.rs`.

mod apiextensions;
mod convert;
mod messages;
mod shape;
#[cfg(test)]
mod tests;

use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::api::autoscaling::v1 as autoscalingv1;
use k8s_pb::api::coordination::v1 as coordv1;
use k8s_pb::api::core::v1 as corev1;
use k8s_pb::api::discovery::v1 as discv1;
use k8s_pb::api::events::v1 as eventsv1;
use k8s_pb::api::flowcontrol::v1 as flowv1;
use k8s_pb::api::rbac::v1 as rbacv1;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as extv1;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as apiregv1;
use prost::Message;
use serde_json::{Map, Value};

use self::convert::{ConvError, FromJson, ToJson};
pub use self::shape::Pass;
use self::shape::Shape;
use crate::machinery::negotiation::BodyError;
use crate::status::{ApiError, ApiResult};

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The `Content-Type` of a protobuf watch response: kube-apiserver adds `;stream=watch` to
/// every watch media type but JSON.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Decodes a protobuf request body into the JSON object kube would produce for it, with
/// `apiVersion` and `kind` first. Errors are 400s in the words of kube's decoder (the handler's
/// wrapping is the caller's, see [`decode_for`]).
// ApiError is the crate-wide error type (176 bytes); whether to box it is status.rs's call.
#[allow(clippy::result_large_err)]
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    decode_for(body, None).map_err(BodyError::into_api_error)
}

/// [`decode`] for a request to an endpoint of `endpoint` (apiVersion, kind): an envelope
/// without a kind or version takes the endpoint's (kube's `copyKindDefaults`). A body whose
/// kind could not be read at all is [`BodyError::Unrecognized`]; one whose kind was read but
/// did not decode is refused as kube's handlers word it (`ConfigMap in version "v1" cannot be
/// handled as a ConfigMap: ...`).
#[allow(clippy::result_large_err)]
pub fn decode_for(body: &[u8], endpoint: Option<(&str, &str)>) -> Result<Value, BodyError> {
    decode_with(body, &[REQUEST_KINDS], endpoint)
}

/// [`decode_for`] for the kinds of `tables`.
#[allow(clippy::result_large_err)]
fn decode_with(
    body: &[u8],
    tables: &[&[Codec]],
    endpoint: Option<(&str, &str)>,
) -> Result<Value, BodyError> {
    // kube's protobuf serializer's own checks, before it knows any kind.
    let envelope = match body.strip_prefix(MAGIC.as_slice()) {
        _ if body.is_empty() => return Err(BodyError::Unrecognized("empty data".into())),
        None => {
            return Err(BodyError::Unrecognized(
                "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
                    .into(),
            ))
        }
        Some([]) => return Err(BodyError::Unrecognized("empty body".into())),
        Some(envelope) => envelope,
    };
    let unknown = Unknown::decode(envelope).map_err(|e| {
        BodyError::Unrecognized(format!(
            "unable to decode the protobuf envelope (runtime.Unknown): {e}"
        ))
    })?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let mut api_version = type_meta.api_version.unwrap_or_default();
    let mut kind = type_meta.kind.unwrap_or_default();
    if let Some((endpoint_version, endpoint_kind)) = endpoint {
        if kind.is_empty() {
            kind = endpoint_kind.to_string();
        }
        if api_version.is_empty() {
            api_version = endpoint_version.to_string();
        }
    }
    let encoding = unknown.content_encoding.unwrap_or_default();
    if !encoding.is_empty() {
        return Err(BodyError::Refused(unsupported(format!(
            "protobuf bodies with contentEncoding \"{encoding}\" are not supported; send the request body as application/json"
        ))));
    }
    let raw = unknown.raw.unwrap_or_default();
    // Every group version registers metav1.DeleteOptions (client-go may encode it in the
    // group version of the resource it deletes), so any apiVersion names this message.
    if kind == "DeleteOptions" && api_version.is_empty() {
        api_version = "meta.k8s.io/v1".to_string();
    }
    // kube's handler words a body whose kind it read but could not decode.
    let refused = |error: String| {
        let version = api_version.rsplit('/').next().unwrap_or_default();
        let message = match endpoint {
            Some((_, endpoint_kind)) => {
                format!("{kind} in version \"{version}\" cannot be handled as a {endpoint_kind}: {error}")
            }
            None => error,
        };
        BodyError::Refused(ApiError::bad_request(message))
    };
    if kind.is_empty() {
        return Err(BodyError::Unrecognized(format!(
            "Object 'Kind' is missing in '{}'",
            describe_type_meta(&api_version)
        )));
    }

    let converter = if kind == "DeleteOptions" {
        Some(decode_raw::<metav1::DeleteOptions> as DecodeRaw)
    } else {
        find(tables, &api_version, &kind).map(|codec| codec.decode)
    };
    let Some(converter) = converter else {
        // The endpoint's kind in another version is one kube does not register there.
        // Another kind may be one kube knows and kubegate does not decode: said so.
        if endpoint.is_some_and(|(_, endpoint_kind)| endpoint_kind == kind) {
            return Err(refused(format!(
                "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\""
            )));
        }
        return Err(BodyError::Refused(unsupported(format!(
            "kubegate does not decode {} from {CONTENT_TYPE}; send the request body as application/json",
            describe(&api_version, &kind)
        ))));
    };
    let fields = converter(&raw)
        .map_err(|e| refused(format!("unable to decode {kind} from protobuf: {e}")))?;

    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Ok(Value::Object(object))
}

/// Go's `%#v` of an envelope's `TypeMeta` that names no kind.
fn describe_type_meta(api_version: &str) -> String {
    format!(
        "runtime.TypeMeta{{APIVersion:{}, Kind:\"\"}}",
        kubegate_policy::quote::go_quote(api_version)
    )
}

fn unsupported(message: String) -> ApiError {
    ApiError::new(415, "UnsupportedMediaType", message)
}

/// `kind "ConfigMap" (apiVersion "v1")` for error messages.
fn describe(api_version: &str, kind: &str) -> String {
    if kind.is_empty() {
        "an object without kind".to_string()
    } else {
        format!("kind \"{kind}\" (apiVersion \"{api_version}\")")
    }
}

/// Whether [`encode`] can write objects of this (apiVersion, kind): lets a caller refuse a
/// protobuf-only request (406) before it starts answering, which matters for watches, whose
/// objects are only encoded one at a time after the response has begun.
pub fn encodes(api_version: &str, kind: &str) -> bool {
    find(&[REQUEST_KINDS, RESPONSE_KINDS], api_version, kind).is_some()
}

/// Rewrites a built-in object as kube-apiserver has it after decoding it into its Go type
/// (`Pass::Decode`: `omitempty` fields holding their zero value left out, nulls of value types
/// their zero values) or after storing it too (`Pass::Store`: also empty lists and maps
/// without `omitempty` as `null`).
pub type GoShaper = fn(&mut Value, Pass);

/// The [`GoShaper`] of a built-in (apiVersion, kind); `None` for kinds without a table (custom
/// resources), which are left as they are.
pub fn go_json_shaper(api_version: &str, kind: &str) -> Option<GoShaper> {
    find(&[REQUEST_KINDS], api_version, kind).map(|codec| codec.shape)
}

/// Encodes a JSON object (as kubegate stores and serves it) into the protobuf body
/// kube-apiserver writes for it: `k8s\0`, then `runtime.Unknown{typeMeta{apiVersion, kind},
/// raw: <message>, contentEncoding: "", contentType: ""}` with every field written, as Go's
/// `Unknown.NestedMarshalTo` does.
///
/// Handles every kind [`decode`] does (but DeleteOptions, which is never a response), the
/// lists of the served kinds (`ConfigMapList`, ...; the items' own apiVersion and kind are not
/// part of the message, as in kube) and `v1 Status`, so errors reach protobuf-only clients too.
///
/// 406 NotAcceptable for any other kind (and for JSON without apiVersion and kind). 500 when
/// a field has a JSON type or value its Go type cannot hold (objects come from our own store,
/// so that is a bug, not a client error).
#[allow(clippy::result_large_err)]
pub fn encode(object: &Value) -> ApiResult<Vec<u8>> {
    let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let Some(codec) = find(&[REQUEST_KINDS, RESPONSE_KINDS], api_version, kind) else {
        return Err(ApiError::not_acceptable(format!(
            "the object ({}) cannot be encoded as {CONTENT_TYPE}; accept application/json instead",
            describe(api_version, kind)
        )));
    };
    let raw = (codec.encode)(object)
        .map_err(|e| ApiError::internal(format!("unable to encode {kind} as protobuf: {e}")))?;
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(codec.api_version.to_string()),
            kind: Some(codec.kind.to_string()),
        }),
        raw: Some(raw),
        // Go writes both empty strings rather than leaving them out.
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
    body.extend_from_slice(&MAGIC);
    // A Vec grows as needed, so prost's only error (buffer too small) cannot happen.
    unknown.encode(&mut body).map_err(ApiError::internal)?;
    Ok(body)
}

/// One frame of a protobuf watch (`Accept: application/vnd.kubernetes.protobuf`, answered as
/// [`WATCH_CONTENT_TYPE`]), as kube-apiserver writes it: a 4-byte big-endian length, then a
/// `metav1.WatchEvent{type, object: runtime.RawExtension{raw}}` with no envelope of its own
/// (the stream serializer is protobuf's raw one), whose `raw` is the complete [`encode`] body
/// of the object, `k8s\0` and `runtime.Unknown` included (the embedded encoder is the normal
/// one).
///
/// `event_type` is `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR` (with a `Status`
/// object). Errors as for [`encode`].
#[allow(clippy::result_large_err)]
pub fn encode_watch_event(event_type: &str, object: &Value) -> ApiResult<Vec<u8>> {
    let event = metav1::WatchEvent {
        r#type: Some(event_type.to_string()),
        object: Some(RawExtension {
            raw: Some(encode(object)?),
        }),
    };
    let len = event.encoded_len();
    let prefix = u32::try_from(len).map_err(|_| {
        ApiError::internal(format!(
            "a {len}-byte watch event does not fit the 4-byte length of a protobuf frame"
        ))
    })?;
    let mut frame = Vec::with_capacity(4 + len);
    frame.extend_from_slice(&prefix.to_be_bytes());
    event.encode(&mut frame).map_err(ApiError::internal)?;
    Ok(frame)
}

/// Decodes `raw` as one message type and converts it; the error is the message for a 400.
type DecodeRaw = fn(&[u8]) -> Result<Value, String>;

/// Converts a JSON object into one message type and encodes it.
type EncodeRaw = fn(&Value) -> Result<Vec<u8>, ConvError>;

fn decode_raw<T: Message + ToJson>(raw: &[u8]) -> Result<Value, String> {
    let message = T::decode(raw).map_err(|e| e.to_string())?;
    message.to_json().map_err(|e| e.to_string())
}

fn encode_raw<T: Message + FromJson>(object: &Value) -> Result<Vec<u8>, ConvError> {
    T::from_json(object).map(|message| message.encode_to_vec())
}

/// One (apiVersion, kind) of the envelope and its message type, both ways, and Go's JSON
/// round trip of the kind.
struct Codec {
    api_version: &'static str,
    kind: &'static str,
    decode: DecodeRaw,
    encode: EncodeRaw,
    shape: fn(&mut Value, Pass),
}

const fn named<T: Message + ToJson + FromJson + Shape>(
    api_version: &'static str,
    kind: &'static str,
) -> Codec {
    Codec {
        api_version,
        kind,
        decode: decode_raw::<T>,
        encode: encode_raw::<T>,
        shape: T::shape,
    }
}

const fn kind<T: k8s_pb::Resource + Message + ToJson + FromJson + Shape>() -> Codec {
    named::<T>(T::API_VERSION, T::KIND)
}

/// `L`, the list of `T`: k8s-pb gives lists no `Resource` impl, so the kind is spelled out.
const fn list<L: Message + ToJson + FromJson + Shape, T: k8s_pb::Resource>(
    kind: &'static str,
) -> Codec {
    named::<L>(T::API_VERSION, kind)
}

fn find<'a>(tables: &[&'a [Codec]], api_version: &str, kind: &str) -> Option<&'a Codec> {
    tables
        .iter()
        .flat_map(|table| table.iter())
        .find(|codec| codec.api_version == api_version && codec.kind == kind)
}

/// The kinds kubegate serves or reviews, by the (apiVersion, kind) of the envelope: accepted
/// as request bodies and written as responses.
const REQUEST_KINDS: &[Codec] = &[
    kind::<corev1::Namespace>(),
    kind::<corev1::ConfigMap>(),
    kind::<corev1::Secret>(),
    kind::<corev1::ServiceAccount>(),
    kind::<corev1::Service>(),
    kind::<corev1::Endpoints>(),
    kind::<corev1::Event>(),
    kind::<eventsv1::Event>(),
    kind::<coordv1::Lease>(),
    kind::<discv1::EndpointSlice>(),
    kind::<rbacv1::Role>(),
    kind::<rbacv1::ClusterRole>(),
    kind::<rbacv1::RoleBinding>(),
    kind::<rbacv1::ClusterRoleBinding>(),
    kind::<authnv1::SelfSubjectReview>(),
    kind::<authnv1::TokenReview>(),
    // k8s-pb gives the TokenRequest subresource kind no `Resource` impl.
    named::<authnv1::TokenRequest>("authentication.k8s.io/v1", "TokenRequest"),
    kind::<authzv1::SelfSubjectAccessReview>(),
    kind::<authzv1::SubjectAccessReview>(),
    kind::<authzv1::LocalSubjectAccessReview>(),
    kind::<authzv1::SelfSubjectRulesReview>(),
    kind::<extv1::CustomResourceDefinition>(),
    kind::<apiregv1::APIService>(),
    kind::<flowv1::FlowSchema>(),
    kind::<flowv1::PriorityLevelConfiguration>(),
    // The `scale` subresource's kind, which k8s-pb gives no `Resource` impl.
    named::<autoscalingv1::Scale>("autoscaling/v1", "Scale"),
];

/// Kinds that are only ever responses. `Status` is unversioned in kube (registered as `v1`
/// in every group), so errors of every group carry `apiVersion: v1`.
const RESPONSE_KINDS: &[Codec] = &[
    named::<metav1::Status>("v1", "Status"),
    list::<corev1::NamespaceList, corev1::Namespace>("NamespaceList"),
    list::<corev1::ConfigMapList, corev1::ConfigMap>("ConfigMapList"),
    list::<corev1::SecretList, corev1::Secret>("SecretList"),
    list::<corev1::ServiceAccountList, corev1::ServiceAccount>("ServiceAccountList"),
    list::<corev1::ServiceList, corev1::Service>("ServiceList"),
    list::<corev1::EndpointsList, corev1::Endpoints>("EndpointsList"),
    list::<corev1::EventList, corev1::Event>("EventList"),
    list::<eventsv1::EventList, eventsv1::Event>("EventList"),
    list::<coordv1::LeaseList, coordv1::Lease>("LeaseList"),
    list::<discv1::EndpointSliceList, discv1::EndpointSlice>("EndpointSliceList"),
    list::<rbacv1::RoleList, rbacv1::Role>("RoleList"),
    list::<rbacv1::ClusterRoleList, rbacv1::ClusterRole>("ClusterRoleList"),
    list::<rbacv1::RoleBindingList, rbacv1::RoleBinding>("RoleBindingList"),
    list::<rbacv1::ClusterRoleBindingList, rbacv1::ClusterRoleBinding>("ClusterRoleBindingList"),
    list::<extv1::CustomResourceDefinitionList, extv1::CustomResourceDefinition>(
        "CustomResourceDefinitionList",
    ),
    list::<apiregv1::APIServiceList, apiregv1::APIService>("APIServiceList"),
    list::<flowv1::FlowSchemaList, flowv1::FlowSchema>("FlowSchemaList"),
    list::<flowv1::PriorityLevelConfigurationList, flowv1::PriorityLevelConfiguration>(
        "PriorityLevelConfigurationList",
    ),
    // The metadata-only views of any kind (`as=PartialObjectMetadata`).
    named::<metav1::PartialObjectMetadata>("meta.k8s.io/v1", "PartialObjectMetadata"),
    named::<metav1::PartialObjectMetadataList>("meta.k8s.io/v1", "PartialObjectMetadataList"),
];

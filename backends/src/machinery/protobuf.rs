//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`, what client-go and kubectl
//! may send): unwraps the `k8s\0` + `runtime.Unknown` envelope, decodes `raw` into the k8s-pb
//! message for its (apiVersion, kind) and converts it to the JSON object kube would write for
//! it, so the registry only ever works on JSON. Responses are always JSON; nothing here encodes.
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

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::api::coordination::v1 as coordv1;
use k8s_pb::api::core::v1 as corev1;
use k8s_pb::api::discovery::v1 as discv1;
use k8s_pb::api::events::v1 as eventsv1;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value};

use crate::status::{ApiError, ApiResult};

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Decodes a protobuf request body into the JSON object kube would produce for it, with
/// `apiVersion` and `kind` first.
///
/// 400 BadRequest when the body is not a well-formed envelope or message; 415
/// UnsupportedMediaType when the kind is one kubegate does not decode from protobuf.
// ApiError is the crate-wide error type (176 bytes); whether to box it is status.rs's call.
#[allow(clippy::result_large_err)]
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let Some(envelope) = body.strip_prefix(MAGIC.as_slice()) else {
        let message = if MAGIC.starts_with(body) {
            format!(
                "the protobuf request body is truncated: {} bytes, shorter than the 4-byte \"k8s\\x00\" prefix of {CONTENT_TYPE}",
                body.len()
            )
        } else {
            format!(
                "provided data does not appear to be a protobuf message, expected prefix \"k8s\\x00\" ({CONTENT_TYPE})"
            )
        };
        return Err(ApiError::bad_request(message));
    };
    let unknown = Unknown::decode(envelope).map_err(|e| {
        ApiError::bad_request(format!(
            "unable to decode the protobuf envelope (runtime.Unknown): {e}"
        ))
    })?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let mut api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let encoding = unknown.content_encoding.unwrap_or_default();
    if !encoding.is_empty() {
        return Err(unsupported(format!(
            "protobuf bodies with contentEncoding \"{encoding}\" are not supported; send the request body as application/json"
        )));
    }
    let raw = unknown.raw.unwrap_or_default();

    let converter = if kind == "DeleteOptions" {
        // Every group version registers metav1.DeleteOptions (client-go may encode it in the
        // group version of the resource it deletes), so any apiVersion names this message.
        if api_version.is_empty() {
            api_version = "meta.k8s.io/v1".to_string();
        }
        Some(convert::<metav1::DeleteOptions> as Convert)
    } else {
        KINDS
            .iter()
            .find(|(v, k, _)| *v == api_version && *k == kind)
            .map(|(_, _, f)| *f)
    };
    let Some(converter) = converter else {
        let what = if kind.is_empty() {
            "an object without kind".to_string()
        } else {
            format!("kind \"{kind}\" (apiVersion \"{api_version}\")")
        };
        return Err(unsupported(format!(
            "kubegate does not decode {what} from {CONTENT_TYPE}; send the request body as application/json"
        )));
    };
    let fields = converter(&raw).map_err(|e| {
        ApiError::bad_request(format!("unable to decode {kind} from protobuf: {e}"))
    })?;

    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Ok(Value::Object(object))
}

fn unsupported(message: String) -> ApiError {
    ApiError::new(415, "UnsupportedMediaType", message)
}

/// Decodes `raw` as one message type and converts it; the error is the message for a 400.
type Convert = fn(&[u8]) -> Result<Value, String>;

fn convert<T: Message + ToJson>(raw: &[u8]) -> Result<Value, String> {
    let message = T::decode(raw).map_err(|e| e.to_string())?;
    message.to_json().map_err(|e| e.to_string())
}

const fn kind<T: k8s_pb::Resource + Message + ToJson>() -> (&'static str, &'static str, Convert) {
    (T::API_VERSION, T::KIND, convert::<T>)
}

/// The kinds kubegate serves or reviews, by the (apiVersion, kind) of the envelope.
const KINDS: &[(&str, &str, Convert)] = &[
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
    kind::<authnv1::SelfSubjectReview>(),
    kind::<authnv1::TokenReview>(),
    kind::<authzv1::SelfSubjectAccessReview>(),
    kind::<authzv1::SubjectAccessReview>(),
    kind::<authzv1::LocalSubjectAccessReview>(),
    kind::<authzv1::SelfSubjectRulesReview>(),
];

/// A value that cannot be written as JSON (a time outside Go's range, fieldsV1 that is not
/// JSON), with the field path where it was found.
#[derive(Debug)]
struct ConvError {
    path: String,
    message: String,
}

impl ConvError {
    fn new(message: impl Into<String>) -> Self {
        ConvError {
            path: String::new(),
            message: message.into(),
        }
    }

    /// Prefixes the path with the enclosing field name or `[index]`.
    fn within(mut self, segment: &str) -> Self {
        self.path = if self.path.is_empty() || self.path.starts_with('[') {
            format!("{segment}{}", self.path)
        } else {
            format!("{segment}.{}", self.path)
        };
        self
    }
}

impl std::fmt::Display for ConvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

type Conv = Result<Value, ConvError>;

/// A k8s-pb message or scalar as JSON. `Default` gives Go's zero value for fields that are
/// written even when absent.
trait ToJson: Default {
    /// `Value::Null` means "leave the field out".
    fn to_json(&self) -> Conv;

    /// Whether `omitempty` drops it. Go never drops structs, so messages say no.
    fn is_zero(&self) -> bool {
        false
    }
}

/// A field of a k8s-pb message: `Option<T>`, `Vec<T>` or a map.
trait Field {
    /// The JSON, or `None` when the field is absent from the message.
    fn value(&self) -> Option<Conv>;
    fn is_zero(&self) -> bool;
    /// The JSON, with Go's zero value when absent.
    fn required(&self) -> Conv;
}

impl<T: ToJson> Field for Option<T> {
    fn value(&self) -> Option<Conv> {
        self.as_ref().map(ToJson::to_json)
    }
    fn is_zero(&self) -> bool {
        self.as_ref().is_none_or(ToJson::is_zero)
    }
    fn required(&self) -> Conv {
        match self {
            Some(v) => v.to_json(),
            None => T::default().to_json(),
        }
    }
}

impl<T: ToJson> Field for Vec<T> {
    fn value(&self) -> Option<Conv> {
        Some(self.required())
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
    fn required(&self) -> Conv {
        self.iter()
            .enumerate()
            .map(|(i, v)| v.to_json().map_err(|e| e.within(&format!("[{i}]"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }
}

impl<T: ToJson> Field for BTreeMap<String, T> {
    fn value(&self) -> Option<Conv> {
        Some(self.required())
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
    fn required(&self) -> Conv {
        let mut map = Map::new();
        for (k, v) in self {
            let v = v.to_json().map_err(|e| e.within(&format!("[{k}]")))?;
            map.insert(k.clone(), v);
        }
        Ok(Value::Object(map))
    }
}

/// Builds a JSON object field by field; keeps the first error.
#[derive(Default)]
struct Obj {
    map: Map<String, Value>,
    err: Option<ConvError>,
}

impl Obj {
    fn put(mut self, key: &str, value: Option<Conv>) -> Self {
        if self.err.is_some() {
            return self;
        }
        match value {
            None | Some(Ok(Value::Null)) => {}
            Some(Ok(v)) => {
                self.map.insert(key.to_string(), v);
            }
            Some(Err(e)) => self.err = Some(e.within(key)),
        }
        self
    }

    /// A Go value field tagged `omitempty`.
    fn omit(self, key: &str, field: &impl Field) -> Self {
        let value = if field.is_zero() { None } else { field.value() };
        self.put(key, value)
    }

    /// A Go pointer field: written whenever present, zero included.
    fn ptr(self, key: &str, field: &impl Field) -> Self {
        self.put(key, field.value())
    }

    /// A Go field without `omitempty`: always written.
    fn req(self, key: &str, field: &impl Field) -> Self {
        self.put(key, Some(field.required()))
    }

    fn done(self) -> Conv {
        match self.err {
            Some(e) => Err(e),
            None => Ok(Value::Object(self.map)),
        }
    }
}

impl ToJson for String {
    fn to_json(&self) -> Conv {
        Ok(Value::String(self.clone()))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Conv {
        Ok(Value::Bool(*self))
    }
    fn is_zero(&self) -> bool {
        !*self
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Conv {
        Ok(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Conv {
        Ok(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

/// `[]byte`: standard base64 with padding, as Go's encoding/json writes it.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Conv {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

/// Go's zero `time.Time` as Unix seconds (0001-01-01T00:00:00Z).
const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// `metav1.Time` (`micro == false`, whole seconds) or `metav1.MicroTime` as RFC 3339 in UTC.
fn timestamp(seconds: Option<i64>, nanos: Option<i32>, micro: bool) -> Conv {
    // Go writes the zero time as an empty message, and its JSON is null: leave it out.
    if seconds.is_none() && nanos.is_none() {
        return Ok(Value::Null);
    }
    let (seconds, nanos) = (seconds.unwrap_or(0), nanos.unwrap_or(0));
    if seconds == GO_ZERO_TIME_UNIX && nanos == 0 {
        return Ok(Value::Null);
    }
    // Go's time.Unix accepts nanos outside [0, 1e9) and carries them into the seconds.
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let secs = i64::try_from(total.div_euclid(1_000_000_000));
    let subsec = u32::try_from(total.rem_euclid(1_000_000_000));
    let time = match (secs, subsec) {
        (Ok(s), Ok(n)) => chrono::DateTime::from_timestamp(s, n),
        _ => None,
    };
    let Some(time) = time else {
        return Err(ConvError::new(format!(
            "time {seconds}s {nanos}ns is out of range"
        )));
    };
    // Go's Time.MarshalJSON refuses years it cannot write in four digits.
    if !(0..=9999).contains(&chrono::Datelike::year(&time)) {
        return Err(ConvError::new("year outside of range [0,9999]"));
    }
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Value::String(time.format(format).to_string()))
}

impl ToJson for metav1::Time {
    fn to_json(&self) -> Conv {
        timestamp(self.seconds, self.nanos, false)
    }
}

impl ToJson for metav1::MicroTime {
    fn to_json(&self) -> Conv {
        timestamp(self.seconds, self.nanos, true)
    }
}

/// `fieldsV1` holds JSON bytes (the managed-fields set) that kube embeds verbatim.
impl ToJson for metav1::FieldsV1 {
    fn to_json(&self) -> Conv {
        match &self.raw {
            None => Ok(Value::Null),
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| ConvError::new(format!("fieldsV1 is not valid JSON: {e}"))),
        }
    }
}

impl ToJson for IntOrString {
    fn to_json(&self) -> Conv {
        match self.r#type.unwrap_or(0) {
            0 => Ok(Value::from(self.int_val.unwrap_or(0))),
            1 => Ok(Value::String(self.str_val.clone().unwrap_or_default())),
            t => Err(ConvError::new(format!("impossible IntOrString.Type {t}"))),
        }
    }
    /// Go writes a zero `targetPort` as `0`; kube defaults 0 and "" to the port, so leaving
    /// it out gives a registry the unset value its defaulting looks for.
    fn is_zero(&self) -> bool {
        match self.r#type.unwrap_or(0) {
            0 => self.int_val.unwrap_or(0) == 0,
            1 => self.str_val.as_deref().unwrap_or("").is_empty(),
            _ => false,
        }
    }
}

impl ToJson for Quantity {
    fn to_json(&self) -> Conv {
        Ok(Value::String(
            self.string.clone().unwrap_or_else(|| "0".to_string()),
        ))
    }
    fn is_zero(&self) -> bool {
        self.string.as_deref().unwrap_or("").is_empty()
    }
}

/// `ExtraValue` is a Go `[]string`: a JSON array, not an object.
impl ToJson for authnv1::ExtraValue {
    fn to_json(&self) -> Conv {
        self.items.required()
    }
}

impl ToJson for authzv1::ExtraValue {
    fn to_json(&self) -> Conv {
        self.items.required()
    }
}

/// `ToJson` for a message from its JSON keys in Go's field order, each with its mode
/// (`omit`, `ptr`, `req`, see [`Obj`]) taken from the Go type and json tag.
macro_rules! to_json {
    ($($ty:ty { $($mode:ident $key:literal => $field:ident),* $(,)? })*) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> Conv {
                Obj::default()$(.$mode($key, &self.$field))*.done()
            }
        }
    )*};
}

// meta.k8s.io/v1
to_json! {
    metav1::ObjectMeta {
        omit "name" => name,
        omit "generateName" => generate_name,
        omit "namespace" => namespace,
        omit "selfLink" => self_link,
        omit "uid" => uid,
        omit "resourceVersion" => resource_version,
        omit "generation" => generation,
        omit "creationTimestamp" => creation_timestamp,
        ptr "deletionTimestamp" => deletion_timestamp,
        ptr "deletionGracePeriodSeconds" => deletion_grace_period_seconds,
        omit "labels" => labels,
        omit "annotations" => annotations,
        omit "ownerReferences" => owner_references,
        omit "finalizers" => finalizers,
        omit "managedFields" => managed_fields,
    }
    metav1::OwnerReference {
        req "apiVersion" => api_version,
        req "kind" => kind,
        req "name" => name,
        req "uid" => uid,
        ptr "controller" => controller,
        ptr "blockOwnerDeletion" => block_owner_deletion,
    }
    metav1::ManagedFieldsEntry {
        omit "manager" => manager,
        omit "operation" => operation,
        omit "apiVersion" => api_version,
        ptr "time" => time,
        omit "fieldsType" => fields_type,
        ptr "fieldsV1" => fields_v1,
        omit "subresource" => subresource,
    }
    metav1::Condition {
        req "type" => r#type,
        req "status" => status,
        omit "observedGeneration" => observed_generation,
        req "lastTransitionTime" => last_transition_time,
        req "reason" => reason,
        req "message" => message,
    }
    metav1::LabelSelectorRequirement {
        req "key" => key,
        req "operator" => operator,
        omit "values" => values,
    }
    metav1::FieldSelectorRequirement {
        req "key" => key,
        req "operator" => operator,
        omit "values" => values,
    }
    metav1::DeleteOptions {
        ptr "gracePeriodSeconds" => grace_period_seconds,
        ptr "preconditions" => preconditions,
        ptr "orphanDependents" => orphan_dependents,
        ptr "propagationPolicy" => propagation_policy,
        omit "dryRun" => dry_run,
        ptr "ignoreStoreReadErrorWithClusterBreakingPotential" => ignore_store_read_error_with_cluster_breaking_potential,
    }
    metav1::Preconditions {
        ptr "uid" => uid,
        ptr "resourceVersion" => resource_version,
    }
}

// v1 (core)
to_json! {
    corev1::Namespace {
        omit "metadata" => metadata,
        omit "spec" => spec,
        omit "status" => status,
    }
    corev1::NamespaceSpec {
        omit "finalizers" => finalizers,
    }
    corev1::NamespaceStatus {
        omit "phase" => phase,
        omit "conditions" => conditions,
    }
    corev1::NamespaceCondition {
        req "type" => r#type,
        req "status" => status,
        omit "lastTransitionTime" => last_transition_time,
        omit "reason" => reason,
        omit "message" => message,
    }
    corev1::ConfigMap {
        omit "metadata" => metadata,
        ptr "immutable" => immutable,
        omit "data" => data,
        omit "binaryData" => binary_data,
    }
    corev1::Secret {
        omit "metadata" => metadata,
        ptr "immutable" => immutable,
        omit "data" => data,
        omit "stringData" => string_data,
        omit "type" => r#type,
    }
    corev1::ServiceAccount {
        omit "metadata" => metadata,
        omit "secrets" => secrets,
        omit "imagePullSecrets" => image_pull_secrets,
        ptr "automountServiceAccountToken" => automount_service_account_token,
    }
    corev1::ObjectReference {
        omit "kind" => kind,
        omit "namespace" => namespace,
        omit "name" => name,
        omit "uid" => uid,
        omit "apiVersion" => api_version,
        omit "resourceVersion" => resource_version,
        omit "fieldPath" => field_path,
    }
    corev1::LocalObjectReference {
        omit "name" => name,
    }
    corev1::Service {
        omit "metadata" => metadata,
        omit "spec" => spec,
        omit "status" => status,
    }
    corev1::ServiceSpec {
        omit "ports" => ports,
        omit "selector" => selector,
        omit "clusterIP" => cluster_ip,
        omit "clusterIPs" => cluster_ips,
        omit "type" => r#type,
        omit "externalIPs" => external_ips,
        omit "sessionAffinity" => session_affinity,
        omit "loadBalancerIP" => load_balancer_ip,
        omit "loadBalancerSourceRanges" => load_balancer_source_ranges,
        omit "externalName" => external_name,
        omit "externalTrafficPolicy" => external_traffic_policy,
        omit "healthCheckNodePort" => health_check_node_port,
        omit "publishNotReadyAddresses" => publish_not_ready_addresses,
        ptr "sessionAffinityConfig" => session_affinity_config,
        omit "ipFamilies" => ip_families,
        ptr "ipFamilyPolicy" => ip_family_policy,
        ptr "allocateLoadBalancerNodePorts" => allocate_load_balancer_node_ports,
        ptr "loadBalancerClass" => load_balancer_class,
        ptr "internalTrafficPolicy" => internal_traffic_policy,
        ptr "trafficDistribution" => traffic_distribution,
    }
    corev1::ServicePort {
        omit "name" => name,
        omit "protocol" => protocol,
        ptr "appProtocol" => app_protocol,
        req "port" => port,
        omit "targetPort" => target_port,
        omit "nodePort" => node_port,
    }
    corev1::SessionAffinityConfig {
        ptr "clientIP" => client_ip,
    }
    corev1::ClientIpConfig {
        ptr "timeoutSeconds" => timeout_seconds,
    }
    corev1::ServiceStatus {
        omit "loadBalancer" => load_balancer,
        omit "conditions" => conditions,
    }
    corev1::LoadBalancerStatus {
        omit "ingress" => ingress,
    }
    corev1::LoadBalancerIngress {
        omit "ip" => ip,
        omit "hostname" => hostname,
        ptr "ipMode" => ip_mode,
        omit "ports" => ports,
    }
    corev1::PortStatus {
        req "port" => port,
        req "protocol" => protocol,
        ptr "error" => error,
    }
    corev1::Endpoints {
        omit "metadata" => metadata,
        omit "subsets" => subsets,
    }
    corev1::EndpointSubset {
        omit "addresses" => addresses,
        omit "notReadyAddresses" => not_ready_addresses,
        omit "ports" => ports,
    }
    corev1::EndpointAddress {
        req "ip" => ip,
        omit "hostname" => hostname,
        ptr "nodeName" => node_name,
        ptr "targetRef" => target_ref,
    }
    corev1::EndpointPort {
        omit "name" => name,
        req "port" => port,
        omit "protocol" => protocol,
        ptr "appProtocol" => app_protocol,
    }
    corev1::Event {
        req "metadata" => metadata,
        req "involvedObject" => involved_object,
        omit "reason" => reason,
        omit "message" => message,
        omit "source" => source,
        omit "firstTimestamp" => first_timestamp,
        omit "lastTimestamp" => last_timestamp,
        omit "count" => count,
        omit "type" => r#type,
        omit "eventTime" => event_time,
        ptr "series" => series,
        omit "action" => action,
        ptr "related" => related,
        req "reportingComponent" => reporting_component,
        req "reportingInstance" => reporting_instance,
    }
    corev1::EventSource {
        omit "component" => component,
        omit "host" => host,
    }
    corev1::EventSeries {
        omit "count" => count,
        omit "lastObservedTime" => last_observed_time,
    }
}

// events.k8s.io/v1
to_json! {
    eventsv1::Event {
        req "metadata" => metadata,
        req "eventTime" => event_time,
        ptr "series" => series,
        omit "reportingController" => reporting_controller,
        omit "reportingInstance" => reporting_instance,
        omit "action" => action,
        omit "reason" => reason,
        omit "regarding" => regarding,
        ptr "related" => related,
        omit "note" => note,
        omit "type" => r#type,
        omit "deprecatedSource" => deprecated_source,
        omit "deprecatedFirstTimestamp" => deprecated_first_timestamp,
        omit "deprecatedLastTimestamp" => deprecated_last_timestamp,
        omit "deprecatedCount" => deprecated_count,
    }
    eventsv1::EventSeries {
        req "count" => count,
        req "lastObservedTime" => last_observed_time,
    }
}

// coordination.k8s.io/v1
to_json! {
    coordv1::Lease {
        omit "metadata" => metadata,
        omit "spec" => spec,
    }
    coordv1::LeaseSpec {
        ptr "holderIdentity" => holder_identity,
        ptr "leaseDurationSeconds" => lease_duration_seconds,
        ptr "acquireTime" => acquire_time,
        ptr "renewTime" => renew_time,
        ptr "leaseTransitions" => lease_transitions,
        ptr "strategy" => strategy,
        ptr "preferredHolder" => preferred_holder,
    }
}

// discovery.k8s.io/v1
to_json! {
    discv1::EndpointSlice {
        omit "metadata" => metadata,
        req "addressType" => address_type,
        req "endpoints" => endpoints,
        req "ports" => ports,
    }
    discv1::Endpoint {
        req "addresses" => addresses,
        omit "conditions" => conditions,
        ptr "hostname" => hostname,
        ptr "targetRef" => target_ref,
        omit "deprecatedTopology" => deprecated_topology,
        ptr "nodeName" => node_name,
        ptr "zone" => zone,
        ptr "hints" => hints,
    }
    discv1::EndpointConditions {
        ptr "ready" => ready,
        ptr "serving" => serving,
        ptr "terminating" => terminating,
    }
    discv1::EndpointHints {
        omit "forZones" => for_zones,
        omit "forNodes" => for_nodes,
    }
    discv1::ForZone {
        req "name" => name,
    }
    discv1::ForNode {
        req "name" => name,
    }
    discv1::EndpointPort {
        ptr "name" => name,
        ptr "protocol" => protocol,
        ptr "port" => port,
        ptr "appProtocol" => app_protocol,
    }
}

// authentication.k8s.io/v1
to_json! {
    authnv1::SelfSubjectReview {
        omit "metadata" => metadata,
        omit "status" => status,
    }
    authnv1::SelfSubjectReviewStatus {
        omit "userInfo" => user_info,
    }
    authnv1::TokenReview {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    authnv1::TokenReviewSpec {
        omit "token" => token,
        omit "audiences" => audiences,
    }
    authnv1::TokenReviewStatus {
        omit "authenticated" => authenticated,
        omit "user" => user,
        omit "audiences" => audiences,
        omit "error" => error,
    }
    authnv1::UserInfo {
        omit "username" => username,
        omit "uid" => uid,
        omit "groups" => groups,
        omit "extra" => extra,
    }
}

// authorization.k8s.io/v1
to_json! {
    authzv1::SubjectAccessReview {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    authzv1::SelfSubjectAccessReview {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    authzv1::LocalSubjectAccessReview {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    authzv1::SubjectAccessReviewSpec {
        ptr "resourceAttributes" => resource_attributes,
        ptr "nonResourceAttributes" => non_resource_attributes,
        omit "user" => user,
        omit "groups" => groups,
        omit "extra" => extra,
        omit "uid" => uid,
    }
    authzv1::SelfSubjectAccessReviewSpec {
        ptr "resourceAttributes" => resource_attributes,
        ptr "nonResourceAttributes" => non_resource_attributes,
    }
    authzv1::ResourceAttributes {
        omit "namespace" => namespace,
        omit "verb" => verb,
        omit "group" => group,
        omit "version" => version,
        omit "resource" => resource,
        omit "subresource" => subresource,
        omit "name" => name,
        ptr "fieldSelector" => field_selector,
        ptr "labelSelector" => label_selector,
    }
    authzv1::FieldSelectorAttributes {
        omit "rawSelector" => raw_selector,
        omit "requirements" => requirements,
    }
    authzv1::LabelSelectorAttributes {
        omit "rawSelector" => raw_selector,
        omit "requirements" => requirements,
    }
    authzv1::NonResourceAttributes {
        omit "path" => path,
        omit "verb" => verb,
    }
    authzv1::SubjectAccessReviewStatus {
        req "allowed" => allowed,
        omit "denied" => denied,
        omit "reason" => reason,
        omit "evaluationError" => evaluation_error,
    }
    authzv1::SelfSubjectRulesReview {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    authzv1::SelfSubjectRulesReviewSpec {
        omit "namespace" => namespace,
    }
    authzv1::SubjectRulesReviewStatus {
        req "resourceRules" => resource_rules,
        req "nonResourceRules" => non_resource_rules,
        req "incomplete" => incomplete,
        omit "evaluationError" => evaluation_error,
    }
    authzv1::ResourceRule {
        req "verbs" => verbs,
        omit "apiGroups" => api_groups,
        omit "resources" => resources,
        omit "resourceNames" => resource_names,
    }
    authzv1::NonResourceRule {
        req "verbs" => verbs,
        omit "nonResourceURLs" => non_resource_ur_ls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
    use serde_json::json;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: s(api_version),
                kind: s(kind),
            }),
            raw: Some(raw),
            content_encoding: s(""),
            content_type: s(""),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    fn wrap<T: k8s_pb::Resource + Message>(msg: &T) -> Vec<u8> {
        envelope(T::API_VERSION, T::KIND, msg.encode_to_vec())
    }

    fn meta(name: &str) -> metav1::ObjectMeta {
        metav1::ObjectMeta {
            name: s(name),
            ..Default::default()
        }
    }

    fn map<V: Clone>(entries: &[(&str, V)]) -> BTreeMap<String, V> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn ok(body: &[u8]) -> Value {
        decode(body).expect("decodes")
    }

    #[test]
    fn config_map_with_data_binary_data_and_labels() {
        let cm = corev1::ConfigMap {
            metadata: Some(metav1::ObjectMeta {
                namespace: s("default"),
                labels: map(&[("app", "web".to_string())]),
                ..meta("cfg")
            }),
            immutable: None,
            data: map(&[("a", "1".to_string()), ("b", "two".to_string())]),
            binary_data: map(&[("bin", vec![0u8, 1, 2, 255])]),
        };
        let got = ok(&wrap(&cm));
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cfg", "namespace": "default", "labels": {"app": "web"}},
                "data": {"a": "1", "b": "two"},
                "binaryData": {"bin": "AAEC/w=="},
            })
        );
        // kube writes apiVersion and kind first.
        let keys: Vec<&String> = got.as_object().expect("object").keys().collect();
        assert_eq!(
            keys,
            ["apiVersion", "kind", "metadata", "data", "binaryData"]
        );
    }

    #[test]
    fn secret_bytes_are_base64_and_pointer_zero_values_are_kept() {
        let secret = corev1::Secret {
            metadata: Some(meta("creds")),
            immutable: Some(false),
            data: map(&[("password", b"s3cr3t".to_vec()), ("empty", Vec::new())]),
            string_data: BTreeMap::new(),
            r#type: s("Opaque"),
        };
        assert_eq!(
            ok(&wrap(&secret)),
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds"},
                "immutable": false,
                "data": {"empty": "", "password": "czNjcjN0"},
                "type": "Opaque",
            })
        );
    }

    #[test]
    fn namespace_drops_go_zero_values() {
        // What a Go client writes: every non-pointer field, zero or not, and the zero
        // creationTimestamp as an empty message.
        let ns = corev1::Namespace {
            metadata: Some(metav1::ObjectMeta {
                generate_name: s(""),
                namespace: s(""),
                self_link: s(""),
                uid: s(""),
                resource_version: s(""),
                generation: Some(0),
                creation_timestamp: Some(metav1::Time::default()),
                ..meta("team-a")
            }),
            spec: Some(corev1::NamespaceSpec {
                finalizers: vec!["kubernetes".into()],
            }),
            status: Some(corev1::NamespaceStatus {
                phase: s(""),
                conditions: vec![],
            }),
        };
        assert_eq!(
            ok(&wrap(&ns)),
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-a"},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {},
            })
        );
    }

    #[test]
    fn object_meta_is_converted_fully() {
        let cm = corev1::ConfigMap {
            metadata: Some(metav1::ObjectMeta {
                generate_name: s("cfg-"),
                namespace: s("ns"),
                uid: s("1234"),
                resource_version: s("42"),
                generation: Some(3),
                creation_timestamp: Some(metav1::Time {
                    seconds: Some(1_700_000_000),
                    nanos: Some(999_999_999),
                }),
                deletion_timestamp: Some(metav1::Time {
                    seconds: Some(0),
                    nanos: Some(0),
                }),
                deletion_grace_period_seconds: Some(0),
                annotations: map(&[("note", "x".to_string())]),
                owner_references: vec![metav1::OwnerReference {
                    api_version: s("apps/v1"),
                    kind: s("Deployment"),
                    name: s("web"),
                    uid: s("abcd"),
                    controller: Some(true),
                    block_owner_deletion: None,
                }],
                finalizers: vec!["example.com/cleanup".into()],
                managed_fields: vec![metav1::ManagedFieldsEntry {
                    manager: s("kubectl"),
                    operation: s("Apply"),
                    api_version: s("v1"),
                    time: Some(metav1::Time {
                        seconds: Some(1_700_000_000),
                        nanos: None,
                    }),
                    fields_type: s("FieldsV1"),
                    fields_v1: Some(metav1::FieldsV1 {
                        raw: Some(br#"{"f:data":{"f:a":{}}}"#.to_vec()),
                    }),
                    subresource: s(""),
                }],
                ..meta("cfg")
            }),
            ..Default::default()
        };
        assert_eq!(
            ok(&wrap(&cm))["metadata"],
            json!({
                "name": "cfg",
                "generateName": "cfg-",
                "namespace": "ns",
                "uid": "1234",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "deletionTimestamp": "1970-01-01T00:00:00Z",
                "deletionGracePeriodSeconds": 0,
                "annotations": {"note": "x"},
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                    "uid": "abcd", "controller": true,
                }],
                "finalizers": ["example.com/cleanup"],
                "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Apply",
                    "apiVersion": "v1",
                    "time": "2023-11-14T22:13:20Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:a": {}}},
                }],
            })
        );
    }

    #[test]
    fn invalid_fields_v1_is_a_bad_request_naming_the_field() {
        let cm = corev1::ConfigMap {
            metadata: Some(metav1::ObjectMeta {
                managed_fields: vec![metav1::ManagedFieldsEntry {
                    fields_v1: Some(metav1::FieldsV1 {
                        raw: Some(b"{not json".to_vec()),
                    }),
                    ..Default::default()
                }],
                ..meta("cfg")
            }),
            ..Default::default()
        };
        let err = decode(&wrap(&cm)).expect_err("bad fieldsV1");
        assert_eq!((err.code, err.reason), (400, "BadRequest"));
        assert!(
            err.message
                .contains("metadata.managedFields[0].fieldsV1: fieldsV1 is not valid JSON"),
            "{}",
            err.message
        );
    }

    #[test]
    fn service_ports_with_int_and_string_target_ports() {
        let port = |name: &str, port: i32, target: Option<IntOrString>| corev1::ServicePort {
            name: s(name),
            protocol: s("TCP"),
            app_protocol: None,
            port: Some(port),
            target_port: target,
            node_port: Some(0),
        };
        let svc = corev1::Service {
            metadata: Some(meta("web")),
            spec: Some(corev1::ServiceSpec {
                ports: vec![
                    port(
                        "http",
                        80,
                        Some(IntOrString {
                            r#type: Some(0),
                            int_val: Some(8080),
                            str_val: s(""),
                        }),
                    ),
                    port(
                        "https",
                        443,
                        Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: s("https"),
                        }),
                    ),
                    // A Go client writes an unset targetPort as the zero IntOrString.
                    port("metrics", 9090, Some(IntOrString::default())),
                ],
                selector: map(&[("app", "web".to_string())]),
                r#type: s("ClusterIP"),
                health_check_node_port: Some(0),
                publish_not_ready_addresses: Some(false),
                ..Default::default()
            }),
            status: Some(corev1::ServiceStatus {
                load_balancer: Some(corev1::LoadBalancerStatus::default()),
                conditions: vec![],
            }),
        };
        assert_eq!(
            ok(&wrap(&svc)),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web"},
                "spec": {
                    "ports": [
                        {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                        {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https"},
                        {"name": "metrics", "protocol": "TCP", "port": 9090},
                    ],
                    "selector": {"app": "web"},
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}},
            })
        );
    }

    #[test]
    fn lease_micro_times_keep_microseconds() {
        let lease = coordv1::Lease {
            metadata: Some(metav1::ObjectMeta {
                namespace: s("kube-system"),
                ..meta("leader")
            }),
            spec: Some(coordv1::LeaseSpec {
                holder_identity: s("node-1"),
                lease_duration_seconds: Some(15),
                acquire_time: Some(metav1::MicroTime {
                    seconds: Some(1_700_000_000),
                    nanos: Some(0),
                }),
                renew_time: Some(metav1::MicroTime {
                    seconds: Some(1_700_000_005),
                    nanos: Some(123_456_789),
                }),
                lease_transitions: Some(0),
                strategy: None,
                preferred_holder: None,
            }),
        };
        assert_eq!(
            ok(&wrap(&lease)),
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "leader", "namespace": "kube-system"},
                "spec": {
                    "holderIdentity": "node-1",
                    "leaseDurationSeconds": 15,
                    "acquireTime": "2023-11-14T22:13:20.000000Z",
                    "renewTime": "2023-11-14T22:13:25.123456Z",
                    "leaseTransitions": 0,
                },
            })
        );
    }

    #[test]
    fn self_subject_access_review_writes_required_allowed() {
        let review = authzv1::SelfSubjectAccessReview {
            metadata: Some(metav1::ObjectMeta::default()),
            spec: Some(authzv1::SelfSubjectAccessReviewSpec {
                resource_attributes: Some(authzv1::ResourceAttributes {
                    namespace: s("default"),
                    verb: s("create"),
                    group: s(""),
                    version: s(""),
                    resource: s("configmaps"),
                    subresource: s(""),
                    name: s(""),
                    field_selector: None,
                    label_selector: None,
                }),
                non_resource_attributes: None,
            }),
            status: Some(authzv1::SubjectAccessReviewStatus {
                allowed: Some(false),
                denied: Some(false),
                reason: s(""),
                evaluation_error: s(""),
            }),
        };
        assert_eq!(
            ok(&wrap(&review)),
            json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "metadata": {},
                "spec": {"resourceAttributes": {
                    "namespace": "default", "verb": "create", "resource": "configmaps",
                }},
                "status": {"allowed": false},
            })
        );
        // Without spec and status in the message the required spec still appears.
        let bare = ok(&wrap(&authzv1::SelfSubjectAccessReview::default()));
        assert_eq!(bare["spec"], json!({}));
        assert!(bare.get("status").is_none());
    }

    #[test]
    fn subject_access_review_extra_is_a_map_of_lists() {
        let review = authzv1::SubjectAccessReview {
            spec: Some(authzv1::SubjectAccessReviewSpec {
                non_resource_attributes: Some(authzv1::NonResourceAttributes {
                    path: s("/healthz"),
                    verb: s("get"),
                }),
                user: s("alice"),
                groups: vec!["dev".into()],
                extra: map(&[(
                    "scopes",
                    authzv1::ExtraValue {
                        items: vec!["a".into(), "b".into()],
                    },
                )]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            ok(&wrap(&review))["spec"],
            json!({
                "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
                "user": "alice",
                "groups": ["dev"],
                "extra": {"scopes": ["a", "b"]},
            })
        );
    }

    #[test]
    fn delete_options_with_propagation_policy_and_preconditions() {
        let opts = metav1::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(metav1::Preconditions {
                uid: s("1234"),
                resource_version: s("42"),
            }),
            orphan_dependents: None,
            propagation_policy: s("Foreground"),
            dry_run: vec!["All".into()],
            ignore_store_read_error_with_cluster_breaking_potential: None,
        };
        for (sent, api_version) in [
            ("meta.k8s.io/v1", "meta.k8s.io/v1"),
            ("v1", "v1"),
            ("", "meta.k8s.io/v1"),
        ] {
            let got = ok(&envelope(sent, "DeleteOptions", opts.encode_to_vec()));
            assert_eq!(
                got,
                json!({
                    "apiVersion": api_version,
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": "1234", "resourceVersion": "42"},
                    "propagationPolicy": "Foreground",
                    "dryRun": ["All"],
                })
            );
        }
    }

    #[test]
    fn endpoint_slice_writes_required_lists() {
        let slice = discv1::EndpointSlice {
            metadata: Some(meta("web-abc")),
            address_type: s("IPv4"),
            endpoints: vec![discv1::Endpoint {
                addresses: vec!["10.0.0.1".into()],
                conditions: Some(discv1::EndpointConditions {
                    ready: Some(true),
                    serving: None,
                    terminating: Some(false),
                }),
                ..Default::default()
            }],
            ports: vec![],
        };
        assert_eq!(
            ok(&wrap(&slice)),
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": "web-abc"},
                "addressType": "IPv4",
                "endpoints": [{
                    "addresses": ["10.0.0.1"],
                    "conditions": {"ready": true, "terminating": false},
                }],
                "ports": [],
            })
        );
    }

    #[test]
    fn events_both_versions() {
        let core_event = corev1::Event {
            metadata: Some(meta("pod.1")),
            involved_object: Some(corev1::ObjectReference {
                kind: s("Pod"),
                name: s("pod"),
                ..Default::default()
            }),
            reason: s("Started"),
            first_timestamp: Some(metav1::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            count: Some(1),
            event_time: Some(metav1::MicroTime::default()),
            ..Default::default()
        };
        assert_eq!(
            ok(&wrap(&core_event)),
            json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "pod.1"},
                "involvedObject": {"kind": "Pod", "name": "pod"},
                "reason": "Started",
                "firstTimestamp": "2023-11-14T22:13:20Z",
                "count": 1,
                "reportingComponent": "",
                "reportingInstance": "",
            })
        );
        let event = eventsv1::Event {
            metadata: Some(meta("pod.2")),
            event_time: Some(metav1::MicroTime {
                seconds: Some(1_700_000_000),
                nanos: Some(5_000),
            }),
            series: Some(eventsv1::EventSeries {
                count: Some(2),
                last_observed_time: None,
            }),
            reporting_controller: s("kubelet"),
            note: s("started"),
            ..Default::default()
        };
        assert_eq!(
            ok(&wrap(&event)),
            json!({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": "pod.2"},
                "eventTime": "2023-11-14T22:13:20.000005Z",
                "series": {"count": 2},
                "reportingController": "kubelet",
                "note": "started",
            })
        );
    }

    #[test]
    fn token_review_and_self_subject_review() {
        let review = authnv1::TokenReview {
            spec: Some(authnv1::TokenReviewSpec {
                token: s("abc"),
                audiences: vec!["api".into()],
            }),
            ..Default::default()
        };
        assert_eq!(
            ok(&wrap(&review)),
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": "abc", "audiences": ["api"]},
            })
        );
        let ssr = authnv1::SelfSubjectReview {
            metadata: Some(metav1::ObjectMeta::default()),
            status: Some(authnv1::SelfSubjectReviewStatus::default()),
        };
        assert_eq!(
            ok(&wrap(&ssr)),
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "SelfSubjectReview",
                "metadata": {},
                "status": {},
            })
        );
    }

    #[test]
    fn times_follow_go() {
        let time = |seconds, nanos| metav1::Time {
            seconds: Some(seconds),
            nanos: Some(nanos),
        };
        // Nanos outside [0, 1e9) carry into the seconds as time.Unix does.
        assert_eq!(
            time(10, -1).to_json().expect("time"),
            json!("1970-01-01T00:00:09Z")
        );
        assert_eq!(
            time(GO_ZERO_TIME_UNIX, 0).to_json().expect("time"),
            Value::Null
        );
        assert!(time(300_000_000_000, 0).to_json().is_err());
        assert!(time(i64::MAX, i32::MAX).to_json().is_err());
        assert_eq!(
            Quantity { string: s("100m") }.to_json().expect("quantity"),
            json!("100m")
        );
    }

    #[test]
    fn bad_magic_is_a_bad_request() {
        for body in [&b""[..], b"k8", b"{\"kind\":\"ConfigMap\"}", b"k8s\x01abc"] {
            let err = decode(body).expect_err("bad magic");
            assert_eq!((err.code, err.reason), (400, "BadRequest"), "{body:?}");
            assert!(err.message.contains("k8s\\x00"), "{}", err.message);
        }
        // Magic, then bytes that are not a runtime.Unknown.
        let err = decode(b"k8s\0\xff\xff\xff").expect_err("bad envelope");
        assert_eq!(err.code, 400);
        assert!(err.message.contains("runtime.Unknown"), "{}", err.message);
        // A valid envelope whose raw bytes are not the named message.
        let err =
            decode(&envelope("v1", "ConfigMap", vec![0x0a, 0x05, 0x01])).expect_err("bad raw");
        assert_eq!(err.code, 400);
        assert!(err.message.contains("ConfigMap"), "{}", err.message);
    }

    #[test]
    fn unknown_kind_is_unsupported_media_type() {
        let err = decode(&envelope("v1", "Pod", Vec::new())).expect_err("pod");
        assert_eq!((err.code, err.reason), (415, "UnsupportedMediaType"));
        assert!(err.message.contains("\"Pod\""), "{}", err.message);
        assert!(err.message.contains("application/json"), "{}", err.message);
        // The kind must match in its own group version.
        let err = decode(&envelope("apps/v1", "ConfigMap", Vec::new())).expect_err("apps");
        assert_eq!(err.code, 415);
    }

    #[test]
    fn content_encoding_is_unsupported() {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: s("v1"),
                kind: s("ConfigMap"),
            }),
            raw: Some(Vec::new()),
            content_encoding: s("gzip"),
            content_type: None,
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        let err = decode(&body).expect_err("gzip");
        assert_eq!(err.code, 415);
        assert!(err.message.contains("gzip"), "{}", err.message);
    }
}

//! The JSON form of every k8s-pb message kubegate converts, one table per API group: each
//! line is a JSON key in Go's field order with its mode (`omit`, `ptr`, `req`) taken from the
//! Go type and json tag. One line drives both directions, so decoding and encoding cannot
//! disagree about a field.

use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::api::autoscaling::v1 as autoscalingv1;
use k8s_pb::api::coordination::v1 as coordv1;
use k8s_pb::api::core::v1 as corev1;
use k8s_pb::api::discovery::v1 as discv1;
use k8s_pb::api::events::v1 as eventsv1;
use k8s_pb::api::flowcontrol::v1 as flowv1;
use k8s_pb::api::rbac::v1 as rbacv1;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as apiregv1;
use serde_json::Value;

use super::convert::{Conv, ConvError, Fields, FromJson, Obj, ToJson};
use super::shape::{Pass, Shape, Shaper};

/// `ToJson` (through [`Obj`]), `FromJson` (through [`Fields`]) and [`Shape`] (through
/// [`Shaper`]) for each listed message.
///
/// `FromJson` names every field of the message instead of ending in `..Default::default()`,
/// so a table that misses a k8s-pb field fails to compile rather than silently dropping it.
macro_rules! messages {
    ($($ty:ty { $($mode:ident $key:literal => $field:ident),* $(,)? })*) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> Conv {
                Obj::default()$(.$mode($key, &self.$field))*.done()
            }
        }

        impl FromJson for $ty {
            fn from_json(value: &Value) -> Result<Self, ConvError> {
                // (A message without fields, such as an empty subresource marker, reads none.)
                #[allow(unused_variables)]
                let fields = Fields::of(value)?;
                Ok(Self {
                    $($field: fields.$mode($key)?,)*
                })
            }
        }

        impl Shape for $ty {
            fn shape(value: &mut Value, pass: Pass) {
                if let Value::Object(map) = value {
                    Shaper(map, pass)$(.$mode($key, |m: &$ty| &m.$field))*;
                }
            }

            fn decoded_null() -> Option<Value> {
                <$ty as ToJson>::to_json(&<$ty>::default()).ok()
            }
        }
    )*};
}

/// For the groups whose tables live in modules of their own (`apiextensions.rs`).
pub(super) use messages;

// meta.k8s.io/v1
messages! {
    metav1::ListMeta {
        omit "selfLink" => self_link,
        omit "resourceVersion" => resource_version,
        omit "continue" => r#continue,
        ptr "remainingItemCount" => remaining_item_count,
    }
    metav1::Status {
        omit "metadata" => metadata,
        omit "status" => status,
        omit "message" => message,
        omit "reason" => reason,
        ptr "details" => details,
        omit "code" => code,
    }
    metav1::StatusDetails {
        omit "name" => name,
        omit "group" => group,
        omit "kind" => kind,
        omit "uid" => uid,
        omit "causes" => causes,
        omit "retryAfterSeconds" => retry_after_seconds,
    }
    metav1::StatusCause {
        omit "reason" => reason,
        omit "message" => message,
        omit "field" => field,
    }
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
    metav1::LabelSelector {
        omit "matchLabels" => match_labels,
        omit "matchExpressions" => match_expressions,
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
messages! {
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
messages! {
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
messages! {
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
messages! {
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
messages! {
    authnv1::SelfSubjectReview {
        omit "metadata" => metadata,
        omit "status" => status,
    }
    authnv1::SelfSubjectReviewStatus {
        omit "userInfo" => user_info,
    }
    authnv1::TokenRequest {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    authnv1::TokenRequestSpec {
        req "audiences" => audiences,
        ptr "expirationSeconds" => expiration_seconds,
        ptr "boundObjectRef" => bound_object_ref,
    }
    authnv1::TokenRequestStatus {
        req "token" => token,
        req "expirationTimestamp" => expiration_timestamp,
    }
    authnv1::BoundObjectReference {
        omit "kind" => kind,
        omit "apiVersion" => api_version,
        omit "name" => name,
        omit "uid" => u_id,
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
messages! {
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

// rbac.authorization.k8s.io/v1: `rules` and `roleRef` have no `omitempty`, `aggregationRule`
// is a pointer.
messages! {
    rbacv1::Role {
        omit "metadata" => metadata,
        req "rules" => rules,
    }
    rbacv1::ClusterRole {
        omit "metadata" => metadata,
        req "rules" => rules,
        ptr "aggregationRule" => aggregation_rule,
    }
    rbacv1::AggregationRule {
        omit "clusterRoleSelectors" => cluster_role_selectors,
    }
    rbacv1::PolicyRule {
        req "verbs" => verbs,
        omit "apiGroups" => api_groups,
        omit "resources" => resources,
        omit "resourceNames" => resource_names,
        omit "nonResourceURLs" => non_resource_ur_ls,
    }
    rbacv1::RoleBinding {
        omit "metadata" => metadata,
        omit "subjects" => subjects,
        req "roleRef" => role_ref,
    }
    rbacv1::ClusterRoleBinding {
        omit "metadata" => metadata,
        omit "subjects" => subjects,
        req "roleRef" => role_ref,
    }
    rbacv1::Subject {
        req "kind" => kind,
        omit "apiGroup" => api_group,
        req "name" => name,
        omit "namespace" => namespace,
    }
    rbacv1::RoleRef {
        req "apiGroup" => api_group,
        req "kind" => kind,
        req "name" => name,
    }
}

// meta.k8s.io/v1 metadata-only views (`Accept: ...;as=PartialObjectMetadata`), which
// controller-runtime's metadata clients read as protobuf.
messages! {
    metav1::PartialObjectMetadata {
        omit "metadata" => metadata,
    }
    metav1::PartialObjectMetadataList {
        omit "metadata" => metadata,
        req "items" => items,
    }
}

// autoscaling/v1: the `scale` subresource of custom resources.
messages! {
    autoscalingv1::Scale {
        omit "metadata" => metadata,
        omit "spec" => spec,
        omit "status" => status,
    }
    autoscalingv1::ScaleSpec {
        omit "replicas" => replicas,
    }
    autoscalingv1::ScaleStatus {
        req "replicas" => replicas,
        omit "selector" => selector,
    }
}

// apiregistration.k8s.io/v1: `service` is an `omitempty` pointer (a local APIService has
// none).
messages! {
    apiregv1::APIService {
        omit "metadata" => metadata,
        omit "spec" => spec,
        omit "status" => status,
    }
    apiregv1::APIServiceList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    apiregv1::APIServiceSpec {
        ptr "service" => service,
        omit "group" => group,
        omit "version" => version,
        omit "insecureSkipTLSVerify" => insecure_skip_tls_verify,
        omit "caBundle" => ca_bundle,
        req "groupPriorityMinimum" => group_priority_minimum,
        req "versionPriority" => version_priority,
    }
    apiregv1::ServiceReference {
        omit "namespace" => namespace,
        omit "name" => name,
        ptr "port" => port,
    }
    apiregv1::APIServiceStatus {
        omit "conditions" => conditions,
    }
    apiregv1::APIServiceCondition {
        req "type" => r#type,
        req "status" => status,
        omit "lastTransitionTime" => last_transition_time,
        omit "reason" => reason,
        omit "message" => message,
    }
}

// flowcontrol.apiserver.k8s.io/v1
messages! {
    flowv1::FlowSchema {
        omit "metadata" => metadata,
        omit "spec" => spec,
        omit "status" => status,
    }
    flowv1::FlowSchemaList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    flowv1::FlowSchemaSpec {
        req "priorityLevelConfiguration" => priority_level_configuration,
        req "matchingPrecedence" => matching_precedence,
        ptr "distinguisherMethod" => distinguisher_method,
        omit "rules" => rules,
    }
    flowv1::FlowDistinguisherMethod {
        req "type" => r#type,
    }
    flowv1::PriorityLevelConfigurationReference {
        req "name" => name,
    }
    flowv1::PolicyRulesWithSubjects {
        req "subjects" => subjects,
        omit "resourceRules" => resource_rules,
        omit "nonResourceRules" => non_resource_rules,
    }
    flowv1::Subject {
        req "kind" => kind,
        ptr "user" => user,
        ptr "group" => group,
        ptr "serviceAccount" => service_account,
    }
    flowv1::UserSubject {
        req "name" => name,
    }
    flowv1::GroupSubject {
        req "name" => name,
    }
    flowv1::ServiceAccountSubject {
        req "namespace" => namespace,
        req "name" => name,
    }
    flowv1::ResourcePolicyRule {
        req "verbs" => verbs,
        req "apiGroups" => api_groups,
        req "resources" => resources,
        omit "clusterScope" => cluster_scope,
        req "namespaces" => namespaces,
    }
    flowv1::NonResourcePolicyRule {
        req "verbs" => verbs,
        req "nonResourceURLs" => non_resource_ur_ls,
    }
    flowv1::FlowSchemaStatus {
        omit "conditions" => conditions,
    }
    flowv1::FlowSchemaCondition {
        omit "type" => r#type,
        omit "status" => status,
        omit "lastTransitionTime" => last_transition_time,
        omit "reason" => reason,
        omit "message" => message,
    }
    flowv1::PriorityLevelConfiguration {
        omit "metadata" => metadata,
        omit "spec" => spec,
        omit "status" => status,
    }
    flowv1::PriorityLevelConfigurationList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    flowv1::PriorityLevelConfigurationSpec {
        req "type" => r#type,
        ptr "limited" => limited,
        ptr "exempt" => exempt,
    }
    flowv1::LimitedPriorityLevelConfiguration {
        ptr "nominalConcurrencyShares" => nominal_concurrency_shares,
        omit "limitResponse" => limit_response,
        ptr "lendablePercent" => lendable_percent,
        ptr "borrowingLimitPercent" => borrowing_limit_percent,
    }
    flowv1::ExemptPriorityLevelConfiguration {
        ptr "nominalConcurrencyShares" => nominal_concurrency_shares,
        ptr "lendablePercent" => lendable_percent,
    }
    flowv1::LimitResponse {
        req "type" => r#type,
        ptr "queuing" => queuing,
    }
    flowv1::QueuingConfiguration {
        req "queues" => queues,
        req "handSize" => hand_size,
        req "queueLengthLimit" => queue_length_limit,
    }
    flowv1::PriorityLevelConfigurationStatus {
        omit "conditions" => conditions,
    }
    flowv1::PriorityLevelConfigurationCondition {
        omit "type" => r#type,
        omit "status" => status,
        omit "lastTransitionTime" => last_transition_time,
        omit "reason" => reason,
        omit "message" => message,
    }
}

// The lists of the kinds kubegate serves: Go's `metadata` is a value `ListMeta` tagged
// `omitempty` and `items` has no `omitempty` (kube always writes `"items": [...]`).
messages! {
    corev1::NamespaceList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    corev1::ConfigMapList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    corev1::SecretList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    corev1::ServiceAccountList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    corev1::ServiceList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    corev1::EndpointsList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    corev1::EventList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    eventsv1::EventList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    coordv1::LeaseList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    discv1::EndpointSliceList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    rbacv1::RoleList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    rbacv1::ClusterRoleList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    rbacv1::RoleBindingList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    rbacv1::ClusterRoleBindingList {
        omit "metadata" => metadata,
        req "items" => items,
    }
}

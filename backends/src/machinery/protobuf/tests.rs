use std::collections::BTreeMap;

use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::convert::GO_ZERO_TIME_UNIX;
use super::*;

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

/// What `kubectl create rolebinding --clusterrole=view --serviceaccount=ci:builder` sends
/// as protobuf: Go writes every string, empty ones included, and they read as unset.
#[test]
fn rbac_kinds_from_a_go_client() {
    let binding = rbacv1::RoleBinding {
        metadata: Some(metav1::ObjectMeta {
            namespace: s("default"),
            ..meta("viewers")
        }),
        subjects: vec![rbacv1::Subject {
            kind: s("ServiceAccount"),
            api_group: s(""),
            name: s("builder"),
            namespace: s("ci"),
        }],
        role_ref: Some(rbacv1::RoleRef {
            api_group: s("rbac.authorization.k8s.io"),
            kind: s("ClusterRole"),
            name: s("view"),
        }),
    };
    assert_eq!(
        ok(&wrap(&binding)),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "viewers", "namespace": "default"},
            "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "ci"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        })
    );
    let role = rbacv1::ClusterRole {
        metadata: Some(meta("pod-reader")),
        rules: vec![rbacv1::PolicyRule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["pods".into()],
            resource_names: Vec::new(),
            non_resource_ur_ls: Vec::new(),
        }],
        aggregation_rule: None,
    };
    assert_eq!(
        ok(&wrap(&role)),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "pod-reader"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
        })
    );
    // An aggregated role's empty selector list and a binding without subjects.
    let aggregated = rbacv1::ClusterRole {
        metadata: Some(meta("monitoring")),
        rules: Vec::new(),
        aggregation_rule: Some(rbacv1::AggregationRule {
            cluster_role_selectors: vec![metav1::LabelSelector {
                match_labels: map(&[("team", "obs".to_string())]),
                match_expressions: Vec::new(),
            }],
        }),
    };
    let got = ok(&wrap(&aggregated));
    assert_eq!(
        got["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {"team": "obs"}}]})
    );
    // Protobuf cannot tell nil from empty; the RBAC strategy stores either as Go's `null`.
    assert_eq!(got["rules"], json!([]));
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
    // kube's protobuf serializer's words.
    for (body, message) in [
        (&b""[..], "empty data"),
        (b"k8", "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"),
        (b"{\"kind\":\"ConfigMap\"}", "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"),
        (b"k8s\x01abc", "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"),
        (b"k8s\0", "empty body"),
    ] {
        let err = decode(body).expect_err("bad magic");
        assert_eq!((err.code, err.reason), (400, "BadRequest"), "{body:?}");
        assert_eq!(err.message, message, "{body:?}");
    }
    // Magic, then bytes that are not a runtime.Unknown.
    let err = decode(b"k8s\0\xff\xff\xff").expect_err("bad envelope");
    assert_eq!(err.code, 400);
    assert!(err.message.contains("runtime.Unknown"), "{}", err.message);
    // A valid envelope whose raw bytes are not the named message.
    let err = decode(&envelope("v1", "ConfigMap", vec![0x0a, 0x05, 0x01])).expect_err("bad raw");
    assert_eq!(err.code, 400);
    assert!(err.message.contains("ConfigMap"), "{}", err.message);
    // For an endpoint, worded as kube's handler words a body of a known kind.
    let err = decode_for(
        &envelope("v1", "ConfigMap", vec![0x0a, 0x05, 0x01]),
        Some(("v1", "ConfigMap")),
    )
    .expect_err("bad raw")
    .into_api_error();
    assert!(
        err.message
            .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
        "{}",
        err.message
    );
}

#[test]
fn an_unregistered_kind_is_a_bad_request_and_an_envelope_without_kind_takes_the_endpoints() {
    // A kind kube knows and kubegate does not decode is said to be so.
    let err = decode(&envelope("v1", "Pod", Vec::new())).expect_err("pod");
    assert_eq!((err.code, err.reason), (415, "UnsupportedMediaType"));
    assert!(err.message.contains("\"Pod\""), "{}", err.message);
    // The kind must match in its own group version.
    let err = decode_for(
        &envelope("apps/v1", "ConfigMap", Vec::new()),
        Some(("v1", "ConfigMap")),
    )
    .expect_err("apps")
    .into_api_error();
    assert_eq!(err.code, 400);
    assert!(
        err.message.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: no kind \"ConfigMap\" is registered for version \"apps/v1\""),
        "{}",
        err.message
    );
    // No kind and no version: the endpoint's (kube's copyKindDefaults).
    let decoded = decode_for(&envelope("", "", Vec::new()), Some(("v1", "ConfigMap"))).unwrap();
    assert_eq!(decoded["kind"], "ConfigMap");
    assert_eq!(decoded["apiVersion"], "v1");
    let decoded = decode_for(
        &envelope("", "ConfigMap", Vec::new()),
        Some(("v1", "ConfigMap")),
    )
    .unwrap();
    assert_eq!(decoded["apiVersion"], "v1");
    // Without an endpoint, an envelope without kind is unrecognized.
    assert!(matches!(
        decode_for(&envelope("v1", "", Vec::new()), None),
        Err(BodyError::Unrecognized(m)) if m == "Object 'Kind' is missing in 'runtime.TypeMeta{APIVersion:\"v1\", Kind:\"\"}'"
    ));
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

// ---- encoding ----

/// Decodes any body [`encode`] writes: the request kinds, and lists and `Status` too.
fn decode_any(body: &[u8]) -> Value {
    decode_with(body, &[REQUEST_KINDS, RESPONSE_KINDS], None).expect("decodes")
}

/// `decode(encode(object)) == object`.
fn round_trip(object: &Value) {
    let body = encode(object).unwrap_or_else(|e| panic!("{e}: {object}"));
    assert!(body.starts_with(&MAGIC));
    assert_eq!(decode_any(&body), *object);
}

/// The same object as Go writes it in JSON and in protobuf: kubernetes/api's serialization
/// compatibility data (testdata/v1.34.0, Apache-2.0), every field set.
macro_rules! golden {
    ($($name:literal),* $(,)?) => {
        &[$((
            $name,
            include_bytes!(concat!("testdata/", $name, ".json")),
            include_bytes!(concat!("testdata/", $name, ".pb")),
        )),*]
    };
}

const GOLDEN: &[(&str, &[u8], &[u8])] = golden![
    "core.v1.Namespace",
    "core.v1.ConfigMap",
    "core.v1.Secret",
    "core.v1.ServiceAccount",
    "core.v1.Service",
    "core.v1.Endpoints",
    "core.v1.Event",
    "core.v1.Status",
    "events.k8s.io.v1.Event",
    "coordination.k8s.io.v1.Lease",
    "discovery.k8s.io.v1.EndpointSlice",
    "rbac.authorization.k8s.io.v1.Role",
    "rbac.authorization.k8s.io.v1.ClusterRole",
    "rbac.authorization.k8s.io.v1.RoleBinding",
    "rbac.authorization.k8s.io.v1.ClusterRoleBinding",
    "authentication.k8s.io.v1.SelfSubjectReview",
    "authentication.k8s.io.v1.TokenReview",
    "authorization.k8s.io.v1.SelfSubjectAccessReview",
    "authorization.k8s.io.v1.SubjectAccessReview",
    "authorization.k8s.io.v1.LocalSubjectAccessReview",
    "authorization.k8s.io.v1.SelfSubjectRulesReview",
    "flowcontrol.apiserver.k8s.io.v1.FlowSchema",
    "flowcontrol.apiserver.k8s.io.v1.PriorityLevelConfiguration",
    "autoscaling.v1.Scale",
    "apiextensions.k8s.io.v1.CustomResourceDefinition",
];

#[test]
fn go_fixtures_encode_byte_for_byte_and_decode_to_their_json() {
    for (name, json, pb) in GOLDEN {
        let object: Value = serde_json::from_slice(json).expect(name);
        let body = encode(&object).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            body == *pb,
            "{name}: the encoding differs from Go's\nours: {}\ngo:   {}",
            hex::encode(&body),
            hex::encode(pb)
        );
        assert_eq!(
            decode_any(pb),
            object,
            "{name}: decoding differs from Go's JSON"
        );
    }
}

/// `base` with the keys of `extra` added.
fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
    base
}

/// What kubegate stores for each kind it serves, with the fields a real object carries.
fn stored_objects() -> Vec<Value> {
    let meta = |name: &str, namespace: Option<&str>| {
        let mut meta = json!({
            "name": name,
            "uid": "8b1f9a52-6d4c-4d7e-9f51-0d1b2c3e4f50",
            "resourceVersion": "42",
            "creationTimestamp": "2024-05-01T10:00:00Z",
        });
        if let Some(namespace) = namespace {
            meta["namespace"] = json!(namespace);
        }
        meta
    };
    let ns = Some("default");
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "team-a",
                "uid": "8b1f9a52-6d4c-4d7e-9f51-0d1b2c3e4f50",
                "resourceVersion": "12",
                "creationTimestamp": "2024-05-01T10:00:00Z",
                "deletionTimestamp": "2024-05-02T08:30:00Z",
                "labels": {"kubernetes.io/metadata.name": "team-a"},
                "managedFields": [{
                    "manager": "kubectl-create",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-05-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}},
                }],
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {
                "phase": "Terminating",
                "conditions": [{
                    "type": "NamespaceDeletionContentFailure",
                    "status": "False",
                    "lastTransitionTime": "2024-05-02T08:30:01Z",
                    "reason": "ContentDeleted",
                    "message": "All content successfully deleted, may be waiting on finalization",
                }],
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": with(meta("app-config", ns), json!({
                "annotations": {"note": "", "owner": "team-a"},
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                    "uid": "0e6c2a9d-1111-2222-3333-444455556666",
                    "controller": true, "blockOwnerDeletion": true,
                }],
                "finalizers": ["example.com/keep"],
                "generation": 2,
            })),
            "immutable": false,
            // An empty value: prost leaves it out of the map entry, and it still reads back.
            "data": {"empty": "", "settings.yaml": "replicas: 3\n"},
            "binaryData": {"logo.png": "iVBORw0KGgo="},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta("tls", ns),
            "data": {"tls.crt": "LS0tLS1CRUdJTg==", "tls.key": ""},
            "type": "kubernetes.io/tls",
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta("builder", ns),
            "secrets": [{"name": "builder-token"}],
            "imagePullSecrets": [{"name": "registry"}],
            "automountServiceAccountToken": false,
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta("web", ns),
            "spec": {
                "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {
                        "name": "https", "protocol": "TCP", "appProtocol": "https",
                        "port": 443, "targetPort": "https", "nodePort": 30443,
                    },
                ],
                "selector": {"app": "web"},
                "clusterIP": "10.96.0.10",
                "clusterIPs": ["10.96.0.10"],
                "type": "NodePort",
                "sessionAffinity": "ClientIP",
                "externalTrafficPolicy": "Cluster",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "internalTrafficPolicy": "Cluster",
            },
            "status": {"loadBalancer": {}},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": meta("web", ns),
            "subsets": [{
                "addresses": [{
                    "ip": "10.244.0.5",
                    "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "1234"},
                }],
                "notReadyAddresses": [{"ip": "10.244.0.6"}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            }],
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": meta("web-0.17c3a", ns),
            "involvedObject": {
                "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "1234",
                "apiVersion": "v1", "resourceVersion": "40",
            },
            "reason": "BackOff",
            "message": "Back-off restarting failed container",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-01T10:00:00Z",
            "lastTimestamp": "2024-05-01T10:05:00Z",
            "count": 7,
            "type": "Warning",
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1",
        }),
        json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": meta("web-0.17c3b", ns),
            "eventTime": "2024-05-01T10:00:00.123456Z",
            "series": {"count": 2, "lastObservedTime": "2024-05-01T10:01:00.000001Z"},
            "reportingController": "example.com/controller",
            "reportingInstance": "controller-0",
            "action": "Scaling",
            "reason": "ScaledUp",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web"},
            "note": "scaled up to 3",
            "type": "Normal",
            // A Go value struct: its JSON always has it, as kube-apiserver serves it.
            "deprecatedSource": {},
        }),
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta("kube-scheduler", Some("kube-system")),
            "spec": {
                "holderIdentity": "node-1_5d4c",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-05-01T10:00:00.000000Z",
                "renewTime": "2024-05-01T10:07:30.250000Z",
                "leaseTransitions": 0,
            },
        }),
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": with(meta("web-x7k2p", ns), json!({
                "labels": {"kubernetes.io/service-name": "web"},
                "generateName": "web-",
            })),
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": ["10.244.0.5"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-0"},
                "nodeName": "node-1",
                "zone": "zone-a",
            }],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta("pod-reader", ns),
            "rules": [
                {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods", "pods/log"]},
                {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["app-config"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": with(meta("monitoring", None), json!({
                "labels": {"rbac.example.com/aggregate-to-monitoring": "true"},
            })),
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/healthz/*"]}],
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
                {"matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["a", "b"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ]},
            ]},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta("read-pods", ns),
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"},
                {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
            ],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            // No subjects: Go leaves the field out, and roleRef is still written whole.
            "metadata": meta("nobody-admin", None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        }),
    ]
}

#[test]
fn every_served_kind_round_trips() {
    let objects = stored_objects();
    assert_eq!(objects.len(), 14);
    for object in &objects {
        round_trip(object);
    }
}

#[test]
fn every_list_round_trips_with_its_list_meta() {
    for object in stored_objects() {
        let api_version = object["apiVersion"].clone();
        let kind = format!("{}List", object["kind"].as_str().unwrap_or_default());
        // List items carry no apiVersion and kind in protobuf (the item messages have no
        // TypeMeta), so the expected JSON has none either.
        let mut item = object.clone();
        if let Some(fields) = item.as_object_mut() {
            fields.shift_remove("apiVersion");
            fields.shift_remove("kind");
        }
        let list = json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"resourceVersion": "57", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", "remainingItemCount": 3},
            "items": [item.clone(), item.clone()],
        });
        round_trip(&list);
        // An empty last page: `remainingItemCount` absent, `items` still written.
        round_trip(&json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"resourceVersion": "57"}, "items": [],
        }));
        // What the registry serves: items with their apiVersion and kind, dropped on the wire.
        let mut served = list.clone();
        served["items"] = json!([object]);
        let mut expected = list;
        expected["items"] = json!([item]);
        assert_eq!(decode_any(&encode(&served).expect("encodes")), expected);
    }
}

#[test]
fn status_errors_round_trip_with_details_and_causes() {
    use crate::status::{field_invalid, field_required, success_status, GroupResource};
    let invalid = ApiError::invalid(
        "",
        "ConfigMap",
        "cfg",
        vec![
            field_invalid(
                "metadata.name",
                "Cfg",
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
            ),
            field_required("data", ""),
        ],
    );
    let status = invalid.to_status();
    assert_eq!(
        status["details"]["causes"][1]["reason"],
        "FieldValueRequired"
    );
    round_trip(&status);

    let gr = GroupResource::new("coordination.k8s.io", "leases");
    for error in [
        ApiError::not_found(&gr, "leader"),
        ApiError::stale_resource_version(&gr, "leader"),
        ApiError::too_many_requests("slow down", 3),
        ApiError::path_not_found(),
        ApiError::resource_expired("too old resource version: 1 (40)"),
    ] {
        round_trip(&error.to_status());
    }
    round_trip(&success_status(Some((&gr, "leader", "1234"))));
    round_trip(&success_status(None));
}

#[test]
fn value_fields_are_written_with_go_zero_values_and_pointers_only_when_set() {
    let body = encode(&json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .expect("encodes");
    let unknown = Unknown::decode(&body[MAGIC.len()..]).expect("envelope");
    assert_eq!(unknown.content_encoding.as_deref(), Some(""));
    assert_eq!(unknown.content_type.as_deref(), Some(""));
    let svc = corev1::Service::decode(unknown.raw.unwrap_or_default().as_slice()).expect("msg");
    let meta = svc.metadata.unwrap_or_default();
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert_eq!(meta.generate_name.as_deref(), Some(""));
    assert_eq!(meta.generation, Some(0));
    // A zero metav1.Time is an empty message, a nil *Time is not written.
    assert_eq!(meta.creation_timestamp, Some(metav1::Time::default()));
    assert_eq!(meta.deletion_timestamp, None);
    assert_eq!(meta.deletion_grace_period_seconds, None);
    let spec = svc.spec.unwrap_or_default();
    assert_eq!(spec.health_check_node_port, Some(0));
    assert_eq!(spec.publish_not_ready_addresses, Some(false));
    assert_eq!(spec.ip_family_policy, None);
    assert_eq!(spec.session_affinity_config, None);
    let port = &spec.ports[0];
    assert_eq!(port.app_protocol, None);
    assert_eq!(
        port.target_port,
        Some(IntOrString {
            r#type: Some(0),
            int_val: Some(0),
            str_val: s(""),
        })
    );
    // Status is a value struct: Go writes it, with its own zero fields.
    assert_eq!(
        svc.status,
        Some(corev1::ServiceStatus {
            load_balancer: Some(corev1::LoadBalancerStatus::default()),
            conditions: vec![],
        })
    );
}

#[test]
fn times_are_written_as_go_does() {
    let time = |v: Value| metav1::Time::from_json(&v).expect("time");
    let micro = |v: Value| metav1::MicroTime::from_json(&v).expect("micro time");
    // metav1.Time keeps whole seconds only, and writes nanos 0.
    assert_eq!(
        time(json!("2023-11-14T22:13:20.75Z")),
        metav1::Time {
            seconds: Some(1_700_000_000),
            nanos: Some(0)
        }
    );
    // Offsets are folded into UTC.
    assert_eq!(
        time(json!("2023-11-15T00:13:20+02:00")).seconds,
        Some(1_700_000_000)
    );
    // MicroTime cuts to microseconds, like its JSON.
    assert_eq!(
        micro(json!("2023-11-14T22:13:25.123456789Z")),
        metav1::MicroTime {
            seconds: Some(1_700_000_005),
            nanos: Some(123_456_000)
        }
    );
    // Go's zero time is the empty message, whether null or spelled out.
    assert_eq!(time(Value::Null), metav1::Time::default());
    assert_eq!(time(json!("0001-01-01T00:00:00Z")), metav1::Time::default());
    // Before 1970: seconds floor, nanos stay non-negative.
    assert_eq!(
        micro(json!("1969-12-31T23:59:59.5Z")),
        metav1::MicroTime {
            seconds: Some(-1),
            nanos: Some(500_000_000)
        }
    );
}

#[test]
fn watch_frames_are_length_prefixed_watch_events_holding_the_full_envelope() {
    let objects = stored_objects();
    let cm = &objects[1];
    let frame = encode_watch_event("ADDED", cm).expect("frame");
    let (prefix, message) = frame.split_at(4);
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    assert_eq!(usize::try_from(len).expect("len"), message.len());

    let event = metav1::WatchEvent::decode(message).expect("watch event");
    assert_eq!(event.r#type.as_deref(), Some("ADDED"));
    let raw = event.object.and_then(|o| o.raw).expect("raw");
    // `raw` is what encode() writes: magic, Unknown envelope and all.
    assert_eq!(raw, encode(cm).expect("encodes"));
    assert_eq!(decode(&raw).expect("decodes"), *cm);

    // Byte by byte: type (field 1), then object (field 2) = RawExtension{raw (field 1)}.
    let mut expected = vec![0x0a, 5];
    expected.extend_from_slice(b"ADDED");
    let mut inner = vec![0x0a];
    prost::encoding::encode_varint(raw.len() as u64, &mut inner);
    inner.extend_from_slice(&raw);
    expected.push(0x12);
    prost::encoding::encode_varint(inner.len() as u64, &mut expected);
    expected.extend_from_slice(&inner);
    assert_eq!(message, expected.as_slice());

    // Errors travel as ERROR events with a Status; bookmarks as a bare object.
    let gone = ApiError::resource_expired("too old resource version: 1 (40)").to_status();
    let frame = encode_watch_event("ERROR", &gone).expect("error frame");
    let event = metav1::WatchEvent::decode(&frame[4..]).expect("watch event");
    assert_eq!(event.r#type.as_deref(), Some("ERROR"));
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    assert_eq!(decode_any(&raw), gone);
    let bookmark = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "resourceVersion": "57",
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    });
    let frame = encode_watch_event("BOOKMARK", &bookmark).expect("bookmark frame");
    let event = metav1::WatchEvent::decode(&frame[4..]).expect("watch event");
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    assert_eq!(decode(&raw).expect("decodes"), bookmark);
}

#[test]
fn unknown_kinds_are_not_acceptable() {
    for object in [
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        json!({"apiVersion": "apps/v1", "kind": "ConfigMap"}),
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "Table", "rows": []}),
        json!({"apiVersion": "v1", "kind": "DeleteOptions"}),
        json!({"metadata": {"name": "no-kind"}}),
        json!(["not", "an", "object"]),
    ] {
        let err = encode(&object).expect_err("not encodable");
        assert_eq!((err.code, err.reason), (406, "NotAcceptable"), "{object}");
        assert!(
            err.message
                .contains("cannot be encoded as application/vnd.kubernetes.protobuf"),
            "{}",
            err.message
        );
        assert!(err.message.contains("application/json"), "{}", err.message);
        let err = encode_watch_event("ADDED", &object).expect_err("not encodable");
        assert_eq!(err.code, 406);
    }
    let err = encode(&json!({"apiVersion": "v1", "kind": "Pod"})).expect_err("pod");
    assert!(
        err.message.contains("kind \"Pod\" (apiVersion \"v1\")"),
        "{}",
        err.message
    );
    assert!(encodes("v1", "ConfigMapList"));
    assert!(encodes("v1", "Status"));
    assert!(encodes(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview"
    ));
    assert!(!encodes("v1", "Pod"));
    assert!(!encodes("events.k8s.io/v1", "ConfigMapList"));
}

#[test]
fn malformed_fields_are_internal_errors_naming_the_field() {
    let cases = [
        (
            json!({"metadata": {"name": 5}}),
            "metadata.name: expected a string, got a number",
        ),
        (
            json!({"metadata": "cfg"}),
            "metadata: expected an object, got a string",
        ),
        (
            json!({"data": {"a": 1}}),
            "data[a]: expected a string, got a number",
        ),
        (
            json!({"binaryData": {"bin": "%%%"}}),
            "binaryData[bin]: not standard base64",
        ),
        (
            json!({"immutable": "yes"}),
            "immutable: expected a boolean, got a string",
        ),
        (
            json!({"metadata": {"creationTimestamp": "yesterday"}}),
            "metadata.creationTimestamp: time \"yesterday\" is not RFC 3339",
        ),
        (
            json!({"metadata": {"generation": 1.5}}),
            "metadata.generation: 1.5 is not a 64-bit integer",
        ),
        (
            json!({"metadata": {"finalizers": "x"}}),
            "metadata.finalizers: expected an array, got a string",
        ),
        (
            json!({"metadata": {"managedFields": [{}, {"time": 3}]}}),
            "metadata.managedFields[1].time: expected an RFC 3339 time, got a number",
        ),
    ];
    for (fields, expected) in cases {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        if let (Some(object), Value::Object(fields)) = (object.as_object_mut(), fields) {
            object.extend(fields);
        }
        let err = encode(&object).expect_err("malformed");
        assert_eq!((err.code, err.reason), (500, "InternalError"), "{object}");
        assert!(
            err.message
                .contains("unable to encode ConfigMap as protobuf"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains(expected),
            "{} does not contain {expected}",
            err.message
        );
    }
    let err = encode(&json!({
        "apiVersion": "v1",
        "kind": "Service",
        "spec": {"ports": [{"port": 4_294_967_296_i64}]},
    }))
    .expect_err("port out of range");
    assert!(
        err.message
            .contains("spec.ports[0].port: 4294967296 does not fit in a 32-bit integer"),
        "{}",
        err.message
    );
    let err = encode(&json!({
        "apiVersion": "v1",
        "kind": "Service",
        "spec": {"ports": [{"port": 80, "targetPort": true}]},
    }))
    .expect_err("bad targetPort");
    assert!(
        err.message
            .contains("spec.ports[0].targetPort: expected an integer or a string"),
        "{}",
        err.message
    );
}

/// What kubegate stores for the kinds client-go's typed clients send as protobuf since
/// v0.32 (CRDs, APIServices, FlowSchemas, PriorityLevelConfigurations) round-trip, schema
/// unions and numbers included.
#[test]
fn extension_and_flowcontrol_kinds_round_trip() {
    let meta = json!({"name": "crontabs.stable.example.com", "uid": "8b1f9a52-6d4c-4d7e-9f51-0d1b2c3e4f50",
        "resourceVersion": "42", "creationTimestamp": "2024-05-01T10:00:00Z"});
    let schema = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "description": "the spec",
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                    "ratio": {"type": "number", "multipleOf": 0.5, "maximum": 1.5, "exclusiveMaximum": true},
                    "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$", "maxLength": 1},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "closed": {"type": "object", "additionalProperties": false},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "kept": {"x-kubernetes-preserve-unknown-fields": false, "x-kubernetes-int-or-string": true},
                    "template": {"type": "object", "default": {"a": [1, "x", null, true]}, "nullable": true},
                },
                "dependencies": {"ratio": ["mode"], "tags": {"required": ["mode"]}},
                "x-kubernetes-validations": [
                    {"rule": "self.replicas <= 10", "message": "too many", "reason": "FieldValueInvalid", "fieldPath": ".replicas"},
                    {"rule": "self.mode == oldSelf.mode", "optionalOldSelf": true},
                ],
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    });
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": meta,
        "spec": {
            "group": "stable.example.com",
            "names": {"plural": "crontabs", "singular": "crontab", "shortNames": ["ct"], "kind": "CronTab", "listKind": "CronTabList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]},
                {"name": "v1beta1", "served": false, "storage": false, "deprecated": true, "deprecationWarning": "use v1",
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "ops", "name": "conv", "path": "/convert", "port": 443}, "caBundle": "Y2E="}, "conversionReviewVersions": ["v1"]}},
        },
        "status": {
            "conditions": [{"type": "Established", "status": "True", "lastTransitionTime": "2024-05-01T10:00:01Z", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}],
            "acceptedNames": {"plural": "crontabs", "kind": "CronTab"},
            "storedVersions": ["v1"],
        },
    });
    round_trip(&crd);
    // A schema number is written as Go writes a float64: 1 and 0, not 1.0 and 0.0.
    let mut floats = crd.clone();
    floats["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["replicas"]["maximum"] = json!(10.0);
    let decoded = decode_any(&encode(&floats).expect("encodes"));
    assert_eq!(decoded, crd);
    assert!(serde_json::to_string(&decoded)
        .expect("json")
        .contains(r#""maximum":10,"#));

    let apiservices = [
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.", "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
            "spec": {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1},
            "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z", "reason": "Local", "message": "Local APIServices are always available"}]}}),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"service": {"namespace": "wardle", "name": "api", "port": 443}, "group": "wardle.example.com", "version": "v1alpha1",
                "caBundle": "LS0tLS1CRUdJTg==", "groupPriorityMinimum": 1000, "versionPriority": 15},
            "status": {}}),
    ];
    for apiservice in &apiservices {
        round_trip(apiservice);
    }
    round_trip(
        &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "probes"},
        "spec": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 2,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:unauthenticated"}},
                                     {"kind": "ServiceAccount", "serviceAccount": {"namespace": "*", "name": "*"}}],
                       "resourceRules": [{"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
                       "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz"]}]}]},
        "status": {"conditions": [{"type": "Dangling", "status": "False", "lastTransitionTime": "2024-05-01T10:00:00Z", "reason": "Found", "message": "This FlowSchema references the PriorityLevelConfiguration object named \"exempt\" and it exists"}]}}),
    );
    round_trip(
        &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "workload-low"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 100, "lendablePercent": 90,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}},
        "status": {}}),
    );
    round_trip(
        &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "exempt"},
        "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
        "status": {}}),
    );
    // Metadata-only views, as controller-runtime's metadata clients read them.
    round_trip(
        &json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "a", "namespace": "default", "resourceVersion": "7", "labels": {"x": "y"}}}),
    );
    round_trip(
        &json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
        "metadata": {"resourceVersion": "7"},
        "items": [{"metadata": {"name": "a", "namespace": "default"}}]}),
    );
}

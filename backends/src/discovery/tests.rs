use std::sync::Arc;

use super::*;
use crate::resource::{DefaultStrategy, STANDARD_VERBS};

#[allow(clippy::too_many_arguments)]
pub(crate) fn resource(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    short_names: &[&str],
    namespaced: bool,
    verbs: &[&'static str],
    subresources: Vec<SubresourceDef>,
    definition: &str,
) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_ascii_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: if plural == "services" {
            vec!["all".into()]
        } else {
            Vec::new()
        },
        namespaced,
        verbs: verbs.to_vec(),
        subresources,
        definition: definition.into(),
        columns: Vec::new(),
        field_selectors: Vec::new(),
        patch_meta: &[],
        storage_prefix: format!(
            "/{}/{plural}",
            if group.is_empty() { "core" } else { group }
        ),
        strategy: Arc::new(DefaultStrategy),
        virtual_handler: None,
        subresource_handlers: Vec::new(),
        admission: None,
        openapi_schema: None,
        field_model: Default::default(),
        go_shaper: Default::default(),
    }
}

pub(crate) fn sub(name: &'static str, kind: &str, verbs: &[&'static str]) -> SubresourceDef {
    SubresourceDef {
        name,
        kind: kind.into(),
        verbs: verbs.to_vec(),
    }
}

/// What the built-in core server serves, with kube's names.
pub(crate) fn served_resources() -> Vec<ResourceDef> {
    let status = &["get", "patch", "update"];
    vec![
        resource(
            "",
            "v1",
            "namespaces",
            "Namespace",
            &["ns"],
            false,
            &[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ],
            vec![
                sub("status", "Namespace", status),
                sub("finalize", "Namespace", &["update"]),
            ],
            "io.k8s.api.core.v1.Namespace",
        ),
        resource(
            "",
            "v1",
            "configmaps",
            "ConfigMap",
            &["cm"],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.core.v1.ConfigMap",
        ),
        resource(
            "",
            "v1",
            "secrets",
            "Secret",
            &[],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.core.v1.Secret",
        ),
        resource(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            &["sa"],
            true,
            STANDARD_VERBS,
            vec![sub("token", "TokenRequest", &["create"])],
            "io.k8s.api.core.v1.ServiceAccount",
        ),
        resource(
            "",
            "v1",
            "services",
            "Service",
            &["svc"],
            true,
            STANDARD_VERBS,
            vec![sub("status", "Service", status)],
            "io.k8s.api.core.v1.Service",
        ),
        resource(
            "",
            "v1",
            "endpoints",
            "Endpoints",
            &["ep"],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.core.v1.Endpoints",
        ),
        resource(
            "",
            "v1",
            "events",
            "Event",
            &["ev"],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.core.v1.Event",
        ),
        resource(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            &["ev"],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.events.v1.Event",
        ),
        resource(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            &[],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.coordination.v1.Lease",
        ),
        resource(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            &[],
            true,
            STANDARD_VERBS,
            vec![],
            "io.k8s.api.discovery.v1.EndpointSlice",
        ),
    ]
}

fn discovery() -> Discovery {
    Discovery::build(&served_resources(), "10.0.0.1:6443")
}

fn parse(doc: &DiscoveryDoc<'_>) -> Value {
    serde_json::from_slice(doc.body).expect("discovery documents are JSON")
}

const ACCEPT_KUBECTL: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

#[test]
fn legacy_api_versions() {
    let d = discovery();
    let doc = d.select("/api", Some("application/json")).expect("/api");
    assert_eq!(doc.content_type, "application/json");
    assert_eq!(
        parse(&doc),
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443" }]
        })
    );
    assert_eq!(d.select("/api/", None).map(|d| d.etag), Some(doc.etag));
}

#[test]
fn legacy_group_list_in_kube_priority_order() {
    let d = discovery();
    let list = parse(&d.select("/apis", None).expect("/apis"));
    assert_eq!(list["kind"], "APIGroupList");
    assert_eq!(list["apiVersion"], "v1");
    let names: Vec<&str> = list["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["events.k8s.io", "coordination.k8s.io", "discovery.k8s.io"]
    );
    assert_eq!(
        list["groups"][1],
        json!({
            "name": "coordination.k8s.io",
            "versions": [{ "groupVersion": "coordination.k8s.io/v1", "version": "v1" }],
            "preferredVersion": { "groupVersion": "coordination.k8s.io/v1", "version": "v1" }
        })
    );
    let group = parse(&d.select("/apis/coordination.k8s.io", None).expect("group"));
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["apiVersion"], "v1");
    assert_eq!(group["name"], "coordination.k8s.io");
    assert_eq!(group["preferredVersion"]["version"], "v1");
}

#[test]
fn legacy_core_resource_list() {
    let d = discovery();
    let list = parse(&d.select("/api/v1", None).expect("/api/v1"));
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["groupVersion"], "v1");
    // kube's core list has no apiVersion.
    assert!(list.get("apiVersion").is_none());
    let resources = list["resources"].as_array().expect("resources");
    let names: Vec<&str> = resources
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "configmaps",
            "endpoints",
            "events",
            "namespaces",
            "namespaces/finalize",
            "namespaces/status",
            "secrets",
            "serviceaccounts",
            "serviceaccounts/token",
            "services",
            "services/status"
        ]
    );
    assert_eq!(
        resources[0],
        json!({
            "name": "configmaps",
            "singularName": "configmap",
            "namespaced": true,
            "kind": "ConfigMap",
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": ["cm"],
            "storageVersionHash": "qFsyl6wFWjQ="
        })
    );
    assert_eq!(
        resources[5],
        json!({
            "name": "namespaces/status",
            "singularName": "",
            "namespaced": false,
            "kind": "Namespace",
            "verbs": ["get", "patch", "update"]
        })
    );
    assert_eq!(
        resources[8],
        json!({
            "name": "serviceaccounts/token",
            "singularName": "",
            "namespaced": true,
            "group": "authentication.k8s.io",
            "version": "v1",
            "kind": "TokenRequest",
            "verbs": ["create"]
        })
    );
    assert_eq!(resources[9]["categories"], json!(["all"]));
    let hashes: BTreeMap<&str, &str> = resources
        .iter()
        .filter_map(|r| Some((r["name"].as_str()?, r["storageVersionHash"].as_str()?)))
        .collect();
    // kube's own table (test/integration/etcd storage version hashes).
    assert_eq!(hashes["endpoints"], "fWeeMqaN/OA=");
    assert_eq!(hashes["events"], "r2yiGXH7wu8=");
    assert_eq!(hashes["namespaces"], "Q3oi5N2YM8M=");
    assert_eq!(hashes["secrets"], "S6u1pOWzb84=");
    assert_eq!(hashes["serviceaccounts"], "pbx9ZvyFpBE=");
    assert_eq!(hashes["services"], "0/CO1lhkEBI=");
}

#[test]
fn legacy_group_resource_lists() {
    let d = discovery();
    let hash = |path: &str| {
        let list = parse(&d.select(path, None).expect(path));
        assert_eq!(list["apiVersion"], "v1");
        list["resources"][0]["storageVersionHash"]
            .as_str()
            .map(str::to_string)
    };
    // events.k8s.io events are stored as core events, so kube hashes the core GVK.
    assert_eq!(
        hash("/apis/events.k8s.io/v1").as_deref(),
        Some("r2yiGXH7wu8=")
    );
    assert_eq!(
        hash("/apis/coordination.k8s.io/v1").as_deref(),
        Some("gqkMMb/YqFM=")
    );
    assert_eq!(
        hash("/apis/discovery.k8s.io/v1").as_deref(),
        Some("qgS0xkrxYAI=")
    );
}

#[test]
fn storage_version_hashes_match_kube() {
    assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
    assert_eq!(
        storage_version_hash("apps", "v1", "Deployment"),
        "8aSe+NMegvE="
    );
    assert_eq!(
        storage_version_hash("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        "bYE5ZWDrJ44="
    );
}

#[test]
fn accept_selects_aggregated_documents() {
    let d = discovery();
    let v2 = d.select("/apis", Some(ACCEPT_KUBECTL)).expect("aggregated");
    assert_eq!(v2.content_type, CONTENT_TYPE_AGGREGATED_V2);
    assert_eq!(parse(&v2)["apiVersion"], "apidiscovery.k8s.io/v2");

    let beta = d
        .select(
            "/apis",
            Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"),
        )
        .expect("v2beta1");
    assert_eq!(beta.content_type, CONTENT_TYPE_AGGREGATED_V2BETA1);
    assert_eq!(parse(&beta)["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    assert_ne!(beta.etag, v2.etag);

    // Newer client-go sends a peer profile first; kube ignores parameters it does not use
    // (`profile`, `charset`) and serves v2.
    let nopeer =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer,"
            .to_string()
            + ACCEPT_KUBECTL;
    for accept in [
        nopeer.as_str(),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer",
        "application/json;charset=utf-8;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        // A clause without the conversion does not end the search, wherever it stands and
        // whatever its q: kube's discovery wrapper only takes a clause that converts.
        "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "application/json;q=0.5, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5, application/json;q=0.9",
        "*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        // kube's discovery restrictions allow the watch stream schema.
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;stream=watch",
        // kube would answer this protobuf clause in protobuf; kubegate goes on to the JSON one.
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    ] {
        assert_eq!(
            d.select("/api", Some(accept)).map(|d| d.content_type),
            Some(CONTENT_TYPE_AGGREGATED_V2),
            "{accept}"
        );
    }
    for accept in [
        None,
        Some("application/json"),
        Some("*/*"),
        Some("application/yaml"),
        Some("application/json;g=apidiscovery.k8s.io;v=v1;as=APIGroupDiscoveryList,application/json"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupList,application/json"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;stream=other,application/json"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;sv=v1,application/json"),
    ] {
        let doc = d.select("/apis", accept).expect("/apis");
        assert_eq!(doc.content_type, CONTENT_TYPE_JSON, "{accept:?}");
        assert_eq!(parse(&doc)["kind"], "APIGroupList", "{accept:?}");
    }
    // What legacy discovery cannot be written as is kube's 406 with its Status message.
    // (kube would answer aggregated discovery in protobuf, which kubegate does not encode.)
    for (path, accept) in [
        ("/apis", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        ("/apis", "application/xml"),
        ("/api", "text/html"),
        ("/apis/coordination.k8s.io", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        ("/api/v1", "application/json;as=Table;g=meta.k8s.io;v=v1"),
        ("/apis", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
        ("/api", "application/json;sv=v1"),
    ] {
        match d.respond(path, Some(accept)) {
            Some(Err(e)) => {
                assert_eq!((e.code, e.reason), (406, "NotAcceptable"), "{path} {accept}");
                assert_eq!(
                    e.message,
                    "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
                );
            }
            other => panic!("{path} with {accept}: expected 406, got {:?}", other.map(|r| r.map(|d| d.content_type))),
        }
    }
    // Only /api and /apis have an aggregated form; with a trailing `/` kube's legacy handler
    // answers.
    for path in ["/apis/", "/api/"] {
        let doc = d.select(path, Some(ACCEPT_KUBECTL)).expect(path);
        assert_eq!(doc.content_type, CONTENT_TYPE_JSON, "{path}");
    }
    let list = d.select("/api/v1", Some(ACCEPT_KUBECTL)).expect("/api/v1");
    assert_eq!(list.content_type, CONTENT_TYPE_JSON);
    assert!(d.select("/apis/apps/v1", None).is_none());
    assert!(d.select("/api/v2", Some(ACCEPT_KUBECTL)).is_none());
    assert!(d.select("/healthz", None).is_none());
    assert_eq!(
        d.select("/apis?timeout=32s", Some(ACCEPT_KUBECTL))
            .map(|d| d.content_type),
        Some(CONTENT_TYPE_AGGREGATED_V2)
    );
}

#[test]
fn aggregated_core_document() {
    let d = discovery();
    let list = parse(&d.select("/api", Some(ACCEPT_KUBECTL)).expect("/api"));
    assert_eq!(list["kind"], "APIGroupDiscoveryList");
    assert_eq!(list["metadata"], json!({}));
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert!(items[0]["metadata"].get("name").is_none());
    let version = &items[0]["versions"][0];
    assert_eq!(version["version"], "v1");
    assert_eq!(version["freshness"], "Current");
    let resources = version["resources"].as_array().expect("resources");
    let namespaces = resources
        .iter()
        .find(|r| r["resource"] == "namespaces")
        .expect("namespaces");
    assert_eq!(
        namespaces,
        &json!({
            "resource": "namespaces",
            "responseKind": { "group": "", "version": "", "kind": "Namespace" },
            "scope": "Cluster",
            "singularResource": "namespace",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortNames": ["ns"],
            "subresources": [
                {
                    "subresource": "finalize",
                    "responseKind": { "group": "", "version": "", "kind": "Namespace" },
                    "verbs": ["update"]
                },
                {
                    "subresource": "status",
                    "responseKind": { "group": "", "version": "", "kind": "Namespace" },
                    "verbs": ["get", "patch", "update"]
                }
            ]
        })
    );
    let sa = resources
        .iter()
        .find(|r| r["resource"] == "serviceaccounts")
        .expect("serviceaccounts");
    assert_eq!(
        sa["subresources"][0]["responseKind"],
        json!({ "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest" })
    );
}

/// What `kubectl api-resources` prints from aggregated discovery: NAME, SHORTNAMES,
/// APIVERSION, NAMESPACED, KIND for every resource (subresources are not listed).
#[test]
fn kubectl_api_resources_from_aggregated_discovery() {
    let d = discovery();
    let mut rows = Vec::new();
    for path in ["/api", "/apis"] {
        let list = parse(&d.select(path, Some(ACCEPT_KUBECTL)).expect(path));
        for item in list["items"].as_array().expect("items") {
            let group = item["metadata"]["name"].as_str().unwrap_or_default();
            for version in item["versions"].as_array().expect("versions") {
                let v = version["version"].as_str().expect("version");
                for r in version["resources"].as_array().expect("resources") {
                    rows.push(format!(
                        "{} {} {} {} {}",
                        r["resource"].as_str().expect("resource"),
                        r["shortNames"]
                            .as_array()
                            .map(|s| s
                                .iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(","))
                            .unwrap_or_default(),
                        group_version(group, v),
                        r["scope"] == "Namespaced",
                        r["responseKind"]["kind"].as_str().expect("kind"),
                    ));
                }
            }
        }
    }
    assert_eq!(
        rows,
        [
            "configmaps cm v1 true ConfigMap",
            "endpoints ep v1 true Endpoints",
            "events ev v1 true Event",
            "namespaces ns v1 false Namespace",
            "secrets  v1 true Secret",
            "serviceaccounts sa v1 true ServiceAccount",
            "services svc v1 true Service",
            "events ev events.k8s.io/v1 true Event",
            "leases  coordination.k8s.io/v1 true Lease",
            "endpointslices  discovery.k8s.io/v1 true EndpointSlice",
        ]
    );
}

/// The resources the built-in core server actually serves discover like kube's.
#[test]
fn builtin_resources_discover_like_kube() {
    let d = Discovery::build(&crate::core::builtin_resources(), "127.0.0.1:6443");
    let mut rows = Vec::new();
    for path in ["/api", "/apis"] {
        let list = parse(&d.select(path, Some(ACCEPT_KUBECTL)).expect(path));
        for item in list["items"].as_array().expect("items") {
            let group = item["metadata"]["name"].as_str().unwrap_or_default();
            for version in item["versions"].as_array().expect("versions") {
                for r in version["resources"].as_array().expect("resources") {
                    rows.push(format!(
                        "{}/{} {} {} {}",
                        group,
                        r["resource"].as_str().unwrap_or_default(),
                        r["shortNames"],
                        r["scope"].as_str().unwrap_or_default(),
                        r["singularResource"].as_str().unwrap_or_default(),
                    ));
                }
            }
        }
    }
    assert_eq!(
        rows,
        [
            "/configmaps [\"cm\"] Namespaced configmap",
            "/endpoints [\"ep\"] Namespaced endpoints",
            "/events [\"ev\"] Namespaced event",
            "/namespaces [\"ns\"] Cluster namespace",
            "/secrets null Namespaced secret",
            "/serviceaccounts [\"sa\"] Namespaced serviceaccount",
            "/services [\"svc\"] Namespaced service",
            // The aggregator's own group comes first, as in kube.
            "apiregistration.k8s.io/apiservices null Cluster apiservice",
            "events.k8s.io/events [\"ev\"] Namespaced event",
            "rbac.authorization.k8s.io/clusterrolebindings null Cluster clusterrolebinding",
            "rbac.authorization.k8s.io/clusterroles null Cluster clusterrole",
            "rbac.authorization.k8s.io/rolebindings null Namespaced rolebinding",
            "rbac.authorization.k8s.io/roles null Namespaced role",
            "apiextensions.k8s.io/customresourcedefinitions [\"crd\",\"crds\"] Cluster customresourcedefinition",
            "coordination.k8s.io/leases null Namespaced lease",
            "discovery.k8s.io/endpointslices null Namespaced endpointslice",
            "flowcontrol.apiserver.k8s.io/flowschemas null Cluster flowschema",
            "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations null Cluster prioritylevelconfiguration",
        ]
    );
    let core = parse(&d.select("/api/v1", None).expect("/api/v1"));
    let hashes: Vec<(&str, &str)> = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| Some((r["name"].as_str()?, r["storageVersionHash"].as_str()?)))
        .collect();
    assert!(hashes.contains(&("configmaps", "qFsyl6wFWjQ=")));
    assert!(hashes.contains(&("events", "r2yiGXH7wu8=")));
    let events = parse(&d.select("/apis/events.k8s.io/v1", None).expect("events"));
    assert_eq!(events["resources"][0]["storageVersionHash"], "r2yiGXH7wu8=");
}

#[test]
fn etags_are_quoted_sha512_of_the_body() {
    let d = discovery();
    for path in d.paths().map(str::to_string).collect::<Vec<_>>() {
        for accept in [None, Some(ACCEPT_KUBECTL)] {
            let doc = d.select(&path, accept).expect("listed path");
            let expected = format!("\"{}\"", hex::encode_upper(Sha512::digest(doc.body)));
            assert_eq!(doc.etag, expected, "{path}");
        }
    }
}

#[test]
fn kube_version_order() {
    let mut versions = vec!["v1alpha1", "v2", "v1beta1", "foo", "v1", "v1beta2", "v10"];
    versions.sort_by(|a, b| compare_versions(a, b));
    assert_eq!(
        versions,
        ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
    );
    // Groups: kube's priorities (CRD-like groups at 1000), then by name.
    let resources: Vec<ResourceDef> = [
        "zeta.example.com",
        "discovery.k8s.io",
        "",
        "alpha.example.com",
        "apps",
    ]
    .into_iter()
    .map(|g| {
        resource(
            g,
            "v1",
            "things",
            "Thing",
            &[],
            true,
            STANDARD_VERBS,
            vec![],
            "io.example.Thing",
        )
    })
    .collect();
    let d = Discovery::build(&resources, "127.0.0.1:6443");
    assert_eq!(
        legacy_group_names(&d),
        [
            "apps",
            "discovery.k8s.io",
            "alpha.example.com",
            "zeta.example.com"
        ]
    );
}

#[test]
fn preferred_version_is_the_highest_priority_one() {
    let mut resources = served_resources();
    let mut beta = resources[8].clone();
    beta.version = "v1beta1".into();
    resources.push(beta);
    let d = Discovery::build(&resources, "127.0.0.1:6443");
    let group = parse(&d.select("/apis/coordination.k8s.io", None).expect("group"));
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(group["versions"][1]["version"], "v1beta1");
    // Both versions hash the storage (preferred) version.
    let beta_list = parse(
        &d.select("/apis/coordination.k8s.io/v1beta1", None)
            .expect("beta"),
    );
    assert_eq!(
        beta_list["resources"][0]["storageVersionHash"],
        "gqkMMb/YqFM="
    );
}

fn legacy_group_names(d: &Discovery) -> Vec<String> {
    let list = parse(&d.select("/apis", None).expect("/apis"));
    list["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str().map(str::to_string))
        .collect()
}

/// (group, [versions]) of the aggregated `/apis` document.
fn aggregated_groups(d: &Discovery) -> Vec<(String, Vec<String>)> {
    let list = parse(&d.select("/apis", Some(ACCEPT_KUBECTL)).expect("/apis"));
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                item["versions"]
                    .as_array()
                    .expect("versions")
                    .iter()
                    .filter_map(|v| v["version"].as_str().map(str::to_string))
                    .collect(),
            )
        })
        .collect()
}

fn aggregated_version(d: &Discovery, group: &str, version: &str) -> Option<Value> {
    let list = parse(&d.select("/apis", Some(ACCEPT_KUBECTL)).expect("/apis"));
    let items = list["items"].as_array()?;
    let item = items.iter().find(|i| i["metadata"]["name"] == group)?;
    item["versions"]
        .as_array()?
        .iter()
        .find(|v| v["version"] == version)
        .cloned()
}

fn remote(
    group: &str,
    version: &str,
    group_priority: i32,
    version_priority: i32,
    resources: Option<Vec<Value>>,
    stale: bool,
) -> RemoteGroupVersion {
    RemoteGroupVersion {
        group: group.into(),
        version: version.into(),
        group_priority_minimum: group_priority,
        version_priority,
        resources,
        stale,
    }
}

fn flunders() -> Vec<Value> {
    vec![json!({
        "resource": "flunders",
        "responseKind": { "group": "", "version": "", "kind": "Flunder" },
        "scope": "Namespaced",
        "singularResource": "flunder",
        "verbs": ["get", "list", "watch"]
    })]
}

#[test]
fn merged_groups_and_versions_in_kube_aggregator_order() {
    let mut resources = served_resources();
    // A CRD-like local group: kube's CRD priority 1000/100.
    resources.push(resource(
        "stable.example.com",
        "v1",
        "crontabs",
        "CronTab",
        &["ct"],
        true,
        STANDARD_VERBS,
        vec![],
        "com.example.stable.v1.CronTab",
    ));
    let fetched = Some(flunders());
    let remotes = vec![
        remote("last.example.com", "v1", 100, 15, fetched.clone(), false),
        remote("first.example.com", "v1", 20000, 15, fetched.clone(), false),
        remote("wardle.example.com", "v1", 1500, 5, fetched.clone(), false),
        remote(
            "wardle.example.com",
            "v1alpha1",
            1500,
            10,
            fetched.clone(),
            false,
        ),
        remote(
            "wardle.example.com",
            "v1beta1",
            1200,
            10,
            fetched.clone(),
            false,
        ),
        remote(
            "wardle.example.com",
            "v2alpha1",
            1500,
            20,
            fetched.clone(),
            false,
        ),
        // A remote version of a built-in group joins that group.
        remote("coordination.k8s.io", "v1beta1", 16500, 13, fetched, false),
    ];
    let d = Discovery::build_merged(&resources, &remotes, "10.0.0.1:6443");

    let expected_groups = [
        "first.example.com",
        "events.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "wardle.example.com",
        "stable.example.com",
        "last.example.com",
    ];
    assert_eq!(legacy_group_names(&d), expected_groups);
    let aggregated = aggregated_groups(&d);
    assert_eq!(
        aggregated
            .iter()
            .map(|(g, _)| g.as_str())
            .collect::<Vec<_>>(),
        expected_groups
    );

    // Versions: version priority first, then kube's version order (v1beta1 before v1alpha1).
    let wardle = parse(&d.select("/apis/wardle.example.com", None).expect("group"));
    let versions: Vec<&str> = wardle["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v2alpha1", "v1beta1", "v1alpha1", "v1"]);
    assert_eq!(
        wardle["preferredVersion"],
        json!({ "groupVersion": "wardle.example.com/v2alpha1", "version": "v2alpha1" })
    );
    assert_eq!(wardle["kind"], "APIGroup");
    assert_eq!(
        aggregated[4],
        (
            "wardle.example.com".to_string(),
            vec![
                "v2alpha1".to_string(),
                "v1beta1".to_string(),
                "v1alpha1".to_string(),
                "v1".to_string()
            ]
        )
    );

    let coordination = parse(&d.select("/apis/coordination.k8s.io", None).expect("group"));
    assert_eq!(
        coordination["versions"],
        json!([
            { "groupVersion": "coordination.k8s.io/v1", "version": "v1" },
            { "groupVersion": "coordination.k8s.io/v1beta1", "version": "v1beta1" }
        ])
    );
    assert_eq!(
        aggregated_version(&d, "coordination.k8s.io", "v1beta1").expect("remote version")
            ["resources"][0]["resource"],
        "flunders"
    );
    assert_eq!(
        aggregated_version(&d, "coordination.k8s.io", "v1").expect("local version")["resources"][0]
            ["resource"],
        "leases"
    );
}

/// kube's two orders break group-priority ties differently: legacy `/apis` by APIService name
/// (`<version>.<group>`), aggregated discovery by group name.
#[test]
fn equal_group_priorities_tie_break_like_kube() {
    let fetched = Some(flunders());
    let remotes = vec![
        remote("alpha.example.com", "v2", 100, 15, fetched.clone(), false),
        remote("zeta.example.com", "v1", 100, 15, fetched, false),
    ];
    let d = Discovery::build_merged(&[], &remotes, "10.0.0.1:6443");
    assert_eq!(
        legacy_group_names(&d),
        ["zeta.example.com", "alpha.example.com"]
    );
    assert_eq!(
        aggregated_groups(&d)
            .into_iter()
            .map(|(g, _)| g)
            .collect::<Vec<_>>(),
        ["alpha.example.com", "zeta.example.com"]
    );
}

#[test]
fn remote_freshness_and_undiscovered_versions() {
    let remotes = vec![
        remote("fresh.example.com", "v1", 100, 15, Some(flunders()), false),
        remote("stale.example.com", "v1", 100, 15, Some(flunders()), true),
        remote("failing.example.com", "v1", 100, 15, None, true),
        remote("pending.example.com", "v1", 100, 15, None, false),
        remote("empty.example.com", "v1", 100, 15, Some(vec![]), false),
    ];
    let d = Discovery::build_merged(&served_resources(), &remotes, "10.0.0.1:6443");

    let fresh = aggregated_version(&d, "fresh.example.com", "v1").expect("fresh");
    assert_eq!(fresh["freshness"], "Current");
    assert_eq!(fresh["resources"], json!(flunders()));

    let stale = aggregated_version(&d, "stale.example.com", "v1").expect("stale");
    assert_eq!(stale["freshness"], "Stale");
    assert_eq!(stale["resources"], json!(flunders()));

    // Never fetched, fetch failed: listed as Stale with no resources (kube omits the empty list).
    assert_eq!(
        aggregated_version(&d, "failing.example.com", "v1").expect("failing"),
        json!({ "version": "v1", "freshness": "Stale" })
    );
    // Fetched, but the backend did not list the version: Current with no resources.
    assert_eq!(
        aggregated_version(&d, "empty.example.com", "v1").expect("empty"),
        json!({ "version": "v1", "freshness": "Current" })
    );
    // Not fetched yet: not in aggregated discovery, but registered, so in legacy discovery.
    assert!(aggregated_groups(&d)
        .iter()
        .all(|(g, _)| g != "pending.example.com"));
    assert!(legacy_group_names(&d)
        .iter()
        .any(|g| g == "pending.example.com"));
    assert!(d.select("/apis/pending.example.com", None).is_some());
    // Local versions are always Current.
    assert_eq!(
        aggregated_version(&d, "events.k8s.io", "v1").expect("local")["freshness"],
        "Current"
    );
}

#[test]
fn remote_group_version_lists_are_left_to_the_backend() {
    let remotes = vec![
        remote(
            "wardle.example.com",
            "v1alpha1",
            100,
            15,
            Some(flunders()),
            false,
        ),
        // A remote APIService for a served group-version replaces the local one.
        remote(
            "coordination.k8s.io",
            "v1",
            16500,
            15,
            Some(flunders()),
            false,
        ),
    ];
    let d = Discovery::build_merged(&served_resources(), &remotes, "10.0.0.1:6443");
    for path in [
        "/apis/wardle.example.com/v1alpha1",
        "/apis/wardle.example.com/v1alpha1/",
        "/apis/coordination.k8s.io/v1",
    ] {
        assert!(d.select(path, None).is_none(), "{path}");
        assert!(d.select(path, Some(ACCEPT_KUBECTL)).is_none(), "{path}");
        assert!(!d.serves_legacy(path), "{path}");
    }
    assert!(d.serves_legacy("/apis/wardle.example.com"));
    assert!(d.serves_legacy("/apis/coordination.k8s.io/"));
    assert!(d.serves_legacy("/apis/discovery.k8s.io/v1?timeout=32s"));
    assert!(!d.serves_legacy("/healthz"));
    let paths: Vec<&str> = d.paths().collect();
    assert!(paths.contains(&"/apis/wardle.example.com"));
    assert!(!paths
        .iter()
        .any(|p| p.starts_with("/apis/wardle.example.com/")));
    assert!(!paths.contains(&"/apis/coordination.k8s.io/v1"));
    assert_eq!(
        aggregated_version(&d, "coordination.k8s.io", "v1").expect("remote")["resources"],
        json!(flunders())
    );
    // The group APIGroup is still served, with the remote version.
    let group = parse(&d.select("/apis/coordination.k8s.io", None).expect("group"));
    assert_eq!(group["preferredVersion"]["version"], "v1");
}

#[test]
fn unusable_remote_entries_are_ignored() {
    let remotes = vec![
        remote("bad/group", "v1", 100, 15, Some(flunders()), false),
        remote("ok.example.com", "", 100, 15, Some(flunders()), false),
        remote("ok.example.com", "v1 ", 100, 15, Some(flunders()), false),
        // Of two entries for a group-version, the first counts.
        remote("dup.example.com", "v1", 100, 15, Some(flunders()), false),
        remote("dup.example.com", "v1", 100, 15, None, true),
    ];
    let d = Discovery::build_merged(&served_resources(), &remotes, "10.0.0.1:6443");
    assert_eq!(
        legacy_group_names(&d),
        [
            "events.k8s.io",
            "coordination.k8s.io",
            "discovery.k8s.io",
            "dup.example.com"
        ]
    );
    assert_eq!(
        aggregated_version(&d, "dup.example.com", "v1").expect("dup")["freshness"],
        "Current"
    );
    // The core group stays the local server's.
    let core = parse(&d.select("/api", Some(ACCEPT_KUBECTL)).expect("/api"));
    assert_eq!(core["items"].as_array().map(Vec::len), Some(1));
    assert!(d.select("/api/v1", None).is_some());
}

#[test]
fn a_delegated_core_group_is_listed_under_api() {
    // kubegate fronting a cluster with its own core group switched off.
    let local: Vec<_> = served_resources()
        .into_iter()
        .filter(|r| !r.group.is_empty())
        .collect();
    let remotes = vec![remote("", "v1", 18000, 1, Some(flunders()), false)];
    let d = Discovery::build_merged(&local, &remotes, "10.0.0.1:6443");
    let legacy = parse(&d.select("/api", None).expect("/api"));
    assert_eq!(legacy["versions"], json!(["v1"]));
    // The resource list itself is the delegate's, proxied: not served from here.
    assert!(d.select("/api/v1", None).is_none());
    let core = parse(&d.select("/api", Some(ACCEPT_KUBECTL)).expect("/api"));
    assert_eq!(
        core["items"][0]["versions"][0]["resources"],
        json!(flunders())
    );
    assert_eq!(core["items"][0]["versions"][0]["freshness"], "Current");
    // Without it (or before its first fetch ends) `/api` lists nothing.
    let d = Discovery::build_merged(&local, &[], "10.0.0.1:6443");
    let legacy = parse(&d.select("/api", None).expect("/api"));
    assert_eq!(legacy["versions"], json!([]));
}

#[test]
fn v2beta1_has_the_v2_shape() {
    let remotes = vec![
        remote(
            "wardle.example.com",
            "v1alpha1",
            100,
            15,
            Some(flunders()),
            true,
        ),
        remote("failing.example.com", "v1", 100, 15, None, true),
    ];
    let d = Discovery::build_merged(&served_resources(), &remotes, "10.0.0.1:6443");
    for path in ["/api", "/apis"] {
        let v2 = parse(&d.select(path, Some(ACCEPT_KUBECTL)).expect("v2"));
        let mut beta = parse(
            &d.select(
                path,
                Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
            )
            .expect("v2beta1"),
        );
        assert_eq!(beta["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        beta["apiVersion"] = json!("apidiscovery.k8s.io/v2");
        assert_eq!(beta, v2, "{path}");
    }
}

/// Feeding the local aggregated documents back through `parse_aggregated` as remote
/// group-versions (with the local priorities) rebuilds the same bytes.
#[test]
fn parse_aggregated_round_trip() {
    let local = discovery();
    let doc: Value = serde_json::from_slice(
        local
            .select("/apis", Some(ACCEPT_KUBECTL))
            .expect("/apis")
            .body,
    )
    .expect("JSON");
    let parsed = parse_aggregated(&doc);
    assert_eq!(
        parsed
            .iter()
            .map(|(g, v, _, stale)| format!("{g}/{v} {stale}"))
            .collect::<Vec<_>>(),
        [
            "events.k8s.io/v1 false",
            "coordination.k8s.io/v1 false",
            "discovery.k8s.io/v1 false"
        ]
    );
    let remotes: Vec<RemoteGroupVersion> = parsed
        .into_iter()
        .map(|(group, version, resources, stale)| {
            let (gp, vp) = apiservice_priority(&group, &version).expect("built-in");
            remote(&group, &version, gp, vp, Some(resources), stale)
        })
        .collect();
    let merged = Discovery::build_merged(&[], &remotes, "10.0.0.1:6443");
    for accept in [
        Some(ACCEPT_KUBECTL),
        Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
        None,
    ] {
        let a = local.select("/apis", accept).expect("local");
        let b = merged.select("/apis", accept).expect("merged");
        assert_eq!(a.body, b.body, "{accept:?}");
        assert_eq!(a.etag, b.etag, "{accept:?}");
    }
    let group = |d: &Discovery| {
        d.select("/apis/events.k8s.io", None)
            .map(|doc| doc.body.clone())
    };
    assert_eq!(group(&local), group(&merged));
}

/// Each local legacy APIResourceList converts into exactly the resources of the matching
/// aggregated version entry, as kube's converter would produce them.
#[test]
fn aggregated_from_legacy_round_trip() {
    let d = Discovery::build(&crate::core::builtin_resources(), "127.0.0.1:6443");
    let mut checked = 0;
    for (aggregated_path, prefix) in [("/api", "/api/"), ("/apis", "/apis/")] {
        let list = parse(
            &d.select(aggregated_path, Some(ACCEPT_KUBECTL))
                .expect("aggregated"),
        );
        for item in list["items"].as_array().expect("items") {
            let group = item["metadata"]["name"].as_str().unwrap_or_default();
            for version in item["versions"].as_array().expect("versions") {
                let v = version["version"].as_str().expect("version");
                let path = if group.is_empty() {
                    format!("{prefix}{v}")
                } else {
                    format!("{prefix}{group}/{v}")
                };
                let legacy = parse(&d.select(&path, None).expect("legacy list"));
                assert_eq!(
                    Value::Array(aggregated_from_legacy(&legacy)),
                    version["resources"],
                    "{path}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 5, "{checked}");
}

#[test]
fn etags_follow_remote_content() {
    let build = |resources: Option<Vec<Value>>, stale: bool| {
        Discovery::build_merged(
            &served_resources(),
            &[remote(
                "wardle.example.com",
                "v1alpha1",
                100,
                15,
                resources,
                stale,
            )],
            "10.0.0.1:6443",
        )
    };
    let etag = |d: &Discovery, accept: Option<&str>| {
        d.select("/apis", accept).expect("/apis").etag.to_string()
    };
    let a = build(Some(flunders()), false);
    let same = build(Some(flunders()), false);
    assert_eq!(
        etag(&a, Some(ACCEPT_KUBECTL)),
        etag(&same, Some(ACCEPT_KUBECTL))
    );
    assert_eq!(etag(&a, None), etag(&same, None));

    let mut changed_resources = flunders();
    changed_resources[0]["verbs"] = json!(["get"]);
    let changed = build(Some(changed_resources), false);
    assert_ne!(
        etag(&a, Some(ACCEPT_KUBECTL)),
        etag(&changed, Some(ACCEPT_KUBECTL))
    );
    // Legacy `/apis` does not carry resources, so it does not change.
    assert_eq!(etag(&a, None), etag(&changed, None));

    let stale = build(Some(flunders()), true);
    assert_ne!(
        etag(&a, Some(ACCEPT_KUBECTL)),
        etag(&stale, Some(ACCEPT_KUBECTL))
    );

    // Remote content never changes the local documents.
    assert_eq!(
        a.select("/apis/events.k8s.io/v1", None)
            .map(|d| d.etag.to_string()),
        discovery()
            .select("/apis/events.k8s.io/v1", None)
            .map(|d| d.etag.to_string())
    );
    // And every document's ETag is the SHA-512 of its body.
    for path in changed.paths().map(str::to_string).collect::<Vec<_>>() {
        for accept in [None, Some(ACCEPT_KUBECTL)] {
            let doc = changed.select(&path, accept).expect("listed path");
            let expected = format!("\"{}\"", hex::encode_upper(Sha512::digest(doc.body)));
            assert_eq!(doc.etag, expected, "{path}");
        }
    }
}

#[test]
fn built_in_versions_follow_kube_version_priorities() {
    // autoscaling/v2 (30) before v1 (15); flowcontrol v1 (21) before v1beta3 (18).
    let make = |group: &str, version: &str| {
        resource(
            group,
            version,
            "things",
            "Thing",
            &[],
            true,
            STANDARD_VERBS,
            vec![],
            "io.example.Thing",
        )
    };
    let resources = vec![
        make("autoscaling", "v1"),
        make("autoscaling", "v2"),
        make("flowcontrol.apiserver.k8s.io", "v1beta3"),
        make("flowcontrol.apiserver.k8s.io", "v1"),
        make("apiregistration.k8s.io", "v1"),
        make("apps", "v1"),
    ];
    let d = Discovery::build(&resources, "127.0.0.1:6443");
    // The aggregator's own group comes first, as kube lists it.
    assert_eq!(
        legacy_group_names(&d),
        [
            "apiregistration.k8s.io",
            "apps",
            "autoscaling",
            "flowcontrol.apiserver.k8s.io"
        ]
    );
    assert_eq!(
        aggregated_groups(&d),
        [
            ("apiregistration.k8s.io".to_string(), vec!["v1".to_string()]),
            ("apps".to_string(), vec!["v1".to_string()]),
            (
                "autoscaling".to_string(),
                vec!["v2".to_string(), "v1".to_string()]
            ),
            (
                "flowcontrol.apiserver.k8s.io".to_string(),
                vec!["v1".to_string(), "v1beta3".to_string()]
            ),
        ]
    );
    // A remote group may ask for at most 20000, so it stays below apiregistration.
    let d = Discovery::build_merged(
        &resources,
        &[remote(
            "top.example.com",
            "v1",
            20000,
            15,
            Some(flunders()),
            false,
        )],
        "127.0.0.1:6443",
    );
    assert_eq!(
        legacy_group_names(&d)[..2],
        ["apiregistration.k8s.io", "top.example.com"]
    );
}

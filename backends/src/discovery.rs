//! The discovery documents kube-apiserver serves, generated from the served [`ResourceDef`]s:
//! legacy discovery (`/api` APIVersions, `/apis` APIGroupList, `/apis/<group>` APIGroup,
//! `/api/v1` and `/apis/<group>/<version>` APIResourceList) and aggregated discovery
//! (`apidiscovery.k8s.io` `APIGroupDiscoveryList` for `/api` and `/apis`, selected by the
//! client's `Accept` header the way kube's discovery handlers negotiate it).
//!
//! Everything is serialized once by [`Discovery::build`]; [`Discovery::select`] picks the
//! document for a request. kubectl (client-go) asks for aggregated discovery first
//! (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json`)
//! and builds `kubectl api-resources` and its REST mapping from it.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256, Sha512};

use crate::resource::{ResourceDef, SubresourceDef};

/// The content type of legacy discovery documents.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// The content type of aggregated discovery answered to `v=v2` requests.
pub const CONTENT_TYPE_AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The content type of aggregated discovery answered to `v=v2beta1` requests.
pub const CONTENT_TYPE_AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// One discovery response: the body, the `Content-Type` to answer with and the quoted ETag
/// (`"<upper-case hex SHA-512 of the body>"`, as kube's aggregated discovery computes it).
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryDoc<'a> {
    pub body: &'a Bytes,
    pub content_type: &'static str,
    pub etag: &'a str,
}

/// The precomputed discovery documents.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// Legacy documents by path without trailing slash (`/api`, `/apis/events.k8s.io/v1`).
    legacy: BTreeMap<String, Doc>,
    /// Aggregated documents for `/api` and `/apis`: (v2, v2beta1).
    aggregated: BTreeMap<&'static str, (Doc, Doc)>,
}

#[derive(Debug, Clone)]
struct Doc {
    body: Bytes,
    etag: String,
}

impl Doc {
    fn new(value: &Value) -> Doc {
        // Serializing a `Value` cannot fail (every key is a string).
        let body = serde_json::to_vec(value).unwrap_or_default();
        let etag = format!("\"{}\"", hex::encode_upper(Sha512::digest(&body)));
        Doc {
            body: Bytes::from(body),
            etag,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregated {
    V2,
    V2Beta1,
}

impl Discovery {
    /// Builds every discovery document. `server_address` is what `/api` advertises in
    /// `serverAddressByClientCIDRs` (`host:port` clients reach the server at).
    pub fn build(resources: &[ResourceDef], server_address: &str) -> Discovery {
        // group -> version -> resources, in input order.
        let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&ResourceDef>>> = BTreeMap::new();
        for r in resources {
            groups
                .entry(r.group.as_str())
                .or_default()
                .entry(r.version.as_str())
                .or_default()
                .push(r);
        }

        let mut legacy = BTreeMap::new();
        let mut core_items = Vec::new();
        let mut group_items = Vec::new();
        let mut group_list = Vec::new();

        let mut ordered_groups: Vec<&str> = groups.keys().copied().collect();
        ordered_groups.sort_by(|a, b| compare_groups(a, b));
        for group in ordered_groups {
            let Some(versions) = groups.get(group) else {
                continue;
            };
            let mut ordered_versions: Vec<&str> = versions.keys().copied().collect();
            ordered_versions.sort_by(|a, b| compare_versions(a, b));

            let mut version_entries = Vec::new();
            let mut aggregated_versions = Vec::new();
            for version in &ordered_versions {
                let defs = versions.get(version).map(Vec::as_slice).unwrap_or_default();
                let group_version = group_version(group, version);
                let (path, list) = if group.is_empty() {
                    // kube's core APIResourceList carries no apiVersion.
                    (
                        format!("/api/{version}"),
                        json!({
                            "kind": "APIResourceList",
                            "groupVersion": group_version,
                            "resources": api_resources(defs, resources),
                        }),
                    )
                } else {
                    (
                        format!("/apis/{group}/{version}"),
                        json!({
                            "kind": "APIResourceList",
                            "apiVersion": "v1",
                            "groupVersion": group_version,
                            "resources": api_resources(defs, resources),
                        }),
                    )
                };
                legacy.insert(path, Doc::new(&list));
                version_entries.push(json!({ "groupVersion": group_version, "version": version }));
                aggregated_versions.push(json!({
                    "version": version,
                    "resources": resource_discovery(defs),
                    "freshness": "Current",
                }));
            }

            if group.is_empty() {
                legacy.insert(
                    "/api".to_string(),
                    Doc::new(&json!({
                        "kind": "APIVersions",
                        "versions": ordered_versions,
                        "serverAddressByClientCIDRs": [
                            { "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }
                        ],
                    })),
                );
                core_items.push(json!({
                    "metadata": { "creationTimestamp": null },
                    "versions": aggregated_versions,
                }));
            } else {
                let preferred = version_entries.first().cloned().unwrap_or(Value::Null);
                let api_group = json!({
                    "name": group,
                    "versions": version_entries,
                    "preferredVersion": preferred,
                });
                let mut with_kind = Map::new();
                with_kind.insert("kind".into(), json!("APIGroup"));
                with_kind.insert("apiVersion".into(), json!("v1"));
                if let Value::Object(fields) = &api_group {
                    with_kind.extend(fields.clone());
                }
                legacy.insert(
                    format!("/apis/{group}"),
                    Doc::new(&Value::Object(with_kind)),
                );
                group_list.push(api_group);
                group_items.push(json!({
                    "metadata": { "name": group, "creationTimestamp": null },
                    "versions": aggregated_versions,
                }));
            }
        }
        // `/api` exists even when no core resource is served, as in kube.
        legacy.entry("/api".to_string()).or_insert_with(|| {
            Doc::new(&json!({
                "kind": "APIVersions",
                "versions": [],
                "serverAddressByClientCIDRs": [
                    { "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }
                ],
            }))
        });
        legacy.insert(
            "/apis".to_string(),
            Doc::new(&json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": group_list })),
        );

        let aggregated_pair = |items: &Vec<Value>| {
            let list = |version: &str| {
                json!({
                    "kind": "APIGroupDiscoveryList",
                    "apiVersion": format!("apidiscovery.k8s.io/{version}"),
                    "metadata": {},
                    "items": items,
                })
            };
            (Doc::new(&list("v2")), Doc::new(&list("v2beta1")))
        };
        let mut aggregated = BTreeMap::new();
        aggregated.insert("/api", aggregated_pair(&core_items));
        aggregated.insert("/apis", aggregated_pair(&group_items));
        Discovery { legacy, aggregated }
    }

    /// The document for a discovery path (`/api`, `/apis`, `/apis/<group>`, `/api/v1`,
    /// `/apis/<group>/<version>`, with or without a trailing `/`; a query string is ignored)
    /// given the request's `Accept` header; `None` for a path that is not a discovery document
    /// of this server.
    pub fn select(&self, path: &str, accept: Option<&str>) -> Option<DiscoveryDoc<'_>> {
        let path = path.split('?').next().unwrap_or_default();
        let path = match path.trim_end_matches('/') {
            "" => "/",
            p => p,
        };
        if let Some((v2, v2beta1)) = self.aggregated.get(path) {
            match accept.and_then(negotiate) {
                Some(Aggregated::V2) => {
                    return Some(DiscoveryDoc {
                        body: &v2.body,
                        content_type: CONTENT_TYPE_AGGREGATED_V2,
                        etag: &v2.etag,
                    })
                }
                Some(Aggregated::V2Beta1) => {
                    return Some(DiscoveryDoc {
                        body: &v2beta1.body,
                        content_type: CONTENT_TYPE_AGGREGATED_V2BETA1,
                        etag: &v2beta1.etag,
                    })
                }
                None => {}
            }
        }
        self.legacy.get(path).map(|d| DiscoveryDoc {
            body: &d.body,
            content_type: CONTENT_TYPE_JSON,
            etag: &d.etag,
        })
    }

    /// Every path [`Self::select`] answers, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.legacy.keys().map(String::as_str)
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Whether an `Accept` header asks for aggregated discovery, following kube's negotiation:
/// clauses by decreasing `q` (stable otherwise), the first one the server can produce wins; a
/// clause naming a conversion (`g`/`v`/`as`) other than `APIGroupDiscoveryList`, or carrying
/// parameters kube does not know (`profile=nopeer` from newer clients), is skipped.
fn negotiate(accept: &str) -> Option<Aggregated> {
    let mut clauses: Vec<(f32, usize, &str)> = Vec::new();
    for (index, clause) in accept.split(',').enumerate() {
        let q = clause
            .split(';')
            .skip(1)
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .and_then(|(_, v)| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q > 0.0 {
            clauses.push((q, index, clause));
        }
    }
    clauses.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then(a.1.cmp(&b.1))
    });

    for (_, _, clause) in clauses {
        let mut parts = clause.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let (mut g, mut v, mut r#as) = (None, None, None);
        let mut unknown = false;
        for param in parts {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match key.trim().to_ascii_lowercase().as_str() {
                "g" => g = Some(value),
                "v" => v = Some(value),
                "as" => r#as = Some(value),
                "q" | "pretty" => {}
                _ => unknown = true,
            }
        }
        if unknown {
            continue;
        }
        let json_like = matches!(media.as_str(), "application/json" | "application/*" | "*/*");
        if g.is_none() && v.is_none() && r#as.is_none() {
            if json_like {
                return None;
            }
            // yaml/protobuf: kube would encode legacy discovery in them; we answer JSON below.
            continue;
        }
        if media != "application/json"
            || g != Some("apidiscovery.k8s.io")
            || r#as != Some("APIGroupDiscoveryList")
        {
            continue;
        }
        match v {
            Some("v2") => return Some(Aggregated::V2),
            Some("v2beta1") => return Some(Aggregated::V2Beta1),
            _ => continue,
        }
    }
    None
}

/// kube's discovery group priorities (kube-apiserver's APIService priorities table): larger
/// first, then by name. Groups kube does not know sort like CRD groups (priority 1000).
fn group_priority(group: &str) -> i32 {
    match group {
        "" => 18000,
        "apiregistration.k8s.io" => 17800,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" => 16700,
        "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        "internal.apiserver.k8s.io" => 16000,
        "resource.k8s.io" => 15900,
        "storagemigration.k8s.io" => 15800,
        _ => 1000,
    }
}

fn compare_groups(a: &str, b: &str) -> Ordering {
    group_priority(b)
        .cmp(&group_priority(a))
        .then_with(|| a.cmp(b))
}

/// Kube's version ordering within a group (`CompareKubeAwareVersionStrings`): GA before beta
/// before alpha, higher numbers first; versions not of the `vN[alpha|betaM]` form last, by name.
fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((2, major, 0));
        }
        let (stage, minor) = if let Some(m) = tail.strip_prefix("beta") {
            (1, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (0, m)
        } else {
            return None;
        };
        Some((stage, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The group, version and kind a subresource reads and writes. Subresources served in the
/// parent's group-version (`status`, `finalize`, `binding`) carry the parent's; kube's
/// cross-group ones carry their own group-version.
pub(crate) fn subresource_gvk(
    parent: &ResourceDef,
    sub: &SubresourceDef,
) -> (String, String, String) {
    let (group, version) = match sub.kind.as_str() {
        k if k == parent.kind => (parent.group.as_str(), parent.version.as_str()),
        "TokenRequest" => ("authentication.k8s.io", "v1"),
        "Scale" => ("autoscaling", "v1"),
        "Eviction" => ("policy", "v1"),
        _ => (parent.group.as_str(), parent.version.as_str()),
    };
    (group.to_string(), version.to_string(), sub.kind.clone())
}

/// The group-version-kind kube hashes into `storageVersionHash`: the storage version's, which
/// for resources kube stores together with another group's (events.k8s.io events live with
/// core events) is the other group's. Otherwise the preferred version of the group among the
/// served resources of the same name.
fn storage_gvk<'a>(r: &'a ResourceDef, all: &'a [ResourceDef]) -> (&'a str, &'a str, &'a str) {
    if r.group == "events.k8s.io" && r.plural == "events" {
        return ("", "v1", "Event");
    }
    let version = all
        .iter()
        .filter(|o| o.group == r.group && o.plural == r.plural)
        .map(|o| o.version.as_str())
        .min_by(|a, b| compare_versions(a, b))
        .unwrap_or(r.version.as_str());
    (r.group.as_str(), version, r.kind.as_str())
}

/// `discovery.StorageVersionHash`: base64 of the first 8 bytes of the SHA-256 of
/// `<group>/<version>/<kind>`.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

fn sorted_verbs(verbs: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = verbs.iter().map(|s| s.to_string()).collect();
    v.sort();
    v.dedup();
    v
}

/// The `resources` of a legacy APIResourceList: resources and `<resource>/<subresource>`
/// entries sorted by name, the way kube installs its storage map.
fn api_resources(defs: &[&ResourceDef], all: &[ResourceDef]) -> Vec<Value> {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for r in defs {
        let mut entry = Map::new();
        entry.insert("name".into(), json!(r.plural));
        entry.insert("singularName".into(), json!(r.singular));
        entry.insert("namespaced".into(), json!(r.namespaced));
        entry.insert("kind".into(), json!(r.kind));
        entry.insert("verbs".into(), json!(sorted_verbs(&r.verbs)));
        if !r.short_names.is_empty() {
            entry.insert("shortNames".into(), json!(r.short_names));
        }
        if !r.categories.is_empty() {
            entry.insert("categories".into(), json!(r.categories));
        }
        let (g, v, k) = storage_gvk(r, all);
        entry.insert(
            "storageVersionHash".into(),
            json!(storage_version_hash(g, v, k)),
        );
        entries.push((r.plural.clone(), Value::Object(entry)));

        for sub in &r.subresources {
            let name = format!("{}/{}", r.plural, sub.name);
            let (group, version, kind) = subresource_gvk(r, sub);
            let mut entry = Map::new();
            entry.insert("name".into(), json!(name));
            entry.insert("singularName".into(), json!(""));
            entry.insert("namespaced".into(), json!(r.namespaced));
            // Only subresources of another group-version name it (kube's GroupVersionKindProvider).
            if group != r.group || version != r.version {
                entry.insert("group".into(), json!(group));
                entry.insert("version".into(), json!(version));
            }
            entry.insert("kind".into(), json!(kind));
            entry.insert("verbs".into(), json!(sorted_verbs(&sub.verbs)));
            entries.push((name, Value::Object(entry)));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.into_iter().map(|(_, v)| v).collect()
}

/// The `resources` of one aggregated version entry (`ConvertGroupVersionIntoToDiscovery`).
/// Like kube, `responseKind` names only the kind unless a subresource belongs to another
/// group-version.
fn resource_discovery(defs: &[&ResourceDef]) -> Vec<Value> {
    let mut sorted: Vec<&&ResourceDef> = defs.iter().collect();
    sorted.sort_by(|a, b| a.plural.cmp(&b.plural));
    sorted
        .into_iter()
        .map(|r| {
            let mut entry = Map::new();
            entry.insert("resource".into(), json!(r.plural));
            entry.insert(
                "responseKind".into(),
                json!({ "group": "", "version": "", "kind": r.kind }),
            );
            entry.insert(
                "scope".into(),
                json!(if r.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }),
            );
            entry.insert("singularResource".into(), json!(r.singular));
            entry.insert("verbs".into(), json!(sorted_verbs(&r.verbs)));
            if !r.short_names.is_empty() {
                entry.insert("shortNames".into(), json!(r.short_names));
            }
            if !r.categories.is_empty() {
                entry.insert("categories".into(), json!(r.categories));
            }
            if !r.subresources.is_empty() {
                let mut subs: Vec<&SubresourceDef> = r.subresources.iter().collect();
                subs.sort_by(|a, b| a.name.cmp(b.name));
                let subs: Vec<Value> = subs
                    .into_iter()
                    .map(|sub| {
                        let (group, version, kind) = subresource_gvk(r, sub);
                        let (group, version) = if group == r.group && version == r.version {
                            (String::new(), String::new())
                        } else {
                            (group, version)
                        };
                        json!({
                            "subresource": sub.name,
                            "responseKind": { "group": group, "version": version, "kind": kind },
                            "verbs": sorted_verbs(&sub.verbs),
                        })
                    })
                    .collect();
                entry.insert("subresources".into(), Value::Array(subs));
            }
            Value::Object(entry)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
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

        // Newer client-go sends a peer profile first; kube 1.33 skips it and serves v2.
        let nopeer =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer,"
                .to_string()
                + ACCEPT_KUBECTL;
        assert_eq!(
            d.select("/api", Some(&nopeer)).map(|d| d.content_type),
            Some(CONTENT_TYPE_AGGREGATED_V2)
        );
        // q-values order the clauses.
        assert_eq!(
            d.select(
                "/api",
                Some("application/json;q=0.5, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
            )
            .map(|d| d.content_type),
            Some(CONTENT_TYPE_AGGREGATED_V2)
        );
        for accept in [
            None,
            Some("application/json"),
            Some("*/*"),
            Some("application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
            Some("application/json;g=apidiscovery.k8s.io;v=v1;as=APIGroupDiscoveryList,application/json"),
            Some("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        ] {
            let doc = d.select("/apis", accept).expect("/apis");
            assert_eq!(doc.content_type, CONTENT_TYPE_JSON, "{accept:?}");
            assert_eq!(parse(&doc)["kind"], "APIGroupList", "{accept:?}");
        }
        // Only /api and /apis have an aggregated form.
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
                "events.k8s.io/events [\"ev\"] Namespaced event",
                "rbac.authorization.k8s.io/clusterrolebindings null Cluster clusterrolebinding",
                "rbac.authorization.k8s.io/clusterroles null Cluster clusterrole",
                "rbac.authorization.k8s.io/rolebindings null Namespaced rolebinding",
                "rbac.authorization.k8s.io/roles null Namespaced role",
                "coordination.k8s.io/leases null Namespaced lease",
                "discovery.k8s.io/endpointslices null Namespaced endpointslice",
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
        let mut groups = vec![
            "zeta.example.com",
            "discovery.k8s.io",
            "",
            "alpha.example.com",
            "apps",
        ];
        groups.sort_by(|a, b| compare_groups(a, b));
        assert_eq!(
            groups,
            [
                "",
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
}

//! The discovery documents kube-apiserver serves, generated from the served [`ResourceDef`]s
//! and merged with the group-versions of remote extension API servers (APIServices) the way
//! kube-aggregator merges them: legacy discovery (`/api` APIVersions, `/apis` APIGroupList,
//! `/apis/<group>` APIGroup, `/api/v1` and `/apis/<group>/<version>` APIResourceList) and
//! aggregated discovery (`apidiscovery.k8s.io` `APIGroupDiscoveryList` for `/api` and `/apis`,
//! selected by the client's `Accept` header the way kube's discovery handlers negotiate it).
//!
//! Everything is serialized once by [`Discovery::build`] or [`Discovery::build_merged`];
//! [`Discovery::select`] picks the document for a request. kubectl (client-go) asks for
//! aggregated discovery first
//! (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json`)
//! and builds `kubectl api-resources` and its REST mapping from it.
//!
//! A remote group-version's own APIResourceList is not generated: the gateway proxies that
//! path to the backend, as kube-aggregator does. [`parse_aggregated`] and
//! [`aggregated_from_legacy`] turn what a backend serves into [`RemoteGroupVersion`]
//! resources; the ordering priorities are kube's ([`apiservice_priority`]).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256, Sha512};

use crate::machinery::negotiation::{negotiate_plain_output, parse_accept};
use crate::resource::{ResourceDef, SubresourceDef};
use crate::status::ApiResult;

mod merge;
mod priority;
mod remote;

pub use priority::apiservice_priority;
pub use remote::{aggregated_from_legacy, parse_aggregated, RemoteGroupVersion};

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
    /// Builds every discovery document from the local resources alone (no APIService
    /// backends). `server_address` is what `/api` advertises in `serverAddressByClientCIDRs`
    /// (`host:port` clients reach the server at).
    pub fn build(resources: &[ResourceDef], server_address: &str) -> Discovery {
        Self::build_merged(resources, &[], server_address)
    }

    /// Builds every discovery document from the local resources merged with the group-versions
    /// of remote APIServices, ordered and marked as kube-aggregator does (see
    /// `discovery/merge.rs`). A remote group-version replaces a local one of the same name.
    /// Remote entries whose group or version is empty or cannot be a path segment, and remote
    /// entries for the core group, are ignored; of two for the same group-version the first
    /// counts.
    pub fn build_merged(
        resources: &[ResourceDef],
        remote: &[RemoteGroupVersion],
        server_address: &str,
    ) -> Discovery {
        merge::build(resources, remote, server_address)
    }

    /// The document for a discovery path (`/api`, `/apis`, `/apis/<group>`, `/api/v1`,
    /// `/apis/<group>/<version>`, with or without a trailing `/`; a query string is ignored)
    /// given the request's `Accept` header; `None` for a path that is not a discovery document
    /// of this server (including a remote group-version's APIResourceList, which the gateway
    /// proxies). A legacy document the `Accept` header does not allow is kube's 406.
    pub fn respond(&self, path: &str, accept: Option<&str>) -> Option<ApiResult<DiscoveryDoc<'_>>> {
        // kube serves aggregated discovery on `/api` and `/apis` exactly; with a trailing `/`
        // the path reaches the legacy handler only.
        let exact = path.split('?').next().unwrap_or_default();
        let path = normalize_path(path);
        let aggregated = if exact == path {
            self.aggregated.get(path)
        } else {
            None
        };
        if let Some((v2, v2beta1)) = aggregated {
            match accept.and_then(negotiate) {
                Some(Aggregated::V2) => {
                    return Some(Ok(DiscoveryDoc {
                        body: &v2.body,
                        content_type: CONTENT_TYPE_AGGREGATED_V2,
                        etag: &v2.etag,
                    }))
                }
                Some(Aggregated::V2Beta1) => {
                    return Some(Ok(DiscoveryDoc {
                        body: &v2beta1.body,
                        content_type: CONTENT_TYPE_AGGREGATED_V2BETA1,
                        etag: &v2beta1.etag,
                    }))
                }
                None => {}
            }
        }
        let legacy = self.legacy.get(path)?;
        // kube writes legacy discovery through its negotiated serializers (JSON, YAML,
        // protobuf; no conversions such as `as=Table`). kubegate answers all three with JSON,
        // which every client decodes.
        if let Err(e) = negotiate_plain_output(accept) {
            return Some(Err(e));
        }
        Some(Ok(DiscoveryDoc {
            body: &legacy.body,
            content_type: CONTENT_TYPE_JSON,
            etag: &legacy.etag,
        }))
    }

    /// [`Self::respond`] for an `Accept` header known to be acceptable.
    #[cfg(test)]
    pub(crate) fn select(&self, path: &str, accept: Option<&str>) -> Option<DiscoveryDoc<'_>> {
        self.respond(path, accept)
            .map(|doc| doc.unwrap_or_else(|e| panic!("{path} with {accept:?}: {}", e.message)))
    }

    /// Whether `path` (normalized as [`Self::respond`] does) is a discovery document served
    /// here, whatever the `Accept` header; false for a remote group-version's path.
    pub fn serves_legacy(&self, path: &str) -> bool {
        self.legacy.contains_key(normalize_path(path))
    }

    /// Whether `/apis` lists `group`/`version`, a remote group-version's included (its
    /// `/apis/<group>` document names the version).
    pub fn lists(&self, group: &str, version: &str) -> bool {
        let Some(doc) = self.legacy.get(&format!("/apis/{group}")) else {
            return false;
        };
        serde_json::from_slice::<Value>(&doc.body)
            .ok()
            .and_then(|group_doc| group_doc.get("versions").cloned())
            .and_then(|versions| versions.as_array().cloned())
            .is_some_and(|versions| {
                versions
                    .iter()
                    .any(|v| v.get("version").and_then(Value::as_str) == Some(version))
            })
    }

    /// Every path [`Self::respond`] answers, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.legacy.keys().map(String::as_str)
    }
}

/// A request path as the documents are keyed: no query string, no trailing `/`.
fn normalize_path(path: &str) -> &str {
    let path = path.split('?').next().unwrap_or_default();
    match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Whether an `Accept` header asks for aggregated discovery, as kube's discovery wrapper
/// negotiates it (`NegotiateMediaTypeOptions` with `DiscoveryEndpointRestrictions`): the
/// first clause, in goautoneg's order, that names a media type the server encodes and
/// converts to `apidiscovery.k8s.io` `APIGroupDiscoveryList` (`g`, `v`, `as`) wins. A clause
/// without that conversion (plain `application/json`) does not stop the search, `q` only
/// orders, and parameters kube does not use (`charset`, `profile`) are ignored. kube can
/// answer a YAML or protobuf clause in that encoding; kubegate encodes aggregated discovery
/// only as JSON, so it passes over those clauses.
fn negotiate(accept: &str) -> Option<Aggregated> {
    for clause in parse_accept(accept) {
        let encodable = ["json", "yaml", "vnd.kubernetes.protobuf"]
            .into_iter()
            .find(|&subtype| {
                (clause.type_ == "application"
                    && (clause.subtype == subtype || clause.subtype == "*"))
                    || (clause.type_ == "*" && clause.subtype == "*")
            });
        let Some(encoding) = encodable else {
            continue;
        };
        // kube's discovery restrictions allow the watch stream (JSON and protobuf have a
        // stream serializer) and no server version.
        let stream = clause.param("stream").filter(|v| !v.is_empty());
        if stream.is_some_and(|v| v != "watch" || encoding == "yaml")
            || clause.param("sv").is_some_and(|v| !v.is_empty())
        {
            continue;
        }
        if clause.param("g") != Some("apidiscovery.k8s.io")
            || clause.param("as") != Some("APIGroupDiscoveryList")
        {
            continue;
        }
        let version = match clause.param("v") {
            Some("v2") => Aggregated::V2,
            Some("v2beta1") => Aggregated::V2Beta1,
            _ => continue,
        };
        if encoding == "json" {
            return Some(version);
        }
    }
    None
}

/// Kube's version ordering within a group (`CompareKubeAwareVersionStrings`): GA before beta
/// before alpha, higher numbers first; versions not of the `vN[alpha|betaM]` form last, by name.
pub(crate) fn compare_versions(a: &str, b: &str) -> Ordering {
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
        entry.insert("verbs".into(), json!(sorted_verbs(&r.discovery_verbs())));
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
            entry.insert("verbs".into(), json!(sorted_verbs(&r.discovery_verbs())));
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
pub(crate) mod tests;

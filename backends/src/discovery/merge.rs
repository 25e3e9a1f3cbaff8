//! Building every discovery document from the local resources and the remote group-versions,
//! ordered as kube-aggregator orders them.
//!
//! Every group-version is, to kube, an APIService with a `groupPriorityMinimum` and a
//! `versionPriority`: local ones take kube's table ([`super::priority`]), remote ones their
//! APIService's. A remote APIService for a group-version kubegate also serves replaces the
//! local one (kube has one APIService per group-version, and its aggregated discovery prefers
//! the aggregator's source over the built-in one).
//!
//! Legacy discovery (kube-aggregator's `apisHandler`, `SortedByGroupAndVersion`): APIServices
//! sorted by group priority (descending) then APIService name (`<version>.<group>`); a group
//! takes the place of its first APIService in that order; versions by version priority then
//! kube's version order. Every registered group-version is listed, fetched or not.
//!
//! Aggregated discovery (k8s.io/apiserver's `resourceDiscoveryManager`): groups by the highest
//! group priority of their versions, then by group name; versions as above. A remote
//! group-version appears once its first fetch ended: `Current` after a success, `Stale` after
//! a failure (with the last good resources, or none).

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::priority::local_priority;
use super::remote::{normalize_resource, RemoteGroupVersion};
use super::{api_resources, compare_versions, group_version, resource_discovery, Discovery, Doc};
use crate::resource::ResourceDef;

enum Served<'a> {
    Local(Vec<&'a ResourceDef>),
    Remote(&'a RemoteGroupVersion),
}

struct VersionEntry<'a> {
    version: &'a str,
    group_priority: i32,
    version_priority: i32,
    served: Served<'a>,
}

impl VersionEntry<'_> {
    /// Whether aggregated discovery lists this version: a remote one only once fetched (or
    /// once a fetch failed), as kube adds it only when its first sync ends.
    fn in_aggregated(&self) -> bool {
        match &self.served {
            Served::Local(_) => true,
            Served::Remote(r) => r.resources.is_some() || r.stale,
        }
    }

    /// The `APIVersionDiscovery` of this version. `resources` is left out when empty (kube's
    /// `omitempty`), which is what a stale never-fetched remote version looks like.
    fn aggregated(&self) -> Value {
        let (resources, freshness) = match &self.served {
            Served::Local(defs) => (resource_discovery(defs), "Current"),
            Served::Remote(r) => (
                r.resources
                    .iter()
                    .flatten()
                    .filter_map(normalize_resource)
                    .collect(),
                if r.stale { "Stale" } else { "Current" },
            ),
        };
        let mut entry = Map::new();
        entry.insert("version".into(), json!(self.version));
        if !resources.is_empty() {
            entry.insert("resources".into(), Value::Array(resources));
        }
        entry.insert("freshness".into(), json!(freshness));
        Value::Object(entry)
    }
}

fn version_order(a: &VersionEntry<'_>, b: &VersionEntry<'_>) -> Ordering {
    b.version_priority
        .cmp(&a.version_priority)
        .then_with(|| compare_versions(a.version, b.version))
}

/// A group's place in legacy `/apis`: its best APIService's place in kube's APIService sort
/// (group priority descending, then APIService name `<version>.<group>`).
fn legacy_group_key(group: &str, versions: &[VersionEntry<'_>]) -> (Reverse<i32>, String) {
    let top = versions
        .iter()
        .map(|v| v.group_priority)
        .max()
        .unwrap_or(i32::MIN);
    let name = versions
        .iter()
        .filter(|v| v.group_priority == top)
        .map(|v| format!("{}.{group}", v.version))
        .min()
        .unwrap_or_default();
    (Reverse(top), name)
}

/// Whether a remote group or version can name a discovery path segment.
fn is_segment(s: &str) -> bool {
    !s.is_empty()
        && !s
            .chars()
            .any(|c| matches!(c, '/' | '?' | '#' | '%') || c.is_whitespace() || c.is_control())
}

pub(super) fn build(
    resources: &[ResourceDef],
    remote: &[RemoteGroupVersion],
    server_address: &str,
) -> Discovery {
    // group -> version -> resources, in input order.
    let mut local: BTreeMap<&str, BTreeMap<&str, Vec<&ResourceDef>>> = BTreeMap::new();
    for r in resources {
        local
            .entry(r.group.as_str())
            .or_default()
            .entry(r.version.as_str())
            .or_default()
            .push(r);
    }

    // The first APIService named for a group-version counts. The core group (empty name) is
    // remote only when kubegate fronts a cluster that serves it: `/api` then lists it.
    let mut remote_gvs: BTreeMap<(&str, &str), &RemoteGroupVersion> = BTreeMap::new();
    for r in remote {
        if (r.group.is_empty() || is_segment(&r.group)) && is_segment(&r.version) {
            remote_gvs
                .entry((r.group.as_str(), r.version.as_str()))
                .or_insert(r);
        }
    }

    let mut legacy = BTreeMap::new();
    let mut core_items = Vec::new();
    let mut groups: BTreeMap<&str, Vec<VersionEntry<'_>>> = BTreeMap::new();

    for (group, versions) in local {
        for (version, defs) in versions {
            if remote_gvs.contains_key(&(group, version)) {
                continue;
            }
            let group_version = group_version(group, version);
            let (path, list) = if group.is_empty() {
                // kube's core APIResourceList carries no apiVersion.
                (
                    format!("/api/{version}"),
                    json!({
                        "kind": "APIResourceList",
                        "groupVersion": group_version,
                        "resources": api_resources(&defs, resources),
                    }),
                )
            } else {
                (
                    format!("/apis/{group}/{version}"),
                    json!({
                        "kind": "APIResourceList",
                        "apiVersion": "v1",
                        "groupVersion": group_version,
                        "resources": api_resources(&defs, resources),
                    }),
                )
            };
            legacy.insert(path, Doc::new(&list));
            let (group_priority, version_priority) = local_priority(group, version);
            groups.entry(group).or_default().push(VersionEntry {
                version,
                group_priority,
                version_priority,
                served: Served::Local(defs),
            });
        }
    }
    for (&(group, version), &r) in &remote_gvs {
        groups.entry(group).or_default().push(VersionEntry {
            version,
            group_priority: r.group_priority_minimum,
            version_priority: r.version_priority,
            served: Served::Remote(r),
        });
    }
    for versions in groups.values_mut() {
        versions.sort_by(version_order);
    }

    // The core group: `/api` and its aggregated document.
    let core = groups.remove("").unwrap_or_default();
    let core_versions: Vec<&str> = core.iter().map(|v| v.version).collect();
    legacy.insert(
        "/api".to_string(),
        Doc::new(&json!({
            "kind": "APIVersions",
            "versions": core_versions,
            "serverAddressByClientCIDRs": [
                { "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }
            ],
        })),
    );
    if !core.is_empty() {
        core_items.push(json!({
            "metadata": { "creationTimestamp": null },
            "versions": core.iter().map(VersionEntry::aggregated).collect::<Vec<_>>(),
        }));
    }

    // Legacy `/apis` and `/apis/<group>`.
    let mut legacy_order: Vec<(&str, &Vec<VersionEntry<'_>>)> =
        groups.iter().map(|(g, v)| (*g, v)).collect();
    legacy_order.sort_by_cached_key(|(group, versions)| legacy_group_key(group, versions));
    let mut group_list = Vec::new();
    for (group, versions) in legacy_order {
        let version_entries: Vec<Value> = versions
            .iter()
            .map(|v| json!({ "groupVersion": group_version(group, v.version), "version": v.version }))
            .collect();
        let preferred = version_entries.first().cloned().unwrap_or(Value::Null);
        legacy.insert(
            format!("/apis/{group}"),
            Doc::new(&json!({
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": group,
                "versions": version_entries,
                "preferredVersion": preferred,
            })),
        );
        group_list.push(json!({
            "name": group,
            "versions": version_entries,
            "preferredVersion": preferred,
        }));
    }
    legacy.insert(
        "/apis".to_string(),
        Doc::new(&json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": group_list })),
    );

    // Aggregated `/apis`.
    let mut aggregated_groups: Vec<(Reverse<i32>, &str, Vec<&VersionEntry<'_>>)> = groups
        .iter()
        .filter_map(|(group, versions)| {
            let listed: Vec<&VersionEntry<'_>> =
                versions.iter().filter(|v| v.in_aggregated()).collect();
            let top = listed.iter().map(|v| v.group_priority).max()?;
            Some((Reverse(top), *group, listed))
        })
        .collect();
    aggregated_groups.sort_by_key(|(top, group, _)| (*top, *group));
    let group_items: Vec<Value> = aggregated_groups
        .into_iter()
        .map(|(_, group, versions)| {
            json!({
                "metadata": { "name": group, "creationTimestamp": null },
                "versions": versions.into_iter().map(VersionEntry::aggregated).collect::<Vec<_>>(),
            })
        })
        .collect();

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

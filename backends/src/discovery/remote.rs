//! Discovery from remote extension API servers (APIService backends): what the gateway feeds
//! [`super::Discovery::build_merged`], and pure functions that turn what a backend serves
//! (aggregated `APIGroupDiscoveryList` or a legacy `APIResourceList`) into it, the way
//! kube-aggregator's discovery manager does.
//!
//! Remote resources are re-shaped into `apidiscovery.k8s.io/v2` `APIResourceDiscovery` with
//! kube's field order and omissions, because kube decodes them into typed structs and encodes
//! them again: unknown fields are dropped, missing `responseKind`s become empty ones (kube
//! fills them so client-go 0.26.0–0.26.3 does not crash), empty optional lists disappear.

use serde_json::{Map, Value};

/// One group-version served by a remote extension API server, as known to the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteGroupVersion {
    pub group: String,
    pub version: String,
    pub group_priority_minimum: i32,
    pub version_priority: i32,
    /// The version's resources in aggregated-discovery v2 form (`APIResourceDiscovery` list),
    /// or None when nothing has been fetched yet.
    pub resources: Option<Vec<Value>>,
    /// True when the last fetch failed and `resources` is the last good copy (or None).
    pub stale: bool,
}

/// The group-versions of an aggregated discovery document (`APIGroupDiscoveryList`, v2 or
/// v2beta1, whose shapes are the same): (group, version, resources, whether the document marks
/// the version `Stale`). The core group is `""`. Missing fields are tolerated; entries that are
/// not objects, versions without a name and resources without a `resource` name are skipped.
/// A document of another kind yields nothing.
pub fn parse_aggregated(doc: &Value) -> Vec<(String, String, Vec<Value>, bool)> {
    let mut out = Vec::new();
    if let Some(kind) = doc.get("kind").and_then(Value::as_str) {
        if kind != "APIGroupDiscoveryList" {
            return out;
        }
    }
    let Some(items) = doc.get("items").and_then(Value::as_array) else {
        return out;
    };
    for item in items {
        let group = item
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(versions) = item.get("versions").and_then(Value::as_array) else {
            continue;
        };
        for version in versions {
            let Some(name) = version.get("version").and_then(Value::as_str) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let resources = version
                .get("resources")
                .and_then(Value::as_array)
                .map(|list| list.iter().filter_map(normalize_resource).collect())
                .unwrap_or_default();
            let stale = version.get("freshness").and_then(Value::as_str) == Some("Stale");
            out.push((group.to_string(), name.to_string(), resources, stale));
        }
    }
    out
}

/// Converts a legacy `APIResourceList` (from a backend that serves no aggregated discovery)
/// into `APIResourceDiscovery` entries, as kube-aggregator does with
/// `ConvertGroupVersionIntoToDiscovery`: resources in list order, each `<resource>/<sub>`
/// entry nested under its resource (a parent that is not listed is made up, with an empty
/// `responseKind`, as kube does). A subresource whose scope differs from its parent's makes
/// kube reject the whole list; here that subresource alone is dropped.
pub fn aggregated_from_legacy(api_resource_list: &Value) -> Vec<Value> {
    let Some(list) = api_resource_list.get("resources").and_then(Value::as_array) else {
        return Vec::new();
    };
    let entries: Vec<&Map<String, Value>> = list.iter().filter_map(Value::as_object).collect();

    let mut out: Vec<Map<String, Value>> = Vec::new();
    // Scope of each parent, by index in `out`, to check subresources against.
    let mut parents: Vec<(String, String)> = Vec::new();
    for r in &entries {
        let Some(name) = str_field(r, "name") else {
            continue;
        };
        if name.is_empty() || name.contains('/') {
            continue;
        }
        let scope = scope_of(r);
        let mut entry = Map::new();
        entry.insert("resource".into(), Value::from(name));
        entry.insert(
            "responseKind".into(),
            gvk(
                str_field(r, "group").unwrap_or_default(),
                str_field(r, "version").unwrap_or_default(),
                str_field(r, "kind").unwrap_or_default(),
            ),
        );
        entry.insert("scope".into(), Value::from(scope));
        entry.insert(
            "singularResource".into(),
            Value::from(str_field(r, "singularName").unwrap_or_default()),
        );
        entry.insert(
            "verbs".into(),
            string_list(r.get("verbs")).unwrap_or(Value::Null),
        );
        insert_non_empty(&mut entry, "shortNames", string_list(r.get("shortNames")));
        insert_non_empty(&mut entry, "categories", string_list(r.get("categories")));
        out.push(entry);
        parents.push((name.to_string(), scope.to_string()));
    }

    for r in &entries {
        let Some((parent, sub)) = str_field(r, "name").and_then(|n| n.split_once('/')) else {
            continue;
        };
        if parent.is_empty() || sub.is_empty() {
            continue;
        }
        let scope = scope_of(r);
        let index = match parents.iter().position(|(p, _)| p == parent) {
            Some(i) => i,
            None => {
                let mut entry = Map::new();
                entry.insert("resource".into(), Value::from(parent));
                entry.insert("responseKind".into(), gvk("", "", ""));
                entry.insert("scope".into(), Value::from(scope));
                entry.insert("singularResource".into(), Value::from(""));
                entry.insert("verbs".into(), Value::Null);
                out.push(entry);
                parents.push((parent.to_string(), scope.to_string()));
                out.len() - 1
            }
        };
        if parents[index].1 != scope {
            continue;
        }
        let kind = str_field(r, "kind").unwrap_or_default();
        let response_kind = if kind.is_empty() {
            gvk("", "", "")
        } else {
            gvk(
                str_field(r, "group").unwrap_or_default(),
                str_field(r, "version").unwrap_or_default(),
                kind,
            )
        };
        let mut entry = Map::new();
        entry.insert("subresource".into(), Value::from(sub));
        entry.insert("responseKind".into(), response_kind);
        entry.insert(
            "verbs".into(),
            string_list(r.get("verbs")).unwrap_or(Value::Null),
        );
        if let Some(Value::Array(subs)) = out[index].get_mut("subresources") {
            subs.push(Value::Object(entry));
        } else {
            out[index].insert(
                "subresources".into(),
                Value::Array(vec![Value::Object(entry)]),
            );
        }
    }
    out.into_iter().map(Value::Object).collect()
}

/// One `APIResourceDiscovery` re-shaped as kube would re-encode it (see the module docs);
/// `None` for an entry that is not an object or has no `resource` name.
pub(super) fn normalize_resource(r: &Value) -> Option<Value> {
    let r = r.as_object()?;
    let name = str_field(r, "resource")?;
    if name.is_empty() {
        return None;
    }
    let mut entry = Map::new();
    entry.insert("resource".into(), Value::from(name));
    entry.insert("responseKind".into(), normalize_gvk(r.get("responseKind")));
    entry.insert(
        "scope".into(),
        Value::from(str_field(r, "scope").unwrap_or_default()),
    );
    entry.insert(
        "singularResource".into(),
        Value::from(str_field(r, "singularResource").unwrap_or_default()),
    );
    entry.insert(
        "verbs".into(),
        string_list(r.get("verbs")).unwrap_or(Value::Null),
    );
    insert_non_empty(&mut entry, "shortNames", string_list(r.get("shortNames")));
    insert_non_empty(&mut entry, "categories", string_list(r.get("categories")));
    let subresources: Vec<Value> = r
        .get("subresources")
        .and_then(Value::as_array)
        .map(|subs| subs.iter().filter_map(normalize_subresource).collect())
        .unwrap_or_default();
    if !subresources.is_empty() {
        entry.insert("subresources".into(), Value::Array(subresources));
    }
    Some(Value::Object(entry))
}

fn normalize_subresource(s: &Value) -> Option<Value> {
    let s = s.as_object()?;
    let name = str_field(s, "subresource")?;
    if name.is_empty() {
        return None;
    }
    let mut entry = Map::new();
    entry.insert("subresource".into(), Value::from(name));
    entry.insert("responseKind".into(), normalize_gvk(s.get("responseKind")));
    let accepted: Vec<Value> = s
        .get("acceptedTypes")
        .and_then(Value::as_array)
        .map(|types| {
            types
                .iter()
                .filter(|t| t.is_object())
                .map(|t| normalize_gvk(Some(t)))
                .collect()
        })
        .unwrap_or_default();
    if !accepted.is_empty() {
        entry.insert("acceptedTypes".into(), Value::Array(accepted));
    }
    entry.insert(
        "verbs".into(),
        string_list(s.get("verbs")).unwrap_or(Value::Null),
    );
    Some(Value::Object(entry))
}

fn normalize_gvk(v: Option<&Value>) -> Value {
    let field = |name: &str| {
        v.and_then(|v| v.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    gvk(field("group"), field("version"), field("kind"))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    let mut m = Map::new();
    m.insert("group".into(), Value::from(group));
    m.insert("version".into(), Value::from(version));
    m.insert("kind".into(), Value::from(kind));
    Value::Object(m)
}

fn str_field<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

fn scope_of(r: &Map<String, Value>) -> &'static str {
    if r.get("namespaced").and_then(Value::as_bool) == Some(true) {
        "Namespaced"
    } else {
        "Cluster"
    }
}

/// The strings of a JSON list (other items dropped); `None` when it is not a list.
fn string_list(v: Option<&Value>) -> Option<Value> {
    let list = v?.as_array()?;
    Some(Value::Array(
        list.iter().filter(|s| s.is_string()).cloned().collect(),
    ))
}

fn insert_non_empty(entry: &mut Map<String, Value>, key: &str, list: Option<Value>) {
    if let Some(Value::Array(items)) = list {
        if !items.is_empty() {
            entry.insert(key.into(), Value::Array(items));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parse_tolerates_missing_fields_and_skips_malformed_entries() {
        let doc = json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2beta1",
            "items": [
                {
                    "metadata": { "name": "metrics.k8s.io" },
                    "versions": [
                        {
                            "version": "v1beta1",
                            "resources": [
                                {
                                    "resource": "pods",
                                    "scope": "Namespaced",
                                    "singularResource": "",
                                    "verbs": ["get", "list", 7],
                                    "shortNames": [],
                                    "extra": "dropped",
                                    "subresources": [{ "subresource": "log" }, "junk"]
                                },
                                { "scope": "Cluster" },
                                "not an object"
                            ]
                        },
                        { "version": "v1alpha1", "freshness": "Stale" },
                        { "resources": [] },
                        "junk"
                    ]
                },
                { "metadata": {}, "versions": [{ "version": "v1", "freshness": "Current" }] },
                { "metadata": { "name": "no.versions" } },
                42
            ]
        });
        let parsed = parse_aggregated(&doc);
        assert_eq!(
            parsed,
            vec![
                (
                    "metrics.k8s.io".to_string(),
                    "v1beta1".to_string(),
                    vec![json!({
                        "resource": "pods",
                        "responseKind": { "group": "", "version": "", "kind": "" },
                        "scope": "Namespaced",
                        "singularResource": "",
                        "verbs": ["get", "list"],
                        "subresources": [{
                            "subresource": "log",
                            "responseKind": { "group": "", "version": "", "kind": "" },
                            "verbs": null
                        }]
                    })],
                    false
                ),
                (
                    "metrics.k8s.io".to_string(),
                    "v1alpha1".to_string(),
                    vec![],
                    true
                ),
                (String::new(), "v1".to_string(), vec![], false),
            ]
        );
        // Field order is kube's (the document is re-encoded byte for byte by the merge).
        let keys: Vec<&str> = parsed[0].2[0]
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "resource",
                "responseKind",
                "scope",
                "singularResource",
                "verbs",
                "subresources"
            ]
        );

        assert!(parse_aggregated(&json!({ "kind": "APIGroupList", "items": [] })).is_empty());
        assert!(parse_aggregated(&json!("nonsense")).is_empty());
        assert!(parse_aggregated(&json!({ "items": "nope" })).is_empty());
    }

    #[test]
    fn legacy_conversion_nests_subresources_like_kube() {
        let list = json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": "wardle.example.com/v1alpha1",
            "resources": [
                {
                    "name": "flunders",
                    "singularName": "flunder",
                    "namespaced": true,
                    "kind": "Flunder",
                    "verbs": ["create", "delete", "get", "list", "watch"],
                    "shortNames": ["fl"],
                    "categories": ["all"],
                    "storageVersionHash": "ignored"
                },
                {
                    "name": "flunders/status",
                    "singularName": "",
                    "namespaced": true,
                    "kind": "Flunder",
                    "verbs": ["get", "patch"]
                },
                {
                    "name": "flunders/scale",
                    "singularName": "",
                    "namespaced": true,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get"]
                },
                {
                    "name": "fischers/proxy",
                    "singularName": "",
                    "namespaced": false,
                    "kind": "",
                    "verbs": ["get"]
                },
                {
                    "name": "flunders/bad",
                    "namespaced": false,
                    "kind": "Flunder",
                    "verbs": []
                },
                {
                    "name": "fischers",
                    "singularName": "fischer",
                    "namespaced": false,
                    "kind": "Fischer",
                    "verbs": ["get"]
                },
                "junk"
            ]
        });
        assert_eq!(
            aggregated_from_legacy(&list),
            vec![
                json!({
                    "resource": "flunders",
                    "responseKind": { "group": "", "version": "", "kind": "Flunder" },
                    "scope": "Namespaced",
                    "singularResource": "flunder",
                    "verbs": ["create", "delete", "get", "list", "watch"],
                    "shortNames": ["fl"],
                    "categories": ["all"],
                    "subresources": [
                        {
                            "subresource": "status",
                            "responseKind": { "group": "", "version": "", "kind": "Flunder" },
                            "verbs": ["get", "patch"]
                        },
                        {
                            "subresource": "scale",
                            "responseKind": { "group": "autoscaling", "version": "v1", "kind": "Scale" },
                            "verbs": ["get"]
                        }
                    ]
                }),
                json!({
                    "resource": "fischers",
                    "responseKind": { "group": "", "version": "", "kind": "Fischer" },
                    "scope": "Cluster",
                    "singularResource": "fischer",
                    "verbs": ["get"],
                    "subresources": [{
                        "subresource": "proxy",
                        "responseKind": { "group": "", "version": "", "kind": "" },
                        "verbs": ["get"]
                    }]
                }),
            ]
        );
        // A subresource whose parent is not listed gets a made-up parent.
        assert_eq!(
            aggregated_from_legacy(&json!({ "resources": [
                { "name": "widgets/status", "namespaced": true, "kind": "Widget", "verbs": ["get"] }
            ]})),
            vec![json!({
                "resource": "widgets",
                "responseKind": { "group": "", "version": "", "kind": "" },
                "scope": "Namespaced",
                "singularResource": "",
                "verbs": null,
                "subresources": [{
                    "subresource": "status",
                    "responseKind": { "group": "", "version": "", "kind": "Widget" },
                    "verbs": ["get"]
                }]
            })]
        );
        assert!(aggregated_from_legacy(&json!({})).is_empty());
        assert!(aggregated_from_legacy(&json!([1, 2])).is_empty());
    }

    #[test]
    fn normalizing_is_idempotent() {
        let r = json!({
            "resource": "things",
            "scope": "Cluster",
            "verbs": ["get"],
            "categories": ["all"],
            "subresources": [{
                "subresource": "status",
                "acceptedTypes": [{ "group": "g", "version": "v", "kind": "K" }, "x"],
                "verbs": ["get"]
            }]
        });
        let once = normalize_resource(&r).expect("valid");
        assert_eq!(normalize_resource(&once), Some(once.clone()));
        assert_eq!(
            once["subresources"][0]["acceptedTypes"],
            json!([{ "group": "g", "version": "v", "kind": "K" }])
        );
        assert_eq!(normalize_resource(&json!({ "resource": "" })), None);
        assert_eq!(normalize_resource(&json!(["resource"])), None);
    }
}

//! The aggregator's controllers that keep state in step with the store: the routing table
//! (rebuilt from APIServices, Services, Endpoints and EndpointSlices whenever one changes,
//! and on a timer so host names are looked up again), the automanaged local APIServices
//! (kube's `autoregister` controller), and the `kube-system/extension-apiserver-authentication`
//! ConfigMap extension API servers configure their delegated authentication from.

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::core::apiregistration::{
    is_delegated, local_apiservice, local_apiservice_needs_update, AUTOMANAGED_LABEL,
    AUTOMANAGED_ON_START, DELEGATE_ANNOTATION, GROUP,
};
use kubegate_backends::registry::{manager, Registry};
use kubegate_backends::storage::cacher::CacheWatcher;
use serde_json::{json, Value};

use super::apiservice::{ApiService, Target};
use super::resolve::{resolve, ResolveError};
use super::table::{Backend, RouteTable};
use super::{Aggregator, CachedObjects};

/// How long changes settle before the table is rebuilt (a Service and its Endpoints are
/// usually written together).
const SETTLE: Duration = Duration::from_millis(20);

/// Registers an APIService (service: null, `automanaged: onstart`) for every group-version
/// the built-in registry serves, updates those whose spec drifted, and removes `onstart`
/// ones for group-versions no longer served, as kube-apiserver does at start.
pub async fn register_local_apiservices(
    registry: &Registry,
    disabled: &BTreeSet<(String, String)>,
) -> Result<(), String> {
    let def = registry
        .find(GROUP, "apiservices")
        .ok_or("apiservices.apiregistration.k8s.io is not served")?
        .clone();
    let served: BTreeSet<(String, String)> = registry
        .resources()
        .iter()
        .map(|r| (r.group.clone(), r.version.clone()))
        .filter(|gv| !disabled.contains(gv))
        .collect();
    let (existing, _) = registry.list_internal(&def).await.map_err(|e| e.message)?;
    for (group, version) in &served {
        let desired = local_apiservice(group, version);
        let name = desired
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let current = existing
            .iter()
            .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(&name));
        match current {
            None => {
                registry
                    .create_internal(&def, desired, manager::KUBE_APISERVER)
                    .await
                    .map_err(|e| format!("creating APIService {name}: {}", e.message))?;
            }
            // An APIService a user pointed at a backend is theirs: kube's autoregister
            // controller only manages the ones it labelled.
            // (One the delegate registration made while this group-version was switched off
            // is reclaimed the same way.)
            Some(current) if is_automanaged(current) => {
                if local_apiservice_needs_update(current, &desired) || is_delegated(current) {
                    registry
                        .update_internal(&def, "", &name, manager::KUBE_APISERVER, |old| {
                            let mut object = old.clone();
                            object["spec"] = desired["spec"].clone();
                            object["metadata"]["labels"][AUTOMANAGED_LABEL] =
                                desired["metadata"]["labels"][AUTOMANAGED_LABEL].clone();
                            if let Some(annotations) = object
                                .pointer_mut("/metadata/annotations")
                                .and_then(Value::as_object_mut)
                            {
                                annotations.remove(DELEGATE_ANNOTATION);
                            }
                            Ok(object)
                        })
                        .await
                        .map_err(|e| format!("updating APIService {name}: {}", e.message))?;
                }
            }
            Some(_) => {}
        }
    }
    for object in &existing {
        let Some(service) = ApiService::from_object(object) else {
            continue;
        };
        let onstart = object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(AUTOMANAGED_LABEL))
            .and_then(Value::as_str)
            == Some(AUTOMANAGED_ON_START);
        if onstart && !served.contains(&(service.group.clone(), service.version.clone())) {
            registry
                .delete_internal(&def, "", &service.name)
                .await
                .map_err(|e| format!("removing APIService {}: {}", service.name, e.message))?;
        }
    }
    Ok(())
}

fn is_automanaged(object: &Value) -> bool {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(AUTOMANAGED_LABEL))
        .is_some()
}

/// What `extension-apiserver-authentication` publishes.
pub struct AuthenticationInfo {
    /// PEM of the CA bundle that verifies client certificates.
    pub client_ca: String,
    /// PEM of the CA that signed kubegate's proxy client certificate, its allowed names and
    /// the identity headers; `None` when kubegate does not know it (a configured proxy
    /// certificate without `authentication.requestHeader`).
    pub request_header: Option<RequestHeaderInfo>,
}

pub struct RequestHeaderInfo {
    pub client_ca: String,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefix: Vec<String>,
}

/// Where kubegate publishes the trust extension API servers read: (namespace, name).
pub const AUTHENTICATION_CONFIGMAP: (&str, &str) =
    ("kube-system", "extension-apiserver-authentication");

/// Creates or updates `kube-system/extension-apiserver-authentication`, with the keys and
/// JSON-array encodings kube-apiserver's ClusterAuthenticationTrustController writes.
pub async fn publish_authentication_configmap(
    registry: &Registry,
    info: &AuthenticationInfo,
) -> Result<(), String> {
    let def = registry
        .find("", "configmaps")
        .ok_or("configmaps are not served")?
        .clone();
    let mut data = serde_json::Map::new();
    data.insert("client-ca-file".into(), json!(info.client_ca));
    if let Some(rh) = &info.request_header {
        let list = |v: &Vec<String>| json!(serde_json::to_string(v).unwrap_or_default());
        data.insert("requestheader-client-ca-file".into(), json!(rh.client_ca));
        data.insert(
            "requestheader-allowed-names".into(),
            list(&rh.allowed_names),
        );
        data.insert(
            "requestheader-username-headers".into(),
            list(&rh.username_headers),
        );
        data.insert("requestheader-uid-headers".into(), list(&rh.uid_headers));
        data.insert(
            "requestheader-group-headers".into(),
            list(&rh.group_headers),
        );
        data.insert(
            "requestheader-extra-headers-prefix".into(),
            list(&rh.extra_headers_prefix),
        );
    }
    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    let current = registry
        .cacher()
        .get(&def.key(namespace, name))
        .and_then(|c| serde_json::from_slice::<Value>(&c.bytes).ok());
    // As kube's ClusterAuthenticationTrustController: what is stored is combined with what
    // this server needs, never replaced, so servers (replicas, or kube-apiserver on a shared
    // store) with different CAs converge on the union instead of overwriting each other.
    // A first write is combined with nothing, so it is already in the combined form and a
    // later resync finds nothing to change.
    let empty = json!({});
    let stored = current
        .as_ref()
        .and_then(|c| c.get("data"))
        .unwrap_or(&empty);
    let data = combine_authentication_data(stored, &data);
    match current {
        None => registry
            .create_internal(
                &def,
                json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": data,
                }),
                manager::KUBE_APISERVER,
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("creating ConfigMap {namespace}/{name}: {}", e.message)),
        Some(current) if current.get("data") == Some(&data) => Ok(()),
        Some(_) => registry
            .update_internal(&def, namespace, name, manager::KUBE_APISERVER, |old| {
                let mut object = old.clone();
                object["data"] = data.clone();
                Ok(object)
            })
            .await
            .map(|_| ())
            .map_err(|e| format!("updating ConfigMap {namespace}/{name}: {}", e.message)),
    }
}

/// The union of a stored `extension-apiserver-authentication` and this server's `ours`: CA
/// bundles keep every certificate either has (each once), the JSON-array lists every entry
/// either has (stored order first); any other key the stored one has is kept.
fn combine_authentication_data(stored: &Value, ours: &serde_json::Map<String, Value>) -> Value {
    let mut combined = stored.as_object().cloned().unwrap_or_default();
    for (key, value) in ours {
        let ours = value.as_str().unwrap_or_default();
        let theirs = combined
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let merged = if key.ends_with("-file") {
            union_pem(theirs, ours)
        } else {
            union_json_list(theirs, ours)
        };
        combined.insert(key.clone(), json!(merged));
    }
    Value::Object(combined)
}

/// The certificates of two PEM bundles, each once, `theirs` first.
fn union_pem(theirs: &str, ours: &str) -> String {
    let mut blocks: Vec<String> = Vec::new();
    for bundle in [theirs, ours] {
        let mut rest = bundle;
        while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
            const END: &str = "-----END CERTIFICATE-----";
            let Some(end) = rest[start..].find(END) else {
                break;
            };
            let block = rest[start..start + end + END.len()].to_string();
            if !blocks.contains(&block) {
                blocks.push(block);
            }
            rest = &rest[start + end + END.len()..];
        }
    }
    let mut text = blocks.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

/// Two JSON string arrays as one, each entry once, `theirs` first (an unreadable one counts
/// as empty).
fn union_json_list(theirs: &str, ours: &str) -> String {
    let parse = |s: &str| serde_json::from_str::<Vec<String>>(s).unwrap_or_default();
    let mut list = parse(theirs);
    for entry in parse(ours) {
        if !list.contains(&entry) {
            list.push(entry);
        }
    }
    serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
}

/// Storage prefixes whose changes can change the table.
fn watched_prefixes(registry: &Registry) -> Vec<String> {
    [
        (GROUP, "apiservices"),
        ("", "services"),
        ("", "endpoints"),
        ("discovery.k8s.io", "endpointslices"),
    ]
    .iter()
    .filter_map(|(group, plural)| registry.find(group, plural))
    .map(|def| def.collection_prefix(""))
    .collect()
}

/// Builds the table from the watch cache's current objects.
pub async fn build_table(registry: &Registry, aggregator: &Aggregator) -> RouteTable {
    let Some(def) = registry.find(GROUP, "apiservices") else {
        return RouteTable::default();
    };
    let items = match registry
        .cacher()
        .list(&def.collection_prefix(""), None, None)
    {
        Ok((items, _)) => items,
        Err(e) => {
            tracing::warn!(error = %e, "listing APIServices");
            return RouteTable::default();
        }
    };
    let services: Vec<ApiService> = items
        .iter()
        .filter_map(|item| serde_json::from_slice::<Value>(&item.bytes).ok())
        .filter_map(|object| ApiService::from_object(&object))
        .collect();
    let previous = aggregator.table.load();
    let mut backends = Vec::new();
    for service in services.iter().filter(|s| !s.is_local()) {
        let backend = match (&service.target, &aggregator.delegate) {
            (Target::Delegate, Some(delegate)) => {
                // The delegate's trust and credentials are kubegate's configuration.
                let mut service = service.clone();
                service.ca_bundle = delegate.ca_pem.clone();
                service.insecure_skip_tls_verify = false;
                Backend::new(service, delegate.locate().await, delegate.identity.clone())
            }
            (Target::Delegate, None) => Backend::new(
                service.clone(),
                Err(ResolveError {
                    reason: "ServiceNotFound",
                    message:
                        "no delegate cluster is configured (delegate: in kubegate's configuration)"
                            .into(),
                }),
                aggregator.identity.clone(),
            ),
            _ => Backend::new(
                service.clone(),
                resolve(
                    &service.target,
                    &CachedObjects(registry),
                    aggregator.resolution,
                )
                .await,
                aggregator.identity.clone(),
            ),
        };
        if let Some(before) = previous.remote(&service.group, &service.version) {
            backend.continue_from(before);
        }
        backends.push(Arc::new(backend));
    }
    RouteTable::new(services, backends)
}

/// Keeps the routing table current until `stop`.
pub async fn run(
    registry: Arc<Registry>,
    aggregator: Arc<Aggregator>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let prefixes = watched_prefixes(&registry);
    let mut watchers = watch_all(&registry, &prefixes);
    loop {
        let table = build_table(&registry, &aggregator).await;
        aggregator.table.store(Arc::new(table));
        aggregator.table_changed.notify_waiters();
        // Wait for a change under any watched prefix, the resync timer, or stop.
        let woke = tokio::select! {
            changed = next_change(&mut watchers) => changed,
            _ = tokio::time::sleep(aggregator.check_interval) => true,
            _ = stop.changed() => return,
        };
        if !woke {
            // A watch ended (the cache re-listed or this watcher fell behind): start again
            // from the current state.
            tokio::time::sleep(Duration::from_millis(100)).await;
            watchers = watch_all(&registry, &prefixes);
        }
        tokio::time::sleep(SETTLE).await;
        drain(&mut watchers);
    }
}

fn watch_all(registry: &Registry, prefixes: &[String]) -> Vec<CacheWatcher> {
    let revision = registry.cacher().revision();
    prefixes
        .iter()
        .filter_map(|prefix| match registry.cacher().watch(prefix, revision) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(%prefix, error = %e, "aggregator watch");
                None
            }
        })
        .collect()
}

/// Waits for the next event on any watcher: `true` for an event, `false` when one ended.
async fn next_change(watchers: &mut [CacheWatcher]) -> bool {
    if watchers.is_empty() {
        std::future::pending::<()>().await;
    }
    let nexts = watchers.iter_mut().map(|w| Box::pin(w.next()));
    let (event, _, _) = futures::future::select_all(nexts).await;
    matches!(event, Some(Ok(_)))
}

/// Consumes events already queued, so one burst of writes causes one rebuild.
fn drain(watchers: &mut [CacheWatcher]) {
    for watcher in watchers.iter_mut() {
        while let Some(Some(Ok(_))) = futures::FutureExt::now_or_never(watcher.next()) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
    const B: &str = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----";

    #[test]
    fn the_authentication_configmap_is_combined_as_kube_combines_it() {
        let stored = json!({
            "client-ca-file": format!("{A}\n"),
            "requestheader-allowed-names": "[\"other-proxy\"]",
            "requestheader-username-headers": "not json",
            "kept-key": "x",
        });
        let mut ours = serde_json::Map::new();
        ours.insert("client-ca-file".into(), json!(format!("{B}\n{A}\n")));
        ours.insert(
            "requestheader-allowed-names".into(),
            json!("[\"front-proxy-client\",\"other-proxy\"]"),
        );
        ours.insert(
            "requestheader-username-headers".into(),
            json!("[\"X-Remote-User\"]"),
        );
        let combined = combine_authentication_data(&stored, &ours);
        // Every certificate once, the stored ones first.
        assert_eq!(combined["client-ca-file"], json!(format!("{A}\n{B}\n")));
        assert_eq!(
            combined["requestheader-allowed-names"],
            json!("[\"other-proxy\",\"front-proxy-client\"]")
        );
        // An unreadable stored list counts as empty.
        assert_eq!(
            combined["requestheader-username-headers"],
            json!("[\"X-Remote-User\"]")
        );
        assert_eq!(combined["kept-key"], "x");
        // A first write (nothing stored) is in the same form a resync produces.
        let first = combine_authentication_data(&json!({}), &ours);
        assert_eq!(combine_authentication_data(&first, &ours), first);
        // Combining again changes nothing: two servers converge instead of taking turns.
        let again = combine_authentication_data(&combined, &ours);
        assert_eq!(again, combined);
    }
}

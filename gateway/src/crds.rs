//! apiextensions-apiserver's controllers, driven by one watch of the stored
//! CustomResourceDefinitions: names and establishing (the `NamesAccepted` and `Established`
//! conditions, `acceptedNames`, `storedVersions`), serving (the registry's custom resources
//! follow the Established CRDs), kube's `crdregistration` (an APIService per served CRD
//! group-version), and the finalizer that deletes a deleted CRD's instances before the CRD.

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::core::apiregistration::{
    is_delegated, local_apiservice, AUTOMANAGED_CONTINUOUSLY, AUTOMANAGED_LABEL,
    DELEGATE_ANNOTATION,
};
use kubegate_backends::core::crd::CLEANUP_FINALIZER;
use kubegate_backends::core::crd_conversion::ConversionTransports;
use kubegate_backends::core::crd_status::storage_version;
use kubegate_backends::core::crd_status::{
    ensure_stored_version, establish, set_condition, sync_api_approval, sync_names,
    terminating_condition, Termination,
};
use kubegate_backends::core::custom_resource::{resource_defs_with, storage_defs_with};
use kubegate_backends::registry::{manager, now_rfc3339, Registry};
use kubegate_backends::storage::cacher::CacheWatcher;
use kubegate_backends::ResourceDef;
use serde_json::Value;

const GROUP: &str = "apiextensions.k8s.io";
const STORAGE_PREFIX: &str = "/apiextensions.k8s.io/customresourcedefinitions";
/// How long CRD changes settle before the controllers act on them.
const SETTLE: Duration = Duration::from_millis(20);
/// How often everything is checked again when nothing changed (a failed step is retried).
const RESYNC: Duration = Duration::from_secs(10);

/// Runs the controllers until `stop`.
pub async fn run(
    registry: Arc<Registry>,
    transports: Arc<dyn ConversionTransports>,
    mut served: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut watcher = sync(&registry, &*transports, &mut served).await;
    loop {
        tokio::select! {
            event = watcher.next() => {
                if !matches!(event, Some(Ok(_))) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tokio::time::sleep(SETTLE).await;
            }
            _ = tokio::time::sleep(RESYNC) => {}
            _ = stop.changed() => return,
        }
        watcher = sync(&registry, &*transports, &mut served).await;
    }
}

/// Syncs once: returns the watch that signals the next change. `served` is the fingerprint
/// of what the registry serves, so it is only swapped when that changes; `transports` reach
/// the CRDs' conversion webhooks.
pub async fn sync(
    registry: &Registry,
    transports: &dyn ConversionTransports,
    served: &mut String,
) -> CacheWatcher {
    let (items, _, watcher) = registry.cacher().list_and_watch(STORAGE_PREFIX);
    let crds: Vec<Value> = items
        .iter()
        .filter_map(|item| serde_json::from_slice(&item.bytes).ok())
        .collect();
    let Some(def) = registry.find(GROUP, "customresourcedefinitions") else {
        return watcher;
    };
    // Serve what has its names accepted (or is Established) first: a CRD is only made
    // Established (below) once this server serves it, as kube's establishing controller
    // follows its handler, so a client that saw `Established` finds the resource served.
    let builtin_prefixes: BTreeSet<String> = registry
        .builtin_resources()
        .iter()
        .map(|r| r.storage_prefix.clone())
        .collect();
    let mut defs: Vec<ResourceDef> = Vec::new();
    let mut fingerprint = String::new();
    {
        let mut built = BUILT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut still_built = BTreeMap::new();
        for crd in &crds {
            let versions = built_resource_defs(crd, transports, &mut built, &mut still_built);
            if versions
                .iter()
                .any(|d| builtin_prefixes.contains(&d.storage_prefix))
            {
                tracing::warn!(crd = %name_of(crd), "not served: its resource is a built-in one");
                continue;
            }
            if !versions.is_empty() {
                fingerprint.push_str(&format!(
                    "{}@{};",
                    crd.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    crd.pointer("/metadata/generation")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ));
                fingerprint.push_str(
                    &serde_json::to_string(&crd["status"]["acceptedNames"]).unwrap_or_default(),
                );
                // A deletion that starts changes discovery's verbs (the definitions stay).
                if crd.pointer("/metadata/deletionTimestamp").is_some() {
                    fingerprint.push_str("terminating;");
                }
            }
            defs.extend(versions);
        }
        // CRDs that are gone take their definitions with them.
        *built = still_built;
    }
    let group_versions: BTreeSet<(String, String)> = defs
        .iter()
        .map(|d| (d.group.clone(), d.version.clone()))
        .collect();
    if *served != fingerprint {
        registry.set_custom_resources(defs);
        tracing::info!(
            group_versions = group_versions.len(),
            "custom resources served"
        );
        *served = fingerprint;
    }
    for crd in &crds {
        if crd.pointer("/metadata/deletionTimestamp").is_some() {
            if let Err(e) = finalize(registry, transports, &def, crd).await {
                tracing::warn!(crd = %name_of(crd), error = %e, "deleting a CustomResourceDefinition's instances");
            }
            continue;
        }
        let served = kubegate_backends::core::custom_resource::is_served(crd);
        if let Err(e) = update_status(registry, &def, crd, &crds, served).await {
            tracing::warn!(crd = %name_of(crd), error = %e, "updating a CustomResourceDefinition's status");
        }
    }
    if let Err(e) = register_apiservices(registry, &group_versions).await {
        tracing::warn!(error = %e, "registering CRD APIServices");
    }
    watcher
}

/// Each CRD's served resources as last built, by uid, with a hash of what they were built
/// from. A CRD that did not change keeps its definitions when another one changes: their
/// compiled schemas are not compiled again, and the conversions cached with its objects
/// (keyed by the definitions' strategies) stay valid.
static BUILT: std::sync::Mutex<BTreeMap<String, (u64, Vec<ResourceDef>)>> =
    std::sync::Mutex::new(BTreeMap::new());

/// [`resource_defs`] of `crd`, taken from `built` when its inputs are unchanged; the result is
/// recorded in `still_built`.
fn built_resource_defs(
    crd: &Value,
    transports: &dyn ConversionTransports,
    built: &mut BTreeMap<String, (u64, Vec<ResourceDef>)>,
    still_built: &mut BTreeMap<String, (u64, Vec<ResourceDef>)>,
) -> Vec<ResourceDef> {
    use std::hash::{Hash, Hasher};
    let uid = crd
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Everything `resource_defs` reads: the spec, the accepted names and whether the CRD is
    // served. Not whether it is being deleted: that is marked on the definitions' strategies
    // in place, so they (and their objects' watches) stay until the CRD is gone, as kube tears
    // a CRD's storage down only then.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&crd["spec"])
        .unwrap_or_default()
        .hash(&mut hasher);
    serde_json::to_string(&crd["status"]["acceptedNames"])
        .unwrap_or_default()
        .hash(&mut hasher);
    kubegate_backends::core::custom_resource::is_served(crd).hash(&mut hasher);
    let inputs = hasher.finish();
    let defs = match built.remove(uid) {
        Some((hash, defs)) if hash == inputs && !uid.is_empty() => defs,
        _ => resource_defs_with(crd, Some(transports)),
    };
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    for def in &defs {
        def.strategy.mark_terminating(terminating);
    }
    still_built.insert(uid.to_string(), (inputs, defs.clone()));
    defs
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The naming and establishing controllers' writes, and `storedVersions`.
/// `served`: this server serves the CRD's resources already (only then is it Established).
async fn update_status(
    registry: &Registry,
    def: &ResourceDef,
    crd: &Value,
    all: &[Value],
    served: bool,
) -> Result<(), String> {
    let now = now_rfc3339();
    let mut next = crd.clone();
    let mut changed = sync_names(&mut next, all, &now);
    if served {
        changed |= establish(&mut next, &now);
    }
    changed |= sync_api_approval(&mut next, &now);
    changed |= ensure_stored_version(&mut next);
    if !changed || next["status"] == crd["status"] {
        return Ok(());
    }
    let status = next["status"].clone();
    let uid = crd.pointer("/metadata/uid").cloned();
    registry
        .update_status_internal(def, "", &name_of(crd), manager::KUBE_APISERVER, |old| {
            if old.pointer("/metadata/uid").cloned() != uid {
                return Err(kubegate_backends::ApiError::new(
                    409,
                    "Conflict",
                    "the CustomResourceDefinition was replaced",
                ));
            }
            let mut object = old.clone();
            object["status"] = status.clone();
            Ok(object)
        })
        .await
        .map(|_| ())
        .map_err(|e| e.message)
}

/// kube's CRD finalizer: deletes every instance, then removes the cleanup finalizer so the
/// CRD itself goes.
async fn finalize(
    registry: &Registry,
    transports: &dyn ConversionTransports,
    def: &ResourceDef,
    crd: &Value,
) -> Result<(), String> {
    let has_finalizer = crd
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|v| v.as_str() == Some(CLEANUP_FINALIZER)));
    if !has_finalizer {
        return Ok(());
    }
    let name = name_of(crd);
    let set_terminating = |stage: Termination, detail: String| {
        let condition = terminating_condition(stage, &detail);
        async move {
            let now = now_rfc3339();
            registry
                .update_status_internal(def, "", &name_of(crd), manager::KUBE_APISERVER, |old| {
                    let mut object = old.clone();
                    set_condition(&mut object, &condition, &now);
                    Ok(object)
                })
                .await
                .map(|_| ())
                .map_err(|e| e.message)
        }
    };
    set_terminating(Termination::InProgress, String::new()).await?;
    // Every version reads the same storage; the storage version's reads the most objects
    // without conversion.
    let mut defs = storage_defs_with(crd, Some(transports));
    let storage = storage_version(crd).unwrap_or_default();
    let first = defs.iter().position(|d| d.version == storage).unwrap_or(0);
    if first < defs.len() {
        let instances = defs.swap_remove(first);
        let items = match registry.list_internal(&instances).await {
            Ok((items, _)) => items,
            Err(e) => {
                // kube's finalizer: `InstanceDeletionFailed`, "could not list instances: ...".
                set_terminating(Termination::ListFailed, e.message.clone()).await?;
                return Err(format!("could not list instances: {}", e.message));
            }
        };
        for item in &items {
            let namespace = item
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            match registry
                .delete_internal(&instances, namespace, &name_of(item))
                .await
            {
                Ok(()) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => {
                    let detail = format!("could not delete {}: {}", name_of(item), e.message);
                    set_terminating(Termination::Failed, detail.clone()).await?;
                    return Err(detail);
                }
            }
        }
        let (left, _) = registry
            .list_internal(&instances)
            .await
            .map_err(|e| e.message)?;
        if !left.is_empty() {
            // Instances with finalizers of their own: wait for them (the resync comes back).
            return Err(format!("{} instances still being deleted", left.len()));
        }
    }
    set_terminating(Termination::Completed, String::new()).await?;
    registry
        .update_internal(def, "", &name, manager::KUBE_APISERVER, |old| {
            let mut object = old.clone();
            if let Some(list) = object
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                list.retain(|f| f.as_str() != Some(CLEANUP_FINALIZER));
            }
            Ok(object)
        })
        .await
        .map(|_| ())
        .or_else(|e| {
            if e.code == 404 {
                Ok(())
            } else {
                Err(e.message)
            }
        })?;
    tracing::info!(crd = %name, "CustomResourceDefinition deleted with its instances");
    Ok(())
}

/// kube's `crdregistration` controller: an APIService (`automanaged: "true"`) for every served
/// CRD group-version, removed when no CRD serves it any more.
async fn register_apiservices(
    registry: &Registry,
    served: &BTreeSet<(String, String)>,
) -> Result<(), String> {
    let Some(def) = registry.find("apiregistration.k8s.io", "apiservices") else {
        return Ok(());
    };
    let builtin: BTreeSet<(String, String)> = registry
        .builtin_resources()
        .iter()
        .map(|r| (r.group.clone(), r.version.clone()))
        .collect();
    let (existing, _) = registry.list_internal(&def).await.map_err(|e| e.message)?;
    let label = |o: &Value| {
        o.pointer("/metadata/labels")
            .and_then(|l| l.get(AUTOMANAGED_LABEL))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    for (group, version) in served {
        let desired = local_apiservice(group, version);
        let name = name_of(&desired);
        match existing.iter().find(|o| name_of(o) == name) {
            None => {
                registry
                    .create_internal(&def, desired, manager::KUBE_APISERVER)
                    .await
                    .map_err(|e| format!("creating APIService {name}: {}", e.message))?;
            }
            // A delegate's registration of the same group-version gives way to the local CRD.
            Some(current) if is_delegated(current) => {
                registry
                    .update_internal(&def, "", &name, manager::KUBE_APISERVER, |old| {
                        let mut object = old.clone();
                        object["spec"] = desired["spec"].clone();
                        if let Some(a) = object
                            .pointer_mut("/metadata/annotations")
                            .and_then(Value::as_object_mut)
                        {
                            a.remove(DELEGATE_ANNOTATION);
                        }
                        Ok(object)
                    })
                    .await
                    .map_err(|e| format!("updating APIService {name}: {}", e.message))?;
            }
            Some(_) => {}
        }
    }
    for object in &existing {
        let Some(group_version) =
            object
                .pointer("/spec/version")
                .and_then(Value::as_str)
                .map(|v| {
                    (
                        object
                            .pointer("/spec/group")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        v.to_string(),
                    )
                })
        else {
            continue;
        };
        let local_crd_managed = label(object).as_deref() == Some(AUTOMANAGED_CONTINUOUSLY)
            && !is_delegated(object)
            && object.pointer("/spec/service").is_none_or(Value::is_null);
        if local_crd_managed
            && !served.contains(&group_version)
            && !builtin.contains(&group_version)
        {
            match registry.delete_internal(&def, "", &name_of(object)).await {
                Ok(()) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e.message),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(uid: &str, description: &str) -> Value {
        json!({
            "metadata": {"name": "things.g.example.com", "uid": uid},
            "spec": {"group": "g.example.com", "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": description}}}]},
            "status": {"acceptedNames": {"plural": "things", "singular": "thing", "kind": "Thing",
                    "listKind": "ThingList"},
                "conditions": [{"type": "Established", "status": "True"}]}
        })
    }

    /// An unchanged CRD keeps its definitions (the same strategy, so the conversions cached
    /// with its objects stay valid); a changed or replaced one gets new ones; a gone one is
    /// forgotten.
    #[test]
    fn unchanged_crds_keep_their_definitions() {
        let build = |built: &mut BTreeMap<String, (u64, Vec<ResourceDef>)>, crd: &Value| {
            let mut next = BTreeMap::new();
            let transports = crate::conversion::WebhookTransports {
                registry: std::sync::Weak::new(),
                resolution: crate::aggregator::resolve::Resolution::Endpoints,
                metrics: None,
            };
            let defs = built_resource_defs(crd, &transports, built, &mut next);
            *built = next;
            defs
        };
        let mut built = BTreeMap::new();
        let first = build(&mut built, &crd("u1", "a"));
        assert_eq!(first.len(), 1);
        let again = build(&mut built, &crd("u1", "a"));
        assert!(Arc::ptr_eq(&first[0].strategy, &again[0].strategy));
        let changed = build(&mut built, &crd("u1", "b"));
        assert!(!Arc::ptr_eq(&again[0].strategy, &changed[0].strategy));
        assert_ne!(
            again[0].strategy.conversion_id(),
            changed[0].strategy.conversion_id()
        );
        let replaced = build(&mut built, &crd("u2", "b"));
        assert!(!Arc::ptr_eq(&changed[0].strategy, &replaced[0].strategy));
        assert_eq!(built.keys().collect::<Vec<_>>(), ["u2"]);
        // Being deleted marks the same definitions terminating, in place: their objects'
        // watches go on (kube keeps a terminating CRD's storage until the CRD is gone).
        let mut terminating = crd("u2", "b");
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let deleting = build(&mut built, &terminating);
        assert_eq!(deleting.len(), 1);
        assert!(deleting[0].strategy.terminating());
        assert!(Arc::ptr_eq(&replaced[0].strategy, &deleting[0].strategy));
        assert!(replaced[0].strategy.terminating());
    }
}

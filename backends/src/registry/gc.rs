//! The garbage collector, kube-controller-manager's, in-process: an object whose owners
//! (`metadata.ownerReferences`) are all gone is deleted; an owner deleted with the `Orphan`
//! policy (`orphan` finalizer) first has its references taken out of its dependents; one
//! deleted in the `Foreground` (`foregroundDeletion` finalizer) first has its dependents
//! deleted, and goes once none that blocks it (`blockOwnerDeletion`) is left. The decisions
//! follow kube's `attemptToDeleteItem`, `orphanDependents` and `processDeletingDependentsItem`.
//!
//! The [`Graph`] follows the watch cache: it indexes only objects that have owner references
//! or a deletion finalizer (a cheap byte search decides), so a store of objects without owners
//! costs it nothing but that search per write. Owners are looked up in the cache when an item
//! is judged. An owner of a kind not served here (a backend's, or unknown) is taken to exist:
//! as kube's collector, which cannot resolve such a kind, nothing is deleted for it.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::{json, Value};

use super::meta::meta_field;
use super::write::{DeleteOptions, WriteMode, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use super::Registry;
use crate::resource::ResourceDef;
use crate::status::ApiResult;
use crate::storage::cacher::{CacheEvent, CacheEventKind, CachedObject};

/// One `metadata.ownerReferences` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerRef {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

/// What the collector reads of an object.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GcMeta {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    owner_references: Vec<OwnerRef>,
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    deletion_timestamp: Option<Value>,
}

impl GcMeta {
    fn of(bytes: &[u8]) -> GcMeta {
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: GcMeta,
        }
        serde_json::from_slice::<Object>(bytes)
            .map(|o| o.metadata)
            .unwrap_or_default()
    }

    fn deleting(&self) -> bool {
        self.deletion_timestamp
            .as_ref()
            .is_some_and(|t| !t.is_null())
    }

    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}

/// Whether a stored object may matter to the collector.
fn may_matter(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"ownerReferences\"").is_some()
        || memchr::memmem::find(bytes, ORPHAN_FINALIZER.as_bytes()).is_some()
        || memchr::memmem::find(bytes, FOREGROUND_FINALIZER.as_bytes()).is_some()
}

/// Work for the collector.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Work {
    /// Judge a dependent's owners (kube's `attemptToDeleteItem`).
    Dependent(String),
    /// Orphan or delete an owner's dependents (an owner being deleted with a GC finalizer).
    Owner(String),
}

/// The owner/dependent index, and what is left to do.
#[derive(Debug, Default)]
pub struct Graph {
    /// dependent key → (its uid, its owner references).
    owned: HashMap<String, (String, Vec<OwnerRef>)>,
    /// owner uid → dependent keys.
    dependents: HashMap<String, BTreeSet<String>>,
    /// uid → key of owners being deleted with a GC finalizer.
    finalizing: HashMap<String, String>,
    dirty: BTreeSet<Work>,
}

impl Graph {
    /// Starts from the cache's objects.
    pub fn load(objects: &[std::sync::Arc<CachedObject>]) -> Graph {
        let mut graph = Graph::default();
        for object in objects {
            graph.saw(object);
        }
        graph
    }

    /// Follows one watch event.
    pub fn apply(&mut self, event: &CacheEvent) {
        match event.kind {
            CacheEventKind::Deleted => self.gone(&event.object),
            CacheEventKind::Added | CacheEventKind::Modified => self.saw(&event.object),
        }
    }

    /// Whether work is waiting.
    pub fn has_work(&self) -> bool {
        !self.dirty.is_empty()
    }

    fn saw(&mut self, object: &CachedObject) {
        let known = self.owned.contains_key(&object.key);
        if !known && !may_matter(&object.bytes) {
            return;
        }
        let meta = GcMeta::of(&object.bytes);
        self.unlink(&object.key);
        if !meta.owner_references.is_empty() {
            for owner in &meta.owner_references {
                self.dependents
                    .entry(owner.uid.clone())
                    .or_default()
                    .insert(object.key.clone());
                // An owner waiting for its dependents sees this one change.
                if let Some(owner_key) = self.finalizing.get(&owner.uid) {
                    self.dirty.insert(Work::Owner(owner_key.clone()));
                }
            }
            self.owned.insert(
                object.key.clone(),
                (meta.uid.clone(), meta.owner_references.clone()),
            );
            self.dirty.insert(Work::Dependent(object.key.clone()));
        }
        if meta.deleting() && (meta.has(ORPHAN_FINALIZER) || meta.has(FOREGROUND_FINALIZER)) {
            self.finalizing.insert(meta.uid.clone(), object.key.clone());
            self.dirty.insert(Work::Owner(object.key.clone()));
        }
    }

    fn gone(&mut self, object: &CachedObject) {
        let owned = self.unlink(&object.key);
        if self.dependents.is_empty() && owned.is_none() {
            return;
        }
        let uid = match &owned {
            Some((uid, _)) => uid.clone(),
            None => GcMeta::of(&object.bytes).uid,
        };
        self.finalizing.remove(&uid);
        // Its dependents may have lost their last owner.
        if let Some(dependents) = self.dependents.get(&uid) {
            for key in dependents {
                self.dirty.insert(Work::Dependent(key.clone()));
            }
        }
        // Its owners waiting for it may go on.
        if let Some((_, owners)) = owned {
            for owner in owners {
                if let Some(owner_key) = self.finalizing.get(&owner.uid) {
                    self.dirty.insert(Work::Owner(owner_key.clone()));
                }
            }
        }
    }

    /// Forgets what `key` owned; returns its entry.
    fn unlink(&mut self, key: &str) -> Option<(String, Vec<OwnerRef>)> {
        let entry = self.owned.remove(key)?;
        for owner in &entry.1 {
            if let Some(set) = self.dependents.get_mut(&owner.uid) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&owner.uid);
                }
            }
        }
        Some(entry)
    }
}

/// How an owner reference stands (kube's solid, dangling and waiting owners).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    /// Exists and is not being deleted in the foreground (or cannot be looked up here).
    Solid,
    /// Gone, or replaced by another object of the same name.
    Dangling,
    /// Being deleted in the foreground: its dependents go first.
    Waiting,
    /// A namespaced owner of a cluster-scoped dependent, which cannot be: kube's collector
    /// forgets such a dependent (`namespacedOwnerOfClusterScopedObjectErr`), it never deletes it.
    Invalid,
}

impl Registry {
    /// Does the work `graph` has (each item once; what it causes comes back as events).
    pub async fn collect_garbage(&self, graph: &mut Graph) {
        while let Some(work) = graph.dirty.pop_first() {
            let outcome = match &work {
                Work::Dependent(key) => self.judge_dependent(graph, key).await,
                Work::Owner(key) => self.finish_owner(graph, key).await,
            };
            if let Err(e) = outcome {
                if e.code != 404 && e.code != 409 {
                    tracing::warn!(?work, error = %e.message, "garbage collector");
                }
            }
        }
    }

    /// The resource a storage key belongs to (one that stores as it serves, when several
    /// share the key space; for a custom resource whose CRD converts with a webhook, the
    /// storage version, which reads its objects without calling the webhook).
    fn def_of_key(&self, key: &str) -> Option<std::sync::Arc<ResourceDef>> {
        let resources = self.resources();
        let matching: Vec<&std::sync::Arc<ResourceDef>> = resources
            .iter()
            .filter(|d| {
                key.strip_prefix(d.storage_prefix.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
            })
            .collect();
        let stores_as_served = |d: &&&std::sync::Arc<ResourceDef>| {
            !d.strategy.converts_storage()
                || d.strategy
                    .webhook_conversion()
                    .is_some_and(|c| c.served == c.storage)
        };
        matching
            .iter()
            .find(stores_as_served)
            .or_else(|| matching.first())
            .map(|d| (*d).clone())
    }

    /// The served resource of an owner reference's `apiVersion` and `kind`.
    fn def_of_kind(&self, api_version: &str, kind: &str) -> Option<std::sync::Arc<ResourceDef>> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        self.resources()
            .iter()
            .find(|d| d.group == group && d.kind == kind)
            .cloned()
    }

    fn owner_state(&self, owner: &OwnerRef, dependent_namespace: &str) -> OwnerState {
        let Some(def) = self.def_of_kind(&owner.api_version, &owner.kind) else {
            return OwnerState::Solid;
        };
        let namespace = if def.namespaced {
            if dependent_namespace.is_empty() {
                return OwnerState::Invalid;
            }
            dependent_namespace
        } else {
            ""
        };
        let Some(cached) = self.cacher.get(&def.key(namespace, &owner.name)) else {
            return OwnerState::Dangling;
        };
        let meta = GcMeta::of(&cached.bytes);
        if meta.uid != owner.uid {
            OwnerState::Dangling
        } else if meta.deleting() && meta.has(FOREGROUND_FINALIZER) {
            OwnerState::Waiting
        } else {
            OwnerState::Solid
        }
    }

    /// The cached object under `key`, with its resource, what the collector reads of it, and
    /// its namespace and name; `None` once it is gone.
    fn item(&self, key: &str) -> Option<(std::sync::Arc<ResourceDef>, GcMeta, String, String)> {
        let cached = self.cacher.get(key)?;
        let def = self.def_of_key(key)?;
        let object: Value = serde_json::from_slice(&cached.bytes).unwrap_or_default();
        let namespace = super::object_namespace(&object).to_string();
        let name = super::object_name(&object).to_string();
        Some((def, GcMeta::of(&cached.bytes), namespace, name))
    }

    /// kube's `attemptToDeleteItem` for one dependent.
    async fn judge_dependent(&self, graph: &Graph, key: &str) -> ApiResult<()> {
        let Some((def, meta, namespace, name)) = self.item(key) else {
            return Ok(());
        };
        if meta.owner_references.is_empty() {
            return Ok(());
        }
        let states: Vec<(OwnerState, &OwnerRef)> = meta
            .owner_references
            .iter()
            .map(|owner| (self.owner_state(owner, &namespace), owner))
            .collect();
        if states.iter().any(|(s, _)| *s == OwnerState::Invalid) {
            tracing::debug!(%key, "garbage collector: a cluster-scoped object names a namespaced owner; left alone");
            return Ok(());
        }
        let solid = states.iter().any(|(s, _)| *s == OwnerState::Solid);
        let waiting = states.iter().any(|(s, _)| *s == OwnerState::Waiting);
        if solid {
            // Owners that are gone or waiting for this one lose it; the object stays.
            let drop: BTreeSet<String> = states
                .iter()
                .filter(|(s, _)| *s != OwnerState::Solid)
                .map(|(_, o)| o.uid.clone())
                .collect();
            if drop.is_empty() {
                return Ok(());
            }
            return self
                .remove_owner_references(&def, &namespace, &name, &meta.uid, &drop)
                .await;
        }
        if meta.deleting() {
            // Already going (its own finalizers hold it).
            return Ok(());
        }
        let has_dependents = graph.dependents.contains_key(&meta.uid);
        let propagation = if waiting && has_dependents {
            "Foreground"
        } else if meta.has(ORPHAN_FINALIZER) {
            "Orphan"
        } else if meta.has(FOREGROUND_FINALIZER) {
            "Foreground"
        } else {
            "Background"
        };
        let options = DeleteOptions {
            precondition_uid: Some(meta.uid.clone()),
            propagation: Some(propagation.to_string()),
            ..Default::default()
        };
        tracing::info!(
            key,
            propagation,
            "garbage collector: deleting an object whose owners are gone"
        );
        self.delete_object(&def, &namespace, &name, &options)
            .await
            .map(|_| ())
    }

    /// An owner being deleted with `orphan` or `foregroundDeletion`.
    async fn finish_owner(&self, graph: &mut Graph, key: &str) -> ApiResult<()> {
        let Some((def, meta, namespace, name)) = self.item(key) else {
            return Ok(());
        };
        if !meta.deleting() {
            return Ok(());
        }
        let dependents: Vec<String> = graph
            .dependents
            .get(&meta.uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        if meta.has(ORPHAN_FINALIZER) {
            // kube's `orphanDependents`: every dependent loses its reference, then the owner
            // its finalizer.
            let owner: BTreeSet<String> = [meta.uid.clone()].into();
            for dependent in &dependents {
                let Some((dependent_def, dependent_meta, dependent_ns, dependent_name)) =
                    self.item(dependent)
                else {
                    continue;
                };
                self.remove_owner_references(
                    &dependent_def,
                    &dependent_ns,
                    &dependent_name,
                    &dependent_meta.uid,
                    &owner,
                )
                .await?;
            }
            return self
                .remove_finalizer(&def, &namespace, &name, &meta.uid, ORPHAN_FINALIZER)
                .await;
        }
        if meta.has(FOREGROUND_FINALIZER) {
            // kube's `processDeletingDependentsItem`: the dependents are deleted; the owner
            // goes once none that blocks it is left.
            let mut blocking = false;
            for dependent in &dependents {
                let Some((_, owners)) = graph.owned.get(dependent) else {
                    continue;
                };
                if owners
                    .iter()
                    .any(|o| o.uid == meta.uid && o.block_owner_deletion == Some(true))
                {
                    blocking = true;
                }
                graph.dirty.insert(Work::Dependent(dependent.clone()));
            }
            if !blocking {
                return self
                    .remove_finalizer(&def, &namespace, &name, &meta.uid, FOREGROUND_FINALIZER)
                    .await;
            }
        }
        Ok(())
    }

    /// Takes the owner references with these uids out of an object.
    async fn remove_owner_references(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        uid: &str,
        owners: &BTreeSet<String>,
    ) -> ApiResult<()> {
        let owned = |reference: &Value| {
            reference
                .get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| owners.contains(u))
        };
        self.remove_from_metadata(def, (namespace, name, uid), "ownerReferences", owned)
            .await
    }

    /// Removes one finalizer from an object (the last one lets a deleting object go).
    async fn remove_finalizer(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        uid: &str,
        finalizer: &str,
    ) -> ApiResult<()> {
        let named = |f: &Value| f.as_str() == Some(finalizer);
        self.remove_from_metadata(def, (namespace, name, uid), "finalizers", named)
            .await
    }

    /// Removes the entries `drop` picks from the metadata list `field` of the object
    /// `(namespace, name)`, if it still has `uid` (the list goes when it ends up empty).
    async fn remove_from_metadata(
        &self,
        def: &ResourceDef,
        (namespace, name, uid): (&str, &str, &str),
        field: &str,
        drop: impl Fn(&Value) -> bool,
    ) -> ApiResult<()> {
        self.update_object(def, namespace, name, "", WriteMode::default(), |current| {
            let mut next = current.clone();
            if meta_field(current, "uid").and_then(Value::as_str) != Some(uid) {
                return Ok(next);
            }
            if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                let kept: Vec<Value> = meta
                    .get(field)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|entry| !drop(entry))
                    .cloned()
                    .collect();
                if kept.is_empty() {
                    meta.remove(field);
                } else {
                    meta.insert(field.into(), json!(kept));
                }
            }
            Ok(next)
        })
        .await
        .map(|_| ())
    }
}

//! Namespace lifecycle: the default namespaces created at start, and the namespace
//! controller's work for a namespace being deleted (delete everything in it, report what
//! remains in the namespace's deletion conditions, then remove the `kubernetes` finalizer so
//! the namespace itself goes), as kube-controller-manager's namespace controller does.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::meta::{meta_field, now_rfc3339};
use super::write::{DeleteOptions, WriteMode};
use super::Registry;
use crate::core::crd_status::{set_condition, Condition};
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};

/// The namespaces kube-apiserver creates at start.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Namespaces kube's NamespaceLifecycle admission never lets go.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The finalizer the namespace controller owns.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// What happened in one pass over a terminating namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalizeOutcome {
    /// The namespace is gone (or was never terminating and is absent).
    Gone,
    /// Content remains (objects with finalizers of their own); try again later.
    ContentRemaining(usize),
    /// The namespace is not being deleted.
    NotTerminating,
}

/// kube's extra rules for deleting a namespace: the system namespaces may not be deleted,
/// and a namespace already being emptied answers 409.
pub(crate) fn check_namespace_delete(def: &ResourceDef, namespace: &Value) -> ApiResult<()> {
    if !(def.group.is_empty() && def.plural == "namespaces") {
        return Ok(());
    }
    let name = super::object_name(namespace);
    if IMMORTAL_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden_resource(
            &def.group_resource(),
            name,
            "this namespace may not be deleted",
        ));
    }
    let finalizing = namespace
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if meta_field(namespace, "deletionTimestamp").is_some() && finalizing {
        return Err(ApiError::conflict(
            &def.group_resource(),
            name,
            "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.",
        ));
    }
    Ok(())
}

impl Registry {
    /// Creates the default namespaces if they are missing.
    pub async fn ensure_default_namespaces(&self) -> ApiResult<()> {
        let Some(def) = self.find("", "namespaces") else {
            return Ok(());
        };
        for name in DEFAULT_NAMESPACES {
            let object =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            match self
                .create_internal(&def, object, super::manager::KUBE_APISERVER)
                .await
            {
                Ok(_) => tracing::info!(namespace = name, "created default namespace"),
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Names of namespaces that are being deleted.
    pub fn terminating_namespaces(&self) -> Vec<String> {
        let Some(def) = self.find("", "namespaces") else {
            return Vec::new();
        };
        let Ok((items, _)) = self.cacher.list(&def.collection_prefix(""), None, None) else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .filter(|ns| meta_field(ns, "deletionTimestamp").is_some())
            .filter_map(|ns| super::object_name(&ns).to_string().into())
            .filter(|n: &String| !n.is_empty())
            .collect()
    }

    /// One pass of the namespace controller over `name`: deletes the namespace's content
    /// (each resource stored once, whatever versions serve it), records what remains (with
    /// `elsewhere`, what the caller found in content served by others) in the namespace's
    /// deletion conditions and, when nothing remains anywhere, removes the `kubernetes`
    /// finalizer so the namespace is deleted.
    pub async fn finalize_namespace(
        &self,
        name: &str,
        elsewhere: ContentTotals,
    ) -> ApiResult<FinalizeOutcome> {
        let Some(ns_def) = self.find("", "namespaces") else {
            return Ok(FinalizeOutcome::Gone);
        };
        let namespace = match self.get_object(&ns_def, "", name).await {
            Ok(ns) => ns,
            Err(e) if e.code == 404 => return Ok(FinalizeOutcome::Gone),
            Err(e) => return Err(e),
        };
        if meta_field(&namespace, "deletionTimestamp").is_none() {
            return Ok(FinalizeOutcome::NotTerminating);
        }
        let mut content = elsewhere;
        let mut seen_prefixes = std::collections::HashSet::new();
        for def in self.resources().iter() {
            if !def.namespaced || !seen_prefixes.insert(def.storage_prefix.clone()) {
                continue;
            }
            // kube goes on with the other resources when one fails, and reports the failures.
            if let Err(e) = self.delete_namespace_content(def, name, &mut content).await {
                content.failures.push(e.message);
            }
        }
        let remaining: usize = content.remaining.values().sum();
        self.record_deletion_conditions(&ns_def, name, &content)
            .await?;
        if !content.failures.is_empty() || !content.discovery_failures.is_empty() {
            let why: Vec<String> = content
                .discovery_failures
                .iter()
                .map(|(gv, why)| format!("{gv}: {why}"))
                .chain(content.failures.iter().cloned())
                .collect();
            return Err(ApiError::internal(format!(
                "deleting the content of namespace {name}: {}",
                why.join(", ")
            )));
        }
        if remaining > 0 {
            return Ok(FinalizeOutcome::ContentRemaining(remaining));
        }
        let written = self
            .update_object(
                &ns_def,
                "",
                name,
                "finalize",
                WriteMode::default(),
                |current| {
                    let mut next = current.clone();
                    if let Some(list) = next
                        .pointer_mut("/spec/finalizers")
                        .and_then(Value::as_array_mut)
                    {
                        list.retain(|f| f.as_str() != Some(NAMESPACE_FINALIZER));
                    }
                    Ok(next)
                },
            )
            .await;
        match written {
            Ok(_) => {}
            Err(e) if e.code == 404 => return Ok(FinalizeOutcome::Gone),
            Err(e) => return Err(e),
        }
        match self.get_object(&ns_def, "", name).await {
            Err(e) if e.code == 404 => Ok(FinalizeOutcome::Gone),
            Err(e) => Err(e),
            // Other finalizers (metadata.finalizers or spec.finalizers of other owners) hold it.
            Ok(_) => Ok(FinalizeOutcome::ContentRemaining(0)),
        }
    }
}

/// What one pass over a terminating namespace's content left: kube's
/// `allGVRDeletionMetadata`, its delete errors and its discovery errors. The registry counts
/// its own resources; content served elsewhere (APIService backends) is counted by the
/// caller and handed in.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ContentTotals {
    /// `<resource>.<group>` → objects still there (waiting on their finalizers).
    pub remaining: BTreeMap<String, usize>,
    /// finalizer → remaining objects that carry it.
    pub finalizers: BTreeMap<String, usize>,
    /// Why some resource's content could not be deleted.
    pub failures: Vec<String>,
    /// `<group>/<version>` → why its resources could not be discovered: its content is
    /// unknown, so the namespace is not let go (kube's `ErrGroupDiscoveryFailed`).
    pub discovery_failures: BTreeMap<String, String>,
}

impl ContentTotals {
    /// Counts one object that is still there after its deletion was asked for.
    pub fn count_remaining(&mut self, resource: &str, group: &str, object: &Value) {
        *self
            .remaining
            .entry(format!("{resource}.{group}"))
            .or_default() += 1;
        let finalizers = object
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        for finalizer in finalizers {
            *self.finalizers.entry(finalizer.to_string()).or_default() += 1;
        }
    }
}

/// The conditions kube's namespace controller keeps on a terminating namespace, in its order,
/// with the reason and message each has when nothing is wrong (`status_condition_utils.go`).
const DELETION_CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
];

impl ContentTotals {
    /// The five deletion conditions this pass calls for, as kube's `namespaceConditionUpdater`
    /// words them.
    fn conditions(&self) -> Vec<Condition> {
        DELETION_CONDITIONS
            .iter()
            .map(|&(type_, ok_reason, ok_message)| {
                let problem = match type_ {
                    "NamespaceDeletionDiscoveryFailure" if !self.discovery_failures.is_empty() => {
                        // client-go's `ErrGroupDiscoveryFailed`, as the controller words it.
                        let groups: Vec<String> = self
                            .discovery_failures
                            .iter()
                            .map(|(gv, why)| format!("{gv}: {why}"))
                            .collect();
                        Some((
                            "DiscoveryFailed",
                            format!(
                                "Discovery failed for some groups, {} failing: unable to retrieve the complete list of server APIs: {}",
                                groups.len(),
                                groups.join(", ")
                            ),
                        ))
                    }
                    "NamespaceDeletionContentFailure" if !self.failures.is_empty() => {
                        let mut failures = self.failures.clone();
                        failures.sort();
                        Some((
                            "ContentDeletionFailed",
                            format!(
                                "Failed to delete all resource types, {} remaining: {}",
                                failures.len(),
                                failures.join(", ")
                            ),
                        ))
                    }
                    "NamespaceContentRemaining" if !self.remaining.is_empty() => Some((
                        "SomeResourcesRemain",
                        format!(
                            "Some resources are remaining: {}",
                            joined(&self.remaining, "has", "resource instances")
                        ),
                    )),
                    "NamespaceFinalizersRemaining" if !self.finalizers.is_empty() => Some((
                        "SomeFinalizersRemain",
                        format!(
                            "Some content in the namespace has finalizers remaining: {}",
                            joined(&self.finalizers, "in", "resource instances")
                        ),
                    )),
                    _ => None,
                };
                match problem {
                    Some((reason, message)) => Condition::new(type_, "True", reason, &message),
                    None => Condition::new(type_, "False", ok_reason, ok_message),
                }
            })
            .collect()
    }
}

/// `"<key> <verb> <n> <noun>"` for every count, sorted as kube sorts the rendered strings.
fn joined(counts: &BTreeMap<String, usize>, verb: &str, noun: &str) -> String {
    let mut parts: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(key, n)| format!("{key} {verb} {n} {noun}"))
        .collect();
    parts.sort();
    parts.join(", ")
}

impl Registry {
    /// Deletes every object of `def` in `namespace`, counting those that stay (and their
    /// finalizers) in `content`.
    async fn delete_namespace_content(
        &self,
        def: &ResourceDef,
        namespace: &str,
        content: &mut ContentTotals,
    ) -> ApiResult<()> {
        let (items, _) = self
            .cacher
            .list(&def.collection_prefix(namespace), None, None)
            .map_err(super::store_error)?;
        for item in items {
            let object: Value = serde_json::from_slice(&item.bytes).map_err(ApiError::internal)?;
            let object_name = super::object_name(&object).to_string();
            match self
                .delete_object(def, namespace, &object_name, &DeleteOptions::default())
                .await
            {
                Ok((_, _, true)) => {}
                Ok((_, left, false)) => content.count_remaining(&def.plural, &def.group, &left),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes the namespace's deletion conditions when this pass changes them (kube updates
    /// the status only then).
    async fn record_deletion_conditions(
        &self,
        ns_def: &ResourceDef,
        name: &str,
        content: &ContentTotals,
    ) -> ApiResult<()> {
        let conditions = content.conditions();
        let now = now_rfc3339();
        let changed = |namespace: &Value| {
            let mut next = namespace.clone();
            let mut changed = false;
            for condition in &conditions {
                changed |= set_condition(&mut next, condition, &now);
            }
            changed.then_some(next)
        };
        let Some(cached) = self.cacher.get(&ns_def.key("", name)) else {
            return Ok(());
        };
        let current: Value = super::client_value(ns_def, &cached.bytes)?;
        if changed(&current).is_none() {
            return Ok(());
        }
        let written = self
            .update_object(
                ns_def,
                "",
                name,
                "status",
                WriteMode::default(),
                |current| Ok(changed(current).unwrap_or_else(|| current.clone())),
            )
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

//! Namespace lifecycle: the default namespaces created at start, and the namespace
//! controller's work for a namespace being deleted (delete everything in it, then remove the
//! `kubernetes` finalizer so the namespace itself goes), as kube-controller-manager's
//! namespace controller does.

use serde_json::{json, Value};

use super::meta::meta_field;
use super::write::{DeleteOptions, WriteMode};
use super::Registry;
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
    /// (each resource stored once, whatever versions serve it) and, when nothing remains,
    /// removes the `kubernetes` finalizer so the namespace is deleted.
    pub async fn finalize_namespace(&self, name: &str) -> ApiResult<FinalizeOutcome> {
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
        let mut remaining = 0;
        let mut seen_prefixes = std::collections::HashSet::new();
        for def in self.resources().iter() {
            if !def.namespaced || !seen_prefixes.insert(def.storage_prefix.clone()) {
                continue;
            }
            let (items, _) = self
                .cacher
                .list(&def.collection_prefix(name), None, None)
                .map_err(super::store_error)?;
            for item in items {
                let object: Value =
                    serde_json::from_slice(&item.bytes).map_err(ApiError::internal)?;
                let object_name = super::object_name(&object).to_string();
                match self
                    .delete_object(def, name, &object_name, &DeleteOptions::default())
                    .await
                {
                    Ok((_, _, true)) => {}
                    Ok((_, _, false)) => remaining += 1,
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
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

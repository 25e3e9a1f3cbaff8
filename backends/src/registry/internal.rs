//! Writes kubegate makes on its own behalf (controllers, start-up reconciliation): the same
//! metadata rules, strategy and validation as a client's write, without a requester, so no
//! write admission and no request decoding. Each is recorded in `managedFields` under the
//! field manager kube's component for the same job uses (see [`manager`]), so server-side
//! apply conflicts and `--show-managed-fields` read as they do against kube-apiserver.

use serde_json::Value;

use super::apply::Tracker;
use super::write::{DeleteOptions, WriteMode};
use super::Registry;
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};

/// The field managers of kubegate's own writes, named after kube's components for the job.
pub mod manager {
    /// kube-apiserver's own controllers and start-up hooks (its loopback client's
    /// User-Agent, `kube-apiserver/<version> ...`, cut at the `/`).
    pub const KUBE_APISERVER: &str = "kube-apiserver";
    /// kube's APF bootstrap ensurer (`pkg/registry/flowcontrol/ensurer`).
    pub const APF_CONFIG_PRODUCER: &str = "api-priority-and-fairness-config-producer-v1";
    /// kube's APF configuration controller, which applies the `Dangling` condition.
    pub const APF_CONFIG_CONSUMER: &str = "api-priority-and-fairness-config-consumer-v1";
    /// kube-controller-manager's controller that fills in aggregated ClusterRoles' rules.
    pub const CLUSTER_ROLE_AGGREGATION: &str = "clusterrole-aggregation-controller";
    /// kube-controller-manager's controllers (their client's User-Agent cut at the `/`): the
    /// ServiceAccount, token and root-CA controllers.
    pub const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
    /// What kubegate does that kube has no component for (registering a delegate's groups).
    pub const KUBEGATE: &str = "kubegate";
}

fn internal_write(tracker: &Tracker) -> WriteMode<'_> {
    WriteMode {
        tracker: Some(tracker),
        ..WriteMode::default()
    }
}

impl Registry {
    /// Creates `object` (typed, with its namespace in metadata) as `manager`; returns it as
    /// stored.
    pub async fn create_internal(
        &self,
        def: &ResourceDef,
        object: Value,
        manager: &str,
    ) -> ApiResult<Value> {
        let tracker = Tracker::new(def, "", manager.to_string());
        Ok(self
            .create_object(def, object, internal_write(&tracker))
            .await?
            .object)
    }

    /// Replaces the object `namespace/name` with what `mutate` makes of the current one,
    /// retrying on conflicts unless the new object names a resourceVersion (then a stale one
    /// is a 409). Returns the object as stored.
    pub async fn update_internal<F>(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        manager: &str,
        mutate: F,
    ) -> ApiResult<Value>
    where
        F: Fn(&Value) -> ApiResult<Value>,
    {
        let tracker = Tracker::new(def, "", manager.to_string());
        Ok(self
            .update_object(def, namespace, name, "", internal_write(&tracker), mutate)
            .await?
            .object)
    }

    /// Replaces the `status` of `namespace/name` through the status subresource's rules
    /// (the spec is kept), with what `mutate` makes of the current object.
    pub async fn update_status_internal<F>(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        manager: &str,
        mutate: F,
    ) -> ApiResult<Value>
    where
        F: Fn(&Value) -> ApiResult<Value>,
    {
        let tracker = Tracker::new(def, "status", manager.to_string());
        let mode = internal_write(&tracker);
        Ok(self
            .update_object(def, namespace, name, "status", mode, mutate)
            .await?
            .object)
    }

    /// Server-side applies `config` to the existing object `namespace/name` (its
    /// `subresource`: `""` or `"status"`) as `manager` with `force`, as kube's controllers
    /// do with `Apply(..., Force: true)`: the manager then owns exactly the fields `config`
    /// sets, taken over from whoever had them. 404 when the object is missing.
    pub async fn apply_internal(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        subresource: &str,
        manager: &str,
        config: &Value,
    ) -> ApiResult<Value> {
        let tracker = Tracker::new(def, subresource, manager.to_string());
        let mode = WriteMode::default();
        let written = self
            .update_object(def, namespace, name, subresource, mode, |current| {
                tracker.apply_to_live(current, config, true)
            })
            .await?;
        Ok(written.object)
    }

    /// Deletes `namespace/name` (or marks it deleting when it has finalizers).
    pub async fn delete_internal(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> ApiResult<()> {
        self.delete_object(def, namespace, name, &DeleteOptions::default())
            .await
            .map(|_| ())
    }

    /// Deletes `namespace/name` only if it is still at `resource_version` (409 Conflict when it
    /// was written since, 404 when it is gone), as a DELETE with that precondition does.
    pub async fn delete_internal_at(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> ApiResult<()> {
        let options = DeleteOptions {
            precondition_resource_version: Some(resource_version.to_string()),
            ..DeleteOptions::default()
        };
        self.delete_object(def, namespace, name, &options)
            .await
            .map(|_| ())
    }

    /// Every stored object of `def` (all namespaces), from the watch cache once it has caught
    /// up with the store, with the cache revision they were read at.
    pub async fn list_internal(&self, def: &ResourceDef) -> ApiResult<(Vec<Value>, u64)> {
        self.sync_cache().await?;
        let prefix = def.collection_prefix("");
        let (items, revision) = self
            .cacher()
            .list(&prefix, None, None)
            .map_err(super::store_error)?;
        super::convert::prepare(def, &items).await?;
        let mut objects = Vec::with_capacity(items.len());
        for item in items {
            let bytes = super::served_bytes(def, &item)?;
            objects.push(serde_json::from_slice(&bytes).map_err(ApiError::internal)?);
        }
        Ok((objects, revision))
    }
}

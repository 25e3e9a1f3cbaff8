//! Writes kubegate makes on its own behalf (controllers, start-up reconciliation): the same
//! metadata rules, strategy and validation as a client's write, without a requester, so no
//! write admission and no request decoding.

use serde_json::Value;

use super::write::{DeleteOptions, WriteMode};
use super::Registry;
use crate::resource::ResourceDef;
use crate::status::ApiResult;

impl Registry {
    /// Creates `object` (typed, with its namespace in metadata); returns it as stored.
    pub async fn create_internal(&self, def: &ResourceDef, object: Value) -> ApiResult<Value> {
        Ok(self
            .create_object(def, object, WriteMode::default())
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
        mutate: F,
    ) -> ApiResult<Value>
    where
        F: Fn(&Value) -> ApiResult<Value>,
    {
        Ok(self
            .update_object(def, namespace, name, "", WriteMode::default(), mutate)
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
        mutate: F,
    ) -> ApiResult<Value>
    where
        F: Fn(&Value) -> ApiResult<Value>,
    {
        Ok(self
            .update_object(def, namespace, name, "status", WriteMode::default(), mutate)
            .await?
            .object)
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
        let mut objects = Vec::with_capacity(items.len());
        for item in items {
            objects.push(super::client_value(def, &item.bytes)?);
        }
        Ok((objects, revision))
    }
}

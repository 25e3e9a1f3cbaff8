//! Read access to stored objects for authenticators that depend on them (bootstrap-token
//! Secrets, ServiceAccounts and the objects tokens are bound to). The policy crate never
//! reads storage itself: the gateway hands it an implementation backed by the watch cache.

/// Looks up the current state of one stored object, synchronously (from memory).
pub trait ObjectLookup: Send + Sync {
    /// The object of `resource` in `group` (`""` for core) named `name` in `namespace`
    /// (empty for cluster-scoped), as JSON; `None` when it does not exist.
    fn get(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<serde_json::Value>;
}

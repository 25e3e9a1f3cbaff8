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

    /// kube's legacy token tracking: a legacy Secret-based token of the Secret
    /// `namespace/secret` (uid `uid`) authenticated on `today` (`YYYY-MM-DD`, UTC) and the
    /// Secret's `kubernetes.io/legacy-token-last-used` label says otherwise. The label is set
    /// in the background (a write; authentication does not wait for it). Readers that cannot
    /// write ignore it.
    fn legacy_token_used(&self, _namespace: &str, _secret: &str, _uid: &str, _today: &str) {}
}

//! Storage: one trait ([`Store`]) over a revisioned key-value space with keys
//! `/<group>/<resource>/<namespace>/<name>` (kube-apiserver's etcd keys are shaped alike but
//! leave the group out for most built-in resources), with two engines
//! ([`embedded`]: one local file; [`etcd`]: an etcd v3 cluster that several replicas share)
//! and a watch cache ([`cacher::Cacher`]) above either that serves GET, LIST and WATCH from
//! memory. `conformance` (tests only) holds the suite both engines pass.
//!
//! Every write gets a cluster-wide increasing revision, which becomes the object's
//! `metadata.resourceVersion`. Values are the serialized objects (JSON bytes).

pub mod cacher;
#[cfg(test)]
pub(crate) mod conformance;
pub mod embedded;
pub mod etcd;
mod render;

use bytes::Bytes;

/// A store revision (`resourceVersion`).
pub type Revision = u64;

/// A stored key with its value and revisions (etcd's `mvccpb.KeyValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created the key.
    pub create_revision: Revision,
    /// Revision of the last write to the key.
    pub mod_revision: Revision,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Created,
    Modified,
    Deleted,
}

/// One change, in revision order. Deletes carry the last value in `prev_value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEvent {
    pub kind: EventKind,
    pub key: String,
    /// The value after the change (empty for deletes).
    pub value: Bytes,
    /// The value before the change (None for creates).
    pub prev_value: Option<Bytes>,
    /// The revision of this change.
    pub revision: Revision,
}

/// A page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResult {
    pub items: Vec<KeyValue>,
    /// The revision the list was read at.
    pub revision: Revision,
    /// Whether keys remain after the last returned one.
    pub more: bool,
}

/// Storage failures. Each maps to one API status in the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("key {0} not found")]
    NotFound(String),
    #[error("key {0} already exists")]
    AlreadyExists(String),
    /// A compare-and-swap failed: the key's current `mod_revision` differs.
    #[error("key {key} changed: expected revision {expected}, found {actual}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    /// The requested revision is older than the retained history.
    #[error("required revision {requested} has been compacted (oldest available {oldest})")]
    Compacted {
        requested: Revision,
        oldest: Revision,
    },
    /// The requested revision is newer than anything stored.
    #[error("required revision {requested} is a future revision (current {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The write is larger than the store takes (etcd's `--max-request-bytes`): etcd's own
    /// message, which kube answers as it is.
    #[error("{0}")]
    TooLarge(String),
    #[error("storage error: {0}")]
    Internal(String),
}

/// Receives events from [`Store::watch`] in revision order. The channel closes when the
/// store stops; an `Err` item (e.g. [`StoreError::Compacted`]) is the last one sent.
pub type WatchReceiver = tokio::sync::mpsc::Receiver<Result<StoreEvent, StoreError>>;

/// A revisioned key-value store (the contract both engines implement).
///
/// Writes are atomic and durable when they return. Revisions increase by one per write across
/// the whole store.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reads one key at the current revision.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError>;

    /// Lists keys starting with `prefix`, in key order, after `start_after` (exclusive) when
    /// given, at most `limit` (0 = no limit). (Listing everything, `""` or `/`, the etcd
    /// engine goes in the order of kube's layout there; passing the last key returned as
    /// `start_after` still continues where the page ended.) `at_revision` asks for a consistent read at an
    /// older revision; engines without history answer [`StoreError::Compacted`] for any
    /// revision but the current one.
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at_revision: Option<Revision>,
    ) -> Result<ListResult, StoreError>;

    /// Creates `key`; fails with [`StoreError::AlreadyExists`] if it exists.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError>;

    /// Replaces `key` if its `mod_revision` is `expected_revision` (compare-and-swap).
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_revision: Revision,
    ) -> Result<Revision, StoreError>;

    /// Deletes `key`, if given only when its `mod_revision` is `expected_revision`. Returns the
    /// deletion's revision and the deleted value.
    async fn delete(
        &self,
        key: &str,
        expected_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError>;

    /// Streams every change under `prefix` with a revision greater than `after_revision`,
    /// first the retained history, then live. [`StoreError::Compacted`] if history no longer
    /// reaches back that far.
    async fn watch(
        &self,
        prefix: &str,
        after_revision: Revision,
    ) -> Result<WatchReceiver, StoreError>;

    /// The revision of the last write.
    async fn current_revision(&self) -> Result<Revision, StoreError>;

    /// Flushes and stops background work; called on graceful shutdown.
    async fn close(&self) {}

    /// Whether [`Store::close`] has been called: a failure after it is the shutdown, not an
    /// outage to recover from (the watch cache stops quietly instead of resynchronizing).
    fn is_closed(&self) -> bool {
        false
    }

    /// `key` as the engine's own tools name it, for messages (etcd: under the prefix, where
    /// kube's layout keeps it, as kube's storage errors name it).
    fn describe_key(&self, key: &str) -> String {
        key.to_string()
    }
}

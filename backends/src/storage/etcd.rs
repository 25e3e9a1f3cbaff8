//! The etcd v3 storage engine: a [`Store`] on an etcd cluster, laid out and used the way
//! kube-apiserver's `storage/etcd3` store does, so several kubegate replicas can share one
//! cluster.
//!
//! - Keys: under [`EtcdOptions::prefix`] (default `/registry`) in kube-apiserver's layout
//!   (the `layout` module): `/registry/configmaps/<namespace>/<name>`,
//!   `/registry/services/specs/...`, `/registry/clusterroles/<name>`, custom resources as
//!   `/registry/<group>/<resource>/...`. Values are JSON (kube writes protobuf for built-in
//!   types), so give kubegate a prefix of its own on an etcd that also serves a
//!   kube-apiserver. Store keys start with `/`; keys an earlier kubegate stored under their
//!   store names are moved into this layout on connect.
//! - Revisions: etcd's cluster-wide revision is the [`Revision`] (`resourceVersion`).
//! - Writes are single transactions: create compares `create_revision == 0`, update and
//!   delete compare `mod_revision == expected` (and that the key exists); a failed compare
//!   reads the key in the same transaction to tell `NotFound` from `Conflict`.
//! - Lists page through etcd at one revision (the first page's, or the requested one), so a
//!   list is a consistent snapshot however many round trips it takes.
//! - Watches run from a revision with `prev_kv` (deletes carry the last value); a compacted
//!   start revision is [`StoreError::Compacted`], any stream failure ends the stream with an
//!   error (the watch cache then re-watches or re-lists).
//! - [`Store::current_revision`] is the last write under the prefix, not etcd's global
//!   revision (see the `progress` module): writes elsewhere in the cluster must not make the watch
//!   cache wait for events it will never get. Concurrent callers share fetches without losing
//!   linearizability (see the `single_flight` module): each gets a revision read after it
//!   asked, and one etcd round trip answers every caller that arrived during the previous one.
//! - Requests are bounded by [`EtcdOptions::request_timeout`] and retried on another member
//!   when one cannot be reached (writes only when they cannot have been sent).
//! - Keys under [`EtcdOptions::expiring_prefixes`] (Events, for `--event-ttl`) get an etcd
//!   lease on every write, so etcd deletes them TTL after their last write, as it does for
//!   kube-apiserver (see the `lease` module). Such keys stored without one (by an older
//!   kubegate, or `kubegate migrate`) are given one in the background at connect.
//! - A background compactor (the `compactor` module) compacts history every
//!   [`EtcdOptions::compaction_interval`] to the revision seen one interval earlier,
//!   coordinated between replicas (and kube-apiservers) through etcd's `compact_rev_key`.
//!
//! Use [`connect`] with [`EtcdOptions`] (from the `storage.etcd` configuration).

mod compactor;
mod layout;
mod lease;
mod members;
mod progress;
mod single_flight;
#[cfg(test)]
mod tests;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Certificate, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Identity,
    PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use kubegate_config::EtcdConfig;
use tokio::sync::watch as signal;

use super::{KeyValue, ListResult, Revision, Store, StoreError, WatchReceiver};
pub use lease::ExpiringPrefix;
use members::{Member, Members, WentDown};

/// An etcd key range `[start, end)`.
type KeyRange = (Vec<u8>, Vec<u8>);

/// Keys read per range request while listing (the list stays one consistent snapshot).
const LIST_PAGE: i64 = 1000;
/// Largest gRPC message accepted from etcd (kube-apiserver uses `math.MaxInt32` too): a page
/// of large objects must not fail on the client's default 4 MiB limit.
const MAX_RECV_MESSAGE: usize = i32::MAX as usize;
/// gRPC keepalive towards etcd (kube-apiserver's `keepaliveTime` and `keepaliveTimeout`), so
/// a dead member is noticed and watches on it end.
const KEEPALIVE_TIME: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// First and longest pause before retrying a request on another member.
const RETRY_BACKOFF: Duration = Duration::from_millis(10);
const MAX_RETRY_BACKOFF: Duration = Duration::from_millis(250);
/// How long to wait for etcd to report the compaction revision after a compacted read.
const COMPACTION_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How to reach etcd and lay out keys in it.
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdOptions {
    /// Client URLs of the members (`http://host:port` or `https://host:port`); requests go
    /// to members that answer.
    pub endpoints: Vec<String>,
    /// CA bundle (PEM) that verifies the members' serving certificates.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) presented to etcd, with `key_file`.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Prefix of every key (a trailing `/` is ignored).
    pub prefix: String,
    /// Compaction period; zero disables the compactor.
    pub compaction_interval: Duration,
    /// Time allowed to open a connection to a member.
    pub dial_timeout: Duration,
    /// Time allowed for one request (a list page, a write, opening a watch), including
    /// waiting for a reachable member; past it the caller gets [`StoreError::Unavailable`].
    pub request_timeout: Duration,
    /// Store-key prefixes whose keys etcd deletes a TTL after their last write (through
    /// leases, kube's `TTLFunc`); kubegate puts Events here with `--event-ttl`.
    pub expiring_prefixes: Vec<ExpiringPrefix>,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            endpoints: Vec::new(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            prefix: kubegate_config::DEFAULT_ETCD_PREFIX.into(),
            compaction_interval: Duration::from_secs(300),
            dial_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(15),
            expiring_prefixes: Vec::new(),
        }
    }
}

impl EtcdOptions {
    /// Options for these endpoints with every other setting at its default.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> Self {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..EtcdOptions::default()
        }
    }
}

impl From<&EtcdConfig> for EtcdOptions {
    fn from(config: &EtcdConfig) -> Self {
        EtcdOptions {
            endpoints: config.endpoints.clone(),
            ca_file: config.ca_file.clone(),
            cert_file: config.cert_file.clone(),
            key_file: config.key_file.clone(),
            prefix: config.prefix.clone(),
            compaction_interval: config.compaction_interval,
            dial_timeout: config.dial_timeout,
            request_timeout: config.request_timeout,
            expiring_prefixes: Vec::new(),
        }
    }
}

/// The etcd [`Store`].
pub struct EtcdStore {
    /// A client per member, and which members answer (see the `members` module).
    members: Arc<Members>,
    /// The key prefix without a trailing `/`; every stored key is `root + store key`.
    root: String,
    endpoints: String,
    request_timeout: Duration,
    closed: AtomicBool,
    /// The last write under the prefix (see the `progress` module).
    progress: Arc<progress::Progress>,
    /// Shares reads of the current revision between concurrent callers.
    revisions: single_flight::SingleFlight,
    /// Set to `true` by [`Store::close`]; the compactor and watch forwarders stop on it (or
    /// when the store is dropped and the sender goes away).
    shutdown: signal::Sender<bool>,
    compactor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Leases for writes under the expiring prefixes.
    leases: lease::Leases,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.root)
            .finish()
    }
}

fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|e| {
        StoreError::Unavailable(format!("reading etcd {what} {}: {e}", path.display()))
    })
}

/// The TLS settings for https endpoints: the CA and, when given, the client certificate.
fn tls_options(options: &EtcdOptions) -> Result<Option<TlsOptions>, StoreError> {
    let https = options.endpoints.iter().any(|e| e.starts_with("https://"));
    if !https {
        if options.ca_file.is_some() || options.cert_file.is_some() {
            return Err(StoreError::Unavailable(
                "etcd TLS files are set but no endpoint is https://".into(),
            ));
        }
        return Ok(None);
    }
    let ca = options.ca_file.as_deref().ok_or_else(|| {
        StoreError::Unavailable(
            "https etcd endpoints need a CA file (--etcd-cafile / storage.etcd.caFile)".into(),
        )
    })?;
    let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(read_pem(ca, "CA")?));
    match (&options.cert_file, &options.key_file) {
        (Some(cert), Some(key)) => {
            tls = tls.identity(Identity::from_pem(
                read_pem(cert, "client certificate")?,
                read_pem(key, "client key")?,
            ));
        }
        (None, None) => {}
        _ => {
            return Err(StoreError::Unavailable(
                "the etcd client certificate and key must be given together".into(),
            ))
        }
    }
    Ok(Some(tls))
}

/// Connects to etcd, checks that it answers, and starts the compactor (when enabled).
///
/// Fails with [`StoreError::Unavailable`] (saying which endpoints and why) when the TLS files
/// cannot be read or no member answers within [`EtcdOptions::request_timeout`].
pub async fn connect(options: &EtcdOptions) -> Result<Arc<EtcdStore>, StoreError> {
    if options.endpoints.is_empty() {
        return Err(StoreError::Unavailable(
            "no etcd endpoints configured (--etcd-servers)".into(),
        ));
    }
    let endpoints = options.endpoints.join(",");
    let mut connect = ConnectOptions::new()
        .with_connect_timeout(options.dial_timeout)
        .with_keep_alive(KEEPALIVE_TIME, KEEPALIVE_TIMEOUT)
        // Like kube-apiserver: a member cut off from the leader fails requests and watches
        // instead of serving stale data forever.
        .with_require_leader(true);
    if let Some(tls) = tls_options(options)? {
        connect = connect.with_tls(tls);
    }
    let members = Members::connect(&options.endpoints, &connect, MAX_RECV_MESSAGE)
        .await
        .map_err(|e| StoreError::Unavailable(format!("etcd client for {endpoints}: {e}")))?;
    let members = Arc::new(members);
    let (shutdown, shutdown_rx) = signal::channel(false);
    let store = Arc::new_cyclic(|me: &Weak<EtcdStore>| EtcdStore {
        members: Arc::clone(&members),
        root: options.prefix.trim_end_matches('/').to_string(),
        endpoints,
        request_timeout: options.request_timeout,
        closed: AtomicBool::new(false),
        progress: progress::Progress::new(0),
        revisions: revision_fetch(me.clone()),
        shutdown,
        compactor: Mutex::new(None),
        leases: lease::Leases::new(options.expiring_prefixes.clone()),
    });
    // Fail fast on a wrong address, CA or certificate rather than at the first request.
    let revision = store.global_revision().await?;
    store.move_earlier_keys().await?;
    let revision = store.global_revision().await?.max(revision);
    store.progress.saw(Some(revision), revision);
    tokio::spawn(Arc::clone(&members).probe(store.root.as_bytes().to_vec(), shutdown_rx.clone()));
    if let Some((key, end)) = store.etcd_range("")? {
        tokio::spawn(progress::run(
            Arc::clone(&members),
            store.root.clone(),
            key,
            end,
            Arc::clone(&store.progress),
            shutdown_rx.clone(),
        ));
    }
    if !options.expiring_prefixes.is_empty() {
        // In the background: a large prefix must not hold up the start.
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.lease_unleased_keys().await });
    }
    if !options.compaction_interval.is_zero() {
        let handle = tokio::spawn(compactor::run(
            Arc::clone(&members),
            options.compaction_interval,
            shutdown_rx,
        ));
        *lock(&store.compactor) = Some(handle);
    }
    Ok(store)
}

/// The batched fetch of [`Store::current_revision`]. It holds the store weakly: fetches run
/// in their own task, which must not keep a dropped store alive.
fn revision_fetch(store: Weak<EtcdStore>) -> single_flight::SingleFlight {
    single_flight::SingleFlight::new(move || {
        let store = store.upgrade();
        Box::pin(async move {
            match store {
                Some(store) => store.fetch_current_revision().await,
                None => Err(StoreError::Unavailable("store is closed".into())),
            }
        })
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key just after every key starting with `prefix` (etcd's `range_end` for a prefix).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): everything from the key on.
    vec![0]
}

/// The smallest key after `key`.
fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// Whether `op` (an operation name as the store's methods pass it) writes: a write cut off
/// in flight may have been applied, so it is neither retried nor reported as not done.
/// (A compaction is repeatable, so it is not one.)
fn is_write(op: &str) -> bool {
    matches!(op, "create" | "update" | "delete")
}

/// Whether `e` says a member could not be reached. With `write`, only failures that happen
/// before the request is sent count (retrying anything else could apply a write twice).
fn is_unreachable(e: &etcd_client::Error, write: bool) -> bool {
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(s) => {
            let m = s.message();
            was_not_sent(m) || (!write && is_connection_failure(i32::from(s.code()), m))
        }
        _ => false,
    }
}

/// Whether an error message says the request never reached etcd's handling: no connection;
/// with `require_leader`, a member without a leader refusing it up front ("etcdserver: no
/// leader"); or a learner (a member being added) refusing what only voting members serve.
/// Such a write can safely go to another member.
fn was_not_sent(message: &str) -> bool {
    [
        "tcp connect error",
        "error trying to connect",
        "Connection refused",
        "connection refused",
        "etcdserver: no leader",
        "etcdserver: rpc not supported for learner",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// Whether `e` is the member itself failing (no connection, or the connection lost), as
/// opposed to etcd answering with an error such as "no leader": the member is then marked
/// down until it answers a probe.
fn is_member_failure(e: &etcd_client::Error) -> bool {
    let answered =
        matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().starts_with("etcdserver:"));
    !answered && is_unreachable(e, false)
}

/// Whether a status is the transport failing (a member went away) rather than etcd answering.
fn is_connection_failure(code: i32, message: &str) -> bool {
    code == grpc_code::UNAVAILABLE
        || ((code == grpc_code::UNKNOWN || code == grpc_code::INTERNAL)
            && [
                "h2 protocol error",
                "transport",
                "connection",
                "broken pipe",
                "tcp connect",
            ]
            .iter()
            .any(|m| message.contains(m)))
}

fn is_compacted(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().contains("required revision has been compacted"))
}

fn is_future_revision(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().contains("required revision is a future revision"))
}

/// The store key of an etcd key under `root` (mapped back from kube's layout, see the
/// `layout` module); `None` for an earlier kubegate's key that is being moved.
fn strip_root(root: &str, key: &[u8]) -> Result<Option<String>, StoreError> {
    let rest = key.strip_prefix(root.as_bytes()).ok_or_else(|| {
        StoreError::Internal(format!(
            "etcd returned key {:?} outside the prefix {root}",
            String::from_utf8_lossy(key),
        ))
    })?;
    let rest = std::str::from_utf8(rest).map_err(|_| {
        StoreError::Internal(format!(
            "etcd key {:?} is not UTF-8",
            String::from_utf8_lossy(key)
        ))
    })?;
    Ok(layout::from_etcd(rest).map(std::borrow::Cow::into_owned))
}

/// Maps a client error to the store's kinds, naming the operation and the endpoints.
fn map_error(endpoints: &str, op: &str, e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(status) => {
            let message = status.message();
            match i32::from(status.code()) {
                grpc_code::UNAVAILABLE | grpc_code::DEADLINE_EXCEEDED
                | grpc_code::CANCELLED | grpc_code::ABORTED => StoreError::Unavailable(format!(
                    "etcd {op} failed ({endpoints}): {message}{}",
                    // Unless it was refused before being handled, a write may have reached
                    // etcd ("request timed out" is etcd's own DEADLINE_EXCEEDED after
                    // proposing), as with a timeout.
                    if is_write(op) && !was_not_sent(message) {
                        " (the write may or may not have been applied)"
                    } else {
                        ""
                    }
                )),
                code if is_connection_failure(code, message) => StoreError::Unavailable(format!(
                    "etcd {op} failed: lost the connection to {endpoints}: {message}{}",
                    // A write cut off in flight may have reached etcd, as with a timeout.
                    if is_write(op) {
                        " (the write may or may not have been applied)"
                    } else {
                        ""
                    }
                )),
                grpc_code::RESOURCE_EXHAUSTED if message.contains("database space exceeded") => {
                    StoreError::Unavailable(format!(
                        "etcd {op} failed: {message}; etcd is out of space: compact and defragment it, then disarm the NOSPACE alarm"
                    ))
                }
                grpc_code::UNAUTHENTICATED | grpc_code::PERMISSION_DENIED => {
                    StoreError::Unavailable(format!(
                        "etcd {op} rejected kubegate's credentials ({}): {message}",
                        endpoints
                    ))
                }
                _ if message.contains("request is too large")
                    || message.contains("message larger than max") =>
                {
                    StoreError::TooLarge(message.to_string())
                }
                _ if message.contains("no leader") || message.contains("leader changed") => {
                    StoreError::Unavailable(format!("etcd {op} failed: {message}"))
                }
                _ => StoreError::Internal(format!("etcd {op} failed: {message}")),
            }
        }
        E::TransportError(e) => {
            StoreError::Unavailable(format!("etcd {op} failed: cannot reach {}: {e}", endpoints))
        }
        E::IoError(e) => {
            StoreError::Unavailable(format!("etcd {op} failed: cannot reach {}: {e}", endpoints))
        }
        other => StoreError::Internal(format!("etcd {op} failed: {other}")),
    }
}

/// The store's key-value for `kv`, whose store key is `key`.
fn with_key(key: String, kv: etcd_client::KeyValue) -> KeyValue {
    let create_revision = from_rev(kv.create_revision());
    let mod_revision = from_rev(kv.mod_revision());
    KeyValue {
        key,
        value: Bytes::from(kv.into_key_value().1),
        create_revision,
        mod_revision,
    }
}

fn to_rev(r: Revision) -> i64 {
    i64::try_from(r).unwrap_or(i64::MAX)
}

fn from_rev(r: i64) -> Revision {
    Revision::try_from(r).unwrap_or(0)
}

impl EtcdStore {
    /// The etcd key of a store key.
    fn etcd_key(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        if !key.starts_with('/') {
            return Err(StoreError::Internal(format!(
                "storage key {key:?} must start with /"
            )));
        }
        Ok(self.raw_key(&layout::to_etcd(key)?))
    }

    /// The etcd key to resume a list after: `key`'s place in kube's layout, or `key` itself
    /// when it has none (a continue key from outside the listed prefix).
    fn resume_key(&self, key: &str) -> Vec<u8> {
        match layout::to_etcd(key) {
            Ok(mapped) => self.raw_key(&mapped),
            Err(_) => self.raw_key(key),
        }
    }

    /// `root + key`, unchecked (`key` is already in etcd's layout).
    fn raw_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.root.len() + key.len());
        k.extend_from_slice(self.root.as_bytes());
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The etcd range `[start, end)` holding the store keys that start with `prefix`, or
    /// `None` when no store key can (store keys start with `/`). A prefix that spans several
    /// of kube's directories is refused (see the `layout` module).
    fn etcd_range(&self, prefix: &str) -> Result<Option<KeyRange>, StoreError> {
        if !prefix.is_empty() && !prefix.starts_with('/') {
            return Ok(None);
        }
        let start = self.raw_key(&layout::range_prefix(prefix)?);
        let end = prefix_end(&start);
        Ok(Some((start, end)))
    }

    /// The store key of an etcd key under the root (`None`: see [`strip_root`]).
    fn store_key(&self, key: &[u8]) -> Result<Option<String>, StoreError> {
        strip_root(&self.root, key)
    }

    /// The store's form of an etcd key-value; `None` for a key that is no store key.
    fn key_value(&self, kv: etcd_client::KeyValue) -> Result<Option<KeyValue>, StoreError> {
        Ok(self.store_key(kv.key())?.map(|key| with_key(key, kv)))
    }

    /// [`EtcdStore::key_value`] of a key read by its store key, which always maps back.
    fn read_key_value(&self, kv: etcd_client::KeyValue) -> Result<KeyValue, StoreError> {
        match self.store_key(kv.key())? {
            Some(key) => Ok(with_key(key, kv)),
            None => Err(StoreError::Internal(format!(
                "etcd key {:?} read for a store key maps to none",
                String::from_utf8_lossy(kv.key())
            ))),
        }
    }

    /// Maps a client error to the store's kinds, naming the operation and the endpoints.
    fn error(&self, op: &str, e: etcd_client::Error) -> StoreError {
        map_error(&self.endpoints, op, e)
    }

    /// Runs one request with the request timeout, retrying on another member while the time
    /// lasts when a member cannot be reached or stops answering (see the `members` module).
    /// Reads are retried on any such failure; writes only when they cannot have been sent,
    /// and a write whose member stops answering fails at once, saying it may have applied.
    async fn call<T, F, Fut>(
        &self,
        op: &str,
        attempt: F,
    ) -> Result<Result<T, etcd_client::Error>, StoreError>
    where
        F: FnMut(&Member) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        Ok(self.call_on_member(op, attempt).await?.0)
    }

    /// [`EtcdStore::call`], also returning the member that answered and what completes when
    /// it stops answering (a watch stays on it, and ends then).
    async fn call_on_member<T, F, Fut>(
        &self,
        op: &str,
        mut attempt: F,
    ) -> Result<(Result<T, etcd_client::Error>, Arc<Member>, WentDown), StoreError>
    where
        F: FnMut(&Member) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let write = is_write(op);
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let mut backoff = RETRY_BACKOFF;
        loop {
            let (member, mut went_down) = self.members.pick();
            let result = tokio::select! {
                result = tokio::time::timeout_at(deadline, attempt(&member)) => {
                    result.map_err(|_| self.timeout_error(op))?
                }
                () = &mut went_down => {
                    if write {
                        return Err(StoreError::Unavailable(format!(
                            "etcd {op} failed: member {} stopped answering while the request was in flight (the write may or may not have been applied)",
                            member.endpoint
                        )));
                    }
                    tracing::debug!(op, member = %member.endpoint, "etcd member stopped answering; retrying on another");
                    continue;
                }
            };
            if let Err(e) = &result {
                if is_member_failure(e) {
                    member.mark_down(&e.to_string());
                }
                if is_unreachable(e, write) && tokio::time::Instant::now() + backoff < deadline {
                    tracing::debug!(op, member = %member.endpoint, error = %e, "etcd member unreachable; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_RETRY_BACKOFF);
                    continue;
                }
            }
            return Ok((result, member, went_down));
        }
    }

    /// Runs one step of a stream (no retry) with the request timeout.
    async fn timed<T>(
        &self,
        op: &str,
        fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<Result<T, etcd_client::Error>, StoreError> {
        tokio::time::timeout(self.request_timeout, fut)
            .await
            .map_err(|_| self.timeout_error(op))
    }

    fn timeout_error(&self, op: &str) -> StoreError {
        let outcome = if is_write(op) {
            " (the write may or may not have been applied)"
        } else {
            ""
        };
        StoreError::Unavailable(format!(
            "etcd {op} timed out after {:?}{outcome}: no answer from {}",
            self.request_timeout, self.endpoints
        ))
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            Err(StoreError::Unavailable("store is closed".into()))
        } else {
            Ok(())
        }
    }

    /// The revision etcd's history was compacted to, learnt from a watch that starts before
    /// it (etcd answers such a watch with its compaction revision). Only meaningful after a
    /// read failed as compacted; `None` if etcd does not say in time.
    async fn compacted_revision(&self) -> Option<Revision> {
        let probe = async {
            // The root key itself is never written (store keys add `/...`), so the watch
            // sees no events, only the compaction notice.
            let mut stream = self
                .call("watch", |member| {
                    let mut client = member.watch();
                    let key = self.root.as_bytes().to_vec();
                    async move {
                        client
                            .watch(key, Some(WatchOptions::new().with_start_revision(1)))
                            .await
                    }
                })
                .await
                .ok()?
                .ok()?;
            loop {
                let resp = stream.message().await.ok()??;
                if resp.compact_revision() > 0 {
                    return Some(from_rev(resp.compact_revision()));
                }
                if resp.canceled() {
                    return None;
                }
            }
        };
        tokio::time::timeout(COMPACTION_PROBE_TIMEOUT, probe)
            .await
            .ok()
            .flatten()
    }

    /// The error for a read at `requested` that etcd refused as compacted.
    async fn compacted(&self, requested: Revision) -> StoreError {
        let oldest = self
            .compacted_revision()
            .await
            .unwrap_or(requested.saturating_add(1));
        StoreError::Compacted { requested, oldest }
    }

    /// Compacts etcd's history up to `revision` (older revisions can no longer be read or
    /// watched from). The background compactor does this periodically; this is for tools
    /// and tests.
    pub async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        match self
            .call("compact", |member| {
                let mut kv = member.kv();
                async move { kv.compact(to_rev(revision), None).await }
            })
            .await?
        {
            Ok(_) => Ok(()),
            Err(e) if is_compacted(&e) => Ok(()),
            Err(e) if is_future_revision(&e) => Err(StoreError::FutureRevision {
                requested: revision,
                current: self.current_revision().await?,
            }),
            Err(e) => Err(self.error("compact", e)),
        }
    }

    /// Each member's endpoint and whether it answers (its last probe passed), in the
    /// configured order.
    pub fn member_health(&self) -> Vec<(String, bool)> {
        self.members.health()
    }

    /// The key prefix in etcd (without a trailing `/`).
    pub fn prefix(&self) -> &str {
        &self.root
    }

    /// Reads one page of `[from, end)` at `revision` (the current one when `None`).
    async fn range_page(
        &self,
        from: Vec<u8>,
        end: &[u8],
        limit: i64,
        revision: Option<Revision>,
    ) -> Result<etcd_client::GetResponse, StoreError> {
        let mut options = GetOptions::new().with_range(end.to_vec()).with_limit(limit);
        if let Some(r) = revision {
            options = options.with_revision(to_rev(r));
        }
        let op = "list";
        match self
            .call(op, |member| {
                let (mut kv, from, options) = (member.kv(), from.clone(), options.clone());
                async move { kv.get(from, Some(options)).await }
            })
            .await?
        {
            Ok(resp) => Ok(resp),
            Err(e) if is_compacted(&e) => Err(self.compacted(revision.unwrap_or(0)).await),
            Err(e) if is_future_revision(&e) => Err(StoreError::FutureRevision {
                requested: revision.unwrap_or(0),
                current: self.current_revision().await?,
            }),
            Err(e) => Err(self.error("list", e)),
        }
    }
}

/// Whether a failed transaction's else branch (a get of the key) found the key.
fn still_there(resp: &etcd_client::TxnResponse) -> bool {
    resp.op_responses().into_iter().any(|r| match r {
        TxnOpResponse::Get(g) => !g.kvs().is_empty(),
        _ => false,
    })
}

/// gRPC status codes (numeric, as on the wire) that the error mapping tells apart.
mod grpc_code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const INTERNAL: i32 = 13;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const ABORTED: i32 = 10;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    fn describe_key(&self, key: &str) -> String {
        String::from_utf8_lossy(&self.resume_key(key)).into_owned()
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let k = self.etcd_key(key)?;
        let mut resp = self
            .call("get", |member| {
                let (mut kv, k) = (member.kv(), k.clone());
                async move { kv.get(k, None).await }
            })
            .await?
            .map_err(|e| self.error("get", e))?;
        match resp.take_kvs().into_iter().next() {
            Some(found) => Ok(Some(self.read_key_value(found)?)),
            None => Ok(None),
        }
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at_revision: Option<Revision>,
    ) -> Result<ListResult, StoreError> {
        let range = self.etcd_range(prefix)?.and_then(|(start, end)| {
            // Resume strictly after `start_after` (as the embedded engine does, a
            // `start_after` before the prefix starts at the prefix).
            let from = match start_after.map(|after| self.resume_key(after)) {
                Some(after) if after >= start => key_after(&after),
                _ => start,
            };
            (from < end).then_some((from, end))
        });
        let Some((mut from, end)) = range else {
            // Nothing can match, but the revision is still checked (compacted, future) by
            // reading the root key, which is never written.
            let root = self.root.as_bytes();
            let resp = self
                .range_page(root.to_vec(), &key_after(root), 1, at_revision)
                .await?;
            let revision = at_revision.unwrap_or_else(|| {
                from_rev(resp.header().map(|h| h.revision()).unwrap_or_default())
            });
            return Ok(ListResult {
                items: Vec::new(),
                revision,
                more: false,
            });
        };
        let mut revision = at_revision;
        let mut items: Vec<KeyValue> = Vec::new();
        loop {
            let page = if limit == 0 {
                LIST_PAGE
            } else {
                LIST_PAGE.min(i64::try_from(limit - items.len()).unwrap_or(LIST_PAGE))
            };
            let mut resp = self.range_page(from, &end, page, revision).await?;
            // Every later page reads at the first page's revision: one snapshot.
            let read_at = *revision.get_or_insert_with(|| {
                from_rev(resp.header().map(|h| h.revision()).unwrap_or_default())
            });
            let more = resp.more();
            let kvs = resp.take_kvs();
            let last = kvs.last().map(|kv| key_after(kv.key()));
            for kv in kvs {
                items.extend(self.key_value(kv)?);
            }
            let full = limit > 0 && items.len() >= limit;
            match last {
                Some(next) if more && !full => from = next,
                _ => {
                    return Ok(ListResult {
                        items,
                        revision: read_at,
                        more,
                    })
                }
            }
        }
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        self.check_open()?;
        let k = self.etcd_key(key)?;
        let resp = self
            .put_txn("create", key, |put| {
                Txn::new()
                    .when([Compare::create_revision(k.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(k.clone(), value.to_vec(), put)])
            })
            .await?;
        if !resp.succeeded() {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        let revision = from_rev(resp.header().map(|h| h.revision()).unwrap_or_default());
        self.progress.acknowledged(revision);
        Ok(revision)
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_revision: Revision,
    ) -> Result<Revision, StoreError> {
        self.check_open()?;
        let k = self.etcd_key(key)?;
        let resp = self
            .put_txn("update", key, |put| {
                Txn::new()
                    .when([
                        Compare::version(k.clone(), CompareOp::Greater, 0),
                        Compare::mod_revision(
                            k.clone(),
                            CompareOp::Equal,
                            to_rev(expected_revision),
                        ),
                    ])
                    .and_then([TxnOp::put(k.clone(), value.to_vec(), put)])
                    .or_else([TxnOp::get(k.clone(), None)])
            })
            .await?;
        if resp.succeeded() {
            let revision = from_rev(resp.header().map(|h| h.revision()).unwrap_or_default());
            self.progress.acknowledged(revision);
            return Ok(revision);
        }
        Err(self.failed_compare(key, expected_revision, &resp))
    }

    async fn delete(
        &self,
        key: &str,
        expected_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        self.check_open()?;
        let k = self.etcd_key(key)?;
        let mut compares = vec![Compare::version(k.clone(), CompareOp::Greater, 0)];
        if let Some(expected) = expected_revision {
            compares.push(Compare::mod_revision(
                k.clone(),
                CompareOp::Equal,
                to_rev(expected),
            ));
        }
        let txn = Txn::new()
            .when(compares)
            .and_then([TxnOp::delete(
                k.clone(),
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(k, None)]);
        let resp = self
            .call("delete", |member| {
                let (mut kv, txn) = (member.kv(), txn.clone());
                async move { kv.txn(txn).await }
            })
            .await?
            .map_err(|e| self.error("delete", e))?;
        if !resp.succeeded() {
            return Err(self.failed_compare(key, expected_revision.unwrap_or(0), &resp));
        }
        let revision = from_rev(resp.header().map(|h| h.revision()).unwrap_or_default());
        self.progress.acknowledged(revision);
        let prev = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Delete(mut d) => d.take_prev_kvs().into_iter().next(),
            _ => None,
        });
        match prev {
            Some(prev) => Ok((revision, self.read_key_value(prev)?)),
            None => Err(StoreError::Internal(format!(
                "etcd deleted {key} without returning its previous value"
            ))),
        }
    }

    async fn watch(
        &self,
        prefix: &str,
        after_revision: Revision,
    ) -> Result<WatchReceiver, StoreError> {
        self.check_open()?;
        watch::start(self, prefix, after_revision).await
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(self.progress.last_write());
        }
        self.revisions.get().await
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _ = self.shutdown.send(true);
        let handle = lock(&self.compactor).take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }
}

impl EtcdStore {
    /// Runs the write transaction `build` makes for `key` (given the options of its put:
    /// a lease when the key expires, see the `lease` module). A lease etcd no longer knows
    /// (it expired or was revoked since it was granted) fails the whole transaction, which
    /// then runs once more with a new lease.
    async fn put_txn(
        &self,
        op: &str,
        key: &str,
        build: impl Fn(Option<PutOptions>) -> Txn,
    ) -> Result<etcd_client::TxnResponse, StoreError> {
        let mut retried = false;
        loop {
            let lease = match self.leases.ttl_for(key) {
                Some(ttl) => Some(
                    self.leases
                        .lease(ttl, |seconds| self.grant(seconds))
                        .await?,
                ),
                None => None,
            };
            let txn = build(lease.map(|id| PutOptions::new().with_lease(id)));
            match self
                .call(op, |member| {
                    let (mut kv, txn) = (member.kv(), txn.clone());
                    async move { kv.txn(txn).await }
                })
                .await?
            {
                Ok(resp) => return Ok(resp),
                Err(e) if !retried && lease::is_lease_not_found(&e) => {
                    if let Some(id) = lease {
                        self.leases.forget(id).await;
                    }
                    retried = true;
                }
                Err(e) => return Err(self.error(op, e)),
            }
        }
    }

    /// Gives a lease to every key under an expiring prefix that has none: written before the
    /// prefix expired (an older kubegate) or copied in by `kubegate migrate`. The put keeps
    /// the value (`ignore_value`) and is guarded by the key's revision, so a key written
    /// meanwhile (which got its lease then) is left alone and replicas starting together do
    /// it once; each such key is seen MODIFIED once and expires at most one TTL from now.
    async fn lease_unleased_keys(&self) {
        for prefix in self.leases.prefixes() {
            let Ok(Some((mut from, end))) = self.etcd_range(&prefix) else {
                continue;
            };
            let mut leased = 0usize;
            loop {
                let mut page = match self.range_page(from.clone(), &end, LIST_PAGE, None).await {
                    Ok(page) => page,
                    Err(e) => {
                        tracing::warn!(prefix, error = %e, "listing keys to give them a lease; they keep none until rewritten");
                        return;
                    }
                };
                let more = page.more();
                let kvs = page.take_kvs();
                let next = kvs.last().map(|kv| key_after(kv.key()));
                for kv in kvs.iter().filter(|kv| kv.lease() == 0) {
                    let Ok(Some(key)) = self.store_key(kv.key()) else {
                        continue;
                    };
                    let (raw, revision) = (kv.key().to_vec(), kv.mod_revision());
                    let result = self
                        .put_txn("update", &key, |put| {
                            let put = put.unwrap_or_default().with_ignore_value();
                            Txn::new()
                                .when([Compare::mod_revision(
                                    raw.clone(),
                                    CompareOp::Equal,
                                    revision,
                                )])
                                .and_then([TxnOp::put(raw.clone(), Vec::new(), Some(put))])
                        })
                        .await;
                    match result {
                        Ok(resp) if resp.succeeded() => leased += 1,
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(key, error = %e, "giving a stored key its lease");
                        }
                    }
                }
                match next {
                    Some(next) if more => from = next,
                    _ => break,
                }
            }
            if leased > 0 {
                tracing::info!(
                    prefix,
                    keys = leased,
                    "gave stored keys without a lease one"
                );
            }
        }
    }

    /// Moves keys an earlier kubegate stored under their store names into kube's layout (see
    /// the `layout` module), keeping each value and lease. Each move is one transaction that
    /// happens only if the old key is unchanged and the new one does not exist, so replicas
    /// starting together move every key once; a key that cannot move is reported and left.
    async fn move_earlier_keys(&self) -> Result<(), StoreError> {
        let mut moved = 0usize;
        for dir in layout::EARLIER_DIRECTORIES {
            let start = self.raw_key(dir);
            let end = prefix_end(&start);
            let mut from = start;
            loop {
                let mut page = self.range_page(from.clone(), &end, LIST_PAGE, None).await?;
                let more = page.more();
                let kvs = page.take_kvs();
                let next = kvs.last().map(|kv| key_after(kv.key()));
                for kv in &kvs {
                    let Some(old) = kv.key().strip_prefix(self.root.as_bytes()) else {
                        continue;
                    };
                    let Ok(old) = std::str::from_utf8(old) else {
                        continue;
                    };
                    let new = match layout::to_etcd(old) {
                        Ok(new) if new != old => self.raw_key(&new),
                        // Not one of the relocated resources: already where it belongs.
                        _ => continue,
                    };
                    let put = (kv.lease() != 0).then(|| PutOptions::new().with_lease(kv.lease()));
                    let txn = Txn::new()
                        .when([
                            Compare::mod_revision(kv.key(), CompareOp::Equal, kv.mod_revision()),
                            Compare::create_revision(new.clone(), CompareOp::Equal, 0),
                        ])
                        .and_then([
                            TxnOp::put(new, kv.value().to_vec(), put),
                            TxnOp::delete(kv.key(), None),
                        ]);
                    let txn = txn.or_else([TxnOp::get(kv.key(), None)]);
                    let resp = self
                        .call("update", |member| {
                            let (mut client, txn) = (member.kv(), txn.clone());
                            async move { client.txn(txn).await }
                        })
                        .await?;
                    match resp {
                        Ok(resp) if resp.succeeded() => moved += 1,
                        // Gone: another replica moved it (or it expired) meanwhile.
                        Ok(resp) if !still_there(&resp) => {}
                        Ok(_) => tracing::warn!(key = old, "an earlier kubegate's key was changed while moving it, or its place in kube's layout is taken; left where it is"),
                        // Its lease expired between the read and the move: so did the key.
                        Err(e) if lease::is_lease_not_found(&e) => {}
                        Err(e) => return Err(self.error("update", e)),
                    }
                }
                match next {
                    Some(next) if more => from = next,
                    _ => break,
                }
            }
        }
        if moved > 0 {
            tracing::info!(keys = moved, prefix = %self.root, "moved keys stored by an earlier kubegate to kube-apiserver's etcd layout");
        }
        Ok(())
    }

    /// Grants a lease of `seconds` (retried on another member like a read: an extra grant
    /// only leaves an unused lease that expires by itself).
    async fn grant(&self, seconds: i64) -> Result<etcd_client::LeaseGrantResponse, StoreError> {
        self.call("lease grant", |member| {
            let mut client = member.lease();
            async move { client.grant(seconds, None).await }
        })
        .await?
        .map_err(|e| self.error("lease grant", e))
    }

    /// One read of the last write under the prefix: etcd's revision now, then the progress
    /// tracker's last write once it has seen everything up to it. Only through
    /// `self.revisions`, which batches callers.
    async fn fetch_current_revision(&self) -> Result<Revision, StoreError> {
        let global = self.global_revision().await?;
        self.progress.current(global, self.request_timeout).await
    }

    /// etcd's cluster-wide revision (writes outside the prefix count too).
    async fn global_revision(&self) -> Result<Revision, StoreError> {
        let resp = self
            .call("read of the current revision", |member| {
                let (mut kv, root) = (member.kv(), self.root.as_bytes().to_vec());
                async move {
                    kv.get(root, Some(GetOptions::new().with_count_only()))
                        .await
                }
            })
            .await?
            .map_err(|e| self.error("read of the current revision", e))?;
        Ok(from_rev(
            resp.header().map(|h| h.revision()).unwrap_or_default(),
        ))
    }

    /// The error for a write whose compare failed: the transaction's else branch read the key.
    fn failed_compare(
        &self,
        key: &str,
        expected: Revision,
        resp: &etcd_client::TxnResponse,
    ) -> StoreError {
        let current = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| from_rev(kv.mod_revision())),
            _ => None,
        });
        match current {
            None => StoreError::NotFound(key.to_string()),
            Some(actual) => StoreError::Conflict {
                key: key.to_string(),
                expected,
                actual,
            },
        }
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

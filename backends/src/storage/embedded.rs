//! The embedded storage engine: a [`Store`] on one redb file.
//!
//! Layout (three tables in one file):
//! - `objects`: key → (create_revision, mod_revision, value bytes);
//! - `events`: revision → (kind, key, value, prev_value), the retained history that watches
//!   resume from, bounded to [`EmbeddedOptions::event_history`] entries (the oldest are
//!   pruned in the same write transaction that adds new ones);
//! - `meta`: the current revision and the oldest retained event revision.
//!
//! Every write goes through one writer thread (group commit): it takes every request that
//! is waiting, applies them in order inside one write transaction (each with its own
//! compare-and-swap check, so one failing request does not fail the others), commits once
//! with `Durability::Immediate` (one fsync for the whole group), and only then answers the
//! callers and publishes the events to watchers. With many concurrent writers the fsync cost
//! is shared, which is what makes thousands of durable writes per second possible on slow
//! disks.
//!
//! Watches subscribe to a broadcast of committed event batches *before* replaying history
//! from the `events` table, then skip live events they already replayed; a per-watch
//! forwarding task delivers into a bounded channel so a slow consumer never blocks the
//! writer (it lags on the broadcast instead, and its stream ends with an error).

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, Weak};

use bytes::Bytes;
use redb::{Database, Durability, ReadableTable, TableDefinition};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{
    EventKind, KeyValue, ListResult, Revision, Store, StoreError, StoreEvent, WatchReceiver,
};

/// key → (create_revision, mod_revision, value)
const OBJECTS: TableDefinition<&str, (u64, u64, &[u8])> = TableDefinition::new("objects");
/// One logged event: (kind, key, value, prev_value).
type LoggedEvent<'a> = (u8, &'a str, &'a [u8], Option<&'a [u8]>);
/// revision → event
const EVENTS: TableDefinition<u64, LoggedEvent> = TableDefinition::new("events");
/// name → number
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

const META_REVISION: &str = "revision";
const META_OLDEST: &str = "oldest_retained";

/// The file name used when [`EmbeddedStore::open`] is given a directory.
pub const DEFAULT_FILE_NAME: &str = "kubegate.redb";

/// Upper bound on requests per write transaction, so one transaction (and the memory it
/// dirties) stays bounded under a flood of writes.
const MAX_BATCH: usize = 1024;
/// Committed batches the broadcast keeps for watchers that have not read them yet; a watch
/// that falls further behind is ended with an error.
const BROADCAST_BATCHES: usize = 1024;
/// Events buffered per watch between its forwarding task and the consumer.
const WATCH_BUFFER: usize = 256;
/// Events read from the log per read transaction while replaying history.
const REPLAY_CHUNK: u64 = 256;

/// Tuning for [`EmbeddedStore`].
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// How many events the log retains for watch resumption (older ones give 410 Gone).
    pub event_history: usize,
    /// redb's page cache budget. Kept small: the watch cache above serves reads from memory,
    /// so the page cache mostly serves the writer's B-tree walks. 8 MiB rather than 16 keeps
    /// a store of 10,000 objects under 80 MiB of RSS after a restart (whose initial load fills
    /// the cache) for ~15 % of create throughput (docs/benchmarks.md, section 3).
    pub cache_size_bytes: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            event_history: 10_000,
            cache_size_bytes: 8 * 1024 * 1024,
        }
    }
}

/// A committed group of events, shared by all watchers.
type EventBatch = Arc<Vec<StoreEvent>>;

/// State shared by the store handle, the writer thread and read tasks.
struct Shared {
    db: Database,
    /// The revision of the last committed write (updated after commit, before publishing).
    revision: AtomicU64,
    /// The oldest revision still in the event log (everything older was pruned).
    oldest_retained: AtomicU64,
}

/// One write, as sent to the writer thread.
enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
}

/// What a successful write returns.
enum Outcome {
    Written(Revision),
    Deleted(Revision, KeyValue),
}

type Reply = oneshot::Sender<Result<Outcome, StoreError>>;

enum Msg {
    Write(Op, Reply),
    /// Flush what came before, then stop; the sender is told when done.
    Shutdown(oneshot::Sender<()>),
}

/// The embedded [`Store`]: redb with a group-committing writer thread.
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    path: PathBuf,
    /// `None` once closed.
    requests: Mutex<Option<std_mpsc::Sender<Msg>>>,
    /// Where watchers subscribe; `None` once closed so new watches fail fast.
    events: Mutex<Option<broadcast::Sender<EventBatch>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.path)
            .field("revision", &self.shared.revision.load(Ordering::Acquire))
            .finish()
    }
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves nothing half-updated (they guard
    // Option handles), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn kind_to_u8(kind: EventKind) -> u8 {
    match kind {
        EventKind::Created => 0,
        EventKind::Modified => 1,
        EventKind::Deleted => 2,
    }
}

fn kind_from_u8(v: u8) -> Result<EventKind, StoreError> {
    match v {
        0 => Ok(EventKind::Created),
        1 => Ok(EventKind::Modified),
        2 => Ok(EventKind::Deleted),
        other => Err(StoreError::Internal(format!("corrupt event kind {other}"))),
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the database at `path` and starts the writer thread. `path` is the
    /// database file; if it names an existing directory, [`DEFAULT_FILE_NAME`] inside it is
    /// used. Missing parent directories are created.
    pub fn open(path: &Path, options: EmbeddedOptions) -> Result<Arc<EmbeddedStore>, StoreError> {
        let path = if path.is_dir() {
            path.join(DEFAULT_FILE_NAME)
        } else {
            path.to_path_buf()
        };
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    StoreError::Unavailable(format!("creating {}: {e}", parent.display()))
                })?;
            }
        }
        let db = Database::builder()
            .set_cache_size(options.cache_size_bytes)
            .create(&path)
            .map_err(|e| StoreError::Unavailable(format!("opening {}: {e}", path.display())))?;

        // Create the tables on first open and read the counters.
        let (revision, oldest) = {
            let txn = db.begin_write().map_err(internal)?;
            let counters = {
                txn.open_table(OBJECTS).map_err(internal)?;
                txn.open_table(EVENTS).map_err(internal)?;
                let meta = txn.open_table(META).map_err(internal)?;
                let revision = meta
                    .get(META_REVISION)
                    .map_err(internal)?
                    .map(|v| v.value())
                    .unwrap_or(0);
                let oldest = meta
                    .get(META_OLDEST)
                    .map_err(internal)?
                    .map(|v| v.value())
                    .unwrap_or(1);
                (revision, oldest)
            };
            txn.commit().map_err(internal)?;
            counters
        };

        let shared = Arc::new(Shared {
            db,
            revision: AtomicU64::new(revision),
            oldest_retained: AtomicU64::new(oldest),
        });
        let (req_tx, req_rx) = std_mpsc::channel();
        let (ev_tx, _) = broadcast::channel(BROADCAST_BATCHES);
        let writer = Writer {
            shared: Arc::clone(&shared),
            events: ev_tx.clone(),
            history: options.event_history as u64,
            revision,
            oldest,
        };
        let handle = std::thread::Builder::new()
            .name("kubegate-store-writer".into())
            .spawn(move || writer.run(req_rx))
            .map_err(|e| StoreError::Unavailable(format!("starting writer thread: {e}")))?;

        Ok(Arc::new(EmbeddedStore {
            shared,
            path,
            requests: Mutex::new(Some(req_tx)),
            events: Mutex::new(Some(ev_tx)),
            writer: Mutex::new(Some(handle)),
        }))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn submit(&self, op: Op) -> Result<Outcome, StoreError> {
        let (tx, rx) = oneshot::channel();
        {
            let requests = lock(&self.requests);
            let sender = requests
                .as_ref()
                .ok_or_else(|| StoreError::Unavailable("store is closed".into()))?;
            sender
                .send(Msg::Write(op, tx))
                .map_err(|_| StoreError::Unavailable("store writer stopped".into()))?;
        }
        rx.await
            .map_err(|_| StoreError::Unavailable("store writer stopped".into()))?
    }

    /// Runs a read on the blocking pool: redb reads are synchronous and may touch the disk.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Shared) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || f(&shared))
            .await
            .map_err(internal)?
    }

    /// Stops the writer after it has committed everything sent before; idempotent.
    fn shutdown_writer(&self) -> Option<oneshot::Receiver<()>> {
        lock(&self.events).take();
        let sender = lock(&self.requests).take()?;
        let (tx, rx) = oneshot::channel();
        // If the writer is already gone there is nothing to flush.
        let _ = sender.send(Msg::Shutdown(tx));
        Some(rx)
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        self.shutdown_writer();
        // Join so the file lock is released when the last handle goes (a reopen right after
        // a drop must succeed). The writer only has the current group left to commit.
        if let Some(handle) = lock(&self.writer).take() {
            if handle.join().is_err() {
                tracing::error!("store writer thread panicked");
            }
        }
    }
}

/// Reads events with revisions in `from..=to` (at most [`REPLAY_CHUNK`]).
fn read_events(
    shared: &Shared,
    from: Revision,
    to: Revision,
) -> Result<Vec<StoreEvent>, StoreError> {
    let txn = shared.db.begin_read().map_err(internal)?;
    let table = txn.open_table(EVENTS).map_err(internal)?;
    let end = to.min(from.saturating_add(REPLAY_CHUNK - 1));
    let mut out = Vec::new();
    for entry in table.range(from..=end).map_err(internal)? {
        let (rev, ev) = entry.map_err(internal)?;
        let (kind, key, value, prev) = ev.value();
        out.push(StoreEvent {
            kind: kind_from_u8(kind)?,
            key: key.to_string(),
            value: Bytes::copy_from_slice(value),
            prev_value: prev.map(Bytes::copy_from_slice),
            revision: rev.value(),
        });
    }
    Ok(out)
}

/// Feeds one watch: history from the log up to the revision current at subscription, then
/// live batches from the broadcast, skipping what the replay already sent.
async fn forward_watch(
    shared: Weak<Shared>,
    mut live: broadcast::Receiver<EventBatch>,
    prefix: String,
    after: Revision,
    target: Revision,
    tx: mpsc::Sender<Result<StoreEvent, StoreError>>,
) {
    let mut next = after.saturating_add(1);
    while next <= target {
        // Hold the database only while reading, so an idle watch does not keep the file open
        // after the store is dropped.
        let Some(db) = shared.upgrade() else { return };
        let from = next;
        let chunk = tokio::task::spawn_blocking(move || read_events(&db, from, target)).await;
        let chunk = match chunk.map_err(internal).and_then(|r| r) {
            Ok(chunk) => chunk,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        // The log has one event per revision; a hole means pruning overtook the replay.
        if chunk.first().map(|e| e.revision) != Some(next) {
            let oldest = chunk.first().map_or(target + 1, |e| e.revision);
            let _ = tx
                .send(Err(StoreError::Compacted {
                    requested: after,
                    oldest,
                }))
                .await;
            return;
        }
        for ev in chunk {
            next = ev.revision + 1;
            if ev.key.starts_with(&prefix) && tx.send(Ok(ev)).await.is_err() {
                return;
            }
        }
    }
    loop {
        let batch = tokio::select! {
            _ = tx.closed() => return,
            batch = live.recv() => batch,
        };
        match batch {
            Ok(batch) => {
                for ev in batch.iter() {
                    if ev.revision < next {
                        continue;
                    }
                    next = ev.revision + 1;
                    if ev.key.starts_with(&prefix) && tx.send(Ok(ev.clone())).await.is_err() {
                        return;
                    }
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let _ = tx
                    .send(Err(StoreError::Unavailable(format!(
                        "watch fell behind at revision {}; re-watch from the last received revision",
                        next - 1
                    ))))
                    .await;
                return;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[async_trait::async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let key = key.to_string();
        self.read(move |shared| {
            let txn = shared.db.begin_read().map_err(internal)?;
            let table = txn.open_table(OBJECTS).map_err(internal)?;
            let found = table.get(key.as_str()).map_err(internal)?;
            Ok(found.map(|guard| {
                let (create_revision, mod_revision, value) = guard.value();
                KeyValue {
                    key: key.clone(),
                    value: Bytes::copy_from_slice(value),
                    create_revision,
                    mod_revision,
                }
            }))
        })
        .await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at_revision: Option<Revision>,
    ) -> Result<ListResult, StoreError> {
        let prefix = prefix.to_string();
        let start_after = start_after.map(str::to_string);
        self.read(move |shared| {
            let txn = shared.db.begin_read().map_err(internal)?;
            let meta = txn.open_table(META).map_err(internal)?;
            let revision = meta
                .get(META_REVISION)
                .map_err(internal)?
                .map(|v| v.value())
                .unwrap_or(0);
            match at_revision {
                Some(r) if r > revision => {
                    return Err(StoreError::FutureRevision {
                        requested: r,
                        current: revision,
                    })
                }
                // No MVCC here: older revisions are served by the watch cache.
                Some(r) if r < revision => {
                    return Err(StoreError::Compacted {
                        requested: r,
                        oldest: revision,
                    })
                }
                _ => {}
            }
            let table = txn.open_table(OBJECTS).map_err(internal)?;
            let start = match start_after.as_deref() {
                Some(s) if s >= prefix.as_str() => Bound::Excluded(s),
                _ => Bound::Included(prefix.as_str()),
            };
            let mut items = Vec::new();
            let mut more = false;
            for entry in table
                .range::<&str>((start, Bound::Unbounded))
                .map_err(internal)?
            {
                let (key, value) = entry.map_err(internal)?;
                let key = key.value();
                if !key.starts_with(prefix.as_str()) {
                    break;
                }
                if limit > 0 && items.len() == limit {
                    more = true;
                    break;
                }
                let (create_revision, mod_revision, bytes) = value.value();
                items.push(KeyValue {
                    key: key.to_string(),
                    value: Bytes::copy_from_slice(bytes),
                    create_revision,
                    mod_revision,
                });
            }
            Ok(ListResult {
                items,
                revision,
                more,
            })
        })
        .await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        match self
            .submit(Op::Create {
                key: key.to_string(),
                value,
            })
            .await?
        {
            Outcome::Written(rev) | Outcome::Deleted(rev, _) => Ok(rev),
        }
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_revision: Revision,
    ) -> Result<Revision, StoreError> {
        match self
            .submit(Op::Update {
                key: key.to_string(),
                value,
                expected: expected_revision,
            })
            .await?
        {
            Outcome::Written(rev) | Outcome::Deleted(rev, _) => Ok(rev),
        }
    }

    async fn delete(
        &self,
        key: &str,
        expected_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        match self
            .submit(Op::Delete {
                key: key.to_string(),
                expected: expected_revision,
            })
            .await?
        {
            Outcome::Deleted(rev, kv) => Ok((rev, kv)),
            Outcome::Written(_) => Err(StoreError::Internal(
                "writer answered a delete with a write".into(),
            )),
        }
    }

    async fn watch(
        &self,
        prefix: &str,
        after_revision: Revision,
    ) -> Result<WatchReceiver, StoreError> {
        // Subscribe before reading the current revision: every event committed after that
        // read is published after it, so it reaches this receiver (no gap); events the replay
        // also covers are skipped by revision (no duplicate).
        let live = lock(&self.events)
            .as_ref()
            .ok_or_else(|| StoreError::Unavailable("store is closed".into()))?
            .subscribe();
        let target = self.shared.revision.load(Ordering::SeqCst);
        let oldest = self.shared.oldest_retained.load(Ordering::SeqCst);
        if after_revision.saturating_add(1) < oldest {
            return Err(StoreError::Compacted {
                requested: after_revision,
                oldest,
            });
        }
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        tokio::spawn(forward_watch(
            Arc::downgrade(&self.shared),
            live,
            prefix.to_string(),
            after_revision,
            target,
            tx,
        ));
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.shared.revision.load(Ordering::SeqCst))
    }

    async fn close(&self) {
        if let Some(done) = self.shutdown_writer() {
            let _ = done.await;
        }
    }

    fn is_closed(&self) -> bool {
        lock(&self.requests).is_none()
    }
}

/// The writer thread's state.
struct Writer {
    shared: Arc<Shared>,
    events: broadcast::Sender<EventBatch>,
    history: u64,
    /// Committed revision (the transaction in progress works on a copy).
    revision: Revision,
    oldest: Revision,
}

/// A request's result inside the group, before commit.
type Pending = (Reply, Result<Outcome, StoreError>);

impl Writer {
    fn run(mut self, requests: std_mpsc::Receiver<Msg>) {
        let mut group: Vec<(Op, Reply)> = Vec::new();
        loop {
            // Block for the first request, then take whatever queued up meanwhile (typically
            // while the previous group was being fsync'd): that is the group commit.
            let mut shutdown = None;
            match requests.recv() {
                Ok(Msg::Write(op, reply)) => group.push((op, reply)),
                Ok(Msg::Shutdown(done)) => shutdown = Some(done),
                Err(_) => return,
            }
            while shutdown.is_none() && group.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(Msg::Write(op, reply)) => group.push((op, reply)),
                    Ok(Msg::Shutdown(done)) => shutdown = Some(done),
                    Err(_) => break,
                }
            }
            if !group.is_empty() {
                self.commit_group(std::mem::take(&mut group));
            }
            if let Some(done) = shutdown {
                // Nothing can be queued after the shutdown message (the sender was taken
                // first), but answer stragglers rather than leave them hanging.
                while let Ok(msg) = requests.try_recv() {
                    if let Msg::Write(_, reply) = msg {
                        let _ = reply.send(Err(StoreError::Unavailable("store is closed".into())));
                    }
                }
                let _ = done.send(());
                return;
            }
        }
    }

    fn commit_group(&mut self, group: Vec<(Op, Reply)>) {
        let mut events = Vec::with_capacity(group.len());
        let mut pending: Vec<Pending> = Vec::with_capacity(group.len());
        let mut ops = Vec::with_capacity(group.len());
        for (op, reply) in group {
            ops.push(op);
            pending.push((reply, Err(StoreError::Internal("not applied".into()))));
        }
        match self.apply(&ops, &mut pending, &mut events) {
            Ok((revision, oldest)) => {
                self.revision = revision;
                self.oldest = oldest;
                self.shared.oldest_retained.store(oldest, Ordering::SeqCst);
                self.shared.revision.store(revision, Ordering::SeqCst);
                if !events.is_empty() {
                    // No receivers is fine; slow receivers lag instead of blocking us.
                    let _ = self.events.send(Arc::new(events));
                }
                for (reply, result) in pending {
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "store write transaction failed");
                for (reply, _) in pending {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }

    /// Applies the group in one transaction and commits it durably. Returns the new revision
    /// and oldest retained revision; per-request results go into `pending`.
    fn apply(
        &self,
        ops: &[Op],
        pending: &mut [Pending],
        events: &mut Vec<StoreEvent>,
    ) -> Result<(Revision, Revision), StoreError> {
        let mut txn = self.shared.db.begin_write().map_err(internal)?;
        txn.set_durability(Durability::Immediate);
        let mut revision = self.revision;
        let mut oldest = self.oldest;
        {
            let mut objects = txn.open_table(OBJECTS).map_err(internal)?;
            let mut log = txn.open_table(EVENTS).map_err(internal)?;
            for (op, slot) in ops.iter().zip(pending.iter_mut()) {
                let key = match op {
                    Op::Create { key, .. } | Op::Update { key, .. } | Op::Delete { key, .. } => key,
                };
                let current = objects.get(key.as_str()).map_err(internal)?.map(|g| {
                    let (c, m, v) = g.value();
                    (c, m, Bytes::copy_from_slice(v))
                });
                let next = revision + 1;
                let (result, event) = match (op, current) {
                    (Op::Create { .. }, Some(_)) => {
                        (Err(StoreError::AlreadyExists(key.clone())), None)
                    }
                    (Op::Create { value, .. }, None) => {
                        objects
                            .insert(key.as_str(), (next, next, value.as_ref()))
                            .map_err(internal)?;
                        (
                            Ok(Outcome::Written(next)),
                            Some((EventKind::Created, value.clone(), None)),
                        )
                    }
                    (Op::Update { .. }, None) | (Op::Delete { .. }, None) => {
                        (Err(StoreError::NotFound(key.clone())), None)
                    }
                    (Op::Update { expected, .. }, Some((_, m, _))) if m != *expected => (
                        Err(StoreError::Conflict {
                            key: key.clone(),
                            expected: *expected,
                            actual: m,
                        }),
                        None,
                    ),
                    (Op::Update { value, .. }, Some((c, _, old))) => {
                        objects
                            .insert(key.as_str(), (c, next, value.as_ref()))
                            .map_err(internal)?;
                        (
                            Ok(Outcome::Written(next)),
                            Some((EventKind::Modified, value.clone(), Some(old))),
                        )
                    }
                    (
                        Op::Delete {
                            expected: Some(e), ..
                        },
                        Some((_, m, _)),
                    ) if m != *e => (
                        Err(StoreError::Conflict {
                            key: key.clone(),
                            expected: *e,
                            actual: m,
                        }),
                        None,
                    ),
                    (Op::Delete { .. }, Some((c, m, old))) => {
                        objects.remove(key.as_str()).map_err(internal)?;
                        let kv = KeyValue {
                            key: key.clone(),
                            value: old.clone(),
                            create_revision: c,
                            mod_revision: m,
                        };
                        (
                            Ok(Outcome::Deleted(next, kv)),
                            Some((EventKind::Deleted, Bytes::new(), Some(old))),
                        )
                    }
                };
                if let Some((kind, value, prev_value)) = event {
                    revision = next;
                    log.insert(
                        next,
                        (
                            kind_to_u8(kind),
                            key.as_str(),
                            value.as_ref(),
                            prev_value.as_deref(),
                        ),
                    )
                    .map_err(internal)?;
                    events.push(StoreEvent {
                        kind,
                        key: key.clone(),
                        value,
                        prev_value,
                        revision: next,
                    });
                }
                slot.1 = result;
            }
            // Keep the newest `history` events; prune in this transaction so the log never
            // exceeds its bound on disk.
            let retained = (revision + 1).saturating_sub(oldest);
            if retained > self.history {
                let cutoff = revision - self.history;
                log.retain_in(oldest..=cutoff, |_, _| false)
                    .map_err(internal)?;
                oldest = cutoff + 1;
            }
            let mut meta = txn.open_table(META).map_err(internal)?;
            meta.insert(META_REVISION, revision).map_err(internal)?;
            meta.insert(META_OLDEST, oldest).map_err(internal)?;
        }
        txn.commit().map_err(internal)?;
        Ok((revision, oldest))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn open(dir: &tempfile::TempDir, history: usize) -> Arc<EmbeddedStore> {
        EmbeddedStore::open(
            &dir.path().join("kubegate.redb"),
            EmbeddedOptions {
                event_history: history,
                ..EmbeddedOptions::default()
            },
        )
        .unwrap()
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    async fn recv(rx: &mut WatchReceiver) -> StoreEvent {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("watch event timed out")
            .expect("watch closed")
            .expect("watch error")
    }

    crate::storage::conformance::suite!(
        crate::storage::conformance::Engine { mvcc_reads: false },
        || async {
            let dir = tempfile::tempdir().unwrap();
            let store = EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap();
            (dir, store as Arc<dyn Store>)
        }
    );

    #[tokio::test]
    async fn create_get_and_already_exists() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100);
        assert_eq!(s.current_revision().await.unwrap(), 0);
        let r = s.create("/a/x", b("1")).await.unwrap();
        assert_eq!(r, 1);
        let kv = s.get("/a/x").await.unwrap().unwrap();
        assert_eq!(kv.value, b("1"));
        assert_eq!((kv.create_revision, kv.mod_revision), (1, 1));
        assert_eq!(
            s.create("/a/x", b("2")).await,
            Err(StoreError::AlreadyExists("/a/x".into()))
        );
        // A failed write does not consume a revision.
        assert_eq!(s.current_revision().await.unwrap(), 1);
        assert_eq!(s.get("/a/missing").await.unwrap(), None);
    }

    #[tokio::test]
    async fn update_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100);
        let r1 = s.create("/k", b("v1")).await.unwrap();
        let r2 = s.update("/k", b("v2"), r1).await.unwrap();
        assert!(r2 > r1);
        assert_eq!(
            s.update("/k", b("v3"), r1).await,
            Err(StoreError::Conflict {
                key: "/k".into(),
                expected: r1,
                actual: r2
            })
        );
        let kv = s.get("/k").await.unwrap().unwrap();
        assert_eq!(kv.value, b("v2"));
        assert_eq!((kv.create_revision, kv.mod_revision), (r1, r2));
        assert_eq!(
            s.update("/nope", b("x"), 1).await,
            Err(StoreError::NotFound("/nope".into()))
        );
    }

    #[tokio::test]
    async fn delete_with_and_without_precondition() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100);
        let r1 = s.create("/a", b("a")).await.unwrap();
        let r2 = s.create("/b", b("b")).await.unwrap();
        assert!(matches!(
            s.delete("/a", Some(r1 + 100)).await,
            Err(StoreError::Conflict { .. })
        ));
        let (rd, kv) = s.delete("/a", Some(r1)).await.unwrap();
        assert_eq!(rd, r2 + 1);
        assert_eq!(kv.value, b("a"));
        assert_eq!((kv.create_revision, kv.mod_revision), (r1, r1));
        let (rd2, kv) = s.delete("/b", None).await.unwrap();
        assert_eq!(rd2, rd + 1);
        assert_eq!(kv.value, b("b"));
        assert_eq!(
            s.delete("/b", None).await,
            Err(StoreError::NotFound("/b".into()))
        );
        assert_eq!(s.get("/a").await.unwrap(), None);
    }

    #[tokio::test]
    async fn revisions_increase_by_one_per_write() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100);
        let mut last = 0;
        for i in 0..10 {
            let key = format!("/k/{i}");
            let r = s.create(&key, b("x")).await.unwrap();
            assert_eq!(r, last + 1);
            let r = s.update(&key, b("y"), r).await.unwrap();
            assert_eq!(r, last + 2);
            last = r;
        }
        assert_eq!(s.current_revision().await.unwrap(), last);
    }

    #[tokio::test]
    async fn list_pagination() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100);
        for name in ["a", "b", "c", "d", "e"] {
            s.create(&format!("/pods/ns/{name}"), b(name))
                .await
                .unwrap();
        }
        s.create("/pods/other/z", b("z")).await.unwrap();
        s.create("/pods/nt", b("not under /pods/ns/"))
            .await
            .unwrap();

        let page = s.list("/pods/ns/", None, 2, None).await.unwrap();
        assert_eq!(page.revision, 7);
        let keys: Vec<_> = page.items.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/pods/ns/a", "/pods/ns/b"]);
        assert!(page.more);

        let page = s
            .list("/pods/ns/", Some("/pods/ns/b"), 2, None)
            .await
            .unwrap();
        let keys: Vec<_> = page.items.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/pods/ns/c", "/pods/ns/d"]);
        assert!(page.more);

        let page = s
            .list("/pods/ns/", Some("/pods/ns/d"), 2, None)
            .await
            .unwrap();
        let keys: Vec<_> = page.items.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/pods/ns/e"]);
        assert!(!page.more);

        let all = s.list("/pods/", None, 0, None).await.unwrap();
        assert_eq!(all.items.len(), 7);
        assert!(!all.more);

        assert!(s.list("/pods/", None, 0, Some(7)).await.is_ok());
        assert!(matches!(
            s.list("/pods/", None, 0, Some(3)).await,
            Err(StoreError::Compacted { .. })
        ));
        assert!(matches!(
            s.list("/pods/", None, 0, Some(8)).await,
            Err(StoreError::FutureRevision { .. })
        ));
    }

    #[tokio::test]
    async fn watch_replays_then_streams_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100);
        let r1 = s.create("/w/a", b("1")).await.unwrap();
        let r2 = s.update("/w/a", b("2"), r1).await.unwrap();
        s.create("/other/x", b("x")).await.unwrap();
        let (r4, _) = s.delete("/w/a", None).await.unwrap();

        // Resume from r1: history first (only under the prefix), then live.
        let mut rx = s.watch("/w/", r1).await.unwrap();
        let e = recv(&mut rx).await;
        assert_eq!((e.kind, e.revision), (EventKind::Modified, r2));
        assert_eq!(e.value, b("2"));
        assert_eq!(e.prev_value, Some(b("1")));
        let e = recv(&mut rx).await;
        assert_eq!((e.kind, e.revision), (EventKind::Deleted, r4));
        assert_eq!(e.prev_value, Some(b("2")));
        assert!(e.value.is_empty());

        let r5 = s.create("/w/b", b("b")).await.unwrap();
        s.create("/other/y", b("y")).await.unwrap();
        let r7 = s.create("/w/c", b("c")).await.unwrap();
        let e = recv(&mut rx).await;
        assert_eq!(
            (e.kind, e.revision, e.key.as_str()),
            (EventKind::Created, r5, "/w/b")
        );
        assert_eq!(e.prev_value, None);
        let e = recv(&mut rx).await;
        assert_eq!((e.revision, e.key.as_str()), (r7, "/w/c"));

        // Watching from the current revision sees only new events.
        let mut rx = s.watch("", r7).await.unwrap();
        let r8 = s.create("/z", b("z")).await.unwrap();
        assert_eq!(recv(&mut rx).await.revision, r8);
    }

    #[tokio::test]
    async fn watch_handoff_under_concurrent_writes_has_no_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 100_000);
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    for i in 0..100 {
                        s.create(&format!("/c/{w}/{i}"), b("x")).await.unwrap();
                    }
                })
            })
            .collect();
        // Start watches at various points while writes are in flight.
        let mut watches = Vec::new();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let after = s.current_revision().await.unwrap() / 2;
            watches.push((after, s.watch("/c/", after).await.unwrap()));
        }
        for w in writers {
            w.await.unwrap();
        }
        for (after, mut rx) in watches {
            let mut expected = after + 1;
            while expected <= 800 {
                let e = recv(&mut rx).await;
                assert_eq!(e.revision, expected);
                expected += 1;
            }
        }
    }

    #[tokio::test]
    async fn compacted_after_history_pruning() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 5);
        for i in 0..20 {
            s.create(&format!("/k/{i}"), b("x")).await.unwrap();
        }
        // Events 16..=20 are retained: resuming after 15 works, after 14 does not.
        let mut rx = s.watch("/k/", 15).await.unwrap();
        assert_eq!(recv(&mut rx).await.revision, 16);
        assert_eq!(
            s.watch("/k/", 14).await.err(),
            Some(StoreError::Compacted {
                requested: 14,
                oldest: 16
            })
        );
        assert!(s.watch("/k/", 0).await.is_err());
        // The log on disk is bounded too.
        let txn = s.shared.db.begin_read().unwrap();
        let log = txn.open_table(EVENTS).unwrap();
        assert_eq!(redb::ReadableTableMetadata::len(&log).unwrap(), 5);
    }

    #[tokio::test]
    async fn reopen_keeps_data_and_revision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubegate.redb");
        {
            let s = open(&dir, 3);
            for i in 0..6 {
                s.create(&format!("/k/{i}"), b("x")).await.unwrap();
            }
            s.close().await;
            assert!(matches!(
                s.create("/k/late", b("x")).await,
                Err(StoreError::Unavailable(_))
            ));
        }
        let s = EmbeddedStore::open(&path, EmbeddedOptions::default()).unwrap();
        assert_eq!(s.current_revision().await.unwrap(), 6);
        assert_eq!(s.get("/k/5").await.unwrap().unwrap().mod_revision, 6);
        assert_eq!(s.create("/k/new", b("y")).await.unwrap(), 7);
        // The pruning point survived too.
        assert!(matches!(
            s.watch("", 2).await,
            Err(StoreError::Compacted { oldest: 4, .. })
        ));
        drop(s);
        // Dropping without close also releases the file; a directory path finds the file.
        let s = EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap();
        assert_eq!(s.current_revision().await.unwrap(), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_get_distinct_revisions() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, 10_000);
        let tasks: Vec<_> = (0..32)
            .map(|w| {
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    let mut revs = Vec::new();
                    for i in 0..50 {
                        revs.push(s.create(&format!("/c/{w}/{i}"), b("x")).await.unwrap());
                    }
                    // Same key from everyone: exactly one create wins per round.
                    let r = s.create("/shared", b("x")).await;
                    (revs, r.is_ok())
                })
            })
            .collect();
        let mut all = Vec::new();
        let mut winners = 0;
        for t in tasks {
            let (revs, won) = t.await.unwrap();
            assert!(revs.windows(2).all(|w| w[0] < w[1]));
            all.extend(revs);
            winners += usize::from(won);
        }
        assert_eq!(winners, 1);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 32 * 50);
        assert_eq!(s.current_revision().await.unwrap(), 32 * 50 + 1);
    }
}

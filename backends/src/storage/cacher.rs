//! The watch cache: serves GET, LIST and WATCH from memory over any [`Store`], the way
//! kube-apiserver's cacher does.
//!
//! One task lists the whole store, then watches it from that revision and applies every event
//! to:
//! - a sorted map of the current objects, each with its response bytes rendered once (the
//!   stored JSON with `metadata.resourceVersion` set) and its labels extracted, so serving an
//!   object is an `Arc` clone;
//! - a ring of the last `history` events, which lets watches resume from a recent revision
//!   and lets lists be answered at an older revision by undoing newer events (each event
//!   keeps the object it replaced). The ring is shared, but how far back it reaches is kept
//!   per resource (the first two segments of a key, `/<group>/<resource>`), as kube keeps one
//!   watch cache per resource: a quiet resource's watchers resume from old revisions however
//!   busy the others are, since none of its own events was dropped after them.
//!
//! Watchers are fed through bounded channels; one that cannot keep up is ended with an error
//! (its client re-watches from the last revision it saw) instead of slowing the cache down.
//! If the store's watch fails, the cache re-watches from its revision, or re-lists when the
//! store no longer has that history; a re-list ends all watchers because events were lost.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use super::render::{render, Rendered};
use super::{EventKind, KeyValue, Revision, Store, StoreError, StoreEvent, WatchReceiver};

/// Objects read per page when the cache loads the store.
const LOAD_PAGE: usize = 256;
/// Events buffered per watcher before it counts as too slow and is ended.
const WATCH_BUFFER: usize = 1024;
/// Store events applied under one write lock.
const APPLY_BATCH: usize = 512;
/// Longest pause between attempts to re-establish the store watch.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// An object as the cache serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedObject {
    pub key: String,
    /// The object's mod revision (for a delete event's object: the deletion revision).
    pub revision: Revision,
    pub create_revision: Revision,
    /// The object JSON with `metadata.resourceVersion` set to `revision` in decimal.
    pub bytes: Bytes,
    /// `metadata.labels`, for label selectors without re-parsing.
    pub labels: BTreeMap<String, String>,
    /// This object as resources that convert stored objects serve it, computed on first read
    /// (see [`Conversions`]).
    pub conversions: Conversions,
    /// Set when the stored value is not a JSON object (written past kubegate, by etcdctl or
    /// another server sharing the prefix), to the key as the store names it: `bytes` holds
    /// the value as stored, and reads answer 500 naming that key.
    pub corrupt: Option<Arc<str>>,
}

impl AsRef<CachedObject> for CachedObject {
    fn as_ref(&self) -> &CachedObject {
        self
    }
}

/// The served forms of one cached object for resources whose strategy converts stored objects
/// (custom resources: `apiVersion` per served version, defaults applied on read), so a LIST
/// converts each object once rather than on every request. Keyed by a conversion id the
/// strategy never reuses (a CRD change makes new ones); it lives and dies with the object's
/// revision, so a changed object or CRD can never be served from a stale entry.
#[derive(Default)]
pub struct Conversions(Mutex<Vec<(u64, Option<Bytes>)>>);

/// Conversions kept per object (served versions of one CRD, and a CRD update or two).
const MAX_CONVERSIONS: usize = 4;

impl Conversions {
    /// Whether conversion `id` is kept.
    pub fn has(&self, id: u64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(k, _)| *k == id)
    }

    /// The bytes of conversion `id` of `stored`: cached, or made by `convert` and kept (as a
    /// marker only when they equal `stored`).
    pub fn get_or_convert<E>(
        &self,
        id: u64,
        stored: &Bytes,
        convert: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((_, cached)) = lock().iter().find(|(k, _)| *k == id) {
            return Ok(cached.clone().unwrap_or_else(|| stored.clone()));
        }
        // Converted outside the lock; a concurrent reader may convert too, the first one stays.
        let converted = convert()?;
        let mut entries = lock();
        if !entries.iter().any(|(k, _)| *k == id) {
            if entries.len() >= MAX_CONVERSIONS {
                entries.remove(0);
            }
            let kept = (converted != *stored).then(|| converted.clone());
            entries.push((id, kept));
        }
        Ok(converted)
    }
}

impl Clone for Conversions {
    fn clone(&self) -> Conversions {
        let entries = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Conversions(Mutex::new(entries.clone()))
    }
}

/// Derived data: two objects are equal whatever their conversions hold.
impl PartialEq for Conversions {
    fn eq(&self, _: &Conversions) -> bool {
        true
    }
}

impl Eq for Conversions {}

impl std::fmt::Debug for Conversions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_list()
            .entries(entries.iter().map(|(id, _)| id))
            .finish()
    }
}

/// The kind of a [`CacheEvent`] (watch event types ADDED, MODIFIED, DELETED).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheEventKind {
    Added,
    Modified,
    Deleted,
}

/// One change as watchers see it.
#[derive(Debug, Clone)]
pub struct CacheEvent {
    pub kind: CacheEventKind,
    /// The new state; for `Deleted` the last state with `resourceVersion` set to the deletion
    /// revision, as kube-apiserver sends it.
    pub object: Arc<CachedObject>,
    /// The cached object this event replaced (`None` for `Added`).
    pub prev: Option<Arc<CachedObject>>,
    pub revision: Revision,
}

struct State {
    objects: BTreeMap<String, Arc<CachedObject>>,
    ring: VecDeque<CacheEvent>,
    /// Every event with a revision above this is in the ring (the ring reaches back to it).
    floor: Revision,
    /// The revision the ring started from (the last full list): nothing older is in it.
    origin: Revision,
    /// Per resource (see [`resource_of`]), the revision of its newest event dropped from the
    /// ring: every event of the resource above it is in the ring.
    dropped: HashMap<String, Revision>,
    /// The last revision applied.
    revision: Revision,
}

impl State {
    /// How far back the ring reaches for keys under `prefix`: every event of theirs with a
    /// revision above the answer is in the ring.
    fn floor_for(&self, prefix: &str) -> Revision {
        match resource_of(prefix) {
            Some(resource) => self
                .dropped
                .get(resource)
                .copied()
                .unwrap_or(0)
                .max(self.origin),
            None => self.floor,
        }
    }
}

/// The resource part of a key or prefix, `/<group>/<resource>` (every resource's storage
/// prefix has two segments); `None` for a prefix that spans resources (`/`, `/<group>/`).
fn resource_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix('/')?;
    let first = rest.find('/')?;
    let after = &rest[first + 1..];
    let second = after.find('/').unwrap_or(after.len());
    if second == 0 {
        return None;
    }
    Some(&key[..1 + first + 1 + second])
}

struct WatcherEntry {
    prefix: String,
    tx: mpsc::Sender<CacheEvent>,
    /// Why the cache ended this watcher, read by it once its channel closes.
    end: Arc<Mutex<Option<StoreError>>>,
}

#[derive(Default)]
struct Watchers {
    next_id: u64,
    entries: HashMap<u64, WatcherEntry>,
}

/// What watchers share with the cache; kept apart so a watcher does not keep the whole cache
/// alive.
struct Hub {
    watchers: Mutex<Watchers>,
    /// The last revision applied, stored after that revision's events were sent to watchers.
    revision: AtomicU64,
}

impl Hub {
    fn end_all(&self, reason: &StoreError) {
        let mut watchers = lock(&self.watchers);
        for (_, entry) in watchers.entries.drain() {
            *lock(&entry.end) = Some(reason.clone());
        }
    }
}

/// The watch cache (see the module docs).
pub struct Cacher {
    store: Arc<dyn Store>,
    history: usize,
    state: RwLock<State>,
    hub: Arc<Hub>,
    applied: watch::Sender<Revision>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Cacher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cacher")
            .field("revision", &self.revision())
            .field("history", &self.history)
            .finish()
    }
}

// Poisoning only means a panic happened elsewhere while a lock was held; the cache's updates
// under these locks are single assignments/inserts, so the data stays usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cacher {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists everything in `store`, then keeps the cache current from a background task.
    /// `history` is how many events the ring keeps for resuming watches and old lists.
    pub async fn start(store: Arc<dyn Store>, history: usize) -> Result<Arc<Cacher>, StoreError> {
        let (objects, revision, rx) = load_then_watch(&store, |_| None).await?;
        let cacher = Arc::new(Cacher {
            store: Arc::clone(&store),
            history,
            state: RwLock::new(State {
                objects,
                ring: VecDeque::with_capacity(history.min(4096)),
                floor: revision,
                origin: revision,
                dropped: HashMap::new(),
                revision,
            }),
            hub: Arc::new(Hub {
                watchers: Mutex::new(Watchers::default()),
                revision: AtomicU64::new(revision),
            }),
            applied: watch::channel(revision).0,
            task: Mutex::new(None),
        });
        let task = tokio::spawn(run(Arc::downgrade(&cacher), store, rx));
        *lock(&cacher.task) = Some(task);
        Ok(cacher)
    }

    /// The store under the cache (writes go there).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The last revision applied to the cache.
    pub fn revision(&self) -> Revision {
        self.hub.revision.load(Ordering::Acquire)
    }

    /// Waits until the cache has applied `revision` (e.g. one a write just returned), so a
    /// following read sees that write. [`StoreError::Unavailable`] after `timeout`.
    pub async fn wait_for_revision(
        &self,
        revision: Revision,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        if self.revision() >= revision {
            return Ok(());
        }
        let mut rx = self.applied.subscribe();
        let reached = tokio::time::timeout(timeout, async {
            rx.wait_for(|r| *r >= revision).await.map(|_| ())
        })
        .await;
        match reached {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Unavailable("watch cache stopped".into())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "timed out waiting for the watch cache to reach revision {revision} (at {})",
                self.revision()
            ))),
        }
    }

    /// The object at `key` read from the store itself, rendered as the cache renders it: for
    /// a consistent read the cache is too far behind to serve (kube's fallback to etcd when
    /// its watch cache is not fresh in time).
    pub async fn read_through(&self, key: &str) -> Result<Option<Arc<CachedObject>>, StoreError> {
        Ok(self
            .store
            .get(key)
            .await?
            .map(|kv| Arc::new(object_from(self.store.as_ref(), kv))))
    }

    /// Every object under `prefix` after `start_after`, read from the store itself page by
    /// page at one revision (`at_revision`, or the current one) and rendered as the cache
    /// renders them, with that revision: for a LIST the cache is too far behind to serve (as
    /// [`Cacher::read_through`]).
    pub async fn list_through(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        at_revision: Option<Revision>,
    ) -> Result<(Vec<Arc<CachedObject>>, Revision), StoreError> {
        let mut objects = Vec::new();
        let mut at = at_revision;
        let mut after = start_after.map(str::to_string);
        loop {
            let page = self
                .store
                .list(prefix, after.as_deref(), LOAD_PAGE, at)
                .await?;
            at = Some(page.revision);
            let more = page.more;
            after = page.items.last().map(|kv| kv.key.clone()).or(after);
            objects.extend(
                page.items
                    .into_iter()
                    .map(|kv| Arc::new(object_from(self.store.as_ref(), kv))),
            );
            if !more {
                return Ok((objects, at.unwrap_or(0)));
            }
        }
    }

    /// The current object at `key`.
    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.read().objects.get(key).cloned()
    }

    /// All objects under `prefix` after `start_after`, in key order, as of `at_revision` (or
    /// the current revision), with the revision they were read at. An older revision is
    /// rebuilt by undoing newer ring events: [`StoreError::Compacted`] if the ring does not
    /// reach back that far, [`StoreError::FutureRevision`] if the cache is not there yet.
    /// Like [`Cacher::list`], but a revision the cache does not hold (before it started, or
    /// gone from its event ring) is read from the store, which may still have it: kube's
    /// cacher hands such exact reads and continued lists to etcd, so a continue token works on
    /// every replica and after a busy minute. Only a store that no longer has the revision
    /// (compacted, or the embedded engine's past) answers [`StoreError::Compacted`].
    pub async fn list_at(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        at_revision: Option<Revision>,
    ) -> Result<(Vec<Arc<CachedObject>>, Revision), StoreError> {
        let cached = self.list(prefix, start_after, at_revision);
        match (cached, at_revision) {
            (Err(StoreError::Compacted { .. }), Some(revision)) => {
                let stored = self
                    .store()
                    .list(prefix, start_after, 0, Some(revision))
                    .await?;
                let items = stored
                    .items
                    .into_iter()
                    .map(|kv| Arc::new(object_from(self.store.as_ref(), kv)))
                    .collect();
                Ok((items, stored.revision))
            }
            (cached, _) => cached,
        }
    }

    pub fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        at_revision: Option<Revision>,
    ) -> Result<(Vec<Arc<CachedObject>>, Revision), StoreError> {
        let state = self.read();
        let at = at_revision.unwrap_or(state.revision);
        if at > state.revision {
            return Err(StoreError::FutureRevision {
                requested: at,
                current: state.revision,
            });
        }
        let floor = state.floor_for(prefix);
        if at < floor {
            return Err(StoreError::Compacted {
                requested: at,
                oldest: floor,
            });
        }
        let start = range_start(prefix, start_after);
        let in_range = |key: &str| key.starts_with(prefix) && start_admits(&start, key);
        let current = state
            .objects
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix));
        if at == state.revision {
            return Ok((current.map(|(_, v)| Arc::clone(v)).collect(), at));
        }
        let mut view: BTreeMap<&str, Arc<CachedObject>> =
            current.map(|(k, v)| (k.as_str(), Arc::clone(v))).collect();
        // Undo, newest first, every event after `at`: each put back what it replaced.
        for ev in state.ring.iter().rev().take_while(|e| e.revision > at) {
            let key = ev.object.key.as_str();
            if !in_range(key) {
                continue;
            }
            match &ev.prev {
                Some(prev) => view.insert(key, Arc::clone(prev)),
                None => view.remove(key),
            };
        }
        Ok((view.into_values().collect(), at))
    }

    /// How many objects are under `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.read()
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .count()
    }

    /// Streams events under `prefix` with revisions above `after_revision`: those still in
    /// the ring first, then live ones. [`StoreError::Compacted`] (kube's 410 "too old resource
    /// version") if the ring no longer reaches back to `after_revision`. A revision the cache
    /// has not reached yet is accepted: the watch starts when the cache gets there.
    pub fn watch(
        &self,
        prefix: &str,
        after_revision: Revision,
    ) -> Result<CacheWatcher, StoreError> {
        // The read lock keeps the applier out while the backlog is copied and the watcher is
        // registered, so every event is in exactly one of the two.
        let state = self.read();
        let floor = state.floor_for(prefix);
        if after_revision < floor {
            return Err(StoreError::Compacted {
                requested: after_revision,
                oldest: floor,
            });
        }
        let first = state.ring.partition_point(|e| e.revision <= after_revision);
        let backlog = state
            .ring
            .range(first..)
            .filter(|e| e.object.key.starts_with(prefix))
            .cloned()
            .collect();
        Ok(self.register(prefix, after_revision, backlog))
    }

    /// The objects under `prefix` and a watch from exactly their revision, taken atomically.
    pub fn list_and_watch(&self, prefix: &str) -> (Vec<Arc<CachedObject>>, Revision, CacheWatcher) {
        let state = self.read();
        let items = state
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| Arc::clone(v))
            .collect();
        let revision = state.revision;
        let watcher = self.register(prefix, revision, VecDeque::new());
        drop(state);
        (items, revision, watcher)
    }

    /// Adds a watcher; the caller holds the state lock.
    fn register(
        &self,
        prefix: &str,
        after: Revision,
        backlog: VecDeque<CacheEvent>,
    ) -> CacheWatcher {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let end = Arc::new(Mutex::new(None));
        let id = {
            let mut watchers = lock(&self.hub.watchers);
            let id = watchers.next_id;
            watchers.next_id += 1;
            watchers.entries.insert(
                id,
                WatcherEntry {
                    prefix: prefix.to_string(),
                    tx,
                    end: Arc::clone(&end),
                },
            );
            id
        };
        CacheWatcher {
            id,
            hub: Arc::clone(&self.hub),
            rx,
            backlog,
            after,
            last: after,
            end,
            finished: false,
        }
    }

    /// Applies store events (in revision order) and sends them to watchers.
    fn apply(&self, events: Vec<StoreEvent>) {
        // Render outside the lock: parsing and serializing is the expensive part.
        let rendered: Vec<(StoreEvent, Option<Rendered>)> = events
            .into_iter()
            .map(|ev| {
                let source = match ev.kind {
                    EventKind::Deleted => ev.prev_value.as_deref(),
                    EventKind::Created | EventKind::Modified => Some(ev.value.as_ref()),
                };
                let rendered = source.map(|bytes| render(bytes, ev.revision));
                (ev, rendered)
            })
            .collect();

        let mut state = self.write();
        let mut watchers = lock(&self.hub.watchers);
        let mut ended = Vec::new();
        for (ev, rendered) in rendered {
            // Re-watching after an error may overlap what was already applied. One revision
            // can carry several events (an etcd transaction deleting every key on an expired
            // lease), so an event at the cache's revision is skipped only if its key already
            // shows it.
            if ev.revision < state.revision {
                continue;
            }
            if ev.revision == state.revision {
                let applied = match ev.kind {
                    EventKind::Deleted => !state.objects.contains_key(&ev.key),
                    EventKind::Created | EventKind::Modified => state
                        .objects
                        .get(&ev.key)
                        .is_some_and(|o| o.revision == ev.revision),
                };
                if applied {
                    continue;
                }
            }
            state.revision = ev.revision;
            let prev = state.objects.get(&ev.key).cloned();
            let event = match ev.kind {
                EventKind::Created | EventKind::Modified => {
                    let Some(rendered) = rendered else { continue };
                    let create_revision = match (ev.kind, &prev) {
                        (EventKind::Modified, Some(p)) => p.create_revision,
                        _ => ev.revision,
                    };
                    let object = Arc::new(CachedObject {
                        key: ev.key.clone(),
                        revision: ev.revision,
                        create_revision,
                        bytes: rendered.bytes,
                        labels: rendered.labels,
                        conversions: Conversions::default(),
                        corrupt: corrupt_key(self.store.as_ref(), &ev.key, rendered.corrupt),
                    });
                    state.objects.insert(ev.key, Arc::clone(&object));
                    let kind = if ev.kind == EventKind::Modified && prev.is_some() {
                        CacheEventKind::Modified
                    } else {
                        CacheEventKind::Added
                    };
                    CacheEvent {
                        kind,
                        object,
                        prev,
                        revision: ev.revision,
                    }
                }
                EventKind::Deleted => {
                    state.objects.remove(&ev.key);
                    // Engines that do not return the deleted value: re-stamp the cached copy.
                    let rendered = match (rendered, &prev) {
                        (Some(r), _) => r,
                        (None, Some(p)) => render(&p.bytes, ev.revision),
                        (None, None) => continue,
                    };
                    let object = Arc::new(CachedObject {
                        corrupt: corrupt_key(self.store.as_ref(), &ev.key, rendered.corrupt),
                        key: ev.key,
                        revision: ev.revision,
                        create_revision: prev.as_ref().map_or(ev.revision, |p| p.create_revision),
                        bytes: rendered.bytes,
                        labels: rendered.labels,
                        conversions: Conversions::default(),
                    });
                    CacheEvent {
                        kind: CacheEventKind::Deleted,
                        object,
                        prev,
                        revision: ev.revision,
                    }
                }
            };
            for (id, w) in watchers.entries.iter() {
                if !event.object.key.starts_with(&w.prefix) {
                    continue;
                }
                match w.tx.try_send(event.clone()) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        *lock(&w.end) = Some(StoreError::Unavailable(format!(
                            "watcher fell more than {WATCH_BUFFER} events behind at revision {}; \
                             re-watch from the last revision received",
                            event.revision
                        )));
                        ended.push(*id);
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => ended.push(*id),
                }
            }
            for id in ended.drain(..) {
                watchers.entries.remove(&id);
            }
            state.ring.push_back(event);
            while state.ring.len() > self.history {
                if let Some(old) = state.ring.pop_front() {
                    state.floor = old.revision;
                    if let Some(resource) = resource_of(&old.object.key) {
                        match state.dropped.get_mut(resource) {
                            Some(dropped) => *dropped = old.revision,
                            None => {
                                state.dropped.insert(resource.to_string(), old.revision);
                            }
                        }
                    }
                }
            }
        }
        let revision = state.revision;
        // Published after the sends, so a watcher that sees this revision with an empty queue
        // has received everything up to it (see `CacheWatcher::bookmark_revision`).
        self.hub.revision.store(revision, Ordering::Release);
        drop(watchers);
        drop(state);
        self.applied.send_replace(revision);
    }

    /// The cached object for `kv` when the cache already holds that version of it.
    fn unchanged_object(&self, kv: &KeyValue) -> Option<Arc<CachedObject>> {
        self.read()
            .objects
            .get(&kv.key)
            .filter(|o| o.revision == kv.mod_revision)
            .cloned()
    }

    /// Replaces the contents after a re-list at `revision`.
    fn replace(&self, objects: BTreeMap<String, Arc<CachedObject>>, revision: Revision) {
        let old_revision = self.revision();
        if revision == old_revision {
            // Nothing happened in between: the cache already is this state, keep the watchers.
            return;
        }
        let mut state = self.write();
        state.objects = objects;
        state.ring.clear();
        state.floor = revision;
        state.origin = revision;
        state.dropped.clear();
        state.revision = revision;
        // Events between the old and new revision are lost: every watcher must start over
        // (re-watching from its revision gets 410, so its client re-lists).
        self.hub.end_all(&StoreError::Compacted {
            requested: old_revision,
            oldest: revision,
        });
        self.hub.revision.store(revision, Ordering::Release);
        drop(state);
        self.applied.send_replace(revision);
    }
}

impl Drop for Cacher {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
        self.hub
            .end_all(&StoreError::Unavailable("watch cache stopped".into()));
    }
}

/// Where a key range starts: at the prefix, or just after `start_after` when that is further.
fn range_start<'a>(prefix: &'a str, start_after: Option<&'a str>) -> Bound<&'a str> {
    match start_after {
        Some(s) if s >= prefix => Bound::Excluded(s),
        _ => Bound::Included(prefix),
    }
}

fn start_admits(start: &Bound<&str>, key: &str) -> bool {
    match start {
        Bound::Excluded(s) => key > *s,
        Bound::Included(s) => key >= *s,
        Bound::Unbounded => true,
    }
}

/// The store's name for `key` when its value is `corrupt`.
fn corrupt_key(store: &dyn Store, key: &str, corrupt: bool) -> Option<Arc<str>> {
    corrupt.then(|| store.describe_key(key).into())
}

fn object_from(store: &dyn Store, kv: KeyValue) -> CachedObject {
    let rendered = render(&kv.value, kv.mod_revision);
    CachedObject {
        corrupt: corrupt_key(store, &kv.key, rendered.corrupt),
        key: kv.key,
        revision: kv.mod_revision,
        create_revision: kv.create_revision,
        bytes: rendered.bytes,
        labels: rendered.labels,
        conversions: Conversions::default(),
    }
}

/// Lists the whole store, page by page at one revision, into cached objects, and starts a
/// watch right after that revision. Pages keep the raw values of only one page alive next to
/// the cache being built (one list of everything would hold all of them at once: the peak
/// memory of a start). `reuse` returns an already cached object for a value it holds.
async fn load_then_watch(
    store: &Arc<dyn Store>,
    reuse: impl Fn(&KeyValue) -> Option<Arc<CachedObject>>,
) -> Result<(BTreeMap<String, Arc<CachedObject>>, Revision, WatchReceiver), StoreError> {
    let mut attempts = 0;
    'list: loop {
        let mut objects = BTreeMap::new();
        let mut at: Option<Revision> = None;
        let mut after: Option<String> = None;
        loop {
            let page = match store.list("", after.as_deref(), LOAD_PAGE, at).await {
                Ok(page) => page,
                // The store moved past the revision between pages: start over.
                Err(StoreError::Compacted { .. }) if attempts < 5 => {
                    attempts += 1;
                    continue 'list;
                }
                Err(e) => return Err(e),
            };
            at = Some(page.revision);
            after = page.items.last().map(|kv| kv.key.clone());
            for kv in page.items {
                let object =
                    reuse(&kv).unwrap_or_else(|| Arc::new(object_from(store.as_ref(), kv)));
                objects.insert(object.key.clone(), object);
            }
            if !page.more || after.is_none() {
                break;
            }
        }
        let revision = at.unwrap_or(0);
        match store.watch("", revision).await {
            Ok(rx) => return Ok((objects, revision, rx)),
            // History moved past the list before the watch started: list again.
            Err(StoreError::Compacted { .. }) if attempts < 5 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The background task: applies store events in batches; re-watches or re-lists on failure.
async fn run(cacher: Weak<Cacher>, store: Arc<dyn Store>, mut rx: WatchReceiver) {
    let mut batch = Vec::new();
    loop {
        let mut failure = None;
        match rx.recv().await {
            Some(Ok(ev)) => batch.push(ev),
            Some(Err(e)) => failure = Some(e),
            None => failure = Some(StoreError::Unavailable("store watch closed".into())),
        }
        while failure.is_none() && batch.len() < APPLY_BATCH {
            match rx.try_recv() {
                Ok(Ok(ev)) => batch.push(ev),
                Ok(Err(e)) => failure = Some(e),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    failure = Some(StoreError::Unavailable("store watch closed".into()))
                }
            }
        }
        {
            // Only upgrade while working, so dropping the last user handle stops the cache.
            let Some(cacher) = cacher.upgrade() else {
                return;
            };
            if !batch.is_empty() {
                cacher.apply(std::mem::take(&mut batch));
            }
        }
        if let Some(error) = failure {
            if store.is_closed() {
                tracing::debug!(%error, "watch cache stops: the store is closed");
                return;
            }
            tracing::warn!(%error, "watch cache lost its store watch; resynchronizing");
            match resync(&cacher, &store).await {
                Some(new_rx) => rx = new_rx,
                None => return,
            }
        }
    }
}

/// Re-establishes the store watch: from the cache's revision if the store still has that
/// history, otherwise by re-listing. Retries with backoff; `None` once the cache is gone.
async fn resync(cacher: &Weak<Cacher>, store: &Arc<dyn Store>) -> Option<WatchReceiver> {
    let mut backoff = Duration::from_millis(50);
    loop {
        if store.is_closed() {
            return None;
        }
        let result = {
            let cacher = cacher.upgrade()?;
            match store.watch("", cacher.revision()).await {
                Ok(rx) => Ok(rx),
                Err(StoreError::Compacted { .. }) => {
                    match load_then_watch(store, |kv| cacher.unchanged_object(kv)).await {
                        Ok((objects, revision, rx)) => {
                            cacher.replace(objects, revision);
                            Ok(rx)
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(rx) => return Some(rx),
            Err(error) => {
                tracing::warn!(%error, retry_in = ?backoff, "watch cache resync failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// A watch on the cache. Dropping it unregisters it.
pub struct CacheWatcher {
    id: u64,
    hub: Arc<Hub>,
    rx: mpsc::Receiver<CacheEvent>,
    /// Ring events copied at registration, delivered before live ones.
    backlog: VecDeque<CacheEvent>,
    /// Live events at or below this were asked not to be sent (a watch from a future revision).
    after: Revision,
    /// The revision of the last event returned (or `after`).
    last: Revision,
    end: Arc<Mutex<Option<StoreError>>>,
    finished: bool,
}

impl std::fmt::Debug for CacheWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheWatcher")
            .field("id", &self.id)
            .field("last", &self.last)
            .finish()
    }
}

impl CacheWatcher {
    /// The next event; `Some(Err(_))` ends the stream (the cache stopped or re-listed, or
    /// this watcher fell behind: re-watch from the last revision received), then `None`.
    /// Cancel-safe, so it can be used in `select!`.
    pub async fn next(&mut self) -> Option<Result<CacheEvent, StoreError>> {
        if let Some(ev) = self.backlog.pop_front() {
            self.last = ev.revision;
            return Some(Ok(ev));
        }
        if self.finished {
            return None;
        }
        loop {
            match self.rx.recv().await {
                Some(ev) if ev.revision <= self.after => continue,
                Some(ev) => {
                    self.last = ev.revision;
                    return Some(Ok(ev));
                }
                None => {
                    self.finished = true;
                    return lock(&self.end).take().map(Err);
                }
            }
        }
    }

    /// The revision a watch bookmark can carry: every event up to it that this watcher must
    /// deliver has been returned by [`next`](Self::next). That is the cache's latest revision
    /// when nothing is pending for this watcher, else the last event returned.
    pub fn bookmark_revision(&self) -> Revision {
        // Load first: the cache stores its revision after sending that revision's events, so
        // an empty queue seen afterwards means they have all been taken.
        let seen = self.hub.revision.load(Ordering::Acquire);
        let pending =
            !self.backlog.is_empty() || !self.rx.is_empty() || self.rx.is_closed() || self.finished;
        if pending {
            self.last
        } else {
            self.last.max(seen)
        }
    }
}

impl Drop for CacheWatcher {
    fn drop(&mut self) {
        lock(&self.hub.watchers).entries.remove(&self.id);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::storage::embedded::{EmbeddedOptions, EmbeddedStore};
    use serde_json::json;

    const WAIT: Duration = Duration::from_secs(5);

    /// A conversion is made once per id and served from the object afterwards; bytes equal to
    /// the stored ones are kept as a marker; a bounded number of ids is kept.
    #[test]
    fn conversions_are_cached_per_id() {
        let conversions = Conversions::default();
        let stored = Bytes::from_static(b"{\"apiVersion\":\"g/v1\"}");
        let calls = std::cell::Cell::new(0);
        let convert = |out: &'static [u8]| {
            calls.set(calls.get() + 1);
            Ok::<_, ()>(Bytes::from_static(out))
        };
        let v2 = conversions.get_or_convert(1, &stored, || convert(b"{\"apiVersion\":\"g/v2\"}"));
        assert_eq!(v2, Ok(Bytes::from_static(b"{\"apiVersion\":\"g/v2\"}")));
        let again = conversions.get_or_convert(1, &stored, || convert(b"unused"));
        assert_eq!(again, v2);
        assert_eq!(calls.get(), 1);
        // The same bytes: served as the stored ones, no copy kept.
        let same = conversions.get_or_convert(2, &stored, || Ok::<_, ()>(stored.clone()));
        assert_eq!(same, Ok(stored.clone()));
        assert!(conversions.0.lock().unwrap_or_else(|e| e.into_inner())[1]
            .1
            .is_none());
        // A failed conversion is not cached.
        assert_eq!(conversions.get_or_convert(3, &stored, || Err(())), Err(()));
        assert_eq!(
            conversions.get_or_convert(3, &stored, || convert(b"3")),
            Ok(Bytes::from_static(b"3"))
        );
        for id in 4..10 {
            let _ = conversions.get_or_convert(id, &stored, || convert(b"n"));
        }
        let ids: Vec<u64> = conversions
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(ids, [6, 7, 8, 9]);
        // Recomputed once evicted.
        let before = calls.get();
        let _ = conversions.get_or_convert(1, &stored, || convert(b"{}"));
        assert_eq!(calls.get(), before + 1);
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Arc<EmbeddedStore>,
    }

    fn fixture(event_history: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(
            &dir.path().join("kubegate.redb"),
            EmbeddedOptions {
                event_history,
                ..EmbeddedOptions::default()
            },
        )
        .unwrap();
        Fixture { _dir: dir, store }
    }

    fn obj(name: &str, labels: serde_json::Value, data: &str) -> Bytes {
        Bytes::from(
            serde_json::to_vec(&json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns", "labels": labels},
                "data": {"v": data},
            }))
            .unwrap(),
        )
    }

    fn parsed(o: &CachedObject) -> serde_json::Value {
        serde_json::from_slice(&o.bytes).unwrap()
    }

    fn rv(o: &CachedObject) -> String {
        parsed(o)["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn data(o: &CachedObject) -> String {
        parsed(o)["data"]["v"].as_str().unwrap().to_string()
    }

    async fn next(w: &mut CacheWatcher) -> CacheEvent {
        tokio::time::timeout(WAIT, w.next())
            .await
            .expect("timed out")
            .expect("watch ended")
            .expect("watch error")
    }

    #[tokio::test]
    async fn a_store_larger_than_a_page_loads_whole_and_at_one_revision() {
        let f = fixture(1000);
        let count = LOAD_PAGE * 2 + 7;
        let mut last = 0;
        for i in 0..count {
            let name = format!("o{i:04}");
            last = f
                .store
                .create(
                    &format!("/cm/ns/{name}"),
                    obj(&name, json!({"n": i.to_string()}), "x"),
                )
                .await
                .unwrap();
        }
        let cacher = Cacher::start(f.store.clone(), 100).await.unwrap();
        assert_eq!(cacher.revision(), last);
        let (items, at) = cacher.list("/cm/ns/", None, None).unwrap();
        assert_eq!((items.len(), at), (count, last));
        // Every object kept its own revision and labels across the page boundaries.
        for (i, item) in items.iter().enumerate() {
            assert_eq!(item.revision, i as u64 + 1);
            assert_eq!(item.labels.get("n"), Some(&i.to_string()));
        }
        // The watch starts right after the loaded revision: the next write is seen.
        let next = f
            .store
            .create("/cm/ns/zz", obj("zz", json!({}), "x"))
            .await
            .unwrap();
        cacher.wait_for_revision(next, WAIT).await.unwrap();
        assert!(cacher.get("/cm/ns/zz").is_some());
    }

    /// On graceful shutdown the store is closed under the cache: its task ends instead of
    /// trying to resynchronize (and warning about it) until the process exits.
    #[tokio::test]
    async fn the_cache_stops_when_its_store_is_closed() {
        let f = fixture(100);
        let cacher = Cacher::start(f.store.clone(), 100).await.unwrap();
        let task = lock(&cacher.task).take().unwrap();
        f.store.close().await;
        assert!(f.store.is_closed());
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the cache task kept running after the store closed")
            .unwrap();
    }

    #[tokio::test]
    async fn get_and_list_reflect_writes() {
        let f = fixture(1000);
        f.store
            .create("/cm/ns/pre", obj("pre", json!({}), "0"))
            .await
            .unwrap();
        let cacher = Cacher::start(f.store.clone(), 100).await.unwrap();
        assert_eq!(cacher.revision(), 1);
        let pre = cacher.get("/cm/ns/pre").unwrap();
        assert_eq!(rv(&pre), "1");

        let r = f
            .store
            .create("/cm/ns/a", obj("a", json!({"app": "web"}), "1"))
            .await
            .unwrap();
        f.store
            .create("/cm/other/b", obj("b", json!({}), "1"))
            .await
            .unwrap();
        cacher.wait_for_revision(r, WAIT).await.unwrap();
        let a = cacher.get("/cm/ns/a").unwrap();
        assert_eq!((a.revision, a.create_revision), (r, r));
        assert_eq!(rv(&a), r.to_string());
        assert_eq!(a.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(parsed(&a)["metadata"]["name"], "a");

        let r2 = f
            .store
            .update("/cm/ns/a", obj("a", json!({"app": "db"}), "2"), r)
            .await
            .unwrap();
        cacher.wait_for_revision(r2, WAIT).await.unwrap();
        let a = cacher.get("/cm/ns/a").unwrap();
        assert_eq!((a.revision, a.create_revision), (r2, r));
        assert_eq!(a.labels.get("app").map(String::as_str), Some("db"));

        let (items, at) = cacher.list("/cm/ns/", None, None).unwrap();
        assert_eq!(at, r2);
        let keys: Vec<_> = items.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["/cm/ns/a", "/cm/ns/pre"]);
        let (items, _) = cacher.list("/cm/ns/", Some("/cm/ns/a"), None).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(cacher.count("/cm/"), 3);
        assert_eq!(cacher.count("/cm/ns/"), 2);
        assert!(Arc::ptr_eq(
            cacher.store(),
            &(f.store.clone() as Arc<dyn Store>)
        ));

        // Waiting for a revision nobody writes times out as Unavailable.
        assert!(matches!(
            cacher
                .wait_for_revision(r2 + 10, Duration::from_millis(50))
                .await,
            Err(StoreError::Unavailable(_))
        ));
    }

    #[tokio::test]
    async fn list_at_older_revision_undoes_newer_events() {
        let f = fixture(1000);
        let s = &f.store;
        let cacher = Cacher::start(s.clone(), 100).await.unwrap();
        let ra = s
            .create("/cm/ns/a", obj("a", json!({}), "a1"))
            .await
            .unwrap();
        let rb = s
            .create("/cm/ns/b", obj("b", json!({}), "b1"))
            .await
            .unwrap();
        let snapshot = rb;
        let ra2 = s
            .update("/cm/ns/a", obj("a", json!({}), "a2"), ra)
            .await
            .unwrap();
        s.delete("/cm/ns/b", None).await.unwrap();
        let rc = s
            .create("/cm/ns/c", obj("c", json!({}), "c1"))
            .await
            .unwrap();
        cacher.wait_for_revision(rc, WAIT).await.unwrap();

        let (now, _) = cacher.list("/cm/ns/", None, None).unwrap();
        let now: Vec<_> = now.iter().map(|o| (o.key.as_str(), data(o))).collect();
        assert_eq!(
            now,
            [
                ("/cm/ns/a", "a2".to_string()),
                ("/cm/ns/c", "c1".to_string())
            ]
        );

        let (old, at) = cacher.list("/cm/ns/", None, Some(snapshot)).unwrap();
        assert_eq!(at, snapshot);
        let old_view: Vec<_> = old
            .iter()
            .map(|o| (o.key.as_str(), data(o), o.revision))
            .collect();
        assert_eq!(
            old_view,
            [
                ("/cm/ns/a", "a1".to_string(), ra),
                ("/cm/ns/b", "b1".to_string(), rb)
            ]
        );
        assert_eq!(rv(&old[0]), ra.to_string());

        let (mid, _) = cacher.list("/cm/ns/", None, Some(ra2)).unwrap();
        assert_eq!(mid.len(), 2);
        assert_eq!(data(&mid[0]), "a2");
        let (paged, _) = cacher
            .list("/cm/ns/", Some("/cm/ns/a"), Some(snapshot))
            .unwrap();
        assert_eq!(paged.len(), 1);
        assert_eq!(paged[0].key, "/cm/ns/b");
        let (empty, _) = cacher.list("/cm/ns/", None, Some(0)).unwrap();
        assert!(empty.is_empty());
        assert!(matches!(
            cacher.list("/cm/ns/", None, Some(rc + 1)),
            Err(StoreError::FutureRevision { .. })
        ));
    }

    #[tokio::test]
    async fn watch_replays_then_streams_live_in_order() {
        let f = fixture(1000);
        let s = &f.store;
        let cacher = Cacher::start(s.clone(), 100).await.unwrap();
        let r1 = s
            .create("/cm/ns/a", obj("a", json!({}), "1"))
            .await
            .unwrap();
        s.create("/secrets/ns/x", obj("x", json!({}), "1"))
            .await
            .unwrap();
        let r3 = s
            .update("/cm/ns/a", obj("a", json!({}), "2"), r1)
            .await
            .unwrap();
        cacher.wait_for_revision(r3, WAIT).await.unwrap();

        let mut w = cacher.watch("/cm/", 0).unwrap();
        let e = next(&mut w).await;
        assert_eq!((e.kind, e.revision), (CacheEventKind::Added, r1));
        assert!(e.prev.is_none());
        let e = next(&mut w).await;
        assert_eq!((e.kind, e.revision), (CacheEventKind::Modified, r3));
        assert_eq!(e.prev.as_ref().map(|p| p.revision), Some(r1));
        assert_eq!(data(&e.object), "2");

        let r4 = s
            .create("/cm/ns/b", obj("b", json!({}), "1"))
            .await
            .unwrap();
        s.create("/secrets/ns/y", obj("y", json!({}), "1"))
            .await
            .unwrap();
        let r6 = s
            .create("/cm/ns/c", obj("c", json!({}), "1"))
            .await
            .unwrap();
        assert_eq!(next(&mut w).await.revision, r4);
        let e = next(&mut w).await;
        assert_eq!((e.revision, e.object.key.as_str()), (r6, "/cm/ns/c"));
        assert_eq!(w.bookmark_revision(), r6);

        // Resuming from a revision replays only what came after it.
        let mut w2 = cacher.watch("/cm/ns/", r3).unwrap();
        assert_eq!(next(&mut w2).await.revision, r4);
        assert_eq!(next(&mut w2).await.revision, r6);

        // A watch from a future revision starts when the cache gets there.
        let mut w3 = cacher.watch("/cm/", r6 + 1).unwrap();
        s.create("/cm/ns/d", obj("d", json!({}), "1"))
            .await
            .unwrap();
        let r8 = s
            .create("/cm/ns/e", obj("e", json!({}), "1"))
            .await
            .unwrap();
        assert_eq!(next(&mut w3).await.revision, r8);
    }

    /// The ring is shared, but a resource none of whose events was dropped still reaches back
    /// to where the cache started, however many other events went through.
    #[tokio::test]
    async fn a_quiet_resource_resumes_from_before_a_busy_one_filled_the_ring() {
        let f = fixture(1000);
        let s = &f.store;
        let cacher = Cacher::start(s.clone(), 3).await.unwrap();
        let quiet = s
            .create("/core/configmaps/ns/a", obj("a", json!({}), "1"))
            .await
            .unwrap();
        let mut last = 0;
        for i in 0..6 {
            last = s
                .create(&format!("/core/events/ns/{i}"), obj("e", json!({}), "1"))
                .await
                .unwrap();
        }
        cacher.wait_for_revision(last, WAIT).await.unwrap();
        // The configmap's event was dropped: resuming from before it is too old, from it is not.
        assert!(matches!(
            cacher.watch("/core/configmaps/", quiet - 1),
            Err(StoreError::Compacted { oldest, .. }) if oldest == quiet
        ));
        let mut w = cacher.watch("/core/configmaps/ns/", quiet).unwrap();
        assert!(cacher.list("/core/configmaps/", None, Some(quiet)).is_ok());
        // The busy resource and cross-resource prefixes reach back only as far as the ring.
        assert!(cacher.watch("/core/events/", quiet).is_err());
        assert!(cacher.watch("/", quiet).is_err());
        assert!(cacher.watch("/core/events/", last - 3).is_ok());
        let next_quiet = s
            .create("/core/configmaps/ns/b", obj("b", json!({}), "1"))
            .await
            .unwrap();
        assert_eq!(next(&mut w).await.revision, next_quiet);
    }

    #[test]
    fn resources_are_the_first_two_segments() {
        assert_eq!(
            resource_of("/core/configmaps/ns/a"),
            Some("/core/configmaps")
        );
        assert_eq!(resource_of("/core/configmaps/"), Some("/core/configmaps"));
        assert_eq!(resource_of("/core/namespaces"), Some("/core/namespaces"));
        assert_eq!(resource_of("/core/"), None);
        assert_eq!(resource_of("/"), None);
        assert_eq!(resource_of(""), None);
    }

    #[tokio::test]
    async fn too_old_revision_is_compacted() {
        let f = fixture(1000);
        let s = &f.store;
        let cacher = Cacher::start(s.clone(), 3).await.unwrap();
        let mut last = 0;
        for i in 0..6 {
            last = s
                .create(&format!("/cm/ns/{i}"), obj("x", json!({}), "1"))
                .await
                .unwrap();
        }
        cacher.wait_for_revision(last, WAIT).await.unwrap();
        // The ring holds revisions 4..=6, so it reaches back to 3.
        assert!(cacher.watch("/cm/", 3).is_ok());
        assert_eq!(
            cacher.watch("/cm/", 2).err(),
            Some(StoreError::Compacted {
                requested: 2,
                oldest: 3
            })
        );
        assert!(cacher.list("/cm/", None, Some(3)).is_ok());
        assert!(matches!(
            cacher.list("/cm/", None, Some(2)),
            Err(StoreError::Compacted { .. })
        ));
    }

    #[tokio::test]
    async fn delete_event_carries_last_object_at_deletion_revision() {
        let f = fixture(1000);
        let s = &f.store;
        let cacher = Cacher::start(s.clone(), 100).await.unwrap();
        let (_, rev, mut w) = cacher.list_and_watch("/cm/");
        let rc = s
            .create("/cm/ns/a", obj("a", json!({"tier": "x"}), "last"))
            .await
            .unwrap();
        let (rd, _) = s.delete("/cm/ns/a", Some(rc)).await.unwrap();
        assert!(rev < rc);
        assert_eq!(next(&mut w).await.kind, CacheEventKind::Added);
        let e = next(&mut w).await;
        assert_eq!(e.kind, CacheEventKind::Deleted);
        assert_eq!(e.revision, rd);
        assert_eq!(e.object.revision, rd);
        assert_eq!(e.object.create_revision, rc);
        assert_eq!(rv(&e.object), rd.to_string());
        assert_eq!(data(&e.object), "last");
        assert_eq!(e.object.labels.get("tier").map(String::as_str), Some("x"));
        assert_eq!(e.prev.as_ref().map(|p| p.revision), Some(rc));
        assert!(cacher.get("/cm/ns/a").is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn list_and_watch_never_misses_or_duplicates() {
        let f = fixture(100_000);
        let s = f.store.clone();
        let cacher = Cacher::start(s.clone(), 100_000).await.unwrap();
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let s = s.clone();
                tokio::spawn(async move {
                    for i in 0..60 {
                        let key = format!("/cm/ns/{w}-{}", i % 10);
                        match s.get(&key).await.unwrap() {
                            None => s.create(&key, obj("x", json!({}), &i.to_string())).await,
                            Some(_) if i % 7 == 0 => s.delete(&key, None).await.map(|r| r.0),
                            Some(kv) => {
                                s.update(&key, obj("x", json!({}), &i.to_string()), kv.mod_revision)
                                    .await
                            }
                        }
                        .unwrap();
                    }
                })
            })
            .collect();
        let mut snapshots = Vec::new();
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(3)).await;
            snapshots.push(cacher.list_and_watch("/cm/"));
        }
        for w in writers {
            w.await.unwrap();
        }
        let end = s.current_revision().await.unwrap();
        cacher.wait_for_revision(end, WAIT).await.unwrap();
        let (expected, _) = cacher.list("/cm/", None, None).unwrap();
        for (items, rev, mut w) in snapshots {
            let mut state: BTreeMap<String, Arc<CachedObject>> =
                items.into_iter().map(|o| (o.key.clone(), o)).collect();
            // Every write is under /cm/, so revisions must follow each other exactly.
            let mut want = rev + 1;
            while want <= end {
                let e = next(&mut w).await;
                assert_eq!(e.revision, want);
                want += 1;
                match e.kind {
                    CacheEventKind::Deleted => {
                        assert!(state.remove(&e.object.key).is_some());
                    }
                    CacheEventKind::Added => {
                        assert!(state.insert(e.object.key.clone(), e.object).is_none());
                    }
                    CacheEventKind::Modified => {
                        assert!(state.insert(e.object.key.clone(), e.object).is_some());
                    }
                }
            }
            assert_eq!(w.bookmark_revision(), end);
            let got: Vec<_> = state
                .values()
                .map(|o| (o.key.clone(), o.revision))
                .collect();
            let want: Vec<_> = expected
                .iter()
                .map(|o| (o.key.clone(), o.revision))
                .collect();
            assert_eq!(got, want);
        }
    }

    #[tokio::test]
    async fn slow_watcher_is_ended_with_an_error() {
        let f = fixture(10_000);
        let s = &f.store;
        let cacher = Cacher::start(s.clone(), 10).await.unwrap();
        let mut slow = cacher.watch("/cm/", cacher.revision()).unwrap();
        let total = WATCH_BUFFER + 10;
        let tasks: Vec<_> = (0..total)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move {
                    s.create(&format!("/cm/ns/{i}"), obj("x", json!({}), "1"))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut last = 0;
        for t in tasks {
            last = last.max(t.await.unwrap());
        }
        cacher.wait_for_revision(last, WAIT).await.unwrap();
        let mut received = 0;
        let error = loop {
            match slow.next().await {
                Some(Ok(_)) => received += 1,
                Some(Err(e)) => break e,
                None => panic!("ended without an error"),
            }
        };
        assert_eq!(received, WATCH_BUFFER);
        assert!(matches!(error, StoreError::Unavailable(_)));
        assert!(slow.next().await.is_none());
        // The bookmark does not claim the events this watcher never got.
        assert!(slow.bookmark_revision() < last);
        // Other watchers and the cache are unaffected.
        assert_eq!(cacher.count("/cm/"), total);
    }

    /// A cache over the fixture's store wrapped in a [`FlakyStore`].
    async fn flaky_cacher(f: &Fixture) -> (Arc<FlakyStore>, Arc<Cacher>) {
        let flaky = Arc::new(FlakyStore {
            inner: f.store.clone(),
            lose_events: Arc::default(),
            compact_next_watch: Default::default(),
            feeds: Mutex::default(),
        });
        let cacher = Cacher::start(flaky.clone(), 100).await.unwrap();
        (flaky, cacher)
    }

    /// Wraps a store so a test can break its watch and lose events.
    struct FlakyStore {
        inner: Arc<EmbeddedStore>,
        /// While set, forwarded watches drop events (as if they were missed).
        lose_events: Arc<std::sync::atomic::AtomicBool>,
        /// The next watch fails with Compacted (as if history had moved on).
        compact_next_watch: std::sync::atomic::AtomicBool,
        /// Senders of the watches handed out, to inject errors.
        feeds: Mutex<Vec<mpsc::Sender<Result<StoreEvent, StoreError>>>>,
    }

    #[async_trait::async_trait]
    impl Store for FlakyStore {
        async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
            self.inner.get(key).await
        }
        async fn list(
            &self,
            prefix: &str,
            start_after: Option<&str>,
            limit: usize,
            at_revision: Option<Revision>,
        ) -> Result<crate::storage::ListResult, StoreError> {
            self.inner
                .list(prefix, start_after, limit, at_revision)
                .await
        }
        async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
            self.inner.create(key, value).await
        }
        async fn update(
            &self,
            key: &str,
            value: Bytes,
            rev: Revision,
        ) -> Result<Revision, StoreError> {
            self.inner.update(key, value, rev).await
        }
        async fn delete(
            &self,
            key: &str,
            rev: Option<Revision>,
        ) -> Result<(Revision, KeyValue), StoreError> {
            self.inner.delete(key, rev).await
        }
        async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchReceiver, StoreError> {
            if self.compact_next_watch.swap(false, Ordering::SeqCst) {
                return Err(StoreError::Compacted {
                    requested: after,
                    oldest: after + 1,
                });
            }
            let mut inner = self.inner.watch(prefix, after).await?;
            let (tx, rx) = mpsc::channel(16);
            lock(&self.feeds).push(tx.clone());
            let lose = Arc::clone(&self.lose_events);
            tokio::spawn(async move {
                while let Some(ev) = inner.recv().await {
                    if lose.load(Ordering::SeqCst) {
                        continue;
                    }
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
            });
            Ok(rx)
        }
        async fn current_revision(&self) -> Result<Revision, StoreError> {
            self.inner.current_revision().await
        }
    }

    #[tokio::test]
    async fn rewatches_after_a_watch_error_without_relisting() {
        let f = fixture(1000);
        let (flaky, cacher) = flaky_cacher(&f).await;
        let mut w = cacher.watch("/cm/", 0).unwrap();
        let r1 = flaky
            .create("/cm/ns/a", obj("a", json!({}), "1"))
            .await
            .unwrap();
        assert_eq!(next(&mut w).await.revision, r1);
        let feed = lock(&flaky.feeds).last().cloned().unwrap();
        feed.send(Err(StoreError::Unavailable("lagged".into())))
            .await
            .unwrap();
        let r2 = flaky
            .create("/cm/ns/b", obj("b", json!({}), "1"))
            .await
            .unwrap();
        // The cache resumed from its revision: the watcher goes on without a gap.
        assert_eq!(next(&mut w).await.revision, r2);
        cacher.wait_for_revision(r2, WAIT).await.unwrap();
        assert!(cacher.get("/cm/ns/b").is_some());
    }

    /// A cache that missed events (a stalled watch) is behind the store; a read through it
    /// gets the store's current object, stamped with its revision as the cache would.
    #[tokio::test]
    async fn a_read_through_gets_what_a_stalled_cache_has_not_seen() {
        let f = fixture(1000);
        let (flaky, cacher) = flaky_cacher(&f).await;
        let r1 = flaky
            .create("/cm/ns/a", obj("a", json!({}), "1"))
            .await
            .unwrap();
        cacher.wait_for_revision(r1, WAIT).await.unwrap();
        flaky.lose_events.store(true, Ordering::SeqCst);
        let r2 = flaky
            .update("/cm/ns/a", obj("a", json!({}), "2"), r1)
            .await
            .unwrap();
        assert!(cacher
            .wait_for_revision(r2, Duration::from_millis(100))
            .await
            .is_err());
        let stale = cacher.get("/cm/ns/a").unwrap();
        assert_eq!(stale.revision, r1);
        let fresh = cacher.read_through("/cm/ns/a").await.unwrap().unwrap();
        assert_eq!(fresh.revision, r2);
        let value: serde_json::Value = serde_json::from_slice(&fresh.bytes).unwrap();
        assert_eq!(value["metadata"]["resourceVersion"], r2.to_string());
        assert_eq!(value["data"]["v"], "2", "{value}");
        assert!(cacher.read_through("/cm/ns/gone").await.unwrap().is_none());
        // A list through it likewise, page after page at one revision.
        for i in 0..(LOAD_PAGE + 3) {
            flaky
                .create(&format!("/cm/ns/b{i:04}"), obj("b", json!({}), "1"))
                .await
                .unwrap();
        }
        let (objects, revision) = cacher.list_through("/cm/ns/", None, None).await.unwrap();
        assert_eq!(objects.len(), LOAD_PAGE + 4);
        assert_eq!(revision, flaky.current_revision().await.unwrap());
        assert_eq!(objects[0].key, "/cm/ns/a");
        assert_eq!(
            objects[0].revision, r2,
            "the store's, not the stale cache's"
        );
        let (after_a, _) = cacher
            .list_through("/cm/ns/", Some("/cm/ns/a"), Some(revision))
            .await
            .unwrap();
        assert_eq!(after_a.len(), LOAD_PAGE + 3);
    }

    /// etcd deletes every key of an expired lease in one transaction: one revision, several
    /// events. Each is applied; one repeated after a re-watch is not applied twice.
    #[tokio::test]
    async fn several_events_of_one_revision_are_all_applied() {
        let f = fixture(1000);
        let (flaky, cacher) = flaky_cacher(&f).await;
        let mut w = cacher.watch("/cm/", 0).unwrap();
        let mut last = 0;
        for name in ["a", "b", "c"] {
            last = flaky
                .create(&format!("/cm/ns/{name}"), obj(name, json!({}), "1"))
                .await
                .unwrap();
            assert_eq!(next(&mut w).await.revision, last);
        }
        let feed = lock(&flaky.feeds).last().cloned().unwrap();
        let deleted = |name: &str| StoreEvent {
            kind: EventKind::Deleted,
            key: format!("/cm/ns/{name}"),
            value: Bytes::new(),
            prev_value: Some(obj(name, json!({}), "1")),
            revision: last + 1,
        };
        for name in ["a", "b", "a"] {
            feed.send(Ok(deleted(name))).await.unwrap();
        }
        for name in ["a", "b"] {
            let event = next(&mut w).await;
            assert_eq!(
                (event.kind, event.revision),
                (CacheEventKind::Deleted, last + 1)
            );
            assert_eq!(event.object.key, format!("/cm/ns/{name}"), "{name}");
        }
        cacher.wait_for_revision(last + 1, WAIT).await.unwrap();
        assert!(cacher.get("/cm/ns/a").is_none());
        assert!(cacher.get("/cm/ns/b").is_none());
        assert!(cacher.get("/cm/ns/c").is_some());
    }

    #[tokio::test]
    async fn relists_when_store_history_is_gone() {
        let f = fixture(1000);
        let (flaky, cacher) = flaky_cacher(&f).await;
        let mut w = cacher.watch("/cm/", 0).unwrap();
        let r1 = flaky
            .create("/cm/ns/a", obj("a", json!({}), "1"))
            .await
            .unwrap();
        assert_eq!(next(&mut w).await.revision, r1);

        // Events the cache never sees, then a broken watch whose history is gone.
        flaky.lose_events.store(true, Ordering::SeqCst);
        flaky
            .create("/cm/ns/b", obj("b", json!({}), "1"))
            .await
            .unwrap();
        let r3 = flaky
            .update("/cm/ns/a", obj("a", json!({}), "2"), r1)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(cacher.revision(), r1);
        flaky.lose_events.store(false, Ordering::SeqCst);
        flaky.compact_next_watch.store(true, Ordering::SeqCst);
        let feed = lock(&flaky.feeds).last().cloned().unwrap();
        feed.send(Err(StoreError::Unavailable("lagged".into())))
            .await
            .unwrap();

        cacher.wait_for_revision(r3, WAIT).await.unwrap();
        assert_eq!(data(&cacher.get("/cm/ns/a").unwrap()), "2");
        assert!(cacher.get("/cm/ns/b").is_some());
        // Watchers could not be told what was missed: they end with 410.
        let end = tokio::time::timeout(WAIT, w.next()).await.unwrap();
        assert!(matches!(end, Some(Err(StoreError::Compacted { .. }))));
        assert!(matches!(
            cacher.watch("/cm/", r1),
            Err(StoreError::Compacted { .. })
        ));
        // And the cache keeps following the store.
        let r4 = flaky
            .create("/cm/ns/c", obj("c", json!({}), "1"))
            .await
            .unwrap();
        cacher.wait_for_revision(r4, WAIT).await.unwrap();
        assert!(cacher.get("/cm/ns/c").is_some());
    }

    #[tokio::test]
    async fn dropping_the_cache_ends_watchers() {
        let f = fixture(1000);
        let cacher = Cacher::start(f.store.clone(), 100).await.unwrap();
        let mut w = cacher.watch("/", 0).unwrap();
        drop(cacher);
        assert!(matches!(
            w.next().await,
            Some(Err(StoreError::Unavailable(_)))
        ));
        assert!(w.next().await.is_none());
    }
}

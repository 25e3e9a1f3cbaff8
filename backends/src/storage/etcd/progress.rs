//! Which revision the store's own keys have reached, for [`Store::current_revision`].
//!
//! etcd's revision is cluster-wide: writes outside the prefix (the compactor's
//! `compact_rev_key`, another kubegate or kube-apiserver on the same cluster) raise it
//! without producing an event under the prefix. The watch cache waits for "the store's
//! current revision" before consistent reads, so answering etcd's global revision would
//! make it wait for an event that never comes. Like kube-apiserver's consistent reads from
//! cache (which use etcd's progress notifications), a long-lived watch over the prefix here
//! tracks the last write under it; [`Progress::current`] asks that watch for a progress
//! notification until it has caught up with etcd's global revision, then answers the last
//! write it saw.
//!
//! [`Store::current_revision`]: crate::storage::Store::current_revision

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::WatchOptions;
use tokio::sync::{watch as signal, Notify};

use super::{from_rev, strip_root, to_rev, Members};
use crate::storage::{Revision, StoreError};

/// How often a caller waiting in [`Progress::current`] asks again (etcd answers a progress
/// request only while the watch is caught up). Events arriving in between do not trigger
/// more requests: under write load they bring the tracker up to date by themselves, and one
/// request per interval is all a prefix without writes needs.
const PROGRESS_RETRY: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long opening the tracking watch may take before another member is tried.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// Shared between the store and the tracking task.
pub(super) struct Progress {
    /// The revision of the last write under the prefix seen so far, by the watch or as this
    /// process's own acknowledged write (which may put it ahead of `complete` until the
    /// watch catches up).
    last_write: AtomicU64,
    /// Every event under the prefix up to this revision has been seen.
    complete: signal::Sender<Revision>,
    /// Wakes the task to send a progress request.
    nudge: Notify,
}

impl Progress {
    /// Starts at `revision`, etcd's revision when the store connected: any list made after
    /// connecting reads at or after it, so it is a safe "last write" to start from.
    pub(super) fn new(revision: Revision) -> Arc<Progress> {
        Arc::new(Progress {
            last_write: AtomicU64::new(revision),
            complete: signal::channel(revision).0,
            nudge: Notify::new(),
        })
    }

    /// The last write under the prefix once the tracker has seen everything up to
    /// `global` (etcd's current revision); [`StoreError::Unavailable`] after `timeout`.
    pub(super) async fn current(
        &self,
        global: Revision,
        timeout: Duration,
    ) -> Result<Revision, StoreError> {
        let mut complete = self.complete.subscribe();
        let reached = tokio::time::timeout(timeout, async {
            let mut next_nudge = tokio::time::Instant::now();
            loop {
                if *complete.borrow_and_update() >= global {
                    return;
                }
                if tokio::time::Instant::now() >= next_nudge {
                    self.nudge.notify_one();
                    next_nudge = tokio::time::Instant::now() + PROGRESS_RETRY;
                }
                let _ = tokio::time::timeout_at(next_nudge, complete.changed()).await;
            }
        })
        .await;
        match reached {
            Ok(()) => Ok(self.last_write.load(Ordering::Acquire)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "etcd did not confirm watch progress to revision {global} within {timeout:?} (at {})",
                *self.complete.borrow()
            ))),
        }
    }

    /// A write this process made under the prefix and etcd acknowledged at `revision`: later
    /// answers include it even before the tracking watch delivers its event. etcd before
    /// 3.4.31 / 3.5.8 may send a progress notification ahead of events the watch has not
    /// delivered yet (etcd-io/etcd#15220), which would otherwise answer a revision older than
    /// a write the caller saw acknowledged. Writes of other replicas still rely on the watch.
    pub(super) fn acknowledged(&self, revision: Revision) {
        self.last_write.fetch_max(revision, Ordering::AcqRel);
    }

    /// The last write seen, without waiting (for a closed store).
    pub(super) fn last_write(&self) -> Revision {
        self.last_write.load(Ordering::Acquire)
    }

    pub(super) fn saw(&self, last_write: Option<Revision>, complete: Revision) {
        if let Some(w) = last_write {
            self.last_write.fetch_max(w, Ordering::AcqRel);
        }
        self.complete.send_if_modified(|c| {
            let advance = complete > *c;
            if advance {
                *c = complete;
            }
            advance
        });
    }
}

/// Follows `[key, end)` from the tracker's complete revision until `shutdown`; reconnects
/// with backoff after any failure, or at once when its member stops answering.
pub(super) async fn run(
    members: Arc<Members>,
    root: String,
    key: Vec<u8>,
    end: Vec<u8>,
    progress: Arc<Progress>,
    mut shutdown: signal::Receiver<bool>,
) {
    let mut backoff = PROGRESS_RETRY;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let from = progress.complete.borrow().saturating_add(1);
        let options = WatchOptions::new()
            .with_range(end.clone())
            .with_start_revision(to_rev(from));
        let (member, mut went_down) = members.pick();
        let mut client = member.watch();
        // Bounded: opening on a member that hangs, not yet seen down, would wait for the
        // connection's keepalive while consistent reads wait for this watch.
        let opened = tokio::select! {
            _ = shutdown.changed() => return,
            () = &mut went_down => continue,
            opened = tokio::time::timeout(OPEN_TIMEOUT, client.watch(key.clone(), Some(options))) => {
                opened.unwrap_or_else(|_| Err(etcd_client::Error::WatchError(format!(
                    "no answer from {} within {OPEN_TIMEOUT:?}", member.endpoint
                ))))
            }
        };
        match opened {
            Ok(stream) => {
                let (mut requests, mut responses) = stream.split();
                loop {
                    let message = tokio::select! {
                        _ = shutdown.changed() => return,
                        () = &mut went_down => {
                            backoff = PROGRESS_RETRY;
                            break;
                        }
                        _ = progress.nudge.notified() => {
                            if requests.request_progress().await.is_err() {
                                break;
                            }
                            continue;
                        }
                        message = responses.message() => message,
                    };
                    let Ok(Some(response)) = message else { break };
                    backoff = PROGRESS_RETRY;
                    if response.compact_revision() > 0 {
                        // The tracker was away longer than the history lasts: the writes it
                        // missed are unknown, so keep the last known one (an older answer
                        // only makes a consistent read a little less fresh) and go on from
                        // the oldest revision still there.
                        let compacted = from_rev(response.compact_revision());
                        progress.saw(None, compacted.saturating_sub(1));
                        break;
                    }
                    if response.canceled() {
                        break;
                    }
                    let events = response.events();
                    if let Some(last) = events.last().and_then(|e| e.kv()) {
                        let revision = from_rev(last.mod_revision());
                        // Only writes store watches deliver count as the last write: not an
                        // earlier kubegate's keys (see the `layout` module), which they skip.
                        let last_store_write = events
                            .iter()
                            .filter_map(|e| e.kv())
                            .filter(|kv| matches!(strip_root(&root, kv.key()), Ok(Some(_))))
                            .map(|kv| from_rev(kv.mod_revision()))
                            .max();
                        progress.saw(last_store_write, revision);
                    } else if !response.created() {
                        // A progress notification: nothing under the prefix up to here.
                        let revision =
                            from_rev(response.header().map(|h| h.revision()).unwrap_or_default());
                        progress.saw(None, revision);
                    }
                }
            }
            Err(error) => tracing::debug!(%error, "etcd progress watch failed to open"),
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

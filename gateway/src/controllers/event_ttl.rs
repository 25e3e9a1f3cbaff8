//! Event expiry for the embedded store: deletes an Event `--event-ttl` after its last write
//! (create or update), which kube-apiserver gets from etcd leases. On the etcd engine the store
//! attaches those leases itself (`storage::etcd::ExpiringPrefix`) and this controller does not
//! run.
//!
//! The store keeps no wall time per write (a revision is not a time, and an Event's own
//! timestamps are set by its client), so the controller times each write when the watch cache
//! shows it to it: a few milliseconds after the write, never before. Events already stored when
//! kubegate starts are timed from the start, so they go at most one TTL after a restart.
//!
//! Expired Events are deleted through the registry (`delete_internal_at`) with a `resourceVersion`
//! precondition on the revision that was timed: watchers see DELETED, the watch cache follows,
//! and an Event written again meanwhile is kept (the delete fails with a conflict and the newer
//! write is timed afresh). Deadlines are batched like kube's shared leases: an Event goes
//! between TTL and TTL + min(5% of TTL, 60 s) after its last write, never sooner.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kubegate_backends::registry::Registry;
use kubegate_backends::storage::cacher::CacheEventKind;
use kubegate_backends::storage::Revision;
use tokio::time::Instant;

/// Longest wait past a deadline, so expiries close together share one wake-up (kube's
/// `leaseReuseDurationSeconds`).
const MAX_BATCH_WINDOW: Duration = Duration::from_secs(60);
/// Share of the TTL deadlines may be batched by (kube's `leaseReuseDurationPercent`).
const BATCH_FRACTION: f64 = 0.05;
/// When a delete failed for another reason than a newer write (storage unavailable), the
/// Event is tried again this much later.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Deletes in flight at once when many Events expire together.
const PARALLEL_DELETES: usize = 8;
/// Pause before re-listing after the watch ended.
const REWATCH_PAUSE: Duration = Duration::from_millis(200);

/// Runs the controller until `stop` changes.
pub async fn run(
    registry: Arc<Registry>,
    ttl: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let Some(prefix) = registry
        .find("", "events")
        .map(|def| def.collection_prefix(""))
    else {
        tracing::warn!("events are not served; the event TTL controller does not run");
        return;
    };
    let window = batch_window(ttl);
    let mut expiry = Expiry::new(ttl);
    loop {
        let (objects, _, mut watcher) = registry.cacher().list_and_watch(&prefix);
        expiry.resync(
            objects.iter().map(|o| (o.key.as_str(), o.revision)),
            Instant::now(),
        );
        loop {
            let wake = expiry.next_deadline().map(|d| d + window);
            tokio::select! {
                event = watcher.next() => match event {
                    Some(Ok(event)) => match event.kind {
                        CacheEventKind::Added | CacheEventKind::Modified => {
                            expiry.written(&event.object.key, event.revision, Instant::now());
                        }
                        CacheEventKind::Deleted => expiry.removed(&event.object.key),
                    },
                    // The watch fell behind or the cache re-listed: list again (timings of
                    // unchanged Events are kept).
                    Some(Err(_)) | None => break,
                },
                _ = sleep_until(wake) => {
                    let now = Instant::now();
                    let due = expiry.take_due(now);
                    let failed = delete_all(&registry, &prefix, due).await;
                    for (key, revision) in failed {
                        expiry.retry(key, revision, now + RETRY_AFTER);
                    }
                }
                _ = stop.changed() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(REWATCH_PAUSE) => {}
            _ = stop.changed() => return,
        }
    }
}

/// How long past a deadline the controller may wait to batch expiries.
fn batch_window(ttl: Duration) -> Duration {
    ttl.mul_f64(BATCH_FRACTION).min(MAX_BATCH_WINDOW)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Deletes the expired Events; returns those to try again later.
async fn delete_all(
    registry: &Registry,
    prefix: &str,
    due: Vec<(String, Revision)>,
) -> Vec<(String, Revision)> {
    futures::stream::iter(due)
        .map(|(key, revision)| async move {
            let retry = !delete_expired(registry, prefix, &key, revision).await;
            (key, revision, retry)
        })
        .buffer_unordered(PARALLEL_DELETES)
        .filter_map(|(key, revision, retry)| async move { retry.then_some((key, revision)) })
        .collect()
        .await
}

/// Deletes the Event at `key` if it is still at `revision`. False when it should be tried
/// again; a newer write (409) or an Event already gone (404) is done with.
async fn delete_expired(registry: &Registry, prefix: &str, key: &str, revision: Revision) -> bool {
    let Some((namespace, name)) = key
        .strip_prefix(prefix)
        .and_then(|rest| rest.split_once('/'))
    else {
        tracing::warn!(key, "event key outside its namespace layout; not expired");
        return true;
    };
    let Some(def) = registry.find("", "events") else {
        return true;
    };
    match registry
        .delete_internal_at(&def, namespace, name, &revision.to_string())
        .await
    {
        Ok(()) => {
            tracing::debug!(namespace, name, "event expired");
            true
        }
        Err(e) if e.code == 404 || e.code == 409 => true,
        Err(e) => {
            tracing::warn!(
                namespace,
                name,
                status = e.code,
                error = %e.message,
                "deleting an expired event failed; trying again later"
            );
            false
        }
    }
}

/// When each known Event expires: its last write as seen (key and revision) plus the TTL.
#[derive(Debug)]
struct Expiry {
    ttl: Duration,
    entries: HashMap<String, (Revision, Instant)>,
    /// The same deadlines in time order.
    queue: BTreeSet<(Instant, String)>,
}

impl Expiry {
    fn new(ttl: Duration) -> Expiry {
        Expiry {
            ttl,
            entries: HashMap::new(),
            queue: BTreeSet::new(),
        }
    }

    /// `key` was written at `revision`, seen at `now`.
    fn written(&mut self, key: &str, revision: Revision, now: Instant) {
        self.set(key.to_string(), revision, now + self.ttl);
    }

    fn set(&mut self, key: String, revision: Revision, deadline: Instant) {
        if let Some((_, old)) = self.entries.insert(key.clone(), (revision, deadline)) {
            self.queue.remove(&(old, key.clone()));
        }
        self.queue.insert((deadline, key));
    }

    fn removed(&mut self, key: &str) {
        if let Some((_, deadline)) = self.entries.remove(key) {
            self.queue.remove(&(deadline, key.to_string()));
        }
    }

    /// Takes in the Events a fresh list holds: one still at the revision already timed keeps
    /// its deadline; new or rewritten ones are timed from `now` (their write was not seen, so
    /// it happened before); those no longer listed are dropped.
    fn resync<'a>(&mut self, listed: impl Iterator<Item = (&'a str, Revision)>, now: Instant) {
        let mut old = std::mem::take(&mut self.entries);
        self.queue.clear();
        for (key, revision) in listed {
            let deadline = match old.remove(key) {
                Some((seen, deadline)) if seen == revision => deadline,
                _ => now + self.ttl,
            };
            self.set(key.to_string(), revision, deadline);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.queue.first().map(|(deadline, _)| *deadline)
    }

    /// Removes and returns the Events whose deadline is at or before `now`, with the revision
    /// their deadline was computed from.
    fn take_due(&mut self, now: Instant) -> Vec<(String, Revision)> {
        let mut due = Vec::new();
        while let Some((deadline, _)) = self.queue.first() {
            if *deadline > now {
                break;
            }
            let Some((_, key)) = self.queue.pop_first() else {
                break;
            };
            if let Some((revision, _)) = self.entries.remove(&key) {
                due.push((key, revision));
            }
        }
        due
    }

    /// Schedules another attempt at `key` unless a newer write was seen meanwhile.
    fn retry(&mut self, key: String, revision: Revision, at: Instant) {
        if !self.entries.contains_key(&key) {
            self.set(key, revision, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    fn keys(due: &[(String, Revision)]) -> Vec<(&str, Revision)> {
        due.iter().map(|(k, r)| (k.as_str(), *r)).collect()
    }

    #[test]
    fn an_event_expires_ttl_after_its_last_write() {
        let start = Instant::now();
        let mut expiry = Expiry::new(TTL);
        expiry.written("/core/events/ns/a", 5, start);
        expiry.written("/core/events/ns/b", 6, start + Duration::from_secs(10));
        // Rewritten 30 s later: its deadline moves with the write.
        expiry.written("/core/events/ns/a", 7, start + Duration::from_secs(30));
        assert_eq!(
            expiry.next_deadline(),
            Some(start + Duration::from_secs(70))
        );
        assert!(expiry.take_due(start + Duration::from_secs(69)).is_empty());
        assert_eq!(
            keys(&expiry.take_due(start + Duration::from_secs(70))),
            [("/core/events/ns/b", 6)]
        );
        assert_eq!(
            keys(&expiry.take_due(start + Duration::from_secs(95))),
            [("/core/events/ns/a", 7)]
        );
        assert_eq!(expiry.next_deadline(), None);
    }

    #[test]
    fn deleted_events_are_forgotten() {
        let start = Instant::now();
        let mut expiry = Expiry::new(TTL);
        expiry.written("/core/events/ns/a", 5, start);
        expiry.removed("/core/events/ns/a");
        expiry.removed("/core/events/ns/never-seen");
        assert_eq!(expiry.next_deadline(), None);
        assert!(expiry.take_due(start + TTL * 2).is_empty());
    }

    #[test]
    fn a_relist_keeps_the_timing_of_unchanged_events() {
        let start = Instant::now();
        let later = start + Duration::from_secs(20);
        let mut expiry = Expiry::new(TTL);
        expiry.written("/core/events/ns/same", 5, start);
        expiry.written("/core/events/ns/changed", 6, start);
        expiry.written("/core/events/ns/gone", 7, start);
        expiry.resync(
            [
                ("/core/events/ns/same", 5),
                ("/core/events/ns/changed", 9),
                ("/core/events/ns/new", 10),
            ]
            .into_iter(),
            later,
        );
        assert_eq!(
            keys(&expiry.take_due(start + TTL)),
            [("/core/events/ns/same", 5)]
        );
        let mut rest = expiry.take_due(later + TTL);
        rest.sort();
        assert_eq!(
            keys(&rest),
            [("/core/events/ns/changed", 9), ("/core/events/ns/new", 10)]
        );
    }

    #[test]
    fn a_failed_delete_is_retried_unless_the_event_was_written_again() {
        let start = Instant::now();
        let mut expiry = Expiry::new(TTL);
        expiry.written("/core/events/ns/a", 5, start);
        expiry.written("/core/events/ns/b", 6, start);
        let due = expiry.take_due(start + TTL);
        assert_eq!(due.len(), 2);
        // b was written again before the retry was scheduled: its new timing wins.
        expiry.written("/core/events/ns/b", 8, start + TTL);
        let retry_at = start + TTL + RETRY_AFTER;
        for (key, revision) in due {
            expiry.retry(key, revision, retry_at);
        }
        assert_eq!(keys(&expiry.take_due(retry_at)), [("/core/events/ns/a", 5)]);
        assert_eq!(
            keys(&expiry.take_due(start + TTL * 2)),
            [("/core/events/ns/b", 8)]
        );
    }

    #[test]
    fn expiries_are_batched_like_kube_shared_leases() {
        assert_eq!(
            batch_window(Duration::from_secs(2)),
            Duration::from_millis(100)
        );
        assert_eq!(
            batch_window(Duration::from_secs(600)),
            Duration::from_secs(30)
        );
        assert_eq!(batch_window(Duration::from_secs(3600)), MAX_BATCH_WINDOW);
    }
}

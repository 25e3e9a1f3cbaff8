//! Store watches on etcd: one etcd watch (from `after + 1`, with `prev_kv`) per store watch,
//! created and checked for compaction before [`start`] returns, then forwarded event by event
//! into a bounded channel by a task that ends the stream with an error on any failure, or
//! when the member the watch runs on stops answering (its consumer re-watches from the last
//! revision and lands on a member that answers).

use std::sync::Arc;

use bytes::Bytes;
use etcd_client::{Event, EventType, WatchOptions, WatchStream};
use tokio::sync::{mpsc, watch as signal};

use super::{from_rev, key_after, map_error, strip_root, to_rev, EtcdStore, Member, WentDown};
use crate::storage::{EventKind, Revision, StoreError, StoreEvent, WatchReceiver};

/// Events buffered per watch between the forwarding task and the consumer.
const WATCH_BUFFER: usize = 256;

/// Opens the etcd watch for `prefix` after `after` and starts forwarding it.
pub(super) async fn start(
    store: &EtcdStore,
    prefix: &str,
    after: Revision,
) -> Result<WatchReceiver, StoreError> {
    let (key, options) = match store.etcd_range(prefix)? {
        Some((start, end)) => (start, WatchOptions::new().with_range(end)),
        // No store key can match: watch the root key, which is never written.
        None => (store.root.as_bytes().to_vec(), WatchOptions::new()),
    };
    let start_revision = after.saturating_add(1);
    let options = options
        .with_start_revision(to_rev(start_revision))
        .with_prev_key();
    let (opened, member, mut went_down) = store
        .call_on_member("watch", |member| {
            let (mut client, key, options) = (member.watch(), key.clone(), options.clone());
            async move { client.watch(key, Some(options)).await }
        })
        .await?;
    let mut stream = opened.map_err(|e| store.error("watch", e))?;
    let created = tokio::select! {
        created = store.timed("watch", stream.message()) => created?,
        () = &mut went_down => return Err(member_down(&member.endpoint, after)),
    };
    let created = created
        .map_err(|e| store.error("watch", e))?
        .ok_or_else(|| {
            StoreError::Unavailable(format!(
                "etcd ({}) closed the watch stream before creating the watch",
                store.endpoints
            ))
        })?;
    if created.compact_revision() > 0 {
        return Err(StoreError::Compacted {
            requested: after,
            oldest: from_rev(created.compact_revision()),
        });
    }
    if created.canceled() {
        return Err(StoreError::Unavailable(format!(
            "etcd refused the watch: {}",
            created.cancel_reason()
        )));
    }
    // etcd reports a compacted start revision only after "created" (from its background
    // sync); a read at the start revision tells now, so the caller gets `Compacted` from
    // this call and can re-list instead of re-watching in a loop.
    let current = from_rev(created.header().map(|h| h.revision()).unwrap_or_default());
    if start_revision <= current {
        let root = store.root.as_bytes();
        match store
            .range_page(root.to_vec(), &key_after(root), 1, Some(start_revision))
            .await
        {
            Ok(_) => {}
            Err(StoreError::Compacted { oldest, .. }) => {
                return Err(StoreError::Compacted {
                    requested: after,
                    oldest,
                })
            }
            Err(e) => return Err(e),
        }
    }
    let (tx, rx) = mpsc::channel(WATCH_BUFFER);
    let shutdown = store.shutdown.subscribe();
    if *shutdown.borrow() {
        return Err(StoreError::Unavailable("store is closed".into()));
    }
    tokio::spawn(forward(
        stream,
        tx,
        store.root.clone(),
        member,
        went_down,
        after,
        shutdown,
    ));
    Ok(rx)
}

/// The error that ends a watch whose member stopped answering.
fn member_down(endpoint: &str, last: Revision) -> StoreError {
    StoreError::Unavailable(format!(
        "etcd member {endpoint} stopped answering; the watch ends after revision {last} to resume on another member"
    ))
}

/// Maps one etcd event to a store event.
/// Maps one etcd event to a store event; `None` for a key that is no store key (an earlier
/// kubegate's key being moved to kube's layout).
fn store_event(root: &str, event: &Event) -> Result<Option<StoreEvent>, StoreError> {
    let kv = event
        .kv()
        .ok_or_else(|| StoreError::Internal("etcd sent a watch event without a key".into()))?;
    let Some(key) = strip_root(root, kv.key())? else {
        return Ok(None);
    };
    let revision = from_rev(kv.mod_revision());
    let prev_value = event.prev_kv().map(|p| Bytes::copy_from_slice(p.value()));
    Ok(Some(match event.event_type() {
        EventType::Put if kv.create_revision() == kv.mod_revision() => StoreEvent {
            kind: EventKind::Created,
            key,
            value: Bytes::copy_from_slice(kv.value()),
            prev_value: None,
            revision,
        },
        EventType::Put => StoreEvent {
            kind: EventKind::Modified,
            key,
            value: Bytes::copy_from_slice(kv.value()),
            prev_value,
            revision,
        },
        EventType::Delete => StoreEvent {
            kind: EventKind::Deleted,
            key,
            value: Bytes::new(),
            prev_value,
            revision,
        },
    }))
}

/// Forwards etcd's watch responses until the consumer goes, the store closes, or the etcd
/// watch fails (then the last item is the error: `Compacted` when etcd compacted past the
/// watch, `Unavailable` for a lost connection, a cancelled watch or a member that stopped
/// answering).
async fn forward(
    mut stream: WatchStream,
    tx: mpsc::Sender<Result<StoreEvent, StoreError>>,
    root: String,
    member: Arc<Member>,
    mut went_down: WentDown,
    after: Revision,
    mut shutdown: signal::Receiver<bool>,
) {
    let endpoints = &member.endpoint;
    let mut last = after;
    loop {
        let message = tokio::select! {
            _ = tx.closed() => return,
            _ = shutdown.changed() => return,
            () = &mut went_down => {
                let _ = tx.send(Err(member_down(endpoints, last))).await;
                return;
            }
            message = stream.message() => message,
        };
        let response = match message {
            Ok(Some(response)) => response,
            Ok(None) => {
                let _ = tx
                    .send(Err(StoreError::Unavailable(format!(
                        "etcd ({endpoints}) ended the watch after revision {last}"
                    ))))
                    .await;
                return;
            }
            Err(e) => {
                let _ = tx.send(Err(map_error(endpoints, "watch", e))).await;
                return;
            }
        };
        if response.compact_revision() > 0 {
            let _ = tx
                .send(Err(StoreError::Compacted {
                    requested: last,
                    oldest: from_rev(response.compact_revision()),
                }))
                .await;
            return;
        }
        for event in response.events() {
            let event = match store_event(&root, event) {
                Ok(None) => continue,
                Ok(Some(event)) => Ok(event),
                Err(e) => Err(e),
            };
            let failed = event.is_err();
            if let Ok(ev) = &event {
                last = ev.revision;
            }
            if tx.send(event).await.is_err() || failed {
                return;
            }
        }
        if response.canceled() {
            let _ = tx
                .send(Err(StoreError::Unavailable(format!(
                    "etcd cancelled the watch after revision {last}: {}",
                    response.cancel_reason()
                ))))
                .await;
            return;
        }
    }
}

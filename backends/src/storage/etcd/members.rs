//! The etcd members the store talks to: one client per endpoint, requests spread round robin
//! over the members that answer, and a prober that asks every member each second.
//!
//! One balanced gRPC channel over all endpoints (what the etcd client gives) cannot leave a
//! member that hangs: a stopped or wedged etcd process still accepts TCP connections, so the
//! channel keeps sending it requests, and gRPC keepalive notices only after its 30 s + 10 s.
//! Here a member that does not answer a probe within [`PROBE_TIMEOUT`] is marked down: new
//! requests go to the others, and requests and watches already running on it end at once
//! (reads are retried elsewhere, watches resume from their last revision), so a hung member
//! costs seconds, not minutes. It is marked up again when it answers a probe.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, KvClient, LeaseClient, WatchClient};
use tokio::sync::watch as signal;

/// How often every member is probed.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a member may take to answer a probe (a member-local read) before it is marked
/// down. Generous against a busy machine: a false alarm ends reads and watches on a member
/// that was only slow, which costs a retry, and fails writes in flight there.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One etcd member and its clients.
pub(super) struct Member {
    /// The member's client URL, for messages.
    pub(super) endpoint: String,
    kv: KvClient,
    watch: WatchClient,
    lease: LeaseClient,
    /// Whether the member answers: its last probe's outcome, `true` before the first.
    up: signal::Sender<bool>,
}

impl Member {
    pub(super) fn kv(&self) -> KvClient {
        self.kv.clone()
    }

    pub(super) fn watch(&self) -> WatchClient {
        self.watch.clone()
    }

    pub(super) fn lease(&self) -> LeaseClient {
        self.lease.clone()
    }

    pub(super) fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    /// Marks the member down until a probe finds it answering (a request to it failed to
    /// connect or lost its connection). Returns whether it was up.
    pub(super) fn mark_down(&self, reason: &str) -> bool {
        let was_up = self.up.send_replace(false);
        if was_up {
            tracing::warn!(member = %self.endpoint, reason, "etcd member is not answering; requests go to the other members");
        }
        was_up
    }

    fn mark_up(&self) {
        if !self.up.send_replace(true) {
            tracing::info!(member = %self.endpoint, "etcd member answers again");
        }
    }

    /// Completes when the member is marked down. Taken when a request is sent: a member that
    /// is already down (sent to only because no member answers) never completes it, so such
    /// a request runs to its own deadline.
    pub(super) fn went_down(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut up = self.up.subscribe();
        async move {
            if *up.borrow_and_update() && up.wait_for(|up| !*up).await.is_ok() {
                return;
            }
            std::future::pending::<()>().await
        }
    }
}

/// Every configured member.
pub(super) struct Members {
    members: Vec<Arc<Member>>,
    /// Round-robin position.
    next: AtomicUsize,
}

impl Members {
    /// Clients for each endpoint (they connect lazily: nothing is sent yet).
    pub(super) async fn connect(
        endpoints: &[String],
        options: &ConnectOptions,
        max_decoding_message_size: usize,
    ) -> Result<Members, etcd_client::Error> {
        let mut members = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let client = Client::connect([endpoint], Some(options.clone())).await?;
            members.push(Arc::new(Member {
                endpoint: endpoint.clone(),
                kv: client
                    .kv_client()
                    .max_decoding_message_size(max_decoding_message_size),
                watch: client
                    .watch_client()
                    .max_decoding_message_size(max_decoding_message_size),
                lease: client.lease_client(),
                up: signal::channel(true).0,
            }));
        }
        Ok(Members {
            members,
            next: AtomicUsize::new(0),
        })
    }

    /// The member for the next request: the next one in turn that answers, or, when none
    /// does, the next one in turn (the request then waits out its deadline there, or finds
    /// the member back).
    pub(super) fn pick(&self) -> Arc<Member> {
        let count = self.members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let chosen = (0..count)
            .map(|i| &self.members[(start + i) % count])
            .find(|m| m.is_up())
            .unwrap_or(&self.members[start % count]);
        Arc::clone(chosen)
    }

    /// Each member's endpoint and whether it answers, in configuration order.
    pub(super) fn health(&self) -> Vec<(String, bool)> {
        self.members
            .iter()
            .map(|m| (m.endpoint.clone(), m.is_up()))
            .collect()
    }

    /// Probes every member each [`PROBE_INTERVAL`] until `shutdown`, with a serializable
    /// count of `key` (answered by the member itself, so one hung member does not make the
    /// others look down; with `require_leader` a member without a leader fails it).
    pub(super) async fn probe(self: Arc<Self>, key: Vec<u8>, mut shutdown: signal::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(PROBE_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let probes = self.members.iter().map(|member| {
                let (mut kv, key) = (member.kv(), key.clone());
                async move {
                    let options = GetOptions::new().with_count_only().with_serializable();
                    match tokio::time::timeout(PROBE_TIMEOUT, kv.get(key, Some(options))).await {
                        Ok(Ok(_)) => member.mark_up(),
                        Ok(Err(e)) => {
                            member.mark_down(&e.to_string());
                        }
                        Err(_) => {
                            member.mark_down(&format!(
                                "no answer to a probe within {PROBE_TIMEOUT:?}"
                            ));
                        }
                    }
                }
            });
            futures::future::join_all(probes).await;
        }
    }
}

//! The etcd members the store talks to: one client per endpoint, requests spread round robin
//! over the members that answer, and a prober that asks every member each second.
//!
//! One balanced gRPC channel over all endpoints (what the etcd client gives) cannot leave a
//! member that hangs: a stopped or wedged etcd process still accepts TCP connections, so the
//! channel keeps sending it requests, and gRPC keepalive notices only after its 30 s + 10 s.
//! Here a member that does not answer a probe within [`PROBE_TIMEOUT`] is marked down: new
//! requests go to the others, and requests and watches already running on it end at once
//! (reads are retried elsewhere, watches resume from their last revision), so a hung member
//! costs seconds, not minutes. It is marked up again when it answers a probe. A member that
//! answers without a leader only loses new requests while another has one.

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

/// What the last probe of a member found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Health {
    /// It answered (and, with `require_leader`, has a leader).
    Answering,
    /// It answered that it has no leader: an election, or it is cut off from the others.
    /// Requests go elsewhere while another answers, but nothing running on it is cut off:
    /// etcd rides out an election by itself.
    Leaderless,
    /// It did not answer in time, or its connection failed: requests and watches running on
    /// it end.
    Unresponsive,
}

/// One etcd member and its clients.
pub(super) struct Member {
    /// The member's client URL, for messages.
    pub(super) endpoint: String,
    kv: KvClient,
    watch: WatchClient,
    lease: LeaseClient,
    /// Its last probe's outcome, [`Health::Answering`] before the first.
    health: signal::Sender<Health>,
}

/// Completes when the member a request was sent to stops answering (see
/// [`Members::pick`]); never, for a request sent to a member already known not to answer.
pub(super) type WentDown = futures::future::BoxFuture<'static, ()>;

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

    fn health(&self) -> Health {
        *self.health.borrow()
    }

    pub(super) fn is_up(&self) -> bool {
        self.health() == Health::Answering
    }

    /// Marks the member unresponsive until a probe finds it answering (a request to it failed
    /// to connect or lost its connection).
    pub(super) fn mark_down(&self, reason: &str) {
        self.set(Health::Unresponsive, reason);
    }

    fn set(&self, health: Health, reason: &str) {
        let before = self.health.send_replace(health);
        if before == health {
            return;
        }
        match health {
            Health::Answering => {
                tracing::info!(member = %self.endpoint, "etcd member answers again")
            }
            Health::Leaderless => {
                tracing::warn!(member = %self.endpoint, reason, "etcd member has no leader; requests go to the other members")
            }
            Health::Unresponsive => {
                tracing::warn!(member = %self.endpoint, reason, "etcd member is not answering; requests go to the other members")
            }
        }
    }
}

/// The [`WentDown`] of a request sent to a member chosen as answering (or leaderless), from
/// a subscription taken before its state was read, so a change right after is not missed.
fn when_unresponsive(mut health: signal::Receiver<Health>) -> WentDown {
    Box::pin(async move {
        if health
            .wait_for(|h| *h == Health::Unresponsive)
            .await
            .is_err()
        {
            // The store is gone; so is the request.
            std::future::pending::<()>().await
        }
    })
}

/// The [`WentDown`] of a request sent to a member chosen although it does not answer (none
/// did: an outage of every member): not while that lasts, so the request waits out its
/// deadline there or finds the member back; but once the member has answered again, when it
/// next stops answering. A watch opened during an outage outlives it, and must still leave
/// its member when that one later hangs.
fn once_it_answers_again(mut health: signal::Receiver<Health>) -> WentDown {
    Box::pin(async move {
        let back = health
            .wait_for(|h| *h != Health::Unresponsive)
            .await
            .is_ok();
        if !back
            || health
                .wait_for(|h| *h == Health::Unresponsive)
                .await
                .is_err()
        {
            // The store is gone; so is the request.
            std::future::pending::<()>().await
        }
    })
}

/// The [`WentDown`] of a request to the only member: never, so it runs to its own deadline.
fn never() -> WentDown {
    Box::pin(std::future::pending())
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
                health: signal::channel(Health::Answering).0,
            }));
        }
        Ok(Members {
            members,
            next: AtomicUsize::new(0),
        })
    }

    /// The member for the next request, and what completes when it stops answering: the
    /// next one in turn that answers; else the next one without a leader (an election may
    /// be ending); else the next one in turn (the request waits out its deadline there, or
    /// finds the member back).
    pub(super) fn pick(&self) -> (Arc<Member>, WentDown) {
        let count = self.members.len();
        if count == 1 {
            // Nowhere else to go: a member that stalls (a slow disk) is waited for, as
            // before, rather than having its writes cut off.
            return (Arc::clone(&self.members[0]), never());
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let in_turn = || (0..count).map(move |i| &self.members[(start + i) % count]);
        // Subscribed before the state is read, so a member marked down between the choice
        // and the request is still cut off.
        for wanted in [Health::Answering, Health::Leaderless] {
            for member in in_turn() {
                let health = member.health.subscribe();
                if *health.borrow() == wanted {
                    return (Arc::clone(member), when_unresponsive(health));
                }
            }
        }
        let member = &self.members[start % count];
        (
            Arc::clone(member),
            once_it_answers_again(member.health.subscribe()),
        )
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
                        Ok(Ok(_)) => member.set(Health::Answering, ""),
                        // etcd answered, so the member runs; without a leader it cannot
                        // serve requests now, but what it is handling may still complete.
                        Ok(Err(e)) if e.to_string().contains("etcdserver:") => {
                            member.set(Health::Leaderless, &e.to_string());
                        }
                        Ok(Err(e)) => member.mark_down(&e.to_string()),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Members on addresses nothing listens on (clients connect lazily, so none is tried).
    async fn members(count: u16) -> Members {
        let endpoints: Vec<String> = (1..=count)
            .map(|i| format!("http://127.0.0.1:{i}"))
            .collect();
        Members::connect(&endpoints, &ConnectOptions::new(), 1 << 20)
            .await
            .unwrap()
    }

    async fn fires(went_down: WentDown) -> bool {
        tokio::time::timeout(Duration::from_millis(100), went_down)
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_request_on_a_member_that_stops_answering_is_cut_off() {
        let members = members(3).await;
        let (member, went_down) = members.pick();
        member.mark_down("test");
        assert!(fires(went_down).await);
        // New requests go round robin over the others only.
        for _ in 0..6 {
            assert_ne!(members.pick().0.endpoint, member.endpoint);
        }
        // A member without a leader loses new requests but cuts nothing off.
        let (other, went_down) = members.pick();
        other.set(Health::Leaderless, "test");
        assert!(!fires(went_down).await);
        let (third, _) = members.pick();
        assert!(third.endpoint != member.endpoint && third.endpoint != other.endpoint);
        // None answering: picked anyway, and not cut off while the outage lasts...
        third.mark_down("test");
        other.mark_down("test");
        let (picked, mut went_down) = members.pick();
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut went_down)
                .await
                .is_err()
        );
        // ...but once it answers again, cut off when it next stops (a watch opened during the
        // outage leaves a member that hangs later).
        picked.set(Health::Answering, "test");
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut went_down)
                .await
                .is_err()
        );
        picked.mark_down("test");
        assert!(fires(went_down).await);
    }

    #[tokio::test]
    async fn a_single_member_is_never_cut_off() {
        let members = members(1).await;
        let (member, went_down) = members.pick();
        member.mark_down("test");
        assert!(!fires(went_down).await);
    }
}

//! Keys that expire: etcd leases attached to every write under a configured prefix, the way
//! kube-apiserver keeps Events for `--event-ttl` (the events registry's `TTLFunc` gives the TTL
//! on create and on every update; `storage/etcd3/lease_manager.go` grants the leases).
//!
//! Each write of such a key carries a lease, so etcd deletes the key TTL after its last write
//! (a plain delete: watchers get DELETED with the last value, and every replica's watch cache
//! follows). Granting a lease is a round trip, so as in kube one lease is shared by the writes
//! of a short window: a lease is granted for `ttl + reuse` seconds (reuse = 5% of the TTL, at
//! most 60 s) and reused while it still has between `ttl` and `ttl + reuse` seconds left, and
//! for at most [`MAX_OBJECTS_PER_LEASE`] writes. A key therefore lives between TTL and
//! TTL + reuse after its last write, never less.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::StoreError;

/// Longest extra lifetime a shared lease adds (kube's `leaseReuseDurationSeconds`).
const MAX_REUSE_SECONDS: i64 = 60;
/// Extra lifetime as a share of the TTL (kube's `leaseReuseDurationPercent`).
const REUSE_FRACTION: f64 = 0.05;
/// Writes attached to one lease before a new one is granted (kube's
/// `leaseMaxAttachedObjectCount`): revoking or expiring a lease with very many keys is one
/// large etcd transaction.
const MAX_OBJECTS_PER_LEASE: u32 = 1000;

/// A store-key prefix whose keys expire `ttl` after their last write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiringPrefix {
    /// Store keys starting with this (e.g. `/core/events/`) get a lease on every write.
    pub prefix: String,
    pub ttl: Duration,
}

/// A granted lease kept for reuse.
#[derive(Debug, Clone, Copy)]
struct Granted {
    id: i64,
    /// When etcd will expire it, by the local clock at grant time (the request's start, so
    /// never later than etcd's own deadline).
    expires: Instant,
    attached: u32,
}

/// Grants and reuses leases for the expiring prefixes.
pub(super) struct Leases {
    prefixes: Vec<ExpiringPrefix>,
    /// The lease being reused, per TTL in seconds. An async mutex: concurrent writers wait for
    /// one grant instead of each asking etcd for a lease.
    granted: tokio::sync::Mutex<HashMap<i64, Granted>>,
}

/// kube counts the TTL in whole seconds; etcd leases cannot be shorter than one.
pub(super) fn ttl_seconds(ttl: Duration) -> i64 {
    let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(seconds.max(1)).unwrap_or(i64::MAX)
}

/// How much longer than the TTL a shared lease lives.
fn reuse_seconds(ttl: i64) -> i64 {
    // Truncated as kube does: short TTLs get no reuse window (a lease per write).
    ((REUSE_FRACTION * ttl as f64) as i64).min(MAX_REUSE_SECONDS)
}

impl Leases {
    pub(super) fn new(prefixes: Vec<ExpiringPrefix>) -> Leases {
        Leases {
            prefixes,
            granted: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The expiring prefixes.
    pub(super) fn prefixes(&self) -> Vec<String> {
        self.prefixes.iter().map(|p| p.prefix.clone()).collect()
    }

    /// The TTL in seconds for writes of `key`, if it is under an expiring prefix.
    pub(super) fn ttl_for(&self, key: &str) -> Option<i64> {
        self.prefixes
            .iter()
            .find(|p| key.starts_with(&p.prefix))
            .map(|p| ttl_seconds(p.ttl))
    }

    /// A lease that keeps a key written now for at least `ttl` seconds: the shared one while it
    /// fits, else a new grant (`grant` runs the request, with the store's timeout and retries).
    pub(super) async fn lease<F, Fut>(&self, ttl: i64, grant: F) -> Result<i64, StoreError>
    where
        F: FnOnce(i64) -> Fut,
        Fut: std::future::Future<Output = Result<etcd_client::LeaseGrantResponse, StoreError>>,
    {
        let mut granted = self.granted.lock().await;
        let now = Instant::now();
        let reuse = reuse_seconds(ttl);
        if let Some(lease) = granted.get_mut(&ttl) {
            // Valid: lives past now + ttl; sufficient: not past now + ttl + reuse, so a key
            // does not outlive its TTL by more than the reuse window.
            let valid = now + secs(ttl) < lease.expires;
            let sufficient = now + secs(ttl + reuse) >= lease.expires;
            if valid && sufficient && lease.attached < MAX_OBJECTS_PER_LEASE {
                lease.attached += 1;
                return Ok(lease.id);
            }
        }
        let requested = ttl + reuse;
        let response = grant(requested).await?;
        // etcd may raise a TTL below its minimum; it never grants less than asked.
        let lifetime = response.ttl().max(requested);
        granted.insert(
            ttl,
            Granted {
                id: response.id(),
                expires: now + secs(lifetime),
                attached: 1,
            },
        );
        Ok(response.id())
    }

    /// Stops reusing `id` (etcd no longer knows it: it expired early or was revoked).
    pub(super) async fn forget(&self, id: i64) {
        self.granted.lock().await.retain(|_, lease| lease.id != id);
    }
}

fn secs(seconds: i64) -> Duration {
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// Whether etcd refused a write because its lease no longer exists.
pub(super) fn is_lease_not_found(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().contains("requested lease not found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_whole_seconds_rounded_up() {
        assert_eq!(ttl_seconds(Duration::from_secs(3600)), 3600);
        assert_eq!(ttl_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(ttl_seconds(Duration::from_millis(1)), 1);
        assert_eq!(ttl_seconds(Duration::ZERO), 1);
    }

    #[test]
    fn reuse_window_is_five_percent_up_to_a_minute() {
        assert_eq!(reuse_seconds(2), 0);
        assert_eq!(reuse_seconds(100), 5);
        assert_eq!(reuse_seconds(3600), 60);
        assert_eq!(reuse_seconds(24 * 3600), 60);
    }
}

//! kube-apiserver's identity Lease, as its `start-kube-apiserver-identity-lease-controller` and
//! `start-kube-apiserver-identity-lease-garbage-collector` hooks keep them: each server holds a
//! `kube-system` Lease named `apiserver-<hash of its host name>` (label
//! `apiserver.kubernetes.io/identity=kube-apiserver`, `kubernetes.io/hostname`), renewed every
//! 10 s with a one-hour duration, and deletes the identity Leases whose holders stopped
//! renewing them more than their duration ago. Tools count a cluster's API servers this way
//! (`kubectl get leases -n kube-system -l apiserver.kubernetes.io/identity=kube-apiserver`),
//! and replicas of kubegate on etcd show up one Lease each.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use kubegate_backends::registry::Registry;
use kubegate_backends::ResourceDef;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// `IdentityLeaseComponentLabelKey`.
const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// The component these Leases are of.
const COMPONENT: &str = "kube-apiserver";
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `IdentityLeaseDurationSeconds`.
const LEASE_DURATION_SECONDS: i64 = 3600;
/// `IdentityLeaseRenewIntervalPeriod`.
const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// `IdentityLeaseGCPeriod`.
const GC_PERIOD: Duration = Duration::from_secs(3600);
/// The field manager of the writes, as kube-apiserver's own client names itself.
const MANAGER: &str = "kube-apiserver";
const NAMESPACE: &str = "kube-system";

/// This host's name, as `os.Hostname` gives it (the kernel's).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// k8s.io/apiserver's `APIServerID` for `hostname`: `apiserver-` and the lower-case, unpadded
/// base32 of the first 16 bytes of SHA-256 over the length-prefixed host name and
/// `kube-apiserver`.
pub fn apiserver_id(hostname: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [hostname.as_bytes(), COMPONENT.as_bytes()] {
        let length = u16::try_from(part.len()).unwrap_or(u16::MAX);
        hasher.update(length.to_be_bytes());
        hasher.update(&part[..usize::from(length)]);
    }
    let hash = hasher.finalize();
    format!(
        "apiserver-{}",
        data_encoding::BASE32_NOPAD
            .encode(&hash[..16])
            .to_ascii_lowercase()
    )
}

/// A `MicroTime` as kube writes it.
fn micro_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Renews this server's identity Lease every [`RENEW_INTERVAL`] and collects expired ones
/// every [`GC_PERIOD`], until `stop`.
pub async fn run(registry: Arc<Registry>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let Some(leases) = registry.find("coordination.k8s.io", "leases") else {
        return;
    };
    let host = hostname();
    let name = apiserver_id(&host);
    // kube: the lease name, an underscore and a UUID new at every start.
    let holder = format!("{name}_{}", uuid::Uuid::new_v4());
    let mut renew = tokio::time::interval(RENEW_INTERVAL);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut collect = tokio::time::interval(GC_PERIOD);
    collect.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = renew.tick() => renew_lease(&registry, &leases, &name, &holder, &host).await,
            _ = collect.tick() => collect_expired(&registry, &leases, Utc::now()).await,
            _ = stop.changed() => return,
        }
    }
}

/// Creates the Lease, or renews it (kube's lease controller: the renew time, duration and
/// labels are put back as they should be on every renewal; the holder stays).
async fn renew_lease(
    registry: &Registry,
    leases: &ResourceDef,
    name: &str,
    holder: &str,
    host: &str,
) {
    let now = micro_time(Utc::now());
    let existing = registry
        .cacher()
        .get(&leases.key(NAMESPACE, name))
        .and_then(|cached| serde_json::from_slice::<Value>(&cached.bytes).ok());
    let outcome = match existing {
        None => {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": NAMESPACE,
                    "labels": {IDENTITY_LABEL: COMPONENT, HOSTNAME_LABEL: host}},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                    "renewTime": now}});
            registry
                .create_internal(leases, lease, MANAGER)
                .await
                .map(|_| ())
        }
        Some(_) => registry
            .update_internal(leases, NAMESPACE, name, MANAGER, |current| {
                let mut next = current.clone();
                // kube's lease controller renews the lease it finds, keeping its holder (the
                // server that created it; replicas on one host share the name).
                let held = next
                    .pointer("/spec/holderIdentity")
                    .and_then(Value::as_str)
                    .is_some_and(|h| !h.is_empty());
                if !held {
                    next["spec"]["holderIdentity"] = json!(holder);
                }
                next["spec"]["leaseDurationSeconds"] = json!(LEASE_DURATION_SECONDS);
                next["spec"]["renewTime"] = json!(now);
                if let Some(metadata) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
                    if !labels.is_object() {
                        *labels = json!({});
                    }
                    labels[IDENTITY_LABEL] = json!(COMPONENT);
                    labels[HOSTNAME_LABEL] = json!(host);
                }
                Ok(next)
            })
            .await
            .map(|_| ()),
    };
    match outcome {
        Ok(()) => {}
        // Another writer got there first (a replica on the same host): the next tick retries.
        Err(e) if e.code == 409 => {}
        Err(e) => {
            tracing::warn!(lease = name, error = %e.message, "renewing the API server identity lease")
        }
    }
}

/// Whether an identity Lease has not been renewed for longer than its duration at `now`
/// (kube's `isLeaseExpired`; one without a renew time or duration is expired).
fn expired(lease: &Value, now: DateTime<Utc>) -> bool {
    let renewed = lease
        .pointer("/spec/renewTime")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
    let duration = lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64);
    match (renewed, duration) {
        (Some(renewed), Some(duration)) => {
            renewed.with_timezone(&Utc) + chrono::Duration::seconds(duration) < now
        }
        _ => true,
    }
}

/// Deletes the `kube-system` identity Leases of kube-apiserver that expired at `now`, each
/// only as it was read (a holder renewing it meanwhile keeps it).
async fn collect_expired(registry: &Registry, leases: &ResourceDef, now: DateTime<Utc>) {
    let Ok((items, _)) = registry
        .cacher()
        .list(&leases.collection_prefix(NAMESPACE), None, None)
    else {
        return;
    };
    for item in items {
        let Ok(lease) = serde_json::from_slice::<Value>(&item.bytes) else {
            continue;
        };
        let identity = lease
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(IDENTITY_LABEL))
            .and_then(Value::as_str);
        if identity != Some(COMPONENT) || !expired(&lease, now) {
            continue;
        }
        let name = lease
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match registry
            .delete_internal_at(leases, NAMESPACE, name, &item.revision.to_string())
            .await
        {
            Ok(()) => tracing::info!(lease = name, "deleted an expired API server identity lease"),
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                tracing::warn!(lease = name, error = %e.message, "deleting an expired API server identity lease")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_name_is_kubes_apiserver_id() {
        // SHA-256 of 00 06 "node-1" 00 0e "kube-apiserver", the first 16 bytes in lower-case
        // unpadded base32 (computed apart, with Python's hashlib and base64).
        assert_eq!(
            apiserver_id("node-1"),
            "apiserver-lgabes5ywnaqeagh5dny4zlzs4"
        );
        assert_ne!(apiserver_id("node-2"), apiserver_id("node-1"));
    }

    #[test]
    fn leases_expire_a_duration_after_their_last_renewal() {
        let now = Utc::now();
        let lease = |renewed: DateTime<Utc>| json!({"spec": {"renewTime": micro_time(renewed), "leaseDurationSeconds": 3600}});
        assert!(!expired(&lease(now - chrono::Duration::seconds(3500)), now));
        assert!(expired(&lease(now - chrono::Duration::seconds(3700)), now));
        assert!(expired(&json!({"spec": {}}), now));
    }
}

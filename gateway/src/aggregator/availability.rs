//! The availability controller (kube-aggregator's `AvailableConditionController`): every
//! remote APIService is probed with `GET /apis/<group>/<version>` under kubegate's proxy
//! identity when it changes and every `availabilityCheckInterval`; the result becomes the
//! APIService's `Available` condition with kube's reasons, and the metrics
//! `aggregator_unavailable_apiservice{name}` / `aggregator_unavailable_apiservice_total`.
//! Local APIServices are always `Available=True (Local)`.

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubegate_backends::core::apiregistration::set_available_condition;
use kubegate_backends::registry::{manager, Registry};
use kubegate_policy::https::{
    error_chain, https_client, root_store_from_pem, ClientIdentity, TlsOptions,
};

use super::apiservice::{ApiService, Condition};
use super::proxy::{Forwarding, ProxyIdentity};
use super::resolve::{Dialing, Location};
use super::table::Backend;
use super::Aggregator;
use crate::metrics::Metrics;

/// The identity probes and discovery fetches carry (kube-aggregator's own user).
pub const AGGREGATOR_USER: &str = "system:kube-aggregator";
pub const AGGREGATOR_GROUP: &str = "system:masters";

/// kube's availability controller requeues a failing APIService with exponential backoff from
/// 5 ms up to 30 s (`NewTypedItemExponentialFailureRateLimiter`).
const RETRY_INITIAL: Duration = Duration::from_millis(5);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// How long the loop's own last write counts over the routing table's copy of a status.
const WRITTEN_TRUSTED: Duration = Duration::from_secs(10);

/// Probes every remote backend until `stop`: a backend when it is new or its spec, location
/// or identity changed (not on status-only changes, its own writes included, nor on other
/// APIServices' changes), and every one of them each `availabilityCheckInterval`.
pub async fn run(
    registry: Arc<Registry>,
    aggregator: Arc<Aggregator>,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // The fingerprint each backend was last probed with, when, and after how long it is
    // probed again: the check interval, or, while its probes fail, kube's retry backoff
    // (5 ms doubling up to 30 s) so that a backend that comes back is seen within moments.
    let mut probed: HashMap<String, (u64, Instant, Duration)> = HashMap::new();
    let mut failures: HashMap<String, u32> = HashMap::new();
    // The condition last written for each APIService (by name and uid: one deleted and
    // created again is another), and when.
    let mut written: HashMap<(String, String), (Condition, Instant)> = HashMap::new();
    // The APIServices the unavailability gauge has a series for.
    let mut gauged: HashSet<String> = HashSet::new();
    loop {
        let notified = aggregator.table_changed.notified();
        let table = aggregator.table.load_full();
        let now = Instant::now();
        let checks = table.services.iter().filter_map(|service| {
            let backend = table.remote(&service.group, &service.version).cloned();
            if let Some(backend) = &backend {
                let due = probed
                    .get(&service.name)
                    .is_none_or(|(fingerprint, at, after)| {
                        *fingerprint != backend.fingerprint || now.duration_since(*at) >= *after
                    });
                if !due {
                    return None;
                }
            }
            let aggregator = aggregator.clone();
            Some(async move {
                let condition = match &backend {
                    None => Condition {
                        status: true,
                        reason: "Local".into(),
                        message: "Local APIServices are always available".into(),
                    },
                    Some(backend) => check(&aggregator, backend).await,
                };
                let probe = backend.map(|b| (b.fingerprint, now));
                (service.clone(), condition, probe)
            })
        });
        let results = futures::future::join_all(checks).await;
        for (service, condition, probe) in results {
            if let Some((fingerprint, at)) = probe {
                let after = if condition.status {
                    failures.remove(&service.name);
                    aggregator.check_interval
                } else {
                    let failed = failures.entry(service.name.clone()).or_insert(0);
                    let backoff = RETRY_INITIAL.saturating_mul(1 << (*failed).min(20));
                    *failed += 1;
                    backoff.min(RETRY_MAX).min(aggregator.check_interval)
                };
                probed.insert(service.name.clone(), (fingerprint, at, after));
            }
            gauged.insert(service.name.clone());
            // What this loop last wrote counts over the table's copy, which lags its writes
            // (quick retries would otherwise write, and count, one transition several times).
            // A recent write counts over the table's copy, which lags it; an older one does
            // not (a status someone else wrote since is corrected, as kube's controller does).
            let key = (service.name.clone(), service.uid.clone());
            let previous = written
                .get(&key)
                .filter(|(_, at)| at.elapsed() < WRITTEN_TRUSTED)
                .map(|(condition, _)| condition.clone())
                .or_else(|| service.available.clone());
            if record(&registry, &metrics, &service, previous.as_ref(), &condition).await {
                written.insert(key, (condition, Instant::now()));
            }
        }
        probed.retain(|name, _| table.services.iter().any(|s| &s.name == name));
        failures.retain(|name, _| probed.contains_key(name));
        written.retain(|(name, uid), _| {
            table
                .services
                .iter()
                .any(|s| &s.name == name && &s.uid == uid)
        });
        // A deleted APIService's series goes, as kube's ForgetAPIService drops it: an alert on
        // the gauge must not fire for something that no longer exists.
        gauged.retain(|name| {
            let exists = table.services.iter().any(|s| &s.name == name);
            if !exists {
                let _ = metrics.unavailable_apiservice.remove_label_values(&[name]);
            }
            exists
        });
        // Sleep until the next backend is due, or a change.
        let next_due = probed
            .values()
            .map(|(_, at, after)| *at + *after)
            .min()
            .unwrap_or_else(|| Instant::now() + aggregator.check_interval);
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(next_due.into()) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Writes the condition if it changed and keeps the metrics in step.
/// Returns whether `condition` is now the stored one (written, or already there).
async fn record(
    registry: &Registry,
    metrics: &Metrics,
    service: &ApiService,
    previous: Option<&Condition>,
    condition: &Condition,
) -> bool {
    metrics
        .unavailable_apiservice
        .with_label_values(&[&service.name])
        .set(i64::from(!condition.status));
    if previous == Some(condition) {
        return true;
    }
    if !condition.status {
        tracing::warn!(
            apiservice = %service.name,
            reason = %condition.reason,
            message = %condition.message,
            "APIService unavailable"
        );
    } else {
        tracing::info!(apiservice = %service.name, reason = %condition.reason, "APIService available");
    }
    let Some(def) = registry.find("apiregistration.k8s.io", "apiservices") else {
        return false;
    };
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let result = registry
        .update_status_internal(&def, "", &service.name, manager::KUBE_APISERVER, |old| {
            let mut object = old.clone();
            // A probe of an older spec must not judge a newer one.
            if object.pointer("/metadata/uid").and_then(|v| v.as_str()) != Some(&service.uid) {
                return Err(kubegate_backends::ApiError::new(
                    409,
                    "Conflict",
                    "the APIService was replaced while it was being probed",
                ));
            }
            set_available_condition(
                &mut object,
                condition.status,
                &condition.reason,
                &condition.message,
                &now,
            );
            Ok(object)
        })
        .await;
    match result {
        // Counted when an available APIService is written unavailable (kube's
        // SetUnavailableCounter after its status update), not on every change of an
        // unavailable one's message, nor on a write that failed (it is tried again).
        Ok(_) => {
            if !condition.status && previous.is_some_and(|was| was.status) {
                metrics
                    .unavailable_apiservice_total
                    .with_label_values(&[&service.name, &condition.reason])
                    .inc();
            }
            true
        }
        Err(e) => {
            tracing::debug!(apiservice = %service.name, error = %e.message, "writing availability");
            false
        }
    }
}

/// Resolves and probes one backend.
pub async fn check(aggregator: &Aggregator, backend: &Backend) -> Condition {
    let location = match &backend.location {
        Ok(location) => location,
        Err(e) => {
            return Condition {
                status: false,
                reason: e.reason.into(),
                message: e.message.clone(),
            }
        }
    };
    if let Some(error) = &backend.ca_error {
        return Condition {
            status: false,
            reason: "ServiceAccessError".into(),
            message: error.clone(),
        };
    }
    let path = format!(
        "{}{}",
        location.base_path,
        discovery_path(&backend.service.group, &backend.service.version)
    );
    // As kube, whose probe passes when any of its attempts does: the first address that
    // answers makes the APIService available. A Service's endpoints are asked in turn until
    // one answers (requests that meet a dead one's refused connect go on to the next); a
    // host's addresses in order until one does, the ones that cannot be connected to passed
    // over for requests too, and one that answers with a failure ends the check.
    let mut last_error = None;
    for address in &location.addresses {
        match probe(aggregator, backend, location, *address, &path).await {
            Ok(()) => {
                last_error = None;
                break;
            }
            Err(failure) => {
                let in_order = location.dialing == Dialing::InOrder;
                if in_order && failure.could_not_connect {
                    // Requests and document fetches move on from it too.
                    backend.connect_failed(*address);
                }
                last_error = Some(failure.message);
                if in_order && !failure.could_not_connect {
                    break;
                }
            }
        }
    }
    match last_error {
        None => Condition {
            status: true,
            reason: "Passed".into(),
            message: "all checks passed".into(),
        },
        Some(message) => Condition {
            status: false,
            reason: "FailedDiscoveryCheck".into(),
            message,
        },
    }
}

/// Why a probe of one address failed.
struct ProbeFailure {
    message: String,
    /// Connecting failed (reqwest counts the TLS handshake in): nothing answered, and a host's
    /// next address may still serve. Requests then move on from this address too, although
    /// on their own they pass over only refused or timed-out connects.
    could_not_connect: bool,
}

impl From<String> for ProbeFailure {
    fn from(message: String) -> Self {
        ProbeFailure {
            message,
            could_not_connect: false,
        }
    }
}

/// One `GET` against one endpoint with kubegate's proxy certificate.
async fn probe(
    aggregator: &Aggregator,
    backend: &Backend,
    location: &Location,
    address: std::net::SocketAddr,
    path: &str,
) -> Result<(), ProbeFailure> {
    let url = format!(
        "https://{}:{}{path}",
        url_host(&location.server_name),
        address.port()
    );
    let client = client_for(backend, location, address)?;
    let request = with_probe_identity(client.get(&url), &backend.identity)
        .header("Accept", "application/json")
        .timeout(aggregator.probe_timeout);
    // kube's messages name the URL of the address it dialled (the Service's name is only the
    // TLS server name).
    let shown = format!("https://{address}{path}");
    match request.send().await {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(format!(
            "failing or missing response from {shown}: bad status from {shown}: {}",
            response.status().as_u16()
        )
        .into()),
        Err(e) => Err(ProbeFailure {
            message: format!(
                "failing or missing response from {shown}: Get \"{shown}\": {}",
                go_transport_error(&e, address)
            ),
            could_not_connect: e.is_connect(),
        }),
    }
}

/// A request's failure as Go's transport words the common ones (`dial tcp ...: connect:
/// connection refused`), otherwise the error's causes without reqwest's own preamble.
fn go_transport_error(error: &reqwest::Error, address: std::net::SocketAddr) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return format!("dial tcp {address}: connect: connection refused")
                }
                std::io::ErrorKind::TimedOut => return format!("dial tcp {address}: i/o timeout"),
                _ => {}
            }
        }
        source = cause.source();
    }
    if error.is_timeout() {
        return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into();
    }
    let text = error_chain(error);
    // reqwest's "error sending request for url (...): " says nothing the message does not.
    match text.split_once("): ") {
        Some((preamble, rest)) if preamble.starts_with("error sending request for url (") => {
            rest.to_string()
        }
        _ => text,
    }
}

/// A host as it goes in a URL (IPv6 literals bracketed).
pub fn url_host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// An HTTPS client that reaches `address` under the location's server name (requests name
/// it in their URLs) and `Host`, with the APIService's trust and the backend's client
/// certificate.
pub fn client_for(
    backend: &Backend,
    location: &Location,
    address: std::net::SocketAddr,
) -> Result<reqwest::Client, String> {
    https_client_to(
        backend.service.ca_bundle.as_deref(),
        backend.service.insecure_skip_tls_verify,
        &backend.identity,
        &location.server_name,
        Some(&location.http_host),
        address,
    )
}

/// An HTTPS client that reaches `address` under `server_name`, trusting `ca_pem` (system
/// roots when `None`) and presenting `identity`'s client certificate, if it has one; its
/// requests carry `host` as their `Host` when it is another name than the URL's.
pub fn https_client_to(
    ca_pem: Option<&[u8]>,
    insecure: bool,
    identity: &ProxyIdentity,
    server_name: &str,
    host: Option<&str>,
    address: std::net::SocketAddr,
) -> Result<reqwest::Client, String> {
    let roots = match ca_pem {
        Some(pem) if !insecure => {
            Some(root_store_from_pem(pem).map_err(|e| format!("caBundle: {e}"))?)
        }
        _ => None,
    };
    let client_auth = match identity.client_certificate() {
        Some(client_cert) => Some(ClientIdentity::from_pem(
            &client_cert.pem.0,
            &client_cert.pem.1,
        )?),
        None => None,
    };
    let resolve = if server_name.parse::<std::net::IpAddr>().is_ok() {
        Vec::new()
    } else {
        vec![(server_name.to_string(), address)]
    };
    https_client(&TlsOptions {
        roots,
        insecure,
        server_name: None,
        client_auth,
        https_only: true,
        // As kube-aggregator's probes (and its proxy, which fetches documents): a backend's
        // redirect is its answer, a failure, and kubegate's identity is not taken elsewhere.
        follow_redirects: false,
        resolve,
        // The URL's authority (server name and port) is the Host unless told otherwise.
        host: host.filter(|host| *host != server_name).map(str::to_string),
    })
}

/// Adds the identity probes and document fetches carry: kube-aggregator's own user as
/// front-proxy headers, or, for a backend that kubegate authenticates to with a token or a
/// certificate of its own (impersonation), just that credential's user.
pub fn with_probe_identity(
    request: reqwest::RequestBuilder,
    identity: &ProxyIdentity,
) -> reqwest::RequestBuilder {
    with_identity_as(request, identity, AGGREGATOR_USER, &[AGGREGATOR_GROUP])
}

/// Adds kubegate's credential for the backend and, through front-proxy headers, `user` and
/// `groups` as the caller (with impersonation forwarding, the credential's own user).
pub fn with_identity_as(
    request: reqwest::RequestBuilder,
    identity: &ProxyIdentity,
    user: &str,
    groups: &[&str],
) -> reqwest::RequestBuilder {
    let request = match &identity.bearer {
        Some(bearer) => request.header(http::header::AUTHORIZATION, bearer.header()),
        None => request,
    };
    match identity.forwarding {
        Forwarding::FrontProxy => groups
            .iter()
            .fold(request.header("X-Remote-User", user), |request, group| {
                request.header("X-Remote-Group", *group)
            }),
        Forwarding::Impersonate => request,
    }
}

/// The legacy discovery path of a group-version (`/api/v1` for the core group).
pub fn discovery_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

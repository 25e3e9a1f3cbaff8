//! Fronting a cluster (`delegate:`): kubegate discovers the group-versions the delegate
//! Kubernetes API server serves, at start and every `syncInterval`, and keeps an APIService
//! (`kubegate.io/delegate: "true"`, `automanaged: "true"`) registered for each one no local or
//! user-created APIService claims — as kube's autoregister controller does for the
//! kube-apiserver behind kube-aggregator. Requests for those group-versions are then routed,
//! probed and merged into discovery like any APIService's, but reach the delegate with its
//! own trust and credentials and the caller forwarded as `frontProxy` headers or
//! `impersonate` headers.

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::core::apiregistration::{
    delegate_apiservice, is_delegated, local_apiservice_needs_update, set_available_condition,
    AUTOMANAGED_CONTINUOUSLY, AUTOMANAGED_LABEL, GROUP,
};
use kubegate_backends::registry::{manager, Registry};
use kubegate_config::{parse_server, DelegateConfig, DelegateServer};
use kubegate_policy::https::{error_chain, read_body_capped};
use serde_json::Value;

use super::apiservice::Target;
use super::availability::{https_client_to, url_host, with_probe_identity};
use super::proxy::{Forwarding, ProxyIdentity};
use super::resolve::{resolve, Location, Resolution, ResolveError};
use super::Aggregator;

/// Largest discovery document accepted from the delegate.
const MAX_DISCOVERY_BYTES: usize = 16 * 1024 * 1024;

/// The delegate cluster as kubegate reaches it.
pub struct Delegate {
    pub server: DelegateServer,
    /// The TLS server name (`tlsServerName`, else the URL's host).
    pub server_name: String,
    /// PEM roots for the delegate's serving certificate (`None`: system roots).
    pub ca_pem: Option<Vec<u8>>,
    pub identity: Arc<ProxyIdentity>,
    pub sync_interval: Duration,
    pub probe_timeout: Duration,
}

impl Delegate {
    /// Reads the configured CA, certificate, key and token; any unreadable one stops the start.
    pub fn from_config(
        config: &DelegateConfig,
        probe_timeout: Duration,
    ) -> Result<Delegate, String> {
        let server = parse_server(&config.server).map_err(|e| format!("delegate.server: {e}"))?;
        let ca_pem = match &config.ca_file {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("delegate.caFile {}: {e}", path.display()))?;
                kubegate_policy::https::root_store_from_pem(&pem)
                    .map_err(|e| format!("delegate.caFile {}: {e}", path.display()))?;
                Some(pem)
            }
            None => None,
        };
        let cert = match (&config.client_cert_file, &config.client_key_file) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            _ => None,
        };
        let forwarding = if config.identity_forwarding == "impersonate" {
            Forwarding::Impersonate
        } else {
            Forwarding::FrontProxy
        };
        let identity =
            ProxyIdentity::with_credentials(cert, config.token_file.as_deref(), forwarding)
                .map_err(|e| format!("delegate: {e}"))?;
        Ok(Delegate {
            server_name: config
                .tls_server_name
                .clone()
                .unwrap_or_else(|| server.host.clone()),
            server,
            ca_pem,
            identity: Arc::new(identity),
            sync_interval: config.sync_interval,
            probe_timeout,
        })
    }

    /// Where the delegate is right now (its host name looked up again each time).
    pub async fn locate(&self) -> Result<Location, ResolveError> {
        struct NoObjects;
        impl super::resolve::ObjectSource for NoObjects {
            fn service(&self, _: &str, _: &str) -> Option<Value> {
                None
            }
            fn endpoints(&self, _: &str, _: &str) -> Option<Value> {
                None
            }
            fn endpoint_slices(&self, _: &str) -> Vec<Value> {
                Vec::new()
            }
        }
        let target = Target::Url {
            host: self.server.host.clone(),
            port: self.server.port,
            path: self.server.path.clone(),
        };
        let mut location = resolve(&target, &NoObjects, Resolution::Endpoints).await?;
        location.server_name = self.server_name.clone();
        Ok(location)
    }

    /// The group-versions the delegate serves, with the version priority that keeps its
    /// preferred-version order: `(group, version, versionPriority)`; the core group is `""`.
    pub async fn discover(&self) -> Result<Vec<(String, String, i32)>, String> {
        let location = self.locate().await.map_err(|e| e.message)?;
        // Every address the delegate's host resolves to is tried in turn, so one address
        // that is down does not hide a cluster the others still serve.
        let mut last_error = String::from("the delegate's host has no address");
        for address in &location.addresses {
            match self.discover_at(&location, *address).await {
                Ok(found) => return Ok(found),
                Err(e) => {
                    tracing::debug!(%address, error = %e, "delegate discovery failed at one address");
                    last_error = e;
                }
            }
        }
        Err(last_error)
    }

    /// `/api` and `/apis` of the delegate at one of its addresses.
    async fn discover_at(
        &self,
        location: &super::resolve::Location,
        address: std::net::SocketAddr,
    ) -> Result<Vec<(String, String, i32)>, String> {
        let client = https_client_to(
            self.ca_pem.as_deref(),
            false,
            &self.identity,
            &location.server_name,
            Some(&location.http_host),
            address,
        )?;
        let base = format!(
            "https://{}:{}{}",
            url_host(&location.server_name),
            address.port(),
            location.base_path
        );
        let get = |path: &'static str| {
            let url = format!("{base}{path}");
            let request = with_probe_identity(client.get(&url), &self.identity)
                .header("Accept", "application/json")
                .timeout(self.probe_timeout);
            async move {
                let mut response = request
                    .send()
                    .await
                    .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
                let status = response.status();
                let body = read_body_capped(&mut response, MAX_DISCOVERY_BYTES).await?;
                if !status.is_success() {
                    return Err(format!(
                        "GET {url}: {}: {}",
                        status.as_u16(),
                        String::from_utf8_lossy(&body[..body.len().min(300)])
                    ));
                }
                serde_json::from_slice::<Value>(&body).map_err(|e| format!("GET {url}: {e}"))
            }
        };
        let core = get("/api").await?;
        let groups = get("/apis").await?;
        Ok(group_versions(&core, &groups))
    }
}

/// The group-versions in an `APIVersions` (`/api`) and an `APIGroupList` (`/apis`). Versions
/// are listed preferred first, so the first gets the highest priority.
fn group_versions(core: &Value, groups: &Value) -> Vec<(String, String, i32)> {
    let mut out = Vec::new();
    let strings = |list: Option<&Value>| -> Vec<String> {
        list.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    for (i, version) in strings(core.get("versions")).into_iter().enumerate() {
        out.push((String::new(), version, priority_at(i)));
    }
    for group in groups
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = group.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mut versions: Vec<String> = group
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.get("version").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        // The preferred version first, whatever order the list has.
        if let Some(preferred) = group
            .pointer("/preferredVersion/version")
            .and_then(Value::as_str)
        {
            if let Some(at) = versions.iter().position(|v| v == preferred) {
                let v = versions.remove(at);
                versions.insert(0, v);
            }
        }
        for (i, version) in versions.into_iter().enumerate() {
            out.push((name.to_string(), version, priority_at(i)));
        }
    }
    out
}

/// A version priority falling with the position in the delegate's list (kube's range is
/// 1..=1000; CRD versions start at 100 in kube's autoregistration, so do these).
fn priority_at(index: usize) -> i32 {
    100 - i32::try_from(index.min(98)).unwrap_or(98)
}

/// Whether kubegate's delegate registration owns this APIService.
fn is_delegate_managed(object: &Value) -> bool {
    is_delegated(object)
        && object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(AUTOMANAGED_LABEL))
            .and_then(Value::as_str)
            == Some(AUTOMANAGED_CONTINUOUSLY)
}

/// Makes the registered delegate APIServices match `served`: creates missing ones, updates
/// drifted ones, removes those the delegate no longer serves. APIServices kubegate serves
/// itself or a user created are never touched, and their group-versions stay theirs.
/// `served: None` means no delegate is configured: every delegate APIService goes.
pub async fn register(
    registry: &Registry,
    served: Option<&[(String, String, i32)]>,
) -> Result<(), String> {
    let def = registry
        .find(GROUP, "apiservices")
        .ok_or("apiservices.apiregistration.k8s.io is not served")?
        .clone();
    let (existing, _) = registry.list_internal(&def).await.map_err(|e| e.message)?;
    let name_of = |o: &Value| {
        o.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut wanted = BTreeSet::new();
    for (group, version, priority) in served.unwrap_or_default() {
        // kubegate's own APIService objects are what routing is built from: never delegated.
        if group == GROUP {
            continue;
        }
        let desired = delegate_apiservice(group, version, *priority);
        let name = name_of(&desired);
        wanted.insert(name.clone());
        match existing.iter().find(|o| name_of(o) == name) {
            None => {
                registry
                    .create_internal(&def, desired, manager::KUBEGATE)
                    .await
                    .map_err(|e| format!("creating APIService {name}: {}", e.message))?;
                // The delegate has just listed it in its discovery: available from the start,
                // so its routes and documents do not wait for a first probe (which follows
                // and judges it as any other).
                let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
                let available = registry
                    .update_status_internal(&def, "", &name, manager::KUBE_APISERVER, |old| {
                        let mut object = old.clone();
                        if object.pointer("/status/conditions").is_none() {
                            set_available_condition(
                                &mut object,
                                true,
                                "Passed",
                                "all checks passed",
                                &now,
                            );
                        }
                        Ok(object)
                    })
                    .await;
                if let Err(e) = available {
                    tracing::debug!(apiservice = %name, error = %e.message, "marking a delegate APIService available");
                }
                tracing::info!(apiservice = %name, "registered a group-version of the delegate");
            }
            Some(current) if is_delegate_managed(current) => {
                if local_apiservice_needs_update(current, &desired) {
                    registry
                        .update_internal(&def, "", &name, manager::KUBEGATE, |old| {
                            let mut object = old.clone();
                            object["spec"] = desired["spec"].clone();
                            Ok(object)
                        })
                        .await
                        .map_err(|e| format!("updating APIService {name}: {}", e.message))?;
                }
            }
            // Claimed by a local or a user's APIService.
            Some(_) => {}
        }
    }
    for object in existing.iter().filter(|o| is_delegate_managed(o)) {
        let name = name_of(object);
        if !wanted.contains(&name) {
            match registry.delete_internal(&def, "", &name).await {
                Ok(()) => {
                    tracing::info!(apiservice = %name, "removed a group-version the delegate no longer serves")
                }
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(format!("removing APIService {name}: {}", e.message)),
            }
        }
    }
    Ok(())
}

/// How often the delegate's group-versions are asked for while a write may still change
/// them, and for how long after the write.
const DELEGATE_WATCH_INTERVAL: Duration = Duration::from_millis(100);
const DELEGATE_WATCH_WINDOW: Duration = Duration::from_secs(6);

/// Discovers and registers the delegate's group-versions every `syncInterval` until `stop`.
/// A failed discovery keeps what is registered: a delegate that is briefly down must not lose
/// its routes (its APIServices turn unavailable through the availability probes instead).
pub async fn run(
    registry: Arc<Registry>,
    aggregator: Arc<Aggregator>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let Some(delegate) = aggregator.delegate.clone() else {
        return;
    };
    let mut writes = aggregator.delegate_writes.subscribe();
    // Prompt re-fetches still due after a write that changes the delegate's discovery.
    let mut prompt: std::collections::VecDeque<Duration> = Default::default();
    // Until when, after such a write, the delegate is asked again every
    // `DELEGATE_WATCH_INTERVAL`: a client that waits for a CRD to be Established uses it
    // moments later, and kube establishes it within moments (5 s with several servers).
    let mut watching_until = tokio::time::Instant::now();
    loop {
        match delegate.discover().await {
            Ok(served) => {
                if let Err(e) = register(&registry, Some(&served)).await {
                    tracing::warn!(error = %e, "registering the delegate's group-versions");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "discovering the delegate's group-versions failed; keeping the registered ones")
            }
        }
        let wait = if tokio::time::Instant::now() < watching_until {
            DELEGATE_WATCH_INTERVAL
        } else {
            prompt.pop_front().unwrap_or(delegate.sync_interval)
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            changed = writes.changed() => {
                if changed.is_ok() {
                    prompt = super::DELEGATE_REFETCH_DELAYS.into_iter().collect();
                    watching_until = tokio::time::Instant::now() + DELEGATE_WATCH_WINDOW;
                }
            }
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn group_versions_keep_the_delegates_preference() {
        let core = json!({"kind": "APIVersions", "versions": ["v1"]});
        let groups = json!({"kind": "APIGroupList", "groups": [
            {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
            {"name": "stable.example.com", "versions": [
                {"groupVersion": "stable.example.com/v1beta1", "version": "v1beta1"},
                {"groupVersion": "stable.example.com/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "stable.example.com/v1", "version": "v1"}},
            {"versions": []}
        ]});
        assert_eq!(
            group_versions(&core, &groups),
            vec![
                (String::new(), "v1".to_string(), 100),
                ("apps".to_string(), "v1".to_string(), 100),
                ("stable.example.com".to_string(), "v1".to_string(), 100),
                ("stable.example.com".to_string(), "v1beta1".to_string(), 99),
            ]
        );
        assert!(group_versions(&json!({}), &json!({"groups": "x"})).is_empty());
        assert_eq!(priority_at(500), 2);
    }
}

//! Merged discovery and OpenAPI (kube-aggregator's discovery manager and OpenAPI
//! controllers): a background task fetches each remote APIService's aggregated discovery
//! (or builds it from legacy `/apis/<group>/<version>` for an old backend) and its OpenAPI
//! documents, keeps the last good copy when a backend fails (its group-versions then show
//! `freshness: Stale`), and swaps in rebuilt documents only when something changed. Requests
//! read the current documents and never wait for a backend.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;
use kubegate_backends::discovery::{
    aggregated_from_legacy, parse_aggregated, Discovery, RemoteGroupVersion,
};
use kubegate_backends::openapi::{v2_to_v3, LocalOpenApi, OpenApi, RemoteOpenApi};
use kubegate_backends::ResourceDef;
use kubegate_policy::https::{error_chain, read_body_capped};
use serde_json::Value;

use super::apiservice::Target;
use super::availability::{client_for, discovery_path, url_host, with_probe_identity};
use super::resolve::{Dialing, Location};
use super::table::Backend;
use super::Aggregator;

/// The documents requests are answered from.
pub struct Docs {
    pub discovery: Discovery,
    pub openapi: OpenApi,
}

/// Largest discovery or OpenAPI document accepted from a backend.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024 * 1024;

const ACCEPT_AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// What was last fetched for one APIService.
#[derive(Clone, Default, PartialEq)]
struct Fetched {
    /// The backend's [`Backend::fingerprint`] when fetched (a changed spec starts again
    /// from nothing).
    fingerprint: u64,
    resources: Option<Vec<Value>>,
    stale: bool,
    openapi_v3: Vec<(String, Bytes)>,
    openapi_v2: Option<Arc<Value>>,
}

/// One refresh cycle's fetches by URL and `Accept`: APIServices served by the same backend
/// (every group-version of a delegate cluster) share one fetch of its `/apis`, `/api` and
/// OpenAPI documents instead of each downloading them again.
#[derive(Default)]
struct FetchMemo {
    fetches: std::sync::Mutex<HashMap<String, SharedFetch>>,
}

type FetchOutput = Result<(String, Bytes), FetchError>;

/// Why a document could not be fetched.
#[derive(Debug, Clone)]
struct FetchError {
    message: String,
    /// Connecting failed: nothing answered at this address (a host's next one may).
    could_not_connect: bool,
    /// The backend answered with this non-success status.
    status: Option<u16>,
}

impl From<String> for FetchError {
    fn from(message: String) -> Self {
        FetchError {
            message,
            could_not_connect: false,
            status: None,
        }
    }
}
type SharedFetch = futures::future::Shared<futures::future::BoxFuture<'static, FetchOutput>>;

impl FetchMemo {
    /// The fetch for `key`, started by `start` unless one is already under way or done.
    fn get(
        &self,
        key: String,
        start: impl FnOnce() -> futures::future::BoxFuture<'static, FetchOutput>,
    ) -> SharedFetch {
        use futures::FutureExt;
        let mut fetches = self
            .fetches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        fetches
            .entry(key)
            .or_insert_with(|| start().shared())
            .clone()
    }
}

/// The local half of the documents: what the registry serves here, rebuilt when that
/// changes (CRDs come and go).
struct Local {
    resources: Vec<ResourceDef>,
    openapi: Arc<LocalOpenApi>,
}

/// The registry local documents follow, and the built-in group-versions not served here.
type LocalSource = (
    Arc<kubegate_backends::registry::Registry>,
    BTreeSet<(String, String)>,
);

/// Keeps [`Docs`] current.
pub struct DocSync {
    local: std::sync::Mutex<Arc<Local>>,
    server_address: String,
    /// Where local resources come from, and the built-in group-versions not served here.
    source: Option<LocalSource>,
    pub docs: Arc<ArcSwap<Docs>>,
}

impl DocSync {
    /// Builds the local documents once; remote ones are merged in by [`DocSync::run`].
    pub fn new(local_resources: Vec<ResourceDef>, server_address: String) -> DocSync {
        let local = Arc::new(Local {
            openapi: Arc::new(LocalOpenApi::build(&local_resources)),
            resources: local_resources,
        });
        let docs = Docs {
            discovery: Discovery::build(&local.resources, &server_address),
            openapi: local.openapi.openapi(),
        };
        DocSync {
            local: std::sync::Mutex::new(local),
            server_address,
            source: None,
            docs: Arc::new(ArcSwap::from_pointee(docs)),
        }
    }

    /// Like [`DocSync::new`] from what `registry` serves (less `disabled` group-versions), and
    /// rebuilt whenever that changes.
    pub fn following(
        registry: Arc<kubegate_backends::registry::Registry>,
        disabled: BTreeSet<(String, String)>,
        server_address: String,
    ) -> DocSync {
        let mut sync = DocSync::new(served_here(&registry, &disabled), server_address);
        sync.source = Some((registry, disabled));
        sync
    }

    fn local(&self) -> Arc<Local> {
        self.local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Rebuilds the local documents from the registry's current resources.
    /// Takes the registry's current resources for discovery at once, keeping the previous
    /// OpenAPI documents (rebuilding them is the slow part, see [`DocSync::rebuild_openapi`]).
    /// Returns whether anything changed.
    fn reload_local_resources(&self) -> bool {
        let Some((registry, disabled)) = &self.source else {
            return false;
        };
        let resources = served_here(registry, disabled);
        let mut local = self
            .local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *local = Arc::new(Local {
            openapi: local.openapi.clone(),
            resources,
        });
        true
    }

    /// Builds the local OpenAPI documents for the current resources (hundreds of milliseconds
    /// with hundreds of CRDs), on the blocking pool.
    async fn rebuild_openapi(&self) {
        let local = self.local();
        let resources = local.resources.clone();
        // The documents of unchanged group-versions are taken from the current ones.
        let previous = local.openapi.clone();
        drop(local);
        let built = tokio::task::spawn_blocking(move || {
            let openapi = LocalOpenApi::rebuild(&resources, Some(previous.as_ref()));
            (resources, openapi)
        })
        .await;
        let Ok((resources, openapi)) = built else {
            tracing::warn!("building the local OpenAPI documents failed");
            return;
        };
        let mut local = self
            .local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Resources that changed meanwhile get their own rebuild on the next pass.
        *local = Arc::new(Local {
            resources: local.resources.clone(),
            openapi: Arc::new(openapi),
        });
        drop(local);
        drop(resources);
    }

    /// Refreshes remote documents on every routing-table change and every
    /// `discoveryRefreshInterval`, and local ones when the registry's resources change,
    /// until `stop`.
    pub async fn run(
        self: Arc<Self>,
        aggregator: Arc<Aggregator>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut fetched: HashMap<String, Fetched> = HashMap::new();
        let mut published: Option<PublishInputs> = None;
        let mut registry_changed = self.source.as_ref().map(|(r, _)| r.subscribe());
        let mut local_version = 0usize;
        // The local OpenAPI documents are rebuilt by their own task, so a slow rebuild (seconds
        // with hundreds of CRDs) never holds up discovery of the next change.
        let openapi_dirty = Arc::new(tokio::sync::Notify::new());
        let openapi_ready = Arc::new(tokio::sync::Notify::new());
        {
            let sync = self.clone();
            let dirty = openapi_dirty.clone();
            let ready = openapi_ready.clone();
            let mut stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = dirty.notified() => {}
                        _ = stop.changed() => return,
                    }
                    sync.rebuild_openapi().await;
                    ready.notify_one();
                }
            });
        }
        // When each backend was last refreshed, and whether it was unavailable then.
        let mut refreshed: HashMap<String, (Instant, bool)> = HashMap::new();
        let mut delegate_writes = aggregator.delegate_writes.subscribe();
        // After a write that changes the delegate's discovery: when its documents are fetched
        // again, whatever their refresh interval says.
        let mut delegate_refetch: std::collections::VecDeque<Instant> = Default::default();
        // OpenAPI documents fetched off the loop, by APIService.
        let (openapi_tx, mut openapi_rx) =
            tokio::sync::mpsc::unbounded_channel::<(u64, Vec<(String, Fetched)>)>();
        // Requests to fetch the delegate's documents now (`Aggregator::docs_requested`, from
        // `catch_up_with_delegate`): the latest one asked for, and whether a cycle owes it.
        let mut refresh_requests = aggregator.docs_requested.subscribe();
        let mut requested = 0u64;
        let mut refresh_owed = false;
        // The request generation whose OpenAPI has been merged, to publish after this cycle.
        let mut openapi_merged: Option<u64> = None;
        // One OpenAPI fetch at a time; the backends (and the request generation) due next.
        let mut openapi_in_flight = false;
        let mut openapi_backlog: HashMap<String, Arc<Backend>> = HashMap::new();
        let mut openapi_backlog_gen = 0u64;
        loop {
            let now = Instant::now();
            let mut delegate_due = std::mem::take(&mut refresh_owed);
            let serving = requested;
            while delegate_refetch.front().is_some_and(|at| *at <= now) {
                delegate_refetch.pop_front();
                delegate_due = true;
            }
            let notified = aggregator.table_changed.notified();
            let table = aggregator.table.load_full();
            let mut next: HashMap<String, Fetched> = HashMap::new();
            let memo = Arc::new(FetchMemo::default());
            let now = Instant::now();
            let fetches = table.backends().map(|backend| {
                let previous = fetched.get(&backend.service.name).cloned();
                let unavailable = backend.unavailable().is_some();
                // Fetched again when its spec or availability changed or its copy is due for
                // a refresh; other APIServices' changes (a CRD registering its group, a
                // status write) leave it alone.
                let delegated = matches!(backend.service.target, Target::Delegate);
                let due = (delegated && delegate_due)
                    || match (&previous, refreshed.get(&backend.service.name)) {
                        (Some(previous), Some((at, was_unavailable))) => {
                            previous.fingerprint != backend.fingerprint
                                || *was_unavailable != unavailable
                                || now.duration_since(*at) >= aggregator.discovery_refresh_interval
                        }
                        _ => true,
                    };
                let aggregator = aggregator.clone();
                let backend = backend.clone();
                let memo = memo.clone();
                async move {
                    let name = backend.service.name.clone();
                    match previous {
                        Some(previous) if !due => (name, previous, None, backend),
                        previous => {
                            let result =
                                refresh(&aggregator, &backend, previous, &memo, Part::Discovery)
                                    .await;
                            (name, result, Some((now, unavailable)), backend)
                        }
                    }
                }
            });
            let mut openapi_due = Vec::new();
            for (name, result, refresh, backend) in futures::future::join_all(fetches).await {
                if let Some(refresh) = refresh {
                    refreshed.insert(name.clone(), refresh);
                    openapi_due.push(backend);
                }
                next.insert(name, result);
            }
            refreshed.retain(|name, _| next.contains_key(name));
            // Discovery first: clients wait on it (kubectl after a CRD is Established); the
            // OpenAPI documents of the same backends follow.
            let inputs = publish_inputs(local_version, &next);
            if published.as_ref() != Some(&inputs) {
                self.publish(&aggregator, &next);
                published = Some(inputs);
            }
            aggregator
                .docs_published
                .send_if_modified(|at| std::mem::replace(at, (*at).max(serving)) < serving);
            // OpenAPI off this loop, so a large document never holds up the next discovery
            // change, and one fetch at a time: backends due meanwhile wait for the next.
            for backend in openapi_due {
                openapi_backlog.insert(backend.service.name.clone(), backend);
            }
            openapi_backlog_gen = openapi_backlog_gen.max(serving);
            if !openapi_in_flight {
                if openapi_backlog.is_empty() {
                    let at_gen = openapi_backlog_gen;
                    aggregator
                        .openapi_published
                        .send_if_modified(|at| std::mem::replace(at, (*at).max(at_gen)) < at_gen);
                } else {
                    let pending: Vec<(Arc<Backend>, Option<Fetched>)> = openapi_backlog
                        .drain()
                        .map(|(_, backend)| {
                            let previous = next.get(&backend.service.name).cloned();
                            (backend, previous)
                        })
                        .collect();
                    let generation = openapi_backlog_gen;
                    let aggregator = aggregator.clone();
                    let memo = memo.clone();
                    let openapi_tx = openapi_tx.clone();
                    openapi_in_flight = true;
                    tokio::spawn(async move {
                        let fetches = pending.into_iter().map(|(backend, previous)| {
                            let aggregator = aggregator.clone();
                            let memo = memo.clone();
                            async move {
                                let result =
                                    refresh(&aggregator, &backend, previous, &memo, Part::OpenApi)
                                        .await;
                                (backend.service.name.clone(), result)
                            }
                        });
                        let _ =
                            openapi_tx.send((generation, futures::future::join_all(fetches).await));
                    });
                }
            }
            fetched = next;
            let next_due = refreshed
                .values()
                .map(|(at, _)| *at + aggregator.discovery_refresh_interval)
                .chain(delegate_refetch.front().copied())
                .min()
                .unwrap_or_else(|| Instant::now() + aggregator.discovery_refresh_interval);
            // Rebuild only when an input changed: the documents' hashes then stay stable.
            let inputs = publish_inputs(local_version, &fetched);
            if published.as_ref() != Some(&inputs) {
                self.publish(&aggregator, &fetched);
                published = Some(inputs);
            }
            if let Some(merged) = openapi_merged.take() {
                aggregator
                    .openapi_published
                    .send_if_modified(|at| std::mem::replace(at, (*at).max(merged)) < merged);
            }
            let local_changed = async {
                match registry_changed.as_mut() {
                    Some(rx) => {
                        if rx.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = notified => {}
                _ = local_changed => {
                    // Discovery at once: clients wait on it (kubectl after `apply` of a
                    // CRD); the OpenAPI documents follow when their task has rebuilt them.
                    if self.reload_local_resources() {
                        local_version += 1;
                        openapi_dirty.notify_one();
                    }
                }
                _ = openapi_ready.notified() => {
                    local_version += 1;
                }
                _ = tokio::time::sleep_until(next_due.into()) => {}
                Some((generation, results)) = openapi_rx.recv() => {
                    openapi_in_flight = false;
                    openapi_merged = Some(generation);
                    for (name, result) in results {
                        // Only the OpenAPI of the same spec; discovery stays as fetched since.
                        if let Some(current) = fetched
                            .get_mut(&name)
                            .filter(|c| c.fingerprint == result.fingerprint)
                        {
                            current.openapi_v3 = result.openapi_v3;
                            current.openapi_v2 = result.openapi_v2;
                        }
                    }
                }
                changed = refresh_requests.changed() => {
                    if changed.is_ok() {
                        requested = *refresh_requests.borrow_and_update();
                        refresh_owed = true;
                    }
                }
                changed = delegate_writes.changed() => {
                    if changed.is_ok() {
                        let at = Instant::now();
                        delegate_refetch = crate::aggregator::DELEGATE_REFETCH_DELAYS
                            .iter()
                            .map(|delay| at + *delay)
                            .collect();
                    }
                }
                _ = stop.changed() => return,
            }
        }
    }

    fn publish(&self, aggregator: &Aggregator, fetched: &HashMap<String, Fetched>) {
        let table = aggregator.table.load();
        let mut remote_versions = Vec::new();
        let mut remote_openapi = Vec::new();
        // kube-aggregator merges OpenAPI in group-priority order, then by name.
        let mut backends: Vec<&Arc<Backend>> = table.backends().collect();
        backends.sort_by(|a, b| {
            b.service
                .group_priority_minimum
                .cmp(&a.service.group_priority_minimum)
                .then_with(|| a.service.name.cmp(&b.service.name))
        });
        for backend in backends {
            let service = &backend.service;
            let Some(f) = fetched.get(&service.name) else {
                continue;
            };
            remote_versions.push(RemoteGroupVersion {
                group: service.group.clone(),
                version: service.version.clone(),
                group_priority_minimum: service.group_priority_minimum,
                version_priority: service.version_priority,
                resources: f.resources.clone(),
                stale: f.stale,
            });
            if !f.openapi_v3.is_empty() || f.openapi_v2.is_some() {
                remote_openapi.push(RemoteOpenApi {
                    name: service.name.clone(),
                    v3: f.openapi_v3.clone(),
                    v2: f.openapi_v2.clone(),
                });
            }
        }
        let local = self.local();
        let docs = Docs {
            discovery: Discovery::build_merged(
                &local.resources,
                &remote_versions,
                &self.server_address,
            ),
            openapi: OpenApi::merge(&local.openapi, &remote_openapi),
        };
        // The Swagger document is assembled on its first request; when the one being replaced
        // was asked for, its successor is assembled now, off the request path.
        let warm_v2 = self.docs.load().openapi.v2_built();
        self.docs.store(Arc::new(docs));
        if warm_v2 {
            let docs = self.docs.load_full();
            tokio::task::spawn_blocking(move || {
                docs.openapi.v2();
            });
        }
        tracing::debug!(
            remote = remote_versions.len(),
            "merged discovery and OpenAPI rebuilt"
        );
    }
}

/// What the published documents were built from, to rebuild them only when it changed.
type PublishInputs = (usize, Vec<(String, Fetched)>);

fn publish_inputs(local_version: usize, fetched: &HashMap<String, Fetched>) -> PublishInputs {
    let mut inputs: Vec<(String, Fetched)> = fetched
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    inputs.sort_by(|a, b| a.0.cmp(&b.0));
    (local_version, inputs)
}

/// The registry's resources less the switched-off group-versions.
fn served_here(
    registry: &kubegate_backends::registry::Registry,
    disabled: &BTreeSet<(String, String)>,
) -> Vec<ResourceDef> {
    registry
        .resources()
        .iter()
        .filter(|r| !disabled.contains(&(r.group.clone(), r.version.clone())))
        .map(|r| (**r).clone())
        .collect()
}

/// Which documents a fetch is for: discovery is fetched and published first, so a new
/// group-version is discoverable without waiting for OpenAPI documents (the whole Swagger
/// document of a delegate cluster is large).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Discovery,
    OpenApi,
}

/// Fetches one APIService's documents, keeping the last good copy (marked stale) on failure.
async fn refresh(
    aggregator: &Aggregator,
    backend: &Backend,
    previous: Option<Fetched>,
    memo: &FetchMemo,
    part: Part,
) -> Fetched {
    let previous = previous
        .filter(|p| p.fingerprint == backend.fingerprint)
        .unwrap_or(Fetched {
            fingerprint: backend.fingerprint,
            ..Fetched::default()
        });
    let stale = |mut previous: Fetched| {
        previous.stale = true;
        previous
    };
    // kube marks the group-versions of an unavailable APIService stale without asking it.
    if backend.unavailable().is_some() {
        return stale(previous);
    }
    match (fetch(aggregator, backend, memo, part).await, part) {
        (Ok(Documents::Resources(resources)), _) => Fetched {
            resources: Some(resources),
            stale: false,
            ..previous
        },
        // A backend without OpenAPI keeps serving discovery; a failed OpenAPI fetch keeps
        // the previous OpenAPI.
        (Ok(Documents::OpenApi { v3, v2 }), _) => Fetched {
            openapi_v3: v3.unwrap_or_else(|| previous.openapi_v3.clone()),
            openapi_v2: v2.or_else(|| previous.openapi_v2.clone()),
            ..previous
        },
        (Err(e), Part::Discovery) => {
            tracing::info!(apiservice = %backend.service.name, error = %e, "discovery fetch failed; serving the last good copy as Stale");
            stale(previous)
        }
        (Err(e), Part::OpenApi) => {
            tracing::info!(apiservice = %backend.service.name, error = %e, "OpenAPI fetch failed; serving the last good copy");
            previous
        }
    }
}

/// What one fetch got: discovery's resources ([`Part::Discovery`]), or the OpenAPI v3 and
/// v2 documents ([`Part::OpenApi`], each `None` when not served or not usable).
enum Documents {
    Resources(Vec<Value>),
    OpenApi {
        v3: Option<Vec<(String, Bytes)>>,
        v2: Option<Arc<Value>>,
    },
}

/// Fetches a backend's documents from the address its requests go to; a host whose current
/// address cannot be connected to is asked at its next ones, in order, as requests would be.
async fn fetch(
    aggregator: &Aggregator,
    backend: &Backend,
    memo: &FetchMemo,
    part: Part,
) -> Result<Documents, String> {
    let location = backend.location.as_ref().map_err(|e| e.message.clone())?;
    let attempts = match location.dialing {
        Dialing::InOrder => location.addresses.len().max(1),
        Dialing::Spread => 1,
    };
    let mut last_error = String::from("no endpoints");
    for _ in 0..attempts {
        let address = backend.next_address().ok_or("no endpoints")?;
        match fetch_at(aggregator, backend, memo, location, address, part).await {
            Err(error) if error.could_not_connect => {
                backend.connect_failed(address);
                last_error = error.message;
            }
            other => return other.map_err(|e| e.message),
        }
    }
    Err(last_error)
}

/// [`fetch`] at one address.
async fn fetch_at(
    aggregator: &Aggregator,
    backend: &Backend,
    memo: &FetchMemo,
    location: &Location,
    address: std::net::SocketAddr,
    part: Part,
) -> Result<Documents, FetchError> {
    let client = client_for(backend, location, address)?;
    let base = format!(
        "https://{}:{}{}",
        url_host(&location.server_name),
        address.port(),
        location.base_path
    );
    // Fetches are shared only between APIServices with the same address, trust and
    // credentials: a document verified against one caBundle never serves another, and a
    // host's address that failed is not taken for the next one's answer.
    let trust = {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        backend.service.ca_bundle.hash(&mut hasher);
        backend.service.insecure_skip_tls_verify.hash(&mut hasher);
        hasher.finish()
    };
    let identity_key = Arc::as_ptr(&backend.identity) as usize;
    let get = |path: String, accept: &'static str| {
        let client = client.clone();
        let url = format!("{base}{path}");
        let timeout = aggregator.probe_timeout;
        let identity = backend.identity.clone();
        let key = format!("{identity_key:x}|{trust:x}|{address}|{accept}|{url}");
        memo.get(key, move || {
            Box::pin(async move {
                let mut response = with_probe_identity(client.get(&url), &identity)
                    .header("Accept", accept)
                    .timeout(timeout)
                    .send()
                    .await
                    .map_err(|e| FetchError {
                        message: format!("GET {url}: {}", error_chain(&e)),
                        could_not_connect: e.is_connect(),
                        status: None,
                    })?;
                let status = response.status();
                let content_type = response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let body = read_body_capped(&mut response, MAX_DOCUMENT_BYTES).await?;
                if !status.is_success() {
                    return Err(FetchError {
                        message: format!("GET {url}: {}", status.as_u16()),
                        could_not_connect: false,
                        status: Some(status.as_u16()),
                    });
                }
                Ok::<_, FetchError>((content_type, Bytes::from(body)))
            })
        })
    };
    let service = &backend.service;
    if part == Part::OpenApi {
        return Ok(fetch_openapi(&get, &service.group, &service.version).await);
    }
    // Aggregated discovery first; a backend that answers legacy discovery gets its
    // group-version's resource list converted.
    // The core group's aggregated document is `/api`, every other group's `/apis`.
    let root = if service.group.is_empty() {
        "/api"
    } else {
        "/apis"
    };
    // As kube-aggregator: a backend that cannot be reached, or answers 503, has no fresh
    // document (its group-version goes stale); any other answer that is not an aggregated
    // document (404, 500, legacy JSON, garbage) means it does not serve aggregated discovery,
    // and its legacy resource list is converted instead.
    let aggregated = match get(root.into(), ACCEPT_AGGREGATED).await {
        Ok((content_type, body)) if content_type.contains("apidiscovery.k8s.io") => {
            serde_json::from_slice::<Value>(&body).ok()
        }
        Ok(_) => None,
        // No answer (no status), or 503.
        Err(e) if matches!(e.status, None | Some(503)) => return Err(e),
        Err(_) => None,
    };
    let resources = if let Some(document) = aggregated {
        // A backend that does not list the group-version serves no resources in it; kube
        // shows it as current and empty rather than stale.
        parse_aggregated(&document)
            .into_iter()
            .find(|(g, v, _, _)| g == &service.group && v == &service.version)
            .map(|(_, _, resources, _)| resources)
            .unwrap_or_default()
    } else {
        let (_, body) = get(
            discovery_path(&service.group, &service.version),
            "application/json",
        )
        .await?;
        let list: Value =
            serde_json::from_slice(&body).map_err(|e| format!("resource list: {e}"))?;
        aggregated_from_legacy(&list)
    };
    Ok(Documents::Resources(resources))
}

/// A backend's OpenAPI documents for one group-version: its v3 document, or its v2 document
/// converted when it serves no v3.
async fn fetch_openapi<F, Fut>(get: &F, group: &str, version: &str) -> Documents
where
    F: Fn(String, &'static str) -> Fut,
    Fut: std::future::Future<Output = FetchOutput>,
{
    let openapi_v3 = fetch_openapi_v3(get, group, version).await;
    let openapi_v2 = match get("/openapi/v2".into(), "application/json").await {
        Ok((_, body)) => serde_json::from_slice::<Value>(&body).ok().map(Arc::new),
        Err(_) => None,
    };
    let openapi_v3 = match openapi_v3 {
        OpenApiV3::Served(documents) => Some(documents),
        // As kube-aggregator: a backend without OpenAPI v3 has its v2 document converted,
        // whole, under the APIService's group-version.
        // A large document takes a while: converted off the async workers.
        OpenApiV3::NotServed => match openapi_v2.clone() {
            Some(v2) => tokio::task::spawn_blocking(move || serde_json::to_vec(&v2_to_v3(&v2)))
                .await
                .ok()
                .and_then(Result::ok)
                .map(|converted| vec![(v3_key(group, version), Bytes::from(converted))]),
            None => None,
        },
        OpenApiV3::Failed => None,
    };
    Documents::OpenApi {
        v3: openapi_v3,
        v2: openapi_v2,
    }
}

/// What a backend's `/openapi/v3` gave.
enum OpenApiV3 {
    /// The group-version's document, keyed as the index lists it.
    Served(Vec<(String, Bytes)>),
    /// 404: the backend publishes no OpenAPI v3 (only v2, or nothing).
    NotServed,
    /// No usable answer this time (the last good copy is kept).
    Failed,
}

/// The `/openapi/v3` index key of a group-version (`apis/<g>/<v>`, `api/v1`).
fn v3_key(group: &str, version: &str) -> String {
    discovery_path(group, version)
        .trim_start_matches('/')
        .to_string()
}

/// The backend's v3 document for the group-version, through its index's
/// `serverRelativeURL`.
async fn fetch_openapi_v3<F, Fut>(get: &F, group: &str, version: &str) -> OpenApiV3
where
    F: Fn(String, &'static str) -> Fut,
    Fut: std::future::Future<Output = FetchOutput>,
{
    match get("/openapi/v3".into(), "application/json").await {
        Err(e) if e.status == Some(404) => OpenApiV3::NotServed,
        Err(_) => OpenApiV3::Failed,
        Ok((_, body)) => match served_v3_document(get, &body, group, version).await {
            Some(documents) => OpenApiV3::Served(documents),
            None => OpenApiV3::Failed,
        },
    }
}

/// The group-version's document named in a backend's v3 index `body`.
async fn served_v3_document<F, Fut>(
    get: &F,
    body: &[u8],
    group: &str,
    version: &str,
) -> Option<Vec<(String, Bytes)>>
where
    F: Fn(String, &'static str) -> Fut,
    Fut: std::future::Future<Output = FetchOutput>,
{
    let index: Value = serde_json::from_slice(body).ok()?;
    let key = v3_key(group, version);
    let url = index
        .pointer(&format!(
            "/paths/{}",
            key.replace('~', "~0").replace('/', "~1")
        ))
        .and_then(|p| p.get("serverRelativeURL"))
        .and_then(Value::as_str)?
        .to_string();
    if !url.starts_with('/') {
        return None;
    }
    let (_, document) = get(url, "application/json").await.ok()?;
    serde_json::from_slice::<Value>(&document).ok()?;
    Some(vec![(key, document)])
}

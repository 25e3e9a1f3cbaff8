//! The kube-aggregator role. APIService objects (`apiregistration.k8s.io/v1`, stored like any
//! other resource) become an immutable routing table ([`table`]) that the request pipeline
//! reads per request; a controller ([`controller`]) rebuilds it whenever an APIService, Service
//! or endpoint changes, registers the local APIServices and publishes the
//! `extension-apiserver-authentication` ConfigMap; [`availability`] probes remote backends and
//! writes their `Available` condition; [`proxy`] sends requests on with the caller's identity;
//! [`delegate`] registers the group-versions of the cluster kubegate fronts; [`namespaces`]
//! deletes a terminating namespace's objects in remote group-versions.

pub mod apiservice;
pub mod availability;
pub mod controller;
pub mod delegate;
pub mod docs;
pub mod namespaces;
pub mod proxy;
pub mod resolve;
pub mod table;
pub mod token_file;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use kubegate_backends::registry::Registry;
use serde_json::Value;

use self::delegate::Delegate;
use self::proxy::ProxyIdentity;
use self::resolve::{ObjectSource, Resolution};
use self::table::RouteTable;

/// State shared by the request path and the aggregator's controllers.
pub struct Aggregator {
    pub table: ArcSwap<RouteTable>,
    /// kubegate's front-proxy identity, for APIService backends.
    pub identity: Arc<ProxyIdentity>,
    /// The cluster kubegate fronts, when `delegate:` is configured.
    pub delegate: Option<Arc<Delegate>>,
    pub resolution: Resolution,
    pub check_interval: Duration,
    pub probe_timeout: Duration,
    pub discovery_refresh_interval: Duration,
    /// Woken whenever a new table is swapped in (the availability controller re-probes).
    pub table_changed: tokio::sync::Notify,
    /// Bumped when a write that changes what the delegate serves (a CRD or an APIService)
    /// went to it: its group-versions and discovery are fetched again at once and a few times
    /// in the next seconds (a new CRD is served once the delegate has established it), not
    /// only on the sync interval.
    pub delegate_writes: tokio::sync::watch::Sender<u64>,
    /// When the last such write went to the delegate.
    last_delegate_write: std::sync::Mutex<Option<std::time::Instant>>,
    /// One discovery request at a time catches up with the delegate
    /// ([`Aggregator::catch_up_with_delegate`]).
    catch_up: tokio::sync::Mutex<()>,
    /// Requests (numbered) for the document loop to fetch the delegate's documents now, and
    /// the latest request whose discovery, and whose OpenAPI, it has published since.
    pub docs_requested: tokio::sync::watch::Sender<u64>,
    pub docs_published: tokio::sync::watch::Sender<u64>,
    pub openapi_published: tokio::sync::watch::Sender<u64>,
}

impl Aggregator {
    /// Whether a request to the delegate changes what it serves: a write of a
    /// CustomResourceDefinition or an APIService.
    pub fn changes_delegate_discovery(info: &kubegate_policy::RequestInfo) -> bool {
        let resource = matches!(
            (info.api_group.as_str(), info.resource.as_str()),
            ("apiextensions.k8s.io", "customresourcedefinitions")
                | ("apiregistration.k8s.io", "apiservices")
        );
        resource
            && matches!(
                info.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
    }

    /// Notes a write that changes what the delegate serves ([`Aggregator::delegate_writes`]).
    pub fn delegate_discovery_changed(&self) {
        if let Ok(mut last) = self.last_delegate_write.lock() {
            *last = Some(std::time::Instant::now());
        }
        self.delegate_writes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A discovery or OpenAPI request soon after a write that changes what the delegate
    /// serves (a CRD, an APIService) catches up with the delegate before it is answered, so a
    /// client that saw its CRD Established on the cluster finds it at once, as it would on
    /// kube-apiserver (whose discovery follows its CRDs within moments): the delegate's
    /// group-versions are asked for now, those added or gone are registered or removed and
    /// waited for, and the delegate's documents are fetched again and published (its OpenAPI
    /// too, for an OpenAPI request), each wait at most [`CATCH_UP_TIMEOUT`].
    pub async fn catch_up_with_delegate(
        &self,
        registry: &Registry,
        docs: &arc_swap::ArcSwap<docs::Docs>,
        openapi: bool,
    ) {
        let Some(delegate) = &self.delegate else {
            return;
        };
        let recent = self
            .last_delegate_write
            .lock()
            .ok()
            .and_then(|last| *last)
            .is_some_and(|at| at.elapsed() < CATCH_UP_WINDOW);
        if !recent {
            return;
        }
        let deadline = tokio::time::Instant::now() + CATCH_UP_TIMEOUT;
        {
            let _one_at_a_time = self.catch_up.lock().await;
            let served = match tokio::time::timeout_at(deadline, delegate.discover()).await {
                Ok(Ok(served)) => served,
                _ => return,
            };
            let listed = |group: &str| {
                !group.is_empty() && group != kubegate_backends::core::apiregistration::GROUP
            };
            let delegated: Vec<(String, String)> = self
                .table
                .load()
                .backends()
                .filter(|b| matches!(b.service.target, apiservice::Target::Delegate))
                .map(|b| (b.service.group.clone(), b.service.version.clone()))
                .collect();
            let gone: Vec<&(String, String)> = delegated
                .iter()
                .filter(|(g, v)| !served.iter().any(|(sg, sv, _)| sg == g && sv == v))
                .collect();
            let missing = |docs: &docs::Docs| {
                served.iter().any(|(group, version, _)| {
                    listed(group) && !docs.discovery.lists(group, version)
                })
            };
            let lingering = |docs: &docs::Docs| {
                gone.iter()
                    .any(|(group, version)| listed(group) && docs.discovery.lists(group, version))
            };
            if missing(&docs.load()) || !gone.is_empty() {
                if let Err(e) = delegate::register(registry, Some(&served)).await {
                    tracing::debug!(error = %e, "registering the delegate's group-versions for a discovery request");
                    return;
                }
                while (missing(&docs.load()) || lingering(&docs.load()))
                    && tokio::time::Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
        // Resources added to or gone from group-versions kubegate already routes, and names
        // changed: the documents themselves, fetched again.
        let mut request = 0;
        self.docs_requested.send_modify(|n| {
            *n += 1;
            request = *n;
        });
        let mut published = if openapi {
            self.openapi_published.subscribe()
        } else {
            self.docs_published.subscribe()
        };
        let _ = tokio::time::timeout_at(deadline, published.wait_for(|at| *at >= request)).await;
    }
}

/// How long after a write that changes the delegate's discovery a discovery request first
/// catches up with the delegate (kube establishes a CRD within moments, 5 s with several
/// servers).
const CATCH_UP_WINDOW: Duration = Duration::from_secs(10);

/// The longest a discovery request waits for the delegate's new group-versions.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(5);

/// After a write that changes the delegate's discovery, how long to wait before each of the
/// prompt re-fetches (its CRD controller establishes a new CRD within moments).
pub const DELEGATE_REFETCH_DELAYS: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

impl Aggregator {
    pub fn new(
        config: &kubegate_config::AggregatorConfig,
        identity: ProxyIdentity,
        delegate: Option<Delegate>,
    ) -> Aggregator {
        Aggregator {
            table: ArcSwap::from_pointee(RouteTable::default()),
            identity: Arc::new(identity),
            delegate: delegate.map(Arc::new),
            resolution: if config.service_resolution == "clusterDNS" {
                Resolution::ClusterDns
            } else {
                Resolution::Endpoints
            },
            check_interval: config.availability_check_interval,
            probe_timeout: config.probe_timeout,
            discovery_refresh_interval: config.discovery_refresh_interval,
            table_changed: tokio::sync::Notify::new(),
            delegate_writes: tokio::sync::watch::channel(0).0,
            last_delegate_write: std::sync::Mutex::new(None),
            catch_up: tokio::sync::Mutex::new(()),
            docs_requested: tokio::sync::watch::channel(0).0,
            docs_published: tokio::sync::watch::channel(0).0,
            openapi_published: tokio::sync::watch::channel(0).0,
        }
    }
}

/// Services, Endpoints and EndpointSlices read from the watch cache.
pub struct CachedObjects<'a>(pub &'a Registry);

impl CachedObjects<'_> {
    fn get(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let def = self.0.find(group, plural)?;
        let cached = self.0.cacher().get(&def.key(namespace, name))?;
        serde_json::from_slice(&cached.bytes).ok()
    }
}

impl ObjectSource for CachedObjects<'_> {
    fn service(&self, namespace: &str, name: &str) -> Option<Value> {
        self.get("", "services", namespace, name)
    }

    fn endpoints(&self, namespace: &str, name: &str) -> Option<Value> {
        self.get("", "endpoints", namespace, name)
    }

    fn endpoint_slices(&self, namespace: &str) -> Vec<Value> {
        let Some(def) = self.0.find("discovery.k8s.io", "endpointslices") else {
            return Vec::new();
        };
        let prefix = def.collection_prefix(namespace);
        match self.0.cacher().list(&prefix, None, None) {
            Ok((items, _)) => items
                .iter()
                .filter_map(|item| serde_json::from_slice(&item.bytes).ok())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

//! Assembles kubegate from the configuration and runs it: PKI, storage and watch cache,
//! registry, authenticators and authorizers, the pingora HTTPS (and optional loopback HTTP)
//! listener, background controllers, and graceful shutdown on SIGTERM.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::core::builtin_resources;
use kubegate_backends::registry::{Registry, RegistryOptions};
use kubegate_backends::storage::cacher::Cacher;
use kubegate_backends::storage::embedded::{EmbeddedOptions, EmbeddedStore};
use kubegate_backends::storage::Store;
use kubegate_config::Config;
use kubegate_policy::authz::rbac::{RbacAuthorizer, RbacIndex};
use kubegate_policy::Authorizer;
use pingora::listeners::ListenerConfig;
use pingora::protocols::l4::stream::{L4BufferSettings, DEFAULT_L4_READ_BUFFER_SIZE};
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};

use crate::aggregator::controller::{self, AuthenticationInfo, RequestHeaderInfo};
use crate::aggregator::delegate::Delegate;
use crate::aggregator::docs::DocSync;
use crate::aggregator::proxy::ProxyIdentity;
use crate::aggregator::Aggregator;
use crate::certs;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::pipeline::Gateway;
use crate::routes::Routes;
use kubegate_backends::core::service_allocations::ServiceAllocations;

/// Errors that stop kubegate from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Config(#[from] kubegate_config::ConfigError),
    #[error("certificates: {0}")]
    Pki(#[from] certs::PkiError),
    #[error("tls: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("storage: {0}")]
    Storage(String),
    #[error("failed to create listener: {0}")]
    Listen(String),
    #[error("{0}")]
    Other(String),
}

/// State shared between the request path and shutdown.
#[derive(Default)]
pub struct Lifecycle {
    /// Set when SIGTERM arrives: readiness fails and watches end.
    pub shutting_down: Arc<AtomicBool>,
    /// Non-long-running requests being served.
    pub in_flight: AtomicUsize,
}

/// Waits for SIGTERM/SIGINT; on SIGTERM drains in-flight requests before telling pingora
/// to stop, so nothing acknowledged is cut off.
struct DrainingShutdown {
    lifecycle: Arc<Lifecycle>,
    timeout: Duration,
}

#[async_trait::async_trait]
impl ShutdownSignalWatch for DrainingShutdown {
    async fn recv(&self) -> ShutdownSignal {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot install signal handlers");
            std::future::pending::<()>().await;
            return ShutdownSignal::FastShutdown;
        };
        let graceful = tokio::select! {
            _ = term.recv() => true,
            _ = int.recv() => false,
        };
        self.lifecycle.shutting_down.store(true, Ordering::SeqCst);
        if !graceful {
            tracing::info!("SIGINT: shutting down now");
            return ShutdownSignal::FastShutdown;
        }
        tracing::info!("SIGTERM: draining in-flight requests");
        let deadline = tokio::time::Instant::now() + self.timeout;
        while self.lifecycle.in_flight.load(Ordering::SeqCst) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Give watches a moment to see the flag and end their streams cleanly.
        tokio::time::sleep(Duration::from_millis(600)).await;
        ShutdownSignal::GracefulTerminate
    }
}

/// The built-in resources plus those that need the authenticators or the authorizer: the
/// `serviceaccounts/token` subresource (TokenRequest), TokenReview, SelfSubjectReview, the
/// access reviews, and the escalation checks on RBAC writes.
fn served_resources(
    authentication: &crate::authn::Authentication,
    lookup: Arc<crate::authn::LateLookup>,
    authorizer: &Arc<dyn Authorizer>,
    rbac_index: &Arc<RbacIndex>,
    service_allocations: &Arc<ServiceAllocations>,
) -> Vec<kubegate_backends::ResourceDef> {
    use kubegate_backends::core::authentication::{selfsubjectreviews_def, tokenreviews_def};
    use kubegate_backends::core::tokenrequest::TokenRequestHandler;
    use kubegate_backends::resource::SubresourceDef;
    let mut resources = builtin_resources();
    for def in resources.iter_mut() {
        if def.group.is_empty() && def.plural == "services" {
            *def = kubegate_backends::core::services::def_with_allocations(
                service_allocations.clone(),
            );
        }
        if def.group.is_empty() && def.plural == "serviceaccounts" {
            def.subresources.push(SubresourceDef {
                name: "token",
                kind: "TokenRequest".into(),
                verbs: vec!["create"],
            });
            def.subresource_handlers.push((
                "token",
                Arc::new(TokenRequestHandler::new(
                    authentication.issuer.clone(),
                    lookup.clone(),
                )),
            ));
        }
    }
    resources.push(tokenreviews_def(Arc::new(crate::authn::BearerReviewer(
        authentication.bearer.clone(),
    ))));
    resources.push(selfsubjectreviews_def());
    resources.extend(kubegate_backends::core::authorization::access_review_defs(
        authorizer.clone(),
    ));
    crate::rbac::guard_writes(&mut resources, rbac_index, authorizer);
    resources
}

/// Largest request header block accepted (Go's `http.DefaultMaxHeaderBytes`).
const MAX_HEADER_BYTES: u32 = 1 << 20;

/// HTTP/2 streams one client connection may have open at once (kube-apiserver's default).
const HTTP2_MAX_STREAMS_PER_CONNECTION: u32 = 1000;

/// A client connection's socket buffers: pingora's read buffer, and a write buffer that holds
/// a response's header and a body of up to ~16 KiB, so both go out in one `send` when the
/// response is finished (pingora writes the header and the body separately; with its default
/// 1,460-byte write buffer an ordinary answer took two sends, two wake-ups of the client).
fn client_buffers() -> L4BufferSettings {
    L4BufferSettings::new(DEFAULT_L4_READ_BUFFER_SIZE, RESPONSE_WRITE_BUFFER)
}

/// The write buffer of a client connection: a full TLS record (16 KiB of plaintext plus its
/// overhead) and a response header.
const RESPONSE_WRITE_BUFFER: usize = 16 * 1024 + 2 * 1024;

/// `ip:port`, with IPv6 addresses bracketed.
fn socket_address(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Where kubegate listens for `--bind-address` `ip`: as kube-apiserver (Go's `net.Listen`),
/// an unspecified address (`0.0.0.0` or `::`) means every interface of both families, so it
/// listens on `[::]` with `IPV6_V6ONLY` off, which takes IPv4 connections too (as
/// IPv4-mapped addresses), on a host that has IPv6; on one without, on `0.0.0.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ListenAddress {
    address: String,
    dual_stack: bool,
    /// The address as the flag gave it (`0.0.0.0:6443`), which messages name as kube's do.
    named: String,
}

fn listen_address(ip: &str, port: u16) -> ListenAddress {
    let unspecified = ip
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified());
    let named = socket_address(ip, port);
    if unspecified && ipv6_available() {
        return ListenAddress {
            address: format!("[::]:{port}"),
            dual_stack: true,
            named,
        };
    }
    let address = if unspecified {
        format!("0.0.0.0:{port}")
    } else {
        named.clone()
    };
    ListenAddress {
        address,
        dual_stack: false,
        named,
    }
}

/// Whether this host can open an IPv6 socket (kernels booted with `ipv6.disable=1` cannot).
fn ipv6_available() -> bool {
    socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).is_ok()
}

impl ListenAddress {
    /// pingora's listener for it.
    fn config(&self) -> ListenerConfig {
        let config = ListenerConfig::tcp(&self.address);
        if !self.dual_stack {
            return config;
        }
        let mut options = pingora::listeners::TcpSocketOptions::default();
        options.ipv6_only = Some(false);
        config.tcp_socket_options(options)
    }

    /// Binds and closes a listener as pingora's will be, so a taken address fails the start.
    /// `SO_REUSEADDR` is set as pingora sets it, so the address is free for pingora right
    /// after.
    fn probe(&self) -> std::io::Result<()> {
        let address: std::net::SocketAddr = self
            .address
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(address),
            socket2::Type::STREAM,
            None,
        )?;
        if self.dual_stack {
            socket.set_only_v6(false)?;
        }
        socket.set_reuse_address(true)?;
        socket.bind(&address.into())?;
        socket.listen(1)
    }
}

/// Fails at once, as kube-apiserver does, when an address kubegate must listen on is taken
/// or cannot be bound: pingora would instead retry a taken address for half a minute (it
/// waits out a process it replaces, which kubegate never does) while kubegate looked started.
fn ensure_can_listen(addresses: &[ListenAddress]) -> Result<(), StartError> {
    for address in addresses {
        address.probe().map_err(|e| {
            StartError::Listen(format!("failed to listen on {}: {e}", address.named))
        })?;
    }
    Ok(())
}

/// How often the start-up bootstrap is tried before kubegate gives up.
const BOOTSTRAP_ATTEMPTS: u64 = 5;

/// Asks the store for its revision every second and records whether it answered.
async fn probe_storage(store: Arc<dyn Store>, ok: Arc<AtomicBool>) {
    loop {
        let answered = matches!(
            tokio::time::timeout(Duration::from_secs(2), store.current_revision()).await,
            Ok(Ok(_))
        );
        ok.store(answered, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The aggregator's proxy identity (configured, or generated from kubegate's own front-proxy
/// CA) and what `extension-apiserver-authentication` tells backends to trust.
fn aggregator_setup(
    config: &Config,
    client_ca: &std::path::Path,
) -> Result<(Arc<Aggregator>, AuthenticationInfo), StartError> {
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| StartError::Other(format!("reading {}: {e}", path.display())))
    };
    let agg = &config.aggregator;
    let (identity, request_header) = match (&agg.proxy_client_cert_file, &agg.proxy_client_key_file)
    {
        (Some(cert), Some(key)) => {
            let identity = ProxyIdentity::load(cert, key).map_err(StartError::Other)?;
            // kube-apiserver publishes its own request-header settings; with a configured
            // proxy certificate those are what describe it.
            let request_header = match &config.authentication.request_header {
                Some(rh) => Some(RequestHeaderInfo {
                    client_ca: read(&rh.client_ca_file)?,
                    allowed_names: rh.allowed_names.clone(),
                    username_headers: rh.username_headers.clone(),
                    uid_headers: rh.uid_headers.clone(),
                    group_headers: rh.group_headers.clone(),
                    extra_headers_prefix: rh.extra_headers_prefix.clone(),
                }),
                None => {
                    tracing::warn!("aggregator.proxyClientCertFile is set without authentication.requestHeader: extension-apiserver-authentication will not say which CA signs it");
                    None
                }
            };
            (identity, request_header)
        }
        _ => {
            let front = certs::ensure_front_proxy(&config.data_dir)?;
            let identity = ProxyIdentity::load(&front.client_cert, &front.client_key)
                .map_err(StartError::Other)?;
            let generated_ca = read(&front.ca_cert)?;
            let request_header = match &config.authentication.request_header {
                // kube publishes the configured request-header settings. The proxy
                // certificate kubegate generated is not signed by the configured CA, so its
                // CA and name are added: extension servers then trust the operator's front
                // proxy and kubegate's own proxying alike.
                Some(rh) => {
                    let configured_ca = read(&rh.client_ca_file)?;
                    let client_ca = if configured_ca.trim() == generated_ca.trim() {
                        configured_ca
                    } else {
                        format!("{}\n{}", configured_ca.trim_end(), generated_ca)
                    };
                    let mut allowed_names = rh.allowed_names.clone();
                    if !allowed_names.is_empty()
                        && !allowed_names
                            .iter()
                            .any(|n| n == certs::FRONT_PROXY_CLIENT_CN)
                    {
                        allowed_names.push(certs::FRONT_PROXY_CLIENT_CN.to_string());
                    }
                    RequestHeaderInfo {
                        client_ca,
                        allowed_names,
                        username_headers: rh.username_headers.clone(),
                        uid_headers: rh.uid_headers.clone(),
                        group_headers: rh.group_headers.clone(),
                        extra_headers_prefix: rh.extra_headers_prefix.clone(),
                    }
                }
                None => RequestHeaderInfo {
                    client_ca: generated_ca,
                    allowed_names: vec![certs::FRONT_PROXY_CLIENT_CN.to_string()],
                    username_headers: vec!["X-Remote-User".into()],
                    uid_headers: vec!["X-Remote-Uid".into()],
                    group_headers: vec!["X-Remote-Group".into()],
                    extra_headers_prefix: vec!["X-Remote-Extra-".into()],
                },
            };
            (identity, Some(request_header))
        }
    };
    let info = AuthenticationInfo {
        client_ca: read(client_ca)?,
        request_header,
    };
    let delegate = match &config.delegate {
        Some(d) => Some(Delegate::from_config(d, agg.probe_timeout).map_err(StartError::Other)?),
        None => None,
    };
    Ok((Arc::new(Aggregator::new(agg, identity, delegate)), info))
}

/// The built-in group-versions `runtimeConfig` switches off. Keys must name a group-version
/// kubegate serves (or `api/all`, `api/legacy`); `apiregistration.k8s.io/v1` always stays on,
/// because APIServices are what kubegate routes by.
fn disabled_group_versions(
    config: &Config,
    resources: &[kubegate_backends::ResourceDef],
) -> Result<BTreeSet<(String, String)>, StartError> {
    let served: BTreeSet<(String, String)> = resources
        .iter()
        .map(|r| (r.group.clone(), r.version.clone()))
        .collect();
    let mut errors = Vec::new();
    for (key, enabled) in &config.runtime_config {
        let known = matches!(key.as_str(), "api/all" | "api/legacy")
            || served.iter().any(|(g, v)| {
                if g.is_empty() {
                    key == &format!("api/{v}")
                } else {
                    key == &format!("{g}/{v}")
                }
            });
        if !known {
            errors.push(format!(
                "runtimeConfig[{key}]: Invalid value: not a group-version kubegate serves (api/all, api/legacy, api/v1 or <group>/<version>)"
            ));
        } else if !enabled && key == "apiregistration.k8s.io/v1" {
            errors.push(format!(
                "runtimeConfig[{key}]: Forbidden: APIServices are how kubegate routes requests; this group-version cannot be switched off"
            ));
        }
    }
    if !errors.is_empty() {
        return Err(StartError::Config(kubegate_config::ConfigError::Invalid(
            errors,
        )));
    }
    Ok(served
        .into_iter()
        .filter(|(g, v)| {
            g != kubegate_backends::core::apiregistration::GROUP
                && !kubegate_config::group_version_enabled(&config.runtime_config, g, v)
        })
        .collect())
}

/// Starts kubegate and blocks until it has shut down.
pub fn run(config: Config) -> Result<(), StartError> {
    config.validate()?;
    let secure_address = listen_address(&config.bind_address, config.secure_port);
    let insecure_address = config
        .insecure_port
        .map(|port| listen_address(&config.insecure_bind_address, port));
    let listen_addresses: Vec<ListenAddress> = std::iter::once(secure_address.clone())
        .chain(insecure_address.clone())
        .collect();
    ensure_can_listen(&listen_addresses)?;
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| StartError::Other(format!("creating {}: {e}", config.data_dir.display())))?;

    // Certificates: configured, or generated in the data dir on first start.
    let names = certs::serving_names(&config.bind_address, &config.tls.sans);
    let pki = certs::ensure(&config.data_dir, &names)?;
    let (cert, key) = match (&config.tls.cert_file, &config.tls.private_key_file) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => (pki.serving_cert.clone(), pki.serving_key.clone()),
    };
    let client_ca: PathBuf = config
        .tls
        .client_ca_file
        .clone()
        .unwrap_or(pki.ca_cert.clone());
    let host = match config.bind_address.as_str() {
        "0.0.0.0" | "::" => "127.0.0.1".to_string(),
        ip if ip.contains(':') => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let server_address = format!("{host}:{}", config.secure_port);
    // Authenticators come first: the registry's TokenRequest and TokenReview handlers use
    // them; their object lookups are bound to the registry once it exists.
    let lookup = Arc::new(crate::authn::LateLookup::default());
    let authentication = crate::authn::build(&config, &client_ca, &server_address, lookup.clone())
        .map_err(StartError::Other)?;
    let tls_settings = crate::tls::settings(&cert, &key, authentication.ca_bundles.clone())?;
    let (aggregator, authentication_info) = aggregator_setup(&config, &client_ca)?;
    // Written once every generated key and certificate is on disk, so its presence tells a
    // script that the data dir's `pki/` is complete (and can be copied to other replicas).
    let kubeconfig_server = format!("https://{host}:{}", config.secure_port);
    certs::write_kubeconfig(&pki, &pki.ca_cert, &kubeconfig_server)?;

    // The RBAC index exists before the registry: the authorizer chain, the access reviews and
    // the escalation checks all read it. It is loaded from the watch cache below and kept
    // current from then on, whatever the configured modes (the escalation checks use it).
    let rbac_index = Arc::new(RbacIndex::new());
    let rbac: Arc<dyn Authorizer> = Arc::new(RbacAuthorizer::new(rbac_index.clone()));
    let authorizer = crate::authz::build(&config, Some(rbac)).map_err(StartError::Other)?;
    warn_about_delegate_authorization(&config);

    // Storage, watch cache and registry live on their own runtime: pingora runs its own
    // runtimes per service and must not be started inside one.
    let background = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("kubegate-bg")
        .enable_all()
        .build()
        .map_err(|e| StartError::Other(format!("starting runtime: {e}")))?;
    // With etcd the data dir holds only certificates and keys, so replicas can share them.
    let (store, storage_check): (Arc<dyn Store>, &str) = match &config.storage.etcd {
        Some(etcd) => {
            let mut options = kubegate_backends::storage::etcd::EtcdOptions::from(etcd);
            // Events expire through etcd leases, as kube-apiserver's (--event-ttl).
            options
                .expiring_prefixes
                .push(kubegate_backends::storage::etcd::ExpiringPrefix {
                    prefix: format!(
                        "{}/",
                        kubegate_backends::core::events::EVENTS_STORAGE_PREFIX
                    ),
                    ttl: config.event_ttl,
                });
            let store = background
                .block_on(kubegate_backends::storage::etcd::connect(&options))
                .map_err(|e| StartError::Storage(format!("etcd: {e}")))?;
            tracing::info!(endpoints = ?etcd.endpoints, prefix = %etcd.prefix, "storage: etcd");
            (store, "etcd")
        }
        None => {
            let store_path = config.data_dir.join("kubegate.redb");
            let store = EmbeddedStore::open(
                &store_path,
                EmbeddedOptions {
                    event_history: config.storage.event_history,
                    ..Default::default()
                },
            )
            .map_err(|e| StartError::Storage(format!("{}: {e}", store_path.display())))?;
            (store, "storage")
        }
    };
    // Which cluster IPs and node ports Services hold, kept from the watch cache below.
    let service_allocations = Arc::new(ServiceAllocations::default());
    let all_resources = served_resources(
        &authentication,
        lookup.clone(),
        &authorizer,
        &rbac_index,
        &service_allocations,
    );
    let disabled = disabled_group_versions(&config, &all_resources)?;
    let conversion_metrics = Arc::new(
        crate::conversion::ConversionMetrics::new()
            .map_err(|e| StartError::Other(e.to_string()))?,
    );
    let registry = background.block_on(async {
        let cacher = Cacher::start(store.clone(), config.storage.watch_cache_history)
            .await
            .map_err(|e| StartError::Storage(e.to_string()))?;
        let registry = Arc::new(
            Registry::new(
                all_resources,
                cacher,
                RegistryOptions {
                    // In front of a cluster that serves the core group, its namespaces are
                    // the ones local kinds (RBAC, say) are written into.
                    namespaces_elsewhere: config.delegate.is_some()
                        && disabled.contains(&(String::new(), "v1".to_string())),
                    ..RegistryOptions::default()
                },
            )
                .with_authorizer(authorizer.clone()),
        );
        // Every bootstrap step is idempotent; replicas starting together on one etcd can
        // race on them (AlreadyExists, Conflict), and whoever loses just runs them again.
        let mut crds_served = String::new();
        let conversion_webhooks: Arc<dyn kubegate_backends::core::crd_conversion::ConversionTransports> =
            Arc::new(crate::conversion::WebhookTransports {
                registry: Arc::downgrade(&registry),
                resolution: aggregator.resolution,
                metrics: Some(conversion_metrics.clone()),
            });
        let mut attempt = 0;
        loop {
            attempt += 1;
            let pass = async {
                registry
                    .ensure_default_namespaces()
                    .await
                    .map_err(|e| StartError::Storage(e.message))?;
                kubegate_backends::core::services::ensure_kubernetes_service(
                    &registry,
                    config.secure_port,
                )
                .await
                .map_err(|e| StartError::Storage(format!("default/kubernetes Service: {e}")))?;
                crate::rbac::reconcile_bootstrap_policy(&registry)
                    .await
                    .map_err(|e| StartError::Storage(format!("RBAC bootstrap policy: {e}")))?;
                kubegate_backends::core::configmaps::ensure_legacy_token_tracking(&registry)
                    .await
                    .map_err(|e| StartError::Storage(format!("legacy token tracking: {e}")))?;
                kubegate_backends::core::flowcontrol_bootstrap::ensure_bootstrap_configuration(&registry)
                    .await
                    .map_err(|e| StartError::Storage(format!("APF bootstrap configuration: {e}")))?;
                crate::rbac::aggregate_cluster_roles(&registry)
                    .await
                    .map_err(|e| StartError::Storage(format!("ClusterRole aggregation: {e}")))?;
                // CRDs established before this start are served from the first request on.
                        crate::crds::sync(&registry, &*conversion_webhooks, &mut crds_served).await;
                controller::register_local_apiservices(&registry, &disabled)
                    .await
                    .map_err(|e| StartError::Storage(format!("local APIServices: {e}")))?;
                // The delegate's group-versions are registered once before serving (so the first
                // requests already route), then kept in sync by `delegate::run`.
                match &aggregator.delegate {
                    Some(delegate) => match delegate.discover().await {
                        Ok(served) => crate::aggregator::delegate::register(&registry, Some(&served))
                            .await
                            .map_err(|e| StartError::Storage(format!("delegate APIServices: {e}")))?,
                        Err(e) => tracing::warn!(error = %e, "the delegate cluster could not be discovered at start; retrying in the background"),
                    },
                    None => crate::aggregator::delegate::register(&registry, None)
                        .await
                        .map_err(|e| StartError::Storage(format!("delegate APIServices: {e}")))?,
                }
                controller::publish_authentication_configmap(&registry, &authentication_info)
                    .await
                    .map_err(StartError::Storage)?;
                Ok::<_, StartError>(())
            }
            .await;
            match pass {
                Ok(()) => break,
                Err(e) if attempt < BOOTSTRAP_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "bootstrap step failed; running the bootstrap again");
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
        let table = controller::build_table(&registry, &aggregator).await;
        aggregator.table.store(Arc::new(table));
        Ok::<_, StartError>((registry, crds_served, conversion_webhooks))
    })?;
    let (registry, crds_served, conversion_webhooks) = registry;
    let rbac_watch = crate::rbac::load(&registry, &rbac_index);
    lookup.bind(Arc::new(crate::authn::RegistryLookup(registry.clone())));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    background.spawn(crate::controllers::namespace_controller(
        registry.clone(),
        Some(aggregator.clone()),
        stop_rx.clone(),
    ));
    background.spawn(crate::controllers::garbage_collector(
        registry.clone(),
        stop_rx.clone(),
    ));
    match std::fs::read_to_string(&pki.ca_cert) {
        Ok(root_ca) => {
            let controllers = crate::controllers::service_accounts::ServiceAccountControllers {
                registry: registry.clone(),
                issuer: authentication.issuer.clone(),
                root_ca,
            };
            background.spawn(controllers.run(stop_rx.clone()));
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading the cluster CA: the service account controllers do not run")
        }
    }
    // On etcd, Events expire through leases (above); the embedded store needs the controller.
    if config.storage.etcd.is_none() {
        background.spawn(crate::controllers::event_ttl::run(
            registry.clone(),
            config.event_ttl,
            stop_rx.clone(),
        ));
    }
    if let Some(follow) = crate::controllers::service_allocations::start(
        registry.clone(),
        service_allocations,
        stop_rx.clone(),
    ) {
        background.spawn(follow);
    }
    // kubegate's own front-proxy PKI is used unless a proxy certificate is configured.
    let own_front_proxy = !matches!(
        (
            &config.aggregator.proxy_client_cert_file,
            &config.aggregator.proxy_client_key_file
        ),
        (Some(_), Some(_))
    );
    background.spawn(certs::renew_periodically(
        config.data_dir.clone(),
        names.clone(),
        kubeconfig_server,
        own_front_proxy,
        stop_rx.clone(),
    ));
    background.spawn(crate::controllers::apiserver_identity::run(
        registry.clone(),
        stop_rx.clone(),
    ));
    background.spawn(crate::rbac::follow(
        registry.clone(),
        rbac_index.clone(),
        rbac_watch,
        stop_rx.clone(),
    ));
    background.spawn(crate::rbac::aggregation_controller(
        registry.clone(),
        stop_rx.clone(),
    ));
    background.spawn(crate::controllers::upkeep::run(
        registry.clone(),
        authentication_info,
        config.secure_port,
        config.flow_control.bootstrap_resync_interval,
        stop_rx.clone(),
    ));
    background.spawn(controller::run(
        registry.clone(),
        aggregator.clone(),
        stop_rx.clone(),
    ));
    background.spawn(crate::crds::run(
        registry.clone(),
        conversion_webhooks,
        crds_served,
        stop_rx.clone(),
    ));
    background.spawn(crate::aggregator::delegate::run(
        registry.clone(),
        aggregator.clone(),
        stop_rx.clone(),
    ));

    let lifecycle = Arc::new(Lifecycle::default());
    let mut health = Health::new();
    health.shutting_down = lifecycle.shutting_down.clone();
    // Health checks are synchronous; a background probe keeps the storage verdict current.
    let storage_ok = Arc::new(AtomicBool::new(true));
    background.spawn(probe_storage(store.clone(), storage_ok.clone()));
    // kube names this check `etcd`, and repeats it for readiness alone as `etcd-readiness`
    // (probes copied from kube set-ups ask for `/readyz/etcd-readiness`).
    let storage_verdict: crate::health::CheckFn = Arc::new(move || {
        if storage_ok.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("storage did not answer".into())
        }
    });
    health.add_live(storage_check, storage_verdict.clone());
    health.add_ready(&format!("{storage_check}-readiness"), storage_verdict);
    let metrics = Arc::new(Metrics::new().map_err(|e| StartError::Other(e.to_string()))?);
    conversion_metrics
        .register(&metrics)
        .map_err(|e| StartError::Other(e.to_string()))?;
    background.spawn(crate::aggregator::availability::run(
        registry.clone(),
        aggregator.clone(),
        metrics.clone(),
        stop_rx.clone(),
    ));
    let flow_metrics = Arc::new(
        crate::flowcontrol::FlowMetrics::register(&metrics)
            .map_err(|e| StartError::Other(e.to_string()))?,
    );
    let flow = Arc::new(crate::flowcontrol::FlowGate::new(
        &config.flow_control,
        config.request_timeout,
        registry.clone(),
        flow_metrics,
    ));
    metrics
        .register(Box::new(crate::flowcontrol::PairGauges::new(&flow)))
        .map_err(|e| StartError::Other(e.to_string()))?;
    let storage_objects = crate::metrics::StorageObjects::new(registry.clone())
        .map_err(|e| StartError::Other(e.to_string()))?;
    metrics
        .register(Box::new(storage_objects))
        .map_err(|e| StartError::Other(e.to_string()))?;
    background.spawn(crate::flowcontrol::run(
        registry.clone(),
        flow.clone(),
        stop_rx.clone(),
    ));
    // Discovery and OpenAPI list only the group-versions served here (switched-off ones are
    // the delegate's, or nobody's), and follow the CRDs.
    let doc_sync = Arc::new(DocSync::following(
        registry.clone(),
        disabled.clone(),
        server_address.clone(),
    ));
    background.spawn(doc_sync.clone().run(aggregator.clone(), stop_rx));
    let routes = Arc::new(Routes {
        docs: doc_sync.docs.clone(),
        registry: registry.clone(),
        health,
        metrics,
        version: crate::version::version_info(),
        issuer_discovery: authentication.discovery.clone(),
        disabled_group_versions: disabled,
        flow: flow.clone(),
        aggregator: aggregator.clone(),
    });
    let gateway = Arc::new(Gateway {
        authenticator: authentication.authenticator.clone(),
        anonymous: authentication.anonymous,
        identity_headers: authentication.identity_headers,
        authorizer,
        routes,
        aggregator,
        flow,
        max_request_bytes: config.max_request_bytes,
        request_timeout: config.request_timeout,
        lifecycle: lifecycle.clone(),
        delegate_impersonation: delegate_impersonation_authorizer(&config)
            .map_err(StartError::Other)?,
    });

    // One pingora worker thread per CPU this process may run on (its affinity mask): more
    // threads than CPUs only add cross-thread wake-ups, which the proxy path pays for in
    // context switches around each shared upstream HTTP/2 connection.
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 64);
    let server_conf = ServerConf {
        threads,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..Default::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, server_conf);
    server.bootstrap();
    // pingora's proxy takes the requests routed to APIService backends; the front reads every
    // request and answers kubegate's own itself.
    let mut proxy = pingora::proxy::http_proxy(
        &server.configuration,
        crate::pipeline::ProxyPhases(gateway.clone()),
    );
    // Go's servers (kube-apiserver) accept header blocks up to 1 MiB over HTTP/2 as over
    // HTTP/1.1; pingora's default is smaller, which would drop large bearer tokens.
    let mut h2 = pingora::protocols::http::v2::server::default_h2_options();
    h2.max_header_list_size(MAX_HEADER_BYTES);
    // kube-apiserver's `--http2-max-streams-per-connection` default (RecommendedOptions:
    // 1000, not Go's 250 or pingora's 100): every watch holds a stream, and a client that
    // multiplexes one connection must not find its 101st request queued behind 100 watches.
    h2.max_concurrent_streams(HTTP2_MAX_STREAMS_PER_CONNECTION);
    proxy.h2_options = Some(h2);
    // Idle HTTP/2 connections close as kube-apiserver's do (HTTP/1.1 ones: front.rs).
    let mut server_options = pingora::apps::HttpServerOptions::default();
    server_options.h2_idle_timeout = Some(config.idle_timeout);
    proxy.server_options = Some(server_options);
    // The front's own upstream pool, for the remote requests it forwards itself.
    let upstream = pingora::connectors::http::Connector::new(Some(
        pingora::connectors::ConnectorOptions::from_server_conf(&server.configuration),
    ));
    let mut service = pingora::services::listening::Service::new(
        "kubegate".to_string(),
        crate::front::Front::new(
            gateway,
            proxy,
            upstream,
            config.idle_timeout,
            config.read_header_timeout,
        ),
    );
    service.add_listener(
        secure_address
            .config()
            .tls(tls_settings)
            .l4_buffer(client_buffers()),
    );
    if let Some(address) = &insecure_address {
        service.add_listener(address.config().l4_buffer(client_buffers()));
    }
    server.add_service(service);
    tracing::info!(
        address = %secure_address.address,
        kubeconfig = %pki.kubeconfig.display(),
        "kubegate serving"
    );
    server.run(RunArgs {
        shutdown_signal: Box::new(DrainingShutdown {
            lifecycle,
            timeout: config.shutdown_timeout,
        }),
    });
    let _ = stop_tx.send(true);
    background.block_on(store.close());
    background.shutdown_timeout(Duration::from_secs(2));
    tracing::info!("kubegate stopped");
    Ok(())
}

/// With `identityForwarding: impersonate`, the cluster's authorizer for the impersonation a
/// caller asks for: SubjectAccessReviews posted to the cluster with kubegate's delegate
/// credential (kube's webhook authorizer, answers reused for 10 s), so a caller may impersonate
/// on the cluster only what the cluster would let it. kubegate's credential needs
/// `create subjectaccessreviews` there (system:masters has it).
fn delegate_impersonation_authorizer(
    config: &kubegate_config::Config,
) -> Result<Option<Arc<dyn Authorizer>>, String> {
    let Some(delegate) = &config.delegate else {
        return Ok(None);
    };
    if delegate.identity_forwarding != "impersonate" {
        return Ok(None);
    }
    let endpoint = crate::authn::delegate_endpoint(
        delegate,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    )
    .map_err(|e| format!("delegate: the cluster's SubjectAccessReview client: {e}"))?;
    // Short cache lifetimes: the cluster checks impersonation against its RBAC on every
    // request, so a revoked grant must stop working within seconds here too, not after kube's
    // webhook default of 5 minutes.
    // The cluster is an API server: it serves `authorization.k8s.io/v1` (v1beta1 went in
    // 1.22), whatever a webhook's default is.
    let authorizer = kubegate_policy::authz::webhook::WebhookAuthorizer::new(endpoint)
        .with_version("v1")
        .map_err(|e| format!("delegate: {e}"))?
        .with_cache_ttls(DELEGATE_SAR_CACHE, DELEGATE_SAR_CACHE);
    Ok(Some(Arc::new(authorizer)))
}

/// How long the cluster's answers about a caller's impersonation are reused.
const DELEGATE_SAR_CACHE: Duration = Duration::from_secs(10);

/// Warns about authorization set-ups in front of a cluster that do not do what they seem to:
/// kubegate's RBAC reads its own store, which RBAC writes no longer reach once the RBAC group
/// is the cluster's. (Impersonation on the cluster's requests is the cluster's to allow in
/// either forwarding mode, so `AlwaysAllow` no longer needs a warning.)
fn warn_about_delegate_authorization(config: &kubegate_config::Config) {
    if config.delegate.is_none() {
        return;
    }
    let modes = &config.authorization.modes;
    let rbac_served = kubegate_config::group_version_enabled(
        &config.runtime_config,
        "rbac.authorization.k8s.io",
        "v1",
    );
    if modes.iter().any(|m| m == "RBAC") && !rbac_served {
        tracing::warn!(
            "authorization mode RBAC with rbac.authorization.k8s.io/v1 switched off: kubegate's RBAC \
             reads its own store, which RBAC objects written through it no longer reach (they go to \
             the cluster); authorize with Webhook against the cluster"
        );
    }
}

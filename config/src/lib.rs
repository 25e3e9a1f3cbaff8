//! # kubegate-config
//!
//! kubegate's typed configuration: the YAML file given with `--config` (camelCase keys,
//! unknown keys rejected), its defaults, and validation that names the field path of every
//! problem. The CLI overlays kube-apiserver-named flags on top of the loaded file.
//!
//! Use: [`Config::load`] a file (or [`Config::default`]), apply overrides, then
//! [`Config::validate`] before starting anything.

mod delegate;
mod duration;
mod storage_etcd;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use delegate::{
    group_version_enabled, parse_runtime_config, parse_server, DelegateConfig, DelegateServer,
    IDENTITY_FORWARDING_MODES,
};
pub use duration::{format_duration, parse_duration, parse_go_duration};
pub use storage_etcd::{EtcdConfig, DEFAULT_ETCD_PREFIX};

/// Errors loading or validating the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// One or more invalid values, each `field.path: reason`.
    #[error("invalid configuration:\n  {}", .0.join("\n  "))]
    Invalid(Vec<String>),
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Port of the HTTPS listener (`--secure-port`, default 6443).
    pub secure_port: u16,
    /// Address of the HTTPS listener (`--bind-address`, default 0.0.0.0).
    pub bind_address: String,
    /// Plain-HTTP listener, off unless configured; loopback addresses only.
    pub insecure_port: Option<u16>,
    /// Address of the plain-HTTP listener (must be a loopback address).
    pub insecure_bind_address: String,
    /// Where the embedded store, certificates and admin kubeconfig live (`--data-dir`).
    pub data_dir: PathBuf,
    pub tls: TlsConfig,
    /// Largest accepted request body in bytes (`--max-request-bytes`, default 3 MiB).
    pub max_request_bytes: usize,
    /// Timeout for non-long-running requests (`--request-timeout`, default 60s).
    #[serde(with = "duration::serde_duration")]
    pub request_timeout: Duration,
    /// How long a client connection may wait for its next request before it is closed
    /// (default 90s: kube-apiserver's fixed `IdleTimeout`, the idle time of Go's client pools).
    #[serde(with = "duration::serde_duration")]
    pub idle_timeout: Duration,
    /// How long a new client connection may take to send its first request's header (and,
    /// with it, what a connection that says nothing holds), before it is closed (default 32s:
    /// kube-apiserver's fixed `ReadHeaderTimeout`).
    #[serde(with = "duration::serde_duration")]
    pub read_header_timeout: Duration,
    /// How long shutdown waits for in-flight requests before closing (`--shutdown-timeout`).
    #[serde(with = "duration::serde_duration")]
    pub shutdown_timeout: Duration,
    /// How long an Event is kept after its last write, create or update (`--event-ttl`,
    /// default 1h, as kube-apiserver).
    #[serde(rename = "eventTTL", with = "duration::serde_duration")]
    pub event_ttl: Duration,
    pub storage: StorageConfig,
    pub authentication: AuthenticationConfig,
    pub authorization: AuthorizationConfig,
    pub aggregator: AggregatorConfig,
    pub flow_control: FlowControlConfig,
    /// An existing Kubernetes API server kubegate fronts (`delegate:`), off unless set.
    pub delegate: Option<DelegateConfig>,
    /// Built-in group-versions switched on or off (`--runtime-config`): `api/all`,
    /// `api/legacy`, `api/v1`, `<group>/<version>`; the most specific key wins.
    pub runtime_config: std::collections::BTreeMap<String, bool>,
    pub logging: LoggingConfig,
}

/// TLS serving and client-certificate settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TlsConfig {
    /// Serving certificate (`--tls-cert-file`); generated in the data dir when unset.
    pub cert_file: Option<PathBuf>,
    /// Serving key (`--tls-private-key-file`).
    pub private_key_file: Option<PathBuf>,
    /// CA bundle for client certificates (`--client-ca-file`); the generated CA when unset.
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<PathBuf>,
    /// Extra names and addresses for the generated serving certificate (`--tls-san`).
    pub sans: Vec<String>,
}

/// Storage engine settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StorageConfig {
    /// Events the store keeps for watch resumption (`--event-history`).
    pub event_history: usize,
    /// Events the watch cache keeps in memory for watches and paginated lists.
    pub watch_cache_history: usize,
    /// Keep objects in etcd v3 instead of the embedded store (`--etcd-servers`).
    pub etcd: Option<EtcdConfig>,
}

/// Authentication settings: which authenticators run (each off unless configured; x509
/// client certificates are always on, against `tls.clientCAFile`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuthenticationConfig {
    /// Requests without credentials become `system:anonymous` (`--anonymous-auth`). Off by
    /// default here: until RBAC is in place the default authorizer would allow them anything.
    pub anonymous: bool,
    /// kube's static token CSV (`--token-auth-file`): `token,user,uid,"group1,group2"`.
    pub token_auth_file: Option<PathBuf>,
    /// Bootstrap tokens from `kube-system` Secrets (`--enable-bootstrap-token-auth`).
    pub bootstrap_tokens: bool,
    pub service_accounts: ServiceAccountConfig,
    /// A kube `AuthenticationConfiguration` file with `jwt` issuers (`--authentication-config`).
    pub config_file: Option<PathBuf>,
    /// Webhook token authentication (`--authentication-token-webhook-config-file`).
    pub webhook: Option<WebhookTokenConfig>,
    /// Front-proxy (request-header) authentication (`--requestheader-*`).
    pub request_header: Option<RequestHeaderConfig>,
    /// How long bearer-token results are cached.
    pub token_cache: TokenCacheConfig,
}

/// ServiceAccount token issuing and verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServiceAccountConfig {
    /// Issuer (`iss`) of tokens kubegate signs (the first `--service-account-issuer`).
    pub issuer: String,
    /// Further issuers whose tokens are still accepted (the later `--service-account-issuer`
    /// flags), so that an issuer can be changed without failing the tokens already out.
    pub accepted_issuers: Vec<String>,
    /// Private key that signs tokens (`--service-account-signing-key-file`); generated in
    /// the data dir when unset.
    pub signing_key_file: Option<PathBuf>,
    /// Extra public keys accepted when verifying (`--service-account-key-file`).
    pub key_files: Vec<PathBuf>,
    /// Audiences tokens must carry when none is asked for (`--api-audiences`); the issuer
    /// when empty.
    pub api_audiences: Vec<String>,
    /// Longest expiration a TokenRequest may ask for (`--service-account-max-token-expiration`).
    #[serde(with = "duration::serde_duration")]
    pub max_token_expiration: Duration,
}

/// Webhook token authentication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookTokenConfig {
    /// A kubeconfig-format file naming the remote service.
    pub config_file: PathBuf,
    /// How long successful reviews are cached (`--authentication-token-webhook-cache-ttl`).
    #[serde(
        rename = "cacheTTL",
        default = "default_webhook_ttl",
        with = "duration::serde_duration"
    )]
    pub cache_ttl: Duration,
    /// How long failed reviews are cached.
    #[serde(
        default = "default_webhook_failure_ttl",
        with = "duration::serde_duration"
    )]
    pub failure_cache_ttl: Duration,
    /// The `authentication.k8s.io` version of the reviews sent: `v1beta1` (kube's default)
    /// or `v1` (`--authentication-token-webhook-version`).
    #[serde(default = "default_webhook_token_version")]
    pub version: String,
}

fn default_webhook_token_version() -> String {
    "v1beta1".into()
}

impl WebhookTokenConfig {
    /// The webhook named by `config_file`, with kube's default cache TTLs.
    pub fn with_file(config_file: PathBuf) -> Self {
        WebhookTokenConfig {
            config_file,
            cache_ttl: default_webhook_ttl(),
            failure_cache_ttl: default_webhook_failure_ttl(),
            version: default_webhook_token_version(),
        }
    }
}

impl RequestHeaderConfig {
    /// Request-header authentication trusting `client_ca_file`, with the `X-Remote-*` headers.
    pub fn with_ca(client_ca_file: PathBuf) -> Self {
        RequestHeaderConfig {
            client_ca_file,
            allowed_names: Vec::new(),
            username_headers: default_username_headers(),
            uid_headers: default_uid_headers(),
            group_headers: default_group_headers(),
            extra_headers_prefix: default_extra_prefixes(),
        }
    }
}

fn default_webhook_ttl() -> Duration {
    Duration::from_secs(120)
}

fn default_webhook_failure_ttl() -> Duration {
    Duration::from_secs(10)
}

/// Front-proxy authentication: identity headers trusted only from client certificates signed
/// by `clientCAFile` (and, when set, with a CN in `allowedNames`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestHeaderConfig {
    /// `--requestheader-client-ca-file`.
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: PathBuf,
    /// `--requestheader-allowed-names` (empty: any CN signed by the CA).
    #[serde(default)]
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    #[serde(default = "default_username_headers")]
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    #[serde(default = "default_uid_headers")]
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    #[serde(default = "default_group_headers")]
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    #[serde(default = "default_extra_prefixes")]
    pub extra_headers_prefix: Vec<String>,
}

fn default_username_headers() -> Vec<String> {
    vec!["X-Remote-User".into()]
}

fn default_uid_headers() -> Vec<String> {
    vec!["X-Remote-Uid".into()]
}

fn default_group_headers() -> Vec<String> {
    vec!["X-Remote-Group".into()]
}

fn default_extra_prefixes() -> Vec<String> {
    vec!["X-Remote-Extra-".into()]
}

/// Bearer-token result cache TTLs (a success never outlives the token's own expiry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TokenCacheConfig {
    #[serde(with = "duration::serde_duration")]
    pub success_ttl: Duration,
    #[serde(with = "duration::serde_duration")]
    pub failure_ttl: Duration,
}

impl Default for ServiceAccountConfig {
    fn default() -> Self {
        ServiceAccountConfig {
            issuer: "https://kubernetes.default.svc.cluster.local".into(),
            accepted_issuers: Vec::new(),
            signing_key_file: None,
            key_files: Vec::new(),
            api_audiences: Vec::new(),
            max_token_expiration: Duration::from_secs(24 * 3600),
        }
    }
}

impl Default for TokenCacheConfig {
    fn default() -> Self {
        TokenCacheConfig {
            success_ttl: Duration::from_secs(10),
            failure_ttl: Duration::ZERO,
        }
    }
}

/// Authorization settings, as kube-apiserver's `--authorization-*` flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuthorizationConfig {
    /// Ordered authorizer modes (`--authorization-mode`), from
    /// [`SUPPORTED_AUTHORIZATION_MODES`]; the first allow or deny decides.
    pub modes: Vec<String>,
    /// The ABAC policy file, one JSON policy per line (`--authorization-policy-file`); only
    /// with mode `ABAC`, which requires it.
    pub policy_file: Option<PathBuf>,
    /// The SubjectAccessReview webhook used by mode `Webhook`.
    pub webhook: WebhookAuthorizationConfig,
}

/// The authorization webhook (`--authorization-webhook-*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookAuthorizationConfig {
    /// A kubeconfig-format file naming the remote service
    /// (`--authorization-webhook-config-file`); only with mode `Webhook`, which requires it.
    pub config_file: Option<PathBuf>,
    /// The `authorization.k8s.io` version of the reviews sent: `v1beta1` (kube's default) or
    /// `v1` (`--authorization-webhook-version`).
    pub version: String,
    /// How long allowed answers are cached (`--authorization-webhook-cache-authorized-ttl`,
    /// default 5m; 0 disables).
    #[serde(rename = "cacheAuthorizedTTL", with = "duration::serde_duration")]
    pub cache_authorized_ttl: Duration,
    /// How long denied and no-opinion answers are cached
    /// (`--authorization-webhook-cache-unauthorized-ttl`, default 30s; 0 disables).
    #[serde(rename = "cacheUnauthorizedTTL", with = "duration::serde_duration")]
    pub cache_unauthorized_ttl: Duration,
}

impl Default for WebhookAuthorizationConfig {
    fn default() -> Self {
        WebhookAuthorizationConfig {
            config_file: None,
            version: "v1beta1".into(),
            cache_authorized_ttl: Duration::from_secs(300),
            cache_unauthorized_ttl: Duration::from_secs(30),
        }
    }
}

/// `SubjectAccessReview` versions the authorization webhook can speak.
pub const SUPPORTED_AUTHORIZATION_WEBHOOK_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// The kube-aggregator role: how APIService backends are reached and watched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AggregatorConfig {
    /// The client certificate kubegate presents to APIService backends
    /// (`--proxy-client-cert-file`); generated on first start from a separate front-proxy CA
    /// when unset, as kubeadm does.
    pub proxy_client_cert_file: Option<PathBuf>,
    /// Its private key (`--proxy-client-key-file`).
    pub proxy_client_key_file: Option<PathBuf>,
    /// How a `spec.service` reference becomes an address: `endpoints` (default: a ready
    /// endpoint from kubegate's own Endpoints/EndpointSlices, or an ExternalName host) or
    /// `clusterDNS` (`<name>.<namespace>.svc:<port>`, when kubegate runs inside a cluster).
    pub service_resolution: String,
    /// How often every remote APIService is probed (`GET /apis/<group>/<version>`); also
    /// probed at once when it changes.
    #[serde(with = "duration::serde_duration")]
    pub availability_check_interval: Duration,
    /// How long one availability probe or discovery fetch may take.
    #[serde(with = "duration::serde_duration")]
    pub probe_timeout: Duration,
    /// How often remote discovery and OpenAPI documents are fetched again.
    #[serde(with = "duration::serde_duration")]
    pub discovery_refresh_interval: Duration,
}

/// The values `aggregator.serviceResolution` takes.
pub const SERVICE_RESOLUTION_MODES: &[&str] = &["endpoints", "clusterDNS"];

impl Default for AggregatorConfig {
    fn default() -> Self {
        AggregatorConfig {
            proxy_client_cert_file: None,
            proxy_client_key_file: None,
            service_resolution: "endpoints".into(),
            availability_check_interval: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(5),
            discovery_refresh_interval: Duration::from_secs(30),
        }
    }
}

impl AggregatorConfig {
    fn validate(&self, errors: &mut Vec<String>) {
        match (&self.proxy_client_cert_file, &self.proxy_client_key_file) {
            (Some(_), None) => errors.push(
                "aggregator.proxyClientKeyFile: Required value: required when aggregator.proxyClientCertFile is set".into(),
            ),
            (None, Some(_)) => errors.push(
                "aggregator.proxyClientCertFile: Required value: required when aggregator.proxyClientKeyFile is set".into(),
            ),
            _ => {}
        }
        if !SERVICE_RESOLUTION_MODES.contains(&self.service_resolution.as_str()) {
            errors.push(format!(
                "aggregator.serviceResolution: Unsupported value: {:?}: supported values: {}",
                self.service_resolution,
                SERVICE_RESOLUTION_MODES.join(", ")
            ));
        }
        for (field, value) in [
            (
                "availabilityCheckInterval",
                self.availability_check_interval,
            ),
            ("probeTimeout", self.probe_timeout),
            ("discoveryRefreshInterval", self.discovery_refresh_interval),
        ] {
            if value < Duration::from_millis(100) {
                errors.push(format!(
                    "aggregator.{field}: Invalid value: \"{}\": must be at least 100ms",
                    format_duration(value)
                ));
            }
        }
    }
}

/// How concurrent requests are limited: API Priority and Fairness (kube's default) or the
/// older max-in-flight limits (`--enable-priority-and-fairness=false`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FlowControlConfig {
    /// `priorityAndFairness` or `maxInFlight`.
    pub mode: String,
    /// Read-only requests in flight (`--max-requests-inflight`); with APF, part of the
    /// server's seat count. In `maxInFlight` mode 0 means unlimited.
    pub max_requests_inflight: u32,
    /// Mutating requests in flight (`--max-mutating-requests-inflight`).
    pub max_mutating_requests_inflight: u32,
    /// How often the APF bootstrap configuration (mandatory and suggested FlowSchemas and
    /// priority levels) is ensured again after start (kube: every minute), so a deleted
    /// mandatory object or an edited auto-updated one comes back without a restart. The
    /// same pass re-checks `kube-system/extension-apiserver-authentication`, which is
    /// otherwise kept in place by its watch.
    #[serde(with = "duration::serde_duration")]
    pub bootstrap_resync_interval: Duration,
}

/// The values `flowControl.mode` takes.
pub const FLOW_CONTROL_MODES: &[&str] = &["priorityAndFairness", "maxInFlight"];

impl Default for FlowControlConfig {
    fn default() -> Self {
        FlowControlConfig {
            mode: "priorityAndFairness".into(),
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            bootstrap_resync_interval: Duration::from_secs(60),
        }
    }
}

impl FlowControlConfig {
    fn validate(&self, errors: &mut Vec<String>) {
        if !FLOW_CONTROL_MODES.contains(&self.mode.as_str()) {
            errors.push(format!(
                "flowControl.mode: Unsupported value: {:?}: supported values: {}",
                self.mode,
                FLOW_CONTROL_MODES.join(", ")
            ));
        } else if self.mode == "priorityAndFairness"
            && self.max_requests_inflight + self.max_mutating_requests_inflight == 0
        {
            // kube: APF needs a positive server concurrency limit.
            errors.push(
                "flowControl.maxRequestsInflight: Invalid value: 0: with priorityAndFairness, maxRequestsInflight + maxMutatingRequestsInflight must be positive".into(),
            );
        }
        if self.bootstrap_resync_interval < Duration::from_secs(1) {
            errors.push(format!(
                "flowControl.bootstrapResyncInterval: Invalid value: \"{}\": must be at least 1s",
                format_duration(self.bootstrap_resync_interval)
            ));
        }
    }
}

/// Log settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// `text` or `json` (`--log-format`).
    pub format: String,
    /// A tracing filter such as `info` or `kubegate=debug` (`--log-level`).
    pub level: String,
}

/// kube-apiserver's default `--event-ttl`.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// Authorization modes this build implements (kube's names; `Node` is not one of them).
pub const SUPPORTED_AUTHORIZATION_MODES: &[&str] =
    &["AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC"];

impl Default for Config {
    fn default() -> Self {
        Config {
            secure_port: 6443,
            bind_address: "0.0.0.0".into(),
            insecure_port: None,
            insecure_bind_address: "127.0.0.1".into(),
            data_dir: PathBuf::from("kubegate-data"),
            tls: TlsConfig::default(),
            max_request_bytes: 3 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(90),
            read_header_timeout: Duration::from_secs(32),
            shutdown_timeout: Duration::from_secs(30),
            event_ttl: DEFAULT_EVENT_TTL,
            storage: StorageConfig::default(),
            authentication: AuthenticationConfig::default(),
            authorization: AuthorizationConfig::default(),
            aggregator: AggregatorConfig::default(),
            flow_control: FlowControlConfig::default(),
            delegate: None,
            runtime_config: Default::default(),
            logging: LoggingConfig::default(),
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            event_history: 10_000,
            watch_cache_history: 10_000,
            etcd: None,
        }
    }
}

impl Default for AuthorizationConfig {
    fn default() -> Self {
        AuthorizationConfig {
            modes: vec!["RBAC".into()],
            policy_file: None,
            webhook: WebhookAuthorizationConfig::default(),
        }
    }
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            format: "text".into(),
            level: "info".into(),
        }
    }
}

impl Config {
    /// Reads a YAML configuration file; missing keys take their defaults, unknown keys fail.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text).map_err(|message| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses YAML text; the error names the field path serde_yaml reports.
    pub fn from_yaml(text: &str) -> Result<Config, String> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let deserializer = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            if path == "." || inner.starts_with(&path) {
                inner
            } else {
                format!("{path}: {inner}")
            }
        })
    }

    /// Checks every value; all problems are reported at once with their field paths.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        if self.secure_port == 0 {
            errors.push("securePort: Invalid value: 0: must be between 1 and 65535".to_string());
        }
        if self.bind_address.parse::<IpAddr>().is_err() {
            errors.push(format!(
                "bindAddress: Invalid value: {:?}: must be an IP address",
                self.bind_address
            ));
        }
        match self.insecure_bind_address.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => {}
            Ok(_) => errors.push(format!(
                "insecureBindAddress: Invalid value: {:?}: the plain-HTTP listener may only bind a loopback address",
                self.insecure_bind_address
            )),
            Err(_) => errors.push(format!(
                "insecureBindAddress: Invalid value: {:?}: must be an IP address",
                self.insecure_bind_address
            )),
        }
        if self.insecure_port == Some(0) {
            errors.push("insecurePort: Invalid value: 0: must be between 1 and 65535".into());
        }
        if self.insecure_port.is_some() && self.insecure_port == Some(self.secure_port) {
            errors.push("insecurePort: Invalid value: must differ from securePort".into());
        }
        if self.data_dir.as_os_str().is_empty() {
            errors.push("dataDir: Required value".into());
        }
        match (&self.tls.cert_file, &self.tls.private_key_file) {
            (Some(_), None) => errors.push(
                "tls.privateKeyFile: Required value: required when tls.certFile is set".into(),
            ),
            (None, Some(_)) => errors.push(
                "tls.certFile: Required value: required when tls.privateKeyFile is set".into(),
            ),
            _ => {}
        }
        for (i, san) in self.tls.sans.iter().enumerate() {
            if san.trim().is_empty() {
                errors.push(format!(
                    "tls.sans[{i}]: Invalid value: \"\": must not be empty"
                ));
            }
        }
        if self.max_request_bytes < 1024 {
            errors.push(format!(
                "maxRequestBytes: Invalid value: {}: must be at least 1024",
                self.max_request_bytes
            ));
        }
        if self.request_timeout.is_zero() {
            errors.push("requestTimeout: Invalid value: \"0s\": must be greater than 0".into());
        }
        if self.idle_timeout.is_zero() {
            errors.push("idleTimeout: Invalid value: \"0s\": must be greater than 0".into());
        }
        if self.read_header_timeout.is_zero() {
            errors.push("readHeaderTimeout: Invalid value: \"0s\": must be greater than 0".into());
        }
        if self.event_ttl.is_zero() {
            errors.push("eventTTL: Invalid value: \"0s\": must be greater than 0".into());
        }
        if self.storage.event_history < 100 {
            errors.push(format!(
                "storage.eventHistory: Invalid value: {}: must be at least 100",
                self.storage.event_history
            ));
        }
        if self.storage.watch_cache_history < 100 {
            errors.push(format!(
                "storage.watchCacheHistory: Invalid value: {}: must be at least 100",
                self.storage.watch_cache_history
            ));
        }
        if let Some(etcd) = &self.storage.etcd {
            etcd.validate(&mut errors);
        }
        let sa = &self.authentication.service_accounts;
        if sa.issuer.trim().is_empty() {
            errors.push("authentication.serviceAccounts.issuer: Required value".into());
        }
        // kube's `--service-account-issuer` checks: none empty, none twice.
        for (i, issuer) in sa.accepted_issuers.iter().enumerate() {
            if issuer.trim().is_empty() {
                errors.push(format!(
                    "authentication.serviceAccounts.acceptedIssuers[{i}]: Required value"
                ));
            } else if *issuer == sa.issuer || sa.accepted_issuers[..i].contains(issuer) {
                errors.push(format!(
                    "service-account-issuer {issuer:?} is already specified"
                ));
            }
        }
        if sa.max_token_expiration < Duration::from_secs(600) {
            errors.push(format!(
                "authentication.serviceAccounts.maxTokenExpiration: Invalid value: \"{}\": must be at least 10m",
                format_duration(sa.max_token_expiration)
            ));
        }
        if let Some(rh) = &self.authentication.request_header {
            if rh.username_headers.is_empty() {
                errors.push(
                    "authentication.requestHeader.usernameHeaders: Required value: at least one header".into(),
                );
            }
        }
        self.authorization.validate(&mut errors);
        self.aggregator.validate(&mut errors);
        self.flow_control.validate(&mut errors);
        if let Some(delegate) = &self.delegate {
            delegate.validate(&mut errors);
        }
        if !["text", "json"].contains(&self.logging.format.as_str()) {
            errors.push(format!(
                "logging.format: Unsupported value: {:?}: supported values: text, json",
                self.logging.format
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(errors))
        }
    }
}

impl AuthorizationConfig {
    /// kube-apiserver's checks of its authorization flags, as field-path errors.
    fn validate(&self, errors: &mut Vec<String>) {
        let modes = &self.modes;
        if modes.is_empty() {
            errors.push("authorization.modes: Required value: at least one mode".into());
        }
        for (i, mode) in modes.iter().enumerate() {
            if !SUPPORTED_AUTHORIZATION_MODES.contains(&mode.as_str()) {
                errors.push(format!(
                    "authorization.modes[{i}]: Unsupported value: {mode:?}: supported values: {}",
                    SUPPORTED_AUTHORIZATION_MODES.join(", ")
                ));
            }
            if modes[..i].contains(mode) {
                errors.push(format!(
                    "authorization.modes[{i}]: Duplicate value: {mode:?}"
                ));
            }
        }
        let has = |mode: &str| modes.iter().any(|m| m == mode);
        // An empty path is no path, as kube's string flags have it.
        let set = |path: &Option<PathBuf>| {
            path.as_ref()
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| p.display().to_string())
        };
        for (field, path, mode) in [
            ("authorization.policyFile", set(&self.policy_file), "ABAC"),
            (
                "authorization.webhook.configFile",
                set(&self.webhook.config_file),
                "Webhook",
            ),
        ] {
            match (path, has(mode)) {
                (None, true) => errors.push(format!(
                    "{field}: Required value: required when authorization.modes includes {mode}"
                )),
                (Some(path), false) => errors.push(format!(
                    "{field}: Forbidden: {path:?} may only be set when authorization.modes includes {mode}"
                )),
                _ => {}
            }
        }
        let webhook = &self.webhook;
        if !SUPPORTED_AUTHORIZATION_WEBHOOK_VERSIONS.contains(&webhook.version.as_str()) {
            errors.push(format!(
                "authorization.webhook.version: Unsupported value: {:?}: supported values: {}",
                webhook.version,
                SUPPORTED_AUTHORIZATION_WEBHOOK_VERSIONS.join(", ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_defaults() {
        let c = Config::from_yaml("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.secure_port, 6443);
        c.validate().unwrap();
    }

    #[test]
    fn reads_camel_case_keys_and_durations() {
        let c = Config::from_yaml(
            "securePort: 7443\nrequestTimeout: 1m30s\nidleTimeout: 2m\ntls:\n  sans: [kube.example]\n  clientCAFile: /x/ca.crt\n",
        )
        .unwrap();
        assert_eq!(c.secure_port, 7443);
        assert_eq!(c.request_timeout, Duration::from_secs(90));
        assert_eq!(c.idle_timeout, Duration::from_secs(120));
        assert_eq!(c.tls.sans, vec!["kube.example"]);
        assert_eq!(c.tls.client_ca_file, Some(PathBuf::from("/x/ca.crt")));
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_path() {
        let err = Config::from_yaml("tls:\n  certFil: x\n").unwrap_err();
        assert!(err.contains("tls"), "{err}");
        assert!(err.contains("unknown field `certFil`"), "{err}");
        let err = Config::from_yaml("securePrt: 1\n").unwrap_err();
        assert!(err.contains("unknown field `securePrt`"), "{err}");
    }

    #[test]
    fn bad_values_are_all_reported_with_field_paths() {
        let c = Config::from_yaml(
            "securePort: 0\ninsecurePort: 8080\ninsecureBindAddress: 0.0.0.0\nauthorization:\n  modes: [Bogus]\nlogging:\n  format: xml\n",
        )
        .unwrap();
        let ConfigError::Invalid(errors) = c.validate().unwrap_err() else {
            panic!("expected Invalid")
        };
        let all = errors.join("\n");
        assert!(all.contains("securePort: Invalid value: 0"), "{all}");
        assert!(all.contains("insecureBindAddress"), "{all}");
        assert!(
            all.contains("authorization.modes[0]: Unsupported value: \"Bogus\""),
            "{all}"
        );
        assert!(all.contains("logging.format"), "{all}");
    }

    #[test]
    fn authentication_section_reads_kube_settings() {
        let c = Config::from_yaml(
            "authentication:\n  anonymous: true\n  tokenAuthFile: /etc/tokens.csv\n  webhook:\n    configFile: /etc/wh.kubeconfig\n  requestHeader:\n    clientCAFile: /etc/fp-ca.crt\n    allowedNames: [front-proxy-client]\n  serviceAccounts:\n    maxTokenExpiration: 48h\n",
        )
        .unwrap();
        let a = &c.authentication;
        assert!(a.anonymous);
        assert_eq!(
            a.webhook.as_ref().unwrap().cache_ttl,
            Duration::from_secs(120)
        );
        let rh = a.request_header.as_ref().unwrap();
        assert_eq!(rh.username_headers, vec!["X-Remote-User"]);
        assert_eq!(rh.extra_headers_prefix, vec!["X-Remote-Extra-"]);
        assert_eq!(
            a.service_accounts.max_token_expiration,
            Duration::from_secs(48 * 3600)
        );
        c.validate().unwrap();
        let err = Config::from_yaml("authentication:\n  webhook: {}\n").unwrap_err();
        assert!(err.contains("configFile"), "{err}");
    }

    #[test]
    fn authorization_defaults_to_rbac() {
        let a = Config::default().authorization;
        assert_eq!(a.modes, vec!["RBAC"]);
        assert_eq!(a.policy_file, None);
        assert_eq!(a.webhook.config_file, None);
        assert_eq!(a.webhook.version, "v1beta1", "kube's default");
        assert_eq!(a.webhook.cache_authorized_ttl, Duration::from_secs(300));
        assert_eq!(a.webhook.cache_unauthorized_ttl, Duration::from_secs(30));
    }

    #[test]
    fn authorization_section_reads_kube_settings() {
        let c = Config::from_yaml(
            "authorization:\n  modes: [ABAC, Webhook, RBAC]\n  policyFile: /etc/abac.jsonl\n  webhook:\n    configFile: /etc/authz.kubeconfig\n    version: v1beta1\n    cacheAuthorizedTTL: 1m\n    cacheUnauthorizedTTL: 0s\n",
        )
        .unwrap();
        let a = &c.authorization;
        assert_eq!(a.modes, vec!["ABAC", "Webhook", "RBAC"]);
        assert_eq!(a.policy_file, Some(PathBuf::from("/etc/abac.jsonl")));
        assert_eq!(
            a.webhook.config_file,
            Some(PathBuf::from("/etc/authz.kubeconfig"))
        );
        assert_eq!(a.webhook.version, "v1beta1");
        assert_eq!(a.webhook.cache_authorized_ttl, Duration::from_secs(60));
        assert_eq!(a.webhook.cache_unauthorized_ttl, Duration::ZERO);
        c.validate().unwrap();
        // Omitted webhook keys take their defaults.
        let c = Config::from_yaml(
            "authorization:\n  modes: [Webhook]\n  webhook:\n    configFile: /w\n",
        )
        .unwrap();
        assert_eq!(c.authorization.webhook.version, "v1beta1");
        assert_eq!(
            c.authorization.webhook.cache_unauthorized_ttl,
            Duration::from_secs(30)
        );
        c.validate().unwrap();
        let err = Config::from_yaml("authorization:\n  webhook:\n    cacheTTL: 1m\n").unwrap_err();
        assert!(err.contains("unknown field `cacheTTL`"), "{err}");
        let err = Config::from_yaml("authorization:\n  webhook:\n    cacheAuthorizedTTL: soon\n")
            .unwrap_err();
        assert!(err.contains("authorization.webhook"), "{err}");
    }

    fn authorization_errors(yaml: &str) -> Vec<String> {
        match Config::from_yaml(yaml).unwrap().validate() {
            Ok(()) => Vec::new(),
            Err(ConfigError::Invalid(errors)) => errors,
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn authorization_is_validated_as_kube_apiserver_does() {
        for ok in [
            "authorization:\n  modes: [AlwaysAllow]\n",
            "authorization:\n  modes: [AlwaysDeny, RBAC]\n",
            "authorization:\n  modes: [ABAC]\n  policyFile: /p\n",
            "authorization:\n  modes: [RBAC, Webhook]\n  webhook: {configFile: /w}\n",
            // TTLs and version without the Webhook mode are harmless, as in kube.
            "authorization:\n  webhook: {version: v1beta1, cacheAuthorizedTTL: 1s}\n",
        ] {
            assert_eq!(authorization_errors(ok), Vec::<String>::new(), "{ok}");
        }
        for (yaml, expected) in [
            (
                "authorization:\n  modes: []\n",
                vec!["authorization.modes: Required value: at least one mode"],
            ),
            (
                "authorization:\n  modes: [RBAC, Node, rbac]\n",
                vec![
                    "authorization.modes[1]: Unsupported value: \"Node\": supported values: AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC",
                    "authorization.modes[2]: Unsupported value: \"rbac\": supported values: AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC",
                ],
            ),
            (
                "authorization:\n  modes: [RBAC, AlwaysAllow, RBAC]\n",
                vec!["authorization.modes[2]: Duplicate value: \"RBAC\""],
            ),
            (
                "authorization:\n  modes: [ABAC, Webhook]\n",
                vec![
                    "authorization.policyFile: Required value: required when authorization.modes includes ABAC",
                    "authorization.webhook.configFile: Required value: required when authorization.modes includes Webhook",
                ],
            ),
            (
                "authorization:\n  modes: [ABAC]\n  policyFile: \"\"\n",
                vec!["authorization.policyFile: Required value: required when authorization.modes includes ABAC"],
            ),
            (
                "authorization:\n  modes: [RBAC]\n  policyFile: /p\n  webhook: {configFile: /w}\n",
                vec![
                    "authorization.policyFile: Forbidden: \"/p\" may only be set when authorization.modes includes ABAC",
                    "authorization.webhook.configFile: Forbidden: \"/w\" may only be set when authorization.modes includes Webhook",
                ],
            ),
            (
                "authorization:\n  modes: [Webhook]\n  webhook: {configFile: /w, version: v2}\n",
                vec!["authorization.webhook.version: Unsupported value: \"v2\": supported values: v1, v1beta1"],
            ),
        ] {
            assert_eq!(authorization_errors(yaml), expected, "{yaml}");
        }
    }

    #[test]
    fn event_ttl_defaults_to_an_hour_and_reads_go_durations() {
        assert_eq!(Config::default().event_ttl, Duration::from_secs(3600));
        for (yaml, expected) in [
            ("eventTTL: 30m\n", Duration::from_secs(1800)),
            ("eventTTL: 90s\n", Duration::from_secs(90)),
            ("eventTTL: 1h30m\n", Duration::from_secs(5400)),
            ("eventTTL: 1500ms\n", Duration::from_millis(1500)),
        ] {
            let c = Config::from_yaml(yaml).unwrap();
            assert_eq!(c.event_ttl, expected, "{yaml}");
            c.validate().unwrap();
        }
    }

    #[test]
    fn event_ttl_must_be_positive() {
        let c = Config::from_yaml("eventTTL: 0s\n").unwrap();
        let ConfigError::Invalid(errors) = c.validate().unwrap_err() else {
            panic!("expected Invalid")
        };
        assert_eq!(
            errors,
            vec!["eventTTL: Invalid value: \"0s\": must be greater than 0"]
        );
        let err = Config::from_yaml("eventTTL: soon\n").unwrap_err();
        assert!(err.contains("eventTTL"), "{err}");
        // The key is kube's acronym spelling, like the neighbouring `*TTL` keys.
        let err = Config::from_yaml("eventTtl: 1h\n").unwrap_err();
        assert!(err.contains("unknown field `eventTtl`"), "{err}");
    }

    #[test]
    fn wrong_types_are_parse_errors() {
        let err = Config::from_yaml("securePort: seventy\n").unwrap_err();
        assert!(err.contains("securePort"), "{err}");
        let err = Config::from_yaml("requestTimeout: soon\n").unwrap_err();
        assert!(err.contains("requestTimeout"), "{err}");
    }
}

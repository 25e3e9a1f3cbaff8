//! The command line: `kubegate serve` with kube-apiserver's flag names overlaid on the
//! `--config` file, and `kubegate version`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use kubegate_config::{parse_duration, Config, ConfigError, LoggingConfig};

#[derive(Parser, Debug)]
#[command(
    name = "kubegate",
    version,
    about = "A Kubernetes API gateway on pingora"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the Kubernetes API.
    Serve(Box<ServeFlags>),
    /// Print the version.
    Version,
    /// Copy every object of an embedded data dir into etcd (`--to` names a kubegate
    /// configuration file, or the `--etcd-*` flags, with `storage.etcd`).
    Migrate(MigrateFlags),
}

/// Flags of `migrate`.
#[derive(Args, Debug, Default)]
pub struct MigrateFlags {
    /// The data dir whose embedded store (`kubegate.redb`) is copied; kubegate must not be
    /// running on it.
    #[arg(long)]
    pub from: PathBuf,
    /// A kubegate configuration file whose `storage.etcd` is the target.
    #[arg(long)]
    pub to: Option<PathBuf>,
    /// etcd endpoints, comma-separated (instead of, or over, `--to`).
    #[arg(long)]
    pub etcd_servers: Option<String>,
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    #[arg(long)]
    pub etcd_prefix: Option<String>,
    /// Write into a prefix that already holds data (existing keys are overwritten).
    #[arg(long)]
    pub force: bool,
}

impl MigrateFlags {
    /// The target etcd settings: the file's `storage.etcd` with the flags applied on top.
    pub fn etcd(&self) -> Result<kubegate_config::EtcdConfig, String> {
        let mut config = match &self.to {
            Some(path) => Config::load(path).map_err(|e| e.to_string())?,
            None => Config::default(),
        };
        let mut etcd = config.storage.etcd.take().unwrap_or_default();
        if let Some(servers) = &self.etcd_servers {
            etcd.endpoints = servers
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
        }
        if let Some(v) = &self.etcd_cafile {
            etcd.ca_file = Some(v.clone());
        }
        if let Some(v) = &self.etcd_certfile {
            etcd.cert_file = Some(v.clone());
        }
        if let Some(v) = &self.etcd_keyfile {
            etcd.key_file = Some(v.clone());
        }
        if let Some(v) = &self.etcd_prefix {
            etcd.prefix = v.clone();
        }
        if etcd.endpoints.is_empty() {
            return Err(
                "no etcd to migrate to: give --to <config file with storage.etcd> or --etcd-servers"
                    .into(),
            );
        }
        config.storage.etcd = Some(etcd.clone());
        config.validate().map_err(|e| e.to_string())?;
        Ok(etcd)
    }
}

/// Flags of `serve`; each overrides the same setting of the `--config` file.
#[derive(Args, Debug, Default)]
pub struct ServeFlags {
    /// YAML configuration file (camelCase keys; unknown keys are errors).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data directory: embedded store, generated certificates, admin.kubeconfig.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// HTTPS port.
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// Address of the HTTPS listener.
    #[arg(long)]
    pub bind_address: Option<String>,
    /// Plain-HTTP port (loopback only; off unless set).
    #[arg(long)]
    pub insecure_port: Option<u16>,
    /// Address of the plain-HTTP listener (must be loopback).
    #[arg(long)]
    pub insecure_bind_address: Option<String>,
    /// Serving certificate (PEM); generated when unset.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA bundle for client certificates; the generated CA when unset.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Extra names or IPs for the generated serving certificate (repeatable).
    #[arg(long = "tls-san")]
    pub tls_sans: Vec<String>,
    /// Largest accepted request body in bytes.
    #[arg(long)]
    pub max_request_bytes: Option<usize>,
    /// Timeout of non-long-running requests (Go duration, e.g. 60s).
    #[arg(long)]
    pub request_timeout: Option<String>,
    /// How long SIGTERM waits for in-flight requests.
    #[arg(long)]
    pub shutdown_timeout: Option<String>,
    /// How long an Event is kept after its last write (Go duration, e.g. 1h).
    #[arg(long)]
    pub event_ttl: Option<String>,
    /// Requests without credentials become system:anonymous (`--anonymous-auth[=true|false]`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub anonymous_auth: Option<bool>,
    /// kube's static token CSV file (`token,user,uid,"group1,group2"`), re-read on change.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Bootstrap tokens from kube-system Secrets (`--enable-bootstrap-token-auth[=true|false]`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_bootstrap_token_auth: Option<bool>,
    /// kube's AuthenticationConfiguration file (JWT issuers, anonymous).
    #[arg(long)]
    pub authentication_config: Option<PathBuf>,
    /// The ServiceAccount token issuer URL; repeated, the first signs and all are accepted.
    #[arg(long)]
    pub service_account_issuer: Vec<String>,
    /// Private key that signs ServiceAccount tokens.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Public keys that verify ServiceAccount tokens (repeatable).
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,
    /// Audiences of the API, comma-separated.
    #[arg(long)]
    pub api_audiences: Option<String>,
    /// Longest expiration a TokenRequest may ask for (Go duration).
    #[arg(long)]
    pub service_account_max_token_expiration: Option<String>,
    /// CA bundle that signs front-proxy client certificates (request-header authentication).
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Front-proxy certificate CNs allowed to set identity headers (comma-separated,
    /// repeatable; empty: any certificate the CA signed).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers carrying the user name (comma-separated, repeatable).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_username_headers: Vec<String>,
    /// Headers carrying the user's UID.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers carrying the groups.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_group_headers: Vec<String>,
    /// Header prefixes carrying the extra attributes.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// kubeconfig-format file naming the TokenReview webhook.
    #[arg(long)]
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// How long the webhook's answers are cached (Go duration, default 2m).
    #[arg(long)]
    pub authentication_token_webhook_cache_ttl: Option<String>,
    /// TokenReview version sent to the webhook: v1beta1 (default, as kube) or v1.
    #[arg(long)]
    pub authentication_token_webhook_version: Option<String>,
    /// Ordered authorization modes, comma-separated (AlwaysAllow, AlwaysDeny, ABAC, Webhook,
    /// RBAC; default RBAC).
    #[arg(long)]
    pub authorization_mode: Option<String>,
    /// ABAC policy file, one JSON policy per line (with --authorization-mode=ABAC).
    #[arg(long)]
    pub authorization_policy_file: Option<PathBuf>,
    /// kubeconfig-format file naming the SubjectAccessReview webhook (with
    /// --authorization-mode=Webhook).
    #[arg(long)]
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// SubjectAccessReview version sent to the webhook: v1 (default) or v1beta1.
    #[arg(long)]
    pub authorization_webhook_version: Option<String>,
    /// How long the webhook's allowed answers are cached (Go duration, default 5m).
    #[arg(long)]
    pub authorization_webhook_cache_authorized_ttl: Option<String>,
    /// How long the webhook's denied and no-opinion answers are cached (default 30s).
    #[arg(long)]
    pub authorization_webhook_cache_unauthorized_ttl: Option<String>,
    /// Client certificate presented to APIService backends (generated from a front-proxy CA
    /// on first start when unset).
    #[arg(long)]
    pub proxy_client_cert_file: Option<PathBuf>,
    /// Private key of --proxy-client-cert-file.
    #[arg(long)]
    pub proxy_client_key_file: Option<PathBuf>,
    /// API Priority and Fairness (default true); false uses the max-in-flight limits.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_priority_and_fairness: Option<bool>,
    /// Read-only requests in flight (APF: part of the server's seats; 0 = unlimited without APF).
    #[arg(long)]
    pub max_requests_inflight: Option<u32>,
    /// Mutating requests in flight.
    #[arg(long)]
    pub max_mutating_requests_inflight: Option<u32>,
    /// Built-in group-versions to switch on or off, as kube-apiserver's flag:
    /// `api/all=false,rbac.authorization.k8s.io/v1=true` (merged over the config file's).
    #[arg(long)]
    pub runtime_config: Option<String>,
    /// etcd client URLs, comma-separated: store objects in etcd instead of the embedded
    /// store.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// CA bundle that verifies etcd's serving certificates (https endpoints).
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate presented to etcd.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// Private key of --etcd-certfile.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// Prefix of every key in etcd (default /registry).
    #[arg(long)]
    pub etcd_prefix: Option<String>,
    /// How often etcd's history is compacted (Go duration, default 5m; 0 disables).
    #[arg(long)]
    pub etcd_compaction_interval: Option<String>,
    /// text or json.
    #[arg(long)]
    pub log_format: Option<String>,
    /// A tracing filter, e.g. info or kubegate=debug.
    #[arg(long)]
    pub log_level: Option<String>,
}

impl ServeFlags {
    /// The configuration file (or defaults) with these flags applied on top.
    pub fn into_config(self) -> Result<Config, ConfigError> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        let mut errors = Vec::new();
        if let Some(v) = self.data_dir {
            config.data_dir = v;
        }
        if let Some(v) = self.secure_port {
            config.secure_port = v;
        }
        if let Some(v) = self.bind_address {
            config.bind_address = v;
        }
        if let Some(v) = self.insecure_port {
            config.insecure_port = Some(v);
        }
        if let Some(v) = self.insecure_bind_address {
            config.insecure_bind_address = v;
        }
        if let Some(v) = self.tls_cert_file {
            config.tls.cert_file = Some(v);
        }
        if let Some(v) = self.tls_private_key_file {
            config.tls.private_key_file = Some(v);
        }
        if let Some(v) = self.client_ca_file {
            config.tls.client_ca_file = Some(v);
        }
        if !self.tls_sans.is_empty() {
            config.tls.sans = self.tls_sans;
        }
        if let Some(v) = self.max_request_bytes {
            config.max_request_bytes = v;
        }
        for (flag, value, target) in [
            (
                "--request-timeout",
                self.request_timeout,
                &mut config.request_timeout,
            ),
            (
                "--shutdown-timeout",
                self.shutdown_timeout,
                &mut config.shutdown_timeout,
            ),
            ("--event-ttl", self.event_ttl, &mut config.event_ttl),
        ] {
            if let Some(v) = value {
                match parse_duration(&v) {
                    Ok(d) => *target = d,
                    Err(e) => errors.push(format!("{flag}: {e}")),
                }
            }
        }
        let authn = &mut config.authentication;
        if let Some(v) = self.anonymous_auth {
            authn.anonymous = v;
        }
        if let Some(v) = self.token_auth_file {
            authn.token_auth_file = Some(v);
        }
        if let Some(v) = self.enable_bootstrap_token_auth {
            authn.bootstrap_tokens = v;
        }
        if let Some(v) = self.authentication_config {
            authn.config_file = Some(v);
        }
        let mut issuers = self.service_account_issuer.into_iter();
        if let Some(first) = issuers.next() {
            authn.service_accounts.issuer = first;
            authn.service_accounts.accepted_issuers = issuers.collect();
        }
        if let Some(v) = self.service_account_signing_key_file {
            authn.service_accounts.signing_key_file = Some(v);
        }
        if !self.service_account_key_file.is_empty() {
            authn.service_accounts.key_files = self.service_account_key_file;
        }
        if let Some(v) = self.api_audiences {
            authn.service_accounts.api_audiences = v
                .split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect();
        }
        if let Some(v) = self.service_account_max_token_expiration {
            match parse_duration(&v) {
                Ok(d) => authn.service_accounts.max_token_expiration = d,
                Err(e) => errors.push(format!("--service-account-max-token-expiration: {e}")),
            }
        }
        let header_flags_set = !self.requestheader_allowed_names.is_empty()
            || !self.requestheader_username_headers.is_empty()
            || !self.requestheader_uid_headers.is_empty()
            || !self.requestheader_group_headers.is_empty()
            || !self.requestheader_extra_headers_prefix.is_empty();
        if let Some(ca) = self.requestheader_client_ca_file {
            match &mut authn.request_header {
                Some(rh) => rh.client_ca_file = ca,
                None => {
                    authn.request_header = Some(kubegate_config::RequestHeaderConfig::with_ca(ca))
                }
            }
        }
        match &mut authn.request_header {
            Some(rh) => {
                let trimmed = |v: Vec<String>| -> Vec<String> {
                    v.into_iter()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                };
                if !self.requestheader_allowed_names.is_empty() {
                    rh.allowed_names = trimmed(self.requestheader_allowed_names);
                }
                if !self.requestheader_username_headers.is_empty() {
                    rh.username_headers = trimmed(self.requestheader_username_headers);
                }
                if !self.requestheader_uid_headers.is_empty() {
                    rh.uid_headers = trimmed(self.requestheader_uid_headers);
                }
                if !self.requestheader_group_headers.is_empty() {
                    rh.group_headers = trimmed(self.requestheader_group_headers);
                }
                if !self.requestheader_extra_headers_prefix.is_empty() {
                    rh.extra_headers_prefix = trimmed(self.requestheader_extra_headers_prefix);
                }
            }
            None if header_flags_set => errors.push(
                "--requestheader-client-ca-file: Required value: the other --requestheader-* flags need the CA that signs front-proxy certificates".into(),
            ),
            None => {}
        }
        if let Some(file) = self.authentication_token_webhook_config_file {
            match &mut authn.webhook {
                Some(w) => w.config_file = file,
                None => authn.webhook = Some(kubegate_config::WebhookTokenConfig::with_file(file)),
            }
        }
        if let Some(v) = self.authentication_token_webhook_cache_ttl {
            match (parse_duration(&v), &mut authn.webhook) {
                (Ok(d), Some(w)) => w.cache_ttl = d,
                (Ok(_), None) => errors.push(
                    "--authentication-token-webhook-cache-ttl: needs --authentication-token-webhook-config-file".into(),
                ),
                (Err(e), _) => errors.push(format!("--authentication-token-webhook-cache-ttl: {e}")),
            }
        }
        if let Some(v) = self.authentication_token_webhook_version {
            match &mut authn.webhook {
                Some(w) => w.version = v,
                None => errors.push(
                    "--authentication-token-webhook-version: needs --authentication-token-webhook-config-file".into(),
                ),
            }
        }
        if let Some(v) = self.authorization_mode {
            config.authorization.modes = v.split(',').map(|m| m.trim().to_string()).collect();
        }
        if let Some(v) = self.authorization_policy_file {
            config.authorization.policy_file = Some(v);
        }
        let webhook = &mut config.authorization.webhook;
        if let Some(v) = self.authorization_webhook_config_file {
            webhook.config_file = Some(v);
        }
        if let Some(v) = self.authorization_webhook_version {
            webhook.version = v;
        }
        for (flag, value, target) in [
            (
                "--authorization-webhook-cache-authorized-ttl",
                self.authorization_webhook_cache_authorized_ttl,
                &mut webhook.cache_authorized_ttl,
            ),
            (
                "--authorization-webhook-cache-unauthorized-ttl",
                self.authorization_webhook_cache_unauthorized_ttl,
                &mut webhook.cache_unauthorized_ttl,
            ),
        ] {
            if let Some(v) = value {
                match parse_duration(&v) {
                    Ok(d) => *target = d,
                    Err(e) => errors.push(format!("{flag}: {e}")),
                }
            }
        }
        if let Some(v) = self.proxy_client_cert_file {
            config.aggregator.proxy_client_cert_file = Some(v);
        }
        if let Some(v) = self.proxy_client_key_file {
            config.aggregator.proxy_client_key_file = Some(v);
        }
        if let Some(enabled) = self.enable_priority_and_fairness {
            config.flow_control.mode = if enabled {
                "priorityAndFairness".into()
            } else {
                "maxInFlight".into()
            };
        }
        if let Some(v) = self.max_requests_inflight {
            config.flow_control.max_requests_inflight = v;
        }
        if let Some(v) = self.max_mutating_requests_inflight {
            config.flow_control.max_mutating_requests_inflight = v;
        }
        if let Some(v) = self.runtime_config {
            match kubegate_config::parse_runtime_config(&v) {
                Ok(map) => config.runtime_config.extend(map),
                Err(e) => errors.push(format!("--runtime-config: {e}")),
            }
        }
        let servers: Vec<String> = self
            .etcd_servers
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if !servers.is_empty() {
            config
                .storage
                .etcd
                .get_or_insert_with(Default::default)
                .endpoints = servers;
        }
        let etcd_flags_set = self.etcd_cafile.is_some()
            || self.etcd_certfile.is_some()
            || self.etcd_keyfile.is_some()
            || self.etcd_prefix.is_some()
            || self.etcd_compaction_interval.is_some();
        match &mut config.storage.etcd {
            Some(etcd) => {
                if let Some(v) = self.etcd_cafile {
                    etcd.ca_file = Some(v);
                }
                if let Some(v) = self.etcd_certfile {
                    etcd.cert_file = Some(v);
                }
                if let Some(v) = self.etcd_keyfile {
                    etcd.key_file = Some(v);
                }
                if let Some(v) = self.etcd_prefix {
                    etcd.prefix = v;
                }
                if let Some(v) = self.etcd_compaction_interval {
                    match parse_duration(&v) {
                        Ok(d) => etcd.compaction_interval = d,
                        Err(e) => errors.push(format!("--etcd-compaction-interval: {e}")),
                    }
                }
            }
            None if etcd_flags_set => errors.push(
                "--etcd-servers: Required value: the other --etcd-* flags need the etcd endpoints"
                    .into(),
            ),
            None => {}
        }
        if let Some(v) = self.log_format {
            config.logging.format = v;
        }
        if let Some(v) = self.log_level {
            config.logging.level = v;
        }
        if !errors.is_empty() {
            return Err(ConfigError::Invalid(errors));
        }
        config.validate()?;
        Ok(config)
    }
}

/// Installs the tracing subscriber (text or JSON lines on stderr).
pub fn init_logging(logging: &LoggingConfig) {
    let filter = tracing_subscriber::EnvFilter::try_new(&logging.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if logging.format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, "securePort: 7000\nrequestTimeout: 30s\n").unwrap();
        let flags = ServeFlags {
            config: Some(file),
            secure_port: Some(7001),
            ..Default::default()
        };
        let c = flags.into_config().unwrap();
        assert_eq!(c.secure_port, 7001);
        assert_eq!(c.request_timeout, std::time::Duration::from_secs(30));
    }

    #[test]
    fn authentication_flags_take_kube_apiserver_names() {
        let cli = Cli::try_parse_from([
            "kubegate",
            "serve",
            "--anonymous-auth",
            "--token-auth-file=/etc/tokens.csv",
            "--enable-bootstrap-token-auth=false",
            "--authentication-config",
            "/etc/authn.yaml",
            "--service-account-issuer=https://issuer.example",
            "--service-account-signing-key-file=/etc/sa.key",
            "--service-account-key-file=/etc/a.pub",
            "--service-account-key-file=/etc/b.pub",
            "--api-audiences=api, vault",
        ])
        .unwrap();
        let Command::Serve(flags) = cli.command else {
            panic!("not serve");
        };
        let a = (*flags).into_config().unwrap().authentication;
        assert!(a.anonymous);
        assert!(!a.bootstrap_tokens);
        assert_eq!(a.token_auth_file, Some(PathBuf::from("/etc/tokens.csv")));
        assert_eq!(a.config_file, Some(PathBuf::from("/etc/authn.yaml")));
        assert_eq!(a.service_accounts.issuer, "https://issuer.example");
        assert_eq!(
            a.service_accounts.signing_key_file,
            Some(PathBuf::from("/etc/sa.key"))
        );
        assert_eq!(
            a.service_accounts.key_files,
            vec![PathBuf::from("/etc/a.pub"), PathBuf::from("/etc/b.pub")]
        );
        assert_eq!(a.service_accounts.api_audiences, vec!["api", "vault"]);
    }

    #[test]
    fn request_header_webhook_and_token_expiration_flags() {
        let cli = Cli::try_parse_from([
            "kubegate",
            "serve",
            "--requestheader-client-ca-file=/etc/fp-ca.crt",
            "--requestheader-allowed-names=front-proxy-client,aggregator",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers",
            "X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--authentication-token-webhook-config-file=/etc/wh.kubeconfig",
            "--authentication-token-webhook-cache-ttl=30s",
            "--service-account-max-token-expiration=48h",
        ])
        .unwrap();
        let Command::Serve(flags) = cli.command else {
            panic!("not serve");
        };
        let a = (*flags).into_config().unwrap().authentication;
        let rh = a.request_header.expect("request header");
        assert_eq!(rh.client_ca_file, PathBuf::from("/etc/fp-ca.crt"));
        assert_eq!(rh.allowed_names, vec!["front-proxy-client", "aggregator"]);
        assert_eq!(rh.username_headers, vec!["X-Remote-User"]);
        assert_eq!(rh.group_headers, vec!["X-Remote-Group"]);
        assert_eq!(rh.uid_headers, vec!["X-Remote-Uid"]);
        assert_eq!(rh.extra_headers_prefix, vec!["X-Remote-Extra-"]);
        let webhook = a.webhook.expect("webhook");
        assert_eq!(webhook.config_file, PathBuf::from("/etc/wh.kubeconfig"));
        assert_eq!(webhook.cache_ttl, std::time::Duration::from_secs(30));
        assert_eq!(
            a.service_accounts.max_token_expiration,
            std::time::Duration::from_secs(48 * 3600)
        );

        // Header flags without the CA say what is missing.
        let flags = ServeFlags {
            requestheader_allowed_names: vec!["x".into()],
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(
            err.contains("--requestheader-client-ca-file: Required value"),
            "{err}"
        );
        let flags = ServeFlags {
            authentication_token_webhook_cache_ttl: Some("1m".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(
            err.contains("needs --authentication-token-webhook-config-file"),
            "{err}"
        );
    }

    #[test]
    fn etcd_flags_take_kube_apiserver_names() {
        let cli = Cli::try_parse_from([
            "kubegate",
            "serve",
            "--etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379",
            "--etcd-cafile=/pki/etcd/ca.crt",
            "--etcd-certfile=/pki/etcd/client.crt",
            "--etcd-keyfile=/pki/etcd/client.key",
            "--etcd-prefix=/kubegate",
            "--etcd-compaction-interval=10m",
        ])
        .unwrap();
        let Command::Serve(flags) = cli.command else {
            panic!("not serve");
        };
        let etcd = (*flags).into_config().unwrap().storage.etcd.expect("etcd");
        assert_eq!(
            etcd.endpoints,
            vec!["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
        );
        assert_eq!(etcd.ca_file, Some(PathBuf::from("/pki/etcd/ca.crt")));
        assert_eq!(etcd.cert_file, Some(PathBuf::from("/pki/etcd/client.crt")));
        assert_eq!(etcd.key_file, Some(PathBuf::from("/pki/etcd/client.key")));
        assert_eq!(etcd.prefix, "/kubegate");
        assert_eq!(etcd.compaction_interval.as_secs(), 600);

        // Without --etcd-servers the embedded store stays; other etcd flags need it.
        assert_eq!(
            ServeFlags::default().into_config().unwrap().storage.etcd,
            None
        );
        let flags = ServeFlags {
            etcd_prefix: Some("/x".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(err.contains("--etcd-servers: Required value"), "{err}");
        // Values are validated like the file's.
        let flags = ServeFlags {
            etcd_servers: vec!["10.0.0.1:2379".into()],
            etcd_compaction_interval: Some("often".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(err.contains("--etcd-compaction-interval"), "{err}");
        let flags = ServeFlags {
            etcd_servers: vec!["10.0.0.1:2379".into()],
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(
            err.contains("storage.etcd.endpoints[0]: Invalid value"),
            "{err}"
        );
    }

    #[test]
    fn event_ttl_flag_overrides_the_file_and_is_validated() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, "eventTTL: 2h\n").unwrap();
        let from_file = ServeFlags {
            config: Some(file.clone()),
            ..Default::default()
        };
        assert_eq!(
            from_file.into_config().unwrap().event_ttl,
            std::time::Duration::from_secs(7200)
        );
        let cli = Cli::try_parse_from([
            "kubegate",
            "serve",
            "--config",
            file.to_str().unwrap(),
            "--event-ttl",
            "90s",
        ])
        .unwrap();
        let Command::Serve(flags) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(
            flags.into_config().unwrap().event_ttl,
            std::time::Duration::from_secs(90)
        );
        let err = ServeFlags {
            event_ttl: Some("0s".into()),
            ..Default::default()
        }
        .into_config()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("eventTTL: Invalid value: \"0s\": must be greater than 0"),
            "{err}"
        );
        let err = ServeFlags {
            event_ttl: Some("an hour".into()),
            ..Default::default()
        }
        .into_config()
        .unwrap_err()
        .to_string();
        assert!(err.contains("--event-ttl"), "{err}");
    }

    #[test]
    fn bad_flag_values_are_reported() {
        let flags = ServeFlags {
            request_timeout: Some("soon".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(err.contains("--request-timeout"), "{err}");
        let flags = ServeFlags {
            authorization_mode: Some("RBAC,Bogus".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(err.contains("authorization.modes[1]"), "{err}");
        assert!(!err.contains("authorization.modes[0]"), "{err}");
    }

    #[test]
    fn authorization_flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(
            &file,
            "authorization:\n  modes: [RBAC]\n  webhook:\n    version: v1beta1\n    cacheAuthorizedTTL: 1m\n",
        )
        .unwrap();
        let flags = ServeFlags {
            config: Some(file),
            authorization_mode: Some("ABAC, Webhook,RBAC".into()),
            authorization_policy_file: Some("/etc/abac.jsonl".into()),
            authorization_webhook_config_file: Some("/etc/authz.kubeconfig".into()),
            authorization_webhook_cache_unauthorized_ttl: Some("5s".into()),
            ..Default::default()
        };
        let a = flags.into_config().unwrap().authorization;
        assert_eq!(a.modes, vec!["ABAC", "Webhook", "RBAC"]);
        assert_eq!(a.policy_file, Some(PathBuf::from("/etc/abac.jsonl")));
        assert_eq!(
            a.webhook.config_file,
            Some(PathBuf::from("/etc/authz.kubeconfig"))
        );
        assert_eq!(a.webhook.version, "v1beta1", "kept from the file");
        assert_eq!(
            a.webhook.cache_authorized_ttl,
            std::time::Duration::from_secs(60)
        );
        assert_eq!(
            a.webhook.cache_unauthorized_ttl,
            std::time::Duration::from_secs(5)
        );

        // The names parse as kube-apiserver's flags.
        let cli = Cli::try_parse_from([
            "kubegate",
            "serve",
            "--authorization-mode=Webhook",
            "--authorization-webhook-config-file=/w",
            "--authorization-webhook-version=v1",
            "--authorization-webhook-cache-authorized-ttl=2m",
            "--authorization-webhook-cache-unauthorized-ttl=0s",
        ])
        .unwrap();
        let Command::Serve(flags) = cli.command else {
            panic!("serve")
        };
        let a = flags.into_config().unwrap().authorization;
        assert_eq!(a.webhook.cache_authorized_ttl.as_secs(), 120);
        assert!(a.webhook.cache_unauthorized_ttl.is_zero());

        let flags = ServeFlags {
            authorization_mode: Some("ABAC".into()),
            authorization_webhook_cache_authorized_ttl: Some("soon".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(
            err.contains("--authorization-webhook-cache-authorized-ttl"),
            "{err}"
        );
        let flags = ServeFlags {
            authorization_mode: Some("ABAC".into()),
            authorization_webhook_config_file: Some("/w".into()),
            ..Default::default()
        };
        let err = flags.into_config().unwrap_err().to_string();
        assert!(
            err.contains("authorization.policyFile: Required value"),
            "{err}"
        );
        assert!(
            err.contains("authorization.webhook.configFile: Forbidden"),
            "{err}"
        );
    }
}

//! Fronting an existing cluster: the `delegate:` settings (which Kubernetes API server
//! kubegate stands in front of and how it forwards callers' identities to it) and
//! `runtimeConfig` (kube-apiserver's `--runtime-config`, here used to switch built-in
//! group-versions off when the delegate serves them).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration;

/// How the caller's identity reaches the delegate.
pub const IDENTITY_FORWARDING_MODES: &[&str] = &["frontProxy", "impersonate"];

/// An existing Kubernetes API server whose group-versions kubegate serves through itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DelegateConfig {
    /// The delegate's base URL, `https://host[:port][/path]`.
    pub server: String,
    /// PEM bundle that verifies the delegate's serving certificate (system roots when unset).
    pub ca_file: Option<PathBuf>,
    /// TLS server name to verify instead of the URL's host.
    pub tls_server_name: Option<String>,
    /// Client certificate kubegate presents to the delegate: the front-proxy client
    /// certificate the delegate's `--requestheader-client-ca-file` trusts (`frontProxy`), or
    /// a certificate of a user allowed to impersonate (`impersonate`).
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    /// Bearer token of a user allowed to impersonate (`impersonate` mode).
    pub token_file: Option<PathBuf>,
    /// `frontProxy`: the caller as `X-Remote-User`/`-Group`/`-Uid`/`-Extra-*`, trusted because
    /// of the client certificate. `impersonate`: the caller as `Impersonate-*` headers on a
    /// request authenticated with `tokenFile` or the client certificate.
    pub identity_forwarding: String,
    /// How often the delegate's group-versions are discovered again.
    #[serde(with = "duration::serde_duration")]
    pub sync_interval: Duration,
}

impl Default for DelegateConfig {
    fn default() -> Self {
        DelegateConfig {
            server: String::new(),
            ca_file: None,
            tls_server_name: None,
            client_cert_file: None,
            client_key_file: None,
            token_file: None,
            identity_forwarding: "frontProxy".into(),
            sync_interval: Duration::from_secs(30),
        }
    }
}

impl DelegateConfig {
    pub(crate) fn validate(&self, errors: &mut Vec<String>) {
        if self.server.is_empty() {
            errors.push("delegate.server: Required value: the delegate's https URL".into());
        } else if let Err(reason) = parse_server(&self.server) {
            errors.push(format!(
                "delegate.server: Invalid value: {:?}: {reason}",
                self.server
            ));
        }
        match (&self.client_cert_file, &self.client_key_file) {
            (Some(_), None) => errors.push(
                "delegate.clientKeyFile: Required value: required when delegate.clientCertFile is set".into(),
            ),
            (None, Some(_)) => errors.push(
                "delegate.clientCertFile: Required value: required when delegate.clientKeyFile is set".into(),
            ),
            _ => {}
        }
        match self.identity_forwarding.as_str() {
            "frontProxy" => {
                if self.client_cert_file.is_none() {
                    errors.push(
                        "delegate.clientCertFile: Required value: frontProxy identity forwarding needs the front-proxy client certificate the delegate trusts".into(),
                    );
                }
                if self.token_file.is_some() {
                    errors.push(
                        "delegate.tokenFile: Forbidden: a token is only used with identityForwarding: impersonate".into(),
                    );
                }
            }
            "impersonate" => {
                if self.client_cert_file.is_none() && self.token_file.is_none() {
                    errors.push(
                        "delegate.tokenFile: Required value: impersonate identity forwarding needs a token (or a client certificate) of a user allowed to impersonate".into(),
                    );
                }
            }
            other => errors.push(format!(
                "delegate.identityForwarding: Unsupported value: {other:?}: supported values: {}",
                IDENTITY_FORWARDING_MODES.join(", ")
            )),
        }
        if self.sync_interval < Duration::from_millis(100) {
            errors.push(format!(
                "delegate.syncInterval: Invalid value: \"{}\": must be at least 100ms",
                duration::format_duration(self.sync_interval)
            ));
        }
    }
}

/// The parts of `delegate.server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateServer {
    pub host: String,
    pub port: u16,
    /// A path prefix put before every request path (empty or starting with `/`, no trailing
    /// `/`).
    pub path: String,
}

/// Parses an `https://host[:port][/path]` URL (no query, fragment or user info).
pub fn parse_server(url: &str) -> Result<DelegateServer, String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or("must be an https:// URL")?;
    if rest.contains(['?', '#', '@']) {
        return Err("must not contain a query, fragment or user info".into());
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unterminated IPv6 address")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| format!("invalid port {p:?}"))?,
            None if after.is_empty() => 443,
            None => return Err("invalid host".into()),
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, p)) => (
                host.to_string(),
                p.parse().map_err(|_| format!("invalid port {p:?}"))?,
            ),
            None => (authority.to_string(), 443),
        }
    };
    if host.is_empty() {
        return Err("missing host".into());
    }
    if port == 0 {
        return Err("port must be between 1 and 65535".into());
    }
    Ok(DelegateServer {
        host,
        port,
        path: path.to_string(),
    })
}

/// Parses kube-apiserver's `--runtime-config` value: `key[=value]` pairs separated by
/// commas, where an empty value means `true` (kube's `cliflag.ConfigurationMap`).
pub fn parse_runtime_config(text: &str) -> Result<BTreeMap<String, bool>, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
        let value = match value.trim() {
            "" | "true" => true,
            "false" => false,
            other => {
                return Err(format!(
                    "invalid value of {key}: {other}, err: strconv.ParseBool: parsing {other:?}: invalid syntax"
                ))
            }
        };
        out.insert(key.trim().to_string(), value);
    }
    Ok(out)
}

/// Whether a built-in group-version is served under `runtimeConfig`, as kube's
/// `resourceconfig.MergeAPIResourceConfigs` decides for the keys kubegate accepts:
/// `api/all`, `api/legacy` (the core group), `api/v1` and `<group>/<version>`; the most
/// specific key wins.
pub fn group_version_enabled(
    runtime_config: &BTreeMap<String, bool>,
    group: &str,
    version: &str,
) -> bool {
    let specific = if group.is_empty() {
        runtime_config
            .get(&format!("api/{version}"))
            .or_else(|| runtime_config.get("api/legacy"))
    } else {
        runtime_config.get(&format!("{group}/{version}"))
    };
    specific
        .or_else(|| runtime_config.get("api/all"))
        .copied()
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        assert_eq!(
            parse_server("https://127.0.0.1:6443").ok(),
            Some(DelegateServer {
                host: "127.0.0.1".into(),
                port: 6443,
                path: String::new()
            })
        );
        assert_eq!(
            parse_server("https://[::1]/prefix/").ok(),
            Some(DelegateServer {
                host: "::1".into(),
                port: 443,
                path: "/prefix".into()
            })
        );
        assert!(parse_server("http://127.0.0.1").is_err());
        assert!(parse_server("https://:80").is_err());
        assert!(parse_server("https://a:0").is_err());
        assert!(parse_server("https://u@a").is_err());
        assert!(parse_server("https://a:x").is_err());
    }

    #[test]
    fn runtime_config_parsing_and_precedence() {
        let rc = parse_runtime_config("api/all=false, rbac.authorization.k8s.io/v1=true,api/v1")
            .expect("valid");
        assert!(!group_version_enabled(&rc, "coordination.k8s.io", "v1"));
        assert!(group_version_enabled(
            &rc,
            "rbac.authorization.k8s.io",
            "v1"
        ));
        assert!(group_version_enabled(&rc, "", "v1"));
        let rc = parse_runtime_config("api/legacy=false").expect("valid");
        assert!(!group_version_enabled(&rc, "", "v1"));
        assert!(group_version_enabled(&rc, "apps", "v1"));
        assert!(group_version_enabled(&BTreeMap::new(), "", "v1"));
        let err = parse_runtime_config("api/all=nope").expect_err("invalid");
        assert!(err.contains("api/all"), "{err}");
    }

    #[test]
    fn delegate_validation() {
        let mut errors = Vec::new();
        DelegateConfig {
            server: "http://x".into(),
            ..DelegateConfig::default()
        }
        .validate(&mut errors);
        assert!(errors
            .iter()
            .any(|e| e.starts_with("delegate.server: Invalid value")));
        assert!(errors
            .iter()
            .any(|e| e.starts_with("delegate.clientCertFile: Required")));
        let mut errors = Vec::new();
        DelegateConfig {
            server: "https://x".into(),
            identity_forwarding: "impersonate".into(),
            token_file: Some("t".into()),
            ..DelegateConfig::default()
        }
        .validate(&mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let mut errors = Vec::new();
        DelegateConfig {
            server: "https://x".into(),
            identity_forwarding: "sudo".into(),
            ..DelegateConfig::default()
        }
        .validate(&mut errors);
        assert!(
            errors
                .iter()
                .any(|e| e.contains("Unsupported value: \"sudo\"")),
            "{errors:?}"
        );
    }
}

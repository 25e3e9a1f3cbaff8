//! `storage.etcd`: keep objects in an etcd v3 cluster instead of the embedded store (how
//! several kubegate replicas share state). Mirrors kube-apiserver's `--etcd-servers`,
//! `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`, `--etcd-prefix` and
//! `--etcd-compaction-interval`; off unless set. `dialTimeout` and `requestTimeout` bound
//! connecting to a member and each etcd request (kube-apiserver has no flag for these: it
//! dials for 20 s and bounds etcd calls by the API request's own deadline).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration;

/// The etcd cluster and how to reach it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EtcdConfig {
    /// Client URLs of the members, `http://host:port` or `https://host:port`; requests fail
    /// over between them.
    pub endpoints: Vec<String>,
    /// PEM bundle that verifies the members' serving certificates (required with https
    /// endpoints: this build does not read the system roots).
    #[serde(rename = "caFile")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate presented to etcd (with `keyFile`).
    pub cert_file: Option<PathBuf>,
    /// Private key of `certFile`.
    pub key_file: Option<PathBuf>,
    /// Key prefix every object is stored under (kube's layout: `/registry/<resource>/...`).
    pub prefix: String,
    /// How often etcd's history is compacted to the revision seen one interval earlier
    /// (kube-apiserver's default 5m); `0s` disables compaction.
    #[serde(with = "duration::serde_duration")]
    pub compaction_interval: Duration,
    /// Time allowed to open a connection to a member (default 5s).
    #[serde(with = "duration::serde_duration")]
    pub dial_timeout: Duration,
    /// Time allowed for one etcd request (a write, a list page, opening a watch), including
    /// failing over to another member; past it the API request fails with 503 (default 15s,
    /// under the 60s an API request may take, so the client gets the storage error).
    #[serde(with = "duration::serde_duration")]
    pub request_timeout: Duration,
}

/// kube-apiserver's default `--etcd-prefix`.
pub const DEFAULT_ETCD_PREFIX: &str = "/registry";

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig {
            endpoints: Vec::new(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            prefix: DEFAULT_ETCD_PREFIX.into(),
            compaction_interval: Duration::from_secs(300),
            dial_timeout: DEFAULT_ETCD_DIAL_TIMEOUT,
            request_timeout: DEFAULT_ETCD_REQUEST_TIMEOUT,
        }
    }
}

/// Default `storage.etcd.dialTimeout`.
pub const DEFAULT_ETCD_DIAL_TIMEOUT: Duration = Duration::from_secs(5);
/// Default `storage.etcd.requestTimeout`.
pub const DEFAULT_ETCD_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

impl EtcdConfig {
    /// Whether the endpoints are `https://` (TLS to etcd).
    pub fn uses_tls(&self) -> bool {
        self.endpoints.iter().any(|e| e.starts_with("https://"))
    }

    pub(crate) fn validate(&self, errors: &mut Vec<String>) {
        const FIELD: &str = "storage.etcd";
        if self.endpoints.is_empty() {
            errors.push(format!(
                "{FIELD}.endpoints: Required value: at least one etcd client URL, e.g. http://127.0.0.1:2379"
            ));
        }
        let mut schemes = Vec::new();
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            match parse_endpoint(endpoint) {
                Ok(scheme) => schemes.push(scheme),
                Err(reason) => errors.push(format!(
                    "{FIELD}.endpoints[{i}]: Invalid value: {endpoint:?}: {reason}"
                )),
            }
        }
        let https = schemes.contains(&"https");
        if https && schemes.contains(&"http") {
            errors.push(format!(
                "{FIELD}.endpoints: Invalid value: mixes http and https URLs: use one scheme for every member"
            ));
        }
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => errors.push(format!(
                "{FIELD}.keyFile: Required value: required when {FIELD}.certFile is set"
            )),
            (None, Some(_)) => errors.push(format!(
                "{FIELD}.certFile: Required value: required when {FIELD}.keyFile is set"
            )),
            _ => {}
        }
        if https && self.ca_file.is_none() {
            errors.push(format!(
                "{FIELD}.caFile: Required value: https endpoints need the CA bundle that signed etcd's serving certificates (system roots are not used)"
            ));
        }
        if !https && !schemes.is_empty() {
            for (name, set) in [
                ("caFile", self.ca_file.is_some()),
                ("certFile", self.cert_file.is_some()),
                ("keyFile", self.key_file.is_some()),
            ] {
                if set {
                    errors.push(format!(
                        "{FIELD}.{name}: Forbidden: TLS files need https:// endpoints"
                    ));
                }
            }
        }
        for (name, value) in [
            ("dialTimeout", self.dial_timeout),
            ("requestTimeout", self.request_timeout),
        ] {
            if value.is_zero() {
                errors.push(format!(
                    "{FIELD}.{name}: Invalid value: \"0s\": must be greater than zero"
                ));
            }
        }
        if !self.prefix.starts_with('/') || self.prefix.contains(char::is_whitespace) {
            errors.push(format!(
                "{FIELD}.prefix: Invalid value: {:?}: must start with / and contain no spaces (kube's default is {DEFAULT_ETCD_PREFIX})",
                self.prefix
            ));
        }
    }
}

/// Checks one client URL (`http(s)://host[:port][/]`) and returns its scheme.
fn parse_endpoint(endpoint: &str) -> Result<&'static str, String> {
    let (scheme, rest) = if let Some(rest) = endpoint.strip_prefix("https://") {
        ("https", rest)
    } else if let Some(rest) = endpoint.strip_prefix("http://") {
        ("http", rest)
    } else {
        return Err("must be an http:// or https:// URL".into());
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() {
        return Err("missing host".into());
    }
    if authority.contains(['/', '?', '#', '@']) || authority.contains(char::is_whitespace) {
        return Err("must be scheme://host[:port] without a path, query or user".into());
    }
    // `[v6]:port`, `host:port` or `host`.
    let port = if let Some(v6) = authority.strip_prefix('[') {
        let (_, after) = v6
            .split_once(']')
            .ok_or_else(|| "unterminated [IPv6] host".to_string())?;
        after.strip_prefix(':')
    } else {
        authority.split_once(':').map(|(_, p)| p)
    };
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(format!("invalid port {port:?}")),
        }
    }
    Ok(scheme)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn errors(c: &EtcdConfig) -> Vec<String> {
        let mut errors = Vec::new();
        c.validate(&mut errors);
        errors
    }

    #[test]
    fn defaults_follow_kube_apiserver() {
        let c = EtcdConfig::default();
        assert_eq!(c.prefix, "/registry");
        assert_eq!(c.compaction_interval, Duration::from_secs(300));
        assert_eq!(c.dial_timeout, Duration::from_secs(5));
        assert_eq!(c.request_timeout, Duration::from_secs(15));
        // Defaults alone are not enough: the endpoints are required.
        let e = errors(&c);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("storage.etcd.endpoints: Required value"));
    }

    #[test]
    fn endpoints_must_be_http_urls() {
        let c = EtcdConfig {
            endpoints: vec![
                "http://127.0.0.1:2379".into(),
                "http://etcd-1.example/".into(),
                "http://[::1]:2379".into(),
                "127.0.0.1:2379".into(),
                "http://host:99999".into(),
                "http://host/path".into(),
                "unix:///tmp/etcd.sock".into(),
            ],
            ..Default::default()
        };
        let e = errors(&c);
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e[0].starts_with("storage.etcd.endpoints[3]: Invalid value"));
        assert!(e[1].contains("endpoints[4]") && e[1].contains("invalid port"));
        assert!(e[2].contains("endpoints[5]") && e[2].contains("without a path"));
        assert!(e[3].contains("endpoints[6]"));
    }

    #[test]
    fn tls_files_go_together_and_need_https() {
        let c = EtcdConfig {
            endpoints: vec![
                "https://10.0.0.1:2379".into(),
                "https://10.0.0.2:2379".into(),
            ],
            cert_file: Some("/etc/etcd/client.crt".into()),
            ..Default::default()
        };
        let e = errors(&c);
        assert!(e
            .iter()
            .any(|m| m.starts_with("storage.etcd.keyFile: Required value")));
        assert!(e
            .iter()
            .any(|m| m.starts_with("storage.etcd.caFile: Required value")));

        let ok = EtcdConfig {
            ca_file: Some("/etc/etcd/ca.crt".into()),
            key_file: Some("/etc/etcd/client.key".into()),
            ..c.clone()
        };
        assert!(errors(&ok).is_empty(), "{:?}", errors(&ok));
        assert!(ok.uses_tls());

        let plain = EtcdConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            ..ok.clone()
        };
        let e = errors(&plain);
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("storage.etcd.caFile: Forbidden"));

        let mixed = EtcdConfig {
            endpoints: vec!["http://a:2379".into(), "https://b:2379".into()],
            ..ok
        };
        assert!(errors(&mixed)
            .iter()
            .any(|m| m.contains("mixes http and https")));
    }

    #[test]
    fn parses_from_the_config_file() {
        let c = crate::Config::from_yaml(
            "storage:\n  etcd:\n    endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379]\n    caFile: /pki/etcd/ca.crt\n    certFile: /pki/etcd/client.crt\n    keyFile: /pki/etcd/client.key\n    compactionInterval: 1m30s\n    requestTimeout: 4s\n",
        )
        .unwrap();
        let etcd = c.storage.etcd.clone().unwrap();
        assert_eq!(etcd.endpoints.len(), 2);
        assert_eq!(etcd.ca_file, Some(PathBuf::from("/pki/etcd/ca.crt")));
        assert_eq!(etcd.prefix, "/registry", "defaulted");
        assert_eq!(etcd.compaction_interval, Duration::from_secs(90));
        assert_eq!(etcd.request_timeout, Duration::from_secs(4));
        assert_eq!(etcd.dial_timeout, Duration::from_secs(5), "defaulted");
        c.validate().unwrap();
        // The embedded store stays the default.
        assert_eq!(crate::Config::default().storage.etcd, None);
        // Unknown keys are errors with their path.
        let err = crate::Config::from_yaml("storage:\n  etcd:\n    servers: [x]\n").unwrap_err();
        assert!(
            err.contains("storage.etcd") && err.contains("servers"),
            "{err}"
        );
    }

    #[test]
    fn timeouts_must_be_positive() {
        let c = EtcdConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            request_timeout: Duration::ZERO,
            ..Default::default()
        };
        let e = errors(&c);
        assert_eq!(
            e,
            ["storage.etcd.requestTimeout: Invalid value: \"0s\": must be greater than zero"]
        );
    }

    #[test]
    fn prefix_must_be_absolute() {
        let c = EtcdConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "registry".into(),
            ..Default::default()
        };
        let e = errors(&c);
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("storage.etcd.prefix: Invalid value: \"registry\""));
    }
}

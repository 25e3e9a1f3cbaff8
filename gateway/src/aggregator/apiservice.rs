//! An APIService object as the aggregator uses it: where its group-version is served
//! (locally, by a Service, by a URL — kubegate's `kubegate.io/backend-url` extension — or by
//! the cluster kubegate fronts, `kubegate.io/delegate`), how
//! the backend's certificate is checked, its discovery priorities and its availability.

use base64::Engine;
use kubegate_backends::core::apiregistration::{
    backend_url_annotation, is_delegated, parse_backend_url,
};
use serde_json::Value;

/// Where an APIService's requests go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// Served by kubegate's own registry (`spec.service` null).
    Local,
    /// `spec.service`: a Service in kubegate (or in the cluster, with cluster DNS).
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
    /// `kubegate.io/backend-url`: an https URL; `path` is a prefix put before request paths.
    Url {
        host: String,
        port: u16,
        path: String,
    },
    /// `kubegate.io/delegate: "true"`: the configured delegate cluster (`delegate:`), reached
    /// with the delegate's own trust and credentials.
    Delegate,
}

/// The parts of an APIService the routing table, discovery and availability need.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiService {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub group: String,
    pub version: String,
    pub target: Target,
    /// PEM bytes from `spec.caBundle` (which is base64 of PEM on the wire).
    pub ca_bundle: Option<Vec<u8>>,
    pub insecure_skip_tls_verify: bool,
    pub group_priority_minimum: i32,
    pub version_priority: i32,
    /// The `Available` condition: `None` when the object has none yet.
    pub available: Option<Condition>,
}

#[cfg(test)]
impl ApiService {
    /// For tests: the APIService `<version>.<group>` on the Service `api` in `namespace`
    /// (port 443), no CA bundle, not yet checked for availability.
    pub(crate) fn remote_for_tests(group: &str, version: &str, namespace: &str) -> ApiService {
        ApiService {
            name: format!("{version}.{group}"),
            uid: String::new(),
            resource_version: String::new(),
            group: group.into(),
            version: version.into(),
            target: Target::Service {
                namespace: namespace.into(),
                name: "api".into(),
                port: 443,
            },
            ca_bundle: None,
            insecure_skip_tls_verify: false,
            group_priority_minimum: 1000,
            version_priority: 15,
            available: None,
        }
    }
}

/// One status condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl ApiService {
    /// Reads a stored APIService; `None` for an object without a usable name, group-version
    /// or target (validation keeps those out of storage, so this only guards old data).
    pub fn from_object(object: &Value) -> Option<ApiService> {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let name = text("/metadata/name");
        let version = text("/spec/version");
        if name.is_empty() || version.is_empty() {
            return None;
        }
        let spec = object.get("spec")?;
        let url = backend_url_annotation(object);
        let target = match (spec.get("service").filter(|s| !s.is_null()), url) {
            (_, Some(url)) => {
                let url = parse_backend_url(url).ok()?;
                Target::Url {
                    host: url.host,
                    port: url.port,
                    path: url.path,
                }
            }
            (Some(service), None) => Target::Service {
                namespace: service
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name: service
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                port: service
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            },
            (None, None) if is_delegated(object) => Target::Delegate,
            (None, None) => Target::Local,
        };
        let ca_bundle = spec
            .get("caBundle")
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        let available = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
            })
            .map(|c| Condition {
                status: c.get("status").and_then(Value::as_str) == Some("True"),
                reason: c
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                message: c
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            });
        let int = |field: &str, default: i64| {
            spec.get(field)
                .and_then(Value::as_i64)
                .unwrap_or(default)
                .clamp(i32::MIN as i64, i32::MAX as i64) as i32
        };
        Some(ApiService {
            name,
            uid: text("/metadata/uid"),
            resource_version: text("/metadata/resourceVersion"),
            group: text("/spec/group"),
            version,
            target,
            ca_bundle,
            insecure_skip_tls_verify: spec
                .get("insecureSkipTLSVerify")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            group_priority_minimum: int("groupPriorityMinimum", 0),
            version_priority: int("versionPriority", 0),
            available,
        })
    }

    pub fn is_local(&self) -> bool {
        self.target == Target::Local
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_service_url_and_local_targets() {
        let remote = ApiService::from_object(&json!({
            "metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                     "service": {"namespace": "wardle", "name": "api"},
                     "caBundle": base64::engine::general_purpose::STANDARD.encode("PEM"),
                     "groupPriorityMinimum": 1000, "versionPriority": 15},
            "status": {"conditions": [{"type": "Available", "status": "False",
                        "reason": "FailedDiscoveryCheck", "message": "boom"}]}
        }))
        .expect("parsed");
        assert_eq!(
            remote.target,
            Target::Service {
                namespace: "wardle".into(),
                name: "api".into(),
                port: 443
            }
        );
        assert_eq!(remote.ca_bundle.as_deref(), Some(&b"PEM"[..]));
        assert_eq!(
            remote.available,
            Some(Condition {
                status: false,
                reason: "FailedDiscoveryCheck".into(),
                message: "boom".into()
            })
        );
        let local = ApiService::from_object(&json!({
            "metadata": {"name": "v1.apps"},
            "spec": {"group": "apps", "version": "v1", "service": null}
        }))
        .expect("parsed");
        assert!(local.is_local());
        let by_url = ApiService::from_object(&json!({
            "metadata": {"name": "v1.x.io", "annotations": {"kubegate.io/backend-url": "https://127.0.0.1:8443/base"}},
            "spec": {"group": "x.io", "version": "v1"}
        }))
        .expect("parsed");
        assert_eq!(
            by_url.target,
            Target::Url {
                host: "127.0.0.1".into(),
                port: 8443,
                path: "/base".into()
            }
        );
        let delegated = ApiService::from_object(&json!({
            "metadata": {"name": "v1.", "annotations": {"kubegate.io/delegate": "true"}},
            "spec": {"version": "v1", "service": null}
        }))
        .expect("parsed");
        assert_eq!(delegated.target, Target::Delegate);
        assert!(!delegated.is_local());
    }
}

//! kube-aggregator's `pkg/apis/apiregistration/validation` for APIServices
//! (`ValidateAPIService`, and `ValidateAPIServiceStatus` for the `status` subresource) with
//! kube's field paths and messages, plus kubegate's one extension: the
//! `kubegate.io/backend-url` annotation, which names a backend by an `https://` URL instead of
//! a Service, and its parser [`parse_backend_url`]; and `kubegate.io/delegate: "true"`, which
//! sends the group-version to the cluster kubegate fronts (`delegate:` in its configuration).
//!
//! Objects reach these checks after the strategy has decoded them as Go would (types checked,
//! `spec.service.port` defaulted to 443), so a missing field reads as Go's zero value.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use super::b64::decoded_len;
use super::causes::{index_path, invalid_raw, key_path};
use super::str_at;
use crate::machinery::validation::{is_dns1035_label, is_dns1123_subdomain, is_path_segment_name};
use crate::status::{
    field_forbidden, field_invalid, field_not_supported, field_required, StatusCause,
};

/// The annotation naming an APIService's backend by URL (kubegate's extension).
pub const BACKEND_URL_ANNOTATION: &str = "kubegate.io/backend-url";

/// The annotation sending an APIService's group-version to the configured delegate cluster
/// (kubegate's extension; its only accepted value is `"true"`).
pub const DELEGATE_ANNOTATION: &str = "kubegate.io/delegate";

/// The condition statuses kube accepts, in the order its error lists them.
const CONDITION_STATUSES: &[&str] = &["True", "False", "Unknown"];

/// A backend named by the `kubegate.io/backend-url` annotation: always `https`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendUrl {
    /// A DNS name (lower case) or an IP address (IPv6 without brackets).
    pub host: String,
    /// The port, 443 when the URL names none.
    pub port: u16,
    /// The path prefix, `""` or starting with `/`.
    pub path: String,
}

impl BackendUrl {
    /// `host:port`, with an IPv6 host in brackets.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Parses a `kubegate.io/backend-url` value: an absolute `https://host[:port][/path]` URL with
/// no user information, query or fragment. The error is the message validation reports.
pub fn parse_backend_url(value: &str) -> Result<BackendUrl, String> {
    const FORM: &str = "must be an absolute URL of the form https://host[:port][/path]";
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("may not contain whitespace or control characters".into());
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err(FORM.into());
    };
    match scheme.to_ascii_lowercase().as_str() {
        "https" => {}
        "http" => return Err("https is required: plain http backends are not allowed".into()),
        "" => return Err(FORM.into()),
        _ => return Err(format!("unsupported scheme {scheme:?}: https is required")),
    }
    if rest.contains('#') {
        return Err("may not contain a fragment".into());
    }
    if rest.contains('?') {
        return Err("may not contain a query".into());
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err("may not contain user information".into());
    }
    if authority.is_empty() {
        return Err("must name a host".into());
    }
    let (host, port) = split_host_port(authority)?;
    let port = match port {
        None => 443,
        Some(p) => parse_port(p)?,
    };
    Ok(BackendUrl {
        host,
        port,
        path: path.to_string(),
    })
}

/// Splits `host[:port]` or `[v6][:port]`, validating the host.
fn split_host_port(authority: &str) -> Result<(String, Option<&str>), String> {
    if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((inner, after)) = bracketed.split_once(']') else {
            return Err(format!("host {authority:?} is not valid: missing ']'"));
        };
        if inner.parse::<Ipv6Addr>().is_err() {
            return Err(format!("host \"[{inner}]\" is not a valid IPv6 address"));
        }
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(port) => Some(port),
                None => return Err(format!("host {authority:?} is not valid")),
            },
        };
        return Ok((inner.to_string(), port));
    }
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if port.is_some_and(|p| p.contains(':')) {
        return Err("an IPv6 host must be enclosed in brackets".into());
    }
    if host.is_empty() {
        return Err("must name a host".into());
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok((host.to_string(), port));
    }
    let lower = host.to_ascii_lowercase();
    let errors = is_dns1123_subdomain(&lower);
    if !errors.is_empty() {
        return Err(format!("host {host:?} is not valid: {}", errors.join(", ")));
    }
    Ok((lower, port))
}

fn parse_port(port: &str) -> Result<u16, String> {
    const BAD: &str = "port is not valid: must be between 1 and 65535, inclusive";
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BAD.into());
    }
    match port.parse::<u32>() {
        Ok(p @ 1..=65535) => u16::try_from(p).map_err(|_| BAD.to_string()),
        _ => Err(BAD.into()),
    }
}

/// The value of the `kubegate.io/backend-url` annotation, when set.
pub fn backend_url_annotation(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(BACKEND_URL_ANNOTATION))
        .and_then(Value::as_str)
}

/// Whether the APIService is served by the delegate cluster (`kubegate.io/delegate: "true"`).
pub fn is_delegated(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DELEGATE_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// Whether `spec.service` is set (kube's `Spec.Service != nil`).
pub(crate) fn has_service(object: &Value) -> bool {
    object
        .pointer("/spec/service")
        .is_some_and(|s| !s.is_null())
}

/// `spec.version + "." + spec.group`, the only name kube allows.
pub(crate) fn required_name(object: &Value) -> String {
    format!(
        "{}.{}",
        str_at(object, "/spec/version"),
        str_at(object, "/spec/group")
    )
}

/// kube's `ValidateAPIService` (the parts not in `ValidateObjectMeta`'s generic checks, which
/// the registry makes with the path-segment name rule), then the backend-url annotation.
pub(crate) fn validate_apiservice(object: &Value) -> Vec<StatusCause> {
    let mut causes = validate_name(object);
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let group = str_at(spec, "/group");
    let version = str_at(spec, "/version");

    // An empty group is allowed for the legacy core group only.
    if group.is_empty() && version != "v1" {
        causes.push(field_required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for message in is_dns1123_subdomain(group) {
            causes.push(field_invalid("spec.group", group, &message));
        }
    }
    for message in is_dns1035_label(version) {
        causes.push(field_invalid("spec.version", version, &message));
    }

    let group_priority = int_at(spec, "/groupPriorityMinimum");
    if group_priority <= 0 || group_priority > 20000 {
        causes.push(invalid_raw(
            "spec.groupPriorityMinimum",
            &group_priority.to_string(),
            "must be positive and less than 20000",
        ));
    }
    let version_priority = int_at(spec, "/versionPriority");
    if version_priority <= 0 || version_priority > 1000 {
        causes.push(invalid_raw(
            "spec.versionPriority",
            &version_priority.to_string(),
            "must be positive and less than 1000",
        ));
    }

    let ca_bundle_len = spec.get("caBundle").map_or(0, decoded_len);
    let insecure = spec
        .get("insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let backend_url = backend_url_annotation(object);
    causes.extend(validate_delegate(object, backend_url.is_some()));

    if !has_service(object) {
        if backend_url.is_none() {
            // A local or delegated APIService: no TLS settings of its own apply (the
            // delegate's trust is kubegate's configuration).
            // A local APIService: served by this process, so no TLS settings apply.
            if ca_bundle_len != 0 {
                causes.push(field_invalid(
                    "spec.caBundle",
                    &format!("{ca_bundle_len} bytes"),
                    if is_delegated(object) {
                        "delegated APIServices may not have a caBundle"
                    } else {
                        "local APIServices may not have a caBundle"
                    },
                ));
            }
            if insecure {
                causes.push(invalid_raw(
                    "spec.insecureSkipTLSVerify",
                    "true",
                    if is_delegated(object) {
                        "delegated APIServices may not have insecureSkipTLSVerify"
                    } else {
                        "local APIServices may not have insecureSkipTLSVerify"
                    },
                ));
            }
            return causes;
        }
    } else {
        let service = spec.get("service").unwrap_or(&Value::Null);
        if str_at(service, "/namespace").is_empty() {
            causes.push(field_required("spec.service.namespace", ""));
        }
        if str_at(service, "/name").is_empty() {
            causes.push(field_required("spec.service.name", ""));
        }
        let port = int_at(service, "/port");
        if !(1..=65535).contains(&port) {
            causes.push(invalid_raw(
                "spec.service.port",
                &port.to_string(),
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
    }
    if insecure && ca_bundle_len > 0 {
        causes.push(invalid_raw(
            "spec.insecureSkipTLSVerify",
            "true",
            "may not be true if caBundle is present",
        ));
    }
    if let Some(url) = backend_url {
        causes.extend(validate_backend_url(object, url));
    }
    causes
}

/// The name part of kube's `ValidateObjectMeta` name function: once the name is a valid path
/// segment (checked by the registry), it must be `<version>.<group>`; so must a
/// `generateName`, which therefore can never produce a valid name (as in kube).
fn validate_name(object: &Value) -> Vec<StatusCause> {
    let required = required_name(object);
    let message = format!("must be `spec.version+\".\"+spec.group`: {required:?}");
    let mut causes = Vec::new();
    for (field, pointer) in [
        ("metadata.generateName", "/metadata/generateName"),
        ("metadata.name", "/metadata/name"),
    ] {
        let value = str_at(object, pointer);
        if value.is_empty() || !is_path_segment_name(value).is_empty() {
            continue;
        }
        if value != required {
            causes.push(field_invalid(field, value, &message));
        }
    }
    causes
}

/// kubegate's `kubegate.io/delegate` annotation: `"true"` only, and never together with
/// another backend.
fn validate_delegate(object: &Value, has_backend_url: bool) -> Vec<StatusCause> {
    let Some(value) = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DELEGATE_ANNOTATION))
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    let field = key_path("metadata.annotations", DELEGATE_ANNOTATION);
    let mut causes = Vec::new();
    if value != "true" {
        causes.push(field_not_supported(&field, value, &["true"]));
        return causes;
    }
    if has_service(object) {
        causes.push(field_forbidden(
            &field,
            "may not be set together with spec.service",
        ));
    }
    if has_backend_url {
        causes.push(field_forbidden(
            &field,
            &format!("may not be set together with {BACKEND_URL_ANNOTATION}"),
        ));
    }
    causes
}

/// kubegate's `kubegate.io/backend-url` annotation: an `https` URL, never with `spec.service`.
fn validate_backend_url(object: &Value, url: &str) -> Vec<StatusCause> {
    let field = key_path("metadata.annotations", BACKEND_URL_ANNOTATION);
    let mut causes = Vec::new();
    if let Err(message) = parse_backend_url(url) {
        causes.push(field_invalid(&field, url, &message));
    }
    if has_service(object) {
        causes.push(field_forbidden(
            &field,
            "may not be set together with spec.service",
        ));
    }
    causes
}

/// kube's `ValidateAPIServiceStatus`: every condition's status is `True`, `False` or `Unknown`.
pub(crate) fn validate_apiservice_status(object: &Value) -> Vec<StatusCause> {
    let conditions = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut causes = Vec::new();
    for (i, condition) in conditions.iter().enumerate() {
        let status = str_at(condition, "/status");
        if !CONDITION_STATUSES.contains(&status) {
            causes.push(field_not_supported(
                &format!("{}.status", index_path("status.conditions", i)),
                status,
                CONDITION_STATUSES,
            ));
        }
    }
    causes
}

/// An integer field as Go's `int32` reads it (0 when unset).
fn int_at(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn remote() -> Value {
        json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {
                "group": "metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100,
                "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443},
                "caBundle": "Y2EK",
            },
        })
    }

    fn with(mut object: Value, pointer: &str, value: Value) -> Value {
        if let Some(slot) = object.pointer_mut(pointer) {
            *slot = value;
        } else if let Some((parent, key)) = pointer.rsplit_once('/') {
            if let Some(map) = object.pointer_mut(parent).and_then(Value::as_object_mut) {
                map.insert(key.to_string(), value);
            }
        }
        object
    }

    fn messages(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn valid_objects_pass() {
        assert!(validate_apiservice(&remote()).is_empty());
        let local = json!({
            "metadata": {"name": "v1."},
            "spec": {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1},
        });
        assert!(validate_apiservice(&local).is_empty());
        let url = json!({
            "metadata": {"name": "v1.example.com",
                "annotations": {BACKEND_URL_ANNOTATION: "https://api.example.com:8443/base"}},
            "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 1000,
                "versionPriority": 15, "caBundle": "Y2EK"},
        });
        assert!(
            validate_apiservice(&url).is_empty(),
            "{:?}",
            validate_apiservice(&url)
        );
    }

    #[test]
    fn invalid_objects_get_kube_messages() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                with(remote(), "/metadata/name", json!("metrics")),
                vec!["metadata.name: Invalid value: \"metrics\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\""],
            ),
            (
                with(
                    with(remote(), "/spec/group", json!("")),
                    "/metadata/name",
                    json!("v1beta1."),
                ),
                vec!["spec.group: Required value: only v1 may have an empty group and it better be legacy kube"],
            ),
            (
                with(
                    with(remote(), "/spec/group", json!("Bad_Group")),
                    "/metadata/name",
                    json!("v1beta1.Bad_Group"),
                ),
                vec!["spec.group: Invalid value: \"Bad_Group\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"],
            ),
            (
                with(
                    with(remote(), "/spec/version", json!("1")),
                    "/metadata/name",
                    json!("1.metrics.k8s.io"),
                ),
                vec!["spec.version: Invalid value: \"1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"],
            ),
            (
                with(
                    with(remote(), "/spec/groupPriorityMinimum", json!(0)),
                    "/spec/versionPriority",
                    json!(1001),
                ),
                vec![
                    "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                    "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
                ],
            ),
            (
                with(remote(), "/spec/groupPriorityMinimum", json!(20001)),
                vec!["spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000"],
            ),
            (
                with(remote(), "/spec/insecureSkipTLSVerify", json!(true)),
                vec!["spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"],
            ),
            (
                with(
                    remote(),
                    "/spec/service",
                    json!({"namespace": "", "port": 0}),
                ),
                vec![
                    "spec.service.namespace: Required value",
                    "spec.service.name: Required value",
                    "spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                with(
                    with(remote(), "/spec/service", Value::Null),
                    "/spec/insecureSkipTLSVerify",
                    json!(true),
                ),
                vec![
                    "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
                    "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
                ],
            ),
            (
                with(
                    remote(),
                    "/metadata/annotations",
                    json!({BACKEND_URL_ANNOTATION: "http://api.example.com"}),
                ),
                vec![
                    "metadata.annotations[kubegate.io/backend-url]: Invalid value: \"http://api.example.com\": https is required: plain http backends are not allowed",
                    "metadata.annotations[kubegate.io/backend-url]: Forbidden: may not be set together with spec.service",
                ],
            ),
            (
                with(
                    with(
                        with(remote(), "/spec/service", Value::Null),
                        "/spec/insecureSkipTLSVerify",
                        json!(true),
                    ),
                    "/metadata/annotations",
                    json!({BACKEND_URL_ANNOTATION: "https://10.0.0.1:6443"}),
                ),
                vec!["spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"],
            ),
        ];
        for (object, want) in cases {
            assert_eq!(messages(&validate_apiservice(&object)), want, "{object}");
        }
    }

    #[test]
    fn generate_name_never_fits() {
        let object = with(
            remote(),
            "/metadata/generateName",
            json!("v1beta1.metrics.k8s.io-"),
        );
        let causes = validate_apiservice(&object);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "metadata.generateName");
        // A name that is not a path segment is reported by the registry alone.
        let object = with(remote(), "/metadata/name", json!("a/b"));
        assert!(validate_apiservice(&object).is_empty());
    }

    #[test]
    fn condition_statuses() {
        let object = json!({"status": {"conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Other", "status": "Maybe"},
        ]}});
        assert_eq!(
            messages(&validate_apiservice_status(&object)),
            vec!["status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""]
        );
        assert!(validate_apiservice_status(&json!({})).is_empty());
    }

    #[test]
    fn backend_urls() {
        let ok = parse_backend_url("https://API.example.com").expect("valid");
        assert_eq!(
            ok,
            BackendUrl {
                host: "api.example.com".into(),
                port: 443,
                path: String::new()
            }
        );
        let v6 = parse_backend_url("HTTPS://[::1]:8443/apis/x").expect("valid");
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.authority(), "[::1]:8443");
        assert_eq!(v6.path, "/apis/x");
        assert_eq!(
            parse_backend_url("https://10.1.2.3:6443")
                .map(|u| u.authority())
                .ok(),
            Some("10.1.2.3:6443".into())
        );
        for (bad, message) in [
            ("api.example.com", "must be an absolute URL"),
            ("http://api.example.com", "https is required"),
            ("ftp://api.example.com", "unsupported scheme \"ftp\""),
            ("https://user:pw@api.example.com", "user information"),
            ("https://api.example.com/?a=b", "query"),
            ("https://api.example.com/#x", "fragment"),
            ("https:///path", "must name a host"),
            ("https://:443", "must name a host"),
            ("https://api.example.com:0", "port is not valid"),
            ("https://api.example.com:70000", "port is not valid"),
            ("https://api.example.com:", "port is not valid"),
            ("https://api_x.example.com", "is not valid"),
            ("https://::1/", "brackets"),
            ("https://[zz]/", "IPv6"),
            ("https://a .com", "whitespace"),
        ] {
            match parse_backend_url(bad) {
                Ok(u) => panic!("{bad} parsed as {u:?}"),
                Err(m) => assert!(m.contains(message), "{bad}: {m}"),
            }
        }
    }
}

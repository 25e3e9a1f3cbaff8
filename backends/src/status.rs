//! `metav1.Status` errors: every failure a backend reports carries its HTTP code, kube
//! `reason`, message and details from the point it is created, so the edge never guesses.

use serde_json::{json, Value};

/// Identifies a resource for error messages: `configmaps` in group `""`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    /// kube's `schema.GroupResource.String()`: `configmaps` or `leases.coordination.k8s.io`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// One field problem in an `Invalid` status (`details.causes[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCause {
    /// kube's cause type, e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`.
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// `status.details`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusDetails {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub uid: String,
    pub causes: Vec<StatusCause>,
    pub retry_after_seconds: Option<u32>,
}

/// An API error: becomes a `Status` body with `code`, `reason`, `message` and `details`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    /// kube's `StatusReason`: `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<StatusDetails>>,
    /// `Status.metadata.continue`: the token kube hands back with the 410 for a list's expired
    /// continue token, to go on reading at the latest revision.
    pub continue_token: Option<Box<str>>,
}

/// Result type of backend operations.
pub type ApiResult<T> = Result<T, ApiError>;

fn details(gr: &GroupResource, name: &str) -> Option<Box<StatusDetails>> {
    Some(Box::new(StatusDetails {
        name: name.to_string(),
        group: gr.group.clone(),
        kind: gr.resource.clone(),
        ..Default::default()
    }))
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    /// 404 `configmaps "x" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{gr} \"{name}\" not found"),
            details: details(gr, name),
            continue_token: None,
        }
    }

    /// 404 for a path no backend serves (`the server could not find the requested resource`).
    pub fn path_not_found() -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(Box::default()),
            continue_token: None,
        }
    }

    /// 409 `configmaps "x" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{gr} \"{name}\" already exists"),
            details: details(gr, name),
            continue_token: None,
        }
    }

    /// 409 Conflict: `Operation cannot be fulfilled on configmaps "x": <why>`.
    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
            details: details(gr, name),
            continue_token: None,
        }
    }

    /// 409 Conflict for a stale resourceVersion, in kube's wording.
    pub fn stale_resource_version(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `ConfigMap "x" is invalid: [field: reason, ...]`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let list: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{qualified} \"{name}\" is invalid: {joined}"),
            details: Some(Box::new(StatusDetails {
                name: name.to_string(),
                group: group.to_string(),
                kind: kind.to_string(),
                causes,
                ..Default::default()
            })),
            continue_token: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 403 for a resource: `configmaps "x" is forbidden: <why>`.
    pub fn forbidden_resource(gr: &GroupResource, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("{gr} is forbidden: {why}")
        } else {
            format!("{gr} \"{name}\" is forbidden: {why}")
        };
        ApiError {
            code: 403,
            reason: "Forbidden",
            message,
            details: details(gr, name),
            continue_token: None,
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_supported(gr: &GroupResource, action: &str) -> Self {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: format!("{action} is not supported on resources of kind \"{gr}\""),
            details: details(gr, ""),
            continue_token: None,
        }
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf ({content_type})"),
        )
    }

    /// 413, as kube-apiserver words it for an oversized body.
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 410 Expired: the requested resourceVersion is older than the watch history.
    pub fn resource_expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 500 with kube's wording for an unexpected failure (`NewInternalError`: the error's
    /// text again as the one cause).
    pub fn internal(message: impl std::fmt::Display) -> Self {
        let text = message.to_string();
        ApiError {
            code: 500,
            reason: "InternalError",
            message: format!("Internal error occurred: {text}"),
            details: Some(Box::new(StatusDetails {
                causes: vec![StatusCause {
                    reason: String::new(),
                    message: text,
                    field: String::new(),
                }],
                ..Default::default()
            })),
            continue_token: None,
        }
    }

    /// 504 for a request that ran past its timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> Self {
        ApiError {
            code: 429,
            reason: "TooManyRequests",
            message: message.into(),
            details: Some(Box::new(StatusDetails {
                retry_after_seconds: Some(retry_after),
                ..Default::default()
            })),
            continue_token: None,
        }
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `metav1.Status` object for this error, its fields in `metav1.Status`'s order (kube
    /// writes `details` before `code`).
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": match &self.continue_token {
                Some(token) => json!({"continue": token}),
                None => json!({}),
            },
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        });
        // kube's `StatusReasonUnknown` is empty, and `reason` is omitted when empty.
        if self.reason.is_empty() {
            if let Some(map) = status.as_object_mut() {
                map.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            let mut det = serde_json::Map::new();
            if !d.name.is_empty() {
                det.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                det.insert("group".into(), json!(d.group));
            }
            if !d.kind.is_empty() {
                det.insert("kind".into(), json!(d.kind));
            }
            if !d.uid.is_empty() {
                det.insert("uid".into(), json!(d.uid));
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| {
                        let mut cause = serde_json::Map::new();
                        for (k, v) in [
                            ("reason", &c.reason),
                            ("message", &c.message),
                            ("field", &c.field),
                        ] {
                            if !v.is_empty() {
                                cause.insert(k.into(), json!(v));
                            }
                        }
                        Value::Object(cause)
                    })
                    .collect();
                det.insert("causes".into(), Value::Array(causes));
            }
            if let Some(r) = d.retry_after_seconds {
                det.insert("retryAfterSeconds".into(), json!(r));
            }
            status["details"] = Value::Object(det);
        }
        status["code"] = json!(self.code);
        // kube omits `reason` for reasonless errors (e.g. some patch failures).
        if self.reason.is_empty() {
            if let Some(map) = status.as_object_mut() {
                map.remove("reason");
            }
        }
        status
    }

    /// The serialized `Status` body.
    pub fn to_body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_status()).unwrap_or_default()
    }
}

/// The success `Status` kube returns for some deletes.
pub fn success_status(details: Option<(&GroupResource, &str, &str)>) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    });
    if let Some((gr, name, uid)) = details {
        let mut details = json!({"name": name, "kind": gr.resource, "uid": uid});
        // kube omits the empty group of core resources (`omitempty`).
        if !gr.group.is_empty() {
            details["group"] = json!(gr.group);
        }
        status["details"] = details;
    }
    status
}

/// A field error as kube's `field.Error`, turned into a [`StatusCause`].
pub fn field_invalid(field: &str, value: &str, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        // Go's `%q`: quotes, backslashes and control characters escaped.
        message: format!(
            "Invalid value: {}: {detail}",
            kubegate_policy::quote::go_quote(value)
        ),
        field: field.into(),
    }
}

/// `Required value` field error.
pub fn field_required(field: &str, detail: &str) -> StatusCause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    StatusCause {
        reason: "FieldValueRequired".into(),
        message,
        field: field.into(),
    }
}

/// `Forbidden` field error (e.g. a field that may not change).
pub fn field_forbidden(field: &str, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {detail}"),
        field: field.into(),
    }
}

/// `Unsupported value` field error.
pub fn field_not_supported(field: &str, value: &str, supported: &[&str]) -> StatusCause {
    let quoted: Vec<String> = supported
        .iter()
        .map(|s| kubegate_policy::quote::go_quote(s))
        .collect();
    StatusCause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            kubegate_policy::quote::go_quote(value),
            quoted.join(", ")
        ),
        field: field.into(),
    }
}

/// `Duplicate value` field error.
pub fn field_duplicate(field: &str, value: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueDuplicate".into(),
        message: format!(
            "Duplicate value: {}",
            kubegate_policy::quote::go_quote(value)
        ),
        field: field.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_error_values_are_quoted_as_go_quotes_them() {
        let cause = field_invalid("spec.color", "re\"d\n\t", "bad");
        assert_eq!(cause.message, r#"Invalid value: "re\"d\n\t": bad"#);
        let cause = field_not_supported("spec.mode", "a\nb", &["x"]);
        assert_eq!(
            cause.message,
            r#"Unsupported value: "a\nb": supported values: "x""#
        );
    }

    #[test]
    fn not_found_wording_matches_kube() {
        let e = ApiError::not_found(&GroupResource::new("", "configmaps"), "app");
        assert_eq!(e.message, "configmaps \"app\" not found");
        let s = e.to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["kind"], "configmaps");
        let e = ApiError::not_found(&GroupResource::new("coordination.k8s.io", "leases"), "l");
        assert_eq!(e.message, "leases.coordination.k8s.io \"l\" not found");
    }

    #[test]
    fn the_body_keeps_metav1_statuss_field_order() {
        let body = ApiError::not_found(&GroupResource::new("", "configmaps"), "app").to_body();
        assert_eq!(
            String::from_utf8(body).expect("utf-8"),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"configmaps \\\"app\\\" not found\",\"reason\":\"NotFound\",\
             \"details\":{\"name\":\"app\",\"kind\":\"configmaps\"},\"code\":404}"
        );
        // Without details, `code` still ends it.
        let body = ApiError::bad_request("no").to_body();
        assert!(String::from_utf8(body)
            .expect("utf-8")
            .ends_with("\"reason\":\"BadRequest\",\"code\":400}"));
    }

    #[test]
    fn invalid_lists_every_cause() {
        let e = ApiError::invalid(
            "",
            "ConfigMap",
            "Bad_Name",
            vec![
                field_invalid(
                    "metadata.name",
                    "Bad_Name",
                    "a lowercase RFC 1123 subdomain",
                ),
                field_required("data", ""),
            ],
        );
        assert!(e
            .message
            .starts_with("ConfigMap \"Bad_Name\" is invalid: [metadata.name: Invalid value"));
        assert_eq!(
            e.to_status()["details"]["causes"]
                .as_array()
                .map(|a| a.len()),
            Some(2)
        );
    }
}

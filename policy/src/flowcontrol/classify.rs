//! Classification: which FlowSchema a request matches (kube's `rule.go`), its flow
//! distinguisher and the flow hash that shuffle sharding deals from (`apf_controller.go`).

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::config::{
    Distinguisher, FlowSchema, NonResourceRule, PolicyRules, ResourceRule, Subject,
};
use crate::request_info::RequestInfo;
use crate::user::UserInfo;

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// What flow control needs to know about a request (kube's `RequestDigest`).
#[derive(Debug, Clone, Copy)]
pub struct RequestDigest<'a> {
    pub request_info: &'a RequestInfo,
    pub user: &'a UserInfo,
    /// The request's own deadline measured from its arrival (the `?timeout=` or the server's
    /// request timeout); `None` for requests without one, such as watches. Its quarter bounds
    /// the time the request may wait in a queue.
    pub timeout: Option<Duration>,
}

/// Whether `digest` matches any of the schema's rules.
pub fn matches_flow_schema(digest: &RequestDigest<'_>, schema: &FlowSchema) -> bool {
    schema
        .rules
        .iter()
        .any(|rules| matches_rules(digest, rules))
}

fn matches_rules(digest: &RequestDigest<'_>, rules: &PolicyRules) -> bool {
    if !rules
        .subjects
        .iter()
        .any(|s| matches_subject(digest.user, s))
    {
        return false;
    }
    let info = digest.request_info;
    if info.is_resource_request {
        rules
            .resource_rules
            .iter()
            .any(|rule| matches_resource_rule(info, rule))
    } else {
        rules
            .non_resource_rules
            .iter()
            .any(|rule| matches_non_resource_rule(info, rule))
    }
}

fn matches_subject(user: &UserInfo, subject: &Subject) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == "*" || u.name == user.name),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == "*" || user.groups.contains(&g.name)),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = user.name.strip_prefix(SERVICE_ACCOUNT_PREFIX) else {
                return false;
            };
            // `system:serviceaccount:<namespace>:<name>`, read as kube reads it.
            let Some(name) = rest
                .strip_prefix(sa.namespace.as_str())
                .and_then(|r| r.strip_prefix(':'))
            else {
                return false;
            };
            sa.name == "*" || sa.name == name
        }),
        _ => false,
    }
}

/// kube's `containsString`: a lone wildcard matches anything, otherwise an exact member.
fn contains(list: &[String], x: &str, wildcard: &str) -> bool {
    (list.len() == 1 && list[0] == wildcard) || list.iter().any(|y| y == x)
}

fn matches_resource_rule(info: &RequestInfo, rule: &ResourceRule) -> bool {
    if !contains(&rule.verbs, &info.verb, "*") {
        return false;
    }
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    if !contains(&rule.resources, &resource, "*") {
        return false;
    }
    if !contains(&rule.api_groups, &info.api_group, "*") {
        return false;
    }
    if info.namespace.is_empty() {
        return rule.cluster_scope;
    }
    contains(&rule.namespaces, &info.namespace, "*")
}

fn matches_non_resource_rule(info: &RequestInfo, rule: &NonResourceRule) -> bool {
    contains(&rule.verbs, &info.verb, "*")
        && rule
            .non_resource_urls
            .iter()
            .any(|url| matches_non_resource_url(url, &info.path))
}

/// kube's `matchPolicyRuleNonResourceURL`: `*`, an exact path, or a prefix (`/apis/*` and also,
/// as kube does, `/apis` match everything under `/apis/`).
fn matches_non_resource_url(rule: &str, path: &str) -> bool {
    if rule == "*" || rule == path {
        return true;
    }
    let prefix = rule.strip_suffix('*').unwrap_or(rule);
    if prefix.ends_with('/') {
        path.starts_with(prefix)
    } else {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// The flow distinguisher for `method` (kube's `computeFlowDistinguisher`).
pub fn flow_distinguisher(digest: &RequestDigest<'_>, method: Option<Distinguisher>) -> String {
    match method {
        None => String::new(),
        Some(Distinguisher::ByUser) => digest.user.name.clone(),
        Some(Distinguisher::ByNamespace) => digest.request_info.namespace.clone(),
    }
}

/// The flow's hash (kube's `hashFlowID`): the first 8 bytes, little-endian, of
/// SHA-256(schema name, NUL, distinguisher).
pub fn hash_flow_id(flow_schema: &str, distinguisher: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(flow_schema.as_bytes());
    hasher.update([0u8]);
    hasher.update(distinguisher.as_bytes());
    let sum = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum[..8]);
    u64::from_le_bytes(first)
}

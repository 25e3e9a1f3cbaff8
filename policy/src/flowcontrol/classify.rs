//! Classification: which FlowSchema a request matches (kube's `rule.go`), its flow
//! distinguisher and the flow hash that shuffle sharding deals from (`apf_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use super::config::{
    Distinguisher, FlowSchema, NonResourceRule, PolicyRules, ResourceRule, Subject,
};
use super::memo::ClassificationMemo;
use crate::request_info::RequestInfo;
use crate::user::UserInfo;

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// What flow control needs to know about a request (kube's `RequestDigest`).
#[derive(Debug, Clone, Copy)]
pub struct RequestDigest<'a> {
    /// Shared, so that a request's record in its queue set refers to them without a copy.
    pub request_info: &'a Arc<RequestInfo>,
    pub user: &'a Arc<UserInfo>,
    /// The request's own deadline measured from its arrival (the `?timeout=` or the server's
    /// request timeout); `None` for requests without one, such as watches. Its quarter bounds
    /// the time the request may wait in a queue.
    pub timeout: Option<Duration>,
    /// The connection's memo of the rule sets its user's subjects match, if it keeps one.
    pub memo: Option<&'a ClassificationMemo>,
}

/// Whether `digest` matches any of the schema's rules.
pub fn matches_flow_schema(digest: &RequestDigest<'_>, schema: &FlowSchema) -> bool {
    schema
        .rules
        .iter()
        .any(|rules| matches_rules(digest, rules))
}

fn matches_rules(digest: &RequestDigest<'_>, rules: &PolicyRules) -> bool {
    // Rules of the other kind of request cannot match: skip the subjects (same answer).
    applies_to_request_kind(digest.request_info, rules)
        && matches_subjects(digest.user, rules)
        && matches_request(digest.request_info, rules)
}

/// Whether `rules` has rules of the request's kind (resource or non-resource).
fn applies_to_request_kind(info: &RequestInfo, rules: &PolicyRules) -> bool {
    if info.is_resource_request {
        !rules.resource_rules.is_empty()
    } else {
        !rules.non_resource_rules.is_empty()
    }
}

/// Whether any of the rule set's subjects is `user`: the half of matching that depends on
/// the user alone (what [`ClassificationMemo`] remembers).
pub(crate) fn matches_subjects(user: &UserInfo, rules: &PolicyRules) -> bool {
    rules.subjects.iter().any(|s| matches_subject(user, s))
}

/// Whether any of the rule set's resource or non-resource rules matches the request: the half
/// of matching that depends on the request.
pub(crate) fn matches_request(info: &RequestInfo, rules: &PolicyRules) -> bool {
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
    match subject {
        Subject::User(name) => name == "*" || *name == user.name,
        Subject::Group(name) => name == "*" || user.groups.contains(name),
        Subject::ServiceAccount { namespace, name } => {
            let Some(rest) = user.name.strip_prefix(SERVICE_ACCOUNT_PREFIX) else {
                return false;
            };
            // `system:serviceaccount:<namespace>:<name>`, read as kube reads it.
            let Some(account) = rest
                .strip_prefix(namespace.as_str())
                .and_then(|r| r.strip_prefix(':'))
            else {
                return false;
            };
            name == "*" || name == account
        }
        Subject::Nobody => false,
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
    // The resource is `resource` or `resource/subresource`; compared in place, without
    // building the joined string for every rule tried.
    let resource_matches = (rule.resources.len() == 1 && rule.resources[0] == "*")
        || rule
            .resources
            .iter()
            .any(|r| is_resource(r, &info.resource, &info.subresource));
    if !resource_matches {
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

/// Whether `rule` is exactly `resource` (no subresource) or `resource/subresource`.
fn is_resource(rule: &str, resource: &str, subresource: &str) -> bool {
    if subresource.is_empty() {
        return rule == resource;
    }
    rule.len() == resource.len() + 1 + subresource.len()
        && rule.starts_with(resource)
        && rule.as_bytes().get(resource.len()) == Some(&b'/')
        && rule.ends_with(subresource)
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
    distinguisher_of(digest, method).to_string()
}

/// [`flow_distinguisher`], borrowed from the request.
pub(crate) fn distinguisher_of<'a>(
    digest: &RequestDigest<'a>,
    method: Option<Distinguisher>,
) -> &'a str {
    match method {
        None => "",
        Some(Distinguisher::ByUser) => &digest.user.name,
        Some(Distinguisher::ByNamespace) => &digest.request_info.namespace,
    }
}

/// The flow's hash (kube's `hashFlowID`, which takes the first 8 bytes of SHA-256(schema
/// name, NUL, distinguisher)): here FNV-1a 64 over the same bytes, finished with MurmurHash3's
/// 64-bit mixer so that every bit (the dealer reads the low ones first) depends on every byte.
///
/// kube uses the hash only to deal the flow's hand of queues, so any well-spread hash that is
/// the same for the same flow every time gives the same behaviour; this one is a few dozen
/// nanoseconds instead of a SHA-256 per request, needs no allocation, and is fixed (no random
/// seed), so a flow keeps its queues for the life of the process and across restarts. A flow
/// is dealt different queues than in kube-apiserver (replicas agree on hands only when they
/// hash alike), which matters for nothing but predicting queues from outside; `bench/apf.sh`
/// computes the same function in Python to pick users with queues of their own.
pub fn hash_flow_id(flow_schema: &str, distinguisher: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let bytes = flow_schema
        .as_bytes()
        .iter()
        .chain(&[0u8])
        .chain(distinguisher.as_bytes());
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    // MurmurHash3 fmix64.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_hash_is_fixed() {
        // The values bench/apf.sh's Python computes: the hash must not change with the build,
        // the process or the platform.
        assert_eq!(
            hash_flow_id("global-default", "bench-overhead"),
            0x788d_3847_3490_1b59
        );
        assert_eq!(hash_flow_id("", ""), 0xb903_4ad3_7056_f5fb);
        assert_eq!(
            hash_flow_id("bench-apf", "bench-heavy-0"),
            0xeb2d_3150_da8f_15b5
        );
    }

    #[test]
    fn resources_match_with_and_without_subresource() {
        assert!(is_resource("pods", "pods", ""));
        assert!(!is_resource("pods/log", "pods", ""));
        assert!(is_resource("pods/log", "pods", "log"));
        assert!(!is_resource("pods", "pods", "log"));
        assert!(!is_resource("pods/logs", "pods", "log"));
        assert!(!is_resource("podsxlog", "pods", "log"));
        assert!(!is_resource("pod/slog", "pods", "log"));
    }
}

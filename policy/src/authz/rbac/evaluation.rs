//! Does one rule allow one request: kube's `RuleAllows` (`plugin/pkg/auth/authorizer/rbac`)
//! over the matchers of `pkg/apis/rbac/v1/evaluation_helpers.go`.

use super::types::PolicyRule;
use crate::request_info::RequestInfo;

/// kube's `RuleAllows`: resource requests match verbs, API groups, resources (with
/// `*/subresource`) and resource names; other requests match verbs and non-resource URLs.
pub fn rule_allows(request: &RequestInfo, rule: &PolicyRule) -> bool {
    if request.is_resource_request {
        verb_matches(rule, &request.verb)
            && api_group_matches(rule, &request.api_group)
            && resource_matches(rule, &request.resource, &request.subresource)
            && resource_name_matches(rule, &request.name)
    } else {
        verb_matches(rule, &request.verb) && non_resource_url_matches(rule, &request.path)
    }
}

/// kube's `VerbMatches`.
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

/// kube's `APIGroupMatches`.
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups.iter().any(|g| g == "*" || g == group)
}

/// kube's `ResourceMatches`, against `resource` joined with `subresource` by `/` when there is
/// one. The joined form is compared piecewise so no string is built per rule.
pub fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        if r == "*" {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        // `resource/subresource` exactly, or kube's `*/subresource`.
        let joined = r.len() == resource.len() + 1 + subresource.len()
            && r.starts_with(resource)
            && r.as_bytes().get(resource.len()) == Some(&b'/')
            && r.ends_with(subresource);
        joined
            || (r.len() == subresource.len() + 2 && r.starts_with("*/") && r.ends_with(subresource))
    })
}

/// kube's `ResourceNameMatches`: no names in the rule means every name.
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

/// kube's `NonResourceURLMatches`: `*`, exact, or a rule ending in `*` whose part before the
/// trailing stars prefixes the path.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| {
        u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

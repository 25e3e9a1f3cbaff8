//! Whether one set of rules grants everything another does: kube's
//! `pkg/registry/rbac/validation/policy_comparator.go` (`Covers`, `BreakdownRule`), used by
//! escalation checks and bootstrap policy reconciliation.

use super::types::PolicyRule;

/// kube's `validation.Covers`: whether `owner` grants every permission in `requested`, and if
/// not, the requested permissions it misses, each broken down to one group, resource, verb
/// and resource name (or one non-resource URL and verb), in the order of `requested`.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    // Broken down to single tuples, each sub-rule is covered by one owner rule or by none, so
    // checking them one by one against each owner rule is exact.
    let uncovered: Vec<PolicyRule> = requested
        .iter()
        .flat_map(breakdown_rule)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (uncovered.is_empty(), uncovered)
}

/// kube's `BreakdownRule`: the equivalent rules with at most one verb, resource, API group and
/// resource name each; non-resource URLs pair with verbs only.
pub fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut subrules = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                if rule.resource_names.is_empty() {
                    subrules.push(PolicyRule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: one(verb),
                        ..PolicyRule::default()
                    });
                } else {
                    for resource_name in &rule.resource_names {
                        subrules.push(PolicyRule {
                            api_groups: one(group),
                            resources: one(resource),
                            verbs: one(verb),
                            resource_names: one(resource_name),
                            ..PolicyRule::default()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            subrules.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: one(verb),
                ..PolicyRule::default()
            });
        }
    }
    subrules
}

fn has(set: &[String], element: &str) -> bool {
    set.iter().any(|s| s == element)
}

fn has_all(set: &[String], contains: &[String]) -> bool {
    contains.iter().all(|c| has(set, c))
}

/// kube's `resourceCoversAll`: `*`, exact names, or `*/sub` for a `res/sub` request.
fn resource_covers_all(set: &[String], covers: &[String]) -> bool {
    if has(set, "*") || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        if has(set, path) {
            return true;
        }
        match path.split_once('/') {
            Some((_, subresource)) => set
                .iter()
                .any(|s| s.strip_prefix("*/") == Some(subresource)),
            None => false,
        }
    })
}

/// kube's `nonResourceURLCovers`: equal, or the owner ends in `*` and, with every trailing
/// `*` trimmed, prefixes the requested path.
fn non_resource_url_covers(owner: &str, sub: &str) -> bool {
    owner == sub || (owner.ends_with('*') && sub.starts_with(owner.trim_end_matches('*')))
}

fn non_resource_urls_cover_all(set: &[String], covers: &[String]) -> bool {
    covers
        .iter()
        .all(|path| set.iter().any(|owner| non_resource_url_covers(owner, path)))
}

/// kube's `ruleCovers`: whether `owner` covers the broken-down `sub`.
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resource_covers_all(&owner.resources, &sub.resources);
    let urls = non_resource_urls_cover_all(&owner.non_resource_urls, &sub.non_resource_urls);
    // An owner limited to names never covers a request for every name.
    let names = owner.resource_names.is_empty()
        || (!sub.resource_names.is_empty() && has_all(&owner.resource_names, &sub.resource_names));
    verbs && groups && resources && names && urls
}

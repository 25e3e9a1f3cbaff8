//! Whether one set of rules grants everything another does: kube's
//! `pkg/registry/rbac/validation/policy_comparator.go` (`Covers`, `BreakdownRule`), used by
//! escalation checks and bootstrap policy reconciliation.

use super::types::PolicyRule;

/// Requested rules that would break down into more single permissions than this are not
/// broken down: unless one owner rule covers one whole, it is reported missing as it is. A
/// few kilobytes of lists multiply into billions of permissions, and this check runs on
/// every role write by users without `escalate`.
pub const MAX_BREAKDOWN: usize = 10_000;
/// At most this many missing permissions are reported (the answer is already "no").
pub const MAX_MISSING: usize = 1_000;

/// kube's `validation.Covers`: whether `owner` grants every permission in `requested`, and if
/// not, the requested permissions it misses, each broken down to one group, resource, verb
/// and resource name (or one non-resource URL and verb), in the order of `requested`. Bounded
/// by [`MAX_BREAKDOWN`] and [`MAX_MISSING`]; within those bounds, exactly kube's answer.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let mut uncovered: Vec<PolicyRule> = Vec::new();
    for rule in requested {
        // One owner rule covering the whole rule covers every piece of it.
        if owner.iter().any(|o| rule_covers(o, rule)) {
            continue;
        }
        if breakdown_len(rule) > MAX_BREAKDOWN {
            uncovered.push(rule.clone());
        } else {
            // Broken down to single tuples, each sub-rule is covered by one owner rule or by
            // none, so checking them one by one against each owner rule is exact.
            uncovered.extend(
                breakdown_rule(rule)
                    .into_iter()
                    .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub))),
            );
        }
        if uncovered.len() >= MAX_MISSING {
            uncovered.truncate(MAX_MISSING);
            break;
        }
    }
    (uncovered.is_empty(), uncovered)
}

/// How many rules [`breakdown_rule`] would make of `rule` (saturating).
pub fn breakdown_len(rule: &PolicyRule) -> usize {
    let names = rule.resource_names.len().max(1);
    rule.api_groups
        .len()
        .saturating_mul(rule.resources.len())
        .saturating_mul(rule.verbs.len())
        .saturating_mul(names)
        .saturating_add(
            rule.non_resource_urls
                .len()
                .saturating_mul(rule.verbs.len()),
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn list(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn huge_requests_are_judged_without_breaking_them_down() {
        // 40 groups x 40 resources x 10 verbs x 10 names: 160,000 permissions.
        let huge = PolicyRule {
            api_groups: list("g", 40),
            resources: list("r", 40),
            verbs: list("v", 10),
            resource_names: list("n", 10),
            ..PolicyRule::default()
        };
        assert_eq!(breakdown_len(&huge), 160_000);
        let everything = PolicyRule {
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            verbs: vec!["*".into()],
            ..PolicyRule::default()
        };
        assert_eq!(
            covers(&[everything], std::slice::from_ref(&huge)),
            (true, vec![])
        );
        // Not held: reported whole, not as 160,000 pieces.
        let some = PolicyRule {
            api_groups: vec!["g0".into()],
            resources: vec!["*".into()],
            verbs: vec!["*".into()],
            ..PolicyRule::default()
        };
        let (covered, missing) = covers(&[some], std::slice::from_ref(&huge));
        assert!(!covered);
        assert_eq!(missing, vec![huge]);
    }

    #[test]
    fn missing_permissions_are_capped() {
        let wide = PolicyRule {
            api_groups: list("g", 10),
            resources: list("r", 100),
            verbs: list("v", 5),
            ..PolicyRule::default()
        };
        let (covered, missing) = covers(&[], &[wide]);
        assert!(!covered);
        assert_eq!(missing.len(), MAX_MISSING);
    }
}

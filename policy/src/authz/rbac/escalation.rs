//! Privilege escalation prevention: a user may only grant permissions it holds. kube's
//! `ConfirmNoEscalation` (`pkg/registry/rbac/validation/rule.go`) with `CompactRules`
//! (`policy_compact.go`) for the message.

use std::collections::{BTreeSet, HashMap};

use super::index::{aggregate, RbacIndex};
use super::policy_comparator::covers;
use super::types::{compact_string, PolicyRule};
use crate::quote::{go_quote, go_quote_list};
use crate::user::UserInfo;

/// kube's `ConfirmNoEscalation`: `Ok` if the rules `user` holds in `namespace` cover
/// `requested`; otherwise kube's message, e.g.
///
/// ```text
/// user "bob" (groups=["dev"]) is attempting to grant RBAC permissions not currently held:
/// {APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}
/// ```
///
/// with one sorted line per missing permission (simple rules merged across verbs), followed by
/// `; resolution errors: [..]` when some of the user's bindings could not be resolved.
pub fn confirm_no_escalation(
    index: &RbacIndex,
    user: &UserInfo,
    namespace: &str,
    requested: &[PolicyRule],
) -> Result<(), String> {
    let (owner_rules, errors) = index.rules_for(user, namespace);
    let (covered, missing) = covers(&owner_rules, requested);
    if covered {
        return Ok(());
    }
    // kube collects the descriptions in a string set: sorted, repeats dropped.
    let descriptions: BTreeSet<String> =
        compact_rules(missing).iter().map(compact_string).collect();
    let mut message = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_quote_list(&user.groups),
        descriptions.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        // kube prints a one-element `[]error` holding the aggregate with `%v`: `[<aggregate>]`.
        message.push_str(&format!("; resolution errors: [{}]", aggregate(&errors)));
    }
    Err(message)
}

/// kube's `CompactRules`: rules with exactly one API group and one resource, at most one
/// resource name, verbs and nothing else are merged by (group, resource, name), their verbs
/// appended in order; other rules are kept as they are. Order does not matter to the caller,
/// which sorts.
pub fn compact_rules(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut compacted = Vec::with_capacity(rules.len());
    let mut simple: HashMap<(String, String, Option<String>), PolicyRule> = HashMap::new();
    for rule in rules {
        match simple_resource(&rule) {
            Some(key) => match simple.get_mut(&key) {
                Some(existing) => existing.verbs.extend(rule.verbs),
                None => {
                    simple.insert(key, rule);
                }
            },
            None => compacted.push(rule),
        }
    }
    compacted.extend(simple.into_values());
    compacted
}

/// kube's `isSimpleResourceRule`: the merge key of a simple rule.
fn simple_resource(rule: &PolicyRule) -> Option<(String, String, Option<String>)> {
    if rule.resource_names.len() > 1
        || !rule.non_resource_urls.is_empty()
        || rule.api_groups.len() != 1
        || rule.resources.len() != 1
    {
        return None;
    }
    Some((
        rule.api_groups[0].clone(),
        rule.resources[0].clone(),
        rule.resource_names.first().cloned(),
    ))
}

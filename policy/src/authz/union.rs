//! The authorizer chain, as kube's `authorization/union`, and the privileged-group authorizer
//! kube-apiserver puts first in it (`authorizerfactory.NewPrivilegedGroups("system:masters")`),
//! so members of `system:masters` are allowed whatever the configured modes say.

use std::sync::Arc;

use super::{authorize, Attributes, Authorizer, Decision, RulesInfo};
use crate::user::{UserInfo, SYSTEM_PRIVILEGED_GROUP};

/// Asks each authorizer in order; the first allow or deny decides. When all of them have no
/// opinion, the answer is no opinion with their non-empty reasons joined by newlines, as in
/// kube (the caller then forbids the request), or, when one of them could not decide, a
/// failure with their errors (kube's aggregate: the caller answers 500).
#[derive(Clone, Default)]
pub struct UnionAuthorizer {
    pub authorizers: Vec<Arc<dyn Authorizer>>,
}

impl UnionAuthorizer {
    pub fn new(authorizers: Vec<Arc<dyn Authorizer>>) -> Self {
        UnionAuthorizer { authorizers }
    }
}

impl std::fmt::Debug for UnionAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.authorizers.iter().map(|a| a.name()).collect();
        f.debug_struct("UnionAuthorizer")
            .field("authorizers", &names)
            .finish()
    }
}

#[async_trait::async_trait]
impl Authorizer for UnionAuthorizer {
    fn name(&self) -> &'static str {
        "union"
    }

    async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
        let mut outcome = Outcome::default();
        for authorizer in &self.authorizers {
            if let Some(decided) = outcome.add(authorize(authorizer.as_ref(), attributes).await) {
                return decided;
            }
        }
        outcome.finish()
    }

    /// At once when every mode asked before the decision answers at once; otherwise `None`
    /// (the modes asked so far are asked again by [`Authorizer::authorize`], which gives
    /// the same answers).
    fn authorize_now(&self, attributes: &Attributes<'_>) -> Option<Decision> {
        let mut outcome = Outcome::default();
        for authorizer in &self.authorizers {
            if let Some(decided) = outcome.add(authorizer.authorize_now(attributes)?) {
                return Some(decided);
            }
        }
        Some(outcome.finish())
    }

    /// Every mode's rules together; incomplete when any mode's list is (kube's
    /// `unionAuthzRulesHandler`).
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
        let mut all = RulesInfo::default();
        for authorizer in &self.authorizers {
            let rules = authorizer.rules_for(user, namespace);
            all.resource_rules.extend(rules.resource_rules);
            all.non_resource_rules.extend(rules.non_resource_rules);
            all.incomplete |= rules.incomplete;
            all.errors.extend(rules.errors);
        }
        all
    }
}

/// The union's answer so far: reasons and errors of the modes without an opinion.
#[derive(Default)]
struct Outcome {
    reasons: Vec<String>,
    errors: Vec<String>,
}

impl Outcome {
    /// Takes one mode's decision; `Some` when it decides the request.
    fn add(&mut self, decision: Decision) -> Option<Decision> {
        let reason = match decision {
            decided @ (Decision::Allow(_) | Decision::Deny(_)) => return Some(decided),
            Decision::NoOpinion(reason) => reason,
            failed @ Decision::Failed { denied: true, .. } => return Some(failed),
            Decision::Failed { reason, error, .. } => {
                self.errors.push(error);
                reason
            }
        };
        if !reason.is_empty() {
            self.reasons.push(reason);
        }
        None
    }

    /// No opinion from any mode: kube's `NoOpinion` with the reasons joined by newlines and
    /// the errors as `utilerrors.NewAggregate` prints them (one alone, several in brackets).
    fn finish(self) -> Decision {
        let reason = self.reasons.join("\n");
        match self.errors.len() {
            0 => Decision::NoOpinion(reason),
            1 => Decision::Failed {
                reason,
                error: self.errors.into_iter().next().unwrap_or_default(),
                denied: false,
            },
            _ => Decision::Failed {
                reason,
                error: format!("[{}]", self.errors.join(", ")),
                denied: false,
            },
        }
    }
}

/// Allows any user in one of the given groups and has no opinion on anyone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivilegedGroups {
    groups: Vec<String>,
}

impl PrivilegedGroups {
    pub fn new(groups: Vec<String>) -> Self {
        PrivilegedGroups { groups }
    }

    fn decide(&self, attributes: &Attributes<'_>) -> Decision {
        let privileged = attributes
            .user
            .groups
            .iter()
            .any(|group| self.groups.contains(group));
        if privileged {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(String::new())
        }
    }

    /// The superuser group kube-apiserver always honours: `system:masters`.
    pub fn system_masters() -> Self {
        PrivilegedGroups::new(vec![SYSTEM_PRIVILEGED_GROUP.to_string()])
    }
}

impl Default for PrivilegedGroups {
    fn default() -> Self {
        PrivilegedGroups::system_masters()
    }
}

#[async_trait::async_trait]
impl Authorizer for PrivilegedGroups {
    fn name(&self) -> &'static str {
        "PrivilegedGroups"
    }

    async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
        self.decide(attributes)
    }

    fn authorize_now(&self, attributes: &Attributes<'_>) -> Option<Decision> {
        Some(self.decide(attributes))
    }

    /// kube lists no rules for this authorizer (it is not a rule resolver there): the
    /// superusers' rules come from the `cluster-admin` binding.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::always::{AlwaysAllow, AlwaysDeny};
    use crate::request_info::RequestInfo;
    use crate::user::UserInfo;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Waker};

    /// Runs a future that never waits on I/O (the fakes here answer at once).
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    /// Answers a fixed decision and counts how often it was asked.
    struct Fixed {
        decision: Decision,
        calls: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Authorizer for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        async fn authorize(&self, _attributes: &Attributes<'_>) -> Decision {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.decision.clone()
        }
    }

    fn fixed(decision: Decision) -> Arc<Fixed> {
        Arc::new(Fixed {
            decision,
            calls: AtomicUsize::new(0),
        })
    }

    fn authorize(authorizer: &dyn Authorizer, groups: &[&str]) -> Decision {
        let user = UserInfo::new("bob", groups.iter().map(|g| g.to_string()).collect());
        let request = RequestInfo {
            is_resource_request: true,
            verb: "list".into(),
            api_prefix: "api".into(),
            api_version: "v1".into(),
            resource: "secrets".into(),
            namespace: "default".into(),
            path: "/api/v1/namespaces/default/secrets".into(),
            ..RequestInfo::default()
        };
        block_on(authorizer.authorize(&Attributes {
            user: &user,
            request: &request,
        }))
    }

    fn union(chain: &[Arc<Fixed>]) -> UnionAuthorizer {
        UnionAuthorizer::new(
            chain
                .iter()
                .map(|a| a.clone() as Arc<dyn Authorizer>)
                .collect(),
        )
    }

    #[test]
    fn first_allow_or_deny_wins() {
        let pass = fixed(Decision::NoOpinion(String::new()));
        let allow = fixed(Decision::Allow("rbac: bound".into()));
        let deny = fixed(Decision::Deny("webhook: no".into()));
        assert_eq!(
            authorize(&union(&[pass.clone(), allow.clone(), deny.clone()]), &[]),
            Decision::Allow("rbac: bound".into())
        );
        assert_eq!(
            deny.calls.load(Ordering::SeqCst),
            0,
            "later authorizers are not asked"
        );
        assert_eq!(
            authorize(&union(&[pass.clone(), deny.clone(), allow.clone()]), &[]),
            Decision::Deny("webhook: no".into())
        );
        assert_eq!(pass.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failed_mode_fails_the_request_unless_a_later_one_decides() {
        let failed = |error: &str| {
            fixed(Decision::Failed {
                reason: String::new(),
                error: error.into(),
                denied: false,
            })
        };
        let quiet = fixed(Decision::NoOpinion("RBAC: nothing".into()));
        let allow = fixed(Decision::Allow(String::new()));
        assert_eq!(
            authorize(&union(&[failed("dial tcp: refused"), quiet.clone()]), &[]),
            Decision::Failed {
                reason: "RBAC: nothing".into(),
                error: "dial tcp: refused".into(),
                denied: false
            }
        );
        assert_eq!(
            authorize(&union(&[failed("a"), failed("b")]), &[]),
            Decision::Failed {
                reason: String::new(),
                error: "[a, b]".into(),
                denied: false
            }
        );
        assert_eq!(
            authorize(&union(&[failed("a"), allow.clone()]), &[]),
            Decision::Allow(String::new())
        );
        // A deny with an error ends the chain as a deny does (kube's union returns it).
        let denied = Decision::Failed {
            reason: "confused".into(),
            error: "both".into(),
            denied: true,
        };
        assert_eq!(
            authorize(&union(&[fixed(denied.clone()), allow]), &[]),
            denied
        );
    }

    #[test]
    fn all_no_opinion_joins_reasons() {
        let quiet = fixed(Decision::NoOpinion(String::new()));
        let first = fixed(Decision::NoOpinion("RBAC: role not found".into()));
        let second = fixed(Decision::NoOpinion("webhook: not mine".into()));
        assert_eq!(
            authorize(&union(&[first, quiet.clone(), second]), &[]),
            Decision::NoOpinion("RBAC: role not found\nwebhook: not mine".into())
        );
        assert_eq!(
            authorize(&union(&[quiet]), &[]),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            authorize(&union(&[]), &[]),
            Decision::NoOpinion(String::new())
        );
    }

    #[test]
    fn privileged_groups_allow_system_masters_only() {
        let privileged = PrivilegedGroups::system_masters();
        assert_eq!(
            authorize(&privileged, &["dev", "system:masters"]),
            Decision::Allow(String::new())
        );
        assert_eq!(
            authorize(&privileged, &["dev", "system:authenticated"]),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            authorize(&privileged, &[]),
            Decision::NoOpinion(String::new())
        );
        // group names are compared exactly
        assert_eq!(
            authorize(&privileged, &["System:Masters"]),
            Decision::NoOpinion(String::new())
        );
        let custom = PrivilegedGroups::new(vec!["ops".into(), "admins".into()]);
        assert!(authorize(&custom, &["admins"]).is_allowed());
        assert_eq!(
            PrivilegedGroups::default(),
            PrivilegedGroups::system_masters()
        );
    }

    #[test]
    fn kube_apiserver_chain_shape() {
        // kube-apiserver: privileged groups first, then the configured modes.
        let chain = UnionAuthorizer::new(vec![
            Arc::new(PrivilegedGroups::system_masters()),
            Arc::new(AlwaysDeny),
        ]);
        assert!(authorize(&chain, &["system:masters"]).is_allowed());
        assert_eq!(
            authorize(&chain, &["dev"]),
            Decision::NoOpinion("Everything is forbidden.".into())
        );
        // AlwaysDeny has no opinion, so a later mode can still allow (as in kube).
        let chain = UnionAuthorizer::new(vec![Arc::new(AlwaysDeny), Arc::new(AlwaysAllow)]);
        assert!(authorize(&chain, &[]).is_allowed());
        assert_eq!(
            format!("{chain:?}"),
            "UnionAuthorizer { authorizers: [\"AlwaysDeny\", \"AlwaysAllow\"] }"
        );
    }

    #[test]
    fn a_union_answers_at_once_only_when_every_mode_it_asks_can() {
        let user = UserInfo::new("bob", vec!["dev".into()]);
        let request = RequestInfo {
            verb: "get".into(),
            path: "/healthz".into(),
            ..RequestInfo::default()
        };
        let attributes = Attributes {
            user: &user,
            request: &request,
        };
        let at_once = UnionAuthorizer::new(vec![
            Arc::new(PrivilegedGroups::system_masters()),
            Arc::new(crate::authz::always::AlwaysDeny),
        ]);
        let denied = Decision::NoOpinion(crate::authz::always::ALWAYS_DENY_REASON.into());
        assert_eq!(at_once.authorize_now(&attributes), Some(denied.clone()));
        assert_eq!(block_on(at_once.authorize(&attributes)), denied);
        // A mode that must be awaited (a webhook; here `Fixed`) leaves it to `authorize`,
        // which asks it once.
        let waiting = fixed(Decision::Allow("webhook".into()));
        let mixed = UnionAuthorizer::new(vec![
            Arc::new(PrivilegedGroups::system_masters()),
            waiting.clone() as Arc<dyn Authorizer>,
        ]);
        assert_eq!(mixed.authorize_now(&attributes), None);
        assert_eq!(waiting.calls.load(Ordering::SeqCst), 0);
        assert_eq!(
            block_on(crate::authz::authorize(&mixed, &attributes)),
            Decision::Allow("webhook".into())
        );
        assert_eq!(waiting.calls.load(Ordering::SeqCst), 1);
        // A decision before that mode is made at once.
        let master = UserInfo::new("root", vec![SYSTEM_PRIVILEGED_GROUP.into()]);
        let by_master = Attributes {
            user: &master,
            request: &request,
        };
        assert_eq!(
            mixed.authorize_now(&by_master),
            Some(Decision::Allow(String::new()))
        );
        assert_eq!(waiting.calls.load(Ordering::SeqCst), 1);
    }
}

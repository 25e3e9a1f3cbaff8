//! The RBAC [`Authorizer`]: kube's `RBACAuthorizer` (`plugin/pkg/auth/authorizer/rbac`) over
//! an [`RbacIndex`].

use std::sync::Arc;

use super::decision_cache::DecisionCache;
use super::evaluation::rule_allows;
use super::index::{aggregate, RbacIndex, Visit};
use crate::authz::{Attributes, Authorizer, Decision, NonResourceRule, ResourceRule, RulesInfo};
use crate::request_info::RequestInfo;
use crate::user::UserInfo;

/// Allows what the Roles and ClusterRoles bound to the user allow; has no opinion otherwise
/// (RBAC never denies).
#[derive(Debug, Clone)]
pub struct RbacAuthorizer {
    index: Arc<RbacIndex>,
    /// Recent decisions, valid while the index generation is unchanged.
    cache: Arc<DecisionCache>,
}

impl RbacAuthorizer {
    pub fn new(index: Arc<RbacIndex>) -> Self {
        RbacAuthorizer {
            index,
            cache: Arc::default(),
        }
    }

    /// The index decisions are made from.
    pub fn index(&self) -> &Arc<RbacIndex> {
        &self.index
    }

    /// kube's `RBACAuthorizer.Authorize`, synchronously: allowed by the first rule that
    /// matches, with the binding that granted it as the reason
    /// (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`); otherwise
    /// no opinion, with `RBAC: ` and the role resolution errors as the reason if there were
    /// any.
    pub fn decide(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        // Read before deciding: if the index changes meanwhile, the entry is tagged with the
        // older generation and never reused.
        let generation = self.index.generation();
        if let Some(decision) = self.cache.get(generation, user, request) {
            return decision;
        }
        let decision = self.evaluate(user, request);
        self.cache.put(generation, user, request, &decision);
        decision
    }

    /// [`decide`](Self::decide) without the decision cache: walks the bindings and rules.
    pub fn evaluate(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        let mut allowed: Option<String> = None;
        let mut errors: Vec<String> = Vec::new();
        self.index
            .visit_rules_for(user, &request.namespace, |visit| match visit {
                Visit::Rule(binding, rule) => {
                    if rule_allows(request, rule) {
                        // Built once, for the one rule that allowed.
                        allowed = Some(binding.describe(user));
                        false
                    } else {
                        true
                    }
                }
                Visit::Error(error) => {
                    errors.push(error);
                    true
                }
            });
        match allowed {
            Some(source) => Decision::Allow(format!("RBAC: allowed by {source}")),
            None if errors.is_empty() => Decision::NoOpinion(String::new()),
            None => Decision::NoOpinion(format!("RBAC: {}", aggregate(&errors))),
        }
    }
}

#[async_trait::async_trait]
impl Authorizer for RbacAuthorizer {
    fn name(&self) -> &'static str {
        "RBAC"
    }

    async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
        self.decide(attributes.user, attributes.request)
    }

    fn authorize_now(&self, attributes: &Attributes<'_>) -> Option<Decision> {
        Some(self.decide(attributes.user, attributes.request))
    }

    /// kube's `RBACAuthorizer.RulesFor`: rules naming resources become resource rules, rules
    /// naming non-resource URLs become non-resource rules (a rule with both gives one of
    /// each), never incomplete, with each role resolution error listed.
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
        let (rules, errors) = self.index.rules_for(user, namespace);
        let mut info = RulesInfo {
            errors,
            ..RulesInfo::default()
        };
        for rule in rules {
            if !rule.resources.is_empty() {
                info.resource_rules.push(ResourceRule {
                    verbs: rule.verbs.clone(),
                    api_groups: rule.api_groups.clone(),
                    resources: rule.resources.clone(),
                    resource_names: rule.resource_names.clone(),
                });
            }
            if !rule.non_resource_urls.is_empty() {
                info.non_resource_rules.push(NonResourceRule {
                    verbs: rule.verbs,
                    non_resource_urls: rule.non_resource_urls,
                });
            }
        }
        info
    }
}

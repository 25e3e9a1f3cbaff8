//! The `AlwaysAllow` and `AlwaysDeny` authorization modes, as kube's `authorizerfactory`.
//!
//! Kube's `AlwaysDeny` answers *no opinion* with the reason "Everything is forbidden.", not an
//! explicit deny: in `--authorization-mode=AlwaysDeny,RBAC` RBAC is still asked, and alone it
//! ends in a 403 because nothing allowed the request. This one does the same.

use super::{Attributes, Authorizer, Decision, NonResourceRule, ResourceRule, RulesInfo};
use crate::user::UserInfo;

/// Allows every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysAllow;

#[async_trait::async_trait]
impl Authorizer for AlwaysAllow {
    fn name(&self) -> &'static str {
        "AlwaysAllow"
    }

    async fn authorize(&self, _attributes: &Attributes<'_>) -> Decision {
        Decision::Allow(String::new())
    }

    fn authorize_now(&self, _attributes: &Attributes<'_>) -> Option<Decision> {
        Some(Decision::Allow(String::new()))
    }

    /// Everything, as kube's `alwaysAllowAuthorizer.RulesFor`.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        let all = || vec!["*".to_string()];
        RulesInfo {
            resource_rules: vec![ResourceRule {
                verbs: all(),
                api_groups: all(),
                resources: all(),
                resource_names: Vec::new(),
            }],
            non_resource_rules: vec![NonResourceRule {
                verbs: all(),
                non_resource_urls: all(),
            }],
            incomplete: false,
            errors: Vec::new(),
        }
    }
}

/// Allows nothing (see the module documentation for why it is a no-opinion).
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysDeny;

/// The reason kube's `AlwaysDeny` gives.
pub const ALWAYS_DENY_REASON: &str = "Everything is forbidden.";

#[async_trait::async_trait]
impl Authorizer for AlwaysDeny {
    fn name(&self) -> &'static str {
        "AlwaysDeny"
    }

    async fn authorize(&self, _attributes: &Attributes<'_>) -> Decision {
        Decision::NoOpinion(ALWAYS_DENY_REASON.to_string())
    }

    fn authorize_now(&self, _attributes: &Attributes<'_>) -> Option<Decision> {
        Some(Decision::NoOpinion(ALWAYS_DENY_REASON.to_string()))
    }

    /// Nothing, and the list is complete (kube's `alwaysDenyAuthorizer.RulesFor`).
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_info::RequestInfo;
    use crate::user::UserInfo;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Runs a future that never waits on I/O (these authorizers answer at once).
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    #[test]
    fn always_allow_and_always_deny() {
        let user = UserInfo::new("bob", vec![]);
        let request = RequestInfo {
            verb: "get".into(),
            path: "/healthz".into(),
            ..RequestInfo::default()
        };
        let attributes = Attributes {
            user: &user,
            request: &request,
        };
        assert_eq!(
            block_on(AlwaysAllow.authorize(&attributes)),
            Decision::Allow(String::new())
        );
        let denied = block_on(AlwaysDeny.authorize(&attributes));
        assert_eq!(
            denied,
            Decision::NoOpinion("Everything is forbidden.".into())
        );
        assert!(!denied.is_allowed());
        assert_eq!(
            (AlwaysAllow.name(), AlwaysDeny.name()),
            ("AlwaysAllow", "AlwaysDeny")
        );
    }
}

//! Authorization: may this user do this verb on this resource or path?
//!
//! Each mode implements [`Authorizer`]; [`union::UnionAuthorizer`] asks them in the configured
//! order and returns the first allow or deny, as kube's `authorization/union` does.

pub mod abac;
pub mod always;
pub mod bootstrap_policy;
pub mod rbac;
pub mod union;
pub mod webhook;

use crate::quote::go_quote;
use crate::request_info::RequestInfo;
use crate::user::UserInfo;

/// kube's `sanitizer` for error messages: `&`, `<` and `>` as HTML entities.
pub fn sanitize_html(text: &str) -> String {
    if !text.contains(['&', '<', '>']) {
        return text.to_string();
    }
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What is being authorized: kube's `authorizer.Attributes`.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub request: &'a RequestInfo,
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny(String),
    NoOpinion(String),
    /// The decision could not be made (a webhook that could not be asked): kube's
    /// `(NoOpinion, reason, err)`, or, with `denied`, `(Deny, reason, err)` (a webhook that
    /// answered both allowed and denied), which ends the chain as a deny does. Unless a mode
    /// allows, the request is not forbidden but fails: kube's `WithAuthorization` answers
    /// 500 with the error.
    Failed {
        reason: String,
        error: String,
        denied: bool,
    },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// The reason given with the decision (empty when none).
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
            Decision::Failed { reason, .. } => reason,
        }
    }

    /// Why the decision could not be made, for a [`Decision::Failed`].
    pub fn error(&self) -> Option<&str> {
        match self {
            Decision::Failed { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// One authorization mode.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync {
    fn name(&self) -> &'static str;
    async fn authorize(&self, attributes: &Attributes<'_>) -> Decision;

    /// The decision if this mode can make it at once, without waiting on anything (RBAC,
    /// ABAC, the fixed modes); `None`: ask [`Authorizer::authorize`]. Lets the common case
    /// skip building and boxing a future per mode ([`authorize`] tries this first).
    fn authorize_now(&self, _attributes: &Attributes<'_>) -> Option<Decision> {
        None
    }

    /// What `user` may do in `namespace` (`""`: cluster-wide rules only), as kube's
    /// `authorizer.RuleResolver` answers `SelfSubjectRulesReview`. Modes that cannot list
    /// their rules (webhook) keep this default: nothing listed, and `incomplete`.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo {
            incomplete: true,
            ..RulesInfo::default()
        }
    }
}

/// Asks `authorizer`, at once when it can answer so ([`Authorizer::authorize_now`]).
pub async fn authorize(authorizer: &dyn Authorizer, attributes: &Attributes<'_>) -> Decision {
    match authorizer.authorize_now(attributes) {
        Some(decision) => decision,
        None => authorizer.authorize(attributes).await,
    }
}

/// A rule over resources, as `authorization.k8s.io/v1 ResourceRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
}

/// A rule over non-resource paths, as `authorization.k8s.io/v1 NonResourceRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NonResourceRule {
    pub verbs: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

/// The rules a user holds, with whether the list is known to be partial and the errors met
/// while resolving it (kube's `SubjectRulesReviewStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesInfo {
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
    pub incomplete: bool,
    pub errors: Vec<String>,
}

/// The `Forbidden` message kube-apiserver writes for a denied request, e.g.
/// `User "bob" cannot get resource "configmaps" in API group "" in the namespace "team-a"`:
/// names quoted as Go's `%q`, and `&`, `<` and `>` escaped as HTML entities (kube's
/// `sanitizer`, so that no error reads as markup; the reason is left as it is).
pub fn forbidden_message(attributes: &Attributes<'_>, reason: &str) -> String {
    let request = attributes.request;
    let user = go_quote(&attributes.user.name);
    let message = if request.is_resource_request {
        let resource = if request.subresource.is_empty() {
            go_quote(&request.resource)
        } else {
            go_quote(&format!("{}/{}", request.resource, request.subresource))
        };
        let mut m = format!(
            "User {user} cannot {} resource {resource} in API group {}",
            request.verb,
            go_quote(&request.api_group)
        );
        if request.namespace.is_empty() {
            m.push_str(" at the cluster scope");
        } else {
            m.push_str(" in the namespace ");
            m.push_str(&go_quote(&request.namespace));
        }
        m
    } else {
        format!(
            "User {user} cannot {} path {}",
            request.verb,
            go_quote(&request.path)
        )
    };
    let mut message = sanitize_html(&message);
    if !reason.is_empty() {
        message.push_str(": ");
        message.push_str(reason);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_quote_names_as_go_and_escape_markup() {
        let user = UserInfo::new("bob \"b\"", vec![]);
        let request = RequestInfo {
            is_resource_request: true,
            verb: "get".into(),
            resource: "configmaps".into(),
            namespace: "a<b>".into(),
            ..RequestInfo::default()
        };
        let attributes = Attributes {
            user: &user,
            request: &request,
        };
        // kube's sanitizer escapes the message, not the authorizer's reason after it.
        assert_eq!(
            forbidden_message(&attributes, "RBAC: <none>"),
            r#"User "bob \"b\"" cannot get resource "configmaps" in API group "" in the namespace "a&lt;b&gt;": RBAC: <none>"#
        );
        let request = RequestInfo {
            verb: "get".into(),
            path: "/foo<script>&x".into(),
            ..RequestInfo::default()
        };
        let attributes = Attributes {
            user: &user,
            request: &request,
        };
        assert_eq!(
            forbidden_message(&attributes, ""),
            r#"User "bob \"b\"" cannot get path "/foo&lt;script&gt;&amp;x""#
        );
    }
}

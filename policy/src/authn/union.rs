//! The authenticator chain, as kube's `authentication/request/union`: strategies are asked in
//! order and the first one that accepts a credential decides who the user is.
//!
//! Unlike kube's union (whose rejected credentials only become errors the caller may ignore),
//! a rejection here is kept: if nothing accepts the request, one rejected credential makes it a
//! 401 instead of letting it fall through to anonymous.

use std::sync::Arc;

use crate::user::UserInfo;

use super::{authenticate, Authenticator, AuthnOutcome, AuthnRequest};

/// Tries each authenticator in order; see the module documentation.
#[derive(Clone, Default)]
pub struct UnionAuthenticator {
    pub authenticators: Vec<Arc<dyn Authenticator>>,
}

impl UnionAuthenticator {
    pub fn new(authenticators: Vec<Arc<dyn Authenticator>>) -> Self {
        UnionAuthenticator { authenticators }
    }
}

impl std::fmt::Debug for UnionAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.authenticators.iter().map(|a| a.name()).collect();
        f.debug_struct("UnionAuthenticator")
            .field("authenticators", &names)
            .finish()
    }
}

#[async_trait::async_trait]
impl Authenticator for UnionAuthenticator {
    fn name(&self) -> &'static str {
        "union"
    }

    /// The first `Authenticated` wins and gains `system:authenticated` (kube's
    /// `AuthenticatedGroupAdder`); otherwise any `Failed` makes the result `Failed` with every
    /// failure aggregated as kube's `utilerrors.NewAggregate` prints them; otherwise
    /// `NoCredential`.
    async fn authenticate(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        let mut failures: Vec<String> = Vec::new();
        for authenticator in &self.authenticators {
            let outcome = authenticate(authenticator.as_ref(), request).await;
            if let Some(decided) = Self::take(outcome, &mut failures) {
                return decided;
            }
        }
        Self::outcome_of_failures(failures)
    }

    /// At once when every authenticator asked before the outcome answers at once;
    /// otherwise `None` (those asked so far are asked again by
    /// [`Authenticator::authenticate`], with the same answers).
    fn authenticate_now(&self, request: &AuthnRequest<'_>) -> Option<AuthnOutcome> {
        let mut failures: Vec<String> = Vec::new();
        for authenticator in &self.authenticators {
            let outcome = authenticator.authenticate_now(request)?;
            if let Some(decided) = Self::take(outcome, &mut failures) {
                return Some(decided);
            }
        }
        Some(Self::outcome_of_failures(failures))
    }
}

impl UnionAuthenticator {
    /// One authenticator's outcome: the union's, when it decides it; a failure is kept.
    fn take(outcome: AuthnOutcome, failures: &mut Vec<String>) -> Option<AuthnOutcome> {
        match outcome {
            AuthnOutcome::Authenticated(user) => Some(AuthnOutcome::Authenticated(
                UserInfo::shared_with_authenticated_group(user),
            )),
            AuthnOutcome::NoCredential => None,
            AuthnOutcome::Failed(message) => {
                if !failures.contains(&message) {
                    failures.push(message);
                }
                None
            }
        }
    }

    /// The outcome when no authenticator accepted the request.
    fn outcome_of_failures(failures: Vec<String>) -> AuthnOutcome {
        match failures.len() {
            0 => AuthnOutcome::NoCredential,
            1 => AuthnOutcome::Failed(failures.concat()),
            _ => AuthnOutcome::Failed(format!("[{}]", failures.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::{UserInfo, ALL_AUTHENTICATED, ANONYMOUS};
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

    /// Answers a fixed outcome and counts how often it was asked.
    struct Fixed {
        outcome: AuthnOutcome,
        calls: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Authenticator for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        async fn authenticate(&self, _request: &AuthnRequest<'_>) -> AuthnOutcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.outcome.clone()
        }
    }

    fn fixed(outcome: AuthnOutcome) -> Arc<Fixed> {
        Arc::new(Fixed {
            outcome,
            calls: AtomicUsize::new(0),
        })
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, groups.iter().map(|g| g.to_string()).collect())
    }

    fn run(chain: &[Arc<Fixed>]) -> AuthnOutcome {
        let union = UnionAuthenticator::new(
            chain
                .iter()
                .map(|a| a.clone() as Arc<dyn Authenticator>)
                .collect(),
        );
        let headers = http::HeaderMap::new();
        let request = AuthnRequest {
            headers: &headers,
            peer_certificate: None,
            token_memo: None,
        };
        block_on(union.authenticate(&request))
    }

    #[test]
    fn first_success_wins_and_gets_authenticated_group() {
        let none = fixed(AuthnOutcome::NoCredential);
        let alice = fixed(AuthnOutcome::Authenticated(Arc::new(user(
            "alice",
            &["dev"],
        ))));
        let bob = fixed(AuthnOutcome::Authenticated(Arc::new(user("bob", &[]))));
        assert_eq!(
            run(&[none.clone(), alice.clone(), bob.clone()]),
            AuthnOutcome::Authenticated(Arc::new(user("alice", &["dev", ALL_AUTHENTICATED])))
        );
        assert_eq!(none.calls.load(Ordering::SeqCst), 1);
        assert_eq!(alice.calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            bob.calls.load(Ordering::SeqCst),
            0,
            "later authenticators are not asked"
        );
    }

    #[test]
    fn success_after_a_failure_still_wins() {
        let failed = fixed(AuthnOutcome::Failed("bad token".into()));
        let alice = fixed(AuthnOutcome::Authenticated(Arc::new(user(
            "alice",
            &[ALL_AUTHENTICATED],
        ))));
        assert_eq!(
            run(&[failed, alice]),
            AuthnOutcome::Authenticated(Arc::new(user("alice", &[ALL_AUTHENTICATED]))),
            "the group is not added twice"
        );
    }

    #[test]
    fn anonymous_does_not_get_authenticated_group() {
        let anonymous = fixed(AuthnOutcome::Authenticated(Arc::new(UserInfo::anonymous())));
        match run(&[anonymous]) {
            AuthnOutcome::Authenticated(u) => {
                assert_eq!(u.name, ANONYMOUS);
                assert!(!u.in_group(ALL_AUTHENTICATED));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn failures_are_aggregated_when_nothing_succeeds() {
        let none = fixed(AuthnOutcome::NoCredential);
        let bad_token = fixed(AuthnOutcome::Failed("invalid bearer token".into()));
        let bad_cert = fixed(AuthnOutcome::Failed("empty common name".into()));
        assert_eq!(
            run(&[none.clone(), bad_token.clone(), none.clone()]),
            AuthnOutcome::Failed("invalid bearer token".into())
        );
        assert_eq!(
            run(&[bad_token.clone(), none, bad_cert, bad_token]),
            AuthnOutcome::Failed("[invalid bearer token, empty common name]".into())
        );
    }

    #[test]
    fn nothing_presented_is_no_credential() {
        let none = fixed(AuthnOutcome::NoCredential);
        assert_eq!(run(&[none.clone(), none]), AuthnOutcome::NoCredential);
        assert_eq!(run(&[]), AuthnOutcome::NoCredential);
    }

    #[test]
    fn a_union_authenticates_at_once_only_when_every_authenticator_it_asks_can() {
        let headers = http::HeaderMap::new();
        let request = AuthnRequest {
            headers: &headers,
            peer_certificate: None,
            token_memo: None,
        };
        // An authenticator that answers at once (as x509 and a cached token do).
        struct AtOnce;
        #[async_trait::async_trait]
        impl Authenticator for AtOnce {
            fn name(&self) -> &'static str {
                "at-once"
            }
            async fn authenticate(&self, _request: &AuthnRequest<'_>) -> AuthnOutcome {
                AuthnOutcome::NoCredential
            }
            fn authenticate_now(&self, _request: &AuthnRequest<'_>) -> Option<AuthnOutcome> {
                Some(AuthnOutcome::NoCredential)
            }
        }
        let at_once = Arc::new(AtOnce);
        let only_at_once = UnionAuthenticator::new(vec![at_once.clone() as Arc<dyn Authenticator>]);
        assert!(matches!(
            only_at_once.authenticate_now(&request),
            Some(AuthnOutcome::NoCredential)
        ));
        let waiting = fixed(AuthnOutcome::Authenticated(Arc::new(UserInfo::new(
            "alice",
            vec![],
        ))));
        let mixed = UnionAuthenticator::new(vec![
            at_once as Arc<dyn Authenticator>,
            waiting.clone() as Arc<dyn Authenticator>,
        ]);
        assert!(mixed.authenticate_now(&request).is_none());
        assert_eq!(waiting.calls.load(Ordering::SeqCst), 0);
        match block_on(authenticate(&mixed, &request)) {
            AuthnOutcome::Authenticated(user) => {
                assert_eq!(user.name, "alice");
                assert!(user.groups.iter().any(|g| g == ALL_AUTHENTICATED));
            }
            _ => panic!("alice should be authenticated"),
        }
        assert_eq!(waiting.calls.load(Ordering::SeqCst), 1);
    }
}

//! A connection's memo of which FlowSchema rules its user's subjects match, so that
//! classifying its next request only tests those rules against the request.
//!
//! Classification walks the FlowSchemas in matching order and, for every rule set, first
//! tests the user against the subjects (user names, groups, ServiceAccounts), then the request
//! against the resource or non-resource rules. The subject half depends only on the user and
//! the configuration, and a connection's requests nearly always come from one user: the memo
//! keeps the rule sets whose subjects matched, in matching order, for the configuration and
//! user it was computed for. A request of another user (compared by name and groups, the only
//! fields subjects read) or under another configuration recomputes it. The request half is
//! evaluated for every request, so the answer is always the one the full walk gives.
//!
//! It also keeps the flow hash of the last schema matched when that hash depends on nothing
//! but the schema and the user (a `ByUser` distinguisher, or none).

use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use crate::user::UserInfo;

/// The position of one rule set: `(flow schema index in the configuration, rules index in
/// that schema)`.
pub(crate) type RulesRef = (usize, usize);

/// What one connection remembers of the last user it classified; see the module
/// documentation. Give each connection its own and pass it with every request of that
/// connection (HTTP/2 streams share it; one that finds it busy classifies without it).
#[derive(Default)]
pub struct ClassificationMemo {
    last: Mutex<Option<Remembered>>,
}

impl std::fmt::Debug for ClassificationMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassificationMemo").finish_non_exhaustive()
    }
}

struct Remembered {
    /// The configuration the candidates index into.
    generation: u64,
    /// The user they were computed for; kept so that the same `Arc` is recognised at once.
    user: Arc<UserInfo>,
    /// Every rule set whose subjects match the user, in matching order.
    candidates: Vec<RulesRef>,
    /// The last user-only flow: (flow schema index, flow hash).
    user_flow: Option<(usize, u64)>,
}

impl Remembered {
    fn answers(&self, generation: u64, user: &Arc<UserInfo>) -> bool {
        self.generation == generation
            && (Arc::ptr_eq(&self.user, user)
                || (self.user.name == user.name && self.user.groups == user.groups))
    }
}

impl ClassificationMemo {
    /// Calls `choose` with the rule sets whose subjects match `user` under configuration
    /// `generation`, computing them with `compute` unless remembered, and the remembered
    /// user-only flow, which `choose` may read and replace. `None` when another stream of the
    /// connection holds the memo: the caller classifies without it.
    pub(crate) fn with_candidates<R>(
        &self,
        generation: u64,
        user: &Arc<UserInfo>,
        compute: impl FnOnce() -> Vec<RulesRef>,
        choose: impl FnOnce(&[RulesRef], &mut Option<(usize, u64)>) -> R,
    ) -> Option<R> {
        let mut last = match self.last.try_lock() {
            Ok(last) => last,
            // A panic while it was held left a whole value: it is replaced or reused.
            Err(TryLockError::Poisoned(poisoned)) => PoisonError::into_inner(poisoned),
            Err(TryLockError::WouldBlock) => return None,
        };
        if !last.as_ref().is_some_and(|r| r.answers(generation, user)) {
            *last = Some(Remembered {
                generation,
                user: user.clone(),
                candidates: compute(),
                user_flow: None,
            });
        }
        last.as_mut()
            .map(|remembered| choose(&remembered.candidates, &mut remembered.user_flow))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> Arc<UserInfo> {
        Arc::new(UserInfo::new(
            name,
            groups.iter().map(|g| g.to_string()).collect(),
        ))
    }

    #[test]
    fn computes_once_per_user_and_generation() {
        let memo = ClassificationMemo::default();
        let jane = user("jane", &["dev"]);
        let mut computed = 0;
        let mut ask = |generation: u64, who: &Arc<UserInfo>, answer: Vec<RulesRef>| {
            memo.with_candidates(
                generation,
                who,
                || {
                    computed += 1;
                    answer
                },
                |c, _| c.to_vec(),
            )
        };
        assert_eq!(ask(1, &jane, vec![(0, 0)]), Some(vec![(0, 0)]));
        // Remembered: what `compute` would say now is not asked.
        assert_eq!(ask(1, &jane, vec![(9, 9)]), Some(vec![(0, 0)]));
        // Another copy of the same identity is the same user.
        assert_eq!(
            ask(1, &user("jane", &["dev"]), vec![(9, 9)]),
            Some(vec![(0, 0)])
        );
        // Another configuration, another name or other groups: computed again.
        assert_eq!(ask(2, &jane, vec![(1, 0)]), Some(vec![(1, 0)]));
        assert_eq!(
            ask(2, &user("joe", &["dev"]), vec![(2, 0)]),
            Some(vec![(2, 0)])
        );
        assert_eq!(
            ask(2, &user("joe", &["dev", "ops"]), vec![(3, 1)]),
            Some(vec![(3, 1)])
        );
        assert_eq!(computed, 4);
    }

    #[test]
    fn a_busy_memo_is_not_waited_for() {
        let memo = ClassificationMemo::default();
        let jane = user("jane", &[]);
        let held = memo.last.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(
            memo.with_candidates(1, &jane, Vec::new, |c, _| c.len()),
            None
        );
        drop(held);
        assert_eq!(
            memo.with_candidates(1, &jane, Vec::new, |c, _| c.len()),
            Some(0)
        );
    }

    #[test]
    fn the_user_flow_is_forgotten_with_the_user() {
        let memo = ClassificationMemo::default();
        let (jane, joe) = (user("jane", &[]), user("joe", &[]));
        let flow = |who: &Arc<UserInfo>, generation: u64, set: Option<(usize, u64)>| {
            memo.with_candidates(generation, who, Vec::new, |_, flow| {
                let was = *flow;
                if set.is_some() {
                    *flow = set;
                }
                was
            })
        };
        assert_eq!(flow(&jane, 1, Some((3, 42))), Some(None));
        assert_eq!(flow(&jane, 1, None), Some(Some((3, 42))));
        assert_eq!(flow(&joe, 1, None), Some(None));
        flow(&joe, 1, Some((3, 7)));
        assert_eq!(flow(&joe, 2, None), Some(None));
    }
}

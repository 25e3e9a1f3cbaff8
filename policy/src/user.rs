//! The authenticated identity of a request, as kube's `user.Info`: name, uid, groups, extra.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

/// Group every authenticated user belongs to.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// Group of anonymous requests.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The superuser group: always allowed by the authorizer chain.
pub const SYSTEM_PRIVILEGED_GROUP: &str = "system:masters";
/// Anonymous user name.
pub const ANONYMOUS: &str = "system:anonymous";

/// Who a request comes from, after authentication (and, later, impersonation).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups, no uid or extra.
    pub fn new(name: impl Into<String>, groups: Vec<String>) -> Self {
        UserInfo {
            name: name.into(),
            groups,
            ..Default::default()
        }
    }

    /// The anonymous identity (`system:anonymous`, group `system:unauthenticated`).
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS, vec![ALL_UNAUTHENTICATED.to_string()])
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Adds `system:authenticated` as kube's `AuthenticatedGroupAdder`: unless the user is
    /// `system:anonymous` or already has `system:authenticated` or `system:unauthenticated`,
    /// so a credential whose groups say unauthenticated does not pick up what is bound to every
    /// authenticated user.
    pub fn with_authenticated_group(mut self) -> Self {
        if self.needs_authenticated_group() {
            self.groups.push(ALL_AUTHENTICATED.to_string());
        }
        self
    }

    fn needs_authenticated_group(&self) -> bool {
        // Where the adder puts it: a user that went through it once is recognised at once
        // (a cached token's user goes through it again with every request).
        if self.groups.last().is_some_and(|g| g == ALL_AUTHENTICATED) {
            return false;
        }
        self.name != ANONYMOUS
            && !self
                .groups
                .iter()
                .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED)
    }

    /// [`UserInfo::with_authenticated_group`] for a shared user: the same `Arc` when the group
    /// is already there (a cached token's user always has it), so a hit copies nothing.
    pub fn shared_with_authenticated_group(user: Arc<UserInfo>) -> Arc<UserInfo> {
        if user.needs_authenticated_group() {
            Arc::new(Arc::unwrap_or_clone(user).with_authenticated_group())
        } else {
            user
        }
    }

    /// The anonymous identity, shared: requests without credentials all point at one copy.
    pub fn shared_anonymous() -> Arc<UserInfo> {
        static ANONYMOUS_USER: LazyLock<Arc<UserInfo>> =
            LazyLock::new(|| Arc::new(UserInfo::anonymous()));
        ANONYMOUS_USER.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_user_with_the_group_is_handed_on_as_it_is() {
        let cached = Arc::new(UserInfo::new(
            "alice",
            vec!["dev".into(), ALL_AUTHENTICATED.into()],
        ));
        let same = UserInfo::shared_with_authenticated_group(cached.clone());
        assert!(Arc::ptr_eq(&same, &cached), "no copy when nothing is added");

        let fresh = Arc::new(UserInfo::new("bob", vec!["dev".into()]));
        let grown = UserInfo::shared_with_authenticated_group(fresh.clone());
        assert_eq!(grown.groups, ["dev", ALL_AUTHENTICATED]);
        assert_eq!(fresh.groups, ["dev"], "the shared original is left alone");

        let anonymous = UserInfo::shared_with_authenticated_group(UserInfo::shared_anonymous());
        assert_eq!(anonymous.groups, [ALL_UNAUTHENTICATED]);
        assert!(Arc::ptr_eq(&anonymous, &UserInfo::shared_anonymous()));
    }

    #[test]
    fn the_authenticated_group_is_added_as_kubes_group_adder_does() {
        let groups = |user: UserInfo| user.with_authenticated_group().groups;
        assert_eq!(groups(UserInfo::new("alice", vec![])), [ALL_AUTHENTICATED]);
        // A credential that says it is unauthenticated stays so, whatever its name.
        assert_eq!(
            groups(UserInfo::new(
                "proxy-user",
                vec![ALL_UNAUTHENTICATED.into()]
            )),
            [ALL_UNAUTHENTICATED]
        );
        // The anonymous name gets nothing, even without the unauthenticated group.
        assert!(groups(UserInfo::new(ANONYMOUS, vec![])).is_empty());
        assert_eq!(
            groups(UserInfo::new("bob", vec![ALL_AUTHENTICATED.into()])),
            [ALL_AUTHENTICATED]
        );
    }
}

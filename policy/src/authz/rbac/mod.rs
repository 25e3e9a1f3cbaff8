//! RBAC authorization: kube-apiserver's `RBAC` authorizer over Roles, ClusterRoles,
//! RoleBindings and ClusterRoleBindings held in memory.
//!
//! Use: keep an [`RbacIndex`] current from watch events ([`RbacIndex::reset`] on list,
//! [`RbacIndex::upsert`] / [`RbacIndex::remove`] per event) and hand an `Arc` of it to
//! [`RbacAuthorizer::new`]. Decisions look only at the bindings naming the user, its groups
//! or its ServiceAccount, and resolve role rules at decision time.
//!
//! - [`types`]: the rbac.authorization.k8s.io/v1 shapes ([`PolicyRule`], [`Subject`],
//!   [`RoleRef`]) and [`compact_string`].
//! - [`evaluation`]: does one rule allow one request ([`rule_allows`]).
//! - [`index`]: the store and kube's rule resolver ([`RbacIndex`]).
//! - [`authorizer`]: the [`Authorizer`](crate::authz::Authorizer) ([`RbacAuthorizer`]), which
//!   remembers recent decisions until the index changes (`decision_cache`).
//! - [`policy_comparator`]: does one rule set cover another ([`covers`]).
//! - [`escalation`]: may a user grant these rules ([`confirm_no_escalation`]).

mod decision_cache;

pub mod authorizer;
pub mod escalation;
pub mod evaluation;
pub mod index;
pub mod policy_comparator;
pub mod types;

#[cfg(test)]
mod tests;

pub use authorizer::RbacAuthorizer;
pub use escalation::confirm_no_escalation;
pub use evaluation::rule_allows;
pub use index::RbacIndex;
pub use policy_comparator::covers;
pub use types::{compact_string, PolicyRule, RbacKind, RoleRef, Subject};

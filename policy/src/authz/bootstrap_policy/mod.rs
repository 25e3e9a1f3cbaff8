//! kube-apiserver's RBAC bootstrap policy: the default ClusterRoles and ClusterRoleBindings
//! and the Roles and RoleBindings of `kube-system` and `kube-public` it writes at start-up,
//! the rules it uses to fold them into what is already stored, and the ClusterRole aggregation
//! that fills `admin`, `edit` and `view` — all pure functions over `serde_json::Value`
//! objects, so the caller owns reads, writes and retries.
//!
//! - [`policy`]: the objects ([`cluster_roles`], [`cluster_role_bindings`]), as kube's
//!   `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go` builds them.
//! - [`namespace_policy`]: the namespaced objects ([`namespace_roles`],
//!   [`namespace_role_bindings`]), as kube's `bootstrappolicy/namespace_policy.go` builds them.
//! - [`reconciliation`]: what to write so a stored object carries the bootstrap one
//!   ([`reconcile_cluster_role`], [`reconcile_cluster_role_binding`], [`reconcile_role`],
//!   [`reconcile_role_binding`]), as kube's `pkg/registry/rbac/reconciliation` does at
//!   start-up (add, never remove).
//! - [`clusterroleaggregation`]: the rules an aggregated ClusterRole should hold
//!   ([`aggregated_rules`]), as kube's ClusterRole aggregation controller computes them.
//! - [`label_selector`]: `metav1.LabelSelector` matching ([`label_selector_matches`]).
//!
//! Use at start-up: for each of [`cluster_roles`], read the stored object and write what
//! [`reconcile_cluster_role`] returns (create when nothing was stored, else a CAS update);
//! likewise for bindings, and for [`namespace_roles`] and [`namespace_role_bindings`] with
//! [`reconcile_role`] and [`reconcile_role_binding`] in each object's namespace. Then,
//! whenever ClusterRoles change, write [`aggregated_rules`] into every ClusterRole that has an
//! `aggregationRule`.

pub mod clusterroleaggregation;
pub mod label_selector;
pub mod namespace_policy;
mod objects;
pub mod policy;
pub mod reconciliation;

pub use clusterroleaggregation::aggregated_rules;
pub use label_selector::label_selector_matches;
pub use namespace_policy::{
    namespace_role_bindings, namespace_roles, NAMESPACE_PUBLIC, NAMESPACE_SYSTEM,
};
pub use policy::{
    cluster_role_bindings, cluster_roles, AGGREGATE_TO_ADMIN_LABEL, AGGREGATE_TO_EDIT_LABEL,
    AGGREGATE_TO_VIEW_LABEL, AUTOUPDATE_ANNOTATION, BOOTSTRAPPING_LABEL, BOOTSTRAPPING_VALUE,
};
pub use reconciliation::{
    reconcile_cluster_role, reconcile_cluster_role_binding, reconcile_role, reconcile_role_binding,
    Reconciled,
};

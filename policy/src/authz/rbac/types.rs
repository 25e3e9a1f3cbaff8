//! The rbac.authorization.k8s.io/v1 shapes RBAC works with: [`PolicyRule`], [`Subject`],
//! [`RoleRef`], the four object kinds, and kube's `CompactString` for rules in messages.

use serde::{Deserialize, Deserializer, Serialize};

use crate::quote::{go_quote, go_quote_list};

/// The four RBAC object kinds the index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RbacKind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl RbacKind {
    /// Every kind, in the order a relist usually brings them.
    pub const ALL: [RbacKind; 4] = [
        RbacKind::Role,
        RbacKind::ClusterRole,
        RbacKind::RoleBinding,
        RbacKind::ClusterRoleBinding,
    ];

    /// The resource name in rbac.authorization.k8s.io/v1 (`roles`, `clusterrolebindings`...).
    pub fn plural(&self) -> &'static str {
        match self {
            RbacKind::Role => "roles",
            RbacKind::ClusterRole => "clusterroles",
            RbacKind::RoleBinding => "rolebindings",
            RbacKind::ClusterRoleBinding => "clusterrolebindings",
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn is_namespaced(&self) -> bool {
        matches!(self, RbacKind::Role | RbacKind::RoleBinding)
    }
}

/// What a role allows: kube's `rbacv1.PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    // kube serializes `verbs` without omitempty; the others are omitempty.
    #[serde(default, deserialize_with = "null_as_default")]
    pub verbs: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_groups: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_names: Vec<String>,
    #[serde(
        rename = "nonResourceURLs",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// Who a binding grants to: kube's `rbacv1.Subject` (`User`, `Group` or `ServiceAccount`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_group: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
}

/// Which role a binding grants: kube's `rbacv1.RoleRef` (`Role` or `ClusterRole`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    #[serde(default, deserialize_with = "null_as_default")]
    pub api_group: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
}

/// Go's JSON decoder leaves a field at its zero value for `null` (kube stores aggregated
/// ClusterRoles with `"rules": null`), where serde's `default` alone would reject it.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// kube's `rbacv1helpers.CompactString`: the non-empty fields in the order APIGroups,
/// Resources, NonResourceURLs, ResourceNames, Verbs, each as Go's `%q` of a string slice, e.g.
/// `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let fields: [(&str, &Vec<String>); 5] = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ];
    let parts: Vec<String> = fields
        .iter()
        .filter(|(_, values)| !values.is_empty())
        .map(|(label, values)| format!("{label}:{}", go_quote_list(values)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// kube's `NewNotFound(rbacv1.Resource(resource), name).Error()`.
pub(crate) fn not_found(resource: &str, name: &str) -> String {
    format!(
        "{resource}.rbac.authorization.k8s.io {} not found",
        go_quote(name)
    )
}

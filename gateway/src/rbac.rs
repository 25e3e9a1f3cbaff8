//! RBAC beside the request path: the authorizer's in-memory index kept current from the watch
//! cache, the bootstrap policy reconciled at start, the ClusterRole aggregation controller,
//! and the escalation checks on writes of roles and bindings (kube's `policybased` storage).

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::registry::Registry;
use kubegate_backends::resource::WriteAdmission;
use kubegate_backends::storage::cacher::CacheEventKind;
use kubegate_backends::{ApiError, ApiResult, GroupResource, ResourceDef};
use kubegate_policy::authz::bootstrap_policy::{self, Reconciled};
use kubegate_policy::authz::rbac::{
    confirm_no_escalation, PolicyRule, RbacIndex, RbacKind, RoleRef,
};
use kubegate_policy::user::SYSTEM_PRIVILEGED_GROUP;
use kubegate_policy::{Attributes, Authorizer, RequestInfo, UserInfo};
use serde_json::Value;

const GROUP: &str = "rbac.authorization.k8s.io";
/// Where every RBAC kind is stored: one watch covers all four.
const STORAGE_PREFIX: &str = "/rbac.authorization.k8s.io/";
/// How long the aggregation controller lets ClusterRole changes settle before recomputing.
const AGGREGATION_SETTLE: Duration = Duration::from_millis(50);
/// How often aggregation is recomputed when nothing wakes it.
const AGGREGATION_RESYNC: Duration = Duration::from_secs(30);

/// The kind and `(namespace, name)` of an RBAC storage key
/// (`/rbac.authorization.k8s.io/<plural>[/<namespace>]/<name>`).
fn key_parts(key: &str) -> Option<(RbacKind, &str, &str)> {
    let rest = key.strip_prefix(STORAGE_PREFIX)?;
    let mut segments = rest.split('/');
    let plural = segments.next()?;
    let kind = RbacKind::ALL.into_iter().find(|k| k.plural() == plural)?;
    let (namespace, name) = match (segments.next(), segments.next()) {
        (Some(ns), Some(name)) => (ns, name),
        (Some(name), None) => ("", name),
        _ => return None,
    };
    Some((kind, namespace, name))
}

/// Loads every stored RBAC object into `index` from the watch cache and returns the watch
/// that keeps it current from exactly that point; [`follow`] consumes it.
pub fn load(
    registry: &Registry,
    index: &RbacIndex,
) -> kubegate_backends::storage::cacher::CacheWatcher {
    let (items, revision, watcher) = registry.cacher().list_and_watch(STORAGE_PREFIX);
    let mut objects = Vec::with_capacity(items.len());
    for item in items {
        let Some((kind, _, _)) = key_parts(&item.key) else {
            continue;
        };
        match serde_json::from_slice::<Value>(&item.bytes) {
            Ok(object) => objects.push((kind, object)),
            Err(e) => tracing::warn!(key = %item.key, error = %e, "unreadable RBAC object"),
        }
    }
    let count = objects.len();
    index.reset(objects);
    tracing::debug!(objects = count, revision, "RBAC index loaded");
    watcher
}

/// Applies watch events to `index` until `stop`; re-lists when the watch ends (the cache
/// re-listed, or this watcher fell behind).
pub async fn follow(
    registry: Arc<Registry>,
    index: Arc<RbacIndex>,
    mut watcher: kubegate_backends::storage::cacher::CacheWatcher,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let event = tokio::select! {
            event = watcher.next() => event,
            _ = stop.changed() => return,
        };
        match event {
            Some(Ok(event)) => {
                let Some((kind, namespace, name)) = key_parts(&event.object.key) else {
                    continue;
                };
                if event.kind == CacheEventKind::Deleted {
                    index.remove(kind, namespace, name);
                    continue;
                }
                match serde_json::from_slice::<Value>(&event.object.bytes) {
                    Ok(object) => index.upsert(kind, &object),
                    Err(e) => {
                        tracing::warn!(key = %event.object.key, error = %e, "unreadable RBAC object")
                    }
                }
            }
            Some(Err(e)) => {
                tracing::info!(error = %e, "RBAC watch ended; re-listing");
                watcher = load(&registry, &index);
            }
            None => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                watcher = load(&registry, &index);
            }
        }
    }
}

fn def<'a>(registry: &'a Registry, plural: &str) -> Result<&'a Arc<ResourceDef>, String> {
    registry
        .find(GROUP, plural)
        .ok_or_else(|| format!("{plural}.{GROUP} is not served"))
}

fn stored(registry: &Registry, def: &ResourceDef, name: &str) -> Option<Value> {
    let cached = registry.cacher().get(&def.key("", name))?;
    serde_json::from_slice(&cached.bytes).ok()
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Writes `object` over the stored one, keeping it only if nothing changed it in between
/// (its resourceVersion is the precondition).
async fn replace(registry: &Registry, def: &ResourceDef, object: Value) -> ApiResult<Value> {
    let name = name_of(&object).to_string();
    registry
        .update_internal(def, "", &name, |_| Ok(object.clone()))
        .await
}

/// Reconciles the bootstrap ClusterRoles and ClusterRoleBindings as kube-apiserver's
/// `rbac/bootstrap-roles` post-start hook does: missing ones are created, missing rules,
/// subjects, labels and annotations are added back, users' additions stay, and objects
/// annotated `rbac.authorization.kubernetes.io/autoupdate: "false"` are left alone.
pub async fn reconcile_bootstrap_policy(registry: &Registry) -> Result<(), String> {
    let roles = def(registry, "clusterroles")?;
    for expected in bootstrap_policy::cluster_roles() {
        let name = name_of(&expected).to_string();
        let existing = stored(registry, roles, &name);
        let Some(object) = bootstrap_policy::reconcile_cluster_role(existing.as_ref(), &expected)
        else {
            continue;
        };
        let result = match existing {
            None => registry.create_internal(roles, object).await,
            Some(_) => replace(registry, roles, object).await,
        };
        match result {
            Ok(_) => tracing::info!(clusterrole = %name, "reconciled bootstrap ClusterRole"),
            Err(e) => return Err(format!("clusterrole {name}: {}", e.message)),
        }
    }
    let bindings = def(registry, "clusterrolebindings")?;
    for expected in bootstrap_policy::cluster_role_bindings() {
        let name = name_of(&expected).to_string();
        let existing = stored(registry, bindings, &name);
        let result =
            match bootstrap_policy::reconcile_cluster_role_binding(existing.as_ref(), &expected) {
                None => continue,
                Some(Reconciled::Write(object)) if existing.is_none() => {
                    registry.create_internal(bindings, object).await
                }
                Some(Reconciled::Write(object)) => replace(registry, bindings, object).await,
                Some(Reconciled::Recreate(object)) => {
                    match registry.delete_internal(bindings, "", &name).await {
                        Ok(()) => {}
                        Err(e) if e.code == 404 => {}
                        Err(e) => return Err(format!("clusterrolebinding {name}: {}", e.message)),
                    }
                    registry.create_internal(bindings, object).await
                }
            };
        match result {
            Ok(_) => {
                tracing::info!(clusterrolebinding = %name, "reconciled bootstrap ClusterRoleBinding")
            }
            Err(e) => return Err(format!("clusterrolebinding {name}: {}", e.message)),
        }
    }
    Ok(())
}

/// How many aggregation passes one recomputation may take: roles aggregate roles that are
/// themselves aggregated (`view` into `edit` into `admin`), so each pass can uncover the next.
const MAX_AGGREGATION_PASSES: usize = 8;

/// Recomputes the rules of every aggregated ClusterRole and writes those that changed.
/// Chains are followed in memory to a fixed point first, so `admin` gets `view`'s rules in
/// the same call that gives them to `view`.
pub async fn aggregate_cluster_roles(registry: &Registry) -> Result<(), String> {
    let roles = def(registry, "clusterroles")?;
    let (mut all, _) = registry.list_internal(roles).await.map_err(|e| e.message)?;
    let mut changed: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for _ in 0..MAX_AGGREGATION_PASSES {
        let mut pass_changed = false;
        for i in 0..all.len() {
            let Some(rules) = bootstrap_policy::aggregated_rules(&all[i], &all) else {
                continue;
            };
            if let Some(map) = all[i].as_object_mut() {
                map.insert("rules".into(), Value::Array(rules.clone()));
            }
            changed.insert(name_of(&all[i]).to_string(), rules);
            pass_changed = true;
        }
        if !pass_changed {
            break;
        }
    }
    for (name, rules) in changed {
        let result = registry
            .update_internal(roles, "", &name, |current| {
                let mut updated = current.clone();
                if let Some(map) = updated.as_object_mut() {
                    map.insert("rules".into(), Value::Array(rules.clone()));
                }
                Ok(updated)
            })
            .await;
        match result {
            Ok(_) => tracing::debug!(clusterrole = %name, "aggregated ClusterRole rules"),
            // Deleted meanwhile, or changed: the next event brings another pass.
            Err(e) => {
                tracing::info!(clusterrole = %name, error = %e.message, "aggregating ClusterRole")
            }
        }
    }
    Ok(())
}

/// kube-controller-manager's ClusterRole aggregation controller, in-process: whenever a
/// ClusterRole changes, the rules of every ClusterRole with an `aggregationRule` are
/// recomputed from the ClusterRoles its selectors match.
pub async fn aggregation_controller(
    registry: Arc<Registry>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let prefix = match def(&registry, "clusterroles") {
        Ok(d) => d.collection_prefix(""),
        Err(e) => {
            tracing::error!(error = %e, "ClusterRole aggregation disabled");
            return;
        }
    };
    loop {
        let mut watcher = registry
            .cacher()
            .watch(&prefix, registry.cacher().revision())
            .ok();
        if let Err(e) = aggregate_cluster_roles(&registry).await {
            tracing::warn!(error = %e, "aggregating ClusterRoles");
        }
        let wake = async {
            match watcher.as_mut() {
                Some(w) => {
                    let _ = w.next().await;
                    // Let a burst of changes (e.g. `kubectl apply` of several roles) land.
                    tokio::time::sleep(AGGREGATION_SETTLE).await;
                }
                None => tokio::time::sleep(AGGREGATION_RESYNC).await,
            }
        };
        tokio::select! {
            _ = wake => {}
            _ = tokio::time::sleep(AGGREGATION_RESYNC) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Everything: what kube requires before an `aggregationRule` may be set.
fn full_authority() -> Vec<PolicyRule> {
    let all = || vec!["*".to_string()];
    vec![
        PolicyRule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: all(),
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// kube's `EscalationAllowed`: the superuser group may write any role or binding.
fn escalation_allowed(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == SYSTEM_PRIVILEGED_GROUP)
}

/// What an escalation check asks the authorizer: may the writer `verb` the role `name`?
struct RoleCheck<'a> {
    verb: &'a str,
    api_group: &'a str,
    /// kube asks `escalate` with version `*` and `bind` with none.
    api_version: &'a str,
    resource: &'a str,
    namespace: &'a str,
    name: &'a str,
}

/// Is `user` allowed what `check` asks, by the whole authorizer chain?
async fn authorized(authorizer: &dyn Authorizer, user: &UserInfo, check: RoleCheck<'_>) -> bool {
    let request = RequestInfo {
        is_resource_request: true,
        verb: check.verb.to_string(),
        api_group: check.api_group.to_string(),
        api_version: check.api_version.to_string(),
        namespace: check.namespace.to_string(),
        resource: check.resource.to_string(),
        name: check.name.to_string(),
        ..RequestInfo::default()
    };
    authorizer
        .authorize(&Attributes {
            user,
            request: &request,
        })
        .await
        .is_allowed()
}

/// Only the fields the garbage collector changes differ (kube's `IsOnlyMutatingGCFields`).
fn only_gc_fields_changed(object: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "ownerReferences",
                "finalizers",
                "resourceVersion",
                "managedFields",
            ] {
                meta.remove(field);
            }
        }
        v
    };
    strip(object) == strip(old)
}

fn rules_of(object: &Value) -> Vec<PolicyRule> {
    object
        .get("rules")
        .cloned()
        .and_then(|r| serde_json::from_value(r).ok())
        .unwrap_or_default()
}

fn namespace_of(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Escalation prevention for Roles and ClusterRoles: the writer must hold every rule it
/// grants, or have `escalate` on the role (kube's `role/policybased` and
/// `clusterrole/policybased` storage).
pub struct RoleEscalationCheck {
    pub index: Arc<RbacIndex>,
    pub authorizer: Arc<dyn Authorizer>,
    /// `roles` or `clusterroles`.
    pub resource: &'static str,
}

#[async_trait::async_trait]
impl WriteAdmission for RoleEscalationCheck {
    async fn admit(&self, user: &UserInfo, object: &Value, old: Option<&Value>) -> ApiResult<()> {
        if escalation_allowed(user) {
            return Ok(());
        }
        if let Some(old) = old {
            if only_gc_fields_changed(object, old) {
                return Ok(());
            }
        }
        let namespace = namespace_of(object);
        let name = name_of(object);
        // kube asks with the request's name: empty on create (a POST to the collection).
        let asked_name = if old.is_some() { name } else { "" };
        let check = RoleCheck {
            verb: "escalate",
            api_group: GROUP,
            api_version: "*",
            resource: self.resource,
            namespace,
            name: asked_name,
        };
        if authorized(self.authorizer.as_ref(), user, check).await {
            return Ok(());
        }
        let gr = GroupResource::new(GROUP.to_string(), self.resource.to_string());
        confirm_no_escalation(&self.index, user, namespace, &rules_of(object))
            .map_err(|why| ApiError::forbidden_resource(&gr, name, &why))?;
        let aggregated = |v: &Value| v.get("aggregationRule").is_some_and(|a| !a.is_null());
        if self.resource == "clusterroles"
            && (aggregated(object) || old.is_some_and(aggregated))
            && confirm_no_escalation(&self.index, user, "", &full_authority()).is_err()
        {
            return Err(ApiError::forbidden_resource(
                &gr,
                name,
                "must have cluster-admin privileges to use the aggregationRule",
            ));
        }
        Ok(())
    }
}

/// Escalation prevention for RoleBindings and ClusterRoleBindings: the writer must have `bind`
/// on the referenced role or hold every rule in it (kube's `rolebinding/policybased` and
/// `clusterrolebinding/policybased` storage).
pub struct BindingEscalationCheck {
    pub index: Arc<RbacIndex>,
    pub authorizer: Arc<dyn Authorizer>,
    /// `rolebindings` or `clusterrolebindings`.
    pub resource: &'static str,
}

#[async_trait::async_trait]
impl WriteAdmission for BindingEscalationCheck {
    async fn admit(&self, user: &UserInfo, object: &Value, old: Option<&Value>) -> ApiResult<()> {
        if escalation_allowed(user) {
            return Ok(());
        }
        if let Some(old) = old {
            if only_gc_fields_changed(object, old) {
                return Ok(());
            }
        }
        let namespace = namespace_of(object);
        let name = name_of(object);
        let gr = GroupResource::new(GROUP.to_string(), self.resource.to_string());
        let role_ref: RoleRef = object
            .get("roleRef")
            .cloned()
            .and_then(|r| serde_json::from_value(r).ok())
            .unwrap_or_default();
        let role_resource = if role_ref.kind == "ClusterRole" {
            "clusterroles"
        } else {
            "roles"
        };
        // The namespace asked about is the binding's, not the role's (kube's
        // `BindingAuthorized`), and the group is the roleRef's.
        let check = RoleCheck {
            verb: "bind",
            api_group: &role_ref.api_group,
            api_version: "",
            resource: role_resource,
            namespace,
            name: &role_ref.name,
        };
        if authorized(self.authorizer.as_ref(), user, check).await {
            return Ok(());
        }
        // A missing role is kube's 404 from reading it (`roles.rbac.authorization.k8s.io "x"
        // not found`), not a 403.
        let rules = self
            .index
            .role_ref_rules(&role_ref, namespace)
            .map_err(|_| {
                let roles = GroupResource::new(GROUP.to_string(), role_resource.to_string());
                ApiError::not_found(&roles, &role_ref.name)
            })?;
        confirm_no_escalation(&self.index, user, namespace, &rules)
            .map_err(|why| ApiError::forbidden_resource(&gr, name, &why))
    }
}

/// Attaches the escalation checks to the RBAC resources among `resources`.
pub fn guard_writes(
    resources: &mut [ResourceDef],
    index: &Arc<RbacIndex>,
    authorizer: &Arc<dyn Authorizer>,
) {
    for def in resources.iter_mut().filter(|d| d.group == GROUP) {
        let admission: Arc<dyn WriteAdmission> = match def.plural.as_str() {
            "roles" => Arc::new(RoleEscalationCheck {
                index: index.clone(),
                authorizer: authorizer.clone(),
                resource: "roles",
            }),
            "clusterroles" => Arc::new(RoleEscalationCheck {
                index: index.clone(),
                authorizer: authorizer.clone(),
                resource: "clusterroles",
            }),
            "rolebindings" => Arc::new(BindingEscalationCheck {
                index: index.clone(),
                authorizer: authorizer.clone(),
                resource: "rolebindings",
            }),
            "clusterrolebindings" => Arc::new(BindingEscalationCheck {
                index: index.clone(),
                authorizer: authorizer.clone(),
                resource: "clusterrolebindings",
            }),
            _ => continue,
        };
        def.admission = Some(admission);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_name_kind_namespace_and_name() {
        assert_eq!(
            key_parts("/rbac.authorization.k8s.io/rolebindings/team-a/view"),
            Some((RbacKind::RoleBinding, "team-a", "view"))
        );
        assert_eq!(
            key_parts("/rbac.authorization.k8s.io/clusterroles/admin"),
            Some((RbacKind::ClusterRole, "", "admin"))
        );
        assert_eq!(key_parts("/core/configmaps/a/b"), None);
        assert_eq!(key_parts("/rbac.authorization.k8s.io/other/x"), None);
    }

    #[test]
    fn gc_field_changes_are_not_escalations() {
        let old =
            serde_json::json!({"metadata": {"name": "r", "resourceVersion": "1"}, "rules": []});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = serde_json::json!(["x"]);
        new["metadata"]["resourceVersion"] = serde_json::json!("2");
        assert!(only_gc_fields_changed(&new, &old));
        new["rules"] = serde_json::json!([{"verbs": ["get"]}]);
        assert!(!only_gc_fields_changed(&new, &old));
    }
}

//! RBAC beside the request path: the authorizer's in-memory index kept current from the watch
//! cache, the bootstrap policy reconciled at start, the ClusterRole aggregation controller,
//! and the escalation checks on writes of roles and bindings (kube's `policybased` storage).

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::registry::{manager, Registry};
use kubegate_backends::resource::WriteAdmission;
use kubegate_backends::storage::cacher::CacheEventKind;
use kubegate_backends::{ApiError, ApiResult, GroupResource, ResourceDef};
use kubegate_policy::authz::bootstrap_policy::{self, Reconciled};
use kubegate_policy::authz::rbac::{
    confirm_no_escalation, PolicyRule, RbacIndex, RbacKind, RoleRef,
};
use kubegate_policy::user::SYSTEM_PRIVILEGED_GROUP;
use kubegate_policy::{Attributes, Authorizer, RequestInfo, UserInfo};
use serde_json::{json, Value};

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

fn def(registry: &Registry, plural: &str) -> Result<Arc<ResourceDef>, String> {
    registry
        .find(GROUP, plural)
        .ok_or_else(|| format!("{plural}.{GROUP} is not served"))
}

fn stored(registry: &Registry, def: &ResourceDef, namespace: &str, name: &str) -> Option<Value> {
    let cached = registry.cacher().get(&def.key(namespace, name))?;
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
    let namespace = namespace_of(&object).to_string();
    registry
        .update_internal(def, &namespace, &name, manager::KUBE_APISERVER, |_| {
            Ok(object.clone())
        })
        .await
}

/// `namespace/name`, or `name` for a cluster object: how the logs name bootstrap objects.
fn object_id(object: &Value) -> String {
    match namespace_of(object) {
        "" => name_of(object).to_string(),
        ns => format!("{ns}/{}", name_of(object)),
    }
}

/// Brings one stored bootstrap role (ClusterRole, or Role in its namespace) in line with
/// `expected` using `reconcile`; whether anything was written.
async fn reconcile_role_object(
    registry: &Registry,
    def: &ResourceDef,
    expected: &Value,
    reconcile: fn(Option<&Value>, &Value) -> Option<Value>,
) -> ApiResult<bool> {
    let existing = stored(registry, def, namespace_of(expected), name_of(expected));
    let Some(object) = reconcile(existing.as_ref(), expected) else {
        return Ok(false);
    };
    match existing {
        None => {
            registry
                .create_internal(def, object, manager::KUBE_APISERVER)
                .await?
        }
        Some(_) => replace(registry, def, object).await?,
    };
    Ok(true)
}

/// Brings one stored bootstrap binding (ClusterRoleBinding, or RoleBinding in its namespace)
/// in line with `expected` using `reconcile`; whether anything was written.
async fn reconcile_binding_object(
    registry: &Registry,
    def: &ResourceDef,
    expected: &Value,
    reconcile: fn(Option<&Value>, &Value) -> Option<Reconciled>,
) -> ApiResult<bool> {
    let (namespace, name) = (namespace_of(expected), name_of(expected));
    let existing = stored(registry, def, namespace, name);
    match reconcile(existing.as_ref(), expected) {
        None => return Ok(false),
        Some(Reconciled::Write(object)) if existing.is_none() => {
            registry
                .create_internal(def, object, manager::KUBE_APISERVER)
                .await?
        }
        Some(Reconciled::Write(object)) => replace(registry, def, object).await?,
        Some(Reconciled::Recreate(object)) => {
            match registry.delete_internal(def, namespace, name).await {
                Ok(()) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
            registry
                .create_internal(def, object, manager::KUBE_APISERVER)
                .await?
        }
    };
    Ok(true)
}

/// Reconciles the bootstrap ClusterRoles and ClusterRoleBindings, then the Roles and
/// RoleBindings of `kube-system` and `kube-public`, as kube-apiserver's
/// `rbac/bootstrap-roles` post-start hook does: missing ones are created, missing rules,
/// subjects, labels and annotations are added back, users' additions stay, and objects
/// annotated `rbac.authorization.kubernetes.io/autoupdate: "false"` are left alone.
///
/// A cluster object that cannot be written fails the start. A namespaced one is logged and
/// skipped, as kube does ("unable to reconcile role..."): its namespace is the users' to
/// break (a terminating `kube-public` refuses new content) and the rest of the policy does
/// not depend on it.
pub async fn reconcile_bootstrap_policy(registry: &Registry) -> Result<(), String> {
    let roles = &def(registry, "clusterroles")?;
    for expected in bootstrap_policy::cluster_roles() {
        match reconcile_role_object(
            registry,
            roles,
            &expected,
            bootstrap_policy::reconcile_cluster_role,
        )
        .await
        {
            Ok(true) => {
                tracing::info!(clusterrole = %name_of(&expected), "reconciled bootstrap ClusterRole")
            }
            Ok(false) => {}
            Err(e) => return Err(format!("clusterrole {}: {}", name_of(&expected), e.message)),
        }
    }
    let bindings = &def(registry, "clusterrolebindings")?;
    for expected in bootstrap_policy::cluster_role_bindings() {
        match reconcile_binding_object(
            registry,
            bindings,
            &expected,
            bootstrap_policy::reconcile_cluster_role_binding,
        )
        .await
        {
            Ok(true) => {
                tracing::info!(clusterrolebinding = %name_of(&expected), "reconciled bootstrap ClusterRoleBinding")
            }
            Ok(false) => {}
            Err(e) => {
                return Err(format!(
                    "clusterrolebinding {}: {}",
                    name_of(&expected),
                    e.message
                ))
            }
        }
    }
    let roles = &def(registry, "roles")?;
    for expected in bootstrap_policy::namespace_roles() {
        match reconcile_role_object(registry, roles, &expected, bootstrap_policy::reconcile_role)
            .await
        {
            Ok(true) => tracing::info!(role = %object_id(&expected), "reconciled bootstrap Role"),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                "unable to reconcile role.{GROUP}/{} in {}: {}",
                name_of(&expected),
                namespace_of(&expected),
                e.message
            ),
        }
    }
    let bindings = &def(registry, "rolebindings")?;
    for expected in bootstrap_policy::namespace_role_bindings() {
        match reconcile_binding_object(
            registry,
            bindings,
            &expected,
            bootstrap_policy::reconcile_role_binding,
        )
        .await
        {
            Ok(true) => {
                tracing::info!(rolebinding = %object_id(&expected), "reconciled bootstrap RoleBinding")
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(
                "unable to reconcile rolebinding.{GROUP}/{} in {}: {}",
                name_of(&expected),
                namespace_of(&expected),
                e.message
            ),
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
    let roles = &def(registry, "clusterroles")?;
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
        // kube's controller applies the rules with force, so they are its own: an apply that
        // sets them conflicts with it, as against kube. No rules at all is an apply without
        // the field (kube's apply configuration omits an empty list), which gives it up.
        let mut config = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
        });
        if !rules.is_empty() {
            config["rules"] = Value::Array(rules);
        }
        let result = registry
            .apply_internal(
                roles,
                "",
                &name,
                "",
                manager::CLUSTER_ROLE_AGGREGATION,
                &config,
            )
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
        // kube asks with the request's name: empty on create (a POST to the collection).
        let asked_name = if old.is_some() { name_of(object) } else { "" };
        self.judge(user, object, old, asked_name).await
    }

    /// A PUT of a missing role: the escalation check of the update it is (asked with the
    /// URL's name), then the `create` it amounts to must be authorized.
    async fn admit_create_on_update(&self, user: &UserInfo, object: &Value) -> ApiResult<()> {
        self.judge(user, object, None, name_of(object)).await?;
        authorize_create_on_update(
            self.authorizer.as_ref(),
            user,
            (GROUP, "v1", self.resource),
            object,
        )
        .await
    }
}

impl RoleEscalationCheck {
    /// kube's policy-based role storage: `escalate` (asked about `asked_name`), or holding every
    /// rule granted.
    async fn judge(
        &self,
        user: &UserInfo,
        object: &Value,
        old: Option<&Value>,
        asked_name: &str,
    ) -> ApiResult<()> {
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
        self.judge(user, object, old).await
    }

    /// A PUT of a missing binding: the escalation check, then the `create` it amounts to must
    /// be authorized.
    async fn admit_create_on_update(&self, user: &UserInfo, object: &Value) -> ApiResult<()> {
        self.judge(user, object, None).await?;
        authorize_create_on_update(
            self.authorizer.as_ref(),
            user,
            (GROUP, "v1", self.resource),
            object,
        )
        .await
    }
}

impl BindingEscalationCheck {
    /// kube's policy-based binding storage: `bind` on the role, or holding every rule in it.
    async fn judge(&self, user: &UserInfo, object: &Value, old: Option<&Value>) -> ApiResult<()> {
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

/// kube's `withAuthorization` for an update that creates: the request was authorized for
/// `update`; the writer must also be allowed to `create` the object, or gets kube's
/// `ForbiddenStatusError` (a 500 when the authorizer could not decide).
async fn authorize_create_on_update(
    authorizer: &dyn Authorizer,
    user: &UserInfo,
    (group, version, resource): (&str, &str, &str),
    object: &Value,
) -> ApiResult<()> {
    let name = name_of(object);
    let request = RequestInfo {
        is_resource_request: true,
        verb: "create".to_string(),
        api_group: group.to_string(),
        api_version: version.to_string(),
        namespace: namespace_of(object).to_string(),
        resource: resource.to_string(),
        name: name.to_string(),
        ..RequestInfo::default()
    };
    let attributes = Attributes {
        user,
        request: &request,
    };
    let decision = authorizer.authorize(&attributes).await;
    match decision.error() {
        _ if decision.is_allowed() => Ok(()),
        Some(error) => Err(ApiError::internal(error)),
        None => {
            let gr = GroupResource::new(group.to_string(), resource.to_string());
            let why = kubegate_policy::authz::forbidden_message(&attributes, decision.reason());
            Err(ApiError::forbidden_resource(&gr, name, &why))
        }
    }
}

/// The write admission of a kind whose updates may create (kube's `AllowCreateOnUpdate`)
/// and that has no other admission: an update that creates is authorized for `create` too,
/// as kube's update handler authorizes it (`withAuthorization`).
struct CreateOnUpdateCheck {
    authorizer: Arc<dyn Authorizer>,
    group: String,
    version: String,
    resource: String,
}

#[async_trait::async_trait]
impl WriteAdmission for CreateOnUpdateCheck {
    async fn admit(&self, _: &UserInfo, _: &Value, _: Option<&Value>) -> ApiResult<()> {
        Ok(())
    }

    async fn admit_create_on_update(&self, user: &UserInfo, object: &Value) -> ApiResult<()> {
        let resource = (
            self.group.as_str(),
            self.version.as_str(),
            self.resource.as_str(),
        );
        authorize_create_on_update(self.authorizer.as_ref(), user, resource, object).await
    }
}

/// Attaches the escalation checks to the RBAC resources among `resources`, and the create
/// authorization to the other kinds whose updates may create.
pub fn guard_writes(
    resources: &mut [ResourceDef],
    index: &Arc<RbacIndex>,
    authorizer: &Arc<dyn Authorizer>,
) {
    for def in resources
        .iter_mut()
        .filter(|d| d.group != GROUP && d.admission.is_none())
        .filter(|d| d.strategy.allow_create_on_update())
    {
        def.admission = Some(Arc::new(CreateOnUpdateCheck {
            authorizer: authorizer.clone(),
            group: def.group.clone(),
            version: def.version.clone(),
            resource: def.plural.clone(),
        }));
    }
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

    use kubegate_policy::authz::rbac::RbacAuthorizer;
    use serde_json::json;

    /// An index where `jane` holds, in `team`, the rules of a Role `writer` with `rules`.
    fn jane_holds(rules: Value) -> (Arc<RbacIndex>, Arc<dyn Authorizer>) {
        let index = Arc::new(RbacIndex::new());
        index.reset(vec![
            (
                RbacKind::Role,
                json!({"metadata": {"name": "writer", "namespace": "team"}, "rules": rules}),
            ),
            (
                RbacKind::RoleBinding,
                json!({
                    "metadata": {"name": "writer", "namespace": "team"},
                    "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "writer"},
                    "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "jane"}],
                }),
            ),
        ]);
        let authorizer: Arc<dyn Authorizer> = Arc::new(RbacAuthorizer::new(index.clone()));
        (index, authorizer)
    }

    fn role_check(rules: Value) -> RoleEscalationCheck {
        let (index, authorizer) = jane_holds(rules);
        RoleEscalationCheck {
            index,
            authorizer,
            resource: "roles",
        }
    }

    fn jane() -> UserInfo {
        UserInfo::new("jane", vec!["system:authenticated".into()])
    }

    fn role(name: &str, verb: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "team"},
            "rules": [{"verbs": [verb], "apiGroups": [""], "resources": ["pods"]}],
        })
    }

    #[tokio::test]
    async fn create_on_update_needs_create_as_well_as_update() {
        let pods = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let update_only = role_check(json!([
            pods,
            {"verbs": ["update"], "apiGroups": [GROUP], "resources": ["roles"]},
        ]));
        let err = update_only
            .admit_create_on_update(&jane(), &role("r", "get"))
            .await
            .unwrap_err();
        assert_eq!(err.code, 403);
        // kube's `NewForbidden(gr, name, reason)` with RBAC's (empty) reason.
        assert_eq!(
            err.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: User \"jane\" cannot create resource \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team\""
        );
        // A plain update by the same user is only judged for escalation.
        let old = role("r", "get");
        assert!(update_only
            .admit(&jane(), &role("r", "get"), Some(&old))
            .await
            .is_ok());

        let with_create = role_check(json!([
            pods,
            {"verbs": ["create", "update"], "apiGroups": [GROUP], "resources": ["roles"]},
        ]));
        assert!(with_create
            .admit_create_on_update(&jane(), &role("r", "get"))
            .await
            .is_ok());
        // Granting more than held is refused before the create is even asked about.
        let err = with_create
            .admit_create_on_update(&jane(), &role("r", "delete"))
            .await
            .unwrap_err();
        assert_eq!(err.code, 403);
        assert!(
            err.message.starts_with(
                "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:"
            ),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn create_on_update_asks_escalate_about_the_named_role() {
        // `escalate` on one role name only: a POST (asked about no name) must hold the rules,
        // a PUT of that name is allowed to grant more, as in kube.
        let check = role_check(json!([
            {"verbs": ["create", "update"], "apiGroups": [GROUP], "resources": ["roles"]},
            {"verbs": ["escalate"], "apiGroups": [GROUP], "resources": ["roles"], "resourceNames": ["r"]},
        ]));
        let grants_more = role("r", "delete");
        assert_eq!(
            check
                .admit(&jane(), &grants_more, None)
                .await
                .unwrap_err()
                .code,
            403
        );
        assert!(check
            .admit_create_on_update(&jane(), &grants_more)
            .await
            .is_ok());
        let other = role("other", "delete");
        assert_eq!(
            check
                .admit_create_on_update(&jane(), &other)
                .await
                .unwrap_err()
                .code,
            403
        );
    }

    #[tokio::test]
    async fn binding_create_on_update_is_authorized_and_checked() {
        let (index, authorizer) = jane_holds(json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["update"], "apiGroups": [GROUP], "resources": ["rolebindings"]},
        ]));
        let check = BindingEscalationCheck {
            index,
            authorizer,
            resource: "rolebindings",
        };
        let binding = json!({
            "metadata": {"name": "b", "namespace": "team"},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "writer"},
            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "joe"}],
        });
        // Binding a role whose rules jane holds passes the escalation check, but she may not
        // create bindings.
        assert!(check.admit(&jane(), &binding, None).await.is_ok());
        let err = check
            .admit_create_on_update(&jane(), &binding)
            .await
            .unwrap_err();
        assert_eq!(
            err.message,
            "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: User \"jane\" cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team\""
        );
        // system:masters may do anything.
        let admin = UserInfo::new("admin", vec![SYSTEM_PRIVILEGED_GROUP.into()]);
        let (index, _) = jane_holds(json!([]));
        let masters = BindingEscalationCheck {
            index,
            authorizer: Arc::new(kubegate_policy::authz::always::AlwaysAllow),
            resource: "rolebindings",
        };
        assert!(masters
            .admit_create_on_update(&admin, &binding)
            .await
            .is_ok());
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

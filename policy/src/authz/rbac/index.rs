//! The in-memory RBAC store: Roles, ClusterRoles, RoleBindings and ClusterRoleBindings kept
//! up to date from watch events, with bindings indexed by subject so a decision looks only at
//! the bindings that can apply to the user (kube's `DefaultRuleResolver` lists them all).
//!
//! Bindings hold their `roleRef` only; rules are looked up by name when a decision is made, so
//! an edited role takes effect at once without touching the bindings that reference it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::Deserialize;
use serde_json::Value;

use super::types::{not_found, null_as_default, PolicyRule, RbacKind, RoleRef, Subject};
use crate::quote::{go_quote, push_go_quoted};
use crate::user::UserInfo;

/// The user-name prefix of ServiceAccount identities (`system:serviceaccount:<ns>:<name>`).
const SERVICE_ACCOUNT_USERNAME_PREFIX: &str = "system:serviceaccount:";

/// A RoleBinding or ClusterRoleBinding as the index keeps it.
#[derive(Debug)]
pub(super) struct Binding {
    /// Empty for a ClusterRoleBinding.
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) role_ref: RoleRef,
    pub(super) subjects: Vec<Subject>,
}

impl Binding {
    fn is_cluster(&self) -> bool {
        self.namespace.is_empty()
    }

    /// kube's `clusterRoleBindingDescriber` / `roleBindingDescriber`, e.g.
    /// `RoleBinding "name/ns" of Role "r" to User "u"`: the subject shown is the first one of
    /// the binding that applies to `user`, as kube's `appliesTo` picks it.
    pub(super) fn describe(&self, user: &UserInfo) -> String {
        let subject = self
            .subjects
            .iter()
            .find(|s| applies_to_user(user, s, &self.namespace));
        let mut out = String::with_capacity(96);
        if self.is_cluster() {
            out.push_str("ClusterRoleBinding ");
            push_go_quoted(&mut out, &self.name);
        } else {
            out.push_str("RoleBinding ");
            push_go_quoted(&mut out, &format!("{}/{}", self.name, self.namespace));
        }
        out.push_str(" of ");
        out.push_str(&self.role_ref.kind);
        out.push(' ');
        push_go_quoted(&mut out, &self.role_ref.name);
        out.push_str(" to ");
        // The index only offers bindings with an applying subject; an empty subject is shown
        // rather than panicking should that ever not hold.
        let fallback = Subject::default();
        let subject = subject.unwrap_or(&fallback);
        out.push_str(&subject.kind);
        out.push(' ');
        if subject.kind == "ServiceAccount" {
            let namespace = if subject.namespace.is_empty() {
                &self.namespace
            } else {
                &subject.namespace
            };
            push_go_quoted(&mut out, &format!("{}/{}", subject.name, namespace));
        } else {
            push_go_quoted(&mut out, &subject.name);
        }
        out
    }
}

/// kube's `appliesToUser`: `namespace` is the binding's namespace (empty for cluster role
/// bindings), which a ServiceAccount subject without a namespace of its own takes.
pub(super) fn applies_to_user(user: &UserInfo, subject: &Subject, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let sa_namespace = if subject.namespace.is_empty() {
                namespace
            } else {
                &subject.namespace
            };
            !sa_namespace.is_empty() && matches_sa_username(sa_namespace, &subject.name, &user.name)
        }
        _ => false,
    }
}

/// kube's `serviceaccount.MatchesUsername`, without building the user name.
fn matches_sa_username(namespace: &str, name: &str, username: &str) -> bool {
    username
        .strip_prefix(SERVICE_ACCOUNT_USERNAME_PREFIX)
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

/// Which subject map a key goes in: users (including ServiceAccount user names) or groups.
#[derive(Clone, Copy)]
enum KeyKind {
    User,
    Group,
}

/// The keys a binding is found under: a user name for `User` subjects and for ServiceAccounts
/// (their full `system:serviceaccount:<ns>:<name>` user name, since kube matches them by user
/// name), a group name for `Group` subjects. Subjects that can never apply are left out.
fn subject_keys(binding: &Binding) -> Vec<(KeyKind, String)> {
    binding
        .subjects
        .iter()
        .filter_map(|s| match s.kind.as_str() {
            "User" => Some((KeyKind::User, s.name.clone())),
            "Group" => Some((KeyKind::Group, s.name.clone())),
            "ServiceAccount" => {
                let namespace = if s.namespace.is_empty() {
                    &binding.namespace
                } else {
                    &s.namespace
                };
                // A cluster role binding's ServiceAccount without namespace matches nobody.
                (!namespace.is_empty()).then(|| {
                    (
                        KeyKind::User,
                        format!("{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{}", s.name),
                    )
                })
            }
            _ => None,
        })
        .collect()
}

/// Bindings found under one subject key, in creation order (the id), so decisions are
/// deterministic.
type Postings = BTreeMap<u64, Arc<Binding>>;

/// The ClusterRoleBindings, or the RoleBindings of one namespace.
#[derive(Debug, Default)]
struct BindingSet {
    by_name: HashMap<String, (u64, Arc<Binding>)>,
    by_user: HashMap<String, Postings>,
    by_group: HashMap<String, Postings>,
}

impl BindingSet {
    fn map(&mut self, kind: KeyKind) -> &mut HashMap<String, Postings> {
        match kind {
            KeyKind::User => &mut self.by_user,
            KeyKind::Group => &mut self.by_group,
        }
    }

    /// Adds or replaces a binding; a replaced binding keeps its place in the order. Returns
    /// whether it was new.
    fn upsert(&mut self, binding: Binding, next_id: &mut u64) -> bool {
        let (id, new) = match self.by_name.remove(&binding.name) {
            Some((id, old)) => {
                self.unindex(id, &old);
                (id, false)
            }
            None => {
                *next_id += 1;
                (*next_id, true)
            }
        };
        let binding = Arc::new(binding);
        for (kind, key) in subject_keys(&binding) {
            self.map(kind)
                .entry(key)
                .or_default()
                .insert(id, Arc::clone(&binding));
        }
        self.by_name
            .insert(binding.name.clone(), (id, Arc::clone(&binding)));
        new
    }

    fn remove(&mut self, name: &str) -> bool {
        match self.by_name.remove(name) {
            Some((id, old)) => {
                self.unindex(id, &old);
                true
            }
            None => false,
        }
    }

    fn unindex(&mut self, id: u64, binding: &Binding) {
        for (kind, key) in subject_keys(binding) {
            let map = self.map(kind);
            if let Some(postings) = map.get_mut(&key) {
                postings.remove(&id);
                if postings.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }

    /// The bindings with a subject that may apply to `user`, each once, in creation order.
    fn candidates<'a>(&'a self, user: &UserInfo, out: &mut Vec<(u64, &'a Binding)>) {
        out.clear();
        let mut sources = 0;
        let lists = std::iter::once(self.by_user.get(user.name.as_str()))
            .chain(user.groups.iter().map(|g| self.by_group.get(g.as_str())));
        for postings in lists.flatten() {
            sources += 1;
            out.extend(postings.iter().map(|(id, b)| (*id, &**b)));
        }
        // One list is already ordered and free of repeats; several may share bindings.
        if sources > 1 {
            out.sort_unstable_by_key(|(id, _)| *id);
            out.dedup_by_key(|(id, _)| *id);
        }
    }
}

/// What the index holds; swapped whole by [`RbacIndex::reset`].
#[derive(Debug, Default)]
struct Inner {
    /// namespace → name → rules.
    roles: HashMap<String, HashMap<String, Vec<PolicyRule>>>,
    role_count: usize,
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    cluster_role_bindings: BindingSet,
    /// namespace → that namespace's RoleBindings.
    role_bindings: HashMap<String, BindingSet>,
    role_binding_count: usize,
    /// Last id handed to a binding: gives bindings a stable creation order.
    next_id: u64,
}

impl Inner {
    fn upsert(&mut self, kind: RbacKind, object: &Value) {
        let Some((namespace, name)) = object_key(kind, object) else {
            return;
        };
        match parse(kind, object, &namespace, &name) {
            Ok(Parsed::Role(rules)) => self.put_role(kind, namespace, name, rules),
            Ok(Parsed::Binding(binding)) => self.put_binding(binding),
            Err(error) => {
                // The stored object no longer says what the old one did: drop the old grants
                // rather than keep permissions the cluster has taken away.
                tracing::warn!(
                    kind = kind.plural(),
                    %namespace,
                    %name,
                    %error,
                    "skipping malformed RBAC object"
                );
                self.remove(kind, &namespace, &name);
            }
        }
    }

    fn put_role(
        &mut self,
        kind: RbacKind,
        namespace: String,
        name: String,
        rules: Vec<PolicyRule>,
    ) {
        if kind == RbacKind::ClusterRole {
            self.cluster_roles.insert(name, rules);
        } else if self
            .roles
            .entry(namespace)
            .or_default()
            .insert(name, rules)
            .is_none()
        {
            self.role_count += 1;
        }
    }

    fn put_binding(&mut self, binding: Binding) {
        if binding.is_cluster() {
            self.cluster_role_bindings
                .upsert(binding, &mut self.next_id);
        } else if self
            .role_bindings
            .entry(binding.namespace.clone())
            .or_default()
            .upsert(binding, &mut self.next_id)
        {
            self.role_binding_count += 1;
        }
    }

    fn remove(&mut self, kind: RbacKind, namespace: &str, name: &str) {
        match kind {
            RbacKind::ClusterRole => {
                self.cluster_roles.remove(name);
            }
            RbacKind::ClusterRoleBinding => {
                self.cluster_role_bindings.remove(name);
            }
            RbacKind::Role => {
                if let Some(roles) = self.roles.get_mut(namespace) {
                    if roles.remove(name).is_some() {
                        self.role_count -= 1;
                    }
                    if roles.is_empty() {
                        self.roles.remove(namespace);
                    }
                }
            }
            RbacKind::RoleBinding => {
                if let Some(set) = self.role_bindings.get_mut(namespace) {
                    if set.remove(name) {
                        self.role_binding_count -= 1;
                    }
                    if set.by_name.is_empty() {
                        self.role_bindings.remove(namespace);
                    }
                }
            }
        }
    }

    /// kube's `GetRoleReferenceRules`, borrowing the stored rules.
    fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        binding_namespace: &str,
    ) -> Result<&[PolicyRule], String> {
        match role_ref.kind.as_str() {
            "Role" => self
                .roles
                .get(binding_namespace)
                .and_then(|roles| roles.get(role_ref.name.as_str()))
                .map(Vec::as_slice)
                .ok_or_else(|| not_found("role", &role_ref.name)),
            "ClusterRole" => self
                .cluster_roles
                .get(role_ref.name.as_str())
                .map(Vec::as_slice)
                .ok_or_else(|| not_found("clusterrole", &role_ref.name)),
            other => Err(format!(
                "unsupported role reference kind: {}",
                go_quote(other)
            )),
        }
    }
}

/// One step of [`RbacIndex::visit_rules_for`]: a rule with the binding that grants it, or a
/// binding whose role could not be resolved.
pub(super) enum Visit<'a> {
    Rule(&'a Binding, &'a PolicyRule),
    Error(String),
}

/// The RBAC objects of the cluster, indexed for authorization. Cheap to read from many
/// threads at once; updated one watch event at a time.
#[derive(Debug, Default)]
pub struct RbacIndex {
    inner: RwLock<Inner>,
    /// Bumped by every change, under the write lock: decisions remembered at an older
    /// generation are not reused.
    generation: AtomicU64,
}

impl RbacIndex {
    pub fn new() -> Self {
        Self::default()
    }

    // A panic while holding the lock cannot leave `Inner` half-updated in a way that matters
    // more than refusing all authorization would, so a poisoned lock is used as it is.
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds or replaces one object (a watch ADDED or MODIFIED event), keyed by its
    /// `metadata.namespace`/`metadata.name`. An object that cannot be read is skipped with a
    /// warning; if its key can be read, what the index held under that key is dropped.
    pub fn upsert(&self, kind: RbacKind, object: &Value) {
        let mut inner = self.write();
        inner.upsert(kind, object);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes one object (a watch DELETED event). `namespace` is ignored for cluster kinds.
    pub fn remove(&self, kind: RbacKind, namespace: &str, name: &str) {
        let mut inner = self.write();
        inner.remove(kind, namespace, name);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Changes so far: equal generations mean equal contents.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Replaces everything with `objects` (the initial list, or a relist). The new index is
    /// built before the lock is taken, so decisions are not held up while it is.
    pub fn reset(&self, objects: Vec<(RbacKind, Value)>) {
        let mut fresh = Inner::default();
        for (kind, object) in &objects {
            fresh.upsert(*kind, object);
        }
        let mut inner = self.write();
        *inner = fresh;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// How many objects of `kind` the index holds.
    pub fn len(&self, kind: RbacKind) -> usize {
        let inner = self.read();
        match kind {
            RbacKind::Role => inner.role_count,
            RbacKind::ClusterRole => inner.cluster_roles.len(),
            RbacKind::RoleBinding => inner.role_binding_count,
            RbacKind::ClusterRoleBinding => inner.cluster_role_bindings.by_name.len(),
        }
    }

    /// Whether the index holds no object at all.
    pub fn is_empty(&self) -> bool {
        RbacKind::ALL.iter().all(|kind| self.len(*kind) == 0)
    }

    /// kube's `DefaultRuleResolver.RulesFor`: the rules of the cluster role bindings that apply
    /// to `user`, then (when `namespace` is not empty) those of the role bindings in
    /// `namespace`; and the errors met resolving role references.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit_rules_for(user, namespace, |visit| {
            match visit {
                Visit::Rule(_, rule) => rules.push(rule.clone()),
                Visit::Error(error) => errors.push(error),
            }
            true
        });
        (rules, errors)
    }

    /// kube's `GetRoleReferenceRules`: the rules of the Role (in `binding_namespace`) or
    /// ClusterRole `role_ref` names, or kube's error text, e.g.
    /// `clusterrole.rbac.authorization.k8s.io "x" not found`.
    pub fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        binding_namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        self.read()
            .role_ref_rules(role_ref, binding_namespace)
            .map(<[PolicyRule]>::to_vec)
    }

    /// kube's `VisitRulesFor`: calls `visitor` with each rule that applies to `user` in
    /// `namespace` and each role resolution error, cluster role bindings first, until it
    /// returns false. Only bindings naming the user, one of its groups or its ServiceAccount
    /// are looked at.
    pub(super) fn visit_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut visitor: impl FnMut(Visit<'_>) -> bool,
    ) {
        let inner = self.read();
        let mut candidates = Vec::new();
        inner
            .cluster_role_bindings
            .candidates(user, &mut candidates);
        if !visit_bindings(&inner, &candidates, &mut visitor) {
            return;
        }
        if namespace.is_empty() {
            return;
        }
        if let Some(set) = inner.role_bindings.get(namespace) {
            set.candidates(user, &mut candidates);
            visit_bindings(&inner, &candidates, &mut visitor);
        }
    }
}

/// Visits the rules of `bindings` in order; false once the visitor asked to stop.
fn visit_bindings<'a>(
    inner: &'a Inner,
    bindings: &[(u64, &'a Binding)],
    visitor: &mut impl FnMut(Visit<'a>) -> bool,
) -> bool {
    for (_, binding) in bindings {
        match inner.role_ref_rules(&binding.role_ref, &binding.namespace) {
            Ok(rules) => {
                for rule in rules {
                    if !visitor(Visit::Rule(binding, rule)) {
                        return false;
                    }
                }
            }
            Err(error) => {
                if !visitor(Visit::Error(error)) {
                    return false;
                }
            }
        }
    }
    true
}

/// kube's `utilerrors.NewAggregate(errs).Error()`: one message as it is; several, with
/// repeats dropped, as `[e1, e2]` (or alone if only one distinct message remains).
pub(super) fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::with_capacity(errors.len());
    for error in errors {
        if !seen.contains(&error.as_str()) {
            seen.push(error);
        }
    }
    if seen.len() <= 1 {
        seen.concat()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// `metadata.namespace` (empty for cluster kinds) and `metadata.name` of an object, or `None`
/// (with a warning) when they cannot be read.
fn object_key(kind: RbacKind, object: &Value) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default, deserialize_with = "null_as_default")]
        name: String,
        #[serde(default, deserialize_with = "null_as_default")]
        namespace: String,
    }
    let metadata = object
        .get("metadata")
        .map(Metadata::deserialize)
        .transpose();
    let metadata = match metadata {
        Ok(Some(metadata)) => metadata,
        Ok(None) => {
            tracing::warn!(
                kind = kind.plural(),
                "skipping RBAC object without metadata"
            );
            return None;
        }
        Err(error) => {
            tracing::warn!(kind = kind.plural(), %error, "skipping RBAC object with malformed metadata");
            return None;
        }
    };
    if metadata.name.is_empty() || (kind.is_namespaced() && metadata.namespace.is_empty()) {
        tracing::warn!(
            kind = kind.plural(),
            namespace = %metadata.namespace,
            name = %metadata.name,
            "skipping RBAC object without a name or namespace"
        );
        return None;
    }
    let namespace = if kind.is_namespaced() {
        metadata.namespace
    } else {
        String::new()
    };
    Some((namespace, metadata.name))
}

enum Parsed {
    Role(Vec<PolicyRule>),
    Binding(Binding),
}

/// Reads the body of an object whose key is known.
fn parse(
    kind: RbacKind,
    object: &Value,
    namespace: &str,
    name: &str,
) -> Result<Parsed, serde_json::Error> {
    #[derive(Deserialize)]
    struct RoleBody {
        #[serde(default, deserialize_with = "null_as_default")]
        rules: Vec<PolicyRule>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct BindingBody {
        #[serde(default, deserialize_with = "null_as_default")]
        subjects: Vec<Subject>,
        #[serde(default, deserialize_with = "null_as_default")]
        role_ref: RoleRef,
    }
    match kind {
        RbacKind::Role | RbacKind::ClusterRole => {
            let body = RoleBody::deserialize(object)?;
            Ok(Parsed::Role(body.rules))
        }
        RbacKind::RoleBinding | RbacKind::ClusterRoleBinding => {
            let body = BindingBody::deserialize(object)?;
            Ok(Parsed::Binding(Binding {
                namespace: namespace.to_string(),
                name: name.to_string(),
                role_ref: body.role_ref,
                subjects: body.subjects,
            }))
        }
    }
}

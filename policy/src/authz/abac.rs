//! The ABAC authorization mode, as kube's `pkg/auth/authorizer/abac`
//! (`--authorization-mode=ABAC --authorization-policy-file=<file>`): a file of policies, one
//! JSON object per line, and a request is allowed when any policy matches it.
//!
//! A line is either an `abac.authorization.kubernetes.io/v1beta1` `Policy`
//!
//! ```json
//! {"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "team-a", "resource": "*", "apiGroup": "*", "readonly": true}}
//! ```
//!
//! or an unversioned (v0) policy, `{"user": "alice", "namespace": "team-a", "readonly": true}`,
//! converted the way kube converts it (empty namespace or resource means all, every API group,
//! no user and no group means every authenticated user). Blank lines and lines starting with
//! `#` are skipped; an error names the file and the line.
//!
//! Matching is kube's: the subject (`user`, `group`; a `*` user or group means the group
//! `system:authenticated`, so anonymous requests need an explicit
//! `system:unauthenticated` group or `system:anonymous` user), then the verb (a `readonly`
//! policy matches only `get`, `list` and `watch`), then either the resource attributes
//! (`namespace`, `resource`, `apiGroup`, each exact or `*`) for resource requests or
//! `nonResourcePath` (exact, `*`, or a prefix ending in `*`) for other paths. A match is an
//! allow; no match is *no opinion* with kube's reason "No policy matched.".
//!
//! Stricter than kube on purpose: unknown keys, and lines with an apiVersion or kind that is
//! not an ABAC `Policy`, are load errors. Kube ignores unknown keys and reads an unrecognised
//! apiVersion as a v0 policy; with the fields then all empty, that line would grant every
//! authenticated user everything, so a typo must not load.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{Attributes, Authorizer, Decision, NonResourceRule, ResourceRule, RulesInfo};
use crate::request_info::RequestInfo;
use crate::user::{UserInfo, ALL_AUTHENTICATED};

/// The group and version of ABAC policy lines.
pub const GROUP: &str = "abac.authorization.kubernetes.io";
/// The current policy version's `apiVersion`.
pub const API_VERSION_V1BETA1: &str = "abac.authorization.kubernetes.io/v1beta1";
/// The legacy version's `apiVersion`; lines without `apiVersion` and `kind` are also v0.
pub const API_VERSION_V0: &str = "abac.authorization.kubernetes.io/v0";
/// The reason given when no policy matches (kube's text).
pub const NO_POLICY_MATCHED: &str = "No policy matched.";

/// One policy after conversion to kube's internal form: every field as matched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// A user name, `*`, or empty (not matched on the user).
    pub user: String,
    /// A group name, or empty (not matched on groups).
    pub group: String,
    /// Only `get`, `list` and `watch` match.
    pub readonly: bool,
    /// An API group (`""` is the core group) or `*`.
    pub api_group: String,
    /// A resource (without subresource) or `*`.
    pub resource: String,
    /// A namespace (`""` is cluster-scoped requests) or `*`.
    pub namespace: String,
    /// A path, `*`, or a prefix ending in `*`; empty matches no path.
    pub non_resource_path: String,
}

/// The `spec` of a v1beta1 line. Go's decoder reads `null` as the zero value, hence the
/// options.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct V1beta1Spec {
    user: Option<String>,
    group: Option<String>,
    readonly: Option<bool>,
    api_group: Option<String>,
    resource: Option<String>,
    namespace: Option<String>,
    non_resource_path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct V1beta1Line {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    spec: Option<V1beta1Spec>,
}

/// A v0 line: the fields sit at the top level.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct V0Line {
    #[allow(dead_code)]
    api_version: Option<String>,
    #[allow(dead_code)]
    kind: Option<String>,
    user: Option<String>,
    group: Option<String>,
    readonly: Option<bool>,
    resource: Option<String>,
    namespace: Option<String>,
}

/// kube's `Convert_v1beta1_Policy_To_abac_Policy`.
fn from_v1beta1(spec: V1beta1Spec) -> Policy {
    let mut policy = Policy {
        user: spec.user.unwrap_or_default(),
        group: spec.group.unwrap_or_default(),
        readonly: spec.readonly.unwrap_or_default(),
        api_group: spec.api_group.unwrap_or_default(),
        resource: spec.resource.unwrap_or_default(),
        namespace: spec.namespace.unwrap_or_default(),
        non_resource_path: spec.non_resource_path.unwrap_or_default(),
    };
    // A `*` user or group is every authenticated user, not every user.
    if policy.user == "*" || policy.group == "*" {
        policy.group = ALL_AUTHENTICATED.to_string();
        policy.user = String::new();
    }
    policy
}

/// kube's `Convert_v0_Policy_To_abac_Policy`.
fn from_v0(line: V0Line) -> Policy {
    let user = line.user.unwrap_or_default();
    let group = line.group.unwrap_or_default();
    let resource = line.resource.unwrap_or_default();
    let namespace = line.namespace.unwrap_or_default();
    let mut policy = Policy {
        user: user.clone(),
        group: group.clone(),
        readonly: line.readonly.unwrap_or_default(),
        // v0 had no API groups: every rule covers all of them.
        api_group: "*".to_string(),
        resource: resource.clone(),
        namespace: namespace.clone(),
        non_resource_path: String::new(),
    };
    if user.is_empty() && group.is_empty() {
        policy.group = ALL_AUTHENTICATED.to_string();
    }
    if user == "*" || group == "*" {
        policy.group = ALL_AUTHENTICATED.to_string();
        policy.user = String::new();
    }
    if namespace.is_empty() {
        policy.namespace = "*".to_string();
    }
    if resource.is_empty() {
        policy.resource = "*".to_string();
    }
    // A v0 rule naming neither namespace nor resource also covers non-resource paths.
    if namespace.is_empty() && resource.is_empty() {
        policy.non_resource_path = "*".to_string();
    }
    policy
}

/// Decodes one non-blank, non-comment line; the error is the reason only (the caller adds
/// file and line). Returns whether the line was unversioned, for kube's warning.
fn decode_line(line: &str) -> Result<(Policy, bool), String> {
    let value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let Value::Object(object) = &value else {
        return Err("a policy must be a JSON object".to_string());
    };
    let text = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{key} must be a string, not {other}")),
    };
    let api_version = text("apiVersion")?;
    let kind = text("kind")?;
    match (api_version.as_deref(), kind.as_deref()) {
        (None, None) => {
            let v0: V0Line = serde_json::from_value(value).map_err(|e| e.to_string())?;
            Ok((from_v0(v0), true))
        }
        (Some(API_VERSION_V1BETA1), Some("Policy")) => {
            let v1beta1: V1beta1Line = serde_json::from_value(value).map_err(|e| e.to_string())?;
            Ok((from_v1beta1(v1beta1.spec.unwrap_or_default()), false))
        }
        (Some(API_VERSION_V0), Some("Policy")) => {
            let v0: V0Line = serde_json::from_value(value).map_err(|e| e.to_string())?;
            Ok((from_v0(v0), false))
        }
        (version, kind) => Err(format!(
            "unsupported apiVersion {:?} and kind {:?}: expected apiVersion {API_VERSION_V1BETA1:?} and kind \"Policy\" (or neither, for an unversioned policy)",
            version.unwrap_or_default(),
            kind.unwrap_or_default()
        )),
    }
}

/// The ABAC authorizer: the policies of one file, asked in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbacAuthorizer {
    policies: Vec<Policy>,
}

impl AbacAuthorizer {
    /// Allowed when a policy matches, as kube's `PolicyList.Authorize`.
    fn decide(&self, attributes: &Attributes<'_>) -> Decision {
        if self.policies.iter().any(|p| matches(p, attributes)) {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(NO_POLICY_MATCHED.to_string())
        }
    }

    /// Reads a policy file (see the module documentation for the format).
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("error reading policy file {}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses policy text; `source` names it in errors (usually the file path).
    pub fn parse(text: &str, source: &str) -> Result<Self, String> {
        let mut policies = Vec::new();
        let mut unversioned = 0usize;
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let (policy, was_unversioned) = decode_line(trimmed).map_err(|e| {
                format!(
                    "error reading policy file {source}, line {}: {trimmed}: {e}",
                    index + 1
                )
            })?;
            if was_unversioned {
                unversioned += 1;
            }
            policies.push(policy);
        }
        if unversioned > 0 {
            // kube's warning: v0 lines still load, but their implicit wildcards surprise.
            tracing::warn!(
                source,
                lines = unversioned,
                "Policy file contained unversioned rules. See docs/admin/authorization.md#abac-mode for ABAC file format details."
            );
        }
        Ok(AbacAuthorizer { policies })
    }

    /// The policies, in file order, as converted.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }
}

/// kube's `subjectMatches`: a named user must be the user, a named group one of the user's
/// groups; a policy naming neither matches nobody.
fn subject_matches(policy: &Policy, user: &UserInfo) -> bool {
    let mut matched = false;
    if !policy.user.is_empty() {
        if policy.user != "*" && policy.user != user.name {
            return false;
        }
        matched = true;
    }
    if !policy.group.is_empty() {
        if policy.group != "*" && !user.in_group(&policy.group) {
            return false;
        }
        matched = true;
    }
    matched
}

/// kube's `IsReadOnly`.
fn is_read_only(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

/// kube's `verbMatches`: read-only requests match any policy, others only policies that are
/// not read-only.
fn verb_matches(policy: &Policy, request: &RequestInfo) -> bool {
    is_read_only(&request.verb) || !policy.readonly
}

/// kube's `resourceMatches`.
fn resource_matches(policy: &Policy, request: &RequestInfo) -> bool {
    request.is_resource_request
        && (policy.namespace == "*" || policy.namespace == request.namespace)
        && (policy.resource == "*" || policy.resource == request.resource)
        && (policy.api_group == "*" || policy.api_group == request.api_group)
}

/// kube's `nonResourceMatches`.
fn non_resource_matches(policy: &Policy, request: &RequestInfo) -> bool {
    if request.is_resource_request {
        return false;
    }
    let pattern = policy.non_resource_path.as_str();
    if pattern == "*" || pattern == request.path {
        return true;
    }
    // kube trims every trailing `*` before the prefix test.
    pattern.ends_with('*') && request.path.starts_with(pattern.trim_end_matches('*'))
}

/// kube's `matches`.
fn matches(policy: &Policy, attributes: &Attributes<'_>) -> bool {
    subject_matches(policy, attributes.user)
        && verb_matches(policy, attributes.request)
        && (resource_matches(policy, attributes.request)
            || non_resource_matches(policy, attributes.request))
}

fn verbs(readonly: bool) -> Vec<String> {
    if readonly {
        vec!["get".into(), "list".into(), "watch".into()]
    } else {
        vec!["*".into()]
    }
}

#[async_trait::async_trait]
impl Authorizer for AbacAuthorizer {
    fn name(&self) -> &'static str {
        "ABAC"
    }

    async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
        self.decide(attributes)
    }

    fn authorize_now(&self, attributes: &Attributes<'_>) -> Option<Decision> {
        Some(self.decide(attributes))
    }

    /// kube's `PolicyList.RulesFor`: every policy whose subject matches and whose namespace
    /// is `*` or `namespace` gives a resource rule (when it names a resource) and a
    /// non-resource rule (when it names a path); the list is complete.
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
        let mut rules = RulesInfo::default();
        for policy in &self.policies {
            if !subject_matches(policy, user)
                || !(policy.namespace == "*" || policy.namespace == namespace)
            {
                continue;
            }
            if !policy.resource.is_empty() {
                rules.resource_rules.push(ResourceRule {
                    verbs: verbs(policy.readonly),
                    api_groups: vec![policy.api_group.clone()],
                    resources: vec![policy.resource.clone()],
                    resource_names: Vec::new(),
                });
            }
            if !policy.non_resource_path.is_empty() {
                rules.non_resource_rules.push(NonResourceRule {
                    verbs: verbs(policy.readonly),
                    non_resource_urls: vec![policy.non_resource_path.clone()],
                });
            }
        }
        rules
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::user::{ALL_UNAUTHENTICATED, ANONYMOUS};
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Runs a future that never waits (ABAC answers at once).
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, groups.iter().map(|g| g.to_string()).collect())
    }

    fn resource(verb: &str, namespace: &str, group: &str, resource: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            api_prefix: if group.is_empty() { "api" } else { "apis" }.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            namespace: namespace.into(),
            resource: resource.into(),
            ..RequestInfo::default()
        }
    }

    fn path(verb: &str, path: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            path: path.into(),
            ..RequestInfo::default()
        }
    }

    fn allowed(abac: &AbacAuthorizer, user: &UserInfo, request: &RequestInfo) -> bool {
        let decision = block_on(abac.authorize(&Attributes { user, request }));
        match decision {
            Decision::Allow(_) => true,
            Decision::NoOpinion(reason) => {
                assert_eq!(reason, NO_POLICY_MATCHED);
                false
            }
            other => panic!("ABAC only allows or has no opinion: {other:?}"),
        }
    }

    fn v1(spec: &str) -> String {
        format!(
            "{{\"apiVersion\": \"abac.authorization.kubernetes.io/v1beta1\", \"kind\": \"Policy\", \"spec\": {spec}}}"
        )
    }

    fn load(lines: &[String]) -> AbacAuthorizer {
        AbacAuthorizer::parse(&lines.join("\n"), "test.jsonl").unwrap()
    }

    #[test]
    fn kube_example_policy_file_loads() {
        // kube's pkg/auth/authorizer/abac/example_policy_file.jsonl, with a comment and
        // blank lines around it.
        let text = r#"# kube's example
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group":"system:authenticated",  "nonResourcePath": "*", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group":"system:unauthenticated", "nonResourcePath": "*", "readonly": true}}

{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"admin",     "namespace": "*",              "resource": "*",         "apiGroup": "*"                   }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"scheduler", "namespace": "*",              "resource": "pods",                       "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"scheduler", "namespace": "*",              "resource": "bindings"                                     }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"kubelet",   "namespace": "*",              "resource": "pods",                       "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"kubelet",   "namespace": "*",              "resource": "services",                   "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"kubelet",   "namespace": "*",              "resource": "endpoints",                  "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"kubelet",   "namespace": "*",              "resource": "events"                                       }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"alice",     "namespace": "projectCaribou", "resource": "*",         "apiGroup": "*"                   }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"bob",       "namespace": "projectCaribou", "resource": "*",         "apiGroup": "*", "readonly": true }}
   # indented comment
"#;
        let abac = AbacAuthorizer::parse(text, "example").unwrap();
        assert_eq!(abac.policies().len(), 11);
        let alice = user("alice", &[ALL_AUTHENTICATED]);
        let bob = user("bob", &[ALL_AUTHENTICATED]);
        let caribou = |verb| resource(verb, "projectCaribou", "", "pods");
        assert!(allowed(&abac, &alice, &caribou("create")));
        assert!(allowed(&abac, &bob, &caribou("list")));
        assert!(!allowed(&abac, &bob, &caribou("create")));
        assert!(!allowed(
            &abac,
            &alice,
            &resource("get", "other", "", "pods")
        ));
        // scheduler's pods rule names no apiGroup: only the core group ("") matches.
        let scheduler = user("scheduler", &[ALL_AUTHENTICATED]);
        assert!(allowed(
            &abac,
            &scheduler,
            &resource("get", "x", "", "pods")
        ));
        assert!(!allowed(
            &abac,
            &scheduler,
            &resource("get", "x", "metrics.k8s.io", "pods")
        ));
        assert!(allowed(
            &abac,
            &scheduler,
            &resource("create", "x", "", "bindings")
        ));
        // Read-only non-resource access for everyone, authenticated or not.
        assert!(allowed(&abac, &bob, &path("get", "/version")));
        assert!(!allowed(&abac, &bob, &path("post", "/version")));
        assert!(allowed(
            &abac,
            &UserInfo::anonymous(),
            &path("get", "/healthz")
        ));
    }

    #[test]
    fn parse_errors_name_the_line() {
        let text = format!("# ok\n\n{}\n{{not json\n", v1(r#"{"user":"a"}"#));
        let err = AbacAuthorizer::parse(&text, "/etc/abac.jsonl").unwrap_err();
        assert!(
            err.starts_with("error reading policy file /etc/abac.jsonl, line 4: {not json: "),
            "{err}"
        );
        for (line, expected) in [
            (
                v1(r#"{"user":"a", "resorce":"pods"}"#),
                "unknown field `resorce`",
            ),
            (
                r#"{"apiVersion": "abac.authorization.kubernetes.io/v1", "kind": "Policy", "spec": {"user":"a"}}"#.to_string(),
                "unsupported apiVersion \"abac.authorization.kubernetes.io/v1\"",
            ),
            (
                r#"{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "spec": {"user":"a"}}"#.to_string(),
                "unsupported apiVersion",
            ),
            (r#"{"spec": {"user":"a"}}"#.to_string(), "unknown field `spec`"),
            (v1(r#"{"readonly":"yes"}"#), "invalid type"),
            (r#"["user"]"#.to_string(), "must be a JSON object"),
            (r#"{"kind": 7}"#.to_string(), "kind must be a string"),
        ] {
            let err = AbacAuthorizer::parse(&line, "p").unwrap_err();
            assert!(err.contains("line 1"), "{err}");
            assert!(err.contains(expected), "{line}: {err}");
        }
        let err =
            AbacAuthorizer::from_file(Path::new("/nonexistent/kubegate-abac.jsonl")).unwrap_err();
        assert!(err.contains("/nonexistent/kubegate-abac.jsonl"), "{err}");
        // Empty and comment-only files hold no policies (and allow nothing).
        assert!(AbacAuthorizer::parse("", "p")
            .unwrap()
            .policies()
            .is_empty());
        assert!(AbacAuthorizer::parse("  \n# x\n", "p")
            .unwrap()
            .policies()
            .is_empty());
    }

    #[test]
    fn from_file_reads_one_policy_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("abac.jsonl");
        std::fs::write(
            &file,
            format!(
                "{}\r\n{}\r\n",
                v1(r#"{"user":"alice","namespace":"*","resource":"*","apiGroup":"*"}"#),
                r#"{"user":"bob","readonly":true}"#
            ),
        )
        .unwrap();
        let abac = AbacAuthorizer::from_file(&file).unwrap();
        assert_eq!(abac.policies().len(), 2);
        assert_eq!(abac.policies()[1].non_resource_path, "*");
    }

    #[test]
    fn v1beta1_conversion_and_subjects() {
        let abac = load(&[v1(
            r#"{"user":"*","namespace":"shared","resource":"*","apiGroup":"*"}"#,
        )]);
        // `*` became the authenticated group.
        assert_eq!(abac.policies()[0].user, "");
        assert_eq!(abac.policies()[0].group, ALL_AUTHENTICATED);
        let shared = resource("delete", "shared", "apps", "deployments");
        assert!(allowed(&abac, &user("x", &[ALL_AUTHENTICATED]), &shared));
        assert!(!allowed(&abac, &user("x", &[]), &shared));
        assert!(!allowed(&abac, &UserInfo::anonymous(), &shared));

        let abac = load(&[v1(r#"{"group":"*","nonResourcePath":"/healthz"}"#)]);
        assert_eq!(abac.policies()[0].group, ALL_AUTHENTICATED);

        // Anonymous access needs the unauthenticated group (or the anonymous user).
        let abac = load(&[
            v1(
                r#"{"group":"system:unauthenticated","nonResourcePath":"/healthz","readonly":true}"#,
            ),
            v1(r#"{"user":"system:anonymous","nonResourcePath":"/version","readonly":true}"#),
        ]);
        assert!(allowed(
            &abac,
            &UserInfo::anonymous(),
            &path("get", "/healthz")
        ));
        assert!(allowed(
            &abac,
            &UserInfo::anonymous(),
            &path("get", "/version")
        ));
        assert!(!allowed(
            &abac,
            &user("x", &[ALL_AUTHENTICATED]),
            &path("get", "/healthz")
        ));
        assert_eq!(UserInfo::anonymous().groups, vec![ALL_UNAUTHENTICATED]);
        assert_eq!(UserInfo::anonymous().name, ANONYMOUS);

        // User and group together: both must match.
        let abac = load(&[v1(
            r#"{"user":"alice","group":"ops","namespace":"*","resource":"*","apiGroup":"*"}"#,
        )]);
        let any = resource("get", "n", "", "pods");
        assert!(allowed(&abac, &user("alice", &["ops"]), &any));
        assert!(!allowed(&abac, &user("alice", &["dev"]), &any));
        assert!(!allowed(&abac, &user("bob", &["ops"]), &any));

        // A policy naming no subject matches nobody.
        let abac = load(&[v1(r#"{"namespace":"*","resource":"*","apiGroup":"*"}"#)]);
        assert!(!allowed(&abac, &user("alice", &[ALL_AUTHENTICATED]), &any));
        // A missing or null spec is an empty policy.
        let abac = load(&[
            r#"{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy"}"#
                .to_string(),
            v1(r#"{"user":null,"group":"g","namespace":"*","resource":"*","apiGroup":"*"}"#),
        ]);
        assert_eq!(abac.policies()[0], Policy::default());
        assert!(allowed(&abac, &user("u", &["g"]), &any));
    }

    #[test]
    fn v0_lines_are_converted_as_kube_does() {
        let abac = load(&[
            r#"{"user":"scheduler", "readonly": true, "resource": "pods", "namespace":"ns1"}"#
                .to_string(),
            r#"{"group":"ops"}"#.to_string(),
            r#"{"readonly": true}"#.to_string(),
            r#"{"user":"*", "namespace": "shared"}"#.to_string(),
            r#"{"apiVersion": "abac.authorization.kubernetes.io/v0", "kind": "Policy", "user": "v0user"}"#.to_string(),
        ]);
        let p = abac.policies();
        assert_eq!(
            p[0],
            Policy {
                user: "scheduler".into(),
                readonly: true,
                api_group: "*".into(),
                resource: "pods".into(),
                namespace: "ns1".into(),
                ..Policy::default()
            }
        );
        assert_eq!(
            p[1],
            Policy {
                group: "ops".into(),
                api_group: "*".into(),
                resource: "*".into(),
                namespace: "*".into(),
                non_resource_path: "*".into(),
                ..Policy::default()
            }
        );
        assert_eq!(
            p[2].group, ALL_AUTHENTICATED,
            "no subject: all authenticated"
        );
        assert_eq!(p[2].non_resource_path, "*");
        assert_eq!(
            (p[3].user.as_str(), p[3].group.as_str()),
            ("", ALL_AUTHENTICATED)
        );
        assert_eq!(p[3].non_resource_path, "", "a namespace was named");
        assert_eq!(p[4].user, "v0user");

        let scheduler = user("scheduler", &[]);
        assert!(allowed(
            &abac,
            &scheduler,
            &resource("list", "ns1", "apps", "pods")
        ));
        assert!(!allowed(
            &abac,
            &scheduler,
            &resource("create", "ns1", "", "pods")
        ));
        assert!(!allowed(
            &abac,
            &scheduler,
            &resource("get", "ns2", "", "pods")
        ));
        let ops = user("o", &["ops"]);
        assert!(allowed(
            &abac,
            &ops,
            &resource("delete", "any", "apps", "deployments")
        ));
        assert!(allowed(&abac, &ops, &path("post", "/anything")));
    }

    #[test]
    fn readonly_resources_and_groups() {
        let abac = load(&[
            v1(
                r#"{"user":"alice","namespace":"team-a","resource":"*","apiGroup":"*","readonly":true}"#,
            ),
            v1(r#"{"user":"bob","namespace":"*","resource":"deployments","apiGroup":"apps"}"#),
            v1(r#"{"user":"carol","namespace":"","resource":"namespaces","apiGroup":""}"#),
        ]);
        let alice = user("alice", &[]);
        for verb in ["get", "list", "watch"] {
            assert!(allowed(
                &abac,
                &alice,
                &resource(verb, "team-a", "", "configmaps")
            ));
        }
        for verb in [
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
            "proxy",
        ] {
            assert!(
                !allowed(&abac, &alice, &resource(verb, "team-a", "", "configmaps")),
                "{verb}"
            );
        }
        assert!(!allowed(
            &abac,
            &alice,
            &resource("get", "team-b", "", "configmaps")
        ));
        // A read-only resource policy does not cover paths.
        assert!(!allowed(&abac, &alice, &path("get", "/api")));

        let bob = user("bob", &[]);
        assert!(allowed(
            &abac,
            &bob,
            &resource("create", "x", "apps", "deployments")
        ));
        assert!(!allowed(
            &abac,
            &bob,
            &resource("create", "x", "extensions", "deployments")
        ));
        assert!(!allowed(
            &abac,
            &bob,
            &resource("create", "x", "apps", "statefulsets")
        ));
        // Subresources are matched on the resource, as kube does.
        let mut scale = resource("update", "x", "apps", "deployments");
        scale.subresource = "scale".into();
        assert!(allowed(&abac, &bob, &scale));

        // An empty namespace matches only cluster-scoped requests.
        let carol = user("carol", &[]);
        assert!(allowed(
            &abac,
            &carol,
            &resource("create", "", "", "namespaces")
        ));
        assert!(!allowed(
            &abac,
            &carol,
            &resource("create", "x", "", "namespaces")
        ));
    }

    #[test]
    fn non_resource_paths() {
        let abac = load(&[
            v1(r#"{"user":"exact","nonResourcePath":"/version"}"#),
            v1(r#"{"user":"prefix","nonResourcePath":"/apis/*","readonly":true}"#),
            v1(r#"{"user":"bare","nonResourcePath":"/api*"}"#),
            v1(r#"{"user":"all","nonResourcePath":"*"}"#),
        ]);
        let exact = user("exact", &[]);
        assert!(allowed(&abac, &exact, &path("get", "/version")));
        assert!(allowed(&abac, &exact, &path("post", "/version")));
        assert!(!allowed(&abac, &exact, &path("get", "/version/")));
        assert!(!allowed(&abac, &exact, &path("get", "/versions")));

        let prefix = user("prefix", &[]);
        assert!(allowed(&abac, &prefix, &path("get", "/apis/apps/v1")));
        assert!(allowed(&abac, &prefix, &path("get", "/apis/")));
        assert!(!allowed(&abac, &prefix, &path("get", "/apis")));
        assert!(!allowed(&abac, &prefix, &path("put", "/apis/x")));

        let bare = user("bare", &[]);
        for p in ["/api", "/api/v1", "/apis", "/apis/apps"] {
            assert!(allowed(&abac, &bare, &path("get", p)), "{p}");
        }
        assert!(!allowed(&abac, &bare, &path("get", "/healthz")));

        let all = user("all", &[]);
        assert!(allowed(&abac, &all, &path("delete", "/logs/x")));
        // Non-resource policies never match resource requests.
        assert!(!allowed(&abac, &all, &resource("get", "x", "", "pods")));
    }

    #[test]
    fn rules_for_lists_matching_policies() {
        let abac = load(&[
            v1(
                r#"{"user":"alice","namespace":"team-a","resource":"*","apiGroup":"*","readonly":true}"#,
            ),
            v1(r#"{"user":"alice","namespace":"*","resource":"pods","apiGroup":""}"#),
            v1(r#"{"group":"system:authenticated","nonResourcePath":"/api*","readonly":true}"#),
            v1(r#"{"user":"bob","namespace":"*","resource":"*","apiGroup":"*"}"#),
        ]);
        let alice = user("alice", &[ALL_AUTHENTICATED]);
        let rules = abac.rules_for(&alice, "team-a");
        assert!(!rules.incomplete);
        assert!(rules.errors.is_empty());
        assert_eq!(
            rules.resource_rules,
            vec![
                ResourceRule {
                    verbs: vec!["get".into(), "list".into(), "watch".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    resource_names: vec![],
                },
                ResourceRule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["".into()],
                    resources: vec!["pods".into()],
                    resource_names: vec![],
                },
            ]
        );
        // The path policy names no namespace, so (as in kube) it is listed only when the
        // asked namespace is empty.
        assert!(rules.non_resource_rules.is_empty());
        let cluster = abac.rules_for(&alice, "");
        assert_eq!(
            cluster.resource_rules.len(),
            1,
            "only the `*` namespace policy"
        );
        assert_eq!(
            cluster.non_resource_rules,
            vec![NonResourceRule {
                verbs: vec!["get".into(), "list".into(), "watch".into()],
                non_resource_urls: vec!["/api*".into()],
            }]
        );
        assert_eq!(
            abac.rules_for(&user("carol", &[]), "team-a"),
            RulesInfo::default()
        );
        assert_eq!(abac.name(), "ABAC");
    }
}

//! Impersonation: acting as another user through the `Impersonate-User`, `Impersonate-Uid`,
//! `Impersonate-Group` and `Impersonate-Extra-<key>` headers, as kube-apiserver's
//! `WithImpersonation` filter does.
//!
//! Every requested attribute is authorized on its own, for the *authenticated* requester, with
//! the verb `impersonate` on a synthetic resource request:
//!
//! | header | resource | API group | namespace | name |
//! | --- | --- | --- | --- | --- |
//! | `Impersonate-User: system:serviceaccount:<ns>:<sa>` | `serviceaccounts` | `""` | `<ns>` | `<sa>` |
//! | `Impersonate-User: <name>` | `users` | `""` | | `<name>` |
//! | `Impersonate-Group: <group>` | `groups` | `""` | | `<group>` |
//! | `Impersonate-Extra-<key>: <value>` | `userextras/<key>` | `authentication.k8s.io` | | `<value>` |
//! | `Impersonate-Uid: <uid>` | `uids` | `authentication.k8s.io` | | `<uid>` |
//!
//! The first denial ends the request with kube's 403 wording. When everything is allowed the
//! request continues as the impersonated identity, which is what authorization, audit and the
//! backends then see.
//!
//! Use: after authentication, call [`impersonate`] with the request headers, the
//! authenticated user and the same authorizer chain that authorizes requests; use the returned
//! identity (if any) from then on, and call [`strip_impersonation_headers`] before a request is
//! forwarded anywhere.

use std::collections::BTreeMap;
use std::fmt;

use crate::authz::{forbidden_message, Attributes, Authorizer};
use crate::request_info::RequestInfo;
use crate::user::{UserInfo, ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS};

/// The user to act as (kube's `authenticationv1.ImpersonateUserHeader`), lower-cased as
/// `http::HeaderName` stores names.
pub const IMPERSONATE_USER_HEADER: &str = "impersonate-user";
/// The uid to act with.
pub const IMPERSONATE_UID_HEADER: &str = "impersonate-uid";
/// One group to act with; repeatable.
pub const IMPERSONATE_GROUP_HEADER: &str = "impersonate-group";
/// Prefix of the headers that set one extra value each; the rest of the name is the
/// percent-encoded extra key.
pub const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";

/// The prefix of every impersonation header, for stripping.
const IMPERSONATE_PREFIX: &str = "impersonate-";

/// The group of the `userextras` and `uids` impersonation resources.
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
/// `authentication.k8s.io/v1`, the apiVersion kube gives the extra and uid requests.
const AUTHENTICATION_V1: &str = "authentication.k8s.io/v1";

/// kube's `serviceaccount.ServiceAccountUsernamePrefix`.
const SERVICE_ACCOUNT_USERNAME_PREFIX: &str = "system:serviceaccount:";
/// kube's `serviceaccount.AllServiceAccountsGroup`.
const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// Why impersonation headers could not be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImpersonationError {
    /// The headers do not form a valid request: groups, extra or a uid without a user
    /// (kube's `requested [...] without impersonating a user`), or a header value that is not
    /// valid UTF-8.
    ///
    /// kube-apiserver answers the first case with a plain-text 500
    /// (`responsewriters.InternalError`: `Internal Server Error: "<request URI>": <message>`);
    /// the caller chooses between that and a 400 `BadRequest` Status, which describes the
    /// fault better. Either way the request is not served.
    #[error("{0}")]
    Invalid(String),
    /// The requester may not impersonate one of the requested attributes.
    #[error("{}", .0.message)]
    Forbidden(Denied),
}

/// A denied impersonation: the whole of kube's 403 `Forbidden` message, e.g. `users "bob" is
/// forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster
/// scope`, and the object it names (the `Status` details: group, resource, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub message: String,
    pub group: String,
    pub resource: String,
    pub name: String,
}

/// One thing the headers ask to act as; kube models each as an `ObjectReference`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Target {
    /// The attributes of the `impersonate` check for this target, as kube fills its
    /// `AttributesRecord`: API version comes from the reference's apiVersion, which kube sets
    /// only for the extra and uid references.
    fn request_info(&self) -> RequestInfo {
        let (api_group, api_version, resource, subresource, namespace, name) = match self {
            Target::ServiceAccount { namespace, name } => (
                "",
                "",
                "serviceaccounts",
                "",
                namespace.as_str(),
                name.as_str(),
            ),
            Target::User(name) => ("", "", "users", "", "", name.as_str()),
            Target::Group(name) => ("", "", "groups", "", "", name.as_str()),
            Target::Extra { key, value } => (
                AUTHENTICATION_GROUP,
                "v1",
                "userextras",
                key.as_str(),
                "",
                value.as_str(),
            ),
            Target::Uid(uid) => (AUTHENTICATION_GROUP, "v1", "uids", "", "", uid.as_str()),
        };
        RequestInfo {
            is_resource_request: true,
            verb: "impersonate".to_string(),
            api_group: api_group.to_string(),
            api_version: api_version.to_string(),
            namespace: namespace.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            name: name.to_string(),
            ..RequestInfo::default()
        }
    }
}

impl fmt::Display for Target {
    /// Go's `%v` of the `v1.ObjectReference` kube builds (fields Kind, Namespace, Name, UID,
    /// APIVersion, ResourceVersion, FieldPath, space-separated in braces), so the "without
    /// impersonating a user" message reads as kube's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, namespace, name, api_version, field_path) = match self {
            Target::ServiceAccount { namespace, name } => {
                ("ServiceAccount", namespace.as_str(), name.as_str(), "", "")
            }
            Target::User(name) => ("User", "", name.as_str(), "", ""),
            Target::Group(name) => ("Group", "", name.as_str(), "", ""),
            Target::Extra { key, value } => (
                "UserExtra",
                "",
                value.as_str(),
                AUTHENTICATION_V1,
                key.as_str(),
            ),
            Target::Uid(uid) => ("UID", "", uid.as_str(), AUTHENTICATION_V1, ""),
        };
        // UID and ResourceVersion are always empty here.
        write!(
            f,
            "{{{kind} {namespace} {name}  {api_version}  {field_path}}}"
        )
    }
}

/// Applies the request's impersonation headers.
///
/// Returns `Ok(None)` when the request asks for no impersonation (no header, or only an empty
/// `Impersonate-User`), and otherwise the identity to act as once every requested attribute is
/// allowed for `requester`. Attributes are checked in kube's order (user, groups, extra, uid)
/// and the first denial is returned as [`ImpersonationError::Forbidden`].
pub async fn impersonate(
    headers: &http::HeaderMap,
    requester: &UserInfo,
    authorizer: &dyn Authorizer,
) -> Result<Option<UserInfo>, ImpersonationError> {
    // Nearly every request asks for none: one pass over the names says so, where looking
    // each header up by its name would parse and hash three names (~1,000 instructions).
    if !headers
        .keys()
        .any(|name| name.as_str().starts_with(IMPERSONATE_PREFIX))
    {
        return Ok(None);
    }
    let targets = requested_targets(headers)?;
    if targets.is_empty() {
        return Ok(None);
    }

    // Groups given in headers are the authority, including the all-authenticated and
    // all-unauthenticated groups; only without them does a service account get its fixed
    // groups. A header present with an empty value still counts as given, as in kube.
    let groups_specified = headers
        .get_all(IMPERSONATE_GROUP_HEADER)
        .iter()
        .next()
        .is_some();

    let mut username = String::new();
    let mut uid = String::new();
    let mut groups: Vec<String> = Vec::new();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for target in &targets {
        let request = target.request_info();
        let attributes = Attributes {
            user: requester,
            request: &request,
        };
        let decision = crate::authz::authorize(authorizer, &attributes).await;
        if !decision.is_allowed() {
            // An authorizer that could not decide forbids too (kube's impersonation filter).
            let reason = decision.reason();
            return Err(ImpersonationError::Forbidden(Denied {
                message: forbidden(&attributes, reason),
                group: attributes.request.api_group.clone(),
                resource: attributes.request.resource.clone(),
                name: attributes.request.name.clone(),
            }));
        }
        match target {
            Target::ServiceAccount { namespace, name } => {
                username = format!("{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{name}");
                if !groups_specified {
                    groups = vec![
                        ALL_SERVICE_ACCOUNTS_GROUP.to_string(),
                        format!("{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}"),
                    ];
                }
            }
            Target::User(name) => username = name.clone(),
            Target::Group(group) => groups.push(group.clone()),
            Target::Extra { key, value } => {
                extra.entry(key.clone()).or_default().push(value.clone())
            }
            Target::Uid(value) => uid = value.clone(),
        }
    }

    // kube's rule: an impersonated user is authenticated unless the headers already placed it
    // in one of the two virtual groups; `system:anonymous` is unauthenticated instead.
    if username != ANONYMOUS {
        if !groups
            .iter()
            .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED)
        {
            groups.push(ALL_AUTHENTICATED.to_string());
        }
    } else if !groups.iter().any(|g| g == ALL_UNAUTHENTICATED) {
        groups.push(ALL_UNAUTHENTICATED.to_string());
    }

    Ok(Some(UserInfo {
        name: username,
        uid,
        groups,
        extra,
    }))
}

/// Removes every `Impersonate-*` header, so nothing after the impersonation stage (and no
/// server a request is forwarded to) can read a client's identity claims.
///
/// kube deletes only the four headers it understands; any `Impersonate-` header is removed
/// here, because a gateway forwards requests to servers that may understand more of them
/// than it does.
pub fn strip_impersonation_headers(headers: &mut http::HeaderMap) {
    for name in impersonation_header_names(headers) {
        headers.remove(&name);
    }
}

/// The names of every `Impersonate-*` header present, for header containers that cannot lend
/// out a mutable `http::HeaderMap` (pingora's `RequestHeader` keeps a case map beside it and
/// must be changed through its own `remove_header`).
pub fn impersonation_header_names(headers: &http::HeaderMap) -> Vec<http::HeaderName> {
    headers
        .keys()
        .filter(|name| name.as_str().starts_with(IMPERSONATE_PREFIX))
        .cloned()
        .collect()
}

/// kube's 403 message for a denied impersonation: `NewForbidden(<resource>.<group>, <name>,
/// <forbidden message>[: <reason>])`. The qualified resource leaves out the subresource, the
/// inner message keeps it (`userextras/scopes`).
fn forbidden(attributes: &Attributes<'_>, reason: &str) -> String {
    let request = attributes.request;
    let resource = if request.api_group.is_empty() {
        request.resource.clone()
    } else {
        format!("{}.{}", request.resource, request.api_group)
    };
    let why = forbidden_message(attributes, reason);
    if request.name.is_empty() {
        format!("{resource} is forbidden: {why}")
    } else {
        format!("{resource} \"{}\" is forbidden: {why}", request.name)
    }
}

/// kube's `buildImpersonationRequests`: what the headers ask for, in check order (user,
/// groups, extra, uid).
fn requested_targets(headers: &http::HeaderMap) -> Result<Vec<Target>, ImpersonationError> {
    let mut targets = Vec::new();

    // Only the first value of the single-valued headers counts (Go's `Header.Get`).
    let user = first_value(headers, IMPERSONATE_USER_HEADER)?;
    let has_user = !user.is_empty();
    if has_user {
        targets.push(match split_service_account_username(&user) {
            Some((namespace, name)) => Target::ServiceAccount { namespace, name },
            None => Target::User(user),
        });
    }

    let mut has_groups = false;
    for value in headers.get_all(IMPERSONATE_GROUP_HEADER) {
        has_groups = true;
        targets.push(Target::Group(header_text(IMPERSONATE_GROUP_HEADER, value)?));
    }

    let mut has_extra = false;
    for name in headers.keys() {
        let Some(encoded_key) = name.as_str().strip_prefix(IMPERSONATE_EXTRA_PREFIX) else {
            continue;
        };
        has_extra = true;
        // Header names are case-insensitive, so keys are lower-case; anything else a key
        // needs (`/`, upper case, non-ASCII) travels percent-encoded.
        let key = unescape_extra_key(encoded_key);
        for value in headers.get_all(name) {
            targets.push(Target::Extra {
                key: key.clone(),
                value: header_text(name.as_str(), value)?,
            });
        }
    }

    let uid = first_value(headers, IMPERSONATE_UID_HEADER)?;
    let has_uid = !uid.is_empty();
    if has_uid {
        targets.push(Target::Uid(uid));
    }

    if (has_groups || has_extra || has_uid) && !has_user {
        let listed: Vec<String> = targets.iter().map(Target::to_string).collect();
        return Err(ImpersonationError::Invalid(format!(
            "requested [{}] without impersonating a user",
            listed.join(" ")
        )));
    }
    Ok(targets)
}

/// The first value of a header as text, `""` when absent.
fn first_value(headers: &http::HeaderMap, name: &str) -> Result<String, ImpersonationError> {
    match headers.get(name) {
        Some(value) => header_text(name, value),
        None => Ok(String::new()),
    }
}

/// A header value as text. Go takes the raw bytes; values that are not UTF-8 are refused here
/// rather than replaced, because a lossy conversion would authorize and act as a name the
/// client never sent.
fn header_text(name: &str, value: &http::HeaderValue) -> Result<String, ImpersonationError> {
    std::str::from_utf8(value.as_bytes())
        .map(str::to_string)
        .map_err(|_| ImpersonationError::Invalid(format!("the {name} header is not valid UTF-8")))
}

/// kube's `unescapeExtraKey`: the key percent-decoded as a path segment (`+` stays `+`), or
/// left as it is when the escapes are malformed, so a key is always recorded. A decoding that
/// is not UTF-8 is also left encoded (Go would keep the raw bytes; Rust strings cannot).
fn unescape_extra_key(encoded: &str) -> String {
    let bytes = encoded.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return encoded.to_string();
    }
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .map(|key| key.into_owned())
        .unwrap_or_else(|_| encoded.to_string())
}

/// kube's `serviceaccount.SplitUsername`: `system:serviceaccount:<namespace>:<name>` with a
/// valid namespace (DNS-1123 label) and name (DNS-1123 subdomain); anything else is an
/// ordinary user name.
fn split_service_account_username(username: &str) -> Option<(String, String)> {
    let rest = username.strip_prefix(SERVICE_ACCOUNT_USERNAME_PREFIX)?;
    let mut parts = rest.split(':');
    let (namespace, name) = (parts.next()?, parts.next()?);
    if parts.next().is_some() || !is_dns1123_label(namespace) || !is_dns1123_subdomain(name) {
        return None;
    }
    Some((namespace.to_string(), name.to_string()))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
fn is_dns1123_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// DNS-1123 labels joined by dots, at most 253 characters.
fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253 && value.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::Decision;
    use std::sync::Mutex;

    /// One rule of the fake authorizer: who may impersonate what (`*` matches anything).
    struct Rule {
        user: &'static str,
        resource: &'static str,
        group: &'static str,
        namespace: &'static str,
        name: &'static str,
    }

    /// Allows what its rules list, denies the rest with a fixed reason, and records every
    /// request it was asked about.
    struct FakeAuthorizer {
        rules: Vec<Rule>,
        deny_reason: &'static str,
        seen: Mutex<Vec<RequestInfo>>,
    }

    impl FakeAuthorizer {
        fn new(rules: Vec<Rule>) -> Self {
            FakeAuthorizer {
                rules,
                deny_reason: "",
                seen: Mutex::new(Vec::new()),
            }
        }

        fn seen(&self) -> Vec<RequestInfo> {
            self.seen.lock().map(|s| s.clone()).unwrap_or_default()
        }
    }

    fn matches(pattern: &str, value: &str) -> bool {
        pattern == "*" || pattern == value
    }

    #[async_trait::async_trait]
    impl Authorizer for FakeAuthorizer {
        fn name(&self) -> &'static str {
            "fake"
        }

        async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
            let r = attributes.request;
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(r.clone());
            }
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let allowed = r.verb == "impersonate"
                && r.is_resource_request
                && self.rules.iter().any(|rule| {
                    matches(rule.user, &attributes.user.name)
                        && matches(rule.resource, &resource)
                        && rule.group == r.api_group
                        && matches(rule.namespace, &r.namespace)
                        && matches(rule.name, &r.name)
                });
            if allowed {
                Decision::Allow(String::new())
            } else {
                Decision::NoOpinion(self.deny_reason.to_string())
            }
        }
    }

    fn rule(
        user: &'static str,
        resource: &'static str,
        group: &'static str,
        name: &'static str,
    ) -> Rule {
        Rule {
            user,
            resource,
            group,
            namespace: "*",
            name,
        }
    }

    /// alice may impersonate anything; bob only the user `carol` and the group `devs`.
    fn authorizer() -> FakeAuthorizer {
        FakeAuthorizer::new(vec![
            rule("alice", "*", "", "*"),
            rule("alice", "*", AUTHENTICATION_GROUP, "*"),
            rule("bob", "users", "", "carol"),
            rule("bob", "groups", "", "devs"),
        ])
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            match (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_str(value),
            ) {
                (Ok(n), Ok(v)) => {
                    map.append(n, v);
                }
                _ => panic!("bad test header {name}: {value}"),
            }
        }
        map
    }

    fn user(name: &str) -> UserInfo {
        UserInfo::new(name, vec![ALL_AUTHENTICATED.to_string()])
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|s| s.to_string()).collect()
    }

    fn extra(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), strings(v)))
            .collect()
    }

    #[tokio::test]
    async fn identities_like_kube() {
        struct Case {
            name: &'static str,
            headers: Vec<(&'static str, &'static str)>,
            want: Option<UserInfo>,
        }
        let cases = vec![
            Case {
                name: "no headers",
                headers: vec![("authorization", "Bearer x")],
                want: None,
            },
            Case {
                name: "an empty user alone asks for nothing",
                headers: vec![("impersonate-user", "")],
                want: None,
            },
            Case {
                name: "user",
                headers: vec![("impersonate-user", "bob")],
                want: Some(UserInfo::new("bob", strings(&["system:authenticated"]))),
            },
            Case {
                name: "user with groups",
                headers: vec![
                    ("impersonate-user", "bob"),
                    ("impersonate-group", "devs"),
                    ("impersonate-group", "ops"),
                ],
                want: Some(UserInfo::new(
                    "bob",
                    strings(&["devs", "ops", "system:authenticated"]),
                )),
            },
            Case {
                name: "explicit system:authenticated is not doubled",
                headers: vec![
                    ("impersonate-user", "bob"),
                    ("impersonate-group", "system:authenticated"),
                ],
                want: Some(UserInfo::new("bob", strings(&["system:authenticated"]))),
            },
            Case {
                name: "explicit system:unauthenticated keeps authenticated out",
                headers: vec![
                    ("impersonate-user", "bob"),
                    ("impersonate-group", "system:unauthenticated"),
                ],
                want: Some(UserInfo::new("bob", strings(&["system:unauthenticated"]))),
            },
            Case {
                name: "service account gets its groups",
                headers: vec![("impersonate-user", "system:serviceaccount:team-a:builder")],
                want: Some(UserInfo::new(
                    "system:serviceaccount:team-a:builder",
                    strings(&[
                        "system:serviceaccounts",
                        "system:serviceaccounts:team-a",
                        "system:authenticated",
                    ]),
                )),
            },
            Case {
                name: "service account with groups: the headers are the authority",
                headers: vec![
                    ("impersonate-user", "system:serviceaccount:team-a:builder"),
                    ("impersonate-group", "devs"),
                ],
                want: Some(UserInfo::new(
                    "system:serviceaccount:team-a:builder",
                    strings(&["devs", "system:authenticated"]),
                )),
            },
            Case {
                name: "an invalid service account name is an ordinary user",
                headers: vec![("impersonate-user", "system:serviceaccount:Team:builder")],
                want: Some(UserInfo::new(
                    "system:serviceaccount:Team:builder",
                    strings(&["system:authenticated"]),
                )),
            },
            Case {
                name: "anonymous is unauthenticated",
                headers: vec![("impersonate-user", "system:anonymous")],
                want: Some(UserInfo::new(
                    "system:anonymous",
                    strings(&["system:unauthenticated"]),
                )),
            },
            Case {
                name: "anonymous with groups",
                headers: vec![
                    ("impersonate-user", "system:anonymous"),
                    ("impersonate-group", "system:authenticated"),
                ],
                want: Some(UserInfo::new(
                    "system:anonymous",
                    strings(&["system:authenticated", "system:unauthenticated"]),
                )),
            },
            Case {
                name: "uid and extra (keys percent-decoded, values repeatable)",
                headers: vec![
                    ("impersonate-user", "bob"),
                    ("impersonate-uid", "1234"),
                    ("impersonate-extra-scopes", "view"),
                    ("impersonate-extra-scopes", "edit"),
                    ("impersonate-extra-example.com%2fteam", "a+b"),
                    ("impersonate-extra-bad%zzkey", "x"),
                ],
                want: Some(UserInfo {
                    name: "bob".into(),
                    uid: "1234".into(),
                    groups: strings(&["system:authenticated"]),
                    extra: extra(&[
                        ("scopes", &["view", "edit"]),
                        ("example.com/team", &["a+b"]),
                        ("bad%zzkey", &["x"]),
                    ]),
                }),
            },
        ];
        for case in cases {
            let authz = authorizer();
            let got = impersonate(&headers(&case.headers), &user("alice"), &authz).await;
            assert_eq!(got, Ok(case.want), "{}", case.name);
        }
    }

    #[tokio::test]
    async fn attributes_like_kube() {
        let authz = authorizer();
        let h = headers(&[
            ("impersonate-user", "system:serviceaccount:team-a:builder"),
            ("impersonate-group", "devs"),
            ("impersonate-extra-example.com%2Fscope", "view"),
            ("impersonate-uid", "1234"),
        ]);
        let got = impersonate(&h, &user("alice"), &authz).await;
        assert!(matches!(got, Ok(Some(_))), "{got:?}");
        let seen: Vec<_> = authz
            .seen()
            .into_iter()
            .map(|r| {
                assert!(r.is_resource_request);
                assert_eq!(r.verb, "impersonate");
                (
                    r.api_group,
                    r.api_version,
                    r.namespace,
                    r.resource,
                    r.subresource,
                    r.name,
                )
            })
            .collect();
        let row = |g: &str, v: &str, ns: &str, res: &str, sub: &str, name: &str| {
            (
                g.to_string(),
                v.to_string(),
                ns.to_string(),
                res.to_string(),
                sub.to_string(),
                name.to_string(),
            )
        };
        assert_eq!(
            seen,
            vec![
                row("", "", "team-a", "serviceaccounts", "", "builder"),
                row("", "", "", "groups", "", "devs"),
                row(
                    "authentication.k8s.io",
                    "v1",
                    "",
                    "userextras",
                    "example.com/scope",
                    "view"
                ),
                row("authentication.k8s.io", "v1", "", "uids", "", "1234"),
            ]
        );
    }

    #[tokio::test]
    async fn denials_use_kube_wording() {
        struct Case {
            name: &'static str,
            headers: Vec<(&'static str, &'static str)>,
            reason: &'static str,
            want: &'static str,
            checks: usize,
        }
        let cases = vec![
            Case {
                name: "user",
                headers: vec![("impersonate-user", "dave")],
                reason: "",
                want: r#"users "dave" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope"#,
                checks: 1,
            },
            Case {
                name: "service account, namespaced",
                headers: vec![("impersonate-user", "system:serviceaccount:ns:sa")],
                reason: "",
                want: r#"serviceaccounts "sa" is forbidden: User "bob" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns""#,
                checks: 1,
            },
            Case {
                name: "the first denied group stops the checks, with the reason",
                headers: vec![
                    ("impersonate-user", "carol"),
                    ("impersonate-group", "devs"),
                    ("impersonate-group", "system:masters"),
                    ("impersonate-uid", "1"),
                ],
                reason: "no RBAC policy matched",
                want: r#"groups "system:masters" is forbidden: User "bob" cannot impersonate resource "groups" in API group "" at the cluster scope: no RBAC policy matched"#,
                checks: 3,
            },
            Case {
                name: "extra names the group and the key",
                headers: vec![
                    ("impersonate-user", "carol"),
                    ("impersonate-extra-scopes", "admin"),
                ],
                reason: "",
                want: r#"userextras.authentication.k8s.io "admin" is forbidden: User "bob" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope"#,
                checks: 2,
            },
            Case {
                name: "uid",
                headers: vec![("impersonate-user", "carol"), ("impersonate-uid", "u-1")],
                reason: "",
                want: r#"uids.authentication.k8s.io "u-1" is forbidden: User "bob" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope"#,
                checks: 2,
            },
            Case {
                name: "an empty group has no name",
                headers: vec![("impersonate-user", "carol"), ("impersonate-group", "")],
                reason: "",
                want: r#"groups is forbidden: User "bob" cannot impersonate resource "groups" in API group "" at the cluster scope"#,
                checks: 2,
            },
        ];
        for case in cases {
            let mut authz = authorizer();
            authz.deny_reason = case.reason;
            let got = impersonate(&headers(&case.headers), &user("bob"), &authz).await;
            let message = match got {
                Err(ImpersonationError::Forbidden(denied)) => denied.message,
                other => panic!("{}: {other:?}", case.name),
            };
            assert_eq!(message, case.want, "{}", case.name);
            assert_eq!(authz.seen().len(), case.checks, "{}", case.name);
        }
    }

    #[tokio::test]
    async fn attributes_without_a_user_are_refused() {
        let cases = [
            (
                vec![("impersonate-group", "devs"), ("impersonate-group", "ops")],
                "requested [{Group  devs    } {Group  ops    }] without impersonating a user",
            ),
            (
                vec![("impersonate-extra-scopes", "view")],
                "requested [{UserExtra  view  authentication.k8s.io/v1  scopes}] without impersonating a user",
            ),
            (
                vec![("impersonate-uid", "u-1")],
                "requested [{UID  u-1  authentication.k8s.io/v1  }] without impersonating a user",
            ),
            (
                vec![("impersonate-user", ""), ("impersonate-group", "devs")],
                "requested [{Group  devs    }] without impersonating a user",
            ),
        ];
        for (pairs, want) in cases {
            let authz = authorizer();
            let got = impersonate(&headers(&pairs), &user("alice"), &authz).await;
            assert_eq!(got, Err(ImpersonationError::Invalid(want.to_string())));
            assert!(authz.seen().is_empty(), "nothing is authorized first");
        }
    }

    #[tokio::test]
    async fn non_utf8_values_are_refused() {
        let mut h = http::HeaderMap::new();
        h.insert(
            IMPERSONATE_USER_HEADER,
            http::HeaderValue::from_bytes(b"b\xffb").unwrap_or_else(|e| panic!("{e}")),
        );
        let got = impersonate(&h, &user("alice"), &authorizer()).await;
        assert!(
            matches!(got, Err(ImpersonationError::Invalid(_))),
            "{got:?}"
        );
        // Valid UTF-8 beyond ASCII is a name like any other.
        let mut h = http::HeaderMap::new();
        h.insert(
            IMPERSONATE_USER_HEADER,
            http::HeaderValue::from_bytes("jos\u{e9}".as_bytes()).unwrap_or_else(|e| panic!("{e}")),
        );
        let got = impersonate(&h, &user("alice"), &authorizer()).await;
        assert_eq!(
            got.map(|u| u.map(|u| u.name)),
            Ok(Some("jos\u{e9}".to_string()))
        );
    }

    #[test]
    fn strip_removes_every_impersonation_header() {
        let mut h = headers(&[
            ("impersonate-user", "bob"),
            ("impersonate-group", "a"),
            ("impersonate-group", "b"),
            ("impersonate-uid", "1"),
            ("impersonate-extra-scopes", "x"),
            ("impersonate-extra-other", "y"),
            ("impersonate-something-new", "z"),
            ("authorization", "Bearer t"),
            ("x-impersonate-user", "kept"),
        ]);
        let mut names: Vec<String> = impersonation_header_names(&h)
            .iter()
            .map(|n| n.to_string())
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            vec![
                "impersonate-extra-other",
                "impersonate-extra-scopes",
                "impersonate-group",
                "impersonate-something-new",
                "impersonate-uid",
                "impersonate-user",
            ]
        );
        strip_impersonation_headers(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, vec!["authorization", "x-impersonate-user"]);
    }

    #[test]
    fn service_account_usernames_split_like_kube() {
        let split = |u: &str| split_service_account_username(u);
        assert_eq!(
            split("system:serviceaccount:ns:sa.v1"),
            Some(("ns".into(), "sa.v1".into()))
        );
        for bad in [
            "system:serviceaccount:ns",
            "system:serviceaccount:ns:sa:extra",
            "system:serviceaccount::sa",
            "system:serviceaccount:ns:",
            "system:serviceaccount:n.s:sa",
            "system:serviceaccount:ns:Sa",
            "system:serviceaccounts:ns:sa",
            "alice",
        ] {
            assert_eq!(split(bad), None, "{bad}");
        }
        let long_label = "a".repeat(64);
        assert!(!is_dns1123_label(&long_label));
        assert!(is_dns1123_label(&long_label[..63]));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain("a..b"));
    }

    #[test]
    fn extra_keys_unescape_like_go_path_unescape() {
        assert_eq!(unescape_extra_key("scopes"), "scopes");
        assert_eq!(unescape_extra_key("a%2fb"), "a/b");
        assert_eq!(unescape_extra_key("a%2Fb%20c"), "a/b c");
        assert_eq!(unescape_extra_key("a+b"), "a+b");
        assert_eq!(unescape_extra_key("a%2"), "a%2");
        assert_eq!(unescape_extra_key("a%g0"), "a%g0");
        assert_eq!(unescape_extra_key("caf%c3%a9"), "caf\u{e9}");
        assert_eq!(unescape_extra_key("a%ff"), "a%ff");
    }
}

//! Front-proxy authentication, as kube's `request/headerrequest` behind its x509 CA verifier
//! (`--requestheader-*` flags): a client whose certificate verifies against the
//! request-header CA bundle (and, when allowed names are configured, whose common name is one
//! of them) is a front proxy, and the identity headers it sends name the user.
//!
//! The identity headers are only believed from such a proxy. Everyone else's are ignored here,
//! and [`IdentityHeaders::strip`] removes them from the request once authentication is done,
//! so no later stage or upstream ever takes them for an authenticated identity.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use http::header::{HeaderMap, HeaderName};

use super::ca_bundle::CaBundle;
use super::x509::certificate_identifier;
use super::{Authenticator, AuthnOutcome, AuthnRequest, PeerCertificate};
use crate::user::UserInfo;

/// kube's defaults for `--requestheader-username-headers` and friends, also stripped when
/// front-proxy authentication is not configured.
pub const DEFAULT_USERNAME_HEADERS: &[&str] = &["X-Remote-User"];
pub const DEFAULT_UID_HEADERS: &[&str] = &["X-Remote-Uid"];
pub const DEFAULT_GROUP_HEADERS: &[&str] = &["X-Remote-Group"];
pub const DEFAULT_EXTRA_PREFIXES: &[&str] = &["X-Remote-Extra-"];

/// Trusts identity headers from front proxies; see the module documentation.
#[derive(Debug, Clone)]
pub struct RequestHeaderAuthenticator {
    bundle: Arc<CaBundle>,
    allowed_names: Vec<String>,
    username_headers: Vec<HeaderName>,
    uid_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    /// Lowercase, since header names are matched without regard to case.
    extra_prefixes: Vec<String>,
}

impl RequestHeaderAuthenticator {
    /// `bundle` is `--requestheader-client-ca-file`; an empty `allowed_names` accepts any
    /// common name the CA signed. Header names are trimmed; an empty or malformed one is a
    /// configuration error, as in kube.
    pub fn new(
        bundle: Arc<CaBundle>,
        allowed_names: Vec<String>,
        username_headers: Vec<String>,
        uid_headers: Vec<String>,
        group_headers: Vec<String>,
        extra_prefixes: Vec<String>,
    ) -> Result<Self, String> {
        let names = |list: &[String]| -> Result<Vec<HeaderName>, String> {
            list.iter().map(|name| header_name(name)).collect()
        };
        let extra_prefixes = extra_prefixes
            .iter()
            .map(|prefix| {
                let trimmed = prefix.trim();
                if trimmed.is_empty() {
                    return Err(format!("empty header {prefix:?}"));
                }
                Ok(trimmed.to_ascii_lowercase())
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(RequestHeaderAuthenticator {
            bundle,
            allowed_names,
            username_headers: names(&username_headers)?,
            uid_headers: names(&uid_headers)?,
            group_headers: names(&group_headers)?,
            extra_prefixes,
        })
    }

    /// Every header this authenticator reads, plus kube's `X-Remote-*` defaults: what the
    /// pipeline strips from each request after authentication.
    pub fn identity_headers(&self) -> IdentityHeaders {
        let mut headers = IdentityHeaders::defaults();
        for name in self
            .username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
        {
            headers.add_name(name.clone());
        }
        for prefix in &self.extra_prefixes {
            headers.add_prefix(prefix);
        }
        headers
    }

    /// Whether the connection's certificate makes it a front proxy. `Err` when the
    /// certificate is the request-header CA's but cannot be accepted (expired, wrong key usage,
    /// common name not allowed): kube rejects the request then rather than ignoring it.
    fn front_proxy(&self, certificate: &PeerCertificate, now: SystemTime) -> Result<bool, String> {
        let Some(leaf) = certificate.chain.first() else {
            return Ok(false);
        };
        if let Err(reason) =
            self.bundle
                .verify_digested(&certificate.chain, certificate.chain_digest(), now)
        {
            if self.bundle.issued(&certificate.chain) {
                return Err(format!(
                    "verifying certificate {} failed: {reason}",
                    certificate_identifier(leaf)
                ));
            }
            // Another CA's certificate (an ordinary x509 client): not a proxy, and its
            // identity headers mean nothing.
            return Ok(false);
        }
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(&certificate.common_name)
        {
            return Err(format!(
                "x509: subject with cn={} is not in the allowed list",
                certificate.common_name
            ));
        }
        Ok(true)
    }

    fn user_from_headers(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let name = first_value(headers, &self.username_headers)?;
        let uid = first_value(headers, &self.uid_headers).unwrap_or_default();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|header| headers.get_all(header))
            .map(|value| text(value.as_bytes()))
            .filter(|value| !value.is_empty())
            .collect();
        Some(UserInfo {
            name,
            uid,
            groups,
            extra: extra_from_headers(headers, &self.extra_prefixes),
        })
    }
}

#[async_trait::async_trait]
impl Authenticator for RequestHeaderAuthenticator {
    fn name(&self) -> &'static str {
        "requestheader"
    }

    async fn authenticate(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        self.decide(request)
    }

    fn authenticate_now(&self, request: &AuthnRequest<'_>) -> Option<AuthnOutcome> {
        Some(self.decide(request))
    }
}

impl RequestHeaderAuthenticator {
    fn decide(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        let Some(certificate) = request.peer_certificate else {
            return AuthnOutcome::NoCredential;
        };
        match self.front_proxy(certificate, SystemTime::now()) {
            Err(reason) => AuthnOutcome::Failed(reason),
            Ok(false) => AuthnOutcome::NoCredential,
            // A proxy request without a user name is the proxy's own request with no identity
            // claimed: kube answers "no opinion" and lets the other authenticators decide.
            Ok(true) => match self.user_from_headers(request.headers) {
                Some(user) => AuthnOutcome::Authenticated(Arc::new(user)),
                None => AuthnOutcome::NoCredential,
            },
        }
    }
}

fn header_name(name: &str) -> Result<HeaderName, String> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(format!("empty header {name:?}"));
    }
    HeaderName::from_bytes(trimmed.as_bytes()).map_err(|_| format!("invalid header name {name:?}"))
}

/// Header values as Go sees them: bytes taken as they are (a value that is not UTF-8 cannot be
/// kept exactly in a Rust string; it gets replacement characters, which is also what it looks
/// like once kube writes it out as JSON).
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Go's `Header.Get` over a list of headers: the first value of each header in turn, the
/// first non-empty one wins.
fn first_value(headers: &HeaderMap, names: &[HeaderName]) -> Option<String> {
    names
        .iter()
        .filter_map(|name| headers.get(name))
        .map(|value| text(value.as_bytes()))
        .find(|value| !value.is_empty())
}

/// kube's `newExtra`: every header starting with one of the prefixes (any case) adds all its
/// values, empty ones included, under the rest of its name lowercased and then
/// percent-decoded (kept as it was when the encoding is malformed).
fn extra_from_headers(headers: &HeaderMap, prefixes: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in prefixes {
        for name in headers.keys() {
            // `http` stores names in lowercase, so a lowercase prefix compares case-blind.
            let Some(encoded) = name.as_str().strip_prefix(prefix.as_str()) else {
                continue;
            };
            let key = unescape_extra_key(encoded);
            let values = extra.entry(key).or_default();
            values.extend(headers.get_all(name).iter().map(|v| text(v.as_bytes())));
        }
    }
    extra
}

/// Go's `url.PathUnescape`, falling back to the input when an escape is malformed as kube's
/// `unescapeExtraKey` does. Unlike query unescaping, `+` stays a plus.
pub fn unescape_extra_key(encoded: &str) -> String {
    let bytes = encoded.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let high = bytes.get(i + 1).and_then(|b| hex_value(*b));
            let low = bytes.get(i + 2).and_then(|b| hex_value(*b));
            match (high, low) {
                (Some(high), Some(low)) => decoded.push((high << 4) | low),
                _ => return encoded.to_string(),
            }
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    text(&decoded)
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// The headers that carry front-proxy identity claims: exact names and name prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityHeaders {
    names: Vec<HeaderName>,
    /// Lowercase.
    prefixes: Vec<String>,
}

impl IdentityHeaders {
    /// kube's defaults: `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group`, `X-Remote-Extra-*`.
    pub fn defaults() -> Self {
        let mut headers = IdentityHeaders {
            names: Vec::new(),
            prefixes: Vec::new(),
        };
        for name in DEFAULT_USERNAME_HEADERS
            .iter()
            .chain(DEFAULT_UID_HEADERS)
            .chain(DEFAULT_GROUP_HEADERS)
        {
            if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
                headers.add_name(name);
            }
        }
        for prefix in DEFAULT_EXTRA_PREFIXES {
            headers.add_prefix(prefix);
        }
        headers
    }

    fn add_name(&mut self, name: HeaderName) {
        if !self.names.contains(&name) {
            self.names.push(name);
        }
    }

    fn add_prefix(&mut self, prefix: &str) {
        let prefix = prefix.trim().to_ascii_lowercase();
        if !prefix.is_empty() && !self.prefixes.contains(&prefix) {
            self.prefixes.push(prefix);
        }
    }

    /// Whether a header carries an identity claim.
    pub fn matches(&self, name: &HeaderName) -> bool {
        self.names.contains(name)
            || self
                .prefixes
                .iter()
                .any(|prefix| name.as_str().starts_with(prefix.as_str()))
    }

    /// The identity headers a request carries, each name once: for header types that must be
    /// edited through their own methods (pingora's `RequestHeader::remove_header` keeps its
    /// case map in step).
    pub fn present(&self, headers: &HeaderMap) -> Vec<HeaderName> {
        headers
            .keys()
            .filter(|name| self.matches(name))
            .cloned()
            .collect()
    }

    /// Removes every identity header (all values) and answers how many distinct headers went.
    /// Call it on every request once authentication has run: a proxy's headers have been
    /// used by then (kube clears them too), anyone else's must not reach later stages.
    pub fn strip(&self, headers: &mut HeaderMap) -> usize {
        let doomed = self.present(headers);
        for name in &doomed {
            headers.remove(name);
        }
        doomed.len()
    }
}

/// The identity headers to strip given the configured request-header flags (any of them
/// empty when front-proxy authentication is off), always including kube's `X-Remote-*`
/// defaults. Names that are not valid header names cannot occur in a request and are skipped.
pub fn identity_header_names(
    username_headers: &[String],
    uid_headers: &[String],
    group_headers: &[String],
    extra_prefixes: &[String],
) -> IdentityHeaders {
    let mut headers = IdentityHeaders::defaults();
    for name in username_headers
        .iter()
        .chain(uid_headers)
        .chain(group_headers)
    {
        if let Ok(name) = header_name(name) {
            headers.add_name(name);
        }
    }
    for prefix in extra_prefixes {
        headers.add_prefix(prefix);
    }
    headers
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::authn::ca_bundle::tests::{bundle_file, ca, TestCa};
    use crate::authn::union::UnionAuthenticator;
    use crate::authn::x509::X509Authenticator;
    use crate::user::ALL_AUTHENTICATED;
    use http::HeaderValue;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Runs a future that never waits on I/O (authenticators here answer at once).
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    struct Setup {
        _dir: tempfile::TempDir,
        proxy_ca: TestCa,
        client_ca: TestCa,
        proxy_bundle: Arc<CaBundle>,
        client_bundle: Arc<CaBundle>,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let (proxy_ca, client_ca) = (ca("front-proxy-ca"), ca("client-ca"));
        let proxy_bundle =
            Arc::new(CaBundle::load(bundle_file(&dir, "rh.crt", &proxy_ca.pem)).unwrap());
        let client_bundle =
            Arc::new(CaBundle::load(bundle_file(&dir, "ca.crt", &client_ca.pem)).unwrap());
        Setup {
            _dir: dir,
            proxy_ca,
            client_ca,
            proxy_bundle,
            client_bundle,
        }
    }

    fn authenticator(bundle: &Arc<CaBundle>, allowed: &[&str]) -> RequestHeaderAuthenticator {
        RequestHeaderAuthenticator::new(
            bundle.clone(),
            strings(allowed),
            strings(&["X-Remote-User", "X-Forwarded-User"]),
            strings(&["X-Remote-Uid"]),
            strings(&["X-Remote-Group", "X-Forwarded-Groups"]),
            strings(&["X-Remote-Extra-", "X-Forwarded-Extra-"]),
        )
        .unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn run(
        authenticator: &dyn Authenticator,
        leaf: Option<&[u8]>,
        headers: &HeaderMap,
    ) -> AuthnOutcome {
        let peer = leaf.map(|der| PeerCertificate::from_chain(vec![der.to_vec()]).unwrap());
        let request = AuthnRequest {
            headers,
            peer_certificate: peer.as_ref(),
            token_memo: None,
        };
        block_on(authenticator.authenticate(&request))
    }

    #[test]
    fn a_front_proxy_names_the_user() {
        let s = setup();
        let rh = authenticator(&s.proxy_bundle, &[]);
        let proxy = s.proxy_ca.leaf("front-proxy-client", &[]);
        let request = headers(&[
            ("X-Remote-User", ""),
            ("x-forwarded-user", "alice"),
            ("X-Forwarded-User", "mallory"),
            ("X-Remote-Uid", "42"),
            ("X-Remote-Group", "dev"),
            ("X-Remote-Group", ""),
            ("X-Remote-Group", "ops"),
            ("X-Forwarded-Groups", "qa"),
            ("X-Remote-Extra-Scopes", "read"),
            ("x-remote-extra-scopes", "write"),
            ("X-Forwarded-Extra-Scopes", "admin"),
            ("X-Remote-Extra-Example.com%2Fteam", "blue"),
            ("X-Remote-Extra-Empty", ""),
            ("X-Remote-Extra-Bad%zz", "kept"),
        ]);
        let mut expected = UserInfo::new("alice", strings(&["dev", "ops", "qa"]));
        expected.uid = "42".into();
        expected.extra = BTreeMap::from([
            ("scopes".to_string(), strings(&["read", "write", "admin"])),
            ("example.com/team".to_string(), strings(&["blue"])),
            ("empty".to_string(), strings(&[""])),
            ("bad%zz".to_string(), strings(&["kept"])),
        ]);
        assert_eq!(
            run(&rh, Some(&proxy), &request),
            AuthnOutcome::Authenticated(Arc::new(expected))
        );
        assert_eq!(rh.name(), "requestheader");
    }

    #[test]
    fn allowed_names_are_enforced() {
        let s = setup();
        let rh = authenticator(&s.proxy_bundle, &["front-proxy-client", "aggregator"]);
        let request = headers(&[("X-Remote-User", "alice")]);
        for allowed in ["front-proxy-client", "aggregator"] {
            let leaf = s.proxy_ca.leaf(allowed, &[]);
            assert!(matches!(
                run(&rh, Some(&leaf), &request),
                AuthnOutcome::Authenticated(u) if u.name == "alice"
            ));
        }
        let other = s.proxy_ca.leaf("someone-else", &[]);
        assert_eq!(
            run(&rh, Some(&other), &request),
            AuthnOutcome::Failed(
                "x509: subject with cn=someone-else is not in the allowed list".into()
            )
        );
    }

    #[test]
    fn headers_from_anyone_else_are_ignored() {
        let s = setup();
        let rh = authenticator(&s.proxy_bundle, &[]);
        let request = headers(&[
            ("X-Remote-User", "admin"),
            ("X-Remote-Group", "system:masters"),
        ]);
        assert_eq!(run(&rh, None, &request), AuthnOutcome::NoCredential);
        // An ordinary client certificate, and one from a CA nobody trusts.
        let client = s.client_ca.leaf("bob", &[]);
        assert_eq!(
            run(&rh, Some(&client), &request),
            AuthnOutcome::NoCredential
        );
        let stranger = ca("stranger").leaf("front-proxy-client", &[]);
        assert_eq!(
            run(&rh, Some(&stranger), &request),
            AuthnOutcome::NoCredential
        );
        // The proxy's own certificate but no longer valid: rejected, as in kube.
        let expired = s.proxy_ca.leaf_with(
            "front-proxy-client",
            &[],
            ((2000, 1, 1), (2001, 1, 1)),
            None,
        );
        assert!(matches!(
            run(&rh, Some(&expired), &request),
            AuthnOutcome::Failed(reason) if reason.contains("has expired")
        ));
    }

    #[test]
    fn a_proxy_without_a_user_name_is_no_credential() {
        let s = setup();
        let rh = authenticator(&s.proxy_bundle, &[]);
        let proxy = s.proxy_ca.leaf("front-proxy-client", &[]);
        let request = headers(&[("X-Remote-User", ""), ("X-Remote-Group", "dev")]);
        assert_eq!(run(&rh, Some(&proxy), &request), AuthnOutcome::NoCredential);
    }

    #[test]
    fn works_in_a_union_with_x509() {
        let s = setup();
        let union = UnionAuthenticator::new(vec![
            Arc::new(authenticator(&s.proxy_bundle, &["front-proxy-client"])),
            Arc::new(
                X509Authenticator::new(s.client_bundle.clone())
                    .with_request_header_bundle(s.proxy_bundle.clone()),
            ),
        ]);
        let claims = headers(&[
            ("X-Remote-User", "admin"),
            ("X-Remote-Group", "system:masters"),
        ]);
        let proxy = s.proxy_ca.leaf("front-proxy-client", &[]);
        assert_eq!(
            run(&union, Some(&proxy), &claims),
            AuthnOutcome::Authenticated(Arc::new(UserInfo::new(
                "admin",
                strings(&["system:masters", ALL_AUTHENTICATED])
            )))
        );
        // An x509 user's claims count for nothing: they are who their certificate says.
        let bob = s.client_ca.leaf("bob", &["dev"]);
        match run(&union, Some(&bob), &claims) {
            AuthnOutcome::Authenticated(user) => {
                assert_eq!(user.name, "bob");
                assert_eq!(user.groups, strings(&["dev", ALL_AUTHENTICATED]));
            }
            other => panic!("unexpected {other:?}"),
        }
        // The proxy without claims is nobody in particular.
        assert_eq!(
            run(&union, Some(&proxy), &HeaderMap::new()),
            AuthnOutcome::NoCredential
        );
    }

    #[test]
    fn extra_keys_decode_like_go() {
        assert_eq!(unescape_extra_key("scopes"), "scopes");
        assert_eq!(unescape_extra_key("example.com%2fteam"), "example.com/team");
        assert_eq!(unescape_extra_key("a%20b+c"), "a b+c");
        assert_eq!(unescape_extra_key("%41%42"), "AB");
        assert_eq!(unescape_extra_key("caf%c3%a9"), "café");
        assert_eq!(unescape_extra_key("100%"), "100%");
        assert_eq!(unescape_extra_key("%4"), "%4");
        assert_eq!(unescape_extra_key("%g1"), "%g1");
        assert_eq!(unescape_extra_key("%ff"), "\u{fffd}");
        assert_eq!(unescape_extra_key(""), "");
    }

    #[test]
    fn configuration_is_checked() {
        let s = setup();
        let bad = |user: &[&str], prefixes: &[&str]| {
            RequestHeaderAuthenticator::new(
                s.proxy_bundle.clone(),
                vec![],
                strings(user),
                vec![],
                vec![],
                strings(prefixes),
            )
            .is_err()
        };
        assert!(bad(&[" "], &[]));
        assert!(bad(&["bad header"], &[]));
        assert!(bad(&["X-User"], &[""]));
        assert!(!bad(&[" X-User "], &["X-Extra-"]));
    }

    #[test]
    fn identity_headers_are_stripped() {
        let s = setup();
        let rh = authenticator(&s.proxy_bundle, &[]);
        let mut request = headers(&[
            ("X-Remote-User", "admin"),
            ("X-Forwarded-User", "admin"),
            ("X-Remote-Group", "a"),
            ("X-Remote-Group", "b"),
            ("X-Forwarded-Extra-Foo", "x"),
            ("x-remote-extra-bar", "y"),
            ("Authorization", "Bearer t"),
            ("X-Remote-Userish", "kept: not a configured name"),
            ("Accept", "application/json"),
        ]);
        assert_eq!(rh.identity_headers().present(&request).len(), 5);
        assert_eq!(rh.identity_headers().strip(&mut request), 5);
        assert!(rh.identity_headers().present(&request).is_empty());
        let mut left: Vec<&str> = request.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, vec!["accept", "authorization", "x-remote-userish"]);

        // Without front-proxy configuration the defaults still go.
        let mut request = headers(&[
            ("X-Remote-User", "admin"),
            ("X-Remote-Uid", "1"),
            ("X-Remote-Extra-A", "x"),
            ("X-Forwarded-User", "kept"),
        ]);
        let defaults = identity_header_names(&[], &[], &[], &[]);
        assert_eq!(defaults, IdentityHeaders::defaults());
        assert_eq!(defaults.strip(&mut request), 3);
        assert_eq!(request.len(), 1);
        let configured = identity_header_names(
            &strings(&["X-Forwarded-User", "not a header"]),
            &[],
            &[],
            &strings(&["X-Forwarded-Extra-"]),
        );
        assert!(configured.matches(&HeaderName::from_static("x-forwarded-user")));
        assert!(configured.matches(&HeaderName::from_static("x-forwarded-extra-k")));
        assert!(configured.matches(&HeaderName::from_static("x-remote-group")));
        assert!(!configured.matches(&HeaderName::from_static("x-forwarded-for")));
    }
}

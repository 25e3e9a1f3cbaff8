//! Bearer-token authentication: finding the token in a request (kube's `bearertoken` and
//! websocket `protocol` request authenticators), the [`TokenAuthenticator`] trait every token
//! strategy implements, the token union (kube's `token/union`), the audience-agnostic wrapper
//! (kube's `authenticator.WrapAudienceAgnosticToken`) and [`BearerAuthenticator`], which plugs
//! all of it into the request [`Authenticator`] chain.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;

use super::cache::TokenMemo;
use super::{Authenticator, AuthnOutcome, AuthnRequest};
use crate::user::UserInfo;

/// The subprotocol prefix a websocket client (browsers cannot set `Authorization` on a
/// websocket) uses to carry its token: `base64url.bearer.authorization.k8s.io.<token>`.
pub const WEBSOCKET_BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// kube's default error when a token was presented and no token authenticator accepted or
/// explained it.
pub const INVALID_BEARER_TOKEN: &str = "invalid bearer token";

/// Go's `base64.RawURLEncoding`: no padding accepted, and (Go decoders are not strict)
/// non-zero trailing bits are tolerated.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// The bearer token of a request, from `Authorization: Bearer <token>` or, on a websocket
/// upgrade, from the `Sec-WebSocket-Protocol` subprotocol form.
///
/// `Ok(None)`: no token (no `Authorization` header, another scheme such as `Basic`, or no
/// token subprotocol). `Err`: a token was clearly meant but is malformed; the caller answers
/// 401. The error text never contains the token. A token from the `Authorization` header is
/// borrowed from it: tokens are large (a ServiceAccount JWT is about 1 KiB) and read on every
/// request.
///
/// Differences from kube, on purpose: kube treats `Authorization: Bearer` with nothing after
/// it (or with two spaces before the token) as no credential at all, which with anonymous
/// auth enabled silently serves the request as `system:anonymous`; kubegate makes a presented
/// but empty bearer credential a 401 instead.
pub fn bearer_token(headers: &http::HeaderMap) -> Result<Option<Cow<'_, str>>, String> {
    let from_header = authorization_bearer(headers);
    if let Ok(Some(token)) = from_header {
        return Ok(Some(Cow::Borrowed(token)));
    }
    // kube runs the websocket authenticator after the Authorization one; a websocket token
    // still counts when the Authorization header holds another scheme.
    match websocket_bearer(headers) {
        Ok(Some(token)) => Ok(Some(Cow::Owned(token))),
        Ok(None) => from_header.map(|none| none.map(Cow::Borrowed)),
        Err(e) => match from_header {
            Err(header_error) => Err(header_error),
            Ok(_) => Err(e),
        },
    }
}

/// `Authorization: Bearer <token>`, parsed as kube does: only the first `Authorization`
/// header, surrounding whitespace trimmed, the scheme compared case-insensitively, the token
/// is the text between the first and second space.
fn authorization_bearer(headers: &http::HeaderMap) -> Result<Option<&str>, String> {
    let Some(token) = authorization_bearer_bytes(headers)? else {
        return Ok(None);
    };
    match std::str::from_utf8(token) {
        Ok(token) => Ok(Some(token)),
        Err(_) => Err(INVALID_BEARER_TOKEN.to_string()),
    }
}

/// [`authorization_bearer`]'s token before it is checked to be UTF-8.
fn authorization_bearer_bytes(headers: &http::HeaderMap) -> Result<Option<&[u8]>, String> {
    let Some(rest) = authorization_bearer_rest(headers)? else {
        return Ok(None);
    };
    // The token ends at the next space (found with SIMD: a JWT is ~1 KiB, and `str::find`
    // walks it a word at a time); what follows it does not matter.
    let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
    let token = &rest[..end];
    if token.is_empty() {
        // kube warns "the provided Authorization header contains extra space before the
        // bearer token, and is ignored" in this case.
        return Err("empty bearer token (extra space before the token?)".to_string());
    }
    Ok(Some(token))
}

/// What follows `Bearer ` in the `Authorization` header, trimmed: the token up to its first
/// space, and whatever comes after it.
fn authorization_bearer_rest(headers: &http::HeaderMap) -> Result<Option<&[u8]>, String> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.as_bytes().trim_ascii();
    let (scheme, rest) = match value.iter().position(|b| *b == b' ') {
        Some(space) => (&value[..space], Some(&value[space + 1..])),
        None => (value, None),
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Ok(None);
    }
    match rest {
        Some(rest) => Ok(Some(rest)),
        None => Err("empty bearer token".to_string()),
    }
}

/// Whether the request asks for a websocket upgrade, as kube's `wsstream.IsWebSocketRequest`:
/// `Upgrade: websocket` and an `upgrade` token in `Connection`.
pub fn is_websocket_request(headers: &http::HeaderMap) -> bool {
    let upgrade = headers
        .get(http::header::UPGRADE)
        .map(|v| v.as_bytes().trim_ascii());
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case(b"websocket")) {
        return false;
    }
    headers.get(http::header::CONNECTION).is_some_and(|v| {
        v.as_bytes()
            .split(|b| *b == b',')
            .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
    })
}

/// Every subprotocol offered, across all `Sec-WebSocket-Protocol` headers (RFC 6455 allows
/// the header to repeat), each trimmed, in order; empty entries are kept as kube keeps them.
pub fn websocket_protocols(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .flat_map(|value| {
            String::from_utf8_lossy(value.as_bytes())
                .split(',')
                .map(|p| p.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The token carried as a websocket subprotocol, as kube's `websocket.ProtocolAuthenticator`.
fn websocket_bearer(headers: &http::HeaderMap) -> Result<Option<String>, String> {
    if !is_websocket_request(headers) {
        return Ok(None);
    }
    let mut token: Option<String> = None;
    let mut other_protocols = 0usize;
    for protocol in websocket_protocols(headers) {
        let Some(encoded) = protocol.strip_prefix(WEBSOCKET_BEARER_PROTOCOL_PREFIX) else {
            other_protocols += 1;
            continue;
        };
        if token.is_some() {
            return Err("multiple base64.bearer.authorization tokens specified".to_string());
        }
        let decoded = RAW_URL
            .decode(encoded)
            .map_err(|_| "invalid base64.bearer.authorization token encoding".to_string())?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| "invalid base64.bearer.authorization token".to_string())?;
        token = Some(decoded);
    }
    match token {
        Some(token) if token.is_empty() => Ok(None),
        // The server must echo one subprotocol back and must not echo the one holding the
        // token, so at least one other has to be offered.
        Some(_) if other_protocols == 0 => Err("missing additional subprotocol".to_string()),
        other => Ok(other),
    }
}

/// Removes the token subprotocol from `Sec-WebSocket-Protocol`, as kube does after a websocket
/// token authenticated, so the token is neither echoed to the client nor passed on to a
/// backend. Leaves the headers alone when no token subprotocol is present.
pub fn strip_websocket_bearer_protocol(headers: &mut http::HeaderMap) {
    if let Some(kept) = websocket_protocols_without_bearer(headers) {
        headers.remove(http::header::SEC_WEBSOCKET_PROTOCOL);
        if let Some(kept) = kept {
            headers.insert(http::header::SEC_WEBSOCKET_PROTOCOL, kept);
        }
    }
}

/// What `Sec-WebSocket-Protocol` becomes without the token subprotocol: `None` when no token
/// subprotocol is offered (nothing to change), `Some(None)` when the header goes altogether,
/// else the other subprotocols, comma-joined into one header. For header maps that cannot be
/// changed in place (pingora's request header keeps its own name map).
pub fn websocket_protocols_without_bearer(
    headers: &http::HeaderMap,
) -> Option<Option<http::HeaderValue>> {
    let protocols = websocket_protocols(headers);
    if !protocols
        .iter()
        .any(|p| p.starts_with(WEBSOCKET_BEARER_PROTOCOL_PREFIX))
    {
        return None;
    }
    let kept: Vec<String> = protocols
        .into_iter()
        .filter(|p| !p.starts_with(WEBSOCKET_BEARER_PROTOCOL_PREFIX))
        .collect();
    if kept.is_empty() {
        return Some(None);
    }
    Some(http::HeaderValue::from_str(&kept.join(",")).ok())
}

/// What a token authenticator learned about a token it accepted (kube's
/// `authenticator.Response`, plus when the credential stops being valid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenReviewResult {
    /// Shared, like the audiences, so that a cache hands a remembered result out without
    /// copying it.
    pub user: Arc<UserInfo>,
    /// The audiences the token is valid for; empty means "not audience-scoped".
    pub audiences: Arc<[String]>,
    /// When the token expires, if it does: caches must not remember it longer.
    pub expires_at: Option<SystemTime>,
}

/// The answer of one token authenticator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOutcome {
    Authenticated(TokenReviewResult),
    /// Not a token of this kind, or not one this authenticator knows (kube's
    /// `(nil, false, nil)`): the next authenticator may try.
    NotMine,
    /// The token is of this kind and was rejected (kube's non-nil error); the message is for
    /// logs and TokenReview `status.error`, and must never contain the token.
    Invalid(String),
}

/// One way of validating bearer tokens (kube's `authenticator.Token`).
#[async_trait::async_trait]
pub trait TokenAuthenticator: Send + Sync {
    /// A short name for logs and metrics.
    fn name(&self) -> &'static str;
    /// `audiences` are the audiences the caller wants the token to be valid for (kube's
    /// `authenticator.Audiences` context): the server's API audiences for requests, or a
    /// TokenReview's `spec.audiences`. Empty means no audience was asked for.
    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome;
    /// The answer for `token` if it can be given at once, without waiting on anything (a
    /// cache's recent hit); `None` means ask [`TokenAuthenticator::authenticate_token`]. Lets
    /// the common case skip building and boxing a future. `memo` is the connection's memo of
    /// its last token, already asked ([`TokenAuthenticator::recall_token`]), for a cache to
    /// fill with the answer.
    fn authenticate_token_now(
        &self,
        _token: &str,
        _audiences: &[String],
        _memo: Option<&TokenMemo>,
    ) -> Option<TokenOutcome> {
        None
    }
    /// The answer `memo` holds for the token `bearer` starts with, if this authenticator
    /// filled it and may still serve it. `bearer` is the raw bytes after `Authorization:
    /// Bearer `, not yet checked to be UTF-8 (a remembered token was): the token up to its
    /// first space, then anything after it.
    fn recall_token(
        &self,
        _bearer: &[u8],
        _audiences: &[String],
        _memo: &TokenMemo,
    ) -> Option<TokenOutcome> {
        None
    }
}

/// Token authenticators tried in order, as kube's `token/union`: the first that accepts the
/// token wins; rejections are collected and reported together when none accepts.
#[derive(Clone, Default)]
pub struct TokenUnion {
    authenticators: Vec<Arc<dyn TokenAuthenticator>>,
}

impl TokenUnion {
    pub fn new(authenticators: Vec<Arc<dyn TokenAuthenticator>>) -> Self {
        TokenUnion { authenticators }
    }

    /// The authenticator a union of one is equivalent to: its answers pass through unchanged
    /// (a single rejection is reported as is), so callers may skip the union's own layer.
    fn single(&self) -> Option<&Arc<dyn TokenAuthenticator>> {
        match self.authenticators.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }
}

impl std::fmt::Debug for TokenUnion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.authenticators.iter().map(|a| a.name()).collect();
        f.debug_struct("TokenUnion")
            .field("authenticators", &names)
            .finish()
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for TokenUnion {
    fn name(&self) -> &'static str {
        "token-union"
    }

    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let mut errors: Vec<String> = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate_token(token, audiences).await {
                TokenOutcome::Authenticated(result) => return TokenOutcome::Authenticated(result),
                TokenOutcome::NotMine => {}
                TokenOutcome::Invalid(message) => {
                    // utilerrors.NewAggregate prints each distinct message once.
                    if !errors.contains(&message) {
                        errors.push(message);
                    }
                }
            }
        }
        match errors.len() {
            0 => TokenOutcome::NotMine,
            1 => TokenOutcome::Invalid(errors.concat()),
            _ => TokenOutcome::Invalid(format!("[{}]", errors.join(", "))),
        }
    }
}

/// Wraps a token authenticator that knows nothing about audiences (token file, bootstrap
/// tokens, …) as kube's `WrapAudienceAgnosticToken`: such tokens are implicitly valid for the
/// server's own API audiences and nothing else. Asked for audiences outside those, the token is
/// not considered at all; accepted, it reports the audiences it matched.
pub struct AudienceAgnosticToken {
    implicit_audiences: Vec<String>,
    inner: Arc<dyn TokenAuthenticator>,
}

impl AudienceAgnosticToken {
    /// `implicit_audiences` are the server's API audiences (kube's `--api-audiences`).
    pub fn new(implicit_audiences: Vec<String>, inner: Arc<dyn TokenAuthenticator>) -> Self {
        AudienceAgnosticToken {
            implicit_audiences,
            inner,
        }
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for AudienceAgnosticToken {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        if audiences.is_empty() {
            return self.inner.authenticate_token(token, audiences).await;
        }
        let matched = intersect(&self.implicit_audiences, audiences);
        if matched.is_empty() {
            return TokenOutcome::NotMine;
        }
        match self.inner.authenticate_token(token, audiences).await {
            TokenOutcome::Authenticated(mut result) => {
                result.audiences = matched.into();
                TokenOutcome::Authenticated(result)
            }
            other => other,
        }
    }
}

/// A remote reviewer that judges tokens against its own API audiences (the cluster kubegate
/// fronts, whose API the token was issued for): asked with none, whatever audiences the
/// request has. Wrapped in [`AudienceAgnosticToken`], what it accepts is valid for kubegate's
/// API audiences, which stand for the same API.
pub struct RemoteAudiences(pub Arc<dyn TokenAuthenticator>);

#[async_trait::async_trait]
impl TokenAuthenticator for RemoteAudiences {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    async fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
        self.0.authenticate_token(token, &[]).await
    }
}

/// A remote reviewer asked by at most `limit` requests at a time (the others wait their
/// turn): a flood of requests with unknown tokens reaches the reviewer (the cluster kubegate
/// fronts) a bounded number at a time, whatever their rate.
pub struct ConcurrencyLimited {
    inner: Arc<dyn TokenAuthenticator>,
    permits: tokio::sync::Semaphore,
}

impl ConcurrencyLimited {
    pub fn new(inner: Arc<dyn TokenAuthenticator>, limit: usize) -> Self {
        ConcurrencyLimited {
            inner,
            permits: tokio::sync::Semaphore::new(limit.max(1)),
        }
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for ConcurrencyLimited {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let Ok(_permit) = self.permits.acquire().await else {
            return TokenOutcome::Invalid("the token reviewer is shutting down".into());
        };
        self.inner.authenticate_token(token, audiences).await
    }
}

/// The members of `a` that are also in `b`, in `a`'s order (kube's `Audiences.Intersect`).
fn intersect(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().filter(|x| b.contains(x)).cloned().collect()
}

/// kube's `audiencesAreAcceptable`: a token without audiences, or a server without API
/// audiences, is fine; otherwise they must share one.
fn audiences_acceptable(wanted: &[String], token_audiences: &[String]) -> bool {
    wanted.is_empty()
        || token_audiences.is_empty()
        || wanted.iter().any(|w| token_audiences.contains(w))
}

/// The request authenticator for bearer tokens (header or websocket subprotocol), backed by
/// token authenticators tried in order.
pub struct BearerAuthenticator {
    union: TokenUnion,
    api_audiences: Vec<String>,
}

impl std::fmt::Debug for BearerAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuthenticator")
            .field("union", &self.union)
            .field("api_audiences", &self.api_audiences)
            .finish()
    }
}

impl BearerAuthenticator {
    /// `api_audiences` are the audiences the server accepts (kube's `--api-audiences`);
    /// tokens are checked against them.
    pub fn new(
        authenticators: Vec<Arc<dyn TokenAuthenticator>>,
        api_audiences: Vec<String>,
    ) -> Self {
        BearerAuthenticator {
            union: TokenUnion::new(authenticators),
            api_audiences,
        }
    }

    /// The API audiences this authenticator checks tokens against.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// Validates `token` for the TokenReview API: `audiences` are the review's
    /// `spec.audiences`, or empty to use the server's API audiences (as kube's TokenReview
    /// storage does). An accepted token whose audiences share none with those asked for is
    /// `Invalid`; an accepted user gains `system:authenticated` as it would on a request.
    /// `NotMine` means no authenticator recognised the token (kube reports
    /// `invalid bearer token`).
    pub async fn review(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let wanted = if audiences.is_empty() {
            &self.api_audiences[..]
        } else {
            audiences
        };
        match self.union.authenticate_token(token, wanted).await {
            TokenOutcome::Authenticated(result) => {
                if !audiences_acceptable(wanted, &result.audiences) {
                    return TokenOutcome::Invalid(unmatched_audience(&result.audiences));
                }
                TokenOutcome::Authenticated(TokenReviewResult {
                    user: UserInfo::shared_with_authenticated_group(result.user),
                    ..result
                })
            }
            other => other,
        }
    }
}

fn unmatched_audience(audiences: &[String]) -> String {
    format!("unable to match audience: {audiences:?}")
}

#[async_trait::async_trait]
impl Authenticator for BearerAuthenticator {
    fn name(&self) -> &'static str {
        "bearer-token"
    }

    async fn authenticate(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        let token = match self.at_once(request) {
            Ok(outcome) => return outcome,
            Err(token) => token,
        };
        let outcome = match self.union.single() {
            Some(only) => only.authenticate_token(&token, &self.api_audiences).await,
            None => {
                self.union
                    .authenticate_token(&token, &self.api_audiences)
                    .await
            }
        };
        self.request_outcome(outcome)
    }

    fn authenticate_now(&self, request: &AuthnRequest<'_>) -> Option<AuthnOutcome> {
        self.at_once(request).ok()
    }
}

impl BearerAuthenticator {
    /// The outcome when it can be given at once: no token, a malformed one, the connection's
    /// remembered token, or a cached answer; otherwise the token, to be validated.
    fn at_once<'r>(&self, request: &AuthnRequest<'r>) -> Result<AuthnOutcome, Cow<'r, str>> {
        // The connection's last token, recognised before anything else is done with it.
        let remembered = match (request.token_memo, self.union.single()) {
            // The memo finds where the token ends itself: it knows the length to expect,
            // which spares scanning a ~1 KiB JWT for a space.
            (Some(memo), Some(only)) => match authorization_bearer_rest(request.headers) {
                Ok(Some(rest)) => only.recall_token(rest, &self.api_audiences, memo),
                _ => None,
            },
            _ => None,
        };
        if let Some(outcome) = remembered {
            return Ok(self.request_outcome(outcome));
        }
        let token = match bearer_token(request.headers) {
            Ok(Some(token)) => token,
            Ok(None) => return Ok(AuthnOutcome::NoCredential),
            Err(message) => return Ok(AuthnOutcome::Failed(message)),
        };
        // The gateway configures one (caching) token authenticator here; asking it directly
        // saves a boxed future per request.
        let cached = self.union.single().and_then(|only| {
            only.authenticate_token_now(&token, &self.api_audiences, request.token_memo)
        });
        match cached {
            Some(outcome) => Ok(self.request_outcome(outcome)),
            None => Err(token),
        }
    }
}

impl BearerAuthenticator {
    /// A request's outcome from its token's.
    fn request_outcome(&self, outcome: TokenOutcome) -> AuthnOutcome {
        match outcome {
            TokenOutcome::Authenticated(result) => {
                // kube checks this in the authentication filter after the whole chain.
                if !audiences_acceptable(&self.api_audiences, &result.audiences) {
                    return AuthnOutcome::Failed(unmatched_audience(&result.audiences));
                }
                AuthnOutcome::Authenticated(UserInfo::shared_with_authenticated_group(result.user))
            }
            TokenOutcome::NotMine => AuthnOutcome::Failed(INVALID_BEARER_TOKEN.to_string()),
            TokenOutcome::Invalid(message) => AuthnOutcome::Failed(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::ALL_AUTHENTICATED;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("test header name"),
                http::HeaderValue::from_str(value).expect("test header value"),
            );
        }
        map
    }

    fn ws(protocols: &[&str]) -> http::HeaderMap {
        let mut pairs = vec![
            ("upgrade", "websocket"),
            ("connection", "keep-alive, Upgrade"),
        ];
        for p in protocols {
            pairs.push(("sec-websocket-protocol", p));
        }
        headers(&pairs)
    }

    fn encode(token: &str) -> String {
        format!(
            "{WEBSOCKET_BEARER_PROTOCOL_PREFIX}{}",
            RAW_URL.encode(token)
        )
    }

    #[test]
    fn authorization_header_forms() {
        let ok = |v: &str| {
            bearer_token(&headers(&[("authorization", v)])).map(|t| t.map(Cow::into_owned))
        };
        assert_eq!(ok("Bearer abc"), Ok(Some("abc".into())));
        assert_eq!(ok("bEaReR abc"), Ok(Some("abc".into())));
        assert_eq!(ok("  Bearer abc  "), Ok(Some("abc".into())));
        assert_eq!(
            ok("Bearer abc def"),
            Ok(Some("abc".into())),
            "kube takes the first word"
        );
        assert_eq!(ok("Basic dXNlcjpwYXNz"), Ok(None));
        assert_eq!(ok("Bearerabc"), Ok(None));
        assert_eq!(ok(""), Ok(None));
        assert!(ok("Bearer").is_err());
        assert!(ok("Bearer ").is_err());
        assert!(ok("Bearer  abc").is_err(), "extra space before the token");
        assert_eq!(bearer_token(&http::HeaderMap::new()), Ok(None));
        // Only the first Authorization header counts, as Go's Header.Get.
        assert_eq!(
            bearer_token(&headers(&[
                ("authorization", "Basic x"),
                ("authorization", "Bearer abc")
            ])),
            Ok(None)
        );
    }

    #[test]
    fn errors_never_contain_the_token() {
        let mut map = http::HeaderMap::new();
        map.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_bytes(b"Bearer s\xffcret").expect("obs-text is allowed"),
        );
        let err = bearer_token(&map).expect_err("not UTF-8");
        assert!(!err.contains("cret"));
    }

    #[test]
    fn only_the_token_itself_must_be_utf8() {
        let bearer = |value: &[u8]| {
            let mut map = http::HeaderMap::new();
            map.insert(
                http::header::AUTHORIZATION,
                http::HeaderValue::from_bytes(value).expect("obs-text is allowed"),
            );
            bearer_token(&map).map(|t| t.map(Cow::into_owned))
        };
        assert_eq!(bearer(b"Bearer abc \xff"), Ok(Some("abc".into())));
        assert_eq!(
            bearer(b"Bearer ab\xff"),
            Err(INVALID_BEARER_TOKEN.to_string())
        );
        assert_eq!(
            bearer(b"Bearer \xff abc"),
            Err(INVALID_BEARER_TOKEN.to_string())
        );
        assert!(
            bearer(b"Bearer  \xff").is_err(),
            "extra space before the token"
        );
        assert_eq!(bearer(b"B\xffarer abc"), Ok(None), "another scheme");
        // A token from the header is borrowed, not copied.
        let mut map = http::HeaderMap::new();
        map.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer abc"),
        );
        assert!(matches!(bearer_token(&map), Ok(Some(Cow::Borrowed("abc")))));
    }

    #[test]
    fn websocket_protocol_token() {
        assert_eq!(
            bearer_token(&ws(&[&format!("{}, v4.channel.k8s.io", encode("abc.def"))])),
            Ok(Some("abc.def".into()))
        );
        // Split over several headers.
        assert_eq!(
            bearer_token(&ws(&["v4.channel.k8s.io", &encode("tok")])),
            Ok(Some("tok".into()))
        );
        // Not a websocket request: ignored.
        assert_eq!(
            bearer_token(&headers(&[(
                "sec-websocket-protocol",
                &format!("{}, chat", encode("tok"))
            )])),
            Ok(None)
        );
        assert_eq!(
            bearer_token(&ws(&[&encode("tok")])),
            Err("missing additional subprotocol".into())
        );
        assert_eq!(
            bearer_token(&ws(&[&encode("a"), &encode("b"), "chat"])),
            Err("multiple base64.bearer.authorization tokens specified".into())
        );
        assert_eq!(
            bearer_token(&ws(&[
                &format!("{WEBSOCKET_BEARER_PROTOCOL_PREFIX}YWJj=="),
                "chat"
            ])),
            Err("invalid base64.bearer.authorization token encoding".into()),
            "padding is not accepted"
        );
        assert_eq!(
            bearer_token(&ws(&[
                &format!(
                    "{WEBSOCKET_BEARER_PROTOCOL_PREFIX}{}",
                    RAW_URL.encode([0xff, 0xfe])
                ),
                "chat"
            ])),
            Err("invalid base64.bearer.authorization token".into())
        );
        assert_eq!(
            bearer_token(&ws(&[WEBSOCKET_BEARER_PROTOCOL_PREFIX])),
            Ok(None),
            "an empty token is no token"
        );
        // Authorization wins over the subprotocol; a non-bearer Authorization does not hide it.
        let mut both = ws(&[&encode("ws"), "chat"]);
        both.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer hdr"),
        );
        assert_eq!(bearer_token(&both), Ok(Some("hdr".into())));
        both.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Basic xyz"),
        );
        assert_eq!(bearer_token(&both), Ok(Some("ws".into())));
    }

    #[test]
    fn websocket_detection() {
        let h = |upgrade: &str, connection: &str| {
            is_websocket_request(&headers(&[
                ("upgrade", upgrade),
                ("connection", connection),
            ]))
        };
        assert!(h("websocket", "Upgrade"));
        assert!(h("WebSocket", "keep-alive,upgrade"));
        assert!(!h("h2c", "Upgrade"));
        assert!(!h("websocket", "keep-alive"));
        assert!(!h("websocket", "upgrades"));
    }

    #[test]
    fn strip_token_protocol() {
        let mut map = ws(&[&format!("chat, {}", encode("tok")), "v4.channel.k8s.io"]);
        strip_websocket_bearer_protocol(&mut map);
        let values: Vec<_> = map
            .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .collect();
        assert_eq!(values, vec!["chat,v4.channel.k8s.io"]);

        let mut only_token = ws(&[&encode("tok")]);
        strip_websocket_bearer_protocol(&mut only_token);
        assert!(!only_token.contains_key(http::header::SEC_WEBSOCKET_PROTOCOL));

        let mut untouched = ws(&["chat", "v4"]);
        strip_websocket_bearer_protocol(&mut untouched);
        assert_eq!(
            untouched
                .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
                .iter()
                .count(),
            2
        );
    }

    /// Accepts one token, rejects one, ignores the rest; counts calls.
    struct Fake {
        name: &'static str,
        accept: &'static str,
        reject: &'static str,
        audiences: Vec<String>,
        calls: AtomicUsize,
    }

    fn fake(name: &'static str, accept: &'static str, reject: &'static str) -> Arc<Fake> {
        Arc::new(Fake {
            name,
            accept,
            reject,
            audiences: Vec::new(),
            calls: AtomicUsize::new(0),
        })
    }

    #[async_trait::async_trait]
    impl TokenAuthenticator for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        async fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if token == self.accept {
                TokenOutcome::Authenticated(TokenReviewResult {
                    user: Arc::new(UserInfo::new(self.name, vec!["g".into()])),
                    audiences: self.audiences.clone().into(),
                    expires_at: None,
                })
            } else if token == self.reject {
                TokenOutcome::Invalid(format!("{} rejected it", self.name))
            } else {
                TokenOutcome::NotMine
            }
        }
    }

    fn bearer(authenticators: &[Arc<Fake>], api_audiences: &[&str]) -> BearerAuthenticator {
        BearerAuthenticator::new(
            authenticators
                .iter()
                .map(|a| a.clone() as Arc<dyn TokenAuthenticator>)
                .collect(),
            api_audiences.iter().map(|s| s.to_string()).collect(),
        )
    }

    async fn run(authenticator: &BearerAuthenticator, authorization: Option<&str>) -> AuthnOutcome {
        let map = match authorization {
            Some(v) => headers(&[("authorization", v)]),
            None => http::HeaderMap::new(),
        };
        authenticator
            .authenticate(&AuthnRequest {
                headers: &map,
                peer_certificate: None,
                token_memo: None,
            })
            .await
    }

    /// Counts how many calls run at once.
    struct Slow {
        running: AtomicUsize,
        most: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl TokenAuthenticator for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }

        async fn authenticate_token(&self, _token: &str, _audiences: &[String]) -> TokenOutcome {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            self.running.fetch_sub(1, Ordering::SeqCst);
            TokenOutcome::NotMine
        }
    }

    #[tokio::test]
    async fn a_limited_reviewer_is_asked_a_bounded_number_at_a_time() {
        let slow = Arc::new(Slow {
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        });
        let limited = Arc::new(ConcurrencyLimited::new(slow.clone(), 4));
        let calls: Vec<_> = (0..40)
            .map(|i| {
                let limited = limited.clone();
                tokio::spawn(
                    async move { limited.authenticate_token(&format!("token-{i}"), &[]).await },
                )
            })
            .collect();
        for call in calls {
            assert!(matches!(call.await.unwrap(), TokenOutcome::NotMine));
        }
        let most = slow.most.load(Ordering::SeqCst);
        assert!((1..=4).contains(&most), "{most} at once");
    }

    #[tokio::test]
    async fn a_connection_memo_answers_only_the_same_token_bytes() {
        use crate::authn::cache::CachedTokenAuthenticator;
        let a = fake("a", "tok-a", "tok-b");
        let ttl = std::time::Duration::from_secs(60);
        let cached = Arc::new(CachedTokenAuthenticator::new(a.clone(), ttl, ttl));
        let auth = BearerAuthenticator::new(vec![cached], vec![]);
        let memo = TokenMemo::default();
        let send = |value: &'static [u8]| {
            let mut map = http::HeaderMap::new();
            map.insert(
                http::header::AUTHORIZATION,
                http::HeaderValue::from_bytes(value).expect("test header value"),
            );
            let auth = &auth;
            let memo = &memo;
            async move {
                auth.authenticate(&AuthnRequest {
                    headers: &map,
                    peer_certificate: None,
                    token_memo: Some(memo),
                })
                .await
            }
        };
        let user = |outcome: AuthnOutcome| match outcome {
            AuthnOutcome::Authenticated(user) => user.name.clone(),
            other => format!("{other:?}"),
        };
        // The first request asks the source, the second fills the memo, the rest use it.
        for _ in 0..4 {
            assert_eq!(user(send(b"Bearer tok-a").await), "a");
        }
        assert_eq!(a.calls.load(Ordering::SeqCst), 1);
        // Same length, other bytes; not UTF-8; the rejected one; the first again.
        assert_eq!(
            user(send(b"Bearer tok-b").await),
            format!("{:?}", AuthnOutcome::Failed("a rejected it".into()))
        );
        assert_eq!(
            send(b"Bearer tok-\xff").await,
            AuthnOutcome::Failed(INVALID_BEARER_TOKEN.into())
        );
        assert_eq!(user(send(b"Bearer tok-a trailing").await), "a");
        assert_eq!(a.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn union_semantics() {
        let a = fake("a", "tok-a", "tok-shared-bad");
        let b = fake("b", "tok-b", "tok-shared-bad");
        let c = fake("c", "tok-a", "tok-c-bad");
        let auth = bearer(&[a.clone(), b.clone(), c.clone()], &[]);

        assert_eq!(run(&auth, None).await, AuthnOutcome::NoCredential);
        assert_eq!(
            run(&auth, Some("Basic x")).await,
            AuthnOutcome::NoCredential
        );
        assert_eq!(
            run(&auth, Some("Bearer ")).await,
            AuthnOutcome::Failed("empty bearer token".into())
        );

        // First success wins; later authenticators are not asked.
        assert_eq!(
            run(&auth, Some("Bearer tok-a")).await,
            AuthnOutcome::Authenticated(Arc::new(UserInfo::new(
                "a",
                vec!["g".into(), ALL_AUTHENTICATED.into()]
            )))
        );
        assert_eq!(c.calls.load(Ordering::SeqCst), 0);

        // A success after a rejection still wins.
        let auth_bc = bearer(&[c.clone(), b.clone()], &[]);
        assert!(matches!(
            run(&auth_bc, Some("Bearer tok-b")).await,
            AuthnOutcome::Authenticated(_)
        ));

        // Nobody knows it: 401 with kube's default message, never anonymous.
        assert_eq!(
            run(&auth, Some("Bearer nope")).await,
            AuthnOutcome::Failed(INVALID_BEARER_TOKEN.into())
        );
        // Rejections are aggregated, each distinct message once.
        let d = fake("a", "x", "tok-shared-bad");
        let auth2 = bearer(&[a.clone(), d, b.clone()], &[]);
        assert_eq!(
            run(&auth2, Some("Bearer tok-shared-bad")).await,
            AuthnOutcome::Failed("[a rejected it, b rejected it]".into())
        );
        assert_eq!(
            run(&auth, Some("Bearer tok-c-bad")).await,
            AuthnOutcome::Failed("c rejected it".into())
        );
        assert_eq!(
            run(&bearer(&[], &[]), Some("Bearer x")).await,
            AuthnOutcome::Failed(INVALID_BEARER_TOKEN.into())
        );
    }

    #[tokio::test]
    async fn audiences_are_checked() {
        let scoped = Arc::new(Fake {
            name: "sa",
            accept: "tok",
            reject: "",
            audiences: vec!["other".into()],
            calls: AtomicUsize::new(0),
        });
        let auth = bearer(&[scoped], &["https://kubernetes.default.svc"]);
        assert!(matches!(
            run(&auth, Some("Bearer tok")).await,
            AuthnOutcome::Failed(m) if m.starts_with("unable to match audience")
        ));
        // TokenReview asking for the token's own audience accepts it.
        assert!(matches!(
            auth.review("tok", &["other".into()]).await,
            TokenOutcome::Authenticated(r) if r.user.in_group(ALL_AUTHENTICATED)
        ));
        assert!(matches!(
            auth.review("tok", &[]).await,
            TokenOutcome::Invalid(_)
        ));
        assert_eq!(auth.review("nope", &[]).await, TokenOutcome::NotMine);

        // Tokens without audiences are acceptable anywhere.
        let plain = bearer(&[fake("p", "tok", "")], &["api"]);
        assert!(matches!(
            run(&plain, Some("Bearer tok")).await,
            AuthnOutcome::Authenticated(_)
        ));
    }

    #[tokio::test]
    async fn audience_agnostic_wrapper() {
        let inner = fake("file", "tok", "");
        let wrapped = AudienceAgnosticToken::new(vec!["api".into(), "api2".into()], inner.clone());
        let auds = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();

        match wrapped
            .authenticate_token("tok", &auds(&["x", "api2", "api"]))
            .await
        {
            TokenOutcome::Authenticated(r) => {
                assert_eq!(r.audiences, auds(&["api", "api2"]).into())
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            wrapped.authenticate_token("tok", &auds(&["x"])).await,
            TokenOutcome::NotMine
        );
        assert_eq!(
            inner.calls.load(Ordering::SeqCst),
            1,
            "not asked for a foreign audience"
        );
        match wrapped.authenticate_token("tok", &[]).await {
            TokenOutcome::Authenticated(r) => assert!(r.audiences.is_empty()),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(wrapped.name(), "file");
    }
}

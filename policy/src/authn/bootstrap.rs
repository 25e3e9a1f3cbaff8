//! Bootstrap tokens (`<id>.<secret>`), as kube's `plugin/pkg/auth/authenticator/token/bootstrap`:
//! the token is checked against the Secret `kube-system/bootstrap-token-<id>` of type
//! `bootstrap.kubernetes.io/token`, and authenticates as `system:bootstrap:<id>` in
//! `system:bootstrappers` plus the Secret's validated `auth-extra-groups`.
//!
//! Until the token's secret part has been proven (wrong shape, no such Secret, another type,
//! secret mismatch) the answer is `NotMine`, exactly where kube returns `(nil, false, nil)`, so
//! other token authenticators still get their turn. Once it is proven, a Secret that is being
//! deleted, has expired, is not marked for authentication or lists a bad extra group makes the
//! token `Invalid` (kube answers `(nil, false, nil)` there too; the request is a 401 either
//! way, but the reason reaches the logs).

use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine;
use subtle::ConstantTimeEq;

use super::bearer::{TokenAuthenticator, TokenOutcome, TokenReviewResult};
use super::lookup::ObjectLookup;
use crate::user::UserInfo;

/// Namespace holding bootstrap token Secrets.
pub const BOOTSTRAP_NAMESPACE: &str = "kube-system";
/// Bootstrap token Secrets are named this prefix followed by the token id.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// The only Secret type considered.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// User name prefix; the token id follows.
pub const USER_PREFIX: &str = "system:bootstrap:";
/// Group every bootstrap token user is in.
pub const DEFAULT_GROUP: &str = "system:bootstrappers";

const KEY_TOKEN_ID: &str = "token-id";
const KEY_TOKEN_SECRET: &str = "token-secret";
const KEY_EXPIRATION: &str = "expiration";
const KEY_USAGE_AUTHENTICATION: &str = "usage-bootstrap-authentication";
const KEY_EXTRA_GROUPS: &str = "auth-extra-groups";

const ID_LEN: usize = 6;
const SECRET_LEN: usize = 16;

/// Authenticates bootstrap tokens against Secrets read through an [`ObjectLookup`].
pub struct BootstrapTokenAuthenticator {
    lookup: Arc<dyn ObjectLookup>,
}

impl std::fmt::Debug for BootstrapTokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapTokenAuthenticator")
            .finish_non_exhaustive()
    }
}

impl BootstrapTokenAuthenticator {
    pub fn new(lookup: Arc<dyn ObjectLookup>) -> Self {
        BootstrapTokenAuthenticator { lookup }
    }

    fn check(&self, token: &str, now: SystemTime) -> TokenOutcome {
        let Some((id, secret)) = parse_token(token) else {
            return TokenOutcome::NotMine;
        };
        let name = format!("{SECRET_PREFIX}{id}");
        let Some(object) = self.lookup.get("", "secrets", BOOTSTRAP_NAMESPACE, &name) else {
            tracing::debug!(secret = %name, "no secret to match bootstrap bearer token");
            return TokenOutcome::NotMine;
        };
        let Some(data) = object.get("data").and_then(|d| d.as_object()) else {
            tracing::debug!(secret = %name, "bootstrap secret has no data");
            return TokenOutcome::NotMine;
        };
        if object.get("type").and_then(|t| t.as_str()) != Some(SECRET_TYPE) {
            tracing::debug!(secret = %name, "bootstrap secret has invalid type, expected {SECRET_TYPE}");
            return TokenOutcome::NotMine;
        }
        let value = |key: &str| -> String {
            // Secret data is base64 in its JSON form; a missing or undecodable value reads as
            // empty, as kube's GetData on a missing key.
            data.get(key)
                .and_then(|v| v.as_str())
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
                .and_then(|v| String::from_utf8(v).ok())
                .unwrap_or_default()
        };
        if !bool::from(value(KEY_TOKEN_SECRET).as_bytes().ct_eq(secret.as_bytes())) {
            tracing::debug!(secret = %name, "bootstrap secret has invalid value for key {KEY_TOKEN_SECRET}");
            return TokenOutcome::NotMine;
        }
        if value(KEY_TOKEN_ID) != id {
            tracing::debug!(secret = %name, "bootstrap secret has invalid value for key {KEY_TOKEN_ID}");
            return TokenOutcome::NotMine;
        }

        // The token is proven from here on.
        let deleting = object
            .get("metadata")
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|t| !t.is_null());
        if deleting {
            return invalid(&name, "is deleted and awaiting removal");
        }
        let expires_at = match expiration(&value(KEY_EXPIRATION), now) {
            Ok(at) => at,
            Err(reason) => return invalid(&name, &reason),
        };
        if value(KEY_USAGE_AUTHENTICATION) != "true" {
            return invalid(
                &name,
                &format!("is not marked {KEY_USAGE_AUTHENTICATION}=true"),
            );
        }
        let groups = match groups(&value(KEY_EXTRA_GROUPS)) {
            Ok(groups) => groups,
            Err(reason) => {
                return invalid(
                    &name,
                    &format!("has invalid value for key {KEY_EXTRA_GROUPS}: {reason}"),
                )
            }
        };
        TokenOutcome::Authenticated(TokenReviewResult {
            user: Arc::new(UserInfo::new(format!("{USER_PREFIX}{id}"), groups)),
            audiences: Arc::new([]),
            expires_at,
        })
    }
}

fn invalid(secret: &str, reason: &str) -> TokenOutcome {
    let message =
        format!("bootstrap secret {BOOTSTRAP_NAMESPACE}/{secret} matching bearer token {reason}");
    tracing::debug!("{message}");
    TokenOutcome::Invalid(message)
}

#[async_trait::async_trait]
impl TokenAuthenticator for BootstrapTokenAuthenticator {
    fn name(&self) -> &'static str {
        "bootstrap-token"
    }

    async fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
        self.check(token, SystemTime::now())
    }
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Splits `^[a-z0-9]{6}\.[a-z0-9]{16}$` into id and secret.
fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let shaped = |part: &str, len: usize| part.len() == len && part.bytes().all(is_lower_alnum);
    (shaped(id, ID_LEN) && shaped(secret, SECRET_LEN)).then_some((id, secret))
}

/// The token's expiry from the Secret's RFC 3339 `expiration`: `Ok(None)` when it has none,
/// an error when it has passed or cannot be parsed (kube treats unparseable as expired).
fn expiration(value: &str, now: SystemTime) -> Result<Option<SystemTime>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let at = chrono::DateTime::parse_from_rfc3339(value)
        .map_err(|_| format!("has an unparseable expiration time ({value}), treated as expired"))?;
    let at: SystemTime = at.with_timezone(&chrono::Utc).into();
    if at <= now {
        return Err(format!("has expired ({value})"));
    }
    Ok(Some(at))
}

/// `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`
fn valid_extra_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let bytes = rest.as_bytes();
    match bytes.split_last() {
        Some((last, middle)) => {
            is_lower_alnum(*last)
                && middle.len() <= 255
                && middle
                    .iter()
                    .all(|b| is_lower_alnum(*b) || *b == b':' || *b == b'-')
        }
        None => false,
    }
}

/// The user's groups: `system:bootstrappers` and every extra group, deduplicated and sorted as
/// kube's `sets.String.List()` returns them.
fn groups(extra: &str) -> Result<Vec<String>, String> {
    let mut groups = std::collections::BTreeSet::from([DEFAULT_GROUP.to_string()]);
    if !extra.is_empty() {
        for group in extra.split(',') {
            if !valid_extra_group(group) {
                return Err(format!(
                    "{group:?} (must match regexp \\Asystem:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]\\z)"
                ));
            }
            groups.insert(group.to_string());
        }
    }
    Ok(groups.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Objects by (group, resource, namespace, name).
    #[derive(Default)]
    struct Memory {
        objects: Mutex<HashMap<(String, String, String, String), Value>>,
    }

    impl Memory {
        fn put_secret(&self, name: &str, object: Value) {
            if let Ok(mut objects) = self.objects.lock() {
                objects.insert(
                    (
                        String::new(),
                        "secrets".into(),
                        BOOTSTRAP_NAMESPACE.into(),
                        name.into(),
                    ),
                    object,
                );
            }
        }
    }

    impl ObjectLookup for Memory {
        fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
            self.objects
                .lock()
                .ok()?
                .get(&(group.into(), resource.into(), namespace.into(), name.into()))
                .cloned()
        }
    }

    const ID: &str = "abcdef";
    const SECRET: &str = "0123456789abcdef";

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    /// A valid bootstrap Secret for ID/SECRET; `data` entries override or add keys.
    fn secret(data: &[(&str, &str)]) -> Value {
        let mut map = serde_json::Map::new();
        for (k, v) in [
            (KEY_TOKEN_ID, ID),
            (KEY_TOKEN_SECRET, SECRET),
            (KEY_USAGE_AUTHENTICATION, "true"),
        ]
        .into_iter()
        .chain(data.iter().copied())
        {
            map.insert(k.to_string(), Value::String(b64(v)));
        }
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": format!("{SECRET_PREFIX}{ID}"), "namespace": BOOTSTRAP_NAMESPACE},
            "type": SECRET_TYPE,
            "data": map,
        })
    }

    fn with(object: Value) -> BootstrapTokenAuthenticator {
        let memory = Memory::default();
        memory.put_secret(&format!("{SECRET_PREFIX}{ID}"), object);
        BootstrapTokenAuthenticator::new(Arc::new(memory))
    }

    async fn run(auth: &BootstrapTokenAuthenticator, token: &str) -> TokenOutcome {
        auth.authenticate_token(token, &[]).await
    }

    fn token() -> String {
        format!("{ID}.{SECRET}")
    }

    #[tokio::test]
    async fn valid_token() {
        let auth = with(secret(&[(
            KEY_EXTRA_GROUPS,
            "system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:a,system:bootstrappers:a",
        )]));
        match run(&auth, &token()).await {
            TokenOutcome::Authenticated(r) => {
                assert_eq!(r.user.name, "system:bootstrap:abcdef");
                assert_eq!(r.user.uid, "");
                assert_eq!(
                    r.user.groups,
                    vec![
                        "system:bootstrappers",
                        "system:bootstrappers:a",
                        "system:bootstrappers:kubeadm:default-node-token"
                    ]
                );
                assert_eq!(r.expires_at, None);
            }
            other => panic!("unexpected {other:?}"),
        }
        let plain = with(secret(&[]));
        assert!(matches!(
            run(&plain, &token()).await,
            TokenOutcome::Authenticated(r) if r.user.groups == vec![DEFAULT_GROUP]
        ));
    }

    #[tokio::test]
    async fn expiration() {
        let future = chrono::Utc::now() + chrono::Duration::hours(1);
        let auth = with(secret(&[(KEY_EXPIRATION, &future.to_rfc3339())]));
        match run(&auth, &token()).await {
            TokenOutcome::Authenticated(r) => {
                let at = r.expires_at.expect("expiry is reported for caches");
                let want: SystemTime = future.into();
                let diff = at.duration_since(want).unwrap_or_else(|e| e.duration());
                assert!(diff < Duration::from_secs(1));
            }
            other => panic!("unexpected {other:?}"),
        }
        let past = chrono::Utc::now() - chrono::Duration::seconds(1);
        let expired = with(secret(&[(KEY_EXPIRATION, &past.to_rfc3339())]));
        assert!(matches!(
            run(&expired, &token()).await,
            TokenOutcome::Invalid(m) if m.contains("has expired")
        ));
        let garbage = with(secret(&[(KEY_EXPIRATION, "tomorrow")]));
        assert!(matches!(
            run(&garbage, &token()).await,
            TokenOutcome::Invalid(m) if m.contains("unparseable")
        ));
        let offset = with(secret(&[(KEY_EXPIRATION, "2999-01-01T00:00:00+02:00")]));
        assert!(matches!(
            run(&offset, &token()).await,
            TokenOutcome::Authenticated(_)
        ));
    }

    #[tokio::test]
    async fn rejected_after_the_secret_matched() {
        for (object, why) in [
            (secret(&[(KEY_USAGE_AUTHENTICATION, "false")]), "not marked"),
            (secret(&[(KEY_USAGE_AUTHENTICATION, "True")]), "not marked"),
            (
                {
                    let mut s = secret(&[]);
                    if let Some(data) = s["data"].as_object_mut() {
                        data.remove(KEY_USAGE_AUTHENTICATION);
                    }
                    s
                },
                "not marked",
            ),
            (
                secret(&[(KEY_EXTRA_GROUPS, "system:masters")]),
                KEY_EXTRA_GROUPS,
            ),
            (
                secret(&[(KEY_EXTRA_GROUPS, "system:bootstrappers:ok,")]),
                KEY_EXTRA_GROUPS,
            ),
            (
                secret(&[(KEY_EXTRA_GROUPS, "system:bootstrappers:ends-with-")]),
                KEY_EXTRA_GROUPS,
            ),
            (
                secret(&[(KEY_EXTRA_GROUPS, "system:bootstrappers:")]),
                KEY_EXTRA_GROUPS,
            ),
            (
                {
                    let mut s = secret(&[]);
                    s["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
                    s
                },
                "deleted",
            ),
        ] {
            match run(&with(object), &token()).await {
                TokenOutcome::Invalid(message) => {
                    assert!(message.contains(why), "{message} should mention {why}");
                    assert!(!message.contains(SECRET), "the secret is never reported");
                }
                other => panic!("expected Invalid({why}), got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn not_mine() {
        let auth = with(secret(&[]));
        for token in [
            "",
            "abcdef",
            "abcdef.0123456789abcde",
            "abcdef.0123456789abcdef0",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789ABCDEF",
            "abcdef:0123456789abcdef",
            "abcde.f0123456789abcdef",
            "abcdef.0123456789abcdef\n",
            "eyJhbGciOiJSUzI1NiJ9.e30.sig",
        ] {
            assert_eq!(run(&auth, token).await, TokenOutcome::NotMine, "{token:?}");
        }
        // Right shape, wrong secret.
        assert_eq!(
            run(&auth, &format!("{ID}.0123456789abcdee")).await,
            TokenOutcome::NotMine
        );
        // No Secret for the id.
        assert_eq!(
            run(&auth, &format!("zzzzzz.{SECRET}")).await,
            TokenOutcome::NotMine
        );
        // Wrong Secret type, or no data.
        let mut opaque = secret(&[]);
        opaque["type"] = json!("Opaque");
        assert_eq!(run(&with(opaque), &token()).await, TokenOutcome::NotMine);
        let mut empty = secret(&[]);
        if let Some(o) = empty.as_object_mut() {
            o.remove("data");
        }
        assert_eq!(run(&with(empty), &token()).await, TokenOutcome::NotMine);
        // token-id that disagrees with the name.
        let other_id = with(secret(&[(KEY_TOKEN_ID, "zzzzzz")]));
        assert_eq!(run(&other_id, &token()).await, TokenOutcome::NotMine);
        // A wrong secret is NotMine even when the Secret would be invalid anyway.
        let deleted_wrong = {
            let mut s = secret(&[(KEY_USAGE_AUTHENTICATION, "false")]);
            s["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            with(s)
        };
        assert_eq!(
            run(&deleted_wrong, &format!("{ID}.ffffffffffffffff")).await,
            TokenOutcome::NotMine
        );
    }

    #[test]
    fn extra_group_pattern() {
        assert!(valid_extra_group("system:bootstrappers:a"));
        assert!(valid_extra_group("system:bootstrappers:a:b-c:9"));
        assert!(valid_extra_group(&format!(
            "system:bootstrappers:{}a",
            "x".repeat(255)
        )));
        assert!(!valid_extra_group(&format!(
            "system:bootstrappers:{}a",
            "x".repeat(256)
        )));
        assert!(!valid_extra_group("system:bootstrappers:A"));
        assert!(!valid_extra_group("system:bootstrappers:a:"));
        assert!(!valid_extra_group("system:bootstrappers"));
        assert!(!valid_extra_group(" system:bootstrappers:a"));
    }
}

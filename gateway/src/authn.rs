//! Assembles the configured authenticators in kube-apiserver's order (front proxy, x509,
//! then bearer tokens: token file, ServiceAccount, bootstrap, JWT issuers, webhook), with the
//! pieces that share them: the ServiceAccount token issuer (for `serviceaccounts/token`),
//! the TokenReview adapter, the CA bundles the TLS layer trusts, the identity headers to
//! strip, and the issuer's discovery documents.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kubegate_backends::core::authentication::TokenReviewer;
use kubegate_config::Config;
use kubegate_policy::authn::bearer::{
    AudienceAgnosticToken, BearerAuthenticator, TokenAuthenticator, TokenOutcome,
};
use kubegate_policy::authn::bearer::{ConcurrencyLimited, RemoteAudiences};
use kubegate_policy::authn::bootstrap::BootstrapTokenAuthenticator;
use kubegate_policy::authn::ca_bundle::CaBundle;
use kubegate_policy::authn::cache::CachedTokenAuthenticator;
use kubegate_policy::authn::jwt::{AnonymousConfig, AuthenticationConfiguration};
use kubegate_policy::authn::lookup::ObjectLookup;
use kubegate_policy::authn::request_header::{
    identity_header_names, IdentityHeaders, RequestHeaderAuthenticator,
};
use kubegate_policy::authn::serviceaccount::{
    self, ensure_signing_key, ServiceAccountTokenAuthenticator, SigningKey, TokenIssuer,
    VerifyingKeys,
};
use kubegate_policy::authn::token_file::TokenFileAuthenticator;
use kubegate_policy::authn::union::UnionAuthenticator;
use kubegate_policy::authn::webhook::{WebhookEndpoint, WebhookTokenAuthenticator};
use kubegate_policy::authn::x509::X509Authenticator;
use kubegate_policy::{Authenticator, UserInfo};

/// An [`ObjectLookup`] bound after the registry exists (authenticators are built first,
/// because the registry's TokenRequest handler needs the issuer).
#[derive(Default)]
pub struct LateLookup(OnceLock<Arc<dyn ObjectLookup>>);

impl LateLookup {
    pub fn bind(&self, lookup: Arc<dyn ObjectLookup>) {
        let _ = self.0.set(lookup);
    }
}

impl ObjectLookup for LateLookup {
    fn get(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<serde_json::Value> {
        self.0.get()?.get(group, resource, namespace, name)
    }

    fn legacy_token_used(&self, namespace: &str, secret: &str, uid: &str, today: &str) {
        if let Some(lookup) = self.0.get() {
            lookup.legacy_token_used(namespace, secret, uid, today);
        }
    }
}

/// The authenticators' view of the store: objects read from the watch cache, and the one write
/// authentication causes, the legacy token tracking label, made on a task of its own.
pub struct RegistryLookup(pub Arc<kubegate_backends::registry::Registry>);

impl ObjectLookup for RegistryLookup {
    fn get(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<serde_json::Value> {
        self.0.get(group, resource, namespace, name)
    }

    fn legacy_token_used(&self, namespace: &str, secret: &str, uid: &str, today: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let registry = self.0.clone();
        let (namespace, secret, uid, today) = (
            namespace.to_string(),
            secret.to_string(),
            uid.to_string(),
            today.to_string(),
        );
        runtime.spawn(async move {
            let Some(secrets) = registry.find("", "secrets") else {
                return;
            };
            let label = serviceaccount::LEGACY_LAST_USED_LABEL;
            let updated = registry
                .update_internal(&secrets, &namespace, &secret, "kube-apiserver", |current| {
                    // Only the Secret the token was checked against (kube's patch names its uid).
                    let current_uid = current
                        .pointer("/metadata/uid")
                        .and_then(serde_json::Value::as_str);
                    if current_uid != Some(uid.as_str()) {
                        return Err(kubegate_backends::ApiError::new(
                            409,
                            "Conflict",
                            "the token Secret was replaced",
                        ));
                    }
                    let mut next = current.clone();
                    if let Some(metadata) = next
                        .get_mut("metadata")
                        .and_then(serde_json::Value::as_object_mut)
                    {
                        let labels = metadata
                            .entry("labels")
                            .or_insert_with(|| serde_json::json!({}));
                        if !labels.is_object() {
                            *labels = serde_json::json!({});
                        }
                        labels[label] = serde_json::json!(today);
                    }
                    Ok(next)
                })
                .await;
            if let Err(e) = updated {
                tracing::debug!(%namespace, %secret, error = %e.message, "recording a legacy token's last use");
            }
        });
    }
}

/// Which requests without credentials become `system:anonymous`.
pub enum Anonymous {
    Off,
    On,
    /// The AuthenticationConfiguration's `anonymous` block (only its listed paths).
    Paths(AnonymousConfig),
}

impl Anonymous {
    pub fn allows(&self, path: &str) -> bool {
        match self {
            Anonymous::Off => false,
            Anonymous::On => true,
            Anonymous::Paths(c) => c.allows(path),
        }
    }
}

/// Everything authentication-related the server wires.
pub struct Authentication {
    pub authenticator: Arc<dyn Authenticator>,
    pub bearer: Arc<BearerAuthenticator>,
    pub anonymous: Anonymous,
    pub identity_headers: IdentityHeaders,
    pub ca_bundles: Vec<Arc<CaBundle>>,
    pub issuer: Arc<TokenIssuer>,
    /// `/.well-known/openid-configuration` and `/openid/v1/jwks`, when the issuer is a
    /// discoverable https URL.
    pub discovery: Option<(Bytes, Bytes)>,
}

/// Builds the authenticators from the configuration.
pub fn build(
    config: &Config,
    client_ca: &Path,
    server_address: &str,
    lookup: Arc<dyn ObjectLookup>,
) -> Result<Authentication, String> {
    let auth = &config.authentication;
    let sa = &auth.service_accounts;
    // Every accepted issuer, the signing one first.
    let issuers: Vec<String> = std::iter::once(sa.issuer.clone())
        .chain(sa.accepted_issuers.iter().cloned())
        .collect();
    // kube's default audiences: the issuers.
    let api_audiences = if sa.api_audiences.is_empty() {
        issuers.clone()
    } else {
        sa.api_audiences.clone()
    };

    // Certificates: the client CA (x509 users) and the front proxy's CA.
    let client_bundle = Arc::new(CaBundle::load(client_ca)?);
    let mut ca_bundles = vec![client_bundle.clone()];
    let mut chain: Vec<Arc<dyn Authenticator>> = Vec::new();
    let mut x509 = X509Authenticator::new(client_bundle);
    let identity_headers = match &auth.request_header {
        Some(rh) => {
            let bundle = Arc::new(CaBundle::load(&rh.client_ca_file)?);
            ca_bundles.push(bundle.clone());
            x509 = x509.with_request_header_bundle(bundle.clone());
            let front_proxy = RequestHeaderAuthenticator::new(
                bundle,
                rh.allowed_names.clone(),
                rh.username_headers.clone(),
                rh.uid_headers.clone(),
                rh.group_headers.clone(),
                rh.extra_headers_prefix.clone(),
            )
            .map_err(|e| format!("authentication.requestHeader: {e}"))?;
            let headers = front_proxy.identity_headers();
            chain.push(Arc::new(front_proxy));
            headers
        }
        None => identity_header_names(&[], &[], &[], &[]),
    };
    chain.push(Arc::new(x509));

    // ServiceAccount tokens: kubegate is an issuer.
    let signing_key = match &sa.signing_key_file {
        Some(path) => SigningKey::from_file(path)?,
        None => ensure_signing_key(&config.data_dir.join("pki").join("service-account.key"))?,
    };
    let keys = VerifyingKeys::load(Some(&signing_key), &sa.key_files)?;
    let issuer = Arc::new(TokenIssuer::new(
        sa.issuer.clone(),
        signing_key,
        api_audiences.clone(),
        Some(sa.max_token_expiration),
    ));

    // Bearer tokens, in kube's order.
    let mut tokens: Vec<Arc<dyn TokenAuthenticator>> = Vec::new();
    let agnostic = |inner: Arc<dyn TokenAuthenticator>| -> Arc<dyn TokenAuthenticator> {
        Arc::new(AudienceAgnosticToken::new(api_audiences.clone(), inner))
    };
    if let Some(path) = &auth.token_auth_file {
        tokens.push(agnostic(Arc::new(TokenFileAuthenticator::load(path)?)));
    }
    tokens.push(Arc::new(ServiceAccountTokenAuthenticator::new(
        issuers.clone(),
        keys.clone(),
        api_audiences.clone(),
        lookup.clone(),
    )));
    if auth.bootstrap_tokens {
        tokens.push(agnostic(Arc::new(BootstrapTokenAuthenticator::new(lookup))));
    }
    let mut anonymous = if auth.anonymous {
        Anonymous::On
    } else {
        Anonymous::Off
    };
    if let Some(path) = &auth.config_file {
        let structured = AuthenticationConfiguration::load(path, &issuers)?;
        for jwt in structured.jwt_authenticators()? {
            tokens.push(agnostic(Arc::new(jwt)));
        }
        if let Some(block) = structured.anonymous.clone() {
            if auth.anonymous {
                return Err(
                    "authentication.anonymous and the anonymous block of authentication.configFile are mutually exclusive"
                        .into(),
                );
            }
            anonymous = Anonymous::Paths(block);
        }
    }
    if let Some(webhook) = &auth.webhook {
        let remote = WebhookTokenAuthenticator::from_kubeconfig(&webhook.config_file)?
            .with_version(&webhook.version)?
            .with_implicit_audiences(api_audiences.clone());
        tokens.push(Arc::new(CachedTokenAuthenticator::new(
            Arc::new(remote),
            webhook.cache_ttl,
            webhook.failure_cache_ttl,
        )));
    }
    if let Some(delegate) = &config.delegate {
        // Tokens the cluster issued (its ServiceAccounts' above all) are the cluster's to
        // judge: a TokenReview there, as an extension API server delegates authentication.
        let endpoint = delegate_endpoint(delegate, "/apis/authentication.k8s.io/v1/tokenreviews")
            .map_err(|e| format!("delegate: the cluster's TokenReview client: {e}"))?;
        let endpoint = match delegate.identity_forwarding.as_str() {
            // kubegate's own identity at the cluster, as its probes and discovery carry it.
            "frontProxy" => endpoint.with_headers(&[
                (
                    "X-Remote-User",
                    crate::aggregator::availability::AGGREGATOR_USER,
                ),
                (
                    "X-Remote-Group",
                    crate::aggregator::availability::AGGREGATOR_GROUP,
                ),
            ])?,
            _ => endpoint,
        };
        let reviewer = WebhookTokenAuthenticator::new(endpoint).with_version("v1")?;
        // Unknown tokens cost the cluster a review each (as with kube's token webhook); at
        // most `DELEGATE_TOKEN_REVIEWS_AT_ONCE` at a time, whatever the rate they come at.
        let limited = ConcurrencyLimited::new(Arc::new(reviewer), DELEGATE_TOKEN_REVIEWS_AT_ONCE);
        tokens.push(agnostic(Arc::new(RemoteAudiences(Arc::new(
            CachedTokenAuthenticator::new(
                Arc::new(limited),
                DELEGATE_TOKEN_REVIEW_CACHE,
                DELEGATE_TOKEN_REVIEW_CACHE,
            ),
        )))));
    }
    let cached = CachedTokenAuthenticator::new(
        Arc::new(kubegate_policy::authn::bearer::TokenUnion::new(tokens)),
        auth.token_cache.success_ttl,
        auth.token_cache.failure_ttl,
    );
    let bearer = Arc::new(BearerAuthenticator::new(
        vec![Arc::new(cached)],
        api_audiences,
    ));
    chain.push(bearer.clone());

    let jwks_uri = serviceaccount::default_jwks_uri(server_address);
    let discovery = serviceaccount::validate_discovery_urls(&sa.issuer, &jwks_uri)
        .ok()
        .map(|()| {
            (
                Bytes::from(
                    serviceaccount::openid_configuration(&sa.issuer, &jwks_uri, &keys).to_string(),
                ),
                Bytes::from(serviceaccount::jwks(&keys).to_string()),
            )
        });
    Ok(Authentication {
        authenticator: Arc::new(UnionAuthenticator::new(chain)),
        bearer,
        anonymous,
        identity_headers,
        ca_bundles,
        issuer,
        discovery,
    })
}

/// How long the cluster's TokenReview answers are reused: a token it stops accepting (its
/// pod deleted) stops working here within seconds.
const DELEGATE_TOKEN_REVIEW_CACHE: std::time::Duration = std::time::Duration::from_secs(10);

/// How many TokenReviews kubegate has in flight at the cluster at once.
const DELEGATE_TOKEN_REVIEWS_AT_ONCE: usize = 16;

/// A client of one API of the cluster kubegate fronts (`path`: the review endpoint), with
/// kubegate's delegate credential: its client certificate, or its token.
pub(crate) fn delegate_endpoint(
    delegate: &kubegate_config::DelegateConfig,
    path: &str,
) -> Result<WebhookEndpoint, String> {
    let mut cluster = serde_json::json!({
        "server": format!("{}{path}", delegate.server.trim_end_matches('/')),
    });
    if let Some(ca) = &delegate.ca_file {
        cluster["certificate-authority"] = serde_json::json!(ca);
    }
    if let Some(name) = &delegate.tls_server_name {
        cluster["tls-server-name"] = serde_json::json!(name);
    }
    let mut user = serde_json::json!({});
    if let (Some(cert), Some(key)) = (&delegate.client_cert_file, &delegate.client_key_file) {
        user["client-certificate"] = serde_json::json!(cert);
        user["client-key"] = serde_json::json!(key);
    }
    if let Some(token) = &delegate.token_file {
        user["tokenFile"] = serde_json::json!(token);
    }
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "delegate", "cluster": cluster}],
        "users": [{"name": "kubegate", "user": user}],
        "contexts": [{"name": "delegate", "context": {"cluster": "delegate", "user": "kubegate"}}],
        "current-context": "delegate",
    });
    WebhookEndpoint::from_kubeconfig_str(&kubeconfig.to_string(), std::path::Path::new("."))
}

/// TokenReview answers from kubegate's own bearer-token authenticators.
pub struct BearerReviewer(pub Arc<BearerAuthenticator>);

#[async_trait::async_trait]
impl TokenReviewer for BearerReviewer {
    async fn review(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        match self.0.review(token, audiences).await {
            TokenOutcome::Authenticated(result) => Ok(Some((
                Arc::unwrap_or_clone(result.user),
                result.audiences.to_vec(),
            ))),
            TokenOutcome::NotMine => Ok(None),
            TokenOutcome::Invalid(reason) => Err(reason),
        }
    }
}

//! Webhook token authentication, as kube's `--authentication-token-webhook-config-file`: a
//! bearer token is sent to a remote service as an `authentication.k8s.io` `TokenReview`
//! (`v1beta1` unless configured, as kube's default) and the service's `status` decides.
//!
//! The remote service is named by a kubeconfig-format file, read the way client-go's
//! `clientcmd` reads one ([`WebhookEndpoint::from_kubeconfig`]):
//!
//! - the `current-context` picks a cluster and a user;
//! - `clusters[].cluster`: `server` (the exact URL the review is POSTed to),
//!   `certificate-authority` / `certificate-authority-data` (the roots that verify the server;
//!   the system roots when neither is set), `insecure-skip-tls-verify` (honoured only when
//!   explicitly `true`, and never together with a CA), `tls-server-name`;
//! - `users[].user`: `client-certificate(-data)` + `client-key(-data)` (mTLS), `token` /
//!   `tokenFile` (a bearer token, the file re-read at most once a minute as client-go does),
//!   `username` / `password` (basic auth);
//! - relative file paths are relative to the kubeconfig's directory.
//!
//! Settings kubegate cannot honour (`exec`, `auth-provider`, impersonation, `proxy-url`) are
//! load errors rather than being silently ignored.
//!
//! Like kube's `WebhookTokenAuthenticator` the request is retried with exponential backoff
//! (500 ms × 1.5, five attempts) on answers that say "try again" (500, 504, 429,
//! `Retry-After`) and on dropped connections. A transport error, a non-2xx answer or a
//! malformed body is [`TokenOutcome::Invalid`] and is logged: never an allow. Results are
//! not cached here: kube wraps this authenticator in its token cache with
//! [`DEFAULT_CACHE_TTL`] for both successes and failures (errors are not cached), and the
//! integrator is expected to do the same with kubegate's cache layer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::https::{
    error_chain, https_client, read_body_capped, root_store_from_pem, ClientIdentity, TlsOptions,
};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::bearer::{TokenAuthenticator, TokenOutcome, TokenReviewResult};
use crate::user::UserInfo;

/// kube's `--authentication-token-webhook-cache-ttl` default. kube caches both successful
/// and unsuccessful reviews for this long (the same TTL for both); transport errors are
/// never cached.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(120);
/// How long kube caches an unsuccessful review: the same TTL as successes.
pub const DEFAULT_FAILURE_CACHE_TTL: Duration = DEFAULT_CACHE_TTL;
/// Time allowed for one webhook request. kube allows 30 s; a shorter bound keeps a stuck
/// webhook from holding requests for most of kubegate's request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `TokenReview` version sent unless [`WebhookTokenAuthenticator::with_version`] says
/// otherwise (kube's `--authentication-token-webhook-version` default).
pub const DEFAULT_VERSION: &str = "v1beta1";

/// A review answer larger than this is refused rather than buffered.
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// kube's `DefaultAuthWebhookRetryBackoff`: 500 ms, factor 1.5, jitter 0.2, 5 steps.
const RETRY_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const RETRY_STEPS: u32 = 5;
/// client-go re-reads a `tokenFile` at most this often.
const TOKEN_FILE_REFRESH: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// kubeconfig

/// The parts of a kubeconfig file a webhook client uses. Unknown keys are ignored, as
/// client-go does; the ones that would change behaviour kubegate does not implement are
/// captured so they can be refused.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct Kubeconfig {
    clusters: Option<Vec<NamedCluster>>,
    users: Option<Vec<NamedUser>>,
    contexts: Option<Vec<NamedContext>>,
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    #[serde(default)]
    name: String,
    #[serde(default)]
    cluster: Option<ClusterInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct ClusterInfo {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: Option<bool>,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedUser {
    #[serde(default)]
    name: String,
    #[serde(default)]
    user: Option<AuthInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct AuthInfo {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    password: Option<String>,
    exec: Option<Value>,
    auth_provider: Option<Value>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    #[serde(rename = "as-uid")]
    impersonate_uid: Option<String>,
    #[serde(rename = "as-groups")]
    impersonate_groups: Option<Value>,
    #[serde(rename = "as-user-extra")]
    impersonate_extra: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    #[serde(default)]
    name: String,
    #[serde(default)]
    context: Option<ContextInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContextInfo {
    cluster: String,
    user: String,
}

/// How requests to the webhook authenticate themselves.
enum Credentials {
    None,
    Bearer(String),
    /// A `tokenFile`, re-read at most once a minute so rotated tokens are picked up.
    BearerFile {
        path: PathBuf,
        cached: Mutex<Option<(String, Instant)>>,
    },
    Basic {
        username: String,
        password: String,
    },
}

impl std::fmt::Debug for Credentials {
    // Never print a credential.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Credentials::None => "none",
            Credentials::Bearer(_) => "token",
            Credentials::BearerFile { .. } => "tokenFile",
            Credentials::Basic { .. } => "basic",
        };
        f.write_str(kind)
    }
}

impl Credentials {
    fn authorization(&self) -> Result<Option<String>, String> {
        match self {
            Credentials::None => Ok(None),
            Credentials::Bearer(token) => Ok(Some(format!("Bearer {token}"))),
            Credentials::Basic { username, password } => {
                let encoded = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                Ok(Some(format!("Basic {encoded}")))
            }
            Credentials::BearerFile { path, cached } => {
                let mut cached = cached
                    .lock()
                    .map_err(|_| "webhook: token file cache poisoned".to_string())?;
                if let Some((token, read_at)) = cached.as_ref() {
                    if read_at.elapsed() < TOKEN_FILE_REFRESH {
                        return Ok(Some(format!("Bearer {token}")));
                    }
                }
                match std::fs::read_to_string(path) {
                    Ok(text) => {
                        let token = text.trim().to_string();
                        *cached = Some((token.clone(), Instant::now()));
                        Ok(Some(format!("Bearer {token}")))
                    }
                    // client-go keeps using the last good token when a re-read fails.
                    Err(e) => match cached.as_mut() {
                        Some((token, read_at)) => {
                            tracing::warn!(path = %path.display(), error = %e, "webhook: cannot re-read tokenFile; keeping the previous token");
                            *read_at = Instant::now();
                            Ok(Some(format!("Bearer {token}")))
                        }
                        None => Err(format!(
                            "webhook: cannot read tokenFile {}: {e}",
                            path.display()
                        )),
                    },
                }
            }
        }
    }
}

/// A remote webhook named by a kubeconfig file: the server URL, an HTTPS client set up with
/// the file's roots and client certificate, and the credentials to present. Shared by the
/// token authenticator here and usable by other webhooks (authorization) the same way.
pub struct WebhookEndpoint {
    server: reqwest::Url,
    client: reqwest::Client,
    credentials: Credentials,
    /// Sent with every request: the identity kubegate asserts as a front proxy to the
    /// cluster it fronts (`X-Remote-User`, `X-Remote-Group`).
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl std::fmt::Debug for WebhookEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookEndpoint")
            .field("server", &self.server.as_str())
            .field("credentials", &self.credentials)
            .finish()
    }
}

/// Why one webhook attempt failed, and whether kube would try again.
#[derive(Debug)]
struct AttemptError {
    message: String,
    retry: bool,
}

impl WebhookEndpoint {
    /// Reads a kubeconfig file and builds the client for its current context.
    pub fn from_kubeconfig(path: &Path) -> Result<WebhookEndpoint, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("webhook kubeconfig {}: {e}", path.display()))?;
        let base_dir = path.parent().unwrap_or_else(|| Path::new("."));
        Self::from_kubeconfig_str(&text, base_dir)
            .map_err(|e| format!("webhook kubeconfig {}: {e}", path.display()))
    }

    /// Like [`WebhookEndpoint::from_kubeconfig`] with the file's text; relative paths are
    /// resolved against `base_dir`.
    pub fn from_kubeconfig_str(text: &str, base_dir: &Path) -> Result<WebhookEndpoint, String> {
        let config: Kubeconfig =
            serde_yaml::from_str(text).map_err(|e| format!("invalid kubeconfig: {e}"))?;
        let context_name = config.current_context.clone().unwrap_or_default();
        if context_name.is_empty() {
            return Err("invalid configuration: current-context is not set".to_string());
        }
        let context = config
            .contexts
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|c| c.name == context_name)
            .and_then(|c| c.context.as_ref())
            .ok_or_else(|| {
                format!("invalid configuration: context was not found for specified context: {context_name}")
            })?;
        let cluster = config
            .clusters
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|c| c.name == context.cluster)
            .and_then(|c| c.cluster.as_ref())
            .ok_or_else(|| {
                format!(
                    "invalid configuration: cluster {:?} of context {context_name:?} was not found",
                    context.cluster
                )
            })?;
        // A context may name no user: the webhook is then called without credentials.
        let default_user = AuthInfo::default();
        let user = if context.user.is_empty() {
            &default_user
        } else {
            config
                .users
                .as_deref()
                .unwrap_or_default()
                .iter()
                .find(|u| u.name == context.user)
                .map(|u| u.user.as_ref().unwrap_or(&default_user))
                .ok_or_else(|| {
                    format!(
                        "invalid configuration: user {:?} of context {context_name:?} was not found",
                        context.user
                    )
                })?
        };
        Self::build(cluster, &context.cluster, user, &context.user, base_dir)
    }

    fn build(
        cluster: &ClusterInfo,
        cluster_name: &str,
        user: &AuthInfo,
        user_name: &str,
        base_dir: &Path,
    ) -> Result<WebhookEndpoint, String> {
        let server_text = cluster.server.as_deref().unwrap_or_default();
        if server_text.is_empty() {
            return Err(format!(
                "invalid configuration: no server found for cluster {cluster_name:?}"
            ));
        }
        let server = reqwest::Url::parse(server_text)
            .map_err(|e| format!("invalid server {server_text:?}: {e}"))?;
        match server.scheme() {
            "https" => {}
            // kube allows a plain-HTTP webhook; the token then crosses the wire in clear.
            "http" => {
                tracing::warn!(server = %server, "webhook: server uses plain http; tokens are sent unencrypted")
            }
            other => {
                return Err(format!(
                    "invalid server {server_text:?}: unsupported scheme {other:?}"
                ))
            }
        }
        if cluster.proxy_url.as_deref().is_some_and(|p| !p.is_empty()) {
            return Err(format!(
                "cluster {cluster_name:?}: proxy-url is not supported by kubegate"
            ));
        }
        if user.exec.is_some() || user.auth_provider.is_some() {
            return Err(format!(
                "user {user_name:?}: exec and auth-provider credential plugins are not supported by kubegate"
            ));
        }
        if user.impersonate.is_some()
            || user.impersonate_uid.is_some()
            || user.impersonate_groups.is_some()
            || user.impersonate_extra.is_some()
        {
            return Err(format!(
                "user {user_name:?}: impersonation (as, as-uid, as-groups, as-user-extra) is not supported by kubegate"
            ));
        }

        // Server verification, with clientcmd's consistency rules.
        let ca_data = non_empty(&cluster.certificate_authority_data);
        let ca_file = non_empty(&cluster.certificate_authority);
        if ca_data.is_some() && ca_file.is_some() {
            return Err(format!(
                "certificate-authority-data and certificate-authority are both specified for {cluster_name:?}"
            ));
        }
        let insecure = cluster.insecure_skip_tls_verify == Some(true);
        if insecure && (ca_data.is_some() || ca_file.is_some()) {
            return Err(format!(
                "cluster {cluster_name:?}: specifying a root certificates file with the insecure flag is not allowed"
            ));
        }
        let ca_pem = match (ca_data, ca_file) {
            (Some(data), _) => Some(decode_data(data, "certificate-authority-data")?),
            (None, Some(file)) => Some(read_file(base_dir, file, "certificate-authority")?),
            (None, None) => None,
        };
        let roots = match ca_pem {
            Some(pem) => Some(
                root_store_from_pem(&pem)
                    .map_err(|e| format!("cluster {cluster_name:?}: certificate-authority: {e}"))?,
            ),
            None => None,
        };

        // Client certificate.
        let cert_data = non_empty(&user.client_certificate_data);
        let cert_file = non_empty(&user.client_certificate);
        let key_data = non_empty(&user.client_key_data);
        let key_file = non_empty(&user.client_key);
        if cert_data.is_some() && cert_file.is_some() {
            return Err(format!(
                "client-cert-data and client-cert are both specified for {user_name:?}"
            ));
        }
        if key_data.is_some() && key_file.is_some() {
            return Err(format!(
                "client-key-data and client-key are both specified for {user_name:?}"
            ));
        }
        let cert_pem = match (cert_data, cert_file) {
            (Some(data), _) => Some(decode_data(data, "client-certificate-data")?),
            (None, Some(file)) => Some(read_file(base_dir, file, "client-certificate")?),
            (None, None) => None,
        };
        let key_pem = match (key_data, key_file) {
            (Some(data), _) => Some(decode_data(data, "client-key-data")?),
            (None, Some(file)) => Some(read_file(base_dir, file, "client-key")?),
            (None, None) => None,
        };
        let client_auth = match (cert_pem, key_pem) {
            (Some(cert), Some(key)) => Some(ClientIdentity::from_pem(&cert, &key)?),
            (Some(_), None) => {
                return Err(format!(
                    "client-key-data or client-key must be specified for {user_name:?} to use the clientCert authentication method"
                ))
            }
            (None, Some(_)) => {
                return Err(format!(
                    "client-cert-data or client-cert must be specified for {user_name:?} to use the clientCert authentication method"
                ))
            }
            (None, None) => None,
        };

        // Request credentials: a bearer token or basic auth, not both.
        let token = non_empty(&user.token);
        let token_file = non_empty(&user.token_file);
        let basic = non_empty(&user.username).is_some() || non_empty(&user.password).is_some();
        if basic && (token.is_some() || token_file.is_some()) {
            return Err(format!(
                "more than one authentication method found for {user_name:?}; found [token basicAuth], only one is allowed"
            ));
        }
        let credentials = if let Some(file) = token_file {
            // client-go: the last successful read of tokenFile wins over `token`.
            let path = resolve(base_dir, file);
            let token = std::fs::read_to_string(&path)
                .map_err(|e| format!("tokenFile {}: {e}", path.display()))?
                .trim()
                .to_string();
            Credentials::BearerFile {
                path,
                cached: Mutex::new(Some((token, Instant::now()))),
            }
        } else if let Some(token) = token {
            Credentials::Bearer(token.to_string())
        } else if basic {
            Credentials::Basic {
                username: user.username.clone().unwrap_or_default(),
                password: user.password.clone().unwrap_or_default(),
            }
        } else {
            Credentials::None
        };

        if insecure {
            tracing::warn!(server = %server, "webhook: insecure-skip-tls-verify is set; the server certificate is not verified");
        }
        let client = https_client(&TlsOptions {
            roots,
            insecure,
            server_name: non_empty(&cluster.tls_server_name).map(str::to_string),
            client_auth,
            https_only: false,
            follow_redirects: true,
            resolve: Vec::new(),
            host: None,
        })?;
        Ok(WebhookEndpoint {
            server,
            client,
            credentials,
            headers: Vec::new(),
        })
    }

    /// Adds headers sent with every request (names and values must be valid HTTP).
    pub fn with_headers(mut self, headers: &[(&str, &str)]) -> Result<Self, String> {
        for (name, value) in headers {
            let name = http::HeaderName::try_from(*name)
                .map_err(|e| format!("webhook header {name:?}: {e}"))?;
            let value = http::HeaderValue::try_from(*value)
                .map_err(|e| format!("webhook header {name}: {e}"))?;
            self.headers.push((name, value));
        }
        Ok(self)
    }

    /// The URL reviews are POSTed to.
    pub fn server(&self) -> &str {
        self.server.as_str()
    }

    /// POSTs `body` as JSON, retrying like kube's generic webhook (exponential backoff on
    /// 500/504/429, `Retry-After` and dropped connections). Returns the body of a 2xx answer;
    /// any other outcome is an error message (safe to log: it never contains the request).
    pub async fn post_json(&self, body: &Value, timeout: Duration) -> Result<Vec<u8>, String> {
        let payload = serde_json::to_vec(body).map_err(|e| format!("webhook: encode: {e}"))?;
        let mut backoff = RETRY_INITIAL_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.post_once(&payload, timeout).await {
                Ok(body) => return Ok(body),
                Err(e) if e.retry && attempt < RETRY_STEPS => {
                    tracing::debug!(server = %self.server, attempt, error = %e.message, "webhook: retrying");
                    tokio::time::sleep(jittered(backoff)).await;
                    backoff = backoff.mul_f64(1.5);
                    attempt += 1;
                }
                Err(e) => return Err(e.message),
            }
        }
    }

    async fn post_once(&self, payload: &[u8], timeout: Duration) -> Result<Vec<u8>, AttemptError> {
        let mut request = self
            .client
            .post(self.server.clone())
            .timeout(timeout)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(payload.to_vec());
        let authorization = self
            .credentials
            .authorization()
            .map_err(|message| AttemptError {
                message,
                retry: false,
            })?;
        if let Some(value) = authorization {
            request = request.header(http::header::AUTHORIZATION, value);
        }
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        let mut response = request.send().await.map_err(|e| AttemptError {
            // kube retries dropped connections, not refused ones or its own timeouts.
            retry: !e.is_connect() && !e.is_timeout() && !e.is_builder(),
            message: format!("webhook: {}: {}", self.server, error_chain(&e)),
        })?;
        let status = response.status();
        let retry_after = response.headers().contains_key(http::header::RETRY_AFTER);
        let body = read_body_capped(&mut response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|message| AttemptError {
                message: format!("webhook: {}: {message}", self.server),
                retry: false,
            })?;
        if status.is_success() {
            return Ok(body);
        }
        let retry = retry_after || matches!(status.as_u16(), 429 | 500 | 504);
        Err(AttemptError {
            message: format!(
                "webhook: {} answered {status}: {}",
                self.server,
                snippet(&body)
            ),
            retry,
        })
    }
}

// ---------------------------------------------------------------------------------------
// The authenticator

/// Bearer-token authentication by a remote `TokenReview` webhook.
#[derive(Debug)]
pub struct WebhookTokenAuthenticator {
    endpoint: WebhookEndpoint,
    version: &'static str,
    timeout: Duration,
    implicit_audiences: Vec<String>,
}

impl WebhookTokenAuthenticator {
    /// A webhook authenticator from a kubeconfig-format file (see the module docs), sending
    /// [`DEFAULT_VERSION`] reviews with a [`DEFAULT_TIMEOUT`] per attempt.
    pub fn from_kubeconfig(path: &Path) -> Result<Self, String> {
        Ok(Self::new(WebhookEndpoint::from_kubeconfig(path)?))
    }

    /// A webhook authenticator for an endpoint built elsewhere.
    pub fn new(endpoint: WebhookEndpoint) -> Self {
        WebhookTokenAuthenticator {
            endpoint,
            version: DEFAULT_VERSION,
            timeout: DEFAULT_TIMEOUT,
            implicit_audiences: Vec::new(),
        }
    }

    /// The server's API audiences (kube's `--api-audiences`): a review answer that names no
    /// audiences is taken to be valid for these, as kube's webhook authenticator does.
    pub fn with_implicit_audiences(mut self, audiences: Vec<String>) -> Self {
        self.implicit_audiences = audiences;
        self
    }

    /// Sends `authentication.k8s.io/<version>` reviews: `v1beta1` (default) or `v1`, as
    /// kube's `--authentication-token-webhook-version`.
    pub fn with_version(mut self, version: &str) -> Result<Self, String> {
        self.version = match version {
            "v1" => "v1",
            "v1beta1" => "v1beta1",
            other => {
                return Err(format!(
                    "unsupported authentication webhook version {other:?}, supported versions are \"v1\", \"v1beta1\""
                ))
            }
        };
        Ok(self)
    }

    /// Time allowed for each attempt (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The URL reviews are sent to.
    pub fn server(&self) -> &str {
        self.endpoint.server()
    }

    /// How long the integrator should cache successful reviews (kube's default).
    pub fn success_cache_ttl(&self) -> Duration {
        DEFAULT_CACHE_TTL
    }

    /// How long the integrator should cache unsuccessful reviews (kube's default).
    pub fn failure_cache_ttl(&self) -> Duration {
        DEFAULT_FAILURE_CACHE_TTL
    }

    fn review_request(&self, token: &str, audiences: &[String]) -> Value {
        let mut spec = json!({ "token": token });
        if !audiences.is_empty() {
            spec["audiences"] = json!(audiences);
        }
        json!({
            "apiVersion": format!("authentication.k8s.io/{}", self.version),
            "kind": "TokenReview",
            "metadata": { "creationTimestamp": null },
            "spec": spec,
            "status": { "user": {} },
        })
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for WebhookTokenAuthenticator {
    fn name(&self) -> &'static str {
        "webhook"
    }

    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let request = self.review_request(token, audiences);
        match self.endpoint.post_json(&request, self.timeout).await {
            Ok(body) => interpret_review(&body, audiences, &self.implicit_audiences),
            Err(e) => {
                // An outage or bad configuration: logged for the operator, a 401 for the
                // client, never an allow.
                tracing::error!(server = %self.endpoint.server, error = %e, "failed to make webhook authenticator request");
                TokenOutcome::Invalid(e)
            }
        }
    }
}

/// The `status` of a `TokenReview` answer (v1 and v1beta1 have the same shape).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReviewStatus {
    authenticated: bool,
    user: ReviewUser,
    audiences: Option<Vec<String>>,
    error: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReviewUser {
    username: String,
    uid: String,
    groups: Option<Vec<String>>,
    extra: Option<std::collections::BTreeMap<String, Option<Vec<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReviewResponse {
    status: ReviewStatus,
}

/// Turns a webhook's answer into an outcome, as kube's `AuthenticateToken`: when the
/// request asked for audiences, the answer's audiences (or, if it names none, the implicit
/// API audiences) must intersect them, and the intersection is the result's audiences; then
/// `status.authenticated` decides.
fn interpret_review(
    body: &[u8],
    wanted_audiences: &[String],
    implicit_audiences: &[String],
) -> TokenOutcome {
    let review: ReviewResponse = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => {
            let message = format!("webhook: malformed TokenReview response: {e}");
            tracing::error!(error = %message, "webhook authenticator");
            return TokenOutcome::Invalid(message);
        }
    };
    let status = review.status;
    let mut audiences = Vec::new();
    if !wanted_audiences.is_empty() {
        let got = match &status.audiences {
            Some(got) if !got.is_empty() => got.as_slice(),
            _ => implicit_audiences,
        };
        audiences = wanted_audiences
            .iter()
            .filter(|a| got.contains(a))
            .cloned()
            .collect();
        if audiences.is_empty() {
            return TokenOutcome::Invalid(format!(
                "webhook: token audiences {got:?} do not match any of {wanted_audiences:?}"
            ));
        }
    }
    if !status.authenticated {
        let reason = if status.error.is_empty() {
            "webhook: token was not authenticated".to_string()
        } else {
            format!("webhook: {}", status.error)
        };
        return TokenOutcome::Invalid(reason);
    }
    let user = UserInfo {
        name: status.user.username,
        uid: status.user.uid,
        groups: status.user.groups.unwrap_or_default(),
        extra: status
            .user
            .extra
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.unwrap_or_default()))
            .collect(),
    };
    TokenOutcome::Authenticated(TokenReviewResult {
        user: Arc::new(user),
        audiences: audiences.into(),
        expires_at: None,
    })
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

fn resolve(base_dir: &Path, file: &str) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base_dir.join(path)
    }
}

fn read_file(base_dir: &Path, file: &str, field: &str) -> Result<Vec<u8>, String> {
    let path = resolve(base_dir, file);
    std::fs::read(&path).map_err(|e| format!("{field} {}: {e}", path.display()))
}

/// `*-data` fields are base64 in kubeconfig files (Go's `[]byte` in JSON/YAML).
fn decode_data(data: &str, field: &str) -> Result<Vec<u8>, String> {
    let compact: String = data.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| format!("{field}: invalid base64: {e}"))
}

/// Up to 200 characters of a body, for error messages.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// kube's backoff jitter: up to +20 %.
fn jittered(base: Duration) -> Duration {
    use rand::Rng;
    let factor = 1.0 + rand::thread_rng().gen_range(0.0..0.2);
    base.mul_f64(factor)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::authn::jwt::test_support::{ca, Recorded, TestServer};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn auds(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    // ---- answers ----------------------------------------------------------------------

    #[test]
    fn authenticated_review_becomes_a_user() {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "status": {
                "authenticated": true,
                "user": {
                    "username": "jane",
                    "uid": "42",
                    "groups": ["dev", "qa"],
                    "extra": {"example.com/scopes": ["a", "b"], "example.com/none": null}
                }
            }
        });
        let outcome = interpret_review(body.to_string().as_bytes(), &[], &[]);
        let TokenOutcome::Authenticated(result) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(result.user.name, "jane");
        assert_eq!(result.user.uid, "42");
        assert_eq!(result.user.groups, vec!["dev", "qa"]);
        assert_eq!(
            result.user.extra.get("example.com/scopes"),
            Some(&auds(&["a", "b"]))
        );
        assert_eq!(result.user.extra.get("example.com/none"), Some(&vec![]));
        assert!(result.audiences.is_empty());
        assert_eq!(result.expires_at, None);
    }

    #[test]
    fn unauthenticated_and_malformed_reviews_are_rejections() {
        let denied = json!({"status": {"authenticated": false, "error": "token expired"}});
        assert_eq!(
            interpret_review(denied.to_string().as_bytes(), &[], &[]),
            TokenOutcome::Invalid("webhook: token expired".to_string())
        );
        let denied = json!({"status": {"authenticated": false}});
        assert_eq!(
            interpret_review(denied.to_string().as_bytes(), &[], &[]),
            TokenOutcome::Invalid("webhook: token was not authenticated".to_string())
        );
        // No status at all is not an allow.
        assert!(matches!(
            interpret_review(b"{}", &[], &[]),
            TokenOutcome::Invalid(_)
        ));
        let TokenOutcome::Invalid(message) = interpret_review(b"<html>", &[], &[]) else {
            panic!("malformed body must be rejected")
        };
        assert!(
            message.contains("malformed TokenReview response"),
            "{message}"
        );
        let wrong_type = json!({"status": {"authenticated": "yes"}});
        assert!(matches!(
            interpret_review(wrong_type.to_string().as_bytes(), &[], &[]),
            TokenOutcome::Invalid(_)
        ));
    }

    #[test]
    fn audiences_follow_kube() {
        let answer = |status_auds: Option<&[&str]>| {
            let mut status = json!({"authenticated": true, "user": {"username": "u"}});
            if let Some(a) = status_auds {
                status["audiences"] = json!(a);
            }
            json!({ "status": status }).to_string()
        };
        let audiences_of = |outcome: TokenOutcome| match outcome {
            TokenOutcome::Authenticated(r) => Ok(r.audiences.to_vec()),
            TokenOutcome::Invalid(m) => Err(m),
            other => panic!("{other:?}"),
        };
        let wanted = auds(&["api", "extra"]);
        // The webhook names audiences: the intersection with the asked-for ones.
        let got = interpret_review(
            answer(Some(&["extra", "x"])).as_bytes(),
            &wanted,
            &auds(&["api"]),
        );
        assert_eq!(audiences_of(got), Ok(auds(&["extra"])));
        // It names none: the implicit API audiences stand in.
        let got = interpret_review(answer(None).as_bytes(), &wanted, &auds(&["api"]));
        assert_eq!(audiences_of(got), Ok(auds(&["api"])));
        // No overlap: rejected even though authenticated.
        let got = interpret_review(
            answer(Some(&["other"])).as_bytes(),
            &wanted,
            &auds(&["api"]),
        );
        assert!(audiences_of(got).unwrap_err().contains("do not match"));
        let got = interpret_review(answer(None).as_bytes(), &wanted, &[]);
        assert!(audiences_of(got).is_err());
        // Nothing asked for: no audience check, no audiences reported.
        let got = interpret_review(answer(Some(&["other"])).as_bytes(), &[], &[]);
        assert_eq!(audiences_of(got), Ok(vec![]));
    }

    // ---- kubeconfig -------------------------------------------------------------------

    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\npreferences: {{}}\nclusters:\n- name: hook\n  cluster:\n{cluster}users:\n- name: gate\n  user:\n{user}contexts:\n- name: webhook\n  context: {{cluster: hook, user: gate}}\ncurrent-context: webhook\n"
        )
    }

    fn load(text: &str, dir: &Path) -> Result<WebhookEndpoint, String> {
        WebhookEndpoint::from_kubeconfig_str(text, dir)
    }

    #[test]
    fn kubeconfig_errors_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let server = "    server: https://127.0.0.1:1/review\n";
        let err =
            |cluster: &str, user: &str| load(&kubeconfig(cluster, user), dir.path()).unwrap_err();
        let e = err("    certificate-authority: /nope\n", "    token: t\n");
        assert!(e.contains("no server found"), "{e}");
        let e = err(
            &format!(
                "{server}    certificate-authority: ca.crt\n    certificate-authority-data: AAAA\n"
            ),
            "    token: t\n",
        );
        assert!(
            e.contains("certificate-authority-data and certificate-authority are both specified"),
            "{e}"
        );
        let e = err(
            &format!("{server}    certificate-authority-data: AAAA\n    insecure-skip-tls-verify: true\n"),
            "    token: t\n",
        );
        assert!(e.contains("insecure flag is not allowed"), "{e}");
        let e = err(server, "    client-certificate: c.crt\n");
        assert!(e.contains("client-cert"), "{e}");
        let e = err(server, "    exec:\n      command: get-token\n");
        assert!(e.contains("not supported by kubegate"), "{e}");
        let e = err(server, "    token: t\n    username: u\n    password: p\n");
        assert!(e.contains("more than one authentication method"), "{e}");
        let e = err(
            &format!("{server}    certificate-authority: missing.crt\n"),
            "    token: t\n",
        );
        assert!(e.contains("missing.crt"), "{e}");
        let e = err(
            &format!("{server}    certificate-authority-data: bm90IGEgY2VydA==\n"),
            "    token: t\n",
        );
        assert!(e.contains("does not contain any valid"), "{e}");
        let e = err("    server: ftp://x\n", "    token: t\n");
        assert!(e.contains("unsupported scheme"), "{e}");
        let e = load(
            &kubeconfig(server, "    token: t\n")
                .replace("current-context: webhook", "current-context: other"),
            dir.path(),
        )
        .unwrap_err();
        assert!(
            e.contains("context was not found for specified context: other"),
            "{e}"
        );
        let e = load(
            &kubeconfig(server, "    token: t\n").replace("current-context: webhook\n", ""),
            dir.path(),
        )
        .unwrap_err();
        assert!(e.contains("current-context is not set"), "{e}");
        let e =
            WebhookEndpoint::from_kubeconfig(&dir.path().join("absent.kubeconfig")).unwrap_err();
        assert!(e.contains("absent.kubeconfig"), "{e}");
    }

    #[test]
    fn kubeconfig_loads_relative_files_and_data() {
        let dir = tempfile::tempdir().unwrap();
        let test_ca = ca("webhook CA");
        let (cert, key) = test_ca.leaf("kubegate", &["kubegate"]);
        std::fs::create_dir(dir.path().join("pki")).unwrap();
        std::fs::write(dir.path().join("pki/ca.crt"), &test_ca.pem).unwrap();
        std::fs::write(dir.path().join("pki/client.crt"), &cert).unwrap();
        std::fs::write(dir.path().join("pki/client.key"), &key).unwrap();
        std::fs::write(dir.path().join("token"), "file-token\n").unwrap();
        let text = kubeconfig(
            "    server: https://127.0.0.1:1/review\n    certificate-authority: pki/ca.crt\n",
            "    client-certificate: pki/client.crt\n    client-key: pki/client.key\n    tokenFile: token\n    token: ignored\n",
        );
        let endpoint = load(&text, dir.path()).unwrap();
        assert_eq!(endpoint.server(), "https://127.0.0.1:1/review");
        assert_eq!(
            endpoint.credentials.authorization().unwrap().as_deref(),
            Some("Bearer file-token"),
            "tokenFile wins over token, as in client-go"
        );
        assert!(
            !format!("{endpoint:?}").contains("file-token"),
            "Debug never shows tokens"
        );
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let text = kubeconfig(
            &format!("    server: https://127.0.0.1:1/review\n    certificate-authority-data: {}\n", b64(&test_ca.pem)),
            &format!("    client-certificate-data: {}\n    client-key-data: {}\n    username: u\n    password: p\n", b64(&cert), b64(&key)),
        );
        let endpoint = load(&text, dir.path()).unwrap();
        assert_eq!(
            endpoint.credentials.authorization().unwrap().as_deref(),
            Some("Basic dTpw")
        );
        // A context without a user means no credentials.
        let text = kubeconfig("    server: http://127.0.0.1:1/\n", "    {}\n")
            .replace("user: gate}", "user: \"\"}");
        let endpoint = load(&text, dir.path()).unwrap();
        assert_eq!(endpoint.credentials.authorization().unwrap(), None);
    }

    // ---- against a server ---------------------------------------------------------------

    /// A TokenReview server knowing one token; it requires a client certificate from
    /// `client_ca` and the bearer token `hook-secret`.
    fn review_server(client_ca: &crate::authn::jwt::test_support::TestCa) -> TestServer {
        TestServer::start(
            Arc::new(|r: &Recorded| {
                if r.header("authorization") != Some("Bearer hook-secret") {
                    return (401, "{\"kind\":\"Status\"}".to_string());
                }
                let review: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                let status = if review["spec"]["token"] == "good-token" {
                    json!({"authenticated": true, "user": {"username": "jane", "groups": ["dev"]}, "audiences": review["spec"]["audiences"]})
                } else {
                    json!({"authenticated": false, "error": "unknown token"})
                };
                (200, json!({"apiVersion": review["apiVersion"], "kind": "TokenReview", "status": status}).to_string())
            }),
            Some(client_ca),
        )
    }

    fn write_kubeconfig(
        dir: &Path,
        server: &TestServer,
        client: &crate::authn::jwt::test_support::TestCa,
    ) -> PathBuf {
        let (cert, key) = client.leaf("kubegate-apiserver", &["kubegate"]);
        std::fs::write(dir.join("ca.crt"), &server.ca_pem).unwrap();
        std::fs::write(dir.join("client.crt"), cert).unwrap();
        std::fs::write(dir.join("client.key"), key).unwrap();
        let path = dir.join("webhook.kubeconfig");
        std::fs::write(
            &path,
            kubeconfig(
                &format!("    server: {}/authenticate?timeout=5s\n    certificate-authority: ca.crt\n", server.url),
                "    client-certificate: client.crt\n    client-key: client.key\n    token: hook-secret\n",
            ),
        )
        .unwrap();
        path
    }

    #[tokio::test]
    async fn reviews_tokens_over_mutual_tls() {
        let dir = tempfile::tempdir().unwrap();
        let client_ca = ca("webhook client CA");
        let server = review_server(&client_ca);
        let path = write_kubeconfig(dir.path(), &server, &client_ca);
        let webhook = WebhookTokenAuthenticator::from_kubeconfig(&path)
            .unwrap()
            .with_implicit_audiences(auds(&["api"]));
        assert_eq!(webhook.success_cache_ttl(), Duration::from_secs(120));
        assert_eq!(webhook.failure_cache_ttl(), Duration::from_secs(120));

        let TokenOutcome::Authenticated(result) = webhook
            .authenticate_token("good-token", &auds(&["api"]))
            .await
        else {
            panic!("good token must authenticate")
        };
        assert_eq!(result.user.name, "jane");
        assert_eq!(result.user.groups, vec!["dev"]);
        assert_eq!(result.audiences, auds(&["api"]).into());

        let requests = server.requests.lock().unwrap().clone();
        let request = &requests[0];
        assert_eq!(request.method, "POST");
        assert_eq!(
            request.path, "/authenticate?timeout=5s",
            "the exact server URL is used"
        );
        assert!(request.client_cert);
        assert_eq!(request.header("content-type"), Some("application/json"));
        let sent: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            sent["apiVersion"], "authentication.k8s.io/v1beta1",
            "kube's default"
        );
        assert_eq!(sent["kind"], "TokenReview");
        assert_eq!(
            sent["spec"],
            json!({"token": "good-token", "audiences": ["api"]})
        );

        assert_eq!(
            webhook.authenticate_token("bad-token", &[]).await,
            TokenOutcome::Invalid("webhook: unknown token".to_string())
        );
        let v1 = WebhookTokenAuthenticator::from_kubeconfig(&path)
            .unwrap()
            .with_version("v1")
            .unwrap();
        assert!(matches!(
            v1.authenticate_token("good-token", &[]).await,
            TokenOutcome::Authenticated(_)
        ));
        let last = server.requests.lock().unwrap().last().cloned().unwrap();
        let sent: Value = serde_json::from_slice(&last.body).unwrap();
        assert_eq!(sent["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(sent["spec"], json!({"token": "good-token"}));
        assert!(WebhookTokenAuthenticator::from_kubeconfig(&path)
            .unwrap()
            .with_version("v2")
            .is_err());
    }

    #[tokio::test]
    async fn failures_are_never_allows() {
        let dir = tempfile::tempdir().unwrap();
        let client_ca = ca("webhook client CA");
        let server = review_server(&client_ca);
        let path = write_kubeconfig(dir.path(), &server, &client_ca);

        // Without the client certificate the TLS handshake fails.
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "    client-certificate: client.crt\n    client-key: client.key\n",
            "",
        );
        let no_cert = WebhookTokenAuthenticator::new(load(&text, dir.path()).unwrap());
        let TokenOutcome::Invalid(message) = no_cert.authenticate_token("good-token", &[]).await
        else {
            panic!("no client certificate must fail")
        };
        assert!(
            !message.contains("good-token"),
            "errors never carry the token: {message}"
        );

        // A wrong bearer credential: 401 from the webhook, not retried.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("hook-secret", "wrong");
        let before = server.requests.lock().unwrap().len();
        let wrong = WebhookTokenAuthenticator::new(load(&text, dir.path()).unwrap());
        let TokenOutcome::Invalid(message) = wrong.authenticate_token("good-token", &[]).await
        else {
            panic!("401 must fail")
        };
        assert!(message.contains("401"), "{message}");
        assert_eq!(server.requests.lock().unwrap().len(), before + 1);

        // A server certificate the kubeconfig's CA did not sign.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(
                "certificate-authority: ca.crt",
                "certificate-authority-data: ",
            )
            .replace(
                "certificate-authority-data: ",
                &format!(
                    "certificate-authority-data: {}",
                    base64::engine::general_purpose::STANDARD.encode(ca("other").pem)
                ),
            );
        let untrusted = WebhookTokenAuthenticator::new(load(&text, dir.path()).unwrap());
        assert!(matches!(
            untrusted.authenticate_token("good-token", &[]).await,
            TokenOutcome::Invalid(_)
        ));

        // insecure-skip-tls-verify, explicitly set, accepts it.
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "certificate-authority: ca.crt",
            "insecure-skip-tls-verify: true",
        );
        let insecure = WebhookTokenAuthenticator::new(load(&text, dir.path()).unwrap());
        assert!(matches!(
            insecure.authenticate_token("good-token", &[]).await,
            TokenOutcome::Authenticated(_)
        ));

        // Nothing listening.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(&server.url, &format!("https://127.0.0.1:{port}"));
        let down = WebhookTokenAuthenticator::new(load(&text, dir.path()).unwrap());
        assert!(matches!(
            down.authenticate_token("good-token", &[]).await,
            TokenOutcome::Invalid(_)
        ));
    }

    #[tokio::test]
    async fn server_errors_are_retried() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let server = TestServer::start(
            Arc::new(move |_r: &Recorded| {
                if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                    (500, "{}".to_string())
                } else {
                    (
                        200,
                        json!({"status": {"authenticated": true, "user": {"username": "u"}}})
                            .to_string(),
                    )
                }
            }),
            None,
        );
        let dir = tempfile::tempdir().unwrap();
        let text = kubeconfig(
            &format!(
                "    server: {}/\n    certificate-authority-data: {}\n",
                server.url,
                base64::engine::general_purpose::STANDARD.encode(&server.ca_pem)
            ),
            "    {}\n",
        );
        let webhook = WebhookTokenAuthenticator::new(load(&text, dir.path()).unwrap())
            .with_timeout(Duration::from_secs(5));
        assert!(matches!(
            webhook.authenticate_token("t", &[]).await,
            TokenOutcome::Authenticated(_)
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(
            server.requests.lock().unwrap()[0].header("authorization"),
            None
        );
    }
}

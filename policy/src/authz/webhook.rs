//! The Webhook authorization mode, as kube's `plugin/pkg/authorizer/webhook`
//! (`--authorization-mode=Webhook --authorization-webhook-config-file=<kubeconfig>`): each
//! request is described as an `authorization.k8s.io` `SubjectAccessReview` and POSTed to a
//! remote service, whose `status` decides.
//!
//! - The service is named by a kubeconfig-format file, read by the same
//!   [`WebhookEndpoint`] as the token webhook (CA, client certificate, bearer token; the
//!   `server` URL is used as it is).
//! - `v1` reviews carry the user's groups as `spec.groups`, `v1beta1` reviews as
//!   `spec.group`; resource requests send `resourceAttributes` (namespace, verb, group,
//!   version, resource, subresource, name), other paths `nonResourceAttributes` (path, verb).
//! - `status.denied` is a deny, `status.allowed` an allow, anything else no opinion; the
//!   `reason` goes with the decision (and into the 403 message). An answer both allowing and
//!   denying is a deny, as in kube.
//! - Answers are cached by the serialized review spec: allowed ones for
//!   `cacheAuthorizedTTL` (default 5m), the others for `cacheUnauthorizedTTL` (default 30s);
//!   a zero TTL turns that cache off. Requests whose attributes are very large are not cached
//!   (kube's guard against cache flooding).
//! - A webhook that cannot be asked (connection refused, TLS failure, non-2xx answer,
//!   malformed body, no answer in time) gives *no opinion* with an error
//!   ([`Decision::Failed`]): never an allow, never cached, and, unless a later mode allows,
//!   a 500 naming the error, as kube answers. The endpoint retries like kube's webhooks, but
//!   the whole call is bounded by [`DEFAULT_TIMEOUT`] so an outage costs each request
//!   seconds, not minutes. An answer both allowing and denying is kube's deny with an
//!   error: it ends the chain as a deny does, and the filter turns it into a 500.
//!
//! - A list, watch or deletecollection's field and label selectors go as `fieldSelector` /
//!   `labelSelector` requirements (kube's `AuthorizeWithSelectors`, on since 1.32), turned
//!   into requirements by the [`SelectorAttributes`] the server gives
//!   ([`WebhookAuthorizer::with_selectors`]; the parsers live with the storage's).

use std::path::Path;
use std::time::Duration;

use moka::future::Cache;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{Attributes, Authorizer, Decision, RulesInfo};
use crate::authn::webhook::WebhookEndpoint;
use crate::user::UserInfo;

/// kube's `--authorization-webhook-cache-authorized-ttl` default.
pub const DEFAULT_AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// kube's `--authorization-webhook-cache-unauthorized-ttl` default.
pub const DEFAULT_UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);
/// Time allowed for one authorization, retries included. kube allows 30 s per attempt and
/// retries up to five times; an authorizer sits on every request, so a dead webhook must
/// fail fast.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The `SubjectAccessReview` version sent unless configured otherwise (kube's
/// `--authorization-webhook-version` default).
pub const DEFAULT_VERSION: &str = "v1beta1";
/// Entries per cache (kube's `NewLRUExpireCache(8192)`).
const CACHE_CAPACITY: u64 = 8192;
/// kube's `maxControlledAttrCacheSize`: requests whose requester-controlled attributes add up
/// to this many bytes are not cached.
const MAX_CONTROLLED_ATTR_CACHE_SIZE: usize = 10_000;

/// The part of a review's `status` the decision is made from (v1 and v1beta1 agree).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ReviewStatus {
    allowed: bool,
    denied: bool,
    reason: String,
    evaluation_error: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReviewResponse {
    status: ReviewStatus,
}

/// The `fieldSelector` and `labelSelector` of a review's `resourceAttributes` for a request's
/// raw field and label selectors (`{"requirements": [...]}`, or `None` when there is none to
/// send), as kube's `resourceAttributesFrom` builds them.
pub type SelectorAttributes = fn(field: &str, label: &str) -> (Option<Value>, Option<Value>);

/// Authorization by a remote `SubjectAccessReview` webhook.
pub struct WebhookAuthorizer {
    endpoint: WebhookEndpoint,
    selectors: Option<SelectorAttributes>,
    version: &'static str,
    timeout: Duration,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    /// Allowed answers; `None` when their TTL is zero.
    authorized: Option<Cache<String, ReviewStatus>>,
    /// Denied and no-opinion answers; `None` when their TTL is zero.
    unauthorized: Option<Cache<String, ReviewStatus>>,
}

impl std::fmt::Debug for WebhookAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookAuthorizer")
            .field("endpoint", &self.endpoint)
            .field("version", &self.version)
            .field("timeout", &self.timeout)
            .field("authorized_ttl", &self.authorized_ttl)
            .field("unauthorized_ttl", &self.unauthorized_ttl)
            .finish()
    }
}

fn cache(ttl: Duration) -> Option<Cache<String, ReviewStatus>> {
    (!ttl.is_zero()).then(|| {
        Cache::builder()
            .max_capacity(CACHE_CAPACITY)
            .time_to_live(ttl)
            .build()
    })
}

impl WebhookAuthorizer {
    /// A webhook authorizer from a kubeconfig-format file, with kube's defaults: `v1beta1`
    /// reviews, 5m / 30s cache TTLs, and [`DEFAULT_TIMEOUT`].
    pub fn from_kubeconfig(path: &Path) -> Result<Self, String> {
        Ok(Self::new(WebhookEndpoint::from_kubeconfig(path)?))
    }

    /// A webhook authorizer for an endpoint built elsewhere.
    pub fn new(endpoint: WebhookEndpoint) -> Self {
        WebhookAuthorizer {
            endpoint,
            selectors: None,
            version: DEFAULT_VERSION,
            timeout: DEFAULT_TIMEOUT,
            authorized_ttl: DEFAULT_AUTHORIZED_TTL,
            unauthorized_ttl: DEFAULT_UNAUTHORIZED_TTL,
            authorized: cache(DEFAULT_AUTHORIZED_TTL),
            unauthorized: cache(DEFAULT_UNAUTHORIZED_TTL),
        }
    }

    /// Sends `authorization.k8s.io/<version>` reviews: `v1beta1` (default) or `v1`.
    pub fn with_version(mut self, version: &str) -> Result<Self, String> {
        self.version = match version {
            "v1" => "v1",
            "v1beta1" => "v1beta1",
            other => {
                return Err(format!(
                    "unsupported webhook authorizer version {other:?}, supported versions are \"v1\", \"v1beta1\""
                ))
            }
        };
        Ok(self)
    }

    /// Sends requests' selectors as requirements, built by `selectors`.
    pub fn with_selectors(mut self, selectors: SelectorAttributes) -> Self {
        self.selectors = Some(selectors);
        self
    }

    /// How long allowed and not-allowed answers are cached; zero turns that cache off.
    pub fn with_cache_ttls(mut self, authorized: Duration, unauthorized: Duration) -> Self {
        self.authorized_ttl = authorized;
        self.unauthorized_ttl = unauthorized;
        self.authorized = cache(authorized);
        self.unauthorized = cache(unauthorized);
        self
    }

    /// Time allowed for one authorization, retries included (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The URL reviews are sent to.
    pub fn server(&self) -> &str {
        self.endpoint.server()
    }

    /// The review version sent.
    pub fn version(&self) -> &str {
        self.version
    }

    /// The (authorized, unauthorized) cache TTLs.
    pub fn cache_ttls(&self) -> (Duration, Duration) {
        (self.authorized_ttl, self.unauthorized_ttl)
    }

    /// The review `spec` for these attributes, in the wire version's shape, with kube's
    /// field order and `omitempty` rules (its serialization is also the cache key).
    fn review_spec(&self, attributes: &Attributes<'_>) -> Value {
        let request = attributes.request;
        let mut spec = Map::new();
        // Go's `omitempty`: empty strings are left out.
        fn put(map: &mut Map<String, Value>, key: &str, value: &str) {
            if !value.is_empty() {
                map.insert(key.to_string(), Value::String(value.to_string()));
            }
        }
        if request.is_resource_request {
            let mut resource = Map::new();
            put(&mut resource, "namespace", &request.namespace);
            put(&mut resource, "verb", &request.verb);
            put(&mut resource, "group", &request.api_group);
            put(&mut resource, "version", &request.api_version);
            put(&mut resource, "resource", &request.resource);
            put(&mut resource, "subresource", &request.subresource);
            put(&mut resource, "name", &request.name);
            if let Some(selectors) = self.selectors {
                let (field, label) = selectors(&request.field_selector, &request.label_selector);
                if let Some(field) = field {
                    resource.insert("fieldSelector".into(), field);
                }
                if let Some(label) = label {
                    resource.insert("labelSelector".into(), label);
                }
            }
            spec.insert("resourceAttributes".into(), Value::Object(resource));
        } else {
            let mut non_resource = Map::new();
            put(&mut non_resource, "path", &request.path);
            put(&mut non_resource, "verb", &request.verb);
            spec.insert("nonResourceAttributes".into(), Value::Object(non_resource));
        }
        let user: &UserInfo = attributes.user;
        put(&mut spec, "user", &user.name);
        if !user.groups.is_empty() {
            // The one difference between the versions' specs.
            let key = if self.version == "v1beta1" {
                "group"
            } else {
                "groups"
            };
            spec.insert(key.into(), json!(user.groups));
        }
        if !user.extra.is_empty() {
            spec.insert("extra".into(), json!(user.extra));
        }
        put(&mut spec, "uid", &user.uid);
        Value::Object(spec)
    }

    /// Asks the webhook; an error is safe to log (it never carries the review).
    async fn ask(&self, spec: &Value) -> Result<ReviewStatus, String> {
        let review = json!({
            "kind": "SubjectAccessReview",
            "apiVersion": format!("authorization.k8s.io/{}", self.version),
            "metadata": { "creationTimestamp": null },
            "spec": spec,
            "status": { "allowed": false },
        });
        let body = match tokio::time::timeout(
            self.timeout,
            self.endpoint.post_json(&review, self.timeout),
        )
        .await
        {
            Ok(result) => result?,
            Err(_) => {
                return Err(format!(
                    "webhook: {}: no answer within {:?}",
                    self.endpoint.server(),
                    self.timeout
                ))
            }
        };
        let response: ReviewResponse = serde_json::from_slice(&body).map_err(|e| {
            format!(
                "webhook: {}: malformed SubjectAccessReview response: {e}",
                self.endpoint.server()
            )
        })?;
        Ok(response.status)
    }

    async fn cached(&self, key: &str) -> Option<ReviewStatus> {
        if let Some(cache) = &self.authorized {
            if let Some(status) = cache.get(key).await {
                return Some(status);
            }
        }
        match &self.unauthorized {
            Some(cache) => cache.get(key).await,
            None => None,
        }
    }

    async fn remember(&self, key: String, status: &ReviewStatus) {
        let (keep, drop) = if status.allowed {
            (&self.authorized, &self.unauthorized)
        } else {
            (&self.unauthorized, &self.authorized)
        };
        // Only one answer per spec may be live.
        if let Some(cache) = drop {
            cache.invalidate(&key).await;
        }
        if let Some(cache) = keep {
            cache.insert(key, status.clone()).await;
        }
    }
}

/// kube's `shouldCache`: large requester-controlled attributes may be an attempt to flood
/// the cache.
fn should_cache(attributes: &Attributes<'_>) -> bool {
    let r = attributes.request;
    let size = r.namespace.len()
        + r.verb.len()
        + r.api_group.len()
        + r.api_version.len()
        + r.resource.len()
        + r.subresource.len()
        + r.name.len()
        + r.path.len();
    size < MAX_CONTROLLED_ATTR_CACHE_SIZE
}

#[async_trait::async_trait]
impl Authorizer for WebhookAuthorizer {
    fn name(&self) -> &'static str {
        "Webhook"
    }

    async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
        let spec = self.review_spec(attributes);
        let key = spec.to_string();
        let status = match self.cached(&key).await {
            Some(status) => status,
            None => match self.ask(&spec).await {
                Ok(status) => {
                    if !status.evaluation_error.is_empty() {
                        tracing::warn!(server = %self.endpoint.server(), evaluation_error = %status.evaluation_error, "webhook authorizer reported an evaluation error");
                    }
                    if should_cache(attributes) {
                        self.remember(key, &status).await;
                    }
                    status
                }
                Err(e) => {
                    // An outage or misconfiguration: the operator sees it in the log, the
                    // client a 500 unless a later mode allows (the error never carries the
                    // review, so it holds nothing the client did not send).
                    tracing::error!(server = %self.endpoint.server(), error = %e, "Failed to make webhook authorizer request");
                    return Decision::Failed {
                        reason: String::new(),
                        error: e,
                        denied: false,
                    };
                }
            },
        };
        match (status.allowed, status.denied) {
            (true, true) => {
                tracing::error!(server = %self.endpoint.server(), "webhook subject access review returned both allow and deny response");
                Decision::Failed {
                    reason: status.reason,
                    error: "webhook subject access review returned both allow and deny response"
                        .into(),
                    denied: true,
                }
            }
            (_, true) => Decision::Deny(status.reason),
            (true, false) => Decision::Allow(status.reason),
            (false, false) => Decision::NoOpinion(status.reason),
        }
    }

    /// A webhook cannot list rules (kube's `WebhookAuthorizer.RulesFor`).
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo {
            incomplete: true,
            errors: vec!["webhook authorizer does not support user rule resolution".to_string()],
            ..RulesInfo::default()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::authn::jwt::test_support::{ca, Recorded, TestServer};
    use crate::request_info::RequestInfo;
    use base64::Engine;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    fn kubeconfig(server: &TestServer, path: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: {}{path}\n    certificate-authority-data: {}\nusers:\n- name: gate\n  user:\n    token: hook-secret\ncontexts:\n- name: webhook\n  context: {{cluster: hook, user: gate}}\ncurrent-context: webhook\n",
            server.url,
            base64::engine::general_purpose::STANDARD.encode(&server.ca_pem)
        )
    }

    /// A decision the webhook could not make: no reason, an error for the 500.
    fn failed(decision: &Decision) -> bool {
        matches!(decision, Decision::Failed { reason, error, denied: false } if reason.is_empty() && !error.is_empty())
    }

    fn authorizer(server: &TestServer) -> WebhookAuthorizer {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("authz.kubeconfig");
        std::fs::write(&path, kubeconfig(server, "/authorize?x=1")).unwrap();
        let webhook = WebhookAuthorizer::from_kubeconfig(&path).unwrap();
        assert_eq!(webhook.version(), "v1beta1", "kube's default");
        webhook.with_version("v1").unwrap()
    }

    /// A SAR server whose answer for each user comes from `answers` (a status object);
    /// unknown users get `{"allowed": false}`.
    fn sar_server(answers: Value) -> TestServer {
        TestServer::start(
            Arc::new(move |r: &Recorded| {
                if r.header("authorization") != Some("Bearer hook-secret") {
                    return (401, "{}".to_string());
                }
                let review: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                let user = review["spec"]["user"].as_str().unwrap_or_default();
                let status = answers
                    .get(user)
                    .cloned()
                    .unwrap_or(json!({"allowed": false}));
                (
                    200,
                    json!({"apiVersion": review["apiVersion"], "kind": "SubjectAccessReview", "status": status}).to_string(),
                )
            }),
            None,
        )
    }

    fn list_configmaps() -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: "list".into(),
            api_prefix: "api".into(),
            api_version: "v1".into(),
            namespace: "team-a".into(),
            resource: "configmaps".into(),
            path: "/api/v1/namespaces/team-a/configmaps".into(),
            ..RequestInfo::default()
        }
    }

    fn alice() -> UserInfo {
        let mut user = UserInfo::new("alice", vec!["dev".into(), "system:authenticated".into()]);
        user.uid = "alice-uid".into();
        user.extra
            .insert("scopes".into(), vec!["a".into(), "b".into()]);
        user
    }

    async fn decide(
        authorizer: &WebhookAuthorizer,
        user: &UserInfo,
        request: &RequestInfo,
    ) -> Decision {
        authorizer.authorize(&Attributes { user, request }).await
    }

    fn sent(server: &TestServer, index: usize) -> Value {
        serde_json::from_slice(&server.requests.lock().unwrap()[index].body).unwrap()
    }

    #[tokio::test]
    async fn sends_kube_shaped_reviews_and_reads_the_status() {
        let server = sar_server(json!({
            "alice": {"allowed": true, "reason": "alice may"},
            "bob": {"allowed": false, "denied": true, "reason": "bob is blocked"},
            "carol": {"allowed": false, "reason": "not mine", "evaluationError": "rule store down"},
            "both": {"allowed": true, "denied": true, "reason": "confused"},
        }));
        let webhook = authorizer(&server);
        assert_eq!(webhook.version(), "v1");
        assert_eq!(
            webhook.cache_ttls(),
            (Duration::from_secs(300), Duration::from_secs(30))
        );
        assert_eq!(
            decide(&webhook, &alice(), &list_configmaps()).await,
            Decision::Allow("alice may".into())
        );
        let request = server.requests.lock().unwrap()[0].clone();
        assert_eq!(request.method, "POST");
        assert_eq!(
            request.path, "/authorize?x=1",
            "the server URL is used as is"
        );
        assert_eq!(request.header("authorization"), Some("Bearer hook-secret"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(
            sent(&server, 0),
            json!({
                "kind": "SubjectAccessReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {
                    "resourceAttributes": {"namespace": "team-a", "verb": "list", "version": "v1", "resource": "configmaps"},
                    "user": "alice",
                    "groups": ["dev", "system:authenticated"],
                    "extra": {"scopes": ["a", "b"]},
                    "uid": "alice-uid",
                },
                "status": {"allowed": false},
            })
        );

        let bob = UserInfo::new("bob", vec![]);
        assert_eq!(
            decide(&webhook, &bob, &list_configmaps()).await,
            Decision::Deny("bob is blocked".into())
        );
        let spec = &sent(&server, 1)["spec"];
        assert!(
            spec.get("groups").is_none() && spec.get("uid").is_none(),
            "{spec}"
        );

        let carol = UserInfo::new("carol", vec![]);
        assert_eq!(
            decide(&webhook, &carol, &list_configmaps()).await,
            Decision::NoOpinion("not mine".into())
        );
        assert_eq!(
            decide(&webhook, &UserInfo::new("both", vec![]), &list_configmaps()).await,
            Decision::Failed {
                reason: "confused".into(),
                error: "webhook subject access review returned both allow and deny response".into(),
                denied: true
            },
            "allowed and denied together is a deny with an error"
        );

        // A non-resource request; a named subresource object.
        let version = RequestInfo {
            verb: "get".into(),
            path: "/version".into(),
            ..RequestInfo::default()
        };
        decide(&webhook, &alice(), &version).await;
        assert_eq!(
            sent(&server, 4)["spec"]["nonResourceAttributes"],
            json!({"path": "/version", "verb": "get"})
        );
        assert!(sent(&server, 4)["spec"].get("resourceAttributes").is_none());
        let scale = RequestInfo {
            is_resource_request: true,
            verb: "update".into(),
            api_prefix: "apis".into(),
            api_group: "apps".into(),
            api_version: "v1".into(),
            namespace: "n".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            name: "web".into(),
            ..RequestInfo::default()
        };
        decide(&webhook, &alice(), &scale).await;
        assert_eq!(
            sent(&server, 5)["spec"]["resourceAttributes"],
            json!({"namespace": "n", "verb": "update", "group": "apps", "version": "v1", "resource": "deployments", "subresource": "scale", "name": "web"})
        );

        // v1beta1: `group`, not `groups`.
        let v1beta1 = authorizer(&server).with_version("v1beta1").unwrap();
        assert_eq!(
            decide(&v1beta1, &alice(), &list_configmaps()).await,
            Decision::Allow("alice may".into())
        );
        let review = sent(&server, 6);
        assert_eq!(review["apiVersion"], "authorization.k8s.io/v1beta1");
        assert_eq!(
            review["spec"]["group"],
            json!(["dev", "system:authenticated"])
        );
        assert!(review["spec"].get("groups").is_none());
        let err = authorizer(&server).with_version("v2").unwrap_err();
        assert!(
            err.contains("unsupported webhook authorizer version \"v2\""),
            "{err}"
        );

        let rules = webhook.rules_for(&alice(), "team-a");
        assert!(rules.incomplete);
        assert_eq!(rules.errors.len(), 1);
        assert_eq!(webhook.name(), "Webhook");
        assert!(!format!("{webhook:?}").contains("hook-secret"));
    }

    #[tokio::test]
    async fn answers_are_cached_by_spec_with_their_own_ttls() {
        let server = sar_server(json!({
            "alice": {"allowed": true},
            "bob": {"allowed": false, "denied": true, "reason": "no"},
        }));
        let webhook = authorizer(&server)
            .with_cache_ttls(Duration::from_secs(60), Duration::from_millis(300));
        let bob = UserInfo::new("bob", vec![]);
        for _ in 0..3 {
            assert!(decide(&webhook, &alice(), &list_configmaps())
                .await
                .is_allowed());
            assert_eq!(
                decide(&webhook, &bob, &list_configmaps()).await,
                Decision::Deny("no".into())
            );
        }
        assert_eq!(
            server.requests.lock().unwrap().len(),
            2,
            "both answers cached"
        );
        // Another verb is another spec.
        let mut get = list_configmaps();
        get.verb = "get".into();
        decide(&webhook, &alice(), &get).await;
        assert_eq!(server.requests.lock().unwrap().len(), 3);
        // The unauthorized TTL is short: bob is asked again once it passed, alice is not.
        tokio::time::sleep(Duration::from_millis(500)).await;
        decide(&webhook, &alice(), &list_configmaps()).await;
        decide(&webhook, &bob, &list_configmaps()).await;
        let requests = server.requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 4);
        let last: Value = serde_json::from_slice(&requests[3].body).unwrap();
        assert_eq!(last["spec"]["user"], "bob");

        // Zero TTLs: every request is asked.
        let uncached = authorizer(&server).with_cache_ttls(Duration::ZERO, Duration::ZERO);
        decide(&uncached, &alice(), &list_configmaps()).await;
        decide(&uncached, &alice(), &list_configmaps()).await;
        assert_eq!(server.requests.lock().unwrap().len(), 6);

        // Huge attributes are not cached.
        let mut huge = list_configmaps();
        huge.name = "x".repeat(MAX_CONTROLLED_ATTR_CACHE_SIZE);
        decide(&webhook, &alice(), &huge).await;
        decide(&webhook, &alice(), &huge).await;
        assert_eq!(server.requests.lock().unwrap().len(), 8);
    }

    #[tokio::test]
    async fn failures_are_no_opinion_and_never_cached() {
        let mode = Arc::new(Mutex::new("ok"));
        let calls = Arc::new(AtomicUsize::new(0));
        let server = {
            let (mode, calls) = (mode.clone(), calls.clone());
            TestServer::start(
                Arc::new(move |_r: &Recorded| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    match *mode.lock().unwrap() {
                        "ok" => (200, json!({"status": {"allowed": true}}).to_string()),
                        "garbage" => (200, "<html>".to_string()),
                        "wrong type" => (200, json!({"status": {"allowed": "yes"}}).to_string()),
                        "forbidden" => (403, "{}".to_string()),
                        "slow" => {
                            std::thread::sleep(Duration::from_secs(2));
                            (200, json!({"status": {"allowed": true}}).to_string())
                        }
                        _ => (500, "{}".to_string()),
                    }
                }),
                None,
            )
        };
        let webhook = authorizer(&server).with_timeout(Duration::from_millis(700));
        let user = |name: &str| UserInfo::new(name, vec![]);
        for (i, case) in ["garbage", "wrong type", "forbidden", "slow", "error"]
            .into_iter()
            .enumerate()
        {
            *mode.lock().unwrap() = case;
            let started = std::time::Instant::now();
            let decision = decide(&webhook, &user("u"), &list_configmaps()).await;
            assert!(failed(&decision), "{case}: {decision:?}");
            assert!(
                started.elapsed() < Duration::from_millis(1500),
                "{case}: bounded by the timeout, retries included ({i})"
            );
        }
        // Nothing was cached: once the webhook answers, the same request is allowed.
        *mode.lock().unwrap() = "ok";
        assert!(decide(&webhook, &user("u"), &list_configmaps())
            .await
            .is_allowed());

        // Nothing listening at all.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("down.kubeconfig");
        std::fs::write(
            &path,
            kubeconfig(&server, "/").replace(&server.url, &format!("https://127.0.0.1:{port}")),
        )
        .unwrap();
        let down = WebhookAuthorizer::from_kubeconfig(&path).unwrap();
        let decision = decide(&down, &user("u"), &list_configmaps()).await;
        assert!(failed(&decision), "{decision:?}");
        assert!(calls.load(Ordering::SeqCst) >= 6);
        let err = WebhookAuthorizer::from_kubeconfig(&dir.path().join("absent")).unwrap_err();
        assert!(err.contains("absent"), "{err}");
    }

    #[tokio::test]
    async fn untrusted_server_fails_the_decision() {
        let server = sar_server(json!({"alice": {"allowed": true}}));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("authz.kubeconfig");
        let other = base64::engine::general_purpose::STANDARD.encode(ca("other").pem);
        let text = kubeconfig(&server, "/").replace(
            &base64::engine::general_purpose::STANDARD.encode(&server.ca_pem),
            &other,
        );
        std::fs::write(&path, text).unwrap();
        let webhook = WebhookAuthorizer::from_kubeconfig(&path).unwrap();
        let decision = decide(&webhook, &alice(), &list_configmaps()).await;
        assert!(failed(&decision), "{decision:?}");
        assert!(server.requests.lock().unwrap().is_empty());
    }
}

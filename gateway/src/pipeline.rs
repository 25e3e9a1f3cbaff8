//! The request pipeline, in kube-apiserver's `DefaultBuildHandlerChain` order:
//! request info → limits → authentication → audit id → impersonation → (flow control) →
//! authorization → route. Each stage is one call into the module that owns it; this file
//! only sequences them and adapts pingora's `ProxyHttp` phases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use kubegate_backends::api::{ApiRequest, ApiResponse};
use kubegate_backends::status::ApiError;
use kubegate_policy::authn::request_header::IdentityHeaders;
use kubegate_policy::authn::{AuthnOutcome, AuthnRequest, PeerCertificate};
use kubegate_policy::authz::{forbidden_message, Attributes, Decision};
use kubegate_policy::impersonation::{impersonate, impersonation_header_names, ImpersonationError};
use kubegate_policy::request_info::{self, RequestInfo};
use kubegate_policy::{Authenticator, Authorizer, RequestInfoError, UserInfo};
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};

use crate::metrics::{metric_verb, RequestLabels};
use crate::respond;
use crate::routes::Routes;

/// Everything the pipeline needs, shared by every request.
pub struct Gateway {
    pub authenticator: Arc<dyn Authenticator>,
    /// Which requests without credentials become `system:anonymous`.
    pub anonymous: crate::authn::Anonymous,
    /// Front-proxy identity headers: stripped from every request once authentication has
    /// read them, so nothing later can mistake a client's claim for an identity.
    pub identity_headers: IdentityHeaders,
    pub authorizer: Arc<dyn Authorizer>,
    pub routes: Arc<Routes>,
    pub max_request_bytes: usize,
    pub request_timeout: Duration,
    pub lifecycle: Arc<crate::server::Lifecycle>,
}

/// Counts a request as in flight until dropped: shutdown drains non-long-running requests,
/// and the gauges show readOnly/mutating requests and open long-running ones.
struct InFlight<'a> {
    lifecycle: Option<&'a crate::server::Lifecycle>,
    gauge: prometheus::IntGauge,
}

impl<'a> InFlight<'a> {
    fn enter(lifecycle: Option<&'a crate::server::Lifecycle>, gauge: prometheus::IntGauge) -> Self {
        if let Some(l) = lifecycle {
            l.in_flight
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        gauge.inc();
        InFlight { lifecycle, gauge }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.lifecycle {
            l.in_flight
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.gauge.dec();
    }
}

/// Per-request state carried between pingora phases.
pub struct RequestCtx {
    started: Instant,
    audit_id: String,
    info: Option<RequestInfo>,
    method: String,
    status: u16,
    dry_run: bool,
}

/// Paths anyone may read without credentials: exactly those kube's
/// `system:public-info-viewer` role lists (not the per-check sub-paths).
fn is_public_info_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/livez" | "/readyz" | "/version" | "/version/"
    )
}

impl Gateway {
    /// Runs every stage for one request and returns the response to write.
    async fn handle(&self, session: &mut Session, ctx: &mut RequestCtx) -> ApiResponse {
        // 1. request info (path normalized before anything looks at it).
        let header = session.req_header();
        let method = header.method.as_str().to_string();
        ctx.method = method.clone();
        let path = header.uri.path().to_string();
        let raw_query = header.uri.query().unwrap_or("").to_string();
        let info = match request_info::resolve(&method, &path, &raw_query) {
            Ok(info) => info,
            Err(RequestInfoError::BadRequest(m)) => return ApiError::bad_request(m).into(),
            Err(RequestInfoError::NotFound(_)) => return ApiError::path_not_found().into(),
        };
        let query = request_info::parse_query(&raw_query);
        ctx.dry_run = query.iter().any(|(k, v)| k == "dryRun" && v == "All");
        ctx.info = Some(info.clone());

        // 2. limits: refuse oversized bodies before reading them.
        let declared_length = header
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared_length.is_some_and(|l| l > self.max_request_bytes) {
            discard_body(session).await;
            return ApiError::request_entity_too_large(self.max_request_bytes).into();
        }

        // 3. authentication.
        let peer = session
            .digest()
            .and_then(|d| d.ssl_digest.as_ref())
            .and_then(|ssl| ssl.extension.get::<PeerCertificate>())
            .cloned();
        let started = Instant::now();
        let outcome = {
            let request = AuthnRequest {
                headers: &session.req_header().headers,
                peer_certificate: peer.as_ref(),
            };
            self.authenticator.authenticate(&request).await
        };
        let user = match outcome {
            AuthnOutcome::Authenticated(user) => {
                self.routes
                    .metrics
                    .observe_authentication("success", started.elapsed().as_secs_f64());
                user
            }
            AuthnOutcome::Failed(reason) => {
                self.routes
                    .metrics
                    .observe_authentication("failure", started.elapsed().as_secs_f64());
                tracing::info!(audit_id = %ctx.audit_id, %reason, "authentication failed");
                return ApiError::unauthorized().into();
            }
            AuthnOutcome::NoCredential
                if self.anonymous.allows(&info.path) || is_public_info_path(&info.path) =>
            {
                UserInfo::anonymous()
            }
            AuthnOutcome::NoCredential => return ApiError::unauthorized().into(),
        };
        let stripped: Vec<_> = session
            .req_header()
            .headers
            .keys()
            .filter(|name| self.identity_headers.matches(name))
            .cloned()
            .collect();
        for name in stripped {
            session.req_header_mut().remove_header(&name);
        }

        // 5. impersonation: each requested attribute is authorized for the real user; the
        // headers are removed afterwards so nothing later can read them.
        let user = match impersonate(
            &session.req_header().headers,
            &user,
            self.authorizer.as_ref(),
        )
        .await
        {
            Ok(Some(impersonated)) => impersonated,
            Ok(None) => user,
            Err(ImpersonationError::Forbidden(message)) => {
                return ApiError::forbidden(message).into()
            }
            Err(ImpersonationError::Invalid(message)) => {
                return ApiError::bad_request(message).into()
            }
        };
        for name in impersonation_header_names(&session.req_header().headers) {
            session.req_header_mut().remove_header(&name);
        }

        // 7. authorization.
        let decision = self
            .authorizer
            .authorize(&Attributes {
                user: &user,
                request: &info,
            })
            .await;
        if !decision.is_allowed() {
            let reason = match &decision {
                Decision::Deny(r) | Decision::NoOpinion(r) | Decision::Allow(r) => r.clone(),
            };
            let attributes = Attributes {
                user: &user,
                request: &info,
            };
            return forbidden(&info, &forbidden_message(&attributes, &reason));
        }

        // Read the body (bounded) only once the request is allowed.
        let body = match read_body(session, self.max_request_bytes).await {
            Ok(body) => body,
            Err(response) => return response,
        };

        // 8. route, with the request timeout for everything that is not long-running.
        let request = ApiRequest {
            method,
            content_type: header_string(session, http::header::CONTENT_TYPE),
            accept: header_string(session, http::header::ACCEPT),
            if_none_match: header_string(session, http::header::IF_NONE_MATCH),
            info: info.clone(),
            query,
            body,
            user,
        };
        let metrics = &self.routes.metrics;
        if info.long_running {
            return self.routes.serve(request).await;
        }
        let kind = match info.verb.as_str() {
            "get" | "list" | "watch" => "readOnly",
            _ => "mutating",
        };
        let _in_flight = InFlight::enter(
            Some(&self.lifecycle),
            metrics.inflight.with_label_values(&[kind]),
        );
        let timeout = request_timeout(&request, self.request_timeout);
        match tokio::time::timeout(timeout, self.routes.serve(request)).await {
            Ok(response) => response,
            Err(_) => ApiError::timeout(
                "request did not complete within requested timeout - context deadline exceeded",
            )
            .into(),
        }
    }
}

/// kube's metric `scope` label.
fn scope(info: &RequestInfo) -> &'static str {
    if !info.is_resource_request {
        ""
    } else if !info.name.is_empty() {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else {
        "cluster"
    }
}

/// 403 with the resource named the way kube names it in the message.
fn forbidden(info: &RequestInfo, message: &str) -> ApiResponse {
    let mut error = if info.is_resource_request {
        let gr =
            kubegate_backends::GroupResource::new(info.api_group.clone(), info.resource.clone());
        let mut e = ApiError::forbidden_resource(&gr, &info.name, "");
        e.message = if info.name.is_empty() {
            format!("{gr} is forbidden: {message}")
        } else {
            format!("{gr} \"{}\" is forbidden: {message}", info.name)
        };
        e
    } else {
        ApiError::forbidden(format!("forbidden: {message}"))
    };
    error.reason = "Forbidden";
    error.into()
}

fn header_string(session: &Session, name: http::header::HeaderName) -> Option<String> {
    session
        .req_header()
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The effective timeout: the server's, or a shorter `?timeout=` from the client.
fn request_timeout(request: &ApiRequest, default: Duration) -> Duration {
    request
        .param("timeout")
        .and_then(|t| kubegate_config::parse_duration(t).ok())
        .filter(|t| !t.is_zero())
        .map(|t| t.min(default))
        .unwrap_or(default)
}

/// Reads the whole request body, refusing it past `limit` bytes (413).
async fn read_body(session: &mut Session, limit: usize) -> Result<Bytes, ApiResponse> {
    let mut body = bytes::BytesMut::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    discard_body(session).await;
                    return Err(ApiError::request_entity_too_large(limit).into());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.freeze()),
            Err(e) => {
                return Err(ApiError::bad_request(format!("reading the request body: {e}")).into())
            }
        }
    }
}

/// How much of an oversized body is read and thrown away so the client, still sending, can
/// read the 413 instead of a connection reset. Past this the connection is simply closed.
const MAX_DISCARD_BYTES: usize = 16 * 1024 * 1024;

async fn discard_body(session: &mut Session) {
    let mut discarded = 0;
    while discarded < MAX_DISCARD_BYTES {
        match session.read_request_body().await {
            Ok(Some(chunk)) => discarded += chunk.len(),
            _ => return,
        }
    }
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            started: Instant::now(),
            audit_id: uuid::Uuid::new_v4().to_string(),
            info: None,
            method: String::new(),
            status: 0,
            dry_run: false,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        ctx.started = Instant::now();
        // kube keeps a client-chosen Audit-ID so one id can follow a request across servers.
        if let Some(id) = header_string(session, http::header::HeaderName::from_static("audit-id"))
            .filter(|id| {
                !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic())
            })
        {
            ctx.audit_id = id;
        }
        let response = self.handle(session, ctx).await;
        ctx.status = response.status();
        // A request refused before its body was read (401, 403, 404...) still has the body in
        // flight: read it (bounded) so the client gets the answer, not a connection reset.
        if !session.as_downstream_mut().is_body_done() {
            discard_body(session).await;
        }
        // Open watches are counted for as long as they stream.
        let _streaming = match (&response, &ctx.info) {
            (ApiResponse::Watch(_), Some(info)) => Some(InFlight::enter(
                None,
                self.routes.metrics.long_running.with_label_values(&[
                    &metric_verb(&info.verb, &ctx.method),
                    &info.api_group,
                    &info.api_version,
                    &info.resource,
                    &info.subresource,
                    scope(info),
                    "apiserver",
                ]),
            )),
            _ => None,
        };
        respond::write(
            session,
            response,
            &ctx.audit_id,
            &self.lifecycle.shutting_down,
        )
        .await?;
        Ok(true)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        // Every request is answered in request_filter until remote backends exist.
        Err(pingora::Error::new(pingora::ErrorType::HTTPStatus(404)))
    }

    async fn logging(
        &self,
        _session: &mut Session,
        error: Option<&pingora::Error>,
        ctx: &mut RequestCtx,
    ) {
        let elapsed = ctx.started.elapsed();
        let Some(info) = &ctx.info else {
            return;
        };
        let verb = metric_verb(&info.verb, &ctx.method);
        let scope = scope(info);
        let status = if ctx.status == 0 { 500 } else { ctx.status };
        self.routes.metrics.observe(
            &RequestLabels {
                verb: &verb,
                dry_run: ctx.dry_run,
                group: &info.api_group,
                version: &info.api_version,
                resource: &info.resource,
                subresource: &info.subresource,
                scope,
            },
            status,
            elapsed.as_secs_f64(),
        );
        tracing::debug!(
            audit_id = %ctx.audit_id,
            verb = %info.verb,
            path = %info.path,
            status,
            latency_us = elapsed.as_micros() as u64,
            error = error.map(|e| e.to_string()),
            "request"
        );
    }
}

//! The request pipeline, in kube-apiserver's `DefaultBuildHandlerChain` order:
//! request info → limits → authentication → audit id → impersonation → flow control →
//! authorization → route. Each stage is one call into the module that owns it; this file
//! only sequences them and adapts pingora's `ProxyHttp` phases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use kubegate_backends::api::{ApiRequest, ApiResponse};
use kubegate_backends::status::ApiError;
use kubegate_policy::authn::request_header::IdentityHeaders;
use kubegate_policy::authn::{AuthnOutcome, AuthnRequest};
use kubegate_policy::authz::{forbidden_message, Attributes};
use kubegate_policy::impersonation::{impersonate, impersonation_header_names, ImpersonationError};
use kubegate_policy::request_info::{self, RequestInfo};
use kubegate_policy::{Authenticator, Authorizer, RequestInfoError, UserInfo};
use pingora::prelude::*;
use pingora::protocols::http::ServerSession;
use pingora::proxy::{ProxyHttp, Session};

use crate::aggregator::apiservice::Target;
use crate::aggregator::proxy::Forwarding;
use crate::aggregator::table::Backend;
use crate::aggregator::{proxy, Aggregator};
use crate::flowcontrol::{is_read_only, Admit};
use crate::metrics::{metric_verb, RequestLabels};
use crate::respond::{self, AUDIT_ID};
use crate::routes::Routes;
use crate::tls::TlsConnection;

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
    /// The routing table of remote APIService backends and kubegate's proxy identity.
    pub aggregator: Arc<Aggregator>,
    /// API Priority and Fairness, or the max-in-flight limits.
    pub flow: Arc<crate::flowcontrol::FlowGate>,
    pub max_request_bytes: usize,
    pub request_timeout: Duration,
    pub lifecycle: Arc<crate::server::Lifecycle>,
    /// In front of a cluster with `impersonate` forwarding: the cluster's own authorizer
    /// (SubjectAccessReviews with kubegate's credential), which must also allow a caller's
    /// impersonation on requests for the cluster, as the cluster would decide it.
    pub delegate_impersonation: Option<Arc<dyn Authorizer>>,
}

/// Counts a request as in flight until dropped: shutdown drains non-long-running requests,
/// and the gauges show readOnly/mutating requests and open long-running ones.
struct InFlight {
    lifecycle: Option<Arc<crate::server::Lifecycle>>,
    gauge: prometheus::IntGauge,
}

impl InFlight {
    fn enter(
        lifecycle: Option<Arc<crate::server::Lifecycle>>,
        gauge: prometheus::IntGauge,
    ) -> Self {
        if let Some(l) = &lifecycle {
            l.in_flight
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        gauge.inc();
        InFlight { lifecycle, gauge }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(l) = &self.lifecycle {
            l.in_flight
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.gauge.dec();
    }
}

/// Per-request state carried between pingora phases.
pub struct RequestCtx {
    pub(crate) started: Instant,
    pub(crate) audit_id: String,
    pub(crate) info: Option<Arc<RequestInfo>>,
    pub(crate) method: http::Method,
    pub(crate) status: u16,
    /// A write through to the delegate that changes what it serves (a CRD, an APIService).
    pub(crate) changes_delegate: bool,
    dry_run: bool,
    /// Set when the request goes on to a remote backend.
    pub(crate) proxy: Option<ProxyPlan>,
    /// The request's seats (or max-in-flight slot), held until the request is done.
    flow: Option<crate::flowcontrol::Ticket>,
    /// `X-Kubernetes-PF-*` for every response of a classified request.
    pub(crate) pf_headers: Option<Arc<crate::flowcontrol::PfHeaders>>,
    /// When a request that is not long-running must have been answered (kube's request
    /// deadline: the server's timeout, or a shorter `?timeout=`, from its arrival).
    pub(crate) deadline: Option<Instant>,
    /// kubegate ended the request itself (flow control's 429, the deadline's 504): counted in
    /// `apiserver_request_terminations_total` too.
    terminated: bool,
}

impl RequestCtx {
    /// The request's `Audit-Id`, for logs.
    pub fn audit_id(&self) -> &str {
        &self.audit_id
    }

    /// The status counted for the request when it is logged.
    pub fn set_status(&mut self, status: u16) {
        self.status = status;
    }
}

/// What the proxy phases need to send an authorized request to its backend.
pub struct ProxyPlan {
    pub(crate) backend: Arc<Backend>,
    /// The identity forwarded: the impersonated user, or, for a delegate cluster that decides
    /// impersonation itself, the real one.
    pub(crate) user: Arc<UserInfo>,
    /// The client's `Impersonate-*` headers, passed on to a delegate cluster that decides
    /// impersonation (empty otherwise).
    pub(crate) impersonation: Vec<(http::HeaderName, http::HeaderValue)>,
    pub(crate) escaped_path: String,
    pub(crate) raw_query: Option<String>,
    /// An HTTP/1.1 `Upgrade` request (exec, attach, port-forward).
    pub(crate) upgrade: bool,
    pub(crate) long_running: bool,
    /// Backend addresses that refused this request's connection so far (pingora's proxy
    /// then asks for a peer again; each address is tried once).
    dial_failures: usize,
    /// Counts the request as in flight (shutdown drains it) until the plan is dropped.
    _in_flight: Option<InFlight>,
}

/// The answer to an impersonation that is not allowed (403, kube's `NewForbidden` with the
/// object the denial names in the details) or not well formed (400).
fn impersonation_refused(error: ImpersonationError) -> ApiError {
    match error {
        ImpersonationError::Forbidden(denied) => {
            let gr = kubegate_backends::GroupResource::new(denied.group, denied.resource);
            let mut error = ApiError::forbidden_resource(&gr, &denied.name, "");
            error.message = denied.message;
            error
        }
        ImpersonationError::Invalid(message) => ApiError::bad_request(message),
    }
}

/// A request's impersonation as the client asked for it: who asked, and the headers.
struct Impersonation {
    requester: Arc<UserInfo>,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

/// What the pipeline decided for a request.
enum Handled {
    /// Answered by kubegate itself.
    Respond(ApiResponse),
    /// Authorized for a remote backend: pingora's proxy phases take over.
    Proxy(ProxyPlan),
}

impl From<ApiError> for Handled {
    fn from(error: ApiError) -> Self {
        Handled::Respond(error.into())
    }
}

impl From<ApiResponse> for Handled {
    fn from(response: ApiResponse) -> Self {
        Handled::Respond(response)
    }
}

/// Paths anyone may read without credentials: exactly those kube's
/// `system:public-info-viewer` role lists (not the per-check sub-paths).
fn is_public_info_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/livez" | "/readyz" | "/version" | "/version/"
    )
}

/// A request's normalized identity and where it goes, worked out once from its header: the
/// front decides from it whether the request is answered here or proxied, and the pipeline
/// runs on it, so both see the same routing table snapshot.
pub struct Routed {
    info: Arc<RequestInfo>,
    method: String,
    raw_query: String,
    query: Vec<(String, String)>,
    /// The APIService backend the group-version is sent to, or `None` for kubegate's own.
    remote: Option<Arc<Backend>>,
}

impl Routed {
    /// Whether pingora's proxy phases must take the request (an APIService backend's).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Whether the request is long-running (a watch, `proxy`, a log read...).
    pub fn long_running(&self) -> bool {
        self.info.long_running
    }
}

impl Gateway {
    /// Request info (the path normalized before anything looks at it) and the backend the
    /// routing table sends it to.
    pub fn route(&self, header: &pingora::http::RequestHeader) -> Result<Routed, RequestInfoError> {
        let method = header.method.as_str().to_string();
        let raw_query = header.uri.query().unwrap_or("").to_string();
        let query = request_info::parse_query(&raw_query);
        let info = Arc::new(request_info::resolve_parsed(
            &method,
            header.uri.path(),
            &query,
        )?);
        let remote = self.remote_backend(&info);
        Ok(Routed {
            info,
            method,
            raw_query,
            query,
            remote,
        })
    }

    /// Runs every stage for one routed request and returns the response to write.
    async fn handle(
        &self,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        routed: Routed,
    ) -> Handled {
        // 1. request info, resolved by `route`.
        let Routed {
            info,
            method,
            raw_query,
            query,
            remote,
        } = routed;
        ctx.dry_run = query.iter().any(|(k, v)| k == "dryRun" && v == "All");
        ctx.info = Some(info.clone());

        // 2. the deadline of a request that is not long-running (kube's WithRequestDeadline,
        // before authentication: a `?timeout=` that does not parse is a 400 to anyone).
        if !info.long_running {
            match effective_timeout(&query, self.request_timeout) {
                Ok(timeout) => ctx.deadline = Some(ctx.started + timeout),
                Err(message) => return ApiError::bad_request(message).into(),
            }
        }

        // 3. authentication.
        let started = Instant::now();
        let outcome = {
            // Borrowed from the connection: the certificate (and the digests computed at the
            // handshake) serve every request on it without a copy.
            let connection = tls_connection(session);
            let request = AuthnRequest {
                headers: &session.req_header().headers,
                peer_certificate: connection.and_then(|c| c.peer.as_ref()),
                token_memo: connection.map(|c| &c.token_memo),
            };
            kubegate_policy::authn::authenticate(self.authenticator.as_ref(), &request).await
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
                close_unauthenticated_h2(session);
                return ApiError::unauthorized().into();
            }
            // The public info paths are kubegate's exception to anonymous access being off by
            // default; an AuthenticationConfiguration's `anonymous` block, when there is one,
            // decides them too (KEP-4633: only its listed paths, or none when disabled).
            AuthnOutcome::NoCredential
                if self.anonymous.allows(&info.path)
                    || (matches!(self.anonymous, crate::authn::Anonymous::Off)
                        && is_public_info_path(&info.path)) =>
            {
                close_unauthenticated_h2(session);
                UserInfo::shared_anonymous()
            }
            AuthnOutcome::NoCredential => {
                close_unauthenticated_h2(session);
                return ApiError::unauthorized().into();
            }
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
        // headers are removed afterwards so nothing later can read them (a copy is kept with
        // the real user for a delegate cluster that decides too, see `ProxyPlan::impersonation`).
        let impersonation_headers = impersonation_header_names(&session.req_header().headers);
        let mut impersonation = None;
        let user = match impersonate(
            &session.req_header().headers,
            &user,
            self.authorizer.as_ref(),
        )
        .await
        {
            Ok(Some(impersonated)) => {
                // kubegate's credential impersonates on the cluster, so the cluster cannot
                // see who asked: it is asked whether the caller may (SubjectAccessReviews).
                let to_delegate = remote
                    .as_ref()
                    .is_some_and(|b| matches!(b.service.target, Target::Delegate));
                if let (true, Some(cluster)) = (to_delegate, &self.delegate_impersonation) {
                    if let Err(error) =
                        impersonate(&session.req_header().headers, &user, cluster.as_ref()).await
                    {
                        return impersonation_refused(error).into();
                    }
                }
                let headers = &session.req_header().headers;
                impersonation = Some(Impersonation {
                    requester: user,
                    headers: impersonation_headers
                        .iter()
                        .flat_map(|name| {
                            headers
                                .get_all(name)
                                .iter()
                                .map(move |value| (name.clone(), value.clone()))
                        })
                        .collect(),
                });
                Arc::new(impersonated)
            }
            Ok(None) => user,
            Err(error) => return impersonation_refused(error).into(),
        };
        for name in impersonation_headers {
            session.req_header_mut().remove_header(&name);
        }

        // 6. flow control, on the (impersonated) user, before authorization as in kube. What
        // is long-running is decided by verb and subresource alone, as kube's check does, so
        // an `Upgrade` header cannot take a request past flow control or its timeout; an
        // upgrade is honoured for long-running requests only (exec, attach, port-forward,
        // proxy, watch). (kube-aggregator switches protocols on any path of a backend, and its
        // timeout filter kills such a connection at the request timeout; kubegate does not
        // yet, so a backend's other upgrading subresources are answered as plain requests.)
        let upgrade = info.long_running && is_upgrade(session.req_header());
        // The request's own timeout, as flow control bounds its queue wait by it (no clock is
        // read for it: nearly every request is admitted at once).
        let own_timeout = ctx
            .deadline
            .map(|deadline| deadline.saturating_duration_since(ctx.started));
        let memo = tls_connection(session).map(|c| &c.classification_memo);
        let admitted = match self.flow.admit_now(
            &info,
            &user,
            &raw_query,
            own_timeout,
            info.long_running,
            memo,
        ) {
            Admit::Decided(decided) => decided,
            // Boxed: the wait's state would otherwise make every request's future bigger. A
            // client that goes away while its request waits takes it out of the queue, as
            // kube's request context ends; that can be seen only once nothing more is to be
            // read from the client (no request body, or an HTTP/2 stream).
            Admit::Queued(pending) => {
                if session.is_http2() || session.is_body_empty() {
                    Box::pin(pending.wait_unless(crate::respond::client_gone(session, false))).await
                } else {
                    Box::pin(pending.wait()).await
                }
            }
        };
        match admitted {
            Ok(mut ticket) => {
                ctx.pf_headers = ticket.headers.take();
                ctx.flow = Some(ticket);
            }
            Err(refused) => {
                ctx.pf_headers = refused.headers;
                ctx.terminated = true;
                return (*refused.error).into();
            }
        }

        // 7. authorization.
        let decision = kubegate_policy::authz::authorize(
            self.authorizer.as_ref(),
            &Attributes {
                user: &user,
                request: &info,
            },
        )
        .await;
        if !decision.is_allowed() {
            // An authorizer that could not decide fails the request (kube's
            // `WithAuthorization` writes an InternalError): a 500 a client retries, not a 403
            // it takes for an answer.
            if let Some(error) = decision.error() {
                return ApiError::internal(format!(
                    "{}: {error}",
                    // kube's `req.RequestURI`: the path and query, whatever the protocol.
                    kubegate_policy::quote::go_quote(
                        session
                            .req_header()
                            .uri
                            .path_and_query()
                            .map_or("/", |p| p.as_str())
                    )
                ))
                .into();
            }
            let attributes = Attributes {
                user: &user,
                request: &info,
            };
            return forbidden(&info, &forbidden_message(&attributes, decision.reason())).into();
        }

        // A body declared over the limit is refused before it is read. As in kube, where the
        // handler refuses it, this comes after authentication, flow control and
        // authorization: a client that may not make the request hears that first. A request
        // sent on to a backend has no limit here (kube-aggregator streams any body; the
        // backend applies its own).
        let declared_length = session
            .req_header()
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if remote.is_none() && declared_length.is_some_and(|l| l > self.max_request_bytes) {
            discard_body(session).await;
            return ApiError::request_entity_too_large(self.max_request_bytes).into();
        }

        // A group-version an APIService sends elsewhere goes on to its backend, body
        // unread: pingora streams it (and the response) through.
        if let Some(backend) = remote {
            if let Some(message) = backend.unavailable() {
                return ApiError::service_unavailable(message).into();
            }
            // A CRD or APIService written to the delegate changes what it serves: its
            // discovery is fetched again once the write succeeds (`response_filter`), not on
            // the next sync (kube serves a CRD once established).
            ctx.changes_delegate = matches!(backend.service.target, Target::Delegate)
                && Aggregator::changes_delegate_discovery(&info);
            let in_flight = (!info.long_running).then(|| {
                InFlight::enter(
                    Some(self.lifecycle.clone()),
                    self.routes.metrics.inflight_gauge(is_read_only(&info.verb)),
                )
            });
            // In front of a cluster with front-proxy headers, the cluster decides
            // impersonation as kube-apiserver does: the real user goes as X-Remote-* with the
            // client's Impersonate-* headers, so a user kubegate's authorizer lets impersonate
            // (AlwaysAllow lets anyone) can act on the cluster only as the cluster allows.
            let (user, impersonation) = match impersonation {
                Some(impersonation)
                    if matches!(backend.service.target, Target::Delegate)
                        && matches!(backend.identity.forwarding, Forwarding::FrontProxy) =>
                {
                    (impersonation.requester, impersonation.headers)
                }
                _ => (user, Vec::new()),
            };
            return Handled::Proxy(ProxyPlan {
                backend,
                user,
                impersonation,
                escaped_path: info.escaped_path(),
                raw_query: (!raw_query.is_empty()).then_some(raw_query),
                upgrade,
                long_running: info.long_running,
                dial_failures: 0,
                _in_flight: in_flight,
            });
        }

        // Read the body (bounded) only once the request is allowed, within the deadline (kube
        // reads it in the handler, under its timeout).
        let reading = read_body(session, self.max_request_bytes);
        let read = match ctx.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), reading).await {
                Ok(read) => read,
                Err(_) => {
                    ctx.terminated = true;
                    return allotted_timeout().into();
                }
            },
            None => reading.await,
        };
        let body = match read {
            Ok(body) => body,
            Err(response) => return response.into(),
        };

        // 8. route, with the request timeout for everything that is not long-running.
        let request = ApiRequest {
            method,
            content_type: header_string(session, http::header::CONTENT_TYPE),
            content_length_sent: session
                .req_header()
                .headers
                .contains_key(http::header::CONTENT_LENGTH),
            user_agent: header_string(session, http::header::USER_AGENT),
            accept: header_string(session, http::header::ACCEPT),
            if_none_match: header_string(session, http::header::IF_NONE_MATCH),
            info: info.clone(),
            query,
            body,
            user,
        };
        let metrics = &self.routes.metrics;
        if info.long_running {
            return self.routes.serve(request).await.into();
        }
        let _in_flight = InFlight::enter(
            Some(self.lifecycle.clone()),
            metrics.inflight_gauge(is_read_only(&info.verb)),
        );
        let deadline = ctx
            .deadline
            .unwrap_or_else(|| ctx.started + self.request_timeout);
        match tokio::time::timeout_at(deadline.into(), self.routes.serve(request)).await {
            Ok(response) => response.into(),
            Err(_) => {
                ctx.terminated = true;
                allotted_timeout().into()
            }
        }
    }

    /// Runs the pipeline for a routed request and writes kubegate's own answer, or returns the
    /// plan for sending it on to its remote backend (body unread, nothing written).
    pub async fn answer(
        &self,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        routed: Result<Routed, RequestInfoError>,
    ) -> Result<Option<ProxyPlan>> {
        ctx.started = Instant::now();
        // kube keeps a client-chosen Audit-ID so one id can follow a request across servers.
        if let Some(id) = header_string(session, http::header::HeaderName::from_static("audit-id"))
            .filter(|id| {
                !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic())
            })
        {
            ctx.audit_id = id;
        }
        ctx.method = session.req_header().method.clone();
        let response = match routed {
            Err(RequestInfoError::BadRequest(m)) => ApiError::bad_request(m).into(),
            Err(RequestInfoError::NotFound(_)) => ApiError::path_not_found().into(),
            Ok(routed) => match self.handle(session, ctx, routed).await {
                Handled::Respond(response) => response,
                Handled::Proxy(plan) => return Ok(Some(plan)),
            },
        };
        ctx.status = response.status();
        // A request refused before its body was read (401, 403, 404...) still has the body in
        // flight: read it (bounded, and no later than the request's deadline) so the client
        // gets the answer, not a connection reset. Past the deadline the answer goes out at
        // once and the connection closes after it.
        if !session.is_body_done() {
            // A client waiting for `100 Continue` (never sent: the body was not read) has not
            // sent its body; it is answered at once, as Go answers it, and the connection
            // closes after the answer.
            let drained = if expects_continue(session) && session.body_bytes_read() == 0 {
                false
            } else {
                match ctx.deadline {
                    Some(deadline) => {
                        tokio::time::timeout_at(deadline.into(), discard_body(session))
                            .await
                            .is_ok()
                    }
                    None => {
                        discard_body(session).await;
                        true
                    }
                }
            };
            if !drained {
                session.set_keepalive(None);
            }
        }
        // Open watches are counted for as long as they stream.
        let _streaming = match (&response, &ctx.info) {
            (ApiResponse::Watch(_), Some(info)) => Some(InFlight::enter(
                None,
                self.routes.metrics.long_running.with_label_values(&[
                    metric_verb(&info.verb, ctx.method.as_str()),
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
        // A watch holds its seats while its initial events go out, then gives them back.
        let flow = &mut ctx.flow;
        let mut initialized = || {
            if let Some(ticket) = flow.as_mut() {
                ticket.initialization_done();
            }
        };
        respond::write(
            session,
            response,
            &ctx.audit_id,
            ctx.pf_headers.as_deref(),
            &self.lifecycle.shutting_down,
            &mut initialized,
        )
        .await?;
        Ok(None)
    }

    /// A request's state, with its own audit id.
    pub fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            started: Instant::now(),
            audit_id: uuid::Uuid::new_v4().to_string(),
            info: None,
            method: http::Method::GET,
            status: 0,
            changes_delegate: false,
            dry_run: false,
            proxy: None,
            flow: None,
            pf_headers: None,
            deadline: None,
            terminated: false,
        }
    }

    /// Answers a proxied request that failed before its response started (pingora's proxy
    /// and the front's forwarding alike) with the `Status` of [`proxy_error_status`].
    pub(crate) async fn write_proxy_error(
        &self,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        error: &pingora::Error,
    ) -> Result<()> {
        // A backend that did not answer by the request's deadline: kube's timeout filter
        // answers before the proxy gives up.
        let past_deadline = ctx
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
            && matches!(
                error.etype(),
                pingora::ErrorType::ReadTimedout | pingora::ErrorType::WriteTimedout
            );
        let status = if past_deadline {
            ctx.terminated = true;
            allotted_timeout()
        } else if *error.etype() == INVALID_UPGRADE_ERROR {
            // pingora's proxy replaces the error's context with the peer's: the backend's
            // status was kept in `ctx.status` by `response_filter`.
            ApiError::service_unavailable(format!(
                "invalid upgrade response: status code {}",
                ctx.status
            ))
        } else {
            proxy_error_status(error)
        };
        self.write_status(session, ctx, status).await
    }

    /// Answers a forwarded request whose backend did not answer by its deadline with kube's
    /// timeout `Status`.
    pub(crate) async fn write_timeout(
        &self,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        ctx.terminated = true;
        self.write_status(session, ctx, allotted_timeout()).await
    }

    /// Writes a `Status` answer for a request sent on to a backend, counting its code.
    async fn write_status(
        &self,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        status: ApiError,
    ) -> Result<()> {
        ctx.status = status.code;
        respond::write(
            session,
            status.into(),
            &ctx.audit_id,
            ctx.pf_headers.as_deref(),
            &self.lifecycle.shutting_down,
            &mut || {},
        )
        .await
    }

    /// Counts a finished request in kube's request metrics and logs it.
    pub fn log_request(&self, ctx: &RequestCtx, error: Option<&pingora::Error>) {
        let elapsed = ctx.started.elapsed();
        let Some(info) = &ctx.info else {
            return;
        };
        let verb = metric_verb(&info.verb, ctx.method.as_str());
        let scope = scope(info);
        let status = if ctx.status == 0 { 500 } else { ctx.status };
        if let Some(plan) = &ctx.proxy {
            self.routes
                .metrics
                .proxy_requests
                .with_label_values(&[&plan.backend.service.name, &status.to_string()])
                .inc();
        }
        self.routes.metrics.observe(
            &RequestLabels {
                verb,
                dry_run: ctx.dry_run,
                group: &info.api_group,
                version: &info.api_version,
                resource: &info.resource,
                subresource: &info.subresource,
                scope,
            },
            status,
            elapsed.as_secs_f64(),
            ctx.terminated,
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

    /// The remote backend a request's group-version is routed to: resource requests by their
    /// group-version, and the discovery paths below one (`/apis/<group>/<version>`, `/api/v1`).
    fn remote_backend(&self, info: &RequestInfo) -> Option<Arc<Backend>> {
        let table = self.aggregator.table.load();
        if info.is_resource_request {
            return table.remote(&info.api_group, &info.api_version).cloned();
        }
        let mut segments = info.path.trim_start_matches('/').split('/');
        match (segments.next(), segments.next(), segments.next()) {
            (Some("apis"), Some(group), Some(version)) if !version.is_empty() => {
                table.remote(group, version).cloned()
            }
            (Some("api"), Some(version), _) if !version.is_empty() => {
                table.remote("", version).cloned()
            }
            _ => None,
        }
    }
}

/// kube-aggregator's words for a backend answer that redirects
/// (`--aggregator-reject-forwarding-redirect`, on by default: a client must not be sent, with
/// its credentials, wherever a backend points).
const REDIRECT_REFUSED: &str =
    "the backend attempted to redirect this request, which is not permitted";
/// The error type of a backend answer kubegate does not pass on: a redirect.
const REDIRECT_REFUSED_ERROR: pingora::ErrorType = pingora::ErrorType::Custom("RedirectRefused");
/// The error type of an upgrade the backend answered with neither 101 nor an error.
const INVALID_UPGRADE_ERROR: pingora::ErrorType =
    pingora::ErrorType::Custom("InvalidUpgradeResponse");

/// Whether a backend's response header must be answered by kubegate instead of passed on, as
/// kube-aggregator's upgrade-aware proxy decides for an APIService's backend: a 3xx with a
/// `Location` (502), or an upgrade answered with anything but 101 below 400 (503 "invalid
/// upgrade response"; an error code goes to the client as it is). A delegate cluster's answers
/// are what kube-apiserver's own handlers (pods' and services' proxies included) answer, and
/// pass on as they are.
pub(crate) fn refused_backend_answer(
    plan: &ProxyPlan,
    response: &pingora::http::ResponseHeader,
    upgrade: bool,
) -> Option<Box<pingora::Error>> {
    if matches!(plan.backend.service.target, Target::Delegate) {
        return None;
    }
    refused_answer(response, upgrade)
}

/// [`refused_backend_answer`] for an APIService's backend.
fn refused_answer(
    response: &pingora::http::ResponseHeader,
    upgrade: bool,
) -> Option<Box<pingora::Error>> {
    let status = response.status;
    if upgrade && status != http::StatusCode::SWITCHING_PROTOCOLS && status.as_u16() < 400 {
        return Some(pingora::Error::explain(
            INVALID_UPGRADE_ERROR,
            format!("invalid upgrade response: status code {}", status.as_u16()),
        ));
    }
    let location = response
        .headers
        .get(http::header::LOCATION)
        .is_some_and(|value| !value.is_empty());
    (status.is_redirection() && location)
        .then(|| pingora::Error::explain(REDIRECT_REFUSED_ERROR, REDIRECT_REFUSED))
}

/// The `Status` for a proxied request that failed before its response started: 502 for a
/// redirect, otherwise kube-aggregator's 503 "error trying to reach service".
fn proxy_error_status(e: &pingora::Error) -> ApiError {
    match e.etype() {
        // kube sends these as plain text; a `Status` is what clients can read.
        etype if *etype == REDIRECT_REFUSED_ERROR => ApiError::new(502, "", REDIRECT_REFUSED),

        _ => ApiError::service_unavailable(format!(
            "error trying to reach service: {}",
            describe_proxy_error(e)
        )),
    }
}

/// What went wrong reaching a backend, for its 503, in the words of Go's errors that
/// kube-aggregator's message carries ("dial tcp 10.0.0.1:443: connect: connection refused"):
/// each step's context down to the root cause, a repeated step once, but not the `Peer: ...`
/// context pingora's proxy adds, which describes kubegate's own side of the connection (its
/// client certificate's subject and validity, pool and upgrade internals). The error type
/// names a failure that says nothing else.
fn describe_proxy_error(e: &pingora::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut push = |part: String| {
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    };
    let mut step = Some(e);
    while let Some(error) = step {
        if let Some(context) = error.context.as_ref() {
            let context = context.as_str();
            if let Some(peer) = context.strip_prefix("Fail to connect to ") {
                // pingora prints the whole peer (kubegate's client certificate included);
                // kube names the address it dialled.
                let address = peer.strip_prefix("addr: ").unwrap_or(peer);
                push(format!(
                    "dial tcp {}",
                    address.split(',').next().unwrap_or(address)
                ));
            } else if !context.starts_with("Peer: ") {
                push(context.to_string());
            }
        }
        step = match error.cause.as_ref() {
            // A cause that is pingora's own error is boxed (`BError`), as `chain_display` reads it.
            Some(cause) => match cause.downcast_ref::<pingora::BError>() {
                Some(next) => Some(next.as_ref()),
                None => {
                    push(go_socket_error(cause.as_ref()));
                    None
                }
            },
            None => None,
        };
    }
    if parts.is_empty() {
        return e.etype().as_str().to_string();
    }
    parts.join(": ")
}

/// Go's words for the common socket failures (rustls' own add a link to its manual, and the
/// OS's an error number, which tell a client nothing).
fn go_socket_error(cause: &(dyn std::error::Error + Send + Sync + 'static)) -> String {
    let kind = cause
        .downcast_ref::<std::io::Error>()
        .map(std::io::Error::kind);
    let text = cause.to_string();
    match kind {
        Some(std::io::ErrorKind::ConnectionRefused) => "connect: connection refused".into(),
        Some(std::io::ErrorKind::TimedOut) => "i/o timeout".into(),
        Some(std::io::ErrorKind::UnexpectedEof) => "unexpected EOF".into(),
        _ if text.starts_with("Connection refused") => "connect: connection refused".into(),
        _ if text.starts_with("Connection reset by peer") => "connection reset by peer".into(),
        _ => text,
    }
}

/// The IP address of a connection's peer (none for a Unix socket).
pub(crate) fn client_ip(
    address: Option<&pingora::protocols::l4::socket::SocketAddr>,
) -> Option<std::net::IpAddr> {
    address.and_then(|a| a.as_inet()).map(|a| a.ip())
}

/// An HTTP/1.1 protocol upgrade (`Connection: Upgrade` with an `Upgrade` header).
pub(crate) fn is_upgrade(header: &pingora::http::RequestHeader) -> bool {
    let connection_upgrade = header
        .headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade && header.headers.contains_key(http::header::UPGRADE)
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

/// kube's mitigation of HTTP/2 abuse (CVE-2023-44487): a connection whose request was not
/// authenticated, or was served as anonymous, carries no other request; it closes (GOAWAY)
/// once its open streams are answered. HTTP/1.1 connections stay open, as in kube.
fn close_unauthenticated_h2(session: &ServerSession) {
    if session.is_http2() {
        if let Some(connection) = tls_connection(session) {
            connection.close.request();
        }
    }
}

/// What the request's TLS connection shares with its other requests (set at the handshake).
fn tls_connection(session: &ServerSession) -> Option<&TlsConnection> {
    session
        .digest()
        .and_then(|d| d.ssl_digest.as_ref())
        .and_then(|ssl| ssl.extension.get::<TlsConnection>())
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
        // kube's `NewForbidden` with no resource: empty details, still there.
        let mut e = ApiError::forbidden(format!("forbidden: {message}"));
        e.details = Some(Box::default());
        e
    };
    error.reason = "Forbidden";
    error.into()
}

fn header_string(session: &ServerSession, name: http::header::HeaderName) -> Option<String> {
    session
        .req_header()
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The effective timeout: the server's, or a shorter positive `?timeout=` from the client
/// (kube's `parseTimeout`: Go's `time.ParseDuration`, whose error is the request's 400).
fn effective_timeout(query: &[(String, String)], default: Duration) -> Result<Duration, String> {
    let Some((_, text)) = query.iter().find(|(k, _)| k == "timeout") else {
        return Ok(default);
    };
    if text.is_empty() {
        return Ok(default);
    }
    let seconds = kubegate_config::parse_go_duration(text)
        .map_err(|e| format!("invalid timeout specified in the request URL - {e}"))?;
    Ok(if seconds > 0.0 {
        Duration::from_secs_f64(seconds).min(default)
    } else {
        default
    })
}

/// kube's timeout filter's answer to a request past its deadline.
pub(crate) fn allotted_timeout() -> ApiError {
    let mut error =
        ApiError::timeout("Timeout: request did not complete within the allotted timeout");
    error.details = Some(Box::default());
    error
}

/// An HTTP/1.1 request with a body whose client waits for `100 Continue` before sending it.
fn expects_continue(session: &mut ServerSession) -> bool {
    !session.is_http2()
        && !session.is_body_empty()
        && session
            .req_header()
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// Reads the whole request body, refusing it past `limit` bytes (413).
async fn read_body(session: &mut ServerSession, limit: usize) -> Result<Bytes, ApiResponse> {
    let mut body = bytes::BytesMut::new();
    // A client that waits for `100 Continue` before sending its body (curl does for bodies
    // over 1 MiB) gets it when the body is first read, as Go's server sends it.
    if expects_continue(session) {
        if let Err(e) = session.write_continue_response().await {
            return Err(ApiError::bad_request(format!("reading the request body: {e}")).into());
        }
    }
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

async fn discard_body(session: &mut ServerSession) {
    let mut discarded = 0;
    while discarded < MAX_DISCARD_BYTES {
        match session.read_request_body().await {
            Ok(Some(chunk)) => discarded += chunk.len(),
            _ => return,
        }
    }
}

/// pingora's proxy phases for the requests the front hands on (those routed to an APIService
/// backend): the proxy owns one of these, sharing the gateway with the front.
pub struct ProxyPhases(pub Arc<Gateway>);

impl std::ops::Deref for ProxyPhases {
    type Target = Gateway;

    fn deref(&self) -> &Gateway {
        &self.0
    }
}

#[async_trait]
impl ProxyHttp for ProxyPhases {
    type CTX = RequestCtx;

    /// No downstream modules: pingora's default adds its response-compression module
    /// switched off, which still costs allocations and a dispatch on every request.
    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    fn new_ctx(&self) -> RequestCtx {
        self.0.new_ctx()
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let routed = self.route(session.req_header());
        match self
            .answer(session.as_downstream_mut(), ctx, routed)
            .await?
        {
            Some(plan) => {
                ctx.proxy = Some(plan);
                Ok(false)
            }
            None => Ok(true),
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let Some(plan) = &ctx.proxy else {
            // Local requests are answered in request_filter and never get here.
            return Err(pingora::Error::new(pingora::ErrorType::HTTPStatus(404)));
        };
        let Some(address) = plan.backend.next_address() else {
            let why = match &plan.backend.location {
                Err(e) => e.message.clone(),
                Ok(_) => "no endpoints".to_string(),
            };
            return Err(pingora::Error::explain(
                pingora::ErrorType::ConnectNoRoute,
                why,
            ));
        };
        // What is left of the request's deadline (reads wait no longer than that).
        let read_timeout = (!plan.long_running).then(|| {
            ctx.deadline.map_or(self.request_timeout, |deadline| {
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            })
        });
        Ok(Box::new(proxy::peer(
            &plan.backend,
            address,
            plan.upgrade,
            read_timeout,
        )))
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut pingora::http::RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(plan) = &ctx.proxy else {
            return Ok(());
        };
        // Rewritten on a copy of its parts, and sent without the client's header-name case
        // map (see `proxy::rewrite_parts`).
        let raw_target_is_uri = proxy::raw_target_is_uri(upstream_request);
        let mut parts = upstream_request.as_owned_parts();
        proxy::rewrite_parts(
            &mut parts,
            raw_target_is_uri,
            &plan.user,
            &plan.impersonation,
            &plan.backend,
            &plan.escaped_path,
            plan.raw_query.as_deref(),
        )?;
        proxy::append_forwarded_for(&mut parts.headers, client_ip(session.client_addr()))?;
        // The same audit id on both sides lets one request be followed across servers.
        parts
            .headers
            .insert(AUDIT_ID, proxy::header_value(&ctx.audit_id)?);
        proxy::replace_request(upstream_request, parts);
        Ok(())
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut pingora::http::ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(plan) = &ctx.proxy else {
            return Ok(());
        };
        let status = upstream_response.status.as_u16();
        ctx.status = status;
        // Only a write the cluster took changes what it serves (a refused one must not open
        // the catch-up window: every discovery request would then refetch its documents).
        if ctx.changes_delegate && (200..300).contains(&status) {
            self.aggregator.delegate_discovery_changed();
        }
        self.routes
            .metrics
            .proxy_request_duration
            .with_label_values(&[&plan.backend.service.name])
            .observe(ctx.started.elapsed().as_secs_f64());
        if let Some(refused) = refused_backend_answer(plan, upstream_response, plan.upgrade) {
            // Answered by `fail_to_proxy` (nothing has gone to the client yet), and the
            // connection is closed after it.
            return Err(refused);
        }
        if plan.upgrade && status != 101 {
            // The backend refused the upgrade. Whatever the client sends next on this
            // connection must not reach the backend unauthenticated as a tunnel under
            // kubegate's identity (CVE-2018-1002105): close it after this response.
            session.set_keepalive(None);
        }
        if upstream_response.headers.get(&AUDIT_ID).is_none() {
            upstream_response.insert_header(AUDIT_ID, ctx.audit_id.as_str())?;
        }
        if let Some(pf) = &ctx.pf_headers {
            // Rebuilt without the backend's header-name case map, whose entries would have
            // to follow the plain map's (pingora writes HTTP/1.1 names from both).
            let mut parts = upstream_response.as_owned_parts();
            pf.put_before_backends(&mut parts.headers);
            *upstream_response = pingora::http::ResponseHeader::from(parts);
        }
        // A proxied watch has started once the backend answers: its seats go back (kubegate
        // cannot see when the backend's initial events end).
        if plan.long_running {
            if let Some(ticket) = ctx.flow.as_mut() {
                ticket.initialization_done();
            }
        }
        Ok(())
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<pingora::Error>,
    ) -> Box<pingora::Error> {
        if let Some(plan) = &mut ctx.proxy {
            self.routes
                .metrics
                .proxy_connect_errors
                .with_label_values(&[&plan.backend.service.name])
                .inc();
            // As the front's own forwarding: an address that refuses the connection is passed
            // over for the backend's next one (pingora asks `upstream_peer` again), each once.
            if proxy::is_dial_failure(&e) {
                if let Some(address) = pingora::upstreams::peer::Peer::address(peer).as_inet() {
                    plan.backend.connect_failed(*address);
                }
                plan.dial_failures += 1;
                e.set_retry(plan.dial_failures < plan.backend.address_count());
            }
        }
        e
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &pingora::Error,
        ctx: &mut RequestCtx,
    ) -> pingora::proxy::FailToProxy {
        // A response already begun (a watch, a streamed body, an upgraded tunnel) whose
        // backend failed is aborted, as Go's reverse proxy aborts it (`ErrAbortHandler`): the
        // connection closed or the HTTP/2 stream reset, so the client sees a failed response,
        // never an error Status appended to a response that then ends as if complete.
        if let Some(sent) = session.as_downstream().response_written() {
            let code = sent.status.as_u16();
            session.as_downstream_mut().shutdown().await;
            return pingora::proxy::FailToProxy {
                error_code: code,
                can_reuse_downstream: false,
            };
        }
        let downstream_gone = matches!(e.esource(), pingora::ErrorSource::Downstream)
            && matches!(
                e.etype(),
                pingora::ErrorType::WriteError
                    | pingora::ErrorType::ReadError
                    | pingora::ErrorType::ConnectionClosed
            );
        let code = if downstream_gone {
            0
        } else {
            if let Err(write_error) = self.write_proxy_error(session, ctx, e).await {
                tracing::debug!(error = %write_error, "writing the proxy error response");
            }
            ctx.status
        };
        pingora::proxy::FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(
        &self,
        _session: &mut Session,
        error: Option<&pingora::Error>,
        ctx: &mut RequestCtx,
    ) {
        self.log_request(ctx, error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_servers_or_a_shorter_positive_timeout() {
        let query = |v: &str| vec![("timeout".to_string(), v.to_string())];
        let server = Duration::from_secs(60);
        assert_eq!(effective_timeout(&[], server), Ok(server));
        assert_eq!(
            effective_timeout(&query("1s"), server),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(effective_timeout(&query("2m"), server), Ok(server));
        assert_eq!(effective_timeout(&query("0s"), server), Ok(server));
        assert_eq!(effective_timeout(&query("-5s"), server), Ok(server));
        assert_eq!(effective_timeout(&query(""), server), Ok(server));
        assert_eq!(
            effective_timeout(&query("5"), server),
            Err(r#"invalid timeout specified in the request URL - time: missing unit in duration "5""#.into())
        );
        let timeout = allotted_timeout();
        assert_eq!((timeout.code, timeout.reason), (504, "Timeout"));
        assert_eq!(
            timeout.to_status()["details"],
            serde_json::json!({}),
            "kube's NewTimeoutError has empty details"
        );
    }

    #[test]
    fn a_backends_503_names_the_failure_but_not_kubegates_side_of_the_connection() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused here");
        let dial = pingora::Error::because(
            pingora::ErrorType::ConnectRefused,
            "dialing 127.0.0.1:9",
            refused,
        );
        // pingora's proxy adds the peer, client certificate included, as context.
        let error = dial.more_context(
            "Peer: addr: 127.0.0.1:9, client cert: Certificate { subject: CN=front-proxy-client, not_after: 2036 }",
        );
        let message = describe_proxy_error(&error);
        assert_eq!(
            message, "dialing 127.0.0.1:9: connect: connection refused",
            "{error}"
        );
        let status = proxy_error_status(&error);
        assert_eq!(status.code, 503);
        assert_eq!(
            status.message,
            "error trying to reach service: dialing 127.0.0.1:9: connect: connection refused"
        );
        // pingora's connector prints the whole peer; only the address is kept, as kube's
        // "dial tcp ...".
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "os error 111");
        let dial = pingora::Error::because(
            pingora::ErrorType::ConnectRefused,
            "Fail to connect to addr: 127.0.0.1:9, scheme: HTTPS, sni: b, client cert: CN: front-proxy-client,, expire: 2036",
            refused,
        );
        assert_eq!(
            describe_proxy_error(&dial),
            "dial tcp 127.0.0.1:9: connect: connection refused"
        );
        // The same step twice (pingora's connector and its caller), the OS's words for the
        // cause: once, in Go's.
        let refused = std::io::Error::other("Connection refused (os error 111)");
        let inner = pingora::Error::because(
            pingora::ErrorType::ConnectRefused,
            "Fail to connect to addr: 127.0.0.1:9, scheme: HTTPS",
            refused,
        );
        let outer = pingora::Error::because(
            pingora::ErrorType::ConnectRefused,
            "Fail to connect to addr: 127.0.0.1:9, scheme: HTTPS",
            inner,
        );
        assert_eq!(
            describe_proxy_error(&outer),
            "dial tcp 127.0.0.1:9: connect: connection refused"
        );
        let eof = std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "peer closed connection without sending TLS close_notify: https://docs.rs/rustls/",
        );
        let read = pingora::Error::because(pingora::ErrorType::ReadError, "reading", eof);
        assert_eq!(describe_proxy_error(&read), "reading: unexpected EOF");
        // A redirect is refused with kube-aggregator's words.
        let response = pingora::http::ResponseHeader::build(302, None).expect("header");
        assert!(refused_answer(&response, false).is_none(), "no Location");
        let mut response = pingora::http::ResponseHeader::build(307, None).expect("header");
        response
            .insert_header(http::header::LOCATION, "https://elsewhere/")
            .expect("header");
        let refused = refused_answer(&response, false).expect("refused");
        let status = proxy_error_status(&refused);
        assert_eq!((status.code, status.reason), (502, ""));
        assert_eq!(status.message, REDIRECT_REFUSED);
        // An upgrade answered 2xx or 3xx (not 101) is refused; an error answer passes on.
        for (code, refused) in [(101, false), (200, true), (302, true), (400, false)] {
            let response = pingora::http::ResponseHeader::build(code, None).expect("header");
            assert_eq!(refused_answer(&response, true).is_some(), refused, "{code}");
        }
    }
}

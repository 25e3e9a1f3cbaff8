//! Forwarding of plain proxied requests: a request for a remote APIService backend with no
//! body, no upgrade and a bounded life (a GET, HEAD or body-less DELETE; not a watch) is sent
//! over pingora's pooled upstream sessions and its response streamed back here, without
//! pingora's proxy state machine.
//!
//! pingora's `HttpProxy` runs each request as a ~15 KiB boxed future with its cache, retry
//! and body-task machinery, two channels and a select loop between the client and the
//! backend; a request that has nothing to send after its header needs none of that. Requests
//! with a body, upgrades (exec, attach, port-forward) and long-running requests (watches,
//! `proxy`, logs) still go through `HttpProxy`, which streams both ways at once.

use bytes::Bytes;
use http::header::{self, HeaderName};
use pingora::connectors::http::Connector;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::client::HttpSession;
use pingora::protocols::http::ServerSession;
use pingora::Result;

use crate::aggregator::proxy::{self, PooledPeer};
use crate::pipeline::{client_ip, is_upgrade, Gateway, ProxyPlan, RequestCtx};
use crate::respond::AUDIT_ID;

/// RFC 9110's connection-specific headers (the list Go's `httputil.ReverseProxy`, and so
/// kube-aggregator, removes): they describe one hop, never the message.
static HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Whether a request routed to a remote backend can be forwarded here: not `CONNECT`, not
/// long-running, not an upgrade, and with no body to send.
pub fn eligible(session: &mut ServerSession, long_running: bool) -> bool {
    let header = session.req_header();
    header.method != http::Method::CONNECT
        && !long_running
        && !is_upgrade(header)
        && session.is_body_empty()
}

/// The names of the hop-by-hop headers of `headers`: the fixed ones present, and those the
/// `Connection` header names.
fn hop_by_hop_names(headers: &http::HeaderMap) -> Vec<HeaderName> {
    // One pass over the names the message has, compared as parsed names: looking each fixed
    // name up by string instead parsed and hashed it again (18 lookups, ~3 % of a proxied
    // GET's instructions, for the request and the response).
    let mut names: Vec<HeaderName> = headers
        .keys()
        .filter(|name| HOP_BY_HOP.contains(name))
        .cloned()
        .collect();
    if names.is_empty() {
        // No `Connection` header either, so it names nothing to remove.
        return names;
    }
    for value in headers.get_all(header::CONNECTION) {
        let Ok(value) = value.to_str() else { continue };
        for token in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if let Ok(name) = HeaderName::from_bytes(token.as_bytes()) {
                if headers.contains_key(&name) && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    names
}

/// The request to send: the client's, less its hop-by-hop headers, rewritten for the backend.
fn upstream_request(
    session: &ServerSession,
    plan: &ProxyPlan,
    audit_id: &str,
) -> Result<RequestHeader> {
    // Without the client's header-name case map: header names are case-insensitive, and
    // keeping that second map in step costs a parse, a hash and an allocation per header the
    // rewrite adds or removes (pingora's proxy keeps it; this path need not). The rewrite
    // writes into the parts' plain header map.
    let client = session.req_header();
    let raw_target_is_uri = proxy::raw_target_is_uri(client);
    let mut parts = client.as_owned_parts();
    // Room for what the rewrite adds (the identity headers, X-Forwarded-For, Audit-Id) at
    // once: appended one by one they made the map grow, and rehash, up to three times.
    let user = &plan.user;
    let extra_values: usize = user.extra.values().map(Vec::len).sum();
    parts
        .headers
        .reserve(ADDED_REQUEST_HEADERS + user.groups.len() + extra_values);
    for name in hop_by_hop_names(&parts.headers) {
        parts.headers.remove(&name);
    }
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
        .insert(AUDIT_ID, proxy::header_value(audit_id)?);
    Ok(RequestHeader::from(parts))
}

/// Sends the request header (the whole request: it has no body) and reads the response's.
async fn exchange(upstream: &mut HttpSession, mut request: Box<RequestHeader>) -> Result<()> {
    match upstream {
        HttpSession::H2(h2) => h2.write_request_header(request, true)?,
        HttpSession::H1(_) => {
            request.set_version(http::Version::HTTP_11);
            upstream.write_request_header(request).await?;
            upstream.finish_request_body().await?;
        }
        // The connector is built without a custom protocol.
        HttpSession::Custom(_) => {
            return Err(pingora::Error::explain(
                pingora::ErrorType::InternalError,
                "no custom upstream protocol is configured",
            ))
        }
    }
    upstream.read_response_header().await?;
    // An HTTP/1.1 backend may send informational answers first; they are not forwarded.
    if let HttpSession::H1(_) = upstream {
        let mut informational = 0;
        while upstream.response_header().is_some_and(|r| {
            r.status.is_informational() && r.status != http::StatusCode::SWITCHING_PROTOCOLS
        }) {
            informational += 1;
            if informational > MAX_INFORMATIONAL {
                return Err(pingora::Error::explain(
                    pingora::ErrorType::InvalidHTTPHeader,
                    "the backend sent too many informational answers",
                ));
            }
            upstream.read_response_header().await?;
        }
    }
    // Switching protocols for a request that did not ask would open a tunnel to the backend
    // under kubegate's identity (the CVE-2018-1002105 class): refused.
    if upstream
        .response_header()
        .is_some_and(|r| r.status == http::StatusCode::SWITCHING_PROTOCOLS)
    {
        return Err(pingora::Error::explain(
            pingora::ErrorType::InvalidHTTPHeader,
            "the backend switched protocols for a request that did not ask to",
        ));
    }
    Ok(())
}

impl Gateway {
    /// Forwards an [`eligible`] request on `plan` and writes the backend's response (or a 503
    /// `Status` when the backend cannot be reached). An error means the client's connection
    /// broke or the response broke off midway: the connection must not be reused.
    pub async fn forward(
        &self,
        connector: &Connector,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        plan: ProxyPlan,
    ) -> Result<()> {
        debug_assert!(
            !plan.upgrade && !plan.long_running,
            "only eligible requests are forwarded"
        );
        let outcome = self.forward_on(connector, session, ctx, &plan).await;
        // Counted per APIService when the request is logged.
        ctx.proxy = Some(plan);
        outcome
    }

    async fn forward_on(
        &self,
        connector: &Connector,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        plan: &ProxyPlan,
    ) -> Result<()> {
        let deadline = ctx.deadline;
        // kube's proxy gives a backend's discovery document (`/apis/<group>/<version>`: a
        // non-resource path of three segments) 5 s, so a slow backend fails fast instead of
        // holding up clients' discovery (`aggregatedDiscoveryTimeout`).
        let discovery_deadline = ctx
            .info
            .as_ref()
            .filter(|info| {
                !info.is_resource_request && info.path.trim_matches('/').split('/').count() == 3
            })
            .map(|_| std::time::Instant::now() + AGGREGATED_DISCOVERY_TIMEOUT);
        let Some((mut address, mut peer)) = plan.backend.next_forward_peer(self.request_timeout)
        else {
            let why = match &plan.backend.location {
                Err(e) => e.message.clone(),
                Ok(_) => "no endpoints".to_string(),
            };
            let error = pingora::Error::explain(pingora::ErrorType::ConnectNoRoute, why);
            return self.write_proxy_error(session, ctx, &error).await;
        };
        // A pooled connection the backend has closed meanwhile fails before any answer; the
        // request (no body, and a method Go's transport replays: `retry_safe`) then goes again,
        // as long as the failed connection was a reused one (the next may be stale too), at
        // most `MAX_RETRIES` times.
        let mut retries = if retry_safe(&ctx.method) {
            MAX_RETRIES
        } else {
            0
        };
        // An address that cannot be connected to is passed over for the next, each address
        // tried once: nothing was sent, so any request may go again (Go's dialer does the same
        // with a host's addresses). A TLS failure is the backend's answer, not retried.
        let mut other_addresses = plan.backend.address_count().saturating_sub(1);
        let mut upstream = loop {
            let (mut upstream, reused) = match connector.get_http_session(peer).await {
                Ok(session) => session,
                Err(error) => {
                    self.routes
                        .metrics
                        .proxy_connect_errors
                        .with_label_values(&[&plan.backend.service.name])
                        .inc();
                    let dial_failure = proxy::is_dial_failure(&error);
                    if dial_failure {
                        plan.backend.connect_failed(address);
                    }
                    if dial_failure && other_addresses > 0 {
                        if let Some(next) = plan.backend.next_forward_peer(self.request_timeout) {
                            tracing::debug!(%error, %address, "a backend address refused the connection; trying the next");
                            other_addresses -= 1;
                            (address, peer) = next;
                            continue;
                        }
                    }
                    return self.write_proxy_error(session, ctx, &error).await;
                }
            };
            upstream.set_read_timeout(peer.read_timeout());
            let header = Box::new(upstream_request(session, plan, &ctx.audit_id)?);
            // A client that goes away while the backend works is noticed (as pingora's proxy
            // and Go's request context do): its seats and the backend's stream are let go. A
            // backend that has not answered by the request's deadline gets kube's timeout.
            let exchanged = tokio::select! {
                exchanged = exchange(&mut upstream, header) => exchanged,
                _ = sleep_until_deadline(deadline) => {
                    abandon(connector, upstream, peer).await;
                    return self.write_timeout(session, ctx).await;
                }
                _ = sleep_until_deadline(discovery_deadline) => {
                    abandon(connector, upstream, peer).await;
                    let error = pingora::Error::explain(
                        pingora::ErrorType::ReadTimedout,
                        "context deadline exceeded",
                    );
                    return self.write_proxy_error(session, ctx, &error).await;
                }
                gone = session.read_body_or_idle(true) => {
                    abandon(connector, upstream, peer).await;
                    return Err(gone.err().unwrap_or_else(|| {
                        pingora::Error::explain(
                            pingora::ErrorType::ConnectionClosed,
                            "the client sent data while its body-less request was forwarded",
                        )
                    }));
                }
            };
            match exchanged {
                Ok(()) => break upstream,
                Err(mut error) => {
                    // pingora marks the failures that happen before a request can have been
                    // processed (on a reused connection: it closed; on HTTP/2: GOAWAY,
                    // REFUSED_STREAM, a request to use HTTP/1.1); timeouts and TLS errors
                    // are not among them.
                    error.retry.decide_reuse(reused);
                    let downgrade = matches!(
                        error.etype(),
                        pingora::ErrorType::H2Downgrade | pingora::ErrorType::InvalidH2
                    );
                    abandon(connector, upstream, peer).await;
                    if downgrade {
                        // As pingora's proxy: this backend gets HTTP/1.1 from now on.
                        connector.prefer_h1(peer);
                    }
                    if retries > 0 && error.retry() {
                        tracing::debug!(%error, "a backend connection failed before answering; sending the request again");
                        retries -= 1;
                        continue;
                    }
                    return self.write_proxy_error(session, ctx, &error).await;
                }
            }
        };
        let response = match upstream.response_header() {
            Some(response) => {
                if let Some(refused) =
                    crate::pipeline::refused_backend_answer(plan, response, false)
                {
                    abandon(connector, upstream, peer).await;
                    return self.write_proxy_error(session, ctx, &refused).await;
                }
                self.downstream_response(session, ctx, plan, response)?
            }
            None => {
                let error = pingora::Error::explain(
                    pingora::ErrorType::InvalidHTTPHeader,
                    "the backend sent no response header",
                );
                return self.write_proxy_error(session, ctx, &error).await;
            }
        };
        if let Err(error) = session.write_response_header(response).await {
            abandon(connector, upstream, peer).await;
            return Err(error);
        }
        loop {
            let read = tokio::select! {
                read = upstream.read_response_body() => read,
                // Past the deadline with half a response out: the client sees the
                // connection end, as kube's timeout filter aborts it.
                _ = sleep_until_deadline(deadline) => Err(pingora::Error::explain(
                    pingora::ErrorType::ReadTimedout,
                    "the request's deadline passed while the backend's response was streamed",
                )),
            };
            match read {
                Ok(Some(chunk)) => {
                    if let Err(error) = session.write_response_body(chunk, false).await {
                        abandon(connector, upstream, peer).await;
                        return Err(error);
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    // Half a response went out: the client must see the connection end.
                    abandon(connector, upstream, peer).await;
                    return Err(error);
                }
            }
        }
        // The backend's side is complete: its connection goes back before the last write.
        if upstream.response_done() {
            connector
                .release_http_session(upstream, peer, peer.idle_timeout())
                .await;
        } else {
            abandon(connector, upstream, peer).await;
        }
        session.write_response_body(Bytes::new(), true).await
    }

    /// The backend's response header as the client gets it: hop-by-hop headers removed, the
    /// framing this connection needs, and kube's `Audit-Id` and flow-control headers.
    fn downstream_response(
        &self,
        session: &ServerSession,
        ctx: &mut RequestCtx,
        plan: &ProxyPlan,
        upstream: &ResponseHeader,
    ) -> Result<Box<ResponseHeader>> {
        // The backend's header without its case map (an HTTP/1.1 backend's names go out
        // title-cased or lower-case, as for a local answer), so that the headers added here
        // go straight into the plain map (see `proxy::rewrite_parts`).
        let mut parts = upstream.as_owned_parts();
        ctx.status = parts.status.as_u16();
        self.routes
            .metrics
            .proxy_request_duration
            .with_label_values(&[&plan.backend.service.name])
            .observe(ctx.started.elapsed().as_secs_f64());
        for name in hop_by_hop_names(&parts.headers) {
            parts.headers.remove(&name);
        }
        if !session.is_http2() {
            // An HTTP/2 backend's answer goes out on the client's HTTP/1.1 connection.
            parts.version = http::Version::HTTP_11;
        }
        // A body of unknown length goes out chunked on HTTP/1.1 (HTTP/2 frames it anyway);
        // without it pingora would end the body by closing the connection.
        let bodiless = parts.status == http::StatusCode::NO_CONTENT
            || parts.status == http::StatusCode::NOT_MODIFIED
            || parts.status.is_informational()
            || session.req_header().method == http::Method::HEAD;
        if !session.is_http2() && !bodiless && !parts.headers.contains_key(header::CONTENT_LENGTH) {
            parts.headers.insert(
                header::TRANSFER_ENCODING,
                http::HeaderValue::from_static("chunked"),
            );
        }
        if !parts.headers.contains_key(&AUDIT_ID) {
            parts
                .headers
                .insert(AUDIT_ID, proxy::header_value(&ctx.audit_id)?);
        }
        if let Some(pf) = &ctx.pf_headers {
            pf.put_before_backends(&mut parts.headers);
        }
        Ok(Box::new(ResponseHeader::from(parts)))
    }
}

/// Headers the rewrite may add to a forwarded request besides one per group and extra
/// value: Host, Authorization (a delegate's token), X-Remote-User, X-Remote-Uid,
/// X-Forwarded-For, Audit-Id.
const ADDED_REQUEST_HEADERS: usize = 6;

/// How often a request is sent again after its connection failed before any answer.
const MAX_RETRIES: u32 = 3;

/// Methods that may be sent twice when a connection fails before the answer: Go's transport
/// replays exactly these (`isReplayable`). A DELETE may have been carried out before its
/// connection broke, so it is not among them.
fn retry_safe(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS | http::Method::TRACE
    )
}

/// How long a backend has to answer for its discovery document (kube's
/// `aggregatedDiscoveryTimeout`).
const AGGREGATED_DISCOVERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Resolves at the request's deadline (never, for a request without one).
async fn sleep_until_deadline(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// Gives up an upstream session mid-request: HTTP/1.1 closes the connection; HTTP/2 resets
/// the stream and hands the connection back to the pool, which drops it if it is closed (a
/// session merely dropped would keep its connection counted as in use).
async fn abandon(connector: &Connector, mut upstream: HttpSession, peer: &PooledPeer) {
    upstream.shutdown().await;
    if let HttpSession::H2(_) = upstream {
        connector
            .release_http_session(upstream, peer, peer.idle_timeout())
            .await;
    }
}

/// How many informational (1xx) answers a backend may send before its real one (Go's
/// transport gives up after 5).
const MAX_INFORMATIONAL: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_found() {
        let map = headers(&[
            ("Connection", "keep-alive, X-Hop"),
            ("Connection", "close"),
            ("Keep-Alive", "timeout=5"),
            ("X-Hop", "1"),
            ("Transfer-Encoding", "chunked"),
            ("Accept", "application/json"),
            ("X-Kept", "1"),
        ]);
        let mut names: Vec<String> = hop_by_hop_names(&map)
            .iter()
            .map(|n| n.as_str().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["connection", "keep-alive", "transfer-encoding", "x-hop"]
        );
    }

    #[test]
    fn a_request_without_hop_by_hop_headers_has_none_to_remove() {
        let map = headers(&[("Accept", "application/json"), ("User-Agent", "kubectl")]);
        assert!(hop_by_hop_names(&map).is_empty());
    }

    #[test]
    fn only_replayable_methods_are_retried() {
        assert!(retry_safe(&http::Method::GET));
        assert!(retry_safe(&http::Method::HEAD));
        assert!(retry_safe(&http::Method::OPTIONS));
        assert!(!retry_safe(&http::Method::DELETE));
        assert!(!retry_safe(&http::Method::POST));
        assert!(!retry_safe(&http::Method::PATCH));
    }
}

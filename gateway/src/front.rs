//! The front door: reads every request off its connection, answers kubegate's own requests
//! itself and hands only those routed to an APIService backend to pingora's proxy.
//!
//! pingora's `HttpProxy` runs a request as one future of about 15 KiB (its cache, retry and
//! upstream machinery inline) that is boxed, and so copied, for every request. Local requests
//! need none of it, so they are answered here with [`Gateway::answer`] directly; the proxy
//! sees the remote ones only. An HTTP/2 stream arrives with its header read and is simply
//! handed on. HTTP/1.1 has to be read before it can be routed, and pingora's proxy reads the
//! header itself, so each HTTP/1.1 connection records the bytes read for the current request's
//! header and replays them to a fresh session for the proxy (the same bytes, so the proxy
//! parses exactly what the client sent, body bytes read with the header included).
//! Remote requests with nothing to stream to the backend (GETs, mostly) skip the proxy too:
//! `forward.rs` sends them over pooled upstream sessions of the front's own.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::ServerApp;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, HttpServerOptions, ReusedHttpStream};
use pingora::protocols::http::v2::server::H2Options;
use pingora::protocols::http::ServerSession;
use pingora::protocols::tls::TlsRef;
use pingora::protocols::Stream;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use pingora::proxy::HttpProxy;
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use crate::pipeline::{Gateway, ProxyPhases};

/// An HTTP/1.1 connection's idle timer is moved on at most once per this share of the idle
/// timeout (10 s of kube-apiserver's 90 s), so such a connection closes after its idle timeout
/// plus up to this much.
const IDLE_SLACK_DIVISOR: u32 = 9;

/// Shutdown notifications are spread over this many `Notify`s (by connection), so that
/// connections waiting for their next request do not all queue on one lock.
const CLOSING_SHARDS: usize = 8;

/// An HTTP/1.1 connection's own state.
struct Connection {
    record: Arc<HeaderRecord>,
    /// Which of `Requests::closed` this connection waits on.
    shard: usize,
}

/// The listening service's application: one per server, shared by every connection.
pub struct Front {
    requests: Arc<Requests>,
    idle_timeout: std::time::Duration,
    read_header_timeout: std::time::Duration,
}

impl Front {
    /// `idle_timeout`: how long a connection may wait for its next request (an HTTP/1.1 one
    /// also for the rest of a header) before it is closed (config `idleTimeout`);
    /// `read_header_timeout`: how long a new HTTP/1.1 connection may take to send its first
    /// request's header (config `readHeaderTimeout`, kube's `ReadHeaderTimeout`).
    pub fn new(
        gateway: Arc<Gateway>,
        proxy: HttpProxy<ProxyPhases>,
        upstream: pingora::connectors::http::Connector,
        idle_timeout: std::time::Duration,
        read_header_timeout: std::time::Duration,
    ) -> Self {
        Front {
            idle_timeout,
            read_header_timeout,
            requests: Arc::new(Requests {
                gateway,
                proxy: Arc::new(proxy),
                upstream,
                closing: AtomicBool::new(false),
                closed: std::array::from_fn(|_| Notify::new()),
            }),
        }
    }
}

#[async_trait]
impl ServerApp for Front {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            self.serve_h2(stream, shutdown).await;
            return None;
        }
        // HTTP/1.1 (ALPN http/1.1, no ALPN, or the plain-HTTP loopback listener). Pipelined
        // requests are answered one after the other, as Go's server (and so kube-apiserver)
        // answers them: bytes a session read past its request start the next one, and the
        // record is seeded with them (see `serve`) so that a request they start can still be
        // replayed to the proxy whole.
        let connection = Connection {
            record: Arc::new(HeaderRecord::default()),
            shard: stream.id().unsigned_abs() as usize % CLOSING_SHARDS,
        };
        let stream: Stream = Box::new(RecordingStream {
            inner: stream,
            record: connection.record.clone(),
        });
        let mut session = ServerSession::new_http1(stream);
        session.set_pipelining_enabled(true);
        let idle_timeout = self.idle_timeout;
        let idle_slack = idle_timeout / IDLE_SLACK_DIVISOR;
        session.set_keepalive((!*shutdown.borrow()).then_some(idle_timeout.as_secs().max(1)));
        session.set_keepalive_reuses_remaining(
            self.requests
                .server_options()
                .and_then(|options| options.keepalive_request_limit),
        );
        // pingora bounds only a connection's first wait for a request (later sessions carry
        // "no timeout" over from the request's keep-alive answer). One timer per connection
        // bounds every wait: it is moved on when a wait starts, at most every `idle_slack`, so
        // a connection idle for `idle_timeout` to `idle_timeout + idle_slack` is closed without
        // a timer armed per request (that cost ~3 % of a GET).
        // The first request's header must come within kube's `ReadHeaderTimeout`, as Go's
        // server bounds a new connection's first read: a client that connects and says
        // nothing (or trickles its header) holds the connection that long, not the idle time.
        let idle = tokio::time::sleep(self.read_header_timeout.min(idle_timeout + idle_slack));
        tokio::pin!(idle);
        let mut first = true;
        loop {
            let now = tokio::time::Instant::now();
            if !first && idle.deadline() < now + idle_timeout {
                idle.as_mut().reset(now + idle_timeout + idle_slack);
            }
            first = false;
            let reused = self
                .requests
                .serve(session, shutdown, Some((&connection, idle.as_mut())))
                .await;
            let (stream, settings) = reused?.consume();
            session = ServerSession::new_http1(stream);
            if let Some(settings) = settings {
                settings.apply_to_session(&mut session);
            }
            // Back on after a request the proxy answered: its session had it off (`replay`).
            session.set_pipelining_enabled(true);
        }
    }

    async fn cleanup(&self) {
        self.requests.http_cleanup().await;
    }
}

/// Rejected (malformed) streams that close an HTTP/2 connection, as pingora's own accept loop
/// bounds them.
const MAX_REJECTED_H2_STREAMS: usize = 32;

/// How long an HTTP/2 connection asked to close (after an unauthenticated request) may take to
/// finish its open streams before it is dropped: a client that stops reading (a zero flow
/// control window) cannot keep it, or its streams, open.
const CLOSING_H2_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

impl Front {
    /// An HTTP/2 connection: pingora's accept loop (each stream to `Requests`, a GOAWAY on
    /// shutdown, closed when idle), plus a GOAWAY once a stream asks for the connection to
    /// close (the TLS connection's [`crate::tls::CloseSignal`]: kube's answer to an
    /// unauthenticated or anonymous HTTP/2 request). Streams already open are still answered.
    async fn serve_h2(&self, stream: Stream, shutdown: &ShutdownWatch) {
        use pingora::protocols::http::v2::server::{self as h2_server, H2Accept, HttpSession};
        let ssl_digest = stream.get_ssl_digest();
        let digest = Arc::new(pingora::protocols::Digest {
            ssl_digest: ssl_digest.clone(),
            timing_digest: stream.get_timing_digest(),
            proxy_digest: stream.get_proxy_digest(),
            socket_digest: stream.get_socket_digest(),
        });
        let close_requested = async move {
            match ssl_digest
                .as_ref()
                .and_then(|ssl| ssl.extension.get::<crate::tls::TlsConnection>())
            {
                Some(state) => state.close.requested().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(close_requested);
        let idle_timeout = self
            .requests
            .server_options()
            .and_then(|options| options.h2_idle_timeout);
        // A client that never sends its preface is given the idle timeout, as a connection
        // with no stream open.
        let handshake = h2_server::handshake(stream, self.requests.h2_options());
        let mut conn = match tokio::time::timeout(
            idle_timeout.unwrap_or(self.idle_timeout),
            handshake,
        )
        .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(error)) => {
                tracing::debug!(%error, "HTTP/2 handshake");
                return;
            }
            Err(_) => {
                tracing::debug!("closing an HTTP/2 connection that never sent its preface");
                return;
            }
        };
        let active = Arc::new(ActiveStreams::default());
        let mut shutdown = shutdown.clone();
        let mut closing = false;
        let mut rejected = 0usize;
        // Set when a stream asked for the connection to close: past it, the connection goes.
        let drain = tokio::time::sleep(std::time::Duration::MAX);
        tokio::pin!(drain);
        let mut draining = false;
        loop {
            let accepted = tokio::select! {
                biased;
                _ = shutdown.changed(), if !closing => {
                    conn.graceful_shutdown();
                    closing = true;
                    continue;
                }
                _ = &mut close_requested, if !closing => {
                    conn.graceful_shutdown();
                    closing = true;
                    draining = true;
                    drain.as_mut().reset(tokio::time::Instant::now() + CLOSING_H2_DRAIN);
                    continue;
                }
                _ = &mut drain, if draining => {
                    tracing::debug!("dropping an HTTP/2 connection that did not finish closing");
                    return;
                }
                accepted = HttpSession::from_h2_conn(&mut conn, digest.clone()) => accepted,
                _ = active.idle_for(idle_timeout.unwrap_or_default()), if idle_timeout.is_some() && !closing => {
                    // Idle with nothing in flight: the socket closes now.
                    return;
                }
            };
            match accepted {
                Err(error) => {
                    tracing::debug!(%error, "HTTP/2 connection ended");
                    return;
                }
                Ok(None) => return,
                Ok(Some(H2Accept::Rejected)) => {
                    rejected += 1;
                    if rejected >= MAX_REJECTED_H2_STREAMS {
                        return;
                    }
                }
                Ok(Some(H2Accept::Session(session))) => {
                    let requests = self.requests.clone();
                    let shutdown = shutdown.clone();
                    let guard = active.start();
                    tokio::spawn(async move {
                        let _guard = guard;
                        requests
                            .process_new_http(ServerSession::new_http2(session), &shutdown)
                            .await;
                    });
                }
            }
        }
    }
}

/// The streams an HTTP/2 connection is serving, for its idle timeout.
#[derive(Default)]
struct ActiveStreams {
    count: std::sync::atomic::AtomicUsize,
    idle: Notify,
}

impl ActiveStreams {
    fn start(self: &Arc<Self>) -> ActiveStream {
        self.count.fetch_add(1, Ordering::AcqRel);
        ActiveStream(self.clone())
    }

    /// Resolves once no stream has been in flight for `timeout`.
    async fn idle_for(&self, timeout: std::time::Duration) {
        loop {
            while self.count.load(Ordering::Acquire) > 0 {
                let idle = self.idle.notified();
                if self.count.load(Ordering::Acquire) == 0 {
                    break;
                }
                idle.await;
            }
            tokio::time::sleep(timeout).await;
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
        }
    }
}

/// One stream in flight; done when dropped.
struct ActiveStream(Arc<ActiveStreams>);

impl Drop for ActiveStream {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Serves one request at a time: kubegate's own, or hands it to the proxy.
struct Requests {
    gateway: Arc<Gateway>,
    proxy: Arc<HttpProxy<ProxyPhases>>,
    /// Pooled connections to APIService backends for the requests forwarded here.
    upstream: pingora::connectors::http::Connector,
    /// Set (and every `closed` signalled) when the server shuts down: idle HTTP/1.1
    /// connections stop waiting for another request.
    closing: AtomicBool,
    closed: [Notify; CLOSING_SHARDS],
}

impl Requests {
    /// Reads one request and answers it (or has the proxy answer it); returns the connection
    /// when it may carry another request. `http1` is an HTTP/1.1 connection's state and its
    /// timer for the wait for this request.
    async fn serve(
        self: &Arc<Self>,
        mut session: ServerSession,
        shutdown: &ShutdownWatch,
        http1: Option<(&Connection, Pin<&mut tokio::time::Sleep>)>,
    ) -> Option<ReusedHttpStream> {
        let (connection, idle) = http1.unzip();
        let record = connection.map(|c| c.record.as_ref());
        if let Some(record) = record {
            record.start();
        }
        let idle = async {
            match idle {
                Some(idle) => idle.await,
                None => std::future::pending().await,
            }
        };
        let read = tokio::select! {
            biased;
            read = session.read_request() => read,
            _ = self.closing(connection.map_or(0, |c| c.shard)) => return None,
            _ = idle => {
                tracing::debug!("closing an HTTP/1.1 connection idle for its next request");
                return None;
            }
        };
        match read {
            Ok(true) => {}
            Ok(false) => return None,
            Err(error) => {
                // As pingora's proxy: a malformed header gets a 400, anything else means the
                // connection is broken.
                if matches!(error.etype(), pingora::ErrorType::InvalidHTTPHeader) {
                    if let Err(e) = session.respond_error(400).await {
                        tracing::debug!(error = %e, "writing a 400 for a malformed request");
                    }
                }
                session.shutdown().await;
                return None;
            }
        }
        // What Go's server refuses before any handler runs (request smuggling hardening):
        // answered as it answers, and the connection closed.
        if let Some((code, text)) = framing_refusal(session.req_header()) {
            refuse_request(&mut session, code, &text).await;
            return None;
        }
        let routed = self.gateway.route(session.req_header());
        // CONNECT too goes to the proxy, which refuses it as it always has. A remote request
        // with nothing to stream to the backend is forwarded here (`forward.rs`).
        let remote = routed.as_ref().is_ok_and(|routed| routed.is_remote());
        let forwarded = remote
            && routed
                .as_ref()
                .is_ok_and(|routed| crate::forward::eligible(&mut session, routed.long_running()));
        let for_proxy =
            session.req_header().method == http::Method::CONNECT || (remote && !forwarded);
        if for_proxy {
            let session = match record {
                Some(record) => replay(session, record.take())?,
                None => session,
            };
            return self.proxy.process_new_http(session, shutdown).await;
        }
        if let Some(record) = record {
            record.stop();
        }
        if *shutdown.borrow() {
            session.set_keepalive(None);
        }
        let mut ctx = self.gateway.new_ctx();
        let answered = match self.gateway.answer(&mut session, &mut ctx, routed).await {
            Ok(Some(plan)) => {
                self.gateway
                    .forward(&self.upstream, &mut session, &mut ctx, plan)
                    .await
            }
            Ok(None) => Ok(()),
            Err(error) => Err(error),
        };
        match answered {
            Ok(()) => self.gateway.log_request(&ctx, None),
            Err(error) => {
                tracing::debug!(audit_id = %ctx.audit_id(), %error, "writing a local response");
                if session.response_written().is_none() {
                    ctx.set_status(500);
                    let status = kubegate_backends::status::ApiError::internal(&error);
                    let written = crate::respond::write(
                        &mut session,
                        status.into(),
                        ctx.audit_id(),
                        None,
                        &self.gateway.lifecycle.shutting_down,
                        &mut || {},
                    )
                    .await;
                    if let Err(e) = written {
                        tracing::debug!(error = %e, "writing a 500 for a failed local response");
                    }
                }
                self.gateway.log_request(&ctx, Some(&error));
                return None;
            }
        }
        let mut settings = HttpPersistentSettings::for_session(&session);
        let (stream, pipelined) = session.finish().await.ok().flatten()?.into_parts();
        if let Some(pipelined) = pipelined {
            // The next request starts with these bytes, read before its record starts.
            if let Some(record) = record {
                record.carry(&pipelined);
            }
            settings.set_pipelined_prefix(pipelined);
        }
        Some(ReusedHttpStream::new(stream, Some(settings)))
    }

    /// Resolves once the server is shutting down (`shard`: the connection's `closed`).
    async fn closing(&self, shard: usize) {
        let closed = self.closed[shard % CLOSING_SHARDS].notified();
        if self.closing.load(Ordering::Acquire) {
            return;
        }
        closed.await;
    }
}

/// HTTP/2 streams (already read by pingora's connection handling) come in here.
#[async_trait]
impl HttpServerApp for Requests {
    async fn process_new_http(
        self: &Arc<Self>,
        session: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        self.serve(session, shutdown, None).await
    }

    fn h2_options(&self) -> Option<H2Options> {
        self.proxy.h2_options.clone()
    }

    fn server_options(&self) -> Option<&HttpServerOptions> {
        self.proxy.server_options.as_ref()
    }

    async fn http_cleanup(&self) {
        self.closing.store(true, Ordering::Release);
        for closed in &self.closed {
            closed.notify_waiters();
        }
        self.proxy.http_cleanup().await;
    }
}

/// A fresh HTTP/1.1 session on the same connection that will read `recorded` (the request's
/// header, and any body bytes read with it) before reading on from the connection, with the
/// read session's keep-alive settings. `None` (the connection is closed) if nothing was
/// recorded, which would leave the proxy waiting for a request already read.
///
/// Pipelining is off in it: bytes the proxy's session reads past its request would come back
/// inside the connection's settings, where the next record cannot see them, so a client that
/// pipelines behind such a request (one with a body, or an upgrade) has its connection closed
/// after the answer and sends the rest again, as RFC 9112 §9.3.2 expects of it.
fn replay(session: ServerSession, recorded: BytesMut) -> Option<ServerSession> {
    let keepalive = session.get_keepalive();
    let reuses_remaining = session.get_keepalive_reuses_remaining();
    let ServerSession::H1(read) = session else {
        return Some(session);
    };
    if recorded.is_empty() {
        tracing::error!("an HTTP/1.1 request to hand on was read without being recorded");
        return None;
    }
    let mut fresh = ServerSession::new_http1(read.into_inner());
    fresh.set_keepalive(keepalive);
    fresh.set_keepalive_reuses_remaining(reuses_remaining);
    fresh.set_pipelined_prefix(recorded);
    fresh.set_pipelining_enabled(false);
    Some(fresh)
}

/// The bytes an HTTP/1.1 connection read while recording (from the start of a request until
/// it is routed). Never shared between connections.
#[derive(Default)]
struct HeaderRecord {
    on: AtomicBool,
    /// `bytes` holds the start of the next request, carried over from the last one.
    carried: AtomicBool,
    bytes: Mutex<BytesMut>,
}

/// A connection keeps at most this much recording buffer between requests: a client that
/// once sent a huge header does not pin that much memory for as long as it stays connected.
const RETAINED_RECORD_BYTES: usize = 16 * 1024;

impl HeaderRecord {
    fn start(&self) {
        // A load first: the usual answer, false, then costs no locked instruction.
        if self.carried.load(Ordering::Relaxed) {
            self.carried.store(false, Ordering::Relaxed);
        } else {
            self.forget();
        }
        self.on.store(true, Ordering::Relaxed);
    }

    /// Makes `pipelined`, bytes the last request's session read past its end, the start of
    /// the next request's record.
    fn carry(&self, pipelined: &[u8]) {
        let mut bytes = self.bytes();
        bytes.clear();
        bytes.extend_from_slice(pipelined);
        self.carried.store(true, Ordering::Relaxed);
    }

    /// Stops recording and forgets what was recorded (the request is kubegate's own).
    fn stop(&self) {
        self.on.store(false, Ordering::Relaxed);
        self.forget();
    }

    fn forget(&self) {
        let mut bytes = self.bytes();
        if bytes.capacity() > RETAINED_RECORD_BYTES {
            *bytes = BytesMut::new();
        }
        bytes.clear();
    }

    /// The buffer; a panic elsewhere while it was locked leaves nothing half-done in it that
    /// matters (the next `start` clears it), so a poisoned lock is taken as it is.
    fn bytes(&self) -> std::sync::MutexGuard<'_, BytesMut> {
        self.bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops recording and hands over what was recorded.
    fn take(&self) -> BytesMut {
        self.on.store(false, Ordering::Relaxed);
        // The whole buffer goes (not a split of it, which would keep the allocation shared
        // with what the proxy holds, out of reach of `forget`'s size check).
        std::mem::take(&mut *self.bytes())
    }

    fn append(&self, read: &[u8]) {
        if read.is_empty() || !self.on.load(Ordering::Relaxed) {
            return;
        }
        self.bytes().extend_from_slice(read);
    }
}

/// A connection that copies what it reads into its [`HeaderRecord`] while recording; every
/// other call goes straight through.
#[derive(Debug)]
struct RecordingStream {
    inner: Stream,
    record: Arc<HeaderRecord>,
}

impl std::fmt::Debug for HeaderRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderRecord")
            .field("on", &self.on.load(Ordering::Relaxed))
            .finish()
    }
}

impl AsyncRead for RecordingStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut *self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.record.append(&buf.filled()[before..]);
        }
        polled
    }
}

impl AsyncWrite for RecordingStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut *self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut *self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for RecordingStream {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for RecordingStream {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for RecordingStream {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora::protocols::tls::SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for RecordingStream {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> std::time::Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> std::time::Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for RecordingStream {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: pingora::protocols::raw_connect::ProxyDigest) {
        self.inner.set_proxy_digest(digest)
    }
}

impl GetSocketDigest for RecordingStream {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, socket_digest: SocketDigest) {
        self.inner.set_socket_digest(socket_digest)
    }
}

#[async_trait]
impl Peek for RecordingStream {
    async fn try_peek(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_only_what_was_read_while_recording() {
        let record = HeaderRecord::default();
        record.append(b"before ");
        record.start();
        record.append(b"GET / HTTP/1.1\r\n");
        record.append(b"");
        record.append(b"Host: x\r\n\r\nbody");
        assert_eq!(&record.take()[..], b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody");
        // Taking stops the recording: the proxy's own reads are not copied.
        record.append(b"after");
        assert!(record.take().is_empty());
    }

    #[test]
    fn a_stopped_record_forgets_and_restarts_empty() {
        let record = HeaderRecord::default();
        record.start();
        record.append(b"GET /api HTTP/1.1\r\n\r\n");
        record.stop();
        record.append(b"next");
        assert!(record.take().is_empty());
        record.start();
        record.append(b"second");
        assert_eq!(&record.take()[..], b"second");
    }

    #[test]
    fn a_huge_header_does_not_stay_allocated() {
        let record = HeaderRecord::default();
        record.start();
        record.append(&vec![b'x'; 4 * RETAINED_RECORD_BYTES]);
        record.stop();
        record.start();
        let kept = record
            .bytes
            .lock()
            .map(|b| b.capacity())
            .unwrap_or(usize::MAX);
        assert!(kept <= RETAINED_RECORD_BYTES, "{kept} bytes kept");
    }
}

/// What Go's HTTP/1.1 server refuses while reading a request, before kube-apiserver's
/// handlers see it: a `Content-Length` that is not one plain number (several that differ,
/// `2, 2`, `+2`), a `Transfer-Encoding` other than a single `chunked`, and a request without
/// `Host`. Pingora reads such bodies its own way, but a backend the request is forwarded to
/// might read them another: they are refused, as Go refuses them.
fn framing_refusal(header: &pingora::http::RequestHeader) -> Option<(u16, String)> {
    let lengths: Vec<&[u8]> = header
        .headers
        .get_all(http::header::CONTENT_LENGTH)
        .iter()
        .map(|v| v.as_bytes().trim_ascii())
        .collect();
    if let Some(first) = lengths.first() {
        if lengths.iter().any(|l| l != first) {
            let all: Vec<String> = lengths
                .iter()
                .map(|l| kubegate_policy::quote::go_quote(&String::from_utf8_lossy(l)))
                .collect();
            return Some((
                400,
                format!(
                    "http: message cannot contain multiple Content-Length headers; got [{}]",
                    all.join(" ")
                ),
            ));
        }
    }
    let encodings: Vec<&http::HeaderValue> = header
        .headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .collect();
    let chunked = match encodings.as_slice() {
        [] => false,
        [one] if one.as_bytes().trim_ascii().eq_ignore_ascii_case(b"chunked") => true,
        // Go does not echo the value back.
        _ => return Some((501, String::new())),
    };
    // A chunked body's Content-Length is dropped unread (Go's `fixLength`); an empty one is
    // none; any other must be a decimal that fits 63 bits.
    if let Some(first) = lengths.first().filter(|l| !chunked && !l.is_empty()) {
        let valid = first.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(first)
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
                .is_some_and(|n| n < 1 << 63);
        if !valid {
            return Some((
                400,
                format!(
                    "bad Content-Length {}",
                    kubegate_policy::quote::go_quote(&String::from_utf8_lossy(first))
                ),
            ));
        }
    }
    if header.version == http::Version::HTTP_11 && !header.headers.contains_key(http::header::HOST)
    {
        return Some((400, "missing required Host header".into()));
    }
    None
}

/// Writes Go's answer to a request it refuses while reading it (`400 Bad Request: <why>`, or
/// `Unsupported transfer encoding` for a 501), plain text, and closes the connection.
async fn refuse_request(session: &mut ServerSession, code: u16, why: &str) {
    let body = match code {
        501 => "Unsupported transfer encoding".to_string(),
        _ => format!("400 Bad Request: {why}"),
    };
    let answer = async {
        let mut header = pingora::http::ResponseHeader::build(code, Some(3))?;
        header.insert_header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")?;
        header.insert_header(http::header::CONNECTION, "close")?;
        header.insert_header(http::header::CONTENT_LENGTH, body.len())?;
        session.set_keepalive(None);
        session.write_response_header(Box::new(header)).await?;
        session.write_response_body(body.into(), true).await
    };
    if let Err(e) = answer.await {
        tracing::debug!(error = %e, "refusing a malformed request");
    }
    session.shutdown().await;
}

#[cfg(test)]
mod framing_tests {
    use super::framing_refusal;

    fn request(headers: &[(&str, &str)]) -> pingora::http::RequestHeader {
        let mut header =
            pingora::http::RequestHeader::build("POST", b"/api/v1", None).expect("header");
        for (name, value) in headers {
            header
                .append_header(name.to_string(), *value)
                .expect("header");
        }
        header
    }

    #[test]
    fn what_gos_server_refuses_while_reading_is_refused() {
        let host = ("Host", "kubegate");
        assert_eq!(
            framing_refusal(&request(&[host, ("Content-Length", "2")])),
            None
        );
        assert_eq!(
            framing_refusal(&request(&[host, ("Content-Length", "2, 2")])),
            Some((400, "bad Content-Length \"2, 2\"".into()))
        );
        assert_eq!(
            framing_refusal(&request(&[host, ("Content-Length", "+2")])),
            Some((400, "bad Content-Length \"+2\"".into()))
        );
        assert_eq!(
            framing_refusal(&request(&[
                host,
                ("Content-Length", "2"),
                ("Content-Length", "3")
            ])),
            Some((
                400,
                "http: message cannot contain multiple Content-Length headers; got [\"2\" \"3\"]"
                    .into()
            ))
        );
        // The same length twice is one.
        assert_eq!(
            framing_refusal(&request(&[
                host,
                ("Content-Length", "2"),
                ("Content-Length", "2")
            ])),
            None
        );
        assert_eq!(
            framing_refusal(&request(&[host, ("Transfer-Encoding", "chunked")])),
            None
        );
        // A chunked body's length is dropped unread; an empty length is none; 2^63 overflows.
        assert_eq!(
            framing_refusal(&request(&[
                host,
                ("Transfer-Encoding", "chunked"),
                ("Content-Length", "abc")
            ])),
            None
        );
        assert_eq!(
            framing_refusal(&request(&[host, ("Content-Length", "")])),
            None
        );
        assert_eq!(
            framing_refusal(&request(&[host, ("Content-Length", "9223372036854775808")]))
                .map(|r| r.0),
            Some(400)
        );
        assert_eq!(
            framing_refusal(&request(&[host, ("Transfer-Encoding", "Chunked")])),
            None
        );
        for te in [
            vec!["identity, chunked"],
            vec!["chunked", "chunked"],
            vec!["gzip"],
        ] {
            let headers: Vec<(&str, &str)> = std::iter::once(host)
                .chain(te.iter().map(|v| ("Transfer-Encoding", *v)))
                .collect();
            assert_eq!(
                framing_refusal(&request(&headers)).map(|r| r.0),
                Some(501),
                "{te:?}"
            );
        }
        assert_eq!(
            framing_refusal(&request(&[])),
            Some((400, "missing required Host header".into()))
        );
    }
}

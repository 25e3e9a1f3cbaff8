//! Writing a local backend's [`ApiResponse`] to the pingora session: complete bodies with
//! kube's standard headers, and watch streams frame by frame until the backend ends them,
//! the client goes away, or the server shuts down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use kubegate_backends::api::{ApiResponse, Body, Encoding, WatchStream};
use kubegate_backends::machinery::pretty;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::protocols::http::ServerSession;

use crate::compression;
use crate::flowcontrol::PfHeaders;

/// How often a quiet watch checks whether the server is shutting down.
const SHUTDOWN_POLL: Duration = Duration::from_millis(500);

/// kube's `Audit-Id` response header.
pub(crate) const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");
const X_CONTENT_TYPE_OPTIONS: HeaderName = HeaderName::from_static("x-content-type-options");

/// The headers pingora adds to an HTTP/1.1 answer (`Date`, `Connection`): room is made for
/// them too, so the map never grows (a reallocation and a rehash) on its way out.
const ADDED_BY_PINGORA: usize = 2;

/// The response header of a local answer, built as a plain `http` header map and handed to
/// pingora without its case-preserving name map: every name is a constant (or parsed once, for
/// a backend's extra headers) and every fixed value static, so nothing is parsed twice or
/// copied per request. On HTTP/1.1 pingora writes the standard names title-cased and the
/// others lower-case (header names are case-insensitive; HTTP/2 sends them all lower-case).
/// `framing` (`Content-Length`, or `Transfer-Encoding` for a stream) goes last.
fn base_header(
    status: u16,
    content_type: &str,
    audit_id: &str,
    extra: &[(String, String)],
    pf: Option<&PfHeaders>,
    framing: Option<(HeaderName, HeaderValue)>,
) -> Result<ResponseHeader> {
    let mut parts = http::Response::new(()).into_parts().0;
    parts.status = http::StatusCode::from_u16(status).or_err(
        pingora::ErrorType::InvalidHTTPHeader,
        "invalid status of a local response",
    )?;
    let headers = &mut parts.headers;
    // Content-Type, Audit-Id, Cache-Control, X-Content-Type-Options and the framing header.
    const FIXED: usize = 5;
    let pf_count = if pf.is_some() { 2 } else { 0 };
    headers.reserve(FIXED + extra.len() + pf_count + ADDED_BY_PINGORA);
    // An empty type is a bodiless answer that names none (kube-openapi's bare 406).
    if !content_type.is_empty() {
        headers.insert(
            http::header::CONTENT_TYPE,
            content_type_value(content_type)?,
        );
    }
    headers.insert(AUDIT_ID, header_value(audit_id)?);
    if !extra
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
    {
        headers.insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
    }
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    for (name, value) in extra {
        let name = HeaderName::from_bytes(name.as_bytes()).or_err(
            pingora::ErrorType::InvalidHTTPHeader,
            "invalid header name of a local response",
        )?;
        headers.append(name, header_value(value)?);
    }
    if let Some(pf) = pf {
        for (name, value) in pf.pairs() {
            headers.append(name, value.clone());
        }
    }
    if let Some((name, value)) = framing {
        headers.insert(name, value);
    }
    Ok(ResponseHeader::from(parts))
}

fn header_value(value: &str) -> Result<HeaderValue> {
    HeaderValue::from_str(value).or_err(
        pingora::ErrorType::InvalidHTTPHeader,
        "invalid header value of a local response",
    )
}

/// The `Content-Type` value, without a copy for the types kubegate answers with most.
fn content_type_value(content_type: &str) -> Result<HeaderValue> {
    const COMMON: [&str; 4] = [
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
        "text/plain; charset=utf-8",
    ];
    match COMMON.iter().find(|common| **common == content_type) {
        Some(common) => Ok(HeaderValue::from_static(common)),
        None => HeaderValue::from_str(content_type).or_err(
            pingora::ErrorType::InvalidHTTPHeader,
            "invalid Content-Type of a local response",
        ),
    }
}

/// Writes the response, complete or streamed. `initialized` is called once a watch's
/// initial events are written (the frames its producer queued before the stream started).
pub async fn write(
    session: &mut ServerSession,
    response: ApiResponse,
    audit_id: &str,
    pf: Option<&PfHeaders>,
    shutting_down: &AtomicBool,
    initialized: &mut (dyn FnMut() + Send),
) -> Result<()> {
    match response {
        ApiResponse::Body(body) => write_body(session, body, audit_id, pf).await,
        ApiResponse::Watch(watch) => {
            write_watch(session, watch, audit_id, pf, shutting_down, initialized).await
        }
    }
}

async fn write_body(
    session: &mut ServerSession,
    mut body: Body,
    audit_id: &str,
    pf: Option<&PfHeaders>,
) -> Result<()> {
    if body.encoding != Encoding::Fixed {
        let request = session.req_header();
        let pretty = pretty::requested(
            request.uri.query(),
            request
                .headers
                .get(http::header::USER_AGENT)
                .map(HeaderValue::as_bytes),
        );
        let accept = request
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        body.finish_encoding(accept, pretty);
    }
    let encoding = compression::choose(
        &body,
        session
            .req_header()
            .headers
            .get(http::header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    if encoding != compression::Encoding::Identity {
        let parts = std::iter::once(std::mem::take(&mut body.body))
            .chain(std::mem::take(&mut body.more))
            .collect();
        body.body = compression::compress(&encoding, parts)
            .await
            .or_err(pingora::ErrorType::InternalError, "compressing a response")?;
        body.headers
            .push(("Content-Encoding".into(), "gzip".into()));
        body.headers.push(("Vary".into(), "Accept-Encoding".into()));
    }
    let length = body.len();
    let header = base_header(
        body.status,
        &body.content_type,
        audit_id,
        &body.headers,
        pf,
        Some((http::header::CONTENT_LENGTH, HeaderValue::from(length))),
    )?;
    let head_only = session.req_header().method == http::Method::HEAD;
    session.write_response_header(Box::new(header)).await?;
    if head_only || length == 0 {
        return Ok(());
    }
    if body.more.is_empty() {
        return session.write_response_body(body.body, true).await;
    }
    // A body in parts (a LIST: each item's cached bytes and a separator) goes out in chunks of
    // about CHUNK bytes: one write per part would cost a write call (and, on HTTP/2, a frame)
    // for every comma, while copying the whole body first is the memory this avoids.
    let mut chunk = bytes::BytesMut::new();
    for part in std::iter::once(body.body).chain(body.more) {
        if chunk.len() + part.len() > CHUNK && !chunk.is_empty() {
            session
                .write_response_body(chunk.split().freeze(), false)
                .await?;
        }
        if part.len() >= CHUNK {
            // Big enough to go out as it is.
            session.write_response_body(part, false).await?;
            continue;
        }
        if chunk.capacity() == 0 {
            chunk.reserve(CHUNK);
        }
        chunk.extend_from_slice(&part);
    }
    session.write_response_body(chunk.freeze(), true).await
}

/// How much of a body in parts is copied together into one write.
const CHUNK: usize = 64 * 1024;

async fn write_watch(
    session: &mut ServerSession,
    mut watch: WatchStream,
    audit_id: &str,
    pf: Option<&PfHeaders>,
    shutting_down: &AtomicBool,
    initialized: &mut (dyn FnMut() + Send),
) -> Result<()> {
    // A WebSocket watch (HTTP/1.1 only, as with kube): the same events, one message each.
    let upgrade = if session.is_http2() {
        None
    } else {
        crate::websocket::handshake(&session.req_header().headers)
    };
    let binary = watch.content_type.contains("protobuf");
    let framed = |frame: bytes::Bytes| match &upgrade {
        Some(_) => crate::websocket::message(&frame, binary),
        None => frame,
    };
    let header = match &upgrade {
        Some(handshake) => websocket_header(handshake)?,
        None => {
            let framing = (!session.is_http2()).then(|| {
                (
                    http::header::TRANSFER_ENCODING,
                    HeaderValue::from_static("chunked"),
                )
            });
            base_header(
                200,
                &watch.content_type,
                audit_id,
                &watch.headers,
                pf,
                framing,
            )?
        }
    };
    session.write_response_header(Box::new(header)).await?;
    let end = match &upgrade {
        Some(_) => crate::websocket::close(),
        None => bytes::Bytes::new(),
    };
    // The initial events: whatever the producer has queued by now.
    loop {
        match watch.frames.try_recv() {
            Ok(frame) => session.write_response_body(framed(frame), false).await?,
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                initialized();
                return session.write_response_body(end, true).await;
            }
        }
    }
    initialized();
    let mut poll = tokio::time::interval(SHUTDOWN_POLL);
    loop {
        let event = tokio::select! {
            frame = watch.frames.recv() => match frame {
                Some(frame) => WatchStep::Frame(frame),
                None => WatchStep::End,
            },
            // A client that goes away ends the watch at once, so a quiet collection does not
            // keep its producer task and cache watcher alive until the watch times out.
            _ = client_gone(session, upgrade.is_some()) => WatchStep::ClientGone,
            _ = poll.tick() => WatchStep::Tick,
        };
        match event {
            WatchStep::Frame(frame) => session.write_response_body(framed(frame), false).await?,
            WatchStep::End => break,
            WatchStep::ClientGone => return Ok(()),
            WatchStep::Tick => {
                if shutting_down.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
    }
    session.write_response_body(end, true).await
}

/// kube's `101 Switching Protocols` for a WebSocket watch: only the upgrade's own headers
/// (x/net/websocket writes them on the hijacked connection).
fn websocket_header(handshake: &crate::websocket::Handshake) -> Result<ResponseHeader> {
    let mut parts = http::Response::new(()).into_parts().0;
    parts.status = http::StatusCode::SWITCHING_PROTOCOLS;
    let headers = &mut parts.headers;
    headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    headers.insert(
        http::header::SEC_WEBSOCKET_ACCEPT,
        header_value(&handshake.accept)?,
    );
    if let Some(protocol) = &handshake.protocol {
        headers.insert(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            header_value(protocol)?,
        );
    }
    Ok(ResponseHeader::from(parts))
}

/// What woke the watch loop.
enum WatchStep {
    Frame(bytes::Bytes),
    End,
    ClientGone,
    Tick,
}

/// Resolves when the client closes the connection (HTTP/1.1) or resets the stream (HTTP/2).
/// On an upgraded (WebSocket) connection what the client sends is read and ignored, as kube
/// ignores it, until the connection closes.
pub(crate) async fn client_gone(downstream: &mut ServerSession, upgraded: bool) {
    if downstream.is_http2() {
        match downstream.watch_h2_stream_close() {
            Some(idle) => {
                let _ = idle.await;
            }
            None => std::future::pending::<()>().await,
        }
    } else if upgraded {
        while let Ok(Some(_)) = downstream.read_body_or_idle(false).await {}
    } else {
        // The request body is finished; any read result now means the peer closed or broke
        // the connection.
        let _ = downstream.read_body_or_idle(true).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubegate_policy::flowcontrol::Matched;

    fn wire(header: &ResponseHeader) -> String {
        let mut buf = bytes::BytesMut::new();
        header.header_to_h1_wire(&mut buf);
        String::from_utf8(buf.to_vec()).expect("utf-8")
    }

    #[test]
    fn local_response_headers_are_kubes_and_written_once() {
        let matched = Matched {
            flow_schema: "global-default".into(),
            flow_schema_uid: "fs-uid-1".into(),
            priority_level: "global-default".into(),
            priority_level_uid: "pl-uid-2".into(),
            attachment: Default::default(),
        };
        let pf = PfHeaders::new(&matched);
        let extra = vec![
            ("Warning".to_string(), "299 - \"unknown field\"".to_string()),
            ("Warning".to_string(), "299 - \"another\"".to_string()),
        ];
        let length = Some((http::header::CONTENT_LENGTH, HeaderValue::from(17)));
        let header = base_header(
            201,
            "application/json",
            "audit-42",
            &extra,
            Some(&pf),
            length,
        )
        .expect("header");
        assert_eq!(header.status.as_u16(), 201);
        let text = wire(&header);
        let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(
            lines,
            [
                "Content-Type: application/json",
                "audit-id: audit-42",
                "Cache-Control: no-cache, private",
                "x-content-type-options: nosniff",
                "warning: 299 - \"unknown field\"",
                "warning: 299 - \"another\"",
                "x-kubernetes-pf-flowschema-uid: fs-uid-1",
                "x-kubernetes-pf-prioritylevel-uid: pl-uid-2",
                "Content-Length: 17",
            ]
        );
    }

    #[test]
    fn a_backend_cache_control_replaces_the_default_and_bad_headers_are_errors() {
        let extra = vec![("Cache-Control".to_string(), "public".to_string())];
        let header =
            base_header(200, "text/plain; charset=utf-8", "a", &extra, None, None).expect("header");
        let cache: Vec<_> = header
            .headers
            .get_all(http::header::CACHE_CONTROL)
            .iter()
            .collect();
        assert_eq!(cache, ["public"]);
        assert!(header.headers.get(FLOW_SCHEMA_UID).is_none());

        let bad_name = vec![("bad name".to_string(), "x".to_string())];
        assert!(base_header(200, "application/json", "a", &bad_name, None, None).is_err());
        let bad_value = vec![("x-ok".to_string(), "line\nbreak".to_string())];
        assert!(base_header(200, "application/json", "a", &bad_value, None, None).is_err());
        assert!(base_header(200, "application/json", "bad\r\nid", &[], None, None).is_err());
        assert!(base_header(1000, "application/json", "a", &[], None, None).is_err());
    }

    const FLOW_SCHEMA_UID: HeaderName = crate::flowcontrol::FLOW_SCHEMA_UID_HEADER;
}

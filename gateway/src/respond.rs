//! Writing a local backend's [`ApiResponse`] to the pingora session: complete bodies with
//! kube's standard headers, and watch streams frame by frame until the backend ends them,
//! the client goes away, or the server shuts down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kubegate_backends::api::{ApiResponse, Body, WatchStream};
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::Session;

/// How often a quiet watch checks whether the server is shutting down.
const SHUTDOWN_POLL: Duration = Duration::from_millis(500);

fn base_header(
    status: u16,
    content_type: &str,
    audit_id: &str,
    extra: &[(String, String)],
) -> Result<ResponseHeader> {
    let mut header = ResponseHeader::build(status, Some(6))?;
    header.insert_header("Content-Type", content_type)?;
    header.insert_header("Audit-Id", audit_id)?;
    if !extra
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
    {
        header.insert_header("Cache-Control", "no-cache, private")?;
    }
    header.insert_header("X-Content-Type-Options", "nosniff")?;
    for (name, value) in extra {
        header.append_header(name.clone(), value.as_str())?;
    }
    Ok(header)
}

/// Writes the response, complete or streamed.
pub async fn write(
    session: &mut Session,
    response: ApiResponse,
    audit_id: &str,
    shutting_down: &AtomicBool,
) -> Result<()> {
    match response {
        ApiResponse::Body(body) => write_body(session, body, audit_id).await,
        ApiResponse::Watch(watch) => write_watch(session, watch, audit_id, shutting_down).await,
    }
}

async fn write_body(session: &mut Session, body: Body, audit_id: &str) -> Result<()> {
    let mut header = base_header(body.status, &body.content_type, audit_id, &body.headers)?;
    header.insert_header("Content-Length", body.body.len().to_string())?;
    let head_only = session.req_header().method == http::Method::HEAD;
    session
        .write_response_header(Box::new(header), head_only || body.body.is_empty())
        .await?;
    if !head_only && !body.body.is_empty() {
        session.write_response_body(Some(body.body), true).await?;
    }
    Ok(())
}

async fn write_watch(
    session: &mut Session,
    mut watch: WatchStream,
    audit_id: &str,
    shutting_down: &AtomicBool,
) -> Result<()> {
    let mut header = base_header(200, &watch.content_type, audit_id, &watch.headers)?;
    if !session.is_http2() {
        header.insert_header("Transfer-Encoding", "chunked")?;
    }
    session
        .write_response_header(Box::new(header), false)
        .await?;
    let mut poll = tokio::time::interval(SHUTDOWN_POLL);
    loop {
        tokio::select! {
            frame = watch.frames.recv() => {
                match frame {
                    Some(frame) => session.write_response_body(Some(frame), false).await?,
                    None => break,
                }
            }
            _ = poll.tick() => {
                if shutting_down.load(Ordering::Relaxed) || session.is_process_shutting_down() {
                    break;
                }
            }
        }
    }
    session.write_response_body(None, true).await
}

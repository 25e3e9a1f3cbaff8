//! The local-response interface between the gateway and in-process backends: an
//! [`ApiRequest`] (what the pipeline resolved about one HTTP request, plus its body) goes in,
//! an [`ApiResponse`] (a complete body, or a stream of watch frames) comes out. Keeping
//! pingora out of this interface lets backends be tested without a server.

use std::sync::Arc;

use bytes::Bytes;
use kubegate_policy::{RequestInfo, UserInfo};

use crate::status::ApiError;

/// One request for a local backend.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    /// Upper-case HTTP method.
    pub method: String,
    /// Shared with the pipeline, which keeps it for logging and metrics after the request
    /// is handed over.
    pub info: Arc<RequestInfo>,
    /// Decoded query parameters, in order.
    pub query: Vec<(String, String)>,
    pub content_type: Option<String>,
    /// Whether the request has a `Content-Length` header (go-restful tells a write without a
    /// body by the header; see `machinery::restful`).
    pub content_length_sent: bool,
    pub accept: Option<String>,
    /// `User-Agent`: names the field manager of writes that do not name one.
    pub user_agent: Option<String>,
    /// `If-None-Match`, for documents served with an ETag (discovery, OpenAPI).
    pub if_none_match: Option<String>,
    pub body: Bytes,
    /// The identity after authentication and impersonation, shared with the stages before
    /// (a cached credential's user is not copied per request).
    pub user: Arc<UserInfo>,
}

impl ApiRequest {
    /// The first value of a query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean query parameter (`true`/`1`), as kube parses them.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true") | Some("1"))
    }
}

/// A complete response body.
#[derive(Debug, Clone)]
pub struct Body {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    /// The body, or its first part when `more` is not empty.
    pub body: Bytes,
    /// The rest of the body, in order. A LIST is answered as its items' cached bytes and the
    /// separators between them, written out a piece at a time, rather than copied into one
    /// buffer first: answering 10,000 objects then costs no second copy of them in memory
    /// (kube streams its JSON list encoding for the same reason).
    pub more: Vec<Bytes>,
}

impl Body {
    /// The body's length in bytes, all parts together.
    pub fn len(&self) -> usize {
        self.body.len() + self.more.iter().map(Bytes::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole body in one buffer (a copy only when it is in parts).
    pub fn bytes(&self) -> Bytes {
        if self.more.is_empty() {
            return self.body.clone();
        }
        let mut all = Vec::with_capacity(self.len());
        all.extend_from_slice(&self.body);
        for part in &self.more {
            all.extend_from_slice(part);
        }
        all.into()
    }
}

/// A watch: the response headers, then frames until the stream ends.
pub struct WatchStream {
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    /// Each item is one encoded frame (a JSON watch event and a newline).
    pub frames: tokio::sync::mpsc::Receiver<Bytes>,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream")
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

/// What a local backend answers.
#[derive(Debug)]
pub enum ApiResponse {
    Body(Body),
    Watch(WatchStream),
}

impl ApiResponse {
    /// A JSON body with a status code.
    pub fn json(status: u16, body: impl Into<Bytes>) -> Self {
        ApiResponse::Body(Body {
            status,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.into(),
            more: Vec::new(),
        })
    }

    /// A JSON body made of parts (see [`Body::more`]).
    pub fn json_parts(status: u16, mut parts: Vec<Bytes>) -> Self {
        let body = if parts.is_empty() {
            Bytes::new()
        } else {
            parts.remove(0)
        };
        ApiResponse::Body(Body {
            status,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body,
            more: parts,
        })
    }

    /// Any content type.
    pub fn with_type(status: u16, content_type: &str, body: impl Into<Bytes>) -> Self {
        ApiResponse::Body(Body {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into(),
            more: Vec::new(),
        })
    }

    /// A `Status` error body.
    pub fn error(error: &ApiError) -> Self {
        let mut body = Body {
            status: error.code,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: Bytes::from(error.to_body()),
            more: Vec::new(),
        };
        if let Some(retry) = error.details.as_ref().and_then(|d| d.retry_after_seconds) {
            body.headers.push(("Retry-After".into(), retry.to_string()));
        }
        ApiResponse::Body(body)
    }

    /// Adds a header (e.g. `Warning`) to a body or watch response.
    pub fn with_header(mut self, name: &str, value: String) -> Self {
        match &mut self {
            ApiResponse::Body(b) => b.headers.push((name.into(), value)),
            ApiResponse::Watch(w) => w.headers.push((name.into(), value)),
        }
        self
    }

    pub fn status(&self) -> u16 {
        match self {
            ApiResponse::Body(b) => b.status,
            ApiResponse::Watch(_) => 200,
        }
    }
}

impl From<ApiError> for ApiResponse {
    fn from(e: ApiError) -> Self {
        ApiResponse::error(&e)
    }
}

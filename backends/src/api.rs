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

    /// A boolean query parameter as kube decodes one (`Convert_Slice_string_To_bool`): absent,
    /// `0` and `false` (in any case) are false; anything else, the empty value too, is true.
    pub fn flag(&self, name: &str) -> bool {
        self.optional_flag(name).unwrap_or(false)
    }

    /// [`ApiRequest::flag`] for a parameter whose absence means something (`*bool`).
    pub fn optional_flag(&self, name: &str) -> Option<bool> {
        self.param(name)
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }

    /// An integer query parameter as kube decodes one (`strconv.ParseInt`): `None` when
    /// absent, a 400 with Go's message when it is not a 64-bit integer (the empty value too).
    pub fn int_param(&self, name: &str) -> crate::status::ApiResult<Option<i64>> {
        let Some(value) = self.param(name) else {
            return Ok(None);
        };
        let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(crate::status::ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {}: invalid syntax",
                kubegate_policy::quote::go_quote(value)
            )));
        }
        value.parse::<i64>().map(Some).map_err(|_| {
            crate::status::ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {}: value out of range",
                kubegate_policy::quote::go_quote(value)
            ))
        })
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
    /// What is left to decide about the body's encoding when it is written.
    pub encoding: Encoding,
}

/// What writing a [`Body`] may still change about its encoding: what kube's
/// `WriteObjectNegotiated` decides from the request at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Written as it is (documents kube serves as they are: OpenAPI, health, metrics).
    #[default]
    Fixed,
    /// An API object in the media type the handler negotiated: JSON is indented when the
    /// request asks for it ([`crate::machinery::pretty`]).
    Negotiated,
    /// An error `Status` in JSON: it is encoded as the request's `Accept` asks (JSON, YAML or
    /// protobuf), or, when nothing there can be served, as indented JSON with its own code
    /// (kube's `WriteRawJSON`).
    Status,
}

impl Body {
    /// Finishes the body's encoding for a request with `accept` that asks for indented JSON
    /// or not (`pretty`, apart from the `pretty=1` media type parameter, which is read here).
    pub fn finish_encoding(&mut self, accept: Option<&str>, pretty: bool) {
        match self.encoding {
            Encoding::Fixed => {}
            Encoding::Negotiated => {
                let json = self.content_type.starts_with("application/json");
                if json && (pretty || asks_pretty(accept)) && !self.is_empty() {
                    self.replace(crate::machinery::pretty::indent(&self.bytes()));
                }
            }
            Encoding::Status => self.encode_status(accept, pretty),
        }
        self.encoding = Encoding::Fixed;
    }

    /// [`Encoding::Status`]: the `Status` in the media type `accept` asks for, as kube's
    /// `ErrorNegotiated` writes it.
    fn encode_status(&mut self, accept: Option<&str>, pretty: bool) {
        use crate::machinery::negotiation::{negotiate_plain_output, MediaType};
        let negotiated = match negotiate_plain_output(accept) {
            Ok(negotiated) => negotiated,
            Err(_) => {
                // kube's `WriteRawJSON`: the error itself, indented, whatever was asked for.
                self.content_type = "application/json".into();
                self.replace(crate::machinery::pretty::indent(&self.bytes()));
                return;
            }
        };
        match negotiated.media {
            MediaType::Json => {
                if pretty || negotiated.pretty {
                    self.replace(crate::machinery::pretty::indent(&self.bytes()));
                }
            }
            _ => {
                let Ok(status) = serde_json::from_slice::<serde_json::Value>(&self.bytes()) else {
                    return;
                };
                // Encoded as the registry encodes objects; a Status always encodes, and were
                // it ever not to, the JSON goes out as it is.
                let encoded =
                    crate::registry::encode::json_value_response(self.status, &status, &negotiated);
                if let Ok(ApiResponse::Body(encoded)) = encoded {
                    self.content_type = encoded.content_type;
                    self.body = encoded.body;
                    self.more.clear();
                }
            }
        }
    }

    fn replace(&mut self, body: Vec<u8>) {
        self.body = body.into();
        self.more.clear();
    }

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

/// Whether an `Accept` header's clause may carry `pretty=1` (then negotiated again to see
/// whether the chosen clause does). Nearly every `Accept` has no such parameter.
fn asks_pretty(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| accept.contains("pretty"))
        && crate::machinery::negotiation::negotiate_output(accept, true, || true)
            .is_ok_and(|n| n.pretty)
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
            encoding: Encoding::Fixed,
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
            encoding: Encoding::Fixed,
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
            encoding: Encoding::Fixed,
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
            encoding: Encoding::Status,
        };
        if let Some(retry) = error.details.as_ref().and_then(|d| d.retry_after_seconds) {
            body.headers.push(("Retry-After".into(), retry.to_string()));
        }
        ApiResponse::Body(body)
    }

    /// Marks a body as an API object in its negotiated media type ([`Encoding::Negotiated`]);
    /// an error `Status` stays one.
    pub fn negotiated(mut self) -> Self {
        if let ApiResponse::Body(body) = &mut self {
            if body.encoding == Encoding::Fixed {
                body.encoding = Encoding::Negotiated;
            }
        }
        self
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::GroupResource;

    fn not_found() -> Body {
        match ApiResponse::error(&ApiError::not_found(
            &GroupResource::new("", "configmaps"),
            "x",
        )) {
            ApiResponse::Body(body) => body,
            ApiResponse::Watch(_) => unreachable!("an error is a body"),
        }
    }

    fn finished(mut body: Body, accept: Option<&str>, pretty: bool) -> Body {
        body.finish_encoding(accept, pretty);
        assert_eq!(body.encoding, Encoding::Fixed);
        body
    }

    fn with_query(query: &str) -> ApiRequest {
        ApiRequest {
            method: "GET".into(),
            info: Arc::new(RequestInfo::default()),
            query: kubegate_policy::request_info::parse_query(query),
            content_type: None,
            content_length_sent: false,
            accept: None,
            user_agent: None,
            if_none_match: None,
            body: Bytes::new(),
            user: Arc::new(kubegate_policy::UserInfo::new("u", vec![])),
        }
    }

    #[test]
    fn query_flags_and_integers_decode_as_kubes_parameter_codec() {
        let request = with_query("a=True&b=yes&c=&d=FALSE&e=0&f=1");
        for (name, value) in [
            ("a", true),
            ("b", true),
            ("c", true),
            ("d", false),
            ("e", false),
        ] {
            assert_eq!(request.flag(name), value, "{name}");
        }
        assert!(request.flag("f"));
        assert!(!request.flag("absent"));
        assert_eq!(request.optional_flag("absent"), None);
        assert_eq!(request.optional_flag("d"), Some(false));
        let request = with_query("n=-5&p=%2B7&bad=1.5&big=9223372036854775808");
        assert_eq!(request.int_param("n").expect("int"), Some(-5));
        assert_eq!(request.int_param("p").expect("int"), Some(7));
        assert_eq!(request.int_param("absent").expect("absent"), None);
        assert_eq!(
            request.int_param("bad").expect_err("float").message,
            r#"strconv.ParseInt: parsing "1.5": invalid syntax"#
        );
        assert_eq!(
            request.int_param("big").expect_err("overflow").message,
            r#"strconv.ParseInt: parsing "9223372036854775808": value out of range"#
        );
    }

    #[test]
    fn an_error_status_is_encoded_as_the_request_accepts() {
        let compact = not_found().bytes();
        let json = finished(not_found(), Some("application/json"), false);
        assert_eq!(json.bytes(), compact);
        assert_eq!(json.status, 404);

        let yaml = finished(not_found(), Some("application/yaml"), false);
        assert_eq!(yaml.content_type, "application/yaml");
        let parsed: serde_json::Value =
            serde_yaml::from_slice(&yaml.bytes()).expect("a YAML Status");
        assert_eq!(parsed["reason"], "NotFound");
        assert_eq!(parsed["code"], 404);

        let proto = finished(
            not_found(),
            Some("application/vnd.kubernetes.protobuf"),
            false,
        );
        assert_eq!(proto.content_type, "application/vnd.kubernetes.protobuf");
        let status: serde_json::Value = serde_json::from_slice(&compact).expect("JSON");
        let expected = crate::machinery::protobuf::encode(&status).expect("a protobuf Status");
        assert_eq!(proto.bytes(), expected);
        assert!(proto.bytes().starts_with(b"k8s\0"));
        assert_eq!(proto.status, 404);
    }

    #[test]
    fn an_error_nothing_acceptable_can_carry_goes_out_as_kubes_raw_indented_json() {
        // kube's `WriteRawJSON`: the original code, JSON indented, whatever Accept asked for.
        for accept in ["text/html", "application/json;as=Table;v=v1;g=meta.k8s.io"] {
            let raw = finished(not_found(), Some(accept), false);
            assert_eq!(raw.status, 404);
            assert_eq!(raw.content_type, "application/json");
            let text = String::from_utf8(raw.bytes().to_vec()).expect("UTF-8");
            assert!(
                text.starts_with("{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n"),
                "{text}"
            );
            assert!(text.ends_with("\n  \"code\": 404\n}"), "{text}");
        }
    }

    #[test]
    fn json_is_indented_when_asked_for_and_fixed_bodies_never_are() {
        let pretty = finished(not_found(), None, true);
        assert!(pretty.bytes().starts_with(b"{\n  \"kind\""));
        let by_parameter = finished(not_found(), Some("application/json;pretty=1"), false);
        assert_eq!(by_parameter.bytes(), pretty.bytes());

        let object = || {
            ApiResponse::json_parts(200, vec![Bytes::from_static(b"{\"a\":"), "[1]}".into()])
                .negotiated()
        };
        let ApiResponse::Body(listed) = object() else {
            unreachable!("a body")
        };
        assert_eq!(listed.encoding, Encoding::Negotiated);
        let plain = finished(listed.clone(), Some("application/json"), false);
        assert_eq!(plain.bytes(), "{\"a\":[1]}");
        let indented = finished(listed, Some("*/*"), true);
        assert_eq!(indented.bytes(), "{\n  \"a\": [\n    1\n  ]\n}");
        assert!(indented.more.is_empty());

        let ApiResponse::Body(fixed) = ApiResponse::json(200, "{\"a\":1}") else {
            unreachable!("a body")
        };
        assert_eq!(finished(fixed, None, true).bytes(), "{\"a\":1}");
    }
}

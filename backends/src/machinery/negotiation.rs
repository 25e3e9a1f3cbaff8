//! Content negotiation, like k8s.io/apiserver's `negotiation` package: which media type a
//! response is written in (the `Accept` header, including `as=Table` and
//! `as=PartialObjectMetadata` transformations), which decoder a request body needs
//! (`Content-Type`), which kind of PATCH a body is, and decoding JSON and YAML bodies.

// `ApiError` is large by design (it carries the whole Status); these functions return it as
// every registry operation does.
#![allow(clippy::result_large_err)]

use serde_json::Value;

use crate::status::{ApiError, ApiResult};

/// The serializations kube-apiserver speaks for resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    Json,
    Yaml,
    Protobuf,
}

impl MediaType {
    /// The media type as written in headers.
    pub fn content_type(self) -> &'static str {
        match self {
            MediaType::Json => "application/json",
            MediaType::Yaml => "application/yaml",
            MediaType::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }
}

/// kube's order of preference: `*/*` and a missing `Accept` mean the first (JSON).
const SUPPORTED: [MediaType; 3] = [MediaType::Json, MediaType::Yaml, MediaType::Protobuf];

const SUPPORTED_LIST: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The outcome of `Accept` negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub media: MediaType,
    /// `as=Table;g=meta.k8s.io;v=v1` (or `v1beta1`): answer a `meta.k8s.io/v1` Table.
    pub as_table: bool,
    /// `as=PartialObjectMetadata` or `as=PartialObjectMetadataList` in `meta.k8s.io`: answer
    /// only the metadata of objects.
    pub as_partial_metadata: bool,
    /// Which of the two was asked for: `Some(true)` for the list, `Some(false)` for one
    /// object (kube refuses the other with a 406).
    pub as_partial_list: Option<bool>,
    /// `pretty=1` media type parameter (the `?pretty` query and user agents are the
    /// caller's to check, as kube does).
    pub pretty: bool,
}

impl Default for Negotiated {
    fn default() -> Self {
        Negotiated {
            media: MediaType::Json,
            as_table: false,
            as_partial_metadata: false,
            as_partial_list: None,
            pretty: false,
        }
    }
}

/// One clause of an `Accept` header.
#[derive(Debug, Clone)]
pub(crate) struct Clause {
    pub(crate) type_: String,
    pub(crate) subtype: String,
    pub(crate) q: f32,
    pub(crate) params: Vec<(String, String)>,
}

impl Clause {
    /// The value of parameter `name` (names are lower-cased when parsed).
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// `(type, subtype, parameters)` of a media type.
type ParsedMediaType = (String, String, Vec<(String, String)>);

/// Parses `type/subtype; k=v; k="v"` like Go's `mime.ParseMediaType`: type and parameter
/// names are lower-cased, values unquoted; a malformed parameter or a duplicate name fails.
fn parse_media_type(s: &str) -> Option<ParsedMediaType> {
    let mut parts = s.split(';');
    let media = parts.next()?.trim().to_ascii_lowercase();
    let (type_, subtype) = if media == "*" {
        ("*".to_string(), "*".to_string())
    } else {
        let (t, st) = media.split_once('/')?;
        let (t, st) = (t.trim(), st.trim());
        if t.is_empty() || st.is_empty() || !t.bytes().all(is_token) || !st.bytes().all(is_token) {
            return None;
        }
        (t.to_string(), st.to_string())
    };
    let rest: Vec<&str> = parts.collect();
    let mut params: Vec<(String, String)> = Vec::new();
    for (i, p) in rest.iter().enumerate() {
        let p = p.trim();
        if p.is_empty() {
            // Go ignores a trailing `;` only.
            if i + 1 == rest.len() {
                break;
            }
            return None;
        }
        let (k, v) = p.split_once('=')?;
        let k = k.trim().to_ascii_lowercase();
        if k.is_empty() || !k.bytes().all(is_token) {
            return None;
        }
        let v = v.trim();
        let v = if let Some(inner) = v.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
            inner.replace("\\\"", "\"").replace("\\\\", "\\")
        } else {
            if v.is_empty() || !v.bytes().all(is_token) {
                return None;
            }
            v.to_string()
        };
        if params.iter().any(|(existing, _)| *existing == k) {
            return None;
        }
        params.push((k, v));
    }
    Some((type_, subtype, params))
}

/// RFC 7230 token characters.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Go's `sort.Sort` sorts slices up to this long by insertion.
const GO_INSERTION_SORT_MAX: usize = 12;

/// Parses an `Accept` header like goautoneg: unparseable clauses are skipped; the rest are
/// ordered as goautoneg orders them: by `q` (highest first), specific types before
/// wildcards, header order otherwise.
pub(crate) fn parse_accept(header: &str) -> Vec<Clause> {
    let mut clauses: Vec<Clause> = header
        .split(',')
        .filter_map(|part| {
            let (type_, subtype, params) = parse_media_type(part)?;
            let mut q = 1.0f32;
            let mut rest = Vec::with_capacity(params.len());
            for (k, v) in params {
                if k == "q" {
                    // goautoneg ignores the parse error and keeps 0.
                    q = v.parse().unwrap_or(0.0);
                } else {
                    rest.push((k, v));
                }
            }
            Some(Clause {
                type_,
                subtype,
                q,
                params: rest,
            })
        })
        .collect();
    // goautoneg sorts with Go's `sort.Sort` and the "less" below, which is not a consistent
    // order (`*/*;q=1` vs `application/json;q=0.5` is "less" both ways). For up to 12
    // clauses (pdqsort's insertion-sort cutoff; a real header holds a few) Go's sort is an
    // insertion sort; running the same one with the same "less" puts clauses in kube's
    // order, quirks included. Longer headers, which no client sends, get a consistent
    // O(n log n) order instead: an insertion sort would be quadratic in a header's length.
    if clauses.len() > GO_INSERTION_SORT_MAX {
        clauses.sort_by(|a, b| {
            b.q.partial_cmp(&a.q)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then((a.type_ == "*").cmp(&(b.type_ == "*")))
                .then((a.subtype == "*").cmp(&(b.subtype == "*")))
        });
        return clauses;
    }
    let less = |a: &Clause, b: &Clause| {
        a.q > b.q || (a.type_ != "*" && b.type_ == "*") || (a.subtype != "*" && b.subtype == "*")
    };
    for i in 1..clauses.len() {
        let mut j = i;
        while j > 0 && less(&clauses[j], &clauses[j - 1]) {
            clauses.swap(j, j - 1);
            j -= 1;
        }
    }
    clauses
}

/// The options a clause asks of `media`, or `None` when the server cannot honour them
/// (kube's `acceptMediaTypeOptions` with a resource endpoint's restrictions).
fn accept_options(
    params: &[(String, String)],
    media: MediaType,
    endpoint: Endpoint,
) -> Option<Negotiated> {
    let mut convert: Option<(String, String, String)> = None;
    let mut pretty = false;
    for (k, v) in params {
        match k.as_str() {
            "as" => convert.get_or_insert_with(Default::default).2 = v.clone(),
            "g" => convert.get_or_insert_with(Default::default).0 = v.clone(),
            "v" => convert.get_or_insert_with(Default::default).1 = v.clone(),
            // Only JSON and protobuf have watch stream serializers.
            "stream" if !v.is_empty() && (v != "watch" || media == MediaType::Yaml) => return None,
            // The server version of meta.k8s.io; an endpoint without conversions has none.
            "sv" if !v.is_empty() && (v != "v1" || endpoint == Endpoint::Plain) => return None,
            "pretty" => pretty = v == "1",
            // `export`, `profile` and unknown parameters do not affect resources.
            _ => {}
        }
    }
    let allow_table = match endpoint {
        // kube's `AllowsMediaTypeTransform` without a conversion: the endpoint's standard
        // serializers, which for custom resources leave protobuf out.
        Endpoint::Resource {
            protobuf: false, ..
        } if convert.is_none() && media == MediaType::Protobuf => return None,
        Endpoint::Resource { table, .. } => table,
        // kube's `DefaultEndpointRestrictions`: no conversion at all.
        Endpoint::Plain if convert.is_some() => return None,
        Endpoint::Plain => false,
    };
    let mut out = Negotiated {
        media,
        pretty,
        ..Negotiated::default()
    };
    if let Some((group, version, kind)) = convert {
        if group != "meta.k8s.io" || (version != "v1" && version != "v1beta1") {
            return None;
        }
        match kind.as_str() {
            // Tables have no protobuf form.
            "Table" if allow_table && media != MediaType::Protobuf => out.as_table = true,
            "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                out.as_partial_metadata = true;
                out.as_partial_list = Some(kind == "PartialObjectMetadataList");
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Negotiates the response media type from an `Accept` header, like kube's
/// `NegotiateOutputMediaType`: the first clause (by preference) the server can serve wins;
/// a missing header or `*/*` gives JSON; `as=Table` needs `allow_table`; a plain object in
/// protobuf needs `protobuf()` (whether the kind has a protobuf form: custom resources have
/// none, though their metadata-only views do); nothing acceptable is 406.
pub fn negotiate_output(
    accept: Option<&str>,
    allow_table: bool,
    protobuf: impl FnOnce() -> bool,
) -> ApiResult<Negotiated> {
    // What most clients send (client-go's default and plain tools): JSON, nothing to parse.
    if is_plain_json(accept) {
        return Ok(Negotiated::default());
    }
    negotiate_among(
        accept,
        Endpoint::Resource {
            table: allow_table,
            protobuf: protobuf(),
        },
        &SUPPORTED,
    )
}

/// [`negotiate_output`] for an endpoint that converts nothing (kube's legacy discovery
/// handlers, with `DefaultEndpointRestrictions`): a clause asking for `as=`/`g=`/`v=` or a
/// server version is passed over.
pub fn negotiate_plain_output(accept: Option<&str>) -> ApiResult<Negotiated> {
    if is_plain_json(accept) {
        return Ok(Negotiated::default());
    }
    negotiate_among(accept, Endpoint::Plain, &SUPPORTED)
}

fn is_plain_json(accept: Option<&str>) -> bool {
    matches!(
        accept.map(str::trim),
        None | Some("" | "application/json" | "*/*" | "application/json, */*")
    )
}

/// What an endpoint can convert its answer to (kube's `EndpointRestrictions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endpoint {
    /// A resource: `PartialObjectMetadata`, `Table` when `table`, the plain object in
    /// protobuf when `protobuf`.
    Resource { table: bool, protobuf: bool },
    /// Nothing (legacy discovery): a clause asking for any conversion is not acceptable.
    Plain,
}

/// The client's most preferred media type among `supported`, as kube's negotiation picks it.
fn negotiate_among(
    accept: Option<&str>,
    endpoint: Endpoint,
    supported: &[MediaType],
) -> ApiResult<Negotiated> {
    let header = accept.map(str::trim).unwrap_or("");
    if header.is_empty() {
        return Ok(Negotiated::default());
    }
    for clause in parse_accept(header) {
        for &media in supported {
            let (t, st) = media
                .content_type()
                .split_once('/')
                .unwrap_or(("application", "json"));
            let matches = (clause.type_ == t && (clause.subtype == st || clause.subtype == "*"))
                || (clause.type_ == "*" && clause.subtype == "*");
            if !matches {
                continue;
            }
            if let Some(out) = accept_options(&clause.params, media, endpoint) {
                return Ok(out);
            }
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: {SUPPORTED_LIST}"
    )))
}

/// The decoder a request body needs, from its `Content-Type` (kube's
/// `NegotiateInputSerializer`): none means JSON; parameters such as `charset` are ignored;
/// anything else is 415.
pub fn request_body_type(content_type: Option<&str>) -> ApiResult<MediaType> {
    let ct = content_type.map(str::trim).unwrap_or("");
    if ct.is_empty() {
        return Ok(MediaType::Json);
    }
    if let Some((t, st, _)) = parse_media_type(ct) {
        let media = format!("{t}/{st}");
        if let Some(m) = SUPPORTED.iter().find(|m| m.content_type() == media) {
            return Ok(*m);
        }
    }
    Err(unsupported_media_type(SUPPORTED_LIST))
}

/// kube's `errUnsupportedMediaType`.
fn unsupported_media_type(accepted: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}"
        ),
    )
}

/// The four kinds of PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// The patch type of a PATCH body from its `Content-Type`, for built-in resources (all four
/// types). Anything else is 415 listing the accepted types.
pub fn patch_type(content_type: Option<&str>) -> ApiResult<PatchType> {
    patch_type_allowing(content_type, true)
}

/// [`patch_type`] for resources that may not support strategic merge patch (custom
/// resources: kube offers them only JSON, merge and apply patches, and lists only those).
pub fn patch_type_allowing(content_type: Option<&str>, strategic: bool) -> ApiResult<PatchType> {
    let mut allowed = vec![PatchType::Json, PatchType::Merge];
    if strategic {
        allowed.push(PatchType::StrategicMerge);
    }
    allowed.push(PatchType::Apply);
    // As kube: parameters (`; charset=utf-8`) are dropped, the rest compared as is.
    let ct = content_type.unwrap_or("");
    let ct = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if let Some(t) = allowed.iter().find(|t| t.content_type() == ct) {
        return Ok(*t);
    }
    let names: Vec<&str> = allowed.iter().map(|t| t.content_type()).collect();
    Err(unsupported_media_type(&names.join(", ")))
}

/// Why a request body did not decode.
#[derive(Debug)]
pub enum BodyError {
    /// Not even its kind could be read (a syntax error, an envelope that is no envelope): the
    /// decoder's words, which kube's create and update handlers put after `the object
    /// provided is unrecognized (must be of type <Kind>): `.
    Unrecognized(String),
    /// The answer as it is.
    Refused(ApiError),
}

impl BodyError {
    /// The 400 (or other refusal) for a caller that adds no words of its own.
    pub fn into_api_error(self) -> ApiError {
        match self {
            BodyError::Unrecognized(message) => ApiError::bad_request(message),
            BodyError::Refused(error) => error,
        }
    }
}

/// Decodes a request body into a JSON object. Malformed bodies are 400 with the reason, in
/// the words kube's decoders use (`couldn't get version/kind; json parse error: ...`,
/// `yaml: line 2: ...`). Protobuf bodies go to
/// [`crate::machinery::protobuf::decode`].
pub fn decode_body(media: MediaType, body: &[u8]) -> ApiResult<Value> {
    decode_body_noting_duplicates(media, body, false).map(|(value, _)| value)
}

/// [`decode_body`], and kube's strict-decoding complaints about the body's repeated keys
/// (`duplicate field "data.a"` in JSON; go-yaml's `yaml: unmarshal errors:` in YAML), which
/// it reports as it reports unknown fields. `typed`: the body is a built-in kind, which
/// Go decodes into its struct (a repeated object merges into the first; otherwise the last
/// value wins).
pub fn decode_body_noting_duplicates(
    media: MediaType,
    body: &[u8],
    typed: bool,
) -> ApiResult<(Value, Vec<String>)> {
    decode_body_for(media, body, typed, None).map_err(BodyError::into_api_error)
}

/// [`decode_body_noting_duplicates`] for a request to an endpoint of `endpoint` (apiVersion,
/// kind), which a protobuf envelope without them takes, with the decoders' errors apart from
/// the refusals (see [`BodyError`]).
pub fn decode_body_for(
    media: MediaType,
    body: &[u8],
    typed: bool,
    endpoint: Option<(&str, &str)>,
) -> Result<(Value, Vec<String>), BodyError> {
    let unrecognized = |message: String| BodyError::Unrecognized(message);
    let (value, duplicates) = match media {
        MediaType::Protobuf => {
            return Ok((
                crate::machinery::protobuf::decode_for(body, endpoint)?,
                Vec::new(),
            ))
        }
        MediaType::Json => {
            if body.iter().all(u8::is_ascii_whitespace) {
                return Err(unrecognized(
                    "couldn't get version/kind; json parse error: unexpected end of JSON input"
                        .into(),
                ));
            }
            let decoded = if typed {
                crate::machinery::duplicates::from_slice_merging(body)
            } else {
                crate::machinery::duplicates::from_slice(body)
            }
            .map_err(|e| {
                let reason = crate::machinery::gojson_syntax::syntax_error(body)
                    .unwrap_or_else(|| e.to_string());
                unrecognized(format!(
                    "couldn't get version/kind; json parse error: {reason}"
                ))
            })?;
            (
                decoded.value,
                crate::machinery::duplicates::messages(&decoded.duplicates),
            )
        }
        // kube's YAML serializer hands sigs.k8s.io/yaml's error on as it is.
        MediaType::Yaml => {
            let decoded = crate::machinery::goyaml::from_slice(body).map_err(unrecognized)?;
            let strict = decoded.strict_error().into_iter().collect();
            (decoded.value, strict)
        }
    };
    match value {
        Value::Object(_) => Ok((value, duplicates)),
        Value::Null => Err(unrecognized("Object 'Kind' is missing in 'null'".into())),
        other => Err(unrecognized(format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
            match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    fn negotiate(accept: &str, table: bool) -> Negotiated {
        negotiate_output(Some(accept), table, || true).expect("acceptable")
    }

    #[test]
    fn missing_and_wildcard_accept_give_json() {
        assert_eq!(
            negotiate_output(None, true, || true).expect("ok"),
            Negotiated::default()
        );
        assert_eq!(negotiate("", true).media, MediaType::Json);
        assert_eq!(negotiate("*/*", true).media, MediaType::Json);
        assert_eq!(negotiate("application/*", true).media, MediaType::Json);
        assert_eq!(negotiate("*", true).media, MediaType::Json);
    }

    #[test]
    fn kubectl_table_request() {
        let n = negotiate(KUBECTL_TABLE, true);
        assert!(n.as_table);
        assert_eq!(n.media, MediaType::Json);
        // A resource without Table support falls back to the plain JSON clause.
        let n = negotiate(KUBECTL_TABLE, false);
        assert!(!n.as_table);
        assert_eq!(n.media, MediaType::Json);
        let n = negotiate("application/yaml;as=Table;g=meta.k8s.io;v=v1", true);
        assert!(n.as_table);
        assert_eq!(n.media, MediaType::Yaml);
    }

    #[test]
    fn table_needs_group_and_version_and_no_protobuf() {
        assert!(negotiate_output(Some("application/json;as=Table"), true, || true).is_err());
        assert!(negotiate_output(
            Some("application/json;as=Table;g=meta.k8s.io;v=v2"),
            true,
            || true
        )
        .is_err());
        assert!(negotiate_output(
            Some("application/json;as=Widget;g=meta.k8s.io;v=v1"),
            true,
            || true
        )
        .is_err());
        assert!(negotiate_output(
            Some("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"),
            true,
            || true
        )
        .is_err());
    }

    #[test]
    fn partial_object_metadata() {
        let n = negotiate(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            false,
        );
        assert_eq!(n.media, MediaType::Protobuf);
        assert!(n.as_partial_metadata);
        // The first preference wins, as in kube (client-go's metadata client sends this).
        let n = negotiate(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            false,
        );
        assert_eq!(n.media, MediaType::Protobuf);
        assert!(n.as_partial_metadata);
        // A custom resource has no protobuf form, but its metadata-only view has.
        let custom = |accept: &str| negotiate_output(Some(accept), true, || false);
        let n = custom(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        )
        .expect("acceptable");
        assert_eq!(n.media, MediaType::Protobuf);
        assert!(n.as_partial_metadata);
        let n = custom("application/vnd.kubernetes.protobuf, application/json").expect("ok");
        assert_eq!((n.media, n.as_partial_metadata), (MediaType::Json, false));
        let e = custom("application/vnd.kubernetes.protobuf").expect_err("406");
        assert_eq!(e.code, 406);
        let n = negotiate(
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            false,
        );
        assert!(n.as_partial_metadata && !n.as_table);
    }

    #[test]
    fn protobuf_and_q_values() {
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf", false).media,
            MediaType::Protobuf
        );
        assert_eq!(
            negotiate("application/json;q=0.5, application/yaml", false).media,
            MediaType::Yaml
        );
        assert_eq!(
            negotiate("*/*;q=0.8, application/yaml;q=0.9", false).media,
            MediaType::Yaml
        );
        // Specific types beat wildcards of the same quality.
        assert_eq!(
            negotiate("*/*, application/yaml", false).media,
            MediaType::Yaml
        );
        // The client's first preference, as kube serves it (client-go's typed clients send
        // protobuf first).
        assert_eq!(
            negotiate("text/html, application/vnd.kubernetes.protobuf, */*", false).media,
            MediaType::Protobuf
        );
        assert_eq!(
            negotiate(
                "application/vnd.kubernetes.protobuf,application/json",
                false
            )
            .media,
            MediaType::Protobuf
        );
        assert_eq!(
            negotiate(
                "application/json,application/vnd.kubernetes.protobuf",
                false
            )
            .media,
            MediaType::Json
        );
        assert_eq!(
            negotiate("text/html, application/vnd.kubernetes.protobuf", false).media,
            MediaType::Protobuf
        );
    }

    #[test]
    fn pretty_and_stream_parameters() {
        assert!(negotiate("application/json;pretty=1", false).pretty);
        assert!(!negotiate("application/json;pretty=0", false).pretty);
        assert_eq!(
            negotiate("application/json;stream=watch", false).media,
            MediaType::Json
        );
        // YAML has no watch stream serializer.
        assert_eq!(
            negotiate("application/yaml;stream=watch, application/json", false).media,
            MediaType::Json
        );
    }

    /// goautoneg's "less" puts a specific type before a wildcard even when the wildcard has
    /// the higher q, and Go's insertion sort lets that win: kube answers YAML here.
    #[test]
    fn clauses_are_ordered_as_goautoneg_orders_them() {
        let order = |header: &str| -> Vec<String> {
            parse_accept(header)
                .into_iter()
                .map(|c| format!("{}/{}", c.type_, c.subtype))
                .collect()
        };
        assert_eq!(
            order("*/*, application/yaml;q=0.5"),
            ["application/yaml", "*/*"]
        );
        assert_eq!(
            negotiate_output(Some("*/*, application/yaml;q=0.5"), false, || true)
                .unwrap()
                .media,
            MediaType::Yaml
        );
        assert_eq!(
            order("application/yaml;q=0.5, application/json;q=0.9, text/plain"),
            ["text/plain", "application/json", "application/yaml"]
        );
        // Equal clauses keep the header's order.
        assert_eq!(
            order("application/yaml, application/json"),
            ["application/yaml", "application/json"]
        );
        // A header too long for Go's insertion sort gets a consistent order, in time that
        // grows as n log n (an insertion sort here would take minutes).
        let long = vec!["*/*"; 50_000]
            .into_iter()
            .chain(vec!["application/yaml"; 50_000])
            .collect::<Vec<_>>()
            .join(",");
        let sorted = order(&long);
        assert_eq!(sorted.len(), 100_000);
        assert_eq!(sorted[0], "application/yaml");
        assert_eq!(sorted[99_999], "*/*");
    }

    #[test]
    fn nothing_acceptable_is_406_with_kube_message() {
        for accept in [
            "text/html",
            "application/xml, text/plain",
            "garbage",
            "application/cbor",
        ] {
            let e = negotiate_output(Some(accept), true, || true).expect_err(accept);
            assert_eq!(e.code, 406);
            assert_eq!(e.reason, "NotAcceptable");
            assert_eq!(
                e.message,
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    #[test]
    fn malformed_clauses_are_skipped() {
        assert_eq!(
            negotiate("application/json;;x, application/yaml", false).media,
            MediaType::Yaml
        );
        assert_eq!(
            negotiate("APPLICATION/JSON; charset=utf-8;", false).media,
            MediaType::Json
        );
        assert_eq!(
            negotiate("application/json;a=1;a=2, application/yaml", false).media,
            MediaType::Yaml
        );
        assert!(negotiate(r#"application/json;as="Table";g=meta.k8s.io;v=v1"#, true).as_table);
    }

    #[test]
    fn request_body_types() {
        assert_eq!(request_body_type(None).expect("ok"), MediaType::Json);
        assert_eq!(
            request_body_type(Some("application/json; charset=utf-8")).expect("ok"),
            MediaType::Json
        );
        assert_eq!(
            request_body_type(Some("application/yaml")).expect("ok"),
            MediaType::Yaml
        );
        assert_eq!(
            request_body_type(Some("application/vnd.kubernetes.protobuf")).expect("ok"),
            MediaType::Protobuf
        );
        let e = request_body_type(Some("text/plain")).expect_err("415");
        assert_eq!(e.code, 415);
        assert_eq!(e.reason, "UnsupportedMediaType");
        assert_eq!(
            e.message,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
    }

    #[test]
    fn patch_types() {
        assert_eq!(
            patch_type(Some("application/json-patch+json")).expect("ok"),
            PatchType::Json
        );
        assert_eq!(
            patch_type(Some("application/merge-patch+json; charset=utf-8")).expect("ok"),
            PatchType::Merge
        );
        assert_eq!(
            patch_type(Some("application/strategic-merge-patch+json")).expect("ok"),
            PatchType::StrategicMerge
        );
        assert_eq!(
            patch_type(Some("application/apply-patch+yaml")).expect("ok"),
            PatchType::Apply
        );
        let e = patch_type(Some("application/json")).expect_err("415");
        assert_eq!(e.code, 415);
        assert_eq!(
            e.message,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
        );
        assert!(patch_type(None).is_err());
        let e = patch_type_allowing(Some("application/strategic-merge-patch+json"), false)
            .expect_err("crd");
        assert!(e.message.ends_with("application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"));
    }

    #[test]
    fn decode_json_and_yaml() {
        let v = decode_body(MediaType::Json, br#"{"kind":"ConfigMap","data":{"a":"1"}}"#)
            .expect("json");
        assert_eq!(v["data"]["a"], "1");
        let v = decode_body(
            MediaType::Yaml,
            b"kind: ConfigMap\nmetadata:\n  name: x\ndata:\n  1: one\n  true: yes\n  n: 5\n  q: 'yes'\n",
        )
        .expect("yaml");
        assert_eq!(v["metadata"]["name"], "x");
        assert_eq!(v["data"]["1"], "one");
        // YAML 1.1, as go-yaml v2 reads it: a plain `yes` is true.
        assert_eq!(v["data"]["true"], true);
        // ... and so is a plain `n` key (false).
        assert_eq!(v["data"]["false"], 5);
        assert_eq!(v["data"]["q"], "yes");
        // Only the first document is read.
        let v = decode_body(MediaType::Yaml, b"a: 1\n---\nb: 2\n").expect("multi doc");
        assert_eq!(v, serde_json::json!({"a": 1}));
    }

    #[test]
    fn malformed_bodies_are_400_naming_the_problem() {
        let e = decode_body(MediaType::Json, b"{\"kind\":").expect_err("truncated");
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "couldn't get version/kind; json parse error: unexpected end of JSON input"
        );
        // Go's scanner's words, not serde's.
        let e = decode_body(MediaType::Json, b"notjson").expect_err("not JSON");
        assert_eq!(
            e.message,
            "couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u')"
        );
        let e = decode_body(MediaType::Json, b"").expect_err("empty");
        assert_eq!(
            e.message,
            "couldn't get version/kind; json parse error: unexpected end of JSON input"
        );
        let e = decode_body(MediaType::Json, b"[1]").expect_err("array");
        assert!(
            e.message.contains("cannot unmarshal array"),
            "{}",
            e.message
        );
        let e = decode_body(MediaType::Yaml, b"a: [1\n").expect_err("bad yaml");
        assert_eq!(e.code, 400);
        assert_eq!(e.message, "yaml: line 1: did not find expected ',' or ']'");
        let e = decode_body(MediaType::Yaml, b"").expect_err("empty yaml");
        assert_eq!(e.code, 400);
    }
}

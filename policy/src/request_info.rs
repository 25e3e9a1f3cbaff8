//! RequestInfo: what a request is about (verb, group, version, namespace, resource,
//! subresource, name), resolved from method, path and query exactly as k8s.io/apiserver's
//! `RequestInfoFactory` does.
//!
//! Before resolving, the path is normalized once, here, for every later stage: it is
//! percent-decoded (so `/api/v1/namespaces/def%61ult` and `/api/v1/namespaces/default` are the
//! same request), and anything whose meaning could differ between two readers is refused:
//! encoded slashes, `.`/`..` segments, empty segments, control characters, bad escapes and
//! non-UTF-8. After that, the decoded path has exactly one reading, so authorization, audit and
//! routing cannot disagree about what was asked for.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// The attributes of one request, as kube-apiserver's `request.RequestInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// True for `/api/...` and `/apis/...` paths that name a resource (or a collection).
    pub is_resource_request: bool,
    /// The normalized path the request was resolved from (what routing and authorization see):
    /// percent-decoded, and free of encoded slashes, dot segments and empty segments. A
    /// trailing slash is kept, as kube keeps it. [`RequestInfo::escaped_path`] gives the one
    /// canonical wire form of it.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `proxy`, or for non-resource requests the lowercased HTTP method.
    pub verb: String,
    /// `api` or `apis` for resource requests, empty otherwise.
    pub api_prefix: String,
    /// Empty for the legacy core group.
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// Watches, proxy, exec/attach/portforward and log reads: not subject to the request
    /// timeout.
    pub long_running: bool,
    /// The raw `fieldSelector` query value for list, watch and deletecollection (kube's
    /// `RequestInfo.FieldSelector`, used by selector-aware authorization); empty otherwise and
    /// for the deprecated `/watch/` path form.
    pub field_selector: String,
    /// The raw `labelSelector` query value, under the same rules as `field_selector`.
    pub label_selector: String,
}

/// Why a path could not be resolved; the gateway turns it into a 400/404 `Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestInfoError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
}

/// What Go's `url.PathEscape`-style path encoding leaves alone: unreserved characters and the
/// sub-delimiters Go's `shouldEscape(.., encodePath)` keeps (`$ & + , : ; = @`). Everything
/// else, including every non-ASCII byte, is percent-encoded with upper-case hex.
const PATH_SEGMENT_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b':')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

impl RequestInfo {
    /// The canonical percent-encoded form of [`RequestInfo::path`], as Go's
    /// `url.URL.EscapedPath` would write it: what to send upstream so the backend reads the
    /// same path that was authorized.
    pub fn escaped_path(&self) -> String {
        self.path
            .split('/')
            .map(|segment| utf8_percent_encode(segment, PATH_SEGMENT_ESCAPE).to_string())
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// Resolves a request, as kube's `RequestInfoFactory{APIPrefixes: {api, apis},
/// GrouplessAPIPrefixes: {api}}.NewRequestInfo` does, after normalizing the path.
///
/// `path` is the path exactly as it appeared on the request line (still percent-encoded, no
/// query); `query` is the raw query string without the `?`.
pub fn resolve(method: &str, path: &str, query: &str) -> Result<RequestInfo, RequestInfoError> {
    resolve_parsed(method, path, &parse_query(query))
}

/// [`resolve`] with the query already decoded by [`parse_query`] (the pipeline needs the
/// pairs anyway, so it parses them once).
pub fn resolve_parsed(
    method: &str,
    path: &str,
    query: &[(String, String)],
) -> Result<RequestInfo, RequestInfoError> {
    let normalized = normalize_path(path)?;
    let mut info = {
        // Decoded segments never contain '/' (an encoded slash is refused), so splitting the
        // normalized path gives them back exactly.
        let segments: Vec<&str> = match normalized.trim_start_matches('/') {
            "" => Vec::new(),
            rest => split_segments(rest.strip_suffix('/').unwrap_or(rest)),
        };
        resolve_segments(method, &normalized, &segments, query)?
    };
    info.path = normalized;
    info.long_running = is_long_running(&info);
    Ok(info)
}

/// `path` split at every `/`, as `str::split('/')` would, byte by byte: a path's segments
/// are short, and the general character search costs a setup per segment (~130
/// instructions each, ~800 per request).
fn split_segments(path: &str) -> Vec<&str> {
    let mut segments = Vec::with_capacity(8);
    let mut start = 0;
    for (at, byte) in path.bytes().enumerate() {
        if byte == b'/' {
            // `/` is ASCII, so both ends are character boundaries.
            segments.push(&path[start..at]);
            start = at + 1;
        }
    }
    segments.push(&path[start..]);
    segments
}

/// The first value of a query parameter.
fn query_param<'q>(query: &'q [(String, String)], key: &str) -> Option<&'q str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Everything but `path` and `long_running`, which [`resolve_parsed`] fills in once the
/// segments no longer borrow the normalized path.
fn resolve_segments(
    method: &str,
    normalized: &str,
    segments: &[&str],
    query: &[(String, String)],
) -> Result<RequestInfo, RequestInfoError> {
    let first = |key: &str| query_param(query, key);
    // A non-resource request's verb is the lowercased method.
    let non_resource = || RequestInfo {
        verb: method.to_lowercase(),
        ..RequestInfo::default()
    };
    let mut info = RequestInfo::default();

    let mut parts: &[&str] = segments;
    let Some(&prefix) = parts.first().filter(|_| parts.len() >= 3) else {
        return Ok(non_resource());
    };
    if prefix != "api" && prefix != "apis" {
        return Ok(non_resource());
    }
    parts = &parts[1..];
    if prefix == "apis" {
        // The prefix is consumed, so this asks for four parts in all: group, version, resource.
        if parts.len() < 3 {
            return Ok(non_resource());
        }
        info.api_group = parts[0].to_string();
        parts = &parts[1..];
    }
    info.api_prefix = prefix.to_string();
    info.is_resource_request = true;
    info.api_version = parts[0].to_string();
    parts = &parts[1..];

    // The deprecated `/{watch,proxy}/...` forms put the verb in the path.
    let mut verb_via_path_prefix = false;
    if parts[0] == "watch" || parts[0] == "proxy" {
        if parts.len() < 2 {
            info.path = normalized.to_string();
            return Err(RequestInfoError::BadRequest(format!(
                "unable to determine kind and namespace from url, {}",
                display_url(&info, query)
            )));
        }
        info.verb = parts[0].to_string();
        parts = &parts[1..];
        verb_via_path_prefix = true;
    } else {
        // Methods are case-sensitive tokens: kube compares them exactly, so `get` is no GET.
        info.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }

    // `/namespaces/{namespace}/{resource}/...`: parts become relative to the resource, except
    // for the namespace's own subresources (`/namespaces/foo/status`), which keep
    // `namespaces/foo` as resource and name.
    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        if parts.len() > 2 && parts[2] != "status" && parts[2] != "finalize" {
            parts = &parts[2..];
        }
    }

    // parts: resource/name/subresource/anything/else; proxy takes no subresource.
    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    info.resource = parts[0].to_string();

    // No name and a get: really a list or a watch, decided by the ListOptions in the query.
    if info.name.is_empty() && info.verb == "get" {
        let field_selector = first("fieldSelector");
        let exact_name = match field_selector {
            Some(selector) => field_selector_exact_name(selector),
            None => Ok(None),
        };
        // kube decodes the whole ListOptions; if any of it fails, it keeps only `watch` and
        // ignores the selector's name. Of those options only the selectors and the integer
        // ones can fail to decode.
        let integers_ok = ["timeoutSeconds", "limit"]
            .iter()
            .all(|key| first(key).is_none_or(|v| v.parse::<i64>().is_ok()));
        let watch = first("watch");
        match exact_name {
            Ok(name) if integers_ok => {
                info.verb = if watch.is_some_and(go_query_bool) {
                    "watch"
                } else {
                    "list"
                }
                .to_string();
                // A name that could not be a path segment never narrows authorization.
                if let Some(name) = name.filter(|n| is_path_segment_name(n)) {
                    info.name = name;
                }
            }
            _ => {
                let watch = watch.is_some_and(|v| {
                    let v = v.to_lowercase();
                    v != "false" && v != "0"
                });
                info.verb = if watch { "watch" } else { "list" }.to_string();
            }
        }
    }

    // No name and a delete: a deletecollection.
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }

    // Only the collection verbs honour selectors, and not in the `/watch/` path form (its
    // single-object watch ignores them).
    if !verb_via_path_prefix && matches!(info.verb.as_str(), "list" | "watch" | "deletecollection")
    {
        info.field_selector = first("fieldSelector").unwrap_or_default().to_string();
        info.label_selector = first("labelSelector").unwrap_or_default().to_string();
    }
    Ok(info)
}

/// kube-apiserver's `BasicLongRunningRequestCheck({watch, proxy}, {attach, exec, proxy, log,
/// portforward})` and its non-resource `/debug/pprof/` profiles. Every `log` read counts, as in
/// kube, followed or not: a long log from a node is slow to send, and kube neither queues it
/// in flow control nor cuts it off at the request timeout.
fn is_long_running(info: &RequestInfo) -> bool {
    if info.verb == "watch" || info.verb == "proxy" {
        return true;
    }
    if info.is_resource_request {
        return matches!(
            info.subresource.as_str(),
            "attach" | "exec" | "proxy" | "log" | "portforward"
        );
    }
    info.path.starts_with("/debug/pprof/")
}

/// kube's `Convert_Slice_string_To_bool` on the first value: anything but `0` and a
/// case-insensitive `false` is true (so `?watch=` is a watch, as in kube).
fn go_query_bool(value: &str) -> bool {
    !(value == "0" || go_equal_fold_false(value))
}

/// Go's `strings.EqualFold(v, "false")`: ASCII case folding plus Unicode simple folding, whose
/// only extra member for these letters is `ſ` (U+017F), which folds to `s`.
fn go_equal_fold_false(value: &str) -> bool {
    let mut chars = value.chars();
    for expected in "false".chars() {
        let Some(c) = chars.next() else {
            return false;
        };
        let folded = if c == '\u{17f}' {
            's'
        } else {
            c.to_ascii_lowercase()
        };
        if folded != expected {
            return false;
        }
    }
    chars.next().is_none()
}

/// kube's `content.IsPathSegmentName` check, used before a `metadata.name` field selector may
/// stand in for the request's name.
fn is_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// `req.URL` as Go prints it in the error kube returns for `/api/v1/watch`.
fn display_url(info: &RequestInfo, query: &[(String, String)]) -> String {
    let mut url = info.escaped_path();
    if !query.is_empty() {
        url.push('?');
        let pairs: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
            .collect();
        url.push_str(&pairs.join("&"));
    }
    url
}

fn query_escape(s: &str) -> String {
    const QUERY_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b' ');
    utf8_percent_encode(s, QUERY_ESCAPE)
        .to_string()
        .replace(' ', "+")
}

/// Whether a `fieldSelector` value parses (as kube's `fields.ParseSelector`), and the name a
/// `metadata.name=x` term asks for (its `RequiresExactMatch("metadata.name")`).
///
/// This is the part of kube's field selector grammar request resolution needs; the full
/// selector (matching, printing) lives in kubegate-backends' `machinery::selectors`, which
/// follows the same rules. policy cannot depend on backends, hence the second copy.
fn field_selector_exact_name(selector: &str) -> Result<Option<String>, ()> {
    // Split on commas not escaped with a backslash.
    let mut terms = Vec::new();
    if !selector.is_empty() {
        let mut start = 0;
        let mut in_slash = false;
        for (i, c) in selector.char_indices() {
            if in_slash {
                in_slash = false;
            } else if c == '\\' {
                in_slash = true;
            } else if c == ',' {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
        }
        terms.push(&selector[start..]);
    }
    // kube sorts terms before parsing, so "the first metadata.name term" is in sorted order.
    terms.sort_unstable();
    let mut name = None;
    for term in terms {
        if term.is_empty() {
            continue;
        }
        let mut split = None;
        'scan: for (i, _) in term.char_indices() {
            for op in ["!=", "==", "="] {
                if let Some(value) = term[i..].strip_prefix(op) {
                    split = Some((&term[..i], op, value));
                    break 'scan;
                }
            }
        }
        let (field, op, raw_value) = split.ok_or(())?;
        let value = unescape_field_value(raw_value)?;
        if name.is_none() && op != "!=" && field == "metadata.name" {
            name = Some(value);
        }
    }
    Ok(name)
}

/// kube's `fields.UnescapeValue`: `\\`, `\,` and `\=` are the only escapes, and `,`/`=` must be
/// escaped.
fn unescape_field_value(s: &str) -> Result<String, ()> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(());
            }
            out.push(c);
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' || c == '=' {
            return Err(());
        } else {
            out.push(c);
        }
    }
    if in_slash {
        return Err(());
    }
    Ok(out)
}

/// Parses a query string as Go's `url.ParseQuery` (what `req.URL.Query()` gives kube): pairs
/// split on `&`, `+` decodes to a space, `%XX` escapes are decoded, and a pair with a `;` or a
/// bad escape is dropped (Go reports an error for it but `URL.Query()` ignores it). Pairs keep
/// their order; repeated keys repeat. Decoded bytes that are not UTF-8 become U+FFFD.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for chunk in query.split('&') {
        if chunk.is_empty() || chunk.contains(';') {
            continue;
        }
        let (key, value) = chunk.split_once('=').unwrap_or((chunk, ""));
        let (Some(key), Some(value)) = (query_unescape(key), query_unescape(value)) else {
            continue;
        };
        pairs.push((key, value));
    }
    pairs
}

/// Go's `url.QueryUnescape`; `None` for a malformed escape.
fn query_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                out.push(hex_pair(bytes, i)?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The byte a `%XX` escape at `bytes[at]` encodes.
fn hex_pair(bytes: &[u8], at: usize) -> Option<u8> {
    let hi = (*bytes.get(at + 1)? as char).to_digit(16)?;
    let lo = (*bytes.get(at + 2)? as char).to_digit(16)?;
    u8::try_from(hi * 16 + lo).ok()
}

/// Decodes and checks the request path. Returns the normalized path and its segments.
fn normalize_path(raw: &str) -> Result<String, RequestInfoError> {
    let bad = |m: String| Err(RequestInfoError::BadRequest(m));
    let not_found = |why: &str| {
        Err(RequestInfoError::NotFound(format!(
            "the server could not find the requested resource ({why})"
        )))
    };
    if !raw.starts_with('/') {
        return bad(format!(
            "invalid request path {raw:?}: it must start with '/'"
        ));
    }
    if raw.contains(['?', '#']) {
        // The caller passes the query separately; a '?' or '#' here would be read differently
        // by whoever parses the path next.
        return bad(format!(
            "invalid request path {raw:?}: '?' and '#' must be percent-encoded"
        ));
    }
    let rest = &raw[1..];
    if rest.is_empty() {
        return Ok("/".to_string());
    }
    let (rest, trailing_slash) = match rest.strip_suffix('/') {
        Some(r) => (r, true),
        None => (rest, false),
    };
    // Nearly every path is already normal: no escapes, no control characters, no empty or
    // dot segments. It is its own normal form, and one copy is all it costs.
    let plain = !rest.bytes().any(|b| b == b'%' || b < 0x20 || b == 0x7f)
        && rest
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..");
    if plain {
        return Ok(raw.to_string());
    }
    let mut segments = Vec::new();
    for raw_segment in rest.split('/') {
        if raw_segment.is_empty() {
            return not_found("the path has an empty segment");
        }
        let bytes = raw_segment.as_bytes();
        let mut decoded = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let b = if bytes[i] == b'%' {
                let Some(b) = hex_pair(bytes, i) else {
                    let end = (i + 3).min(bytes.len());
                    let escape = String::from_utf8_lossy(&bytes[i..end]);
                    return bad(format!("invalid URL escape {escape:?}"));
                };
                if b == b'/' {
                    return bad(
                        "the request path must not contain an encoded slash (%2F)".to_string()
                    );
                }
                i += 3;
                b
            } else {
                i += 1;
                bytes[i - 1]
            };
            if b < 0x20 || b == 0x7f {
                return bad("net/url: invalid control character in URL".to_string());
            }
            decoded.push(b);
        }
        let Ok(segment) = String::from_utf8(decoded) else {
            return bad("the request path is not valid UTF-8 once decoded".to_string());
        };
        if segment == "." || segment == ".." {
            return not_found("the path has a '.' or '..' segment");
        }
        segments.push(segment);
    }
    let mut path = format!("/{}", segments.join("/"));
    if trailing_slash {
        path.push('/');
    }
    Ok(path)
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// method, path, query, verb, api prefix, group, version, namespace, resource,
    /// subresource, name, parts (space-separated), long-running.
    type Row = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        bool,
    );

    #[rustfmt::skip]
    const ROWS: &[Row] = &[
        // kube's TestGetAPIRequestInfo: resource paths
        ("GET", "/api/v1/namespaces", "", "list", "api", "", "v1", "", "namespaces", "", "", "namespaces", false),
        ("GET", "/api/v1/namespaces/other", "", "get", "api", "", "v1", "other", "namespaces", "", "other", "namespaces other", false),
        ("GET", "/api/v1/namespaces/other/pods", "", "list", "api", "", "v1", "other", "pods", "", "", "pods", false),
        ("GET", "/api/v1/namespaces/other/pods/foo", "", "get", "api", "", "v1", "other", "pods", "", "foo", "pods foo", false),
        ("HEAD", "/api/v1/namespaces/other/pods/foo", "", "get", "api", "", "v1", "other", "pods", "", "foo", "pods foo", false),
        ("GET", "/api/v1/pods", "", "list", "api", "", "v1", "", "pods", "", "", "pods", false),
        ("HEAD", "/api/v1/pods", "", "list", "api", "", "v1", "", "pods", "", "", "pods", false),
        // special verbs
        ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "", "proxy", "api", "", "v1", "other", "pods", "", "foo", "pods foo", true),
        ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "", "proxy", "api", "", "v1", "other", "pods", "", "foo", "pods foo subpath not a subresource", true),
        ("GET", "/api/v1/proxy/nodes/n1:10250/metrics", "", "proxy", "api", "", "v1", "", "nodes", "", "n1:10250", "nodes n1:10250 metrics", true),
        ("GET", "/api/v1/watch/pods", "", "watch", "api", "", "v1", "", "pods", "", "", "pods", true),
        ("GET", "/api/v1/pods", "watch=true", "watch", "api", "", "v1", "", "pods", "", "", "pods", true),
        ("GET", "/api/v1/pods", "watch=false", "list", "api", "", "v1", "", "pods", "", "", "pods", false),
        ("GET", "/api/v1/pods", "watch=FALSE", "list", "api", "", "v1", "", "pods", "", "", "pods", false),
        ("GET", "/api/v1/pods", "watch=", "watch", "api", "", "v1", "", "pods", "", "", "pods", true),
        ("GET", "/api/v1/watch/namespaces/other/pods", "", "watch", "api", "", "v1", "other", "pods", "", "", "pods", true),
        ("GET", "/api/v1/watch/namespaces/other", "", "watch", "api", "", "v1", "other", "namespaces", "", "other", "namespaces other", true),
        ("POST", "/api/v1/watch/pods", "", "watch", "api", "", "v1", "", "pods", "", "", "pods", true),
        ("GET", "/api/v1/namespaces/other/pods", "watch=1", "watch", "api", "", "v1", "other", "pods", "", "", "pods", true),
        ("GET", "/api/v1/namespaces/other/pods", "watch=0", "list", "api", "", "v1", "other", "pods", "", "", "pods", false),
        ("GET", "/apis/apps/v1/watch/namespaces/default/deployments/web", "", "watch", "apis", "apps", "v1", "default", "deployments", "", "web", "deployments web", true),
        // subresources
        ("GET", "/api/v1/namespaces/other/pods/foo/status", "", "get", "api", "", "v1", "other", "pods", "status", "foo", "pods foo status", false),
        ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "", "get", "api", "", "v1", "other", "pods", "proxy", "foo", "pods foo proxy subpath", true),
        ("PUT", "/api/v1/namespaces/other/finalize", "", "update", "api", "", "v1", "other", "namespaces", "finalize", "other", "namespaces other finalize", false),
        ("PUT", "/api/v1/namespaces/other/status", "", "update", "api", "", "v1", "other", "namespaces", "status", "other", "namespaces other status", false),
        ("GET", "/api/v1/namespaces/foo/status", "", "get", "api", "", "v1", "foo", "namespaces", "status", "foo", "namespaces foo status", false),
        ("GET", "/api/v1/namespaces/default/pods/web/log", "", "get", "api", "", "v1", "default", "pods", "log", "web", "pods web log", true),
        ("GET", "/api/v1/namespaces/default/pods/web/log", "follow=true&container=app", "get", "api", "", "v1", "default", "pods", "log", "web", "pods web log", true),
        ("GET", "/api/v1/namespaces/default/pods/web/log", "follow=false", "get", "api", "", "v1", "default", "pods", "log", "web", "pods web log", true),
        ("POST", "/api/v1/namespaces/default/pods/web/exec", "command=ls&stdout=true", "create", "api", "", "v1", "default", "pods", "exec", "web", "pods web exec", true),
        ("GET", "/api/v1/namespaces/default/pods/web/exec", "command=ls", "get", "api", "", "v1", "default", "pods", "exec", "web", "pods web exec", true),
        ("POST", "/api/v1/namespaces/default/pods/web/attach", "", "create", "api", "", "v1", "default", "pods", "attach", "web", "pods web attach", true),
        ("POST", "/api/v1/namespaces/default/pods/web/portforward", "ports=8080", "create", "api", "", "v1", "default", "pods", "portforward", "web", "pods web portforward", true),
        ("GET", "/api/v1/nodes/n1/proxy/metrics", "", "get", "api", "", "v1", "", "nodes", "proxy", "n1", "nodes n1 proxy metrics", true),
        ("GET", "/api/v1/namespaces/kube-system/services/https:metrics-server:/proxy/metrics", "", "get", "api", "", "v1", "kube-system", "services", "proxy", "https:metrics-server:", "services https:metrics-server: proxy metrics", true),
        ("POST", "/api/v1/namespaces/default/serviceaccounts/default/token", "", "create", "api", "", "v1", "default", "serviceaccounts", "token", "default", "serviceaccounts default token", false),
        ("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale", "", "get", "apis", "apps", "v1", "default", "deployments", "scale", "web", "deployments web scale", false),
        // verbs
        ("PATCH", "/api/v1/namespaces/other/pods/foo", "", "patch", "api", "", "v1", "other", "pods", "", "foo", "pods foo", false),
        ("DELETE", "/api/v1/namespaces/other/pods/foo", "", "delete", "api", "", "v1", "other", "pods", "", "foo", "pods foo", false),
        ("DELETE", "/api/v1/namespaces/other", "", "delete", "api", "", "v1", "other", "namespaces", "", "other", "namespaces other", false),
        ("POST", "/api/v1/namespaces/other/pods", "", "create", "api", "", "v1", "other", "pods", "", "", "pods", false),
        ("PUT", "/apis/apps/v1/namespaces/default/deployments/web", "", "update", "apis", "apps", "v1", "default", "deployments", "", "web", "deployments web", false),
        ("OPTIONS", "/api/v1/pods", "", "", "api", "", "v1", "", "pods", "", "", "pods", false),
        ("get", "/api/v1/pods", "", "", "api", "", "v1", "", "pods", "", "", "pods", false),
        // deletecollection
        ("DELETE", "/api/v1/nodes", "", "deletecollection", "api", "", "v1", "", "nodes", "", "", "nodes", false),
        ("DELETE", "/api/v1/namespaces", "", "deletecollection", "api", "", "v1", "", "namespaces", "", "", "namespaces", false),
        ("DELETE", "/api/v1/namespaces/other/pods", "", "deletecollection", "api", "", "v1", "other", "pods", "", "", "pods", false),
        ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "", "deletecollection", "apis", "extensions", "v1", "other", "pods", "", "", "pods", false),
        // groups, versions, cluster scope
        ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "", "create", "apis", "extensions", "v1beta3", "other", "pods", "", "", "pods", false),
        ("POST", "/apis/apps/v1/namespaces/default/deployments", "", "create", "apis", "apps", "v1", "default", "deployments", "", "", "deployments", false),
        ("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", "", "get", "apis", "rbac.authorization.k8s.io", "v1", "", "clusterroles", "", "admin", "clusterroles admin", false),
        ("GET", "/apis/apps/v1/deployments", "limit=500", "list", "apis", "apps", "v1", "", "deployments", "", "", "deployments", false),
        ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "", "create", "apis", "authorization.k8s.io", "v1", "", "selfsubjectaccessreviews", "", "", "selfsubjectaccessreviews", false),
        ("GET", "/apis/apps/v1/namespaces", "", "list", "apis", "apps", "v1", "", "namespaces", "", "", "namespaces", false),
        ("GET", "/apis/batch/v1/job/foo/scale", "", "get", "apis", "batch", "v1", "", "job", "scale", "foo", "job foo scale", false),
        ("GET", "/api/v1/pods/", "", "list", "api", "", "v1", "", "pods", "", "", "pods", false),
        // non-resource requests
        ("GET", "/healthz", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/livez/etcd", "verbose", "get", "", "", "", "", "", "", "", "", false),
        ("HEAD", "/version", "", "head", "", "", "", "", "", "", "", "", false),
        ("GET", "/openapi/v3/apis/apps/v1", "hash=ABC", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/openapi/v2", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/apis", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/api", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/api/v1", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/api/v1/", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/apis/apps", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/apis/apps/v1", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/apis/apps/v1/", "", "get", "", "", "", "", "", "", "", "", false),
        ("GET", "/", "", "get", "", "", "", "", "", "", "", "", false),
        ("POST", "/badprefix/version/resource", "", "post", "", "", "", "", "", "", "", "", false),
        ("GET", "/debug/pprof/profile", "seconds=30", "get", "", "", "", "", "", "", "", "", true),
        ("GET", "/metrics", "", "get", "", "", "", "", "", "", "", "", false),
    ];

    #[test]
    fn table_of_real_paths() {
        assert!(ROWS.len() >= 40);
        for row in ROWS {
            let (
                method,
                path,
                query,
                verb,
                prefix,
                group,
                version,
                ns,
                resource,
                sub,
                name,
                _kube_parts, // kube's RequestInfo.Parts, not kept: nothing reads it
                long,
            ) = *row;
            let got = resolve(method, path, query)
                .unwrap_or_else(|e| panic!("{method} {path}?{query}: {e}"));
            let want = RequestInfo {
                is_resource_request: !prefix.is_empty(),
                path: path.to_string(),
                verb: verb.to_string(),
                api_prefix: prefix.to_string(),
                api_group: group.to_string(),
                api_version: version.to_string(),
                namespace: ns.to_string(),
                resource: resource.to_string(),
                subresource: sub.to_string(),
                name: name.to_string(),
                long_running: long,
                field_selector: String::new(),
                label_selector: String::new(),
            };
            assert_eq!(got, want, "{method} {path}?{query}");
        }
    }

    fn info(method: &str, path: &str, query: &str) -> RequestInfo {
        resolve(method, path, query).unwrap_or_else(|e| panic!("{method} {path}?{query}: {e}"))
    }

    /// (name, verb, fieldSelector, labelSelector) of a request.
    fn selector_view(method: &str, path: &str, query: &str) -> (String, String, String, String) {
        let i = info(method, path, query);
        (i.name, i.verb, i.field_selector, i.label_selector)
    }

    fn view(name: &str, verb: &str, field: &str, label: &str) -> (String, String, String, String) {
        (name.into(), verb.into(), field.into(), label.into())
    }

    #[test]
    fn selectors_and_metadata_name_like_kube() {
        // kube's TestSelectorParsing
        let p = "/apis/group/version/resource";
        assert_eq!(selector_view("GET", p, ""), view("", "list", "", ""));
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name=name1"),
            view("name1", "list", "metadata.name=name1", "")
        );
        assert_eq!(
            selector_view("GET", p, "watch=true&fieldSelector=metadata.name=name1"),
            view("name1", "watch", "metadata.name=name1", "")
        );
        assert_eq!(
            selector_view("GET", p, "fieldSelector=foo=bar&labelSelector=baz=qux"),
            view("", "list", "foo=bar", "baz=qux")
        );
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name=name1,foo"),
            view("", "list", "metadata.name=name1,foo", "")
        );
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name=name1,foo&watch=true"),
            view("", "watch", "metadata.name=name1,foo", "")
        );
        assert_eq!(
            selector_view(
                "GET",
                p,
                "fieldSelector=metadata.name=name1,foo&watch=false"
            ),
            view("", "list", "metadata.name=name1,foo", "")
        );
        assert_eq!(
            selector_view("DELETE", p, "fieldSelector=foo=bar&labelSelector=baz=qux"),
            view("", "deletecollection", "foo=bar", "baz=qux")
        );
        assert_eq!(
            selector_view(
                "GET",
                p,
                "fieldSelector=metadata.name=foo&fieldSelector=metadata.name=bar&labelSelector=foo=bar&labelSelector=foo=baz"
            ),
            view("foo", "list", "metadata.name=foo", "foo=bar")
        );
        assert_eq!(
            selector_view(
                "GET",
                "/apis/group/version/resource/name",
                "fieldSelector=foo=bar&labelSelector=foo=bar"
            ),
            view("name", "get", "", "")
        );
        assert_eq!(
            selector_view(
                "GET",
                "/apis/group/version/watch/resource",
                "fieldSelector=metadata.name=foo&labelSelector=foo=bar"
            ),
            view("", "watch", "", "")
        );
        assert_eq!(
            selector_view(
                "GET",
                "/apis/group/version/watch/resource/name",
                "fieldSelector=metadata.name=foo&labelSelector=foo=bar"
            ),
            view("name", "watch", "", "")
        );

        // More of the same rules.
        // an encoded '=' and '+' for space decode before the selector is read
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name%3Dweb"),
            view("web", "list", "metadata.name=web", "")
        );
        assert_eq!(
            selector_view("GET", p, "labelSelector=app+in+(a,b)"),
            view("", "list", "", "app in (a,b)")
        );
        // `==` counts, `!=` does not; the first metadata.name term in sorted order wins
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name==x").0,
            "x"
        );
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name!=x").0,
            ""
        );
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name=b,metadata.name=a").0,
            "a"
        );
        assert_eq!(
            selector_view(
                "GET",
                p,
                "fieldSelector=metadata.namespace=ns,metadata.name=x"
            )
            .0,
            "x"
        );
        // escaped value
        assert_eq!(
            selector_view("GET", p, r"fieldSelector=metadata.name=a\,b").0,
            "a,b"
        );
        // names that cannot be path segments do not narrow the request
        for bad in ["..", ".", "a%2Fb", "a%25b"] {
            let q = format!("fieldSelector=metadata.name={bad}");
            assert_eq!(selector_view("GET", p, &q).0, "", "{q}");
        }
        // a bad integer option fails kube's ListOptions decoding: no name, watch from the
        // raw parameter only
        assert_eq!(
            selector_view("GET", p, "fieldSelector=metadata.name=x&limit=abc"),
            view("", "list", "metadata.name=x", "")
        );
        assert_eq!(
            selector_view(
                "GET",
                p,
                "fieldSelector=metadata.name=x&timeoutSeconds=&watch=1"
            ),
            view("", "watch", "metadata.name=x", "")
        );
        assert_eq!(
            selector_view(
                "GET",
                p,
                "fieldSelector=metadata.name=x&limit=10&timeoutSeconds=-5"
            ),
            view("x", "list", "metadata.name=x", "")
        );
        // invalid escapes in the selector count as a decode failure
        assert_eq!(
            selector_view("GET", p, r"fieldSelector=metadata.name=a\x").0,
            ""
        );
        // selectors on a single-object delete are not recorded, and a name comes from the path
        // only for delete
        assert_eq!(
            selector_view(
                "DELETE",
                "/api/v1/namespaces/ns/pods",
                "fieldSelector=metadata.name=foo"
            ),
            view("", "deletecollection", "metadata.name=foo", "")
        );
        assert_eq!(
            selector_view(
                "DELETE",
                "/api/v1/namespaces/ns/pods/foo",
                "labelSelector=a=b"
            ),
            view("foo", "delete", "", "")
        );
        // a watch by metadata.name on a namespaced collection
        let i = info(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            "fieldSelector=metadata.name%3Dkube-root-ca.crt&watch=true&resourceVersion=100",
        );
        assert_eq!(
            (
                i.verb.as_str(),
                i.name.as_str(),
                i.namespace.as_str(),
                i.long_running
            ),
            ("watch", "kube-root-ca.crt", "default", true)
        );
    }

    #[test]
    fn watch_values_follow_go_bool_conversion() {
        let verb = |q: &str| info("GET", "/api/v1/pods", q).verb;
        assert_eq!(verb("watch=true"), "watch");
        assert_eq!(verb("watch=yes"), "watch");
        assert_eq!(verb("watch=False"), "list");
        assert_eq!(verb("watch=0&watch=1"), "list");
        assert_eq!(verb("watch=1&watch=0"), "watch");
        // Go's EqualFold folds U+017F to 's'
        assert_eq!(verb("watch=fal%C5%BFe"), "list");
        assert_eq!(verb("watch=falsey"), "watch");
        assert_eq!(verb("watch"), "watch");
        // a watch on a named object is still a get (kube only converts collection gets)
        assert_eq!(
            info("GET", "/api/v1/namespaces/a/pods/b", "watch=true").verb,
            "get"
        );
    }

    #[test]
    fn path_normalization_decodes_once() {
        let i = info("GET", "/api/v1/namespaces/def%61ult/pods", "");
        assert_eq!(i.namespace, "default");
        assert_eq!(i.path, "/api/v1/namespaces/default/pods");
        assert_eq!(i.escaped_path(), "/api/v1/namespaces/default/pods");

        let i = info("GET", "/%61pi/v1/pods", "");
        assert_eq!(
            (i.api_prefix.as_str(), i.resource.as_str()),
            ("api", "pods")
        );

        let i = info("GET", "/api/v1/namespaces/default/configmaps/a%20b", "");
        assert_eq!(i.name, "a b");
        assert_eq!(i.path, "/api/v1/namespaces/default/configmaps/a b");
        assert_eq!(
            i.escaped_path(),
            "/api/v1/namespaces/default/configmaps/a%20b"
        );

        // %25 is a literal '%', decoded once and never again
        let i = info("GET", "/api/v1/namespaces/default/configmaps/a%252Fb", "");
        assert_eq!(i.name, "a%2Fb");
        assert_eq!(
            i.escaped_path(),
            "/api/v1/namespaces/default/configmaps/a%252Fb"
        );

        // non-ASCII, raw or encoded, is the same path
        let raw = info("GET", "/api/v1/namespaces/caf\u{e9}/pods", "");
        let encoded = info("GET", "/api/v1/namespaces/caf%C3%A9/pods", "");
        assert_eq!(raw, encoded);
        assert_eq!(raw.escaped_path(), "/api/v1/namespaces/caf%C3%A9/pods");

        // lower- and upper-case hex are the same
        assert_eq!(
            info("GET", "/api/v1/namespaces/a%3ab/pods", ""),
            info("GET", "/api/v1/namespaces/a%3Ab/pods", "")
        );
        // sub-delimiters stay as they are in the canonical form; others are escaped
        let i = info(
            "GET",
            "/api/v1/namespaces/ns/services/https:web:8443/proxy/a(b)",
            "",
        );
        assert_eq!(
            i.escaped_path(),
            "/api/v1/namespaces/ns/services/https:web:8443/proxy/a%28b%29"
        );
        // '+' in a path is a plus, not a space (only queries decode '+')
        assert_eq!(info("GET", "/api/v1/namespaces/a+b", "").name, "a+b");
        // the trailing slash is kept in the path but not in the parts
        let i = info("GET", "/api/v1/namespaces/", "");
        assert_eq!(
            (i.path.as_str(), i.resource.as_str(), i.name.as_str()),
            ("/api/v1/namespaces/", "namespaces", "")
        );
        assert_eq!(info("GET", "/", "").escaped_path(), "/");
    }

    fn not_found(path: &str) {
        match resolve("GET", path, "") {
            Err(RequestInfoError::NotFound(m)) => {
                assert!(
                    m.starts_with("the server could not find the requested resource"),
                    "{m}"
                )
            }
            other => panic!("{path}: expected NotFound, got {other:?}"),
        }
    }

    fn bad_request(path: &str) -> String {
        match resolve("GET", path, "") {
            Err(RequestInfoError::BadRequest(m)) => m,
            other => panic!("{path:?}: expected BadRequest, got {other:?}"),
        }
    }

    #[test]
    fn malformed_paths_are_rejected() {
        for path in [
            "//api/v1/pods",
            "/api//v1/pods",
            "/api/v1/pods//",
            "//",
            "/api/v1/namespaces/../secrets",
            "/api/v1/namespaces/%2e%2e/secrets",
            "/api/v1/namespaces/%2E/secrets",
            "/api/v1/./pods",
            "/..",
            "/healthz/..",
            "/api/v1/namespaces/default/pods/.%2e",
        ] {
            not_found(path);
        }
        assert_eq!(
            bad_request("/api/v1/namespaces/a%2Fb/pods"),
            "the request path must not contain an encoded slash (%2F)"
        );
        bad_request("/api/v1/namespaces/a%2fb/pods");
        for path in [
            "/api/v1/pods%00",
            "/api/v1/po\0ds",
            "/api/v1/pods%0A",
            "/a%7F",
            "/a\tb",
        ] {
            assert_eq!(
                bad_request(path),
                "net/url: invalid control character in URL"
            );
        }
        assert_eq!(bad_request("/api/v1/pods%zz"), "invalid URL escape \"%zz\"");
        assert_eq!(bad_request("/api/v1/pods%4"), "invalid URL escape \"%4\"");
        assert_eq!(bad_request("/api/v1/pods%"), "invalid URL escape \"%\"");
        assert_eq!(
            bad_request("/api/v1/namespaces/%FF/pods"),
            "the request path is not valid UTF-8 once decoded"
        );
        bad_request("");
        bad_request("api/v1/pods");
        bad_request("*");
        bad_request("http://example.com/api");
        bad_request("/api/v1/pods?watch=1");
        bad_request("/api/v1/pods#x");
        // kube errors on a verb prefix with nothing after it
        assert_eq!(
            bad_request("/api/v1/watch"),
            "unable to determine kind and namespace from url, /api/v1/watch"
        );
        assert_eq!(
            resolve("GET", "/apis/apps/v1/proxy", "a=b c"),
            Err(RequestInfoError::BadRequest(
                "unable to determine kind and namespace from url, /apis/apps/v1/proxy?a=b+c"
                    .to_string()
            ))
        );
    }

    #[test]
    fn parse_query_follows_go() {
        let q = |s: &str| -> Vec<(String, String)> { parse_query(s) };
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(q(""), pairs(&[]));
        assert_eq!(q("a=1&b=2"), pairs(&[("a", "1"), ("b", "2")]));
        assert_eq!(q("a=1&a=2"), pairs(&[("a", "1"), ("a", "2")]));
        assert_eq!(q("a=x+y&b=%2B"), pairs(&[("a", "x y"), ("b", "+")]));
        assert_eq!(q("a"), pairs(&[("a", "")]));
        assert_eq!(q("a="), pairs(&[("a", "")]));
        assert_eq!(q("=x"), pairs(&[("", "x")]));
        assert_eq!(q("a=b=c"), pairs(&[("a", "b=c")]));
        assert_eq!(q("&&a=1&"), pairs(&[("a", "1")]));
        // semicolons are no separator since Go 1.17: the whole pair is dropped
        assert_eq!(q("a=1;b=2&c=3"), pairs(&[("c", "3")]));
        // a bad escape drops that pair only
        assert_eq!(q("%zz=1&a=%4&b=2"), pairs(&[("b", "2")]));
        assert_eq!(q("k%65y=v%61l"), pairs(&[("key", "val")]));
        assert_eq!(q("c=%E2%9C%93"), pairs(&[("c", "\u{2713}")]));
        assert_eq!(q("c=%FF"), pairs(&[("c", "\u{fffd}")]));
        assert_eq!(q("sel=a%3Db%2Cc%21%3Dd"), pairs(&[("sel", "a=b,c!=d")]));
    }

    #[test]
    fn field_selector_helper_parses_like_kube() {
        assert_eq!(field_selector_exact_name(""), Ok(None));
        assert_eq!(field_selector_exact_name(","), Ok(None));
        assert_eq!(
            field_selector_exact_name("metadata.name="),
            Ok(Some(String::new()))
        );
        assert_eq!(
            field_selector_exact_name("a=b,metadata.name=c"),
            Ok(Some("c".into()))
        );
        assert_eq!(field_selector_exact_name("a"), Err(()));
        assert_eq!(field_selector_exact_name("a=b=c"), Err(()));
        assert_eq!(field_selector_exact_name(r"a=b\"), Err(()));
        assert_eq!(
            field_selector_exact_name(r"metadata.name=a\=b"),
            Ok(Some("a=b".into()))
        );
        // the empty name does not become the request's name
        assert_eq!(
            info("GET", "/api/v1/pods", "fieldSelector=metadata.name=").name,
            ""
        );
    }

    #[test]
    fn segments_split_as_str_split_does() {
        for path in ["a", "api/v1/namespaces/default", "a//b/", "/x", "é/ü/ñ", ""] {
            let expected: Vec<&str> = path.split('/').collect();
            assert_eq!(super::split_segments(path), expected, "{path}");
        }
    }
}

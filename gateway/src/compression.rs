//! gzip for local responses to clients that send `Accept-Encoding: gzip` (kubectl and every
//! client-go client do): large bodies as kube-apiserver's `APIResponseCompression` compresses
//! them, and cached documents (discovery, OpenAPI) compressed once per version and reused.

use std::sync::OnceLock;

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use kubegate_backends::api::Body;
use std::io::Write;

/// kube-apiserver's `defaultGzipThresholdBytes`: smaller bodies are not worth compressing
/// on every request.
pub const DYNAMIC_THRESHOLD: usize = 128 * 1024;
/// Cached documents (those with an `ETag`) are compressed once per version, so compressing
/// them costs nothing per request and pays from a smaller size than kube's threshold: a
/// merged discovery document of ~90 KiB goes out as ~10 KiB. (kube-apiserver compresses them
/// only from 128 KiB, like any response.)
pub const CACHED_THRESHOLD: usize = 8 * 1024;
/// The most compressed cached-document bytes kept; older versions are evicted first.
const CACHE_BYTES: u64 = 64 * 1024 * 1024;
/// kube's `defaultGzipContentEncodingLevel` for bodies compressed per request.
const DYNAMIC_LEVEL: u32 = 1;

/// How a response body goes out.
#[derive(Debug, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    /// Compressed once and cached under this key: the (strong) ETag and the body's
    /// `Content-Type`. kube-openapi gives the JSON and protobuf forms of `/openapi/v2` one
    /// ETag (they vary by `Accept`), so the ETag alone does not name one body.
    CachedGzip(String),
    /// Compressed for this response.
    Gzip,
}

/// Whether an `Accept-Encoding` value accepts gzip (`q=0` refuses it).
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(value) = accept_encoding else {
        return false;
    };
    value.split(',').any(|clause| {
        let mut params = clause.split(';');
        let coding = params.next().unwrap_or("").trim();
        if !coding.eq_ignore_ascii_case("gzip") {
            return false;
        }
        !params.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .or_else(|| p.strip_prefix("Q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q == 0.0)
        })
    })
}

/// The encoding for `body` given the client's `Accept-Encoding`.
pub fn choose(body: &Body, accept_encoding: Option<&str>) -> Encoding {
    let len = body.len();
    if len < CACHED_THRESHOLD || !accepts_gzip(accept_encoding) {
        return Encoding::Identity;
    }
    let header = |name: &str| {
        body.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if header("content-encoding").is_some() {
        return Encoding::Identity;
    }
    match header("etag") {
        // Only strong ETags name one exact body.
        Some(etag) if body.status == 200 && !etag.starts_with("W/") => {
            Encoding::CachedGzip(format!("{etag} {}", body.content_type))
        }
        _ if len >= DYNAMIC_THRESHOLD => Encoding::Gzip,
        _ => Encoding::Identity,
    }
}

/// The body compressed as `encoding` says (off the async workers: a large body takes
/// milliseconds).
pub async fn compress(encoding: &Encoding, parts: Vec<Bytes>) -> std::io::Result<Bytes> {
    match encoding {
        Encoding::Identity => Ok(concat(parts)),
        Encoding::Gzip => blocking(move || gzip(&parts, Compression::new(DYNAMIC_LEVEL))).await,
        Encoding::CachedGzip(etag) => {
            let compressed = cache()
                .try_get_with(etag.clone(), async move {
                    blocking(move || gzip(&parts, Compression::default())).await
                })
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            Ok(compressed)
        }
    }
}

async fn blocking(
    work: impl FnOnce() -> std::io::Result<Bytes> + Send + 'static,
) -> std::io::Result<Bytes> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(std::io::Error::other)?
}

fn gzip(parts: &[Bytes], level: Compression) -> std::io::Result<Bytes> {
    let len: usize = parts.iter().map(Bytes::len).sum();
    let mut encoder = GzEncoder::new(Vec::with_capacity(len / 4), level);
    for part in parts {
        encoder.write_all(part)?;
    }
    Ok(encoder.finish()?.into())
}

fn concat(mut parts: Vec<Bytes>) -> Bytes {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    let mut all = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for part in &parts {
        all.extend_from_slice(part);
    }
    all.into()
}

/// Compressed cached documents by ETag and `Content-Type`. Process-wide: an ETag is a SHA-512
/// of the document (of its JSON form for both forms of `/openapi/v2`, hence the type in the
/// key), so one entry can never answer for another document.
fn cache() -> &'static moka::future::Cache<String, Bytes> {
    static CACHE: OnceLock<moka::future::Cache<String, Bytes>> = OnceLock::new();
    CACHE.get_or_init(|| {
        moka::future::Cache::builder()
            .max_capacity(CACHE_BYTES)
            .weigher(|etag: &String, body: &Bytes| {
                u32::try_from(etag.len() + body.len()).unwrap_or(u32::MAX)
            })
            .build()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn body(len: usize, headers: &[(&str, &str)]) -> Body {
        Body {
            status: 200,
            content_type: "application/json".into(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: Bytes::from(vec![b'a'; len]),
            more: Vec::new(),
            encoding: Default::default(),
        }
    }

    #[test]
    fn accept_encoding_is_parsed_with_q_values() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, GZIP;q=0.5")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("gzip; q=0.0, br")));
        assert!(!accepts_gzip(Some("br, deflate")));
        assert!(!accepts_gzip(Some("x-gzip")));
        assert!(!accepts_gzip(None));
    }

    #[test]
    fn only_large_bodies_and_cached_documents_are_compressed() {
        let gz = Some("gzip");
        assert_eq!(choose(&body(1024, &[]), gz), Encoding::Identity);
        assert_eq!(choose(&body(64 * 1024, &[]), gz), Encoding::Identity);
        assert_eq!(choose(&body(DYNAMIC_THRESHOLD, &[]), gz), Encoding::Gzip);
        assert_eq!(
            choose(&body(64 * 1024, &[("ETag", "\"AB\"")]), gz),
            Encoding::CachedGzip("\"AB\" application/json".into())
        );
        // The same ETag on a body of another type is another entry (`/openapi/v2`'s JSON and
        // protobuf forms share theirs).
        let mut protobuf = body(64 * 1024, &[("ETag", "\"AB\"")]);
        protobuf.content_type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf".into();
        assert_eq!(
            choose(&protobuf, gz),
            Encoding::CachedGzip(
                "\"AB\" application/com.github.proto-openapi.spec.v2.v1.0+protobuf".into()
            )
        );
        // Small documents, weak ETags, already-encoded bodies, clients that did not ask.
        assert_eq!(
            choose(&body(1024, &[("ETag", "\"AB\"")]), gz),
            Encoding::Identity
        );
        assert_eq!(
            choose(&body(64 * 1024, &[("ETag", "W/\"AB\"")]), gz),
            Encoding::Identity
        );
        assert_eq!(
            choose(&body(DYNAMIC_THRESHOLD, &[("Content-Encoding", "br")]), gz),
            Encoding::Identity
        );
        assert_eq!(
            choose(&body(DYNAMIC_THRESHOLD, &[]), None),
            Encoding::Identity
        );
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .expect("valid gzip");
        out
    }

    #[tokio::test]
    async fn parts_compress_to_their_concatenation_and_documents_are_cached() {
        let parts = vec![
            Bytes::from_static(b"[{\"a\":1},"),
            Bytes::from_static(b"{\"b\":2}]"),
        ];
        let out = compress(&Encoding::Gzip, parts.clone())
            .await
            .expect("gzip");
        assert_eq!(gunzip(&out), b"[{\"a\":1},{\"b\":2}]");
        let etag = Encoding::CachedGzip("\"test-etag-1\"".into());
        let first = compress(&etag, parts).await.expect("gzip");
        assert_eq!(gunzip(&first), b"[{\"a\":1},{\"b\":2}]");
        // The same ETag is answered from the cache, whatever body comes with it.
        let again = compress(&etag, vec![Bytes::from_static(b"ignored")])
            .await
            .expect("cached");
        assert_eq!(again, first);
        let plain = compress(&Encoding::Identity, vec![Bytes::from_static(b"x")])
            .await
            .expect("identity");
        assert_eq!(plain, Bytes::from_static(b"x"));
    }
}

//! Sending an authorized request to a remote backend through pingora: the peer (address,
//! TLS server name, roots, kubegate's front-proxy client certificate, HTTP/2 when offered,
//! pooled keep-alive connections) and the request headers — the caller's identity as
//! `X-Remote-*` headers, with every client-sent credential and identity header removed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kubegate_policy::UserInfo;
use pingora::http::RequestHeader;
use pingora::protocols::ALPN;
use pingora::upstreams::peer::{H1UpgradePolicy, HttpPeer, Peer, PeerOptions, Proxy, Tracer};
use pingora::utils::tls::CertKey;

use super::table::Backend;
use crate::key_pair_files::{certified_key_from_pem, FollowedPair, KeyPairFiles};

/// How a backend learns who the caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    /// `X-Remote-User`/`-Uid`/`-Group`/`-Extra-*`, believed because kubegate's client
    /// certificate is the front-proxy one the backend trusts (kube-aggregator's way).
    FrontProxy,
    /// `Impersonate-User`/`-Uid`/`-Group`/`-Extra-*` on a request authenticated as a user the
    /// backend allows to impersonate (a delegate cluster that trusts kubegate's token).
    Impersonate,
}

/// kubegate's identity towards one kind of backend: the client certificate it presents, the
/// bearer token it sends, and how it forwards the caller.
pub struct ProxyIdentity {
    /// The client certificate and key, followed as their files change.
    client_cert: Option<FollowedPair<ClientCertificate>>,
    /// `Bearer <token>` from a token file, read again as client-go reads it.
    pub bearer: Option<super::token_file::TokenFile>,
    pub forwarding: Forwarding,
}

/// How often the client certificate's files are compared with what is loaded, when a new
/// routing table, a probe or a document fetch asks for it. kube-aggregator follows
/// `--proxy-client-cert-file` the same way (its `dynamiccertificates` look every minute), and
/// client-go re-reads a kubeconfig's client certificate files (every five minutes).
const CLIENT_CERT_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// A client certificate chain and key as loaded from their files.
pub struct ClientCertificate {
    /// For pingora's connector (forwarded requests).
    pub cert_key: Arc<CertKey>,
    /// The leaf certificate, DER.
    leaf: Vec<u8>,
    /// The same certificate and key as PEM, for kubegate's own HTTPS clients (probes).
    pub pem: (Vec<u8>, Vec<u8>),
}

impl KeyPairFiles for ClientCertificate {
    const WHAT: &'static str = "proxy client certificate";

    /// The chain and key, checked to parse (pingora panics on bad ones) and to belong
    /// together (a certificate renewed before its key is not used until the key follows).
    fn read(cert_file: &Path, key_file: &Path) -> Result<Self, String> {
        let read = |path: &Path, what: &str| {
            std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))
        };
        let cert_pem = read(cert_file, "client certificate")?;
        let key_pem = read(key_file, "client key")?;
        let certified = certified_key_from_pem(&cert_pem, &key_pem, cert_file, key_file)
            .map_err(|e| format!("client certificate: {e}"))?;
        for cert in &certified.cert {
            x509_parser::parse_x509_certificate(cert.as_ref())
                .map_err(|e| format!("client certificate {}: {e}", cert_file.display()))?;
        }
        let key = rustls_pemfile::private_key(&mut &key_pem[..])
            .map_err(|e| format!("client key {}: {e}", key_file.display()))?
            .ok_or_else(|| format!("client key {}: no private key found", key_file.display()))?;
        let chain: Vec<Vec<u8>> = certified.cert.iter().map(|c| c.as_ref().to_vec()).collect();
        let leaf = chain.first().cloned().unwrap_or_default();
        let cert_key = CertKey::new(chain, key.secret_der().to_vec());
        Ok(ClientCertificate {
            cert_key: Arc::new(cert_key),
            leaf,
            pem: (cert_pem, key_pem),
        })
    }

    fn leaf(&self) -> &[u8] {
        &self.leaf
    }
}

impl ProxyIdentity {
    /// The front-proxy identity: the certificate chain and key.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<ProxyIdentity, String> {
        Self::with_credentials(Some((cert_file, key_file)), None, Forwarding::FrontProxy)
    }

    /// An identity from a client certificate and/or a token file, forwarding as `forwarding`.
    pub fn with_credentials(
        cert: Option<(&Path, &Path)>,
        token_file: Option<&Path>,
        forwarding: Forwarding,
    ) -> Result<ProxyIdentity, String> {
        let client_cert = cert
            .map(|(cert_file, key_file)| {
                FollowedPair::load(cert_file, key_file, CLIENT_CERT_CHECK_INTERVAL)
            })
            .transpose()?;
        let bearer = token_file
            .map(super::token_file::TokenFile::load)
            .transpose()?;
        Ok(ProxyIdentity {
            client_cert,
            bearer,
            forwarding,
        })
    }

    /// An identity without credentials (tests).
    #[cfg(test)]
    pub fn without_credentials(forwarding: Forwarding) -> ProxyIdentity {
        ProxyIdentity {
            client_cert: None,
            bearer: None,
            forwarding,
        }
    }

    /// The client certificate to present now (the files looked at if the check is due).
    pub fn client_certificate(&self) -> Option<Arc<ClientCertificate>> {
        self.client_cert.as_ref().map(FollowedPair::current)
    }

    /// Changes how often the certificate's files are compared (tests use zero).
    #[cfg(test)]
    pub fn with_check_interval(mut self, interval: Duration) -> ProxyIdentity {
        self.client_cert = self
            .client_cert
            .map(|pair| pair.with_check_interval(interval));
        self
    }
}

/// How long dialling a backend may take (kube-aggregator's dialer uses 30s; a backend that
/// has not answered a SYN in 10s is down for every practical purpose).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The peer for one request to `backend` at `address`.
pub fn peer(
    backend: &Backend,
    address: std::net::SocketAddr,
    upgrade: bool,
    read_timeout: Option<Duration>,
) -> HttpPeer {
    let server_name = backend
        .location
        .as_ref()
        .map(|l| l.server_name.clone())
        .unwrap_or_default();
    let mut peer = HttpPeer::new(address, true, server_name);
    peer.client_cert_key = backend.client_cert.as_ref().map(|c| c.cert_key.clone());
    peer.group_key = backend.pool_key;
    let options = &mut peer.options;
    options.connection_timeout = Some(CONNECT_TIMEOUT);
    options.read_timeout = read_timeout;
    options.idle_timeout = Some(Duration::from_secs(90));
    options.ca = backend.roots.clone();
    // insecureSkipTLSVerify is the APIService's own choice, as in kube.
    options.verify_cert = !backend.service.insecure_skip_tls_verify;
    options.verify_hostname = !backend.service.insecure_skip_tls_verify;
    if upgrade {
        // SPDY (kubectl exec/attach/port-forward's fallback) as well as WebSocket upgrades
        // must reach the backend; the headers are checked in `rewrite_request`.
        options.http_upstream_request_policy.h1_upgrade = H1UpgradePolicy::Preserve;
        options.alpn = ALPN::H1;
    } else {
        // Upgrade headers on a request that is not to be tunnelled (not long-running) are
        // not forwarded: the backend sees a plain request and cannot switch protocols.
        options.http_upstream_request_policy.h1_upgrade = H1UpgradePolicy::Deny;
        options.alpn = ALPN::H2H1;
        options.max_h2_streams = 100;
    }
    peer
}

/// A backend's peer for forwarded requests, with its connection-pool key computed once.
///
/// pingora's `HttpPeer::reuse_hash` hashes the client certificate by formatting its serial
/// number (an allocation per byte) on every call, and a pooled request calls it twice (take
/// and release). Everything that hash covers is fixed per backend and address, so the value
/// is kept; every other part of the `Peer` interface is `HttpPeer`'s.
#[derive(Clone)]
pub struct PooledPeer {
    peer: HttpPeer,
    reuse_hash: u64,
}

impl PooledPeer {
    pub fn new(peer: HttpPeer) -> PooledPeer {
        let reuse_hash = peer.reuse_hash();
        PooledPeer { peer, reuse_hash }
    }

    /// The per-read timeout the peer's sessions get.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.peer.options.read_timeout
    }

    /// How long an unused connection stays pooled.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.peer.options.idle_timeout
    }
}

impl std::fmt::Display for PooledPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.peer.fmt(f)
    }
}

impl Peer for PooledPeer {
    fn address(&self) -> &pingora::protocols::l4::socket::SocketAddr {
        self.peer.address()
    }
    fn tls(&self) -> bool {
        self.peer.tls()
    }
    fn sni(&self) -> &str {
        self.peer.sni()
    }
    fn reuse_hash(&self) -> u64 {
        self.reuse_hash
    }
    fn get_proxy(&self) -> Option<&Proxy> {
        self.peer.get_proxy()
    }
    fn get_peer_options(&self) -> Option<&PeerOptions> {
        self.peer.get_peer_options()
    }
    /// None: a change to the options could change the reuse hash, which is kept.
    fn get_mut_peer_options(&mut self) -> Option<&mut PeerOptions> {
        None
    }
    fn matches_fd<V: std::os::fd::AsRawFd>(&self, fd: V) -> bool {
        self.peer.matches_fd(fd)
    }
    fn get_client_cert_key(&self) -> Option<&Arc<CertKey>> {
        self.peer.get_client_cert_key()
    }
    fn get_tracer(&self) -> Option<Tracer> {
        self.peer.get_tracer()
    }
}

/// Puts `parts` (a rewritten copy of `request`'s) in place of `request`, as a header without
/// a header-name case map (see [`rewrite_parts`]) that still says whether it ends its stream.
pub fn replace_request(request: &mut RequestHeader, parts: http::request::Parts) {
    let ends_stream = request.send_end_stream();
    *request = RequestHeader::from(parts);
    if let Some(ends_stream) = ends_stream {
        request.set_send_end_stream(ends_stream);
    }
}

/// Whether the bytes `request` would send as its target are its URI's (they differ for
/// absolute-form or non-UTF-8 targets, which the rewrite rebuilds).
pub fn raw_target_is_uri(request: &RequestHeader) -> bool {
    request.uri.scheme().is_none()
        && request.uri.authority().is_none()
        && request
            .uri
            .path_and_query()
            .is_some_and(|target| request.raw_path() == target.as_str().as_bytes())
}

/// Rewrites a request for the backend: path (the normalized one that was authorized, under
/// the backend's base path), Host, and identity headers for `user`. It works on the request's
/// `http` parts, writing straight into the plain header map: pingora's `insert_header` and
/// `append_header` copy every name into a title-cased buffer and parse that copy again (two
/// allocations for a name such as `X-Remote-Group`), even when there is no case map to keep
/// in step.
///
/// This runs for every proxied request, so it avoids per-header work it does not need: the
/// client's target is kept when it already is the one to send (`raw_target_is_uri` says the
/// client's raw target bytes are its URI's), and header names are constants or built once,
/// not per value.
pub fn rewrite_parts(
    parts: &mut http::request::Parts,
    raw_target_is_uri: bool,
    user: &UserInfo,
    impersonation: &[(http::HeaderName, http::HeaderValue)],
    backend: &Backend,
    escaped_path: &str,
    raw_query: Option<&str>,
) -> pingora::Result<()> {
    let base = backend
        .location
        .as_ref()
        .map(|l| l.base_path.as_str())
        .unwrap_or("");
    let query = raw_query.filter(|q| !q.is_empty());
    if !(raw_target_is_uri && sends_target(&parts.uri, base, escaped_path, query)) {
        parts.uri = backend_uri(base, escaped_path, query)?;
    }
    let headers = &mut parts.headers;
    strip_client_identity(headers);
    if let Ok(location) = &backend.location {
        headers.insert(http::header::HOST, header_value(&location.http_host)?);
    }
    let identity = &backend.identity;
    if let Some(bearer) = &identity.bearer {
        headers.insert(http::header::AUTHORIZATION, bearer.header());
    }
    let names = match identity.forwarding {
        Forwarding::FrontProxy => &FRONT_PROXY_HEADERS,
        Forwarding::Impersonate => &IMPERSONATION_HEADERS,
    };
    // Every identity header was removed above, so appending cannot add to a client's value.
    headers.append(names.user.clone(), header_value(&user.name)?);
    if !user.uid.is_empty() {
        headers.append(names.uid.clone(), header_value(&user.uid)?);
    }
    for group in &user.groups {
        headers.append(names.group.clone(), header_value(group)?);
    }
    for (key, values) in &user.extra {
        // Room for a few `%XX` escapes (a key usually has one `/`) without growing.
        let mut name = String::with_capacity(names.extra_prefix.len() + key.len() + 8);
        name.push_str(names.extra_prefix);
        push_escaped_extra_key(&mut name, key);
        // Parsed once, shared by every value's header.
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| {
            pingora::Error::explain(
                pingora::ErrorType::InvalidHTTPHeader,
                format!("an extra key's header name: {e}"),
            )
        })?;
        for value in values {
            headers.append(name.clone(), header_value(value)?);
        }
    }
    // The client's own impersonation, for a delegate cluster to decide (as sent, after the
    // stripping above).
    for (name, value) in impersonation {
        headers.append(name.clone(), value.clone());
    }
    Ok(())
}

/// The names a caller's identity is forwarded under.
struct IdentityHeaders {
    user: http::HeaderName,
    uid: http::HeaderName,
    group: http::HeaderName,
    /// Lower case, as a parsed `HeaderName` would have it.
    extra_prefix: &'static str,
}

static FRONT_PROXY_HEADERS: IdentityHeaders = IdentityHeaders {
    user: http::HeaderName::from_static("x-remote-user"),
    uid: http::HeaderName::from_static("x-remote-uid"),
    group: http::HeaderName::from_static("x-remote-group"),
    extra_prefix: "x-remote-extra-",
};

static IMPERSONATION_HEADERS: IdentityHeaders = IdentityHeaders {
    user: http::HeaderName::from_static("impersonate-user"),
    uid: http::HeaderName::from_static("impersonate-uid"),
    group: http::HeaderName::from_static("impersonate-group"),
    extra_prefix: "impersonate-extra-",
};

/// A header value from kubegate's own data (a user name, a group, a host name, an audit id).
pub(crate) fn header_value(value: &str) -> pingora::Result<http::HeaderValue> {
    http::HeaderValue::from_str(value).map_err(|e| {
        pingora::Error::explain(
            pingora::ErrorType::InvalidHTTPHeader,
            format!("a forwarded header value: {e}"),
        )
    })
}

/// Adds the address the request came from to `X-Forwarded-For`, as Go's reverse proxy does
/// for kube-aggregator: the values already there (the client's own, or another proxy's)
/// joined with ", ", then `client`. Extension API servers record it as the request's source
/// IPs (audit `sourceIPs`), so without it they would see only kubegate, or only what the
/// client claimed.
pub fn append_forwarded_for(
    headers: &mut http::HeaderMap,
    client: Option<std::net::IpAddr>,
) -> pingora::Result<()> {
    let Some(client) = client else {
        return Ok(());
    };
    // Written straight into one buffer, with a parsed name: formatting the address to a
    // String and naming the header by string (parsed again on insert) cost ~2,500
    // instructions of a proxied GET.
    let mut value = Vec::with_capacity(48);
    for prior in headers.get_all(&X_FORWARDED_FOR) {
        value.extend_from_slice(prior.as_bytes());
        value.extend_from_slice(b", ");
    }
    match client {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().iter().enumerate() {
                if i > 0 {
                    value.push(b'.');
                }
                push_decimal(&mut value, *octet);
            }
        }
        std::net::IpAddr::V6(v6) => {
            use std::io::Write as _;
            let _ = write!(value, "{v6}");
        }
    }
    let value = http::HeaderValue::try_from(value).map_err(|e| {
        pingora::Error::explain(
            pingora::ErrorType::InvalidHTTPHeader,
            format!("X-Forwarded-For: {e}"),
        )
    })?;
    headers.insert(X_FORWARDED_FOR, value);
    Ok(())
}

/// `n` in decimal, without the formatting machinery.
fn push_decimal(out: &mut Vec<u8>, n: u8) {
    if n >= 100 {
        out.push(b'0' + n / 100);
    }
    if n >= 10 {
        out.push(b'0' + (n / 10) % 10);
    }
    out.push(b'0' + n % 10);
}

const X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");

/// Whether the request already targets `base` + `escaped_path` + `?query` in origin form
/// (the usual case: a client's path is normally already normalized, and most backends have
/// no base path), so the URI need not be rebuilt and reparsed.
fn sends_target(uri: &http::Uri, base: &str, escaped_path: &str, query: Option<&str>) -> bool {
    if uri.scheme().is_some() || uri.authority().is_some() {
        return false;
    }
    let Some(target) = uri.path_and_query() else {
        return false;
    };
    let Some(rest) = target.as_str().strip_prefix(base) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix(escaped_path) else {
        return false;
    };
    match query {
        None => rest.is_empty(),
        Some(query) => rest.strip_prefix('?') == Some(query),
    }
}

/// `base` + `escaped_path` + `?query` as a URI.
fn backend_uri(base: &str, escaped_path: &str, query: Option<&str>) -> pingora::Result<http::Uri> {
    let query_len = query.map_or(0, |q| q.len() + 1);
    let mut target = String::with_capacity(base.len() + escaped_path.len() + query_len);
    target.push_str(base);
    target.push_str(escaped_path);
    if let Some(query) = query {
        target.push('?');
        target.push_str(query);
    }
    // From a String, the URI keeps the buffer instead of copying it.
    http::Uri::try_from(target).map_err(|e| {
        pingora::Error::explain(
            pingora::ErrorType::InternalError,
            format!("building the backend URI: {e}"),
        )
    })
}

/// Whether connecting failed below TLS (refused, timed out, unreachable): the address is
/// unusable and another of the backend's may be dialled instead, as Go's dialer moves on
/// to a host's next address. TLS failures are not among these.
pub fn is_dial_failure(error: &pingora::Error) -> bool {
    matches!(
        error.etype(),
        pingora::ErrorType::ConnectTimedout
            | pingora::ErrorType::ConnectRefused
            | pingora::ErrorType::ConnectNoRoute
            | pingora::ErrorType::ConnectError
            | pingora::ErrorType::SocketError
    )
}

/// Removes every request header that carries a client's credentials or claimed identity:
/// none of them may reach a backend, which trusts kubegate's certificate for whatever
/// `X-Remote-*` says.
fn strip_client_identity(headers: &mut http::HeaderMap) {
    headers.remove(http::header::AUTHORIZATION);
    headers.remove(http::header::PROXY_AUTHORIZATION);
    // A websocket client's bearer token rides in a subprotocol (kube's
    // `base64url.bearer.authorization.k8s.io.` prefix); the other protocols go on.
    if headers.contains_key(http::header::SEC_WEBSOCKET_PROTOCOL) {
        let kept = kubegate_policy::authn::bearer::websocket_protocols_without_bearer(headers);
        if let Some(kept) = kept {
            headers.remove(http::header::SEC_WEBSOCKET_PROTOCOL);
            if let Some(kept) = kept {
                headers.insert(http::header::SEC_WEBSOCKET_PROTOCOL, kept);
            }
        }
    }
    // Collecting nothing allocates nothing: the usual request has none of these.
    let claimed: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| is_claimed_identity_header(name.as_str()))
        .cloned()
        .collect();
    for name in &claimed {
        headers.remove(name);
    }
}

/// `Impersonate-*` and `X-Remote-*`: an identity a client claims rather than proves.
/// `name` is an `http::HeaderName`, always lower case.
fn is_claimed_identity_header(name: &str) -> bool {
    name.starts_with("impersonate-") || name.starts_with("x-remote-")
}

/// kube's `headerKeyEscape`, appended to `out`: every byte that is not a legal header-name
/// character (and `%` itself) becomes `%XX`, so any extra key survives the trip and is
/// unescaped by the backend.
fn push_escaped_extra_key(out: &mut String, key: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in key.bytes() {
        let legal = byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'!' | b'#'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        if legal {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregator::apiservice::ApiService;

    /// The rewrite as the proxy path applies it to a pingora request.
    fn rewrite_request(
        request: &mut RequestHeader,
        user: &UserInfo,
        backend: &Backend,
        escaped_path: &str,
        raw_query: Option<&str>,
    ) -> pingora::Result<()> {
        let raw_target_is_uri = raw_target_is_uri(request);
        let mut parts = request.as_owned_parts();
        rewrite_parts(
            &mut parts,
            raw_target_is_uri,
            user,
            &[],
            backend,
            escaped_path,
            raw_query,
        )?;
        replace_request(request, parts);
        Ok(())
    }
    use crate::aggregator::resolve::Location;
    use std::collections::BTreeMap;

    fn no_credentials(forwarding: Forwarding) -> Arc<ProxyIdentity> {
        Arc::new(ProxyIdentity::without_credentials(forwarding))
    }

    fn backend() -> Backend {
        backend_with(no_credentials(Forwarding::FrontProxy))
    }

    fn backend_with(identity: Arc<ProxyIdentity>) -> Backend {
        Backend::new(
            ApiService::remote_for_tests("wardle.example.com", "v1alpha1", "wardle"),
            Ok(Location {
                server_name: "api.wardle.svc".into(),
                http_host: "api.wardle.svc".into(),
                addresses: vec!["127.0.0.1:8443".parse().expect("addr")],
                dialing: crate::aggregator::resolve::Dialing::Spread,
                base_path: "/base".into(),
            }),
            identity,
        )
    }

    #[test]
    fn client_identity_is_replaced_by_the_authenticated_one() {
        let mut request =
            RequestHeader::build("GET", b"/apis/wardle.example.com/v1alpha1/flunders", None)
                .expect("request");
        for (name, value) in [
            ("Authorization", "Bearer secret"),
            ("X-Remote-User", "forged"),
            ("x-remote-group", "system:masters"),
            ("X-Remote-Extra-Scopes", "all"),
            ("Impersonate-User", "admin"),
            ("Accept", "application/json"),
        ] {
            request.append_header(name, value).expect("header");
        }
        let mut extra = BTreeMap::new();
        extra.insert(
            "example.org/Scope Key".to_string(),
            vec!["a".to_string(), "b".to_string()],
        );
        let user = UserInfo {
            name: "bob".into(),
            uid: "u-1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra,
        };
        rewrite_request(
            &mut request,
            &user,
            &backend(),
            "/apis/wardle.example.com/v1alpha1/flunders",
            Some("watch=1"),
        )
        .expect("rewritten");
        let values = |name: &str| -> Vec<String> {
            request
                .headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap_or("").to_string())
                .collect()
        };
        assert!(values("authorization").is_empty());
        assert!(values("impersonate-user").is_empty());
        assert!(values("x-remote-extra-scopes").is_empty());
        assert_eq!(values("x-remote-user"), vec!["bob"]);
        assert_eq!(values("x-remote-uid"), vec!["u-1"]);
        assert_eq!(
            values("x-remote-group"),
            vec!["dev", "system:authenticated"]
        );
        assert_eq!(
            values("x-remote-extra-example.org%2FScope%20Key"),
            vec!["a", "b"]
        );
        assert_eq!(values("accept"), vec!["application/json"]);
        assert_eq!(values("host"), vec!["api.wardle.svc"]);
        assert_eq!(
            request.uri.to_string(),
            "/base/apis/wardle.example.com/v1alpha1/flunders?watch=1"
        );
    }

    #[test]
    fn a_websocket_token_subprotocol_never_reaches_the_backend() {
        let mut request = RequestHeader::build(
            "GET",
            b"/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one/exec",
            None,
        )
        .expect("request");
        for (name, value) in [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            (
                "Sec-WebSocket-Protocol",
                "v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.c2VjcmV0",
            ),
            ("Sec-WebSocket-Protocol", "v4.channel.k8s.io"),
        ] {
            request.append_header(name, value).expect("header");
        }
        rewrite_request(
            &mut request,
            &UserInfo::new("bob", vec![]),
            &backend(),
            "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one/exec",
            None,
        )
        .expect("rewritten");
        let offered: Vec<&str> = request
            .headers
            .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(offered, ["v5.channel.k8s.io,v4.channel.k8s.io"]);
        assert_eq!(
            request
                .headers
                .get(http::header::UPGRADE)
                .map(|v| v.as_bytes()),
            Some(&b"websocket"[..]),
            "the upgrade itself is passed on"
        );
    }

    #[test]
    fn pooled_connections_are_kept_apart_by_trust() {
        use pingora::upstreams::peer::Peer;
        let dir = tempfile::tempdir().expect("tempdir");
        let front = crate::certs::ensure_front_proxy(dir.path()).expect("front-proxy pki");
        let identity =
            Arc::new(ProxyIdentity::load(&front.client_cert, &front.client_key).expect("identity"));
        let ca_pem = std::fs::read(&front.ca_cert).expect("ca");
        let with_ca = |pem: Option<Vec<u8>>| {
            let plain = backend_with(identity.clone());
            let mut service = plain.service.clone();
            service.ca_bundle = pem;
            Backend::new(service, plain.location.clone(), identity.clone())
        };
        let address = "127.0.0.1:8443".parse().expect("addr");
        let a = peer(&with_ca(Some(ca_pem.clone())), address, false, None);
        let same = peer(&with_ca(Some(ca_pem)), address, false, None);
        let other = peer(&with_ca(None), address, false, None);
        assert_eq!(a.reuse_hash(), same.reuse_hash());
        assert_ne!(a.reuse_hash(), other.reuse_hash());
    }

    #[test]
    fn peers_differing_only_by_ca_bundle_do_not_share_connections() {
        use pingora::upstreams::peer::Peer;
        let dirs = [
            tempfile::tempdir().expect("tempdir"),
            tempfile::tempdir().expect("tempdir"),
        ];
        let front = crate::certs::ensure_front_proxy(dirs[0].path()).expect("front-proxy pki");
        let other_front =
            crate::certs::ensure_front_proxy(dirs[1].path()).expect("second front-proxy pki");
        let identity =
            Arc::new(ProxyIdentity::load(&front.client_cert, &front.client_key).expect("identity"));
        let first_ca = std::fs::read(&front.ca_cert).expect("ca");
        let second_ca = std::fs::read(&other_front.ca_cert).expect("second ca");
        assert_ne!(first_ca, second_ca);
        // Same APIService name, address, server name, client certificate and options: only
        // the caBundle differs.
        let with_ca = |pem: Vec<u8>| {
            let plain = backend_with(identity.clone());
            let mut service = plain.service.clone();
            service.ca_bundle = Some(pem);
            Backend::new(service, plain.location.clone(), identity.clone())
        };
        let first = with_ca(first_ca);
        let second = with_ca(second_ca);
        assert!(first.ca_error.is_none() && second.ca_error.is_none());
        let address = "127.0.0.1:8443".parse().expect("addr");
        for upgrade in [false, true] {
            let first_peer = peer(&first, address, upgrade, None);
            let second_peer = peer(&second, address, upgrade, None);
            assert_eq!(first_peer._address, second_peer._address);
            assert_eq!(first_peer.sni, second_peer.sni);
            assert_ne!(
                first_peer.reuse_hash(),
                second_peer.reuse_hash(),
                "a connection verified against one caBundle must not serve the other"
            );
            // Each request's peer for the same backend finds the same pool.
            assert_eq!(
                first_peer.reuse_hash(),
                peer(&first, address, upgrade, None).reuse_hash()
            );
        }
    }

    #[test]
    fn a_renewed_proxy_certificate_is_presented_by_the_next_backends_and_a_broken_one_never() {
        pingora::tls::install_default_crypto_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let front = crate::certs::ensure_front_proxy(dir.path()).expect("front-proxy pki");
        let identity = Arc::new(
            ProxyIdentity::load(&front.client_cert, &front.client_key)
                .expect("identity")
                .with_check_interval(Duration::ZERO),
        );
        let leaf_of = |backend: &Backend| {
            let cert = backend.client_cert.as_ref().expect("a client certificate");
            let address = "127.0.0.1:8443".parse().expect("addr");
            let peer = peer(backend, address, false, None);
            let presented = peer
                .client_cert_key
                .expect("the peer presents a certificate");
            assert!(Arc::ptr_eq(&presented, &cert.cert_key));
            cert.leaf().to_vec()
        };
        let before = backend_with(identity.clone());
        let first_leaf = leaf_of(&before);
        assert_eq!(
            backend_with(identity.clone()).fingerprint,
            before.fingerprint,
            "an unchanged certificate changes nothing"
        );

        // Renewed as the periodic renewal renews it (here: its files gone, issued again).
        let (old_cert, old_key) = (
            std::fs::read(&front.client_cert).expect("cert"),
            std::fs::read(&front.client_key).expect("key"),
        );
        std::fs::remove_file(&front.client_cert).expect("remove cert");
        std::fs::remove_file(&front.client_key).expect("remove key");
        crate::certs::ensure_front_proxy(dir.path()).expect("renewed");
        let after = backend_with(identity.clone());
        let second_leaf = leaf_of(&after);
        assert_ne!(
            first_leaf, second_leaf,
            "the renewed certificate is presented"
        );
        assert_ne!(after.fingerprint, before.fingerprint, "probes start again");
        let address = "127.0.0.1:8443".parse().expect("addr");
        assert_ne!(
            peer(&after, address, false, None).reuse_hash(),
            peer(&before, address, false, None).reuse_hash(),
            "connections made with the old certificate are not reused"
        );
        // The backend made before keeps presenting the certificate it was made with.
        assert_eq!(leaf_of(&before), first_leaf);

        // Half a renewal (the old certificate back next to the new key) is not used.
        std::fs::write(&front.client_cert, &old_cert).expect("old cert");
        assert_eq!(leaf_of(&backend_with(identity.clone())), second_leaf);
        std::fs::write(&front.client_key, &old_key).expect("old key");
        assert_eq!(leaf_of(&backend_with(identity.clone())), first_leaf);
    }

    #[test]
    fn impersonation_carries_the_caller_on_kubegates_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "delegate-token\n").expect("token");
        let identity =
            ProxyIdentity::with_credentials(None, Some(&token_file), Forwarding::Impersonate)
                .expect("identity");
        let mut request = RequestHeader::build("GET", b"/api/v1/pods", None).expect("request");
        for (name, value) in [
            ("Authorization", "Bearer client-secret"),
            ("Impersonate-User", "admin"),
            ("Impersonate-Group", "system:masters"),
            ("X-Remote-User", "forged"),
        ] {
            request.append_header(name, value).expect("header");
        }
        let mut extra = BTreeMap::new();
        extra.insert("scopes".to_string(), vec!["a".to_string()]);
        let user = UserInfo {
            name: "alice".into(),
            uid: "u-2".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra,
        };
        rewrite_request(
            &mut request,
            &user,
            &backend_with(Arc::new(identity)),
            "/api/v1/pods",
            None,
        )
        .expect("rewritten");
        let values = |name: &str| -> Vec<String> {
            request
                .headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(values("authorization"), vec!["Bearer delegate-token"]);
        assert!(request
            .headers
            .get("authorization")
            .is_some_and(|v| v.is_sensitive()));
        assert_eq!(values("impersonate-user"), vec!["alice"]);
        assert_eq!(values("impersonate-uid"), vec!["u-2"]);
        assert_eq!(
            values("impersonate-group"),
            vec!["dev", "system:authenticated"]
        );
        assert_eq!(values("impersonate-extra-scopes"), vec!["a"]);
        assert!(values("x-remote-user").is_empty());

        let empty = dir.path().join("empty");
        std::fs::write(&empty, "  \n").expect("empty");
        assert!(
            ProxyIdentity::with_credentials(None, Some(&empty), Forwarding::Impersonate).is_err()
        );
    }

    fn escape_extra_key(key: &str) -> String {
        let mut escaped = String::new();
        push_escaped_extra_key(&mut escaped, key);
        escaped
    }

    #[test]
    fn extra_keys_escape_like_kube() {
        assert_eq!(escape_extra_key("scopes"), "scopes");
        assert_eq!(escape_extra_key("a/b c%"), "a%2Fb%20c%25");
        assert_eq!(escape_extra_key(""), "");
        // Every legal header-name byte stays; each byte of a UTF-8 character is escaped.
        assert_eq!(
            escape_extra_key("!#$&'*+-.^_`|~09AZaz"),
            "!#$&'*+-.^_`|~09AZaz"
        );
        assert_eq!(escape_extra_key("café:\"\n"), "caf%C3%A9%3A%22%0A");
        assert_eq!(
            escape_extra_key("authentication.kubernetes.io/credential-id"),
            "authentication.kubernetes.io%2Fcredential-id"
        );
    }

    fn rewritten(
        method: &str,
        target: &[u8],
        base: &str,
        escaped_path: &str,
        raw_query: Option<&str>,
    ) -> RequestHeader {
        let mut b = backend();
        if let Ok(location) = &mut b.location {
            location.base_path = base.into();
        }
        let mut request = RequestHeader::build(method, target, None).expect("request");
        let user = UserInfo::new("bob", vec!["dev".into()]);
        rewrite_request(&mut request, &user, &b, escaped_path, raw_query).expect("rewritten");
        request
    }

    #[test]
    fn the_authorized_path_is_what_the_backend_gets() {
        let path = "/apis/wardle.example.com/v1alpha1/flunders";
        // The client's target is the authorized one: sent as it came.
        for (target, query, sent) in [
            (path.to_string(), None, path.to_string()),
            (
                format!("{path}?watch=1"),
                Some("watch=1"),
                format!("{path}?watch=1"),
            ),
            // An empty query is no query.
            (format!("{path}?"), Some(""), path.to_string()),
            (format!("{path}?"), None, path.to_string()),
            // The path that was authorized is sent, not a differently spelled one.
            (
                "/apis/wardle.example.com/v1alpha1/./flunders".to_string(),
                None,
                path.to_string(),
            ),
            (
                format!("{path}?watch=1"),
                Some("watch=0"),
                format!("{path}?watch=0"),
            ),
            (format!("{path}?watch=1"), None, path.to_string()),
            (path.to_string(), Some("watch=1"), format!("{path}?watch=1")),
            // Absolute form becomes origin form.
            (
                format!("https://kubegate.example:6443{path}"),
                None,
                path.to_string(),
            ),
        ] {
            let request = rewritten("GET", target.as_bytes(), "", path, query);
            assert_eq!(request.uri.to_string(), sent, "client target {target}");
            assert_eq!(
                request.raw_path(),
                sent.as_bytes(),
                "client target {target}"
            );
        }
        // Under a backend URL's base path.
        let request = rewritten("GET", path.as_bytes(), "/base", path, Some("limit=5"));
        assert_eq!(request.uri.to_string(), format!("/base{path}?limit=5"));
        assert_eq!(
            request.raw_path(),
            format!("/base{path}?limit=5").as_bytes()
        );
        // Whatever the client's target, the backend gets base + authorized path.
        for target in [
            format!("/base{path}"),
            format!("/base/base{path}"),
            path.to_string(),
        ] {
            let authorized = format!("/base{path}");
            let request = rewritten("GET", target.as_bytes(), "/base", &authorized, None);
            assert_eq!(
                request.uri.to_string(),
                format!("/base/base{path}"),
                "{target}"
            );
        }
    }

    #[test]
    fn identity_headers_are_stripped_in_any_spelling_and_written_once() {
        let mut request =
            RequestHeader::build("GET", b"/apis/wardle.example.com/v1alpha1/flunders", None)
                .expect("request");
        for (name, value) in [
            ("AUTHORIZATION", "Bearer secret"),
            ("Proxy-Authorization", "Basic c2VjcmV0"),
            ("x-REMOTE-uid", "forged"),
            ("X-Remote-Group", "system:masters"),
            ("X-Remote-Group", "other"),
            ("x-remote-extra-example.org%2Fscope", "all"),
            ("IMPERSONATE-GROUP", "system:masters"),
            ("Impersonate-Extra-Scopes", "all"),
            ("X-Remote", "not an identity header"),
            ("User-Agent", "kubectl"),
        ] {
            request.append_header(name, value).expect("header");
        }
        let mut extra = BTreeMap::new();
        extra.insert(
            "example.org/scope".to_string(),
            vec!["one".to_string(), "two".to_string(), "three".to_string()],
        );
        extra.insert("empty".to_string(), Vec::new());
        let user = UserInfo {
            name: "bob".into(),
            uid: String::new(),
            groups: Vec::new(),
            extra,
        };
        rewrite_request(
            &mut request,
            &user,
            &backend(),
            "/apis/wardle.example.com/v1alpha1/flunders",
            None,
        )
        .expect("rewritten");
        let mut names: Vec<(String, String)> = request
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    value.to_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        names.sort();
        let expected: Vec<(String, String)> = [
            ("host", "api.wardle.svc"),
            ("user-agent", "kubectl"),
            ("x-remote", "not an identity header"),
            ("x-remote-extra-example.org%2fscope", "one"),
            ("x-remote-extra-example.org%2fscope", "three"),
            ("x-remote-extra-example.org%2fscope", "two"),
            ("x-remote-user", "bob"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        assert_eq!(names, expected);
        // On an HTTP/1.1 wire, once each and values in order. Names the rewrite adds go out
        // lower-case (header names are case-insensitive; kube lower-cases extra keys).
        let mut wire = Vec::new();
        request.header_to_h1_wire(&mut wire);
        let wire = String::from_utf8(wire).expect("utf-8");
        assert!(wire.contains("x-remote-user: bob\r\n"), "{wire}");
        assert!(
            wire.contains(
                "x-remote-extra-example.org%2fscope: one\r\n\
                 x-remote-extra-example.org%2fscope: two\r\n\
                 x-remote-extra-example.org%2fscope: three\r\n"
            ),
            "{wire}"
        );
        assert!(
            !wire.to_ascii_lowercase().contains("authorization"),
            "{wire}"
        );
        assert!(!wire.to_ascii_lowercase().contains("impersonate"), "{wire}");
        assert!(!wire.contains("system:masters"), "{wire}");
    }

    #[test]
    fn round_robin_over_ready_endpoints() {
        let mut b = backend();
        if let Ok(location) = &mut b.location {
            location
                .addresses
                .push("127.0.0.2:8443".parse().expect("addr"));
        }
        let picks: Vec<_> = (0..4).filter_map(|_| b.next_address()).collect();
        assert_eq!(picks[0], picks[2]);
        assert_ne!(picks[0], picks[1]);
    }

    #[test]
    fn the_client_address_is_appended_to_x_forwarded_for() {
        let forwarded = |prior: &[&str], client: Option<&str>| {
            let mut headers = http::HeaderMap::new();
            for value in prior {
                headers.append(
                    "x-forwarded-for",
                    http::HeaderValue::from_str(value).expect("value"),
                );
            }
            append_forwarded_for(&mut headers, client.map(|c| c.parse().expect("address")))
                .expect("appended");
            headers
                .get_all("x-forwarded-for")
                .iter()
                .map(|v| v.to_str().expect("text").to_string())
                .collect::<Vec<_>>()
        };
        // None before: the client's address alone.
        assert_eq!(forwarded(&[], Some("127.0.0.1")), ["127.0.0.1"]);
        for address in ["0.9.10.255", "100.99.200.1", "1.20.199.250"] {
            assert_eq!(forwarded(&[], Some(address)), [address]);
        }
        assert_eq!(forwarded(&[], Some("fe80::1:2")), ["fe80::1:2"]);
        // A client's (or an earlier proxy's) claim stays, with the real address after it.
        assert_eq!(
            forwarded(&["6.6.6.6"], Some("10.1.2.3")),
            ["6.6.6.6, 10.1.2.3"]
        );
        // Several header lines become one, in order, as Go joins them.
        assert_eq!(
            forwarded(&["1.1.1.1", "2.2.2.2, 3.3.3.3"], Some("::1")),
            ["1.1.1.1, 2.2.2.2, 3.3.3.3, ::1"]
        );
        // No address known (a Unix socket): left as it was.
        assert_eq!(forwarded(&["6.6.6.6"], None), ["6.6.6.6"]);
    }

    #[test]
    fn only_tunnelled_requests_forward_upgrade_headers() {
        let b = backend();
        let address = "127.0.0.1:443".parse().expect("address");
        let tunnel = peer(&b, address, true, None);
        assert!(matches!(
            tunnel.options.http_upstream_request_policy.h1_upgrade,
            H1UpgradePolicy::Preserve
        ));
        let plain = peer(&b, address, false, None);
        assert!(matches!(
            plain.options.http_upstream_request_policy.h1_upgrade,
            H1UpgradePolicy::Deny
        ));
    }
}

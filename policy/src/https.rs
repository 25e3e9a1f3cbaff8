//! Outgoing HTTPS for kubegate's own clients (authentication and authorization webhooks, JWT
//! issuers' discovery, APIService probes and discovery fetches): a reqwest client with exactly
//! the trust a kubeconfig or an APIService describes (custom roots, a fixed server name,
//! `insecure-skip-tls-verify`, a client certificate), and the small helpers around it.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// A client certificate chain and its key.
pub struct ClientIdentity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    pem: Vec<u8>,
}

impl ClientIdentity {
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<ClientIdentity, String> {
        let chain = rustls_pemfile::certs(&mut &cert_pem[..])
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("client certificate: {e}"))?;
        if chain.is_empty() {
            return Err("client certificate: no CERTIFICATE block found".to_string());
        }
        let key = rustls_pemfile::private_key(&mut &key_pem[..])
            .map_err(|e| format!("client key: {e}"))?
            .ok_or_else(|| "client key: no private key found".to_string())?;
        let mut pem = cert_pem.to_vec();
        if !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend_from_slice(key_pem);
        Ok(ClientIdentity { chain, key, pem })
    }
}

/// How an outgoing HTTPS client verifies servers and identifies itself.
pub struct TlsOptions {
    /// Roots that verify the server; the platform's roots when `None`.
    pub roots: Option<RootCertStore>,
    /// Accept any server certificate (kubeconfig `insecure-skip-tls-verify: true`).
    pub insecure: bool,
    /// Verify the server certificate for this name instead of the URL's host.
    pub server_name: Option<String>,
    pub client_auth: Option<ClientIdentity>,
    /// Refuse plain-HTTP URLs (and redirects to them).
    pub https_only: bool,
    /// Follow redirects (up to 10, as Go's client). Off, a redirect is the answer itself.
    pub follow_redirects: bool,
    /// Connect to these addresses for these host names (the TLS name stays the host's):
    /// how a probe reaches one endpoint of a Service under the Service's DNS name.
    pub resolve: Vec<(String, std::net::SocketAddr)>,
    /// The `Host` header every request carries instead of the URL's authority (an
    /// ExternalName Service's host, reached under the Service's TLS name).
    pub host: Option<String>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds a reqwest client with exactly the trust the options describe.
pub fn https_client(options: &TlsOptions) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder().https_only(options.https_only);
    if !options.follow_redirects {
        builder = builder.redirect(reqwest::redirect::Policy::none());
    }
    for (host, address) in &options.resolve {
        builder = builder.resolve(host, *address);
    }
    if let Some(host) = &options.host {
        let value = reqwest::header::HeaderValue::from_str(host)
            .map_err(|e| format!("host {host:?}: {e}"))?;
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::HOST, value);
        builder = builder.default_headers(headers);
    }
    let custom = options.roots.is_some() || options.insecure || options.server_name.is_some();
    let builder = if custom {
        let provider = provider();
        let verifier: Arc<dyn ServerCertVerifier> = if options.insecure {
            Arc::new(AcceptAnyServerCert(provider.clone()))
        } else {
            let roots = options.roots.clone().ok_or_else(|| {
                "tls-server-name needs certificate-authority: kubegate cannot override the name checked against the system roots".to_string()
            })?;
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("TLS verifier: {e}"))?;
            match &options.server_name {
                Some(name) => {
                    let name = ServerName::try_from(name.clone())
                        .map_err(|e| format!("tls-server-name {name:?}: {e}"))?;
                    Arc::new(FixedNameVerifier {
                        inner: webpki,
                        name,
                    })
                }
                None => webpki,
            }
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS config: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match &options.client_auth {
            Some(identity) => config
                .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
                .map_err(|e| format!("client certificate: {e}"))?,
            None => config.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        builder.tls_backend_preconfigured(config)
    } else {
        // The platform verifier reqwest uses for system roots takes the process-wide
        // rustls provider; installing ring fails harmlessly when one is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        match &options.client_auth {
            Some(identity) => builder.identity(
                reqwest::Identity::from_pem(&identity.pem)
                    .map_err(|e| format!("client certificate: {e}"))?,
            ),
            None => builder,
        }
    };
    builder
        .build()
        .map_err(|e| format!("HTTPS client: {}", error_chain(&e)))
}

/// Parses PEM certificates into a root store; at least one certificate is required, as kube's
/// `cert.NewPoolFromBytes`.
pub fn root_store_from_pem(pem: &[u8]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &pem[..]) {
        let cert = cert.map_err(|e| format!("invalid PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("invalid certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA certificates".to_string());
    }
    Ok(roots)
}

/// Reads a response body, refusing one larger than `limit`.
pub async fn read_body_capped(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading response: {}", error_chain(&e)))?
    {
        if body.len() + chunk.len() > limit {
            return Err(format!("response larger than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error with its causes, which is where reqwest puts the interesting part.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Verifies the chain as usual but for a fixed name (kubeconfig `tls-server-name`).
#[derive(Debug)]
struct FixedNameVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for FixedNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `insecure-skip-tls-verify`: any certificate is accepted, but the handshake signatures are
/// still checked so the connection is at least bound to the presented key.
#[derive(Debug)]
struct AcceptAnyServerCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback HTTP server that answers `/start` with a redirect to `/target` and
    /// `/target` with 200, then counts how many requests reached `/target`.
    async fn redirecting_server() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let address = listener.local_addr().expect("local address");
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    let request = String::from_utf8_lossy(&buf[..n]).to_string();
                    let answer = if request.starts_with("GET /target ") {
                        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                    } else {
                        "HTTP/1.1 302 Found\r\nlocation: /target\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    };
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        (address, reached)
    }

    fn plain_options(follow_redirects: bool) -> TlsOptions {
        TlsOptions {
            roots: None,
            insecure: false,
            server_name: None,
            client_auth: None,
            https_only: false,
            follow_redirects,
            resolve: Vec::new(),
            host: None,
        }
    }

    #[tokio::test]
    async fn a_redirect_is_the_answer_unless_following_is_asked_for() {
        let (address, reached) = redirecting_server().await;
        let url = format!("http://{address}/start");

        let strict = https_client(&plain_options(false)).expect("client");
        let answer = strict.get(&url).send().await.expect("answered");
        assert_eq!(answer.status().as_u16(), 302);
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);

        let following = https_client(&plain_options(true)).expect("client");
        let answer = following.get(&url).send().await.expect("answered");
        assert_eq!(answer.status().as_u16(), 200);
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

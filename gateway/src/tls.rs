//! The HTTPS listener's TLS: rustls with TLS 1.2/1.3, ALPN h2 + http/1.1, optional client
//! certificates verified against the client CA bundle, and the verified certificate's
//! subject (CN, every O) handed to the request through the TLS digest extension, where the
//! x509 authenticator reads it. This survives TLS 1.3 resumption.

use std::path::Path;
use std::sync::Arc;

use kubegate_policy::authn::PeerCertificate;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::TlsAccept;
use pingora::protocols::tls::TlsRef;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;

/// Errors building the TLS settings.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
    #[error("client CA bundle {path} holds no usable certificate")]
    EmptyBundle { path: String },
    #[error("building the client certificate verifier: {0}")]
    Verifier(String),
}

/// Reads every certificate of a PEM bundle into a root store.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let display = path.display().to_string();
    let pem = std::fs::read(path).map_err(|e| TlsError::Read {
        path: display.clone(),
        message: e.to_string(),
    })?;
    let mut roots = RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| TlsError::Read {
            path: display.clone(),
            message: e.to_string(),
        })?;
        roots.add(cert).map_err(|e| TlsError::Read {
            path: display.clone(),
            message: e.to_string(),
        })?;
    }
    if roots.is_empty() {
        return Err(TlsError::EmptyBundle { path: display });
    }
    Ok(roots)
}

/// Extracts the verified client certificate's subject after the handshake.
struct PeerIdentityCallback;

#[async_trait::async_trait]
impl TlsAccept for PeerIdentityCallback {
    async fn handshake_complete_callback(
        &self,
        tls: &TlsRef,
    ) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        let der = tls.peer_certificate_der()?;
        match PeerCertificate::from_der(der) {
            Ok(peer) => Some(Arc::new(peer)),
            Err(e) => {
                tracing::warn!(error = %e, "could not parse a verified client certificate");
                None
            }
        }
    }
}

/// TLS settings for the HTTPS listener.
pub fn settings(cert: &Path, key: &Path, client_ca: &Path) -> Result<TlsSettings, TlsError> {
    pingora::tls::install_default_crypto_provider();
    let roots = load_roots(client_ca)?;
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut tls = TlsSettings::with_callbacks(Box::new(PeerIdentityCallback))
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    tls.set_certificate_chain_file(&cert.display().to_string())
        .map_err(|e| TlsError::Read {
            path: cert.display().to_string(),
            message: e.to_string(),
        })?;
    tls.set_private_key_file(&key.display().to_string())
        .map_err(|e| TlsError::Read {
            path: key.display().to_string(),
            message: e.to_string(),
        })?;
    tls.set_client_cert_verifier(verifier);
    tls.enable_h2();
    Ok(tls)
}

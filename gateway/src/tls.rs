//! The HTTPS listener's TLS: rustls with TLS 1.2/1.3, ALPN h2 + http/1.1, the serving
//! certificate followed as its files change (`serving_certificate.rs`), and optional client
//! certificates accepted when they lead to any of the configured CA bundles (the client CA and
//! the request-header CA), which are followed as their files change. The presented chain is
//! handed to the request through the TLS digest extension (this survives TLS 1.3 resumption),
//! where each authenticator verifies it against its own bundle. The same extension carries the
//! connection's memo of its last bearer token, shared by every request on the connection.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::serving_certificate::ServingCertificate;
use kubegate_policy::authn::ca_bundle::CaBundle;
use kubegate_policy::authn::cache::TokenMemo;
use kubegate_policy::authn::PeerCertificate;
use kubegate_policy::flowcontrol::ClassificationMemo;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::TlsAccept;
use pingora::protocols::tls::TlsRef;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

/// Errors building the TLS settings.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
    #[error("no client CA bundle to verify client certificates with")]
    NoClientCa,
    #[error("building the client certificate verifier: {0}")]
    Verifier(String),
}

/// What a TLS connection's requests share, set when its handshake completes and found in the
/// TLS digest's extension.
#[derive(Debug, Default)]
pub struct TlsConnection {
    /// The client certificate chain the client presented, if any.
    pub peer: Option<PeerCertificate>,
    /// The last bearer token presented on the connection and its cached answer: a client
    /// sends the same token with every request, and recognising it spares hashing it again.
    pub token_memo: TokenMemo,
    /// The FlowSchema rule sets whose subjects matched the connection's last user: a client
    /// sends every request as the same user, and knowing them spares testing every subject.
    pub classification_memo: ClassificationMemo,
    /// Asks an HTTP/2 connection to close once its streams are answered (kube's answer to an
    /// unauthenticated or anonymous HTTP/2 request, CVE-2023-44487's mitigation).
    pub close: CloseSignal,
}

/// A one-way request to close a connection, set from any of its streams and awaited by the
/// connection's accept loop.
#[derive(Debug, Default)]
pub struct CloseSignal {
    requested: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl CloseSignal {
    pub fn request(&self) {
        if !self
            .requested
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            // `notify_one` keeps the permit if the loop is not waiting yet.
            self.notify.notify_one();
        }
    }

    /// Resolves once a close was requested.
    pub async fn requested(&self) {
        if self.requested.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        self.notify.notified().await;
    }
}

/// Extracts the presented client certificate chain after the handshake.
struct PeerIdentityCallback;

#[async_trait::async_trait]
impl TlsAccept for PeerIdentityCallback {
    async fn handshake_complete_callback(
        &self,
        tls: &TlsRef,
    ) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        let peer = tls.peer_cert_chain_der().and_then(|chain| {
            let chain: Vec<Vec<u8>> = chain
                .iter()
                .map(|certificate| certificate.as_ref().to_vec())
                .collect();
            match PeerCertificate::from_chain(chain) {
                Ok(peer) => Some(peer),
                Err(e) => {
                    tracing::warn!(error = %e, "could not parse a presented client certificate");
                    None
                }
            }
        });
        Some(Arc::new(TlsConnection {
            peer,
            token_memo: TokenMemo::default(),
            classification_memo: ClassificationMemo::default(),
            close: CloseSignal::default(),
        }))
    }
}

/// A client certificate verifier over the union of several CA bundles that follows their
/// files: rustls' own WebPKI verifier, rebuilt whenever a bundle's roots change.
///
/// The listener's rustls configuration is built once, so the verifier it holds cannot be
/// replaced; this one stays and swaps what it delegates to.
struct ReloadingClientVerifier {
    bundles: Vec<Arc<CaBundle>>,
    current: RwLock<Arc<Delegate>>,
    /// Every distinct hint list handed out so far; see [`intern_hints`].
    hints: Mutex<Vec<&'static [DistinguishedName]>>,
}

/// The verifier for one set of roots.
struct Delegate {
    /// The bundles' generations it was built from, in bundle order.
    generations: Vec<u64>,
    verifier: Arc<dyn ClientCertVerifier>,
    hints: &'static [DistinguishedName],
}

impl std::fmt::Debug for ReloadingClientVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingClientVerifier")
            .field("bundles", &self.bundles)
            .finish()
    }
}

impl ReloadingClientVerifier {
    fn new(bundles: Vec<Arc<CaBundle>>) -> Result<Self, TlsError> {
        if bundles.is_empty() {
            return Err(TlsError::NoClientCa);
        }
        let hints = Mutex::new(Vec::new());
        let generations = bundles.iter().map(|b| b.generation()).collect();
        let delegate = build_delegate(&bundles, generations, &hints)?;
        Ok(ReloadingClientVerifier {
            bundles,
            current: RwLock::new(Arc::new(delegate)),
            hints,
        })
    }

    /// The delegate for the bundles' current roots, rebuilding it first if any bundle moved
    /// on. A rebuild that fails keeps the previous delegate (bundles never hand out an empty
    /// root set, so this is not expected).
    fn delegate(&self) -> Arc<Delegate> {
        let generations: Vec<u64> = self.bundles.iter().map(|b| b.generation()).collect();
        let current = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if current.generations == generations {
            return current;
        }
        let mut slot = self.current.write().unwrap_or_else(PoisonError::into_inner);
        // Another handshake may have rebuilt it while this one waited for the lock.
        if slot.generations == generations {
            return slot.clone();
        }
        match build_delegate(&self.bundles, generations, &self.hints) {
            Ok(delegate) => {
                tracing::info!(
                    roots = delegate.hints.len(),
                    "client certificate verifier follows the changed CA bundles"
                );
                *slot = Arc::new(delegate);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot rebuild the client certificate verifier; keeping the previous one");
            }
        }
        slot.clone()
    }
}

fn build_delegate(
    bundles: &[Arc<CaBundle>],
    generations: Vec<u64>,
    hints: &Mutex<Vec<&'static [DistinguishedName]>>,
) -> Result<Delegate, TlsError> {
    let mut roots = RootCertStore::empty();
    for bundle in bundles {
        let (_, unusable) = roots
            .add_parsable_certificates(bundle.roots_der().into_iter().map(CertificateDer::from));
        if unusable > 0 {
            // The bundle parsed these already, so rustls disagreeing is worth a word.
            tracing::warn!(path = %bundle.path().display(), unusable,
                "CA bundle certificates rustls cannot use as roots");
        }
    }
    let mut subjects: Vec<DistinguishedName> = Vec::new();
    for subject in roots.subjects() {
        // A CA in both bundles is hinted once.
        if !subjects
            .iter()
            .any(|seen| seen.as_ref() == subject.as_ref())
        {
            subjects.push(subject);
        }
    }
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    Ok(Delegate {
        generations,
        verifier,
        hints: intern_hints(hints, subjects),
    })
}

/// rustls borrows the CA hints from the verifier (`&self`) for the length of a handshake, so
/// a list that can be replaced must outlive any borrow: each distinct list is leaked once and
/// reused whenever the same roots come back. This is bounded by the number of distinct root
/// sets the files ever hold (CA rotations), a few hundred bytes each.
fn intern_hints(
    interned: &Mutex<Vec<&'static [DistinguishedName]>>,
    subjects: Vec<DistinguishedName>,
) -> &'static [DistinguishedName] {
    let mut interned = interned.lock().unwrap_or_else(PoisonError::into_inner);
    let same = |list: &[DistinguishedName]| {
        list.len() == subjects.len()
            && list
                .iter()
                .zip(&subjects)
                .all(|(a, b)| a.as_ref() == b.as_ref())
    };
    if let Some(existing) = interned.iter().find(|list| same(list)) {
        return existing;
    }
    let leaked: &'static [DistinguishedName] = Box::leak(subjects.into_boxed_slice());
    interned.push(leaked);
    leaked
}

impl ReloadingClientVerifier {
    /// The current roots' verdict on a chain (what the handshake logs, and then leaves to
    /// the authenticators).
    fn check_chain(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.delegate()
            .verifier
            .verify_client_cert(end_entity, intermediates, now)
    }
}

impl ClientCertVerifier for ReloadingClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    /// Certificates stay optional: requests without one go on to the other authenticators
    /// (tokens, anonymous).
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// The subjects of every current root, sent in the CertificateRequest: Go clients
    /// (kubectl) only offer a certificate whose issuer is listed, so a CA added to a bundle
    /// must show up here at once.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.delegate().hints
    }

    /// Like kube-apiserver's listener (`tls.RequestClientCert`), the handshake never refuses
    /// a certificate: the x509 and front-proxy authenticators verify the chain for every
    /// request's identity, so an expired one, or one from another CA, is their error (a 401
    /// when nothing else authenticates the request, and a token sent along still can), not
    /// a failed handshake a client cannot tell from a network error. The handshake still
    /// proves the client holds the certificate's key (the signatures below).
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match self.check_chain(end_entity, intermediates, now) {
            Ok(verified) => Ok(verified),
            Err(e) => {
                tracing::debug!(error = %e, "client certificate left to the authenticators");
                Ok(ClientCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.delegate()
            .verifier
            .verify_tls12_signature(message, cert, dss)
            .or_else(|e| signature_by_bare_key(message, cert, dss, false, e))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.delegate()
            .verifier
            .verify_tls13_signature(message, cert, dss)
            .or_else(|e| signature_by_bare_key(message, cert, dss, true, e))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.delegate().verifier.supported_verify_schemes()
    }
}

/// A handshake signature checked with the certificate's bare public key, for a certificate
/// webpki refuses to read (an X.509 v1 one, which Go, and so kube, accepts): the client still
/// proves it holds the key, and the authenticators judge the certificate. Any other failure
/// (`refused`) stands.
fn signature_by_bare_key(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    tls13: bool,
    refused: rustls::Error,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    // TLS 1.3 signs handshakes with these schemes only (RFC 8446 4.2.3).
    let tls13_scheme = matches!(
        dss.scheme,
        SignatureScheme::ECDSA_NISTP256_SHA256
            | SignatureScheme::ECDSA_NISTP384_SHA384
            | SignatureScheme::ECDSA_NISTP521_SHA512
            | SignatureScheme::RSA_PSS_SHA256
            | SignatureScheme::RSA_PSS_SHA384
            | SignatureScheme::RSA_PSS_SHA512
            | SignatureScheme::ED25519
            | SignatureScheme::ED448
    );
    if tls13 && !tls13_scheme {
        return Err(refused);
    }
    let unreadable = matches!(
        webpki::EndEntityCert::try_from(cert),
        Err(webpki::Error::UnsupportedCertVersion)
    );
    if !unreadable {
        return Err(refused);
    }
    let Ok((_, parsed)) = X509Certificate::from_der(cert.as_ref()) else {
        return Err(refused);
    };
    let spki = rustls::pki_types::SubjectPublicKeyInfoDer::from(parsed.public_key().raw);
    let Ok(key) = webpki::RawPublicKeyEntity::try_from(&spki) else {
        return Err(refused);
    };
    let Some(provider) = rustls::crypto::CryptoProvider::get_default() else {
        return Err(refused);
    };
    let candidates = provider
        .signature_verification_algorithms
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, algorithms)| *algorithms)
        .unwrap_or_default();
    if candidates
        .iter()
        .any(|alg| key.verify_signature(*alg, message, dss.signature()).is_ok())
    {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(refused)
    }
}

/// TLS settings for the HTTPS listener: the serving certificate and key (followed as their
/// files change), and the CA bundles
/// whose client certificates the handshake accepts (the client CA and, when front-proxy
/// authentication is on, the request-header CA). Share the bundles with the authenticators,
/// so both follow the same files.
pub fn settings(
    cert: &Path,
    key: &Path,
    bundles: Vec<Arc<CaBundle>>,
) -> Result<TlsSettings, TlsError> {
    pingora::tls::install_default_crypto_provider();
    let verifier = ReloadingClientVerifier::new(bundles)?;
    let mut tls = TlsSettings::with_callbacks(Box::new(PeerIdentityCallback))
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let serving = ServingCertificate::load(cert, key).map_err(|message| TlsError::Read {
        path: cert.display().to_string(),
        message,
    })?;
    tls.set_cert_resolver(Arc::new(serving));
    tls.set_client_cert_verifier(Arc::new(verifier));
    tls.enable_h2();
    Ok(tls)
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    use std::time::{Duration, SystemTime};

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca(name: &str) -> Ca {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(ca: &Ca, cn: &str) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn replace(path: &Path, content: &str) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    fn now() -> UnixTime {
        UnixTime::since_unix_epoch(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap(),
        )
    }

    fn bundle(path: &Path) -> Arc<CaBundle> {
        Arc::new(
            CaBundle::load(path)
                .unwrap()
                .with_check_interval(Duration::ZERO),
        )
    }

    #[test]
    fn accepts_either_bundle_and_follows_changes() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let (client, proxy, added) = (ca("client-ca"), ca("front-proxy-ca"), ca("added-ca"));
        let client_path = dir.path().join("client-ca.crt");
        let proxy_path = dir.path().join("rh-ca.crt");
        std::fs::write(&client_path, &client.pem).unwrap();
        std::fs::write(&proxy_path, &proxy.pem).unwrap();
        let verifier =
            ReloadingClientVerifier::new(vec![bundle(&client_path), bundle(&proxy_path)]).unwrap();
        assert!(verifier.offer_client_auth() && !verifier.client_auth_mandatory());
        assert_eq!(verifier.root_hint_subjects().len(), 2);
        let first_hints = verifier.root_hint_subjects().as_ptr();

        for ca in [&client, &proxy] {
            assert!(verifier
                .check_chain(&leaf(ca, "someone"), &[], now())
                .is_ok());
        }
        let newcomer = leaf(&added, "newcomer");
        assert!(verifier.check_chain(&newcomer, &[], now()).is_err());

        // A CA added to the client bundle is accepted and hinted without a restart.
        replace(&client_path, &format!("{}{}", client.pem, added.pem));
        assert_eq!(verifier.root_hint_subjects().len(), 3);
        assert!(verifier.check_chain(&newcomer, &[], now()).is_ok());

        // A bad file changes nothing; going back to the first roots reuses their hints.
        replace(&proxy_path, "garbage");
        assert_eq!(verifier.root_hint_subjects().len(), 3);
        replace(&client_path, &client.pem);
        assert!(verifier.check_chain(&newcomer, &[], now()).is_err());
        assert_eq!(verifier.root_hint_subjects().as_ptr(), first_hints);
        assert!(!verifier.supported_verify_schemes().is_empty());
        // The handshake itself refuses none: the authenticators judge the chain.
        assert!(verifier.verify_client_cert(&newcomer, &[], now()).is_ok());
    }

    #[test]
    fn a_ca_in_both_bundles_is_hinted_once() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let shared = ca("shared-ca");
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &shared.pem).unwrap();
        let verifier = ReloadingClientVerifier::new(vec![bundle(&path), bundle(&path)]).unwrap();
        assert_eq!(verifier.root_hint_subjects().len(), 1);
        assert!(matches!(
            ReloadingClientVerifier::new(vec![]),
            Err(TlsError::NoClientCa)
        ));
    }
}

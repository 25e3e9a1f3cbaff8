//! A CA bundle file (PEM) held as trust anchors that follow the file, as kube's
//! `dynamiccertificates.DynamicFileCAContent` does for `--client-ca-file` and
//! `--requestheader-client-ca-file`: a rotated bundle takes effect without a restart, and a
//! broken one never replaces the last good set.
//!
//! Instead of a watcher task, the file is looked at on use, at most once per check interval
//! (one second): a `stat`, and a read only when its modification time, size or inode moved.
//! The TLS verifier and the authenticators share one [`CaBundle`] per file, so they always
//! agree on the current roots.
//!
//! Authenticators verify the client's chain on every request, as kube does. Since most
//! requests come over a few long-lived connections with the same chain, chains that verified
//! are remembered (by digest, for the current roots and the period every certificate on the
//! path is valid) so that a repeat costs a hash instead of signature checks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm, TrustAnchor, UnixTime};
use sha2::{Digest, Sha256};
use webpki::{EndEntityCert, ExtendedKeyUsageValidator, KeyPurposeIdIter, KeyUsage};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::throttle::Throttled;

/// How often a bundle in use is compared with its file by default.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How many verified chains are remembered; past that the memory starts over, which bounds it
/// whatever clients present.
const VERIFIED_LIMIT: usize = 4096;

/// The signature algorithms rustls' *ring* provider verifies with, so that a chain the TLS
/// handshake accepted is judged by the same rules here.
static SIGNATURE_ALGORITHMS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P256_SHA384,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ED25519,
    webpki::ring::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    webpki::ring::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
    webpki::ring::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
];

/// A PEM CA bundle file, re-read when it changes; see the module documentation.
pub struct CaBundle {
    path: PathBuf,
    roots: RwLock<Arc<Roots>>,
    /// Looked at on use, at most once per check interval.
    watch: Throttled<Watch>,
    /// Chains that verified for client authentication, by [`chain_digest`].
    verified: Mutex<HashMap<[u8; 32], Verified>>,
}

/// A remembered successful verification: it stands while the roots are those of
/// `generation` and the time is within every certificate's validity on the verified path.
#[derive(Debug, Clone, Copy)]
struct Verified {
    generation: u64,
    not_before: i64,
    not_after: i64,
}

/// One loaded version of the file.
struct Roots {
    /// Goes up by one with every accepted change, so holders of derived state (the TLS
    /// verifier) can tell cheaply whether to rebuild it.
    generation: u64,
    /// The file content, so that a touch or a rewrite with the same bytes changes nothing.
    pem: Vec<u8>,
    der: Vec<Vec<u8>>,
    anchors: Vec<TrustAnchor<'static>>,
}

/// What the last look at the file saw.
struct Watch {
    /// The version last read, `None` when the file could not be read.
    seen: Option<FileStamp>,
    /// Whether the file being unreadable has been reported.
    unreadable: bool,
}

/// What identifies one version of a file without reading it (also used by the serving
/// certificate, which follows its files the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    /// Tells an atomic replacement (a new file renamed over the old, as kubelet's projected
    /// volumes do) from the old file even when time and size match.
    inode: u64,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roots = self.current();
        f.debug_struct("CaBundle")
            .field("path", &self.path)
            .field("certificates", &roots.der.len())
            .field("generation", &roots.generation)
            .finish()
    }
}

impl CaBundle {
    /// Loads the bundle; a missing, empty or unparsable file is an error here (kube refuses to
    /// start with one), while later changes to a bad file are logged and ignored.
    pub fn load(path: impl Into<PathBuf>) -> Result<CaBundle, String> {
        let path = path.into();
        // Stat before reading: if the file changes in between, the next check sees a newer
        // stamp and reads it again, rather than the reverse where a change would be missed.
        let seen = FileStamp::of(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let pem = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let (der, anchors) =
            parse_bundle(&pem).map_err(|e| format!("CA bundle {}: {e}", path.display()))?;
        Ok(CaBundle {
            path,
            roots: RwLock::new(Arc::new(Roots {
                generation: 0,
                pem,
                der,
                anchors,
            })),
            watch: Throttled::new(
                DEFAULT_CHECK_INTERVAL,
                Watch {
                    seen: Some(seen),
                    unreadable: false,
                },
            ),
            verified: Mutex::new(HashMap::new()),
        })
    }

    /// Changes how often the file is compared on use (tests use zero, or a long interval).
    pub fn with_check_interval(mut self, interval: Duration) -> CaBundle {
        self.watch.set_interval(interval);
        self
    }

    /// The bundle's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A number that changes whenever the set of roots changes.
    pub fn generation(&self) -> u64 {
        self.maybe_reload();
        self.current().generation
    }

    /// The current roots in DER, in file order (for the TLS layer's verifier).
    pub fn roots_der(&self) -> Vec<Vec<u8>> {
        self.maybe_reload();
        self.current().der.clone()
    }

    /// Compares the file now, whatever the check interval; true when the roots changed.
    pub fn refresh(&self) -> bool {
        let before = self.current().generation;
        self.watch.now(|watch| self.check(watch));
        self.current().generation != before
    }

    /// Verifies a presented chain (DER, leaf first, then intermediates in any order) at `now`
    /// for client authentication, as Go's `Certificate.Verify` with `ExtKeyUsageClientAuth`
    /// does for kube: some path from the leaf through the intermediates must end at one of
    /// the bundle's roots, every certificate on it valid at `now`, and a leaf or intermediate
    /// that lists extended key usages must list clientAuth. The error reads like Go's, for
    /// logs.
    pub fn verify(&self, chain: &[Vec<u8>], now: SystemTime) -> Result<(), String> {
        self.verify_digested(chain, chain_digest(chain), now)
    }

    /// [`CaBundle::verify`] with the chain's [`chain_digest`] already known (computed once
    /// per connection rather than per request).
    pub(crate) fn verify_digested(
        &self,
        chain: &[Vec<u8>],
        digest: [u8; 32],
        now: SystemTime,
    ) -> Result<(), String> {
        self.maybe_reload();
        let roots = self.current();
        let secs = unix_seconds(now);
        let remembered = self
            .verified
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&digest)
            .copied();
        if let (Some(v), Some(secs)) = (remembered, secs) {
            if v.generation == roots.generation && v.not_before <= secs && secs <= v.not_after {
                return Ok(());
            }
        }
        let (not_before, not_after) = verify_chain(&roots, chain, now, KeyUsage::client_auth())
            .map_err(VerifyError::into_message)?;
        let mut verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if verified.len() >= VERIFIED_LIMIT {
            verified.clear();
        }
        verified.insert(
            digest,
            Verified {
                generation: roots.generation,
                not_before,
                not_after,
            },
        );
        Ok(())
    }

    /// Whether the chain leads to one of the bundle's roots at all, whatever the time and the
    /// key usage: tells "this CA's certificate, but expired" from "another CA's certificate".
    ///
    /// Validity periods cannot just be skipped (webpki checks the leaf's before looking for
    /// its issuer), so the chain is tried at the two ends of the leaf's own validity period.
    pub fn issued(&self, chain: &[Vec<u8>]) -> bool {
        self.maybe_reload();
        let roots = self.current();
        // The common case, asked for every ordinary client by the request-header
        // authenticator, is settled at once: webpki reports an unknown issuer only when the
        // leaf itself was acceptable and no certificate leads anywhere from it.
        match verify_chain(&roots, chain, SystemTime::now(), AnyUsage) {
            Ok(_) => return true,
            Err(VerifyError::UnknownIssuer) => return false,
            Err(_) => {}
        }
        let Some(leaf) = chain.first() else {
            return false;
        };
        let Ok((_, certificate)) = X509Certificate::from_der(leaf) else {
            return false;
        };
        let validity = certificate.validity();
        [
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        ]
        .into_iter()
        .filter_map(|secs| u64::try_from(secs).ok())
        .any(|secs| {
            let at = UNIX_EPOCH + Duration::from_secs(secs);
            verify_chain(&roots, chain, at, AnyUsage).is_ok()
        })
    }

    fn current(&self) -> Arc<Roots> {
        self.roots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Looks at the file if the check interval has passed. Callers never wait for each other:
    /// while one looks, the others go on with the current roots.
    fn maybe_reload(&self) {
        self.watch.when_due(|watch| self.check(watch));
    }

    /// Reads the file if it is not the version last seen, and takes it if it is usable.
    fn check(&self, watch: &mut Watch) {
        let stamp = match FileStamp::of(&self.path) {
            Ok(stamp) => stamp,
            Err(e) => {
                watch.seen = None;
                self.complain_once(watch, &e);
                return;
            }
        };
        if watch.seen == Some(stamp) {
            return;
        }
        let pem = match std::fs::read(&self.path) {
            Ok(pem) => pem,
            Err(e) => {
                // Not remembered as seen, so the read is tried again next time (a permission
                // fix does not change the modification time).
                watch.seen = None;
                self.complain_once(watch, &e);
                return;
            }
        };
        watch.unreadable = false;
        // Remember this version even if it turns out unusable, so a bad file is reported once
        // rather than every second.
        watch.seen = Some(stamp);
        let current = self.current();
        if pem == current.pem {
            return;
        }
        match parse_bundle(&pem) {
            Ok((der, anchors)) => {
                let count = der.len();
                let generation = current.generation + 1;
                *self.roots.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(Roots {
                    generation,
                    pem,
                    der,
                    anchors,
                });
                tracing::info!(path = %self.path.display(), certificates = count,
                    "loaded a new CA bundle");
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e,
                    "the CA bundle changed but cannot be used; keeping the certificates loaded before");
            }
        }
    }
}

impl CaBundle {
    /// Reports an unreadable file once until it can be read again, not on every check.
    fn complain_once(&self, watch: &mut Watch, error: &std::io::Error) {
        if !watch.unreadable {
            watch.unreadable = true;
            tracing::warn!(path = %self.path.display(), %error,
                "cannot read the CA bundle; keeping the certificates loaded before");
        }
    }
}

impl FileStamp {
    /// The stamp of the file at `path` now (following symbolic links, as kubelet's Secret
    /// volumes swap their `..data` link).
    pub fn of(path: &Path) -> std::io::Result<FileStamp> {
        let metadata = std::fs::metadata(path)?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(FileStamp {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode,
        })
    }
}

/// Reads every `CERTIFICATE` block of a PEM bundle, as client-go's `cert.ParseCertsPEM`:
/// other blocks are skipped, a certificate that does not parse fails the whole bundle, and a
/// bundle without certificates is an error.
fn parse_bundle(pem: &[u8]) -> Result<(Vec<Vec<u8>>, Vec<TrustAnchor<'static>>), String> {
    if pem.is_empty() {
        return Err("missing content for CA bundle".to_string());
    }
    let mut der = Vec::new();
    let mut anchors = Vec::new();
    for certificate in rustls_pemfile::certs(&mut &pem[..]) {
        let certificate = certificate.map_err(|e| format!("malformed PEM: {e}"))?;
        let anchor = webpki::anchor_from_trusted_cert(&certificate)
            .map_err(|e| format!("cannot parse certificate {}: {e:?}", der.len() + 1))?
            .to_owned();
        anchors.push(anchor);
        der.push(certificate.as_ref().to_vec());
    }
    if der.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA certificates".to_string());
    }
    Ok((der, anchors))
}

/// Accepts any extended key usage: for [`CaBundle::issued`], which asks who signed a chain,
/// not what it may be used for.
struct AnyUsage;

impl ExtendedKeyUsageValidator for AnyUsage {
    fn validate(&self, _: KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        Ok(())
    }
}

/// Why a chain did not verify: "no path at all" is told apart for [`CaBundle::issued`].
enum VerifyError {
    UnknownIssuer,
    Other(String),
}

impl VerifyError {
    fn into_message(self) -> String {
        match self {
            VerifyError::UnknownIssuer => describe(&webpki::Error::UnknownIssuer),
            VerifyError::Other(message) => message,
        }
    }
}

/// Verifies the chain and answers the period (Unix seconds, inclusive) in which every
/// certificate on the verified path is valid. Trust anchors have no period: webpki does not
/// check theirs and neither does Go.
fn verify_chain(
    roots: &Roots,
    chain: &[Vec<u8>],
    now: SystemTime,
    usage: impl ExtendedKeyUsageValidator,
) -> Result<(i64, i64), VerifyError> {
    let anchors = &roots.anchors;
    let Some((leaf_der, intermediates)) = chain.split_first() else {
        return Err(VerifyError::Other(
            "x509: no certificate presented".to_string(),
        ));
    };
    let leaf = CertificateDer::from(leaf_der.as_slice());
    let leaf = match EndEntityCert::try_from(&leaf) {
        Ok(leaf) => leaf,
        // webpki reads only v3 certificates; Go also takes a v1 leaf (what `openssl x509 -req`
        // makes without extensions), which this checks by hand.
        Err(webpki::Error::UnsupportedCertVersion) => {
            return verify_v1_leaf(&roots.der, leaf_der, now)
        }
        Err(e) => {
            return Err(VerifyError::Other(format!(
                "x509: cannot parse certificate: {e:?}"
            )))
        }
    };
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|der| CertificateDer::from(der.as_slice()))
        .collect();
    let since_epoch = now
        .duration_since(UNIX_EPOCH)
        .map_err(|_| VerifyError::Other("x509: the clock is before 1970".to_string()))?;
    let path = leaf
        .verify_for_usage(
            SIGNATURE_ALGORITHMS,
            anchors,
            &intermediates,
            UnixTime::since_unix_epoch(since_epoch),
            usage,
            None,
            None,
        )
        .map_err(|e| match e {
            webpki::Error::UnknownIssuer => VerifyError::UnknownIssuer,
            other => VerifyError::Other(describe(&other)),
        })?;
    let mut window = validity(leaf_der);
    for intermediate in path.intermediate_certificates() {
        let (not_before, not_after) = validity(&intermediate.der());
        window = (window.0.max(not_before), window.1.min(not_after));
    }
    Ok(window)
}

/// Verifies a version 1 leaf certificate (no extensions, so no key usage to check: Go takes
/// any usage then) issued directly by one of the roots: the issuer named is a root's subject,
/// that root's key signed the leaf's to-be-signed bytes, and `now` is within the leaf's
/// validity. Chains through intermediates are not followed for such leaves.
fn verify_v1_leaf(
    roots_der: &[Vec<u8>],
    leaf_der: &[u8],
    now: SystemTime,
) -> Result<(i64, i64), VerifyError> {
    let (_, leaf) = X509Certificate::from_der(leaf_der)
        .map_err(|e| VerifyError::Other(format!("x509: cannot parse certificate: {e}")))?;
    let secs = unix_seconds(now)
        .ok_or_else(|| VerifyError::Other("x509: the clock is before 1970".to_string()))?;
    let (not_before, not_after) = (
        leaf.validity().not_before.timestamp(),
        leaf.validity().not_after.timestamp(),
    );
    let at = |secs: i64| UnixTime::since_unix_epoch(Duration::from_secs(secs.max(0) as u64));
    if secs > not_after {
        return Err(VerifyError::Other(describe(&webpki::Error::CertExpired {
            time: at(secs),
            not_after: at(not_after),
        })));
    }
    if secs < not_before {
        return Err(VerifyError::Other(describe(
            &webpki::Error::CertNotValidYet {
                time: at(secs),
                not_before: at(not_before),
            },
        )));
    }
    let tbs: &[u8] = leaf.tbs_certificate.as_ref();
    let signature = leaf.signature_value.data.as_ref();
    for root_der in roots_der {
        let Ok((_, root)) = X509Certificate::from_der(root_der) else {
            continue;
        };
        if root.subject().as_raw() != leaf.issuer().as_raw() {
            continue;
        }
        let spki = rustls_pki_types::SubjectPublicKeyInfoDer::from(root.public_key().raw);
        let Ok(key) = webpki::RawPublicKeyEntity::try_from(&spki) else {
            continue;
        };
        // Any supported algorithm that the root's key verifies the signature with: the root
        // signed exactly these bytes either way.
        if SIGNATURE_ALGORITHMS
            .iter()
            .any(|alg| key.verify_signature(*alg, tbs, signature).is_ok())
        {
            return Ok((not_before, not_after));
        }
    }
    Err(VerifyError::UnknownIssuer)
}

/// A certificate's validity period in Unix seconds; an unparsable one gets an empty period, so
/// a verification that leaned on it is simply not remembered.
fn validity(der: &[u8]) -> (i64, i64) {
    match X509Certificate::from_der(der) {
        Ok((_, certificate)) => (
            certificate.validity().not_before.timestamp(),
            certificate.validity().not_after.timestamp(),
        ),
        Err(_) => (i64::MAX, i64::MIN),
    }
}

fn unix_seconds(time: SystemTime) -> Option<i64> {
    let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

/// Identifies a presented chain: every certificate with its length, so that no two different
/// chains can run together into the same bytes.
pub(crate) fn chain_digest(chain: &[Vec<u8>]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for certificate in chain {
        hasher.update((certificate.len() as u64).to_be_bytes());
        hasher.update(certificate);
    }
    hasher.finalize().into()
}

/// Words webpki's verdicts the way Go's verifier does, since operators compare these logs
/// with kube-apiserver's.
fn describe(error: &webpki::Error) -> String {
    use webpki::Error;
    match error {
        Error::UnknownIssuer => "x509: certificate signed by unknown authority".to_string(),
        Error::CertExpired { time, not_after } => format!(
            "x509: certificate has expired or is not yet valid: current time {} is after {}",
            rfc3339(*time),
            rfc3339(*not_after)
        ),
        Error::CertNotValidYet { time, not_before } => format!(
            "x509: certificate has expired or is not yet valid: current time {} is before {}",
            rfc3339(*time),
            rfc3339(*not_before)
        ),
        Error::RequiredEkuNotFoundContext(_) => {
            "x509: certificate specifies an incompatible key usage".to_string()
        }
        Error::CaUsedAsEndEntity => {
            "x509: a CA certificate cannot be used as a client certificate".to_string()
        }
        other => format!("x509: certificate verification failed: {other:?}"),
    }
}

fn rfc3339(time: UnixTime) -> String {
    i64::try_from(time.as_secs())
        .ok()
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| format!("{}s after the epoch", time.as_secs()))
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };

    /// A test CA: its certificate and what it takes to sign with it.
    pub(crate) struct TestCa {
        pub pem: String,
        pub der: Vec<u8>,
        issuer: Issuer<'static, KeyPair>,
    }

    pub(crate) fn ca(name: &str) -> TestCa {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        TestCa {
            pem: certificate.pem(),
            der: certificate.der().to_vec(),
            issuer: Issuer::new(params, key),
        }
    }

    impl TestCa {
        /// An intermediate CA signed by this one.
        pub(crate) fn intermediate(&self, name: &str) -> TestCa {
            let mut params = CertificateParams::default();
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            let key = KeyPair::generate().unwrap();
            let certificate = params.signed_by(&key, &self.issuer).unwrap();
            TestCa {
                pem: certificate.pem(),
                der: certificate.der().to_vec(),
                issuer: Issuer::new(params, key),
            }
        }

        /// A client certificate; `validity` is (not before, not after) as (year, month, day).
        pub(crate) fn leaf_with(
            &self,
            cn: &str,
            orgs: &[&str],
            validity: ((i32, u8, u8), (i32, u8, u8)),
            usage: Option<ExtendedKeyUsagePurpose>,
        ) -> Vec<u8> {
            let mut params = CertificateParams::default();
            params.distinguished_name = rcgen::DistinguishedName::new();
            if !cn.is_empty() {
                params.distinguished_name.push(DnType::CommonName, cn);
            }
            // rcgen keeps one value per attribute type; the second organization goes in under
            // the same OID spelled as a custom type.
            for (i, org) in orgs.iter().enumerate() {
                let ty = if i == 0 {
                    DnType::OrganizationName
                } else {
                    DnType::CustomDnType(vec![2, 5, 4, 10])
                };
                params.distinguished_name.push(ty, *org);
            }
            let ((y0, m0, d0), (y1, m1, d1)) = validity;
            params.not_before = rcgen::date_time_ymd(y0, m0, d0);
            params.not_after = rcgen::date_time_ymd(y1, m1, d1);
            params.extended_key_usages = usage.into_iter().collect();
            params.use_authority_key_identifier_extension = true;
            let key = KeyPair::generate().unwrap();
            params.signed_by(&key, &self.issuer).unwrap().der().to_vec()
        }

        /// A client certificate valid from 2020 to 2090.
        pub(crate) fn leaf(&self, cn: &str, orgs: &[&str]) -> Vec<u8> {
            self.leaf_with(
                cn,
                orgs,
                ((2020, 1, 1), (2090, 1, 1)),
                Some(ExtendedKeyUsagePurpose::ClientAuth),
            )
        }
    }

    /// Writes `content` to `path` the way kubelet and most tools rotate files: a new file
    /// renamed over the old one.
    pub(crate) fn replace(path: &Path, content: &str) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    pub(crate) fn bundle_file(dir: &tempfile::TempDir, name: &str, pem: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path
    }

    #[test]
    fn bundle_with_two_cas_trusts_both_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two, other) = (ca("one"), ca("two"), ca("other"));
        // Text around the blocks and a key block are skipped, as client-go does.
        let pem = format!(
            "first CA\n{}\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{}",
            one.pem, two.pem
        );
        let bundle = CaBundle::load(bundle_file(&dir, "ca.crt", &pem)).unwrap();
        assert_eq!(bundle.roots_der(), vec![one.der.clone(), two.der.clone()]);
        let now = SystemTime::now();
        assert_eq!(bundle.verify(&[one.leaf("a", &[])], now), Ok(()));
        assert_eq!(bundle.verify(&[two.leaf("b", &[])], now), Ok(()));
        assert_eq!(
            bundle.verify(&[other.leaf("c", &[])], now),
            Err("x509: certificate signed by unknown authority".to_string())
        );
        assert!(format!("{bundle:?}").contains("certificates: 2"));
    }

    #[test]
    fn intermediates_come_from_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let root = ca("root");
        let intermediate = root.intermediate("intermediate");
        let bundle = CaBundle::load(bundle_file(&dir, "ca.crt", &root.pem)).unwrap();
        let leaf = intermediate.leaf("alice", &[]);
        let now = SystemTime::now();
        assert_eq!(
            bundle.verify(&[leaf.clone(), intermediate.der.clone()], now),
            Ok(())
        );
        assert_eq!(
            bundle.verify(std::slice::from_ref(&leaf), now),
            Err("x509: certificate signed by unknown authority".to_string()),
            "an intermediate the client did not send is not looked up"
        );
        // An unrelated extra certificate in the chain is ignored, as Go's pool is.
        let stray = ca("stray").der;
        assert_eq!(
            bundle.verify(&[leaf, stray, intermediate.der.clone()], now),
            Ok(())
        );
    }

    #[test]
    fn validity_and_usage_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = ca("root");
        let bundle = CaBundle::load(bundle_file(&dir, "ca.crt", &root.pem)).unwrap();
        let now = SystemTime::now();
        let client = Some(ExtendedKeyUsagePurpose::ClientAuth);
        let expired = root.leaf_with("old", &[], ((2000, 1, 1), (2001, 1, 1)), client.clone());
        let error = bundle
            .verify(std::slice::from_ref(&expired), now)
            .unwrap_err();
        assert!(
            error.starts_with("x509: certificate has expired or is not yet valid: current time ")
                && error.ends_with(" is after 2001-01-01T00:00:00Z"),
            "{error}"
        );
        let future = root.leaf_with("new", &[], ((2090, 1, 1), (2091, 1, 1)), client);
        let error = bundle
            .verify(std::slice::from_ref(&future), now)
            .unwrap_err();
        assert!(
            error.ends_with(" is before 2090-01-01T00:00:00Z"),
            "{error}"
        );
        let server_only = root.leaf_with(
            "srv",
            &[],
            ((2020, 1, 1), (2090, 1, 1)),
            Some(ExtendedKeyUsagePurpose::ServerAuth),
        );
        assert_eq!(
            bundle.verify(std::slice::from_ref(&server_only), now),
            Err("x509: certificate specifies an incompatible key usage".to_string())
        );
        // Without an extended key usage extension any usage goes, as in Go.
        let any = root.leaf_with("any", &[], ((2020, 1, 1), (2090, 1, 1)), None);
        assert_eq!(bundle.verify(&[any], now), Ok(()));
        // Whoever signed them, these are this CA's certificates; another CA's are not.
        assert!(bundle.issued(&[expired]) && bundle.issued(&[future]));
        assert!(bundle.issued(&[server_only]));
        assert!(!bundle.issued(&[ca("other").leaf("x", &[])]));
        assert!(!bundle.issued(&[]) && !bundle.issued(&[b"junk".to_vec()]));
        assert!(bundle.verify(&[], now).is_err());
        assert!(bundle.verify(&[b"junk".to_vec()], now).is_err());
        assert!(
            bundle.verify(std::slice::from_ref(&root.der), now).is_err(),
            "CA as a leaf"
        );
    }

    #[test]
    fn remembered_verifications_follow_roots_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (ca("one"), ca("two"));
        let path = bundle_file(&dir, "ca.crt", &one.pem);
        let bundle = CaBundle::load(&path)
            .unwrap()
            .with_check_interval(Duration::ZERO);
        let leaf = vec![one.leaf("a", &[])];
        let now = SystemTime::now();
        assert_eq!(bundle.verify(&leaf, now), Ok(()));
        assert_eq!(bundle.verify(&leaf, now), Ok(()));
        // After the leaf's end (2090) and before its start (2020), whatever was remembered.
        let late = UNIX_EPOCH + Duration::from_secs(4_000_000_000);
        let error = bundle.verify(&leaf, late).unwrap_err();
        assert!(error.contains("is after 2090-01-01T00:00:00Z"), "{error}");
        let early = UNIX_EPOCH + Duration::from_secs(1_500_000_000);
        let error = bundle.verify(&leaf, early).unwrap_err();
        assert!(error.contains("is before 2020-01-01T00:00:00Z"), "{error}");
        assert_eq!(bundle.verify(&leaf, now), Ok(()));
        // New roots forget what the old ones accepted.
        replace(&path, &two.pem);
        assert_eq!(
            bundle.verify(&leaf, now),
            Err("x509: certificate signed by unknown authority".to_string())
        );
        // A different chain is a different entry even with the same leaf.
        let mut longer = leaf.clone();
        longer.push(one.der.clone());
        assert!(bundle.verify(&longer, now).is_err());
    }

    #[test]
    fn load_rejects_unusable_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(CaBundle::load(dir.path().join("missing.crt")).is_err());
        let empty = CaBundle::load(bundle_file(&dir, "empty.crt", "")).unwrap_err();
        assert!(empty.contains("missing content"), "{empty}");
        let none = CaBundle::load(bundle_file(&dir, "none.crt", "no pem here\n")).unwrap_err();
        assert!(none.contains("does not contain any valid"), "{none}");
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(CaBundle::load(bundle_file(&dir, "garbage.crt", garbage)).is_err());
    }

    #[test]
    fn a_changed_file_is_picked_up_on_use() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (ca("one"), ca("two"));
        let path = bundle_file(&dir, "ca.crt", &one.pem);
        let bundle = CaBundle::load(&path)
            .unwrap()
            .with_check_interval(Duration::ZERO);
        let leaf_two = two.leaf("b", &[]);
        let now = SystemTime::now();
        assert!(bundle.verify(std::slice::from_ref(&leaf_two), now).is_err());
        let generation = bundle.generation();

        replace(&path, &format!("{}{}", one.pem, two.pem));
        assert_eq!(bundle.verify(std::slice::from_ref(&leaf_two), now), Ok(()));
        assert_eq!(bundle.generation(), generation + 1);
        assert_eq!(bundle.roots_der().len(), 2);

        // Dropping a CA takes effect too.
        replace(&path, &two.pem);
        assert!(bundle.verify(&[one.leaf("a", &[])], now).is_err());
        assert_eq!(bundle.generation(), generation + 2);

        // The same bytes again are not a change.
        replace(&path, &two.pem);
        assert_eq!(bundle.generation(), generation + 2);
    }

    #[test]
    fn a_bad_file_keeps_the_old_roots() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (ca("one"), ca("two"));
        let path = bundle_file(&dir, "ca.crt", &one.pem);
        let bundle = CaBundle::load(&path)
            .unwrap()
            .with_check_interval(Duration::ZERO);
        let now = SystemTime::now();
        let leaf_one = one.leaf("a", &[]);

        replace(&path, "not a bundle any more");
        assert_eq!(bundle.verify(std::slice::from_ref(&leaf_one), now), Ok(()));
        assert_eq!(bundle.generation(), 0);
        replace(&path, "");
        assert_eq!(bundle.roots_der(), vec![one.der.clone()]);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(bundle.verify(std::slice::from_ref(&leaf_one), now), Ok(()));
        assert!(!bundle.refresh());

        // Once the file is good again it is taken.
        replace(&path, &two.pem);
        assert_eq!(bundle.roots_der(), vec![two.der.clone()]);
        assert!(bundle.verify(&[leaf_one], now).is_err());
    }

    #[test]
    fn the_file_is_compared_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (ca("one"), ca("two"));
        let path = bundle_file(&dir, "ca.crt", &one.pem);
        let bundle = CaBundle::load(&path)
            .unwrap()
            .with_check_interval(Duration::from_secs(3600));
        replace(&path, &two.pem);
        assert_eq!(
            bundle.roots_der(),
            vec![one.der.clone()],
            "not yet looked at"
        );
        assert!(bundle.refresh(), "an explicit refresh looks at once");
        assert_eq!(bundle.roots_der(), vec![two.der.clone()]);
        assert!(!bundle.refresh());
        assert_eq!(bundle.path(), path.as_path());
    }
}

//! The HTTPS listener's serving certificate, followed as its files change, as kube-apiserver's
//! `dynamiccertificates` follows `--tls-cert-file` and `--tls-private-key-file`: a certificate
//! renewed on disk (by cert-manager into a Secret volume, or by kubegate's own renewal of the
//! generated one) is served to new connections without a restart, and a pair that does not
//! load (half written, or a key that does not match) never replaces the last good one.
//!
//! As with the CA bundles, there is no watcher task: a handshake looks at the files' stamps
//! at most once per [`CHECK_INTERVAL`] and reads them only when they moved.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::key_pair_files::{read_certified_key, FollowedPair, KeyPairFiles};

/// How often a handshake compares the files with what is loaded.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

impl KeyPairFiles for CertifiedKey {
    const WHAT: &'static str = "serving certificate";

    fn read(cert_path: &Path, key_path: &Path) -> Result<Self, String> {
        read_certified_key(cert_path, key_path)
    }

    fn leaf(&self) -> &[u8] {
        self.cert.first().map_or(&[], |leaf| leaf.as_ref())
    }
}

/// The listener's certificate chain and key, read from two PEM files and again when they
/// change.
#[derive(Debug)]
pub struct ServingCertificate(FollowedPair<CertifiedKey>);

impl ServingCertificate {
    /// Loads the pair; an error names the file and what is wrong with it.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<ServingCertificate, String> {
        FollowedPair::load(cert_path, key_path, CHECK_INTERVAL).map(ServingCertificate)
    }

    /// Changes how often the files are compared (tests use zero).
    #[cfg(test)]
    pub fn with_check_interval(self, interval: Duration) -> ServingCertificate {
        ServingCertificate(self.0.with_check_interval(interval))
    }

    /// The pair served now, after looking at the files if the interval has passed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.0.current()
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair};

    /// A self-signed pair for `name`: (certificate PEM, key PEM).
    fn pair(name: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec![name.to_string()]).unwrap();
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// Replaces `path` as kubelet and editors do: a new file renamed over the old.
    fn replace(path: &Path, content: &str) {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    fn der_of(pem: &str) -> Vec<u8> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
            .to_vec()
    }

    #[test]
    fn a_renewed_pair_is_served_and_a_broken_one_never_replaces_it() {
        pingora::tls::install_default_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let (first_cert, first_key) = pair("first.example");
        std::fs::write(&cert_path, &first_cert).unwrap();
        std::fs::write(&key_path, &first_key).unwrap();
        let serving = ServingCertificate::load(&cert_path, &key_path)
            .unwrap()
            .with_check_interval(Duration::ZERO);
        assert_eq!(serving.current().cert[0].to_vec(), der_of(&first_cert));

        // Half a renewal: the new certificate next to the old key is refused, the old pair
        // stays; once the key follows, the new pair is served.
        let (second_cert, second_key) = pair("second.example");
        replace(&cert_path, &second_cert);
        assert_eq!(serving.current().cert[0].to_vec(), der_of(&first_cert));
        replace(&key_path, &second_key);
        assert_eq!(serving.current().cert[0].to_vec(), der_of(&second_cert));

        // Garbage and a missing file keep the pair loaded before.
        replace(&cert_path, "not a certificate");
        assert_eq!(serving.current().cert[0].to_vec(), der_of(&second_cert));
        std::fs::remove_file(&key_path).unwrap();
        assert_eq!(serving.current().cert[0].to_vec(), der_of(&second_cert));
        let (third_cert, third_key) = pair("third.example");
        replace(&key_path, &third_key);
        replace(&cert_path, &third_cert);
        assert_eq!(serving.current().cert[0].to_vec(), der_of(&third_cert));
    }

    #[test]
    fn a_pair_that_does_not_load_at_start_is_an_error_naming_the_files() {
        pingora::tls::install_default_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let (cert, _) = pair("a.example");
        let (_, other_key) = pair("b.example");
        std::fs::write(&cert_path, &cert).unwrap();
        std::fs::write(&key_path, &other_key).unwrap();
        let err = ServingCertificate::load(&cert_path, &key_path).unwrap_err();
        assert!(err.contains("do not make a usable pair"), "{err}");
        assert!(err.contains("tls.crt"), "{err}");
        std::fs::write(&cert_path, "nothing").unwrap();
        let err = ServingCertificate::load(&cert_path, &key_path).unwrap_err();
        assert!(err.contains("no CERTIFICATE block"), "{err}");
    }
}

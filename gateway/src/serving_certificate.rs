//! The HTTPS listener's serving certificate, followed as its files change, as kube-apiserver's
//! `dynamiccertificates` follows `--tls-cert-file` and `--tls-private-key-file`: a certificate
//! renewed on disk (by cert-manager into a Secret volume, or by kubegate's own renewal of the
//! generated one) is served to new connections without a restart, and a pair that does not
//! load (half written, or a key that does not match) never replaces the last good one.
//!
//! As with the CA bundles, there is no watcher task: a handshake looks at the files' stamps
//! at most once per [`CHECK_INTERVAL`] and reads them only when they moved.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use kubegate_policy::authn::ca_bundle::FileStamp;
use kubegate_policy::throttle::Throttled;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often a handshake compares the files with what is loaded.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A certificate chain and key pair read from two PEM files, re-read when they change.
pub struct ServingCertificate {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// Looked at on a handshake, at most once per [`CHECK_INTERVAL`].
    watch: Throttled<Watch>,
}

struct Watch {
    /// The files' versions last read; `None` when they could not be.
    seen: Option<(FileStamp, FileStamp)>,
    /// Whether the current problem with the files has been reported.
    complained: bool,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl ServingCertificate {
    /// Loads the pair; an error names the file and what is wrong with it.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<ServingCertificate, String> {
        let stamps = stamps(cert_path, key_path).map_err(|e| e.to_string())?;
        let certified = read_pair(cert_path, key_path)?;
        Ok(ServingCertificate {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            current: RwLock::new(Arc::new(certified)),
            watch: Throttled::new(
                CHECK_INTERVAL,
                Watch {
                    seen: Some(stamps),
                    complained: false,
                },
            ),
        })
    }

    /// Changes how often the files are compared (tests use zero).
    #[cfg(test)]
    pub fn with_check_interval(mut self, interval: Duration) -> ServingCertificate {
        self.watch.set_interval(interval);
        self
    }

    /// The pair served now, after looking at the files if the interval has passed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.maybe_reload();
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Looks at the files if the check interval has passed; handshakes never wait for each
    /// other: while one looks, the others go on with the loaded pair.
    fn maybe_reload(&self) {
        self.watch.when_due(|watch| self.check(watch));
    }

    /// Reads the files if they are not the versions last seen, and takes a pair that loads.
    fn check(&self, watch: &mut Watch) {
        let stamps = match stamps(&self.cert_path, &self.key_path) {
            Ok(stamps) => stamps,
            Err(e) => {
                watch.seen = None;
                self.complain_once(watch, &e);
                return;
            }
        };
        if watch.seen == Some(stamps) {
            return;
        }
        match read_pair(&self.cert_path, &self.key_path) {
            Ok(certified) => {
                watch.seen = Some(stamps);
                watch.complained = false;
                let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                if current.cert != certified.cert {
                    *current = Arc::new(certified);
                    tracing::info!(cert = %self.cert_path.display(),
                        "loaded a new serving certificate");
                }
            }
            // Not remembered as seen: the certificate and key are often written one after the
            // other, and the pair that does not match now will at the next look.
            Err(e) => self.complain_once(watch, &e),
        }
    }

    fn complain_once(&self, watch: &mut Watch, error: &str) {
        if !watch.complained {
            watch.complained = true;
            tracing::warn!(cert = %self.cert_path.display(), key = %self.key_path.display(),
                %error, "the serving certificate changed but cannot be used; serving the one loaded before");
        }
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn stamps(cert_path: &Path, key_path: &Path) -> Result<(FileStamp, FileStamp), String> {
    let stamp = |path: &Path| FileStamp::of(path).map_err(|e| format!("{}: {e}", path.display()));
    Ok((stamp(cert_path)?, stamp(key_path)?))
}

/// Reads the chain and the key and checks that they belong together.
fn read_pair(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, String> {
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
    let cert_pem = read(cert_path)?;
    let chain = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no CERTIFICATE block in the file",
            cert_path.display()
        ));
    }
    let key_pem = read(key_path)?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| format!("{}: {e}", key_path.display()))?
        .ok_or_else(|| format!("{}: no private key in the file", key_path.display()))?;
    let provider = rustls::crypto::CryptoProvider::get_default()
        .ok_or("no TLS crypto provider is installed")?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        format!(
            "{} and {} do not make a usable pair: {e}",
            cert_path.display(),
            key_path.display()
        )
    })
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

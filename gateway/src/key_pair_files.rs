//! A certificate and its key kept in two PEM files and followed as they change, as
//! kube-apiserver's `dynamiccertificates` follows its serving and proxy-client pairs: a pair
//! renewed on disk (by cert-manager into a Secret volume, by kubeadm's renewal, or by
//! kubegate's own renewal of the generated ones) is taken without a restart, and a pair that
//! does not load (half written, or a key that does not match) never replaces the last good one.
//!
//! There is no watcher task: users look at the files' stamps at most once per check interval
//! on their own threads and read the files only when the stamps moved.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use kubegate_policy::authn::ca_bundle::FileStamp;
use kubegate_policy::throttle::Throttled;
use rustls::sign::CertifiedKey;

/// What a pair of files loads into.
pub trait KeyPairFiles: Sized + Send + Sync + 'static {
    /// What the logs call it ("serving certificate").
    const WHAT: &'static str;

    /// Reads both files and checks that they make a usable pair.
    fn read(cert_path: &Path, key_path: &Path) -> Result<Self, String>;

    /// The leaf certificate (DER): a pair read again with the same leaf is not a new one.
    fn leaf(&self) -> &[u8];
}

/// A pair loaded from `cert_path` and `key_path`, read again when they change.
pub struct FollowedPair<T> {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<T>>,
    /// Looked at on use, at most once per check interval.
    watch: Throttled<Watch>,
}

struct Watch {
    /// The files' versions last read; `None` when they could not be.
    seen: Option<(FileStamp, FileStamp)>,
    /// Whether the current problem with the files has been reported.
    complained: bool,
}

impl<T> std::fmt::Debug for FollowedPair<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowedPair")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl<T: KeyPairFiles> FollowedPair<T> {
    /// Loads the pair, to be looked at again at most once per `check_interval`; an error
    /// names the file and what is wrong with it.
    pub fn load(
        cert_path: &Path,
        key_path: &Path,
        check_interval: Duration,
    ) -> Result<FollowedPair<T>, String> {
        // Stamped before reading: a change in between is seen as newer at the next look.
        let stamps = stamps(cert_path, key_path)?;
        let loaded = T::read(cert_path, key_path)?;
        Ok(FollowedPair {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            current: RwLock::new(Arc::new(loaded)),
            watch: Throttled::new(
                check_interval,
                Watch {
                    seen: Some(stamps),
                    complained: false,
                },
            ),
        })
    }

    /// Changes how often the files are compared (tests use zero).
    #[cfg(test)]
    pub fn with_check_interval(mut self, interval: Duration) -> FollowedPair<T> {
        self.watch.set_interval(interval);
        self
    }

    /// The pair in use now, after looking at the files if the interval has passed. Callers
    /// never wait for each other: while one looks, the others go on with the loaded pair.
    pub fn current(&self) -> Arc<T> {
        self.watch.when_due(|watch| self.check(watch));
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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
        match T::read(&self.cert_path, &self.key_path) {
            Ok(loaded) => {
                watch.seen = Some(stamps);
                watch.complained = false;
                let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                if current.leaf() != loaded.leaf() {
                    *current = Arc::new(loaded);
                    tracing::info!(cert = %self.cert_path.display(), "loaded a new {}", T::WHAT);
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
                %error, "the {} changed but cannot be used; keeping the one loaded before", T::WHAT);
        }
    }
}

fn stamps(cert_path: &Path, key_path: &Path) -> Result<(FileStamp, FileStamp), String> {
    let stamp = |path: &Path| FileStamp::of(path).map_err(|e| format!("{}: {e}", path.display()));
    Ok((stamp(cert_path)?, stamp(key_path)?))
}

/// Reads the chain and the key and checks that they belong together (with the installed
/// rustls provider, which refuses a key that is not the certificate's).
pub fn read_certified_key(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, String> {
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    certified_key_from_pem(&cert_pem, &key_pem, cert_path, key_path)
}

/// [`read_certified_key`] of PEM already read from `cert_path` and `key_path` (named in errors).
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey, String> {
    let chain = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no CERTIFICATE block in the file",
            cert_path.display()
        ));
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| format!("{}: {e}", key_path.display()))?
        .ok_or_else(|| format!("{}: no private key in the file", key_path.display()))?;
    // The process's provider, or ring's (the one pingora installs) before it is installed.
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        format!(
            "{} and {} do not make a usable pair: {e}",
            cert_path.display(),
            key_path.display()
        )
    })
}

//! First-start PKI: a cluster CA, a serving certificate, an admin client certificate
//! (`CN=kubegate-admin, O=system:masters`) and `admin.kubeconfig`, written into the data dir
//! and reused on later starts (as k3s does). Leaf certificates are valid for a year from
//! their issue, as kubeadm's are, and are issued again when they come within
//! [`RENEW_BEFORE`] of their end (at start, and by the periodic check while kubegate runs);
//! the serving certificate also when the names it must cover change.

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// Paths of the generated (or configured) TLS material.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub kubeconfig: PathBuf,
}

/// Errors creating certificates or writing them.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("generating {what}: {source}")]
    Generate {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("{present} exists but {missing} does not: restore {missing} (copy both files from where they were generated), or remove {present} as well to generate a new {description} (clients and replicas that trust the old one will then fail)")]
    HalfCa {
        present: PathBuf,
        missing: PathBuf,
        description: &'static str,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn gen_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Generate { what, source }
}

/// Writes a file atomically (temp file + rename) with the given mode, so a crash never
/// leaves half a key behind.
pub fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), PkiError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        file.write_all(contents).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
    }
    fs::rename(&tmp, path).map_err(io_err(path))
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
/// A generated leaf certificate's lifetime: a year, as kubeadm's and client-go's self-signed
/// serving certificates.
const LEAF_LIFETIME: Duration = Duration::from_secs(365 * DAY.as_secs());
/// A generated CA's lifetime: ten years, as kubeadm's.
const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * DAY.as_secs());
/// A generated leaf certificate is issued again once it has less than this left (k3s renews
/// within 90 days of the end): a quarter of its life, so a restart or the periodic check
/// renews it long before clients see it expire.
pub const RENEW_BEFORE: Duration = Duration::from_secs(90 * DAY.as_secs());
/// New certificates start this long before now, for clocks a little behind this one
/// (client-go's self-signed certificates start an hour back too).
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// Valid from a little before now for `lifetime`.
fn validity(params: &mut CertificateParams, lifetime: Duration) {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    params.not_after = epoch + since_epoch + lifetime;
}

/// Whether the certificate at `path` must be issued again at `now`: missing, unreadable or
/// unparsable, not valid yet, or within [`RENEW_BEFORE`] of its end.
fn due_for_renewal(path: &Path, now: SystemTime) -> bool {
    let Ok(pem) = fs::read(path) else {
        return true;
    };
    let Ok((_, block)) = x509_parser::pem::parse_x509_pem(&pem) else {
        return true;
    };
    let Ok(certificate) = block.parse_x509() else {
        return true;
    };
    let seconds = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    };
    let validity = certificate.validity();
    let renew_from = validity
        .not_after
        .timestamp()
        .saturating_sub(i64::try_from(RENEW_BEFORE.as_secs()).unwrap_or(i64::MAX));
    let now = seconds(now);
    now < validity.not_before.timestamp() || now >= renew_from
}

fn distinguished_name(cn: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    for org in orgs {
        dn.push(DnType::OrganizationName, *org);
    }
    dn
}

/// The names the serving certificate covers: kube's in-cluster names, loopback, the bind
/// address and every configured extra name.
pub fn serving_names(bind_address: &str, extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "127.0.0.1",
        "::1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Ok(ip) = bind_address.parse::<IpAddr>() {
        if !ip.is_unspecified() {
            names.push(ip.to_string());
        }
    }
    names.extend(extra.iter().cloned());
    names.sort();
    names.dedup();
    names
}

fn san(name: &str) -> Result<SanType, PkiError> {
    match name.parse::<IpAddr>() {
        Ok(ip) => Ok(SanType::IpAddress(ip)),
        Err(_) => Ok(SanType::DnsName(
            name.to_string().try_into().map_err(gen_err("a DNS name"))?,
        )),
    }
}

/// Loads the CA (creating it on first start) and issues missing leaf certificates.
pub fn ensure(data_dir: &Path, names: &[String]) -> Result<Pki, PkiError> {
    let dir = data_dir.join("pki");
    fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        serving_cert: dir.join("serving.crt"),
        serving_key: dir.join("serving.key"),
        admin_cert: dir.join("admin.crt"),
        admin_key: dir.join("admin.key"),
        kubeconfig: data_dir.join("admin.kubeconfig"),
    };
    let issuer = ensure_ca(
        &pki.ca_cert,
        &pki.ca_key,
        "kubegate-ca",
        "cluster CA",
        &[&pki.serving_cert, &pki.admin_cert],
    )?;

    let now = SystemTime::now();
    let names_file = dir.join("serving.names");
    let wanted_names = names.join("\n");
    let current_names = fs::read_to_string(&names_file).unwrap_or_default();
    if due_for_renewal(&pki.serving_cert, now)
        || !pki.serving_key.exists()
        || current_names != wanted_names
    {
        let key = KeyPair::generate().map_err(gen_err("the serving key"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name("kubegate", &[]);
        params.subject_alt_names = names.iter().map(|n| san(n)).collect::<Result<_, _>>()?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params, LEAF_LIFETIME);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(gen_err("the serving certificate"))?;
        write_file(&pki.serving_key, key.serialize_pem().as_bytes(), 0o600)?;
        write_file(&pki.serving_cert, cert.pem().as_bytes(), 0o644)?;
        write_file(&names_file, wanted_names.as_bytes(), 0o644)?;
        tracing::info!(names = ?names, "issued serving certificate");
    }
    if due_for_renewal(&pki.admin_cert, now) || !pki.admin_key.exists() {
        let (cert, key) = issue_client_cert(&issuer, "kubegate-admin", &["system:masters"])?;
        write_file(&pki.admin_key, key.as_bytes(), 0o600)?;
        write_file(&pki.admin_cert, cert.as_bytes(), 0o644)?;
        tracing::info!("issued admin client certificate (CN=kubegate-admin, O=system:masters)");
    }
    Ok(pki)
}

/// Loads the CA at `cert`/`key`, creating it first when neither file exists; a new CA
/// removes the `leaves` it would otherwise leave signed by the old one. One file without the
/// other (a half-copied `pki/`) is refused: replacing the one that is there would lose it.
fn ensure_ca(
    cert_path: &Path,
    key_path: &Path,
    common_name: &str,
    description: &'static str,
    leaves: &[&Path],
) -> Result<Issuer<'static, KeyPair>, PkiError> {
    let (has_cert, has_key) = (cert_path.exists(), key_path.exists());
    if has_cert != has_key {
        let (present, missing) = if has_cert {
            (cert_path, key_path)
        } else {
            (key_path, cert_path)
        };
        return Err(PkiError::HalfCa {
            present: present.to_path_buf(),
            missing: missing.to_path_buf(),
            description,
        });
    }
    if !has_cert {
        let key = KeyPair::generate().map_err(gen_err("a CA key"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, CA_LIFETIME);
        let cert = params
            .self_signed(&key)
            .map_err(gen_err("a CA certificate"))?;
        write_file(key_path, key.serialize_pem().as_bytes(), 0o600)?;
        write_file(cert_path, cert.pem().as_bytes(), 0o644)?;
        for leaf in leaves {
            let _ = fs::remove_file(leaf);
        }
        tracing::info!(path = %cert_path.display(), "generated {description}");
    }
    let key_pem = fs::read_to_string(key_path).map_err(io_err(key_path))?;
    let cert_pem = fs::read_to_string(cert_path).map_err(io_err(cert_path))?;
    let key = KeyPair::from_pem(&key_pem).map_err(gen_err("a CA key"))?;
    Issuer::from_ca_cert_pem(&cert_pem, key).map_err(gen_err("a CA issuer"))
}

/// The front-proxy PKI kubegate uses towards APIService backends, kept apart from the
/// cluster CA as kubeadm keeps `front-proxy-ca` apart from `ca`: a backend that trusts the
/// front-proxy CA for request-header identities must not also accept every client
/// certificate of the cluster.
#[derive(Debug, Clone)]
pub struct FrontProxyPki {
    pub ca_cert: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// The common name of the generated proxy client certificate (kubeadm's).
pub const FRONT_PROXY_CLIENT_CN: &str = "front-proxy-client";

/// Loads (creating on first start) `pki/front-proxy-ca.*` and `pki/front-proxy-client.*`.
pub fn ensure_front_proxy(data_dir: &Path) -> Result<FrontProxyPki, PkiError> {
    let dir = data_dir.join("pki");
    fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let pki = FrontProxyPki {
        ca_cert: dir.join("front-proxy-ca.crt"),
        client_cert: dir.join("front-proxy-client.crt"),
        client_key: dir.join("front-proxy-client.key"),
    };
    let ca_key = dir.join("front-proxy-ca.key");
    let issuer = ensure_ca(
        &pki.ca_cert,
        &ca_key,
        "front-proxy-ca",
        "front-proxy CA",
        &[&pki.client_cert],
    )?;
    if due_for_renewal(&pki.client_cert, SystemTime::now()) || !pki.client_key.exists() {
        let (cert, key) = issue_client_cert(&issuer, FRONT_PROXY_CLIENT_CN, &[])?;
        write_file(&pki.client_key, key.as_bytes(), 0o600)?;
        write_file(&pki.client_cert, cert.as_bytes(), 0o644)?;
        tracing::info!("issued front-proxy client certificate (CN={FRONT_PROXY_CLIENT_CN})");
    }
    Ok(pki)
}

/// Issues a client certificate (PEM cert, PEM key) signed by `issuer`.
pub fn issue_client_cert(
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    organizations: &[&str],
) -> Result<(String, String), PkiError> {
    let key = KeyPair::generate().map_err(gen_err("a client key"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(common_name, organizations);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    validity(&mut params, LEAF_LIFETIME);
    let cert = params
        .signed_by(&key, issuer)
        .map_err(gen_err("a client certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// How often a running kubegate looks for generated certificates due for renewal.
pub const RENEWAL_CHECK: Duration = Duration::from_secs(12 * 60 * 60);

/// Renews the generated serving, admin and (when `front_proxy`, kubegate's own proxy
/// identity being in use) front-proxy client certificates while kubegate runs, so that one
/// running for longer than a certificate's life never presents an expired one: every
/// [`RENEWAL_CHECK`] it does what a start does ([`ensure`], [`ensure_front_proxy`], then
/// `admin.kubeconfig`). New connections get a renewed serving certificate at once (the
/// listener follows its files), backends the renewed proxy certificate within seconds (the
/// proxy identity follows its files too).
pub async fn renew_periodically(
    data_dir: PathBuf,
    names: Vec<String>,
    kubeconfig_server: String,
    front_proxy: bool,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(RENEWAL_CHECK) => {}
            _ = stop.changed() => return,
        }
        let (dir, names, server) = (data_dir.clone(), names.clone(), kubeconfig_server.clone());
        let renewed = tokio::task::spawn_blocking(move || {
            let pki = ensure(&dir, &names)?;
            // The proxy follows its certificate's files, so a renewed one is presented to
            // backends from the next routing table on.
            if front_proxy {
                ensure_front_proxy(&dir)?;
            }
            write_kubeconfig(&pki, &pki.ca_cert, &server)
        })
        .await;
        match renewed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "renewing the generated certificates"),
            Err(e) => tracing::warn!(error = %e, "renewing the generated certificates"),
        }
    }
}

/// Writes `admin.kubeconfig` (certificates embedded) pointing at `server`; a file that
/// already says the same is left alone.
pub fn write_kubeconfig(pki: &Pki, ca_file: &Path, server: &str) -> Result<(), PkiError> {
    let b64 = |path: &Path| -> Result<String, PkiError> {
        let bytes = fs::read(path).map_err(io_err(path))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubegate", "cluster": {
            "server": server,
            "certificate-authority-data": b64(ca_file)?,
        }}],
        "users": [{"name": "kubegate-admin", "user": {
            "client-certificate-data": b64(&pki.admin_cert)?,
            "client-key-data": b64(&pki.admin_key)?,
        }}],
        "contexts": [{"name": "kubegate", "context": {"cluster": "kubegate", "user": "kubegate-admin"}}],
        "current-context": "kubegate",
        "preferences": {},
    });
    let text = serde_yaml::to_string(&kubeconfig).map_err(|e| PkiError::Io {
        path: pki.kubeconfig.clone(),
        source: std::io::Error::other(e),
    })?;
    if fs::read(&pki.kubeconfig).is_ok_and(|current| current == text.as_bytes()) {
        return Ok(());
    }
    write_file(&pki.kubeconfig, text.as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_start_creates_and_later_starts_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let names = serving_names("0.0.0.0", &["kube.example".into()]);
        let pki = ensure(dir.path(), &names).unwrap();
        let ca = fs::read(&pki.ca_cert).unwrap();
        let serving = fs::read(&pki.serving_cert).unwrap();
        let again = ensure(dir.path(), &names).unwrap();
        assert_eq!(fs::read(&again.ca_cert).unwrap(), ca);
        assert_eq!(fs::read(&again.serving_cert).unwrap(), serving);
        // New names: same CA, new serving certificate.
        let more = serving_names("0.0.0.0", &["other.example".into()]);
        let third = ensure(dir.path(), &more).unwrap();
        assert_eq!(fs::read(&third.ca_cert).unwrap(), ca);
        assert_ne!(fs::read(&third.serving_cert).unwrap(), serving);
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&pki.ca_key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn front_proxy_pki_is_separate_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = ensure(dir.path(), &serving_names("127.0.0.1", &[])).unwrap();
        let front = ensure_front_proxy(dir.path()).unwrap();
        assert_ne!(
            fs::read(&front.ca_cert).unwrap(),
            fs::read(&cluster.ca_cert).unwrap()
        );
        let client = fs::read(&front.client_cert).unwrap();
        let (_, parsed) = x509_parser::pem::parse_x509_pem(&client).unwrap();
        let cert = parsed.parse_x509().unwrap();
        assert!(cert.subject().to_string().contains("CN=front-proxy-client"));
        let ca = fs::read(&front.ca_cert).unwrap();
        let (_, ca_parsed) = x509_parser::pem::parse_x509_pem(&ca).unwrap();
        assert_eq!(cert.issuer(), ca_parsed.parse_x509().unwrap().subject());
        let again = ensure_front_proxy(dir.path()).unwrap();
        assert_eq!(fs::read(&again.client_cert).unwrap(), client);
    }

    #[test]
    fn a_ca_without_its_key_or_a_key_without_its_ca_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let names = serving_names("127.0.0.1", &[]);
        let pki = ensure(dir.path(), &names).unwrap();
        let front = ensure_front_proxy(dir.path()).unwrap();
        let key = fs::read(&pki.ca_key).unwrap();
        fs::remove_file(&pki.ca_cert).unwrap();
        let err = ensure(dir.path(), &names).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{} exists but {} does not: restore",
                pki.ca_key.display(),
                pki.ca_cert.display()
            )),
            "{err}"
        );
        assert!(err.contains("to generate a new cluster CA"), "{err}");
        assert_eq!(fs::read(&pki.ca_key).unwrap(), key, "the key must be kept");
        // The same for the front-proxy CA, the other way round.
        let front_key = dir.path().join("pki").join("front-proxy-ca.key");
        fs::remove_file(&front_key).unwrap();
        let err = ensure_front_proxy(dir.path()).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{} exists but {} does not",
                front.ca_cert.display(),
                front_key.display()
            )),
            "{err}"
        );
        // Removing both is a fresh start.
        fs::remove_file(&pki.ca_key).unwrap();
        let fresh = ensure(dir.path(), &names).unwrap();
        assert_ne!(fs::read(&fresh.ca_key).unwrap(), key);
    }

    /// (not before, not after) of a PEM certificate file, in Unix seconds.
    fn validity_of(path: &Path) -> (i64, i64) {
        let pem = fs::read(path).unwrap();
        let (_, parsed) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = parsed.parse_x509().unwrap();
        let validity = cert.validity();
        (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        )
    }

    fn unix_now() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    /// A self-signed certificate valid from `from` to `to` (Unix seconds) at `path`.
    fn write_cert_valid(path: &Path, from: i64, to: i64) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        params.not_before = epoch + Duration::from_secs(from as u64);
        params.not_after = epoch + Duration::from_secs(to as u64);
        fs::write(path, params.self_signed(&key).unwrap().pem()).unwrap();
    }

    #[test]
    fn leaves_last_a_year_from_issue_and_cas_ten() {
        let dir = tempfile::tempdir().unwrap();
        let pki = ensure(dir.path(), &serving_names("127.0.0.1", &[])).unwrap();
        let front = ensure_front_proxy(dir.path()).unwrap();
        let now = unix_now();
        let year = LEAF_LIFETIME.as_secs() as i64;
        for leaf in [&pki.serving_cert, &pki.admin_cert, &front.client_cert] {
            let (from, to) = validity_of(leaf);
            assert!(
                (now - 3700..=now - 3500).contains(&from),
                "{leaf:?}: {from} vs {now}"
            );
            assert!(
                (now + year - 100..=now + year + 100).contains(&to),
                "{leaf:?}"
            );
        }
        let (_, ca_to) = validity_of(&pki.ca_cert);
        assert!(ca_to >= now + 10 * 365 * 86_400 - 100, "{ca_to}");
    }

    #[test]
    fn leaves_near_or_past_their_end_are_issued_again_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let names = serving_names("127.0.0.1", &[]);
        let pki = ensure(dir.path(), &names).unwrap();
        let front = ensure_front_proxy(dir.path()).unwrap();
        let ca = fs::read(&pki.ca_cert).unwrap();
        let now = unix_now();
        // Expired; ending in 30 days (within RENEW_BEFORE); not valid for another day.
        write_cert_valid(&pki.serving_cert, now - 400 * 86_400, now - 86_400);
        write_cert_valid(&pki.admin_cert, now - 300 * 86_400, now + 30 * 86_400);
        write_cert_valid(&front.client_cert, now + 86_400, now + 300 * 86_400);
        let again = ensure(dir.path(), &names).unwrap();
        ensure_front_proxy(dir.path()).unwrap();
        for leaf in [&again.serving_cert, &again.admin_cert, &front.client_cert] {
            let (from, to) = validity_of(leaf);
            assert!(
                from <= now && to > now + 360 * 86_400,
                "{leaf:?}: {from}..{to}"
            );
        }
        assert_eq!(fs::read(&again.ca_cert).unwrap(), ca, "the CA stays");
        // One with more than RENEW_BEFORE left is kept.
        let serving = fs::read(&again.serving_cert).unwrap();
        ensure(dir.path(), &names).unwrap();
        assert_eq!(fs::read(&again.serving_cert).unwrap(), serving);
        assert!(!due_for_renewal(&again.serving_cert, SystemTime::now()));
        assert!(due_for_renewal(
            &again.serving_cert,
            SystemTime::now() + LEAF_LIFETIME - RENEW_BEFORE + DAY
        ));
        assert!(due_for_renewal(
            &dir.path().join("missing.crt"),
            SystemTime::now()
        ));
    }

    #[test]
    fn admin_certificate_is_system_masters() {
        let dir = tempfile::tempdir().unwrap();
        let pki = ensure(dir.path(), &serving_names("127.0.0.1", &[])).unwrap();
        let pem = fs::read(&pki.admin_cert).unwrap();
        let (_, parsed) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = parsed.parse_x509().unwrap();
        let subject = cert.subject().to_string();
        assert!(subject.contains("CN=kubegate-admin"), "{subject}");
        assert!(subject.contains("O=system:masters"), "{subject}");
    }
}

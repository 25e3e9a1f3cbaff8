//! First-start PKI: a cluster CA, a serving certificate, an admin client certificate
//! (`CN=kubegate-admin, O=system:masters`) and `admin.kubeconfig`, written into the data dir
//! and reused on later starts (as k3s does). The serving certificate is re-issued when the
//! names it must cover change.

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine;
use chrono::Datelike;
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

fn validity(params: &mut CertificateParams, years: i32) {
    let now = chrono::Utc::now();
    params.not_before = rcgen::date_time_ymd(now.year() - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(now.year() + years, 1, 1);
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

    let names_file = dir.join("serving.names");
    let wanted_names = names.join("\n");
    let current_names = fs::read_to_string(&names_file).unwrap_or_default();
    if !pki.serving_cert.exists() || !pki.serving_key.exists() || current_names != wanted_names {
        let key = KeyPair::generate().map_err(gen_err("the serving key"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name("kubegate", &[]);
        params.subject_alt_names = names.iter().map(|n| san(n)).collect::<Result<_, _>>()?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params, 1);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(gen_err("the serving certificate"))?;
        write_file(&pki.serving_key, key.serialize_pem().as_bytes(), 0o600)?;
        write_file(&pki.serving_cert, cert.pem().as_bytes(), 0o644)?;
        write_file(&names_file, wanted_names.as_bytes(), 0o644)?;
        tracing::info!(names = ?names, "issued serving certificate");
    }
    if !pki.admin_cert.exists() || !pki.admin_key.exists() {
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
        validity(&mut params, 10);
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
    if !pki.client_cert.exists() || !pki.client_key.exists() {
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
    validity(&mut params, 1);
    let cert = params
        .signed_by(&key, issuer)
        .map_err(gen_err("a client certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Writes `admin.kubeconfig` (certificates embedded) pointing at `server`.
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

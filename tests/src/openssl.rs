//! Certificates for the test fixtures, made with the `openssl` CLI the machines already have:
//! a self-signed CA and the certificates it issues (EC P-256, valid two days), and the small
//! process and file helpers the fixtures share.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The x509v3 extensions of a client certificate.
pub const CLIENT_EXTENSIONS: &str =
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n";

/// Runs a command, panicking with its stderr when it fails.
pub fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Writes a file, panicking with the path when it cannot.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Makes a self-signed CA `<stem>.crt` / `<stem>.key` with subject `cn` in `dir`.
pub fn make_ca(dir: &Path, stem: &str, cn: &str) -> (PathBuf, PathBuf) {
    let cnf = dir.join(format!("{stem}.cnf"));
    write(
        &cnf,
        format!(
            "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = {cn}\n[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n"
        ),
    );
    let (crt, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    run(Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec"])
        .args(["-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "2", "-extensions", "v3_ca"])
        .arg("-config")
        .arg(&cnf)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt));
    (crt, key)
}

/// Issues `<stem>.crt` / `<stem>.key` in `dir` for subject `cn`, signed by the CA
/// (certificate, key), with the given x509v3 extensions.
pub fn issue(
    dir: &Path,
    ca: (&Path, &Path),
    stem: &str,
    cn: &str,
    extensions: &str,
) -> (PathBuf, PathBuf) {
    let cnf = dir.join(format!("{stem}.cnf"));
    write(
        &cnf,
        format!("[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = {cn}\n"),
    );
    let ext = dir.join(format!("{stem}.ext"));
    write(&ext, extensions);
    let (crt, key, csr) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
        dir.join(format!("{stem}.csr")),
    );
    run(Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec"])
        .args(["-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
        .arg("-config")
        .arg(&cnf)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&csr));
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
        .arg("-in")
        .arg(&csr)
        .arg("-CA")
        .arg(ca.0)
        .arg("-CAkey")
        .arg(ca.1)
        .arg("-extfile")
        .arg(&ext)
        .arg("-out")
        .arg(&crt));
    (crt, key)
}

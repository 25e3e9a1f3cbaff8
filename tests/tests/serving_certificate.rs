//! The serving certificate is followed as its files change, as kube-apiserver follows
//! `--tls-cert-file`: a renewed pair reaches new connections without a restart, and a pair
//! that does not load leaves the last good one served.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kubegate_tests::openssl::{issue, run};
use kubegate_tests::{eventually, Kubegate};

const SERVER_EXTENSIONS: &str =
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n";

/// Whether a new TLS connection to the server is served exactly `cert` (PEM), verified
/// against `ca`.
fn serves(gate: &Kubegate, ca: &Path, cert: &Path) -> bool {
    let script = r#"
import socket, ssl, sys
port, ca, cert = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        served = tls.getpeercert(binary_form=True)
print("same" if served == ssl.PEM_cert_to_DER_cert(open(cert).read()) else "other")
"#;
    let out = run(Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(gate.port.to_string())
        .arg(ca)
        .arg(cert));
    String::from_utf8_lossy(&out).trim() == "same"
}

#[test]
fn a_renewed_serving_certificate_reaches_new_connections_without_a_restart() {
    let gate = Kubegate::start();
    let pki = gate.data_dir.join("pki");
    let (ca_cert, ca_key) = (pki.join("ca.crt"), pki.join("ca.key"));
    let serving = pki.join("serving.crt");
    assert!(
        serves(&gate, &ca_cert, &serving),
        "the generated certificate"
    );

    // A new pair from the same CA, written as a renewal writes it (key, then certificate).
    let work = tempfile::tempdir().expect("work dir");
    let (new_cert, new_key) = issue(
        work.path(),
        (&ca_cert, &ca_key),
        "renewed",
        "kubegate",
        SERVER_EXTENSIONS,
    );
    let replace = |from: &Path, to: &Path| {
        let tmp = to.with_extension("incoming");
        std::fs::copy(from, &tmp).expect("copy");
        std::fs::rename(&tmp, to).expect("rename");
    };
    replace(&new_key, &pki.join("serving.key"));
    replace(&new_cert, &serving);
    assert!(
        eventually(Duration::from_secs(10), || serves(
            &gate, &ca_cert, &new_cert
        )),
        "the renewed certificate is not served:\n{}",
        gate.log()
    );
    assert!(gate.log().contains("loaded a new serving certificate"));
    // Clients that trust the CA go on working.
    assert!(gate
        .ok(&["get", "namespace", "default", "-o", "name"])
        .contains("default"));

    // A certificate whose key is not next to it is not taken: the renewed pair stays.
    let (other_cert, _) = issue(
        work.path(),
        (&ca_cert, &ca_key),
        "other",
        "kubegate",
        SERVER_EXTENSIONS,
    );
    // (The files are looked at when a connection is made.)
    replace(&other_cert, &serving);
    assert!(eventually(Duration::from_secs(10), || {
        assert!(serves(&gate, &ca_cert, &new_cert), "{}", gate.log());
        gate.log()
            .contains("the serving certificate changed but cannot be used")
    }));
    assert!(gate
        .ok(&["get", "namespace", "default", "-o", "name"])
        .contains("default"));
}

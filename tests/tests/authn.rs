//! Authentication end to end with the real kubectl: static tokens, ServiceAccount tokens
//! from `kubectl create token`, bootstrap tokens, front-proxy headers, x509 failures,
//! anonymous access, impersonation, and the TokenReview / SelfSubjectReview APIs.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use kubegate_tests::Kubegate;
use serde_json::Value;

/// `kubectl auth whoami -o json` with extra flags.
fn whoami(gate: &Kubegate, extra: &[&str]) -> Result<Value, String> {
    let mut args = extra.to_vec();
    args.extend(["auth", "whoami", "-o", "json"]);
    let out = gate.kubectl(&args);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

fn username(review: &Value) -> &str {
    review["status"]["userInfo"]["username"]
        .as_str()
        .unwrap_or("")
}

fn groups(review: &Value) -> Vec<String> {
    review["status"]["userInfo"]["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A kubeconfig-less kubectl call against the server with only a bearer token.
fn with_token(gate: &Kubegate, token: &str) -> Vec<String> {
    vec![
        "--kubeconfig=/dev/null".into(),
        format!("--server={}", gate.url()),
        format!(
            "--certificate-authority={}",
            gate.data_dir.join("pki/ca.crt").display()
        ),
        format!("--token={token}"),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a client certificate signed by it (`subject` like `/CN=x/O=g`).
fn make_client_cert(dir: &Path, name: &str, subject: &str, days: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}-ca.key"),
            "-out",
            &format!("{name}-ca.crt"),
            "-days",
            "30",
            "-subj",
            &format!("/CN={name}-ca"),
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ],
    );
    std::fs::write(dir.join("ext.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{name}-ca.crt"),
            "-CAkey",
            &format!("{name}-ca.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            days,
            "-extfile",
            "ext.cnf",
        ],
    );
}

/// curl with a given client certificate; returns (status, body).
fn curl_cert(
    gate: &Kubegate,
    cert: &Path,
    key: &Path,
    headers: &[&str],
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method])
        .arg("--cacert")
        .arg(gate.data_dir.join("pki/ca.crt"))
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key);
    for h in headers {
        cmd.arg("-H").arg(h);
    }
    if let Some(b) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary", b]);
    }
    let out = cmd
        .arg(format!("{}{}", gate.url(), path))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

const WHOAMI_BODY: &str = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
const WHOAMI_PATH: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

#[test]
fn tokens_serviceaccounts_bootstrap_and_reviews() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cr3t-token,alice,alice-uid,\"devs,ops\"\n").unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "authentication:\n  tokenAuthFile: {}\n  bootstrapTokens: true\n",
            tokens.display()
        ),
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);

    // The admin certificate (x509).
    let me = whoami(&gate, &[]).unwrap();
    assert_eq!(username(&me), "kubegate-admin");
    assert!(groups(&me).contains(&"system:masters".to_string()));
    assert!(groups(&me).contains(&"system:authenticated".to_string()));

    // Static token file.
    let alice = whoami(&gate, &strs(&with_token(&gate, "s3cr3t-token"))).unwrap();
    assert_eq!(username(&alice), "alice");
    assert_eq!(alice["status"]["userInfo"]["uid"], "alice-uid");
    assert_eq!(groups(&alice), vec!["devs", "ops", "system:authenticated"]);
    let err = whoami(&gate, &strs(&with_token(&gate, "wrong-token"))).unwrap_err();
    assert!(err.contains("Unauthorized"), "{err}");
    // The token file is re-read when it changes.
    std::fs::write(&tokens, "other-token,carol,carol-uid\n").unwrap();
    assert!(kubegate_tests::eventually(
        std::time::Duration::from_secs(15),
        || { whoami(&gate, &strs(&with_token(&gate, "other-token"))).is_ok() }
    ));
    // The removed token stops working once its cached success (10 s) expires.
    assert!(kubegate_tests::eventually(
        std::time::Duration::from_secs(20),
        || { whoami(&gate, &strs(&with_token(&gate, "s3cr3t-token"))).is_err() }
    ));

    // ServiceAccount tokens from `kubectl create token`.
    gate.ok(&["create", "serviceaccount", "robot"]);
    let token = gate.ok(&["create", "token", "robot"]).trim().to_string();
    let robot = whoami(&gate, &strs(&with_token(&gate, &token))).unwrap();
    assert_eq!(username(&robot), "system:serviceaccount:default:robot");
    let g = groups(&robot);
    assert!(
        g.contains(&"system:serviceaccounts".to_string())
            && g.contains(&"system:serviceaccounts:default".to_string()),
        "{g:?}"
    );
    assert!(
        robot["status"]["userInfo"]["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .is_some_and(|c| c.starts_with("JTI="))
    );
    // The issuer publishes its discovery document and keys.
    let (code, body) = gate.curl("GET", "/.well-known/openid-configuration", &[], None);
    assert_eq!(code, 200);
    let discovery: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        discovery["jwks_uri"]
            .as_str()
            .map(|u| u.ends_with("/openid/v1/jwks")),
        Some(true)
    );
    let (code, body) = gate.curl("GET", "/openid/v1/jwks", &[], None);
    assert_eq!(code, 200);
    let jwks: Value = serde_json::from_slice(&body).unwrap();
    assert!(!jwks["keys"].as_array().unwrap().is_empty());
    // TokenReview answers for the same token.
    let review = gate.ok_stdin(
        &["create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews", "-f", "-"],
        &format!(r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{{"token":"{token}"}}}}"#),
    );
    let review: Value = serde_json::from_str(&review).unwrap();
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:default:robot"
    );
    // Deleting the ServiceAccount invalidates its tokens.
    gate.ok(&["delete", "serviceaccount", "robot"]);
    assert!(kubegate_tests::eventually(
        std::time::Duration::from_secs(15),
        || { whoami(&gate, &strs(&with_token(&gate, &token))).is_err() }
    ));
    let review = gate.ok_stdin(
        &["create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews", "-f", "-"],
        &format!(r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{{"token":"{token}"}}}}"#),
    );
    let review: Value = serde_json::from_str(&review).unwrap();
    assert_ne!(review["status"]["authenticated"], true, "{review}");

    // Bootstrap tokens.
    gate.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-abcdef\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: abcdef\n  token-secret: 0123456789abcdef\n  usage-bootstrap-authentication: \"true\"\n  auth-extra-groups: system:bootstrappers:worker\n",
    );
    let boot = whoami(&gate, &strs(&with_token(&gate, "abcdef.0123456789abcdef"))).unwrap();
    assert_eq!(username(&boot), "system:bootstrap:abcdef");
    let g = groups(&boot);
    assert!(
        g.contains(&"system:bootstrappers".to_string())
            && g.contains(&"system:bootstrappers:worker".to_string()),
        "{g:?}"
    );
    assert!(whoami(&gate, &strs(&with_token(&gate, "abcdef.ffffffffffffffff"))).is_err());
}

#[test]
fn impersonation_and_anonymous() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    // Anonymous requests may not create SelfSubjectReviews under RBAC (kube binds
    // system:basic-user to system:authenticated only): this test is about identities.
    std::fs::write(
        &config,
        "authentication:\n  anonymous: true\nauthorization:\n  modes: [AlwaysAllow]\n",
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);
    let bob = whoami(&gate, &["--as", "bob", "--as-group", "devs"]).unwrap();
    assert_eq!(username(&bob), "bob");
    assert_eq!(groups(&bob), vec!["devs", "system:authenticated"]);
    let sa = whoami(&gate, &["--as", "system:serviceaccount:team:builder"]).unwrap();
    let g = groups(&sa);
    assert!(
        g.contains(&"system:serviceaccounts:team".to_string()),
        "{g:?}"
    );
    // Anonymous, when enabled.
    let out = Command::new("curl")
        .args([
            "-sS",
            "-k",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            WHOAMI_BODY,
        ])
        .arg(format!("{}{}", gate.url(), WHOAMI_PATH))
        .output()
        .unwrap();
    let anon: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(username(&anon), "system:anonymous");
    assert_eq!(groups(&anon), vec!["system:unauthenticated"]);
    // A presented but invalid credential is never anonymous.
    let out = Command::new("curl")
        .args([
            "-sS",
            "-k",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Authorization: Bearer nope",
        ])
        .arg(format!("{}/api/v1/namespaces", gate.url()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
}

#[test]
fn front_proxy_headers_only_from_the_front_proxy_and_bad_certificates_fail() {
    let dir = tempfile::tempdir().unwrap();
    make_client_cert(dir.path(), "front-proxy", "/CN=front-proxy-client", "30");
    make_client_cert(dir.path(), "stranger", "/CN=mallory/O=system:masters", "30");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "authentication:\n  requestHeader:\n    clientCAFile: {}\n    allowedNames: [front-proxy-client]\n",
            dir.path().join("front-proxy-ca.crt").display()
        ),
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);
    let proxy_cert = dir.path().join("front-proxy.crt");
    let proxy_key = dir.path().join("front-proxy.key");
    let (code, body) = curl_cert(
        &gate,
        &proxy_cert,
        &proxy_key,
        &[
            "X-Remote-User: alice",
            "X-Remote-Group: g1",
            "X-Remote-Group: g2",
            "X-Remote-Extra-Scopes: read",
        ],
        "POST",
        WHOAMI_PATH,
        Some(WHOAMI_BODY),
    );
    assert_eq!(code, 201, "{body}");
    let review: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(username(&review), "alice");
    assert_eq!(groups(&review), vec!["g1", "g2", "system:authenticated"]);
    assert_eq!(review["status"]["userInfo"]["extra"]["scopes"][0], "read");
    // The same headers from the admin (not a front proxy) are ignored.
    let pki = gate.data_dir.join("pki");
    let (code, body) = curl_cert(
        &gate,
        &pki.join("admin.crt"),
        &pki.join("admin.key"),
        &["X-Remote-User: alice"],
        "POST",
        WHOAMI_PATH,
        Some(WHOAMI_BODY),
    );
    assert_eq!(code, 201);
    assert_eq!(
        username(&serde_json::from_str(&body).unwrap()),
        "kubegate-admin"
    );
    // A certificate from an unknown CA never authenticates.
    let (code, _) = curl_cert(
        &gate,
        &dir.path().join("stranger.crt"),
        &dir.path().join("stranger.key"),
        &[],
        "GET",
        "/api/v1/namespaces",
        None,
    );
    // kube's handshake takes any certificate; the authenticator refuses it: a 401 Status.
    assert_eq!(
        code, 401,
        "an unknown CA's certificate must not authenticate"
    );
}

/// As kube-apiserver, the handshake asks for a certificate but refuses none: the x509
/// authenticator judges it. A version 1 certificate (what `openssl x509 -req` makes without
/// extensions) from the client CA authenticates; an expired one gets a 401 (which makes
/// client-go's credential plugins renew it), and a token sent along still authenticates.
#[test]
fn client_certificates_are_judged_by_the_authenticator_not_the_handshake() {
    let gate = Kubegate::start();
    let dir = tempfile::tempdir().unwrap();
    let pki = gate.data_dir.join("pki");
    let (ca, ca_key) = (pki.join("ca.crt"), pki.join("ca.key"));
    let (ca, ca_key) = (ca.to_str().unwrap(), ca_key.to_str().unwrap());
    openssl(
        dir.path(),
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "frank.key",
            "-out",
            "frank.csr",
            "-subj",
            "/O=g1/O=g2/CN=frank",
        ],
    );
    for (name, days) in [("frank", "1"), ("stale", "0")] {
        openssl(
            dir.path(),
            &[
                "x509",
                "-req",
                "-in",
                "frank.csr",
                "-CA",
                ca,
                "-CAkey",
                ca_key,
                "-CAcreateserial",
                "-out",
                &format!("{name}.crt"),
                "-days",
                days,
            ],
        );
    }
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(dir.path().join("frank.crt"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("Version: 1 (0x0)"),
        "the test needs a version 1 certificate"
    );
    let key = dir.path().join("frank.key");
    let (code, body) = curl_cert(
        &gate,
        &dir.path().join("frank.crt"),
        &key,
        &[],
        "POST",
        WHOAMI_PATH,
        Some(WHOAMI_BODY),
    );
    assert_eq!(code, 201, "{body}");
    let review: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(username(&review), "frank");
    assert_eq!(groups(&review), vec!["g1", "g2", "system:authenticated"]);

    // One that names the CA as its issuer but was signed by another key is nobody.
    let subject = Command::new("openssl")
        .args([
            "x509", "-noout", "-subject", "-nameopt", "compat", "-in", ca,
        ])
        .output()
        .unwrap();
    let subject = String::from_utf8_lossy(&subject.stdout)
        .trim()
        .trim_start_matches("subject=")
        .to_string();
    openssl(
        dir.path(),
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "impostor-ca.key",
            "-out",
            "impostor-ca.crt",
            "-days",
            "1",
            "-subj",
            &subject,
        ],
    );
    openssl(
        dir.path(),
        &[
            "x509",
            "-req",
            "-in",
            "frank.csr",
            "-CA",
            "impostor-ca.crt",
            "-CAkey",
            "impostor-ca.key",
            "-CAcreateserial",
            "-out",
            "forged.crt",
            "-days",
            "1",
        ],
    );
    let (code, body) = curl_cert(
        &gate,
        &dir.path().join("forged.crt"),
        &key,
        &[],
        "POST",
        WHOAMI_PATH,
        Some(WHOAMI_BODY),
    );
    assert_eq!(
        code, 401,
        "a forged version 1 certificate authenticated: {body}"
    );

    // Expired (its validity ended when it was made).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let stale = dir.path().join("stale.crt");
    let (code, body) = curl_cert(&gate, &stale, &key, &[], "GET", "/api/v1/namespaces", None);
    assert_eq!(code, 401, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Unauthorized", "{status}");
    gate.ok(&["create", "serviceaccount", "ci"]);
    let token = gate.ok(&["create", "token", "ci"]);
    let bearer = format!("Authorization: Bearer {}", token.trim());
    let (code, body) = curl_cert(
        &gate,
        &stale,
        &key,
        &[&bearer],
        "POST",
        WHOAMI_PATH,
        Some(WHOAMI_BODY),
    );
    assert_eq!(code, 201, "{body}");
    let review: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(username(&review), "system:serviceaccount:default:ci");
}

#[test]
fn malformed_credentials_are_401_and_the_server_survives() {
    let gate = Kubegate::start();
    let url = format!("{}/api/v1/namespaces", gate.url());
    let ca = gate.data_dir.join("pki/ca.crt");
    // Raw bytes in a header value (not UTF-8) need the header from a file.
    let send = |header: &[u8], protocol: &str| -> String {
        let file = gate.data_dir.with_file_name("header.txt");
        let mut line = header.to_vec();
        line.push(b'\n');
        std::fs::write(&file, line).unwrap();
        let out = Command::new("curl")
            .args(["-sS", protocol, "-o", "/dev/null", "-w", "%{http_code}"])
            .arg("--cacert")
            .arg(&ca)
            .arg("-H")
            .arg(format!("@{}", file.display()))
            .arg(&url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let status = |header: &[u8]| send(header, "--http2");
    let status_h1 = |header: &[u8]| send(header, "--http1.1");
    assert_eq!(
        status(b"Authorization: Bearer \xff\xfe\xfd"),
        "401",
        "non-UTF-8 token"
    );
    assert_eq!(
        status(b"Authorization: Bearer "),
        "401",
        "empty bearer token"
    );
    assert_eq!(status(b"Authorization: Bearer a.b.c"), "401", "garbage JWT");
    // Large tokens (under Go's 1 MiB header limit) are judged and refused like any other:
    // 64 KiB over HTTP/1.1, 40 KiB over HTTP/2 (curl's HTTP/2 library will not send a
    // header block over 64 KiB).
    let huge = format!("Authorization: Bearer {}", "x".repeat(64 * 1024));
    assert_eq!(status_h1(huge.as_bytes()), "401", "oversized header");
    let large = format!("Authorization: Bearer {}", "x".repeat(40 * 1024));
    assert_eq!(status(large.as_bytes()), "401", "large header over HTTP/2");
    // Identity headers from an ordinary client are not an identity.
    assert_eq!(status(b"X-Remote-User: system:admin"), "401");
    assert!(
        gate.ok(&["get", "ns", "default"]).contains("Active"),
        "the server is still serving"
    );
}

/// A connection remembers its last bearer token to skip hashing it again; every request on it
/// must still be answered for its own credential: another token, an unknown one of the same
/// length, none at all, and the first again. Over HTTP/1.1 and HTTP/2.
#[test]
fn one_connection_carrying_several_tokens_gets_each_ones_identity() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    // Same length, differing in the last byte only.
    std::fs::write(
        &tokens,
        "memo-token-0001,alice,alice-uid,devs\nmemo-token-0002,bob,bob-uid,ops\n",
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "authentication:\n  anonymous: true\n  tokenAuthFile: {}\n",
            tokens.display()
        ),
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);
    let url = format!(
        "{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        gate.url()
    );
    let ca = gate.data_dir.join("pki/ca.crt");
    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let sequence = [
        Some("memo-token-0001"),
        Some("memo-token-0001"),
        Some("memo-token-0002"),
        Some("memo-token-0003"),
        None,
        Some("memo-token-0001"),
    ];
    for protocol in ["--http1.1", "--http2"] {
        same_connection_identities(&url, &ca, review, &sequence, protocol);
    }
}

/// Sends `sequence` (bearer tokens, or none) over one connection; asserts who each request was
/// answered for.
fn same_connection_identities(
    url: &str,
    ca: &Path,
    review: &str,
    sequence: &[Option<&str>],
    protocol: &str,
) {
    // One curl, one transfer per request (`--next`), sharing curl's connection cache; no
    // client certificate, so the bearer token is the only credential.
    let mut cmd = Command::new("curl");
    for (i, token) in sequence.iter().enumerate() {
        if i > 0 {
            cmd.arg("--next");
        }
        cmd.args(["-sS", protocol, "-X", "POST", "--cacert"])
            .arg(ca)
            .args(["-H", "Content-Type: application/json", "--data", review])
            .args(["-w", "\n%{http_code} %{num_connects}\n"]);
        if let Some(token) = token {
            cmd.arg("-H").arg(format!("Authorization: Bearer {token}"));
        }
        cmd.arg(url);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text} {:?}", out.stderr);
    // Each transfer prints its body, then "<code> <new connections>".
    let mut answers = Vec::new();
    let mut connects = 0;
    let mut body = String::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts[..] {
            [code, new] if code.len() == 3 && code.parse::<u16>().is_ok() => {
                connects += new.parse::<u32>().unwrap();
                // The identity answered for: the review's user, or who a `Status` refused.
                let user = serde_json::from_str::<Value>(&body).ok().and_then(|v| {
                    v["status"]["userInfo"]["username"]
                        .as_str()
                        .or_else(|| v["message"].as_str())
                        .map(String::from)
                });
                answers.push((code.to_string(), user));
                body.clear();
            }
            _ => body.push_str(line),
        }
    }
    let user = |name: &str| ("201".to_string(), Some(name.to_string()));
    assert_eq!(
        answers,
        vec![
            user("alice"),
            user("alice"),
            user("bob"),
            ("401".to_string(), Some("Unauthorized".to_string())),
            // Anonymous requests may not create reviews (kube's system:basic-user is for
            // authenticated users), and the refusal names who asked.
            (
                "403".to_string(),
                Some(
                    "selfsubjectreviews.authentication.k8s.io is forbidden: User \"system:anonymous\" cannot create resource \"selfsubjectreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
                        .to_string()
                )
            ),
            user("alice"),
        ],
        "{protocol}: {text}"
    );
    // HTTP/1.1 carries them all on one connection. An HTTP/2 connection is closed after an
    // unauthenticated or anonymous request (kube's CVE-2023-44487 mitigation): the 401 and
    // the anonymous request each end theirs, so the two after them connect again.
    let expected = if protocol == "--http2" { 3 } else { 1 };
    assert_eq!(connects, expected, "{protocol}: connections: {text}");
}

/// kube's 403 bodies name what they refuse in `details`: the user a request may not
/// impersonate, and (empty) for a non-resource path.
#[test]
fn forbidden_impersonation_and_paths_carry_kubes_details() {
    let gate = Kubegate::start();
    gate.ok(&["create", "serviceaccount", "plain"]);
    let token = gate.ok(&["create", "token", "plain"]);
    let get = |path: &str, headers: &[&str]| -> Value {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--cacert"])
            .arg(gate.data_dir.join("pki/ca.crt"))
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", token.trim()));
        for header in headers {
            cmd.arg("-H").arg(header);
        }
        let out = cmd.arg(format!("{}{path}", gate.url())).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let denied = get("/api/v1/namespaces", &["Impersonate-User: bob"]);
    assert_eq!(denied["code"], 403, "{denied}");
    assert_eq!(
        denied["message"],
        r#"users "bob" is forbidden: User "system:serviceaccount:default:plain" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    assert_eq!(
        denied["details"],
        serde_json::json!({"name": "bob", "kind": "users"})
    );
    let path = get("/metrics", &[]);
    assert_eq!(path["code"], 403, "{path}");
    assert_eq!(path["details"], serde_json::json!({}), "{path}");
}

/// An AuthenticationConfiguration's `anonymous` block decides every unauthenticated request,
/// the public health and version paths included (KEP-4633): only its listed paths are
/// anonymous, and none when it is disabled.
#[test]
fn anonymous_conditions_decide_the_public_paths_too() {
    let dir = tempfile::tempdir().unwrap();
    let status = |gate: &Kubegate, path: &str| -> u16 {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(gate.data_dir.join("pki/ca.crt"))
            .arg(format!("{}{path}", gate.url()))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let limited = dir.path().join("limited.yaml");
    std::fs::write(
        &limited,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous:\n  enabled: true\n  conditions:\n  - path: /livez\n",
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--authentication-config", limited.to_str().unwrap()]);
    assert_eq!(status(&gate, "/livez"), 200);
    assert_eq!(status(&gate, "/healthz"), 401);
    assert_eq!(status(&gate, "/version"), 401);
    drop(gate);

    let disabled = dir.path().join("disabled.yaml");
    std::fs::write(
        &disabled,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous:\n  enabled: false\n",
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--authentication-config", disabled.to_str().unwrap()]);
    assert_eq!(status(&gate, "/version"), 401);
    assert_eq!(status(&gate, "/livez"), 401);
    drop(gate);

    // Without such a block, kubegate's default: anonymous off, the public paths open.
    let gate = Kubegate::start();
    assert_eq!(status(&gate, "/version"), 200);
    assert_eq!(status(&gate, "/api"), 401);
}

/// The `iss` claim of a JWT (its payload is unpadded base64url JSON).
fn token_issuer(token: &str) -> String {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap_or_default();
    let claims: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    claims["iss"].as_str().unwrap_or_default().to_string()
}

/// Who the server takes `token` for (`kubectl auth whoami`), or kubectl's error.
fn token_user(gate: &Kubegate, token: &str) -> Result<String, String> {
    whoami(gate, &strs(&with_token(gate, token))).map(|review| username(&review).to_string())
}

/// kube's issuer migration: `--service-account-issuer` repeated, the first signs new tokens
/// and every one is accepted, so the tokens already out keep working until they expire.
#[test]
fn a_new_service_account_issuer_keeps_accepting_the_old_ones_tokens() {
    const OLD: &str = "https://old.issuer.example";
    const NEW: &str = "https://new.issuer.example";
    const ROBOT: &str = "system:serviceaccount:default:robot";
    let mut gate = Kubegate::start_with(&["--service-account-issuer", OLD]);
    gate.ok(&["create", "serviceaccount", "robot"]);
    let old_token = gate.ok(&["create", "token", "robot"]).trim().to_string();
    assert_eq!(token_issuer(&old_token), OLD);
    assert_eq!(token_user(&gate, &old_token), Ok(ROBOT.into()));

    gate.restart_with(&[
        "--service-account-issuer",
        NEW,
        "--service-account-issuer",
        OLD,
    ]);
    let new_token = gate.ok(&["create", "token", "robot"]).trim().to_string();
    assert_eq!(token_issuer(&new_token), NEW, "the first issuer signs");
    for token in [&old_token, &new_token] {
        assert_eq!(
            token_user(&gate, token),
            Ok(ROBOT.into()),
            "{}",
            token_issuer(token)
        );
    }
    // Discovery names the signing issuer.
    let discovery = gate.json(&["get", "--raw", "/.well-known/openid-configuration"]);
    assert_eq!(discovery["issuer"], NEW, "{discovery}");

    // Once the old issuer is dropped, its tokens are refused.
    gate.restart_with(&["--service-account-issuer", NEW]);
    let refused = token_user(&gate, &old_token).unwrap_err();
    assert!(refused.contains("Unauthorized"), "{refused}");
    assert_eq!(token_user(&gate, &new_token), Ok(ROBOT.into()));

    // The same issuer twice is kube's startup error.
    let twice = std::process::Command::new(kubegate_tests::binary())
        .args([
            "serve",
            "--service-account-issuer",
            NEW,
            "--service-account-issuer",
            NEW,
        ])
        .arg("--data-dir")
        .arg(gate.data_dir.join("unused"))
        .output()
        .unwrap();
    assert!(!twice.status.success());
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert!(
        stderr.contains(&format!(
            "service-account-issuer \"{NEW}\" is already specified"
        )),
        "{stderr}"
    );
}

//! Fixture servers for the authentication end-to-end tests, with no dependencies beyond what
//! the machines already have (`python3`, the `openssl` CLI):
//!
//! - [`OidcIssuer`]: an OpenID Connect issuer serving `/.well-known/openid-configuration` and
//!   its JWKS (`/jwks`) over HTTPS, with RSA signing keys it can rotate, and
//!   [`OidcIssuer::mint`] to sign RS256 tokens (signed with `openssl dgst`, so the tests crate
//!   needs no JWT library);
//! - [`TokenReviewWebhook`]: an `authentication.k8s.io` TokenReview webhook over HTTPS
//!   (optionally requiring a client certificate) answering from a token table, with a
//!   ready-to-use kubeconfig for kubegate;
//! - [`SubjectAccessReviewWebhook`]: an `authorization.k8s.io` SubjectAccessReview webhook
//!   over HTTPS answering from a per-user table and recording every review it receives.
//!
//! Each fixture is a small python3 `http.server` child process that binds a free loopback
//! port itself and reports it (no race between picking and binding a port), uses a fresh CA
//! made with `openssl` in a temporary directory, counts the requests it serves (`/_stats`),
//! and is killed by pid when the fixture is dropped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::openssl::{issue, make_ca, run, write, CLIENT_EXTENSIONS};

/// The python server behind the fixtures. Arguments: mode (`oidc` | `webhook` | `sar`),
/// state dir (holding `server.crt`, `server.key`, `jwks.json` / `tokens.json` /
/// `decisions.json`, and optionally `client-ca.crt` and `credential`). Prints the port it
/// bound, then serves until killed.
const SERVER_PY: &str = r#"
import http.server, json, os, ssl, sys, threading

mode, state = sys.argv[1], sys.argv[2]
counts = {}
lock = threading.Lock()

def state_file(name):
    return os.path.join(state, name)

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def count(self, key):
        with lock:
            counts[key] = counts.get(key, 0) + 1

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/_stats":
            with lock:
                return self.reply(200, dict(counts))
        self.count("GET " + path)
        if mode != "oidc":
            return self.reply(404, {})
        if path == "/.well-known/openid-configuration":
            return self.reply(200, {
                "issuer": ISSUER,
                "jwks_uri": ISSUER + "/jwks",
                "id_token_signing_alg_values_supported": ["RS256"],
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
            })
        if path == "/jwks":
            with open(state_file("jwks.json"), "rb") as f:
                return self.reply(200, f.read())
        return self.reply(404, {})

    def do_POST(self):
        path = self.path.split("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.count("POST " + path)
        if mode not in ("webhook", "sar"):
            return self.reply(404, {})
        if os.path.exists(state_file("credential")):
            with open(state_file("credential")) as f:
                expected = "Bearer " + f.read().strip()
            if self.headers.get("Authorization") != expected:
                return self.reply(401, {"kind": "Status", "code": 401})
        try:
            review = json.loads(body)
        except ValueError:
            return self.reply(400, {})
        if mode == "sar":
            return self.subject_access_review(review)
        with open(state_file("last-review.json"), "w") as f:
            json.dump(review, f)
        with open(state_file("tokens.json")) as f:
            tokens = json.load(f)
        spec = review.get("spec") or {}
        entry = tokens.get(spec.get("token", ""))
        if entry is None:
            status = {"authenticated": False, "error": "token not recognized by the fixture webhook"}
        else:
            status = {"authenticated": True, "user": entry.get("user", {})}
            if entry.get("audiences"):
                status["audiences"] = entry["audiences"]
        return self.reply(200, {
            "apiVersion": review.get("apiVersion", "authentication.k8s.io/v1"),
            "kind": "TokenReview",
            "status": status,
        })

    def subject_access_review(self, review):
        with lock:
            with open(state_file("reviews.jsonl"), "a") as f:
                f.write(json.dumps(review) + "\n")
        with open(state_file("decisions.json")) as f:
            decisions = json.load(f)
        spec = review.get("spec") or {}
        status = decisions.get(spec.get("user", ""))
        if status is None:
            status = {"allowed": False, "reason": "the fixture webhook has no opinion"}
        return self.reply(200, {
            "apiVersion": review.get("apiVersion", "authorization.k8s.io/v1"),
            "kind": "SubjectAccessReview",
            "status": status,
        })

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(state_file("server.crt"), state_file("server.key"))
if os.path.exists(state_file("client-ca.crt")):
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(state_file("client-ca.crt"))
server.socket = context.wrap_socket(server.socket, server_side=True)
port = server.server_address[1]
ISSUER = "https://127.0.0.1:%d" % port
print(port, flush=True)
server.serve_forever()
"#;

/// A throwaway CA (EC P-256, made with the openssl CLI) that signs a server certificate for
/// `127.0.0.1`/`localhost` and client certificates.
pub struct FixturePki {
    dir: PathBuf,
}

impl FixturePki {
    /// Creates the CA and the server certificate in `dir`.
    pub fn create(dir: &Path) -> FixturePki {
        make_ca(dir, "ca", "kubegate-fixture-ca");
        let pki = FixturePki {
            dir: dir.to_path_buf(),
        };
        pki.issue(
            "server",
            "127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        );
        pki
    }

    /// Issues `<name>.crt` / `<name>.key` for a subject CN with the given x509v3 extensions.
    fn issue(&self, name: &str, cn: &str, extensions: &str) -> (PathBuf, PathBuf) {
        let (ca_crt, ca_key) = (self.dir.join("ca.crt"), self.dir.join("ca.key"));
        issue(&self.dir, (&ca_crt, &ca_key), name, cn, extensions)
    }

    /// A client certificate for `cn` signed by this CA: (certificate, key) paths.
    pub fn client_certificate(&self, cn: &str) -> (PathBuf, PathBuf) {
        let name = format!(
            "client-{}",
            cn.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        );
        self.issue(&name, cn, CLIENT_EXTENSIONS)
    }

    /// The CA certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.ca_file()).expect("read fixture CA")
    }
}

/// A running python fixture server; killed (by pid) on drop.
struct PyServer {
    child: Child,
    port: u16,
}

impl PyServer {
    fn start(mode: &str, state: &Path) -> PyServer {
        let script = state.join("server.py");
        write(&script, SERVER_PY);
        let log = std::fs::File::create(state.join("server.log")).expect("fixture log");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(mode)
            .arg(state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start python3 fixture server (is python3 installed?)");
        let port = match crate::reported_port(&mut child, Duration::from_secs(20)) {
            Some(port) => port,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{mode} fixture did not start:\n{}",
                    std::fs::read_to_string(state.join("server.log")).unwrap_or_default()
                );
            }
        };
        PyServer { child, port }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// GET `/_stats` with curl (trusting the fixture CA): request counts by "METHOD path".
    fn stats(&self, ca_file: &Path, client: Option<(&Path, &Path)>) -> BTreeMap<String, u64> {
        let mut cmd = Command::new("curl");
        cmd.arg("-sS").arg("--cacert").arg(ca_file);
        if let Some((cert, key)) = client {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        cmd.arg(format!("{}/_stats", self.url()));
        let out = run(&mut cmd);
        serde_json::from_slice(&out).unwrap_or_default()
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        // Child::kill signals this child's pid only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64url(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = chunk.len() + 1;
        for i in 0..symbols {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[index as usize]));
        }
    }
    out
}

fn hex_to_bytes(hex: &str) -> Vec<u8> {
    let hex = hex.trim();
    let padded = if hex.len() % 2 == 1 {
        format!("0{hex}")
    } else {
        hex.to_string()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&padded[i..i + 2], 16).expect("hex modulus"))
        .collect()
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An RSA signing key made with `openssl genrsa`.
#[derive(Debug, Clone)]
pub struct SigningKey {
    pub kid: String,
    pub pem_file: PathBuf,
    /// The public JWK (`kty: RSA`, `alg: RS256`, `use: sig`).
    pub jwk: Value,
}

impl SigningKey {
    /// Generates a 2048-bit key in `dir`.
    pub fn generate(dir: &Path, kid: &str) -> SigningKey {
        let pem_file = dir.join(format!("signing-{kid}.pem"));
        let pem = run(Command::new("openssl").args(["genrsa", "2048"]));
        write(&pem_file, pem);
        let modulus = run(Command::new("openssl")
            .args(["rsa", "-noout", "-modulus", "-in"])
            .arg(&pem_file));
        let modulus = String::from_utf8_lossy(&modulus);
        let hex = modulus.trim().trim_start_matches("Modulus=");
        let jwk = json!({
            "kty": "RSA",
            "alg": "RS256",
            "use": "sig",
            "kid": kid,
            "n": base64url(&hex_to_bytes(hex)),
            // openssl genrsa's default public exponent, 65537.
            "e": "AQAB",
        });
        SigningKey {
            kid: kid.to_string(),
            pem_file,
            jwk,
        }
    }

    /// An RS256 compact JWT over `claims`, with this key's `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": self.kid});
        let input = format!(
            "{}.{}",
            base64url(header.to_string().as_bytes()),
            base64url(claims.to_string().as_bytes())
        );
        let mut child = Command::new("openssl")
            .args(["dgst", "-sha256", "-binary", "-sign"])
            .arg(&self.pem_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run openssl dgst");
        child
            .stdin
            .take()
            .expect("openssl stdin")
            .write_all(input.as_bytes())
            .expect("write signing input");
        let out = child.wait_with_output().expect("openssl dgst output");
        assert!(
            out.status.success(),
            "openssl dgst failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("{input}.{}", base64url(&out.stdout))
    }
}

/// An OpenID Connect issuer over HTTPS on a free loopback port.
pub struct OidcIssuer {
    /// `https://127.0.0.1:<port>`: the issuer URL and the `iss` of minted tokens.
    pub url: String,
    pki: FixturePki,
    keys: Vec<SigningKey>,
    server: PyServer,
    dir: tempfile::TempDir,
}

impl OidcIssuer {
    /// Starts an issuer publishing one signing key, `key-1`.
    pub fn start() -> OidcIssuer {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = FixturePki::create(dir.path());
        let key = SigningKey::generate(dir.path(), "key-1");
        write(
            &dir.path().join("jwks.json"),
            json!({"keys": [key.jwk.clone()]}).to_string(),
        );
        let server = PyServer::start("oidc", dir.path());
        OidcIssuer {
            url: server.url(),
            pki,
            keys: vec![key],
            server,
            dir,
        }
    }

    /// The process id of the server.
    pub fn pid(&self) -> u32 {
        self.server.child.id()
    }

    /// The CA that signed the issuer's serving certificate, PEM (for
    /// `issuer.certificateAuthority`).
    pub fn ca_pem(&self) -> String {
        self.pki.ca_pem()
    }

    /// The CA certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.pki.ca_file()
    }

    /// The key the issuer signs with (the most recently added).
    pub fn current_key(&self) -> &SigningKey {
        self.keys.last().expect("the issuer has a key")
    }

    /// The JWKS the issuer publishes.
    pub fn jwks(&self) -> Value {
        json!({"keys": self.keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
    }

    /// Writes the published JWKS to a file (for kubegate's `x-kubegate.jwksFile`).
    pub fn write_jwks_file(&self, path: &Path) {
        write(path, self.jwks().to_string());
    }

    /// Generates a new key and publishes it next to the old ones; later tokens use it.
    pub fn rotate_key(&mut self, kid: &str) -> &SigningKey {
        let key = SigningKey::generate(self.dir.path(), kid);
        self.keys.push(key);
        self.publish();
        self.current_key()
    }

    /// Stops publishing the key `kid` (tokens signed with it no longer verify after a
    /// refresh).
    pub fn retire_key(&mut self, kid: &str) {
        self.keys.retain(|k| k.kid != kid);
        self.publish();
    }

    fn publish(&self) {
        // Write then rename, so the server never serves a half-written set.
        let tmp = self.dir.path().join("jwks.json.tmp");
        write(&tmp, self.jwks().to_string());
        std::fs::rename(&tmp, self.dir.path().join("jwks.json")).expect("publish JWKS");
    }

    /// A key that is not published (for "unknown key" tests).
    pub fn unpublished_key(&self, kid: &str) -> SigningKey {
        SigningKey::generate(self.dir.path(), kid)
    }

    /// Standard claims: this issuer, `sub`, `aud`, issued now, expiring in `ttl`.
    pub fn claims(&self, sub: &str, aud: &str, ttl: Duration) -> Value {
        json!({
            "iss": self.url,
            "sub": sub,
            "aud": aud,
            "iat": now(),
            "exp": now() + ttl.as_secs(),
        })
    }

    /// Signs `claims` with the current key.
    pub fn mint(&self, claims: &Value) -> String {
        self.current_key().sign(claims)
    }

    /// A token for `sub` with `groups`, valid for ten minutes for audience `aud`.
    pub fn token(&self, sub: &str, groups: &[&str], aud: &str) -> String {
        let mut claims = self.claims(sub, aud, Duration::from_secs(600));
        claims["groups"] = json!(groups);
        self.mint(&claims)
    }

    /// How many times the discovery document and the JWKS were fetched.
    pub fn fetches(&self) -> (u64, u64) {
        let stats = self.server.stats(&self.ca_file(), None);
        (
            stats
                .get("GET /.well-known/openid-configuration")
                .copied()
                .unwrap_or(0),
            stats.get("GET /jwks").copied().unwrap_or(0),
        )
    }

    /// An `AuthenticationConfiguration` trusting this issuer for `audience`: username from
    /// `sub` with `username_prefix`, groups from `groups` with `groups_prefix`.
    pub fn authentication_config(
        &self,
        audience: &str,
        username_prefix: &str,
        groups_prefix: &str,
    ) -> String {
        let ca = self
            .ca_pem()
            .lines()
            .map(|l| format!("      {l}\n"))
            .collect::<String>();
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: {}\n    audiences: [{audience}]\n    certificateAuthority: |\n{ca}  claimMappings:\n    username: {{claim: sub, prefix: {}}}\n    groups: {{claim: groups, prefix: {}}}\n",
            self.url,
            json!(username_prefix),
            json!(groups_prefix),
        )
    }
}

/// Writes (unless it exists) a webhook kubeconfig at `path`: the server URL, the CA, the
/// client certificate if any, and the bearer credential [`WEBHOOK_CREDENTIAL`].
fn write_webhook_kubeconfig(
    path: &Path,
    url: &str,
    ca_file: &Path,
    client: Option<&(PathBuf, PathBuf)>,
) -> PathBuf {
    if path.exists() {
        return path.to_path_buf();
    }
    let client = match client {
        Some((cert, key)) => format!(
            "    client-certificate: {}\n    client-key: {}\n",
            cert.display(),
            key.display()
        ),
        None => String::new(),
    };
    write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fixture-webhook\n  cluster:\n    server: {url}\n    certificate-authority: {}\nusers:\n- name: kubegate\n  user:\n{client}    token: {WEBHOOK_CREDENTIAL}\ncontexts:\n- name: webhook\n  context:\n    cluster: fixture-webhook\n    user: kubegate\ncurrent-context: webhook\n",
            ca_file.display(),
        ),
    );
    path.to_path_buf()
}

/// The bearer credential kubegate presents to [`TokenReviewWebhook`] (from the kubeconfig).
pub const WEBHOOK_CREDENTIAL: &str = "kubegate-fixture-webhook-credential";

/// A TokenReview webhook over HTTPS answering from a token table.
pub struct TokenReviewWebhook {
    /// The review endpoint, `https://127.0.0.1:<port>/authenticate`.
    pub url: String,
    pki: FixturePki,
    client: Option<(PathBuf, PathBuf)>,
    server: PyServer,
    dir: tempfile::TempDir,
}

impl TokenReviewWebhook {
    /// Starts a webhook knowing `tokens` as (token, username, groups). It requires a client
    /// certificate and the bearer credential in [`TokenReviewWebhook::kubeconfig`].
    pub fn start(tokens: &[(&str, &str, &[&str])]) -> TokenReviewWebhook {
        let table: serde_json::Map<String, Value> = tokens
            .iter()
            .map(|(token, user, groups)| {
                (
                    token.to_string(),
                    json!({"user": {"username": user, "groups": groups}}),
                )
            })
            .collect();
        Self::start_with(Value::Object(table), true)
    }

    /// Starts a webhook with a raw token table: `{"<token>": {"user": {username, uid,
    /// groups, extra}, "audiences": [...]}}`; with `require_client_cert`, connections
    /// without a certificate from the fixture CA are refused.
    pub fn start_with(tokens: Value, require_client_cert: bool) -> TokenReviewWebhook {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = FixturePki::create(dir.path());
        write(&dir.path().join("tokens.json"), tokens.to_string());
        write(&dir.path().join("credential"), WEBHOOK_CREDENTIAL);
        let client = if require_client_cert {
            std::fs::copy(pki.ca_file(), dir.path().join("client-ca.crt")).expect("client CA");
            Some(pki.client_certificate("kubegate"))
        } else {
            None
        };
        let server = PyServer::start("webhook", dir.path());
        TokenReviewWebhook {
            url: format!("{}/authenticate", server.url()),
            pki,
            client,
            server,
            dir,
        }
    }

    /// The process id of the server.
    pub fn pid(&self) -> u32 {
        self.server.child.id()
    }

    /// The CA certificate file that verifies the webhook.
    pub fn ca_file(&self) -> PathBuf {
        self.pki.ca_file()
    }

    /// Replaces the token table.
    pub fn set_tokens(&self, tokens: Value) {
        let tmp = self.dir.path().join("tokens.json.tmp");
        write(&tmp, tokens.to_string());
        std::fs::rename(&tmp, self.dir.path().join("tokens.json")).expect("replace tokens");
    }

    /// Writes (once) and returns a kubeconfig for kubegate's
    /// `--authentication-token-webhook-config-file`: the server URL, the CA, the client
    /// certificate when required, and the bearer credential.
    pub fn kubeconfig(&self) -> PathBuf {
        write_webhook_kubeconfig(
            &self.dir.path().join("webhook.kubeconfig"),
            &self.url,
            &self.ca_file(),
            self.client.as_ref(),
        )
    }

    /// How many reviews the webhook has answered (or refused).
    pub fn reviews(&self) -> u64 {
        let client = self
            .client
            .as_ref()
            .map(|(cert, key)| (cert.as_path(), key.as_path()));
        self.server
            .stats(&self.ca_file(), client)
            .get("POST /authenticate")
            .copied()
            .unwrap_or(0)
    }

    /// The last TokenReview the webhook received (tests check `spec.audiences`).
    pub fn last_review(&self) -> Option<Value> {
        let text = std::fs::read_to_string(self.dir.path().join("last-review.json")).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// A SubjectAccessReview webhook over HTTPS: it requires a client certificate from its CA
/// and the bearer credential in [`SubjectAccessReviewWebhook::kubeconfig`], answers each
/// review with the status its table holds for `spec.user` (`{"allowed": false}` with a
/// reason for users not in it), and records every review it receives.
pub struct SubjectAccessReviewWebhook {
    /// The review endpoint, `https://127.0.0.1:<port>/authorize`.
    pub url: String,
    pki: FixturePki,
    client: (PathBuf, PathBuf),
    /// `None` once [`SubjectAccessReviewWebhook::stop`] was called.
    server: Option<PyServer>,
    dir: tempfile::TempDir,
}

impl SubjectAccessReviewWebhook {
    /// Starts a webhook answering from `decisions`: `{"<user>": <status>}`, each status as
    /// the webhook should send it, e.g. `{"allowed": true}` or
    /// `{"allowed": false, "denied": true, "reason": "..."}`.
    pub fn start(decisions: Value) -> SubjectAccessReviewWebhook {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = FixturePki::create(dir.path());
        write(&dir.path().join("decisions.json"), decisions.to_string());
        write(&dir.path().join("credential"), WEBHOOK_CREDENTIAL);
        std::fs::copy(pki.ca_file(), dir.path().join("client-ca.crt")).expect("client CA");
        let client = pki.client_certificate("kubegate");
        let server = PyServer::start("sar", dir.path());
        SubjectAccessReviewWebhook {
            url: format!("{}/authorize", server.url()),
            pki,
            client,
            server: Some(server),
            dir,
        }
    }

    /// The process id of the server (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.server.as_ref().map(|s| s.child.id()).unwrap_or(0)
    }

    /// The CA certificate file that verifies the webhook.
    pub fn ca_file(&self) -> PathBuf {
        self.pki.ca_file()
    }

    /// Writes (once) and returns a kubeconfig for kubegate's
    /// `--authorization-webhook-config-file`.
    pub fn kubeconfig(&self) -> PathBuf {
        write_webhook_kubeconfig(
            &self.dir.path().join("authz-webhook.kubeconfig"),
            &self.url,
            &self.ca_file(),
            Some(&self.client),
        )
    }

    /// Every SubjectAccessReview answered so far, oldest first (requests refused for a bad
    /// credential are not recorded).
    pub fn reviews(&self) -> Vec<Value> {
        crate::read_jsonl(&self.dir.path().join("reviews.jsonl"))
    }

    /// Stops the server (killed by pid and reaped); later reviews fail to connect.
    pub fn stop(&mut self) {
        self.server = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// curl against a fixture, trusting its CA: (HTTP status, body).
    fn curl(ca: &Path, args: &[&str]) -> (u16, String) {
        let out = Command::new("curl")
            .arg("-sS")
            .arg("--cacert")
            .arg(ca)
            .args(["-w", "\n%{http_code}"])
            .args(args)
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    #[test]
    fn base64url_matches_rfc4648() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn oidc_issuer_serves_discovery_and_verifiable_tokens() {
        let mut issuer = OidcIssuer::start();
        let (code, body) = curl(
            &issuer.ca_file(),
            &[&format!("{}/.well-known/openid-configuration", issuer.url)],
        );
        assert_eq!(code, 200);
        let discovery: Value = serde_json::from_str(&body).expect("discovery JSON");
        assert_eq!(discovery["issuer"], json!(issuer.url));
        let (code, body) = curl(&issuer.ca_file(), &[&format!("{}/jwks", issuer.url)]);
        assert_eq!(code, 200);
        let jwks: Value = serde_json::from_str(&body).expect("JWKS JSON");
        assert_eq!(jwks["keys"][0]["kid"], "key-1");
        assert_eq!(issuer.fetches(), (1, 1));

        // The minted token's signature verifies with the published key (checked with
        // openssl against the PEM's public half).
        let token = issuer.token("alice", &["dev"], "kubegate");
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let dir = tempfile::tempdir().expect("temp dir");
        let public = dir.path().join("pub.pem");
        run(Command::new("openssl")
            .args(["rsa", "-pubout", "-in"])
            .arg(&issuer.current_key().pem_file)
            .arg("-out")
            .arg(&public));
        let signature = dir.path().join("sig");
        write(&signature, decode_base64url(parts[2]));
        let input = dir.path().join("input");
        write(&input, format!("{}.{}", parts[0], parts[1]));
        run(Command::new("openssl")
            .args(["dgst", "-sha256", "-verify"])
            .arg(&public)
            .arg("-signature")
            .arg(&signature)
            .arg(&input));

        issuer.rotate_key("key-2");
        let (_, body) = curl(&issuer.ca_file(), &[&format!("{}/jwks", issuer.url)]);
        let jwks: Value = serde_json::from_str(&body).expect("JWKS JSON");
        assert_eq!(jwks["keys"].as_array().map(Vec::len), Some(2));
        assert!(issuer
            .authentication_config("kubegate", "oidc:", "")
            .contains(&issuer.url));
    }

    fn decode_base64url(text: &str) -> Vec<u8> {
        let value = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'-' => 62,
                _ => 63,
            }
        };
        let mut out = Vec::new();
        for chunk in text.as_bytes().chunks(4) {
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                n |= value(*c) << (18 - 6 * i);
            }
            let bytes = n.to_be_bytes();
            out.extend_from_slice(&bytes[1..chunk.len()]);
        }
        out
    }

    #[test]
    fn subject_access_review_webhook_answers_and_records() {
        let mut webhook = SubjectAccessReviewWebhook::start(json!({
            "alice": {"allowed": true},
            "bob": {"allowed": false, "denied": true, "reason": "bob may not"},
        }));
        let kubeconfig = std::fs::read_to_string(webhook.kubeconfig()).expect("kubeconfig");
        assert!(kubeconfig.contains(&webhook.url), "{kubeconfig}");
        assert!(kubeconfig.contains("client-certificate"), "{kubeconfig}");
        let (cert, key) = webhook.client.clone();
        let (ca_file, url) = (webhook.ca_file(), webhook.url.clone());
        let review = |user: &str, credential: &str| {
            curl(
                &ca_file,
                &[
                    "--cert",
                    &cert.display().to_string(),
                    "--key",
                    &key.display().to_string(),
                    "-H",
                    &format!("Authorization: Bearer {credential}"),
                    "--data-binary",
                    &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": user, "nonResourceAttributes": {"path": "/version", "verb": "get"}}}).to_string(),
                    &url,
                ],
            )
        };
        let status = |user: &str| -> Value {
            let (code, body) = review(user, WEBHOOK_CREDENTIAL);
            assert_eq!(code, 200, "{body}");
            serde_json::from_str::<Value>(&body).expect("review JSON")["status"].clone()
        };
        assert_eq!(status("alice"), json!({"allowed": true}));
        assert_eq!(
            status("bob"),
            json!({"allowed": false, "denied": true, "reason": "bob may not"})
        );
        assert_eq!(status("carol")["allowed"], false);
        assert_eq!(review("alice", "wrong").0, 401);
        let reviews = webhook.reviews();
        assert_eq!(reviews.len(), 3, "refused requests are not recorded");
        assert_eq!(reviews[1]["spec"]["user"], "bob");
        assert!(webhook.pid() > 0);
        webhook.stop();
        assert_eq!(webhook.pid(), 0);
        assert_eq!(review("alice", WEBHOOK_CREDENTIAL).0, 0, "stopped");
    }

    #[test]
    fn webhook_answers_from_its_table_and_requires_credentials() {
        let webhook = TokenReviewWebhook::start(&[("good", "jane", &["dev"])]);
        let kubeconfig = std::fs::read_to_string(webhook.kubeconfig()).expect("kubeconfig");
        assert!(kubeconfig.contains(&webhook.url));
        let (cert, key) = webhook.client.clone().expect("client certificate");
        let review = |token: &str, credential: &str| {
            curl(
                &webhook.ca_file(),
                &[
                    "--cert",
                    &cert.display().to_string(),
                    "--key",
                    &key.display().to_string(),
                    "-H",
                    &format!("Authorization: Bearer {credential}"),
                    "-H",
                    "Content-Type: application/json",
                    "--data-binary",
                    &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": ["a"]}}).to_string(),
                    &webhook.url,
                ],
            )
        };
        let (code, body) = review("good", WEBHOOK_CREDENTIAL);
        assert_eq!(code, 200);
        let answer: Value = serde_json::from_str(&body).expect("review JSON");
        assert_eq!(answer["status"]["authenticated"], true);
        assert_eq!(answer["status"]["user"]["username"], "jane");
        let (_, body) = review("bad", WEBHOOK_CREDENTIAL);
        let answer: Value = serde_json::from_str(&body).expect("review JSON");
        assert_eq!(answer["status"]["authenticated"], false);
        assert_eq!(review("good", "wrong").0, 401);
        assert_eq!(webhook.reviews(), 3);
        assert_eq!(
            webhook.last_review().expect("recorded")["spec"]["audiences"],
            json!(["a"])
        );

        // Without a client certificate the handshake is refused.
        let (code, _) = curl(&webhook.ca_file(), &["--data-binary", "{}", &webhook.url]);
        assert_eq!(code, 0);
        webhook.set_tokens(json!({"other": {"user": {"username": "bob"}}}));
        let (_, body) = review("other", WEBHOOK_CREDENTIAL);
        assert!(body.contains("bob"), "{body}");
    }
}

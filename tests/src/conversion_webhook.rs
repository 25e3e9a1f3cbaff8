//! A CRD conversion webhook for the end-to-end tests, written as the ones operators deploy
//! (controller-runtime's conversion handler): an HTTPS server that answers `ConversionReview`s
//! (`apiextensions.k8s.io/v1` and `v1beta1`) for `stable.example.com` CronTabs, moving
//! `spec.cronSpec` (v1) to `spec.schedule` (v2) and back, and adding the label
//! `converted-by: webhook`.
//!
//! - `POST /convert` converts; `POST /fail` answers `result.status: Failure` with the message
//!   `conversion refused by the test webhook`;
//! - every review received is appended to `reviews.jsonl` ([`ConversionWebhook::reviews`]),
//!   with the request's path, query, `Host` and `User-Agent`;
//! - the serving certificate (from a fresh CA: [`ConversionWebhook::ca_bundle_base64`]) names
//!   `hook.webhooks.svc`, `localhost` and `127.0.0.1`, so the webhook can be reached by URL or
//!   through a Service `webhooks/hook` whose Endpoints point at it.
//!
//! Like the other fixtures it is a python3 child process on a loopback port it binds itself,
//! killed by pid when stopped or dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::openssl::{issue, make_ca, write};

const SERVER_PY: &str = r##"
import http.server, json, os, socket, ssl, sys, threading

STATE = sys.argv[1]
LOCK = threading.Lock()

def convert(obj, desired):
    obj = json.loads(json.dumps(obj))
    spec = obj.setdefault("spec", {})
    if desired.endswith("/v2") and "cronSpec" in spec:
        spec["schedule"] = spec.pop("cronSpec")
    if desired.endswith("/v1") and "schedule" in spec:
        spec["cronSpec"] = spec.pop("schedule")
    obj["apiVersion"] = desired
    labels = obj.setdefault("metadata", {}).get("labels") or {}
    labels["converted-by"] = "webhook"
    obj["metadata"]["labels"] = labels
    return obj

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        review = json.loads(self.rfile.read(length))
        path, _, query = self.path.partition("?")
        with LOCK:
            with open(os.path.join(STATE, "reviews.jsonl"), "a") as log:
                log.write(json.dumps({"path": path, "query": query, "host": self.headers.get("Host"),
                                      "user_agent": self.headers.get("User-Agent"),
                                      "review": review}) + "\n")
        request = review.get("request", {})
        response = {"uid": request.get("uid", "")}
        if path.startswith("/fail"):
            response["result"] = {"status": "Failure", "message": "conversion refused by the test webhook"}
        else:
            desired = request.get("desiredAPIVersion", "")
            response["convertedObjects"] = [convert(o, desired) for o in request.get("objects", [])]
            response["result"] = {"status": "Success"}
        body = json.dumps({"apiVersion": review.get("apiVersion"), "kind": "ConversionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

server = Server(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.path.join(STATE, "serving.crt"), os.path.join(STATE, "serving.key"))
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"##;

/// The running webhook.
pub struct ConversionWebhook {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl ConversionWebhook {
    pub fn start() -> ConversionWebhook {
        let dir = tempfile::tempdir().expect("temp dir for the conversion webhook");
        let (ca_cert, ca_key) = make_ca(dir.path(), "ca", "conversion-webhook-ca");
        issue(
            dir.path(),
            (&ca_cert, &ca_key),
            "serving",
            "hook.webhooks.svc",
            "subjectAltName=DNS:hook.webhooks.svc,DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        );
        write(&dir.path().join("server.py"), SERVER_PY);
        let mut child = Command::new("python3")
            .arg(dir.path().join("server.py"))
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the python3 conversion webhook");
        let Some(port) = crate::reported_port(&mut child, Duration::from_secs(30)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the conversion webhook did not start");
        };
        ConversionWebhook { dir, child, port }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA that signed the serving certificate, base64 (a `clientConfig.caBundle`).
    pub fn ca_bundle_base64(&self) -> String {
        let pem = std::fs::read(self.dir.path().join("ca.crt")).expect("webhook CA");
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    /// Every review received so far: `{"path", "query", "host", "user_agent", "review"}`.
    pub fn reviews(&self) -> Vec<Value> {
        crate::read_jsonl(&self.dir.path().join("reviews.jsonl"))
    }
}

impl Drop for ConversionWebhook {
    fn drop(&mut self) {
        // Child::kill signals this child's pid only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

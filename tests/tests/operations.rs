//! Operations: protocols (HTTP/2 and HTTP/1.1 by ALPN, TLS 1.2 and 1.3), `Audit-Id`, health
//! endpoints, `/metrics`, `/version`, discovery negotiation and OpenAPI caching.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use kubegate_tests::Kubegate;

/// curl with the admin certificate; returns (status line + headers, body).
fn curl(gate: &Kubegate, args: &[&str], path: &str) -> (String, String) {
    let pki = gate.data_dir.join("pki");
    let out = Command::new("curl")
        .arg("-sS")
        .arg("-D")
        .arg("-")
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(args)
        .arg(format!("{}{}", gate.url(), path))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_lowercase(), body.to_string())
}

/// A body as JSON (`Null` when it is not): curl's user agent gets kube's indented JSON, so
/// tests read values rather than bytes.
fn json_of(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

/// The response head exactly as sent.
fn curl_raw_head(gate: &Kubegate, path: &str) -> String {
    let pki = gate.data_dir.join("pki");
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-D", "-"])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .arg(format!("{}{}", gate.url(), path))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Opens an HTTP/2 connection and prints the server's first SETTINGS frame's parameters as
/// JSON (`{"3": 1000, ...}`).
const H2_SETTINGS_PY: &str = r#"
import json, socket, ssl, struct, sys
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["h2"])
conn = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
def read(n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise SystemExit("closed")
        data += chunk
    return data
while True:
    head = read(9)
    length, kind = int.from_bytes(head[:3], "big"), head[3]
    payload = read(length)
    if kind == 4 and not head[4] & 1:
        params = {str(k): v for k, v in (struct.unpack(">HI", payload[i:i + 6]) for i in range(0, length, 6))}
        print(json.dumps(params))
        break
"#;

#[test]
fn protocols_headers_health_metrics_and_documents() {
    let gate = Kubegate::start();

    // HTTP/2 and HTTP/1.1 both negotiate by ALPN; TLS 1.2 and 1.3 both work.
    let (head, _) = curl(&gate, &["--http2"], "/api/v1/namespaces/default");
    assert!(head.starts_with("http/2 200"), "{head}");
    // kube-apiserver's HTTP/2 stream limit per connection (1000), as the server's first
    // SETTINGS frame says it (read raw: curl does not print it).
    let pki = gate.data_dir.join("pki");
    let settings = Command::new("python3")
        .arg("-c")
        .arg(H2_SETTINGS_PY)
        .arg(gate.url().trim_start_matches("https://127.0.0.1:"))
        .arg(&pki)
        .output()
        .expect("python3");
    let settings: serde_json::Value = serde_json::from_slice(&settings.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&settings.stderr)));
    // SETTINGS_MAX_CONCURRENT_STREAMS is parameter 3.
    assert_eq!(settings["3"], 1000, "{settings}");
    let (head, body) = curl(
        &gate,
        &["--http1.1", "--tlsv1.2", "--tls-max", "1.2"],
        "/api/v1/namespaces/default",
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(json_of(&body)["metadata"]["name"], "default", "{body}");
    let (head, _) = curl(&gate, &["--tlsv1.3"], "/version");
    assert!(head.contains(" 200"), "{head}");

    // Every response carries an Audit-Id; a client's own is kept.
    assert!(head.contains("audit-id: "), "{head}");
    let (head, _) = curl(
        &gate,
        &["-H", "Audit-ID: trace-me-42"],
        "/api/v1/namespaces/nope",
    );
    assert!(head.contains(" 404"), "{head}");
    assert!(head.contains("audit-id: trace-me-42"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");

    // Health endpoints, verbose and per check.
    let (_, body) = curl(&gate, &[], "/readyz?verbose");
    assert!(
        body.contains("[+]ping ok")
            && body.contains("[+]storage ok")
            && body.contains("[+]storage-readiness ok"),
        "{body}"
    );
    assert!(
        body.contains("[+]shutdown ok") && body.ends_with("readyz check passed\n"),
        "{body}"
    );
    let (_, body) = curl(&gate, &[], "/livez/ping");
    assert_eq!(body, "ok");
    let (head, _) = curl(&gate, &[], "/livez/nonexistent");
    assert!(head.contains(" 404"), "{head}");
    // The checks feed kube's component SLIs, served apart from /metrics.
    let slis = gate.ok(&["get", "--raw", "/metrics/slis"]);
    assert!(
        slis.lines().any(|l| l
            .starts_with("kubernetes_healthchecks_total{name=\"storage-readiness\",status=\"success\",type=\"readyz\"} ")),
        "{slis}"
    );
    assert!(
        slis.contains("kubernetes_healthcheck{name=\"ping\",type=\"readyz\"} 1"),
        "{slis}"
    );

    // /version in kube's shape.
    let (_, body) = curl(&gate, &[], "/version");
    let version: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(version["major"], "1");
    assert!(
        version["gitVersion"].as_str().unwrap().starts_with("v1."),
        "{version}"
    );
    // With a trailing slash too, as go-restful routes it (and as public-info-viewer lists it).
    let (_, slashed) = curl(&gate, &[], "/version/");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&slashed).unwrap(),
        version
    );

    // Metrics count requests with kube's names and labels.
    gate.ok(&["get", "configmaps", "-A"]);
    let (_, body) = curl(&gate, &[], "/metrics");
    let line = body
        .lines()
        .find(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"configmaps\"")
                && l.contains("verb=\"LIST\"")
        })
        .unwrap_or_else(|| panic!("no LIST configmaps counter in:\n{body}"));
    assert!(
        line.contains("code=\"200\"") && line.contains("scope=\"cluster\""),
        "{line}"
    );
    assert!(
        body.contains("apiserver_request_duration_seconds_bucket{"),
        "metrics:\n{body}"
    );
    // kubectl explain shows a built-in enum field's values, as from kube's documents.
    let explain = gate.ok(&["explain", "service.spec.type"]);
    assert!(
        explain.contains("ENUM:\n    ClusterIP\n    ExternalName\n    LoadBalancer\n    NodePort"),
        "{explain}"
    );
    assert!(explain.contains("Possible enum values:"), "{explain}");
    assert!(
        explain.contains("`\"NodePort\"` means a service will be exposed on one port"),
        "{explain}"
    );
    // Stored objects per resource, and the process's own figures.
    let stored = |resource: &str| -> i64 {
        let prefix = format!("apiserver_storage_objects{{resource=\"{resource}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in:\n{body}"))
    };
    assert!(
        stored("namespaces") >= 4,
        "default, kube-system, kube-public, kube-node-lease"
    );
    assert!(stored("flowschemas.flowcontrol.apiserver.k8s.io") >= 2);
    for family in [
        "process_resident_memory_bytes ",
        "process_start_time_seconds ",
        "process_open_fds ",
    ] {
        assert!(
            body.lines().any(|l| l.starts_with(family)),
            "{family}in:\n{body}"
        );
    }

    // Aggregated discovery by Accept, legacy otherwise.
    let (head, body) = curl(
        &gate,
        &[
            "-H",
            "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        ],
        "/apis",
    );
    assert!(
        head.contains(
            "content-type: application/json;g=apidiscovery.k8s.io;v=v2;as=apigroupdiscoverylist"
        ),
        "{head}"
    );
    assert_eq!(json_of(&body)["kind"], "APIGroupDiscoveryList", "{body}");
    // As kube's aggregated discovery handler: public, and revalidated by its exact ETag only.
    assert!(head.contains("cache-control: public\r\n"), "{head}");
    let aggregated_accept =
        "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let (head, _) = curl(
        &gate,
        &["-H", aggregated_accept, "-H", "If-None-Match: *"],
        "/apis",
    );
    assert!(head.starts_with("http/2 200"), "{head}");
    let (head, body) = curl(&gate, &[], "/apis");
    assert!(
        json_of(&body)["kind"] == "APIGroupList" && body.contains("coordination.k8s.io"),
        "{body}"
    );
    assert!(head.contains("cache-control: no-cache, private"), "{head}");
    // As kube negotiates: a plain JSON clause does not stop the search for the aggregated
    // one, parameters kube does not use are ignored, and legacy discovery in a type the
    // server cannot write is 406 with a Status.
    for accept in [
        "Accept: application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer",
    ] {
        let (head, body) = curl(&gate, &["-H", accept], "/api");
        assert!(head.starts_with("http/2 200"), "{accept}: {head}");
        assert_eq!(
            json_of(&body)["kind"],
            "APIGroupDiscoveryList",
            "{accept}: {body}"
        );
    }
    let (head, body) = curl(&gate, &["-H", "Accept: application/xml"], "/apis");
    assert!(head.starts_with("http/2 406"), "{head}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "NotAcceptable", "{body}");
    assert_eq!(status["code"], 406, "{body}");

    // OpenAPI v3: the index advertises hashed URLs that are immutable; ETags revalidate.
    let (_, body) = curl(&gate, &[], "/openapi/v3");
    let index: serde_json::Value = serde_json::from_str(&body).unwrap();
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (head, body) = curl(&gate, &[], &url);
    assert!(head.contains("cache-control: public, immutable"), "{head}");
    assert!(head.contains("vary: accept"), "{head}");
    assert!(body.contains("io.k8s.api.core.v1.ConfigMap"));
    // kube-openapi answers JSON for json or wildcards, and a bare 406 otherwise.
    let (head, body) = curl(&gate, &["-H", "Accept: text/html"], &url);
    assert!(head.starts_with("http/2 406"), "{head}");
    assert!(body.is_empty(), "{body}");
    assert!(!head.contains("\ncontent-type:"), "{head}");
    assert!(head.contains("vary: accept"), "{head}");
    let (head, body) = curl(&gate, &["-H", "Accept: text/html, application/*"], &url);
    assert!(head.starts_with("http/2 200"), "{head}");
    assert!(body.contains("io.k8s.api.core.v1.ConfigMap"));
    // Header names were lowercased above; the ETag value must keep its case.
    let raw = curl_raw_head(&gate, &url);
    let etag = raw
        .lines()
        .find(|l| l.to_lowercase().starts_with("etag:"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap();
    let (head, _) = curl(
        &gate,
        &["-H", &format!("If-None-Match: {etag}")],
        "/openapi/v3/api/v1",
    );
    assert!(head.contains(" 304"), "{head}");
    let (head, _) = curl(&gate, &[], "/openapi/v3/api/v1?hash=stale");
    assert!(
        head.contains(" 301") && head.contains("location: /openapi/v3/api/v1?hash="),
        "{head}"
    );
}

#[test]
fn plain_http_listener_is_loopback_only_and_still_authenticates() {
    let port = kubegate_tests::free_port().to_string();
    let gate = Kubegate::start_with(&["--insecure-port", &port]);
    let out = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            &format!("http://127.0.0.1:{port}/api/v1/namespaces"),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.trim_end().ends_with("401"),
        "no credentials on plain HTTP: {text}"
    );
    let out = Command::new("curl")
        .args(["-sS", &format!("http://127.0.0.1:{port}/livez")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");
    drop(gate);
    // A non-loopback plain-HTTP address is refused at start.
    let out = Command::new(kubegate_tests::binary())
        .args([
            "serve",
            "--insecure-port",
            &port,
            "--insecure-bind-address",
            "0.0.0.0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("loopback"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn longrunning_gauge(gate: &Kubegate) -> i64 {
    let (_, body) = curl(gate, &[], "/metrics");
    body.lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

#[test]
fn watches_end_when_their_clients_go_away() {
    let gate = Kubegate::start();
    let pki = gate.data_dir.join("pki");
    let mut watchers = Vec::new();
    for proto in ["--http1.1", "--http2", "--http1.1", "--http2"] {
        let child = Command::new("curl")
            .args(["-sS", proto, "-o", "/dev/null"])
            .arg("--cacert")
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .arg(format!(
                "{}/api/v1/namespaces/default/configmaps?watch=1",
                gate.url()
            ))
            .spawn()
            .expect("curl");
        watchers.push(child);
    }
    assert!(
        kubegate_tests::eventually(std::time::Duration::from_secs(10), || longrunning_gauge(
            &gate
        ) == 4),
        "four open watches expected, gauge says {}",
        longrunning_gauge(&gate)
    );
    for mut child in watchers {
        child.kill().expect("stop curl by its pid");
        let _ = child.wait();
    }
    // On a quiet collection nothing is written to the watches: the server must notice the
    // clients left on its own.
    assert!(
        kubegate_tests::eventually(std::time::Duration::from_secs(10), || longrunning_gauge(
            &gate
        ) == 0),
        "watches still open after their clients left: {}",
        longrunning_gauge(&gate)
    );
}

/// A protobuf message field by field: enough of the wire format to write a request body as
/// client-go's typed clients send it.
fn pb_field(number: u32, value: &[u8]) -> Vec<u8> {
    let mut out = pb_varint(u64::from(number) << 3 | 2);
    out.extend(pb_varint(value.len() as u64));
    out.extend_from_slice(value);
    out
}

fn pb_bool(number: u32, value: bool) -> Vec<u8> {
    let mut out = pb_varint(u64::from(number) << 3);
    out.push(u8::from(value));
    out
}

fn pb_varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// `k8s\0` + `runtime.Unknown{typeMeta{apiVersion, kind}, raw}`.
fn pb_envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [
        pb_field(1, api_version.as_bytes()),
        pb_field(2, kind.as_bytes()),
    ]
    .concat();
    [b"k8s\0".to_vec(), pb_field(1, &type_meta), pb_field(2, raw)].concat()
}

/// client-go's typed clients (v0.32 and later) send and accept protobuf first: they get it,
/// for every built-in kind, CRDs and flow control included, as from kube-apiserver.
#[test]
fn clients_get_protobuf_as_their_first_preference() {
    const CLIENT_GO: &str = "Accept: application/vnd.kubernetes.protobuf, application/json";
    let gate = Kubegate::start();
    gate.ok(&["create", "configmap", "pb", "--from-literal=a=b"]);
    for accept in ["Accept: application/vnd.kubernetes.protobuf", CLIENT_GO] {
        let (code, body) = gate.curl(
            "GET",
            "/api/v1/namespaces/default/configmaps/pb",
            &[accept],
            None,
        );
        assert_eq!(code, 200);
        assert!(
            body.starts_with(b"k8s\0"),
            "{accept}: protobuf envelope expected"
        );
        assert!(body.windows(2).any(|w| w == b"pb"), "the object's name");
    }
    // JSON first, JSON answered.
    let (_, body) = gate.curl(
        "GET",
        "/api/v1/namespaces/default/configmaps/pb",
        &["Accept: application/json, application/vnd.kubernetes.protobuf"],
        None,
    );
    assert!(body.starts_with(b"{"), "{}", String::from_utf8_lossy(&body));
    let (code, body) = gate.curl(
        "GET",
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        &[CLIENT_GO],
        None,
    );
    assert_eq!(code, 200);
    assert!(body.starts_with(b"k8s\0") && body.windows(9).any(|w| w == b"catch-all"));

    // A CRD created as ApiextensionsV1().CustomResourceDefinitions().Create sends it.
    let names = [
        pb_field(1, b"crontabs"),
        pb_field(2, b"crontab"),
        pb_field(4, b"CronTab"),
        pb_field(5, b"CronTabList"),
    ]
    .concat();
    let schema = [
        pb_field(5, b"object"),
        // x-kubernetes-preserve-unknown-fields: true
        pb_bool(38, true),
    ]
    .concat();
    let version = [
        pb_field(1, b"v1"),
        pb_bool(2, true),
        pb_bool(3, true),
        pb_field(4, &pb_field(1, &schema)),
    ]
    .concat();
    let spec = [
        pb_field(1, b"stable.example.com"),
        pb_field(3, &names),
        pb_field(4, b"Namespaced"),
        pb_field(7, &version),
    ]
    .concat();
    let crd = [
        pb_field(1, &pb_field(1, b"crontabs.stable.example.com")),
        pb_field(2, &spec),
    ]
    .concat();
    let body = pb_envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd);
    let (code, answer) = gate.curl(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[
            "Content-Type: application/vnd.kubernetes.protobuf",
            CLIENT_GO,
        ],
        Some(&body),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    assert!(
        answer.starts_with(b"k8s\0"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    gate.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/crontabs.stable.example.com",
        "--timeout=30s",
    ]);
    let crd = gate.json(&["get", "crd", "crontabs.stable.example.com", "-o", "json"]);
    assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList", "{crd}");
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            ["x-kubernetes-preserve-unknown-fields"],
        true,
        "{crd}"
    );
    gate.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: nightly, namespace: default}\nspec: {cron: '0 0 * * *'}\n",
    );
    // Custom resources have no protobuf form: JSON, the client's second choice; their
    // metadata-only view has one, and its watch streams protobuf frames.
    let (code, body) = gate.curl(
        "GET",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/nightly",
        &[CLIENT_GO],
        None,
    );
    assert_eq!(code, 200);
    assert!(body.starts_with(b"{"), "{}", String::from_utf8_lossy(&body));
    let (code, body) = gate.curl(
        "GET",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/nightly",
        &["Accept: application/vnd.kubernetes.protobuf"],
        None,
    );
    assert_eq!(code, 406, "{}", String::from_utf8_lossy(&body));
    let metadata_only = "Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
    for path in [
        "/apis/stable.example.com/v1/namespaces/default/crontabs/nightly",
        "/api/v1/namespaces/default/configmaps/pb",
    ] {
        let (code, body) = gate.curl("GET", path, &[metadata_only], None);
        assert_eq!(code, 200, "{path}");
        assert!(
            body.starts_with(b"k8s\0"),
            "{path}: {}",
            String::from_utf8_lossy(&body)
        );
        assert!(
            body.windows(21).any(|w| w == b"PartialObjectMetadata"),
            "{path}"
        );
    }
    // Metadata-only watches (client-go's metadata informers: bookmarks on, watch-list) are
    // length-prefixed protobuf WatchEvents throughout, each holding a PartialObjectMetadata
    // envelope: the events, and the bookmark that ends the initial ones.
    for collection in [
        "/api/v1/namespaces/default/configmaps",
        "/apis/stable.example.com/v1/namespaces/default/crontabs",
    ] {
        let (code, body) = gate.curl(
            "GET",
            &format!(
                "{collection}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
            ),
            &[metadata_only],
            None,
        );
        assert_eq!(code, 200, "{collection}");
        let mut rest = body.as_slice();
        let mut frames = 0;
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            assert!(
                rest.len() >= 4 + len,
                "{collection}: a frame of {len} bytes is cut short: {}",
                String::from_utf8_lossy(rest)
            );
            let frame = &rest[4..4 + len];
            assert!(frame.windows(4).any(|w| w == b"k8s\0"), "{frame:?}");
            assert!(frame.windows(21).any(|w| w == b"PartialObjectMetadata"));
            rest = &rest[4 + len..];
            frames += 1;
        }
        assert!(rest.is_empty(), "{collection}: {} bytes left", rest.len());
        // At least one object and the bookmark.
        assert!(frames >= 2, "{collection}: {frames} frames");
    }
    // YAML has no watch stream: a watch whose first choice is YAML is refused, as kube
    // refuses it, rather than answered in another type.
    let (code, body) = gate.curl(
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
        &["Accept: application/yaml, application/json"],
        None,
    );
    assert_eq!(code, 406, "{}", String::from_utf8_lossy(&body));
    // The Status in the YAML asked for (go-yaml folds its long message across lines).
    let status: serde_json::Value = serde_yaml::from_slice(&body).expect("a YAML Status");
    assert!(
        status["message"].as_str().is_some_and(|m| m.contains(
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        )),
        "{status}"
    );
    // A delete answers a metadata-only client in its form too (the object went).
    let (code, body) = gate.curl(
        "DELETE",
        "/apis/stable.example.com/v1/namespaces/default/crontabs/nightly",
        &[metadata_only],
        None,
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        body.starts_with(b"k8s\0"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let gone = gate.kubectl(&["get", "crontab", "nightly"]);
    assert!(!gone.status.success(), "the delete did not happen");
    // A delete-collection answers a Table client with the deleted items as rows.
    for name in ["t1", "t2"] {
        gate.ok(&["create", "configmap", name]);
        gate.ok(&["label", "configmap", name, "batch=tables"]);
    }
    let (code, body) = gate.curl(
        "DELETE",
        "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dtables",
        &["Accept: application/json;as=Table;v=v1;g=meta.k8s.io, application/json"],
        None,
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let table: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(table["kind"], "Table", "{table}");
    let names: Vec<&str> = table["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["cells"][0].as_str())
        .collect();
    assert_eq!(names, ["t1", "t2"], "{table}");

    // Paged: each page deletes the next items (`continue` is the list's), as a client that
    // pages a delete-collection past items finalizers hold expects.
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        gate.ok(&["create", "configmap", name]);
        gate.ok(&["label", "configmap", name, "batch=pages"]);
    }
    let mut token = String::new();
    let mut pages = Vec::new();
    loop {
        let mut path =
            "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dpages&limit=2".to_string();
        if !token.is_empty() {
            path.push_str(&format!("&continue={token}"));
        }
        let (code, body) = gate.curl("DELETE", &path, &[], None);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let list: serde_json::Value = serde_json::from_slice(&body).expect("json");
        let names: Vec<String> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        pages.push(names);
        token = list["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if token.is_empty() || pages.len() > 5 {
            break;
        }
    }
    assert_eq!(
        pages,
        [vec!["p1", "p2"], vec!["p3", "p4"], vec!["p5"]],
        "pages of a paged delete-collection"
    );
}

/// A LIST bigger than one write (kubegate sends list bodies in ~64 KiB chunks straight from
/// the cached objects) arrives whole and in order, with a Content-Length that matches, over
/// HTTP/1.1 and HTTP/2, and kubectl reads it.
#[test]
fn large_lists_and_documents_arrive_whole_plain_or_gzipped() {
    let gate = Kubegate::start();
    gate.ok(&["create", "namespace", "big"]);
    let padding = "x".repeat(3000);
    let mut manifests = String::new();
    for i in 0..60 {
        manifests.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:03}\n  namespace: big\ndata:\n  pad: {padding}\n  index: \"{i}\"\n"
        ));
    }
    gate.ok_stdin(&["create", "-f", "-"], &manifests);

    for protocol in ["--http1.1", "--http2"] {
        let (head, body) = curl(&gate, &[protocol], "/api/v1/namespaces/big/configmaps");
        assert!(head.starts_with("http/"), "{head}");
        assert!(head.contains(" 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or_else(|| panic!("no content-length in {head}"));
        assert_eq!(length, body.len(), "{protocol}");
        assert!(body.len() > 2 * 64 * 1024, "{} bytes", body.len());
        let list: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(list["kind"], "ConfigMapList");
        let items = list["items"].as_array().unwrap();
        // The namespace's `kube-root-ca.crt` is listed too (published as kube publishes it).
        let items: Vec<&serde_json::Value> = items
            .iter()
            .filter(|item| item["metadata"]["name"] != "kube-root-ca.crt")
            .collect();
        let indexes: Vec<String> = items
            .iter()
            .map(|item| item["data"]["index"].as_str().unwrap().to_string())
            .collect();
        let expected: Vec<String> = (0..60).map(|i| i.to_string()).collect();
        assert_eq!(indexes, expected, "{protocol}");
        assert!(items
            .iter()
            .all(|item| item["data"]["pad"] == padding.as_str()));
    }

    let list = gate.json(&["-n", "big", "get", "configmaps", "-o", "json"]);
    assert_eq!(
        list["items"].as_array().map(Vec::len),
        Some(61),
        "60 and kube-root-ca.crt"
    );

    // Clients that accept gzip (kubectl does) get large bodies compressed, as from
    // kube-apiserver (128 KiB and up), and the same content once inflated.
    let (_, plain) = curl(&gate, &[], "/api/v1/namespaces/big/configmaps");
    for protocol in ["--http1.1", "--http2"] {
        let (head, body) = curl(
            &gate,
            &[protocol, "--compressed"],
            "/api/v1/namespaces/big/configmaps",
        );
        assert!(
            head.contains("content-encoding: gzip"),
            "{protocol}: {head}"
        );
        assert!(head.contains("vary: accept-encoding"), "{protocol}: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or_else(|| panic!("no content-length in {head}"));
        // The padding repeats, so the list shrinks to a small fraction.
        assert!(length * 10 < body.len(), "{length} of {}", body.len());
        assert_eq!(body, plain, "{protocol}");
    }
    // Small answers are not worth compressing.
    let (head, body) = curl(
        &gate,
        &["--compressed"],
        "/api/v1/namespaces/big/configmaps/cm-001",
    );
    assert!(head.contains(" 200"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    let object: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(object["data"]["index"], "1", "{body}");

    // Cached documents (OpenAPI, discovery) are compressed once per version from a smaller
    // size, and keep their ETag, so revalidation works whichever form the client holds.
    let path = "/openapi/v3/apis/coordination.k8s.io/v1";
    let (plain_head, plain_doc) = curl(&gate, &[], path);
    assert!(!plain_head.contains("content-encoding"), "{plain_head}");
    let (head, doc) = curl(&gate, &["--compressed"], path);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(
        (8 * 1024..128 * 1024).contains(&plain_doc.len()),
        "pick a document between the thresholds: {} bytes",
        plain_doc.len()
    );
    assert_eq!(doc, plain_doc);
    let etag = |head: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix("etag:"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no etag in {head}"))
    };
    assert_eq!(etag(&head), etag(&plain_head));
    // (`curl` lowercases the head it returns; the ETag is compared as sent.)
    let exact_etag = curl_raw_head(&gate, path)
        .lines()
        .find_map(|l| l.strip_prefix("etag:").or_else(|| l.strip_prefix("ETag:")))
        .map(|v| v.trim().to_string())
        .expect("etag");
    let if_none_match = format!("If-None-Match: {exact_etag}");
    let (head, doc) = curl(&gate, &["-H", &if_none_match, "--compressed"], path);
    assert!(head.contains(" 304"), "{head}");
    assert!(doc.is_empty(), "{doc}");
    // kubectl (which asks for gzip) reads compressed OpenAPI.
    let explained = gate.ok(&["explain", "lease.spec"]);
    assert!(explained.contains("holderIdentity"), "{explained}");

    // `/openapi/v2`'s JSON and protobuf forms share one ETag (as kube-openapi's do): each,
    // compressed, stays its own form whichever was asked for first (kubectl reads the
    // protobuf one to validate and explain, `kubectl get --raw` the JSON one).
    let protobuf = "Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    for _ in 0..2 {
        let (head, doc) = curl(&gate, &["--compressed"], "/openapi/v2");
        assert!(head.contains("content-encoding: gzip"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(
            json_of(&doc)["swagger"],
            "2.0",
            "{}",
            &doc[..doc.len().min(200)]
        );
        let (head, doc) = curl(&gate, &["--compressed", "-H", protobuf], "/openapi/v2");
        assert!(head.contains("content-encoding: gzip"), "{head}");
        assert!(head.contains("protobuf"), "{head}");
        // A protobuf Document opens with field 1 (`swagger`, a string): 0x0a, length 3, "2.0".
        assert!(
            doc.starts_with("\n\u{3}2.0"),
            "{:?}",
            &doc[..doc.len().min(40)]
        );
    }
    let explained = gate.ok(&["explain", "lease.spec", "--output=plaintext-openapiv2"]);
    assert!(explained.contains("holderIdentity"), "{explained}");
}

/// Two GETs on one HTTP/1.1 connection `pause` seconds apart, then waits (at most `limit`
/// seconds) for the server to close the idle connection.
const IDLE_PY: &str = r#"
import http.client, json, socket, ssl, sys, time
port, pki, pause, limit = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=limit)
def get():
    conn.request("GET", "/version")
    response = conn.getresponse()
    response.read()
    return [response.status, conn.sock.getsockname()[1]]
first = get()
time.sleep(pause)
second = get()
conn.sock.settimeout(limit)
try:
    closed = conn.sock.recv(1) == b""
except (ssl.SSLEOFError, ConnectionResetError):
    closed = True
except socket.timeout:
    closed = False
print(json.dumps({"first": first, "second": second, "closed": closed}))
"#;

/// Sends a POST whose body arrives in part at once, the rest only if no answer came within
/// `pause` seconds; prints the answer's status line and whether the rest had to be sent.
const SLOW_BODY_PY: &str = r#"
import json, socket, ssl, sys
port, pki, pause = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"slow-body"}}'
head = ("POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
sock.sendall(head.encode() + body[:10])
sock.settimeout(pause)
sent_rest = False
try:
    answer = sock.recv(4096)
except socket.timeout:
    sock.sendall(body[10:])
    sent_rest = True
    sock.settimeout(30)
    answer = sock.recv(4096)
print(json.dumps({"status": answer.split(b"\r\n")[0].decode(), "sent_rest": sent_rest}))
"#;

/// A request whose body is still arriving at its deadline gets kube's 504 (kube reads the body
/// inside the timeout), and nothing is created.
#[test]
fn a_body_still_arriving_at_the_deadline_is_a_timeout() {
    let gate = Kubegate::start_with(&["--request-timeout", "2s"]);
    let out = Command::new("python3")
        .arg("-c")
        .arg(SLOW_BODY_PY)
        .arg(gate.port.to_string())
        .arg(gate.data_dir.join("pki"))
        .arg("8")
        .output()
        .unwrap();
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["status"], "HTTP/1.1 504 Gateway Timeout", "{result}");
    assert_eq!(
        result["sent_rest"], false,
        "answered without waiting for the body: {result}"
    );
    let (code, _) = gate.curl(
        "GET",
        "/api/v1/namespaces/default/configmaps/slow-body",
        &[],
        None,
    );
    assert_eq!(code, 404, "the create did not happen");
}

/// Requests Go's server refuses while reading them (framing a backend might read otherwise)
/// are refused as it refuses them, before anything else, and nothing is written.
#[test]
fn ambiguous_request_framing_is_refused_as_go_refuses_it() {
    let gate = Kubegate::start();
    let send = |header: &str| -> (u16, String) {
        let (code, body) = gate.curl_as(
            &["--http1.1"],
            "POST",
            "/api/v1/namespaces/default/configmaps?dryRun=All",
            &["Content-Type: application/json", header],
            Some(b"{}"),
        );
        (code, String::from_utf8_lossy(&body).into_owned())
    };
    assert_eq!(
        send("Content-Length: 2, 2"),
        (
            400,
            "400 Bad Request: bad Content-Length \"2, 2\"".to_string()
        )
    );
    assert_eq!(
        send("Host:"),
        (
            400,
            "400 Bad Request: missing required Host header".to_string()
        )
    );
}

/// A client that asks for `100 Continue` before sending its body gets it (as from Go's server)
/// and then its answer, rather than waiting out its own timeout.
#[test]
fn expect_100_continue_is_answered() {
    let gate = Kubegate::start();
    let pki = gate.data_dir.join("pki");
    let body =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"expect"},"data":{"a":"1"}}"#;
    // curl's POST, waiting up to 30 s for `100 Continue`: (status, verbose trace).
    let post = |with_certificate: bool| {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-v", "--http1.1", "--expect100-timeout", "30"])
            .args([
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-H",
                "Expect: 100-continue",
            ])
            .args([
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                body,
            ])
            .arg("--cacert")
            .arg(pki.join("ca.crt"));
        if with_certificate {
            cmd.arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"));
        }
        let out = cmd
            .arg(format!(
                "{}/api/v1/namespaces/default/configmaps",
                gate.url()
            ))
            .output()
            .expect("curl");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, trace) = post(true);
    assert_eq!(code, "201", "{trace}");
    assert!(trace.contains("< HTTP/1.1 100 Continue"), "{trace}");
    // Refused before its body is read: answered at once, without waiting for the body the
    // client holds back (curl would say it gave up waiting for the 100).
    let (code, trace) = post(false);
    assert_eq!(code, "401", "{trace}");
    assert!(!trace.contains("Done waiting for 100-continue"), "{trace}");
}

/// kube's HTTP/2 abuse mitigation (CVE-2023-44487): a connection that carried an
/// unauthenticated (401) or anonymous request is closed (GOAWAY) once it is answered, so
/// curl's second transfer connects again; an authenticated client keeps its connection.
#[test]
fn unauthenticated_http2_connections_carry_one_request() {
    let gate = Kubegate::start_with(&["--anonymous-auth=true"]);
    let pki = gate.data_dir.join("pki");
    let transfers = |authenticated: bool, path: &str| -> String {
        let url = format!("{}{path}", gate.url());
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--http2", "-o", "/dev/null", "-o", "/dev/null"])
            .args(["-w", "%{http_code}:%{num_connects} ", "--cacert"])
            .arg(pki.join("ca.crt"));
        if authenticated {
            cmd.arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"));
        }
        let out = cmd.arg(&url).arg(&url).output().expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(transfers(true, "/version"), "200:1 200:0 ");
    assert_eq!(transfers(false, "/version"), "200:1 200:1 ", "anonymous");
    let mut cmd = Command::new("curl");
    let url = format!("{}/api", gate.url());
    let out = cmd
        .args(["-sS", "--http2", "-o", "/dev/null", "-o", "/dev/null"])
        .args([
            "-w",
            "%{http_code}:%{num_connects} ",
            "-H",
            "Authorization: Bearer nope",
        ])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg(&url)
        .arg(&url)
        .output()
        .expect("curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "401:1 401:1 ",
        "unauthenticated"
    );
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "idleTimeout: 2s\n").unwrap();
    let gate = Kubegate::start_with(&["--config", &config.path().to_string_lossy()]);
    let out = Command::new("python3")
        .arg("-c")
        .arg(IDLE_PY)
        .arg(gate.port.to_string())
        .arg(gate.data_dir.join("pki"))
        .arg("0.5")
        .arg("30")
        .output()
        .unwrap();
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["first"][0], 200, "{result}");
    assert_eq!(result["second"][0], 200, "{result}");
    // A pause shorter than the idle timeout keeps the connection...
    assert_eq!(result["first"][1], result["second"][1], "{result}");
    // ...and a connection left idle is closed by the server.
    assert_eq!(result["closed"], true, "{result}");
}

/// A new connection that sends no request header is closed after `readHeaderTimeout` (kube's
/// fixed `ReadHeaderTimeout`), not the much longer idle timeout, so a client that connects and
/// says nothing holds it no longer than against kube-apiserver; one that asks is answered.
#[test]
fn a_connection_that_sends_no_header_is_closed_after_the_header_timeout() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "readHeaderTimeout: 1s\nidleTimeout: 10m\n").unwrap();
    let gate = Kubegate::start_with(&["--config", &config.path().to_string_lossy()]);
    let silent = r#"
import json, socket, ssl, sys
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
sock.settimeout(60)
try:
    closed = sock.recv(1) == b""
except (ssl.SSLEOFError, ConnectionResetError):
    closed = True
except socket.timeout:
    closed = False
print(json.dumps({"closed": closed}))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(silent)
        .arg(gate.port.to_string())
        .arg(gate.data_dir.join("pki"))
        .output()
        .unwrap();
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // Closed by the server (within a minute, against a 10-minute idle timeout).
    assert_eq!(result["closed"], true, "{result}");
    // A client that sends its request at once is answered, on HTTP/1.1 as on HTTP/2.
    let (code, _) = gate.curl_http1("GET", "/version", &[], None);
    assert_eq!(code, 200);
}

/// `kubegate serve` on `port` and `bind_address` with `data_dir`, its stderr to `stderr`, for
/// tests that watch the process itself rather than a started server.
fn serve(
    data_dir: &std::path::Path,
    port: u16,
    bind_address: &str,
    stderr: std::process::Stdio,
) -> std::process::Child {
    Command::new(kubegate_tests::binary())
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args([
            "--secure-port",
            &port.to_string(),
            "--bind-address",
            bind_address,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start kubegate")
}

#[test]
fn a_taken_port_stops_the_start_at_once_with_kubes_message() {
    // Another process listens on the port kubegate is told to serve on.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let mut child = serve(&data_dir, port, "127.0.0.1", std::process::Stdio::piped());
    // pingora alone would retry the bind for ~30 s while the process looked started; a
    // liveness guard, far beyond a start-up, so a regression fails instead of hanging.
    let guard = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > guard {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let status =
        status.unwrap_or_else(|| panic!("kubegate kept running on a taken port: {stderr}"));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "failed to create listener: failed to listen on 127.0.0.1:{port}"
        )) && stderr.to_lowercase().contains("address already in use"),
        "{stderr}"
    );
    // Nothing was written: the check comes before the data dir is set up.
    assert!(!data_dir.exists(), "the data dir was created");
    // The port's owner was not disturbed.
    assert_eq!(taken.local_addr().unwrap().port(), port);
}

/// kube-apiserver's go-restful routes refuse, before any handler, a method the path has no
/// route for, a PATCH body of another type and an `Accept` the route does not produce, in
/// go-restful's words; its plain handlers (`/apis`, `/apis/<group>`) take any method and
/// negotiate for themselves.
#[test]
fn go_restful_routes_refuse_what_kube_refuses() {
    let gate = Kubegate::start();
    let status = |args: &[&str], path: &str| -> (String, serde_json::Value) {
        let (head, body) = curl(&gate, args, path);
        let value = serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
        (head, value)
    };
    // An unknown path under a go-restful web service is a `Status` 404; outside them it is
    // Go's plain `http.NotFound`, as kube's last handler answers.
    for path in [
        "/api/v2",
        "/apis/coordination.k8s.io/v9",
        "/apis/rbac.authorization.k8s.io/v9",
    ] {
        let (head, body) = status(&[], path);
        assert!(head.starts_with("http/2 404"), "{path}: {head}");
        assert_eq!(body["kind"], "Status", "{path}: {body}");
    }
    for path in [
        "/foo",
        "/healthz/",
        "/apis/nosuch.example.com/v1",
        "/openapi/v2/",
    ] {
        let (head, body) = curl(&gate, &[], path);
        assert!(head.starts_with("http/2 404"), "{path}: {head}");
        assert!(
            head.contains("content-type: text/plain; charset=utf-8"),
            "{path}: {head}"
        );
        assert_eq!(body, "404 page not found\n", "{path}");
    }
    let objects = "application/json, application/yaml, application/vnd.kubernetes.protobuf";
    let (head, body) = status(&["-H", "Accept: text/html"], "/api");
    assert!(head.starts_with("http/2 406"), "{head}");
    assert_eq!(
        body["message"],
        format!("406: Not Acceptable\n\nAvailable representations: {objects}")
    );
    assert_eq!(body["details"], serde_json::json!({}), "{body}");
    let (head, body) = status(&["-H", "Accept: text/html"], "/version");
    assert!(head.starts_with("http/2 406"), "{head}");
    assert_eq!(
        body["message"],
        "406: Not Acceptable\n\nAvailable representations: application/json"
    );
    // A list produces the watch streams too; `application/*` is no match for go-restful.
    let (head, body) = status(
        &["-H", "Accept: application/*"],
        "/api/v1/namespaces/default/configmaps",
    );
    assert!(head.starts_with("http/2 406"), "{head}");
    assert_eq!(
        body["message"],
        format!(
            "406: Not Acceptable\n\nAvailable representations: {objects}, \
             application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        )
    );
    for (method, path) in [
        ("POST", "/version"),
        ("POST", "/api"),
        ("DELETE", "/apis/rbac.authorization.k8s.io/v1"),
        ("PUT", "/api/v1/namespaces/default/configmaps"),
        ("POST", "/api/v1/configmaps"),
        (
            "HEAD",
            "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
        ),
    ] {
        let args: &[&str] = if method == "HEAD" {
            &["-I"]
        } else {
            &["-X", method]
        };
        let (head, body) = status(args, path);
        assert!(head.starts_with("http/2 405"), "{method} {path}: {head}");
        if method != "HEAD" {
            assert_eq!(
                body["message"], "the server does not allow this method on the requested resource",
                "{method} {path}"
            );
            assert_eq!(body["reason"], "MethodNotAllowed", "{method} {path}");
        }
    }
    let (head, body) = status(
        &[
            "-X",
            "PATCH",
            "-H",
            "Content-Type: application/json",
            "--data",
            "{}",
        ],
        "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
    );
    assert!(head.starts_with("http/2 415"), "{head}");
    assert_eq!(body["message"], "415: Unsupported Media Type");
    assert_eq!(body["reason"], "UnsupportedMediaType");
    // kube-aggregator's own handlers: any method, their own negotiation.
    let (head, body) = status(&["-X", "POST"], "/apis");
    assert!(head.starts_with("http/2 200"), "{head}");
    assert_eq!(body["kind"], "APIGroupList");
    let (head, body) = status(
        &["-H", "Accept: text/html"],
        "/apis/rbac.authorization.k8s.io",
    );
    assert!(head.starts_with("http/2 406"), "{head}");
    assert_eq!(
        body["message"],
        format!("only the following media types are accepted: {objects}")
    );
    // What clients send still passes.
    let (head, body) = status(
        &[
            "-H",
            "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        ],
        "/api/v1/namespaces/default/configmaps",
    );
    assert!(head.starts_with("http/2 200"), "{head}");
    assert_eq!(body["kind"], "Table", "{body}");
}

#[test]
fn bodies_are_indented_and_errors_negotiated_as_kube_writes_them() {
    let gate = Kubegate::start();
    let body = |args: &[&str], path: &str| -> (String, String) { curl(&gate, args, path) };
    let kubectl = ["-A", "kubectl/v1.32.4 (linux/amd64) kubernetes/test"];
    // curl's own user agent (and browsers', and Wget's) gets indented JSON, as kube's
    // `isPrettyPrint` gives it: objects, lists, discovery and errors alike.
    let (head, text) = body(&[], "/api/v1/namespaces/default");
    assert!(head.starts_with("http/2 200"), "{head}");
    // (kubegate keeps an object's fields in the order they were stored.)
    assert!(text.starts_with("{\n  \""), "{text}");
    let indented_name = "\n  \"metadata\": {\n    \"name\": \"default\",\n";
    assert!(text.contains(indented_name), "{text}");
    let (_, text) = body(&[], "/api/v1/namespaces?limit=1");
    assert!(
        text.starts_with("{\n  \"kind\": \"NamespaceList\","),
        "{text}"
    );
    let (_, text) = body(&[], "/api");
    assert!(
        text.starts_with("{\n  \"kind\": \"APIVersions\","),
        "{text}"
    );
    let (_, text) = body(&kubectl, "/api/v1/namespaces/default");
    let compact_name = "\"metadata\":{\"name\":\"default\",";
    assert!(text.contains(compact_name), "{text}");
    // `?pretty` decides alone when it has a value; so does `pretty=1` on the media type.
    let (_, text) = body(&[], "/api/v1/namespaces/default?pretty=false");
    assert!(text.contains(compact_name), "{text}");
    let (_, text) = body(&kubectl, "/api/v1/namespaces/default?pretty=true");
    assert!(text.contains(indented_name), "{text}");
    // kubectl's user agent with an `Accept` header.
    let accepting = |accept: &str, path: &str| {
        let header = format!("Accept: {accept}");
        let mut args = kubectl.to_vec();
        args.extend(["-H", header.as_str()]);
        body(&args, path)
    };
    let (_, text) = accepting("application/json;pretty=1", "/api/v1/namespaces/default");
    assert!(text.contains(indented_name), "{text}");
    // OpenAPI is served as it is stored.
    let (_, text) = body(&[], "/openapi/v3");
    assert!(
        text.starts_with("{\"paths\":"),
        "{}",
        &text[..text.len().min(80)]
    );

    // Errors: in the media type asked for, as kube's `ErrorNegotiated` writes them.
    let missing = "/api/v1/namespaces/default/configmaps/missing";
    let (head, text) = body(&kubectl, missing);
    assert!(head.starts_with("http/2 404"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(text.starts_with("{\"kind\":\"Status\""), "{text}");
    let (head, text) = accepting("application/yaml", missing);
    assert!(head.starts_with("http/2 404"), "{head}");
    assert!(head.contains("content-type: application/yaml"), "{head}");
    assert!(text.contains("\nreason: NotFound\n"), "{text}");
    let (head, text) = accepting("application/vnd.kubernetes.protobuf", missing);
    assert!(head.starts_with("http/2 404"), "{head}");
    assert!(
        head.contains("content-type: application/vnd.kubernetes.protobuf"),
        "{head}"
    );
    assert!(text.starts_with("k8s\0"), "{text:?}");
    // An Accept nothing can answer: the error itself, indented JSON, its own code (kube's
    // `WriteRawJSON`), here go-restful's 406 and an unknown path's 404 under its `/api` web
    // service (outside every web service a 404 is Go's plain text).
    let (head, text) = accepting("text/html", "/api/v1/namespaces/default/configmaps");
    assert!(head.starts_with("http/2 406"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(text.starts_with("{\n  \"kind\": \"Status\","), "{text}");
    assert!(text.ends_with("\n  \"code\": 406\n}"), "{text}");
    let (head, text) = accepting("text/html", "/api/v2");
    assert!(head.starts_with("http/2 404"), "{head}");
    assert!(text.ends_with("\n  \"code\": 404\n}"), "{text}");
}

/// YAML as kube writes and reads it (go-yaml v2, YAML 1.1): strings that a YAML 1.1 reader
/// would take for booleans, numbers or dates are quoted, so PyYAML (a YAML 1.1 reader, as
/// kubectl's and client-go's go-yaml are) reads every value back as the string it is; YAML
/// request bodies read `yes` as true; a repeated key is kube's strict-decoding complaint.
#[test]
fn yaml_is_written_and_read_as_kube_writes_and_reads_it() {
    let gate = Kubegate::start();
    let tricky = serde_json::json!({
        "bool": "yes", "y": "y", "on": "on", "null": "null", "octal": "0755",
        "underscored": "1_000", "sexagesimal": "1:20", "date": "2024-01-02",
        "time": "2024-01-02T10:00:00Z", "hex": "0x1F", "float": ".5", "multi": "a\nb\n",
        "colon": "a: b", "plain": "plain words",
    });
    let object = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "yaml-1-1", "namespace": "default"},
        "data": tricky,
    });
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/json"],
        Some(object.to_string().as_bytes()),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let path = "/api/v1/namespaces/default/configmaps/yaml-1-1";
    let (code, body) = gate.curl("GET", path, &["Accept: application/yaml"], None);
    assert_eq!(code, 200);
    let text = String::from_utf8(body).expect("UTF-8");
    // go-yaml's choices: keys in its order, double quotes where YAML 1.1 would misread.
    for line in [
        "  bool: \"yes\"\n",
        "  \"y\": \"y\"\n",
        "  \"on\": \"on\"\n",
        "  \"null\": \"null\"\n",
        "  octal: \"0755\"\n",
        "  underscored: \"1_000\"\n",
        "  sexagesimal: \"1:20\"\n",
        "  date: \"2024-01-02\"\n",
        "  multi: |\n    a\n    b\n",
        "  plain: plain words\n",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    assert!(text.starts_with("apiVersion: v1\ndata:\n"), "{text}");
    assert!(text.contains("\n  creationTimestamp: \""), "{text}");
    // A YAML 1.1 reader gets the strings back.
    let mut python = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)['data']))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    python
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("writes");
    let out = python.wait_with_output().expect("python3 runs");
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).expect("PyYAML read it");
    assert_eq!(read, tricky);

    // The same YAML sent back replaces the object with the same data.
    let (code, body) = gate.curl(
        "PUT",
        path,
        &["Content-Type: application/yaml"],
        Some(text.as_bytes()),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let stored: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(stored["data"], tricky);

    // Request bodies are YAML 1.1: a plain `yes` is a boolean (kube refuses it for a
    // string field), `'yes'` a string.
    let sa = b"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: yaml-sa\nautomountServiceAccountToken: yes\n";
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        &["Content-Type: application/yaml"],
        Some(sa),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let created: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(created["automountServiceAccountToken"], true);
    let cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-bool\ndata:\n  a: yes\n";
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/yaml"],
        Some(cm),
    );
    let text = String::from_utf8_lossy(&body);
    assert_eq!(code, 400, "{text}");
    assert!(
        text.contains("cannot unmarshal bool into Go struct field ConfigMap.data of type string"),
        "{text}"
    );

    // A repeated key: the last value under the default `Warn`, with go-yaml's complaint as a
    // warning; refused under `Strict`.
    let repeated = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-repeated\ndata:\n  a: one\n  a: two\n";
    let (head, text) = curl(
        &gate,
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/yaml",
            "--data-binary",
            std::str::from_utf8(repeated).expect("UTF-8"),
        ],
        "/api/v1/namespaces/default/configmaps",
    );
    assert!(head.starts_with("http/2 201"), "{head}{text}");
    assert!(
        head.contains("warning: 299 - \"line 7: key \\\"a\\\" already set in map\""),
        "{head}"
    );
    assert_eq!(json_of(&text)["data"]["a"], "two");
    let (head, text) = curl(
        &gate,
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/yaml",
            "--data-binary",
            &std::str::from_utf8(repeated)
                .expect("UTF-8")
                .replace("yaml-repeated", "yaml-strict"),
        ],
        "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
    );
    assert!(head.starts_with("http/2 400"), "{head}");
    assert_eq!(
        json_of(&text)["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map"
    );
    // A malformed body: go-yaml's words, and kube's summary of what was sent.
    let (code, body) = gate.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/yaml"],
        Some(b"a: [1\n"),
    );
    assert_eq!(code, 400);
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(
        status["message"],
        "the object provided is unrecognized (must be of type ConfigMap): yaml: line 1: did not find expected ',' or ']' (613a205b310a)"
    );
}

/// `--bind-address 0.0.0.0` listens on every interface of both families, as kube-apiserver
/// (Go's listener) does: IPv6 clients (single-stack IPv6 clusters, whose kubelet probes the
/// pod's IPv6 address) reach it too. Run in a private network namespace whose loopback holds
/// an extra address of each family, so nothing outside it is listened on.
#[test]
fn an_unspecified_bind_address_serves_both_families() {
    use std::net::IpAddr;
    let v4: IpAddr = "10.77.0.1".parse().unwrap();
    let v6: IpAddr = "fd00:77::1".parse().unwrap();
    kubegate_tests::netns::enter_private_network(&[v4, v6]);
    let port = kubegate_tests::free_port();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let mut child = serve(&data_dir, port, "0.0.0.0", std::process::Stdio::null());
    let ready = |host: &str| {
        Command::new("curl")
            .args(["-sS", "-g", "--max-time", "5", "--cacert"])
            .arg(data_dir.join("pki/ca.crt"))
            // The serving certificate names loopback and kube's names, not these addresses.
            .args(["--resolve", &format!("localhost:{port}:{host}")])
            .arg(format!("https://localhost:{port}/readyz"))
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    };
    let started = kubegate_tests::eventually(std::time::Duration::from_secs(30), || {
        ready("127.0.0.1") == "ok"
    });
    let answers: Vec<(String, String)> = ["127.0.0.1", "10.77.0.1", "::1", "fd00:77::1"]
        .iter()
        .map(|host| (host.to_string(), ready(host)))
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(started, "kubegate did not start");
    for (host, answer) in &answers {
        assert_eq!(answer, "ok", "{host}: {answers:?}");
    }
}

/// kube-apiserver's identity Lease: `kube-system/apiserver-<hash of the host name>`, labelled
/// `apiserver.kubernetes.io/identity=kube-apiserver`, held for an hour and renewed; an identity
/// Lease whose holder stopped renewing it more than its duration ago is deleted (at start, and
/// hourly), while other Leases are left alone.
#[test]
fn the_server_holds_an_identity_lease_and_collects_expired_ones() {
    let mut gate = Kubegate::start();
    let selector = "apiserver.kubernetes.io/identity=kube-apiserver";
    let identity_leases = |gate: &Kubegate| {
        gate.json(&[
            "-n",
            "kube-system",
            "get",
            "leases",
            "-l",
            selector,
            "-o",
            "json",
        ])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let found = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        identity_leases(&gate).len() == 1
    });
    assert!(found, "no identity lease: {:?}", identity_leases(&gate));
    let lease = identity_leases(&gate).remove(0);
    let name = lease["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        name.starts_with("apiserver-") && name.len() == 36,
        "{lease}"
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(
        lease["metadata"]["labels"]["kubernetes.io/hostname"],
        host.trim()
    );
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|holder| holder.starts_with(&format!("{name}_"))),
        "{lease}"
    );
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3600);
    assert!(lease["spec"]["renewTime"].is_string(), "{lease}");

    // An identity Lease nobody renewed for more than its hour, and another one, fresh.
    for (lease, renewed) in [
        ("apiserver-gone", "2020-01-01T00:00:00.000000Z"),
        ("apiserver-alive", "2099-01-01T00:00:00.000000Z"),
    ] {
        gate.ok_stdin(
            &["create", "-f", "-"],
            &serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": lease, "namespace": "kube-system",
                    "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
                "spec": {"holderIdentity": format!("{lease}_x"), "leaseDurationSeconds": 3600,
                    "renewTime": renewed}})
            .to_string(),
        );
    }
    // A Lease of something else, as old, is not the collector's.
    gate.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "old-lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15,
                     "renewTime": "2020-01-01T00:00:00.000000Z"}}"#,
    );
    gate.restart();
    let collected = kubegate_tests::eventually(std::time::Duration::from_secs(10), || {
        let names: Vec<String> = identity_leases(&gate)
            .iter()
            .filter_map(|l| l["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        !names.contains(&"apiserver-gone".to_string())
            && names.contains(&"apiserver-alive".to_string())
            && names.contains(&name)
    });
    assert!(collected, "{:?}", identity_leases(&gate));
    gate.ok(&["-n", "kube-system", "get", "lease", "old-lock"]);
}

//! Bad input gets a `Status` body with kube's code, reason and wording, and changes nothing.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use kubegate_tests::Kubegate;
use serde_json::Value;

fn status(body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)));
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    v
}

const JSON: &str = "Content-Type: application/json";

#[test]
fn bad_requests_get_kube_status_bodies() {
    let gate = Kubegate::start();
    let cms = "/api/v1/namespaces/default/configmaps";

    // Malformed JSON → 400.
    let (code, body) = gate.curl("POST", cms, &[JSON], Some(b"{\"apiVersion\": \"v1\", "));
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(status(&body)["reason"], "BadRequest");
    // As kube's handler words a body whose kind could not be read: the decoder's words and
    // the body summarized (in hex when it is no JSON object).
    let (code, body) = gate.curl("POST", cms, &[JSON], Some(b"garbage"));
    assert_eq!(code, 400);
    assert_eq!(
        status(&body)["message"],
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character 'g' looking for beginning of value (67617262616765)"
    );
    let (code, body) = gate.curl(
        "PUT",
        &format!("{cms}/x"),
        &["Content-Type: application/vnd.kubernetes.protobuf"],
        Some(b"k8s\0"),
    );
    assert_eq!(code, 400);
    assert_eq!(
        status(&body)["message"],
        "the object provided is unrecognized (must be of type ConfigMap): empty body (6b387300)"
    );

    // A kind that does not belong at this path → 400.
    let (code, body) = gate.curl(
        "POST",
        cms,
        &[JSON],
        Some(br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#),
    );
    assert_eq!(code, 400);
    let s = status(&body);
    assert!(s["message"].as_str().unwrap().contains("Secret"), "{s}");

    // Invalid name → 422 Invalid with the field path.
    let (code, body) = gate.curl(
        "POST",
        cms,
        &[JSON],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#),
    );
    assert_eq!(code, 422);
    let s = status(&body);
    assert_eq!(s["reason"], "Invalid");
    assert!(
        s["message"].as_str().unwrap().starts_with(
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
        ),
        "{s}"
    );
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");

    // Missing object → 404 with kube's message.
    let (code, body) = gate.curl("GET", &format!("{cms}/nope"), &[], None);
    assert_eq!(code, 404);
    let s = status(&body);
    assert_eq!(s["message"], "configmaps \"nope\" not found");
    assert_eq!(s["details"]["name"], "nope");
    assert_eq!(s["details"]["kind"], "configmaps");

    // Unknown resource → 404.
    let (code, body) = gate.curl("GET", "/api/v1/namespaces/default/widgets", &[], None);
    assert_eq!(code, 404);
    status(&body);
    let (code, _) = gate.curl("GET", "/apis/nope.example.com/v1/things", &[], None);
    assert_eq!(code, 404);

    // Stale resourceVersion → 409 Conflict, and the object is unchanged.
    let (code, body) = gate.curl(
        "POST",
        cms,
        &[JSON],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}"#),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let created: Value = serde_json::from_slice(&body).unwrap();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let update = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","resourceVersion":"{rv}"}},"data":{{"a":"2"}}}}"#
    );
    let (code, _) = gate.curl("PUT", &format!("{cms}/c"), &[JSON], Some(update.as_bytes()));
    assert_eq!(code, 200);
    let (code, body) = gate.curl(
        "PUT",
        &format!("{cms}/c"),
        &[JSON],
        Some(update.replace("\"2\"", "\"3\"").as_bytes()),
    );
    assert_eq!(code, 409);
    let s = status(&body);
    assert_eq!(s["reason"], "Conflict");
    assert_eq!(s["message"], "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again");
    let now = gate.json(&["get", "cm", "c", "-o", "json"]);
    assert_eq!(now["data"]["a"], "2");

    // Creating twice → 409 AlreadyExists.
    let (code, body) = gate.curl(
        "POST",
        cms,
        &[JSON],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#),
    );
    assert_eq!(code, 409);
    assert_eq!(status(&body)["reason"], "AlreadyExists");

    // A body over the limit (default 3 MiB) → 413, nothing stored.
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"a":"{}"}}}}"#,
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let (code, body) = gate.curl("POST", cms, &[JSON], Some(big.as_bytes()));
    assert_eq!(
        code,
        413,
        "{}",
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    assert_eq!(status(&body)["reason"], "RequestEntityTooLarge");
    let (code, _) = gate.curl("GET", &format!("{cms}/big"), &[], None);
    assert_eq!(code, 404);
    // The size is checked after authentication, as kube's handler does: a client with a bad
    // credential hears 401 for the same body, not 413.
    let big_file = gate.data_dir.with_file_name("big.json");
    std::fs::write(&big_file, &big).unwrap();
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-X",
            "POST",
            "--cacert",
        ])
        .arg(gate.data_dir.join("pki/ca.crt"))
        .args(["-H", JSON, "-H", "Authorization: Bearer not-a-valid-token"])
        .arg("--data-binary")
        .arg(format!("@{}", big_file.display()))
        .arg(format!("{}{cms}", gate.url()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.trim_end().rsplit_once('\n').unwrap();
    assert_eq!(code, "401", "{}", &body[..body.len().min(300)]);
    assert_eq!(status(body.as_bytes())["reason"], "Unauthorized");

    // Unsupported media type → 415.
    let (code, body) = gate.curl("POST", cms, &["Content-Type: text/plain"], Some(b"hello"));
    assert_eq!(code, 415);
    status(&body);

    // Path traversal never resolves to another resource.
    let (code, body) = gate.curl(
        "GET",
        "/api/v1/namespaces/default/configmaps/%2e%2e/secrets",
        &[],
        None,
    );
    assert!(
        code == 400 || code == 404,
        "{code}: {}",
        String::from_utf8_lossy(&body)
    );

    // Unauthenticated requests are 401 (public health endpoints excepted).
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-k",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            &format!("{}/api/v1/namespaces", gate.url()),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.trim_end().ends_with("401"), "{text}");
    // curl's user agent gets it indented, as from kube.
    assert!(
        text.contains("\n  \"reason\": \"Unauthorized\",\n"),
        "{text}"
    );
    let out = std::process::Command::new("curl")
        .args(["-sS", "-k", &format!("{}/readyz", gate.url())])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");

    // The server is still fine after all that.
    assert!(gate.ok(&["get", "ns", "default"]).contains("Active"));
}

#[test]
fn invalid_configuration_is_rejected_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.yaml");
    std::fs::write(&config, "securePort: 6443\ntls:\n  certFil: /x\n").unwrap();
    let out = std::process::Command::new(kubegate_tests::binary())
        .args(["serve", "--config", config.to_str().unwrap(), "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tls") && err.contains("unknown field `certFil`"),
        "{err}"
    );

    std::fs::write(
        &config,
        "authorization:\n  modes: [Nope]\nmaxRequestBytes: 10\n",
    )
    .unwrap();
    let out = std::process::Command::new(kubegate_tests::binary())
        .args(["serve", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("authorization.modes[0]: Unsupported value: \"Nope\""),
        "{err}"
    );
    assert!(err.contains("maxRequestBytes"), "{err}");
}

#[test]
fn fields_of_the_wrong_type_are_refused_as_kubes_decoding_refuses_them() {
    let gate = Kubegate::start();
    // kubectl sends YAML's numbers and booleans as they are; kube's Go decoding refuses them
    // where the field is a string, so no typed client ever meets such an object.
    let manifests = [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typed}\ndata: {replicas: 3}\n",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
        ),
        (
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: typed}\nspec: {holderIdentity: true}\n",
            "Lease in version \"v1\" cannot be handled as a Lease: json: cannot unmarshal bool into Go struct field LeaseSpec.spec.holderIdentity of type string",
        ),
    ];
    for (manifest, expected) in manifests {
        for args in [
            &["create", "-f", "-"][..],
            &["apply", "--server-side", "-f", "-"][..],
        ] {
            let out = gate.kubectl_stdin(args, Some(manifest));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?} accepted {manifest}");
            assert!(
                stderr.contains("(BadRequest)") && stderr.contains(expected),
                "{args:?}: {stderr}"
            );
        }
    }
    let listed = gate.ok(&[
        "get",
        "configmaps,leases",
        "--field-selector",
        "metadata.name=typed",
        "-o",
        "name",
    ]);
    assert!(
        listed.trim().is_empty(),
        "a refused object was stored: {listed}"
    );
}

#[test]
fn kubectl_meets_kubes_decoding_of_times_patches_and_delete_options() {
    let gate = Kubegate::start();
    // A MicroTime without its six fractional digits is refused with time.Parse's words: such
    // an event, stored, would break `kubectl events` and `describe` for its namespace.
    let event = "apiVersion: v1\nkind: Event\nmetadata: {name: ev}\ninvolvedObject: {kind: ConfigMap, name: app, namespace: default}\nreason: X\ntype: Normal\neventTime: \"2026-11-29T01:00:00Z\"\nreportingComponent: me\nreportingInstance: i\naction: A\n";
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(event));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(r#"Error from server (BadRequest): error when creating "STDIN": Event in version "v1" cannot be handled as a Event: parsing time "2026-11-29T01:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#),
        "{stderr}"
    );
    // A good time in another form is kept as kube writes it back: in UTC.
    let lease = "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: l}\nspec: {renewTime: \"2026-11-29T02:00:00.500000+01:00\"}\n";
    gate.kubectl_stdin(&["create", "-f", "-"], Some(lease));
    assert_eq!(
        gate.ok(&["get", "lease", "l", "-o", "jsonpath={.spec.renewTime}"]),
        "2026-11-29T01:00:00.500000Z"
    );

    // `kubectl apply` (strict field validation) of a field ConfigMaps do not have, on an
    // existing object: kube's patcher refuses the patch with a 422 on `patch`.
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: b}\n";
    gate.kubectl_stdin(&["apply", "-f", "-"], Some(manifest));
    let bogus = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\nbogus: 1\ndata: {a: c}\n";
    let out = gate.kubectl_stdin(&["apply", "-f", "-"], Some(bogus));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr
            .contains("The request is invalid: patch: Invalid value: \"map[bogus:1 data:map[a:c] ")
            && stderr.contains(r#"strict decoding error: unknown field "bogus""#),
        "{stderr}"
    );
    assert_eq!(
        gate.ok(&["get", "cm", "app", "-o", "jsonpath={.data.a}"]),
        "b"
    );

    // Delete options kube refuses delete nothing.
    let path = "/api/v1/namespaces/default/configmaps/app?propagationPolicy=Bogus";
    let (code, body) = gate.curl("DELETE", path, &[], None);
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        status(&body)["message"],
        r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil""#
    );
    assert_eq!(
        gate.ok(&["get", "cm", "app", "-o", "name"]).trim(),
        "configmap/app"
    );
}

#[test]
fn endpoints_carry_kubes_deprecation_warning() {
    let gate = Kubegate::start();
    let out = gate.kubectl(&["get", "endpoints", "-n", "default"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
        ),
        "{stderr}"
    );
    // EndpointSlices, the replacement, carry none.
    let out = gate.kubectl(&["get", "endpointslices", "-n", "default"]);
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Warning"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

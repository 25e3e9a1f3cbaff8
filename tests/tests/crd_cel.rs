//! End-to-end CEL validation rules (`x-kubernetes-validations`) with the real kubectl: a CRD's
//! rules refuse invalid custom resources with 422 and the CRD's messages, a transition rule
//! (`self == oldSelf`) makes a field immutable on update only, a CRD whose rule does not
//! compile is refused, and rules using kube's CEL libraries (quantity, IP, CIDR, URL, format)
//! admit good objects and refuse bad ones, as kube's apiextensions-apiserver does.

use kubegate_tests::crd_fixtures::serve_crd;
use kubegate_tests::Kubegate;
use serde_json::Value;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: scalers.cel.example.com
spec:
  group: cel.example.com
  scope: Namespaced
  names:
    plural: scalers
    singular: scaler
    kind: Scaler
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.minReplicas <= self.replicas
              message: replicas must be at least minReplicas
            - rule: "!has(self.tier) || self.tier in ['gold', 'silver']"
              messageExpression: "'tier ' + self.tier + ' is not offered'"
              fieldPath: .tier
            properties:
              replicas:
                type: integer
              minReplicas:
                type: integer
              tier:
                type: string
              region:
                type: string
                x-kubernetes-validations:
                - rule: self == oldSelf
                  message: Value is immutable
              ports:
                type: array
                items:
                  type: object
                  properties:
                    name:
                      type: string
                  x-kubernetes-validations:
                  - rule: self.name.matches('^[a-z]+$')
                    message: port names are lowercase letters
"#;

fn scaler(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: cel.example.com/v1\nkind: Scaler\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

fn established(gate: &Kubegate) {
    serve(gate, CRD, "scalers");
}

/// Applies `crd` (of group `cel.example.com`) and waits until `plural` is served.
fn serve(gate: &Kubegate, crd: &str, plural: &str) {
    serve_crd(gate, crd, &format!("{plural}.cel.example.com"));
}

/// `kubectl create -f -` expected to fail: its stderr.
fn create_fails(gate: &Kubegate, object: &str) -> String {
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(object));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "create unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

#[test]
fn rules_refuse_invalid_custom_resources_with_the_crds_messages() {
    let gate = Kubegate::start();
    established(&gate);

    // Valid objects pass.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &scaler(
            "good",
            "  replicas: 3\n  minReplicas: 2\n  tier: gold\n  region: eu\n  ports:\n  - name: http\n",
        ),
    );
    assert_eq!(
        gate.json(&["get", "scaler", "good", "-o", "json"])["spec"]["replicas"],
        3
    );

    // A violating create: 422 with the CRD's message, and nothing stored.
    let stderr = create_fails(&gate, &scaler("low", "  replicas: 1\n  minReplicas: 2\n"));
    assert!(
        stderr.contains(r#"The Scaler "low" is invalid: spec: Invalid value: "object": replicas must be at least minReplicas"#),
        "{stderr}"
    );
    assert!(!gate.kubectl(&["get", "scaler", "low"]).status.success());
    let body = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "cel.example.com/v1", "kind": "Scaler",
        "metadata": {"name": "low"}, "spec": {"replicas": 1, "minReplicas": 2}
    }))
    .expect("json");
    let (code, out) = gate.curl(
        "POST",
        "/apis/cel.example.com/v1/namespaces/default/scalers",
        &["Content-Type: application/json"],
        Some(&body),
    );
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&out));
    let status: Value = serde_json::from_slice(&out).expect("Status");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "Scaler");
    assert_eq!(
        status["details"]["causes"],
        serde_json::json!([{
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"object\": replicas must be at least minReplicas",
            "field": "spec"
        }])
    );

    // messageExpression and fieldPath; rules on list items report the item's path.
    let stderr = create_fails(
        &gate,
        &scaler(
            "bronze",
            "  replicas: 1\n  minReplicas: 1\n  tier: bronze\n  ports:\n  - name: ok\n  - name: Bad1\n",
        ),
    );
    assert!(
        stderr.contains(r#"spec.tier: Invalid value: "object": tier bronze is not offered"#),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            r#"spec.ports[1]: Invalid value: "object": port names are lowercase letters"#
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("spec.ports[0]"), "{stderr}");

    // Updates are validated too: a merge patch breaking the rule is refused.
    let patch = gate.fails(&[
        "patch",
        "scaler",
        "good",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":1}}"#,
    ]);
    assert!(
        patch.contains("replicas must be at least minReplicas"),
        "{patch}"
    );
    assert_eq!(
        gate.json(&["get", "scaler", "good", "-o", "json"])["spec"]["replicas"],
        3
    );
}

#[test]
fn transition_rules_make_a_field_immutable_on_update_only() {
    let gate = Kubegate::start();
    established(&gate);

    // `self == oldSelf` is not evaluated on create.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &scaler("imm", "  replicas: 2\n  minReplicas: 1\n  region: eu\n"),
    );
    // Updating other fields passes, the immutable one unchanged.
    gate.ok(&[
        "patch",
        "scaler",
        "imm",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":5}}"#,
    ]);
    let imm = gate.json(&["get", "scaler", "imm", "-o", "json"]);
    assert_eq!(imm["spec"]["replicas"], 5);

    // Changing it is refused, by patch and by a full update (kubectl replace).
    let patch = gate.fails(&[
        "patch",
        "scaler",
        "imm",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"region":"us"}}"#,
    ]);
    assert!(
        patch.contains(
            r#"The Scaler "imm" is invalid: spec.region: Invalid value: "string": Value is immutable"#
        ),
        "{patch}"
    );
    let mut changed = imm.clone();
    changed["spec"]["region"] = Value::from("ap");
    let replace = gate.kubectl_stdin(
        &["replace", "-f", "-"],
        Some(&serde_json::to_string(&changed).expect("json")),
    );
    let stderr = String::from_utf8_lossy(&replace.stderr);
    assert!(
        !replace.status.success() && stderr.contains("Value is immutable"),
        "{stderr}"
    );
    assert_eq!(
        gate.json(&["get", "scaler", "imm", "-o", "json"])["spec"]["region"],
        "eu"
    );

    // A field that was absent has no old value: setting it later is allowed.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &scaler("late", "  replicas: 1\n  minReplicas: 1\n"),
    );
    gate.ok(&[
        "patch",
        "scaler",
        "late",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"region":"us"}}"#,
    ]);
    assert_eq!(
        gate.json(&["get", "scaler", "late", "-o", "json"])["spec"]["region"],
        "us"
    );
}

#[test]
fn a_crd_whose_rule_does_not_compile_is_refused() {
    let gate = Kubegate::start();
    let bad = CRD.replace(
        "rule: self.minReplicas <= self.replicas",
        "rule: self.minReplicas <=",
    );
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(&bad));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "bad CRD accepted");
    assert!(
        stderr.contains(r#"The CustomResourceDefinition "scalers.cel.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.minReplicas <=", Message:"replicas must be at least minReplicas""#),
        "{stderr}"
    );
    assert!(
        stderr.contains("compilation failed: ERROR: <input>:1:20: Syntax error:"),
        "{stderr}"
    );
    assert!(!gate
        .kubectl(&["get", "crd", "scalers.cel.example.com"])
        .status
        .success());

    // A reference to a field the schema does not declare does not compile either.
    let typo = CRD.replace(
        "rule: self.minReplicas <= self.replicas",
        "rule: self.minReplica <= self.replicas",
    );
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(&typo));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("undefined field 'minReplica'"),
        "{stderr}"
    );

    // A rule that could never finish within kube's cost budget (comprehensions nested over
    // a list the schema does not bound) is refused with kube's words, before any object
    // makes it run.
    let costly = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: costs.cel.example.com
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: costs, singular: cost, kind: Cost}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.l.all(x, self.l.all(y, self.l.all(z, x == y)))
            properties:
              l:
                type: array
                items: {type: string}
"#;
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(costly));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a far too costly rule was accepted");
    assert!(
        stderr.contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{stderr}"
    );
    // Bounded by maxItems, the same rule is accepted.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &costly.replace(
            "type: array\n",
            "type: array\n                maxItems: 10\n",
        ),
    );

    // The valid CRD is accepted.
    gate.ok_stdin(&["create", "-f", "-"], CRD);
}

/// Rules using kube's CEL libraries: quantity, CIDR and IP, URL and named formats.
const LIBRARY_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: backends.cel.example.com
spec:
  group: cel.example.com
  scope: Namespaced
  names:
    plural: backends
    singular: backend
    kind: Backend
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: quantity(self.memory).compareTo(quantity('1Gi')) <= 0
              message: memory must be at most 1Gi
            - rule: cidr(self.network).containsIP(self.address)
              message: address must be inside network
            - rule: url(self.webhook).getScheme() == 'https' && url(self.webhook).getHostname().endsWith('.example.com')
              message: webhook must be https on example.com
            - rule: "!format.dns1123Label().validate(self.hostname).hasValue()"
              messageExpression: "'hostname: ' + format.dns1123Label().validate(self.hostname).value().join('; ')"
              fieldPath: .hostname
            properties:
              memory:
                type: string
                x-kubernetes-validations:
                - rule: isQuantity(self)
                  message: memory must be a quantity
              network:
                type: string
                x-kubernetes-validations:
                - rule: isCIDR(self) && cidr(self) == cidr(self).masked()
                  message: network must be a masked CIDR
              address:
                type: string
                x-kubernetes-validations:
                - rule: isIP(self) && ip.isCanonical(self) && ip(self).family() == 4 && !ip(self).isLoopback()
                  message: address must be a canonical, non-loopback IPv4 address
              webhook:
                type: string
              hostname:
                type: string
"#;

fn backend(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: cel.example.com/v1\nkind: Backend\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[test]
fn rules_using_kubes_cel_libraries_admit_good_objects_and_refuse_bad_ones() {
    let gate = Kubegate::start();

    // A rule that is no bool is refused when the CRD is written.
    let not_bool = LIBRARY_CRD.replace(
        "rule: quantity(self.memory).compareTo(quantity('1Gi')) <= 0",
        "rule: quantity(self.memory)",
    );
    let out = gate.kubectl_stdin(&["create", "-f", "-"], Some(&not_bool));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains(r#"Rule:"quantity(self.memory)""#)
            && stderr.contains("cel expression must evaluate to a bool"),
        "{stderr}"
    );

    serve(&gate, LIBRARY_CRD, "backends");

    // A good object is admitted.
    gate.ok_stdin(
        &["create", "-f", "-"],
        &backend(
            "good",
            "  memory: 512Mi\n  network: 10.0.0.0/8\n  address: 10.1.2.3\n  webhook: https://hooks.example.com/x?a=1\n  hostname: web-1\n",
        ),
    );
    assert_eq!(
        gate.json(&["get", "backend", "good", "-o", "json"])["spec"]["memory"],
        "512Mi"
    );

    // Each library's rule refuses its bad value with the CRD's message.
    let stderr = create_fails(
        &gate,
        &backend(
            "bad",
            "  memory: 1.5Gi\n  network: 10.1.0.0/8\n  address: 192.168.0.1\n  webhook: http://hooks.example.com\n  hostname: Web_1\n",
        ),
    );
    for expected in [
        r#"The Backend "bad" is invalid"#,
        r#"spec.network: Invalid value: "string": network must be a masked CIDR"#,
        r#"spec: Invalid value: "object": memory must be at most 1Gi"#,
        r#"spec: Invalid value: "object": address must be inside network"#,
        r#"spec: Invalid value: "object": webhook must be https on example.com"#,
        r#"spec.hostname: Invalid value: "object": hostname: a lowercase RFC 1123 label must consist of lower case alphanumeric characters"#,
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    assert!(!gate.kubectl(&["get", "backend", "bad"]).status.success());

    // A library's error (an unparsable quantity, URL) is the rule's runtime error.
    let stderr = create_fails(
        &gate,
        &backend(
            "broken",
            "  memory: lots\n  network: 10.0.0.0/8\n  address: ::1\n  webhook: hooks.example.com\n  hostname: ok\n",
        ),
    );
    for expected in [
        r#"spec.memory: Invalid value: "string": memory must be a quantity"#,
        r#"spec.address: Invalid value: "string": address must be a canonical, non-loopback IPv4 address"#,
        r#"spec: Invalid value: "object": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: memory must be at most 1Gi"#,
        r#"URL parse error during conversion from string: parse "hooks.example.com": invalid URI for request evaluating rule: webhook must be https on example.com"#,
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }

    // Updates are checked too: growing memory past the limit is refused.
    let patch = gate.fails(&[
        "patch",
        "backend",
        "good",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"memory":"2Gi"}}"#,
    ]);
    assert!(patch.contains("memory must be at most 1Gi"), "{patch}");
    gate.ok(&[
        "patch",
        "backend",
        "good",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"memory":"1Gi"}}"#,
    ]);
}

//! Authentication against remote parties, end to end: a JWT issuer discovered over TLS
//! (fixture OIDC server) and a TokenReview webhook described by a kubeconfig file, with the
//! negative cases that must be 401 and never reach a backend.

// Test helpers may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use kubegate_tests::fixtures::{OidcIssuer, TokenReviewWebhook};
use kubegate_tests::Kubegate;
use serde_json::{json, Value};

/// POSTs a SelfSubjectReview with `token`: returns (status, body).
fn whoami_with(gate: &Kubegate, token: &str) -> (u16, Value) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", "POST"])
        .arg("--cacert")
        .arg(gate.data_dir.join("pki/ca.crt"))
        .args([
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-H",
            "Content-Type: application/json",
        ])
        .args([
            "--data-binary",
            r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
        ])
        .arg(format!(
            "{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            gate.url()
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (
        code.trim().parse().unwrap(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[test]
fn oidc_issuer_tokens() {
    let issuer = OidcIssuer::start();
    let dir = tempfile::tempdir().unwrap();
    let authn = dir.path().join("authn.yaml");
    std::fs::write(
        &authn,
        issuer.authentication_config("kubegate", "oidc:", "oidc:"),
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("authentication:\n  configFile: {}\n", authn.display()),
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);

    let (code, review) = whoami_with(&gate, &issuer.token("jane", &["devs"], "kubegate"));
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["status"]["userInfo"]["username"], "oidc:jane");
    let groups = review["status"]["userInfo"]["groups"].as_array().unwrap();
    assert!(
        groups.contains(&json!("oidc:devs")) && groups.contains(&json!("system:authenticated")),
        "{review}"
    );

    // Wrong audience, expired, wrong issuer, tampered, unknown key, alg none: all 401.
    let wrong_aud = issuer.token("jane", &[], "someone-else");
    let mut expired = issuer.claims("jane", "kubegate", Duration::from_secs(600));
    expired["exp"] = json!(expired["iat"].as_u64().unwrap() - 3600);
    let expired = issuer.mint(&expired);
    let mut other_iss = issuer.claims("jane", "kubegate", Duration::from_secs(600));
    other_iss["iss"] = json!("https://evil.example");
    let other_iss = issuer.mint(&other_iss);
    let good = issuer.token("jane", &[], "kubegate");
    let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
    parts[2] = format!("{}AA", &parts[2][..parts[2].len() - 2]);
    let tampered = parts.join(".");
    let unknown_kid = issuer.unpublished_key("stray").sign(&issuer.claims(
        "jane",
        "kubegate",
        Duration::from_secs(600),
    ));
    let none_alg = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(&issuer
            .claims("jane", "kubegate", Duration::from_secs(600))
            .to_string())
    );
    for (what, token) in [
        ("wrong audience", wrong_aud),
        ("expired", expired),
        ("other issuer", other_iss),
        ("tampered signature", tampered),
        ("unknown kid", unknown_kid),
        ("alg none", none_alg),
    ] {
        let (code, body) = whoami_with(&gate, &token);
        assert_eq!(
            code,
            401,
            "{what}: {body}\n{}",
            kubegate_tests::tail(&gate.log(), 30)
        );
        assert_eq!(body["reason"], "Unauthorized", "{what}");
    }
}

#[test]
fn webhook_token_reviews() {
    let webhook = TokenReviewWebhook::start(&[("remote-token", "remote-user", &["remote-group"])]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "authentication:\n  webhook:\n    configFile: {}\n    cacheTTL: 1m\n",
            webhook.kubeconfig().display()
        ),
    )
    .unwrap();
    let gate = Kubegate::start_with(&["--config", config.to_str().unwrap()]);
    let (code, review) = whoami_with(&gate, "remote-token");
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["status"]["userInfo"]["username"], "remote-user");
    let reviews = webhook.reviews();
    // A second request is answered from the cache.
    let (code, _) = whoami_with(&gate, "remote-token");
    assert_eq!(code, 201);
    assert_eq!(
        webhook.reviews(),
        reviews,
        "cached result must not ask the webhook again"
    );
    let (code, body) = whoami_with(&gate, "unknown-token");
    assert_eq!(code, 401, "{body}");
    // kube's default review version.
    let sent = webhook.last_review().unwrap_or_default();
    assert_eq!(
        sent["apiVersion"], "authentication.k8s.io/v1beta1",
        "{sent}"
    );
    assert_eq!(sent["spec"]["token"], "unknown-token", "{sent}");

    // `--authentication-token-webhook-version=v1` sends v1 reviews.
    drop(gate);
    let gate = Kubegate::start_with(&[
        "--config",
        config.to_str().unwrap(),
        "--authentication-token-webhook-version=v1",
    ]);
    let (code, review) = whoami_with(&gate, "remote-token");
    assert_eq!(code, 201, "{review}");
    let sent = webhook.last_review().unwrap_or_default();
    assert_eq!(sent["apiVersion"], "authentication.k8s.io/v1", "{sent}");
}

fn b64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

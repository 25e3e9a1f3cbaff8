//! JWT (OIDC) bearer-token authentication, as kube's structured authentication
//! configuration: the `jwt:` issuers of an `AuthenticationConfiguration` file
//! (`--authentication-config`).
//!
//! # The file
//!
//! kube's format, as-is (`apiVersion: apiserver.config.k8s.io/v1`, `v1beta1` or `v1alpha1`,
//! `kind: AuthenticationConfiguration`), YAML or JSON, unknown keys rejected:
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: AuthenticationConfiguration
//! jwt:
//! - issuer:
//!     url: https://issuer.example.com          # must equal the tokens' `iss`
//!     discoveryURL: https://internal/.well-known/openid-configuration   # optional
//!     certificateAuthority: |                  # optional PEM; system roots otherwise
//!       -----BEGIN CERTIFICATE-----
//!       ...
//!     audiences: [kubegate]
//!     audienceMatchPolicy: MatchAny            # required with several audiences
//!   claimValidationRules:
//!   - claim: hd
//!     requiredValue: example.com
//!   claimMappings:
//!     username: {claim: email, prefix: ""}    # prefix is required with claim
//!     groups: {claim: groups, prefix: "oidc:"}
//!     uid: {claim: sub}
//!     extra:
//!     - key: example.com/tenant
//!       valueExpression: claims.tenant
//! anonymous:
//!   enabled: true
//!   conditions: [{path: /healthz}]
//! ```
//!
//! Validation follows kube's (`jwt[0].issuer.url: Invalid value: "http://x": URL scheme
//! must be https`), with every problem reported at once.
//!
//! CEL is not implemented: `claimValidationRules[].expression`,
//! `claimMappings.{username,groups,uid}.expression` and `userValidationRules` are rejected at
//! load with "CEL expressions are not supported by kubegate yet". Because kube's `extra`
//! mappings only exist as CEL, `extra[].valueExpression` accepts exactly the plain claim
//! selections `claims.<name>` and `claims["<name>"]`, evaluated as CEL would (a missing
//! claim fails the token; a string or list of strings is the value; empty values are
//! dropped). Distributed claims are not resolved.
//!
//! # kubegate extension: keys from a local JWKS file
//!
//! For issuers that cannot be reached (air-gapped, tests), an issuer may carry a
//! kubegate-only `x-kubegate` object whose `jwksFile` names a JSON Web Key Set file; keys
//! are then read from that file instead of from discovery:
//!
//! ```yaml
//! jwt:
//! - issuer:
//!     url: https://issuer.example.com
//!     audiences: [kubegate]
//!     x-kubegate:
//!       jwksFile: keys/issuer.jwks.json     # relative to this file's directory
//! ```
//!
//! The extension lives under the issuer because it replaces the issuer's key discovery, and
//! under one `x-` prefixed object so it cannot collide with a field kube adds later and is
//! visibly non-kube. With `jwksFile`, `discoveryURL` and `certificateAuthority` may not be
//! set (they would be unused). The file must hold at least one usable key at load; it is
//! re-read (rate limited like discovery) when a token names a key it does not have, so keys
//! can be rotated by rewriting the file.
//!
//! # Verification
//!
//! A token is an issuer's only when its unverified `iss` equals the issuer's `url` exactly;
//! otherwise the authenticator answers [`TokenOutcome::NotMine`]. Then, as kube (go-oidc):
//! keys come from `<url>/.well-known/openid-configuration` (or `discoveryURL`), whose
//! `issuer` must equal `url`, then its `jwks_uri`, over HTTPS verified with
//! `certificateAuthority` (or the system roots); discovery is retried lazily, at most every
//! 10 s, while it fails. A token signed by a key the set does not hold triggers a key refresh,
//! at most once per 10 s. Accepted algorithms are RS256/384/512, PS256/384/512, ES256/384;
//! `none` and HMAC algorithms are always refused (a public key is never used as an HMAC
//! secret). `exp` is required and checked without leeway, `nbf` with one minute; `aud` must
//! contain one of `audiences`. Claims then map to the user: username (claim + prefix; the
//! `email` claim requires `email_verified`, when present, to be `true`), groups (string or
//! array, prefixed), uid, extra; `claimValidationRules` require string claims with the given
//! values.
//!
//! The issuer's `audiences` are checked against the token's `aud`, not against the server's
//! API audiences: like kube's OIDC authenticator, a successful result carries no audiences,
//! and kube wraps these authenticators in `WrapAudienceAgnosticToken` (kubegate's
//! [`super::bearer::AudienceAgnosticToken`]) so that they are only consulted for the API
//! audiences. The integrator must wrap them the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::bearer::{TokenAuthenticator, TokenOutcome, TokenReviewResult};
use crate::https::{https_client, read_body_capped, root_store_from_pem, TlsOptions};
use crate::user::UserInfo;

/// API versions of `AuthenticationConfiguration` kubegate reads.
pub const SUPPORTED_API_VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1alpha1",
];
/// kube's limit on `jwt` authenticators in one file.
pub const MAX_JWT_AUTHENTICATORS: usize = 64;
/// The message every CEL field is rejected with.
pub const CEL_UNSUPPORTED: &str = "CEL expressions are not supported by kubegate yet";

const WELL_KNOWN_PATH: &str = "/.well-known/openid-configuration";
/// Discovery and key refreshes happen at most this often (kube polls discovery every 10 s).
const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(10);
/// go-oidc's allowance for clocks behind the issuer's when checking `nbf`.
const NBF_LEEWAY_SECS: f64 = 60.0;
/// kube's OIDC HTTP client timeout.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Discovery documents and key sets larger than this are refused.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// kube's `allowedSigningAlgs` minus ES512, which jsonwebtoken cannot verify.
const SUPPORTED_ALGORITHMS: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

// ---------------------------------------------------------------------------------------
// The file format

/// A kube `AuthenticationConfiguration` (the parts kubegate implements).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthenticationConfiguration {
    #[serde(default, deserialize_with = "nullable")]
    pub api_version: String,
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    #[serde(default, deserialize_with = "nullable")]
    pub jwt: Vec<JwtAuthenticatorConfig>,
    #[serde(default)]
    pub anonymous: Option<AnonymousConfig>,
}

/// One `jwt:` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtAuthenticatorConfig {
    #[serde(default)]
    pub issuer: IssuerConfig,
    #[serde(default, deserialize_with = "nullable")]
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    #[serde(default)]
    pub claim_mappings: ClaimMappings,
    #[serde(default, deserialize_with = "nullable")]
    pub user_validation_rules: Vec<UserValidationRule>,
}

/// `jwt[].issuer`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerConfig {
    #[serde(default, deserialize_with = "nullable")]
    pub url: String,
    #[serde(default, rename = "discoveryURL", deserialize_with = "nullable")]
    pub discovery_url: String,
    /// PEM roots that verify the discovery and JWKS endpoints.
    #[serde(default, deserialize_with = "nullable")]
    pub certificate_authority: String,
    #[serde(default, deserialize_with = "nullable")]
    pub audiences: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub audience_match_policy: String,
    #[serde(default, deserialize_with = "nullable")]
    pub egress_selector_type: String,
    /// kubegate's extension (see the module docs).
    #[serde(default, rename = "x-kubegate")]
    pub kubegate: Option<IssuerExtension>,
}

/// `jwt[].issuer.x-kubegate`: kubegate-only issuer settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerExtension {
    /// A JSON Web Key Set file used instead of discovery; after loading, an absolute path
    /// (relative paths are resolved against the configuration file's directory).
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
}

/// `jwt[].claimValidationRules[]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimValidationRule {
    #[serde(default, deserialize_with = "nullable")]
    pub claim: String,
    #[serde(default, deserialize_with = "nullable")]
    pub required_value: String,
    #[serde(default, deserialize_with = "nullable")]
    pub expression: String,
    #[serde(default, deserialize_with = "nullable")]
    pub message: String,
}

/// `jwt[].claimMappings`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMappings {
    #[serde(default)]
    pub username: PrefixedClaimOrExpression,
    #[serde(default)]
    pub groups: PrefixedClaimOrExpression,
    #[serde(default)]
    pub uid: ClaimOrExpression,
    #[serde(default, deserialize_with = "nullable")]
    pub extra: Vec<ExtraMapping>,
}

/// `claimMappings.username` / `claimMappings.groups`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixedClaimOrExpression {
    #[serde(default, deserialize_with = "nullable")]
    pub claim: String,
    /// `None` when absent: kube requires it (possibly empty) whenever `claim` is set.
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub expression: String,
}

/// `claimMappings.uid`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimOrExpression {
    #[serde(default, deserialize_with = "nullable")]
    pub claim: String,
    #[serde(default, deserialize_with = "nullable")]
    pub expression: String,
}

/// `claimMappings.extra[]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraMapping {
    #[serde(default, deserialize_with = "nullable")]
    pub key: String,
    #[serde(default, deserialize_with = "nullable")]
    pub value_expression: String,
}

/// `jwt[].userValidationRules[]` (CEL only, so always rejected).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserValidationRule {
    #[serde(default, deserialize_with = "nullable")]
    pub expression: String,
    #[serde(default, deserialize_with = "nullable")]
    pub message: String,
}

/// The `anonymous:` block: whether requests without credentials are served as
/// `system:anonymous`, and on which paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousConfig {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<AnonymousCondition>,
}

/// `anonymous.conditions[]`: a path anonymous requests are allowed on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousCondition {
    #[serde(default, deserialize_with = "nullable")]
    pub path: String,
}

impl AnonymousConfig {
    /// Whether an unauthenticated request for `path` becomes anonymous: enabled, and either
    /// no conditions or one naming exactly this path (kube matches the path exactly).
    pub fn allows(&self, path: &str) -> bool {
        self.enabled
            && (self.conditions.is_empty() || self.conditions.iter().any(|c| c.path == path))
    }
}

/// Reads an explicit YAML `null` as the type's default, as Go does for `key: ~`.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl AuthenticationConfiguration {
    /// Reads, parses and validates a configuration file. `disallowed_issuers` are issuer
    /// URLs no `jwt` entry may use (kube passes the service-account issuers).
    pub fn load(path: &Path, disallowed_issuers: &[String]) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("authentication config {}: {e}", path.display()))?;
        let base_dir = path.parent().unwrap_or_else(|| Path::new("."));
        Self::parse(&text, base_dir, disallowed_issuers)
            .map_err(|e| format!("authentication config {}: {e}", path.display()))
    }

    /// Parses and validates a configuration's text; relative `jwksFile` paths are resolved
    /// against `base_dir`. All validation errors are reported together, as kube's
    /// aggregate (`[a, b]` when there are several).
    pub fn parse(
        text: &str,
        base_dir: &Path,
        disallowed_issuers: &[String],
    ) -> Result<Self, String> {
        let mut config: AuthenticationConfiguration =
            serde_yaml::from_str(text).map_err(|e| format!("invalid configuration: {e}"))?;
        for authenticator in &mut config.jwt {
            if let Some(file) = authenticator
                .issuer
                .kubegate
                .as_mut()
                .and_then(|k| k.jwks_file.as_mut())
            {
                if file.is_relative() && !file.as_os_str().is_empty() {
                    *file = base_dir.join(&*file);
                }
            }
        }
        let errors = config.validate(disallowed_issuers);
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(aggregate(&errors))
        }
    }

    /// Every validation problem, each naming its field path in kube's wording.
    pub fn validate(&self, disallowed_issuers: &[String]) -> Vec<String> {
        let mut errors = Vec::new();
        if !SUPPORTED_API_VERSIONS.contains(&self.api_version.as_str()) {
            errors.push(not_supported(
                "apiVersion",
                &self.api_version,
                &SUPPORTED_API_VERSIONS,
            ));
        }
        if self.kind != "AuthenticationConfiguration" {
            errors.push(not_supported(
                "kind",
                &self.kind,
                &["AuthenticationConfiguration"],
            ));
        }
        if self.jwt.len() > MAX_JWT_AUTHENTICATORS {
            errors.push(format!(
                "jwt: Too many: {}: must have at most {MAX_JWT_AUTHENTICATORS} items",
                self.jwt.len()
            ));
            return errors;
        }
        let mut seen_issuers = BTreeSet::new();
        let mut seen_discovery = BTreeSet::new();
        for (i, authenticator) in self.jwt.iter().enumerate() {
            let path = format!("jwt[{i}]");
            errors.extend(validate_jwt_authenticator(
                authenticator,
                &path,
                disallowed_issuers,
            ));
            let issuer = &authenticator.issuer;
            if !seen_issuers.insert(issuer.url.as_str()) {
                errors.push(duplicate(&format!("{path}.issuer.url"), &issuer.url));
            }
            if !issuer.discovery_url.is_empty()
                && !seen_discovery.insert(issuer.discovery_url.as_str())
            {
                errors.push(duplicate(
                    &format!("{path}.issuer.discoveryURL"),
                    &issuer.discovery_url,
                ));
            }
        }
        if let Some(anonymous) = &self.anonymous {
            if !anonymous.enabled && !anonymous.conditions.is_empty() {
                errors.push(format!(
                    "anonymous.conditions: Invalid value: {}: enabled should be set to true when conditions are defined",
                    quote(
                        &anonymous
                            .conditions
                            .iter()
                            .map(|c| c.path.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                ));
            }
        }
        errors
    }

    /// One authenticator per `jwt` entry, in file order.
    pub fn jwt_authenticators(&self) -> Result<Vec<JwtAuthenticator>, String> {
        self.jwt.iter().map(JwtAuthenticator::new).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Validation, in kube's order and wording

fn validate_jwt_authenticator(
    a: &JwtAuthenticatorConfig,
    path: &str,
    disallowed_issuers: &[String],
) -> Vec<String> {
    let mut errors = Vec::new();
    validate_issuer(
        &a.issuer,
        &format!("{path}.issuer"),
        disallowed_issuers,
        &mut errors,
    );
    validate_claim_validation_rules(
        &a.claim_validation_rules,
        &format!("{path}.claimValidationRules"),
        &mut errors,
    );
    validate_claim_mappings(
        &a.claim_mappings,
        &format!("{path}.claimMappings"),
        &mut errors,
    );
    for (i, rule) in a.user_validation_rules.iter().enumerate() {
        let field = format!("{path}.userValidationRules[{i}].expression");
        if rule.expression.is_empty() {
            errors.push(required(&field, ""));
        } else {
            errors.push(invalid(&field, &rule.expression, CEL_UNSUPPORTED));
        }
    }
    errors
}

fn validate_issuer(
    issuer: &IssuerConfig,
    path: &str,
    disallowed: &[String],
    errors: &mut Vec<String>,
) {
    let url_path = format!("{path}.url");
    if issuer.url.is_empty() {
        errors.push(required(&url_path, ""));
    } else {
        validate_url(&issuer.url, disallowed, &url_path, errors);
    }
    if !issuer.discovery_url.is_empty() {
        let field = format!("{path}.discoveryURL");
        if !issuer.url.is_empty()
            && issuer.url.trim_end_matches('/') == issuer.discovery_url.trim_end_matches('/')
        {
            errors.push(invalid(
                &field,
                &issuer.discovery_url,
                "discoveryURL must be different from URL",
            ));
        }
        validate_url(&issuer.discovery_url, &[], &field, errors);
    }
    let audiences_path = format!("{path}.audiences");
    let policy_path = format!("{path}.audienceMatchPolicy");
    if issuer.audiences.is_empty() {
        errors.push(required(
            &audiences_path,
            &format!("at least one {audiences_path} is required"),
        ));
    } else {
        let mut seen = BTreeSet::new();
        for (i, audience) in issuer.audiences.iter().enumerate() {
            let field = format!("{audiences_path}[{i}]");
            if audience.is_empty() {
                errors.push(required(&field, ""));
            }
            if !seen.insert(audience.as_str()) {
                errors.push(duplicate(&field, audience));
            }
        }
        let policy = issuer.audience_match_policy.as_str();
        if issuer.audiences.len() > 1 && policy != "MatchAny" {
            errors.push(invalid(
                &policy_path,
                policy,
                "audienceMatchPolicy must be MatchAny for multiple audiences",
            ));
        }
        if issuer.audiences.len() == 1 && !policy.is_empty() && policy != "MatchAny" {
            errors.push(invalid(
                &policy_path,
                policy,
                "audienceMatchPolicy must be empty or MatchAny for single audience",
            ));
        }
    }
    if !issuer.certificate_authority.is_empty() {
        if let Err(e) = root_store_from_pem(issuer.certificate_authority.as_bytes()) {
            errors.push(invalid(
                &format!("{path}.certificateAuthority"),
                "<omitted>",
                &e,
            ));
        }
    }
    if !issuer.egress_selector_type.is_empty() {
        errors.push(invalid(
            &format!("{path}.egressSelectorType"),
            &issuer.egress_selector_type,
            "egress selectors are not supported by kubegate",
        ));
    }
    if let Some(extension) = &issuer.kubegate {
        let field = format!("{path}.x-kubegate.jwksFile");
        match &extension.jwks_file {
            None => errors.push(required(&field, "")),
            Some(file) if file.as_os_str().is_empty() => errors.push(required(&field, "")),
            Some(file) => {
                let shown = file.display().to_string();
                if let Err(e) = read_jwks_file(file) {
                    errors.push(invalid(&field, &shown, &e));
                }
                if !issuer.discovery_url.is_empty() {
                    errors.push(invalid(
                        &format!("{path}.discoveryURL"),
                        &issuer.discovery_url,
                        "may not be specified when x-kubegate.jwksFile is set",
                    ));
                }
                if !issuer.certificate_authority.is_empty() {
                    errors.push(invalid(
                        &format!("{path}.certificateAuthority"),
                        "<omitted>",
                        "may not be specified when x-kubegate.jwksFile is set",
                    ));
                }
            }
        }
    }
}

fn validate_url(text: &str, disallowed: &[String], path: &str, errors: &mut Vec<String>) {
    if disallowed.iter().any(|d| d == text) {
        let mut list: Vec<&str> = disallowed.iter().map(String::as_str).collect();
        list.sort_unstable();
        errors.push(invalid(
            path,
            text,
            &format!(
                "URL must not overlap with disallowed issuers: [{}]",
                list.join(" ")
            ),
        ));
    }
    let url = match reqwest::Url::parse(text) {
        Ok(url) => url,
        Err(e) => {
            errors.push(invalid(path, text, &e.to_string()));
            return;
        }
    };
    if url.scheme() != "https" {
        errors.push(invalid(path, text, "URL scheme must be https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        errors.push(invalid(
            path,
            text,
            "URL must not contain a username or password",
        ));
    }
    if url.query().is_some_and(|q| !q.is_empty()) {
        errors.push(invalid(path, text, "URL must not contain a query"));
    }
    if url.fragment().is_some_and(|f| !f.is_empty()) {
        errors.push(invalid(path, text, "URL must not contain a fragment"));
    }
}

fn validate_claim_validation_rules(
    rules: &[ClaimValidationRule],
    path: &str,
    errors: &mut Vec<String>,
) {
    let mut seen_claims = BTreeSet::new();
    for (i, rule) in rules.iter().enumerate() {
        let field = format!("{path}[{i}]");
        match (rule.claim.is_empty(), rule.expression.is_empty()) {
            (false, false) => errors.push(invalid(
                &field,
                &rule.claim,
                "claim and expression can't both be set",
            )),
            (true, true) => errors.push(required(&field, "claim or expression is required")),
            (false, true) => {
                if !rule.message.is_empty() {
                    errors.push(invalid(
                        &format!("{field}.message"),
                        &rule.message,
                        "may not be specified when claim is set",
                    ));
                }
                if !seen_claims.insert(rule.claim.as_str()) {
                    errors.push(duplicate(&format!("{field}.claim"), &rule.claim));
                }
            }
            (true, false) => errors.push(invalid(
                &format!("{field}.expression"),
                &rule.expression,
                &format!("{CEL_UNSUPPORTED}; use claim and requiredValue"),
            )),
        }
    }
}

fn validate_claim_mappings(m: &ClaimMappings, path: &str, errors: &mut Vec<String>) {
    validate_prefixed(&m.username, &format!("{path}.username"), true, errors);
    validate_prefixed(&m.groups, &format!("{path}.groups"), false, errors);
    let uid_path = format!("{path}.uid");
    match (m.uid.claim.is_empty(), m.uid.expression.is_empty()) {
        (false, false) => errors.push(invalid(
            &uid_path,
            "",
            "claim and expression can't both be set",
        )),
        (true, false) => errors.push(invalid(
            &format!("{uid_path}.expression"),
            &m.uid.expression,
            &format!("{CEL_UNSUPPORTED}; use claim"),
        )),
        _ => {}
    }
    let mut seen_keys = BTreeSet::new();
    for (i, mapping) in m.extra.iter().enumerate() {
        let field = format!("{path}.extra[{i}]");
        let key_path = format!("{field}.key");
        validate_domain_prefixed_path(&key_path, &mapping.key, errors);
        if mapping.key != mapping.key.to_lowercase() {
            errors.push(invalid(&key_path, &mapping.key, "must be lowercase"));
        }
        if is_kubernetes_domain(&mapping.key) {
            errors.push(invalid(
                &key_path,
                &mapping.key,
                "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
            ));
        }
        if !seen_keys.insert(mapping.key.as_str()) {
            errors.push(duplicate(&key_path, &mapping.key));
            continue;
        }
        let expression_path = format!("{field}.valueExpression");
        if mapping.value_expression.is_empty() {
            errors.push(required(&expression_path, ""));
        } else if claim_selection(&mapping.value_expression).is_none() {
            errors.push(invalid(
                &expression_path,
                &mapping.value_expression,
                &format!(
                    "{CEL_UNSUPPORTED}; only plain claim selections (claims.<name> or claims[\"<name>\"]) are supported"
                ),
            ));
        }
    }
}

fn validate_prefixed(
    mapping: &PrefixedClaimOrExpression,
    path: &str,
    claim_required: bool,
    errors: &mut Vec<String>,
) {
    match (mapping.claim.is_empty(), mapping.expression.is_empty()) {
        (false, false) => errors.push(invalid(path, "", "claim and expression can't both be set")),
        (true, true) if claim_required => {
            errors.push(required(path, "claim or expression is required"))
        }
        (true, true) => {}
        (true, false) => {
            if let Some(prefix) = &mapping.prefix {
                errors.push(invalid(
                    &format!("{path}.prefix"),
                    prefix,
                    "may not be specified when expression is set",
                ));
            }
            errors.push(invalid(
                &format!("{path}.expression"),
                &mapping.expression,
                &format!("{CEL_UNSUPPORTED}; use claim and prefix"),
            ));
        }
        (false, true) => {
            if mapping.prefix.is_none() {
                errors.push(required(
                    &format!("{path}.prefix"),
                    "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
                ));
            }
        }
    }
}

/// kube's `IsDomainPrefixedPath`: `<DNS-1123 subdomain>/<http path>`.
fn validate_domain_prefixed_path(path: &str, value: &str, errors: &mut Vec<String>) {
    if value.is_empty() {
        errors.push(required(path, ""));
        return;
    }
    let Some((host, rest)) = value
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        errors.push(invalid(
            path,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    if !is_dns1123_subdomain(host) {
        errors.push(invalid(
            path,
            host,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ));
    }
    let path_ok = rest
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c));
    if !path_ok {
        errors.push(invalid(
            path,
            rest,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
}

fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        })
}

fn is_kubernetes_domain(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || domain == "k8s.io"
        || domain.ends_with(".k8s.io")
}

/// The claim a plain CEL selection names: `claims.name`, `claims["name"]` or
/// `claims['name']`; `None` for any other expression.
fn claim_selection(expression: &str) -> Option<String> {
    let rest = expression.trim().strip_prefix("claims")?.trim_start();
    if let Some(name) = rest.strip_prefix('.') {
        let name = name.trim();
        let mut chars = name.chars();
        let first = chars.next()?;
        if (first.is_ascii_alphabetic() || first == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Some(name.to_string());
        }
        return None;
    }
    let inner = rest.strip_prefix('[')?.strip_suffix(']')?.trim();
    for quote in ['"', '\''] {
        if let Some(name) = inner
            .strip_prefix(quote)
            .and_then(|s| s.strip_suffix(quote))
        {
            // Escapes would need CEL's string rules; refuse rather than misread.
            if !name.is_empty() && !name.contains(['\\', '"', '\'']) {
                return Some(name.to_string());
            }
        }
    }
    None
}

fn quote(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| format!("\"{value}\""))
}

fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", quote(value))
}

fn required(path: &str, detail: &str) -> String {
    if detail.is_empty() {
        format!("{path}: Required value")
    } else {
        format!("{path}: Required value: {detail}")
    }
}

fn duplicate(path: &str, value: &str) -> String {
    format!("{path}: Duplicate value: {}", quote(value))
}

fn not_supported(path: &str, value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
    format!(
        "{path}: Unsupported value: {}: supported values: {}",
        quote(value),
        list.join(", ")
    )
}

/// kube's `utilerrors.Aggregate` text.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------
// Keys

/// One public key of the issuer's set.
struct VerifyKey {
    kid: Option<String>,
    /// The JWK's `alg`, when it pins one.
    alg: Option<Algorithm>,
    kind: KeyKind,
    key: DecodingKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Rsa,
    EcP256,
    EcP384,
}

impl KeyKind {
    fn fits(self, alg: Algorithm) -> bool {
        match self {
            KeyKind::Rsa => matches!(
                alg,
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ),
            KeyKind::EcP256 => alg == Algorithm::ES256,
            KeyKind::EcP384 => alg == Algorithm::ES384,
        }
    }
}

fn b64url(field: &str, value: Option<&Value>) -> Result<Vec<u8>, String> {
    let text = value
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing {field}"))?;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|e| format!("{field}: {e}"))
}

impl VerifyKey {
    /// Reads one JWK; `Ok(None)` for keys that are not RSA/EC signature keys (symmetric
    /// `oct` keys in particular are never used).
    fn from_jwk(jwk: &Value) -> Result<Option<VerifyKey>, String> {
        if jwk
            .get("use")
            .and_then(Value::as_str)
            .is_some_and(|u| u != "sig")
        {
            return Ok(None);
        }
        let alg = match jwk.get("alg").and_then(Value::as_str) {
            None => None,
            Some(name) => match name.parse::<Algorithm>() {
                Ok(alg) if SUPPORTED_ALGORITHMS.contains(&alg) => Some(alg),
                _ => return Ok(None),
            },
        };
        let (kind, key) = match jwk.get("kty").and_then(Value::as_str) {
            Some("RSA") => {
                let n = b64url("n", jwk.get("n"))?;
                let e = b64url("e", jwk.get("e"))?;
                (KeyKind::Rsa, DecodingKey::from_rsa_raw_components(&n, &e))
            }
            Some("EC") => {
                let (kind, size) = match jwk.get("crv").and_then(Value::as_str) {
                    Some("P-256") => (KeyKind::EcP256, 32),
                    Some("P-384") => (KeyKind::EcP384, 48),
                    _ => return Ok(None),
                };
                let x = b64url("x", jwk.get("x"))?;
                let y = b64url("y", jwk.get("y"))?;
                if x.len() != size || y.len() != size {
                    return Err("EC key coordinates have the wrong length".to_string());
                }
                let encode = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
                let key = DecodingKey::from_ec_components(&encode(&x), &encode(&y))
                    .map_err(|e| format!("EC key: {e}"))?;
                (kind, key)
            }
            _ => return Ok(None),
        };
        if alg.is_some_and(|a| !kind.fits(a)) {
            return Ok(None);
        }
        Ok(Some(VerifyKey {
            kid: jwk.get("kid").and_then(Value::as_str).map(str::to_string),
            alg,
            kind,
            key,
        }))
    }
}

/// The usable keys of a JWKS document; an error when there are none.
fn parse_jwks(document: &Value) -> Result<Vec<VerifyKey>, String> {
    let keys = document
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| "JWKS has no \"keys\" array".to_string())?;
    let mut usable = Vec::new();
    for (i, jwk) in keys.iter().enumerate() {
        match VerifyKey::from_jwk(jwk) {
            Ok(Some(key)) => usable.push(key),
            Ok(None) => {}
            Err(e) => tracing::debug!(index = i, error = %e, "jwt: skipping unreadable JWK"),
        }
    }
    if usable.is_empty() {
        return Err("JWKS has no usable RSA or EC signing keys".to_string());
    }
    Ok(usable)
}

fn read_jwks_file(path: &Path) -> Result<Vec<VerifyKey>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let document: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    parse_jwks(&document)
}

/// Where an issuer's keys come from.
enum KeySource {
    /// OIDC discovery over HTTPS. The `jwks_uri` is learned once, as go-oidc does.
    Discovery {
        client: reqwest::Client,
        discovery_url: String,
        jwks_uri: tokio::sync::OnceCell<String>,
    },
    /// kubegate's `x-kubegate.jwksFile`.
    File(PathBuf),
    /// Keys handed in by code (tests, embedders); never refreshed.
    Fixed,
}

/// The current key set and the refresh bookkeeping.
struct KeyState {
    keys: Arc<Vec<VerifyKey>>,
    /// Bumped by every successful load, so waiters can tell someone else refreshed.
    generation: u64,
    loaded: bool,
    last_attempt: Option<tokio::time::Instant>,
    last_error: Option<String>,
}

// ---------------------------------------------------------------------------------------
// The authenticator

/// How claims become a user, with the validated mapping settings.
#[derive(Debug, Clone)]
struct Mapping {
    username_claim: String,
    username_prefix: String,
    groups_claim: String,
    groups_prefix: String,
    uid_claim: String,
    /// `(extra key, claim name)`.
    extra: Vec<(String, String)>,
    /// `(claim, required value)`, in file order.
    required_claims: Vec<(String, String)>,
}

/// One `jwt` issuer as a bearer-token authenticator.
pub struct JwtAuthenticator {
    issuer: String,
    audiences: Vec<String>,
    mapping: Mapping,
    source: KeySource,
    state: RwLock<KeyState>,
    /// Serializes refreshes so concurrent requests with a new `kid` fetch once.
    refresh_lock: tokio::sync::Mutex<()>,
    min_refresh_interval: Duration,
}

impl std::fmt::Debug for JwtAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuthenticator")
            .field("issuer", &self.issuer)
            .field("audiences", &self.audiences)
            .finish_non_exhaustive()
    }
}

impl JwtAuthenticator {
    /// An authenticator for one `jwt` entry (validated again here, so an unchecked entry
    /// cannot slip through). Nothing is fetched yet: discovery happens on the first token
    /// or on [`JwtAuthenticator::prefetch_keys`].
    pub fn new(config: &JwtAuthenticatorConfig) -> Result<JwtAuthenticator, String> {
        let errors = validate_jwt_authenticator(config, "jwt", &[]);
        if !errors.is_empty() {
            return Err(aggregate(&errors));
        }
        let issuer = &config.issuer;
        let jwks_file = issuer.kubegate.as_ref().and_then(|k| k.jwks_file.clone());
        let (source, state) = match jwks_file {
            Some(path) => {
                // Load now: the file was checked at validation and an unreadable one is a
                // configuration error, not a per-request one.
                let keys = read_jwks_file(&path)
                    .map_err(|e| format!("jwksFile {}: {e}", path.display()))?;
                (KeySource::File(path), KeyState::loaded(keys))
            }
            None => {
                let roots = if issuer.certificate_authority.is_empty() {
                    tracing::info!(issuer = %issuer.url, "OIDC: no certificateAuthority; the system roots verify the issuer");
                    None
                } else {
                    Some(root_store_from_pem(
                        issuer.certificate_authority.as_bytes(),
                    )?)
                };
                let client = https_client(&TlsOptions {
                    roots,
                    insecure: false,
                    server_name: None,
                    client_auth: None,
                    https_only: true,
                    follow_redirects: true,
                    resolve: Vec::new(),
                    host: None,
                })?;
                let discovery_url = if issuer.discovery_url.is_empty() {
                    format!("{}{WELL_KNOWN_PATH}", issuer.url.trim_end_matches('/'))
                } else {
                    issuer.discovery_url.clone()
                };
                (
                    KeySource::Discovery {
                        client,
                        discovery_url,
                        jwks_uri: tokio::sync::OnceCell::new(),
                    },
                    KeyState::empty(),
                )
            }
        };
        Ok(Self::assemble(config, source, state))
    }

    /// An authenticator that verifies with the given JWKS document instead of discovery or
    /// a file; the key set never changes. For embedding and tests.
    pub fn with_jwks(
        config: &JwtAuthenticatorConfig,
        jwks: &Value,
    ) -> Result<JwtAuthenticator, String> {
        let errors = validate_jwt_authenticator(config, "jwt", &[]);
        if !errors.is_empty() {
            return Err(aggregate(&errors));
        }
        let keys = parse_jwks(jwks)?;
        Ok(Self::assemble(
            config,
            KeySource::Fixed,
            KeyState::loaded(keys),
        ))
    }

    fn assemble(
        config: &JwtAuthenticatorConfig,
        source: KeySource,
        state: KeyState,
    ) -> JwtAuthenticator {
        let m = &config.claim_mappings;
        let mapping = Mapping {
            username_claim: m.username.claim.clone(),
            username_prefix: m.username.prefix.clone().unwrap_or_default(),
            groups_claim: m.groups.claim.clone(),
            groups_prefix: m.groups.prefix.clone().unwrap_or_default(),
            uid_claim: m.uid.claim.clone(),
            extra: m
                .extra
                .iter()
                .filter_map(|e| claim_selection(&e.value_expression).map(|c| (e.key.clone(), c)))
                .collect(),
            required_claims: config
                .claim_validation_rules
                .iter()
                .filter(|r| !r.claim.is_empty())
                .map(|r| (r.claim.clone(), r.required_value.clone()))
                .collect(),
        };
        JwtAuthenticator {
            issuer: config.issuer.url.clone(),
            audiences: config.issuer.audiences.clone(),
            mapping,
            source,
            state: RwLock::new(state),
            refresh_lock: tokio::sync::Mutex::new(()),
            min_refresh_interval: MIN_REFRESH_INTERVAL,
        }
    }

    /// The issuer URL tokens must carry as `iss`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Loads the keys now (discovery + JWKS, or the file), so configuration problems show
    /// at start-up instead of on the first token. A failure is not fatal: tokens retry
    /// discovery later, as kube keeps polling.
    pub async fn prefetch_keys(&self) -> Result<(), String> {
        if self.snapshot().2 {
            return Ok(());
        }
        self.refresh(None).await.map(|_| ())
    }

    #[cfg(test)]
    fn set_min_refresh_interval(&mut self, interval: Duration) {
        self.min_refresh_interval = interval;
    }

    /// `(keys, generation, loaded)`.
    fn snapshot(&self) -> (Arc<Vec<VerifyKey>>, u64, bool) {
        match self.state.read() {
            Ok(state) => (state.keys.clone(), state.generation, state.loaded),
            Err(poisoned) => {
                let state = poisoned.into_inner();
                (state.keys.clone(), state.generation, state.loaded)
            }
        }
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut KeyState) -> R) -> R {
        match self.state.write() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Reloads the key set unless someone else already did since `seen_generation`, or the
    /// last attempt was less than the refresh interval ago. Returns the keys to use next
    /// (`None`: nothing new).
    async fn refresh(
        &self,
        seen_generation: Option<u64>,
    ) -> Result<Option<Arc<Vec<VerifyKey>>>, String> {
        if matches!(self.source, KeySource::Fixed) {
            return Ok(None);
        }
        let _guard = self.refresh_lock.lock().await;
        let (keys, generation, loaded, last_attempt, last_error) = {
            let state = match self.state.read() {
                Ok(state) => state,
                Err(poisoned) => poisoned.into_inner(),
            };
            (
                state.keys.clone(),
                state.generation,
                state.loaded,
                state.last_attempt,
                state.last_error.clone(),
            )
        };
        // Someone else loaded keys while we waited: use theirs (a first load has seen
        // nothing, so any loaded set is new to it).
        if loaded && seen_generation.is_none_or(|seen| seen != generation) {
            return Ok(Some(keys));
        }
        if let Some(at) = last_attempt {
            if at.elapsed() < self.min_refresh_interval {
                return if loaded {
                    Ok(None)
                } else {
                    Err(format!(
                        "oidc: authenticator not initialized: {}",
                        last_error.unwrap_or_else(|| "keys not loaded yet".to_string())
                    ))
                };
            }
        }
        self.with_state(|s| s.last_attempt = Some(tokio::time::Instant::now()));
        match self.load_keys().await {
            Ok(new_keys) => {
                let new_keys = Arc::new(new_keys);
                self.with_state(|s| {
                    s.keys = new_keys.clone();
                    s.generation += 1;
                    s.loaded = true;
                    s.last_error = None;
                });
                Ok(Some(new_keys))
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "oidc: cannot load the issuer's keys");
                self.with_state(|s| s.last_error = Some(e.clone()));
                if loaded {
                    // Keep serving with the keys we have.
                    Ok(None)
                } else {
                    Err(format!("oidc: authenticator not initialized: {e}"))
                }
            }
        }
    }

    async fn load_keys(&self) -> Result<Vec<VerifyKey>, String> {
        match &self.source {
            KeySource::Fixed => Err("fixed key set".to_string()),
            KeySource::File(path) => {
                read_jwks_file(path).map_err(|e| format!("jwksFile {}: {e}", path.display()))
            }
            KeySource::Discovery {
                client,
                discovery_url,
                jwks_uri,
            } => {
                let uri = jwks_uri
                    .get_or_try_init(|| async {
                        let document = get_json(client, discovery_url).await?;
                        let issuer = document.get("issuer").and_then(Value::as_str).unwrap_or_default();
                        if issuer != self.issuer {
                            return Err(format!(
                                "oidc: issuer did not match the issuer returned by provider, expected {:?} got {issuer:?}",
                                self.issuer
                            ));
                        }
                        document
                            .get("jwks_uri")
                            .and_then(Value::as_str)
                            .filter(|u| !u.is_empty())
                            .map(str::to_string)
                            .ok_or_else(|| format!("{discovery_url}: discovery document has no jwks_uri"))
                    })
                    .await?;
                let document = get_json(client, uri).await?;
                parse_jwks(&document).map_err(|e| format!("{uri}: {e}"))
            }
        }
    }

    /// Verifies the signature with the key set, refreshing it once (rate limited) when no
    /// key verifies. Returns the claims.
    async fn verify_signature(
        &self,
        token: &str,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<Map<String, Value>, String> {
        let (mut keys, mut generation, loaded) = self.snapshot();
        if !loaded {
            match self.refresh(None).await? {
                Some(fresh) => keys = fresh,
                None => return Err("oidc: authenticator not initialized".to_string()),
            }
            generation = self.snapshot().1;
        }
        let first = try_keys(&keys, token, alg, kid);
        let error = match first {
            Ok(claims) => return Ok(claims),
            Err(error) => error,
        };
        // A key we do not hold (rotation) or a stale set: look again, but not too often.
        if let Some(fresh) = self.refresh(Some(generation)).await? {
            return try_keys(&fresh, token, alg, kid);
        }
        Err(error)
    }

    async fn verify(&self, token: &str) -> Result<TokenReviewResult, String> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("oidc: malformed jwt: {e}"))?;
        if !SUPPORTED_ALGORITHMS.contains(&header.alg) {
            return Err(format!(
                "oidc: id token signed with unsupported algorithm, expected {SUPPORTED_ALGORITHMS:?} got {:?}",
                header.alg
            ));
        }
        let claims = self
            .verify_signature(token, header.alg, header.kid.as_deref())
            .await?;
        let expires_at = self.check_standard_claims(&claims, SystemTime::now())?;
        let user = self.map_claims(&claims)?;
        Ok(TokenReviewResult {
            user: Arc::new(user),
            // Audience-agnostic, as kube's: the wrapper fills in the matched API audiences.
            audiences: Arc::new([]),
            expires_at: Some(expires_at),
        })
    }

    /// `iss`, `aud`, `exp`, `nbf` as go-oidc checks them; returns the expiry.
    fn check_standard_claims(
        &self,
        claims: &Map<String, Value>,
        now: SystemTime,
    ) -> Result<SystemTime, String> {
        let iss = claims
            .get("iss")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if iss != self.issuer {
            return Err(format!(
                "oidc: id token issued by a different provider, expected {:?} got {iss:?}",
                self.issuer
            ));
        }
        let token_audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(list)) => {
                let mut out = Vec::with_capacity(list.len());
                for a in list {
                    out.push(
                        a.as_str()
                            .ok_or_else(|| "oidc: malformed claim aud".to_string())?,
                    );
                }
                out
            }
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err("oidc: malformed claim aud".to_string()),
        };
        if !token_audiences
            .iter()
            .any(|a| self.audiences.iter().any(|want| want == a))
        {
            return Err(format!(
                "oidc: expected audience in {:?} got {token_audiences:?}",
                self.audiences
            ));
        }
        let now_secs = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        let exp = match claims.get("exp") {
            Some(Value::Number(n)) => n
                .as_f64()
                .ok_or_else(|| "oidc: malformed claim exp".to_string())?,
            None | Some(Value::Null) => 0.0,
            Some(_) => return Err("oidc: malformed claim exp".to_string()),
        };
        // go-oidc treats a missing exp as the zero time, which is always in the past.
        if exp < now_secs {
            return Err(format!(
                "oidc: token is expired (Token Expiry: {})",
                format_time(exp)
            ));
        }
        match claims.get("nbf") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) => {
                let nbf = n
                    .as_f64()
                    .ok_or_else(|| "oidc: malformed claim nbf".to_string())?;
                if now_secs + NBF_LEEWAY_SECS < nbf {
                    return Err(format!(
                        "oidc: current time {} before the nbf (not before) time: {}",
                        format_time(now_secs),
                        format_time(nbf)
                    ));
                }
            }
            Some(_) => return Err("oidc: malformed claim nbf".to_string()),
        }
        let expires_at = UNIX_EPOCH
            .checked_add(Duration::from_secs_f64(exp.clamp(0.0, 1e12)))
            .unwrap_or(now);
        Ok(expires_at)
    }

    /// Claims to user, then the required claims, as kube's `AuthenticateToken`.
    fn map_claims(&self, claims: &Map<String, Value>) -> Result<UserInfo, String> {
        let m = &self.mapping;
        let username = string_claim(claims, &m.username_claim)
            .map_err(|e| format!("oidc: parse username claims {:?}: {e}", m.username_claim))?;
        if m.username_claim == "email" {
            // OIDC: an e-mail address is an identity only once the provider verified it.
            match claims.get("email_verified") {
                None => {}
                Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => return Err("oidc: email not verified".to_string()),
                Some(_) => {
                    return Err("oidc: parse 'email_verified' claim: not a boolean".to_string())
                }
            }
        }
        let mut user = UserInfo {
            name: format!("{}{username}", m.username_prefix),
            ..Default::default()
        };
        if !m.groups_claim.is_empty() {
            if let Some(value) = claims.get(&m.groups_claim) {
                let groups = string_or_array(value)
                    .map_err(|e| format!("oidc: parse groups claim {:?}: {e}", m.groups_claim))?;
                user.groups = groups
                    .into_iter()
                    .map(|g| format!("{}{g}", m.groups_prefix))
                    .collect();
            }
        }
        if !m.uid_claim.is_empty() {
            user.uid = string_claim(claims, &m.uid_claim)
                .map_err(|e| format!("oidc: parse uid claim {:?}: {e}", m.uid_claim))?;
        }
        let mut extra = BTreeMap::new();
        for (key, claim) in &m.extra {
            let values = match claims.get(claim) {
                None => {
                    return Err(format!(
                        "oidc: error evaluating extra claim expression: claims.{claim}: no such key: {claim}"
                    ))
                }
                Some(Value::Null) => Vec::new(),
                Some(value) => string_or_array(value)
                    .map_err(|_| {
                        format!(
                            "oidc: error evaluating extra claim expression: claims.{claim}: expression must return a string or a list of strings"
                        )
                    })?
                    .into_iter()
                    .filter(|v| !v.is_empty())
                    .collect(),
            };
            if !values.is_empty() {
                extra.insert(key.clone(), values);
            }
        }
        user.extra = extra;
        for (claim, want) in &m.required_claims {
            let Some(value) = claims.get(claim) else {
                return Err(format!(
                    "oidc: required claim {claim} not present in ID token"
                ));
            };
            let Some(got) = value.as_str() else {
                return Err(format!("oidc: parse claim {claim}: not a string"));
            };
            if got != want {
                return Err(format!(
                    "oidc: required claim {claim} value does not match. Got = {got}, want = {want}"
                ));
            }
        }
        Ok(user)
    }
}

impl KeyState {
    fn empty() -> KeyState {
        KeyState {
            keys: Arc::new(Vec::new()),
            generation: 0,
            loaded: false,
            last_attempt: None,
            last_error: None,
        }
    }

    fn loaded(keys: Vec<VerifyKey>) -> KeyState {
        KeyState {
            keys: Arc::new(keys),
            generation: 1,
            loaded: true,
            last_attempt: Some(tokio::time::Instant::now()),
            last_error: None,
        }
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for JwtAuthenticator {
    fn name(&self) -> &'static str {
        "jwt"
    }

    async fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
        if untrusted_issuer(token).as_deref() != Some(self.issuer.as_str()) {
            return TokenOutcome::NotMine;
        }
        match self.verify(token).await {
            Ok(result) => TokenOutcome::Authenticated(result),
            Err(e) => {
                tracing::debug!(issuer = %self.issuer, error = %e, "jwt: token rejected");
                TokenOutcome::Invalid(e)
            }
        }
    }
}

/// The `iss` of a compact JWT, read without verifying anything (only to pick the issuer).
/// Like kube, Google's legacy bare issuer is read as its URL.
fn untrusted_issuer(token: &str) -> Option<String> {
    if token.trim_start().starts_with('{') {
        return None;
    }
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    let iss = claims.get("iss")?.as_str()?;
    if iss == "accounts.google.com" {
        return Some("https://accounts.google.com".to_string());
    }
    Some(iss.to_string())
}

/// Verifies with every key that may have signed (`kid` match, or all keys when the token
/// names none; key type fits `alg`; the JWK's own `alg`, if any, equals it).
fn try_keys(
    keys: &[VerifyKey],
    token: &str,
    alg: Algorithm,
    kid: Option<&str>,
) -> Result<Map<String, Value>, String> {
    let mut validation = Validation::new(alg);
    // Only the signature here; claims are checked afterwards with kube's rules.
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.leeway = 0;
    let mut tried = 0;
    let mut last_error = None;
    for key in keys {
        if kid.is_some() && key.kid.as_deref() != kid {
            continue;
        }
        if !key.kind.fits(alg) || key.alg.is_some_and(|a| a != alg) {
            continue;
        }
        tried += 1;
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
            Ok(data) => return Ok(data.claims),
            Err(e) => last_error = Some(e),
        }
    }
    match (tried, last_error) {
        (0, _) => Err(match kid {
            Some(kid) => format!(
                "oidc: verify token: no {alg:?} key with kid {kid:?} in the issuer's key set"
            ),
            None => format!("oidc: verify token: no {alg:?} key in the issuer's key set"),
        }),
        (_, Some(e)) => Err(match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => {
                "oidc: verify token: failed to verify signature".to_string()
            }
            _ => format!("oidc: verify token: {e}"),
        }),
        (_, None) => Err("oidc: verify token: failed to verify signature".to_string()),
    }
}

fn string_claim(claims: &Map<String, Value>, name: &str) -> Result<String, String> {
    match claims.get(name) {
        None => Err("claim not present".to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("claim is not a string: {}", type_name(other))),
    }
}

/// A string claim or an array of strings (kube accepts a single string as one group).
fn string_or_array(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("array item is not a string: {}", type_name(item)))
            })
            .collect(),
        other => Err(format!(
            "not a string or an array of strings: {}",
            type_name(other)
        )),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn format_time(secs: f64) -> String {
    chrono::DateTime::from_timestamp(secs as i64, 0)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| secs.to_string())
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    let mut response = client
        .get(url)
        .timeout(FETCH_TIMEOUT)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {}", crate::https::error_chain(&e)))?;
    let status = response.status();
    let body = read_body_capped(&mut response, MAX_DOCUMENT_BYTES)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{url}: {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: invalid JSON: {e}"))
}

/// Test helpers shared with the webhook tests: signing keys and a tiny HTTPS server.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod test_support {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    use rustls::pki_types::CertificateDer;

    /// A 2048-bit RSA key for RS256 tests (ring cannot generate RSA keys).
    pub(crate) const RSA_PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\n\
MIIEowIBAAKCAQEAycVEaaKQe8oKy2HC1RM5SSv60FWY7aXzZUoYVSZmrWPcz5i4\n\
zGeT2/040+hiCKGiwHgxNEZgCe1inl/aqJB+hOcOxwFQKxlXJp5m4ct0TveW0W0R\n\
5056YOgkBRx+vCQgiPXv/myjdS7Z8yBdpJgCf5niUyz+dW8TrBnh+QIsHMaWzQ3O\n\
A7iSsUMkrTA85d6qfGbyw8RcsHJrHUj53NDwb+2AC1AGRnbvwAUXi1bFnfDwfrFz\n\
5wHBC1yAGd5v22yNKadNFLpoB034VdP6pOal8Fd1KJiThqN1gBDEPj1HOd08zXuP\n\
XUWWcu1TdlTqUuWBHbUhckkmbcmTldnRTSyszwIDAQABAoIBABF+DmJnS0X+hahz\n\
oMVocowP8CFb3zOKZbGpCbc0HZNRqyTwruP1safRHVPULs+XWvmuhRS5nZdIVi24\n\
NK47D+Tr9s5OirzTaEiH7UNAQfFoqjgcz+akP8+jJu0Ug9fblloZX3jIwidyH0ev\n\
M78fXwDhMYuX3oJsb1TfzfhddYwtWejFhxwEEPjMLiLY9kaxFIrFDv+ZTifQzKI4\n\
9n0wl73bNtDBZzv9MueYxgp78gqFGSEZxjq3IzoW5UW8E0HUN/oor/9KgowyaY2y\n\
BLgBvsH2eimpT5UMPvhtv4MMT3GcR1CoW8zDtpID69hxTjHYKNd5sUbxGhWxUjl3\n\
DVNFvPECgYEA6px06bAi9Ui2zRHSSN253qnJNuBNwB6rWGg0NDtx3+KVEDs4iXsD\n\
ELi05G+ovaJ/Gni38tQ1IXsIjshYz8EVyvgQGtVoxfzTrWxtB4GH/mHb/GGZn3Wm\n\
wcoko8xywutWrIL9gVe+ht8DmIRvSr2HAfYgWcFMZWmDrt0jVL19qVECgYEA3CpZ\n\
xcIGSzeXbLlNjAUb3m75Av/SbkElUQLXLuKvy9e0dTP6ReSpFW9dPxYOrDPpqtBU\n\
ZW1NWoNHRRUaXPxi2gC4DJy8L7aQwp+HLs94iW04PuU8HJjQgmNQa/ErqPIz9aiQ\n\
PwUcyuDRCnMSqkTLvgxLC+fwkJuWZDJ+aL1XbB8CgYBwzc9s+TKly1ORoGsCfBG9\n\
nNdRmmHn6Rcrx9ap8pcbNd/EUSUq/UmJBbZ8S6/Plk0U1kxj5mKxeW2w8WW6ZrVq\n\
xQFBVbEt2RWSQhreTAquZjEW1Xq+8BvA+8fINipLzEn9YnIveZfzU1FwSOUWA7Dh\n\
YY1GeqmX7TbSoiM1wHKmMQKBgDnzI8H7ufBeZ4sEkzbBuX4os35om5jNqObT2pPK\n\
sv7yfdtDnSJ8d0zfDSonwiDtYRnG0BAKXwvt9fpm/ZNwEwzSl58qOhZM9XlkyA44\n\
Kb/ycZWMfPACAQ/w2CAxUI6dgbOtdJpB3DxCRIN9mnIavY3+alpt6FIHweQJrmAf\n\
Rj19AoGBAKJUTmzTibndvJeVJcbIaO2x9S8yhMeKwV59smLQkv09vv/EZ2BlB+90\n\
ImbrpLRSFTx7Tpz71VY/lTp0rsxMpg7L5UmOwgsahIgxjU8YDXHbpWg5g1r/wgig\n\
076tYxd93aBkNDaZGWrb1SZtgnjj/tbclqW9z2f8MXrOIrxgapG2\n\
-----END RSA PRIVATE KEY-----";

    /// A test CA that signs server and client certificates.
    pub(crate) struct TestCa {
        pub pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    pub(crate) fn ca(name: &str) -> TestCa {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        TestCa {
            pem: certificate.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    impl TestCa {
        /// A leaf certificate for `names` (IPs become IP SANs): (cert PEM, key PEM).
        pub(crate) fn leaf(&self, cn: &str, names: &[&str]) -> (String, String) {
            let mut params =
                CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                    .unwrap();
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, cn);
            let key = KeyPair::generate().unwrap();
            let certificate = params.signed_by(&key, &self.issuer).unwrap();
            (certificate.pem(), key.serialize_pem())
        }
    }

    /// One request the test server received.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Recorded {
        pub method: String,
        pub path: String,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
        pub client_cert: bool,
        /// `https://127.0.0.1:<port>`.
        pub base_url: String,
    }

    impl Recorded {
        pub(crate) fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    pub(crate) type Handler = Arc<dyn Fn(&Recorded) -> (u16, String) + Send + Sync>;

    /// An HTTPS/1.1 server on a loopback port, one thread per connection, answering every
    /// request with `handler` and recording it.
    pub(crate) struct TestServer {
        pub url: String,
        pub ca_pem: String,
        pub requests: Arc<Mutex<Vec<Recorded>>>,
        stop: Arc<AtomicBool>,
        port: u16,
    }

    impl TestServer {
        pub(crate) fn start(handler: Handler, client_ca: Option<&TestCa>) -> TestServer {
            Self::start_with_ca(&ca("test server CA"), handler, client_ca)
        }

        pub(crate) fn start_with_ca(
            server_ca: &TestCa,
            handler: Handler,
            client_ca: Option<&TestCa>,
        ) -> TestServer {
            let (cert_pem, key_pem) = server_ca.leaf("127.0.0.1", &["127.0.0.1", "localhost"]);
            let chain: Vec<CertificateDer<'static>> =
                rustls_pemfile::certs(&mut cert_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap();
            let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
                .unwrap()
                .unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .unwrap();
            let builder = match client_ca {
                Some(client_ca) => {
                    let roots =
                        crate::https::root_store_from_pem(client_ca.pem.as_bytes()).unwrap();
                    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                        Arc::new(roots),
                        provider,
                    )
                    .build()
                    .unwrap();
                    builder.with_client_cert_verifier(verifier)
                }
                None => builder.with_no_client_auth(),
            };
            let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let url = format!("https://127.0.0.1:{port}");
            let requests = Arc::new(Mutex::new(Vec::new()));
            let stop = Arc::new(AtomicBool::new(false));
            {
                let (requests, stop, url) = (requests.clone(), stop.clone(), url.clone());
                std::thread::spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(stream) = stream else { continue };
                        let (config, handler, requests, url) = (
                            config.clone(),
                            handler.clone(),
                            requests.clone(),
                            url.clone(),
                        );
                        std::thread::spawn(move || {
                            let _ = serve_connection(stream, config, handler, requests, url);
                        });
                    }
                });
            }
            TestServer {
                url,
                ca_pem: server_ca.pem.clone(),
                requests,
                stop,
                port,
            }
        }

        pub(crate) fn count(&self, path: &str) -> usize {
            self.requests
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r.path == path)
                .count()
        }
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            // Wake the accept loop so it sees the flag.
            let _ = TcpStream::connect(("127.0.0.1", self.port));
        }
    }

    fn serve_connection(
        stream: TcpStream,
        config: Arc<rustls::ServerConfig>,
        handler: Handler,
        requests: Arc<Mutex<Vec<Recorded>>>,
        base_url: String,
    ) -> std::io::Result<()> {
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        let connection = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
        let mut tls = rustls::StreamOwned::new(connection, stream);
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        let header_end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            let n = tls.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_string();
        let mut parts = request_line.split(' ');
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = buffer[header_end + 4..].to_vec();
        while body.len() < length {
            let n = tls.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        let recorded = Recorded {
            method,
            path,
            headers,
            body,
            client_cert: tls.conn.peer_certificates().is_some(),
            base_url,
        };
        requests.lock().unwrap().push(recorded.clone());
        let (status, text) = handler(&recorded);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
        tls.write_all(response.as_bytes())?;
        tls.conn.send_close_notify();
        tls.flush()?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::test_support::*;
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;
    use std::sync::Mutex;

    const ISSUER: &str = "https://issuer.example.com";

    // ---- configuration -------------------------------------------------------------

    fn parse(text: &str) -> Result<AuthenticationConfiguration, String> {
        AuthenticationConfiguration::parse(text, Path::new("/etc/kubegate"), &[])
    }

    fn config_with(jwt_entry: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n{jwt_entry}"
        )
    }

    const MINIMAL: &str = "- issuer:\n    url: https://issuer.example.com\n    audiences: [kubegate]\n  claimMappings:\n    username: {claim: sub, prefix: \"oidc:\"}\n";

    #[test]
    fn parses_a_full_configuration() {
        let text = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://issuer.example.com
    discoveryURL: https://internal.example.com/discovery
    audiences: [a, b]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  claimMappings:
    username: {claim: email, prefix: ""}
    groups: {claim: groups, prefix: "oidc:"}
    uid: {claim: sub}
    extra:
    - key: example.com/tenant
      valueExpression: claims.tenant
    - key: example.com/team
      valueExpression: 'claims["team-name"]'
anonymous:
  enabled: true
  conditions:
  - path: /healthz
"#;
        let config = parse(text).unwrap();
        assert_eq!(config.jwt.len(), 1);
        let jwt = &config.jwt[0];
        assert_eq!(
            jwt.issuer.discovery_url,
            "https://internal.example.com/discovery"
        );
        assert_eq!(jwt.issuer.audiences, vec!["a", "b"]);
        assert_eq!(jwt.claim_mappings.username.prefix.as_deref(), Some(""));
        assert_eq!(jwt.claim_validation_rules[0].required_value, "example.com");
        let anonymous = config.anonymous.as_ref().unwrap();
        assert!(anonymous.allows("/healthz"));
        assert!(!anonymous.allows("/api"));
        assert_eq!(claim_selection("claims.tenant").as_deref(), Some("tenant"));
        assert_eq!(
            claim_selection("claims[\"team-name\"]").as_deref(),
            Some("team-name")
        );
        assert_eq!(claim_selection(" claims . x ").as_deref(), Some("x"));
        assert_eq!(claim_selection("claims.a + 'x'"), None);
        assert_eq!(claim_selection("claims.a.b"), None);
        assert_eq!(claim_selection("user.name"), None);
    }

    #[test]
    fn accepts_every_api_version_and_json() {
        for version in SUPPORTED_API_VERSIONS {
            let text = format!(
                "{{\"apiVersion\": \"{version}\", \"kind\": \"AuthenticationConfiguration\", \"jwt\": [{{\"issuer\": {{\"url\": \"https://i.example\", \"audiences\": [\"x\"]}}, \"claimMappings\": {{\"username\": {{\"claim\": \"sub\", \"prefix\": \"\"}}}}}}]}}"
            );
            parse(&text).unwrap();
        }
        // No issuers at all is valid (kube allows adding them later).
        parse("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n")
            .unwrap();
        parse("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n")
            .unwrap();
    }

    #[test]
    fn rejects_wrong_kind_version_and_unknown_fields() {
        let err = parse("apiVersion: v1\nkind: Config\n").unwrap_err();
        assert!(
            err.contains("apiVersion: Unsupported value: \"v1\""),
            "{err}"
        );
        assert!(err.contains("kind: Unsupported value: \"Config\""), "{err}");
        assert!(err.starts_with('['), "several errors are aggregated: {err}");
        let err = parse(&config_with(
            "- issuer:\n    url: https://i.example\n    audiences: [x]\n    jwksUri: https://x\n  claimMappings:\n    username: {claim: sub, prefix: \"\"}\n",
        ))
        .unwrap_err();
        assert!(err.contains("unknown field `jwksUri`"), "{err}");
        assert!(err.contains("jwt[0].issuer"), "{err}");
    }

    #[test]
    fn issuer_url_rules_name_the_field() {
        let check = |url: &str, want: &str| {
            let err = parse(&config_with(
                &MINIMAL.replace("https://issuer.example.com", url),
            ))
            .unwrap_err();
            assert!(err.contains(want), "{url}: {err}");
        };
        check("http://issuer.example.com", "jwt[0].issuer.url: Invalid value: \"http://issuer.example.com\": URL scheme must be https");
        check(
            "https://u:p@issuer.example.com",
            "URL must not contain a username or password",
        );
        check(
            "https://issuer.example.com?x=1",
            "URL must not contain a query",
        );
        check(
            "https://issuer.example.com#f",
            "URL must not contain a fragment",
        );
        let err = parse(&config_with(
            &MINIMAL.replace("url: https://issuer.example.com\n", ""),
        ))
        .unwrap_err();
        assert_eq!(err, "jwt[0].issuer.url: Required value");
        let err = AuthenticationConfiguration::parse(
            &config_with(MINIMAL),
            Path::new("/"),
            &[ISSUER.to_string()],
        )
        .unwrap_err();
        assert!(
            err.contains("URL must not overlap with disallowed issuers"),
            "{err}"
        );
        let err = parse(&config_with(&MINIMAL.replace(
            "    audiences:",
            "    discoveryURL: https://issuer.example.com/\n    audiences:",
        )))
        .unwrap_err();
        assert!(err.contains("jwt[0].issuer.discoveryURL: Invalid value: \"https://issuer.example.com/\": discoveryURL must be different from URL"), "{err}");
        let twice = format!("{MINIMAL}{MINIMAL}");
        let err = parse(&config_with(&twice)).unwrap_err();
        assert_eq!(
            err,
            "jwt[1].issuer.url: Duplicate value: \"https://issuer.example.com\""
        );
    }

    #[test]
    fn audience_rules() {
        let err = parse(&config_with(
            &MINIMAL.replace("    audiences: [kubegate]\n", ""),
        ))
        .unwrap_err();
        assert_eq!(
            err,
            "jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required"
        );
        let err = parse(&config_with(&MINIMAL.replace("[kubegate]", "[a, b]"))).unwrap_err();
        assert!(err.contains("jwt[0].issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences"), "{err}");
        let err = parse(&config_with(
            &MINIMAL.replace("[kubegate]", "[a, a]\n    audienceMatchPolicy: MatchAny"),
        ))
        .unwrap_err();
        assert_eq!(err, "jwt[0].issuer.audiences[1]: Duplicate value: \"a\"");
        let err = parse(&config_with(
            &MINIMAL.replace("[kubegate]", "[a]\n    audienceMatchPolicy: MatchAll"),
        ))
        .unwrap_err();
        assert!(
            err.contains("must be empty or MatchAny for single audience"),
            "{err}"
        );
    }

    #[test]
    fn claim_mapping_rules() {
        let err = parse(&config_with(&MINIMAL.replace(", prefix: \"oidc:\"", ""))).unwrap_err();
        assert_eq!(err, "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing");
        let err = parse(&config_with(&MINIMAL.replace(
            "{claim: sub, prefix: \"oidc:\"}",
            "{expression: 'claims.sub'}",
        )))
        .unwrap_err();
        assert_eq!(err, format!("jwt[0].claimMappings.username.expression: Invalid value: \"claims.sub\": {CEL_UNSUPPORTED}; use claim and prefix"));
        let err = parse(&config_with(&MINIMAL.replace(
            "    username: {claim: sub, prefix: \"oidc:\"}\n",
            "    groups: {claim: g, prefix: \"\"}\n",
        )))
        .unwrap_err();
        assert_eq!(
            err,
            "jwt[0].claimMappings.username: Required value: claim or expression is required"
        );
        let err = parse(&config_with(&format!(
            "{MINIMAL}    groups: {{claim: g}}\n    uid: {{expression: claims.sub}}\n"
        )))
        .unwrap_err();
        assert!(
            err.contains("jwt[0].claimMappings.groups.prefix: Required value"),
            "{err}"
        );
        assert!(err.contains(&format!("jwt[0].claimMappings.uid.expression: Invalid value: \"claims.sub\": {CEL_UNSUPPORTED}")), "{err}");
    }

    #[test]
    fn cel_rules_are_refused_clearly() {
        let text = format!(
            "{MINIMAL}  claimValidationRules:\n  - expression: claims.hd == 'x'\n  - claim: a\n    requiredValue: b\n    message: m\n  userValidationRules:\n  - expression: \"!user.username.startsWith('system:')\"\n"
        );
        let err = parse(&config_with(&text)).unwrap_err();
        assert!(err.contains(&format!("jwt[0].claimValidationRules[0].expression: Invalid value: \"claims.hd == 'x'\": {CEL_UNSUPPORTED}")), "{err}");
        assert!(err.contains("jwt[0].claimValidationRules[1].message: Invalid value: \"m\": may not be specified when claim is set"), "{err}");
        assert!(err.contains(&format!("jwt[0].userValidationRules[0].expression: Invalid value: \"!user.username.startsWith('system:')\": {CEL_UNSUPPORTED}")), "{err}");
    }

    #[test]
    fn extra_mapping_rules() {
        let extra = |key: &str, expr: &str| {
            format!("{MINIMAL}    extra:\n    - key: {key}\n      valueExpression: \"{expr}\"\n")
        };
        parse(&config_with(&extra("example.com/tenant", "claims.tenant"))).unwrap();
        let err = parse(&config_with(&extra("tenant", "claims.tenant"))).unwrap_err();
        assert!(err.contains("jwt[0].claimMappings.extra[0].key: Invalid value: \"tenant\": must be a domain-prefixed path"), "{err}");
        let err = parse(&config_with(&extra("example.com/Tenant", "claims.tenant"))).unwrap_err();
        assert!(err.contains("must be lowercase"), "{err}");
        let err = parse(&config_with(&extra("sub.k8s.io/x", "claims.tenant"))).unwrap_err();
        assert!(err.contains("reserved for Kubernetes use"), "{err}");
        let err = parse(&config_with(&extra("example.com/x", "claims.a + claims.b"))).unwrap_err();
        assert!(
            err.contains("jwt[0].claimMappings.extra[0].valueExpression: Invalid value"),
            "{err}"
        );
        assert!(err.contains(CEL_UNSUPPORTED), "{err}");
    }

    #[test]
    fn anonymous_and_egress_rules() {
        let err = parse("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous:\n  enabled: false\n  conditions: [{path: /livez}]\n").unwrap_err();
        assert_eq!(err, "anonymous.conditions: Invalid value: \"/livez\": enabled should be set to true when conditions are defined");
        let config = parse("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous:\n  enabled: true\n").unwrap();
        assert!(config.anonymous.unwrap().allows("/anything"));
        let err = parse(&config_with(&MINIMAL.replace(
            "    audiences:",
            "    egressSelectorType: cluster\n    audiences:",
        )))
        .unwrap_err();
        assert!(err.contains("jwt[0].issuer.egressSelectorType"), "{err}");
        let err = parse(&config_with(&MINIMAL.replace(
            "    audiences:",
            "    certificateAuthority: not a pem\n    audiences:",
        )))
        .unwrap_err();
        assert!(
            err.contains("jwt[0].issuer.certificateAuthority: Invalid value: \"<omitted>\""),
            "{err}"
        );
    }

    #[test]
    fn jwks_file_extension() {
        let dir = tempfile::tempdir().unwrap();
        let (_, jwks) = rsa_key("k1");
        std::fs::write(dir.path().join("keys.json"), jwks.to_string()).unwrap();
        let text = config_with(&MINIMAL.replace(
            "    audiences:",
            "    x-kubegate:\n      jwksFile: keys.json\n    audiences:",
        ));
        let config = AuthenticationConfiguration::parse(&text, dir.path(), &[]).unwrap();
        assert_eq!(
            config.jwt[0]
                .issuer
                .kubegate
                .as_ref()
                .unwrap()
                .jwks_file
                .as_deref(),
            Some(dir.path().join("keys.json").as_path())
        );
        let err = AuthenticationConfiguration::parse(
            &text.replace("keys.json", "missing.json"),
            dir.path(),
            &[],
        )
        .unwrap_err();
        assert!(
            err.contains("jwt[0].issuer.x-kubegate.jwksFile: Invalid value:"),
            "{err}"
        );
        let err = AuthenticationConfiguration::parse(
            &text.replace(
                "    x-kubegate:",
                "    discoveryURL: https://d.example\n    x-kubegate:",
            ),
            dir.path(),
            &[],
        )
        .unwrap_err();
        assert!(err.contains("jwt[0].issuer.discoveryURL: Invalid value: \"https://d.example\": may not be specified when x-kubegate.jwksFile is set"), "{err}");
        let err = AuthenticationConfiguration::parse(
            &text.replace(
                "      jwksFile: keys.json\n",
                "      jwksFiles: keys.json\n",
            ),
            dir.path(),
            &[],
        )
        .unwrap_err();
        assert!(err.contains("unknown field `jwksFiles`"), "{err}");
        std::fs::write(
            dir.path().join("hmac.json"),
            json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}).to_string(),
        )
        .unwrap();
        let err = AuthenticationConfiguration::parse(
            &text.replace("keys.json", "hmac.json"),
            dir.path(),
            &[],
        )
        .unwrap_err();
        assert!(err.contains("no usable RSA or EC signing keys"), "{err}");
        // Loading from the file works end to end through load().
        let path = dir.path().join("authn.yaml");
        std::fs::write(&path, &text).unwrap();
        let config = AuthenticationConfiguration::load(&path, &[]).unwrap();
        assert_eq!(config.jwt_authenticators().unwrap().len(), 1);
    }

    // ---- tokens --------------------------------------------------------------------

    fn rsa_key(kid: &str) -> (EncodingKey, Value) {
        let key = EncodingKey::from_rsa_pem(RSA_PEM.as_bytes()).unwrap();
        let mut jwk = serde_json::to_value(
            jsonwebtoken::jwk::Jwk::from_encoding_key(&key, Algorithm::RS256).unwrap(),
        )
        .unwrap();
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        (key, json!({"keys": [jwk]}))
    }

    fn ec_key(kid: &str) -> (EncodingKey, Value) {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let key = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap();
        let mut jwk = serde_json::to_value(
            jsonwebtoken::jwk::Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap(),
        )
        .unwrap();
        jwk["kid"] = json!(kid);
        (key, json!({"keys": [jwk]}))
    }

    fn merge(a: &Value, b: &Value) -> Value {
        let mut keys = a["keys"].as_array().unwrap().clone();
        keys.extend(b["keys"].as_array().unwrap().iter().cloned());
        json!({ "keys": keys })
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn claims() -> Value {
        json!({
            "iss": ISSUER,
            "aud": "kubegate",
            "sub": "alice",
            "exp": now() + 600,
            "iat": now(),
            "groups": ["dev", "ops"],
        })
    }

    fn sign(key: &EncodingKey, alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_string);
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    fn jwt_config(extra_yaml: &str) -> JwtAuthenticatorConfig {
        let text = config_with(&format!("{MINIMAL}{extra_yaml}"));
        parse(&text).unwrap().jwt.remove(0)
    }

    fn authenticator(extra_yaml: &str, jwks: &Value) -> JwtAuthenticator {
        JwtAuthenticator::with_jwks(&jwt_config(extra_yaml), jwks).unwrap()
    }

    async fn outcome(a: &JwtAuthenticator, token: &str) -> TokenOutcome {
        a.authenticate_token(token, &["https://kubegate".to_string()])
            .await
    }

    fn user_of(outcome: TokenOutcome) -> TokenReviewResult {
        match outcome {
            TokenOutcome::Authenticated(result) => result,
            other => panic!("expected success, got {other:?}"),
        }
    }

    fn error_of(outcome: TokenOutcome) -> String {
        match outcome {
            TokenOutcome::Invalid(message) => message,
            other => panic!("expected rejection, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn rs256_token_maps_claims_to_user() {
        let (key, jwks) = rsa_key("k1");
        let a = authenticator(
            "    groups: {claim: groups, prefix: \"oidc:\"}\n    uid: {claim: sub}\n    extra:\n    - key: example.com/tenant\n      valueExpression: claims.tenant\n    - key: example.com/absent\n      valueExpression: claims.empty\n",
            &jwks,
        );
        let mut c = claims();
        c["tenant"] = json!(["t1", ""]);
        c["empty"] = json!("");
        let exp = c["exp"].as_u64().unwrap();
        let result = user_of(outcome(&a, &sign(&key, Algorithm::RS256, Some("k1"), &c)).await);
        assert_eq!(result.user.name, "oidc:alice");
        assert_eq!(result.user.uid, "alice");
        assert_eq!(result.user.groups, vec!["oidc:dev", "oidc:ops"]);
        assert_eq!(
            result.user.extra.get("example.com/tenant"),
            Some(&vec!["t1".to_string()])
        );
        assert!(!result.user.extra.contains_key("example.com/absent"));
        assert!(
            result.audiences.is_empty(),
            "audience-agnostic like kube's OIDC authenticator"
        );
        assert_eq!(
            result.expires_at,
            Some(UNIX_EPOCH + Duration::from_secs(exp))
        );
        // A token without kid is verified against every fitting key.
        user_of(outcome(&a, &sign(&key, Algorithm::RS256, None, &c)).await);
        // RS512 with the same RSA key (the JWK pins RS256, so it is refused).
        let err = error_of(outcome(&a, &sign(&key, Algorithm::RS512, Some("k1"), &c)).await);
        assert!(err.contains("no RS512 key"), "{err}");
    }

    #[tokio::test]
    async fn es256_and_group_string() {
        let (key, jwks) = ec_key("e1");
        let a = authenticator("    groups: {claim: role, prefix: \"\"}\n", &jwks);
        let mut c = claims();
        c["role"] = json!("admin");
        c["aud"] = json!(["other", "kubegate"]);
        let result = user_of(outcome(&a, &sign(&key, Algorithm::ES256, Some("e1"), &c)).await);
        assert_eq!(result.user.groups, vec!["admin"]);
        c["role"] = json!([1]);
        let err = error_of(outcome(&a, &sign(&key, Algorithm::ES256, Some("e1"), &c)).await);
        assert!(err.contains("oidc: parse groups claim \"role\""), "{err}");
    }

    #[tokio::test]
    async fn tokens_of_other_issuers_are_not_mine() {
        let (key, jwks) = rsa_key("k1");
        let a = authenticator("", &jwks);
        let mut c = claims();
        c["iss"] = json!("https://other.example.com");
        assert_eq!(
            outcome(&a, &sign(&key, Algorithm::RS256, Some("k1"), &c)).await,
            TokenOutcome::NotMine
        );
        assert_eq!(outcome(&a, "not-a-jwt").await, TokenOutcome::NotMine);
        assert_eq!(outcome(&a, "a.b.c").await, TokenOutcome::NotMine);
        assert_eq!(
            outcome(&a, "{\"iss\":\"https://issuer.example.com\"}").await,
            TokenOutcome::NotMine
        );
    }

    #[tokio::test]
    async fn time_and_audience_checks() {
        let (key, jwks) = rsa_key("k1");
        let a = authenticator("", &jwks);
        let token = |c: &Value| sign(&key, Algorithm::RS256, Some("k1"), c);
        let mut c = claims();
        c["exp"] = json!(now() - 5);
        assert!(error_of(outcome(&a, &token(&c)).await).contains("oidc: token is expired"));
        let mut c = claims();
        c.as_object_mut().unwrap().remove("exp");
        assert!(error_of(outcome(&a, &token(&c)).await).contains("expired"));
        let mut c = claims();
        c["exp"] = json!("soon");
        assert!(error_of(outcome(&a, &token(&c)).await).contains("malformed claim exp"));
        let mut c = claims();
        c["nbf"] = json!(now() + 300);
        assert!(error_of(outcome(&a, &token(&c)).await).contains("before the nbf"));
        c["nbf"] = json!(now() + 30);
        user_of(outcome(&a, &token(&c)).await);
        let mut c = claims();
        c["aud"] = json!("someone-else");
        let err = error_of(outcome(&a, &token(&c)).await);
        assert_eq!(
            err,
            "oidc: expected audience in [\"kubegate\"] got [\"someone-else\"]"
        );
        c.as_object_mut().unwrap().remove("aud");
        assert!(error_of(outcome(&a, &token(&c)).await).contains("expected audience"));
    }

    #[tokio::test]
    async fn dangerous_algorithms_are_refused() {
        let (key, jwks) = rsa_key("k1");
        let a = authenticator("", &jwks);
        let c = claims();
        // HS256 with a shared secret.
        let hs = sign(
            &EncodingKey::from_secret(b"secret"),
            Algorithm::HS256,
            Some("k1"),
            &c,
        );
        assert!(error_of(outcome(&a, &hs).await).contains("unsupported algorithm"));
        // HS256 "signed" with the RSA public key as the secret (key confusion).
        let n = jwks["keys"][0]["n"].as_str().unwrap();
        let confused = sign(
            &EncodingKey::from_secret(n.as_bytes()),
            Algorithm::HS256,
            Some("k1"),
            &c,
        );
        assert!(error_of(outcome(&a, &confused).await).contains("unsupported algorithm"));
        // alg none, unsigned.
        let b64 =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let none = format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "typ": "JWT"})),
            b64(&c)
        );
        assert!(error_of(outcome(&a, &none).await).contains("malformed jwt"));
        // A valid signature over different claims.
        let good = sign(&key, Algorithm::RS256, Some("k1"), &c);
        let parts: Vec<&str> = good.split('.').collect();
        let mut evil = c.clone();
        evil["sub"] = json!("admin");
        let forged = format!("{}.{}.{}", parts[0], b64(&evil), parts[2]);
        assert_eq!(
            error_of(outcome(&a, &forged).await),
            "oidc: verify token: failed to verify signature"
        );
        // Signed by a key not in the set, with its kid and with a known kid.
        let (other, _) = ec_key("e9");
        let err = error_of(outcome(&a, &sign(&other, Algorithm::ES256, Some("e9"), &c)).await);
        assert!(err.contains("no ES256 key with kid \"e9\""), "{err}");
        let (other_rsa, _) = ec_key("k1");
        let err = error_of(outcome(&a, &sign(&other_rsa, Algorithm::ES256, Some("k1"), &c)).await);
        assert!(err.contains("no ES256 key"), "{err}");
    }

    #[tokio::test]
    async fn email_claim_needs_verified_email() {
        let (key, jwks) = rsa_key("k1");
        let a =
            JwtAuthenticator::with_jwks(&jwt_config("").tap_username("email", ""), &jwks).unwrap();
        let token = |c: &Value| sign(&key, Algorithm::RS256, Some("k1"), c);
        let mut c = claims();
        c["email"] = json!("alice@example.com");
        assert_eq!(
            user_of(outcome(&a, &token(&c)).await).user.name,
            "alice@example.com"
        );
        c["email_verified"] = json!(true);
        user_of(outcome(&a, &token(&c)).await);
        c["email_verified"] = json!(false);
        assert_eq!(
            error_of(outcome(&a, &token(&c)).await),
            "oidc: email not verified"
        );
        c["email_verified"] = json!("true");
        assert!(error_of(outcome(&a, &token(&c)).await).contains("email_verified"));
        let mut c = claims();
        c["email"] = json!(5);
        assert!(error_of(outcome(&a, &token(&c)).await)
            .contains("oidc: parse username claims \"email\""));
    }

    trait TapUsername {
        fn tap_username(self, claim: &str, prefix: &str) -> Self;
    }

    impl TapUsername for JwtAuthenticatorConfig {
        fn tap_username(mut self, claim: &str, prefix: &str) -> Self {
            self.claim_mappings.username.claim = claim.to_string();
            self.claim_mappings.username.prefix = Some(prefix.to_string());
            self
        }
    }

    #[tokio::test]
    async fn required_and_missing_claims() {
        let (key, jwks) = rsa_key("k1");
        let a = authenticator(
            "    uid: {claim: oid}\n    extra:\n    - key: example.com/t\n      valueExpression: claims.tenant\n  claimValidationRules:\n  - claim: hd\n    requiredValue: example.com\n",
            &jwks,
        );
        let token = |c: &Value| sign(&key, Algorithm::RS256, Some("k1"), c);
        let mut c = claims();
        c["oid"] = json!("u-1");
        c["tenant"] = json!("t");
        c["hd"] = json!("example.com");
        user_of(outcome(&a, &token(&c)).await);
        c["hd"] = json!("evil.com");
        assert_eq!(
            error_of(outcome(&a, &token(&c)).await),
            "oidc: required claim hd value does not match. Got = evil.com, want = example.com"
        );
        c.as_object_mut().unwrap().remove("hd");
        assert_eq!(
            error_of(outcome(&a, &token(&c)).await),
            "oidc: required claim hd not present in ID token"
        );
        c["hd"] = json!("example.com");
        c["oid"] = json!(7);
        assert!(error_of(outcome(&a, &token(&c)).await).contains("oidc: parse uid claim \"oid\""));
        c["oid"] = json!("u-1");
        c.as_object_mut().unwrap().remove("tenant");
        assert!(error_of(outcome(&a, &token(&c)).await).contains("no such key: tenant"));
        c["tenant"] = json!({"a": 1});
        assert!(error_of(outcome(&a, &token(&c)).await)
            .contains("must return a string or a list of strings"));
        let mut c = claims();
        c.as_object_mut().unwrap().remove("sub");
        assert_eq!(
            error_of(outcome(&a, &token(&c)).await),
            "oidc: parse username claims \"sub\": claim not present"
        );
    }

    // ---- key sources ----------------------------------------------------------------

    /// A discovery + JWKS server whose key set can be swapped.
    fn oidc_server(jwks: Arc<Mutex<Value>>, issuer_override: Option<String>) -> TestServer {
        TestServer::start(
            Arc::new(move |r: &Recorded| match r.path.as_str() {
                "/.well-known/openid-configuration" | "/custom-discovery" => (
                    200,
                    json!({
                        "issuer": issuer_override.clone().unwrap_or_else(|| r.base_url.clone()),
                        "jwks_uri": format!("{}/jwks", r.base_url),
                    })
                    .to_string(),
                ),
                "/jwks" => (200, jwks.lock().unwrap().to_string()),
                _ => (404, "{}".to_string()),
            }),
            None,
        )
    }

    fn discovery_config(
        url: &str,
        ca_pem: &str,
        discovery_url: Option<&str>,
    ) -> JwtAuthenticatorConfig {
        JwtAuthenticatorConfig {
            issuer: IssuerConfig {
                url: url.to_string(),
                discovery_url: discovery_url.unwrap_or_default().to_string(),
                certificate_authority: ca_pem.to_string(),
                audiences: vec!["kubegate".to_string()],
                ..Default::default()
            },
            ..Default::default()
        }
        .tap_username("sub", "")
    }

    fn claims_for(issuer: &str) -> Value {
        let mut c = claims();
        c["iss"] = json!(issuer);
        c
    }

    #[tokio::test]
    async fn discovery_over_tls_with_key_rotation_rate_limited() {
        let (rsa, rsa_jwks) = rsa_key("k1");
        let (ec, ec_jwks) = ec_key("k2");
        let jwks = Arc::new(Mutex::new(rsa_jwks.clone()));
        let server = oidc_server(jwks.clone(), None);
        let mut a =
            JwtAuthenticator::new(&discovery_config(&server.url, &server.ca_pem, None)).unwrap();
        let c = claims_for(&server.url);
        let result = user_of(outcome(&a, &sign(&rsa, Algorithm::RS256, Some("k1"), &c)).await);
        assert_eq!(result.user.name, "alice");
        assert_eq!(server.count("/.well-known/openid-configuration"), 1);
        assert_eq!(server.count("/jwks"), 1);
        user_of(outcome(&a, &sign(&rsa, Algorithm::RS256, Some("k1"), &c)).await);
        assert_eq!(server.count("/jwks"), 1, "keys are cached");

        // The issuer rotates in a new key: the first token naming it would trigger a
        // refresh, but the last fetch was under 10 s ago.
        *jwks.lock().unwrap() = merge(&rsa_jwks, &ec_jwks);
        let new_token = sign(&ec, Algorithm::ES256, Some("k2"), &c);
        let err = error_of(outcome(&a, &new_token).await);
        assert!(err.contains("no ES256 key with kid \"k2\""), "{err}");
        assert_eq!(server.count("/jwks"), 1, "refreshes are rate limited");

        a.set_min_refresh_interval(Duration::ZERO);
        user_of(outcome(&a, &new_token).await);
        assert_eq!(server.count("/jwks"), 2);
        assert_eq!(
            server.count("/.well-known/openid-configuration"),
            1,
            "discovery is done once"
        );
        // Known keys do not refresh.
        user_of(outcome(&a, &sign(&rsa, Algorithm::RS256, Some("k1"), &c)).await);
        assert_eq!(server.count("/jwks"), 2);
        // Concurrent unknown kids share one refresh per failure round at most.
        let (stranger, _) = ec_key("k3");
        let bad = sign(&stranger, Algorithm::ES256, Some("k3"), &c);
        let (x, y) = tokio::join!(outcome(&a, &bad), outcome(&a, &bad));
        error_of(x);
        error_of(y);
        assert!(server.count("/jwks") <= 4);
    }

    #[tokio::test]
    async fn discovery_url_override_and_prefetch() {
        let (rsa, rsa_jwks) = rsa_key("k1");
        let server = oidc_server(Arc::new(Mutex::new(rsa_jwks)), None);
        let discovery = format!("{}/custom-discovery", server.url);
        let a = JwtAuthenticator::new(&discovery_config(
            &server.url,
            &server.ca_pem,
            Some(&discovery),
        ))
        .unwrap();
        // Concurrent first tokens share the first load; neither sees "not initialized".
        let token = sign(&rsa, Algorithm::RS256, Some("k1"), &claims_for(&server.url));
        let (x, y) = tokio::join!(outcome(&a, &token), outcome(&a, &token));
        user_of(x);
        user_of(y);
        assert_eq!(server.count("/custom-discovery"), 1);
        let a = JwtAuthenticator::new(&discovery_config(
            &server.url,
            &server.ca_pem,
            Some(&discovery),
        ))
        .unwrap();
        a.prefetch_keys().await.unwrap();
        assert_eq!(server.count("/custom-discovery"), 2);
        assert_eq!(server.count("/.well-known/openid-configuration"), 0);
        user_of(outcome(&a, &token).await);
        assert_eq!(server.count("/jwks"), 2);
    }

    #[tokio::test]
    async fn discovery_failures_are_rejections() {
        let (rsa, rsa_jwks) = rsa_key("k1");
        // The discovery document names another issuer.
        let server = oidc_server(
            Arc::new(Mutex::new(rsa_jwks.clone())),
            Some("https://evil.example".into()),
        );
        let a =
            JwtAuthenticator::new(&discovery_config(&server.url, &server.ca_pem, None)).unwrap();
        let token = sign(&rsa, Algorithm::RS256, Some("k1"), &claims_for(&server.url));
        let err = error_of(outcome(&a, &token).await);
        assert!(err.contains("issuer did not match"), "{err}");
        // Retried at most every 10 s.
        let err = error_of(outcome(&a, &token).await);
        assert!(err.contains("not initialized"), "{err}");
        assert_eq!(server.count("/.well-known/openid-configuration"), 1);

        // A server certificate from a CA the issuer config does not trust.
        let server = oidc_server(Arc::new(Mutex::new(rsa_jwks)), None);
        let other_ca = ca("someone else");
        let a = JwtAuthenticator::new(&discovery_config(&server.url, &other_ca.pem, None)).unwrap();
        let token = sign(&rsa, Algorithm::RS256, Some("k1"), &claims_for(&server.url));
        let err = error_of(outcome(&a, &token).await);
        assert!(err.contains("not initialized"), "{err}");
        assert!(a.prefetch_keys().await.is_err());
        assert_eq!(
            server.count("/.well-known/openid-configuration"),
            0,
            "TLS failed before any request"
        );
    }

    #[tokio::test]
    async fn jwks_file_is_reread_for_new_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys.json");
        let (rsa, rsa_jwks) = rsa_key("k1");
        let (ec, ec_jwks) = ec_key("k2");
        std::fs::write(&file, rsa_jwks.to_string()).unwrap();
        let mut config = jwt_config("");
        config.issuer.kubegate = Some(IssuerExtension {
            jwks_file: Some(file.clone()),
        });
        let mut a = JwtAuthenticator::new(&config).unwrap();
        user_of(outcome(&a, &sign(&rsa, Algorithm::RS256, Some("k1"), &claims())).await);
        std::fs::write(&file, merge(&rsa_jwks, &ec_jwks).to_string()).unwrap();
        a.set_min_refresh_interval(Duration::ZERO);
        user_of(outcome(&a, &sign(&ec, Algorithm::ES256, Some("k2"), &claims())).await);
        // A broken rewrite keeps the keys already loaded.
        std::fs::write(&file, "{").unwrap();
        user_of(outcome(&a, &sign(&ec, Algorithm::ES256, Some("k2"), &claims())).await);
    }

    #[test]
    fn jwks_parsing_skips_unusable_keys() {
        let (_, rsa) = rsa_key("r");
        let (_, ec) = ec_key("e");
        let mut enc = rsa["keys"][0].clone();
        enc["use"] = json!("enc");
        let mut hs = rsa["keys"][0].clone();
        hs["alg"] = json!("HS256");
        let mut wrong_alg = ec["keys"][0].clone();
        wrong_alg["alg"] = json!("RS256");
        let doc = json!({"keys": [enc, hs, wrong_alg, {"kty": "oct", "k": "AAAA"}, {"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}, rsa["keys"][0], ec["keys"][0]]});
        let keys = parse_jwks(&doc).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].kind, KeyKind::Rsa);
        assert_eq!(keys[1].kind, KeyKind::EcP256);
        assert!(parse_jwks(&json!({})).is_err());
    }
}

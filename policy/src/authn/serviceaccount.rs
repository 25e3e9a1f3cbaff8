//! ServiceAccount tokens, issued and checked the way kube-apiserver does it
//! (`pkg/serviceaccount`, `pkg/registry/core/serviceaccount/storage/token.go`).
//!
//! - [`SigningKey`]: the private key tokens are signed with (RSA → RS256, ECDSA P-256 → ES256,
//!   P-384 → ES384), loaded from PEM (PKCS#1, PKCS#8 or SEC1) or generated on first start by
//!   [`ensure_signing_key`]. Its `kid` is kube's: base64url(SHA-256(DER SubjectPublicKeyInfo)),
//!   so a key moved between kube and kubegate keeps its id.
//! - [`VerifyingKeys`]: every public key a token may be signed with (the signing key's public
//!   half plus `--service-account-key-file` style files: public keys, certificates or private
//!   keys).
//! - [`TokenIssuer`]: builds the bound-token claims of the TokenRequest API.
//! - [`ServiceAccountTokenAuthenticator`]: a [`TokenAuthenticator`] for our tokens, bound
//!   (issuer is ours) and legacy Secret-based (issuer `kubernetes/serviceaccount`); a token
//!   stays valid only while the ServiceAccount (and the object it is bound to) still exists
//!   with the same uid.
//! - [`openid_configuration`] and [`jwks`]: the OIDC discovery documents kube serves at
//!   [`OPENID_CONFIGURATION_PATH`] and [`JWKS_PATH`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use chrono::{DateTime, Utc};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::bearer::{TokenAuthenticator, TokenOutcome, TokenReviewResult};
use super::lookup::ObjectLookup;
use crate::user::UserInfo;

/// The issuer of the Secret-based tokens kube's token controller used to write.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// Where the OIDC provider configuration is served.
pub const OPENID_CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";
/// Where the JSON Web Key Set is served.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
/// `Content-Type` of the provider configuration.
pub const OPENID_CONFIGURATION_CONTENT_TYPE: &str = "application/json";
/// `Content-Type` of the key set.
pub const JWKS_CONTENT_TYPE: &str = "application/jwk-set+json";
/// `Cache-Control` of both discovery documents (kube: keys are static for an hour).
pub const DISCOVERY_CACHE_CONTROL: &str = "public, max-age=3600";

/// The shortest lifetime a TokenRequest may ask for (kube's `MinTokenAgeSec`).
pub const MIN_EXPIRATION_SECONDS: i64 = 10 * 60;
/// The longest lifetime a TokenRequest may ask for (2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// `spec.expirationSeconds` when a TokenRequest does not set it (v1 defaulting).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 60 * 60;

/// Prefix of every ServiceAccount user name: `system:serviceaccount:<ns>:<name>`.
pub const SERVICE_ACCOUNT_USERNAME_PREFIX: &str = "system:serviceaccount:";
/// The group of every ServiceAccount.
pub const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// Prefix of the per-namespace ServiceAccount group.
pub const SERVICE_ACCOUNT_GROUP_PREFIX: &str = "system:serviceaccounts:";
/// User extra: the pod a pod-bound token belongs to.
pub const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
/// User extra: the uid of that pod.
pub const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
/// User extra: the node of a node-bound token, or of the pod of a pod-bound one.
pub const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
/// User extra: the uid of that node.
pub const NODE_UID_KEY: &str = "authentication.kubernetes.io/node-uid";
/// User extra: which credential authenticated (`JTI=<jti>` for bound tokens).
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// go-jose's `DefaultLeeway`: clock skew tolerated on exp/nbf/iat and on deletions.
const LEEWAY_MS: i64 = 60_000;
/// The label kube's legacy-token cleaner puts on Secrets whose token it has invalidated.
const LEGACY_INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";
/// The label kube's legacy token authenticator keeps on a token Secret: the day (UTC) its
/// token last authenticated (`LastUsedLabelKey`).
pub const LEGACY_LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";

/// Go's `base64.RawURLEncoding` as kube uses it to peek at the unverified payload: no padding,
/// trailing bits tolerated.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// `system:serviceaccount:<namespace>:<name>`.
pub fn make_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{name}")
}

/// The groups of a ServiceAccount: `system:serviceaccounts` and
/// `system:serviceaccounts:<namespace>`.
pub fn make_group_names(namespace: &str) -> Vec<String> {
    vec![
        ALL_SERVICE_ACCOUNTS_GROUP.to_string(),
        format!("{SERVICE_ACCOUNT_GROUP_PREFIX}{namespace}"),
    ]
}

// ---------------------------------------------------------------------------------------
// DER: just enough to read PKCS#8 / SEC1 / SubjectPublicKeyInfo envelopes and to write the
// canonical SubjectPublicKeyInfo the key id is computed from.
// ---------------------------------------------------------------------------------------

const TAG_INTEGER: u8 = 0x02;
const TAG_BIT_STRING: u8 = 0x03;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_NULL: u8 = 0x05;
const TAG_OID: u8 = 0x06;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_CONTEXT_0: u8 = 0xa0;
const TAG_CONTEXT_1: u8 = 0xa1;

/// Contents (without tag and length) of the object identifiers used here.
const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

/// The order of the P-256 group: a private scalar must be in `[1, n-1]`.
const P256_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

/// One TLV: `(tag, contents, rest)`.
fn der_read(input: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    const TRUNCATED: &str = "malformed DER: truncated";
    let (&tag, rest) = input.split_first().ok_or(TRUNCATED)?;
    let (&first, rest) = rest.split_first().ok_or(TRUNCATED)?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return Err("malformed DER: bad length".into());
        }
        let (bytes, rest) = rest.split_at(count);
        let len = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, rest)
    };
    if rest.len() < len {
        return Err(TRUNCATED.into());
    }
    let (contents, rest) = rest.split_at(len);
    Ok((tag, contents, rest))
}

/// One TLV that must carry `tag`: `(contents, rest)`.
fn der_expect(input: &[u8], tag: u8) -> Result<(&[u8], &[u8]), String> {
    let (found, contents, rest) = der_read(input)?;
    if found != tag {
        return Err(format!(
            "malformed DER: found tag 0x{found:02x}, expected 0x{tag:02x}"
        ));
    }
    Ok((contents, rest))
}

fn der_tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

fn der_sequence(parts: &[&[u8]]) -> Vec<u8> {
    der_tlv(TAG_SEQUENCE, &parts.concat())
}

/// A non-negative INTEGER from big-endian magnitude bytes, minimally encoded.
fn der_unsigned(magnitude: &[u8]) -> Vec<u8> {
    let magnitude = strip_leading_zeros(magnitude);
    let mut contents = Vec::with_capacity(magnitude.len() + 1);
    if magnitude.first().is_none_or(|b| b & 0x80 != 0) {
        contents.push(0);
    }
    contents.extend_from_slice(magnitude);
    der_tlv(TAG_INTEGER, &contents)
}

fn der_bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut contents = Vec::with_capacity(bytes.len() + 1);
    contents.push(0); // no unused bits
    contents.extend_from_slice(bytes);
    der_tlv(TAG_BIT_STRING, &contents)
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().take_while(|b| **b == 0).count();
    &bytes[start..]
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Every PEM block of `pem` as `(label, DER)`.
fn pem_blocks(pem: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    x509_parser::pem::Pem::iter_from_buffer(pem)
        .map(|block| {
            block
                .map(|b| (b.label, b.contents))
                .map_err(|e| format!("malformed PEM: {e}"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------

/// The elliptic curves kube signs and verifies with that jsonwebtoken supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

impl Curve {
    fn from_oid(oid: &[u8]) -> Option<Curve> {
        match oid {
            OID_P256 => Some(Curve::P256),
            OID_P384 => Some(Curve::P384),
            _ => None,
        }
    }

    /// The curve of a SEC1 key that does not name one, from the private scalar's size.
    fn from_scalar_len(len: usize) -> Option<Curve> {
        match len {
            32 => Some(Curve::P256),
            48 => Some(Curve::P384),
            _ => None,
        }
    }

    fn oid(self) -> &'static [u8] {
        match self {
            Curve::P256 => OID_P256,
            Curve::P384 => OID_P384,
        }
    }

    fn coordinate_len(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }

    fn jwk_name(self) -> &'static str {
        match self {
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
        }
    }

    fn algorithm(self) -> Algorithm {
        match self {
            Curve::P256 => Algorithm::ES256,
            Curve::P384 => Algorithm::ES384,
        }
    }
}

fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        // Never produced by this module's keys.
        _ => "unsupported",
    }
}

#[derive(Clone, PartialEq, Eq)]
enum KeyParams {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    Ec {
        curve: Curve,
        x: Vec<u8>,
        y: Vec<u8>,
    },
}

/// One public key tokens may be verified with, with its kube key id.
#[derive(Clone)]
pub struct PublicKey {
    kid: String,
    algorithm: Algorithm,
    params: KeyParams,
    decoding: DecodingKey,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm())
            .finish()
    }
}

impl PublicKey {
    fn new(params: KeyParams) -> Result<Self, String> {
        let (algorithm, decoding) = match &params {
            KeyParams::Rsa { n, e } => {
                if n.is_empty() || e.is_empty() {
                    return Err("RSA public key has an empty modulus or exponent".into());
                }
                (Algorithm::RS256, DecodingKey::from_rsa_raw_components(n, e))
            }
            KeyParams::Ec { curve, x, y } => {
                let mut point = Vec::with_capacity(1 + x.len() + y.len());
                point.push(0x04);
                point.extend_from_slice(x);
                point.extend_from_slice(y);
                (curve.algorithm(), DecodingKey::from_ec_der(&point))
            }
        };
        // An EC point the crypto backend cannot load (not on the curve) would make every
        // verification fail quietly; refuse it when it is loaded instead. With an empty
        // signature only loading the key can be an error. (RSA components are only checked
        // when used.)
        jsonwebtoken::crypto::verify("", b"", &decoding, algorithm)
            .map_err(|e| format!("unusable public key: {e}"))?;
        let mut key = PublicKey {
            kid: String::new(),
            algorithm,
            params,
            decoding,
        };
        key.kid = URL_SAFE_NO_PAD_ENGINE.encode(Sha256::digest(key.to_spki_der()));
        Ok(key)
    }

    fn rsa(n: &[u8], e: &[u8]) -> Result<Self, String> {
        PublicKey::new(KeyParams::Rsa {
            n: strip_leading_zeros(n).to_vec(),
            e: strip_leading_zeros(e).to_vec(),
        })
    }

    /// From an uncompressed SEC1 point (`04 || X || Y`), as SubjectPublicKeyInfo carries it.
    fn ec(curve: Curve, point: &[u8]) -> Result<Self, String> {
        let len = curve.coordinate_len();
        match point.split_first() {
            Some((0x04, coordinates)) if coordinates.len() == 2 * len => {
                let (x, y) = coordinates.split_at(len);
                PublicKey::new(KeyParams::Ec {
                    curve,
                    x: x.to_vec(),
                    y: y.to_vec(),
                })
            }
            _ => Err(format!(
                "unsupported {} public key encoding (only uncompressed points)",
                curve.jwk_name()
            )),
        }
    }

    /// From a DER SubjectPublicKeyInfo (PEM `PUBLIC KEY`, or the key of a certificate).
    fn from_spki(der: &[u8]) -> Result<Self, String> {
        let (spki, _) = der_expect(der, TAG_SEQUENCE)?;
        let (algorithm, rest) = der_expect(spki, TAG_SEQUENCE)?;
        let (bits, _) = der_expect(rest, TAG_BIT_STRING)?;
        let key = match bits.split_first() {
            Some((0, key)) => key,
            _ => return Err("malformed public key bit string".into()),
        };
        let (oid, parameters) = der_expect(algorithm, TAG_OID)?;
        match oid {
            OID_RSA_ENCRYPTION => PublicKey::from_pkcs1(key),
            OID_EC_PUBLIC_KEY => {
                let (curve_oid, _) = der_expect(parameters, TAG_OID)?;
                let curve = Curve::from_oid(curve_oid)
                    .ok_or("unsupported elliptic curve (want P-256 or P-384)")?;
                PublicKey::ec(curve, key)
            }
            _ => Err("unsupported public key type (want RSA or ECDSA)".into()),
        }
    }

    /// From a DER PKCS#1 RSAPublicKey (PEM `RSA PUBLIC KEY`).
    fn from_pkcs1(der: &[u8]) -> Result<Self, String> {
        let (key, _) = der_expect(der, TAG_SEQUENCE)?;
        let (n, rest) = der_expect(key, TAG_INTEGER)?;
        let (e, _) = der_expect(rest, TAG_INTEGER)?;
        PublicKey::rsa(n, e)
    }

    /// kube's key id: base64url (no padding) of the SHA-256 of the DER SubjectPublicKeyInfo.
    pub fn key_id(&self) -> &str {
        &self.kid
    }

    /// The JWS algorithm tokens signed by this key use (`RS256`, `ES256`, `ES384`).
    pub fn algorithm(&self) -> &'static str {
        algorithm_name(self.algorithm)
    }

    /// The canonical DER SubjectPublicKeyInfo, as Go's `x509.MarshalPKIXPublicKey` writes it
    /// (RSA with NULL parameters, EC with the named curve and an uncompressed point).
    pub fn to_spki_der(&self) -> Vec<u8> {
        match &self.params {
            KeyParams::Rsa { n, e } => {
                let algorithm = der_sequence(&[
                    &der_tlv(TAG_OID, OID_RSA_ENCRYPTION),
                    &der_tlv(TAG_NULL, &[]),
                ]);
                let key = der_sequence(&[&der_unsigned(n), &der_unsigned(e)]);
                der_sequence(&[&algorithm, &der_bit_string(&key)])
            }
            KeyParams::Ec { curve, x, y } => {
                let algorithm = der_sequence(&[
                    &der_tlv(TAG_OID, OID_EC_PUBLIC_KEY),
                    &der_tlv(TAG_OID, curve.oid()),
                ]);
                let point = [&[0x04][..], x, y].concat();
                der_sequence(&[&algorithm, &der_bit_string(&point)])
            }
        }
    }

    /// The key as PEM `PUBLIC KEY`.
    pub fn to_pem(&self) -> String {
        pem_encode("PUBLIC KEY", &self.to_spki_der())
    }

    /// The public JWK, with go-jose's field order (`use`, `kty`, `kid`, `crv`, `alg`, ...).
    pub fn jwk(&self) -> Value {
        let mut jwk = Map::new();
        jwk.insert("use".into(), json!("sig"));
        match &self.params {
            KeyParams::Rsa { n, e } => {
                jwk.insert("kty".into(), json!("RSA"));
                jwk.insert("kid".into(), json!(self.kid));
                jwk.insert("alg".into(), json!(self.algorithm()));
                jwk.insert("n".into(), json!(URL_SAFE_NO_PAD_ENGINE.encode(n)));
                jwk.insert("e".into(), json!(URL_SAFE_NO_PAD_ENGINE.encode(e)));
            }
            KeyParams::Ec { curve, x, y } => {
                jwk.insert("kty".into(), json!("EC"));
                jwk.insert("kid".into(), json!(self.kid));
                jwk.insert("crv".into(), json!(curve.jwk_name()));
                jwk.insert("alg".into(), json!(self.algorithm()));
                jwk.insert("x".into(), json!(URL_SAFE_NO_PAD_ENGINE.encode(x)));
                jwk.insert("y".into(), json!(URL_SAFE_NO_PAD_ENGINE.encode(y)));
            }
        }
        Value::Object(jwk)
    }

    /// Whether `signature` (base64url) over `message` is this key's, for `algorithm`.
    fn verifies(&self, algorithm: Algorithm, message: &[u8], signature: &str) -> bool {
        // The token's `alg` must be exactly this key's: this is what stops `none`, HMAC
        // with the public key as secret, and RSA/EC confusion.
        algorithm == self.algorithm
            && jsonwebtoken::crypto::verify(signature, message, &self.decoding, algorithm)
                .unwrap_or(false)
    }
}

const URL_SAFE_NO_PAD_ENGINE: GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The private key ServiceAccount tokens are signed with.
pub struct SigningKey {
    encoding: EncodingKey,
    public: PublicKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        f.debug_struct("SigningKey")
            .field("kid", &self.public.kid)
            .field("algorithm", &self.public.algorithm())
            .finish()
    }
}

impl SigningKey {
    /// The first private key in PEM data, as kube's `keyutil.ParsePrivateKeyPEM`:
    /// `RSA PRIVATE KEY` (PKCS#1), `PRIVATE KEY` (PKCS#8, RSA or EC) or `EC PRIVATE KEY`
    /// (SEC1); other blocks (`EC PARAMETERS`, certificates) are skipped.
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        for (label, der) in pem_blocks(pem)? {
            let key = match label.as_str() {
                "RSA PRIVATE KEY" => SigningKey::from_pkcs1(&der),
                "PRIVATE KEY" => SigningKey::from_pkcs8(&der),
                "EC PRIVATE KEY" => SigningKey::from_sec1(&der),
                _ => continue,
            };
            return key.map_err(|e| format!("{label}: {e}"));
        }
        Err("data does not contain a valid RSA or ECDSA private key".into())
    }

    /// [`SigningKey::from_pem`] on a file.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let pem = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        SigningKey::from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A new ECDSA P-256 (ES256) key, with its PKCS#8 PEM (`PRIVATE KEY`).
    pub fn generate() -> Result<(SigningKey, String), String> {
        let pem = pem_encode("PRIVATE KEY", &generate_p256_pkcs8()?);
        let key = SigningKey::from_pem(pem.as_bytes())?;
        Ok((key, pem))
    }

    fn from_pkcs1(der: &[u8]) -> Result<Self, String> {
        let encoding = EncodingKey::from_rsa_der(der);
        let jwk = Jwk::from_encoding_key(&encoding, Algorithm::RS256)
            .map_err(|e| format!("invalid RSA private key: {e}"))?;
        let AlgorithmParameters::RSA(params) = jwk.algorithm else {
            return Err("invalid RSA private key".into());
        };
        let n = decode_b64url(&params.n)?;
        let e = decode_b64url(&params.e)?;
        SigningKey::checked(encoding, PublicKey::rsa(&n, &e)?)
    }

    fn from_pkcs8(der: &[u8]) -> Result<Self, String> {
        let (info, _) = der_expect(der, TAG_SEQUENCE)?;
        let (_version, rest) = der_expect(info, TAG_INTEGER)?;
        let (algorithm, rest) = der_expect(rest, TAG_SEQUENCE)?;
        let (private_key, _) = der_expect(rest, TAG_OCTET_STRING)?;
        let (oid, parameters) = der_expect(algorithm, TAG_OID)?;
        match oid {
            OID_RSA_ENCRYPTION => SigningKey::from_pkcs1(private_key),
            OID_EC_PUBLIC_KEY => {
                let (curve_oid, _) = der_expect(parameters, TAG_OID)?;
                let curve = Curve::from_oid(curve_oid)
                    .ok_or("unsupported elliptic curve (want P-256 or P-384)")?;
                SigningKey::from_ec_pkcs8(curve, der)
            }
            _ => Err("unsupported private key type (want RSA or ECDSA)".into()),
        }
    }

    /// SEC1 `ECPrivateKey`; jsonwebtoken only reads PKCS#8, so it is wrapped in one.
    fn from_sec1(der: &[u8]) -> Result<Self, String> {
        let (key, _) = der_expect(der, TAG_SEQUENCE)?;
        let (_version, rest) = der_expect(key, TAG_INTEGER)?;
        let (scalar, mut rest) = der_expect(rest, TAG_OCTET_STRING)?;
        let mut named = None;
        while !rest.is_empty() {
            let (tag, contents, next) = der_read(rest)?;
            if tag == TAG_CONTEXT_0 {
                let (oid, _) = der_expect(contents, TAG_OID)?;
                named = Some(
                    Curve::from_oid(oid)
                        .ok_or("unsupported elliptic curve (want P-256 or P-384)")?,
                );
            }
            rest = next;
        }
        let curve = named
            .or_else(|| Curve::from_scalar_len(scalar.len()))
            .ok_or("cannot tell the elliptic curve of the EC private key")?;
        SigningKey::from_ec_pkcs8(curve, &pkcs8_ec(curve, der))
    }

    fn from_ec_pkcs8(curve: Curve, pkcs8: &[u8]) -> Result<Self, String> {
        let encoding = EncodingKey::from_ec_der(pkcs8);
        let public = ec_public_of(&encoding, curve)?;
        SigningKey::checked(encoding, public)
    }

    /// Signs and verifies once, so a key that cannot sign (or whose embedded public key does
    /// not match) fails at start and not on the first TokenRequest.
    fn checked(encoding: EncodingKey, public: PublicKey) -> Result<Self, String> {
        const PROBE: &[u8] = b"kubegate signing key check";
        let signature = jsonwebtoken::crypto::sign(PROBE, &encoding, public.algorithm)
            .map_err(|e| format!("cannot sign with the private key: {e}"))?;
        if !public.verifies(public.algorithm, PROBE, &signature) {
            return Err("the private key does not match its public key".into());
        }
        Ok(SigningKey { encoding, public })
    }

    /// The key id tokens carry in their `kid` header.
    pub fn key_id(&self) -> &str {
        &self.public.kid
    }

    /// The JWS algorithm of this key (`RS256`, `ES256`, `ES384`).
    pub fn algorithm(&self) -> &'static str {
        self.public.algorithm()
    }

    /// The public half, for [`VerifyingKeys`] and the JWKS.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    fn sign<T: Serialize>(&self, claims: &T) -> Result<String, String> {
        // go-jose writes only `alg` and `kid`; no `typ`.
        let header = Header {
            typ: None,
            kid: Some(self.public.kid.clone()),
            ..Header::new(self.public.algorithm)
        };
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .map_err(|e| format!("failed to sign token: {e}"))
    }
}

fn decode_b64url(text: &str) -> Result<Vec<u8>, String> {
    RAW_URL
        .decode(text)
        .map_err(|e| format!("invalid base64url: {e}"))
}

/// The public key of an EC private key (PKCS#8 DER in `encoding`), derived by the crypto
/// backend: SEC1 files need not carry it.
fn ec_public_of(encoding: &EncodingKey, curve: Curve) -> Result<PublicKey, String> {
    let jwk = Jwk::from_encoding_key(encoding, curve.algorithm())
        .map_err(|e| format!("invalid {} private key: {e}", curve.jwk_name()))?;
    let AlgorithmParameters::EllipticCurve(params) = jwk.algorithm else {
        return Err(format!("invalid {} private key", curve.jwk_name()));
    };
    let mut point = vec![0x04];
    point.extend(decode_b64url(&params.x)?);
    point.extend(decode_b64url(&params.y)?);
    PublicKey::ec(curve, &point)
}

/// PKCS#8 `PrivateKeyInfo` around a SEC1 `ECPrivateKey`.
fn pkcs8_ec(curve: Curve, sec1: &[u8]) -> Vec<u8> {
    let algorithm = der_sequence(&[
        &der_tlv(TAG_OID, OID_EC_PUBLIC_KEY),
        &der_tlv(TAG_OID, curve.oid()),
    ]);
    der_sequence(&[
        &der_tlv(TAG_INTEGER, &[0]),
        &algorithm,
        &der_tlv(TAG_OCTET_STRING, sec1),
    ])
}

/// SEC1 `ECPrivateKey` (version 1), with the public point when given; the curve is named by
/// the PKCS#8 envelope, as Go's `MarshalPKCS8PrivateKey` leaves it out here too.
fn sec1_ec(scalar: &[u8], point: Option<&[u8]>) -> Vec<u8> {
    let version = der_tlv(TAG_INTEGER, &[1]);
    let private = der_tlv(TAG_OCTET_STRING, scalar);
    match point {
        Some(point) => der_sequence(&[
            &version,
            &private,
            &der_tlv(TAG_CONTEXT_1, &der_bit_string(point)),
        ]),
        None => der_sequence(&[&version, &private]),
    }
}

/// A new P-256 private key as PKCS#8 DER.
///
/// Key generation is kept to this one function. The workspace has no direct dependency that
/// generates EC keys (the `p256` crate jsonwebtoken uses is not exported), so the private
/// scalar is drawn here the standard way (uniform in `[1, n-1]` by rejection sampling from the
/// OS CSPRNG) and the crypto backend derives the public point; the key is then checked by
/// signing with it. With `p256` (features `pkcs8`, `pem`) as a direct dependency this becomes
/// `SecretKey::random(&mut OsRng).to_pkcs8_der()`.
fn generate_p256_pkcs8() -> Result<Vec<u8>, String> {
    let mut rng = rand::rngs::OsRng;
    for _ in 0..64 {
        let mut scalar = [0u8; 32];
        rng.try_fill_bytes(&mut scalar)
            .map_err(|e| format!("no randomness for key generation: {e}"))?;
        // Big-endian arrays compare as the numbers they hold.
        if scalar == [0u8; 32] || scalar >= P256_ORDER {
            continue;
        }
        let bare = pkcs8_ec(Curve::P256, &sec1_ec(&scalar, None));
        let public = ec_public_of(&EncodingKey::from_ec_der(&bare), Curve::P256)?;
        let KeyParams::Ec { x, y, .. } = &public.params else {
            return Err("generated key is not an EC key".into());
        };
        let point = [&[0x04][..], x, y].concat();
        return Ok(pkcs8_ec(Curve::P256, &sec1_ec(&scalar, Some(&point))));
    }
    // 64 rejections in a row happen with probability ~2^-2048: the RNG is broken.
    Err("random number generator keeps producing invalid P-256 scalars".into())
}

/// The signing key at `path`, generating an ECDSA P-256 key there on first start.
///
/// The new file is written with mode 0600 to a temporary name in the same directory, synced,
/// and then hard-linked into place, which fails if the file appeared meanwhile: two processes
/// starting together end up using the same key.
pub fn ensure_signing_key(path: &Path) -> Result<SigningKey, String> {
    match std::fs::read(path) {
        Ok(pem) => {
            return SigningKey::from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    }
    let (_, pem) = SigningKey::generate()?;
    if write_new_private_file(path, pem.as_bytes())? {
        tracing::info!(path = %path.display(), "generated a ServiceAccount token signing key");
    }
    SigningKey::from_file(path)
}

/// Writes `contents` to `path` unless it exists; `Ok(false)` when another writer won.
fn write_new_private_file(path: &Path, contents: &[u8]) -> Result<bool, String> {
    let shown = path.display();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let file_name = path
        .file_name()
        .ok_or_else(|| format!("{shown}: not a file path"))?
        .to_string_lossy()
        .into_owned();
    let temp = dir.join(format!(
        ".{file_name}.tmp-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options
            .open(&temp)
            .map_err(|e| format!("creating {}: {e}", temp.display()))?;
        file.write_all(contents)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("writing {}: {e}", temp.display()))?;
        drop(file);
        let created = match std::fs::hard_link(&temp, path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            // Filesystems without hard links: fall back to a plain rename.
            Err(_) => {
                std::fs::rename(&temp, path).map_err(|e| format!("writing {shown}: {e}"))?;
                true
            }
        };
        // Make the new directory entry durable too.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(created)
    })();
    let _ = std::fs::remove_file(&temp);
    result
}

/// The public keys tokens may be signed with: kube's `--service-account-key-file` set.
#[derive(Debug, Clone, Default)]
pub struct VerifyingKeys {
    keys: Vec<PublicKey>,
}

impl VerifyingKeys {
    /// Only the signing key's public half.
    pub fn from_signing_key(key: &SigningKey) -> Self {
        VerifyingKeys {
            keys: vec![key.public.clone()],
        }
    }

    /// The signing key's public half (if any) plus the keys in `files`.
    pub fn load(signing: Option<&SigningKey>, files: &[PathBuf]) -> Result<Self, String> {
        let mut keys = VerifyingKeys::default();
        if let Some(key) = signing {
            keys.add(key.public.clone());
        }
        for file in files {
            keys.add_file(file)?;
        }
        Ok(keys)
    }

    /// Adds a key; a key already present (same key id) is not added twice.
    pub fn add(&mut self, key: PublicKey) {
        if !self.keys.iter().any(|k| k.kid == key.kid) {
            self.keys.push(key);
        }
    }

    /// Adds the keys of PEM data (see [`public_keys_from_pem`]); returns how many it held.
    pub fn add_pem(&mut self, pem: &[u8]) -> Result<usize, String> {
        let found = public_keys_from_pem(pem)?;
        let count = found.len();
        for key in found {
            self.add(key);
        }
        Ok(count)
    }

    /// [`VerifyingKeys::add_pem`] on a file.
    pub fn add_file(&mut self, path: &Path) -> Result<usize, String> {
        let pem = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        self.add_pem(&pem)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys a token's `kid` selects: all of them when the token names none, as kube.
    fn candidates(&self, kid: Option<&str>) -> Vec<&PublicKey> {
        match kid {
            None => self.keys.iter().collect(),
            Some(kid) => self.keys.iter().filter(|k| k.kid == kid).collect(),
        }
    }
}

/// The public keys in PEM data, as kube's `keyutil.PublicKeysFromFile`: `PUBLIC KEY`,
/// `RSA PUBLIC KEY` and `CERTIFICATE` blocks; when there are none, the public halves of the
/// private keys in it.
pub fn public_keys_from_pem(pem: &[u8]) -> Result<Vec<PublicKey>, String> {
    let mut keys = Vec::new();
    for (label, der) in pem_blocks(pem)? {
        let key = match label.as_str() {
            "PUBLIC KEY" => PublicKey::from_spki(&der),
            "RSA PUBLIC KEY" => PublicKey::from_pkcs1(&der),
            "CERTIFICATE" => x509_parser::parse_x509_certificate(&der)
                .map_err(|e| format!("invalid certificate: {e}"))
                .and_then(|(_, cert)| PublicKey::from_spki(cert.tbs_certificate.subject_pki.raw)),
            _ => continue,
        };
        keys.push(key.map_err(|e| format!("{label}: {e}"))?);
    }
    if keys.is_empty() {
        if let Ok(private) = SigningKey::from_pem(pem) {
            keys.push(private.public);
        }
    }
    if keys.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA public keys".into());
    }
    Ok(keys)
}

// ---------------------------------------------------------------------------------------
// Issuing
// ---------------------------------------------------------------------------------------

/// A name and uid, as kube's token claims reference objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        ObjectRef {
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// The object a token is bound to: it is valid only while that object exists (same uid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundObject {
    Secret(ObjectRef),
    /// A pod, with the node it runs on when known (kube embeds it for information; the node
    /// is not checked when the token is used).
    Pod {
        pod: ObjectRef,
        node: Option<ObjectRef>,
    },
    Node(ObjectRef),
}

/// What to issue a token for.
#[derive(Debug, Clone, Default)]
pub struct IssueRequest {
    pub namespace: String,
    pub service_account: ObjectRef,
    /// Empty: the issuer's default audiences.
    pub audiences: Vec<String>,
    /// The requested lifetime; shortened to the issuer's maximum.
    pub expiration_seconds: i64,
    pub bound: Option<BoundObject>,
}

/// An issued token and what the TokenRequest status reports about it.
#[derive(Clone)]
pub struct IssuedToken {
    pub token: String,
    /// `iat`/`nbf` of the token (whole seconds): the TokenRequest's creationTimestamp.
    pub issued_at: DateTime<Utc>,
    /// `exp` of the token.
    pub expiration_timestamp: DateTime<Utc>,
    /// The lifetime actually granted (after the maximum was applied).
    pub expiration_seconds: i64,
    pub audiences: Vec<String>,
    /// `JTI=<jti>`: what the user's credential-id extra will say, for audit.
    pub credential_id: String,
    /// kube's warning when the lifetime was shortened to the maximum.
    pub warning: Option<String>,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("token", &"<redacted>")
            .field("issued_at", &self.issued_at)
            .field("expiration_timestamp", &self.expiration_timestamp)
            .field("expiration_seconds", &self.expiration_seconds)
            .field("audiences", &self.audiences)
            .field("credential_id", &self.credential_id)
            .finish()
    }
}

/// The private claims of a bound token (`kubernetes.io`). Serialized keys are in Go's
/// sorted-map order so tokens look like kube's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct KubernetesClaims {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<ObjectRef>,
    #[serde(default)]
    serviceaccount: ObjectRef,
}

/// A bound token's claims, keys in Go's sorted-map order.
#[derive(Serialize)]
struct BoundClaims<'a> {
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    aud: &'a [String],
    exp: i64,
    iat: i64,
    iss: &'a str,
    jti: &'a str,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
    nbf: i64,
    sub: String,
}

/// The claims of a legacy Secret-based token.
#[derive(Debug, Default, Serialize, Deserialize)]
struct LegacyClaims {
    #[serde(default)]
    iss: String,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace", default)]
    namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name", default)]
    secret_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name", default)]
    service_account_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid", default)]
    service_account_uid: String,
    #[serde(default)]
    sub: String,
}

/// Issues ServiceAccount tokens (the TokenRequest API's token generator).
#[derive(Debug)]
pub struct TokenIssuer {
    issuer: String,
    key: SigningKey,
    max_expiration_seconds: Option<i64>,
    default_audiences: Vec<String>,
}

impl TokenIssuer {
    /// `issuer` is kube's `--service-account-issuer` (the `iss` of every token),
    /// `default_audiences` its `--api-audiences` (used when a request names none),
    /// `max_expiration` its `--service-account-max-token-expiration`.
    pub fn new(
        issuer: impl Into<String>,
        key: SigningKey,
        default_audiences: Vec<String>,
        max_expiration: Option<Duration>,
    ) -> Self {
        TokenIssuer {
            issuer: issuer.into(),
            key,
            max_expiration_seconds: max_expiration
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                .filter(|s| *s > 0),
            default_audiences,
        }
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn default_audiences(&self) -> &[String] {
        &self.default_audiences
    }

    pub fn max_expiration_seconds(&self) -> Option<i64> {
        self.max_expiration_seconds
    }

    pub fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    /// Issues a bound token now.
    pub fn issue(&self, request: IssueRequest) -> Result<IssuedToken, String> {
        self.issue_at(request, Utc::now())
    }

    /// Issues a bound token as of `now` (kube's `serviceaccount.Claims` + `GenerateToken`).
    pub fn issue_at(
        &self,
        request: IssueRequest,
        now: DateTime<Utc>,
    ) -> Result<IssuedToken, String> {
        if request.expiration_seconds <= 0 {
            return Err("token expiration must be positive".into());
        }
        let mut expiration_seconds = request.expiration_seconds;
        let mut warning = None;
        if let Some(max) = self.max_expiration_seconds {
            if expiration_seconds > max {
                warning = Some(format!(
                    "requested expiration of {expiration_seconds} seconds shortened to {max} seconds"
                ));
                expiration_seconds = max;
            }
        }
        let audiences = if request.audiences.is_empty() {
            self.default_audiences.clone()
        } else {
            request.audiences
        };
        let iat = now.timestamp();
        let exp = iat.saturating_add(expiration_seconds);
        let jti = uuid::Uuid::new_v4().to_string();
        let mut kubernetes = KubernetesClaims {
            namespace: request.namespace.clone(),
            serviceaccount: request.service_account.clone(),
            ..Default::default()
        };
        match request.bound {
            None => {}
            Some(BoundObject::Secret(secret)) => kubernetes.secret = Some(secret),
            Some(BoundObject::Pod { pod, node }) => {
                kubernetes.pod = Some(pod);
                kubernetes.node = node;
            }
            Some(BoundObject::Node(node)) => kubernetes.node = Some(node),
        }
        let claims = BoundClaims {
            aud: &audiences,
            exp,
            iat,
            iss: &self.issuer,
            jti: &jti,
            kubernetes,
            nbf: iat,
            sub: make_username(&request.namespace, &request.service_account.name),
        };
        let token = self.key.sign(&claims)?;
        let at = |seconds: i64| {
            DateTime::<Utc>::from_timestamp(seconds, 0)
                .ok_or_else(|| "token timestamps out of range".to_string())
        };
        Ok(IssuedToken {
            token,
            issued_at: at(iat)?,
            expiration_timestamp: at(exp)?,
            expiration_seconds,
            audiences,
            credential_id: credential_id_for_jti(&jti),
            warning,
        })
    }

    /// A legacy Secret-based token (kube's `LegacyClaims`: issuer `kubernetes/serviceaccount`,
    /// no audience, no expiry), for the token Secret of `service_account` named `secret_name`.
    /// Such a token is only accepted while that Secret holds exactly it.
    pub fn issue_legacy(
        &self,
        namespace: &str,
        service_account: &ObjectRef,
        secret_name: &str,
    ) -> Result<String, String> {
        self.key.sign(&LegacyClaims {
            iss: LEGACY_ISSUER.to_string(),
            namespace: namespace.to_string(),
            secret_name: secret_name.to_string(),
            service_account_name: service_account.name.clone(),
            service_account_uid: service_account.uid.clone(),
            sub: make_username(namespace, &service_account.name),
        })
    }
}

/// `JTI=<jti>`, or nothing without a jti (kube's `CredentialIDForJTI`).
fn credential_id_for_jti(jti: &str) -> String {
    if jti.is_empty() {
        String::new()
    } else {
        format!("JTI={jti}")
    }
}

// ---------------------------------------------------------------------------------------
// Authenticating
// ---------------------------------------------------------------------------------------

/// Authenticates ServiceAccount tokens signed by one of our keys (kube's
/// `JWTTokenAuthenticator` with the bound-token validator, plus the legacy one).
pub struct ServiceAccountTokenAuthenticator {
    issuers: Vec<String>,
    keys: VerifyingKeys,
    api_audiences: Vec<String>,
    lookup: Arc<dyn ObjectLookup>,
    accept_legacy: bool,
}

impl std::fmt::Debug for ServiceAccountTokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokenAuthenticator")
            .field("issuers", &self.issuers)
            .field("keys", &self.keys)
            .field("api_audiences", &self.api_audiences)
            .field("accept_legacy", &self.accept_legacy)
            .finish_non_exhaustive()
    }
}

/// Who a valid token stands for (kube's `ServiceAccountInfo`).
#[derive(Debug, Default)]
struct ServiceAccountInfo {
    namespace: String,
    name: String,
    uid: String,
    pod_name: String,
    pod_uid: String,
    node_name: String,
    node_uid: String,
    credential_id: String,
}

impl ServiceAccountInfo {
    fn user_info(self) -> UserInfo {
        let mut extra = BTreeMap::new();
        if !self.pod_name.is_empty() && !self.pod_uid.is_empty() {
            extra.insert(POD_NAME_KEY.to_string(), vec![self.pod_name]);
            extra.insert(POD_UID_KEY.to_string(), vec![self.pod_uid]);
        }
        if !self.credential_id.is_empty() {
            extra.insert(CREDENTIAL_ID_KEY.to_string(), vec![self.credential_id]);
        }
        if !self.node_name.is_empty() {
            extra.insert(NODE_NAME_KEY.to_string(), vec![self.node_name]);
            if !self.node_uid.is_empty() {
                extra.insert(NODE_UID_KEY.to_string(), vec![self.node_uid]);
            }
        }
        UserInfo {
            name: make_username(&self.namespace, &self.name),
            uid: self.uid,
            groups: make_group_names(&self.namespace),
            extra,
        }
    }
}

/// The registered claims kube checks, read leniently (numbers may be floats, `aud` a string).
struct PublicClaims {
    iss: String,
    sub: String,
    aud: Vec<String>,
    exp: Option<i64>,
    nbf: Option<i64>,
    iat: Option<i64>,
    jti: String,
}

impl PublicClaims {
    fn parse(payload: &Map<String, Value>) -> Result<Self, String> {
        let string = |name: &str| match payload.get(name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!("malformed {name} claim")),
        };
        // go-jose's NumericDate: a JSON number, fractions truncated.
        let date = |name: &str| match payload.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map(Some)
                .ok_or_else(|| format!("malformed {name} claim")),
            Some(_) => Err(format!("malformed {name} claim")),
        };
        let aud = match payload.get("aud") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("malformed aud claim")?,
            Some(_) => return Err("malformed aud claim".into()),
        };
        Ok(PublicClaims {
            iss: string("iss")?,
            sub: string("sub")?,
            aud,
            exp: date("exp")?,
            nbf: date("nbf")?,
            iat: date("iat")?,
            jti: string("jti")?,
        })
    }
}

fn unix_millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

fn metadata_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The object's `metadata.deletionTimestamp` in Unix milliseconds, if it is being deleted.
/// An unparsable timestamp counts as long past: the object is going away either way.
fn deletion_millis(object: &Value) -> Option<i64> {
    let stamp = metadata_str(object, "deletionTimestamp");
    if stamp.is_empty() {
        return None;
    }
    Some(
        DateTime::parse_from_rfc3339(stamp)
            .map(|t| t.timestamp_millis())
            .unwrap_or(i64::MIN),
    )
}

/// Go's `%q` of a string slice, for messages: `["a" "b"]`.
fn go_quoted(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

impl ServiceAccountTokenAuthenticator {
    /// `issuers`: the `iss` values accepted (the first is the one [`TokenIssuer`] uses);
    /// `keys`: what signatures are checked against; `api_audiences`: the server's audiences
    /// (kube's `--api-audiences`), assumed when a caller asks for none and granted to tokens
    /// without `aud`; `lookup`: the stored ServiceAccounts, Secrets, Pods and Nodes.
    /// Legacy Secret-based tokens are accepted, as kube does; see
    /// [`ServiceAccountTokenAuthenticator::with_legacy_tokens`].
    pub fn new(
        issuers: Vec<String>,
        keys: VerifyingKeys,
        api_audiences: Vec<String>,
        lookup: Arc<dyn ObjectLookup>,
    ) -> Self {
        ServiceAccountTokenAuthenticator {
            issuers,
            keys,
            api_audiences,
            lookup,
            accept_legacy: true,
        }
    }

    /// Whether tokens with issuer `kubernetes/serviceaccount` (stored in Secrets of type
    /// `kubernetes.io/service-account-token`) are accepted.
    pub fn with_legacy_tokens(mut self, accept: bool) -> Self {
        self.accept_legacy = accept;
        self
    }

    pub fn keys(&self) -> &VerifyingKeys {
        &self.keys
    }

    /// [`TokenAuthenticator::authenticate_token`] against a given clock.
    pub fn authenticate_at(
        &self,
        token: &str,
        audiences: &[String],
        now: SystemTime,
    ) -> TokenOutcome {
        // kube peeks at the unverified issuer first: a token of another issuer belongs to
        // another authenticator (OIDC, webhook) and must not be reported as invalid.
        let Some(issuer) = unverified_issuer(token) else {
            return TokenOutcome::NotMine;
        };
        let legacy = self.accept_legacy && issuer == LEGACY_ISSUER;
        if !legacy && !self.issuers.contains(&issuer) {
            return TokenOutcome::NotMine;
        }
        match self.verify(token, audiences, legacy, unix_millis(now)) {
            Ok(Some(result)) => TokenOutcome::Authenticated(result),
            Ok(None) => TokenOutcome::NotMine,
            Err(message) => TokenOutcome::Invalid(message),
        }
    }

    /// `Ok(None)`: not a well-formed JWS after all (kube treats that as not its token).
    fn verify(
        &self,
        token: &str,
        audiences: &[String],
        legacy: bool,
        now_ms: i64,
    ) -> Result<Option<TokenReviewResult>, String> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Ok(None);
        };
        let Some(header) = RAW_URL
            .decode(header)
            .ok()
            .and_then(|h| serde_json::from_slice::<Map<String, Value>>(&h).ok())
        else {
            return Ok(None);
        };
        let algorithm = match header.get("alg").and_then(Value::as_str) {
            Some("RS256") => Algorithm::RS256,
            Some("ES256") => Algorithm::ES256,
            Some("ES384") => Algorithm::ES384,
            Some(other) => {
                return Err(format!(
                    "service account token uses unsupported signing algorithm {other:?}"
                ))
            }
            None => return Err("service account token has no signing algorithm".into()),
        };
        let kid = header
            .get("kid")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty());
        let candidates = self.keys.candidates(kid);
        if candidates.is_empty() {
            return Err("invalid signature, no keys found".into());
        }
        // The signed message is the first two parts exactly as sent.
        let message = &token[..token.len() - signature.len() - 1];
        if !candidates
            .iter()
            .any(|key| key.verifies(algorithm, message.as_bytes(), signature))
        {
            return Err("invalid signature".into());
        }

        let payload = RAW_URL
            .decode(payload)
            .ok()
            .and_then(|p| serde_json::from_slice::<Map<String, Value>>(&p).ok())
            .ok_or("service account token has malformed claims")?;
        let claims = PublicClaims::parse(&payload)?;
        let issuer_ok = if legacy {
            claims.iss == LEGACY_ISSUER
        } else {
            self.issuers.contains(&claims.iss)
        };
        if !issuer_ok {
            return Err(format!("token issuer {:?} is invalid", claims.iss));
        }

        // Audiences, as kube's jwtTokenAuthenticator: a token without `aud` (legacy) is
        // valid for the API audiences only; callers that ask for nothing get those too.
        let token_audiences = if claims.aud.is_empty() {
            self.api_audiences.clone()
        } else {
            claims.aud.clone()
        };
        let requested = if audiences.is_empty() {
            &self.api_audiences[..]
        } else {
            audiences
        };
        let granted: Vec<String> = requested
            .iter()
            .filter(|a| token_audiences.contains(a))
            .cloned()
            .collect();
        if granted.is_empty() && !self.api_audiences.is_empty() {
            return Err(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted(&token_audiences),
                go_quoted(requested)
            ));
        }

        let (info, expires_at) = if legacy {
            let private: LegacyClaims = serde_json::from_value(Value::Object(payload))
                .map_err(|_| "service account token has malformed claims".to_string())?;
            (self.validate_legacy(token, &claims, &private)?, None)
        } else {
            let private: KubernetesClaims = match payload.get("kubernetes.io") {
                None | Some(Value::Null) => KubernetesClaims::default(),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|_| "service account token has malformed claims".to_string())?,
            };
            let expires_at = claims
                .exp
                .and_then(|e| u64::try_from(e).ok())
                .map(|e| UNIX_EPOCH + Duration::from_secs(e));
            (self.validate_bound(&claims, private, now_ms)?, expires_at)
        };
        Ok(Some(TokenReviewResult {
            user: Arc::new(info.user_info()),
            audiences: granted.into(),
            expires_at,
        }))
    }

    /// kube's bound-token validator (`pkg/serviceaccount/claims.go`).
    fn validate_bound(
        &self,
        claims: &PublicClaims,
        private: KubernetesClaims,
        now_ms: i64,
    ) -> Result<ServiceAccountInfo, String> {
        let at_ms = |seconds: i64| seconds.saturating_mul(1000);
        if claims
            .nbf
            .is_some_and(|nbf| now_ms.saturating_add(LEEWAY_MS) < at_ms(nbf))
        {
            return Err("service account token is not valid yet".into());
        }
        if claims
            .exp
            .is_some_and(|exp| now_ms.saturating_sub(LEEWAY_MS) > at_ms(exp))
        {
            return Err("service account token has expired".into());
        }
        if claims
            .iat
            .is_some_and(|iat| now_ms.saturating_add(LEEWAY_MS) < at_ms(iat))
        {
            return Err("service account token is issued in the future".into());
        }

        // Objects deleted more than the leeway ago no longer back a token.
        let deleted = |object: &Value| {
            deletion_millis(object).is_some_and(|d| d < now_ms.saturating_sub(LEEWAY_MS))
        };
        let namespace = private.namespace.as_str();
        let sa = &private.serviceaccount;
        let service_account = self
            .lookup
            .get("", "serviceaccounts", namespace, &sa.name)
            .ok_or_else(|| format!("serviceaccounts \"{}\" not found", sa.name))?;
        if deleted(&service_account) {
            return Err(format!(
                "service account {namespace}/{} has been deleted",
                sa.name
            ));
        }
        let current_uid = metadata_str(&service_account, "uid");
        if current_uid != sa.uid {
            return Err(format!(
                "service account UID ({current_uid}) does not match claim ({})",
                sa.uid
            ));
        }

        if let Some(secret_ref) = &private.secret {
            let invalidated = || "service account token has been invalidated".to_string();
            let secret = self
                .lookup
                .get("", "secrets", namespace, &secret_ref.name)
                .ok_or_else(invalidated)?;
            if deleted(&secret) {
                return Err(invalidated());
            }
            let uid = metadata_str(&secret, "uid");
            if uid != secret_ref.uid {
                return Err(format!(
                    "secret UID ({uid}) does not match service account secret ref claim ({})",
                    secret_ref.uid
                ));
            }
        }

        let mut info = ServiceAccountInfo {
            namespace: private.namespace.clone(),
            name: sa.name.clone(),
            uid: sa.uid.clone(),
            credential_id: credential_id_for_jti(&claims.jti),
            ..Default::default()
        };
        if let Some(pod_ref) = &private.pod {
            let invalidated = || "service account token has been invalidated".to_string();
            let pod = self
                .lookup
                .get("", "pods", namespace, &pod_ref.name)
                .ok_or_else(invalidated)?;
            if deleted(&pod) {
                return Err(invalidated());
            }
            let uid = metadata_str(&pod, "uid");
            if uid != pod_ref.uid {
                return Err(format!(
                    "pod UID ({uid}) does not match service account pod ref claim ({})",
                    pod_ref.uid
                ));
            }
            info.pod_name = pod_ref.name.clone();
            info.pod_uid = pod_ref.uid.clone();
        }
        if let Some(node_ref) = &private.node {
            if private.pod.is_none() {
                // A node-bound token lives only as long as its node.
                let invalidated = || "service account token has been invalidated".to_string();
                let node = self
                    .lookup
                    .get("", "nodes", "", &node_ref.name)
                    .ok_or_else(invalidated)?;
                if deleted(&node) {
                    return Err(invalidated());
                }
                let uid = metadata_str(&node, "uid");
                if uid != node_ref.uid {
                    return Err(format!(
                        "node UID ({uid}) does not match service account node ref claim ({})",
                        node_ref.uid
                    ));
                }
            }
            // For a pod-bound token the node is only information, as in kube.
            info.node_name = node_ref.name.clone();
            info.node_uid = node_ref.uid.clone();
        }
        Ok(info)
    }

    /// kube's legacy validator (`pkg/serviceaccount/legacy.go`) with lookup enabled. kube
    /// also stamps a last-used label on the Secret; there is no writer here to do that.
    fn validate_legacy(
        &self,
        token: &str,
        claims: &PublicClaims,
        private: &LegacyClaims,
    ) -> Result<ServiceAccountInfo, String> {
        if claims.sub.is_empty() {
            return Err("sub claim is missing".into());
        }
        let namespace = private.namespace.as_str();
        if namespace.is_empty() {
            return Err("namespace claim is missing".into());
        }
        let secret_name = private.secret_name.as_str();
        if secret_name.is_empty() {
            return Err("secretName claim is missing".into());
        }
        let sa_name = private.service_account_name.as_str();
        if sa_name.is_empty() {
            return Err("serviceAccountName claim is missing".into());
        }
        let sa_uid = private.service_account_uid.as_str();
        if sa_uid.is_empty() {
            return Err("serviceAccountUID claim is missing".into());
        }
        let subject_ok = claims
            .sub
            .strip_prefix(SERVICE_ACCOUNT_USERNAME_PREFIX)
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(ns, name)| ns == namespace && name == sa_name && !name.contains(':'));
        if !subject_ok {
            return Err("sub claim is invalid".into());
        }

        let invalidated = || "token has been invalidated".to_string();
        let secret = self
            .lookup
            .get("", "secrets", namespace, secret_name)
            .ok_or_else(invalidated)?;
        if deletion_millis(&secret).is_some() {
            return Err(invalidated());
        }
        // The Secret must still hold exactly this token: rotating or emptying it revokes.
        let stored = secret
            .pointer("/data/token")
            .and_then(Value::as_str)
            .and_then(|b64| STANDARD.decode(b64).ok())
            .unwrap_or_default();
        if !bool::from(stored.as_slice().ct_eq(token.as_bytes())) {
            return Err("token does not match server's copy".into());
        }

        let service_account = self
            .lookup
            .get("", "serviceaccounts", namespace, sa_name)
            .ok_or_else(|| format!("serviceaccounts \"{sa_name}\" not found"))?;
        if deletion_millis(&service_account).is_some() {
            return Err(format!(
                "ServiceAccount {namespace}/{sa_name} has been deleted"
            ));
        }
        let current_uid = metadata_str(&service_account, "uid");
        if current_uid != sa_uid {
            return Err(format!(
                "ServiceAccount UID ({current_uid}) does not match claim ({sa_uid})"
            ));
        }
        // kube records the day a legacy token was last used on its Secret, skipping the write
        // when the label already says today (or tomorrow, for servers a little ahead), also
        // for a token it then refuses as invalidated.
        let now = chrono::Utc::now();
        let today = now.format("%Y-%m-%d").to_string();
        let tomorrow = (now + chrono::Duration::days(1))
            .format("%Y-%m-%d")
            .to_string();
        let last_used = secret
            .pointer("/metadata/labels")
            .and_then(|l| l.get(LEGACY_LAST_USED_LABEL))
            .and_then(Value::as_str)
            .unwrap_or("");
        if last_used != today && last_used != tomorrow {
            self.lookup.legacy_token_used(
                namespace,
                secret_name,
                metadata_str(&secret, "uid"),
                &today,
            );
        }
        let invalid_since = secret
            .pointer("/metadata/labels")
            .and_then(|l| l.get(LEGACY_INVALID_SINCE_LABEL))
            .and_then(Value::as_str)
            .unwrap_or("");
        if !invalid_since.is_empty() {
            return Err(format!(
                "the token in secret {namespace}/{secret_name} for service account {namespace}/{sa_name} has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '{LEGACY_INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token"
            ));
        }
        Ok(ServiceAccountInfo {
            namespace: namespace.to_string(),
            name: sa_name.to_string(),
            uid: sa_uid.to_string(),
            ..Default::default()
        })
    }
}

/// The `iss` of a compact JWS without verifying anything (kube's `hasCorrectIssuer`);
/// `None` when it is not a JWT at all.
fn unverified_issuer(token: &str) -> Option<String> {
    if token.trim_start().starts_with('{') {
        return None;
    }
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    #[derive(Deserialize)]
    struct Issuer {
        // WARNING: not verified; only used to pick the authenticator.
        #[serde(default)]
        iss: String,
    }
    let payload = RAW_URL.decode(payload).ok()?;
    serde_json::from_slice::<Issuer>(&payload)
        .ok()
        .map(|c| c.iss)
}

#[async_trait::async_trait]
impl TokenAuthenticator for ServiceAccountTokenAuthenticator {
    fn name(&self) -> &'static str {
        "serviceaccount"
    }

    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        self.authenticate_at(token, audiences, SystemTime::now())
    }
}

// ---------------------------------------------------------------------------------------
// OIDC discovery
// ---------------------------------------------------------------------------------------

/// The JSON Web Key Set served at [`JWKS_PATH`]: every verifying key, public parts only.
pub fn jwks(keys: &VerifyingKeys) -> Value {
    json!({ "keys": keys.keys.iter().map(PublicKey::jwk).collect::<Vec<_>>() })
}

/// The OIDC provider configuration served at [`OPENID_CONFIGURATION_PATH`], as kube's
/// `openIDConfigJSON`; the signing algorithms are those of `keys`, sorted.
pub fn openid_configuration(issuer: &str, jwks_uri: &str, keys: &VerifyingKeys) -> Value {
    let algorithms: BTreeSet<&str> = keys.keys.iter().map(PublicKey::algorithm).collect();
    json!({
        "issuer": issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": algorithms,
    })
}

/// `https://<external address>/openid/v1/jwks`, kube's default `jwks_uri`.
pub fn default_jwks_uri(external_address: &str) -> String {
    format!("https://{external_address}{JWKS_PATH}")
}

/// kube's checks before it serves discovery (`NewOpenIDMetadataProvider`): the issuer must be
/// an `https` URL without query or fragment, and the JWKS URI an `https` URL. kube skips the
/// discovery endpoints (and keeps issuing tokens) when these fail.
pub fn validate_discovery_urls(issuer: &str, jwks_uri: &str) -> Result<(), String> {
    fn host_of(url: &str) -> Option<&str> {
        url.strip_prefix("https://")
            .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""))
            .filter(|host| !host.is_empty())
    }
    if host_of(issuer).is_none() {
        return Err(format!("issuer URL must use https scheme, got: {issuer}"));
    }
    if issuer.contains('?') {
        return Err(format!("issuer URL may not include a query, got: {issuer}"));
    }
    if issuer.contains('#') {
        return Err(format!(
            "issuer URL may not include a fragment, got: {issuer}"
        ));
    }
    if host_of(jwks_uri).is_none() {
        return Err(format!(
            "jwksURI requires https scheme, parsed as: {jwks_uri}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    // kube's pkg/serviceaccount test keys (fake values published for testing) and the key
    // ids kube computes for them: kubegate must derive the same ids.
    const KUBE_RSA_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA249XwEo9k4tM8fMxV7zx
OhcrP+WvXn917koM5Qr2ZXs4vo26e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt+ecI
zshKuv1gKIxbbLQMOuK1eA/4HALyEkFgmS/tleLJrhc65tKPMGD+pKQ/xhmzRuCG
51RoiMgbQxaCyYxGfNLpLAZK9L0Tctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJU
j7OTh/AjjCnMnkgvKT2tpKxYQ59PgDgU8Ssc7RDSmSkLxnrv+OrN80j6xrw0OjEi
B4Ycr0PqfzZcvy8efTtFQ/Jnc4Bp1zUtFXt7+QeevePtQ2EcyELXE0i63T1CujRM
WwIDAQAB
-----END PUBLIC KEY-----
";
    const KUBE_RSA_KID: &str = "JHJehTTTZlsspKHT-GaJxK7Kd1NQgZJu3fyK6K_QDYU";
    const KUBE_RSA_PRIVATE: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA249XwEo9k4tM8fMxV7zxOhcrP+WvXn917koM5Qr2ZXs4vo26
e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt+ecIzshKuv1gKIxbbLQMOuK1eA/4HALy
EkFgmS/tleLJrhc65tKPMGD+pKQ/xhmzRuCG51RoiMgbQxaCyYxGfNLpLAZK9L0T
ctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJUj7OTh/AjjCnMnkgvKT2tpKxYQ59P
gDgU8Ssc7RDSmSkLxnrv+OrN80j6xrw0OjEiB4Ycr0PqfzZcvy8efTtFQ/Jnc4Bp
1zUtFXt7+QeevePtQ2EcyELXE0i63T1CujRMWwIDAQABAoIBAHJx8GqyCBDNbqk7
e7/hI9iE1S10Wwol5GH2RWxqX28cYMKq+8aE2LI1vPiXO89xOgelk4DN6urX6xjK
ZBF8RRIMQy/e/O2F4+3wl+Nl4vOXV1u6iVXMsD6JRg137mqJf1Fr9elg1bsaRofL
Q7CxPoB8dhS+Qb+hj0DhlqhgA9zG345CQCAds0ZYAZe8fP7bkwrLqZpMn7Dz9WVm
++YgYYKjuE95kPuup/LtWfA9rJyE/Fws8/jGvRSpVn1XglMLSMKhLd27sE8ZUSV0
2KUzbfRGE0+AnRULRrjpYaPu0XQ2JjdNvtkjBnv27RB89W9Gklxq821eH1Y8got8
FZodjxECgYEA93pz7AQZ2xDs67d1XLCzpX84GxKzttirmyj3OIlxgzVHjEMsvw8v
sjFiBU5xEEQDosrBdSknnlJqyiq1YwWG/WDckr13d8G2RQWoySN7JVmTQfXcLoTu
YGRiiTuoEi3ab3ZqrgGrFgX7T/cHuasbYvzCvhM2b4VIR3aSxU2DTUMCgYEA4x7J
T/ErP6GkU5nKstu/mIXwNzayEO1BJvPYsy7i7EsxTm3xe/b8/6cYOz5fvJLGH5mT
Q8YvuLqBcMwZardrYcwokD55UvNLOyfADDFZ6l3WntIqbA640Ok2g1X4U8J09xIq
ZLIWK1yWbbvi4QCeN5hvWq47e8sIj5QHjIIjRwkCgYEAyNqjltxFN9zmzPDa2d24
EAvOt3pYTYBQ1t9KtqImdL0bUqV6fZ6PsWoPCgt+DBuHb+prVPGP7Bkr/uTmznU/
+AlTO+12NsYLbr2HHagkXE31DEXE7CSLa8RNjN/UKtz4Ohq7vnowJvG35FCz/mb3
FUHbtHTXa2+bGBUOTf/5Hw0CgYBxw0r9EwUhw1qnUYJ5op7OzFAtp+T7m4ul8kCa
SCL8TxGsgl+SQ34opE775dtYfoBk9a0RJqVit3D8yg71KFjOTNAIqHJm/Vyyjc+h
i9rJDSXiuczsAVfLtPVMRfS0J9QkqeG4PIfkQmVLI/CZ2ZBmsqEcX+eFs4ZfPLun
Qsxe2QKBgGuPilIbLeIBDIaPiUI0FwU8v2j8CEQBYvoQn34c95hVQsig/o5z7zlo
UsO0wlTngXKlWdOcCs1kqEhTLrstf48djDxAYAxkw40nzeJOt7q52ib/fvf4/UBy
X024wzbiw1q07jFCyfQmODzURAx1VNT7QVUMdz/N8vy47/H40AZJ
-----END RSA PRIVATE KEY-----
";
    // `openssl ecparam -name prime256v1 -genkey -noout`: SEC1.
    const KUBE_EC_PRIVATE: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIEZmTmUhuanLjPA2CLquXivuwBDHTt5XYwgIr/kA1LtRoAoGCCqGSM49
AwEHoUQDQgAEH6cuzP8XuD5wal6wf9M6xDljTOPLX2i8uIp/C/ASqiIGUeeKQtX0
/IR3qCXyThP/dbCiHrF3v1cuhBOHY8CLVg==
-----END EC PRIVATE KEY-----
";
    const KUBE_EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEH6cuzP8XuD5wal6wf9M6xDljTOPL
X2i8uIp/C/ASqiIGUeeKQtX0/IR3qCXyThP/dbCiHrF3v1cuhBOHY8CLVg==
-----END PUBLIC KEY-----
";
    const KUBE_EC_KID: &str = "SoABiieYuNx4UdqYvZRVeuC6SihxgLrhLy9peHMHpTc";
    const KUBE_OTHER_RSA_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEArXz0QkIG1B5Bj2/W69GH
rsm5e+RC3kE+VTgocge0atqlLBek35tRqLgUi3AcIrBZ/0YctMSWDVcRt5fkhWwe
Lqjj6qvAyNyOkrkBi1NFDpJBjYJtuKHgRhNxXbOzTSNpdSKXTfOkzqv56MwHOP25
yP/NNAODUtr92D5ySI5QX8RbXW+uDn+ixul286PBW/BCrE4tuS88dA0tYJPf8LCu
sqQOwlXYH/rNUg4Pyl9xxhR5DIJR0OzNNfChjw60zieRIt2LfM83fXhwk8IxRGkc
gPZm7ZsipmfbZK2Tkhnpsa4QxDg7zHJPMsB5kxRXW0cQipXcC3baDyN9KBApNXa0
PwIDAQAB
-----END PUBLIC KEY-----
";

    const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
    const API: &str = "https://kubernetes.default.svc.cluster.local";

    #[derive(Default)]
    struct FakeLookup {
        objects: Mutex<HashMap<(String, String, String), Value>>,
    }

    impl FakeLookup {
        fn put(&self, resource: &str, namespace: &str, name: &str, object: Value) {
            self.objects
                .lock()
                .expect("lock")
                .insert((resource.into(), namespace.into(), name.into()), object);
        }
        fn remove(&self, resource: &str, namespace: &str, name: &str) {
            self.objects.lock().expect("lock").remove(&(
                resource.into(),
                namespace.into(),
                name.into(),
            ));
        }
    }

    impl ObjectLookup for FakeLookup {
        fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
            assert_eq!(group, "", "only core objects are looked up");
            self.objects
                .lock()
                .expect("lock")
                .get(&(resource.into(), namespace.into(), name.into()))
                .cloned()
        }
    }

    fn object(namespace: &str, name: &str, uid: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": namespace, "uid": uid}})
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    struct Fixture {
        issuer: TokenIssuer,
        lookup: Arc<FakeLookup>,
        authn: ServiceAccountTokenAuthenticator,
    }

    fn fixture(key: SigningKey) -> Fixture {
        let keys = VerifyingKeys::from_signing_key(&key);
        let issuer = TokenIssuer::new(ISSUER, key, strings(&[API]), None);
        let lookup = Arc::new(FakeLookup::default());
        lookup.put(
            "serviceaccounts",
            "ns",
            "builder",
            object("ns", "builder", "sa-uid"),
        );
        let authn = ServiceAccountTokenAuthenticator::new(
            strings(&[ISSUER]),
            keys,
            strings(&[API]),
            lookup.clone(),
        );
        Fixture {
            issuer,
            lookup,
            authn,
        }
    }

    fn rsa_key() -> SigningKey {
        SigningKey::from_pem(KUBE_RSA_PRIVATE.as_bytes()).expect("kube RSA test key")
    }

    fn es256_key() -> SigningKey {
        SigningKey::generate().expect("generate").0
    }

    fn request(audiences: &[&str], bound: Option<BoundObject>) -> IssueRequest {
        IssueRequest {
            namespace: "ns".into(),
            service_account: ObjectRef::new("builder", "sa-uid"),
            audiences: strings(audiences),
            expiration_seconds: 3600,
            bound,
        }
    }

    fn accepted(outcome: TokenOutcome) -> TokenReviewResult {
        match outcome {
            TokenOutcome::Authenticated(result) => result,
            other => panic!("expected the token to be accepted, got {other:?}"),
        }
    }

    fn rejected(outcome: TokenOutcome) -> String {
        match outcome {
            TokenOutcome::Invalid(message) => message,
            other => panic!("expected the token to be rejected, got {other:?}"),
        }
    }

    fn claims_of(token: &str) -> Value {
        let payload = token.split('.').nth(1).expect("payload");
        serde_json::from_slice(&RAW_URL.decode(payload).expect("b64")).expect("json")
    }

    fn header_of(token: &str) -> Value {
        let header = token.split('.').next().expect("header");
        serde_json::from_slice(&RAW_URL.decode(header).expect("b64")).expect("json")
    }

    #[test]
    fn key_ids_match_kube() {
        let rsa = rsa_key();
        assert_eq!(rsa.key_id(), KUBE_RSA_KID);
        assert_eq!(rsa.algorithm(), "RS256");
        let ec = SigningKey::from_pem(KUBE_EC_PRIVATE.as_bytes()).expect("kube EC key");
        assert_eq!(ec.key_id(), KUBE_EC_KID);
        assert_eq!(ec.algorithm(), "ES256");

        let public = public_keys_from_pem(KUBE_RSA_PUBLIC.as_bytes()).expect("rsa public");
        assert_eq!(public[0].key_id(), KUBE_RSA_KID);
        assert_eq!(
            public[0].to_pem(),
            KUBE_RSA_PUBLIC,
            "canonical SPKI round trip"
        );
        let public = public_keys_from_pem(KUBE_EC_PUBLIC.as_bytes()).expect("ec public");
        assert_eq!(public[0].key_id(), KUBE_EC_KID);
        assert_eq!(public[0].to_pem(), KUBE_EC_PUBLIC);
    }

    #[test]
    fn key_formats() {
        // PKCS#8 RSA: the same key wrapped, same id.
        let rsa_pkcs1 = pem_blocks(KUBE_RSA_PRIVATE.as_bytes()).expect("pem")[0]
            .1
            .clone();
        let algorithm = der_sequence(&[
            &der_tlv(TAG_OID, OID_RSA_ENCRYPTION),
            &der_tlv(TAG_NULL, &[]),
        ]);
        let pkcs8 = der_sequence(&[
            &der_tlv(TAG_INTEGER, &[0]),
            &algorithm,
            &der_tlv(TAG_OCTET_STRING, &rsa_pkcs1),
        ]);
        let key =
            SigningKey::from_pem(pem_encode("PRIVATE KEY", &pkcs8).as_bytes()).expect("pkcs8 rsa");
        assert_eq!(key.key_id(), KUBE_RSA_KID);

        // PKCS#1 public key (`RSA PUBLIC KEY`).
        let spki = pem_blocks(KUBE_RSA_PUBLIC.as_bytes()).expect("pem")[0]
            .1
            .clone();
        let (outer, _) = der_expect(&spki, TAG_SEQUENCE).expect("spki");
        let (_, rest) = der_expect(outer, TAG_SEQUENCE).expect("alg");
        let (bits, _) = der_expect(rest, TAG_BIT_STRING).expect("bits");
        let pkcs1_public = pem_encode("RSA PUBLIC KEY", &bits[1..]);
        assert_eq!(
            public_keys_from_pem(pkcs1_public.as_bytes()).expect("pkcs1")[0].key_id(),
            KUBE_RSA_KID
        );

        // `openssl ecparam -genkey` writes EC PARAMETERS before the key: skipped.
        let with_params = format!(
            "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{KUBE_EC_PRIVATE}"
        );
        assert_eq!(
            SigningKey::from_pem(with_params.as_bytes())
                .expect("params + key")
                .key_id(),
            KUBE_EC_KID
        );

        // rcgen (ring) PKCS#8 keys and certificates: ids agree with ring's own SPKI.
        for (alg, want) in [
            (&rcgen::PKCS_ECDSA_P256_SHA256, "ES256"),
            (&rcgen::PKCS_ECDSA_P384_SHA384, "ES384"),
        ] {
            let pair = rcgen::KeyPair::generate_for(alg).expect("rcgen key");
            let key = SigningKey::from_pem(pair.serialize_pem().as_bytes()).expect("pkcs8 ec");
            assert_eq!(key.algorithm(), want);
            let ring_kid = URL_SAFE_NO_PAD_ENGINE.encode(Sha256::digest(
                rcgen::PublicKeyData::subject_public_key_info(&pair),
            ));
            assert_eq!(key.key_id(), ring_kid);
            let cert = rcgen::CertificateParams::new(vec!["sa.example".to_string()])
                .expect("params")
                .self_signed(&pair)
                .expect("cert");
            let from_cert = public_keys_from_pem(cert.pem().as_bytes()).expect("cert key");
            assert_eq!(from_cert[0].key_id(), ring_kid);
        }

        // A file holding only a private key yields its public half.
        let from_private = public_keys_from_pem(KUBE_EC_PRIVATE.as_bytes()).expect("private");
        assert_eq!(from_private[0].key_id(), KUBE_EC_KID);

        // Nothing usable.
        assert!(SigningKey::from_pem(KUBE_RSA_PUBLIC.as_bytes()).is_err());
        assert!(SigningKey::from_pem(b"not pem").is_err());
        assert!(public_keys_from_pem(b"").is_err());
        let garbage = pem_encode("PRIVATE KEY", &[0x30, 0x03, 0x02, 0x01, 0x00]);
        assert!(SigningKey::from_pem(garbage.as_bytes()).is_err());
        let truncated = pem_encode("PUBLIC KEY", &[0x30, 0x82, 0x01]);
        assert!(public_keys_from_pem(truncated.as_bytes()).is_err());
    }

    #[test]
    fn signing_key_generation_and_reuse() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pki").join("sa.key");
        let first = ensure_signing_key(&path).expect("generate");
        assert_eq!(first.algorithm(), "ES256");
        let pem = std::fs::read_to_string(&path).expect("written");
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = ensure_signing_key(&path).expect("reuse");
        assert_eq!(first.key_id(), second.key_id());
        assert_eq!(std::fs::read_to_string(&path).expect("same file"), pem);
        // No temporary files are left behind.
        let entries = std::fs::read_dir(dir.path().join("pki"))
            .expect("dir")
            .count();
        assert_eq!(entries, 1);
        // Fresh keys differ.
        assert_ne!(es256_key().key_id(), first.key_id());
        // A file that is not a key is an error, never silently replaced.
        let bad = dir.path().join("bad.key");
        std::fs::write(&bad, "junk").expect("write");
        assert!(ensure_signing_key(&bad).is_err());
        assert_eq!(std::fs::read_to_string(&bad).expect("kept"), "junk");
    }

    #[test]
    fn round_trip_rs256_and_es256() {
        for key in [rsa_key(), es256_key()] {
            let alg = key.algorithm();
            let kid = key.key_id().to_string();
            let f = fixture(key);
            let issued = f.issuer.issue(request(&[], None)).expect("issue");
            assert_eq!(header_of(&issued.token), json!({"alg": alg, "kid": kid}));
            let claims = claims_of(&issued.token);
            let keys: Vec<&str> = claims
                .as_object()
                .expect("object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(
                keys,
                [
                    "aud",
                    "exp",
                    "iat",
                    "iss",
                    "jti",
                    "kubernetes.io",
                    "nbf",
                    "sub"
                ]
            );
            assert_eq!(claims["iss"], ISSUER);
            assert_eq!(claims["sub"], "system:serviceaccount:ns:builder");
            assert_eq!(claims["aud"], json!([API]), "default audiences");
            assert_eq!(
                claims["kubernetes.io"],
                json!({"namespace": "ns", "serviceaccount": {"name": "builder", "uid": "sa-uid"}})
            );
            assert_eq!(
                claims["exp"].as_i64(),
                Some(claims["iat"].as_i64().unwrap_or(0) + 3600)
            );
            assert_eq!(claims["nbf"], claims["iat"]);
            assert_eq!(
                issued.expiration_timestamp.timestamp(),
                claims["exp"].as_i64().unwrap_or(0)
            );
            let jti = claims["jti"].as_str().expect("jti");
            assert!(uuid::Uuid::parse_str(jti).is_ok());
            assert_eq!(issued.credential_id, format!("JTI={jti}"));

            let result = accepted(
                f.authn
                    .authenticate_at(&issued.token, &[], SystemTime::now()),
            );
            assert_eq!(result.user.name, "system:serviceaccount:ns:builder");
            assert_eq!(result.user.uid, "sa-uid");
            assert_eq!(
                result.user.groups,
                strings(&["system:serviceaccounts", "system:serviceaccounts:ns"])
            );
            assert_eq!(
                result.user.extra,
                BTreeMap::from([(CREDENTIAL_ID_KEY.to_string(), vec![format!("JTI={jti}")])])
            );
            assert_eq!(result.audiences, strings(&[API]).into());
            assert_eq!(
                result.expires_at,
                Some(
                    UNIX_EPOCH
                        + Duration::from_secs(issued.expiration_timestamp.timestamp() as u64)
                )
            );
            assert!(
                !format!("{issued:?}").contains(&issued.token),
                "Debug hides the token"
            );
        }
    }

    #[tokio::test]
    async fn trait_entry_point() {
        let f = fixture(es256_key());
        let issued = f.issuer.issue(request(&[], None)).expect("issue");
        let authn: &dyn TokenAuthenticator = &f.authn;
        assert_eq!(authn.name(), "serviceaccount");
        accepted(
            authn
                .authenticate_token(&issued.token, &strings(&[API]))
                .await,
        );
    }

    #[test]
    fn audiences() {
        let f = fixture(es256_key());
        let issued = f
            .issuer
            .issue(request(&["vault", "other"], None))
            .expect("issue");
        let now = SystemTime::now();
        // Asking for nothing means the API audiences, which this token is not for.
        let message = rejected(f.authn.authenticate_at(&issued.token, &[], now));
        assert!(
            message.contains("is invalid for the target audiences"),
            "{message}"
        );
        let result = accepted(f.authn.authenticate_at(
            &issued.token,
            &strings(&["x", "other", "vault"]),
            now,
        ));
        assert_eq!(
            result.audiences,
            strings(&["other", "vault"]).into(),
            "requested order"
        );
        rejected(
            f.authn
                .authenticate_at(&issued.token, &strings(&[API]), now),
        );

        // A server without API audiences does not insist on an intersection (kube).
        let open = ServiceAccountTokenAuthenticator::new(
            strings(&[ISSUER]),
            f.authn.keys().clone(),
            Vec::new(),
            f.lookup.clone(),
        );
        let result = accepted(open.authenticate_at(&issued.token, &[], now));
        assert!(result.audiences.is_empty());
    }

    #[test]
    fn time_claims() {
        let f = fixture(es256_key());
        let issued_at = Utc::now() - chrono::Duration::hours(2);
        let old = f
            .issuer
            .issue_at(request(&[], None), issued_at)
            .expect("issue");
        let message = rejected(f.authn.authenticate_at(&old.token, &[], SystemTime::now()));
        assert_eq!(message, "service account token has expired");

        // Within the 60s leeway an expired token still passes.
        let exp = old.expiration_timestamp.timestamp() as u64;
        accepted(f.authn.authenticate_at(
            &old.token,
            &[],
            UNIX_EPOCH + Duration::from_secs(exp + 30),
        ));
        rejected(f.authn.authenticate_at(
            &old.token,
            &[],
            UNIX_EPOCH + Duration::from_secs(exp + 61),
        ));

        let future = f
            .issuer
            .issue_at(
                request(&[], None),
                Utc::now() + chrono::Duration::minutes(10),
            )
            .expect("issue");
        let message = rejected(
            f.authn
                .authenticate_at(&future.token, &[], SystemTime::now()),
        );
        assert_eq!(message, "service account token is not valid yet");
    }

    #[test]
    fn signature_checks() {
        let f = fixture(rsa_key());
        let now = SystemTime::now();
        let issued = f.issuer.issue(request(&[], None)).expect("issue");
        let parts: Vec<&str> = issued.token.split('.').collect();

        // Tampered payload: another service account, same signature.
        let mut claims = claims_of(&issued.token);
        claims["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
        let forged_payload = RAW_URL.encode(claims.to_string());
        let forged = format!("{}.{}.{}", parts[0], forged_payload, parts[2]);
        assert_eq!(
            rejected(f.authn.authenticate_at(&forged, &[], now)),
            "invalid signature"
        );

        // Tampered signature.
        let mut sig = RAW_URL.decode(parts[2]).expect("sig");
        sig[0] ^= 1;
        let bad_sig = format!("{}.{}.{}", parts[0], parts[1], RAW_URL.encode(sig));
        rejected(f.authn.authenticate_at(&bad_sig, &[], now));

        // alg none, with and without a signature.
        let none_header = RAW_URL.encode(json!({"alg": "none", "kid": KUBE_RSA_KID}).to_string());
        for sig in ["", parts[2]] {
            let token = format!("{none_header}.{}.{sig}", parts[1]);
            let message = rejected(f.authn.authenticate_at(&token, &[], now));
            assert!(
                message.contains("unsupported signing algorithm"),
                "{message}"
            );
        }

        // HS256 "signed" with the public key as the HMAC secret.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(KUBE_RSA_KID.into());
        let hmac = jsonwebtoken::encode(
            &header,
            &claims_of(&issued.token),
            &EncodingKey::from_secret(KUBE_RSA_PUBLIC.as_bytes()),
        )
        .expect("hmac token");
        rejected(f.authn.authenticate_at(&hmac, &[], now));

        // ES256 header on an RSA key id: the algorithm must be the key's.
        let es_header = RAW_URL.encode(json!({"alg": "ES256", "kid": KUBE_RSA_KID}).to_string());
        let confused = format!("{es_header}.{}.{}", parts[1], parts[2]);
        rejected(f.authn.authenticate_at(&confused, &[], now));

        // Unknown key id.
        let other = TokenIssuer::new(ISSUER, es256_key(), strings(&[API]), None);
        let foreign = other.issue(request(&[], None)).expect("issue");
        assert_eq!(
            rejected(f.authn.authenticate_at(&foreign.token, &[], now)),
            "invalid signature, no keys found"
        );
        // No key id: every key is tried, and none matches.
        let no_kid = jsonwebtoken::encode(
            &Header {
                typ: None,
                ..Header::new(Algorithm::ES256)
            },
            &claims_of(&foreign.token),
            &other.signing_key().encoding,
        )
        .expect("token without kid");
        assert!(header_of(&no_kid).get("kid").is_none());
        assert_eq!(
            rejected(f.authn.authenticate_at(&no_kid, &[], now)),
            "invalid signature"
        );

        // Rotation: an extra verifying key from a file-like PEM accepts its tokens.
        let mut keys = f.authn.keys().clone();
        keys.add_pem(other.signing_key().public_key().to_pem().as_bytes())
            .expect("add");
        keys.add_pem(KUBE_OTHER_RSA_PUBLIC.as_bytes()).expect("add");
        keys.add_pem(KUBE_RSA_PUBLIC.as_bytes()).expect("dup");
        assert_eq!(keys.keys().len(), 3, "duplicates are not added twice");
        let rotated = ServiceAccountTokenAuthenticator::new(
            strings(&[ISSUER]),
            keys,
            strings(&[API]),
            f.lookup.clone(),
        );
        accepted(rotated.authenticate_at(&foreign.token, &[], now));
        accepted(rotated.authenticate_at(&no_kid, &[], now));
        accepted(rotated.authenticate_at(&issued.token, &[], now));
    }

    #[test]
    fn not_ours() {
        let f = fixture(es256_key());
        let now = SystemTime::now();
        let other = TokenIssuer::new("https://oidc.example", es256_key(), Vec::new(), None);
        let token = other.issue(request(&[], None)).expect("issue").token;
        assert_eq!(
            f.authn.authenticate_at(&token, &[], now),
            TokenOutcome::NotMine
        );
        for junk in [
            "",
            "abc",
            "a.b",
            "a.b.c.d",
            "{\"iss\":\"x\"}",
            "0123456789abcdef.0123456789abcdef",
        ] {
            assert_eq!(
                f.authn.authenticate_at(junk, &[], now),
                TokenOutcome::NotMine,
                "{junk}"
            );
        }
        // Our issuer, but no JWS at all behind it.
        let payload = RAW_URL.encode(json!({"iss": ISSUER}).to_string());
        assert_eq!(
            f.authn
                .authenticate_at(&format!("!!.{payload}.x"), &[], now),
            TokenOutcome::NotMine
        );
    }

    #[test]
    fn service_account_must_still_exist() {
        let f = fixture(es256_key());
        let now = SystemTime::now();
        let issued = f.issuer.issue(request(&[], None)).expect("issue");
        accepted(f.authn.authenticate_at(&issued.token, &[], now));

        f.lookup.remove("serviceaccounts", "ns", "builder");
        rejected(f.authn.authenticate_at(&issued.token, &[], now));

        f.lookup.put(
            "serviceaccounts",
            "ns",
            "builder",
            object("ns", "builder", "new-uid"),
        );
        let message = rejected(f.authn.authenticate_at(&issued.token, &[], now));
        assert_eq!(
            message,
            "service account UID (new-uid) does not match claim (sa-uid)"
        );

        // Being deleted: fine within the leeway, not after.
        let mut deleting = object("ns", "builder", "sa-uid");
        deleting["metadata"]["deletionTimestamp"] =
            json!((Utc::now() - chrono::Duration::seconds(10)).to_rfc3339());
        f.lookup
            .put("serviceaccounts", "ns", "builder", deleting.clone());
        accepted(f.authn.authenticate_at(&issued.token, &[], now));
        deleting["metadata"]["deletionTimestamp"] =
            json!((Utc::now() - chrono::Duration::minutes(5)).to_rfc3339());
        f.lookup.put("serviceaccounts", "ns", "builder", deleting);
        rejected(f.authn.authenticate_at(&issued.token, &[], now));
    }

    #[test]
    fn bound_objects() {
        let f = fixture(es256_key());
        let now = SystemTime::now();
        f.lookup
            .put("secrets", "ns", "s", object("ns", "s", "secret-uid"));
        let issued = f
            .issuer
            .issue(request(
                &[],
                Some(BoundObject::Secret(ObjectRef::new("s", "secret-uid"))),
            ))
            .expect("issue");
        assert_eq!(
            claims_of(&issued.token)["kubernetes.io"]["secret"],
            json!({"name": "s", "uid": "secret-uid"})
        );
        accepted(f.authn.authenticate_at(&issued.token, &[], now));
        f.lookup
            .put("secrets", "ns", "s", object("ns", "s", "other-uid"));
        rejected(f.authn.authenticate_at(&issued.token, &[], now));
        f.lookup.remove("secrets", "ns", "s");
        assert_eq!(
            rejected(f.authn.authenticate_at(&issued.token, &[], now)),
            "service account token has been invalidated"
        );

        // Pod-bound, with the node as information: extras carry both.
        f.lookup
            .put("pods", "ns", "p", object("ns", "p", "pod-uid"));
        let issued = f
            .issuer
            .issue(request(
                &[],
                Some(BoundObject::Pod {
                    pod: ObjectRef::new("p", "pod-uid"),
                    node: Some(ObjectRef::new("n1", "node-uid")),
                }),
            ))
            .expect("issue");
        let claims = claims_of(&issued.token);
        let keys: Vec<&String> = claims["kubernetes.io"]
            .as_object()
            .expect("object")
            .keys()
            .collect();
        assert_eq!(keys, ["namespace", "node", "pod", "serviceaccount"]);
        let result = accepted(f.authn.authenticate_at(&issued.token, &[], now));
        let extra = |k: &str| result.user.extra.get(k).cloned().unwrap_or_default();
        assert_eq!(extra(POD_NAME_KEY), ["p"]);
        assert_eq!(extra(POD_UID_KEY), ["pod-uid"]);
        assert_eq!(extra(NODE_NAME_KEY), ["n1"]);
        assert_eq!(extra(NODE_UID_KEY), ["node-uid"]);
        f.lookup.remove("pods", "ns", "p");
        rejected(f.authn.authenticate_at(&issued.token, &[], now));

        // Node-bound: the node itself must exist.
        let issued = f
            .issuer
            .issue(request(
                &[],
                Some(BoundObject::Node(ObjectRef::new("n1", "node-uid"))),
            ))
            .expect("issue");
        rejected(f.authn.authenticate_at(&issued.token, &[], now));
        f.lookup
            .put("nodes", "", "n1", object("", "n1", "node-uid"));
        let result = accepted(f.authn.authenticate_at(&issued.token, &[], now));
        assert!(!result.user.extra.contains_key(POD_NAME_KEY));
        assert_eq!(
            result.user.extra.get(NODE_NAME_KEY),
            Some(&strings(&["n1"]))
        );
    }

    #[test]
    fn maximum_expiration() {
        let f = fixture(es256_key());
        let capped = TokenIssuer::new(
            ISSUER,
            es256_key(),
            strings(&[API]),
            Some(Duration::from_secs(7200)),
        );
        let mut req = request(&[], None);
        req.expiration_seconds = 100_000;
        let issued = capped.issue(req.clone()).expect("issue");
        assert_eq!(issued.expiration_seconds, 7200);
        assert_eq!(
            issued.warning.as_deref(),
            Some("requested expiration of 100000 seconds shortened to 7200 seconds")
        );
        let claims = claims_of(&issued.token);
        assert_eq!(
            claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0),
            7200
        );
        let uncapped = f.issuer.issue(req.clone()).expect("issue");
        assert_eq!(uncapped.expiration_seconds, 100_000);
        assert!(uncapped.warning.is_none());
        req.expiration_seconds = 0;
        assert!(f.issuer.issue(req).is_err());
    }

    #[test]
    fn legacy_tokens() {
        let f = fixture(rsa_key());
        let now = SystemTime::now();
        let token = f
            .issuer
            .issue_legacy("ns", &ObjectRef::new("builder", "sa-uid"), "builder-token")
            .expect("legacy");
        assert_eq!(claims_of(&token)["iss"], LEGACY_ISSUER);
        let secret = |data: &str| {
            json!({
                "metadata": {"name": "builder-token", "namespace": "ns", "uid": "s-uid"},
                "type": "kubernetes.io/service-account-token",
                "data": {"token": STANDARD.encode(data)}
            })
        };
        // Not stored in any Secret: revoked.
        rejected(f.authn.authenticate_at(&token, &[], now));
        f.lookup
            .put("secrets", "ns", "builder-token", secret(&token));
        let result = accepted(f.authn.authenticate_at(&token, &[], now));
        assert_eq!(result.user.name, "system:serviceaccount:ns:builder");
        assert_eq!(result.user.uid, "sa-uid");
        assert!(result.user.extra.is_empty());
        assert_eq!(
            result.audiences,
            strings(&[API]).into(),
            "legacy tokens get the API audiences"
        );
        assert_eq!(result.expires_at, None);
        // Only the API audiences.
        rejected(f.authn.authenticate_at(&token, &strings(&["vault"]), now));

        f.lookup
            .put("secrets", "ns", "builder-token", secret("rotated"));
        assert_eq!(
            rejected(f.authn.authenticate_at(&token, &[], now)),
            "token does not match server's copy"
        );
        let mut marked = secret(&token);
        marked["metadata"]["labels"] = json!({LEGACY_INVALID_SINCE_LABEL: "2024-01-01"});
        f.lookup.put("secrets", "ns", "builder-token", marked);
        rejected(f.authn.authenticate_at(&token, &[], now));
        f.lookup
            .put("secrets", "ns", "builder-token", secret(&token));
        f.lookup.put(
            "serviceaccounts",
            "ns",
            "builder",
            object("ns", "builder", "other"),
        );
        rejected(f.authn.authenticate_at(&token, &[], now));

        let strict = ServiceAccountTokenAuthenticator::new(
            strings(&[ISSUER]),
            f.authn.keys().clone(),
            strings(&[API]),
            f.lookup.clone(),
        )
        .with_legacy_tokens(false);
        assert_eq!(
            strict.authenticate_at(&token, &[], now),
            TokenOutcome::NotMine
        );
    }

    #[test]
    fn discovery_documents_match_kube() {
        let mut keys = VerifyingKeys::default();
        keys.add_pem(KUBE_RSA_PUBLIC.as_bytes()).expect("rsa");
        keys.add_pem(KUBE_EC_PUBLIC.as_bytes()).expect("ec");
        let issuer = "https://issuer.example.com";
        let jwks_uri = format!("{issuer}{JWKS_PATH}");
        assert_eq!(
            openid_configuration(issuer, &jwks_uri, &keys).to_string(),
            r#"{"issuer":"https://issuer.example.com","jwks_uri":"https://issuer.example.com/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256","RS256"]}"#
        );
        assert_eq!(
            jwks(&keys).to_string(),
            r#"{"keys":[{"use":"sig","kty":"RSA","kid":"JHJehTTTZlsspKHT-GaJxK7Kd1NQgZJu3fyK6K_QDYU","alg":"RS256","n":"249XwEo9k4tM8fMxV7zxOhcrP-WvXn917koM5Qr2ZXs4vo26e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt-ecIzshKuv1gKIxbbLQMOuK1eA_4HALyEkFgmS_tleLJrhc65tKPMGD-pKQ_xhmzRuCG51RoiMgbQxaCyYxGfNLpLAZK9L0Tctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJUj7OTh_AjjCnMnkgvKT2tpKxYQ59PgDgU8Ssc7RDSmSkLxnrv-OrN80j6xrw0OjEiB4Ycr0PqfzZcvy8efTtFQ_Jnc4Bp1zUtFXt7-QeevePtQ2EcyELXE0i63T1CujRMWw","e":"AQAB"},{"use":"sig","kty":"EC","kid":"SoABiieYuNx4UdqYvZRVeuC6SihxgLrhLy9peHMHpTc","crv":"P-256","alg":"ES256","x":"H6cuzP8XuD5wal6wf9M6xDljTOPLX2i8uIp_C_ASqiI","y":"BlHnikLV9PyEd6gl8k4T_3Wwoh6xd79XLoQTh2PAi1Y"}]}"#
        );
        // Private keys publish only their public half.
        let signing = rsa_key();
        let published = jwks(&VerifyingKeys::from_signing_key(&signing)).to_string();
        assert!(!published.contains("\"d\""));
        assert_eq!(
            default_jwks_uri("192.0.2.1:6443"),
            "https://192.0.2.1:6443/openid/v1/jwks"
        );

        assert!(validate_discovery_urls(issuer, &jwks_uri).is_ok());
        for bad in [
            "http://issuer.example.com",
            "issuer.example.com",
            "https://issuer.example.com?foo=bar",
            "https://issuer.example.com#baz",
            "https://",
        ] {
            assert!(validate_discovery_urls(bad, &jwks_uri).is_err(), "{bad}");
        }
        assert!(
            validate_discovery_urls(issuer, "http://issuer.example.com/openid/v1/jwks").is_err()
        );
    }

    #[test]
    fn der_lengths() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let encoded = der_tlv(TAG_OCTET_STRING, &vec![7u8; len]);
            let (tag, contents, rest) = der_read(&encoded).expect("read back");
            assert_eq!(
                (tag, contents.len(), rest.len()),
                (TAG_OCTET_STRING, len, 0)
            );
        }
        assert_eq!(der_unsigned(&[0, 0, 0x80]), [0x02, 0x02, 0x00, 0x80]);
        assert_eq!(
            der_unsigned(&[0x01, 0x00, 0x01]),
            [0x02, 0x03, 0x01, 0x00, 0x01]
        );
        assert_eq!(der_unsigned(&[]), [0x02, 0x01, 0x00]);
    }
}

//! Client-certificate authentication, as kube's `request/x509` authenticator with
//! `CommonNameUserConversion`: the presented chain must verify against the client CA bundle
//! (`--client-ca-file`) for client authentication, on every request; then the subject common
//! name is the user name, every subject organization a group, and the leaf's SHA-256 the
//! credential id.
//!
//! The TLS layer accepts chains from the client CA *and* the request-header CA, and re-checks
//! nothing once a connection is up, so the verification here is what decides: it catches a
//! certificate that expired on a long-lived connection, a CA removed from the bundle, and a
//! front proxy's certificate, which is left to the request-header authenticator.

use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use x509_parser::asn1_rs::Tag;
use x509_parser::oid_registry::{OID_X509_COMMON_NAME, OID_X509_ORGANIZATION_NAME};
use x509_parser::prelude::{FromDer, ParsedExtension, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

use super::ca_bundle::CaBundle;
use super::{Authenticator, AuthnOutcome, AuthnRequest, CertificateDigests, PeerCertificate};
use crate::user::UserInfo;

/// The `user.Info` extra key under which kube records which credential authenticated a
/// request (kube's `user.CredentialIDKey`).
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

impl PeerCertificate {
    /// Reads the subject common name and organizations of a DER certificate the way Go's
    /// `crypto/x509` fills `pkix.Name`: attributes in certificate order, the last common name
    /// wins, every organization is kept in order. Like Go, a subject attribute whose value is
    /// not a well-formed directory string makes the certificate unusable. The chain is just
    /// this certificate.
    pub fn from_der(der: &[u8]) -> Result<PeerCertificate, String> {
        let (rest, certificate) = X509Certificate::from_der(der)
            .map_err(|e| format!("x509: cannot parse certificate: {e}"))?;
        if !rest.is_empty() {
            return Err("x509: trailing data after the certificate".to_string());
        }
        let mut identity = PeerCertificate::default();
        for rdn in certificate.subject().iter() {
            for attribute in rdn.iter() {
                let value = directory_string(attribute)?;
                if attribute.attr_type() == &OID_X509_COMMON_NAME {
                    identity.common_name = value;
                } else if attribute.attr_type() == &OID_X509_ORGANIZATION_NAME {
                    identity.organizations.push(value);
                }
            }
        }
        identity.chain = vec![der.to_vec()];
        identity.digests = Some(CertificateDigests {
            chain: super::ca_bundle::chain_digest(&identity.chain),
            user: Arc::new(certificate_user(&identity, der)),
        });
        Ok(identity)
    }

    /// The subject of the leaf (the first certificate, see [`PeerCertificate::from_der`]) with
    /// the whole chain kept for verification.
    pub fn from_chain(chain: Vec<Vec<u8>>) -> Result<PeerCertificate, String> {
        let leaf = chain
            .first()
            .ok_or_else(|| "x509: empty certificate chain".to_string())?;
        let mut identity = PeerCertificate::from_der(leaf)?;
        if let Some(digests) = &mut identity.digests {
            digests.chain = super::ca_bundle::chain_digest(&chain);
        }
        identity.chain = chain;
        Ok(identity)
    }

    /// The digest the CA bundle remembers verified chains by.
    pub(crate) fn chain_digest(&self) -> [u8; 32] {
        match &self.digests {
            Some(digests) => digests.chain,
            None => super::ca_bundle::chain_digest(&self.chain),
        }
    }
}

/// kube's credential id for a client certificate: the SHA-256 of the leaf.
fn leaf_credential_id(leaf: &[u8]) -> String {
    format!("X509SHA256={}", hex::encode(Sha256::digest(leaf)))
}

/// The user a client certificate names (kube's `CommonNameUserConversion`): CN, every O as a
/// group, the leaf's credential id in extra; with `system:authenticated` already added (as the
/// union would), so the user built with the connection is shared as it is by its requests.
fn certificate_user(certificate: &PeerCertificate, leaf: &[u8]) -> UserInfo {
    let mut user = UserInfo::new(
        certificate.common_name.clone(),
        certificate.organizations.clone(),
    );
    user.extra.insert(
        CREDENTIAL_ID_KEY.to_string(),
        vec![leaf_credential_id(leaf)],
    );
    user.with_authenticated_group()
}

/// Names a certificate in logs the way kube does (`SN=<decimal>, SKID=AB:CD.., AKID=..`),
/// without echoing its subject.
pub(crate) fn certificate_identifier(der: &[u8]) -> String {
    let Ok((_, certificate)) = X509Certificate::from_der(der) else {
        return "<unparsable certificate>".to_string();
    };
    let mut skid: &[u8] = &[];
    let mut akid: &[u8] = &[];
    for extension in certificate.extensions() {
        match extension.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => skid = id.0,
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                if let Some(id) = &aki.key_identifier {
                    akid = id.0;
                }
            }
            _ => {}
        }
    }
    format!(
        "SN={}, SKID={}, AKID={}",
        certificate.tbs_certificate.serial,
        colon_hex(skid),
        colon_hex(akid)
    )
}

fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Decodes an attribute value as Go's `parseASN1String` does, with the same accepted string
/// types and checks (so a name reads the same here as in kube-apiserver).
fn directory_string(attribute: &AttributeTypeAndValue<'_>) -> Result<String, String> {
    let value = attribute.attr_value();
    let data = value.data;
    let invalid = |kind: &str| Err(format!("x509: invalid RDN value: invalid {kind}"));
    match value.tag() {
        Tag::PrintableString => {
            if !data.iter().all(|&b| is_printable(b)) {
                return invalid("PrintableString");
            }
            Ok(String::from_utf8_lossy(data).into_owned())
        }
        Tag::Utf8String => match std::str::from_utf8(data) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => invalid("UTF-8 string"),
        },
        Tag::Ia5String => {
            if !data.is_ascii() {
                return invalid("IA5String");
            }
            Ok(String::from_utf8_lossy(data).into_owned())
        }
        Tag::NumericString => {
            if !data.iter().all(|&b| b.is_ascii_digit() || b == b' ') {
                return invalid("NumericString");
            }
            Ok(String::from_utf8_lossy(data).into_owned())
        }
        // T.61 is read as Latin-1, as Go and BoringSSL do.
        Tag::T61String => Ok(data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => decode_bmp_string(data)
            .ok_or_else(|| "x509: invalid RDN value: invalid BMPString".to_string()),
        other => Err(format!(
            "x509: invalid RDN value: unsupported string type: {}",
            other.0
        )),
    }
}

/// Go's PrintableString check, including the `*` and `&` it tolerates for real-world certs.
fn is_printable(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || (b'\''..=b')').contains(&b)
        || (b'+'..=b'/').contains(&b)
        || matches!(b, b' ' | b':' | b'=' | b'?' | b'*' | b'&')
}

/// UCS-2 big-endian, as Go decodes it: an optional NUL terminator is dropped; surrogates and
/// the permanent noncharacters are refused.
fn decode_bmp_string(data: &[u8]) -> Option<String> {
    // An odd length is malformed (checked via the chunk remainder: `is_multiple_of` is newer
    // than the workspace's minimum Rust version).
    if !data.chunks_exact(2).remainder().is_empty() {
        return None;
    }
    let data = data.strip_suffix(&[0, 0]).unwrap_or(data);
    data.chunks_exact(2)
        .map(|pair| {
            let point = u16::from_be_bytes([pair[0], pair[1]]);
            let reserved = point == 0xfffe
                || point == 0xffff
                || (0xfdd0..=0xfdef).contains(&point)
                || (0xd800..=0xdfff).contains(&point);
            if reserved {
                None
            } else {
                char::from_u32(u32::from(point))
            }
        })
        .collect()
}

/// Authenticates requests by a client certificate that verifies against the client CA bundle.
#[derive(Debug, Clone)]
pub struct X509Authenticator {
    bundle: Arc<CaBundle>,
    request_header: Option<Arc<CaBundle>>,
}

impl X509Authenticator {
    /// Trusts client certificates that verify against `bundle` (`--client-ca-file`).
    pub fn new(bundle: Arc<CaBundle>) -> Self {
        X509Authenticator {
            bundle,
            request_header: None,
        }
    }

    /// Names the request-header CA bundle, so that a front proxy's certificate (signed by it
    /// and not by the client CA) counts as no credential here instead of a rejected one: the
    /// request-header authenticator speaks for it, and a proxy request without identity
    /// headers then goes on like any request without credentials.
    pub fn with_request_header_bundle(mut self, bundle: Arc<CaBundle>) -> Self {
        self.request_header = Some(bundle);
        self
    }

    fn authenticate_certificate(
        &self,
        certificate: &PeerCertificate,
        now: SystemTime,
    ) -> AuthnOutcome {
        let Some(leaf) = certificate.chain.first() else {
            // Only a hand-built identity lacks its chain; with nothing to verify it cannot be
            // trusted, and a presented certificate must never end up anonymous.
            return AuthnOutcome::Failed("client certificate without its chain".to_string());
        };
        if let Err(reason) =
            self.bundle
                .verify_digested(&certificate.chain, certificate.chain_digest(), now)
        {
            let front_proxy = self
                .request_header
                .as_ref()
                .is_some_and(|rh| rh.issued(&certificate.chain))
                && !self.bundle.issued(&certificate.chain);
            if front_proxy {
                return AuthnOutcome::NoCredential;
            }
            return AuthnOutcome::Failed(format!(
                "verifying certificate {} failed: {reason}",
                certificate_identifier(leaf)
            ));
        }
        if certificate.common_name.is_empty() {
            // kube skips such a certificate silently; here a presented credential that names no
            // one is a failure, so it can never end up as anonymous.
            return AuthnOutcome::Failed(
                "client certificate has an empty subject common name".to_string(),
            );
        }
        AuthnOutcome::Authenticated(match &certificate.digests {
            Some(digests) => digests.user.clone(),
            None => Arc::new(certificate_user(certificate, leaf)),
        })
    }
}

#[async_trait::async_trait]
impl Authenticator for X509Authenticator {
    fn name(&self) -> &'static str {
        "x509"
    }

    async fn authenticate(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        self.decide(request)
    }

    fn authenticate_now(&self, request: &AuthnRequest<'_>) -> Option<AuthnOutcome> {
        Some(self.decide(request))
    }
}

impl X509Authenticator {
    fn decide(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        match request.peer_certificate {
            None => AuthnOutcome::NoCredential,
            Some(certificate) => self.authenticate_certificate(certificate, SystemTime::now()),
        }
    }
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::authn::ca_bundle::tests::{bundle_file, ca, replace, TestCa};
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    // Self-signed P-256 certificates made with `openssl req -x509 -subj ...` (see the names).
    const ALICE_3_ORGS: &[u8] = include_bytes!("testdata/alice-3orgs.der");
    const NO_CN: &[u8] = include_bytes!("testdata/no-cn.der");
    const TWO_CNS: &[u8] = include_bytes!("testdata/two-cns.der");
    const UTF8_CN: &[u8] = include_bytes!("testdata/utf8-cn.der");
    const MULTIVALUE_RDN: &[u8] = include_bytes!("testdata/multivalue-rdn.der");
    const PRINTABLE: &[u8] = include_bytes!("testdata/printable.der");
    const BMP: &[u8] = include_bytes!("testdata/bmp.der");

    /// Runs a future that never waits on I/O (authenticators here answer at once).
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    fn cert(cn: &str, orgs: &[&str]) -> (String, Vec<String>) {
        (cn.to_string(), orgs.iter().map(|o| o.to_string()).collect())
    }

    fn subject(der: &[u8]) -> (String, Vec<String>) {
        let peer = PeerCertificate::from_der(der).unwrap();
        assert_eq!(peer.chain, vec![der.to_vec()]);
        (peer.common_name, peer.organizations)
    }

    #[test]
    fn from_der_reads_cn_and_every_o_in_order() {
        assert_eq!(
            subject(ALICE_3_ORGS),
            cert("alice", &["system:masters", "dev", "ops"])
        );
        assert_eq!(subject(NO_CN), cert("", &["team-a"]));
        // Go keeps the last common name.
        assert_eq!(subject(TWO_CNS), cert("second", &["g1"]));
        assert_eq!(subject(UTF8_CN), cert("jöhn", &["équipe"]));
        assert_eq!(subject(MULTIVALUE_RDN), cert("bob", &["rdn-org", "after"]));
        assert_eq!(subject(PRINTABLE), cert("printable-user", &["grp one"]));
        assert_eq!(subject(BMP), cert("zoë", &["grp"]));
    }

    #[test]
    fn from_der_rejects_garbage() {
        assert!(PeerCertificate::from_der(&[]).is_err());
        assert!(PeerCertificate::from_der(b"not a certificate").is_err());
        assert!(PeerCertificate::from_der(&ALICE_3_ORGS[..ALICE_3_ORGS.len() - 10]).is_err());
        let mut trailing = ALICE_3_ORGS.to_vec();
        trailing.push(0);
        assert_eq!(
            PeerCertificate::from_der(&trailing).unwrap_err(),
            "x509: trailing data after the certificate"
        );
    }

    #[test]
    fn string_decoding_follows_go() {
        assert_eq!(
            decode_bmp_string(&[0, b'a', 0, 0xe9]).as_deref(),
            Some("aé")
        );
        assert_eq!(decode_bmp_string(&[0, b'a', 0, 0]).as_deref(), Some("a"));
        assert_eq!(decode_bmp_string(&[0, b'a', 0]), None);
        assert_eq!(decode_bmp_string(&[0xd8, 0x00]), None);
        assert_eq!(decode_bmp_string(&[0xff, 0xfe]), None);
        assert!(is_printable(b'*') && is_printable(b'&') && is_printable(b'\''));
        assert!(!is_printable(b'@') && !is_printable(b'_') && !is_printable(b'!'));
    }

    fn authenticate(
        authenticator: &X509Authenticator,
        peer: Option<&PeerCertificate>,
    ) -> AuthnOutcome {
        let headers = http::HeaderMap::new();
        let request = AuthnRequest {
            headers: &headers,
            peer_certificate: peer,
            token_memo: None,
        };
        block_on(authenticator.authenticate(&request))
    }

    fn peer(chain: &[&[u8]]) -> PeerCertificate {
        PeerCertificate::from_chain(chain.iter().map(|c| c.to_vec()).collect()).unwrap()
    }

    fn credential_id(leaf: &[u8]) -> String {
        format!("X509SHA256={}", hex::encode(Sha256::digest(leaf)))
    }

    fn failure(outcome: AuthnOutcome) -> String {
        match outcome {
            AuthnOutcome::Failed(reason) => reason,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    /// A client CA bundle of two CAs (the second one signing through an intermediate), a
    /// request-header CA, and a CA nobody trusts.
    struct Setup {
        _dir: tempfile::TempDir,
        first: TestCa,
        second: TestCa,
        intermediate: TestCa,
        proxy_ca: TestCa,
        stranger: TestCa,
        client_bundle: Arc<CaBundle>,
        proxy_bundle: Arc<CaBundle>,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let (first, second, proxy_ca, stranger) = (
            ca("client-ca-1"),
            ca("client-ca-2"),
            ca("front-proxy-ca"),
            ca("stranger"),
        );
        let intermediate = second.intermediate("client-intermediate");
        let client_pem = format!("{}{}", first.pem, second.pem);
        let client_bundle =
            Arc::new(CaBundle::load(bundle_file(&dir, "client-ca.crt", &client_pem)).unwrap());
        let proxy_bundle =
            Arc::new(CaBundle::load(bundle_file(&dir, "rh-ca.crt", &proxy_ca.pem)).unwrap());
        Setup {
            _dir: dir,
            first,
            second,
            intermediate,
            proxy_ca,
            stranger,
            client_bundle,
            proxy_bundle,
        }
    }

    #[test]
    fn verified_certificate_maps_to_user_with_credential_id() {
        let s = setup();
        let x509 = X509Authenticator::new(s.client_bundle.clone());
        let leaf = s.first.leaf("alice", &["system:masters", "dev"]);
        // With `system:authenticated` already added (the union would add it), so that the
        // user built with the connection is shared as it is by all its requests.
        let mut alice = UserInfo::new(
            "alice",
            vec![
                "system:masters".into(),
                "dev".into(),
                "system:authenticated".into(),
            ],
        );
        alice
            .extra
            .insert(CREDENTIAL_ID_KEY.into(), vec![credential_id(&leaf)]);
        assert_eq!(
            authenticate(&x509, Some(&peer(&[&leaf]))),
            AuthnOutcome::Authenticated(Arc::new(alice))
        );
        let id = credential_id(&leaf);
        assert_eq!(id.len(), "X509SHA256=".len() + 64);
        assert!(id[11..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));

        // The second CA of the bundle, through an intermediate the client sends.
        let leaf = s.intermediate.leaf("system:node:n1", &["system:nodes"]);
        match authenticate(&x509, Some(&peer(&[&leaf, &s.intermediate.der]))) {
            AuthnOutcome::Authenticated(user) => {
                assert_eq!(user.name, "system:node:n1");
                assert_eq!(user.groups, ["system:nodes", "system:authenticated"]);
                assert_eq!(user.extra[CREDENTIAL_ID_KEY], vec![credential_id(&leaf)]);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(authenticate(&x509, None), AuthnOutcome::NoCredential);
        assert_eq!(x509.name(), "x509");
    }

    #[test]
    fn unverifiable_certificates_fail() {
        let s = setup();
        let x509 = X509Authenticator::new(s.client_bundle.clone())
            .with_request_header_bundle(s.proxy_bundle.clone());
        let client = Some(rcgen::ExtendedKeyUsagePurpose::ClientAuth);
        let expired = s
            .second
            .leaf_with("old", &[], ((2000, 1, 1), (2001, 1, 1)), client.clone());
        let reason = failure(authenticate(&x509, Some(&peer(&[&expired]))));
        assert!(
            reason.starts_with("verifying certificate SN=") && reason.contains("has expired"),
            "{reason}"
        );
        let future = s
            .first
            .leaf_with("new", &[], ((2090, 1, 1), (2091, 1, 1)), client);
        let reason = failure(authenticate(&x509, Some(&peer(&[&future]))));
        assert!(reason.contains("is before 2090-01-01"), "{reason}");
        let reason = failure(authenticate(
            &x509,
            Some(&peer(&[&s.stranger.leaf("eve", &[])])),
        ));
        assert!(
            reason.ends_with("x509: certificate signed by unknown authority"),
            "{reason}"
        );
        // Without the intermediate the chain leads nowhere.
        let leaf = s.intermediate.leaf("bob", &[]);
        assert!(matches!(
            authenticate(&x509, Some(&peer(&[&leaf]))),
            AuthnOutcome::Failed(_)
        ));
        // A verified certificate that names no one.
        let reason = failure(authenticate(
            &x509,
            Some(&peer(&[&s.first.leaf("", &["team-a"])])),
        ));
        assert_eq!(
            reason,
            "client certificate has an empty subject common name"
        );
        // An identity without its chain cannot be verified.
        let bare = PeerCertificate {
            common_name: "admin".into(),
            organizations: vec!["system:masters".into()],
            chain: vec![],
            ..PeerCertificate::default()
        };
        assert!(matches!(
            authenticate(&x509, Some(&bare)),
            AuthnOutcome::Failed(_)
        ));
    }

    #[test]
    fn front_proxy_certificates_are_not_x509_users() {
        let s = setup();
        let proxy_leaf = s.proxy_ca.leaf("front-proxy-client", &[]);
        let proxy = peer(&[&proxy_leaf]);
        let x509 = X509Authenticator::new(s.client_bundle.clone())
            .with_request_header_bundle(s.proxy_bundle.clone());
        assert_eq!(
            authenticate(&x509, Some(&proxy)),
            AuthnOutcome::NoCredential
        );
        // Also once expired: it is still the proxy's, for the request-header authenticator.
        let expired = s.proxy_ca.leaf_with(
            "front-proxy-client",
            &[],
            ((2000, 1, 1), (2001, 1, 1)),
            None,
        );
        assert_eq!(
            authenticate(&x509, Some(&peer(&[&expired]))),
            AuthnOutcome::NoCredential
        );
        // Without knowing the request-header CA it is just an unknown authority.
        let plain = X509Authenticator::new(s.client_bundle.clone());
        assert!(matches!(
            authenticate(&plain, Some(&proxy)),
            AuthnOutcome::Failed(_)
        ));
        // When both flags name the same CA, its certificates are x509 users (as in kube).
        let shared = X509Authenticator::new(s.proxy_bundle.clone())
            .with_request_header_bundle(s.proxy_bundle.clone());
        assert!(matches!(
            authenticate(&shared, Some(&proxy)),
            AuthnOutcome::Authenticated(_)
        ));
    }

    #[test]
    fn a_ca_removed_from_the_bundle_stops_authenticating() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (ca("one"), ca("two"));
        let path = bundle_file(&dir, "ca.crt", &format!("{}{}", one.pem, two.pem));
        let bundle = Arc::new(
            CaBundle::load(&path)
                .unwrap()
                .with_check_interval(std::time::Duration::ZERO),
        );
        let x509 = X509Authenticator::new(bundle);
        let alice = peer(&[&one.leaf("alice", &[])]);
        assert!(matches!(
            authenticate(&x509, Some(&alice)),
            AuthnOutcome::Authenticated(_)
        ));
        replace(&path, &two.pem);
        let reason = failure(authenticate(&x509, Some(&alice)));
        assert!(reason.ends_with("signed by unknown authority"), "{reason}");
    }

    #[test]
    fn certificate_identifier_reads_like_kube() {
        let s = setup();
        let id = certificate_identifier(&s.intermediate.leaf("x", &[]));
        assert!(id.starts_with("SN="), "{id}");
        let (_, rest) = id.split_once(", SKID=").unwrap();
        let (skid, akid) = rest.split_once(", AKID=").unwrap();
        assert!(
            skid.is_empty() || skid.split(':').all(|b| b.len() == 2),
            "{id}"
        );
        assert!(
            !akid.is_empty() && akid.split(':').all(|b| b.len() == 2),
            "{id}"
        );
        assert_eq!(colon_hex(&[0xab, 0x01]), "AB:01");
        assert_eq!(certificate_identifier(b"junk"), "<unparsable certificate>");
        assert!(PeerCertificate::from_chain(vec![]).is_err());
    }
}

//! Client-certificate authentication, as kube's `x509.CommonNameUserConversion`: the subject
//! common name is the user name and every subject organization is a group.
//!
//! The TLS layer verifies the chain against the client CA and hands over the leaf as a
//! [`PeerCertificate`] (see [`PeerCertificate::from_der`]); this module only maps it to a
//! user.

use x509_parser::asn1_rs::Tag;
use x509_parser::oid_registry::{OID_X509_COMMON_NAME, OID_X509_ORGANIZATION_NAME};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

use super::{Authenticator, AuthnOutcome, AuthnRequest, PeerCertificate};
use crate::user::UserInfo;

impl PeerCertificate {
    /// Reads the subject common name and organizations of a DER certificate the way Go's
    /// `crypto/x509` fills `pkix.Name`: attributes in certificate order, the last common name
    /// wins, every organization is kept in order. Like Go, a subject attribute whose value is
    /// not a well-formed directory string makes the certificate unusable.
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
        Ok(identity)
    }
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

/// Authenticates requests by their verified client certificate.
#[derive(Debug, Clone, Copy, Default)]
pub struct X509Authenticator;

#[async_trait::async_trait]
impl Authenticator for X509Authenticator {
    fn name(&self) -> &'static str {
        "x509"
    }

    async fn authenticate(&self, request: &AuthnRequest<'_>) -> AuthnOutcome {
        let Some(certificate) = request.peer_certificate else {
            return AuthnOutcome::NoCredential;
        };
        if certificate.common_name.is_empty() {
            // kube skips such a certificate silently; here a presented credential that names no
            // one is a failure, so it can never end up as anonymous.
            return AuthnOutcome::Failed(
                "client certificate has an empty subject common name".to_string(),
            );
        }
        AuthnOutcome::Authenticated(UserInfo::new(
            certificate.common_name.clone(),
            certificate.organizations.clone(),
        ))
    }
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
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

    fn cert(cn: &str, orgs: &[&str]) -> PeerCertificate {
        PeerCertificate {
            common_name: cn.to_string(),
            organizations: orgs.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn from_der_reads_cn_and_every_o_in_order() {
        assert_eq!(
            PeerCertificate::from_der(ALICE_3_ORGS).unwrap(),
            cert("alice", &["system:masters", "dev", "ops"])
        );
        assert_eq!(
            PeerCertificate::from_der(NO_CN).unwrap(),
            cert("", &["team-a"])
        );
        // Go keeps the last common name.
        assert_eq!(
            PeerCertificate::from_der(TWO_CNS).unwrap(),
            cert("second", &["g1"])
        );
        assert_eq!(
            PeerCertificate::from_der(UTF8_CN).unwrap(),
            cert("jöhn", &["équipe"])
        );
        assert_eq!(
            PeerCertificate::from_der(MULTIVALUE_RDN).unwrap(),
            cert("bob", &["rdn-org", "after"])
        );
        assert_eq!(
            PeerCertificate::from_der(PRINTABLE).unwrap(),
            cert("printable-user", &["grp one"])
        );
        assert_eq!(
            PeerCertificate::from_der(BMP).unwrap(),
            cert("zoë", &["grp"])
        );
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

    fn authenticate(peer: Option<&PeerCertificate>) -> AuthnOutcome {
        let headers = http::HeaderMap::new();
        let request = AuthnRequest {
            headers: &headers,
            peer_certificate: peer,
        };
        block_on(X509Authenticator.authenticate(&request))
    }

    #[test]
    fn authenticator_maps_certificate_to_user() {
        let peer = PeerCertificate::from_der(ALICE_3_ORGS).unwrap();
        assert_eq!(
            authenticate(Some(&peer)),
            AuthnOutcome::Authenticated(UserInfo::new(
                "alice",
                vec!["system:masters".into(), "dev".into(), "ops".into()]
            ))
        );
        assert_eq!(
            authenticate(Some(&cert("node:n1", &[]))),
            AuthnOutcome::Authenticated(UserInfo::new("node:n1", vec![]))
        );
        assert_eq!(authenticate(None), AuthnOutcome::NoCredential);
        let no_cn = PeerCertificate::from_der(NO_CN).unwrap();
        assert!(matches!(
            authenticate(Some(&no_cn)),
            AuthnOutcome::Failed(_)
        ));
        assert_eq!(X509Authenticator.name(), "x509");
    }
}

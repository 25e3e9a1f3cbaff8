//! Authentication: turning a request's credentials into a [`UserInfo`].
//!
//! Each strategy implements [`Authenticator`]; [`union::UnionAuthenticator`] tries them in
//! order like kube's `union` package. A strategy that finds no credential of its kind answers
//! [`AuthnOutcome::NoCredential`]; one that finds a credential it cannot accept answers
//! [`AuthnOutcome::Failed`], which is a 401 and never falls back to anonymous.

pub mod bearer;
pub mod bootstrap;
pub mod ca_bundle;
pub mod cache;
pub mod jwt;
pub mod lookup;
pub mod request_header;
pub mod serviceaccount;
pub mod token_file;
pub mod union;
pub mod webhook;
pub mod x509;

use std::sync::Arc;

use crate::user::UserInfo;

/// The client certificate the TLS handshake presented, as the TLS layer hands it over.
///
/// The TLS layer accepts a chain that leads to any of the CAs it trusts (client CA and
/// request-header CA alike), so this says nothing about *which* CA signed it: each
/// authenticator verifies [`PeerCertificate::chain`] against its own bundle, on every request
/// (a connection may outlive the certificate, or the CA may have been removed since).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    /// Subject common name of the leaf (`chain[0]`).
    pub common_name: String,
    /// Every subject organization of the leaf, in order.
    pub organizations: Vec<String>,
    /// The presented chain in DER, leaf first, then the intermediates the client sent.
    pub chain: Vec<Vec<u8>>,
    /// Digests of `chain`, computed once when the connection's certificate is read (see
    /// [`PeerCertificate::from_chain`]) instead of on every request made over it.
    pub(crate) digests: Option<CertificateDigests>,
}

/// The per-connection digests of a [`PeerCertificate`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct CertificateDigests {
    /// The key of the CA bundle's cache of verified chains.
    pub(crate) chain: [u8; 32],
    /// The user the certificate names once it verifies: CN, every O, `system:authenticated`
    /// and kube's credential id (`X509SHA256=<hex of the leaf's SHA-256>`) in extra. Built
    /// with the connection and shared by every request over it.
    pub(crate) user: Arc<UserInfo>,
}

/// Leaves the DER bytes out: they would flood any log line the identity ends up in.
impl std::fmt::Debug for PeerCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerCertificate")
            .field("common_name", &self.common_name)
            .field("organizations", &self.organizations)
            .field("chain_len", &self.chain.len())
            .finish()
    }
}

/// What an authenticator may look at: the request headers and the verified client
/// certificate, if the TLS handshake presented one; and the connection's memo of its last
/// bearer token, when the connection keeps one (kubegate's TLS connections do).
#[derive(Debug, Clone, Copy)]
pub struct AuthnRequest<'a> {
    pub headers: &'a http::HeaderMap,
    pub peer_certificate: Option<&'a PeerCertificate>,
    pub token_memo: Option<&'a cache::TokenMemo>,
}

/// The result of one authenticator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthnOutcome {
    /// The credential was accepted. The user is shared: a cached credential's user is handed
    /// to every request that presents it without a copy.
    Authenticated(Arc<UserInfo>),
    /// The request carries no credential this authenticator understands.
    NoCredential,
    /// A credential was presented and rejected; the message is for logs, not for clients.
    Failed(String),
}

/// One way of authenticating a request.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync {
    /// A short name for logs and metrics (`x509`, `token-file`, ...).
    fn name(&self) -> &'static str;
    async fn authenticate(&self, request: &AuthnRequest<'_>) -> AuthnOutcome;

    /// The outcome if this authenticator can give it at once, without waiting on anything (a
    /// certificate, a cached token); `None`: ask [`Authenticator::authenticate`]. Lets the
    /// common case skip building and boxing a future per authenticator ([`authenticate`]
    /// tries this first).
    fn authenticate_now(&self, _request: &AuthnRequest<'_>) -> Option<AuthnOutcome> {
        None
    }
}

/// Asks `authenticator`, at once when it can answer so
/// ([`Authenticator::authenticate_now`]).
pub async fn authenticate(
    authenticator: &dyn Authenticator,
    request: &AuthnRequest<'_>,
) -> AuthnOutcome {
    match authenticator.authenticate_now(request) {
        Some(outcome) => outcome,
        None => authenticator.authenticate(request).await,
    }
}

//! Authentication: turning a request's credentials into a [`UserInfo`].
//!
//! Each strategy implements [`Authenticator`]; [`union::UnionAuthenticator`] tries them in
//! order like kube's `union` package. A strategy that finds no credential of its kind answers
//! [`AuthnOutcome::NoCredential`]; one that finds a credential it cannot accept answers
//! [`AuthnOutcome::Failed`], which is a 401 and never falls back to anonymous.

pub mod lookup;
pub mod union;
pub mod x509;

use crate::user::UserInfo;

/// The identity the TLS layer extracted from a verified client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    /// Subject common name.
    pub common_name: String,
    /// Every subject organization, in order.
    pub organizations: Vec<String>,
}

/// What an authenticator may look at: the request headers and the verified client
/// certificate, if the TLS handshake presented one.
#[derive(Debug, Clone, Copy)]
pub struct AuthnRequest<'a> {
    pub headers: &'a http::HeaderMap,
    pub peer_certificate: Option<&'a PeerCertificate>,
}

/// The result of one authenticator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthnOutcome {
    /// The credential was accepted.
    Authenticated(UserInfo),
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
}

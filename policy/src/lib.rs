//! # kubegate-policy
//!
//! Who is asking and what they may do: the request attributes kube-apiserver derives from a
//! path ([`RequestInfo`]), the authenticated identity ([`UserInfo`]), the authenticator and
//! authorizer traits with their implementations, and (in later stages) impersonation and flow
//! control. Nothing here reads storage: authorizers that need objects get them through traits
//! the gateway wires.
//!
//! Use: resolve a [`RequestInfo`] with [`request_info::resolve`], authenticate with an
//! [`authn::Authenticator`] (usually an [`authn::union::UnionAuthenticator`]), then ask an
//! [`authz::Authorizer`] about the [`authz::Attributes`].

pub mod authn;
pub mod authz;
pub mod flowcontrol;
pub mod https;
pub mod impersonation;
pub mod quote;
pub mod request_info;
pub mod throttle;
pub mod user;

pub use authn::{Authenticator, AuthnOutcome, AuthnRequest};
pub use authz::{Attributes, Authorizer, Decision};
pub use request_info::{RequestInfo, RequestInfoError};
pub use user::UserInfo;

//! The routing table: an immutable map from group-version to the remote backend that serves
//! it, rebuilt from the APIServices (and the Services and endpoints they name) on every change
//! and swapped in whole, so a request never waits for a rebuild and never sees half of one.
//! Group-versions absent from the table are served locally when the registry serves them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use pingora::utils::tls::{parse_x509, WrappedX509};

use super::apiservice::ApiService;
use super::proxy::{ClientCertificate, PooledPeer, ProxyIdentity};
use super::resolve::{Dialing, Location, ResolveError};

/// One remote APIService with where its requests go right now.
pub struct Backend {
    pub service: ApiService,
    pub location: Result<Location, ResolveError>,
    /// Roots for the backend's certificate, from `caBundle` (`None`: system roots, or
    /// verification off with `insecureSkipTLSVerify`).
    pub roots: Option<Arc<[WrappedX509]>>,
    /// Why `caBundle` is unusable, if it is.
    pub ca_error: Option<String>,
    /// Keeps pooled connections apart per trust: pingora's pool key covers the address, SNI
    /// and client certificate but not the roots a connection was verified with, so without
    /// this two APIServices with the same address and name but different `caBundle`s would
    /// share connections verified against only one of them.
    pub pool_key: u64,
    /// A digest of everything a probe or a document fetch depends on (the APIService's uid
    /// and spec, where it resolves to, the identity kubegate presents), but not its status:
    /// controllers compare it to act on a backend's changes only, so their own status
    /// writes, or another APIService's changes, do not set them off again.
    pub fingerprint: u64,
    /// How kubegate authenticates to this backend and forwards the caller.
    pub identity: Arc<ProxyIdentity>,
    /// The identity's client certificate when this backend was made: its peers present it
    /// (a renewed one comes with the next table, whose fingerprints change with it).
    pub client_cert: Option<Arc<ClientCertificate>>,
    next: AtomicUsize,
    /// The peers of forwarded requests, one per address, made on the first one.
    forward_peers: OnceLock<Vec<PooledPeer>>,
}

impl Backend {
    pub fn new(
        service: ApiService,
        location: Result<Location, ResolveError>,
        identity: Arc<ProxyIdentity>,
    ) -> Backend {
        let (roots, ca_error) = match &service.ca_bundle {
            Some(pem) => match parse_roots(pem) {
                Ok(roots) => (Some(roots), None),
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let pool_key = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            service.name.hash(&mut hasher);
            service.ca_bundle.hash(&mut hasher);
            service.insecure_skip_tls_verify.hash(&mut hasher);
            hasher.finish()
        };
        let client_cert = identity.client_certificate();
        let fingerprint = fingerprint(&service, &location, &identity, client_cert.as_ref());
        Backend {
            service,
            location,
            roots,
            ca_error,
            pool_key,
            fingerprint,
            identity,
            client_cert,
            next: AtomicUsize::new(0),
            forward_peers: OnceLock::new(),
        }
    }

    /// Which address the next request dials: round-robin over a Service's endpoints, the
    /// current one of a host's addresses (see [`Dialing`]).
    fn next_index(&self, location: &Location) -> Option<usize> {
        let count = location.addresses.len();
        if count == 0 {
            return None;
        }
        let turn = match location.dialing {
            Dialing::Spread => self.next.fetch_add(1, Ordering::Relaxed),
            Dialing::InOrder => self.next.load(Ordering::Relaxed),
        };
        Some(turn % count)
    }

    /// The next address to dial (see [`Backend::next_index`]).
    pub fn next_address(&self) -> Option<SocketAddr> {
        let location = self.location.as_ref().ok()?;
        location.addresses.get(self.next_index(location)?).copied()
    }

    /// How many addresses a request may try: each one once.
    pub fn address_count(&self) -> usize {
        self.location.as_ref().map_or(0, |l| l.addresses.len())
    }

    /// Takes over where `previous` (this APIService's backend in the table being replaced)
    /// was in its addresses, when they are the same: a rebuild of the table (after any
    /// APIService, Service or endpoints change) does not send a host's requests back to an
    /// address that already refused them, nor restart a round-robin.
    pub fn continue_from(&self, previous: &Backend) {
        let same = match (&self.location, &previous.location) {
            (Ok(now), Ok(before)) => now == before,
            _ => false,
        };
        if same {
            self.next
                .store(previous.next.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Records that `address` refused a connection: a host's next requests go to its next
    /// address (unless another request has moved on already). Endpoints of a Service stay in
    /// their round-robin, which moves on by itself.
    pub fn connect_failed(&self, address: SocketAddr) {
        let Ok(location) = &self.location else {
            return;
        };
        if location.dialing != Dialing::InOrder || location.addresses.len() < 2 {
            return;
        }
        let current = self.next.load(Ordering::Relaxed);
        if location.addresses.get(current % location.addresses.len()) == Some(&address) {
            // A lost race means another request already moved on from this address.
            let _ = self.next.compare_exchange(
                current,
                current.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// The peer for the next forwarded request (no upgrade; `read_timeout` per read), chosen
    /// as [`Backend::next_address`] chooses. The peers are made once per backend:
    /// `read_timeout` is the server's request timeout, the same for every call.
    pub fn next_forward_peer(&self, read_timeout: Duration) -> Option<(SocketAddr, &PooledPeer)> {
        let location = self.location.as_ref().ok()?;
        let peers = self.forward_peers.get_or_init(|| {
            location
                .addresses
                .iter()
                .map(|address| {
                    PooledPeer::new(super::proxy::peer(
                        self,
                        *address,
                        false,
                        Some(read_timeout),
                    ))
                })
                .collect()
        });
        let i = self.next_index(location)?;
        Some((*location.addresses.get(i)?, peers.get(i)?))
    }

    /// Why requests cannot be sent now (kube-aggregator answers 503 unless the APIService's
    /// `Available` condition is True).
    pub fn unavailable(&self) -> Option<String> {
        match &self.service.available {
            Some(condition) if condition.status => None,
            Some(condition) => Some(format!(
                "APIService {} is not available ({}): {}",
                self.service.name, condition.reason, condition.message
            )),
            None => Some(format!(
                "APIService {} has not been checked for availability yet",
                self.service.name
            )),
        }
    }
}

/// See [`Backend::fingerprint`].
fn fingerprint(
    service: &ApiService,
    location: &Result<Location, ResolveError>,
    identity: &Arc<ProxyIdentity>,
    client_cert: Option<&Arc<ClientCertificate>>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    service.uid.hash(&mut hasher);
    service.group.hash(&mut hasher);
    service.version.hash(&mut hasher);
    service.target.hash(&mut hasher);
    service.ca_bundle.hash(&mut hasher);
    service.insecure_skip_tls_verify.hash(&mut hasher);
    // Priorities order the merged documents.
    service.group_priority_minimum.hash(&mut hasher);
    service.version_priority.hash(&mut hasher);
    match location {
        Ok(location) => {
            location.server_name.hash(&mut hasher);
            location.http_host.hash(&mut hasher);
            location.addresses.hash(&mut hasher);
            location.dialing.hash(&mut hasher);
            location.base_path.hash(&mut hasher);
        }
        Err(error) => {
            error.reason.hash(&mut hasher);
            error.message.hash(&mut hasher);
        }
    }
    // Another identity, or a renewed certificate of this one, is probed and fetched with again.
    (Arc::as_ptr(identity) as usize).hash(&mut hasher);
    client_cert
        .map(|c| Arc::as_ptr(c) as usize)
        .hash(&mut hasher);
    hasher.finish()
}

/// PEM certificates in the form pingora's TLS connector takes; each is parsed first because
/// pingora's own parser panics on bad DER.
fn parse_roots(pem: &[u8]) -> Result<Arc<[WrappedX509]>, String> {
    let mut roots = Vec::new();
    for cert in rustls_pemfile::certs(&mut &pem[..]) {
        let der = cert.map_err(|e| format!("caBundle: invalid PEM: {e}"))?;
        x509_parser::parse_x509_certificate(der.as_ref())
            .map_err(|e| format!("caBundle: invalid certificate: {e}"))?;
        roots.push(WrappedX509::new(der.as_ref().to_vec(), parse_x509));
    }
    if roots.is_empty() {
        return Err("caBundle: no certificate found".into());
    }
    Ok(roots.into())
}

/// A group's remote backends by version.
type ByVersion = HashMap<String, Arc<Backend>, ahash::RandomState>;

/// The immutable table requests read.
#[derive(Default)]
pub struct RouteTable {
    /// Remote backends by group, then version: every request looks its group-version up, so
    /// the lookup borrows the request's strings (no key is built) and uses aHash (keyed per
    /// process; the keys are the APIServices', not the clients').
    backends: HashMap<String, ByVersion, ahash::RandomState>,
    /// Every APIService (local ones too), by name: discovery and availability read these.
    pub services: Vec<ApiService>,
}

impl RouteTable {
    pub fn new(services: Vec<ApiService>, backends: Vec<Arc<Backend>>) -> RouteTable {
        let mut by_group: HashMap<String, ByVersion, ahash::RandomState> = HashMap::default();
        for backend in backends {
            by_group
                .entry(backend.service.group.clone())
                .or_default()
                .insert(backend.service.version.clone(), backend);
        }
        RouteTable {
            backends: by_group,
            services,
        }
    }

    /// The remote backend for a group-version, if an APIService sends it elsewhere.
    pub fn remote(&self, group: &str, version: &str) -> Option<&Arc<Backend>> {
        if self.backends.is_empty() {
            return None;
        }
        self.backends.get(group)?.get(version)
    }

    pub fn backends(&self) -> impl Iterator<Item = &Arc<Backend>> {
        self.backends.values().flat_map(HashMap::values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregator::proxy::Forwarding;

    fn backend(group: &str, version: &str) -> Arc<Backend> {
        let identity = Arc::new(ProxyIdentity::without_credentials(Forwarding::FrontProxy));
        Arc::new(Backend::new(
            ApiService::remote_for_tests(group, version, "ns"),
            Ok(Location {
                server_name: "api.ns.svc".into(),
                http_host: "api.ns.svc".into(),
                addresses: vec!["127.0.0.1:8443".parse().expect("addr")],
                dialing: Dialing::Spread,
                base_path: String::new(),
            }),
            identity,
        ))
    }

    /// A backend at two addresses, dialled as `dialing` says.
    fn two_addresses(dialing: Dialing) -> Backend {
        let identity = Arc::new(ProxyIdentity::without_credentials(Forwarding::FrontProxy));
        Backend::new(
            ApiService::remote_for_tests("a.example.com", "v1", "ns"),
            Ok(Location {
                server_name: "api.example.com".into(),
                http_host: "api.example.com".into(),
                addresses: vec![
                    "127.0.0.1:8443".parse().expect("addr"),
                    "127.0.0.2:8443".parse().expect("addr"),
                ],
                dialing,
                base_path: String::new(),
            }),
            identity,
        )
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("addr")
    }

    #[test]
    fn a_hosts_addresses_are_used_in_order_moving_on_only_when_one_refuses() {
        let b = two_addresses(Dialing::InOrder);
        let picks: Vec<_> = (0..3).filter_map(|_| b.next_address()).collect();
        assert_eq!(picks, [addr("127.0.0.1:8443"); 3]);
        // A failure reported for an address no longer current changes nothing.
        b.connect_failed(addr("127.0.0.2:8443"));
        assert_eq!(b.next_address(), Some(addr("127.0.0.1:8443")));
        b.connect_failed(addr("127.0.0.1:8443"));
        assert_eq!(b.next_address(), Some(addr("127.0.0.2:8443")));
        assert_eq!(b.next_address(), Some(addr("127.0.0.2:8443")));
        // After the last address, the first again.
        b.connect_failed(addr("127.0.0.2:8443"));
        assert_eq!(b.next_address(), Some(addr("127.0.0.1:8443")));
        assert_eq!(b.address_count(), 2);
    }

    #[test]
    fn endpoints_stay_round_robin_whatever_refuses() {
        let b = two_addresses(Dialing::Spread);
        b.connect_failed(addr("127.0.0.1:8443"));
        let picks: Vec<_> = (0..4).filter_map(|_| b.next_address()).collect();
        assert_eq!(picks[0], picks[2]);
        assert_ne!(picks[0], picks[1]);
    }

    #[test]
    fn a_rebuilt_table_keeps_a_hosts_current_address_only_for_the_same_location() {
        let before = two_addresses(Dialing::InOrder);
        before.connect_failed(addr("127.0.0.1:8443"));
        let same = two_addresses(Dialing::InOrder);
        same.continue_from(&before);
        assert_eq!(same.next_address(), Some(addr("127.0.0.2:8443")));

        let mut moved = two_addresses(Dialing::InOrder);
        if let Ok(location) = &mut moved.location {
            location.addresses.reverse();
        }
        moved.continue_from(&before);
        assert_eq!(
            moved.next_address(),
            Some(addr("127.0.0.2:8443")),
            "starts at its own first"
        );
    }

    #[test]
    fn group_versions_find_their_own_backend_only() {
        let table = RouteTable::new(
            Vec::new(),
            vec![
                backend("a.example.com", "v1"),
                backend("a.example.com", "v2"),
                backend("b.example.com", "v1"),
            ],
        );
        for (group, version) in [
            ("a.example.com", "v1"),
            ("a.example.com", "v2"),
            ("b.example.com", "v1"),
        ] {
            let found = table.remote(group, version).expect("routed");
            assert_eq!(
                (found.service.group.as_str(), found.service.version.as_str()),
                (group, version)
            );
        }
        assert!(table.remote("b.example.com", "v2").is_none());
        assert!(table.remote("c.example.com", "v1").is_none());
        // Not a key made of the two with a separator.
        assert!(table.remote("a.example.com/v1", "").is_none());
        assert_eq!(table.backends().count(), 3);
        assert!(RouteTable::default()
            .remote("a.example.com", "v1")
            .is_none());
    }
}

//! Service resolution: turns an APIService's target into the addresses to dial and the name
//! to verify the backend's certificate for, as kube-aggregator's `ResolveEndpoint` does —
//! a ready endpoint of kubegate's own EndpointSlices/Endpoints for the Service's port, the
//! host of an ExternalName Service, `<name>.<namespace>.svc` with cluster DNS, or the host of
//! a `kubegate.io/backend-url`. Failures carry the reasons the availability condition shows.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

use super::apiservice::Target;
use super::availability::url_host;

/// How `spec.service` becomes an address (`aggregator.serviceResolution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Endpoints,
    ClusterDns,
}

/// Where to send a backend's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The TLS server name (SNI) and the name the certificate must be valid for.
    pub server_name: String,
    /// The `Host` requests carry: the server name, except for an ExternalName Service,
    /// whose host and port kube-aggregator sends (its resolved URL's authority), and a URL
    /// target, whose authority it is.
    pub http_host: String,
    /// The ready endpoints, or every address a host name resolved to (IPv4 first).
    pub addresses: Vec<SocketAddr>,
    /// How requests use `addresses`.
    pub dialing: Dialing,
    /// A path prefix put before every request path (only from a backend URL).
    pub base_path: String,
}

/// How requests use a location's addresses. Either way an address that refuses a connection
/// is passed over for the next one within the same request (nothing was sent yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialing {
    /// Endpoints of a Service: requests are spread over all of them, round-robin.
    Spread,
    /// One host's addresses: every request goes to the same one until it fails to connect,
    /// then to the next, as Go's dialer tries a name's addresses in order (kube-aggregator
    /// for an ExternalName Service, client-go for a cluster's URL).
    InOrder,
}

/// Why a target could not be resolved: kube's availability reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveError {
    pub reason: &'static str,
    pub message: String,
}

/// Read access to the objects resolution needs (the watch cache, in the gateway).
pub trait ObjectSource: Sync {
    fn service(&self, namespace: &str, name: &str) -> Option<Value>;
    fn endpoints(&self, namespace: &str, name: &str) -> Option<Value>;
    /// Every EndpointSlice in `namespace`.
    fn endpoint_slices(&self, namespace: &str) -> Vec<Value>;
}

/// Resolves `target`; host names are looked up with the system resolver.
pub async fn resolve(
    target: &Target,
    objects: &dyn ObjectSource,
    mode: Resolution,
) -> Result<Location, ResolveError> {
    match target {
        Target::Local => Err(ResolveError {
            reason: "Local",
            message: "Local APIServices are always available".into(),
        }),
        // The routing table resolves these through the configured delegate.
        Target::Delegate => Err(ResolveError {
            reason: "ServiceNotFound",
            message: "delegated APIServices are resolved through the delegate configuration".into(),
        }),
        Target::Url { host, port, path } => Ok(Location {
            server_name: host.clone(),
            http_host: if *port == 443 {
                url_host(host)
            } else {
                format!("{}:{port}", url_host(host))
            },
            addresses: lookup(host, *port).await?,
            dialing: Dialing::InOrder,
            base_path: path.clone(),
        }),
        Target::Service {
            namespace,
            name,
            port,
        } => {
            let server_name = format!("{name}.{namespace}.svc");
            if mode == Resolution::ClusterDns {
                return Ok(Location {
                    addresses: lookup(&server_name, *port).await?,
                    http_host: server_name.clone(),
                    server_name,
                    dialing: Dialing::InOrder,
                    base_path: String::new(),
                });
            }
            let service = objects
                .service(namespace, name)
                .ok_or_else(|| ResolveError {
                    reason: "ServiceNotFound",
                    message: format!("service/{name} in {namespace:?} is not present"),
                })?;
            if service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
                let host = service
                    .pointer("/spec/externalName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                // Dialled at the ExternalName host, verified as the Service's in-cluster name,
                // as kube-aggregator's TLS config names it whatever the Service resolves to
                // (kubernetes#123808, which would have verified the host, was not merged).
                return Ok(Location {
                    addresses: lookup(&host, *port).await?,
                    http_host: format!("{}:{port}", url_host(&host)),
                    server_name,
                    dialing: Dialing::InOrder,
                    base_path: String::new(),
                });
            }
            let service_port = find_service_port(&service, *port).ok_or_else(|| ResolveError {
                reason: "ServicePortError",
                message: format!("service/{name} in {namespace:?} is not listening on port {port}"),
            })?;
            let addresses = ready_endpoints(objects, namespace, name, &service_port)?;
            Ok(Location {
                http_host: server_name.clone(),
                server_name,
                addresses,
                dialing: Dialing::Spread,
                base_path: String::new(),
            })
        }
    }
}

/// The Service port an APIService names: endpoints are matched to it by its name.
#[derive(Debug)]
struct ServicePort {
    name: String,
}

fn find_service_port(service: &Value, port: u16) -> Option<ServicePort> {
    service
        .pointer("/spec/ports")?
        .as_array()?
        .iter()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .map(|p| ServicePort {
            name: p
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        })
}

/// Ready addresses for the port: EndpointSlices labelled for the Service when there are any,
/// else the Endpoints object of the same name.
fn ready_endpoints(
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    port: &ServicePort,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let missing = || ResolveError {
        reason: "MissingEndpoints",
        message: format!(
            "endpoints for service/{name} in {namespace:?} have no addresses with port name {:?}",
            port.name
        ),
    };
    let slices: Vec<Value> = objects
        .endpoint_slices(namespace)
        .into_iter()
        .filter(|s| {
            s.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(name)
        })
        .collect();
    if !slices.is_empty() {
        let mut addresses = Vec::new();
        for slice in &slices {
            let Some(number) = slice_port(slice, &port.name) else {
                continue;
            };
            for endpoint in slice
                .get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                // kube counts an endpoint ready unless it says otherwise.
                if endpoint
                    .pointer("/conditions/ready")
                    .and_then(Value::as_bool)
                    == Some(false)
                {
                    continue;
                }
                for ip in endpoint
                    .get("addresses")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter_map(|a| a.parse::<IpAddr>().ok())
                {
                    addresses.push(SocketAddr::new(ip, number));
                }
            }
        }
        return if addresses.is_empty() {
            Err(missing())
        } else {
            Ok(addresses)
        };
    }
    let endpoints = objects
        .endpoints(namespace, name)
        .ok_or_else(|| ResolveError {
            reason: "EndpointsNotFound",
            message: format!("cannot find endpoints for service/{name} in {namespace:?}"),
        })?;
    let mut addresses = Vec::new();
    for subset in endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let number = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port.name)
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok());
        // As kube's ResolveEndpoint: only a port named as the Service's counts; a subset
        // without one has no address for this Service port (the Service's targetPort is not
        // a promise that anything listens there).
        let Some(number) = number else {
            continue;
        };
        for ip in subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("ip").and_then(Value::as_str))
            .filter_map(|a| a.parse::<IpAddr>().ok())
        {
            addresses.push(SocketAddr::new(ip, number));
        }
    }
    if addresses.is_empty() {
        Err(missing())
    } else {
        Ok(addresses)
    }
}

fn slice_port(slice: &Value, name: &str) -> Option<u16> {
    slice
        .get("ports")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == name)
        .and_then(|p| p.get("port").and_then(Value::as_u64))
        .and_then(|p| u16::try_from(p).ok())
}

/// Looks a host up (an IP literal needs no lookup).
async fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(found) => {
            // Every address, IPv4 first (`localhost` often resolves to ::1 first while
            // servers bind 127.0.0.1 only), each once; they are dialled in this order.
            let mut addresses: Vec<SocketAddr> = Vec::new();
            for address in found {
                if !addresses.contains(&address) {
                    addresses.push(address);
                }
            }
            addresses.sort_by_key(|a| !a.is_ipv4());
            if addresses.is_empty() {
                Err(ResolveError {
                    reason: "ServiceAccessError",
                    message: format!("no addresses for host {host:?}"),
                })
            } else {
                Ok(addresses)
            }
        }
        Err(e) => Err(ResolveError {
            reason: "ServiceAccessError",
            message: format!("resolving {host:?}: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Objects {
        services: HashMap<String, Value>,
        endpoints: HashMap<String, Value>,
        slices: Vec<Value>,
    }

    impl ObjectSource for Objects {
        fn service(&self, namespace: &str, name: &str) -> Option<Value> {
            self.services.get(&format!("{namespace}/{name}")).cloned()
        }
        fn endpoints(&self, namespace: &str, name: &str) -> Option<Value> {
            self.endpoints.get(&format!("{namespace}/{name}")).cloned()
        }
        fn endpoint_slices(&self, _namespace: &str) -> Vec<Value> {
            self.slices.clone()
        }
    }

    fn service_target() -> Target {
        Target::Service {
            namespace: "wardle".into(),
            name: "api".into(),
            port: 443,
        }
    }

    fn with_service() -> Objects {
        let mut objects = Objects::default();
        objects.services.insert(
            "wardle/api".into(),
            json!({"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}),
        );
        objects
    }

    #[tokio::test]
    async fn missing_service_and_port_are_reported_as_kube_does() {
        let objects = Objects::default();
        let err = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect_err("no service");
        assert_eq!(err.reason, "ServiceNotFound");
        assert_eq!(err.message, "service/api in \"wardle\" is not present");
        let mut objects = with_service();
        objects.services.insert(
            "wardle/api".into(),
            json!({"spec": {"ports": [{"port": 80}]}}),
        );
        let err = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect_err("no port");
        assert_eq!(err.reason, "ServicePortError");
    }

    #[tokio::test]
    async fn endpoints_give_ready_addresses_on_the_named_port() {
        let mut objects = with_service();
        let err = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect_err("no endpoints");
        assert_eq!(err.reason, "EndpointsNotFound");
        objects.endpoints.insert(
            "wardle/api".into(),
            json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}, {"ip": "127.0.0.2"}],
                                "notReadyAddresses": [{"ip": "127.0.0.9"}],
                                "ports": [{"name": "https", "port": 8443}]}]}),
        );
        let location = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect("resolved");
        assert_eq!(location.server_name, "api.wardle.svc");
        assert_eq!(
            location.addresses,
            vec![
                "127.0.0.1:8443".parse().expect("addr"),
                "127.0.0.2:8443".parse().expect("addr")
            ]
        );
        objects
            .endpoints
            .insert("wardle/api".into(), json!({"subsets": []}));
        let err = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect_err("empty");
        assert_eq!(err.reason, "MissingEndpoints");
        // A subset whose port is not the Service port's name offers nothing for it, not even
        // on the Service's targetPort (8443).
        objects.endpoints.insert(
            "wardle/api".into(),
            json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                "ports": [{"port": 9443}]}]}),
        );
        let err = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect_err("no port named https");
        assert_eq!(err.reason, "MissingEndpoints");
    }

    #[tokio::test]
    async fn endpoint_slices_win_and_skip_unready() {
        let mut objects = with_service();
        objects.slices.push(json!({
            "metadata": {"labels": {"kubernetes.io/service-name": "api"}},
            "ports": [{"name": "https", "port": 9443}],
            "endpoints": [
                {"addresses": ["127.0.0.3"], "conditions": {"ready": true}},
                {"addresses": ["127.0.0.4"], "conditions": {"ready": false}},
                {"addresses": ["127.0.0.5"]}
            ]
        }));
        objects.slices.push(json!({
            "metadata": {"labels": {"kubernetes.io/service-name": "other"}},
            "ports": [{"name": "https", "port": 1}],
            "endpoints": [{"addresses": ["127.0.0.6"]}]
        }));
        let location = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect("resolved");
        assert_eq!(
            location.addresses,
            vec![
                "127.0.0.3:9443".parse().expect("addr"),
                "127.0.0.5:9443".parse().expect("addr")
            ]
        );
    }

    #[tokio::test]
    async fn an_external_name_is_dialled_and_the_service_name_verified() {
        let mut objects = Objects::default();
        objects.services.insert(
            "wardle/api".into(),
            json!({"spec": {"type": "ExternalName", "externalName": "localhost"}}),
        );
        let location = resolve(&service_target(), &objects, Resolution::Endpoints)
            .await
            .expect("resolved");
        assert_eq!(location.server_name, "api.wardle.svc");
        // kube-aggregator's Host is the resolved URL's authority: the external host and port.
        assert_eq!(location.http_host, "localhost:443");
        assert!(location.addresses.iter().all(|a| a.ip().is_loopback()));
        assert!(location.addresses.iter().all(|a| a.port() == 443));
    }
}

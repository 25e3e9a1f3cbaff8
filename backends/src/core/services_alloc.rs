//! What kube does to a Service before validating it: `SetDefaults_Service`, the update
//! strategy's `dropTypeDependentFields`, the REST storage's `patchAllocatedValues` and
//! `NormalizeClusterIPs`, and allocation of the cluster IP, IP families, node ports and
//! health-check node port.
//!
//! Cluster IPs and node ports start from a hash of namespace/name and move on past values
//! other Services hold (`service_allocations.rs`, which also makes validation refuse a
//! user-chosen value already in use); without that record (a registry built without it, as
//! in unit tests) the hash alone decides.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::netutil::{is_ipv6, parse_ip};
use super::service_allocations::{allocations_of, owner_of, Allocated, ServiceAllocations};
use super::{child_object, items, namespace_and_name, str_at};

/// The service network kube-apiserver uses by default (`--service-cluster-ip-range`).
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
const CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const CIDR_SIZE: u32 = 1 << 20;

/// The node port range kube-apiserver uses by default (`--service-node-port-range`).
pub const NODE_PORT_MIN: i64 = 30000;
pub const NODE_PORT_MAX: i64 = 32767;

/// The address of `default/kubernetes`: the first one in the range, as kube reserves it.
const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

fn hash(input: &str) -> u64 {
    let digest = Sha256::digest(input.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

/// The first addresses of the range, which kube's allocator hands out only when the rest is
/// full, leaving them to Services that name their address (KEP-3070; `calculateRangeOffset`:
/// a sixteenth of the range, at least 16, at most 256).
const CLUSTER_IP_STATIC_BAND: u32 = 256;

/// The first node ports of the range, kept for Services that name theirs in the same way
/// (KEP-3668: a 32nd of the range, at least 16, at most 128: 86 of the default 2,768).
const NODE_PORT_STATIC_BAND: i64 = {
    let size = NODE_PORT_MAX - NODE_PORT_MIN + 1;
    let offset = size / 32;
    if offset < 16 {
        16
    } else if offset > 128 {
        128
    } else {
        offset
    }
};

/// The cluster IP a service gets: a stable hash of `namespace/name` into the dynamic part of
/// [`SERVICE_CIDR`] (after the static band, before the broadcast address); `default/kubernetes`
/// gets the range's first address.
pub fn cluster_ip_for(namespace: &str, name: &str) -> Ipv4Addr {
    if namespace == "default" && name == "kubernetes" {
        return KUBERNETES_SERVICE_IP;
    }
    let span = u64::from(CIDR_SIZE - 1 - CLUSTER_IP_STATIC_BAND);
    let offset = CLUSTER_IP_STATIC_BAND + (hash(&format!("{namespace}/{name}")) % span) as u32;
    Ipv4Addr::from(CIDR_BASE + offset)
}

/// Whether an address is one kube's allocator for [`SERVICE_CIDR`] can give: inside it, but
/// neither the network address nor (IPv4) the broadcast address.
pub(crate) fn in_service_cidr(ip: &str) -> bool {
    match parse_ip(ip) {
        Some(IpAddr::V4(v4)) => {
            let offset = u32::from(v4).wrapping_sub(CIDR_BASE);
            offset > 0 && offset < CIDR_SIZE - 1
        }
        _ => false,
    }
}

/// A node port for one port of a service: a stable hash into the dynamic part of the node
/// port range (after its static band).
pub fn node_port_for(namespace: &str, name: &str, port_key: &str) -> i64 {
    let first = NODE_PORT_MIN + NODE_PORT_STATIC_BAND;
    let span = (NODE_PORT_MAX - first + 1) as u64;
    first + (hash(&format!("{namespace}/{name}/{port_key}")) % span) as i64
}

fn spec(object: &Value) -> &Value {
    object.get("spec").unwrap_or(&Value::Null)
}

pub(crate) fn service_type(object: &Value) -> &str {
    str_at(object, "/spec/type")
}

/// kube's `needsClusterIP`: everything but ExternalName has (or is headless instead of) one.
pub(crate) fn needs_cluster_ip(object: &Value) -> bool {
    service_type(object) != "ExternalName"
}

fn needs_node_port(object: &Value) -> bool {
    matches!(service_type(object), "NodePort" | "LoadBalancer")
}

/// kube's `NeedsHealthCheck`: a LoadBalancer that keeps traffic node-local.
pub(crate) fn needs_health_check(object: &Value) -> bool {
    service_type(object) == "LoadBalancer"
        && str_at(object, "/spec/externalTrafficPolicy") == "Local"
}

/// kube's `ExternallyAccessible`.
pub(crate) fn externally_accessible(object: &Value) -> bool {
    match service_type(object) {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => !items(object.pointer("/spec/externalIPs")).is_empty(),
        _ => false,
    }
}

/// A service without a virtual IP (`clusterIP: None`).
pub(crate) fn is_headless(object: &Value) -> bool {
    str_at(object, "/spec/clusterIP") == "None"
}

/// Defaults, then allocation, for a new service.
pub(crate) fn prepare_create(object: &mut Value, allocations: Option<&ServiceAllocations>) {
    set_defaults(object);
    normalize_cluster_ips(object, None);
    allocate(object, None, allocations);
    reserve_chosen(object, allocations);
}

/// Defaults, carried-over allocations, then allocation of anything new, for an update.
pub(crate) fn prepare_update(
    object: &mut Value,
    old: &Value,
    allocations: Option<&ServiceAllocations>,
) {
    set_defaults(object);
    drop_type_dependent_fields(object, old);
    patch_allocated_values(object, old);
    normalize_cluster_ips(object, Some(old));
    allocate(object, Some(old), allocations);
    reserve_chosen(object, allocations);
}

/// Reserves the values the client chose, where no other Service holds them, so a concurrent
/// write asking for the same is refused; one held elsewhere is left for validation to refuse.
fn reserve_chosen(object: &Value, allocations: Option<&ServiceAllocations>) {
    if let Some(allocations) = allocations {
        let owner = owner_of(object);
        for value in allocations_of(object) {
            allocations.reserve(value, &owner);
        }
    }
}

/// Addresses to try for a Service whose hash says `start`, as kube's allocator tries them: the
/// dynamic part of the range from `start` on (wrapping), then the static band, without the
/// network, `kubernetes` and broadcast addresses.
fn cluster_ip_candidates(start: Ipv4Addr) -> impl Iterator<Item = Allocated> {
    let dynamic = CIDR_SIZE - 1 - CLUSTER_IP_STATIC_BAND;
    let from = u32::from(start)
        .wrapping_sub(CIDR_BASE)
        .saturating_sub(CLUSTER_IP_STATIC_BAND)
        % dynamic;
    (0..dynamic)
        .map(move |i| CLUSTER_IP_STATIC_BAND + (from + i) % dynamic)
        .chain(2..CLUSTER_IP_STATIC_BAND)
        .map(|offset| Allocated::ClusterIp(Ipv4Addr::from(CIDR_BASE + offset)))
}

/// `SetDefaults_Service`.
fn set_defaults(object: &mut Value) {
    let Some(spec) = child_object(object, "spec") else {
        return;
    };
    let affinity = default_str(spec, "sessionAffinity", "None");
    if affinity == "None" {
        spec.remove("sessionAffinityConfig");
    } else if affinity == "ClientIP"
        && spec
            .get("sessionAffinityConfig")
            .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
            .is_none_or(Value::is_null)
    {
        spec.insert(
            "sessionAffinityConfig".into(),
            json!({"clientIP": {"timeoutSeconds": 10800}}),
        );
    }
    let svc_type = default_str(spec, "type", "ClusterIP");
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_str(port, "protocol", "TCP");
            let unset = match port.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                _ => false,
            };
            if unset {
                let number = port.get("port").cloned().unwrap_or(json!(0));
                port.insert("targetPort".into(), number);
            }
        }
    }
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        default_str(spec, "internalTrafficPolicy", "Cluster");
    }
    if svc_type == "LoadBalancer"
        && spec
            .get("allocateLoadBalancerNodePorts")
            .is_none_or(Value::is_null)
    {
        spec.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
    let accessible = matches!(svc_type.as_str(), "LoadBalancer" | "NodePort")
        || (svc_type == "ClusterIP" && !items(spec.get("externalIPs")).is_empty());
    if accessible {
        default_str(spec, "externalTrafficPolicy", "Cluster");
    }
}

/// Sets `map[key]` to `default` when unset or empty; returns the resulting value.
fn default_str(map: &mut Map<String, Value>, key: &str, default: &str) -> String {
    let current = map.get(key).and_then(Value::as_str).unwrap_or("");
    if current.is_empty() {
        map.insert(key.into(), json!(default));
        return default.to_string();
    }
    current.to_string()
}

fn node_ports(object: &Value) -> HashSet<i64> {
    items(object.pointer("/spec/ports"))
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|n| *n != 0)
        .collect()
}

fn spec_field<'a>(object: &'a Value, key: &str) -> Option<&'a Value> {
    spec(object).get(key).filter(|v| !v.is_null())
}

fn same_field(a: &Value, b: &Value, key: &str) -> bool {
    spec_field(a, key) == spec_field(b, key)
}

fn remove_spec_fields(object: &mut Value, keys: &[&str]) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        for key in keys {
            spec.remove(*key);
        }
    }
}

/// kube's `dropTypeDependentFields`: when the type changes, fields the old type needed
/// (and kube may have filled in) go, unless the user changed them too (then validation
/// has its say).
fn drop_type_dependent_fields(object: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && !needs_cluster_ip(object) {
        if same_field(object, old, "clusterIP") && same_field(object, old, "clusterIPs") {
            remove_spec_fields(object, &["clusterIP", "clusterIPs"]);
        }
        if same_field(object, old, "ipFamilies") {
            remove_spec_fields(object, &["ipFamilies"]);
        }
        if same_field(object, old, "ipFamilyPolicy") {
            remove_spec_fields(object, &["ipFamilyPolicy"]);
        }
    }
    if needs_node_port(old)
        && !needs_node_port(object)
        && node_ports(old).is_superset(&node_ports(object))
    {
        if let Some(ports) = object
            .pointer_mut("/spec/ports")
            .and_then(Value::as_array_mut)
        {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                port.remove("nodePort");
            }
        }
    }
    if needs_health_check(old)
        && !needs_health_check(object)
        && same_field(object, old, "healthCheckNodePort")
    {
        remove_spec_fields(object, &["healthCheckNodePort"]);
    }
    if service_type(old) == "LoadBalancer" && service_type(object) != "LoadBalancer" {
        if same_field(object, old, "allocateLoadBalancerNodePorts") {
            remove_spec_fields(object, &["allocateLoadBalancerNodePorts"]);
        }
        if same_field(object, old, "loadBalancerClass") {
            remove_spec_fields(object, &["loadBalancerClass"]);
        }
    }
    if externally_accessible(old)
        && !externally_accessible(object)
        && same_field(object, old, "externalTrafficPolicy")
    {
        remove_spec_fields(object, &["externalTrafficPolicy"]);
    }
    if service_type(object) != "LoadBalancer" {
        if let Some(status) = child_object(object, "status") {
            status.insert("loadBalancer".into(), json!({}));
        }
    }
    // kube drops internalTrafficPolicy from ExternalName Services when it reads them
    // (`defaultOnReadInternalTrafficPolicy`): one kept from the old type is never seen.
    if service_type(object) == "ExternalName" {
        remove_spec_fields(object, &["internalTrafficPolicy"]);
    }
}

/// kube's `patchAllocatedValues`: a client that omits allocated values (a PUT built from
/// a manifest) keeps the ones it had, so updates are idempotent.
fn patch_allocated_values(object: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(object) {
        let new_ip = str_at(object, "/spec/clusterIP").is_empty();
        let new_ips = items(object.pointer("/spec/clusterIPs")).is_empty();
        let old_ip = spec_field(old, "clusterIP").cloned();
        let old_ips = spec_field(old, "clusterIPs").cloned();
        if let Some(spec) = child_object(object, "spec") {
            if let (true, Some(ip)) = (new_ip, old_ip) {
                spec.insert("clusterIP".into(), ip);
            }
            if let (true, Some(ips)) = (new_ips, old_ips) {
                spec.insert("clusterIPs".into(), ips);
            }
        }
    }
    if needs_node_port(old) && needs_node_port(object) {
        let used: HashSet<i64> = node_ports(old)
            .intersection(&node_ports(object))
            .copied()
            .collect();
        let by_name: Vec<(String, i64)> = items(old.pointer("/spec/ports"))
            .iter()
            .map(|p| {
                (
                    p.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0),
                )
            })
            .collect();
        if let Some(ports) = object
            .pointer_mut("/spec/ports")
            .and_then(Value::as_array_mut)
        {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    continue;
                }
                let name = port.get("name").and_then(Value::as_str).unwrap_or("");
                let previous = by_name.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
                if let Some(p) = previous.filter(|p| *p != 0 && !used.contains(p)) {
                    port.insert("nodePort".into(), json!(p));
                }
            }
        }
    }
    if needs_health_check(old) && needs_health_check(object) {
        let missing = spec_field(object, "healthCheckNodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0;
        if let (true, Some(hc)) = (missing, spec_field(old, "healthCheckNodePort").cloned()) {
            if let Some(spec) = child_object(object, "spec") {
                spec.insert("healthCheckNodePort".into(), hc);
            }
        }
    }
}

/// kube's `NormalizeClusterIPs`: keeps the singular and plural fields in step for clients
/// that only know one of them.
fn normalize_cluster_ips(object: &mut Value, old: Option<&Value>) {
    let new_ip = str_at(object, "/spec/clusterIP").to_string();
    let new_ips = spec_field(object, "clusterIPs").cloned();
    let new_ips_empty = items(new_ips.as_ref()).is_empty();
    let Some(spec) = child_object(object, "spec") else {
        return;
    };
    let Some(old) = old else {
        if !new_ip.is_empty() && new_ips_empty {
            spec.insert("clusterIPs".into(), json!([new_ip]));
        }
        return;
    };
    let old_ip = str_at(old, "/spec/clusterIP");
    let old_ips = spec_field(old, "clusterIPs").cloned();
    let mut current_ips = new_ips;
    if !items(old_ips.as_ref()).is_empty() && new_ips_empty && old_ip == new_ip {
        // An old client patching something else, unaware of the plural field.
        if let Some(ips) = old_ips.clone() {
            spec.insert("clusterIPs".into(), ips.clone());
            current_ips = Some(ips);
        }
    }
    let same_ips = current_ips == old_ips;
    if old_ip != new_ip {
        if !old_ip.is_empty() && new_ip.is_empty() && same_ips {
            spec.remove("clusterIPs");
        }
        if !new_ip.is_empty() && same_ips {
            spec.insert("clusterIPs".into(), json!([new_ip]));
        }
    }
}

/// Fills in the cluster IP, IP families and policy, node ports and health-check node port
/// a service still lacks. On update, the family policy the client left out is kept.
fn allocate(object: &mut Value, old: Option<&Value>, allocations: Option<&ServiceAllocations>) {
    if !needs_cluster_ip(object) {
        return;
    }
    let (namespace, name) = namespace_and_name(object);
    let (namespace, name) = (namespace.to_string(), name.to_string());
    let owner = owner_of(object);
    let allocator = allocations.map(|a| (a, owner.as_str()));
    let ip_unset = str_at(object, "/spec/clusterIP").is_empty();
    let ips_unset = items(object.pointer("/spec/clusterIPs")).is_empty();
    let headless_selectorless = is_headless(object)
        && object
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
    // The family of the addresses given, once (two IPv4 addresses are validation's to refuse,
    // not two IPv4 families: kube infers families only for a Service that validated).
    let inferred: Vec<Value> = items(object.pointer("/spec/clusterIPs"))
        .iter()
        .filter_map(Value::as_str)
        .take_while(|ip| *ip != "None" && !is_ipv6(ip))
        .take(1)
        .map(|_| json!("IPv4"))
        .collect();
    // A Service asking for IPv6 first gets no address here: kube refuses the family as not
    // configured before it allocates anything.
    let wants_ipv6_first = items(object.pointer("/spec/ipFamilies"))
        .first()
        .and_then(Value::as_str)
        == Some("IPv6");
    let has_ipv6 = items(object.pointer("/spec/clusterIPs"))
        .iter()
        .filter_map(Value::as_str)
        .any(|ip| ip != "None" && is_ipv6(ip));
    let old_policy = old
        .filter(|o| needs_cluster_ip(o))
        .and_then(|o| spec_field(o, "ipFamilyPolicy").cloned());
    let node_port_wanted = service_type(object) == "NodePort"
        || (service_type(object) == "LoadBalancer"
            && spec_field(object, "allocateLoadBalancerNodePorts").and_then(Value::as_bool)
                != Some(false));
    let wants_hc = needs_health_check(object);
    let Some(spec) = child_object(object, "spec") else {
        return;
    };
    if ip_unset && ips_unset && !wants_ipv6_first {
        let start = cluster_ip_for(&namespace, &name);
        let ip = match allocator {
            Some((allocations, owner)) if start != KUBERNETES_SERVICE_IP => {
                match allocations.pick(owner, cluster_ip_candidates(start)) {
                    Allocated::ClusterIp(ip) => ip,
                    Allocated::NodePort(_) => start,
                }
            }
            _ => start,
        }
        .to_string();
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
        if let Some(policy) = old_policy {
            spec.insert("ipFamilyPolicy".into(), policy);
        }
    }
    let families_unset = items(spec.get("ipFamilies")).is_empty();
    if headless_selectorless {
        // Headless services without a selector may list both families even on a
        // single-stack cluster; kube defaults them to RequireDualStack.
        let policy = default_str(spec, "ipFamilyPolicy", "RequireDualStack");
        if families_unset {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
        if let Some(families) = spec.get_mut("ipFamilies").and_then(Value::as_array_mut) {
            if families.len() < 2 && policy != "SingleStack" {
                let other = if families.first().and_then(Value::as_str) == Some("IPv6") {
                    "IPv4"
                } else {
                    "IPv6"
                };
                families.push(json!(other));
            }
        }
    } else {
        // An IPv6 address on this IPv4-only cluster is refused by validation; kube stops
        // before inferring families for it, so none are filled in.
        if families_unset && !has_ipv6 {
            let families = if inferred.is_empty() {
                vec![json!("IPv4")]
            } else {
                inferred
            };
            spec.insert("ipFamilies".into(), Value::Array(families));
        }
        default_str(spec, "ipFamilyPolicy", "SingleStack");
    }
    if node_port_wanted {
        allocate_node_ports(spec, &namespace, &name, allocator);
    }
    if wants_hc
        && spec
            .get("healthCheckNodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
    {
        let mut used: HashSet<i64> = items(spec.get("ports"))
            .iter()
            .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect();
        let port = next_free(
            node_port_for(&namespace, &name, "healthCheck"),
            &mut used,
            allocator,
        );
        spec.insert("healthCheckNodePort".into(), json!(port));
    }
}

/// Gives every port without a node port one, distinct within the service.
fn allocate_node_ports(
    spec: &mut Map<String, Value>,
    namespace: &str,
    name: &str,
    allocator: Option<(&ServiceAllocations, &str)>,
) {
    let mut used: HashSet<i64> = items(spec.get("ports"))
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|n| *n != 0)
        .collect();
    if let Some(hc) = spec.get("healthCheckNodePort").and_then(Value::as_i64) {
        used.insert(hc);
    }
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    // kube's `findRequestedNodePort`: ports of one number (TCP and UDP, say) share one node
    // port, the one a port of that number asks for.
    let port_number = |port: &Value| port.get("port").and_then(Value::as_i64).unwrap_or(0);
    let mut by_number: std::collections::HashMap<i64, i64> = ports
        .iter()
        .filter_map(|port| {
            let node_port = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
            (node_port != 0).then(|| (port_number(port), node_port))
        })
        .collect();
    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
        if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
            continue;
        }
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if let Some(shared) = by_number.get(&number) {
            port.insert("nodePort".into(), json!(shared));
            continue;
        }
        let key = format!(
            "{}/{}/{}",
            port.get("name").and_then(Value::as_str).unwrap_or(""),
            port.get("port").and_then(Value::as_i64).unwrap_or(0),
            port.get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP"),
        );
        let chosen = next_free(node_port_for(namespace, name, &key), &mut used, allocator);
        by_number.insert(number, chosen);
        port.insert("nodePort".into(), json!(chosen));
    }
}

/// The first port at or after `start` (wrapping in the range) not used by this service nor
/// (with `allocator`) held by another, reserved for it; records it.
fn next_free(
    start: i64,
    used: &mut HashSet<i64>,
    allocator: Option<(&ServiceAllocations, &str)>,
) -> i64 {
    // The dynamic part from `start` on (wrapping), then the static band, as kube tries them.
    let first = NODE_PORT_MIN + NODE_PORT_STATIC_BAND;
    let span = NODE_PORT_MAX - first + 1;
    let mut candidates = (0..span)
        .map(|i| first + (start - first + i).rem_euclid(span))
        .chain(NODE_PORT_MIN..first)
        .filter(|candidate| !used.contains(candidate));
    let chosen = match allocator {
        Some((allocations, owner)) => {
            match allocations.pick(owner, candidates.map(Allocated::NodePort)) {
                Allocated::NodePort(port) if port != 0 => port,
                _ => start,
            }
        }
        None => candidates.next().unwrap_or(start),
    };
    used.insert(chosen);
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"namespace": "default", "name": "web"}, "spec": spec})
    }

    #[test]
    fn ports_of_one_number_share_their_node_port() {
        let mut s = svc(json!({"type": "NodePort", "ports": [
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "dns-udp", "port": 53, "protocol": "UDP"},
            {"name": "http", "port": 80, "protocol": "TCP"},
        ]}));
        prepare_create(&mut s, None);
        let node_port = |i: usize| s["spec"]["ports"][i]["nodePort"].as_i64().unwrap_or(0);
        assert_eq!(node_port(0), node_port(1));
        assert_ne!(node_port(0), node_port(2));
        assert!((NODE_PORT_MIN..=NODE_PORT_MAX).contains(&node_port(2)));
    }

    #[test]
    fn defaults_and_cluster_ip() {
        let mut s = svc(json!({"ports": [{"port": 80}], "selector": {"app": "web"}}));
        prepare_create(&mut s, None);
        let spec = &s["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["ports"][0]["targetPort"], 80);
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        let ip = spec["clusterIP"].as_str().unwrap_or("");
        assert!(in_service_cidr(ip), "{ip}");
        assert_eq!(spec["clusterIPs"], json!([ip]));
        assert_eq!(ip, cluster_ip_for("default", "web").to_string());
        assert!(spec.get("externalTrafficPolicy").is_none());
        assert_eq!(
            cluster_ip_for("default", "kubernetes"),
            Ipv4Addr::new(10, 96, 0, 1)
        );
    }

    #[test]
    fn headless_and_external_name() {
        let mut s = svc(json!({"clusterIP": "None", "ports": [{"port": 80}]}));
        prepare_create(&mut s, None);
        assert_eq!(s["spec"]["clusterIPs"], json!(["None"]));
        assert_eq!(s["spec"]["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));

        let mut s = svc(json!({"clusterIP": "None", "selector": {"a": "b"}}));
        prepare_create(&mut s, None);
        assert_eq!(s["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));

        let mut s = svc(json!({"type": "ExternalName", "externalName": "example.com"}));
        prepare_create(&mut s, None);
        assert!(s["spec"].get("clusterIP").is_none());
        assert!(s["spec"].get("ipFamilies").is_none());
        assert!(s["spec"].get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn external_name_services_never_show_an_internal_traffic_policy() {
        let mut old = svc(json!({"ports": [{"port": 80}]}));
        prepare_create(&mut old, None);
        assert_eq!(old["spec"]["internalTrafficPolicy"], "Cluster");
        let mut new = old.clone();
        new["spec"]["type"] = json!("ExternalName");
        new["spec"]["externalName"] = json!("db.example.com");
        prepare_update(&mut new, &old, None);
        assert!(new["spec"].get("internalTrafficPolicy").is_none(), "{new}");
        assert!(new["spec"].get("clusterIP").is_none(), "{new}");
    }

    /// What kube decides only for a Service that validated is not decided here for one that
    /// will not: no address for a Service asking IPv6 first (refused as not configured), and
    /// one family for two addresses of the same family (refused as two of one family).
    #[test]
    fn nothing_is_allocated_or_inferred_for_what_validation_refuses() {
        let mut s = svc(json!({"ipFamilies": ["IPv6"], "ports": [{"port": 80}]}));
        prepare_create(&mut s, None);
        assert!(s["spec"].get("clusterIP").is_none(), "{s}");
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv6"]));

        let mut s = svc(json!({"clusterIPs": ["10.96.7.7", "10.96.7.8"], "ports": [{"port": 80}]}));
        prepare_create(&mut s, None);
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]), "{s}");
    }

    #[test]
    fn node_ports_are_allocated_and_kept() {
        let mut s = svc(
            json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 443}]}),
        );
        prepare_create(&mut s, None);
        let a = s["spec"]["ports"][0]["nodePort"].as_i64().unwrap_or(0);
        let b = s["spec"]["ports"][1]["nodePort"].as_i64().unwrap_or(0);
        assert!((NODE_PORT_MIN..=NODE_PORT_MAX).contains(&a));
        assert_ne!(a, b);
        assert_eq!(s["spec"]["externalTrafficPolicy"], "Cluster");

        // A PUT from the manifest (no clusterIP, no nodePorts) keeps the allocations.
        let old = s.clone();
        let mut update = svc(
            json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 443}]}),
        );
        prepare_update(&mut update, &old, None);
        assert_eq!(update["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(update["spec"]["clusterIPs"], old["spec"]["clusterIPs"]);
        assert_eq!(update["spec"]["ports"][0]["nodePort"], json!(a));
        assert_eq!(update["spec"]["ports"][1]["nodePort"], json!(b));

        // Switching back to ClusterIP drops the node ports and the traffic policy.
        let mut back = old.clone();
        back["spec"]["type"] = json!("ClusterIP");
        prepare_update(&mut back, &old, None);
        assert!(back["spec"]["ports"][0].get("nodePort").is_none());
        assert!(back["spec"].get("externalTrafficPolicy").is_none());
    }

    #[test]
    fn load_balancer_defaults() {
        let mut s = svc(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
        );
        prepare_create(&mut s, None);
        assert_eq!(s["spec"]["allocateLoadBalancerNodePorts"], true);
        let hc = s["spec"]["healthCheckNodePort"].as_i64().unwrap_or(0);
        assert!((NODE_PORT_MIN..=NODE_PORT_MAX).contains(&hc));
        assert_ne!(Some(hc), s["spec"]["ports"][0]["nodePort"].as_i64());
    }

    #[test]
    fn client_ip_affinity_gets_timeout() {
        let mut s = svc(json!({"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}));
        prepare_create(&mut s, None);
        assert_eq!(
            s["spec"]["sessionAffinityConfig"],
            json!({"clientIP": {"timeoutSeconds": 10800}})
        );
    }

    #[test]
    fn normalize_singular_and_plural() {
        let mut s = svc(json!({"clusterIP": "10.96.5.5", "ports": [{"port": 80}]}));
        prepare_create(&mut s, None);
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.96.5.5"]));
    }
}

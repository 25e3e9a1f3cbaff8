//! Which cluster IPs and node ports Services hold, so that none is given to two Services, as
//! kube's service IP and node port allocators ensure: a user's `clusterIP` or `nodePort`
//! already held by another Service is refused with kube's words (`provided IP is already
//! allocated`, `provided port is already allocated`), and values kubegate picks skip those in
//! use.
//!
//! What Services hold comes from the watch cache (a follower calls [`ServiceAllocations::observe`]
//! and [`ServiceAllocations::forget`] for every Service event), plus what creates and updates
//! have just been given and the cache has not shown yet, reserved for [`RESERVATION`]. That
//! makes allocation exclusive on one server. Servers sharing a store (replicas on etcd) learn
//! each other's allocations only as fast as writes reach their caches, so a value new to a
//! Service is also claimed in the store itself ([`claim`]): one key per value under
//! `/kubegate.io/serviceallocations/`, created if absent (etcd's create-if-absent decides
//! between replicas, as kube's IPAddress objects do), deleted by the write that lets the value
//! go ([`release_claims`]), and taken over once stale (its writer failed or crashed) (its Service does not hold the value and the
//! claim is older than a write takes).

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::{items, namespace_and_name, str_at};
use crate::status::ApiError;
use crate::storage::{Store, StoreError};

/// How long a value handed to a create or update stays reserved for its Service before the
/// cache must have shown it (it shows it within milliseconds; a create that failed releases
/// its value when this ends).
pub const RESERVATION: Duration = Duration::from_secs(10);

/// One allocated value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Allocated {
    ClusterIp(Ipv4Addr),
    /// A node port (of a port, or the health check node port: one range, as in kube).
    NodePort(i64),
}

/// The values Services hold; see the module documentation.
#[derive(Default)]
pub struct ServiceAllocations {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Value → the Services (`namespace/name`) holding it, as the cache shows them (more than
    /// one only for duplicates written before values were checked, or by two replicas at once).
    held: HashMap<Allocated, Vec<String>>,
    /// Service → the values it holds, to release them when it changes or goes.
    by_service: HashMap<String, Vec<Allocated>>,
    /// Values handed out and not yet seen in the cache: value → (Service, until).
    reserved: HashMap<Allocated, (String, Instant)>,
    /// Services for which a pick found nothing free (the range is full), until their write
    /// is judged: Service → (the kind of value, until).
    exhausted: HashMap<String, (Allocated, Instant)>,
}

impl State {
    /// Whether no Service but `owner` holds `value` or has it reserved.
    fn free_for(&self, value: &Allocated, owner: &str, now: Instant) -> bool {
        let held_elsewhere = self
            .held
            .get(value)
            .is_some_and(|holders| holders.iter().any(|holder| holder != owner));
        let reserved_elsewhere = self
            .reserved
            .get(value)
            .is_some_and(|(holder, until)| *until > now && holder != owner);
        !held_elsewhere && !reserved_elsewhere
    }
}

/// The IPv4 address `text` names as kube's allocator reads it (`ParseIPSloppy`: octets with
/// leading zeros, and IPv4-mapped IPv6 forms, are the address they spell).
fn ipv4(text: &str) -> Option<Ipv4Addr> {
    match super::netutil::parse_ip(text)? {
        std::net::IpAddr::V4(ip) => Some(ip),
        std::net::IpAddr::V6(_) => None,
    }
}

/// `namespace/name` of a Service object.
pub fn owner_of(service: &Value) -> String {
    let (namespace, name) = namespace_and_name(service);
    format!("{namespace}/{name}")
}

/// The values `service` holds: its IPv4 cluster IPs (not `None`), its ports' node ports and
/// its health check node port.
pub fn allocations_of(service: &Value) -> Vec<Allocated> {
    let mut values: Vec<Allocated> = items(service.pointer("/spec/clusterIPs"))
        .iter()
        .filter_map(Value::as_str)
        .filter_map(ipv4)
        .map(Allocated::ClusterIp)
        .collect();
    if values.is_empty() {
        if let Some(ip) = ipv4(str_at(service, "/spec/clusterIP")) {
            values.push(Allocated::ClusterIp(ip));
        }
    }
    values.extend(
        items(service.pointer("/spec/ports"))
            .iter()
            .filter_map(|port| port.get("nodePort").and_then(Value::as_i64))
            .chain(
                service
                    .pointer("/spec/healthCheckNodePort")
                    .and_then(Value::as_i64),
            )
            .filter(|port| *port > 0)
            .map(Allocated::NodePort),
    );
    values
}

impl ServiceAllocations {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what `service` holds now (as the cache shows it), releasing what it held before.
    pub fn observe(&self, service: &Value) {
        let owner = owner_of(service);
        let values = allocations_of(service);
        let mut state = self.state();
        release(&mut state, &owner);
        for value in &values {
            state.held.entry(*value).or_default().push(owner.clone());
            if state
                .reserved
                .get(value)
                .is_some_and(|(reserved_for, _)| *reserved_for == owner)
            {
                state.reserved.remove(value);
            }
        }
        state.by_service.insert(owner, values);
    }

    /// Releases what the Service `namespace/name` held (it was deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        release(&mut self.state(), &format!("{namespace}/{name}"));
    }

    /// Replaces everything held with what `services` hold (a re-list); reservations stay.
    pub fn resync<'a>(&self, services: impl IntoIterator<Item = &'a Value>) {
        {
            let mut state = self.state();
            state.held.clear();
            state.by_service.clear();
        }
        for service in services {
            self.observe(service);
        }
    }

    /// Gives back what was reserved for `owner` and is not what it holds: its write did not
    /// reach the store (a dry run, a refusal, a failure), so nothing will show it.
    pub fn release_reservations(&self, owner: &str) {
        self.state()
            .reserved
            .retain(|_, (holder, _)| holder != owner);
    }

    /// Whether another Service than `owner` holds (or has just been given) `value`.
    pub fn held_by_other(&self, value: &Allocated, owner: &str) -> bool {
        !self.state().free_for(value, owner, Instant::now())
    }

    /// Reserves `value` for `owner` if no other Service holds it; false when one does.
    pub fn reserve(&self, value: Allocated, owner: &str) -> bool {
        let now = Instant::now();
        let mut state = self.state();
        if !state.free_for(&value, owner, now) {
            return false;
        }
        let holds_it = state
            .held
            .get(&value)
            .is_some_and(|holders| holders.iter().any(|holder| holder == owner));
        if !holds_it {
            state
                .reserved
                .insert(value, (owner.to_string(), now + RESERVATION));
        }
        state.reserved.retain(|_, (_, until)| *until > now);
        true
    }

    /// The first value of `candidates` (tried in order) free for `owner`, reserved for it; the
    /// first candidate when every one is taken (validation then refuses it).
    /// When none is free (the range is full) that is remembered for [`check`], which refuses
    /// the write as kube's allocator does.
    pub fn pick(&self, owner: &str, candidates: impl IntoIterator<Item = Allocated>) -> Allocated {
        let mut first = None;
        for candidate in candidates {
            first.get_or_insert(candidate);
            if self.reserve(candidate, owner) {
                return candidate;
            }
        }
        let first = first.unwrap_or(Allocated::NodePort(0));
        let now = Instant::now();
        let mut state = self.state();
        state.exhausted.retain(|_, (_, until)| *until > now);
        state
            .exhausted
            .insert(owner.to_string(), (first, now + RESERVATION));
        first
    }

    /// The kind of value a pick for `owner` found none of, forgotten as it is read.
    fn take_exhausted(&self, owner: &str) -> Option<Allocated> {
        let now = Instant::now();
        self.state()
            .exhausted
            .remove(owner)
            .filter(|(_, until)| *until > now)
            .map(|(kind, _)| kind)
    }
}

fn release(state: &mut State, owner: &str) {
    if let Some(values) = state.by_service.remove(owner) {
        for value in values {
            if let Some(holders) = state.held.get_mut(&value) {
                holders.retain(|holder| holder != owner);
                if holders.is_empty() {
                    state.held.remove(&value);
                }
            }
        }
    }
}

/// Where a Service asks for a value: kube's error when it cannot have it names the place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    ClusterIps,
    /// `spec.ports[i].nodePort`.
    Port(usize),
    HealthCheck,
}

/// A value a Service asks for, in kube's allocation order.
struct Wanted {
    value: Allocated,
    place: Place,
    /// Not held by the Service before this write (on update; always on create).
    new: bool,
    /// Also the node port of a port of another number in this Service (kube refuses that).
    shared_within: bool,
}

/// The values a Service (none: no Service) holds, as a set.
fn allocation_set(service: Option<&Value>) -> HashSet<Allocated> {
    service
        .map(allocations_of)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The values `service` asks for, in the order kube's allocator takes them: cluster IPs, the
/// ports' node ports, the health check node port.
fn wanted(service: &Value, old: Option<&Value>) -> Vec<Wanted> {
    let before = allocation_set(old);
    let mut wanted = Vec::new();
    let mut push = |value: Allocated, place: Place, shared_within: bool| {
        wanted.push(Wanted {
            value,
            place,
            new: !before.contains(&value),
            shared_within,
        });
    };
    for ip in items(service.pointer("/spec/clusterIPs"))
        .iter()
        .filter_map(Value::as_str)
        .filter_map(ipv4)
    {
        push(Allocated::ClusterIp(ip), Place::ClusterIps, false);
    }
    // Within the Service, as kube's node port operation allocates them: ports of one number
    // may share a node port, ports of different numbers may not.
    let mut own: HashMap<i64, i64> = HashMap::new();
    for (i, port) in items(service.pointer("/spec/ports")).iter().enumerate() {
        let Some(node_port) = port.get("nodePort").and_then(Value::as_i64) else {
            continue;
        };
        if node_port <= 0 {
            continue;
        }
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        let shared_within = own.get(&node_port).is_some_and(|other| *other != number);
        push(
            Allocated::NodePort(node_port),
            Place::Port(i),
            shared_within,
        );
        own.entry(node_port).or_insert(number);
    }
    if let Some(port) = service
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .filter(|port| *port > 0)
    {
        push(
            Allocated::NodePort(port),
            Place::HealthCheck,
            own.contains_key(&port),
        );
    }
    wanted
}

/// kube's answer to a Service asking for `value` at `place` when another holds it: a 422 on
/// the field for cluster IPs and node ports, a 500 for the health check node port.
fn refusal(service: &Value, value: Allocated, place: Place) -> crate::status::ApiError {
    use crate::status::ApiError;
    let (_, name) = namespace_and_name(service);
    let invalid = |cause| ApiError::invalid("", "Service", name, vec![cause]);
    match (place, value) {
        (Place::ClusterIps, _) => {
            let ips: Vec<&str> = items(service.pointer("/spec/clusterIPs"))
                .iter()
                .filter_map(Value::as_str)
                .collect();
            // kube names the address as the client spelled it.
            let spelled = ips
                .iter()
                .find(|ip| matches!(value, Allocated::ClusterIp(v) if ipv4(ip) == Some(v)))
                .copied()
                .unwrap_or_default();
            invalid(crate::status::StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: failed to allocate IP {spelled}: provided IP is already allocated",
                    super::causes::go_string_slice(&ips)
                ),
                field: "spec.clusterIPs".into(),
            })
        }
        (Place::Port(i), Allocated::NodePort(port)) => {
            invalid(invalid_port(&format!("spec.ports[{i}].nodePort"), port))
        }
        (Place::HealthCheck, Allocated::NodePort(port)) => ApiError::internal(format!(
            "failed to allocate requested HealthCheck NodePort {port}: provided port is already allocated"
        )),
        _ => ApiError::internal("a Service value in the wrong place"),
    }
}

/// kube's allocation step for a Service that validated (its REST storage's `BeginCreate` and
/// `BeginUpdate`), stopping at the first failure as kube's does: cluster IPs another Service
/// holds (422 on `spec.clusterIPs`), then node ports (422 on the first port whose node port
/// is held, or that another port number of this Service uses), then the health check node
/// port (500, kube's internal error); a range with nothing left to pick is kube's 500
/// `range is full`. Values the Service held before (on update) are its own.
pub fn check(
    allocations: &ServiceAllocations,
    service: &Value,
    old: Option<&Value>,
) -> Result<(), crate::status::ApiError> {
    use crate::status::ApiError;
    let owner = owner_of(service);
    if let Some(message) = super::services_ip_rules::health_check_port_out_of_range(service, old) {
        return Err(ApiError::internal(message));
    }
    match allocations.take_exhausted(&owner) {
        Some(Allocated::ClusterIp(_)) => {
            return Err(ApiError::internal(
                "failed to allocate a serviceIP: range is full",
            ))
        }
        Some(Allocated::NodePort(_)) => {
            return Err(ApiError::internal(
                "failed to allocate a nodePort: range is full",
            ))
        }
        None => {}
    }
    for want in wanted(service, old) {
        if want.shared_within || (want.new && allocations.held_by_other(&want.value, &owner)) {
            return Err(refusal(service, want.value, want.place));
        }
    }
    Ok(())
}

fn invalid_port(field: &str, port: i64) -> crate::status::StatusCause {
    crate::status::StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {port}: provided port is already allocated"),
        field: field.into(),
    }
}

/// Where the claims are kept in the store (outside every resource's directory).
const CLAIMS: &str = "/kubegate.io/serviceallocations";

/// How long a claim whose Service does not hold its value stays its holder's: the holder's
/// write may still be on its way (it claims first, then writes the Service).
const CLAIM_GRACE: Duration = RESERVATION;

/// The store key of the claim on `value`.
pub fn claim_key(value: &Allocated) -> String {
    match value {
        Allocated::ClusterIp(ip) => format!("{CLAIMS}/clusterips/{ip}"),
        Allocated::NodePort(port) => format!("{CLAIMS}/nodeports/{port}"),
    }
}

/// A claim as stored: shaped as an object (metadata included) so that the watch cache, which
/// holds every key, takes it as one; no resource serves it.
fn claim_body(value: &Allocated, owner: &str, now: DateTime<Utc>) -> Bytes {
    let name = match value {
        Allocated::ClusterIp(ip) => ip.to_string(),
        Allocated::NodePort(port) => port.to_string(),
    };
    let body = json!({"apiVersion": "kubegate.io/v1", "kind": "ServiceAllocation",
        "metadata": {"name": name, "creationTimestamp": now.to_rfc3339_opts(SecondsFormat::Secs, true)},
        "spec": {"service": owner, "claimedAt": now.to_rfc3339_opts(SecondsFormat::Micros, true)}});
    Bytes::from(body.to_string())
}

/// The Service (`namespace/name`) a stored claim names, and when it claimed.
fn claim_of(bytes: &[u8]) -> Option<(String, Option<DateTime<Utc>>)> {
    let claim: Value = serde_json::from_slice(bytes).ok()?;
    let owner = claim.pointer("/spec/service")?.as_str()?.to_string();
    let at = claim
        .pointer("/spec/claimedAt")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc));
    Some((owner, at))
}

fn claim_error(error: StoreError) -> ApiError {
    crate::registry::store_error(error)
}

/// Claims, in the store, every value `service` asks for that it did not hold before (`old`),
/// in kube's allocation order, refusing the write as [`check`] does at the first value another
/// Service has claimed and still holds (or claimed moments ago). `service_key` gives a
/// Service's store key from its namespace and name. A dry run claims nothing; it only looks.
pub async fn claim(
    store: &dyn Store,
    service: &Value,
    old: Option<&Value>,
    dry_run: bool,
    service_key: &(dyn Fn(&str, &str) -> String + Sync),
) -> Result<(), ApiError> {
    let owner = owner_of(service);
    // Ports of one number share a node port: one claim for it.
    let mut seen = HashSet::new();
    for want in wanted(service, old)
        .into_iter()
        .filter(|w| w.new && seen.insert(w.value))
    {
        let key = claim_key(&want.value);
        let now = Utc::now();
        let body = claim_body(&want.value, &owner, now);
        let existing = if dry_run {
            store.get(&key).await.map_err(claim_error)?
        } else {
            match store.create(&key, body.clone()).await {
                Ok(_) => continue,
                Err(StoreError::AlreadyExists(_)) => store.get(&key).await.map_err(claim_error)?,
                Err(e) => return Err(claim_error(e)),
            }
        };
        let Some(existing) = existing else {
            // Released in between: claim it (a dry run has nothing to fear from it).
            if !dry_run {
                match store.create(&key, body).await {
                    Ok(_) => {}
                    Err(StoreError::AlreadyExists(_)) => {
                        return Err(refusal(service, want.value, want.place))
                    }
                    Err(e) => return Err(claim_error(e)),
                }
            }
            continue;
        };
        let Some((holder, claimed_at)) = claim_of(&existing.value) else {
            // Not a claim kubegate wrote: leave it, and the value, alone.
            return Err(refusal(service, want.value, want.place));
        };
        if holder == owner {
            continue;
        }
        // Does the holder's Service, as stored now, hold the value?
        let (namespace, name) = holder.split_once('/').unwrap_or(("", holder.as_str()));
        let holds = match store
            .get(&service_key(namespace, name))
            .await
            .map_err(claim_error)?
        {
            Some(stored) => serde_json::from_slice::<Value>(&stored.value)
                .map(|svc| allocations_of(&svc).contains(&want.value))
                .unwrap_or(true),
            None => false,
        };
        let young = claimed_at.is_none_or(|at| {
            now.signed_duration_since(at)
                .to_std()
                .map_or(true, |age| age < CLAIM_GRACE)
        });
        if holds || young {
            return Err(refusal(service, want.value, want.place));
        }
        // Stale: take it over, unless another writer did first.
        if !dry_run {
            match store.update(&key, body, existing.mod_revision).await {
                Ok(_) => {}
                Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound(_)) => {
                    return Err(refusal(service, want.value, want.place))
                }
                Err(e) => return Err(claim_error(e)),
            }
        }
    }
    Ok(())
}

/// Deletes the claims `owner` (`namespace/name`) has on `values`, which it no longer holds;
/// a claim another Service has taken over is left to it. Errors are logged: a claim left
/// behind goes stale and is taken over.
pub async fn release_claims(
    store: &dyn Store,
    owner: &str,
    values: impl IntoIterator<Item = Allocated>,
) {
    for value in values {
        let key = claim_key(&value);
        let existing = match store.get(&key).await {
            Ok(Some(existing)) => existing,
            Ok(None) => continue,
            Err(e) => {
                tracing::debug!(%key, error = %e, "reading a service allocation claim");
                continue;
            }
        };
        if claim_of(&existing.value).is_none_or(|(holder, _)| holder != owner) {
            continue;
        }
        match store.delete(&key, Some(existing.mod_revision)).await {
            Ok(_) | Err(StoreError::NotFound(_)) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => tracing::debug!(%key, error = %e, "releasing a service allocation claim"),
        }
    }
}

/// The values `before` held that `after` (`None`: deleted) does not.
pub fn released(before: &Value, after: Option<&Value>) -> Vec<Allocated> {
    let kept = allocation_set(after);
    let mut seen = HashSet::new();
    allocations_of(before)
        .into_iter()
        .filter(|value| !kept.contains(value) && seen.insert(*value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(name: &str, ip: &str, node_ports: &[i64]) -> Value {
        let ports: Vec<Value> = node_ports
            .iter()
            .map(|p| json!({"port": 80, "nodePort": p}))
            .collect();
        json!({"metadata": {"namespace": "default", "name": name},
               "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": ports}})
    }

    fn ip(text: &str) -> Allocated {
        Allocated::ClusterIp(text.parse().expect("ip"))
    }

    #[test]
    fn values_held_by_one_service_are_refused_to_another_until_it_lets_them_go() {
        let allocations = ServiceAllocations::default();
        let a = service("a", "10.96.5.5", &[30080]);
        allocations.observe(&a);
        let b = service("b", "10.96.5.5", &[30080, 30081]);
        // kube's allocator stops at the first value it cannot have: the address here.
        let error = check(&allocations, &b, None).expect_err("b takes a's values");
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.5.5\"}: failed to allocate IP 10.96.5.5: provided IP is already allocated"
        );
        let b_other_ip = service("b", "10.96.5.9", &[30080, 30081]);
        let error = check(&allocations, &b_other_ip, None).expect_err("b takes a's port");
        assert_eq!(
            error.message,
            "Service \"b\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        );
        // The holder itself may keep them (an update), and an update keeps what it had.
        assert!(check(&allocations, &a, Some(&a)).is_ok());
        assert!(check(&allocations, &a, None).is_ok());
        // Released when the holder changes or goes.
        allocations.observe(&service("a", "10.96.5.6", &[]));
        assert!(check(&allocations, &b, None).is_ok());
        allocations.observe(&a);
        allocations.forget("default", "a");
        assert!(check(&allocations, &b, None).is_ok());
    }

    #[test]
    fn picks_skip_held_and_reserved_values_and_reserve_theirs() {
        let allocations = ServiceAllocations::default();
        allocations.observe(&service("a", "10.96.0.10", &[30000]));
        let picked = allocations.pick(
            "default/b",
            [ip("10.96.0.10"), ip("10.96.0.11"), ip("10.96.0.12")],
        );
        assert_eq!(picked, ip("10.96.0.11"));
        // Reserved for b until the cache shows it: c cannot have it, b can again.
        assert!(allocations.held_by_other(&ip("10.96.0.11"), "default/c"));
        assert!(!allocations.held_by_other(&ip("10.96.0.11"), "default/b"));
        let for_c = allocations.pick("default/c", [ip("10.96.0.11"), ip("10.96.0.12")]);
        assert_eq!(for_c, ip("10.96.0.12"));
        // Node ports likewise.
        assert_eq!(
            allocations.pick(
                "default/b",
                [Allocated::NodePort(30000), Allocated::NodePort(30001)]
            ),
            Allocated::NodePort(30001)
        );
        // Seen in the cache, the reservation gives way to the holding.
        allocations.observe(&service("b", "10.96.0.11", &[30001]));
        assert!(allocations.held_by_other(&ip("10.96.0.11"), "default/c"));
        allocations.resync([&service("a", "10.96.0.10", &[30000])]);
        assert!(!allocations.held_by_other(&ip("10.96.0.11"), "default/c"));
        // A write that did not reach the store gives its reservations back.
        assert_eq!(
            allocations.pick("default/d", [ip("10.96.0.20")]),
            ip("10.96.0.20")
        );
        assert!(allocations.held_by_other(&ip("10.96.0.20"), "default/e"));
        allocations.release_reservations("default/d");
        assert!(!allocations.held_by_other(&ip("10.96.0.20"), "default/e"));
    }

    #[test]
    fn inside_one_service_only_ports_of_one_number_share_a_node_port() {
        let allocations = ServiceAllocations::default();
        let service = |ports: Value, health: Option<i64>| {
            let mut spec = json!({"type": "LoadBalancer", "ports": ports});
            if let Some(port) = health {
                spec["healthCheckNodePort"] = json!(port);
            }
            json!({"metadata": {"namespace": "default", "name": "s"}, "spec": spec})
        };
        let outcome = |service: &Value| match check(&allocations, service, None) {
            Ok(()) => (200, String::new()),
            Err(e) => (e.code, e.message),
        };
        let same_number = service(
            json!([{"port": 53, "protocol": "TCP", "nodePort": 30053},
                   {"port": 53, "protocol": "UDP", "nodePort": 30053}]),
            None,
        );
        assert_eq!(outcome(&same_number), (200, String::new()));
        let other_number = service(
            json!([{"port": 80, "protocol": "TCP", "nodePort": 31800},
                   {"port": 81, "protocol": "UDP", "nodePort": 31800}]),
            None,
        );
        assert_eq!(
            outcome(&other_number),
            (
                422,
                "Service \"s\" is invalid: spec.ports[1].nodePort: Invalid value: 31800: provided port is already allocated".to_string()
            )
        );
        // kube's health check node port conflict is its internal error.
        let health = service(json!([{"port": 80, "nodePort": 30610}]), Some(30610));
        assert_eq!(
            outcome(&health),
            (
                500,
                "Internal error occurred: failed to allocate requested HealthCheck NodePort 30610: provided port is already allocated".to_string()
            )
        );
    }

    #[test]
    fn a_value_two_services_hold_stays_held_until_both_let_it_go() {
        let allocations = ServiceAllocations::default();
        // Duplicates written before values were checked (or by two replicas at once).
        allocations.observe(&service("x4", "10.96.31.31", &[31310]));
        allocations.observe(&service("x5", "10.96.31.31", &[31310]));
        allocations.forget("default", "x4");
        let y = service("y", "10.96.31.31", &[31310]);
        assert!(check(&allocations, &y, None).is_err());
        allocations.forget("default", "x5");
        assert!(check(&allocations, &y, None).is_ok());
    }

    #[test]
    fn a_range_with_nothing_left_is_kubes_internal_error() {
        let allocations = ServiceAllocations::default();
        allocations.observe(&service("a", "10.96.5.5", &[30080]));
        let picked = allocations.pick("default/b", [Allocated::NodePort(30080)]);
        assert_eq!(picked, Allocated::NodePort(30080), "the first candidate");
        let b = service("b", "10.96.5.6", &[30080]);
        let error = check(&allocations, &b, None).expect_err("nothing was free");
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                500,
                "Internal error occurred: failed to allocate a nodePort: range is full"
            )
        );
        allocations.pick("default/c", [ip("10.96.5.5")]);
        let error = check(&allocations, &service("c", "10.96.5.5", &[]), None)
            .expect_err("nothing was free");
        assert_eq!(
            error.message,
            "Internal error occurred: failed to allocate a serviceIP: range is full"
        );
        // Read once: the next write of the Service is judged afresh.
        assert!(check(&allocations, &service("c", "10.96.5.7", &[]), None).is_ok());
    }

    fn store() -> (
        tempfile::TempDir,
        std::sync::Arc<crate::storage::embedded::EmbeddedStore>,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::storage::embedded::EmbeddedStore::open(
            &dir.path().join("s.redb"),
            crate::storage::embedded::EmbeddedOptions::default(),
        )
        .expect("store");
        (dir, store)
    }

    fn key(namespace: &str, name: &str) -> String {
        crate::core::services::service_key(namespace, name)
    }

    async fn holder(store: &dyn Store, value: &Allocated) -> Option<String> {
        let stored = store.get(&claim_key(value)).await.expect("get")?;
        claim_of(&stored.value).map(|(owner, _)| owner)
    }

    /// Two servers sharing a store (their in-memory records blind to each other) cannot give
    /// one value to two Services: the store's claim decides; a stale claim is taken over; a
    /// dry run writes nothing; a released claim is free again.
    #[tokio::test]
    async fn claims_in_the_store_decide_between_servers() {
        let (_dir, store) = store();
        let store: &dyn Store = store.as_ref();
        assert_eq!(
            crate::core::services::def().key("default", "a"),
            key("default", "a"),
            "claims read the holder's Service where it is stored"
        );
        let a = service("a", "10.96.9.9", &[30900]);
        let b = service("b", "10.96.9.9", &[30901]);
        let ip = ip("10.96.9.9");

        // A dry run looks, and writes nothing.
        claim(store, &a, None, true, &key).await.expect("dry run");
        assert_eq!(holder(store, &ip).await, None);

        claim(store, &a, None, false, &key).await.expect("a claims");
        assert_eq!(holder(store, &ip).await.as_deref(), Some("default/a"));
        // a's claim is moments old and a's write may be on its way: b is refused.
        let error = claim(store, &b, None, false, &key)
            .await
            .expect_err("b refused");
        assert_eq!(error.code, 422);
        assert!(
            error.message.contains("provided IP is already allocated"),
            "{}",
            error.message
        );
        // Claiming again what one already claimed (a retried write) is fine.
        claim(store, &a, None, false, &key).await.expect("a again");

        // Once a's Service holds the value, an old claim still stands.
        store
            .create(&key("default", "a"), Bytes::from(a.to_string()))
            .await
            .expect("store a");
        let old = Utc::now() - chrono::Duration::seconds(60);
        let aged = claim_body(&ip, "default/a", old);
        let current = store
            .get(&claim_key(&ip))
            .await
            .expect("get")
            .expect("claim");
        store
            .update(&claim_key(&ip), aged.clone(), current.mod_revision)
            .await
            .expect("age the claim");
        assert!(claim(store, &b, None, false, &key).await.is_err());

        // A stale claim (its Service gone, its age past a write's) is taken over.
        store
            .delete(&key("default", "a"), None)
            .await
            .expect("delete a");
        claim(store, &b, None, false, &key)
            .await
            .expect("b takes over");
        assert_eq!(holder(store, &ip).await.as_deref(), Some("default/b"));

        // a releasing its values leaves b's claim alone; b releasing frees the value.
        release_claims(store, "default/a", [ip]).await;
        assert_eq!(holder(store, &ip).await.as_deref(), Some("default/b"));
        release_claims(store, "default/b", released(&b, None)).await;
        assert_eq!(holder(store, &ip).await, None);
        assert_eq!(holder(store, &Allocated::NodePort(30901)).await, None);
        claim(store, &a, None, false, &key)
            .await
            .expect("free again");
    }
}

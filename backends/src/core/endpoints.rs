//! Endpoints (`/api/v1/namespaces/{ns}/endpoints`, short name `ep`): kube's
//! `ValidateEndpoints` (every subset has addresses, addresses are real unicast IPs, ports
//! are named when there are several) and the `ENDPOINTS` cell `kubectl get ep` shows.
//! kube also repacks subsets (merging and sorting them) on write; kubegate stores them as
//! given.

use std::sync::Arc;

use serde_json::{json, Value};

use super::causes::{index_path, invalid_each};
use super::netutil::{is_ipv6, non_special_ip, valid_ip, valid_port_num, valid_protocol};
use super::{age, base_def, items, Names};
use crate::machinery::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};
use crate::resource::{age_column, name_column, ResourceDef, Strategy, TableColumn};
use crate::status::{field_required, StatusCause};

/// The Endpoints resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "endpoints",
            singular: "endpoints",
            kind: "Endpoints",
            namespaced: true,
            definition: "io.k8s.api.core.v1.Endpoints",
        },
        Arc::new(EndpointsStrategy),
    );
    def.short_names = vec!["ep".into()];
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Endpoints".into(),
            type_: "string".into(),
            format: "".into(),
            description: "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.".into(),
            priority: 0,
        },
        age_column(),
    ];
    def
}

/// kube's endpoints strategy.
pub struct EndpointsStrategy;

impl Strategy for EndpointsStrategy {
    /// kube's `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    /// kube 1.33 deprecates core/v1 Endpoints for EndpointSlices (KEP-4974): every request to
    /// the resource carries the generated lifecycle warning.
    fn deprecation_warning(&self) -> Option<&str> {
        Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
    }

    fn prepare_for_create(&self, object: &mut Value) {
        default_protocols(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        default_protocols(object);
    }

    fn canonicalize(&self, object: &mut Value) {
        let Some(map) = object.as_object_mut() else {
            return;
        };
        let Some(list) = map.get("subsets").and_then(Value::as_array) else {
            return;
        };
        let repacked = repack_subsets(list);
        // Go's `omitempty`: no subsets left, no field.
        if repacked.is_empty() {
            map.remove("subsets");
        } else {
            map.insert("subsets".into(), Value::Array(repacked));
        }
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let mut causes = Vec::new();
        for (i, subset) in items(object.get("subsets")).iter().enumerate() {
            causes.extend(validate_subset(subset, &index_path("subsets", i)));
        }
        causes
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(format_endpoints(object)), json!(age(object))]
    }
}

/// `SetDefaults_Endpoints`: ports default to TCP.
fn default_protocols(object: &mut Value) {
    let Some(subsets) = object.get_mut("subsets").and_then(Value::as_array_mut) else {
        return;
    };
    for subset in subsets.iter_mut() {
        let Some(ports) = subset.get_mut("ports").and_then(Value::as_array_mut) else {
            continue;
        };
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            if port
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                port.insert("protocol".into(), json!("TCP"));
            }
        }
    }
}

fn validate_subset(subset: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let ready = items(subset.get("addresses"));
    let not_ready = items(subset.get("notReadyAddresses"));
    if ready.is_empty() && not_ready.is_empty() {
        causes.push(field_required(
            path,
            "must specify `addresses` or `notReadyAddresses`",
        ));
    }
    for (i, address) in ready.iter().enumerate() {
        causes.extend(validate_address(
            address,
            &index_path(&format!("{path}.addresses"), i),
        ));
    }
    for (i, address) in not_ready.iter().enumerate() {
        causes.extend(validate_address(
            address,
            &index_path(&format!("{path}.notReadyAddresses"), i),
        ));
    }
    let ports = items(subset.get("ports"));
    for (i, port) in ports.iter().enumerate() {
        causes.extend(validate_port(
            port,
            ports.len() > 1,
            &index_path(&format!("{path}.ports"), i),
        ));
    }
    causes
}

fn validate_address(address: &Value, path: &str) -> Vec<StatusCause> {
    let ip_field = format!("{path}.ip");
    let ip = address.get("ip").and_then(Value::as_str).unwrap_or("");
    let mut causes = valid_ip(&ip_field, ip);
    if let Some(host) = address
        .get("hostname")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
    {
        causes.extend(invalid_each(
            &format!("{path}.hostname"),
            host,
            is_dns1123_label(host),
        ));
    }
    if let Some(node) = address.get("nodeName").and_then(Value::as_str) {
        causes.extend(invalid_each(
            &format!("{path}.nodeName"),
            node,
            is_dns1123_subdomain(node),
        ));
    }
    causes.extend(non_special_ip(&ip_field, ip));
    causes
}

fn validate_port(port: &Value, require_name: bool, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let name = port.get("name").and_then(Value::as_str).unwrap_or("");
    let name_field = format!("{path}.name");
    if require_name && name.is_empty() {
        causes.push(field_required(&name_field, ""));
    } else if !name.is_empty() {
        causes.extend(invalid_each(&name_field, name, is_dns1123_label(name)));
    }
    causes.extend(valid_port_num(&format!("{path}.port"), port.get("port")));
    causes.extend(valid_protocol(
        &format!("{path}.protocol"),
        port.get("protocol"),
    ));
    if let Some(app) = port.get("appProtocol").and_then(Value::as_str) {
        causes.extend(invalid_each(
            &format!("{path}.appProtocol"),
            app,
            is_qualified_name(app),
        ));
    }
    causes
}

/// `net.JoinHostPort`.
fn join_host_port(ip: &str, port: i64) -> String {
    if is_ipv6(ip) || ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// kube's `formatEndpoints`: the first three ready `ip:port` pairs, then `+ N more...`.
fn format_endpoints(object: &Value) -> String {
    let subsets = items(object.get("subsets"));
    if subsets.is_empty() {
        return "<none>".into();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    let mut more = false;
    let mut push_all = |addresses: &[Value], port: Option<i64>, list: &mut Vec<String>| {
        count += addresses.len();
        for address in addresses {
            if list.len() == MAX {
                more = true;
                break;
            }
            let ip = address.get("ip").and_then(Value::as_str).unwrap_or("");
            list.push(match port {
                Some(p) => join_host_port(ip, p),
                None => ip.to_string(),
            });
        }
    };
    for subset in subsets {
        let addresses = items(subset.get("addresses"));
        let ports = items(subset.get("ports"));
        if ports.is_empty() {
            // Headless services may have endpoints without ports.
            push_all(addresses, None, &mut list);
            continue;
        }
        for port in ports {
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            push_all(addresses, Some(number), &mut list);
        }
    }
    let joined = list.join(",");
    if more {
        return format!("{joined} + {} more...", count - MAX);
    }
    joined
}

/// kube's `endpoints.RepackSubsets`: every (port, address) pair the subsets describe, grouped
/// again into one subset per distinct set of addresses (an address both ready and not ready
/// is not ready; addresses are one per IP and target UID, sorted by IP then UID). kube orders
/// the resulting ports and subsets by an MD5 of their Go printout, which depends on Go's type
/// names; kubegate keeps them in the order they first appear.
pub(crate) fn repack_subsets(subsets: &[Value]) -> Vec<Value> {
    use std::collections::BTreeMap;
    // kube keys an address by IP and target UID (an absent target is an empty UID).
    fn address_key(address: &Value) -> (String, String) {
        let text = |pointer: &str| {
            address
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        (text("/ip"), text("/targetRef/uid"))
    }
    let mut addresses: Vec<((String, String), Value)> = Vec::new();
    // Port (None: a subset without ports) → address index → ready. A port only shows up
    // with an address that offers it.
    let mut ports: Vec<(Option<Value>, BTreeMap<usize, bool>)> = Vec::new();
    for subset in subsets {
        let subset_ports: Vec<Option<Value>> = match subset.get("ports").and_then(Value::as_array) {
            Some(list) if !list.is_empty() => list.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for port in subset_ports {
            for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
                for address in items(subset.get(field)) {
                    let key = address_key(address);
                    let index = match addresses.iter().position(|(k, _)| *k == key) {
                        Some(index) => index,
                        None => {
                            addresses.push((key, address.clone()));
                            addresses.len() - 1
                        }
                    };
                    let slot = match ports.iter().position(|(p, _)| *p == port) {
                        Some(slot) => slot,
                        None => {
                            ports.push((port.clone(), BTreeMap::new()));
                            ports.len() - 1
                        }
                    };
                    // Not ready trumps ready.
                    let state = ports[slot].1.entry(index).or_insert(ready);
                    *state = *state && ready;
                }
            }
        }
    }
    // One subset per distinct address set, its ports in first-seen order.
    let mut groups: Vec<(BTreeMap<usize, bool>, Vec<Value>)> = Vec::new();
    for (port, set) in ports {
        let group = match groups.iter().position(|(s, _)| *s == set) {
            Some(group) => group,
            None => {
                groups.push((set, Vec::new()));
                groups.len() - 1
            }
        };
        if let Some(port) = port {
            groups[group].1.push(port);
        }
    }
    // kube's `LessEndpointAddress`: by IP bytes, then an address without a target first,
    // then by target UID.
    let order = |address: &Value| {
        let target = address.get("targetRef").filter(|r| !r.is_null());
        (
            address
                .get("ip")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            target.is_some(),
            target
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        )
    };
    groups
        .into_iter()
        .map(|(set, ports)| {
            let pick = |wanted: bool| {
                let mut list: Vec<Value> = set
                    .iter()
                    .filter(|(_, ready)| **ready == wanted)
                    .filter_map(|(index, _)| addresses.get(*index))
                    .map(|(_, address)| address.clone())
                    .collect();
                list.sort_by_key(|address| order(address));
                list
            };
            let mut subset = serde_json::Map::new();
            let (ready, not_ready) = (pick(true), pick(false));
            if !ready.is_empty() {
                subset.insert("addresses".into(), Value::Array(ready));
            }
            if !not_ready.is_empty() {
                subset.insert("notReadyAddresses".into(), Value::Array(not_ready));
            }
            if !ports.is_empty() {
                subset.insert("ports".into(), Value::Array(ports));
            }
            Value::Object(subset)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's RepackSubsets on the reviewer's example: one subset for the one address set,
    /// 10.0.0.2 once, 10.0.0.9 not ready (not ready trumps ready), addresses sorted.
    #[test]
    fn subsets_are_repacked_as_kube_repacks_them() {
        let subsets = json!([
            {"addresses": [{"ip": "10.0.0.9"}, {"ip": "10.0.0.2"}],
             "ports": [{"name": "b", "port": 81}, {"name": "a", "port": 80}]},
            {"addresses": [{"ip": "10.0.0.5"}, {"ip": "10.0.0.2"}],
             "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
            {"notReadyAddresses": [{"ip": "10.0.0.9"}],
             "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
            {"ports": [{"name": "lonely", "port": 9}]}
        ]);
        let mut endpoints = json!({"metadata": {"name": "e"}, "subsets": subsets});
        EndpointsStrategy.canonicalize(&mut endpoints);
        assert_eq!(
            endpoints["subsets"],
            json!([{"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.5"}],
                    "notReadyAddresses": [{"ip": "10.0.0.9"}],
                    "ports": [{"name": "b", "port": 81}, {"name": "a", "port": 80}]}])
        );
        // Different address sets stay apart; one address per IP and target.
        let subsets = json!([
            {"addresses": [{"ip": "10.0.0.1", "targetRef": {"uid": "u2"}}, {"ip": "10.0.0.1", "targetRef": {"uid": "u1"}}, {"ip": "10.0.0.1"}],
             "ports": [{"port": 80}]},
            {"addresses": [{"ip": "10.0.0.3"}], "ports": [{"port": 90}]}
        ]);
        let mut endpoints = json!({"subsets": subsets});
        EndpointsStrategy.canonicalize(&mut endpoints);
        assert_eq!(
            endpoints["subsets"],
            json!([
                {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.1", "targetRef": {"uid": "u1"}}, {"ip": "10.0.0.1", "targetRef": {"uid": "u2"}}],
                 "ports": [{"port": 80}]},
                {"addresses": [{"ip": "10.0.0.3"}], "ports": [{"port": 90}]}
            ])
        );
    }

    #[test]
    fn subsets_are_validated() {
        let ep = json!({"subsets": [
            {"ports": [{"port": 80}]},
            {"addresses": [{"ip": "127.0.0.1"}, {"ip": "nope"}], "ports": [{"port": 80}, {"port": 81, "name": "b"}]}
        ]});
        let causes = EndpointsStrategy.validate(&ep);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert!(fields.contains(&"subsets[0]"), "{fields:?}");
        assert_eq!(
            causes[0].message,
            "Required value: must specify `addresses` or `notReadyAddresses`"
        );
        assert!(fields.contains(&"subsets[1].addresses[0].ip"), "{fields:?}");
        assert!(fields.contains(&"subsets[1].addresses[1].ip"), "{fields:?}");
        assert!(fields.contains(&"subsets[1].ports[0].name"), "{fields:?}");
        // protocol is defaulted before validation
        let mut ep =
            json!({"subsets": [{"addresses": [{"ip": "10.1.0.5"}], "ports": [{"port": 80}]}]});
        EndpointsStrategy.prepare_for_create(&mut ep);
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
        assert!(EndpointsStrategy.validate(&ep).is_empty());
    }

    #[test]
    fn endpoints_cell() {
        assert_eq!(format_endpoints(&json!({})), "<none>");
        let ep = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(
            format_endpoints(&ep),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        let ep = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}, {"addresses": [{"ip": "10.0.0.9"}]}]});
        assert_eq!(format_endpoints(&ep), "[fd00::1]:80,10.0.0.9");
        assert_eq!(def().singular, "endpoints");
    }
}

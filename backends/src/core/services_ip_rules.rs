//! The rules on a Service's allocated values: what kube's allocators refuse on this
//! single-stack IPv4 cluster (an address outside the service network, a family or policy
//! the cluster lacks, a node port outside the range) and what may not change once
//! allocated (cluster IPs, IP families), with kube's field paths and messages.

use std::collections::HashSet;

use serde_json::Value;

use super::causes::{go_string_slice, index_path, invalid_raw};
use super::netutil::{is_ipv6, parse_ip};
use super::services_alloc::{
    in_service_cidr, is_headless, needs_health_check, service_type, NODE_PORT_MAX, NODE_PORT_MIN,
    SERVICE_CIDR,
};
use super::{entries, items, str_at};
use crate::status::{field_invalid, StatusCause};

pub(crate) fn strings(value: Option<&Value>) -> Vec<&str> {
    items(value)
        .iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect()
}

pub(crate) fn cluster_ips(object: &Value) -> Vec<&str> {
    strings(object.pointer("/spec/clusterIPs"))
}

/// kube's `isHeadlessService` (on `clusterIPs`, which normalization has filled).
pub(crate) fn headless_ips(object: &Value) -> bool {
    cluster_ips(object) == ["None"]
}

/// kube's `validateUpgradeDowngradeClusterIPs`: allocated addresses never move.
pub(crate) fn changed_cluster_ips(old: &Value, object: &Value) -> Vec<StatusCause> {
    if service_type(object) == "ExternalName" || service_type(old) == "ExternalName" {
        return Vec::new();
    }
    if headless_ips(old) && headless_ips(object) {
        return Vec::new();
    }
    let (before, after) = (cluster_ips(old), cluster_ips(object));
    let rendered = go_string_slice(&after);
    let mut causes = Vec::new();
    let changed = |i: usize| {
        invalid_raw(
            &index_path("spec.clusterIPs", i),
            &rendered,
            "may not change once set",
        )
    };
    if before.len() == after.len() {
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            if b != a {
                causes.push(changed(i));
            }
        }
    } else if before.len() > after.len() {
        if after.is_empty() {
            causes.push(invalid_raw(
                "spec.clusterIPs[0]",
                &rendered,
                "primary clusterIP can not be unset",
            ));
        } else if before[0] != after[0] {
            causes.push(changed(0));
        }
        if after.len() == 1 && str_at(object, "/spec/ipFamilyPolicy") != "SingleStack" {
            causes.push(invalid_raw(
                "spec.clusterIPs[0]",
                &rendered,
                "must be set to 'SingleStack' when releasing the secondary clusterIP",
            ));
        }
    } else if !before.is_empty() && before[0] != after[0] {
        causes.push(changed(0));
    }
    causes
}

/// kube's `validateUpgradeDowngradeIPFamilies` for a cluster with one family.
pub(crate) fn changed_families(old: &Value, object: &Value) -> Vec<StatusCause> {
    if service_type(object) == "ExternalName" || service_type(old) == "ExternalName" {
        return Vec::new();
    }
    if headless_ips(old) || headless_ips(object) {
        return Vec::new();
    }
    let before = strings(old.pointer("/spec/ipFamilies"));
    let after = strings(object.pointer("/spec/ipFamilies"));
    let moved = if before.len() == after.len() {
        before != after
    } else {
        !before.is_empty() && !after.is_empty() && before[0] != after[0]
    };
    if moved {
        return vec![invalid_raw(
            "spec.ipFamilies[0]",
            &go_families(&after),
            "may not change once set",
        )];
    }
    Vec::new()
}

fn go_families(families: &[&str]) -> String {
    let quoted: Vec<String> = families.iter().map(|f| format!("\"{f}\"")).collect();
    format!("[]core.IPFamily{{{}}}", quoted.join(", "))
}

/// What kube's allocators refuse on this single-stack IPv4 cluster. On update, values the
/// old object already held were allocated then and are not checked again.
pub(crate) fn allocation_errors(object: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    if service_type(object) == "ExternalName" {
        return Vec::new();
    }
    let ips = cluster_ips(object);
    let rendered = go_string_slice(&ips);
    let mut causes = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        if *ip != "None" && is_ipv6(ip) {
            causes.push(invalid_raw(
                &index_path("spec.clusterIPs", i),
                &rendered,
                "IPv6 is not configured on this cluster",
            ));
        }
    }
    if !causes.is_empty() {
        return causes;
    }
    let selectorless = entries(object.pointer("/spec/selector")).is_empty();
    if !(is_headless(object) && selectorless) {
        if str_at(object, "/spec/ipFamilyPolicy") == "RequireDualStack" {
            causes.push(field_invalid(
                "spec.ipFamilyPolicy",
                "RequireDualStack",
                "this cluster is not configured for dual-stack services",
            ));
        }
        for (i, family) in strings(object.pointer("/spec/ipFamilies"))
            .iter()
            .enumerate()
        {
            if *family == "IPv6" {
                causes.push(field_invalid(
                    &index_path("spec.ipFamilies", i),
                    family,
                    "not configured on this cluster",
                ));
            }
        }
    }
    let old_ips: Vec<&str> = old.map(cluster_ips).unwrap_or_default();
    for ip in &ips {
        if *ip == "None" || old_ips.contains(ip) || parse_ip(ip).is_none() {
            continue;
        }
        if !in_service_cidr(ip) {
            causes.push(invalid_raw(
                "spec.clusterIPs",
                &rendered,
                &format!(
                    "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
                ),
            ));
        }
    }
    let old_ports: HashSet<i64> = old
        .map(|o| {
            items(o.pointer("/spec/ports"))
                .iter()
                .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
                .collect()
        })
        .unwrap_or_default();
    let out_of_range =
        |n: i64| n != 0 && !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&n) && !old_ports.contains(&n);
    let range_message = format!(
        "provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
    );
    for (i, port) in items(object.pointer("/spec/ports")).iter().enumerate() {
        let np = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if out_of_range(np) {
            causes.push(invalid_raw(
                &format!("{}.nodePort", index_path("spec.ports", i)),
                &np.to_string(),
                &range_message,
            ));
        }
    }
    // An out-of-range health check node port is the allocator's 500
    // (`service_allocations::check`), not a validation error.
    causes
}

/// A health check node port the write asks for outside the node port range (kube's allocator
/// refuses it with an internal error): its message.
pub(crate) fn health_check_port_out_of_range(
    object: &Value,
    old: Option<&Value>,
) -> Option<String> {
    let hc = object
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let old_hc = old
        .and_then(|o| o.pointer("/spec/healthCheckNodePort"))
        .and_then(Value::as_i64);
    (hc != 0
        && !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&hc)
        && old_hc != Some(hc)
        && needs_health_check(object))
    .then(|| {
        format!(
            "failed to allocate requested HealthCheck NodePort {hc}: provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::core::services_alloc::{prepare_create, prepare_update};
    use crate::core::services_validation::{validate_create, validate_update};
    use crate::status::StatusCause;
    use serde_json::{json, Value};

    fn created(spec: Value) -> Value {
        let mut s = json!({"metadata": {"namespace": "default", "name": "web"}, "spec": spec});
        prepare_create(&mut s, None);
        s
    }

    fn messages(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn cluster_ip_range_and_family() {
        let s = created(json!({"clusterIP": "1.2.3.4", "ports": [{"port": 80}]}));
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.clusterIPs: Invalid value: []string{\"1.2.3.4\"}: failed to allocate IP 1.2.3.4: the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is 10.96.0.0/12"]
        );
        let s = created(json!({"clusterIP": "fd00::1", "ports": [{"port": 80}]}));
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.clusterIPs[0]: Invalid value: []string{\"fd00::1\"}: IPv6 is not configured on this cluster"]
        );
        let s = created(json!({"ipFamilyPolicy": "RequireDualStack", "ports": [{"port": 80}]}));
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"]
        );
        let s = created(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}));
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"]
        );
    }

    #[test]
    fn cluster_ip_is_immutable() {
        let old = created(json!({"ports": [{"port": 80}]}));
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.50");
        new["spec"]["clusterIPs"] = json!(["10.96.0.50"]);
        prepare_update(&mut new, &old, None);
        assert_eq!(
            messages(&validate_update(&new, &old)),
            vec!["spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.50\"}: may not change once set"]
        );
        // Setting only the singular field is normalized into the plural, then refused.
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.51");
        prepare_update(&mut new, &old, None);
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.0.51"]));
        assert_eq!(validate_update(&new, &old).len(), 1);
    }
}

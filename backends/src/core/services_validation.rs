//! kube's `ValidateService` and `ValidateServiceUpdate`, with kube's field paths and
//! messages; the rules on allocated values (ranges, families, immutability) live in
//! `services_ip_rules`.

use std::collections::HashSet;

use serde_json::Value;

use super::causes::{go_string_slice, go_value, index_path, invalid_each, invalid_raw, key_path};
use super::netutil::{
    is_ipv6, non_special_ip, parse_ip, valid_cidr, valid_ip, valid_port_num,
    valid_port_num_or_name, valid_protocol,
};
use super::services_alloc::{externally_accessible, needs_health_check, service_type};
use super::services_ip_rules::{
    allocation_errors, changed_cluster_ips, changed_families, cluster_ips, headless_ips, strings,
};
use super::{entries, items, str_at};
use crate::machinery::validation::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};
use crate::status::{
    field_forbidden, field_invalid, field_not_supported, field_required, StatusCause,
};

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const AFFINITIES: &[&str] = &["ClientIP", "None"];
const FAMILIES: &[&str] = &["IPv4", "IPv6"];
const FAMILY_POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];
const TRAFFIC_POLICIES: &[&str] = &["Cluster", "Local"];
/// kube 1.33's: `PreferSameZone` and `PreferSameNode` need the PreferSameTrafficDistribution
/// gate (alpha, off).
const TRAFFIC_DISTRIBUTIONS: &[&str] = &["PreferClose"];
/// `supportedLoadBalancerIPMode`, sorted.
const LOAD_BALANCER_IP_MODES: &[&str] = &["Proxy", "VIP"];
const MAX_AFFINITY_SECONDS: i64 = 86400;
const SOURCE_RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

fn spec(object: &Value) -> &Value {
    object.get("spec").unwrap_or(&Value::Null)
}

/// Validation of a new service, including what kube's allocator would refuse.
pub(crate) fn validate_create(object: &Value) -> Vec<StatusCause> {
    // kube's allocator (the store's BeginCreate) runs before validation and refuses alone:
    // an address out of the range is the one cause, whatever else the Service has wrong.
    let allocation = allocation_errors(object, None);
    if !allocation.is_empty() {
        return allocation;
    }
    validate_service(object)
}

/// Validation of an update: allocated values may not move, then the new object as a whole.
pub(crate) fn validate_update(object: &Value, old: &Value) -> Vec<StatusCause> {
    let mut causes = changed_cluster_ips(old, object);
    causes.extend(changed_families(old, object));
    if service_type(old) == "LoadBalancer"
        && service_type(object) == "LoadBalancer"
        && spec(old).get("loadBalancerClass") != spec(object).get("loadBalancerClass")
    {
        causes.push(invalid_raw(
            "spec.loadBalancerClass",
            &go_value(spec(object).get("loadBalancerClass")),
            "may not change once set",
        ));
    }
    if needs_health_check(old)
        && needs_health_check(object)
        && spec(old).get("healthCheckNodePort") != spec(object).get("healthCheckNodePort")
    {
        causes.push(field_forbidden(
            "spec.healthCheckNodePort",
            "field is immutable",
        ));
    }
    causes.extend(validate_service(object));
    causes.extend(allocation_errors(object, Some(old)));
    causes
}

/// kube's `ValidateServiceStatusUpdate` (metadata aside): `ValidateLoadBalancerStatus`.
pub(crate) fn validate_status_update(object: &Value) -> Vec<StatusCause> {
    const INGRESS: &str = "status.loadBalancer.ingress";
    let ingresses = items(object.pointer("/status/loadBalancer/ingress"));
    // The AllowServiceLBStatusOnNonLB gate is off in 1.33.
    if service_type(object) != "LoadBalancer" && !ingresses.is_empty() {
        return vec![field_forbidden(
            INGRESS,
            "may only be used when `spec.type` is 'LoadBalancer'",
        )];
    }
    let mut causes = Vec::new();
    for (i, ingress) in ingresses.iter().enumerate() {
        let at = |field: &str| format!("{INGRESS}[{i}].{field}");
        let ip = str_at(ingress, "/ip");
        if !ip.is_empty() {
            causes.extend(valid_ip(&at("ip"), ip));
        }
        match ingress.get("ipMode").and_then(Value::as_str) {
            None if !ip.is_empty() => causes.push(field_required(
                &at("ipMode"),
                "must be specified when `ip` is set",
            )),
            None => {}
            Some(_) if ip.is_empty() => causes.push(field_forbidden(
                &at("ipMode"),
                "may not be specified when `ip` is not set",
            )),
            Some(mode) if !LOAD_BALANCER_IP_MODES.contains(&mode) => causes.push(
                field_not_supported(&at("ipMode"), mode, LOAD_BALANCER_IP_MODES),
            ),
            Some(_) => {}
        }
        let hostname = str_at(ingress, "/hostname");
        if !hostname.is_empty() {
            causes.extend(invalid_each(
                &at("hostname"),
                hostname,
                is_dns1123_subdomain(hostname),
            ));
            if parse_ip(hostname).is_some() {
                causes.push(field_invalid(
                    &at("hostname"),
                    hostname,
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
    causes
}

/// kube's `ValidateService` (metadata aside: the registry checks the DNS-1035 name).
fn validate_service(object: &Value) -> Vec<StatusCause> {
    let spec = spec(object);
    let svc_type = service_type(object);
    let headless = headless_ips(object);
    let ports = items(spec.get("ports"));
    let mut causes = Vec::new();
    // The topology annotations, old and new, must agree when both are set.
    const HINTS: &str = "service.kubernetes.io/topology-aware-hints";
    const MODE: &str = "service.kubernetes.io/topology-mode";
    let annotation = |key: &str| {
        object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    };
    if let (Some(hints), Some(mode)) = (annotation(HINTS), annotation(MODE)) {
        if hints != mode {
            causes.push(field_invalid(
                &format!("metadata.annotations[{MODE}]"),
                mode,
                &format!("must match annotations[{HINTS}] when both are specified"),
            ));
        }
    }
    if ports.is_empty() && !headless && svc_type != "ExternalName" {
        causes.push(field_required("spec.ports", ""));
    }
    match svc_type {
        "LoadBalancer" | "NodePort" if headless => causes.push(field_invalid(
            "spec.clusterIPs[0]",
            "None",
            &format!("may not be set to 'None' for {svc_type} services"),
        )),
        "ExternalName" => causes.extend(external_name(spec)),
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        causes.extend(service_port(
            port,
            ports.len() > 1,
            &mut names,
            &index_path("spec.ports", i),
        ));
    }
    for (key, value) in entries(spec.get("selector")) {
        causes.extend(invalid_each("spec.selector", key, is_qualified_name(key)));
        let value = value.as_str().unwrap_or("");
        causes.extend(invalid_each(
            "spec.selector",
            value,
            is_valid_label_value(value),
        ));
    }
    causes.extend(session_affinity(spec));
    if svc_type != "ExternalName" {
        causes.extend(cluster_ip_fields(object));
    }
    for (i, ip) in strings(spec.get("externalIPs")).into_iter().enumerate() {
        let field = index_path("spec.externalIPs", i);
        let invalid = valid_ip(&field, ip);
        if invalid.is_empty() {
            causes.extend(non_special_ip(&field, ip));
        } else {
            causes.extend(invalid);
        }
    }
    match svc_type {
        "" => causes.push(field_required("spec.type", "")),
        t if !SERVICE_TYPES.contains(&t) => {
            causes.push(field_not_supported("spec.type", t, SERVICE_TYPES))
        }
        _ => {}
    }
    causes.extend(port_conflicts(ports, svc_type));
    causes.extend(load_balancer_fields(object));
    causes.extend(traffic_policies(object));
    causes
}

fn external_name(spec: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if !items(spec.get("clusterIPs")).is_empty() {
        causes.push(field_forbidden(
            "spec.clusterIPs",
            "may not be set for ExternalName services",
        ));
    }
    if !items(spec.get("ipFamilies")).is_empty() {
        causes.push(field_forbidden(
            "spec.ipFamilies",
            "may not be set for ExternalName services",
        ));
    }
    if spec.get("ipFamilyPolicy").is_some_and(|p| !p.is_null()) {
        causes.push(field_forbidden(
            "spec.ipFamilyPolicy",
            "may not be set for ExternalName services",
        ));
    }
    // The value (a CNAME) may end in a dot, marking it fully qualified.
    let cname = spec
        .get("externalName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let cname = cname.strip_suffix('.').unwrap_or(cname);
    if cname.is_empty() {
        causes.push(field_required("spec.externalName", ""));
    } else {
        causes.extend(invalid_each(
            "spec.externalName",
            cname,
            is_dns1123_subdomain(cname),
        ));
    }
    causes
}

/// kube's `validateServicePort`.
fn service_port(
    port: &Value,
    require_name: bool,
    names: &mut HashSet<String>,
    path: &str,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let name = port.get("name").and_then(Value::as_str).unwrap_or("");
    let name_field = format!("{path}.name");
    if require_name && name.is_empty() {
        causes.push(field_required(&name_field, ""));
    } else if !name.is_empty() {
        causes.extend(invalid_each(&name_field, name, is_dns1123_label(name)));
        if !names.insert(name.to_string()) {
            causes.push(crate::status::field_duplicate(&name_field, name));
        }
    }
    causes.extend(valid_port_num(&format!("{path}.port"), port.get("port")));
    causes.extend(valid_protocol(
        &format!("{path}.protocol"),
        port.get("protocol"),
    ));
    causes.extend(valid_port_num_or_name(
        &format!("{path}.targetPort"),
        port.get("targetPort"),
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

fn session_affinity(spec: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let config = spec.get("sessionAffinityConfig").filter(|c| !c.is_null());
    match spec
        .get("sessionAffinity")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => causes.push(field_required("spec.sessionAffinity", "")),
        "ClientIP" => {
            let required = "when session affinity type is ClientIP";
            let client_ip = config
                .and_then(|c| c.get("clientIP"))
                .filter(|c| !c.is_null());
            let timeout = client_ip
                .and_then(|c| c.get("timeoutSeconds"))
                .filter(|t| !t.is_null());
            match (config, client_ip, timeout) {
                (None, _, _) => causes.push(field_required("spec.sessionAffinityConfig", required)),
                (_, None, _) => causes.push(field_required(
                    "spec.sessionAffinityConfig.clientIP",
                    required,
                )),
                (_, _, None) => causes.push(field_required(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    required,
                )),
                (_, _, Some(t)) => {
                    if !t
                        .as_i64()
                        .is_some_and(|s| s > 0 && s <= MAX_AFFINITY_SECONDS)
                    {
                        causes.push(invalid_raw(
                            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                            &go_value(Some(t)),
                            &format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
                        ));
                    }
                }
            }
        }
        "None" => {
            if config.is_some() {
                causes.push(field_forbidden(
                    "spec.sessionAffinityConfig",
                    "must not be set when session affinity is None",
                ));
            }
        }
        other => causes.push(field_not_supported(
            "spec.sessionAffinity",
            other,
            AFFINITIES,
        )),
    }
    causes
}

/// kube's `ValidateServiceClusterIPsRelatedFields`.
fn cluster_ip_fields(object: &Value) -> Vec<StatusCause> {
    let spec = spec(object);
    let cluster_ip = str_at(object, "/spec/clusterIP");
    let ips = cluster_ips(object);
    let rendered = go_string_slice(&ips);
    let mut causes = Vec::new();
    if !cluster_ip.is_empty() {
        if ips.is_empty() {
            causes.push(field_required("spec.clusterIPs", ""));
        } else if ips[0] != cluster_ip {
            causes.push(invalid_raw(
                "spec.clusterIPs",
                &rendered,
                "first value must match `clusterIP`",
            ));
        }
    } else if !ips.is_empty() {
        causes.push(invalid_raw(
            "spec.clusterIPs",
            &rendered,
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = strings(spec.get("ipFamilies"));
    let mut seen = HashSet::new();
    for (i, family) in families.iter().enumerate() {
        let field = index_path("spec.ipFamilies", i);
        if !FAMILIES.contains(family) {
            causes.push(field_not_supported(&field, family, FAMILIES));
        }
        if !seen.insert(*family) {
            causes.push(crate::status::field_duplicate(&field, family));
        }
    }
    if let Some(policy) = spec.get("ipFamilyPolicy").and_then(Value::as_str) {
        if !FAMILY_POLICIES.contains(&policy) {
            causes.push(field_not_supported(
                "spec.ipFamilyPolicy",
                policy,
                FAMILY_POLICIES,
            ));
        }
    }
    let mut bad_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if ips.len() > 1 {
                bad_ips = true;
                causes.push(invalid_raw(
                    "spec.clusterIPs",
                    &rendered,
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let errors = valid_ip(&index_path("spec.clusterIPs", i), ip);
        bad_ips |= !errors.is_empty();
        causes.extend(errors);
    }
    if ips.len() > 2 {
        causes.push(invalid_raw(
            "spec.clusterIPs",
            &rendered,
            "may only hold up to 2 values",
        ));
    }
    if bad_ips {
        return causes;
    }
    if ips.len() > 1 && is_ipv6(ips[0]) == is_ipv6(ips[1]) {
        causes.push(invalid_raw(
            "spec.clusterIPs",
            &rendered,
            "may specify no more than one IP for each IP family",
        ));
    }
    if ips != ["None"] {
        for (i, (ip, family)) in ips.iter().zip(&families).enumerate() {
            let expected = match (*family, is_ipv6(ip)) {
                ("IPv4", true) => Some("IPv4"),
                ("IPv6", false) => Some("IPv6"),
                _ => None,
            };
            if let Some(expected) = expected {
                causes.push(field_invalid(
                    &index_path("spec.clusterIPs", i),
                    ip,
                    &format!("expected an {expected} value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
    causes
}

/// Node ports only where a type has them, and no port (or node port) twice per protocol.
fn port_conflicts(ports: &[Value], svc_type: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let node_port = |p: &Value| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
    let protocol = |p: &Value| {
        p.get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if svc_type == "ClusterIP" {
        for (i, port) in ports.iter().enumerate() {
            if node_port(port) != 0 {
                causes.push(field_forbidden(
                    &format!("{}.nodePort", index_path("spec.ports", i)),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let np = node_port(port);
        if np != 0 && !node_ports.insert((protocol(port), np)) {
            causes.push(StatusCause {
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {np}"),
                field: format!("{}.nodePort", index_path("spec.ports", i)),
            });
        }
    }
    let mut seen = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !seen.insert((protocol(port), number)) {
            // kube prints the (protocol, port) key as the Go struct it uses.
            causes.push(StatusCause {
                reason: "FieldValueDuplicate".into(),
                message: format!(
                    "Duplicate value: core.ServicePort{{Name:\"\", Protocol:\"{}\", AppProtocol:(*string)(nil), Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                    protocol(port)
                ),
                field: index_path("spec.ports", i),
            });
        }
    }
    causes
}

fn load_balancer_fields(object: &Value) -> Vec<StatusCause> {
    let spec = spec(object);
    let is_lb = service_type(object) == "LoadBalancer";
    let only_lb = "may only be used when `type` is 'LoadBalancer'";
    let mut causes = Vec::new();
    let ranges = strings(spec.get("loadBalancerSourceRanges"));
    if !ranges.is_empty() {
        // kube's path really is capitalised here.
        let field = "spec.LoadBalancerSourceRanges";
        if !is_lb {
            causes.push(field_forbidden(field, only_lb));
        }
        for (i, range) in ranges.iter().enumerate() {
            causes.extend(valid_cidr(&index_path(field, i), range.trim()));
        }
    } else if let Some(value) = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SOURCE_RANGES_ANNOTATION))
        .and_then(Value::as_str)
    {
        let field = key_path("metadata.annotations", SOURCE_RANGES_ANNOTATION);
        if !is_lb {
            causes.push(field_forbidden(&field, only_lb));
        }
        let value = value.trim();
        if !value.is_empty() {
            for range in value.split(',') {
                causes.extend(valid_cidr(&field, range.trim()));
            }
        }
    }
    let allocate = spec
        .get("allocateLoadBalancerNodePorts")
        .filter(|v| !v.is_null());
    if allocate.is_some() && !is_lb {
        causes.push(field_forbidden(
            "spec.allocateLoadBalancerNodePorts",
            only_lb,
        ));
    }
    if is_lb && allocate.is_none() {
        causes.push(field_required("allocateLoadBalancerNodePorts", ""));
    }
    if let Some(class) = spec.get("loadBalancerClass").and_then(Value::as_str) {
        if is_lb {
            causes.extend(invalid_each(
                "spec.loadBalancerClass",
                class,
                is_qualified_name(class),
            ));
        } else {
            causes.push(field_forbidden("spec.loadBalancerClass", only_lb));
        }
    }
    causes
}

fn traffic_policies(object: &Value) -> Vec<StatusCause> {
    let spec = spec(object);
    let mut causes = Vec::new();
    let etp = spec
        .get("externalTrafficPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !externally_accessible(object) {
        if !etp.is_empty() {
            causes.push(field_invalid(
                "spec.externalTrafficPolicy",
                etp,
                "may only be set for externally-accessible services",
            ));
        }
    } else if etp.is_empty() {
        causes.push(field_required("spec.externalTrafficPolicy", ""));
    } else if !TRAFFIC_POLICIES.contains(&etp) {
        causes.push(field_not_supported(
            "spec.externalTrafficPolicy",
            etp,
            TRAFFIC_POLICIES,
        ));
    }
    let hc = spec.get("healthCheckNodePort").filter(|v| !v.is_null());
    let hc_number = hc.and_then(Value::as_i64).unwrap_or(0);
    if !needs_health_check(object) {
        if hc_number != 0 {
            causes.push(invalid_raw(
                "spec.healthCheckNodePort",
                &go_value(hc),
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ));
        }
    } else if hc_number == 0 {
        causes.push(field_required("spec.healthCheckNodePort", ""));
    } else {
        causes.extend(valid_port_num("spec.healthCheckNodePort", hc));
    }
    match spec.get("internalTrafficPolicy").and_then(Value::as_str) {
        None => {
            if matches!(
                service_type(object),
                "NodePort" | "LoadBalancer" | "ClusterIP"
            ) {
                causes.push(field_required("spec.internalTrafficPolicy", ""));
            }
        }
        Some(p) if !TRAFFIC_POLICIES.contains(&p) => {
            causes.push(field_not_supported(
                "spec.internalTrafficPolicy",
                p,
                TRAFFIC_POLICIES,
            ));
        }
        Some(_) => {}
    }
    if let Some(d) = spec.get("trafficDistribution").and_then(Value::as_str) {
        if !TRAFFIC_DISTRIBUTIONS.contains(&d) {
            causes.push(field_not_supported(
                "spec.trafficDistribution",
                d,
                TRAFFIC_DISTRIBUTIONS,
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::services_alloc::prepare_create;
    use serde_json::json;

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
    fn valid_services_pass() {
        for spec in [
            json!({"ports": [{"port": 80}], "selector": {"app": "web"}}),
            json!({"type": "NodePort", "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}),
            json!({"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": "http"}]}),
            json!({"clusterIP": "None", "selector": {"app": "db"}}),
            json!({"clusterIP": "None"}),
            json!({"type": "ExternalName", "externalName": "db.example.com."}),
        ] {
            let s = created(spec.clone());
            assert!(
                validate_create(&s).is_empty(),
                "{spec}: {:?}",
                messages(&validate_create(&s))
            );
        }
    }

    #[test]
    fn the_allocators_refusal_comes_alone() {
        let s = created(json!({"clusterIP": "10.0.0.1", "ports": [{"port": 0}]}));
        let causes = messages(&validate_create(&s));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].contains("is not in the valid range"),
            "{causes:?}"
        );
    }

    #[test]
    fn topology_annotations_must_agree_when_both_are_set() {
        let mut s = created(json!({"ports": [{"port": 80}]}));
        s["metadata"]["annotations"] = json!({
            "service.kubernetes.io/topology-aware-hints": "auto",
            "service.kubernetes.io/topology-mode": "Auto"});
        assert_eq!(
            messages(&validate_create(&s)),
            ["metadata.annotations[service.kubernetes.io/topology-mode]: Invalid value: \"Auto\": must match annotations[service.kubernetes.io/topology-aware-hints] when both are specified"]
        );
        s["metadata"]["annotations"]["service.kubernetes.io/topology-mode"] = json!("auto");
        assert!(validate_create(&s).is_empty());
    }

    #[test]
    fn load_balancer_status_is_validated_as_kube_does() {
        let mut lb = created(json!({"type": "LoadBalancer", "ports": [{"port": 80}]}));
        lb["status"] = json!({"loadBalancer": {"ingress": [
            {"ip": "bogus", "ipMode": "VIP"},
            {"hostname": "1.2.3.4"},
            {"ip": "1.2.3.4", "ipMode": "Weird"},
            {"hostname": "a.b", "ipMode": "VIP"},
            {"ip": "10.0.0.1"},
            {"ip": "010.0.0.2", "ipMode": "Proxy", "hostname": "lb.example.com"}
        ]}});
        assert_eq!(
            messages(&validate_status_update(&lb)),
            [
                "status.loadBalancer.ingress[0].ip: Invalid value: \"bogus\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "status.loadBalancer.ingress[1].hostname: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
                "status.loadBalancer.ingress[2].ipMode: Unsupported value: \"Weird\": supported values: \"Proxy\", \"VIP\"",
                "status.loadBalancer.ingress[3].ipMode: Forbidden: may not be specified when `ip` is not set",
                "status.loadBalancer.ingress[4].ipMode: Required value: must be specified when `ip` is set",
            ]
        );
        let mut cluster_ip = created(json!({"ports": [{"port": 80}]}));
        cluster_ip["status"] =
            json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ipMode": "VIP"}]}});
        assert_eq!(
            messages(&validate_status_update(&cluster_ip)),
            ["status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"]
        );
        cluster_ip["status"] = json!({"loadBalancer": {}});
        assert!(validate_status_update(&cluster_ip).is_empty());
    }

    #[test]
    fn traffic_distribution_is_prefer_close_only_in_1_33() {
        let s = created(json!({"ports": [{"port": 80}], "trafficDistribution": "PreferSameNode"}));
        assert_eq!(
            messages(&validate_create(&s)),
            ["spec.trafficDistribution: Unsupported value: \"PreferSameNode\": supported values: \"PreferClose\""]
        );
        let s = created(json!({"ports": [{"port": 80}], "trafficDistribution": "PreferClose"}));
        assert!(validate_create(&s).is_empty());
    }

    #[test]
    fn port_rules() {
        let s = created(
            json!({"ports": [{"port": 80}, {"port": 80, "name": "b"}, {"port": 70000, "name": "b", "protocol": "ICMP"}]}),
        );
        let m = messages(&validate_create(&s));
        assert!(
            m.contains(&"spec.ports[0].name: Required value".to_string()),
            "{m:?}"
        );
        assert!(
            m.contains(&"spec.ports[2].name: Duplicate value: \"b\"".to_string()),
            "{m:?}"
        );
        assert!(
            m.contains(
                &"spec.ports[2].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
                    .to_string()
            ),
            "{m:?}"
        );
        assert!(m.contains(&"spec.ports[2].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".to_string()), "{m:?}");
        assert!(
            m.iter()
                .any(|x| x.starts_with("spec.ports[1]: Duplicate value: core.ServicePort{")),
            "{m:?}"
        );
        let s = created(json!({}));
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.ports: Required value"]
        );
    }

    #[test]
    fn external_name_rules() {
        let s = created(json!({"type": "ExternalName"}));
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.externalName: Required value"]
        );
        let s = created(json!({"type": "ExternalName", "externalName": "Bad_Name"}));
        assert_eq!(validate_create(&s)[0].field, "spec.externalName");
        let s = created(
            json!({"type": "ExternalName", "externalName": "a.b", "clusterIP": "10.96.0.9"}),
        );
        let m = messages(&validate_create(&s));
        assert!(
            m.contains(
                &"spec.clusterIPs: Forbidden: may not be set for ExternalName services".to_string()
            ),
            "{m:?}"
        );
    }

    #[test]
    fn type_specific_fields() {
        let s = created(
            json!({"ports": [{"port": 80, "nodePort": 30001}], "externalTrafficPolicy": "Local"}),
        );
        let m = messages(&validate_create(&s));
        assert!(
            m.contains(
                &"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
                    .to_string()
            ),
            "{m:?}"
        );
        assert!(m.contains(&"spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services".to_string()), "{m:?}");
        let s = created(json!({"type": "Weird", "ports": [{"port": 80}]}));
        let m = messages(&validate_create(&s));
        assert!(m.contains(&"spec.type: Unsupported value: \"Weird\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"".to_string()), "{m:?}");
        let s = created(json!({"ports": [{"port": 80}], "externalIPs": ["127.0.0.1"]}));
        assert_eq!(validate_create(&s)[0].field, "spec.externalIPs[0]");
        let s = created(
            json!({"ports": [{"port": 80}], "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}}),
        );
        assert_eq!(
            messages(&validate_create(&s)),
            vec!["spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400"]
        );
    }
}

//! Services (`/api/v1/namespaces/{ns}/services`, short name `svc`, category `all`) with
//! their `status` subresource: kube's service strategy, defaulting and allocation (see
//! `services_alloc`, including its hashing limitation) and validation (see
//! `services_validation`), plus the `kubectl get svc` row.

use std::sync::Arc;

use serde_json::{json, Value};

use super::service_allocations::{
    check as check_allocations, claim as claim_allocations, owner_of, release_claims, released,
    ServiceAllocations,
};
use super::services_alloc::{prepare_create, prepare_update};
use super::services_validation::{validate_create, validate_update};
use super::{age, base_def, entries, field_at, items, str_at, Names};
use crate::machinery::validation::NameRule;
use crate::resource::{
    age_column, name_column, ResourceDef, Strategy, SubresourceDef, TableColumn,
};
use crate::status::{ApiError, StatusCause};

pub use super::services_alloc::{
    cluster_ip_for, node_port_for, NODE_PORT_MAX, NODE_PORT_MIN, SERVICE_CIDR,
};

/// kube 1.33's `GetWarningsForService`: addresses and CIDRs in forms a future release refuses
/// (or not canonical), the deprecated topology-hints annotation, and fields the type ignores.
fn warnings_for_service(object: &Value) -> Vec<String> {
    use super::netutil::{cidr_warnings, ip_warnings};
    let mut warnings = Vec::new();
    if object
        .pointer("/metadata/annotations/service.kubernetes.io~1topology-aware-hints")
        .is_some()
    {
        warnings.push("annotation service.kubernetes.io/topology-aware-hints is deprecated, please use service.kubernetes.io/topology-mode instead".to_string());
    }
    let strings = |pointer: &str| -> Vec<String> {
        items(object.pointer(pointer))
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let cluster_ip = str_at(object, "/spec/clusterIP");
    if !cluster_ip.is_empty() && cluster_ip != "None" {
        for (i, ip) in strings("/spec/clusterIPs").iter().enumerate() {
            warnings.extend(ip_warnings(&format!("spec.clusterIPs[{i}]"), ip));
        }
    }
    let external_ips = strings("/spec/externalIPs");
    for (i, ip) in external_ips.iter().enumerate() {
        warnings.extend(ip_warnings(&format!("spec.externalIPs[{i}]"), ip));
    }
    let load_balancer_ip = str_at(object, "/spec/loadBalancerIP");
    if !load_balancer_ip.is_empty() {
        warnings.extend(ip_warnings("spec.loadBalancerIP", load_balancer_ip));
    }
    for (i, cidr) in strings("/spec/loadBalancerSourceRanges").iter().enumerate() {
        warnings.extend(cidr_warnings(
            &format!("spec.loadBalancerSourceRanges[{i}]"),
            cidr,
        ));
    }
    let service_type = str_at(object, "/spec/type");
    if service_type == "ExternalName" && !external_ips.is_empty() {
        warnings.push("spec.externalIPs is ignored when spec.type is \"ExternalName\"".to_string());
    }
    if service_type != "ExternalName" && !str_at(object, "/spec/externalName").is_empty() {
        warnings.push(
            "spec.externalName is ignored when spec.type is not \"ExternalName\"".to_string(),
        );
    }
    warnings
}

/// The store key of the Service `namespace/name`.
pub fn service_key(namespace: &str, name: &str) -> String {
    format!("{SERVICES_PREFIX}/{namespace}/{name}")
}

/// Where Services are stored.
const SERVICES_PREFIX: &str = "/core/services";

/// kube-apiserver's own Service, `default/kubernetes` (its bootstrap controller's): ClusterIP
/// 10.96.0.1, port 443 `https` to the secure port. Created when missing, so one deleted comes
/// back on the next pass as kube's does; an existing one is left as it is (replicas may
/// listen on different ports, and would otherwise take turns rewriting it).
pub async fn ensure_kubernetes_service(
    registry: &crate::registry::Registry,
    secure_port: u16,
) -> crate::status::ApiResult<()> {
    let Some(def) = registry.find("", "services") else {
        return Ok(());
    };
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.96.0.1",
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": secure_port}],
        },
    });
    match registry
        .create_internal(&def, service, crate::registry::manager::KUBE_APISERVER)
        .await
    {
        Ok(_) => {
            tracing::info!("created the default/kubernetes Service");
            Ok(())
        }
        // Already there, or the namespace is going away: nothing to do.
        Err(e) if e.code == 409 || e.code == 403 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The Service resource, whose cluster IPs and node ports are unique among the Services
/// `allocations` records (fed from the watch cache by the server).
pub fn def_with_allocations(allocations: Arc<ServiceAllocations>) -> ResourceDef {
    let mut def = def();
    def.strategy = Arc::new(ServiceStrategy {
        allocations: Some(allocations),
    });
    def
}

/// The Service resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "services",
            singular: "service",
            kind: "Service",
            namespaced: true,
            definition: "io.k8s.api.core.v1.Service",
        },
        Arc::new(ServiceStrategy::default()),
    );
    def.short_names = vec!["svc".into()];
    def.categories = vec!["all".into()];
    def.subresources = vec![SubresourceDef {
        name: "status",
        kind: "Service".into(),
        verbs: vec!["get", "patch", "update"],
    }];
    def.columns = columns();
    def.field_selectors = vec![
        ("spec.clusterIP", |o| field_at(o, "/spec/clusterIP")),
        ("spec.type", |o| field_at(o, "/spec/type")),
    ];
    def.patch_meta = &[
        ("spec.ports", "merge", "port"),
        ("status.conditions", "merge", "type"),
    ];
    def
}

fn column(name: &'static str, description: &'static str, priority: u32) -> TableColumn {
    TableColumn {
        name: name.into(),
        type_: "string".into(),
        format: "".into(),
        description: description.into(),
        priority,
    }
}

fn columns() -> Vec<TableColumn> {
    vec![
        name_column(),
        column("Type", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types", 0),
        column("Cluster-IP", "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies", 0),
        column("External-IP", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.", 0),
        column("Port(s)", "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies", 0),
        age_column(),
        column("Selector", "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/", 1),
    ]
}

/// kube's service strategy (and, for `status`, the default status strategy).
/// kube's Service strategy; with `allocations`, cluster IPs and node ports are unique.
#[derive(Default)]
pub struct ServiceStrategy {
    allocations: Option<Arc<ServiceAllocations>>,
}

impl Strategy for ServiceStrategy {
    /// kube's storage sets `ReturnDeletedObject`: a DELETE answers with the object.
    fn return_deleted_object(&self) -> bool {
        true
    }

    /// kube's `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            // A non-pointer struct in Go: a new service always shows `loadBalancer: {}`.
            map.insert("status".into(), json!({"loadBalancer": {}}));
        }
        prepare_create(object, self.allocations.as_deref());
    }

    /// kube's allocator fills these in BeginCreate/BeginUpdate, after the field manager.
    fn server_assigned_fields(&self, object: &Value) -> Vec<String> {
        let mut fields: Vec<String> = [
            "/spec/clusterIP",
            "/spec/clusterIPs",
            "/spec/ipFamilies",
            "/spec/ipFamilyPolicy",
            "/spec/healthCheckNodePort",
        ]
        .iter()
        .map(|p| p.to_string())
        .collect();
        let ports = object
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        fields.extend((0..ports).map(|i| format!("/spec/ports/{i}/nodePort")));
        fields
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        if let Some(map) = object.as_object_mut() {
            match old.get("status") {
                Some(s) => map.insert("status".into(), s.clone()),
                None => map.remove("status"),
            };
        }
        prepare_update(object, old, self.allocations.as_deref());
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    fn write_abandoned(&self, namespace: &str, name: &str) {
        if let Some(allocations) = &self.allocations {
            allocations.release_reservations(&format!("{namespace}/{name}"));
        }
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_create(object)
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        validate_update(object, old)
    }

    /// A `status` write is checked as kube's ValidateServiceStatusUpdate checks it: the load
    /// balancer status only (the rest is the stored object's).
    fn validate_status_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        super::services_validation::validate_status_update(object)
    }

    fn begin_write(&self, object: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        match &self.allocations {
            Some(allocations) => check_allocations(allocations, object, old),
            None => Ok(()),
        }
    }

    fn claim<'a>(
        &'a self,
        store: &'a dyn crate::storage::Store,
        object: &'a Value,
        old: Option<&'a Value>,
        dry_run: bool,
    ) -> Option<futures::future::BoxFuture<'a, Result<(), ApiError>>> {
        self.allocations.as_ref()?;
        Some(Box::pin(claim_allocations(
            store,
            object,
            old,
            dry_run,
            &service_key,
        )))
    }

    fn after_write<'a>(
        &'a self,
        store: &'a dyn crate::storage::Store,
        written: Option<&'a Value>,
        old: &'a Value,
    ) -> Option<futures::future::BoxFuture<'a, ()>> {
        self.allocations.as_ref()?;
        let gone = released(old, written);
        if gone.is_empty() {
            return None;
        }
        Some(Box::pin(async move {
            release_claims(store, &owner_of(old), gone).await;
        }))
    }

    fn warnings(&self, object: &Value, _old: Option<&Value>) -> Vec<String> {
        warnings_for_service(object)
    }

    /// kube's status update (`newService.Spec = oldService.Spec`: metadata written through
    /// `/status` is kept), and `SetDefaults_Service`'s `ipMode: VIP` for every load balancer
    /// ingress with an address (LoadBalancerIPMode, GA in 1.32).
    fn prepare_for_status_update(&self, object: &mut Value, old: &Value) {
        crate::resource::keep_old_spec(object, old);
        if let Some(ingresses) = object
            .pointer_mut("/status/loadBalancer/ingress")
            .and_then(Value::as_array_mut)
        {
            for ingress in ingresses.iter_mut().filter_map(Value::as_object_mut) {
                let has_ip = ingress
                    .get("ip")
                    .and_then(Value::as_str)
                    .is_some_and(|ip| !ip.is_empty());
                if has_ip && ingress.get("ipMode").is_none_or(Value::is_null) {
                    ingress.insert("ipMode".into(), json!("VIP"));
                }
            }
        }
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        let cluster_ip = items(object.pointer("/spec/clusterIPs"))
            .first()
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let mut ports = port_string(object);
        if ports.is_empty() {
            ports = "<none>".into();
        }
        vec![
            json!(str_at(object, "/spec/type")),
            json!(cluster_ip),
            json!(external_ip(object)),
            json!(ports),
            json!(age(object)),
            json!(format_labels(object.pointer("/spec/selector"))),
        ]
    }
}

/// kube's `makePortString`: `80/TCP`, or `80:30080/TCP` with a node port.
fn port_string(object: &Value) -> String {
    let pieces: Vec<String> = items(object.pointer("/spec/ports"))
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("");
            match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    pieces.join(",")
}

/// kube's `getServiceExternalIP` as the server renders it (wide: never truncated).
fn external_ip(object: &Value) -> String {
    let external: Vec<&str> = items(object.pointer("/spec/externalIPs"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match str_at(object, "/spec/type") {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".into()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut lb: Vec<&str> = items(object.pointer("/status/loadBalancer/ingress"))
                .iter()
                .filter_map(|i| {
                    let ip = i.get("ip").and_then(Value::as_str).unwrap_or("");
                    let host = i.get("hostname").and_then(Value::as_str).unwrap_or("");
                    [ip, host].into_iter().find(|s| !s.is_empty())
                })
                .collect();
            // A sorted set in kube.
            lb.sort_unstable();
            lb.dedup();
            lb.extend(external.iter());
            if lb.is_empty() {
                "<pending>".into()
            } else {
                lb.join(",")
            }
        }
        "ExternalName" => str_at(object, "/spec/externalName").to_string(),
        _ => "<unknown>".into(),
    }
}

/// kube's `labels.FormatLabels`: `k=v` pairs sorted by key, or `<none>`.
pub(crate) fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<(&String, &Value)> = entries(map);
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_row_matches_kubectl() {
        let mut s = json!({"metadata": {"namespace": "default", "name": "web", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"type": "NodePort", "selector": {"tier": "fe", "app": "web"}, "ports": [{"port": 80, "nodePort": 30080}, {"name": "b", "port": 53, "protocol": "UDP"}]}});
        ServiceStrategy::default().prepare_for_create(&mut s);
        let cells = ServiceStrategy::default().table_cells(&s);
        assert_eq!(cells.len(), 6);
        assert_eq!(cells[0], "NodePort");
        assert_eq!(
            cells[1],
            json!(cluster_ip_for("default", "web").to_string())
        );
        assert_eq!(cells[2], "<none>");
        let ports = cells[3].as_str().unwrap_or("");
        assert!(ports.starts_with("80:30080/TCP,53:"), "{ports}");
        assert!(ports.ends_with("/UDP"), "{ports}");
        assert_eq!(cells[5], "app=web,tier=fe");
        assert_eq!(def().columns.len(), 7);
        assert_eq!(def().columns[6].priority, 1);
    }

    #[test]
    fn external_ip_cells() {
        let lb = json!({"spec": {"type": "LoadBalancer", "externalIPs": ["1.1.1.1"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}, {"hostname": "lb.example"}]}}});
        assert_eq!(external_ip(&lb), "9.9.9.9,lb.example,1.1.1.1");
        assert_eq!(
            external_ip(&json!({"spec": {"type": "LoadBalancer"}})),
            "<pending>"
        );
        assert_eq!(
            external_ip(&json!({"spec": {"type": "ExternalName", "externalName": "x.y"}})),
            "x.y"
        );
        let headless = json!({"spec": {"type": "ClusterIP", "clusterIPs": ["None"]}});
        assert_eq!(ServiceStrategy::default().table_cells(&headless)[1], "None");
        assert_eq!(
            ServiceStrategy::default().table_cells(&headless)[3],
            "<none>"
        );
    }

    #[test]
    fn status_survives_update_and_selectors_work() {
        let mut s = json!({"metadata": {"namespace": "n", "name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
        ServiceStrategy::default().prepare_for_create(&mut s);
        assert_eq!(s["status"], json!({"loadBalancer": {}}));
        let mut old = s.clone();
        old["status"] = json!({"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}]}});
        let mut new = s.clone();
        new["status"] = json!({});
        ServiceStrategy::default().prepare_for_update(&mut new, &old);
        assert_eq!(new["status"], old["status"]);
        assert!(ServiceStrategy::default()
            .validate_update(&new, &old)
            .is_empty());
        let d = def();
        assert_eq!(
            d.field_extractor("spec.type").and_then(|f| f(&new)),
            Some("LoadBalancer".into())
        );
        assert!(d.field_extractor("spec.clusterIP").is_some());
    }
}

//! kube-apiserver 1.33's API Priority and Fairness bootstrap configuration
//! (`k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap/default.go`) and its reconciliation at
//! start-up (`pkg/registry/flowcontrol/ensurer` run by the `priority-and-fairness-config-producer`
//! post-start hook).
//!
//! The mandatory objects (priority levels `exempt` and `catch-all`, flow schemas `exempt` and
//! `catch-all`) keep APF working whatever operators do: they are recreated when deleted and
//! their spec is forced back (in the `exempt` level, `spec.exempt` is the operator's to tune).
//! The suggested objects are a starting configuration: recreated when missing, but their spec
//! is only restored while `apf.kubernetes.io/autoupdate-spec` says `true` (without a parsable
//! annotation, while the object is still at generation 1, i.e. nobody edited its spec).
//! Objects carrying `autoupdate-spec: true` whose name kube no longer ships are deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{json, Value};

use super::flowcontrol::{
    default_flow_schema_spec, default_priority_level_spec, semantically_equal,
    AUTO_UPDATE_ANNOTATION, GROUP,
};
use super::str_at;
use crate::registry::{manager, Registry};
use crate::resource::ResourceDef;

// ---------------------------------------------------------------------------------------------
// The bootstrap objects
// ---------------------------------------------------------------------------------------------

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": kind,
        "metadata": {"name": name, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

/// A Limited priority level that queues (every suggested level does).
fn queuing_level(name: &str, shares: i64, lendable: i64, queues: i64, hand: i64) -> Value {
    object(
        "PriorityLevelConfiguration",
        name,
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {"type": "Queue",
                "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": 50}},
        }}),
    )
}

fn exempt_level() -> Value {
    object(
        "PriorityLevelConfiguration",
        "exempt",
        json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
    )
}

fn catch_all_level() -> Value {
    object(
        "PriorityLevelConfiguration",
        "catch-all",
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": 5,
            "lendablePercent": 0,
            "limitResponse": {"type": "Reject"},
        }}),
    )
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "Group", "group": {"name": n}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "User", "user": {"name": n}}))
        .collect()
}

fn kube_system_service_accounts(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| {
            json!({"kind": "ServiceAccount",
                "serviceAccount": {"name": n, "namespace": "kube-system"}})
        })
        .collect()
}

fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str], cluster: bool) -> Value {
    let mut rule = json!({"verbs": verbs, "apiGroups": groups, "resources": resources,
        "namespaces": ["*"]});
    if cluster {
        rule["clusterScope"] = json!(true);
    }
    rule
}

/// Every verb on every resource, cluster-wide and in every namespace.
fn all_resources() -> Value {
    resource_rule(&["*"], &["*"], &["*"], true)
}

fn non_resource_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn all_non_resources() -> Value {
    non_resource_rule(&["*"], &["*"])
}

/// kube's `newFlowSchema`: one rule; `distinguisher` empty for none.
fn flow_schema(
    name: &str,
    level: &str,
    precedence: i64,
    distinguisher: &str,
    subjects: Vec<Value>,
    resource_rules: Vec<Value>,
    non_resource_rules: Vec<Value>,
) -> Value {
    let mut rule = json!({"subjects": subjects});
    if !resource_rules.is_empty() {
        rule["resourceRules"] = Value::Array(resource_rules);
    }
    if !non_resource_rules.is_empty() {
        rule["nonResourceRules"] = Value::Array(non_resource_rules);
    }
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rule],
    });
    if !distinguisher.is_empty() {
        spec["distinguisherMethod"] = json!({"type": distinguisher});
    }
    object("FlowSchema", name, spec)
}

const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const NODES: &str = "system:nodes";
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const SCHEDULER: &str = "system:kube-scheduler";

/// `MandatoryPriorityLevelConfigurations`, in kube's order.
pub fn mandatory_priority_levels() -> Vec<Value> {
    vec![catch_all_level(), exempt_level()]
}

/// `MandatoryFlowSchemas`, in kube's order.
pub fn mandatory_flow_schemas() -> Vec<Value> {
    vec![
        flow_schema(
            "exempt",
            "exempt",
            1,
            "",
            groups(&["system:masters"]),
            vec![all_resources()],
            vec![all_non_resources()],
        ),
        flow_schema(
            "catch-all",
            "catch-all",
            10000,
            "ByUser",
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
            vec![all_resources()],
            vec![all_non_resources()],
        ),
    ]
}

/// `SuggestedPriorityLevelConfigurations`, in kube's order.
pub fn suggested_priority_levels() -> Vec<Value> {
    vec![
        queuing_level("system", 30, 33, 64, 6),
        queuing_level("node-high", 40, 25, 64, 6),
        queuing_level("leader-election", 10, 0, 16, 4),
        queuing_level("workload-high", 40, 50, 128, 6),
        queuing_level("workload-low", 100, 90, 128, 6),
        queuing_level("global-default", 20, 50, 128, 6),
    ]
}

/// `SuggestedFlowSchemas`, in kube's order.
pub fn suggested_flow_schemas() -> Vec<Value> {
    let get_create_update = ["get", "create", "update"];
    let mut leader_subjects = users(&[CONTROLLER_MANAGER, SCHEDULER]);
    leader_subjects.extend(kube_system_service_accounts(&["*"]));
    let mut endpoint_subjects = users(&[CONTROLLER_MANAGER]);
    endpoint_subjects.extend(kube_system_service_accounts(&[
        "endpoint-controller",
        "endpointslicemirroring-controller",
    ]));
    let everything = |name: &str, level: &str, precedence: i64, by: &str, subjects| {
        flow_schema(
            name,
            level,
            precedence,
            by,
            subjects,
            vec![all_resources()],
            vec![all_non_resources()],
        )
    };
    vec![
        everything("system-nodes", "system", 500, "ByUser", groups(&[NODES])),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            "ByUser",
            groups(&[NODES]),
            vec![
                resource_rule(&["*"], &[""], &["nodes", "nodes/status"], true),
                resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], false),
            ],
            vec![],
        ),
        flow_schema(
            "probes",
            "exempt",
            2,
            "",
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
            vec![],
            vec![non_resource_rule(
                &["get"],
                &["/healthz", "/readyz", "/livez"],
            )],
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            "ByUser",
            leader_subjects,
            vec![resource_rule(
                &get_create_update,
                &["coordination.k8s.io"],
                &["leases"],
                false,
            )],
            vec![],
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            "ByUser",
            kube_system_service_accounts(&["*"]),
            vec![
                resource_rule(
                    &get_create_update,
                    &[""],
                    &["endpoints", "configmaps"],
                    false,
                ),
                resource_rule(
                    &get_create_update,
                    &["coordination.k8s.io"],
                    &["leases"],
                    false,
                ),
            ],
            vec![],
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            "ByUser",
            endpoint_subjects,
            vec![resource_rule(
                &get_create_update,
                &[""],
                &["endpoints"],
                false,
            )],
            vec![],
        ),
        everything(
            "kube-controller-manager",
            "workload-high",
            800,
            "ByNamespace",
            users(&[CONTROLLER_MANAGER]),
        ),
        everything(
            "kube-scheduler",
            "workload-high",
            800,
            "ByNamespace",
            users(&[SCHEDULER]),
        ),
        everything(
            "kube-system-service-accounts",
            "workload-high",
            900,
            "ByNamespace",
            kube_system_service_accounts(&["*"]),
        ),
        everything(
            "service-accounts",
            "workload-low",
            9000,
            "ByUser",
            groups(&["system:serviceaccounts"]),
        ),
        everything(
            "global-default",
            "global-default",
            9900,
            "ByUser",
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
        ),
    ]
}

fn named(objects: Vec<Value>, name: &str) -> Option<Value> {
    objects
        .into_iter()
        .find(|o| str_at(o, "/metadata/name") == name)
}

/// The mandatory FlowSchema of that name (kube's `internalbootstrap.MandatoryFlowSchemas`).
pub(crate) fn mandatory_flow_schema(name: &str) -> Option<Value> {
    named(mandatory_flow_schemas(), name)
}

/// The mandatory priority level of that name.
pub(crate) fn mandatory_priority_level(name: &str) -> Option<Value> {
    named(mandatory_priority_levels(), name)
}

// ---------------------------------------------------------------------------------------------
// The ensurer
// ---------------------------------------------------------------------------------------------

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn auto_update_annotation(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTO_UPDATE_ANNOTATION))
        .and_then(Value::as_str)
}

/// kube's `shouldUpdateSpec`: the annotation when it parses, otherwise whether the spec was
/// never edited (generation 1). An object deleted and recreated by hand is at generation 1
/// again, which kube cannot tell apart either.
fn should_update_spec(object: &Value) -> bool {
    if let Some(value) = auto_update_annotation(object).and_then(parse_bool) {
        return value;
    }
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        == Some(1)
}

/// Which kind of bootstrap object is reconciled.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    FlowSchema,
    PriorityLevel,
}

/// kube's `SpecEqualish`: the bootstrap spec, defaulted, against the stored one; in the
/// `exempt` priority level the operator's `spec.exempt` values are taken as they are.
fn spec_equalish(kind: Kind, bootstrap: &Value, current: &Value) -> bool {
    let mut want = bootstrap.get("spec").cloned().unwrap_or(Value::Null);
    let have = current.get("spec").unwrap_or(&Value::Null);
    match kind {
        Kind::FlowSchema => default_flow_schema_spec(&mut want),
        Kind::PriorityLevel => {
            default_priority_level_spec(&mut want);
            if str_at(bootstrap, "/metadata/name") == "exempt" {
                let Some(exempt) = have.get("exempt").filter(|e| e.is_object()) else {
                    return false;
                };
                if let Some(want_exempt) = want.get_mut("exempt").and_then(Value::as_object_mut) {
                    for key in ["nominalConcurrencyShares", "lendablePercent"] {
                        match exempt.get(key) {
                            Some(v) => want_exempt.insert(key.into(), v.clone()),
                            None => want_exempt.remove(key),
                        };
                    }
                }
            }
        }
    }
    semantically_equal(&want, have)
}

/// kube's `ReviseIfNeeded`: the object to write, or `None` when `current` is up to date.
/// `mandatory` objects always get the bootstrap spec and `autoupdate-spec: "true"`.
fn revise(kind: Kind, mandatory: bool, current: &Value, bootstrap: &Value) -> Option<Value> {
    let auto_update = mandatory || should_update_spec(current);
    let annotation_current = auto_update_annotation(current).and_then(parse_bool);
    let update_annotation = annotation_current != Some(auto_update);
    let spec_changed = auto_update && !spec_equalish(kind, bootstrap, current);
    if !update_annotation && !spec_changed {
        return None;
    }
    let mut revised = current.clone();
    if spec_changed {
        revised["spec"] = bootstrap.get("spec").cloned().unwrap_or(Value::Null);
    }
    if update_annotation {
        if let Some(meta) = revised.get_mut("metadata").and_then(Value::as_object_mut) {
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            if !annotations.is_object() {
                *annotations = json!({});
            }
            annotations[AUTO_UPDATE_ANNOTATION] = json!(auto_update.to_string());
        }
    }
    Some(revised)
}

fn def(registry: &Registry, plural: &str) -> Result<Arc<ResourceDef>, String> {
    registry
        .find(GROUP, plural)
        .ok_or_else(|| format!("{plural}.{GROUP} is not served"))
}

/// kube's `EnsureConfiguration` for each of `objects`: create what is missing, revise what
/// is stale. Stops at the first error, as kube does.
async fn ensure(
    registry: &Registry,
    def: &ResourceDef,
    kind: Kind,
    mandatory: bool,
    objects: Vec<Value>,
) -> Result<(), String> {
    let (existing, _) = registry.list_internal(def).await.map_err(|e| e.message)?;
    let existing: BTreeMap<String, Value> = existing
        .into_iter()
        .map(|o| (str_at(&o, "/metadata/name").to_string(), o))
        .collect();
    let strategy = if mandatory { "mandatory" } else { "suggested" };
    for bootstrap in objects {
        let name = str_at(&bootstrap, "/metadata/name").to_string();
        let Some(current) = existing.get(&name) else {
            match registry
                .create_internal(def, bootstrap.clone(), manager::APF_CONFIG_PRODUCER)
                .await
            {
                Ok(_) => {
                    tracing::info!(kind = %def.kind, name = %name, strategy, "created APF bootstrap object")
                }
                // Created meanwhile (another replica): revised on the next start.
                Err(e) if e.code == 409 => {}
                Err(e) => {
                    return Err(format!(
                        "cannot create {} type={strategy} name={name:?}: {}",
                        def.kind, e.message
                    ))
                }
            }
            continue;
        };
        if revise(kind, mandatory, current, &bootstrap).is_none() {
            continue;
        }
        // Decide again against the object being replaced, so a concurrent edit is judged too.
        let result = registry
            .update_internal(def, "", &name, manager::APF_CONFIG_PRODUCER, |stored| {
                Ok(revise(kind, mandatory, stored, &bootstrap).unwrap_or_else(|| stored.clone()))
            })
            .await;
        match result {
            Ok(_) => {
                tracing::info!(kind = %def.kind, name = %name, strategy, "updated APF bootstrap object")
            }
            Err(e) if e.code == 409 => {}
            Err(e) => {
                return Err(format!(
                    "failed to update the {} type={strategy} name={name:?}: {}",
                    def.kind, e.message
                ))
            }
        }
    }
    Ok(())
}

/// kube's `RemoveUnwantedObjects`: deletes the objects annotated `autoupdate-spec: "true"`
/// whose names are not in `wanted` (bootstrap objects kube no longer ships). Objects without
/// the annotation are the operator's; a malformed or `false` value keeps the object too.
async fn remove_unwanted(
    registry: &Registry,
    def: &ResourceDef,
    wanted: &BTreeSet<String>,
) -> Result<(), String> {
    let (existing, _) = registry.list_internal(def).await.map_err(|e| e.message)?;
    for object in existing {
        let name = str_at(&object, "/metadata/name");
        if wanted.contains(name) {
            continue;
        }
        if auto_update_annotation(&object).and_then(parse_bool) != Some(true) {
            continue;
        }
        match registry.delete_internal(def, "", name).await {
            Ok(()) => tracing::info!(kind = %def.kind, name = %name, "deleted unwanted APF object"),
            Err(e) if e.code == 404 => {}
            Err(e) => {
                return Err(format!(
                    "failed to delete unwanted APF object {name:?}: {}",
                    e.message
                ))
            }
        }
    }
    Ok(())
}

fn names(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| str_at(o, "/metadata/name").to_string())
        .collect()
}

/// Reconciles the APF bootstrap configuration as kube-apiserver's
/// `priority-and-fairness-config-producer` post-start hook does, at start and then every
/// minute (the gateway's upkeep controller): suggested priority levels and flow schemas, then
/// the mandatory ones, then removal of dangling bootstrap objects.
pub async fn ensure_bootstrap_configuration(registry: &Registry) -> Result<(), String> {
    let levels = &*def(registry, "prioritylevelconfigurations")?;
    let schemas = &*def(registry, "flowschemas")?;
    let suggested_levels = suggested_priority_levels();
    let suggested_schemas = suggested_flow_schemas();
    let mandatory_levels = mandatory_priority_levels();
    let mandatory_schemas = mandatory_flow_schemas();
    let mut wanted_levels = names(&suggested_levels);
    wanted_levels.extend(names(&mandatory_levels));
    let mut wanted_schemas = names(&suggested_schemas);
    wanted_schemas.extend(names(&mandatory_schemas));

    ensure(
        registry,
        levels,
        Kind::PriorityLevel,
        false,
        suggested_levels,
    )
    .await
    .map_err(|e| format!("failed ensuring suggested settings - {e}"))?;
    ensure(
        registry,
        schemas,
        Kind::FlowSchema,
        false,
        suggested_schemas,
    )
    .await
    .map_err(|e| format!("failed ensuring suggested settings - {e}"))?;
    ensure(
        registry,
        levels,
        Kind::PriorityLevel,
        true,
        mandatory_levels,
    )
    .await
    .map_err(|e| format!("failed ensuring mandatory settings - {e}"))?;
    ensure(registry, schemas, Kind::FlowSchema, true, mandatory_schemas)
        .await
        .map_err(|e| format!("failed ensuring mandatory settings - {e}"))?;
    remove_unwanted(registry, levels, &wanted_levels)
        .await
        .map_err(|e| format!("failed to delete removed settings - {e}"))?;
    remove_unwanted(registry, schemas, &wanted_schemas)
        .await
        .map_err(|e| format!("failed to delete removed settings - {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::flowcontrol::{FlowSchemaStrategy, PriorityLevelStrategy};
    use crate::resource::Strategy;

    /// An object as the registry would store it on create.
    fn stored(strategy: &dyn Strategy, mut object: Value) -> Value {
        strategy.prepare_for_create(&mut object);
        object["metadata"]["generation"] = json!(1);
        object
    }

    #[test]
    fn bootstrap_objects_are_valid_and_annotated() {
        let all_levels = [mandatory_priority_levels(), suggested_priority_levels()].concat();
        assert_eq!(all_levels.len(), 8);
        for level in all_levels {
            assert_eq!(auto_update_annotation(&level), Some("true"));
            let object = stored(&PriorityLevelStrategy, level);
            assert!(PriorityLevelStrategy.check_decode(&object).is_ok());
            let causes = PriorityLevelStrategy.validate(&object);
            assert!(
                causes.is_empty(),
                "{}: {causes:?}",
                object["metadata"]["name"]
            );
        }
        let all_schemas = [mandatory_flow_schemas(), suggested_flow_schemas()].concat();
        assert_eq!(all_schemas.len(), 13);
        for schema in all_schemas {
            let object = stored(&FlowSchemaStrategy, schema);
            let causes = FlowSchemaStrategy.validate(&object);
            assert!(
                causes.is_empty(),
                "{}: {causes:?}",
                object["metadata"]["name"]
            );
        }
        let probes = named(suggested_flow_schemas(), "probes").unwrap_or(Value::Null);
        assert_eq!(probes["spec"]["matchingPrecedence"], 2);
        assert!(probes["spec"].get("distinguisherMethod").is_none());
        let system = named(suggested_priority_levels(), "system").unwrap_or(Value::Null);
        assert_eq!(system["spec"]["limited"]["lendablePercent"], 33);
    }

    #[test]
    fn stored_bootstrap_objects_need_no_revision() {
        for bootstrap in suggested_flow_schemas() {
            let current = stored(&FlowSchemaStrategy, bootstrap.clone());
            assert_eq!(revise(Kind::FlowSchema, false, &current, &bootstrap), None);
            assert_eq!(revise(Kind::FlowSchema, true, &current, &bootstrap), None);
        }
        for bootstrap in mandatory_priority_levels() {
            let current = stored(&PriorityLevelStrategy, bootstrap.clone());
            assert_eq!(
                revise(Kind::PriorityLevel, true, &current, &bootstrap),
                None
            );
        }
    }

    #[test]
    fn suggested_objects_follow_the_annotation_then_the_generation() {
        let bootstrap = named(suggested_priority_levels(), "workload-low").unwrap_or(Value::Null);
        let mut current = stored(&PriorityLevelStrategy, bootstrap.clone());
        current["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);
        current["metadata"]["generation"] = json!(2);

        // "true": the spec is restored.
        let revised = revise(Kind::PriorityLevel, false, &current, &bootstrap);
        assert_eq!(
            revised
                .as_ref()
                .map(|r| &r["spec"]["limited"]["nominalConcurrencyShares"]),
            Some(&json!(100))
        );
        // "false": left alone.
        current["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = json!("false");
        assert_eq!(
            revise(Kind::PriorityLevel, false, &current, &bootstrap),
            None
        );
        // Missing, spec edited (generation 2): left alone, but marked "false".
        if let Some(a) = current["metadata"]["annotations"].as_object_mut() {
            a.remove(AUTO_UPDATE_ANNOTATION);
        }
        let revised = revise(Kind::PriorityLevel, false, &current, &bootstrap);
        assert_eq!(
            revised.as_ref().and_then(auto_update_annotation),
            Some("false")
        );
        assert_eq!(
            revised.map(|r| r["spec"]["limited"]["nominalConcurrencyShares"].clone()),
            Some(json!(7))
        );
        // Missing at generation 1: taken over and marked "true".
        current["metadata"]["generation"] = json!(1);
        let revised = revise(Kind::PriorityLevel, false, &current, &bootstrap);
        assert_eq!(
            revised.as_ref().and_then(auto_update_annotation),
            Some("true")
        );
        // Malformed values are treated like a missing annotation; "T" parses as Go does.
        current["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = json!("T");
        let revised = revise(Kind::PriorityLevel, false, &current, &bootstrap);
        assert!(revised.is_some_and(|r| auto_update_annotation(&r) == Some("T")));
    }

    #[test]
    fn mandatory_objects_are_forced_back() {
        let bootstrap = named(mandatory_flow_schemas(), "catch-all").unwrap_or(Value::Null);
        let mut current = stored(&FlowSchemaStrategy, bootstrap.clone());
        current["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = json!("false");
        let revised = revise(Kind::FlowSchema, true, &current, &bootstrap);
        assert_eq!(
            revised.as_ref().and_then(auto_update_annotation),
            Some("true")
        );

        // The exempt level's spec.exempt is the operator's.
        let exempt = named(mandatory_priority_levels(), "exempt").unwrap_or(Value::Null);
        let mut tuned = stored(&PriorityLevelStrategy, exempt.clone());
        tuned["spec"]["exempt"]["nominalConcurrencyShares"] = json!(10);
        assert_eq!(revise(Kind::PriorityLevel, true, &tuned, &exempt), None);
        tuned["spec"]["exempt"] = Value::Null;
        assert!(revise(Kind::PriorityLevel, true, &tuned, &exempt).is_some());
    }

    #[test]
    fn go_parse_bool() {
        assert_eq!(parse_bool("True"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }
}

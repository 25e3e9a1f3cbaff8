//! Field manager behaviour on real kinds' schemas, checked against what kube-apiserver writes.

use serde_json::{json, Value};

use super::*;
use crate::openapi::schema_for_definition;

fn model(definition: &str) -> TypeModel {
    let (root, defs) = schema_for_definition(definition).expect("known definition");
    TypeModel::build(&root, &defs)
}

const NOW: &str = "2026-11-22T10:00:00Z";
const LATER: &str = "2026-11-22T10:05:00Z";

struct Kind {
    model: TypeModel,
    reset: FieldSet,
    api_version: &'static str,
    kind: &'static str,
}

impl Kind {
    fn configmap() -> Kind {
        Kind {
            model: model("io.k8s.api.core.v1.ConfigMap"),
            reset: FieldSet::new(),
            api_version: "v1",
            kind: "ConfigMap",
        }
    }

    fn service() -> Kind {
        let mut reset = FieldSet::new();
        reset.insert(&[PathElement::Field("status".into())]);
        Kind {
            model: model("io.k8s.api.core.v1.Service"),
            reset,
            api_version: "v1",
            kind: "Service",
        }
    }

    fn manager(&self) -> FieldManager<'_> {
        FieldManager {
            model: &self.model,
            api_version: self.api_version,
            kind: self.kind,
            subresource: "",
            reset: &self.reset,
            custom: false,
        }
    }

    /// A create by `manager`, stored as the registry would (with a uid).
    fn create(&self, mut object: Value, manager: &str) -> Value {
        let fm = self.manager();
        fm.update(&fm.empty_object(), &mut object, manager, NOW);
        object["metadata"]["uid"] = json!("u-1");
        object
    }

    fn apply(
        &self,
        live: Option<&Value>,
        config: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApplyError> {
        self.manager().apply(live, &config, manager, force, LATER)
    }
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "default"}, "data": data})
}

fn entry<'a>(object: &'a Value, manager: &str) -> &'a Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no entry for {manager} in {object}"))
}

fn conflict_message(result: Result<Value, ApplyError>) -> String {
    match result {
        Err(ApplyError::Conflicts(c)) => c.message(),
        other => panic!("expected conflicts, got {other:?}"),
    }
}

#[test]
fn a_create_records_what_it_set_as_kube_does() {
    let k = Kind::configmap();
    let mut object = cm(json!({"a": "1"}));
    object["metadata"]["labels"] = json!({"app": "web"});
    let created = k.create(object, "kubectl-create");
    assert_eq!(
        entry(&created, "kubectl-create"),
        &json!({"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": NOW,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}})
    );
}

#[test]
fn an_apply_owns_exactly_its_configuration() {
    let k = Kind::configmap();
    let created = k
        .apply(None, cm(json!({"a": "1"})), "kubectl", false)
        .unwrap();
    assert_eq!(created["data"], json!({"a": "1"}));
    assert_eq!(
        entry(&created, "kubectl"),
        &json!({"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": LATER,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}})
    );
}

#[test]
fn applying_another_managers_value_conflicts_unless_forced() {
    let k = Kind::configmap();
    let live = k.create(cm(json!({"a": "1", "b": "1"})), "kubectl-create");
    assert_eq!(
        conflict_message(k.apply(Some(&live), cm(json!({"a": "2"})), "ctrl", false)),
        r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a"#
    );
    assert_eq!(
        conflict_message(k.apply(Some(&live), cm(json!({"a": "2", "b": "2"})), "ctrl", false)),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-create\" using v1:\n- .data.a\n- .data.b"
    );
    // The same value is shared, not a conflict.
    let shared = k
        .apply(Some(&live), cm(json!({"a": "1"})), "ctrl", false)
        .unwrap();
    let create_fields = &entry(&shared, "kubectl-create")["fieldsV1"];
    assert!(create_fields["f:data"].get("f:a").is_some(), "{shared}");
    assert_eq!(
        entry(&shared, "ctrl")["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    // Forced, the field changes hands.
    let forced = k
        .apply(Some(&live), cm(json!({"a": "2"})), "ctrl", true)
        .unwrap();
    assert_eq!(forced["data"], json!({"a": "2", "b": "1"}));
    assert_eq!(
        entry(&forced, "kubectl-create")["fieldsV1"],
        json!({"f:data": {".": {}, "f:b": {}}})
    );
}

#[test]
fn fields_an_apply_stops_setting_go_unless_someone_else_owns_them() {
    let k = Kind::configmap();
    let first = k
        .apply(
            None,
            cm(json!({"a": "1", "b": "1", "c": "1"})),
            "kubectl",
            false,
        )
        .unwrap();
    // Another writer takes `c` by updating it.
    let mut updated = first.clone();
    updated["data"]["c"] = json!("2");
    k.manager().update(&first, &mut updated, "editor", LATER);
    assert_eq!(
        entry(&updated, "editor")["fieldsV1"],
        json!({"f:data": {"f:c": {}}})
    );
    assert_eq!(
        entry(&updated, "kubectl")["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    let second = k
        .apply(Some(&updated), cm(json!({"a": "1"})), "kubectl", false)
        .unwrap();
    assert_eq!(second["data"], json!({"a": "1", "c": "2"}));
    // Applying `data: null` leaves no data: the null is kept, as structured-merge-diff keeps
    // it, for decoding to drop (an `omitempty` map).
    let third = k
        .apply(Some(&first), cm(Value::Null), "kubectl", false)
        .unwrap();
    assert!(third.get("data").is_none_or(Value::is_null), "{third}");
}

#[test]
fn list_map_items_match_by_key_with_defaulted_key_fields() {
    let k = Kind::service();
    let live = k.create(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 53, "protocol": "UDP"}]}}),
        "kubectl-create",
    );
    let fields = &entry(&live, "kubectl-create")["fieldsV1"]["f:spec"]["f:ports"];
    assert!(
        fields.get(r#"k:{"port":80,"protocol":"TCP"}"#).is_some(),
        "{fields}"
    );
    let config = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                        "spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
    assert_eq!(
        conflict_message(k.apply(Some(&live), config.clone(), "ctrl", false)),
        r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .spec.ports[port=80,protocol="TCP"].targetPort"#
    );
    let applied = k.apply(Some(&live), config, "ctrl", true).unwrap();
    assert_eq!(
        applied["spec"]["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 9090}, {"port": 53, "protocol": "UDP"}])
    );
}

#[test]
fn status_is_not_owned_through_the_object() {
    let k = Kind::service();
    let live = k.create(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"type": "ClusterIP"}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
        "kubectl-create",
    );
    let fields = &entry(&live, "kubectl-create")["fieldsV1"];
    assert!(fields.get("f:status").is_none(), "{fields}");
    assert!(fields["f:spec"].get("f:type").is_some(), "{fields}");
}

#[test]
fn objects_without_managed_fields_get_a_placeholder_owner_on_first_apply() {
    let k = Kind::configmap();
    let mut legacy = cm(json!({"a": "1"}));
    legacy["metadata"]["uid"] = json!("u-1");
    // Updates of an untracked object stay untracked.
    let mut updated = legacy.clone();
    updated["data"]["a"] = json!("2");
    k.manager()
        .update(&legacy, &mut updated, "kubectl-edit", NOW);
    assert!(
        updated["metadata"].get("managedFields").is_none(),
        "{updated}"
    );
    assert_eq!(
        conflict_message(k.apply(Some(&legacy), cm(json!({"a": "3"})), "ctrl", false)),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a"#
    );
}

#[test]
fn server_side_apply_takes_over_from_client_side_apply_without_conflicts() {
    let k = Kind::configmap();
    let config = cm(json!({"a": "1"}));
    let mut csa = config.clone();
    csa["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: format!("{}\n", config)});
    let live = k.create(csa, "kubectl-client-side-apply");
    let applied = k
        .apply(Some(&live), config.clone(), "kubectl", false)
        .unwrap();
    assert_eq!(applied["data"], json!({"a": "1"}));
    assert_eq!(entry(&applied, "kubectl")["operation"], "Apply");
    // A changed value is still allowed (kubectl applied the old one) and the annotation
    // follows the new configuration.
    let changed = k
        .apply(Some(&live), cm(json!({"a": "2"})), "kubectl", false)
        .unwrap();
    let annotation = changed["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(annotation).unwrap()["data"],
        json!({"a": "2"})
    );
    // Another manager gets no such pass.
    assert!(matches!(
        k.apply(Some(&live), cm(json!({"a": "2"})), "other", false),
        Err(ApplyError::Conflicts(_))
    ));
}

#[test]
fn requests_may_reset_managed_fields_and_may_not_apply_them() {
    let k = Kind::configmap();
    let live = k.create(cm(json!({"a": "1"})), "kubectl-create");
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([]);
    k.manager().update(&live, &mut reset, "kubectl-edit", LATER);
    assert!(reset["metadata"].get("managedFields").is_none(), "{reset}");
    let mut config = cm(json!({"a": "1"}));
    config["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        k.apply(Some(&live), config, "x", false),
        Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".into()
        ))
    );
}

#[test]
fn many_update_managers_fold_into_ancient_changes() {
    let k = Kind::configmap();
    let mut object = k.create(cm(json!({"k0": "v"})), "m0");
    for i in 1..12 {
        let mut next = object.clone();
        next["data"][format!("k{i}")] = json!("v");
        k.manager().update(
            &object,
            &mut next,
            &format!("m{i}"),
            &format!("2026-11-22T10:00:{i:02}Z"),
        );
        object = next;
    }
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers.len(), 10, "{managers:?}");
    assert_eq!(managers[0], "ancient-changes");
    assert!(
        !managers.contains(&"m0") && !managers.contains(&"m2") && managers.contains(&"m3"),
        "{managers:?}"
    );
    let ancient = &entry(&object, "ancient-changes")["fieldsV1"]["f:data"];
    assert!(
        ancient.get("f:k0").is_some() && ancient.get("f:k2").is_some(),
        "{ancient}"
    );
}

#[test]
fn merge_keeps_live_order_and_adds_applied_items_in_order() {
    let m = model("io.k8s.api.core.v1.Service");
    let live = json!({"spec": {"ports": [{"port": 1}, {"port": 2}, {"port": 3}]}});
    let config = json!({"spec": {"ports": [{"port": 4}, {"port": 2, "name": "b"}]}});
    let merged = merge(&m, &live, &config);
    let ports: Vec<i64> = merged["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["port"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, vec![1, 4, 2, 3]);
    assert_eq!(merged["spec"]["ports"][2]["name"], "b");
    let cmp = compare(&m, &live, &merged);
    assert_eq!(cmp.added.paths().len(), 3, "{:?}", cmp.added.paths());
    assert!(cmp.removed.is_empty() && cmp.modified.is_empty());
}

#[test]
fn a_list_config_reorders_is_merged_as_structured_merge_diff_orders_it() {
    let m = model("io.k8s.api.core.v1.Service");
    let port = |p: i64| json!({"port": p});
    let live = json!({"spec": {"ports": [port(1), port(9), port(2)]}});
    let config = json!({"spec": {"ports": [port(2), port(1)]}});
    let merged = merge(&m, &live, &config);
    assert_eq!(merged["spec"]["ports"], json!([port(9), port(2), port(1)]));
}

#[test]
fn a_map_replaced_by_a_scalar_takes_its_fields_away_from_their_owners() {
    let k = Kind::configmap();
    let cmp = compare(
        &k.model,
        &json!({"metadata": {"labels": {"a": "1"}}}),
        &json!({"metadata": {"labels": "x"}}),
    );
    let label_a = vec![
        PathElement::Field("metadata".into()),
        PathElement::Field("labels".into()),
        PathElement::Field("a".into()),
    ];
    assert!(cmp.removed.has(&label_a), "{:?}", cmp.removed.paths());
    assert!(
        cmp.modified.has(&label_a[..2]),
        "{:?}",
        cmp.modified.paths()
    );
}

#[test]
fn a_write_that_changes_nothing_of_its_own_keeps_its_managers_timestamp() {
    let k = Kind::configmap();
    let live = k.create(cm(json!({"a": "1", "b": "1"})), "editor");
    // The same manager only removes a field: its set shrinks, its time stays.
    let mut next = live.clone();
    next["data"] = json!({"a": "1"});
    k.manager().update(&live, &mut next, "editor", LATER);
    assert_eq!(entry(&next, "editor")["time"], NOW);
    assert_eq!(
        entry(&next, "editor")["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
}

#[test]
fn atomic_extensions_next_to_references_and_opaque_objects_are_owned_whole() {
    let defs = json!({
        "Sel": {"type": "object", "properties": {"a": {"type": "string"}}},
        "Raw": {"type": "object"},
        "Top": {"type": "object", "properties": {
            "selector": {"allOf": [{"$ref": "#/components/schemas/Sel"}], "x-kubernetes-map-type": "atomic"},
            "plain": {"$ref": "#/components/schemas/Sel"},
            "raw": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.runtime.RawExtension"},
            "opaque": {"type": "object", "x-kubernetes-map-type": "atomic"}}}
    });
    let m = TypeModel::build(
        &json!({"$ref": "#/components/schemas/Top"}),
        defs.as_object().unwrap(),
    );
    let set = to_field_set(
        &m,
        &json!({"selector": {"a": "x"}, "plain": {"a": "x"}, "raw": {"k": 1}, "opaque": {"k": 1}}),
    );
    assert_eq!(
        set.to_fields_v1(),
        json!({"f:opaque": {}, "f:plain": {"f:a": {}}, "f:raw": {}, "f:selector": {}})
    );
}

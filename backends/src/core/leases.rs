//! Leases (`/apis/coordination.k8s.io/v1/namespaces/{ns}/leases`): the leader-election
//! and heartbeat objects. kube's `ValidateLeaseSpec`: positive durations, non-negative
//! transitions, a known (or domain-qualified) coordinated strategy, and `preferredHolder`
//! only together with a strategy. As in kube 1.33, whose `CoordinatedLeaderElection` gate is
//! off by default, a write cannot set `strategy` or `preferredHolder`: the strategy drops
//! them unless the stored lease already has them.

use std::sync::Arc;

use serde_json::{json, Value};

use super::causes::{go_value, invalid_each, invalid_raw};
use super::{age, base_def, child_object, str_at, Names};
use crate::machinery::validation::is_qualified_name;
use crate::resource::{age_column, name_column, ResourceDef, Strategy, TableColumn};
use crate::status::{field_forbidden, field_not_supported, StatusCause};

/// Coordinated leader election strategies kube defines (others must be domain-qualified).
const STRATEGIES: &[&str] = &["OldestEmulationVersion"];

/// The Lease resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "coordination.k8s.io",
            version: "v1",
            plural: "leases",
            singular: "lease",
            kind: "Lease",
            namespaced: true,
            definition: "io.k8s.api.coordination.v1.Lease",
        },
        Arc::new(LeaseStrategy),
    );
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Holder".into(),
            type_: "string".into(),
            format: "".into(),
            description: "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.".into(),
            priority: 0,
        },
        age_column(),
    ];
    def
}

/// kube's lease strategy.
pub struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    /// kube's `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    /// kube's `leaseStrategy.AllowUnconditionalUpdate`: a lease's update must name the
    /// resourceVersion it read (leader election relies on it).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn prepare_for_create(&self, object: &mut Value) {
        // A non-pointer struct in Go: a lease always shows `spec`, even empty.
        if let Some(spec) = child_object(object, "spec") {
            spec.remove("strategy");
            spec.remove("preferredHolder");
        }
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        let kept = |field: &str| {
            old.pointer(&format!("/spec/{field}"))
                .is_some_and(|v| !v.is_null())
        };
        let (keep_strategy, keep_preferred) = (kept("strategy"), kept("preferredHolder"));
        if let Some(spec) = child_object(object, "spec") {
            if !keep_strategy {
                spec.remove("strategy");
            }
            if !keep_preferred {
                spec.remove("preferredHolder");
            }
        }
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        let mut causes = Vec::new();
        if let Some(d) = spec.get("leaseDurationSeconds").filter(|v| !v.is_null()) {
            if d.as_i64().is_none_or(|n| n <= 0) {
                causes.push(invalid_raw(
                    "spec.leaseDurationSeconds",
                    &go_value(Some(d)),
                    "must be greater than 0",
                ));
            }
        }
        if let Some(t) = spec.get("leaseTransitions").filter(|v| !v.is_null()) {
            if t.as_i64().is_none_or(|n| n < 0) {
                causes.push(invalid_raw(
                    "spec.leaseTransitions",
                    &go_value(Some(t)),
                    "must be greater than or equal to 0",
                ));
            }
        }
        let strategy = spec.get("strategy").and_then(Value::as_str);
        if let Some(strategy) = strategy {
            // kube nests the field name once more here.
            let field = "spec.strategy.strategy";
            if !strategy.contains('/') {
                if !STRATEGIES.contains(&strategy) {
                    causes.push(field_not_supported(field, strategy, STRATEGIES));
                }
            } else {
                causes.extend(invalid_each(field, strategy, is_qualified_name(strategy)));
            }
        }
        let preferred = str_at(object, "/spec/preferredHolder");
        if !preferred.is_empty() && strategy.unwrap_or("").is_empty() {
            causes.push(field_forbidden(
                "spec.preferredHolder",
                "may only be specified if `strategy` is defined",
            ));
        }
        causes
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![
            json!(str_at(object, "/spec/holderIdentity")),
            json!(age(object)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_rules() {
        let lease = json!({"spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40, "leaseTransitions": 0}});
        assert!(LeaseStrategy.validate(&lease).is_empty());
        let lease = json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1, "preferredHolder": "x"}});
        let causes: Vec<String> = LeaseStrategy
            .validate(&lease)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            causes,
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
            ]
        );
        let lease = json!({"spec": {"strategy": "Newest"}});
        assert_eq!(
            LeaseStrategy.validate(&lease)[0].reason,
            "FieldValueNotSupported"
        );
        let lease = json!({"spec": {"strategy": "example.com/custom"}});
        assert!(LeaseStrategy.validate(&lease).is_empty());
    }

    #[test]
    fn coordinated_leader_election_fields_are_dropped_as_with_the_gate_off() {
        let mut lease =
            json!({"spec": {"strategy": "Foo", "preferredHolder": "x", "holderIdentity": "h"}});
        LeaseStrategy.prepare_for_create(&mut lease);
        assert_eq!(lease["spec"], json!({"holderIdentity": "h"}));
        assert!(LeaseStrategy.validate(&lease).is_empty());
        // An update keeps what the stored lease already had, and adds nothing.
        let old = json!({"spec": {"strategy": "OldestEmulationVersion"}});
        let mut new =
            json!({"spec": {"strategy": "OldestEmulationVersion", "preferredHolder": "y"}});
        LeaseStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"], json!({"strategy": "OldestEmulationVersion"}));
    }

    #[test]
    fn holder_cell_and_empty_spec() {
        let mut lease = json!({"metadata": {"name": "l"}});
        LeaseStrategy.prepare_for_create(&mut lease);
        assert_eq!(lease["spec"], json!({}));
        assert_eq!(LeaseStrategy.table_cells(&lease)[0], "");
        let lease = json!({"spec": {"holderIdentity": "kube-scheduler-1"}});
        assert_eq!(LeaseStrategy.table_cells(&lease)[0], "kube-scheduler-1");
        assert_eq!(def().storage_prefix, "/coordination.k8s.io/leases");
    }
}

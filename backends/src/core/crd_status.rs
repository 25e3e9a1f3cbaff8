//! The status apiextensions-apiserver's controllers maintain on a CustomResourceDefinition,
//! as pure functions a kubegate controller can call:
//!
//! - [`calculate_names_and_conditions`] / [`sync_names`]: kube's naming controller
//!   (`pkg/controller/status/naming_controller.go`): `status.acceptedNames` and the
//!   `NamesAccepted` condition (a name already accepted by another CRD of the same group is a
//!   conflict: `PluralConflict`, `SingularConflict`, `ShortNamesConflict`, `KindConflict`,
//!   `ListKindConflict`, with `"<name>" is already in use`), and `Established` moved to
//!   `Installing` once the initial names are accepted;
//! - [`establish`]: kube's establishing controller: `Established` `True`
//!   (`InitialNamesAccepted`) once names are accepted;
//! - [`terminating_condition`]: the `Terminating` condition states of deletion;
//! - [`ensure_stored_version`]: the storage version recorded in `status.storedVersions`.
//!
//! Conditions are set with kube's `SetCRDCondition` semantics ([`set_condition`]).

use serde_json::{json, Map, Value};

use super::{items, str_at};

/// One `status.conditions[]` entry, without its transition time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The CRD's condition of a type, if any.
pub fn find_condition(crd: &Value, type_: &str) -> Option<Condition> {
    items(crd.pointer("/status/conditions"))
        .iter()
        .find(|c| str_at(c, "/type") == type_)
        .map(|c| {
            Condition::new(
                type_,
                str_at(c, "/status"),
                str_at(c, "/reason"),
                str_at(c, "/message"),
            )
        })
}

/// Whether the CRD has a condition of this type with status `True`.
pub fn is_condition_true(crd: &Value, type_: &str) -> bool {
    find_condition(crd, type_).is_some_and(|c| c.status == "True")
}

/// kube's `SetCRDCondition`: adds the condition, or updates status, reason and message of the
/// existing one, moving `lastTransitionTime` to `now` only when the status changes (or was
/// unset). Returns whether anything changed. The namespace controller's conditions follow the
/// same rule (`updateConditions`), so it uses this too.
pub fn set_condition(crd: &mut Value, condition: &Condition, now: &str) -> bool {
    let Some(status) = status_map(crd) else {
        return false;
    };
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let Some(conditions) = conditions.as_array_mut() else {
        return false;
    };
    let existing = conditions
        .iter_mut()
        .filter_map(Value::as_object_mut)
        .find(|c| c.get("type").and_then(Value::as_str) == Some(condition.type_.as_str()));
    let Some(existing) = existing else {
        conditions.push(condition_json(condition, now));
        return true;
    };
    let text = |m: &Map<String, Value>, k: &str| {
        m.get(k).and_then(Value::as_str).unwrap_or("").to_string()
    };
    let before = Value::Object(existing.clone());
    if text(existing, "status") != condition.status
        || text(existing, "lastTransitionTime").is_empty()
    {
        existing.insert("lastTransitionTime".into(), json!(now));
    }
    existing.insert("status".into(), json!(condition.status));
    for (k, v) in [
        ("reason", &condition.reason),
        ("message", &condition.message),
    ] {
        if v.is_empty() {
            existing.remove(k);
        } else {
            existing.insert(k.into(), json!(v));
        }
    }
    before != Value::Object(existing.clone())
}

fn condition_json(condition: &Condition, now: &str) -> Value {
    let mut c = Map::new();
    c.insert("type".into(), json!(condition.type_));
    c.insert("status".into(), json!(condition.status));
    c.insert("lastTransitionTime".into(), json!(now));
    if !condition.reason.is_empty() {
        c.insert("reason".into(), json!(condition.reason));
    }
    if !condition.message.is_empty() {
        c.insert("message".into(), json!(condition.message));
    }
    Value::Object(c)
}

fn status_map(crd: &mut Value) -> Option<&mut Map<String, Value>> {
    super::child_object(crd, "status")
}

/// The names a CRD asks for or has accepted (`spec.names` or `status.acceptedNames`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub kind: String,
    pub list_kind: String,
    pub categories: Vec<String>,
}

impl Names {
    pub fn from_json(value: Option<&Value>) -> Names {
        let v = value.unwrap_or(&Value::Null);
        let list = |k: &str| -> Vec<String> {
            items(v.get(k))
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        Names {
            plural: str_at(v, "/plural").into(),
            singular: str_at(v, "/singular").into(),
            short_names: list("shortNames"),
            kind: str_at(v, "/kind").into(),
            list_kind: str_at(v, "/listKind").into(),
            categories: list("categories"),
        }
    }

    /// The v1 JSON form (`plural` and `kind` always present, the rest `omitempty`).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("plural".into(), json!(self.plural));
        if !self.singular.is_empty() {
            m.insert("singular".into(), json!(self.singular));
        }
        if !self.short_names.is_empty() {
            m.insert("shortNames".into(), json!(self.short_names));
        }
        m.insert("kind".into(), json!(self.kind));
        if !self.list_kind.is_empty() {
            m.insert("listKind".into(), json!(self.list_kind));
        }
        if !self.categories.is_empty() {
            m.insert("categories".into(), json!(self.categories));
        }
        Value::Object(m)
    }
}

/// kube's `equalToAcceptedOrFresh`.
fn equal_to_accepted_or_fresh(
    requested: &str,
    accepted: &str,
    used: &[String],
) -> Result<(), String> {
    if requested == accepted || !used.iter().any(|u| u == requested) {
        Ok(())
    } else {
        Err(format!("\"{requested}\" is already in use"))
    }
}

/// kube's `calculateNamesAndConditions`: the names `crd` may have accepted, its
/// `NamesAccepted` condition and its `Established` condition, given every CRD (`all` may
/// include `crd` itself, as kube's lister does). Names count as used when another CRD of the
/// same group has accepted them.
pub fn calculate_names_and_conditions(crd: &Value, all: &[Value]) -> (Names, Condition, Condition) {
    let group = str_at(crd, "/spec/group");
    let mut resources: Vec<String> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for other in all.iter().filter(|o| str_at(o, "/spec/group") == group) {
        let accepted = Names::from_json(other.pointer("/status/acceptedNames"));
        resources.push(accepted.plural);
        resources.push(accepted.singular);
        resources.extend(accepted.short_names);
        kinds.push(accepted.kind);
        kinds.push(accepted.list_kind);
    }
    let requested = Names::from_json(crd.pointer("/spec/names"));
    let accepted = Names::from_json(crd.pointer("/status/acceptedNames"));
    let mut names = accepted.clone();
    let mut condition = Condition::new("NamesAccepted", "Unknown", "", "");
    let mut conflict = |reason: &str, message: String| {
        condition.status = "False".into();
        condition.reason = reason.into();
        condition.message = message;
    };

    match equal_to_accepted_or_fresh(&requested.plural, &accepted.plural, &resources) {
        Ok(()) => names.plural = requested.plural.clone(),
        Err(e) => conflict("PluralConflict", e),
    }
    match equal_to_accepted_or_fresh(&requested.singular, &accepted.singular, &resources) {
        Ok(()) => names.singular = requested.singular.clone(),
        Err(e) => conflict("SingularConflict", e),
    }
    if requested.short_names != accepted.short_names {
        let errors: Vec<String> = requested
            .short_names
            .iter()
            .filter(|s| !accepted.short_names.contains(s))
            .filter_map(|s| equal_to_accepted_or_fresh(s, "", &resources).err())
            .collect();
        if errors.is_empty() {
            names.short_names = requested.short_names.clone();
        } else {
            // utilerrors.NewAggregate: one message bare, several as `[a, b]`.
            let message = if errors.len() == 1 {
                errors[0].clone()
            } else {
                format!("[{}]", errors.join(", "))
            };
            conflict("ShortNamesConflict", message);
        }
    }
    match equal_to_accepted_or_fresh(&requested.kind, &accepted.kind, &kinds) {
        Ok(()) => names.kind = requested.kind.clone(),
        Err(e) => conflict("KindConflict", e),
    }
    match equal_to_accepted_or_fresh(&requested.list_kind, &accepted.list_kind, &kinds) {
        Ok(()) => names.list_kind = requested.list_kind.clone(),
        Err(e) => conflict("ListKindConflict", e),
    }
    names.categories = requested.categories.clone();
    if condition.status == "Unknown" {
        condition = Condition::new("NamesAccepted", "True", "NoConflicts", "no conflicts found");
    }

    let mut established = find_condition(crd, "Established").unwrap_or_else(|| {
        Condition::new(
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
        )
    });
    if established.status != "True" && condition.status == "True" {
        established = Condition::new(
            "Established",
            "False",
            "Installing",
            "the initial names have been accepted",
        );
    }
    (names, condition, established)
}

/// kube's naming controller step for one CRD: nothing when `spec.names` already equals
/// `status.acceptedNames`; otherwise the accepted names and the `NamesAccepted` and
/// `Established` conditions are written into `crd`. Returns whether it changed (and needs a
/// status update).
pub fn sync_names(crd: &mut Value, all: &[Value], now: &str) -> bool {
    let requested = Names::from_json(crd.pointer("/spec/names"));
    let accepted = Names::from_json(crd.pointer("/status/acceptedNames"));
    if requested == accepted {
        return false;
    }
    let (names, names_accepted, established) = calculate_names_and_conditions(crd, all);
    let unchanged_condition =
        find_condition(crd, "NamesAccepted").as_ref() == Some(&names_accepted);
    if names == accepted && unchanged_condition {
        return false;
    }
    if let Some(status) = status_map(crd) {
        status.insert("acceptedNames".into(), names.to_json());
    }
    set_condition(crd, &names_accepted, now);
    set_condition(crd, &established, now);
    true
}

/// kube's API approval controller: a CRD in a protected group (`*.k8s.io`,
/// `*.kubernetes.io`) carries `KubernetesAPIApprovalPolicyConformant` from its
/// `api-approved.kubernetes.io` annotation. Returns whether it changed.
pub fn sync_api_approval(crd: &mut Value, now: &str) -> bool {
    let Some((status, reason, message)) = super::crd_validation::api_approval_condition(crd) else {
        return false;
    };
    let condition = Condition::new(
        "KubernetesAPIApprovalPolicyConformant",
        status,
        reason,
        &message,
    );
    if find_condition(crd, &condition.type_).as_ref() == Some(&condition) {
        return false;
    }
    set_condition(crd, &condition, now)
}

/// kube's establishing controller: once `NamesAccepted` is `True` and the CRD is not yet
/// `Established`, it becomes `Established` (`InitialNamesAccepted`). Returns whether it
/// changed.
pub fn establish(crd: &mut Value, now: &str) -> bool {
    if !is_condition_true(crd, "NamesAccepted") || is_condition_true(crd, "Established") {
        return false;
    }
    set_condition(
        crd,
        &Condition::new(
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
        now,
    )
}

/// The stages of deleting a CRD, as kube reports them in its `Terminating` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// The delete was requested; the cleanup finalizer has not started.
    Pending,
    /// Instances are being deleted.
    InProgress,
    /// Deleting instances failed (`detail` says why).
    Failed,
    /// Listing the instances failed (`detail` says why).
    ListFailed,
    /// Every instance is gone.
    Completed,
}

/// The `Terminating` condition for a stage of deletion (kube's CRD registry and finalizer
/// controller wording); `detail` completes the `Failed` message.
pub fn terminating_condition(stage: Termination, detail: &str) -> Condition {
    match stage {
        Termination::Pending => Condition::new(
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        ),
        Termination::InProgress => Condition::new(
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ),
        Termination::Failed => Condition::new(
            "Terminating",
            "True",
            "InstanceDeletionFailed",
            &format!("could not issue all deletes: {detail}"),
        ),
        Termination::ListFailed => Condition::new(
            "Terminating",
            "True",
            "InstanceDeletionFailed",
            &format!("could not list instances: {detail}"),
        ),
        Termination::Completed => Condition::new(
            "Terminating",
            "False",
            "InstanceDeletionCompleted",
            "removed all instances",
        ),
    }
}

/// kube's strategy rule for `status.storedVersions`: the storage version is appended when it
/// is not recorded yet. Returns whether it was added.
pub fn ensure_stored_version(crd: &mut Value) -> bool {
    let storage = items(crd.pointer("/spec/versions"))
        .iter()
        .find(|v| v.get("storage") == Some(&Value::Bool(true)))
        .map(|v| str_at(v, "/name").to_string());
    let Some(storage) = storage else {
        return false;
    };
    let Some(status) = status_map(crd) else {
        return false;
    };
    let stored = status
        .entry("storedVersions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !stored.is_array() {
        *stored = Value::Array(Vec::new());
    }
    let Some(stored) = stored.as_array_mut() else {
        return false;
    };
    if stored.iter().any(|v| v.as_str() == Some(storage.as_str())) {
        return false;
    }
    stored.push(json!(storage));
    true
}

/// The storage version of a CRD (`spec.versions[*].storage`).
pub fn storage_version(crd: &Value) -> Option<&str> {
    items(crd.pointer("/spec/versions"))
        .iter()
        .find(|v| v.get("storage") == Some(&Value::Bool(true)))
        .map(|v| str_at(v, "/name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, group: &str, plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "names": {
                "plural": plural, "singular": name, "kind": kind, "listKind": format!("{kind}List"),
                "shortNames": short}},
            "status": {"acceptedNames": {"plural": "", "kind": ""}},
        })
    }

    fn accepted(mut c: Value) -> Value {
        c["status"]["acceptedNames"] = c["spec"]["names"].clone();
        c
    }

    #[test]
    fn crd_names_conflicts_follow_the_naming_controller() {
        let existing = accepted(crd(
            "crontab",
            "stable.example.com",
            "crontabs",
            "CronTab",
            &["ct"],
        ));
        let elsewhere = accepted(crd(
            "widget",
            "other.example.com",
            "widgets",
            "Widget",
            &["w"],
        ));
        let all = vec![existing.clone(), elsewhere.clone()];
        let cases: Vec<(Value, &str, &str, &str)> = vec![
            (
                crd("widget", "stable.example.com", "widgets", "Widget", &["w"]),
                "True",
                "NoConflicts",
                "no conflicts found",
            ),
            (
                crd("x", "stable.example.com", "crontabs", "X", &[]),
                "False",
                "PluralConflict",
                "\"crontabs\" is already in use",
            ),
            (
                crd("crontab", "stable.example.com", "xs", "X", &[]),
                "False",
                "SingularConflict",
                "\"crontab\" is already in use",
            ),
            (
                crd("x", "stable.example.com", "xs", "X", &["ct", "crontab"]),
                "False",
                "ShortNamesConflict",
                "[\"ct\" is already in use, \"crontab\" is already in use]",
            ),
            (
                crd("x", "stable.example.com", "xs", "CronTab", &[]),
                "False",
                "ListKindConflict",
                "\"CronTabList\" is already in use",
            ),
        ];
        for (candidate, status, reason, message) in cases {
            let (names, condition, established) = calculate_names_and_conditions(&candidate, &all);
            assert_eq!(
                condition,
                Condition::new("NamesAccepted", status, reason, message),
                "{candidate}"
            );
            if status == "True" {
                assert_eq!(names, Names::from_json(candidate.pointer("/spec/names")));
                assert_eq!(established.reason, "Installing");
            } else {
                assert_eq!(established.reason, "NotAccepted");
            }
        }
        // Its own accepted names never conflict with itself.
        let (_, condition, _) = calculate_names_and_conditions(&existing, &all);
        assert_eq!(condition.status, "True");
    }

    #[test]
    fn protected_groups_carry_the_api_approval_condition() {
        let approval = |group: &str, annotation: Option<&str>| {
            let mut c = json!({"metadata": {"name": format!("as.{group}")},
                "spec": {"group": group}, "status": {}});
            if let Some(a) = annotation {
                c["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": a});
            }
            let changed = sync_api_approval(&mut c, "t0");
            (
                changed,
                find_condition(&c, "KubernetesAPIApprovalPolicyConformant"),
            )
        };
        assert_eq!(approval("example.com", None), (false, None));
        let (changed, condition) = approval("foo.k8s.io", Some("unapproved, testing"));
        assert!(changed);
        assert_eq!(
            condition,
            Some(Condition::new(
                "KubernetesAPIApprovalPolicyConformant",
                "False",
                "UnapprovedAnnotation",
                "not approved: \"unapproved, testing\""
            ))
        );
        let url = "https://github.com/kubernetes/kubernetes/pull/78458";
        let (_, condition) = approval("bar.kubernetes.io", Some(url));
        assert_eq!(
            condition.map(|c| (c.status, c.reason, c.message)),
            Some((
                "True".into(),
                "ApprovedAnnotation".into(),
                format!("approved in {url}")
            ))
        );
        let (_, condition) = approval("k8s.io", None);
        assert_eq!(
            condition.map(|c| c.reason),
            Some("MissingAnnotation".into())
        );
    }

    #[test]
    fn crd_sync_names_then_establish() {
        let mut c = crd(
            "crontab",
            "stable.example.com",
            "crontabs",
            "CronTab",
            &["ct"],
        );
        assert!(!establish(&mut c, "t0"), "names not accepted yet");
        assert!(sync_names(&mut c, &[], "t1"));
        assert_eq!(c["status"]["acceptedNames"], c["spec"]["names"]);
        assert_eq!(
            find_condition(&c, "NamesAccepted").map(|c| c.reason),
            Some("NoConflicts".into())
        );
        assert_eq!(
            find_condition(&c, "Established").map(|c| c.status),
            Some("False".into())
        );
        assert!(!sync_names(&mut c, &[], "t2"), "nothing left to accept");
        assert!(establish(&mut c, "t3"));
        let established = find_condition(&c, "Established");
        assert_eq!(
            established,
            Some(Condition::new(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted"
            ))
        );
        let conditions = c["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let time = conditions
            .iter()
            .find(|c| c["type"] == "Established")
            .map(|c| c["lastTransitionTime"].clone());
        assert_eq!(time, Some(json!("t3")));
        assert!(!establish(&mut c, "t4"));
    }

    #[test]
    fn crd_set_condition_moves_time_only_on_status_change() {
        let mut c = json!({});
        let pending = terminating_condition(Termination::Pending, "");
        assert!(set_condition(&mut c, &pending, "t1"));
        assert!(!set_condition(&mut c, &pending, "t2"));
        assert!(set_condition(
            &mut c,
            &terminating_condition(Termination::InProgress, ""),
            "t3"
        ));
        assert_eq!(c["status"]["conditions"][0]["lastTransitionTime"], "t1");
        assert_eq!(
            c["status"]["conditions"][0]["reason"],
            "InstanceDeletionInProgress"
        );
        assert!(set_condition(
            &mut c,
            &terminating_condition(Termination::Completed, ""),
            "t4"
        ));
        assert_eq!(c["status"]["conditions"][0]["lastTransitionTime"], "t4");
        assert_eq!(
            terminating_condition(Termination::Failed, "boom").message,
            "could not issue all deletes: boom"
        );
        assert_eq!(
            terminating_condition(Termination::ListFailed, "boom").message,
            "could not list instances: boom"
        );
    }

    #[test]
    fn crd_stored_versions_gain_the_storage_version() {
        let mut c = json!({"spec": {"versions": [
            {"name": "v1", "storage": false}, {"name": "v2", "storage": true}]},
            "status": {"storedVersions": ["v1"]}});
        assert_eq!(storage_version(&c), Some("v2"));
        assert!(ensure_stored_version(&mut c));
        assert_eq!(c["status"]["storedVersions"], json!(["v1", "v2"]));
        assert!(!ensure_stored_version(&mut c));
    }
}

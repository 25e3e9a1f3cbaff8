//! API Priority and Fairness objects (`/apis/flowcontrol.apiserver.k8s.io/v1`): `flowschemas`
//! and `prioritylevelconfigurations`, both cluster-scoped with a `status` subresource, served
//! as kube-apiserver serves them (`pkg/registry/flowcontrol/*`): a create resets `status`, an
//! update keeps the stored `status`, a status update keeps everything else, and spec changes
//! bump `metadata.generation`. No short names or categories (kube has none).
//!
//! Each write is decoded as Go would (wrong JSON types are a 400), defaulted as kube's
//! `pkg/apis/flowcontrol/v1/defaults.go` does (matching precedence 1000, nominal concurrency
//! shares 30, lendable percent 0, queues 64, hand size 8, queue length limit 50, an exempt
//! level's shares and lendable percent 0) and put in the shape kube stores, then validated by
//! [`super::flowcontrol_validation`]. Table rows follow kube's printers (`PriorityLevel`,
//! `MatchingPrecedence`, `DistinguisherMethod`, `Age`, `MissingPL`; `Type`,
//! `NominalConcurrencyShares`, `Queues`, `HandSize`, `QueueLengthLimit`, `Age`). The bootstrap
//! objects and their reconciliation are in [`super::flowcontrol_bootstrap`].

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::flowcontrol_validation::{validate_flow_schema, validate_priority_level};
use super::gojson::GoJson;
use super::{age, base_def, items, str_at, Names};
use crate::machinery::json_kind;
use crate::resource::{
    age_column, name_column, ResourceDef, Strategy, SubresourceDef, TableColumn,
};
use crate::status::{ApiError, ApiResult, StatusCause};

/// The API group of the flow-control objects.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The annotation that says whether kube-apiserver keeps a bootstrap object's spec up to date
/// (`flowcontrolv1.AutoUpdateAnnotationKey`).
pub const AUTO_UPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

/// `v1.FlowSchemaDefaultMatchingPrecedence` and the priority-level defaults.
const DEFAULT_MATCHING_PRECEDENCE: i64 = 1000;
const DEFAULT_NOMINAL_CONCURRENCY_SHARES: i64 = 30;
const DEFAULT_QUEUES: i64 = 64;
const DEFAULT_HAND_SIZE: i64 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: i64 = 50;

/// The FlowSchema resource.
pub fn flowschemas_def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: GROUP,
            version: "v1",
            plural: "flowschemas",
            singular: "flowschema",
            kind: "FlowSchema",
            namespaced: false,
            definition: "io.k8s.api.flowcontrol.v1.FlowSchema",
        },
        Arc::new(FlowSchemaStrategy),
    );
    def.subresources = vec![SubresourceDef {
        name: "status",
        kind: "FlowSchema".into(),
        verbs: vec!["get", "patch", "update"],
    }];
    def.columns = vec![
        name_column(),
        column(
            "PriorityLevel",
            "`name` is the name of the priority level configuration being referenced Required.",
        ),
        column(
            "MatchingPrecedence",
            "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default.",
        ),
        column(
            "DistinguisherMethod",
            "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.",
        ),
        age_column(),
        column(
            "MissingPL",
            "references a broken or non-existent PriorityLevelConfiguration",
        ),
    ];
    def.patch_meta = &[("status.conditions", "merge", "type")];
    def
}

/// The PriorityLevelConfiguration resource.
pub fn prioritylevelconfigurations_def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: GROUP,
            version: "v1",
            plural: "prioritylevelconfigurations",
            singular: "prioritylevelconfiguration",
            kind: "PriorityLevelConfiguration",
            namespaced: false,
            definition: "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration",
        },
        Arc::new(PriorityLevelStrategy),
    );
    def.subresources = vec![SubresourceDef {
        name: "status",
        kind: "PriorityLevelConfiguration".into(),
        verbs: vec!["get", "patch", "update"],
    }];
    def.columns = vec![
        name_column(),
        column(
            "Type",
            "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required.",
        ),
        column(
            "NominalConcurrencyShares",
            "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level. This is used both for requests dispatched from this priority level as well as requests dispatched from other priority levels borrowing seats from this level. The server's concurrency limit (ServerCL) is divided among the Limited priority levels in proportion to their NCS values:\n\nNominalCL(i)  = ceil( ServerCL * NCS(i) / sum_ncs ) sum_ncs = sum[priority level k] NCS(k)\n\nBigger numbers mean a larger nominal concurrency limit, at the expense of every other priority level.\n\nIf not specified, this field defaults to a value of 30.\n\nSetting this field to zero supports the construction of a \"jail\" for this priority level that is used to hold some request(s)",
        ),
        column(
            "Queues",
            "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64.",
        ),
        column(
            "HandSize",
            "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8.",
        ),
        column(
            "QueueLengthLimit",
            "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50.",
        ),
        age_column(),
    ];
    def.patch_meta = &[("status.conditions", "merge", "type")];
    def
}

/// A kube printer column: every flow-control column is typed `string`, whatever its cells hold.
fn column(name: &'static str, description: &'static str) -> TableColumn {
    TableColumn {
        name: name.into(),
        type_: "string".into(),
        format: "".into(),
        description: description.into(),
        priority: 0,
    }
}

/// kube's `flowSchemaStrategy` and `flowSchemaStatusStrategy`.
pub struct FlowSchemaStrategy;

impl Strategy for FlowSchemaStrategy {
    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        check_flow_schema(object)
    }

    fn prepare_for_create(&self, object: &mut Value) {
        shape_flow_schema(object);
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        shape_flow_schema(object);
        keep_status(object, old);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_flow_schema(object)
    }

    /// kube validates the whole object on an update of the main resource and only the status
    /// on an update of `status`; the latter carries the stored (valid) spec over, so checking
    /// everything is the same.
    fn validate_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        validate_flow_schema(object)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        let distinguisher = match object.pointer("/spec/distinguisherMethod") {
            Some(method) if !method.is_null() => str_at(method, "/type").to_string(),
            _ => "<none>".into(),
        };
        // kube prints the Dangling condition's status, `?` when there is none.
        let missing = items(object.pointer("/status/conditions"))
            .iter()
            .find(|c| str_at(c, "/type") == "Dangling")
            .map(|c| str_at(c, "/status").to_string())
            .unwrap_or_else(|| "?".into());
        vec![
            json!(str_at(object, "/spec/priorityLevelConfiguration/name")),
            json!(int_at(object, "/spec/matchingPrecedence")),
            json!(distinguisher),
            json!(age(object)),
            json!(missing),
        ]
    }

    /// kube's FlowSchema printer lists them in the order they are matched
    /// (`FlowSchemaSequence`: matching precedence, then name).
    fn table_sort_key(&self, object: &Value) -> Option<(i64, String)> {
        Some((
            int_at(object, "/spec/matchingPrecedence"),
            str_at(object, "/metadata/name").to_string(),
        ))
    }
}

/// kube's `priorityLevelConfigurationStrategy` and its status strategy.
pub struct PriorityLevelStrategy;

impl Strategy for PriorityLevelStrategy {
    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        check_priority_level(object)
    }

    fn prepare_for_create(&self, object: &mut Value) {
        shape_priority_level(object);
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
    }

    fn prepare_for_update(&self, object: &mut Value, old: &Value) {
        shape_priority_level(object);
        keep_status(object, old);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        validate_priority_level(object)
    }

    fn validate_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        validate_priority_level(object)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        let none = || json!("<none>");
        let (mut shares, mut queues, mut hand, mut limit) = (none(), none(), none(), none());
        if let Some(limited) = object.pointer("/spec/limited").filter(|l| !l.is_null()) {
            shares = json!(int_at(limited, "/nominalConcurrencyShares"));
            if let Some(q) = limited
                .pointer("/limitResponse/queuing")
                .filter(|q| !q.is_null())
            {
                queues = json!(int_at(q, "/queues"));
                hand = json!(int_at(q, "/handSize"));
                limit = json!(int_at(q, "/queueLengthLimit"));
            }
        }
        vec![
            json!(str_at(object, "/spec/type")),
            shares,
            queues,
            hand,
            limit,
            json!(age(object)),
        ]
    }
}

fn int_at(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// A main-resource update keeps the stored status (`{}` when there is none, as Go writes the
/// zero struct).
fn keep_status(object: &mut Value, old: &Value) {
    if let Some(map) = object.as_object_mut() {
        let status = old.get("status").cloned().unwrap_or_else(|| json!({}));
        map.insert("status".into(), status);
    }
}

// ---------------------------------------------------------------------------------------------
// Defaulting and Go's shape
// ---------------------------------------------------------------------------------------------

/// A list of strings as Go writes a slice without `omitempty`: `null` when unset.
fn required_strings(value: Option<&Value>) -> Value {
    match value {
        Some(Value::Array(a)) => Value::Array(a.clone()),
        _ => Value::Null,
    }
}

/// The object under `key` when it is set (a Go pointer that is not nil).
fn present<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.get(key).filter(|v| v.is_object())
}

fn name_only(value: &Value) -> Value {
    json!({"name": str_at(value, "/name")})
}

/// A `FlowSchemaSpec` defaulted (`SetDefaults_FlowSchemaSpec`) and in the shape Go writes it.
pub(crate) fn default_flow_schema_spec(spec: &mut Value) {
    let mut out = Map::new();
    let level = spec
        .get("priorityLevelConfiguration")
        .cloned()
        .unwrap_or(Value::Null);
    out.insert("priorityLevelConfiguration".into(), name_only(&level));
    let precedence = match int_at(spec, "/matchingPrecedence") {
        0 => DEFAULT_MATCHING_PRECEDENCE,
        n => n,
    };
    out.insert("matchingPrecedence".into(), json!(precedence));
    if let Some(method) = present(spec, "distinguisherMethod") {
        out.insert(
            "distinguisherMethod".into(),
            json!({"type": str_at(method, "/type")}),
        );
    }
    let rules: Vec<Value> = items(spec.get("rules")).iter().map(shape_rule).collect();
    if !rules.is_empty() {
        out.insert("rules".into(), Value::Array(rules));
    }
    *spec = Value::Object(out);
}

fn shape_rule(rule: &Value) -> Value {
    let mut out = Map::new();
    let subjects = match rule.get("subjects") {
        Some(Value::Array(list)) => Value::Array(list.iter().map(shape_subject).collect()),
        _ => Value::Null,
    };
    out.insert("subjects".into(), subjects);
    let resource_rules: Vec<Value> = items(rule.get("resourceRules"))
        .iter()
        .map(|r| {
            let mut m = Map::new();
            m.insert("verbs".into(), required_strings(r.get("verbs")));
            m.insert("apiGroups".into(), required_strings(r.get("apiGroups")));
            m.insert("resources".into(), required_strings(r.get("resources")));
            if r.get("clusterScope").and_then(Value::as_bool) == Some(true) {
                m.insert("clusterScope".into(), json!(true));
            }
            m.insert("namespaces".into(), required_strings(r.get("namespaces")));
            Value::Object(m)
        })
        .collect();
    if !resource_rules.is_empty() {
        out.insert("resourceRules".into(), Value::Array(resource_rules));
    }
    let non_resource_rules: Vec<Value> = items(rule.get("nonResourceRules"))
        .iter()
        .map(|r| {
            json!({
                "verbs": required_strings(r.get("verbs")),
                "nonResourceURLs": required_strings(r.get("nonResourceURLs")),
            })
        })
        .collect();
    if !non_resource_rules.is_empty() {
        out.insert("nonResourceRules".into(), Value::Array(non_resource_rules));
    }
    Value::Object(out)
}

fn shape_subject(subject: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!(str_at(subject, "/kind")));
    if let Some(user) = present(subject, "user") {
        out.insert("user".into(), name_only(user));
    }
    if let Some(group) = present(subject, "group") {
        out.insert("group".into(), name_only(group));
    }
    if let Some(sa) = present(subject, "serviceAccount") {
        out.insert(
            "serviceAccount".into(),
            json!({"namespace": str_at(sa, "/namespace"), "name": str_at(sa, "/name")}),
        );
    }
    Value::Object(out)
}

/// A `PriorityLevelConfigurationSpec` defaulted (`SetDefaults_LimitedPriorityLevelConfiguration`,
/// `SetDefaults_ExemptPriorityLevelConfiguration`, `SetDefaults_QueuingConfiguration`) and in
/// the shape Go writes it.
pub(crate) fn default_priority_level_spec(spec: &mut Value) {
    let mut out = Map::new();
    out.insert("type".into(), json!(str_at(spec, "/type")));
    if let Some(limited) = present(spec, "limited") {
        let mut l = Map::new();
        // A pointer in v1: only an unset value is defaulted, an explicit 0 stays.
        let shares = limited
            .get("nominalConcurrencyShares")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_NOMINAL_CONCURRENCY_SHARES);
        l.insert("nominalConcurrencyShares".into(), json!(shares));
        let response = limited.get("limitResponse").unwrap_or(&Value::Null);
        let mut r = Map::new();
        r.insert("type".into(), json!(str_at(response, "/type")));
        if let Some(queuing) = present(response, "queuing") {
            let value = |key: &str, default: i64| match int_at(queuing, &format!("/{key}")) {
                0 => default,
                n => n,
            };
            r.insert(
                "queuing".into(),
                json!({
                    "queues": value("queues", DEFAULT_QUEUES),
                    "handSize": value("handSize", DEFAULT_HAND_SIZE),
                    "queueLengthLimit": value("queueLengthLimit", DEFAULT_QUEUE_LENGTH_LIMIT),
                }),
            );
        }
        l.insert("limitResponse".into(), Value::Object(r));
        let lendable = limited
            .get("lendablePercent")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        l.insert("lendablePercent".into(), json!(lendable));
        if let Some(limit) = limited.get("borrowingLimitPercent").and_then(Value::as_i64) {
            l.insert("borrowingLimitPercent".into(), json!(limit));
        }
        out.insert("limited".into(), Value::Object(l));
    }
    if let Some(exempt) = present(spec, "exempt") {
        let field = |key: &str| exempt.get(key).and_then(Value::as_i64).unwrap_or(0);
        out.insert(
            "exempt".into(),
            json!({
                "nominalConcurrencyShares": field("nominalConcurrencyShares"),
                "lendablePercent": field("lendablePercent"),
            }),
        );
    }
    *spec = Value::Object(out);
}

/// Puts a FlowSchema's spec in kube's stored shape.
fn shape_flow_schema(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        let spec = map.entry("spec").or_insert_with(|| json!({}));
        default_flow_schema_spec(spec);
    }
}

/// Puts a PriorityLevelConfiguration's spec in kube's stored shape.
fn shape_priority_level(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        let spec = map.entry("spec").or_insert_with(|| json!({}));
        default_priority_level_spec(spec);
    }
}

/// apimachinery's `equality.Semantic.DeepEqual` for two specs in Go's shape: a nil and an
/// empty slice are equal.
pub(crate) fn semantically_equal(a: &Value, b: &Value) -> bool {
    fn normalized(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null() && !matches!(v, Value::Array(a) if a.is_empty()))
                    .map(|(k, v)| (k.clone(), normalized(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
            other => other.clone(),
        }
    }
    normalized(a) == normalized(b)
}

// ---------------------------------------------------------------------------------------------
// Go's typed decoding
// ---------------------------------------------------------------------------------------------

/// An `int32` field (or `*int32`): a whole number in range, or Go's `UnmarshalTypeError`.
fn int32(go: &GoJson, value: Option<&Value>, go_struct: &str, path: &str) -> ApiResult<()> {
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => Ok(()),
        Some(Value::Number(n)) => Err(ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal number {n} into Go struct field {go_struct}.{path} of type int32",
            kind = go.kind()
        ))),
        Some(other) => Err(go.mismatch(other, go_struct, path, "int32")),
    }
}

/// The conditions of either kind's status (`[]v1.<Kind>Condition`).
fn check_conditions(go: &GoJson, object: &Value, condition: &str) -> ApiResult<()> {
    let kind = go.kind();
    let status = go.object(
        object.get("status"),
        kind,
        "status",
        &format!("v1.{kind}Status"),
    )?;
    let conditions = status.and_then(|s| s.get("conditions"));
    let path = "status.conditions";
    for c in go.array(
        conditions,
        &format!("{kind}Status"),
        path,
        &format!("[]v1.{condition}"),
    )? {
        let c = go.object(
            Some(c),
            &format!("{kind}Status"),
            path,
            &format!("v1.{condition}"),
        )?;
        let field = |key: &str| c.and_then(|c| c.get(key));
        let at = |key: &str| format!("{path}.{key}");
        go.typed_string(
            field("type"),
            condition,
            &at("type"),
            &format!("v1.{condition}Type"),
        )?;
        go.typed_string(
            field("status"),
            condition,
            &at("status"),
            "v1.ConditionStatus",
        )?;
        go.string(field("reason"), condition, &at("reason"))?;
        go.string(field("message"), condition, &at("message"))?;
        if let Some(time) = field("lastTransitionTime").filter(|t| !t.is_null()) {
            if !time.is_string() {
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {} into Go value of type string",
                    json_kind(time)
                )));
            }
        }
    }
    Ok(())
}

/// Go's type checks of a FlowSchema body.
fn check_flow_schema(object: &Value) -> ApiResult<()> {
    let go = GoJson::new("FlowSchema");
    let spec = go.object(
        object.get("spec"),
        "FlowSchema",
        "spec",
        "v1.FlowSchemaSpec",
    )?;
    if let Some(spec) = spec {
        let level = go.object(
            spec.get("priorityLevelConfiguration"),
            "FlowSchemaSpec",
            "spec.priorityLevelConfiguration",
            "v1.PriorityLevelConfigurationReference",
        )?;
        go.string(
            level.and_then(|l| l.get("name")),
            "PriorityLevelConfigurationReference",
            "spec.priorityLevelConfiguration.name",
        )?;
        int32(
            &go,
            spec.get("matchingPrecedence"),
            "FlowSchemaSpec",
            "spec.matchingPrecedence",
        )?;
        let method = go.object(
            spec.get("distinguisherMethod"),
            "FlowSchemaSpec",
            "spec.distinguisherMethod",
            "v1.FlowDistinguisherMethod",
        )?;
        go.typed_string(
            method.and_then(|m| m.get("type")),
            "FlowDistinguisherMethod",
            "spec.distinguisherMethod.type",
            "v1.FlowDistinguisherMethodType",
        )?;
        for rule in go.array(
            spec.get("rules"),
            "FlowSchemaSpec",
            "spec.rules",
            "[]v1.PolicyRulesWithSubjects",
        )? {
            let rule = go.object(
                Some(rule),
                "FlowSchemaSpec",
                "spec.rules",
                "v1.PolicyRulesWithSubjects",
            )?;
            if let Some(rule) = rule {
                check_rule(&go, rule)?;
            }
        }
    }
    check_conditions(&go, object, "FlowSchemaCondition")
}

fn check_rule(go: &GoJson, rule: &Map<String, Value>) -> ApiResult<()> {
    let holder = "PolicyRulesWithSubjects";
    let path = "spec.rules.subjects";
    for subject in go.array(rule.get("subjects"), holder, path, "[]v1.Subject")? {
        let Some(subject) = go.object(Some(subject), holder, path, "v1.Subject")? else {
            continue;
        };
        go.typed_string(
            subject.get("kind"),
            "Subject",
            &format!("{path}.kind"),
            "v1.SubjectKind",
        )?;
        for (key, ty, fields) in [
            ("user", "UserSubject", &["name"][..]),
            ("group", "GroupSubject", &["name"][..]),
            (
                "serviceAccount",
                "ServiceAccountSubject",
                &["namespace", "name"][..],
            ),
        ] {
            let at = format!("{path}.{key}");
            let inner = go.object(subject.get(key), "Subject", &at, &format!("v1.{ty}"))?;
            for field in fields {
                go.string(
                    inner.and_then(|i| i.get(*field)),
                    ty,
                    &format!("{at}.{field}"),
                )?;
            }
        }
    }
    let path = "spec.rules.resourceRules";
    for r in go.array(
        rule.get("resourceRules"),
        holder,
        path,
        "[]v1.ResourcePolicyRule",
    )? {
        let Some(r) = go.object(Some(r), holder, path, "v1.ResourcePolicyRule")? else {
            continue;
        };
        for key in ["verbs", "apiGroups", "resources", "namespaces"] {
            go.strings(
                r.get(key),
                "ResourcePolicyRule",
                &format!("{path}.{key}"),
                "[]string",
            )?;
        }
        go.boolean(
            r.get("clusterScope"),
            "ResourcePolicyRule",
            &format!("{path}.clusterScope"),
        )?;
    }
    let path = "spec.rules.nonResourceRules";
    for r in go.array(
        rule.get("nonResourceRules"),
        holder,
        path,
        "[]v1.NonResourcePolicyRule",
    )? {
        let Some(r) = go.object(Some(r), holder, path, "v1.NonResourcePolicyRule")? else {
            continue;
        };
        for key in ["verbs", "nonResourceURLs"] {
            go.strings(
                r.get(key),
                "NonResourcePolicyRule",
                &format!("{path}.{key}"),
                "[]string",
            )?;
        }
    }
    Ok(())
}

/// Go's type checks of a PriorityLevelConfiguration body.
fn check_priority_level(object: &Value) -> ApiResult<()> {
    let go = GoJson::new("PriorityLevelConfiguration");
    let spec = go.object(
        object.get("spec"),
        "PriorityLevelConfiguration",
        "spec",
        "v1.PriorityLevelConfigurationSpec",
    )?;
    if let Some(spec) = spec {
        let holder = "PriorityLevelConfigurationSpec";
        go.typed_string(
            spec.get("type"),
            holder,
            "spec.type",
            "v1.PriorityLevelEnablement",
        )?;
        let limited = go.object(
            spec.get("limited"),
            holder,
            "spec.limited",
            "v1.LimitedPriorityLevelConfiguration",
        )?;
        if let Some(limited) = limited {
            let holder = "LimitedPriorityLevelConfiguration";
            for key in [
                "nominalConcurrencyShares",
                "lendablePercent",
                "borrowingLimitPercent",
            ] {
                int32(
                    &go,
                    limited.get(key),
                    holder,
                    &format!("spec.limited.{key}"),
                )?;
            }
            let response = go.object(
                limited.get("limitResponse"),
                holder,
                "spec.limited.limitResponse",
                "v1.LimitResponse",
            )?;
            if let Some(response) = response {
                go.typed_string(
                    response.get("type"),
                    "LimitResponse",
                    "spec.limited.limitResponse.type",
                    "v1.LimitResponseType",
                )?;
                let queuing = go.object(
                    response.get("queuing"),
                    "LimitResponse",
                    "spec.limited.limitResponse.queuing",
                    "v1.QueuingConfiguration",
                )?;
                if let Some(queuing) = queuing {
                    for key in ["queues", "handSize", "queueLengthLimit"] {
                        int32(
                            &go,
                            queuing.get(key),
                            "QueuingConfiguration",
                            &format!("spec.limited.limitResponse.queuing.{key}"),
                        )?;
                    }
                }
            }
        }
        let exempt = go.object(
            spec.get("exempt"),
            holder,
            "spec.exempt",
            "v1.ExemptPriorityLevelConfiguration",
        )?;
        if let Some(exempt) = exempt {
            for key in ["nominalConcurrencyShares", "lendablePercent"] {
                int32(
                    &go,
                    exempt.get(key),
                    "ExemptPriorityLevelConfiguration",
                    &format!("spec.exempt.{key}"),
                )?;
            }
        }
    }
    check_conditions(&go, object, "PriorityLevelConfigurationCondition")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn now() -> String {
        Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    #[test]
    fn defs_match_kube() {
        let fs = flowschemas_def();
        assert_eq!(fs.api_version(), "flowcontrol.apiserver.k8s.io/v1");
        assert_eq!(fs.list_kind, "FlowSchemaList");
        assert!(!fs.namespaced);
        assert!(fs.short_names.is_empty());
        assert!(fs.categories.is_empty());
        assert!(fs.has_subresource("status"));
        assert_eq!(
            fs.storage_prefix,
            "/flowcontrol.apiserver.k8s.io/flowschemas"
        );
        let names: Vec<&str> = fs.columns.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "PriorityLevel",
                "MatchingPrecedence",
                "DistinguisherMethod",
                "Age",
                "MissingPL"
            ]
        );
        let pl = prioritylevelconfigurations_def();
        assert_eq!(pl.kind, "PriorityLevelConfiguration");
        let names: Vec<&str> = pl.columns.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Type",
                "NominalConcurrencyShares",
                "Queues",
                "HandSize",
                "QueueLengthLimit",
                "Age"
            ]
        );
        assert!(FlowSchemaStrategy.tracks_generation());
        assert!(PriorityLevelStrategy.tracks_generation());
    }

    #[test]
    fn flow_schema_defaults_and_shape() {
        let mut object = json!({"metadata": {"name": "a"},
            "spec": {"priorityLevelConfiguration": {"name": "global-default"},
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "g"}, "user": null}],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}],
                    "resourceRules": []}]},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
        FlowSchemaStrategy.prepare_for_create(&mut object);
        assert_eq!(object["status"], json!({}));
        assert_eq!(
            object["spec"],
            json!({"priorityLevelConfiguration": {"name": "global-default"},
                "matchingPrecedence": 1000,
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "g"}}],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}]})
        );
        assert!(FlowSchemaStrategy.validate(&object).is_empty());
    }

    #[test]
    fn update_keeps_status_and_status_update_keeps_spec() {
        let old = json!({"metadata": {"name": "a", "generation": 1},
            "spec": {"priorityLevelConfiguration": {"name": "x"}, "matchingPrecedence": 500},
            "status": {"conditions": [{"type": "Dangling", "status": "True"}]}});
        let mut new = old.clone();
        new["spec"]["matchingPrecedence"] = json!(600);
        new["status"] = json!({});
        FlowSchemaStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["status"], old["status"]);
        assert_eq!(new["spec"]["matchingPrecedence"], 600);

        let mut status = old.clone();
        status["spec"]["matchingPrecedence"] = json!(700);
        status["status"] = json!({"conditions": [{"type": "Dangling", "status": "False"}]});
        FlowSchemaStrategy.prepare_for_status_update(&mut status, &old);
        assert_eq!(status["spec"], old["spec"]);
        assert_eq!(status["status"]["conditions"][0]["status"], "False");
    }

    #[test]
    fn priority_level_defaults() {
        let mut object = json!({"metadata": {"name": "p"},
            "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue",
                "queuing": {}}}}});
        PriorityLevelStrategy.prepare_for_create(&mut object);
        assert_eq!(
            object["spec"],
            json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 30,
                "lendablePercent": 0,
                "limitResponse": {"type": "Queue",
                    "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}})
        );
        // An explicit zero is kept: v1's field is a pointer.
        let mut zero = json!({"spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 0, "limitResponse": {"type": "Reject"}}}});
        PriorityLevelStrategy.prepare_for_create(&mut zero);
        assert_eq!(zero["spec"]["limited"]["nominalConcurrencyShares"], 0);
        let mut exempt = json!({"metadata": {"name": "exempt"},
            "spec": {"type": "Exempt", "exempt": {}}});
        PriorityLevelStrategy.prepare_for_create(&mut exempt);
        assert_eq!(
            exempt["spec"]["exempt"],
            json!({"nominalConcurrencyShares": 0, "lendablePercent": 0})
        );
        assert!(PriorityLevelStrategy.validate(&exempt).is_empty());
    }

    #[test]
    fn table_cells_match_kube_printers() {
        let mut fs = json!({"metadata": {"name": "a", "creationTimestamp": now()},
            "spec": {"priorityLevelConfiguration": {"name": "workload-low"},
                "matchingPrecedence": 9000, "distinguisherMethod": {"type": "ByUser"}}});
        assert_eq!(
            FlowSchemaStrategy.table_cells(&fs),
            [
                json!("workload-low"),
                json!(9000),
                json!("ByUser"),
                json!("0s"),
                json!("?")
            ]
        );
        fs["spec"]["distinguisherMethod"] = Value::Null;
        fs["status"] = json!({"conditions": [{"type": "Other", "status": "True"},
            {"type": "Dangling", "status": "False"}]});
        let cells = FlowSchemaStrategy.table_cells(&fs);
        assert_eq!(cells[2], "<none>");
        assert_eq!(cells[4], "False");

        let mut pl = json!({"metadata": {"name": "p", "creationTimestamp": now()},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 40,
                "limitResponse": {"type": "Queue",
                    "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        assert_eq!(
            PriorityLevelStrategy.table_cells(&pl),
            [
                json!("Limited"),
                json!(40),
                json!(128),
                json!(6),
                json!(50),
                json!("0s")
            ]
        );
        pl["spec"] = json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0}});
        assert_eq!(
            PriorityLevelStrategy.table_cells(&pl)[..5],
            [
                json!("Exempt"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn decoding_is_typed_like_go() {
        let fs = |body: Value| {
            FlowSchemaStrategy
                .check_decode(&body)
                .err()
                .map(|e| e.message)
        };
        let prefix = "FlowSchema in version \"v1\" cannot be handled as a FlowSchema: json: ";
        assert_eq!(
            fs(json!({"spec": {"matchingPrecedence": "1"}})),
            Some(format!("{prefix}cannot unmarshal string into Go struct field FlowSchemaSpec.spec.matchingPrecedence of type int32"))
        );
        assert_eq!(
            fs(json!({"spec": {"rules": [{"subjects": [{"kind": 1}]}]}})),
            Some(format!("{prefix}cannot unmarshal number into Go struct field Subject.spec.rules.subjects.kind of type v1.SubjectKind"))
        );
        assert_eq!(
            fs(json!({"spec": {"rules": [{"resourceRules": [{"verbs": "get"}]}]}})),
            Some(format!("{prefix}cannot unmarshal string into Go struct field ResourcePolicyRule.spec.rules.resourceRules.verbs of type []string"))
        );
        assert_eq!(fs(json!({"spec": {"matchingPrecedence": 5}})), None);

        let pl = |body: Value| {
            PriorityLevelStrategy
                .check_decode(&body)
                .err()
                .map(|e| e.message)
        };
        assert_eq!(
            pl(json!({"spec": {"limited": {"limitResponse": {"queuing": {"queues": 1.5}}}}})),
            Some("PriorityLevelConfiguration in version \"v1\" cannot be handled as a PriorityLevelConfiguration: json: cannot unmarshal number 1.5 into Go struct field QueuingConfiguration.spec.limited.limitResponse.queuing.queues of type int32".into())
        );
        assert!(pl(json!({"spec": {"type": true}})).is_some());
        assert!(pl(json!({"status": {"conditions": [{"type": 5}]}})).is_some());
    }

    #[test]
    fn semantic_equality_ignores_nil_versus_empty() {
        assert!(semantically_equal(
            &json!({"a": [], "b": null, "c": 1}),
            &json!({"c": 1})
        ));
        assert!(!semantically_equal(&json!({"c": 1}), &json!({"c": 2})));
        assert!(!semantically_equal(&json!({"d": {}}), &json!({})));
    }
}

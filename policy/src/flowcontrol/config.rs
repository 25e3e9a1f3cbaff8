//! FlowSchema and PriorityLevelConfiguration (`flowcontrol.apiserver.k8s.io/v1`) objects read
//! from their stored JSON into the compiled form the engine uses, with kube's defaults for
//! missing optional fields, the mandatory `exempt` and `catch-all` objects kube supplies when
//! they are missing, and the `Dangling` condition kube's config controller writes.

use serde::Deserialize;
use serde_json::Value;

use crate::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, SYSTEM_PRIVILEGED_GROUP};

/// Name of the mandatory exempt priority level and flow schema.
pub const EXEMPT: &str = "exempt";
/// Name of the mandatory catch-all priority level and flow schema.
pub const CATCH_ALL: &str = "catch-all";

const DEFAULT_MATCHING_PRECEDENCE: i32 = 1000;
const DEFAULT_NOMINAL_CONCURRENCY_SHARES: i32 = 30;
const DEFAULT_QUEUES: i32 = 64;
const DEFAULT_HAND_SIZE: i32 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;

/// A compiled FlowSchema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSchema {
    pub name: String,
    pub uid: String,
    /// `spec.priorityLevelConfiguration.name`.
    pub priority_level: String,
    pub matching_precedence: i32,
    pub distinguisher: Option<Distinguisher>,
    pub rules: Vec<PolicyRules>,
}

/// `spec.distinguisherMethod.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distinguisher {
    ByUser,
    ByNamespace,
}

/// One `PolicyRulesWithSubjects`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyRules {
    #[serde(deserialize_with = "null_as_empty")]
    pub subjects: Vec<Subject>,
    #[serde(deserialize_with = "null_as_empty")]
    pub resource_rules: Vec<ResourceRule>,
    #[serde(deserialize_with = "null_as_empty")]
    pub non_resource_rules: Vec<NonResourceRule>,
}

/// A list Go writes as `null` when it is nil (`namespaces` has no `omitempty`: a
/// cluster-scope-only rule is stored with `"namespaces": null`): empty, as Go reads it.
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A `Subject`, resolved from its `kind` and the member of that kind when the FlowSchema is
/// read, so that classifying a request compares no kind strings. A name may be `*`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "SubjectObject")]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount {
        namespace: String,
        name: String,
    },
    /// An unknown kind, or a kind without its member: matches no one, as in kube's
    /// `matchesSubject`.
    Nobody,
}

/// A `Subject` as stored: `kind` is `User`, `Group` or `ServiceAccount` with the matching
/// member set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SubjectObject {
    kind: String,
    user: Option<NamedSubject>,
    group: Option<NamedSubject>,
    service_account: Option<ServiceAccountSubject>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct NamedSubject {
    name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ServiceAccountSubject {
    namespace: String,
    name: String,
}

impl From<SubjectObject> for Subject {
    fn from(object: SubjectObject) -> Self {
        let SubjectObject {
            kind,
            user,
            group,
            service_account,
        } = object;
        match (kind.as_str(), user, group, service_account) {
            ("User", Some(u), _, _) => Subject::User(u.name),
            ("Group", _, Some(g), _) => Subject::Group(g.name),
            ("ServiceAccount", _, _, Some(sa)) => Subject::ServiceAccount {
                namespace: sa.namespace,
                name: sa.name,
            },
            _ => Subject::Nobody,
        }
    }
}

/// A `ResourcePolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceRule {
    #[serde(deserialize_with = "null_as_empty")]
    pub verbs: Vec<String>,
    #[serde(deserialize_with = "null_as_empty")]
    pub api_groups: Vec<String>,
    #[serde(deserialize_with = "null_as_empty")]
    pub resources: Vec<String>,
    pub cluster_scope: bool,
    #[serde(deserialize_with = "null_as_empty")]
    pub namespaces: Vec<String>,
}

/// A `NonResourcePolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct NonResourceRule {
    #[serde(deserialize_with = "null_as_empty")]
    pub verbs: Vec<String>,
    #[serde(rename = "nonResourceURLs", deserialize_with = "null_as_empty")]
    pub non_resource_urls: Vec<String>,
}

/// A compiled PriorityLevelConfiguration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityLevel {
    pub name: String,
    pub uid: String,
    pub nominal_concurrency_shares: u32,
    /// `lendablePercent`, 0 when unset.
    pub lendable_percent: u32,
    /// `borrowingLimitPercent`; `None` (unlimited borrowing) for exempt levels and when unset.
    pub borrowing_limit_percent: Option<u32>,
    pub behavior: LevelBehavior,
}

/// What a priority level does with requests beyond its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelBehavior {
    /// Never limited (the `exempt` level).
    Exempt,
    /// Limited, rejecting at once when at the limit.
    Reject,
    /// Limited, queuing with fair queuing over `queues` queues.
    Queue(Queuing),
}

/// `spec.limited.limitResponse.queuing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    pub queues: u32,
    pub hand_size: u32,
    pub queue_length_limit: u32,
}

impl PriorityLevel {
    pub fn is_exempt(&self) -> bool {
        self.behavior == LevelBehavior::Exempt
    }
}

/// An object that was not used, and why (kube's controller would refuse it the same way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `FlowSchema` or `PriorityLevelConfiguration`.
    pub kind: &'static str,
    /// The object's name, if it had one.
    pub name: String,
    pub reason: String,
}

/// The `Dangling` condition a FlowSchema should carry, worded as kube's controller writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DanglingCondition {
    /// Always `Dangling`.
    pub type_: &'static str,
    /// `True` or `False`.
    pub status: &'static str,
    /// `NotFound` or `Found`.
    pub reason: &'static str,
    pub message: String,
}

impl DanglingCondition {
    pub fn new(priority_level: &str, dangling: bool) -> Self {
        if dangling {
            DanglingCondition {
                type_: "Dangling",
                status: "True",
                reason: "NotFound",
                message: format!(
                    "This FlowSchema references the PriorityLevelConfiguration object named {:?} but there is no such object",
                    priority_level
                ),
            }
        } else {
            DanglingCondition {
                type_: "Dangling",
                status: "False",
                reason: "Found",
                message: format!(
                    "This FlowSchema references the PriorityLevelConfiguration object named {:?} and it exists",
                    priority_level
                ),
            }
        }
    }

    /// Whether the object's current `status.conditions` already say this (kube only writes the
    /// status when type, status, reason or message differ).
    pub fn is_current_in(&self, flow_schema: &Value) -> bool {
        let Some(conditions) = flow_schema
            .pointer("/status/conditions")
            .and_then(Value::as_array)
        else {
            return false;
        };
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(self.type_)
                && c.get("status").and_then(Value::as_str) == Some(self.status)
                && c.get("reason").and_then(Value::as_str) == Some(self.reason)
                && c.get("message").and_then(Value::as_str) == Some(self.message.as_str())
        })
    }
}

/// What a FlowSchema's status should say after a config update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSchemaStatus {
    pub name: String,
    pub priority_level: String,
    /// True when the referenced PriorityLevelConfiguration does not exist (or was skipped as
    /// unusable); such a schema matches nothing.
    pub dangling: bool,
    pub condition: DanglingCondition,
}

/// The result of [`super::FlowControl::update_config`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigReport {
    /// One entry per usable FlowSchema object given, in input order.
    pub flow_schemas: Vec<FlowSchemaStatus>,
    /// Objects that could not be used.
    pub skipped: Vec<Skipped>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta {
    name: String,
    uid: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FlowSchemaObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: FlowSchemaSpecObject,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct FlowSchemaSpecObject {
    priority_level_configuration: NamedSubject,
    matching_precedence: Option<i32>,
    distinguisher_method: Option<DistinguisherObject>,
    rules: Vec<PolicyRules>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct DistinguisherObject {
    #[serde(rename = "type")]
    type_: String,
}

#[derive(Deserialize)]
struct PriorityLevelObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: PriorityLevelSpecObject,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PriorityLevelSpecObject {
    #[serde(rename = "type")]
    type_: String,
    limited: Option<LimitedObject>,
    exempt: Option<ExemptObject>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LimitedObject {
    nominal_concurrency_shares: Option<i32>,
    /// v1beta2's name for the same field, accepted for objects stored before v1.
    assured_concurrency_shares: Option<i32>,
    lendable_percent: Option<i32>,
    borrowing_limit_percent: Option<i32>,
    limit_response: LimitResponseObject,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LimitResponseObject {
    #[serde(rename = "type")]
    type_: String,
    queuing: Option<QueuingObject>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct QueuingObject {
    queues: Option<i32>,
    hand_size: Option<i32>,
    queue_length_limit: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ExemptObject {
    nominal_concurrency_shares: Option<i32>,
    lendable_percent: Option<i32>,
}

fn object_name(value: &Value) -> String {
    value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Reads one FlowSchema object.
pub fn parse_flow_schema(value: &Value) -> Result<FlowSchema, Skipped> {
    let skip = |reason: String| Skipped {
        kind: "FlowSchema",
        name: object_name(value),
        reason,
    };
    let object = FlowSchemaObject::deserialize(value).map_err(|e| skip(e.to_string()))?;
    if object.metadata.name.is_empty() {
        return Err(skip("metadata.name is empty".into()));
    }
    let spec = object.spec;
    if spec.priority_level_configuration.name.is_empty() {
        return Err(skip("spec.priorityLevelConfiguration.name is empty".into()));
    }
    let distinguisher = match spec.distinguisher_method.as_ref().map(|d| d.type_.as_str()) {
        None => None,
        Some("ByUser") => Some(Distinguisher::ByUser),
        Some("ByNamespace") => Some(Distinguisher::ByNamespace),
        Some(other) => {
            return Err(skip(format!(
                "spec.distinguisherMethod.type {other:?} is not ByUser or ByNamespace"
            )))
        }
    };
    Ok(FlowSchema {
        name: object.metadata.name,
        uid: object.metadata.uid,
        priority_level: spec.priority_level_configuration.name,
        matching_precedence: spec
            .matching_precedence
            .unwrap_or(DEFAULT_MATCHING_PRECEDENCE),
        distinguisher,
        rules: spec.rules,
    })
}

fn percent(field: &str, value: Option<i32>, max: Option<i32>) -> Result<Option<u32>, String> {
    match value {
        None => Ok(None),
        Some(v) if v < 0 => Err(format!("{field} {v} is negative")),
        Some(v) if max.is_some_and(|m| v > m) => Err(format!("{field} {v} is above 100")),
        Some(v) => Ok(Some(v as u32)),
    }
}

/// Reads one PriorityLevelConfiguration object, refusing what kube's controller refuses
/// (broken unions, an exempt type under another name than `exempt` and the reverse, queuing
/// parameters the shuffle-sharding dealer cannot use).
pub fn parse_priority_level(value: &Value) -> Result<PriorityLevel, Skipped> {
    let skip = |reason: String| Skipped {
        kind: "PriorityLevelConfiguration",
        name: object_name(value),
        reason,
    };
    let object = PriorityLevelObject::deserialize(value).map_err(|e| skip(e.to_string()))?;
    let name = object.metadata.name;
    if name.is_empty() {
        return Err(skip("metadata.name is empty".into()));
    }
    let spec = object.spec;
    let level = match spec.type_.as_str() {
        "Exempt" => {
            if name != EXEMPT {
                return Err(skip("non-alignment between name and type".into()));
            }
            if spec.limited.is_some() {
                return Err(skip(
                    "broken union structure at the top, for Limited".into(),
                ));
            }
            let exempt = spec.exempt.unwrap_or_default();
            let shares = exempt.nominal_concurrency_shares.unwrap_or(0);
            if shares < 0 {
                return Err(skip(format!(
                    "nominalConcurrencyShares {shares} is negative"
                )));
            }
            PriorityLevel {
                name,
                uid: object.metadata.uid,
                nominal_concurrency_shares: shares as u32,
                lendable_percent: percent("lendablePercent", exempt.lendable_percent, Some(100))
                    .map_err(skip)?
                    .unwrap_or(0),
                borrowing_limit_percent: None,
                behavior: LevelBehavior::Exempt,
            }
        }
        "Limited" => {
            if name == EXEMPT {
                return Err(skip("non-alignment between name and type".into()));
            }
            if spec.exempt.is_some() {
                return Err(skip("broken union structure at the top, for Exempt".into()));
            }
            let Some(limited) = spec.limited else {
                return Err(skip(
                    "broken union structure at the top, for Limited".into(),
                ));
            };
            let shares = limited
                .nominal_concurrency_shares
                .or(limited.assured_concurrency_shares)
                .unwrap_or(DEFAULT_NOMINAL_CONCURRENCY_SHARES);
            if shares < 0 {
                return Err(skip(format!(
                    "nominalConcurrencyShares {shares} is negative"
                )));
            }
            let behavior = match limited.limit_response.type_.as_str() {
                "Reject" => {
                    if limited.limit_response.queuing.is_some() {
                        return Err(skip("broken union structure for limit response".into()));
                    }
                    LevelBehavior::Reject
                }
                "Queue" => {
                    let q = limited.limit_response.queuing.unwrap_or_default();
                    let queues = q.queues.unwrap_or(DEFAULT_QUEUES);
                    let hand_size = q.hand_size.unwrap_or(DEFAULT_HAND_SIZE);
                    let queue_length_limit =
                        q.queue_length_limit.unwrap_or(DEFAULT_QUEUE_LENGTH_LIMIT);
                    if queues < 1 || hand_size < 1 || queue_length_limit < 1 {
                        return Err(skip(format!(
                            "queuing parameters queues={queues} handSize={hand_size} queueLengthLimit={queue_length_limit} must be positive"
                        )));
                    }
                    super::shuffle::Dealer::new(queues as usize, hand_size as usize).map_err(
                        |e| {
                            skip(format!(
                                "the queuing configuration implies an invalid shuffle sharding config: {e}"
                            ))
                        },
                    )?;
                    LevelBehavior::Queue(Queuing {
                        queues: queues as u32,
                        hand_size: hand_size as u32,
                        queue_length_limit: queue_length_limit as u32,
                    })
                }
                other => {
                    return Err(skip(format!(
                        "spec.limited.limitResponse.type {other:?} is not Queue or Reject"
                    )))
                }
            };
            PriorityLevel {
                name,
                uid: object.metadata.uid,
                nominal_concurrency_shares: shares as u32,
                lendable_percent: percent("lendablePercent", limited.lendable_percent, Some(100))
                    .map_err(skip)?
                    .unwrap_or(0),
                borrowing_limit_percent: percent(
                    "borrowingLimitPercent",
                    limited.borrowing_limit_percent,
                    None,
                )
                .map_err(skip)?,
                behavior,
            }
        }
        other => {
            return Err(skip(format!(
                "spec.type {other:?} is not Exempt or Limited"
            )))
        }
    };
    Ok(level)
}

fn match_everything(subjects: Vec<Subject>) -> Vec<PolicyRules> {
    vec![PolicyRules {
        subjects,
        resource_rules: vec![ResourceRule {
            verbs: vec!["*".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            cluster_scope: true,
            namespaces: vec!["*".into()],
        }],
        non_resource_rules: vec![NonResourceRule {
            verbs: vec!["*".into()],
            non_resource_urls: vec!["*".into()],
        }],
    }]
}

fn group(name: &str) -> Subject {
    Subject::Group(name.into())
}

/// kube's `MandatoryFlowSchemaExempt`: `system:masters` to the exempt level, precedence 1.
pub fn mandatory_exempt_flow_schema() -> FlowSchema {
    FlowSchema {
        name: EXEMPT.into(),
        uid: String::new(),
        priority_level: EXEMPT.into(),
        matching_precedence: 1,
        distinguisher: None,
        rules: match_everything(vec![group(SYSTEM_PRIVILEGED_GROUP)]),
    }
}

/// kube's `MandatoryFlowSchemaCatchAll`: everyone to `catch-all`, precedence 10000, by user.
pub fn mandatory_catch_all_flow_schema() -> FlowSchema {
    FlowSchema {
        name: CATCH_ALL.into(),
        uid: String::new(),
        priority_level: CATCH_ALL.into(),
        matching_precedence: 10000,
        distinguisher: Some(Distinguisher::ByUser),
        rules: match_everything(vec![group(ALL_UNAUTHENTICATED), group(ALL_AUTHENTICATED)]),
    }
}

/// kube's `MandatoryPriorityLevelConfigurationExempt`.
pub fn mandatory_exempt_priority_level() -> PriorityLevel {
    PriorityLevel {
        name: EXEMPT.into(),
        uid: String::new(),
        nominal_concurrency_shares: 0,
        lendable_percent: 0,
        borrowing_limit_percent: None,
        behavior: LevelBehavior::Exempt,
    }
}

/// kube's `MandatoryPriorityLevelConfigurationCatchAll`: 5 shares, Reject.
pub fn mandatory_catch_all_priority_level() -> PriorityLevel {
    PriorityLevel {
        name: CATCH_ALL.into(),
        uid: String::new(),
        nominal_concurrency_shares: 5,
        lendable_percent: 0,
        borrowing_limit_percent: None,
        behavior: LevelBehavior::Reject,
    }
}

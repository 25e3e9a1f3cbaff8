//! kube's `pkg/apis/flowcontrol/validation` for `flowcontrol.apiserver.k8s.io/v1` FlowSchemas
//! and PriorityLevelConfigurations, with kube's field paths and messages: matching precedence,
//! subjects, resource and non-resource rules, distinguisher methods, priority-level types,
//! queuing (including the shuffle-sharding entropy limit), borrowing percentages, the fixed
//! specs of the mandatory `exempt` and `catch-all` objects, and status conditions.
//!
//! Objects reach these functions after the strategy has defaulted them and put them in Go's
//! shape (types checked), so a missing field reads as Go's zero value, which is what kube
//! validates. Bad values that are not strings or numbers are printed as Go's `%#v` prints them,
//! as apimachinery's `field.Error` does.

use std::collections::BTreeSet;

use serde_json::Value;

use super::causes::{go_string_slice, index_path, invalid_raw};
use super::flowcontrol_bootstrap::{mandatory_flow_schema, mandatory_priority_level};
use super::{items, str_at};
use crate::machinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use crate::status::{
    field_duplicate, field_forbidden, field_invalid, field_not_supported, field_required,
    StatusCause,
};

/// `flowcontrol.FlowSchemaMaxMatchingPrecedence`.
const MAX_MATCHING_PRECEDENCE: i64 = 10_000;

/// `priorityLevelConfigurationQueuingMaxQueues` (10^7).
const MAX_QUEUES: i64 = 10_000_000;

/// `shufflesharding.MaxHashBits`: the hash bits a hand may consume.
const MAX_HASH_BITS: i64 = 60;

/// The name of the only FlowSchema allowed matching precedence 1, and of the only priority
/// level allowed type `Exempt`.
const EXEMPT: &str = "exempt";

/// The v1beta3 round-trip annotation, which must never reach the internal object.
pub(crate) const PRESERVE_ZERO_SHARES_ANNOTATION: &str =
    "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";

/// `supportedVerbs`, sorted as `sets.String.List()` returns them.
const SUPPORTED_VERBS: [&str; 9] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];

const NS_ERR_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

/// The strings of a list field (Go's zero value, no strings, when unset).
fn strings(value: Option<&Value>) -> Vec<String> {
    items(value)
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect()
}

fn go_strings(values: &[String]) -> String {
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    go_string_slice(&refs)
}

fn has_wildcard(values: &[String]) -> bool {
    values.iter().any(|v| v == "*")
}

/// An int32 field as Go holds it (zero when unset).
fn int_at(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// Whether a pointer-typed (or struct pointer) field is set.
fn is_set(object: &Value, pointer: &str) -> bool {
    object.pointer(pointer).is_some_and(|v| !v.is_null())
}

/// kube's `ValidateFlowSchema` without the metadata checks the registry makes.
pub(crate) fn validate_flow_schema(object: &Value) -> Vec<StatusCause> {
    let name = str_at(object, "/metadata/name");
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let mut causes = validate_flow_schema_spec(name, spec);
    if let Some(mandatory) = mandatory_flow_schema(name) {
        let mut want = mandatory.get("spec").cloned().unwrap_or(Value::Null);
        super::flowcontrol::default_flow_schema_spec(&mut want);
        if !super::flowcontrol::semantically_equal(spec, &want) {
            causes.push(invalid_raw(
                "spec",
                &go_flow_schema_spec(spec),
                &format!("spec of '{name}' must equal the fixed value"),
            ));
        }
    }
    causes.extend(validate_conditions(object));
    causes
}

/// kube's `ValidateFlowSchemaSpec`.
fn validate_flow_schema_spec(name: &str, spec: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let precedence = int_at(spec, "/matchingPrecedence");
    let field = "spec.matchingPrecedence";
    if precedence <= 0 {
        causes.push(invalid_raw(
            field,
            &precedence.to_string(),
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        causes.push(invalid_raw(
            field,
            &precedence.to_string(),
            &format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != EXEMPT {
        causes.push(invalid_raw(
            field,
            "1",
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(method) = spec.get("distinguisherMethod").filter(|m| !m.is_null()) {
        let kind = str_at(method, "/type");
        if kind != "ByNamespace" && kind != "ByUser" {
            causes.push(field_not_supported_raw(
                "spec.distinguisherMethod.type",
                &format!("flowcontrol.FlowDistinguisherMethod{{Type:{kind:?}}}"),
                &["ByNamespace", "ByUser"],
            ));
        }
    }
    let level = str_at(spec, "/priorityLevelConfiguration/name");
    let level_field = "spec.priorityLevelConfiguration.name";
    if level.is_empty() {
        causes.push(field_required(
            level_field,
            "must reference a priority level",
        ));
    } else {
        for message in is_dns1123_subdomain(level) {
            causes.push(field_invalid(level_field, level, &message));
        }
    }
    for (i, rule) in items(spec.get("rules")).iter().enumerate() {
        causes.extend(validate_policy_rules_with_subjects(
            rule,
            &index_path("spec.rules", i),
        ));
    }
    causes
}

/// `field.NotSupported` with a bad value already rendered as Go prints it.
fn field_not_supported_raw(field: &str, rendered: &str, supported: &[&str]) -> StatusCause {
    let quoted: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
    StatusCause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {rendered}: supported values: {}",
            quoted.join(", ")
        ),
        field: field.into(),
    }
}

/// kube's `ValidateFlowSchemaPolicyRulesWithSubjects`.
fn validate_policy_rules_with_subjects(rule: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let subjects = items(rule.get("subjects"));
    if subjects.is_empty() {
        causes.push(field_required(
            &format!("{path}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, subject) in subjects.iter().enumerate() {
        causes.extend(validate_subject(
            subject,
            &index_path(&format!("{path}.subjects"), i),
        ));
    }
    let resource_rules = items(rule.get("resourceRules"));
    let non_resource_rules = items(rule.get("nonResourceRules"));
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        causes.push(field_required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        causes.extend(validate_resource_rule(
            r,
            &index_path(&format!("{path}.resourceRules"), i),
        ));
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        causes.extend(validate_non_resource_rule(
            r,
            &index_path(&format!("{path}.nonResourceRules"), i),
        ));
    }
    causes
}

/// kube's `ValidateFlowSchemaSubject` and the per-kind subject checks.
fn validate_subject(subject: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let forbid_user = |causes: &mut Vec<StatusCause>| {
        if is_set(subject, "/user") {
            causes.push(field_forbidden(
                &format!("{path}.user"),
                "user is forbidden when subject kind is not 'User'",
            ));
        }
    };
    let forbid_group = |causes: &mut Vec<StatusCause>| {
        if is_set(subject, "/group") {
            causes.push(field_forbidden(
                &format!("{path}.group"),
                "group is forbidden when subject kind is not 'Group'",
            ));
        }
    };
    let forbid_sa = |causes: &mut Vec<StatusCause>| {
        if is_set(subject, "/serviceAccount") {
            causes.push(field_forbidden(
                &format!("{path}.serviceAccount"),
                "serviceAccount is forbidden when subject kind is not 'ServiceAccount'",
            ));
        }
    };
    match str_at(subject, "/kind") {
        "ServiceAccount" => {
            causes.extend(validate_service_account_subject(
                subject.get("serviceAccount"),
                &format!("{path}.serviceAccount"),
            ));
            forbid_user(&mut causes);
            forbid_group(&mut causes);
        }
        "User" => {
            causes.extend(validate_named_subject(
                subject.get("user"),
                &format!("{path}.user"),
                "user is required when subject kind is 'User'",
            ));
            forbid_sa(&mut causes);
            forbid_group(&mut causes);
        }
        "Group" => {
            causes.extend(validate_named_subject(
                subject.get("group"),
                &format!("{path}.group"),
                "group is required when subject kind is 'Group'",
            ));
            forbid_sa(&mut causes);
            forbid_user(&mut causes);
        }
        other => causes.push(field_not_supported(
            &format!("{path}.kind"),
            other,
            &["Group", "ServiceAccount", "User"],
        )),
    }
    causes
}

/// `ValidateUserSubject` / `ValidateGroupSubject`.
fn validate_named_subject(subject: Option<&Value>, path: &str, missing: &str) -> Vec<StatusCause> {
    let Some(subject) = subject.filter(|s| !s.is_null()) else {
        return vec![field_required(path, missing)];
    };
    if str_at(subject, "/name").is_empty() {
        return vec![field_required(&format!("{path}.name"), "")];
    }
    Vec::new()
}

/// `ValidateServiceAccountSubject`.
fn validate_service_account_subject(subject: Option<&Value>, path: &str) -> Vec<StatusCause> {
    let Some(subject) = subject.filter(|s| !s.is_null()) else {
        return vec![field_required(
            path,
            "serviceAccount is required when subject kind is 'ServiceAccount'",
        )];
    };
    let mut causes = Vec::new();
    let name = str_at(subject, "/name");
    let name_field = format!("{path}.name");
    if name.is_empty() {
        causes.push(field_required(&name_field, ""));
    } else if name != "*" {
        for message in is_dns1123_subdomain(name) {
            causes.push(field_invalid(&name_field, name, &message));
        }
    }
    let namespace = str_at(subject, "/namespace");
    let namespace_field = format!("{path}.namespace");
    if namespace.is_empty() {
        causes.push(field_required(
            &namespace_field,
            "must specify namespace for service account",
        ));
    } else {
        for message in is_dns1123_label(namespace) {
            causes.push(field_invalid(&namespace_field, namespace, &message));
        }
    }
    causes
}

/// The verb checks both kinds of rule share.
fn validate_verbs(verbs: &[String], path: &str, causes: &mut Vec<StatusCause>) {
    let field = format!("{path}.verbs");
    if verbs.is_empty() {
        causes.push(field_required(
            &field,
            "verbs must contain at least one value",
        ));
    } else if has_wildcard(verbs) {
        if verbs.len() > 1 {
            causes.push(invalid_raw(
                &field,
                &go_strings(verbs),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if verbs.iter().any(|v| !SUPPORTED_VERBS.contains(&v.as_str())) {
        causes.push(field_not_supported_raw(
            &field,
            &go_strings(verbs),
            &SUPPORTED_VERBS,
        ));
    }
}

/// kube's `ValidateFlowSchemaNonResourcePolicyRule`.
fn validate_non_resource_rule(rule: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    validate_verbs(&strings(rule.get("verbs")), path, &mut causes);
    let urls = strings(rule.get("nonResourceURLs"));
    let field = format!("{path}.nonResourceURLs");
    if urls.is_empty() {
        causes.push(field_required(
            &field,
            "nonResourceURLs must contain at least one value",
        ));
    } else if has_wildcard(&urls) {
        if urls.len() > 1 {
            causes.push(invalid_raw(
                &field,
                &go_strings(&urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, url) in urls.iter().enumerate() {
            if let Some(cause) = validate_non_resource_url_path(url, &index_path(&field, i)) {
                causes.push(cause);
            }
        }
    }
    causes
}

/// kube's `ValidateNonResourceURLPath`: a leading slash, no white space, no double slash,
/// and `*` only as a `/*` suffix.
pub(crate) fn validate_non_resource_url_path(path: &str, field: &str) -> Option<StatusCause> {
    let bad = |detail: &str| Some(field_invalid(field, path, detail));
    if path.is_empty() {
        return bad("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        return bad("must start with slash");
    }
    if path.contains(' ') {
        return bad("must not contain white-space");
    }
    if path.contains("//") {
        return bad("must not contain double slash");
    }
    let wildcards = path.matches('*').count();
    if wildcards > 1 || (wildcards == 1 && !path.ends_with("/*")) {
        return bad("wildcard can only do suffix matching");
    }
    None
}

/// kube's `ValidateFlowSchemaResourcePolicyRule`.
fn validate_resource_rule(rule: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    validate_verbs(&strings(rule.get("verbs")), path, &mut causes);
    for (key, required, wildcard) in [
        (
            "apiGroups",
            "resource rules must supply at least one api group",
            "if '*' is present, must not specify other api groups",
        ),
        (
            "resources",
            "resource rules must supply at least one resource",
            "if '*' is present, must not specify other resources",
        ),
    ] {
        let values = strings(rule.get(key));
        let field = format!("{path}.{key}");
        if values.is_empty() {
            causes.push(field_required(&field, required));
        } else if values.len() > 1 && has_wildcard(&values) {
            causes.push(invalid_raw(&field, &go_strings(&values), wildcard));
        }
    }
    let namespaces = strings(rule.get("namespaces"));
    let cluster_scope = rule
        .get("clusterScope")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let field = format!("{path}.namespaces");
    if namespaces.is_empty() && !cluster_scope {
        causes.push(field_required(
            &field,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if has_wildcard(&namespaces) {
        if namespaces.len() > 1 {
            causes.push(invalid_raw(
                &field,
                &go_strings(&namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, namespace) in namespaces.iter().enumerate() {
            for message in is_dns1123_label(namespace) {
                causes.push(field_invalid(
                    &index_path(&field, i),
                    namespace,
                    &format!("{NS_ERR_INTRO}{message}"),
                ));
            }
        }
    }
    causes
}

/// kube's `ValidateFlowSchemaStatus` / `ValidatePriorityLevelConfigurationStatus` (they are the
/// same): condition types are required and unique.
fn validate_conditions(object: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, condition) in items(object.pointer("/status/conditions"))
        .iter()
        .enumerate()
    {
        let path = index_path("status.conditions", i);
        let kind = str_at(condition, "/type");
        if !seen.insert(kind.to_string()) {
            causes.push(field_duplicate(&format!("{path}.type"), kind));
        }
        if kind.is_empty() {
            causes.push(field_required(&format!("{path}.type"), "must not be empty"));
        }
    }
    causes
}

/// kube's `ValidatePriorityLevelConfiguration` without the metadata checks the registry makes,
/// as it runs for a v1 request (zero nominal concurrency shares allowed).
pub(crate) fn validate_priority_level(object: &Value) -> Vec<StatusCause> {
    let name = str_at(object, "/metadata/name");
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let mut causes = Vec::new();
    // The v1beta3 round-trip annotation is for conversions only; a v1 object keeps it.
    let annotated = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(PRESERVE_ZERO_SHARES_ANNOTATION));
    if annotated {
        causes.push(field_forbidden(
            "metadata.annotations",
            &format!("annotation '{PRESERVE_ZERO_SHARES_ANNOTATION}' is forbidden"),
        ));
    }
    causes.extend(validate_priority_level_spec(name, spec));
    causes.extend(validate_mandatory_priority_level(name, spec));
    causes.extend(validate_conditions(object));
    causes
}

/// kube's `ValidateIfMandatoryPriorityLevelConfigurationObject`: the `catch-all` spec is fixed;
/// in `exempt` only `spec.exempt` may change.
fn validate_mandatory_priority_level(name: &str, spec: &Value) -> Vec<StatusCause> {
    let Some(mandatory) = mandatory_priority_level(name) else {
        return Vec::new();
    };
    let mut want = mandatory.get("spec").cloned().unwrap_or(Value::Null);
    super::flowcontrol::default_priority_level_spec(&mut want);
    let mut have = spec.clone();
    let message = if name == EXEMPT {
        if let (Some(have), Some(exempt)) = (have.as_object_mut(), want.get("exempt")) {
            have.insert("exempt".into(), exempt.clone());
        }
        format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value")
    } else {
        format!("spec of '{name}' must equal the fixed value")
    };
    if super::flowcontrol::semantically_equal(&have, &want) {
        return Vec::new();
    }
    vec![invalid_raw("spec", &go_priority_level_spec(spec), &message)]
}

/// kube's `ValidatePriorityLevelConfigurationSpec`.
fn validate_priority_level_spec(name: &str, spec: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let kind = str_at(spec, "/type");
    if (name == EXEMPT) != (kind == "Exempt") {
        causes.push(field_invalid(
            "spec.type",
            kind,
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match kind {
        "Exempt" => {
            if is_set(spec, "/limited") {
                causes.push(field_forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = spec.get("exempt").filter(|e| !e.is_null()) {
                causes.extend(validate_exempt(exempt));
            }
        }
        "Limited" => {
            if is_set(spec, "/exempt") {
                causes.push(field_forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match spec.get("limited").filter(|l| !l.is_null()) {
                None => causes.push(field_required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
                Some(limited) => causes.extend(validate_limited(limited)),
            }
        }
        other => causes.push(field_not_supported(
            "spec.type",
            other,
            &["Exempt", "Limited"],
        )),
    }
    causes
}

/// `lendablePercent` when set must be 0..=100.
fn check_lendable(object: &Value, field: &str, causes: &mut Vec<StatusCause>) {
    if let Some(percent) = object.get("lendablePercent").and_then(Value::as_i64) {
        if !(0..=100).contains(&percent) {
            causes.push(invalid_raw(
                field,
                &percent.to_string(),
                "must be between 0 and 100, inclusive",
            ));
        }
    }
}

/// kube's `ValidateExemptPriorityLevelConfiguration`.
fn validate_exempt(exempt: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if let Some(shares) = exempt
        .get("nominalConcurrencyShares")
        .and_then(Value::as_i64)
    {
        if shares < 0 {
            causes.push(invalid_raw(
                "spec.exempt.nominalConcurrencyShares",
                &shares.to_string(),
                "must be a non-negative integer",
            ));
        }
    }
    check_lendable(exempt, "spec.exempt.lendablePercent", &mut causes);
    causes
}

/// kube's `ValidateLimitedPriorityLevelConfiguration` with zero shares allowed (the
/// `ZeroLimitedNominalConcurrencyShares` behaviour, always on since 1.30).
fn validate_limited(limited: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let shares = int_at(limited, "/nominalConcurrencyShares");
    if shares < 0 {
        causes.push(invalid_raw(
            "spec.limited.nominalConcurrencyShares",
            &shares.to_string(),
            "must be a non-negative integer",
        ));
    }
    causes.extend(validate_limit_response(
        limited.get("limitResponse").unwrap_or(&Value::Null),
    ));
    check_lendable(limited, "spec.limited.lendablePercent", &mut causes);
    if let Some(limit) = limited.get("borrowingLimitPercent").and_then(Value::as_i64) {
        if limit < 0 {
            causes.push(invalid_raw(
                "spec.limited.borrowingLimitPercent",
                &limit.to_string(),
                "if specified, must be a non-negative integer",
            ));
        }
    }
    causes
}

/// kube's `ValidateLimitResponse`.
fn validate_limit_response(response: &Value) -> Vec<StatusCause> {
    let path = "spec.limited.limitResponse";
    let queuing = response.get("queuing").filter(|q| !q.is_null());
    match str_at(response, "/type") {
        "Reject" => match queuing {
            Some(_) => vec![field_forbidden(
                &format!("{path}.queuing"),
                "must be nil if limited.limitResponse.type is not Limited",
            )],
            None => Vec::new(),
        },
        "Queue" => match queuing {
            None => vec![field_required(
                &format!("{path}.queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )],
            Some(q) => validate_queuing(q, &format!("{path}.queuing")),
        },
        other => vec![field_not_supported(
            &format!("{path}.type"),
            other,
            &["Queue", "Reject"],
        )],
    }
}

/// `shufflesharding.RequiredEntropyBits`: `ceil(log2(deckSize) * handSize)`.
pub(crate) fn required_entropy_bits(deck_size: i64, hand_size: i64) -> i64 {
    ((deck_size as f64).log2() * hand_size as f64).ceil() as i64
}

/// kube's `ValidatePriorityLevelQueuingConfiguration`.
fn validate_queuing(queuing: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let limit = int_at(queuing, "/queueLengthLimit");
    if limit <= 0 {
        causes.push(invalid_raw(
            &format!("{path}.queueLengthLimit"),
            &limit.to_string(),
            "must be positive",
        ));
    }
    let queues = int_at(queuing, "/queues");
    let queues_field = format!("{path}.queues");
    if queues <= 0 {
        causes.push(invalid_raw(
            &queues_field,
            &queues.to_string(),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        causes.push(invalid_raw(
            &queues_field,
            &queues.to_string(),
            &format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = int_at(queuing, "/handSize");
    let hand_field = format!("{path}.handSize");
    if hand <= 0 {
        causes.push(invalid_raw(
            &hand_field,
            &hand.to_string(),
            "must be positive",
        ));
    } else if hand > queues {
        causes.push(invalid_raw(
            &hand_field,
            &hand.to_string(),
            &format!("should not be greater than queues ({queues})"),
        ));
    } else if required_entropy_bits(queues, hand) > MAX_HASH_BITS {
        causes.push(invalid_raw(
            &hand_field,
            &hand.to_string(),
            &format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
    causes
}

// ---------------------------------------------------------------------------------------------
// Go's `%#v` of the internal specs, the bad value of the mandatory-spec errors. Nested
// pointers are shown by value (`&flowcontrol.T{...}`) rather than as Go's memory addresses,
// which would tell a reader nothing.
// ---------------------------------------------------------------------------------------------

fn go_str(value: &Value, pointer: &str) -> String {
    format!("{:?}", str_at(value, pointer))
}

fn go_list(value: &Value, key: &str) -> String {
    match value.get(key) {
        None | Some(Value::Null) => "[]string(nil)".into(),
        Some(list) => go_strings(&strings(Some(list))),
    }
}

fn go_int_ptr(value: &Value, key: &str) -> String {
    match value.get(key).and_then(Value::as_i64) {
        Some(n) => format!("&{n}"),
        None => "(*int32)(nil)".into(),
    }
}

fn go_struct_ptr(value: &Value, key: &str, ty: &str, render: impl Fn(&Value) -> String) -> String {
    match value.get(key).filter(|v| !v.is_null()) {
        Some(inner) => format!("&{}", render(inner)),
        None => format!("(*flowcontrol.{ty})(nil)"),
    }
}

fn go_slice(value: &Value, key: &str, ty: &str, render: impl Fn(&Value) -> String) -> String {
    match value.get(key) {
        None | Some(Value::Null) => format!("[]flowcontrol.{ty}(nil)"),
        Some(list) => {
            let rendered: Vec<String> = items(Some(list)).iter().map(render).collect();
            format!("[]flowcontrol.{ty}{{{}}}", rendered.join(", "))
        }
    }
}

fn go_flow_schema_spec(spec: &Value) -> String {
    let subject = |s: &Value| {
        format!(
            "flowcontrol.Subject{{Kind:{}, User:{}, Group:{}, ServiceAccount:{}}}",
            go_str(s, "/kind"),
            go_struct_ptr(s, "user", "UserSubject", |u| format!(
                "flowcontrol.UserSubject{{Name:{}}}",
                go_str(u, "/name")
            )),
            go_struct_ptr(s, "group", "GroupSubject", |g| format!(
                "flowcontrol.GroupSubject{{Name:{}}}",
                go_str(g, "/name")
            )),
            go_struct_ptr(s, "serviceAccount", "ServiceAccountSubject", |a| format!(
                "flowcontrol.ServiceAccountSubject{{Namespace:{}, Name:{}}}",
                go_str(a, "/namespace"),
                go_str(a, "/name")
            )),
        )
    };
    let resource_rule = |r: &Value| {
        format!(
            "flowcontrol.ResourcePolicyRule{{Verbs:{}, APIGroups:{}, Resources:{}, ClusterScope:{}, Namespaces:{}}}",
            go_list(r, "verbs"),
            go_list(r, "apiGroups"),
            go_list(r, "resources"),
            r.get("clusterScope").and_then(Value::as_bool).unwrap_or(false),
            go_list(r, "namespaces"),
        )
    };
    let non_resource_rule = |r: &Value| {
        format!(
            "flowcontrol.NonResourcePolicyRule{{Verbs:{}, NonResourceURLs:{}}}",
            go_list(r, "verbs"),
            go_list(r, "nonResourceURLs"),
        )
    };
    let rule = |r: &Value| {
        format!(
            "flowcontrol.PolicyRulesWithSubjects{{Subjects:{}, ResourceRules:{}, NonResourceRules:{}}}",
            go_slice(r, "subjects", "Subject", subject),
            go_slice(r, "resourceRules", "ResourcePolicyRule", resource_rule),
            go_slice(r, "nonResourceRules", "NonResourcePolicyRule", non_resource_rule),
        )
    };
    format!(
        "flowcontrol.FlowSchemaSpec{{PriorityLevelConfiguration:flowcontrol.PriorityLevelConfigurationReference{{Name:{}}}, MatchingPrecedence:{}, DistinguisherMethod:{}, Rules:{}}}",
        go_str(spec, "/priorityLevelConfiguration/name"),
        int_at(spec, "/matchingPrecedence"),
        go_struct_ptr(spec, "distinguisherMethod", "FlowDistinguisherMethod", |m| format!(
            "flowcontrol.FlowDistinguisherMethod{{Type:{}}}",
            go_str(m, "/type")
        )),
        go_slice(spec, "rules", "PolicyRulesWithSubjects", rule),
    )
}

fn go_priority_level_spec(spec: &Value) -> String {
    let limited = |l: &Value| {
        let response = l.get("limitResponse").unwrap_or(&Value::Null);
        format!(
            "flowcontrol.LimitedPriorityLevelConfiguration{{NominalConcurrencyShares:{}, LimitResponse:flowcontrol.LimitResponse{{Type:{}, Queuing:{}}}, LendablePercent:{}, BorrowingLimitPercent:{}}}",
            int_at(l, "/nominalConcurrencyShares"),
            go_str(response, "/type"),
            go_struct_ptr(response, "queuing", "QueuingConfiguration", |q| format!(
                "flowcontrol.QueuingConfiguration{{Queues:{}, HandSize:{}, QueueLengthLimit:{}}}",
                int_at(q, "/queues"),
                int_at(q, "/handSize"),
                int_at(q, "/queueLengthLimit")
            )),
            go_int_ptr(l, "lendablePercent"),
            go_int_ptr(l, "borrowingLimitPercent"),
        )
    };
    format!(
        "flowcontrol.PriorityLevelConfigurationSpec{{Type:{}, Limited:{}, Exempt:{}}}",
        go_str(spec, "/type"),
        go_struct_ptr(
            spec,
            "limited",
            "LimitedPriorityLevelConfiguration",
            limited
        ),
        go_struct_ptr(spec, "exempt", "ExemptPriorityLevelConfiguration", |e| {
            format!(
            "flowcontrol.ExemptPriorityLevelConfiguration{{NominalConcurrencyShares:{}, LendablePercent:{}}}",
            go_int_ptr(e, "nominalConcurrencyShares"),
            go_int_ptr(e, "lendablePercent")
        )
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fs(name: &str, spec: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": spec})
    }

    fn user_rule() -> Value {
        json!({"subjects": [{"kind": "User", "user": {"name": "noxu"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "namespaces": ["*"]}]})
    }

    fn messages(causes: &[StatusCause]) -> Vec<(String, String)> {
        causes
            .iter()
            .map(|c| (c.field.clone(), c.message.clone()))
            .collect()
    }

    #[test]
    fn flow_schema_spec_checks() {
        let ok = fs(
            "system-foo",
            json!({"matchingPrecedence": 50, "priorityLevelConfiguration": {"name": "system-bar"},
                "rules": [user_rule()]}),
        );
        assert!(validate_flow_schema(&ok).is_empty());

        let mut high = ok.clone();
        high["spec"]["matchingPrecedence"] = json!(10001);
        assert_eq!(
            messages(&validate_flow_schema(&high)),
            [(
                "spec.matchingPrecedence".to_string(),
                "Invalid value: 10001: must not be greater than 10000".to_string()
            )]
        );
        let mut one = ok.clone();
        one["spec"]["matchingPrecedence"] = json!(1);
        assert_eq!(
            validate_flow_schema(&one)[0].message,
            "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"
        );

        let mut bad = ok.clone();
        bad["spec"]["distinguisherMethod"] = json!({"type": "ByFoo"});
        bad["spec"]["priorityLevelConfiguration"]["name"] = json!("");
        bad["spec"]["rules"][0]["resourceRules"][0]["namespaces"] = json!(["foo", "*"]);
        bad["spec"]["rules"][0]["resourceRules"][0]["verbs"] = json!(["get", "jump"]);
        assert_eq!(
            messages(&validate_flow_schema(&bad)),
            [
                (
                    "spec.distinguisherMethod.type".to_string(),
                    "Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:\"ByFoo\"}: supported values: \"ByNamespace\", \"ByUser\"".to_string()
                ),
                (
                    "spec.priorityLevelConfiguration.name".to_string(),
                    "Required value: must reference a priority level".to_string()
                ),
                (
                    "spec.rules[0].resourceRules[0].verbs".to_string(),
                    "Unsupported value: []string{\"get\", \"jump\"}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"".to_string()
                ),
                (
                    "spec.rules[0].resourceRules[0].namespaces".to_string(),
                    "Invalid value: []string{\"foo\", \"*\"}: if '*' is present, must not specify other namespaces".to_string()
                ),
            ]
        );
    }

    #[test]
    fn subjects_and_rules() {
        let spec = json!({"matchingPrecedence": 50, "priorityLevelConfiguration": {"name": "x"},
        "rules": [{"subjects": [
            {"kind": "ServiceAccount", "user": {"name": "u"}},
            {"kind": "Group", "group": {"name": ""}},
            {"kind": "Robot"},
            {"kind": "ServiceAccount", "serviceAccount": {"name": "*", "namespace": ""}},
        ]}]});
        assert_eq!(
            messages(&validate_flow_schema(&fs("x", spec))),
            [
                (
                    "spec.rules[0].subjects[0].serviceAccount".to_string(),
                    "Required value: serviceAccount is required when subject kind is 'ServiceAccount'".to_string()
                ),
                (
                    "spec.rules[0].subjects[0].user".to_string(),
                    "Forbidden: user is forbidden when subject kind is not 'User'".to_string()
                ),
                (
                    "spec.rules[0].subjects[1].group.name".to_string(),
                    "Required value".to_string()
                ),
                (
                    "spec.rules[0].subjects[2].kind".to_string(),
                    "Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\"".to_string()
                ),
                (
                    "spec.rules[0].subjects[3].serviceAccount.namespace".to_string(),
                    "Required value: must specify namespace for service account".to_string()
                ),
                (
                    "spec.rules[0]".to_string(),
                    "Required value: at least one of resourceRules and nonResourceRules has to be non-empty".to_string()
                ),
            ]
        );

        let rule = json!({"verbs": ["*", "get"], "apiGroups": [], "resources": ["*", "pods"]});
        assert_eq!(
            messages(&validate_resource_rule(&rule, "r")),
            [
                (
                    "r.verbs".to_string(),
                    "Invalid value: []string{\"*\", \"get\"}: if '*' is present, must not specify other verbs".to_string()
                ),
                (
                    "r.apiGroups".to_string(),
                    "Required value: resource rules must supply at least one api group".to_string()
                ),
                (
                    "r.resources".to_string(),
                    "Invalid value: []string{\"*\", \"pods\"}: if '*' is present, must not specify other resources".to_string()
                ),
                (
                    "r.namespaces".to_string(),
                    "Required value: resource rules that are not cluster scoped must supply at least one namespace".to_string()
                ),
            ]
        );
        let rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
            "namespaces": ["-foo"]});
        assert!(validate_resource_rule(&rule, "r")[0]
            .message
            .starts_with("Invalid value: \"-foo\": each member of this list must be '*' or a DNS-1123 label; a lowercase RFC 1123 label"));
        let rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"],
            "clusterScope": true});
        assert!(validate_resource_rule(&rule, "r").is_empty());
    }

    #[test]
    fn non_resource_url_paths() {
        for (path, ok) in [
            ("", false),
            ("foo", false),
            ("/", true),
            ("//", false),
            ("/foo", true),
            ("/////", false),
            ("/apis/", true),
            ("/healthz/*", true),
            ("/healthz/*/foo", false),
            ("/healthz/foo bar", false),
            ("/health*", false),
            ("/health*/foo", false),
            ("/*/*", false),
        ] {
            assert_eq!(
                validate_non_resource_url_path(path, "p").is_none(),
                ok,
                "{path}"
            );
        }
        let rule = json!({"verbs": ["get"], "nonResourceURLs": ["*", "/x"]});
        assert_eq!(
            validate_non_resource_rule(&rule, "n")[0].message,
            "Invalid value: []string{\"*\", \"/x\"}: if '*' is present, must not specify other non-resource URLs"
        );
    }

    #[test]
    fn mandatory_flow_schemas_are_fixed() {
        let mut catch_all = mandatory_flow_schema("catch-all").unwrap_or(Value::Null);
        super::super::flowcontrol::default_flow_schema_spec(&mut catch_all["spec"]);
        assert!(validate_flow_schema(&catch_all).is_empty());
        catch_all["spec"]["matchingPrecedence"] = json!(9999);
        let causes = validate_flow_schema(&catch_all);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec");
        assert!(causes[0]
            .message
            .starts_with("Invalid value: flowcontrol.FlowSchemaSpec{PriorityLevelConfiguration:flowcontrol.PriorityLevelConfigurationReference{Name:\"catch-all\"}, MatchingPrecedence:9999"));
        assert!(causes[0]
            .message
            .ends_with(": spec of 'catch-all' must equal the fixed value"));
    }

    fn pl(name: &str, spec: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn priority_level_checks() {
        let reject = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 42,
            "lendablePercent": 0, "limitResponse": {"type": "Reject"}}});
        assert!(validate_priority_level(&pl("max-in-flight", reject.clone())).is_empty());

        // The exempt level: type fixed, only spec.exempt may change.
        assert_eq!(
            messages(&validate_priority_level(&pl("exempt", reject.clone()))),
            [
                (
                    "spec.type".to_string(),
                    "Invalid value: \"Limited\": type must be 'Exempt' if and only if name is 'exempt'".to_string()
                ),
                (
                    "spec".to_string(),
                    "Invalid value: flowcontrol.PriorityLevelConfigurationSpec{Type:\"Limited\", Limited:&flowcontrol.LimitedPriorityLevelConfiguration{NominalConcurrencyShares:42, LimitResponse:flowcontrol.LimitResponse{Type:\"Reject\", Queuing:(*flowcontrol.QueuingConfiguration)(nil)}, LendablePercent:&0, BorrowingLimitPercent:(*int32)(nil)}, Exempt:(*flowcontrol.ExemptPriorityLevelConfiguration)(nil)}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value".to_string()
                ),
            ]
        );
        let tweaked = json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 10,
            "lendablePercent": 10}});
        assert!(validate_priority_level(&pl("exempt", tweaked)).is_empty());
        let bad_exempt = json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": -1,
            "lendablePercent": 101}});
        assert_eq!(
            messages(&validate_priority_level(&pl("exempt", bad_exempt))),
            [
                (
                    "spec.exempt.nominalConcurrencyShares".to_string(),
                    "Invalid value: -1: must be a non-negative integer".to_string()
                ),
                (
                    "spec.exempt.lendablePercent".to_string(),
                    "Invalid value: 101: must be between 0 and 100, inclusive".to_string()
                ),
            ]
        );

        // catch-all is fixed entirely.
        let causes = validate_priority_level(&pl("catch-all", reject));
        assert_eq!(causes.len(), 1);
        assert!(causes[0]
            .message
            .ends_with("spec of 'catch-all' must equal the fixed value"));
        let fixed = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
            "lendablePercent": 0, "limitResponse": {"type": "Reject"}}});
        assert!(validate_priority_level(&pl("catch-all", fixed)).is_empty());

        let both = json!({"type": "Limited", "exempt": {}});
        assert_eq!(
            messages(&validate_priority_level(&pl("broken", both))),
            [
                (
                    "spec.exempt".to_string(),
                    "Forbidden: must be nil if the type is Limited".to_string()
                ),
                (
                    "spec.limited".to_string(),
                    "Required value: must not be empty when type is Limited".to_string()
                ),
            ]
        );
        let odd = json!({"type": "Sometimes"});
        assert_eq!(
            validate_priority_level(&pl("odd", odd))[0].message,
            "Unsupported value: \"Sometimes\": supported values: \"Exempt\", \"Limited\""
        );
    }

    #[test]
    fn queuing_and_borrowing() {
        let level = |queuing: Value| {
            pl(
                "system-foo",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 100,
                    "limitResponse": {"type": "Queue", "queuing": queuing}}}),
            )
        };
        let check = |queuing: Value| messages(&validate_priority_level(&level(queuing)));
        let field = "spec.limited.limitResponse.queuing.handSize".to_string();
        assert!(check(json!({"queues": 512, "handSize": 4, "queueLengthLimit": 100})).is_empty());
        assert_eq!(
            check(json!({"queues": 512, "handSize": 8, "queueLengthLimit": 100})),
            [(
                field.clone(),
                "Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 should not be greater than 60".to_string()
            )]
        );
        assert_eq!(
            check(json!({"queues": 128, "handSize": 10, "queueLengthLimit": 100}))[0].1,
            "Invalid value: 10: required entropy bits of deckSize 128 and handSize 10 should not be greater than 60"
        );
        assert_eq!(
            check(json!({"queues": 2147483647, "handSize": 3, "queueLengthLimit": 100})),
            [
                (
                    "spec.limited.limitResponse.queuing.queues".to_string(),
                    "Invalid value: 2147483647: must not be greater than 10000000".to_string()
                ),
                (
                    field.clone(),
                    "Invalid value: 3: required entropy bits of deckSize 2147483647 and handSize 3 should not be greater than 60".to_string()
                ),
            ]
        );
        assert!(
            check(json!({"queues": 10_000_000, "handSize": 2, "queueLengthLimit": 100})).is_empty()
        );
        assert_eq!(
            check(json!({"queues": 7, "handSize": 8, "queueLengthLimit": 100})),
            [(
                field,
                "Invalid value: 8: should not be greater than queues (7)".to_string()
            )]
        );

        let mut missing = level(Value::Null);
        assert_eq!(
            validate_priority_level(&missing)[0].message,
            "Required value: must not be empty if limited.limitResponse.type is Limited"
        );
        missing["spec"]["limited"]["limitResponse"] =
            json!({"type": "Reject", "queuing": {"queues": 1}});
        missing["spec"]["limited"]["lendablePercent"] = json!(-1);
        missing["spec"]["limited"]["borrowingLimitPercent"] = json!(-1);
        missing["spec"]["limited"]["nominalConcurrencyShares"] = json!(0);
        assert_eq!(
            messages(&validate_priority_level(&missing)),
            [
                (
                    "spec.limited.limitResponse.queuing".to_string(),
                    "Forbidden: must be nil if limited.limitResponse.type is not Limited"
                        .to_string()
                ),
                (
                    "spec.limited.lendablePercent".to_string(),
                    "Invalid value: -1: must be between 0 and 100, inclusive".to_string()
                ),
                (
                    "spec.limited.borrowingLimitPercent".to_string(),
                    "Invalid value: -1: if specified, must be a non-negative integer".to_string()
                ),
            ]
        );
    }

    #[test]
    fn round_trip_annotation_and_conditions() {
        let mut object = pl(
            "p",
            json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "limitResponse": {"type": "Reject"}}}),
        );
        object["metadata"]["annotations"] = json!({PRESERVE_ZERO_SHARES_ANNOTATION: ""});
        object["status"] = json!({"conditions": [{"type": "A"}, {"type": "A"}, {"type": ""}]});
        assert_eq!(
            messages(&validate_priority_level(&object)),
            [
                (
                    "metadata.annotations".to_string(),
                    format!(
                        "Forbidden: annotation '{PRESERVE_ZERO_SHARES_ANNOTATION}' is forbidden"
                    )
                ),
                (
                    "status.conditions[1].type".to_string(),
                    "Duplicate value: \"A\"".to_string()
                ),
                (
                    "status.conditions[2].type".to_string(),
                    "Required value: must not be empty".to_string()
                ),
            ]
        );
    }

    #[test]
    fn entropy_matches_shufflesharding() {
        assert_eq!(required_entropy_bits(64, 8), 48);
        assert_eq!(required_entropy_bits(128, 6), 42);
        assert_eq!(required_entropy_bits(10_000_000, 2), 47);
    }
}

//! The `authorization.k8s.io/v1` review resources, as kube-apiserver serves them (kube's
//! `pkg/registry/authorization/*`): computed answers to a create, never stored, `create` the
//! only verb. Each asks the gateway's [`Authorizer`] chain.
//!
//! - `subjectaccessreviews`: may this user (`spec.user`, `groups`, `uid`, `extra`) do this?
//! - `localsubjectaccessreviews` (namespaced): the same, limited to the request's namespace.
//! - `selfsubjectaccessreviews`: may *I* do this? (`kubectl auth can-i`); the identity is the
//!   request's, after impersonation, never anything in the body.
//! - `selfsubjectrulesreviews`: what may I do in this namespace? (`kubectl auth can-i
//!   --list`), answered from [`Authorizer::rules_for`].
//!
//! Bodies are decoded with Go's type rules (a wrong JSON type is a 400), validated as kube's
//! `pkg/apis/authorization/validation` does (a 422 with kube's paths and messages), and the
//! answer is the request object with `status` filled in (a new object for the rules review),
//! written with Go's field order and `omitempty` rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubegate_policy::authz::{NonResourceRule, ResourceRule, RulesInfo};
use kubegate_policy::{Attributes, Authorizer, Decision, RequestInfo, UserInfo};
use serde_json::{json, Map, Value};

use super::causes::{index_path, invalid_raw};
use super::gojson::{go_json, GoJson};
use super::rbac_validation::validate_label_selector_requirement;
use super::{base_def, Names};
use crate::api::ApiRequest;
use crate::machinery::selectors::{
    escape_field_value, FieldSelector, LabelOperator, LabelRequirement, LabelSelector,
};
use crate::resource::{DefaultStrategy, ResourceDef, VirtualHandler};
use crate::status::{
    field_forbidden, field_invalid, field_required, ApiError, ApiResult, StatusCause,
};

const GROUP: &str = "authorization.k8s.io";
const API_VERSION: &str = "authorization.k8s.io/v1";

/// The `subjectaccessreviews` resource.
pub fn subjectaccessreviews_def(authorizer: Arc<dyn Authorizer>) -> ResourceDef {
    access_review_def(Review::Subject, authorizer)
}

/// The `localsubjectaccessreviews` resource (namespaced).
pub fn localsubjectaccessreviews_def(authorizer: Arc<dyn Authorizer>) -> ResourceDef {
    access_review_def(Review::Local, authorizer)
}

/// The `selfsubjectaccessreviews` resource.
pub fn selfsubjectaccessreviews_def(authorizer: Arc<dyn Authorizer>) -> ResourceDef {
    access_review_def(Review::SelfAccess, authorizer)
}

/// The `selfsubjectrulesreviews` resource.
pub fn selfsubjectrulesreviews_def(authorizer: Arc<dyn Authorizer>) -> ResourceDef {
    let mut def = virtual_def(Names {
        group: GROUP,
        version: "v1",
        plural: "selfsubjectrulesreviews",
        singular: "selfsubjectrulesreview",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
        definition: "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
    });
    def.virtual_handler = Some(Arc::new(RulesReviewHandler { authorizer }));
    def
}

/// All four review resources, in the order discovery lists them.
pub fn access_review_defs(authorizer: Arc<dyn Authorizer>) -> Vec<ResourceDef> {
    vec![
        localsubjectaccessreviews_def(authorizer.clone()),
        selfsubjectaccessreviews_def(authorizer.clone()),
        selfsubjectrulesreviews_def(authorizer.clone()),
        subjectaccessreviews_def(authorizer),
    ]
}

/// A create-only resource that is never stored.
fn virtual_def(names: Names) -> ResourceDef {
    let mut def = base_def(names, Arc::new(DefaultStrategy));
    def.verbs = vec!["create"];
    def
}

fn access_review_def(review: Review, authorizer: Arc<dyn Authorizer>) -> ResourceDef {
    let mut def = virtual_def(review.names());
    def.virtual_handler = Some(Arc::new(AccessReviewHandler { review, authorizer }));
    def
}

/// Which of the three access reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Review {
    Subject,
    Local,
    SelfAccess,
}

impl Review {
    fn kind(self) -> &'static str {
        match self {
            Review::Subject => "SubjectAccessReview",
            Review::Local => "LocalSubjectAccessReview",
            Review::SelfAccess => "SelfSubjectAccessReview",
        }
    }

    fn names(self) -> Names {
        let (plural, singular, definition) = match self {
            Review::Subject => (
                "subjectaccessreviews",
                "subjectaccessreview",
                "io.k8s.api.authorization.v1.SubjectAccessReview",
            ),
            Review::Local => (
                "localsubjectaccessreviews",
                "localsubjectaccessreview",
                "io.k8s.api.authorization.v1.LocalSubjectAccessReview",
            ),
            Review::SelfAccess => (
                "selfsubjectaccessreviews",
                "selfsubjectaccessreview",
                "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
            ),
        };
        Names {
            group: GROUP,
            version: "v1",
            plural,
            singular,
            kind: self.kind(),
            namespaced: self == Review::Local,
            definition,
        }
    }

    /// The Go struct of `spec`.
    fn spec_struct(self) -> &'static str {
        match self {
            Review::SelfAccess => "SelfSubjectAccessReviewSpec",
            _ => "SubjectAccessReviewSpec",
        }
    }
}

/// The `fieldSelector` and `labelSelector` a webhook's review carries for a request's raw
/// selectors, as kube's webhook authorizer builds them (`resourceAttributesFrom`): equality
/// and `in` as `In`, inequality and `notin` as `NotIn`, `Exists`/`DoesNotExist`; other
/// operators (`>`, `<`) dropped, as requirements only narrow; nothing for a selector that does
/// not parse or leaves no requirement.
pub fn webhook_selector_attributes(field: &str, label: &str) -> (Option<Value>, Option<Value>) {
    let wrap = |requirements: Vec<Value>| {
        (!requirements.is_empty()).then(|| json!({ "requirements": requirements }))
    };
    let field = (!field.is_empty())
        .then(|| FieldSelector::parse(field).ok())
        .flatten()
        .map(|selector| {
            selector
                .requirements()
                .iter()
                .map(|r| {
                    let operator = if r.equal { "In" } else { "NotIn" };
                    json!({"key": r.field, "operator": operator, "values": [r.value]})
                })
                .collect::<Vec<_>>()
        })
        .and_then(wrap);
    let label = (!label.is_empty())
        .then(|| LabelSelector::parse(label).ok())
        .flatten()
        .map(|selector| {
            selector
                .requirements()
                .iter()
                .filter_map(|r| {
                    let operator = match r.operator() {
                        LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::In => {
                            "In"
                        }
                        LabelOperator::NotEquals | LabelOperator::NotIn => "NotIn",
                        LabelOperator::Exists => "Exists",
                        LabelOperator::DoesNotExist => "DoesNotExist",
                        LabelOperator::GreaterThan | LabelOperator::LessThan => return None,
                    };
                    let mut requirement = json!({"key": r.key(), "operator": operator});
                    if !r.values().is_empty() {
                        requirement["values"] = json!(r.values());
                    }
                    Some(requirement)
                })
                .collect::<Vec<_>>()
        })
        .and_then(wrap);
    (field, label)
}

/// One selector requirement (`metav1.LabelSelectorRequirement` or
/// `metav1.FieldSelectorRequirement`, which have the same fields).
#[derive(Debug, Clone, Default)]
struct Requirement {
    key: String,
    operator: String,
    values: Vec<String>,
}

/// `LabelSelectorAttributes` or `FieldSelectorAttributes`.
#[derive(Debug, Clone, Default)]
struct SelectorAttributes {
    raw: String,
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, Default)]
struct ResourceAttributes {
    namespace: String,
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    name: String,
    field_selector: Option<SelectorAttributes>,
    label_selector: Option<SelectorAttributes>,
}

#[derive(Debug, Clone, Default)]
struct NonResourceAttributes {
    path: String,
    verb: String,
}

/// A decoded `SubjectAccessReviewSpec` (the user fields stay empty for the self review,
/// whose spec has none).
#[derive(Debug, Clone, Default)]
struct AccessReviewSpec {
    resource: Option<ResourceAttributes>,
    non_resource: Option<NonResourceAttributes>,
    user: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
    uid: String,
}

/// The string fields of `ResourceAttributes`, in Go's order.
const RESOURCE_FIELDS: [&str; 7] = [
    "namespace",
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "name",
];

impl ResourceAttributes {
    fn fields(&self) -> [&str; 7] {
        [
            &self.namespace,
            &self.verb,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            &self.name,
        ]
    }
}

/// The names Go gives one kind of selector in type errors.
struct SelectorTypes {
    key: &'static str,
    attributes: &'static str,
    requirement: &'static str,
    operator: &'static str,
}

const FIELD_SELECTOR: SelectorTypes = SelectorTypes {
    key: "fieldSelector",
    attributes: "FieldSelectorAttributes",
    requirement: "FieldSelectorRequirement",
    operator: "v1.FieldSelectorOperator",
};

const LABEL_SELECTOR: SelectorTypes = SelectorTypes {
    key: "labelSelector",
    attributes: "LabelSelectorAttributes",
    requirement: "LabelSelectorRequirement",
    operator: "v1.LabelSelectorOperator",
};

/// Decodes `spec` with Go's type rules.
fn decode_spec(go: &GoJson, review: Review, object: &Value) -> ApiResult<AccessReviewSpec> {
    let spec_struct = review.spec_struct();
    let spec = go.object(
        object.get("spec"),
        review.kind(),
        "spec",
        &format!("v1.{spec_struct}"),
    )?;
    let field = |key: &str| spec.and_then(|s| s.get(key));
    let mut decoded = AccessReviewSpec::default();

    let path = "spec.resourceAttributes";
    if let Some(attrs) = go.object(
        field("resourceAttributes"),
        spec_struct,
        path,
        "v1.ResourceAttributes",
    )? {
        let text = |key: &str| {
            go.string(
                attrs.get(key),
                "ResourceAttributes",
                &format!("{path}.{key}"),
            )
        };
        decoded.resource = Some(ResourceAttributes {
            namespace: text("namespace")?,
            verb: text("verb")?,
            group: text("group")?,
            version: text("version")?,
            resource: text("resource")?,
            subresource: text("subresource")?,
            name: text("name")?,
            field_selector: decode_selector(go, attrs, path, &FIELD_SELECTOR)?,
            label_selector: decode_selector(go, attrs, path, &LABEL_SELECTOR)?,
        });
    }

    let path = "spec.nonResourceAttributes";
    if let Some(attrs) = go.object(
        field("nonResourceAttributes"),
        spec_struct,
        path,
        "v1.NonResourceAttributes",
    )? {
        decoded.non_resource = Some(NonResourceAttributes {
            path: go.string(
                attrs.get("path"),
                "NonResourceAttributes",
                &format!("{path}.path"),
            )?,
            verb: go.string(
                attrs.get("verb"),
                "NonResourceAttributes",
                &format!("{path}.verb"),
            )?,
        });
    }

    // The self review's spec has no user fields: anything sent there is an unknown field.
    if review != Review::SelfAccess {
        decoded.user = go.string(field("user"), spec_struct, "spec.user")?;
        decoded.groups = go.strings(field("groups"), spec_struct, "spec.groups", "[]string")?;
        decoded.extra =
            go.string_lists_map(field("extra"), spec_struct, "spec.extra", "v1.ExtraValue")?;
        decoded.uid = go.string(field("uid"), spec_struct, "spec.uid")?;
    }
    Ok(decoded)
}

fn decode_selector(
    go: &GoJson,
    attrs: &Map<String, Value>,
    base: &str,
    types: &SelectorTypes,
) -> ApiResult<Option<SelectorAttributes>> {
    let path = format!("{base}.{}", types.key);
    let Some(selector) = go.object(
        attrs.get(types.key),
        "ResourceAttributes",
        &path,
        &format!("v1.{}", types.attributes),
    )?
    else {
        return Ok(None);
    };
    let raw = go.string(
        selector.get("rawSelector"),
        types.attributes,
        &format!("{path}.rawSelector"),
    )?;
    let list_path = format!("{path}.requirements");
    let mut requirements = Vec::new();
    for item in go.array(
        selector.get("requirements"),
        types.attributes,
        &list_path,
        &format!("[]v1.{}", types.requirement),
    )? {
        let item = go.object(
            Some(item),
            types.attributes,
            &list_path,
            &format!("v1.{}", types.requirement),
        )?;
        let field = |key: &str| item.and_then(|i| i.get(key));
        let at = |key: &str| format!("{list_path}.{key}");
        requirements.push(Requirement {
            key: go.string(field("key"), types.requirement, &at("key"))?,
            operator: go.typed_string(
                field("operator"),
                types.requirement,
                &at("operator"),
                types.operator,
            )?,
            values: go.strings(
                field("values"),
                types.requirement,
                &at("values"),
                "[]string",
            )?,
        });
    }
    Ok(Some(SelectorAttributes { raw, requirements }))
}

/// Type-checks a client-sent `status` (kube decodes it before overwriting it).
fn check_access_status(go: &GoJson, object: &Value) -> ApiResult<()> {
    let Some(status) = go.object(
        object.get("status"),
        go.kind(),
        "status",
        "v1.SubjectAccessReviewStatus",
    )?
    else {
        return Ok(());
    };
    let st = "SubjectAccessReviewStatus";
    go.boolean(status.get("allowed"), st, "status.allowed")?;
    go.boolean(status.get("denied"), st, "status.denied")?;
    go.string(status.get("reason"), st, "status.reason")?;
    go.string(status.get("evaluationError"), st, "status.evaluationError")?;
    Ok(())
}

impl SelectorAttributes {
    /// Go's JSON (`rawSelector` and `requirements` both `omitempty`; a requirement's `key` and
    /// `operator` always written, `values` only when set).
    fn to_json(&self) -> Value {
        let mut map = Map::new();
        if !self.raw.is_empty() {
            map.insert("rawSelector".into(), json!(self.raw));
        }
        if !self.requirements.is_empty() {
            let requirements: Vec<Value> = self
                .requirements
                .iter()
                .map(|r| {
                    let mut req = Map::new();
                    req.insert("key".into(), json!(r.key));
                    req.insert("operator".into(), json!(r.operator));
                    if !r.values.is_empty() {
                        req.insert("values".into(), json!(r.values));
                    }
                    Value::Object(req)
                })
                .collect();
            map.insert("requirements".into(), Value::Array(requirements));
        }
        Value::Object(map)
    }
}

impl NonResourceAttributes {
    fn to_json(&self) -> Value {
        let mut map = Map::new();
        if !self.path.is_empty() {
            map.insert("path".into(), json!(self.path));
        }
        if !self.verb.is_empty() {
            map.insert("verb".into(), json!(self.verb));
        }
        Value::Object(map)
    }

    /// As kube 1.33's field errors print the internal struct (Go's `%#v`).
    fn bad_value(&self) -> String {
        super::gojson::go_syntax_struct(
            "authorization.NonResourceAttributes",
            &[("Path", &self.path), ("Verb", &self.verb)],
        )
    }
}

impl AccessReviewSpec {
    /// Go's JSON of the spec: the attribute pointers when set, the rest `omitempty`.
    fn to_json(&self) -> Value {
        let mut map = Map::new();
        if let Some(attrs) = &self.resource {
            let mut out = Map::new();
            for (key, value) in RESOURCE_FIELDS.iter().zip(attrs.fields()) {
                if !value.is_empty() {
                    out.insert((*key).into(), json!(value));
                }
            }
            if let Some(s) = &attrs.field_selector {
                out.insert("fieldSelector".into(), s.to_json());
            }
            if let Some(s) = &attrs.label_selector {
                out.insert("labelSelector".into(), s.to_json());
            }
            map.insert("resourceAttributes".into(), Value::Object(out));
        }
        if let Some(attrs) = &self.non_resource {
            map.insert("nonResourceAttributes".into(), attrs.to_json());
        }
        if !self.user.is_empty() {
            map.insert("user".into(), json!(self.user));
        }
        if !self.groups.is_empty() {
            map.insert("groups".into(), json!(self.groups));
        }
        if !self.extra.is_empty() {
            map.insert("extra".into(), json!(self.extra));
        }
        if !self.uid.is_empty() {
            map.insert("uid".into(), json!(self.uid));
        }
        Value::Object(map)
    }
}

/// kube's `ValidateSubjectAccessReview`, `ValidateLocalSubjectAccessReview` and
/// `ValidateSelfSubjectAccessReview`, in kube's order.
fn validate(
    review: Review,
    spec: &AccessReviewSpec,
    metadata: &Map<String, Value>,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    match (&spec.resource, &spec.non_resource) {
        (Some(_), Some(non_resource)) => causes.push(invalid_raw(
            "spec.nonResourceAttributes",
            &non_resource.bad_value(),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => causes.push(invalid_raw(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if review != Review::SelfAccess && spec.user.is_empty() && spec.groups.is_empty() {
        causes.push(field_invalid(
            "spec.user",
            &spec.user,
            "at least one of user or group must be specified",
        ));
    }
    if let Some(attrs) = &spec.resource {
        let base = "spec.resourceAttributes";
        if let Some(s) = &attrs.field_selector {
            causes.extend(validate_selector(
                s,
                &format!("{base}.fieldSelector"),
                false,
            ));
        }
        if let Some(s) = &attrs.label_selector {
            causes.extend(validate_selector(s, &format!("{base}.labelSelector"), true));
        }
    }
    let namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ignored: &[&str] = if review == Review::Local {
        &["managedFields", "namespace"]
    } else {
        &["managedFields"]
    };
    if !object_meta_is_empty(metadata, ignored) {
        let detail = if review == Review::Local {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        causes.push(invalid_raw(
            "metadata",
            &object_meta_bad_value(metadata),
            detail,
        ));
    }
    if review == Review::Local {
        if let Some(attrs) = &spec.resource {
            if attrs.namespace != namespace {
                causes.push(field_invalid(
                    "spec.resourceAttributes.namespace",
                    &attrs.namespace,
                    "must match metadata.namespace",
                ));
            }
        }
        if let Some(non_resource) = &spec.non_resource {
            causes.push(invalid_raw(
                "spec.nonResourceAttributes",
                &non_resource.bad_value(),
                "disallowed on this kind of request",
            ));
        }
    }
    causes
}

/// kube's `validateFieldSelectorAttributes` / `validateLabelSelectorAttributes`: a raw
/// selector or requirements, not both; requirements checked with unknown operators allowed.
fn validate_selector(selector: &SelectorAttributes, path: &str, label: bool) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if !selector.raw.is_empty() && !selector.requirements.is_empty() {
        causes.push(field_invalid(
            &format!("{path}.rawSelector"),
            &selector.raw,
            "may not specified at the same time as requirements",
        ));
    }
    if selector.raw.is_empty() && selector.requirements.is_empty() {
        causes.push(field_required(
            &format!("{path}.requirements"),
            &format!("when {path} is specified, requirements or rawSelector is required"),
        ));
    }
    for (i, r) in selector.requirements.iter().enumerate() {
        let at = index_path(&format!("{path}.requirements"), i);
        if label {
            let requirement = json!({"key": r.key, "operator": r.operator, "values": r.values});
            causes.extend(validate_label_selector_requirement(
                &requirement,
                true,
                false,
                &at,
            ));
        } else {
            causes.extend(validate_field_selector_requirement(r, &at));
        }
    }
    causes
}

/// apimachinery's `ValidateFieldSelectorRequirement` with unknown operators allowed.
fn validate_field_selector_requirement(r: &Requirement, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if r.key.is_empty() {
        causes.push(field_required(&format!("{path}.key"), "must be specified"));
    }
    match r.operator.as_str() {
        "In" | "NotIn" if r.values.is_empty() => causes.push(field_required(
            &format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !r.values.is_empty() => causes.push(field_forbidden(
            &format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        _ => {}
    }
    causes
}

/// `ObjectMeta` fields in Go's order.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Whether a JSON value decodes to Go's zero value of its field (kube's semantic equality
/// also treats empty and nil maps and slices alike). `deletionGracePeriodSeconds` is a
/// pointer, so any number there is set.
fn is_zero(key: &str, value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => key != "deletionGracePeriodSeconds" && n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// kube's `DeepEqual(metav1.ObjectMeta{}, meta)` with the `ignored` fields cleared.
fn object_meta_is_empty(metadata: &Map<String, Value>, ignored: &[&str]) -> bool {
    metadata
        .iter()
        .filter(|(k, _)| !ignored.contains(&k.as_str()))
        .all(|(k, v)| is_zero(k, v))
}

/// The metadata as kube's field error prints it: `ObjectMeta`'s JSON, in Go's field order,
/// `creationTimestamp` always written.
fn object_meta_bad_value(metadata: &Map<String, Value>) -> String {
    let mut out = Map::new();
    for key in OBJECT_META_FIELDS {
        match metadata.get(key) {
            Some(v) if !is_zero(key, v) => {
                out.insert(key.into(), v.clone());
            }
            _ if key == "creationTimestamp" => {
                out.insert(key.into(), Value::Null);
            }
            _ => {}
        }
    }
    go_json(&Value::Object(out))
}

/// What the authorizer is asked (kube's `authorizationutil.AuthorizationAttributesFrom`),
/// with the evaluation errors the selectors raise (`BuildEvaluationError`).
fn request_info(spec: &AccessReviewSpec) -> (RequestInfo, Vec<String>) {
    let mut errors = Vec::new();
    let info = match (&spec.resource, &spec.non_resource) {
        (Some(attrs), _) => {
            // kube reports field selector problems before label selector ones.
            let field_selector = attrs.field_selector.as_ref().map(|s| {
                let (text, state) = field_selector_text(s);
                note_selector(&mut errors, "fieldSelector", state);
                text
            });
            let label_selector = attrs.label_selector.as_ref().map(|s| {
                let (text, state) = label_selector_text(s);
                note_selector(&mut errors, "labelSelector", state);
                text
            });
            RequestInfo {
                is_resource_request: true,
                verb: attrs.verb.clone(),
                api_group: attrs.group.clone(),
                // An unset version matches every version.
                api_version: if attrs.version.is_empty() {
                    "*".into()
                } else {
                    attrs.version.clone()
                },
                namespace: attrs.namespace.clone(),
                resource: attrs.resource.clone(),
                subresource: attrs.subresource.clone(),
                name: attrs.name.clone(),
                field_selector: field_selector.unwrap_or_default(),
                label_selector: label_selector.unwrap_or_default(),
                ..RequestInfo::default()
            }
        }
        (None, Some(attrs)) => RequestInfo {
            is_resource_request: false,
            path: attrs.path.clone(),
            verb: attrs.verb.clone(),
            ..RequestInfo::default()
        },
        // Validation refuses a review with neither.
        (None, None) => RequestInfo::default(),
    };
    (info, errors)
}

/// How much of a selector the authorizer gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SelectorUse {
    Whole,
    Partial,
    Ignored,
}

fn note_selector(errors: &mut Vec<String>, key: &str, state: SelectorUse) {
    match state {
        SelectorUse::Whole => {}
        SelectorUse::Partial => errors.push(format!(
            "spec.resourceAttributes.{key} partially ignored due to parse error"
        )),
        SelectorUse::Ignored => errors.push(format!(
            "spec.resourceAttributes.{key} ignored due to parse error"
        )),
    }
}

/// The label selector the authorizer sees: the raw selector if it parses, otherwise the
/// requirements kube could convert (an unknown operator is dropped, which only widens the
/// check, as kube reasons).
fn label_selector_text(selector: &SelectorAttributes) -> (String, SelectorUse) {
    if !selector.requirements.is_empty() {
        let mut valid = Vec::new();
        let mut failed = false;
        for r in &selector.requirements {
            let operator = match r.operator.as_str() {
                "In" => Some(LabelOperator::In),
                "NotIn" => Some(LabelOperator::NotIn),
                "Exists" => Some(LabelOperator::Exists),
                "DoesNotExist" => Some(LabelOperator::DoesNotExist),
                _ => None,
            };
            match operator.map(|op| LabelRequirement::new(&r.key, op, r.values.clone())) {
                Some(Ok(requirement)) => valid.push(requirement),
                _ => failed = true,
            }
        }
        let state = match (failed, valid.is_empty()) {
            (false, _) => SelectorUse::Whole,
            (true, false) => SelectorUse::Partial,
            (true, true) => SelectorUse::Ignored,
        };
        return (LabelSelector::from_requirements(valid).to_string(), state);
    }
    if selector.raw.is_empty() {
        return (String::new(), SelectorUse::Whole);
    }
    match LabelSelector::parse(&selector.raw) {
        Ok(_) => (selector.raw.clone(), SelectorUse::Whole),
        Err(_) => (String::new(), SelectorUse::Ignored),
    }
}

/// The field selector the authorizer sees (kube's `fieldSelectorAsSelector`: one value per
/// requirement, `In` as `=` and `NotIn` as `!=`; anything else is dropped).
fn field_selector_text(selector: &SelectorAttributes) -> (String, SelectorUse) {
    if !selector.requirements.is_empty() {
        let mut valid = Vec::new();
        let mut failed = false;
        for r in &selector.requirements {
            let op = match (r.operator.as_str(), r.values.as_slice()) {
                ("In", [_]) => "=",
                ("NotIn", [_]) => "!=",
                _ => {
                    failed = true;
                    continue;
                }
            };
            let value = r.values.first().map(String::as_str).unwrap_or("");
            valid.push(format!("{}{op}{}", r.key, escape_field_value(value)));
        }
        let state = match (failed, valid.is_empty()) {
            (false, _) => SelectorUse::Whole,
            (true, false) => SelectorUse::Partial,
            (true, true) => SelectorUse::Ignored,
        };
        return (valid.join(","), state);
    }
    if selector.raw.is_empty() {
        return (String::new(), SelectorUse::Whole);
    }
    match FieldSelector::parse(&selector.raw) {
        Ok(_) => (selector.raw.clone(), SelectorUse::Whole),
        Err(_) => (String::new(), SelectorUse::Ignored),
    }
}

/// `SubjectAccessReviewStatus` as Go writes it: `allowed` always, the rest `omitempty`.
fn access_status(decision: &Decision, evaluation_errors: &[String]) -> Value {
    let (allowed, denied) = match decision {
        Decision::Allow(_) => (true, false),
        Decision::Deny(_) | Decision::Failed { denied: true, .. } => (false, true),
        Decision::NoOpinion(_) | Decision::Failed { .. } => (false, false),
    };
    let reason = decision.reason();
    let mut status = Map::new();
    status.insert("allowed".into(), json!(allowed));
    if denied {
        status.insert("denied".into(), json!(true));
    }
    if !reason.is_empty() {
        status.insert("reason".into(), json!(reason));
    }
    if !evaluation_errors.is_empty() {
        status.insert(
            "evaluationError".into(),
            json!(evaluation_errors.join("; ")),
        );
    }
    Value::Object(status)
}

/// kube's access review REST `Create`s.
struct AccessReviewHandler {
    review: Review,
    authorizer: Arc<dyn Authorizer>,
}

#[async_trait::async_trait]
impl VirtualHandler for AccessReviewHandler {
    async fn create(&self, request: &ApiRequest, object: Value) -> ApiResult<Value> {
        let review = self.review;
        let go = GoJson::new(review.kind());
        let spec = decode_spec(&go, review, &object)?;
        check_access_status(&go, &object)?;
        let metadata = object
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();

        let causes = validate(review, &spec, &metadata);
        if !causes.is_empty() {
            // kube names the kind from the decoded internal object, whose kind is empty.
            return Err(ApiError::invalid(GROUP, "", "", causes));
        }
        let namespace = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if review == Review::Local {
            let requested = request.info.namespace.as_str();
            if requested.is_empty() {
                return Err(ApiError::bad_request(
                    "namespace is required on this type: ",
                ));
            }
            if requested != namespace {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {requested}"
                )));
            }
        }

        let user = if review == Review::SelfAccess {
            request.user.clone()
        } else {
            Arc::new(UserInfo {
                name: spec.user.clone(),
                uid: spec.uid.clone(),
                groups: spec.groups.clone(),
                extra: spec.extra.clone(),
            })
        };
        let (info, selector_errors) = request_info(&spec);
        let decision = self
            .authorizer
            .authorize(&Attributes {
                user: &user,
                request: &info,
            })
            .await;
        // kube's `BuildEvaluationError`: the authorizer's error, then the selectors'.
        let evaluation_errors: Vec<String> = decision
            .error()
            .map(str::to_string)
            .into_iter()
            .chain(selector_errors)
            .collect();

        // The request object comes back with its status replaced; its metadata can only
        // hold a namespace (validation saw to that), and a zero creationTimestamp, which Go
        // writes as null.
        let mut meta = Map::new();
        if review == Review::Local {
            meta.insert("namespace".into(), json!(namespace));
        }
        meta.insert("creationTimestamp".into(), Value::Null);
        Ok(json!({
            "kind": review.kind(),
            "apiVersion": API_VERSION,
            "metadata": meta,
            "spec": spec.to_json(),
            "status": access_status(&decision, &evaluation_errors),
        }))
    }
}

/// kube's selfsubjectrulesreview REST `Create`.
struct RulesReviewHandler {
    authorizer: Arc<dyn Authorizer>,
}

#[async_trait::async_trait]
impl VirtualHandler for RulesReviewHandler {
    async fn create(&self, request: &ApiRequest, object: Value) -> ApiResult<Value> {
        let go = GoJson::new("SelfSubjectRulesReview");
        let spec = go.object(
            object.get("spec"),
            "SelfSubjectRulesReview",
            "spec",
            "v1.SelfSubjectRulesReviewSpec",
        )?;
        let namespace = go.string(
            spec.and_then(|s| s.get("namespace")),
            "SelfSubjectRulesReviewSpec",
            "spec.namespace",
        )?;
        check_rules_status(&go, &object)?;
        if namespace.is_empty() {
            return Err(ApiError::bad_request("no namespace on request"));
        }
        let rules = self.authorizer.rules_for(&request.user, &namespace);
        // A new object, not the request's: empty metadata and spec, as kube answers.
        Ok(json!({
            "kind": "SelfSubjectRulesReview",
            "apiVersion": API_VERSION,
            "metadata": {"creationTimestamp": null},
            "spec": {},
            "status": rules_status(&rules),
        }))
    }
}

/// Type-checks a client-sent `SubjectRulesReviewStatus`.
fn check_rules_status(go: &GoJson, object: &Value) -> ApiResult<()> {
    let st = "SubjectRulesReviewStatus";
    let Some(status) = go.object(
        object.get("status"),
        go.kind(),
        "status",
        "v1.SubjectRulesReviewStatus",
    )?
    else {
        return Ok(());
    };
    let lists: [(&str, &str, &[&str]); 2] = [
        (
            "resourceRules",
            "ResourceRule",
            &["verbs", "apiGroups", "resources", "resourceNames"],
        ),
        (
            "nonResourceRules",
            "NonResourceRule",
            &["verbs", "nonResourceURLs"],
        ),
    ];
    for (key, rule_struct, fields) in lists {
        let path = format!("status.{key}");
        for rule in go.array(status.get(key), st, &path, &format!("[]v1.{rule_struct}"))? {
            let rule = go.object(Some(rule), st, &path, &format!("v1.{rule_struct}"))?;
            for field in fields {
                go.strings(
                    rule.and_then(|r| r.get(*field)),
                    rule_struct,
                    &format!("{path}.{field}"),
                    "[]string",
                )?;
            }
        }
    }
    go.boolean(status.get("incomplete"), st, "status.incomplete")?;
    go.string(status.get("evaluationError"), st, "status.evaluationError")?;
    Ok(())
}

/// A list Go writes without `omitempty`: `null` when nil.
fn required_list(values: &[String]) -> Value {
    if values.is_empty() {
        Value::Null
    } else {
        json!(values)
    }
}

fn resource_rule(rule: &ResourceRule) -> Value {
    let mut map = Map::new();
    map.insert("verbs".into(), required_list(&rule.verbs));
    for (key, values) in [
        ("apiGroups", &rule.api_groups),
        ("resources", &rule.resources),
        ("resourceNames", &rule.resource_names),
    ] {
        if !values.is_empty() {
            map.insert(key.into(), json!(values));
        }
    }
    Value::Object(map)
}

fn non_resource_rule(rule: &NonResourceRule) -> Value {
    let mut map = Map::new();
    map.insert("verbs".into(), required_list(&rule.verbs));
    if !rule.non_resource_urls.is_empty() {
        map.insert("nonResourceURLs".into(), json!(rule.non_resource_urls));
    }
    Value::Object(map)
}

/// `SubjectRulesReviewStatus` as kube writes it: both rule lists always (`[]` when empty,
/// kube makes them), `incomplete` always, and the resolvers' errors as one aggregate.
fn rules_status(rules: &RulesInfo) -> Value {
    let mut status = Map::new();
    status.insert(
        "resourceRules".into(),
        Value::Array(rules.resource_rules.iter().map(resource_rule).collect()),
    );
    status.insert(
        "nonResourceRules".into(),
        Value::Array(
            rules
                .non_resource_rules
                .iter()
                .map(non_resource_rule)
                .collect(),
        ),
    );
    status.insert("incomplete".into(), json!(rules.incomplete));
    if let Some(error) = aggregate_error(&rules.errors) {
        status.insert("evaluationError".into(), json!(error));
    }
    Value::Object(status)
}

/// apimachinery's `utilerrors.NewAggregate(errs).Error()`: nothing for no errors, one error
/// as itself, several (duplicates dropped) as `[a, b]`.
fn aggregate_error(errors: &[String]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => None,
        [one] => Some((*one).to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::protobuf;
    use std::sync::Mutex;

    /// Allows `alice` to do anything, denies `mallory` with a reason, and has no opinion
    /// (with a reason) on everyone else. Lists rules for `alice` in `team-a`, and reports
    /// itself incomplete with errors elsewhere. Records what it was asked.
    #[derive(Default)]
    struct FakeAuthorizer {
        asked: Mutex<Vec<(UserInfo, RequestInfo)>>,
        rules_asked: Mutex<Vec<(UserInfo, String)>>,
    }

    #[async_trait::async_trait]
    impl Authorizer for FakeAuthorizer {
        fn name(&self) -> &'static str {
            "fake"
        }

        async fn authorize(&self, attributes: &Attributes<'_>) -> Decision {
            if let Ok(mut asked) = self.asked.lock() {
                asked.push((attributes.user.clone(), attributes.request.clone()));
            }
            match attributes.user.name.as_str() {
                "alice" => Decision::Allow(String::new()),
                "mallory" => Decision::Deny("mallory is banned".into()),
                _ if attributes.user.in_group("devs") => {
                    Decision::Allow("RBAC: allowed by ClusterRoleBinding \"devs\"".into())
                }
                _ => Decision::NoOpinion("no RBAC policy matched".into()),
            }
        }

        fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
            if let Ok(mut asked) = self.rules_asked.lock() {
                asked.push((user.clone(), namespace.to_string()));
            }
            if user.name == "alice" && namespace == "team-a" {
                return RulesInfo {
                    resource_rules: vec![
                        ResourceRule {
                            verbs: vec!["get".into(), "list".into()],
                            api_groups: vec![String::new()],
                            resources: vec!["pods".into()],
                            resource_names: Vec::new(),
                        },
                        ResourceRule {
                            verbs: vec!["create".into()],
                            api_groups: vec!["authorization.k8s.io".into()],
                            resources: vec!["selfsubjectaccessreviews".into()],
                            resource_names: Vec::new(),
                        },
                    ],
                    non_resource_rules: vec![NonResourceRule {
                        verbs: vec!["get".into()],
                        non_resource_urls: vec!["/healthz".into(), "/version".into()],
                    }],
                    incomplete: false,
                    errors: Vec::new(),
                };
            }
            RulesInfo {
                incomplete: true,
                errors: vec![
                    "webhook authorizer does not support user rule resolution".into(),
                    "role.rbac.authorization.k8s.io \"gone\" not found".into(),
                    "webhook authorizer does not support user rule resolution".into(),
                ],
                ..RulesInfo::default()
            }
        }
    }

    fn request(user: UserInfo, namespace: &str) -> ApiRequest {
        ApiRequest {
            method: "POST".into(),
            info: std::sync::Arc::new(RequestInfo {
                namespace: namespace.into(),
                ..RequestInfo::default()
            }),
            query: Vec::new(),
            content_type: Some("application/json".into()),
            content_length_sent: true,
            user_agent: None,
            accept: None,
            if_none_match: None,
            body: bytes::Bytes::new(),
            user: Arc::new(user),
        }
    }

    fn requester() -> UserInfo {
        UserInfo {
            name: "bob".into(),
            uid: "u-7".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: BTreeMap::from([("scopes".to_string(), vec!["view".to_string()])]),
        }
    }

    /// Posts `body` to a fresh handler of `def_fn` as `user` in `namespace`; returns the
    /// answer and what the authorizer was asked.
    async fn post(
        def_fn: fn(Arc<dyn Authorizer>) -> ResourceDef,
        user: UserInfo,
        namespace: &str,
        body: Value,
    ) -> (ApiResult<Value>, Vec<(UserInfo, RequestInfo)>) {
        let authorizer = Arc::new(FakeAuthorizer::default());
        let def = def_fn(authorizer.clone());
        let handler = def
            .virtual_handler
            .clone()
            .unwrap_or_else(|| panic!("{} has no handler", def.plural));
        let got = handler.create(&request(user, namespace), body).await;
        let asked = authorizer
            .asked
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default();
        (got, asked)
    }

    fn sar(spec: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": "SubjectAccessReview", "spec": spec})
    }

    fn invalid(result: ApiResult<Value>) -> (u16, String, Vec<String>) {
        let err = result.err().unwrap_or_else(|| panic!("must fail"));
        let causes = err
            .details
            .as_ref()
            .map(|d| {
                d.causes
                    .iter()
                    .map(|c| format!("{}: {}", c.field, c.message))
                    .collect()
            })
            .unwrap_or_default();
        (err.code, err.message, causes)
    }

    #[test]
    fn definitions_are_create_only() {
        let defs = access_review_defs(Arc::new(FakeAuthorizer::default()));
        let facts: Vec<_> = defs
            .iter()
            .map(|d| (d.plural.as_str(), d.kind.as_str(), d.namespaced))
            .collect();
        assert_eq!(
            facts,
            vec![
                (
                    "localsubjectaccessreviews",
                    "LocalSubjectAccessReview",
                    true
                ),
                ("selfsubjectaccessreviews", "SelfSubjectAccessReview", false),
                ("selfsubjectrulesreviews", "SelfSubjectRulesReview", false),
                ("subjectaccessreviews", "SubjectAccessReview", false),
            ]
        );
        for d in &defs {
            assert_eq!(d.api_version(), "authorization.k8s.io/v1");
            assert_eq!(d.verbs, vec!["create"]);
            assert!(d.virtual_handler.is_some());
            assert_eq!(
                d.definition,
                format!("io.k8s.api.authorization.v1.{}", d.kind)
            );
        }
    }

    #[tokio::test]
    async fn subject_access_review_allowed_for_the_spec_user() {
        let body = sar(json!({
            "resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods", "name": "web-0"},
            "user": "alice",
            "groups": ["staff"],
            "uid": "a-1",
            "extra": {"scopes": ["all"]},
        }));
        let (got, asked) = post(subjectaccessreviews_def, requester(), "", body).await;
        assert_eq!(
            got,
            Ok(json!({
                "kind": "SubjectAccessReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {
                    "resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods", "name": "web-0"},
                    "user": "alice",
                    "groups": ["staff"],
                    "extra": {"scopes": ["all"]},
                    "uid": "a-1",
                },
                "status": {"allowed": true},
            }))
        );
        // The spec's identity, exactly (no system:authenticated added), and `*` for an
        // unset version.
        let (user, info) = &asked[0];
        assert_eq!(
            user,
            &UserInfo {
                name: "alice".into(),
                uid: "a-1".into(),
                groups: vec!["staff".into()],
                extra: BTreeMap::from([("scopes".to_string(), vec!["all".to_string()])]),
            }
        );
        assert_eq!(
            info,
            &RequestInfo {
                is_resource_request: true,
                verb: "get".into(),
                api_group: String::new(),
                api_version: "*".into(),
                namespace: "team-a".into(),
                resource: "pods".into(),
                name: "web-0".into(),
                ..RequestInfo::default()
            }
        );
    }

    #[tokio::test]
    async fn denied_and_no_opinion_carry_the_reason() {
        let attrs = json!({"resourceAttributes": {"verb": "delete", "group": "apps", "version": "v1", "resource": "deployments"}});
        let mut spec = attrs.clone();
        spec["user"] = json!("mallory");
        let (got, _) = post(subjectaccessreviews_def, requester(), "", sar(spec)).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({"allowed": false, "denied": true, "reason": "mallory is banned"}))
        );
        let mut spec = attrs;
        spec["groups"] = json!(["guests"]);
        let (got, asked) = post(subjectaccessreviews_def, requester(), "", sar(spec)).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({"allowed": false, "reason": "no RBAC policy matched"}))
        );
        assert_eq!(asked[0].0.name, "");
        assert_eq!(asked[0].1.api_version, "v1");
    }

    #[tokio::test]
    async fn non_resource_reviews_ask_about_the_path() {
        let body = sar(
            json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}, "user": "carol", "groups": ["devs"]}),
        );
        let (got, asked) = post(subjectaccessreviews_def, requester(), "", body).await;
        let got = got.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got["spec"]["nonResourceAttributes"],
            json!({"path": "/healthz", "verb": "get"})
        );
        assert_eq!(
            got["status"],
            json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"devs\""})
        );
        assert_eq!(
            asked[0].1,
            RequestInfo {
                path: "/healthz".into(),
                verb: "get".into(),
                ..RequestInfo::default()
            }
        );
    }

    #[tokio::test]
    async fn self_review_uses_the_requester_not_the_body() {
        // A spec user is not part of the self review's spec: it is ignored and not echoed.
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": {
                "resourceAttributes": {"namespace": "team-a", "verb": "list", "resource": "secrets"},
                "user": "alice",
            },
            "status": {"allowed": true},
        });
        let (got, asked) = post(selfsubjectaccessreviews_def, requester(), "", body).await;
        assert_eq!(
            got,
            Ok(json!({
                "kind": "SelfSubjectAccessReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"resourceAttributes": {"namespace": "team-a", "verb": "list", "resource": "secrets"}},
                "status": {"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"devs\""},
            }))
        );
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].0, requester());

        // A client-sent status never survives: mallory's answer is mallory's.
        let mut mallory = requester();
        mallory.name = "mallory".into();
        let body = json!({
            "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
            "status": {"allowed": true, "reason": "trust me"},
        });
        let (got, _) = post(selfsubjectaccessreviews_def, mallory, "", body).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({"allowed": false, "denied": true, "reason": "mallory is banned"}))
        );
    }

    #[tokio::test]
    async fn validation_errors_as_kube() {
        let cases = [
            (
                subjectaccessreviews_def as fn(Arc<dyn Authorizer>) -> ResourceDef,
                sar(json!({})),
                vec![
                    "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    "spec.user: Invalid value: \"\": at least one of user or group must be specified",
                ],
            ),
            (
                subjectaccessreviews_def,
                sar(json!({
                    "resourceAttributes": {"verb": "get"},
                    "nonResourceAttributes": {"path": "/x", "verb": "get"},
                    "user": "alice",
                })),
                vec![r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/x", Verb:"get"}: cannot be specified in combination with resourceAttributes"#],
            ),
            (
                subjectaccessreviews_def,
                json!({"metadata": {"name": "mine"}, "spec": {"nonResourceAttributes": {}, "groups": ["g"]}}),
                vec![r#"metadata: Invalid value: {"name":"mine","creationTimestamp":null}: must be empty"#],
            ),
            (
                selfsubjectaccessreviews_def,
                json!({"spec": {}}),
                vec!["spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"],
            ),
            (
                subjectaccessreviews_def,
                sar(json!({
                    "resourceAttributes": {
                        "verb": "list",
                        "resource": "pods",
                        "fieldSelector": {"rawSelector": "spec.nodeName=a", "requirements": [{"key": "", "operator": "In"}]},
                        "labelSelector": {},
                    },
                    "user": "alice",
                })),
                vec![
                    "spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: \"spec.nodeName=a\": may not specified at the same time as requirements",
                    "spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be specified",
                    "spec.resourceAttributes.fieldSelector.requirements[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                    "spec.resourceAttributes.labelSelector.requirements: Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required",
                ],
            ),
        ];
        for (def_fn, body, want) in cases {
            let (got, asked) = post(def_fn, requester(), "", body.clone()).await;
            let (code, message, causes) = invalid(got);
            assert_eq!(code, 422, "{body}");
            assert_eq!(causes, want, "{body}");
            assert!(
                message.starts_with(".authorization.k8s.io \"\" is invalid: "),
                "{message}"
            );
            assert!(asked.is_empty(), "{body}: nothing is authorized");
        }
        // One cause is the whole message; several are listed.
        let (_, message, _) = invalid(
            post(selfsubjectaccessreviews_def, requester(), "", json!({}))
                .await
                .0,
        );
        assert_eq!(
            message,
            ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
    }

    fn lsar(metadata: Value, spec: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": "LocalSubjectAccessReview", "metadata": metadata, "spec": spec})
    }

    #[tokio::test]
    async fn local_reviews_stay_in_their_namespace() {
        // The registry has put the request's namespace in the metadata.
        let body = lsar(
            json!({"namespace": "team-a"}),
            json!({"resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods"}, "user": "alice"}),
        );
        let (got, asked) = post(localsubjectaccessreviews_def, requester(), "team-a", body).await;
        assert_eq!(
            got,
            Ok(json!({
                "kind": "LocalSubjectAccessReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"namespace": "team-a", "creationTimestamp": null},
                "spec": {"resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods"}, "user": "alice"},
                "status": {"allowed": true},
            }))
        );
        assert_eq!(asked[0].1.namespace, "team-a");

        let body = lsar(
            json!({"namespace": "team-a", "labels": {"a": "b"}}),
            json!({"resourceAttributes": {"namespace": "team-b", "verb": "get", "resource": "pods"}, "user": "alice"}),
        );
        let (got, asked) = post(localsubjectaccessreviews_def, requester(), "team-a", body).await;
        let (code, _, causes) = invalid(got);
        assert_eq!(code, 422);
        assert_eq!(
            causes,
            vec![
                r#"metadata: Invalid value: {"namespace":"team-a","creationTimestamp":null,"labels":{"a":"b"}}: must be empty except for namespace"#,
                "spec.resourceAttributes.namespace: Invalid value: \"team-b\": must match metadata.namespace",
            ]
        );
        assert!(asked.is_empty());

        // An unset namespace does not match either, and non-resource checks have no place here.
        let body = lsar(
            json!({"namespace": "team-a"}),
            json!({"resourceAttributes": {"verb": "get", "resource": "pods"}, "nonResourceAttributes": {"path": "/healthz"}, "groups": ["devs"]}),
        );
        let (got, _) = post(localsubjectaccessreviews_def, requester(), "team-a", body).await;
        assert_eq!(
            invalid(got).2,
            vec![
                r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:""}: cannot be specified in combination with resourceAttributes"#,
                "spec.resourceAttributes.namespace: Invalid value: \"\": must match metadata.namespace",
                r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:""}: disallowed on this kind of request"#,
            ]
        );

        // Should the object's namespace differ from the path's, kube's REST refuses it.
        let body = lsar(
            json!({"namespace": "team-b"}),
            json!({"resourceAttributes": {"namespace": "team-b", "verb": "get"}, "user": "alice"}),
        );
        let (got, _) = post(localsubjectaccessreviews_def, requester(), "team-a", body).await;
        assert_eq!(
            got.err().map(|e| (e.code, e.message)),
            Some((
                400,
                "spec.resourceAttributes.namespace must match namespace: team-a".to_string()
            ))
        );
    }

    #[tokio::test]
    async fn selectors_reach_the_authorizer_and_parse_errors_are_reported() {
        let body = sar(json!({
            "resourceAttributes": {
                "verb": "list",
                "resource": "pods",
                "fieldSelector": {"requirements": [
                    {"key": "spec.nodeName", "operator": "In", "values": ["node-1"]},
                    {"key": "status.phase", "operator": "Exists"},
                ]},
                "labelSelector": {"rawSelector": "app=web,tier in (front)"},
            },
            "user": "alice",
        }));
        let (got, asked) = post(subjectaccessreviews_def, requester(), "", body).await;
        let got = got.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got["status"],
            json!({"allowed": true, "evaluationError": "spec.resourceAttributes.fieldSelector partially ignored due to parse error"})
        );
        assert_eq!(asked[0].1.field_selector, "spec.nodeName=node-1");
        assert_eq!(asked[0].1.label_selector, "app=web,tier in (front)");
        // Echoed in Go's shape.
        assert_eq!(
            got["spec"]["resourceAttributes"]["fieldSelector"],
            json!({"requirements": [
                {"key": "spec.nodeName", "operator": "In", "values": ["node-1"]},
                {"key": "status.phase", "operator": "Exists"},
            ]})
        );

        let body = sar(json!({
            "resourceAttributes": {
                "verb": "list",
                "resource": "pods",
                "fieldSelector": {"rawSelector": "spec.nodeName"},
                "labelSelector": {"requirements": [{"key": "app", "operator": "Like", "values": ["w"]}]},
            },
            "user": "nobody",
        }));
        let (got, asked) = post(subjectaccessreviews_def, requester(), "", body).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({
                "allowed": false,
                "reason": "no RBAC policy matched",
                "evaluationError": "spec.resourceAttributes.fieldSelector ignored due to parse error; spec.resourceAttributes.labelSelector ignored due to parse error",
            }))
        );
        assert_eq!(asked[0].1.field_selector, "");
        assert_eq!(asked[0].1.label_selector, "");
    }

    #[tokio::test]
    async fn ill_typed_reviews_are_bad_requests() {
        let cases = [
            (
                subjectaccessreviews_def as fn(Arc<dyn Authorizer>) -> ResourceDef,
                sar(json!({"user": 5})),
                "SubjectAccessReview in version \"v1\" cannot be handled as a SubjectAccessReview: json: cannot unmarshal number into Go struct field SubjectAccessReviewSpec.spec.user of type string",
            ),
            (
                subjectaccessreviews_def,
                sar(json!({"resourceAttributes": "pods"})),
                "SubjectAccessReview in version \"v1\" cannot be handled as a SubjectAccessReview: json: cannot unmarshal string into Go struct field SubjectAccessReviewSpec.spec.resourceAttributes of type v1.ResourceAttributes",
            ),
            (
                localsubjectaccessreviews_def,
                json!({"spec": {"resourceAttributes": {"labelSelector": {"requirements": [{"operator": 1}]}}}}),
                "LocalSubjectAccessReview in version \"v1\" cannot be handled as a LocalSubjectAccessReview: json: cannot unmarshal number into Go struct field LabelSelectorRequirement.spec.resourceAttributes.labelSelector.requirements.operator of type v1.LabelSelectorOperator",
            ),
            (
                selfsubjectaccessreviews_def,
                json!({"spec": []}),
                "SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: json: cannot unmarshal array into Go struct field SelfSubjectAccessReview.spec of type v1.SelfSubjectAccessReviewSpec",
            ),
            (
                selfsubjectaccessreviews_def,
                json!({"spec": {"nonResourceAttributes": {"path": "/"}}, "status": {"allowed": "yes"}}),
                "SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: json: cannot unmarshal string into Go struct field SubjectAccessReviewStatus.status.allowed of type bool",
            ),
            (
                selfsubjectrulesreviews_def,
                json!({"spec": {"namespace": ["a"]}}),
                "SelfSubjectRulesReview in version \"v1\" cannot be handled as a SelfSubjectRulesReview: json: cannot unmarshal array into Go struct field SelfSubjectRulesReviewSpec.spec.namespace of type string",
            ),
        ];
        for (def_fn, body, want) in cases {
            let (got, asked) = post(def_fn, requester(), "team-a", body.clone()).await;
            assert_eq!(
                got.err().map(|e| (e.code, e.message)),
                Some((400, want.to_string())),
                "{body}"
            );
            assert!(asked.is_empty());
        }
    }

    async fn rules_review(
        user: UserInfo,
        body: Value,
    ) -> (ApiResult<Value>, Vec<(UserInfo, String)>) {
        let authorizer = Arc::new(FakeAuthorizer::default());
        let def = selfsubjectrulesreviews_def(authorizer.clone());
        let handler = def
            .virtual_handler
            .clone()
            .unwrap_or_else(|| panic!("no handler"));
        let got = handler.create(&request(user, ""), body).await;
        let asked = authorizer
            .rules_asked
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default();
        (got, asked)
    }

    #[tokio::test]
    async fn rules_review_lists_the_requesters_rules() {
        let alice = UserInfo::new("alice", vec!["system:authenticated".into()]);
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "SelfSubjectRulesReview",
            "metadata": {"name": "ignored"},
            "spec": {"namespace": "team-a"},
        });
        let (got, asked) = rules_review(alice.clone(), body).await;
        assert_eq!(asked, vec![(alice, "team-a".to_string())]);
        assert_eq!(
            got,
            Ok(json!({
                "kind": "SelfSubjectRulesReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {},
                "status": {
                    "resourceRules": [
                        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
                        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]},
                    ],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/version"]}],
                    "incomplete": false,
                },
            }))
        );
    }

    #[tokio::test]
    async fn rules_review_reports_incomplete_answers_and_errors() {
        let (got, _) = rules_review(requester(), json!({"spec": {"namespace": "default"}})).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({
                "resourceRules": [],
                "nonResourceRules": [],
                "incomplete": true,
                "evaluationError": "[webhook authorizer does not support user rule resolution, role.rbac.authorization.k8s.io \"gone\" not found]",
            }))
        );
        let (got, asked) = rules_review(requester(), json!({"spec": {}})).await;
        assert_eq!(
            got.err().map(|e| (e.code, e.message)),
            Some((400, "no namespace on request".to_string()))
        );
        assert!(asked.is_empty());
    }

    #[test]
    fn errors_aggregate_as_apimachinery_prints_them() {
        assert_eq!(aggregate_error(&[]), None);
        assert_eq!(aggregate_error(&["a".into()]), Some("a".into()));
        assert_eq!(aggregate_error(&["a".into(), "a".into()]), Some("a".into()));
        assert_eq!(
            aggregate_error(&["a".into(), "b".into(), "a".into()]),
            Some("[a, b]".into())
        );
        let rule = ResourceRule {
            verbs: Vec::new(),
            ..ResourceRule::default()
        };
        assert_eq!(resource_rule(&rule), json!({"verbs": null}));
    }

    /// kubectl posts and reads these reviews as protobuf: every answer must encode and read
    /// back unchanged.
    #[tokio::test]
    async fn answers_encode_as_protobuf() {
        let mut answers = Vec::new();
        let (got, _) = post(
            subjectaccessreviews_def,
            requester(),
            "",
            sar(json!({"resourceAttributes": {"verb": "get", "resource": "pods", "labelSelector": {"rawSelector": "a=b"}}, "user": "mallory", "extra": {"k": ["v"]}})),
        )
        .await;
        answers.push(got);
        let (got, _) = post(
            localsubjectaccessreviews_def,
            requester(),
            "team-a",
            lsar(json!({"namespace": "team-a"}), json!({"resourceAttributes": {"namespace": "team-a", "verb": "get"}, "groups": ["devs"]})),
        )
        .await;
        answers.push(got);
        let (got, _) = post(
            selfsubjectaccessreviews_def,
            requester(),
            "",
            json!({"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
        )
        .await;
        answers.push(got);
        let alice = UserInfo::new("alice", Vec::new());
        answers.push(
            rules_review(alice, json!({"spec": {"namespace": "team-a"}}))
                .await
                .0,
        );
        answers.push(
            rules_review(requester(), json!({"spec": {"namespace": "x"}}))
                .await
                .0,
        );
        for answer in answers {
            let answer = answer.unwrap_or_else(|e| panic!("{e}"));
            let bytes = protobuf::encode(&answer).unwrap_or_else(|e| panic!("{e}"));
            let back = protobuf::decode(&bytes).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back["spec"], answer["spec"], "{answer}");
            assert_eq!(back["status"], answer["status"], "{answer}");
        }
    }
}

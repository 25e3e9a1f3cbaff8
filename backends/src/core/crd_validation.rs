//! kube's `ValidateCustomResourceDefinition` and `ValidateCustomResourceDefinitionUpdate`
//! (`apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go`) on the JSON of
//! an `apiextensions.k8s.io/v1` CustomResourceDefinition, with kube's field paths and
//! messages.
//!
//! kube validates its internal version, which the v1 object converts into: when every version
//! carries the same `schema` (or `subresources`, `additionalPrinterColumns`), conversion moves
//! it to the top level, so errors in it are reported under `spec.validation`,
//! `spec.subresources` or `spec.additionalPrinterColumns`; webhook settings are reported as
//! `spec.conversion.webhookClientConfig` and `spec.conversion.conversionReviewVersions`.
//! That is reproduced here. CEL rules are compiled (`machinery::schema::compile_errors`).

use serde_json::{json, Value};

use super::{entries, items, str_at};
use crate::machinery::schema::{
    validate_defaults, validate_structural, AdditionalProperties, Schema,
};
use crate::machinery::validation::{is_dns1035_label, is_dns1123_subdomain};
use crate::status::{
    field_duplicate, field_forbidden, field_invalid, field_not_supported, field_required,
    StatusCause,
};

type Causes = Vec<StatusCause>;

/// The annotation protected groups (`*.k8s.io`, `*.kubernetes.io`) need.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

const PRINTER_COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const PRINTER_COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
const OPENAPI_V3_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const MAX_SELECTABLE_FIELDS: usize = 8;

/// The fields kube allows at the root of a schema when the status subresource is enabled,
/// by Go field name (as its message lists them).
const ALLOWED_AT_ROOT: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";
/// JSON keys of schema fields outside that list.
const NOT_ALLOWED_AT_ROOT: &[&str] = &[
    "id",
    "$schema",
    "$ref",
    "default",
    "enum",
    "maxProperties",
    "minProperties",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "nullable",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
];

fn invalid(field: &str, value: &Value, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {detail}", render(value)),
        field: field.into(),
    }
}

/// A value as kube's field errors print it (strings quoted, structures as compact JSON).
fn render(value: &Value) -> String {
    match value {
        Value::String(s) => kubegate_policy::quote::go_quote(s),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// A Go `[]string` as `%#v` prints it.
fn go_strings(values: &[String]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| kubegate_policy::quote::go_quote(v))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn strings_at(value: Option<&Value>) -> Vec<String> {
    items(value)
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// What an update may relax, from the stored object (kube's `validationOptions`): a CRD
/// stored before a rule existed keeps validating.
#[derive(Clone)]
struct Options {
    require_open_api_schema: bool,
    require_valid_property_type: bool,
    require_structural_schema: bool,
    require_pruned_defaults: bool,
    require_atomic_set_type: bool,
    require_map_list_keys_map_set_validation: bool,
    require_immutable_names: bool,
    /// `conversionReviewVersions` must name one kube understands (unless the stored CRD's
    /// did not).
    require_recognized_conversion_review_version: bool,
    /// A conversion webhook's `caBundle` is checked only once the CRD is Established and its
    /// stored bundle was good.
    allow_invalid_ca_bundle: bool,
}

impl Options {
    fn create() -> Options {
        Options {
            require_open_api_schema: true,
            require_valid_property_type: true,
            require_structural_schema: true,
            require_pruned_defaults: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
            require_immutable_names: false,
            require_recognized_conversion_review_version: true,
            allow_invalid_ca_bundle: true,
        }
    }

    fn update(old: &Value) -> Options {
        let schemas: Vec<Schema> = items(old.pointer("/spec/versions"))
            .iter()
            .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
            .map(Schema::from_json)
            .collect();
        let all_have_schema = items(old.pointer("/spec/versions")).iter().all(|v| {
            v.pointer("/schema/openAPIV3Schema")
                .is_some_and(Value::is_object)
        });
        let any = |pred: &dyn Fn(&Schema) -> bool| schemas.iter().any(|s| s.any_node(pred));
        Options {
            require_open_api_schema: all_have_schema,
            require_valid_property_type: !any(&|s| {
                !s.type_.is_empty() && !OPENAPI_V3_TYPES.contains(&s.type_.as_str())
            }),
            require_structural_schema: schemas
                .iter()
                .all(|s| validate_structural("", s).is_empty()),
            require_pruned_defaults: schemas.iter().all(|s| {
                validate_defaults("", s, true)
                    .iter()
                    .all(|c| !c.message.contains("must not have unknown fields"))
            }),
            require_atomic_set_type: !any(&has_non_atomic_set_type),
            require_map_list_keys_map_set_validation: !any(&|s| {
                !map_list_keys_map_set(s, "").is_empty()
            }),
            require_immutable_names: condition_true(old, "Established"),
            require_recognized_conversion_review_version: {
                let versions =
                    strings_at(old.pointer("/spec/conversion/webhook/conversionReviewVersions"));
                versions.is_empty()
                    || versions
                        .iter()
                        .any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str()))
            },
            allow_invalid_ca_bundle: !condition_true(old, "Established")
                || old
                    .pointer("/spec/conversion/webhook/clientConfig/caBundle")
                    .and_then(Value::as_str)
                    .filter(|b| !b.is_empty())
                    .is_some_and(|b| ca_bundle_error(b).is_some()),
        }
    }
}

pub(crate) fn condition_true(crd: &Value, kind: &str) -> bool {
    items(crd.pointer("/status/conditions"))
        .iter()
        .any(|c| str_at(c, "/type") == kind && str_at(c, "/status") == "True")
}

/// kube's `ValidateCustomResourceDefinition` (create).
pub(crate) fn validate_crd(crd: &Value) -> Causes {
    let mut errs = validate_name(crd);
    errs.extend(validate_spec(crd, &Options::create()));
    errs.extend(validate_status(crd));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, None));
    errs.extend(validate_preserve_unknown_fields(crd, None));
    errs
}

/// kube's `ValidateCustomResourceDefinitionUpdate`.
pub(crate) fn validate_crd_update(crd: &Value, old: &Value) -> Causes {
    let opts = Options::update(old);
    let mut errs = validate_spec(crd, &opts);
    let spec = |o: &Value, p: &str| o.pointer(&format!("/spec{p}")).cloned();
    let mut immutable = |field: &str, pointer: &str| {
        let (new, previous) = (spec(crd, pointer), spec(old, pointer));
        if new.as_ref().filter(|v| !v.is_null()) != previous.as_ref().filter(|v| !v.is_null()) {
            errs.push(invalid(
                field,
                &new.unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
    };
    if opts.require_immutable_names {
        immutable("spec.scope", "/scope");
        immutable("spec.names.kind", "/names/kind");
    }
    immutable("spec.group", "/group");
    immutable("spec.names.plural", "/names/plural");
    errs.extend(validate_status(crd));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, Some(old)));
    errs.extend(validate_preserve_unknown_fields(crd, Some(old)));
    errs
}

/// The name rule beyond DNS-1123 (which the registry checks): `<plural>.<group>`.
fn validate_name(crd: &Value) -> Causes {
    let name = str_at(crd, "/metadata/name");
    let required = format!(
        "{}.{}",
        str_at(crd, "/spec/names/plural"),
        str_at(crd, "/spec/group")
    );
    if name.is_empty() || name == required {
        return Vec::new();
    }
    vec![field_invalid(
        "metadata.name",
        name,
        "must be spec.names.plural+\".\"+spec.group",
    )]
}

/// One entry of `spec.versions`, with what conversion to kube's internal version leaves on it.
struct Version<'a> {
    value: &'a Value,
    name: &'a str,
    schema: Option<&'a Value>,
    subresources: Option<&'a Value>,
    columns: &'a [Value],
    selectable_fields: &'a [Value],
}

/// The top-level fields kube's conversion hoists identical per-version values into.
struct Hoisted<'a> {
    validation: Option<&'a Value>,
    subresources: Option<&'a Value>,
    columns: &'a [Value],
    selectable_fields: &'a [Value],
}

fn split_versions(spec: &Value) -> (Vec<Version<'_>>, Hoisted<'_>) {
    let raw = items(spec.get("versions"));
    let field =
        |v: &'static str| move |version: &Value| version.get(v).filter(|x| !x.is_null()).cloned();
    let identical = |get: &dyn Fn(&Value) -> Option<Value>| {
        !raw.is_empty() && raw.iter().all(|v| get(v) == get(&raw[0]))
    };
    let same_schema = identical(&field("schema"));
    let same_subresources = identical(&field("subresources"));
    let same_columns = identical(&field("additionalPrinterColumns"));
    let same_selectable = identical(&field("selectableFields"));
    let first = raw.first();
    let hoisted = Hoisted {
        validation: first
            .and_then(|v| v.get("schema"))
            .filter(|v| same_schema && !v.is_null()),
        subresources: first
            .and_then(|v| v.get("subresources"))
            .filter(|v| same_subresources && !v.is_null()),
        columns: if same_columns {
            items(first.and_then(|v| v.get("additionalPrinterColumns")))
        } else {
            &[]
        },
        selectable_fields: if same_selectable {
            items(first.and_then(|v| v.get("selectableFields")))
        } else {
            &[]
        },
    };
    let versions = raw
        .iter()
        .map(|v| Version {
            value: v,
            name: str_at(v, "/name"),
            schema: v.get("schema").filter(|s| !same_schema && !s.is_null()),
            subresources: v
                .get("subresources")
                .filter(|s| !same_subresources && !s.is_null()),
            columns: if same_columns {
                &[]
            } else {
                items(v.get("additionalPrinterColumns"))
            },
            selectable_fields: if same_selectable {
                &[]
            } else {
                items(v.get("selectableFields"))
            },
        })
        .collect();
    (versions, hoisted)
}

fn has_status(subresources: Option<&Value>) -> bool {
    subresources
        .and_then(|s| s.get("status"))
        .is_some_and(|s| !s.is_null())
}

fn preserve_unknown_fields(crd: &Value) -> bool {
    crd.pointer("/spec/preserveUnknownFields") == Some(&Value::Bool(true))
}

fn validate_spec(crd: &Value, opts: &Options) -> Causes {
    let spec = crd.get("spec").unwrap_or(&Value::Null);
    let mut errs = Vec::new();
    let group = str_at(spec, "/group");
    if group.is_empty() {
        errs.push(field_required("spec.group", ""));
    } else {
        let problems = is_dns1123_subdomain(group);
        if !problems.is_empty() {
            errs.push(field_invalid("spec.group", group, &problems.join(",")));
        } else if !group.contains('.') {
            errs.push(field_invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    match str_at(spec, "/scope") {
        "" => errs.push(field_required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(field_not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }

    let (versions, hoisted) = split_versions(spec);
    let mut opts = opts.clone();
    if !preserve_unknown_fields(crd) {
        opts.require_structural_schema = true;
    }
    if opts.require_open_api_schema {
        if hoisted
            .validation
            .and_then(|v| v.get("openAPIV3Schema"))
            .is_none()
        {
            for (i, v) in versions.iter().enumerate() {
                if v.schema.and_then(|s| s.get("openAPIV3Schema")).is_none() {
                    errs.push(field_required(
                        &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                        "schemas are required",
                    ));
                }
            }
        }
    } else if !preserve_unknown_fields(crd)
        && hoisted
            .validation
            .and_then(|v| v.get("openAPIV3Schema"))
            .is_none()
    {
        for (i, v) in versions.iter().enumerate() {
            let served = v.value.get("served") == Some(&Value::Bool(true));
            if served && v.schema.and_then(|s| s.get("openAPIV3Schema")).is_none() {
                errs.push(field_required(
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let all_schemas: Vec<Schema> = items(spec.get("versions"))
        .iter()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .map(Schema::from_json)
        .collect();
    if all_schemas
        .iter()
        .any(|s| s.any_node(&|n| n.default.is_some()))
    {
        opts.require_structural_schema = true;
        if preserve_unknown_fields(crd) {
            errs.push(invalid(
                "spec.preserveUnknownFields",
                &json!(true),
                "must be false in order to use defaults in the schema",
            ));
        }
    }

    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        if v.value.get("storage") == Some(&Value::Bool(true)) {
            storage += 1;
        }
        if seen.contains(&v.name) {
            unique = false;
        } else {
            seen.push(v.name);
        }
        let problems = is_dns1035_label(v.name);
        if !problems.is_empty() {
            errs.push(field_invalid(
                &format!("{path}.name"),
                v.name,
                &problems.join(","),
            ));
        }
        let status_enabled = has_status(if hoisted.subresources.is_some() {
            hoisted.subresources
        } else {
            v.subresources
        });
        errs.extend(validate_version(v, &path, status_enabled, &opts));
    }
    let versions_value = spec.get("versions").cloned().unwrap_or(json!([]));
    if !unique {
        errs.push(invalid(
            "spec.versions",
            &versions_value,
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(invalid(
            "spec.versions",
            &versions_value,
            "must have exactly one version marked as storage version",
        ));
    }
    // kube's internal `spec.version` is the first version's name.
    if let Some(first) = versions.first() {
        let problems = is_dns1035_label(first.name);
        if !first.name.is_empty() && !problems.is_empty() {
            errs.push(field_invalid(
                "spec.version",
                first.name,
                &problems.join(","),
            ));
        }
    }

    for name in ["plural", "singular", "kind", "listKind"] {
        if str_at(spec, &format!("/names/{name}")).is_empty() {
            errs.push(field_required(&format!("spec.names.{name}"), ""));
        }
    }
    errs.extend(validate_names(spec.get("names"), "spec.names"));

    let any_status =
        has_status(hoisted.subresources) || versions.iter().any(|v| has_status(v.subresources));
    if let Some(validation) = hoisted.validation {
        errs.extend(validate_validation(
            validation,
            any_status,
            &opts,
            "spec.validation",
        ));
    }
    errs.extend(validate_subresources(
        hoisted.subresources,
        "spec.subresources",
    ));
    for (i, c) in hoisted.columns.iter().enumerate() {
        errs.extend(validate_column(
            c,
            &format!("spec.additionalPrinterColumns[{i}]"),
        ));
    }
    if !hoisted.selectable_fields.is_empty() {
        match hoisted.validation.and_then(|v| v.get("openAPIV3Schema")) {
            None => errs.push(invalid(
                "spec.selectableFields",
                &json!(""),
                "may only be set when validations.schema is included",
            )),
            Some(schema) => errs.extend(validate_selectable_fields(
                hoisted.selectable_fields,
                &Schema::from_json(schema),
                "spec.selectableFields",
            )),
        }
    }
    errs.extend(validate_conversion(crd, &opts));
    errs
}

fn validate_version(v: &Version<'_>, path: &str, status_enabled: bool, opts: &Options) -> Causes {
    let mut errs = Vec::new();
    let deprecated = v.value.get("deprecated") == Some(&Value::Bool(true));
    let warning = v.value.get("deprecationWarning").and_then(Value::as_str);
    for problem in deprecation_warning_problems(deprecated, warning) {
        errs.push(invalid(
            &format!("{path}.deprecationWarning"),
            &warning.map(|w| json!(w)).unwrap_or(Value::Null),
            &problem,
        ));
    }
    if let Some(schema) = v.schema {
        errs.extend(validate_validation(
            schema,
            status_enabled,
            opts,
            &format!("{path}.schema"),
        ));
    }
    errs.extend(validate_subresources(
        v.subresources,
        &format!("{path}.subresources"),
    ));
    for (i, c) in v.columns.iter().enumerate() {
        errs.extend(validate_column(
            c,
            &format!("{path}.additionalPrinterColumns[{i}]"),
        ));
    }
    if !v.selectable_fields.is_empty() {
        match v.schema.and_then(|s| s.get("openAPIV3Schema")) {
            None => errs.push(invalid(
                &format!("{path}.selectableFields"),
                &json!(""),
                "may only be set when `version.schema.openAPIV3Schema` is not included",
            )),
            Some(schema) => errs.extend(validate_selectable_fields(
                v.selectable_fields,
                &Schema::from_json(schema),
                &format!("{path}.selectableFields"),
            )),
        }
    }
    errs
}

/// kube's `validateDeprecationWarning`.
fn deprecation_warning_problems(deprecated: bool, warning: Option<&str>) -> Vec<String> {
    let Some(warning) = warning else {
        return Vec::new();
    };
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut problems = Vec::new();
    if warning.len() > 256 {
        problems.push("must be <= 256 characters long".into());
    }
    if warning.is_empty() {
        problems.push("must not be an empty string".into());
    }
    for (i, c) in warning.char_indices() {
        if c.is_control() {
            problems.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
    }
    problems
}

/// kube's `ValidateCustomResourceDefinitionNames` (for `spec.names` and
/// `status.acceptedNames`).
fn validate_names(names: Option<&Value>, path: &str) -> Causes {
    let names = names.unwrap_or(&Value::Null);
    let mut errs = Vec::new();
    let text = |k: &str| str_at(names, &format!("/{k}"));
    for field in ["plural", "singular"] {
        let value = text(field);
        let problems = is_dns1035_label(value);
        if !value.is_empty() && !problems.is_empty() {
            errs.push(field_invalid(
                &format!("{path}.{field}"),
                value,
                &problems.join(","),
            ));
        }
    }
    for field in ["kind", "listKind"] {
        let value = text(field);
        let problems = is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !problems.is_empty() {
            errs.push(field_invalid(
                &format!("{path}.{field}"),
                value,
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    problems.join(",")
                ),
            ));
        }
    }
    for (i, short) in strings_at(names.get("shortNames")).iter().enumerate() {
        let problems = is_dns1035_label(short);
        if !problems.is_empty() {
            errs.push(field_invalid(
                &format!("{path}.shortNames[{i}]"),
                short,
                &problems.join(","),
            ));
        }
    }
    if !text("kind").is_empty() && text("kind") == text("listKind") {
        errs.push(field_invalid(
            &format!("{path}.listKind"),
            text("listKind"),
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in strings_at(names.get("categories")).iter().enumerate() {
        let problems = is_dns1035_label(category);
        if !problems.is_empty() {
            errs.push(field_invalid(
                &format!("{path}.categories[{i}]"),
                category,
                &problems.join(","),
            ));
        }
    }
    errs
}

/// kube's `ValidateCustomResourceColumnDefinition`.
fn validate_column(column: &Value, path: &str) -> Causes {
    let mut errs = Vec::new();
    if str_at(column, "/name").is_empty() {
        errs.push(field_required(&format!("{path}.name"), ""));
    }
    let type_ = str_at(column, "/type");
    let one_of = |list: &str| format!("must be one of {list}");
    if type_.is_empty() {
        errs.push(field_required(
            &format!("{path}.type"),
            &one_of(PRINTER_COLUMN_TYPES),
        ));
    } else if !PRINTER_COLUMN_TYPES.split(',').any(|t| t == type_) {
        errs.push(field_invalid(
            &format!("{path}.type"),
            type_,
            &one_of(PRINTER_COLUMN_TYPES),
        ));
    }
    let format = str_at(column, "/format");
    if !format.is_empty() && !PRINTER_COLUMN_FORMATS.split(',').any(|f| f == format) {
        errs.push(field_invalid(
            &format!("{path}.format"),
            format,
            &one_of(PRINTER_COLUMN_FORMATS),
        ));
    }
    let json_path = str_at(column, "/jsonPath");
    if json_path.is_empty() {
        errs.push(field_required(&format!("{path}.JSONPath"), ""));
    } else {
        errs.extend(validate_simple_json_path(
            json_path,
            &format!("{path}.JSONPath"),
        ));
    }
    errs
}

/// kube's `validateSimpleJSONPath`.
fn validate_simple_json_path(s: &str, path: &str) -> Causes {
    if s.is_empty() {
        vec![field_invalid(path, s, "must not be empty")]
    } else if !s.starts_with('.') {
        vec![field_invalid(
            path,
            s,
            "must be a simple json path starting with .",
        )]
    } else {
        Vec::new()
    }
}

/// kube's `ValidateCustomResourceDefinitionSubresources`.
fn validate_subresources(subresources: Option<&Value>, path: &str) -> Causes {
    let mut errs = Vec::new();
    let Some(scale) = subresources
        .and_then(|s| s.get("scale"))
        .filter(|s| !s.is_null())
    else {
        return errs;
    };
    for (field, prefix, detail) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let value = str_at(scale, &format!("/{field}"));
        let field_path = format!("{path}.scale.{field}");
        if value.is_empty() {
            errs.push(field_required(&field_path, ""));
            continue;
        }
        let problems = validate_simple_json_path(value, &field_path);
        if !problems.is_empty() {
            errs.extend(problems);
        } else if !value.starts_with(prefix) {
            errs.push(field_invalid(&field_path, value, detail));
        }
    }
    let selector = str_at(scale, "/labelSelectorPath");
    if !selector.is_empty() {
        let field_path = format!("{path}.scale.labelSelectorPath");
        let problems = validate_simple_json_path(selector, &field_path);
        if !problems.is_empty() {
            errs.extend(problems);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errs.push(field_invalid(
                &field_path,
                selector,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// kube's `cel.ValidFieldPath` without array notation: `.a.b` through the schema's properties
/// (or its additionalProperties' keys); the names walked and the schema found, or Go's error.
fn valid_field_path<'s>(
    json_path: &'s str,
    schema: &'s Schema,
) -> Result<(Vec<&'s str>, &'s Schema), String> {
    // Tokens as kube's scanner splits them: '.', '[' and ']' alone, the text between them.
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, c) in json_path.char_indices() {
        if matches!(c, '.' | '[' | ']') {
            if i > start {
                tokens.push(&json_path[start..i]);
            }
            tokens.push(&json_path[i..i + 1]);
            start = i + 1;
        }
    }
    if start < json_path.len() {
        tokens.push(&json_path[start..]);
    }
    let mut names = Vec::new();
    let mut node = schema;
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        match token {
            "[" => return Err("array notation is not allowed".into()),
            "." => {
                let Some(name) = tokens.next() else {
                    return Err("unexpected end of JSON path".into());
                };
                node = if !node.properties.is_empty() {
                    node.properties
                        .get(name)
                        .ok_or("does not refer to a valid field")?
                } else if let Some(AdditionalProperties::Schema(values)) =
                    &node.additional_properties
                {
                    values
                } else {
                    return Err("does not refer to a valid field".into());
                };
                names.push(name);
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok((names, node))
}

/// kube's `ValidateCustomResourceSelectableFields`, with field paths resolved through the
/// schema's properties (dot notation only).
fn validate_selectable_fields(fields: &[Value], schema: &Schema, path: &str) -> Causes {
    let mut errs = Vec::new();
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let json_path = str_at(f, "/jsonPath");
        let field_path = format!("{path}[{i}].jsonPath");
        if json_path.is_empty() {
            errs.push(field_required(&field_path, ""));
            continue;
        }
        let (segments, found) = match valid_field_path(json_path, schema) {
            Ok(found) => found,
            Err(error) => {
                errs.push(field_invalid(
                    &field_path,
                    json_path,
                    &format!("is an invalid path: {error}"),
                ));
                continue;
            }
        };
        if segments.first() == Some(&"metadata") {
            errs.push(field_invalid(
                &field_path,
                json_path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(found.type_.as_str(), "string" | "boolean" | "integer") {
            errs.push(field_invalid(
                &field_path,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        let normalized = segments.join(".");
        if unique.contains(&normalized) {
            errs.push(field_duplicate(&field_path, json_path));
        } else {
            unique.push(normalized);
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(StatusCause {
            reason: "FieldValueTooMany".into(),
            message: format!(
                "Too many: {}: must have at most {MAX_SELECTABLE_FIELDS} items",
                unique.len()
            ),
            field: path.into(),
        });
    }
    errs
}

/// The `ConversionReview` versions kube sends (`apiextensions.k8s.io/v1` and `v1beta1`).
pub(crate) const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// kube's `validateCustomResourceConversion`.
fn validate_conversion(crd: &Value, opts: &Options) -> Causes {
    let mut errs = Vec::new();
    let Some(conversion) = crd.pointer("/spec/conversion").filter(|c| !c.is_null()) else {
        return errs;
    };
    let strategy = str_at(conversion, "/strategy");
    if strategy != "None" && preserve_unknown_fields(crd) && !strategy.is_empty() {
        errs.push(field_invalid(
            "spec.conversion.strategy",
            strategy,
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    let webhook = conversion.get("webhook").filter(|w| !w.is_null());
    let client_config = webhook
        .and_then(|w| w.get("clientConfig"))
        .filter(|c| !c.is_null());
    let review_versions = webhook.and_then(|w| w.get("conversionReviewVersions"));
    match strategy {
        "" => errs.push(field_required("spec.conversion.strategy", "")),
        "None" => {}
        "Webhook" => {
            match client_config {
                None => errs.push(field_required(
                    "spec.conversion.webhookClientConfig",
                    "required when strategy is set to Webhook",
                )),
                Some(config) => errs.extend(validate_webhook_client_config(config, opts)),
            }
            errs.extend(validate_conversion_review_versions(
                &strings_at(review_versions),
                opts.require_recognized_conversion_review_version,
            ));
        }
        other => errs.push(field_not_supported(
            "spec.conversion.strategy",
            other,
            &["None", "Webhook"],
        )),
    }
    if strategy != "Webhook" {
        if client_config.is_some() {
            errs.push(field_forbidden(
                "spec.conversion.webhookClientConfig",
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !items(review_versions).is_empty() {
            errs.push(field_forbidden(
                "spec.conversion.conversionReviewVersions",
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// kube's checks of a conversion webhook's `clientConfig` (`ValidateWebhookURL`,
/// `ValidateWebhookService`, `ValidateCABundle`).
fn validate_webhook_client_config(config: &Value, opts: &Options) -> Causes {
    const PATH: &str = "spec.conversion.webhookClientConfig";
    let url = config.get("url").and_then(Value::as_str);
    let service = config.get("service").filter(|s| !s.is_null());
    let mut errs = match (url, service) {
        (Some(url), None) => validate_webhook_url(&format!("{PATH}.url"), url),
        (None, Some(service)) => validate_webhook_service(&format!("{PATH}.service"), service),
        _ => vec![field_required(
            PATH,
            "exactly one of url or service is required",
        )],
    };
    if let Some(bundle) = config.get("caBundle").and_then(Value::as_str) {
        if !bundle.is_empty() && !opts.allow_invalid_ca_bundle {
            if let Some(why) = ca_bundle_error(bundle) {
                errs.push(StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: format!("Invalid value: {}: {why}", go_bytes(bundle)),
                    field: format!("{PATH}.caBundle"),
                });
            }
        }
    }
    errs
}

/// Why a base64 `caBundle` would not load as client-go's roots, if it would not
/// (`transport.TLSConfigFor`'s `rootCertPool` and its `createErrorParsingCAData`). A bundle
/// that is not base64 was refused when the object was decoded.
fn ca_bundle_error(bundle: &str) -> Option<String> {
    let pem = super::b64::decode_std(bundle).ok()?;
    let blocks = pem_blocks(&pem);
    let parses =
        |block: &PemBlock<'_>| kubegate_policy::https::root_store_from_pem(block.text).is_ok();
    if blocks
        .iter()
        .any(|b| b.kind == "CERTIFICATE" && !b.has_headers && parses(b))
    {
        return None;
    }
    let why = (|| {
        for block in &blocks {
            if block.kind != "CERTIFICATE" || block.has_headers {
                continue;
            }
            if !parses(block) {
                return "failed to parse certificate: x509: malformed certificate".to_string();
            }
        }
        // Go's loop ends on bytes left over that hold no further block.
        if blocks.last().map_or(!pem.is_empty(), |b| !b.rest_empty) {
            return "unable to parse bytes as PEM block".to_string();
        }
        "no valid certificate authority data seen".to_string()
    })();
    Some(format!("unable to load root certificates: {why}"))
}

/// One PEM block as Go's `pem.Decode` finds it.
struct PemBlock<'a> {
    kind: &'a str,
    /// The block's text, `-----BEGIN` to `-----END ...-----`.
    text: &'a [u8],
    has_headers: bool,
    /// Whether nothing follows the block.
    rest_empty: bool,
}

/// The PEM blocks of `data`, in order (text before, between and after them is skipped, as Go
/// skips it).
fn pem_blocks(data: &[u8]) -> Vec<PemBlock<'_>> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let mut blocks = Vec::new();
    let mut at = 0;
    while let Some(offset) = memchr::memmem::find(&data[at..], BEGIN) {
        let start = at + offset;
        let after_begin = start + BEGIN.len();
        let Some(type_end) =
            memchr::memmem::find(&data[after_begin..], b"-----").map(|e| after_begin + e)
        else {
            break;
        };
        let kind = std::str::from_utf8(&data[after_begin..type_end]).unwrap_or("");
        let end_marker = format!("-----END {kind}-----");
        let Some(end) = memchr::memmem::find(&data[type_end..], end_marker.as_bytes())
            .map(|e| type_end + e + end_marker.len())
        else {
            break;
        };
        let body = &data[type_end + 5..end - end_marker.len()];
        let has_headers = body.split(|b| *b == b'\n').any(|line| line.contains(&b':'));
        let mut next = end;
        if data.get(next) == Some(&b'\r') {
            next += 1;
        }
        if data.get(next) == Some(&b'\n') {
            next += 1;
        }
        blocks.push(PemBlock {
            kind,
            text: &data[start..end],
            has_headers,
            rest_empty: next >= data.len(),
        });
        at = next;
    }
    blocks
}

/// A base64 `[]byte` field as Go's `%#v` prints the decoded bytes.
fn go_bytes(bundle: &str) -> String {
    let bytes = super::b64::decode_std(bundle).unwrap_or_default();
    let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
    format!("[]byte{{{}}}", hex.join(", "))
}

/// The parts of a URL Go's `url.Parse` gives kube's webhook URL check.
struct UrlParts<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

fn split_url(url: &str) -> UrlParts<'_> {
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    // A scheme is letters first, then letters, digits, `+`, `-` or `.`, before a `:`.
    let (scheme, rest) = match rest.split_once(':') {
        Some((scheme, after))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (scheme, after)
        }
        _ => ("", rest),
    };
    let (user, host) = match rest.strip_prefix("//") {
        Some(authority) => {
            let authority = authority.split('/').next().unwrap_or("");
            match authority.rsplit_once('@') {
                Some((user, host)) => (Some(user), host),
                None => (None, authority),
            }
        }
        None => (None, ""),
    };
    UrlParts {
        scheme,
        user,
        host,
        query,
        fragment,
    }
}

/// Why Go's `url.Parse` refuses `url`, for the errors kube's webhook URL check reports
/// (control characters, a missing scheme, a host or port it cannot take).
fn url_parse_error(url: &str) -> Option<String> {
    if url.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Some("net/url: invalid control character in URL".into());
    }
    if url.starts_with(':') {
        return Some("missing protocol scheme".into());
    }
    let parts = split_url(url);
    let host = parts.host;
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((_, port)) => ("", port),
            None => return Some("missing ']' in host".into()),
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) => (name, port),
            None => (host, ""),
        },
    };
    if !port.is_empty()
        && !port
            .trim_start_matches(':')
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        return Some(format!("invalid port {port:?} after host"));
    }
    // Go accepts the URL-host characters (RFC 3986 unreserved, sub-delims, `%` escapes).
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=%".contains(*c) || !c.is_ascii()))
    {
        return Some(format!(
            "invalid character {:?} in host name",
            bad.to_string()
        ));
    }
    None
}

/// kube's `ValidateWebhookURL` with https required.
fn validate_webhook_url(path: &str, url: &str) -> Causes {
    const FORM: &str = "; desired format: https://host[/path]";
    if let Some(why) = url_parse_error(url) {
        return vec![field_required(
            path,
            &format!("url must be a valid URL: parse {url:?}: {why}{FORM}"),
        )];
    }
    let parts = split_url(url);
    let mut errs = Vec::new();
    if parts.scheme != "https" {
        errs.push(field_invalid(
            path,
            parts.scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if parts.host.is_empty() {
        errs.push(field_invalid(
            path,
            "",
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = parts.user {
        errs.push(field_invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !parts.fragment.is_empty() {
        errs.push(field_invalid(
            path,
            parts.fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !parts.query.is_empty() {
        errs.push(field_invalid(
            path,
            parts.query,
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// kube's `ValidateWebhookService` (the API defaults the port to 443).
fn validate_webhook_service(path: &str, service: &Value) -> Causes {
    let mut errs = Vec::new();
    if str_at(service, "/name").is_empty() {
        errs.push(field_required(
            &format!("{path}.name"),
            "service name is required",
        ));
    }
    if str_at(service, "/namespace").is_empty() {
        errs.push(field_required(
            &format!("{path}.namespace"),
            "service namespace is required",
        ));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"
            ),
            field: format!("{path}.port"),
        });
    }
    let Some(url_path) = service.get("path").and_then(Value::as_str) else {
        return errs;
    };
    let field = format!("{path}.path");
    if url_path.is_empty() || url_path == "/" {
        return errs;
    }
    if url_path == "//" {
        errs.push(field_invalid(
            &field,
            url_path,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(field_invalid(&field, url_path, "must start with a '/'"));
    }
    let inner = url_path.get(1..).unwrap_or("");
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    for (i, step) in inner.split('/').enumerate() {
        if step.is_empty() {
            errs.push(field_invalid(
                &field,
                url_path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            errs.push(field_invalid(
                &field,
                url_path,
                &format!("segment[{i}]: {failure}"),
            ));
        }
    }
    errs
}

/// kube's `validateConversionReviewVersions`.
fn validate_conversion_review_versions(versions: &[String], require_recognized: bool) -> Causes {
    const PATH: &str = "spec.conversion.conversionReviewVersions";
    if versions.is_empty() {
        return vec![field_required(PATH, "")];
    }
    let mut errs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut accepted = false;
    for (i, version) in versions.iter().enumerate() {
        let field = format!("{PATH}[{i}]");
        if !seen.insert(version.as_str()) {
            errs.push(field_invalid(&field, version, "duplicate version"));
            continue;
        }
        for failure in is_dns1035_label(version) {
            errs.push(field_invalid(&field, version, &failure));
        }
        accepted |= ACCEPTED_REVIEW_VERSIONS.contains(&version.as_str());
    }
    if require_recognized && !accepted {
        errs.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: must include at least one of v1, v1beta1",
                go_strings(versions)
            ),
            field: PATH.into(),
        });
    }
    errs
}

/// kube's `ValidateUpdateCustomResourceDefinitionStatus` (metadata aside: the registry checks
/// it).
pub(crate) fn validate_crd_status_update(crd: &Value) -> Causes {
    validate_status(crd)
}

/// kube's `ValidateCustomResourceDefinitionStatus`.
fn validate_status(crd: &Value) -> Causes {
    validate_names(crd.pointer("/status/acceptedNames"), "status.acceptedNames")
}

/// kube's `ValidateCustomResourceDefinitionStoredVersions`.
fn validate_stored_versions(crd: &Value) -> Causes {
    let path = "status.storedVersions";
    let stored = strings_at(crd.pointer("/status/storedVersions"));
    if stored.is_empty() {
        return vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: must have at least one stored version",
                go_strings(&stored)
            ),
            field: path.into(),
        }];
    }
    let mut errs = Vec::new();
    let versions = items(crd.pointer("/spec/versions"));
    for v in versions {
        let name = str_at(v, "/name");
        if v.get("storage") == Some(&Value::Bool(true)) && !stored.iter().any(|s| s == name) {
            errs.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: must have the storage version {name}",
                    go_strings(&stored)
                ),
                field: path.into(),
            });
        }
    }
    for (i, s) in stored.iter().enumerate() {
        if versions.iter().any(|v| str_at(v, "/name") == s) {
            continue;
        }
        // kube reports each missing version once, at its last index.
        if stored[i + 1..].contains(s) {
            continue;
        }
        errs.push(field_invalid(
            &format!("{path}[{i}]"),
            s,
            &format!("missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"),
        ));
    }
    errs
}

fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

#[derive(PartialEq)]
enum Approval {
    Missing,
    Bypassed,
    Approved,
    Invalid,
}

fn approval_state(crd: &Value) -> Approval {
    let annotation = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    if annotation.is_empty() {
        Approval::Missing
    } else if annotation.starts_with("unapproved") {
        Approval::Bypassed
    } else if annotation.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/')
    }) {
        Approval::Approved
    } else {
        Approval::Invalid
    }
}

/// kube's API approval controller's `KubernetesAPIApprovalPolicyConformant` condition of a CRD
/// in a protected group, as (status, reason, message); `None` for other groups.
pub(crate) fn api_approval_condition(crd: &Value) -> Option<(&'static str, &'static str, String)> {
    if !is_protected_group(str_at(crd, "/spec/group")) {
        return None;
    }
    let annotation = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    Some(match approval_state(crd) {
        Approval::Missing => ("False", "MissingAnnotation", format!("protected groups must have approval annotation \"{API_APPROVED_ANNOTATION}\", see https://github.com/kubernetes/enhancements/pull/1111")),
        Approval::Bypassed => ("False", "UnapprovedAnnotation", format!("not approved: {}", kubegate_policy::quote::go_quote(annotation))),
        Approval::Approved => ("True", "ApprovedAnnotation", format!("approved in {annotation}")),
        Approval::Invalid => ("False", "InvalidAnnotation", format!("protected groups must have approval annotation \"{API_APPROVED_ANNOTATION}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111")),
    })
}

/// kube's `validateAPIApproval` for the protected `*.k8s.io` and `*.kubernetes.io` groups.
fn validate_api_approval(crd: &Value, old: Option<&Value>) -> Causes {
    if !is_protected_group(str_at(crd, "/spec/group")) {
        return Vec::new();
    }
    let state = approval_state(crd);
    if old.is_some_and(|o| approval_state(o) == state) {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{API_APPROVED_ANNOTATION}]");
    let value = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    match state {
        Approval::Missing => vec![field_required(
            &field,
            &format!("protected groups must have approval annotation \"{API_APPROVED_ANNOTATION}\", see https://github.com/kubernetes/enhancements/pull/1111"),
        )],
        Approval::Invalid => vec![field_invalid(
            &field,
            value,
            &format!("protected groups must have approval annotation \"{API_APPROVED_ANNOTATION}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"),
        )],
        Approval::Approved | Approval::Bypassed => Vec::new(),
    }
}

/// kube's `validatePreserveUnknownFields`: v1 CRDs may not set `spec.preserveUnknownFields`.
fn validate_preserve_unknown_fields(crd: &Value, old: Option<&Value>) -> Causes {
    if old.is_some_and(preserve_unknown_fields) || !preserve_unknown_fields(crd) {
        return Vec::new();
    }
    vec![invalid(
        "spec.preserveUnknownFields",
        &json!(true),
        "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
    )]
}

// ---- schemas ------------------------------------------------------------------------------

/// How a schema node is checked: kube's `specStandardValidatorV3`.
#[derive(Clone)]
struct NodeRules {
    allow_defaults: bool,
    disallow_defaults_reason: String,
    inside_resource_meta: bool,
    require_valid_property_type: bool,
    /// The highest node above whose old and new values cannot be paired (kube's
    /// `withForbidOldSelfValidations`): no rule below may read `oldSelf`.
    uncorrelatable: Option<String>,
}

impl NodeRules {
    /// Below `path`, old and new values cannot be paired; the highest such path is kept.
    fn forbid_old_self(&self, path: &str) -> NodeRules {
        NodeRules {
            uncorrelatable: self
                .uncorrelatable
                .clone()
                .or_else(|| Some(path.to_string())),
            ..self.clone()
        }
    }

    fn forbid_defaults(&self, reason: &str) -> NodeRules {
        NodeRules {
            allow_defaults: false,
            disallow_defaults_reason: reason.into(),
            ..self.clone()
        }
    }
}

/// kube's `validateCustomResourceDefinitionValidation` for `<path>.openAPIV3Schema`
/// (`path` is `spec.validation` or `spec.versions[i].schema`).
fn validate_validation(
    validation: &Value,
    status_enabled: bool,
    opts: &Options,
    path: &str,
) -> Causes {
    let mut errs = Vec::new();
    let Some(raw) = validation.get("openAPIV3Schema").filter(|s| s.is_object()) else {
        return errs;
    };
    let schema_path = format!("{path}.openAPIV3Schema");
    if status_enabled {
        let keys: Vec<&String> = entries(Some(raw))
            .into_iter()
            .filter(|(_, v)| !is_zero(v))
            .map(|(k, _)| k)
            .collect();
        let early = keys
            .iter()
            .any(|k| matches!(k.as_str(), "id" | "$schema" | "$ref"));
        let type_ = str_at(raw, "/type");
        let root_error = || {
            invalid(
                &schema_path,
                raw,
                &format!("only {ALLOWED_AT_ROOT} fields are allowed at the root of the schema if the status subresource is enabled"),
            )
        };
        if early {
            errs.push(root_error());
        } else if !type_.is_empty() && type_ != "object" {
            errs.push(field_invalid(
                &format!("{schema_path}.type"),
                type_,
                "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
            ));
        } else if keys
            .iter()
            .any(|k| NOT_ALLOWED_AT_ROOT.contains(&k.as_str()))
        {
            errs.push(root_error());
        }
    }
    let schema = Schema::from_json(raw);
    if schema.nullable {
        errs.push(field_forbidden(
            &format!("{schema_path}.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let rules = NodeRules {
        allow_defaults: true,
        disallow_defaults_reason: String::new(),
        inside_resource_meta: false,
        require_valid_property_type: opts.require_valid_property_type,
        uncorrelatable: None,
    };
    let mut init_errs = Vec::new();
    if opts.require_structural_schema {
        if let Some(problem) = structural_init_error(&schema) {
            init_errs.push(invalid(&schema_path, &json!(""), &problem));
        } else {
            let structural = validate_structural(&schema_path, &schema);
            if !structural.is_empty() {
                errs.extend(structural);
            } else {
                errs.extend(validate_defaults(
                    &schema_path,
                    &schema,
                    opts.require_pruned_defaults,
                ));
            }
        }
    }
    validate_schema_node(&schema, &schema_path, &rules, true, opts, &mut errs);
    if errs.is_empty() {
        errs.extend(init_errs);
    }
    errs
}

/// Go's zero value check for the root-field restriction.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(_) => false,
    }
}

/// kube's `NewStructural` errors: keywords it cannot represent.
fn structural_init_error(s: &Schema) -> Option<String> {
    fn first(s: &Schema) -> Option<String> {
        if let Some(k) = s.unsupported.first() {
            let name = match *k {
                "$schema" => "schema",
                other => other,
            };
            return Some(format!("OpenAPIV3Schema '{name}' is not supported"));
        }
        if s.items_is_array {
            return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into());
        }
        s.items
            .as_deref()
            .and_then(first)
            .or_else(|| s.properties.values().find_map(first))
            .or_else(|| s.additional_properties_schema().and_then(first))
            .or_else(|| {
                s.all_of
                    .iter()
                    .chain(&s.one_of)
                    .chain(&s.any_of)
                    .find_map(first)
            })
            .or_else(|| s.not.as_deref().and_then(first))
    }
    first(s)
}

fn has_non_atomic_set_type(s: &Schema) -> bool {
    if s.x_list_type.as_deref() != Some("set") {
        return false;
    }
    let Some(items) = &s.items else {
        return false;
    };
    match items.type_.as_str() {
        "array" => items.x_list_type.as_deref().is_some_and(|t| t != "atomic"),
        "object" => items.x_map_type.as_deref() != Some("atomic"),
        _ => false,
    }
}

/// kube's `validateMapListKeysMapSet`.
fn map_list_keys_map_set(s: &Schema, path: &str) -> Causes {
    let mut errs = Vec::new();
    let (Some(items), Some(list_type)) = (&s.items, s.x_list_type.as_deref()) else {
        return errs;
    };
    if list_type != "set" && list_type != "map" {
        return errs;
    }
    if items.nullable {
        errs.push(field_forbidden(
            &format!("{path}.items.nullable"),
            &format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type == "map" {
        for k in &s.x_list_map_keys {
            let Some(p) = items.properties.get(k) else {
                continue;
            };
            let prop_path = format!("{path}.items.properties[{k}]");
            if !items.required.contains(k) && p.default.is_none() {
                errs.push(field_required(
                    &format!("{prop_path}.default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if p.nullable {
                errs.push(field_forbidden(
                    &format!("{prop_path}.nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errs
}

const SUPPORTED_RULE_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// kube's `ValidateCustomResourceDefinitionOpenAPISchema` for one node and below.
fn validate_schema_node(
    s: &Schema,
    path: &str,
    rules: &NodeRules,
    is_root: bool,
    opts: &Options,
    errs: &mut Causes,
) {
    standard_checks(s, path, rules, errs);
    if s.unique_items {
        errs.push(field_forbidden(
            &format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(additional) = &s.additional_properties {
        let restrictive = matches!(
            additional,
            AdditionalProperties::Allows(false) | AdditionalProperties::Schema(_)
        );
        if !s.properties.is_empty() && restrictive {
            errs.push(field_forbidden(
                &format!("{path}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let AdditionalProperties::Schema(a) = additional {
            let sub = if rules.inside_resource_meta {
                rules.forbid_defaults("inside additionalProperties applying to object metadata")
            } else {
                rules.clone()
            };
            validate_schema_node(
                a,
                &format!("{path}.additionalProperties"),
                &sub,
                false,
                opts,
                errs,
            );
        }
    }
    for (name, p) in &s.properties {
        // kube's `MapIsCorrelatable`: granular and atomic maps (the only types there are)
        // pair their properties with their old values; an unknown map type would not.
        let mut sub = if matches!(s.x_map_type.as_deref(), None | Some("granular" | "atomic")) {
            rules.clone()
        } else {
            rules.forbid_old_self(path)
        };
        if (is_root || s.x_embedded_resource)
            && matches!(name.as_str(), "metadata" | "kind" | "apiVersion")
        {
            sub.inside_resource_meta = true;
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {name}"));
            }
        }
        validate_schema_node(
            p,
            &format!("{path}.properties[{name}]"),
            &sub,
            false,
            opts,
            errs,
        );
    }
    if let Some(not) = &s.not {
        validate_schema_node(not, &format!("{path}.not"), rules, false, opts, errs);
    }
    for (name, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            validate_schema_node(n, &format!("{path}.{name}[{i}]"), rules, false, opts, errs);
        }
    }
    if let Some(items) = &s.items {
        // Only a map list's items are paired with their old values (by key).
        let sub = if s.x_list_type.as_deref() == Some("map") {
            rules.clone()
        } else {
            rules.forbid_old_self(path)
        };
        validate_schema_node(items, &format!("{path}.items"), &sub, false, opts, errs);
    }
    if s.x_preserve_unknown_fields == Some(false) {
        errs.push(invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            &json!(false),
            "must be true or undefined",
        ));
    }
    let type_path = format!("{path}.type");
    if let Some(map_type) = &s.x_map_type {
        if s.type_ != "object" {
            let detail = "must be object if x-kubernetes-map-type is specified";
            if s.type_.is_empty() {
                errs.push(field_required(&type_path, detail));
            } else {
                errs.push(field_invalid(&type_path, &s.type_, detail));
            }
        }
        if map_type != "atomic" && map_type != "granular" {
            errs.push(field_not_supported(
                &format!("{path}.x-kubernetes-map-type"),
                map_type,
                &["atomic", "granular"],
            ));
        }
    }
    if s.x_list_type.is_some() && s.type_ != "array" {
        let detail = "must be array if x-kubernetes-list-type is specified";
        if s.type_.is_empty() {
            errs.push(field_required(&type_path, detail));
        } else {
            errs.push(field_invalid(&type_path, &s.type_, detail));
        }
    } else if opts.require_atomic_set_type && has_non_atomic_set_type(s) {
        if let Some(items) = &s.items {
            let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
            if items.type_ == "array" {
                errs.push(invalid(
                    &format!("{path}.items.x-kubernetes-list-type"),
                    &json!(items.x_list_type),
                    detail,
                ));
            } else {
                errs.push(invalid(
                    &format!("{path}.items.x-kubernetes-map-type"),
                    &json!(items.x_list_type),
                    detail,
                ));
            }
        }
    }
    if let Some(list_type) = &s.x_list_type {
        if !matches!(list_type.as_str(), "atomic" | "set" | "map") {
            errs.push(field_not_supported(
                &format!("{path}.x-kubernetes-list-type"),
                list_type,
                &["atomic", "set", "map"],
            ));
        }
    }
    let keys_path = format!("{path}.x-kubernetes-list-map-keys");
    if !s.x_list_map_keys.is_empty() {
        match s.x_list_type.as_deref() {
            None => errs.push(field_required(
                &format!("{path}.x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => errs.push(field_invalid(
                &format!("{path}.x-kubernetes-list-type"),
                other,
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    if s.x_list_type.as_deref() == Some("map") {
        if s.x_list_map_keys.is_empty() {
            errs.push(field_required(
                &keys_path,
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        if s.items.is_none() && !s.items_is_array {
            errs.push(field_required(
                &format!("{path}.items"),
                "must have a schema if x-kubernetes-list-type is map",
            ));
        }
        if s.items_is_array {
            errs.push(invalid(
                &format!("{path}.items"),
                &json!([]),
                "must only have a single schema if x-kubernetes-list-type is map",
            ));
        }
        if let Some(items) = &s.items {
            if items.type_ != "object" {
                errs.push(field_invalid(
                    &format!("{path}.items.type"),
                    &items.type_,
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            } else {
                let keys_value = json!(s.x_list_map_keys);
                let mut seen: Vec<&String> = Vec::new();
                for k in &s.x_list_map_keys {
                    match items.properties.get(k) {
                        Some(p) if p.type_ == "array" || p.type_ == "object" => {
                            errs.push(field_invalid(
                                &format!("{path}.items.properties[{k}].type"),
                                &items.type_,
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        Some(_) => {}
                        None => errs.push(invalid(
                            &keys_path,
                            &keys_value,
                            "entries must all be names of item properties",
                        )),
                    }
                    if seen.contains(&k) {
                        errs.push(invalid(
                            &keys_path,
                            &keys_value,
                            "must not contain duplicate entries",
                        ));
                    }
                    seen.push(k);
                }
            }
        }
    }
    if opts.require_map_list_keys_map_set_validation {
        errs.extend(map_list_keys_map_set(s, path));
    }
    let before_rules = errs.len();
    for (i, rule) in s.x_validations.iter().enumerate() {
        let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
        let text = |k: &str| str_at(rule, &format!("/{k}"));
        let expression = text("rule").trim();
        let message = text("message");
        let has_newline = |s: &str| s.contains('\n') || s.contains('\r');
        if expression.is_empty() {
            errs.push(field_required(
                &format!("{rule_path}.rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && message.trim().is_empty() {
            errs.push(field_invalid(
                &format!("{rule_path}.message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if has_newline(message.trim()) {
            errs.push(field_invalid(
                &format!("{rule_path}.message"),
                message,
                "message must not contain line breaks",
            ));
        } else if has_newline(expression) && message.trim().is_empty() {
            errs.push(field_required(
                &format!("{rule_path}.message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        let message_expression = text("messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errs.push(field_required(
                &format!("{rule_path}.messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str) {
            if !SUPPORTED_RULE_REASONS.contains(&reason) {
                errs.push(field_not_supported(
                    &format!("{rule_path}.reason"),
                    reason,
                    SUPPORTED_RULE_REASONS,
                ));
            }
        }
        let field_path = text("fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(field_invalid(
                &format!("{rule_path}.fieldPath"),
                field_path,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newline(field_path) {
            errs.push(field_invalid(
                &format!("{rule_path}.fieldPath"),
                field_path,
                "fieldPath must not contain line breaks",
            ));
        }
        if !field_path.is_empty() && !crate::machinery::schema::field_path_valid(field_path, s) {
            errs.push(field_invalid(
                &format!("{rule_path}.fieldPath"),
                field_path,
                "fieldPath must be a valid path",
            ));
        }
    }
    // kube compiles a node's rules only when its rules' own fields are sound: otherwise the
    // compiler's errors would be noise until those are fixed.
    if errs.len() == before_rules {
        for (i, rule) in s.x_validations.iter().enumerate() {
            let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
            errs.extend(crate::machinery::schema::compile_errors(
                &rule_path,
                rule,
                s,
                is_root || s.x_embedded_resource,
                rules.uncorrelatable.as_deref(),
            ));
        }
    }
}

/// kube's `specStandardValidatorV3.validate` for one node.
fn standard_checks(s: &Schema, path: &str, rules: &NodeRules, errs: &mut Causes) {
    if rules.require_valid_property_type
        && !s.type_.is_empty()
        && !OPENAPI_V3_TYPES.contains(&s.type_.as_str())
    {
        errs.push(field_not_supported(
            &format!("{path}.type"),
            &s.type_,
            OPENAPI_V3_TYPES,
        ));
    }
    if s.default.is_some() && !rules.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !rules.disallow_defaults_reason.is_empty() {
            detail.push(' ');
            detail.push_str(&rules.disallow_defaults_reason);
        }
        errs.push(field_forbidden(&format!("{path}.default"), &detail));
    }
    for (keyword, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if s.unsupported.contains(&keyword) {
            errs.push(field_forbidden(&format!("{path}.{keyword}"), detail));
        }
    }
    if s.type_ == "null" {
        errs.push(field_forbidden(
            &format!("{path}.type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if s.items_is_array {
        errs.push(field_forbidden(
            &format!("{path}.items"),
            "items must be a schema object and not an array",
        ));
    }
    if rules.inside_resource_meta && s.x_embedded_resource {
        errs.push(field_forbidden(
            &format!("{path}.x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's CronTab example as the strategy leaves it before validation.
    fn crontab() -> Value {
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab",
                          "listKind": "CronTabList", "shortNames": ["ct"]},
                "conversion": {"strategy": "None"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"},
                            "replicas": {"type": "integer", "default": 1}}},
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}]
                }]
            },
            "status": {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]}
        });
        if let Some(map) = crd.as_object_mut() {
            map.remove("ignored");
        }
        crd
    }

    fn rendered(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn crd_validation_matches_kube() {
        assert_eq!(rendered(&validate_crd(&crontab())), Vec::<String>::new());
        type Edit = fn(&mut Value);
        let cases: Vec<(&str, Edit, Vec<&str>)> = vec![
            ("name must be plural.group", |c| c["metadata"]["name"] = json!("crontabs"), vec![
                "metadata.name: Invalid value: \"crontabs\": must be spec.names.plural+\".\"+spec.group",
            ]),
            ("group needs a dot", |c| {
                c["spec"]["group"] = json!("example");
                c["metadata"]["name"] = json!("crontabs.example");
            }, vec!["spec.group: Invalid value: \"example\": should be a domain with at least one dot"]),
            ("scope", |c| c["spec"]["scope"] = json!("Global"), vec![
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            ]),
            ("version names", |c| {
                c["spec"]["versions"][0]["name"] = json!("V1");
                c["status"]["storedVersions"] = json!(["V1"]);
            }, vec![
                "spec.versions[0].name: Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.version: Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ]),
            ("names", |c| {
                c["spec"]["names"]["kind"] = json!("Cron_Tab");
                c["spec"]["names"]["shortNames"] = json!(["C T"]);
                c["spec"]["names"]["listKind"] = json!("Cron_Tab");
            }, vec![
                "spec.names.kind: Invalid value: \"Cron_Tab\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.names.listKind: Invalid value: \"Cron_Tab\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.names.shortNames[0]: Invalid value: \"C T\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.names.listKind: Invalid value: \"Cron_Tab\": kind and listKind may not be the same",
            ]),
            ("deprecation warning", |c| c["spec"]["versions"][0]["deprecationWarning"] = json!("old"), vec![
                "spec.versions[0].deprecationWarning: Invalid value: \"old\": can only be set for deprecated versions",
            ]),
            ("selectable field paths", |c| {
                c["spec"]["versions"][0]["selectableFields"] = json!([
                    {"jsonPath": ".spec.z"}, {"jsonPath": "spec.y"}, {"jsonPath": ".spec[0]"},
                    {"jsonPath": ".spec."}]);
            }, vec![
                "spec.selectableFields[0].jsonPath: Invalid value: \".spec.z\": is an invalid path: does not refer to a valid field",
                "spec.selectableFields[1].jsonPath: Invalid value: \"spec.y\": is an invalid path: expected [ or . but got: spec",
                "spec.selectableFields[2].jsonPath: Invalid value: \".spec[0]\": is an invalid path: array notation is not allowed",
                "spec.selectableFields[3].jsonPath: Invalid value: \".spec.\": is an invalid path: unexpected end of JSON path",
            ]),
            ("oldSelf where old values cannot be paired", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tags"] = json!({
                    "type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}});
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["whole"] = json!({
                    "type": "object", "x-kubernetes-map-type": "atomic",
                    "properties": {"n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf"}]}}});
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["keyed"] = json!({
                    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}},
                              "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}});
            }, vec![
                "spec.validation.openAPIV3Schema.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[tags]",
            ]),
            ("missing schema", |c| {
                if let Some(v) = c["spec"]["versions"][0].as_object_mut() {
                    v.remove("schema");
                }
            }, vec!["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]),
            ("non-structural schema", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"] = json!({"description": "no type"});
            }, vec![
                "spec.validation.openAPIV3Schema.properties[spec].properties[image].type: Required value: must not be empty for specified object fields",
            ]),
            ("schema keywords", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["list"] = json!({
                    "type": "array", "uniqueItems": true, "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["a"]});
            }, vec![
                "spec.validation.openAPIV3Schema.properties[spec].properties[list].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
                "spec.validation.openAPIV3Schema.properties[spec].properties[list].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty",
            ]),
            ("defaults in metadata", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] = json!({"type": "object", "default": {}});
            }, vec![
                "spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata",
            ]),
            ("root restricted with status", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("string");
            }, vec![
                "spec.validation.openAPIV3Schema.type: Invalid value: \"string\": only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                "spec.validation.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root",
            ]),
            ("scale paths", |c| {
                c["spec"]["versions"][0]["subresources"]["scale"] = json!({
                    "specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas",
                    "labelSelectorPath": ".metadata.labels"});
            }, vec![
                "spec.subresources.scale.specReplicasPath: Invalid value: \"spec.replicas\": must be a simple json path starting with .",
                "spec.subresources.scale.statusReplicasPath: Invalid value: \".spec.replicas\": should be a json path under .status",
                "spec.subresources.scale.labelSelectorPath: Invalid value: \".metadata.labels\": should be a json path under either .spec or .status",
            ]),
            ("printer columns", |c| {
                c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([{"name": "", "type": "text", "format": "hex", "jsonPath": ""}]);
            }, vec![
                "spec.additionalPrinterColumns[0].name: Required value",
                "spec.additionalPrinterColumns[0].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
                "spec.additionalPrinterColumns[0].format: Invalid value: \"hex\": must be one of byte,date,date-time,double,float,int32,int64,password",
                "spec.additionalPrinterColumns[0].JSONPath: Required value",
            ]),
            ("webhook conversion", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": "https://x/convert"}, "conversionReviewVersions": ["v1"]}});
            }, vec![]),
            ("webhook conversion to a service", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"service": {"namespace": "ns", "name": "hook", "path": "/convert/"}},
                    "conversionReviewVersions": ["v2", "v1beta1"]}});
            }, vec![]),
            ("webhook URL", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": "http://me:pw@x/c?a=1#top"},
                    "conversionReviewVersions": ["v2", "v2", "V3"]}});
            }, vec![
                "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "spec.conversion.webhookClientConfig.url: Invalid value: \"me:pw\": user information is not permitted in the URL",
                "spec.conversion.webhookClientConfig.url: Invalid value: \"top\": fragments are not permitted in the URL",
                "spec.conversion.webhookClientConfig.url: Invalid value: \"a=1\": query parameters are not permitted in the URL",
                "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                "spec.conversion.conversionReviewVersions[2]: Invalid value: \"V3\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\", \"v2\", \"V3\"}: must include at least one of v1, v1beta1",
            ]),
            ("webhook URL Go cannot parse", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": "https://a b/"}, "conversionReviewVersions": ["v1"]}});
            }, vec![
                "spec.conversion.webhookClientConfig.url: Required value: url must be a valid URL: parse \"https://a b/\": invalid character \" \" in host name; desired format: https://host[/path]",
            ]),
            ("webhook settings without a strategy", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Other", "webhook": {
                    "clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}});
            }, vec![
                "spec.conversion.strategy: Unsupported value: \"Other\": supported values: \"None\", \"Webhook\"",
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ]),
            ("webhook service", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"service": {"port": 0, "path": "a//b"}}}});
            }, vec![
                "spec.conversion.webhookClientConfig.service.name: Required value: service name is required",
                "spec.conversion.webhookClientConfig.service.namespace: Required value: service namespace is required",
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"a//b\": must start with a '/'",
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"a//b\": segment[0] may not be empty",
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"a//b\": segment[1] may not be empty",
                "spec.conversion.conversionReviewVersions: Required value",
            ]),
            ("webhook without a client", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": "https://x", "service": {"namespace": "a", "name": "b"}},
                    "conversionReviewVersions": ["v1"]}});
            }, vec![
                "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required",
            ]),
            ("webhook without a clientConfig", |c| {
                c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}});
            }, vec![
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
            ]),
            ("webhook settings without webhook", |c| {
                c["spec"]["conversion"] = json!({"strategy": "None", "webhook": {
                    "clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}});
            }, vec![
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ]),
            ("preserveUnknownFields", |c| c["spec"]["preserveUnknownFields"] = json!(true), vec![
                "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema",
                "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
            ]),
            ("protected group", |c| {
                c["spec"]["group"] = json!("widgets.k8s.io");
                c["metadata"]["name"] = json!("crontabs.widgets.k8s.io");
            }, vec![
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111",
            ]),
            ("CEL rule form", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([
                    {"rule": "self.replicas >= 0", "reason": "Bad"}, {"rule": " "}]);
            }, vec![
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].reason: Unsupported value: \"Bad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: Required value: rule is not specified",
            ]),
            // A fieldPath naming no field, and (a rule's fields being unsound) no compiler
            // errors for the broken rule next to it, as kube skips compiling then.
            ("CEL fieldPath", |c| {
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([
                    {"rule": "self.replicas >= 0", "fieldPath": ".nope"}, {"rule": "self.replicas >"}]);
            }, vec![
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path",
            ]),
        ];
        for (name, edit, want) in cases {
            let mut crd = crontab();
            edit(&mut crd);
            assert_eq!(rendered(&validate_crd(&crd)), want, "{name}");
        }
    }

    #[test]
    fn crd_validation_reports_per_version_paths_when_versions_differ() {
        let mut crd = crontab();
        let mut v2 = crd["spec"]["versions"][0].clone();
        v2["name"] = json!("v2");
        v2["storage"] = json!(false);
        v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"] = json!({});
        if let Some(versions) = crd["spec"]["versions"].as_array_mut() {
            versions.push(v2);
        }
        assert_eq!(
            rendered(&validate_crd(&crd)),
            ["spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[x].type: Required value: must not be empty for specified object fields"]
        );
        // Two storage versions: the second is not in storedVersions either (the strategy
        // records only the first).
        crd["spec"]["versions"][1]["schema"] = crd["spec"]["versions"][0]["schema"].clone();
        crd["spec"]["versions"][1]["storage"] = json!(true);
        let causes = validate_crd(&crd);
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(causes[0].field, "spec.versions");
        assert!(causes[0]
            .message
            .ends_with("must have exactly one version marked as storage version"));
        assert_eq!(
            causes[1].message,
            "Invalid value: []string{\"v1\"}: must have the storage version v2"
        );
        // None at all.
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][1]["storage"] = json!(false);
        let causes = validate_crd(&crd);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(causes[0]
            .message
            .ends_with("must have exactly one version marked as storage version"));
    }

    #[test]
    fn crd_update_relaxes_what_the_stored_object_already_broke() {
        let old = crontab();
        let mut new = old.clone();
        new["spec"]["names"]["plural"] = json!("crons");
        new["metadata"]["name"] = json!("crons.stable.example.com");
        let causes = rendered(&validate_crd_update(&new, &old));
        assert_eq!(
            causes,
            ["spec.names.plural: Invalid value: \"crons\": field is immutable"]
        );
        // A stored schema with a type kube no longer accepts may keep it on update.
        let mut legacy = crontab();
        legacy["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["image"] = json!({"type": "strng"});
        assert_eq!(
            rendered(&validate_crd(&legacy)),
            ["spec.validation.openAPIV3Schema.properties[spec].properties[image].type: Unsupported value: \"strng\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""]
        );
        let mut updated = legacy.clone();
        updated["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(
            rendered(&validate_crd_update(&updated, &legacy)),
            Vec::<String>::new()
        );
    }

    /// kube checks a webhook's `caBundle` only once the CRD is Established with a good one,
    /// and keeps accepting an unrecognized `conversionReviewVersions` the stored CRD had.
    #[test]
    fn webhook_settings_are_relaxed_on_update_as_kube_relaxes_them() {
        use base64::Engine;
        let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let ca = {
            let mut params = rcgen::CertificateParams::default();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let key = rcgen::KeyPair::generate().unwrap();
            params.self_signed(&key).unwrap().pem()
        };
        let good = encode(&ca);
        let with_webhook = |bundle: &str, versions: Value| {
            let mut crd = crontab();
            crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://hook/convert", "caBundle": bundle},
                "conversionReviewVersions": versions}});
            crd
        };
        // On create the bundle is not checked.
        assert!(validate_crd(&with_webhook("YWJj", json!(["v1"]))).is_empty());
        let mut established = with_webhook(&good, json!(["v1"]));
        established["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
        assert_eq!(
            rendered(&validate_crd_update(&with_webhook("YWJj", json!(["v1"])), &established)),
            ["spec.conversion.webhookClientConfig.caBundle: Invalid value: []byte{0x61, 0x62, 0x63}: unable to load root certificates: unable to parse bytes as PEM block"]
        );
        // Not established yet: any bundle.
        let pending = with_webhook(&good, json!(["v1"]));
        assert!(validate_crd_update(&with_webhook("YWJj", json!(["v1"])), &pending).is_empty());
        // client-go's reasons for a bundle it cannot load.
        for (bundle, why) in [
            (
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                "failed to parse certificate: x509: malformed certificate",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
                "no valid certificate authority data seen",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n\n",
                "unable to parse bytes as PEM block",
            ),
        ] {
            let causes = rendered(&validate_crd_update(
                &with_webhook(&encode(bundle), json!(["v1"])),
                &established,
            ));
            assert_eq!(causes.len(), 1, "{causes:?}");
            assert!(
                causes[0].ends_with(&format!("unable to load root certificates: {why}")),
                "{causes:?}"
            );
        }
        // A stored CRD without a recognized review version may keep one.
        let legacy = with_webhook(&good, json!(["v9"]));
        assert!(validate_crd_update(&with_webhook(&good, json!(["v8"])), &legacy).is_empty());
        assert_eq!(
            rendered(&validate_crd(&with_webhook(&good, json!(["v8"])))),
            ["spec.conversion.conversionReviewVersions: Invalid value: []string{\"v8\"}: must include at least one of v1, v1beta1"]
        );
    }
}

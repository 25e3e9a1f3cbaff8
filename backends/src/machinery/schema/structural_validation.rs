//! Whether a CRD schema is structural: kube's `ValidateStructural`
//! (`apiextensions-apiserver/pkg/apiserver/schema/validation.go` and `complete.go`). Every
//! specified node has a `type` (unless `x-kubernetes-int-or-string` or
//! `x-kubernetes-preserve-unknown-fields`), the logical junctors (`allOf`, `anyOf`, `oneOf`,
//! `not`) only add value validations to fields the structural part declares, and the root
//! `metadata` may only restrict `name` and `generateName`. Errors come sorted as kube sorts
//! them (by their rendered text).

use serde_json::json;

use super::structural::{AdditionalProperties, Schema};
use super::{child, go_value, invalid_raw, key, render, Causes};
use crate::status::{field_forbidden, field_required, StatusCause};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// kube's `ValidateStructural(fldPath, s)` for a schema at `path` (e.g.
/// `spec.validation.openAPIV3Schema`).
pub fn validate_structural(path: &str, schema: &Schema) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    invariants(schema, Level::Root, path, &mut errs);
    completeness(schema, schema, path, path, &mut errs);
    errs.sort_by_key(render);
    errs
}

fn invalid(field: String, value: &serde_json::Value, detail: &str) -> StatusCause {
    invalid_raw(&field, &go_value(value), detail)
}

fn invariants(s: &Schema, level: Level, path: &str, errs: &mut Causes) {
    if s.type_ == "array" && s.items.is_none() {
        errs.push(field_required(&child(path, "items"), "must be specified"));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    for (k, v) in &s.properties {
        invariants(v, Level::Field, &key(&child(path, "properties"), k), errs);
    }
    if let Some(additional) = &s.additional_properties {
        if level == Level::Root {
            errs.push(field_forbidden(
                &child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let AdditionalProperties::Schema(a) = additional {
            invariants(a, Level::Field, &child(path, "additionalProperties"), errs);
        }
    }
    if s.x_int_or_string && s.preserves_unknown_fields() {
        errs.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            &json!(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.x_int_or_string && s.x_embedded_resource {
        errs.push(invalid(
            child(path, "x-kubernetes-embedded-resource"),
            &json!(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of_any_of = s
        .all_of
        .first()
        .is_some_and(|a| is_int_or_string_any_of(&a.any_of));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, path, errs);

    let check_metadata = level == Level::Root || s.x_embedded_resource;
    let type_path = child(path, "type");
    if s.x_embedded_resource && s.type_ != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        if s.type_.is_empty() {
            errs.push(field_required(&type_path, detail));
        } else {
            errs.push(invalid(type_path.clone(), &json!(s.type_), detail));
        }
    } else if s.type_.is_empty() && !s.x_int_or_string && !s.preserves_unknown_fields() {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(field_required(&type_path, detail));
    }
    if s.x_embedded_resource && s.additional_properties.is_some() {
        errs.push(field_forbidden(
            &child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !s.type_.is_empty() && s.type_ != "object" {
        errs.push(invalid(
            type_path,
            &json!(s.type_),
            "must be object at the root",
        ));
    }
    let properties = child(path, "properties");
    if check_metadata {
        for name in ["kind", "apiVersion"] {
            if let Some(p) = s.properties.get(name) {
                if p.type_ != "string" {
                    errs.push(invalid(
                        child(&key(&properties, name), "type"),
                        &json!(p.type_),
                        "must be string",
                    ));
                }
            }
        }
    }
    if let Some(metadata) = s.properties.get("metadata") {
        let metadata_path = key(&properties, "metadata");
        if check_metadata && metadata.type_ != "object" {
            errs.push(invalid(
                child(&metadata_path, "type"),
                &json!(metadata.type_),
                "must be object",
            ));
        }
        if level == Level::Root && !only_name_restrictions(metadata) {
            errs.push(field_forbidden(
                &metadata_path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if s.x_embedded_resource && !s.preserves_unknown_fields() && s.properties.is_empty() {
        errs.push(field_required(
            &properties,
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The root `metadata` schema may only have `type`, `default` and properties `name` and/or
/// `generateName` (whatever they say).
fn only_name_restrictions(metadata: &Schema) -> bool {
    let mut rest = metadata.clone();
    let names = ["name", "generateName"];
    if !rest.properties.is_empty() && rest.properties.keys().all(|k| names.contains(&k.as_str())) {
        rest.properties.clear();
    }
    rest.type_.clear();
    rest.default = None;
    rest == Schema::default()
}

/// `anyOf: [{type: integer}, {type: string}]`, the pattern kube lets `x-kubernetes-int-or-string`
/// fields carry.
fn is_int_or_string_any_of(any_of: &[Schema]) -> bool {
    let only = |t: &str| Schema {
        type_: t.into(),
        ..Schema::default()
    };
    any_of.len() == 2 && any_of[0] == only("integer") && any_of[1] == only("string")
}

fn value_validation(
    s: &Schema,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    errs: &mut Causes,
) {
    if !skip_any_of {
        for (i, a) in s.any_of.iter().enumerate() {
            nested(a, false, &format!("{}[{i}]", child(path, "anyOf")), errs);
        }
    }
    for (i, a) in s.all_of.iter().enumerate() {
        nested(
            a,
            skip_first_all_of_any_of && i == 0,
            &format!("{}[{i}]", child(path, "allOf")),
            errs,
        );
    }
    for (i, a) in s.one_of.iter().enumerate() {
        nested(a, false, &format!("{}[{i}]", child(path, "oneOf")), errs);
    }
    if let Some(not) = &s.not {
        nested(not, false, &child(path, "not"), errs);
    }
    if let Some(Err(e)) = &s.compiled_pattern {
        errs.push(invalid(
            child(path, "pattern"),
            &json!(s.pattern),
            &format!("must be a valid regular expression, but isn't: error parsing regexp: {e}"),
        ));
    }
}

/// A schema under `allOf`/`anyOf`/`oneOf`/`not` (kube's `NestedValueValidation`): value
/// validations only.
fn nested(v: &Schema, skip_any_of: bool, path: &str, errs: &mut Causes) {
    value_validation(v, skip_any_of, false, path, errs);
    if let Some(items) = &v.items {
        nested(items, false, &child(path, "items"), errs);
    }
    for (k, p) in &v.properties {
        nested(p, false, &key(&child(path, "properties"), k), errs);
    }
    let forbid = |errs: &mut Causes, name: &str, detail: &str| {
        errs.push(field_forbidden(&child(path, name), detail));
    };
    if !v.type_.is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if v.additional_properties_schema().is_some() {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if v.default.is_some() {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if !v.title.is_empty() {
        forbid(errs, "title", "must be empty to be structural");
    }
    if !v.description.is_empty() {
        forbid(errs, "description", "must be empty to be structural");
    }
    if v.nullable {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if v.preserves_unknown_fields() {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if v.x_embedded_resource {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if v.x_int_or_string {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !v.x_list_map_keys.is_empty() {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.x_list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.x_map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !v.x_validations.is_empty() {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.properties.contains_key("metadata") {
        errs.push(field_forbidden(
            &key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// kube's completeness check: every field a junctor of the root constrains is declared in
/// the structural part.
fn completeness(v: &Schema, s: &Schema, s_path: &str, v_path: &str, errs: &mut Causes) {
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), s_path, &child(v_path, "not"), errs);
    }
    for (name, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            nested_completeness(
                n,
                Some(s),
                s_path,
                &format!("{}[{i}]", child(v_path, name)),
                errs,
            );
        }
    }
}

fn nested_completeness(
    v: &Schema,
    s: Option<&Schema>,
    s_path: &str,
    v_path: &str,
    errs: &mut Causes,
) {
    let Some(s) = s else {
        errs.push(field_required(
            s_path,
            &format!("because it is defined in {v_path}"),
        ));
        return;
    };
    completeness(v, s, s_path, v_path, errs);
    if let Some(items) = &v.items {
        nested_completeness(
            items,
            s.items.as_deref(),
            &child(s_path, "items"),
            &child(v_path, "items"),
            errs,
        );
    }
    for (k, p) in &v.properties {
        let s_prop = key(&child(s_path, "properties"), k);
        let v_prop = key(&child(v_path, "properties"), k);
        match s.properties.get(k) {
            Some(sp) => nested_completeness(p, Some(sp), &s_prop, &v_prop, errs),
            None => errs.push(field_required(
                &s_prop,
                &format!("because it is defined in {v_prop}"),
            )),
        }
    }
}

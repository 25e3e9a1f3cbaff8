//! A CRD version's `openAPIV3Schema`, read once into a typed tree ([`Schema`]): what kube's
//! `apiextensions.JSONSchemaProps` holds, which also serves as its `structuralschema.Structural`
//! (the `allOf`/`anyOf`/`oneOf`/`not` children are the structural schema's value validations).
//! Fields kube refuses in CRD schemas (`id`, `$ref`, `patternProperties`, ...) are remembered
//! so validation can name them.

use std::collections::BTreeMap;

use serde_json::Value;

use super::pattern::Pattern;

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone, PartialEq)]
pub enum AdditionalProperties {
    Allows(bool),
    Schema(Box<Schema>),
}

/// One node of an OpenAPI v3 schema as CRDs allow it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    pub type_: String,
    pub format: String,
    pub description: String,
    pub title: String,
    pub nullable: bool,
    /// `default`; `None` when absent or `null` (kube drops a `null` default).
    pub default: Option<Value>,
    pub example: Option<Value>,
    pub external_docs: bool,

    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: String,
    /// The compiled `pattern`, or why it does not compile.
    pub compiled_pattern: Option<Result<Pattern, String>>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub enum_: Option<Vec<Value>>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,

    pub items: Option<Box<Schema>>,
    /// `items` given as an array of schemas (refused by kube).
    pub items_is_array: bool,
    pub properties: BTreeMap<String, Schema>,
    pub additional_properties: Option<AdditionalProperties>,
    pub all_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,

    pub x_preserve_unknown_fields: Option<bool>,
    pub x_embedded_resource: bool,
    pub x_int_or_string: bool,
    pub x_list_map_keys: Vec<String>,
    pub x_list_type: Option<String>,
    pub x_map_type: Option<String>,
    /// `x-kubernetes-validations` (CEL rules) as given; not evaluated yet.
    pub x_validations: Vec<Value>,

    /// JSON-Schema keywords kube does not support in CRDs, by their JSON name (`id`, `$ref`,
    /// `patternProperties`, `definitions`, `dependencies`, `additionalItems`, `$schema`).
    pub unsupported: Vec<&'static str>,

    /// Whether this node or any below it has `x-kubernetes-validations`, worked out once by
    /// [`Schema::from_json`] so validating an object does not search the schema again.
    pub rules_below: bool,
}

const UNSUPPORTED: &[&str] = &[
    "id",
    "$schema",
    "$ref",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
];

impl Schema {
    /// Reads a schema from its JSON form. Values of the wrong JSON type are read as absent
    /// (the API decoder refuses them before this runs).
    pub fn from_json(value: &Value) -> Schema {
        let Some(map) = value.as_object() else {
            return Schema::default();
        };
        let text = |k: &str| {
            map.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let flag = |k: &str| map.get(k).and_then(Value::as_bool).unwrap_or(false);
        let float = |k: &str| map.get(k).and_then(Value::as_f64);
        let int = |k: &str| {
            map.get(k)
                .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
        };
        let list = |k: &str| -> Vec<Schema> {
            map.get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().map(Schema::from_json).collect())
                .unwrap_or_default()
        };
        let strings = |k: &str| -> Vec<String> {
            map.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let pattern = text("pattern");
        let compiled_pattern = (!pattern.is_empty()).then(|| Pattern::new(&pattern));
        let (items, items_is_array) = match map.get("items") {
            Some(Value::Array(_)) => (None, true),
            Some(v @ Value::Object(_)) => (Some(Box::new(Schema::from_json(v))), false),
            _ => (None, false),
        };
        let additional_properties = match map.get("additionalProperties") {
            Some(Value::Bool(b)) => Some(AdditionalProperties::Allows(*b)),
            Some(v @ Value::Object(_)) => {
                Some(AdditionalProperties::Schema(Box::new(Schema::from_json(v))))
            }
            _ => None,
        };
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .map(|(k, v)| (k.clone(), Schema::from_json(v)))
                    .collect()
            })
            .unwrap_or_default();
        let unsupported = UNSUPPORTED
            .iter()
            .copied()
            .filter(|k| match map.get(*k) {
                None | Some(Value::Null) => false,
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Object(m)) => !m.is_empty() || *k == "additionalItems",
                Some(_) => true,
            })
            .collect();
        let mut schema = Schema {
            type_: text("type"),
            format: text("format"),
            description: text("description"),
            title: text("title"),
            nullable: flag("nullable"),
            default: map.get("default").filter(|v| !v.is_null()).cloned(),
            example: map.get("example").filter(|v| !v.is_null()).cloned(),
            external_docs: map.get("externalDocs").is_some_and(|v| !v.is_null()),
            maximum: float("maximum"),
            exclusive_maximum: flag("exclusiveMaximum"),
            minimum: float("minimum"),
            exclusive_minimum: flag("exclusiveMinimum"),
            max_length: int("maxLength"),
            min_length: int("minLength"),
            pattern,
            compiled_pattern,
            max_items: int("maxItems"),
            min_items: int("minItems"),
            unique_items: flag("uniqueItems"),
            multiple_of: float("multipleOf"),
            enum_: map.get("enum").and_then(Value::as_array).cloned(),
            max_properties: int("maxProperties"),
            min_properties: int("minProperties"),
            required: strings("required"),
            items,
            items_is_array,
            properties,
            additional_properties,
            all_of: list("allOf"),
            one_of: list("oneOf"),
            any_of: list("anyOf"),
            not: map
                .get("not")
                .filter(|v| v.is_object())
                .map(|v| Box::new(Schema::from_json(v))),
            x_preserve_unknown_fields: map
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool),
            x_embedded_resource: flag("x-kubernetes-embedded-resource"),
            x_int_or_string: flag("x-kubernetes-int-or-string"),
            x_list_map_keys: strings("x-kubernetes-list-map-keys"),
            x_list_type: map
                .get("x-kubernetes-list-type")
                .and_then(Value::as_str)
                .map(str::to_string),
            x_map_type: map
                .get("x-kubernetes-map-type")
                .and_then(Value::as_str)
                .map(str::to_string),
            x_validations: map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            unsupported,
            rules_below: false,
        };
        // The children know theirs already.
        let s = &schema;
        schema.rules_below = !s.x_validations.is_empty()
            || s.items.as_ref().is_some_and(|i| i.rules_below)
            || s.properties.values().any(|p| p.rules_below)
            || s.additional_properties_schema()
                .is_some_and(|a| a.rules_below)
            || s.all_of
                .iter()
                .chain(&s.one_of)
                .chain(&s.any_of)
                .any(|c| c.rules_below)
            || s.not.as_ref().is_some_and(|n| n.rules_below);
        schema
    }

    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub fn preserves_unknown_fields(&self) -> bool {
        self.x_preserve_unknown_fields == Some(true)
    }

    /// The schema of values under `additionalProperties`, when it is a schema.
    pub fn additional_properties_schema(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema of a field of an object: its property, else `additionalProperties`.
    pub fn field(&self, name: &str) -> Option<&Schema> {
        self.properties
            .get(name)
            .or_else(|| self.additional_properties_schema())
    }

    /// Whether this node or any node below it satisfies `pred` (kube's `SchemaHas`).
    pub fn any_node(&self, pred: &dyn Fn(&Schema) -> bool) -> bool {
        pred(self)
            || self.items.as_ref().is_some_and(|s| s.any_node(pred))
            || self.properties.values().any(|s| s.any_node(pred))
            || self
                .additional_properties_schema()
                .is_some_and(|s| s.any_node(pred))
            || self
                .all_of
                .iter()
                .chain(&self.one_of)
                .chain(&self.any_of)
                .any(|s| s.any_node(pred))
            || self.not.as_ref().is_some_and(|s| s.any_node(pred))
    }
}

//! Validating a custom resource against its schema as kube-apiserver does: kube-openapi's
//! schema validator (`k8s.io/kube-openapi/pkg/validation/validate`, run in its order: type,
//! `allOf`/`anyOf`/`oneOf`/`not`, string, format, number, array, `enum`, object) with its
//! messages (`spec.replicas in body must be of type integer: "string"`), turned into field
//! errors the way apiextensions-apiserver's `kubeOpenAPIResultToFieldErrors` does (type errors
//! as `FieldValueTypeInvalid`, `required` as `Required value`, `enum` as `Unsupported value`,
//! `maxLength` as `Too long`, `maxItems`/`maxProperties` as `Too many`), then the embedded
//! resources' own checks (`embedded.rs`), then the `x-kubernetes-list-type` set/map
//! uniqueness checks (`schema/listtype`).
//!
//! `x-kubernetes-validations` (CEL) rules are not evaluated here.

use serde_json::Value;

use super::embedded::validate_embedded;
use super::formats::{effective_format, format_matches};
use super::structural::{AdditionalProperties, Schema};
use super::{child, go_float, go_value, index, invalid_raw, key, too_long, too_many, Causes};
use crate::status::{field_duplicate, field_required, StatusCause};

const IN: &str = "body";

/// kube's `ValidateCustomResource(nil, object, validator)`, `objectmeta.Validate` of the
/// embedded resources and `ValidateListSetsAndMaps(nil, schema, object)`, in that order:
/// every problem of `object`, with field paths from the object root (`spec.replicas`).
pub fn validate(schema: &Schema, object: &Value) -> Vec<StatusCause> {
    let mut causes = validate_value(None, schema, object);
    causes.extend(validate_embedded(schema, object));
    if let Value::Object(map) = object {
        list_sets_and_maps_object(None, schema, map, &mut causes);
    }
    causes
}

/// The schema validator alone, with error paths under `base` (kube validates a schema's
/// `default` this way, under `<path>.default`); `None` is the object root.
pub fn validate_value(base: Option<&str>, schema: &Schema, value: &Value) -> Vec<StatusCause> {
    let mut v = Validator {
        base,
        out: Vec::new(),
    };
    v.value(schema, value, "");
    v.out
}

struct Validator<'a> {
    base: Option<&'a str>,
    out: Causes,
}

/// What kube-openapi reports a value as: its type name and format.
fn schema_info(value: &Value) -> (&'static str, &'static str) {
    match value {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("null", ""),
    }
}

/// The types a schema allows (none, one, or `integer` and `string` for int-or-string), held
/// inline: this runs for every value of every custom resource written.
struct Types<'a> {
    list: [&'a str; 2],
    len: usize,
}

impl<'a> std::ops::Deref for Types<'a> {
    type Target = [&'a str];

    fn deref(&self) -> &[&'a str] {
        &self.list[..self.len]
    }
}

fn types(s: &Schema) -> Types<'_> {
    if s.x_int_or_string {
        Types {
            list: ["integer", "string"],
            len: 2,
        }
    } else if s.type_.is_empty() {
        Types {
            list: ["", ""],
            len: 0,
        }
    } else {
        Types {
            list: [s.type_.as_str(), ""],
            len: 1,
        }
    }
}

/// A number as kube's JSON decoding makes it: an int64 or a float64.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(value: &Value) -> Option<Num> {
        let n = value.as_number()?;
        Some(match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
        })
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl Validator<'_> {
    /// The field path of an error kube-openapi reports under `name` (`.spec` or `spec.x`).
    fn path(&self, name: &str) -> String {
        let name = name.trim_start_matches('.');
        match (self.base, name.is_empty()) {
            (Some(base), true) => base.to_string(),
            (Some(base), false) => child(base, name),
            (None, true) => "<nil>".to_string(),
            (None, false) => name.to_string(),
        }
    }

    /// `message` with kube-openapi's `<name> in body` prefix.
    fn message(name: &str, rest: &str) -> String {
        format!("{name} in {IN} {rest}")
    }

    /// A validation error kube turns into `field.Invalid(path, value, message)`.
    fn invalid(&mut self, name: &str, rendered_value: String, rest: &str) {
        let field = self.path(name);
        self.out.push(invalid_raw(
            &field,
            &rendered_value,
            &Self::message(name, rest),
        ));
    }

    /// `errors.InvalidType`: a `FieldValueTypeInvalid` cause.
    fn type_error(&mut self, name: &str, type_name: &str, data: &str) {
        let field = self.path(name);
        let message = Self::message(name, &format!("must be of type {type_name}: \"{data}\""));
        self.out.push(StatusCause {
            reason: "FieldValueTypeInvalid".into(),
            message: format!("Invalid value: \"{data}\": {message}"),
            field,
        });
    }

    /// A composite (non-`Validation`) error: kube reports it on the base path with value `""`.
    fn composite(&mut self, message: String) {
        let field = match self.base {
            Some(b) => b.to_string(),
            None => "<nil>".to_string(),
        };
        self.out.push(invalid_raw(&field, "\"\"", &message));
    }

    fn value(&mut self, s: &Schema, value: &Value, path: &str) {
        let types = types(s);
        let format = effective_format(&types, &s.format);
        if value.is_null() {
            if !types.is_empty() && !s.nullable {
                self.type_error(path, &types.join(","), "null");
            }
            if let Some(values) = &s.enum_ {
                if !values.is_empty() {
                    self.enum_error(path, value, values);
                }
            }
            return;
        }
        if !types.is_empty() || !format.is_empty() {
            self.check_type(&types, format, value, path);
        }
        self.junctors(s, value, path);
        if let Value::String(text) = value {
            self.string(s, text, path);
            if !format.is_empty() && !format_matches(format, text).unwrap_or(true) {
                self.type_error(path, format, text);
            }
        }
        if let Some(n) = Num::of(value) {
            self.number(s, &types, format, n, path);
        }
        if let Value::Array(items) = value {
            self.array(s, items, path);
        }
        if let Some(values) = &s.enum_ {
            if !values.is_empty() && !values.iter().any(|e| enum_equal(value, e)) {
                self.enum_error(path, value, values);
            }
        }
        if let Value::Object(map) = value {
            self.object(s, map, path);
        }
    }

    fn check_type(&mut self, types: &[&str], format: &str, value: &Value, path: &str) {
        let (sch_type, sch_format) = schema_info(value);
        let contains = |t: &str| types.contains(&t);
        let is_float_int = sch_type == "number"
            && value
                .as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
            && contains("integer");
        let is_int_float = sch_type == "integer" && contains("number");
        let stringy = matches!(value, Value::String(_) | Value::Array(_));
        let type_matches = contains(sch_type) || is_float_int || is_int_float;
        if !(stringy || format.is_empty() || type_matches || sch_format == format) {
            self.type_error(path, format, sch_format);
            return;
        }
        let numeric = contains("number") || contains("integer");
        if stringy && !numeric && !format.is_empty() {
            return;
        }
        if !type_matches {
            self.type_error(path, &types.join(","), sch_type);
        }
    }

    fn enum_error(&mut self, path: &str, value: &Value, values: &[Value]) {
        let quoted: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::String(s) => format!("\"{s}\""),
                other => format!("\"{}\"", other.to_string().replace('"', "\\\"")),
            })
            .collect();
        self.out.push(StatusCause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                go_value(value),
                quoted.join(", ")
            ),
            field: self.path(path),
        });
    }

    /// Runs `s` against `value` on its own, for the logical junctors.
    fn sub(&self, s: &Schema, value: &Value, path: &str) -> Causes {
        let mut v = Validator {
            base: self.base,
            out: Vec::new(),
        };
        v.value(s, value, path);
        v.out
    }

    fn junctors(&mut self, s: &Schema, value: &Value, path: &str) {
        if !s.any_of.is_empty() {
            let results: Vec<Causes> = s.any_of.iter().map(|a| self.sub(a, value, path)).collect();
            if !results.iter().any(Vec::is_empty) {
                self.composite(format!(
                    "\"{path}\" must validate at least one schema (anyOf)"
                ));
                if let Some(first) = results.into_iter().next() {
                    self.out.extend(first);
                }
            }
        }
        if !s.one_of.is_empty() {
            let results: Vec<Causes> = s.one_of.iter().map(|a| self.sub(a, value, path)).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let detail = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.composite(format!(
                    "\"{path}\" must validate one and only one schema (oneOf). {detail}"
                ));
                if valid == 0 {
                    if let Some(first) = results.into_iter().next() {
                        self.out.extend(first);
                    }
                }
            }
        }
        if !s.all_of.is_empty() {
            let mut valid = 0;
            for a in &s.all_of {
                let result = self.sub(a, value, path);
                if result.is_empty() {
                    valid += 1;
                }
                self.out.extend(result);
            }
            if valid != s.all_of.len() {
                let detail = if valid == 0 { ". None validated" } else { "" };
                self.composite(format!(
                    "\"{path}\" must validate all the schemas (allOf){detail}"
                ));
            }
        }
        if let Some(not) = &s.not {
            if self.sub(not, value, path).is_empty() {
                self.composite(format!("\"{path}\" must not validate the schema (not)"));
            }
        }
    }

    /// kube-openapi's string validator: the first failing of `maxLength`, `minLength`,
    /// `pattern` (lengths in runes).
    fn string(&mut self, s: &Schema, text: &str, path: &str) {
        let len = text.chars().count() as i64;
        if let Some(max) = s.max_length {
            if len > max {
                let field = self.path(path);
                self.out.push(too_long(&field, max));
                return;
            }
        }
        if let Some(min) = s.min_length {
            if len < min {
                self.invalid(
                    path,
                    go_value(&Value::String(text.into())),
                    &format!("should be at least {min} chars long"),
                );
                return;
            }
        }
        if let Some(pattern) = &s.compiled_pattern {
            let matched = match pattern {
                Ok(p) => p.is_match(text),
                Err(_) => false,
            };
            if !matched {
                let shown = match pattern {
                    Ok(_) => s.pattern.clone(),
                    Err(e) => format!("{}, but pattern is invalid: {e}", s.pattern),
                };
                self.invalid(
                    path,
                    go_value(&Value::String(text.into())),
                    &format!("should match '{shown}'"),
                );
            }
        }
    }

    fn number(&mut self, s: &Schema, types: &[&str], format: &str, n: Num, path: &str) {
        let type_name = if types.len() == 1 { types[0] } else { "" };
        // Spelled out only for an error.
        let rendered = || match n {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        };
        if type_name == "integer" && format == "int32" {
            let fits = match n {
                Num::Int(i) => i32::try_from(i).is_ok(),
                Num::Float(f) => f.fract() == 0.0 && f >= i32::MIN as f64 && f <= i32::MAX as f64,
            };
            if !fits {
                self.composite(format!(
                    "Checked value must be of type integer with format int32 in {path}"
                ));
            }
        }
        if let Some(factor) = s.multiple_of {
            let ok = match n {
                Num::Int(i) if factor.fract() == 0.0 && factor >= 1.0 => i % (factor as i64) == 0,
                _ => {
                    let q = n.as_f64() / factor;
                    q.fract() == 0.0
                }
            };
            if factor <= 0.0 {
                self.invalid(
                    path,
                    rendered(),
                    &format!(
                        "factor MultipleOf declared for {path} must be positive: {}",
                        go_float(factor)
                    ),
                );
            } else if !ok {
                let shown = match n {
                    Num::Int(_) if factor.fract() == 0.0 => format!("{}", factor as i64),
                    _ => go_float(factor),
                };
                self.invalid(
                    path,
                    rendered(),
                    &format!("should be a multiple of {shown}"),
                );
            }
        }
        // Integers compare against the bound truncated to an integer, as kube-openapi does.
        let bound = |b: f64| match n {
            Num::Int(_) => (b as i64).to_string(),
            Num::Float(_) => go_float(b),
        };
        if let Some(min) = s.minimum {
            let below = match n {
                Num::Int(i) => {
                    let m = min as i64;
                    if s.exclusive_minimum {
                        i <= m
                    } else {
                        i < m
                    }
                }
                Num::Float(f) => {
                    if s.exclusive_minimum {
                        f <= min
                    } else {
                        f < min
                    }
                }
            };
            if below {
                let op = if s.exclusive_minimum {
                    "should be greater than"
                } else {
                    "should be greater than or equal to"
                };
                self.invalid(path, rendered(), &format!("{op} {}", bound(min)));
            }
        }
        if let Some(max) = s.maximum {
            let above = match n {
                Num::Int(i) => {
                    let m = max as i64;
                    if s.exclusive_maximum {
                        i >= m
                    } else {
                        i > m
                    }
                }
                Num::Float(f) => {
                    if s.exclusive_maximum {
                        f >= max
                    } else {
                        f > max
                    }
                }
            };
            if above {
                let op = if s.exclusive_maximum {
                    "should be less than"
                } else {
                    "should be less than or equal to"
                };
                self.invalid(path, rendered(), &format!("{op} {}", bound(max)));
            }
        }
    }

    fn array(&mut self, s: &Schema, items: &[Value], path: &str) {
        if let Some(item_schema) = &s.items {
            for (i, item) in items.iter().enumerate() {
                self.value(item_schema, item, &format!("{path}[{i}]"));
            }
        }
        let size = items.len() as i64;
        if let Some(min) = s.min_items {
            if size < min {
                self.invalid(
                    path,
                    size.to_string(),
                    &format!("should have at least {min} items"),
                );
            }
        }
        if let Some(max) = s.max_items {
            if size > max {
                let field = self.path(path);
                self.out.push(too_many(&field, size, max));
            }
        }
        if s.unique_items {
            let mut seen: Vec<&Value> = Vec::new();
            let duplicate = items.iter().any(|v| {
                let dup = seen.iter().any(|s| enum_equal(v, s));
                seen.push(v);
                dup
            });
            if duplicate {
                self.invalid(path, "\"\"".into(), "shouldn't contain duplicates");
            }
        }
    }

    fn object(&mut self, s: &Schema, map: &serde_json::Map<String, Value>, path: &str) {
        let size = map.len() as i64;
        if let Some(min) = s.min_properties {
            if size < min {
                self.invalid(
                    path,
                    size.to_string(),
                    &format!("should have at least {min} properties"),
                );
            }
        }
        if let Some(max) = s.max_properties {
            if size > max {
                let field = self.path(path);
                self.out.push(too_many(&field, size, max));
            }
        }
        match &s.additional_properties {
            Some(AdditionalProperties::Allows(false)) => {
                for k in map.keys() {
                    if !s.properties.contains_key(k) {
                        let field = self.path(path);
                        self.out.push(invalid_raw(
                            &field,
                            "\"\"",
                            &format!("{path}.{k} in {IN} is a forbidden property"),
                        ));
                    }
                }
            }
            Some(AdditionalProperties::Schema(a)) => {
                let mut child_path = String::new();
                for (k, v) in map {
                    if !s.properties.contains_key(k) {
                        child_path.clear();
                        child_path.push_str(path);
                        child_path.push('.');
                        child_path.push_str(k);
                        self.value(a, v, &child_path);
                    }
                }
            }
            _ => {}
        }
        // One buffer for every property's path.
        let mut child_path = String::new();
        for (name, p) in &s.properties {
            if let Some(v) = map.get(name) {
                child_path.clear();
                if !path.is_empty() {
                    child_path.push_str(path);
                    child_path.push('.');
                }
                child_path.push_str(name);
                self.value(p, v, &child_path);
            }
        }
        for name in &s.required {
            if !map.contains_key(name) {
                let field = self.path(&format!("{path}.{name}"));
                self.out.push(field_required(&field, ""));
            }
        }
    }
}

/// kube-openapi's enum comparison: numbers by value (an int64 equals the same float64), the
/// rest by JSON equality.
fn enum_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

// ---- x-kubernetes-list-type (schema/listtype) -------------------------------------------

fn list_sets_and_maps_object(
    path: Option<&str>,
    s: &Schema,
    map: &serde_json::Map<String, Value>,
    out: &mut Causes,
) {
    let at = |k: &str, as_key: bool| -> String {
        match path {
            None => k.to_string(),
            Some(p) if as_key => key(p, k),
            Some(p) => child(p, k),
        }
    };
    // Only lists and objects can hold list-type violations: scalars are skipped before their
    // paths are spelled out.
    let nested = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    if let Some(a) = s.additional_properties_schema() {
        for (k, v) in map.iter().filter(|(_, v)| nested(v)) {
            let p = match path {
                None => format!("[{k}]"),
                Some(_) => at(k, true),
            };
            list_sets_and_maps(&p, a, v, out);
        }
    }
    for (k, v) in map.iter().filter(|(_, v)| nested(v)) {
        if let Some(sub) = s.properties.get(k) {
            list_sets_and_maps(&at(k, false), sub, v, out);
        }
    }
}

fn list_sets_and_maps(path: &str, s: &Schema, value: &Value, out: &mut Causes) {
    match value {
        Value::Array(items) => {
            match s.x_list_type.as_deref() {
                Some("set") => {
                    for i in non_unique(items) {
                        out.push(field_duplicate_value(&index(path, i), &items[i]));
                    }
                }
                Some("map") => list_map(path, s, items, out),
                _ => {}
            }
            if let Some(item_schema) = &s.items {
                for (i, item) in items.iter().enumerate() {
                    if matches!(item, Value::Array(_) | Value::Object(_)) {
                        list_sets_and_maps(&index(path, i), item_schema, item, out);
                    }
                }
            }
        }
        Value::Object(map) => list_sets_and_maps_object(Some(path), s, map, out),
        _ => {}
    }
}

/// The indexes of second occurrences of a value (kube reports each duplicated value once).
fn non_unique(items: &[Value]) -> Vec<usize> {
    let mut seen: Vec<(&Value, usize)> = Vec::new();
    let mut out = Vec::new();
    for (i, v) in items.iter().enumerate() {
        match seen.iter_mut().find(|(s, _)| enum_equal(s, v)) {
            Some((_, times)) => {
                *times += 1;
                if *times == 2 {
                    out.push(i);
                }
            }
            None => seen.push((v, 1)),
        }
    }
    out
}

fn list_map(path: &str, s: &Schema, items: &[Value], out: &mut Causes) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            out.push(invalid_raw(
                &index(path, i),
                &go_value(x),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut k = serde_json::Map::new();
            for field in &s.x_list_map_keys {
                if let Some(v) = x.get(field) {
                    k.insert(field.clone(), v.clone());
                }
            }
            Value::Object(k)
        })
        .collect();
    for i in non_unique(&keys) {
        out.push(field_duplicate_value(&index(path, i), &keys[i]));
    }
}

fn field_duplicate_value(field: &str, value: &Value) -> StatusCause {
    match value {
        Value::String(s) => field_duplicate(field, s),
        other => StatusCause {
            reason: "FieldValueDuplicate".into(),
            message: format!("Duplicate value: {}", go_value(other)),
            field: field.into(),
        },
    }
}

//! The `metadata` of an `x-kubernetes-embedded-resource` object as kube-apiserver reads it:
//! decoded into a Go `metav1.ObjectMeta` (`k8s.io/apimachinery/pkg/util/json`, case-sensitive,
//! so a wrong JSON type fails with Go's `UnmarshalTypeError` text and `metav1.Time` with
//! `time.Parse`'s) and written back as that struct encodes (apiextensions-apiserver's
//! `GetObjectMetaWithOptions` + `SetObjectMeta`): fields ObjectMeta does not have go (their
//! paths are reported, as the strict decoder reports them), empty values go (`omitempty`),
//! timestamps become UTC seconds.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::machinery::gotime::{self, Layout};
use crate::machinery::json_kind;

/// What a `metadata` value decodes to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decoded {
    /// The metadata as kube writes it back.
    pub meta: Value,
    /// Fields ObjectMeta does not have, relative to the metadata (`foo`,
    /// `ownerReferences[0].bar`), in the order they were met.
    pub unknown: Vec<String>,
}

/// kube's `GetObjectMetaWithOptions` without `DropMalformedFields`: the metadata, or the Go
/// decoding error kube reports for it.
pub(crate) fn decode(meta: &Value) -> Result<Decoded, String> {
    let mut decoder = Decoder::default();
    let decoded = decoder.object_meta(meta).map_err(|e| e.0)?;
    if let Some(saved) = decoder.saved {
        return Err(saved);
    }
    Ok(Decoded {
        meta: decoded,
        unknown: decoder.unknown,
    })
}

/// kube's `GetObjectMetaWithOptions` with `DropMalformedFields` (how stored objects are read):
/// a field that does not decode is dropped whole. Fails only when `meta` is no object at all
/// (kube then leaves it as it is).
pub(crate) fn decode_dropping_malformed(meta: &Value) -> Result<Decoded, String> {
    if let Ok(decoded) = decode(meta) {
        return Ok(decoded);
    }
    let Value::Object(fields) = meta else {
        return Err(format!(
            "invalid metadata: expected object, got {}",
            go_unstructured_type(meta)
        ));
    };
    // Field by field, as kube retries: each one that decodes on its own is kept.
    let mut out = Map::new();
    let mut unknown = Vec::new();
    for (k, v) in fields {
        let mut decoder = Decoder::default();
        let Ok(value) = decoder.meta_field(k, v) else {
            continue;
        };
        if decoder.saved.is_some() {
            continue;
        }
        unknown.extend(decoder.unknown);
        if let Some(value) = value {
            out.insert(k.clone(), value);
        }
    }
    Ok(Decoded {
        meta: Value::Object(out),
        unknown,
    })
}

/// `%T` of an unstructured value.
pub(crate) fn go_unstructured_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// An error that ends decoding at once (Go's decoder returns what a custom `UnmarshalJSON`,
/// here `metav1.Time`'s, fails with, instead of saving it like a type mismatch).
struct Immediate(String);

/// Go's `encoding/json` decode state as far as errors go: the first type mismatch is saved
/// and decoding goes on; unknown fields are collected (the strict decoder's errors).
#[derive(Default)]
struct Decoder {
    saved: Option<String>,
    unknown: Vec<String>,
}

/// The keys of an object in the order Go's `json.Marshal` writes a map (sorted), which is
/// the order kube decodes them in and so decides which error is reported.
fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

impl Decoder {
    fn save(&mut self, message: String) {
        if self.saved.is_none() {
            self.saved = Some(message);
        }
    }

    /// `json: cannot unmarshal <found> into Go struct field <Struct>.<path> of type <type>`.
    fn mismatch(&mut self, found: &str, go_struct: &str, path: &str, go_type: &str) {
        self.save(format!(
            "json: cannot unmarshal {found} into Go struct field {go_struct}.{path} of type {go_type}"
        ));
    }

    fn object_meta(&mut self, meta: &Value) -> Result<Value, Immediate> {
        let fields = match meta {
            // `null` decodes to the zero ObjectMeta.
            Value::Null => return Ok(Value::Object(Map::new())),
            Value::Object(fields) => fields,
            other => {
                return Err(Immediate(format!(
                    "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
                    json_kind(other)
                )))
            }
        };
        let mut decoded: HashMap<&str, Value> = HashMap::new();
        for (k, v) in sorted(fields) {
            if let Some(value) = self.meta_field(k, v)? {
                decoded.insert(k, value);
            }
        }
        // Written back in the order the client gave.
        let mut out = Map::new();
        for k in fields.keys() {
            if let Some(v) = decoded.remove(k.as_str()) {
                out.insert(k.clone(), v);
            }
        }
        Ok(Value::Object(out))
    }

    /// One ObjectMeta field: what it encodes back to (`None`: omitted as empty).
    fn meta_field(&mut self, k: &str, v: &Value) -> Result<Option<Value>, Immediate> {
        const S: &str = "ObjectMeta";
        Ok(match k {
            "name" | "generateName" | "namespace" | "selfLink" | "resourceVersion" => {
                self.string(v, S, k, "string").map(Value::String)
            }
            "uid" => self.string(v, S, k, "types.UID").map(Value::String),
            "generation" => self.int64(v, S, k).filter(|n| *n != 0).map(Value::from),
            // A pointer: zero is kept.
            "deletionGracePeriodSeconds" => self.int64(v, S, k).map(Value::from),
            "creationTimestamp" => match time(v)? {
                Some(t) if !is_zero_time(&t) => Some(Value::String(format_time(&t))),
                _ => None,
            },
            // A pointer: a zero time is kept, and `metav1.Time` encodes it as null.
            "deletionTimestamp" => time(v)?.map(|t| {
                if is_zero_time(&t) {
                    Value::Null
                } else {
                    Value::String(format_time(&t))
                }
            }),
            "labels" | "annotations" => self.string_map(v, S, k),
            "finalizers" => self.string_list(v, S, k),
            "ownerReferences" => self.owner_references(v),
            "managedFields" => self.managed_fields(v)?,
            _ => {
                self.unknown.push(k.to_string());
                None
            }
        })
    }

    /// A string field (`omitempty`): `None` when empty, null or mistyped.
    fn string(&mut self, v: &Value, go_struct: &str, path: &str, go_type: &str) -> Option<String> {
        match v {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            other => {
                self.mismatch(json_kind(other), go_struct, path, go_type);
                None
            }
        }
    }

    /// A string an encoder always writes (no `omitempty`).
    fn required_string(&mut self, v: Option<&Value>, go_struct: &str, path: &str) -> Value {
        let s = v.and_then(|v| self.string(v, go_struct, path, "string"));
        Value::String(s.unwrap_or_default())
    }

    fn boolean(&mut self, v: &Value, go_struct: &str, path: &str) -> Option<bool> {
        match v {
            Value::Null => None,
            Value::Bool(b) => Some(*b),
            other => {
                self.mismatch(json_kind(other), go_struct, path, "bool");
                None
            }
        }
    }

    /// An `int64`. kube re-encodes the request's numbers before this decode, so a float with
    /// an integral value (`3.0`, written `3`) is read as that integer.
    fn int64(&mut self, v: &Value, go_struct: &str, path: &str) -> Option<i64> {
        match v {
            Value::Null => None,
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    return Some(i);
                }
                let f = n.as_f64().unwrap_or(f64::NAN);
                // i64::MAX + 1 is exactly representable; everything below it fits.
                if f.fract() == 0.0
                    && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f)
                {
                    return Some(f as i64);
                }
                self.mismatch(
                    &format!("number {}", go_json_float(f)),
                    go_struct,
                    path,
                    "int64",
                );
                None
            }
            other => {
                self.mismatch(json_kind(other), go_struct, path, "int64");
                None
            }
        }
    }

    /// `map[string]string` (`omitempty`); a `null` value decodes as `""`.
    fn string_map(&mut self, v: &Value, go_struct: &str, path: &str) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, item) in m {
                    let s = match item {
                        Value::Null => String::new(),
                        Value::String(s) => s.clone(),
                        other => {
                            self.mismatch(json_kind(other), go_struct, path, "string");
                            continue;
                        }
                    };
                    out.insert(k.clone(), Value::String(s));
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            other => {
                self.mismatch(json_kind(other), go_struct, path, "map[string]string");
                None
            }
        }
    }

    /// `[]string` (`omitempty`); a `null` item decodes as `""`.
    fn string_list(&mut self, v: &Value, go_struct: &str, path: &str) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::Null => out.push(Value::String(String::new())),
                        Value::String(s) => out.push(Value::String(s.clone())),
                        other => self.mismatch(json_kind(other), go_struct, path, "string"),
                    }
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
            other => {
                self.mismatch(json_kind(other), go_struct, path, "[]string");
                None
            }
        }
    }

    /// The items of an ObjectMeta field that is a list of Go structs, with their indices: a
    /// `null` item decodes as an empty struct, an item or list of another JSON type is a type
    /// mismatch (the item is skipped; the list is `None`, as for `null`).
    fn struct_items<'v>(
        &mut self,
        v: &'v Value,
        field: &str,
        item_type: &str,
    ) -> Option<Vec<(usize, &'v Map<String, Value>)>> {
        static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        let items = match v {
            Value::Null => return None,
            Value::Array(items) => items,
            other => {
                self.mismatch(
                    json_kind(other),
                    "ObjectMeta",
                    field,
                    &format!("[]{item_type}"),
                );
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Null => out.push((i, &*EMPTY)),
                Value::Object(fields) => out.push((i, fields)),
                other => self.mismatch(json_kind(other), "ObjectMeta", field, item_type),
            }
        }
        Some(out)
    }

    /// `[]metav1.OwnerReference`: `apiVersion`, `kind`, `name` and `uid` are always written,
    /// `controller` and `blockOwnerDeletion` when set.
    fn owner_references(&mut self, v: &Value) -> Option<Value> {
        const S: &str = "OwnerReference";
        let items = self.struct_items(v, "ownerReferences", "v1.OwnerReference")?;
        let mut out = Vec::with_capacity(items.len());
        for (i, fields) in items {
            let mut reference = Map::new();
            for k in ["apiVersion", "kind", "name"] {
                let value = self.required_string(fields.get(k), S, &format!("ownerReferences.{k}"));
                reference.insert(k.into(), value);
            }
            let uid = match fields.get("uid") {
                Some(v) => self.string(v, S, "ownerReferences.uid", "types.UID"),
                None => None,
            };
            reference.insert("uid".into(), Value::String(uid.unwrap_or_default()));
            for k in ["controller", "blockOwnerDeletion"] {
                if let Some(b) = fields
                    .get(k)
                    .and_then(|v| self.boolean(v, S, &format!("ownerReferences.{k}")))
                {
                    reference.insert(k.into(), Value::Bool(b));
                }
            }
            for (k, _) in sorted(fields) {
                if !matches!(
                    k.as_str(),
                    "apiVersion" | "kind" | "name" | "uid" | "controller" | "blockOwnerDeletion"
                ) {
                    self.unknown.push(format!("ownerReferences[{i}].{k}"));
                }
            }
            out.push(Value::Object(reference));
        }
        (!out.is_empty()).then_some(Value::Array(out))
    }

    /// `[]metav1.ManagedFieldsEntry`, every field `omitempty`; `fieldsV1` is raw JSON.
    fn managed_fields(&mut self, v: &Value) -> Result<Option<Value>, Immediate> {
        const S: &str = "ManagedFieldsEntry";
        let Some(items) = self.struct_items(v, "managedFields", "v1.ManagedFieldsEntry") else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, fields) in items {
            let mut entry = Map::new();
            for (k, v) in sorted(fields) {
                let path = format!("managedFields.{k}");
                let value = match k.as_str() {
                    "manager" | "apiVersion" | "fieldsType" | "subresource" => {
                        self.string(v, S, &path, "string").map(Value::String)
                    }
                    "operation" => self
                        .string(v, S, &path, "v1.ManagedFieldsOperationType")
                        .map(Value::String),
                    "time" => time(v)?.map(|t| {
                        if is_zero_time(&t) {
                            Value::Null
                        } else {
                            Value::String(format_time(&t))
                        }
                    }),
                    "fieldsV1" => (!v.is_null()).then(|| v.clone()),
                    _ => {
                        self.unknown.push(format!("managedFields[{i}].{k}"));
                        None
                    }
                };
                if let Some(value) = value {
                    entry.insert(k.clone(), value);
                }
            }
            out.push(Value::Object(entry));
        }
        Ok((!out.is_empty()).then_some(Value::Array(out)))
    }
}

/// A float64 as Go's `encoding/json` writes it: plain digits from 1e-6 up to 1e21, else
/// exponent form (`1e+21`, `1e-7`).
fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) || !f.is_finite() {
        return format!("{f}");
    }
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    match exp.strip_prefix('-') {
        Some(digits) => format!("{mantissa}e-{digits}"),
        None => format!("{mantissa}e+{exp:0>2}"),
    }
}

// ---- metav1.Time ------------------------------------------------------------------------

/// `metav1.Time.UnmarshalJSON`: `null` is the zero time (`None` here), a string is parsed by
/// `time.Parse(time.RFC3339, ..)`; anything else fails like `json.Unmarshal` into a string.
fn time(v: &Value) -> Result<Option<DateTime<Utc>>, Immediate> {
    gotime::unmarshal(v, Layout::Rfc3339).map_err(Immediate)
}

fn is_zero_time(t: &DateTime<Utc>) -> bool {
    gotime::is_zero(t)
}

/// `metav1.Time` encodes UTC, whole seconds.
fn format_time(t: &DateTime<Utc>) -> String {
    gotime::format(t, Layout::Rfc3339)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_decodes_like_go_into_object_meta() {
        // (input, written back, unknown fields)
        let cases: Vec<(Value, Value, Vec<&str>)> = vec![
            (json!(null), json!({}), vec![]),
            (
                json!({"name": "a", "generateName": "", "labels": {}, "finalizers": [], "generation": 0,
                       "deletionGracePeriodSeconds": 0, "odd": 1, "Name": "x"}),
                json!({"name": "a", "deletionGracePeriodSeconds": 0}),
                vec!["Name", "odd"],
            ),
            (
                json!({"labels": {"a": null, "b": "c"}, "generation": 3.0, "uid": null}),
                json!({"labels": {"a": "", "b": "c"}, "generation": 3}),
                vec![],
            ),
            (
                json!({"creationTimestamp": "2024-05-01T12:00:00.5+02:00",
                       "deletionTimestamp": "0001-01-01T00:00:00Z"}),
                json!({"creationTimestamp": "2024-05-01T10:00:00Z", "deletionTimestamp": null}),
                vec![],
            ),
            (
                json!({"creationTimestamp": "0001-01-01T00:00:00Z"}),
                json!({}),
                vec![],
            ),
            (
                json!({"ownerReferences": [{"name": "o", "controller": false, "extra": 1}, null]}),
                json!({"ownerReferences": [
                    {"apiVersion": "", "kind": "", "name": "o", "uid": "", "controller": false},
                    {"apiVersion": "", "kind": "", "name": "", "uid": ""}]}),
                vec!["ownerReferences[0].extra"],
            ),
            (
                json!({"managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:a": {}},
                                          "time": null, "x": 1}]}),
                json!({"managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:a": {}}}]}),
                vec!["managedFields[0].x"],
            ),
        ];
        for (input, want, unknown) in cases {
            let got = decode(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(got.meta, want, "{input}");
            assert_eq!(got.unknown, unknown, "{input}");
        }
    }

    #[test]
    fn metadata_type_errors_are_gos() {
        let cases: Vec<(Value, &str)> = vec![
            (json!("x"), "json: cannot unmarshal string into Go value of type v1.ObjectMeta"),
            (json!([1]), "json: cannot unmarshal array into Go value of type v1.ObjectMeta"),
            (
                json!({"name": 5}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.name of type string",
            ),
            (
                json!({"labels": {"a": 1}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string",
            ),
            (
                json!({"labels": "a=b"}),
                "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string",
            ),
            (
                json!({"generation": 1.5}),
                "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.generation of type int64",
            ),
            (
                json!({"uid": true}),
                "json: cannot unmarshal bool into Go struct field ObjectMeta.uid of type types.UID",
            ),
            (
                json!({"finalizers": [1]}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.finalizers of type string",
            ),
            (
                json!({"ownerReferences": ["x"]}),
                "json: cannot unmarshal string into Go struct field ObjectMeta.ownerReferences of type v1.OwnerReference",
            ),
            (
                json!({"ownerReferences": [{"name": 1}]}),
                "json: cannot unmarshal number into Go struct field OwnerReference.ownerReferences.name of type string",
            ),
            (
                json!({"managedFields": [{"operation": 1}]}),
                "json: cannot unmarshal number into Go struct field ManagedFieldsEntry.managedFields.operation of type v1.ManagedFieldsOperationType",
            ),
            // The first mismatch in key order is reported ...
            (
                json!({"name": 1, "annotations": {"a": 2}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.annotations of type string",
            ),
            // ... unless a time fails, which ends decoding at once.
            (
                json!({"annotations": {"a": 2}, "creationTimestamp": 5}),
                "json: cannot unmarshal number into Go value of type string",
            ),
            (
                json!({"creationTimestamp": "yesterday"}),
                r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006""#,
            ),
            (
                json!({"creationTimestamp": "2024-05-01 10:00:00Z"}),
                r#"parsing time "2024-05-01 10:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse " 10:00:00Z" as "T""#,
            ),
            (
                json!({"creationTimestamp": "2024-13-01T10:00:00Z"}),
                r#"parsing time "2024-13-01T10:00:00Z": month out of range"#,
            ),
            (
                json!({"creationTimestamp": "2024-02-30T10:00:00Z"}),
                r#"parsing time "2024-02-30T10:00:00Z": day out of range"#,
            ),
            (
                json!({"creationTimestamp": "2024-02-03T10:00:00"}),
                r#"parsing time "2024-02-03T10:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00""#,
            ),
            (
                json!({"creationTimestamp": "2024-02-03T10:00:00Zx"}),
                r#"parsing time "2024-02-03T10:00:00Zx": extra text: "x""#,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(decode(&input), Err(want.to_string()), "{input}");
        }
    }

    #[test]
    fn stored_metadata_drops_fields_that_do_not_decode() {
        let got = decode_dropping_malformed(&json!({"name": "a", "labels": {"a": 1}, "odd": 1}));
        assert_eq!(
            got,
            Ok(Decoded {
                meta: json!({"name": "a"}),
                unknown: vec!["odd".to_string()],
            })
        );
        assert_eq!(
            decode_dropping_malformed(&json!("x")),
            Err("invalid metadata: expected object, got string".to_string())
        );
    }

    #[test]
    fn go_json_floats() {
        for (f, want) in [
            (1.5, "1.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
        ] {
            assert_eq!(go_json_float(f), want);
        }
    }
}

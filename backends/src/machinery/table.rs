//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): column definitions, one row of
//! cells per object, and the object embedded as kube's `includeObject` asks. Also the AGE
//! cell, which kube-apiserver fills with a human duration (`5m`, `3d4h`), not a timestamp.

// `ApiError` is large by design (it carries the whole Status); these functions return it as
// every registry operation does.
#![allow(clippy::result_large_err)]

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::machinery::meta_field;
use crate::resource::TableColumn;
use crate::status::{ApiError, ApiResult};

/// The `includeObject` query parameter: what each row carries in `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `None`: `object` is `null`.
    None,
    /// `Metadata` (the default): a `PartialObjectMetadata` with the object's metadata.
    #[default]
    Metadata,
    /// `Object`: the whole object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter; absent or empty means `Metadata`. Other values are 400
    /// with kube's message (`ValidateTableOptions`, reported by the Table conversion).
    pub fn parse(value: Option<&str>) -> ApiResult<IncludeObject> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(ApiError::bad_request(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: {}: must be 'Metadata', 'Object', 'None', or empty",
                crate::machinery::go_quote(other)
            ))),
        }
    }
}

/// One object's row: its cells in column order, and the full object.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    pub cells: Vec<Value>,
    pub object: Value,
}

/// Builds a `meta.k8s.io/v1` Table. `resource_version` (left out when empty),
/// `continue_token` and `remaining` go in the Table's list metadata, as kube copies them from
/// the list it converted.
pub fn table(
    columns: &[TableColumn],
    rows: Vec<TableRow>,
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<i64>,
    include_object: IncludeObject,
) -> Value {
    let mut list_meta = Map::new();
    if !resource_version.is_empty() {
        list_meta.insert("resourceVersion".into(), json!(resource_version));
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        list_meta.insert("continue".into(), json!(token));
    }
    if let Some(n) = remaining {
        list_meta.insert("remainingItemCount".into(), json!(n));
    }
    let definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            let object = match include_object {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_object_metadata(&row.object),
                IncludeObject::Object => row.object,
            };
            json!({"cells": row.cells, "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// The `PartialObjectMetadata` form of an object: its metadata under meta.k8s.io/v1.
pub fn partial_object_metadata(object: &Value) -> Value {
    let metadata = object
        .get("metadata")
        .filter(|m| m.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
    })
}

/// The AGE cell of an object, as kube-apiserver's printers fill it: the time since
/// `metadata.creationTimestamp` as a short human duration (`translateTimestampSince`), or
/// `<unknown>` without a timestamp.
pub fn age_cell(object: &Value) -> Value {
    age_cell_at(object, Utc::now())
}

/// [`age_cell`] measured at `now`.
pub fn age_cell_at(object: &Value, now: DateTime<Utc>) -> Value {
    let created = meta_field(object, "creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok());
    let text = match created {
        Some(t) => human_duration((now - t.with_timezone(&Utc)).num_seconds()),
        None => "<unknown>".to_string(),
    };
    Value::String(text)
}

/// apimachinery's `duration.HumanDuration` for a whole number of seconds (truncated toward
/// zero, as Go's `int(d.Seconds())`): 2–3 significant figures.
pub fn human_duration(seconds: i64) -> String {
    // Up to a second in the future is clock skew, not an error.
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{age_column, name_column};
    use chrono::TimeZone;

    fn object() -> Value {
        json!({
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": "7",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "data": {"k": "v"}
        })
    }

    fn columns() -> Vec<TableColumn> {
        vec![
            name_column(),
            TableColumn {
                name: "Data".into(),
                type_: "integer".into(),
                format: "".into(),
                description: "Number of keys".into(),
                priority: 0,
            },
            TableColumn {
                name: "Extra".into(),
                type_: "string".into(),
                format: "".into(),
                description: "wide only".into(),
                priority: 1,
            },
            age_column(),
        ]
    }

    fn rows() -> Vec<TableRow> {
        vec![TableRow {
            cells: vec![json!("a"), json!(1), json!(""), json!("5m")],
            object: object(),
        }]
    }

    #[test]
    fn table_shape_matches_kube() {
        let t = table(
            &columns(),
            rows(),
            "42",
            Some("tok"),
            Some(3),
            IncludeObject::Metadata,
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3})
        );
        let defs = t["columnDefinitions"].as_array().expect("definitions");
        assert_eq!(defs.len(), 4);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(
            defs[1],
            json!({"name": "Data", "type": "integer", "format": "", "description": "Number of keys", "priority": 0})
        );
        assert_eq!(defs[2]["priority"], 1);
        assert_eq!(t["rows"][0]["cells"], json!(["a", 1, "", "5m"]));
        assert_eq!(
            t["rows"][0]["object"],
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object()["metadata"].clone()
            })
        );
    }

    #[test]
    fn include_object_policies() {
        let t = table(&columns(), rows(), "1", None, None, IncludeObject::Object);
        assert_eq!(t["rows"][0]["object"], object());
        let t = table(&columns(), rows(), "1", None, None, IncludeObject::None);
        assert!(t["rows"][0]["object"].is_null());
        assert!(t["rows"][0]
            .as_object()
            .is_some_and(|r| r.contains_key("object")));
        // List metadata keeps only what is set, but is always present.
        assert_eq!(t["metadata"], json!({"resourceVersion": "1"}));
        let t = table(&columns(), Vec::new(), "", None, None, IncludeObject::None);
        assert_eq!(t["metadata"], json!({}));
        assert_eq!(t["rows"], json!([]));
    }

    #[test]
    fn include_object_parsing() {
        assert_eq!(
            IncludeObject::parse(None).expect("default"),
            IncludeObject::Metadata
        );
        assert_eq!(
            IncludeObject::parse(Some("")).expect("empty"),
            IncludeObject::Metadata
        );
        assert_eq!(
            IncludeObject::parse(Some("None")).expect("none"),
            IncludeObject::None
        );
        assert_eq!(
            IncludeObject::parse(Some("Object")).expect("object"),
            IncludeObject::Object
        );
        let e = IncludeObject::parse(Some("all")).expect_err("bad");
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Unable to convert to Table as requested: includeObject: Invalid value: \"all\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    #[test]
    fn partial_metadata_of_object_without_metadata() {
        assert_eq!(partial_object_metadata(&json!({}))["metadata"], json!({}));
    }

    #[test]
    fn human_durations_match_apimachinery() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60 + 30, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 24 * 3600, "8d"),
            (729 * 24 * 3600, "729d"),
            (730 * 24 * 3600, "2y"),
            (731 * 24 * 3600, "2y1d"),
            (8 * 365 * 24 * 3600, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(*secs), *want, "{secs}s");
        }
    }

    #[test]
    fn age_cell_uses_creation_timestamp() {
        let now = Utc
            .with_ymd_and_hms(2024, 1, 1, 0, 5, 0)
            .single()
            .expect("valid time");
        assert_eq!(age_cell_at(&object(), now), json!("5m"));
        assert_eq!(
            age_cell_at(&json!({"metadata": {}}), now),
            json!("<unknown>")
        );
        assert_eq!(
            age_cell_at(&json!({"metadata": {"creationTimestamp": "garbage"}}), now),
            json!("<unknown>")
        );
        assert_ne!(age_cell(&object()), json!("<unknown>"));
    }
}

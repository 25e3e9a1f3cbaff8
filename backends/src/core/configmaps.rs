//! ConfigMaps (`/api/v1/namespaces/{ns}/configmaps`, short name `cm`): kube's
//! `ValidateConfigMap` and `ValidateConfigMapUpdate`. Keys must be valid configmap keys and
//! may not appear in both `data` and `binaryData`, the whole payload is at most 1 MiB, and
//! an `immutable: true` configmap keeps its data (and its immutability) forever.

use std::sync::Arc;

use serde_json::{json, Value};

use super::b64;
use super::causes::{invalid_each, key_path, too_long};
use super::{age, base_def, entries, len_at, same_collection, Names};
use crate::machinery::validation::is_config_map_key;
use crate::resource::{age_column, name_column, ResourceDef, Strategy, TableColumn};
use crate::status::{field_forbidden, field_invalid, ApiError, StatusCause};

/// kube's `MaxSecretSize`, which also bounds configmaps.
pub const MAX_SIZE: usize = 1024 * 1024;

/// The message kube gives for any change to an immutable configmap or secret.
pub(crate) const IMMUTABLE_MESSAGE: &str = "field is immutable when `immutable` is set";

/// The ConfigMap resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "configmaps",
            singular: "configmap",
            kind: "ConfigMap",
            namespaced: true,
            definition: "io.k8s.api.core.v1.ConfigMap",
        },
        Arc::new(ConfigMapStrategy),
    );
    def.short_names = vec!["cm".into()];
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Data".into(),
            type_: "string".into(),
            format: "".into(),
            description: "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.".into(),
            priority: 0,
        },
        age_column(),
    ];
    def
}

/// The 400 kube answers when `binaryData` holds a value that is not base64 (a decode error
/// in kube, before validation). The registry should call this before the strategy.
pub fn check_encoding(object: &Value) -> Result<(), ApiError> {
    b64::decode_map("ConfigMap", object, "binaryData").map(|_| ())
}

/// kube's configmap strategy (no defaulting beyond decoding).
pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        check_encoding(object)
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let mut causes = Vec::new();
        let binary = object.get("binaryData");
        let mut total = 0;
        for (key, value) in entries(object.get("data")) {
            let field = key_path("data", key);
            causes.extend(invalid_each(&field, key, is_config_map_key(key)));
            if binary.and_then(|b| b.get(key)).is_some() {
                causes.push(field_invalid(
                    &field,
                    key,
                    "duplicate of key present in binaryData",
                ));
            }
            total += value.as_str().map_or(0, str::len);
        }
        for (key, value) in entries(binary) {
            causes.extend(invalid_each(
                &key_path("binaryData", key),
                key,
                is_config_map_key(key),
            ));
            total += b64::decoded_len(value);
        }
        causes.extend(b64::decode_causes(object, "binaryData"));
        if total > MAX_SIZE {
            // kube reports the size against `field.NewPath("")`, which prints as `[]`.
            causes.push(too_long("[]", MAX_SIZE));
        }
        causes
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let mut causes = immutability(object, old, &["data", "binaryData"]);
        causes.extend(self.validate(object));
        causes
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        let count = len_at(object, "/data") + len_at(object, "/binaryData");
        vec![json!(count), json!(age(object))]
    }
}

/// The `immutable` rules shared by configmaps and secrets: once `immutable: true` is
/// stored, it cannot be unset and the listed payload fields cannot change.
pub(crate) fn immutability(object: &Value, old: &Value, fields: &[&str]) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return causes;
    }
    if object.get("immutable").and_then(Value::as_bool) != Some(true) {
        causes.push(field_forbidden("immutable", IMMUTABLE_MESSAGE));
    }
    for field in fields {
        if !same_collection(object.get(*field), old.get(*field)) {
            causes.push(field_forbidden(field, IMMUTABLE_MESSAGE));
        }
    }
    causes
}

/// `kube-system/kube-apiserver-legacy-service-account-token-tracking`: kube-apiserver's
/// legacy token tracking controller records since when it tracks legacy token use (the
/// `kubernetes.io/legacy-token-last-used` label) in `data.since`, which the controller
/// manager's legacy token cleaner reads before it deletes unused tokens.
pub const LEGACY_TOKEN_TRACKING: (&str, &str) = (
    "kube-system",
    "kube-apiserver-legacy-service-account-token-tracking",
);

/// Creates the legacy token tracking ConfigMap dated today (UTC), or dates it today when its
/// `since` is not a `YYYY-MM-DD` date, as kube's controller does; leaves a valid one alone.
pub async fn ensure_legacy_token_tracking(
    registry: &crate::registry::Registry,
) -> crate::status::ApiResult<()> {
    let Some(def) = registry.find("", "configmaps") else {
        return Ok(());
    };
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let (namespace, name) = LEGACY_TOKEN_TRACKING;
    // Go's `time.Parse("2006-01-02", ...)`: two-digit month and day, nothing else.
    let dated = |since: &str| {
        since.len() == 10
            && since.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            })
            && chrono::NaiveDate::parse_from_str(since, "%Y-%m-%d").is_ok()
    };
    match registry.get_object(&def, namespace, name).await {
        Ok(current) => {
            if dated(
                current
                    .pointer("/data/since")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ) {
                return Ok(());
            }
            registry
                .update_internal(
                    &def,
                    namespace,
                    name,
                    crate::registry::manager::KUBE_APISERVER,
                    |current| {
                        let mut updated = current.clone();
                        updated["data"]["since"] = json!(today);
                        Ok(updated)
                    },
                )
                .await
                .map(drop)
        }
        Err(e) if e.code == 404 => {
            let configmap = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {"since": today},
            });
            match registry
                .create_internal(&def, configmap, crate::registry::manager::KUBE_APISERVER)
                .await
            {
                // Another replica made it first, or kube-system is going away.
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_duplicates() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"x": "1", "bad key": "2"}, "binaryData": {"x": "aGk="}});
        let causes = ConfigMapStrategy.validate(&cm);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert!(fields.contains(&"data[bad key]"), "{causes:?}");
        let dup = causes
            .iter()
            .find(|c| c.field == "data[x]")
            .map(|c| c.message.clone());
        assert_eq!(
            dup.as_deref(),
            Some("Invalid value: \"x\": duplicate of key present in binaryData")
        );
    }

    #[test]
    fn size_limit() {
        let big = "a".repeat(MAX_SIZE + 1);
        let cm = json!({"data": {"big": big}});
        let causes = ConfigMapStrategy.validate(&cm);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "[]");
        assert_eq!(
            causes[0].message,
            "Too long: may not be more than 1048576 bytes"
        );
        assert_eq!(causes[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn immutable_configmap() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let changed = json!({"immutable": true, "data": {"a": "2"}});
        let causes = ConfigMapStrategy.validate_update(&changed, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data");
        assert_eq!(
            causes[0].message,
            "Forbidden: field is immutable when `immutable` is set"
        );
        let unset = json!({"data": {"a": "1"}});
        let causes = ConfigMapStrategy.validate_update(&unset, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "immutable");
        // Labels and the like may still change; an absent and an empty binaryData are equal.
        let same = json!({"immutable": true, "data": {"a": "1"}, "binaryData": {}});
        assert!(ConfigMapStrategy.validate_update(&same, &old).is_empty());
    }

    #[test]
    fn binary_data_must_be_base64() {
        let cm = json!({"binaryData": {"k": "not base64!"}});
        assert_eq!(check_encoding(&cm).err().map(|e| e.code), Some(400));
        assert_eq!(ConfigMapStrategy.validate(&cm).len(), 1);
    }

    #[test]
    fn table_counts_both_maps() {
        let cm = json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "aGk="}});
        let cells = ConfigMapStrategy.table_cells(&cm);
        assert_eq!(cells[0], json!(3));
        assert_eq!(def().columns.len(), 3);
    }
}

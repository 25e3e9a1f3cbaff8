//! Secrets (`/api/v1/namespaces/{ns}/secrets`): kube's secret strategy and
//! `ValidateSecret`/`ValidateSecretUpdate`. `type` defaults to `Opaque` and never changes;
//! `stringData` is folded into `data` (base64) on every write and never stored; `data`
//! keys must be valid configmap keys, values base64, the total at most 1 MiB; typed secrets
//! need their well-known keys; `immutable: true` freezes `data`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::b64;
use super::causes::{immutable, invalid_each, key_path, too_long};
use super::configmaps::{immutability, MAX_SIZE};
use super::{age, base_def, entries, field_at, len_at, str_at, Names};
use crate::machinery::validation::is_config_map_key;
use crate::resource::{age_column, name_column, ResourceDef, Strategy, TableColumn};
use crate::status::{field_required, ApiError, StatusCause};

/// The type a secret gets when it names none.
pub const DEFAULT_TYPE: &str = "Opaque";

/// The Secret resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "secrets",
            singular: "secret",
            kind: "Secret",
            namespaced: true,
            definition: "io.k8s.api.core.v1.Secret",
        },
        Arc::new(SecretStrategy),
    );
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Type".into(),
            type_: "string".into(),
            format: "".into(),
            description: "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types".into(),
            priority: 0,
        },
        TableColumn {
            name: "Data".into(),
            type_: "string".into(),
            format: "".into(),
            description: "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4".into(),
            priority: 0,
        },
        age_column(),
    ];
    def.field_selectors = vec![("type", |o| field_at(o, "/type"))];
    def
}

/// The 400 kube answers when `data` holds a value that is not base64 (a decode error in
/// kube, before validation). The registry should call this before the strategy.
pub fn check_encoding(object: &Value) -> Result<(), ApiError> {
    b64::decode_map("Secret", object, "data").map(|_| ())
}

/// kube's secret strategy.
pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn check_decode(&self, object: &Value) -> Result<(), ApiError> {
        check_encoding(object)
    }

    fn prepare_for_create(&self, object: &mut Value) {
        decode_defaults(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        decode_defaults(object);
    }

    fn validate(&self, object: &Value) -> Vec<StatusCause> {
        let mut causes = Vec::new();
        let mut total = 0;
        for (key, value) in entries(object.get("data")) {
            causes.extend(invalid_each(
                &key_path("data", key),
                key,
                is_config_map_key(key),
            ));
            total += b64::decoded_len(value);
        }
        causes.extend(b64::decode_causes(object, "data"));
        if total > MAX_SIZE {
            causes.push(too_long("data", MAX_SIZE));
        }
        causes.extend(type_requirements(object));
        causes
    }

    fn validate_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        let mut causes: Vec<StatusCause> = immutable("type", object.get("type"), old.get("type"))
            .into_iter()
            .collect();
        causes.extend(immutability(object, old, &["data"]));
        causes.extend(self.validate(object));
        causes
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![
            json!(str_at(object, "/type")),
            json!(len_at(object, "/data")),
            json!(age(object)),
        ]
    }
}

/// What kube's decoding does to every Secret written: `type` defaults to `Opaque`, and
/// `stringData` entries overwrite `data` entries (base64-encoded), then disappear.
fn decode_defaults(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    if map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        map.insert("type".into(), json!(DEFAULT_TYPE));
    }
    let Some(string_data) = map.remove("stringData") else {
        return;
    };
    let Value::Object(string_data) = string_data else {
        return;
    };
    if string_data.is_empty() {
        return;
    }
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or("");
            data.insert(key, json!(b64::encode_std(text.as_bytes())));
        }
    }
}

/// The keys (or annotation) each well-known secret type requires, with kube's paths.
fn type_requirements(object: &Value) -> Vec<StatusCause> {
    let data = object.get("data");
    let has = |key: &str| data.and_then(|d| d.get(key)).is_some();
    let mut causes = Vec::new();
    match str_at(object, "/type") {
        "kubernetes.io/service-account-token" => {
            let name = object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_empty() {
                causes.push(field_required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => causes.extend(docker_config(data, ".dockercfg")),
        "kubernetes.io/dockerconfigjson" => causes.extend(docker_config(data, ".dockerconfigjson")),
        // Either may be empty, but one of the two must be present.
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            causes.push(field_required("data[username]", ""));
            causes.push(field_required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" => {
            let len = data
                .and_then(|d| d.get("ssh-privatekey"))
                .map_or(0, b64::decoded_len);
            if len == 0 {
                causes.push(field_required("data[ssh-privatekey]", ""));
            }
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    causes.push(field_required(&key_path("data", key), ""));
                }
            }
        }
        _ => {}
    }
    causes
}

/// Docker config secrets need their key, holding a JSON object.
fn docker_config(data: Option<&Value>, key: &str) -> Vec<StatusCause> {
    let field = key_path("data", key);
    let Some(value) = data.and_then(|d| d.get(key)) else {
        return vec![field_required(&field, "")];
    };
    let bytes = value
        .as_str()
        .and_then(|s| b64::decode_std(s).ok())
        .unwrap_or_default();
    match json_object_error(&bytes) {
        None => Vec::new(),
        Some(detail) => vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: \"<secret contents redacted>\": {detail}"),
            field,
        }],
    }
}

/// Why bytes are not a JSON object, in the words of Go's `json.Unmarshal` into a map.
fn json_object_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_)) | Ok(Value::Null) => None,
        Ok(other) => {
            let kind = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            Some(format!(
                "json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
            ))
        }
        Err(e) => Some(
            crate::machinery::gojson_syntax::syntax_error(bytes).unwrap_or_else(|| e.to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_merged_and_type_defaulted() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "hello", "c": "world"}});
        SecretStrategy.prepare_for_create(&mut s);
        assert_eq!(s["type"], "Opaque");
        assert!(s.get("stringData").is_none());
        assert_eq!(
            s["data"],
            json!({"a": "eA==", "b": "aGVsbG8=", "c": "d29ybGQ="})
        );

        let old = s.clone();
        let mut update =
            json!({"metadata": {"name": "s"}, "type": "Opaque", "stringData": {"d": "x"}});
        SecretStrategy.prepare_for_update(&mut update, &old);
        assert_eq!(update["data"], json!({"d": "eA=="}));
    }

    #[test]
    fn type_is_immutable() {
        let old = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        let mut new = json!({"data": {"tls.crt": "", "tls.key": ""}});
        SecretStrategy.prepare_for_update(&mut new, &old);
        let causes = SecretStrategy.validate_update(&new, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "type");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"Opaque\": field is immutable"
        );
    }

    #[test]
    fn immutable_secret_data() {
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        let new = json!({"type": "Opaque", "immutable": true, "data": {"a": "eQ=="}});
        let causes = SecretStrategy.validate_update(&new, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data");
        assert_eq!(causes[0].reason, "FieldValueForbidden");
    }

    #[test]
    fn typed_secrets_need_their_keys() {
        let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        let causes = SecretStrategy.validate(&tls);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data[tls.key]");
        assert_eq!(causes[0].message, "Required value");

        let sa = json!({"type": "kubernetes.io/service-account-token", "metadata": {}});
        assert_eq!(
            SecretStrategy.validate(&sa)[0].field,
            "metadata.annotations[kubernetes.io/service-account.name]"
        );

        let docker = json!({"type": "kubernetes.io/dockerconfigjson", "data": {}});
        assert_eq!(
            SecretStrategy.validate(&docker)[0].field,
            "data[.dockerconfigjson]"
        );
        let bad = json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64::encode_std(b"[1]")}});
        assert_eq!(
            SecretStrategy.validate(&bad)[0].message,
            "Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        let garbled = json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64::encode_std(b"{bad")}});
        assert_eq!(
            SecretStrategy.validate(&garbled)[0].message,
            "Invalid value: \"<secret contents redacted>\": invalid character 'b' looking for beginning of object key string"
        );
        let good = json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64::encode_std(b"{\"auths\":{}}")}});
        assert!(SecretStrategy.validate(&good).is_empty());

        let basic = json!({"type": "kubernetes.io/basic-auth", "data": {}});
        assert_eq!(SecretStrategy.validate(&basic).len(), 2);
        let basic = json!({"type": "kubernetes.io/basic-auth", "data": {"password": ""}});
        assert!(SecretStrategy.validate(&basic).is_empty());
        let ssh = json!({"type": "kubernetes.io/ssh-auth", "data": {"ssh-privatekey": ""}});
        assert_eq!(
            SecretStrategy.validate(&ssh)[0].field,
            "data[ssh-privatekey]"
        );
    }

    #[test]
    fn keys_encoding_and_size() {
        let s = json!({"type": "Opaque", "data": {"bad/key": "eA=="}});
        assert_eq!(SecretStrategy.validate(&s)[0].field, "data[bad/key]");
        let s = json!({"type": "Opaque", "data": {"k": "%%%"}});
        assert_eq!(check_encoding(&s).err().map(|e| e.code), Some(400));
        let big = b64::encode_std(&vec![0u8; MAX_SIZE + 1]);
        let s = json!({"type": "Opaque", "data": {"k": big}});
        let causes = SecretStrategy.validate(&s);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data");
        assert_eq!(causes[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn table_and_selector() {
        let s = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "", "b": ""}});
        let cells = SecretStrategy.table_cells(&s);
        assert_eq!(cells[0], "Opaque");
        assert_eq!(cells[1], json!(2));
        assert_eq!(
            def().field_extractor("type").and_then(|f| f(&s)),
            Some("Opaque".into())
        );
        assert_eq!(def().columns.len(), 4);
    }
}

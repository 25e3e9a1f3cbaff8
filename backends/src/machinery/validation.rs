//! Kubernetes name and metadata validation, with k8s.io/apimachinery's messages and field
//! paths: DNS-1123/1035 names, label keys and values, ConfigMap keys, ObjectMeta on create
//! (`ValidateObjectMetaAccessor`), and `generateName` expansion (`names.SimpleNameGenerator`).
//!
//! Messages follow apimachinery v0.36: names and ConfigMap keys say `characters` in length
//! errors, label keys and values (validated by the newer `validate/content` package) say
//! `bytes`.

use serde_json::Value;

use crate::machinery::go_quote;
use crate::status::{field_forbidden, field_required, StatusCause};

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_MAX: usize = 63;
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_MAX: usize = 63;
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MAX: usize = 63;
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// kube's `TotalAnnotationSizeLimitB`: keys plus values of all annotations.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Alphabet of generated name suffixes (`utilrand.String`: no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Generated names are `prefix[..58]` + 5 random characters, fitting a 63-character label.
const MAX_GENERATE_NAME_PREFIX: usize = 63 - 5;
const RANDOM_SUFFIX_LENGTH: usize = 5;

/// `validation.MaxLenError`, for names, label keys and values alike (kube 1.32 and 1.33).
fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `validation.RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        quoted.join(" or ")
    )
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f)
                && is_lower_alnum(l)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

fn matches_dns1035_label(s: &str) -> bool {
    matches_dns1123_label(s) && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
}

/// Matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn matches_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `validation.IsDNS1123Label`: a lowercase RFC 1123 label (namespaces, most names of
/// DNS-visible objects).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            // A valid subdomain that is not a label: the length is checked, so it is dots.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `validation.IsDNS1123Subdomain`: a lowercase RFC 1123 subdomain (the name rule of most
/// resources).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    dns1123_subdomain_errors(value, max_len_error)
}

fn dns1123_subdomain_errors(value: &str, max_len: fn(usize) -> String) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len(DNS1123_SUBDOMAIN_MAX));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `validation.IsDNS1035Label`: an RFC 1035 label (Service names).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1035_LABEL_MAX {
        errs.push(max_len_error(DNS1035_LABEL_MAX));
    }
    if !matches_dns1035_label(value) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `validation.IsQualifiedName` (`content.IsLabelKey`): label keys, annotation keys,
/// finalizer names: `[prefix/]name`, the prefix a DNS subdomain.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix, max_len_error)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_KEY_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_KEY_MAX)));
    }
    if !matches_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `validation.IsValidLabelValue` (`content.IsLabelValue`).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !matches_label_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `validation.IsConfigMapKey`: keys of ConfigMap and Secret `data`.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    let chars_ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !chars_ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `path.IsValidPathSegmentName`: the loosest name rule (names only need to be usable in a
/// URL path and a storage key).
pub fn is_path_segment_name(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    is_path_segment_prefix(value)
}

/// `path.IsValidPathSegmentPrefix`: [`is_path_segment_name`] for a `generateName` prefix.
pub fn is_path_segment_prefix(value: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|bad| value.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// Which rule a resource's names follow (kube's `ValidateNameFunc`s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most resources (ConfigMaps, Secrets, Deployments, ...).
    Dns1123Subdomain,
    /// `NameIsDNSLabel`: Namespaces, Pods' hostnames, ...
    Dns1123Label,
    /// `NameIsDNS1035Label`: Services.
    Dns1035Label,
    /// `ValidatePathSegmentName`: RBAC objects and others whose names only go in paths.
    PathSegment,
}

impl NameRule {
    /// Validates `name`; `prefix` is true for a `generateName`, where a trailing `-` is
    /// allowed because random characters will follow.
    pub fn validate(self, name: &str, prefix: bool) -> Vec<String> {
        if self == NameRule::PathSegment {
            return if prefix {
                is_path_segment_prefix(name)
            } else {
                is_path_segment_name(name)
            };
        }
        let masked;
        let name = if prefix {
            masked = mask_trailing_dash(name);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Dns1123Subdomain => is_dns1123_subdomain(name),
            NameRule::Dns1123Label => is_dns1123_label(name),
            NameRule::Dns1035Label => is_dns1035_label(name),
            NameRule::PathSegment => Vec::new(),
        }
    }
}

/// kube's `maskTrailingDash`, quirk included: it drops the dash *and* the character before
/// it, then appends `a` (so `ab-` validates as `aa`).
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        if name.is_char_boundary(cut) {
            return format!("{}a", &name[..cut]);
        }
        // A multi-byte character before the dash: invalid anyway, only keep the slicing safe.
        return format!("{}a", &name[..name.len() - 1]);
    }
    name.to_string()
}

/// A `field.Invalid` cause whose bad value is rendered by `render` (kube prints strings with
/// `%q`, numbers bare, everything else as JSON).
fn invalid_cause(field: &str, rendered: String, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {rendered}: {detail}"),
        field: field.into(),
    }
}

fn invalid_str(field: &str, value: &str, detail: &str) -> StatusCause {
    invalid_cause(field, go_quote(value), detail)
}

/// A value of the wrong JSON type (kube would have failed to decode it at all).
fn type_invalid(field: &str, value: &Value, expected: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueTypeInvalid".into(),
        message: format!("Invalid value: {value}: must be of type {expected}"),
        field: field.into(),
    }
}

/// A string field of metadata; absent or `null` is empty, another type is an error.
fn meta_str<'a>(
    meta: &'a serde_json::Map<String, Value>,
    key: &str,
    causes: &mut Vec<StatusCause>,
) -> &'a str {
    match meta.get(key) {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(other) => {
            causes.push(type_invalid(&format!("metadata.{key}"), other, "string"));
            ""
        }
    }
}

/// A `map[string]string` field of metadata (labels, annotations) as pairs.
fn meta_string_map<'a>(
    meta: &'a serde_json::Map<String, Value>,
    key: &str,
    causes: &mut Vec<StatusCause>,
) -> Vec<(&'a str, &'a str)> {
    let field = format!("metadata.{key}");
    match meta.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => {
            let mut pairs = Vec::with_capacity(m.len());
            for (k, v) in m {
                match v {
                    Value::String(s) => pairs.push((k.as_str(), s.as_str())),
                    // kube decodes `null` map values as empty strings.
                    Value::Null => pairs.push((k.as_str(), "")),
                    other => causes.push(type_invalid(&format!("{field}.{k}"), other, "string")),
                }
            }
            pairs
        }
        Some(other) => {
            causes.push(type_invalid(&field, other, "object"));
            Vec::new()
        }
    }
}

/// Validates an object's metadata on create, like kube's `ValidateObjectMetaAccessor` with
/// `metadata` as the field path: `generateName` and `name` against `name_rule`, namespace
/// presence (required when `namespaced`, forbidden otherwise) and format, `generation`,
/// label keys and values, annotation keys and total size, owner references and finalizers.
///
/// As in kube, `generateName` must already have been expanded into `name` (see
/// [`generate_name`]): an empty `name` is reported as required even when `generateName` is set.
pub fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    name_rule: NameRule,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let empty = serde_json::Map::new();
    let meta = match meta {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => {
            causes.push(type_invalid("metadata", other, "object"));
            &empty
        }
    };

    let generate_name = meta_str(meta, "generateName", &mut causes);
    if !generate_name.is_empty() {
        for msg in name_rule.validate(generate_name, true) {
            causes.push(invalid_str("metadata.generateName", generate_name, &msg));
        }
    }
    let name = meta_str(meta, "name", &mut causes);
    if name.is_empty() {
        causes.push(field_required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in name_rule.validate(name, false) {
            causes.push(invalid_str("metadata.name", name, &msg));
        }
    }

    let namespace = meta_str(meta, "namespace", &mut causes);
    if namespaced {
        if namespace.is_empty() {
            causes.push(field_required("metadata.namespace", ""));
        } else {
            for msg in NameRule::Dns1123Label.validate(namespace, false) {
                causes.push(invalid_str("metadata.namespace", namespace, &msg));
            }
        }
    } else if !namespace.is_empty() {
        causes.push(field_forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }

    if let Some(generation) = meta.get("generation").and_then(Value::as_i64) {
        if generation < 0 {
            causes.push(invalid_cause(
                "metadata.generation",
                generation.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }

    for (k, v) in meta_string_map(meta, "labels", &mut causes) {
        for msg in is_qualified_name(k) {
            causes.push(invalid_str("metadata.labels", k, &msg));
        }
        for msg in is_valid_label_value(v) {
            causes.push(invalid_str("metadata.labels", v, &msg));
        }
    }

    let annotations = meta_string_map(meta, "annotations", &mut causes);
    let mut total = 0usize;
    for (k, v) in &annotations {
        // Annotation keys follow the label key rule, except that case does not matter.
        for msg in is_qualified_name(&k.to_lowercase()) {
            causes.push(invalid_str("metadata.annotations", k, &msg));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        causes.push(StatusCause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
            field: "metadata.annotations".into(),
        });
    }

    validate_owner_references(meta.get("ownerReferences"), &mut causes);
    validate_finalizers(meta.get("finalizers"), &mut causes);
    causes
}

/// kube's `ValidateOwnerReferences`.
fn validate_owner_references(refs: Option<&Value>, causes: &mut Vec<StatusCause>) {
    const FIELD: &str = "metadata.ownerReferences";
    let refs = match refs {
        None | Some(Value::Null) => return,
        Some(Value::Array(a)) => a,
        Some(other) => {
            causes.push(type_invalid(FIELD, other, "array"));
            return;
        }
    };
    let mut first_controller: Option<String> = None;
    for r in refs {
        let Some(m) = r.as_object() else {
            causes.push(type_invalid(FIELD, r, "object"));
            continue;
        };
        let get = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind, name, uid) =
            (get("apiVersion"), get("kind"), get("name"), get("uid"));
        // `schema.ParseGroupVersion`: `v1`, `group/version`; anything else has no version.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => ("", *v),
            [g, v] => (*g, *v),
            _ => ("", ""),
        };
        if version.is_empty() {
            causes.push(invalid_str(
                &format!("{FIELD}.apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        if kind.is_empty() {
            causes.push(invalid_str(
                &format!("{FIELD}.kind"),
                kind,
                "kind must not be empty",
            ));
        }
        if name.is_empty() {
            causes.push(invalid_str(
                &format!("{FIELD}.name"),
                name,
                "name must not be empty",
            ));
        }
        if uid.is_empty() {
            causes.push(invalid_str(
                &format!("{FIELD}.uid"),
                uid,
                "uid must not be empty",
            ));
        }
        // kube's `BannedOwners`: core/v1 Events may not own anything.
        if group.is_empty() && version == "v1" && kind == "Event" {
            causes.push(invalid_cause(
                FIELD,
                r.to_string(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if m.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => causes.push(invalid_cause(
                    FIELD,
                    Value::Array(refs.clone()).to_string(),
                    &format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

/// kube's `ValidateFinalizers`.
fn validate_finalizers(finalizers: Option<&Value>, causes: &mut Vec<StatusCause>) {
    const FIELD: &str = "metadata.finalizers";
    let list = match finalizers {
        None | Some(Value::Null) => return,
        Some(Value::Array(a)) => a,
        Some(other) => {
            causes.push(type_invalid(FIELD, other, "array"));
            return;
        }
    };
    let (mut orphan, mut foreground) = (false, false);
    for f in list {
        let Some(s) = f.as_str() else {
            causes.push(type_invalid(FIELD, f, "string"));
            continue;
        };
        for msg in is_qualified_name(s) {
            causes.push(invalid_str(FIELD, s, &msg));
        }
        orphan |= s == "orphan";
        foreground |= s == "foregroundDeletion";
    }
    if orphan && foreground {
        causes.push(invalid_cause(
            FIELD,
            Value::Array(list.clone()).to_string(),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

/// kube's core `validateKubeFinalizerName` for each of `metadata.finalizers` (indexed paths):
/// a qualified name, and a standard one unless it has a domain path.
pub fn validate_kube_finalizer_names(meta: &Value) -> Vec<StatusCause> {
    const STANDARD: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];
    let mut causes = Vec::new();
    let Some(list) = meta.get("finalizers").and_then(Value::as_array) else {
        return causes;
    };
    for (i, name) in list.iter().enumerate() {
        let Some(name) = name.as_str() else {
            continue;
        };
        let field = format!("metadata.finalizers[{i}]");
        for msg in is_qualified_name(name) {
            causes.push(invalid_str(&field, name, &msg));
        }
        if !name.contains('/') && !STANDARD.contains(&name) {
            causes.push(invalid_str(
                &field,
                name,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    causes
}

/// Expands a `generateName` like kube's `names.SimpleNameGenerator`: the prefix, cut to 58
/// bytes, followed by 5 random characters from `bcdfghjklmnpqrstvwxz2456789`.
pub fn generate_name(prefix: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATE_NAME_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut name = String::with_capacity(cut + RANDOM_SUFFIX_LENGTH);
    name.push_str(&prefix[..cut]);
    let mut produced = 0;
    while produced < RANDOM_SUFFIX_LENGTH {
        // v4 UUIDs are 122 bits from the OS generator; like kube, take 5 bits at a time and
        // skip values past the alphabet so every character is equally likely. The version
        // and variant bits live in bytes 6 and 8, which are skipped.
        let bytes = uuid::Uuid::new_v4().into_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if i == 6 || i == 8 || produced == RANDOM_SUFFIX_LENGTH {
                continue;
            }
            let idx = usize::from(b & 0x1f);
            if let Some(&c) = NAME_ALPHABET.get(idx) {
                name.push(char::from(c));
                produced += 1;
            }
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    fn messages(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn dns1123_subdomain_messages_match_kube() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(is_dns1123_subdomain("a").is_empty());
        assert_eq!(
            is_dns1123_subdomain("Bad_Name"),
            vec![SUBDOMAIN_MSG.to_string()]
        );
        assert_eq!(is_dns1123_subdomain(""), vec![SUBDOMAIN_MSG.to_string()]);
        assert_eq!(is_dns1123_subdomain("a..b").len(), 1);
        assert_eq!(is_dns1123_subdomain("-a").len(), 1);
        let long = "a".repeat(254);
        assert_eq!(
            is_dns1123_subdomain(&long),
            vec!["must be no more than 253 characters".to_string()]
        );
        assert!(is_dns1123_subdomain(&"a".repeat(253)).is_empty());
    }

    #[test]
    fn dns1123_label_rejects_dots_with_its_own_message() {
        assert!(is_dns1123_label("my-name").is_empty());
        assert!(is_dns1123_label("123-abc").is_empty());
        assert_eq!(
            is_dns1123_label("a.b"),
            vec!["must not contain dots".to_string()]
        );
        assert_eq!(
            is_dns1123_label("A"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
    }

    #[test]
    fn dns1035_label_needs_a_leading_letter() {
        assert!(is_dns1035_label("my-svc").is_empty());
        assert_eq!(
            is_dns1035_label("1svc"),
            vec!["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
    }

    #[test]
    fn regex_error_matches_go_formatting() {
        assert_eq!(
            regex_error("msg", "re", &["a", "b"]),
            "msg (e.g. 'a',  or 'b', regex used for validation is 're')"
        );
        assert_eq!(
            regex_error("msg", "re", &[]),
            "msg (regex used for validation is 're')"
        );
    }

    #[test]
    fn qualified_names() {
        for ok in ["app", "example.com/app", "a.b_c-d", "A1", "k8s.io/x"] {
            assert!(is_qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            is_qualified_name("/app"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            is_qualified_name("example.com/"),
            vec![
                "name part must be non-empty".to_string(),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string()
            ]
        );
        assert_eq!(
            is_qualified_name("Example.com/app"),
            vec![format!("prefix part {SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        let e = is_qualified_name("a/b/c");
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("a qualified name must consist of"));
        assert!(e[0].ends_with(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
    }

    #[test]
    fn label_values() {
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("my_value-1.2").is_empty());
        assert_eq!(
            is_valid_label_value("-bad"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
        );
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
    }

    #[test]
    fn config_map_keys() {
        assert!(is_config_map_key("key.name").is_empty());
        assert!(is_config_map_key("KEY_NAME").is_empty());
        assert!(is_config_map_key(".dotfile").is_empty());
        assert_eq!(
            is_config_map_key(".."),
            vec!["must not be '..'".to_string()]
        );
        assert_eq!(
            is_config_map_key("..x"),
            vec!["must not start with '..'".to_string()]
        );
        assert_eq!(
            is_config_map_key("a b"),
            vec!["a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string()]
        );
        assert_eq!(is_config_map_key("").len(), 1);
    }

    #[test]
    fn path_segment_names() {
        assert!(is_path_segment_name("system:admin").is_empty());
        assert_eq!(
            is_path_segment_name(".."),
            vec!["may not be '..'".to_string()]
        );
        assert_eq!(
            is_path_segment_name("a/b%c"),
            vec![
                "may not contain '/'".to_string(),
                "may not contain '%'".to_string()
            ]
        );
        assert!(NameRule::PathSegment.validate("..", true).is_empty());
    }

    #[test]
    fn generate_name_prefixes_may_end_with_a_dash() {
        assert!(NameRule::Dns1123Subdomain.validate("web-", true).is_empty());
        assert!(!NameRule::Dns1123Subdomain
            .validate("web-", false)
            .is_empty());
        assert!(NameRule::Dns1035Label.validate("svc-", true).is_empty());
        // kube's mask keeps `-` alone invalid.
        assert!(!NameRule::Dns1123Label.validate("-", true).is_empty());
    }

    #[test]
    fn object_meta_requires_a_name() {
        let causes = validate_object_meta(
            &json!({"namespace": "default"}),
            true,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            messages(&causes),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        assert_eq!(causes[0].reason, "FieldValueRequired");
    }

    #[test]
    fn object_meta_name_and_generate_name_errors() {
        let causes = validate_object_meta(
            &json!({"name": "Bad_Name", "generateName": "Bad_", "namespace": "default"}),
            true,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            messages(&causes),
            vec![
                format!("metadata.generateName: Invalid value: \"Bad_\": {SUBDOMAIN_MSG}"),
                format!("metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}"),
            ]
        );
    }

    #[test]
    fn object_meta_namespace_rules() {
        let causes = validate_object_meta(&json!({"name": "a"}), true, NameRule::Dns1123Subdomain);
        assert_eq!(
            messages(&causes),
            vec!["metadata.namespace: Required value"]
        );
        let causes = validate_object_meta(
            &json!({"name": "a", "namespace": "x"}),
            false,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            messages(&causes),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
        let causes = validate_object_meta(
            &json!({"name": "a", "namespace": "a.b"}),
            true,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            messages(&causes),
            vec!["metadata.namespace: Invalid value: \"a.b\": must not contain dots"]
        );
    }

    #[test]
    fn object_meta_labels_and_annotations() {
        let causes = validate_object_meta(
            &json!({
                "name": "a",
                "labels": {"good": "v", "bad key": "v", "k": "-v"},
                "annotations": {"Example.COM/Key": "anything goes", "bad/key/x": "v"}
            }),
            false,
            NameRule::Dns1123Subdomain,
        );
        let msgs = messages(&causes);
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(msgs[0]
            .starts_with("metadata.labels: Invalid value: \"bad key\": name part must consist of"));
        assert!(msgs[1].starts_with(
            "metadata.labels: Invalid value: \"-v\": a valid label must be an empty string"
        ));
        assert!(msgs[2]
            .starts_with("metadata.annotations: Invalid value: \"bad/key/x\": a qualified name"));
    }

    #[test]
    fn object_meta_annotation_size_limit() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let causes = validate_object_meta(
            &json!({"name": "a", "annotations": {"k": big}}),
            false,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            messages(&causes),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        assert_eq!(causes[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn object_meta_finalizers_owner_references_and_generation() {
        let causes = validate_object_meta(
            &json!({
                "name": "a",
                "generation": -1,
                "finalizers": ["orphan", "foregroundDeletion", "bad finalizer"],
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "1", "controller": true},
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "2", "controller": true},
                    {"apiVersion": "", "kind": "X", "name": "", "uid": "3"}
                ]
            }),
            false,
            NameRule::Dns1123Subdomain,
        );
        let msgs = messages(&causes);
        assert_eq!(
            msgs[0],
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(msgs.iter().any(|m| m.ends_with("Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/c and Deployment/d")));
        assert!(msgs.contains(
            &"metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty"
                .to_string()
        ));
        assert!(msgs.contains(
            &"metadata.ownerReferences.name: Invalid value: \"\": name must not be empty"
                .to_string()
        ));
        assert!(msgs
            .iter()
            .any(|m| m
                .starts_with("metadata.finalizers: Invalid value: \"bad finalizer\": name part")));
        assert!(msgs.contains(&"metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\",\"bad finalizer\"]: finalizer orphan and foregroundDeletion cannot be both set".to_string()));
    }

    #[test]
    fn object_meta_wrong_types_are_reported_not_panicked() {
        let causes = validate_object_meta(
            &json!({"name": 5, "labels": ["x"]}),
            false,
            NameRule::Dns1123Subdomain,
        );
        assert!(causes
            .iter()
            .any(|c| c.field == "metadata.name" && c.reason == "FieldValueTypeInvalid"));
        assert!(causes.iter().any(|c| c.field == "metadata.labels"));
        let causes = validate_object_meta(&json!("x"), false, NameRule::Dns1123Subdomain);
        assert_eq!(causes[0].field, "metadata");
    }

    #[test]
    fn bad_values_are_quoted_like_go() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("héllo"), "\"héllo\"");
    }

    #[test]
    fn generated_names_follow_kube() {
        let name = generate_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("web-"));
        assert!(name[4..].bytes().all(|c| NAME_ALPHABET.contains(&c)));
        assert!(is_dns1123_subdomain(&name).is_empty());
        let long = generate_name(&"a".repeat(100));
        assert_eq!(long.len(), 63);
        assert!(long.starts_with(&"a".repeat(58)));
        // Not a constant.
        let names: std::collections::HashSet<String> =
            (0..20).map(|_| generate_name("x-")).collect();
        assert!(names.len() > 1);
        // Multi-byte prefixes are cut on a character boundary.
        let cut = generate_name(&"é".repeat(40));
        assert!(cut.len() <= 63);
    }
}

//! An object as the watch cache serves it: the stored JSON with `metadata.resourceVersion` set
//! to the revision, and its labels for selectors. Nothing is decoded into a tree but the
//! labels: the object and its metadata are split into raw members, copied as the store holds
//! them, with the version's member written in. (Decoding the whole object and encoding it
//! again cost a create more than its managed fields did.)

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::Revision;

/// An object's bytes and labels as served.
pub(super) struct Rendered {
    pub bytes: Bytes,
    pub labels: BTreeMap<String, String>,
    /// The stored value is not a JSON object (or its metadata is not one): kube's corrupt
    /// object, which reads answer with a 500 rather than with the bytes.
    pub corrupt: bool,
}

/// Sets `metadata.resourceVersion` and extracts the labels. A stored value that is not a JSON
/// object (or whose metadata is not one) is kept as it is, marked corrupt, and logged: the
/// cache must not drop what the store holds, and reads must not pass it off as an object.
pub(super) fn render(value: &[u8], revision: Revision) -> Rendered {
    match stamp(value, revision) {
        Some(rendered) => rendered,
        None => {
            tracing::warn!(
                revision,
                "stored value is not a JSON object; reads of it answer 500"
            );
            Rendered {
                bytes: Bytes::copy_from_slice(value),
                labels: BTreeMap::new(),
                corrupt: true,
            }
        }
    }
}

/// The top-level members of a JSON object, keys and values as their raw text.
struct Members<'a>(Vec<(&'a RawValue, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::with_capacity(8);
                while let Some(key) = map.next_key::<&'de RawValue>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// Whether a raw key is `name`, however it is escaped.
fn key_is(raw: &RawValue, name: &str) -> bool {
    let text = raw.get();
    if !text.contains('\\') {
        return text.len() == name.len() + 2 && &text[1..text.len() - 1] == name;
    }
    serde_json::from_str::<String>(text).is_ok_and(|key| key == name)
}

/// The raw members of `members` to write: the last of each duplicated `name` (as a decoder
/// keeps it), with `replace` as its value when given.
fn without_duplicates<'a>(
    members: &'a [(&'a RawValue, &'a RawValue)],
    name: &'a str,
    replace: Option<&'a str>,
) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    let last = members.iter().rposition(|(key, _)| key_is(key, name));
    members
        .iter()
        .enumerate()
        .filter_map(move |(i, (key, raw))| {
            if Some(i) == last {
                Some((key.get(), replace.unwrap_or(raw.get())))
            } else if last.is_some() && key_is(key, name) {
                None
            } else {
                Some((key.get(), raw.get()))
            }
        })
}

/// Writes `{key:value,...}` from raw members.
fn write_object<'a>(out: &mut String, members: impl Iterator<Item = (&'a str, &'a str)>) {
    out.push('{');
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(key);
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
}

fn stamp(value: &[u8], revision: Revision) -> Option<Rendered> {
    let Members(members) = serde_json::from_slice(value).ok()?;
    let found = members.iter().rposition(|(key, _)| key_is(key, "metadata"));
    let Members(meta) = match found {
        Some(i) => serde_json::from_str(members[i].1.get()).ok()?,
        None => Members(Vec::new()),
    };
    let mut labels = BTreeMap::new();
    if let Some((_, raw)) = meta.iter().rev().find(|(key, _)| key_is(key, "labels")) {
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw.get()) {
            for (k, v) in map {
                if let Value::String(v) = v {
                    labels.insert(k, v);
                }
            }
        }
    }

    // `metadata` with the version replaced where it was, or added at its end.
    let version = format!("\"{revision}\"");
    let has_version = meta.iter().any(|(key, _)| key_is(key, "resourceVersion"));
    let added = (!has_version).then_some(("\"resourceVersion\"", version.as_str()));
    let mut metadata = String::with_capacity(found.map_or(0, |i| members[i].1.get().len()) + 32);
    write_object(
        &mut metadata,
        without_duplicates(&meta, "resourceVersion", Some(&version)).chain(added),
    );

    // The revision adds a few bytes; size the buffer so it rarely grows.
    let mut out = String::with_capacity(value.len() + 32);
    let added = found
        .is_none()
        .then_some(("\"metadata\"", metadata.as_str()));
    write_object(
        &mut out,
        without_duplicates(&members, "metadata", Some(&metadata)).chain(added),
    );
    // Trimmed so that a doubled capacity is not kept alive for the object's lifetime.
    out.shrink_to_fit();
    Some(Rendered {
        bytes: Bytes::from(out.into_bytes()),
        labels,
        corrupt: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn rendered(input: &str, revision: Revision) -> (Value, String, BTreeMap<String, String>) {
        let r = render(input.as_bytes(), revision);
        let text = String::from_utf8(r.bytes.to_vec()).expect("utf-8");
        let value = serde_json::from_str(&text).expect("rendered JSON parses");
        (value, text, r.labels)
    }

    #[test]
    fn the_version_is_set_and_everything_else_kept_byte_for_byte() {
        let input = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default","labels":{"app":"x","n":"1"}},"data":{"k":"caf\u00e9 \"q\"","n":1.50}}"#;
        let (value, text, labels) = rendered(input, 42);
        assert_eq!(
            text,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default","labels":{"app":"x","n":"1"},"resourceVersion":"42"},"data":{"k":"caf\u00e9 \"q\"","n":1.50}}"#
        );
        assert_eq!(value["metadata"]["resourceVersion"], "42");
        assert_eq!(value["data"]["k"], "café \"q\"");
        assert_eq!(
            labels,
            BTreeMap::from([("app".into(), "x".into()), ("n".into(), "1".into())])
        );
    }

    #[test]
    fn a_stored_version_is_replaced_in_place() {
        let (_, text, _) = rendered(
            r#"{"metadata":{"name":"a","resourceVersion":"7","uid":"u"},"spec":{}}"#,
            9,
        );
        assert_eq!(
            text,
            r#"{"metadata":{"name":"a","resourceVersion":"9","uid":"u"},"spec":{}}"#
        );
    }

    #[test]
    fn an_object_without_metadata_gets_one_at_the_end() {
        let (_, text, labels) = rendered(r#"{"kind":"X","spec":{"a":[1,2]}}"#, 3);
        assert_eq!(
            text,
            r#"{"kind":"X","spec":{"a":[1,2]},"metadata":{"resourceVersion":"3"}}"#
        );
        assert!(labels.is_empty());
        let (_, text, _) = rendered("{}", 4);
        assert_eq!(text, r#"{"metadata":{"resourceVersion":"4"}}"#);
    }

    #[test]
    fn an_escaped_metadata_key_is_still_metadata_and_whitespace_is_fine() {
        let (value, _, labels) = rendered(
            "{ \"kind\" : \"X\" ,\n \"m\\u0065tadata\" : { \"name\" : \"a\", \"labels\": {\"k\": \"v\"} } }",
            5,
        );
        assert_eq!(value["metadata"]["resourceVersion"], "5");
        assert_eq!(value["metadata"]["name"], "a");
        assert_eq!(value["kind"], "X");
        assert_eq!(labels, BTreeMap::from([("k".into(), "v".into())]));
        assert_eq!(value.as_object().map(Map::len), Some(2));
    }

    #[test]
    fn a_duplicated_member_keeps_the_last_one_only() {
        let (value, text, _) = rendered(
            r#"{"metadata":{"resourceVersion":"1","name":"a","resourceVersion":"2"}}"#,
            8,
        );
        assert_eq!(text, r#"{"metadata":{"name":"a","resourceVersion":"8"}}"#);
        assert_eq!(value["metadata"]["resourceVersion"], "8");
    }

    #[test]
    fn a_duplicated_metadata_keeps_the_last_one_only() {
        let (value, _, _) = rendered(
            r#"{"metadata":{"name":"old"},"kind":"X","metadata":{"name":"new"}}"#,
            6,
        );
        assert_eq!(value["metadata"]["name"], "new");
        assert_eq!(value.as_object().map(Map::len), Some(2));
    }

    #[test]
    fn what_is_not_an_object_is_served_as_stored() {
        for input in [
            "[1,2]",
            "not json",
            "{\"a\":",
            "\"s\"",
            r#"{"metadata":[1]}"#,
        ] {
            let r = render(input.as_bytes(), 1);
            assert_eq!(r.bytes.as_ref(), input.as_bytes(), "{input}");
            assert!(r.labels.is_empty());
        }
    }
}

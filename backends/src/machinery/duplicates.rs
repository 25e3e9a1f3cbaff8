//! JSON decoding that also reports duplicate object members, by the path kube's strict
//! decoder (sigs.k8s.io/json `UnmarshalStrict`) names them with: `duplicate field
//! "metadata.name"`, `"[0].op"`. The value a duplicated member decodes to is Go's: decoded
//! into a map of interfaces (a custom resource, a patch), the last wins; decoded into a typed
//! struct (a built-in kind, [`from_slice_merging`]), a repeated object is merged into the
//! first, as Go decodes it into the struct or map already there.
//! It costs about what `serde_json::from_slice::<Value>` does: paths are only built for the
//! (rare) duplicates found, once per member and object.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::map::Entry;
use serde_json::{Map, Value};

/// kube stops collecting strict errors at this many.
const MAX_REPORTED: usize = 100;

/// A decoded document and the paths of its duplicated members, in the order they were found,
/// each once.
#[derive(Debug)]
pub struct Decoded {
    pub value: Value,
    pub duplicates: Vec<String>,
}

/// Decodes `bytes` as JSON, noting duplicate members (the last value of each wins).
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Decoded> {
    decode(bytes, false)
}

/// [`from_slice`] for a body Go decodes into a typed struct: a duplicated member whose values
/// are both objects keeps the first's members the second does not set.
pub fn from_slice_merging(bytes: &[u8]) -> serde_json::Result<Decoded> {
    decode(bytes, true)
}

fn decode(bytes: &[u8], merge: bool) -> serde_json::Result<Decoded> {
    let found = Found {
        paths: RefCell::new(Vec::new()),
        merge,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = ValueSeed {
        at: None,
        found: &found,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(Decoded {
        value,
        duplicates: found.paths.into_inner(),
    })
}

/// What a decode collects: the duplicates' paths, and how duplicated objects combine.
struct Found {
    paths: RefCell<Vec<String>>,
    merge: bool,
}

/// Go decoding an object into the struct or map a first one already filled.
fn merge_into(first: &mut Value, second: Value) {
    match (first, second) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(&key) {
                    Some(existing) => merge_into(existing, value),
                    None => {
                        into.insert(key, value);
                    }
                }
            }
        }
        (first, second) => *first = second,
    }
}

/// kube's messages for duplicates (`duplicate field "data.a"`).
pub fn messages(duplicates: &[String]) -> Vec<String> {
    duplicates
        .iter()
        .map(|path| format!("duplicate field \"{path}\""))
        .collect()
}

/// Where a value sits, as a chain up to the document (on the decoder's stack: nothing is
/// allocated unless a duplicate is found).
enum Step<'a> {
    Member(&'a str),
    Index(usize),
}

struct At<'a> {
    step: Step<'a>,
    parent: Option<&'a At<'a>>,
}

/// Go's strict-decoding path: members joined with `.`, indices as `[i]`.
fn render(at: &At<'_>, last: &str) -> String {
    let mut steps = Vec::new();
    let mut cursor = Some(at);
    while let Some(step) = cursor {
        steps.push(&step.step);
        cursor = step.parent;
    }
    let mut path = String::new();
    for step in steps.into_iter().rev() {
        match step {
            Step::Member(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
            }
            Step::Index(i) => {
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
            }
        }
    }
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(last);
    path
}

struct ValueSeed<'a> {
    at: Option<&'a At<'a>>,
    found: &'a Found,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            let at = At {
                step: Step::Index(items.len()),
                parent: self.at,
            };
            let seed = ValueSeed {
                at: Some(&at),
                found: self.found,
            };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        // Members of this object already reported: a key repeated many times is reported
        // (and its path built) once.
        let mut reported: Vec<String> = Vec::new();
        while let Some(name) = access.next_key::<String>()? {
            let value = {
                let at = At {
                    step: Step::Member(&name),
                    parent: self.at,
                };
                access.next_value_seed(ValueSeed {
                    at: Some(&at),
                    found: self.found,
                })?
            };
            match members.entry(name) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(mut slot) => {
                    if !reported.iter().any(|r| r == slot.key()) {
                        reported.push(slot.key().clone());
                        let mut paths = self.found.paths.borrow_mut();
                        if paths.len() < MAX_REPORTED {
                            paths.push(match self.at {
                                Some(at) => render(at, slot.key()),
                                None => slot.key().clone(),
                            });
                        }
                    }
                    if self.found.merge {
                        merge_into(slot.get_mut(), value);
                    } else {
                        slot.insert(value);
                    }
                }
            }
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicates_are_named_by_kubes_path_and_the_last_value_wins() {
        let decoded = from_slice(
            br#"{"metadata":{"name":"a","name":"b","labels":{"x":"1","x":"2"}},
                 "items":[{"op":"add","op":"remove"}],"k":1,"k":2,"k":3}"#,
        )
        .expect("decodes");
        assert_eq!(
            decoded.value,
            json!({"metadata": {"name": "b", "labels": {"x": "2"}},
                   "items": [{"op": "remove"}], "k": 3})
        );
        assert_eq!(
            decoded.duplicates,
            ["metadata.name", "metadata.labels.x", "items[0].op", "k"]
        );
        assert_eq!(
            messages(&decoded.duplicates[..1]),
            ["duplicate field \"metadata.name\""]
        );
    }

    #[test]
    fn a_typed_decode_merges_repeated_objects_as_go_does() {
        let body = br#"{"metadata":{"name":"a","labels":{"x":"1"}},"data":{"k":"1"},
            "metadata":{"labels":{"y":"2"}},"data":{"j":"2","k":"3"},"list":[1],"list":[2]}"#;
        let decoded = from_slice_merging(body).expect("decodes");
        assert_eq!(
            decoded.value,
            json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
                   "data": {"k": "3", "j": "2"}, "list": [2]})
        );
        assert_eq!(decoded.duplicates, ["metadata", "data", "list"]);
        // Into maps of interfaces the last wins.
        let decoded = from_slice(body).expect("decodes");
        assert_eq!(decoded.value["metadata"], json!({"labels": {"y": "2"}}));
    }

    #[test]
    fn a_key_repeated_many_times_is_reported_once() {
        let mut body = String::from("{");
        for i in 0..1000 {
            body.push_str(&format!("\"k\":{i},\"k{i}\":1,"));
        }
        body.push_str("\"end\":1}");
        let decoded = from_slice(body.as_bytes()).expect("decodes");
        assert_eq!(decoded.duplicates, ["k"]);
        assert_eq!(decoded.value["k"], 999);
    }

    #[test]
    fn a_top_level_array_names_indices_first() {
        let decoded = from_slice(br#"[{"a":1},{"path":"/x","path":"/y"}]"#).expect("decodes");
        assert_eq!(decoded.duplicates, ["[1].path"]);
    }

    #[test]
    fn values_decode_as_serde_json_decodes_them() {
        let text = br#"{"a":[1,-2,3.5,"s",true,null,{}],"b":{"c":18446744073709551615}}"#;
        let decoded = from_slice(text).expect("decodes");
        let plain: Value = serde_json::from_slice(text).expect("decodes");
        assert_eq!(decoded.value, plain);
        assert!(decoded.duplicates.is_empty());
        assert!(from_slice(b"{\"a\":1} x").is_err());
        assert!(from_slice(b"{\"a\":").is_err());
    }
}

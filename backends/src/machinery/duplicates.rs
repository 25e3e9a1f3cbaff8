//! JSON decoding that also reports duplicate object members, by the path kube's strict
//! decoder (sigs.k8s.io/json `UnmarshalStrict`) names them with: `duplicate field
//! "metadata.name"`, `"[0].op"`. As in Go, the last value of a duplicated member wins.
//! It costs about what `serde_json::from_slice::<Value>` does: paths are only built for the
//! (rare) duplicates found.

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

/// Decodes `bytes` as JSON, noting duplicate members.
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Decoded> {
    let found = RefCell::new(Vec::new());
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = ValueSeed {
        at: None,
        found: &found,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(Decoded {
        value,
        duplicates: found.into_inner(),
    })
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
    found: &'a RefCell<Vec<String>>,
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
                    let path = match self.at {
                        Some(at) => render(at, slot.key()),
                        None => slot.key().clone(),
                    };
                    let mut found = self.found.borrow_mut();
                    if found.len() < MAX_REPORTED && !found.contains(&path) {
                        found.push(path);
                    }
                    slot.insert(value);
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

//! Field paths and sets of them, as structured-merge-diff names the fields a manager owns, and
//! their `FieldsV1` encoding (`{"f:data":{".":{},"f:a":{}}}`) in `metadata.managedFields`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step into a value: a field of a map or struct, an item of a list keyed by its key
/// fields, an item of a set by its value, or (for lists of neither kind) an index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathElement {
    /// `f:<name>`; shown as `.name`.
    Field(String),
    /// `k:{"name":"c"}`: the key fields of a list-map item, sorted by name, as canonical JSON.
    Key(String),
    /// `v:"a"`: a set item, as canonical JSON.
    Value(String),
    /// `i:3`.
    Index(usize),
}

impl PathElement {
    /// The key element of a list-map item from its key fields (sorted here).
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        let mut map = Map::new();
        for (name, value) in fields {
            map.insert(name, value);
        }
        PathElement::Key(Value::Object(map).to_string())
    }

    /// The value element of a set item.
    pub fn value(value: &Value) -> PathElement {
        PathElement::Value(value.to_string())
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` form: `f:name`, `k:{...}`, `v:...`, `i:n`.
    fn encode(&self) -> String {
        let (prefix, text) = match self {
            PathElement::Field(name) => ("f:", name.as_str()),
            PathElement::Key(json) => ("k:", json.as_str()),
            PathElement::Value(json) => ("v:", json.as_str()),
            PathElement::Index(i) => return format!("i:{i}"),
        };
        let mut out = String::with_capacity(prefix.len() + text.len());
        out.push_str(prefix);
        out.push_str(text);
        out
    }

    fn decode(s: &str) -> Result<PathElement, String> {
        let (prefix, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("unknown path element: {s:?}"))?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(fields)) => Ok(PathElement::key(fields.into_iter().collect())),
                _ => Err(format!("invalid key path element: {s:?}")),
            },
            "v" => serde_json::from_str::<Value>(rest)
                .map(|v| PathElement::value(&v))
                .map_err(|_| format!("invalid value path element: {s:?}")),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| format!("invalid index path element: {s:?}")),
            _ => Err(format!("unknown path element type: {s:?}")),
        }
    }
}

impl Ord for PathElement {
    /// structured-merge-diff's order: fields, then keys, then values, then indices; keys by
    /// their fields (name, then value), values by value (numbers as numbers).
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b))
            | (PathElement::Value(a), PathElement::Value(b)) => {
                if a == b {
                    return Ordering::Equal;
                }
                let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
                compare_values(&parse(a), &parse(b)).then_with(|| a.cmp(b))
            }
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// A total order on JSON values: by type (null, booleans, numbers, strings, lists, maps),
/// then by value; maps field by field in key order.
fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Number(_) => 2,
            Value::String(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
        }
    }
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare_values(p, q))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .zip(y)
            .map(|((kp, p), (kq, q))| kp.cmp(kq).then_with(|| compare_values(p, q)))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => rank(a).cmp(&rank(b)),
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's `PathElement.String`: `.name`, `[name="c",port=80]`, `[="a"]`,
    /// `[3]` — the form conflict messages print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(json) => {
                let fields: Map<String, Value> = serde_json::from_str(json).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(json) => write!(f, "[={json}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the root of an object.
pub type Path = Vec<PathElement>;

/// Shows a path as conflict messages do (`.spec.containers[name="app"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths, stored as a tree: `members` are paths ending here, `children` lead deeper.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds a path (the empty path is ignored: the root is never a member).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether the path or anything under it is in the set.
    pub fn has_prefix(&self, path: &[PathElement]) -> bool {
        match path {
            [] => !self.is_empty(),
            [last] => {
                self.members.contains(last)
                    || self.children.get(last).is_some_and(|c| !c.is_empty())
            }
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has_prefix(rest)),
        }
    }

    /// The set below one element.
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// The elements with something below them.
    pub fn child_elements(&self) -> Vec<PathElement> {
        self.children
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(pe, _)| pe.clone())
            .collect()
    }

    pub fn is_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in_place(other);
        out
    }

    pub fn union_in_place(&mut self, other: &FieldSet) {
        self.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            self.children
                .entry(pe.clone())
                .or_default()
                .union_in_place(child);
        }
    }

    /// The paths of `self` that are not in `other` (exactly those paths: members of `other`
    /// do not remove what lies below them).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(o) => child.difference(o),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        FieldSet { members, children }
    }

    /// Removes the paths of `other` from `self` (exactly those paths, as [`FieldSet::difference`]).
    pub fn difference_in_place(&mut self, other: &FieldSet) {
        if other.members.is_empty() && other.children.is_empty() {
            return;
        }
        self.members.retain(|pe| !other.members.contains(pe));
        self.children.retain(|pe, child| {
            if let Some(o) = other.children.get(pe) {
                child.difference_in_place(o);
            }
            !child.is_empty()
        });
    }

    /// The paths of `self` that are neither in `other` nor below one of its members (an
    /// exclusion filter: excluding `.status` drops everything under it).
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if other.members.contains(pe) {
                continue;
            }
            let rest = match other.children.get(pe) {
                Some(o) => child.recursive_difference(o),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        FieldSet { members, children }
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let both = child.intersection(o);
                if !both.is_empty() {
                    children.insert(pe.clone(), both);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    /// Every member path in structured-merge-diff's iteration order: a node's members first,
    /// then what lies below each of its children.
    pub fn iterate(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_members_first(&mut prefix, &mut out);
        out
    }

    fn collect_members_first(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for pe in &self.members {
            prefix.push(pe.clone());
            out.push(prefix.clone());
            prefix.pop();
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_members_first(prefix, out);
            prefix.pop();
        }
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        // Members and children interleaved in element order, as SMD iterates a set.
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(self.children.keys());
        for pe in keys {
            prefix.push(pe.clone());
            if self.members.contains(pe) {
                out.push(prefix.clone());
            }
            if let Some(child) = self.children.get(pe) {
                child.collect_paths(prefix, out);
            }
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.encode(false))
    }

    fn encode(&self, member: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if member {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        // Members and children, each sorted, in one element order.
        let mut keys: Vec<&PathElement> =
            Vec::with_capacity(self.members.len() + self.children.len());
        keys.extend(self.members.iter());
        keys.extend(
            self.children
                .iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(k, _)| k),
        );
        keys.sort_unstable();
        keys.dedup();
        for pe in keys {
            let is_member = self.members.contains(pe);
            let inner = match self.children.get(pe).filter(|c| !c.is_empty()) {
                Some(child) => child.encode(is_member),
                None => Map::new(),
            };
            out.insert(pe.encode(), Value::Object(inner));
        }
        out
    }

    /// Parses `FieldsV1` JSON.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        let map = value
            .as_object()
            .ok_or_else(|| "FieldsV1 must be a JSON object".to_string())?;
        let mut set = FieldSet::new();
        for (k, v) in map {
            if k == "." {
                continue;
            }
            let pe = PathElement::decode(k)?;
            let inner = v
                .as_object()
                .ok_or_else(|| format!("FieldsV1 entry {k:?} must be a JSON object"))?;
            let child = FieldSet::from_fields_v1(v)?;
            if inner.is_empty() || inner.contains_key(".") {
                set.members.insert(pe.clone());
            }
            if !child.is_empty() {
                set.children.insert(pe, child);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    #[test]
    fn fields_v1_round_trips_in_kube_order() {
        let mut set = FieldSet::new();
        set.insert(&[f("data"), f("b")]);
        set.insert(&[f("data")]);
        set.insert(&[f("data"), f("a")]);
        let item = PathElement::key(vec![("name".into(), json!("app"))]);
        set.insert(&[f("spec"), f("containers"), item.clone()]);
        set.insert(&[f("spec"), f("containers"), item.clone(), f("image")]);
        set.insert(&[f("metadata"), f("labels"), f("tier")]);
        let encoded = set.to_fields_v1();
        assert_eq!(
            encoded.to_string(),
            r#"{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:tier":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}"#
        );
        assert_eq!(FieldSet::from_fields_v1(&encoded).unwrap(), set);
    }

    #[test]
    fn paths_print_like_structured_merge_diff() {
        let key = PathElement::key(vec![
            ("protocol".into(), json!("TCP")),
            ("port".into(), json!(80)),
        ]);
        assert_eq!(
            path_string(&[f("spec"), f("ports"), key, f("name")]),
            r#".spec.ports[port=80,protocol="TCP"].name"#
        );
        assert_eq!(
            path_string(&[
                f("metadata"),
                f("finalizers"),
                PathElement::value(&json!("a"))
            ]),
            r#".metadata.finalizers[="a"]"#
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("status")]);
        a.insert(&[f("status"), f("phase")]);
        a.insert(&[f("spec"), f("x")]);
        let mut status = FieldSet::new();
        status.insert(&[f("status")]);
        // Exact difference keeps what lies under a removed member; recursive drops it.
        assert!(a.difference(&status).has(&[f("status"), f("phase")]));
        assert!(!a.recursive_difference(&status).has_prefix(&[f("status")]));
        assert_eq!(a.intersection(&status).paths(), vec![vec![f("status")]]);
        assert_eq!(
            a.paths(),
            vec![
                vec![f("spec"), f("x")],
                vec![f("status")],
                vec![f("status"), f("phase")]
            ]
        );
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        // Members come before children when iterating, as in structured-merge-diff.
        assert_eq!(
            a.iterate(),
            vec![
                vec![f("status")],
                vec![f("spec"), f("x")],
                vec![f("status"), f("phase")]
            ]
        );
        // Keys and values order by value: port 80 before 8080, numbers before strings.
        let port = |p: i64| PathElement::key(vec![("port".into(), json!(p))]);
        assert!(port(80) < port(8080) && port(9) < port(80));
        assert!(PathElement::value(&json!(10)) < PathElement::value(&json!("1")));
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
    }
}

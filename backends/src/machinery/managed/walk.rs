//! The typed walks server-side apply is made of, over JSON values and a [`TypeModel`]: the set
//! of fields a value sets, the fields two values differ in, merging an applied configuration
//! into a live object, and removing a set of fields. They follow structured-merge-diff's
//! `ToFieldSet`, `Compare`, `Merge` and `RemoveItems`.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::path::{FieldSet, Path, PathElement};
use super::types::{ListKind, Node, TypeId, TypeModel};

/// The shape a value is walked as: its node, or for untyped values the shape deduced from the
/// value itself.
enum Shape<'m> {
    Leaf,
    Object { atomic: bool, ty: TypeId },
    List { items: TypeId, kind: &'m ListKind },
}

static ATOMIC: ListKind = ListKind::Atomic;

fn shape<'m>(model: &'m TypeModel, ty: TypeId, value: Option<&Value>) -> Shape<'m> {
    match model.node(ty) {
        Node::Scalar => Shape::Leaf,
        Node::Object { atomic, .. } => Shape::Object {
            atomic: *atomic,
            ty,
        },
        Node::List { items, kind } => Shape::List {
            items: *items,
            kind,
        },
        Node::Untyped => match value {
            Some(Value::Object(_)) => Shape::Object { atomic: false, ty },
            Some(Value::Array(_)) => Shape::List {
                items: ty,
                kind: &ATOMIC,
            },
            _ => Shape::Leaf,
        },
    }
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// The element naming a list item: its key fields, its value (sets), or its index.
fn item_element(kind: &ListKind, item: &Value, index: usize) -> PathElement {
    match kind {
        ListKind::Map(keys) => {
            let fields = keys
                .iter()
                .filter_map(|(key, default)| {
                    let v = item
                        .get(key)
                        .filter(|v| !v.is_null())
                        .or(default.as_ref())?;
                    Some((key.clone(), v.clone()))
                })
                .collect();
            PathElement::key(fields)
        }
        ListKind::Set if !item.is_object() && !item.is_array() => PathElement::value(item),
        _ => PathElement::Index(index),
    }
}

fn items_by_element<'v>(kind: &ListKind, list: &'v [Value]) -> Vec<(PathElement, &'v Value)> {
    list.iter()
        .enumerate()
        .map(|(i, item)| (item_element(kind, item, i), item))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// ToFieldSet
// ---------------------------------------------------------------------------------------------

/// The fields `value` sets: every scalar, atomic value and list item, every map entry that is
/// not a declared field, and empty or null entries.
pub fn to_field_set(model: &TypeModel, value: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    field_set_walk(model, TypeModel::ROOT, value, &mut path, &mut set);
    set
}

fn field_set_walk(
    model: &TypeModel,
    ty: TypeId,
    value: &Value,
    path: &mut Path,
    set: &mut FieldSet,
) {
    match shape(model, ty, Some(value)) {
        Shape::Leaf => set.insert(path),
        Shape::Object { atomic: true, .. }
        | Shape::List {
            kind: ListKind::Atomic,
            ..
        } => set.insert(path),
        Shape::Object { ty, .. } => {
            let Some(map) = value.as_object() else {
                set.insert(path);
                return;
            };
            for (key, child) in map {
                path.push(PathElement::Field(key.clone()));
                field_set_walk(model, model.field(ty, key), child, path, set);
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !model.is_named_field(ty, key) {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Shape::List { items, kind } => {
            let Some(list) = value.as_array() else {
                set.insert(path);
                return;
            };
            let indexed = items_by_element(kind, list);
            let mut seen = HashSet::new();
            let duplicates: HashSet<&PathElement> = indexed
                .iter()
                .filter(|(pe, _)| !seen.insert(pe))
                .map(|(pe, _)| pe)
                .collect();
            for (pe, item) in &indexed {
                path.push(pe.clone());
                if !duplicates.contains(pe) {
                    field_set_walk(model, items, item, path, set);
                }
                set.insert(path);
                path.pop();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Associative lists of an apply configuration
// ---------------------------------------------------------------------------------------------

/// What structured-merge-diff refuses in an apply configuration (its `ObjectToTyped` without
/// duplicates allowed), as it words it (`<path>: <message>`): list-map items that are `null`,
/// not maps, or omit a key field without a default; set items that are maps, lists or `null`;
/// items whose key another item has. It stops at a list's first item it cannot identify.
pub fn associative_list_errors(model: &TypeModel, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut path = Vec::new();
    list_errors_walk(model, TypeModel::ROOT, value, &mut path, &mut errors);
    errors
}

fn list_errors_walk(
    model: &TypeModel,
    ty: TypeId,
    value: &Value,
    path: &mut Path,
    errors: &mut Vec<String>,
) {
    match shape(model, ty, Some(value)) {
        Shape::Leaf => {}
        Shape::Object { ty, .. } => {
            let Some(map) = value.as_object() else {
                return;
            };
            for (key, child) in map {
                path.push(PathElement::Field(key.clone()));
                list_errors_walk(model, model.field(ty, key), child, path, errors);
                path.pop();
            }
        }
        Shape::List { items, kind } => {
            let Some(list) = value.as_array() else {
                return;
            };
            let mut seen = HashSet::new();
            for (i, item) in list.iter().enumerate() {
                let unidentifiable = match kind {
                    ListKind::Map(keys) => match item {
                        Value::Null => Some(
                            "associative list with keys may not have a null element".to_string(),
                        ),
                        Value::Object(fields) => keys
                            .iter()
                            .find(|(key, default)| !fields.contains_key(key) && default.is_none())
                            .map(|(key, _)| {
                                format!(
                                    "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                                    kubegate_policy::quote::go_quote(key)
                                )
                            }),
                        _ => Some(
                            "associative list with keys may not have non-map elements".to_string(),
                        ),
                    },
                    ListKind::Set => match item {
                        Value::Object(_) => Some(
                            "associative list without keys has an element that's a map type"
                                .to_string(),
                        ),
                        Value::Array(_) => Some(
                            "not supported: associative list with lists as elements".to_string(),
                        ),
                        Value::Null => Some(
                            "associative list without keys has an element that's an explicit null"
                                .to_string(),
                        ),
                        _ => None,
                    },
                    ListKind::Atomic => None,
                };
                if let Some(problem) = unidentifiable {
                    errors.push(format!(
                        "{}: element {i}: {problem}",
                        super::path::path_string(path)
                    ));
                    return;
                }
                let element = item_element(kind, item, i);
                if *kind != ListKind::Atomic && !seen.insert(element.clone()) {
                    errors.push(format!(
                        "{}: duplicate entries for key {element}",
                        super::path::path_string(path)
                    ));
                }
                path.push(element);
                list_errors_walk(model, items, item, path, errors);
                path.pop();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------------

/// What changed from one value to another.
#[derive(Debug, Default, Clone)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Drops every path at or under a path of `excluded` (fields a subresource resets).
    pub fn exclude(&mut self, excluded: &FieldSet) {
        if excluded.is_empty() {
            return;
        }
        self.added = self.added.recursive_difference(excluded);
        self.modified = self.modified.recursive_difference(excluded);
        self.removed = self.removed.recursive_difference(excluded);
    }

    pub fn changed(&self) -> FieldSet {
        self.modified.union(&self.added)
    }

    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// The fields added, modified and removed from `old` to `new` (`metadata.managedFields` aside).
pub fn compare(model: &TypeModel, old: &Value, new: &Value) -> Comparison {
    let mut c = Comparison::default();
    let mut path = Vec::new();
    compare_walk(
        model,
        TypeModel::ROOT,
        Some(old),
        Some(new),
        &mut path,
        &mut c,
    );
    c
}

fn compare_leaf(l: Option<&Value>, r: Option<&Value>, path: &Path, c: &mut Comparison) {
    match (l, r) {
        (None, None) => {}
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    }
}

fn compare_walk(
    model: &TypeModel,
    ty: TypeId,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Path,
    c: &mut Comparison,
) {
    let (l, r) = (present(l), present(r));
    if l.is_none() && r.is_none() {
        return;
    }
    let both_empty = is_empty_container(l) && is_empty_container(r);
    let differ_in_kind = matches!((l, r), (Some(a), Some(b))
        if a.is_object() != b.is_object() || a.is_array() != b.is_array());
    if differ_in_kind {
        // A map that became a list or a scalar (or the reverse): the value is modified, and
        // what was under the old one is gone, what is under the new one added.
        compare_leaf(l, r, path, c);
        compare_children(model, ty, l, None, path, c);
        compare_children(model, ty, None, r, path, c);
        return;
    }
    match shape(model, ty, r.or(l)) {
        _ if both_empty => compare_leaf(l, r, path, c),
        Shape::Leaf
        | Shape::Object { atomic: true, .. }
        | Shape::List {
            kind: ListKind::Atomic,
            ..
        } => compare_leaf(l, r, path, c),
        Shape::Object { ty, .. } => {
            let empty = Map::new();
            let lm = l.and_then(Value::as_object).unwrap_or(&empty);
            let rm = r.and_then(Value::as_object).unwrap_or(&empty);
            let keys = lm.keys().chain(rm.keys().filter(|k| !lm.contains_key(*k)));
            // The record of ownership is not itself owned or compared.
            let in_metadata = matches!(path.as_slice(), [PathElement::Field(m)] if m == "metadata");
            for key in keys {
                if in_metadata && key == "managedFields" {
                    continue;
                }
                path.push(PathElement::Field(key.clone()));
                compare_walk(
                    model,
                    model.field(ty, key),
                    lm.get(key),
                    rm.get(key),
                    path,
                    c,
                );
                path.pop();
            }
            mark_container(l, r, path, c);
        }
        Shape::List { items, kind } => {
            let empty = Vec::new();
            let ll = items_by_element(kind, l.and_then(Value::as_array).unwrap_or(&empty));
            let rl = items_by_element(kind, r.and_then(Value::as_array).unwrap_or(&empty));
            let mut seen = HashSet::new();
            for pe in ll.iter().chain(rl.iter()).map(|(pe, _)| pe) {
                if !seen.insert(pe) {
                    continue;
                }
                let (li, ri) = (find(&ll, pe), find(&rl, pe));
                path.push(pe.clone());
                compare_walk(model, items, li, ri, path, c);
                path.pop();
            }
            mark_container(l, r, path, c);
        }
    }
}

/// Compares what lies under `l` and `r` (at most one of them given) item by item.
fn compare_children(
    model: &TypeModel,
    ty: TypeId,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Path,
    c: &mut Comparison,
) {
    let Some(v) = l.or(r) else {
        return;
    };
    // The child goes on the side its parent came from.
    let side = |child| {
        if l.is_some() {
            (Some(child), None)
        } else {
            (None, Some(child))
        }
    };
    match (shape(model, ty, Some(v)), v) {
        (Shape::Object { atomic: false, ty }, Value::Object(map)) => {
            for (key, child) in map {
                let (a, b) = side(child);
                path.push(PathElement::Field(key.clone()));
                compare_walk(model, model.field(ty, key), a, b, path, c);
                path.pop();
            }
        }
        (Shape::List { items, kind }, Value::Array(list)) if *kind != ListKind::Atomic => {
            for (pe, item) in items_by_element(kind, list) {
                let (a, b) = side(item);
                path.push(pe);
                compare_walk(model, items, a, b, path, c);
                path.pop();
            }
        }
        _ => {}
    }
}

fn find<'v>(list: &[(PathElement, &'v Value)], pe: &PathElement) -> Option<&'v Value> {
    list.iter().find(|(p, _)| p == pe).map(|(_, v)| *v)
}

/// A container that appears or disappears is itself added or removed.
fn mark_container(l: Option<&Value>, r: Option<&Value>, path: &Path, c: &mut Comparison) {
    if l.is_none() {
        c.added.insert(path);
    } else if r.is_none() {
        c.removed.insert(path);
    }
}

// ---------------------------------------------------------------------------------------------
// Merge
// ---------------------------------------------------------------------------------------------

/// `config` merged into `live`: maps key by key, list-maps and sets item by item, everything
/// else (scalars, atomic values) replaced. A `null` in `config` is kept, as
/// structured-merge-diff's `ruleKeepRHS` keeps it: decoding then makes it the field's zero
/// value (`""` for a string map's value), leaves it out (a pointer), or keeps it (a nullable
/// custom resource field).
pub fn merge(model: &TypeModel, live: &Value, config: &Value) -> Value {
    merge_walk(model, TypeModel::ROOT, Some(live), Some(config)).unwrap_or(Value::Null)
}

fn merge_walk(
    model: &TypeModel,
    ty: TypeId,
    l: Option<&Value>,
    r: Option<&Value>,
) -> Option<Value> {
    let l = present(l);
    let Some(r) = r else {
        return l.cloned();
    };
    let Some(l) = l.filter(|_| !r.is_null()) else {
        return Some(r.clone());
    };
    if l.is_object() != r.is_object() || l.is_array() != r.is_array() {
        return Some(r.clone());
    }
    match shape(model, ty, Some(r)) {
        Shape::Leaf
        | Shape::Object { atomic: true, .. }
        | Shape::List {
            kind: ListKind::Atomic,
            ..
        } => Some(r.clone()),
        Shape::Object { ty, .. } => {
            let (Some(lm), Some(rm)) = (l.as_object(), r.as_object()) else {
                return Some(r.clone());
            };
            let mut out = lm.clone();
            for (key, rv) in rm {
                match merge_walk(model, model.field(ty, key), lm.get(key), Some(rv)) {
                    Some(v) => {
                        out.insert(key.clone(), v);
                    }
                    None => {
                        out.remove(key);
                    }
                }
            }
            Some(Value::Object(out))
        }
        Shape::List { items, kind } => {
            let (Some(ll), Some(rl)) = (l.as_array(), r.as_array()) else {
                return Some(r.clone());
            };
            Some(Value::Array(merge_lists(model, items, kind, ll, rl)))
        }
    }
}

/// Merges two keyed lists as structured-merge-diff does: items only in `live` keep their
/// place, `config`'s items come in `config`'s order, and a shared item that `config` moves is
/// placed where `config` puts it.
fn merge_lists(
    model: &TypeModel,
    items: TypeId,
    kind: &ListKind,
    ll: &[Value],
    rl: &[Value],
) -> Vec<Value> {
    let lhs = first_of_each(items_by_element(kind, ll));
    let rhs = first_of_each(items_by_element(kind, rl));
    let in_lhs: HashSet<&PathElement> = lhs.iter().map(|(pe, _)| pe).collect();
    let in_rhs: HashSet<&PathElement> = rhs.iter().map(|(pe, _)| pe).collect();
    // The shared items in config's order; the next one is where live and config meet again.
    let mut shared = rhs
        .iter()
        .map(|(pe, _)| pe)
        .filter(|pe| in_lhs.contains(pe));
    let mut next_shared = shared.next();
    let mut merged_rhs: HashSet<&PathElement> = HashSet::new();
    let mut out = Vec::with_capacity(ll.len().max(rl.len()));
    let (mut li, mut ri) = (0, 0);
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = &lhs[li].0;
            if *pe == rhs[ri].0 {
                merged_rhs.insert(pe);
                out.extend(merge_walk(model, items, Some(lhs[li].1), Some(rhs[ri].1)));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_rhs.contains(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            let pe = &lhs[li].0;
            if !in_rhs.contains(pe) {
                out.push(lhs[li].1.clone());
                li += 1;
                continue;
            }
            if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rhs.len() {
            let pe = &rhs[ri].0;
            merged_rhs.insert(pe);
            out.extend(merge_walk(model, items, find(&lhs, pe), Some(rhs[ri].1)));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// The first item of each element (later duplicates dropped).
fn first_of_each(items: Vec<(PathElement, &Value)>) -> Vec<(PathElement, &Value)> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|(pe, _)| seen.insert(pe.clone()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// RemoveItems and named fields
// ---------------------------------------------------------------------------------------------

/// `value` without the members of `set` (a member takes everything under it along).
pub fn remove_items(model: &TypeModel, value: &mut Value, set: &FieldSet) {
    remove_walk(model, TypeModel::ROOT, value, set)
}

fn remove_walk(model: &TypeModel, ty: TypeId, value: &mut Value, set: &FieldSet) {
    match shape(model, ty, Some(value)) {
        Shape::Leaf => {}
        Shape::Object { ty, .. } => {
            let Some(map) = value.as_object_mut() else {
                return;
            };
            map.retain(|key, _| !set.is_member(&PathElement::Field(key.clone())));
            for (key, child) in map.iter_mut() {
                if let Some(sub) = set.child(&PathElement::Field(key.clone())) {
                    remove_walk(model, model.field(ty, key), child, sub);
                }
            }
        }
        Shape::List { items, kind } => {
            let Some(list) = value.as_array_mut() else {
                return;
            };
            let elements: Vec<PathElement> = list
                .iter()
                .enumerate()
                .map(|(i, item)| item_element(kind, item, i))
                .collect();
            let mut kept = Vec::with_capacity(list.len());
            for (pe, mut item) in elements.into_iter().zip(list.drain(..)) {
                if set.is_member(&pe) {
                    continue;
                }
                if let Some(sub) = set.child(&pe) {
                    remove_walk(model, items, &mut item, sub);
                }
                kept.push(item);
            }
            *list = kept;
        }
    }
}

/// `set` plus, as members, the declared fields it reaches into (structured-merge-diff's
/// `EnsureNamedFieldsAreMembers`): owning `.spec.replicas` also owns `.spec`, but owning
/// `.data.a` does not own a map's other keys.
pub fn ensure_named_fields_are_members(model: &TypeModel, set: &FieldSet) -> FieldSet {
    let mut out = set.clone();
    let mut path = Vec::new();
    ensure_walk(model, TypeModel::ROOT, set, &mut path, &mut out);
    out
}

fn ensure_walk(model: &TypeModel, ty: TypeId, set: &FieldSet, path: &mut Path, out: &mut FieldSet) {
    for path_to_child in set.child_elements() {
        let child_ty = match (&path_to_child, model.node(ty)) {
            (PathElement::Field(name), Node::Object { .. }) => {
                if model.is_named_field(ty, name) {
                    path.push(path_to_child.clone());
                    out.insert(path);
                    path.pop();
                }
                model.field(ty, name)
            }
            (_, Node::List { items, .. }) => *items,
            _ => TypeModel::UNTYPED,
        };
        if let Some(sub) = set.child(&path_to_child) {
            path.push(path_to_child.clone());
            ensure_walk(model, child_ty, sub, path, out);
            path.pop();
        }
    }
}

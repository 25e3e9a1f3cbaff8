//! The shape of a kind as server-side apply needs it — which maps merge key by key, which lists
//! are atomic, sets or maps keyed by which fields — built from the kind's OpenAPI schema and its
//! `x-kubernetes-list-type`, `-list-map-keys`, `-map-type` and patch-strategy extensions, the
//! way kube-openapi's `schemaconv` builds structured-merge-diff's schema.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Index of a node in a [`TypeModel`].
pub type TypeId = usize;

/// How the items of a list are told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced wholesale; one owner.
    Atomic,
    /// Scalars, each item owned on its own.
    Set,
    /// Maps, identified by these key fields; an item without a key field takes the field's
    /// default (kube defaults every port's `protocol` to `TCP`).
    Map(Vec<(String, Option<Value>)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Strings, numbers, booleans, int-or-string, quantities, dates.
    Scalar,
    /// An object: declared fields, and for maps the type of every other key.
    Object {
        fields: HashMap<String, TypeId>,
        elements: Option<TypeId>,
        atomic: bool,
    },
    List {
        items: TypeId,
        kind: ListKind,
    },
    /// No schema (`x-kubernetes-preserve-unknown-fields`, bare `type: object`): objects merge
    /// key by key, lists are atomic, as structured-merge-diff's deduced type.
    Untyped,
}

/// A kind's nodes; the root is node 0.
#[derive(Debug, Clone)]
pub struct TypeModel {
    nodes: Vec<Node>,
}

const UNTYPED: TypeId = 1;
const SCALAR: TypeId = 2;
/// An object owned as a whole (`RawExtension`, `x-kubernetes-map-type: atomic` without
/// properties).
const ATOMIC_OBJECT: TypeId = 3;

fn base_nodes() -> Vec<Node> {
    vec![
        Node::Untyped,
        Node::Untyped,
        Node::Scalar,
        Node::Object {
            fields: HashMap::new(),
            elements: Some(UNTYPED),
            atomic: true,
        },
    ]
}
const REF_PREFIXES: &[&str] = &["#/components/schemas/", "#/definitions/"];

impl TypeModel {
    pub const ROOT: TypeId = 0;
    /// The node of values without a schema.
    pub const UNTYPED: TypeId = UNTYPED;

    /// A model from a schema whose `$ref`s point into `definitions`.
    pub fn build(root: &Value, definitions: &Map<String, Value>) -> TypeModel {
        Self::build_with(root, definitions, true)
    }

    fn build_with(root: &Value, definitions: &Map<String, Value>, builtin: bool) -> TypeModel {
        let mut builder = Builder {
            nodes: base_nodes(),
            definitions,
            named: HashMap::new(),
            builtin,
        };
        let root_node = builder.node_of(root);
        builder.nodes[Self::ROOT] = builder.nodes[root_node].clone();
        TypeModel {
            nodes: builder.nodes,
        }
    }

    /// A custom resource's model: its schema, with `apiVersion`, `kind` and `metadata` typed
    /// as every object's (a CRD schema declares `metadata` as a bare object at most).
    pub fn build_custom(
        schema: &Value,
        object_meta: Option<(&Value, &Map<String, Value>)>,
    ) -> TypeModel {
        let mut definitions = Map::new();
        let mut root = schema.clone();
        if let Some((meta_ref, meta_defs)) = object_meta {
            definitions.extend(meta_defs.iter().map(|(k, v)| (k.clone(), v.clone())));
            if let Some(props) = root
                .as_object_mut()
                .map(|o| {
                    o.entry("properties")
                        .or_insert_with(|| Value::Object(Map::new()))
                })
                .and_then(Value::as_object_mut)
            {
                props.insert("metadata".into(), meta_ref.clone());
                for field in ["apiVersion", "kind"] {
                    props
                        .entry(field)
                        .or_insert_with(|| serde_json::json!({"type": "string"}));
                }
            }
        }
        TypeModel::build_with(&root, &definitions, false)
    }

    pub fn untyped() -> TypeModel {
        TypeModel {
            nodes: base_nodes(),
        }
    }

    pub fn node(&self, id: TypeId) -> &Node {
        self.nodes.get(id).unwrap_or(&Node::Untyped)
    }

    /// The type of a field of an object node (untyped when the field is unknown).
    pub fn field(&self, id: TypeId, name: &str) -> TypeId {
        match self.node(id) {
            Node::Object {
                fields, elements, ..
            } => fields.get(name).copied().or(*elements).unwrap_or(UNTYPED),
            _ => UNTYPED,
        }
    }

    /// Whether `name` is a declared field (not a map key) of an object node.
    pub fn is_named_field(&self, id: TypeId, name: &str) -> bool {
        matches!(self.node(id), Node::Object { fields, .. } if fields.contains_key(name))
    }
}

struct Builder<'a> {
    nodes: Vec<Node>,
    definitions: &'a Map<String, Value>,
    named: HashMap<String, TypeId>,
    /// Built-in kinds: ports' `protocol` keys default to TCP even where the schema says not.
    builtin: bool,
}

impl Builder<'_> {
    fn node_of(&mut self, schema: &Value) -> TypeId {
        let Some(obj) = schema.as_object() else {
            return UNTYPED;
        };
        // A reference (or `allOf: [{$ref}]`, as kube's v3 documents wrap a described one)
        // takes the referenced type, made atomic when the referring schema says so.
        let referenced = match obj.get("allOf") {
            Some(Value::Array(all))
                if all.len() == 1
                    && obj.get("properties").is_none()
                    && obj.get("items").is_none() =>
            {
                Some(self.node_of(&all[0]))
            }
            _ => ref_name(obj).map(|name| self.named(name)),
        };
        if let Some(id) = referenced {
            return self.with_sibling_extensions(id, obj);
        }
        if obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return SCALAR;
        }
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let node = match ty {
            "array" => {
                let items = obj.get("items").map(|i| self.node_of(i)).unwrap_or(UNTYPED);
                let kind = match list_kind(obj) {
                    ListKindSpec::Atomic => ListKind::Atomic,
                    ListKindSpec::Set => ListKind::Set,
                    ListKindSpec::Map(keys) => ListKind::Map(
                        keys.into_iter()
                            .map(|k| {
                                let default = self.key_default(obj.get("items"), &k);
                                (k, default)
                            })
                            .collect(),
                    ),
                };
                Node::List { items, kind }
            }
            "object" | "" if obj.contains_key("properties") || has_elements(obj) => {
                let id = self.reserve();
                let mut fields = HashMap::new();
                if let Some(Value::Object(props)) = obj.get("properties") {
                    for (name, prop) in props {
                        fields.insert(name.clone(), self.node_of(prop));
                    }
                }
                let elements = match obj.get("additionalProperties") {
                    Some(Value::Object(a)) if !a.is_empty() => {
                        Some(self.node_of(&Value::Object(a.clone())))
                    }
                    Some(Value::Object(_)) | Some(Value::Bool(true)) => Some(UNTYPED),
                    _ if obj.get("x-kubernetes-preserve-unknown-fields")
                        == Some(&Value::Bool(true)) =>
                    {
                        Some(UNTYPED)
                    }
                    _ => None,
                };
                let atomic = is_atomic_map(obj);
                self.nodes[id] = Node::Object {
                    fields,
                    elements,
                    atomic,
                };
                return id;
            }
            "object" | "" if is_atomic_map(obj) => return ATOMIC_OBJECT,
            "object" | "" => return UNTYPED,
            _ => return SCALAR,
        };
        self.push(node)
    }

    fn named(&mut self, name: &str) -> TypeId {
        if let Some(id) = self.named.get(name) {
            return *id;
        }
        match name {
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
            | "io.k8s.apimachinery.pkg.api.resource.Quantity"
            | "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
            | "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => return SCALAR,
            // Opaque JSON: no structure to merge by.
            "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1" => return UNTYPED,
            "io.k8s.apimachinery.pkg.runtime.RawExtension" => return ATOMIC_OBJECT,
            _ => {}
        }
        let Some(schema) = self.definitions.get(name) else {
            return UNTYPED;
        };
        // Reserve first: definitions refer to themselves (JSONSchemaProps).
        let placeholder = self.reserve();
        self.named.insert(name.to_string(), placeholder);
        let built = self.node_of(schema);
        self.nodes[placeholder] = self.nodes[built].clone();
        placeholder
    }

    /// The `default` of a list-map key field in the items' schema (following a `$ref`), or
    /// `TCP` for `protocol`, which kube's defaulting sets on every port before SSA sees it.
    fn key_default(&self, items: Option<&Value>, key: &str) -> Option<Value> {
        let mut schema = items?.as_object()?;
        if let Some(Value::Array(all)) = schema.get("allOf") {
            schema = all.first()?.as_object()?;
        }
        if let Some(name) = ref_name(schema) {
            schema = self.definitions.get(name)?.as_object()?;
        }
        let declared = schema
            .get("properties")
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("default"))
            .cloned();
        declared
            .or_else(|| (self.builtin && key == "protocol").then(|| Value::String("TCP".into())))
    }

    /// A referenced type as the referring schema sees it: `x-kubernetes-map-type` or
    /// `x-kubernetes-list-type: atomic` next to the reference make it atomic.
    fn with_sibling_extensions(&mut self, id: TypeId, obj: &Map<String, Value>) -> TypeId {
        let list_atomic =
            obj.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("atomic");
        if !is_atomic_map(obj) && !list_atomic {
            return id;
        }
        match self.nodes[id].clone() {
            Node::Object {
                fields, elements, ..
            } => self.push(Node::Object {
                fields,
                elements,
                atomic: true,
            }),
            Node::List { items, .. } => self.push(Node::List {
                items,
                kind: ListKind::Atomic,
            }),
            Node::Untyped => ATOMIC_OBJECT,
            Node::Scalar => id,
        }
    }

    fn reserve(&mut self) -> TypeId {
        self.push(Node::Untyped)
    }

    fn push(&mut self, node: Node) -> TypeId {
        self.nodes.push(node);
        self.nodes.len() - 1
    }
}

fn ref_name(obj: &Map<String, Value>) -> Option<&str> {
    let reference = obj.get("$ref")?.as_str()?;
    REF_PREFIXES
        .iter()
        .find_map(|prefix| reference.strip_prefix(prefix))
}

fn is_atomic_map(obj: &Map<String, Value>) -> bool {
    obj.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
}

fn has_elements(obj: &Map<String, Value>) -> bool {
    matches!(
        obj.get("additionalProperties"),
        Some(Value::Object(_)) | Some(Value::Bool(true))
    )
}

enum ListKindSpec {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// `x-kubernetes-list-type`, else the patch strategy (merge with a key: a map; merge without:
/// a set), else atomic.
fn list_kind(obj: &Map<String, Value>) -> ListKindSpec {
    use ListKindSpec as ListKind;
    match obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => return ListKind::Set,
        Some("map") => {
            let keys = obj
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| {
                    keys.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            return if keys.is_empty() {
                ListKind::Atomic
            } else {
                ListKind::Map(keys)
            };
        }
        Some(_) => return ListKind::Atomic,
        None => {}
    }
    let merges = obj
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
        .is_some_and(|s| s.split(',').any(|p| p.trim() == "merge"));
    if !merges {
        return ListKind::Atomic;
    }
    match obj
        .get("x-kubernetes-patch-merge-key")
        .and_then(Value::as_str)
    {
        Some(key) if !key.is_empty() => ListKind::Map(vec![key.to_string()]),
        _ => ListKind::Set,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_maps_and_references_are_typed() {
        let defs = json!({
            "Pod": {"type": "object", "properties": {
                "spec": {"$ref": "#/components/schemas/Spec"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "Spec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                               "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {"type": "object", "properties": {"a": {"type": "string"}}, "x-kubernetes-map-type": "atomic"},
                "self": {"$ref": "#/components/schemas/Spec"},
                "port": {"x-kubernetes-int-or-string": true}}}
        });
        let defs = defs.as_object().unwrap();
        let model = TypeModel::build(&json!({"$ref": "#/components/schemas/Pod"}), defs);
        let spec = model.field(TypeModel::ROOT, "spec");
        assert!(model.is_named_field(TypeModel::ROOT, "spec"));
        assert!(!model.is_named_field(model.field(TypeModel::ROOT, "labels"), "x"));
        let kind = |name: &str| match model.node(model.field(spec, name)) {
            Node::List { kind, .. } => kind.clone(),
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(
            kind("containers"),
            ListKind::Map(vec![("name".into(), None)])
        );
        assert_eq!(kind("finalizers"), ListKind::Set);
        assert_eq!(kind("args"), ListKind::Atomic);
        assert!(matches!(
            model.node(model.field(spec, "selector")),
            Node::Object { atomic: true, .. }
        ));
        assert_eq!(model.field(spec, "self"), spec);
        assert_eq!(model.node(model.field(spec, "port")), &Node::Scalar);
        assert_eq!(model.node(model.field(spec, "unknown")), &Node::Untyped);
    }
}

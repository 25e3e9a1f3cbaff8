//! `metadata.managedFields` kept on every write, and server-side apply: who owns which field,
//! how an update moves ownership to its writer, how an apply merges a configuration, removes
//! what its manager stopped applying and refuses to overwrite other managers' fields — k8s.io
//! apimachinery's field manager chain (strip-meta, build-manager-info, cap-managers,
//! skip-non-applied, last-applied interop) over structured-merge-diff's updater.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::machinery::meta_field;

use super::path::{path_string, FieldSet, Path, PathElement};
use super::types::{Node, TypeModel};
use super::walk::{compare, ensure_named_fields_are_members, merge, remove_items, to_field_set};

/// kube keeps at most this many `Update` entries; older ones are folded into one.
const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT_CHANGES: &str = "ancient-changes";
/// Owner of an object's fields when its first apply finds no managed fields.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// The manager `kubectl apply --server-side` uses, which keeps client-side apply's annotation.
const KUBECTL_MANAGER: &str = "kubectl";
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub subresource: String,
    pub time: Option<String>,
    pub set: FieldSet,
}

impl Entry {
    /// Entries are one per manager, operation and subresource — and, for updates, API version
    /// (kube's `BuildManagerIdentifier`).
    fn same_owner(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// How conflict messages name the manager (kube's `printManager`).
    fn display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn sort_key(&self) -> (&'static str, &str, &str, &str, &str) {
        (
            self.operation.as_str(),
            self.time.as_deref().unwrap_or(""),
            &self.manager,
            &self.api_version,
            &self.subresource,
        )
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation.as_str()));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_json(i: usize, v: &Value) -> Result<Entry, String> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let operation = match s("operation").as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        let api_version = s("apiVersion");
        if api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match s("fieldsType").as_str() {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ))
            }
        }
        let set = match v.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(f) => FieldSet::from_fields_v1(f)?,
        };
        Ok(Entry {
            manager: s("manager"),
            operation,
            api_version,
            subresource: s("subresource"),
            time: v.get("time").and_then(Value::as_str).map(str::to_string),
            set,
        })
    }
}

/// Decodes `metadata.managedFields` (absent: no entries).
pub fn decode(object: &Value) -> Result<Vec<Entry>, String> {
    match meta_field(object, "managedFields") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(entries)) => entries
            .iter()
            .enumerate()
            .map(|(i, e)| Entry::from_json(i, e))
            .collect(),
        Some(_) => Err("managedFields must be a list".into()),
    }
}

/// Writes the entries, in kube's order, as `metadata.managedFields` (removed when none).
fn encode(entries: &mut [Entry], object: &mut Value) {
    entries.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        let list = entries.iter().map(Entry::to_json).collect();
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

fn field(name: &str) -> PathElement {
    PathElement::Field(name.to_string())
}

/// The system fields nobody owns (kube's strip-meta manager), built once.
fn stripped_fields() -> &'static FieldSet {
    static STRIPPED: std::sync::LazyLock<FieldSet> =
        std::sync::LazyLock::new(build_stripped_fields);
    &STRIPPED
}

fn build_stripped_fields() -> FieldSet {
    let mut set = FieldSet::new();
    set.insert(&[field("apiVersion")]);
    set.insert(&[field("kind")]);
    set.insert(&[field("metadata")]);
    for name in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        set.insert(&[field("metadata"), field(name)]);
    }
    set
}

/// A server-side apply that would change other managers' fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts(pub Vec<(String, Path)>);

impl Conflicts {
    /// kube's message: one conflict inline, several listed by manager.
    pub fn message(&self) -> String {
        if let [(manager, path)] = self.0.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {manager}: {}",
                path_string(path)
            );
        }
        let mut by_manager: Vec<(&str, Vec<&Path>)> = Vec::new();
        for (manager, path) in &self.0 {
            match by_manager.iter_mut().find(|(m, _)| m == manager) {
                Some((_, paths)) => paths.push(path),
                None => by_manager.push((manager, vec![path])),
            }
        }
        by_manager.sort_by(|a, b| a.0.cmp(b.0));
        let mut lines = Vec::new();
        for (manager, paths) in by_manager {
            lines.push(format!("conflicts with {manager}:"));
            lines.extend(paths.iter().map(|p| format!("- {}", path_string(p))));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyError {
    Conflicts(Conflicts),
    BadRequest(String),
    Internal(String),
}

/// Tracks the fields of one kind's objects written at one API version through one
/// subresource (`""` for the object itself).
pub struct FieldManager<'a> {
    pub model: &'a TypeModel,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub subresource: &'a str,
    /// Fields this endpoint resets and so never owns (`.status` for the object of a kind
    /// with a status subresource; everything else for the subresource).
    pub reset: &'a FieldSet,
    /// A custom resource, whose empty object (unstructured) has no fields at all.
    pub custom: bool,
}

impl FieldManager<'_> {
    /// The empty object a create is compared against: kube compares with a new object of the
    /// kind — for a built-in kind a Go struct, in which struct-typed top-level fields (`spec`,
    /// `status`) are present and empty; for a custom resource an unstructured object with
    /// nothing in it.
    pub fn empty_object(&self) -> Value {
        let mut object = Map::new();
        object.insert("apiVersion".into(), json!(self.api_version));
        object.insert("kind".into(), json!(self.kind));
        object.insert("metadata".into(), json!({}));
        if self.custom {
            return Value::Object(object);
        }
        if let Node::Object { fields, .. } = self.model.node(TypeModel::ROOT) {
            for (name, ty) in fields {
                let is_struct = matches!(self.model.node(*ty),
                    Node::Object { fields, atomic: false, .. } if !fields.is_empty());
                if is_struct && name != "metadata" {
                    object.insert(name.clone(), json!({}));
                }
            }
        }
        Value::Object(object)
    }

    fn entry(&self, manager: &str, operation: Operation) -> Entry {
        Entry {
            manager: if manager.is_empty() {
                "unknown".to_string()
            } else {
                manager.to_string()
            },
            operation,
            api_version: self.api_version.to_string(),
            subresource: self.subresource.to_string(),
            time: None,
            set: FieldSet::new(),
        }
    }

    /// Records a non-apply write of `new` over `live` (for a create, `live` is
    /// [`FieldManager::empty_object`]) by `manager`: the fields it changed become its own and
    /// leave their other owners. Sets `new`'s `managedFields`.
    pub fn update(&self, live: &Value, new: &mut Value, manager: &str, now: &str) {
        let existing = meta_field(live, "uid")
            .and_then(Value::as_str)
            .is_some_and(|u| !u.is_empty());
        let mut entries = self.entries_for_update(live, new).unwrap_or_default();
        // Objects that exist without managed fields (written before they were tracked, or
        // reset by a client) stay untracked until their first apply, as kube's
        // skip-non-applied manager does.
        if entries.is_empty() && existing {
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            return;
        }
        // Comparisons skip `metadata.managedFields`, so neither object is copied without it.
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        self.record_update(
            live,
            new,
            &mut entries,
            self.entry(manager, Operation::Update),
            now,
        );
        cap_update_managers(&mut entries);
        encode(&mut entries, new);
    }

    /// The entries an update starts from: the request's own when it sends valid ones (a
    /// client that read, modified and wrote the object), none when it sends `[]` (a reset),
    /// else the stored object's. A subresource always uses the stored object's.
    fn entries_for_update(&self, live: &Value, new: &Value) -> Option<Vec<Entry>> {
        let from_live = || decode(live).ok();
        if !self.subresource.is_empty() {
            return from_live();
        }
        match meta_field(new, "managedFields") {
            Some(Value::Array(list)) if list.is_empty() => Some(Vec::new()),
            Some(Value::Array(list)) if list.len() == 1 && list[0] == json!({}) => Some(Vec::new()),
            Some(Value::Array(_)) => match decode(new) {
                Ok(entries) if !entries.is_empty() => Some(entries),
                _ => from_live(),
            },
            _ => from_live(),
        }
    }

    /// structured-merge-diff's `Update` for one writer, then kube's strip-meta.
    fn record_update(
        &self,
        live: &Value,
        new: &Value,
        entries: &mut Vec<Entry>,
        me: Entry,
        now: &str,
    ) {
        let mut cmp = compare(self.model, live, new);
        cmp.exclude(self.reset);
        // What this write itself set; only a write that set something moves the manager's
        // timestamp (kube's managed-fields updater).
        let mut mine = std::mem::take(&mut cmp.modified);
        if mine.is_empty() {
            mine = std::mem::take(&mut cmp.added);
        } else {
            mine.union_in_place(&cmp.added);
        }
        for e in entries.iter_mut().filter(|e| !e.same_owner(&me)) {
            e.set.difference_in_place(&mine);
            e.set.difference_in_place(&cmp.removed);
        }
        mine.difference_in_place(stripped_fields());
        let (mut set, previous_time) = match entries.iter().position(|e| e.same_owner(&me)) {
            Some(i) => {
                let previous = entries.remove(i);
                (previous.set, previous.time)
            }
            None => (FieldSet::new(), None),
        };
        let set_something = !mine.is_empty();
        set.difference_in_place(&cmp.removed);
        if set.is_empty() {
            set = mine;
        } else {
            set.union_in_place(&mine);
        }
        // A set a client wrote may name system or reset fields; the writer never keeps them.
        set.difference_in_place(stripped_fields());
        if !self.reset.is_empty() {
            set = set.recursive_difference(self.reset);
        }
        entries.retain(|e| !e.set.is_empty());
        if !set.is_empty() {
            let time = if !set_something {
                previous_time
            } else {
                Some(now.to_string())
            };
            entries.push(Entry { set, time, ..me });
        }
    }

    /// Server-side apply of `config` by `manager` to `live` (`None`: the object does not
    /// exist and the apply creates it). Returns the object to write, `managedFields`
    /// included.
    pub fn apply(
        &self,
        live: Option<&Value>,
        config: &Value,
        manager: &str,
        force: bool,
        now: &str,
    ) -> Result<Value, ApplyError> {
        if meta_field(config, "managedFields").is_some_and(|m| !m.is_null()) {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        let empty = self.empty_object_for_apply();
        let live_object = live.unwrap_or(&empty);
        let mut entries = decode(live_object)
            .map_err(|e| ApplyError::Internal(format!("failed to decode managed fields: {e}")))?;
        if entries.is_empty() && live.is_some() {
            // Everything already there belongs to one placeholder owner, so the apply
            // conflicts with it rather than silently taking it over.
            self.record_update(
                &self.empty_object(),
                live_object,
                &mut entries,
                self.entry(BEFORE_FIRST_APPLY, Operation::Update),
                now,
            );
        }
        let me = self.entry(manager, Operation::Apply);
        let config_set = to_field_set(self.model, config).recursive_difference(self.reset);
        let mut merged = merge(self.model, live_object, config);
        let last = entries
            .iter()
            .position(|e| e.same_owner(&me))
            .map(|i| entries.remove(i));

        // Fields the manager applied before and no longer does go, unless someone else
        // (including this apply) still owns them.
        if let Some(last) = &last {
            let mut owned = config_set.clone();
            for e in &entries {
                owned.union_in_place(&e.set);
            }
            let owned = ensure_named_fields_are_members(self.model, &owned);
            let dropped = ensure_named_fields_are_members(self.model, &last.set).difference(&owned);
            remove_items(self.model, &mut merged, &dropped);
        }

        let mut cmp = compare(self.model, live_object, &merged);
        cmp.exclude(self.reset);
        let changed = cmp.changed();
        let mut conflicts = Vec::new();
        let mut by_manager: Vec<&Entry> = entries.iter().collect();
        by_manager.sort_by_key(|e| e.display());
        for e in by_manager {
            for path in e.set.intersection(&changed).iterate() {
                conflicts.push((e.display(), path));
            }
        }
        if !conflicts.is_empty() && !force {
            let remaining = if manager == KUBECTL_MANAGER {
                self.not_allowed_by_last_applied(live_object, conflicts)
            } else {
                conflicts
            };
            if !remaining.is_empty() {
                return Err(ApplyError::Conflicts(Conflicts(remaining)));
            }
        }
        for e in entries.iter_mut() {
            e.set = e.set.difference(&changed).difference(&cmp.removed);
        }
        entries.retain(|e| !e.set.is_empty());
        let set = config_set.difference(stripped_fields());
        let changed_object = merged != *live_object || live.is_none();
        if !set.is_empty() {
            let time = if changed_object {
                Some(now.to_string())
            } else {
                last.and_then(|l| l.time)
            };
            entries.push(Entry { set, time, ..me });
        }
        if manager == KUBECTL_MANAGER {
            keep_last_applied_in_step(live_object, config, &mut merged);
        }
        encode(&mut entries, &mut merged);
        Ok(merged)
    }

    fn empty_object_for_apply(&self) -> Value {
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": {}})
    }

    /// kubectl's move from client-side to server-side apply: a field in conflict is allowed
    /// when the client-side apply annotation applied it with the value it still has (kube's
    /// last-applied manager). Returns the conflicts that remain.
    fn not_allowed_by_last_applied(
        &self,
        live: &Value,
        conflicts: Vec<(String, Path)>,
    ) -> Vec<(String, Path)> {
        let Some(annotation) = meta_field(live, "annotations")
            .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        else {
            return conflicts;
        };
        let Ok(last_applied) = serde_json::from_str::<Value>(annotation) else {
            return conflicts;
        };
        if last_applied.get("apiVersion").and_then(Value::as_str) != Some(self.api_version) {
            return conflicts;
        }
        let cmp = compare(self.model, &last_applied, live);
        let allowed = to_field_set(self.model, &last_applied)
            .difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed);
        conflicts
            .into_iter()
            .filter(|(_, path)| !allowed.has(path))
            .collect()
    }
}

/// `kubectl apply --server-side` keeps client-side apply's annotation, where there is one, in
/// step with what it applies (kube's last-applied updater).
fn keep_last_applied_in_step(live: &Value, config: &Value, merged: &mut Value) {
    let has_annotation = meta_field(live, "annotations")
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|a| !a.is_empty());
    if !has_annotation {
        return;
    }
    let mut applied = config.clone();
    if let Some(annotations) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    // Go encodes maps with sorted keys.
    let encoded = format!("{}\n", crate::machinery::sorted_keys(&applied));
    if let Some(annotations) = merged
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(encoded));
    }
}

/// Folds the oldest `Update` entries into `ancient-changes` (one per API version) so at most
/// [`MAX_UPDATE_MANAGERS`] remain (kube's cap-managers manager).
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|i| entries[*i].operation == Operation::Update)
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|a, b| {
        let (ea, eb) = (&entries[*a], &entries[*b]);
        (ea.time.as_deref().unwrap_or(""), &ea.manager)
            .cmp(&(eb.time.as_deref().unwrap_or(""), &eb.manager))
    });
    let mut remaining = updaters.len();
    let mut buckets: HashMap<String, usize> = HashMap::new();
    let mut folded = vec![false; entries.len()];
    for i in updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let version = entries[i].api_version.clone();
        match buckets.get(&version) {
            Some(&bucket) => {
                let set = entries[i].set.clone();
                let time = entries[i].time.clone();
                let b = &mut entries[bucket];
                b.manager = ANCIENT_CHANGES.to_string();
                b.subresource = String::new();
                b.set.union_in_place(&set);
                b.time = time;
                folded[i] = true;
                remaining -= 1;
            }
            None => {
                buckets.insert(version, i);
            }
        }
    }
    let mut index = 0;
    entries.retain(|_| {
        let keep = !folded[index];
        index += 1;
        keep
    });
}

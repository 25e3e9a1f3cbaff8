//! The OpenAPI documents of remote extension API servers (APIService backends) merged with the
//! local ones, as kube-aggregator does:
//!
//! - v3 (`pkg/controllers/openapiv3/aggregator`): every remote group-version document is listed in
//!   the `/openapi/v3` index and served as fetched. Here a remote may only add
//!   `apis/<group>/<version>` keys, and a key the local server has stays local.
//! - v2 (`pkg/controllers/openapi/aggregator` with kube-openapi's
//!   `MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters`): each remote Swagger
//!   document, cut down to the paths of the group-versions the remote owns, is merged into the
//!   local one. Paths the document already has win; a definition (or shared parameter) with a
//!   name already taken is shared when equal (definitions ignoring their
//!   `x-kubernetes-group-version-kind` lists, which are merged) and otherwise renamed
//!   `<name>_v2`, `_v3`, ... with every `$ref` to it rewritten.
//!
//! The local documents are generated once into a [`LocalOpenApi`] (v3 at once, reusing the
//! unchanged documents of the previous one; the Swagger document on first use). It keeps every
//! path and definition of the local Swagger document as a slice of the document's two encodings
//! (JSON and protobuf): a merge borrows the local entries, encodes only what the remotes add or
//! change, and splices the encodings. The Swagger document is never held as a `Value`.

use std::borrow::Cow;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;
use serde_json::{Map, Value};

use super::{
    generate_v3, gnostic, render_v2_path_item, v2_definitions, v2_inputs, v2_top, Doc, OpenApi,
    V3Doc, V2_REF_PREFIX,
};
use crate::resource::ResourceDef;

const GVK_KEY: &str = "x-kubernetes-group-version-kind";
const PARAMETER_REF_PREFIX: &str = "#/parameters/";

/// One remote backend's OpenAPI documents as last fetched.
#[derive(Debug, Clone, Default)]
pub struct RemoteOpenApi {
    /// The APIService name (`<version>.<group>`): named in logs, and the group-version whose
    /// Swagger paths the backend contributes (besides those of its v3 keys).
    pub name: String,
    /// v3: key as in the index (`apis/<group>/<version>`) -> document body (JSON bytes).
    pub v3: Vec<(String, Bytes)>,
    /// v2 swagger document, if the backend serves one (shared: the served documents keep it
    /// until they are replaced, to merge it when the Swagger document is first asked for).
    pub v2: Option<Arc<Value>>,
}

/// The documents generated from the local resources, kept so that merging remote documents does
/// not generate them again: build it once per set of local resources (or [rebuild] it from the
/// previous one) and call [`OpenApi::merge`] whenever a remote document changes. Cloning it is
/// cheap (the documents are shared).
///
/// [rebuild]: LocalOpenApi::rebuild
#[derive(Debug, Clone)]
pub struct LocalOpenApi {
    inner: Arc<LocalInner>,
}

#[derive(Debug)]
struct LocalInner {
    /// What the Swagger document is generated from, when it is first needed.
    resources: Vec<ResourceDef>,
    /// The local v3 documents by key, with the fingerprints of their inputs.
    v3: BTreeMap<String, V3Doc>,
    /// The local Swagger document, which remote ones are merged into: generated on first use.
    v2: OnceLock<LocalV2>,
}

impl LocalOpenApi {
    /// Generates the local documents (what [`OpenApi::build`] does, keeping the pieces).
    pub fn build(resources: &[ResourceDef]) -> LocalOpenApi {
        LocalOpenApi::rebuild(resources, None)
    }

    /// Like [`LocalOpenApi::build`], taking from `previous` every v3 document whose inputs are
    /// unchanged (the same bytes: only what changed is generated again).
    pub fn rebuild(resources: &[ResourceDef], previous: Option<&LocalOpenApi>) -> LocalOpenApi {
        LocalOpenApi {
            inner: Arc::new(LocalInner {
                v3: generate_v3(resources, previous.map(|p| &p.inner.v3)),
                resources: resources.to_vec(),
                v2: OnceLock::new(),
            }),
        }
    }

    /// The local documents without any remote one (what [`OpenApi::build`] returns).
    pub fn openapi(&self) -> OpenApi {
        OpenApi::merge(self, &[])
    }

    /// The local documents without any remote one.
    pub fn into_openapi(self) -> OpenApi {
        self.openapi()
    }

    /// The local Swagger document, generated on the first call.
    fn v2(&self) -> &LocalV2 {
        self.inner.v2.get_or_init(|| {
            let (paths, catalog) = v2_inputs(&self.inner.resources);
            LocalV2::new(
                v2_top(),
                paths
                    .iter()
                    .map(|(path, routes)| (path.clone(), render_v2_path_item(routes))),
                v2_definitions(&paths, &catalog),
            )
        })
    }

    fn has_v3(&self, key: &str) -> bool {
        self.inner.v3.contains_key(key)
    }
}

impl OpenApi {
    /// The local documents plus the remote ones: remote v3 group-versions appear in the index
    /// (with their own hash in serverRelativeURL) and are served by v3_group_version; the v2
    /// document (JSON and protobuf) has the remote paths and definitions merged in.
    ///
    /// The local documents are generated again only when `local_resources` differ from the
    /// previous call's (one process-wide cache); a caller holding a [`LocalOpenApi`] can call
    /// [`OpenApi::merge`] instead. Remotes are merged in the order given (kube-aggregator's is
    /// by group priority, then name): keep it stable so replicas publish the same hashes.
    pub fn merged(local_resources: &[ResourceDef], remote: &[RemoteOpenApi]) -> OpenApi {
        OpenApi::merge(&cached_local(local_resources), remote)
    }

    /// [`OpenApi::merged`] with the local documents already built. The Swagger document is
    /// merged when first asked for ([`OpenApi::v2`]).
    pub fn merge(local: &LocalOpenApi, remote: &[RemoteOpenApi]) -> OpenApi {
        let v3 = merge_v3(local, remote);
        OpenApi::from_parts(
            v3,
            LazyV2 {
                local: local.clone(),
                remotes: remote.iter().filter(|r| r.v2.is_some()).cloned().collect(),
                built: OnceLock::new(),
            },
        )
    }
}

/// The served Swagger document of one [`OpenApi`]: the local one with the remotes merged in,
/// assembled on first use.
pub(super) struct LazyV2 {
    local: LocalOpenApi,
    /// The remotes that have a Swagger document (their documents are shared, not copied).
    remotes: Vec<RemoteOpenApi>,
    built: OnceLock<(Doc, Bytes)>,
}

impl LazyV2 {
    /// The JSON document (with its ETag) and the protobuf one.
    pub(super) fn get(&self) -> &(Doc, Bytes) {
        self.built.get_or_init(|| {
            let local = self.local.v2();
            match merge_v2(&self.local, &self.remotes) {
                Some(sections) => {
                    let (json, protobuf) = local.encode(&sections);
                    (Doc::from_bytes(json), protobuf)
                }
                // Nothing remote in the Swagger document: the local encodings are served.
                None => (local.whole.clone(), local.whole_protobuf.clone()),
            }
        })
    }

    pub(super) fn is_built(&self) -> bool {
        self.built.get().is_some()
    }
}

impl std::fmt::Debug for LazyV2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyV2")
            .field("remotes", &self.remotes.len())
            .field("built", &self.is_built())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// The cached local documents
// ---------------------------------------------------------------------------------------------

/// Every `ResourceDef` field the document generator reads: equal fingerprints give equal
/// documents. A field the generator starts reading must be added here.
#[derive(PartialEq, Eq)]
struct ResourceFingerprint {
    group: String,
    version: String,
    plural: String,
    kind: String,
    list_kind: String,
    definition: String,
    namespaced: bool,
    verbs: Vec<&'static str>,
    subresources: Vec<(&'static str, String, Vec<&'static str>)>,
    schema: Option<Arc<Value>>,
}

fn fingerprint(resources: &[ResourceDef]) -> Vec<ResourceFingerprint> {
    resources
        .iter()
        .map(|r| ResourceFingerprint {
            group: r.group.clone(),
            version: r.version.clone(),
            plural: r.plural.clone(),
            kind: r.kind.clone(),
            list_kind: r.list_kind.clone(),
            definition: r.definition.clone(),
            namespaced: r.namespaced,
            verbs: r.verbs.clone(),
            subresources: r
                .subresources
                .iter()
                .map(|s| (s.name, s.kind.clone(), s.verbs.clone()))
                .collect(),
            schema: r.openapi_schema.clone(),
        })
        .collect()
}

type CachedLocal = (Vec<ResourceFingerprint>, Arc<LocalOpenApi>);

/// The last local documents [`OpenApi::merged`] built, by what they were built from.
static LAST_LOCAL: Mutex<Option<CachedLocal>> = Mutex::new(None);

fn cached_local(resources: &[ResourceDef]) -> Arc<LocalOpenApi> {
    let key = fingerprint(resources);
    // A panic while building leaves the slot as it was (`None` or a complete entry), so a
    // poisoned lock still holds a usable value.
    let mut slot = LAST_LOCAL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((cached_key, local)) = slot.as_ref() {
        if *cached_key == key {
            return Arc::clone(local);
        }
    }
    // Built under the lock: concurrent callers with the same resources wait for one build
    // rather than each doing it.
    let previous = slot.as_ref().map(|(_, local)| local.as_ref());
    let local = Arc::new(LocalOpenApi::rebuild(resources, previous));
    *slot = Some((key, Arc::clone(&local)));
    local
}

// ---------------------------------------------------------------------------------------------
// v3
// ---------------------------------------------------------------------------------------------

/// The local v3 documents plus every acceptable remote one.
fn merge_v3(local: &LocalOpenApi, remotes: &[RemoteOpenApi]) -> BTreeMap<String, Doc> {
    let mut docs: BTreeMap<String, Doc> = local
        .inner
        .v3
        .iter()
        .map(|(key, v3)| (key.clone(), v3.doc.clone()))
        .collect();
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    for remote in remotes {
        for (key, body) in &remote.v3 {
            if !is_group_version_key(key) {
                tracing::warn!(
                    apiservice = %remote.name,
                    key = %key,
                    "ignoring a remote OpenAPI v3 document that is not of one group-version (apis/<group>/<version>)"
                );
                continue;
            }
            if local.has_v3(key) {
                tracing::warn!(
                    apiservice = %remote.name,
                    key = %key,
                    "ignoring a remote OpenAPI v3 document for a group-version served locally"
                );
                continue;
            }
            match docs.entry(key.clone()) {
                Entry::Vacant(slot) => {
                    slot.insert(Doc::from_bytes(body.clone()));
                    owners.insert(key, &remote.name);
                }
                Entry::Occupied(existing) => {
                    // Two APIServices of one backend may both list its group-versions; only
                    // differing documents are a conflict worth reporting.
                    if existing.get().body != *body {
                        tracing::warn!(
                            apiservice = %remote.name,
                            key = %key,
                            served_from = owners.get(key.as_str()).copied().unwrap_or_default(),
                            "ignoring a remote OpenAPI v3 document for a group-version another APIService already provides"
                        );
                    }
                }
            }
        }
    }
    docs
}

/// `apis/<group>/<version>` with a non-empty DNS-subdomain group and a DNS-label version (what
/// an APIService's `spec.group` and `spec.version` must be).
fn is_group_version_key(key: &str) -> bool {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("apis"), Some(group), Some(version), None) => {
            is_dns_subdomain(group) && is_dns_label(version)
        }
        // The core group's version (`api/v1`): a delegate cluster serves it when kubegate's
        // own core group is switched off.
        (Some("api"), Some(version), None, None) => is_dns_label(version),
        _ => false,
    }
}

/// RFC 1123 label: lower-case alphanumerics and `-`, alphanumeric at both ends.
fn is_dns_1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_1123_label)
}

/// RFC 1035 label (kube's check for an APIService version): an RFC 1123 label starting with a
/// letter.
fn is_dns_label(s: &str) -> bool {
    is_dns_1123_label(s) && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
}

// ---------------------------------------------------------------------------------------------
// v2
// ---------------------------------------------------------------------------------------------

/// The parts of a Swagger document kube-openapi's aggregator merges, by name.
#[derive(Debug, Clone, Default)]
struct Spec {
    paths: BTreeMap<String, Value>,
    definitions: BTreeMap<String, Value>,
    parameters: BTreeMap<String, Value>,
}

impl Spec {
    /// `None` when the document is not a JSON object.
    fn from_document(document: &Value) -> Option<Spec> {
        let document = document.as_object()?;
        let section = |key: &str| -> BTreeMap<String, Value> {
            document
                .get(key)
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default()
        };
        Some(Spec {
            paths: section("paths"),
            definitions: section("definitions"),
            parameters: section("parameters"),
        })
    }

    /// The definitions the given path items reach through `$ref`s, following references into
    /// definitions and shared parameters (kube-openapi's `walkOnAllReferences`).
    fn used_definitions<'a>(&'a self, roots: impl Iterator<Item = &'a Value>) -> BTreeSet<String> {
        let mut used: BTreeSet<&str> = BTreeSet::new();
        let mut parameters_seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&Value> = roots.collect();
        while let Some(value) = stack.pop() {
            for_each_ref(value, &mut |reference| {
                if let Some(name) = reference.strip_prefix(V2_REF_PREFIX) {
                    if let Some((name, schema)) = self.definitions.get_key_value(name) {
                        if used.insert(name) {
                            stack.push(schema);
                        }
                    }
                } else if let Some(name) = reference.strip_prefix(PARAMETER_REF_PREFIX) {
                    if let Some((name, parameter)) = self.parameters.get_key_value(name) {
                        if parameters_seen.insert(name) {
                            stack.push(parameter);
                        }
                    }
                }
            });
        }
        used.into_iter().map(str::to_string).collect()
    }

    /// kube-openapi's `FilterSpecByPathsWithoutSideEffects`: keeps the paths `keep` accepts and
    /// drops the definitions only the dropped paths used. Definitions no path used are kept, and
    /// shared parameters are never dropped.
    fn retain_paths(&mut self, keep: impl Fn(&str) -> bool) {
        let used_before = self.used_definitions(self.paths.values());
        self.paths.retain(|path, _| keep(path));
        let used_after = self.used_definitions(self.paths.values());
        self.definitions
            .retain(|name, _| used_after.contains(name) || !used_before.contains(name));
    }

    /// Rewrites every `$ref` to `<prefix><old>` into `<prefix><new>` (kube-openapi's
    /// `ReplaceReferences`, over the whole document).
    fn rewrite_refs(&mut self, prefix: &str, renames: &BTreeMap<String, String>) {
        if renames.is_empty() {
            return;
        }
        let rename = |reference: &str| -> Option<String> {
            let new = renames.get(reference.strip_prefix(prefix)?)?;
            Some(format!("{prefix}{new}"))
        };
        for value in self
            .paths
            .values_mut()
            .chain(self.definitions.values_mut())
            .chain(self.parameters.values_mut())
        {
            rewrite_refs(value, &rename);
        }
    }

    /// Renames the definitions (`renameDefinitions`).
    fn rename_definitions(&mut self, renames: &BTreeMap<String, String>) {
        self.rewrite_refs(V2_REF_PREFIX, renames);
        rename_keys(&mut self.definitions, renames);
    }

    /// Renames the shared parameters (`renameParameters`).
    fn rename_parameters(&mut self, renames: &BTreeMap<String, String>) {
        self.rewrite_refs(PARAMETER_REF_PREFIX, renames);
        rename_keys(&mut self.parameters, renames);
    }
}

fn rename_keys(map: &mut BTreeMap<String, Value>, renames: &BTreeMap<String, String>) {
    for (old, new) in renames {
        if let Some(value) = map.remove(old) {
            map.insert(new.clone(), value);
        }
    }
}

/// Calls `f` with every `$ref` string in a value.
fn for_each_ref<'a>(value: &'a Value, f: &mut impl FnMut(&'a str)) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(reference)) => f(reference),
                    _ => for_each_ref(v, f),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| for_each_ref(v, f)),
        _ => {}
    }
}

fn rewrite_refs(value: &mut Value, rename: &impl Fn(&str) -> Option<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(reference) if key == "$ref" => {
                        if let Some(new) = rename(reference) {
                            *reference = new;
                        }
                    }
                    _ => rewrite_refs(v, rename),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, rename)),
        _ => {}
    }
}

/// kube-openapi's `deepEqualDefinitionsModuloGVKs`.
fn definitions_equal(a: &Value, b: &Value) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let without_gvk =
                |m: &Map<String, Value>| m.len() - usize::from(m.contains_key(GVK_KEY));
            without_gvk(a) == without_gvk(b)
                && a.iter()
                    .filter(|(k, _)| *k != GVK_KEY)
                    .all(|(k, v)| b.get(k) == Some(v))
        }
        _ => a == b,
    }
}

fn parameters_equal(a: &Value, b: &Value) -> bool {
    a == b
}

/// The merged sections of the Swagger document: the local entries borrowed (their encodings are
/// kept in [`LocalV2`]), the merged ones owned.
#[derive(Debug, Clone, Default)]
struct Sections<'a> {
    paths: BTreeMap<String, Cow<'a, Value>>,
    definitions: BTreeMap<String, Cow<'a, Value>>,
    parameters: BTreeMap<String, Cow<'a, Value>>,
}

impl<'a> Sections<'a> {
    /// The sections of the local document, borrowed.
    fn local(v2: &'a LocalV2) -> Sections<'a> {
        let (definitions, parameters) = v2.values();
        let borrow = |m: &'a BTreeMap<String, Value>| -> BTreeMap<String, Cow<'a, Value>> {
            m.iter()
                .map(|(k, v)| (k.clone(), Cow::Borrowed(v)))
                .collect()
        };
        Sections {
            paths: v2
                .paths
                .keys()
                .map(|k| (k.clone(), Cow::Borrowed(&LOCAL_ENTRY)))
                .collect(),
            definitions: borrow(definitions),
            parameters: borrow(parameters),
        }
    }
}

/// The new names of the source entries whose name the destination has with different content
/// (kube-openapi's rename loops): an existing `<name>_v<N>` equal to the entry is reused,
/// otherwise the first `<name>_v<N>` (N from 2) neither side uses is taken.
fn conflict_renames(
    dest: &BTreeMap<String, Cow<'_, Value>>,
    source: &BTreeMap<String, Value>,
    equal: fn(&Value, &Value) -> bool,
) -> BTreeMap<String, String> {
    let mut used: BTreeSet<String> = dest.keys().cloned().collect();
    let mut renames = BTreeMap::new();
    'entries: for (name, value) in source {
        match dest.get(name) {
            None => continue,
            Some(existing) if equal(existing, value) => continue,
            Some(_) => {}
        }
        let mut n = 1;
        let mut new_name;
        loop {
            n += 1;
            new_name = format!("{name}_v{n}");
            match dest.get(&new_name) {
                Some(existing) if equal(existing, value) => {
                    renames.insert(name.clone(), new_name);
                    continue 'entries;
                }
                Some(_) => {}
                None => break,
            }
        }
        while used.contains(&new_name) || source.contains_key(&new_name) {
            n += 1;
            new_name = format!("{name}_v{n}");
        }
        used.insert(new_name.clone());
        renames.insert(name.clone(), new_name);
    }
    renames
}

/// kube-openapi's `mergedGVKs`: adds the source definition's group-version-kinds the
/// destination's list lacks, sorted by `group/version.kind` when any was added. Returns whether
/// the destination changed (only then is a borrowed local definition copied).
fn merge_gvks(dest: &mut Cow<'_, Value>, source: &Value, remote: &str, name: &str) -> bool {
    let Some(theirs) = source.get(GVK_KEY) else {
        return false;
    };
    let merged = match dest.get(GVK_KEY) {
        None => theirs.clone(),
        Some(ours) => {
            fn key(gvk: &Value) -> Option<String> {
                let gvk = gvk.as_object()?;
                let field = |f: &str| gvk.get(f).and_then(Value::as_str).unwrap_or_default();
                Some(format!(
                    "{}/{}.{}",
                    field("group"),
                    field("version"),
                    field("kind")
                ))
            }
            let keyed = |list: &Value| -> Option<Vec<(String, Value)>> {
                list.as_array()?
                    .iter()
                    .map(|gvk| Some((key(gvk)?, gvk.clone())))
                    .collect()
            };
            let (Some(mut merged), Some(theirs)) = (keyed(ours), keyed(theirs)) else {
                // kube fails the whole merge here; keeping the existing list loses less.
                tracing::warn!(
                    apiservice = %remote,
                    definition = %name,
                    "malformed x-kubernetes-group-version-kind in a merged OpenAPI v2 definition; keeping the existing one"
                );
                return false;
            };
            let mut seen: BTreeSet<String> = merged.iter().map(|(k, _)| k.clone()).collect();
            let before = merged.len();
            for (k, gvk) in theirs {
                if seen.insert(k.clone()) {
                    merged.push((k, gvk));
                }
            }
            if merged.len() == before {
                return false;
            }
            merged.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Array(merged.into_iter().map(|(_, gvk)| gvk).collect())
        }
    };
    match dest.to_mut().as_object_mut() {
        Some(dest) => {
            dest.insert(GVK_KEY.into(), merged);
            true
        }
        None => false,
    }
}

/// kube-openapi's `MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters`. Returns
/// whether the destination changed.
fn merge_specs(dest: &mut Sections<'_>, mut source: Spec, remote: &str) -> bool {
    // Paths the destination has win; if that leaves nothing, nothing of the source is used.
    let conflicting = source
        .paths
        .keys()
        .filter(|path| dest.paths.contains_key(*path))
        .count();
    if conflicting == source.paths.len() {
        return false;
    }
    if conflicting > 0 {
        tracing::debug!(
            apiservice = %remote,
            conflicting,
            "remote OpenAPI v2 paths already served are left out"
        );
        source.retain_paths(|path| !dest.paths.contains_key(path));
    }

    let renames = conflict_renames(&dest.definitions, &source.definitions, definitions_equal);
    for (old, new) in &renames {
        tracing::debug!(
            apiservice = %remote,
            definition = %old,
            renamed = %new,
            "conflicting OpenAPI v2 definition renamed"
        );
    }
    source.rename_definitions(&renames);
    let renames = conflict_renames(&dest.parameters, &source.parameters, parameters_equal);
    source.rename_parameters(&renames);

    let mut changed = false;
    for (name, schema) in source.definitions {
        match dest.definitions.entry(name) {
            Entry::Vacant(slot) => {
                slot.insert(Cow::Owned(schema));
                changed = true;
            }
            // Equal but for the kinds (the conflicting ones were renamed above).
            Entry::Occupied(mut slot) => {
                let name = slot.key().clone();
                changed |= merge_gvks(slot.get_mut(), &schema, remote, &name);
            }
        }
    }
    for (name, parameter) in source.parameters {
        if let Entry::Vacant(slot) = dest.parameters.entry(name) {
            slot.insert(Cow::Owned(parameter));
            changed = true;
        }
    }
    for (path, item) in source.paths {
        dest.paths.insert(path, Cow::Owned(item));
        changed = true;
    }
    changed
}

/// The `/apis/<group>/<version>/` path prefixes whose Swagger paths a remote contributes (kube
/// filters each APIService's document to its group-version): that of its name
/// (`<version>.<group>`) and of its v3 keys, except group-versions served locally, which stay
/// local as in v3.
fn owned_path_prefixes(local: &LocalOpenApi, remote: &RemoteOpenApi) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    // `<version>.<group>`; the core group's APIService is `<version>.` (an empty group).
    match remote.name.split_once('.') {
        Some((version, "")) => {
            keys.insert(format!("api/{version}"));
        }
        Some((version, group)) => {
            keys.insert(format!("apis/{group}/{version}"));
        }
        None => {}
    }
    keys.extend(remote.v3.iter().map(|(key, _)| key.clone()));
    keys.into_iter()
        .filter(|key| is_group_version_key(key) && !local.has_v3(key))
        .map(|key| format!("/{key}/"))
        .collect()
}

/// The sections of the local Swagger document with every remote one merged in; `None` when no
/// remote adds anything.
fn merge_v2<'a>(local: &'a LocalOpenApi, remotes: &[RemoteOpenApi]) -> Option<Sections<'a>> {
    let mut merged: Option<Sections<'a>> = None;
    let mut changed = false;
    for remote in remotes {
        let Some(document) = &remote.v2 else {
            continue;
        };
        let Some(mut source) = Spec::from_document(document) else {
            tracing::warn!(
                apiservice = %remote.name,
                "ignoring a remote OpenAPI v2 document that is not a JSON object"
            );
            continue;
        };
        let prefixes = owned_path_prefixes(local, remote);
        if prefixes.is_empty() {
            tracing::warn!(
                apiservice = %remote.name,
                "ignoring a remote OpenAPI v2 document: the APIService owns no group-version that is not served locally"
            );
            continue;
        }
        source.retain_paths(|path| prefixes.iter().any(|prefix| path.starts_with(prefix)));
        let dest = merged.get_or_insert_with(|| Sections::local(local.v2()));
        changed |= merge_specs(dest, source, &remote.name);
    }
    merged.filter(|_| changed)
}

// ---------------------------------------------------------------------------------------------
// Encoding the merged Swagger document from pieces
// ---------------------------------------------------------------------------------------------

/// One entry of a section encoded both ways: the JSON value and the gnostic message (for a
/// local entry, slices of the local document's encodings).
#[derive(Debug, Clone)]
struct Encoded {
    json: Bytes,
    protobuf: Bytes,
}

#[derive(Debug, Clone, Copy)]
enum Section {
    Paths,
    Definitions,
    Parameters,
}

impl Section {
    /// The field of gnostic's `Document` holding the section, and the field of the section's
    /// message holding its repeated entries.
    fn protobuf_fields(self) -> (u32, u32) {
        match self {
            Section::Paths => (8, 2),
            Section::Definitions => (9, 1),
            Section::Parameters => (10, 1),
        }
    }

    fn encode_protobuf(self, name: &str, value: &Value) -> Vec<u8> {
        match self {
            Section::Paths => gnostic::named_path_item(name, value).encode_to_vec(),
            Section::Definitions => gnostic::named_schema(name, value).encode_to_vec(),
            Section::Parameters => gnostic::named_parameter(name, value).encode_to_vec(),
        }
    }

    fn encode(self, name: &str, value: &Value) -> Encoded {
        Encoded {
            // Serializing a `Value` cannot fail (every key is a string).
            json: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
            protobuf: Bytes::from(self.encode_protobuf(name, value)),
        }
    }
}

/// Placeholder value of a local path in [`Sections`]: merging only asks which paths exist, and
/// a borrowed entry is written from its stored encodings.
static LOCAL_ENTRY: Value = Value::Null;

/// The local Swagger document: encoded once both ways as it is generated, entry by entry, with
/// every path, definition and shared parameter kept as slices of those encodings.
#[derive(Debug)]
struct LocalV2 {
    /// The document's top-level fields with the sections empty (in the document's order).
    top: Value,
    paths: BTreeMap<String, Encoded>,
    definitions: BTreeMap<String, Encoded>,
    parameters: BTreeMap<String, Encoded>,
    /// gnostic's encoding of the fields before the sections (`swagger`, `info`) and after them
    /// (`security`, `securityDefinitions`); prost writes fields in number order.
    protobuf_head: Vec<u8>,
    protobuf_tail: Vec<u8>,
    /// The whole local document, as JSON (with its ETag) and protobuf.
    whole: Doc,
    whole_protobuf: Bytes,
    /// The definitions and shared parameters as values, parsed from their encodings when a
    /// remote Swagger document is first merged in (merging compares them with the remote's).
    values: OnceLock<(BTreeMap<String, Value>, BTreeMap<String, Value>)>,
}

/// Where each entry of a section landed in the two encodings being written.
type Placed = Vec<(String, Range<usize>, Range<usize>)>;

impl LocalV2 {
    /// Encodes the document `top` (whose `paths` and `definitions` are empty) with these
    /// entries: each is rendered, written to both encodings and dropped before the next.
    fn new(
        top: Value,
        paths: impl Iterator<Item = (String, Value)>,
        definitions: impl Iterator<Item = (String, Value)>,
    ) -> LocalV2 {
        let whole = gnostic::document(&top);
        let protobuf_head = gnostic::Document {
            swagger: whole.swagger.clone(),
            info: whole.info.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        let protobuf_tail = gnostic::Document {
            security: whole.security,
            security_definitions: whole.security_definitions,
            ..Default::default()
        }
        .encode_to_vec();

        let mut json = Vec::new();
        let mut protobuf = protobuf_head.clone();
        let mut placed_paths = Placed::new();
        let mut placed_definitions = Placed::new();
        let mut paths = Some(paths);
        let mut definitions = Some(definitions);
        json.push(b'{');
        for (i, (key, value)) in top.as_object().into_iter().flatten().enumerate() {
            if i > 0 {
                json.push(b',');
            }
            write_json_string(&mut json, key);
            json.push(b':');
            // `top` has `paths` before `definitions`, the order of their protobuf fields.
            match key.as_str() {
                "paths" if paths.is_some() => {
                    if let Some(entries) = paths.take() {
                        placed_paths =
                            write_section(&mut json, &mut protobuf, Section::Paths, entries);
                    }
                }
                "definitions" if definitions.is_some() => {
                    if let Some(entries) = definitions.take() {
                        placed_definitions =
                            write_section(&mut json, &mut protobuf, Section::Definitions, entries);
                    }
                }
                _ => {
                    // Writing a `Value` to a `Vec` cannot fail.
                    let _ = serde_json::to_writer(&mut json, value);
                }
            }
        }
        json.push(b'}');
        protobuf.extend_from_slice(&protobuf_tail);

        // Kept until the next change: not with the spare capacity the buffers grew into.
        json.shrink_to_fit();
        protobuf.shrink_to_fit();
        let json = Bytes::from(json);
        let protobuf = Bytes::from(protobuf);
        let slices = |placed: Placed| -> BTreeMap<String, Encoded> {
            placed
                .into_iter()
                .map(|(name, j, p)| {
                    let encoded = Encoded {
                        json: json.slice(j),
                        protobuf: protobuf.slice(p),
                    };
                    (name, encoded)
                })
                .collect()
        };
        LocalV2 {
            paths: slices(placed_paths),
            definitions: slices(placed_definitions),
            parameters: BTreeMap::new(),
            top,
            protobuf_head,
            protobuf_tail,
            whole: Doc::from_bytes(json.clone()),
            whole_protobuf: protobuf.clone(),
            values: OnceLock::new(),
        }
    }

    /// The local definitions and shared parameters as values (parsed on the first call).
    fn values(&self) -> &(BTreeMap<String, Value>, BTreeMap<String, Value>) {
        self.values.get_or_init(|| {
            let parse = |entries: &BTreeMap<String, Encoded>| -> BTreeMap<String, Value> {
                entries
                    .iter()
                    .map(|(name, e)| {
                        // The bytes were written from a `Value` just before.
                        let value = serde_json::from_slice(&e.json).unwrap_or(Value::Null);
                        (name.clone(), value)
                    })
                    .collect()
            };
            (parse(&self.definitions), parse(&self.parameters))
        })
    }

    /// Each entry's encodings: the stored ones for a borrowed local entry, new ones otherwise.
    fn entries<'s>(
        &'s self,
        section: Section,
        entries: &'s BTreeMap<String, Cow<'_, Value>>,
    ) -> Vec<(&'s str, Cow<'s, Encoded>)> {
        let stored = match section {
            Section::Paths => &self.paths,
            Section::Definitions => &self.definitions,
            Section::Parameters => &self.parameters,
        };
        entries
            .iter()
            .map(|(name, value)| {
                let encoded = match (value, stored.get(name)) {
                    // A borrowed entry is the local document's own under the same name.
                    (Cow::Borrowed(_), Some(stored)) => Cow::Borrowed(stored),
                    _ => Cow::Owned(section.encode(name, value)),
                };
                (name.as_str(), encoded)
            })
            .collect()
    }

    /// The document with these sections as JSON (what `serde_json::to_vec` writes for the
    /// document value) and as gnostic protobuf (what `gnostic::encode` writes): the local
    /// document's top-level fields, the sections sorted by name as kube marshals them, and
    /// `parameters` only when there are any.
    fn encode(&self, sections: &Sections<'_>) -> (Bytes, Bytes) {
        let paths = self.entries(Section::Paths, &sections.paths);
        let definitions = self.entries(Section::Definitions, &sections.definitions);
        let parameters = self.entries(Section::Parameters, &sections.parameters);

        let size: usize = [&paths, &definitions, &parameters]
            .into_iter()
            .flatten()
            .map(|(name, e)| name.len() + e.json.len() + 4)
            .sum();
        let mut json = Vec::with_capacity(size + 4096);
        json.push(b'{');
        let mut first = true;
        let mut field = |json: &mut Vec<u8>, key: &str| {
            if !std::mem::take(&mut first) {
                json.push(b',');
            }
            write_json_string(json, key);
            json.push(b':');
        };
        for (key, value) in self.top.as_object().into_iter().flatten() {
            match key.as_str() {
                "paths" => {
                    field(&mut json, key);
                    write_json_section(&mut json, &paths);
                }
                "definitions" => {
                    field(&mut json, key);
                    write_json_section(&mut json, &definitions);
                    if !parameters.is_empty() {
                        field(&mut json, "parameters");
                        write_json_section(&mut json, &parameters);
                    }
                }
                "parameters" => {}
                _ => {
                    field(&mut json, key);
                    // Writing a `Value` to a `Vec` cannot fail.
                    let _ = serde_json::to_writer(&mut json, value);
                }
            }
        }
        json.push(b'}');

        let mut protobuf = Vec::with_capacity(json.len());
        protobuf.extend_from_slice(&self.protobuf_head);
        for (section, entries) in [
            (Section::Paths, &paths),
            (Section::Definitions, &definitions),
            (Section::Parameters, &parameters),
        ] {
            if matches!(section, Section::Parameters) && entries.is_empty() {
                continue;
            }
            let (field, entry_field) = section.protobuf_fields();
            let mut body = Vec::new();
            for (_, entry) in entries {
                write_protobuf_bytes(&mut body, entry_field, &entry.protobuf);
            }
            write_protobuf_bytes(&mut protobuf, field, &body);
        }
        protobuf.extend_from_slice(&self.protobuf_tail);
        protobuf.shrink_to_fit();
        (Bytes::from(json), Bytes::from(protobuf))
    }
}

/// Writes one section's entries as a JSON object into `json` and as the section's protobuf
/// field into `protobuf`, returning where each entry's encodings are. The protobuf section's
/// length prefix is inserted in front of its body once the body is written, so no entry is
/// held or copied apart from the document.
fn write_section(
    json: &mut Vec<u8>,
    protobuf: &mut Vec<u8>,
    section: Section,
    entries: impl Iterator<Item = (String, Value)>,
) -> Placed {
    let (field, entry_field) = section.protobuf_fields();
    let mut placed = Placed::new();
    let body_start = protobuf.len();
    json.push(b'{');
    for (i, (name, value)) in entries.enumerate() {
        if i > 0 {
            json.push(b',');
        }
        write_json_string(json, &name);
        json.push(b':');
        let start = json.len();
        // Writing a `Value` to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *json, &value);
        let json_range = start..json.len();
        let message = section.encode_protobuf(&name, &value);
        encode_key(entry_field, WireType::LengthDelimited, protobuf);
        encode_varint(message.len() as u64, protobuf);
        let start = protobuf.len();
        protobuf.extend_from_slice(&message);
        placed.push((name, json_range, start..protobuf.len()));
    }
    json.push(b'}');
    let mut header = Vec::new();
    encode_key(field, WireType::LengthDelimited, &mut header);
    encode_varint((protobuf.len() - body_start) as u64, &mut header);
    let shift = header.len();
    protobuf.splice(body_start..body_start, header);
    for (_, _, range) in &mut placed {
        *range = range.start + shift..range.end + shift;
    }
    placed
}

fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a string to a `Vec` cannot fail.
    let _ = serde_json::to_writer(out, s);
}

fn write_json_section(out: &mut Vec<u8>, entries: &[(&str, Cow<'_, Encoded>)]) {
    out.push(b'{');
    for (i, (name, entry)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(out, name);
        out.push(b':');
        out.extend_from_slice(&entry.json);
    }
    out.push(b'}');
}

/// A length-delimited protobuf field.
fn write_protobuf_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    encode_key(field, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// The merged document as a value: what [`LocalV2::encode`] must write, for tests to compare
/// (borrowed local entries are read back from their stored encodings).
#[cfg(test)]
fn render_merged_v2(local: &LocalV2, sections: &Sections<'_>) -> Value {
    let object = |m: &BTreeMap<String, Cow<'_, Value>>, stored: &BTreeMap<String, Encoded>| {
        Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let value = match (v, stored.get(k)) {
                        (Cow::Borrowed(_), Some(e)) => {
                            serde_json::from_slice(&e.json).expect("stored JSON")
                        }
                        _ => v.clone().into_owned(),
                    };
                    (k.clone(), value)
                })
                .collect(),
        )
    };
    let mut out = Map::new();
    for (key, value) in local.top.as_object().into_iter().flatten() {
        match key.as_str() {
            "paths" => {
                out.insert(key.clone(), object(&sections.paths, &local.paths));
            }
            "definitions" => {
                out.insert(
                    key.clone(),
                    object(&sections.definitions, &local.definitions),
                );
                if !sections.parameters.is_empty() {
                    out.insert(
                        "parameters".into(),
                        object(&sections.parameters, &local.parameters),
                    );
                }
            }
            "parameters" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::tests::served_resources;
    use serde_json::json;

    const WARDLE: &str = "apis/wardle.example.com/v1alpha1";
    const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
    const FLUNDER: &str = "com.example.wardle.v1alpha1.Flunder";
    const FLUNDERS: &str = "/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders";

    fn parse(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("documents are JSON")
    }

    /// The local Swagger document as a value.
    fn local_document(local: &LocalOpenApi) -> Value {
        parse(&local.v2().whole.body)
    }

    fn local() -> LocalOpenApi {
        LocalOpenApi::build(&served_resources())
    }

    fn flunder_v3(description: &str) -> Bytes {
        Bytes::from(
            serde_json::to_vec(&json!({
                "openapi": "3.0.0",
                "info": { "title": "Wardle", "version": "v0" },
                "paths": {
                    FLUNDERS: { "get": { "operationId": "listWardleV1alpha1NamespacedFlunder" } }
                },
                "components": { "schemas": { FLUNDER: { "description": description, "type": "object" } } }
            }))
            .expect("JSON"),
        )
    }

    fn local_definition(local: &LocalOpenApi, name: &str) -> Value {
        local_document(local)["definitions"][name].clone()
    }

    /// A Swagger document like the sample-apiserver's: shared parameters, meta definitions equal
    /// to the local ones (one with its own kinds), an ObjectMeta that differs from the local one,
    /// paths outside its group-version and an unreferenced definition.
    fn wardle_v2(local: &LocalOpenApi, flunder_description: &str) -> Value {
        let mut delete_options = local_definition(local, &format!("{META}.DeleteOptions"));
        delete_options[GVK_KEY] = json!([
            { "group": "wardle.example.com", "kind": "DeleteOptions", "version": "v1alpha1" }
        ]);
        let gvk = |kind: &str| json!([{ "group": "wardle.example.com", "kind": kind, "version": "v1alpha1" }]);
        json!({
            "swagger": "2.0",
            "info": { "title": "Wardle", "version": "v0" },
            "paths": {
                "/apis/": { "get": { "operationId": "getAPIVersions", "responses": { "200": {
                    "description": "OK", "schema": { "$ref": format!("#/definitions/{META}.APIGroupList") } } } } },
                "/apis/wardle.example.com/v1alpha1/": { "get": { "operationId": "getWardleV1alpha1APIResources", "responses": { "200": {
                    "description": "OK", "schema": { "$ref": format!("#/definitions/{META}.APIResourceList") } } } } },
                FLUNDERS: {
                    "get": {
                        "operationId": "listWardleV1alpha1NamespacedFlunder",
                        "parameters": [{ "$ref": "#/parameters/limit-1NfNmdNH" }],
                        "responses": { "200": { "description": "OK", "schema": {
                            "$ref": "#/definitions/com.example.wardle.v1alpha1.FlunderList" } } },
                        "x-kubernetes-group-version-kind": { "group": "wardle.example.com", "kind": "Flunder", "version": "v1alpha1" }
                    },
                    "delete": {
                        "operationId": "deleteWardleV1alpha1CollectionNamespacedFlunder",
                        "parameters": [{ "$ref": "#/parameters/body-2Y1dVQaQ" }],
                        "responses": { "200": { "description": "OK", "schema": { "$ref": format!("#/definitions/{META}.Status") } } }
                    },
                    "parameters": [{ "$ref": "#/parameters/namespace-vgWSWtn3" }]
                },
                "/apis/other.example.com/v1/gizmos": { "get": { "operationId": "listGizmo", "responses": { "200": {
                    "description": "OK", "schema": { "$ref": "#/definitions/com.example.other.v1.Gizmo" } } } } }
            },
            "definitions": {
                FLUNDER: {
                    "description": flunder_description,
                    "properties": {
                        "metadata": { "$ref": format!("#/definitions/{META}.ObjectMeta"), "default": {} },
                        "spec": { "$ref": "#/definitions/com.example.wardle.v1alpha1.FlunderSpec", "default": {} }
                    },
                    "type": "object",
                    "x-kubernetes-group-version-kind": gvk("Flunder")
                },
                "com.example.wardle.v1alpha1.FlunderList": {
                    "properties": {
                        "items": { "items": { "$ref": format!("#/definitions/{FLUNDER}") }, "type": "array" },
                        "metadata": { "$ref": format!("#/definitions/{META}.ListMeta"), "default": {} }
                    },
                    "required": ["items"],
                    "type": "object",
                    "x-kubernetes-group-version-kind": gvk("FlunderList")
                },
                "com.example.wardle.v1alpha1.FlunderSpec": {
                    "properties": { "reference": { "type": "string" } },
                    "type": "object"
                },
                "com.example.wardle.v1alpha1.Unreferenced": { "type": "object" },
                "com.example.other.v1.Gizmo": { "type": "object" },
                format!("{META}.ObjectMeta"): {
                    "description": "An older ObjectMeta.",
                    "properties": {
                        "name": { "type": "string" },
                        "ownerReferences": { "items": {
                            "$ref": format!("#/definitions/{META}.OwnerReference"), "default": {} }, "type": "array" }
                    },
                    "type": "object"
                },
                format!("{META}.OwnerReference"): local_definition(local, &format!("{META}.OwnerReference")),
                format!("{META}.ListMeta"): local_definition(local, &format!("{META}.ListMeta")),
                format!("{META}.Status"): local_definition(local, &format!("{META}.Status")),
                format!("{META}.StatusDetails"): local_definition(local, &format!("{META}.StatusDetails")),
                format!("{META}.StatusCause"): local_definition(local, &format!("{META}.StatusCause")),
                format!("{META}.APIResourceList"): local_definition(local, &format!("{META}.APIResourceList")),
                format!("{META}.APIResource"): local_definition(local, &format!("{META}.APIResource")),
                format!("{META}.APIGroupList"): local_definition(local, &format!("{META}.APIGroupList")),
                format!("{META}.DeleteOptions"): delete_options,
                format!("{META}.Preconditions"): local_definition(local, &format!("{META}.Preconditions"))
            },
            "parameters": {
                "body-2Y1dVQaQ": { "in": "body", "name": "body", "required": true,
                    "schema": { "$ref": format!("#/definitions/{META}.DeleteOptions") } },
                "limit-1NfNmdNH": { "description": "limit is a maximum number of responses to return for a list call.",
                    "in": "query", "name": "limit", "type": "integer", "uniqueItems": true },
                "namespace-vgWSWtn3": { "description": "object name and auth scope, such as for teams and projects",
                    "in": "path", "name": "namespace", "required": true, "type": "string", "uniqueItems": true }
            }
        })
    }

    fn wardle(local: &LocalOpenApi) -> RemoteOpenApi {
        RemoteOpenApi {
            name: "v1alpha1.wardle.example.com".into(),
            v3: vec![(WARDLE.into(), flunder_v3("A Flunder."))],
            v2: Some(Arc::new(wardle_v2(local, "A Flunder."))),
        }
    }

    /// Every `$ref` of a Swagger document names one of its definitions or shared parameters.
    fn assert_v2_refs_resolve(doc: &Value) {
        let mut refs = Vec::new();
        for_each_ref(doc, &mut |r| refs.push(r.to_string()));
        assert!(!refs.is_empty());
        for r in refs {
            if let Some(name) = r.strip_prefix(V2_REF_PREFIX) {
                assert!(doc["definitions"].get(name).is_some(), "dangling {r}");
            } else if let Some(name) = r.strip_prefix(PARAMETER_REF_PREFIX) {
                assert!(doc["parameters"].get(name).is_some(), "dangling {r}");
            } else {
                panic!("unexpected $ref {r}");
            }
        }
    }

    #[test]
    fn remote_v3_documents_are_indexed_and_served() {
        let local = local();
        let body = flunder_v3("A Flunder.");
        let api = OpenApi::merge(&local, &[wardle(&local)]);

        let (served, etag) = api.v3_group_version(WARDLE).expect("remote document");
        assert_eq!(served, &body);
        let hash = super::super::sha512_hex(&body);
        assert_eq!(etag, format!("\"{hash}\""));
        let url = format!("/openapi/v3/{WARDLE}?hash={hash}");
        assert_eq!(api.v3_server_relative_url(WARDLE), Some(url.clone()));
        assert!(api.v3_group_version(&format!("/{WARDLE}/")).is_some());

        let (index, index_etag) = api.v3_index();
        assert_eq!(
            index_etag,
            format!("\"{}\"", super::super::sha512_hex(index))
        );
        let index = parse(index);
        assert_eq!(index["paths"][WARDLE]["serverRelativeURL"], url.as_str());
        // The local documents are listed as before, with the same hashes.
        let keys: Vec<&str> = api.v3_keys().collect();
        let alone = local.openapi();
        let mut expected: Vec<&str> = alone.v3_keys().collect();
        expected.push(WARDLE);
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(index["paths"].as_object().expect("paths").len(), keys.len());
        for key in local.openapi().v3_keys() {
            assert_eq!(
                api.v3_group_version(key),
                local.openapi().v3_group_version(key)
            );
        }
    }

    #[test]
    fn colliding_and_malformed_v3_keys_are_ignored() {
        let local = local();
        let remote = RemoteOpenApi {
            name: "v1.coordination.k8s.io".into(),
            v3: vec![
                ("apis/coordination.k8s.io/v1".into(), flunder_v3("x")),
                ("api/v1".into(), flunder_v3("x")),
                ("apis/wardle.example.com".into(), flunder_v3("x")),
                ("apis".into(), flunder_v3("x")),
                ("version".into(), flunder_v3("x")),
                ("apis/wardle.example.com/v1/extra".into(), flunder_v3("x")),
                ("/apis/wardle.example.com/v1".into(), flunder_v3("x")),
                ("apis//v1".into(), flunder_v3("x")),
                ("apis/Wardle.example.com/v1".into(), flunder_v3("x")),
                ("apis/wardle.example.com/1v".into(), flunder_v3("x")),
            ],
            v2: None,
        };
        let first = wardle(&local);
        let second = RemoteOpenApi {
            name: "v1alpha1.wardle.example.com".into(),
            v3: vec![(WARDLE.into(), flunder_v3("Another Flunder."))],
            v2: None,
        };
        let api = OpenApi::merge(&local, &[remote, first, second]);
        let keys: Vec<&str> = api.v3_keys().collect();
        let alone = local.openapi();
        let mut expected: Vec<&str> = alone.v3_keys().collect();
        expected.push(WARDLE);
        expected.sort_unstable();
        assert_eq!(keys, expected);
        for key in ["apis/coordination.k8s.io/v1", "api/v1", "apis", "version"] {
            assert_eq!(
                api.v3_group_version(key),
                local.openapi().v3_group_version(key),
                "{key}"
            );
        }
        // The first APIService to provide a group-version keeps it.
        assert_eq!(
            api.v3_group_version(WARDLE).expect("wardle").0,
            &flunder_v3("A Flunder.")
        );
    }

    #[test]
    fn v2_merge_adds_remote_paths_and_definitions() {
        let local = local();
        let api = OpenApi::merge(&local, &[wardle(&local)]);
        let (body, etag) = api.v2();
        assert_eq!(etag, format!("\"{}\"", super::super::sha512_hex(body)));
        let doc = parse(body);
        assert_v2_refs_resolve(&doc);
        // The local top-level fields.
        assert_eq!(doc["info"], local_document(&local)["info"]);
        assert_eq!(doc["security"], local_document(&local)["security"]);

        // Paths of the APIService's group-version only; local paths unchanged.
        assert!(doc["paths"][FLUNDERS]["get"].is_object());
        assert!(doc["paths"]["/apis/wardle.example.com/v1alpha1/"].is_object());
        assert!(doc["paths"]
            .get("/apis/other.example.com/v1/gizmos")
            .is_none());
        assert_eq!(
            doc["paths"]["/apis/"],
            local_document(&local)["paths"]["/apis/"]
        );
        for (path, item) in local_document(&local)["paths"].as_object().expect("paths") {
            assert_eq!(&doc["paths"][path], item, "{path}");
        }
        let definitions = doc["definitions"].as_object().expect("definitions");
        let paths: Vec<&String> = doc["paths"].as_object().expect("paths").keys().collect();
        assert!(paths.windows(2).all(|w| w[0] < w[1]), "paths sorted");
        let names: Vec<&String> = definitions.keys().collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "definitions sorted");

        // Remote definitions; the one only an unowned path used is dropped, an unreferenced one
        // is kept (as kube-openapi's path filter does).
        assert_eq!(definitions[FLUNDER]["description"], "A Flunder.");
        assert!(definitions.contains_key("com.example.wardle.v1alpha1.FlunderList"));
        assert!(definitions.contains_key("com.example.wardle.v1alpha1.FlunderSpec"));
        assert!(definitions.contains_key("com.example.wardle.v1alpha1.Unreferenced"));
        assert!(!definitions.contains_key("com.example.other.v1.Gizmo"));

        // Equal definitions are shared, their kinds merged and sorted.
        for name in ["ListMeta", "Status", "OwnerReference", "APIResourceList"] {
            let name = format!("{META}.{name}");
            assert_eq!(
                definitions[&name],
                local_document(&local)["definitions"][&name],
                "{name}"
            );
            assert!(!definitions.contains_key(&format!("{name}_v2")), "{name}");
        }
        let delete_options = &definitions[&format!("{META}.DeleteOptions")];
        let gvks = delete_options[GVK_KEY].as_array().expect("gvks");
        let local_doc = local_document(&local);
        let local_gvks = local_doc["definitions"][format!("{META}.DeleteOptions")][GVK_KEY]
            .as_array()
            .expect("local gvks");
        assert_eq!(gvks.len(), local_gvks.len() + 1);
        assert!(gvks.contains(
            &json!({ "group": "wardle.example.com", "kind": "DeleteOptions", "version": "v1alpha1" })
        ));
        let keys: Vec<String> = gvks
            .iter()
            .map(|g| {
                format!(
                    "{}/{}.{}",
                    g["group"].as_str().unwrap_or_default(),
                    g["version"].as_str().unwrap_or_default(),
                    g["kind"].as_str().unwrap_or_default()
                )
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");

        // The differing ObjectMeta is renamed and the remote's references follow it.
        let object_meta = format!("{META}.ObjectMeta");
        let renamed = format!("{object_meta}_v2");
        assert_eq!(
            definitions[&object_meta],
            local_document(&local)["definitions"][&object_meta]
        );
        assert_eq!(definitions[&renamed]["description"], "An older ObjectMeta.");
        assert_eq!(
            definitions[FLUNDER]["properties"]["metadata"]["$ref"],
            format!("#/definitions/{renamed}")
        );
        // Local references still name the local definition.
        assert_eq!(
            definitions["io.k8s.api.core.v1.ConfigMap"]["properties"]["metadata"]["$ref"],
            format!("#/definitions/{object_meta}")
        );

        // Shared parameters come along.
        let parameters = doc["parameters"].as_object().expect("parameters");
        assert_eq!(parameters.len(), 3);
        assert_eq!(parameters["limit-1NfNmdNH"]["name"], "limit");
        let keys: Vec<&str> = doc
            .as_object()
            .expect("doc")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "swagger",
                "info",
                "paths",
                "definitions",
                "parameters",
                "securityDefinitions",
                "security"
            ]
        );
    }

    /// A second backend whose ObjectMeta equals the first one's renamed copy reuses it; a third
    /// with yet another gets `_v3`; a differing shared parameter is renamed like a definition.
    #[test]
    fn later_conflicts_reuse_or_extend_the_renames() {
        let local = local();
        let object_meta = format!("{META}.ObjectMeta");
        let fischer = |name: &str, group: &str, object_meta_description: &str| {
            let mut v2 = wardle_v2(&local, "A Fischer.");
            let wardle_paths = v2["paths"].as_object().expect("paths").clone();
            let mut paths = Map::new();
            for (path, item) in wardle_paths {
                paths.insert(path.replace("wardle.example.com", group), item);
            }
            v2["paths"] = Value::Object(paths);
            v2["definitions"][&object_meta]["description"] = json!(object_meta_description);
            v2["parameters"]["limit-1NfNmdNH"]["description"] = json!(format!("{group} limit"));
            RemoteOpenApi {
                name: name.into(),
                v3: Vec::new(),
                v2: Some(Arc::new(v2)),
            }
        };
        let api = OpenApi::merge(
            &local,
            &[
                wardle(&local),
                fischer(
                    "v1alpha1.fischer.example.com",
                    "fischer.example.com",
                    "An older ObjectMeta.",
                ),
                fischer(
                    "v1alpha1.third.example.com",
                    "third.example.com",
                    "Yet another ObjectMeta.",
                ),
            ],
        );
        let doc = parse(api.v2().0);
        assert_v2_refs_resolve(&doc);
        let definitions = &doc["definitions"];
        assert_eq!(
            definitions[format!("{object_meta}_v2")]["description"],
            "An older ObjectMeta."
        );
        assert_eq!(
            definitions[format!("{object_meta}_v3")]["description"],
            "Yet another ObjectMeta."
        );
        assert!(definitions.get(format!("{object_meta}_v4")).is_none());
        // The remotes' Flunder definitions are equal but for their description: renamed too.
        assert_eq!(definitions[FLUNDER]["description"], "A Flunder.");
        assert_eq!(
            definitions[format!("{FLUNDER}_v2")]["description"],
            "A Fischer."
        );
        let fischer_list = "/apis/fischer.example.com/v1alpha1/namespaces/{namespace}/flunders";
        let third_list = "/apis/third.example.com/v1alpha1/namespaces/{namespace}/flunders";
        assert_eq!(
            doc["paths"][fischer_list]["get"]["parameters"][0]["$ref"],
            "#/parameters/limit-1NfNmdNH_v2"
        );
        assert_eq!(
            doc["paths"][third_list]["get"]["parameters"][0]["$ref"],
            "#/parameters/limit-1NfNmdNH_v3"
        );
        assert_eq!(
            doc["parameters"]["limit-1NfNmdNH_v2"]["description"],
            "fischer.example.com limit"
        );
        // Equal shared parameters are shared.
        assert_eq!(
            doc["paths"][third_list]["parameters"][0]["$ref"],
            "#/parameters/namespace-vgWSWtn3"
        );
        assert!(doc["parameters"].get("namespace-vgWSWtn3_v2").is_none());
    }

    #[test]
    fn paths_already_served_are_kept_and_local_group_versions_stay_local() {
        let local = local();
        let mut v2 = wardle_v2(&local, "A Flunder.");
        // A backend claiming a local group-version adds nothing, not even its other paths.
        v2["paths"]["/apis/coordination.k8s.io/v1/widgets"] = json!({ "get": { "responses": {
            "200": { "description": "OK", "schema": { "$ref": format!("#/definitions/{FLUNDER}") } } } } });
        let coordination = RemoteOpenApi {
            name: "v1.coordination.k8s.io".into(),
            v3: Vec::new(),
            v2: Some(Arc::new(v2)),
        };
        let api = OpenApi::merge(&local, &[coordination]);
        assert_eq!(api.v2(), local.openapi().v2());
        assert_eq!(api.v2_protobuf(), local.openapi().v2_protobuf());

        // Two APIServices of one backend: the second's paths are all served already.
        let mut second = wardle(&local);
        second.v3.clear();
        let once = OpenApi::merge(&local, &[wardle(&local)]);
        let twice = OpenApi::merge(&local, &[wardle(&local), second]);
        assert_eq!(once.v2(), twice.v2());
        // An APIService whose name is no group-version and with no v3 key owns no paths.
        let unnamed = RemoteOpenApi {
            name: "wardle".into(),
            v3: Vec::new(),
            v2: wardle(&local).v2,
        };
        assert_eq!(
            OpenApi::merge(&local, &[unnamed]).v2(),
            local.openapi().v2()
        );
    }

    #[test]
    fn v2_protobuf_has_the_remote_parts() {
        use prost::Message;
        let local = local();
        let api = OpenApi::merge(&local, &[wardle(&local)]);
        let json_doc = parse(api.v2().0);
        let (body, etag) = api.v2_protobuf();
        assert_eq!(etag, api.v2().1);
        assert_ne!(body, local.openapi().v2_protobuf().0);
        let doc = gnostic::Document::decode(body.as_ref()).expect("gnostic document");
        assert_eq!(doc.swagger, "2.0");
        let definitions = doc.definitions.expect("definitions").additional_properties;
        assert_eq!(
            definitions.len(),
            json_doc["definitions"]
                .as_object()
                .expect("definitions")
                .len()
        );
        let flunder = definitions
            .iter()
            .find(|d| d.name == FLUNDER)
            .and_then(|d| d.value.clone())
            .expect("Flunder");
        assert_eq!(flunder.description, "A Flunder.");
        let metadata = flunder
            .properties
            .expect("properties")
            .additional_properties
            .into_iter()
            .find(|p| p.name == "metadata")
            .and_then(|p| p.value)
            .expect("metadata");
        assert_eq!(
            metadata.reference,
            format!("#/definitions/{META}.ObjectMeta_v2")
        );
        assert!(definitions
            .iter()
            .any(|d| d.name == format!("{META}.ObjectMeta_v2")));

        let paths = doc.paths.expect("paths").path;
        assert_eq!(
            paths.len(),
            json_doc["paths"].as_object().expect("paths").len()
        );
        let flunders = paths
            .iter()
            .find(|p| p.name == FLUNDERS)
            .and_then(|p| p.value.clone())
            .expect("flunders path");
        let reference = |item: &gnostic::ParametersItem| match &item.oneof {
            Some(gnostic::ParametersItemOneof::JsonReference(r)) => r.reference.clone(),
            other => panic!("not a reference: {other:?}"),
        };
        assert_eq!(
            flunders
                .parameters
                .iter()
                .map(reference)
                .collect::<Vec<_>>(),
            ["#/parameters/namespace-vgWSWtn3"]
        );
        let list = flunders.get.expect("get");
        assert_eq!(list.operation_id, "listWardleV1alpha1NamespacedFlunder");
        assert_eq!(
            list.parameters.iter().map(reference).collect::<Vec<_>>(),
            ["#/parameters/limit-1NfNmdNH"]
        );

        let shared = doc
            .parameters
            .expect("shared parameters")
            .additional_properties;
        let names: Vec<&str> = shared.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["body-2Y1dVQaQ", "limit-1NfNmdNH", "namespace-vgWSWtn3"]
        );
        let Some(gnostic::Parameter {
            oneof: Some(gnostic::ParameterOneof::BodyParameter(body)),
        }) = &shared[0].value
        else {
            panic!("body parameter");
        };
        assert_eq!(
            body.schema.as_ref().expect("schema").reference,
            format!("#/definitions/{META}.DeleteOptions")
        );
        // The local document encodes no shared parameters, as before.
        let local_doc =
            gnostic::Document::decode(local.openapi().v2_protobuf().0.as_ref()).expect("local");
        assert!(local_doc.parameters.is_none());
    }

    /// The spliced encodings are exactly what encoding the whole document writes, for the local
    /// document and for a merge that adds, renames, shares and changes (kinds) entries.
    #[test]
    fn spliced_encodings_equal_whole_document_encodings() {
        let resources = crate::core::builtin_resources();
        let local = LocalOpenApi::build(&resources);
        // The document rendered whole, as one value, apart from the entry-by-entry encoding.
        let (paths, catalog) = v2_inputs(&resources);
        let document = super::super::render_v2(&paths, &catalog);
        let whole = serde_json::to_vec(&document).expect("JSON");
        assert_eq!(local.v2().whole.body, whole);
        assert_eq!(local.v2().whole_protobuf, gnostic::encode(&document));
        let (json, protobuf) = local.v2().encode(&Sections::local(local.v2()));
        assert_eq!(json, whole);
        assert_eq!(protobuf, gnostic::encode(&document));
        assert_eq!(local.openapi().v2().0, &json);
        assert_eq!(local.openapi().v2_protobuf().0, &protobuf);
        assert_eq!(
            render_merged_v2(local.v2(), &Sections::local(local.v2())),
            document
        );

        let mut other = wardle(&local);
        other.name = "v1.other.example.com".into();
        other.v3.clear();
        let v2 = Arc::make_mut(other.v2.as_mut().expect("v2"));
        v2["paths"]["/apis/other.example.com/v1/gizmos"]["get"]["parameters"] =
            json!([{ "$ref": "#/parameters/limit-1NfNmdNH" }]);
        v2["paths"]["/apis/other.example.com/v1/gizmos"]["get"]["responses"]["200"]["schema"] =
            json!({ "$ref": format!("#/definitions/{FLUNDER}") });
        v2["parameters"]["limit-1NfNmdNH"]["description"] = json!("another limit");
        v2["definitions"][FLUNDER]["description"] = json!("Not a Flunder.");
        let remotes = [wardle(&local), other];
        let sections = merge_v2(&local, &remotes).expect("merged");
        let value = render_merged_v2(local.v2(), &sections);
        assert!(value["definitions"].get(format!("{FLUNDER}_v2")).is_some());
        assert!(value["parameters"].get("limit-1NfNmdNH_v2").is_some());
        assert!(value["paths"]
            .get("/apis/other.example.com/v1/gizmos")
            .is_some());
        let (json, protobuf) = local.v2().encode(&sections);
        assert_eq!(json, serde_json::to_vec(&value).expect("JSON"));
        assert_eq!(protobuf, gnostic::encode(&value));
        let api = OpenApi::merge(&local, &remotes);
        assert_eq!(api.v2().0, &json);
        assert_eq!(api.v2_protobuf().0, &protobuf);
    }

    #[test]
    fn etags_follow_the_remote_documents() {
        let local = local();
        let a = OpenApi::merge(&local, &[wardle(&local)]);
        let again = OpenApi::merge(&local, &[wardle(&local)]);
        assert_eq!(a.v3_index(), again.v3_index());
        assert_eq!(a.v2(), again.v2());
        assert_eq!(a.v2_protobuf(), again.v2_protobuf());

        let mut changed = wardle(&local);
        changed.v3 = vec![(WARDLE.into(), flunder_v3("A changed Flunder."))];
        let b = OpenApi::merge(&local, &[changed.clone()]);
        assert_ne!(a.v3_index().1, b.v3_index().1);
        assert_ne!(
            a.v3_group_version(WARDLE).expect("a").1,
            b.v3_group_version(WARDLE).expect("b").1
        );
        assert_ne!(
            a.v3_server_relative_url(WARDLE),
            b.v3_server_relative_url(WARDLE)
        );
        assert_eq!(a.v2(), b.v2());
        assert_eq!(a.v3_group_version("api/v1"), b.v3_group_version("api/v1"));

        changed.v2 = Some(Arc::new(wardle_v2(&local, "A changed Flunder.")));
        let c = OpenApi::merge(&local, &[changed]);
        assert_ne!(b.v2().1, c.v2().1);
        assert_ne!(b.v2_protobuf().0, c.v2_protobuf().0);
        assert_eq!(c.v2_protobuf().1, c.v2().1);
        assert_ne!(a.v2().1, local.openapi().v2().1);
    }

    #[test]
    fn without_remotes_the_local_documents_are_served() {
        let resources = served_resources();
        let built = OpenApi::build(&resources);
        let local = LocalOpenApi::build(&resources);
        for api in [
            OpenApi::merge(&local, &[]),
            OpenApi::merged(&resources, &[]),
            OpenApi::merge(
                &local,
                &[RemoteOpenApi {
                    name: "v1alpha1.wardle.example.com".into(),
                    v3: Vec::new(),
                    v2: Some(Arc::new(json!("not a document"))),
                }],
            ),
        ] {
            assert_eq!(api.v3_index(), built.v3_index());
            assert_eq!(api.v2(), built.v2());
            assert_eq!(api.v2_protobuf(), built.v2_protobuf());
            assert!(api.v3_keys().eq(built.v3_keys()));
        }
    }

    /// A delegate cluster's core group (kubegate's own switched off) is merged like any other
    /// group-version: its v3 document and its `/api/v1/` Swagger paths.
    #[test]
    fn a_remote_core_group_is_merged_when_not_served_locally() {
        let mut resources = served_resources();
        resources.retain(|r| !r.group.is_empty());
        let local = LocalOpenApi::build(&resources);
        assert!(!local.has_v3("api/v1"));
        let core_v3 = flunder_v3("A core document.");
        let mut v2 = wardle_v2(&local, "A Flunder.");
        v2["paths"] = json!({ "/api/v1/namespaces/{namespace}/widgets": { "get": { "responses": {
            "200": { "description": "OK", "schema": { "$ref": format!("#/definitions/{FLUNDER}") } } } } } });
        let core = RemoteOpenApi {
            name: "v1.".into(),
            v3: vec![("api/v1".into(), core_v3.clone())],
            v2: Some(Arc::new(v2)),
        };
        let api = OpenApi::merge(&local, &[core]);
        assert_eq!(api.v3_group_version("api/v1").expect("api/v1").0, &core_v3);
        let index = parse(api.v3_index().0);
        assert!(index["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .is_some_and(|u| u.starts_with("/openapi/v3/api/v1?hash=")));
        let v2 = parse(api.v2().0);
        assert!(
            v2["paths"]
                .get("/api/v1/namespaces/{namespace}/widgets")
                .is_some(),
            "the core group's Swagger paths were not merged"
        );
    }

    /// `merged` reuses the local documents only while the resources are the same.
    #[test]
    fn merged_follows_the_local_resources() {
        let resources = served_resources();
        let local = LocalOpenApi::build(&resources);
        let remote = [wardle(&local)];
        let merged = OpenApi::merged(&resources, &remote);
        let merge = OpenApi::merge(&local, &remote);
        assert_eq!(merged.v3_index(), merge.v3_index());
        assert_eq!(merged.v2(), merge.v2());

        let mut fewer = resources.clone();
        fewer.retain(|r| r.group != "coordination.k8s.io");
        let merged = OpenApi::merged(&fewer, &remote);
        assert!(merged
            .v3_group_version("apis/coordination.k8s.io/v1")
            .is_none());
        assert!(merged.v3_group_version(WARDLE).is_some());
        let merged = OpenApi::merged(&resources, &remote);
        assert!(merged
            .v3_group_version("apis/coordination.k8s.io/v1")
            .is_some());
    }

    #[test]
    fn group_version_keys() {
        for key in [WARDLE, "apis/metrics.k8s.io/v1beta1", "apis/a/v1", "api/v1"] {
            assert!(is_group_version_key(key), "{key}");
        }
        for key in [
            "api",
            "api/",
            "api/v1/",
            "api/V1",
            "api/core/v1",
            "apis/wardle.example.com",
            "apis//v1",
            "apis/wardle.example.com/",
            "apis/wardle.example.com/v1/",
            "apis/-wardle.example.com/v1",
            "apis/wardle..example.com/v1",
            "apis/wardle.example.com/V1",
            "apis/wardle.example.com/1",
        ] {
            assert!(!is_group_version_key(key), "{key}");
        }
    }

    /// Not an assertion on time (tests never assert wall-clock times): prints how long
    /// generating the local documents and merging a remote take, for the record. Run with
    /// `cargo test -p kubegate-backends openapi::merge::tests::timings -- --nocapture`.
    #[test]
    fn timings() {
        use std::time::Instant;
        let resources = crate::core::builtin_resources();
        let runs = 5;
        let start = Instant::now();
        for _ in 0..runs {
            std::hint::black_box(OpenApi::build(&resources));
        }
        let build = start.elapsed() / runs;
        let local = LocalOpenApi::build(&resources);
        let remote = [wardle(&local)];
        let start = Instant::now();
        for _ in 0..runs {
            std::hint::black_box(OpenApi::merge(&local, &remote));
        }
        let merge = start.elapsed() / runs;
        let start = Instant::now();
        for _ in 0..runs {
            std::hint::black_box(OpenApi::merge(&local, &[]));
        }
        let merge_none = start.elapsed() / runs;
        eprintln!(
            "OpenApi::build ({} resources, v2 {} bytes): {build:?}; OpenApi::merge with one remote: {merge:?}; with none: {merge_none:?}",
            resources.len(),
            local.openapi().v2().0.len(),
        );
    }
}

//! The generic registry: Kubernetes REST semantics (get, list, watch, create, update, patch,
//! delete, deletecollection) over [`ResourceDef`]s and one store with its watch cache, the
//! way k8s.io/apiserver's `registry/generic/registry.Store` does for every built-in type.
//!
//! Reads (GET, LIST, WATCH) are served from the [`Cacher`]; writes go to the [`Store`] with
//! compare-and-swap on the revision, then wait for the cache to catch up so a read after a
//! write sees it.

mod apply;
mod convert;
pub(crate) mod encode;
mod fields;
pub mod gc;
mod go_types;
mod internal;
mod meta;
pub mod namespaces;
mod read;
mod scale;
mod write;

#[cfg(test)]
mod convert_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::api::{ApiRequest, ApiResponse};
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::cacher::Cacher;
use crate::storage::{Store, StoreError};
use kubegate_policy::RequestInfo;

pub use internal::manager;
pub use meta::{now_rfc3339, object_name, object_namespace};

/// Options the registry takes from the configuration.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// How long a request may wait for the watch cache to reach a revision.
    pub cache_wait: Duration,
    /// Interval between watch bookmarks when a client allows them.
    pub bookmark_interval: Duration,
    /// Watch lifetime bounds when the client gives no `timeoutSeconds` (kube: 30–60 min).
    pub min_watch_timeout: Duration,
    /// Namespaces live elsewhere (a delegate cluster serves the core group): writes of local
    /// namespaced kinds are not checked against namespaces stored here, which only mirror
    /// kubegate's own bootstrap; the cluster's namespaces are the ones clients see.
    pub namespaces_elsewhere: bool,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            cache_wait: Duration::from_secs(10),
            bookmark_interval: Duration::from_secs(30),
            min_watch_timeout: Duration::from_secs(1800),
            namespaces_elsewhere: false,
        }
    }
}

/// The resources served at one moment: the built-in ones, then those added at run time
/// (CustomResourceDefinitions' versions).
struct Served {
    list: Arc<[Arc<ResourceDef>]>,
    /// group → version → plural: nested so a request's `&str`s look a resource up without
    /// building an owned key.
    by_path: ByPath,
}

/// group → version → plural → resource.
type ByPath = HashMap<String, HashMap<String, HashMap<String, Arc<ResourceDef>>>>;

impl Served {
    fn new(list: Vec<Arc<ResourceDef>>) -> Served {
        let mut by_path = ByPath::new();
        for r in &list {
            by_path
                .entry(r.group.clone())
                .or_default()
                .entry(r.version.clone())
                .or_default()
                .insert(r.plural.clone(), r.clone());
        }
        Served {
            list: list.into(),
            by_path,
        }
    }
}

/// Serves every registered resource.
pub struct Registry {
    builtin: Vec<Arc<ResourceDef>>,
    /// Swapped whole when resources are added or removed: requests never wait for it. Shared
    /// with custom resources' watches, which end once their definition is replaced.
    served: Arc<arc_swap::ArcSwap<Served>>,
    /// Bumped on every change of the served set (discovery and OpenAPI rebuild on it).
    changed: tokio::sync::watch::Sender<u64>,
    cacher: Arc<Cacher>,
    options: RegistryOptions,
    /// Authorizes what a request amounts to beyond its own verb (an apply that creates).
    authorizer: Option<Arc<dyn kubegate_policy::Authorizer>>,
}

impl Registry {
    pub fn new(resources: Vec<ResourceDef>, cacher: Arc<Cacher>, options: RegistryOptions) -> Self {
        let builtin: Vec<Arc<ResourceDef>> = resources.into_iter().map(Arc::new).collect();
        Registry {
            served: Arc::new(arc_swap::ArcSwap::from_pointee(Served::new(
                builtin.clone(),
            ))),
            builtin,
            changed: tokio::sync::watch::channel(0).0,
            cacher,
            options,
            authorizer: None,
        }
    }

    /// The authorizer that judges what a request amounts to beyond its own verb (an apply
    /// that creates needs `create`). Without one, such requests fail as kube's do.
    pub fn with_authorizer(mut self, authorizer: Arc<dyn kubegate_policy::Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    fn authorizer(&self) -> Option<&Arc<dyn kubegate_policy::Authorizer>> {
        self.authorizer.as_ref()
    }

    /// Replaces the resources served besides the built-in ones. A custom resource may not
    /// take the place of a built-in one (same group, version and plural): such entries are
    /// dropped.
    pub fn set_custom_resources(&self, custom: Vec<ResourceDef>) {
        let mut list = self.builtin.clone();
        for def in custom {
            let taken = list.iter().any(|r| {
                r.group == def.group && r.version == def.version && r.plural == def.plural
            });
            if !taken {
                list.push(Arc::new(def));
            }
        }
        self.served.store(Arc::new(Served::new(list)));
        self.changed.send_modify(|n| *n += 1);
    }

    /// The resources served from the start, whatever else is added at run time.
    pub fn builtin_resources(&self) -> &[Arc<ResourceDef>] {
        &self.builtin
    }

    /// A receiver that sees every change of the served resources.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Resolves once `def` (a custom resource's) is no longer what its group, version and
    /// plural serve: its CRD changed (new definitions) or went. kube tears a CRD's storage down
    /// on such a change, which ends its watches; clients watch again under the new definition.
    fn replaced(
        &self,
        def: &Arc<ResourceDef>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let served = self.served.clone();
        let mut changes = self.changed.subscribe();
        let def = def.clone();
        async move {
            loop {
                let current = served
                    .load()
                    .by_path
                    .get(&def.group)
                    .and_then(|versions| versions.get(&def.version))
                    .and_then(|plurals| plurals.get(&def.plural))
                    .is_some_and(|now| Arc::ptr_eq(&now.strategy, &def.strategy));
                if !current {
                    return;
                }
                if changes.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }

    /// Every resource served now, built-in ones first.
    pub fn resources(&self) -> Arc<[Arc<ResourceDef>]> {
        self.served.load().list.clone()
    }

    pub fn cacher(&self) -> &Arc<Cacher> {
        &self.cacher
    }

    fn store(&self) -> &Arc<dyn Store> {
        self.cacher.store()
    }

    /// The resource served at `/apis/<group>/<version>/<plural>` (or `/api/v1/<plural>`).
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.served
            .load()
            .by_path
            .get(group)?
            .get(version)?
            .get(plural)
            .cloned()
    }

    /// Serves one resource request.
    pub async fn handle(&self, request: ApiRequest) -> ApiResponse {
        let info = &request.info;
        let Some(def) = self.lookup(&info.api_group, &info.api_version, &info.resource) else {
            return ApiResponse::error(&ApiError::path_not_found());
        };
        let response = match self.dispatch(&def, &request).await {
            // Every object, list, Table and Status the registry answers is written through
            // kube's `WriteObjectNegotiated`.
            Ok(response) => response.negotiated(),
            Err(error) => ApiResponse::error(&error),
        };
        // Every answer for a deprecated version carries kube's warning, errors included.
        match def.strategy.deprecation_warning() {
            Some(warning) => response.with_header("Warning", write::warning_header(warning)),
            None => response,
        }
    }

    async fn dispatch(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let info = &request.info;
        let def = def.clone();
        if !info.subresource.is_empty() && !def.has_subresource(&info.subresource) {
            return Err(ApiError::path_not_found());
        }
        // A namespaced resource has no route for a name without a namespace; a name that
        // comes from a `metadata.name` field selector on a list or watch across namespaces
        // is not in the path, and kube lists every namespace's objects of that name.
        if def.namespaced && info.namespace.is_empty() && names_in_path(info) {
            return Err(ApiError::path_not_found());
        }
        // What kube's go-restful routes refuse before any handler: a method the path has no
        // route for, a PATCH body of another type, an `Accept` no route produces.
        if let Some(routes) = crate::machinery::restful::resource_routes(&def, info) {
            crate::machinery::restful::select(
                &routes,
                &crate::machinery::restful::Incoming {
                    method: &request.method,
                    content_type: request.content_type.as_deref(),
                    accept: request.accept.as_deref(),
                    body_len: request.body.len(),
                    content_length_sent: request.content_length_sent,
                },
            )?;
        }
        // The all-namespaces path of a namespaced resource serves only LIST and WATCH, as
        // kube registers it; anything else there would act on every namespace at once.
        if def.namespaced
            && info.namespace.is_empty()
            && !matches!(info.verb.as_str(), "list" | "watch")
        {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                &info.verb,
            ));
        }
        // `/api/v1/namespaces/<name>` resolves with namespace = name, as in kube; every other
        // cluster-scoped resource under a namespace path does not exist.
        let namespace_object =
            def.group.is_empty() && def.plural == "namespaces" && info.namespace == info.name;
        if !def.namespaced && !info.namespace.is_empty() && !namespace_object {
            return Err(ApiError::path_not_found());
        }
        let verb = info.verb.as_str();
        if let Some(handler) = def.virtual_handler.clone() {
            return self.create_virtual(&def, handler.as_ref(), request).await;
        }
        if let Some(handler) = def.subresource_handler(&info.subresource).cloned() {
            return self
                .create_subresource(&def, handler.as_ref(), request)
                .await;
        }
        if info.subresource == "scale" {
            return self.scale(&def, request).await;
        }
        if info.subresource.is_empty() && !def.supports_verb(verb) {
            return Err(ApiError::method_not_supported(&def.group_resource(), verb));
        }
        match verb {
            "get" => self.get(&def, request).await,
            "list" => self.list(&def, request).await,
            "watch" => self.watch(&def, request).await,
            "create" => self.create(&def, request).await,
            "update" => self.update(&def, request).await,
            "patch" => self.patch(&def, request).await,
            "delete" => self.delete(&def, request).await,
            "deletecollection" => self.delete_collection(&def, request).await,
            other => Err(ApiError::method_not_supported(&def.group_resource(), other)),
        }
    }

    /// Waits until the cache holds every write the store has acknowledged, for reads that
    /// must be consistent (kube's "consistent reads from cache").
    async fn sync_cache(&self) -> ApiResult<u64> {
        let revision = self.store().current_revision().await.map_err(store_error)?;
        self.cacher
            .wait_for_revision(revision, self.options.cache_wait)
            .await
            .map_err(store_error)?;
        Ok(revision)
    }

    /// Reads the current object from the cache, after syncing it with the store.
    pub async fn get_object(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> ApiResult<Value> {
        self.sync_cache().await?;
        let key = def.key(namespace, name);
        let cached = self
            .cacher
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&def.group_resource(), name))?;
        convert::served_value(def, &cached).await
    }

    /// The first served resource with this group and plural name (any version).
    pub fn find(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.served
            .load()
            .list
            .iter()
            .find(|r| r.group == group && r.plural == plural)
            .cloned()
    }
}

/// Authenticators read Secrets and ServiceAccounts from the watch cache through this.
impl kubegate_policy::authn::lookup::ObjectLookup for Registry {
    fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let def = self.find(group, resource)?;
        let cached = self.cacher.get(&def.key(namespace, name))?;
        client_value(&def, &cached.bytes).ok()
    }
}

/// Whether the request's path names an object (`.../<resource>/<name>[/<subresource>]`), as
/// opposed to a list or watch whose name only comes from its `metadata.name` field selector.
fn names_in_path(info: &RequestInfo) -> bool {
    if info.name.is_empty() {
        return false;
    }
    let mut segments = info.path.split('/').filter(|s| !s.is_empty());
    // `api/<version>` or `apis/<group>/<version>`, then the deprecated `watch` prefix.
    let skip = if info.api_prefix == "api" { 2 } else { 3 };
    let mut rest = segments.by_ref().skip(skip).peekable();
    if rest.peek() == Some(&"watch") {
        rest.next();
    }
    if rest.peek() == Some(&"namespaces") && info.resource != "namespaces" {
        rest.next();
        rest.next();
    }
    // The resource, then a name if the path has one.
    rest.nth(1).is_some()
}

/// A stored object (cached JSON bytes) in the shape `def` serves.
pub(crate) fn client_value(def: &ResourceDef, bytes: &[u8]) -> ApiResult<Value> {
    let value: Value = serde_json::from_slice(bytes).map_err(ApiError::internal)?;
    Ok(if def.strategy.converts_storage() {
        def.strategy.decode_stored(value)?
    } else {
        value
    })
}

/// Cached bytes as `def` serves them: the same bytes unless the resource converts.
pub(crate) fn client_bytes(def: &ResourceDef, bytes: &bytes::Bytes) -> ApiResult<bytes::Bytes> {
    if !def.strategy.converts_storage() {
        return Ok(bytes.clone());
    }
    let value = client_value(def, bytes)?;
    Ok(bytes::Bytes::from(
        serde_json::to_vec(&value).map_err(ApiError::internal)?,
    ))
}

/// A cached object as `def` serves it, its conversion kept with the object when the strategy
/// allows ([`crate::resource::Strategy::conversion_id`]).
pub(crate) fn served_bytes(
    def: &ResourceDef,
    object: &crate::storage::cacher::CachedObject,
) -> ApiResult<bytes::Bytes> {
    if let Some(key) = &object.corrupt {
        return Err(corrupt_object(key, &object.bytes));
    }
    match def.strategy.conversion_id() {
        0 => client_bytes(def, &object.bytes),
        id => object
            .conversions
            .get_or_convert(id, &object.bytes, || client_bytes(def, &object.bytes)),
    }
}

/// kube's answer to a stored value it cannot decode (`storage.NewCorruptObjError`, interpreted
/// as an internal error), in its words.
pub(crate) fn corrupt_object(key: &str, stored: &[u8]) -> ApiError {
    let reason = match serde_json::from_slice::<serde_json::Value>(stored) {
        Err(e) => e.to_string(),
        Ok(_) => "the stored value is not a JSON object with object metadata".to_string(),
    };
    ApiError::internal(format!(
        "StorageError: corrupt object, Code: 6, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {reason}"
    ))
}

/// Maps a storage failure to its API status.
pub(crate) fn store_error(error: StoreError) -> ApiError {
    match error {
        // kube's words, as its cacher and etcd store give them.
        StoreError::Compacted { .. } => {
            ApiError::resource_expired("The resourceVersion for the provided list is too old.")
        }
        StoreError::FutureRevision { requested, current } => ApiError::timeout(format!(
            "Timeout: Too large resource version: {requested}, current: {current}"
        )),
        StoreError::Unavailable(message) => ApiError::service_unavailable(message),
        // kube's `ErrorToAPIStatus` of etcd's error: a 500 with its text and no reason.
        StoreError::TooLarge(message) => ApiError::new(500, "", message),
        other => ApiError::internal(other),
    }
}

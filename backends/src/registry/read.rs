//! GET, LIST and WATCH, served from the watch cache with kube's `resourceVersion` rules:
//! unset = consistent (wait for the cache to hold every acknowledged write), `0` = any cached
//! state, `N` with `resourceVersionMatch=NotOlderThan` (default) = at least N, `Exact` = at N.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use super::encode::{self, ListMeta};
use super::meta::meta_field;
use super::{store_error, Registry};
use crate::api::{ApiRequest, ApiResponse, WatchStream};
use crate::machinery::go_quote;
use crate::machinery::negotiation::{negotiate_output, MediaType, Negotiated};
use crate::machinery::protobuf;
use crate::machinery::selectors::{FieldSelector, LabelSelector};
use crate::machinery::table::{self, IncludeObject};
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::cacher::{CacheEventKind, CachedObject};
use crate::storage::Revision;

/// How long a watch of a definition that was replaced or removed goes on delivering the
/// events already written (kube's CRD handler waits at least a second before tearing a
/// CRD's storage down).
const REPLACED_WATCH_GRACE: Duration = Duration::from_secs(1);

/// How long before a watch's deadline its last bookmark goes out (kube's cache watcher).
const PRE_DEADLINE_BOOKMARK: Duration = Duration::from_secs(2);

/// How long a read at a future resourceVersion waits for the cache (kube: 3 s).
const FUTURE_REVISION_WAIT: Duration = Duration::from_secs(3);

/// kube's answer to a read at a resourceVersion the server has not reached: 504 with a
/// `ResourceVersionTooLarge` cause and a retry hint.
fn too_large_resource_version(requested: Revision, current: Revision) -> ApiError {
    // `NewTimeoutError` puts `Timeout: ` before the message.
    let mut error = ApiError::timeout(format!(
        "Timeout: Too large resource version: {requested}, current: {current}"
    ));
    error.details = Some(Box::new(crate::status::StatusDetails {
        causes: vec![crate::status::StatusCause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        }],
        retry_after_seconds: Some(1),
        ..Default::default()
    }));
    error
}

/// How a request asked for its read to relate to a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadAt {
    /// No resourceVersion: the latest acknowledged state.
    Consistent,
    /// `resourceVersion=0`: whatever the cache holds.
    Any,
    /// At least this revision.
    NotOlderThan(Revision),
    /// Exactly this revision.
    Exact(Revision),
}

/// kube's `ValidateListOptions` for a LIST (not a watch): every cause, in kube's order.
fn validate_list_options(request: &ApiRequest) -> ApiResult<()> {
    use crate::status::{field_forbidden, field_not_supported};
    let rv = request.param("resourceVersion").unwrap_or("");
    let matching = request.param("resourceVersionMatch").unwrap_or("");
    let mut causes = Vec::new();
    if !matching.is_empty() {
        const FIELD: &str = "resourceVersionMatch";
        if rv.is_empty() {
            causes.push(field_forbidden(
                FIELD,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !request.param("continue").unwrap_or("").is_empty() {
            causes.push(field_forbidden(
                FIELD,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matching != "Exact" && matching != "NotOlderThan" {
            causes.push(field_not_supported(
                FIELD,
                matching,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if matching == "Exact" && rv == "0" {
            causes.push(field_forbidden(
                FIELD,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if request.param("sendInitialEvents").is_some() {
        causes.push(field_forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes))
    }
}

/// kube's `APIObjectVersioner.ParseResourceVersion`: `strconv.ParseUint` and its error as
/// a `resourceVersion` field error (the text kube's answers carry).
fn parse_resource_version(rv: &str) -> Result<Revision, String> {
    super::meta::parse_uint(rv).map_err(|error| {
        let quoted = kubegate_policy::quote::go_quote(rv);
        format!("resourceVersion: Invalid value: {quoted}: {error}")
    })
}

/// A GET's or watch's resourceVersion that does not parse: kube's storage returns the
/// versioner's error as it is, which its handlers answer as a 500 without a reason.
fn unparsable_for_read(message: String) -> ApiError {
    ApiError::new(500, "", message)
}

/// How a GET reads: kube's `GetOptions` has only `resourceVersion` (`resourceVersionMatch`
/// is a list option a GET ignores): none is the latest state, `0` whatever the cache holds,
/// and any other at least that revision, served from the latest.
fn get_read_at(request: &ApiRequest) -> ApiResult<ReadAt> {
    match request.param("resourceVersion").unwrap_or("") {
        "" => Ok(ReadAt::Consistent),
        "0" => Ok(ReadAt::Any),
        rv => parse_resource_version(rv)
            .map(ReadAt::NotOlderThan)
            .map_err(unparsable_for_read),
    }
}

fn read_at(request: &ApiRequest) -> ApiResult<ReadAt> {
    let rv = request.param("resourceVersion").unwrap_or("");
    let matching = request.param("resourceVersionMatch").unwrap_or("");
    if rv.is_empty() {
        if !matching.is_empty() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![crate::status::field_forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )],
            ));
        }
        return Ok(ReadAt::Consistent);
    }
    let revision = parse_resource_version(rv)
        .map_err(|e| ApiError::bad_request(format!("invalid resource version: {e}")))?;
    match matching {
        "" | "NotOlderThan" if revision == 0 => Ok(ReadAt::Any),
        "" | "NotOlderThan" => Ok(ReadAt::NotOlderThan(revision)),
        "Exact" if revision == 0 => Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::field_forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            )],
        )),
        "Exact" => Ok(ReadAt::Exact(revision)),
        other => Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::field_not_supported(
                "resourceVersionMatch",
                other,
                &["Exact", "NotOlderThan", ""],
            )],
        )),
    }
}

/// `includeObject`, a Table option: read (and refused when bad, as kube's
/// `ValidateTableOptions` refuses it) only when a Table is asked for; any other answer
/// ignores it, as kube's does.
pub(super) fn include_object(
    request: &ApiRequest,
    output: &Negotiated,
) -> ApiResult<IncludeObject> {
    if !output.as_table {
        return Ok(IncludeObject::default());
    }
    IncludeObject::parse(request.param("includeObject"))
}

/// The selectors of a list or watch.
struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn from_request(request: &ApiRequest, def: &ResourceDef) -> ApiResult<Filter> {
        // The parsers word their errors as kube's (`unable to parse requirement: ...` for a
        // requirement, `invalid field selector: ...`), which kube answers as they are.
        let labels = LabelSelector::parse(request.param("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(request.param("fieldSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let default_converter =
            def.field_selectors.is_empty() && def.strategy.default_field_labels();
        for requirement in fields.requirements() {
            let field = requirement.field.as_str();
            if default_converter {
                if field != "metadata.name" && field != "metadata.namespace" {
                    return Err(ApiError::bad_request(format!(
                        "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                        go_quote(field)
                    )));
                }
                continue;
            }
            let known = field == "metadata.name"
                || (field == "metadata.namespace" && def.namespaced)
                || def.field_extractor(field).is_some()
                || def.strategy.selectable_field(field);
            if !known {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
        }
        Ok(Filter { labels, fields })
    }

    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether matching reads the object's body (a type-specific field is selected).
    fn needs_body(&self) -> bool {
        self.fields
            .requirements()
            .iter()
            .any(|r| r.field != "metadata.name" && r.field != "metadata.namespace")
    }

    /// Whether matching reads the object as `def` serves it: a type-specific field, or labels
    /// of an object a CRD's webhook converts (it may change labels; kube matches what it
    /// served).
    fn reads_served(&self, def: &ResourceDef) -> bool {
        self.needs_body()
            || (!self.labels.is_empty() && def.strategy.webhook_conversion().is_some())
    }

    fn matches(&self, def: &ResourceDef, object: &CachedObject) -> bool {
        if !self.labels.is_empty() {
            let matched = if def.strategy.webhook_conversion().is_some() {
                let served: Option<Value> = super::served_bytes(def, object)
                    .ok()
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok());
                let labels: BTreeMap<String, String> = served
                    .as_ref()
                    .and_then(|o| o.pointer("/metadata/labels"))
                    .and_then(Value::as_object)
                    .map(|labels| {
                        labels
                            .iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                self.labels.matches(&labels)
            } else {
                self.labels.matches(&object.labels)
            };
            if !matched {
                return false;
            }
        }
        if self.fields.is_empty() {
            return true;
        }
        let (namespace, name) = split_key(def, &object.key);
        // Only parse the object when a type-specific field is asked for.
        let parsed: Option<Value> = if self.needs_body() {
            super::served_bytes(def, object)
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        } else {
            None
        };
        self.fields.matches(|field| match field {
            "metadata.name" => Some(name.to_string()),
            "metadata.namespace" => Some(namespace.to_string()),
            other => parsed
                .as_ref()
                .and_then(|p| match def.field_extractor(other) {
                    Some(extract) => extract(p),
                    None => def.strategy.selected_field_value(other, p),
                }),
        })
    }
}

/// `(namespace, name)` from a storage key.
fn split_key<'a>(def: &ResourceDef, key: &'a str) -> (&'a str, &'a str) {
    let rest = key
        .strip_prefix(def.storage_prefix.as_str())
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(key);
    if def.namespaced {
        rest.split_once('/').unwrap_or(("", rest))
    } else {
        ("", rest)
    }
}

/// How long a consistent read waits for the watch cache before reading the store itself
/// (kube's cacher waits 3 s for freshness, then delegates to etcd).
const CONSISTENT_READ_WAIT: Duration = Duration::from_secs(3);

impl Registry {
    /// Whether the watch cache holds every write the store has acknowledged, waiting up to
    /// [`CONSISTENT_READ_WAIT`]; false when it is later than that (its watch stalled on a
    /// member that hangs, or it re-lists): a consistent read then goes to the store, so a
    /// slow cache costs a read seconds, not a 503.
    async fn cache_is_fresh(&self) -> ApiResult<bool> {
        let started = tokio::time::Instant::now();
        // On etcd the current revision comes from a watch's progress; a stalled watch must
        // not hold the read longer than the cache may (the store's own reads still answer).
        let revision =
            match tokio::time::timeout(CONSISTENT_READ_WAIT, self.store().current_revision()).await
            {
                Ok(revision) => revision.map_err(store_error)?,
                Err(_) => {
                    tracing::warn!("the store's current revision is late; reading the store");
                    return Ok(false);
                }
            };
        let left = CONSISTENT_READ_WAIT.saturating_sub(started.elapsed());
        match self.cacher.wait_for_revision(revision, left).await {
            Ok(()) => Ok(true),
            Err(error) => {
                tracing::warn!(%error, "the watch cache is late; reading the store");
                Ok(false)
            }
        }
    }

    /// The current object at `key`, from the cache when it is fresh, else from the store.
    async fn consistent_get(&self, key: &str) -> ApiResult<Option<Arc<CachedObject>>> {
        if self.cache_is_fresh().await? {
            return Ok(self.cacher.get(key));
        }
        self.cacher.read_through(key).await.map_err(store_error)
    }

    /// Brings the cache to the revision the read needs.
    async fn prepare_read(&self, at: ReadAt) -> ApiResult<()> {
        match at {
            ReadAt::Consistent => {
                self.sync_cache().await?;
            }
            ReadAt::Any => {}
            ReadAt::NotOlderThan(rev) | ReadAt::Exact(rev) => {
                self.cacher
                    .wait_for_revision(rev, FUTURE_REVISION_WAIT)
                    .await
                    .map_err(|_| too_large_resource_version(rev, self.cacher.revision()))?;
            }
        }
        Ok(())
    }

    pub(super) async fn get(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        let at = get_read_at(request)?;
        let info = &request.info;
        let key = def.key(&info.namespace, &info.name);
        let cached = match at {
            ReadAt::Consistent => self.consistent_get(&key).await?,
            at => {
                self.prepare_read(at).await?;
                self.cacher.get(&key)
            }
        }
        .ok_or_else(|| ApiError::not_found(&def.group_resource(), &info.name))?;
        let bytes = if info.subresource.is_empty() || info.subresource == "status" {
            super::convert::prepare(def, &[&cached]).await?;
            super::served_bytes(def, &cached)?
        } else {
            return Err(ApiError::method_not_supported(&def.group_resource(), "get"));
        };
        encode::object_response(200, def, bytes, &output, include_object(request, &output)?)
    }

    pub(super) async fn list(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        validate_list_options(request)?;
        let filter = Filter::from_request(request, def)?;
        timeout_seconds(request)?;
        let limit =
            usize::try_from(request.int_param("limit")?.unwrap_or(0).max(0)).unwrap_or(usize::MAX);
        let prefix = def.collection_prefix(&request.info.namespace);
        let mut continued = None;
        let (at, start_after) = match request.param("continue").filter(|c| !c.is_empty()) {
            Some(token) => {
                // kube's store takes `resourceVersion=0` along with a continue token.
                if request
                    .param("resourceVersion")
                    .is_some_and(|rv| !rv.is_empty() && rv != "0")
                {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let token = encode::decode_continue(token)?;
                continued = Some(token.start.clone());
                let at = match Revision::try_from(token.rv) {
                    Ok(rev) => ReadAt::Exact(rev),
                    // A token kube handed back with a 410: read on at the latest revision.
                    Err(_) => ReadAt::Consistent,
                };
                (at, Some(format!("{prefix}{}", token.start)))
            }
            // kube's legacy rule: a limited list at a resourceVersion with no match given is
            // read at exactly that revision.
            None => match read_at(request)? {
                ReadAt::NotOlderThan(rev)
                    if limit > 0
                        && request
                            .param("resourceVersionMatch")
                            .unwrap_or("")
                            .is_empty() =>
                {
                    (ReadAt::Exact(rev), None)
                }
                at => (at, None),
            },
        };
        // A consistent LIST reads the store when the cache is late, as a GET does; so does a
        // continued page whose revision the cache has not reached (kube sends continued pages
        // to etcd).
        let through_store = match at {
            ReadAt::Consistent => !self.cache_is_fresh().await?,
            ReadAt::Exact(rev) if continued.is_some() => self
                .cacher
                .wait_for_revision(rev, CONSISTENT_READ_WAIT)
                .await
                .is_err(),
            _ => false,
        };
        if at != ReadAt::Consistent && !through_store {
            self.prepare_read(at).await?;
        }
        let at_revision = match at {
            ReadAt::Exact(rev) => Some(rev),
            _ => None,
        };
        let listed = if through_store {
            self.cacher
                .list_through(&prefix, start_after.as_deref(), at_revision)
                .await
        } else {
            self.cacher
                .list_at(&prefix, start_after.as_deref(), at_revision)
                .await
        };
        let (items, revision) = listed.map_err(|e| match e {
                crate::storage::StoreError::Compacted { .. } if continued.is_some() => {
                    // kube's `handleCompactedErrorForPaging`: the 410 carries a token that
                    // goes on from the same key at the latest revision.
                    let mut expired = ApiError::resource_expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.");
                    let start = continued.as_deref().unwrap_or_default();
                    expired.continue_token =
                        Some(encode::encode_continue(encode::LATEST, start).into());
                    expired
                }
                other => store_error(other),
            })?;
        // kube serves `resourceVersion=0` lists from the cache in full, ignoring `limit`.
        let limit = if at == ReadAt::Any { 0 } else { limit };
        // Objects a CRD's webhook must convert: all of them when the selector reads fields of
        // the served version, otherwise only the page's (below).
        if filter.reads_served(def) {
            super::convert::prepare(def, &items).await?;
        }
        let mut selected: Vec<Arc<CachedObject>> = Vec::new();
        let mut continue_token = None;
        let mut remaining = None;
        for (index, object) in items.iter().enumerate() {
            if !filter.matches(def, object) {
                continue;
            }
            selected.push(object.clone());
            if limit > 0 && selected.len() == limit {
                // As kube's cacher: more follows when any object follows the page's last,
                // whether or not it matches (the next page may then be empty).
                if index + 1 < items.len() {
                    let start = object
                        .key
                        .strip_prefix(prefix.as_str())
                        .unwrap_or(&object.key);
                    continue_token = Some(encode::encode_continue(
                        i64::try_from(revision).unwrap_or(i64::MAX),
                        start,
                    ));
                    if filter.is_empty() {
                        remaining = Some((items.len() - index - 1) as i64);
                    }
                }
                break;
            }
        }
        super::convert::prepare(def, &selected).await?;
        let meta = ListMeta {
            resource_version: revision,
            continue_token,
            remaining,
        };
        if output.as_table {
            let mut keyed = selected
                .iter()
                .map(|o| {
                    let object: Value = serde_json::from_slice(&super::served_bytes(def, o)?)
                        .map_err(ApiError::internal)?;
                    let key = def.strategy.table_sort_key(&object);
                    Ok((key, encode::table_row(def, object)))
                })
                .collect::<ApiResult<Vec<_>>>()?;
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            let rows = keyed.into_iter().map(|(_, row)| row).collect();
            let body = table::table(
                &def.columns,
                rows,
                &revision.to_string(),
                meta.continue_token.as_deref(),
                meta.remaining,
                include_object(request, &output)?,
            );
            return encode::json_value_response(200, &body, &output);
        }
        let item_bytes: Vec<Bytes> = selected
            .iter()
            .map(|o| super::served_bytes(def, o))
            .collect::<ApiResult<_>>()?;
        if output.as_partial_metadata {
            if output.as_partial_list == Some(false) {
                return Err(ApiError::not_acceptable(format!(
                    "you requested PartialObjectMetadata, but the requested object is a list ({})",
                    encode::go_type_name(def, true)
                )));
            }
            let list = encode::partial_list(&item_bytes, &meta)?;
            return encode::json_value_response(200, &list, &output);
        }
        let body = encode::list_body(def, &item_bytes, &meta);
        encode::object_response_list(body, &output)
    }

    pub(super) async fn watch(
        &self,
        def: &Arc<ResourceDef>,
        request: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let output = negotiate_output(request.accept.as_deref(), true, || def.has_protobuf())?;
        // kube's `NegotiateOutputMediaTypeStream`: the client's first choice must have a
        // stream serializer, which YAML has not (it does not move on to the next choice).
        if output.media == MediaType::Yaml {
            return Err(ApiError::not_acceptable(
                "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch",
            ));
        }
        // Negotiation offers protobuf only for what has a protobuf form; should a kind ever
        // lack one, the watch is refused before it starts rather than mid-stream.
        if output.media == MediaType::Protobuf
            && !output.as_partial_metadata
            && !protobuf::encodes(&def.api_version(), &def.kind)
        {
            return Err(ApiError::not_acceptable(format!(
                "{} cannot be streamed as {}; accept application/json",
                def.group_resource(),
                protobuf::CONTENT_TYPE
            )));
        }
        let mut filter = Filter::from_request(request, def)?;
        // A watch on one object (`/namespaces/x/configmaps/app?watch=1`) is a watch on the
        // collection filtered by that name; a field selector may only narrow it further.
        let name = &request.info.name;
        if !name.is_empty() {
            match filter.fields.single_name() {
                Some(selected) if selected == name => {}
                Some(_) => {
                    return Err(ApiError::bad_request(
                        "fieldSelector metadata.name doesn't match requested name",
                    ))
                }
                None if filter.fields.is_empty() => {
                    filter.fields = FieldSelector::parse(&format!("metadata.name={name}"))
                        .map_err(ApiError::bad_request)?;
                }
                None => {
                    return Err(ApiError::bad_request(
                        "fieldSelector metadata.name doesn't match requested name",
                    ))
                }
            }
        }
        let include = include_object(request, &output)?;
        let bookmarks = request.flag("allowWatchBookmarks");
        let (at, send_initial) = watch_options(request)?;
        let timeout = watch_timeout(request, self.options.min_watch_timeout)?;
        let prefix = def.collection_prefix(&request.info.namespace);
        // Initial state: synthetic ADDED events for every matching object when the client
        // asked for "get state and start at most recent" (no resourceVersion), "start at
        // any" (`0`), or `sendInitialEvents=true` (the watch-list protocol).
        let initial = match (send_initial, at) {
            (Some(flag), _) => flag,
            (None, ReadAt::Consistent) | (None, ReadAt::Any) => true,
            (None, _) => false,
        };
        let encoder = FrameEncoder {
            def: def.clone(),
            output: output.clone(),
            include,
            headers_sent: std::sync::atomic::AtomicBool::new(false),
        };
        // kube answers 200 and sends one ERROR event with the Status when a watch cannot start:
        // 410 for a revision the cache no longer reaches back to, and, for the watch-list
        // protocol only, 504 (ResourceVersionTooLarge) when the cache does not reach the asked
        // revision within a few seconds.
        let refused = |error: ApiError| {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let _ = tx.try_send(encoder.error(&error));
            Ok(ApiResponse::Watch(WatchStream {
                content_type: encoder.content_type(),
                headers: Vec::new(),
                frames: rx,
            }))
        };
        let (snapshot, from, mut watcher) = if initial {
            match self.prepare_read(at).await {
                Ok(()) => {}
                Err(error) if send_initial == Some(true) => return refused(error),
                Err(error) => return Err(error),
            }
            self.cacher.list_and_watch(&prefix)
        } else {
            let from = match at {
                ReadAt::NotOlderThan(r) | ReadAt::Exact(r) => r,
                _ => self.cacher.revision(),
            };
            // A revision the cache has not reached yet is no error: kube registers the watch,
            // which delivers the events after it whenever they come.
            match self.cacher.watch(&prefix, from) {
                Ok(w) => (Vec::new(), from, w),
                Err(crate::storage::StoreError::Compacted { requested, oldest }) => {
                    return refused(ApiError::resource_expired(format!(
                        "too old resource version: {requested} ({oldest})"
                    )));
                }
                Err(e) => return Err(store_error(e)),
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(WATCH_FRAMES);
        let mut tx = WatchSender::new(tx);
        // A custom resource's watch ends when its CRD's definitions are replaced, as kube's
        // CRD handler tears the old storage (and its watches) down.
        let replaced: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            if def.strategy.is_custom_resource() {
                Box::pin(self.replaced(def))
            } else {
                Box::pin(std::future::pending())
            };
        let def = def.clone();
        let bookmark_interval = self.options.bookmark_interval;
        let content_type = encoder.content_type();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now()
                .checked_add(timeout)
                .unwrap_or_else(|| tokio::time::Instant::now() + MAX_WATCH_TIMEOUT);
            // kube's watch cache holds objects converted by the CRD's webhook; one that
            // cannot be converted ends the watch with the error (the client lists again).
            if let Err(error) = super::convert::prepare(&def, &snapshot).await {
                let _ = tx.send(encoder.error(&error)).await;
                return;
            }
            for object in snapshot.iter().filter(|o| filter.matches(&def, o)) {
                if tx.send(encoder.frame("ADDED", object)).await.is_err() {
                    return;
                }
            }
            if initial && bookmarks && send_initial == Some(true) {
                let frame = encoder.bookmark(from, true);
                if tx.send(frame).await.is_err() {
                    return;
                }
            }
            let mut ticker = tokio::time::interval(bookmark_interval);
            ticker.tick().await;
            // kube's watcher also sends a bookmark 2 s before its deadline, so the client
            // resumes from the freshest revision it can.
            let mut last_bookmark = deadline.checked_sub(PRE_DEADLINE_BOOKMARK);
            let mut replaced = replaced;
            // Once the definition is replaced or gone (a CRD deleted or changed), the events
            // already written (its objects' deletions) still go out for a moment, as kube
            // tears a CRD's storage down only after a grace period.
            let mut ending: Option<tokio::time::Instant> = None;
            loop {
                let end_of_grace = async {
                    match ending {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let before_deadline = async {
                    match last_bookmark {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => return,
                    _ = &mut replaced, if ending.is_none() => {
                        ending = Some(tokio::time::Instant::now() + REPLACED_WATCH_GRACE);
                    }
                    _ = end_of_grace => return,
                    _ = before_deadline, if bookmarks => {
                        last_bookmark = None;
                        let revision = watcher.bookmark_revision();
                        if revision < from { continue; }
                        if tx.send(encoder.bookmark(revision, false)).await.is_err() { return; }
                    }
                    _ = tx.closed() => return,
                    _ = ticker.tick(), if bookmarks => {
                        // A watch from a revision the cache has not reached yet gets no
                        // bookmark from before it (kube's watcher drops older events).
                        let revision = watcher.bookmark_revision();
                        if revision < from { continue; }
                        let frame = encoder.bookmark(revision, false);
                        if tx.send(frame).await.is_err() { return; }
                    }
                    event = watcher.next() => {
                        let Some(event) = event else { return };
                        let event = match event {
                            Ok(e) => e,
                            // A watcher that fell behind is closed, as kube closes it, and so
                            // is every watcher when the cache lists its store again (kube's
                            // `terminateAllWatchers`): the client re-watches from its last
                            // resourceVersion and, if that is gone, gets the 410 "too old
                            // resource version" a watch gets.
                            Err(
                                crate::storage::StoreError::Unavailable(_)
                                | crate::storage::StoreError::Compacted { .. },
                            ) => return,
                            Err(e) => {
                                let _ = tx.send(encoder.error(&store_error(e))).await;
                                return;
                            }
                        };
                        let converted = match &event.prev {
                            Some(prev) => super::convert::prepare(&def, &[&*event.object, &**prev]).await,
                            None => super::convert::prepare(&def, &[&*event.object]).await,
                        };
                        if let Err(error) = converted {
                            let _ = tx.send(encoder.error(&error)).await;
                            return;
                        }
                        let now = filter.matches(&def, &event.object);
                        let before = event.prev.as_ref().is_some_and(|p| filter.matches(&def, p));
                        let frame = match event.kind {
                            CacheEventKind::Added if now => encoder.frame("ADDED", &event.object),
                            CacheEventKind::Modified if now && before => encoder.frame("MODIFIED", &event.object),
                            CacheEventKind::Modified if now => encoder.frame("ADDED", &event.object),
                            // An object that stops matching leaves the client's view: kube
                            // sends its previous state, stamped with this event's version.
                            CacheEventKind::Modified if before => match &event.prev {
                                Some(prev) => encoder.frame_at("DELETED", prev, event.revision),
                                None => continue,
                            },
                            CacheEventKind::Deleted if now => encoder.frame("DELETED", &event.object),
                            _ => continue,
                        };
                        if tx.send(frame).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(ApiResponse::Watch(WatchStream {
            content_type,
            headers: Vec::new(),
            frames: rx,
        }))
    }
}

/// The longest a watch may be asked to live; longer requests are capped.
const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// How many encoded frames a watch may have waiting for its client.
const WATCH_FRAMES: usize = 256;
/// How many bytes of encoded frames a watch may have waiting for its client (one frame more
/// always fits, however large): each watcher encodes its own copy of an event, so this, not
/// the frame count, bounds what a client that stops reading holds.
pub(super) const WATCH_BUFFER_BYTES: usize = 1 << 20;
/// How long a watch waits for its client to take frames before it is closed as unresponsive,
/// as kube's cacher closes a watcher that cannot keep up ("Forcing watcher close due to
/// unresponsiveness"): the client watches again from its last resourceVersion.
pub(super) const UNRESPONSIVE_WATCH: Duration = Duration::from_secs(5);

/// The sending side of a watch's frames, bounded in bytes as well as in frames: the sizes of
/// the frames still in the channel are known from its free capacity and the sizes last sent.
struct WatchSender {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    /// Sizes of the frames sent, newest last; only as many as may still be queued are kept.
    sizes: std::collections::VecDeque<usize>,
}

/// The watch ends: its client went away or stopped reading.
struct WatchClosed;

impl WatchSender {
    fn new(tx: tokio::sync::mpsc::Sender<Bytes>) -> WatchSender {
        WatchSender {
            tx,
            sizes: std::collections::VecDeque::new(),
        }
    }

    /// Bytes of the frames still waiting for the client.
    fn queued_bytes(&mut self) -> usize {
        let queued = self.tx.max_capacity() - self.tx.capacity();
        while self.sizes.len() > queued {
            self.sizes.pop_front();
        }
        self.sizes.iter().sum()
    }

    /// Queues `frame`, waiting while the client has a full buffer's worth to take; a client
    /// that takes nothing for [`UNRESPONSIVE_WATCH`] ends the watch.
    async fn send(&mut self, frame: Bytes) -> Result<(), WatchClosed> {
        let mut waited = Duration::ZERO;
        let mut last_queued = usize::MAX;
        const POLL: Duration = Duration::from_millis(20);
        loop {
            let queued = self.queued_bytes();
            if queued == 0 || queued + frame.len() <= WATCH_BUFFER_BYTES {
                break;
            }
            // A client that takes frames is making progress, however slowly: only time
            // without any counts.
            if queued < last_queued {
                waited = Duration::ZERO;
                last_queued = queued;
            }
            if waited >= UNRESPONSIVE_WATCH {
                tracing::debug!(queued, "closing a watch whose client stopped reading");
                return Err(WatchClosed);
            }
            if self.tx.is_closed() {
                return Err(WatchClosed);
            }
            tokio::time::sleep(POLL).await;
            waited += POLL;
        }
        let size = frame.len();
        let sent = tokio::time::timeout(UNRESPONSIVE_WATCH, self.tx.send(frame)).await;
        match sent {
            Ok(Ok(())) => {
                self.sizes.push_back(size);
                Ok(())
            }
            _ => Err(WatchClosed),
        }
    }

    async fn closed(&self) {
        self.tx.closed().await
    }
}

/// The `timeoutSeconds` list option (0 when absent). kube decodes it into `ListOptions` for
/// lists and watches alike, so a value that is not an integer is a 400 for both, though
/// only a watch uses it.
fn timeout_seconds(request: &ApiRequest) -> ApiResult<i64> {
    Ok(request.int_param("timeoutSeconds")?.unwrap_or(0))
}

/// `timeoutSeconds` as kube reads it: absent or 0 means the server's spread default; a
/// negative one has already run out (the watch ends at once).
fn watch_timeout(request: &ApiRequest, min: Duration) -> ApiResult<Duration> {
    let requested = timeout_seconds(request)?;
    if requested > 0 {
        return Ok(Duration::from_secs(requested as u64).min(MAX_WATCH_TIMEOUT));
    }
    if requested < 0 {
        return Ok(Duration::ZERO);
    }
    // kube spreads watch lifetimes between the minimum and twice it.
    Ok(min.mul_f64(1.0 + rand_fraction()))
}

/// Validates a watch's resourceVersion options as kube's `validateWatchOptions` does and
/// returns where the watch starts and `sendInitialEvents`.
fn watch_options(request: &ApiRequest) -> ApiResult<(ReadAt, Option<bool>)> {
    let send_initial = request.optional_flag("sendInitialEvents");
    // kube's `validateWatchOptions`, every cause in its order. `sendInitialEvents` without
    // bookmarks is allowed: the initial events come without the bookmark that ends them.
    let matching = request.param("resourceVersionMatch").unwrap_or("");
    let mut causes = Vec::new();
    if send_initial.is_some() && matching != "NotOlderThan" {
        causes.push(crate::status::field_forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !matching.is_empty() {
        if send_initial.is_none() {
            causes.push(crate::status::field_forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if matching != "NotOlderThan" {
            causes.push(crate::status::field_not_supported(
                "resourceVersionMatch",
                matching,
                &["NotOlderThan"],
            ));
        }
        if !request.param("continue").unwrap_or("").is_empty() {
            causes.push(crate::status::field_forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes));
    }
    let rv = request.param("resourceVersion").unwrap_or("");
    let at = match rv {
        "" => ReadAt::Consistent,
        "0" => ReadAt::Any,
        rv => ReadAt::NotOlderThan(parse_resource_version(rv).map_err(unparsable_for_read)?),
    };
    Ok((at, send_initial))
}

/// An object's bytes with `metadata.resourceVersion` replaced (rare paths only: it parses).
fn with_revision(bytes: &Bytes, revision: Revision) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<Value>(bytes) else {
        return bytes.clone();
    };
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(revision.to_string()));
    }
    serde_json::to_vec(&value)
        .map(Bytes::from)
        .unwrap_or_else(|_| bytes.clone())
}

/// Encodes watch events for one watch: JSON objects, one-row Tables, or protobuf frames.
struct FrameEncoder {
    def: Arc<ResourceDef>,
    output: Negotiated,
    include: IncludeObject,
    /// Whether a Table event has gone out: kube sends the column definitions with the first
    /// one only (`NoHeaders` after it).
    headers_sent: std::sync::atomic::AtomicBool,
}

impl FrameEncoder {
    fn content_type(&self) -> String {
        // kube's watch handler names the serializer's media type alone, a Table's too.
        if self.output.media == MediaType::Protobuf {
            protobuf::WATCH_CONTENT_TYPE.to_string()
        } else {
            encode::JSON.to_string()
        }
    }

    /// One event frame from a cached object (converted by the CRD's webhook beforehand).
    fn frame(&self, kind: &str, object: &CachedObject) -> Bytes {
        match super::served_bytes(&self.def, object) {
            Ok(bytes) => self.served_frame(kind, bytes),
            Err(error) => self.error(&error),
        }
    }

    /// [`FrameEncoder::frame`] with the object's resourceVersion replaced by `revision`.
    fn frame_at(&self, kind: &str, object: &CachedObject, revision: Revision) -> Bytes {
        match super::served_bytes(&self.def, object) {
            Ok(bytes) => self.served_frame(kind, with_revision(&bytes, revision)),
            Err(error) => self.error(&error),
        }
    }

    fn served_frame(&self, kind: &str, bytes: Bytes) -> Bytes {
        let plain = !self.output.as_table && !self.output.as_partial_metadata;
        if plain && self.output.media != MediaType::Protobuf {
            return encode::watch_frame(kind, &bytes);
        }
        let Ok(object) = serde_json::from_slice::<Value>(&bytes) else {
            return encode::watch_frame(kind, &bytes);
        };
        if self.output.as_partial_metadata {
            return self.value_frame(kind, &table::partial_object_metadata(&object));
        }
        if self.output.media == MediaType::Protobuf {
            return self.value_frame(kind, &object);
        }
        let rv = meta_field(&object, "resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let row = encode::table_row(&self.def, object);
        let mut table = table::table(&self.def.columns, vec![row], &rv, None, None, self.include);
        if self
            .headers_sent
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            table["columnDefinitions"] = Value::Null;
        }
        encode::watch_frame(kind, table.to_string().as_bytes())
    }

    /// A frame for a value that is not a stored object (bookmarks, errors). A protobuf
    /// stream only ever carries protobuf frames: a value that cannot be encoded goes out as
    /// an ERROR event with its 500 `Status` (a JSON frame there would read as a length).
    fn value_frame(&self, kind: &str, value: &Value) -> Bytes {
        if self.output.media == MediaType::Protobuf {
            match protobuf::encode_watch_event(kind, value) {
                Ok(frame) => return Bytes::from(frame),
                Err(e) => {
                    tracing::warn!(error = %e.message, "encoding a protobuf watch frame");
                    let status = ApiError::internal(e.message).to_status();
                    return protobuf::encode_watch_event("ERROR", &status)
                        .map(Bytes::from)
                        .unwrap_or_default();
                }
            }
        }
        encode::watch_frame(kind, value.to_string().as_bytes())
    }

    fn error(&self, error: &ApiError) -> Bytes {
        self.value_frame("ERROR", &error.to_status())
    }

    fn bookmark(&self, revision: Revision, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({
                "k8s.io/initial-events-end": "true",
                "kubernetes.io/initial-events-list-blueprint": self.list_blueprint(),
            });
        }
        // Transformed as the events are (kube's watch encoder transforms every object), so a
        // metadata-only or Table watch never carries the resource's own kind, which a
        // protobuf stream of a custom resource could not encode.
        let object = if self.output.as_table {
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": null, "rows": null})
        } else if self.output.as_partial_metadata {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
        } else {
            json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": metadata})
        };
        self.value_frame("BOOKMARK", &object)
    }
}

impl FrameEncoder {
    /// kube's watch-list blueprint: an empty list of the resource's version, encoded as the
    /// watch is (JSON as Go's encoder writes it, or protobuf) and then in base64. client-go's
    /// watch-list client builds its list result from it.
    fn list_blueprint(&self) -> String {
        use base64::Engine;
        let (api_version, kind) = if self.output.as_partial_metadata {
            ("meta.k8s.io/v1".to_string(), "PartialObjectMetadataList")
        } else {
            (self.def.api_version(), self.def.list_kind.as_str())
        };
        let list = json!({"kind": kind, "apiVersion": api_version, "metadata": {}, "items": null});
        let encoded = match self.output.media {
            MediaType::Protobuf => protobuf::encode(&list).ok(),
            _ => None,
        };
        let encoded = encoded.unwrap_or_else(|| {
            let mut json = list.to_string().into_bytes();
            json.push(b'\n');
            json
        });
        base64::engine::general_purpose::STANDARD.encode(encoded)
    }
}

/// A pseudo-random fraction in [0, 1) for spreading watch timeouts; not security relevant.
fn rand_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

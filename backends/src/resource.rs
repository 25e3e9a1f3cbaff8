//! The resource data model: everything the generic registry, discovery and OpenAPI need to
//! know about one served resource (group, version, names, scope, verbs, subresources, schema,
//! table columns, field selectors) and its [`Strategy`] (defaulting, validation, what a
//! create or update may set). The built-in core server and (later) the CRD server both
//! produce [`ResourceDef`]s and hand them to one registry.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::machinery::validation::NameRule;
use crate::status::{GroupResource, StatusCause};

/// The verbs most resources support.
pub const STANDARD_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// A Table column definition (`meta.k8s.io/v1 TableColumnDefinition`).
#[derive(Debug, Clone)]
pub struct TableColumn {
    pub name: Cow<'static, str>,
    /// `string`, `integer`, `date`, ...
    pub type_: Cow<'static, str>,
    pub format: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// 0 shows by default; 1 only with `-o wide`.
    pub priority: u32,
}

/// A subresource a resource serves (`status`, `finalize`, `scale`, `token`, ...).
#[derive(Debug, Clone)]
pub struct SubresourceDef {
    pub name: &'static str,
    /// The kind the subresource reads and writes (the parent kind for `status`).
    pub kind: String,
    pub verbs: Vec<&'static str>,
}

/// Extracts the value of a field selector label (`type`, `involvedObject.name`) from an object.
pub type FieldExtractor = fn(&Value) -> Option<String>;

/// The behaviour of one resource type under create and update (kube's `RESTCreateStrategy`
/// and `RESTUpdateStrategy`), plus its Table rows.
pub trait Strategy: Send + Sync {
    /// Clears or defaults fields before a create (e.g. resets `status`, merges `stringData`).
    fn prepare_for_create(&self, _object: &mut Value) {}

    /// The fields (JSON pointers into `object`) the server assigns after kube's field manager
    /// has recorded a write: a Service's allocations (kube's BeginCreate/BeginUpdate), a
    /// namespace's finalizer. A write is recorded with their values as the client sent them,
    /// so no writer owns what the server chose. Default: none.
    fn server_assigned_fields(&self, _object: &Value) -> Vec<String> {
        Vec::new()
    }

    /// A create or update this strategy prepared for `namespace`/`name` did not reach the
    /// store (a dry run, a refusal after preparing, a failed write): what it set aside for
    /// the object is given back (kube's allocation transaction reverting). Default: nothing.
    fn write_abandoned(&self, _namespace: &str, _name: &str) {}

    /// Carries fields over from the old object on update (e.g. keeps `status` on a main
    /// resource update).
    fn prepare_for_update(&self, _object: &mut Value, _old: &Value) {}

    /// Carries fields over from the old object on an update of the `status` subresource
    /// (everything but `status` comes from the old object by default).
    fn prepare_for_status_update(&self, object: &mut Value, old: &Value) {
        keep_all_but_status(object, old);
    }

    /// Carries fields over on an update of the `finalize` subresource (namespaces): only
    /// `spec.finalizers` comes from the request.
    fn prepare_for_finalize(&self, object: &mut Value, old: &Value) {
        let finalizers = object.pointer("/spec/finalizers").cloned();
        let rv = object.pointer("/metadata/resourceVersion").cloned();
        let mut next = old.clone();
        if let Some(map) = next.as_object_mut() {
            let spec = map
                .entry("spec")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(spec) = spec.as_object_mut() {
                match finalizers {
                    Some(f) => {
                        spec.insert("finalizers".into(), f);
                    }
                    None => {
                        spec.remove("finalizers");
                    }
                }
            }
            if let (Some(meta), Some(rv)) =
                (map.get_mut("metadata").and_then(Value::as_object_mut), rv)
            {
                meta.insert("resourceVersion".into(), rv);
            }
        }
        *object = next;
    }

    /// Decode-level checks kube makes before validation (e.g. base64 in `Secret.data`):
    /// failures are 400 BadRequest, not 422.
    fn check_decode(&self, _object: &Value) -> Result<(), crate::status::ApiError> {
        Ok(())
    }

    /// Whether objects are stored in another shape than this version serves (events.k8s.io
    /// events are stored as core/v1 events). When false, cached bytes are served as they are.
    fn converts_storage(&self) -> bool {
        false
    }

    /// The stored shape of an object written through this resource.
    fn encode_for_storage(&self, object: Value) -> Value {
        object
    }

    /// This resource's shape of a stored object. Fails only for an object that needed the
    /// CRD's conversion webhook ([`Strategy::webhook_conversion`]) and did not get it.
    fn decode_stored(&self, object: Value) -> Result<Value, crate::status::ApiError> {
        Ok(object)
    }

    /// A stored object as kube's storage decoder leaves it before any conversion: pruned and
    /// defaulted with the schema of the version it was stored as (what a conversion webhook
    /// is sent).
    fn default_stored(&self, object: Value) -> Value {
        object
    }

    /// A stored object the CRD's conversion webhook converted to this version, as kube's
    /// converter leaves it: pruned with this version's schema (no defaults of its own).
    fn decode_converted(&self, object: Value) -> Value {
        object
    }

    /// The CRD conversion webhook objects stored in other versions are converted with before
    /// [`Strategy::decode_stored`] (`registry::convert` calls it, asynchronously, and keeps
    /// the results in the conversion cache the synchronous read paths serve from).
    fn webhook_conversion(&self) -> Option<&crate::core::crd_conversion::WebhookConversion> {
        None
    }

    /// When not 0, [`Strategy::decode_stored`]'s output may be cached with the stored object
    /// under this id (`storage::cacher::Conversions`): it must depend on nothing but the stored
    /// bytes, and no other strategy, now or later, may use the same id.
    fn conversion_id(&self) -> u64 {
        0
    }

    /// How `metadata.name` is validated (most types: DNS-1123 subdomain).
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Subdomain
    }

    /// Called when a delete is requested. Returns true when the object must stay until
    /// something finishes (e.g. a namespace's `spec.finalizers`), after marking it (e.g. phase
    /// `Terminating`). `metadata.finalizers` are handled by the registry for every type.
    fn begin_delete(&self, _object: &mut Value) -> bool {
        false
    }

    /// Whether an object being deleted, whose `metadata.finalizers` are empty, may now go.
    fn ready_to_delete(&self, _object: &Value) -> bool {
        true
    }

    /// Whether DELETE answers with the deleted object rather than a success `Status`.
    fn return_deleted_object(&self) -> bool {
        false
    }

    /// Whether metadata is validated by kube's core `ValidateObjectMeta`, which also refuses
    /// finalizer names that are neither standard (`kubernetes`, `orphan`,
    /// `foregroundDeletion`) nor domain-qualified: every built-in kind but core/v1 Events
    /// (legacy validation), APIServices and CRDs (apimachinery's generic validation) and
    /// custom resources (warned about instead).
    fn kube_finalizer_names(&self) -> bool {
        true
    }

    /// Type-specific validation on create; names and metadata are validated by the registry.
    fn validate(&self, _object: &Value) -> Vec<StatusCause> {
        Vec::new()
    }

    /// Type-specific validation on update (immutability and the like).
    fn validate_update(&self, object: &Value, _old: &Value) -> Vec<StatusCause> {
        self.validate(object)
    }

    /// Validation of a `status` write (kube's status strategies validate the status alone for
    /// some kinds: a Service's load balancer, a CRD's accepted names, a namespace's phase).
    fn validate_status_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        self.validate_update(object, old)
    }

    /// Validation of a `finalize` write (a namespace's).
    fn validate_finalize_update(&self, object: &Value, old: &Value) -> Vec<StatusCause> {
        self.validate_update(object, old)
    }

    /// Validation of an update through `subresource` (`""` for the object itself): the
    /// hook for that subresource. Strategies override the hooks, not this.
    fn validate_subresource_update(
        &self,
        subresource: &str,
        object: &Value,
        old: &Value,
    ) -> Vec<StatusCause> {
        match subresource {
            "status" => self.validate_status_update(object, old),
            "finalize" => self.validate_finalize_update(object, old),
            _ => self.validate_update(object, old),
        }
    }

    /// Whether an update (PUT) of an object that does not exist creates it, answered 201
    /// (kube's `AllowCreateOnUpdate`). Such a create is judged as a create: strategy, validation
    /// and [`WriteAdmission::admit_create_on_update`], which must authorize it, since the
    /// request was only authorized for `update`.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Whether unknown field selectors are refused by kube's default converter
    /// (`DefaultMetaV1FieldSelectorConversion`: `metadata.name` and `metadata.namespace` on
    /// every kind, cluster-scoped ones included, and `"x" is not a known field selector`), as
    /// for every kind that registers no converter of its own. Kinds with their own field
    /// selectors (`ResourceDef::field_selectors`) always have their own converter; custom
    /// resources have apiextensions' (`field label not supported: x`).
    fn default_field_labels(&self) -> bool {
        true
    }

    /// Whether `label` is one of the resource's own selectable fields (a custom resource's
    /// `selectableFields`), beyond the fixed extractors of `ResourceDef::field_selectors`.
    fn selectable_field(&self, _label: &str) -> bool {
        false
    }

    /// The value of selectable field `label` of `object`, as a field selector compares it.
    fn selected_field_value(&self, _label: &str, _object: &Value) -> Option<String> {
        None
    }

    /// Whether request bodies are decoded as kube decodes unstructured objects (custom
    /// resources): a body must name its `kind` (its `apiVersion` may be left to the URL).
    fn requires_kind(&self) -> bool {
        false
    }

    /// Whether an update (PUT) without `metadata.resourceVersion` overwrites whatever is stored
    /// (kube's `AllowUnconditionalUpdate`); when not, it is refused with a 422.
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// Whether a change of labels alone bumps `metadata.generation` too (an EndpointSlice's,
    /// whose labels say which Service it serves).
    fn generation_follows_labels(&self) -> bool {
        false
    }

    /// Whether `metadata.generation` is bumped when anything outside metadata and status changes.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Drops the fields the resource's schema does not know and returns their paths, for a
    /// resource whose schema is its own (custom resources); `None` leaves it to the
    /// registry's k8s-openapi schemas.
    fn prune_unknown_fields(&self, _object: &mut Value) -> Option<Vec<String>> {
        None
    }

    /// A `Warning` for every request to this resource (a deprecated custom resource version).
    fn deprecation_warning(&self) -> Option<&str> {
        None
    }

    /// `Warning`s about an object a create (`old` is `None`) or update is about to write, once
    /// it validated: kube's `WarningsOnCreate` and `WarningsOnUpdate` (values in forms a
    /// future release refuses, fields the object's type ignores).
    fn warnings(&self, _object: &Value, _old: Option<&Value>) -> Vec<String> {
        Vec::new()
    }

    /// Store work a create (`old` is `None`) or update must do once [`Strategy::begin_write`]
    /// passed, before the object is written: claims on values that servers sharing the store
    /// must not hand out twice (a Service's cluster IPs and node ports). `None` when there is
    /// none, so other kinds box no future. A dry run only looks.
    fn claim<'a>(
        &'a self,
        _store: &'a dyn crate::storage::Store,
        _object: &'a Value,
        _old: Option<&'a Value>,
        _dry_run: bool,
    ) -> Option<futures::future::BoxFuture<'a, Result<(), crate::status::ApiError>>> {
        None
    }

    /// Store work after an update (`written` is the new object) or a delete (`written` is
    /// `None`) of `old` reached the store: kube's `AfterUpdate`/`AfterDelete`, which give back
    /// what the object let go (a Service's claimed cluster IPs and node ports), before the
    /// request is answered, so the client's next write finds them free.
    fn after_write<'a>(
        &'a self,
        _store: &'a dyn crate::storage::Store,
        _written: Option<&'a Value>,
        _old: &'a Value,
    ) -> Option<futures::future::BoxFuture<'a, ()>> {
        None
    }

    /// Puts a validated object in its canonical form before it is written (kube's
    /// `Canonicalize`, e.g. Endpoints' repacked subsets): after validation, so errors name
    /// the fields as the client sent them.
    fn canonicalize(&self, _object: &mut Value) {}

    /// What a create (`old` is `None`) or update must still pass once the object validated,
    /// before it is written: kube's REST storage `BeginCreate`/`BeginUpdate` (a Service's
    /// cluster IPs and node ports, whose conflicts and exhausted ranges answer as kube's
    /// allocators do, after any validation error).
    fn begin_write(
        &self,
        _object: &Value,
        _old: Option<&Value>,
    ) -> Result<(), crate::status::ApiError> {
        Ok(())
    }

    /// Whether the resource's definition is being deleted (a custom resource whose CRD is
    /// terminating): its objects are still served, so their finalizers can be removed, but
    /// no new one is created, and discovery lists no create, patch or update.
    fn terminating(&self) -> bool {
        false
    }

    /// Records that the resource's definition is (or is no longer) being deleted, for a
    /// strategy whose [`Strategy::terminating`] can change without the definition being
    /// built again.
    fn mark_terminating(&self, _terminating: bool) {}

    /// Whether this is a custom resource: kube serves those from apiextensions' own handler,
    /// not from go-restful routes (see `machinery::restful`).
    fn is_custom_resource(&self) -> bool {
        false
    }

    /// The `autoscaling/v1` Scale of `object`, for a resource with a `scale` subresource
    /// (custom resources); `None` when the resource has none. With it, whether the spec's
    /// replicas were there (the Scale says 0 when not); an error when a replicas field or
    /// the selector is not what it must be (kube's unstructured accessor error).
    fn scale_of(&self, _object: &Value) -> Option<Result<(Value, bool), String>> {
        None
    }

    /// The CRD's `specReplicasPath` (`.spec.replicas`), which kube's scale errors name.
    fn scale_spec_replicas_path(&self) -> &str {
        ""
    }

    /// `object` with `scale`'s `spec.replicas` written into it.
    fn with_scale(
        &self,
        _object: &Value,
        _scale: &Value,
    ) -> Option<crate::status::ApiResult<Value>> {
        None
    }

    /// Whether `application/strategic-merge-patch+json` applies (not to custom resources,
    /// which have no patch strategies).
    fn supports_strategic_merge_patch(&self) -> bool {
        true
    }

    /// The cells after the NAME column, one per [`ResourceDef::columns`] entry after the first.
    fn table_cells(&self, _object: &Value) -> Vec<Value> {
        Vec::new()
    }

    /// Where an object's row goes in a list's Table, for kinds whose kube printer sorts its
    /// rows (FlowSchemas: by matching precedence, then name); `None` keeps the list's order.
    /// Only the Table changes: a JSON list keeps the storage order, as in kube.
    fn table_sort_key(&self, _object: &Value) -> Option<(i64, String)> {
        None
    }
}

/// A strategy with no type-specific behaviour.
pub struct DefaultStrategy;
impl Strategy for DefaultStrategy {}

/// One served resource.
#[derive(Clone)]
pub struct ResourceDef {
    /// API group (`""` for the legacy core group).
    pub group: String,
    pub version: String,
    /// Plural resource name, lower case (`configmaps`).
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub verbs: Vec<&'static str>,
    pub subresources: Vec<SubresourceDef>,
    /// The OpenAPI definition name of the kind (`io.k8s.api.core.v1.ConfigMap`).
    pub definition: String,
    /// Table columns; the first is NAME for every type but events (whose row the strategy
    /// builds whole, see [`ResourceDef::row_starts_with_name`]).
    pub columns: Vec<TableColumn>,
    /// Type-specific field selectors besides `metadata.name` and `metadata.namespace`.
    pub field_selectors: Vec<(&'static str, FieldExtractor)>,
    /// Strategic-merge-patch directives for list fields: (dotted field path from the object
    /// root, strategy such as `merge` or `merge,retainKeys`, merge key or `""`). ObjectMeta's
    /// entries are added by the registry.
    pub patch_meta: &'static [(&'static str, &'static str, &'static str)],
    /// The storage key prefix (`/<group or "core">/<resource>`), shared by every version.
    pub storage_prefix: String,
    pub strategy: Arc<dyn Strategy>,
    /// For resources that are never stored (TokenReview, SelfSubjectReview, access
    /// reviews): answers a create. Such resources support only `create`.
    pub virtual_handler: Option<Arc<dyn VirtualHandler>>,
    /// Handlers of subresources that are not views of the stored object (e.g.
    /// `serviceaccounts/token`): (subresource name, handler).
    pub subresource_handlers: Vec<(&'static str, Arc<dyn SubresourceHandler>)>,
    /// Checks a client's write against who is making it (RBAC's escalation prevention).
    pub admission: Option<Arc<dyn WriteAdmission>>,
    /// The kind's OpenAPI v3 schema when k8s-openapi has none (a CRD version's
    /// `openAPIV3Schema`).
    pub openapi_schema: Option<Arc<Value>>,
    /// The kind's shape for server-side apply and managed fields, built from its schema on
    /// the first write that needs it.
    pub field_model: Arc<std::sync::OnceLock<Arc<crate::machinery::managed::TypeModel>>>,
    /// Go's JSON round trip of the kind (built-in kinds only), found on its first write.
    pub go_shaper: Arc<std::sync::OnceLock<Option<crate::machinery::protobuf::GoShaper>>>,
}

/// Judges a client's create or update by who makes it, once the object is final and valid and
/// before it is stored (kube's policy-based storage wrappers, such as RBAC's escalation
/// checks). Writes kubegate makes itself (controllers, bootstrap) are not judged.
#[async_trait::async_trait]
pub trait WriteAdmission: Send + Sync {
    /// `old` is the stored object on update, `None` on create. An error is answered as is.
    async fn admit(
        &self,
        user: &kubegate_policy::UserInfo,
        object: &Value,
        old: Option<&Value>,
    ) -> crate::status::ApiResult<()>;

    /// Judges a create made by an update request ([`Strategy::allow_create_on_update`]). The
    /// request was authorized for `update` only: kube's update handler also asks the authorizer
    /// whether the user may `create` the object (`withAuthorization`), which only write
    /// admission, holding an authorizer, can do. The default judges it as a plain create and
    /// does not authorize it.
    async fn admit_create_on_update(
        &self,
        user: &kubegate_policy::UserInfo,
        object: &Value,
    ) -> crate::status::ApiResult<()> {
        self.admit(user, object, None).await
    }
}

/// Serves a create of a resource that is computed, not stored (kube's "virtual" resources
/// such as reviews). Gets the decoded, type-checked body; returns the object to answer with
/// (status filled in), which the registry encodes with code 201.
#[async_trait::async_trait]
pub trait VirtualHandler: Send + Sync {
    async fn create(
        &self,
        request: &crate::api::ApiRequest,
        object: Value,
    ) -> crate::status::ApiResult<Value>;
}

/// Serves a create (POST) on a subresource of a stored object, e.g. a TokenRequest on
/// `serviceaccounts/<name>/token`. Gets the parent object as stored (current version) and the
/// decoded body; returns the object to answer with (code 201).
#[async_trait::async_trait]
pub trait SubresourceHandler: Send + Sync {
    /// The kind of the subresource's request and response (`TokenRequest`) and its
    /// apiVersion (`authentication.k8s.io/v1`).
    fn kind(&self) -> (&'static str, &'static str);

    /// The answer, and the warnings to send with it.
    async fn create(
        &self,
        request: &crate::api::ApiRequest,
        parent: &Value,
        body: Value,
    ) -> crate::status::ApiResult<(Value, Vec<String>)>;
}

impl std::fmt::Debug for ResourceDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceDef")
            .field("group", &self.group)
            .field("version", &self.version)
            .field("plural", &self.plural)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl ResourceDef {
    /// Whether objects of this kind have a protobuf form (every built-in kind kubegate serves;
    /// custom resources have none, as in kube).
    pub fn has_protobuf(&self) -> bool {
        crate::machinery::protobuf::encodes(&self.api_version(), &self.kind)
    }

    /// `v1` or `coordination.k8s.io/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.plural.clone())
    }

    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }

    pub fn supports_verb(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// The verbs discovery lists: all of them, less create, patch and update while the
    /// resource's definition is being deleted (kube's discovery controller).
    pub fn discovery_verbs(&self) -> Vec<&'static str> {
        if !self.strategy.terminating() {
            return self.verbs.clone();
        }
        self.verbs
            .iter()
            .copied()
            .filter(|v| !matches!(*v, "create" | "patch" | "update"))
            .collect()
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        // Built by hand: this runs for every single-object request and `format!` costs more.
        let mut key =
            String::with_capacity(self.storage_prefix.len() + namespace.len() + name.len() + 2);
        key.push_str(&self.storage_prefix);
        key.push('/');
        if self.namespaced {
            key.push_str(namespace);
            key.push('/');
        }
        key.push_str(name);
        key
    }

    /// The storage prefix of a collection (all namespaces when `namespace` is empty), always
    /// ending in `/` so `configmaps` never matches `configmapsfoo`.
    pub fn collection_prefix(&self, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("{}/{}/", self.storage_prefix, namespace)
        } else {
            format!("{}/", self.storage_prefix)
        }
    }

    /// Whether Table rows start with the object's name (added by the registry) followed by
    /// the strategy's cells; otherwise the strategy returns the whole row.
    pub fn row_starts_with_name(&self) -> bool {
        self.columns.first().is_some_and(|c| c.name == "Name")
    }

    pub fn subresource_handler(&self, name: &str) -> Option<&Arc<dyn SubresourceHandler>> {
        self.subresource_handlers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, h)| h)
    }

    pub fn field_extractor(&self, label: &str) -> Option<FieldExtractor> {
        self.field_selectors
            .iter()
            .find(|(l, _)| *l == label)
            .map(|(_, f)| *f)
    }
}

/// The NAME column every Table starts with.
pub fn name_column() -> TableColumn {
    TableColumn {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names".into(),
        priority: 0,
    }
}

/// The AGE column (`metadata.creationTimestamp`).
pub fn age_column() -> TableColumn {
    TableColumn {
        name: "Age".into(),
        type_: "string".into(),
        format: "".into(),
        description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
        priority: 0,
    }
}

/// The status update of kinds whose kube strategy resets only `spec` (Services,
/// Namespaces): `object` keeps what it says, metadata included, but `old`'s `spec`.
pub fn keep_old_spec(object: &mut Value, old: &Value) {
    if let Some(map) = object.as_object_mut() {
        match old.get("spec") {
            Some(spec) => map.insert("spec".into(), spec.clone()),
            None => map.remove("spec"),
        };
    }
}

/// The default status update: `object` becomes `old` with `object`'s `status` (and the
/// `resourceVersion` it was written against).
pub fn keep_all_but_status(object: &mut Value, old: &Value) {
    let status = object.get("status").cloned();
    let mut next = old.clone();
    if let Some(map) = next.as_object_mut() {
        match status {
            Some(s) => {
                map.insert("status".into(), s);
            }
            None => {
                map.remove("status");
            }
        }
        if let (Some(meta), Some(new_meta)) = (
            map.get_mut("metadata").and_then(Value::as_object_mut),
            object.get("metadata").and_then(Value::as_object),
        ) {
            if let Some(rv) = new_meta.get("resourceVersion") {
                meta.insert("resourceVersion".into(), rv.clone());
            }
        }
    }
    *object = next;
}

//! The OpenAPI documents kube-apiserver publishes, generated from the served [`ResourceDef`]s and
//! k8s-openapi's schemas: the v3 discovery index (`/openapi/v3`), one OpenAPI 3.0 document per
//! group-version (`/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`, plus the small
//! `api`, `apis`, `apis/<group>` and `version` documents) and the Swagger 2.0 document
//! (`/openapi/v2`, as JSON and as the gnostic protobuf client-go asks for).
//!
//! Everything is built once by [`OpenApi::build`]; requests are answered from the stored bytes
//! with the ETag kube-openapi computes (upper-case hex SHA-512 of the body). Remote extension API
//! servers' documents are merged in as kube-aggregator does by [`OpenApi::merged`] /
//! [`OpenApi::merge`] (module `merge`), from a [`LocalOpenApi`] built once.
//!
//! kubectl reads these documents: `kubectl explain` and the client-side apply patcher find a
//! kind through `x-kubernetes-group-version-kind` on `components.schemas`, the apply patcher
//! takes strategic-merge keys from `x-kubernetes-patch-merge-key`/`-strategy`, and kubectl's
//! validation skips client-side checks when the PATCH operation of a kind lists the
//! `fieldValidation` query parameter. The schemas come from k8s-openapi, corrected where it
//! differs from kube (it marks `metadata` required, drops some required fields, lacks the
//! `x-kubernetes-*` list and patch extensions, and describes `IntOrString`/`Quantity`
//! differently); the corrections are tables extracted from the `k8s.io/api` v0.33 Go markers.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha512};

use crate::discovery::subresource_gvk;
use crate::resource::{ResourceDef, SubresourceDef};

mod convert;
mod enums;
mod merge;
pub use convert::v2_to_v3;
pub use merge::{LocalOpenApi, RemoteOpenApi};

/// Whether a `/openapi/v3/<group-version>` request's `Accept` header allows the JSON
/// document, as kube-openapi's `HandleGroupVersion` negotiates it: no header is `*/*`, and
/// the first clause (goautoneg's order) naming `application/json` or a wildcard wins. kube
/// also serves the protobuf form; kubegate passes over protobuf clauses, so a client that
/// accepts only protobuf gets kube's 406 (empty body) rather than JSON it cannot read.
pub fn v3_document_accepts_json(accept: Option<&str>) -> bool {
    let header = accept
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or("*/*");
    crate::machinery::negotiation::parse_accept(header)
        .iter()
        .any(|c| {
            matches!(c.type_.as_str(), "application" | "*")
                && matches!(c.subtype.as_str(), "json" | "*")
        })
}

/// The Kubernetes release whose types (k8s-openapi `v1_33`) the documents describe.
const KUBE_VERSION: &str = "v1.33.0";

/// The `Content-Type` kube answers protobuf `/openapi/v2` requests with (for both the
/// `...spec.v2@v1.0+protobuf` and the `...spec.v2.v1.0+protobuf` Accept forms).
pub const CONTENT_TYPE_V2_PROTOBUF: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const V3_REF_PREFIX: &str = "#/components/schemas/";
const V2_REF_PREFIX: &str = "#/definitions/";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// What every kube route produces (`negotiation.MediaTypesForSerializer`).
const MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
/// Produced by list and watch routes: the media types plus their streaming forms.
const ALL_MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
];
const CONSUMES_ANY: &[&str] = &["*/*"];
/// The patch types kube's PATCH routes accept, in kube's order (CBOR apply is feature-gated off).
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];
/// The patch types of a custom resource's PATCH routes: apiextensions-apiserver's OpenAPI
/// builder lists no strategic merge patch (its handler refuses one), which is what makes
/// kubectl's client-side apply and diff fall back to a merge patch.
const PATCH_TYPES_WITHOUT_STRATEGIC: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// The documents requests are answered from. The v3 documents are stored bytes; the Swagger
/// document (hundreds of kilobytes per custom resource, twice: JSON and protobuf) is assembled
/// on its first request and kept until the next change, as kube-openapi's lazy handler does, so
/// that a server whose clients read only v3 never holds it.
#[derive(Debug, Clone)]
pub struct OpenApi {
    v3_index: Doc,
    v3: BTreeMap<String, Doc>,
    v2: Arc<merge::LazyV2>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Doc {
    body: Bytes,
    /// The quoted ETag header value, `"<HEX>"`.
    etag: String,
}

impl Doc {
    fn new(value: &Value) -> Doc {
        // Serializing a `Value` cannot fail (every key is a string).
        let mut body = serde_json::to_vec(value).unwrap_or_default();
        // Kept for as long as it is served: without this, a third of the documents' memory
        // is the unused capacity the buffer grew into.
        body.shrink_to_fit();
        Doc::from_bytes(Bytes::from(body))
    }

    /// A document served as these bytes (a remote backend's, kept as fetched).
    fn from_bytes(body: Bytes) -> Doc {
        let etag = format!("\"{}\"", sha512_hex(&body));
        Doc { body, etag }
    }

    fn hash(&self) -> &str {
        self.etag.trim_matches('"')
    }
}

/// kube-openapi's ETag: the upper-case hex SHA-512 of the served bytes.
fn sha512_hex(data: &[u8]) -> String {
    hex::encode_upper(Sha512::digest(data))
}

impl OpenApi {
    /// Builds every document from the served resources. Resources whose definition k8s-openapi
    /// does not know (custom resources) get an open object schema with standard metadata.
    pub fn build(resources: &[ResourceDef]) -> OpenApi {
        LocalOpenApi::build(resources).into_openapi()
    }

    /// Assembles the served documents: the `/openapi/v3` index lists every v3 document with its
    /// hash.
    fn from_parts(v3: BTreeMap<String, Doc>, v2: merge::LazyV2) -> OpenApi {
        let mut index = Map::new();
        for (key, doc) in &v3 {
            index.insert(
                key.clone(),
                json!({ "serverRelativeURL": server_relative_url(key, doc.hash()) }),
            );
        }
        OpenApi {
            v3_index: Doc::new(&json!({ "paths": index })),
            v3,
            v2: Arc::new(v2),
        }
    }

    /// The keys of every v3 document (`api/v1`, `apis/<group>/<version>`, ...), sorted: the
    /// paths of the `/openapi/v3` index.
    pub fn v3_keys(&self) -> impl Iterator<Item = &str> {
        self.v3.keys().map(String::as_str)
    }

    /// The `/openapi/v3` index and its quoted ETag.
    pub fn v3_index(&self) -> (&Bytes, &str) {
        (&self.v3_index.body, &self.v3_index.etag)
    }

    /// One v3 document by the path after `/openapi/v3/` (`api/v1`, `apis/coordination.k8s.io/v1`,
    /// `apis`, `version`, ...; a leading or trailing `/` is ignored) and its quoted ETag. The
    /// unquoted ETag is the `hash` query parameter of the index's `serverRelativeURL`: kube
    /// answers a request with a different `hash` with a 301 to [`Self::v3_server_relative_url`],
    /// and one with the right hash with `Cache-Control: public, immutable`.
    pub fn v3_group_version(&self, path_after_openapi_v3: &str) -> Option<(&Bytes, &str)> {
        self.v3
            .get(path_after_openapi_v3.trim_matches('/'))
            .map(|d| (&d.body, d.etag.as_str()))
    }

    /// The `/openapi/v3/<path>?hash=<HEX>` URL the index advertises for one document.
    pub fn v3_server_relative_url(&self, path_after_openapi_v3: &str) -> Option<String> {
        let key = path_after_openapi_v3.trim_matches('/');
        self.v3.get(key).map(|d| server_relative_url(key, d.hash()))
    }

    /// The Swagger 2.0 document (`/openapi/v2`, JSON) and its quoted ETag. The first call after
    /// a change assembles it (blocking: hundreds of milliseconds with hundreds of custom
    /// resources); see [`Self::v2_built`].
    pub fn v2(&self) -> (&Bytes, &str) {
        let (doc, _) = self.v2.get();
        (&doc.body, &doc.etag)
    }

    /// The Swagger 2.0 document as gnostic protobuf and its quoted ETag (the JSON one: kube
    /// serves both under one ETag with `Vary: Accept`). Answer with it, as
    /// [`CONTENT_TYPE_V2_PROTOBUF`], when the `Accept` header of `/openapi/v2` names
    /// `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` or
    /// `application/com.github.proto-openapi.spec.v2.v1.0+protobuf` before any JSON type.
    pub fn v2_protobuf(&self) -> (&Bytes, &str) {
        let (doc, protobuf) = self.v2.get();
        (protobuf, &doc.etag)
    }

    /// Whether the Swagger document has been assembled (someone asked for it): a caller
    /// replacing these documents can assemble the next ones ahead of the next request.
    pub fn v2_built(&self) -> bool {
        self.v2.is_built()
    }
}

/// A path and the routes under it.
type Paths = BTreeMap<String, Vec<Route>>;

/// The v3 documents to generate for `resources`: key, paths and `info.version`, in order.
fn plan_documents(resources: &[ResourceDef]) -> Vec<(String, Paths, &'static str)> {
    let mut by_gv: BTreeMap<(&str, &str), Vec<&ResourceDef>> = BTreeMap::new();
    for r in resources {
        by_gv
            .entry((r.group.as_str(), r.version.as_str()))
            .or_default()
            .push(r);
    }
    let mut plan = vec![
        ("api".to_string(), root_paths(true), "unversioned"),
        ("apis".to_string(), root_paths(false), "unversioned"),
        ("version".to_string(), version_paths(), "unversioned"),
    ];
    let groups: BTreeSet<&str> = by_gv
        .keys()
        .map(|(g, _)| *g)
        .filter(|g| !g.is_empty())
        .collect();
    for group in groups {
        plan.push((format!("apis/{group}"), group_paths(group), "unversioned"));
    }
    for ((group, version), defs) in &by_gv {
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        plan.push((key, group_version_paths(group, version, defs), KUBE_VERSION));
    }
    plan
}

/// A generated v3 document and a fingerprint of everything it was rendered from (its paths and
/// every definition it includes), so a rebuild can keep it when those are unchanged.
#[derive(Debug, Clone)]
struct V3Doc {
    inputs: u64,
    doc: Doc,
}

/// Generates the local v3 documents, taking each from `previous` when its inputs are the same:
/// a CRD change renders (and hashes) only its own group-version's document, so the others keep
/// their bytes and ETags, and a rebuild with hundreds of CRDs costs little.
fn generate_v3(
    resources: &[ResourceDef],
    previous: Option<&BTreeMap<String, V3Doc>>,
) -> BTreeMap<String, V3Doc> {
    let catalog = build_catalog(resources);
    // One key for the process: fingerprints are compared across builds.
    static HASHER: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let hasher = HASHER.get_or_init(std::collections::hash_map::RandomState::new);
    let mut definition_hashes: BTreeMap<&str, u64> = BTreeMap::new();
    let mut v3 = BTreeMap::new();
    for (key, paths, info) in plan_documents(resources) {
        let names = closure(&catalog, referenced_definitions(&paths));
        let mut inputs = hasher.build_hasher();
        info.hash(&mut inputs);
        paths.hash(&mut inputs);
        for name in &names {
            name.hash(&mut inputs);
            let definition = match catalog.get_key_value(name.as_str()) {
                Some((name, schema)) => {
                    *definition_hashes.entry(name.as_str()).or_insert_with(|| {
                        let mut h = hasher.build_hasher();
                        hash_value(schema, &mut h);
                        h.finish()
                    })
                }
                None => 0,
            };
            definition.hash(&mut inputs);
        }
        let inputs = inputs.finish();
        let doc = match previous.and_then(|p| p.get(&key)) {
            Some(kept) if kept.inputs == inputs => kept.doc.clone(),
            _ => Doc::new(&render_v3(&paths, &catalog, &names, info)),
        };
        v3.insert(key, V3Doc { inputs, doc });
    }
    v3
}

/// The Swagger document's parts: every path of every v3 document and the definitions catalog,
/// custom resources' schemas in the form kube publishes them in v2.
fn v2_inputs(resources: &[ResourceDef]) -> (BTreeMap<String, Vec<Route>>, BTreeMap<String, Value>) {
    let mut all_paths = BTreeMap::new();
    for (_, paths, _) in plan_documents(resources) {
        all_paths.extend(paths);
    }
    let mut catalog = build_catalog(resources);
    for r in resources.iter().filter(|r| r.openapi_schema.is_some()) {
        if let Some(schema) = catalog.get_mut(&r.definition) {
            to_structural_openapi_v2(schema);
        }
    }
    (all_paths, catalog)
}

/// apiextensions-apiserver's `ToStructuralOpenAPIV2`: what a CRD schema loses in OpenAPI v2
/// (which kubectl and v2 clients validate with): the junctors (`allOf`, `oneOf`, `anyOf`,
/// `not`); a nullable field's type, items and properties; the items and properties kept
/// under `x-kubernetes-preserve-unknown-fields`, and then an `array` type without items or
/// an `object` type there; nullable properties from `required`. Each node is changed before
/// its children, as kube's visitor does.
fn to_structural_openapi_v2(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    for junctor in ["allOf", "oneOf", "anyOf", "not"] {
        node.remove(junctor);
    }
    let flag = |node: &Map<String, Value>, key: &str| node.get(key) == Some(&Value::Bool(true));
    if flag(node, "nullable") {
        for key in ["type", "nullable", "items", "properties"] {
            node.remove(key);
        }
    }
    let preserves = flag(node, "x-kubernetes-preserve-unknown-fields");
    if preserves {
        node.remove("items");
        node.remove("properties");
    }
    let type_ = node.get("type").and_then(Value::as_str).unwrap_or("");
    if (type_ == "array" && !node.contains_key("items")) || (preserves && type_ == "object") {
        node.remove("type");
    }
    let nullable_properties: Vec<String> = node
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter(|(_, p)| p.get("nullable") == Some(&Value::Bool(true)))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = node.get_mut("required") {
        required.retain(|r| {
            !r.as_str()
                .is_some_and(|r| nullable_properties.iter().any(|n| n == r))
        });
    }
    if node
        .get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        == Some(&Value::Bool(true))
    {
        node.remove("required");
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        properties.values_mut().for_each(to_structural_openapi_v2);
    }
    if let Some(items) = node.get_mut("items") {
        to_structural_openapi_v2(items);
    }
    if let Some(additional) = node.get_mut("additionalProperties") {
        if additional.is_object() {
            to_structural_openapi_v2(additional);
        }
    }
}

/// Feeds a JSON value to a hasher, keys in document order (which the served bytes follow).
fn hash_value(value: &Value, state: &mut impl Hasher) {
    match value {
        Value::Null => state.write_u8(0),
        Value::Bool(b) => {
            state.write_u8(1);
            b.hash(state);
        }
        Value::Number(n) => {
            state.write_u8(2);
            n.to_string().hash(state);
        }
        Value::String(s) => {
            state.write_u8(3);
            s.hash(state);
        }
        Value::Array(items) => {
            state.write_u8(4);
            state.write_usize(items.len());
            items.iter().for_each(|v| hash_value(v, state));
        }
        Value::Object(map) => {
            state.write_u8(5);
            state.write_usize(map.len());
            for (k, v) in map {
                k.hash(state);
                hash_value(v, state);
            }
        }
    }
}

fn server_relative_url(key: &str, hash: &str) -> String {
    format!("/openapi/v3/{key}?hash={hash}")
}

// ---------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------

/// Declares the definitions k8s-openapi provides schemas for, as a lookup that adds one (and
/// everything it references) to a generator, plus the list of names for a test to check against
/// each type's `schema_name()`.
macro_rules! known_definitions {
    ($($name:literal => $ty:ty,)*) => {
        fn add_known_definition(generator: &mut SchemaGenerator, name: &str) -> bool {
            match name {
                $($name => {
                    // The returned `$ref` is not needed: the definition lands in the generator.
                    let _ = generator.subschema_for::<$ty>();
                    true
                })*
                _ => false,
            }
        }

        #[cfg(test)]
        const KNOWN_DEFINITIONS: &[(&str, fn() -> std::borrow::Cow<'static, str>)] = &[
            $(($name, <$ty as schemars::JsonSchema>::schema_name),)*
        ];
    };
}

known_definitions! {
    "io.k8s.api.core.v1.ConfigMap" => k8s_openapi::api::core::v1::ConfigMap,
    "io.k8s.api.core.v1.Secret" => k8s_openapi::api::core::v1::Secret,
    "io.k8s.api.core.v1.ServiceAccount" => k8s_openapi::api::core::v1::ServiceAccount,
    "io.k8s.api.core.v1.Service" => k8s_openapi::api::core::v1::Service,
    "io.k8s.api.core.v1.Endpoints" => k8s_openapi::api::core::v1::Endpoints,
    "io.k8s.api.core.v1.Event" => k8s_openapi::api::core::v1::Event,
    "io.k8s.api.core.v1.Namespace" => k8s_openapi::api::core::v1::Namespace,
    "io.k8s.api.core.v1.Binding" => k8s_openapi::api::core::v1::Binding,
    "io.k8s.api.events.v1.Event" => k8s_openapi::api::events::v1::Event,
    "io.k8s.api.coordination.v1.Lease" => k8s_openapi::api::coordination::v1::Lease,
    "io.k8s.api.discovery.v1.EndpointSlice" => k8s_openapi::api::discovery::v1::EndpointSlice,
    "io.k8s.api.rbac.v1.Role" => k8s_openapi::api::rbac::v1::Role,
    "io.k8s.api.rbac.v1.ClusterRole" => k8s_openapi::api::rbac::v1::ClusterRole,
    "io.k8s.api.rbac.v1.RoleBinding" => k8s_openapi::api::rbac::v1::RoleBinding,
    "io.k8s.api.rbac.v1.ClusterRoleBinding" => k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    "io.k8s.api.flowcontrol.v1.FlowSchema" => k8s_openapi::api::flowcontrol::v1::FlowSchema,
    "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration" =>
        k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
    "io.k8s.api.authentication.v1.TokenRequest" =>
        k8s_openapi::api::authentication::v1::TokenRequest,
    "io.k8s.api.authentication.v1.TokenReview" => k8s_openapi::api::authentication::v1::TokenReview,
    "io.k8s.api.authentication.v1.SelfSubjectReview" =>
        k8s_openapi::api::authentication::v1::SelfSubjectReview,
    "io.k8s.api.authorization.v1.SubjectAccessReview" =>
        k8s_openapi::api::authorization::v1::SubjectAccessReview,
    "io.k8s.api.authorization.v1.SelfSubjectAccessReview" =>
        k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
    "io.k8s.api.authorization.v1.LocalSubjectAccessReview" =>
        k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
    "io.k8s.api.authorization.v1.SelfSubjectRulesReview" =>
        k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
    "io.k8s.api.autoscaling.v1.Scale" => k8s_openapi::api::autoscaling::v1::Scale,
    "io.k8s.api.policy.v1.Eviction" => k8s_openapi::api::policy::v1::Eviction,
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Status,
    // Custom resources' server-side apply types their metadata with it, as kube merges the
    // static ObjectMeta schema into a CRD's models (`buildOpenAPIModelsForApply`).
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent<
            k8s_openapi::apimachinery::pkg::runtime::RawExtension,
        >,
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Patch,
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup,
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList,
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions" =>
        k8s_openapi::apimachinery::pkg::apis::meta::v1::APIVersions,
    "io.k8s.apimachinery.pkg.version.Info" => k8s_openapi::apimachinery::pkg::version::Info,
    "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService" =>
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition" =>
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
}

/// The meta types the paths of every document may reference.
const META_DEFINITIONS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
    "io.k8s.apimachinery.pkg.version.Info",
];

/// A generator whose `$ref`s point at `#/components/schemas/<kube name>` and that keeps `$ref`
/// siblings (descriptions) as they are: the v3 rendering wraps them in `allOf` the way
/// kube-openapi does, the v2 rendering keeps them, as kube's Swagger document does.
fn schema_generator() -> SchemaGenerator {
    SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
            s.transforms.clear();
            s.inline_subschemas = false;
        })
        .into_generator()
}

/// The kube-style schema of a built-in definition (`io.k8s.api.core.v1.ConfigMap`, meta types,
/// ...) and every definition it references, with kube's `x-kubernetes-*` extensions and required
/// fields. The first value is a `$ref` to the definition; `$ref`s are
/// `#/components/schemas/<name>` and keep their sibling descriptions (not wrapped in `allOf`).
/// `None` for names k8s-openapi has no schema for. Useful to look up strategic-merge keys.
pub fn schema_for_definition(name: &str) -> Option<(Value, Map<String, Value>)> {
    let mut generator = schema_generator();
    if !add_known_definition(&mut generator, name) {
        return None;
    }
    let mut defs: BTreeMap<String, Value> = generator.take_definitions(false).into_iter().collect();
    apply_kube_fixups(&mut defs);
    Some((
        json!({ "$ref": format!("{V3_REF_PREFIX}{name}") }),
        defs.into_iter().collect(),
    ))
}

/// The name of the list definition of a kind definition (`...v1.ConfigMap` → `...v1.ConfigMapList`).
fn list_definition(r: &ResourceDef) -> String {
    match r.definition.rsplit_once('.') {
        Some((package, _)) => format!("{package}.{}", r.list_kind),
        None => r.list_kind.clone(),
    }
}

/// The definition a subresource reads and writes: the parent's for `status`-like subresources,
/// the well-known kube types for the others (`None` when unknown).
fn subresource_definition(parent: &ResourceDef, sub: &SubresourceDef) -> Option<String> {
    if sub.kind == parent.kind {
        return Some(parent.definition.clone());
    }
    let (group, version, kind) = subresource_gvk(parent, sub);
    let package = match group.as_str() {
        "" => "core".to_string(),
        g => g.trim_end_matches(".k8s.io").to_string(),
    };
    if group.is_empty() && version.is_empty() {
        return None;
    }
    Some(format!("io.k8s.api.{package}.{version}.{kind}"))
}

/// All definitions any document may reference, keyed by kube name, refs as `#/components/schemas/`.
fn build_catalog(resources: &[ResourceDef]) -> BTreeMap<String, Value> {
    let mut generator = schema_generator();
    for name in META_DEFINITIONS {
        add_known_definition(&mut generator, name);
    }
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    let mut custom: BTreeMap<String, Value> = BTreeMap::new();
    for r in resources {
        if let Some(schema) = &r.openapi_schema {
            custom.insert(r.definition.clone(), custom_resource_schema(schema));
        } else if !add_known_definition(&mut generator, &r.definition) {
            unknown.insert(r.definition.clone(), r.kind.clone());
        }
        for sub in &r.subresources {
            if let Some(def) = subresource_definition(r, sub) {
                if !add_known_definition(&mut generator, &def) {
                    unknown.insert(def, sub.kind.clone());
                }
            }
        }
    }
    let mut defs: BTreeMap<String, Value> = generator.take_definitions(false).into_iter().collect();
    apply_kube_fixups(&mut defs);
    // Custom schemas first: a custom kind's `status` subresource names the kind itself.
    for (name, schema) in custom {
        defs.entry(name).or_insert(schema);
    }
    for (name, kind) in unknown {
        defs.entry(name)
            .or_insert_with(|| open_object_schema(&kind));
    }
    for r in resources {
        let list = list_definition(r);
        if let std::collections::btree_map::Entry::Vacant(slot) = defs.entry(list) {
            let schema = list_schema(slot.key(), r);
            slot.insert(schema);
        }
    }
    attach_group_version_kinds(&mut defs, resources);
    defs
}

fn api_version_property() -> Value {
    json!({
        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
        "type": "string"
    })
}

fn kind_property() -> Value {
    json!({
        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        "type": "string"
    })
}

/// The schema of a kind we have no schema for (a custom resource): standard type and object
/// metadata, anything else allowed.
fn open_object_schema(kind: &str) -> Value {
    json!({
        "description": format!("{kind} is served without a published schema; fields other than apiVersion, kind and metadata are not described."),
        "properties": {
            "apiVersion": api_version_property(),
            "kind": kind_property(),
            "metadata": {
                "$ref": format!("{V3_REF_PREFIX}{META}.ObjectMeta"),
                "default": {},
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
            }
        },
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A CRD version's `openAPIV3Schema` as kube publishes it: `apiVersion`, `kind` and
/// `metadata` (ObjectMeta) described whatever the schema says about them.
fn custom_resource_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if !schema.is_object() {
        schema = json!({"type": "object"});
    }
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema["properties"] = json!({});
    }
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert("apiVersion".into(), api_version_property());
        properties.insert("kind".into(), kind_property());
        properties.insert(
            "metadata".into(),
            json!({
                "$ref": format!("{V3_REF_PREFIX}{META}.ObjectMeta"),
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
            }),
        );
    }
    schema
}

/// `<Kind>List`: k8s-openapi has one generic `List<T>` without a schema, so lists are built here
/// with kube's descriptions where we have them.
fn list_schema(list_name: &str, r: &ResourceDef) -> Value {
    let (description, items, metadata) = KUBE_LIST_DESCRIPTIONS
        .iter()
        .find(|(name, ..)| *name == list_name)
        .map(|(_, d, i, m)| (d.to_string(), i.to_string(), m.to_string()))
        .unwrap_or_else(|| {
            (
                format!("{} is a list of {}", r.list_kind, r.kind),
                format!("List of {}.", r.plural),
                "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds".to_string(),
            )
        });
    json!({
        "description": description,
        "properties": {
            "apiVersion": api_version_property(),
            "items": {
                "description": items,
                "items": { "$ref": format!("{V3_REF_PREFIX}{}", r.definition), "default": {} },
                "type": "array"
            },
            "kind": kind_property(),
            "metadata": {
                "$ref": format!("{V3_REF_PREFIX}{META}.ListMeta"),
                "default": {},
                "description": metadata
            }
        },
        "required": ["items"],
        "type": "object"
    })
}

/// Makes k8s-openapi's schemas say what kube's say.
fn apply_kube_fixups(defs: &mut BTreeMap<String, Value>) {
    // k8s-openapi requires `metadata` wherever its Rust field is not optional, and drops some
    // fields kube requires (events.k8s.io `eventTime`); kube's lists win. Not a blanket
    // "metadata is never required": core/v1 Event does require it in kube.
    for (name, required) in KUBE_REQUIRED {
        if let Some(schema) = defs.get_mut(*name).and_then(Value::as_object_mut) {
            schema.insert("required".into(), json!(required));
        }
    }
    for schema in defs.values_mut() {
        if let Some(map) = schema.as_object_mut() {
            if map
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.is_empty())
            {
                map.remove("required");
            }
        }
    }
    // kube documents `object` on the property, not in the type description.
    if let Some(event) = defs.get_mut(&format!("{META}.WatchEvent")) {
        *event = json!({
            "description": "Event represents a single event to a watched resource.",
            "properties": {
                "object": {
                    "$ref": format!("{V3_REF_PREFIX}io.k8s.apimachinery.pkg.runtime.RawExtension"),
                    "description": "Object is:\n * If Type is Added or Modified: the new state of the object.\n * If Type is Deleted: the state of the object immediately before deletion.\n * If Type is Error: *Status is recommended; other types may make sense\n   depending on context."
                },
                "type": { "default": "", "type": "string" }
            },
            "required": ["type", "object"],
            "type": "object"
        });
    }
    for (name, property, extensions) in KUBE_EXTENSIONS {
        let Some(schema) = defs.get_mut(*name) else {
            continue;
        };
        let target = if property.is_empty() {
            Some(schema)
        } else {
            schema
                .get_mut("properties")
                .and_then(|p| p.get_mut(*property))
        };
        let (Some(Value::Object(target)), Ok(Value::Object(extensions))) =
            (target, serde_json::from_str::<Value>(extensions))
        else {
            continue;
        };
        for (key, value) in extensions {
            target.insert(key, value);
        }
        sort_object(target);
    }
    apply_enums(defs);
}

/// kube-openapi's enums: the values on the property (or its items, or its map values) and, on
/// the property itself, "Possible enum values:" closing its description.
fn apply_enums(defs: &mut BTreeMap<String, Value>) {
    for (definition, property, place, enum_name) in enums::ENUM_PROPERTIES {
        let Some(enum_type) = enums::ENUM_TYPES.iter().find(|e| e.name == *enum_name) else {
            continue;
        };
        let Some(Value::Object(schema)) = defs
            .get_mut(*definition)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*property))
        else {
            continue;
        };
        let values = json!(enum_type.values);
        if place.is_empty() {
            let lines = enum_type.lines.join("\n");
            let description = match schema.get("description").and_then(Value::as_str) {
                Some(text) if !text.is_empty() => {
                    format!("{text}\n\nPossible enum values:\n{lines}")
                }
                _ => format!("Possible enum values:\n{lines}"),
            };
            schema.insert("description".into(), json!(description));
            schema.insert("enum".into(), values);
            sort_object(schema);
        } else if let Some(Value::Object(inner)) = schema.get_mut(*place) {
            inner.insert("enum".into(), values);
            sort_object(inner);
        }
    }
}

/// Re-inserts an object's keys in sorted order (serde_json keeps insertion order here).
fn sort_object(map: &mut Map<String, Value>) {
    let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    map.extend(entries);
}

/// `x-kubernetes-group-version-kind` on every definition a served kind uses, the way kube's
/// definition namer lists every GVK registered for a Go type.
fn attach_group_version_kinds(defs: &mut BTreeMap<String, Value>, resources: &[ResourceDef]) {
    let mut gvks: BTreeMap<String, BTreeSet<(String, String, String)>> = BTreeMap::new();
    let mut served_gvs: BTreeSet<(String, String)> = BTreeSet::new();
    served_gvs.insert((String::new(), "v1".into()));
    for r in resources {
        // kube names the meta types with the built-in scheme, which has no custom resource
        // group (apiextensions-apiserver's OpenAPI builder uses client-go's scheme too): listing
        // every CRD group-version here would put all of them into every document, growing the
        // documents with the square of the CRD count and changing them all on each CRD change.
        if r.openapi_schema.is_none() {
            served_gvs.insert((r.group.clone(), r.version.clone()));
        }
        gvks.entry(r.definition.clone()).or_default().insert((
            r.group.clone(),
            r.version.clone(),
            r.kind.clone(),
        ));
        gvks.entry(list_definition(r)).or_default().insert((
            r.group.clone(),
            r.version.clone(),
            r.list_kind.clone(),
        ));
        for sub in &r.subresources {
            if let Some(def) = subresource_definition(r, sub) {
                gvks.entry(def).or_default().insert(subresource_gvk(r, sub));
            }
        }
    }
    // Registered once, unversioned, in the core group.
    for kind in [
        "Status",
        "APIResourceList",
        "APIGroup",
        "APIGroupList",
        "APIVersions",
    ] {
        gvks.entry(format!("{META}.{kind}")).or_default().insert((
            String::new(),
            "v1".into(),
            kind.into(),
        ));
    }
    // Registered in every group-version (`metav1.AddToGroupVersion`).
    for kind in ["DeleteOptions", "WatchEvent"] {
        let entry = gvks.entry(format!("{META}.{kind}")).or_default();
        for (group, version) in &served_gvs {
            entry.insert((group.clone(), version.clone(), kind.into()));
        }
    }
    for (name, list) in gvks {
        if let Some(schema) = defs.get_mut(&name).and_then(Value::as_object_mut) {
            let list: Vec<Value> = list
                .into_iter()
                .map(|(group, version, kind)| {
                    json!({ "group": group, "kind": kind, "version": version })
                })
                .collect();
            schema.insert("x-kubernetes-group-version-kind".into(), Value::Array(list));
        }
    }
}

/// Every `#/components/schemas/` name a value refers to.
fn collect_refs(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key == "$ref" {
                    if let Some(name) = v.as_str().and_then(|s| s.strip_prefix(V3_REF_PREFIX)) {
                        out.insert(name.to_string());
                    }
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// The definitions `roots` reference, transitively.
fn closure(catalog: &BTreeMap<String, Value>, roots: BTreeSet<String>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = roots.into_iter().collect();
    while let Some(name) = stack.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(schema) = catalog.get(&name) {
            let mut refs = BTreeSet::new();
            collect_refs(schema, &mut refs);
            stack.extend(refs.into_iter().filter(|r| !seen.contains(r)));
        }
    }
    seen
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    V2,
    V3,
}

/// One definition as a document publishes it.
fn render_schema(name: &str, schema: &Value, flavor: Flavor) -> Value {
    let description = schema.get("description").cloned().unwrap_or(Value::Null);
    // k8s-openapi describes both with `x-kubernetes-int-or-string`; kube-openapi publishes a
    // string type in v2 and a oneOf in v3 (`OpenAPIV3OneOfTypes`).
    let mut out = match (name, flavor) {
        (INT_OR_STRING, Flavor::V2) => {
            json!({ "description": description, "format": "int-or-string", "type": "string" })
        }
        (INT_OR_STRING, Flavor::V3) => json!({
            "description": description,
            "format": "int-or-string",
            "oneOf": [{ "type": "integer" }, { "type": "string" }]
        }),
        (QUANTITY, Flavor::V2) => json!({ "description": description, "type": "string" }),
        (QUANTITY, Flavor::V3) => json!({
            "description": description,
            "oneOf": [{ "type": "string" }, { "type": "number" }]
        }),
        _ => schema.clone(),
    };
    match flavor {
        Flavor::V3 => wrap_refs(&mut out),
        Flavor::V2 => rewrite_refs(&mut out),
    }
    out
}

/// kube-openapi's `WrapRefs`: a `$ref` with siblings becomes `allOf: [{$ref}]` plus the siblings,
/// since OpenAPI 3.0 ignores the siblings of a `$ref`.
fn wrap_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for v in map.values_mut() {
                wrap_refs(v);
            }
            // Only a schema's reference is a string: a `properties` map may name a property
            // `$ref` (JSONSchemaProps does), whose value is a schema, left where it is.
            if map.len() > 1 && map.get("$ref").is_some_and(Value::is_string) {
                if let Some(reference) = map.remove("$ref") {
                    map.insert("allOf".into(), json!([{ "$ref": reference }]));
                    sort_object(map);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(wrap_refs),
        _ => {}
    }
}

fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "$ref" {
                    if let Some(name) = v.as_str().and_then(|s| s.strip_prefix(V3_REF_PREFIX)) {
                        *v = Value::String(format!("{V2_REF_PREFIX}{name}"));
                    }
                } else {
                    rewrite_refs(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Hash)]
struct Param {
    name: &'static str,
    /// `path` or `query`.
    location: &'static str,
    ty: &'static str,
    /// Borrowed for the constant texts: every route of every resource carries a dozen of these
    /// (kilobytes each), which with hundreds of CRDs would otherwise be copied per route.
    description: Cow<'static, str>,
}

impl Param {
    fn query(name: &'static str, ty: &'static str, description: &'static str) -> Param {
        Param {
            name,
            location: "query",
            ty,
            description: Cow::Borrowed(description),
        }
    }

    fn path(name: &'static str, description: Cow<'static, str>) -> Param {
        Param {
            name,
            location: "path",
            ty: "string",
            description,
        }
    }

    fn key(&self) -> (&'static str, &'static str) {
        (self.name, self.location)
    }

    fn v3(&self) -> Value {
        let mut p = json!({
            "description": self.description,
            "in": self.location,
            "name": self.name,
            "schema": { "type": self.ty, "uniqueItems": true }
        });
        if self.location == "path" {
            p["required"] = Value::Bool(true);
        }
        sort_value(&mut p);
        p
    }

    fn v2(&self) -> Value {
        let mut p = json!({
            "description": self.description,
            "in": self.location,
            "name": self.name,
            "type": self.ty,
            "uniqueItems": true
        });
        if self.location == "path" {
            p["required"] = Value::Bool(true);
        }
        sort_value(&mut p);
        p
    }
}

fn sort_value(value: &mut Value) {
    if let Some(map) = value.as_object_mut() {
        sort_object(map);
    }
}

#[derive(Debug, Clone, Hash)]
struct Route {
    /// Lower-case HTTP method.
    method: &'static str,
    operation_id: String,
    description: String,
    tag: String,
    /// `x-kubernetes-action`.
    action: Option<&'static str>,
    gvk: Option<(String, String, String)>,
    params: Vec<Param>,
    /// Request body definition and whether it is required.
    body: Option<(String, bool)>,
    consumes: &'static [&'static str],
    produces: &'static [&'static str],
    /// Status code, description, response definition.
    responses: Vec<(&'static str, &'static str, String)>,
}

const PRETTY: &str = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).";
const DRY_RUN: &str = "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed";
const FIELD_MANAGER: &str = "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.";
const FIELD_MANAGER_PATCH: &str = "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint. This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch).";
const FIELD_VALIDATION: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";
const FORCE: &str = "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.";
const GRACE_PERIOD: &str = "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.";
const ORPHAN_DEPENDENTS: &str = "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.";
const PROPAGATION_POLICY: &str = "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.";
const IGNORE_STORE_READ_ERROR: &str = "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error. A resource is considered corrupt if it can not be retrieved from the underlying storage successfully because of a) its data can not be transformed e.g. decryption failure, or b) it fails to decode into an object. NOTE: unsafe deletion ignores finalizer constraints, skips precondition checks, and removes the object from the storage. WARNING: This may potentially break the cluster if the workload associated with the resource being unsafe-deleted relies on normal deletion flow. Use only if you REALLY know what you are doing. The default value is false, and the user must opt in to enable it";
const LABEL_SELECTOR: &str =
    "A selector to restrict the list of returned objects by their labels. Defaults to everything.";
const FIELD_SELECTOR: &str =
    "A selector to restrict the list of returned objects by their fields. Defaults to everything.";
const WATCH: &str = "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.";
const ALLOW_WATCH_BOOKMARKS: &str = "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.";
const RESOURCE_VERSION: &str = "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset";
const RESOURCE_VERSION_MATCH: &str = "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset";
const TIMEOUT_SECONDS: &str = "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.";
const LIMIT: &str = "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results. Setting a limit may return fewer than the requested amount of items (up to zero items) in the event all requested objects are filtered out and clients should only use the presence of the continue field to determine whether more results are available. Servers may choose not to support the limit argument and will return all of the available results. If limit is specified and the continue field is empty, clients may assume that no more results are available. This field is not supported if watch is true.\n\nThe server guarantees that the objects returned when using continue will be identical to issuing a single list call without a limit - that is, no objects created, modified, or deleted after the first request is issued will be included in any subsequent continued requests. This is sometimes referred to as a consistent snapshot, and ensures that a client that is using limit to receive smaller chunks of a very large result can ensure they see all possible objects. If objects are updated during a chunked list the version of the object that was present at the time the first list result was calculated is returned.";
const CONTINUE: &str = "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize. If the specified continue value is no longer valid whether due to expiration (generally five to fifteen minutes) or a configuration change on the server, the server will respond with a 410 ResourceExpired error together with a continue token. If the client needs a consistent list, it must restart their list without the continue field. Otherwise, the client may send another list request with the token received with the 410 error, the server will respond with a list starting from the next key, but from the latest snapshot, which is inconsistent from the previous list results - objects that are created, modified, or deleted after the first list request will be included in the response, as long as their keys are after the \"next key\".\n\nThis field is not supported when watch is true. Clients may start a watch from the last resourceVersion value returned by the server and not miss any modifications.";
const SEND_INITIAL_EVENTS: &str = "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event  will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation. Afterwards, the watch stream will proceed as usual, sending watch events corresponding to changes (subsequent to the RV) to objects watched.\n\nWhen `sendInitialEvents` option is set, we require `resourceVersionMatch` option to also be set. The semantic of the watch request is as following: - `resourceVersionMatch` = NotOlderThan\n  is interpreted as \"data at least as new as the provided `resourceVersion`\"\n  and the bookmark event is send when the state is synced\n  to a `resourceVersion` at least as fresh as the one provided by the ListOptions.\n  If `resourceVersion` is unset, this is interpreted as \"consistent read\" and the\n  bookmark event is send when the state is synced at least to the moment\n  when request started being processed.\n- `resourceVersionMatch` set to any other value or unset\n  Invalid error is returned.\n\nDefaults to true if `resourceVersion=\"\"` or `resourceVersion=\"0\"` (for backward compatibility reasons) and to false otherwise.";
const NAMESPACE_PARAM: &str = "object name and auth scope, such as for teams and projects";

/// `ListOptions` as query parameters (`AddObjectParams`), minus the excluded watch options
/// for deletecollection.
fn list_options(with_watch: bool) -> Vec<Param> {
    let mut params = vec![
        Param::query("labelSelector", "string", LABEL_SELECTOR),
        Param::query("fieldSelector", "string", FIELD_SELECTOR),
    ];
    if with_watch {
        params.push(Param::query("watch", "boolean", WATCH));
        params.push(Param::query(
            "allowWatchBookmarks",
            "boolean",
            ALLOW_WATCH_BOOKMARKS,
        ));
    }
    params.extend([
        Param::query("resourceVersion", "string", RESOURCE_VERSION),
        Param::query("resourceVersionMatch", "string", RESOURCE_VERSION_MATCH),
        Param::query("timeoutSeconds", "integer", TIMEOUT_SECONDS),
        Param::query("limit", "integer", LIMIT),
        Param::query("continue", "string", CONTINUE),
        Param::query("sendInitialEvents", "boolean", SEND_INITIAL_EVENTS),
    ]);
    params
}

fn write_options(field_manager: &'static str, with_force: bool) -> Vec<Param> {
    let mut params = vec![
        Param::query("dryRun", "string", DRY_RUN),
        Param::query("fieldManager", "string", field_manager),
        Param::query("fieldValidation", "string", FIELD_VALIDATION),
    ];
    if with_force {
        params.push(Param::query("force", "boolean", FORCE));
    }
    params
}

fn delete_options() -> Vec<Param> {
    vec![
        Param::query("gracePeriodSeconds", "integer", GRACE_PERIOD),
        Param::query("orphanDependents", "boolean", ORPHAN_DEPENDENTS),
        Param::query("propagationPolicy", "string", PROPAGATION_POLICY),
        Param::query("dryRun", "string", DRY_RUN),
        Param::query(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            "boolean",
            IGNORE_STORE_READ_ERROR,
        ),
    ]
}

/// kube's `ToValidOperationID`: drops punctuation and camel-cases what follows it.
fn to_valid_operation_id(s: &str, capitalize_first: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut capitalize = capitalize_first;
    for (i, c) in s.chars().enumerate() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_numeric()) {
            if capitalize {
                out.extend(c.to_uppercase());
                capitalize = false;
            } else {
                out.push(c);
            }
        } else {
            capitalize = true;
        }
    }
    out
}

/// The group segment of operation IDs and tags: `core`, `coordination`, `rbacAuthorization`.
fn group_word(group: &str) -> &str {
    if group.is_empty() {
        "core"
    } else {
        group.strip_suffix(".k8s.io").unwrap_or(group)
    }
}

fn title(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// kube's `GetArticleForNoun` with its padding: `" a "`, `" an "`, or `" "` for plurals.
fn article(noun: &str) -> &'static str {
    if !noun.ends_with("ss") && noun.ends_with('s') {
        " "
    } else if noun
        .chars()
        .next()
        .is_some_and(|c| "aeiou".contains(c.to_ascii_lowercase()))
    {
        " an "
    } else {
        " a "
    }
}

/// Storages that answer DELETE with the deleted object rather than a Status
/// (`ReturnDeletedObject` in their kube registries).
fn delete_returns_object(r: &ResourceDef) -> bool {
    matches!(
        (r.group.as_str(), r.plural.as_str()),
        (
            "",
            "services"
                | "serviceaccounts"
                | "pods"
                | "persistentvolumes"
                | "persistentvolumeclaims"
                | "podtemplates"
                | "resourcequotas"
        ) | ("apiextensions.k8s.io", "customresourcedefinitions")
    )
}

fn responses(
    codes: &[(&'static str, &'static str)],
    def: &str,
) -> Vec<(&'static str, &'static str, String)> {
    codes
        .iter()
        .map(|(code, desc)| (*code, *desc, def.to_string()))
        .collect()
}

/// Builds the routes kube's API installer registers for one group-version.
struct RouteBuilder<'a> {
    paths: &'a mut BTreeMap<String, Vec<Route>>,
    prefix: String,
    tag: String,
    /// `CoreV1`, `CoordinationV1`.
    op_gv: String,
    /// Whether the resource being built takes strategic merge patches.
    strategic_merge: bool,
}

impl RouteBuilder<'_> {
    fn add(&mut self, path: String, route: Route) {
        self.paths.entry(path).or_default().push(route);
    }

    // One argument per field of kube's route builder chain; a struct literal at each call site
    // would only move the same list around.
    #[allow(clippy::too_many_arguments)]
    fn route(
        &self,
        method: &'static str,
        verb: &str,
        rest: String,
        description: String,
        action: &'static str,
        gvk: &(String, String, String),
        params: Vec<Param>,
        body: Option<(String, bool)>,
        produces: &'static [&'static str],
        responses: Vec<(&'static str, &'static str, String)>,
    ) -> Route {
        Route {
            method,
            operation_id: format!("{verb}{}{rest}", self.op_gv),
            description,
            tag: self.tag.clone(),
            action: Some(action),
            gvk: Some(gvk.clone()),
            params,
            body,
            consumes: if method == "patch" && self.strategic_merge {
                PATCH_TYPES
            } else if method == "patch" {
                PATCH_TYPES_WITHOUT_STRATEGIC
            } else {
                CONSUMES_ANY
            },
            produces,
            responses,
        }
    }

    fn resource(&mut self, r: &ResourceDef) {
        self.strategic_merge = r.strategy.supports_strategic_merge_patch();
        let kind = r.kind.as_str();
        let def = r.definition.clone();
        let list_def = list_definition(r);
        let gvk = (r.group.clone(), r.version.clone(), r.kind.clone());
        let namespaced = if r.namespaced { "Namespaced" } else { "" };
        let (collection, watch_collection) = if r.namespaced {
            (
                format!("{}/namespaces/{{namespace}}/{}", self.prefix, r.plural),
                format!(
                    "{}/watch/namespaces/{{namespace}}/{}",
                    self.prefix, r.plural
                ),
            )
        } else {
            (
                format!("{}/{}", self.prefix, r.plural),
                format!("{}/watch/{}", self.prefix, r.plural),
            )
        };
        let item = format!("{collection}/{{name}}");
        let watch_item = format!("{watch_collection}/{{name}}");
        let scope: Vec<Param> = if r.namespaced {
            vec![Param::path("namespace", Cow::Borrowed(NAMESPACE_PARAM))]
        } else {
            Vec::new()
        };
        let mut named = scope.clone();
        named.push(Param::path("name", format!("name of the {kind}").into()));
        let with = |base: &[Param], options: Vec<Param>| -> Vec<Param> {
            let mut params = vec![Param::query("pretty", "string", PRETTY)];
            params.extend(options);
            params.extend(base.iter().cloned());
            params
        };
        let has = |verb: &str| r.supports_verb(verb);
        let deleted = if delete_returns_object(r) {
            def.clone()
        } else {
            format!("{META}.Status")
        };
        let watch_event = format!("{META}.WatchEvent");
        let ok = &[("200", "OK")];

        if has("list") {
            let description = if has("watch") {
                format!("list or watch objects of kind {kind}")
            } else {
                format!("list objects of kind {kind}")
            };
            let route = self.route(
                "get",
                "list",
                format!("{namespaced}{kind}"),
                description.clone(),
                "list",
                &gvk,
                with(&scope, list_options(true)),
                None,
                ALL_MEDIA_TYPES,
                responses(ok, &list_def),
            );
            self.add(collection.clone(), route);
            if r.namespaced {
                let route = self.route(
                    "get",
                    "list",
                    format!("{kind}ForAllNamespaces"),
                    description,
                    "list",
                    &gvk,
                    with(&[], list_options(true)),
                    None,
                    ALL_MEDIA_TYPES,
                    responses(ok, &list_def),
                );
                self.add(format!("{}/{}", self.prefix, r.plural), route);
            }
            if has("watch") {
                let description = format!("watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead.");
                let route = self.route(
                    "get",
                    "watch",
                    format!("{namespaced}{kind}List"),
                    description.clone(),
                    "watchlist",
                    &gvk,
                    with(&scope, list_options(true)),
                    None,
                    ALL_MEDIA_TYPES,
                    responses(ok, &watch_event),
                );
                self.add(watch_collection.clone(), route);
                if r.namespaced {
                    let route = self.route(
                        "get",
                        "watch",
                        format!("{kind}ListForAllNamespaces"),
                        description,
                        "watchlist",
                        &gvk,
                        with(&[], list_options(true)),
                        None,
                        ALL_MEDIA_TYPES,
                        responses(ok, &watch_event),
                    );
                    self.add(format!("{}/watch/{}", self.prefix, r.plural), route);
                }
            }
        }
        if has("create") {
            let route = self.route(
                "post",
                "create",
                format!("{namespaced}{kind}"),
                format!("create{}{kind}", article(kind)),
                "post",
                &gvk,
                with(&scope, write_options(FIELD_MANAGER, false)),
                Some((def.clone(), true)),
                MEDIA_TYPES,
                responses(
                    &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                    &def,
                ),
            );
            self.add(collection.clone(), route);
        }
        if has("deletecollection") {
            let mut options = delete_options();
            options.extend(list_options(false));
            let route = self.route(
                "delete",
                "delete",
                format!("Collection{namespaced}{kind}"),
                format!("delete collection of {kind}"),
                "deletecollection",
                &gvk,
                with(&scope, options),
                Some((format!("{META}.DeleteOptions"), false)),
                MEDIA_TYPES,
                responses(ok, &format!("{META}.Status")),
            );
            self.add(collection.clone(), route);
        }
        if has("get") {
            let route = self.route(
                "get",
                "read",
                format!("{namespaced}{kind}"),
                format!("read the specified {kind}"),
                "get",
                &gvk,
                with(&named, Vec::new()),
                None,
                MEDIA_TYPES,
                responses(ok, &def),
            );
            self.add(item.clone(), route);
        }
        if has("update") {
            let route = self.route(
                "put",
                "replace",
                format!("{namespaced}{kind}"),
                format!("replace the specified {kind}"),
                "put",
                &gvk,
                with(&named, write_options(FIELD_MANAGER, false)),
                Some((def.clone(), true)),
                MEDIA_TYPES,
                responses(&[("200", "OK"), ("201", "Created")], &def),
            );
            self.add(item.clone(), route);
        }
        if has("patch") {
            let route = self.route(
                "patch",
                "patch",
                format!("{namespaced}{kind}"),
                format!("partially update the specified {kind}"),
                "patch",
                &gvk,
                with(&named, write_options(FIELD_MANAGER_PATCH, true)),
                Some((format!("{META}.Patch"), true)),
                MEDIA_TYPES,
                responses(&[("200", "OK"), ("201", "Created")], &def),
            );
            self.add(item.clone(), route);
        }
        if has("delete") {
            let route = self.route(
                "delete",
                "delete",
                format!("{namespaced}{kind}"),
                format!("delete{}{kind}", article(kind)),
                "delete",
                &gvk,
                with(&named, delete_options()),
                Some((format!("{META}.DeleteOptions"), false)),
                MEDIA_TYPES,
                responses(&[("200", "OK"), ("202", "Accepted")], &deleted),
            );
            self.add(item.clone(), route);
        }
        if has("watch") {
            let route = self.route(
                "get",
                "watch",
                format!("{namespaced}{kind}"),
                format!("watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."),
                "watch",
                &gvk,
                with(&named, list_options(true)),
                None,
                ALL_MEDIA_TYPES,
                responses(ok, &watch_event),
            );
            self.add(watch_item, route);
        }

        for sub in &r.subresources {
            self.subresource(r, sub, &item, &scope, namespaced);
        }
    }

    fn subresource(
        &mut self,
        r: &ResourceDef,
        sub: &SubresourceDef,
        item: &str,
        scope: &[Param],
        namespaced: &str,
    ) {
        let Some(def) = subresource_definition(r, sub) else {
            // A subresource of a kind we cannot name (unknown group) is left out rather than
            // published with a dangling reference.
            return;
        };
        let gvk = subresource_gvk(r, sub);
        let kind = r.kind.as_str();
        let name = sub.name;
        let path = format!("{item}/{name}");
        let rest = format!("{namespaced}{kind}{}", title(name));
        let mut named = scope.to_vec();
        named.push(Param::path(
            "name",
            format!("name of the {}", sub.kind).into(),
        ));
        let with = |options: Vec<Param>| -> Vec<Param> {
            let mut params = vec![Param::query("pretty", "string", PRETTY)];
            params.extend(options);
            params.extend(named.iter().cloned());
            params
        };
        for verb in &sub.verbs {
            let route = match *verb {
                "get" => self.route(
                    "get",
                    "read",
                    rest.clone(),
                    format!("read {name} of the specified {kind}"),
                    "get",
                    &gvk,
                    with(Vec::new()),
                    None,
                    MEDIA_TYPES,
                    responses(&[("200", "OK")], &def),
                ),
                "update" => self.route(
                    "put",
                    "replace",
                    rest.clone(),
                    format!("replace {name} of the specified {kind}"),
                    "put",
                    &gvk,
                    with(write_options(FIELD_MANAGER, false)),
                    Some((def.clone(), true)),
                    MEDIA_TYPES,
                    responses(&[("200", "OK"), ("201", "Created")], &def),
                ),
                "patch" => self.route(
                    "patch",
                    "patch",
                    rest.clone(),
                    format!("partially update {name} of the specified {kind}"),
                    "patch",
                    &gvk,
                    with(write_options(FIELD_MANAGER_PATCH, true)),
                    Some((format!("{META}.Patch"), true)),
                    MEDIA_TYPES,
                    responses(&[("200", "OK"), ("201", "Created")], &def),
                ),
                "create" => self.route(
                    "post",
                    "create",
                    rest.clone(),
                    format!("create {name} of{}{kind}", article(kind)),
                    "post",
                    &gvk,
                    with(write_options(FIELD_MANAGER, false)),
                    Some((def.clone(), true)),
                    MEDIA_TYPES,
                    responses(
                        &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                        &def,
                    ),
                ),
                _ => continue,
            };
            self.add(path.clone(), route);
        }
    }
}

/// The routes of one group-version: its discovery document and every resource operation.
fn group_version_paths(
    group: &str,
    version: &str,
    resources: &[&ResourceDef],
) -> BTreeMap<String, Vec<Route>> {
    let mut paths = BTreeMap::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let tag = format!(
        "{}_{}",
        to_valid_operation_id(group_word(group), false),
        to_valid_operation_id(version, false)
    );
    let op_gv = format!(
        "{}{}",
        to_valid_operation_id(group_word(group), true),
        to_valid_operation_id(version, true)
    );
    paths.insert(
        format!("{prefix}/"),
        vec![discovery_route(
            format!("get{op_gv}APIResources"),
            "get available resources",
            tag.clone(),
            MEDIA_TYPES,
            "APIResourceList",
        )],
    );
    let mut builder = RouteBuilder {
        paths: &mut paths,
        prefix,
        tag,
        op_gv,
        strategic_merge: true,
    };
    for r in resources {
        builder.resource(r);
    }
    paths
}

fn discovery_route(
    operation_id: String,
    description: &str,
    tag: String,
    media: &'static [&'static str],
    meta_kind: &str,
) -> Route {
    let def = if meta_kind == "Info" {
        "io.k8s.apimachinery.pkg.version.Info".to_string()
    } else {
        format!("{META}.{meta_kind}")
    };
    Route {
        method: "get",
        operation_id,
        description: description.to_string(),
        tag,
        action: None,
        gvk: None,
        params: Vec::new(),
        body: None,
        consumes: media,
        produces: media,
        responses: vec![("200", "OK", def)],
    }
}

/// `/api/` (`getCoreAPIVersions`) or `/apis/` (`getAPIVersions`).
fn root_paths(legacy: bool) -> BTreeMap<String, Vec<Route>> {
    let route = if legacy {
        discovery_route(
            "getCoreAPIVersions".into(),
            "get available API versions",
            "core".into(),
            MEDIA_TYPES,
            "APIVersions",
        )
    } else {
        discovery_route(
            "getAPIVersions".into(),
            "get available API versions",
            "apis".into(),
            MEDIA_TYPES,
            "APIGroupList",
        )
    };
    let path = if legacy { "/api/" } else { "/apis/" };
    BTreeMap::from([(path.to_string(), vec![route])])
}

fn group_paths(group: &str) -> BTreeMap<String, Vec<Route>> {
    let word = group_word(group);
    let route = discovery_route(
        format!("get{}APIGroup", to_valid_operation_id(word, true)),
        "get information of a group",
        to_valid_operation_id(word, false),
        MEDIA_TYPES,
        "APIGroup",
    );
    BTreeMap::from([(format!("/apis/{group}/"), vec![route])])
}

fn version_paths() -> BTreeMap<String, Vec<Route>> {
    let route = discovery_route(
        "getCodeVersion".into(),
        "get the version information for this server",
        "version".into(),
        &["application/json"],
        "Info",
    );
    BTreeMap::from([("/version/".to_string(), vec![route])])
}

/// Splits the parameters every route of a path shares onto the path (kube-openapi's
/// `findCommonParameters`); body parameters never move.
fn split_common(routes: &[Route]) -> (Vec<Param>, Vec<Vec<Param>>) {
    let mut common: Vec<Param> = match routes.first() {
        Some(first) => first
            .params
            .iter()
            .filter(|p| {
                routes
                    .iter()
                    .all(|r| r.params.iter().any(|q| q.key() == p.key()))
            })
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    common.sort_by_key(|p| p.key());
    let per_route = routes
        .iter()
        .map(|r| {
            let mut own: Vec<Param> = r
                .params
                .iter()
                .filter(|p| !common.iter().any(|c| c.key() == p.key()))
                .cloned()
                .collect();
            own.sort_by_key(|p| p.key());
            own
        })
        .collect();
    (common, per_route)
}

/// kube-openapi's path item field order.
const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];

fn gvk_extension((group, version, kind): &(String, String, String)) -> Value {
    json!({ "group": group, "version": version, "kind": kind })
}

fn content(types: &[&str], def: &str) -> Value {
    let mut sorted: Vec<&str> = types.to_vec();
    sorted.sort_unstable();
    let mut map = Map::new();
    for t in sorted {
        map.insert(
            t.to_string(),
            json!({ "schema": { "$ref": format!("{V3_REF_PREFIX}{def}") } }),
        );
    }
    Value::Object(map)
}

fn referenced_definitions(paths: &BTreeMap<String, Vec<Route>>) -> BTreeSet<String> {
    let mut roots = BTreeSet::new();
    for route in paths.values().flatten() {
        if let Some((def, _)) = &route.body {
            roots.insert(def.clone());
        }
        for (_, _, def) in &route.responses {
            roots.insert(def.clone());
        }
    }
    roots
}

fn security_scheme() -> Value {
    json!({
        "BearerToken": {
            "description": "Bearer Token authentication",
            "in": "header",
            "name": "authorization",
            "type": "apiKey"
        }
    })
}

/// The end of one operation, the same in v2 and v3: kube's `401` response and the
/// `x-kubernetes-action` / `x-kubernetes-group-version-kind` extensions.
fn finish_operation(op: &mut Map<String, Value>, mut responses: Map<String, Value>, route: &Route) {
    responses.insert("401".into(), json!({ "description": "Unauthorized" }));
    op.insert("responses".into(), Value::Object(responses));
    if let Some(action) = route.action {
        op.insert("x-kubernetes-action".into(), json!(action));
    }
    if let Some(gvk) = &route.gvk {
        op.insert("x-kubernetes-group-version-kind".into(), gvk_extension(gvk));
    }
}

/// One v3 document: `paths` and the `definitions` they reach (their closure in `catalog`).
fn render_v3(
    paths: &BTreeMap<String, Vec<Route>>,
    catalog: &BTreeMap<String, Value>,
    definitions: &BTreeSet<String>,
    info_version: &str,
) -> Value {
    let mut out_paths = Map::new();
    for (path, routes) in paths {
        let (common, per_route) = split_common(routes);
        let mut item = Map::new();
        for method in METHODS {
            for (route, own) in routes.iter().zip(&per_route) {
                if route.method != *method {
                    continue;
                }
                let mut op = Map::new();
                op.insert("tags".into(), json!([route.tag]));
                op.insert("description".into(), json!(route.description));
                op.insert("operationId".into(), json!(route.operation_id));
                if !own.is_empty() {
                    op.insert("parameters".into(), own.iter().map(Param::v3).collect());
                }
                if let Some((def, required)) = &route.body {
                    let mut body = json!({ "content": content(route.consumes, def) });
                    if *required {
                        body["required"] = Value::Bool(true);
                    }
                    op.insert("requestBody".into(), body);
                }
                let mut responses = Map::new();
                for (code, description, def) in &route.responses {
                    responses.insert(
                        code.to_string(),
                        json!({ "description": description, "content": content(route.produces, def) }),
                    );
                }
                finish_operation(&mut op, responses, route);
                item.insert(method.to_string(), Value::Object(op));
            }
        }
        if !common.is_empty() {
            item.insert("parameters".into(), common.iter().map(Param::v3).collect());
        }
        out_paths.insert(path.clone(), Value::Object(item));
    }
    let mut schemas = Map::new();
    for name in definitions {
        if let Some(schema) = catalog.get(name) {
            schemas.insert(name.clone(), render_schema(name, schema, Flavor::V3));
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": info_version },
        "paths": out_paths,
        "components": { "schemas": schemas, "securitySchemes": security_scheme() }
    })
}

/// The Swagger document's top-level fields, with its sections (`paths`, `definitions`) empty:
/// [`LocalOpenApi`] writes the entries into them one at a time.
fn v2_top() -> Value {
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": KUBE_VERSION },
        "paths": {},
        "definitions": {},
        "securityDefinitions": security_scheme(),
        "security": [{ "BearerToken": [] }]
    })
}

/// One Swagger path item.
fn render_v2_path_item(routes: &[Route]) -> Value {
    let (common, per_route) = split_common(routes);
    let mut item = Map::new();
    for method in METHODS {
        for (route, own) in routes.iter().zip(&per_route) {
            if route.method != *method {
                continue;
            }
            let mut op = Map::new();
            op.insert("description".into(), json!(route.description));
            op.insert("consumes".into(), json!(route.consumes));
            op.insert("produces".into(), json!(route.produces));
            op.insert("schemes".into(), json!(["https"]));
            op.insert("tags".into(), json!([route.tag]));
            op.insert("operationId".into(), json!(route.operation_id));
            let mut params: Vec<Value> = Vec::new();
            if let Some((def, required)) = &route.body {
                let mut body = json!({
                    "in": "body",
                    "name": "body",
                    "schema": { "$ref": format!("{V2_REF_PREFIX}{def}") }
                });
                if *required {
                    body["required"] = Value::Bool(true);
                }
                params.push(body);
            }
            params.extend(own.iter().map(Param::v2));
            if !params.is_empty() {
                op.insert("parameters".into(), Value::Array(params));
            }
            let mut responses = Map::new();
            for (code, description, def) in &route.responses {
                responses.insert(
                    code.to_string(),
                    json!({ "description": description, "schema": { "$ref": format!("{V2_REF_PREFIX}{def}") } }),
                );
            }
            finish_operation(&mut op, responses, route);
            item.insert(method.to_string(), Value::Object(op));
        }
    }
    if !common.is_empty() {
        item.insert("parameters".into(), common.iter().map(Param::v2).collect());
    }
    Value::Object(item)
}

/// The Swagger definitions `paths` reach, by name, rendered one at a time.
fn v2_definitions<'a>(
    paths: &BTreeMap<String, Vec<Route>>,
    catalog: &'a BTreeMap<String, Value>,
) -> impl Iterator<Item = (String, Value)> + 'a {
    closure(catalog, referenced_definitions(paths))
        .into_iter()
        .filter_map(move |name| {
            let schema = catalog.get(&name)?;
            let rendered = render_schema(&name, schema, Flavor::V2);
            Some((name, rendered))
        })
}

/// The whole Swagger document as one value (tests compare the spliced encodings with it).
#[cfg(test)]
fn render_v2(paths: &BTreeMap<String, Vec<Route>>, catalog: &BTreeMap<String, Value>) -> Value {
    let mut document = v2_top();
    document["paths"] = paths
        .iter()
        .map(|(path, routes)| (path.clone(), render_v2_path_item(routes)))
        .collect::<Map<String, Value>>()
        .into();
    document["definitions"] = v2_definitions(paths, catalog)
        .collect::<Map<String, Value>>()
        .into();
    document
}

// ---------------------------------------------------------------------------------------------
// Swagger 2.0 as gnostic protobuf
// ---------------------------------------------------------------------------------------------

/// The Swagger document in gnostic's `openapi.v2` protobuf encoding (what kube serves for
/// `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`); client-go's
/// `OpenAPISchema()`, kubectl's v2 fallbacks and tools such as Argo CD accept nothing else.
mod gnostic {
    use prost::{Message, Oneof};
    use serde_json::Value;

    // Field numbers from github.com/google/gnostic-models openapiv2/OpenAPIv2.proto; only the
    // fields kube's documents use are declared (absent fields decode as defaults).

    /// A value gnostic keeps as YAML text; JSON is YAML, and kube-openapi's readers parse
    /// it with a YAML decoder.
    #[derive(Clone, PartialEq, Message)]
    pub struct Any {
        #[prost(string, tag = "2")]
        pub yaml: String,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedAny {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Any>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Document {
        #[prost(string, tag = "1")]
        pub swagger: String,
        #[prost(message, optional, tag = "2")]
        pub info: Option<Info>,
        #[prost(message, optional, tag = "8")]
        pub paths: Option<Paths>,
        #[prost(message, optional, tag = "9")]
        pub definitions: Option<Definitions>,
        /// Shared parameters (`#/parameters/<name>`): kube-openapi's builder moves the parameters
        /// many operations repeat there, so remote backends' documents have them.
        #[prost(message, optional, tag = "10")]
        pub parameters: Option<ParameterDefinitions>,
        #[prost(message, repeated, tag = "12")]
        pub security: Vec<SecurityRequirement>,
        #[prost(message, optional, tag = "13")]
        pub security_definitions: Option<SecurityDefinitions>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub title: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Paths {
        #[prost(message, repeated, tag = "2")]
        pub path: Vec<NamedPathItem>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedPathItem {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<PathItem>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct PathItem {
        #[prost(message, optional, tag = "2")]
        pub get: Option<Operation>,
        #[prost(message, optional, tag = "3")]
        pub put: Option<Operation>,
        #[prost(message, optional, tag = "4")]
        pub post: Option<Operation>,
        #[prost(message, optional, tag = "5")]
        pub delete: Option<Operation>,
        #[prost(message, optional, tag = "6")]
        pub options: Option<Operation>,
        #[prost(message, optional, tag = "7")]
        pub head: Option<Operation>,
        #[prost(message, optional, tag = "8")]
        pub patch: Option<Operation>,
        #[prost(message, repeated, tag = "9")]
        pub parameters: Vec<ParametersItem>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Operation {
        #[prost(string, repeated, tag = "1")]
        pub tags: Vec<String>,
        #[prost(string, tag = "3")]
        pub description: String,
        #[prost(string, tag = "5")]
        pub operation_id: String,
        #[prost(string, repeated, tag = "6")]
        pub produces: Vec<String>,
        #[prost(string, repeated, tag = "7")]
        pub consumes: Vec<String>,
        #[prost(message, repeated, tag = "8")]
        pub parameters: Vec<ParametersItem>,
        #[prost(message, optional, tag = "9")]
        pub responses: Option<Responses>,
        #[prost(string, repeated, tag = "10")]
        pub schemes: Vec<String>,
        #[prost(message, repeated, tag = "13")]
        pub vendor_extension: Vec<NamedAny>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct ParametersItem {
        #[prost(oneof = "ParametersItemOneof", tags = "1, 2")]
        pub oneof: Option<ParametersItemOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum ParametersItemOneof {
        #[prost(message, tag = "1")]
        Parameter(Parameter),
        #[prost(message, tag = "2")]
        JsonReference(JsonReference),
    }

    /// A `$ref` (to a shared parameter or response).
    #[derive(Clone, PartialEq, Message)]
    pub struct JsonReference {
        #[prost(string, tag = "1")]
        pub reference: String,
        #[prost(string, tag = "2")]
        pub description: String,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct ParameterDefinitions {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedParameter>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedParameter {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Parameter>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Parameter {
        #[prost(oneof = "ParameterOneof", tags = "1, 2")]
        pub oneof: Option<ParameterOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum ParameterOneof {
        #[prost(message, tag = "1")]
        BodyParameter(Box<BodyParameter>),
        #[prost(message, tag = "2")]
        NonBodyParameter(NonBodyParameter),
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct BodyParameter {
        #[prost(string, tag = "1")]
        pub description: String,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "3")]
        pub r#in: String,
        #[prost(bool, tag = "4")]
        pub required: bool,
        #[prost(message, optional, tag = "5")]
        pub schema: Option<Schema>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NonBodyParameter {
        #[prost(oneof = "NonBodyParameterOneof", tags = "3, 4")]
        pub oneof: Option<NonBodyParameterOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum NonBodyParameterOneof {
        #[prost(message, tag = "3")]
        QueryParameterSubSchema(QueryParameterSubSchema),
        #[prost(message, tag = "4")]
        PathParameterSubSchema(PathParameterSubSchema),
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct QueryParameterSubSchema {
        #[prost(bool, tag = "1")]
        pub required: bool,
        #[prost(string, tag = "2")]
        pub r#in: String,
        #[prost(string, tag = "3")]
        pub description: String,
        #[prost(string, tag = "4")]
        pub name: String,
        #[prost(string, tag = "6")]
        pub r#type: String,
        #[prost(bool, tag = "20")]
        pub unique_items: bool,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct PathParameterSubSchema {
        #[prost(bool, tag = "1")]
        pub required: bool,
        #[prost(string, tag = "2")]
        pub r#in: String,
        #[prost(string, tag = "3")]
        pub description: String,
        #[prost(string, tag = "4")]
        pub name: String,
        #[prost(string, tag = "5")]
        pub r#type: String,
        #[prost(bool, tag = "19")]
        pub unique_items: bool,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Responses {
        #[prost(message, repeated, tag = "1")]
        pub response_code: Vec<NamedResponseValue>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedResponseValue {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<ResponseValue>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct ResponseValue {
        #[prost(oneof = "ResponseValueOneof", tags = "1, 2")]
        pub oneof: Option<ResponseValueOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum ResponseValueOneof {
        #[prost(message, tag = "1")]
        Response(Box<Response>),
        #[prost(message, tag = "2")]
        JsonReference(JsonReference),
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Response {
        #[prost(string, tag = "1")]
        pub description: String,
        #[prost(message, optional, tag = "2")]
        pub schema: Option<SchemaItem>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct SchemaItem {
        #[prost(oneof = "SchemaItemOneof", tags = "1")]
        pub oneof: Option<SchemaItemOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum SchemaItemOneof {
        #[prost(message, tag = "1")]
        Schema(Schema),
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Definitions {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedSchema {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Schema>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Schema {
        #[prost(string, tag = "1")]
        pub reference: String,
        #[prost(string, tag = "2")]
        pub format: String,
        #[prost(string, tag = "3")]
        pub title: String,
        #[prost(string, tag = "4")]
        pub description: String,
        #[prost(message, optional, tag = "5")]
        pub default: Option<Any>,
        #[prost(double, tag = "6")]
        pub multiple_of: f64,
        #[prost(double, tag = "7")]
        pub maximum: f64,
        #[prost(bool, tag = "8")]
        pub exclusive_maximum: bool,
        #[prost(double, tag = "9")]
        pub minimum: f64,
        #[prost(bool, tag = "10")]
        pub exclusive_minimum: bool,
        #[prost(int64, tag = "11")]
        pub max_length: i64,
        #[prost(int64, tag = "12")]
        pub min_length: i64,
        #[prost(string, tag = "13")]
        pub pattern: String,
        #[prost(int64, tag = "14")]
        pub max_items: i64,
        #[prost(int64, tag = "15")]
        pub min_items: i64,
        #[prost(bool, tag = "16")]
        pub unique_items: bool,
        #[prost(int64, tag = "17")]
        pub max_properties: i64,
        #[prost(int64, tag = "18")]
        pub min_properties: i64,
        #[prost(string, repeated, tag = "19")]
        pub required: Vec<String>,
        #[prost(message, repeated, tag = "20")]
        pub r#enum: Vec<Any>,
        #[prost(message, optional, tag = "21")]
        pub additional_properties: Option<AdditionalPropertiesItem>,
        #[prost(message, optional, tag = "22")]
        pub r#type: Option<TypeItem>,
        #[prost(message, optional, tag = "23")]
        pub items: Option<ItemsItem>,
        #[prost(message, repeated, tag = "24")]
        pub all_of: Vec<Schema>,
        #[prost(message, optional, tag = "25")]
        pub properties: Option<Properties>,
        #[prost(string, tag = "26")]
        pub discriminator: String,
        #[prost(bool, tag = "27")]
        pub read_only: bool,
        #[prost(message, optional, tag = "30")]
        pub example: Option<Any>,
        #[prost(message, repeated, tag = "31")]
        pub vendor_extension: Vec<NamedAny>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct AdditionalPropertiesItem {
        #[prost(oneof = "AdditionalPropertiesOneof", tags = "1, 2")]
        pub oneof: Option<AdditionalPropertiesOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum AdditionalPropertiesOneof {
        #[prost(message, tag = "1")]
        Schema(Box<Schema>),
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct TypeItem {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct ItemsItem {
        #[prost(message, repeated, tag = "1")]
        pub schema: Vec<Schema>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct Properties {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct SecurityRequirement {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedStringArray>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedStringArray {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<StringArray>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct StringArray {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct SecurityDefinitions {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSecurityDefinitionsItem>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct NamedSecurityDefinitionsItem {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<SecurityDefinitionsItem>,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct SecurityDefinitionsItem {
        #[prost(oneof = "SecurityDefinitionsOneof", tags = "2")]
        pub oneof: Option<SecurityDefinitionsOneof>,
    }

    #[derive(Clone, PartialEq, Oneof)]
    pub enum SecurityDefinitionsOneof {
        #[prost(message, tag = "2")]
        ApiKeySecurity(ApiKeySecurity),
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct ApiKeySecurity {
        #[prost(string, tag = "1")]
        pub r#type: String,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "3")]
        pub r#in: String,
        #[prost(string, tag = "4")]
        pub description: String,
    }

    fn text(v: &Value) -> String {
        v.as_str().unwrap_or_default().to_string()
    }

    fn strings(v: &Value) -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn any(v: &Value) -> Any {
        Any {
            yaml: serde_json::to_string(v).unwrap_or_default(),
        }
    }

    fn extensions(map: &serde_json::Map<String, Value>) -> Vec<NamedAny> {
        map.iter()
            .filter(|(k, _)| k.starts_with("x-"))
            .map(|(k, v)| NamedAny {
                name: k.clone(),
                value: Some(any(v)),
            })
            .collect()
    }

    fn named_schemas(v: &Value) -> Vec<NamedSchema> {
        v.as_object()
            .map(|m| m.iter().map(|(name, s)| named_schema(name, s)).collect())
            .unwrap_or_default()
    }

    /// One entry of `definitions` (or of a schema's `properties`).
    pub fn named_schema(name: &str, v: &Value) -> NamedSchema {
        NamedSchema {
            name: name.to_string(),
            value: Some(schema(v)),
        }
    }

    /// A Swagger 2.0 schema object; keywords Swagger has no field for (none in kube's v2
    /// schemas) are dropped.
    pub fn schema(v: &Value) -> Schema {
        let mut s = Schema::default();
        let Some(map) = v.as_object() else {
            return s;
        };
        let float = |v: &Value| v.as_f64().unwrap_or_default();
        let int = |v: &Value| v.as_i64().unwrap_or_default();
        for (key, value) in map {
            match key.as_str() {
                "$ref" => s.reference = text(value),
                "format" => s.format = text(value),
                "title" => s.title = text(value),
                "description" => s.description = text(value),
                "default" => s.default = Some(any(value)),
                "multipleOf" => s.multiple_of = float(value),
                "maximum" => s.maximum = float(value),
                "exclusiveMaximum" => s.exclusive_maximum = value.as_bool().unwrap_or_default(),
                "minimum" => s.minimum = float(value),
                "exclusiveMinimum" => s.exclusive_minimum = value.as_bool().unwrap_or_default(),
                "maxLength" => s.max_length = int(value),
                "minLength" => s.min_length = int(value),
                "pattern" => s.pattern = text(value),
                "maxItems" => s.max_items = int(value),
                "minItems" => s.min_items = int(value),
                "uniqueItems" => s.unique_items = value.as_bool().unwrap_or_default(),
                "maxProperties" => s.max_properties = int(value),
                "minProperties" => s.min_properties = int(value),
                "required" => s.required = strings(value),
                "enum" => {
                    s.r#enum = value
                        .as_array()
                        .map(|a| a.iter().map(any).collect())
                        .unwrap_or_default()
                }
                "additionalProperties" => {
                    s.additional_properties = Some(AdditionalPropertiesItem {
                        oneof: Some(match value {
                            Value::Bool(b) => AdditionalPropertiesOneof::Boolean(*b),
                            other => AdditionalPropertiesOneof::Schema(Box::new(schema(other))),
                        }),
                    })
                }
                "type" => {
                    s.r#type = Some(TypeItem {
                        value: match value {
                            Value::String(t) => vec![t.clone()],
                            other => strings(other),
                        },
                    })
                }
                "items" => {
                    s.items = Some(ItemsItem {
                        schema: match value {
                            Value::Array(items) => items.iter().map(schema).collect(),
                            other => vec![schema(other)],
                        },
                    })
                }
                "allOf" => {
                    s.all_of = value
                        .as_array()
                        .map(|a| a.iter().map(schema).collect())
                        .unwrap_or_default()
                }
                "properties" => {
                    s.properties = Some(Properties {
                        additional_properties: named_schemas(value),
                    })
                }
                "discriminator" => s.discriminator = text(value),
                "readOnly" => s.read_only = value.as_bool().unwrap_or_default(),
                "example" => s.example = Some(any(value)),
                _ => {}
            }
        }
        s.vendor_extension = extensions(map);
        s
    }

    /// A JSON reference when the value is `{"$ref": ...}` (kube's shared parameters).
    fn json_reference(v: &Value) -> Option<JsonReference> {
        Some(JsonReference {
            reference: v.get("$ref")?.as_str()?.to_string(),
            description: text(&v["description"]),
        })
    }

    fn parameters_item(v: &Value) -> ParametersItem {
        let oneof = match json_reference(v) {
            Some(reference) => ParametersItemOneof::JsonReference(reference),
            None => ParametersItemOneof::Parameter(parameter(v)),
        };
        ParametersItem { oneof: Some(oneof) }
    }

    fn parameter(v: &Value) -> Parameter {
        let field = |k: &str| text(&v[k]);
        let required = v["required"].as_bool().unwrap_or_default();
        let unique_items = v["uniqueItems"].as_bool().unwrap_or_default();
        let parameter = match field("in").as_str() {
            "body" => ParameterOneof::BodyParameter(Box::new(BodyParameter {
                description: field("description"),
                name: field("name"),
                r#in: field("in"),
                required,
                schema: Some(schema(&v["schema"])),
            })),
            "path" => ParameterOneof::NonBodyParameter(NonBodyParameter {
                oneof: Some(NonBodyParameterOneof::PathParameterSubSchema(
                    PathParameterSubSchema {
                        required,
                        r#in: field("in"),
                        description: field("description"),
                        name: field("name"),
                        r#type: field("type"),
                        unique_items,
                    },
                )),
            }),
            _ => ParameterOneof::NonBodyParameter(NonBodyParameter {
                oneof: Some(NonBodyParameterOneof::QueryParameterSubSchema(
                    QueryParameterSubSchema {
                        required,
                        r#in: field("in"),
                        description: field("description"),
                        name: field("name"),
                        r#type: field("type"),
                        unique_items,
                    },
                )),
            }),
        };
        Parameter {
            oneof: Some(parameter),
        }
    }

    fn parameters(v: &Value) -> Vec<ParametersItem> {
        v.as_array()
            .map(|a| a.iter().map(parameters_item).collect())
            .unwrap_or_default()
    }

    fn operation(v: &Value) -> Option<Operation> {
        let map = v.as_object()?;
        let responses = map
            .get("responses")
            .and_then(Value::as_object)
            .map(|r| Responses {
                response_code: r
                    .iter()
                    .map(|(code, response)| NamedResponseValue {
                        name: code.clone(),
                        value: Some(ResponseValue {
                            oneof: Some(match json_reference(response) {
                                Some(reference) => ResponseValueOneof::JsonReference(reference),
                                None => ResponseValueOneof::Response(Box::new(Response {
                                    description: text(&response["description"]),
                                    schema: response.get("schema").map(|s| SchemaItem {
                                        oneof: Some(SchemaItemOneof::Schema(schema(s))),
                                    }),
                                })),
                            }),
                        }),
                    })
                    .collect(),
            });
        Some(Operation {
            tags: strings(&v["tags"]),
            description: text(&v["description"]),
            operation_id: text(&v["operationId"]),
            produces: strings(&v["produces"]),
            consumes: strings(&v["consumes"]),
            parameters: parameters(&v["parameters"]),
            responses,
            schemes: strings(&v["schemes"]),
            vendor_extension: extensions(map),
        })
    }

    /// One entry of `paths`.
    pub fn named_path_item(name: &str, item: &Value) -> NamedPathItem {
        NamedPathItem {
            name: name.to_string(),
            value: Some(PathItem {
                get: operation(&item["get"]),
                put: operation(&item["put"]),
                post: operation(&item["post"]),
                delete: operation(&item["delete"]),
                options: operation(&item["options"]),
                head: operation(&item["head"]),
                patch: operation(&item["patch"]),
                parameters: parameters(&item["parameters"]),
            }),
        }
    }

    /// One entry of the shared `parameters`.
    pub fn named_parameter(name: &str, v: &Value) -> NamedParameter {
        NamedParameter {
            name: name.to_string(),
            value: Some(parameter(v)),
        }
    }

    /// Encodes a rendered Swagger 2.0 document in one go (the served encoding is spliced from
    /// per-entry encodings; tests check both agree).
    #[cfg(test)]
    pub fn encode(doc: &Value) -> Vec<u8> {
        document(doc).encode_to_vec()
    }

    /// A rendered Swagger 2.0 document as gnostic's message.
    pub fn document(doc: &Value) -> Document {
        let paths = doc["paths"].as_object().map(|paths| Paths {
            path: paths
                .iter()
                .map(|(name, item)| named_path_item(name, item))
                .collect(),
        });
        let security = doc["security"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_object)
                    .map(|requirement| SecurityRequirement {
                        additional_properties: requirement
                            .iter()
                            .map(|(name, scopes)| NamedStringArray {
                                name: name.clone(),
                                value: Some(StringArray {
                                    value: strings(scopes),
                                }),
                            })
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let security_definitions =
            doc["securityDefinitions"]
                .as_object()
                .map(|defs| SecurityDefinitions {
                    additional_properties: defs
                        .iter()
                        .map(|(name, def)| NamedSecurityDefinitionsItem {
                            name: name.clone(),
                            value: Some(SecurityDefinitionsItem {
                                oneof: Some(SecurityDefinitionsOneof::ApiKeySecurity(
                                    ApiKeySecurity {
                                        r#type: text(&def["type"]),
                                        name: text(&def["name"]),
                                        r#in: text(&def["in"]),
                                        description: text(&def["description"]),
                                    },
                                )),
                            }),
                        })
                        .collect(),
                });
        Document {
            swagger: text(&doc["swagger"]),
            info: Some(Info {
                title: text(&doc["info"]["title"]),
                version: text(&doc["info"]["version"]),
            }),
            paths,
            definitions: Some(Definitions {
                additional_properties: named_schemas(&doc["definitions"]),
            }),
            parameters: doc["parameters"]
                .as_object()
                .map(|shared| ParameterDefinitions {
                    additional_properties: shared
                        .iter()
                        .map(|(name, p)| named_parameter(name, p))
                        .collect(),
                }),
            security,
            security_definitions,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tables extracted from k8s.io/api and k8s.io/apimachinery v0.33.0 (the `+listType`,
// `+listMapKey`, `+patchMergeKey`, `+patchStrategy`, `+mapType` and `+structType` comment
// markers kube-openapi turns into extensions; required fields; list type descriptions), for the
// definitions the known kinds reach. k8s-openapi carries none of the extensions.
// ---------------------------------------------------------------------------------------------

/// (definition, property or `""` for the type itself, extensions as JSON).
const KUBE_EXTENSIONS: &[(&str, &str, &str)] = &[
    (
        "io.k8s.api.authentication.v1.TokenRequestSpec",
        "audiences",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authentication.v1.TokenReviewSpec",
        "audiences",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authentication.v1.TokenReviewStatus",
        "audiences",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authentication.v1.UserInfo",
        "groups",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.FieldSelectorAttributes",
        "requirements",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.LabelSelectorAttributes",
        "requirements",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.NonResourceRule",
        "nonResourceURLs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.NonResourceRule",
        "verbs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.ResourceRule",
        "apiGroups",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.ResourceRule",
        "resourceNames",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.ResourceRule",
        "resources",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.ResourceRule",
        "verbs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.SubjectAccessReviewSpec",
        "groups",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.SubjectRulesReviewStatus",
        "nonResourceRules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.authorization.v1.SubjectRulesReviewStatus",
        "resourceRules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.EndpointAddress",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.EndpointPort",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.EndpointSubset",
        "addresses",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.EndpointSubset",
        "notReadyAddresses",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.EndpointSubset",
        "ports",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.Endpoints",
        "subsets",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.LoadBalancerIngress",
        "ports",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.LoadBalancerStatus",
        "ingress",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.LocalObjectReference",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.NamespaceSpec",
        "finalizers",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        r#"{"x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"type","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.api.core.v1.ObjectReference",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "imagePullSecrets",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "secrets",
        r#"{"x-kubernetes-list-map-keys":["name"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "clusterIPs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "externalIPs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ipFamilies",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "loadBalancerSourceRanges",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        r#"{"x-kubernetes-list-map-keys":["port","protocol"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"port","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "selector",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        "conditions",
        r#"{"x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"type","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.api.discovery.v1.Endpoint",
        "addresses",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.discovery.v1.EndpointHints",
        "forNodes",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.discovery.v1.EndpointHints",
        "forZones",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.discovery.v1.EndpointPort",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.discovery.v1.EndpointSlice",
        "endpoints",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.discovery.v1.EndpointSlice",
        "ports",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.FlowSchemaSpec",
        "rules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.FlowSchemaStatus",
        "conditions",
        r#"{"x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"type","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.NonResourcePolicyRule",
        "nonResourceURLs",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.NonResourcePolicyRule",
        "verbs",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.PolicyRulesWithSubjects",
        "nonResourceRules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.PolicyRulesWithSubjects",
        "resourceRules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.PolicyRulesWithSubjects",
        "subjects",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationStatus",
        "conditions",
        r#"{"x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"type","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.ResourcePolicyRule",
        "apiGroups",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.ResourcePolicyRule",
        "namespaces",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.ResourcePolicyRule",
        "resources",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.flowcontrol.v1.ResourcePolicyRule",
        "verbs",
        r#"{"x-kubernetes-list-type":"set"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.AggregationRule",
        "clusterRoleSelectors",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRole",
        "rules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRoleBinding",
        "subjects",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        "apiGroups",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        "nonResourceURLs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        "resourceNames",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        "resources",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        "verbs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.Role",
        "rules",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.RoleBinding",
        "subjects",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.RoleRef",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.api.rbac.v1.Subject",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
        "serverAddressByClientCIDRs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
        "versions",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
        "groups",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResource",
        "categories",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResource",
        "shortNames",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
        "resources",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
        "serverAddressByClientCIDRs",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
        "versions",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "dryRun",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement",
        "values",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        "matchExpressions",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        "values",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        r#"{"x-kubernetes-list-type":"set","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "managedFields",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        r#"{"x-kubernetes-list-map-keys":["uid"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"uid","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        "",
        r#"{"x-kubernetes-map-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "details",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
        "causes",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec",
        "caBundle",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceStatus",
        "conditions",
        r#"{"x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"type","x-kubernetes-patch-strategy":"merge"}"#,
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec",
        "versions",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        "conditions",
        r#"{"x-kubernetes-list-map-keys":["type"],"x-kubernetes-list-type":"map"}"#,
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        "storedVersions",
        r#"{"x-kubernetes-list-type":"atomic"}"#,
    ),
];

/// Required fields where kube differs from k8s-openapi.
const KUBE_REQUIRED: &[(&str, &[&str])] = &[
    ("io.k8s.api.authentication.v1.SelfSubjectReview", &[]),
    ("io.k8s.api.authentication.v1.TokenRequest", &["spec"]),
    ("io.k8s.api.authentication.v1.TokenReview", &["spec"]),
    (
        "io.k8s.api.authorization.v1.LocalSubjectAccessReview",
        &["spec"],
    ),
    (
        "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
        &["spec"],
    ),
    (
        "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
        &["spec"],
    ),
    ("io.k8s.api.authorization.v1.SubjectAccessReview", &["spec"]),
    ("io.k8s.api.autoscaling.v1.Scale", &[]),
    ("io.k8s.api.coordination.v1.Lease", &[]),
    ("io.k8s.api.core.v1.Binding", &["target"]),
    ("io.k8s.api.core.v1.ConfigMap", &[]),
    ("io.k8s.api.core.v1.Endpoints", &[]),
    ("io.k8s.api.core.v1.LocalObjectReference", &[]),
    ("io.k8s.api.core.v1.Namespace", &[]),
    ("io.k8s.api.core.v1.Secret", &[]),
    ("io.k8s.api.core.v1.Service", &[]),
    ("io.k8s.api.core.v1.ServiceAccount", &[]),
    (
        "io.k8s.api.discovery.v1.EndpointSlice",
        &["addressType", "endpoints"],
    ),
    ("io.k8s.api.events.v1.Event", &["eventTime"]),
    ("io.k8s.api.flowcontrol.v1.FlowSchema", &[]),
    ("io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration", &[]),
    ("io.k8s.api.policy.v1.Eviction", &[]),
    ("io.k8s.api.rbac.v1.ClusterRole", &[]),
    ("io.k8s.api.rbac.v1.ClusterRoleBinding", &["roleRef"]),
    ("io.k8s.api.rbac.v1.Role", &[]),
    ("io.k8s.api.rbac.v1.RoleBinding", &["roleRef"]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", &[]),
    (
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
        &[],
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        &["spec"],
    ),
];

/// (list definition, description, `items` description, `metadata` description).
const KUBE_LIST_DESCRIPTIONS: &[(&str, &str, &str, &str)] = &[
    (
        "io.k8s.api.core.v1.ConfigMapList",
        "ConfigMapList is a resource containing a list of ConfigMap objects.",
        "Items is the list of ConfigMaps.",
        "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    (
        "io.k8s.api.core.v1.SecretList",
        "SecretList is a list of Secret.",
        "Items is a list of secret objects. More info: https://kubernetes.io/docs/concepts/configuration/secret",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    ),
    (
        "io.k8s.api.core.v1.ServiceAccountList",
        "ServiceAccountList is a list of ServiceAccount objects",
        "List of ServiceAccounts. More info: https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    ),
    (
        "io.k8s.api.core.v1.ServiceList",
        "ServiceList holds a list of services.",
        "List of services",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    ),
    (
        "io.k8s.api.core.v1.EndpointsList",
        "EndpointsList is a list of endpoints. Deprecated: This API is deprecated in v1.33+.",
        "List of endpoints.",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    ),
    (
        "io.k8s.api.core.v1.EventList",
        "EventList is a list of events.",
        "List of events",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    ),
    (
        "io.k8s.api.core.v1.NamespaceList",
        "NamespaceList is a list of Namespaces.",
        "Items is the list of Namespace objects in the list. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    ),
    (
        "io.k8s.api.events.v1.EventList",
        "EventList is a list of Event objects.",
        "items is a list of schema objects.",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    (
        "io.k8s.api.coordination.v1.LeaseList",
        "LeaseList is a list of Lease objects.",
        "items is a list of schema objects.",
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    (
        "io.k8s.api.discovery.v1.EndpointSliceList",
        "EndpointSliceList represents a list of endpoint slices",
        "items is the list of endpoint slices",
        "Standard list metadata.",
    ),
    (
        "io.k8s.api.rbac.v1.RoleList",
        "RoleList is a collection of Roles",
        "Items is a list of Roles",
        "Standard object's metadata.",
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRoleList",
        "ClusterRoleList is a collection of ClusterRoles",
        "Items is a list of ClusterRoles",
        "Standard object's metadata.",
    ),
    (
        "io.k8s.api.rbac.v1.RoleBindingList",
        "RoleBindingList is a collection of RoleBindings",
        "Items is a list of RoleBindings",
        "Standard object's metadata.",
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRoleBindingList",
        "ClusterRoleBindingList is a collection of ClusterRoleBindings",
        "Items is a list of ClusterRoleBindings",
        "Standard object's metadata.",
    ),
    (
        "io.k8s.api.flowcontrol.v1.FlowSchemaList",
        "FlowSchemaList is a list of FlowSchema objects.",
        "`items` is a list of FlowSchemas.",
        "`metadata` is the standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    (
        "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationList",
        "PriorityLevelConfigurationList is a list of PriorityLevelConfiguration objects.",
        "`items` is a list of request-priorities.",
        "`metadata` is the standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    (
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceList",
        "APIServiceList is a list of APIService objects.",
        "Items is the list of APIService",
        "Standard list metadata More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionList",
        "CustomResourceDefinitionList is a list of CustomResourceDefinition objects.",
        "items list individual CustomResourceDefinition objects",
        "Standard object's metadata More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::tests::{resource, served_resources};
    use crate::resource::STANDARD_VERBS;

    fn parse(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("documents are JSON")
    }

    fn v3(api: &OpenApi, key: &str) -> Value {
        parse(api.v3_group_version(key).expect(key).0)
    }

    /// Walks every `$ref` and checks its target exists in the document.
    fn assert_refs_resolve(doc: &Value, prefix: &str, container: &[&str]) {
        let mut target = doc;
        for key in container {
            target = &target[*key];
        }
        let mut refs = Vec::new();
        fn walk<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::Object(map) => {
                    for (k, v) in map {
                        if k == "$ref" {
                            out.push(v.as_str().expect("$ref is a string"));
                        } else {
                            walk(v, out);
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        walk(doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let name = r
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("{r} does not start with {prefix}"));
            assert!(target.get(name).is_some(), "dangling $ref {r}");
        }
    }

    /// OpenAPI 3.0 ignores siblings of `$ref`; kube wraps them in `allOf`.
    fn assert_no_ref_siblings(v: &Value) {
        match v {
            Value::Object(map) => {
                if map.contains_key("$ref") {
                    assert_eq!(map.len(), 1, "$ref with siblings: {v}");
                }
                map.values().for_each(assert_no_ref_siblings);
            }
            Value::Array(items) => items.iter().for_each(assert_no_ref_siblings),
            _ => {}
        }
    }

    fn schema_by_gvk<'a>(
        doc: &'a Value,
        group: &str,
        version: &str,
        kind: &str,
    ) -> (&'a str, &'a Value) {
        doc["components"]["schemas"]
            .as_object()
            .expect("schemas")
            .iter()
            .find(|(_, s)| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|l| {
                        l.contains(&json!({ "group": group, "kind": kind, "version": version }))
                    })
            })
            .map(|(n, s)| (n.as_str(), s))
            .unwrap_or_else(|| panic!("no schema for {group}/{version} {kind}"))
    }

    /// Resolves a property schema the way kubectl explain does: through `allOf` and `$ref`.
    fn resolve<'a>(doc: &'a Value, mut schema: &'a Value) -> &'a Value {
        loop {
            if let Some(r) = schema["$ref"].as_str() {
                let name = r.trim_start_matches(V3_REF_PREFIX);
                schema = &doc["components"]["schemas"][name];
            } else if let Some(first) = schema["allOf"].get(0) {
                schema = first;
            } else {
                return schema;
            }
        }
    }

    #[test]
    fn custom_schemas_are_published_in_v2_as_kube_converts_them() {
        let mut schema = json!({"type": "object", "required": ["maybe", "kept"], "properties": {
            "choice": {"type": "object", "oneOf": [{"required": ["a"]}], "properties": {"a": {"type": "string"}}},
            "maybe": {"type": "string", "nullable": true},
            "kept": {"type": "string"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"known": {"type": "string"}}},
            "anything": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                         "items": {"type": "string"}},
        }});
        to_structural_openapi_v2(&mut schema);
        assert_eq!(
            schema,
            json!({"type": "object", "required": ["kept"], "properties": {
                "choice": {"type": "object", "properties": {"a": {"type": "string"}}},
                "maybe": {},
                "kept": {"type": "string"},
                "free": {"x-kubernetes-preserve-unknown-fields": true},
                "anything": {"x-kubernetes-preserve-unknown-fields": true},
            }})
        );
    }

    #[test]
    fn a_property_named_ref_is_not_taken_for_a_reference() {
        // JSONSchemaProps has properties named `$ref` and `allOf`.
        let mut schema = json!({"type": "object", "properties": {
            "$ref": {"type": "string"},
            "allOf": {"type": "array", "items": {"$ref": "#/x"}}}});
        wrap_refs(&mut schema);
        assert_eq!(schema["properties"]["$ref"], json!({"type": "string"}));
        assert_eq!(
            schema["properties"]["allOf"],
            json!({"type": "array", "items": {"$ref": "#/x"}})
        );
        // A reference with siblings is wrapped, as kube-openapi's WrapRefs does.
        let mut described = json!({"$ref": "#/x", "description": "d"});
        wrap_refs(&mut described);
        assert_eq!(
            described,
            json!({"allOf": [{"$ref": "#/x"}], "description": "d"})
        );
    }

    #[test]
    fn v3_index_lists_every_document_with_its_hash() {
        let api = OpenApi::build(&served_resources());
        let (body, etag) = api.v3_index();
        assert_eq!(etag, format!("\"{}\"", sha512_hex(body)));
        let index = parse(body);
        let paths = index["paths"].as_object().expect("paths");
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "api",
                "api/v1",
                "apis",
                "apis/coordination.k8s.io",
                "apis/coordination.k8s.io/v1",
                "apis/discovery.k8s.io",
                "apis/discovery.k8s.io/v1",
                "apis/events.k8s.io",
                "apis/events.k8s.io/v1",
                "version"
            ]
        );
        for (key, entry) in paths {
            let (doc, etag) = api.v3_group_version(key).expect("indexed document");
            let hash = sha512_hex(doc);
            assert_eq!(etag, format!("\"{hash}\""));
            let url = format!("/openapi/v3/{key}?hash={hash}");
            assert_eq!(entry["serverRelativeURL"], url.as_str());
            assert_eq!(api.v3_server_relative_url(key), Some(url));
            // Hashes are upper-case hex SHA-512 like kube-openapi's.
            assert_eq!(hash.len(), 128);
            assert!(hash
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
        }
        assert!(api.v3_group_version("/api/v1/").is_some());
        assert!(api.v3_group_version("apis/apps/v1").is_none());
    }

    #[test]
    fn v3_documents_describe_every_kind() {
        let resources = served_resources();
        let api = OpenApi::build(&resources);
        for r in &resources {
            let key = if r.group.is_empty() {
                format!("api/{}", r.version)
            } else {
                format!("apis/{}/{}", r.group, r.version)
            };
            let doc = v3(&api, &key);
            assert_eq!(doc["openapi"], "3.0.0");
            let (name, schema) = schema_by_gvk(&doc, &r.group, &r.version, &r.kind);
            assert_eq!(name, r.definition);
            assert_eq!(schema["type"], "object");
            assert!(schema["properties"]["metadata"].is_object());
            let (list_name, list) = schema_by_gvk(&doc, &r.group, &r.version, &r.list_kind);
            assert_eq!(list_name, list_definition(r));
            assert_eq!(list["required"], json!(["items"]));

            // The PATCH operation of each kind: strategic merge accepted (kubectl's apply
            // patcher checks) and fieldValidation listed (kubectl then validates server-side).
            let patch = doc["paths"]
                .as_object()
                .expect("paths")
                .values()
                .filter_map(|p| p.get("patch"))
                .find(|op| {
                    op["x-kubernetes-group-version-kind"]
                        == json!({ "group": r.group, "version": r.version, "kind": r.kind })
                })
                .expect("patch operation");
            assert!(patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_some());
            assert!(patch["parameters"]
                .as_array()
                .expect("patch parameters")
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));

            assert_refs_resolve(&doc, V3_REF_PREFIX, &["components", "schemas"]);
            assert_no_ref_siblings(&doc);
        }
        for key in ["api", "apis", "apis/coordination.k8s.io", "version"] {
            let doc = v3(&api, key);
            assert_refs_resolve(&doc, V3_REF_PREFIX, &["components", "schemas"]);
        }
    }

    #[test]
    fn core_v1_operations_match_kube() {
        let api = OpenApi::build(&served_resources());
        let doc = v3(&api, "api/v1");
        let paths = &doc["paths"];
        let op = |path: &str, method: &str| -> &Value {
            let op = &paths[path][method];
            assert!(op.is_object(), "{method} {path}");
            op
        };
        let expected = [
            ("/api/v1/", "get", "getCoreV1APIResources"),
            (
                "/api/v1/configmaps",
                "get",
                "listCoreV1ConfigMapForAllNamespaces",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps",
                "get",
                "listCoreV1NamespacedConfigMap",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps",
                "post",
                "createCoreV1NamespacedConfigMap",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps",
                "delete",
                "deleteCoreV1CollectionNamespacedConfigMap",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                "get",
                "readCoreV1NamespacedConfigMap",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                "put",
                "replaceCoreV1NamespacedConfigMap",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                "patch",
                "patchCoreV1NamespacedConfigMap",
            ),
            (
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                "delete",
                "deleteCoreV1NamespacedConfigMap",
            ),
            (
                "/api/v1/watch/configmaps",
                "get",
                "watchCoreV1ConfigMapListForAllNamespaces",
            ),
            (
                "/api/v1/watch/namespaces/{namespace}/configmaps",
                "get",
                "watchCoreV1NamespacedConfigMapList",
            ),
            (
                "/api/v1/watch/namespaces/{namespace}/configmaps/{name}",
                "get",
                "watchCoreV1NamespacedConfigMap",
            ),
            ("/api/v1/namespaces", "get", "listCoreV1Namespace"),
            ("/api/v1/namespaces", "post", "createCoreV1Namespace"),
            (
                "/api/v1/namespaces/{name}",
                "delete",
                "deleteCoreV1Namespace",
            ),
            (
                "/api/v1/namespaces/{name}/status",
                "get",
                "readCoreV1NamespaceStatus",
            ),
            (
                "/api/v1/namespaces/{name}/status",
                "patch",
                "patchCoreV1NamespaceStatus",
            ),
            (
                "/api/v1/namespaces/{name}/finalize",
                "put",
                "replaceCoreV1NamespaceFinalize",
            ),
            (
                "/api/v1/watch/namespaces",
                "get",
                "watchCoreV1NamespaceList",
            ),
            (
                "/api/v1/namespaces/{namespace}/services/{name}/status",
                "put",
                "replaceCoreV1NamespacedServiceStatus",
            ),
            (
                "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                "post",
                "createCoreV1NamespacedServiceAccountToken",
            ),
            (
                "/api/v1/namespaces/{namespace}/endpoints",
                "post",
                "createCoreV1NamespacedEndpoints",
            ),
        ];
        for (path, method, id) in expected {
            assert_eq!(op(path, method)["operationId"], id, "{method} {path}");
            assert_eq!(op(path, method)["tags"], json!(["core_v1"]));
        }
        // Namespaces have no deletecollection in kube and are cluster scoped.
        assert!(paths["/api/v1/namespaces"].get("delete").is_none());
        assert!(paths
            .get("/api/v1/watch/namespaces/{namespace}/namespaces")
            .is_none());

        assert_eq!(
            op("/api/v1/namespaces/{namespace}/endpoints", "post")["description"],
            "create Endpoints"
        );
        assert_eq!(
            op("/api/v1/namespaces/{namespace}/events", "post")["description"],
            "create an Event"
        );
        assert_eq!(
            op("/api/v1/namespaces/{namespace}/configmaps", "post")["description"],
            "create a ConfigMap"
        );

        let list = op("/api/v1/namespaces/{namespace}/configmaps", "get");
        assert_eq!(list["x-kubernetes-action"], "list");
        let content = list["responses"]["200"]["content"]
            .as_object()
            .expect("content");
        assert_eq!(
            content.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "application/json",
                "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf",
                "application/vnd.kubernetes.protobuf;stream=watch",
                "application/yaml"
            ]
        );
        assert_eq!(
            content["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.ConfigMapList"
        );
        let names: Vec<&str> = list["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "allowWatchBookmarks",
                "continue",
                "fieldSelector",
                "labelSelector",
                "limit",
                "resourceVersion",
                "resourceVersionMatch",
                "sendInitialEvents",
                "timeoutSeconds",
                "watch"
            ]
        );
        // Parameters every operation of a path shares sit on the path.
        let common: Vec<&str> = paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]
            ["parameters"]
            .as_array()
            .expect("path parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(common, ["name", "namespace", "pretty"]);
        let name = &paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]["parameters"][0];
        assert_eq!(
            name,
            &json!({
                "description": "name of the ConfigMap",
                "in": "path",
                "name": "name",
                "required": true,
                "schema": { "type": "string", "uniqueItems": true }
            })
        );
        let finalize: Vec<&str> = paths["/api/v1/namespaces/{name}/finalize"]["parameters"]
            .as_array()
            .expect("finalize parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(
            finalize,
            [
                "dryRun",
                "fieldManager",
                "fieldValidation",
                "name",
                "pretty"
            ]
        );

        let create = op("/api/v1/namespaces/{namespace}/configmaps", "post");
        assert_eq!(create["requestBody"]["required"], true);
        assert_eq!(
            create["requestBody"]["content"]["*/*"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.ConfigMap"
        );
        let delete = op("/api/v1/namespaces/{namespace}/configmaps/{name}", "delete");
        assert!(delete["requestBody"].get("required").is_none());
        assert_eq!(
            delete["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"
        );
        // Services answer DELETE with the deleted Service.
        assert_eq!(
            op("/api/v1/namespaces/{namespace}/services/{name}", "delete")["responses"]["200"]
                ["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Service"
        );
        let token = op(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            "post",
        );
        assert_eq!(
            token["x-kubernetes-group-version-kind"],
            json!({ "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest" })
        );
        let (token_schema, _) = schema_by_gvk(&doc, "authentication.k8s.io", "v1", "TokenRequest");
        assert_eq!(token_schema, "io.k8s.api.authentication.v1.TokenRequest");
        let watch = op(
            "/api/v1/watch/namespaces/{namespace}/configmaps/{name}",
            "get",
        );
        assert!(watch.get("parameters").is_none());
        assert_eq!(watch["x-kubernetes-action"], "watch");
    }

    #[test]
    fn operation_ids_are_unique() {
        let api = OpenApi::build(&served_resources());
        let v2 = parse(api.v2().0);
        let mut seen = BTreeSet::new();
        for item in v2["paths"].as_object().expect("paths").values() {
            for method in METHODS {
                if let Some(id) = item[*method]["operationId"].as_str() {
                    assert!(seen.insert(id.to_string()), "duplicate {id}");
                }
            }
        }
        assert!(seen.len() > 100);
    }

    /// `kubectl explain configmap.data`: find the kind by GVK, walk to the field.
    #[test]
    fn explain_configmap_data() {
        let api = OpenApi::build(&served_resources());
        let doc = v3(&api, "api/v1");
        let (_, configmap) = schema_by_gvk(&doc, "", "v1", "ConfigMap");
        assert_eq!(
            configmap["description"],
            "ConfigMap holds configuration data for pods to consume."
        );
        let data = resolve(&doc, &configmap["properties"]["data"]);
        assert_eq!(data["type"], "object");
        assert_eq!(data["additionalProperties"]["type"], "string");
        assert!(data["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Data contains")));
        // kube requires nothing of a ConfigMap (k8s-openapi claims metadata).
        assert!(configmap.get("required").is_none());
        let metadata = &configmap["properties"]["metadata"];
        assert_eq!(
            metadata["allOf"],
            json!([{ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }])
        );
        let labels = resolve(&doc, &resolve(&doc, metadata)["properties"]["labels"]);
        assert_eq!(labels["additionalProperties"]["type"], "string");
    }

    #[test]
    fn strategic_merge_extensions_match_kube() {
        let api = OpenApi::build(&served_resources());
        let doc = v3(&api, "api/v1");
        let schemas = &doc["components"]["schemas"];
        let meta = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-patch-merge-key"],
            "uid"
        );
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-patch-strategy"],
            "merge"
        );
        assert_eq!(meta["ownerReferences"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-list-map-keys"],
            json!(["uid"])
        );
        assert_eq!(meta["finalizers"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(meta["finalizers"]["x-kubernetes-list-type"], "set");
        assert_eq!(meta["managedFields"]["x-kubernetes-list-type"], "atomic");
        let spec = &schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"];
        assert_eq!(spec["ports"]["x-kubernetes-patch-merge-key"], "port");
        assert_eq!(spec["ports"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(spec["ports"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            spec["ports"]["x-kubernetes-list-map-keys"],
            json!(["port", "protocol"])
        );
        assert_eq!(spec["selector"]["x-kubernetes-map-type"], "atomic");
        assert_eq!(
            schemas["io.k8s.api.core.v1.ObjectReference"]["x-kubernetes-map-type"],
            "atomic"
        );
        let sa = &schemas["io.k8s.api.core.v1.ServiceAccount"]["properties"];
        assert_eq!(sa["secrets"]["x-kubernetes-patch-merge-key"], "name");
        let status = &schemas["io.k8s.api.core.v1.NamespaceStatus"]["properties"];
        assert_eq!(
            status["conditions"]["x-kubernetes-list-map-keys"],
            json!(["type"])
        );
        // An extension on a `$ref` property stays next to the `allOf` wrapper.
        let slice = v3(&api, "apis/discovery.k8s.io/v1");
        let endpoints = &slice["components"]["schemas"]["io.k8s.api.discovery.v1.EndpointSlice"]
            ["properties"]["endpoints"];
        assert_eq!(endpoints["x-kubernetes-list-type"], "atomic");
        // core/v1 Event is the one kind kube requires metadata of (no omitempty in Go).
        let core_event = schemas["io.k8s.api.core.v1.Event"]["required"]
            .as_array()
            .expect("required");
        assert!(core_event.contains(&json!("metadata")));
        assert!(core_event.contains(&json!("involvedObject")));
        let events = v3(&api, "apis/events.k8s.io/v1");
        assert_eq!(
            events["components"]["schemas"]["io.k8s.api.events.v1.Event"]["required"],
            json!(["eventTime"])
        );
    }

    #[test]
    fn int_or_string_and_quantity_follow_kube_openapi() {
        let api = OpenApi::build(&served_resources());
        let doc = v3(&api, "api/v1");
        let ios = &doc["components"]["schemas"][INT_OR_STRING];
        assert_eq!(ios["format"], "int-or-string");
        assert_eq!(
            ios["oneOf"],
            json!([{ "type": "integer" }, { "type": "string" }])
        );
        assert!(ios.get("x-kubernetes-int-or-string").is_none());
        let v2 = parse(api.v2().0);
        let ios = &v2["definitions"][INT_OR_STRING];
        assert_eq!(ios["type"], "string");
        assert_eq!(ios["format"], "int-or-string");
    }

    #[test]
    fn v2_document_has_every_path_and_definition() {
        let resources = served_resources();
        let api = OpenApi::build(&resources);
        let (body, etag) = api.v2();
        assert_eq!(etag, format!("\"{}\"", sha512_hex(body)));
        let doc = parse(body);
        assert_eq!(doc["swagger"], "2.0");
        assert_eq!(doc["security"], json!([{ "BearerToken": [] }]));
        assert_refs_resolve(&doc, V2_REF_PREFIX, &["definitions"]);
        for r in &resources {
            let schema = &doc["definitions"][&r.definition];
            assert!(schema["x-kubernetes-group-version-kind"]
                .as_array()
                .expect("gvk")
                .contains(&json!({ "group": r.group, "kind": r.kind, "version": r.version })));
        }
        for path in [
            "/api/",
            "/apis/",
            "/apis/coordination.k8s.io/",
            "/version/",
            "/api/v1/",
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}",
        ] {
            assert!(doc["paths"].get(path).is_some(), "{path}");
        }
        // Swagger keeps `$ref` siblings and names body parameters.
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(patch["consumes"], json!(PATCH_TYPES));
        assert_eq!(
            patch["parameters"][0],
            json!({
                "in": "body",
                "name": "body",
                "required": true,
                "schema": { "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch" }
            })
        );
        let metadata =
            &doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]["properties"]["metadata"];
        assert_eq!(
            metadata["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(metadata["description"].is_string());
    }

    /// The protobuf form decodes to the same document: every path and definition, GVK and
    /// patch-strategy vendor extensions as YAML (JSON) text.
    #[test]
    fn v2_protobuf_matches_the_json_document() {
        use prost::Message;
        let api = OpenApi::build(&served_resources());
        let json_doc = parse(api.v2().0);
        let (body, etag) = api.v2_protobuf();
        assert_eq!(etag, api.v2().1);
        let doc = gnostic::Document::decode(body.as_ref()).expect("gnostic document");
        assert_eq!(doc.swagger, "2.0");
        let paths = doc.paths.expect("paths").path;
        assert_eq!(
            paths.len(),
            json_doc["paths"].as_object().expect("paths").len()
        );
        let definitions = doc.definitions.expect("definitions").additional_properties;
        assert_eq!(
            definitions.len(),
            json_doc["definitions"]
                .as_object()
                .expect("definitions")
                .len()
        );

        let configmap = definitions
            .iter()
            .find(|d| d.name == "io.k8s.api.core.v1.ConfigMap")
            .and_then(|d| d.value.clone())
            .expect("ConfigMap");
        let gvk = configmap
            .vendor_extension
            .iter()
            .find(|e| e.name == "x-kubernetes-group-version-kind")
            .and_then(|e| e.value.clone())
            .expect("gvk extension");
        let gvk: Value = serde_json::from_str(&gvk.yaml).expect("extension text is JSON");
        assert_eq!(
            gvk,
            json!([{ "group": "", "kind": "ConfigMap", "version": "v1" }])
        );
        let data = configmap
            .properties
            .expect("properties")
            .additional_properties
            .into_iter()
            .find(|p| p.name == "data")
            .and_then(|p| p.value)
            .expect("data");
        assert_eq!(data.r#type.expect("type").value, ["object"]);
        let Some(gnostic::AdditionalPropertiesOneof::Schema(values)) =
            data.additional_properties.and_then(|a| a.oneof)
        else {
            panic!("data values schema");
        };
        assert_eq!(values.r#type.expect("type").value, ["string"]);

        let spec = definitions
            .iter()
            .find(|d| d.name == "io.k8s.api.core.v1.ServiceSpec")
            .and_then(|d| d.value.clone())
            .expect("ServiceSpec");
        let ports = spec
            .properties
            .expect("properties")
            .additional_properties
            .into_iter()
            .find(|p| p.name == "ports")
            .and_then(|p| p.value)
            .expect("ports");
        let merge_key = ports
            .vendor_extension
            .iter()
            .find(|e| e.name == "x-kubernetes-patch-merge-key")
            .and_then(|e| e.value.clone())
            .expect("merge key");
        assert_eq!(merge_key.yaml, "\"port\"");

        let item = paths
            .iter()
            .find(|p| p.name == "/api/v1/namespaces/{namespace}/configmaps/{name}")
            .and_then(|p| p.value.clone())
            .expect("item path");
        let patch = item.patch.expect("patch");
        assert_eq!(patch.operation_id, "patchCoreV1NamespacedConfigMap");
        assert_eq!(patch.consumes, PATCH_TYPES);
        let names: Vec<String> = patch
            .parameters
            .iter()
            .filter_map(|p| match &p.oneof {
                Some(gnostic::ParametersItemOneof::Parameter(gnostic::Parameter {
                    oneof: Some(gnostic::ParameterOneof::BodyParameter(b)),
                })) => Some(b.name.clone()),
                Some(gnostic::ParametersItemOneof::Parameter(gnostic::Parameter {
                    oneof:
                        Some(gnostic::ParameterOneof::NonBodyParameter(gnostic::NonBodyParameter {
                            oneof: Some(gnostic::NonBodyParameterOneof::QueryParameterSubSchema(q)),
                        })),
                })) => Some(q.name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            names,
            ["body", "dryRun", "fieldManager", "fieldValidation", "force"]
        );
        assert_eq!(item.parameters.len(), 3);
        assert!(patch
            .vendor_extension
            .iter()
            .any(|e| e.name == "x-kubernetes-action"));
    }

    #[test]
    fn meta_types_carry_their_kinds() {
        let api = OpenApi::build(&served_resources());
        let doc = v3(&api, "apis/coordination.k8s.io/v1");
        let schemas = &doc["components"]["schemas"];
        let delete = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"]
            ["x-kubernetes-group-version-kind"]
            .as_array()
            .expect("gvks");
        assert!(delete.contains(
            &json!({ "group": "coordination.k8s.io", "kind": "DeleteOptions", "version": "v1" })
        ));
        assert!(delete.contains(&json!({ "group": "", "kind": "DeleteOptions", "version": "v1" })));
        assert_eq!(
            schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Status"]
                ["x-kubernetes-group-version-kind"],
            json!([{ "group": "", "kind": "Status", "version": "v1" }])
        );
        let watch = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"];
        assert_eq!(watch["required"], json!(["type", "object"]));
        for name in [
            "ListMeta",
            "Patch",
            "APIResourceList",
            "Preconditions",
            "StatusDetails",
        ] {
            assert!(schemas.get(format!("{META}.{name}")).is_some(), "{name}");
        }
    }

    /// The resources of an Established CRD in group `g<i>.example.com`, whose `spec.color`
    /// schema has `description`.
    fn crd(i: usize, description: &str) -> Vec<ResourceDef> {
        crate::core::custom_resource::resource_defs(&json!({
            "metadata": {"name": format!("things.g{i}.example.com"), "uid": format!("u{i}")},
            "spec": {"group": format!("g{i}.example.com"), "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "color": {"type": "string", "description": description}}}}}}}]},
            "status": {"acceptedNames": {"plural": "things", "singular": "thing", "kind": "Thing",
                    "listKind": "ThingList"},
                "conditions": [{"type": "Established", "status": "True"}]}
        }))
    }

    /// A rebuild serves exactly what a build from scratch serves, taking every document whose
    /// inputs did not change from the previous build (the same bytes, not rendered again).
    #[test]
    fn a_rebuild_keeps_unchanged_documents_and_equals_a_fresh_build() {
        let mut resources = served_resources();
        resources.extend(crd(1, "a"));
        resources.extend(crd(2, "a"));
        let first = LocalOpenApi::build(&resources);
        // CRD 2's schema changes and CRD 3 comes.
        let mut next = served_resources();
        next.extend(crd(1, "a"));
        next.extend(crd(2, "b"));
        next.extend(crd(3, "a"));
        let rebuilt = LocalOpenApi::rebuild(&next, Some(&first)).openapi();
        let fresh = OpenApi::build(&next);
        assert_eq!(rebuilt.v3_index(), fresh.v3_index());
        let keys: Vec<&str> = fresh.v3_keys().collect();
        assert_eq!(rebuilt.v3_keys().collect::<Vec<_>>(), keys);
        for key in &keys {
            assert_eq!(
                rebuilt.v3_group_version(key),
                fresh.v3_group_version(key),
                "{key}"
            );
        }
        assert_eq!(rebuilt.v2(), fresh.v2());
        assert_eq!(rebuilt.v2_protobuf(), fresh.v2_protobuf());

        let before = first.openapi();
        let body = |api: &OpenApi, key: &str| api.v3_group_version(key).expect(key).0.clone();
        let taken = |key: &str| body(&before, key).as_ptr() == body(&rebuilt, key).as_ptr();
        assert!(taken("api/v1"));
        assert!(taken("apis/g1.example.com/v1"));
        assert!(!taken("apis/g2.example.com/v1"));
        assert_ne!(
            before
                .v3_group_version("apis/g2.example.com/v1")
                .map(|d| d.1),
            rebuilt
                .v3_group_version("apis/g2.example.com/v1")
                .map(|d| d.1)
        );
        let color = |api: &OpenApi| {
            let doc = v3(api, "apis/g2.example.com/v1");
            doc["components"]["schemas"]["com.example.g2.v1.Thing"]["properties"]["spec"]
                ["properties"]["color"]["description"]
                .clone()
        };
        assert_eq!(color(&before), "a");
        assert_eq!(color(&rebuilt), "b");
    }

    /// kube's CRD OpenAPI builder offers no strategic merge patch on custom resources (kubectl's
    /// client-side apply reads this and sends a merge patch); built-in kinds keep it.
    #[test]
    fn custom_resource_patches_offer_no_strategic_merge() {
        let mut resources = served_resources();
        resources.extend(crd(1, "a"));
        let api = OpenApi::build(&resources);
        let doc = v3(&api, "apis/g1.example.com/v1");
        let patches: Vec<&Value> = doc["paths"]
            .as_object()
            .expect("paths")
            .values()
            .filter_map(|p| p.get("patch"))
            .collect();
        assert!(!patches.is_empty());
        for patch in patches {
            let content = patch["requestBody"]["content"]
                .as_object()
                .expect("content");
            let types: Vec<&str> = content.keys().map(String::as_str).collect();
            assert_eq!(
                types,
                [
                    "application/apply-patch+yaml",
                    "application/json-patch+json",
                    "application/merge-patch+json"
                ],
                "{patch}"
            );
        }
        let v2: Value = serde_json::from_slice(api.v2().0).expect("v2 document");
        let path = "/apis/g1.example.com/v1/namespaces/{namespace}/things/{name}";
        assert_eq!(
            v2["paths"][path]["patch"]["consumes"],
            json!(PATCH_TYPES_WITHOUT_STRATEGIC)
        );
        let core = v3(&api, "api/v1");
        let configmap = &core["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert!(configmap["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_some());
    }

    /// kube names the meta types with the built-in scheme: no custom resource group-version is
    /// among `DeleteOptions`' kinds, so a CRD leaves every other document as it was (and the
    /// documents do not grow with the square of the CRD count).
    #[test]
    fn custom_resources_leave_the_other_documents_alone() {
        let base = served_resources();
        let mut with_crds = base.clone();
        with_crds.extend(crd(1, "a"));
        with_crds.extend(crd(2, "a"));
        let (a, b) = (OpenApi::build(&base), OpenApi::build(&with_crds));
        for key in a.v3_keys() {
            assert_eq!(a.v3_group_version(key), b.v3_group_version(key), "{key}");
        }
        let doc = v3(&b, "apis/g1.example.com/v1");
        let gvks = doc["components"]["schemas"][format!("{META}.DeleteOptions")]
            ["x-kubernetes-group-version-kind"]
            .as_array()
            .expect("gvks")
            .clone();
        assert!(gvks.contains(&json!({ "group": "", "kind": "DeleteOptions", "version": "v1" })));
        assert!(
            !gvks
                .iter()
                .any(|g| g["group"] == "g1.example.com" || g["group"] == "g2.example.com"),
            "{gvks:?}"
        );
        // The custom kinds keep their own.
        let (_, thing) = schema_by_gvk(&doc, "g1.example.com", "v1", "Thing");
        assert_eq!(thing["type"], "object");
    }

    /// The Swagger document is assembled on its first request and then kept (and shared by
    /// clones of the documents).
    #[test]
    fn the_swagger_document_is_assembled_on_first_use() {
        let api = OpenApi::build(&served_resources());
        let clone = api.clone();
        assert!(!api.v2_built());
        let (body, etag) = api.v2();
        assert!(!body.is_empty());
        assert_eq!(etag, format!("\"{}\"", sha512_hex(body)));
        assert!(api.v2_built() && clone.v2_built());
        assert_eq!(clone.v2_protobuf().1, etag);
    }

    #[test]
    fn custom_kinds_get_an_open_schema() {
        let mut resources = served_resources();
        resources.push(resource(
            "example.com",
            "v1alpha1",
            "widgets",
            "Widget",
            &["wd"],
            true,
            STANDARD_VERBS,
            vec![crate::discovery::tests::sub(
                "status",
                "Widget",
                &["get", "patch", "update"],
            )],
            "com.example.v1alpha1.Widget",
        ));
        let api = OpenApi::build(&resources);
        let doc = v3(&api, "apis/example.com/v1alpha1");
        let (name, widget) = schema_by_gvk(&doc, "example.com", "v1alpha1", "Widget");
        assert_eq!(name, "com.example.v1alpha1.Widget");
        assert_eq!(widget["x-kubernetes-preserve-unknown-fields"], true);
        let (list, _) = schema_by_gvk(&doc, "example.com", "v1alpha1", "WidgetList");
        assert_eq!(list, "com.example.v1alpha1.WidgetList");
        assert_eq!(
            doc["paths"]["/apis/example.com/v1alpha1/namespaces/{namespace}/widgets"]["get"]
                ["operationId"],
            "listExampleComV1alpha1NamespacedWidget"
        );
        assert_eq!(
            doc["paths"]["/apis/example.com/v1alpha1/namespaces/{namespace}/widgets/{name}/status"]
                ["get"]["tags"],
            json!(["exampleCom_v1alpha1"])
        );
        assert_refs_resolve(&doc, V3_REF_PREFIX, &["components", "schemas"]);
        assert!(api.v3_group_version("apis/example.com").is_some());
    }

    /// Every kind the built-in core server serves has k8s-openapi's schema (no open-object
    /// fallback) and a complete document.
    #[test]
    fn builtin_resources_have_kube_schemas() {
        let resources = crate::core::builtin_resources();
        for r in &resources {
            assert!(
                KNOWN_DEFINITIONS
                    .iter()
                    .any(|(name, _)| *name == r.definition),
                "{} has no k8s-openapi schema",
                r.definition
            );
        }
        let api = OpenApi::build(&resources);
        for key in [
            "api/v1",
            "apis/events.k8s.io/v1",
            "apis/coordination.k8s.io/v1",
            "apis/discovery.k8s.io/v1",
        ] {
            let doc = v3(&api, key);
            assert_refs_resolve(&doc, V3_REF_PREFIX, &["components", "schemas"]);
        }
        let doc = v3(&api, "api/v1");
        for (path, method) in [
            ("/api/v1/namespaces/{name}/finalize", "put"),
            ("/api/v1/namespaces/{name}/status", "patch"),
            (
                "/api/v1/namespaces/{namespace}/services/{name}/status",
                "get",
            ),
        ] {
            assert!(doc["paths"][path][method].is_object(), "{method} {path}");
        }
    }

    /// Replicas must advertise the same `?hash=` URLs, so the bytes must not depend on map order.
    #[test]
    fn build_is_deterministic() {
        let a = OpenApi::build(&served_resources());
        let b = OpenApi::build(&served_resources());
        assert_eq!(a.v3_index(), b.v3_index());
        assert_eq!(a.v2(), b.v2());
    }

    #[test]
    fn known_definitions_are_named_like_kube() {
        for (name, schema_name) in KNOWN_DEFINITIONS {
            assert_eq!(*name, schema_name(), "{name}");
        }
    }

    /// Every table row applies to a definition and property that exists: a row that silently
    /// stops matching (renamed field) would drop a merge key.
    #[test]
    fn kube_tables_match_the_schemas() {
        let mut generator = schema_generator();
        for (name, _) in KNOWN_DEFINITIONS {
            assert!(add_known_definition(&mut generator, name));
        }
        let defs: BTreeMap<String, Value> = generator.take_definitions(false).into_iter().collect();
        for (name, property, extensions) in KUBE_EXTENSIONS {
            let schema = defs.get(*name).unwrap_or_else(|| panic!("{name}"));
            if !property.is_empty() {
                assert!(
                    schema["properties"].get(*property).is_some(),
                    "{name}.{property}"
                );
            }
            let parsed: Value = serde_json::from_str(extensions).expect("extension JSON");
            assert!(parsed.as_object().is_some_and(|m| !m.is_empty()));
        }
        for (name, required) in KUBE_REQUIRED {
            let schema = defs.get(*name).unwrap_or_else(|| panic!("{name}"));
            for field in *required {
                assert!(schema["properties"].get(*field).is_some(), "{name}.{field}");
            }
        }
    }

    #[test]
    fn schema_for_definition_returns_the_closure() {
        let (root, defs) = schema_for_definition("io.k8s.api.core.v1.Service").expect("Service");
        assert_eq!(
            root["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Service"
        );
        let ports = &defs["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "port");
        let mut refs = BTreeSet::new();
        for schema in defs.values() {
            collect_refs(schema, &mut refs);
        }
        for r in refs {
            assert!(defs.contains_key(&r), "{r}");
        }
        assert!(schema_for_definition("com.example.v1.Widget").is_none());
    }

    #[test]
    fn operation_id_words() {
        assert_eq!(
            to_valid_operation_id("rbac.authorization", true),
            "RbacAuthorization"
        );
        assert_eq!(
            to_valid_operation_id("rbac.authorization", false),
            "rbacAuthorization"
        );
        assert_eq!(
            to_valid_operation_id("flowcontrol.apiserver", false),
            "flowcontrolApiserver"
        );
        assert_eq!(to_valid_operation_id("v1beta1", true), "V1beta1");
        assert_eq!(article("Endpoints"), " ");
        assert_eq!(article("Ingress"), " an ");
        assert_eq!(article("Lease"), " a ");
    }
}

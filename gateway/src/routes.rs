//! Routing after authorization: non-resource paths (health, version, metrics, discovery,
//! OpenAPI) and resource paths by group-version to the backend that serves them. Today every
//! group-version is served by the built-in registry; later stages add the APIService table.

use std::sync::Arc;

use arc_swap::ArcSwap;
use kubegate_backends::api::{ApiRequest, ApiResponse};
use kubegate_backends::machinery::restful;
use kubegate_backends::openapi::{v3_document_accepts_json, CONTENT_TYPE_V2_PROTOBUF};
use kubegate_backends::registry::Registry;
use kubegate_backends::status::ApiError;

use crate::aggregator::docs::Docs;
use crate::health::Health;
use crate::metrics::Metrics;

/// The served routes.
pub struct Routes {
    pub registry: Arc<Registry>,
    /// Discovery and OpenAPI, local merged with every remote APIService's; swapped in whole
    /// by the aggregator's document sync.
    pub docs: Arc<ArcSwap<Docs>>,
    pub health: Health,
    pub metrics: Arc<Metrics>,
    pub version: serde_json::Value,
    /// The ServiceAccount issuer's `/.well-known/openid-configuration` and JWKS.
    pub issuer_discovery: Option<(bytes::Bytes, bytes::Bytes)>,
    /// Built-in group-versions switched off by `runtimeConfig`: not served here even though
    /// the registry holds them (kubegate's own controllers still use them).
    pub disabled_group_versions: std::collections::BTreeSet<(String, String)>,
    /// Flow control, for kube's `/debug/api_priority_and_fairness/*` dumps.
    pub flow: Arc<crate::flowcontrol::FlowGate>,
    /// The aggregator, whose delegate discovery requests catch up with after a CRD write.
    pub aggregator: Arc<crate::aggregator::Aggregator>,
}

impl Routes {
    /// Serves one authorized request.
    pub async fn serve(&self, request: ApiRequest) -> ApiResponse {
        if request.info.is_resource_request {
            let info = &request.info;
            // A group-version the registry does not serve is its 404 too (`handle` looks the
            // resource up by group, version and name); only switched-off ones are checked here.
            if self
                .disabled_group_versions
                .iter()
                .any(|(g, v)| *g == info.api_group && *v == info.api_version)
            {
                return ApiError::path_not_found().into();
            }
            return self.registry.handle(request).await;
        }
        let path = request.info.path.as_str();
        if path == "/api" || path == "/apis" || path.starts_with("/apis/") {
            self.aggregator
                .catch_up_with_delegate(&self.registry, &self.docs, false)
                .await;
        } else if path.starts_with("/openapi/") {
            self.aggregator
                .catch_up_with_delegate(&self.registry, &self.docs, true)
                .await;
        }
        self.serve_non_resource(&request)
    }

    /// The go-restful route kube serves `path` with, for the non-resource paths that have one:
    /// `/version`, `/api`, `/api/v1`, the built-in group-versions' `/apis/<group>/<version>`
    /// and the aggregator's own `/apis/apiregistration.k8s.io` (other groups' `/apis/<group>`
    /// is kube-aggregator's plain handler, as is `/apis`; custom resources' discovery is
    /// apiextensions').
    fn restful_route(&self, path: &str) -> Option<restful::Route> {
        let path = path.strip_suffix('/').unwrap_or(path);
        match path {
            "/version" => return Some(restful::Route::document(restful::JSON)),
            "/api" | "/api/v1" | "/apis/apiregistration.k8s.io" => {
                return Some(restful::Route::document(restful::OBJECTS))
            }
            _ => {}
        }
        let (group, version) = path.strip_prefix("/apis/")?.split_once('/')?;
        if version.contains('/')
            || self
                .disabled_group_versions
                .iter()
                .any(|(g, v)| g == group && v == version)
        {
            return None;
        }
        self.registry
            .builtin_resources()
            .iter()
            .any(|def| def.group == group && def.version == version)
            .then(|| restful::Route::document(restful::OBJECTS))
    }

    fn serve_non_resource(&self, request: &ApiRequest) -> ApiResponse {
        let path = request.info.path.as_str();
        // `/version` and the built-in discovery documents are go-restful routes in kube, which
        // answer GET only and check `Accept`; kube's other non-resource handlers (health,
        // metrics, `/apis`, `/apis/<group>`, OpenAPI, the APF dumps) take any method.
        if let Some(route) = self.restful_route(path) {
            let incoming = restful::Incoming {
                method: &request.method,
                content_type: request.content_type.as_deref(),
                accept: request.accept.as_deref(),
                body_len: request.body.len(),
                content_length_sent: request.content_length_sent,
            };
            if let Err(refused) = restful::select(&restful::Routes::one(route), &incoming) {
                return refused.into();
            }
        }
        let docs = self.docs.load();
        if let Some(health) = self.health.serve(path, &request.query) {
            return ApiResponse::with_type(health.status, "text/plain; charset=utf-8", health.body);
        }
        match path {
            // go-restful's route for `/version` matches it with a trailing slash too.
            "/version" | "/version/" => {
                return ApiResponse::json(
                    200,
                    serde_json::to_vec_pretty(&self.version).unwrap_or_default(),
                )
            }
            "/debug/api_priority_and_fairness/dump_priority_levels"
            | "/debug/api_priority_and_fairness/dump_queues"
            | "/debug/api_priority_and_fairness/dump_requests" => {
                // Registered only with APF, as in kube.
                let Some(control) = self.flow.apf() else {
                    return ApiError::path_not_found().into();
                };
                use kubegate_policy::flowcontrol::debug;
                let text = match path.rsplit('/').next() {
                    Some("dump_priority_levels") => debug::dump_priority_levels(control),
                    Some("dump_queues") => debug::dump_queues(control),
                    _ => debug::dump_requests(
                        control,
                        request
                            .query
                            .iter()
                            .find(|(k, _)| k == "includeRequestDetails")
                            .is_some_and(|(_, v)| !v.is_empty()),
                    ),
                };
                return ApiResponse::with_type(200, "text/plain; charset=utf-8", text.into_bytes());
            }
            "/metrics" => {
                return ApiResponse::with_type(
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    self.metrics.render(),
                )
            }
            "/metrics/slis" => {
                return ApiResponse::with_type(
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    self.health.render_slis(),
                )
            }
            "/.well-known/openid-configuration" | "/openid/v1/jwks" => {
                let Some((config, jwks)) = &self.issuer_discovery else {
                    return ApiError::path_not_found().into();
                };
                let (content_type, body) = if path == "/openid/v1/jwks" {
                    ("application/jwk-set+json", jwks.clone())
                } else {
                    ("application/json", config.clone())
                };
                return ApiResponse::with_type(200, content_type, body)
                    .with_header("Cache-Control", "public, max-age=3600".to_string());
            }
            "/openapi/v2" => {
                // client-go's OpenAPISchema() accepts only the protobuf form.
                if wants_openapi_v2_protobuf(request.accept.as_deref()) {
                    let (body, etag) = docs.openapi.v2_protobuf();
                    return etagged(request, CONTENT_TYPE_V2_PROTOBUF, body.clone(), etag);
                }
                let (body, etag) = docs.openapi.v2();
                return etagged(request, "application/json", body.clone(), etag);
            }
            "/openapi/v3" | "/openapi/v3/" => {
                let (body, etag) = docs.openapi.v3_index();
                return etagged(request, "application/json", body.clone(), etag);
            }
            _ => {}
        }
        if let Some(rest) = path.strip_prefix("/openapi/v3/") {
            return openapi_v3_document(&docs, request, rest);
        }
        if let Some(doc) = docs.discovery.respond(path, request.accept.as_deref()) {
            let doc = match doc {
                Ok(doc) => doc,
                Err(not_acceptable) => return not_acceptable.into(),
            };
            // Discovery documents are written through kube's `WriteObjectNegotiated` too.
            let response =
                etagged(request, doc.content_type, doc.body.clone(), doc.etag).negotiated();
            // kube's aggregated discovery handler marks its documents public; the legacy
            // ones keep every response's `no-cache, private`.
            if doc.content_type.contains("apidiscovery.k8s.io") {
                return response.with_header("Cache-Control", "public".to_string());
            }
            return response;
        }
        if self.under_restful_service(path) {
            return ApiError::path_not_found().into();
        }
        // Outside every go-restful web service kube's last handler is Go's `http.NotFound`.
        ApiResponse::with_type(
            404,
            "text/plain; charset=utf-8",
            b"404 page not found\n".to_vec(),
        )
    }

    /// Whether kube answers an unknown `path` from one of its go-restful web services (whose
    /// 404 is a `Status`): `/api/...`, `/version/...`, and a built-in group's `/apis/<group>/...`.
    fn under_restful_service(&self, path: &str) -> bool {
        let under = |root: &str| {
            path.strip_prefix(root)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if under("/api") || under("/version") {
            return true;
        }
        let Some(rest) = path.strip_prefix("/apis/") else {
            return false;
        };
        let group = rest.split('/').next().unwrap_or("");
        !group.is_empty()
            && self
                .registry
                .builtin_resources()
                .iter()
                .any(|def| def.group == group)
    }
}

/// `/openapi/v3/<group-version>`: with the `?hash=` the index advertises it is immutable
/// and cached for a year; with a stale hash it redirects to the current one, as
/// kube-apiserver does.
fn openapi_v3_document(docs: &Docs, request: &ApiRequest, key: &str) -> ApiResponse {
    let Some((body, etag)) = docs.openapi.v3_group_version(key) else {
        return ApiError::path_not_found().into();
    };
    if !v3_document_accepts_json(request.accept.as_deref()) {
        // kube-openapi answers an unacceptable Accept with a bare 406: no body, no type.
        return ApiResponse::with_type(406, "", Vec::new())
            .with_header("Vary", "Accept".to_string());
    }
    // The answer depends on Accept (kube can answer protobuf too).
    let response = match request.param("hash") {
        None => etagged(request, "application/json", body.clone(), etag),
        Some(hash) if etag.trim_matches('"') == hash => {
            etagged(request, "application/json", body.clone(), etag)
                .with_header("Cache-Control", "public, immutable".to_string())
                .with_header("Expires", one_year_from_now())
        }
        Some(_) => match docs.openapi.v3_server_relative_url(key) {
            Some(url) => ApiResponse::with_type(301, "text/plain; charset=utf-8", Vec::new())
                .with_header("Location", url),
            None => ApiError::path_not_found().into(),
        },
    };
    response.with_header("Vary", "Accept".to_string())
}

fn one_year_from_now() -> String {
    (chrono::Utc::now() + chrono::Duration::days(365))
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// Whether the client prefers the protobuf OpenAPI v2 document over JSON.
fn wants_openapi_v2_protobuf(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    for clause in accept.split(',') {
        let media = clause.split(';').next().unwrap_or("").trim();
        if media == "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            || media == CONTENT_TYPE_V2_PROTOBUF
        {
            return true;
        }
        if media == "application/json" || media == "*/*" {
            return false;
        }
    }
    false
}

/// A cacheable document with its ETag; 304 when the client already holds it: its
/// `If-None-Match` is that ETag (kube compares the whole header with it, so neither `*` nor
/// a list of tags revalidates).
fn etagged(
    request: &ApiRequest,
    content_type: &str,
    body: bytes::Bytes,
    etag: &str,
) -> ApiResponse {
    let cached = request
        .if_none_match
        .as_deref()
        .is_some_and(|v| v.trim() == etag);
    let response = if cached {
        ApiResponse::with_type(304, content_type, bytes::Bytes::new())
    } else {
        ApiResponse::with_type(200, content_type, body)
    };
    response
        .with_header("ETag", etag.to_string())
        .with_header("Vary", "Accept".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_v2_only_when_preferred() {
        assert!(wants_openapi_v2_protobuf(Some(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        )));
        assert!(!wants_openapi_v2_protobuf(Some(
            "application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        )));
        assert!(!wants_openapi_v2_protobuf(None));
    }
}

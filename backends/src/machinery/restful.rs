//! go-restful's route selection, as kube-apiserver applies it before any handler runs to its
//! built-in resources, their discovery documents and `/version`: a method no route serves is
//! a 405, a body whose `Content-Type` no route consumes a 415, and an `Accept` no route
//! produces a 406 listing what the route does produce. kube's `serviceErrorHandler` turns
//! these into `Status` bodies: go-restful's own wording for 406 and 415, the generic one for
//! 405 (and no `Allow` header). Custom resources, `/apis`, `/apis/<group>` and the OpenAPI
//! documents are served by plain handlers in kube and are not checked here.

use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};
use kubegate_policy::RequestInfo;

/// What kube's resource and discovery routes produce (`MediaTypesForSerializer`, CBOR off).
pub const OBJECTS: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// What a route that can also watch produces: [`OBJECTS`] and the streaming types.
pub const OBJECTS_AND_STREAMS: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
];

/// What `/version` produces and consumes.
pub const JSON: &[&str] = &["application/json"];

/// What a PATCH route consumes (kube's patch types, CBOR off).
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// One go-restful route on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    pub produces: &'static [&'static str],
    /// `None`: anything (`*/*`), as every resource route but PATCH.
    pub consumes: Option<&'static [&'static str]>,
}

impl Route {
    /// A GET route of a discovery document: produces and consumes `types`.
    pub const fn document(types: &'static [&'static str]) -> Route {
        Route {
            method: "GET",
            produces: types,
            consumes: Some(types),
        }
    }

    const fn resource(method: &'static str, produces: &'static [&'static str]) -> Route {
        let consumes = if matches!(method.as_bytes(), b"PATCH") {
            Some(PATCH_TYPES)
        } else {
            None
        };
        Route {
            method,
            produces,
            consumes,
        }
    }
}

/// The routes on one path: at most four (an item's GET, PUT, PATCH and DELETE).
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: [Option<Route>; 4],
}

impl Routes {
    fn push(&mut self, route: Route) {
        if let Some(slot) = self.routes.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(route);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().flatten()
    }

    fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The routes `keep` keeps.
    fn filtered(&self, keep: impl Fn(&Route) -> bool) -> Routes {
        let mut kept = Routes::default();
        for route in self.iter().filter(|route| keep(route)) {
            kept.push(*route);
        }
        kept
    }

    /// One route.
    pub fn one(route: Route) -> Routes {
        let mut routes = Routes::default();
        routes.push(route);
        routes
    }
}

/// What go-restful looks at in a request.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub method: &'a str,
    pub content_type: Option<&'a str>,
    pub accept: Option<&'a str>,
    /// The body's length.
    pub body_len: usize,
    /// Whether the request has a `Content-Length` header (go-restful's bodiless-write check
    /// reads the header, not the body).
    pub content_length_sent: bool,
}

/// The routes kube registers for `def` on the path `info` names, or `None` where kubegate
/// does not model them (custom resources, and subresources other than `status` and `scale`,
/// whose handlers check their own methods).
pub fn resource_routes(def: &ResourceDef, info: &RequestInfo) -> Option<Routes> {
    if def.strategy.is_custom_resource() {
        return None;
    }
    let mut routes = Routes::default();
    let can = |verb: &str| def.supports_verb(verb);
    if !info.subresource.is_empty() {
        if !matches!(info.subresource.as_str(), "status" | "scale") {
            return None;
        }
        let sub = def
            .subresources
            .iter()
            .find(|s| s.name == info.subresource)?;
        for (verb, method) in [("get", "GET"), ("update", "PUT"), ("patch", "PATCH")] {
            if sub.verbs.contains(&verb) {
                routes.push(Route::resource(method, OBJECTS));
            }
        }
        return Some(routes);
    }
    if is_watch_path(info) {
        if can("watch") {
            routes.push(Route::resource("GET", OBJECTS_AND_STREAMS));
        }
        return Some(routes);
    }
    // `/api/v1/namespaces/<name>` names the namespace itself (namespace = name, as in kube).
    let namespace_object =
        def.group.is_empty() && def.plural == "namespaces" && info.namespace == info.name;
    let no_such_path = if def.namespaced {
        info.namespace.is_empty() && !info.name.is_empty()
    } else {
        !info.namespace.is_empty() && !namespace_object
    };
    if no_such_path {
        // A 404, which the registry answers.
        return None;
    }
    if info.name.is_empty() {
        if can("list") {
            routes.push(Route::resource("GET", OBJECTS_AND_STREAMS));
        }
        // The all-namespaces path of a namespaced resource serves only LIST (and WATCH).
        if !(def.namespaced && info.namespace.is_empty()) {
            if can("create") {
                routes.push(Route::resource("POST", OBJECTS));
            }
            if can("deletecollection") {
                routes.push(Route::resource("DELETE", OBJECTS));
            }
        }
        return Some(routes);
    }
    for (verb, method) in [
        ("get", "GET"),
        ("update", "PUT"),
        ("patch", "PATCH"),
        ("delete", "DELETE"),
    ] {
        if can(verb) {
            routes.push(Route::resource(method, OBJECTS));
        }
    }
    Some(routes)
}

/// The deprecated `/watch/` path form (`/api/v1/watch/...`, `/apis/<g>/<v>/watch/...`).
fn is_watch_path(info: &RequestInfo) -> bool {
    // Only that form, or `?watch=true`, makes a watch; most requests stop here.
    if info.verb != "watch" {
        return false;
    }
    let under_version = || {
        let rest = info
            .path
            .strip_prefix('/')?
            .strip_prefix(info.api_prefix.as_str())?
            .strip_prefix('/')?;
        let rest = if info.api_group.is_empty() {
            rest
        } else {
            rest.strip_prefix(info.api_group.as_str())?
                .strip_prefix('/')?
        };
        rest.strip_prefix(info.api_version.as_str())?
            .strip_prefix('/')
    };
    under_version().is_some_and(|rest| rest == "watch" || rest.starts_with("watch/"))
}

/// go-restful's `detectRoute` after the path has matched: the method, then the body's
/// `Content-Type`, then `Accept`.
pub fn select(routes: &Routes, request: &Incoming<'_>) -> ApiResult<()> {
    // Filtered into fixed arrays: this runs for every built-in resource request.
    let by_method = routes.filtered(|route| route.method == request.method);
    if by_method.is_empty() {
        return Err(with_empty_details(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )));
    }
    // An empty type passes for the methods that seldom carry a body; for the others it is
    // `application/octet-stream`, which no kube route consumes.
    let content_type = match request.content_type.map(str::trim).unwrap_or("") {
        "" if matches!(
            request.method,
            "GET" | "HEAD" | "OPTIONS" | "DELETE" | "TRACE"
        ) =>
        {
            None
        }
        "" => Some("application/octet-stream"),
        given => Some(given),
    };
    let by_type = by_method.filtered(|route| match (content_type, route.consumes) {
        (None, _) | (_, None) => true,
        (Some(given), Some(consumes)) => media_types(given).any(|t| consumes.contains(&t)),
    });
    if by_type.is_empty() && request.body_len > 0 {
        return Err(with_empty_details(ApiError::new(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
        )));
    }
    // No Accept means anything; parameters (q included) are not compared, and only an exact
    // type or `*/*` matches (`application/*` does not).
    let accept = request
        .accept
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .unwrap_or("*/*");
    let acceptable = by_type.iter().any(|route| {
        media_types(accept).any(|wanted| wanted == "*/*" || route.produces.contains(&wanted))
    });
    if acceptable {
        return Ok(());
    }
    let available = by_type
        .iter()
        .flat_map(|route| route.produces.iter().copied())
        .collect::<Vec<_>>()
        .join(", ");
    let bodiless_write =
        matches!(request.method, "POST" | "PUT" | "PATCH") && !request.content_length_sent;
    let error = if bodiless_write {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("415: Unsupported Media Type\n\nAvailable representations: {available}"),
        )
    } else {
        ApiError::new(
            406,
            "NotAcceptable",
            format!("406: Not Acceptable\n\nAvailable representations: {available}"),
        )
    };
    Err(with_empty_details(error))
}

/// The media types of a header value, without parameters: `a/b;q=1, c/d` gives `a/b`, `c/d`.
fn media_types(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(',')
        .map(|clause| clause.split(';').next().unwrap_or("").trim_matches(' '))
}

/// kube's `NewGenericServerResponse` always sets (empty) details.
fn with_empty_details(mut error: ApiError) -> ApiError {
    error.details = Some(Box::default());
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{apiregistration, configmaps, namespaces};

    fn info(method: &str, path: &str) -> RequestInfo {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        kubegate_policy::request_info::resolve(method, path, query).expect("request info")
    }

    /// What a request to `path` of `def` gets: `Ok` when a route takes it.
    fn answer(
        def: &ResourceDef,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body_len: usize,
    ) -> ApiResult<()> {
        let routes = resource_routes(def, &info(method, path)).expect("modelled routes");
        select(
            &routes,
            &Incoming {
                method,
                content_type,
                accept,
                body_len,
                content_length_sent: body_len > 0,
            },
        )
    }

    const ITEM: &str = "/api/v1/namespaces/default/configmaps/one";
    const COLLECTION: &str = "/api/v1/namespaces/default/configmaps";
    const OBJECTS_LIST: &str =
        "application/json, application/yaml, application/vnd.kubernetes.protobuf";

    #[test]
    fn an_unacceptable_type_lists_what_the_route_produces() {
        let def = configmaps::def();
        let error = answer(&def, "GET", ITEM, None, Some("text/html"), 0).expect_err("406");
        assert_eq!((error.code, error.reason), (406, "NotAcceptable"));
        assert_eq!(
            error.message,
            format!("406: Not Acceptable\n\nAvailable representations: {OBJECTS_LIST}")
        );
        assert_eq!(error.details, Some(Box::default()));
        // A collection's GET also lists and watches.
        let error = answer(&def, "GET", COLLECTION, None, Some("text/html"), 0).expect_err("406");
        assert_eq!(
            error.message,
            format!(
                "406: Not Acceptable\n\nAvailable representations: {OBJECTS_LIST}, \
                 application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
            )
        );
    }

    #[test]
    fn accept_matches_exact_types_or_anything() {
        let def = configmaps::def();
        for accept in [
            None,
            Some(""),
            Some("*/*"),
            Some("application/json"),
            // Parameters, q included, are not compared.
            Some("application/json;q=0"),
            Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Some("text/html, application/vnd.kubernetes.protobuf"),
            Some("application/yaml"),
        ] {
            assert_eq!(
                answer(&def, "GET", ITEM, None, accept, 0),
                Ok(()),
                "{accept:?}"
            );
        }
        // A wildcard subtype is not a match, as in go-restful.
        for accept in ["application/*", "*/json", "APPLICATION/JSON", "text/plain"] {
            let error = answer(&def, "GET", ITEM, None, Some(accept), 0).expect_err(accept);
            assert_eq!(error.code, 406, "{accept}");
        }
    }

    #[test]
    fn a_method_without_a_route_is_405_in_kubes_words() {
        let def = configmaps::def();
        for (method, path) in [
            ("PUT", COLLECTION),
            ("PATCH", COLLECTION),
            ("POST", ITEM),
            ("HEAD", ITEM),
            ("OPTIONS", COLLECTION),
            // The all-namespaces and `/watch/` paths only read.
            ("POST", "/api/v1/configmaps"),
            ("DELETE", "/api/v1/configmaps"),
            ("DELETE", "/api/v1/watch/namespaces/default/configmaps"),
        ] {
            let error =
                answer(&def, method, path, None, Some("application/json"), 0).expect_err(path);
            assert_eq!(
                (error.code, error.reason, error.message.as_str()),
                (
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource"
                ),
                "{method} {path}"
            );
            assert_eq!(error.details, Some(Box::default()));
        }
        for (method, path) in [
            ("GET", COLLECTION),
            ("POST", COLLECTION),
            ("DELETE", COLLECTION),
            ("GET", ITEM),
            ("PUT", ITEM),
            ("DELETE", ITEM),
            ("GET", "/api/v1/configmaps"),
            ("GET", "/api/v1/watch/namespaces/default/configmaps/one"),
        ] {
            let body = usize::from(matches!(method, "POST" | "PUT")) * 2;
            let content_type = (body > 0).then_some("application/json");
            assert_eq!(
                answer(&def, method, path, content_type, None, body),
                Ok(()),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn a_write_without_a_length_that_cannot_be_answered_is_415() {
        let def = configmaps::def();
        let routes = resource_routes(&def, &info("POST", COLLECTION)).expect("routes");
        let request = |content_length_sent| Incoming {
            method: "POST",
            content_type: None,
            accept: Some("text/html"),
            body_len: 0,
            content_length_sent,
        };
        let error = select(&routes, &request(false)).expect_err("415");
        assert_eq!((error.code, error.reason), (415, "UnsupportedMediaType"));
        assert_eq!(
            error.message,
            format!("415: Unsupported Media Type\n\nAvailable representations: {OBJECTS_LIST}")
        );
        // With `Content-Length: 0` it is the 406 (go-restful 3.11, kube 1.32 and 1.33).
        assert_eq!(select(&routes, &request(true)).expect_err("406").code, 406);
    }

    #[test]
    fn patch_consumes_only_patch_types() {
        let def = configmaps::def();
        for content_type in [
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/strategic-merge-patch+json; charset=utf-8",
            "application/apply-patch+yaml",
        ] {
            assert_eq!(
                answer(&def, "PATCH", ITEM, Some(content_type), None, 2),
                Ok(()),
                "{content_type}"
            );
        }
        let error =
            answer(&def, "PATCH", ITEM, Some("application/json"), None, 2).expect_err("415");
        assert_eq!(
            (error.code, error.message.as_str()),
            (415, "415: Unsupported Media Type")
        );
        // No type is `application/octet-stream`; with no body either, no route is left to
        // answer in any type: go-restful's bodiless-write 415, with nothing to offer.
        let error = answer(&def, "PATCH", ITEM, None, None, 0).expect_err("415");
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                415,
                "415: Unsupported Media Type\n\nAvailable representations: "
            )
        );
        // The same with `Content-Length: 0`: the 406.
        let routes = resource_routes(&def, &info("PATCH", ITEM)).expect("routes");
        let error = select(
            &routes,
            &Incoming {
                method: "PATCH",
                content_type: None,
                accept: None,
                body_len: 0,
                content_length_sent: true,
            },
        )
        .expect_err("406");
        assert_eq!(
            (error.code, error.message.as_str()),
            (406, "406: Not Acceptable\n\nAvailable representations: ")
        );
    }

    #[test]
    fn status_and_watch_paths() {
        let def = apiregistration::def();
        let path = "/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com/status";
        let routes = resource_routes(&def, &info("GET", path)).expect("routes");
        let methods: Vec<&str> = routes.iter().map(|r| r.method).collect();
        assert_eq!(methods, ["GET", "PUT", "PATCH"]);
        // A group's `/watch/` path only reads, and lists what a watch produces.
        let path = "/apis/apiregistration.k8s.io/v1/watch/apiservices";
        let routes = resource_routes(&def, &info("DELETE", path)).expect("routes");
        assert_eq!(
            routes.iter().copied().collect::<Vec<_>>(),
            [Route::resource("GET", OBJECTS_AND_STREAMS)]
        );
        // `?watch=true` on the collection is its LIST route, which takes writes beside it.
        let path = "/apis/apiregistration.k8s.io/v1/apiservices?watch=true";
        let routes = resource_routes(&def, &info("GET", path)).expect("routes");
        let methods: Vec<&str> = routes.iter().map(|r| r.method).collect();
        assert_eq!(methods, ["GET", "POST", "DELETE"]);
    }

    #[test]
    fn the_namespace_path_is_the_namespace_object() {
        let def = namespaces::def();
        let routes =
            resource_routes(&def, &info("GET", "/api/v1/namespaces/default")).expect("routes");
        let methods: Vec<&str> = routes.iter().map(|r| r.method).collect();
        assert_eq!(methods, ["GET", "PUT", "PATCH", "DELETE"]);
    }

    #[test]
    fn paths_the_registry_answers_itself_are_not_modelled() {
        // A namespaced object without its namespace: the registry's 404.
        let def = configmaps::def();
        assert!(resource_routes(&def, &info("GET", "/api/v1/configmaps/one")).is_none());
        let crd = serde_json::json!({
            "metadata": {"name": "widgets.example.com", "uid": "u1"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"acceptedNames": {"plural": "widgets", "singular": "widget",
                    "kind": "Widget", "listKind": "WidgetList"},
                "conditions": [{"type": "Established", "status": "True"}]}
        });
        let custom = crate::core::custom_resource::resource_defs(&crd);
        let widget = custom.first().expect("a def");
        let path = "/apis/example.com/v1/namespaces/default/widgets";
        assert!(resource_routes(widget, &info("PUT", path)).is_none());
    }
}

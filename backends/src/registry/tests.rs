//! Registry behaviour over a real embedded store: resourceVersion rules, pagination,
//! selectors, conflicts, dry runs, field validation, finalizers and namespace lifecycle.

use std::sync::Arc;

use bytes::Bytes;
use kubegate_policy::{RequestInfo, UserInfo};
use serde_json::{json, Value};

use super::{Registry, RegistryOptions};
use crate::api::{ApiRequest, ApiResponse};
use crate::storage::cacher::Cacher;
use crate::storage::embedded::{EmbeddedOptions, EmbeddedStore};

pub(super) struct Fixture {
    pub(super) registry: Registry,
    _dir: tempfile::TempDir,
}

pub(super) async fn fixture() -> Fixture {
    fixture_with_history(1000).await
}

/// A fixture whose watch cache keeps `history` events.
async fn fixture_with_history(history: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store =
        EmbeddedStore::open(&dir.path().join("s.redb"), EmbeddedOptions::default()).unwrap();
    let cacher = Cacher::start(store, history).await.unwrap();
    let registry = Registry::new(
        crate::core::builtin_resources(),
        cacher,
        RegistryOptions::default(),
    );
    registry.ensure_default_namespaces().await.unwrap();
    Fixture {
        registry,
        _dir: dir,
    }
}

/// Builds a request the way the gateway would for `method path?query`.
pub(super) fn request(
    method: &str,
    path_and_query: &str,
    body: Option<Value>,
    content_type: &str,
) -> ApiRequest {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let info: RequestInfo = kubegate_policy::request_info::resolve(method, path, query).unwrap();
    ApiRequest {
        method: method.into(),
        info: info.into(),
        query: kubegate_policy::request_info::parse_query(query),
        content_type: Some(content_type.into()),
        content_length_sent: true,
        user_agent: None,
        accept: Some("application/json".into()),
        if_none_match: None,
        body: body.map(|b| Bytes::from(b.to_string())).unwrap_or_default(),
        user: Arc::new(UserInfo::new("admin", vec!["system:masters".into()])),
    }
}

pub(super) async fn call(
    f: &Fixture,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    call_typed(f, method, path, body, "application/json").await
}

async fn call_typed(
    f: &Fixture,
    method: &str,
    path: &str,
    body: Option<Value>,
    ct: &str,
) -> (u16, Value) {
    call_raw(f, request(method, path, body, ct)).await
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": name}})
}

/// The names of a list's items, in order (none for a list without items).
fn names_of(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The names of a list's items, in order.
fn names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn resource_version_rules_for_get_and_list() {
    let f = fixture().await;
    let (code, a) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    assert_eq!(code, 201);
    // A PATCH must name its patch type: plain JSON is 415.
    let (code, _) = call(
        &f,
        "PATCH",
        &format!("{CMS}/a"),
        Some(json!({"data": {"k": "2"}})),
    )
    .await;
    assert_eq!(code, 415);
    let (code, patched) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/a"),
        Some(json!({"data": {"k": "2"}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert!(rv(&patched) > rv(&a));

    // Unset (a consistent read, first), 0 and an older version: the latest. (A GET has no
    // resourceVersionMatch in kube; see get_reads_only_the_resource_version_...)
    for q in [
        "",
        "?resourceVersion=0",
        &format!("?resourceVersion={}", rv(&a)),
    ] {
        let (code, now) = call(&f, "GET", &format!("{CMS}/a{q}"), None).await;
        assert_eq!(code, 200);
        assert_eq!(now["data"]["k"], "2", "query {q}");
    }
    // resourceVersionMatch without resourceVersion is invalid.
    let (code, s) = call(
        &f,
        "GET",
        &format!("{CMS}?resourceVersionMatch=Exact"),
        None,
    )
    .await;
    assert_eq!(code, 422, "{s}");
    // A list at an exact older revision does not contain later objects.
    call(&f, "POST", CMS, Some(cm("b", json!({})))).await;
    let (code, list) = call(
        &f,
        "GET",
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&a)
        ),
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a"]);
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["metadata"]["resourceVersion"], rv(&a).to_string());
    // A garbage resourceVersion is a 400.
    let (code, _) = call(&f, "GET", &format!("{CMS}?resourceVersion=abc"), None).await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn pagination_is_consistent_at_the_first_page_revision() {
    let f = fixture().await;
    for i in 0..5 {
        call(&f, "POST", CMS, Some(cm(&format!("cm{i}"), json!({})))).await;
    }
    let (_, page1) = call(&f, "GET", &format!("{CMS}?limit=2"), None).await;
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    assert_eq!(page1["metadata"]["remainingItemCount"], 3);
    let token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    // A write between pages is not visible in later pages.
    call(&f, "POST", CMS, Some(cm("cm9", json!({})))).await;
    call(&f, "DELETE", &format!("{CMS}/cm3"), None).await;
    let mut names = Vec::new();
    let mut token = Some(token);
    while let Some(t) = token {
        let (code, page) = call(&f, "GET", &format!("{CMS}?limit=2&continue={t}"), None).await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(
            page["metadata"]["resourceVersion"],
            page1["metadata"]["resourceVersion"]
        );
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string()),
        );
        token = page["metadata"]["continue"].as_str().map(str::to_string);
    }
    assert_eq!(names, ["cm2", "cm3", "cm4"]);
    // A full last page has no token; with a selector, a page that ends before the last
    // object has one even when nothing after it matches (kube's cacher), and no count.
    let (_, last) = call(&f, "GET", &format!("{CMS}?limit=6"), None).await;
    assert!(last["metadata"].get("continue").is_none(), "{last}");
    call(&f, "POST", CMS, Some(cm("cm0a", json!({"pick": "yes"})))).await;
    let (_, page) = call(
        &f,
        "GET",
        &format!("{CMS}?limit=1&labelSelector=pick"),
        None,
    )
    .await;
    assert_eq!(names_of(&page), ["cm0a"]);
    assert!(page["metadata"]["continue"].is_string(), "{page}");
    assert!(
        page["metadata"].get("remainingItemCount").is_none(),
        "{page}"
    );
    let token = page["metadata"]["continue"].as_str().unwrap_or_default();
    let (_, next) = call(
        &f,
        "GET",
        &format!("{CMS}?limit=1&labelSelector=pick&continue={token}"),
        None,
    )
    .await;
    assert!(names_of(&next).is_empty(), "{next}");
    assert!(next["metadata"].get("continue").is_none(), "{next}");
    // continue with resourceVersion is refused; a forged token is a 400.
    let (code, _) = call(&f, "GET", &format!("{CMS}?limit=2&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhIn0=&resourceVersion=1"), None).await;
    assert_eq!(code, 400);
    let (code, _) = call(&f, "GET", &format!("{CMS}?continue=!!"), None).await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn a_limited_list_at_a_resource_version_reads_that_revision_exactly() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let (_, b) = call(&f, "POST", CMS, Some(cm("b", json!({})))).await;
    let at = rv(&b);
    call(&f, "DELETE", &format!("{CMS}/a"), None).await;
    // kube's legacy rule: with a limit and no resourceVersionMatch, the revision is exact.
    let (code, list) = call(
        &f,
        "GET",
        &format!("{CMS}?resourceVersion={at}&limit=5"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["a", "b"]);
    assert_eq!(list["metadata"]["resourceVersion"], at.to_string());
    // Without a limit, or with NotOlderThan, any state at least that recent will do: once the
    // cache has the delete (a consistent list waits for it), that is the current one.
    let (_, current) = call(&f, "GET", CMS, None).await;
    assert_eq!(names(&current), ["b"]);
    for query in [
        format!("resourceVersion={at}"),
        format!("resourceVersion={at}&limit=5&resourceVersionMatch=NotOlderThan"),
    ] {
        let (code, list) = call(&f, "GET", &format!("{CMS}?{query}"), None).await;
        assert_eq!(code, 200, "{query}: {list}");
        assert_eq!(names(&list), ["b"], "{query}");
    }
}

/// A `metadata.name` field selector across namespaces lists every namespace's object of
/// that name (kube: the name only serves authorization); a name in such a path is no route.
#[tokio::test]
async fn a_name_selector_across_namespaces_lists_every_namespace() {
    let f = fixture().await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}});
    assert_eq!(
        call(&f, "POST", "/api/v1/namespaces", Some(ns)).await.0,
        201
    );
    call(&f, "POST", CMS, Some(cm("app", json!({})))).await;
    call(&f, "POST", CMS, Some(cm("other", json!({})))).await;
    let cms_b = "/api/v1/namespaces/team-b/configmaps";
    assert_eq!(
        call(&f, "POST", cms_b, Some(cm("app", json!({})))).await.0,
        201
    );
    let (code, list) = call(
        &f,
        "GET",
        "/api/v1/configmaps?fieldSelector=metadata.name%3Dapp",
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let found: Vec<(&str, &str)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["metadata"]["namespace"].as_str().unwrap_or(""),
                i["metadata"]["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(found, [("default", "app"), ("team-b", "app")]);
    // The same name as the resource is still a selector, not a path segment.
    let (code, _) = call(
        &f,
        "GET",
        "/api/v1/configmaps?fieldSelector=metadata.name%3Dconfigmaps",
        None,
    )
    .await;
    assert_eq!(code, 200);
    for path in ["/api/v1/configmaps/app", "/api/v1/watch/configmaps/app"] {
        let (code, status) = call(&f, "GET", path, None).await;
        assert_eq!(code, 404, "{path}: {status}");
    }
}

#[tokio::test]
async fn selectors_filter_lists() {
    let f = fixture().await;
    call(
        &f,
        "POST",
        CMS,
        Some(cm("web", json!({"tier": "web", "env": "prod"}))),
    )
    .await;
    call(
        &f,
        "POST",
        CMS,
        Some(cm("db", json!({"tier": "db", "env": "prod"}))),
    )
    .await;
    call(&f, "POST", CMS, Some(cm("bare", json!({})))).await;
    let (_, l) = call(&f, "GET", &format!("{CMS}?labelSelector=tier%3Dweb"), None).await;
    assert_eq!(names(&l), ["web"]);
    let (_, l) = call(
        &f,
        "GET",
        &format!("{CMS}?labelSelector=tier%20in%20(web,db)"),
        None,
    )
    .await;
    assert_eq!(names(&l), ["db", "web"]);
    let (_, l) = call(&f, "GET", &format!("{CMS}?labelSelector=!tier"), None).await;
    assert_eq!(names(&l), ["bare"]);
    let (_, l) = call(
        &f,
        "GET",
        &format!("{CMS}?fieldSelector=metadata.name%3Ddb"),
        None,
    )
    .await;
    assert_eq!(names(&l), ["db"]);
    let (_, l) = call(
        &f,
        "GET",
        &format!("{CMS}?fieldSelector=metadata.name!%3Ddb,metadata.namespace%3Ddefault"),
        None,
    )
    .await;
    assert_eq!(names(&l), ["bare", "web"]);
    let (code, s) = call(
        &f,
        "GET",
        &format!("{CMS}?fieldSelector=spec.nope%3Dx"),
        None,
    )
    .await;
    assert_eq!(code, 400);
    // ConfigMaps have no field converter of their own: kube's default one answers.
    assert_eq!(
        s["message"],
        r#""spec.nope" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        "{s}"
    );
    // It takes `metadata.namespace` on cluster-scoped kinds too (their namespace is empty).
    let (code, roles) = call(
        &f,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles?fieldSelector=metadata.namespace%3Dx",
        None,
    )
    .await;
    assert_eq!(code, 200, "{roles}");
    assert!(roles["items"].as_array().unwrap().is_empty());
    let (code, _) = call(&f, "GET", &format!("{CMS}?labelSelector=a%3D%3D%3Db"), None).await;
    assert_eq!(code, 400);
    // Selector errors are the parsers' own words, as kube answers them (no second prefix).
    for (query, message) in [
        (
            "labelSelector=tier%3Dweb,",
            "found '', expected: identifier after ','",
        ),
        (
            "labelSelector=a%20in%20(x",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "fieldSelector=metadata.name%3D%5Cx",
            "invalid field selector: invalid escape sequence: \\x",
        ),
    ] {
        let (code, s) = call(&f, "GET", &format!("{CMS}?{query}"), None).await;
        assert_eq!(code, 400, "{query}: {s}");
        assert_eq!(s["message"], message, "{query}");
    }
    // Secrets support the `type` field selector.
    call(&f, "POST", "/api/v1/namespaces/default/secrets", Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "kubernetes.io/basic-auth", "stringData": {"username": "u"}}))).await;
    call(
        &f,
        "POST",
        "/api/v1/namespaces/default/secrets",
        Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s2"}})),
    )
    .await;
    let (_, l) = call(
        &f,
        "GET",
        "/api/v1/namespaces/default/secrets?fieldSelector=type%3DOpaque",
        None,
    )
    .await;
    assert_eq!(names(&l), ["s2"]);
}

#[tokio::test]
async fn updates_conflict_on_stale_versions_and_noops_keep_the_version() {
    let f = fixture().await;
    let (_, a) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let mut stale = a.clone();
    stale["data"]["k"] = json!("x");
    let (code, b) = call(&f, "PUT", &format!("{CMS}/a"), Some(stale.clone())).await;
    assert_eq!(code, 200);
    assert!(rv(&b) > rv(&a));
    let (code, s) = call(&f, "PUT", &format!("{CMS}/a"), Some(stale)).await;
    assert_eq!(code, 409);
    assert_eq!(s["reason"], "Conflict");
    // An update that changes nothing does not write.
    let (_, same) = call(&f, "PUT", &format!("{CMS}/a"), Some(b.clone())).await;
    assert_eq!(rv(&same), rv(&b));
    // Without a resourceVersion an update is unconditional.
    let mut unconditional = b.clone();
    unconditional["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    unconditional["data"]["k"] = json!("y");
    let (code, c) = call(&f, "PUT", &format!("{CMS}/a"), Some(unconditional)).await;
    assert_eq!(code, 200);
    // uid and creationTimestamp cannot be changed by an update.
    assert_eq!(c["metadata"]["uid"], a["metadata"]["uid"]);
    assert_eq!(
        c["metadata"]["creationTimestamp"],
        a["metadata"]["creationTimestamp"]
    );
    // Name mismatch between body and URL.
    let (code, _) = call(&f, "PUT", &format!("{CMS}/other"), Some(c)).await;
    assert_eq!(code, 400);
}

/// Writes without a precondition retry their conflicts until they land, as kube's
/// `GuaranteedUpdate` does: many concurrent patches, applies and unconditional updates of one
/// object all succeed and none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_without_preconditions_all_land() {
    let f = fixture().await;
    let path = "/api/v1/namespaces/default/configmaps/shared";
    let (code, _) = call(
        &f,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}})),
    )
    .await;
    assert_eq!(code, 201);
    const WRITERS: usize = 12;
    const EACH: usize = 15;
    let writer = |w: usize| {
        let f = &f;
        async move {
            let mut failures = Vec::new();
            for i in 0..EACH {
                let key = format!("w{w}-{i}");
                let (code, body) = match w % 3 {
                    0 => {
                        call_typed(
                            f,
                            "PATCH",
                            path,
                            Some(json!({"data": {key.clone(): "v"}})),
                            "application/merge-patch+json",
                        )
                        .await
                    }
                    1 => {
                        call_typed(
                            f,
                            "PATCH",
                            &format!("{path}?fieldManager=m{w}&force=true"),
                            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "shared"},
                                "data": (0..=i).map(|j| (format!("w{w}-{j}"), json!("v")))
                                    .collect::<serde_json::Map<_, _>>()})),
                            "application/apply-patch+yaml",
                        )
                        .await
                    }
                    _ => {
                        call_typed(
                            f,
                            "PATCH",
                            path,
                            Some(json!({"metadata": {"annotations": {key.clone(): "v"}}})),
                            "application/strategic-merge-patch+json",
                        )
                        .await
                    }
                };
                if code != 200 {
                    failures.push(format!("{key}: {code} {body}"));
                }
            }
            failures
        }
    };
    let failures: Vec<String> = futures::future::join_all((0..WRITERS).map(writer))
        .await
        .into_iter()
        .flatten()
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
    let (_, object) = call(&f, "GET", path, None).await;
    for w in 0..WRITERS {
        for i in 0..EACH {
            let key = format!("w{w}-{i}");
            let found = match w % 3 {
                2 => object["metadata"]["annotations"].get(&key).is_some(),
                _ => object["data"].get(&key).is_some(),
            };
            assert!(found, "{key} lost: {object}");
        }
    }
}

#[tokio::test]
async fn patch_types_and_strategic_merge() {
    let f = fixture().await;
    call(
        &f,
        "POST",
        "/api/v1/namespaces/default/services",
        Some(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}
        })),
    )
    .await;
    let path = "/api/v1/namespaces/default/services/s";
    // Strategic merge: ports merge by their `port` key.
    let (code, svc) = call_typed(
        &f,
        "PATCH",
        path,
        Some(json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}})),
        "application/strategic-merge-patch+json",
    )
    .await;
    assert_eq!(code, 200, "{svc}");
    let ports = svc["spec"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2, "{svc}");
    assert_eq!(
        ports.iter().find(|p| p["port"] == 80).unwrap()["targetPort"],
        8080
    );
    // Merge patch replaces lists.
    let (_, svc) = call_typed(
        &f,
        "PATCH",
        path,
        Some(json!({"spec": {"ports": [{"name": "only", "port": 9000}]}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(svc["spec"]["ports"].as_array().unwrap().len(), 1);
    // JSON patch, including a failing test op (422, nothing written).
    let (code, svc) = call_typed(
        &f,
        "PATCH",
        path,
        Some(json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}])),
        "application/json-patch+json",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(svc["metadata"]["labels"]["a"], "b");
    let before = rv(&svc);
    let (code, _) = call_typed(
        &f,
        "PATCH",
        path,
        Some(json!([{"op": "test", "path": "/metadata/labels/a", "value": "zzz"}])),
        "application/json-patch+json",
    )
    .await;
    assert_eq!(code, 422);
    let (_, now) = call(&f, "GET", path, None).await;
    assert_eq!(rv(&now), before);
    // Unknown patch content type.
    let (code, _) = call_typed(&f, "PATCH", path, Some(json!({})), "text/plain").await;
    assert_eq!(code, 415);
    // A patch naming a stale resourceVersion is a conflict.
    let (code, _) = call_typed(
        &f,
        "PATCH",
        path,
        Some(json!({"metadata": {"resourceVersion": "1"}, "spec": {}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 409);
}

#[tokio::test]
async fn dry_run_and_field_validation() {
    let f = fixture().await;
    let (code, dry) = call(
        &f,
        "POST",
        &format!("{CMS}?dryRun=All"),
        Some(cm("dry", json!({}))),
    )
    .await;
    assert_eq!(code, 201);
    assert!(dry["metadata"]["uid"].is_string());
    let (code, _) = call(&f, "GET", &format!("{CMS}/dry"), None).await;
    assert_eq!(code, 404, "dry run must not persist");
    // Options kube's `ValidateCreateOptions` refuses: 422, naming the options kind.
    let (code, s) = call(
        &f,
        "POST",
        &format!("{CMS}?dryRun=Some"),
        Some(cm("dry", json!({}))),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Some"}: supported values: "All""#
    );
    assert_eq!(s["details"]["causes"][0]["field"], "dryRun");

    let mut bad = cm("fv", json!({}));
    bad["dta"] = json!({"x": "y"});
    let (code, s) = call(
        &f,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        Some(bad.clone()),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"dta\""),
        "{s}"
    );
    match f
        .registry
        .handle(request(
            "POST",
            &format!("{CMS}?fieldValidation=Warn"),
            Some(bad.clone()),
            "application/json",
        ))
        .await
    {
        ApiResponse::Body(b) => {
            assert_eq!(b.status, 201);
            let warning = b
                .headers
                .iter()
                .find(|(n, _)| n == "Warning")
                .map(|(_, v)| v.clone());
            assert_eq!(
                warning.as_deref(),
                Some("299 - \"unknown field \\\"dta\\\"\"")
            );
        }
        ApiResponse::Watch(_) => panic!(),
    }
    let (code, s) = call(
        &f,
        "POST",
        &format!("{CMS}?fieldValidation=Bogus"),
        Some(bad),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[tokio::test]
async fn bad_delete_options_delete_nothing() {
    let f = fixture().await;
    let (code, _) = call(&f, "POST", CMS, Some(cm("kept", json!({})))).await;
    assert_eq!(code, 201);
    for (query, body, message) in [
        (
            "?propagationPolicy=Bogus",
            None,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil""#,
        ),
        (
            "?propagationPolicy=Orphan&orphanDependents=true",
            None,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#,
        ),
        (
            "?dryRun=Foo",
            None,
            r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Foo"}: supported values: "All""#,
        ),
        (
            "",
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All", "x"]})),
            r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"All", "x"}: supported values: "All""#,
        ),
    ] {
        for target in [format!("{CMS}/kept{query}"), format!("{CMS}{query}")] {
            let (code, s) = call(&f, "DELETE", &target, body.clone()).await;
            assert_eq!(
                (code, s["message"].as_str()),
                (422, Some(message)),
                "{target}"
            );
        }
    }
    let (code, _) = call(&f, "GET", &format!("{CMS}/kept"), None).await;
    assert_eq!(code, 200, "nothing was deleted");
    let (code, s) = call(
        &f,
        "DELETE",
        &format!("{CMS}/kept?orphanDependents=maybe"),
        None,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        r#"strconv.ParseBool: parsing "maybe": invalid syntax"#
    );
    let (code, _) = call(
        &f,
        "DELETE",
        &format!("{CMS}/kept?propagationPolicy=Background"),
        None,
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn finalizer_names_are_judged_as_kubes_core_validation_judges_them() {
    let f = fixture().await;
    let mut obj = cm("fin1", json!({}));
    obj["metadata"]["finalizers"] = json!(["x", "kubernetes", "orphan", "example.com/ok"]);
    let (code, status) = call(&f, "POST", CMS, Some(obj)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ConfigMap \"fin1\" is invalid: metadata.finalizers[0]: Invalid value: \"x\": name is neither a standard finalizer name nor is it fully qualified"
    );
    // On update too.
    call(&f, "POST", CMS, Some(cm("fin2", json!({})))).await;
    let (code, status) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/fin2"),
        Some(json!({"metadata": {"finalizers": ["mine"]}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 422, "{status}");
    // Core/v1 Events are judged by kube's legacy event validation, which has no such rule.
    let event = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "e1", "finalizers": ["x"]},
        "involvedObject": {"kind": "ConfigMap", "name": "fin2", "namespace": "default"},
        "reason": "R", "message": "m"});
    let (code, status) = call(&f, "POST", "/api/v1/namespaces/default/events", Some(event)).await;
    assert_eq!(code, 201, "{status}");
}

#[tokio::test]
async fn an_endpoint_slices_generation_follows_its_labels() {
    let f = fixture().await;
    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "es"}, "addressType": "IPv4", "endpoints": []});
    let (code, created) = call(&f, "POST", slices, Some(slice)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    let (code, patched) = call_typed(
        &f,
        "PATCH",
        &format!("{slices}/es"),
        Some(json!({"metadata": {"labels": {"x": "y"}}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["generation"], 2);
    // An annotation alone does not.
    let (_, patched) = call_typed(
        &f,
        "PATCH",
        &format!("{slices}/es"),
        Some(json!({"metadata": {"annotations": {"a": "b"}}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(patched["metadata"]["generation"], 2);
}

#[tokio::test]
async fn deleting_a_service_or_service_account_answers_with_the_object() {
    let f = fixture().await;
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}]}});
    call(
        &f,
        "POST",
        "/api/v1/namespaces/default/services",
        Some(service),
    )
    .await;
    let (code, body) = call(&f, "DELETE", "/api/v1/namespaces/default/services/s", None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "Service", "{body}");
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}});
    call(
        &f,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        Some(sa),
    )
    .await;
    let (code, body) = call(
        &f,
        "DELETE",
        "/api/v1/namespaces/default/serviceaccounts/sa",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "ServiceAccount", "{body}");
    // Others answer with a Status.
    call(&f, "POST", CMS, Some(cm("gone", json!({})))).await;
    let (_, body) = call(&f, "DELETE", &format!("{CMS}/gone"), None).await;
    assert_eq!(body["kind"], "Status", "{body}");
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let f = fixture().await;
    let mut obj = cm("held", json!({}));
    obj["metadata"]["finalizers"] = json!(["example.com/x"]);
    call(&f, "POST", CMS, Some(obj)).await;
    let (code, pending) = call(&f, "DELETE", &format!("{CMS}/held"), None).await;
    assert_eq!(code, 200, "{pending}");
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = call(&f, "GET", &format!("{CMS}/held"), None).await;
    assert_eq!(code, 200);
    let (code, _) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/held"),
        Some(json!({"metadata": {"finalizers": null}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = call(&f, "GET", &format!("{CMS}/held"), None).await;
    assert_eq!(code, 404);
    // Delete preconditions.
    let (_, c) = call(&f, "POST", CMS, Some(cm("pre", json!({})))).await;
    let (code, s) = call(
        &f,
        "DELETE",
        &format!("{CMS}/pre"),
        Some(
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "wrong"}}),
        ),
    )
    .await;
    assert_eq!(code, 409, "{s}");
    let (code, s) = call(&f, "DELETE", &format!("{CMS}/pre"), Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": c["metadata"]["uid"]}}))).await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["status"], "Success");
}

#[tokio::test]
async fn namespace_lifecycle() {
    let f = fixture().await;
    let (code, s) = call(
        &f,
        "POST",
        "/api/v1/namespaces/missing/configmaps",
        Some(cm("x", json!({}))),
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(s["message"], "namespaces \"missing\" not found");
    call(
        &f,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}})),
    )
    .await;
    call(
        &f,
        "POST",
        "/api/v1/namespaces/gone/configmaps",
        Some(cm("x", json!({}))),
    )
    .await;
    let (code, ns) = call(&f, "DELETE", "/api/v1/namespaces/gone", None).await;
    assert_eq!(code, 200, "{ns}");
    assert_eq!(
        ns["status"]["phase"], "Terminating",
        "kube answers with the terminating namespace"
    );
    let (_, ns) = call(&f, "GET", "/api/v1/namespaces/gone", None).await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    let (code, s) = call(
        &f,
        "POST",
        "/api/v1/namespaces/gone/configmaps",
        Some(cm("y", json!({}))),
    )
    .await;
    assert_eq!(code, 403, "{s}");
    let outcome = f
        .registry
        .finalize_namespace("gone", Default::default())
        .await
        .unwrap();
    assert_eq!(outcome, super::namespaces::FinalizeOutcome::Gone);
    let (code, _) = call(&f, "GET", "/api/v1/namespaces/gone", None).await;
    assert_eq!(code, 404);
    let (_, l) = call(&f, "GET", "/api/v1/namespaces/gone/configmaps", None).await;
    assert_eq!(l["items"].as_array().unwrap().len(), 0);
    // Default namespaces exist and cluster-scoped objects have no namespace.
    let (_, d) = call(&f, "GET", "/api/v1/namespaces/kube-system", None).await;
    assert!(d["metadata"].get("namespace").is_none());
}

#[tokio::test]
async fn a_terminating_namespace_reports_what_holds_it_in_its_conditions() {
    let f = fixture().await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "held"}});
    call(&f, "POST", "/api/v1/namespaces", Some(ns)).await;
    for name in ["a", "b"] {
        let held = cm(name, json!({}));
        let mut held = held;
        held["metadata"]["finalizers"] = json!(["example.com/hold", "example.com/audit"]);
        let (code, s) = call(&f, "POST", "/api/v1/namespaces/held/configmaps", Some(held)).await;
        assert_eq!(code, 201, "{s}");
    }
    call(
        &f,
        "POST",
        "/api/v1/namespaces/held/configmaps",
        Some(cm("free", json!({}))),
    )
    .await;
    call(&f, "DELETE", "/api/v1/namespaces/held", None).await;

    let outcome = f
        .registry
        .finalize_namespace("held", Default::default())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        super::namespaces::FinalizeOutcome::ContentRemaining(2)
    );
    let (_, ns) = call(&f, "GET", "/api/v1/namespaces/held", None).await;
    let conditions = |ns: &Value| -> Vec<(String, String, String, String)> {
        ns["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                assert!(!text("lastTransitionTime").is_empty(), "{c}");
                (
                    text("type"),
                    text("status"),
                    text("reason"),
                    text("message"),
                )
            })
            .collect()
    };
    let row = |t: &str, s: &str, r: &str, m: &str| (t.into(), s.into(), r.into(), m.into());
    let ok_rows = [
        row(
            "NamespaceDeletionDiscoveryFailure",
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        row(
            "NamespaceDeletionGroupVersionParsingFailure",
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        row(
            "NamespaceDeletionContentFailure",
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
    ];
    let mut expected = ok_rows.to_vec();
    expected.push(row(
        "NamespaceContentRemaining",
        "True",
        "SomeResourcesRemain",
        "Some resources are remaining: configmaps. has 2 resource instances",
    ));
    expected.push(row(
        "NamespaceFinalizersRemaining",
        "True",
        "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: example.com/audit in 2 resource instances, example.com/hold in 2 resource instances",
    ));
    assert_eq!(conditions(&ns), expected);
    assert_eq!(ns["status"]["phase"], "Terminating");
    let version = ns["metadata"]["resourceVersion"].clone();

    // A pass that finds the same leaves the namespace as it is.
    f.registry
        .finalize_namespace("held", Default::default())
        .await
        .unwrap();
    let (_, again) = call(&f, "GET", "/api/v1/namespaces/held", None).await;
    assert_eq!(again["metadata"]["resourceVersion"], version);

    // Once one object is let go, the counts follow; once both are, the namespace goes.
    let unhold = json!({"metadata": {"finalizers": null}});
    let (code, s) = call_typed(
        &f,
        "PATCH",
        "/api/v1/namespaces/held/configmaps/a",
        Some(unhold.clone()),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200, "{s}");
    let outcome = f
        .registry
        .finalize_namespace("held", Default::default())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        super::namespaces::FinalizeOutcome::ContentRemaining(1)
    );
    let (_, ns) = call(&f, "GET", "/api/v1/namespaces/held", None).await;
    let messages: Vec<String> = conditions(&ns).into_iter().map(|c| c.3).collect();
    assert!(
        messages.contains(
            &"Some resources are remaining: configmaps. has 1 resource instances".to_string()
        ),
        "{messages:?}"
    );
    call_typed(
        &f,
        "PATCH",
        "/api/v1/namespaces/held/configmaps/b",
        Some(unhold),
        "application/merge-patch+json",
    )
    .await;
    let outcome = f
        .registry
        .finalize_namespace("held", Default::default())
        .await
        .unwrap();
    assert_eq!(outcome, super::namespaces::FinalizeOutcome::Gone);
}

/// The warnings of a response, as sent.
async fn warnings_of(f: &Fixture, req: ApiRequest) -> (u16, Vec<String>) {
    match f.registry.handle(req).await {
        ApiResponse::Body(b) => (
            b.status,
            b.headers
                .iter()
                .filter(|(n, _)| n == "Warning")
                .map(|(_, v)| v.clone())
                .collect(),
        ),
        ApiResponse::Watch(_) => panic!("unexpected watch"),
    }
}

/// The legacy token tracking ConfigMap is made once, dated today, and dated again when its
/// `since` is not a date; a valid one is left alone.
#[tokio::test]
async fn legacy_token_tracking_is_dated_once() {
    let f = fixture().await;
    let path = "/api/v1/namespaces/kube-system/configmaps/kube-apiserver-legacy-service-account-token-tracking";
    crate::core::configmaps::ensure_legacy_token_tracking(&f.registry)
        .await
        .expect("ensured");
    let (code, made) = call(&f, "GET", path, None).await;
    assert_eq!(code, 200, "{made}");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(made["data"], json!({"since": today}));
    // `since` as the controller leaves it after someone set it to `since`.
    let ensured_after = |since: &'static str| {
        let f = &f;
        async move {
            let patch = json!({"data": {"since": since}});
            call_typed(
                f,
                "PATCH",
                path,
                Some(patch),
                "application/merge-patch+json",
            )
            .await;
            crate::core::configmaps::ensure_legacy_token_tracking(&f.registry)
                .await
                .expect("ensured");
            call(f, "GET", path, None).await.1["data"]["since"].clone()
        }
    };
    assert_eq!(ensured_after("2020-01-01").await, "2020-01-01");
    assert_eq!(ensured_after("2024-1-5").await, today.as_str());
    assert_eq!(ensured_after("yesterday").await, today.as_str());
}

/// A patch that leaves a Secret's data not base64 is kube's patcher 422 on `patch`, worded
/// by the decoder each patch type goes through; nothing is written.
#[tokio::test]
async fn a_secret_patched_into_bad_base64_is_an_invalid_patch() {
    let f = fixture().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b64"}, "data": {"x": "eA=="}});
    assert_eq!(call(&f, "POST", secrets, Some(secret)).await.0, 201);
    let path = format!("{secrets}/b64");
    let bad = json!({"data": {"x": "not base64!"}});
    for (content_type, value_start, detail) in [
        (
            "application/merge-patch+json",
            "\"{",
            "illegal base64 data at input byte 3",
        ),
        (
            "application/strategic-merge-patch+json",
            "\"map[data:map[x:not base64!]]\"",
            "error decoding from json: illegal base64 data at input byte 3",
        ),
    ] {
        let (code, s) = call_typed(&f, "PATCH", &path, Some(bad.clone()), content_type).await;
        assert_eq!(code, 422, "{content_type}: {s}");
        let cause = &s["details"]["causes"][0];
        assert_eq!(cause["field"], "patch", "{s}");
        let message = cause["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with(&format!("Invalid value: {value_start}"))
                && message.ends_with(detail),
            "{content_type}: {message}"
        );
    }
    let (_, stored) = call(&f, "GET", &path, None).await;
    assert_eq!(stored["data"]["x"], "eA==");
}

/// Every bad option of a write is reported in one 422, in kube's order, before the body is
/// looked at; an apply that would create an object without a name says so as kube does.
#[tokio::test]
async fn write_options_are_validated_together_and_first() {
    let f = fixture().await;
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            &format!("{CMS}/x?fieldValidation=Bogus&dryRun=X&force=true"),
            "not json",
            "application/merge-patch+json",
        ),
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: [force: Forbidden: may not be specified for non-apply patch, dryRun: Unsupported value: []string{"X"}: supported values: "All", fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"]"#
    );
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            &format!("{CMS}/x?fieldValidation=Bogus"),
            "{}",
            "application/apply-patch+yaml",
        ),
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: [fieldManager: Required value: is required for apply patch, fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"]"#
    );
    let (code, s) = call_raw(
        &f,
        raw_request(
            "POST",
            &format!("{CMS}?dryRun=Nope"),
            "garbage",
            "application/json",
        ),
    )
    .await;
    assert_eq!(
        (code, s["details"]["kind"].as_str()),
        (422, Some("CreateOptions")),
        "{s}"
    );
    // An apply creating an object must name it.
    let config = r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"1"}}"#;
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            &format!("{CMS}/a4?fieldManager=m"),
            config,
            "application/apply-patch+yaml",
        ),
    )
    .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (400, Some("the name of the object (a4 based on URL) was undeterminable: name must be provided"))
    );
    // `force` reads as kube's parameter codec reads a boolean: `yes` forces.
    call(&f, "POST", CMS, Some(cm("a5", json!({})))).await;
    let config =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a5"},"data":{"k":"mine"}}"#;
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            &format!("{CMS}/a5?fieldManager=m&force=yes"),
            config,
            "application/apply-patch+yaml",
        ),
    )
    .await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["data"]["k"], "mine");
}

/// An apply configuration whose keyed lists name an item twice, or an item without its key,
/// is refused as kube's field manager refuses it (a 500 naming the list), and nothing is
/// dropped or written.
#[tokio::test]
async fn apply_refuses_keyed_list_items_it_cannot_tell_apart() {
    let f = fixture().await;
    let path = "/api/v1/namespaces/default/services/web?fieldManager=m";
    let apply = |ports: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"ports": ports}})
        .to_string()
    };
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            path,
            &apply(json!([{"port": 81, "name": "a"}, {"port": 81, "name": "d"}])),
            "application/apply-patch+yaml",
        ),
    )
    .await;
    assert_eq!(code, 500, "{s}");
    assert!(s.get("reason").is_none(), "{s}");
    assert_eq!(
        s["message"],
        r#"failed to create typed patch object (default/web; /v1, Kind=Service): .spec.ports: duplicate entries for key [port=81,protocol="TCP"]"#
    );
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            path,
            &apply(json!([{"name": "c"}])),
            "application/apply-patch+yaml",
        ),
    )
    .await;
    assert_eq!(code, 500, "{s}");
    assert_eq!(
        s["message"],
        r#"failed to create typed patch object (default/web; /v1, Kind=Service): .spec.ports: element 0: associative list with keys has an element that omits key field "port" (and doesn't have default value)"#
    );
    let (code, _) = call(&f, "GET", "/api/v1/namespaces/default/services/web", None).await;
    assert_eq!(code, 404, "nothing was written");
    // Two problems: both listed.
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fin","finalizers":["a.io/x","a.io/x"]},
        "data":{"a":"1"}}"#;
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            &format!("{CMS}/fin?fieldManager=m"),
            cm,
            "application/apply-patch+yaml",
        ),
    )
    .await;
    assert_eq!(code, 500, "{s}");
    assert_eq!(
        s["message"],
        r#"failed to create typed patch object (/fin; /v1, Kind=ConfigMap): .metadata.finalizers: duplicate entries for key [="a.io/x"]"#
    );
}

/// A `null` string value (a chart's unset value) is stored as the "" Go decodes it into, owned
/// by its writer and found by label selectors as an empty value.
#[tokio::test]
async fn null_strings_are_stored_as_empty_strings_and_owned() {
    let f = fixture().await;
    let mut object = cm("nul", json!({"x": null}));
    object["data"] = json!({"LOG_LEVEL": null, "OTHER": "x"});
    let (code, created) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"], json!({"LOG_LEVEL": "", "OTHER": "x"}));
    assert_eq!(created["metadata"]["labels"]["x"], "");
    let owned = &created["metadata"]["managedFields"][0]["fieldsV1"]["f:data"];
    assert!(owned.get("f:LOG_LEVEL").is_some(), "{created}");
    let (_, listed) = call(&f, "GET", &format!("{CMS}?labelSelector=x%3D"), None).await;
    assert_eq!(names(&listed), ["nul"]);
}

/// A request with a raw body (for what `serde_json::Value` cannot hold: duplicate members).
fn raw_request(method: &str, path: &str, body: &str, content_type: &str) -> ApiRequest {
    let mut req = request(method, path, None, content_type);
    req.body = Bytes::from(body.to_string());
    req
}

/// Duplicate fields are strict decoding errors as unknown ones are: warnings under Warn (the
/// last value wins), kube's 400 under Strict; a patch body's own are reported first, and a
/// JSON patch's unknown operation fields too.
#[tokio::test]
async fn duplicate_fields_are_strict_decoding_errors() {
    let f = fixture().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d","name":"d"},
        "data":{"a":"1","a":"2"},"bogus":1}"#;
    let (code, warnings) =
        warnings_of(&f, raw_request("POST", CMS, body, "application/json")).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"metadata.name\"""#,
            r#"299 - "duplicate field \"data.a\"""#,
            r#"299 - "unknown field \"bogus\"""#
        ]
    );
    let (_, stored) = call(&f, "GET", &format!("{CMS}/d"), None).await;
    assert_eq!(stored["data"], json!({"a": "2"}));
    let strict = format!("{CMS}/d?fieldValidation=Strict");
    let put = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"d","resourceVersion":"{}"}},"data":{{"a":"3","a":"4"}}}}"#,
        rv(&stored)
    );
    let (code, s) = match f
        .registry
        .handle(raw_request("PUT", &strict, &put, "application/json"))
        .await
    {
        ApiResponse::Body(b) => (
            b.status,
            serde_json::from_slice::<Value>(&b.bytes()).unwrap(),
        ),
        ApiResponse::Watch(_) => panic!("unexpected watch"),
    };
    assert_eq!(code, 400, "{s}");
    assert_eq!(
        s["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "data.a""#
    );
    // Patches: the body's duplicates (merge, strategic) and a JSON patch's unknown fields.
    let cases = [
        (
            r#"{"data":{"h":"1","h":"2"}}"#,
            "application/merge-patch+json",
            r#"duplicate field \"data.h\""#,
        ),
        (
            r#"{"metadata":{"labels":{"x":"1","x":"2"}}}"#,
            "application/strategic-merge-patch+json",
            r#"duplicate field \"metadata.labels.x\""#,
        ),
        (
            r#"[{"op":"add","path":"/data/e","value":"x","extra":1}]"#,
            "application/json-patch+json",
            r#"json patch unknown field \"[0].extra\""#,
        ),
        (
            r#"[{"op":"add","op":"add","path":"/data/e","value":"x"}]"#,
            "application/json-patch+json",
            r#"json patch duplicate field \"[0].op\""#,
        ),
    ];
    for (patch, content_type, expected) in cases {
        let path = format!("{CMS}/d");
        let (code, warnings) =
            warnings_of(&f, raw_request("PATCH", &path, patch, content_type)).await;
        assert_eq!(code, 200, "{patch}");
        assert_eq!(warnings, [format!("299 - \"{expected}\"")], "{patch}");
        let (code, s) = call_raw(&f, raw_request("PATCH", &strict, patch, content_type)).await;
        assert_eq!(code, 422, "{patch}: {s}");
        let message = s["details"]["causes"][0]["message"].as_str().unwrap_or("");
        let expected = expected.replace('\\', "");
        assert!(
            message.ends_with(&format!("strict decoding error: {expected}")),
            "{patch}: {message}"
        );
        let ignore = format!("{CMS}/d?fieldValidation=Ignore");
        let (code, warnings) =
            warnings_of(&f, raw_request("PATCH", &ignore, patch, content_type)).await;
        assert_eq!((code, warnings.len()), (200, 0), "{patch}");
    }
    // What kube's strict decode of a JSON patch refuses (Warn and Strict), and Ignore's words.
    let path = format!("{CMS}/d");
    for (patch, message) in [
        (r#"{"op":"add"}"#, "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"),
        (r#"["x"]"#, "error decoding patch: json: cannot unmarshal string into Go value of type handlers.jsonPatchOp"),
        (r#"[{"op":5,"path":"/x"}]"#, "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string"),
        (r#"{"a":1}"#, "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"),
    ] {
        let (code, s) = call_raw(&f, raw_request("PATCH", &path, patch, "application/json-patch+json")).await;
        assert_eq!((code, s["message"].as_str()), (400, Some(message)), "{patch}");
    }
    let ignore = format!("{CMS}/d?fieldValidation=Ignore");
    let (code, s) = call_raw(
        &f,
        raw_request(
            "PATCH",
            &ignore,
            r#"{"op":"add"}"#,
            "application/json-patch+json",
        ),
    )
    .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (
            400,
            Some("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        )
    );
    let (code, s) = call_raw(
        &f,
        raw_request("PATCH", &path, "[1]", "application/merge-patch+json"),
    )
    .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (400, Some("error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"))
    );
    // kube's JSON patch library: replace of a missing member adds it, -1 is the last element.
    let patch = r#"[{"op":"replace","path":"/data/zz","value":"x"},
        {"op":"add","path":"/metadata/finalizers","value":["a.io/x","b.io/y"]},
        {"op":"remove","path":"/metadata/finalizers/-1"},
        {"op":"test","path":"/data/nothere","value":null}]"#;
    let (code, s) = call_raw(
        &f,
        raw_request("PATCH", &path, patch, "application/json-patch+json"),
    )
    .await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["data"]["zz"], "x");
    assert_eq!(s["metadata"]["finalizers"], json!(["a.io/x"]));
    // A `null` JSON patch is an empty one.
    let (code, _) = call_raw(
        &f,
        raw_request("PATCH", &path, "null", "application/json-patch+json"),
    )
    .await;
    assert_eq!(code, 200);
}

/// A built-in kind's repeated object member merges into the first (Go decodes it into the
/// struct or map already there); the duplicate is still reported.
#[tokio::test]
async fn a_built_in_kinds_repeated_objects_merge() {
    let f = fixture().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"merged"},
        "data":{"x":"1"},"metadata":{"labels":{"l":"v"}},"data":{"y":"2"}}"#;
    let (code, warnings) =
        warnings_of(&f, raw_request("POST", CMS, body, "application/json")).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        [
            "299 - \"duplicate field \\\"metadata\\\"\"",
            "299 - \"duplicate field \\\"data\\\"\""
        ]
    );
    let (_, stored) = call(&f, "GET", &format!("{CMS}/merged"), None).await;
    assert_eq!(stored["data"], json!({"x": "1", "y": "2"}));
    assert_eq!(stored["metadata"]["labels"], json!({"l": "v"}));
}

async fn call_raw(f: &Fixture, req: ApiRequest) -> (u16, Value) {
    match f.registry.handle(req).await {
        ApiResponse::Body(b) => (
            b.status,
            serde_json::from_slice(&b.bytes()).unwrap_or(Value::Null),
        ),
        ApiResponse::Watch(_) => panic!("unexpected watch"),
    }
}

#[tokio::test]
async fn empty_metadata_maps_and_lists_are_dropped_as_go_omits_them() {
    let f = fixture().await;
    let mut object = cm("bare", json!({}));
    object["metadata"]["annotations"] = json!({});
    object["metadata"]["finalizers"] = json!([]);
    let (code, created) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(code, 201, "{created}");
    for key in ["labels", "annotations", "finalizers"] {
        assert!(created["metadata"].get(key).is_none(), "{key}: {created}");
    }
    let (_, labelled) = call(&f, "POST", CMS, Some(cm("one", json!({"a": "1"})))).await;
    assert_eq!(labelled["metadata"]["labels"], json!({"a": "1"}));
    let unlabel = json!({"metadata": {"labels": {"a": null}}});
    let (code, unlabelled) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/one"),
        Some(unlabel),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200);
    assert!(
        unlabelled["metadata"].get("labels").is_none(),
        "{unlabelled}"
    );
}

#[tokio::test]
async fn a_create_naming_a_resource_version_is_kubes_internal_error() {
    let f = fixture().await;
    let mut object = cm("versioned", json!({}));
    object["metadata"]["resourceVersion"] = json!("12");
    let (code, s) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(code, 500, "{s}");
    // kube's store returns a plain error: no reason, no details.
    assert_eq!(
        s,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "resourceVersion should not be set on objects to be created", "code": 500})
    );
    // The store refuses it when it writes: after validation, and never on a dry run.
    let mut object = cm("versioned", json!({"bad key": "x"}));
    object["metadata"]["resourceVersion"] = json!("12");
    let (code, s) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(code, 422, "{s}");
    let mut object = cm("versioned", json!({}));
    object["metadata"]["resourceVersion"] = json!("12");
    let (code, s) = call(&f, "POST", &format!("{CMS}?dryRun=All"), Some(object)).await;
    assert_eq!(code, 201, "{s}");
    // One that is not a revision (`0`, or not a number) is replaced like any other.
    for (name, version) in [("zero", "0"), ("word", "abc")] {
        let mut object = cm(name, json!({}));
        object["metadata"]["resourceVersion"] = json!(version);
        let (code, created) = call(&f, "POST", CMS, Some(object)).await;
        assert_eq!(code, 201, "{created}");
        assert!(rv(&created) > 0, "{created}");
    }
}

#[tokio::test]
async fn updates_read_resource_versions_and_system_metadata_as_kube_does() {
    let f = fixture().await;
    let (_, created) = call(&f, "POST", CMS, Some(cm("meta", json!({})))).await;
    let path = format!("{CMS}/meta");
    // A resourceVersion that does not parse is the versioner's error, a bare 500; `0` is no
    // precondition at all.
    let mut update = created.clone();
    update["metadata"]["resourceVersion"] = json!("abc");
    let (code, s) = call(&f, "PUT", &path, Some(update.clone())).await;
    assert_eq!(code, 500, "{s}");
    assert!(s.get("reason").is_none(), "{s}");
    assert_eq!(
        s["message"],
        r#"strconv.ParseUint: parsing "abc": invalid syntax"#
    );
    update["metadata"]["resourceVersion"] = json!("0");
    update["data"] = json!({"a": "1"});
    let (code, s) = call(&f, "PUT", &path, Some(update.clone())).await;
    assert_eq!(code, 200, "{s}");
    // A deletion cannot be started by writing its timestamp or grace period.
    let mut update = s.clone();
    update["metadata"]["deletionTimestamp"] = json!("2026-11-29T17:30:00Z");
    update["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    let (code, s) = call(&f, "PUT", &path, Some(update)).await;
    assert_eq!(code, 422, "{s}");
    let causes: Vec<&str> = s["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert_eq!(
        causes,
        [
            "Invalid value: 2026-11-29 17:30:00 +0000 UTC: field is immutable",
            "Invalid value: 30: field is immutable"
        ],
        "{s}"
    );
    // generateName is the client's to change.
    let (_, current) = call(&f, "GET", &path, None).await;
    let mut update = current.clone();
    update["metadata"]["generateName"] = json!("meta-");
    let (code, s) = call(&f, "PUT", &path, Some(update)).await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["metadata"]["generateName"], "meta-", "{s}");
    // A kind that does not track generations keeps the one its creator gave, if valid.
    let mut object = cm("generated", json!({}));
    object["metadata"]["generation"] = json!(5);
    let (code, s) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(
        (code, &s["metadata"]["generation"]),
        (201, &json!(5)),
        "{s}"
    );
    let mut object = cm("negative", json!({}));
    object["metadata"]["generation"] = json!(-1);
    let (code, s) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(code, 422, "{s}");
    // Fields the server sets are still decoded first: a mistyped one is the decoder's 400.
    let mut object = cm("typed", json!({}));
    object["metadata"]["uid"] = json!(5);
    let (code, s) = call(&f, "POST", CMS, Some(object)).await;
    assert_eq!(code, 400, "{s}");
    assert!(
        s["message"].as_str().is_some_and(|m| m.contains(
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.uid of type "
        )),
        "{s}"
    );
}

#[tokio::test]
async fn a_patched_uid_is_an_immutable_field_and_a_put_uid_a_precondition() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("u", json!({})))).await;
    let patch = json!({"metadata": {"uid": "abc"}});
    let (code, s) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/u"),
        Some(patch),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["message"],
        r#"ConfigMap "u" is invalid: metadata.uid: Invalid value: "abc": field is immutable"#
    );
    let mut put = cm("u", json!({}));
    put["metadata"]["uid"] = json!("abc");
    let (code, s) = call(&f, "PUT", &format!("{CMS}/u"), Some(put)).await;
    assert_eq!(code, 409, "{s}");
}

#[tokio::test]
async fn duplicate_owner_references_are_dropped_with_kubes_warning() {
    let f = fixture().await;
    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"});
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "u1"});
    let mut object = cm("dup", json!({}));
    object["metadata"]["ownerReferences"] = json!([owner, owner, other]);
    let (code, warnings) =
        warnings_of(&f, request("POST", CMS, Some(object), "application/json")).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        ["299 - \".metadata.ownerReferences contains duplicate entries; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: u1\""]
    );
    let (_, stored) = call(&f, "GET", &format!("{CMS}/dup"), None).await;
    // An entry with the same uid but other fields stays.
    assert_eq!(stored["metadata"]["ownerReferences"], json!([owner, other]));
    // A patch that adds a duplicate gets the after-admission wording.
    let patch = json!([{"op": "add", "path": "/metadata/ownerReferences/-", "value": owner}]);
    let (code, warnings) = warnings_of(
        &f,
        request(
            "PATCH",
            &format!("{CMS}/dup"),
            Some(patch),
            "application/json-patch+json",
        ),
    )
    .await;
    assert_eq!(code, 200);
    assert!(
        warnings[0].contains("duplicate entries after mutating admission happens"),
        "{warnings:?}"
    );
    let (_, stored) = call(&f, "GET", &format!("{CMS}/dup"), None).await;
    assert_eq!(stored["metadata"]["ownerReferences"], json!([owner, other]));
}

#[tokio::test]
async fn events_are_one_resource_in_two_versions() {
    let f = fixture().await;
    let (code, created) = call(&f, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", Some(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/c",
        "reportingInstance": "c-1", "action": "Sync", "reason": "Synced", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "app"}, "note": "all good"
    }))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "events.k8s.io/v1");
    // Read through core/v1: the same object in the core shape.
    let (code, core) = call(&f, "GET", "/api/v1/namespaces/default/events/e1", None).await;
    assert_eq!(code, 200, "{core}");
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "all good");
    assert_eq!(core["involvedObject"]["name"], "app");
    // And back through events.k8s.io/v1, in its shape, in a list too.
    let (_, v1) = call(
        &f,
        "GET",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        None,
    )
    .await;
    assert_eq!(v1["items"][0]["note"], "all good", "{v1}");
    assert_eq!(v1["items"][0]["regarding"]["name"], "app");
    assert!(v1["items"][0].get("message").is_none());
    // The core event Table's row is built whole by the strategy (no leading name cell).
    let mut req = request(
        "GET",
        "/api/v1/namespaces/default/events",
        None,
        "application/json",
    );
    req.accept = Some("application/json;as=Table;v=v1;g=meta.k8s.io".into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    let table: Value = serde_json::from_slice(&b.bytes()).unwrap();
    let columns = table["columnDefinitions"].as_array().unwrap().len();
    assert_eq!(
        table["rows"][0]["cells"].as_array().unwrap().len(),
        columns,
        "{table}"
    );
}

#[tokio::test]
async fn a_table_watch_sends_the_column_definitions_with_its_first_event_only() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    call(&f, "POST", CMS, Some(cm("b", json!({})))).await;
    let mut req = request("GET", &format!("{CMS}?watch=1"), None, "application/json");
    req.accept = Some("application/json;as=Table;v=v1;g=meta.k8s.io".into());
    let events = frames(f.registry.handle(req).await, 2).await;
    assert_eq!(events.len(), 2, "{events:?}");
    let definitions = |e: &Value| e["object"]["columnDefinitions"].clone();
    assert!(
        definitions(&events[0])
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{events:?}"
    );
    // kube's `NoHeaders` from the second event on: no definitions (Go's nil slice).
    assert_eq!(definitions(&events[1]), Value::Null, "{events:?}");
    assert_eq!(
        events[1]["object"]["rows"].as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn secrets_decode_base64_and_merge_string_data() {
    let f = fixture().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let (code, s) = call(&f, "POST", secrets, Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "data": {"k": "not base64!"}}))).await;
    assert_eq!(code, 400, "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("illegal base64 data"),
        "{s}"
    );
    let (code, ok) = call(&f, "POST", secrets, Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ok"}, "stringData": {"user": "admin"}}))).await;
    assert_eq!(code, 201, "{ok}");
    assert_eq!(ok["data"]["user"], "YWRtaW4=");
    assert!(ok.get("stringData").is_none());
    assert_eq!(ok["type"], "Opaque");
}

/// The stream of a watch answer (a test failure for any other answer).
pub(super) fn watch_of(response: ApiResponse) -> crate::api::WatchStream {
    match response {
        ApiResponse::Watch(w) => w,
        ApiResponse::Body(b) => panic!(
            "expected a watch, got {} {}",
            b.status,
            String::from_utf8_lossy(&b.bytes())
        ),
    }
}

/// Reads watch frames until `count` arrive or a second passes.
pub(super) async fn frames(response: ApiResponse, count: usize) -> Vec<Value> {
    let mut w = watch_of(response);
    let mut out = Vec::new();
    while out.len() < count {
        match tokio::time::timeout(std::time::Duration::from_secs(1), w.frames.recv()).await {
            Ok(Some(frame)) => out.push(serde_json::from_slice(&frame).unwrap()),
            _ => break,
        }
    }
    out
}

#[tokio::test]
async fn a_watch_from_a_revision_not_reached_waits_for_the_events_after_it() {
    let f = fixture().await;
    let (_, created) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    // kube registers such a watch (only the watch-list protocol waits for the cache): the
    // events after the asked revision come as they happen, those up to it never.
    let ahead = rv(&created) + 1;
    let response = f
        .registry
        .handle(request(
            "GET",
            &format!("{CMS}?watch=1&resourceVersion={ahead}"),
            None,
            "application/json",
        ))
        .await;
    let mut w = watch_of(response);
    let (_, at_ahead) = call(&f, "POST", CMS, Some(cm("b", json!({})))).await;
    assert_eq!(rv(&at_ahead), ahead);
    call(&f, "POST", CMS, Some(cm("c", json!({})))).await;
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), w.frames.recv())
        .await
        .expect("an event")
        .expect("a frame");
    let event: Value = serde_json::from_slice(&frame).unwrap();
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "c", "{event}");
}

#[tokio::test]
async fn a_watch_list_from_a_revision_not_reached_ends_with_kubes_too_large_error() {
    let f = fixture().await;
    let (_, created) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let ahead = rv(&created) + 1_000;
    let response = f
        .registry
        .handle(request(
            "GET",
            &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={ahead}"),
            None,
            "application/json",
        ))
        .await;
    // kube waits a few seconds for the cache, then answers 200 with one ERROR event.
    let mut w = watch_of(response);
    let frame = tokio::time::timeout(std::time::Duration::from_secs(10), w.frames.recv())
        .await
        .expect("an event within the wait")
        .expect("a frame");
    let event: Value = serde_json::from_slice(&frame).unwrap();
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 504, "{event}");
    assert_eq!(event["object"]["reason"], "Timeout", "{event}");
    assert_eq!(
        event["object"]["message"],
        format!(
            "Timeout: Too large resource version: {ahead}, current: {}",
            rv(&created)
        ),
        "kube's NewTimeoutError puts `Timeout: ` first"
    );
    assert_eq!(
        event["object"]["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{event}"
    );
    assert!(w.frames.recv().await.is_none(), "the watch did not end");
}

#[tokio::test]
async fn a_watch_sends_a_bookmark_just_before_its_deadline() {
    let f = fixture().await;
    let (_, created) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let response = f
        .registry
        .handle(request(
            "GET",
            &format!(
                "{CMS}?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion={}",
                rv(&created)
            ),
            None,
            "application/json",
        ))
        .await;
    let mut w = watch_of(response);
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), w.frames.recv())
        .await
        .expect("a frame before the deadline")
        .expect("a frame");
    let event: Value = serde_json::from_slice(&frame).unwrap();
    assert_eq!(event["type"], "BOOKMARK", "{event}");
    assert_eq!(
        event["object"]["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // The 30 s bookmark period cannot have come: this is the one 2 s before the deadline.
    assert!(
        w.frames.recv().await.is_none(),
        "the watch ends at its deadline"
    );
}

/// A client that stops reading its watch holds at most about a buffer's worth of encoded
/// frames, not a frame count's, and its watch is closed once it takes nothing for a while,
/// as kube's cacher closes an unresponsive watcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_client_stops_reading_is_bounded_then_closed() {
    let f = fixture().await;
    let (_, created) = call(&f, "POST", CMS, Some(cm("big", json!({})))).await;
    let response = f
        .registry
        .handle(request(
            "GET",
            &format!("{CMS}?watch=1&resourceVersion={}", rv(&created)),
            None,
            "application/json",
        ))
        .await;
    let mut w = watch_of(response);
    // 40 updates of ~200 KiB: 8 MiB of frames, far over the buffer.
    let value = "x".repeat(200 * 1024);
    for i in 0..40 {
        let patch = json!({"data": {"v": format!("{i}{value}")}});
        let (code, _) = call_typed(
            &f,
            "PATCH",
            &format!("{CMS}/big"),
            Some(patch),
            "application/merge-patch+json",
        )
        .await;
        assert_eq!(code, 200);
    }
    // Nothing read for longer than the unresponsiveness limit: the producer gave up.
    tokio::time::sleep(super::read::UNRESPONSIVE_WATCH + std::time::Duration::from_secs(1)).await;
    let mut frames = 0;
    let mut bytes = 0;
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(2), w.frames.recv()).await {
            Ok(Some(frame)) => {
                frames += 1;
                bytes += frame.len();
            }
            Ok(None) => break,
            Err(_) => panic!("the watch was not closed ({frames} frames read)"),
        }
    }
    assert!(frames < 40, "{frames} frames were kept for the client");
    assert!(
        bytes <= super::read::WATCH_BUFFER_BYTES + 300 * 1024,
        "{bytes} bytes were kept for the client"
    );
}

#[tokio::test]
async fn get_reads_only_the_resource_version_and_continue_takes_zero() {
    let f = fixture().await;
    let (_, first) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let patch = json!({"data": {"k": "new"}});
    let (code, _) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/a"),
        Some(patch),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200);
    // kube's GetOptions has no resourceVersionMatch: it is ignored, and any resourceVersion
    // reads the latest state the cache holds (a consistent read first brings it up to date,
    // so "latest" is the patched one).
    let (_, latest) = call(&f, "GET", &format!("{CMS}/a"), None).await;
    assert_eq!(latest["data"]["k"], "new");
    for q in [
        "?resourceVersionMatch=Exact".to_string(),
        "?resourceVersion=0&resourceVersionMatch=Exact".to_string(),
        format!("?resourceVersion={}&resourceVersionMatch=Exact", rv(&first)),
    ] {
        let (code, got) = call(&f, "GET", &format!("{CMS}/a{q}"), None).await;
        assert_eq!(code, 200, "{q}: {got}");
        assert_eq!(got["data"]["k"], "new", "{q}");
    }
    call(&f, "POST", CMS, Some(cm("b", json!({})))).await;
    let (_, page) = call(&f, "GET", &format!("{CMS}?limit=1"), None).await;
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let (code, rest) = call(
        &f,
        "GET",
        &format!("{CMS}?limit=1&continue={token}&resourceVersion=0"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["b"]);
    let (code, refused) = call(
        &f,
        "GET",
        &format!("{CMS}?limit=1&continue={token}&resourceVersion=1"),
        None,
    )
    .await;
    assert_eq!(code, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "specifying resource version is not allowed when using continue"
    );
}

#[tokio::test]
async fn an_expired_continue_token_comes_back_with_one_that_reads_on_at_the_latest() {
    // A short history, so that a few writes expire the first page's revision.
    let f = fixture_with_history(5).await;
    for name in ["a", "b", "c"] {
        call(&f, "POST", CMS, Some(cm(name, json!({})))).await;
    }
    let (_, page) = call(&f, "GET", &format!("{CMS}?limit=1"), None).await;
    assert_eq!(names(&page), ["a"]);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    for i in 0..10 {
        call(
            &f,
            "POST",
            "/api/v1/namespaces/kube-system/configmaps",
            Some(cm(&format!("x{i}"), json!({}))),
        )
        .await;
    }
    let (code, expired) = call(&f, "GET", &format!("{CMS}?limit=1&continue={token}"), None).await;
    assert_eq!(code, 410, "{expired}");
    assert_eq!(expired["reason"], "Expired");
    assert!(expired["message"]
        .as_str()
        .unwrap()
        .contains("use the continue token in this response"));
    // A list at a revision the history no longer holds: kube's words, nothing more.
    let (code, old) = call(
        &f,
        "GET",
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&page)
        ),
        None,
    )
    .await;
    assert_eq!(code, 410, "{old}");
    assert_eq!(
        old["message"],
        "The resourceVersion for the provided list is too old."
    );
    let next = expired["metadata"]["continue"]
        .as_str()
        .expect("a token to go on with");
    let (code, rest) = call(&f, "GET", &format!("{CMS}?limit=5&continue={next}"), None).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["b", "c"]);
}

#[tokio::test]
async fn cross_namespace_paths_only_list_and_watch() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("keep", json!({})))).await;
    let (code, _) = call(&f, "DELETE", "/api/v1/configmaps", None).await;
    assert_eq!(code, 405);
    let (code, _) = call(&f, "POST", "/api/v1/configmaps", Some(cm("x", json!({})))).await;
    assert_eq!(code, 405);
    let (code, _) = call(&f, "GET", &format!("{CMS}/keep"), None).await;
    assert_eq!(code, 200, "nothing was deleted");
    let (code, list) = call(&f, "GET", "/api/v1/configmaps", None).await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    // A namespace path nested under another namespace does not exist.
    let (code, _) = call(
        &f,
        "GET",
        "/api/v1/namespaces/default/namespaces/kube-system",
        None,
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn named_watches_and_watch_options_follow_kube() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    call(&f, "POST", CMS, Some(cm("b", json!({})))).await;
    let named = |q: &str| {
        request(
            "GET",
            &format!("/api/v1/watch/namespaces/default/configmaps/a{q}"),
            None,
            "application/json",
        )
    };
    let ApiResponse::Body(b) = f
        .registry
        .handle(named("?fieldSelector=metadata.name%3Db"))
        .await
    else {
        panic!()
    };
    assert_eq!(b.status, 400);
    // A timeoutSeconds that is not an integer is refused for a watch and a plain list alike.
    for path in [
        "/api/v1/watch/namespaces/default/configmaps/a?timeoutSeconds=abc",
        "/api/v1/namespaces/default/configmaps?timeoutSeconds=abc",
    ] {
        let (code, status) = call(&f, "GET", path, None).await;
        assert_eq!(code, 400, "{path}: {status}");
        assert_eq!(status["reason"], "BadRequest", "{path}: {status}");
        assert_eq!(
            status["message"], r#"strconv.ParseInt: parsing "abc": invalid syntax"#,
            "{path}"
        );
    }
    // kube's integer options: Go's words, for the empty value too; an out-of-range one.
    for (query, message) in [
        (
            "limit=abc",
            r#"strconv.ParseInt: parsing "abc": invalid syntax"#,
        ),
        ("limit=", r#"strconv.ParseInt: parsing "": invalid syntax"#),
        (
            "limit=99999999999999999999",
            r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#,
        ),
    ] {
        let (code, status) = call(&f, "GET", &format!("{CMS}?{query}"), None).await;
        assert_eq!((code, status["message"].as_str()), (400, Some(message)));
    }
    // A resourceVersion that does not parse: a list's 400, a get's (and watch's) bare 500.
    let invalid = r#"resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax"#;
    let (code, status) = call(&f, "GET", &format!("{CMS}?resourceVersion=abc"), None).await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        format!("invalid resource version: {invalid}")
    );
    for path in [
        format!("{CMS}/a?resourceVersion=abc"),
        format!("{CMS}?watch=1&resourceVersion=abc"),
        format!("{CMS}/a?resourceVersion=%2B5"),
    ] {
        let (code, status) = call(&f, "GET", &path, None).await;
        assert_eq!(code, 500, "{path}: {status}");
        assert!(status.get("reason").is_none(), "{path}: {status}");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("resourceVersion: Invalid value: ")),
            "{path}: {status}"
        );
    }
    let (_, status) = call(&f, "GET", &format!("{CMS}/a?resourceVersion=abc"), None).await;
    assert_eq!(status["message"], invalid);
    let (code, _) = call(&f, "GET", &format!("{CMS}?timeoutSeconds=5"), None).await;
    assert_eq!(code, 200, "a list ignores a valid timeoutSeconds");
    let evs = frames(f.registry.handle(named("?timeoutSeconds=0")).await, 2).await;
    assert_eq!(
        evs.len(),
        1,
        "timeoutSeconds=0 means the default, and only `a` is watched: {evs:?}"
    );
    assert_eq!(evs[0]["object"]["metadata"]["name"], "a");
    // A huge timeout is capped, not a panic.
    let evs = frames(
        f.registry
            .handle(named("?timeoutSeconds=9223372036854775807"))
            .await,
        1,
    )
    .await;
    assert_eq!(evs.len(), 1);
    // kube's `ValidateListOptions`: resourceVersionMatch on a watch needs sendInitialEvents,
    // which needs NotOlderThan; lists refuse sendInitialEvents. Every cause is reported.
    let forbidden_unless_initial = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided";
    for (q, message) in [
        (
            "?watch=1&resourceVersionMatch=NotOlderThan",
            forbidden_unless_initial.to_string(),
        ),
        (
            "?watch=1&sendInitialEvents=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".to_string(),
        ),
        (
            "?watch=1&resourceVersionMatch=Exact&resourceVersion=5",
            format!("[{forbidden_unless_initial}, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]"),
        ),
        (
            "?sendInitialEvents=true",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".to_string(),
        ),
        (
            "?continue=abc&resourceVersionMatch=NotOlderThan",
            "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]".to_string(),
        ),
    ] {
        let (code, s) = call(&f, "GET", &format!("{CMS}{q}"), None).await;
        assert_eq!(code, 422, "{q}: {s}");
        assert_eq!(
            s["message"],
            format!("ListOptions.meta.k8s.io \"\" is invalid: {message}"),
            "{q}"
        );
    }
    // Initial events without bookmarks: sent, without the bookmark that would end them.
    let req = request(
        "GET",
        &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
        None,
        "application/json",
    );
    let evs = frames(f.registry.handle(req).await, 3).await;
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED"], "{evs:?}");
    // The watch-list request client-go's reflector sends: initial events, then a bookmark
    // marking their end.
    let req = request("GET", &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"), None, "application/json");
    let evs = frames(f.registry.handle(req).await, 3).await;
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED", "BOOKMARK"], "{evs:?}");
    assert_eq!(
        evs[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // client-go's watch-list client builds its list from the blueprint: an empty list of the
    // version, encoded as the watch is.
    use base64::Engine;
    let blueprint = evs[2]["object"]["metadata"]["annotations"]
        ["kubernetes.io/initial-events-list-blueprint"]
        .as_str()
        .expect("the list blueprint");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(blueprint)
        .unwrap();
    assert_eq!(
        String::from_utf8(decoded).unwrap(),
        "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":null}\n"
    );
}

#[tokio::test]
async fn objects_leaving_a_selector_are_deleted_with_their_previous_state() {
    let f = fixture().await;
    let (_, a) = call(&f, "POST", CMS, Some(cm("a", json!({"app": "x"})))).await;
    let req = request(
        "GET",
        &format!(
            "{CMS}?watch=1&labelSelector=app%3Dx&resourceVersion={}",
            rv(&a)
        ),
        None,
        "application/json",
    );
    let response = f.registry.handle(req).await;
    let (_, moved) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/a"),
        Some(json!({"metadata": {"labels": {"app": "y"}}})),
        "application/merge-patch+json",
    )
    .await;
    let evs = frames(response, 1).await;
    assert_eq!(evs[0]["type"], "DELETED");
    assert_eq!(
        evs[0]["object"]["metadata"]["labels"]["app"], "x",
        "previous state: {evs:?}"
    );
    assert_eq!(
        evs[0]["object"]["metadata"]["resourceVersion"],
        moved["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn unknown_fields_are_never_stored_and_strict_patches_write_nothing() {
    let f = fixture().await;
    let mut warn = cm("w", json!({}));
    warn["bogus"] = json!(1);
    let (code, created) = call(
        &f,
        "POST",
        &format!("{CMS}?fieldValidation=Warn"),
        Some(warn),
    )
    .await;
    assert_eq!(code, 201);
    assert!(created.get("bogus").is_none());
    let (_, stored) = call(&f, "GET", &format!("{CMS}/w"), None).await;
    assert!(stored.get("bogus").is_none(), "{stored}");
    let before = rv(&stored);
    let (code, s) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/w?fieldValidation=Strict"),
        Some(json!({"data": {"n": "1"}, "bogus": 1})),
        "application/merge-patch+json",
    )
    .await;
    // kube's patcher: 422 on `patch`, the patched object (with the unknown field) as its value.
    assert_eq!(code, 422, "{s}");
    let message = s["details"]["causes"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains(r#"\"bogus\":1"#), "{s}");
    assert!(
        message.ends_with(r#": strict decoding error: unknown field "bogus""#),
        "{s}"
    );
    // A body (create) names its kind and version, as kube's decoder does.
    let (code, s) = call(
        &f,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        Some(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "bogus": 1}),
        ),
    )
    .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (
            400,
            Some(
                r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus""#
            )
        )
    );
    let (_, after) = call(&f, "GET", &format!("{CMS}/w"), None).await;
    assert_eq!(rv(&after), before, "a refused patch must not write");
    // A patch whose text merely mentions resourceVersion is not a precondition.
    let (code, _) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/w"),
        Some(json!({"metadata": {"annotations": {"note": "resourceVersion"}}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn fields_of_the_wrong_json_type_are_refused_by_every_write_and_never_stored() {
    let f = fixture().await;
    let refused = "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string";
    let with_data = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "data": data});
    let (code, status) = call(&f, "POST", CMS, Some(with_data(json!({"a": 1})))).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest", "{status}");
    assert_eq!(status["message"], refused, "{status}");
    let (code, _) = call(&f, "GET", &format!("{CMS}/t"), None).await;
    assert_eq!(code, 404, "a refused create must not write");

    let (_, created) = call(&f, "POST", CMS, Some(with_data(json!({"a": "1"})))).await;
    let before = rv(&created);
    for (content_type, patch) in [
        ("application/merge-patch+json", json!({"data": {"b": 2}})),
        (
            "application/strategic-merge-patch+json",
            json!({"data": {"b": 2}}),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/b", "value": 2}]),
        ),
        (
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "data": {"b": 2}}),
        ),
    ] {
        let (code, status) = call_typed(
            &f,
            "PATCH",
            &format!("{CMS}/t?fieldManager=test"),
            Some(patch),
            content_type,
        )
        .await;
        let error =
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string";
        match content_type {
            // An apply configuration is decoded as a body is.
            "application/apply-patch+yaml" => {
                assert_eq!(code, 400, "{content_type}: {status}");
                assert_eq!(status["message"], refused, "{content_type}: {status}");
            }
            // kube's patcher: 422 on `patch`, the value the patch (strategic merge) or the
            // patched object (JSON and merge patches) as Go prints it.
            _ => {
                assert_eq!(code, 422, "{content_type}: {status}");
                let cause = &status["details"]["causes"][0];
                assert_eq!(cause["field"], "patch", "{status}");
                let message = cause["message"].as_str().unwrap_or_default();
                assert!(message.ends_with(&format!(": {error}")), "{status}");
                if content_type.contains("strategic") {
                    assert_eq!(
                        message,
                        format!("Invalid value: \"map[data:map[b:2]]\": {error}")
                    );
                } else {
                    assert!(
                        message.starts_with(r#"Invalid value: "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"1\",\"b\":2},\"kind\":\"ConfigMap\",\"metadata\":{"#),
                        "{status}"
                    );
                }
                assert_eq!(
                    status["message"],
                    format!(" \"\" is invalid: patch: {message}"),
                    "{status}"
                );
            }
        }
    }
    let mut replaced = created.clone();
    replaced["immutable"] = json!("yes");
    let (code, status) = call(&f, "PUT", &format!("{CMS}/t"), Some(replaced)).await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("Go struct field ConfigMap.immutable of type bool")),
        "{status}"
    );
    let (_, after) = call(&f, "GET", &format!("{CMS}/t"), None).await;
    assert_eq!(rv(&after), before, "refused writes must not write");
    assert_eq!(after["data"], json!({"a": "1"}));
}

#[tokio::test]
async fn output_is_negotiated_before_writing() {
    let f = fixture().await;
    let mut req = request("POST", CMS, Some(cm("n", json!({}))), "application/json");
    req.accept = Some("application/vnd.bogus".into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    assert_eq!(b.status, 406);
    let (code, _) = call(&f, "GET", &format!("{CMS}/n"), None).await;
    assert_eq!(
        code, 404,
        "nothing may be written when the answer cannot be encoded"
    );
}

#[tokio::test]
async fn uid_preconditions_and_finalizers_on_deleting_objects() {
    let f = fixture().await;
    let (_, a) = call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let mut other = a.clone();
    other["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let (code, s) = call(&f, "PUT", &format!("{CMS}/a"), Some(other)).await;
    assert_eq!(code, 409);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed: UID in precondition"),
        "{s}"
    );
    let mut held = cm("held", json!({}));
    held["metadata"]["finalizers"] = json!(["a/b"]);
    call(&f, "POST", CMS, Some(held)).await;
    call(&f, "DELETE", &format!("{CMS}/held"), None).await;
    let (code, s) = call_typed(
        &f,
        "PATCH",
        &format!("{CMS}/held"),
        Some(json!({"metadata": {"finalizers": ["a/b", "c/d"]}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("no new finalizers can be added if the object is being deleted"),
        "{s}"
    );
    // A new object may not take the name of one that is being deleted.
    let (code, s) = call(&f, "POST", CMS, Some(cm("held", json!({})))).await;
    assert_eq!(code, 409);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("object is being deleted: configmaps \"held\" already exists"),
        "{s}"
    );
}

#[tokio::test]
async fn namespace_deletion_rules() {
    let f = fixture().await;
    for ns in ["default", "kube-system", "kube-public"] {
        let (code, s) = call(&f, "DELETE", &format!("/api/v1/namespaces/{ns}"), None).await;
        assert_eq!(code, 403, "{s}");
        assert_eq!(
            s["message"],
            format!("namespaces \"{ns}\" is forbidden: this namespace may not be deleted")
        );
    }
    call(
        &f,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}})),
    )
    .await;
    let mut held = cm("held", json!({}));
    held["metadata"]["finalizers"] = json!(["a/b"]);
    call(&f, "POST", "/api/v1/namespaces/t/configmaps", Some(held)).await;
    let (code, _) = call(&f, "DELETE", "/api/v1/namespaces/t", None).await;
    assert_eq!(code, 200);
    let (code, s) = call(&f, "DELETE", "/api/v1/namespaces/t", None).await;
    assert_eq!(code, 409, "{s}");
    let (code, s) = call(
        &f,
        "POST",
        "/api/v1/namespaces/t/configmaps",
        Some(cm("late", json!({}))),
    )
    .await;
    assert_eq!(code, 403);
    assert!(s["message"].as_str().unwrap().starts_with("configmaps \"late\" is forbidden: unable to create new content in namespace t because it is being terminated"), "{s}");
    // generateName still works (and would retry on a collision).
    let (code, g) = call(
        &f,
        "POST",
        CMS,
        Some(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}),
        ),
    )
    .await;
    assert_eq!(code, 201);
    assert!(g["metadata"]["name"].as_str().unwrap().starts_with("gen-"));
    assert_eq!(g["metadata"]["name"].as_str().unwrap().len(), 9);
}

#[tokio::test]
async fn metadata_only_clients_get_partial_object_metadata() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("a", json!({"x": "y"})))).await;
    let mut req = request("GET", CMS, None, "application/json");
    req.accept = Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1".into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    let list: Value = serde_json::from_slice(&b.bytes()).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(list["items"][0]["metadata"]["labels"]["x"], "y");
    assert!(list["items"][0].get("data").is_none());
    let mut req = request("GET", &format!("{CMS}/a"), None, "application/json");
    req.accept = Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1".into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    let one: Value = serde_json::from_slice(&b.bytes()).unwrap();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "a");
}

/// A metadata-only request for the wrong shape (a list for one object, or one object for a
/// list) is kube's 406, naming the object kube's handler holds.
#[tokio::test]
async fn a_metadata_only_request_of_the_wrong_shape_is_not_acceptable() {
    let f = fixture().await;
    call(&f, "POST", CMS, Some(cm("a", json!({})))).await;
    let mut req = request("GET", &format!("{CMS}/a"), None, "application/json");
    req.accept = Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1".into());
    let (code, status) = call_raw(&f, req).await;
    assert_eq!(code, 406, "{status}");
    assert_eq!(status["reason"], "NotAcceptable");
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"
    );
    let mut req = request("GET", CMS, None, "application/json");
    req.accept = Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1".into());
    let (code, status) = call_raw(&f, req).await;
    assert_eq!(code, 406, "{status}");
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
    );
}

/// A resource whose strategy tracks generation (no built-in served today does).
struct Generational;
impl crate::resource::Strategy for Generational {
    fn tracks_generation(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn generation_moves_on_spec_changes_only() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        EmbeddedStore::open(&dir.path().join("s.redb"), EmbeddedOptions::default()).unwrap();
    let cacher = Cacher::start(store, 1000).await.unwrap();
    let mut widgets = crate::core::configmap_def();
    widgets.group = "example.com".into();
    widgets.plural = "widgets".into();
    widgets.kind = "Widget".into();
    widgets.list_kind = "WidgetList".into();
    widgets.definition = "com.example.Widget".into();
    widgets.storage_prefix = "/example.com/widgets".into();
    widgets.strategy = std::sync::Arc::new(Generational);
    // With a status subresource, status is not part of what the generation counts.
    widgets.subresources.push(crate::resource::SubresourceDef {
        name: "status",
        kind: "Widget".into(),
        verbs: vec!["get", "patch", "update"],
    });
    let mut resources = crate::core::builtin_resources();
    resources.push(widgets);
    let registry = Registry::new(resources, cacher, RegistryOptions::default());
    registry.ensure_default_namespaces().await.unwrap();
    let f = Fixture {
        registry,
        _dir: dir,
    };
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let (code, w) = call(&f, "POST", path, Some(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}))).await;
    assert_eq!(code, 201, "{w}");
    assert_eq!(w["metadata"]["generation"], 1);
    let patch = |body: Value| {
        call_typed(
            &f,
            "PATCH",
            "/apis/example.com/v1/namespaces/default/widgets/w",
            Some(body),
            "application/merge-patch+json",
        )
    };
    let (_, w) = patch(json!({"metadata": {"labels": {"a": "b"}}})).await;
    assert_eq!(
        w["metadata"]["generation"], 1,
        "metadata changes keep the generation"
    );
    let (_, w) = patch(json!({"status": {"ready": true}})).await;
    assert_eq!(
        w["metadata"]["generation"], 1,
        "status changes keep the generation"
    );
    let (_, w) = patch(json!({"spec": {"size": 2}})).await;
    assert_eq!(w["metadata"]["generation"], 2, "spec changes bump it");
    // Marked for deletion (a finalizer holds it), the object moves on to the next
    // generation, as kube's markAsDeleting does; deleting it again changes nothing more.
    let (_, w) = patch(json!({"metadata": {"finalizers": ["example.com/hold"]}})).await;
    assert_eq!(w["metadata"]["generation"], 2);
    let target = "/apis/example.com/v1/namespaces/default/widgets/w";
    for _ in 0..2 {
        let (code, _) = call(&f, "DELETE", target, None).await;
        assert_eq!(code, 200);
        let (_, w) = call(&f, "GET", target, None).await;
        assert_eq!(w["metadata"]["generation"], 3, "{w}");
        assert!(w["metadata"]["deletionTimestamp"].is_string());
    }
}

/// What `kubectl create role/rolebinding/clusterrolebinding`, `get`, `apply` and an update of
/// the roleRef do against the RBAC resources.
#[tokio::test]
async fn rbac_objects_are_stored_defaulted_and_validated_as_kube() {
    let f = fixture().await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let (code, role) = call(
        &f,
        "POST",
        roles,
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "pod-reader", "creationTimestamp": null},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
        })),
    )
    .await;
    assert_eq!(code, 201, "{role}");
    assert_eq!(
        role["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
    );
    assert!(role["metadata"].get("generation").is_none());
    // The schema reaches into the rules: unknown fields there are refused when strict.
    let (code, bad) = call(
        &f,
        "POST",
        &format!("{roles}?fieldValidation=Strict"),
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "strict"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "bogus": 1}],
        })),
    )
    .await;
    assert_eq!(code, 400, "{bad}");
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"rules[0].bogus\""),
        "{bad}"
    );

    // Names are path segments: colons are fine (kube's own `system:` roles), `/` is not.
    let cluster_roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let (code, cr) = call(
        &f,
        "POST",
        cluster_roles,
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:metrics-reader"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
        })),
    )
    .await;
    assert_eq!(code, 201, "{cr}");
    let (code, bad) = call(
        &f,
        "POST",
        cluster_roles,
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "a/b"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
        })),
    )
    .await;
    assert_eq!(code, 422, "{bad}");
    assert_eq!(bad["details"]["causes"][0]["field"], "metadata.name");

    // A Role may not hold non-resource rules.
    let (code, bad) = call(
        &f,
        "POST",
        roles,
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "bad"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
        })),
    )
    .await;
    assert_eq!(code, 422, "{bad}");
    assert_eq!(
        bad["message"],
        "Role.rbac.authorization.k8s.io \"bad\" is invalid: rules[0].nonResourceURLs: Invalid value: []string{\"/metrics\"}: namespaced rules cannot apply to non-resource URLs"
    );

    // kubectl create rolebinding viewers --clusterrole=view --serviceaccount=ci:builder
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let (code, rb) = call(&f, "POST", bindings, Some(json!({
        "kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": "viewers", "creationTimestamp": null},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "ci"}, {"kind": "User", "name": "jane"}],
    }))).await;
    assert_eq!(code, 201, "{rb}");
    assert_eq!(
        rb["subjects"][1],
        json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"})
    );

    // A strategic merge patch replaces the subjects whole (no patch strategy in kube).
    let (code, patched) = call_typed(
        &f,
        "PATCH",
        &format!("{bindings}/viewers"),
        Some(json!({"subjects": [{"kind": "Group", "name": "devs"}]})),
        "application/strategic-merge-patch+json",
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched["subjects"],
        json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"}])
    );

    // The roleRef cannot change.
    let (code, bad) = call_typed(
        &f,
        "PATCH",
        &format!("{bindings}/viewers"),
        Some(json!({"roleRef": {"name": "edit"}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 422, "{bad}");
    assert_eq!(
        bad["message"],
        "RoleBinding.rbac.authorization.k8s.io \"viewers\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
    );

    // A cluster role binding's service accounts need a namespace, and it binds ClusterRoles.
    let crbs = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    let (code, bad) = call(
        &f,
        "POST",
        crbs,
        Some(json!({
            "kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "builder"}],
        })),
    )
    .await;
    assert_eq!(code, 422, "{bad}");
    let fields: Vec<&str> = bad["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["roleRef.kind", "subjects[0].namespace"]);

    // kubectl get rolebindings -o wide
    let mut req = request("GET", bindings, None, "application/json");
    req.accept = Some("application/json;as=Table;v=v1;g=meta.k8s.io".into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    let table: Value = serde_json::from_slice(&b.bytes()).unwrap();
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells.len(),
        table["columnDefinitions"].as_array().unwrap().len()
    );
    assert_eq!(cells[0], "viewers");
    assert_eq!(cells[1], "ClusterRole/view");
    assert_eq!(cells[3..], [json!(""), json!("devs"), json!("")]);
    let mut req = request("GET", roles, None, "application/json");
    req.accept = Some("application/json;as=Table;v=v1;g=meta.k8s.io".into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    let table: Value = serde_json::from_slice(&b.bytes()).unwrap();
    assert_eq!(table["columnDefinitions"][1]["name"], "Created At");
    assert_eq!(table["columnDefinitions"][1]["type"], "date");
    assert_eq!(
        table["rows"][0]["cells"][1],
        role["metadata"]["creationTimestamp"]
    );
}

/// Always allows `system:masters`, has no opinion on anyone else; lists nothing.
struct MastersOnly;

#[async_trait::async_trait]
impl kubegate_policy::Authorizer for MastersOnly {
    fn name(&self) -> &'static str {
        "masters-only"
    }
    async fn authorize(
        &self,
        attributes: &kubegate_policy::Attributes<'_>,
    ) -> kubegate_policy::Decision {
        if attributes.user.in_group("system:masters") {
            kubegate_policy::Decision::Allow(String::new())
        } else {
            kubegate_policy::Decision::NoOpinion(String::new())
        }
    }
}

#[tokio::test]
async fn access_reviews_through_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        EmbeddedStore::open(&dir.path().join("s.redb"), EmbeddedOptions::default()).unwrap();
    let cacher = Cacher::start(store, 1000).await.unwrap();
    let mut resources = crate::core::builtin_resources();
    resources.extend(crate::core::authorization::access_review_defs(
        std::sync::Arc::new(MastersOnly),
    ));
    let registry = Registry::new(resources, cacher, RegistryOptions::default());
    registry.ensure_default_namespaces().await.unwrap();
    let f = Fixture {
        registry,
        _dir: dir,
    };

    // The request's namespace fills the object's, and the review checks against it.
    let lsars = "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews";
    let (code, got) = call(&f, "POST", lsars, Some(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}, "groups": ["system:masters"]},
    }))).await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        got["metadata"],
        json!({"namespace": "default", "creationTimestamp": null})
    );
    assert_eq!(got["status"], json!({"allowed": true}));
    let (code, got) = call(&f, "POST", lsars, Some(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "kube-system", "verb": "get", "resource": "pods"}, "user": "bob"},
    }))).await;
    assert_eq!(code, 422, "{got}");
    assert_eq!(
        got["message"],
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"kube-system\": must match metadata.namespace"
    );
    assert_eq!(got["details"]["group"], "authorization.k8s.io");

    // `kubectl auth can-i list secrets` posts a SelfSubjectAccessReview as protobuf and
    // accepts protobuf back.
    let ssar = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "secrets"}},
    });
    let body = crate::machinery::protobuf::encode(&ssar).unwrap();
    let mut req = request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        None,
        crate::machinery::protobuf::CONTENT_TYPE,
    );
    req.body = Bytes::from(body);
    req.accept = Some(crate::machinery::protobuf::CONTENT_TYPE.into());
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    assert_eq!(b.status, 201);
    let answer = crate::machinery::protobuf::decode(&b.bytes()).unwrap();
    assert_eq!(answer["kind"], "SelfSubjectAccessReview");
    assert_eq!(answer["status"], json!({"allowed": true}));

    // `kubectl auth can-i --list` as someone the authorizer cannot list rules for.
    let mut req = request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        Some(
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}),
        ),
        "application/json",
    );
    req.user = Arc::new(UserInfo::new("bob", vec!["system:authenticated".into()]));
    let ApiResponse::Body(b) = f.registry.handle(req).await else {
        panic!()
    };
    let answer: Value = serde_json::from_slice(&b.bytes()).unwrap();
    assert_eq!(b.status, 201, "{answer}");
    assert_eq!(
        answer["status"],
        json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true})
    );
    // Reviews are only ever created.
    let (code, _) = call(
        &f,
        "GET",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        None,
    )
    .await;
    assert_eq!(code, 405);
}

#[tokio::test]
async fn patches_and_updates_may_not_rename_or_move_an_object() {
    let f = fixture().await;
    let (code, _) = call(&f, "POST", CMS, Some(cm("stay", json!({})))).await;
    assert_eq!(code, 201);
    let target = format!("{CMS}/stay");
    let moved =
        "the namespace of the provided object does not match the namespace sent on the request";
    for (content_type, patch, message) in [
        (
            "application/strategic-merge-patch+json",
            json!({"metadata": {"namespace": "other"}, "data": {"q": "1"}}),
            moved.to_string(),
        ),
        (
            "application/merge-patch+json",
            json!({"metadata": {"namespace": "other"}, "data": {"q": "1"}}),
            moved.to_string(),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/metadata/name", "value": "zz"}]),
            "the name of the object (zz) does not match the name on the URL (stay)".to_string(),
        ),
        (
            "application/merge-patch+json",
            json!({"metadata": {"name": null}}),
            "the name of the object (stay based on URL) was undeterminable: name must be provided"
                .to_string(),
        ),
    ] {
        let (code, s) = call_typed(&f, "PATCH", &target, Some(patch.clone()), content_type).await;
        assert_eq!(
            (code, s["message"].as_str()),
            (400, Some(message.as_str())),
            "{patch}"
        );
    }
    // A patch that names the request's namespace and name, or leaves them out, is fine.
    let (code, s) = call_typed(
        &f,
        "PATCH",
        &target,
        Some(json!({"metadata": {"namespace": "default", "name": "stay"}, "data": {"q": "2"}})),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(code, 200, "{s}");
    let mut nameless = cm("", json!({}));
    nameless["metadata"].as_object_mut().unwrap().remove("name");
    let (code, s) = call(&f, "PUT", &target, Some(nameless)).await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        "the name of the object (stay based on URL) was undeterminable: name must be provided"
    );
    let (code, current) = call(&f, "GET", &target, None).await;
    assert_eq!(code, 200);
    assert_eq!(
        current["data"],
        json!({"k": "stay", "q": "2"}),
        "only the good patch landed"
    );
    assert_eq!(current["metadata"]["namespace"], "default");
}

#[tokio::test]
async fn include_object_is_a_table_option_only() {
    let f = fixture().await;
    let (code, _) = call(&f, "POST", CMS, Some(cm("t", json!({})))).await;
    assert_eq!(code, 201);
    // Not a Table: kube ignores the parameter, whatever its value.
    for path in [
        format!("{CMS}/t?includeObject=Bogus"),
        format!("{CMS}?includeObject=Bogus"),
    ] {
        let (code, body) = call(&f, "GET", &path, None).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    // A Table: refused with the Table conversion's words.
    let mut req = request(
        "GET",
        &format!("{CMS}/t?includeObject=Bogus"),
        None,
        "application/json",
    );
    req.accept = Some("application/json;as=Table;v=v1;g=meta.k8s.io".into());
    match f.registry.handle(req).await {
        ApiResponse::Body(b) => {
            assert_eq!(b.status, 400);
            let status: Value = serde_json::from_slice(&b.bytes()).unwrap();
            assert_eq!(
                status["message"],
                "Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\": must be 'Metadata', 'Object', 'None', or empty"
            );
        }
        ApiResponse::Watch(_) => panic!("unexpected watch"),
    }
}

/// kube's `rest.BeforeDelete` words a failed delete precondition with the kind.
#[tokio::test]
async fn delete_preconditions_are_worded_as_kube_words_them() {
    let f = fixture().await;
    let (_, a) = call(&f, "POST", CMS, Some(cm("pre", json!({})))).await;
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}});
    let (code, s) = call(&f, "DELETE", &format!("{CMS}/pre"), Some(body)).await;
    assert_eq!(code, 409, "{s}");
    assert_eq!(
        s["message"],
        format!(
            "Operation cannot be fulfilled on ConfigMap \"pre\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({}). The object might have been modified",
            rv(&a)
        )
    );
    assert_eq!(s["details"]["kind"], "ConfigMap");
    let body = json!({"preconditions": {"uid": "u-1"}});
    let (code, s) = call(&f, "DELETE", &format!("{CMS}/pre"), Some(body)).await;
    assert_eq!(code, 409, "{s}");
    assert_eq!(
        s["message"],
        format!(
            "Operation cannot be fulfilled on ConfigMap \"pre\": the UID in the precondition (u-1) does not match the UID in record ({}). The object might have been deleted and then recreated",
            a["metadata"]["uid"].as_str().unwrap()
        )
    );
}

/// kube-apiserver's own Service is created when missing and left alone when there.
#[tokio::test]
async fn the_kubernetes_service_is_ensured() {
    let f = fixture().await;
    let path = "/api/v1/namespaces/default/services/kubernetes";
    crate::core::services::ensure_kubernetes_service(&f.registry, 6443)
        .await
        .unwrap();
    let (code, service) = call(&f, "GET", path, None).await;
    assert_eq!(code, 200, "{service}");
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}])
    );
    assert_eq!(
        service["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    // Another replica's port does not rewrite it; a deleted one comes back.
    crate::core::services::ensure_kubernetes_service(&f.registry, 7443)
        .await
        .unwrap();
    let (_, same) = call(&f, "GET", path, None).await;
    assert_eq!(
        same["metadata"]["resourceVersion"],
        service["metadata"]["resourceVersion"]
    );
    let (code, _) = call(&f, "DELETE", path, None).await;
    assert_eq!(code, 200);
    crate::core::services::ensure_kubernetes_service(&f.registry, 6443)
        .await
        .unwrap();
    let (code, _) = call(&f, "GET", path, None).await;
    assert_eq!(code, 200);
}

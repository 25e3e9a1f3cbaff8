//! The `token` subresource of ServiceAccounts (`POST .../serviceaccounts/<name>/token`), the
//! TokenRequest API `kubectl create token` uses. It follows kube's `TokenREST.Create`
//! (`pkg/registry/core/serviceaccount/storage/token.go`): the body's name and namespace must
//! match the URL, unset audiences default to the API audiences, `expirationSeconds` defaults
//! to one hour and must be at least ten minutes, an optional `boundObjectRef` (Secret, Pod or
//! Node) must exist with the given uid, and the answer is the request with `status.token` and
//! `status.expirationTimestamp` filled in. Nothing is stored.

use std::sync::Arc;

use kubegate_policy::authn::lookup::ObjectLookup;
use kubegate_policy::authn::serviceaccount::{
    BoundObject, IssueRequest, ObjectRef, TokenIssuer, DEFAULT_EXPIRATION_SECONDS,
    MAX_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS,
};
use serde_json::{json, Map, Value};

use super::causes::invalid_raw;
use super::str_at;
use crate::api::ApiRequest;
use crate::machinery::json_kind;
use crate::resource::SubresourceHandler;
use crate::status::{field_invalid, ApiError, ApiResult, GroupResource};

const GROUP: &str = "authentication.k8s.io";
const KIND: &str = "TokenRequest";
const API_VERSION: &str = "authentication.k8s.io/v1";

/// Serves TokenRequests for ServiceAccounts: validates the request, resolves the bound
/// object through `lookup` and has `issuer` sign the token.
pub struct TokenRequestHandler {
    issuer: Arc<TokenIssuer>,
    lookup: Arc<dyn ObjectLookup>,
}

impl std::fmt::Debug for TokenRequestHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRequestHandler")
            .field("issuer", &self.issuer.issuer())
            .finish_non_exhaustive()
    }
}

impl TokenRequestHandler {
    pub fn new(issuer: Arc<TokenIssuer>, lookup: Arc<dyn ObjectLookup>) -> Self {
        TokenRequestHandler { issuer, lookup }
    }

    /// The TokenRequest for ServiceAccount `name` in `namespace` (stored as `service_account`).
    fn token_request(
        &self,
        namespace: &str,
        name: &str,
        service_account: &Value,
        mut body: Value,
    ) -> ApiResult<(Value, Vec<String>)> {
        let Some(request) = body.as_object_mut() else {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        };

        // The body may name the ServiceAccount, but only the one in the URL.
        let metadata = object_field(request, "metadata")?;
        let body_name = metadata_string(metadata, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::invalid(
                GROUP,
                KIND,
                name,
                vec![field_invalid(
                    "metadata.name",
                    &body_name,
                    "must match the service account name if specified",
                )],
            ));
        }
        // kube's create handler compares the body's namespace with the URL's first
        // (`EnsureObjectNamespaceMatchesRequestNamespace`), before the token REST sees it.
        let body_namespace = metadata_string(metadata, "namespace");
        if !body_namespace.is_empty() && body_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }

        let spec = object_field(request, "spec")?;
        let audiences = match spec.get("audiences") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| decode_error("string", "spec.audiences", "string"))?,
            Some(other) => {
                return Err(decode_error(json_kind(other), "spec.audiences", "[]string"))
            }
        };
        let audiences = if audiences.is_empty() {
            self.issuer.default_audiences().to_vec()
        } else {
            audiences
        };
        let expiration_seconds = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
            Some(Value::Number(n)) => n
                .as_i64()
                .ok_or_else(|| decode_error("number", "spec.expirationSeconds", "int64"))?,
            Some(other) => {
                return Err(decode_error(
                    json_kind(other),
                    "spec.expirationSeconds",
                    "int64",
                ))
            }
        };
        let bound_ref = match spec.get("boundObjectRef") {
            None | Some(Value::Null) => None,
            Some(Value::Object(r)) => Some(BoundRef::parse(r)?),
            Some(other) => {
                return Err(decode_error(
                    json_kind(other),
                    "spec.boundObjectRef",
                    "v1.BoundObjectReference",
                ))
            }
        };

        // kube's static validation; reported without a name, as kube does.
        if expiration_seconds < MIN_EXPIRATION_SECONDS {
            return Err(ApiError::invalid(
                GROUP,
                KIND,
                "",
                vec![invalid_raw(
                    "spec.expirationSeconds",
                    &expiration_seconds.to_string(),
                    "may not specify a duration less than 10 minutes",
                )],
            ));
        }
        if expiration_seconds > MAX_EXPIRATION_SECONDS {
            return Err(ApiError::invalid(
                GROUP,
                KIND,
                "",
                vec![invalid_raw(
                    "spec.expirationSeconds",
                    &expiration_seconds.to_string(),
                    "may not specify a duration larger than 2^32 seconds",
                )],
            ));
        }

        let bound = match &bound_ref {
            Some(r) => Some(self.resolve_bound_object(namespace, name, r)?),
            None => None,
        };

        let issued = self
            .issuer
            .issue(IssueRequest {
                namespace: namespace.to_string(),
                service_account: ObjectRef::new(
                    str_at(service_account, "/metadata/name"),
                    str_at(service_account, "/metadata/uid"),
                ),
                audiences: audiences.clone(),
                expiration_seconds,
                bound,
            })
            .map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))?;

        let mut answer = body;
        let Some(out) = answer.as_object_mut() else {
            return Err(ApiError::internal("TokenRequest body is not an object"));
        };
        let metadata = object_field(out, "metadata")?;
        metadata.insert("name".into(), json!(name));
        metadata.insert("namespace".into(), json!(namespace));
        metadata.insert(
            "creationTimestamp".into(),
            json!(rfc3339(&issued.issued_at)),
        );
        let spec = object_field(out, "spec")?;
        spec.insert("audiences".into(), json!(audiences));
        // The lifetime granted, after the server's maximum (kube rewrites the spec too).
        spec.insert("expirationSeconds".into(), json!(issued.expiration_seconds));
        out.insert(
            "status".into(),
            json!({
                "token": issued.token,
                "expirationTimestamp": rfc3339(&issued.expiration_timestamp),
            }),
        );
        // kube warns when it shortened the lifetime asked for.
        Ok((answer, issued.warning.into_iter().collect()))
    }

    /// The bound object as the token will name it, checked against what is stored.
    fn resolve_bound_object(
        &self,
        namespace: &str,
        service_account: &str,
        reference: &BoundRef,
    ) -> ApiResult<BoundObject> {
        let lookup = |resource: &str, ns: &str| -> ApiResult<Value> {
            if reference.name.is_empty() {
                // What kube's storage says for a get without a name.
                return Err(ApiError::bad_request("Name parameter required."));
            }
            self.lookup
                .get("", resource, ns, &reference.name)
                .ok_or_else(|| {
                    ApiError::not_found(&GroupResource::new("", resource), &reference.name)
                })
        };
        let (bound, uid) = match (reference.group.as_str(), reference.kind.as_str()) {
            ("", "Pod") => {
                let pod = lookup("pods", namespace)?;
                if str_at(&pod, "/spec/serviceAccountName") != service_account {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for serviceaccount \"{service_account}\" to pod running with different serviceaccount name."
                    )));
                }
                let uid = str_at(&pod, "/metadata/uid").to_string();
                // kube embeds the pod's node for information; a node that does not exist
                // (any more) is still named, without a uid.
                let node_name = str_at(&pod, "/spec/nodeName");
                let node = (!node_name.is_empty()).then(|| {
                    let node_uid = self
                        .lookup
                        .get("", "nodes", "", node_name)
                        .map(|n| str_at(&n, "/metadata/uid").to_string())
                        .unwrap_or_default();
                    ObjectRef::new(node_name, node_uid)
                });
                let pod_ref = ObjectRef::new(reference.name.clone(), uid.clone());
                (BoundObject::Pod { pod: pod_ref, node }, uid)
            }
            ("", "Node") => {
                let node = lookup("nodes", "")?;
                let uid = str_at(&node, "/metadata/uid").to_string();
                (
                    BoundObject::Node(ObjectRef::new(reference.name.clone(), uid.clone())),
                    uid,
                )
            }
            ("", "Secret") => {
                let secret = lookup("secrets", namespace)?;
                let uid = str_at(&secret, "/metadata/uid").to_string();
                (
                    BoundObject::Secret(ObjectRef::new(reference.name.clone(), uid.clone())),
                    uid,
                )
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {}/{}, Kind={}",
                    reference.group, reference.version, reference.kind
                )))
            }
        };
        if !reference.uid.is_empty() && reference.uid != uid {
            return Err(ApiError::conflict(
                &GroupResource::new(reference.group.clone(), reference.kind.clone()),
                &reference.name,
                &format!(
                    "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                    reference.uid
                ),
            ));
        }
        Ok(bound)
    }
}

/// `spec.boundObjectRef`, with its apiVersion split as kube's `FromAPIVersionAndKind` does.
struct BoundRef {
    group: String,
    version: String,
    kind: String,
    name: String,
    uid: String,
}

impl BoundRef {
    fn parse(reference: &Map<String, Value>) -> ApiResult<Self> {
        let field = |key: &str| -> ApiResult<String> {
            match reference.get(key) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(decode_error(
                    json_kind(other),
                    &format!("spec.boundObjectRef.{key}"),
                    "string",
                )),
            }
        };
        let api_version = field("apiVersion")?;
        // `v1` is the core group; `group/version` a named one; anything with more slashes
        // does not parse and leaves both empty, as in kube.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
            [version] => (String::new(), version.to_string()),
            [group, version] => (group.to_string(), version.to_string()),
            _ => (String::new(), String::new()),
        };
        Ok(BoundRef {
            group,
            version,
            kind: field("kind")?,
            name: field("name")?,
            uid: field("uid")?,
        })
    }
}

/// A string field of `metadata` (`""` when unset or not a string).
fn metadata_string(metadata: &Map<String, Value>, key: &str) -> String {
    metadata
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The JSON object at `key` of `parent`, created when absent or null.
fn object_field<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> ApiResult<&'a mut Map<String, Value>> {
    let entry = parent
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    let kind = json_kind(entry);
    entry
        .as_object_mut()
        .ok_or_else(|| decode_error(kind, key, "object"))
}

/// The 400 kube's decoder gives for a field of the wrong JSON type.
fn decode_error(found: &str, field: &str, want: &str) -> ApiError {
    ApiError::bad_request(format!(
        "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal {found} into Go struct field {field} of type {want}"
    ))
}

fn rfc3339(time: &chrono::DateTime<chrono::Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[async_trait::async_trait]
impl SubresourceHandler for TokenRequestHandler {
    fn kind(&self) -> (&'static str, &'static str) {
        (KIND, API_VERSION)
    }

    async fn create(
        &self,
        request: &ApiRequest,
        parent: &Value,
        body: Value,
    ) -> ApiResult<(Value, Vec<String>)> {
        self.token_request(&request.info.namespace, &request.info.name, parent, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::SystemTime;

    use kubegate_policy::authn::bearer::TokenOutcome;
    use kubegate_policy::authn::serviceaccount::{
        ServiceAccountTokenAuthenticator, SigningKey, VerifyingKeys,
    };
    use kubegate_policy::RequestInfo;

    const API: &str = "https://kubernetes.default.svc.cluster.local";

    #[derive(Default)]
    struct Objects(Mutex<HashMap<(String, String, String), Value>>);

    impl Objects {
        fn put(&self, resource: &str, namespace: &str, object: Value) {
            let name = str_at(&object, "/metadata/name").to_string();
            self.0
                .lock()
                .expect("lock")
                .insert((resource.into(), namespace.into(), name), object);
        }
    }

    impl ObjectLookup for Objects {
        fn get(&self, _group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
            self.0
                .lock()
                .expect("lock")
                .get(&(resource.into(), namespace.into(), name.into()))
                .cloned()
        }
    }

    struct Fixture {
        handler: TokenRequestHandler,
        objects: Arc<Objects>,
        authn: ServiceAccountTokenAuthenticator,
        service_account: Value,
    }

    fn fixture(max_expiration: Option<std::time::Duration>) -> Fixture {
        let (key, _) = SigningKey::generate().expect("key");
        let keys = VerifyingKeys::from_signing_key(&key);
        let issuer = Arc::new(TokenIssuer::new(
            API,
            key,
            vec![API.to_string()],
            max_expiration,
        ));
        let objects = Arc::new(Objects::default());
        let service_account =
            json!({"metadata": {"name": "builder", "namespace": "ns", "uid": "sa-uid"}});
        objects.put("serviceaccounts", "ns", service_account.clone());
        objects.put(
            "secrets",
            "ns",
            json!({"metadata": {"name": "s", "namespace": "ns", "uid": "secret-uid"}}),
        );
        let authn = ServiceAccountTokenAuthenticator::new(
            vec![API.to_string()],
            keys,
            vec![API.to_string()],
            objects.clone(),
        );
        Fixture {
            handler: TokenRequestHandler::new(issuer, objects.clone()),
            objects,
            authn,
            service_account,
        }
    }

    /// The body kubectl posts (`kubectl create token builder [...]`): unset fields are null.
    fn kubectl_body(spec: Value) -> Value {
        let mut body = json!({
            "kind": "TokenRequest",
            "apiVersion": API_VERSION,
            "metadata": {"creationTimestamp": null},
            "spec": {"audiences": null, "expirationSeconds": null, "boundObjectRef": null},
            "status": {"token": "", "expirationTimestamp": null}
        });
        if let (Some(base), Some(extra)) = (body["spec"].as_object_mut(), spec.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        body
    }

    fn api_request(namespace: &str, name: &str) -> ApiRequest {
        ApiRequest {
            method: "POST".into(),
            info: std::sync::Arc::new(RequestInfo {
                is_resource_request: true,
                verb: "create".into(),
                api_prefix: "api".into(),
                api_version: "v1".into(),
                namespace: namespace.into(),
                resource: "serviceaccounts".into(),
                subresource: "token".into(),
                name: name.into(),
                ..Default::default()
            }),
            query: Vec::new(),
            content_type: Some("application/json".into()),
            content_length_sent: true,
            user_agent: None,
            accept: None,
            if_none_match: None,
            body: bytes::Bytes::new(),
            user: Default::default(),
        }
    }

    impl Fixture {
        async fn create(&self, body: Value) -> ApiResult<Value> {
            self.create_warned(body).await.map(|(answer, _)| answer)
        }

        async fn create_warned(&self, body: Value) -> ApiResult<(Value, Vec<String>)> {
            self.handler
                .create(&api_request("ns", "builder"), &self.service_account, body)
                .await
        }

        fn verify(&self, token: &str, audiences: &[&str]) -> TokenOutcome {
            let audiences: Vec<String> = audiences.iter().map(|s| s.to_string()).collect();
            self.authn
                .authenticate_at(token, &audiences, SystemTime::now())
        }
    }

    fn claims(token: &str) -> Value {
        use base64::Engine;
        let payload = token.split('.').nth(1).expect("payload");
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("b64");
        serde_json::from_slice(&bytes).expect("json")
    }

    #[tokio::test]
    async fn kubectl_create_token() {
        let f = fixture(None);
        assert_eq!(
            f.handler.kind(),
            ("TokenRequest", "authentication.k8s.io/v1")
        );
        let answer = f.create(kubectl_body(json!({}))).await.expect("created");
        assert_eq!(answer["kind"], "TokenRequest");
        assert_eq!(answer["apiVersion"], API_VERSION);
        assert_eq!(answer["metadata"]["name"], "builder");
        assert_eq!(answer["metadata"]["namespace"], "ns");
        let created = answer["metadata"]["creationTimestamp"]
            .as_str()
            .expect("creationTimestamp");
        assert!(created.ends_with('Z') && created.len() == 20, "{created}");
        assert_eq!(answer["spec"]["audiences"], json!([API]));
        assert_eq!(answer["spec"]["expirationSeconds"], 3600);
        let token = answer["status"]["token"].as_str().expect("token");
        let claims = claims(token);
        let expires = chrono::DateTime::parse_from_rfc3339(
            answer["status"]["expirationTimestamp"]
                .as_str()
                .expect("expirationTimestamp"),
        )
        .expect("rfc3339");
        assert_eq!(Some(expires.timestamp()), claims["exp"].as_i64());
        assert_eq!(
            claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0),
            3600
        );
        match f.verify(token, &[]) {
            TokenOutcome::Authenticated(r) => {
                assert_eq!(r.user.name, "system:serviceaccount:ns:builder");
                assert_eq!(r.user.uid, "sa-uid");
            }
            other => panic!("token not accepted: {other:?}"),
        }
    }

    #[tokio::test]
    async fn audience_duration_and_bound_secret() {
        // kubectl create token builder --audience x --duration 1h --bound-object-kind Secret
        //   --bound-object-name s
        let f = fixture(None);
        let answer = f
            .create(kubectl_body(json!({
                "audiences": ["x"],
                "expirationSeconds": 3600,
                "boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s"}
            })))
            .await
            .expect("created");
        assert_eq!(answer["spec"]["audiences"], json!(["x"]));
        let token = answer["status"]["token"].as_str().expect("token");
        let claims = claims(token);
        assert_eq!(claims["aud"], json!(["x"]));
        assert_eq!(
            claims["kubernetes.io"]["secret"],
            json!({"name": "s", "uid": "secret-uid"})
        );
        assert!(matches!(
            f.verify(token, &["x"]),
            TokenOutcome::Authenticated(_)
        ));
        assert!(matches!(f.verify(token, &[]), TokenOutcome::Invalid(_)));
        // Deleting the Secret revokes the token.
        f.objects.0.lock().expect("lock").clear();
        f.objects
            .put("serviceaccounts", "ns", f.service_account.clone());
        assert!(matches!(f.verify(token, &["x"]), TokenOutcome::Invalid(_)));
    }

    #[tokio::test]
    async fn validation() {
        let f = fixture(None);
        let err = f
            .create(kubectl_body(json!({"expirationSeconds": 60})))
            .await
            .expect_err("too short");
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        );
        assert!(f
            .create(kubectl_body(json!({"expirationSeconds": 600})))
            .await
            .is_ok());
        let err = f
            .create(kubectl_body(json!({"expirationSeconds": (1i64 << 32) + 1})))
            .await
            .expect_err("too long");
        assert_eq!(err.code, 422);
        assert!(err
            .message
            .contains("may not specify a duration larger than 2^32 seconds"));

        let mut body = kubectl_body(json!({}));
        body["metadata"]["name"] = json!("other");
        let err = f.create(body).await.expect_err("name mismatch");
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "TokenRequest.authentication.k8s.io \"builder\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified"
        );
        let mut body = kubectl_body(json!({}));
        body["metadata"]["namespace"] = json!("elsewhere");
        let err = f.create(body).await.expect_err("namespace");
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                400,
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        );

        let err = f
            .create(kubectl_body(json!({"expirationSeconds": "1h"})))
            .await
            .expect_err("type");
        assert_eq!(err.code, 400);
        let err = f
            .create(kubectl_body(json!({"audiences": [1]})))
            .await
            .expect_err("type");
        assert_eq!(err.code, 400);
        assert_eq!(f.create(json!([])).await.expect_err("not object").code, 400);
    }

    #[tokio::test]
    async fn bound_object_errors() {
        let f = fixture(None);
        let bound = |r: Value| kubectl_body(json!({ "boundObjectRef": r }));

        let err = f
            .create(bound(
                json!({"kind": "Secret", "apiVersion": "v1", "name": "missing"}),
            ))
            .await
            .expect_err("missing secret");
        assert_eq!(err.code, 404);
        assert_eq!(err.message, "secrets \"missing\" not found");

        let err = f
            .create(bound(
                json!({"kind": "Secret", "apiVersion": "v1", "name": "s", "uid": "old"}),
            ))
            .await
            .expect_err("uid");
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on Secret \"s\": the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated"
        );
        assert!(f
            .create(bound(
                json!({"kind": "Secret", "apiVersion": "v1", "name": "s", "uid": "secret-uid"})
            ))
            .await
            .is_ok());

        let err = f
            .create(bound(
                json!({"kind": "ConfigMap", "apiVersion": "v1", "name": "c"}),
            ))
            .await
            .expect_err("kind");
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "cannot bind token to object of type /v1, Kind=ConfigMap"
        );
        let err = f
            .create(bound(
                json!({"kind": "Secret", "apiVersion": "example.com/v1", "name": "s"}),
            ))
            .await
            .expect_err("group");
        assert_eq!(
            err.message,
            "cannot bind token to object of type example.com/v1, Kind=Secret"
        );

        let err = f
            .create(bound(json!({"kind": "Secret", "apiVersion": "v1"})))
            .await
            .expect_err("no name");
        assert_eq!(err.code, 400);

        // Pods and Nodes are looked up the same way (not served yet: not found).
        let err = f
            .create(bound(
                json!({"kind": "Pod", "apiVersion": "v1", "name": "p"}),
            ))
            .await
            .expect_err("pod");
        assert_eq!(
            (err.code, err.message.as_str()),
            (404, "pods \"p\" not found")
        );
        let err = f
            .create(bound(
                json!({"kind": "Node", "apiVersion": "v1", "name": "n"}),
            ))
            .await
            .expect_err("node");
        assert_eq!(
            (err.code, err.message.as_str()),
            (404, "nodes \"n\" not found")
        );

        // A pod of another ServiceAccount cannot be bound.
        f.objects.put(
            "pods",
            "ns",
            json!({"metadata": {"name": "p", "uid": "pod-uid"}, "spec": {"serviceAccountName": "other", "nodeName": "n1"}}),
        );
        let err = f
            .create(bound(
                json!({"kind": "Pod", "apiVersion": "v1", "name": "p"}),
            ))
            .await
            .expect_err("other sa");
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "cannot bind token for serviceaccount \"builder\" to pod running with different serviceaccount name.")
        );
        f.objects.put(
            "pods",
            "ns",
            json!({"metadata": {"name": "p", "uid": "pod-uid"}, "spec": {"serviceAccountName": "builder", "nodeName": "n1"}}),
        );
        let answer = f
            .create(bound(
                json!({"kind": "Pod", "apiVersion": "v1", "name": "p"}),
            ))
            .await
            .expect("pod-bound");
        let claims = claims(answer["status"]["token"].as_str().expect("token"));
        assert_eq!(
            claims["kubernetes.io"]["pod"],
            json!({"name": "p", "uid": "pod-uid"})
        );
        assert_eq!(claims["kubernetes.io"]["node"], json!({"name": "n1"}));
    }

    #[tokio::test]
    async fn maximum_expiration_shortens() {
        let f = fixture(Some(std::time::Duration::from_secs(7200)));
        let (answer, warnings) = f
            .create_warned(kubectl_body(json!({"expirationSeconds": 86400})))
            .await
            .expect("created");
        assert_eq!(answer["spec"]["expirationSeconds"], 7200);
        assert_eq!(
            warnings,
            ["requested expiration of 86400 seconds shortened to 7200 seconds"]
        );
        let (_, warnings) = f
            .create_warned(kubectl_body(json!({"expirationSeconds": 3600})))
            .await
            .expect("created");
        assert!(warnings.is_empty(), "{warnings:?}");
        let claims = claims(answer["status"]["token"].as_str().expect("token"));
        assert_eq!(
            claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0),
            7200
        );
    }
}

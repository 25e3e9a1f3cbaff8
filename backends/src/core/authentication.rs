//! The `authentication.k8s.io/v1` review resources, as kube-apiserver serves them: computed
//! answers to a create, never stored, cluster-scoped, `create` the only verb.
//!
//! - `tokenreviews` (kube's `pkg/registry/authentication/tokenreview`): is this bearer token
//!   valid, and whose is it? The token is checked by a [`TokenReviewer`] the gateway supplies
//!   (its bearer-token authenticators), so this crate does not depend on how tokens are
//!   verified. The request object comes back with `status` filled in.
//! - `selfsubjectreviews` (kube's `pkg/registry/authentication/selfsubjectreview`): who am I?
//!   Answers with the request's identity after impersonation; `kubectl auth whoami` prints it.

use std::sync::Arc;

use kubegate_policy::UserInfo;
use serde_json::{json, Map, Value};

use super::gojson::GoJson;
use super::{base_def, Names};
use crate::api::ApiRequest;
use crate::registry::now_rfc3339;
use crate::resource::{DefaultStrategy, ResourceDef, VirtualHandler};
use crate::status::{ApiError, ApiResult};

const GROUP: &str = "authentication.k8s.io";
const VERSION: &str = "v1";
const API_VERSION: &str = "authentication.k8s.io/v1";

/// Checks bearer tokens for `tokenreviews`: a thin adapter the gateway implements over its
/// bearer-token authenticators.
#[async_trait::async_trait]
pub trait TokenReviewer: Send + Sync {
    /// Reviews `token` for `audiences` (the review's `spec.audiences`; empty means the
    /// server's own API audiences, which the implementation applies, as kube does).
    ///
    /// - `Ok(Some((user, audiences)))`: authenticated, with the audiences the token is valid
    ///   for (kube's `Response.Audiences`).
    /// - `Ok(None)`: no authenticator recognized the token (`authenticated: false`, no error).
    /// - `Err(message)`: the token was rejected; `message` becomes `status.error`.
    async fn review(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String>;
}

/// The `tokenreviews` resource, answering with `reviewer`.
pub fn tokenreviews_def(reviewer: Arc<dyn TokenReviewer>) -> ResourceDef {
    let mut def = base_def(
        Names {
            group: GROUP,
            version: VERSION,
            plural: "tokenreviews",
            singular: "tokenreview",
            kind: "TokenReview",
            namespaced: false,
            definition: "io.k8s.api.authentication.v1.TokenReview",
        },
        Arc::new(DefaultStrategy),
    );
    def.verbs = vec!["create"];
    def.virtual_handler = Some(Arc::new(TokenReviewHandler { reviewer }));
    def
}

/// The `selfsubjectreviews` resource.
pub fn selfsubjectreviews_def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: GROUP,
            version: VERSION,
            plural: "selfsubjectreviews",
            singular: "selfsubjectreview",
            kind: "SelfSubjectReview",
            namespaced: false,
            definition: "io.k8s.api.authentication.v1.SelfSubjectReview",
        },
        Arc::new(DefaultStrategy),
    );
    def.verbs = vec!["create"];
    def.virtual_handler = Some(Arc::new(SelfSubjectReviewHandler));
    def
}

/// kube's tokenreview REST `Create`.
struct TokenReviewHandler {
    reviewer: Arc<dyn TokenReviewer>,
}

#[async_trait::async_trait]
impl VirtualHandler for TokenReviewHandler {
    async fn create(&self, _request: &ApiRequest, object: Value) -> ApiResult<Value> {
        let go = GoJson::new("TokenReview");
        let empty = Map::new();
        let spec = go
            .object(
                object.get("spec"),
                "TokenReview",
                "spec",
                "v1.TokenReviewSpec",
            )?
            .unwrap_or(&empty);
        let token = go.string(spec.get("token"), "TokenReviewSpec", "spec.token")?;
        let audiences = go.strings(
            spec.get("audiences"),
            "TokenReviewSpec",
            "spec.audiences",
            "[]string",
        )?;
        // Checked before anything else, with kube's words: a 400, not a field error.
        if token.is_empty() {
            return Err(ApiError::bad_request(
                "token is required for TokenReview in authentication",
            ));
        }
        // kube fills in the status of the object it was sent, so whatever a client put there
        // and the review does not overwrite comes back as sent (after typed decoding).
        let mut status = decode_review_status(&go, object.get("status"))?;

        let outcome = self.reviewer.review(&token, &audiences).await;
        status.authenticated = matches!(outcome, Ok(Some(_)));
        match outcome {
            Ok(Some((user, granted))) => {
                // An authenticator that answers for none of the asked audiences has broken
                // its contract; kube refuses to vouch for the token rather than guess.
                if !audiences.is_empty() && !granted.iter().any(|a| audiences.contains(a)) {
                    tracing::error!(
                        want = ?audiences,
                        got = ?granted,
                        "error validating audience"
                    );
                    return Err(ApiError::internal("error validating audiences"));
                }
                status.user = user_info(&user);
                status.audiences = granted;
            }
            Ok(None) => {}
            Err(message) => status.error = message,
        }

        let mut spec_out = Map::new();
        spec_out.insert("token".into(), json!(token));
        if !audiences.is_empty() {
            spec_out.insert("audiences".into(), json!(audiences));
        }
        Ok(json!({
            "kind": "TokenReview",
            "apiVersion": API_VERSION,
            "metadata": echoed_metadata(&object),
            "spec": spec_out,
            "status": status.to_json(),
        }))
    }
}

/// kube's selfsubjectreview REST `Create`.
struct SelfSubjectReviewHandler;

#[async_trait::async_trait]
impl VirtualHandler for SelfSubjectReviewHandler {
    async fn create(&self, request: &ApiRequest, object: Value) -> ApiResult<Value> {
        // The body carries nothing kube reads, but it is still decoded into the typed object,
        // so ill-typed fields are a 400 as in kube.
        let go = GoJson::new("SelfSubjectReview");
        if let Some(status) = go.object(
            object.get("status"),
            "SelfSubjectReview",
            "status",
            "v1.SelfSubjectReviewStatus",
        )? {
            decode_user_info(
                &go,
                status.get("userInfo"),
                "SelfSubjectReviewStatus",
                "status.userInfo",
            )?;
        }

        // A new object, not the request's: only the creation time is set in its metadata.
        Ok(json!({
            "kind": "SelfSubjectReview",
            "apiVersion": API_VERSION,
            "metadata": {"creationTimestamp": now_rfc3339()},
            "status": {"userInfo": user_info(&request.user)},
        }))
    }
}

/// `authentication.k8s.io/v1 UserInfo` as Go encodes it: every field `omitempty`.
fn user_info(user: &UserInfo) -> Value {
    let mut map = Map::new();
    if !user.name.is_empty() {
        map.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        map.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        map.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        map.insert("extra".into(), json!(user.extra));
    }
    Value::Object(map)
}

/// The request's metadata as kube re-encodes it: `creationTimestamp` is a Go struct that is
/// never left out, so an unset one is written as `null`.
fn echoed_metadata(object: &Value) -> Value {
    let mut metadata = object
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    metadata.entry("creationTimestamp").or_insert(Value::Null);
    Value::Object(metadata)
}

/// `TokenReviewStatus` after typed decoding.
#[derive(Default)]
struct ReviewStatus {
    authenticated: bool,
    user: Value,
    audiences: Vec<String>,
    error: String,
}

impl ReviewStatus {
    /// Go's encoding: `user` is a struct and always written (`{}` when empty); the other
    /// fields are `omitempty`.
    fn to_json(&self) -> Value {
        let mut map = Map::new();
        if self.authenticated {
            map.insert("authenticated".into(), json!(true));
        }
        let user = if self.user.is_object() {
            self.user.clone()
        } else {
            json!({})
        };
        map.insert("user".into(), user);
        if !self.audiences.is_empty() {
            map.insert("audiences".into(), json!(self.audiences));
        }
        if !self.error.is_empty() {
            map.insert("error".into(), json!(self.error));
        }
        Value::Object(map)
    }
}

/// A `UserInfo` at `path`, type-checked as Go decodes it (string name and uid, a string list of
/// groups, a map of string lists as extra), returned as it will be written back (Go's
/// `omitempty`). `parent` is the Go struct holding the field (`TokenReviewStatus`).
fn decode_user_info(
    go: &GoJson,
    value: Option<&Value>,
    parent: &str,
    path: &str,
) -> ApiResult<Value> {
    let Some(map) = go.object(value, parent, path, "v1.UserInfo")? else {
        return Ok(json!({}));
    };
    let field = |name: &str| format!("{path}.{name}");
    Ok(user_info(&UserInfo {
        name: go.string(map.get("username"), "UserInfo", &field("username"))?,
        uid: go.string(map.get("uid"), "UserInfo", &field("uid"))?,
        groups: go.strings(map.get("groups"), "UserInfo", &field("groups"), "[]string")?,
        extra: go.string_lists_map(
            map.get("extra"),
            "UserInfo",
            &field("extra"),
            "v1.ExtraValue",
        )?,
    }))
}

/// A client-sent `TokenReviewStatus`.
fn decode_review_status(go: &GoJson, value: Option<&Value>) -> ApiResult<ReviewStatus> {
    let empty = Map::new();
    let map = go
        .object(value, "TokenReview", "status", "v1.TokenReviewStatus")?
        .unwrap_or(&empty);
    Ok(ReviewStatus {
        authenticated: go.boolean(
            map.get("authenticated"),
            "TokenReviewStatus",
            "status.authenticated",
        )?,
        user: decode_user_info(go, map.get("user"), "TokenReviewStatus", "status.user")?,
        audiences: go.strings(
            map.get("audiences"),
            "TokenReviewStatus",
            "status.audiences",
            "[]string",
        )?,
        error: go.string(map.get("error"), "TokenReviewStatus", "status.error")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::protobuf;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Answers by token: `good` authenticates (for the audiences asked, or `api`), `stranger`
    /// is nobody's, `wrong-aud` authenticates for another audience, anything else is rejected.
    /// Records the audiences it was asked about.
    #[derive(Default)]
    struct FakeReviewer {
        asked: Mutex<Vec<Vec<String>>>,
    }

    #[async_trait::async_trait]
    impl TokenReviewer for FakeReviewer {
        async fn review(
            &self,
            token: &str,
            audiences: &[String],
        ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
            if let Ok(mut asked) = self.asked.lock() {
                asked.push(audiences.to_vec());
            }
            match token {
                "good" => {
                    let mut user = UserInfo::new(
                        "system:serviceaccount:default:builder",
                        vec![
                            "system:serviceaccounts".into(),
                            "system:serviceaccounts:default".into(),
                            "system:authenticated".into(),
                        ],
                    );
                    user.uid = "5f0c".into();
                    user.extra.insert(
                        "authentication.kubernetes.io/credential-id".into(),
                        vec!["JTI=abc".into()],
                    );
                    let granted = if audiences.is_empty() {
                        vec!["api".to_string()]
                    } else {
                        audiences.to_vec()
                    };
                    Ok(Some((user, granted)))
                }
                "stranger" => Ok(None),
                "wrong-aud" => Ok(Some((UserInfo::new("x", Vec::new()), vec!["other".into()]))),
                _ => Err("invalid bearer token".into()),
            }
        }
    }

    fn request(user: UserInfo) -> ApiRequest {
        ApiRequest {
            method: "POST".into(),
            info: Default::default(),
            query: Vec::new(),
            content_type: Some("application/json".into()),
            content_length_sent: true,
            user_agent: None,
            accept: None,
            if_none_match: None,
            body: bytes::Bytes::new(),
            user: Arc::new(user),
        }
    }

    fn handler(def: &ResourceDef) -> Arc<dyn VirtualHandler> {
        def.virtual_handler
            .clone()
            .unwrap_or_else(|| panic!("{} has no handler", def.plural))
    }

    async fn review(body: Value) -> (ApiResult<Value>, Vec<Vec<String>>) {
        let reviewer = Arc::new(FakeReviewer::default());
        let def = tokenreviews_def(reviewer.clone());
        let got = handler(&def)
            .create(&request(UserInfo::default()), body)
            .await;
        let asked = reviewer.asked.lock().map(|a| a.clone()).unwrap_or_default();
        (got, asked)
    }

    fn token_review(spec: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": "TokenReview", "spec": spec})
    }

    #[test]
    fn definitions_are_create_only_and_cluster_scoped() {
        let defs = [
            tokenreviews_def(Arc::new(FakeReviewer::default())),
            selfsubjectreviews_def(),
        ];
        let names: Vec<_> = defs
            .iter()
            .map(|d| {
                (
                    d.plural.as_str(),
                    d.singular.as_str(),
                    d.kind.as_str(),
                    d.definition.as_str(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                (
                    "tokenreviews",
                    "tokenreview",
                    "TokenReview",
                    "io.k8s.api.authentication.v1.TokenReview"
                ),
                (
                    "selfsubjectreviews",
                    "selfsubjectreview",
                    "SelfSubjectReview",
                    "io.k8s.api.authentication.v1.SelfSubjectReview"
                ),
            ]
        );
        for d in &defs {
            assert_eq!(d.api_version(), "authentication.k8s.io/v1");
            assert_eq!(d.verbs, vec!["create"]);
            assert!(!d.namespaced);
            assert!(d.virtual_handler.is_some());
            assert!(d.subresources.is_empty());
        }
    }

    #[tokio::test]
    async fn authenticated_token_fills_status_like_kube() {
        let (got, asked) = review(token_review(json!({"token": "good"}))).await;
        assert_eq!(asked, vec![Vec::<String>::new()]);
        assert_eq!(
            got,
            Ok(json!({
                "kind": "TokenReview",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"token": "good"},
                "status": {
                    "authenticated": true,
                    "user": {
                        "username": "system:serviceaccount:default:builder",
                        "uid": "5f0c",
                        "groups": [
                            "system:serviceaccounts",
                            "system:serviceaccounts:default",
                            "system:authenticated"
                        ],
                        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]}
                    },
                    "audiences": ["api"]
                }
            }))
        );
    }

    #[tokio::test]
    async fn audiences_are_passed_and_echoed() {
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "TokenReview",
            "metadata": {"name": "r1", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"token": "good", "audiences": ["vault", "api"]},
        });
        let (got, asked) = review(body).await;
        assert_eq!(asked, vec![vec!["vault".to_string(), "api".to_string()]]);
        let got = got.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got["spec"],
            json!({"token": "good", "audiences": ["vault", "api"]})
        );
        assert_eq!(got["status"]["audiences"], json!(["vault", "api"]));
        assert_eq!(
            got["metadata"],
            json!({"name": "r1", "creationTimestamp": "2024-01-01T00:00:00Z"})
        );
    }

    #[tokio::test]
    async fn an_authenticator_outside_the_asked_audiences_is_an_internal_error() {
        let (got, _) = review(token_review(
            json!({"token": "wrong-aud", "audiences": ["vault"]}),
        ))
        .await;
        let err = got.err().unwrap_or_else(|| panic!("must fail"));
        assert_eq!(
            (err.code, err.reason, err.message.as_str()),
            (
                500,
                "InternalError",
                "Internal error occurred: error validating audiences"
            )
        );
    }

    #[tokio::test]
    async fn unauthenticated_tokens() {
        // Nobody's token: not authenticated, no error, and Go still writes the empty user.
        let (got, _) = review(token_review(json!({"token": "stranger"}))).await;
        assert_eq!(got.map(|v| v["status"].clone()), Ok(json!({"user": {}})));
        // A rejected token carries the authenticator's error.
        let (got, _) = review(token_review(json!({"token": "forged"}))).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({"user": {}, "error": "invalid bearer token"}))
        );
    }

    #[tokio::test]
    async fn client_status_is_overwritten_only_where_kube_writes() {
        let sent_status = json!({
            "authenticated": true,
            "user": {"username": "admin", "groups": ["system:masters"]},
            "audiences": ["x"],
            "error": "old",
        });
        // Rejected: `authenticated` and `error` are set, the rest is the client's.
        let mut body = token_review(json!({"token": "forged"}));
        body["status"] = sent_status.clone();
        let (got, _) = review(body).await;
        assert_eq!(
            got.map(|v| v["status"].clone()),
            Ok(json!({
                "user": {"username": "admin", "groups": ["system:masters"]},
                "audiences": ["x"],
                "error": "invalid bearer token",
            }))
        );
        // Accepted: user and audiences are the review's; the client's error stays, as in kube.
        let mut body = token_review(json!({"token": "good"}));
        body["status"] = sent_status;
        let (got, _) = review(body).await;
        let status = got.map(|v| v["status"].clone()).unwrap_or_default();
        assert_eq!(
            status["user"]["username"],
            "system:serviceaccount:default:builder"
        );
        assert_eq!(status["audiences"], json!(["api"]));
        assert_eq!(status["error"], "old");
    }

    #[tokio::test]
    async fn bad_review_requests() {
        let cases = [
            (
                token_review(json!({})),
                "token is required for TokenReview in authentication",
            ),
            (
                json!({"apiVersion": API_VERSION, "kind": "TokenReview"}),
                "token is required for TokenReview in authentication",
            ),
            (
                token_review(json!({"token": ""})),
                "token is required for TokenReview in authentication",
            ),
            (
                token_review(json!({"token": 12})),
                "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot unmarshal number into Go struct field TokenReviewSpec.spec.token of type string",
            ),
            (
                token_review(json!({"token": "good", "audiences": "api"})),
                "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot unmarshal string into Go struct field TokenReviewSpec.spec.audiences of type []string",
            ),
            (
                token_review(json!({"token": "good", "audiences": [1]})),
                "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot unmarshal number into Go struct field TokenReviewSpec.spec.audiences of type string",
            ),
            (
                token_review(json!("abc")),
                "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot unmarshal string into Go struct field TokenReview.spec of type v1.TokenReviewSpec",
            ),
            (
                json!({"spec": {"token": "good"}, "status": {"user": {"groups": "a"}}}),
                "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot unmarshal string into Go struct field UserInfo.status.user.groups of type []string",
            ),
        ];
        for (body, want) in cases {
            let (got, asked) = review(body.clone()).await;
            let err = got.err().unwrap_or_else(|| panic!("{body} must fail"));
            assert_eq!((err.code, err.message.as_str()), (400, want), "{body}");
            assert!(asked.is_empty(), "{body}: nothing is reviewed");
        }
    }

    fn whoami_user() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: BTreeMap::from([(
                "scopes".to_string(),
                vec!["view".to_string(), "edit".to_string()],
            )]),
        }
    }

    #[tokio::test]
    async fn self_subject_review_answers_with_the_request_user() {
        let def = selfsubjectreviews_def();
        let body = json!({"apiVersion": API_VERSION, "kind": "SelfSubjectReview", "metadata": {"name": "ignored"}});
        let got = handler(&def)
            .create(&request(whoami_user()), body)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let created = got["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default();
        assert!(
            chrono::DateTime::parse_from_rfc3339(created).is_ok(),
            "creationTimestamp {created:?}"
        );
        assert_eq!(
            got,
            json!({
                "kind": "SelfSubjectReview",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": created},
                "status": {"userInfo": {
                    "username": "alice",
                    "uid": "u-1",
                    "groups": ["devs", "system:authenticated"],
                    "extra": {"scopes": ["view", "edit"]}
                }}
            })
        );

        // Anonymous has no uid or extra; Go leaves them out.
        let got = handler(&def)
            .create(&request(UserInfo::anonymous()), json!({}))
            .await
            .map(|v| v["status"].clone());
        assert_eq!(
            got,
            Ok(
                json!({"userInfo": {"username": "system:anonymous", "groups": ["system:unauthenticated"]}})
            )
        );
    }

    #[tokio::test]
    async fn self_subject_review_rejects_ill_typed_bodies() {
        let def = selfsubjectreviews_def();
        let got = handler(&def)
            .create(
                &request(whoami_user()),
                json!({"status": {"userInfo": {"username": 1}}}),
            )
            .await;
        assert_eq!(
            got.err().map(|e| (e.code, e.message)),
            Some((
                400,
                "SelfSubjectReview in version \"v1\" cannot be handled as a SelfSubjectReview: json: cannot unmarshal number into Go struct field UserInfo.status.userInfo.username of type string".to_string()
            ))
        );
    }

    /// `kubectl auth whoami` asks for protobuf: both answers must encode, and decode back to
    /// the same identity.
    #[tokio::test]
    async fn answers_encode_as_protobuf() {
        let def = selfsubjectreviews_def();
        let whoami = handler(&def)
            .create(&request(whoami_user()), json!({}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (token, _) = review(token_review(json!({"token": "good"}))).await;
        for answer in [whoami, token.unwrap_or_else(|e| panic!("{e}"))] {
            let bytes = protobuf::encode(&answer).unwrap_or_else(|e| panic!("{e}"));
            let back = protobuf::decode(&bytes).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back["status"], answer["status"]);
        }
    }
}

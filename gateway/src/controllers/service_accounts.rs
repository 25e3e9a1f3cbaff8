//! kube-controller-manager's ServiceAccount controllers, in-process:
//!
//! - every active namespace has the `default` ServiceAccount (the serviceaccounts
//!   controller), made again if deleted;
//! - every active namespace has the `kube-root-ca.crt` ConfigMap with the CA that clients
//!   verify kubegate's serving certificate with (the root-ca-cert-publisher), kept as it is;
//! - a Secret of type `kubernetes.io/service-account-token` naming a ServiceAccount gets a
//!   legacy token, the CA and the namespace (the tokens controller), and is deleted once its
//!   ServiceAccount is gone or replaced.
//!
//! A pass runs when a namespace, ServiceAccount, Secret or ConfigMap changes, and every
//! [`RESYNC`] otherwise.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use kubegate_backends::registry::manager::KUBE_CONTROLLER_MANAGER;
use kubegate_backends::registry::Registry;
use kubegate_backends::resource::ResourceDef;
use kubegate_policy::authn::serviceaccount::{ObjectRef, TokenIssuer};
use serde_json::{json, Value};

/// How often a pass runs when nothing wakes the controllers.
const RESYNC: Duration = Duration::from_secs(30);
/// Lets a burst of changes settle into one pass.
const SETTLE: Duration = Duration::from_millis(50);

/// The ConfigMap the root-ca-cert-publisher keeps in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// Whether `configmap` has a non-empty `kubernetes.io/description` annotation.
fn described(configmap: &Value) -> bool {
    configmap
        .pointer("/metadata/annotations/kubernetes.io~1description")
        .and_then(Value::as_str)
        .is_some_and(|d| !d.is_empty())
}
/// kube's description of it.
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// Which changes of a watched resource call for a pass.
#[derive(Debug, Clone, Copy)]
enum Relevance {
    Any,
    /// A Secret of the ServiceAccount token type.
    TokenSecret,
    /// The `kube-root-ca.crt` ConfigMap of some namespace.
    RootCa,
}

impl Relevance {
    fn matches(self, event: &kubegate_backends::storage::cacher::CacheEvent) -> bool {
        match self {
            Relevance::Any => true,
            Relevance::TokenSecret => {
                memchr::memmem::find(&event.object.bytes, TOKEN_SECRET_TYPE.as_bytes()).is_some()
            }
            Relevance::RootCa => event.object.key.ends_with(&format!("/{ROOT_CA_CONFIGMAP}")),
        }
    }
}

/// What the controllers need besides the registry.
pub struct ServiceAccountControllers {
    pub registry: Arc<Registry>,
    pub issuer: Arc<TokenIssuer>,
    /// PEM of the CA kubegate's serving certificate chains to.
    pub root_ca: String,
}

impl ServiceAccountControllers {
    /// Runs until `stop` changes.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let watched: Vec<(String, Relevance)> = [
            ("namespaces", Relevance::Any),
            ("serviceaccounts", Relevance::Any),
            ("secrets", Relevance::TokenSecret),
            ("configmaps", Relevance::RootCa),
        ]
        .into_iter()
        .filter_map(|(plural, relevance)| {
            let def = self.registry.find("", plural)?;
            Some((def.collection_prefix(""), relevance))
        })
        .collect();
        loop {
            self.pass().await;
            let cacher = self.registry.cacher();
            let revision = cacher.revision();
            let mut watchers: Vec<_> = watched
                .iter()
                .filter_map(|(prefix, relevance)| {
                    Some((cacher.watch(prefix, revision).ok()?, *relevance))
                })
                .collect();
            // Only a change the controllers act on wakes them: not every ConfigMap or Secret
            // write (a create benchmark writes thousands a second).
            let changed = async {
                if watchers.is_empty() {
                    return std::future::pending().await;
                }
                loop {
                    let next = futures::future::select_all(watchers.iter_mut().map(
                        |(watcher, relevance)| {
                            Box::pin(async move { (watcher.next().await, *relevance) })
                        },
                    ));
                    match next.await.0 {
                        (Some(Ok(event)), relevance) if relevance.matches(&event) => return,
                        (Some(Ok(_)), _) => continue,
                        // A watch that ended (fell behind): start over with a pass.
                        _ => return,
                    }
                }
            };
            tokio::select! {
                _ = changed => tokio::time::sleep(SETTLE).await,
                _ = tokio::time::sleep(RESYNC) => {}
                _ = stop.changed() => return,
            }
        }
    }

    fn def(&self, plural: &str) -> Option<Arc<ResourceDef>> {
        self.registry.find("", plural)
    }

    async fn pass(&self) {
        let (Some(namespaces), Some(accounts), Some(configmaps), Some(secrets)) = (
            self.def("namespaces"),
            self.def("serviceaccounts"),
            self.def("configmaps"),
            self.def("secrets"),
        ) else {
            return;
        };
        let active: Vec<String> = match self.registry.list_internal(&namespaces).await {
            Ok((items, _)) => items
                .iter()
                .filter(|ns| ns.pointer("/metadata/deletionTimestamp").is_none())
                .filter(|ns| {
                    ns.pointer("/status/phase").and_then(Value::as_str) != Some("Terminating")
                })
                .filter_map(|ns| ns.pointer("/metadata/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e.message, "service account controllers: listing namespaces");
                return;
            }
        };
        for namespace in &active {
            self.ensure_default_account(&accounts, namespace).await;
            self.ensure_root_ca(&configmaps, namespace).await;
        }
        self.sync_token_secrets(&accounts, &secrets).await;
    }

    fn cached(&self, def: &ResourceDef, namespace: &str, name: &str) -> Option<Value> {
        let cached = self.registry.cacher().get(&def.key(namespace, name))?;
        serde_json::from_slice(&cached.bytes).ok()
    }

    /// The serviceaccounts controller: `default` in every active namespace.
    async fn ensure_default_account(&self, accounts: &ResourceDef, namespace: &str) {
        if self
            .registry
            .cacher()
            .get(&accounts.key(namespace, "default"))
            .is_some()
        {
            return;
        }
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace}});
        match self
            .registry
            .create_internal(accounts, account, KUBE_CONTROLLER_MANAGER)
            .await
        {
            Ok(_) => tracing::info!(namespace, "created the default service account"),
            // Made meanwhile, or the namespace started terminating.
            Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => {}
            Err(e) => {
                tracing::warn!(namespace, error = %e.message, "creating the default service account")
            }
        }
    }

    /// The root-ca-cert-publisher: `kube-root-ca.crt` with the CA, as kube publishes it.
    async fn ensure_root_ca(&self, configmaps: &ResourceDef, namespace: &str) {
        let wanted_data = json!({"ca.crt": self.root_ca});
        let outcome = match self.cached(configmaps, namespace, ROOT_CA_CONFIGMAP) {
            None => {
                let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": namespace,
                        "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
                    "data": wanted_data});
                self.registry
                    .create_internal(configmaps, configmap, KUBE_CONTROLLER_MANAGER)
                    .await
                    .map(|_| ())
            }
            // kube's publisher rewrites the data, and the description when it is missing or
            // empty; anything else on the ConfigMap (binaryData, other annotations) is left.
            Some(current) if current.get("data") != Some(&wanted_data) || !described(&current) => {
                self.registry
                    .update_internal(
                        configmaps,
                        namespace,
                        ROOT_CA_CONFIGMAP,
                        KUBE_CONTROLLER_MANAGER,
                        |current| {
                            let mut next = current.clone();
                            next["data"] = wanted_data.clone();
                            if !described(&next) {
                                if let Some(metadata) =
                                    next.get_mut("metadata").and_then(Value::as_object_mut)
                                {
                                    let annotations =
                                        metadata.entry("annotations").or_insert_with(|| json!({}));
                                    if !annotations.is_object() {
                                        *annotations = json!({});
                                    }
                                    annotations["kubernetes.io/description"] =
                                        json!(ROOT_CA_DESCRIPTION);
                                }
                            }
                            Ok(next)
                        },
                    )
                    .await
                    .map(|_| ())
            }
            Some(_) => Ok(()),
        };
        match outcome {
            Ok(()) => {}
            Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => {}
            Err(e) => tracing::warn!(namespace, error = %e.message, "publishing kube-root-ca.crt"),
        }
    }

    /// The tokens controller over every ServiceAccount token Secret.
    async fn sync_token_secrets(&self, accounts: &ResourceDef, secrets: &ResourceDef) {
        let prefix = secrets.collection_prefix("");
        let Ok((items, _)) = self.registry.cacher().list(&prefix, None, None) else {
            return;
        };
        for item in items {
            if memchr::memmem::find(&item.bytes, TOKEN_SECRET_TYPE.as_bytes()).is_none() {
                continue;
            }
            let Ok(secret) = serde_json::from_slice::<Value>(&item.bytes) else {
                continue;
            };
            if secret.get("type").and_then(Value::as_str) != Some(TOKEN_SECRET_TYPE)
                || secret.pointer("/metadata/deletionTimestamp").is_some()
            {
                continue;
            }
            if let Err(e) = self.sync_token_secret(accounts, secrets, &secret).await {
                if e.code != 404 && e.code != 409 {
                    tracing::warn!(error = %e.message, "filling a service account token secret");
                }
            }
        }
    }

    async fn sync_token_secret(
        &self,
        accounts: &ResourceDef,
        secrets: &ResourceDef,
        secret: &Value,
    ) -> kubegate_backends::status::ApiResult<()> {
        let text = |pointer: &str| {
            secret
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let namespace = text("/metadata/namespace").to_string();
        let name = text("/metadata/name").to_string();
        let account_name = text(&format!(
            "/metadata/annotations/{}",
            SA_NAME_ANNOTATION.replace('/', "~1")
        ))
        .to_string();
        let wanted_uid = text(&format!(
            "/metadata/annotations/{}",
            SA_UID_ANNOTATION.replace('/', "~1")
        ))
        .to_string();
        let account = self.cached(accounts, &namespace, &account_name);
        let account_uid = account
            .as_ref()
            .and_then(|a| a.pointer("/metadata/uid"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if account.is_none() || (!wanted_uid.is_empty() && wanted_uid != account_uid) {
            // kube's tokens controller deletes a token Secret whose ServiceAccount is gone.
            tracing::info!(
                namespace,
                name,
                "deleting a token secret whose service account is gone"
            );
            return self
                .registry
                .delete_internal(secrets, &namespace, &name)
                .await;
        }
        let data = |key: &str| {
            secret
                .pointer(&format!("/data/{key}"))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let engine = base64::engine::general_purpose::STANDARD;
        let ca = engine.encode(&self.root_ca);
        let ns = engine.encode(&namespace);
        if !data("token").is_empty()
            && data("ca.crt") == ca
            && data("namespace") == ns
            && wanted_uid == account_uid
        {
            return Ok(());
        }
        let token = if data("token").is_empty() {
            let issued = self
                .issuer
                .issue_legacy(
                    &namespace,
                    &ObjectRef::new(account_name.clone(), account_uid.clone()),
                    &name,
                )
                .map_err(kubegate_backends::status::ApiError::internal)?;
            engine.encode(issued)
        } else {
            data("token").to_string()
        };
        self.registry
            .update_internal(
                secrets,
                &namespace,
                &name,
                KUBE_CONTROLLER_MANAGER,
                |current| {
                    let mut next = current.clone();
                    let data = next
                        .as_object_mut()
                        .map(|m| m.entry("data").or_insert_with(|| json!({})));
                    if let Some(Value::Object(data)) = data {
                        data.insert("token".into(), json!(token));
                        data.insert("ca.crt".into(), json!(ca));
                        data.insert("namespace".into(), json!(ns));
                    }
                    if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
                        if let Value::Object(annotations) = annotations {
                            annotations.insert(SA_NAME_ANNOTATION.into(), json!(account_name));
                            annotations.insert(SA_UID_ANNOTATION.into(), json!(account_uid));
                        }
                    }
                    Ok(next)
                },
            )
            .await
            .map(|_| ())
    }
}

//! Keeps what kubegate writes at start in place afterwards, as kube-apiserver's controllers
//! do: the APF bootstrap configuration, ensured again every `flowControl.bootstrapResyncInterval`
//! (kube's `priority-and-fairness-config-producer` hook re-runs its ensurer every minute), and
//! `kube-system/extension-apiserver-authentication`, published again whenever it changes or
//! is deleted and on a resync (kube's ClusterAuthenticationTrustController), so an extension
//! server that starts later still finds the trust it needs, and the `default/kubernetes`
//! Service (kube's bootstrap controller), created again on a resync when it is missing, and
//! the legacy token tracking ConfigMap (kube's legacytokentracking controller).

use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::registry::Registry;

use crate::aggregator::controller::{
    publish_authentication_configmap, AuthenticationInfo, AUTHENTICATION_CONFIGMAP,
};

/// After a change, how long to wait for more before writing (a burst is one write).
const SETTLE: Duration = Duration::from_millis(200);

/// Runs until `stop` resolves; both are reconciled every `resync` when nothing changed.
pub async fn run(
    registry: Arc<Registry>,
    authentication: AuthenticationInfo,
    secure_port: u16,
    resync: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let key = registry
        .find("", "configmaps")
        .map(|def| def.key(AUTHENTICATION_CONFIGMAP.0, AUTHENTICATION_CONFIGMAP.1));
    let mut resync = tokio::time::interval(resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: the start-up pass has just run.
    resync.tick().await;
    loop {
        let mut watcher = key.as_deref().and_then(|key| {
            registry
                .cacher()
                .watch(key, registry.cacher().revision())
                .ok()
        });
        let configmap_changed = async {
            match watcher.as_mut() {
                Some(watcher) => watcher.next().await.is_some(),
                None => std::future::pending().await,
            }
        };
        let full = tokio::select! {
            _ = resync.tick() => true,
            _ = configmap_changed => false,
            _ = stop.changed() => return,
        };
        if full {
            if let Err(e) =
                kubegate_backends::core::flowcontrol_bootstrap::ensure_bootstrap_configuration(
                    &registry,
                )
                .await
            {
                tracing::warn!(error = %e, "APF bootstrap configuration");
            }
            if let Err(e) =
                kubegate_backends::core::services::ensure_kubernetes_service(&registry, secure_port)
                    .await
            {
                tracing::warn!(error = %e.message, "default/kubernetes Service");
            }
            if let Err(e) =
                kubegate_backends::core::configmaps::ensure_legacy_token_tracking(&registry).await
            {
                tracing::warn!(error = %e.message, "legacy token tracking ConfigMap");
            }
        } else {
            tokio::time::sleep(SETTLE).await;
        }
        if let Err(e) = publish_authentication_configmap(&registry, &authentication).await {
            tracing::warn!(error = %e, "extension-apiserver-authentication");
        }
    }
}

//! Background controllers that run beside the request path: the namespace controller, which
//! empties a terminating namespace (its objects here and in APIService backends) and then
//! lets it go (kube-controller-manager's namespace controller, in-process), the garbage
//! collector (kube-controller-manager's, for owner references and the `Orphan`/`Foreground`
//! deletion policies; see `registry::gc`), [`service_accounts`] (the `default`
//! ServiceAccount, `kube-root-ca.crt` and legacy token Secrets), [`event_ttl`], which expires Events on the embedded store, and
//! [`upkeep`], which keeps the start-up configuration kubegate writes in place, and
//! [`apiserver_identity`], kube-apiserver's identity Lease and its collector.

pub mod apiserver_identity;
pub mod event_ttl;
pub mod service_accounts;
pub mod service_allocations;
pub mod upkeep;

use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::registry::gc::Graph;
use kubegate_backends::registry::namespaces::FinalizeOutcome;
use kubegate_backends::registry::Registry;

use crate::aggregator::Aggregator;

/// How often terminating namespaces are re-examined when nothing wakes the controller.
const RESYNC: Duration = Duration::from_secs(2);

/// Runs the namespace controller until `stop` resolves. With `aggregator`, a namespace's
/// objects in APIService backends are deleted too, and the namespace waits for them.
pub async fn namespace_controller(
    registry: Arc<Registry>,
    aggregator: Option<Arc<Aggregator>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let prefix = registry
        .find("", "namespaces")
        .map(|d| d.collection_prefix(""))
        .unwrap_or_default();
    loop {
        for name in registry.terminating_namespaces() {
            let elsewhere = match &aggregator {
                Some(aggregator) => {
                    crate::aggregator::namespaces::delete_remote_content(aggregator, &name).await
                }
                None => Default::default(),
            };
            match registry.finalize_namespace(&name, elsewhere).await {
                Ok(FinalizeOutcome::Gone) => tracing::info!(namespace = %name, "namespace deleted"),
                Ok(FinalizeOutcome::ContentRemaining(n)) => {
                    tracing::debug!(namespace = %name, remaining = n, "namespace content still finalizing")
                }
                Ok(FinalizeOutcome::NotTerminating) => {}
                Err(e) => tracing::warn!(namespace = %name, error = %e, "finalizing namespace"),
            }
        }
        // Wake on the next namespace change, or resync.
        let watcher = registry
            .cacher()
            .watch(&prefix, registry.cacher().revision());
        let wake = async {
            if let Ok(mut w) = watcher {
                let _ = w.next().await;
            } else {
                tokio::time::sleep(RESYNC).await;
            }
        };
        tokio::select! {
            _ = wake => {}
            _ = tokio::time::sleep(RESYNC) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Runs the garbage collector until `stop` resolves: the owner graph is loaded from the watch
/// cache and follows it from the same revision; a watch that ends (fell behind) starts over.
pub async fn garbage_collector(
    registry: Arc<Registry>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let (objects, _, mut watcher) = registry.cacher().list_and_watch("/");
        let mut graph = Graph::load(&objects);
        drop(objects);
        registry.collect_garbage(&mut graph).await;
        loop {
            tokio::select! {
                event = watcher.next() => match event {
                    Some(Ok(event)) => {
                        graph.apply(&event);
                        if graph.has_work() {
                            registry.collect_garbage(&mut graph).await;
                        }
                    }
                    _ => break,
                },
                _ = stop.changed() => return,
            }
        }
        if *stop.borrow() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

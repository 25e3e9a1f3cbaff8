//! Keeps the record of which cluster IPs and node ports Services hold
//! (`kubegate_backends::core::service_allocations`) as the watch cache shows them: loaded
//! before the listener starts, then every Service event applied, and loaded again when the
//! watch ends (the cache re-listed or the watcher fell behind).

use std::sync::Arc;
use std::time::Duration;

use kubegate_backends::core::service_allocations::ServiceAllocations;
use kubegate_backends::registry::Registry;
use kubegate_backends::storage::cacher::{CacheEventKind, CacheWatcher, CachedObject};
use serde_json::Value;

/// How long to wait before listing again after the watch ended.
const REWATCH_PAUSE: Duration = Duration::from_millis(200);

/// Loads the record now and returns the task that keeps it current (to spawn), so no Service
/// is written before the record knows what the stored ones hold.
pub fn start(
    registry: Arc<Registry>,
    allocations: Arc<ServiceAllocations>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Option<impl std::future::Future<Output = ()>> {
    let prefix = registry
        .find("", "services")
        .map(|def| def.collection_prefix(""))?;
    let watcher = load(&registry, &allocations, &prefix);
    Some(follow(registry, allocations, prefix, watcher, stop))
}

fn load(registry: &Registry, allocations: &ServiceAllocations, prefix: &str) -> CacheWatcher {
    let (objects, _, watcher) = registry.cacher().list_and_watch(prefix);
    let services: Vec<Value> = objects.iter().filter_map(|o| parse(o)).collect();
    allocations.resync(&services);
    watcher
}

fn parse(object: &CachedObject) -> Option<Value> {
    if object.corrupt.is_some() {
        return None;
    }
    serde_json::from_slice(&object.bytes).ok()
}

async fn follow(
    registry: Arc<Registry>,
    allocations: Arc<ServiceAllocations>,
    prefix: String,
    mut watcher: CacheWatcher,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        loop {
            tokio::select! {
                event = watcher.next() => match event {
                    Some(Ok(event)) => {
                        let Some(service) = parse(&event.object) else { continue };
                        match event.kind {
                            CacheEventKind::Added | CacheEventKind::Modified => {
                                allocations.observe(&service);
                            }
                            CacheEventKind::Deleted => {
                                let text = |pointer: &str| {
                                    service.pointer(pointer).and_then(Value::as_str).unwrap_or("")
                                };
                                allocations.forget(text("/metadata/namespace"), text("/metadata/name"));
                            }
                        }
                    }
                    Some(Err(_)) | None => break,
                },
                _ = stop.changed() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(REWATCH_PAUSE) => {}
            _ = stop.changed() => return,
        }
        watcher = load(&registry, &allocations, &prefix);
    }
}

//! Recent RBAC decisions, reused while the index is unchanged.
//!
//! A decision is a pure function of the index's contents and of the attributes RBAC reads
//! (user name and groups; verb, group, namespace, resource, subresource and name, or the path
//! of a non-resource request). Clients repeat the same few requests, so remembering recent
//! answers saves walking bindings and rules, and building the allow reason, on every request.
//! Entries carry the index generation they were computed at and are not reused once it moves;
//! every entry holds its full key, compared field by field on a hit, so a hash collision can
//! never hand one request another's decision.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::authz::Decision;
use crate::request_info::RequestInfo;
use crate::user::UserInfo;

/// Independent locks, so the request threads seldom wait on one another.
const SHARDS: usize = 16;
/// Entries per shard before it is emptied (bounds memory whatever the request mix).
const SHARD_CAPACITY: usize = 512;

/// What one decision depended on, owned.
#[derive(Debug)]
struct Key {
    user: String,
    groups: Vec<String>,
    resource_request: bool,
    verb: String,
    api_group: String,
    namespace: String,
    resource: String,
    subresource: String,
    name: String,
    path: String,
}

impl Key {
    fn new(user: &UserInfo, request: &RequestInfo) -> Key {
        // Only the fields RBAC reads for this kind of request are kept (and compared).
        let resource = request.is_resource_request;
        let pick = |field: &String| {
            if resource {
                field.clone()
            } else {
                String::new()
            }
        };
        Key {
            user: user.name.clone(),
            groups: user.groups.clone(),
            resource_request: resource,
            verb: request.verb.clone(),
            api_group: pick(&request.api_group),
            namespace: pick(&request.namespace),
            resource: pick(&request.resource),
            subresource: pick(&request.subresource),
            name: pick(&request.name),
            path: if resource {
                String::new()
            } else {
                request.path.clone()
            },
        }
    }

    fn matches(&self, user: &UserInfo, request: &RequestInfo) -> bool {
        if self.user != user.name
            || self.groups != user.groups
            || self.resource_request != request.is_resource_request
            || self.verb != request.verb
        {
            return false;
        }
        if request.is_resource_request {
            self.api_group == request.api_group
                && self.namespace == request.namespace
                && self.resource == request.resource
                && self.subresource == request.subresource
                && self.name == request.name
        } else {
            self.path == request.path
        }
    }
}

#[derive(Debug, Default)]
struct Shard {
    /// The index generation every entry here was computed at.
    generation: u64,
    /// By the key's hash. aHash rather than std's SipHash (~1,500 instructions per request
    /// between the two hashes): a hit compares the full key anyway, and aHash's state is
    /// random per process, so clients cannot aim requests at one bucket.
    entries: HashMap<u64, Vec<(Key, Decision)>, ahash::RandomState>,
    len: usize,
}

/// Bounded, sharded memory of recent decisions (see the module documentation).
#[derive(Debug)]
pub(super) struct DecisionCache {
    shards: Vec<Mutex<Shard>>,
    hasher: ahash::RandomState,
}

impl Default for DecisionCache {
    fn default() -> Self {
        DecisionCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: ahash::RandomState::new(),
        }
    }
}

impl DecisionCache {
    fn hash(&self, user: &UserInfo, request: &RequestInfo) -> u64 {
        let mut h = self.hasher.build_hasher();
        user.name.hash(&mut h);
        user.groups.hash(&mut h);
        request.is_resource_request.hash(&mut h);
        request.verb.hash(&mut h);
        if request.is_resource_request {
            request.api_group.hash(&mut h);
            request.namespace.hash(&mut h);
            request.resource.hash(&mut h);
            request.subresource.hash(&mut h);
            request.name.hash(&mut h);
        } else {
            request.path.hash(&mut h);
        }
        h.finish()
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // A panic under this lock leaves at worst a shard that misses; use it as it is.
        self.shards[(hash as usize) % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The decision remembered for these attributes at `generation`.
    pub(super) fn get(
        &self,
        generation: u64,
        user: &UserInfo,
        request: &RequestInfo,
    ) -> Option<Decision> {
        let hash = self.hash(user, request);
        let shard = self.shard(hash);
        if shard.generation != generation {
            return None;
        }
        shard
            .entries
            .get(&hash)?
            .iter()
            .find(|(key, _)| key.matches(user, request))
            .map(|(_, decision)| decision.clone())
    }

    /// Remembers `decision`, computed at `generation` (read before the decision was made).
    pub(super) fn put(
        &self,
        generation: u64,
        user: &UserInfo,
        request: &RequestInfo,
        decision: &Decision,
    ) {
        let hash = self.hash(user, request);
        let mut shard = self.shard(hash);
        if shard.generation > generation {
            // Computed before a change this shard has already seen.
            return;
        }
        if shard.generation < generation || shard.len >= SHARD_CAPACITY {
            shard.entries.clear();
            shard.len = 0;
            shard.generation = generation;
        }
        let bucket = shard.entries.entry(hash).or_default();
        if bucket.iter().any(|(key, _)| key.matches(user, request)) {
            return;
        }
        bucket.push((Key::new(user, request), decision.clone()));
        shard.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(verb: &str, namespace: &str, resource: &str, name: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            namespace: namespace.into(),
            resource: resource.into(),
            name: name.into(),
            ..RequestInfo::default()
        }
    }

    #[test]
    fn remembers_per_attributes_and_generation() {
        let cache = DecisionCache::default();
        let bob = UserInfo::new("bob", vec!["devs".into()]);
        let get = request("get", "a", "configmaps", "x");
        let allow = Decision::Allow("RBAC: allowed".into());
        assert_eq!(cache.get(1, &bob, &get), None);
        cache.put(1, &bob, &get, &allow);
        assert_eq!(cache.get(1, &bob, &get), Some(allow.clone()));
        // Any attribute RBAC reads makes another entry.
        assert_eq!(
            cache.get(1, &bob, &request("get", "b", "configmaps", "x")),
            None
        );
        assert_eq!(
            cache.get(1, &bob, &request("list", "a", "configmaps", "")),
            None
        );
        assert_eq!(
            cache.get(1, &bob, &request("get", "a", "configmaps", "y")),
            None
        );
        let bob_ops = UserInfo::new("bob", vec!["ops".into()]);
        assert_eq!(cache.get(1, &bob_ops, &get), None);
        let alice = UserInfo::new("alice", vec!["devs".into()]);
        assert_eq!(cache.get(1, &alice, &get), None);
        // A changed index forgets everything.
        assert_eq!(cache.get(2, &bob, &get), None);
        // A decision computed before the change is not stored over newer ones.
        cache.put(2, &bob, &get, &Decision::NoOpinion(String::new()));
        cache.put(1, &bob, &get, &allow);
        assert_eq!(
            cache.get(2, &bob, &get),
            Some(Decision::NoOpinion(String::new()))
        );
    }

    #[test]
    fn non_resource_requests_are_keyed_by_path() {
        let cache = DecisionCache::default();
        let bob = UserInfo::new("bob", vec![]);
        let path = |p: &str| RequestInfo {
            is_resource_request: false,
            verb: "get".into(),
            path: p.into(),
            ..RequestInfo::default()
        };
        cache.put(1, &bob, &path("/healthz"), &Decision::Allow(String::new()));
        assert!(cache.get(1, &bob, &path("/healthz")).is_some());
        assert!(cache.get(1, &bob, &path("/metrics")).is_none());
    }

    #[test]
    fn memory_is_bounded() {
        let cache = DecisionCache::default();
        let bob = UserInfo::new("bob", vec![]);
        for i in 0..(SHARDS * SHARD_CAPACITY * 4) {
            let r = request("get", "a", "configmaps", &format!("n{i}"));
            cache.put(1, &bob, &r, &Decision::Allow(String::new()));
        }
        for shard in &cache.shards {
            let shard = shard.lock().unwrap();
            assert!(shard.len <= SHARD_CAPACITY);
        }
    }
}

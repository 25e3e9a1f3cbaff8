//! Where store keys live in etcd: kube-apiserver's layout. kubegate's store keys name every
//! resource by group (`/core/configmaps/<ns>/<name>`, `/rbac.authorization.k8s.io/roles/...`),
//! while kube keeps most built-in resources under their plural alone
//! (`/registry/configmaps/<ns>/<name>`, `/registry/roles/...`) and Services and Endpoints under
//! `services/specs` and `services/endpoints`. The etcd engine moves those directories to
//! kube's places, so etcd tooling, backups and operators find objects where they would for
//! kube-apiserver. APIServices (`/registry/apiregistration.k8s.io/apiservices`), CRDs
//! (`/registry/apiextensions.k8s.io/customresourcedefinitions`) and custom resources
//! (`/registry/<group>/<plural>`) are already where kube keeps them.
//!
//! kubegate before this layout stored every key under its store name; [`EARLIER_DIRECTORIES`]
//! are the directories it used that kube's layout does not, which the engine moves on
//! connect (see `EtcdStore::move_earlier_keys`).

use std::borrow::Cow;

use crate::storage::StoreError;

/// (store directory, etcd directory) of each built-in resource kube keeps elsewhere than
/// `<group>/<plural>`. No directory is a prefix of another (segment-wise) on either side.
const RELOCATED: &[(&str, &str)] = &[
    ("/core/configmaps", "/configmaps"),
    ("/core/endpoints", "/services/endpoints"),
    ("/core/events", "/events"),
    ("/core/namespaces", "/namespaces"),
    ("/core/secrets", "/secrets"),
    ("/core/serviceaccounts", "/serviceaccounts"),
    ("/core/services", "/services/specs"),
    ("/coordination.k8s.io/leases", "/leases"),
    ("/discovery.k8s.io/endpointslices", "/endpointslices"),
    ("/flowcontrol.apiserver.k8s.io/flowschemas", "/flowschemas"),
    (
        "/flowcontrol.apiserver.k8s.io/prioritylevelconfigurations",
        "/prioritylevelconfigurations",
    ),
    (
        "/rbac.authorization.k8s.io/clusterrolebindings",
        "/clusterrolebindings",
    ),
    ("/rbac.authorization.k8s.io/clusterroles", "/clusterroles"),
    ("/rbac.authorization.k8s.io/rolebindings", "/rolebindings"),
    ("/rbac.authorization.k8s.io/roles", "/roles"),
];

/// The directories (under the prefix) where kubegate before kube's layout kept what
/// [`RELOCATED`] moves.
pub(super) const EARLIER_DIRECTORIES: &[&str] = &[
    "/core/",
    "/coordination.k8s.io/leases/",
    "/discovery.k8s.io/endpointslices/",
    "/flowcontrol.apiserver.k8s.io/",
    "/rbac.authorization.k8s.io/",
];

/// `rest` with directory `dir` replaced by `to`, if `rest` is `dir` or inside it.
fn replace_dir<'a>(rest: &'a str, dir: &str, to: &str) -> Option<Cow<'a, str>> {
    let tail = rest.strip_prefix(dir)?;
    (tail.is_empty() || tail.starts_with('/')).then(|| Cow::Owned(format!("{to}{tail}")))
}

/// The etcd key (after the prefix) of a store key. A store key that would land in one of
/// kube's relocated directories without being one of kubegate's resources (`/configmaps/x`)
/// could not be told apart when read back, and is refused.
pub(super) fn to_etcd(key: &str) -> Result<Cow<'_, str>, StoreError> {
    for (store, etcd) in RELOCATED {
        if let Some(moved) = replace_dir(key, store, etcd) {
            return Ok(moved);
        }
    }
    if RELOCATED
        .iter()
        .any(|(_, etcd)| replace_dir(key, etcd, "").is_some())
    {
        return Err(StoreError::Internal(format!(
            "storage key {key:?} falls in a directory etcd's kube layout uses for another resource"
        )));
    }
    Ok(Cow::Borrowed(key))
}

/// The store key of an etcd key (after the prefix); `None` for a key in one of the store
/// directories kube's layout relocates, which no store key maps to: an earlier kubegate's key
/// that a replica is moving (see [`EARLIER_DIRECTORIES`]), not to be seen twice meanwhile.
pub(super) fn from_etcd(key: &str) -> Option<Cow<'_, str>> {
    if let Some(store_key) = RELOCATED
        .iter()
        .find_map(|(store, etcd)| replace_dir(key, etcd, store))
    {
        return Some(store_key);
    }
    if RELOCATED
        .iter()
        .any(|(store, _)| replace_dir(key, store, "").is_some())
    {
        return None;
    }
    Some(Cow::Borrowed(key))
}

/// The etcd key prefix (after the etcd prefix) holding exactly the store keys that start
/// with `prefix`: `/` for everything; a store prefix that spans several of kube's
/// directories without being all of them (`/core/`, `/s`) is refused (kubegate lists whole
/// resources, namespaces in them, or everything).
pub(super) fn range_prefix(prefix: &str) -> Result<Cow<'_, str>, StoreError> {
    if prefix.is_empty() || prefix == "/" {
        return Ok(Cow::Borrowed("/"));
    }
    for (store, etcd) in RELOCATED {
        // Inside one relocated directory (`/core/configmaps/`, `/core/configmaps/ns/a`).
        if let Some(tail) = prefix.strip_prefix(store) {
            if tail.is_empty() || tail.starts_with('/') {
                return Ok(Cow::Owned(format!("{etcd}{tail}")));
            }
        }
    }
    // Anything else must not overlap a relocated directory on either side: `/core/`
    // covers several, `/s` would also match kube's `/secrets`; `/secrets-store.x.io/`
    // matches neither.
    let overlaps = RELOCATED
        .iter()
        .any(|(store, etcd)| overlaps(prefix, store) || overlaps(prefix, etcd));
    if overlaps {
        return Err(StoreError::Internal(format!(
            "listing storage prefix {prefix:?} would span several of etcd's kube-layout directories"
        )));
    }
    Ok(Cow::Borrowed(prefix))
}

/// Whether keys starting with `prefix` and keys in directory `dir` (`dir` itself or under
/// `dir/`) can coincide.
fn overlaps(prefix: &str, dir: &str) -> bool {
    dir.starts_with(prefix) || replace_dir(prefix, dir, "").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_resources_live_where_kube_keeps_them() {
        for (store, etcd) in [
            ("/core/configmaps/default/a", "/configmaps/default/a"),
            (
                "/core/services/default/kubernetes",
                "/services/specs/default/kubernetes",
            ),
            (
                "/core/endpoints/default/kubernetes",
                "/services/endpoints/default/kubernetes",
            ),
            ("/core/namespaces/default", "/namespaces/default"),
            ("/core/events/ns/e.1", "/events/ns/e.1"),
            (
                "/rbac.authorization.k8s.io/clusterroles/admin",
                "/clusterroles/admin",
            ),
            (
                "/flowcontrol.apiserver.k8s.io/flowschemas/exempt",
                "/flowschemas/exempt",
            ),
            (
                "/coordination.k8s.io/leases/kube-system/l",
                "/leases/kube-system/l",
            ),
            (
                "/discovery.k8s.io/endpointslices/ns/s",
                "/endpointslices/ns/s",
            ),
            // Already in kube's place.
            (
                "/apiregistration.k8s.io/apiservices/v1.",
                "/apiregistration.k8s.io/apiservices/v1.",
            ),
            (
                "/apiextensions.k8s.io/customresourcedefinitions/c.stable.example.com",
                "/apiextensions.k8s.io/customresourcedefinitions/c.stable.example.com",
            ),
            (
                "/stable.example.com/crontabs/ns/c",
                "/stable.example.com/crontabs/ns/c",
            ),
            ("/pods/ns/a", "/pods/ns/a"),
        ] {
            assert_eq!(to_etcd(store).unwrap(), etcd, "{store}");
            assert_eq!(from_etcd(etcd).unwrap(), store, "{etcd}");
        }
        // A directory name that only starts like a relocated one is not moved.
        assert_eq!(
            to_etcd("/core/configmapsx/a").unwrap(),
            "/core/configmapsx/a"
        );
        assert_eq!(from_etcd("/configmapsx/a").unwrap(), "/configmapsx/a");
        // An earlier kubegate's key (being moved) is no store key.
        assert_eq!(from_etcd("/core/configmaps/ns/a"), None);
        assert_eq!(from_etcd("/rbac.authorization.k8s.io/roles/ns/r"), None);
    }

    #[test]
    fn keys_that_could_not_be_read_back_are_refused() {
        for key in ["/configmaps/ns/a", "/services/specs/ns/a", "/roles"] {
            assert!(
                matches!(to_etcd(key), Err(StoreError::Internal(_))),
                "{key}"
            );
        }
    }

    #[test]
    fn prefixes_map_to_one_etcd_range_or_are_refused() {
        assert_eq!(range_prefix("").unwrap(), "/");
        assert_eq!(range_prefix("/").unwrap(), "/");
        assert_eq!(range_prefix("/core/configmaps/").unwrap(), "/configmaps/");
        assert_eq!(
            range_prefix("/core/services/ns/").unwrap(),
            "/services/specs/ns/"
        );
        assert_eq!(
            range_prefix("/stable.example.com/crontabs/").unwrap(),
            "/stable.example.com/crontabs/"
        );
        assert_eq!(range_prefix("/pods/ns/").unwrap(), "/pods/ns/");
        // A group whose name only starts like a relocated directory.
        assert_eq!(
            range_prefix("/secrets-store.csi.x-k8s.io/secretproviderclasses/").unwrap(),
            "/secrets-store.csi.x-k8s.io/secretproviderclasses/"
        );
        assert_eq!(
            range_prefix("/events.example.com/").unwrap(),
            "/events.example.com/"
        );
        for prefix in [
            "/core/",
            "/core",
            "/s",
            "/rbac.authorization.k8s.io/",
            "/configmaps/",
        ] {
            assert!(range_prefix(prefix).is_err(), "{prefix}");
        }
    }
}

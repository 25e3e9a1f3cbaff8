//! `kubegate migrate`: copies every stored object from one store to another (the embedded
//! store of a data dir into an etcd prefix), preserving keys, names, uids and content; the
//! objects get the target's revisions as their new resourceVersions. A target that already
//! holds keys is refused unless `force` is given, and then existing keys are overwritten.

use bytes::Bytes;
use kubegate_backends::storage::{Store, StoreError};
use serde_json::Value;

/// Keys read from the source per page.
const PAGE: usize = 500;

/// What a migration did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub copied: usize,
    pub overwritten: usize,
}

/// The stored bytes without `metadata.resourceVersion`: the revision is the store's, and a
/// stale one in the body would mislead whoever reads it raw.
fn without_resource_version(value: &Bytes) -> Bytes {
    match serde_json::from_slice::<Value>(value) {
        Ok(mut object) => {
            let had = object
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .and_then(|m| m.remove("resourceVersion"))
                .is_some();
            if !had {
                return value.clone();
            }
            serde_json::to_vec(&object)
                .map(Bytes::from)
                .unwrap_or_else(|_| value.clone())
        }
        Err(_) => value.clone(),
    }
}

/// `kubegate migrate`: opens the data dir's embedded store (it must not be in use) and the
/// target etcd, and copies.
pub fn run(flags: &crate::cli::MigrateFlags) -> Result<Report, String> {
    let etcd = flags.etcd()?;
    let path = flags.from.join("kubegate.redb");
    if !path.exists() {
        return Err(format!("{}: no embedded store here", path.display()));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))?;
    runtime.block_on(async {
        let from =
            kubegate_backends::storage::embedded::EmbeddedStore::open(&path, Default::default())
                .map_err(|e| format!("{}: {e}", path.display()))?;
        let options = kubegate_backends::storage::etcd::EtcdOptions::from(&etcd);
        let to = kubegate_backends::storage::etcd::connect(&options)
            .await
            .map_err(|e| format!("etcd: {e}"))?;
        let result = migrate(from.as_ref(), to.as_ref(), flags.force).await;
        from.close().await;
        to.close().await;
        result
    })
}

/// Copies everything under `/` from `from` to `to`, reading `from` at one revision.
pub async fn migrate(from: &dyn Store, to: &dyn Store, force: bool) -> Result<Report, String> {
    let existing = to
        .list("/", None, 1, None)
        .await
        .map_err(|e| format!("reading the target: {e}"))?;
    if !existing.items.is_empty() && !force {
        return Err(format!(
            "the target already holds data (e.g. {} under its prefix); refusing to write into it without --force",
            existing.items[0].key
        ));
    }
    let mut report = Report::default();
    let mut after: Option<String> = None;
    let mut revision = None;
    loop {
        let page = from
            .list("/", after.as_deref(), PAGE, revision)
            .await
            .map_err(|e| format!("reading the source: {e}"))?;
        revision.get_or_insert(page.revision);
        for item in &page.items {
            let value = without_resource_version(&item.value);
            match to.create(&item.key, value.clone()).await {
                Ok(_) => report.copied += 1,
                Err(StoreError::AlreadyExists(_)) if force => {
                    let current = to
                        .get(&item.key)
                        .await
                        .map_err(|e| format!("{}: {e}", item.key))?;
                    let Some(current) = current else {
                        return Err(format!("{}: vanished while being overwritten", item.key));
                    };
                    to.update(&item.key, value, current.mod_revision)
                        .await
                        .map_err(|e| format!("{}: {e}", item.key))?;
                    report.overwritten += 1;
                }
                Err(e) => return Err(format!("{}: {e}", item.key)),
            }
        }
        match (page.more, page.items.last()) {
            (true, Some(last)) => after = Some(last.key.clone()),
            _ => break,
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubegate_backends::storage::embedded::{EmbeddedOptions, EmbeddedStore};

    #[tokio::test]
    async fn copies_everything_and_refuses_a_used_target() {
        let dir = tempfile::tempdir().expect("dir");
        let from = EmbeddedStore::open(&dir.path().join("a.redb"), EmbeddedOptions::default())
            .expect("source");
        let to = EmbeddedStore::open(&dir.path().join("b.redb"), EmbeddedOptions::default())
            .expect("target");
        for i in 0..1203 {
            let body = format!(
                r#"{{"metadata":{{"name":"cm-{i}","uid":"u-{i}","resourceVersion":"9"}},"data":{{"n":"{i}"}}}}"#
            );
            from.create(&format!("/core/configmaps/ns/cm-{i:04}"), Bytes::from(body))
                .await
                .expect("create");
        }
        let report = migrate(from.as_ref(), to.as_ref(), false)
            .await
            .expect("migrate");
        assert_eq!(report.copied, 1203);
        let copied = to
            .get("/core/configmaps/ns/cm-0042")
            .await
            .expect("get")
            .expect("present");
        let object: Value = serde_json::from_slice(&copied.value).expect("json");
        assert_eq!(object["metadata"]["uid"], "u-42");
        assert_eq!(object["data"]["n"], "42");
        assert!(object["metadata"].get("resourceVersion").is_none());

        let refused = migrate(from.as_ref(), to.as_ref(), false)
            .await
            .expect_err("target in use");
        assert!(refused.contains("--force"), "{refused}");
        let forced = migrate(from.as_ref(), to.as_ref(), true)
            .await
            .expect("forced");
        assert_eq!(forced.overwritten, 1203);
        from.close().await;
        to.close().await;
    }
}

//! Periodic compaction of etcd's history, as kube-apiserver's `storage/etcd3/compact.go`
//! does: every interval, a transaction on `compact_rev_key` elects one compactor among all
//! the replicas (and kube-apiservers) sharing the cluster, and the winner compacts to the
//! revision it saw one interval earlier, so at least one interval of history is always kept
//! for watches to resume from.

use std::time::Duration;

use std::sync::Arc;

use etcd_client::{Compare, CompareOp, KvClient, Txn, TxnOp, TxnOpResponse};
use tokio::sync::watch as signal;

use super::{is_compacted, Members};

/// The key kube-apiserver's compactors coordinate on (outside any prefix on purpose: the
/// history is the whole cluster's).
pub(super) const COMPACT_REV_KEY: &str = "compact_rev_key";

/// Runs until `shutdown` turns true or its sender is dropped.
pub(super) async fn run(
    members: Arc<Members>,
    interval: Duration,
    mut shutdown: signal::Receiver<bool>,
) {
    // `version` is the compact_rev_key version this compactor last saw, `revision` the
    // store revision at that time.
    let mut version = 0;
    let mut revision = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        match tokio::time::timeout(
            interval.max(Duration::from_secs(10)),
            step(&mut members.pick().0.kv(), version, revision),
        )
        .await
        {
            Ok(Ok((v, r))) => {
                version = v;
                revision = r;
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "etcd compaction failed; retrying next interval")
            }
            Err(_) => tracing::warn!("etcd compaction timed out; retrying next interval"),
        }
    }
}

/// One round: if nobody else compacted since we last looked (the key's version is still
/// `version`), claim this round and compact to `revision`. Returns the key's new version
/// and the current revision, the target of the next round.
async fn step(
    kv: &mut KvClient,
    version: i64,
    revision: i64,
) -> Result<(i64, i64), etcd_client::Error> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, version)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, revision.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let resp = kv.txn(txn).await?;
    let current = resp.header().map(|h| h.revision()).unwrap_or_default();
    if !resp.succeeded() {
        // Another compactor went first: follow its version and try again next interval.
        let seen = resp
            .op_responses()
            .into_iter()
            .find_map(|r| match r {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.version()),
                _ => None,
            })
            .unwrap_or_default();
        return Ok((seen, current));
    }
    if revision > 0 {
        match kv.compact(revision, None).await {
            Ok(_) => tracing::debug!(revision, "etcd history compacted"),
            // Someone compacted further already.
            Err(e) if is_compacted(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok((version + 1, current))
}

//! The storage conformance suite: the [`Store`] contract written once as tests and run
//! against every engine, so the embedded store and etcd give callers (the watch cache, the
//! registry) the same semantics. An engine's test module invokes [`suite!`] with its
//! [`Engine`] description and an async function that opens a fresh, empty store.
//!
//! Revisions are asserted relative to the store's revision when the test starts (a fresh
//! etcd is at revision 1, a fresh embedded store at 0), and exactly: one per write.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{EventKind, Store, StoreError, StoreEvent, WatchReceiver};

/// What differs between engines, on purpose.
pub(crate) struct Engine {
    /// Reads at an older revision still in history return that revision's data (etcd's
    /// MVCC); without it, any revision but the current one is `Compacted` (the watch cache
    /// serves older revisions instead).
    pub mvcc_reads: bool,
}

/// Expands to one `#[tokio::test]` per conformance check, each on a fresh store from
/// `$open: async fn() -> (guard, Arc<dyn Store>)` (the guard keeps the store's backing
/// alive, e.g. a temp dir or an etcd process, and is dropped after the store).
macro_rules! suite {
    ($engine:expr, $open:expr) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            $crate::storage::conformance::suite!(@tests $engine, $open;
                create_get_and_already_exists,
                update_compare_and_swap,
                delete_with_and_without_precondition,
                revisions_increase_by_one_per_write,
                list_pagination,
                list_pages_read_one_snapshot,
                list_of_many_keys_is_complete,
                watch_replays_then_streams_in_order,
                watch_from_current_revision_sees_only_new_events,
                watch_handoff_under_concurrent_writes_has_no_gaps,
                concurrent_writers_get_distinct_revisions,
                current_revision_includes_every_acknowledged_write,
                close_refuses_writes_and_watches,
            );
        }
    };
    (@tests $engine:expr, $open:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_guard, store) = ($open)().await;
                $crate::storage::conformance::$name(store, &$engine).await;
            }
        )*
    };
}
pub(crate) use suite;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn recv(rx: &mut WatchReceiver) -> StoreEvent {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("watch event timed out")
        .expect("watch closed")
        .expect("watch error")
}

fn keys(items: &[super::KeyValue]) -> Vec<&str> {
    items.iter().map(|kv| kv.key.as_str()).collect()
}

async fn base(s: &dyn Store) -> u64 {
    s.current_revision().await.expect("current revision")
}

pub(crate) async fn create_get_and_already_exists(s: Arc<dyn Store>, _: &Engine) {
    let base = base(&*s).await;
    let r = s.create("/a/x", b("1")).await.expect("create");
    assert_eq!(r, base + 1);
    let kv = s.get("/a/x").await.expect("get").expect("found");
    assert_eq!(kv.key, "/a/x");
    assert_eq!(kv.value, b("1"));
    assert_eq!((kv.create_revision, kv.mod_revision), (r, r));
    assert_eq!(
        s.create("/a/x", b("2")).await,
        Err(StoreError::AlreadyExists("/a/x".into()))
    );
    // A failed write does not consume a revision, nor change the value.
    assert_eq!(s.current_revision().await.expect("rev"), r);
    assert_eq!(
        s.get("/a/x").await.expect("get").expect("found").value,
        b("1")
    );
    assert_eq!(s.get("/a/missing").await.expect("get"), None);
    // A key that only shares a string prefix is another key.
    assert_eq!(s.get("/a/xy").await.expect("get"), None);
}

pub(crate) async fn update_compare_and_swap(s: Arc<dyn Store>, _: &Engine) {
    let r1 = s.create("/k", b("v1")).await.expect("create");
    let r2 = s.update("/k", b("v2"), r1).await.expect("update");
    assert_eq!(r2, r1 + 1);
    // A stale update (the caller read r1) conflicts and names both revisions.
    assert_eq!(
        s.update("/k", b("v3"), r1).await,
        Err(StoreError::Conflict {
            key: "/k".into(),
            expected: r1,
            actual: r2
        })
    );
    let kv = s.get("/k").await.expect("get").expect("found");
    assert_eq!(kv.value, b("v2"));
    assert_eq!((kv.create_revision, kv.mod_revision), (r1, r2));
    // Missing keys are NotFound whatever the expected revision (0 included: an update
    // never creates).
    for expected in [1, 0, r2] {
        assert_eq!(
            s.update("/nope", b("x"), expected).await,
            Err(StoreError::NotFound("/nope".into()))
        );
    }
    assert_eq!(s.get("/nope").await.expect("get"), None);
    assert_eq!(s.current_revision().await.expect("rev"), r2);
}

pub(crate) async fn delete_with_and_without_precondition(s: Arc<dyn Store>, _: &Engine) {
    let r1 = s.create("/a", b("a")).await.expect("create");
    let r2 = s.create("/b", b("b")).await.expect("create");
    assert_eq!(
        s.delete("/a", Some(r1 + 100)).await,
        Err(StoreError::Conflict {
            key: "/a".into(),
            expected: r1 + 100,
            actual: r1
        })
    );
    let (rd, kv) = s.delete("/a", Some(r1)).await.expect("delete");
    assert_eq!(rd, r2 + 1);
    assert_eq!(kv.key, "/a");
    assert_eq!(kv.value, b("a"));
    assert_eq!((kv.create_revision, kv.mod_revision), (r1, r1));
    let (rd2, kv) = s.delete("/b", None).await.expect("delete");
    assert_eq!(rd2, rd + 1);
    assert_eq!(kv.value, b("b"));
    assert_eq!(
        s.delete("/b", None).await,
        Err(StoreError::NotFound("/b".into()))
    );
    assert_eq!(
        s.delete("/b", Some(r2)).await,
        Err(StoreError::NotFound("/b".into()))
    );
    assert_eq!(s.get("/a").await.expect("get"), None);
    // A re-created key starts a new life: new create revision.
    let r = s.create("/a", b("again")).await.expect("create");
    let kv = s.get("/a").await.expect("get").expect("found");
    assert_eq!((kv.create_revision, kv.mod_revision), (r, r));
    assert_eq!(r, rd2 + 1);
}

pub(crate) async fn revisions_increase_by_one_per_write(s: Arc<dyn Store>, _: &Engine) {
    let mut last = base(&*s).await;
    for i in 0..10 {
        let key = format!("/k/{i}");
        let r = s.create(&key, b("x")).await.expect("create");
        assert_eq!(r, last + 1);
        let r = s.update(&key, b("y"), r).await.expect("update");
        assert_eq!(r, last + 2);
        last = r;
    }
    let (r, _) = s.delete("/k/0", None).await.expect("delete");
    assert_eq!(r, last + 1);
    assert_eq!(s.current_revision().await.expect("rev"), r);
}

pub(crate) async fn list_pagination(s: Arc<dyn Store>, e: &Engine) {
    let base = base(&*s).await;
    for name in ["a", "b", "c", "d", "e"] {
        s.create(&format!("/pods/ns/{name}"), b(name))
            .await
            .expect("create");
    }
    s.create("/pods/other/z", b("z")).await.expect("create");
    s.create("/pods/nt", b("not under /pods/ns/"))
        .await
        .expect("create");
    let now = base + 7;

    let page = s.list("/pods/ns/", None, 2, None).await.expect("list");
    assert_eq!(page.revision, now);
    assert_eq!(keys(&page.items), ["/pods/ns/a", "/pods/ns/b"]);
    assert!(page.more);
    assert_eq!(page.items[0].value, b("a"));
    assert_eq!(page.items[0].create_revision, base + 1);

    let page = s
        .list("/pods/ns/", Some("/pods/ns/b"), 2, None)
        .await
        .expect("list");
    assert_eq!(keys(&page.items), ["/pods/ns/c", "/pods/ns/d"]);
    assert!(page.more);

    let page = s
        .list("/pods/ns/", Some("/pods/ns/d"), 2, None)
        .await
        .expect("list");
    assert_eq!(keys(&page.items), ["/pods/ns/e"]);
    assert!(!page.more);

    // A page that ends exactly at the last key has nothing more.
    let page = s
        .list("/pods/ns/", Some("/pods/ns/c"), 2, None)
        .await
        .expect("list");
    assert_eq!(keys(&page.items), ["/pods/ns/d", "/pods/ns/e"]);
    assert!(!page.more);

    // `start_after` before the prefix starts at the prefix; after it, nothing is left.
    let page = s
        .list("/pods/ns/", Some("/a"), 0, None)
        .await
        .expect("list");
    assert_eq!(page.items.len(), 5);
    let page = s
        .list("/pods/ns/", Some("/z"), 0, None)
        .await
        .expect("list");
    assert!(page.items.is_empty() && !page.more);
    assert_eq!(page.revision, now);

    let all = s.list("/pods/", None, 0, None).await.expect("list");
    assert_eq!(all.items.len(), 7);
    assert!(!all.more);
    let everything = s.list("", None, 0, None).await.expect("list");
    assert_eq!(everything.items.len(), 7);
    assert_eq!(everything.revision, now);
    let none = s.list("/nothing/", None, 0, None).await.expect("list");
    assert!(none.items.is_empty() && !none.more);
    assert_eq!(none.revision, now);

    let at_now = s.list("/pods/", None, 0, Some(now)).await.expect("list");
    assert_eq!(at_now.items, all.items);
    assert_eq!(at_now.revision, now);
    let older = s.list("/pods/ns/", None, 0, Some(base + 3)).await;
    if e.mvcc_reads {
        let older = older.expect("list at an older revision");
        assert_eq!(older.revision, base + 3);
        assert_eq!(
            keys(&older.items),
            ["/pods/ns/a", "/pods/ns/b", "/pods/ns/c"]
        );
    } else {
        assert!(
            matches!(older, Err(StoreError::Compacted { requested, .. }) if requested == base + 3)
        );
    }
    assert_eq!(
        s.list("/pods/", None, 0, Some(now + 1)).await,
        Err(StoreError::FutureRevision {
            requested: now + 1,
            current: now
        })
    );
}

pub(crate) async fn list_pages_read_one_snapshot(s: Arc<dyn Store>, e: &Engine) {
    for i in 0..6 {
        s.create(&format!("/snap/{i}"), b("old"))
            .await
            .expect("create");
    }
    let first = s.list("/snap/", None, 3, None).await.expect("list");
    assert_eq!(keys(&first.items), ["/snap/0", "/snap/1", "/snap/2"]);
    assert!(first.more);
    // The world moves on between pages.
    let kv = s.get("/snap/4").await.expect("get").expect("found");
    s.update("/snap/4", b("new"), kv.mod_revision)
        .await
        .expect("update");
    s.delete("/snap/5", None).await.expect("delete");
    s.create("/snap/6", b("new")).await.expect("create");

    let next = s
        .list("/snap/", Some("/snap/2"), 3, Some(first.revision))
        .await;
    if e.mvcc_reads {
        // The next page continues the same snapshot.
        let next = next.expect("next page");
        assert_eq!(next.revision, first.revision);
        assert_eq!(keys(&next.items), ["/snap/3", "/snap/4", "/snap/5"]);
        assert!(next.items.iter().all(|kv| kv.value == b("old")));
        assert!(!next.more);
    } else {
        assert!(matches!(
            next,
            Err(StoreError::Compacted { requested, .. }) if requested == first.revision
        ));
    }
    // Read now, the list shows the new state.
    let now = s
        .list("/snap/", Some("/snap/2"), 0, None)
        .await
        .expect("list");
    assert_eq!(keys(&now.items), ["/snap/3", "/snap/4", "/snap/6"]);
    assert_eq!(now.items[1].value, b("new"));
}

pub(crate) async fn list_of_many_keys_is_complete(s: Arc<dyn Store>, _: &Engine) {
    const N: usize = 1500;
    let writers: Vec<_> = (0..10)
        .map(|w| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                for i in (w..N).step_by(10) {
                    s.create(&format!("/many/{i:05}"), Bytes::from(vec![b'x'; 512]))
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    let all = s.list("/many/", None, 0, None).await.expect("list");
    assert_eq!(all.items.len(), N);
    assert!(!all.more);
    assert!(all.items.windows(2).all(|w| w[0].key < w[1].key));
    assert_eq!(all.items[N - 1].key, format!("/many/{:05}", N - 1));
    let most = s.list("/many/", None, N - 1, None).await.expect("list");
    assert_eq!(most.items.len(), N - 1);
    assert!(most.more);
    let rest = s
        .list("/many/", Some(&most.items[N - 2].key), N, None)
        .await
        .expect("list");
    assert_eq!(keys(&rest.items), [all.items[N - 1].key.as_str()]);
    assert!(!rest.more);
}

pub(crate) async fn watch_replays_then_streams_in_order(s: Arc<dyn Store>, _: &Engine) {
    let r1 = s.create("/w/a", b("1")).await.expect("create");
    let r2 = s.update("/w/a", b("2"), r1).await.expect("update");
    s.create("/other/x", b("x")).await.expect("create");
    s.create("/wx", b("shares the string prefix only"))
        .await
        .expect("create");
    let (r5, _) = s.delete("/w/a", None).await.expect("delete");

    // Resume from r1: history first (only under the prefix), then live.
    let mut rx = s.watch("/w/", r1).await.expect("watch");
    let e = recv(&mut rx).await;
    assert_eq!(
        (e.kind, e.revision, e.key.as_str()),
        (EventKind::Modified, r2, "/w/a")
    );
    assert_eq!(e.value, b("2"));
    assert_eq!(e.prev_value, Some(b("1")));
    let e = recv(&mut rx).await;
    assert_eq!((e.kind, e.revision), (EventKind::Deleted, r5));
    // Deletes carry the last value.
    assert_eq!(e.prev_value, Some(b("2")));
    assert!(e.value.is_empty());

    let r6 = s.create("/w/b", b("b")).await.expect("create");
    s.create("/other/y", b("y")).await.expect("create");
    let r8 = s.create("/w/c", b("c")).await.expect("create");
    let e = recv(&mut rx).await;
    assert_eq!(
        (e.kind, e.revision, e.key.as_str()),
        (EventKind::Created, r6, "/w/b")
    );
    assert_eq!(e.value, b("b"));
    assert_eq!(e.prev_value, None);
    let e = recv(&mut rx).await;
    assert_eq!((e.revision, e.key.as_str()), (r8, "/w/c"));
    // Nothing else arrived (the other prefix's writes were filtered).
    assert!(rx.try_recv().is_err());

    // A key re-created after a delete is Created again.
    let (r9, _) = s.delete("/w/b", Some(r6)).await.expect("delete");
    let r10 = s.create("/w/b", b("b2")).await.expect("create");
    let e = recv(&mut rx).await;
    assert_eq!(
        (e.kind, e.revision, e.prev_value),
        (EventKind::Deleted, r9, Some(b("b")))
    );
    let e = recv(&mut rx).await;
    assert_eq!(
        (e.kind, e.revision, e.prev_value),
        (EventKind::Created, r10, None)
    );
}

pub(crate) async fn watch_from_current_revision_sees_only_new_events(
    s: Arc<dyn Store>,
    _: &Engine,
) {
    s.create("/z/old", b("old")).await.expect("create");
    let now = s.current_revision().await.expect("rev");
    let mut rx = s.watch("", now).await.expect("watch");
    let mut other = s.watch("/elsewhere/", now).await.expect("watch");
    let r = s.create("/z/new", b("z")).await.expect("create");
    let e = recv(&mut rx).await;
    assert_eq!((e.revision, e.key.as_str()), (r, "/z/new"));
    // A watch from a revision not reached yet starts there.
    let mut future = s.watch("/z/", r + 1).await.expect("watch");
    let r2 = s.create("/z/next", b("z")).await.expect("create");
    let r3 = s.create("/z/after", b("z")).await.expect("create");
    assert_eq!(r3, r2 + 1);
    assert_eq!(recv(&mut future).await.revision, r3);
    assert_eq!(recv(&mut rx).await.revision, r2);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(other.try_recv().is_err(), "no events under /elsewhere/");
}

pub(crate) async fn watch_handoff_under_concurrent_writes_has_no_gaps(
    s: Arc<dyn Store>,
    _: &Engine,
) {
    let base = base(&*s).await;
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                for i in 0..100 {
                    s.create(&format!("/c/{w}/{i}"), b("x"))
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    // Start watches at various points while writes are in flight.
    let mut watches = Vec::new();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = s.current_revision().await.expect("rev");
        let after = base + (now - base) / 2;
        watches.push((after, s.watch("/c/", after).await.expect("watch")));
    }
    for w in writers {
        w.await.expect("writer");
    }
    for (after, mut rx) in watches {
        let mut expected = after + 1;
        while expected <= base + 800 {
            let e = recv(&mut rx).await;
            assert_eq!(e.revision, expected);
            assert_eq!(e.kind, EventKind::Created);
            expected += 1;
        }
    }
}

pub(crate) async fn concurrent_writers_get_distinct_revisions(s: Arc<dyn Store>, _: &Engine) {
    let base = base(&*s).await;
    let tasks: Vec<_> = (0..32)
        .map(|w| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let mut revs = Vec::new();
                for i in 0..20 {
                    revs.push(
                        s.create(&format!("/c/{w}/{i}"), b("x"))
                            .await
                            .expect("create"),
                    );
                }
                // Same key from everyone: exactly one create wins.
                let r = s.create("/shared", b("x")).await;
                (revs, r.is_ok())
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut winners = 0;
    for t in tasks {
        let (revs, won) = t.await.expect("task");
        assert!(revs.windows(2).all(|w| w[0] < w[1]));
        all.extend(revs);
        winners += usize::from(won);
    }
    assert_eq!(winners, 1);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 32 * 20);
    assert_eq!(s.current_revision().await.expect("rev"), base + 32 * 20 + 1);

    // Racing compare-and-swaps on one key: exactly one wins, the others see its revision.
    let r0 = s
        .get("/shared")
        .await
        .expect("get")
        .expect("found")
        .mod_revision;
    let now = s.current_revision().await.expect("rev");
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let s = Arc::clone(&s);
            tokio::spawn(async move { s.update("/shared", b("y"), r0).await })
        })
        .collect();
    let mut won = 0;
    for r in racers {
        match r.await.expect("racer") {
            Ok(_) => won += 1,
            Err(StoreError::Conflict {
                expected, actual, ..
            }) => {
                assert_eq!((expected, actual), (r0, now + 1))
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(won, 1);
}

/// `current_revision` is what consistent reads wait for, so it must be linearizable: a call
/// made after a write was acknowledged answers at least that write's revision, even while
/// other callers keep the engine busy answering the same question (engines may share work
/// between concurrent callers, never answers from before a caller asked).
pub(crate) async fn current_revision_includes_every_acknowledged_write(
    s: Arc<dyn Store>,
    _: &Engine,
) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    s.current_revision().await.expect("rev");
                    // An engine may answer without ever suspending: let the writers run.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                for i in 0..20 {
                    let written = s
                        .create(&format!("/lin/{w}/{i}"), b("x"))
                        .await
                        .expect("create");
                    let seen = s.current_revision().await.expect("rev");
                    assert!(
                        seen >= written,
                        "current revision {seen} < acknowledged write {written}"
                    );
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.await.expect("reader");
    }
}

pub(crate) async fn close_refuses_writes_and_watches(s: Arc<dyn Store>, _: &Engine) {
    let r = s.create("/k", b("x")).await.expect("create");
    let mut rx = s.watch("/", r).await.expect("watch");
    s.close().await;
    assert!(matches!(
        s.create("/k2", b("x")).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        s.update("/k", b("y"), r).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        s.delete("/k", None).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        s.watch("/", r).await,
        Err(StoreError::Unavailable(_))
    ));
    // An open watch ends (closes, or reports why) instead of hanging.
    let end = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("watch did not end after close");
    assert!(!matches!(end, Some(Ok(_))), "{end:?}");
    // What was written before close is kept.
    assert_eq!(
        s.get("/k").await.expect("get").expect("found").mod_revision,
        r
    );
    // Closing twice is fine.
    s.close().await;
}

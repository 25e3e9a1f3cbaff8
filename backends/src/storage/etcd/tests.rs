//! Tests of the etcd engine against a real `etcd` (Debian's `etcd-server`): a [`TestEtcd`]
//! started per test on free loopback ports with a temp data dir and killed by pid when
//! dropped, the shared conformance suite, and what only etcd has (MVCC reads, compaction,
//! failover, TLS, prefixes).

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{connect, EtcdOptions, EtcdStore};
use crate::storage::cacher::Cacher;
use crate::storage::{EventKind, Store, StoreError, WatchReceiver};

/// One `etcd` process on loopback ports with its own data dir.
pub(crate) struct TestEtcd {
    child: Child,
    /// The client URL.
    pub endpoint: String,
    dir: tempfile::TempDir,
}

/// TLS files for a [`TestEtcd`] that requires client certificates.
pub(crate) struct TestPki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn etcd_binary() -> PathBuf {
    let bin = std::env::var_os("ETCD_BIN").map_or_else(|| PathBuf::from("etcd"), PathBuf::from);
    match Command::new(&bin).arg("--version").output() {
        Ok(out) if out.status.success() => bin,
        _ => panic!(
            "the etcd storage tests need the `etcd` binary ({}), which is not runnable here: \
             install Debian's etcd-server (`apt-get install -y etcd-server`; .ci/run does) or \
             set ETCD_BIN",
            bin.display()
        ),
    }
}

impl TestEtcd {
    /// Starts a plain-HTTP etcd and waits until it answers.
    pub(crate) async fn start() -> TestEtcd {
        Self::launch(None).await
    }

    /// Starts an etcd that serves TLS and requires client certificates signed by the CA.
    pub(crate) async fn start_tls(pki: &TestPki) -> TestEtcd {
        Self::launch(Some(pki)).await
    }

    async fn launch(pki: Option<&TestPki>) -> TestEtcd {
        let bin = etcd_binary();
        let mut last_log = String::new();
        // A port picked free can be taken before etcd binds it: try a few times.
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let (client, peer) = (free_port(), free_port());
            let scheme = if pki.is_some() { "https" } else { "http" };
            let endpoint = format!("{scheme}://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let log = std::fs::File::create(dir.path().join("etcd.log")).unwrap();
            let mut cmd = Command::new(&bin);
            cmd.arg("--name=default")
                .arg(format!("--data-dir={}", dir.path().join("data").display()))
                .arg(format!("--listen-client-urls={endpoint}"))
                .arg(format!("--advertise-client-urls={endpoint}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=default={peer_url}"))
                .arg("--logger=zap")
                .arg("--log-outputs=stderr")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            if let Some(pki) = pki {
                cmd.arg(format!("--cert-file={}", pki.server_cert.display()))
                    .arg(format!("--key-file={}", pki.server_key.display()))
                    .arg(format!("--trusted-ca-file={}", pki.ca.display()))
                    .arg("--client-cert-auth");
            }
            let child = cmd.spawn().unwrap();
            let mut etcd = TestEtcd {
                child,
                endpoint,
                dir,
            };
            if etcd.wait_ready(pki).await {
                return etcd;
            }
            last_log = etcd.log();
            etcd.stop();
        }
        panic!("etcd did not start; its log:\n{last_log}");
    }

    /// Waits until a client can read from it (false if the process exits or 20 s pass).
    async fn wait_ready(&mut self, pki: Option<&TestPki>) -> bool {
        let mut options = self.options();
        options.request_timeout = Duration::from_millis(500);
        if let Some(pki) = pki {
            options.ca_file = Some(pki.ca.clone());
            options.cert_file = Some(pki.client_cert.clone());
            options.key_file = Some(pki.client_key.clone());
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(store) = connect(&options).await {
                store.close().await;
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Options for this etcd, with the compactor off (tests compact explicitly).
    pub(crate) fn options(&self) -> EtcdOptions {
        EtcdOptions {
            compaction_interval: Duration::ZERO,
            request_timeout: Duration::from_secs(5),
            ..EtcdOptions::new([self.endpoint.clone()])
        }
    }

    pub(crate) async fn store(&self) -> Arc<EtcdStore> {
        connect(&self.options()).await.unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    /// Kills the process (by its pid) and reaps it.
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        self.stop();
    }
}

crate::storage::conformance::suite!(
    crate::storage::conformance::Engine { mvcc_reads: true },
    || async {
        let etcd = TestEtcd::start().await;
        let store = etcd.store().await;
        (etcd, store as Arc<dyn Store>)
    }
);

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn recv(rx: &mut WatchReceiver) -> crate::storage::StoreEvent {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("watch event timed out")
        .expect("watch closed")
        .expect("watch error")
}

/// A raw client, to look at etcd without the store's key mapping.
async fn raw(etcd: &TestEtcd) -> etcd_client::Client {
    etcd_client::Client::connect([etcd.endpoint.as_str()], None)
        .await
        .unwrap()
}

#[tokio::test]
async fn keys_live_under_the_prefix_in_kube_layout() {
    let etcd = TestEtcd::start().await;
    let s = etcd.store().await;
    assert_eq!(s.prefix(), "/registry");
    let r = s
        .create("/core/configmaps/default/x", b("{\"kind\":\"ConfigMap\"}"))
        .await
        .unwrap();
    let mut kv = raw(&etcd).await.kv_client();
    let got = kv
        .get("/registry/configmaps/default/x", None)
        .await
        .unwrap();
    let found = &got.kvs()[0];
    assert_eq!(found.value(), b"{\"kind\":\"ConfigMap\"}");
    assert_eq!(found.mod_revision(), i64::try_from(r).unwrap());
    // Where kube-apiserver keeps the other built-in resources and custom resources.
    for (store_key, etcd_key) in [
        (
            "/core/services/default/kubernetes",
            "/registry/services/specs/default/kubernetes",
        ),
        (
            "/core/endpoints/default/kubernetes",
            "/registry/services/endpoints/default/kubernetes",
        ),
        (
            "/rbac.authorization.k8s.io/clusterroles/admin",
            "/registry/clusterroles/admin",
        ),
        (
            "/flowcontrol.apiserver.k8s.io/flowschemas/exempt",
            "/registry/flowschemas/exempt",
        ),
        (
            "/apiregistration.k8s.io/apiservices/v1.",
            "/registry/apiregistration.k8s.io/apiservices/v1.",
        ),
        (
            "/stable.example.com/crontabs/ns/c",
            "/registry/stable.example.com/crontabs/ns/c",
        ),
    ] {
        s.create(store_key, b("{}")).await.unwrap();
        assert_eq!(
            kv.get(etcd_key, None).await.unwrap().kvs().len(),
            1,
            "{etcd_key}"
        );
        assert!(s.get(store_key).await.unwrap().is_some(), "{store_key}");
    }
    // Something written by another program under the prefix is visible, with its key.
    kv.put("/registry/configmaps/default/y", "v", None)
        .await
        .unwrap();
    let list = s.list("/core/configmaps/", None, 0, None).await.unwrap();
    let keys: Vec<_> = list.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(
        keys,
        ["/core/configmaps/default/x", "/core/configmaps/default/y"]
    );
    let mut watch = s.watch("/core/configmaps/", list.revision).await.unwrap();
    kv.put("/registry/configmaps/default/z", "v", None)
        .await
        .unwrap();
    assert_eq!(recv(&mut watch).await.key, "/core/configmaps/default/z");
    // A key that would land in another resource's directory, or a list spanning several.
    assert!(matches!(
        s.create("/configmaps/ns/a", b("v")).await,
        Err(StoreError::Internal(_))
    ));
    assert!(matches!(
        s.list("/core/", None, 0, None).await,
        Err(StoreError::Internal(_))
    ));
    // Store keys start with `/`.
    assert!(matches!(
        s.create("configmaps/x", b("v")).await,
        Err(StoreError::Internal(_))
    ));
}

#[tokio::test]
async fn prefixes_isolate_stores_on_one_etcd() {
    let etcd = TestEtcd::start().await;
    let open = |prefix: &str| {
        let options = EtcdOptions {
            prefix: prefix.into(),
            ..etcd.options()
        };
        async move { connect(&options).await.unwrap() }
    };
    let a = open("/registry").await;
    // A prefix that extends the other as a string, and one given with a trailing slash.
    let b2 = open("/registry2/").await;
    assert_eq!(b2.prefix(), "/registry2");
    let mut watch_a = a
        .watch("", a.current_revision().await.unwrap())
        .await
        .unwrap();

    let rb = b2.create("/pods/ns/p", b("in b")).await.unwrap();
    assert!(a.get("/pods/ns/p").await.unwrap().is_none());
    let ra = a.create("/pods/ns/p", b("in a")).await.unwrap();
    assert!(ra > rb);
    assert_eq!(
        b2.get("/pods/ns/p").await.unwrap().unwrap().value,
        b("in b")
    );
    assert_eq!(a.list("", None, 0, None).await.unwrap().items.len(), 1);
    assert_eq!(b2.list("", None, 0, None).await.unwrap().items.len(), 1);
    // The watch on `a` sees only `a`'s write.
    let e = recv(&mut watch_a).await;
    assert_eq!((e.revision, e.value), (ra, b("in a")));
    // Writes through one prefix do not conflict with the same key in the other.
    b2.delete("/pods/ns/p", Some(rb)).await.unwrap();
    assert_eq!(a.get("/pods/ns/p").await.unwrap().unwrap().mod_revision, ra);
    // Each store's current revision is its own last write, and never waits for the other's.
    let rb2 = b2.create("/pods/ns/q", b("in b")).await.unwrap();
    assert_eq!(a.current_revision().await.unwrap(), ra);
    assert_eq!(b2.current_revision().await.unwrap(), rb2);
}

#[tokio::test]
async fn compaction_makes_old_revisions_compacted() {
    let etcd = TestEtcd::start().await;
    let s = etcd.store().await;
    let r1 = s.create("/k/a", b("1")).await.unwrap();
    let r2 = s.update("/k/a", b("2"), r1).await.unwrap();
    let r3 = s.create("/k/b", b("b")).await.unwrap();
    let (r4, _) = s.delete("/k/b", None).await.unwrap();
    // Before compaction, history is readable and watchable.
    let old = s.list("/k/", None, 0, Some(r1)).await.unwrap();
    assert_eq!(old.items[0].value, b("1"));
    let mut rx = s.watch("/k/", r1 - 1).await.unwrap();
    assert_eq!(recv(&mut rx).await.revision, r1);

    s.compact(r3).await.unwrap();
    assert_eq!(
        s.list("/k/", None, 0, Some(r2)).await,
        Err(StoreError::Compacted {
            requested: r2,
            oldest: r3
        })
    );
    assert_eq!(
        s.watch("/k/", r1).await.err(),
        Some(StoreError::Compacted {
            requested: r1,
            oldest: r3
        })
    );
    // The compaction revision itself is still readable, and a watch from just before it
    // starts there.
    let at = s.list("/k/", None, 0, Some(r3)).await.unwrap();
    assert_eq!(at.items.len(), 2);
    let mut rx = s.watch("/k/", r3 - 1).await.unwrap();
    let e = recv(&mut rx).await;
    assert_eq!((e.kind, e.revision), (EventKind::Created, r3));
    let e = recv(&mut rx).await;
    assert_eq!((e.kind, e.revision), (EventKind::Deleted, r4));
    assert_eq!(e.prev_value, Some(b("b")));
    // Compacting again to an older revision is not an error; to a future one is.
    s.compact(r2).await.unwrap();
    assert!(matches!(
        s.compact(r4 + 10).await,
        Err(StoreError::FutureRevision { .. })
    ));
}

#[tokio::test]
async fn periodic_compaction_keeps_one_interval_of_history() {
    let etcd = TestEtcd::start().await;
    let options = EtcdOptions {
        compaction_interval: Duration::from_millis(300),
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let first = s.create("/k/a", b("1")).await.unwrap();
    let mut last = first;
    // Keep writing until the compactor has passed the first write.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "history was never compacted");
        last = s.update("/k/a", b("x"), last).await.unwrap();
        if let Err(StoreError::Compacted { requested, oldest }) =
            s.list("/k/", None, 0, Some(first)).await
        {
            assert_eq!(requested, first);
            assert!(
                oldest > first && oldest <= last,
                "{oldest} in ({first}, {last}]"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The compactor coordinates through kube-apiserver's key, outside the prefix.
    let mut kv = raw(&etcd).await.kv_client();
    let key = kv
        .get(super::compactor::COMPACT_REV_KEY, None)
        .await
        .unwrap();
    assert!(key.kvs()[0].version() >= 2);
    assert!(s.list("", None, 0, None).await.unwrap().items.len() == 1);
    // The latest revision is always kept.
    assert!(s.list("/k/", None, 0, Some(last)).await.is_ok());
    // close() stops it: the key's version stays put afterwards.
    s.close().await;
    let before = kv
        .get(super::compactor::COMPACT_REV_KEY, None)
        .await
        .unwrap()
        .kvs()[0]
        .version();
    tokio::time::sleep(Duration::from_millis(900)).await;
    let after = kv
        .get(super::compactor::COMPACT_REV_KEY, None)
        .await
        .unwrap()
        .kvs()[0]
        .version();
    assert_eq!(before, after);
}

#[tokio::test]
async fn fails_over_to_the_endpoint_that_answers() {
    let etcd = TestEtcd::start().await;
    let dead = format!("http://127.0.0.1:{}", free_port());
    let options = EtcdOptions {
        endpoints: vec![dead, etcd.endpoint.clone()],
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let mut rx = s
        .watch("/f/", s.current_revision().await.unwrap())
        .await
        .unwrap();
    let mut last = 0;
    for i in 0..30 {
        let key = format!("/f/{i}");
        last = s.create(&key, b("x")).await.unwrap();
        assert_eq!(s.get(&key).await.unwrap().unwrap().mod_revision, last);
        let e = recv(&mut rx).await;
        assert_eq!(e.revision, last);
    }
    assert_eq!(s.list("/f/", None, 0, None).await.unwrap().items.len(), 30);
    assert_eq!(s.current_revision().await.unwrap(), last);
}

#[tokio::test]
async fn unreachable_etcd_is_unavailable_not_a_hang() {
    let dead = format!("http://127.0.0.1:{}", free_port());
    let options = EtcdOptions {
        request_timeout: Duration::from_secs(1),
        ..EtcdOptions::new([dead.clone()])
    };
    let started = Instant::now();
    match connect(&options).await {
        Err(StoreError::Unavailable(message)) => {
            assert!(message.contains(&dead), "{message}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn etcd_going_away_ends_watches_and_fails_requests() {
    let mut etcd = TestEtcd::start().await;
    let options = EtcdOptions {
        request_timeout: Duration::from_secs(2),
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let r = s.create("/k", b("x")).await.unwrap();
    let mut rx = s.watch("/", r).await.unwrap();
    etcd.stop();
    // The watch ends with an error (the watch cache then re-watches or re-lists).
    let end = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("watch did not end");
    assert!(
        matches!(end, Some(Err(StoreError::Unavailable(_)))),
        "{end:?}"
    );
    // Requests fail with Unavailable within the request timeout.
    for result in [
        s.get("/k").await.map(|_| ()),
        s.create("/k2", b("x")).await.map(|_| ()),
        s.list("/", None, 0, None).await.map(|_| ()),
        s.watch("/", r).await.map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn watch_cache_follows_etcd() {
    let etcd = TestEtcd::start().await;
    let s = etcd.store().await;
    s.create("/pods/ns/a", b("{\"metadata\":{\"name\":\"a\"}}"))
        .await
        .unwrap();
    let cacher = Cacher::start(s.clone() as Arc<dyn Store>, 100)
        .await
        .unwrap();
    assert!(cacher.get("/pods/ns/a").is_some());
    let r = s
        .create("/pods/ns/b", b("{\"metadata\":{\"name\":\"b\"}}"))
        .await
        .unwrap();
    cacher
        .wait_for_revision(r, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(cacher.get("/pods/ns/b").is_some());
    // A write outside the prefix raises etcd's revision without an event under it: the
    // store's current revision (what consistent reads wait for) stays at the last own write.
    raw(&etcd)
        .await
        .kv_client()
        .put("/elsewhere/x", "v", None)
        .await
        .unwrap();
    let current = s.current_revision().await.unwrap();
    assert_eq!(current, r);
    cacher
        .wait_for_revision(current, Duration::from_secs(5))
        .await
        .unwrap();
}

/// `current_revision` shares etcd round trips between concurrent callers, yet every caller
/// sees each write acknowledged before it asked (linearizable), with writers racing readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_current_revisions_are_batched_and_linearizable() {
    let etcd = TestEtcd::start().await;
    let s = etcd.store().await;
    let before = s.revisions.fetches();
    // Readers in a tight loop keep a fetch in flight nearly all the time, so the checks below
    // mostly arrive mid-fetch: exactly the case where reusing that fetch would be stale.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..8 {
        let (s, stop) = (s.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut calls = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                s.current_revision().await.unwrap();
                calls += 1;
            }
            calls
        }));
    }
    let mut writers = Vec::new();
    for w in 0..4 {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..25 {
                let written = s
                    .create(&format!("/cm/ns/w{w}-{i}"), b("{}"))
                    .await
                    .unwrap();
                let seen = s.current_revision().await.unwrap();
                assert!(
                    seen >= written,
                    "current revision {seen} is older than the write {written} acknowledged before the read"
                );
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 100;
    for r in readers {
        calls += r.await.unwrap();
    }
    let fetches = s.revisions.fetches() - before;
    assert!(
        fetches > 0 && fetches <= calls,
        "{fetches} fetches for {calls} calls"
    );
}

/// Callers that ask together before any round trip completes share one (plus the one the
/// first caller started), and the batch's answer includes every earlier write.
#[tokio::test]
async fn callers_arriving_together_share_one_fetch() {
    let etcd = TestEtcd::start().await;
    let s = etcd.store().await;
    let written = s.create("/cm/ns/a", b("{}")).await.unwrap();
    let before = s.revisions.fetches();
    // On this single-threaded runtime the first caller's fetch cannot run before all 50
    // have joined: the first starts a fetch, the other 49 join the next one.
    let answers = futures::future::join_all((0..50).map(|_| s.current_revision())).await;
    for answer in answers {
        assert_eq!(answer.unwrap(), written);
    }
    assert_eq!(s.revisions.fetches() - before, 2);
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, written to `dir`.
fn pki(dir: &Path) -> TestPki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SanType,
    };
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, "etcd-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);

    let mut server = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    server
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    server.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let server_key = KeyPair::generate().unwrap();
    let server_pem = server.signed_by(&server_key, &issuer).unwrap().pem();

    let mut client = CertificateParams::default();
    client
        .distinguished_name
        .push(DnType::CommonName, "kubegate");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client_pem = client.signed_by(&client_key, &issuer).unwrap().pem();

    TestPki {
        ca: write("ca.crt", ca_pem),
        server_cert: write("server.crt", server_pem),
        server_key: write("server.key", server_key.serialize_pem()),
        client_cert: write("client.crt", client_pem),
        client_key: write("client.key", client_key.serialize_pem()),
    }
}

#[tokio::test]
async fn tls_with_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let etcd = TestEtcd::start_tls(&pki).await;
    assert!(etcd.endpoint.starts_with("https://"));
    let options = EtcdOptions {
        ca_file: Some(pki.ca.clone()),
        cert_file: Some(pki.client_cert.clone()),
        key_file: Some(pki.client_key.clone()),
        request_timeout: Duration::from_secs(3),
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let r = s.create("/secure", b("x")).await.unwrap();
    let mut rx = s.watch("/", r).await.unwrap();
    let r2 = s.update("/secure", b("y"), r).await.unwrap();
    assert_eq!(recv(&mut rx).await.revision, r2);

    // Without the client certificate etcd refuses the connection.
    let no_cert = EtcdOptions {
        cert_file: None,
        key_file: None,
        ..options.clone()
    };
    assert!(matches!(
        connect(&no_cert).await,
        Err(StoreError::Unavailable(_))
    ));
    // A missing file is named.
    let missing = EtcdOptions {
        ca_file: Some(dir.path().join("nope.crt")),
        ..options.clone()
    };
    match connect(&missing).await {
        Err(StoreError::Unavailable(message)) => assert!(message.contains("nope.crt"), "{message}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // https endpoints without a CA are refused before connecting.
    let no_ca = EtcdOptions {
        ca_file: None,
        ..options
    };
    assert!(matches!(
        connect(&no_ca).await,
        Err(StoreError::Unavailable(m)) if m.contains("CA file")
    ));
}

/// The lease etcd holds for a raw key under `/registry` (0: none).
async fn lease_of(client: &etcd_client::Client, key: &str) -> i64 {
    let got = client.kv_client().get(key, None).await.unwrap();
    got.kvs().first().map(|kv| kv.lease()).unwrap_or(0)
}

#[tokio::test]
async fn keys_under_an_expiring_prefix_are_deleted_ttl_after_their_last_write() {
    let etcd = TestEtcd::start().await;
    let options = EtcdOptions {
        expiring_prefixes: vec![super::ExpiringPrefix {
            prefix: "/core/events/".into(),
            ttl: Duration::from_secs(2),
        }],
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let client = raw(&etcd).await;
    let created = s.create("/core/events/ns/a", b("{\"v\":1}")).await.unwrap();
    s.create("/core/eventsx/ns/a", b("{}")).await.unwrap();
    s.create("/core/configmaps/ns/b", b("{}")).await.unwrap();
    let first_lease = lease_of(&client, "/registry/events/ns/a").await;
    assert_ne!(first_lease, 0, "a write under the prefix carries a lease");
    assert_eq!(lease_of(&client, "/registry/core/eventsx/ns/a").await, 0);
    assert_eq!(lease_of(&client, "/registry/configmaps/ns/b").await, 0);
    // An update attaches a lease again (a put without one would detach it).
    let mut watch = s.watch("/core/events/", created).await.unwrap();
    let updated = s
        .update("/core/events/ns/a", b("{\"v\":2}"), created)
        .await
        .unwrap();
    assert_ne!(lease_of(&client, "/registry/events/ns/a").await, 0);
    assert_eq!(recv(&mut watch).await.kind, EventKind::Modified);
    // etcd deletes the key once the lease runs out: watchers get a delete with the last value.
    let deleted = recv(&mut watch).await;
    assert_eq!(deleted.kind, EventKind::Deleted);
    assert_eq!(deleted.key, "/core/events/ns/a");
    assert_eq!(deleted.prev_value, Some(b("{\"v\":2}")));
    assert!(deleted.revision > updated);
    assert_eq!(s.get("/core/events/ns/a").await.unwrap(), None);
    assert!(s.get("/core/eventsx/ns/a").await.unwrap().is_some());
    assert!(s.get("/core/configmaps/ns/b").await.unwrap().is_some());
}

#[tokio::test]
async fn a_revoked_shared_lease_is_replaced_on_the_next_write() {
    let etcd = TestEtcd::start().await;
    // A long TTL: writes share one lease (kube's reuse window).
    let options = EtcdOptions {
        expiring_prefixes: vec![super::ExpiringPrefix {
            prefix: "/core/events/".into(),
            ttl: Duration::from_secs(3600),
        }],
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let client = raw(&etcd).await;
    s.create("/core/events/ns/a", b("{}")).await.unwrap();
    s.create("/core/events/ns/b", b("{}")).await.unwrap();
    let shared = lease_of(&client, "/registry/events/ns/a").await;
    assert_ne!(shared, 0);
    assert_eq!(lease_of(&client, "/registry/events/ns/b").await, shared);
    let ttl = client
        .lease_client()
        .time_to_live(shared, None)
        .await
        .unwrap()
        .granted_ttl();
    assert_eq!(ttl, 3600 + 60, "the TTL plus kube's reuse window");
    // Someone revokes it (its keys go with it); the store's next write gets a new lease.
    client.lease_client().revoke(shared).await.unwrap();
    assert_eq!(s.get("/core/events/ns/a").await.unwrap(), None);
    s.create("/core/events/ns/c", b("{}")).await.unwrap();
    let fresh = lease_of(&client, "/registry/events/ns/c").await;
    assert_ne!(fresh, 0);
    assert_ne!(fresh, shared);
}

#[tokio::test]
async fn keys_stored_without_a_lease_get_one_when_their_prefix_expires() {
    let etcd = TestEtcd::start().await;
    // Written before the prefix expired (an older kubegate, or `kubegate migrate`).
    let before = etcd.store().await;
    let old = before
        .create("/core/events/ns/old", b("{\"v\":1}"))
        .await
        .unwrap();
    before
        .create("/core/configmaps/ns/c", b("{}"))
        .await
        .unwrap();
    let options = EtcdOptions {
        expiring_prefixes: vec![super::ExpiringPrefix {
            prefix: "/core/events/".into(),
            ttl: Duration::from_secs(2),
        }],
        ..etcd.options()
    };
    let s = connect(&options).await.unwrap();
    let mut watch = s.watch("/core/events/", old).await.unwrap();
    // Given a lease in place: the value is kept, the key is seen modified once...
    let modified = recv(&mut watch).await;
    assert_eq!(modified.kind, EventKind::Modified);
    assert_eq!(modified.value, b("{\"v\":1}"));
    // ...and expires.
    let deleted = recv(&mut watch).await;
    assert_eq!(deleted.kind, EventKind::Deleted);
    assert_eq!(deleted.key, "/core/events/ns/old");
    assert!(s.get("/core/configmaps/ns/c").await.unwrap().is_some());
}

/// Several `etcd` processes forming one cluster on loopback ports.
struct TestCluster {
    members: Vec<Child>,
    endpoints: Vec<String>,
    dir: tempfile::TempDir,
}

impl TestCluster {
    /// Starts `size` members and waits until the cluster answers.
    async fn start(size: usize) -> TestCluster {
        let bin = etcd_binary();
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let initial = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = Vec::new();
        let mut endpoints = Vec::new();
        for (i, (client, peer)) in ports.iter().enumerate() {
            let endpoint = format!("http://127.0.0.1:{client}");
            let log = std::fs::File::create(dir.path().join(format!("m{i}.log"))).unwrap();
            let child = Command::new(&bin)
                .arg(format!("--name=m{i}"))
                .arg(format!(
                    "--data-dir={}",
                    dir.path().join(format!("m{i}")).display()
                ))
                .arg(format!("--listen-client-urls={endpoint}"))
                .arg(format!("--advertise-client-urls={endpoint}"))
                .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
                .arg(format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
                ))
                .arg(format!("--initial-cluster={initial}"))
                .arg("--initial-cluster-state=new")
                .arg("--logger=zap")
                .arg("--log-outputs=stderr")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            members.push(child);
            endpoints.push(endpoint);
        }
        let cluster = TestCluster {
            members,
            endpoints,
            dir,
        };
        let mut options = cluster.options();
        options.request_timeout = Duration::from_millis(500);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(store) = connect(&options).await {
                store.close().await;
                return cluster;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let logs: String = (0..size)
            .map(|i| std::fs::read_to_string(cluster.dir.path().join(format!("m{i}.log"))))
            .filter_map(Result::ok)
            .collect();
        panic!("the etcd cluster did not start; logs:\n{logs}");
    }

    fn options(&self) -> EtcdOptions {
        EtcdOptions {
            compaction_interval: Duration::ZERO,
            ..EtcdOptions::new(self.endpoints.clone())
        }
    }

    /// Sends `signal` (`STOP` or `CONT`) to member `i`, by its pid.
    fn signal(&self, i: usize, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.members[i].id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} member {i}");
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for child in &mut self.members {
            // A stopped process dies of SIGKILL too; CONT first anyway so nothing lingers.
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(child.id().to_string())
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `store`'s view of member `i` until it is `up` (or 15 s pass).
async fn wait_member(store: &EtcdStore, i: usize, up: bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while store.member_health()[i].1 != up {
        assert!(
            Instant::now() < deadline,
            "member {i} never looked {}: {:?}",
            if up { "up" } else { "down" },
            store.member_health()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A member that hangs (SIGSTOP: its sockets still accept connections, so only a request
/// that gets no answer tells) is left within a probe: reads in flight on it are retried on
/// another member, the watch cache's watch moves to a member that answers, and once it is
/// seen down every write and read goes elsewhere. Each member in turn, so the watch cache's
/// watch and the leader are on the hung one at some point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_member_is_left_for_the_others() {
    let cluster = TestCluster::start(3).await;
    let options = EtcdOptions {
        // Longer than gRPC keepalive's 40 s would be needed to notice otherwise: a request
        // stuck on the hung member would fail this test rather than time out and pass.
        request_timeout: Duration::from_secs(60),
        ..cluster.options()
    };
    let s = connect(&options).await.unwrap();
    let cacher = Cacher::start(s.clone() as Arc<dyn Store>, 100)
        .await
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let result = s.list("/hung/", None, 0, None).await;
                if let Err(e) = result {
                    return Err(format!("read {reads} failed: {e}"));
                }
                // A read waiting on the hung member is cut off when the member is seen down
                // (a probe is 1 s apart and waits 2 s), not at the 60 s request timeout.
                if started.elapsed() > Duration::from_secs(20) {
                    return Err(format!("read {reads} took {:?}", started.elapsed()));
                }
                reads += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(reads)
        })
    };
    for hung in 0..3 {
        cluster.signal(hung, "STOP");
        wait_member(&s, hung, false).await;
        // A write that was in flight to the hung member may have failed; new ones go to the
        // others once a leader is there (the hung one may have been it).
        let deadline = Instant::now() + Duration::from_secs(15);
        let first = format!("/hung/{hung}/first");
        while let Err(e) = s.create(&first, b("x")).await {
            assert!(
                matches!(e, StoreError::Unavailable(_) | StoreError::AlreadyExists(_)),
                "{e:?}"
            );
            if matches!(e, StoreError::AlreadyExists(_)) {
                break;
            }
            assert!(Instant::now() < deadline, "no write succeeded: {e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for i in 0..10 {
            let key = format!("/hung/{hung}/{i}");
            let revision = s.create(&key, b("x")).await.unwrap();
            assert_eq!(s.get(&key).await.unwrap().unwrap().mod_revision, revision);
            // The watch cache sees it: its watch does not sit on the hung member.
            cacher
                .wait_for_revision(revision, Duration::from_secs(10))
                .await
                .unwrap();
            assert!(cacher.get(&key).is_some());
        }
        cluster.signal(hung, "CONT");
        wait_member(&s, hung, true).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.await.unwrap().unwrap();
    assert!(reads > 10, "{reads}");
    let listed = s.list("/hung/", None, 0, None).await.unwrap();
    assert_eq!(listed.items.len(), 33);
}

#[test]
fn a_write_cut_off_in_flight_says_it_may_have_been_applied() {
    let status = |code, message: &str| {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message.to_string()))
    };
    let message = |op: &str, e| match super::map_error("http://127.0.0.1:1", op, e) {
        StoreError::Unavailable(m) => m,
        other => panic!("expected Unavailable, got {other:?}"),
    };
    const MAY: &str = "may or may not have been applied";
    for (code, text) in [
        (
            tonic::Code::Unavailable,
            "error reading a body from connection",
        ),
        (
            tonic::Code::DeadlineExceeded,
            "etcdserver: request timed out",
        ),
        (tonic::Code::Cancelled, "operation was canceled"),
    ] {
        for op in ["create", "update", "delete"] {
            assert!(message(op, status(code, text)).contains(MAY), "{op} {text}");
        }
        // A read is just retried or failed: nothing to say about its outcome.
        assert!(!message("get", status(code, text)).contains(MAY));
    }
    // Refused before etcd handled it: certainly not applied.
    for text in [
        "etcdserver: no leader",
        "tcp connect error: Connection refused",
        "etcdserver: rpc not supported for learner",
    ] {
        let m = message("create", status(tonic::Code::Unavailable, text));
        assert!(!m.contains(MAY), "{m}");
        assert!(m.contains(text), "{m}");
        // ...so a write refused that way goes to another member.
        assert!(
            super::is_unreachable(&status(tonic::Code::Unavailable, text), true),
            "{text}"
        );
    }
}

/// An earlier kubegate kept every key under its store name (`/registry/core/configmaps/...`);
/// connecting moves those keys into kube's layout, with their values and leases, once.
#[tokio::test]
async fn keys_of_an_earlier_layout_are_moved_on_connect() {
    let etcd = TestEtcd::start().await;
    let client = raw(&etcd).await;
    let mut kv = client.kv_client();
    let lease = client.lease_client().grant(600, None).await.unwrap().id();
    kv.put("/registry/core/configmaps/ns/a", "{\"a\":1}", None)
        .await
        .unwrap();
    kv.put(
        "/registry/core/events/ns/e",
        "{\"e\":1}",
        Some(etcd_client::PutOptions::new().with_lease(lease)),
    )
    .await
    .unwrap();
    kv.put("/registry/rbac.authorization.k8s.io/roles/ns/r", "{}", None)
        .await
        .unwrap();
    // Its place taken already: left alone (and not shown twice).
    kv.put("/registry/core/secrets/ns/s", "old", None)
        .await
        .unwrap();
    kv.put("/registry/secrets/ns/s", "new", None).await.unwrap();
    // Not a relocated resource: stays.
    kv.put("/registry/stable.example.com/crontabs/ns/c", "{}", None)
        .await
        .unwrap();

    let s = etcd.store().await;
    let value = |key: &str| {
        let mut kv = kv.clone();
        let key = key.to_string();
        async move {
            let got = kv.get(key, None).await.unwrap();
            got.kvs()
                .first()
                .map(|kv| (kv.value().to_vec(), kv.lease()))
        }
    };
    assert_eq!(
        value("/registry/configmaps/ns/a").await,
        Some((b"{\"a\":1}".to_vec(), 0))
    );
    assert_eq!(value("/registry/core/configmaps/ns/a").await, None);
    assert_eq!(
        value("/registry/events/ns/e").await,
        Some((b"{\"e\":1}".to_vec(), lease))
    );
    assert_eq!(
        value("/registry/roles/ns/r").await.map(|v| v.0),
        Some(b"{}".to_vec())
    );
    assert_eq!(
        value("/registry/secrets/ns/s").await.map(|v| v.0),
        Some(b"new".to_vec())
    );
    assert_eq!(
        value("/registry/core/secrets/ns/s").await.map(|v| v.0),
        Some(b"old".to_vec())
    );
    let all = s.list("", None, 0, None).await.unwrap();
    let mut keys: Vec<_> = all.items.iter().map(|kv| kv.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "/core/configmaps/ns/a",
            "/core/events/ns/e",
            "/core/secrets/ns/s",
            "/rbac.authorization.k8s.io/roles/ns/r",
            "/stable.example.com/crontabs/ns/c",
        ]
    );
    assert_eq!(
        s.get("/core/secrets/ns/s").await.unwrap().unwrap().value,
        b("new")
    );
    // A second replica connecting finds nothing left to move.
    let revision = s.current_revision().await.unwrap();
    let again = etcd.store().await;
    assert_eq!(again.current_revision().await.unwrap(), revision);
}

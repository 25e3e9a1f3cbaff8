//! A real etcd (Debian's `etcd-server`) for the storage tests: started on free loopback
//! ports with a temporary data dir, stopped by pid, and restartable on the same ports and
//! data so a test can take it away and bring it back.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// A running (or stopped) single-member etcd.
pub struct Etcd {
    pub client_port: u16,
    peer_port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Further etcd flags (`--max-request-bytes=...`).
    extra_args: Vec<String>,
}

impl Etcd {
    /// Starts etcd and waits until it answers `/health`.
    pub fn start() -> Etcd {
        Etcd::start_with(&[])
    }

    /// [`Etcd::start`] with further etcd flags.
    pub fn start_with(extra_args: &[&str]) -> Etcd {
        let mut etcd = Etcd {
            client_port: free_port(),
            peer_port: free_port(),
            dir: tempfile::tempdir().expect("etcd dir"),
            child: None,
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
        };
        // A free port can be taken by another test between `free_port` and etcd's bind: then
        // etcd exits at once, and it is started again on other ports, from an empty data dir.
        for _ in 0..4 {
            match etcd.try_spawn() {
                Err(log) if log.contains("address already in use") => {
                    etcd.client_port = free_port();
                    etcd.peer_port = free_port();
                    let _ = std::fs::remove_dir_all(etcd.data_dir());
                    let _ = std::fs::remove_file(etcd.dir.path().join("etcd.log"));
                }
                Err(log) => panic!("etcd exited: {log}"),
                Ok(()) => return etcd,
            }
        }
        etcd.spawn();
        etcd
    }

    /// `http://127.0.0.1:<port>`, for `--etcd-servers`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn spawn(&mut self) {
        if let Err(log) = self.try_spawn() {
            panic!("etcd exited: {log}");
        }
    }

    /// Starts etcd and waits until it is healthy; `Err` with its log if it exited.
    fn try_spawn(&mut self) -> Result<(), String> {
        let binary = std::env::var("ETCD_BIN").unwrap_or_else(|_| "etcd".into());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .expect("etcd log");
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new(&binary)
            .arg("--name=default")
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={}", self.url()))
            .arg(format!("--advertise-client-urls={}", self.url()))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=default={peer}"))
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("starting {binary} ({e}): install Debian's etcd-server (apt-get install etcd-server), as .ci/run does")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("curl")
                .args(["-s", "--max-time", "1"])
                .arg(format!("{}/health", self.url()))
                .output()
                .expect("curl");
            if String::from_utf8_lossy(&out.stdout).contains("\"health\":\"true\"") {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!("({status}) {}", self.log()));
                }
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not become healthy: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// etcd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    /// Kills etcd (by pid) and waits for it to be gone; its data stays.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

//! # kubegate-tests
//!
//! End-to-end test support: [`Kubegate`] starts the real `kubegate` binary on a free
//! loopback port with a temporary data dir, waits until it is ready, and drives it with the
//! real `kubectl` (and `curl` for raw HTTP). Processes are stopped by pid, never by name.
//!
//! Build the binary first (`cargo build --bin kubegate`, which `.ci/run` does); the tests
//! look for it next to the test executable's target directory.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub mod conversion_webhook;
pub mod crd_fixtures;
pub mod etcd;
pub mod fixtures;
pub mod netns;
pub mod openssl;
pub mod wardle;

/// A running kubegate process with its data dir.
pub struct Kubegate {
    pub port: u16,
    pub data_dir: PathBuf,
    child: Option<Child>,
    _temp: Option<tempfile::TempDir>,
    extra_args: Vec<String>,
}

/// The `kubegate` binary of this build.
pub fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("KUBEGATE_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/kubegate
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile directory");
    let bin = profile_dir.join("kubegate");
    assert!(
        bin.exists(),
        "{} not found: run `cargo build --bin kubegate` first (or set KUBEGATE_BIN)",
        bin.display()
    );
    bin
}

/// The JSON lines a fixture appended to `path` (a request log), oldest first; none if the
/// file does not exist yet.
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The port a fixture server reports as the first line of its stdout once it has bound it
/// (the python fixtures bind port 0 themselves), waiting up to `timeout`; `None` if it
/// printed something else or nothing. The caller kills the child then.
pub fn reported_port(child: &mut Child, timeout: Duration) -> Option<u16> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(timeout).ok()?.trim().parse().ok()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

impl Kubegate {
    /// Starts kubegate with a fresh temporary data dir and waits until `/readyz` passes.
    pub fn start() -> Kubegate {
        Self::start_with(&[])
    }

    /// Like [`Kubegate::start`] with extra `serve` flags.
    pub fn start_with(extra: &[&str]) -> Kubegate {
        let temp = tempfile::tempdir().expect("temp dir");
        let mut gate = Kubegate {
            port: free_port(),
            data_dir: temp.path().join("data"),
            child: None,
            _temp: Some(temp),
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
        };
        gate.spawn_on_a_free_port();
        gate
    }

    /// Another replica: a fresh data dir seeded with `first`'s certificates and keys (its
    /// `pki/`), so both serve with the same CA and sign and accept the same tokens, as
    /// replicas started from the same files do.
    pub fn start_sharing(first: &Kubegate, extra: &[&str]) -> Kubegate {
        let temp = tempfile::tempdir().expect("temp dir");
        let data_dir = temp.path().join("data");
        let pki = data_dir.join("pki");
        std::fs::create_dir_all(&pki).expect("pki dir");
        for entry in std::fs::read_dir(first.data_dir.join("pki")).expect("first pki") {
            let entry = entry.expect("pki entry");
            std::fs::copy(entry.path(), pki.join(entry.file_name())).expect("copy pki file");
        }
        let mut gate = Kubegate {
            port: free_port(),
            data_dir,
            child: None,
            _temp: Some(temp),
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
        };
        gate.spawn_on_a_free_port();
        gate
    }

    fn log_path(&self) -> PathBuf {
        self.data_dir.with_file_name("kubegate.log")
    }

    /// Starts the server on `self.port`, a port that was free a moment ago; if another
    /// process took it in between (kubegate then stops at once: "failed to listen on"),
    /// starts it again on another.
    fn spawn_on_a_free_port(&mut self) {
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            let log_before = std::fs::metadata(self.log_path()).map_or(0, |m| m.len());
            let Some(status) = self.try_spawn() else {
                return;
            };
            let log = self.log();
            let this_attempt = log.get(log_before as usize..).unwrap_or(&log);
            if attempt == ATTEMPTS || !this_attempt.contains("failed to listen on") {
                panic!("kubegate exited early ({status}):\n{log}");
            }
            self.port = free_port();
        }
    }

    fn spawn(&mut self) {
        if let Some(status) = self.try_spawn() {
            panic!("kubegate exited early ({status}):\n{}", self.log());
        }
    }

    /// Starts the server and waits until it is ready (`None`) or has exited (its status).
    fn try_spawn(&mut self) -> Option<std::process::ExitStatus> {
        std::fs::create_dir_all(&self.data_dir).expect("create data dir");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open log");
        let child = Command::new(binary())
            .arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--secure-port")
            .arg(self.port.to_string())
            .arg("--bind-address")
            .arg("127.0.0.1")
            .args(&self.extra_args)
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start kubegate");
        self.child = Some(child);
        self.wait_ready()
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Waits until `/readyz` passes (`None`) or the process exits (its status).
    fn wait_ready(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Some(status);
                }
            }
            if self.kubeconfig().exists() {
                let out = self.kubectl(&["get", "--raw", "/readyz"]);
                if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                    return None;
                }
            }
            if Instant::now() > deadline {
                panic!("kubegate did not become ready:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The generated admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir.join("admin.kubeconfig")
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Runs kubectl with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    /// Runs kubectl with a discovery cache of its own, so it sees the server's current
    /// discovery (groups added or removed since an earlier kubectl run).
    pub fn kubectl_fresh(&self, args: &[&str]) -> Output {
        let cache = tempfile::tempdir().expect("cache dir");
        let flag = format!("--cache-dir={}", cache.path().display());
        let mut all = vec![flag.as_str()];
        all.extend_from_slice(args);
        self.kubectl(&all)
    }

    /// Runs kubectl with `stdin` piped in.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.data_dir.parent().unwrap_or(&self.data_dir))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run kubectl (is it installed?)");
        if let Some(input) = stdin {
            use std::io::Write;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes()).expect("write stdin");
        }
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs kubectl and returns stdout, panicking with stderr on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n--- server log tail ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            tail(&self.log(), 40)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs kubectl with `stdin` and returns stdout, panicking on failure.
    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_stdin(args, Some(stdin));
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Parses `kubectl ... -o json` output.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: bad JSON ({e}): {out}"))
    }

    /// A raw HTTPS request with the admin client certificate (curl): returns (status, body).
    /// curl negotiates HTTP/2 with kubegate.
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: Option<&[u8]>,
    ) -> (u16, Vec<u8>) {
        self.curl_as(&[], method, path, headers, body)
    }

    /// [`Kubegate::curl`] over HTTP/1.1.
    pub fn curl_http1(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: Option<&[u8]>,
    ) -> (u16, Vec<u8>) {
        self.curl_as(&["--http1.1"], method, path, headers, body)
    }

    /// [`Kubegate::curl`] with more curl arguments (`--http1.1`, `--http2`).
    pub fn curl_as(
        &self,
        curl_args: &[&str],
        method: &str,
        path: &str,
        headers: &[&str],
        body: Option<&[u8]>,
    ) -> (u16, Vec<u8>) {
        let pki = self.data_dir.join("pki");
        let mut cmd = Command::new("curl");
        cmd.args(curl_args);
        // --path-as-is: the path goes out exactly as written (curl would resolve `..`).
        cmd.arg("-sS")
            .arg("--path-as-is")
            .arg("-X")
            .arg(method)
            .arg("--cacert")
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .arg("-o")
            .arg("-")
            .arg("-w")
            .arg("\n%{http_code}");
        for h in headers {
            cmd.arg("-H").arg(h);
        }
        if body.is_some() {
            cmd.arg("--data-binary").arg("@-");
        }
        cmd.arg(format!("{}{}", self.url(), path))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run curl");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            if let Some(b) = body {
                stdin.write_all(b).expect("write body");
            }
        }
        let out = child.wait_with_output().expect("curl output");
        let mut text = out.stdout;
        let split = text.iter().rposition(|b| *b == b'\n').unwrap_or(0);
        let code: u16 = String::from_utf8_lossy(&text[split..])
            .trim()
            .parse()
            .unwrap_or(0);
        text.truncate(split);
        (code, text)
    }

    /// Sends SIGKILL and waits for the process to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits (up to `timeout`) for a clean exit; returns the exit code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        let mut child = self.child.take()?;
        signal(child.id(), libc::SIGTERM);
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                signal(child.id(), libc::SIGKILL);
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the server again on the same port and data dir.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Starts the server again on the same port and data dir with other extra flags.
    pub fn restart_with(&mut self, extra: &[&str]) {
        self.extra_args = extra.iter().map(|s| s.to_string()).collect();
        self.restart();
    }

    /// Starts a process that streams lines (e.g. `kubectl get -w`), read on a thread.
    pub fn stream(&self, args: &[&str]) -> LineStream {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        LineStream { child, lines: rx }
    }
}

impl Drop for Kubegate {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn signal(pid: u32, sig: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) only sends a signal; the pid is our own child process.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// The last `n` lines of a text.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Lines from a streaming child process; the child is killed on drop.
pub struct LineStream {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl LineStream {
    /// The next line, or None after `timeout`.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Reads lines until one satisfies `pred` (returning it) or `timeout` passes.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return Some(line),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    }
}

impl Drop for LineStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `managedFields` entry of `manager` (for `subresource`, `""` for the object itself) in
/// `object` as read with `--show-managed-fields`; panics, showing the object, without one.
pub fn managed_entry<'a>(
    object: &'a serde_json::Value,
    manager: &str,
    subresource: &str,
) -> &'a serde_json::Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| {
            entries.iter().find(|e| {
                e["manager"] == manager && e["subresource"].as_str().unwrap_or("") == subresource
            })
        })
        .unwrap_or_else(|| panic!("no {manager:?} entry for {subresource:?}: {object}"))
}

/// Asserts that a `managedFields` entry was written by `operation` and owns the field at
/// `pointer` of its `fieldsV1` (e.g. `/f:spec/f:replicas`).
pub fn assert_owns(entry: &serde_json::Value, operation: &str, pointer: &str) {
    assert_eq!(entry["operation"], operation, "{entry}");
    assert!(
        entry["fieldsV1"].pointer(pointer).is_some(),
        "{pointer} not owned: {entry}"
    );
}

/// Polls `check` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

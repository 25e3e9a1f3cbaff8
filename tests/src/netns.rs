//! A private network namespace for tests that need addresses other than 127.0.0.0/8:
//! kube's validation refuses loopback (and link-local) addresses in Endpoints and
//! EndpointSlices, so a test of Service-based APIServices needs its backends on ordinary
//! addresses. [`enter_private_network`] moves the calling thread into a new network namespace
//! of its own and gives that namespace's loopback interface the addresses asked for, so the
//! traffic to them never leaves this process's namespace and no real network is touched.
//!
//! The namespace belongs to the calling thread: what it starts afterwards (kubegate, the
//! backends, kubectl, and threads) is inside, while other tests of the same process are not.
//! It goes away with the last process in it. Creating it needs root (`CAP_SYS_ADMIN`), which
//! `.ci/run` has.

use std::net::IpAddr;
use std::process::Command;

/// Moves this thread into a new network namespace whose loopback interface is up and also
/// holds `addresses` (host routes, `/32` or `/128`). Panics with the reason if it cannot.
pub fn enter_private_network(addresses: &[IpAddr]) {
    // SAFETY: unshare takes a flag word and touches no memory of ours; CLONE_NEWNET is allowed
    // in a multi-threaded process and changes the namespace of the calling thread only.
    #[allow(unsafe_code)]
    let unshared = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    if unshared != 0 {
        panic!(
            "creating a private network namespace failed ({}): this test needs root \
             (CAP_SYS_ADMIN), as `.ci/run` runs it",
            std::io::Error::last_os_error()
        );
    }
    ip(&["link", "set", "lo", "up"]);
    for address in addresses {
        let prefix = if address.is_ipv4() { 32 } else { 128 };
        ip(&["addr", "add", &format!("{address}/{prefix}"), "dev", "lo"]);
    }
}

/// Runs `ip` (iproute2) in this thread's namespace.
fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!(
            "running `ip {}` failed: {e} (is iproute2 installed?)",
            args.join(" ")
        )
    });
    assert!(
        output.status.success(),
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

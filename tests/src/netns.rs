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

/// [`enter_private_network`], plus a private mount namespace in which `/etc/hosts` holds
/// `localhost` and `hosts` (a name may be listed with several addresses, in order): for tests
/// of names that resolve to more than one address. The file lives as long as the returned
/// guard; the machine's own `/etc/hosts` is never touched (mounts stay in the new namespace).
pub fn enter_private_network_with_hosts(
    addresses: &[IpAddr],
    hosts: &[(&str, IpAddr)],
) -> tempfile::NamedTempFile {
    enter_private_network(addresses);
    let mut text = String::from("127.0.0.1 localhost\n");
    for (name, address) in hosts {
        text.push_str(&format!("{address} {name}\n"));
    }
    let file = tempfile::NamedTempFile::new().expect("a temporary hosts file");
    std::fs::write(file.path(), text).expect("write the temporary hosts file");
    let source = std::ffi::CString::new(file.path().as_os_str().as_encoded_bytes())
        .expect("a temp path without NUL");
    // SAFETY: unshare and mount take flags and NUL-terminated strings that outlive the calls;
    // CLONE_NEWNS (with the CLONE_FS it implies) changes the calling thread only.
    #[allow(unsafe_code)]
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            panic!(
                "creating a private mount namespace failed: {}",
                std::io::Error::last_os_error()
            );
        }
        // Nothing mounted here may propagate back to the machine's namespace; stop before the
        // bind mount if that cannot be guaranteed.
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            panic!(
                "making the private mount namespace's mounts private failed: {}",
                std::io::Error::last_os_error()
            );
        }
        if libc::mount(
            source.as_ptr(),
            c"/etc/hosts".as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ) != 0
        {
            panic!(
                "bind-mounting a private /etc/hosts failed: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    file
}

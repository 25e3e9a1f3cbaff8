//! # kubegate
//!
//! A Kubernetes API gateway on pingora: `kubegate serve` runs a complete, secure single-node
//! Kubernetes API (HTTPS on 6443, embedded store, certificates and `admin.kubeconfig`
//! generated on first start). Flags take kube-apiserver's names; `--config` reads the same
//! settings from YAML, and flags override it.

mod authn;
mod certs;
mod cli;
mod controllers;
mod health;
mod metrics;
mod pipeline;
mod respond;
mod routes;
mod server;
mod tls;
mod version;

use clap::Parser;

/// glibc gives each thread that allocates its own malloc arena; for kubegate's few busy
/// threads that costs 10–13 MiB of resident memory for nothing measurable (see
/// docs/benchmarks.md). One arena, unless the operator chose otherwise with MALLOC_ARENA_MAX.
fn limit_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only adjusts allocator tuning; it is called before any other thread
        // exists, and M_ARENA_MAX with a positive value is always accepted.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

fn main() {
    limit_malloc_arenas();
    let cli = cli::Cli::parse();
    let code = match cli.command {
        cli::Command::Version => {
            let info = version::version_info();
            println!(
                "kubegate {} (Kubernetes API {})",
                env!("CARGO_PKG_VERSION"),
                info["gitVersion"].as_str().unwrap_or("")
            );
            0
        }
        cli::Command::Serve(flags) => match flags.into_config() {
            Err(e) => {
                eprintln!("kubegate: {e}");
                2
            }
            Ok(config) => {
                cli::init_logging(&config.logging);
                match server::run(config) {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::error!(error = %e, "kubegate failed to start");
                        eprintln!("kubegate: {e}");
                        1
                    }
                }
            }
        },
    };
    std::process::exit(code);
}

//! # kubegate
//!
//! A Kubernetes API gateway on pingora: `kubegate serve` runs a complete, secure single-node
//! Kubernetes API (HTTPS on 6443, embedded store, certificates and `admin.kubeconfig`
//! generated on first start). Flags take kube-apiserver's names; `--config` reads the same
//! settings from YAML, and flags override it.

mod aggregator;
mod authn;
mod authz;
mod certs;
mod cli;
mod compression;
mod controllers;
mod conversion;
mod crds;
mod flowcontrol;
mod forward;
mod front;
mod health;
mod key_pair_files;
mod metrics;
mod migrate;
mod pipeline;
mod rbac;
mod respond;
mod routes;
mod server;
mod serving_certificate;
mod tls;
mod version;
mod websocket;

use clap::Parser;

fn main() {
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
        cli::Command::Migrate(flags) => match migrate::run(&flags) {
            Ok(report) => {
                println!(
                    "copied {} objects ({} overwritten)",
                    report.copied + report.overwritten,
                    report.overwritten
                );
                0
            }
            Err(e) => {
                eprintln!("kubegate migrate: {e}");
                1
            }
        },
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

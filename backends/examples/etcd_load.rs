//! etcd_load: the raw etcd reference for bench/etcd.sh — closed-loop PUTs or GETs of values
//! of a given size through etcd-client (the client kubegate uses), with C concurrent
//! requests in flight, for D seconds. Prints one `RESULT` line in the load generator's format.
//!
//! Usage: etcd_load --endpoint http://127.0.0.1:2379 --op put|get|create [-c 32] [-d 8]
//!                  [--bytes 1024] [--watchers 0]
//!        (`-t N` is accepted and ignored, for bench/lib.sh's `run_loadgen`)
//!
//! `create` writes the way kubegate's etcd store does (a transaction: put if
//! `create_revision == 0`); `--watchers N` keeps N watches with `prev_kv` open on the written
//! keys and drains them, as kubegate's watch cache and progress tracker do. Both are for
//! telling apart where kubegate-on-etcd's write cost goes; bench/etcd.sh's reference is the
//! plain `put`.

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, WatchOptions};

struct Args {
    endpoint: String,
    op: String,
    conns: usize,
    duration: Duration,
    bytes: usize,
    watchers: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        endpoint: "http://127.0.0.1:2379".into(),
        op: "put".into(),
        conns: 32,
        duration: Duration::from_secs(8),
        bytes: 1024,
        watchers: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--endpoint" => args.endpoint = value,
            "--op" => args.op = value,
            "-c" => args.conns = value.parse().map_err(|e| format!("-c: {e}"))?,
            "-d" => {
                args.duration = Duration::from_secs(value.parse().map_err(|e| format!("-d: {e}"))?)
            }
            "--bytes" => args.bytes = value.parse().map_err(|e| format!("--bytes: {e}"))?,
            "--watchers" => {
                args.watchers = value.parse().map_err(|e| format!("--watchers: {e}"))?
            }
            // The load generator's thread count (bench/lib.sh passes it): one runtime thread
            // is used whatever it says.
            "-t" => {}
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !["put", "get", "create"].contains(&args.op.as_str()) {
        return Err("--op must be put, get or create".into());
    }
    Ok(args)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("etcd_load: {e}");
            std::process::exit(2);
        }
    };
    let client = match Client::connect([args.endpoint.as_str()], None).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("etcd_load: connect: {e}");
            std::process::exit(1);
        }
    };
    let value = vec![b'x'; args.bytes];
    // GETs read one existing key, as kubegate's GET benchmark reads one ConfigMap.
    if args.op == "get" {
        let mut kv = client.kv_client();
        if let Err(e) = kv.put("/bench/get", value.clone(), None).await {
            eprintln!("etcd_load: seed: {e}");
            std::process::exit(1);
        }
    }
    // Watches on every key the writers use, each drained by its own task.
    let prefix = format!("/bench/{}/{}/", args.op, std::process::id());
    for _ in 0..args.watchers {
        let mut watch = client.watch_client();
        let options = WatchOptions::new().with_prefix().with_prev_key();
        match watch.watch(prefix.clone(), Some(options)).await {
            Ok(mut stream) => {
                tokio::spawn(async move { while let Ok(Some(_)) = stream.message().await {} });
            }
            Err(e) => {
                eprintln!("etcd_load: watch: {e}");
                std::process::exit(1);
            }
        }
    }
    let deadline = Instant::now() + args.duration;
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.conns)
        .map(|worker| {
            let mut kv = client.kv_client();
            let value = value.clone();
            let op = args.op.clone();
            let prefix = prefix.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = 0u64;
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let key = format!("{prefix}{worker}/{n}");
                    let ok = match op.as_str() {
                        "put" => kv.put(key, value.clone(), None).await.is_ok(),
                        "create" => {
                            let txn = Txn::new()
                                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                                .and_then([TxnOp::put(key, value.clone(), None)]);
                            kv.txn(txn).await.is_ok_and(|r| r.succeeded())
                        }
                        _ => kv.get("/bench/get", None).await.is_ok(),
                    };
                    if ok {
                        latencies.push(t.elapsed().as_micros() as u64);
                    } else {
                        errors += 1;
                    }
                    n += 1;
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        if let Ok((l, e)) = task.await {
            latencies.extend(l);
            errors += e;
        }
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let requests = latencies.len() as u64 + errors;
    println!(
        "RESULT requests={requests} duration_us={} rps={:.1} p50_us={} p90_us={} p99_us={} p999_us={} max_us={} errors={errors} non2xx=0",
        elapsed.as_micros(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(0.999),
        latencies.last().copied().unwrap_or(0),
    );
}

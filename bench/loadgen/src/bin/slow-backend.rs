//! slow-backend: an HTTPS (HTTP/1.1 keep-alive) server that answers every request with a fixed
//! JSON body after a fixed delay, for bench/apf.sh's proxied scenario.
//!
//! The delay stands for work a request waits on without using kubegate's CPU (an aggregated
//! API server, a webhook, storage): API Priority and Fairness holds the request's seat for it,
//! so the priority level's seats, not the shared CPU, are what a heavy user exhausts.
//! The delay is a timer, not a busy loop, so the backend uses almost no CPU of its own.
//!
//! Requests are read up to the end of their headers (a body announced by Content-Length is
//! read and dropped; chunked bodies are not supported: the benchmark sends GETs).
//!
//! Usage: slow-backend --listen 127.0.0.1:PORT --cert cert.pem --key key.pem [--delay-ms 10]

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The body of every answer: a small object, as an aggregated API server's GET would return.
const BODY: &str = r#"{"apiVersion":"v1","kind":"APIResourceList","groupVersion":"apf.bench.example.com/v1","resources":[{"name":"slowthings","singularName":"slowthing","namespaced":true,"kind":"SlowThing","verbs":["get","list"]}]}"#;
/// Longest request head accepted.
const MAX_HEAD: usize = 64 * 1024;

fn usage(msg: &str) -> ! {
    eprintln!("slow-backend: {msg}");
    eprintln!(
        "usage: slow-backend --listen 127.0.0.1:PORT --cert cert.pem --key key.pem [--delay-ms 10]"
    );
    std::process::exit(2);
}

struct Opts {
    listen: String,
    cert: String,
    key: String,
    delay: Duration,
}

fn parse_args() -> Opts {
    let mut listen = None;
    let mut cert = None;
    let mut key = None;
    let mut delay_ms = 10u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--listen" => listen = Some(val()),
            "--cert" => cert = Some(val()),
            "--key" => key = Some(val()),
            "--delay-ms" => {
                delay_ms = val()
                    .parse()
                    .unwrap_or_else(|_| usage("--delay-ms takes a whole number"))
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    Opts {
        listen: listen.unwrap_or_else(|| usage("--listen is required")),
        cert: cert.unwrap_or_else(|| usage("--cert is required")),
        key: key.unwrap_or_else(|| usage("--key is required")),
        delay: Duration::from_millis(delay_ms),
    }
}

fn tls_config(o: &Opts) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&o.cert)
        .unwrap_or_else(|e| usage(&format!("{}: {e}", o.cert)))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| usage(&format!("{}: {e}", o.cert)));
    let key =
        PrivateKeyDer::from_pem_file(&o.key).unwrap_or_else(|e| usage(&format!("{}: {e}", o.key)));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| usage(&format!("TLS: {e}")))
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap_or_else(|e| usage(&format!("certificate: {e}")));
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// The index just past the head's blank line, if the head is complete.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The Content-Length the head announces (0 when none).
fn content_length(head: &[u8]) -> usize {
    let text = String::from_utf8_lossy(head);
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Serves one connection: request after request until the client closes it.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    delay: Duration,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let end = loop {
            if let Some(end) = head_end(&buf) {
                break end;
            }
            if buf.len() > MAX_HEAD {
                return Ok(());
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let total = end + content_length(&buf[..end]);
        while buf.len() < total {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf.drain(..total);
        tokio::time::sleep(delay).await;
        stream.write_all(response.as_bytes()).await?;
        stream.flush().await?;
    }
}

fn main() {
    let opts = parse_args();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config(&opts));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| usage(&format!("runtime: {e}")));
    runtime.block_on(async move {
        let listener = TcpListener::bind(&opts.listen)
            .await
            .unwrap_or_else(|e| usage(&format!("{}: {e}", opts.listen)));
        eprintln!(
            "slow-backend: listening on {} (delay {:?})",
            opts.listen, opts.delay
        );
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let delay = opts.delay;
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = serve(tls, delay).await;
                }
            });
        }
    });
}

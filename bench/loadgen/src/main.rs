//! kubegate-loadgen: a small closed-loop HTTP/1.1 keep-alive load generator for the kubegate
//! benchmarks (bench/*.sh).
//!
//! Why not wrk/h2load: kubegate authenticates by TLS client certificate and neither tool can
//! present one. This tool speaks HTTP/1.1 over TLS (rustls, ALPN http/1.1) or plain TCP,
//! optionally with a client certificate, and is used against kubegate AND the reference
//! (nginx) so both sides see the same client.
//!
//! Model: C connections, each sends one request, reads the whole response, records the
//! latency, repeats (like wrk). All connections finish their TLS handshake before the clock
//! starts. The run ends after --duration seconds or after --requests requests in total.
//!
//! Open loop (--rate R): request i is due at start + i/R whatever the answers; a free
//! connection sends the next due request (waiting for its time), so C must cover R x the
//! latency. Latency is measured from the due time, so a request that waited for a free
//! connection counts that wait (no coordinated omission). Requests due before the end are
//! the `expected` ones; those no connection was free to send before the end are `unsent`;
//! requests in flight at the end are waited for (up to --timeout).
//!
//! --start-at T (Unix time in seconds, fractional) starts the clock at that wall time
//! instead of right after the handshakes, so several load generators (one per user) measure
//! the same window.
//!
//! Usage:
//!   kubegate-loadgen --url https://127.0.0.1:6443/api/v1/namespaces/default/configmaps/x
//!       [-c 32] [-d 10] [-n TOTAL] [--threads 1]
//!       [--ca ca.crt] [--cert admin.crt --key admin.key] [--insecure]
//!       [--method GET] [--body-file F] [--header 'K: V']...
//!       [--start-index 0] [--rate R] [--start-at UNIX_SECS] [--timeout SECS]
//! In --body-file and in the URL path, every "{n}" is replaced by the request's index (unique
//! per run, from --start-index) and every "{run}" by a token unique to this process (hex of
//! its start time in ns), e.g. for creating objects with names that never repeat, even when
//! a run is redone with the same arguments.
//!
//! Output (stdout), one line, key=value:
//!   RESULT requests= duration_us= rps= p50_us= p90_us= p99_us= p999_us= max_us= errors=
//!          non2xx= status=200:N,... bytes_in= connect_ms= proto= cipher= ok= r429=
//!          ok_p50_us= ok_p90_us= ok_p99_us= ok_max_us= rate= expected= unsent= late=
//! The latency percentiles p* are over all answered requests, ok_p* over the 2xx ones only;
//! `r429` counts 429 answers. `rate`, `expected`, `unsent` and `late` (sent more than 10 ms
//! after due) are 0 in closed-loop runs.
//! Exit status 0 unless nothing could connect.

use std::{
    collections::BTreeMap,
    io,
    net::{SocketAddr, ToSocketAddrs},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    sync::Barrier,
};

struct Opts {
    https: bool,
    host: String,
    addr: SocketAddr,
    path: String,
    conns: usize,
    duration: Option<Duration>,
    requests: Option<u64>,
    threads: usize,
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    insecure: bool,
    method: String,
    body: Option<Vec<u8>>,
    headers: Vec<String>,
    start_index: u64,
    timeout: Duration,
    /// Open loop: requests per second in total.
    rate: Option<f64>,
    /// Wall time (Unix seconds) to start the clock at.
    start_at: Option<f64>,
}

fn usage(msg: &str) -> ! {
    eprintln!("kubegate-loadgen: {msg}");
    eprintln!("usage: kubegate-loadgen --url URL [-c CONNS] [-d SECS] [-n TOTAL] [--threads T] [--ca F] [--cert F --key F] [--insecure] [--method M] [--body-file F] [--header 'K: V'] [--start-index N] [--timeout SECS] [--rate R] [--start-at UNIX_SECS]");
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let mut url = None;
    let (mut conns, mut duration, mut requests, mut threads) = (1usize, None, None, 1usize);
    let (mut ca, mut cert, mut key, mut insecure) = (None, None, None, false);
    let (mut method, mut body, mut headers, mut start_index) =
        ("GET".to_string(), None, Vec::new(), 0u64);
    let mut timeout = Duration::from_secs(10);
    let (mut rate, mut start_at) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--url" => url = Some(val()),
            "-c" | "--conns" => conns = val().parse().unwrap_or_else(|_| usage("bad -c")),
            "-d" | "--duration" => {
                duration = Some(Duration::from_secs_f64(
                    val().parse().unwrap_or_else(|_| usage("bad -d")),
                ))
            }
            "-n" | "--requests" => {
                requests = Some(val().parse().unwrap_or_else(|_| usage("bad -n")))
            }
            "-t" | "--threads" => threads = val().parse().unwrap_or_else(|_| usage("bad -t")),
            "--ca" => ca = Some(val()),
            "--cert" => cert = Some(val()),
            "--key" => key = Some(val()),
            "--insecure" => insecure = true,
            "--method" => method = val(),
            "--body-file" => {
                let f = val();
                body = Some(std::fs::read(&f).unwrap_or_else(|e| usage(&format!("{f}: {e}"))))
            }
            "--header" => headers.push(val()),
            "--start-index" => {
                start_index = val().parse().unwrap_or_else(|_| usage("bad --start-index"))
            }
            "--timeout" => {
                timeout = Duration::from_secs_f64(
                    val().parse().unwrap_or_else(|_| usage("bad --timeout")),
                )
            }
            "--rate" => {
                let r: f64 = val().parse().unwrap_or_else(|_| usage("bad --rate"));
                if !(r.is_finite() && r > 0.0) {
                    usage("--rate must be positive");
                }
                rate = Some(r)
            }
            "--start-at" => {
                start_at = Some(val().parse().unwrap_or_else(|_| usage("bad --start-at")))
            }
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let url = url.unwrap_or_else(|| usage("--url is required"));
    let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        usage("url must start with http:// or https://")
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:{}", if https { 443 } else { 80 })
    };
    let addr = with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| usage(&format!("cannot resolve {authority}")));
    if !addr.ip().is_loopback() {
        usage("only loopback targets are allowed");
    }
    let host = with_port
        .rsplit_once(':')
        .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']').to_string())
        .unwrap_or_default();
    // "{run}": a token unique to this process, substituted once
    let token = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    let path = path.replace("{run}", &token);
    let body = body.map(|b| {
        if find(&b, b"{run}").is_some() {
            String::from_utf8_lossy(&b)
                .replace("{run}", &token)
                .into_bytes()
        } else {
            b
        }
    });
    if duration.is_none() && requests.is_none() {
        duration = Some(Duration::from_secs(10));
    }
    if cert.is_some() != key.is_some() {
        usage("--cert and --key go together");
    }
    Opts {
        https,
        host,
        addr,
        path,
        conns: conns.max(1),
        duration,
        requests,
        threads: threads.max(1),
        ca,
        cert,
        key,
        insecure,
        method,
        body,
        headers,
        start_index,
        timeout,
        rate,
        start_at,
    }
}

#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config(o: &Opts) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = if o.insecure || o.ca.is_none() {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let ca = o.ca.as_deref().unwrap_or_default();
        for c in CertificateDer::pem_file_iter(ca).unwrap_or_else(|e| usage(&format!("{ca}: {e}")))
        {
            roots
                .add(c.unwrap_or_else(|e| usage(&format!("{ca}: {e}"))))
                .unwrap_or_else(|e| usage(&format!("{ca}: {e}")));
        }
        builder.with_root_certificates(roots)
    };
    let mut cfg = match (&o.cert, &o.key) {
        (Some(c), Some(k)) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(c)
                .unwrap_or_else(|e| usage(&format!("{c}: {e}")))
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| usage(&format!("{c}: {e}")));
            let key =
                PrivateKeyDer::from_pem_file(k).unwrap_or_else(|e| usage(&format!("{k}: {e}")));
            builder
                .with_client_auth_cert(certs, key)
                .unwrap_or_else(|e| usage(&format!("client cert: {e}")))
        }
        _ => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

struct Shared {
    opts: Opts,
    tls: Option<tokio_rustls::TlsConnector>,
    server_name: ServerName<'static>,
    next_index: AtomicU64,
    stop: AtomicBool,
    deadline: Mutex<Option<Instant>>,
    /// When the clock started (set before the connections are let go).
    start: Mutex<Option<Instant>>,
    proto: Mutex<String>,
}

#[derive(Default)]
struct ConnStats {
    lat_us: Vec<u32>,
    /// Latencies of the 2xx answers.
    ok_lat_us: Vec<u32>,
    /// Open loop: requests sent more than 10 ms after they were due.
    late: u64,
    errors: u64,
    status: BTreeMap<u16, u64>,
    bytes_in: u64,
    connect_us: u64,
    connected: bool,
    first_error: Option<String>,
}

async fn connect(sh: &Shared) -> io::Result<Box<dyn Io>> {
    let tcp = TcpStream::connect(sh.opts.addr).await?;
    tcp.set_nodelay(true)?;
    match &sh.tls {
        None => Ok(Box::new(tcp)),
        Some(c) => {
            let s = c.connect(sh.server_name.clone(), tcp).await?;
            {
                let mut p = sh.proto.lock().unwrap_or_else(|e| e.into_inner());
                if p.is_empty() {
                    let (_, conn) = s.get_ref();
                    *p = format!(
                        "proto={:?} cipher={:?} alpn={}",
                        conn.protocol_version()
                            .unwrap_or(rustls::ProtocolVersion::Unknown(0)),
                        conn.negotiated_cipher_suite().map(|c| c.suite()),
                        conn.alpn_protocol()
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .unwrap_or("-".into())
                    );
                }
            }
            Ok(Box::new(s))
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one HTTP/1.1 response. `buf` keeps bytes beyond this response (none in practice).
/// Returns (status, body bytes, server wants close).
async fn read_response(s: &mut Box<dyn Io>, buf: &mut Vec<u8>) -> io::Result<(u16, usize, bool)> {
    let eof = || {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-response",
        )
    };
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut tmp = [0u8; 16384];
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut tmp).await?;
        if n == 0 {
            return Err(eof());
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| bad("non-utf8 head"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let (mut clen, mut chunked, mut close) = (None, false, false);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let v = v.trim();
            if k.eq_ignore_ascii_case("content-length") {
                clen = v.parse::<usize>().ok();
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.to_ascii_lowercase().contains("chunked");
            } else if k.eq_ignore_ascii_case("connection") {
                close = v.eq_ignore_ascii_case("close");
            }
        }
    }
    buf.drain(..head_end);
    let mut body = 0usize;
    if chunked {
        loop {
            let line_end = loop {
                if let Some(i) = find(buf, b"\r\n") {
                    break i;
                }
                let n = s.read(&mut tmp).await?;
                if n == 0 {
                    return Err(eof());
                }
                buf.extend_from_slice(&tmp[..n]);
            };
            let size_s = std::str::from_utf8(&buf[..line_end]).map_err(|_| bad("chunk size"))?;
            let size = usize::from_str_radix(size_s.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| bad("chunk size"))?;
            buf.drain(..line_end + 2);
            if size == 0 {
                // trailers until an empty line
                loop {
                    if let Some(i) = find(buf, b"\r\n") {
                        buf.drain(..i + 2);
                        if i == 0 {
                            break;
                        }
                        continue;
                    }
                    let n = s.read(&mut tmp).await?;
                    if n == 0 {
                        return Err(eof());
                    }
                    buf.extend_from_slice(&tmp[..n]);
                }
                break;
            }
            while buf.len() < size + 2 {
                let n = s.read(&mut tmp).await?;
                if n == 0 {
                    return Err(eof());
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            buf.drain(..size + 2);
            body += size;
        }
    } else if let Some(len) = clen {
        while buf.len() < len {
            let n = s.read(&mut tmp).await?;
            if n == 0 {
                return Err(eof());
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        buf.drain(..len);
        body = len;
    } else if status != 204 && status != 304 {
        // read to EOF
        loop {
            let n = s.read(&mut tmp).await?;
            if n == 0 {
                break;
            }
            body += n;
        }
        close = true;
    }
    Ok((status, body, close))
}

fn build_request(o: &Opts, idx: u64, out: &mut Vec<u8>) {
    out.clear();
    let n = idx.to_string();
    let path = o.path.replace("{n}", &n);
    out.extend_from_slice(
        format!("{} {} HTTP/1.1\r\nHost: {}\r\n", o.method, path, o.host).as_bytes(),
    );
    let mut has_accept = false;
    let mut has_ct = false;
    for h in &o.headers {
        let lower = h.to_ascii_lowercase();
        has_accept |= lower.starts_with("accept:");
        has_ct |= lower.starts_with("content-type:");
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !has_accept {
        out.extend_from_slice(b"Accept: application/json\r\n");
    }
    match &o.body {
        Some(b) => {
            let body = if find(b, b"{n}").is_some() {
                String::from_utf8_lossy(b).replace("{n}", &n).into_bytes()
            } else {
                b.clone()
            };
            if !has_ct {
                out.extend_from_slice(b"Content-Type: application/json\r\n");
            }
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(&body);
        }
        None => out.extend_from_slice(b"\r\n"),
    }
}

fn claim(sh: &Shared) -> Option<u64> {
    if sh.stop.load(Ordering::Relaxed) {
        return None;
    }
    let i = sh.next_index.fetch_add(1, Ordering::Relaxed);
    if let Some(n) = sh.opts.requests {
        if i >= n {
            sh.stop.store(true, Ordering::Relaxed);
            return None;
        }
    }
    Some(i)
}

async fn run_conn(sh: Arc<Shared>, ready: Arc<Barrier>, go: Arc<Barrier>) -> ConnStats {
    let mut st = ConnStats::default();
    let t0 = Instant::now();
    let mut conn = match tokio::time::timeout(sh.opts.timeout, connect(&sh)).await {
        Ok(Ok(c)) => {
            st.connected = true;
            Some(c)
        }
        Ok(Err(e)) => {
            st.errors += 1;
            st.first_error = Some(format!("connect: {e}"));
            None
        }
        Err(_) => {
            st.errors += 1;
            st.first_error = Some("connect: timeout".into());
            None
        }
    };
    st.connect_us = t0.elapsed().as_micros() as u64;
    ready.wait().await;
    go.wait().await;
    let mut req = Vec::with_capacity(4096);
    let mut buf = Vec::with_capacity(32768);
    let mut reconnects = 0u32;
    let deadline = *sh.deadline.lock().unwrap_or_else(|e| e.into_inner());
    let run_start = *sh.start.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(d) = deadline {
            if Instant::now() >= d {
                break;
            }
        }
        let Some(idx) = claim(&sh) else { break };
        // Open loop: wait until the request is due; past the end, stop.
        let due = match (sh.opts.rate, run_start) {
            (Some(rate), Some(t0)) => {
                let due = t0 + Duration::from_secs_f64(idx as f64 / rate);
                if deadline.is_some_and(|d| due >= d) {
                    sh.stop.store(true, Ordering::Relaxed);
                    break;
                }
                tokio::time::sleep_until(due.into()).await;
                Some(due)
            }
            _ => None,
        };
        if conn.is_none() {
            if reconnects > 1000 {
                break;
            }
            reconnects += 1;
            buf.clear();
            match tokio::time::timeout(sh.opts.timeout, connect(&sh)).await {
                Ok(Ok(c)) => conn = Some(c),
                _ => {
                    st.errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some(s) = conn.as_mut() else { continue };
        build_request(&sh.opts, sh.opts.start_index + idx, &mut req);
        let sent = Instant::now();
        let start = due.unwrap_or(sent);
        if sent.saturating_duration_since(start) > Duration::from_millis(10) {
            st.late += 1;
        }
        let r = tokio::time::timeout(sh.opts.timeout, async {
            s.write_all(&req).await?;
            s.flush().await?;
            read_response(s, &mut buf).await
        })
        .await;
        let lat = start.elapsed();
        match r {
            Ok(Ok((status, body, close))) => {
                let us = lat.as_micros().min(u32::MAX as u128) as u32;
                st.lat_us.push(us);
                if (200..300).contains(&status) {
                    st.ok_lat_us.push(us);
                }
                *st.status.entry(status).or_default() += 1;
                st.bytes_in += body as u64;
                if close {
                    conn = None;
                }
            }
            Ok(Err(e)) => {
                st.errors += 1;
                st.first_error
                    .get_or_insert_with(|| format!("request: {e}"));
                conn = None;
            }
            Err(_) => {
                st.errors += 1;
                st.first_error
                    .get_or_insert_with(|| "request: timeout".into());
                conn = None;
            }
        }
    }
    if let Some(mut s) = conn {
        let _ = tokio::time::timeout(Duration::from_millis(200), s.shutdown()).await;
    }
    st
}

fn main() {
    let opts = parse_opts();
    let tls = opts
        .https
        .then(|| tokio_rustls::TlsConnector::from(tls_config(&opts)));
    let server_name =
        ServerName::try_from(opts.host.clone()).unwrap_or_else(|_| usage("bad host name"));
    let rt = if opts.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.threads)
            .enable_all()
            .build()
    }
    .expect("runtime");
    let conns = opts.conns;
    let duration = opts.duration;
    let sh = Arc::new(Shared {
        opts,
        tls,
        server_name,
        next_index: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        deadline: Mutex::new(None),
        start: Mutex::new(None),
        proto: Mutex::new(String::new()),
    });
    let rate = sh.opts.rate;
    let start_at = sh.opts.start_at;
    let (stats, elapsed) = rt.block_on(async {
        let ready = Arc::new(Barrier::new(conns + 1));
        let go = Arc::new(Barrier::new(conns + 1));
        let mut tasks = Vec::with_capacity(conns);
        for _ in 0..conns {
            tasks.push(tokio::spawn(run_conn(
                sh.clone(),
                ready.clone(),
                go.clone(),
            )));
        }
        // start the clock once every connection is up (TLS handshakes are not measured)
        ready.wait().await;
        if let Some(at) = start_at {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or_default();
            if at > now {
                tokio::time::sleep(Duration::from_secs_f64(at - now)).await;
            } else {
                eprintln!(
                    "kubegate-loadgen: --start-at is {:.3}s in the past, starting now",
                    now - at
                );
            }
        }
        let start = Instant::now();
        *sh.deadline.lock().unwrap_or_else(|e| e.into_inner()) = duration.map(|d| start + d);
        *sh.start.lock().unwrap_or_else(|e| e.into_inner()) = Some(start);
        go.wait().await;
        let mut out = Vec::with_capacity(conns);
        for t in tasks {
            out.push(t.await.expect("connection task"));
        }
        (out, start.elapsed())
    });
    let mut lat: Vec<u32> = Vec::new();
    let mut ok_lat: Vec<u32> = Vec::new();
    let mut late = 0u64;
    let (mut errors, mut bytes_in, mut connect_us, mut connected) = (0u64, 0u64, 0u64, 0usize);
    let mut status: BTreeMap<u16, u64> = BTreeMap::new();
    let mut first_error = None;
    for s in stats {
        lat.extend_from_slice(&s.lat_us);
        ok_lat.extend_from_slice(&s.ok_lat_us);
        late += s.late;
        errors += s.errors;
        bytes_in += s.bytes_in;
        connect_us = connect_us.max(s.connect_us);
        connected += s.connected as usize;
        for (k, v) in s.status {
            *status.entry(k).or_default() += v;
        }
        if first_error.is_none() {
            first_error = s.first_error;
        }
    }
    lat.sort_unstable();
    ok_lat.sort_unstable();
    let pct_of = |lat: &[u32], p: f64| -> u32 {
        if lat.is_empty() {
            0
        } else {
            lat[((p / 100.0 * lat.len() as f64) as usize).min(lat.len() - 1)]
        }
    };
    let pct = |p: f64| pct_of(&lat, p);
    let requests = lat.len() as u64;
    let non2xx: u64 = status
        .iter()
        .filter(|(k, _)| !(200..300).contains(*k))
        .map(|(_, v)| v)
        .sum();
    let status_s: Vec<String> = status.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    let dur_us = elapsed.as_micros().max(1);
    if let Some(e) = &first_error {
        eprintln!("kubegate-loadgen: first error: {e}");
    }
    let proto = sh.proto.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let ok = ok_lat.len() as u64;
    let r429 = status.get(&429).copied().unwrap_or(0);
    // Open loop: the requests due within the run, and those never sent.
    let (expected, unsent) = match (rate, duration) {
        (Some(r), Some(d)) => {
            let mut expected = (d.as_secs_f64() * r).ceil() as u64;
            if let Some(n) = sh.opts.requests {
                expected = expected.min(n);
            }
            let attempted = requests + errors;
            (expected, expected.saturating_sub(attempted))
        }
        (Some(_), None) => (sh.opts.requests.unwrap_or(0), 0),
        _ => (0, 0),
    };
    println!(
        "RESULT requests={requests} duration_us={dur_us} rps={:.1} p50_us={} p90_us={} p99_us={} p999_us={} max_us={} errors={errors} non2xx={non2xx} status={} bytes_in={bytes_in} conns={conns} connected={connected} connect_ms={:.1} {} ok={ok} r429={r429} ok_p50_us={} ok_p90_us={} ok_p99_us={} ok_max_us={} rate={} expected={expected} unsent={unsent} late={late}",
        requests as f64 * 1e6 / dur_us as f64,
        pct(50.0),
        pct(90.0),
        pct(99.0),
        pct(99.9),
        lat.last().copied().unwrap_or(0),
        if status_s.is_empty() { "-".to_string() } else { status_s.join(",") },
        connect_us as f64 / 1000.0,
        if proto.is_empty() { "proto=plain".to_string() } else { proto },
        pct_of(&ok_lat, 50.0),
        pct_of(&ok_lat, 90.0),
        pct_of(&ok_lat, 99.0),
        ok_lat.last().copied().unwrap_or(0),
        rate.unwrap_or(0.0),
    );
    if connected == 0 {
        std::process::exit(1);
    }
}

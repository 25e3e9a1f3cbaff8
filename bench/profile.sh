#!/usr/bin/env bash
# bench/profile.sh - where does the CPU go on the GET path? (diagnosis, not a benchmark)
#
# Sets up the same two targets as get.sh (kubegate with the ~1 KiB ConfigMap, nginx serving the
# same bytes over TLS), both pinned to SERVER_CPUS. For each target in PROFILE_TARGETS:
#   1. perf: drives GETs with the load generator (CONNS connections, pinned to LOADGEN_CPUS) and
#      samples the server with `perf record` (cpu-clock, PERF_FREQ Hz, DWARF call graphs) for
#      PROFILE_SECONDS. perf itself runs on LOADGEN_CPUS, so throughput during sampling is lower.
#   2. strace: counts the server's system calls per request (`strace -c -f`) over exactly
#      STRACE_REQUESTS requests (strace slows the server a lot; only the per-request counts are
#      meaningful; the CONNS handshakes are included but negligible).
# Output: $RESULTS/profile/<target>.{groups,flat,callers}.txt, <target>.perf.data,
#         <target>.syscalls.txt, kubegate-threads.txt, summary.txt
# Usage: bench/profile.sh      CONNS=32 PROFILE_SECONDS=6 PROFILE_TARGETS="kubegate" bench/profile.sh
#        PROFILE_REQ=create STRACE_REQUESTS=5000 bench/profile.sh     (creates instead of GETs)
# Needs perf and strace (Debian: apt-get install linux-perf strace).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-32}
PROFILE_SECONDS=${PROFILE_SECONDS:-6}      # (not SECONDS: bash reserves that name)
STRACE_REQUESTS=${STRACE_REQUESTS:-20000}
PERF_FREQ=${PERF_FREQ:-999}
CALL_GRAPH=${CALL_GRAPH:-dwarf,16384}       # "" for flat sampling only (much smaller perf.data)
PROFILE_REQ=${PROFILE_REQ:-get}             # get | create (POST of ~1 KiB ConfigMaps with unique names; kubegate only)
PROFILE_TARGETS=${PROFILE_TARGETS:-"kubegate nginx"}
[[ $PROFILE_REQ == create ]] && PROFILE_TARGETS=kubegate

need_tools perf strace
prepare_common
OUT=$RESULTS/profile
RUN=$WORK/run/profile
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
machine_info >"$OUT/meta.txt"
KG_PORT_WANT=17473 NGINX_PORT_WANT=17474 start_get_targets "$RUN" "$OUT"
: >"$OUT/summary.txt"
declare -A ARGS=()
for t in kubegate nginx; do ARGS[$t]="--url ${URL[$t]}"; done
if [[ $PROFILE_REQ == create ]]; then
  configmap_json "prof-{run}-{n}" 1024 >"$RUN/create.json"
  ARGS[kubegate]="--url https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps --method POST --body-file $RUN/create.json"
fi

bg_load() {  # target seconds outfile : load in the background (LOADGEN_PID)
  "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$CONNS" -t "$(loadgen_threads "$CONNS")" ${ARGS[$1]} -d "$2" \
    "${LG_TLS[@]}" >"$3" 2>&1 &
  LOADGEN_PID=$!
}
finish_load() { wait "$LOADGEN_PID" || true; LOADGEN_PID=; }

group_symbols() {  # perf report (no children, dso,symbol) on stdin -> share per area
  python3 -c '
import re, sys
groups = [("kernel: TCP/IP send+loopback receive (softirq)", r"^\[k\] .*(tcp|ip_|skb|net_rx|napi|netif|sock_def|inet|__dev_queue|softirq|loopback|dst_|nf_|kmem_cache|__kfree|kfree|__alloc_skb|copy_from_iter|copy_to_iter|_copy_)"),
          ("kernel: wakeups/scheduler/futex/epoll", r"^\[k\] .*(raw_spin|sched|task|futex|wake|ep_|epoll|schedule|switch|update_|enqueue|dequeue|select_task|ttwu|try_to_wake|hrtimer|rcu)"),
          ("kernel: getrandom", r"^\[k\] .*(random|crng|chacha)"),
          ("kernel: other", r"^\[k\]"),
          ("crypto (ring/openssl AES-GCM)", r"ring_core|aes|gcm|ghash|GFp|chacha|sha|libcrypto"),
          ("TLS library (rustls/libssl)", r"rustls|libssl"),
          ("malloc/free", r"malloc|free|realloc|_int_|arena|tcache|unlink_chunk|consolidate"),
          ("memcpy/memmove/memset", r"memcpy|memmove|memset|memcmp"),
          ("tokio/mio", r"tokio|mio::"), ("pingora", r"pingora"), ("http/httparse/bytes", r"httparse|http::|bytes::"),
          ("prometheus", r"prometheus"), ("uuid/rand", r"uuid|rand"), ("chrono/time/vdso", r"chrono|time::|vdso|clock_gettime"),
          ("serde/json", r"serde|json"), ("kubegate code", r"kubegate"), ("nginx", r"nginx|ngx_"), ("libc other", r"libc")]
tot = {}
for line in sys.stdin:
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
    if not m: continue
    pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
    text = ("[k] " if kind == "k" else "[u] ") + dso + " " + sym
    key = next((n for n, rx in groups if re.search(rx, text)), "other")
    tot[key] = tot.get(key, 0) + pct
for k, v in sorted(tot.items(), key=lambda x: -x[1]):
    print(f"{v:6.1f}%  {k}")
'
}

CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
for t in $PROFILE_TARGETS; do
  log "== $t: warm-up, then an unprofiled run for CPU us/request"
  run_loadgen "$RUN/warmup.out" "$CONNS" ${ARGS[$t]} -d 2 "${LG_TLS[@]}"
  measured_run "1,$t,$CONNS" "$OUT/$t.plain-load.txt" "$CONNS" "${PIDS[$t]}" ${ARGS[$t]} -d 5 "${LG_TLS[@]}"
  # ---- perf
  bg_load "$t" "$((PROFILE_SECONDS + 2))" "$OUT/$t.perf-load.txt"
  sleep 1
  cg=(); [[ -n $CALL_GRAPH ]] && cg=(--call-graph "$CALL_GRAPH")
  pids=${PIDS[$t]}
  [[ $t == nginx ]] && pids="$(children_of "$NGINX_PID" | tr '\n' ',')$NGINX_PID"
  "${LG_PIN[@]}" perf record -q -o "$OUT/$t.perf.data" -F "$PERF_FREQ" "${cg[@]}" -p "$pids" -- sleep "$PROFILE_SECONDS" >/dev/null 2>&1 &
  PERF_PID=$!; STARTED+=("$PERF_PID")
  wait "$PERF_PID" || true; forget_pid "$PERF_PID"
  finish_load
  log "$t under perf: $(grep -o 'requests=.*p99_us=[0-9]*' "$OUT/$t.perf-load.txt")"
  perf report -i "$OUT/$t.perf.data" --stdio --no-children --sort dso,symbol -g none 2>/dev/null |
    grep -v '^#' | grep -v '^$' | sed -E 's/ {3,}/  /g; s/ +-  +- *$//' >"$OUT/$t.flat.txt" || true
  group_symbols <"$OUT/$t.flat.txt" >"$OUT/$t.groups.txt"
  if [[ -n $CALL_GRAPH ]]; then
    perf report -i "$OUT/$t.perf.data" --stdio --children --sort symbol -g none --percent-limit 1 2>/dev/null |
      grep -v '^#' | grep -v '^$' | sed -E 's/ {3,}/  /g; s/ +-  +- *$//' >"$OUT/$t.callers.txt" || true
  fi
  # ---- strace: system calls per request (attach, exactly STRACE_REQUESTS requests, detach)
  spids=(); for p in ${pids//,/ }; do spids+=(-p "$p"); done
  strace -c -f -qq "${spids[@]}" -o "$OUT/$t.syscalls.raw" 2>/dev/null &
  STRACE_PID=$!; STARTED+=("$STRACE_PID")
  sleep 1
  run_loadgen "$OUT/$t.strace-load.txt" "$CONNS" ${ARGS[$t]} -n "$STRACE_REQUESTS" "${LG_TLS[@]}"
  stop_pid "$STRACE_PID" INT; forget_pid "$STRACE_PID"
  log "$t under strace: $(grep -o 'requests=.*p99_us=[0-9]*' "$OUT/$t.strace-load.txt")"
done
python3 - "$KG_PID" >"$OUT/kubegate-threads.txt" <<'PY'
import glob, os, sys
hz = os.sysconf("SC_CLK_TCK")
print("kubegate threads (CPU seconds since start, utime+stime):")
for t in sorted(glob.glob(f"/proc/{sys.argv[1]}/task/*")):
    st = open(t + "/stat").read()
    comm, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
    print(f"  {os.path.basename(t):>8} {comm:<18} {(int(rest[11]) + int(rest[12])) / hz:8.2f}")
PY
stop_kubegate

PROFILE_REQ=$PROFILE_REQ python3 - "$OUT" $PROFILE_TARGETS <<'EOF' | tee "$OUT/summary.txt"
import csv, os, re, sys
out, targets = sys.argv[1], sys.argv[2:]
usreq = {r["target"]: (float(r["server_us_per_req"]), float(r["rps"])) for r in csv.DictReader(open(f"{out}/runs.csv"))}
print(f"CPU profile of the server during {os.environ.get('PROFILE_REQ', 'get').upper()} load (perf cpu-clock samples of the server process)")
print("us/req = share x server CPU us/request measured in an unprofiled run just before")
for t in targets:
    us, rps = usreq.get(t, (0.0, 0.0))
    print(f"\n== {t}: unprofiled {rps:.0f} req/s, {us:.1f} server CPU us/request; under perf: " + open(f"{out}/{t}.perf-load.txt").read().split("RESULT ")[-1].split(" p90_us")[0])
    for line in open(f"{out}/{t}.groups.txt").read().splitlines():
        pct, name = line.split("%", 1)
        print(f"  {float(pct):5.1f}%  {float(pct) * us / 100:5.1f} us/req {name.strip()}")
    if os.path.exists(f"{out}/{t}.callers.txt") and t == "kubegate":
        incl = {}
        for line in open(f"{out}/{t}.callers.txt"):
            m = re.match(r"\s*([\d.]+)%\s+[\d.]+%\s+\[.\]\s+(.*)", line)
            if m: incl.setdefault(m.group(2).strip(), float(m.group(1)))
        def find(rx):
            return max((v for k, v in incl.items() if re.search(rx, k)), default=0.0)
        phases = [("read+parse request (TLS decrypt, recvfrom)", r"HttpSession::read_request::\{\{closure"),
                  ("kubegate Gateway::handle (pipeline+route+registry)", r"^kubegate::pipeline::Gateway::handle::\{\{closure"),
                  ("  request_info::resolve", r"request_info::resolve$"),
                  ("  Registry::dispatch (GET from watch cache)", r"Registry::dispatch::\{\{closure"),
                  ("  negotiate_output (Accept parsing)", r"negotiate_output$"),
                  ("  RequestInfo::clone", r"RequestInfo as core::clone::Clone>::clone"),
                  ("  respond::base_header", r"respond::base_header$"),
                  ("new_ctx (Audit-Id: uuid v4 = getrandom syscall)", r"ProxyHttp>::new_ctx$"),
                  ("logging phase (metrics observe)", r"ProxyHttp>::logging::\{\{closure"),
                  ("write_response_header (pingora)", r"^pingora_proxy::Session::write_response_header::\{\{closure"),
                  ("write_response_body + flush (TLS encrypt, sendto, loopback)", r"^pingora_proxy::Session::write_response_body::\{\{closure"),
                  ("per-request Box::pin of process_new_http future", r"^pin<pingora_proxy::\{impl#24\}::process_new_http"),
                  ("memmove (all callers)", r"__memmove_avx512_unaligned_erms$")]
        print("  phases (inclusive, overlapping):")
        for name, rx in phases:
            v = find(rx)
            print(f"  {v:5.1f}%  {v * us / 100:5.1f} us/req {name}")
    print("  top symbols:")
    for line in open(f"{out}/{t}.flat.txt").read().splitlines()[:12]:
        print("   " + line.strip()[:150])
print("\nSystem calls per request (strace -c -f over a fixed number of requests)")
for t in targets:
    n = int(re.search(r"requests=(\d+)", open(f"{out}/{t}.strace-load.txt").read()).group(1))
    raw = f"{out}/{t}.syscalls.raw"
    if not os.path.exists(raw): continue
    calls = {}
    for line in open(raw):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            try: calls[f[-1]] = int(f[3])
            except ValueError: pass
    top = sorted(calls.items(), key=lambda x: -x[1])[:8]
    print(f"  {t:<9} ({n} requests) total {sum(calls.values()) / n:.2f}/req: " + ", ".join(f"{k} {v / n:.2f}" for k, v in top))
EOF
cat "$OUT/kubegate-threads.txt" 2>/dev/null || true
log "done -> $OUT"

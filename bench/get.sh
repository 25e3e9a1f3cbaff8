#!/usr/bin/env bash
# bench/get.sh - benchmark 1: GET of one ~1 KiB ConfigMap over TLS with keep-alive,
# kubegate vs nginx serving the same JSON bytes as a static file over TLS, in the same run.
#
# Both servers are started here, pinned to SERVER_CPUS (nginx: 1 worker); the load generator
# (bench/loadgen: HTTP/1.1 keep-alive over TLS, presenting kubegate's admin client cert to both)
# runs pinned to LOADGEN_CPUS. Rounds are interleaved (kubegate nginx, nginx kubegate, ...) so
# drift hits both alike. nginx uses kubegate's serving certificate and also verifies the client
# certificate against kubegate's CA, so both sides do the same TLS work.
#
# Usage: bench/get.sh                      (settings are env vars)
#   CONNS="1 32 64" ROUNDS=3 DURATION=10 WARMUP=3 bench/get.sh
#   SIDE_BY_SIDE=1 CONNS=32 ROUNDS=8 DURATION=5 bench/get.sh    (both servers loaded at once)
# Output: $RESULTS/get/summary.txt, runs.csv, discarded.csv, raw loadgen output per run.
# Targets to compare against (reported, not asserted): kubegate >= 0.7x nginx's requests/s and
# <= 1.5x its CPU per request.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-"1 32 64"}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
CM_BYTES=${CM_BYTES:-1024}                  # size of the GET response body to aim for
TARGETS=${TARGETS:-"kubegate nginx"}
# 1: each round loads kubegate and nginx at the same time, each with its own load generator of
# c connections (bench/lib.sh measured_pair): both meet the same machine state and share the
# server CPU, so the requests/s ratio is the cost ratio. Meaningful where the server CPU is
# saturated (c=32, 64), not at c=1. 0: one after the other, alternating the order.
SIDE_BY_SIDE=${SIDE_BY_SIDE:-0}

need_tools nginx kubectl
prepare_common
OUT=$RESULTS/get
RUN=$WORK/run/get
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"

start_get_targets "$RUN" "$OUT"

# optional diagnostic target: a second kubegate with jemalloc preloaded instead of glibc malloc
# (same certificates, same object), to measure what the allocator costs. TARGETS="kubegate kubegate-jemalloc nginx"
if [[ " $TARGETS " == *" kubegate-jemalloc "* ]]; then
  JEMALLOC=${JEMALLOC:-$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -1)}
  [[ -f $JEMALLOC ]] || die "libjemalloc.so.2 not found (apt-get install libjemalloc2)"
  saved=("$KG_PID" "$KG_DIR" "$KG_PORT")
  KG_ENV=(LD_PRELOAD="$JEMALLOC" ${KG_ENV[@]+"${KG_ENV[@]}"})
  start_kubegate "$RUN/kubegate-jemalloc-data" "$(free_port 17445)" \
    --tls-cert-file "$PKI/serving.crt" --tls-private-key-file "$PKI/serving.key" --client-ca-file "$PKI/ca.crt"
  read -r -a KG_ENV <<<"$KUBEGATE_ENV"
  grep -q jemalloc "/proc/$KG_PID/maps" || die "jemalloc not mapped into kubegate-jemalloc"
  KG_DIR=${saved[1]}   # kg_curl: the first instance's PKI (shared certificates), the new port
  kg_curl /api/v1/namespaces/default/configmaps -X POST -H 'Content-Type: application/json' \
    --data-binary @"$RUN/cm.json" -o /dev/null
  URL[kubegate-jemalloc]=https://127.0.0.1:$KG_PORT$CM_PATH
  PIDS[kubegate-jemalloc]=$KG_PID
  log "target kubegate-jemalloc = ${URL[kubegate-jemalloc]} (LD_PRELOAD=$JEMALLOC) -> $(kg_curl "$CM_PATH" -o /dev/null -w '%{http_code} %{size_download}B')"
  KG_PID=${saved[0]}; KG_DIR=${saved[1]}; KG_PORT=${saved[2]}
fi
{
  echo "kubegate_pid=$KG_PID nginx_pid=$NGINX_PID body_bytes=$GET_BODY_BYTES"
  echo "CONNS='$CONNS' ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP TARGETS='$TARGETS' SIDE_BY_SIDE=$SIDE_BY_SIDE"
  echo "QUIET_MAX=$QUIET_MAX QUIET_WAIT=$QUIET_WAIT FOREIGN_MAX=$FOREIGN_MAX RETRIES=$RETRIES"
} >>"$OUT/meta.txt"
log "results -> $OUT"

# ----------------------------------------------------------------------------- runs
read -r -a TL <<<"$TARGETS"
[[ $SIDE_BY_SIDE != 1 || ${#TL[@]} == 2 ]] || die "SIDE_BY_SIDE=1 compares exactly two TARGETS"
for c in $CONNS; do
  for t in "${TL[@]}"; do
    (( WARMUP > 0 )) && { log "warm-up $t c=$c ${WARMUP}s"; run_loadgen "$RUN/warmup.out" "$c" --url "${URL[$t]}" -d "$WARMUP" "${LG_TLS[@]}"; }
  done
  for ((r = 1; r <= ROUNDS; r++)); do
    order=("${TL[@]}")
    if (( r % 2 == 0 )); then order=(); for ((i = ${#TL[@]} - 1; i >= 0; i--)); do order+=("${TL[i]}"); done; fi
    if [[ $SIDE_BY_SIDE == 1 ]]; then
      for t in "${order[@]}"; do printf '%s\n' --url "${URL[$t]}" "${LG_TLS[@]}" >"$RUN/args-$t"; done
      measured_pair "$r" "$c" "$DURATION" \
        "${order[0]}" "${PIDS[${order[0]}]}" "$OUT/${order[0]}.c$c.r$r.txt" "$RUN/args-${order[0]}" \
        "${order[1]}" "${PIDS[${order[1]}]}" "$OUT/${order[1]}.c$c.r$r.txt" "$RUN/args-${order[1]}"
      continue
    fi
    for t in "${order[@]}"; do
      measured_run "$r,$t,$c" "$OUT/$t.c$c.r$r.txt" "$c" "${PIDS[$t]}" --url "${URL[$t]}" -d "$DURATION" "${LG_TLS[@]}"
    done
  done
done
grep -h -o 'proto=.*' "$OUT"/kubegate.c*.r1.txt | sort -u | sed 's/^/kubegate tls: /' >>"$OUT/meta.txt" || true
grep -h -o 'proto=.*' "$OUT"/nginx.c*.r1.txt | sort -u | sed 's/^/nginx tls: /' >>"$OUT/meta.txt" || true

# ----------------------------------------------------------------------------- summary
python3 - "$CSV" "$FOREIGN_MAX" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
FOREIGN_MAX = float(sys.argv[2])
med = st.median
by = {}
for r in rows:
    by.setdefault((r["target"], int(r["conns"])), {})[int(r["round"])] = r
print()
print("GET one ~1 KiB ConfigMap, HTTP/1.1 keep-alive over TLS (client cert), same load generator for both targets")
print("rps/p50/p99/CPU = median over rounds; ratios = median of per-round paired ratios kubegate/nginx")
print("srv us/req = server CPU (utime+stime from /proc) per request; cpu% = % of one core (srv / loadgen / foreign)")
print("segs/req = TCP segments sent on the machine per request (request + response + ACKs, both directions)")
hdr = f"{'target':<18}{'c':>4}{'rps':>9}{'spread':>8}{'p50 us':>8}{'p99 us':>8}{'srv us/req':>11}{'segs/req':>9}   {'cpu% srv/lg/fg':<16}{'rps/nginx':>10}{'cpu/nginx':>10}{'p50/nginx':>10}"
for c in sorted({k[1] for k in by}):
    print(); print(hdr); print("-" * len(hdr))
    for t in ("kubegate", "kubegate-jemalloc", "nginx"):
        runs = by.get((t, c))
        if not runs: continue
        f = lambda k: [float(r[k]) for r in runs.values()]
        rps = f("rps")
        spread = (max(rps) - min(rps)) / med(rps) * 100
        cpu = "/".join(f"{med(f(k)):.0f}" for k in ("cpu_server_pct", "cpu_loadgen_pct", "cpu_foreign_pct"))
        line = f"{t:<18}{c:>4}{med(rps):>9.0f}{spread:>7.1f}%{med(f('p50_us')):>8.0f}{med(f('p99_us')):>8.0f}{med(f('server_us_per_req')):>11.1f}{med(f('tcp_segs_per_req')):>9.2f}   {cpu:<16}"
        base = by.get(("nginx", c), {})
        if t != "nginx" and base:
            def paired(k):
                v = [float(runs[i][k]) / float(base[i][k]) for i in runs if i in base and float(base[i][k])]
                return med(v) if v else float("nan")
            line += f"{paired('rps'):>10.3f}{paired('server_us_per_req'):>10.2f}{paired('p50_us'):>10.2f}"
        flags = []
        if any(int(r["errors"]) + int(r["non2xx"]) for r in runs.values()): flags.append("ERRORS")
        if any(r["quiet"] == "0" or float(r["cpu_foreign_pct"]) > FOREIGN_MAX for r in runs.values()): flags.append("NOISY")
        print(line + ("  " + ",".join(flags) if flags else ""))
print()
print("targets (not asserted): kubegate rps/nginx >= 0.70, cpu/nginx <= 1.50")
EOF
log "done; raw runs in $CSV"

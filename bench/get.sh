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
# Output: $RESULTS/get/summary.txt, runs.csv, discarded.csv, raw loadgen output per run.
# Targets to compare against (reported, not asserted): kubegate >= 0.7x nginx's requests/s and
# <= 1.5x its CPU per request.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-"1 32 64"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
CM_BYTES=${CM_BYTES:-1024}                  # size of the GET response body to aim for
KG_PORT_WANT=${KG_PORT_WANT:-17443}
NGINX_PORT_WANT=${NGINX_PORT_WANT:-17444}
TARGETS=${TARGETS:-"kubegate nginx"}

need_tools nginx kubectl
prepare_common
OUT=$RESULTS/get
RUN=$WORK/run/get
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"

# ----------------------------------------------------------------------------- kubegate + object
start_kubegate "$RUN/kubegate-data" "$(free_port "$KG_PORT_WANT")"
PKI=$KG_DIR/pki
export KUBECONFIG=$KG_DIR/admin.kubeconfig
CM_PATH=/api/v1/namespaces/default/configmaps/bench-get
pad=$CM_BYTES
configmap_json bench-get "$pad" >"$RUN/cm.json"
kubectl create -f "$RUN/cm.json" >/dev/null
size=$(kg_curl "$CM_PATH" -o "$RUN/body.json" -w '%{size_download}')
# adjust the padding once so the served JSON is ~CM_BYTES (kube adds uid, resourceVersion, ...)
if (( size != CM_BYTES )); then
  pad=$(( pad + CM_BYTES - size ))
  kubectl delete -f "$RUN/cm.json" --wait=false >/dev/null
  configmap_json bench-get "$pad" >"$RUN/cm.json"
  kubectl create -f "$RUN/cm.json" >/dev/null
  size=$(kg_curl "$CM_PATH" -o "$RUN/body.json" -w '%{size_download}')
fi
log "created ConfigMap default/bench-get with kubectl; GET body = $size bytes"
kg_curl "$CM_PATH" -o /dev/null -D "$OUT/kubegate.headers"

# ----------------------------------------------------------------------------- nginx (reference)
NGINX_PORT=$(free_port "$NGINX_PORT_WANT")
mkdir -p "$RUN/nginx/tmp" "$RUN/static"
cp "$RUN/body.json" "$RUN/static/cm.json"
chmod -R a+rX "$RUN/static"
cat >"$RUN/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $RUN/nginx/nginx.pid;
error_log $RUN/nginx/error.log warn;
events { worker_connections 8192; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $RUN/nginx/tmp/body;  proxy_temp_path $RUN/nginx/tmp/proxy;
  fastcgi_temp_path $RUN/nginx/tmp/fastcgi;   uwsgi_temp_path $RUN/nginx/tmp/uwsgi;  scgi_temp_path $RUN/nginx/tmp/scgi;
  keepalive_requests 1000000;   # do not recycle client connections mid-run (default 1000)
  keepalive_timeout 75s;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_certificate     $PKI/serving.crt;
  ssl_certificate_key $PKI/serving.key;
  ssl_client_certificate $PKI/ca.crt;
  ssl_verify_client on;
  ssl_session_cache shared:SSL:10m;
  open_file_cache max=16 inactive=600s; open_file_cache_valid 600s;
  sendfile on; tcp_nodelay on;
  server {
    listen 127.0.0.1:$NGINX_PORT ssl backlog=4096;
    root $RUN/static;
    location / { default_type application/json; try_files /cm.json =500; }
  }
}
EOF
nginx -t -q -p "$RUN/nginx" -e "$RUN/nginx/error.log" -c "$RUN/nginx/nginx.conf" || die "nginx config invalid"
"${SRV_PIN[@]}" nginx -p "$RUN/nginx" -e "$RUN/nginx/error.log" -c "$RUN/nginx/nginx.conf" -g 'daemon off;' &
NGINX_PID=$!
STARTED+=("$NGINX_PID")
for ((i = 0; i < 100; i++)); do port_busy "$NGINX_PORT" && break; sleep 0.1; done
log "started nginx pid $NGINX_PID on https://127.0.0.1:$NGINX_PORT (1 worker, TLS, client cert required)"

declare -A URL=([kubegate]=https://127.0.0.1:$KG_PORT$CM_PATH [nginx]=https://127.0.0.1:$NGINX_PORT$CM_PATH)
declare -A PIDS=([kubegate]=$KG_PID [nginx]=$NGINX_PID)
LG_TLS=(--ca "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
for t in $TARGETS; do
  info=$(curl -sS -o "$RUN/check.$t" -w '%{http_code} %{size_download}B http%{http_version}' --http1.1 \
    --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "${URL[$t]}")
  cmp -s "$RUN/check.$t" "$RUN/body.json" || log "note: $t body differs from kubegate's first answer"
  log "target $t = ${URL[$t]} -> $info"
done
curl -sS -o /dev/null -D "$OUT/nginx.headers" --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "${URL[nginx]}"
{
  echo "kubegate_pid=$KG_PID nginx_pid=$NGINX_PID body_bytes=$size"
  echo "CONNS='$CONNS' ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP TARGETS='$TARGETS'"
  echo "QUIET_MAX=$QUIET_MAX QUIET_WAIT=$QUIET_WAIT FOREIGN_MAX=$FOREIGN_MAX RETRIES=$RETRIES"
} >>"$OUT/meta.txt"
log "results -> $OUT"

# ----------------------------------------------------------------------------- runs
read -r -a TL <<<"$TARGETS"
for c in $CONNS; do
  for t in "${TL[@]}"; do
    (( WARMUP > 0 )) && { log "warm-up $t c=$c ${WARMUP}s"; run_loadgen "$RUN/warmup.out" "$c" --url "${URL[$t]}" -d "$WARMUP" "${LG_TLS[@]}"; }
  done
  for ((r = 1; r <= ROUNDS; r++)); do
    order=("${TL[@]}")
    if (( r % 2 == 0 )); then order=(); for ((i = ${#TL[@]} - 1; i >= 0; i--)); do order+=("${TL[i]}"); done; fi
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
hdr = f"{'target':<10}{'c':>4}{'rps':>9}{'spread':>8}{'p50 us':>8}{'p99 us':>8}{'srv us/req':>11}   {'cpu% srv/lg/fg':<16}{'rps/nginx':>10}{'cpu/nginx':>10}{'p50/nginx':>10}"
for c in sorted({k[1] for k in by}):
    print(); print(hdr); print("-" * len(hdr))
    for t in ("kubegate", "nginx"):
        runs = by.get((t, c))
        if not runs: continue
        f = lambda k: [float(r[k]) for r in runs.values()]
        rps = f("rps")
        spread = (max(rps) - min(rps)) / med(rps) * 100
        cpu = "/".join(f"{med(f(k)):.0f}" for k in ("cpu_server_pct", "cpu_loadgen_pct", "cpu_foreign_pct"))
        line = f"{t:<10}{c:>4}{med(rps):>9.0f}{spread:>7.1f}%{med(f('p50_us')):>8.0f}{med(f('p99_us')):>8.0f}{med(f('server_us_per_req')):>11.1f}   {cpu:<16}"
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

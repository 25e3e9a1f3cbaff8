#!/usr/bin/env bash
# bench/nginx-tls-upstream.sh - reference: what nginx's proxying costs when its upstream hop is
# TLS too, as kubegate's (and kube-aggregator's) always is. The reference harness's own nginx
# (target nginx_tls) proxies to the backend's plaintext port; this runs the same harness with a
# second nginx as its extra target, TLS front and TLS upstream (keep-alive, session reuse, no
# certificate check), against the same backend in the same interleaved rounds, so that
# nginx_tls_upstream / nginx_tls tells how much of bench/proxy.sh's kubegate-vs-nginx gap is
# the upstream TLS alone.
#
# Usage: bench/nginx-tls-upstream.sh            (CONNS="1 64" ROUNDS=3 DURATION=10 WARMUP=3)
# Output: $RESULTS/nginx-tls-upstream/harness/summary.txt (the harness's table), nginx.conf.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HARNESS=${HARNESS:-$(cd "$REPO_DIR/.." && pwd)/shared/bench/proxy_overhead.sh}
PERFBASE=${PERFBASE:-$WORK/perfbase}        # the harness's WORK (as bench/proxy.sh's)
CONNS=${CONNS:-"1 64"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
TOOL=${TOOL:-wrk}
BACKEND_TLS_PORT=${BACKEND_TLS_PORT:-18443}
PROXY_PORT=${PROXY_PORT:-18446}
REQ_PATH=/apis/bench.example.com/v1/namespaces/default/widgets/x

need_tools nginx "$TOOL"
[[ -x $HARNESS ]] || die "reference harness not found at $HARNESS (set HARNESS=)"
port_busy "$PROXY_PORT" && die "port $PROXY_PORT is in use"
OUT=$RESULTS/nginx-tls-upstream
DIR=$WORK/run/nginx-tls-upstream
rm -rf "$DIR"; mkdir -p "$OUT" "$DIR/tmp"
# The harness makes its certificate on its first run; this nginx presents the same one.
TLS_DIR=$PERFBASE/tls
cat >"$DIR/nginx.conf" <<EOF
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/error.log warn;
events { worker_connections 8192; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $DIR/tmp/body;  proxy_temp_path $DIR/tmp/proxy;
  fastcgi_temp_path $DIR/tmp/fastcgi;   uwsgi_temp_path $DIR/tmp/uwsgi;  scgi_temp_path $DIR/tmp/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_certificate     $TLS_DIR/cert.pem;
  ssl_certificate_key $TLS_DIR/key.pem;
  upstream backend_tls {
    server 127.0.0.1:$BACKEND_TLS_PORT;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$PROXY_PORT ssl http2 backlog=4096;
    location / {
      proxy_pass https://backend_tls;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_ssl_session_reuse on;
      proxy_ssl_server_name off;
    }
  }
}
EOF
cp "$DIR/nginx.conf" "$OUT/nginx.conf"
machine_info >"$OUT/meta.txt"
echo "command: CONNS='$CONNS' ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP bench/nginx-tls-upstream.sh" >>"$OUT/meta.txt"
log "running the reference harness with nginx (TLS upstream) as its extra target"
env WORK="$PERFBASE" RESULTS="$OUT/harness" TOOL="$TOOL" CONNS="$CONNS" ROUNDS="$ROUNDS" \
  DURATION="$DURATION" WARMUP="$WARMUP" TARGETS="direct_tls nginx_tls" REQ_PATH="$REQ_PATH" \
  BACKEND_TLS_PORT="$BACKEND_TLS_PORT" \
  EXTRA_NAME=nginx_tls_upstream EXTRA_URL="https://127.0.0.1:$PROXY_PORT$REQ_PATH" \
  EXTRA_CMD="nginx -p $DIR -e $DIR/error.log -c $DIR/nginx.conf -g 'daemon off;'" \
  "$HARNESS" >"$OUT/harness.out" 2>"$OUT/harness.log"
cat "$OUT/harness/summary.txt"

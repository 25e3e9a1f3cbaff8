#!/usr/bin/env bash
# bench/proxy-instructions.sh - diagnosis: user-space instructions per proxied GET under
# valgrind's callgrind, for one or more kubegate builds, a count that does not move with the
# VM's speed (bench/proxy.sh's timings drift by +-20 % between runs here).
#
# The request is bench/proxy.sh's: a GET of /apis/bench.example.com/v1/namespaces/default/
# widgets/x with a cached ServiceAccount token, RBAC, APF, proxied to the harness's hyper
# backend over TLS (HTTP/2 offered and taken). It reuses what bench/proxy.sh leaves behind:
# run that once first (it creates the ServiceAccount, RBAC and APIService in
# $WORK/run/proxy/kubegate-data and builds the backend and its certificate under $PERFBASE).
# For each binary in KUBEGATE_BINS: a copy of that data dir, the backend on
# $BACKEND_TLS_PORT, kubegate under callgrind; WARM unmeasured GETs, counters zeroed, N GETs
# (c=4), counters dumped: instructions / N.
# Caveats as bench/instructions.sh: user space only; SHA-256 of the token runs valgrind's
# portable code (~40,000 instructions that take ~0.4 us for real with SHA-NI).
#
# Usage: bench/proxy.sh && bench/proxy-instructions.sh
#   KUBEGATE_BINS="/tmp/kg-before /tmp/kg-after" N=2000 bench/proxy-instructions.sh
# Output: $RESULTS/proxy-instructions/summary.txt, callgrind.<n> (callgrind_annotate input).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBEGATE_BINS=${KUBEGATE_BINS:-$KUBEGATE_BIN}
N=${N:-2000}
WARM=${WARM:-300}
PERFBASE=${PERFBASE:-$WORK/perfbase}
BACKEND_TLS_PORT=${BACKEND_TLS_PORT:-18443}
SETUP=$WORK/run/proxy/kubegate-data
BACKEND_BIN=$PERFBASE/backend/target/release/perf-backend
URL_PATH=/apis/bench.example.com/v1/namespaces/default/widgets/x

need_tools valgrind callgrind_control kubectl curl
[[ -d $SETUP && -x $BACKEND_BIN && -s $PERFBASE/tls/cert.pem ]] ||
  die "run bench/proxy.sh first: it leaves $SETUP and $BACKEND_BIN behind"
port_busy "$BACKEND_TLS_PORT" && die "port $BACKEND_TLS_PORT is in use"
mkdir -p "$WORK" "$RESULTS"
build_loadgen
OUT=$RESULTS/proxy-instructions
RUN=$WORK/run/proxy-instructions
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
machine_info >"$OUT/meta.txt"

"${SRV_PIN[@]}" "$BACKEND_BIN" --https "127.0.0.1:$BACKEND_TLS_PORT" \
  --http "127.0.0.1:$(free_port 18442)" --cert "$PERFBASE/tls/cert.pem" \
  --key "$PERFBASE/tls/key.pem" --threads 1 >"$RUN/backend.log" 2>&1 &
STARTED+=("$!")

: >"$RUN/results"
i=0
for bin in $KUBEGATE_BINS; do
  i=$((i + 1))
  [[ -x $bin ]] || die "not an executable: $bin"
  dir=$RUN/kubegate-$i
  cp -a "$SETUP" "$dir"
  port=$(free_port $((17600 + i)))
  "${SRV_PIN[@]}" valgrind --tool=callgrind --callgrind-out-file="$RUN/callgrind.$i.%p" \
    "$bin" serve --data-dir "$dir" --secure-port "$port" --bind-address 127.0.0.1 >"$dir.log" 2>&1 &
  pid=$!; STARTED+=("$pid")
  for ((t = 0; t < 600; t++)); do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir.log" >&2; die "kubegate under valgrind exited"; }
    [[ $(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 "https://127.0.0.1:$port/readyz" || true) == 200 ]] && break
    sleep 0.5
  done
  kubeconfig=$RUN/kubeconfig-$i
  sed "s#server: https://127.0.0.1:[0-9]*#server: https://127.0.0.1:$port#" "$dir/admin.kubeconfig" >"$kubeconfig"
  token=$(kubectl --kubeconfig "$kubeconfig" create token bench-proxy --duration 1h)
  url=https://127.0.0.1:$port$URL_PATH
  # The availability controller probes the backend first; until then the GET is a 503.
  for ((t = 0; t < 240; t++)); do
    [[ $(curl -s --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $token" -o /dev/null \
      -w '%{http_code}' --max-time 5 "$url" || true) == 200 ]] && break
    sleep 0.5
  done
  args=(--url "$url" --ca "$dir/pki/ca.crt" --header "Authorization: Bearer $token")
  run_loadgen "$RUN/warm.$i.out" 4 "${args[@]}" -n "$WARM"
  callgrind_control -z "$pid" >/dev/null
  run_loadgen "$OUT/load.$i.txt" 4 "${args[@]}" -n "$N"
  [[ $(result_field "$OUT/load.$i.txt" ok) == "$N" ]] ||
    die "$bin: not every GET answered 200 ($(result_field "$OUT/load.$i.txt" status))"
  before=$(ls "$RUN"/callgrind."$i".* 2>/dev/null | wc -l)
  callgrind_control -d "$pid" >/dev/null
  for ((t = 0; t < 100; t++)); do
    (( $(ls "$RUN"/callgrind."$i".* | wc -l) > before )) && break
    sleep 0.2
  done
  dump=$(ls -t "$RUN"/callgrind."$i".*.* | head -1)
  cp "$dump" "$OUT/callgrind.$i"
  total=$(sed -n 's/^summary: //p' "$dump")
  echo "$i $bin $total" >>"$RUN/results"
  log "$bin: $(( total / N )) instructions per proxied GET"
  stop_pid "$pid" TERM; forget_pid "$pid"
done

python3 - "$RUN/results" "$N" <<'EOF' | tee "$OUT/summary.txt"
import sys
rows = [line.split() for line in open(sys.argv[1])]
n = int(sys.argv[2])
print(f"user-space instructions per proxied GET (callgrind, {n} GETs, c=4, cached SA token, RBAC, APF)")
first = None
for i, binary, total in rows:
    per = int(total) / n
    first = first or per
    print(f"{i:>3} {per:>12,.0f} {per / first:>7.3f}x  {binary}")
EOF
log "done"

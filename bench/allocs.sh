#!/usr/bin/env bash
# bench/allocs.sh - heap allocations per GET request, kubegate vs nginx (diagnosis, not a benchmark)
#
# Starts the same targets as get.sh with bench/tools/mallocstat.so preloaded (it counts
# malloc/calloc/realloc/memalign calls and requested bytes by size), drives exactly REQUESTS
# GETs at CONNS connections, and divides the counter deltas by the number of requests.
# With BACKTRACE=1 (needs gdb), it then attaches gdb to kubegate once per allocation size over
# 4 KiB that happens at least once per request, breaks on malloc of exactly that size, sends one
# request and records the backtrace (kubegate is stopped while gdb holds it; detached after).
# Output: $RESULTS/allocs/summary.txt (+ backtrace.<size>.txt)
# Usage: bench/allocs.sh        REQUESTS=200000 CONNS=32 BACKTRACE=1 bench/allocs.sh    (needs gcc)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS=${REQUESTS:-100000}
BACKTRACE=${BACKTRACE:-0}
CONNS=${CONNS:-32}
need_tools gcc
prepare_common
OUT=$RESULTS/allocs
RUN=$WORK/run/allocs
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
SO=$WORK/mallocstat.so
if [[ ! -f $SO || $BENCH_DIR/tools/mallocstat.c -nt $SO ]]; then
  gcc -O2 -Wall -shared -fPIC -o "$SO" "$BENCH_DIR/tools/mallocstat.c" -lpthread || die "building mallocstat.so failed"
fi
export MALLOCSTAT_INTERVAL_MS=100
mkdir -p "$RUN/stats"; chmod 777 "$RUN/stats"   # nginx workers write theirs after dropping root (no sticky bit: they replace a file root created)
KG_ENV=(LD_PRELOAD="$SO" MALLOCSTAT_FILE="$RUN/stats/kubegate")
NGINX_ENV=(LD_PRELOAD="$SO" MALLOCSTAT_FILE="$RUN/stats/nginx")
KG_PORT_WANT=17483 NGINX_PORT_WANT=17484 start_get_targets "$RUN" "$OUT"

stats_file() {  # target -> file with that server's counters (nginx: its worker's)
  if [[ $1 == nginx ]]; then
    local w; w=$(children_of "$NGINX_PID" | head -1)
    echo "$RUN/stats/nginx.$w"
  else
    echo "$RUN/stats/kubegate"
  fi
}

for t in kubegate nginx; do
  run_loadgen "$RUN/warmup.out" "$CONNS" --url "${URL[$t]}" -d 2 "${LG_TLS[@]}"
  f=$(stats_file "$t")
  sleep 0.3; cp "$f" "$RUN/$t.before"; m0=$(stat -c %y "$f" 2>/dev/null || true)
  run_loadgen "$OUT/$t.load.txt" "$CONNS" --url "${URL[$t]}" -n "$REQUESTS" "${LG_TLS[@]}"
  sleep 0.3; cp "$f" "$RUN/$t.after"
  [[ $(stat -c %y "$f") != "$m0" ]] || die "$f is not being updated by mallocstat.so"
  log "$t: $(grep -o 'requests=.*p99_us=[0-9]*' "$OUT/$t.load.txt")"
done

python3 - "$RUN" "$REQUESTS" "$CONNS" <<'EOF' | tee "$OUT/summary.txt"
import sys
run, n, c = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(p):
    return {k: int(v) for k, v in (x.split("=") for x in open(p).read().split())}
big = {}
print(f"heap allocations per GET request ({n} requests, {c} connections; counters from mallocstat.so; nginx = its worker)")
buckets = ["le64", "le256", "le1k", "le4k", "le16k", "le64k", "le256k", "gt256k"]
hdr = f"{'target':<10}{'allocs/req':>11}{'frees/req':>10}{'KiB/req':>9}   " + " ".join(f"{b:>7}" for b in buckets)
print(hdr); print("-" * len(hdr))
for t in ("kubegate", "nginx"):
    a, b = load(f"{run}/{t}.before"), load(f"{run}/{t}.after")
    d = {k: b[k] - a[k] for k in b if k != "max"}
    calls = sum(d[f"calls_{x}"] for x in buckets)
    byts = sum(d[f"bytes_{x}"] for x in buckets)
    big[t] = sorted(((int(k[4:]), v / n) for k, v in d.items() if k.startswith("size") and v / n >= 0.05), key=lambda x: -x[1])
    print(f"{t:<10}{calls / n:>11.1f}{d['frees'] / n:>10.1f}{byts / n / 1024:>9.1f}   " + " ".join(f"{d[f'calls_{x}'] / n:>7.2f}" for x in buckets))
print("(columns le64..gt256k = allocations per request by requested size)")
for t, sizes in big.items():
    print(f"{t}: allocations over 4 KiB per request by exact size: " + (", ".join(f"{s} B x {c:.2f}" for s, c in sizes) or "none"))
EOF

if [[ $BACKTRACE == 1 ]]; then
  need_tools gdb
  for size in $(python3 - "$RUN/kubegate.before" "$RUN/kubegate.after" "$REQUESTS" <<'EOF'
import sys
load = lambda p: {k: int(v) for k, v in (x.split("=") for x in open(p).read().split())}
a, b, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
print(" ".join(k[4:] for k in b if k.startswith("size") and (b[k] - a.get(k, 0)) / n >= 0.99))
EOF
  ); do
    cat >"$RUN/gdb.$size" <<EOF
set pagination off
break malloc if \$rdi == $size
continue
bt 16
detach
quit
EOF
    timeout 60 gdb -q -batch -x "$RUN/gdb.$size" -p "$KG_PID" >"$RUN/gdb.$size.out" 2>&1 &
    GDB_PID=$!; STARTED+=("$GDB_PID")
    sleep 4   # gdb attached and continuing
    kg_curl "$CM_PATH" --http1.1 -o /dev/null --max-time 20 || true
    wait "$GDB_PID" || true; forget_pid "$GDB_PID"
    grep -E '^#' "$RUN/gdb.$size.out" | sed -E 's/ \(.*\) at / at /' | cut -c1-240 >"$OUT/backtrace.$size.txt" || true
    log "malloc($size) backtrace -> $OUT/backtrace.$size.txt"
    grep -E ' (new|pin)<' "$OUT/backtrace.$size.txt" | head -2 >&2 || true
  done
fi
log "done -> $OUT"

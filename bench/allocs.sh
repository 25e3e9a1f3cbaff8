#!/usr/bin/env bash
# bench/allocs.sh - heap allocations per GET request, kubegate vs nginx (diagnosis, not a benchmark)
#
# Starts the same targets as get.sh with bench/tools/mallocstat.so preloaded (it counts
# malloc/calloc/realloc/memalign calls and requested bytes by size), drives exactly REQUESTS
# GETs at CONNS connections, and divides the counter deltas by the number of requests.
# Output: $RESULTS/allocs/summary.txt
# Usage: bench/allocs.sh        REQUESTS=200000 CONNS=32 bench/allocs.sh      (needs gcc)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS=${REQUESTS:-100000}
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
print(f"heap allocations per GET request ({n} requests, {c} connections; counters from mallocstat.so; nginx = its worker)")
buckets = ["le64", "le256", "le1k", "le4k", "le16k", "le64k", "le256k", "gt256k"]
hdr = f"{'target':<10}{'allocs/req':>11}{'frees/req':>10}{'KiB/req':>9}   " + " ".join(f"{b:>7}" for b in buckets)
print(hdr); print("-" * len(hdr))
for t in ("kubegate", "nginx"):
    a, b = load(f"{run}/{t}.before"), load(f"{run}/{t}.after")
    d = {k: b[k] - a[k] for k in b if k != "max"}
    calls = sum(d[f"calls_{x}"] for x in buckets)
    byts = sum(d[f"bytes_{x}"] for x in buckets)
    print(f"{t:<10}{calls / n:>11.1f}{d['frees'] / n:>10.1f}{byts / n / 1024:>9.1f}   " + " ".join(f"{d[f'calls_{x}'] / n:>7.2f}" for x in buckets))
print("(columns le64..gt256k = allocations per request by requested size)")
EOF
log "done -> $OUT"

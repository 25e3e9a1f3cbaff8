#!/usr/bin/env bash
# bench/run.sh - run every kubegate benchmark once, results under one directory.
#   1. get.sh     GET of a ~1 KiB ConfigMap over TLS, kubegate vs nginx (static file, TLS)
#   2. create.sh  CREATE of ~1 KiB ConfigMaps, 32 clients: durable writes/s (+ disk fsync reference)
#   3. memory.sh  RSS with 10,000 ~1 KiB ConfigMaps stored, and after a restart
# Each piece also runs alone (bench/get.sh, ...). Settings are env vars (see each script);
# RESULTS=<dir> chooses the output directory (default /tmp/kgbench/results/<timestamp>).
# A full run takes about 10-15 minutes on a 2-core machine (plus the first release build).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RESULTS=${RESULTS:-${WORK:-/tmp/kgbench}/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS"
for b in ${BENCHES:-get create memory}; do
  printf '[%(%H:%M:%S)T] ===== %s =====\n' -1 "$b" >&2
  "$BENCH_DIR/$b.sh"
done
for b in ${BENCHES:-get create memory}; do
  echo "== $b"; cat "$RESULTS/$b/summary.txt"; echo
done | tee "$RESULTS/summary.txt"
printf '[%(%H:%M:%S)T] all results in %s\n' -1 "$RESULTS" >&2

#!/usr/bin/env bash
# bench/memory.sh - benchmark 3: kubegate's resident memory with OBJECTS ~1 KiB ConfigMaps stored.
#
# Steps (one fresh data dir):
#   1. start kubegate, read VmRSS/VmHWM (empty store)
#   2. create OBJECTS ConfigMaps (~1 KiB request body each, 32 concurrent clients) with the
#      load generator, read VmRSS/VmHWM
#   3. one LIST of all of them (single response), read again
#   4. restart kubegate (SIGTERM, start on the same data dir: the watch cache is loaded from
#      disk), read VmRSS/VmHWM; then GET one object and LIST all, read again
# VmHWM is the peak RSS of the process since it started (/proc/<pid>/status).
#
# Usage: bench/memory.sh          OBJECTS=10000 CONNS=32 bench/memory.sh
# Output: $RESULTS/memory/summary.txt. Target (reported): peak RSS <= 80 MiB.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OBJECTS=${OBJECTS:-10000}
CONNS=${CONNS:-32}
CM_BYTES=${CM_BYTES:-1024}
KG_PORT_WANT=${KG_PORT_WANT:-17463}
SETTLE=${SETTLE:-2}                         # seconds to wait before reading /proc after a step

prepare_common
OUT=$RESULTS/memory
RUN=$WORK/run/memory
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
machine_info >"$OUT/meta.txt"
echo "OBJECTS=$OBJECTS CONNS=$CONNS CM_BYTES=$CM_BYTES" >>"$OUT/meta.txt"
ROWS=$OUT/rows.tsv
: >"$ROWS"

mem_row() {  # label -> appends "label VmRSS VmHWM RssAnon threads" (kB)
  sleep "$SETTLE"
  local s=/proc/$KG_PID/status
  local rss hwm anon thr
  rss=$(awk '/^VmRSS:/ {print $2}' "$s"); hwm=$(awk '/^VmHWM:/ {print $2}' "$s")
  anon=$(awk '/^RssAnon:/ {print $2}' "$s"); thr=$(awk '/^Threads:/ {print $2}' "$s")
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$rss" "$hwm" "$anon" "$thr" >>"$ROWS"
  log "$1: VmRSS=${rss} kB VmHWM=${hwm} kB RssAnon=${anon} kB threads=${thr}"
}

count_objects() {
  kg_curl "/api/v1/namespaces/default/configmaps?limit=1" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["metadata"].get("remainingItemCount", 0) + len(d["items"]))'
}

list_all() {  # -> bytes of one LIST of every configmap in default
  kg_curl "/api/v1/namespaces/default/configmaps" -o /dev/null -w '%{size_download}'
}

start_kubegate "$RUN/kubegate-data" "$(free_port "$KG_PORT_WANT")"
PKI=$KG_DIR/pki
LG_TLS=(--ca "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
URL=https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps
mem_row "started, empty store"

configmap_json "mem-{n}" "$CM_BYTES" >"$RUN/body.json"
log "creating $OBJECTS ConfigMaps ($(wc -c <"$RUN/body.json")-byte bodies, $CONNS clients)"
run_loadgen "$RUN/create.out" "$CONNS" --url "$URL" -n "$OBJECTS" --method POST --body-file "$RUN/body.json" "${LG_TLS[@]}"
log "create: $(sed 's/^RESULT //' "$RUN/create.out")"
n=$(count_objects)
(( n == OBJECTS )) || log "WARNING: $n objects stored, expected $OBJECTS"
one=$(kg_curl "/api/v1/namespaces/default/configmaps/mem-0" -o /dev/null -w '%{size_download}')
mem_row "after $n creates"
bytes=$(list_all)
mem_row "after one LIST of all ($bytes B)"
db_kib=$(du -k "$KG_DIR/kubegate.redb" | cut -f1)

stop_kubegate
start_kubegate "$KG_DIR" "$KG_PORT"
mem_row "restarted (loaded $n from disk)"
kg_curl "/api/v1/namespaces/default/configmaps/mem-0" -o /dev/null
bytes2=$(list_all)
mem_row "restarted + GET + LIST of all ($bytes2 B)"
stop_kubegate

{
  echo "objects=$n object_get_bytes=$one list_bytes=$bytes redb_kib=$db_kib"
  grep -o 'rps=[^ ]*' "$RUN/create.out" | sed 's/^/create_/'
} >>"$OUT/meta.txt"

python3 - "$ROWS" "$n" "$one" "$db_kib" <<'EOF' | tee "$OUT/summary.txt"
import os, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
n, one, db = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mib = lambda kb: int(kb) / 1024
print()
print(f"kubegate memory (env: {os.environ.get('KUBEGATE_ENV') or 'default'}) with {n} ConfigMaps of ~{one} B (GET body); data in kubegate.redb = {db / 1024:.1f} MiB; raw JSON = {n * one / 2**20:.1f} MiB")
hdr = f"{'step':<44}{'VmRSS MiB':>10}{'VmHWM MiB':>10}{'RssAnon MiB':>12}{'threads':>8}"
print(hdr); print("-" * len(hdr))
for label, rss, hwm, anon, thr in rows:
    print(f"{label:<44}{mib(rss):>10.1f}{mib(hwm):>10.1f}{mib(anon):>12.1f}{thr:>8}")
peak = max(mib(r[2]) for r in rows)
print("-" * len(hdr))
print(f"peak RSS (max VmHWM): {peak:.1f} MiB   target <= 80 MiB -> {'met' if peak <= 80 else 'NOT met'}")
EOF
log "done"

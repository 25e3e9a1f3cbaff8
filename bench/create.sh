#!/usr/bin/env bash
# bench/create.sh - benchmark 2: CREATE of ~1 KiB ConfigMaps with CONNS concurrent clients.
#
# Every create that kubegate answers 201 is durable (its redb group commit fsyncs before the
# response), so requests/s here = durable writes/s. Each request creates a new object with a
# unique name (POST /api/v1/namespaces/default/configmaps, body from configmap_json with the
# name bench-<round>-<run token>-<n>, unique even when a disturbed run is redone). kubegate is
# pinned to SERVER_CPUS, the load generator to LOADGEN_CPUS.
#
# Reference (same run, cheap): the disk's own fsync rate measured in the same directory
#   * fsync-serial: one writer, write 1 KiB + fsync, repeat (what one durable write per fsync gives)
#   * fsync-32: 32 threads doing the same on 32 files (what the filesystem gives without batching)
# kubegate's group commit should beat fsync-serial by batching many creates per fsync.
#
# Usage: bench/create.sh                (settings are env vars)
#   CONNS=32 ROUNDS=3 DURATION=10 bench/create.sh
# Output: $RESULTS/create/summary.txt, runs.csv, fsync.txt. Target (reported): >= 3,000 creates/s.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-32}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CM_BYTES=${CM_BYTES:-1024}                  # request body size
KG_PORT_WANT=${KG_PORT_WANT:-17453}
FSYNC_SECONDS=${FSYNC_SECONDS:-3}

prepare_common
OUT=$RESULTS/create
RUN=$WORK/run/create
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"
echo "CONNS='$CONNS' ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP CM_BYTES=$CM_BYTES" >>"$OUT/meta.txt"

start_kubegate "$RUN/kubegate-data" "$(free_port "$KG_PORT_WANT")"
PKI=$KG_DIR/pki
LG_TLS=(--ca "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
URL=https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps

body_for() {  # round -> body file with a {n} placeholder in the name
  local f=$RUN/body.$1.json
  configmap_json "bench-$1-{run}-{n}" "$CM_BYTES" >"$f"
  echo "$f"
}
log "request body: $(wc -c <"$(body_for 0)") bytes; target $URL"
echo "request_body_bytes=$(wc -c <"$(body_for 0)")" >>"$OUT/meta.txt"

(( WARMUP > 0 )) && { log "warm-up ${WARMUP}s"; run_loadgen "$RUN/warmup.out" "$CONNS" --url "$URL" -d "$WARMUP" \
  --method POST --body-file "$(body_for w)" "${LG_TLS[@]}"; }
for ((r = 1; r <= ROUNDS; r++)); do
  measured_run "$r,kubegate,$CONNS" "$OUT/kubegate.c$CONNS.r$r.txt" "$CONNS" "$KG_PID" \
    --url "$URL" -d "$DURATION" --method POST --body-file "$(body_for "r$r")" "${LG_TLS[@]}"
done
created=$(kg_curl "/api/v1/namespaces/default/configmaps?limit=1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["metadata"].get("remainingItemCount", 0) + len(d["items"]))')
du_db=$(du -k "$KG_DIR/kubegate.redb" | cut -f1)
log "objects in default namespace after the runs: $created; kubegate.redb = ${du_db} KiB"
echo "objects_after=$created redb_kib=$du_db" >>"$OUT/meta.txt"

# ----------------------------------------------------------------------------- fsync reference
log "fsync reference in $RUN (${FSYNC_SECONDS}s each)"
python3 - "$RUN" "$FSYNC_SECONDS" <<'EOF' | tee "$OUT/fsync.txt"
import os, sys, threading, time
d, secs = sys.argv[1], float(sys.argv[2])
payload = b"x" * 1024
def worker(path, counter, lat, stop):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while not stop.is_set():
            t = time.perf_counter()
            os.write(fd, payload); os.fsync(fd)
            lat.append(time.perf_counter() - t)
            counter[0] += 1
    finally:
        os.close(fd); os.unlink(path)
for n in (1, 32):
    stop = threading.Event(); counters = [[0] for _ in range(n)]; lats = [[] for _ in range(n)]
    ts = [threading.Thread(target=worker, args=(f"{d}/fsync.{n}.{i}", counters[i], lats[i], stop)) for i in range(n)]
    t0 = time.perf_counter(); [t.start() for t in ts]; time.sleep(secs); stop.set(); [t.join() for t in ts]
    el = time.perf_counter() - t0
    lat = sorted(x for l in lats for x in l)
    total = sum(c[0] for c in counters)
    print(f"fsync-{'serial' if n == 1 else n}: {total / el:.0f} write+fsync/s  p50 {lat[len(lat)//2]*1e6:.0f} us  p99 {lat[int(len(lat)*0.99)]*1e6:.0f} us  ({n} writer{'s' if n > 1 else ''})")
EOF

# ----------------------------------------------------------------------------- summary
python3 - "$CSV" "$FOREIGN_MAX" "$OUT/fsync.txt" <<'EOF' | tee "$OUT/summary.txt"
import csv, re, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
FOREIGN_MAX = float(sys.argv[2])
fs = {m.group(1): float(m.group(2)) for m in re.finditer(r"fsync-(\S+): (\d+)", open(sys.argv[3]).read())}
med = st.median
print()
print("CREATE ~1 KiB ConfigMaps (POST, unique names), durable (group-committed fsync) writes/s")
hdr = f"{'round':>5}{'c':>4}{'creates/s':>11}{'p50 us':>9}{'p90 us':>9}{'p99 us':>9}{'srv us/req':>11}  {'cpu% srv/lg/fg':<16}{'errors':>7}"
print(hdr); print("-" * len(hdr))
for r in rows:
    cpu = "/".join(f"{float(r[k]):.0f}" for k in ("cpu_server_pct", "cpu_loadgen_pct", "cpu_foreign_pct"))
    flag = "  NOISY" if r["quiet"] == "0" or float(r["cpu_foreign_pct"]) > FOREIGN_MAX else ""
    print(f"{r['round']:>5}{r['conns']:>4}{float(r['rps']):>11.0f}{r['p50_us']:>9}{r['p90_us']:>9}{r['p99_us']:>9}{float(r['server_us_per_req']):>11.1f}  {cpu:<16}{int(r['errors']) + int(r['non2xx']):>7}{flag}")
rps = med(float(r["rps"]) for r in rows)
print("-" * len(hdr))
print(f"median creates/s: {rps:.0f}   target >= 3000 -> {'met' if rps >= 3000 else 'NOT met'} ({rps / 3000:.2f}x)")
if "serial" in fs:
    print(f"disk: {fs['serial']:.0f} serial write+fsync/s, {fs.get('32', 0):.0f}/s with 32 writers -> kubegate creates per fsync-serial: {rps / fs['serial']:.1f}x")
EOF
log "done; raw runs in $CSV"

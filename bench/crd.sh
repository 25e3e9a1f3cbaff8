#!/usr/bin/env bash
# bench/crd.sh - custom resources (issue 7): CREATE and LIST throughput of ~1 KiB custom
# resources against the same operations on ~1 KiB ConfigMaps, in one run on one kubegate, and
# the time from creating a CRD to it being served with 500 CRDs already installed.
#
#   widget-create  POST /apis/bench.example.com/v1/namespaces/default/widgets  (unique names)
#   cm-create      POST /api/v1/namespaces/default/configmaps                 (unique names)
#   widget-list    GET  /apis/bench.example.com/v1/namespaces/listing/widgets (100 objects)
#   cm-list        GET  /api/v1/namespaces/listing/configmaps                 (100 objects)
#
# The Widget CRD has a structural schema of 20 spec fields (with a default and bounds) and 2
# CEL rules (x-kubernetes-validations), so a create pays for defaulting, pruning, schema
# validation and the rules. Rounds are interleaved; the load generator is pinned apart from
# kubegate as in the other benchmarks (lib.sh).
#
# Then ESTABLISH: 500 CRDs (one group each) are created; for each of ESTABLISH_TRIES more, the
# time from the POST of the CRD to the first 200 of a LIST of its resource is measured.
#
# Targets (issue 7, reported, not asserted): custom-resource create and list rates >= 0.8x
# the ConfigMap rates; CRD to served <= 1 s with 500 CRDs installed.
#
# With PROFILE_TARGETS (e.g. "widget-create widget-list"), kubegate is then sampled with perf
# (call graphs) during PROFILE_SECONDS of each target's load: <target>.flat.txt (self time) and
# <target>.callers.txt (inclusive time). CRDS=0 skips the establish part; ROUNDS=0 WARMUP=0
# measures the memory the CRDs cost a fresh kubegate (rss.txt, SETTLE seconds after the last).
#
# Usage: bench/crd.sh        CONNS=32 ROUNDS=3 DURATION=8 CRDS=500 bench/crd.sh
#        ROUNDS=1 CRDS=0 PROFILE_TARGETS="widget-create cm-create" bench/crd.sh   (needs perf)
#        ROUNDS=0 WARMUP=0 bench/crd.sh                                            (memory of 500 CRDs)
# Output: $RESULTS/crd/summary.txt, runs.csv, establish.txt, meta.txt, rss.txt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-32}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CRDS=${CRDS:-500}
ESTABLISH_TRIES=${ESTABLISH_TRIES:-5}
LIST_OBJECTS=${LIST_OBJECTS:-100}
KG_PORT_WANT=${KG_PORT_WANT:-17455}
SETTLE=${SETTLE:-15}
PROFILE_TARGETS=${PROFILE_TARGETS:-}
PROFILE_SECONDS=${PROFILE_SECONDS:-6}
[[ -n $PROFILE_TARGETS ]] && need_tools perf

prepare_common
OUT=$RESULTS/crd
RUN=$WORK/run/crd
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"
echo "CONNS=$CONNS ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP CRDS=$CRDS LIST_OBJECTS=$LIST_OBJECTS" >>"$OUT/meta.txt"

start_kubegate "$RUN/kubegate-data" "$(free_port "$KG_PORT_WANT")"
PKI=$KG_DIR/pki
LG_TLS=(--ca "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
BASE=https://127.0.0.1:$KG_PORT

# python3 helper: admin HTTPS client over one keep-alive connection.
py() {
  python3 - "$KG_DIR" "$KG_PORT" "$@"
}

log "creating the Widget CRD (20 spec fields, 2 CEL rules) and the listing objects"
py "$LIST_OBJECTS" <<'PY'
import http.client, json, ssl, sys, time
data, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(cafile=f"{data}/pki/ca.crt")
ctx.load_cert_chain(f"{data}/pki/admin.crt", f"{data}/pki/admin.key")
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
def call(method, path, body=None):
    conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    r = conn.getresponse(); text = r.read()
    return r.status, text
fields = {f"field{i:02d}": {"type": "string", "maxLength": 128} for i in range(17)}
fields.update({"replicas": {"type": "integer", "minimum": 0, "default": 1},
               "minReplicas": {"type": "integer", "minimum": 0},
               "name": {"type": "string"}})
crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.bench.example.com"},
       "spec": {"group": "bench.example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": fields,
                                           "x-kubernetes-validations": [
                                               {"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas"},
                                               {"rule": "self.name.size() <= 63", "message": "name too long"}]}}}}}]}}
status, text = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
if status not in (201, 409):
    sys.exit(f"CRD: {status} {text[:300]!r}")
for _ in range(200):
    status, _ = call("GET", "/apis/bench.example.com/v1/widgets")
    if status == 200: break
    time.sleep(0.05)
else:
    sys.exit("widgets never served")
call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "listing"}})
spec = {f"field{i:02d}": "v" * 40 for i in range(17)}
spec.update({"replicas": 3, "minReplicas": 1, "name": "bench"})
for i in range(n):
    s1, t1 = call("POST", "/apis/bench.example.com/v1/namespaces/listing/widgets",
                  {"apiVersion": "bench.example.com/v1", "kind": "Widget", "metadata": {"name": f"w-{i}"}, "spec": spec})
    s2, t2 = call("POST", "/api/v1/namespaces/listing/configmaps",
                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}, "data": spec | {"replicas": "3", "minReplicas": "1"}})
    if s1 != 201 or s2 != 201:
        sys.exit(f"listing objects: {s1} {t1[:200]!r} {s2} {t2[:200]!r}")
PY

widget_body() {  # round -> file with a {n} placeholder in the name (~1 KiB)
  local f=$RUN/widget.$1.json
  python3 - "bench-$1-{run}-{n}" >"$f" <<'PY'
import json, sys
spec = {f"field{i:02d}": "v" * 40 for i in range(17)}
spec.update({"replicas": 3, "minReplicas": 1, "name": "bench"})
print(json.dumps({"apiVersion": "bench.example.com/v1", "kind": "Widget",
                  "metadata": {"name": sys.argv[1], "labels": {"app.kubernetes.io/name": "bench"}},
                  "spec": spec}, separators=(",", ":")))
PY
  echo "$f"
}
cm_body() {
  local f=$RUN/cm.$1.json
  configmap_json "bench-$1-{run}-{n}" "$(wc -c <"$(widget_body size)")" >"$f"
  echo "$f"
}
log "bodies: widget $(wc -c <"$(widget_body size)") bytes, configmap $(wc -c <"$(cm_body size)") bytes"
echo "widget_body_bytes=$(wc -c <"$(widget_body size)") configmap_body_bytes=$(wc -c <"$(cm_body size)")" >>"$OUT/meta.txt"
W_URL=$BASE/apis/bench.example.com/v1/namespaces/default/widgets
C_URL=$BASE/api/v1/namespaces/default/configmaps
WL_URL=$BASE/apis/bench.example.com/v1/namespaces/listing/widgets
CL_URL=$BASE/api/v1/namespaces/listing/configmaps

if (( WARMUP > 0 )); then
  log "warm-up ${WARMUP}s each"
  run_loadgen "$RUN/w1.out" "$CONNS" --url "$W_URL" -d "$WARMUP" --method POST --body-file "$(widget_body w)" "${LG_TLS[@]}"
  run_loadgen "$RUN/w2.out" "$CONNS" --url "$C_URL" -d "$WARMUP" --method POST --body-file "$(cm_body w)" "${LG_TLS[@]}"
  run_loadgen "$RUN/w3.out" "$CONNS" --url "$WL_URL" -d "$WARMUP" "${LG_TLS[@]}"
fi
for ((r = 1; r <= ROUNDS; r++)); do
  measured_run "$r,widget-create,$CONNS" "$OUT/widget-create.r$r.txt" "$CONNS" "$KG_PID" \
    --url "$W_URL" -d "$DURATION" --method POST --body-file "$(widget_body "r$r")" "${LG_TLS[@]}"
  measured_run "$r,cm-create,$CONNS" "$OUT/cm-create.r$r.txt" "$CONNS" "$KG_PID" \
    --url "$C_URL" -d "$DURATION" --method POST --body-file "$(cm_body "r$r")" "${LG_TLS[@]}"
  measured_run "$r,widget-list,$CONNS" "$OUT/widget-list.r$r.txt" "$CONNS" "$KG_PID" \
    --url "$WL_URL" -d "$DURATION" "${LG_TLS[@]}"
  measured_run "$r,cm-list,$CONNS" "$OUT/cm-list.r$r.txt" "$CONNS" "$KG_PID" \
    --url "$CL_URL" -d "$DURATION" "${LG_TLS[@]}"
done

# ----------------------------------------------------------------------------- profile
declare -A TARGET_ARGS=(
  [widget-create]="--url $W_URL --method POST --body-file $(widget_body p)"
  [cm-create]="--url $C_URL --method POST --body-file $(cm_body p)"
  [widget-list]="--url $WL_URL"
  [cm-list]="--url $CL_URL"
)
for t in $PROFILE_TARGETS; do
  [[ -n ${TARGET_ARGS[$t]:-} ]] || die "unknown PROFILE_TARGETS entry $t"
  log "profiling $t for ${PROFILE_SECONDS}s"
  "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$CONNS" -t "$(loadgen_threads "$CONNS")" ${TARGET_ARGS[$t]} \
    -d "$((PROFILE_SECONDS + 2))" "${LG_TLS[@]}" >"$OUT/$t.perf-load.txt" 2>&1 &
  LOADGEN_PID=$!
  sleep 1
  "${LG_PIN[@]}" perf record -q -o "$OUT/$t.perf.data" -F 999 --call-graph dwarf,16384 -p "$KG_PID" \
    -- sleep "$PROFILE_SECONDS" >/dev/null 2>&1 &
  PERF_PID=$!; STARTED+=("$PERF_PID")
  wait "$PERF_PID" || true; forget_pid "$PERF_PID"
  wait "$LOADGEN_PID" || true; LOADGEN_PID=
  perf report -i "$OUT/$t.perf.data" --stdio --no-children --sort symbol -g none --percent-limit 0.3 2>/dev/null |
    grep -v '^#' | grep -v '^$' >"$OUT/$t.flat.txt" || true
  perf report -i "$OUT/$t.perf.data" --stdio --children --sort symbol -g none --percent-limit 1 2>/dev/null |
    grep -v '^#' | grep -v '^$' >"$OUT/$t.callers.txt" || true
  log "$t: $(grep -o 'requests=.*p99_us=[0-9]*' "$OUT/$t.perf-load.txt"); $OUT/$t.{flat,callers}.txt"
done
echo "rss_kib_after_load=$(awk '/VmRSS/{print $2}' "/proc/$KG_PID/status")" >"$OUT/rss.txt"

# ----------------------------------------------------------------------------- establish
if (( CRDS > 0 )); then
log "installing $CRDS CRDs, then timing $ESTABLISH_TRIES more from POST to served"
py "$CRDS" "$ESTABLISH_TRIES" <<'PY' | tee "$OUT/establish.txt"
import http.client, json, ssl, sys, time, statistics
data, port, n, tries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ctx = ssl.create_default_context(cafile=f"{data}/pki/ca.crt")
ctx.load_cert_chain(f"{data}/pki/admin.crt", f"{data}/pki/admin.key")
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
def call(method, path, body=None):
    conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    r = conn.getresponse(); text = r.read()
    return r.status, text
def crd(i):
    g = f"g{i}.bench.example.com"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{g}"},
            "spec": {"group": g, "scope": "Namespaced",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
t0 = time.perf_counter()
for i in range(n):
    s, t = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(i))
    if s not in (201, 409): sys.exit(f"crd {i}: {s} {t[:200]!r}")
print(f"created {n} CRDs in {time.perf_counter() - t0:.1f}s")
# wait until the last of them is served
while call("GET", f"/apis/g{n-1}.bench.example.com/v1/things")[0] != 200:
    time.sleep(0.05)
times = []
for k in range(tries):
    i = n + k
    start = time.perf_counter()
    s, t = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(i))
    if s != 201: sys.exit(f"crd {i}: {s} {t[:200]!r}")
    while call("GET", f"/apis/g{i}.bench.example.com/v1/things")[0] != 200:
        time.sleep(0.01)
    served = time.perf_counter() - start
    # and listed in aggregated discovery
    while f"g{i}.bench.example.com".encode() not in call("GET", "/apis")[1]:
        time.sleep(0.01)
    discovered = time.perf_counter() - start
    times.append((served, discovered))
    print(f"CRD {i}: served after {served*1000:.0f} ms, in /apis after {discovered*1000:.0f} ms")
med_s = statistics.median(t[0] for t in times); med_d = statistics.median(t[1] for t in times)
print(f"median: served {med_s*1000:.0f} ms, discovered {med_d*1000:.0f} ms with {n} CRDs installed; "
      f"target <= 1000 ms -> {'met' if max(med_s, med_d) <= 1.0 else 'NOT met'}")
PY
fi
# Memory once the CRDs' documents have settled (the local OpenAPI documents follow a change on
# their own task), then after one request of the Swagger document, which is assembled on the
# first request only. With ROUNDS=0 WARMUP=0 this is the memory 500 CRDs cost a fresh kubegate;
# after load rounds, it also holds every object they created.
rss() { awk '/VmRSS/{print $2}' "/proc/$KG_PID/status"; }
if (( CRDS > 0 )); then
  sleep "$SETTLE"
  echo "rss_kib_after_crds=$(rss) (CRDS=$CRDS, ${SETTLE}s after the last)" >>"$OUT/rss.txt"
  kg_curl /openapi/v2 -o /dev/null
  echo "rss_kib_after_openapi_v2=$(rss)" >>"$OUT/rss.txt"
fi
echo "rss_kib_after=$(rss)" >>"$OUT/meta.txt"
cat "$OUT/rss.txt"

# ----------------------------------------------------------------------------- summary
python3 - "$CSV" "$FOREIGN_MAX" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
FOREIGN_MAX = float(sys.argv[2])
print()
if not rows:
    print("no load rounds (ROUNDS=0)"); sys.exit(0)
hdr = f"{'round':>5} {'target':<14}{'req/s':>9}{'p50 us':>9}{'p99 us':>9}{'srv us/req':>11}{'errors':>7}"
print(hdr); print("-" * len(hdr))
for r in rows:
    flag = "  NOISY" if r["quiet"] == "0" or float(r["cpu_foreign_pct"]) > FOREIGN_MAX else ""
    print(f"{r['round']:>5} {r['target']:<14}{float(r['rps']):>9.0f}{r['p50_us']:>9}{r['p99_us']:>9}{float(r['server_us_per_req']):>11.1f}{int(r['errors']) + int(r['non2xx']):>7}{flag}")
print("-" * len(hdr))
def ratio(a, b):
    rounds = sorted({r["round"] for r in rows})
    by = {(r["round"], r["target"]): r for r in rows}
    vals = [float(by[(k, a)]["rps"]) / float(by[(k, b)]["rps"]) for k in rounds if (k, a) in by and (k, b) in by]
    return st.median(vals) if vals else float("nan")
for what, a, b in (("create", "widget-create", "cm-create"), ("list", "widget-list", "cm-list")):
    r = ratio(a, b)
    med = lambda t: st.median(float(x["rps"]) for x in rows if x["target"] == t)
    print(f"{what}: widgets {med(a):.0f}/s vs configmaps {med(b):.0f}/s = {r:.2f}x  (target >= 0.8x -> {'met' if r >= 0.8 else 'NOT met'})")
EOF
log "done; raw runs in $CSV"

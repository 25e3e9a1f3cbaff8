#!/usr/bin/env bash
# bench/apf.sh - benchmark 7: flow control (issue 6), in one run:
#   (a) isolation: two token users in one Queue priority level, "heavy" sending 10x the rate
#       of "light" and well over the level's capacity; light's completed fraction and p99
#       latency together vs light alone (targets: >= 95 % served, p99 <= 2x alone), ISO_REPEATS
#       alone/together pairs back to back (verdicts: the median ratio, the lowest fraction);
#   (b) fairness: EQUAL_USERS users sending the same rate, together over the capacity;
#       Jain's index of their served rates (target >= 0.95);
#   (c) overhead: the same closed-loop GET of one ~1 KiB ConfigMap through a kubegate with
#       APF (defaults: 400 + 200 seats, never saturated here) and one with flow control off
#       (flowControl.mode maxInFlight, both limits 0 = unlimited), both loaded at once in each
#       round (bench/lib.sh measured_pair; OH_SIDE_BY_SIDE=0: one after the other)
#       (target: APF requests/s >= 0.95x off).
#
# (a) and (b) run against one kubegate started with small limits (MAX_RI + MAX_MRI seats) in
# which a PriorityLevelConfiguration `bench-apf` (Limited, Queue: 64 queues, hand size 1,
# queue length QLL; SHARES nominal shares, lendable 0 %, borrowing limit 0 %, so its seats do
# not move with borrowing) and a FlowSchema `bench-apf` (ByUser, the bench users' group,
# create/list/get of ConfigMaps and get of slowthings in namespace apf-bench) are created with kubectl apply, plus
# `bench-apf-light` (the light user alone, same level and rules) so that kubegate's
# request_wait_duration histogram shows light's queue wait apart.
# The request (REQUEST=proxied, default) is a GET of `slowthings` in apf-bench, an APIService
# (v1.apf.bench.example.com) whose backend (bench/loadgen's slow-backend, on LOADGEN_CPUS)
# answers after DELAY_MS (10) ms: the seat is held while the request waits on work that is
# not kubegate's CPU (as for an aggregated API server, a webhook or storage), so the level's
# seats, not the one server CPU, are what the heavy user exhausts, and a seat frees every
# (hold time / seats) while the request itself lasts the hold time.
# REQUEST=create is the CREATE of a small ConfigMap in apf-bench while WATCHERS (10) watches on
# that namespace's ConfigMaps are open: kube's work estimator then keeps the create's seat for
# 5 ms after it is answered (the watchers' notification time). There the seat is held ~4x as
# long as the request lasts, so waiting for a seat, which a request in a saturated level must,
# is as long as the request itself, and the writes share the store's group commit with the
# heavy user's; REQUEST=dryrun is the same create with dryRun=All (nothing stored).
# REQUEST=list makes it a LIST of CMS ~1 KiB ConfigMaps (on this VM the load generator and the
# CPUs limit before the level's seats do). docs/benchmarks.md §7 has all four.
# The level's capacity (requests/s) is measured first with a closed-loop run of one user;
# the rates follow from it: light = LIGHT_FRACTION x capacity, heavy = 10x light; each equal
# user EQUAL_LOAD x capacity / EQUAL_USERS.
# The load generator runs open loop (--rate: requests due at fixed times whatever the
# answers; latency from the due time), one process per user, all starting at the same wall
# time (--start-at); completed = 2xx / requests due; 429s are counted apart.
# With hand size 1, two flows dealt the same queue share it (shuffle sharding's residual
# collision); the user names are chosen so each bench flow has a queue of its own, because
# the benchmark measures fair queuing between queues, not the collision odds.
#
# Servers pinned to SERVER_CPUS, load generators to LOADGEN_CPUS (bench/lib.sh).
# Usage: bench/apf.sh
#   DURATION=15 OH_ROUNDS=3 OH_DURATION=8 OH_CONNS=32 EQUAL_USERS=4 bench/apf.sh
#   PHASES=overhead OH_ROUNDS=6 bench/apf.sh        (c) alone;  PHASES=fairness: (a) and (b)
#   REQUEST=create PHASES=fairness bench/apf.sh      creates (seat held 5 ms after the answer) instead
#   REQUEST=list PHASES=fairness bench/apf.sh        LISTs instead
#   ISO_REPEATS=5 PHASES=fairness bench/apf.sh       five alone/together pairs in (a) (default 3)
#   PHASES=overhead OH_PERF=1 bench/apf.sh           (c), then a perf profile of each server
#   PHASES=overhead OH_CONTROL=1 bench/apf.sh        (c) with APF on both servers: the method's error
#   PHASES=overhead OH_SIDE_BY_SIDE=0 bench/apf.sh   (c) with the servers loaded one after the other
#   PHASES=overhead OH_H2=1 bench/apf.sh             (c) over HTTP/2 (h2load, one stream per
#                                                    connection at a time, as client-go and kubectl
#                                                    talk; bench/tools/h2load-as-loadgen)
# Output: $RESULTS/apf/summary.txt (figures, verdicts, the command), runs.csv (overhead
# rounds), raw loadgen output per run, meta.txt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=${DURATION:-15}            # seconds per open-loop phase
WARMUP=${WARMUP:-3}
REQUEST=${REQUEST:-proxied}         # proxied (slow backend), create / dryrun (WATCHERS watches open) or list
WATCHERS=${WATCHERS:-10}            # watches on apf-bench ConfigMaps (kube: 10 per final seat)
CMS=${CMS:-300}                     # ConfigMaps the LIST returns (REQUEST=list)
DELAY_MS=${DELAY_MS:-10}            # the slow backend's answer delay (REQUEST=proxied)
MAX_RI=${MAX_RI:-40}                # flowControl.maxRequestsInflight of the fairness kubegate
MAX_MRI=${MAX_MRI:-20}              # flowControl.maxMutatingRequestsInflight
SHARES=${SHARES:-40}                # bench-apf nominalConcurrencyShares (40 of 285 shares x 60 seats -> 9 seats)
QLL=${QLL:-50}                      # bench-apf queueLengthLimit
LIGHT_FRACTION=${LIGHT_FRACTION:-0.25}   # light's rate / the level's capacity (heavy: 10x that)
EQUAL_USERS=${EQUAL_USERS:-4}
# (a) is run ISO_REPEATS times (alone, then with heavy, each time): light's p99 is a tail of a
# few thousand requests on a VM whose speed drifts, so the verdict takes the median of the
# pairs' ratios. The first pair also records kubegate's metrics and CPU.
ISO_REPEATS=${ISO_REPEATS:-3}
EQUAL_LOAD=${EQUAL_LOAD:-2}         # equal users' total rate / capacity
LIGHT_CONNS=${LIGHT_CONNS:-16}
HEAVY_CONNS=${HEAVY_CONNS:-128}
EQUAL_CONNS=${EQUAL_CONNS:-96}
OH_CONNS=${OH_CONNS:-32}
OH_ROUNDS=${OH_ROUNDS:-3}
OH_DURATION=${OH_DURATION:-8}
# 1: each round loads both servers at once (bench/lib.sh measured_pair), so both meet the same
# machine state; 0: one after the other, alternating which goes first.
OH_SIDE_BY_SIDE=${OH_SIDE_BY_SIDE:-1}
# 1: a control run, the "off" server runs APF too; the ratio then shows the method's own error.
OH_CONTROL=${OH_CONTROL:-0}
PHASES=${PHASES:-"fairness overhead"}   # fairness: (a) and (b); overhead: (c)
COMMAND="$({ env | grep -E '^(DURATION|WARMUP|REQUEST|WATCHERS|CMS|DELAY_MS|MAX_RI|MAX_MRI|SHARES|QLL|LIGHT_FRACTION|EQUAL_USERS|ISO_REPEATS|EQUAL_LOAD|LIGHT_CONNS|HEAVY_CONNS|EQUAL_CONNS|OH_CONNS|OH_ROUNDS|OH_DURATION|OH_SIDE_BY_SIDE|OH_CONTROL|OH_H2|PHASES|PIN|SERVER_CPUS|LOADGEN_CPUS)=' || true; } | sort | tr '\n' ' ')bench/apf.sh"

need_tools kubectl python3
[[ $REQUEST == proxied ]] && need_tools openssl
[[ $REQUEST =~ ^(create|dryrun|list|proxied)$ ]] || die "REQUEST must be create, dryrun, list or proxied"
prepare_common
OUT=$RESULTS/apf
RUN=$WORK/run/apf
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
machine_info >"$OUT/meta.txt"
echo "command: $COMMAND" >>"$OUT/meta.txt"
LG_THREADS=1   # one load generator per user, each single-threaded on LOADGEN_CPUS

# ----------------------------------------------------------------------------- users
# pick_users PREFIX COUNT SCHEMA TAKEN... : COUNT names PREFIX-<i> whose flows (SCHEMA, ByUser)
# are dealt queues of 64 (hand size 1) distinct from each other and from the TAKEN flows
# (SCHEMA/user). kubegate's flow hash (policy/src/flowcontrol/classify.rs `hash_flow_id`; kube
# uses SHA-256 instead): FNV-1a 64 of schema NUL user, then MurmurHash3's fmix64; the card is
# that hash mod 64.
pick_users() {
  python3 - "$@" <<'PY'
import sys
prefix, count, schema, taken = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
M = (1 << 64) - 1
def flow_hash(s, u):
    h = 0xcbf29ce484222325
    for b in s.encode() + b"\0" + u.encode():
        h = ((h ^ b) * 0x100000001b3) & M
    h ^= h >> 33; h = (h * 0xff51afd7ed558ccd) & M
    h ^= h >> 33; h = (h * 0xc4ceb9fe1a85ec53) & M
    return h ^ (h >> 33)
def queue(s, u):
    return flow_hash(s, u) % 64
used = {queue(*t.split("/", 1)) for t in taken}
names, i = [], 0
while len(names) < count:
    name = f"{prefix}-{i}"; i += 1
    if queue(schema, name) not in used:
        used.add(queue(schema, name)); names.append(name)
print(" ".join(names))
PY
}
# light has a FlowSchema of its own (same level, same rules), so kubegate's
# apiserver_flowcontrol_request_wait_duration_seconds tells its queue wait apart
LIGHT=$(pick_users bench-light 1 bench-apf-light)
HEAVY=$(pick_users bench-heavy 1 bench-apf "bench-apf-light/$LIGHT")
read -r -a EQUALS <<<"$(pick_users bench-equal "$EQUAL_USERS" bench-apf "bench-apf-light/$LIGHT" "bench-apf/$HEAVY")"
declare -A TOKEN=()
: >"$RUN/tokens.csv"
for u in "$LIGHT" "$HEAVY" "${EQUALS[@]}" bench-overhead; do
  TOKEN[$u]=tok-$u-0123456789abcdef
  echo "${TOKEN[$u]},$u,uid-$u,bench-apf" >>"$RUN/tokens.csv"
done
log "users: light=$LIGHT heavy=$HEAVY equal=${EQUALS[*]}"

kg_config() {  # mode max_ri max_mri -> kubegate config file on stdout
  printf 'authentication:\n  tokenAuthFile: %s\nauthorization:\n  modes: [AlwaysAllow]\n' "$RUN/tokens.csv"
  printf 'flowControl:\n  mode: %s\n  maxRequestsInflight: %s\n  maxMutatingRequestsInflight: %s\n' "$1" "$2" "$3"
}

# populate DATA_DIR PORT COUNT : namespace apf-bench with COUNT ~1 KiB ConfigMaps and
# default/bench-get, as the admin over one keep-alive connection.
populate() {
  python3 - "$1" "$2" "$3" <<'PY'
import http.client, json, ssl, sys
data, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(cafile=f"{data}/pki/ca.crt")
ctx.load_cert_chain(f"{data}/pki/admin.crt", f"{data}/pki/admin.key")
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
def post(path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse(); text = r.read()
    if r.status not in (200, 201, 409):
        sys.exit(f"POST {path}: {r.status} {text[:300]!r}")
def cm(name, ns):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/part-of": "kubegate-bench"}},
            "data": {"config.yaml": "server:\n  port: 8080\n  logLevel: info\n", "padding": "x" * 850}}
post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apf-bench"}})
for i in range(count):
    post("/api/v1/namespaces/apf-bench/configmaps", cm(f"cm-{i:04d}", "apf-bench"))
post("/api/v1/namespaces/default/configmaps", cm("bench-get", "default"))
PY
}

# lg USER OUTFILE CONNS loadgen-args... : one user's load generator, pinned, in the background
# (PIDs in LG_PIDS, waited for by wait_lgs)
LG_PIDS=()
lg() {
  local user=$1 out=$2 c=$3; shift 3
  "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$c" -t "$LG_THREADS" --ca "$KG_DIR/pki/ca.crt" \
    --header "Authorization: Bearer ${TOKEN[$user]}" --timeout 30 "$@" >"$out" 2>"$out.err" &
  LG_PIDS+=("$!")
  STARTED+=("$!")
}
wait_lgs() {
  local p failed=0
  for p in "${LG_PIDS[@]}"; do wait "$p" || failed=1; forget_pid "$p"; done
  LG_PIDS=()
  (( failed == 0 )) || die "a load generator failed (see $OUT/*.err)"
}
field() { result_field "$1" "$2"; }
start_time() { python3 -c 'import sys, time; print(f"{time.time() + float(sys.argv[1]):.3f}")' "$1"; }

LIST_URL_PATH=/api/v1/namespaces/apf-bench/configmaps
PROXIED_GROUP=apf.bench.example.com
PROXIED_URL_PATH=/apis/$PROXIED_GROUP/v1/namespaces/apf-bench/slowthings/x

# ----------------------------------------------------------------------------- (a) and (b)
if [[ " $PHASES " == *" fairness "* ]]; then   # (not indented: the heredocs below are literal)
kg_config priorityAndFairness "$MAX_RI" "$MAX_MRI" >"$RUN/fair.yaml"
if [[ $REQUEST == proxied ]]; then
  make_backend_tls "$RUN/backend-tls"
  BACKEND_PORT=$(free_port 17491)
  "${LG_PIN[@]}" "$SLOW_BACKEND_BIN" --listen "127.0.0.1:$BACKEND_PORT" --cert "$RUN/backend-tls/cert.pem" \
    --key "$RUN/backend-tls/key.pem" --delay-ms "$DELAY_MS" 2>"$RUN/slow-backend.log" &
  STARTED+=("$!")
  log "slow backend pid $! on 127.0.0.1:$BACKEND_PORT, ${DELAY_MS} ms per answer"
fi
start_kubegate "$RUN/kubegate-fair" "$(free_port 17461)" --config "$RUN/fair.yaml"
FAIR_PID=$KG_PID
export KUBECONFIG=$KG_DIR/admin.kubeconfig
[[ $REQUEST == list ]] || CMS=0
log "populating: namespace apf-bench, $CMS ConfigMaps"
populate "$KG_DIR" "$KG_PORT" "$CMS"
cat >"$RUN/apf-objects.yaml" <<EOF
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: bench-apf
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: $SHARES
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Queue
      queuing:
        queues: 64
        handSize: 1
        queueLengthLimit: $QLL
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: bench-apf
spec:
  priorityLevelConfiguration:
    name: bench-apf
  matchingPrecedence: 500
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: Group
      group:
        name: bench-apf
    resourceRules:
    - verbs: [create, list, get]
      apiGroups: [""]
      resources: [configmaps]
      namespaces: [apf-bench]
    - verbs: [get]
      apiGroups: [$PROXIED_GROUP]
      resources: [slowthings]
      namespaces: [apf-bench]
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: bench-apf-light
spec:
  priorityLevelConfiguration:
    name: bench-apf
  matchingPrecedence: 400
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: User
      user:
        name: $LIGHT
    resourceRules:
    - verbs: [create, list, get]
      apiGroups: [""]
      resources: [configmaps]
      namespaces: [apf-bench]
    - verbs: [get]
      apiGroups: [$PROXIED_GROUP]
      resources: [slowthings]
      namespaces: [apf-bench]
EOF
if [[ $REQUEST == proxied ]]; then
  cat >>"$RUN/apf-objects.yaml" <<EOF
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.$PROXIED_GROUP
  annotations:
    kubegate.io/backend-url: https://127.0.0.1:$BACKEND_PORT
spec:
  group: $PROXIED_GROUP
  version: v1
  caBundle: $(base64 -w0 <"$RUN/backend-tls/ca.pem")
  groupPriorityMinimum: 1000
  versionPriority: 15
EOF
fi
kubectl apply -f "$RUN/apf-objects.yaml" >&2
PL_UID=$(kubectl get prioritylevelconfiguration bench-apf -o jsonpath='{.metadata.uid}')
# the engine picks the objects up from the watch (and, proxied, the availability controller
# finds the backend): wait until the light user's request is answered with 200 from bench-apf
CHECK_URL_PATH=$LIST_URL_PATH
[[ $REQUEST == proxied ]] && CHECK_URL_PATH=$PROXIED_URL_PATH
for ((i = 0; i < 150; i++)); do
  head=$(curl -sS -o /dev/null -D - --cacert "$KG_DIR/pki/ca.crt" -H "Authorization: Bearer ${TOKEN[$LIGHT]}" \
    "https://127.0.0.1:$KG_PORT$CHECK_URL_PATH" | tr -d '\r')
  got=$(sed -n 's/^[Xx]-[Kk]ubernetes-[Pp][Ff]-[Pp]riority[Ll]evel-[Uu][Ii][Dd]: //p' <<<"$head")
  code=$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' <<<"$head")
  [[ $got == "$PL_UID" && $code == 200 ]] && break
  sleep 0.1
done
[[ $got == "$PL_UID" && $code == 200 ]] || die "GET $CHECK_URL_PATH by $LIGHT: HTTP $code, PriorityLevel UID '$got' (want 200 from bench-apf, '$PL_UID')"
LIST_BYTES=$(curl -sS -o /dev/null -w '%{size_download}' --cacert "$KG_DIR/pki/ca.crt" \
  -H "Authorization: Bearer ${TOKEN[$LIGHT]}" "https://127.0.0.1:$KG_PORT$LIST_URL_PATH")
kg_curl /metrics >"$RUN/metrics.txt"
NOMINAL=$(sed -n 's/^apiserver_flowcontrol_nominal_limit_seats{priority_level="bench-apf"} //p' "$RUN/metrics.txt" | head -1)
log "bench-apf: uid $PL_UID, nominal seats ${NOMINAL:-?}; LIST = $LIST_BYTES bytes"
{
  echo "fair kubegate pid=$FAIR_PID maxRequestsInflight=$MAX_RI maxMutatingRequestsInflight=$MAX_MRI"
  echo "bench-apf: shares=$SHARES queues=64 handSize=1 queueLengthLimit=$QLL nominal_seats=${NOMINAL:-?} list_bytes=$LIST_BYTES cms=$CMS"
  echo "users: light=$LIGHT heavy=$HEAVY equal=${EQUALS[*]}"
} >>"$OUT/meta.txt"

# the request every user sends
REQ=(--url "https://127.0.0.1:$KG_PORT$LIST_URL_PATH")
[[ $REQUEST == dryrun ]] && REQ=(--url "https://127.0.0.1:$KG_PORT$LIST_URL_PATH?dryRun=All")
[[ $REQUEST == proxied ]] && REQ=(--url "https://127.0.0.1:$KG_PORT$PROXIED_URL_PATH")
if [[ $REQUEST == create || $REQUEST == dryrun ]]; then
  printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b-{run}-{n}","namespace":"apf-bench"},"data":{"k":"%s"}}' \
    "$(printf 'v%.0s' {1..200})" >"$RUN/create.json"
  REQ+=(--method POST --body-file "$RUN/create.json")
  for ((i = 0; i < WATCHERS; i++)); do   # clients: pinned with the load generators
    "${LG_PIN[@]}" curl -sSN --max-time 1800 --cacert "$KG_DIR/pki/ca.crt" --cert "$KG_DIR/pki/admin.crt" \
      --key "$KG_DIR/pki/admin.key" -o /dev/null "https://127.0.0.1:$KG_PORT$LIST_URL_PATH?watch=1" &
    STARTED+=("$!")
  done
  sleep 1
fi
echo "request=$REQUEST watchers=$([[ $REQUEST == create || $REQUEST == dryrun ]] && echo "$WATCHERS" || echo 0) delay_ms=$DELAY_MS" >>"$OUT/meta.txt"
# capacity: one user, closed loop, enough connections to keep every seat busy and its queue
# non-empty but below queueLengthLimit (no 429s): the 2xx rate is the level's
CAP_CONNS=$(( QLL - 2 ))
log "warm-up ${WARMUP}s, then capacity: closed loop, $CAP_CONNS connections, one user, $(( WARMUP > 3 ? WARMUP : 3 ))s"
lg "$LIGHT" "$RUN/warmup.out" "$CAP_CONNS" "${REQ[@]}" -d "$WARMUP"; wait_lgs
lg "$LIGHT" "$OUT/capacity.txt" "$CAP_CONNS" "${REQ[@]}" -d "$(( WARMUP > 3 ? WARMUP : 3 ))"; wait_lgs
CAPACITY=$(python3 -c 'import sys; print(round(int(sys.argv[1]) * 1e6 / int(sys.argv[2]), 1))' \
  "$(field "$OUT/capacity.txt" ok)" "$(field "$OUT/capacity.txt" duration_us)")
read -r LIGHT_RATE HEAVY_RATE EQUAL_RATE < <(python3 -c '
import sys
cap, frac, users, load = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
light = max(1.0, round(cap * frac, 1))
print(light, round(10 * light, 1), round(cap * load / users, 1))' "$CAPACITY" "$LIGHT_FRACTION" "$EQUAL_USERS" "$EQUAL_LOAD")
log "capacity ${CAPACITY} requests/s (p50 $(field "$OUT/capacity.txt" ok_p50_us) us); light $LIGHT_RATE/s, heavy $HEAVY_RATE/s, equal users $EQUAL_RATE/s each"
echo "capacity_conns=$CAP_CONNS capacity_rps=$CAPACITY light_rate=$LIGHT_RATE heavy_rate=$HEAVY_RATE equal_rate=$EQUAL_RATE phase_seconds=$DURATION" >>"$OUT/meta.txt"

# phase_begin / phase_end NAME : kubegate's metrics and CPU time around a phase; phase_end
# appends "NAME server_cpu_pct=..." to $OUT/phases.txt (% of one CPU over the phase's wall time)
phase_begin() { kg_curl /metrics >"$RUN/metrics.before"; PH_J0=$(pid_jiffies "$FAIR_PID"); PH_T0=$EPOCHREALTIME; }
phase_end() {
  local j1 t1=$EPOCHREALTIME
  j1=$(pid_jiffies "$FAIR_PID")
  kg_curl /metrics >"$OUT/metrics-$1.txt"
  cp "$RUN/metrics.before" "$OUT/metrics-$1.before.txt"
  python3 -c 'import sys; j0, j1, t0, t1, hz = map(float, sys.argv[2:]); print(f"{sys.argv[1]} server_cpu_pct={100 * (j1 - j0) / hz / (t1 - t0):.0f}")' \
    "$1" "$PH_J0" "$j1" "$PH_T0" "$t1" "$HZ" >>"$OUT/phases.txt"
}

log "(a1) light alone: $LIGHT_RATE/s open loop, ${DURATION}s"
phase_begin
lg "$LIGHT" "$OUT/a1-light-alone.txt" "$LIGHT_CONNS" "${REQ[@]}" --rate "$LIGHT_RATE" -d "$DURATION"; wait_lgs
phase_end a1
log "(a2) light $LIGHT_RATE/s + heavy $HEAVY_RATE/s, ${DURATION}s"
at=$(start_time 3)
phase_begin
lg "$LIGHT" "$OUT/a2-light.txt" "$LIGHT_CONNS" "${REQ[@]}" --rate "$LIGHT_RATE" -d "$DURATION" --start-at "$at"
lg "$HEAVY" "$OUT/a2-heavy.txt" "$HEAVY_CONNS" "${REQ[@]}" --rate "$HEAVY_RATE" -d "$DURATION" --start-at "$at"
wait_lgs
phase_end a2
for ((r = 2; r <= ISO_REPEATS; r++)); do
  log "(a) repeat $r of $ISO_REPEATS: light alone, then light + heavy, ${DURATION}s each"
  lg "$LIGHT" "$OUT/a1-light-alone.r$r.txt" "$LIGHT_CONNS" "${REQ[@]}" --rate "$LIGHT_RATE" -d "$DURATION"; wait_lgs
  at=$(start_time 3)
  lg "$LIGHT" "$OUT/a2-light.r$r.txt" "$LIGHT_CONNS" "${REQ[@]}" --rate "$LIGHT_RATE" -d "$DURATION" --start-at "$at"
  lg "$HEAVY" "$OUT/a2-heavy.r$r.txt" "$HEAVY_CONNS" "${REQ[@]}" --rate "$HEAVY_RATE" -d "$DURATION" --start-at "$at"
  wait_lgs
done
log "(b) $EQUAL_USERS equal users at $EQUAL_RATE/s each, ${DURATION}s"
at=$(start_time 3)
phase_begin
for u in "${EQUALS[@]}"; do
  lg "$u" "$OUT/b-$u.txt" "$EQUAL_CONNS" "${REQ[@]}" --rate "$EQUAL_RATE" -d "$DURATION" --start-at "$at"
done
wait_lgs
phase_end b
kg_curl /metrics >"$OUT/metrics-after.txt"
stop_kubegate
fi

# ----------------------------------------------------------------------------- (c) overhead
if [[ " $PHASES " == *" overhead "* ]]; then
if [[ ${OH_H2:-0} == 1 ]]; then
  need_tools h2load
  LOADGEN_BIN=$BENCH_DIR/tools/h2load-as-loadgen
fi
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
declare -A PORT=() DIR=() PIDS=()
next_port=17471
for t in apf off; do
  if [[ $t == apf || $OH_CONTROL == 1 ]]; then kg_config priorityAndFairness 400 200; else kg_config maxInFlight 0 0; fi >"$RUN/$t.yaml"
  start_kubegate "$RUN/kubegate-$t" "$(free_port "$next_port")" --config "$RUN/$t.yaml"
  PORT[$t]=$KG_PORT; DIR[$t]=$KG_DIR; PIDS[$t]=$KG_PID; next_port=$(( KG_PORT + 1 ))
  populate "$KG_DIR" "$KG_PORT" 0
  curl -sS -o /dev/null -D "$OUT/overhead-$t.headers" --cacert "$KG_DIR/pki/ca.crt" \
    -H "Authorization: Bearer ${TOKEN[bench-overhead]}" "https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps/bench-get"
done
grep -qi '^x-kubernetes-pf-prioritylevel-uid' "$OUT/overhead-apf.headers" || die "the APF kubegate sent no X-Kubernetes-PF-* headers"
if [[ $OH_CONTROL != 1 ]] && grep -qi '^x-kubernetes-pf-' "$OUT/overhead-off.headers"; then
  die "the maxInFlight kubegate sent X-Kubernetes-PF-* headers"
fi
oh_args() {  # target -> loadgen arguments (one per line)
  printf '%s\n' --url "https://127.0.0.1:${PORT[$1]}/api/v1/namespaces/default/configmaps/bench-get" \
    --ca "${DIR[$1]}/pki/ca.crt" --header "Authorization: Bearer ${TOKEN[bench-overhead]}"
}
for t in apf off; do
  mapfile -t a < <(oh_args "$t")
  (( WARMUP > 0 )) && { log "warm-up $t ${WARMUP}s"; run_loadgen "$RUN/warmup.out" "$OH_CONNS" "${a[@]}" -d "$WARMUP"; }
done
for t in apf off; do oh_args "$t" >"$RUN/args-$t"; done
for ((r = 1; r <= OH_ROUNDS; r++)); do
  order=(apf off); (( r % 2 == 0 )) && order=(off apf)
  if [[ $OH_SIDE_BY_SIDE == 1 ]]; then
    measured_pair "$r" "$OH_CONNS" "$OH_DURATION" \
      "${order[0]}" "${PIDS[${order[0]}]}" "$OUT/overhead-${order[0]}.r$r.txt" "$RUN/args-${order[0]}" \
      "${order[1]}" "${PIDS[${order[1]}]}" "$OUT/overhead-${order[1]}.r$r.txt" "$RUN/args-${order[1]}"
    continue
  fi
  for t in "${order[@]}"; do
    mapfile -t a <"$RUN/args-$t"
    measured_run "$r,$t,$OH_CONNS" "$OUT/overhead-$t.r$r.txt" "$OH_CONNS" "${PIDS[$t]}" "${a[@]}" -d "$OH_DURATION"
  done
done
echo "overhead: apf pid=${PIDS[apf]} (400+200 seats) off pid=${PIDS[off]} ($([[ $OH_CONTROL == 1 ]] && echo 'APF too: control run' || echo 'maxInFlight 0/0')) conns=$OH_CONNS rounds=$OH_ROUNDS duration=$OH_DURATION side_by_side=$OH_SIDE_BY_SIDE control=$OH_CONTROL client=$([[ ${OH_H2:-0} == 1 ]] && echo h2load-http2 || echo loadgen-http1.1)" >>"$OUT/meta.txt"
# OH_PERF=1: after the rounds, measure each server under the same load with `perf stat`
# (task-clock and context switches; instructions and cycles where the VM exposes them) and then
# sample it (perf cpu-clock, flat; OH_PERF_CG=dwarf,16384 adds call graphs and a callers
# report) so the two can be compared per symbol: $OUT/perf-<target>.txt, perf-<target>.dso.txt,
# perfstat-<target>.txt
if [[ ${OH_PERF:-0} == 1 ]]; then
  need_tools perf
  for t in apf off; do
    mapfile -t a < <(oh_args "$t")
    "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$OH_CONNS" -t "$(loadgen_threads "$OH_CONNS")" "${a[@]}" \
      -d "$(( 2 * OH_DURATION + 3 ))" >"$OUT/perf-$t.load.txt" 2>&1 &
    lgp=$!; STARTED+=("$lgp")
    sleep 1
    "${LG_PIN[@]}" perf stat -x, -e task-clock,instructions,cycles,context-switches -p "${PIDS[$t]}" \
      -o "$OUT/perfstat-$t.txt" -- sleep "$OH_DURATION" >/dev/null 2>&1 || true
    cg=(); [[ -n ${OH_PERF_CG:-} ]] && cg=(--call-graph "$OH_PERF_CG")   # e.g. OH_PERF_CG=dwarf,16384
    "${LG_PIN[@]}" perf record -q -o "$RUN/perf-$t.data" -F 999 "${cg[@]}" -p "${PIDS[$t]}" -- sleep "$OH_DURATION" >/dev/null 2>&1 || true
    [[ -n ${OH_PERF_CG:-} ]] && perf report -i "$RUN/perf-$t.data" --stdio --no-children --sort symbol -G \
      --percent-limit 0.5 2>/dev/null | head -3000 >"$OUT/perf-$t.callers.txt"
    wait "$lgp" || true; forget_pid "$lgp"
    perf report -i "$RUN/perf-$t.data" --stdio --no-children --sort dso,symbol 2>/dev/null |
      grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' | head -150 >"$OUT/perf-$t.txt" || true
    perf report -i "$RUN/perf-$t.data" --stdio --no-children --sort dso 2>/dev/null |
      grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' >"$OUT/perf-$t.dso.txt" || true
    log "perf profile of $t: $OUT/perf-$t.txt ($(result_field "$OUT/perf-$t.load.txt" rps) requests/s over the stat and the sampling)"
  done
fi
fi

# ----------------------------------------------------------------------------- summary
python3 - "$OUT" "$COMMAND" "${EQUALS[@]}" <<'PY' | tee "$OUT/summary.txt"
import csv, os, statistics as st, sys
out, command, equals = sys.argv[1], sys.argv[2], sys.argv[3:]
def res(name):
    text = open(f"{out}/{name}").read()
    return {k: v for k, v in (x.split("=", 1) for x in text.split("RESULT", 1)[1].split() if "=" in x)}
meta = dict(kv.split("=", 1) for line in open(f"{out}/meta.txt") for kv in line.split() if "=" in kv)
verdict = lambda ok: "met" if ok else "NOT MET"
num = lambda r, k: float(r[k])
served = lambda r: num(r, "ok") / num(r, "expected") if num(r, "expected") else float("nan")

def apf_wait(phase, schema):
    """The schema's dispatched requests in a phase: mean queue wait and the p99's bucket bound."""
    def read(path):
        b, s, c = {}, 0.0, 0.0
        for line in open(path):
            if not line.startswith("apiserver_flowcontrol_request_wait_duration_seconds") or \
                    f'flow_schema="{schema}"' not in line or 'execute="true"' not in line:
                continue
            name, value = line.rsplit(" ", 1)
            if "_bucket" in name:
                b[name.split('le="')[1].split('"')[0]] = float(value)
            elif "_sum" in name:
                s = float(value)
            elif "_count" in name:
                c = float(value)
        return b, s, c
    b0, s0, c0 = read(f"{out}/metrics-{phase}.before.txt")
    b1, s1, c1 = read(f"{out}/metrics-{phase}.txt")
    n = c1 - c0
    if n <= 0:
        return "no dispatches"
    p99 = next((le for le in sorted(b1, key=lambda x: float("inf") if x == "+Inf" else float(x))
                if b1[le] - b0.get(le, 0) >= 0.99 * n), "+Inf")
    return f"mean {1000 * (s1 - s0) / n:.1f} ms, p99 <= {float(p99) * 1000:.0f} ms ({int(n)} dispatched)"

def fairness():
    dur = float(meta["phase_seconds"])
    request = {
        "create": f"CREATE of a ~300 B ConfigMap with {meta['watchers']} watchers (seat held 5 ms after the write)",
        "dryrun": f"dry-run CREATE (dryRun=All: validated, not stored) of a ~300 B ConfigMap with {meta['watchers']} watchers (seat held 5 ms after it)",
        "proxied": f"GET proxied to an APIService backend that answers after {meta['delay_ms']} ms (seat held while it waits)",
    }.get(meta["request"], f"LIST of {meta['cms']} ConfigMaps ({int(meta['list_bytes']) // 1024} KiB)")
    print(f"Flow control (issue 6): priority level bench-apf, {meta['nominal_seats']} seat(s), 64 queues, hand size 1, "
          f"queueLengthLimit {meta['queueLengthLimit']}; request = {request}")
    print(f"level capacity (2xx/s of one user, closed loop, {meta['capacity_conns']} conns): "
          f"{float(meta['capacity_rps']):.0f} requests/s; open-loop phases {dur:.0f} s each")
    print()
    a1, a2, hv = res("a1-light-alone.txt"), res("a2-light.txt"), res("a2-heavy.txt")
    print("(a) isolation           rate/s  due    2xx    429  unsent  served   p50 ms   p99 ms")
    for label, r in (("light alone", a1), ("light with heavy", a2), ("heavy with light", hv)):
        print(f"    {label:<18}{num(r,'rate'):>8.1f}{int(num(r,'expected')):>6}{int(num(r,'ok')):>7}{int(num(r,'r429')):>7}"
              f"{int(num(r,'unsent')):>8}{100*served(r):>7.1f}%{num(r,'ok_p50_us')/1000:>9.1f}{num(r,'ok_p99_us')/1000:>9.1f}")
    phases = {l.split()[0]: dict(kv.split("=", 1) for kv in l.split()[1:]) for l in open(f"{out}/phases.txt")}
    print(f"    light's queue wait in kubegate (its FlowSchema's wait histogram): alone {apf_wait('a1', 'bench-apf-light')}; "
          f"with heavy {apf_wait('a2', 'bench-apf-light')}")
    print(f"    kubegate CPU (% of its one core): alone {phases['a1']['server_cpu_pct']} %, "
          f"with heavy {phases['a2']['server_cpu_pct']} %; (b) {phases['b']['server_cpu_pct']} %")
    frac, ratio = served(a2), num(a2, "ok_p99_us") / max(1.0, num(a1, "ok_p99_us"))
    # Further alone / with-heavy pairs (ISO_REPEATS), each run back to back.
    pairs = [(a1, a2)]
    r = 2
    while os.path.exists(f"{out}/a1-light-alone.r{r}.txt"):
        pairs.append((res(f"a1-light-alone.r{r}.txt"), res(f"a2-light.r{r}.txt")))
        r += 1
    ratios = [num(w, "ok_p99_us") / max(1.0, num(alone, "ok_p99_us")) for alone, w in pairs]
    fracs = [served(w) for _, w in pairs]
    if len(pairs) > 1:
        print("    repeats (alone p99 ms / with heavy p99 ms / ratio / served): " + "; ".join(
            f"{num(alone,'ok_p99_us')/1000:.1f} / {num(w,'ok_p99_us')/1000:.1f} / {x:.2f}x / {100*f:.1f} %"
            for (alone, w), x, f in zip(pairs, ratios, fracs)))
        frac, ratio = min(fracs), st.median(ratios)
    which = f" (median of {len(pairs)} pairs)" if len(pairs) > 1 else ""
    lowest = f" (lowest of {len(pairs)} pairs)" if len(pairs) > 1 else ""
    print(f"    light served with heavy{lowest}: {100*frac:.1f} % (target >= 95 %): {verdict(frac >= 0.95)}")
    print(f"    light p99 with heavy / alone{which}: {ratio:.2f}x (target <= 2x): {verdict(ratio <= 2.0)}")
    print(f"    heavy served {num(hv,'ok')/dur:.0f}/s of {num(hv,'rate'):.0f}/s offered; "
          f"light+heavy 2xx/s = {(num(a2,'ok')+num(hv,'ok'))/dur:.0f}")
    print()
    rates = []
    print("(b) fairness            rate/s  due    2xx    429  unsent  2xx/s    p50 ms   p99 ms")
    for u in equals:
        r = res(f"b-{u}.txt")
        rates.append(num(r, "ok") / dur)
        print(f"    {u:<18}{num(r,'rate'):>8.1f}{int(num(r,'expected')):>6}{int(num(r,'ok')):>7}{int(num(r,'r429')):>7}"
              f"{int(num(r,'unsent')):>8}{rates[-1]:>7.1f}{num(r,'ok_p50_us')/1000:>10.1f}{num(r,'ok_p99_us')/1000:>9.1f}")
    jain = sum(rates) ** 2 / (len(rates) * sum(x * x for x in rates)) if any(rates) else float("nan")
    print(f"    Jain's index over {len(rates)} users' 2xx/s: {jain:.3f} (target >= 0.95): {verdict(jain >= 0.95)}")
    print()

def overhead():
    rows = list(csv.DictReader(open(f"{out}/runs.csv")))
    by = {}
    for r in rows:
        by.setdefault(r["target"], {})[int(r["round"])] = r
    side_by_side, control = meta.get("side_by_side") == "1", meta.get("control") == "1"
    how = "rounds, both servers loaded at once" if side_by_side else "interleaved rounds"
    print(f"(c) overhead: GET one ~1 KiB ConfigMap as a token user, closed loop, c={rows[0]['conns']}, "
          f"{len(by.get('apf', {}))} {how}" + (" -- CONTROL RUN: APF on both servers" if control else ""))
    print(f"    {'target':<26}{'rps':>8}{'p50 us':>8}{'p99 us':>8}{'srv us/req':>11}{'foreign cpu%':>13}")
    off_label = "APF again (control)" if control else "maxInFlight 0/0 (off)"
    for t, label in (("apf", "APF (400+200 seats)"), ("off", off_label)):
        runs = by.get(t, {})
        f = lambda k: [float(x[k]) for x in runs.values()]
        flag = "  ERRORS" if any(int(x["errors"]) + int(x["non2xx"]) for x in runs.values()) else ""
        print(f"    {label:<26}{st.median(f('rps')):>8.0f}{st.median(f('p50_us')):>8.0f}{st.median(f('p99_us')):>8.0f}"
              f"{st.median(f('server_us_per_req')):>11.1f}{st.median(f('cpu_foreign_pct')):>13.0f}{flag}")
    def paired(k):
        v = [float(by["apf"][i][k]) / float(by["off"][i][k])
             for i in by.get("apf", {}) if i in by.get("off", {}) and float(by["off"][i][k])]
        return st.median(v) if v else float("nan")
    rps_ratio, cpu_ratio = paired("rps"), paired("server_us_per_req")
    if control:
        print(f"    APF/APF requests/s (median of paired rounds): {rps_ratio:.3f}, server CPU/request "
              f"{cpu_ratio:.3f}x: the method's own error (1.000 is exact)")
    else:
        print(f"    APF/off requests/s (median of paired rounds): {rps_ratio:.3f} (target >= 0.95): "
              f"{verdict(rps_ratio >= 0.95)}; server CPU/request {cpu_ratio:.3f}x")
    print()

print()
if os.path.exists(f"{out}/a1-light-alone.txt"):
    fairness()
if os.path.exists(f"{out}/runs.csv"):
    overhead()
print(f"command: {command}")
PY
log "done; results in $OUT"

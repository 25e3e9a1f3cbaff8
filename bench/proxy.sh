#!/usr/bin/env bash
# bench/proxy.sh - proxy benchmark: a GET proxied through kubegate to a remote APIService
# backend, next to nginx as a TLS reverse proxy and the backend itself, in one run of the
# project's reference harness (shared/bench/proxy_overhead.sh), against the same backend.
#
#   direct_tls  https://127.0.0.1:$BACKEND_TLS_PORT/...  the harness's fixed-response backend (hyper, TLS)
#   nginx_tls   https://127.0.0.1:$NGINX_TLS_PORT/...    nginx TLS front -> plain HTTP/1.1 keep-alive upstream, no auth
#   kubegate    https://127.0.0.1:$KG_PORT/apis/bench.example.com/v1/namespaces/default/widgets/x
#               TLS front, ServiceAccount bearer token (cached after the first request), RBAC
#               (the SA may `get` widgets.bench.example.com through a RoleBinding), then proxied
#               to the backend's TLS port: APIService v1.bench.example.com with the annotation
#               kubegate.io/backend-url and caBundle = the CA of the backend's certificate
#               (made here, see below; BACKEND_TLS=insecure: insecureSkipTLSVerify instead);
#               kubegate presents its front-proxy client certificate and adds X-Remote-*.
#
# How: kubegate is started once on a fresh data dir (loopback, RBAC, the defaults) to create the
# ServiceAccount, its token, the ClusterRole + RoleBinding and the APIService, then stopped;
# the harness then starts the backend, nginx and - through EXTRA_CMD - kubegate again on the
# same data dir, so all three are pinned alike (SERVER_CPUS), measured in the same interleaved
# rounds with the same load generator (wrk, or TOOL=h2load), and stopped by PID. kubegate's
# availability controller probes the backend as soon as it starts and proxies once
# Available=True (the harness waits for a 200 before measuring). While the harness runs, `ss`
# samples kubegate's established connections to the backend every 0.5 s (upstream pooling).
#
# Targets (reported, not asserted): kubegate >= 1.0x nginx's requests/s, <= 1.0x its CPU per
# request, p99 <= nginx's p99 + 0.2 ms. kubegate runs with its defaults, so API Priority and
# Fairness classifies every request (nginx has no such step).
#
# Usage: bench/proxy.sh                  (settings are env vars)
#   ROUNDS=2 DURATION=5 bench/proxy.sh
#   TOOL=h2load bench/proxy.sh           HTTP/2 from the client to all three targets
#   KG_LOG_LEVEL=debug bench/proxy.sh    kubegate's log (harness run dir extra.log, copied to $OUT)
# Output: $RESULTS/proxy/summary.txt (table, target verdicts, upstream connections per run),
#         upstream-conns.txt (raw ss samples), harness/ (the harness's runs.csv, summary.txt, raw
#         load-generator output), harness.log, kubegate.log, kubegate-setup.log, meta.txt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HARNESS=${HARNESS:-$(cd "$REPO_DIR/.." && pwd)/shared/bench/proxy_overhead.sh}
PERFBASE=${PERFBASE:-$WORK/perfbase}        # the harness's WORK (backend build, its TLS cert, run dir)
CONNS=${CONNS:-"1 64"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
TOOL=${TOOL:-wrk}
TARGETS=${TARGETS:-"direct_tls nginx_tls"}  # harness targets; kubegate is appended (EXTRA_NAME)
BACKEND_TLS_PORT=${BACKEND_TLS_PORT:-18443}
KG_LOG_LEVEL=${KG_LOG_LEVEL:-}              # e.g. debug, or kubegate=debug
SAMPLE_INTERVAL=${SAMPLE_INTERVAL:-0.5}     # seconds between `ss` samples of upstream connections
GROUP=bench.example.com
VERSION=v1
REQ_PATH=/apis/$GROUP/$VERSION/namespaces/default/widgets/x

need_tools kubectl nginx openssl ss "$TOOL"
[[ -x $HARNESS ]] || die "reference harness not found at $HARNESS (set HARNESS=)"
need_tools curl python3 taskset cargo
mkdir -p "$WORK" "$RESULTS"
build_kubegate
OUT=$RESULTS/proxy
RUN=$WORK/run/proxy
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
machine_info >"$OUT/meta.txt"

# ----------------------------------------------------------------------------- backend certificate
# The harness serves $PERFBASE/tls/cert.pem and creates it on first use only, as a self-signed
# certificate with CA:TRUE (`openssl req -x509`). rustls/webpki, which kubegate uses towards
# backends, refuses a CA certificate as a server's own certificate (CaUsedAsEndEntity), so the
# certificate is made here first instead: a P-256 CA (ca.pem, the APIService's caBundle) and a
# P-256 leaf for 127.0.0.1/localhost signed by it (cert.pem/key.pem, served by the backend and
# nginx). BACKEND_TLS=insecure registers the APIService with insecureSkipTLSVerify instead.
BACKEND_TLS=${BACKEND_TLS:-ca}
TLS_DIR=$PERFBASE/tls
mkdir -p "$TLS_DIR"
[[ -s $TLS_DIR/cert.pem ]] || make_backend_tls "$TLS_DIR"
if [[ $BACKEND_TLS == ca ]]; then
  [[ -s $TLS_DIR/ca.pem ]] || die "$TLS_DIR/cert.pem was not made by this script (no ca.pem next to it; the harness's own self-signed CA:TRUE certificate is refused by rustls as a server certificate): use a fresh PERFBASE=<dir>, or BACKEND_TLS=insecure"
  openssl verify -CAfile "$TLS_DIR/ca.pem" "$TLS_DIR/cert.pem" >/dev/null || die "$TLS_DIR/cert.pem does not verify against ca.pem"
  TLS_SPEC="caBundle: $(base64 -w0 <"$TLS_DIR/ca.pem")"
elif [[ $BACKEND_TLS == insecure ]]; then
  TLS_SPEC="insecureSkipTLSVerify: true"
else
  die "BACKEND_TLS must be ca or insecure"
fi

# ----------------------------------------------------------------------------- setup (kubegate, pass 1)
KG_LOG_ARGS=(); [[ -n $KG_LOG_LEVEL ]] && KG_LOG_ARGS=(--log-level "$KG_LOG_LEVEL")
start_kubegate "$RUN/kubegate-data" "$(free_port 17480)" ${KG_LOG_ARGS[@]+"${KG_LOG_ARGS[@]}"}
export KUBECONFIG=$KG_DIR/admin.kubeconfig
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: bench-proxy, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bench-widgets-reader}
rules:
- apiGroups: [$GROUP]
  resources: [widgets]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bench-proxy-widgets, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bench-widgets-reader}
subjects:
- {kind: ServiceAccount, name: bench-proxy, namespace: default}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: $VERSION.$GROUP
  annotations:
    kubegate.io/backend-url: https://127.0.0.1:$BACKEND_TLS_PORT
spec:
  group: $GROUP
  version: $VERSION
  $TLS_SPEC
  groupPriorityMinimum: 1000
  versionPriority: 15
YAML
TOKEN=$(kubectl create token bench-proxy --duration 2h)
# Check the grant with a SubjectAccessReview (kubectl auth can-i cannot name the group of a
# resource that discovery does not list yet).
can=$(kg_curl /apis/authorization.k8s.io/v1/subjectaccessreviews -X POST -H 'Content-Type: application/json' \
  --data-binary @- <<JSON | python3 -c 'import json, sys; print(str(json.load(sys.stdin).get("status", {}).get("allowed", False)).lower())'
{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
 "spec": {"user": "system:serviceaccount:default:bench-proxy",
          "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
          "resourceAttributes": {"group": "$GROUP", "version": "$VERSION", "resource": "widgets",
                                 "verb": "get", "namespace": "default", "name": "x"}}}
JSON
)
[[ $can == true ]] || die "RBAC setup: the ServiceAccount may not get widgets.$GROUP (SubjectAccessReview allowed=$can)"
log "ServiceAccount default/bench-proxy (token ${#TOKEN} bytes) may get widgets.$GROUP; APIService $VERSION.$GROUP -> https://127.0.0.1:$BACKEND_TLS_PORT"
kubectl get apiservice "$VERSION.$GROUP" -o wide >"$OUT/apiservice.before.txt" 2>&1 || true
KG_SETUP_LOG=$KG_DIR.log
stop_kubegate

# ----------------------------------------------------------------------------- upstream connection sampler
# Every SAMPLE_INTERVAL: epoch, then one line per established TCP connection from kubegate's
# process to the backend's TLS port ("C <local port> <bytes received so far>"). wrk's
# direct_tls connections are not kubegate's and are filtered out by the owning process.
SAMPLES=$OUT/upstream-conns.txt
: >"$SAMPLES"
# ss names a process by its command name (the binary's file name, at most 15 characters), so a
# KUBEGATE_BIN copied under another name is still recognised.
KG_COMM=$(basename "$KUBEGATE_BIN" | cut -c1-15)
(
  while :; do
    echo "T $EPOCHREALTIME"
    ss -Htnpi state established "( dport = :$BACKEND_TLS_PORT )" 2>/dev/null | awk -v comm="$KG_COMM" '
      function flush() { if (port != "") print "C " port " " rx; port = "" }
      /users:\(\(/ { flush(); if (index($0, "\"" comm "\",pid=")) { n = split($3, a, ":"); port = a[n]; rx = 0 }; next }
      port != "" && match($0, /bytes_received:[0-9]+/) { rx = substr($0, RSTART + 15, RLENGTH - 15) }
      END { flush() }'
    sleep "$SAMPLE_INTERVAL"
  done
) >>"$SAMPLES" &
SAMPLER_PID=$!
STARTED+=("$SAMPLER_PID")

# ----------------------------------------------------------------------------- the harness run
KG_CMD="$KUBEGATE_BIN serve --data-dir $KG_DIR --secure-port $KG_PORT --bind-address 127.0.0.1 ${KG_LOG_ARGS[*]:-}"
[[ -n $KUBEGATE_ENV ]] && KG_CMD="env $KUBEGATE_ENV $KG_CMD"
{
  echo "harness=$HARNESS PERFBASE=$PERFBASE TOOL=$TOOL CONNS='$CONNS' ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP TARGETS='$TARGETS kubegate'"
  echo "kubegate: $KG_CMD"
  echo "kubegate url: https://127.0.0.1:$KG_PORT$REQ_PATH (bearer: ServiceAccount default/bench-proxy token, ${#TOKEN} bytes)"
  echo "QUIET_MAX=$QUIET_MAX QUIET_WAIT=$QUIET_WAIT FOREIGN_MAX=$FOREIGN_MAX RETRIES=$RETRIES PIN=$PIN SERVER_CPUS=$SERVER_CPUS LOADGEN_CPUS=$LOADGEN_CPUS"
} >>"$OUT/meta.txt"
log "running the reference harness: $HARNESS (log: $OUT/harness.log)"
env WORK="$PERFBASE" RESULTS="$OUT/harness" TOOL="$TOOL" CONNS="$CONNS" ROUNDS="$ROUNDS" \
  DURATION="$DURATION" WARMUP="$WARMUP" TARGETS="$TARGETS" REQ_PATH="$REQ_PATH" \
  BACKEND_TLS_PORT="$BACKEND_TLS_PORT" PIN="$PIN" SERVER_CPUS="$SERVER_CPUS" LOADGEN_CPUS="$LOADGEN_CPUS" \
  QUIET_MAX="$QUIET_MAX" QUIET_WAIT="$QUIET_WAIT" FOREIGN_MAX="$FOREIGN_MAX" RETRIES="$RETRIES" \
  EXTRA_NAME=kubegate EXTRA_URL="https://127.0.0.1:$KG_PORT$REQ_PATH" \
  EXTRA_HEADER="Authorization: Bearer $TOKEN" EXTRA_CMD="$KG_CMD" \
  "$HARNESS" > >(tee "$OUT/harness.out") 2> >(tee "$OUT/harness.log" >&2) &
HARNESS_PID=$!
STARTED+=("$HARNESS_PID")
harness_rc=0
wait "$HARNESS_PID" || harness_rc=$?
forget_pid "$HARNESS_PID"
stop_pid "$SAMPLER_PID"; forget_pid "$SAMPLER_PID"
cp "$PERFBASE/run/extra.log" "$OUT/kubegate.log" 2>/dev/null || true
cp "$KG_SETUP_LOG" "$OUT/kubegate-setup.log" 2>/dev/null || true
if (( harness_rc != 0 )); then
  log "the harness failed (exit $harness_rc); kubegate's log (last lines of $OUT/kubegate.log):"
  tail -30 "$OUT/kubegate.log" >&2 || true
  die "no results (rerun with KG_LOG_LEVEL=debug for the proxy path's log)"
fi

# ----------------------------------------------------------------------------- summary
python3 - "$OUT/harness/runs.csv" "$OUT/harness.log" "$SAMPLES" "$DURATION" "$FOREIGN_MAX" <<'EOF' | tee "$OUT/summary.txt"
import csv, re, statistics as st, sys, datetime as dt
runs_csv, harness_log, samples, duration, foreign_max = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
med = st.median
rows = list(csv.DictReader(open(runs_csv)))
by = {}
for r in rows:
    by.setdefault((r["target"], int(r["conns"])), {})[int(r["round"])] = r
tool = rows[0]["tool"] if rows else "?"
def proxy_us(t, r):
    return 0.0 if t == "direct_tls" else float(r["extra_us_per_req"] if t == "kubegate" else r["proxy_us_per_req"])
print()
print(f"GET of the backend's fixed ~1 KiB JSON body over TLS ({tool}), one harness run, interleaved rounds, same backend")
print("direct_tls = backend; nginx_tls = nginx TLS -> plain h1 keep-alive upstream, no auth;")
print("kubegate = TLS, SA bearer token (cached), RBAC, APIService proxy -> backend over TLS (front-proxy client cert)")
print("rps/p50/p99/CPU = median over rounds; x/nginx and x/direct = median of per-round paired ratios; p99-nginx in us")
print("proxy us/req = CPU of the proxy process per request (nginx master+worker / kubegate); backend us/req = the backend's")
print("cpu% = % of one core (be=backend px=proxy lg=load generator fg=others steal=stolen by the hypervisor: high steal = rerun)")
hdr = (f"{'target':<12}{'c':>4}{'rps':>9}{'p50 us':>8}{'p99 us':>8}{'proxy us/req':>13}{'backend us/req':>15}"
       f"{'rps/nginx':>10}{'cpu/nginx':>10}{'p99-nginx':>10}{'rps/direct':>11}   cpu% be/px/lg/fg/steal")
verdicts = []
for c in sorted({k[1] for k in by}):
    print(); print(hdr); print("-" * len(hdr))
    for t in ("direct_tls", "nginx_tls", "kubegate"):
        runs = by.get((t, c))
        if not runs: continue
        f = lambda k: [float(r[k]) for r in runs.values()]
        def paired(b, fn):
            base = by.get((b, c), {})
            v = [fn(runs[i], base[i]) for i in runs if i in base]
            return med(v) if v else float("nan")
        px = med(proxy_us(t, r) for r in runs.values())
        line = f"{t:<12}{c:>4}{med(f('rps')):>9.0f}{med(f('p50_us')):>8.0f}{med(f('p99_us')):>8.0f}{px:>13.2f}{med(f('be_us_per_req')):>15.2f}"
        if t == "kubegate":
            rr = paired("nginx_tls", lambda x, y: float(x["rps"]) / float(y["rps"]))
            cr = paired("nginx_tls", lambda x, y: proxy_us("kubegate", x) / proxy_us("nginx_tls", y) if proxy_us("nginx_tls", y) else float("nan"))
            pd = paired("nginx_tls", lambda x, y: float(x["p99_us"]) - float(y["p99_us"]))
            line += f"{rr:>10.3f}{cr:>10.2f}{pd:>+10.0f}"
            verdicts.append((c, rr, cr, pd))
        else:
            line += f"{'':>10}{'':>10}{'':>10}"
        if t != "direct_tls":
            line += f"{paired('direct_tls', lambda x, y: float(x['rps']) / float(y['rps'])):>11.3f}"
        else:
            line += f"{'':>11}"
        pxcol = "cpu_extra_pct" if t == "kubegate" else "cpu_proxy_pct"
        cpu = "/".join(f"{med(f(k)):.0f}" for k in ("cpu_backend_pct", pxcol, "cpu_loadgen_pct", "cpu_foreign_pct", "steal_pct"))
        flags = []
        if any(int(r["errors"]) + int(r["non2xx"]) for r in runs.values()): flags.append("ERRORS")
        if any(r["quiet"] == "0" or float(r["cpu_foreign_pct"]) > foreign_max for r in runs.values()): flags.append("NOISY")
        print(line + "   " + cpu + ("  " + ",".join(flags) if flags else ""))
print()
print("targets (not asserted): kubegate rps >= 1.0x nginx, proxy CPU/req <= 1.0x nginx, p99 <= nginx p99 + 200 us")
for c, rr, cr, pd in verdicts:
    yn = lambda ok: "met" if ok else "NOT met"
    print(f"  c={c}: rps {rr:.3f}x ({yn(rr >= 1.0)}), CPU {cr:.2f}x ({yn(cr <= 1.0)}), p99 {pd:+.0f} us ({yn(pd <= 200)})")

# upstream pooling: kubegate's established connections to the backend during its measured runs
today = dt.date.today()
windows = []   # (label, start_epoch, end_epoch)
for line in open(harness_log):
    m = re.match(r"\[(\d\d):(\d\d):(\d\d)\] r(\d+) c=(\d+) kubegate\s", line)
    if m:
        end = dt.datetime.combine(today, dt.time(int(m[1]), int(m[2]), int(m[3]))).timestamp()
        windows.append((f"r{m[4]} c={m[5]}", end - duration + 1, end - 1))
snaps = []     # (epoch, {local port: bytes received})
for line in open(samples):
    if line.startswith("T "): snaps.append((float(line.split()[1]), {}))
    elif line.startswith("C ") and snaps:
        f = line.split(); snaps[-1][1][f[1]] = int(f[2]) if len(f) > 2 else 0
print()
print("kubegate -> backend established TCP connections (ss every sample, inside each measured kubegate run;")
print("'carrying traffic' = connections whose received bytes grew during the run)")
print(f"{'run':<10}{'samples':>8}{'conns min/median/max':>22}{'distinct local ports':>22}{'carrying traffic':>18}")
for label, a, b in windows:
    inside = [p for t, p in snaps if a <= t <= b]
    if not inside: continue
    counts = [len(p) for p in inside]
    ports = {x for p in inside for x in p}
    busy = {x for x in ports if inside[-1].get(x, 0) > inside[0].get(x, 0) or x not in inside[0]}
    print(f"{label:<10}{len(inside):>8}{f'{min(counts)}/{med(counts):.0f}/{max(counts)}':>22}{len(ports):>22}{len(busy):>18}")
allports = {x for _, p in snaps for x in p}
print(f"distinct kubegate->backend connections seen over the whole run (incl. warm-ups, probes): {len(allports)}")
EOF
grep -E 'target (direct_tls|nginx_tls|kubegate) =' "$OUT/harness.log" | sed 's/^\[[^]]*\] //' >>"$OUT/meta.txt" || true
log "done; results in $OUT (harness runs: $OUT/harness/runs.csv)"

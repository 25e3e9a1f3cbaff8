# bench/lib.sh - shared helpers for the kubegate benchmarks (sourced, not run).
#
# Adapted from the project's reference harness shared/bench/proxy_overhead.sh: CPU pinning
# with taskset (servers on SERVER_CPUS, load generator on LOADGEN_CPUS), interleaved rounds,
# CPU time per request from /proc/<pid>/stat utime+stime, waiting for a quiet machine before
# a run and discarding runs during which other processes used the CPU.
#
# Every process a script starts is recorded in STARTED and stopped by PID on exit (never by
# name). Load targets are loopback addresses only.

# ----------------------------------------------------------------------------- settings
BENCH_DIR=${BENCH_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
REPO_DIR=${REPO_DIR:-$(cd "$BENCH_DIR/.." && pwd)}
WORK=${WORK:-/tmp/kgbench}                  # loadgen build, runtime dirs, data dirs, results
PIN=${PIN:-split}                           # split: servers on SERVER_CPUS, loadgen on LOADGEN_CPUS; none
SERVER_CPUS=${SERVER_CPUS:-0}
LOADGEN_CPUS=${LOADGEN_CPUS:-1}
LOADGEN_THREADS=${LOADGEN_THREADS:-}        # default: number of LOADGEN_CPUS (PIN=split) or nproc, capped at conns
KUBEGATE_BIN=${KUBEGATE_BIN:-$REPO_DIR/target/release/kubegate}
BUILD=${BUILD:-auto}                        # auto: build kubegate (release) only if the binary is missing; always; never
LOADGEN_BIN=${LOADGEN_BIN:-$WORK/loadgen-target/release/kubegate-loadgen}
SLOW_BACKEND_BIN=$(dirname "$LOADGEN_BIN")/slow-backend   # built with the load generator (bench/apf.sh REQUEST=proxied)
QUIET_MAX=${QUIET_MAX:-10}                  # before each run: wait until other processes use < this % of one CPU
QUIET_WAIT=${QUIET_WAIT:-60}                # ... but at most this many seconds, then run and flag it
FOREIGN_MAX=${FOREIGN_MAX:-15}              # after each run: others used > this % of one CPU -> discard and redo
RETRIES=${RETRIES:-2}                       # ... at most this many times, then keep it (flagged NOISY)
RESULTS=${RESULTS:-$WORK/results/$(date +%Y%m%d-%H%M%S)}
HZ=$(getconf CLK_TCK)
NCPU=$(grep -c '^cpu[0-9]' /proc/stat)

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_tools() {  # tool... : fail with an install hint
  local t missing=()
  for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
  if (( ${#missing[@]} )); then
    log "missing: ${missing[*]}"
    log "install hint (Debian): apt-get install wrk nghttp2-client nginx curl python3 util-linux; kubectl from its Debian/upstream package; cargo via rustup"
    die "required tools not found"
  fi
}

# ----------------------------------------------------------------------------- process bookkeeping
STARTED=()            # PIDs this script started, in start order
LOADGEN_PID=

children_of() {       # direct children of a PID, found through /proc (no name matching)
  local parent=$1 f rest
  for f in /proc/[0-9]*/stat; do
    { rest=$(<"$f"); } 2>/dev/null || continue
    rest=${rest##*) }
    set -- $rest
    [[ ${2:-} == "$parent" ]] && { f=${f#/proc/}; echo "${f%/stat}"; }
  done
  return 0
}

stop_pid() {  # pid [signal]
  local pid=$1 sig=${2:-TERM} i kids n
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kids=$(children_of "$pid")
  kill -"$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { log "pid $pid ignored $sig, sending KILL"; kill -KILL "$pid" 2>/dev/null || true; }
  wait "$pid" 2>/dev/null || true
  for i in $kids; do   # e.g. nginx workers: they exit with their master; make sure
    for ((n = 0; n < 30; n++)); do kill -0 "$i" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$i" 2>/dev/null && { log "child $i of $pid still alive, sending KILL"; kill -KILL "$i" 2>/dev/null || true; }
  done
  return 0
}

forget_pid() {  # remove a PID from STARTED (after stopping it ourselves)
  local p keep=()
  for p in "${STARTED[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  STARTED=("${keep[@]}")
}

cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  [[ -n $LOADGEN_PID ]] && stop_pid "$LOADGEN_PID"
  for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do stop_pid "${STARTED[i]}"; done
  (( ${#STARTED[@]} )) && log "stopped pids: ${STARTED[*]}"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# command prefixes (arrays, not functions: "prefix cmd &" must give $! = the real server PID)
SRV_PIN=(); LG_PIN=()
if [[ $PIN == split ]]; then
  SRV_PIN=(taskset -c "$SERVER_CPUS"); LG_PIN=(taskset -c "$LOADGEN_CPUS")
elif [[ $PIN != none ]]; then
  die "PIN must be split or none"
fi

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {  # preferred -> first free port from there
  local p=$1
  while port_busy "$p"; do p=$((p + 1)); done
  echo "$p"
}

# make_backend_tls DIR : a P-256 CA (DIR/ca.pem, an APIService's caBundle; ca.key) and a P-256
# server certificate for 127.0.0.1/localhost signed by it (DIR/cert.pem, DIR/key.pem). A CA
# certificate cannot serve as the server's own: rustls/webpki, which kubegate uses towards
# backends, refuses it (CaUsedAsEndEntity).
make_backend_tls() {
  local dir=$1
  mkdir -p "$dir"
  log "creating a P-256 CA and backend certificate (127.0.0.1, localhost) in $dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj /CN=kubegate-bench-backend-ca -addext 'basicConstraints=critical,CA:TRUE' \
    -addext 'keyUsage=critical,keyCertSign,cRLSign' \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -keyout "$dir/key.pem" -out "$dir/leaf.csr" 2>/dev/null
  printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=critical,CA:FALSE' \
    'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' >"$dir/leaf.ext"
  openssl x509 -req -in "$dir/leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 3650 -extfile "$dir/leaf.ext" -out "$dir/cert.pem" 2>/dev/null
  chmod 644 "$dir/key.pem"   # readable by a server started as another user (the harness does so)
}

# ----------------------------------------------------------------------------- builds
build_loadgen() {
  local newer
  # No binary yet (a fresh machine): find fails, and under pipefail that must not end the run.
  newer=$(find "$BENCH_DIR/loadgen/src" "$BENCH_DIR/loadgen/Cargo.toml" -newer "$LOADGEN_BIN" 2>/dev/null | head -1 || true)
  if [[ ! -x $LOADGEN_BIN || ! -x $SLOW_BACKEND_BIN || -n $newer ]]; then
    log "building the load generator (bench/loadgen, release) into $WORK/loadgen-target"
    cargo build --release --quiet --manifest-path "$BENCH_DIR/loadgen/Cargo.toml" \
      --target-dir "$WORK/loadgen-target" >&2 || die "loadgen build failed"
  fi
}

build_kubegate() {
  if [[ $BUILD == always || ( $BUILD == auto && ! -x $KUBEGATE_BIN ) ]]; then
    log "building kubegate: cargo build --release --bin kubegate (slow)"
    (cd "$REPO_DIR" && cargo build --release --bin kubegate >&2) || die "kubegate build failed"
  fi
  [[ -x $KUBEGATE_BIN ]] || die "$KUBEGATE_BIN not found (BUILD=$BUILD)"
}

prepare_common() {
  need_tools curl python3 taskset cargo
  mkdir -p "$WORK" "$RESULTS"
  build_loadgen
  build_kubegate
}

# ----------------------------------------------------------------------------- kubegate
KG_PID=; KG_DIR=; KG_PORT=
KUBEGATE_ENV=${KUBEGATE_ENV:-}                  # extra VAR=value words for kubegate's environment, e.g. MALLOC_ARENA_MAX=2
read -r -a KG_ENV <<<"$KUBEGATE_ENV"            # (scripts may also set KG_ENV, e.g. LD_PRELOAD in allocs.sh)
NGINX_ENV=(${NGINX_ENV[@]+"${NGINX_ENV[@]}"})   # same for nginx
# start_kubegate DATA_DIR PORT [extra kubegate flags...] : starts kubegate pinned to SERVER_CPUS,
# waits for /readyz
start_kubegate() {
  KG_DIR=$1; KG_PORT=$2; shift 2
  mkdir -p "$KG_DIR"
  port_busy "$KG_PORT" && die "port $KG_PORT already in use (not ours; refusing to touch it)"
  "${SRV_PIN[@]}" env ${KG_ENV[@]+"${KG_ENV[@]}"} "$KUBEGATE_BIN" serve --data-dir "$KG_DIR" --secure-port "$KG_PORT" \
    --bind-address 127.0.0.1 "$@" >>"$KG_DIR.log" 2>&1 &
  KG_PID=$!
  STARTED+=("$KG_PID")
  local i code
  for ((i = 0; i < 300; i++)); do
    kill -0 "$KG_PID" 2>/dev/null || { tail -20 "$KG_DIR.log" >&2; die "kubegate exited during start"; }
    code=$(curl -sk -o /dev/null -w '%{http_code}' --max-time 1 "https://127.0.0.1:$KG_PORT/readyz" || true)
    [[ $code == 200 && -s $KG_DIR/pki/admin.key ]] && break
    sleep 0.1
  done
  [[ $code == 200 ]] || die "kubegate did not become ready on :$KG_PORT (last code ${code:-none})"
  log "started kubegate pid $KG_PID on https://127.0.0.1:$KG_PORT (data $KG_DIR)"
}

stop_kubegate() {  # graceful (SIGTERM), by PID
  [[ -n $KG_PID ]] || return 0
  stop_pid "$KG_PID" TERM
  forget_pid "$KG_PID"
  log "stopped kubegate pid $KG_PID"
  KG_PID=
}

kg_curl() {  # path [curl args...] : curl kubegate as the admin user
  local path=$1; shift
  curl -sS --cacert "$KG_DIR/pki/ca.crt" --cert "$KG_DIR/pki/admin.crt" --key "$KG_DIR/pki/admin.key" \
    "$@" "https://127.0.0.1:$KG_PORT$path"
}

# configmap_json NAME TARGET_BYTES [NAMESPACE] : a ConfigMap whose request body is ~TARGET_BYTES
configmap_json() {
  python3 - "$1" "$2" "${3:-default}" <<'EOF'
import json, sys
name, target, ns = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def doc(pad):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns,
                     "labels": {"app.kubernetes.io/name": "bench", "app.kubernetes.io/part-of": "kubegate-bench"}},
        "data": {"config.yaml": "server:\n  port: 8080\n  logLevel: info\n",
                 "padding": "x" * pad}}, separators=(",", ":"))
base = len(doc(0))
print(doc(max(0, target - base)))
EOF
}

# ----------------------------------------------------------------------------- CPU accounting
# Machine-wide busy time is derived from idle time, which the kernel accounts exactly.
cpu_snapshot() {  # -> "wall_jiffies idle+iowait steal" (USER_HZ units, all CPUs)
  local _ user nice sys idle iow irq sirq steal now=$EPOCHREALTIME
  read -r _ user nice sys idle iow irq sirq steal _ </proc/stat
  now=${now/./}   # microseconds
  echo "$(( now * HZ * NCPU / 1000000 )) $((idle + iow)) $steal"
}

tcp_out_segs() {  # machine-wide TCP segments sent so far (both directions on loopback)
  awk '/^Tcp:/ { if (++n == 2) print $12 }' /proc/net/snmp
}

pid_jiffies() {  # pid... -> utime+stime of the PIDs and their current children (threads included)
  local sum=0 pid p rest
  for pid in "$@"; do
    for p in "$pid" $(children_of "$pid"); do
      { rest=$(<"/proc/$p/stat"); } 2>/dev/null || continue
      rest=${rest##*) }
      set -- $rest
      sum=$(( sum + ${12} + ${13} ))
    done
  done
  echo "$sum"
}

# load generator CPU = growth of this shell's reaped-children user+sys time ("times" builtin).
children_seconds() {  # file written by "times" -> seconds
  python3 - "$1" <<'EOF'
import re, sys
line = open(sys.argv[1]).read().splitlines()[1]
print(sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", line)))
EOF
}

wait_quiet() {  # -> prints "1" if the machine was quiet before the run, "0" if we gave up waiting
  local waited=0 w0 i0 w1 i1 busy
  while :; do
    read -r w0 i0 _ <<<"$(cpu_snapshot)"; sleep 1; read -r w1 i1 _ <<<"$(cpu_snapshot)"
    busy=$(( ((w1 - w0) - (i1 - i0)) * 100 * NCPU / (w1 - w0) ))  # % of one CPU; our servers are idle now
    (( busy < QUIET_MAX )) && { echo 1; return; }
    (( waited == 0 )) && log "machine busy (${busy}% of a CPU used by others), waiting up to ${QUIET_WAIT}s"
    (( ++waited >= QUIET_WAIT )) && { log "still busy (${busy}%), running anyway (flagged)"; echo 0; return; }
  done
}

loadgen_threads() {  # conns
  local n=$LOADGEN_THREADS
  if [[ -z $n ]]; then
    if [[ $PIN == split ]]; then n=$(taskset -c "$LOADGEN_CPUS" nproc); else n=$(nproc); fi
  fi
  (( n > $1 )) && n=$1
  echo "$n"
}

# run_loadgen OUTFILE CONNS loadgen-args... : runs the load generator pinned, in the background, waits
run_loadgen() {
  local out=$1 c=$2; shift 2
  "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$c" -t "$(loadgen_threads "$c")" "$@" >"$out" 2>"$out.err" &
  LOADGEN_PID=$!
  if ! wait "$LOADGEN_PID"; then LOADGEN_PID=; cat "$out" "$out.err" >&2; die "loadgen failed ($*)"; fi
  LOADGEN_PID=
  grep -q '^RESULT' "$out" || { cat "$out.err" >&2; die "no RESULT from loadgen"; }
}

result_field() {  # outfile key -> value
  grep '^RESULT' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# measured_run LINE_PREFIX OUTFILE CONNS "server pids" loadgen-args...
#   waits for a quiet machine, runs the loadgen, and appends one CSV line to $CSV:
#   <prefix>,requests,duration_us,rps,p50_us,p90_us,p99_us,errors,non2xx,cpu_server_pct,cpu_loadgen_pct,
#   cpu_foreign_pct,steal_pct,server_us_per_req,tcp_segs_per_req,quiet,retries
#   (tcp_segs_per_req: TCP segments sent machine-wide, both directions, per request: writes/flushes)
#   Runs disturbed by other processes (> FOREIGN_MAX % of a CPU) are logged in discarded.csv and redone.
CSV_HEADER="requests,duration_us,rps,p50_us,p90_us,p99_us,errors,non2xx,cpu_server_pct,cpu_loadgen_pct,cpu_foreign_pct,steal_pct,server_us_per_req,tcp_segs_per_req,quiet,retries"
measured_run() {
  local prefix=$1 out=$2 c=$3 pids=$4; shift 4
  local attempt quiet s0 s1 w0 i0 st0 w1 i1 st1 l0 l1 line cf g0 g1
  for ((attempt = 0; ; attempt++)); do
    quiet=$(wait_quiet)
    # snapshot order keeps the script's own /proc scanning outside the measured window
    s0=$(pid_jiffies $pids); g0=$(tcp_out_segs); times >"$WORK/times0"; read -r w0 i0 st0 <<<"$(cpu_snapshot)"
    run_loadgen "$out" "$c" "$@"
    read -r w1 i1 st1 <<<"$(cpu_snapshot)"; times >"$WORK/times1"; g1=$(tcp_out_segs); s1=$(pid_jiffies $pids)
    l0=$(children_seconds "$WORK/times0"); l1=$(children_seconds "$WORK/times1")
    line=$(python3 - "$out" <<EOF
import sys
kv = dict(x.split("=", 1) for x in open(sys.argv[1]).read().split("RESULT", 1)[1].split() if "=" in x)
hz = $HZ
req, dur = int(kv["requests"]), int(kv["duration_us"])
wall = ($w1 - $w0) / $NCPU / hz                       # seconds, incl. loadgen start/handshakes/exit
pct = lambda j: round(100.0 * j / hz / wall, 1)       # % of one CPU
srv, lg = $s1 - $s0, ($l1 - $l0) * hz
busy = ($w1 - $w0) - ($i1 - $i0) - ($st1 - $st0)
print(",".join(map(str, ["$prefix", req, dur, kv["rps"], kv["p50_us"], kv["p90_us"], kv["p99_us"], kv["errors"], kv["non2xx"],
    pct(srv), pct(lg), pct(busy - srv - lg), pct($st1 - $st0),
    round(1e6 * srv / hz / req, 2) if req else 0, round(($g1 - $g0) / req, 2) if req else 0, $quiet, $attempt])))
EOF
)
    cf=$(cut -d, -f$(( $(tr -cd , <<<"$prefix" | wc -c) + 12 )) <<<"$line")
    log "$prefix: $(sed -E 's/^RESULT //; s/ (status|bytes_in|connected|connect_ms|proto|cipher|alpn)=[^ ]*//g' "$out") | srvCPU us/req=$(awk -F, '{print $(NF-3)}' <<<"$line") segs/req=$(awk -F, '{print $(NF-2)}' <<<"$line") foreign=${cf}%"
    if (( $(result_field "$out" errors) + $(result_field "$out" non2xx) > 0 )); then
      log "WARNING: errors/non-2xx answers ($(result_field "$out" status)); $(head -c 300 "$out.err")"
    fi
    if (( ${cf%.*} > FOREIGN_MAX && attempt < RETRIES )); then
      echo "$line" >>"$RESULTS/discarded.csv"
      log "other processes used ${cf}% of a CPU during that run (> FOREIGN_MAX=$FOREIGN_MAX): discarded, retrying ($((attempt + 1))/$RETRIES)"
      continue
    fi
    echo "$line" >>"$CSV"
    break
  done
}

# measured_pair LINE_PREFIX CONNS SECONDS  NAME_A "PIDS_A" OUT_A ARGS_FILE_A  NAME_B "PIDS_B" OUT_B ARGS_FILE_B
#   A side-by-side A/B: two servers on the same CPUs are loaded at the same time, each by its
#   own load generator (CONNS connections, loadgen arguments one per line in ARGS_FILE_*), for
#   SECONDS. Both meet the same machine state, which drifts by ±20 % over seconds on a shared VM
#   and makes back-to-back rounds of the two a noisy comparison; the scheduler shares the CPU
#   between the two servers, so each one's requests/s follows its own cost per request.
#   Appends "<prefix>,NAME_A,CONNS,..." and "<prefix>,NAME_B,CONNS,..." to $CSV (measured_run's
#   columns; cpu_loadgen_pct, cpu_foreign_pct and tcp_segs_per_req are for the pair, the same on
#   both lines).
measured_pair() {
  local prefix=$1 c=$2 d=$3 na=$4 pa=$5 oa=$6 fa=$7 nb=$8 pb=$9 ob=${10} fb=${11}
  local -a aa ab f
  mapfile -t aa <"$fa"; mapfile -t ab <"$fb"
  local quiet sa0 sb0 sa1 sb1 w0 i0 st0 w1 i1 st1 l0 l1 la lb g0 g1 line
  quiet=$(wait_quiet)
  sa0=$(pid_jiffies $pa); sb0=$(pid_jiffies $pb); g0=$(tcp_out_segs); times >"$WORK/times0"
  read -r w0 i0 st0 <<<"$(cpu_snapshot)"
  "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$c" -t "$(loadgen_threads "$c")" "${aa[@]}" -d "$d" >"$oa" 2>"$oa.err" &
  la=$!; STARTED+=("$la")
  "${LG_PIN[@]}" "$LOADGEN_BIN" -c "$c" -t "$(loadgen_threads "$c")" "${ab[@]}" -d "$d" >"$ob" 2>"$ob.err" &
  lb=$!; STARTED+=("$lb")
  wait "$la" || die "loadgen failed ($na): $(head -c 300 "$oa.err")"
  wait "$lb" || die "loadgen failed ($nb): $(head -c 300 "$ob.err")"
  forget_pid "$la"; forget_pid "$lb"
  read -r w1 i1 st1 <<<"$(cpu_snapshot)"; times >"$WORK/times1"; g1=$(tcp_out_segs)
  sa1=$(pid_jiffies $pa); sb1=$(pid_jiffies $pb)
  l0=$(children_seconds "$WORK/times0"); l1=$(children_seconds "$WORK/times1")
  while read -r line; do
    echo "$line" >>"$CSV"
    IFS=, read -r -a f <<<"$line"
    log "${f[0]},${f[1]} (side by side): rps=${f[5]} p50_us=${f[6]} p99_us=${f[8]} srvCPU=${f[11]}% us/req=${f[15]} non2xx=$(( f[9] + f[10] )) foreign=${f[13]}%"
  done < <(python3 - "$oa" "$ob" "$prefix" "$na" "$nb" <<EOF
import sys
out_a, out_b, prefix, name_a, name_b = sys.argv[1:]
hz = $HZ
wall = ($w1 - $w0) / $NCPU / hz
pct = lambda j: round(100.0 * j / hz / wall, 1)
busy = ($w1 - $w0) - ($i1 - $i0) - ($st1 - $st0)
lg = ($l1 - $l0) * hz
srv = {"a": $sa1 - $sa0, "b": $sb1 - $sb0}
segs = $g1 - $g0
results = {}
for side, path in (("a", out_a), ("b", out_b)):
    results[side] = dict(x.split("=", 1) for x in open(path).read().split("RESULT", 1)[1].split() if "=" in x)
both = sum(int(kv["requests"]) for kv in results.values())
for side, name in (("a", name_a), ("b", name_b)):
    kv = results[side]
    req = int(kv["requests"])
    print(",".join(map(str, [prefix, name, $c, req, kv["duration_us"], kv["rps"], kv["p50_us"],
        kv["p90_us"], kv["p99_us"], kv["errors"], kv["non2xx"], pct(srv[side]), pct(lg),
        pct(busy - srv["a"] - srv["b"] - lg), pct($st1 - $st0),
        round(1e6 * srv[side] / hz / req, 2) if req else 0, round(segs / both, 2) if both else 0, $quiet, 0])))
EOF
)
}

# ----------------------------------------------------------------------------- GET targets
# start_get_targets RUN_DIR OUT_DIR : starts kubegate (fresh data dir), creates the ConfigMap
# default/bench-get with kubectl (padded so the served JSON is CM_BYTES, default 1024), saves
# the served bytes, and starts nginx (1 worker, TLS with kubegate's serving cert, client cert
# required against kubegate's CA, keep-alive) serving the same bytes as a static file.
# Sets: KG_PID KG_PORT NGINX_PID NGINX_PORT PKI CM_PATH GET_BODY_BYTES URL[] PIDS[] LG_TLS[]
declare -A URL=() PIDS=()
LG_TLS=()
start_get_targets() {
  local RUN=$1 OUT=$2 pad info t i
  local CM_BYTES=${CM_BYTES:-1024}
  need_tools nginx kubectl
  mkdir -p "$RUN" "$OUT"
  start_kubegate "$RUN/kubegate-data" "$(free_port "${KG_PORT_WANT:-17443}")"
  PKI=$KG_DIR/pki
  export KUBECONFIG=$KG_DIR/admin.kubeconfig
  CM_PATH=/api/v1/namespaces/default/configmaps/bench-get
  pad=$CM_BYTES
  configmap_json bench-get "$pad" >"$RUN/cm.json"
  kubectl create -f "$RUN/cm.json" >/dev/null
  GET_BODY_BYTES=$(kg_curl "$CM_PATH" -o "$RUN/body.json" -w '%{size_download}')
  # adjust the padding once so the served JSON is ~CM_BYTES (kube adds uid, resourceVersion, ...)
  if (( GET_BODY_BYTES != CM_BYTES )); then
    pad=$(( pad + CM_BYTES - GET_BODY_BYTES ))
    kubectl delete -f "$RUN/cm.json" --wait=false >/dev/null
    configmap_json bench-get "$pad" >"$RUN/cm.json"
    kubectl create -f "$RUN/cm.json" >/dev/null
    GET_BODY_BYTES=$(kg_curl "$CM_PATH" -o "$RUN/body.json" -w '%{size_download}')
  fi
  log "created ConfigMap default/bench-get with kubectl; GET body = $GET_BODY_BYTES bytes"
  kg_curl "$CM_PATH" --http1.1 -o /dev/null -D "$OUT/kubegate.headers"

  NGINX_PORT=$(free_port "${NGINX_PORT_WANT:-17444}")
  mkdir -p "$RUN/nginx/tmp" "$RUN/static"
  cp "$RUN/body.json" "$RUN/static/cm.json"
  chmod -R a+rX "$RUN/static"
  cat >"$RUN/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $RUN/nginx/nginx.pid;
error_log $RUN/nginx/error.log warn;
events { worker_connections 8192; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $RUN/nginx/tmp/body;  proxy_temp_path $RUN/nginx/tmp/proxy;
  fastcgi_temp_path $RUN/nginx/tmp/fastcgi;   uwsgi_temp_path $RUN/nginx/tmp/uwsgi;  scgi_temp_path $RUN/nginx/tmp/scgi;
  keepalive_requests 1000000;   # do not recycle client connections mid-run (default 1000)
  keepalive_timeout 75s;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_certificate     $PKI/serving.crt;
  ssl_certificate_key $PKI/serving.key;
  ssl_client_certificate $PKI/ca.crt;
  ssl_verify_client on;
  ssl_session_cache shared:SSL:10m;
  open_file_cache max=16 inactive=600s; open_file_cache_valid 600s;
  sendfile on; tcp_nodelay on;
  server {
    listen 127.0.0.1:$NGINX_PORT ssl backlog=4096;
    root $RUN/static;
    location / { default_type application/json; try_files /cm.json =500; }
  }
}
EOF
  nginx -t -q -p "$RUN/nginx" -e "$RUN/nginx/error.log" -c "$RUN/nginx/nginx.conf" || die "nginx config invalid"
  "${SRV_PIN[@]}" env ${NGINX_ENV[@]+"${NGINX_ENV[@]}"} nginx -p "$RUN/nginx" -e "$RUN/nginx/error.log" -c "$RUN/nginx/nginx.conf" -g 'daemon off;' &
  NGINX_PID=$!
  STARTED+=("$NGINX_PID")
  for ((i = 0; i < 100; i++)); do port_busy "$NGINX_PORT" && break; sleep 0.1; done
  log "started nginx pid $NGINX_PID on https://127.0.0.1:$NGINX_PORT (1 worker, TLS, client cert required)"

  URL=([kubegate]=https://127.0.0.1:$KG_PORT$CM_PATH [nginx]=https://127.0.0.1:$NGINX_PORT$CM_PATH)
  PIDS=([kubegate]=$KG_PID [nginx]=$NGINX_PID)
  LG_TLS=(--ca "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
  for t in kubegate nginx; do
    info=$(curl -sS -o "$RUN/check.$t" -w '%{http_code} %{size_download}B http%{http_version}' --http1.1 \
      --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "${URL[$t]}")
    cmp -s "$RUN/check.$t" "$RUN/body.json" || log "note: $t body differs from kubegate's first answer"
    log "target $t = ${URL[$t]} -> $info"
  done
  curl -sS --http1.1 -o /dev/null -D "$OUT/nginx.headers" --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "${URL[nginx]}"
}

machine_info() {
  echo "date=$(date -Is) host=$(hostname) kernel=$(uname -r) nproc=$(nproc)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') mem=$(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "KUBEGATE_ENV='$KUBEGATE_ENV' PIN=$PIN SERVER_CPUS=$SERVER_CPUS LOADGEN_CPUS=$LOADGEN_CPUS kubegate=$KUBEGATE_BIN (built $(date -r "$KUBEGATE_BIN" -Is 2>/dev/null); repo HEAD now $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo no-git))"
  nginx -v 2>&1 || true
}

#!/usr/bin/env bash
# bench/instructions.sh - diagnosis: user-space instructions per GET under valgrind's callgrind,
# a count that does not move with the VM's speed (the timing benchmarks drift by +-20 % here).
#
# For each flow-control mode in MODES (apf: API Priority and Fairness at its defaults; off:
# flowControl.mode maxInFlight 0/0) a kubegate from KUBEGATE_BIN runs under callgrind with a
# token file (one user, group bench-group), anonymous access and the AlwaysAllow authorizer; it
# answers WARM unmeasured GETs of one ~1 KiB ConfigMap, then the counters are zeroed
# (callgrind_control -z), N GETs are sent (c=4), and the counters dumped: instructions / N is
# the figure. CREDS picks the credentials measured in turn on each server (token: the user's
# bearer token, cached after the first request; sa-jwt: a ServiceAccount token from `kubectl
# create token`, a ~1 KiB JWT, cached likewise; anonymous: none).
# REQUEST=create counts a create instead (POST of a ~1 KiB ConfigMap with a unique name, c=4,
# durable; every thread's instructions are counted, the store's writer thread included).
# Caveats: callgrind counts user-space instructions only (no kernel, no cache misses); under
# valgrind SHA-256 runs its portable code (SHA-NI is hidden), so a token costs ~10,000
# instructions of hashing that take ~0.2 us for real.
#
# Usage: bench/instructions.sh
#   MODES="apf off" CREDS="token anonymous" N=3000 bench/instructions.sh
#   MODES=apf CREDS="sa-jwt token anonymous" bench/instructions.sh
#   KUBEGATE_BIN=/tmp/kg-old bench/instructions.sh        (another build)
#   REQUEST=create MODES=apf CREDS=token N=1000 bench/instructions.sh   (creates)
#   CG_ARGS=--cache-sim=yes MODES="apf off" CREDS=token bench/instructions.sh
#                             (also simulated cache misses: callgrind_annotate --show=D1mr,DLmr,...)
# Output: $RESULTS/instructions/summary.txt, callgrind.<mode>.<cred> (callgrind_annotate input),
#         top.<mode>.<cred>.txt (the 40 functions with the most instructions of their own).
# Needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODES=${MODES:-"apf off"}
CREDS=${CREDS:-"token anonymous"}
N=${N:-3000}
WARM=${WARM:-500}
REQUEST=${REQUEST:-get}                     # get | create
[[ $REQUEST == get || $REQUEST == create ]] || die "REQUEST: get or create"
COMMAND="$({ env | grep -E '^(MODES|CREDS|N|WARM|REQUEST)=' || true; } | sort | tr '\n' ' ')bench/instructions.sh"

need_tools valgrind callgrind_control callgrind_annotate
if [[ $CREDS == *sa-jwt* ]]; then need_tools kubectl; fi
prepare_common
OUT=$RESULTS/instructions
RUN=$WORK/run/instructions
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
machine_info >"$OUT/meta.txt"
TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
echo "$TOKEN,bench-user,bench-uid,\"bench-group\"" >"$RUN/tokens.csv"

: >"$RUN/results"
port_want=17521
for mode in $MODES; do
  case $mode in
    apf) flow='priorityAndFairness'; ri=400; mri=200 ;;
    off) flow='maxInFlight'; ri=0; mri=0 ;;
    *) die "MODES: apf or off" ;;
  esac
  printf 'authentication:\n  anonymous: true\n  tokenAuthFile: %s\nauthorization:\n  modes: [AlwaysAllow]\nflowControl:\n  mode: %s\n  maxRequestsInflight: %s\n  maxMutatingRequestsInflight: %s\n' \
    "$RUN/tokens.csv" "$flow" "$ri" "$mri" >"$RUN/$mode.yaml"
  dir=$RUN/kubegate-$mode; mkdir -p "$dir"
  port=$(free_port "$port_want"); port_want=$(( port + 1 ))
  "${SRV_PIN[@]}" valgrind --tool=callgrind ${CG_ARGS:-} --callgrind-out-file="$RUN/callgrind.$mode.%p" \
    "$KUBEGATE_BIN" serve --data-dir "$dir" --secure-port "$port" --bind-address 127.0.0.1 \
    --config "$RUN/$mode.yaml" >"$dir.log" 2>&1 &
  pid=$!; STARTED+=("$pid")
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir.log" >&2; die "kubegate under valgrind exited"; }
    [[ $(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 "https://127.0.0.1:$port/readyz" || true) == 200 && -s $dir/pki/admin.key ]] && break
    sleep 0.5
  done
  KG_DIR=$dir KG_PORT=$port
  configmap_json bench-get 1024 >"$RUN/cm.json"
  kg_curl /api/v1/namespaces/default/configmaps -X POST -H 'Content-Type: application/json' \
    --data-binary @"$RUN/cm.json" -o /dev/null --fail
  configmap_json "ins-{run}-{n}" 1024 >"$RUN/create.json"
  for cred in $CREDS; do
    if [[ $REQUEST == create ]]; then
      args=(--url "https://127.0.0.1:$port/api/v1/namespaces/default/configmaps" --method POST
        --body-file "$RUN/create.json" --ca "$dir/pki/ca.crt")
    else
      args=(--url "https://127.0.0.1:$port/api/v1/namespaces/default/configmaps/bench-get" --ca "$dir/pki/ca.crt")
    fi
    case $cred in
      token) args+=(--header "Authorization: Bearer $TOKEN") ;;
      sa-jwt)
        kubectl --kubeconfig "$dir/admin.kubeconfig" create serviceaccount bench-sa >/dev/null
        args+=(--header "Authorization: Bearer $(kubectl --kubeconfig "$dir/admin.kubeconfig" \
          create token bench-sa --duration 1h)") ;;
      anonymous) ;;
      *) die "CREDS: token, sa-jwt or anonymous" ;;
    esac
    run_loadgen "$RUN/warm.out" 4 "${args[@]}" -n "$WARM"
    callgrind_control -z "$pid" >/dev/null
    run_loadgen "$OUT/load.$mode.$cred.txt" 4 "${args[@]}" -n "$N"
    [[ $(result_field "$OUT/load.$mode.$cred.txt" ok) == "$N" ]] ||
      die "$mode/$cred: not every $REQUEST answered 2xx ($(result_field "$OUT/load.$mode.$cred.txt" status))"
    before=$(ls "$RUN"/callgrind."$mode".* 2>/dev/null | wc -l)
    callgrind_control -d "$pid" >/dev/null
    for ((i = 0; i < 100; i++)); do
      (( $(ls "$RUN"/callgrind."$mode".* | wc -l) > before )) && break
      sleep 0.2
    done
    dump=$(ls -t "$RUN"/callgrind."$mode".*.* | head -1)
    cp "$dump" "$OUT/callgrind.$mode.$cred"
    # summary: Ir first; with --cache-sim=yes then Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
    read -r -a counts <<<"$(sed -n 's/^summary: //p' "$dump")"
    total=${counts[0]}
    echo "$mode $cred ${counts[*]}" >>"$RUN/results"
    callgrind_annotate --threshold=100 --auto=no "$dump" 2>/dev/null | grep -E '^ *[0-9,]+ \(' | sed -n '1,40p' >"$OUT/top.$mode.$cred.txt"
    log "$mode/$cred: $(( total / N )) instructions per $REQUEST"
  done
  stop_pid "$pid" TERM; forget_pid "$pid"
done

python3 - "$RUN/results" "$N" "$COMMAND" "$REQUEST" <<'EOF' | tee "$OUT/summary.txt"
import sys
rows = [line.split() for line in open(sys.argv[1])]
n, command, request = int(sys.argv[2]), sys.argv[3], sys.argv[4].upper()
print(f"user-space instructions per {request} of a ~1 KiB ConfigMap (callgrind, {n} {request}s, c=4)")
cache = all(len(r) == 11 for r in rows)   # --cache-sim=yes: simulated misses too
misses = f"{'I1 misses':>11}{'D1 misses':>11}{'LL misses':>11}" if cache else ""
print(f"{'flow control':<14}{'credential':<12}{'instructions/' + request:>21}{misses}")
per = {}
for mode, cred, total, *more in rows:
    per[(mode, cred)] = int(total) / n
    extra = ""
    if cache:
        i1, d1r, d1w, llr, lld = (int(more[i]) / n for i in (2, 3, 4, 6, 7))
        extra = f"{i1:>11,.1f}{d1r + d1w:>11,.1f}{llr + lld + int(more[5]) / n:>11,.2f}"
    print(f"{mode:<14}{cred:<12}{int(total) / n:>21,.0f}{extra}")
for cred in sorted({c for _, c in per}):
    if ("apf", cred) in per and ("off", cred) in per:
        print(f"APF's share ({cred}): {per[('apf', cred)] - per[('off', cred)]:,.0f} instructions")
print(f"command: {command}")
EOF
log "done"

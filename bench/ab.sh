#!/usr/bin/env bash
# bench/ab.sh - side-by-side A/B of two kubegates: the same closed-loop GET of one ~1 KiB
# ConfigMap through server A and server B at the same time (bench/lib.sh measured_pair), each
# with its own load generator of CONNS connections. Both servers are pinned to SERVER_CPUS and
# share it, so each one's requests/s follows its own CPU cost per request, under the same
# machine state: on this shared VM back-to-back rounds drift by +-20 % and cannot resolve a
# difference of a few per cent; side by side, two identical servers agree within +-3 %.
#
# What differs between A and B is chosen with:
#   KUBEGATE_BIN_A / KUBEGATE_BIN_B   two builds (default: both $KUBEGATE_BIN)
#   CRED_A / CRED_B                   anonymous | token | sa-jwt | x509 (default: token for both)
# Both servers: a token file with one user (group bench-group), anonymous access on, the
# AlwaysAllow authorizer, API Priority and Fairness at its defaults. `token` is that user's
# bearer token (cached after the first request), `sa-jwt` a ServiceAccount token from
# `kubectl create token` (a ~1 KiB JWT, cached after the first request), `x509` the admin
# client certificate (system:masters, so APF's exempt level), `anonymous` no credential.
#
# Usage: bench/ab.sh
#   KUBEGATE_BIN_A=/tmp/kg-old KUBEGATE_BIN_B=/tmp/kg-new bench/ab.sh      two builds
#   CRED_A=anonymous CRED_B=token bench/ab.sh                             a cached token's cost
#   CRED_A=anonymous CRED_B=sa-jwt bench/ab.sh                            a cached JWT's (issue 3)
#   ROUNDS=8 DURATION=5 CONNS=32 bench/ab.sh
# Output: $RESULTS/ab/summary.txt (B/A ratios: median of per-round pairs), runs.csv, raw output.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-8}
DURATION=${DURATION:-5}
CONNS=${CONNS:-32}
WARMUP=${WARMUP:-2}
KUBEGATE_BIN_A=${KUBEGATE_BIN_A:-$KUBEGATE_BIN}
KUBEGATE_BIN_B=${KUBEGATE_BIN_B:-$KUBEGATE_BIN}
CRED_A=${CRED_A:-token}
CRED_B=${CRED_B:-token}
COMMAND="$({ env | grep -E '^(ROUNDS|DURATION|CONNS|WARMUP|KUBEGATE_BIN_A|KUBEGATE_BIN_B|CRED_A|CRED_B|PIN|SERVER_CPUS|LOADGEN_CPUS)=' || true; } | sort | tr '\n' ' ')bench/ab.sh"

for cred in "$CRED_A" "$CRED_B"; do
  [[ $cred == anonymous || $cred == token || $cred == sa-jwt || $cred == x509 ]] ||
    die "CRED_A/CRED_B: anonymous, token, sa-jwt or x509"
done
if [[ "$CRED_A $CRED_B" == *sa-jwt* ]]; then need_tools kubectl; fi
for bin in "$KUBEGATE_BIN_A" "$KUBEGATE_BIN_B"; do [[ -x $bin ]] || die "$bin is not an executable"; done
prepare_common
OUT=$RESULTS/ab
RUN=$WORK/run/ab
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"

TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
echo "$TOKEN,bench-user,bench-uid,\"bench-group\"" >"$RUN/tokens.csv"
printf 'authentication:\n  anonymous: true\n  tokenAuthFile: %s\nauthorization:\n  modes: [AlwaysAllow]\n' \
  "$RUN/tokens.csv" >"$RUN/config.yaml"

declare -A PIDS=() BIN=([a]=$KUBEGATE_BIN_A [b]=$KUBEGATE_BIN_B) CRED=([a]=$CRED_A [b]=$CRED_B)
next_port=17491
for side in a b; do
  KUBEGATE_BIN=${BIN[$side]} start_kubegate "$RUN/kubegate-$side" "$(free_port "$next_port")" --config "$RUN/config.yaml"
  PIDS[$side]=$KG_PID; next_port=$(( KG_PORT + 1 ))
  configmap_json bench-get 1024 >"$RUN/cm.json"
  kg_curl /api/v1/namespaces/default/configmaps -X POST -H 'Content-Type: application/json' \
    --data-binary @"$RUN/cm.json" -o /dev/null -w '' --fail
  {
    printf '%s\n' --url "https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps/bench-get" \
      --ca "$KG_DIR/pki/ca.crt"
    case ${CRED[$side]} in
      token) printf '%s\n' --header "Authorization: Bearer $TOKEN" ;;
      sa-jwt)
        kubectl --kubeconfig "$KG_DIR/admin.kubeconfig" create serviceaccount bench-sa >/dev/null
        printf '%s\n' --header "Authorization: Bearer $(kubectl --kubeconfig "$KG_DIR/admin.kubeconfig" \
          create token bench-sa --duration 1h)" ;;
      x509) printf '%s\n' --cert "$KG_DIR/pki/admin.crt" --key "$KG_DIR/pki/admin.key" ;;
      anonymous) ;;
    esac
  } >"$RUN/args-$side"
  mapfile -t args <"$RUN/args-$side"
  run_loadgen "$RUN/check-$side.out" 1 "${args[@]}" -n 20
  [[ $(result_field "$RUN/check-$side.out" ok) == 20 ]] ||
    die "side $side (${CRED[$side]}) did not get 200s: $(result_field "$RUN/check-$side.out" status)"
  echo "side $side: pid=$KG_PID port=$KG_PORT bin=${BIN[$side]} (built $(date -r "${BIN[$side]}" -Is)) cred=${CRED[$side]}" >>"$OUT/meta.txt"
  (( WARMUP > 0 )) && run_loadgen "$RUN/warmup.out" "$CONNS" "${args[@]}" -d "$WARMUP"
done

for ((r = 1; r <= ROUNDS; r++)); do
  order=(a b); (( r % 2 == 0 )) && order=(b a)
  measured_pair "$r" "$CONNS" "$DURATION" \
    "${order[0]}" "${PIDS[${order[0]}]}" "$OUT/${order[0]}.r$r.txt" "$RUN/args-${order[0]}" \
    "${order[1]}" "${PIDS[${order[1]}]}" "$OUT/${order[1]}.r$r.txt" "$RUN/args-${order[1]}"
done
for side in a b; do KG_PID=${PIDS[$side]}; stop_kubegate; done

python3 - "$CSV" "$COMMAND" "$CRED_A" "$CRED_B" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
command, cred = sys.argv[2], {"a": sys.argv[3], "b": sys.argv[4]}
by = {}
for r in rows:
    by.setdefault(r["target"], {})[int(r["round"])] = r
print(f"GET one ~1 KiB ConfigMap, c={rows[0]['conns']} per server, {len(by['a'])} rounds, both servers loaded at once")
print(f"{'side':<6}{'credential':<12}{'rps':>9}{'p50 us':>8}{'p99 us':>8}{'srv us/req':>11}{'srv cpu%':>9}")
for side in ("a", "b"):
    runs = by[side].values()
    m = lambda k: st.median(float(x[k]) for x in runs)
    flag = "  ERRORS" if any(int(x["errors"]) + int(x["non2xx"]) for x in runs) else ""
    print(f"{side:<6}{cred[side]:<12}{m('rps'):>9.0f}{m('p50_us'):>8.0f}{m('p99_us'):>8.0f}"
          f"{m('server_us_per_req'):>11.1f}{m('cpu_server_pct'):>9.1f}{flag}")
def paired(k):
    return [float(by["b"][i][k]) / float(by["a"][i][k]) for i in by["b"] if i in by["a"]]
rps, cpu = paired("rps"), paired("server_us_per_req")
print(f"B/A requests/s: median {st.median(rps):.3f} (rounds {min(rps):.3f}-{max(rps):.3f}); "
      f"B/A CPU per request: median {st.median(cpu):.3f}")
print(f"command: {command}")
EOF
log "done; raw runs in $CSV"

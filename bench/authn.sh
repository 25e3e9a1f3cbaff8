#!/usr/bin/env bash
# bench/authn.sh - authentication cost: the same GET of one ~1 KiB ConfigMap through kubegate
# authenticated four ways, in one run, against one kubegate: an x509 client certificate, a
# cached ServiceAccount JWT (bearer), a cached static token (bearer), and anonymous.
#
# kubegate runs with anonymous access and a token file enabled, and the AlwaysAllow
# authorizer, so every identity may read the object (bench/authz.sh measures RBAC). Rounds are interleaved; the load
# generator (bench/loadgen, HTTP/1.1 keep-alive over TLS) is pinned apart from the server, as
# in get.sh. Target (issue 3, reported, not asserted): the cached-token path within 5% of
# the anonymous path's requests/s.
#
# Usage: bench/authn.sh        CONNS=32 ROUNDS=5 DURATION=10 WARMUP=3 bench/authn.sh
# Output: $RESULTS/authn/summary.txt, runs.csv, raw loadgen output per run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-32}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
TARGETS="x509 sa-jwt static-token anonymous"

need_tools kubectl
prepare_common
OUT=$RESULTS/authn
RUN=$WORK/run/authn
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"

STATIC_TOKEN=bench-static-token-0123456789abcdef
echo "$STATIC_TOKEN,bench-user,bench-uid,bench-group" >"$RUN/tokens.csv"
cat >"$RUN/config.yaml" <<YAML
authentication:
  anonymous: true
  tokenAuthFile: $RUN/tokens.csv
authorization:
  modes: [AlwaysAllow]
YAML
start_kubegate "$RUN/kubegate-data" "$(free_port 17447)" --config "$RUN/config.yaml"
PKI=$KG_DIR/pki
export KUBECONFIG=$KG_DIR/admin.kubeconfig
configmap_json bench-authn 1024 >"$RUN/cm.json"
kg_curl /api/v1/namespaces/default/configmaps -X POST -H 'Content-Type: application/json' \
  --data-binary @"$RUN/cm.json" -o /dev/null
kubectl create serviceaccount bench-sa >/dev/null
SA_TOKEN=$(kubectl create token bench-sa --duration 1h)
URL=https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps/bench-authn
declare -A ARGS
ARGS[x509]="--ca $PKI/ca.crt --cert $PKI/admin.crt --key $PKI/admin.key"
ARGS[sa-jwt]="--ca $PKI/ca.crt"
ARGS[static-token]="--ca $PKI/ca.crt"
ARGS[anonymous]="--ca $PKI/ca.crt"
declare -A HDR
HDR[sa-jwt]="Authorization: Bearer $SA_TOKEN"
HDR[static-token]="Authorization: Bearer $STATIC_TOKEN"
lg_args() {  # target -> loadgen arguments (one per line)
  local t=$1
  printf '%s\n' --url "$URL"
  for a in ${ARGS[$t]}; do printf '%s\n' "$a"; done
  [[ -n ${HDR[$t]:-} ]] && printf '%s\n' --header "${HDR[$t]}"
  return 0
}
for t in $TARGETS; do
  mapfile -t a < <(lg_args "$t")
  code=$(run_loadgen "$RUN/check.$t.out" 1 "${a[@]}" -n 1 >/dev/null; result_field "$RUN/check.$t.out" non2xx)
  [[ ${code:-1} == 0 ]] || die "target $t does not answer 200 (see $RUN/check.$t.out)"
done
{
  echo "kubegate_pid=$KG_PID CONNS=$CONNS ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP"
} >>"$OUT/meta.txt"

read -r -a TL <<<"$TARGETS"
for t in "${TL[@]}"; do
  mapfile -t a < <(lg_args "$t")
  (( WARMUP > 0 )) && { log "warm-up $t ${WARMUP}s"; run_loadgen "$RUN/warmup.out" "$CONNS" "${a[@]}" -d "$WARMUP"; }
done
for ((r = 1; r <= ROUNDS; r++)); do
  order=("${TL[@]}")
  if (( r % 2 == 0 )); then order=(); for ((i = ${#TL[@]} - 1; i >= 0; i--)); do order+=("${TL[i]}"); done; fi
  for t in "${order[@]}"; do
    mapfile -t a < <(lg_args "$t")
    measured_run "$r,$t,$CONNS" "$OUT/$t.r$r.txt" "$CONNS" "$KG_PID" "${a[@]}" -d "$DURATION"
  done
done

python3 - "$CSV" <<'PY' | tee "$OUT/summary.txt"
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["target"], {})[int(r["round"])] = r
print()
print("GET one ~1 KiB ConfigMap through kubegate, authenticated four ways (same run, same server)")
print("rps/p50/p99/CPU = median over rounds; vs anonymous = median of per-round paired ratios")
hdr = f"{'target':<14}{'rps':>9}{'p50 us':>8}{'p99 us':>8}{'srv us/req':>11}{'rps vs anon':>12}{'cpu vs anon':>12}"
print(hdr); print("-" * len(hdr))
base = by.get("anonymous", {})
for t in ("x509", "sa-jwt", "static-token", "anonymous"):
    runs = by.get(t)
    if not runs: continue
    f = lambda k: [float(r[k]) for r in runs.values()]
    line = f"{t:<14}{st.median(f('rps')):>9.0f}{st.median(f('p50_us')):>8.0f}{st.median(f('p99_us')):>8.0f}{st.median(f('server_us_per_req')):>11.1f}"
    def paired(k):
        v = [float(runs[i][k]) / float(base[i][k]) for i in runs if i in base and float(base[i][k])]
        return st.median(v) if v else float("nan")
    line += f"{paired('rps'):>12.3f}{paired('server_us_per_req'):>12.2f}"
    if any(int(r["errors"]) + int(r["non2xx"]) for r in runs.values()): line += "  ERRORS"
    print(line)
print()
print("target (not asserted): cached-token rps >= 0.95x anonymous rps")
PY
log "done; raw runs in $CSV"

#!/usr/bin/env bash
# bench/discovery.sh - merged aggregated discovery (issue 5): `GET /apis` with kubectl's
# aggregated-discovery Accept header on a kubegate that merges 50 remote APIServices and 200
# CRDs, against a GET of one 1 KiB ConfigMap on the same kubegate, in one run; and the same
# discovery request revalidated with If-None-Match (304).
#
# Every request sends `Accept-Encoding: gzip`, as kubectl does: the ~1 KiB ConfigMap goes out
# as it is, the discovery document gzip-compressed (compressed once per version, cached).
#
#   configmap    GET /api/v1/namespaces/default/configmaps/bench-get         (~1 KiB JSON)
#   discovery    GET /apis  Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList
#   disc-304     the same with If-None-Match: <its ETag>
#
# The 50 remote APIServices (v1.r<i>.remote.example.com) point through kubegate.io/backend-url
# at one small Python HTTPS server (a CA and leaf are made here) that answers aggregated
# discovery for all 50 groups and 200 to the availability probes; the 200 CRDs each add their
# own group. Discovery is served from kubegate's merged, cached document; the backend is not
# on the request path (it is only polled by kubegate in the background).
#
# Target (issue 5, reported, not asserted): discovery and 304 revalidation each >= 0.9x the
# ConfigMap GET's requests/s.
#
# Usage: bench/discovery.sh      CONNS=32 ROUNDS=3 DURATION=8 bench/discovery.sh
# Output: $RESULTS/discovery/summary.txt, runs.csv, meta.txt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-32}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
APISERVICES=${APISERVICES:-50}
CRDS=${CRDS:-200}
KG_PORT_WANT=${KG_PORT_WANT:-17457}

need_tools openssl
prepare_common
OUT=$RESULTS/discovery
RUN=$WORK/run/discovery
rm -rf "$RUN"; mkdir -p "$OUT" "$RUN"
CSV=$OUT/runs.csv
echo "round,target,conns,$CSV_HEADER" >"$CSV"
machine_info >"$OUT/meta.txt"
echo "CONNS=$CONNS ROUNDS=$ROUNDS DURATION=$DURATION APISERVICES=$APISERVICES CRDS=$CRDS" >>"$OUT/meta.txt"

# ----------------------------------------------------------------------------- backend
TLS=$RUN/tls; mkdir -p "$TLS"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj /CN=bench-discovery-ca -addext 'basicConstraints=critical,CA:TRUE' \
  -addext 'keyUsage=critical,keyCertSign,cRLSign' -keyout "$TLS/ca.key" -out "$TLS/ca.pem" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
  -keyout "$TLS/key.pem" -out "$TLS/leaf.csr" 2>/dev/null
printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=critical,CA:FALSE' \
  'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' >"$TLS/leaf.ext"
openssl x509 -req -in "$TLS/leaf.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial \
  -days 30 -extfile "$TLS/leaf.ext" -out "$TLS/cert.pem" 2>/dev/null
BACKEND_PORT=$(free_port 17458)
python3 - "$BACKEND_PORT" "$TLS" "$APISERVICES" >"$RUN/backend.log" 2>&1 <<'PY' &
import http.server, json, ssl, sys
port, tls, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
groups = [f"r{i}.remote.example.com" for i in range(n)]
aggregated = json.dumps({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
    "items": [{"metadata": {"name": g}, "versions": [{"version": "v1", "freshness": "Current", "resources": [
        {"resource": "gadgets", "responseKind": {"group": g, "version": "v1", "kind": "Gadget"}, "scope": "Namespaced",
         "singularResource": "gadget", "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}]}
        for g in groups]}).encode()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/apis":
            body, ct = aggregated, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        elif self.path.startswith("/apis/"):
            parts = self.path.split("/")
            body, ct = json.dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "/".join(parts[2:4]), "resources": []}).encode(), "application/json"
        else:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(200); self.send_header("Content-Type", ct); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(f"{tls}/cert.pem", f"{tls}/key.pem")
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
BACKEND_PID=$!
STARTED+=("$BACKEND_PID")
for ((i = 0; i < 100; i++)); do port_busy "$BACKEND_PORT" && break; sleep 0.1; done
log "discovery backend pid $BACKEND_PID on https://127.0.0.1:$BACKEND_PORT ($APISERVICES groups)"

# ----------------------------------------------------------------------------- kubegate
# The toy Python backend is starved of CPU while kubegate is saturated, so its availability
# probes and discovery refreshes would time out mid-run and flip groups between Current and
# Stale, changing the document (and its ETag) under the measurement. Background polling is not
# what is measured here, so it is slowed down: the document is fetched once and then cached.
cat >"$RUN/kubegate.yaml" <<'YAML'
aggregator:
  availabilityCheckInterval: 10m
  discoveryRefreshInterval: 10m
  probeTimeout: 30s
YAML
start_kubegate "$RUN/kubegate-data" "$(free_port "$KG_PORT_WANT")" --config "$RUN/kubegate.yaml"
PKI=$KG_DIR/pki
LG_TLS=(--ca "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
# Every request carries what kubectl (Go's transport) sends: Accept-Encoding: gzip.
LG_TLS+=(--header "Accept-Encoding: gzip")
configmap_json bench-get 1024 >"$RUN/cm.json"
kg_curl /api/v1/namespaces/default/configmaps -X POST -H 'Content-Type: application/json' \
  --data-binary "@$RUN/cm.json" -o /dev/null
log "registering $APISERVICES APIServices and $CRDS CRDs"
python3 - "$KG_DIR" "$KG_PORT" "$BACKEND_PORT" "$TLS/ca.pem" "$APISERVICES" "$CRDS" <<'PY'
import base64, http.client, json, ssl, sys, time
data, port, backend, ca, n, crds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
ctx = ssl.create_default_context(cafile=f"{data}/pki/ca.crt")
ctx.load_cert_chain(f"{data}/pki/admin.crt", f"{data}/pki/admin.key")
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
def call(method, path, body=None, headers=None):
    h = {"Content-Type": "application/json"}; h.update(headers or {})
    conn.request(method, path, json.dumps(body) if body is not None else None, h)
    r = conn.getresponse(); return r.status, r.read()
bundle = base64.b64encode(open(ca, "rb").read()).decode()
for i in range(n):
    g = f"r{i}.remote.example.com"
    s, t = call("POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": f"v1.{g}", "annotations": {"kubegate.io/backend-url": f"https://127.0.0.1:{backend}"}},
        "spec": {"group": g, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15, "caBundle": bundle}})
    if s != 201: sys.exit(f"apiservice {g}: {s} {t[:200]!r}")
for i in range(crds):
    g = f"c{i}.crd.example.com"
    s, t = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{g}"},
        "spec": {"group": g, "scope": "Namespaced", "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    if s != 201: sys.exit(f"crd {g}: {s} {t[:200]!r}")
accept = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
deadline = time.time() + 120
while time.time() < deadline:
    s, body = call("GET", "/apis", headers=accept)
    doc = json.loads(body)
    names = {i["metadata"]["name"] for i in doc.get("items", [])}
    # Remote groups count once kubegate has fetched them (Current), not while still Stale:
    # a group turning Current during the run would change the document under the 304 run.
    current = {i["metadata"]["name"] for i in doc.get("items", [])
               if all(v.get("freshness", "Current") == "Current" for v in i.get("versions", []))}
    remote = sum(1 for i in range(n) if f"r{i}.remote.example.com" in current)
    crd = sum(1 for i in range(crds) if f"c{i}.crd.example.com" in names)
    if remote == n and crd == crds: break
    time.sleep(0.5)
else:
    sys.exit(f"discovery never listed everything: {remote}/{n} remote (Current), {crd}/{crds} CRD groups")
print(f"aggregated discovery lists {len(names)} groups ({len(body)} bytes)")
PY
ACCEPT='Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList'
ETAG=$(kg_curl /apis -H "$ACCEPT" -o "$RUN/apis.json" -D - | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
[[ -n $ETAG ]] || die "no ETag on /apis"
log "discovery document $(wc -c <"$RUN/apis.json") bytes, ETag $ETAG"
code=$(kg_curl /apis -H "$ACCEPT" -H "If-None-Match: $ETAG" -o /dev/null -w '%{http_code}')
[[ $code == 304 ]] || die "If-None-Match got $code, not 304"
echo "discovery_bytes=$(wc -c <"$RUN/apis.json") etag=$ETAG" >>"$OUT/meta.txt"

CM_URL=https://127.0.0.1:$KG_PORT/api/v1/namespaces/default/configmaps/bench-get
D_URL=https://127.0.0.1:$KG_PORT/apis
(( WARMUP > 0 )) && run_loadgen "$RUN/warm.out" "$CONNS" --url "$D_URL" -d "$WARMUP" --header "$ACCEPT" "${LG_TLS[@]}"
for ((r = 1; r <= ROUNDS; r++)); do
  measured_run "$r,configmap,$CONNS" "$OUT/configmap.r$r.txt" "$CONNS" "$KG_PID" --url "$CM_URL" -d "$DURATION" "${LG_TLS[@]}"
  measured_run "$r,discovery,$CONNS" "$OUT/discovery.r$r.txt" "$CONNS" "$KG_PID" --url "$D_URL" -d "$DURATION" \
    --header "$ACCEPT" "${LG_TLS[@]}"
  measured_run "$r,disc-304,$CONNS" "$OUT/disc-304.r$r.txt" "$CONNS" "$KG_PID" --url "$D_URL" -d "$DURATION" \
    --header "$ACCEPT" --header "If-None-Match: $ETAG" "${LG_TLS[@]}"
done

# A 304 run is only a 304 run if the document did not change under it.
ETAG_AFTER=$(kg_curl /apis -H "$ACCEPT" -o "$RUN/apis-after.json" -D - | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
if [[ $ETAG_AFTER != "$ETAG" ]]; then
  log "WARNING: the discovery document changed during the run (ETag $ETAG -> $ETAG_AFTER); see $RUN/apis*.json"
  echo "etag_after=$ETAG_AFTER (changed)" >>"$OUT/meta.txt"
fi

# PROFILE=discovery|disc-304: sample kubegate with perf while it answers that target
# (diagnosis, not a measurement); perf.data in $OUT.
if [[ -n ${PROFILE:-} ]]; then
  need_tools perf
  PROFILE_ARGS=(--url "$D_URL" -d 8 --header "$ACCEPT" "${LG_TLS[@]}")
  [[ $PROFILE == disc-304 ]] && PROFILE_ARGS+=(--header "If-None-Match: $ETAG")
  run_loadgen "$RUN/profile.out" "$CONNS" "${PROFILE_ARGS[@]}" &
  LOAD_PID=$!
  sleep 1
  perf record -F 999 -g -p "$KG_PID" -o "$OUT/$PROFILE.perf.data" -- sleep 5 2>"$RUN/perf.log" || true
  wait "$LOAD_PID" || true
  log "profile in $OUT/$PROFILE.perf.data"
fi

python3 - "$CSV" "$FOREIGN_MAX" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
FOREIGN_MAX = float(sys.argv[2])
print()
hdr = f"{'round':>5} {'target':<11}{'req/s':>9}{'p50 us':>9}{'p99 us':>9}{'srv us/req':>11}{'non2xx':>8}"
print(hdr); print("-" * len(hdr))
for r in rows:
    flag = "  NOISY" if r["quiet"] == "0" or float(r["cpu_foreign_pct"]) > FOREIGN_MAX else ""
    print(f"{r['round']:>5} {r['target']:<11}{float(r['rps']):>9.0f}{r['p50_us']:>9}{r['p99_us']:>9}{float(r['server_us_per_req']):>11.1f}{r['non2xx']:>8}{flag}")
print("-" * len(hdr))
by = {(r["round"], r["target"]): r for r in rows}
for t in ("discovery", "disc-304"):
    vals = [float(by[(k, t)]["rps"]) / float(by[(k, "configmap")]["rps"]) for k in sorted({r["round"] for r in rows}) if (k, t) in by and (k, "configmap") in by]
    ratio = st.median(vals)
    print(f"{t} vs configmap GET: {ratio:.2f}x  (target >= 0.9x -> {'met' if ratio >= 0.9 else 'NOT met'})")
EOF
log "done; raw runs in $CSV"

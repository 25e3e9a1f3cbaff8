#!/usr/bin/env bash
# bench/tools/etcd-3.5.sh - prints the path of an etcd 3.5 binary for `ETCD_BIN=... bench/etcd.sh`:
# Debian trixie's etcd-server package, downloaded from deb.debian.org, checked against the
# SHA-256 in trixie's Packages index (the index itself is not signature-checked: a benchmark
# tool, not an install), and unpacked under $WORK (default /tmp/kgbench) without installing
# it. Nothing else on the machine changes; the tests keep bookworm's etcd 3.4.
set -euo pipefail
WORK=${WORK:-/tmp/kgbench}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
DEST=$WORK/etcd-3.5
if [[ -x $DEST/usr/bin/etcd ]]; then echo "$DEST/usr/bin/etcd"; exit 0; fi
mkdir -p "$DEST"
index=$(curl -fsS "$MIRROR/dists/trixie/main/binary-amd64/Packages.xz" | xz -d |
  awk '/^Package: etcd-server$/ {p=1} p && /^(Filename|SHA256):/ {print $2} p && /^$/ {p=0}')
read -r -d '' file sha <<<"$index" || true
[[ -n ${file:-} && -n ${sha:-} ]] || { echo "etcd-server not found in trixie's Packages index" >&2; exit 1; }
curl -fsS -o "$DEST/etcd-server.deb" "$MIRROR/$file"
echo "$sha  $DEST/etcd-server.deb" | sha256sum -c --quiet >&2
dpkg-deb -x "$DEST/etcd-server.deb" "$DEST"
"$DEST/usr/bin/etcd" --version | head -1 >&2
echo "$DEST/usr/bin/etcd"

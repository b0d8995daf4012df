#!/usr/bin/env bash
# Installs the peers `hutch bench` measures hutch against (idempotent, run as root):
#   docker.io (dockerd + containerd + runc; the benchmark starts its own daemon on a private socket),
#   podman (rootful, private storage), bubblewrap, and the npm package secure-exec into a private
#   prefix (default /var/cache/hutch-bench/npm; override with HUTCH_BENCH_NPM_PREFIX), and matplotlib
#   into a venv for the plots (default /var/cache/hutch-bench/venv; HUTCH_BENCH_VENV).
# No image is pulled from any registry: the benchmark builds its peer image from the host's files.
# A peer that fails to install is reported and skipped; the script does not fail for it.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "bench-peers: installing ${missing[*]}" >&2
  apt-get -o DPkg::Lock::Timeout=600 update -qq || true
  # two apt runs on one machine can race on the .deb cache: retry once
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
apt_install bubblewrap crun runc busybox-static || echo "bench-peers: bubblewrap/crun/runc: install failed" >&2
apt_install docker.io || echo "bench-peers: docker.io: install failed (the docker peer will be skipped)" >&2
apt_install podman uidmap || echo "bench-peers: podman: install failed (the podman peer will be skipped)" >&2

prefix="${HUTCH_BENCH_NPM_PREFIX:-/var/cache/hutch-bench/npm}"
if command -v npm >/dev/null 2>&1; then
  if [ ! -d "$prefix/node_modules/secure-exec" ]; then
    mkdir -p "$prefix"
    [ -f "$prefix/package.json" ] || echo '{"name":"hutch-bench-peers","private":true}' >"$prefix/package.json"
    # 0.3.x does not install from the registry (a dependency version is missing); 0.2.x does
    (cd "$prefix" && npm install --no-audit --no-fund --silent "secure-exec@${HUTCH_BENCH_SECURE_EXEC_VERSION:-0.2}") ||
      echo "bench-peers: secure-exec: npm install failed (the secure-exec peer will be skipped)" >&2
  fi
else
  echo "bench-peers: npm not found: the secure-exec peer will be skipped" >&2
fi
# matplotlib for the plots, in a venv of its own
venv="${HUTCH_BENCH_VENV:-/var/cache/hutch-bench/venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
  apt_install python3-venv || true
  { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install --quiet matplotlib; } ||
    echo "bench-peers: matplotlib: install failed (hutch bench draws no plots)" >&2
fi
echo "bench-peers: done" >&2

#!/usr/bin/env bash
# Installs what hutch needs on a Debian/Ubuntu host (idempotent): the OCI runtimes, busybox for
# the rootfs tests, and checks the Rust toolchain. Run as root.
set -euo pipefail
# libseccomp-dev: hutch compiles the seccomp profile once with the library crun uses
# util-linux: chrt, with which the gateway benchmark runs wrk as a SCHED_BATCH task
pkgs=(crun runc bubblewrap busybox-static libseccomp-dev python3 python3-venv file ca-certificates wrk util-linux)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "deps: cargo not found; install Rust (https://rustup.rs) first" >&2; exit 1; }
# The TypeScript SDK needs Node.js 20+ with npm (the machine image has them).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || echo "deps: node and npm not found; the TypeScript SDK tests will fail (install Node.js 20+)" >&2

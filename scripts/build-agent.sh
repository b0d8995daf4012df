#!/usr/bin/env bash
# Builds the guest agent as a static binary (it must run inside any root filesystem) and prints
# its path. hutch finds it through $HUTCH_AGENT or an install location (scripts/install.sh).
# Tries the musl target first; falls back to glibc with crt-static when the musl target cannot be
# added (rustup needs the network for that).
set -euo pipefail
cd "$(dirname "$0")/.."
build_musl() {
  rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl \
    || rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 || return 1
  cargo build -q -p hutch-agent --profile agent --target x86_64-unknown-linux-musl || return 1
  echo "${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/agent/hutch-agent"
}
build_glibc_static() {
  RUSTFLAGS="-C target-feature=+crt-static" cargo build -q -p hutch-agent --profile agent \
    --target x86_64-unknown-linux-gnu >&2 || return 1
  echo "${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/agent/hutch-agent"
}
bin=$(build_musl) || bin=$(build_glibc_static)
if file "$bin" 2>/dev/null | grep -q 'dynamically linked'; then
  echo "build-agent: $bin is not static" >&2
  exit 1
fi
realpath "$bin"

#!/usr/bin/env bash
# Builds the gateway benchmark's handler twice from one source (crate hutch-gateway-handler):
# for the host (the /process/ and /container/ variants) and for wasm32-wasip1 (the /wasm/ and
# /wasmtime-cli/ variants). Adds the wasm32-wasip1 target with rustup when it is missing.
# Both builds use the release profile, with one codegen unit for the handler crate (Cargo.toml);
# the wasm build links a 64 KiB stack instead of Rust's 1 MiB (crates/hutch-gateway-handler/build.rs).
# Prints two lines: the native binary, then the .wasm file.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$(pwd)/$target" ;; esac
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1; then
  echo "build-gateway-handler: adding the wasm32-wasip1 target" >&2
  rustup target add wasm32-wasip1 >&2
fi
cargo build -q --release -p hutch-gateway-handler >&2
cargo build -q --release -p hutch-gateway-handler --target wasm32-wasip1 >&2
echo "$target/release/hutch-gateway-handler"
echo "$target/wasm32-wasip1/release/hutch-gateway-handler.wasm"

#!/usr/bin/env bash
# The whole test suite: unit tests, the guest agent through the process backend, the CLI, the
# conformance suite on crun and runc (needs root), the stock E2B SDKs against the E2B-compatible
# API, and the benchmark smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-target}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

echo "== format" >&2
cargo fmt --all -- --check

echo "== static guest agent" >&2
HUTCH_AGENT="$(bash scripts/build-agent.sh)"
export HUTCH_AGENT

echo "== WebAssembly guests (CPython, QuickJS) and the gateway handler" >&2
HUTCH_WASM_GUESTS="$(bash scripts/build-wasm-guests.sh | tail -n 1)"
export HUTCH_WASM_GUESTS
mapfile -t handlers < <(bash scripts/build-gateway-handler.sh)
export HUTCH_GATEWAY_NATIVE="${handlers[0]}" HUTCH_GATEWAY_WASM="${handlers[1]}"
export HUTCH_STATE_DIR="${HUTCH_STATE_DIR:-/run/hutch-test}"

echo "== unit and integration tests" >&2
cargo test --workspace --quiet 2>&1 | tee -a "$log"

echo "== conformance suite (crun, runc), the daemon, the gateway, end-to-end CLI (root)" >&2
# one case at a time: the leak checks compare whole-host snapshots
cargo test --quiet -p hutch-conformance --test container -- --include-ignored --test-threads=1 2>&1 | tee -a "$log"
cargo test --quiet -p hutch-server -p hutch-gateway -p hutch-cli -- --include-ignored --test-threads=1 2>&1 | tee -a "$log"

echo "== conformance suite on the wasm backend (release: wasmtime unoptimised is 100x slower)" >&2
cargo test --quiet --release -p hutch-conformance --test wasm -- --include-ignored --test-threads=1 2>&1 | tee -a "$log"

echo "== SDKs against a real daemon" >&2
cargo build --quiet -p hutch-cli
export HUTCH_BIN="$(pwd)/$target/debug/hutch"
case "$target" in /*) HUTCH_BIN="$target/debug/hutch" ;; esac
bash sdk/python/run_tests.sh -q 2>&1 | tee -a "$log"
HUTCH_REQUIRE_LIVE=1 bash sdk/typescript/run_tests.sh 2>&1 | tee -a "$log"
bash scripts/run-examples.sh

echo "== the stock E2B SDKs (PyPI e2b, e2b-code-interpreter; npm e2b) against hutch serve --e2b" >&2
bash scripts/test-e2b.sh all 2>&1 | tee -a "$log"

echo "== benchmark smoke run" >&2
cargo build --quiet -p hutch-cli
# every suite once; a peer that is not installed is reported as skipped, not a failure
# (scripts/bench-peers.sh installs them); fails only if a suite cannot run at all
"$target/debug/hutch" bench --smoke --out "$target/bench-smoke"
# one closing line over every test run above (cargo, pytest, node --test)
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^(=+ )?[0-9]+ (passed|failed).* in [0-9.]+s/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^# pass [0-9]+$/ { p += $3 } /^# fail [0-9]+$/ { f += $3 }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"

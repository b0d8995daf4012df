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
export HUTCH_STATE_DIR="${HUTCH_STATE_DIR:-/run/hutch-test}"

echo "== unit and integration tests" >&2
cargo test --workspace --quiet 2>&1 | tee -a "$log"

echo "== conformance suite (crun, runc), the daemon, end-to-end CLI (root)" >&2
# one case at a time: the leak checks compare whole-host snapshots
cargo test --quiet -p hutch-conformance -p hutch-server -p hutch-cli -- --include-ignored --test-threads=1 2>&1 | tee -a "$log"

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
for suite in cold pool runner; do
  "$target/debug/hutch" bench --smoke --out "$target/bench-smoke" "$suite"
done
# one closing line over every test run above (cargo, pytest, node --test)
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^(=+ )?[0-9]+ (passed|failed).* in [0-9.]+s/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^# pass [0-9]+$/ { p += $3 } /^# fail [0-9]+$/ { f += $3 }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"

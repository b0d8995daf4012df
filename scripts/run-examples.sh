#!/usr/bin/env bash
# Runs the five SDK examples in both languages against a daemon this script starts (and stops).
# Needs root, the hutch binary ($HUTCH_BIN or target/debug/hutch), the guest agent ($HUTCH_AGENT),
# the Python SDK venv (sdk/python/run_tests.sh makes it) and the built TypeScript SDK
# (sdk/typescript/run_tests.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
hutch="${HUTCH_BIN:-$target/debug/hutch}"
venv="$target/venv-sdk-python"
dir="$(mktemp -d)"
. scripts/lib/daemon.sh
start_daemon "$hutch" "$dir"
export HUTCH_URL="unix://$dir/h.sock"
examples=(one_shot files streaming agent_loop pool)
passed=0
for e in "${examples[@]}"; do
  echo "-- python $e" >&2
  timeout 120 "$venv/bin/python" "examples/python/$e.py" >/dev/null
  passed=$((passed + 1))
done
(cd examples/typescript && npm ci --no-audit --no-fund --silent && npm run --silent build)
for e in "${examples[@]}"; do
  echo "-- typescript $e" >&2
  timeout 120 node "examples/typescript/dist/$e.js" >/dev/null
  passed=$((passed + 1))
done
echo "examples: $passed passed, 0 failed"

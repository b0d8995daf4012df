#!/usr/bin/env bash
# Tests of the Python SDK: the shared test vectors (no network) and the live tests against a real
# `hutch serve` (they need root, crun, target/debug/hutch or $HUTCH_BIN, and the guest agent in
# $HUTCH_AGENT or target/*/agent/; they skip with the reason otherwise). Builds nothing: run
# `cargo build -p hutch-cli` and `HUTCH_AGENT=$(bash scripts/build-agent.sh)` first.
# Usage: sdk/python/run_tests.sh [pytest arguments]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${CARGO_TARGET_DIR:-$root/target}/venv-sdk-python"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$here[test]"
cd "$here"
exec "$venv/bin/python" -m pytest "$@"

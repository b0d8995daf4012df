#!/usr/bin/env bash
# The E2B compatibility suite: the stock `e2b` and `e2b-code-interpreter` packages from PyPI and
# `e2b` from npm, unchanged, against a `hutch serve --e2b` this script starts (and stops).
# Needs root, crun, the hutch binary ($HUTCH_BIN or target/debug/hutch) and the guest agent
# ($HUTCH_AGENT); installs the SDKs itself (a venv and node_modules under the target directory).
# Usage: scripts/test-e2b.sh [python|js|all] [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
hutch="${HUTCH_BIN:-$target/debug/hutch}"
which="${1:-all}"
[ $# -gt 0 ] && shift
venv="$target/venv-e2b"
node_dir="$target/node-e2b"

if [ "$which" != js ]; then
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r tests/e2b/python/requirements.txt
fi
if [ "$which" != python ]; then
  mkdir -p "$node_dir"
  cp tests/e2b/js/package.json "$node_dir/package.json"
  (cd "$node_dir" && npm install --no-audit --no-fund --silent)
fi

dir="$(mktemp -d)"
port="${HUTCH_E2B_PORT:-$((20000 + RANDOM % 20000))}"
# a short idle timeout: E2B sandboxes must live to their own timeout regardless
on_daemon_exit() {
  if [ -n "${HUTCH_E2B_KEEP_LOG:-}" ]; then cp "$dir/daemon.log" "$HUTCH_E2B_KEEP_LOG"; fi
}
. scripts/lib/daemon.sh
start_daemon "$hutch" "$dir" --e2b "127.0.0.1:$port" --idle-timeout 2s
if ! E2B_API_KEY="$(HUTCH_URL="unix://$dir/h.sock" "$hutch" key create e2b-tests --e2b 2>"$dir/key.err")"; then
  echo "test-e2b: cannot make an API key:" >&2
  cat "$dir/key.err" "$dir/daemon.log" >&2
  exit 1
fi
export E2B_API_KEY
export E2B_API_URL="http://127.0.0.1:$port"
export E2B_SANDBOX_URL="http://127.0.0.1:$port"
unset E2B_DEBUG E2B_DOMAIN

status=0
if [ "$which" != js ]; then
  "$venv/bin/python" -m pytest -c tests/e2b/python/pytest.ini tests/e2b/python "$@" || status=$?
fi
if [ "$which" != python ]; then
  NODE_PATH="$node_dir/node_modules" node --test tests/e2b/js/ || status=$?
fi
exit $status

#!/usr/bin/env bash
# Fuzzes the daemon's HTTP API against its contract (spec/openapi.yaml) with schemathesis.
#
#   scripts/api-fuzz.sh target/debug/hutch [extra `st run` options]
#
# Starts `hutch serve` on a temporary Unix socket and a free TCP port on 127.0.0.1, creates API
# keys through the socket (the trusted, admin transport), and runs schemathesis over TCP twice:
#   1. every operation with a non-admin key (so generated sandboxes are isolated containers:
#      only admin keys may use the unisolated process backend or a host rootfs);
#   2. the admin-only operations (keys, audit, pools) with an admin key.
# Any 5xx is a server bug (check not_a_server_error); the conformance checks report where the
# answers leave the spec. Bounded in time; the daemon is stopped (and its sandboxes destroyed)
# on exit. Needs python3 with venv; the container backend needs root and crun/runc, without them
# sandbox creation answers 503 backend_unavailable and less is exercised.
#
# Environment: API_FUZZ_EXAMPLES (default 20 per operation), API_FUZZ_TIMEOUT (seconds per pass,
# default 600), API_FUZZ_CHECKS (default: not_a_server_error and the spec conformance checks),
# API_FUZZ_WORKERS (default 1: with more, hypothesis trips over CPython 3.11's thread-unsafe
# ast.parse and reports "AST constructor recursion depth mismatch" runtime errors),
# API_FUZZ_OUT (reports and the daemon log; default $target/api-fuzz), HUTCH_AGENT.
set -euo pipefail
hutch="${1:?usage: scripts/api-fuzz.sh HUTCH_BINARY [st run options]}"
hutch="$(realpath "$hutch")"
shift
cd "$(dirname "$0")/.."
[ -x "$hutch" ] || { echo "api-fuzz: $hutch is not executable" >&2; exit 2; }
target="${CARGO_TARGET_DIR:-target}"
venv="$target/venv-api-fuzz"
out="${API_FUZZ_OUT:-$target/api-fuzz}"
examples="${API_FUZZ_EXAMPLES:-20}"
pass_timeout="${API_FUZZ_TIMEOUT:-600}"
workers="${API_FUZZ_WORKERS:-1}"
checks="${API_FUZZ_CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance}"

if [ ! -x "$venv/bin/st" ]; then
  echo "api-fuzz: installing schemathesis into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet schemathesis
fi

work="$(mktemp -d /tmp/hutch-api-fuzz.XXXXXX)"
sock="$work/hutch.sock"
mkdir -p "$out"
log="$out/daemon.log"
daemon=""
cleanup() {
  if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
    kill -TERM "$daemon" 2>/dev/null || true
    # graceful shutdown destroys the sandboxes; give it time, then insist
    for _ in $(seq 1 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$hutch" serve --socket "$sock" --tcp "127.0.0.1:$port" --state-dir "$work/state" \
  --db "$work/hutch.db" --max-sandboxes 20 --default-ttl 120s --log-format json >"$log" 2>&1 &
daemon=$!

on_socket() { curl -sS --max-time 10 --unix-socket "$sock" "$@"; }
for _ in $(seq 1 300); do
  on_socket -f http://localhost/v1/health >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || { echo "api-fuzz: the daemon exited; see $log" >&2; tail -20 "$log" >&2; exit 1; }
  sleep 0.1
done
on_socket -f http://localhost/v1/version || { echo "api-fuzz: the daemon did not come up; see $log" >&2; exit 1; }
echo >&2

new_key() {
  on_socket -f -H 'Content-Type: application/json' -d "$1" http://localhost/v1/keys \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])'
}
# the user key's quota keeps the daemon below its capacity (a full daemon rightly answers 503
# capacity_exceeded, which the fuzzer would count as a server error)
user_key="$(new_key '{"name": "api-fuzz-user", "max_sandboxes": 10}')"
admin_key="$(new_key '{"name": "api-fuzz-admin", "admin": true}')"

# `st run` over TCP; the remaining arguments are passed through. The key goes in both headers:
# schemathesis generates values for the documented security schemes otherwise, and X-API-Key
# wins over Authorization.
fuzz() {
  local name="$1" key="$2"
  shift 2
  echo "== api-fuzz: $name" >&2
  timeout --signal=INT --kill-after=30 "$pass_timeout" "$venv/bin/st" run spec/openapi.yaml \
    --url "http://127.0.0.1:$port" \
    --header "Authorization: Bearer $key" --header "X-API-Key: $key" \
    --checks "$checks" \
    --max-examples "$examples" \
    --workers "$workers" \
    --request-timeout 60 \
    --suppress-health-check all \
    --report junit,ndjson --report-dir "$out/$name" \
    "$@"
}

status=0
fuzz user "$user_key" --exclude-tag admin "$@" || status=$?
admin_ops='^(/v1/keys|/v1/audit|/v1/pools)'
fuzz admin "$admin_key" --include-path-regex "$admin_ops" "$@" || status=$?

# 5xx answers from the daemon's request log, with the request that caused them (the ndjson
# reports hold the full requests)
python3 - "$log" <<'EOF' || true
import json, re, sys
seen = {}
for line in open(sys.argv[1], errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    f = e.get("fields", {})
    if f.get("message") == "request" and int(f.get("status", 0)) >= 500:
        path = re.sub(r"/hutch-[0-9a-f]+", "/{id}", f.get("path", ""))
        path = re.sub(r"/processes/[0-9]+", "/processes/{pid}", path)
        k = (f.get("method"), path, f.get("status"))
        seen[k] = seen.get(k, 0) + 1
print(f"api-fuzz: {sum(seen.values())} server errors (5xx) in the daemon log", file=sys.stderr)
for (m, p, s), n in sorted(seen.items()):
    print(f"  {s} {m} {p} (x{n})", file=sys.stderr)
EOF
echo "api-fuzz: reports in $out (daemon log: $log)" >&2
exit "$status"

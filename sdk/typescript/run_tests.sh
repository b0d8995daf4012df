#!/usr/bin/env bash
# Builds and tests the TypeScript SDK: the shared test vectors and the transport against a fake
# daemon (no network), the package's ESM and CommonJS builds, then the live tests against a
# real `hutch serve`. The live tests need root, the hutch binary (target/debug/hutch or
# $HUTCH_BIN) and the guest agent ($HUTCH_AGENT, or target/*/agent/ from
# scripts/build-agent.sh); they skip with the reason otherwise (HUTCH_REQUIRE_LIVE=1: fail
# instead). Needs Node 20+ and npm; builds nothing in Rust.
# Usage: sdk/typescript/run_tests.sh
set -euo pipefail
cd "$(dirname "$0")"

node -e 'const [major] = process.versions.node.split(".").map(Number); if (major < 20) { console.error(`node ${process.versions.node}: the SDK needs node >= 20`); process.exit(1); }'
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi
npm run build
npm test

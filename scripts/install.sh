#!/usr/bin/env bash
# Sets up hutch on this machine: system packages, a release build, the static guest agent, and
# installs `hutch` to $PREFIX/bin and the agent to $PREFIX/lib/hutch (PREFIX=/usr/local).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX="${PREFIX:-/usr/local}"
bash scripts/deps.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p hutch-cli
agent=$(bash scripts/build-agent.sh)
install -D -m 0755 "$target/release/hutch" "$PREFIX/bin/hutch"
install -D -m 0755 "$agent" "$PREFIX/lib/hutch/hutch-agent"
echo "installed $PREFIX/bin/hutch and $PREFIX/lib/hutch/hutch-agent" >&2

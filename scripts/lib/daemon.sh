# Sourced by scripts that need a private hutch daemon.
# `start_daemon HUTCH DIR [serve flags...]` starts `hutch serve` on DIR/h.sock with its state and
# log in DIR, stops it and removes DIR when the script exits (calling `on_daemon_exit` first when
# the caller defines it), and waits for the socket; it fails with the daemon's log if none comes.
start_daemon() {
  local hutch="$1"
  daemon_dir="$2"
  shift 2
  "$hutch" serve --socket "$daemon_dir/h.sock" --state-dir "$daemon_dir/state" \
    --db "$daemon_dir/h.db" --log-format text "$@" 2>"$daemon_dir/daemon.log" &
  daemon_pid=$!
  trap stop_daemon EXIT
  for _ in $(seq 100); do
    [ -S "$daemon_dir/h.sock" ] && return 0
    sleep 0.1
  done
  echo "the daemon did not open $daemon_dir/h.sock:" >&2
  cat "$daemon_dir/daemon.log" >&2
  return 1
}

stop_daemon() {
  kill -TERM "$daemon_pid" 2>/dev/null || true
  wait "$daemon_pid" 2>/dev/null || true
  if declare -F on_daemon_exit >/dev/null; then on_daemon_exit; fi
  rm -rf "$daemon_dir"
}

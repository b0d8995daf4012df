# hutch bash runner: one persistent shell per code context (see README.md).
# Started as `bash --noprofile --norc -c <this file>`. Requests arrive on fd 3 as
# "run <seq> <nbytes>\n" + <nbytes> of code; events leave on fd 4 as JSON lines: ready
# (once), error (when the snippet's status is non-zero), done (with exit_code). Snippets
# are sourced by this shell, so variables, functions, aliases, options and cwd persist.
# SIGINT kills the foreground command and aborts the rest of the snippet (status 130);
# while idle it is ignored. `exit` (or a failure under `set -e`) ends the runner.
shopt -s expand_aliases
set -T # functrace: the DEBUG trap below unwinds through shell functions too
__hutch_unwind='[[ -n ${__hutch_intr-} ]] && return 130 2>/dev/null'
__hutch_int='[[ -n ${__hutch_busy-} ]] && { __hutch_intr=1; trap "$__hutch_unwind" DEBUG; return 130 2>/dev/null; }'
trap "$__hutch_int" INT
__hutch_n=0
builtin printf '{"ev":"ready","lang":"bash","version":"%s","pid":%d}\n' "$BASH_VERSION" "$$" >&4
while IFS=' ' builtin read -r -u 3 __hutch_cmd __hutch_seq __hutch_len; do
  [[ $__hutch_len =~ ^[0-9]+$ && $__hutch_seq =~ ^-?[0-9]+$ ]] || continue
  __hutch_code=
  if ((__hutch_len > 0)); then # LC_ALL=C: -N counts bytes, not characters
    IFS= LC_ALL=C builtin read -r -d '' -N "$__hutch_len" -u 3 __hutch_code || break
  fi
  [[ $__hutch_cmd == run ]] || continue
  __hutch_n=$((__hutch_n + 1)) __hutch_busy=1
  # fds 3/4 are closed for the snippet (and restored after), so children never inherit them.
  { . <(builtin printf '%s' "$__hutch_code"); } 3<&- 4>&-
  __hutch_st=$? __hutch_busy=
  [[ -z ${__hutch_intr-} ]] || builtin trap - DEBUG
  __hutch_intr=
  builtin trap "$__hutch_int" INT
  ((__hutch_st == 0)) || builtin printf '{"ev":"error","seq":%s,"name":"ExitCode","value":"exit status %d","traceback":[]}\n' "$__hutch_seq" "$__hutch_st" >&4
  builtin printf '{"ev":"done","seq":%s,"execution_count":%d,"exit_code":%d}\n' "$__hutch_seq" "$__hutch_n" "$__hutch_st" >&4
done

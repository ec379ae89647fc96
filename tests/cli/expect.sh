#!/usr/bin/env bash
# Runs a command and checks its exit code and output: expect.sh CODE REGEX COMMAND [ARGS...]
# The output (stdout and stderr) must match the extended regex REGEX. A failing command must
# explain itself in one line on stderr. An argument @PORT@ becomes a port this script holds open.
set -u
code=$1 regex=$2
shift 2
args=("$@")
if [[ " ${args[*]} " == *@PORT@* ]]; then
  coproc HOLD { exec python3 -c 'import socket,time; s=socket.socket(); s.bind(("0.0.0.0",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(120)'; }
  trap 'kill $HOLD_PID 2>/dev/null' EXIT
  read -r port <&"${HOLD[0]}"
  args=("${args[@]//@PORT@/$port}")
fi
out=$(mktemp) err=$(mktemp)
"${args[@]}" >"$out" 2>"$err"
got=$?
cat "$out" "$err"
status=0
if [ "$got" != "$code" ]; then echo "expect.sh: exit code $got, expected $code"; status=1; fi
if ! cat "$out" "$err" | grep -Eq -- "$regex"; then echo "expect.sh: no output matches: $regex"; status=1; fi
if [ "$code" != 0 ] && [ "$(grep -vc '^accelerate: warning' "$err")" != 1 ]; then
  echo "expect.sh: a failure must be one line on stderr, got $(wc -l <"$err")"; status=1
fi
rm -f "$out" "$err"
exit $status

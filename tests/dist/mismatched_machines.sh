#!/usr/bin/env bash
# Machines launched for jobs of other sizes, or two given the same --machine_rank, fail at once with
# the reason on every launcher (the roll call, cpp/state/roll_call.h), not after the rendezvous
# timeout with a hint at the port.
# Usage: mismatched_machines.sh LAUNCHER PROGRAM [ARGS...]
set -u
launcher=$1
shift
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Each launcher's exit code and output; with `timeout` a hang fails the test instead of holding it.
run() {  # NAME ARGS...
  local name=$1
  shift
  timeout 100 "$launcher" --num_machines 2 --main_process_ip 127.0.0.1 --kill_timeout 2 "$@" > "$out/$name" 2>&1
  echo $? > "$out/$name.code"
}
expect() {  # NAME TEXT
  local code
  code=$(cat "$out/$1.code")
  [ "$code" != 0 ] && [ "$code" != 124 ] && grep -q "$2" "$out/$1" ||
    { echo "$1 exited $code without '$2':"; tail -5 "$out/$1"; exit 1; }
}

# Machine 0 thinks the job has 4 processes, machine 1 that it has 6.
port=$(free_port)
start=$(date +%s)
run m1 --num_processes 6 --machine_rank 1 --main_process_port "$port" "$@" &
run m0 --num_processes 4 --machine_rank 0 --main_process_port "$port" "$@"
wait
expect m0 "but process 0's job has 4"
expect m1 "but process 0's job has 4"

# Two launchers given --machine_rank 1 beside machine 0.
port=$(free_port)
run a --num_processes 4 --machine_rank 1 --main_process_port "$port" "$@" &
run b --num_processes 4 --machine_rank 1 --main_process_port "$port" "$@" &
run m0 --num_processes 4 --machine_rank 0 --main_process_port "$port" "$@"
wait
expect m0 "was started twice"
elapsed=$(($(date +%s) - start))
[ "$elapsed" -lt 90 ] || { echo "the mismatches took ${elapsed}s to be found"; exit 1; }
echo "ok: mismatched sizes and a repeated machine rank fail on every launcher in ${elapsed}s"

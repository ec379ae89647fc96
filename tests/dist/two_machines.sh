#!/usr/bin/env bash
# Two machines simulated on this one: two launchers with --num_machines 2 and 2 processes each meet
# at 127.0.0.1 and run a program as one job of 4 ranks (global ranks 0-1 on "machine" 0, 2-3 on 1).
# Usage: two_machines.sh LAUNCHER PROGRAM [ARGS...]; fails unless both launchers succeed.
set -u
launcher=$1
shift
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
common=(--num_machines 2 --num_processes 4 --main_process_ip 127.0.0.1 --main_process_port "$port"
        --kill_timeout 2)
"$launcher" "${common[@]}" --machine_rank 1 "$@" > >(sed -u 's/^/[machine 1] /') 2>&1 &
second=$!
"$launcher" "${common[@]}" --machine_rank 0 "$@" > >(sed -u 's/^/[machine 0] /') 2>&1
first_code=$?
wait "$second"
second_code=$?
echo "two_machines.sh: machine 0 exited with $first_code, machine 1 with $second_code"
[ "$first_code" = 0 ] && [ "$second_code" = 0 ]

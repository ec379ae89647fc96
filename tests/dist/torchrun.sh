#!/usr/bin/env bash
# PyTorch's own launcher starts a program built on this library: torchrun's agent hosts the
# rendezvous store (TORCHELASTIC_USE_AGENT_STORE=True) and every process, 0 included, connects to it
# under the attempt's prefix, as Python processes do.
#   torchrun.sh PYTHON PROGRAM [ARGS...]
# Exit 77 (skipped) where that python's torchrun cannot start even `true` (Debian 12's torch 1.13
# under Python 3.11 fails in its own output redirection). torchrun.py lets Debian's 2.x torchrun,
# built without libuv, start at all.
set -uo pipefail
python=$1; shift
run() { "$python" "$(dirname "$0")/torchrun.py" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" --no_python "$@"; }
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || exit 77
if ! run true >/dev/null 2>&1; then
  echo "torchrun.sh: $python's torchrun cannot start processes here: skipped"
  exit 77
fi
run "$@"

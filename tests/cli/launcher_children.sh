#!/usr/bin/env bash
# The launcher's ranks hold no other rank's output pipe, and die with a launcher killed outright.
#   launcher_children.sh ACCELERATE_LAUNCH WORK_DIR
set -euo pipefail
launch=$1 work=$2
rm -rf "$work" && mkdir -p "$work"

# Each rank (pid in $work/pid_R) has ended within 5 s of its launcher's death (reaped by init).
expect_ranks_gone() {  # WHAT RANK...
  local what=$1 r pid
  shift
  for r in "$@"; do
    pid=$(cat "$work/pid_$r")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$what $r (pid $pid) still runs 5 s after its launcher was killed"; kill -9 "$pid"; exit 1
    fi
  done
}

"$launch" --num_processes 2 sh -c 'echo $$ > "$0/pid_$RANK.tmp" && mv "$0/pid_$RANK.tmp" "$0/pid_$RANK"; exec sleep 120' "$work" &
launcher=$!
for _ in $(seq 100); do [ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] && break; sleep 0.1; done
[ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] || { echo "the ranks did not start"; kill -9 $launcher; exit 1; }

# No rank holds another rank's output pipe (its read end kept that rank from ever seeing its
# reader gone).
own_0=$(readlink /proc/"$(cat "$work/pid_0")"/fd/1) own_1=$(readlink /proc/"$(cat "$work/pid_1")"/fd/1)
for r in 0 1; do
  other=$own_1; [ $r = 1 ] && other=$own_0
  if for f in /proc/"$(cat "$work/pid_$r")"/fd/*; do readlink "$f"; done | grep -qxF "$other"; then
    echo "rank $r holds the other rank's output pipe ($other)"; kill -9 $launcher; exit 1
  fi
done

# SIGKILL gives the launcher no chance to stop its ranks: they must not run on unsupervised.
kill -9 $launcher
wait $launcher 2>/dev/null || true
expect_ranks_gone "rank" 0 1
# The same for a program that a wrapper script starts without exec: the launcher's direct child (the
# rank's guardian) stops the rank's whole process group.
rm -f "$work"/pid_*
"$launch" --num_processes 2 sh -c 'sh -c "echo \$\$ > $0/pid_$RANK.tmp && mv $0/pid_$RANK.tmp $0/pid_$RANK; exec sleep 120"; echo after' "$work" &
launcher=$!
for _ in $(seq 100); do [ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] && break; sleep 0.1; done
[ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] || { echo "the wrapped ranks did not start"; kill -9 $launcher; exit 1; }
kill -9 $launcher
wait $launcher 2>/dev/null || true
expect_ranks_gone "wrapped rank" 0 1

# A rank that fails ends the job; what it started in the background (a data server, say) goes with
# the job, by SIGTERM or else by SIGKILL at --kill_timeout, as the other ranks' processes do.
rm -f "$work"/pid_*
code=0
"$launch" --num_processes 2 --kill_timeout 2 sh -c 'sh -c "trap \"\" TERM; echo \$\$ > $0/pid_$RANK.tmp && mv $0/pid_$RANK.tmp $0/pid_$RANK; exec sleep 120" & while [ ! -f $0/pid_$RANK ]; do sleep 0.1; done; [ $RANK = 1 ] && exit 3; sleep 120' "$work" 2>/dev/null || code=$?
[ "$code" = 3 ] || { echo "a failed rank: the launcher exited $code, not 3"; exit 1; }
expect_ranks_gone "a background process of a failed job's rank" 0 1

# SIGHUP (a closed terminal or ssh session) and SIGQUIT stop the ranks as SIGTERM does: forwarded,
# and the launcher exits 128 + the signal.
for sig in HUP QUIT; do
  rm -f "$work"/pid_*
  "$launch" --num_processes 2 sh -c 'sh -c "echo \$\$ > $0/pid_$RANK.tmp && mv $0/pid_$RANK.tmp $0/pid_$RANK; exec sleep 120"' "$work" &
  launcher=$!
  for _ in $(seq 100); do [ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] && break; sleep 0.1; done
  kill -$sig $launcher
  code=0
  wait $launcher || code=$?
  want=$((128 + $(kill -l $sig)))
  [ "$code" = "$want" ] || { echo "after SIG$sig the launcher exited $code, not $want"; exit 1; }
  expect_ranks_gone "after SIG$sig, rank" 0 1
done

# A second signal does not wait out --kill_timeout for ranks that ignore the first: it kills them.
rm -f "$work"/pid_*
"$launch" --num_processes 2 --kill_timeout 60 sh -c 'trap "" TERM; echo $$ > $0/pid_$RANK.tmp && mv $0/pid_$RANK.tmp $0/pid_$RANK; exec sleep 120' "$work" 2> "$work/twice_err" &
launcher=$!
for _ in $(seq 100); do [ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] && break; sleep 0.1; done
kill -TERM $launcher
for _ in $(seq 100); do grep -q "passed on to the processes" "$work/twice_err" && break; sleep 0.1; done
started=$SECONDS
kill -TERM $launcher
code=0
wait $launcher || code=$?
[ "$code" = 143 ] && [ $((SECONDS - started)) -lt 20 ] && grep -q "killing the processes now" "$work/twice_err" ||
  { echo "after a second SIGTERM: exit $code after $((SECONDS - started)) s: $(cat "$work/twice_err")"; exit 1; }
expect_ranks_gone "after a second SIGTERM, rank" 0 1

# A stopped rank (SIGSTOP, a debugger's ^Z) does not hold a failed job's teardown until
# --kill_timeout: the launcher continues the stopped after its SIGTERM. Rank 0 stops itself, rank 1
# then fails.
rm -f "$work"/pid_*
started=$SECONDS
code=0
"$launch" --num_processes 2 --kill_timeout 60 sh -c 'echo $$ > $0/pid_$RANK.tmp && mv $0/pid_$RANK.tmp $0/pid_$RANK
  if [ $RANK = 0 ]; then kill -STOP $$; exec sleep 120; fi
  until [ -f $0/pid_0 ] && grep -q "^State:.*T" /proc/$(cat $0/pid_0)/status; do sleep 0.1; done; exit 3' "$work" \
  2>/dev/null || code=$?
[ "$code" = 3 ] && [ $((SECONDS - started)) -lt 20 ] ||
  { echo "a failed job with a stopped rank: exit $code after $((SECONDS - started)) s (--kill_timeout 60)"; exit 1; }
expect_ranks_gone "a stopped rank of a failed job, rank" 0

# The same when the launcher is asked to stop and a rank's guardian is stopped too.
rm -f "$work"/pid_* "$work"/guardian_*
"$launch" --num_processes 2 --kill_timeout 60 sh -c 'echo $PPID > $0/guardian_$RANK; echo $$ > $0/pid_$RANK.tmp && mv $0/pid_$RANK.tmp $0/pid_$RANK; exec sleep 120' "$work" 2>/dev/null &
launcher=$!
for _ in $(seq 100); do [ -f "$work/pid_0" ] && [ -f "$work/pid_1" ] && break; sleep 0.1; done
kill -STOP "$(cat "$work/guardian_0")" "$(cat "$work/pid_0")"
started=$SECONDS
kill -TERM $launcher
code=0
wait $launcher || code=$?
[ "$code" = 143 ] && [ $((SECONDS - started)) -lt 20 ] ||
  { echo "SIGTERM with a stopped rank and guardian: exit $code after $((SECONDS - started)) s (--kill_timeout 60)"; exit 1; }
expect_ranks_gone "a stopped rank after SIGTERM, rank" 0 1

# A console whose reader goes (`| head -1`) does not end the launcher or the job: both ranks finish.
rm -f "$work"/done_*
code=$( ("$launch" --num_processes 2 sh -c 'echo first; sleep 1; for i in $(seq 2000); do echo line $i; done; touch $0/done_$RANK' "$work" 2>/dev/null; echo $? > "$work/launcher_code") | head -1 >/dev/null; cat "$work/launcher_code")
[ "$code" = 0 ] && [ -f "$work/done_0" ] && [ -f "$work/done_1" ] ||
  { echo "with its output cut by head the launcher exited $code, ranks done: $(ls "$work" | grep -c done_)"; exit 1; }

# A progress update ended by '\r' reaches the console at once, not with the next output (polled
# while the rank waits), and "\r\n" ends one line with one prefix.
"$launch" --num_processes 1 sh -c 'printf "step 1\r"; sleep 60' > "$work/progress" &
progress=$!
for _ in $(seq 200); do grep -q "step 1" "$work/progress" && break; sleep 0.1; done
grep -q "step 1" "$work/progress" || { echo "a '\\r' progress update waited for the next output"; kill $progress; exit 1; }
kill $progress
wait $progress 2>/dev/null || true
records=$("$launch" --num_processes 2 sh -c 'printf "abc\r\n"' | grep -c '^\[rank[01]\]: ' || true)
[ "$records" = 2 ] || { echo "\"abc\\r\\n\" from 2 ranks gave $records prefixed records, not 2"; exit 1; }

# Rank guardians stop what a wrapper script's program left behind, even if it ignores SIGTERM,
# once their launcher is killed outright (SIGKILL at --kill_timeout).
rm -f "$work"/pid_*
"$launch" --num_processes 1 --kill_timeout 1 sh -c 'sh -c "trap \"\" TERM; echo \$\$ > $0/pid_0.tmp && mv $0/pid_0.tmp $0/pid_0; exec sleep 120"' "$work" &
launcher=$!
for _ in $(seq 100); do [ -f "$work/pid_0" ] && break; sleep 0.1; done
kill -9 $launcher
wait $launcher 2>/dev/null || true
expect_ranks_gone "ignoring SIGTERM, rank" 0

# Under nohup (SIGHUP ignored) a SIGHUP leaves the job running: sent once the rank runs (the
# launcher has set up its signals by then).
rm -f "$work/hup_ready"
nohup "$launch" --num_processes 1 sh -c 'touch $0/hup_ready; sleep 1; echo survived' "$work" > "$work/hup_out" 2>/dev/null &
hup=$!
for _ in $(seq 200); do [ -f "$work/hup_ready" ] && break; sleep 0.1; done
kill -HUP $hup
code=0
wait $hup || code=$?
[ "$code" = 0 ] && grep -q survived "$work/hup_out" ||
  { echo "nohup did not protect the job from SIGHUP (exit $code): $(cat "$work/hup_out")"; exit 1; }

# A rank's output passes through byte for byte: a NUL and what follows it, and the newline.
nuls=$("$launch" --num_processes 2 sh -c 'printf "a\0b\n"' | tr -cd '\0' | wc -c)
lines=$("$launch" --num_processes 2 sh -c 'printf "a\0b\n"' | grep -ac '^\[rank[01]\]: a.b$' || true)
[ "$nuls" = 2 ] && [ "$lines" = 2 ] || { echo "NUL bytes lost in the output relay ($nuls NULs, $lines lines)"; exit 1; }

# On one machine main_process_ip is not used (Accelerate's launch ignores it there): localhost.
addr=$("$launch" --num_processes 1 --main_process_ip 10.255.255.1 sh -c 'echo $MASTER_ADDR')
[ "$addr" = 127.0.0.1 ] || { echo "MASTER_ADDR is '$addr' on one machine"; exit 1; }

# A relative --config_file reaches the program as an absolute path (it may change its folder).
here=$(pwd)
cp "$(dirname "$0")/../data/config/multi_cpu_2.yaml" "$work/c.yaml"
cd "$work"
seen=$("$launch" --config_file c.yaml --num_processes 1 sh -c 'echo $ACCELERATE_CONFIG_FILE')
cd "$here"
[ "$seen" = "$(cd "$work" && pwd)/c.yaml" ] || { echo "ACCELERATE_CONFIG_FILE is '$seen'"; exit 1; }

# Only stdin, stdout and stderr pass to the ranks (as Popen's close_fds): not the launcher's others.
exec 7>"$work/held"
# (one command, no pipeline: a shell sets a pipeline up with descriptors of its own)
"$launch" --num_processes 1 sh -c 'ls /proc/$$/fd > "$0/fds"' "$work"
fds=$(sort -n "$work/fds" | tr "\n" " ")
exec 7>&-
[ "$fds" = "0 1 2 " ] || [ "$fds" = "0 1 2 10 " ] || { echo "a rank inherited descriptors: $fds"; exit 1; }

# Started with SIGCHLD ignored (the kernel would reap the ranks itself): the launcher still sees
# them end, and ends.
code=0
timeout -s KILL 60 perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV' "$launch" --num_processes 2 sh -c 'exit 0' || code=$?
[ "$code" = 0 ] || { echo "started with SIGCHLD ignored, the launcher exited $code"; exit 1; }

# Output that cannot be written (a full disk) is named on stderr, and a job that succeeds exits 1.
code=0
"$launch" --num_processes 2 sh -c 'seq 20000' > /dev/full 2> "$work/full_err" || code=$?
[ "$code" = 1 ] && grep -q "cannot write the standard output" "$work/full_err" ||
  { echo "output to a full device: exit $code, stderr: $(cat "$work/full_err")"; exit 1; }

# After its launcher is killed outright, a rank's guardian goes as soon as its group has ended, not
# at --kill_timeout.
rm -f "$work"/pid_*
"$launch" --num_processes 1 --kill_timeout 600 sh -c 'echo $PPID > "$0/pid_0.tmp" && mv "$0/pid_0.tmp" "$0/pid_0"; exec sleep 120' "$work" &
launcher=$!
for _ in $(seq 100); do [ -f "$work/pid_0" ] && break; sleep 0.1; done
kill -9 $launcher
wait $launcher 2>/dev/null || true
expect_ranks_gone "the guardian of rank" 0

echo "ok: each rank holds its own pipe only; the ranks ended with their launcher; output, address and config path pass as they should; an ignored SIGCHLD, a full console and a killed launcher's guardians are handled"

#!/usr/bin/env bash
# Fails unless every pattern of a gtest filter (':'-separated, without a negative part) names at
# least one test of one of the PROGRAMs: a test renamed out of a filtered run would otherwise drop
# out of it without a word. Usage: gtest_filter_matches.sh FILTER PROGRAM...
set -u
IFS=':' read -ra patterns <<< "$1"
shift
names=()
for program in "$@"; do
  # --gtest_list_tests prints "Suite." lines, then "  Test" lines (a "# GetParam() = ..." may follow).
  while IFS= read -r line; do
    if [[ $line == "  "* ]]; then
      read -r test _ <<< "$line"
      names+=("$suite$test")
    else
      suite=$line
    fi
  done < <("$program" --gtest_list_tests)
done
status=0
for pattern in "${patterns[@]}"; do
  count=0
  for name in "${names[@]}"; do
    # gtest's * and ? are the shell's.
    # shellcheck disable=SC2053
    [[ $name == $pattern ]] && count=$((count + 1))
  done
  if [ "$count" -eq 0 ]; then
    echo "no test matches '$pattern'"
    status=1
  else
    echo "'$pattern': $count test(s)"
  fi
done
exit $status

#!/usr/bin/env bash
# test_transcripts.sh RLY DIR CMD - drive `rly CMD` (repl or debug) from stdin with each case
# DIR/NAME.in and compare stdout+stderr and the exit status with DIR/NAME.out. Arguments for the
# command come from DIR/NAME.args when present (one line, e.g. `fact.rly --entry main`); the
# command runs in DIR. Timings (`time: 1.234 ms`) are normalized to `time: N ms`.
# RLY_UPDATE_GOLDEN=1 rewrites the .out files. Ends with `N passed, N failed`.
set -u
rly=$1 dir=$2 cmd=$3
pass=0 fail=0
for in in "$dir"/*.in; do
  name=$(basename "$in" .in)
  args=""
  [ -f "$dir/$name.args" ] && args=$(cat "$dir/$name.args")
  got=$(cd "$dir" && { timeout 60 "$rly" "$cmd" $args < "$name.in" 2>&1; echo "exit: $?"; } |
        sed -E 's/^time: [0-9.]+ ms$/time: N ms/')
  if [ "${RLY_UPDATE_GOLDEN:-}" = 1 ]; then
    printf '%s\n' "$got" > "$dir/$name.out"
  fi
  if [ "$got" = "$(cat "$dir/$name.out" 2>/dev/null)" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $cmd $name"
    diff <(printf '%s\n' "$got") "$dir/$name.out" | head -40
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]

#!/usr/bin/env bash
# gen_exclude.sh RLY - rewrite tests/onnx/exclude.txt from the current failures of the suites
# (each line: the case, then the failure message `rly test` gives as the reason). Run it after a
# change that fixes cases; review the diff: a case that starts failing must not be excluded
# silently.
set -u
rly=$1
here=$(cd "$(dirname "$0")" && pwd)
data=${RLY_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
{
  sed -n '1,/^$/p' "$here/exclude.txt" | grep '^#'
  echo
  for s in node pytorch-converted pytorch-operator simple; do
    echo "# $s"
    "$rly" test "$data/$s"/*/ 2>&1 | grep '^FAIL ' | sed -E 's/^FAIL ([^:]+): (import: )?/\1  /' | cut -c1-400
  done
} > "$here/exclude.txt.new"
mv "$here/exclude.txt.new" "$here/exclude.txt"
grep -vc '^#\|^$' "$here/exclude.txt"

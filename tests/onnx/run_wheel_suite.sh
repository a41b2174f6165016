#!/usr/bin/env bash
# run_wheel_suite.sh RLY [-ON] [--engine E] - the node suite of the onnx 1.17.0 wheel (opsets up
# to 22, unpacked by fetch_wheel_suite.sh into build/onnx-1.17 or $RLY_ONNX_WHEEL_DATA) through
# `rly test`, minus the cases listed (each with its reason) in exclude_1.17.txt. Fails when a
# case fails, when the data is missing, or when the list excludes a case of opset <= 17 that
# Debian's suite (run_suite.sh) also has and passes: those must keep passing here.
set -u
rly=$1
shift
opt=()
case "${1:-}" in -O[0-3]) opt=("$1"); shift ;; esac
if [ "${1:-}" = "--engine" ]; then opt+=("$1" "$2"); shift 2; fi
here=$(cd "$(dirname "$0")" && pwd)
data=${RLY_ONNX_WHEEL_DATA:-$here/../../build/onnx-1.17}
debian=${RLY_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
excl=$here/exclude_1.17.txt
if [ ! -d "$data/node" ]; then
  echo "onnx 1.17 node suite not found in $data (run tests/onnx/fetch_wheel_suite.sh)" >&2
  exit 1
fi
status=0
# A case of opset <= 17 that Debian's suite has and does not exclude must not be excluded here.
if [ -d "$debian/node" ]; then
  while read -r name _; do
    case "$name" in ''|'#'*) continue ;; esac
    [ -d "$debian/node/$name" ] || continue
    grep -q "^$name " "$here/exclude.txt" && continue
    [ -f "$data/node/$name/model.onnx" ] || continue
    v=$("$rly" info "$data/node/$name/model.onnx" 2>/dev/null | sed -n 's/.*ai\.onnx=\([0-9]*\).*/\1/p')
    if [ -n "$v" ] && [ "$v" -le 17 ]; then
      echo "exclude_1.17.txt: $name (opset $v) passes in Debian's suite and must not be excluded" >&2
      status=1
    fi
  done < "$excl"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "== onnx-1.17 node ${opt[*]}"
"$rly" test "${opt[@]}" --exclude "$excl" "$data/node"/*/ > "$log" 2>&1
rc=$?
grep -v '^SKIP' "$log"
n_skip=$(grep -c '^SKIP' "$log")
n_all=$(ls -d "$data/node"/*/ | wc -l)
echo "   ($n_skip skipped, reasons in tests/onnx/exclude_1.17.txt;" \
  "$(( (n_all - n_skip) * 1000 / n_all / 10 )).$(( (n_all - n_skip) * 1000 / n_all % 10 ))% of $n_all cases run)"
[ $rc -ne 0 ] && status=1
exit $status

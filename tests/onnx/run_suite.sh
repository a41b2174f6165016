#!/usr/bin/env bash
# run_suite.sh RLY [-ON] [--engine E] [SUITE...] - the ONNX backend test suites from Debian's
# libonnx-testdata through `rly test`, minus the cases listed (each with its reason) in
# exclude.txt.
# Default suites: node pytorch-converted pytorch-operator simple. -ON (-O1..-O3) optimizes
# every model first (the optimizer's differential test, docs/passes.md); --engine E runs them on
# engine E (vm or interp: the VM's differential test). Fails when any case
# fails or when the test data is missing (scripts/setup.sh installs it).
set -u
rly=$1
shift
opt=()
case "${1:-}" in -O[0-3]) opt=("$1"); shift ;; esac
if [ "${1:-}" = "--engine" ]; then opt+=("$1" "$2"); shift 2; fi
here=$(cd "$(dirname "$0")" && pwd)
data=${RLY_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(node pytorch-converted pytorch-operator simple)
if [ ! -d "$data/node" ]; then
  echo "ONNX test data not found in $data (apt-get install libonnx-testdata)" >&2
  exit 1
fi
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for s in "${suites[@]}"; do
  echo "== $s ${opt[*]}"
  "$rly" test "${opt[@]}" --exclude "$here/exclude.txt" "$data/$s"/*/ > "$log" 2>&1
  rc=$?
  grep -v '^SKIP' "$log"
  echo "   ($(grep -c '^SKIP' "$log") skipped, reasons in tests/onnx/exclude.txt)"
  [ $rc -ne 0 ] && status=1
done
exit $status

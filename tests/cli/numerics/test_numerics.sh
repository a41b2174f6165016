#!/usr/bin/env bash
# test_numerics.sh - `rly run --check-numerics` (docs/tools.md "Numerics"), run by CTest as
#   bash tests/cli/numerics/test_numerics.sh PATH/TO/rly tests/cli/numerics [PYTHON]
# Programs with a planted NaN (a log of a negative, 0/0 inside a fused group, a sqrt of a
# negative inside a recursive function, a scalar 0/0) stop with exit 1 and an error at the
# operator that made it, with its inputs' statistics, on both engines, at -O0 and -O3, and
# from a compiled .rlyx; a clean program, and a NaN that comes in as an input, run through;
# without the flag the NaN flows to the output. PYTHON (with onnx) builds an ONNX model whose
# error must name the node. Closes with `N passed, N failed`.
set -u
RLY=${1:?usage: test_numerics.sh PATH/TO/rly DIR [PYTHON]}
HERE=${2:?}
PY=${3:-python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/rly_numerics.XXXXXX")
trap 'rm -rf "$T"' EXIT
n_pass=0
n_fail=0

# expect NAME WANT_RC PATTERN... -- CMD...: run CMD; its exit status must be WANT_RC and its
# stderr must contain every PATTERN (fixed strings).
expect() {
    local name=$1 want=$2
    shift 2
    local pats=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    "$@" >"$T/out" 2>"$T/err"
    local rc=$? ok=1
    [ "$rc" -eq "$want" ] || { ok=0; echo "FAIL $name: exit $rc, want $want" >&2; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" "$T/err" || { ok=0; echo "FAIL $name: stderr lacks '$p'" >&2; }
    done
    if [ $ok -eq 1 ]; then n_pass=$((n_pass + 1)); else
        n_fail=$((n_fail + 1)); sed 's/^/    /' "$T/err" | head -20 >&2; fi
}

D=$HERE
for eng in vm interp; do
  for lvl in 0 3; do
    tag="$eng-O$lvl"
    expect "log_neg_$tag" 1 "log_neg.rly:5:8: error: check-numerics: log made 6 NaN from finite inputs" \
        "input 0: float32[2, 3]: min -2, max -2, mean -2, 0 NaN, 0 Inf" "result: float32[2, 3]: no finite element, 6 NaN, 0 Inf" \
        -- "$RLY" run "$D/log_neg.rly" --fill ones --engine $eng -O$lvl --check-numerics
    expect "div_fused_$tag" 1 "div_fused.rly:7:8: error: check-numerics: divide made 16 NaN from finite inputs" \
        "input 1: float32[4, 4]: min 0, max 0, mean 0, 0 NaN, 0 Inf" \
        -- "$RLY" run "$D/div_fused.rly" --fill ones --engine $eng -O$lvl --check-numerics
    expect "recursive_$tag" 1 "recursive.rly:9:10: error: check-numerics: sqrt made 3 NaN from finite inputs" \
        "input 0: float32[3]: min -0.0" \
        -- "$RLY" run "$D/recursive.rly" --fill ones --engine $eng -O$lvl --check-numerics
    expect "scalar_div_$tag" 1 "scalar_div.rly:5:3: error: check-numerics: divide made" \
        -- "$RLY" run "$D/scalar_div.rly" --fill ones --engine $eng -O$lvl --check-numerics
    expect "masked_$tag" 1 "masked.rly:5:8: error: check-numerics: log made 4 NaN from finite inputs" \
        -- "$RLY" run "$D/masked.rly" --fill ones --engine $eng -O$lvl --check-numerics
    expect "clean_$tag" 0 -- "$RLY" run "$D/clean.rly" --fill random --engine $eng -O$lvl --check-numerics
  done
  # the fault is located inside the group at -O3 on the VM: named with its group
  [ $eng = vm ] && expect "div_fused_group_name" 1 "in fused group fused_subtract_subtract_divide_add_exp (node 3 of 6), called at" \
        -- "$RLY" run "$D/div_fused.rly" --fill ones --engine vm -O3 --check-numerics
  # without the flag nothing stops: NaN reaches the output
  "$RLY" run "$D/log_neg.rly" --fill ones --engine $eng >"$T/out" 2>&1
  if [ $? -eq 0 ] && grep -q nan "$T/out"; then n_pass=$((n_pass + 1)); else
      n_fail=$((n_fail + 1)); echo "FAIL no_flag_$eng: the run should succeed with nan in its output" >&2; fi
done

# A NaN given as an input is carried, not made: no fault (needs numpy for the .npy).
if "$PY" -c 'import numpy' 2>/dev/null; then
    "$PY" -c "import numpy as np; np.save('$T/x.npy', np.array([[1, np.nan], [2, 3]], np.float32))"
    for eng in vm interp; do
        expect "nan_input_$eng" 0 -- "$RLY" run "$D/clean.rly" --input "x=$T/x.npy" --engine $eng --check-numerics
    done
fi

# A compiled executable checks as the source does.
"$RLY" compile "$D/div_fused.rly" -O3 -o "$T/div.rlyx" 2>"$T/err"
expect "rlyx" 1 "div_fused.rly:7:8: error: check-numerics: divide made 16 NaN" \
    -- "$RLY" run "$T/div.rlyx" --fill ones --check-numerics

# An ONNX model: the error names the node (its line of the model's pseudo source).
if "$PY" -c 'import onnx' 2>/dev/null; then
    "$PY" "$D/log_model.py" "$T/m.onnx"
    for eng in vm interp; do
        expect "onnx_$eng" 1 "error: check-numerics: log made 4 NaN" "Log 'the_log'" \
            -- "$RLY" run "$T/m.onnx" --fill ones --engine $eng --check-numerics
    done
fi

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]

#!/usr/bin/env bash
# test_shapes.sh - huge and zero-sized shapes through the `rly` command-line tool, run by CTest as
#   bash tests/cli/test_shapes.sh PATH/TO/rly
# The shape limit (docs/eval.md, "Shapes"): every dim is at most 2^62 and so is the product of
# the nonzero dims. A 128-byte .npy of shape (2^63-1, 0) fed to `rly run` through many operators,
# and a program annotated with such a shape given to `rly print`/`check`/`run`, must end at once
# with a clear error naming the size; an empty tensor of shape (2^62, 0), which the limit admits,
# must run quickly and print as `[]`. Each command runs under `timeout 20`, so a hang (a loop over
# the huge dim) fails the check instead of stalling the suite; a crash (status >= 128) fails too.
# Closes with `N passed, N failed`; exit status 1 when anything failed.
set -u

RLY=${1:?usage: test_shapes.sh PATH/TO/rly}
T=$(mktemp -d "${TMPDIR:-/tmp}/rly_shapes.XXXXXX")
trap 'rm -rf "$T"' EXIT

n_pass=0
n_fail=0

# check NAME STATUS MESSAGE: record one check (status 0 = holds).
check() {
    if [ "$2" -eq 0 ]; then
        n_pass=$((n_pass + 1))
    else
        echo "FAIL $1: $3" >&2
        if [ -s "$T/err" ]; then sed 's/^/  stderr: /' "$T/err" | head -3 >&2; fi
        n_fail=$((n_fail + 1))
    fi
}

# run ARGS...: rly under a 20 s limit, stdout to $T/out, stderr to $T/err; sets $rc (124: hung).
run() {
    timeout 20 "$RLY" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}

# expect NAME WANT_RC [GREP]: the last run exited with WANT_RC (not hung, not crashed), and when
# GREP is given, stderr (for a failure) or stdout (for a success) matches it.
expect() {
    local name=$1 want=$2 pat=${3-}
    if [ "$rc" -eq 124 ]; then
        check "$name" 1 "did not finish within 20 s"
        return
    fi
    if [ "$rc" -ge 128 ]; then
        check "$name" 1 "crashed (exit status $rc)"
        return
    fi
    check "$name" $((rc != want)) "exit status $rc, want $want"
    if [ -n "$pat" ]; then
        local where=$T/out
        [ "$want" -ne 0 ] && where=$T/err
        grep -q -- "$pat" "$where"
        check "$name.message" $? "no '$pat' in the output: $(head -c 300 "$where")"
    fi
}

# npy FILE SHAPE: a float32 .npy of this shape and no data (the header padded to 128 bytes).
npy() {
    local hdr="{'descr': '<f4', 'fortran_order': False, 'shape': $2, }"
    local pad=$((128 - 10 - ${#hdr} - 1))
    { printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n' "$hdr" "$pad" ''; } >"$1"
}
npy "$T/huge.npy" "(9223372036854775807, 0)"
npy "$T/over.npy" "(4611686018427387905, 0)"
npy "$T/prod.npy" "(2147483648, 0, 4294967296)"
npy "$T/limit.npy" "(4611686018427387904, 0)"
check npy.size $(($(wc -c <"$T/huge.npy") != 128)) "huge.npy is $(wc -c <"$T/huge.npy") bytes, want 128"

# prog FILE TYPE BODY: def @main(%x: TYPE) { BODY }
prog() {
    printf '#[version = "0.0.5"]\ndef @main(%%x: %s) {\n  %s\n}\n' "$2" "$3" >"$1"
}

# ---- a .npy past the limit, through many operators ---------------------------------------------

# Each body takes %x: Tensor[(?, 0), float32] (the npy's shape passes the type; the npy loader
# must refuse it) or works on the (2^62, 0) tensor the limit admits.
bodies=(
    "nn.relu(%x)"
    "sum(%x, axis=[0])"
    "sum(%x)"
    "max(%x, axis=[0])"
    "mean(%x, axis=[1])"
    "transpose(%x)"
    "sort(%x)"
    "argsort(%x, axis=0)"
    "topk(%x, k=0, axis=0)"
    "cumsum(%x, axis=1)"
    "cumprod(%x)"
    "nn.softmax(%x, axis=0)"
    "nn.log_softmax(%x)"
    "concatenate((%x, %x), axis=1)"
    "stack((%x, %x), axis=2)"
    "expand_dims(%x, axis=1)"
    "reverse(%x, axis=0)"
    "tile(%x, reps=[1, 3])"
    "strided_slice(%x, begin=[0, 0], end=[4, 0])"
    "add(%x, 1f)"
    "multiply(%x, %x)"
    "where(greater(%x, 0f), %x, %x)"
    "nn.batch_flatten(%x)"
    "argmax(%x, axis=[1])"
    "cast(%x, dtype=\"int8\")"
    "shape_of(%x)"
    "nn.pad(%x, 0f, pad_width=[[0, 0], [1, 1]])"
    "sequence_mask(%x, zeros(shape=[0], dtype=\"int32\"), axis=1)"
)
i=0
for b in "${bodies[@]}"; do
    i=$((i + 1))
    prog "$T/p$i.rly" "Tensor[(?, 0), float32]" "$b"
    for f in huge over prod; do
        run run "$T/p$i.rly" --input x="$T/$f.npy"
        expect "npy_$f.$b" 1 "too large"
    done
    # The limit itself: an empty tensor, a quick answer or a clean error (e.g. a result of 2^62
    # elements cannot be allocated).
    run run "$T/p$i.rly" --input x="$T/limit.npy"
    if [ "$rc" -eq 1 ]; then
        expect "npy_limit.$b" 1 "error"
    else
        expect "npy_limit.$b" 0
    fi
done

# The same arrays as members of an .npz (the zip is written with Python's zipfile, stored).
if python3 -c 'import zipfile, sys
for name in sys.argv[2:]:
    with zipfile.ZipFile(sys.argv[1] + "/" + name + ".npz", "w") as z:
        z.write(sys.argv[1] + "/" + name + ".npy", "x.npy")' "$T" huge over limit 2>/dev/null; then
    prog "$T/z.rly" "Tensor[(?, 0), float32]" "cumsum(%x, axis=0)"
    for f in huge over; do
        run run "$T/z.rly" --inputs "$T/$f.npz"
        expect "npz_$f" 1 "too large"
    done
    run run "$T/z.rly" --inputs "$T/limit.npz"
    expect npz_limit 0 "^Tensor\[(4611686018427387904, 0), float32\] \[\]$"
fi

# The printed empty result: its shape, then [].
prog "$T/relu.rly" "Tensor[(?, 0), float32]" "nn.relu(%x)"
run run "$T/relu.rly" --input x="$T/limit.npy"
expect npy_limit.relu_printed 0 "^Tensor\[(4611686018427387904, 0), float32\] \[\]$"
run run "$T/relu.rly" --input x="$T/limit.npy" --output "$T/o.npz"
expect npy_limit.relu_npz 0
prog "$T/sum.rly" "Tensor[(?, 0), float32]" "sum(%x, axis=[1])"
run run "$T/sum.rly" --input x="$T/limit.npy"
expect npy_limit.sum_too_large 1 "too large"

# ---- annotations past the limit: print, check, run ---------------------------------------------

for shape in "(9223372036854775807, 0)" "(4611686018427387905, 0)" "(0, 2147483648, 4294967296)"; do
    prog "$T/a.rly" "Tensor[$shape, float32]" "nn.relu(%x)"
    for cmd in print check run; do
        run "$cmd" "$T/a.rly"
        expect "annotation_$cmd.$shape" 1 "too large"
        head -n 1 "$T/err" | grep -q "^$T/a.rly:2:[0-9]*: error: "
        check "annotation_$cmd.$shape.located" $? "not located: $(head -n 1 "$T/err")"
    done
done

# A type past the limit inside a function type, a tuple and a let annotation.
printf '#[version = "0.0.5"]\ndef @main(%%f: fn (Tensor[(1, 9223372036854775807, 0), int8]) -> int8) {\n  0i8\n}\n' >"$T/b.rly"
run print "$T/b.rly"
expect annotation_fn_type 1 "too large"
printf '#[version = "0.0.5"]\ndef @main() {\n  let %%y: (Tensor[(0, 4611686018427387905), int8],) = (zeros(shape=[0, 1], dtype="int8"),);\n  %%y\n}\n' >"$T/c.rly"
run check "$T/c.rly"
expect annotation_let_tuple 1 "too large"

# The limit itself prints back unchanged and runs: (2^62, 0) and (0, 2^31, 2^31).
prog "$T/l.rly" "Tensor[(4611686018427387904, 0), float32]" "nn.relu(%x)"
run print "$T/l.rly"
expect annotation_limit_print 0 "4611686018427387904, 0"
run run "$T/l.rly" --fill zeros
expect annotation_limit_run 0 "\[\]$"
prog "$T/l2.rly" "Tensor[(0, 2147483648, 2147483648), float32]" "sum(%x, axis=[0])"
run run "$T/l2.rly" --fill zeros
expect annotation_limit_sum 1 "too large"

# A relation whose result would pass the limit (the arguments are within it).
printf '#[version = "0.0.5"]\ndef @main(%%x: Tensor[(2147483648, 1), float32], %%y: Tensor[(1, 4294967296), float32]) {\n  add(%%x, %%y)\n}\n' >"$T/r.rly"
run check "$T/r.rly"
expect relation_result_too_large 1 "too large"

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]

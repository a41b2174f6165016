#!/usr/bin/env bash
# test_help.sh - help, messages and progress of the `rly` tool, run by CTest as
#   bash tests/cli/test_help.sh PATH/TO/rly tests/cli
# Every command answers `rly CMD --help`, `rly CMD -h` and `rly help CMD` with its usage, options
# and an example on stdout (exit 0, nothing run: `rly test --help` tests nothing, `rly demo
# --help` runs no demo); unknown commands and options get the closest name as a suggestion;
# errors a flag would fix name the flag (--prelude, --input-shapes); every error's first line
# starts with its location or `rly: error:`; `rly test -q/-v` print less/more; progress bars
# show only on a terminal (or with RLY_PROGRESS=always), never in piped output.
# Closes with `N passed, N failed`; exit status 1 when anything failed.
set -u

RLY=${1:?usage: test_help.sh PATH/TO/rly TESTS_CLI_DIR}
HERE=${2:-$(cd "$(dirname "$0")" && pwd)}
DATA=$HERE/data
ND=/usr/share/libonnx-testdata/data/node
PY=$HERE/../../.venv/bin/python

T=$(mktemp -d "${TMPDIR:-/tmp}/rly_help.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset RLY_PROGRESS

n_pass=0
n_fail=0

check() {
    if [ "$2" -eq 0 ]; then
        n_pass=$((n_pass + 1))
    else
        echo "FAIL $1: $3" >&2
        if [ -s "$T/err" ]; then sed 's/^/  stderr: /' "$T/err" | head -5 >&2; fi
        n_fail=$((n_fail + 1))
    fi
}
run() {
    "$RLY" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
expect() { check "$1" $((rc != $2)) "exit status $rc, want $2"; }
has_out() { grep -q -e "$2" "$T/out"; check "$1" $? "stdout lacks '$2'"; }
has_err() { grep -q -e "$2" "$T/err"; check "$1" $? "stderr lacks '$2'"; }
lacks_err() { ! grep -q -e "$2" "$T/err"; check "$1" $? "stderr has '$2'"; }
lacks_out() { ! grep -q -e "$2" "$T/out"; check "$1" $? "stdout has '$2'"; }
# The first line of stderr starts with a location (FILE:LINE:COL: error: or FILE: error:) or
# with rly: error:.
err_located() {
    local first
    first=$(head -n 1 "$T/err")
    [[ $first == "rly: error: "* || $first =~ ^[^\ ]+(:[0-9]+:[0-9]+)?:\ error:\  ]]
    check "$1.error_line" $? "first stderr line not located nor 'rly: error:': '$first'"
}

# ---- help everywhere ---------------------------------------------------------------------------

COMMANDS="print check run compile bench grad opt equal import info test ops repl debug viz demo
          help version"
for c in $COMMANDS; do
    for h in --help -h; do
        run "$c" "$h"
        expect "help_$c$h" 0
        has_out "help_$c$h.usage" "^usage: rly $c"
        has_out "help_$c$h.example" "^example: rly"
        check "help_$c$h.no_stderr" "$(test -s "$T/err" && echo 1 || echo 0)" "stderr not empty"
    done
    cp "$T/out" "$T/help_flag"
    run help "$c"
    expect "help_cmd_$c" 0
    cmp -s "$T/out" "$T/help_flag"
    check "help_cmd_$c.same" $? "rly help $c differs from rly $c --help"
done
# --help anywhere among the arguments, even after a file or a bad option: help, nothing run
run run "$DATA/typed.rly" --fill ones --help
expect help_after_args 0
has_out help_after_args.usage "^usage: rly run"
lacks_out help_after_args.not_run "Tensor\["
run test --help
lacks_out help_test.not_run "^[0-9]* passed"
run demo --help
lacks_out help_demo.not_run "^// examples/demo.rly"
run test "$T/nothing_here" -h
expect help_test_dir 0

for h in --help -h help; do
    run $h
    expect "overview_$h" 0
    for c in $COMMANDS; do
        grep -q "^  $c " "$T/out"
        check "overview_$h.$c" $? "the overview lacks $c"
    done
done
run
expect overview_no_args 2
has_err overview_no_args.usage "^usage: rly"
run --version
expect version 0
grep -q '^rly [0-9]*\.[0-9]*\.[0-9]*$' "$T/out"
check version.text $? "unexpected version line: $(head -n 1 "$T/out")"

# options other engineers add are documented
run run --help
has_out help_run.check_numerics "--check-numerics"
has_out help_run.profile "--profile out.json"
run bench --help
has_out help_bench.profile "--profile out.json"
run import --help
has_out help_import.params "--params-as-inputs"

# ---- suggestions ---------------------------------------------------------------------------------

# suggest NAME WANT ARGS...: exit 2, one rly: error: line with "did you mean 'WANT'?"
suggest() {
    local name=$1 want=$2
    shift 2
    run "$@"
    expect "suggest_$name" 2
    has_err "suggest_$name.text" "did you mean '$want'?"
    err_located "suggest_$name"
}
suggest run_inputs --inputs run "$DATA/typed.rly" --imputs x.npz
suggest run_fill --fill run "$DATA/typed.rly" --fil ones
suggest run_check_numerics --check-numerics run "$DATA/typed.rly" --check-numeric
suggest opt_passes --passes opt "$DATA/typed.rly" --pases FoldConstant
suggest compile_stats --stats compile "$DATA/typed.rly" --stat
suggest bench_repeat --repeat bench "$DATA/typed.rly" --repaet 3
suggest grad_mode --mode grad "$DATA/typed.rly" --mdoe first
suggest import_shapes --input-shapes import x.onnx --input-shape 'x:[1]'
suggest test_exclude --exclude test --exlude x.txt dir
suggest equals_form --entry run "$DATA/typed.rly" --entyr=main
suggest command_run run runn "$DATA/typed.rly"
suggest command_compile compile compil "$DATA/typed.rly"
suggest version --version --verison
suggest help_topic check help chek

run run "$DATA/typed.rly" --zzzzzzzzzz
expect suggest_none 2
lacks_err suggest_none.no_guess "did you mean"
has_err suggest_none.points_to_help "rly run --help"
run frobnicate
expect unknown_command 2
has_err unknown_command.lists "rly --help"
run run "$DATA/typed.rly" --entry
expect needs_value 2
has_err needs_value.text "option '--entry' needs a value"
run print "$DATA/module.rly" -o
has_err needs_value_o.text "option '-o' needs a value"

# ---- errors start with a location or rly: error: -------------------------------------------------

# bad NAME WANT_RC ARGS...
bad() {
    local name=$1 want=$2
    shift 2
    run "$@"
    expect "bad_$name" "$want"
    err_located "bad_$name"
}
bad missing_file 1 run "$T/missing.rly"
bad parse_error 1 print "$DATA/truncated.rly"
bad type_error 1 check "$DATA/type_errors.rly"
bad not_onnx 1 info "$DATA/typed.rly"
bad unknown_pass 1 opt "$DATA/typed.rly" --passes Frob
bad unknown_op 1 ops conv2x
bad bad_engine 2 run "$DATA/typed.rly" --engine fast
bad bad_level 2 run "$DATA/typed.rly" -O9
bad bad_fill 2 run "$DATA/typed.rly" --fill twos
bad bad_input 2 run "$DATA/typed.rly" --input x
bad bad_threads 2 run "$DATA/typed.rly" --threads -1
bad bad_timeout 2 run "$DATA/typed.rly" --timeout 0
bad bad_repeat 2 bench "$DATA/typed.rly" --repeat 0
bad bad_mode 2 grad "$DATA/typed.rly" --mode third
bad no_file 2 check
bad two_files 2 print "$DATA/module.rly" "$DATA/expr.rly"
bad compile_no_out 2 compile "$DATA/typed.rly"
bad equal_one 2 equal "$DATA/typed.rly"
bad import_none 2 import
bad info_args 2 info a.onnx b.onnx
bad test_no_dirs 2 test -q
bad test_bad_exclude 2 test --exclude "$T/missing.txt" "$T"
bad demo_arg 2 demo extra
bad missing_input 1 run "$DATA/typed.rly"
printf 'case_without_reason\n' >"$T/ex_noreason.txt"
bad exclude_no_reason 2 test --exclude "$T/ex_noreason.txt" "$T"
printf '#[version = "0.0.5"]\ndef @main(%%x: Tensor[(?, 3), float32]) { %%x }\n' >"$T/qdim.rly"
"$RLY" compile "$T/qdim.rly" -o "$T/qdim.rlyx" >/dev/null 2>&1
bad rlyx_fill_qdim 1 run "$T/qdim.rlyx" --fill ones

# ---- hints: the flag that fixes the error --------------------------------------------------------

for c in check run compile opt; do
    run "$c" "$DATA/uses_prelude.rly" $([ $c = compile ] && echo "-o $T/p.rlyx")
    expect "hint_prelude_$c" 1
    has_err "hint_prelude_$c.names_flag" "^rly: help: .*--prelude"
    err_located "hint_prelude_$c"
done
run run "$DATA/typed.rly"
has_err hint_missing_input.text "^rly: help: give inputs with --input NAME=x.npy .*--fill"
run check "$DATA/uses_prelude.rly" --prelude
expect hint_prelude.fixed 0
run check "$DATA/type_errors.rly"
lacks_err hint_prelude.only_when_it_helps "--prelude"

run run "$T/qdim.rly" --fill ones
expect hint_fill_qdim 1
has_err hint_fill_qdim.text "^rly: help: --fill cannot choose a size for a ? dim.*--input NAME=x.npy"
err_located hint_fill_qdim
run bench "$T/qdim.rly" --fill ones --repeat 1
has_err hint_fill_qdim_bench.text "^rly: help: --fill cannot choose"
printf '#[version = "0.0.5"]\ndef @main(%%x: Tensor[(1, 2, ?, 4), float32], %%g: Tensor[(2), float32], %%b: Tensor[(2), float32]) {\n  nn.group_norm(%%x, %%g, %%b, num_groups=1)\n}\n' >"$T/gn.rly"
run grad "$T/gn.rly"
expect hint_grad_qdim 1
has_err hint_grad_qdim.text "^rly: help: write the sizes of the ? dims"
err_located hint_grad_qdim

# An ONNX model with a symbolic batch dim: --fill and grad name --input-shapes.
if [ -x "$PY" ] && "$PY" -c 'import onnx' 2>/dev/null; then
    "$PY" - "$T/dyn.onnx" <<'EOF'
import sys
from onnx import helper, TensorProto, save
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3])
y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])
g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'], name='relu0')], 'g', [x], [y])
save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), sys.argv[1])
EOF
    run run "$T/dyn.onnx" --fill ones
    expect hint_onnx_fill 1
    has_err hint_onnx_fill.text "^rly: help: --input-shapes 'NAME:\[d0,d1,...\]"
    err_located hint_onnx_fill
    run run "$T/dyn.onnx" --fill ones --input-shapes 'x:[2,3]'
    expect hint_onnx_fill.fixed 0
else
    echo "SKIP onnx hints: no python with onnx at $PY"
fi

# ---- rly test: -q, -v; progress only on a terminal -----------------------------------------------

if [ -d "$ND/test_add" ] && [ -d "$ND/test_relu" ]; then
    printf 'test_relu  skipped for this test\n' >"$T/ex.txt"
    CASES=("$ND/test_add" "$ND/test_relu" "$T/test_missing_case")
    run test --exclude "$T/ex.txt" "${CASES[@]}"
    expect test_default 1
    has_out test_default.skip "^SKIP test_relu: skipped for this test"
    has_out test_default.fail "^FAIL test_missing_case"
    lacks_out test_default.no_pass "^PASS"
    has_out test_default.summary "^1 passed, 1 failed, 1 skipped$"
    check test_default.piped_quiet "$(test -s "$T/err" && echo 1 || echo 0)" "stderr not empty when piped"
    run test -q --exclude "$T/ex.txt" "${CASES[@]}"
    expect test_quiet 1
    lacks_out test_quiet.no_skip "^SKIP"
    has_out test_quiet.fail "^FAIL test_missing_case"
    check test_quiet.two_lines "$([ "$(wc -l <"$T/out")" -eq 2 ] && echo 0 || echo 1)" "want the failure and the summary: $(cat "$T/out")"
    run test -v --exclude "$T/ex.txt" "${CASES[@]}"
    has_out test_verbose.pass "^PASS test_add ([0-9.]* s)$"
    has_out test_verbose.skip "^SKIP test_relu"
    RLY_PROGRESS=always "$RLY" test "$ND/test_add" "$ND/test_relu" >"$T/out" 2>"$T/err"
    has_err test_progress.bar "test \[#*\.*\] *[0-9]*%"
    has_out test_progress.summary "^2 passed, 0 failed, 0 skipped$"
    grep -q $'\r' "$T/out"
    check test_progress.stdout_clean $((!$?)) "the bar went to stdout"
    RLY_PROGRESS=never "$RLY" test "$ND/test_add" >"$T/out" 2>"$T/err"
    check test_progress.never "$(test -s "$T/err" && echo 1 || echo 0)" "a bar with RLY_PROGRESS=never"
    # a real terminal (script(1) gives the command a pseudo-terminal)
    if command -v script >/dev/null 2>&1; then
        script -qec "'$RLY' test '$ND/test_add' '$ND/test_relu'" /dev/null >"$T/tty" 2>&1
        grep -q 'test \[' "$T/tty"
        check test_progress.tty $? "no bar on a terminal: $(head -c 200 "$T/tty" | cat -v)"
    fi
else
    echo "SKIP rly test -q/-v: no ONNX test data in $ND"
fi

# ---- rly bench: a bar on request, none when piped; -q none at all ------------------------------

run bench "$DATA/typed.rly" --fill ones --repeat 30 --warmup 0
expect bench_piped 0
check bench_piped.no_stderr "$(test -s "$T/err" && echo 1 || echo 0)" "stderr not empty when piped"
has_out bench_piped.result "^per run: min"
RLY_PROGRESS=always "$RLY" bench "$DATA/typed.rly" --fill ones --repeat 30 --warmup 0 >"$T/out" 2>"$T/err"
has_err bench_progress.bar "bench \["
RLY_PROGRESS=always "$RLY" bench "$DATA/typed.rly" --fill ones --repeat 30 --warmup 0 -q >"$T/out" 2>"$T/err"
check bench_quiet "$(test -s "$T/err" && echo 1 || echo 0)" "a bar with -q"

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]

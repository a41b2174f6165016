#!/usr/bin/env bash
# test_cli.sh - tests of the `rly` command-line tool, run by CTest as
#   bash tests/cli/test_cli.sh PATH/TO/rly tests/cli
# Good inputs print canonical text that re-parses to itself; `-` reads standard input; `-o`
# writes the text plus a .npz side file when the module has tensor constants, and the pair
# reads back to the same files. Bad inputs (missing file, directory, empty file, binary garbage,
# NUL bytes, truncated program, unknown command, missing argument, unwritable output) exit 1
# (2 for usage errors) with a message on stderr - file:line:col for parse errors - never crash
# (exit status >= 128) and never leave an output file behind.
# Closes with `N passed, N failed`; exit status 1 when anything failed.
#
# Known bugs are listed in KNOWN below (by check name): such a check reports XFAIL instead of
# failing, and XPASS once it passes (then remove it from the list).
set -u

RLY=${1:?usage: test_cli.sh PATH/TO/rly TESTS_CLI_DIR}
HERE=${2:-$(cd "$(dirname "$0")" && pwd)}
DATA=$HERE/data
DEMO=$HERE/../../examples/demo.rly
KNOWN=" ${RLY_CLI_KNOWN-} "

T=$(mktemp -d "${TMPDIR:-/tmp}/rly_cli.XXXXXX")
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT

n_pass=0
n_fail=0
n_xfail=0

# check NAME COND_STATUS MESSAGE: record the result of one check (status 0 = holds).
check() {
    local name=$1 status=$2 msg=$3
    if [[ $KNOWN == *" $name "* ]]; then
        if [ "$status" -eq 0 ]; then
            echo "XPASS $name: known bug no longer reproduces; remove it from KNOWN" >&2
            n_fail=$((n_fail + 1))
        else
            echo "XFAIL $name: $msg (known bug)" >&2
            n_xfail=$((n_xfail + 1))
            n_pass=$((n_pass + 1))
        fi
    elif [ "$status" -eq 0 ]; then
        n_pass=$((n_pass + 1))
    else
        echo "FAIL $name: $msg" >&2
        if [ -s "$T/err" ]; then sed 's/^/  stderr: /' "$T/err" | head -5 >&2; fi
        n_fail=$((n_fail + 1))
    fi
}

# run ARGS...: run rly with stdout to $T/out and stderr to $T/err; sets $rc.
run() {
    "$RLY" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
# run_in FILE ARGS...: the same with standard input from FILE.
run_in() {
    local in=$1
    shift
    "$RLY" "$@" <"$in" >"$T/out" 2>"$T/err"
    rc=$?
}

# expect NAME WANT_RC: the last run exited with WANT_RC and did not crash.
expect() {
    local name=$1 want=$2
    if [ "$rc" -ge 128 ]; then
        check "$name" 1 "crashed (exit status $rc)"
    else
        check "$name" $((rc != want)) "exit status $rc, want $want"
    fi
}

# expect_located NAME FILE: stderr starts with FILE:LINE:COL: error:
expect_located() {
    local name=$1 file=$2
    local first
    first=$(head -n 1 "$T/err")
    [[ $first == "$file":[0-9]*:[0-9]*": error: "* ]]
    check "$name.located" $? "stderr is not '$file:line:col: error: ...': '$first'"
}

# expect_stderr NAME: some message on stderr, nothing on stdout.
expect_stderr() {
    local name=$1
    check "$name.message" $(test -s "$T/err" && echo 0 || echo 1) "no message on stderr"
    check "$name.no_stdout" $(test -s "$T/out" && echo 1 || echo 0) "unexpected output on stdout"
}

# expect_empty_dir NAME DIR: DIR holds no file (no output, no leftover temporary).
expect_empty_dir() {
    local name=$1 dir=$2
    local left
    left=$(ls -A "$dir" 2>/dev/null)
    check "$name" $([ -z "$left" ] && echo 0 || echo 1) "left files behind in $dir: $(echo $left)"
}

# ---- good inputs: print, re-parse, fixpoint ----------------------------------------------------

roundtrip() {
    local name=$1 file=$2
    run print "$file"
    expect "$name.print" 0
    check "$name.output" $(test -s "$T/out" && echo 0 || echo 1) "no output"
    cp "$T/out" "$T/p1.rly"
    run_in "$T/p1.rly" print -
    expect "$name.reparse" 0
    cmp -s "$T/out" "$T/p1.rly"
    check "$name.fixpoint" $? "printing the printed text changes it"
}

roundtrip good_module "$DATA/module.rly"
roundtrip good_expr "$DATA/expr.rly"
roundtrip good_demo "$DEMO"

run demo
expect demo 0
run version
expect version 0
grep -q '^rly [0-9]*\.[0-9]*\.[0-9]*$' "$T/out"
check version.text $? "unexpected version line: $(head -n 1 "$T/out")"
run --help
expect help 0

# standard input
printf 'add(1, 2)\n' >"$T/in.rly"
run_in "$T/in.rly" print -
expect stdin 0
grep -qx 'add(1, 2)' "$T/out"
check stdin.text $? "unexpected output: $(head -n 1 "$T/out")"
printf '(1,\n' >"$T/in.rly"
run_in "$T/in.rly" print -
expect stdin_error 1
expect_located stdin_error "<stdin>"

# ---- -o: text plus the side file of tensor constants ----------------------------------------------

mkdir "$T/o"
run print "$DATA/tensors.rly" -o "$T/o/out.rly"
expect out_tensors 0
check out_tensors.text $(test -s "$T/o/out.rly" && echo 0 || echo 1) "out.rly not written"
check out_tensors.npz $(test -s "$T/o/out.npz" && echo 0 || echo 1) "out.npz not written"
check out_tensors.zip $([ "$(head -c 4 "$T/o/out.npz" | od -An -c | tr -d ' ')" = 'PK003004' ] \
    && echo 0 || echo 1) "out.npz is not a zip archive"
grep -q 'meta\[relay.Constant\]\[1\]' "$T/o/out.rly"
check out_tensors.refs $? "out.rly does not refer to meta[relay.Constant][1]"
grep -q '#\[metadata\]' "$T/o/out.rly"
check out_tensors.no_json $((! $?)) "out.rly still carries a #[metadata] section"
check out_tensors.stdout $(test -s "$T/out" && echo 1 || echo 0) "unexpected output on stdout"
check out_tensors.only_two $([ "$(ls -A "$T/o" | tr '\n' ' ')" = "out.npz out.rly " ] && echo 0 || echo 1) \
    "unexpected files written: $(ls -A "$T/o" | tr '\n' ' ')"

# the pair reads back (the side file is found beside the text) and writes the same pair again
run print "$T/o/out.rly" -o "$T/o/again.rly"
expect out_reload 0
cmp -s "$T/o/out.rly" "$T/o/again.rly"
check out_reload.same_text $? "again.rly differs from out.rly"
cmp -s "$T/o/out.npz" "$T/o/again.npz"
check out_reload.same_npz $? "again.npz differs from out.npz"
run print "$T/o/out.rly"
expect out_reload_stdout 0
grep -q 'tensor constants are not shown' "$T/out"
check out_reload_stdout.note $? "stdout print of tensors lacks the side-file comment"

# stdin with an inline #[metadata] section, written with -o
run_in "$DATA/tensors.rly" print - -o "$T/o/stdin.rly"
expect out_from_stdin 0
cmp -s "$T/o/out.rly" "$T/o/stdin.rly" && cmp -s "$T/o/out.npz" "$T/o/stdin.npz"
check out_from_stdin.same $? "stdin.rly/.npz differ from out.rly/.npz"

# a missing side file is an error that names it
mkdir "$T/o3"
cp "$T/o/out.rly" "$T/o3/lonely.rly"
run print "$T/o3/lonely.rly"
expect side_missing 1
grep -q 'lonely.npz' "$T/err"
check side_missing.names_file $? "the message does not name lonely.npz"
# a corrupt side file is an error, not a crash
head -c 100 "$T/o/out.npz" >"$T/o3/lonely.npz"
run print "$T/o3/lonely.rly"
expect side_truncated 1
expect_stderr side_truncated
cp "$DATA/garbage.bin" "$T/o3/lonely.npz"
run print "$T/o3/lonely.rly"
expect side_garbage 1
expect_stderr side_garbage

# -o before the input file
run print -o "$T/o/first.rly" "$DATA/tensors.rly"
expect out_flag_first 0
cmp -s "$T/o/out.rly" "$T/o/first.rly" && cmp -s "$T/o/out.npz" "$T/o/first.npz"
check out_flag_first.same $? "first.rly/.npz differ from out.rly/.npz"

# no tensors: no side file
mkdir "$T/o4"
run print "$DATA/module.rly" -o "$T/o4/plain.rly"
expect out_plain 0
check out_plain.no_npz $(test -e "$T/o4/plain.npz" && echo 1 || echo 0) "plain.npz written without tensors"
run print "$T/o4/plain.rly"
expect out_plain.reparse 0

# ---- bad inputs ------------------------------------------------------------------------------------

# bad_input NAME FILE: exit 1, located message when the file exists, and -o writes nothing.
bad_input() {
    local name=$1 file=$2 located=$3
    run print "$file"
    expect "$name" 1
    expect_stderr "$name"
    if [ "$located" = yes ]; then expect_located "$name" "$file"; fi
    rm -rf "$T/b" && mkdir "$T/b"
    run print "$file" -o "$T/b/out.rly"
    expect "$name.o" 1
    expect_empty_dir "$name.o.nothing_written" "$T/b"
}

: >"$T/empty.rly"
printf '   \n\t// only a comment\n' >"$T/blank.rly"
bad_input missing_file "$T/does-not-exist.rly" no
grep -q 'does-not-exist.rly' "$T/err"
check missing_file.names_file $? "the message does not name the file"
mkdir "$T/dir.rly"
bad_input directory "$T/dir.rly" no
grep -q 'dir.rly' "$T/err"
check directory.names_file $? "the message does not name the directory"
bad_input empty_file "$T/empty.rly" yes
bad_input blank_file "$T/blank.rly" yes
bad_input garbage "$DATA/garbage.bin" yes
bad_input nul_bytes "$DATA/nul.rly" yes
grep -q ':3:10: error: ' "$T/err"
check nul_bytes.column $? "the NUL byte is not reported at 3:10: $(head -n 1 "$T/err")"
bad_input truncated "$DATA/truncated.rly" yes
printf '#[version = "0.0.5"]\ndef @main() { %%x }\n' >"$T/unbound.rly"
bad_input unbound_var "$T/unbound.rly" yes
grep -q ':2:15: error: .*%x' "$T/err"
check unbound_var.where $? "unexpected location: $(head -n 1 "$T/err")"
bad_input bad_metadata "$DATA/bad_metadata.rly" yes

# a failed run leaves an existing output file alone
printf 'old\n' >"$T/keep.rly"
run print "$DATA/truncated.rly" -o "$T/keep.rly"
expect keep_old 1
[ "$(cat "$T/keep.rly")" = old ]
check keep_old.unchanged $? "a failed run changed the existing output file"

# ---- usage errors (exit 2) -----------------------------------------------------------------------

usage() {
    local name=$1
    shift
    run "$@"
    expect "$name" 2
    expect_stderr "$name"
}
usage no_command
usage unknown_command frobnicate
usage print_no_file print
usage print_o_no_value print "$DATA/module.rly" -o
usage print_two_files print "$DATA/module.rly" "$DATA/expr.rly"
usage print_unknown_flag print --frob "$DATA/module.rly"

# ---- unwritable output: exit 1, nothing left behind ---------------------------------------------------

unwritable() {
    local name=$1 out=$2 dir=$3
    run print "$DATA/tensors.rly" -o "$out"
    expect "$name" 1
    expect_stderr "$name"
    if [ -n "$dir" ]; then expect_empty_dir "$name.nothing_written" "$dir"; fi
}
mkdir "$T/ro"
chmod 555 "$T/ro"
if touch "$T/ro/probe" 2>/dev/null; then
    rm -f "$T/ro/probe" # root ignores permissions: use directories nobody can create files in
    [ -d /proc/self ] && unwritable out_unwritable_proc /proc/out.rly ""
else
    unwritable out_unwritable_dir "$T/ro/out.rly" "$T/ro"
fi
unwritable out_missing_dir "$T/nope/out.rly" ""
touch "$T/o5"
unwritable out_not_a_dir "$T/o5/out.rly" ""
# the text cannot be written after the side file could: neither may remain
mkdir -p "$T/o6/out.rly"
unwritable out_text_is_dir "$T/o6/out.rly" ""
check no_orphan_npz_when_text_fails $(test -e "$T/o6/out.npz" && echo 1 || echo 0) \
    "out.npz was left behind when out.rly could not be written"

# ---- hostile output paths: devices written through, links followed, modes kept -----------------

run run "$DATA/typed.rly" --fill ones --output /dev/full
expect out_dev_full 1
check out_dev_full.still_device $(test -c /dev/full && echo 0 || echo 1) "/dev/full is no longer a device"
grep -q "/dev/full" "$T/err"
check out_dev_full.message $? "the error does not name /dev/full"
run run "$DATA/typed.rly" --fill ones --output /dev/null
expect out_dev_null 0
check out_dev_null.still_device $(test -c /dev/null && echo 0 || echo 1) "/dev/null is no longer a device"
mkdir -p "$T/ol"
echo keep >"$T/ol/victim"
ln -s victim "$T/ol/link.npz"
run run "$DATA/typed.rly" --fill ones --output "$T/ol/link.npz"
expect out_symlink 0
check out_symlink.still_link $(test -L "$T/ol/link.npz" && echo 0 || echo 1) "the symlink was replaced"
check out_symlink.through $(head -c 2 "$T/ol/victim" | grep -q PK && echo 0 || echo 1) "the link's target was not written"
ln -s missing "$T/ol/dangling.rly"
run print "$DATA/module.rly" -o "$T/ol/dangling.rly"
expect out_dangling_link 1
check out_dangling_link.kept $(test -L "$T/ol/dangling.rly" && ! test -e "$T/ol/missing" && echo 0 || echo 1) "the dangling link was replaced or followed"
mkfifo "$T/ol/fifo"
cat "$T/ol/fifo" >"$T/ol/fifo.out" &
reader=$!
run print "$DATA/module.rly" -o "$T/ol/fifo"
# a run that never opens the FIFO (a crash, a missing binary) must fail the check, not hang it
for _ in $(seq 100); do
    kill -0 "$reader" 2>/dev/null || break
    sleep 0.1
done
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
expect out_fifo 0
check out_fifo.still_fifo $(test -p "$T/ol/fifo" && echo 0 || echo 1) "the FIFO was replaced"
check out_fifo.through $(test -s "$T/ol/fifo.out" && echo 0 || echo 1) "nothing came through the FIFO"
echo old >"$T/ol/mode.rly"
chmod 640 "$T/ol/mode.rly"
run print "$DATA/module.rly" -o "$T/ol/mode.rly"
expect out_keeps_mode 0
check out_keeps_mode.mode $([ "$(stat -c %a "$T/ol/mode.rly")" = 640 ] && echo 0 || echo 1) "mode changed to $(stat -c %a "$T/ol/mode.rly")"
ls -A "$T/ol" | grep -q '\.tmp\.'
check out_no_temporaries $((1 - $?)) "a temporary file was left in $T/ol"

# ---- bounded runs: memory, time, depth ------------------------------------------------------------

cat >"$T/runaway.rly" <<'RLY'
#[version = "0.0.5"]
def @f(%x: Tensor[(1000), float32]) -> Tensor[(1000), float32] {
  add(@f(add(%x, 1f)), %x)
}
def @main(%x: Tensor[(1000), float32]) -> Tensor[(1000), float32] {
  @f(%x)
}
RLY
cat >"$T/forever.rly" <<'RLY'
#[version = "0.0.5"]
def @loop(%i: int64) -> int64 {
  @loop(add(%i, 1i64))
}
def @main() -> int64 { @loop(0i64) }
RLY
run run "$T/runaway.rly" --fill zeros --max-depth 500
expect limit_depth 1
expect_located limit_depth "$T/runaway.rly"
grep -q "call depth limit of 500 exceeded (--max-depth)" "$T/err" && grep -q "while running @f" "$T/err"
check limit_depth.message $? "no message naming the depth limit and @f"
run run "$T/runaway.rly" --fill zeros --max-memory 20M
expect limit_memory 1
expect_located limit_memory "$T/runaway.rly"
grep -q "memory limit of 20971520 bytes exceeded (--max-memory)" "$T/err"
check limit_memory.message $? "no message naming the memory limit"
run run "$T/forever.rly" --timeout 0.3
expect limit_timeout 1
expect_located limit_timeout "$T/forever.rly"
grep -q "time limit of 0.3 s exceeded (--timeout)" "$T/err"
check limit_timeout.message $? "no message naming the time limit"
cat >"$T/huge.rly" <<'RLY'
#[version = "0.0.5"]
def @main() -> Tensor[(100000, 100000), float32] { zeros(shape=[100000, 100000], dtype="float32") }
RLY
run run "$T/huge.rly" --max-memory 1G
expect limit_memory_tensor 1
grep -q "memory limit of 1073741824 bytes exceeded" "$T/err"
check limit_memory_tensor.message $? "a 40 GB tensor did not meet the memory limit"
# inputs count against the limit
python3 -c "
import struct, sys
h = \"{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }\"
h = h + ' ' * (118 - len(h)) + '\\n'
sys.stdout.buffer.write(b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', len(h)) + h.encode() + bytes(4000))" >"$T/x1000.npy"
run run "$T/runaway.rly" --input x="$T/x1000.npy" --max-memory 1K
expect limit_memory_inputs 1
grep -q "memory limit of 1024 bytes exceeded" "$T/err"
check limit_memory_inputs.message $? "an input larger than the limit was accepted"
run run "$T/runaway.rly" --input x="$T/x1000.npy" --max-depth 200 --max-memory none --timeout none
expect limit_none 1
grep -q "call depth limit of 200" "$T/err"
check limit_none.message $? "'none' broke another limit"
# values whose type or value shares parts (a pair of a pair of ... 40 deep: 2^40 tensors as a
# tree) are refused or cut short, never walked as trees
python3 -c "
import sys
lines = ['#[version = \"0.0.5\"]', 'def @main(%p, %x: Tensor[(2), float32]) {', '  let %a0 = (%x, %x);']
lines += ['  let %%a%d = (%%a%d, %%a%d);' % (i, i - 1, i - 1) for i in range(1, 40)]
lines += ['  if (True) { %p } else { %a39 }' if sys.argv[1] == 'param' else '  %a39', '}']
print('\n'.join(lines))" param >"$T/dag_param.rly"
sed 's/%p, //; s/  if (True) { %p } else { %a39 }/  %a39/' "$T/dag_param.rly" >"$T/dag_value.rly"
run run "$T/dag_param.rly" --fill zeros
expect dag_fill 1
grep -q "holds more than 1000000 tensors" "$T/err"
check dag_fill.message $? "a DAG-typed input was not refused"
timeout 60 "$RLY" run "$T/dag_value.rly" --fill zeros >"$T/out" 2>"$T/err"
rc=$?
expect dag_print 0
grep -q "printing stopped after 4 MB" "$T/out"
check dag_print.cut $? "printing a DAG value was not cut short"
run run "$T/dag_value.rly" --fill zeros --output "$T/dag.npz"
expect dag_output 1
grep -q "the result holds more than 1000000 tensors" "$T/err"
check dag_output.message $? "writing a DAG value was not refused"

# .npz members are decoded only when a parameter takes them: a corrupt member that --input
# overrides is never read; the same member read is an error naming the file and member
python3 -c "
import sys, zipfile
npy = open(sys.argv[1], 'rb').read()
with zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_STORED) as z:
    z.writestr('x.npy', npy)
b = bytearray(open(sys.argv[2], 'rb').read())
i = b.index(npy[-64:])
b[i + 10] ^= 0xff
open(sys.argv[2], 'wb').write(bytes(b))" "$T/x1000.npy" "$T/corrupt.npz"
run run "$T/runaway.rly" --inputs "$T/corrupt.npz" --input x="$T/x1000.npy" --max-depth 50
expect npz_unused_member 1
grep -q "call depth limit" "$T/err"
check npz_unused_member.not_decoded $? "a member that --input overrides was decoded"
run run "$T/runaway.rly" --inputs "$T/corrupt.npz" --max-depth 50
expect npz_corrupt_member 1
grep -q "corrupt.npz: member 'x': CRC-32 mismatch" "$T/err"
check npz_corrupt_member.message $? "the corrupt member is not named"
usage limit_bad_memory run "$T/forever.rly" --max-memory 12Q
usage limit_bad_depth run "$T/forever.rly" --max-depth -3
usage limit_bad_timeout run "$T/forever.rly" --timeout 0

# ---- opt and equal ---------------------------------------------------------------------------------

run opt --list
expect opt_list 0
grep -q "^InferType" "$T/out" && grep -q "default pipeline:" "$T/out"
check opt_list.content $? "the pass list lacks InferType or the default pipeline"
run opt "$DATA/typed.rly" --passes Frob
expect opt_unknown_pass 1
grep -q "unknown pass 'Frob' (passes: " "$T/err"
check opt_unknown_pass.message $? "no message listing the passes"
run opt "$DATA/typed.rly" --passes 'InferType(x=1)'
expect opt_unknown_param 1
grep -q "InferType has no parameter 'x'" "$T/err"
check opt_unknown_param.message $? "no message naming the parameter"
usage opt_bad_level opt "$DATA/typed.rly" -O5
usage opt_no_file opt
run opt "$DATA/typed.rly" -O3 --print-ir-after all --time-passes --verify -o "$T/opt.rly"
expect opt_write 0
grep -q "^total" "$T/err" && grep -q "InferType (pipeline start)" "$T/err"
check opt_write.times $? "--time-passes printed no table"
run opt "$T/opt.rly" -O0 --passes InferType -o "$T/opt2.rly"
expect opt_reparse 0
run equal "$T/opt.rly" "$T/opt2.rly"
expect equal_after_opt 0
cat >"$T/other.rly" <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  %0 = add(%x, %y);
  (%0, less(%0, %x))
}
RLY
run equal "$DATA/typed.rly" "$T/other.rly"
expect equal_differ 1
grep -q "the modules differ: a call of equal in the first, of less in the second" "$T/err" &&
    grep -q "other.rly:4:" "$T/err" && grep -q "typed.rly:" "$T/err"
check equal_differ.located $? "the difference is not located in both files"
usage equal_one_file equal "$DATA/typed.rly"
run run "$DATA/typed.rly" --fill random --seed 3
cp "$T/out" "$T/o0.txt"
run run "$DATA/typed.rly" --fill random --seed 3 -O3
expect run_O3 0
cmp -s "$T/out" "$T/o0.txt"
check run_O3.same $? "-O3 changed the result"
usage run_bad_level run "$DATA/typed.rly" -O9

# ---- check: types ---------------------------------------------------------------------------------

run check "$DATA/typed.rly"
expect check_good 0
grep -q 'ty=(Tensor\[(2, 3), float32\], Tensor\[(2, 3), bool\])' "$T/out"
check check_good.types $? "typed output lacks the result type"
cp "$T/out" "$T/typed1.rly"
run check "$T/typed1.rly"
expect check_good.recheck 0
cmp -s "$T/out" "$T/typed1.rly"
check check_good.fixpoint $? "checking the checked text changes it"
run check "$DATA/type_errors.rly"
expect check_errors 1
expect_located check_errors "$DATA/type_errors.rly"
expect_stderr check_errors
check check_errors.all $([ "$(grep -c ': error: ' "$T/err")" -eq 2 ] && echo 0 || echo 1) \
    "want both errors reported: $(grep -c ': error: ' "$T/err")"
run check "$DATA/uses_prelude.rly"
expect check_no_prelude 1
expect_located check_no_prelude "$DATA/uses_prelude.rly"
run check --prelude "$DATA/uses_prelude.rly"
expect check_prelude 0
grep -q 'def @main(%xs: List\[int32\]) -> int32' "$T/out"
check check_prelude.main $? "the checked program is not printed"
run check
expect check_missing_file 2
run check "$T/does_not_exist.rly"
expect check_nonexistent 1
expect_stderr check_nonexistent
run check "$DATA/garbage.bin"
expect check_garbage 1
run ops
expect ops_list 0
grep -q '^nn.conv2d(data, weight)' "$T/out"
check ops_list.conv2d $? "rly ops does not list nn.conv2d"
run ops nn.conv2dd
expect ops_unknown 1
grep -q 'did you mean nn.conv2d' "$T/err"
check ops_unknown.suggest $? "no suggestion for a misspelt operator"

# ---- run: the interpreter -----------------------------------------------------------------------
cat >"$T/add.rly" <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  add(%x, %y)
}
RLY
run run "$T/add.rly" --fill ones
expect run_fill 0
grep -q 'Tensor\[(2, 3), float32\] \[\[2, 2, 2\],' "$T/out"
check run_fill.printed $? "rly run --fill ones does not print the sum: $(head -2 "$T/out")"
# a bare expression with a free_var: a located error on both engines, not an internal one
printf '#[version = "0.0.5"]\nfree_var %%x: Tensor[(2), float32];\nadd(%%x, %%x)\n' >"$T/free.rly"
for eng in interp vm; do
  run run "$T/free.rly" --fill ones --engine $eng
  expect run_free_var_$eng 1
  expect_located run_free_var_$eng "$T/free.rly"
  grep -q 'free variable %x' "$T/err"
  check run_free_var_$eng.says $? "no 'free variable %x' in the message"
  grep -q 'internal error' "$T/err"
  check run_free_var_$eng.not_internal $((1 - $?)) "an internal error"
done
run run "$T/add.rly"
expect run_missing_input 1
grep -q 'missing input x; @main expects x: Tensor\[(2, 3), float32\], y: Tensor\[(3), float32\]' "$T/err"
check run_missing_input.lists $? "the error does not list the expected inputs"
# a .npy of the wrong dtype or shape, an unknown input name, an unreadable file
hdr="{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n' "$hdr" $((117 - ${#hdr})) ''; printf '\x01\x00\x00\x00%.0s' 1 2 3; } >"$T/y.npy"
run run "$T/add.rly" --fill ones --input y="$T/y.npy"
expect run_bad_npy 1
expect_stderr run_bad_npy
run run "$T/add.rly" --fill ones --input z="$T/y.npy"
expect run_unknown_input 1
grep -q "input 'z' is not a parameter of @main" "$T/err"
check run_unknown_input.message $? "no message naming the unknown input"
run run "$T/add.rly" --inputs "$DATA/garbage.bin"
expect run_garbage_npz 1
expect_stderr run_garbage_npz
run run "$T/add.rly" --fill sideways
expect run_bad_fill 2
run run "$T/add.rly" --input y
expect run_bad_input_arg 2
run run "$T/add.rly" --entry nope --fill ones
expect run_no_entry 1
grep -q 'no function @nope to run; the module defines @main' "$T/err"
check run_no_entry.message $? "no message naming the missing entry"
run run
expect run_missing_file 2
run run "$T/does_not_exist.rly"
expect run_nonexistent 1
# a runtime error is located and writes no output file
cat >"$T/div.rly" <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(4), int32]) {
  floor_divide(%x, 0)
}
RLY
mkdir -p "$T/outdir"
run run "$T/div.rly" --fill ones --output "$T/outdir/out.npz"
expect run_div_zero 1
expect_located run_div_zero "$T/div.rly"
expect_empty_dir run_div_zero.no_output "$T/outdir"
# --output writes output_0 (checked by the Python tests for content)
run run "$T/add.rly" --fill random --output "$T/outdir/out.npz"
expect run_output 0
check run_output.file $(test -s "$T/outdir/out.npz" && echo 0 || echo 1) "no output file"

# ---- ONNX: import / info / test / run on bad input ------------------------------------------
ND=/usr/share/libonnx-testdata/data/node
if [ -d "$ND/test_add" ]; then
  run info "$T/missing.onnx"
  expect onnx_info_missing 1
  expect_stderr onnx_info_missing
  printf 'not a protobuf at all' >"$T/junk.onnx"
  run import "$T/junk.onnx"
  expect onnx_import_junk 1
  expect_stderr onnx_import_junk
  head -c 40 "$ND/test_add/model.onnx" >"$T/trunc.onnx"
  run run "$T/trunc.onnx" --fill ones
  expect onnx_run_truncated 1
  expect_stderr onnx_run_truncated
  # every unsupported operator of a model is listed at once, located at its node
  UNS=$HERE/../fuzz/corpus/onnx/seed_unsupported_custom_ops.onnx
  run import "$UNS"
  expect onnx_unsupported 1
  expect_located onnx_unsupported "$UNS"
  check onnx_unsupported.all $(grep -q '2 unsupported operators: com.example.Foo-1, com.example.Bar-1' "$T/err" && echo 0 || echo 1) "not every unsupported operator is listed"
  run info "$ND/test_add/model.onnx"
  expect onnx_info 0
  check onnx_info.ops $(grep -q '1  Add' "$T/out" && echo 0 || echo 1) "no operator histogram"
  run import "$ND/test_add/model.onnx" -o "$T/add_onnx.rly"
  expect onnx_import_o 0
  run check "$T/add_onnx.rly"
  expect onnx_import_reparse 0
  run run "$ND/test_add/model.onnx" --input-shapes 'nope:[3,4,5]' --fill ones
  expect onnx_bad_input_shapes 1
  check onnx_bad_input_shapes.names $(grep -q "not a graph input" "$T/err" && echo 0 || echo 1) "no message naming the inputs"
  run run "$ND/test_add/model.onnx" --input-shapes 'x:[3,4' --fill ones
  expect onnx_input_shapes_syntax 1
  run test
  expect onnx_test_nodirs 2
  run test --exclude "$T/missing.txt" "$ND/test_add"
  expect onnx_test_bad_exclude 2
  printf 'test_add\n' >"$T/noreason.txt"
  run test --exclude "$T/noreason.txt" "$ND/test_add"
  expect onnx_test_exclude_needs_reason 2
  run test "$T"
  expect onnx_test_not_a_case 1
  check onnx_test_not_a_case.line $(grep -q '^FAIL ' "$T/out" && echo 0 || echo 1) "no FAIL line"
  run test "$ND/test_add" "$ND/test_relu"
  expect onnx_test_pass 0
  check onnx_test_pass.summary $(grep -q '^2 passed, 0 failed, 0 skipped' "$T/out" && echo 0 || echo 1) "no summary line"
fi

# ---- rly grad (reverse-mode AD) ----
EX=$HERE/../../examples
AD=$HERE/../autodiff
for mode in higher first; do
  run grad "$AD/basic.rly" --mode $mode -o "$T/grad_$mode.rly"
  expect grad_$mode 0
  run run "$T/grad_$mode.rly" --fill ones --output "$T/grad_$mode.npz"
  expect grad_${mode}_run 0
  check grad_${mode}_outputs $(python3 -c "
import sys, zipfile
n = zipfile.ZipFile(sys.argv[1]).namelist()
sys.exit(0 if sorted(n) == ['output_0.npy', 'output_1.npy', 'output_2.npy'] else 1)" "$T/grad_$mode.npz" 2>/dev/null && echo 0 || echo 1) "want output_0 (value), output_1, output_2 (gradients)"
done
run grad "$AD/closure.rly" --mode first
expect grad_first_rejects 1
expect_located grad_first_rejects "$AD/closure.rly"
run grad "$AD/basic.rly" --mode sideways
expect grad_bad_mode 2
run grad "$AD/basic.rly" --entry nosuch
expect grad_bad_entry 1
check grad_bad_entry.message $(grep -q "no function @nosuch" "$T/err" && echo 0 || echo 1) "no message naming the entry"
run grad "$T/missing.rly"
expect grad_missing_file 1
printf '#[version = "0.0.5"]\ndef @main(%%x: Tensor[(1, 1, 3, 3), float32]) {\n  nn.adaptive_max_pool2d(%%x, output_size=[2, 2])\n}\n' >"$T/nograd.rly"
run grad "$T/nograd.rly"
expect grad_no_gradient 1
expect_located grad_no_gradient "$T/nograd.rly"
check grad_no_gradient.summary $(grep -q "no gradient for 1 operator: nn.adaptive_max_pool2d" "$T/err" && echo 0 || echo 1) "no summary naming nn.adaptive_max_pool2d"
run grad "$T/nograd.rly" -o "$T/gout/x.rly"
expect grad_no_gradient_no_output 1
check grad_no_gradient_no_output.file $(test -e "$T/gout/x.rly" && echo 1 || echo 0) "output written despite the error"
run grad
expect grad_no_file 2
bash "$EX/train_mlp.sh" "$RLY" first >"$T/out" 2>"$T/err"
rc=$?
expect train_mlp 0
check train_mlp.loss $(python3 -c "
import re, sys
v = [float(x) for x in re.findall(r'([0-9.eE+-]+)f', open(sys.argv[1]).read())]
sys.exit(0 if len(v) == 2 and v[1] < 0.01 < v[0] else 1)" "$T/out" && echo 0 || echo 1) "loss did not fall below 0.01: $(cat "$T/out")"

# ---- the VM: rly compile, rly run on .rlyx and --engine, rly bench, rly test --engine --------
# npz_names FILE: the array names of an .npz, space-separated, in order.
npz_names() {
    python3 -c "import sys, zipfile; print(' '.join(n[:-4] for n in zipfile.ZipFile(sys.argv[1]).namelist()))" "$1" 2>/dev/null
}
cat >"$T/vm.rly" <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  (nn.relu(add(%x, %y)), sum(%x, axis=[1]))
}
RLY
run compile "$T/vm.rly" -o "$T/vm.rlyx"
expect compile 0
check compile.file $(test -s "$T/vm.rlyx" && echo 0 || echo 1) "no executable written"
run compile "$T/vm.rly" -O0 -o "$T/vm0.rlyx" --stats
expect compile_stats 0
check compile_stats.counts $(grep -q '^functions: [1-9]' "$T/out" && grep -q '^instructions: [1-9]' "$T/out" && grep -q '^packed functions: [1-9]' "$T/out" && grep -q '^constants: [0-9]* ([0-9]* bytes)' "$T/out" && echo 0 || echo 1) "stats lack functions/instructions/packed/constants: $(head -c 300 "$T/out")"
check compile_stats.planning $(grep -qE '^peak activation bytes \(entry arena\): ' "$T/out" && grep -qE '^memory plans: [0-9]+ of [0-9]+ functions' "$T/out" && echo 0 || echo 1) "stats say nothing about memory planning"
run compile "$T/vm.rlyx" --stats
expect compile_stats_rlyx 0
run compile "$T/vm.rly" --disasm
expect compile_disasm 0
check compile_disasm.main $(grep -q 'main' "$T/out" && echo 0 || echo 1) "no @main in the disassembly"
run compile "$T/vm.rly"
expect compile_no_output 2
run compile
expect compile_no_file 2
run compile "$T/vm.rly" -O7 -o "$T/o7.rlyx"
expect compile_bad_opt 2
run compile "$T/vm.rly" --frobnicate -o "$T/f.rlyx"
expect compile_bad_arg 2
mkdir -p "$T/cout"
run compile "$T/does_not_exist.rly" -o "$T/cout/m.rlyx"
expect compile_missing 1
expect_empty_dir compile_missing.no_output "$T/cout"
printf '#[version = "0.0.5"]\ndef @main(%%x: Tensor[(2, 3), float32]) -> Tensor[(3), float32] {\n  nn.relu(%%x)\n}\n' >"$T/vm_bad.rly"
run compile "$T/vm_bad.rly" -o "$T/cout/bad.rlyx"
expect compile_error 1
expect_located compile_error "$T/vm_bad.rly"
expect_empty_dir compile_error.no_output "$T/cout"
run compile "$T/vm.rly" -o "$T/no_such_dir/vm.rlyx"
expect compile_unwritable 1
# The executable, the VM and the interpreter agree (the same npz, byte for byte; the same text).
run run "$T/vm.rly" --fill random --seed 3 --engine interp --output "$T/vm_i.npz"
expect run_engine_interp 0
run run "$T/vm.rly" --fill random --seed 3 --engine vm --output "$T/vm_v.npz"
expect run_engine_vm 0
run run "$T/vm.rlyx" --fill random --seed 3 --output "$T/vm_x.npz"
expect run_rlyx 0
check run_engine_vm.same $(cmp -s "$T/vm_i.npz" "$T/vm_v.npz" && echo 0 || echo 1) "--engine vm and --engine interp wrote different files"
check run_rlyx.same $(cmp -s "$T/vm_i.npz" "$T/vm_x.npz" && echo 0 || echo 1) "the .rlyx and the interpreter wrote different files"
check run_rlyx.names $(test "$(npz_names "$T/vm_x.npz")" = "output_0 output_1" && echo 0 || echo 1) "arrays $(npz_names "$T/vm_x.npz"), want output_0 output_1"
"$RLY" run "$T/vm.rly" --fill ones --engine interp >"$T/text_i" 2>/dev/null
run run "$T/vm.rlyx" --fill ones
expect run_rlyx_text 0
check run_rlyx_text.same $(cmp -s "$T/text_i" "$T/out" && echo 0 || echo 1) "printed results differ: $(head -c 200 "$T/out") vs $(head -c 200 "$T/text_i")"
run run "$T/vm.rlyx" --entry main --fill ones
expect run_rlyx_entry 2
run run "$T/vm.rlyx" --engine interp --fill ones
expect run_rlyx_interp 2
run run "$T/vm.rly" --engine jit --fill ones
expect run_bad_engine 2
run run "$T/vm.rlyx" --input nope="$T/x.npy" --fill ones
expect run_rlyx_unknown_input 1
check run_rlyx_unknown_input.message $(grep -q "not a parameter" "$T/err" && echo 0 || echo 1) "no message naming the parameters"
run run "$T/vm.rlyx"
expect run_rlyx_missing_input 1
check run_rlyx_missing_input.message $(grep -q "missing input x" "$T/err" && echo 0 || echo 1) "no message naming the missing input"
printf 'RLYX not really an executable' >"$T/junk.rlyx"
run run "$T/junk.rlyx" --fill ones
expect run_rlyx_junk 1
expect_stderr run_rlyx_junk
head -c 100 "$T/vm.rlyx" >"$T/trunc.rlyx"
run run "$T/trunc.rlyx" --fill ones
expect run_rlyx_truncated 1
expect_stderr run_rlyx_truncated
run run "$T/missing.rlyx" --fill ones
expect run_rlyx_missing 1
# A run-time error on the VM is located like the interpreter's and writes no output file.
mkdir -p "$T/vmout"
run run "$T/div.rly" --fill ones --engine vm --output "$T/vmout/out.npz"
expect run_vm_div_zero 1
expect_located run_vm_div_zero "$T/div.rly"
expect_empty_dir run_vm_div_zero.no_output "$T/vmout"
# rly bench
run bench "$T/vm.rlyx" --fill random --repeat 5
expect bench_rlyx 0
check bench_rlyx.report $(grep -q '^per run: min .*, median .*, p90 ' "$T/out" && grep -q '^runs: 5 timed' "$T/out" && grep -q 'load ' "$T/out" && echo 0 || echo 1) "no load time or min/median/p90 line: $(head -c 300 "$T/out")"
run bench "$T/vm.rly" --fill ones --repeat 3 --warmup 0 -O0
expect bench_source 0
check bench_source.compile $(grep -q 'compile (-O0)' "$T/out" && echo 0 || echo 1) "no compile time"
run bench "$T/vm.rlyx" --fill ones --min-time 0.05 --threads 2
expect bench_min_time 0
run bench "$T/vm.rlyx" --fill ones --repeat 3 --min-time 1
expect bench_repeat_and_min_time 2
run bench "$T/vm.rlyx" --fill ones --repeat 0
expect bench_bad_repeat 2
run bench "$T/vm.rlyx" --fill ones --threads lots
expect bench_bad_threads 2
# The LSTM cell kernel (kernels/fast/rnn.c) gives the same bits on 1 and 2 threads: each unit's
# gate sums are the packed GEMV's or rowdot's whatever the split.
LSTM=$HERE/../vm/fused_rnn.rly
run run "$LSTM" --fill random --seed 5 --threads 1 --output "$T/lstm1.npz"
expect lstm_threads_1 0
run run "$LSTM" --fill random --seed 5 --threads 2 --output "$T/lstm2.npz"
expect lstm_threads_2 0
cmp -s "$T/lstm1.npz" "$T/lstm2.npz"
check lstm_threads.same $? "the LSTM cells differ between 1 and 2 threads"
# ConvertLayout's auto mode at -O3 (docs/passes.md): on an AVX-512 machine a function with
# depthwise layers goes to NCHW16c, unless a grouped layer's channels per group are not whole
# blocks of 16 (the blocked kernels do not take it); elsewhere, and at RLY_ISA=avx2, nothing moves.
cat >"$T/dw_groups.rly" <<'EOF2'
#[version = "0.0.5"]
def @main(%x: Tensor[(1, 32, 10, 10), float32], %w: Tensor[(32, 1, 3, 3), float32],
          %g: Tensor[(32, GIN, 3, 3), float32]) {
  nn.conv2d(nn.conv2d(%x, %w, padding=[1, 1, 1, 1], groups=32), %g, padding=[1, 1, 1, 1],
            groups=GROUPS)
}
EOF2
sed 's/GIN/16/; s/GROUPS/2/' "$T/dw_groups.rly" >"$T/dw_g2.rly"
sed 's/GIN/8/; s/GROUPS/4/' "$T/dw_groups.rly" >"$T/dw_g4.rly"
if grep -qw avx512f /proc/cpuinfo; then want_blocked=0; else want_blocked=1; fi
run opt "$T/dw_g2.rly"
expect auto_layout_blocks 0
n_blocked=$(grep -c 'data_layout="NCHW16c"' "$T/out")
check auto_layout_blocks.nchw16c $((want_blocked == 0 ? (n_blocked > 0 ? 0 : 1) : (n_blocked == 0 ? 0 : 1))) "$n_blocked NCHW16c convolutions (want some on AVX-512 machines only)"
run opt "$T/dw_g4.rly"
expect auto_layout_odd_groups 0
check auto_layout_odd_groups.nchw $(grep -q 'NCHW16c' "$T/out" && echo 1 || echo 0) "a grouped layer of 8 channels per group moved to NCHW16c"
RLY_ISA=avx2 "$RLY" opt "$T/dw_g2.rly" >"$T/out" 2>"$T/err"
check auto_layout_avx2.nchw $(grep -q 'NCHW16c' "$T/out" && echo 1 || echo 0) "NCHW16c at RLY_ISA=avx2"
run bench
expect bench_no_file 2
run bench "$T/vm.rlyx" --repeat 2
expect bench_missing_input 1
# ONNX output names: --output names the arrays after the graph's outputs, on both engines and
# from an executable.
if [ -d "$ND/test_add" ]; then
  for eng in interp vm; do
    run run "$ND/test_add/model.onnx" --fill ones --engine $eng --output "$T/onnx_$eng.npz"
    expect onnx_names_$eng 0
    check onnx_names_$eng.names $(test "$(npz_names "$T/onnx_$eng.npz")" = "sum" && echo 0 || echo 1) "arrays '$(npz_names "$T/onnx_$eng.npz")', want 'sum'"
  done
  run compile "$ND/test_add/model.onnx" -o "$T/add.rlyx"
  expect onnx_compile 0
  run run "$T/add.rlyx" --fill ones --output "$T/onnx_x.npz"
  expect onnx_names_rlyx 0
  check onnx_names_rlyx.names $(test "$(npz_names "$T/onnx_x.npz")" = "sum" && echo 0 || echo 1) "arrays '$(npz_names "$T/onnx_x.npz")', want 'sum'"
  check onnx_names_rlyx.same $(cmp -s "$T/onnx_interp.npz" "$T/onnx_x.npz" && echo 0 || echo 1) "the executable's output differs from the interpreter's"
  run test --engine vm "$ND/test_add" "$ND/test_relu"
  expect onnx_test_vm 0
  check onnx_test_vm.summary $(grep -q '^2 passed, 0 failed, 0 skipped' "$T/out" && echo 0 || echo 1) "no summary line: $(tail -c 300 "$T/out")"
  run test --engine fast "$ND/test_add"
  expect onnx_test_bad_engine 2
fi

if [ "$n_xfail" -gt 0 ]; then echo "($n_xfail known failures counted as passed)"; fi
echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]

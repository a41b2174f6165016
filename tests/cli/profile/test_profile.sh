#!/usr/bin/env bash
# test_profile.sh - `rly run --profile` and `rly bench --profile` (docs/tools.md "Profiles"), run
# by CTest as  bash tests/cli/profile/test_profile.sh PATH/TO/rly REPO_ROOT
# The traces load as JSON with the fields Perfetto and chrome://tracing need (check_trace.py),
# on both engines, from a source and from an .rlyx; the table of top operators goes to stderr
# and nothing extra to stdout; an unwritable path is an error that leaves no file; without
# --profile nothing is written. Closes with `N passed, N failed`.
set -u
RLY=${1:?usage: test_profile.sh PATH/TO/rly REPO_ROOT}
ROOT=${2:?}
CHECK="python3 $ROOT/tests/cli/profile/check_trace.py"
DEMO=$ROOT/examples/demo.rly
FUSED=$ROOT/tests/cli/numerics/div_fused.rly
T=$(mktemp -d "${TMPDIR:-/tmp}/rly_profile.XXXXXX")
trap 'rm -rf "$T"' EXIT
n_pass=0
n_fail=0
ok() { n_pass=$((n_pass + 1)); }
bad() { n_fail=$((n_fail + 1)); echo "FAIL $1" >&2; [ -f "$T/err" ] && sed 's/^/    /' "$T/err" | head -10 >&2; }

# run: the VM (fused groups) and the interpreter (operators)
"$RLY" run "$DEMO" --fill random --profile "$T/vm.json" >"$T/out" 2>"$T/err" &&
    $CHECK "$T/vm.json" --min-events 8 --cat "fused group" \
        --names fused_nn_conv2d_expand_dims_add_nn_relu,fused_nn_dense_add >"$T/chk" 2>&1 &&
    grep -q "fused_nn_conv2d_expand_dims_add_nn_relu \[fused group\]" "$T/err" &&
    grep -q "total ms" "$T/err" && ! grep -q "total ms" "$T/out" && ok || { cat "$T/chk" >&2; bad run_vm; }
"$RLY" run "$DEMO" --fill random --engine interp --profile "$T/in.json" >"$T/out" 2>"$T/err" &&
    $CHECK "$T/in.json" --min-events 10 --cat operator --names nn.conv2d,nn.relu,nn.dense >"$T/chk" 2>&1 &&
    grep -q "nn.conv2d \[operator\]" "$T/err" && ok || { cat "$T/chk" >&2; bad run_interp; }
# the interpreter at -O3 and the VM at -O0 (one operator per packed function)
"$RLY" run "$FUSED" --fill ones --engine vm -O0 --profile "$T/o0.json" >/dev/null 2>"$T/err" &&
    $CHECK "$T/o0.json" --min-events 5 --cat operator >"$T/chk" 2>&1 && ok || { cat "$T/chk" >&2; bad run_vm_O0; }
# shapes and locations in args
grep -q '"loc": "[^"]*demo.rly:[0-9]*:[0-9]*"' "$T/vm.json" && grep -q '"inputs": "float32\[1, 3, 32, 32\]' "$T/vm.json" &&
    ok || bad args_shapes
# a compiled executable
"$RLY" compile "$DEMO" -o "$T/demo.rlyx" 2>"$T/err" &&
    "$RLY" run "$T/demo.rlyx" --fill random --profile "$T/x.json" >/dev/null 2>"$T/err" &&
    $CHECK "$T/x.json" --min-events 8 >"$T/chk" 2>&1 && ok || { cat "$T/chk" >&2; bad run_rlyx; }
# bench: the timed runs only (5 runs of 9 packed calls: the warmup is not recorded)
"$RLY" bench "$DEMO" --fill random --repeat 5 --warmup 2 --profile "$T/b.json" >"$T/out" 2>"$T/err" &&
    $CHECK "$T/b.json" --min-events 45 >"$T/chk" 2>&1 && grep -q "total ms" "$T/err" &&
    grep -q "per run" "$T/out" && ok || { cat "$T/chk" >&2; bad bench; }
# the calling thread's events (the pool workers' own tracks, tid 100000 + w, come on top when
# they took part: that depends on the scheduler)
n=$(grep '"ph": "X"' "$T/b.json" 2>/dev/null | grep -vc '"tid": 1[0-9][0-9][0-9][0-9][0-9]')
[ "$n" -eq 45 ] && ok || bad "bench_event_count ($n, want 45: 5 runs x 9 packed calls)"
"$RLY" bench "$DEMO" --fill random --repeat 3 --threads 2 --profile "$T/b2.json" >/dev/null 2>"$T/err" &&
    $CHECK "$T/b2.json" --min-events 27 >"$T/chk" 2>&1 && ok || { cat "$T/chk" >&2; bad bench_threads; }
# LSTM and GRU steps as the VM ran them (FuseRNNCell's cells and runs of steps, vm_cell.c): the
# categories name the kernels; tests/vm/fused_rnn_runs.rly says which steps form which
"$RLY" run "$ROOT/tests/vm/fused_rnn_runs.rly" --fill random -O3 --profile "$T/rnn.json" \
    >/dev/null 2>"$T/err" &&
    python3 -c '
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
n = collections.Counter(e["cat"] for e in ev if e.get("ph") == "X" and e["tid"] == 1)
want = {"LSTM run": 4, "LSTM cell": 4, "GRU run": 2}
got = {k: n.get(k, 0) for k in want}
sys.exit(0 if got == want else "rnn categories %s, want %s" % (got, want))
' "$T/rnn.json" 2>>"$T/err" && ok || bad rnn_cells_runs
# errors: an unwritable path leaves nothing; a missing argument is a usage error
"$RLY" run "$DEMO" --fill random --profile "$T/no/such/dir/p.json" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "p.json" "$T/err" && [ ! -e "$T/no" ] && ok || bad "unwritable ($rc)"
"$RLY" bench "$DEMO" --fill random --repeat 2 --profile "$T/no/b.json" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && [ ! -e "$T/no" ] && ok || bad bench_unwritable
"$RLY" run "$DEMO" --fill random --profile >/dev/null 2>"$T/err"
[ $? -eq 2 ] && ok || bad missing_path
# without --profile: nothing on stderr
"$RLY" run "$DEMO" --fill random >/dev/null 2>"$T/err" && [ ! -s "$T/err" ] && ok || bad no_flag_quiet

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]

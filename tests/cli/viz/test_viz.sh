#!/usr/bin/env bash
# test_viz.sh - `rly viz` (docs/tools.md "Graphs"), run by CTest as
#   bash tests/cli/viz/test_viz.sh PATH/TO/rly REPO_ROOT [PYTHON]
# DOT is checked structurally always (check_graph.py: clusters, declared nodes, edges) and drawn
# by Graphviz's dot when it is installed; the HTML page parses with balanced tags, holds its
# nodes and no external reference, and opens in a headless Chromium when one is installed; a
# 10^5-node program draws in seconds; bad inputs exit 1 (2 for usage) with a message and leave
# no file. PYTHON (with onnx) makes an ONNX model to draw. Closes with `N passed, N failed`.
set -u
RLY=${1:?usage: test_viz.sh PATH/TO/rly REPO_ROOT [PYTHON]}
ROOT=${2:?}
PY=${3:-python3}
CHECK="python3 $ROOT/tests/cli/viz/check_graph.py"
T=$(mktemp -d "${TMPDIR:-/tmp}/rly_viz.XXXXXX")
trap 'rm -rf "$T"' EXIT
n_pass=0
n_fail=0
ok() { n_pass=$((n_pass + 1)); }
bad() { n_fail=$((n_fail + 1)); echo "FAIL $1" >&2; for f in "$T/err" "$T/chk"; do [ -s "$f" ] && sed 's/^/    /' "$f" | head -8 >&2; done; rm -f "$T/chk"; }
HAVE_DOT=0; command -v dot >/dev/null 2>&1 && HAVE_DOT=1
BROWSER=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)

# draw NAME ARGS -- CHECK_OPTS: DOT on stdout and HTML from the same program, both checked.
draw() {
    local name=$1; shift
    local args=()
    while [ "$1" != "--" ]; do args+=("$1"); shift; done
    shift
    if "$RLY" viz "${args[@]}" >"$T/$name.dot" 2>"$T/err" && $CHECK dot "$T/$name.dot" "$@" >"$T/chk" 2>&1; then ok; else bad "dot_$name"; fi
    if [ $HAVE_DOT -eq 1 ]; then
        if dot -Tsvg "$T/$name.dot" -o "$T/$name.gv.svg" 2>"$T/err" && grep -q "<svg" "$T/$name.gv.svg"; then ok; else bad "graphviz_$name"; fi
    fi
    if "$RLY" viz "${args[@]}" -o "$T/$name.html" 2>"$T/err" && $CHECK html "$T/$name.html" "$@" >"$T/chk" 2>&1; then ok; else bad "html_$name"; fi
    if [ -n "$BROWSER" ]; then
        if timeout 60 "$BROWSER" --headless --disable-gpu --no-sandbox --dump-dom "file://$T/$name.html" >"$T/dom" 2>/dev/null &&
            grep -q '<svg id="graph"' "$T/dom"; then ok; else bad "browser_$name"; fi
    fi
}

N=$ROOT/tests/cli/numerics
HERE_VIZ=$ROOT/tests/cli/viz
draw demo "$ROOT/examples/demo.rly" -- --nodes 40 --clusters 5 \
    --labels "nn.conv2d,@map,match,call @map,Cons,float32[1, 3, 32, 32]"
draw demo_O3 "$ROOT/examples/demo.rly" -O3 -- --nodes 30 --clusters 6 \
    --labels "fused_nn_conv2d_expand_dims_add_nn_relu,nn.conv2d,nn.relu"
draw recursive "$N/recursive.rly" -- --nodes 15 --clusters 2 --labels "call @walk,if,cond: bool[],then: float32[3],else: float32[3]"
draw fused "$N/div_fused.rly" -O3 -- --clusters 2 --labels "fused_subtract_subtract_divide_add_exp,divide,float32[4, 4]"
draw vm_corpus "$ROOT/tests/vm/closures.rly" -- --nodes 5
draw loop "$HERE_VIZ/loop.rly" -O3 -- --clusters 4 --labels "fn value,fused_multiply_add_nn_relu,callee: fn"
# the fused group is a cluster inside @main's, holding the operators
sed -n '/subgraph cluster_1 {/,/}/p' "$T/fused.dot" | grep -q 'label="divide"' && ok || bad fused_cluster_holds_ops
# calls of globals are dashed edges to the callee's entry node
grep -q 'style=dashed' "$T/recursive.dot" && ok || bad call_edges

# SVG through dot, written whole
if [ $HAVE_DOT -eq 1 ]; then
    "$RLY" viz "$N/div_fused.rly" -O3 -o "$T/f.svg" 2>"$T/err" && grep -q "fused_subtract" "$T/f.svg" && ok || bad svg_out
else
    "$RLY" viz "$N/div_fused.rly" -o "$T/f.svg" 2>"$T/err"
    [ $? -eq 1 ] && grep -q "graphviz" "$T/err" && [ ! -e "$T/f.svg" ] && ok || bad svg_without_dot
fi
"$RLY" viz "$N/div_fused.rly" -o "$T/f.dot" 2>"$T/err" && cmp -s "$T/f.dot" <("$RLY" viz "$N/div_fused.rly") && ok || bad dot_file

# an ONNX model: node names and shapes
if "$PY" -c 'import onnx' 2>/dev/null; then
    "$PY" "$N/log_model.py" "$T/m.onnx"
    draw onnx "$T/m.onnx" -O3 -- --clusters 2 --labels "fused_subtract_log_nn_relu,log,float32[2, 2]"
fi

# 10^5 operators in a chain: iterative and linear (a few seconds even under ASan)
python3 - "$T/big.rly" <<'PYEOF'
import sys
n = 100000
with open(sys.argv[1], 'w') as f:
    f.write('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {\n')
    f.write('  %0 = add(%x, 1f);\n')
    for i in range(1, n):
        f.write('  %%%d = %s(%%%d, 1f);\n' % (i, 'add' if i % 2 else 'multiply', i - 1))
    f.write('  %%%d\n}\n' % (n - 1))
PYEOF
start=$(date +%s)
"$RLY" viz "$T/big.rly" >"$T/big.dot" 2>"$T/err" && $CHECK dot "$T/big.dot" --nodes 200000 >"$T/chk" 2>&1 && ok || bad big_dot
"$RLY" viz "$T/big.rly" -O3 -o "$T/big.html" 2>"$T/err" && $CHECK html "$T/big.html" --nodes 100000 >"$T/chk" 2>&1 && ok || bad big_html
secs=$(( $(date +%s) - start ))
[ $secs -lt 120 ] && ok || bad "big_time ($secs s)"

# bad inputs
"$RLY" viz "$T/missing.rly" >"$T/out" 2>"$T/err"; [ $? -eq 1 ] && grep -q "missing.rly" "$T/err" && ok || bad missing_file
printf '#[version = "0.0.5"]\ndef @main(%%x: Tensor[(2), float32]) {\n  add(%%x, %%y)\n}\n' >"$T/bad.rly"
"$RLY" viz "$T/bad.rly" -o "$T/bad.html" >"$T/out" 2>"$T/err"; [ $? -eq 1 ] && grep -q "bad.rly:3" "$T/err" && [ ! -e "$T/bad.html" ] && ok || bad bad_program
"$RLY" viz "$N/div_fused.rly" -o "$T/x.png" 2>"$T/err"; [ $? -eq 2 ] && [ ! -e "$T/x.png" ] && ok || bad bad_extension
"$RLY" viz "$N/div_fused.rly" -o "$T/no/dir/x.html" 2>"$T/err"; [ $? -eq 1 ] && [ ! -e "$T/no" ] && ok || bad unwritable
"$RLY" viz "$N/div_fused.rly" -O7 2>"$T/err"; [ $? -eq 2 ] && ok || bad bad_level
"$RLY" viz 2>"$T/err"; [ $? -eq 2 ] && ok || bad no_file
"$RLY" viz --help >"$T/out" 2>&1; [ $? -eq 0 ] && grep -q "rly viz" "$T/out" && ok || bad help
ls "$T"/*.tmp-* >/dev/null 2>&1 && bad temporaries_left || ok

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]

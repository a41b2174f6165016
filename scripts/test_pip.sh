#!/usr/bin/env bash
# test_pip.sh - `pip install .` into a fresh virtualenv that has nothing but numpy, then use the
# installed package (not the checkout): build a module with the IR builder, compile and run it,
# run an @rly.script function, and make an InferenceSession from Relay text. Part of
# scripts/test.sh (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check 'numpy>=1.26,<3'
"$tmp/venv/bin/pip" install -q --disable-pip-version-check .
cd "$tmp"   # away from the checkout: the import must find the installed package
cat > model.rly <<'RLY'
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, 1f)) }
RLY
cat > smoke.py <<'PY'
import numpy as np, rly
assert rly.__file__.startswith(__import__("sys").prefix), rly.__file__
x = rly.var("x", shape=(2, 3))
mod = rly.IRModule.from_expr(rly.Function([x], rly.op.nn.relu(x * 2.0)))
v = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
np.testing.assert_array_equal(rly.build(mod)(v), np.maximum(v * 2, 0))

@rly.script
def f(a: rly.Tensor[(2, 3), "float32"], n: rly.Tensor[(), "int32"]):
    for i in range(n):
        a = a + 1.0
    return a

np.testing.assert_array_equal(f(v, np.array(3, np.int32)), v + 3)
s = rly.InferenceSession("model.rly")
np.testing.assert_array_equal(s.run(None, {"x": v})[0], np.maximum(v + 1, 0))
print("pip install: rly", rly.__version__, "from", rly.__file__, "works")
PY
RLY_LIBRARY= "$tmp/venv/bin/python" smoke.py

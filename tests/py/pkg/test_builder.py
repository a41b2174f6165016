"""test_builder.py - building Relay from Python: rly.var / rly.const, one function per operator
of the table (rly.op.*, generated, with docstrings), Python operators on expressions, Let, If,
Tuple, TupleGetItem, Function (closures and calls), GlobalVar (recursion), modules from
expressions, and type errors raised at the caller's file and line."""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "RLY_LIBRARY" not in os.environ and os.environ.get("RLY_BIN"):
    os.environ["RLY_LIBRARY"] = os.path.join(os.path.dirname(os.environ["RLY_BIN"]), "librly.so")
import rly  # noqa: E402
from rly import op  # noqa: E402

RNG = np.random.default_rng(3)


def test_every_operator_has_a_function():
    rly_bin = os.environ.get("RLY_BIN")
    if rly_bin:
        table = subprocess.run([rly_bin, "ops"], capture_output=True, text=True).stdout
        heads = [l.split("(")[0] for l in table.splitlines()
                 if l and not l.startswith(" ") and "(" in l.split()[0]]
        assert sorted(heads) == op.names
    assert len(op.names) > 200
    assert callable(op.nn.conv2d) and callable(op.image.resize2d) and callable(op.add)
    assert "strides: ints = [1, 1]" in op.nn.conv2d.__doc__
    with pytest.raises(TypeError, match="no attribute 'stride'"):
        op.nn.conv2d(rly.var("x", (1, 1, 4, 4)), rly.var("w", (1, 1, 3, 3)), stride=(1, 1))
    with pytest.raises(TypeError, match="takes 2 arguments"):
        op.add(rly.var("x", (2,)))


def test_mlp_runs_like_numpy():
    x = rly.var("x", shape=(2, 16))
    w = RNG.standard_normal((8, 16)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    h = op.nn.relu(op.nn.bias_add(op.nn.dense(x, rly.const(w)), rly.const(b)))
    assert h.type == "Tensor[(2, 8), float32]"
    y = op.nn.softmax(h * 0.5 + 1.0, axis=-1)
    mod = rly.IRModule.from_expr(rly.Function([x], y))
    xv = RNG.standard_normal((2, 16)).astype(np.float32)
    got = rly.build(mod)(xv)
    e = np.maximum(xv @ w.T + b, 0) * 0.5 + 1.0
    want = np.exp(e - e.max(-1, keepdims=True))
    np.testing.assert_allclose(got, want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_conv_attributes():
    x = rly.var("x", shape=(1, 3, 8, 8))
    w = rly.const(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
    y = op.nn.conv2d(x, w, strides=(2, 2), padding=(1, 1, 1, 1))
    assert y.type == "Tensor[(1, 4, 4, 4), float32]"
    z = op.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    assert z.type == "Tensor[(1, 4, 2, 2), float32]"


def test_control_flow_tuples_closures():
    a = rly.var("a", shape=(3,))
    t = rly.var("t", type_annotation="Tensor[(3), float32]")
    s = op.sum(a)
    cond = op.greater(s, rly.const(0.0))
    branch = rly.If(cond, a * 2.0, -a)
    pair = rly.Tuple([branch, s])
    f = rly.Function([t], t + 1.0)  # a closure, called below
    body = rly.Let(t, f(pair[0]), rly.Tuple([t, pair[1]]))
    mod = rly.IRModule.from_expr(rly.Function([a], body))
    exe = rly.build(mod, opt_level=0)
    for v in ([1, 2, 3], [-1, -2, 0.5]):
        av = np.array(v, np.float32)
        r, sv = exe(av)
        want = (av * 2 if av.sum() > 0 else -av) + 1
        np.testing.assert_allclose(r, want, rtol=1e-6)
        np.testing.assert_allclose(sv, av.sum(), rtol=1e-6)


def test_recursion_through_a_global():
    n = rly.var("n", shape=(), dtype="int32")
    fact = rly.GlobalVar("fact", ret_type="int32")
    body = rly.If(op.less_equal(n, rly.const(1)), rly.const(1), n * fact(n - 1))
    f = rly.Function([n], body, ret_type="int32")
    m = rly.var("m", shape=(), dtype="int32")
    mod = rly.IRModule.from_expr(rly.Function([m], fact(m)), functions={"fact": f})
    assert "def @fact" in str(mod)
    assert int(rly.build(mod)(np.array(5, np.int32))) == 120


def test_type_error_names_the_caller():
    x = rly.var("x", shape=(1, 16))
    w = rly.const(np.ones((8, 15), np.float32))
    line = sys._getframe().f_lineno + 2
    with pytest.raises(rly.RlyError) as err:
        op.nn.dense(x, w)
    msg = str(err.value)
    assert msg.startswith("%s:%d: nn.dense:" % (__file__, line)), msg
    assert "16" in msg and "15" in msg
    with pytest.raises(rly.RlyError, match="not a Relay variable name"):
        rly.var("1x")


def test_shared_nodes_are_computed_once_and_long_chains_print():
    x = rly.var("x", shape=(4, 8))
    w = rly.const(RNG.standard_normal((8, 8)).astype(np.float32))
    h = op.nn.dense(x, w)
    mod = rly.IRModule.from_expr(rly.Function([x], h * h + h))
    assert str(mod).count("nn.dense") == 1
    xv = RNG.standard_normal((4, 8)).astype(np.float32)
    hv = xv @ np.asarray(w.value).T
    np.testing.assert_allclose(rly.build(mod, opt_level=0)(xv), hv * hv + hv, rtol=1e-5,
                               atol=1e-5)
    y = x
    for _ in range(3000):  # printed as lets, iteratively (no Python recursion per node)
        y = op.negative(y)
    mod = rly.IRModule.from_expr(rly.Function([x], y))
    np.testing.assert_array_equal(rly.build(mod, opt_level=0)(xv), xv)


def test_adts_and_match_with_the_prelude():
    # sum of a List of scalars by recursion with match, and the prelude's @map
    T = "float32"
    xs = rly.var("xs", type_annotation="List[float32]")
    h, t = rly.var("h", type_annotation=T), rly.var("t", type_annotation="List[float32]")
    total = rly.GlobalVar("total", ret_type=T)
    body = rly.Match(xs, [
        (rly.PatternConstructor(rly.adt.Cons, [rly.PatternVar(h), rly.PatternVar(t)]),
         h + total(t)),
        (rly.PatternConstructor(rly.adt.Nil), rly.const(0.0)),
    ])
    f = rly.Function([xs], body, ret_type=T)
    a = rly.var("a", shape=(), dtype="float32")
    lst = rly.adt.Cons(a, rly.adt.Cons(a * 2.0, rly.adt.Cons(rly.const(10.0), rly.adt.Nil)))
    mod = rly.IRModule.from_expr(rly.Function([a], total(lst)), functions={"total": f},
                                 prelude=True)
    assert "match (%xs)" in str(mod) and "type List" in str(mod)
    assert float(rly.build(mod)(np.float32(1.5))) == 1.5 + 3.0 + 10.0


def test_attribute_choices():
    doc = op.image.resize2d.__doc__
    assert 'method: str = "linear" (one of: "nearest_neighbor", "linear", "cubic")' in doc
    x = rly.var("x", shape=(1, 1, 4, 4))
    with pytest.raises(ValueError, match="not one of 'nearest_neighbor', 'linear', 'cubic'"):
        op.image.resize2d(x, size=(8, 8), method="bilinear")
    y = op.image.resize2d(x, size=(8, 8), method="nearest_neighbor")
    assert y.type == "Tensor[(1, 1, 8, 8), float32]"

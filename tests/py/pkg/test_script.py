"""test_script.py - @rly.script: Python functions translated to Relay and run, against the same
functions run by Python/numpy: loops (while, for range), if/else as an expression and as a
join, recursion through a global, calls between script functions, closures (nested def, lambda),
tuples, rly.op calls with attributes, @; and the constructs it refuses, located."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "RLY_LIBRARY" not in os.environ and os.environ.get("RLY_BIN"):
    os.environ["RLY_LIBRARY"] = os.path.join(os.path.dirname(os.environ["RLY_BIN"]), "librly.so")
import rly  # noqa: E402

T34 = rly.Tensor[(3, 4), "float32"]
I32 = rly.Tensor[(), "int32"]
F32 = rly.Tensor[(), "float32"]
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


@rly.script
def tanh_loop(x: T34, n: I32):
    i = 0
    while i < n:
        x = rly.op.tanh(x) * 2.0
        i = i + 1
    return x


def test_while():
    want = X
    for _ in range(3):
        want = np.tanh(want) * 2
    np.testing.assert_allclose(tanh_loop(X, np.array(3, np.int32)), want, rtol=1e-5)
    np.testing.assert_array_equal(tanh_loop(X, np.array(0, np.int32)), X)
    assert "def @main" in tanh_loop.text and "tanh" in tanh_loop.text


@rly.script
def sum_range(x: T34, n: I32):
    acc = rly.op.zeros_like(x)
    for k in range(n):
        acc = acc + x * 0.5
    return acc


def test_for_range():
    np.testing.assert_allclose(sum_range(X, np.array(4, np.int32)), X * 2, rtol=1e-6)


@rly.script
def relu_or_neg(x: T34, flag: rly.Tensor[(), "bool"]):
    if flag:
        return rly.op.nn.relu(x)
    else:
        return -x


@rly.script
def join(x: T34, s: F32):
    y = x
    if s > 0.0:
        y = x * s
    else:
        y = x - s
    return y + 1.0


def test_if():
    np.testing.assert_array_equal(relu_or_neg(X, np.array(True)), np.maximum(X, 0))
    np.testing.assert_array_equal(relu_or_neg(X, np.array(False)), -X)
    np.testing.assert_allclose(join(X, np.float32(2)), X * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(join(X, np.float32(-2)), X + 2 + 1, rtol=1e-6)


@rly.script
def fact(n: I32) -> "int32":
    if n <= 1:
        return 1
    return n * fact(n - 1)


@rly.script
def uses_fact(n: I32):
    return fact(n) + 1


def test_recursion_and_calls():
    assert int(fact(np.array(6, np.int32))) == 720
    assert int(uses_fact(np.array(4, np.int32))) == 25
    assert "def @fact" in uses_fact.text


@rly.script
def closures(x: T34, w: rly.Tensor[(4, 2), "float32"]):
    def scale(v: T34):
        return v * 3.0
    g = lambda v: rly.op.sum(v, axis=[1])  # noqa: E731 - the construct under test
    pair = (scale(x), x @ w)
    return g(pair[0]), pair[1]


def test_closures_tuples_matmul():
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    a, b = closures(X, w)
    np.testing.assert_allclose(a, (X * 3).sum(1), rtol=1e-5)
    np.testing.assert_allclose(b, X @ w, rtol=1e-5)


def test_refused_constructs_are_located():
    def make_bad():
        @rly.script
        def bad(x: T34):
            for k in x:  # a tensor: not iterable in Relay
                x = x + 1.0
            return x
        return bad

    with pytest.raises(rly.ScriptError) as err:
        make_bad().module
    assert err.value.args[0].startswith(__file__ + ":")
    assert "or a List (this is Tensor[(3, 4), float32])" in str(err.value)

    def make_unannotated():
        @rly.script
        def f(x):
            return x
        return f

    with pytest.raises(rly.ScriptError, match="needs a type annotation"):
        make_unannotated().module

    def make_type_error():
        @rly.script
        def f(x: T34, w: rly.Tensor[(5, 2), "float32"]):
            return x @ w
        return f

    with pytest.raises(rly.ScriptError, match=r"test_script.py:\d+:\d+: .*"):
        make_type_error().module

    def make_unsupported():
        @rly.script
        def f(x: T34):
            with open("x"):
                return x
        return f

    with pytest.raises(rly.ScriptError, match="does not translate With"):
        make_unsupported().module


@rly.script
def list_sum(x: T34):
    acc = rly.op.zeros_like(x)
    for item in [x, x * 2.0, rly.op.exp(x)]:
        acc = acc + item
    return acc


@rly.script
def list_param(xs: "List[Tensor[(3, 4), float32]]"):
    acc = rly.op.zeros(shape=[3, 4], dtype="float32")
    for item in xs:
        acc = acc + rly.op.nn.relu(item)
    return acc


def test_lists():
    np.testing.assert_allclose(list_sum(X), X + 2 * X + np.exp(X), rtol=1e-5)
    assert "Cons(" in list_sum.text and "match (" in list_sum.text
    assert "def @main(%xs: List[Tensor[(3, 4), float32]])" in list_param.text

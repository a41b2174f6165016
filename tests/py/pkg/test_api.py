"""test_api.py - the TVM-style API of the Python package: rly.parse / rly.load / str(mod) /
mod.infer() / mod.astext(show_types=True), rly.transform passes and Sequential, rly.build and
calling an Executable, save / load, rly.gradient, rly.frontend.from_onnx; errors located."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "RLY_LIBRARY" not in os.environ and os.environ.get("RLY_BIN"):
    os.environ["RLY_LIBRARY"] = os.path.join(os.path.dirname(os.environ["RLY_BIN"]), "librly.so")
import rly  # noqa: E402

SRC = '''#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  %0 = add(%x, multiply(2f, 3f));
  (nn.relu(multiply(%0, %y)), sum(%x))
}
'''


def test_parse_print_infer():
    m = rly.parse(SRC)
    text = str(m)
    assert text.startswith('#[version = "0.0.5"]') and "def @main" in text
    assert str(rly.parse(text)) == text  # the printer's output parses back to itself
    typed = m.infer().astext(show_types=True)
    assert "/* ty=Tensor[(2, 3), float32] */" in typed


def test_parse_error_is_located():
    with pytest.raises(rly.RlyError, match=r"mine.rly:2:\d+"):
        rly.parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) { add(%x, %z) }\n',
                  "mine.rly")


def test_passes():
    m = rly.parse(SRC)
    assert "multiply(2f, 3f)" in str(m)
    rly.transform.FoldConstant()(m)
    assert "multiply(2f, 3f)" not in str(m) and "6f" in str(m)
    seq = rly.transform.Sequential([rly.transform.SimplifyExpr(),
                                    rly.transform.FuseOps(fuse_opt_level=2)])
    seq(m)
    assert "Primitive=1" in str(m)
    with pytest.raises(TypeError, match="no parameter"):
        rly.transform.FoldConstant(nope=1)
    assert "FuseOps" in rly.transform.__all__ and rly.transform.FuseOps.__doc__


def test_build_call_save_load(tmp_path):
    m = rly.parse(SRC)
    before = str(m)
    exe = rly.build(m, opt_level=3)
    assert str(m) == before  # build works on a copy
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    y = np.array([1, -1, 2], np.float32)
    r, s = exe(x, y)
    np.testing.assert_allclose(r, np.maximum((x + 6) * y, 0), rtol=1e-6)
    np.testing.assert_allclose(s, x.sum(), rtol=1e-6)
    r2, _ = exe(x, y=y)
    np.testing.assert_array_equal(r, r2)
    p = str(tmp_path / "f.rlyx")
    exe.save(p)
    back = rly.Executable.load(p)
    np.testing.assert_array_equal(back(x, y)[0], r)
    assert "instructions" in exe.stats() and "invoke_packed" in exe.disasm()
    with pytest.raises(TypeError):
        exe(x, y, x)
    with pytest.raises(rly.RlyError, match="Got invalid dimensions"):
        exe(x[:1], y)


def test_gradient():
    m = rly.parse('#[version = "0.0.5"]\n'
                  'def @main(%x: Tensor[(3), float32]) { sum(multiply(%x, %x)) }\n')
    before = str(m)
    g = rly.gradient(m, mode="first")
    assert "def @main" in str(g) and str(m) == before  # m itself unchanged
    assert "/* ty=(float32, (Tensor[(3), float32],)) */" in g.infer().astext(show_types=True)
    exe = rly.build(g)
    # the result (value, (gradient,)) nests a tuple: its leaves are the outputs, depth first
    value, grad = exe(np.array([1, 2, 3], np.float32))
    assert float(value) == 14.0
    np.testing.assert_array_equal(grad, [2, 4, 6])
    with pytest.raises(ValueError):
        rly.gradient(m, mode="third")


def test_from_onnx(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["a"], ["b"], name="r")], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 4])])
    p = str(tmp_path / "r.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    m = rly.frontend.from_onnx(p, shape={"a": (2, 4)})
    assert "nn.relu" in str(m)
    out = rly.build(m)(np.array([[-1, 2, -3, 4]] * 2, np.float32))
    np.testing.assert_array_equal(out, [[0, 2, 0, 4]] * 2)
    assert "nn.relu" in str(rly.load(p, shape={"a": (1, 4)}))


def test_gradient_of_a_function_and_a_script():
    x = rly.var("x", shape=(3,))
    g = rly.gradient(rly.Function([x], rly.op.sum(x * x)), mode="higher")
    assert "/* ty=(float32, (Tensor[(3), float32],)) */" in g.astext(show_types=True)

    @rly.script
    def cube(v: rly.Tensor[(3,), "float32"]):
        return rly.op.sum(v * v * v)

    g2 = rly.gradient(cube, mode="first")
    assert "def @main" in str(g2)


def test_training_an_mlp_with_rly_gradient():
    sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
    import train_mlp
    losses = train_mlp.train(steps=300)
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])
    # the gradient agrees with a finite difference of the loss
    step = train_mlp.build()
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) * 0.5
            for s in ((16, 4), (16,), (1, 16), (16, 4), (16, 1))]
    loss, gw1 = step(*args)[:2]
    e = np.zeros_like(args[0])
    e[3, 2] = 1e-2
    up = float(step(args[0] + e, *args[1:])[0])
    down = float(step(args[0] - e, *args[1:])[0])
    assert abs((up - down) / 2e-2 - gw1[3, 2]) < 1e-3

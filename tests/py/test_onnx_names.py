"""test_onnx_names.py - output names and weights as parameters for imported ONNX models
(issue 18, item 5), through the CLI.

- `rly run MODEL.onnx --output out.npz` names each array by the graph's output name, printed
  results are labelled `NAME: value` the same way (interpreter, VM, a compiled .rlyx); a .rly
  program without recorded names keeps output_0, ... and the unlabelled print.
- `rly import --params-as-inputs` makes the floating-point initializers parameters of @main
  (after the graph inputs; integer ones such as a Reshape shape stay constants) and writes them
  to OUT.params.npz (or --params FILE) keyed by parameter name; running the imported text on
  the inputs plus that file gives the model's outputs, and `rly grad` differentiates with
  respect to the weights. Bad uses are errors with exit status 2 and nothing written.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

RLY = os.environ.get("RLY_BIN", "rly")


def rly(*args, ok=True):
    p = subprocess.run([RLY] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=120)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def model(tmp_path):
    """A model with a dotted weight name, an integer initializer (Reshape's shape), an input
    with a default (an initializer of the same name) and two outputs, one named 'out:0'."""
    r = np.random.default_rng(3)
    inits = {
        "fc.weight": r.standard_normal((4, 3)).astype(np.float32),
        "fc.bias": r.standard_normal(3).astype(np.float32),
        "shape": np.array([-1, 3], np.int64),
        "scale": np.array([2.0], np.float32),  # also a graph input: its default
    }
    nodes = [
        helper.make_node("MatMul", ["x", "fc.weight"], ["h"]),
        helper.make_node("Add", ["h", "fc.bias"], ["h2"]),
        helper.make_node("Reshape", ["h2", "shape"], ["h3"]),
        helper.make_node("Mul", ["h3", "scale"], ["out:0"]),
        helper.make_node("ReduceSum", ["h3"], ["total"], keepdims=0),
    ]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("out:0", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x = r.standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    h3 = x @ inits["fc.weight"] + inits["fc.bias"]
    want = {"out:0": h3 * 2.0, "total": np.array(h3.sum(), np.float32)}
    return path, tmp_path / "in.npz", inits, want


@pytest.mark.parametrize("engine", ["vm", "interp"])
def test_npz_and_print_use_output_names(model, tmp_path, engine):
    path, inputs, _, want = model
    out = tmp_path / "out.npz"
    rly("run", path, "--inputs", inputs, "--output", out, "--engine", engine)
    with np.load(out) as z:
        assert sorted(z.files) == ["out:0", "total"]
        for k, w in want.items():
            np.testing.assert_allclose(z[k], w, rtol=1e-5, atol=1e-6)
    text = rly("run", path, "--inputs", inputs, "--engine", engine).stdout
    lines = text.splitlines()
    assert lines[0].startswith("out:0: Tensor[(2, 3), float32]"), text
    assert any(l.startswith("total: ") for l in lines), text


def test_rlyx_print_uses_output_names(model, tmp_path):
    path, inputs, _, _ = model
    exe = tmp_path / "m.rlyx"
    rly("compile", path, "-o", exe)
    text = rly("run", exe, "--inputs", inputs).stdout
    assert text.startswith("out:0: Tensor[(2, 3), float32]") and "\ntotal: " in text, text


def test_rly_program_keeps_output_n(tmp_path):
    src = tmp_path / "p.rly"
    src.write_text('#[version = "0.0.5"]\ndef @main(%a: Tensor[(2,), float32]) {\n'
                   '  (add(%a, %a), %a)\n}\n')
    np.savez(tmp_path / "in.npz", a=np.ones(2, np.float32))
    rly("run", src, "--inputs", tmp_path / "in.npz", "--output", tmp_path / "o.npz")
    with np.load(tmp_path / "o.npz") as z:
        assert sorted(z.files) == ["output_0", "output_1"]
    text = rly("run", src, "--inputs", tmp_path / "in.npz").stdout
    assert text.startswith("(Tensor[(2), float32]"), text


def test_params_as_inputs(model, tmp_path):
    path, inputs, inits, want = model
    out_rly = tmp_path / "imp.rly"
    rly("import", path, "--params-as-inputs", "-o", out_rly)
    text = out_rly.read_text()
    head = text[text.index("def @main("):text.index("{")]
    # graph inputs first (scale keeps its place), then the float initializers; the int64
    # shape stays a constant
    assert head.index("%x:") < head.index("%scale:") < head.index("%fc_weight:") < \
        head.index("%fc_bias:"), head
    assert "%shape" not in head
    assert 'onnx_input_names=["x", "scale", "fc.weight", "fc.bias"]' in head, head
    with np.load(tmp_path / "imp.params.npz") as z:
        assert list(z.files) == ["scale", "fc_weight", "fc_bias"]
        np.testing.assert_array_equal(z["fc_weight"], inits["fc.weight"])
        np.testing.assert_array_equal(z["scale"], inits["scale"])
        params = {k: z[k] for k in z.files}
    # the imported text on the inputs plus the weights gives the model's outputs, named
    np.savez(tmp_path / "all.npz", x=np.load(inputs)["x"], **params)
    rly("run", out_rly, "--inputs", tmp_path / "all.npz", "--output", tmp_path / "o.npz")
    with np.load(tmp_path / "o.npz") as z:
        for k, w in want.items():
            np.testing.assert_allclose(z[k], w, rtol=1e-5, atol=1e-6)
    # gradients with respect to the weights: d(sum(out) + total)/d bias = 2 + 1 per row
    rly("grad", out_rly, "--mode", "first", "-o", tmp_path / "g.rly")
    rly("run", tmp_path / "g.rly", "--inputs", tmp_path / "all.npz", "--output",
        tmp_path / "g.npz")
    with np.load(tmp_path / "g.npz") as z:
        # output_0, output_1: the two outputs; then dx, dscale, dW, db
        np.testing.assert_allclose(z["output_5"], np.full(3, 2 * 3.0, np.float32), rtol=1e-5)
        x = np.load(inputs)["x"]
        np.testing.assert_allclose(z["output_4"], np.repeat(x.sum(0)[:, None], 3, 1) * 3.0,
                                   rtol=1e-5)


@pytest.mark.parametrize("flag", [["--params-as-inputs"], []], ids=["explicit", "implied"])
def test_params_file_option(model, tmp_path, flag):
    """--params FILE names the weights file (and implies --params-as-inputs)."""
    path, _, _, _ = model
    pf = tmp_path / "weights.npz"
    text = rly("import", path, *flag, "--params", pf).stdout
    assert "%fc_weight: Tensor[(4, 3), float32]" in text
    with np.load(pf) as z:
        assert "fc_bias" in z.files


def test_params_as_inputs_needs_a_destination(model):
    path, _, _, _ = model
    p = rly("import", path, "--params-as-inputs", ok=False)
    assert p.returncode == 2 and "--params-as-inputs needs -o OUT or --params FILE" in p.stderr


def test_params_unwritable(model, tmp_path):
    path, _, _, _ = model
    out_rly = tmp_path / "imp.rly"
    p = rly("import", path, "--params-as-inputs", "--params", tmp_path / "no/such/dir/w.npz",
            "-o", out_rly, ok=False)
    assert p.returncode == 1 and "w.npz" in p.stderr and "Sanitizer" not in p.stderr, p.stderr
    assert not out_rly.exists()


def test_params_as_inputs_keeps_settings_constant(tmp_path):
    """Only weights become parameters: a rank-0 float, Resize's scales and Clip's bounds stay
    constants (the converters read them at import time)."""
    inits = {
        "w": np.array([1.0, 2.0], np.float32).reshape(1, 1, 1, 2),
        "alpha": np.array(0.5, np.float32),
        "lo": np.array([-1.0], np.float32).reshape(()),
        "hi": np.array(1.5, np.float32),
        "scales": np.array([1, 1, 2, 2], np.float32),
    }
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["a"]),
        helper.make_node("Mul", ["a", "alpha"], ["b"]),
        helper.make_node("Clip", ["b", "lo", "hi"], ["c"]),
        helper.make_node("Resize", ["c", "", "scales"], ["y"], mode="nearest"),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()])
    path = tmp_path / "s.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    out_rly = tmp_path / "s.rly"
    rly("import", path, "--params-as-inputs", "-o", out_rly)
    text = out_rly.read_text()
    head = text[text.index("def @main("):text.index("{")]
    assert "%w:" in head and not any("%" + k in head for k in ("alpha", "lo", "hi", "scales"))
    with np.load(tmp_path / "s.params.npz") as z:
        assert list(z.files) == ["w"]
        w = z["w"]
    x = np.array([[[[1, -3], [2, 4]]]], np.float32)
    np.savez(tmp_path / "all.npz", x=x, w=w)
    rly("run", out_rly, "--inputs", tmp_path / "all.npz", "--output", tmp_path / "o.npz")
    want = np.clip(x * inits["w"] * 0.5, -1, 1.5).repeat(2, 2).repeat(2, 3)
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], want)

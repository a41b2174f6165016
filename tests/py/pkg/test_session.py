"""test_session.py - the Python package's rly.InferenceSession (python/rly) against onnxruntime:
the same names, shapes, types, results and errors on small ONNX models built here, and the same
session over Relay text and a compiled .rlyx. The library is the build's librly.so: RLY_LIBRARY,
else the folder of RLY_BIN (CTest sets both)."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "RLY_LIBRARY" not in os.environ and os.environ.get("RLY_BIN"):
    os.environ["RLY_LIBRARY"] = os.path.join(os.path.dirname(os.environ["RLY_BIN"]), "librly.so")
import rly  # noqa: E402

RNG = np.random.default_rng(7)


def mlp_model(path):
    """y = relu(x @ W + b), z = sum(y, axis=1): two outputs, named; x has a dynamic batch."""
    w = RNG.standard_normal((16, 8)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu"),
         helper.make_node("ReduceSum", ["y"], ["z"], axes=[1], keepdims=0, name="sum")],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])],
        [helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.flatten()),
         helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    onnx.save(m, path)
    return m


def int_model(path):
    g = helper.make_graph(
        [helper.make_node("Add", ["i", "j"], ["k"]), helper.make_node("Cast", ["k"], ["f"], to=1)],
        "ints",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [3, 2]),
         helper.make_tensor_value_info("j", TensorProto.INT64, [3, 2])],
        [helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("m") / "mlp.onnx")
    mlp_model(path)
    return path


def test_interface_matches_onnxruntime(mlp):
    s, o = rly.InferenceSession(mlp), ort.InferenceSession(mlp)
    for mine, theirs in ((s.get_inputs(), o.get_inputs()), (s.get_outputs(), o.get_outputs())):
        assert [a.name for a in mine] == [a.name for a in theirs]
        assert [a.shape for a in mine] == [a.shape for a in theirs]
        assert [a.type for a in mine] == [a.type for a in theirs]


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_results_match_onnxruntime(mlp, threads):
    s, o = rly.InferenceSession(mlp, threads=threads), ort.InferenceSession(mlp)
    if threads:
        assert s.get_threads() == threads
    for _ in range(3):  # the session is reused; inputs rebound each run
        x = RNG.standard_normal((4, 16)).astype(np.float32)
        mine, theirs = s.run(None, {"x": x}), o.run(None, {"x": x})
        for a, b in zip(mine, theirs):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    z = s.run(["z"], {"x": x})
    assert len(z) == 1 and z[0].shape == (4,)
    y, z2 = s.run(["y", "z"], {"x": x})
    np.testing.assert_array_equal(z2, z[0])


def test_outputs_are_copies(mlp):
    s = rly.InferenceSession(mlp)
    x = np.ones((4, 16), np.float32)
    first = s.run(None, {"x": x})[0]
    keep = first.copy()
    s.run(None, {"x": -x})
    np.testing.assert_array_equal(first, keep)


def test_non_contiguous_and_unaligned_inputs(mlp):
    s, o = rly.InferenceSession(mlp), ort.InferenceSession(mlp)
    base = RNG.standard_normal((16, 4)).astype(np.float32)
    xt = base.T  # Fortran order: copied once
    assert not xt.flags.c_contiguous
    np.testing.assert_allclose(s.run(None, {"x": xt})[0], o.run(None, {"x": xt})[0], rtol=1e-5,
                               atol=1e-5)
    raw = np.zeros(256 + 128, np.uint8)  # a float32 array 4 bytes past 64-byte alignment
    start = (-raw.ctypes.data) % 64 + 4
    xu = np.frombuffer(raw[start:start + 256].data, np.float32).reshape(4, 16)
    xu[...] = base.T
    np.testing.assert_allclose(s.run(None, {"x": xu})[0], o.run(None, {"x": xt})[0], rtol=1e-5,
                               atol=1e-5)


def test_bytes_and_integer_model(tmp_path):
    p = str(tmp_path / "ints.onnx")
    int_model(p)
    with open(p, "rb") as f:
        s = rly.InferenceSession(f.read())
    assert [a.type for a in s.get_inputs()] == ["tensor(int64)", "tensor(int64)"]
    i = np.arange(6, dtype=np.int64).reshape(3, 2)
    (f,) = s.run(None, {"i": i, "j": i * 10})
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f, (i * 11).astype(np.float32))


def test_errors_like_onnxruntime(mlp):
    s = rly.InferenceSession(mlp)
    x = np.zeros((4, 16), np.float32)
    with pytest.raises(rly.RlyError, match="Invalid input name: nope"):
        s.run(None, {"x": x, "nope": x})
    with pytest.raises(rly.RlyError, match=r"Required inputs \(\['x'\]\) are missing"):
        s.run(None, {})
    with pytest.raises(rly.RlyError, match="Invalid output name: w"):
        s.run(["w"], {"x": x})
    with pytest.raises(rly.RlyError, match=r"Unexpected input data type. Actual: \(tensor\(double\)\)"):
        s.run(None, {"x": x.astype(np.float64)})
    with pytest.raises(rly.RlyError, match="Got invalid dimensions for input: x"):
        s.run(None, {"x": np.zeros((4, 15), np.float32)})
    with pytest.raises(rly.RlyError, match="Invalid rank for input: x"):
        s.run(None, {"x": np.zeros(64, np.float32)})
    with pytest.raises(FileNotFoundError):
        rly.InferenceSession("/nonexistent/model.onnx")
    with pytest.raises(ValueError):
        rly.InferenceSession(mlp, opt_level=7)
    with pytest.raises(ValueError):
        rly.InferenceSession(mlp, threads=0)


def test_bad_model_is_a_located_error(tmp_path):
    p = tmp_path / "bad.rly"
    p.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2), float32]) {\n  add(%x, %y)\n}\n')
    with pytest.raises(rly.RlyError, match=r"bad.rly:3:\d+"):
        rly.InferenceSession(str(p))
    q = tmp_path / "junk.onnx"
    q.write_bytes(b"\x08\x07junk")
    with pytest.raises(rly.RlyError):
        rly.InferenceSession(str(q))


def test_relay_text_and_compiled_executable(tmp_path, mlp):
    src = tmp_path / "f.rly"
    src.write_text('#[version = "0.0.5"]\n'
                   'def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(3), float32]) {\n'
                   '  (nn.relu(add(%a, %b)), sum(%a))\n}\n')
    s = rly.InferenceSession(str(src), opt_level=0)
    assert [a.name for a in s.get_inputs()] == ["a", "b"]
    assert [a.name for a in s.get_outputs()] == ["output_0", "output_1"]
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    r, t = s.run(None, {"a": a, "b": b})
    np.testing.assert_allclose(r, np.maximum(a + b, 0), rtol=1e-6)
    np.testing.assert_allclose(t, a.sum(), rtol=1e-5)
    rly_bin = os.environ.get("RLY_BIN")
    if not rly_bin:
        pytest.skip("RLY_BIN not set: no rly to compile a .rlyx with")
    exe = str(tmp_path / "mlp.rlyx")
    subprocess.run([rly_bin, "compile", mlp, "-o", exe], check=True)
    s2, o = rly.InferenceSession(exe), ort.InferenceSession(mlp)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    for m, t2 in zip(s2.run(None, {"x": x}), o.run(None, {"x": x})):
        np.testing.assert_allclose(m, t2, rtol=1e-5, atol=1e-5)
    assert [a.name for a in s2.get_outputs()] == ["y", "z"]


def test_dlpack_and_views(mlp):
    s, o = rly.InferenceSession(mlp), ort.InferenceSession(mlp)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    want = o.run(None, {"x": x})
    # in: a DLPack producer (numpy's __dlpack__) bound without a copy
    t = rly.from_dlpack(x)
    assert t.data == x.ctypes.data and t.shape == (4, 16) and t.dtype == np.float32
    got = s.run(None, {"x": t})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    # out: views of the session's buffers, seen by numpy without a copy
    y, z = s.run(None, {"x": x}, views=True)
    assert isinstance(y, rly.Tensor) and y.shape == (4, 8)
    a = np.asarray(y)
    assert a.ctypes.data == y.data  # __array_interface__: no copy
    np.testing.assert_allclose(a, want[0], rtol=1e-5, atol=1e-5)
    b = np.from_dlpack(y)  # __dlpack__: no copy
    assert b.ctypes.data == y.data
    np.testing.assert_allclose(np.from_dlpack(z), want[1], rtol=1e-5, atol=1e-5)
    # a view into a non-contiguous producer is refused with a message
    with pytest.raises(rly.RlyError, match="not C-contiguous"):
        rly.from_dlpack(x.T)
    # dtypes through DLPack: integers and bools keep their dtype
    for dt in (np.int8, np.uint16, np.int64, np.float64, np.bool_):
        v = np.zeros((2, 3), dt)
        assert rly.from_dlpack(v).dtype == np.dtype(dt)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float16", "float32", "float64"])
def test_every_numeric_dtype(tmp_path, dtype):
    p = tmp_path / "m.rly"
    p.write_text('#[version = "0.0.5"]\n'
                 'def @main(%%x: Tensor[(2, 3), %s]) { (add(%%x, %%x), %%x) }\n' % dtype)
    s = rly.InferenceSession(str(p))
    x = (np.arange(6) % 5).astype(dtype).reshape(2, 3)
    twice, same = s.run(None, {"x": x})
    assert twice.dtype == np.dtype(dtype) and same.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(twice, x + x)
    np.testing.assert_array_equal(same, x)
    assert s.get_inputs()[0].type.startswith("tensor(")


def test_bool_and_bfloat16(tmp_path):
    p = tmp_path / "b.rly"
    p.write_text('#[version = "0.0.5"]\n'
                 'def @main(%b: Tensor[(4), bool], %h: Tensor[(4), bfloat16]) {\n'
                 '  (logical_not(%b), %h, cast(%h, dtype="float32"))\n}\n')
    s = rly.InferenceSession(str(p))
    assert [a.type for a in s.get_inputs()] == ["tensor(bool)", "tensor(bfloat16)"]
    b = np.array([True, False, True, True])
    f = np.array([1.0, -2.5, 0.15625, 3e8], np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 = the top 16 bits
    nb, hb, hf = s.run(None, {"b": b, "h": bits})
    np.testing.assert_array_equal(nb, ~b)
    assert hb.dtype == np.uint16
    np.testing.assert_array_equal(hb, bits)
    np.testing.assert_array_equal(hf, (bits.astype(np.uint32) << 16).view(np.float32))
    with pytest.raises(rly.RlyError, match="bfloat16: feed its bits"):
        s.run(None, {"b": b, "h": f})


def test_many_threads_one_session(mlp):
    import threading
    s, o = rly.InferenceSession(mlp, threads=1), ort.InferenceSession(mlp)
    xs = [RNG.standard_normal((4, 16)).astype(np.float32) for _ in range(8)]
    want = [o.run(None, {"x": x}) for x in xs]
    errors = []

    def work(k):
        try:
            for r in range(25):
                i = (k + r) % len(xs)
                got = s.run(None, {"x": xs[i]})
                for a, b in zip(got, want[i]):
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        except Exception as ex:  # noqa: BLE001 - reported below
            errors.append(ex)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    s.close()


def exported_models():
    d = os.environ.get("RLY_MODELS_DIR")
    if not d or not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".onnx"))


@pytest.mark.parametrize("path", exported_models() or [None],
                         ids=[os.path.basename(p)[:-5] for p in exported_models()] or ["none"])
def test_exported_models_side_by_side(path):
    """The exported PyTorch models (tests/models/export.py; RLY_MODELS_DIR, set by CTest):
    interface and outputs as onnxruntime's, on the models' own inputs."""
    if path is None:
        pytest.skip("RLY_MODELS_DIR is not set (CTest sets it after the onnx_models test)")
    s, o = rly.InferenceSession(path), ort.InferenceSession(path)
    for mine, theirs in ((s.get_inputs(), o.get_inputs()), (s.get_outputs(), o.get_outputs())):
        assert [a.name for a in mine] == [a.name for a in theirs]
        assert [a.type for a in mine] == [a.type for a in theirs]
        assert [a.shape for a in mine] == [a.shape for a in theirs]
    feed = dict(np.load(path[:-5] + ".npz"))
    feed = {k: v for k, v in feed.items() if k in {a.name for a in o.get_inputs()}}
    for a, b in zip(s.run(None, feed), o.run(None, feed)):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    name = s.get_outputs()[0].name
    (only,) = s.run([name], feed)
    np.testing.assert_allclose(only, o.run([name], feed)[0], rtol=1e-4, atol=1e-4)

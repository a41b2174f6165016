"""test_models.py - models written with @rly.script against the same models in PyTorch eager
(Debian's python3 with python3-torch computes the reference in a subprocess): a character
RNN (embedding lookup, a tanh recurrence over the sequence as a for-range loop, a dense layer
and log_softmax) and a child-sum TreeLSTM over the prelude's Tree (built by recursion, walked
by `match` and recursion over the children's List)."""
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
from rly.adt import Rose  # noqa: E402

T, V, E, H = 12, 20, 8, 16
TORCH_PY = "/usr/bin/python3"


@rly.script
def char_rnn(chars: rly.Tensor[(T,), "int32"], emb: rly.Tensor[(V, E), "float32"],
             w_ih: rly.Tensor[(H, E), "float32"], w_hh: rly.Tensor[(H, H), "float32"],
             b: rly.Tensor[(H,), "float32"], w_out: rly.Tensor[(V, H), "float32"],
             b_out: rly.Tensor[(V,), "float32"]):
    h = rly.op.zeros(shape=[1, H], dtype="float32")
    for t in range(T):
        c = rly.op.take(chars, t, axis=0)
        x = rly.op.reshape(rly.op.take(emb, c, axis=0), newshape=[1, E])
        h = rly.op.tanh(rly.op.nn.dense(x, w_ih) + rly.op.nn.dense(h, w_hh) + b)
    return rly.op.nn.log_softmax(rly.op.nn.dense(h, w_out) + b_out, axis=-1)


def has_torch():
    return os.path.exists(TORCH_PY) and subprocess.run(
        [TORCH_PY, "-c", "import torch"], capture_output=True).returncode == 0


@pytest.mark.skipif(not has_torch(), reason="Debian's python3-torch is not installed")
def test_char_rnn_against_pytorch(tmp_path):
    rng = np.random.default_rng(5)
    w = {"chars": rng.integers(0, V, T).astype(np.int32),
         "emb": rng.standard_normal((V, E)).astype(np.float32),
         "w_ih": (rng.standard_normal((H, E)) * 0.4).astype(np.float32),
         "w_hh": (rng.standard_normal((H, H)) * 0.3).astype(np.float32),
         "b": (rng.standard_normal(H) * 0.1).astype(np.float32),
         "w_out": (rng.standard_normal((V, H)) * 0.5).astype(np.float32),
         "b_out": (rng.standard_normal(V) * 0.1).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **w)
    subprocess.run([TORCH_PY, os.path.join(os.path.dirname(__file__), "char_rnn_torch.py"),
                    str(tmp_path / "in.npz"), str(tmp_path / "out.npz")], check=True)
    want = np.load(tmp_path / "out.npz")["out"]
    got = char_rnn(w["chars"], w["emb"], w["w_ih"], w["w_hh"], w["b"], w["w_out"], w["b_out"])
    assert got.shape == (1, V)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


X, HT, N_DEPTH = 6, 8, 3
TREE = "Tree[Tensor[(1, %d), float32]]" % X
STATE = "(Tensor[(1, %d), float32], Tensor[(1, %d), float32])" % (HT, HT)


@rly.script
def build_tree(feats: rly.Tensor[(2 ** (N_DEPTH + 1) - 1, X), "float32"],
               i: rly.Tensor[(), "int32"], depth: rly.Tensor[(), "int32"]) -> TREE:
    x = rly.op.reshape(rly.op.take(feats, i, axis=0), newshape=[1, X])
    if depth <= 0:
        return Rose(x, [])
    return Rose(x, [build_tree(feats, 2 * i + 1, depth - 1),
                    build_tree(feats, 2 * i + 2, depth - 1)])


@rly.script
def tree_lstm(t: TREE, w_iou: rly.Tensor[(3 * HT, X), "float32"],
              u_iou: rly.Tensor[(3 * HT, HT), "float32"], b_iou: rly.Tensor[(3 * HT,), "float32"],
              w_f: rly.Tensor[(HT, X), "float32"], u_f: rly.Tensor[(HT, HT), "float32"],
              b_f: rly.Tensor[(HT,), "float32"]) -> STATE:
    match t:
        case Rose(x, kids):
            hs = rly.op.zeros(shape=[1, HT], dtype="float32")
            fc = rly.op.zeros(shape=[1, HT], dtype="float32")
            for kid in kids:
                h, c = tree_lstm(kid, w_iou, u_iou, b_iou, w_f, u_f, b_f)
                hs = hs + h
                f = rly.op.sigmoid(rly.op.nn.dense(x, w_f) + rly.op.nn.dense(h, u_f) + b_f)
                fc = fc + f * c
            iou = rly.op.nn.dense(x, w_iou) + rly.op.nn.dense(hs, u_iou) + b_iou
            parts = rly.op.split(iou, indices_or_sections=3, axis=1)
            c = rly.op.sigmoid(parts[0]) * rly.op.tanh(parts[2]) + fc
            return rly.op.sigmoid(parts[1]) * rly.op.tanh(c), c


@rly.script
def tree_model(feats: rly.Tensor[(2 ** (N_DEPTH + 1) - 1, X), "float32"],
               w_iou: rly.Tensor[(3 * HT, X), "float32"],
               u_iou: rly.Tensor[(3 * HT, HT), "float32"], b_iou: rly.Tensor[(3 * HT,), "float32"],
               w_f: rly.Tensor[(HT, X), "float32"], u_f: rly.Tensor[(HT, HT), "float32"],
               b_f: rly.Tensor[(HT,), "float32"]):
    return tree_lstm(build_tree(feats, 0, N_DEPTH), w_iou, u_iou, b_iou, w_f, u_f, b_f)


@pytest.mark.skipif(not has_torch(), reason="Debian's python3-torch is not installed")
def test_tree_lstm_against_pytorch(tmp_path):
    rng = np.random.default_rng(9)
    w = {"feats": rng.standard_normal((2 ** (N_DEPTH + 1) - 1, X)).astype(np.float32),
         "w_iou": (rng.standard_normal((3 * HT, X)) * 0.4).astype(np.float32),
         "u_iou": (rng.standard_normal((3 * HT, HT)) * 0.3).astype(np.float32),
         "b_iou": (rng.standard_normal(3 * HT) * 0.1).astype(np.float32),
         "w_f": (rng.standard_normal((HT, X)) * 0.4).astype(np.float32),
         "u_f": (rng.standard_normal((HT, HT)) * 0.3).astype(np.float32),
         "b_f": (rng.standard_normal(HT) * 0.1).astype(np.float32)}
    np.savez(tmp_path / "in.npz", depth=np.array(N_DEPTH), **w)
    subprocess.run([TORCH_PY, os.path.join(os.path.dirname(__file__), "tree_lstm_torch.py"),
                    str(tmp_path / "in.npz"), str(tmp_path / "out.npz")], check=True)
    want = np.load(tmp_path / "out.npz")
    h, c = tree_model(*w.values())
    np.testing.assert_allclose(h, want["h"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, want["c"], rtol=1e-5, atol=1e-6)
    assert "match (" in tree_lstm.text and "def @build_tree" in tree_model.text

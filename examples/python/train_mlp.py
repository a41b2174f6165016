"""train_mlp.py - an MLP built with rly's Python builder, its gradient from rly.gradient, and a
few hundred SGD steps in numpy: the loss falls. Run from the repository root after the
release build:

    PYTHONPATH=python .venv/bin/python examples/python/train_mlp.py
"""
import numpy as np

import rly
from rly import op


def build(batch=16, n_in=4, hidden=16):
    x = rly.var("x", shape=(batch, n_in))
    t = rly.var("t", shape=(batch, 1))
    w1 = rly.var("w1", shape=(hidden, n_in))
    b1 = rly.var("b1", shape=(hidden,))
    w2 = rly.var("w2", shape=(1, hidden))
    h = op.tanh(op.nn.bias_add(op.nn.dense(x, w1), b1))
    y = op.nn.dense(h, w2)
    d = y - t
    loss = op.mean(d * d)
    mod = rly.IRModule.from_expr(rly.Function([w1, b1, w2, x, t], loss))
    return rly.build(rly.gradient(mod, mode="first"))


def train(steps=300, lr=0.3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    t = (np.sin(x.sum(1, keepdims=True))).astype(np.float32)  # a smooth target
    w1 = (rng.standard_normal((16, 4)) * 0.5).astype(np.float32)
    b1 = np.zeros(16, np.float32)
    w2 = (rng.standard_normal((1, 16)) * 0.5).astype(np.float32)
    step = build()
    losses = []
    for _ in range(steps):
        loss, gw1, gb1, gw2, _gx, _gt = step(w1, b1, w2, x, t)
        losses.append(float(loss))
        w1 -= lr * gw1
        b1 -= lr * gb1
        w2 -= lr * gw2
    return losses


if __name__ == "__main__":
    losses = train()
    print("loss: %.5f -> %.5f after %d steps" % (losses[0], losses[-1], len(losses)))

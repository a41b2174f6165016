"""Train an imported ONNX model with rly: an MLP written with the onnx helper API, imported with
its weights as parameters, differentiated by `rly grad`, and trained by SGD.

    .venv/bin/python examples/onnx_train/train.py RLY WORKDIR [STEPS]

1. Writes WORKDIR/mlp.onnx: a 4-16-1 MLP whose graph computes the mean squared error of its
   prediction against a target (inputs x and y, the weights as initializers, output `loss`).
2. `rly import mlp.onnx --params-as-inputs -o mlp.rly`: @main(%x, %y, %fc1_weight, ...) and
   mlp.params.npz with the initial weights, keyed by those parameter names.
3. `rly grad mlp.rly --mode first -o mlp_grad.rly`: @main returning (loss, (dx, dy, dW1, ...)).
4. Each step runs mlp_grad.rly on the batch and the current weights (`rly run --output`:
   output_0 the loss, output_1.. the gradients in parameter order) and takes an SGD step.

Checks (exit status 1 when one fails): rly's loss on mlp.onnx equals onnxruntime's, the first
gradients equal numpy's backpropagation, and the loss goes down (the last below a third of the
first). Prints the loss per step."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_model(path, rng):
    w = {
        "fc1.weight": (rng.standard_normal((4, 16)) * 0.5).astype(np.float32),
        "fc1.bias": np.zeros(16, np.float32),
        "fc2.weight": (rng.standard_normal((16, 1)) * 0.5).astype(np.float32),
        "fc2.bias": np.zeros(1, np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["h0"]),
        helper.make_node("Add", ["h0", "fc1.bias"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "fc2.weight"], ["p0"]),
        helper.make_node("Add", ["p0", "fc2.bias"], ["pred"]),
        helper.make_node("Sub", ["pred", "y"], ["err"]),
        helper.make_node("Mul", ["err", "err"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 1])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(a, n) for n, a in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def rly(binary, *args):
    r = subprocess.run([binary] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("rly %s failed:\n%s" % (" ".join(args), r.stderr))
    return r.stdout


def numpy_grads(x, y, p):
    """Backpropagation of the MLP's mean squared error, in float64."""
    w1, b1, w2, b2 = (p[k].astype(np.float64) for k in
                      ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"))
    h1 = x @ w1 + b1
    h = np.maximum(h1, 0)
    err = h @ w2 + b2 - y
    dpred = 2 * err / err.size
    dh = (dpred @ w2.T) * (h1 > 0)
    return {"fc1_weight": x.T @ dh, "fc1_bias": dh.sum(0), "fc2_weight": h.T @ dpred,
            "fc2_bias": dpred.sum(0)}


def main():
    binary, work = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    onnx_path = os.path.join(work, "mlp.onnx")
    build_model(onnx_path, rng)
    x = rng.uniform(-1, 1, (32, 4)).astype(np.float32)
    y = (np.sin(2 * x[:, :1]) + x[:, 1:2] * x[:, 2:3]).astype(np.float32)

    # the model as ONNX: rly's loss against onnxruntime's
    batch = os.path.join(work, "batch.npz")
    np.savez(batch, x=x, y=y)
    out = os.path.join(work, "out.npz")
    rly(binary, "run", onnx_path, "--inputs", batch, "--output", out)
    loss_rly = float(np.load(out)["loss"])  # named by the model's output name
    failures = []
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        loss_ort = float(sess.run(None, {"x": x, "y": y})[0])
        if abs(loss_rly - loss_ort) > 1e-5 * max(1.0, abs(loss_ort)):
            failures.append("loss %g, onnxruntime %g" % (loss_rly, loss_ort))
    except ImportError:
        pass

    # import with the weights as parameters, differentiate
    rly_path = os.path.join(work, "mlp.rly")
    grad_path = os.path.join(work, "mlp_grad.rly")
    rly(binary, "import", onnx_path, "--params-as-inputs", "-o", rly_path)
    with np.load(os.path.join(work, "mlp.params.npz")) as z:
        params = {k: z[k] for k in z.files}  # in parameter order, after x and y
    rly(binary, "grad", rly_path, "--mode", "first", "-o", grad_path)

    lr, losses = 0.1, []
    step_in = os.path.join(work, "step.npz")
    for step in range(steps):
        np.savez(step_in, x=x, y=y, **params)
        rly(binary, "run", grad_path, "--inputs", step_in, "--output", out)
        with np.load(out) as z:
            loss = float(z["output_0"])
            grads = {k: z["output_%d" % (3 + i)] for i, k in enumerate(params)}
        if step == 0:
            want = numpy_grads(x.astype(np.float64), y.astype(np.float64), params)
            for k, g in grads.items():
                if g.shape != want[k].shape or not np.allclose(g, want[k], rtol=1e-4, atol=1e-5):
                    failures.append("gradient of %s differs from numpy's" % k)
            if abs(loss - loss_rly) > 1e-6 * max(1.0, loss):
                failures.append("the gradient program's loss %g, the model's %g" % (loss, loss_rly))
        losses.append(loss)
        print("step %2d  loss %.6f" % (step, loss))
        params = {k: (v - lr * grads[k]).astype(v.dtype) for k, v in params.items()}
    if not losses[-1] < losses[0] / 3:
        failures.append("the loss went from %g to %g" % (losses[0], losses[-1]))
    for f in failures:
        print("FAIL:", f)
    print("%d passed, %d failed" % (1 if not failures else 0, 1 if failures else 0))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

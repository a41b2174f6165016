"""Real models at current opsets through rly vs onnxruntime (issue 18, item 4).

    .venv/bin/python tests/models/current_opsets.py [-O N] [--engine E] RLY WORKDIR [NAME...]

Takes the models tests/models/export.py wrote to WORKDIR/models (ResNet-18, MobileNetV2, LSTM,
GRU, the transformer encoder: opset 13, as torch 1.13 exports them; run_models.sh makes them,
and so does this script when they are missing),
upgrades each to opsets 18 and 21 with onnx.version_converter (Reduce* axes become inputs,
Split gets num_outputs or a split input, ... as a current exporter writes them), and writes one
model at opset 21 with onnxscript that uses the newer operators: GroupNormalization (the
opset-21 form, per-channel scale and bias), LayerNormalization, Gelu and CenterCropPad. Each
goes through `rly run` (compare.py's check: every output within 1e-4 of onnxruntime's,
relative to the output's magnitude). The upgraded models are written to WORKDIR/opsets and
reused while newer than their source. Prints one line per model and a closing
`N passed, N failed`; exits 1 when any failed."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import version_converter
from onnxscript import FLOAT, script
from onnxscript import opset21 as op

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import check  # noqa: E402  (the same comparison as run_models.sh)

MODELS = ["resnet18", "mobilenet_v2", "lstm", "gru", "transformer"]
OPSETS = [18, 21]


def upgrade(src, dst, opset):
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
        return
    m = onnx.load(src)
    up = version_converter.convert_version(m, opset)
    onnx.checker.check_model(up)
    onnx.save(up, dst)


def newer_ops_model(path):
    """A small convolutional block at opset 21, written with onnxscript: GroupNormalization,
    Gelu, CenterCropPad and LayerNormalization over the channels-last result. The weights are
    written as function inputs, then made initializers of the model."""
    @script()
    def block(x: FLOAT[2, 3, 12, 12], w: FLOAT[8, 3, 3, 3], gscale: FLOAT[8], gbias: FLOAT[8],
              lscale: FLOAT[8], lbias: FLOAT[8]) -> FLOAT[2, 10, 10, 8]:
        c = op.Conv(x, w, pads=[1, 1, 1, 1])
        g = op.GroupNormalization(c, gscale, gbias, num_groups=4, epsilon=1e-5)
        a = op.Gelu(g, approximate="tanh")
        crop = op.CenterCropPad(a, op.Constant(value_ints=[10, 10]), axes=[2, 3])
        t = op.Transpose(crop, perm=[0, 2, 3, 1])
        return op.LayerNormalization(t, lscale, lbias, axis=-1, epsilon=1e-5)

    rng = np.random.default_rng(18)
    weights = {
        "w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "gscale": (1 + 0.1 * rng.standard_normal(8)).astype(np.float32),
        "gbias": (0.1 * rng.standard_normal(8)).astype(np.float32),
        "lscale": (1 + 0.1 * rng.standard_normal(8)).astype(np.float32),
        "lbias": (0.1 * rng.standard_normal(8)).astype(np.float32),
    }
    m = block.to_model_proto()
    keep = [i for i in m.graph.input if i.name not in weights]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    m.graph.initializer.extend(onnx.numpy_helper.from_array(a, n) for n, a in weights.items())
    onnx.checker.check_model(m)
    onnx.save(m, path)
    np.savez(path[:-5] + ".npz",
             **{keep[0].name: rng.standard_normal((2, 3, 12, 12)).astype(np.float32)})


def main():
    args = sys.argv[1:]
    opt = []
    while args and args[0] in ("-O", "--engine"):
        opt += ["-O" + args[1]] if args[0] == "-O" else ["--engine", args[1]]
        args = args[2:]
    rly, work = args[0], args[1]
    src_dir, out_dir = os.path.join(work, "models"), os.path.join(work, "opsets")
    os.makedirs(out_dir, exist_ok=True)
    if not os.path.exists(os.path.join(src_dir, "transformer.onnx")):  # run_models.sh's exports
        here = os.path.dirname(os.path.abspath(__file__))
        r = subprocess.run(["/usr/bin/python3", os.path.join(here, "export.py"), src_dir],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("export.py failed:\n" + r.stdout + r.stderr)
    jobs = []  # (label, model path, inputs path)
    for name in MODELS:
        src = os.path.join(src_dir, name + ".onnx")
        for opset in OPSETS:
            dst = os.path.join(out_dir, "%s_opset%d.onnx" % (name, opset))
            jobs.append(("%s_opset%d" % (name, opset), src, dst, opset))
    newer = os.path.join(out_dir, "newer_ops_opset21.onnx")
    wanted = set(args[2:])
    bad = n = 0
    for label, src, dst, opset in jobs + [("newer_ops_opset21", None, newer, 21)]:
        if wanted and label not in wanted:
            continue
        n += 1
        try:
            if src is None:
                newer_ops_model(dst)
                inputs = dst[:-5] + ".npz"
            else:
                upgrade(src, dst, opset)
                inputs = src[:-5] + ".npz"
            ok, msg = check(rly, dst, inputs, opt)
        except Exception as e:  # a conversion the onnx package cannot do is a failure here
            ok, msg = False, "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300])
        print("%s %s%s: %s" % ("ok  " if ok else "FAIL", label, " " + " ".join(opt) if opt else "",
                               msg), flush=True)
        bad += not ok
    print("%d passed, %d failed" % (n - bad, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

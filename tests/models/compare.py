"""Run exported ONNX models through rly and onnxruntime and compare (the project venv).

    .venv/bin/python tests/models/compare.py [-O N] [--engine E] RLY MODELDIR [NAME...]

For each MODELDIR/<name>.onnx with its <name>.npz input: `rly run` (optimized with -O N when
given: the differential test of the optimizer, docs/passes.md) writes the outputs to an npz,
onnxruntime computes its own; every output must match within rtol 1e-4 (relative to the largest
magnitude of the reference output, atol 1e-5). Prints one line per model with the max error."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

RTOL = 1e-4


def check(rly, path, inputs_npz, opt=()):
    feeds = dict(np.load(inputs_npz))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "out.npz")
        opt = list(opt)
        if "rlyx" in opt:  # --engine rlyx: `rly compile` to a file, then run the file
            exe = os.path.join(td, "model.rlyx")
            copt = [o for o in opt if o.startswith("-O")]
            r = subprocess.run([rly, "compile", path, "-o", exe] + copt, capture_output=True,
                               text=True, errors="replace")
            if r.returncode != 0:
                return False, "rly compile failed: " + r.stderr.strip()[:300]
            path, opt = exe, []
        r = subprocess.run([rly, "run", path, "--inputs", inputs_npz, "--output", out] + opt,
                           capture_output=True, text=True, errors="replace")
        if r.returncode != 0:
            return False, "rly failed: " + r.stderr.strip().splitlines()[0] if r.stderr else "rly failed"
        got = np.load(out)
        names = [o.name for o in sess.get_outputs()]  # rly names the arrays by ONNX output names
        worst = 0.0
        for i, w in enumerate(want):
            if names[i] not in got.files:
                return False, "no array %r in rly's output (it has %s)" % (names[i], got.files)
            g = got[names[i]]
            if g.shape != w.shape:
                return False, "output %d shape %s, expected %s" % (i, g.shape, w.shape)
            scale = max(float(np.max(np.abs(w))), 1e-6)
            err = float(np.max(np.abs(g.astype(np.float64) - w))) / scale if w.size else 0.0
            worst = max(worst, err)
        return worst <= RTOL, "max error %.2e relative to the output's magnitude" % worst


def main():
    args = sys.argv[1:]
    opt = []  # passed on to `rly run`: -O N, --engine E
    while args and args[0] in ("-O", "--engine"):
        opt += ["-O" + args[1]] if args[0] == "-O" else ["--engine", args[1]]
        args = args[2:]
    rly, d = args[0], args[1]
    names = args[2:] or sorted(f[:-5] for f in os.listdir(d) if f.endswith(".onnx"))
    bad = 0
    for n in names:
        ok, msg = check(rly, os.path.join(d, n + ".onnx"), os.path.join(d, n + ".npz"), opt)
        print("%s %s%s: %s" % ("ok  " if ok else "FAIL", n, " " + " ".join(opt) if opt else "", msg),
              flush=True)
        bad += not ok
    print("%d passed, %d failed" % (len(names) - bad, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

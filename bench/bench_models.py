"""bench_models.py - rly against onnxruntime on whole models, in one run, interleaved.

    .venv/bin/python bench/bench_models.py RLY MODELDIR [--rounds N] [NAME...]

MODELDIR holds <name>.onnx with its <name>.npz inputs (tests/models/export.py writes them; the
CTest `onnx_models` caches them in BUILD/onnx_models/models). For each round and each model, in
turn: onnxruntime (one thread, all graph optimizations) times session.run, then `rly bench`
times the VM's session run alone (-O3, one thread), then the interpreter's whole `rly run
--engine interp -O3` (its import and optimization included, so its column is an upper bound).
Each figure is the median over rounds of that round's median; the ratios are rly / onnxruntime
(below 1: rly is faster). Rounds interleave the engines so that a noisy neighbour on this shared
machine slows them alike. Not a test: see bench/README.md for figures."""
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort


def ort_time(path, feeds, reps):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def rly_vm_time(rly, path, inputs, reps):
    p = subprocess.run([rly, "bench", path, "--inputs", inputs, "--warmup", "1", "--repeat",
                        str(reps)], capture_output=True, text=True, errors="replace")
    m = re.search(r"median ([\d.]+) (ns|us|µs|ms|s)\b", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit("rly bench failed on %s: %s" % (path, p.stderr.strip()[:300]))
    return float(m.group(1)) * UNIT[m.group(2)]


def rly_interp_time(rly, path, inputs, out):
    t0 = time.perf_counter()
    p = subprocess.run([rly, "run", path, "--inputs", inputs, "--output", out, "--engine",
                        "interp", "-O3"], capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        sys.exit("rly run --engine interp failed on %s: %s" % (path, p.stderr.strip()[:300]))
    return time.perf_counter() - t0


def main():
    args = sys.argv[1:]
    rounds = 3
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    rly, d = args[0], args[1]
    names = args[2:] or sorted(f[:-5] for f in os.listdir(d) if f.endswith(".onnx"))
    res = {n: {"ort": [], "vm": [], "interp": []} for n in names}
    out = "/tmp/bench_models_%d.npz" % os.getpid()
    for _ in range(rounds):
        for n in names:
            path, inputs = os.path.join(d, n + ".onnx"), os.path.join(d, n + ".npz")
            feeds = dict(np.load(inputs))
            res[n]["ort"].append(ort_time(path, feeds, 5))
            res[n]["vm"].append(rly_vm_time(rly, path, inputs, 5))
            res[n]["interp"].append(rly_interp_time(rly, path, inputs, out))
    if os.path.exists(out):
        os.remove(out)
    print("| model | onnxruntime (1 thread) | rly VM | VM / ort | interpreter (whole run) "
          "| interp / ort |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in names:
        o, v, i = (statistics.median(res[n][k]) for k in ("ort", "vm", "interp"))
        print("| %s | %.2f ms | %.2f ms | %.1fx | %.0f ms | %.1fx |" %
              (n, o * 1e3, v * 1e3, v / o, i * 1e3, i / o))
    print("onnxruntime %s, %d rounds" % (ort.__version__, rounds))


if __name__ == "__main__":
    main()

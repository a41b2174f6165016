"""bench_treelstm.py - the TreeLSTM of treelstm.rly in rly against the same model in PyTorch eager.

    /usr/bin/python3 bench/treelstm/bench_treelstm.py RLY [--rounds N] [--repeat N] [--threads 1,2]

Runs with Debian's python3-torch. Writes the weights and leaves (seed 0) to a temporary .npz,
checks that `rly run` and PyTorch agree (max abs difference <= 1e-4), then, interleaved per
round and thread count: `rly bench treelstm.rly --threads T` and PyTorch eager
(torch.set_num_threads(T), no_grad), each the median of REPEAT runs after a warm-up; prints the
medians over rounds and the ratio PyTorch / rly (> 1: rly is faster). Both build the tree from
the leaves inside the timed run."""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def build(x, lo, n):
    if n == 1:
        return ("leaf", x[lo:lo + 1])
    h = n // 2
    return ("node", build(x, lo, h), build(x, lo + h, n - h))


def cell(t, w, bw, u, bu):
    F = torch.nn.functional
    if t[0] == "leaf":
        i, o, g = F.linear(t[1], w, bw).split(128, dim=1)
        c = torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    ha, ca = cell(t[1], w, bw, u, bu)
    hb, cb = cell(t[2], w, bw, u, bu)
    i, fl, fr, o, g = F.linear(torch.cat((ha, hb), dim=1), u, bu).split(128, dim=1)
    c = torch.sigmoid(i) * torch.tanh(g) + (torch.sigmoid(fl) * ca + torch.sigmoid(fr) * cb)
    return torch.sigmoid(o) * torch.tanh(c), c


def torch_model(p):
    x, w, bw, u, bu = (torch.from_numpy(p[k]) for k in ("x", "w", "bw", "u", "bu"))
    return lambda: cell(build(x, 0, 32), w, bw, u, bu)[0]


def torch_time(f, reps):
    with torch.no_grad():
        f()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def rly_time(rly, npz, threads, reps):
    p = subprocess.run([rly, "bench", os.path.join(HERE, "treelstm.rly"), "--inputs", npz,
                        "--threads", str(threads), "--warmup", "1", "--repeat", str(reps)],
                       capture_output=True, text=True, errors="replace")
    m = re.search(r"median ([\d.]+) (ns|us|µs|ms|s)\b", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit("rly bench failed: %s" % (p.stderr or p.stdout).strip()[:400])
    return float(m.group(1)) * UNIT[m.group(2)]


def main():
    args = sys.argv[1:]
    opts = {"--rounds": "3", "--repeat": "50", "--threads": "1,2"}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    rly = args[0]
    r = np.random.default_rng(0)
    p = {"x": r.standard_normal((32, 128)), "w": r.standard_normal((384, 128)) * 0.1,
         "bw": r.standard_normal(384) * 0.1, "u": r.standard_normal((640, 256)) * 0.1,
         "bu": r.standard_normal(640) * 0.1}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(npz, **p)
        f = torch_model(p)
        q = subprocess.run([rly, "run", os.path.join(HERE, "treelstm.rly"), "--inputs", npz,
                            "--output", out], capture_output=True, text=True)
        if q.returncode != 0:
            sys.exit("rly run failed: %s" % q.stderr[:400])
        got = next(iter(np.load(out).values()))
        with torch.no_grad():
            want = f().numpy()
        diff = float(np.abs(got - want).max())
        if diff > 1e-4:
            sys.exit("rly and PyTorch disagree: max abs difference %g" % diff)
        threads = [int(t) for t in opts["--threads"].split(",")]
        res = {t: {"rly": [], "torch": []} for t in threads}
        for _ in range(int(opts["--rounds"])):
            for t in threads:
                torch.set_num_threads(t)
                res[t]["torch"].append(torch_time(f, int(opts["--repeat"])))
                res[t]["rly"].append(rly_time(rly, npz, t, int(opts["--repeat"])))
    print("| TreeLSTM (hidden 128, 63 nodes) | threads | PyTorch eager | rly | PyTorch / rly |")
    print("|---|---:|---:|---:|---:|")
    for t in threads:
        a, b = statistics.median(res[t]["torch"]), statistics.median(res[t]["rly"])
        print("| | %d | %.3f ms | %.3f ms | %.2fx |" % (t, a * 1e3, b * 1e3, a / b))
    print("PyTorch %s; outputs agree to %.1e" % (torch.__version__, diff))


if __name__ == "__main__":
    main()

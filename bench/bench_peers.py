"""bench_peers.py - rly against onnxruntime on the issue-16 models, in one run, interleaved.

    .venv/bin/python bench/bench_peers.py RLY MODELDIR [--rounds N] [--threads 1,2] [--repeat N]
                                          [--no-memory] [--no-pin] [NAME...]

MODELDIR holds <name>.onnx with its <name>.npz inputs (bench/export_peers.py writes them). For each
round, each thread count and each model, in turn: onnxruntime (intra-op threads = T, all graph
optimizations, sequential execution) times session.run REPEAT times after a warm-up run, then
`rly bench MODEL --threads T` does the same (load and compile excluded from both), with a pause
of 0.3 s after each (onnxruntime's idle workers spin for tens of milliseconds after a run, which
would take the second core from rly's). Each figure is
the median over rounds of the round's median; the ratio is rly / onnxruntime (< 1: rly is faster),
closed by the geometric mean per thread count. With memory on, each model also runs once more in a
fresh process per runtime (`rly run --output` and an onnxruntime script that loads, runs and saves),
and their peak RSS (getrusage of the child) is printed side by side; rly twice: running the
.onnx (compiled in memory) and running the .rlyx that `rly compile` wrote (the deployed form,
its weights prepacked in the file; compile time and memory excluded).

Both runtimes run a T-thread measurement on the same T CPUs: this process pins itself (and so the
`rly bench` child, which inherits it) to the first T CPUs it may use before each one, unless
--no-pin. Unpinned, each round's fresh rly process landed on either vCPU while onnxruntime stayed
in this process, and on these machines one vCPU can run 15% slower than the other for minutes
(the LSTM at 1 thread: 502-507 us on CPU 0, 589-595 us on CPU 1, pinned in the same minute).

Figures move by +-50% between runs on these shared machines: compare ratios from one run only."""
import os

# numpy's OpenBLAS starts a thread per core that busy-waits for work: in this process they took
# a core from the `rly bench` children (rly's second thread then found none free: LSTM at 2
# threads read 0.63 ms instead of 0.36). The harness itself needs no BLAS threads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import math  # noqa: E402 - after the thread settings above
import re  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_time(sess, feeds, reps):
    sess.run(None, feeds)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def rly_time(rly, path, inputs, threads, reps):
    p = subprocess.run([rly, "bench", path, "--inputs", inputs, "--threads", str(threads),
                        "--warmup", "1", "--repeat", str(reps)],
                       capture_output=True, text=True, errors="replace")
    m = re.search(r"median ([\d.]+) (ns|us|µs|ms|s)\b", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit("rly bench failed on %s: %s" % (path, (p.stderr or p.stdout).strip()[:400]))
    return float(m.group(1)) * UNIT[m.group(2)]


RSS_PROBE = """
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), ru.ru_maxrss * 1024)
"""


def child_peak_rss(cmd):
    """Peak RSS in bytes of one process running cmd (it must succeed). A small Python process
    forks it and reports: Linux counts the high-water mark a child inherits at fork (kept across
    execve), so the child is forked from a process of ~10 MB rather than from this one."""
    p = subprocess.run([sys.executable, "-c", RSS_PROBE] + cmd, capture_output=True, text=True)
    rc, rss = (int(x) for x in p.stdout.split())
    if rc != 0:
        sys.exit("failed: %s" % " ".join(cmd))
    return rss


ORT_ONCE = """
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
outs = s.run(None, dict(np.load(sys.argv[2])))
np.savez(sys.argv[3], *outs)
"""


def main():
    args = sys.argv[1:]
    opts = {"--rounds": "3", "--threads": "1,2", "--repeat": "30"}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    memory = "--no-memory" not in args
    pin = "--no-pin" not in args
    args = [a for a in args if a not in ("--no-memory", "--no-pin")]
    cpus = sorted(os.sched_getaffinity(0))
    if len(args) < 2:
        sys.exit(__doc__)
    rly, d = args[0], args[1]
    rounds, reps = int(opts["--rounds"]), int(opts["--repeat"])
    threads = [int(t) for t in opts["--threads"].split(",")]
    names = args[2:] or sorted(f[:-5] for f in os.listdir(d) if f.endswith(".onnx"))
    res = {(n, t): {"ort": [], "rly": []} for n in names for t in threads}
    sessions = {}
    for _ in range(rounds):
        for t in threads:
            if pin:  # the same t CPUs for both (onnxruntime's workers start under it too)
                os.sched_setaffinity(0, cpus[:t] if t < len(cpus) else cpus)
            for n in names:
                path, inputs = os.path.join(d, n + ".onnx"), os.path.join(d, n + ".npz")
                if (n, t) not in sessions:
                    sessions[(n, t)] = (ort_session(path, t), dict(np.load(inputs)))
                sess, feeds = sessions[(n, t)]
                res[(n, t)]["ort"].append(ort_time(sess, feeds, reps))
                time.sleep(0.3)  # onnxruntime's workers spin for a while after a run
                res[(n, t)]["rly"].append(rly_time(rly, path, inputs, t, reps))
                time.sleep(0.3)
    print("| model | threads | onnxruntime | rly | rly / ort |")
    print("|---|---:|---:|---:|---:|")
    logs = {t: [] for t in threads}
    for t in threads:
        for n in names:
            o = statistics.median(res[(n, t)]["ort"])
            r = statistics.median(res[(n, t)]["rly"])
            logs[t].append(math.log(r / o))
            print("| %s | %d | %.3f ms | %.3f ms | %.2fx |" % (n, t, o * 1e3, r * 1e3, r / o))
    for t in threads:
        print("| geometric mean | %d | | | %.2fx |" % (t, math.exp(sum(logs[t]) / len(logs[t]))))
    print("onnxruntime %s, %d rounds of %d runs, %s%s" % (ort.__version__, rounds, reps,
                                                        os.uname().machine,
                                                        ", pinned" if pin else ""))
    if pin:
        os.sched_setaffinity(0, cpus)
    if memory:
        print()
        print("| model | onnxruntime peak RSS | rly run .onnx | rly / ort | rly run .rlyx | "
              "rly / ort |")
        print("|---|---:|---:|---:|---:|---:|")
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "ort_once.py")
            with open(script, "w") as f:
                f.write(ORT_ONCE)
            out = os.path.join(tmp, "out.npz")
            for n in names:
                path, inputs = os.path.join(d, n + ".onnx"), os.path.join(d, n + ".npz")
                o = child_peak_rss([sys.executable, script, path, inputs, out])
                r = child_peak_rss([rly, "run", path, "--inputs", inputs, "--threads", "1",
                                    "--output", out])
                # deployed: compiled once by `rly compile` (weights prepacked in the file)
                exe = os.path.join(tmp, n + ".rlyx")
                subprocess.run([rly, "compile", path, "-o", exe], check=True)
                x = child_peak_rss([rly, "run", exe, "--inputs", inputs, "--threads", "1",
                                    "--output", out])
                os.unlink(exe)
                print("| %s | %.0f MB | %.0f MB | %.2fx | %.0f MB | %.2fx |"
                      % (n, o / 1e6, r / 1e6, r / o, x / 1e6, x / o))


if __name__ == "__main__":
    main()

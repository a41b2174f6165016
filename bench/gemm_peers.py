"""gemm_peers.py - SGEMM 1024^3 in the peers on this machine: onnxruntime's MatMul (MLAS) and
numpy's matmul (the OpenBLAS of its wheel), at 1 and 2 threads, best of 30 calls, as GFLOP/s, to
read beside `bench_gemm -s 1024^3` (rly's SGEMM against the machine's measured peak).

    .venv/bin/python bench/gemm_peers.py [N]        N: the size (default 1024)

Each peer runs in a process of its own pinned to the first CPUs (OpenBLAS reads its thread
count from the environment when it loads)."""
import os
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
import numpy as np
n, threads, which = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
a = np.random.rand(n, n).astype(np.float32)
b = np.random.rand(n, n).astype(np.float32)
if which == "numpy":
    c = np.empty((n, n), np.float32)
    run = lambda: np.matmul(a, b, out=c)
    name = "numpy %s matmul" % np.__version__
else:
    import onnxruntime as ort
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    run = lambda: s.run(None, {"a": a, "b": b})
    name = "onnxruntime %s MatMul" % ort.__version__
for _ in range(3):
    run()
best = 1e30
for _ in range(30):
    t = time.perf_counter()
    run()
    best = min(best, time.perf_counter() - t)
print("%-28s %d thread%s  %7.1f GFLOP/s" % (name, threads, "" if threads == 1 else "s",
                                            2.0 * n ** 3 / best * 1e-9))
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    cpus = os.sched_getaffinity(0)
    for which in ("onnxruntime", "numpy"):
        for threads in (1, 2):
            pin = sorted(cpus)[:threads]
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
            subprocess.run(["taskset", "-c", ",".join(map(str, pin)), sys.executable, "-c", CHILD,
                            str(n), str(threads), which], env=env, check=True)


if __name__ == "__main__":
    main()

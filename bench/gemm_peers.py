"""gemm_peers.py - SGEMM n^3 (row-major float32, C = A B) in rly and its peers on this machine, at 1
and 2 threads, in interleaved rounds, as GFLOP/s and as a fraction of the FMA peak that
`bench_gemm` measures in the same round:

- rly: `bench_gemm -s 1024^3` (A and B packed per call; n = 1024 only); on a CPU with AMX it runs
  on AMX tiles (src/kernels/fast/gemm_amx.c), and a second row gives it at RLY_ISA=avx512;
- onnxruntime's MatMul (MLAS);
- numpy's matmul (the OpenBLAS of its wheel);
- Intel's oneMKL `cblas_sgemm`, when its runtime library is there: `--mkl LIB`, the environment's
  MKL_RT, or a `libmkl_rt.so*` beside this Python (`.venv/bin/pip install mkl` puts one there; it
  is not a dependency of rly, only a yardstick: the vendor's own library on an Intel core).

    .venv/bin/python bench/gemm_peers.py [N] [--rounds R] [--rly BENCH_GEMM] [--mkl LIB]

Each peer runs in a process of its own pinned to the first CPUs (OpenBLAS and MKL read their
thread counts from the environment when they load), its operands in 2 MiB pages as rly's are;
best of 30 calls each, then the median over the rounds. rly's figure is bench_gemm's (best of its repetitions), run on the first two CPUs."""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys

CHILD = r"""
import ctypes, mmap, os, sys, time
import numpy as np
n, threads, which, lib = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
HUGE = 2 << 20
keep = []
def matrix():
    # in 2 MiB pages, 2 MiB-aligned, as rly's tensors are (src/support/alloc.c)
    mm = mmap.mmap(-1, n * n * 4 + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        mm.madvise(mmap.MADV_HUGEPAGE)
    keep.append(mm)
    off = -ctypes.addressof(ctypes.c_char.from_buffer(mm)) % HUGE
    return np.frombuffer(mm, np.float32, n * n, off).reshape(n, n)
rng = np.random.default_rng(1)
a, b, c = matrix(), matrix(), matrix()
a[:] = rng.random((n, n), dtype=np.float32)
b[:] = rng.random((n, n), dtype=np.float32)
if which == "numpy":
    run = lambda: np.matmul(a, b, out=c)
elif which == "mkl":
    mkl = ctypes.CDLL(lib)
    f = mkl.cblas_sgemm
    f.restype = None
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                                       ctypes.c_void_p, ctypes.c_int]
    pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
    # CblasRowMajor = 101, CblasNoTrans = 111
    run = lambda: f(101, 111, 111, n, n, n, 1.0, pa, n, pb, n, 0.0, pc, n)
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
for _ in range(3):
    run()
best = 1e30
for _ in range(30):
    t = time.perf_counter()
    run()
    best = min(best, time.perf_counter() - t)
if which == "mkl":  # the product checked on a few elements, so a wrong binding cannot pass
    for i, j in ((0, 0), (n - 1, n // 2), (n // 3, n - 1)):
        want = float(np.dot(a[i].astype(np.float64), b[:, j].astype(np.float64)))
        assert abs(c[i, j] - want) <= 1e-4 * abs(want), (i, j, c[i, j], want)
print("%.3f" % (2.0 * n ** 3 / best * 1e-9))
"""


def versions(mkl):
    out = subprocess.run([sys.executable, "-c",
                          "import numpy, onnxruntime; print(numpy.__version__, onnxruntime.__version__)"],
                         capture_output=True, text=True, check=True).stdout.split()
    names = {"onnxruntime": "onnxruntime %s MatMul" % out[1], "numpy": "numpy %s matmul" % out[0]}
    if mkl:
        names["mkl"] = "oneMKL cblas_sgemm (%s)" % os.path.basename(mkl)
    return names


def find_mkl(arg):
    if arg:
        return arg
    if os.environ.get("MKL_RT"):
        return os.environ["MKL_RT"]
    found = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")))
    return found[0] if found else None


def peer(which, n, threads, mkl, cpus):
    pin = ",".join(map(str, cpus[:threads]))
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    out = subprocess.run(["taskset", "-c", pin, sys.executable, "-c", CHILD, str(n), str(threads),
                          which, mkl or ""], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def rly(bench_gemm, cpus, isa=None):
    """(level, peak 1 thread, peak 2 threads, 1024^3 on 1 thread, on 2) from one bench_gemm run
    (isa: RLY_ISA for it)"""
    env = dict(os.environ)
    if isa:
        env["RLY_ISA"] = isa
    out = subprocess.run(["taskset", "-c", ",".join(map(str, cpus[:2])), bench_gemm, "-t", "2",
                          "-s", "1024^3"], env=env, capture_output=True, text=True,
                         check=True).stdout
    pk = re.search(r"level (\w+); measured peak: ([0-9.]+) GFLOP/s on 1 thread, ([0-9.]+) on 2",
                   out)
    row = re.search(r"^1024\^3\s+([0-9.]+)\s+[0-9.]+%\s+([0-9.]+)", out, re.M)
    if not pk or not row:
        sys.exit("gemm_peers.py: unexpected bench_gemm output:\n" + out)
    return (pk.group(1), float(pk.group(2)), float(pk.group(3)), float(row.group(1)),
            float(row.group(2)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rly", default=os.path.join("build", "release", "bench", "bench_gemm"),
                    help="bench_gemm (rly's row and the peak; the peak only when n != 1024)")
    ap.add_argument("--mkl", help="oneMKL's runtime library (libmkl_rt.so.N)")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("gemm_peers.py: needs 2 CPUs")
    if not os.path.exists(args.rly):
        sys.exit("gemm_peers.py: no bench_gemm at %s (cmake --preset release, or --rly)" % args.rly)
    mkl = find_mkl(args.mkl)
    names = versions(mkl)
    peers = ["onnxruntime", "numpy"] + (["mkl"] if mkl else [])
    got = {}  # (name, threads) -> [GFLOP/s]
    peaks = {1: [], 2: []}
    amx = False
    for _ in range(args.rounds):
        level, p1, p2, r1, r2 = rly(args.rly, cpus)
        amx = level == "amx"
        peaks[1].append(p1), peaks[2].append(p2)
        if args.n == 1024:
            got.setdefault(("rly", 1), []).append(r1)
            got.setdefault(("rly", 2), []).append(r2)
            if amx:  # the AVX-512 FMA tiles too, as on a CPU without AMX
                _, _, _, f1, f2 = rly(args.rly, cpus, "avx512")
                got.setdefault(("rly-avx512", 1), []).append(f1)
                got.setdefault(("rly-avx512", 2), []).append(f2)
        for which in peers:
            for threads in (1, 2):
                got.setdefault((which, threads), []).append(peer(which, args.n, threads, mkl, cpus))
    names["rly"] = "rly (bench_gemm, A and B packed per call%s)" % (
        "; on AMX tiles, float32 from bf16 parts" if amx else "")
    names["rly-avx512"] = "rly at RLY_ISA=avx512 (the AVX-512 FMA tiles)"
    pk = {t: statistics.median(v) for t, v in peaks.items()}
    print("SGEMM %d^3, %d rounds; FMA peak (bench_gemm, median) %.1f GFLOP/s on 1 thread, %.1f on 2"
          % (args.n, args.rounds, pk[1], pk[2]))
    print("| | 1 thread GFLOP/s | % of peak | 2 threads GFLOP/s | % of peak |")
    print("|---|---:|---:|---:|---:|")
    ours = (["rly"] + (["rly-avx512"] if amx else [])) if args.n == 1024 else []
    for which in ours + peers:
        cells = []
        for t in (1, 2):
            v = got[(which, t)]
            cells += ["%.1f (%.1f-%.1f)" % (statistics.median(v), min(v), max(v)),
                      "%.1f%%" % (100 * statistics.median(v) / pk[t])]
        print("| %s | %s |" % (names[which], " | ".join(cells)))


if __name__ == "__main__":
    main()

"""diff_opt.py - the optimizer's differential test (issue 14): every program of the Relay-text
corpora runs through the interpreter unoptimized (-O0) and optimized (-O3 by default), and the
two must give the same outputs.

    .venv/bin/python tests/diff/diff_opt.py RLY [-O N | --passes 'A,B(k=v)'] [--engine vm|interp]
                                            [--exact] [--only SUBSTRING] [--list]

Both sides run on the interpreter (--engine interp) unless --engine E runs the optimized side on
engine E; the reference side is always the interpreter (the VM's
differential test, issue 15); --engine rlyx compiles the optimized side to an executable file
(`rly compile`) and runs that (save -> load -> run); --exact asks floats to agree bit for bit (same -O level on both
sides: the VM runs the same kernels in the same order).

The corpora:
  tests/autodiff/*.rly        the autodiff programs, and the gradient of each (`rly grad`,
                              higher-order mode: closures, references, ADTs)
  examples/*.rly              the examples
  tests/golden/typed/*.rly    the typed goldens that have a @main
  tests/vm/fused*.rly         the VM's fused-group programs (views, anchors, tuple results,
                              LSTM/GRU cells, blocked-layout convolutions)
  tests/py/test_lang.py       the language cases (CASES: closures, the prelude, references,
                              recursion, match, polymorphism)

Each program runs as `rly run FILE --fill random --seed S --output out.npz` (S printed; RLY_SEED
replays another) at -O0 and at -O N. Outputs (tuples and ADT fields flattened depth-first) must
have the same names, dtypes and shapes; integers and bools must be equal, floats close:
|a - b| <= atol + rtol * |b| with (rtol, atol) = (1e-5, 1e-6) for float32, (1e-9, 1e-12) for
float64, (1e-2, 1e-3) for float16 and bfloat16 (one rounding to 8 or 11 bits of mantissa may
move), NaN equal to NaN. A result holding a function cannot be written to .npz; its printed text
is compared instead (numbers with the float32 tolerance, the rest exactly).

Whatever the pipeline of that level holds runs: the test needs no change as passes are
registered. With --passes the optimized side is `rly opt FILE --passes P --verify -o OPT.rly`
run the same way instead: passes outside the default pipeline (EtaExpand, ToANormalForm,
ToGraphNormalForm) get the same net. A program that does not run at -O0 (no @main, inputs that cannot be generated, a
runtime error on the random inputs, over the time limit) is skipped and listed with its reason;
one that runs at -O0 must run at -O N and agree, or the test fails and says where. Closes with
`N passed, N failed, N skipped`."""
import concurrent.futures
import glob
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HDR = '#[version = "0.0.5"]\n'

TOL = {  # dtype kind -> (rtol, atol)
    "float16": (1e-2, 1e-3),
    "bfloat16": (1e-2, 1e-3),
    "float32": (1e-5, 1e-6),
    "float64": (1e-9, 1e-12),
}
TIMEOUT_O0 = 10  # seconds of one unoptimized run (random inputs can make a loop endless)
TIMEOUT_ON = 120  # the optimized run must finish when the unoptimized one did


def corpus():
    """(name, text) of every program."""
    progs = []
    for pattern in ("tests/autodiff/*.rly", "examples/*.rly", "tests/golden/typed/*.rly",
                    "tests/vm/fused*.rly"):
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path) as f:
                text = f.read()
            if "def @main" in text:
                progs.append((os.path.relpath(path, ROOT), text))
    sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
    import test_lang  # noqa: E402  (its CASES: (name, text, prelude, expected))
    for name, text, _prelude, _want in test_lang.CASES:
        progs.append(("test_lang.py::" + name, HDR + text))
    return progs


def run(rly, path, extra, timeout):
    """(returncode, stdout, stderr) of `rly run`."""
    try:
        p = subprocess.run([rly, "run", path] + extra, capture_output=True, text=True,
                           errors="replace", timeout=timeout + 10)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out"


def first_line(s):
    s = s.strip()
    return s.splitlines()[0] if s else "(no message)"


def dtype_name(a):
    return "bfloat16" if a.dtype.kind == "V" and a.dtype.itemsize == 2 else str(a.dtype)


def as_float(a):
    """a as float64 (bfloat16 arrives as numpy's 2-byte void)."""
    if a.dtype.kind == "V":
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def compare_arrays(got, want, exact=False):
    """None when got (optimized) matches want (unoptimized), else what differs. exact: floats
    too must be equal (bit for bit, NaN equal to NaN)."""
    if sorted(got.files) != sorted(want.files):
        return "outputs %s, unoptimized %s" % (sorted(got.files), sorted(want.files))
    for k in sorted(want.files, key=lambda s: (len(s), s)):
        g, w = got[k], want[k]
        if dtype_name(g) != dtype_name(w) or g.shape != w.shape:
            return "%s: %s%s, unoptimized %s%s" % (k, dtype_name(g), g.shape, dtype_name(w),
                                                   w.shape)
        name = dtype_name(w)
        if exact and name in TOL:
            gf, wf = as_float(g), as_float(w)
            same = (gf == wf) | (np.isnan(gf) & np.isnan(wf))
            if not (same.all() and (np.isnan(wf).any() or g.tobytes() == w.tobytes())):
                i = np.unravel_index(int(np.argmax(~same)), same.shape) if w.ndim else ()
                return "%s[%s]: %r, unoptimized %r (%s, exact)" % (
                    k, ",".join(map(str, i)), gf[i], wf[i], name)
        elif name in TOL:
            rtol, atol = TOL[name]
            gf, wf = as_float(g), as_float(w)
            bad = ~(np.isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True) |
                    ((gf == wf) & np.isinf(wf)))
            if bad.any():
                i = np.unravel_index(int(np.argmax(bad)), bad.shape)
                return "%s[%s]: %r, unoptimized %r (%s: rtol %g, atol %g; %d of %d differ)" % (
                    k, ",".join(map(str, i)), gf[i], wf[i], name, rtol, atol, int(bad.sum()),
                    bad.size)
        elif not np.array_equal(g, w):
            i = np.unravel_index(int(np.argmax(g != w)), w.shape) if w.ndim else ()
            return "%s[%s]: %r, unoptimized %r (%s, exact)" % (
                k, ",".join(map(str, i)), g[i], w[i], name)
    return None


NUM = re.compile(r"(?<![\w.%@])(-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan))(f16|f64|bf16|f|i8|i16|i64|"
                 r"u8|u16|u32|u64)?(?![\w.])")


def compare_text(got, want):
    """Printed results: the same text once numbers are masked, and numbers within float32's
    tolerance."""
    if NUM.sub("#", got) != NUM.sub("#", want):
        return "printed %r, unoptimized %r" % (got[:300], want[:300])
    rtol, atol = TOL["float32"]
    for g, w in zip(NUM.findall(got), NUM.findall(want)):
        a, b = float(g[0]), float(w[0])
        if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol + rtol * abs(b)):
            return "printed %s, unoptimized %s" % (g[0] + g[1], w[0] + w[1])
    return None


def check(rly, opt, passes, seed, name, text, work, engine=None, exact=False):
    """('pass' | 'fail' | 'skip', name, why). opt: the level; passes: a pipeline instead;
    engine: the optimized side's engine (the reference side is always the interpreter)."""
    slug = re.sub(r"[^\w.]+", "_", name)
    src = os.path.join(work, slug + ("" if slug.endswith(".rly") else ".rly"))
    with open(src, "w") as f:
        f.write(text)
    base = ["--fill", "random", "--seed", str(seed), "--engine", "interp"]
    out0, outn = os.path.join(work, slug + ".O0.npz"), os.path.join(work, slug + ".On.npz")
    prelude = []
    rc, so, se = run(rly, src, base + ["--output", out0, "--timeout", str(TIMEOUT_O0)], TIMEOUT_O0)
    if rc != 0 and re.search(r"unknown|never defined|not defined", se):  # the prelude's?
        rc2, so2, se2 = run(rly, src, base + ["--prelude", "--output", out0, "--timeout",
                                              str(TIMEOUT_O0)], TIMEOUT_O0)
        if rc2 == 0 or "holds a function" in se2:
            rc, so, se, prelude = rc2, so2, se2, ["--prelude"]
    printed = rc != 0 and "holds a function" in se
    if printed:  # compare the printed results instead
        rc, so, se = run(rly, src, base + prelude + ["--timeout", str(TIMEOUT_O0)], TIMEOUT_O0)
    if rc != 0:
        return "skip", name, "does not run at -O0: " + first_line(se)
    want = so
    ext, osrc, what = ["-O%d" % opt, "--timeout", str(TIMEOUT_ON)], src, "-O%d" % opt
    if engine == "rlyx":  # save -> load -> run: `rly compile`, then `rly run X.rlyx`
        base = base[:-2]
        what += " via .rlyx"
    elif engine:
        base = base[:-2] + ["--engine", engine]
        what += " --engine " + engine
    if passes:
        osrc, what = src[:-4] + ".opt.rly", passes
        p = subprocess.run([rly, "opt", src, "--passes", passes, "--verify", "-o", osrc] + prelude,
                           capture_output=True, text=True, errors="replace")
        if p.returncode != 0:
            return "fail", name, "%s fails: %s" % (passes, first_line(p.stderr))
        # the output holds the prelude; -O0: it is optimized already
        ext, prelude = ["-O0", "--timeout", str(TIMEOUT_ON)], []
        what = passes + (" --engine " + engine if engine else "")
    if engine == "rlyx":
        exe = osrc[:-4] + ".rlyx"
        opts = ["-O0"] if passes else ["-O%d" % opt]
        p = subprocess.run([rly, "compile", osrc, "-o", exe] + opts + prelude, capture_output=True,
                           text=True, errors="replace")
        if p.returncode != 0:
            return "fail", name, "rly compile fails: %s" % first_line(p.stderr)
        osrc, ext, prelude = exe, ["--timeout", str(TIMEOUT_ON)], []  # no -O for an .rlyx
    if printed:
        rc, got, se = run(rly, osrc, base + prelude + ext, TIMEOUT_ON)
    else:
        rc, got, se = run(rly, osrc, base + prelude + ext + ["--output", outn], TIMEOUT_ON)
    if rc != 0:
        return "fail", name, "runs at -O0 but not after %s: %s" % (what, first_line(se))
    if printed:
        why = compare_text(got.strip(), want.strip())
    else:
        with np.load(outn) as g, np.load(out0) as w:
            why = compare_arrays(g, w, exact)
    return ("fail", name, why) if why else ("pass", name, "")


def gradients(rly, progs, work):
    """The gradient (higher-order mode) of every autodiff program that has one."""
    out = []
    for name, text in progs:
        if not name.startswith("tests/autodiff/"):
            continue
        src = os.path.join(work, "grad_src_" + os.path.basename(name))
        dst = os.path.join(work, "grad_" + os.path.basename(name))
        with open(src, "w") as f:
            f.write(text)
        for pre in ([], ["--prelude"]):
            p = subprocess.run([rly, "grad", src, "-o", dst] + pre, capture_output=True,
                               text=True, errors="replace")
            if p.returncode == 0:
                with open(dst) as f:
                    out.append((name + " (gradient)", f.read()))
                break
    return out


def main():
    args = sys.argv[1:]
    opt, passes, only, listing, engine, exact = 3, None, None, False, None, False
    rly = None
    i = 0
    while i < len(args):
        if args[i] == "-O":
            opt, i = int(args[i + 1]), i + 2
        elif args[i].startswith("-O"):
            opt, i = int(args[i][2:]), i + 1
        elif args[i] == "--passes":
            passes, i = args[i + 1], i + 2
        elif args[i] == "--only":
            only, i = args[i + 1], i + 2
        elif args[i] == "--engine":
            engine, i = args[i + 1], i + 2
        elif args[i] == "--exact":
            exact, i = True, i + 1
        elif args[i] == "--list":
            listing, i = True, i + 1
        else:
            rly, i = args[i], i + 1
    if rly is None:
        sys.exit("usage: diff_opt.py RLY [-O N | --passes P] [--engine vm|interp] [--exact] "
                 "[--only SUBSTRING] [--list]")
    seed = int(os.environ.get("RLY_SEED", "1"))
    print("seed %d (RLY_SEED=%d replays it); -O0 against %s%s%s" %
          (seed, seed, passes or "-O%d" % opt, " --engine " + engine if engine else "",
           " (exact)" if exact else ""), flush=True)
    with tempfile.TemporaryDirectory() as work:
        progs = corpus()
        progs += gradients(rly, progs, work)
        if only:
            progs = [p for p in progs if only in p[0]]
        if listing:
            print("\n".join(p[0] for p in progs))
            return
        counts = {"pass": 0, "fail": 0, "skip": 0}
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = pool.map(
                lambda p: check(rly, opt, passes, seed, p[0], p[1], work, engine, exact), progs)
            for status, name, why in results:
                counts[status] += 1
                if status != "pass":
                    print("%s %s: %s" % (status.upper(), name, why), flush=True)
    print("%d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))
    sys.exit(1 if counts["fail"] else 0)


if __name__ == "__main__":
    main()

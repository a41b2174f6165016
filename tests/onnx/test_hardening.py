#!/usr/bin/env python3
"""test_hardening.py RLY [plain|sanitized] - the ONNX frontend against hostile and edge-case
models (issue 13), through the `rly` binary:

  names   graph inputs bind by their ONNX names (a.b and a_b are two inputs), the Relay names are
          injective, `rly import -o` keeps the ONNX names for `rly run FILE.rly`; duplicate
          inputs or initializers and outputs reusing an input's name are located errors; an
          initializer named like an input is its default.
  index   Gather, GatherElements, GatherND, ScatterElements, ScatterND: indices outside
          [-s, s-1] (s, -s-1, 2^62) are run-time errors located at the node, as in onnxruntime;
          indices inside give onnxruntime's values.
  bounds  Resize to an absurd size is a located error at import, never a hang; a large one
          imports at once; graph-input dims past 2^62 are errors.
  scan    nested Scans import in time and memory linear in the model (unrolling multiplied);
          Scan and Scan-8 (directions, axes, outer values, nesting) agree with onnxruntime.
  loop    a Loop's scan outputs are joined once: 10,000 iterations of 1024-float rows in seconds
          (quadratic before: 59 s for 256-float rows); ConcatFromSequence of a run-time list likewise.
  info    `rly info` on a model without nodes.
  rss     (plain builds only: sanitizers inflate memory) peak RSS of `rly info`, `rly run` and
          `rly import -o` on a 64 MB model whose weights are all misaligned in the file, as a
          multiple of the file size (printed; run/info must stay under 1.2x, import -o under 1.5x).

Models are written with the onnx package into a temporary folder; expected values come from
onnxruntime. Prints `FAIL name: why` per failure and closes with `N passed, N failed`."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RLY = sys.argv[1]
PLAIN = len(sys.argv) < 3 or sys.argv[2] != "sanitized"
TMP = tempfile.mkdtemp(prefix="rly_onnx_hard.")
n_pass = n_fail = 0


def check(name, ok, why=""):
    global n_pass, n_fail
    if ok:
        n_pass += 1
    else:
        n_fail += 1
        print("FAIL %s: %s" % (name, why))
    return ok


def path(name):
    return os.path.join(TMP, name)


def run(*args, timeout=60, mem_mb=None):
    """rly ARGS with a time limit (and an address-space limit): (rc, stdout, stderr)."""
    def limit():
        if mem_mb and PLAIN:  # ASan reserves terabytes of address space for its shadow
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    try:
        p = subprocess.run([RLY] + list(args), capture_output=True, text=True, timeout=timeout,
                           preexec_fn=limit)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out after %d s" % timeout


def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def save(name, nodes, inputs, outputs, inits=(), opset=13, ir=8):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir
    p = path(name + ".onnx")
    onnx.save(m, p)
    return p


def npz(name, **arrays):
    p = path(name + ".npz")
    np.savez(p, **arrays)
    return p


def npy(name, a):
    p = path(name + ".npy")
    np.save(p, a)
    return p


def outputs(p):
    """The arrays of an output .npz in order (named by the model's ONNX output names)."""
    z = np.load(p)
    return [z[k] for k in z.files]


def located(err, model):
    """The first line is model:LINE:COL: error: ..."""
    first = err.splitlines()[0] if err else ""
    parts = first.split(":")
    return len(parts) > 3 and parts[0] == model and parts[1].isdigit() and parts[2].isdigit() \
        and parts[3] == " error"


def run_values(name, model, feeds, **kw):
    """rly run model with feeds (an .npz keyed by input names): (rc, outputs, stderr)."""
    out = path(name + "_out.npz")
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = run("run", model, "--inputs", npz(name + "_in", **feeds), "--output", out, **kw)
    return rc, (outputs(out) if rc == 0 else None), err


def session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 4  # its errors on the bad-index runs are expected
    return ort.InferenceSession(model, so)


def same_as_ort(name, model, feeds, want=None, **kw):
    if want is None:
        want = session(model).run(None, feeds)
    rc, got, err = run_values(name, model, feeds, **kw)
    if not check(name, rc == 0, "rly run failed: %s" % err[:600]):
        return
    ok = len(got) == len(want) and all(
        g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want))
    check(name + ".values", ok, "got %s, want %s" % ([g.shape for g in got], [w.shape for w in want]))


# ==== names =====================================================================================

def test_names():
    a = np.array([1, 2], np.float32)
    b = np.array([10, 20], np.float32)
    c = np.array([100, 200], np.float32)
    d = np.array([2, 3], np.float32)
    want = ((a - b) + c) * d
    m = save("names", [h.make_node("Sub", ["a.b", "a_b"], ["t"]), h.make_node("Add", ["t", "a_b_1"], ["u"]),
                       h.make_node("Mul", ["u", "0x"], ["y"])],
             [vi("a.b", [2]), vi("a_b", [2]), vi("a_b_1", [2]), vi("0x", [2])], [vi("y", [2])])
    feeds = {"a.b": a, "a_b": b, "a_b_1": c, "0x": d}
    rc, got, err = run_values("names_npz", m, feeds)
    check("names.npz", rc == 0 and np.array_equal(got[0], want), "%s %s" % (got, err[:300]))
    args = []
    for k, v in feeds.items():
        args += ["--input", "%s=%s" % (k, npy("names_" + k.replace(".", "dot"), v))]
    out = path("names_cli.npz")
    rc, _, err = run("run", m, *args, "--output", out)
    check("names.input", rc == 0 and np.array_equal(outputs(out)[0], want), err[:300])
    # the Relay names: plain ONNX names kept, the others renamed to free names
    rc, text, err = run("import", m)
    head = text.split("def @main(")[1].split("{")[0] if rc == 0 else ""
    params = [p.split(":")[0].strip() for p in head.split(", %")]
    params = [p.lstrip("%") for p in params if not p.startswith("onnx_input_names")]
    check("names.relay", params == ["a_b_2", "a_b", "a_b_1", "v0x"], "parameters %s" % params)
    check("names.attr", 'onnx_input_names=["a.b", "a_b", "a_b_1", "0x"]' in text, head)
    rly_feeds = dict(zip(params, feeds.values())) if len(params) == 4 else {}
    rc, got, err = run_values("names_relay", m, rly_feeds)
    check("names.relay_bind", rc == 0 and np.array_equal(got[0], want), err[:300])
    # import -o keeps the ONNX names: the .rly binds by them too
    rly_file = path("names.rly")
    rc, _, err = run("import", m, "-o", rly_file)
    check("names.import_o", rc == 0, err[:300])
    out = path("names_rly.npz")
    rc, _, err = run("run", rly_file, "--inputs", path("names_npz_in.npz"), "--output", out)
    check("names.rly_bind", rc == 0 and np.array_equal(outputs(out)[0], want), err[:300])
    # names with a quote, a backslash and a tab survive import -o: the text re-parses and binds
    qnames = ['q"t', "b\\", "t\tab"]
    qm = save("names_quote", [h.make_node("Sum", qnames, ["y"])], [vi(n, [2]) for n in qnames],
              [vi("y", [2])])
    qfeeds = {n: a + i for i, n in enumerate(qnames)}
    rly_file = path("names_quote.rly")
    rc, _, err = run("import", qm, "-o", rly_file)
    check("names.quote_import", rc == 0, err[:300])
    rc, got, err = run_values("names_quote", rly_file, qfeeds)
    check("names.quote_rly_bind", rc == 0 and np.array_equal(got[0], 3 * a + 3), "%s %s" % (got, err[:300]))
    # a name that is no input (it used to match a_b after renaming)
    rc, _, err = run("run", m, "--input", "a-b=" + npy("names_ab", a), "--fill", "zeros")
    check("names.unknown", rc == 1 and "not a parameter" in err, "rc %d: %s" % (rc, err[:300]))
    # clashes
    x = vi("x", [2])
    bad = {
        "dup_input": (save("dup_input", [h.make_node("Relu", ["x"], ["y"])], [x, vi("x", [2])], [vi("y", [2])]),
                      "declared twice"),
        "dup_init": (save("dup_init", [h.make_node("Add", ["x", "w"], ["y"])], [x], [vi("y", [2])],
                          [nh.from_array(a, "w"), nh.from_array(b, "w")]), "given twice"),
        "out_is_input": (save("out_is_input", [h.make_node("Relu", ["y"], ["x"], name="r"),
                                               h.make_node("Relu", ["x"], ["z"])],
                              [x, vi("y", [2])], [vi("z", [2])]), "has the name of an input"),
        "out_is_init": (save("out_is_init", [h.make_node("Relu", ["x"], ["w"], name="r")], [x], [vi("w", [2])],
                             [nh.from_array(a, "w")]), "has the name of an initializer"),
        "out_twice": (save("out_twice", [h.make_node("Relu", ["x"], ["y"]), h.make_node("Neg", ["x"], ["y"])],
                           [x], [vi("y", [2])]), "also produced"),
    }
    for name, (model, msg) in bad.items():
        rc, _, err = run("import", model)
        check("names." + name, rc == 1 and msg in err, "rc %d: %s" % (rc, err[:300]))
        check("names." + name + ".located", located(err, model), err[:300])
    # an initializer named like an input is its default (IR >= 4)
    m = save("init_default", [h.make_node("Add", ["x", "w"], ["y"])], [x, vi("w", [2])], [vi("y", [2])],
             [nh.from_array(b, "w")])
    rc, got, err = run_values("init_default", m, {"x": a})
    check("names.init_default", rc == 0 and np.array_equal(got[0], a + b), err[:300])


# ==== index semantics ===========================================================================

def test_index():
    x4 = np.array([1, 2, 3, 4], np.float32)
    gather = save("gather", [h.make_node("Gather", ["x", "i"], ["y"], name="gat")],
                  [vi("x", [4]), vi("i", [1], T.INT64)], [vi("y", [1])])
    gather32 = save("gather32", [h.make_node("Gather", ["x", "i"], ["y"], name="gat")],
                    [vi("x", [4]), vi("i", [1], T.INT32)], [vi("y", [1])])
    ge = save("gather_elements", [h.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=1)],
              [vi("x", [2, 3]), vi("i", [2, 1], T.INT64)], [vi("y", [2, 1])])
    gnd = save("gather_nd", [h.make_node("GatherND", ["x", "i"], ["y"], name="gnd")],
               [vi("x", [2, 2]), vi("i", [1, 2], T.INT64)], [vi("y", [1])])
    se = save("scatter_elements", [h.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="se")],
              [vi("x", [3]), vi("i", [1], T.INT64), vi("u", [1])], [vi("y", [3])])
    snd = save("scatter_nd", [h.make_node("ScatterND", ["x", "i", "u"], ["y"], name="snd")],
               [vi("x", [4]), vi("i", [1, 1], T.INT64), vi("u", [1])], [vi("y", [4])])
    x23 = np.arange(6, dtype=np.float32).reshape(2, 3)
    x22 = np.arange(4, dtype=np.float32).reshape(2, 2)
    cases = [  # name, model, feeds builder, good indices, bad indices
        ("gather", gather, lambda i: {"x": x4, "i": np.array([i], np.int64)}, [-4, -1, 0, 3], [4, -5, 2**62, -2**63]),
        ("gather32", gather32, lambda i: {"x": x4, "i": np.array([i], np.int32)}, [-4, 3], [4, -5, 2**31 - 1]),
        ("gather_elements", ge, lambda i: {"x": x23, "i": np.array([[i], [0]], np.int64)}, [-3, 2], [3, -4]),
        ("gather_nd", gnd, lambda i: {"x": x22, "i": np.array([[1, i]], np.int64)}, [-2, 1], [2, -3]),
        ("scatter_elements", se, lambda i: {"x": np.zeros(3, np.float32), "i": np.array([i], np.int64),
                                            "u": np.ones(1, np.float32)}, [-3, 2], [3, -4]),
        ("scatter_nd", snd, lambda i: {"x": np.zeros(4, np.float32), "i": np.array([[i]], np.int64),
                                       "u": np.ones(1, np.float32)}, [-4, 3], [4, -5]),
    ]
    sess_err = {}
    for name, model, feeds, good, badi in cases:
        for i in good:
            same_as_ort("index.%s[%d]" % (name, i), model, feeds(i))
        for i in badi:
            tag = "index.%s[%d]" % (name, i)
            try:  # onnxruntime rejects these too (when it checks: it is the reference)
                session(model).run(None, feeds(i))
                sess_err[tag] = False
            except Exception:
                sess_err[tag] = True
            rc, got, err = run_values(tag.replace("[", "_").replace("]", ""), model, feeds(i))
            check(tag, rc == 1 and "out of range" in err,
                  "rc %d, %s: %s (onnxruntime %s)" % (rc, got, err[:300],
                                                      "fails" if sess_err[tag] else "runs"))
            check(tag + ".located", located(err, model), err[:300])


# ==== importer bounds ===========================================================================

def resize_model(name, scales=None, sizes=None):
    inits = [nh.from_array(np.array([], np.float32), "roi")]
    if scales is not None:
        inits.append(nh.from_array(np.array(scales, np.float32), "scales"))
    else:
        inits.append(nh.from_array(np.array([], np.float32), "scales"))
        inits.append(nh.from_array(np.array(sizes, np.int64), "sizes"))
    ins = ["x"] + [t.name for t in inits]
    return save(name, [h.make_node("Resize", ins, ["y"], name="rs", mode="nearest")],
                [vi("x", [1, 1, 2, 2])], [vi("y", None)], inits)


def test_bounds():
    for name, kw in [("scale_1e30", {"scales": [1, 1, 1e30, 1e30]}), ("scale_inf", {"scales": [1, 1, np.inf, 1]}),
                     ("sizes_max", {"sizes": [1, 1, 2**63 - 1, 1]}), ("sizes_2p62x2", {"sizes": [1, 1, 2**62, 2**62]})]:
        m = resize_model("resize_" + name, **kw)
        rc, _, err = run("import", m, timeout=30)
        check("bounds.resize_" + name, rc == 1 and "2^62" in err, "rc %d: %s" % (rc, err[:300]))
        check("bounds.resize_" + name + ".located", located(err, m), err[:300])
    for name, kw in [("scale_1e9", {"scales": [1, 1, 1e9, 1e9]}), ("sizes_1e9", {"sizes": [1, 1, 10**9, 10**9]})]:
        m = resize_model("resize_" + name, **kw)
        rc, _, err = run("import", m, timeout=30)
        check("bounds.resize_" + name, rc == 0, "rc %d: %s" % (rc, err[:300]))
    m = save("big_dim", [h.make_node("Relu", ["x"], ["y"])], [vi("x", [2**62 + 1])], [vi("y", None)])
    rc, _, err = run("import", m)
    check("bounds.input_dim", rc == 1 and "2^62" in err, "rc %d: %s" % (rc, err[:300]))
    m = save("shapes_dim", [h.make_node("Relu", ["x"], ["y"])], [vi("x", ["n"])], [vi("y", None)])
    rc, _, err = run("import", m, "--input-shapes", "x:[9223372036854775807]")
    check("bounds.input_shapes_dim", rc == 1 and "2^62" in err, "rc %d: %s" % (rc, err[:300]))


# ==== Scan ======================================================================================

def nested_scans(name, depth, n):
    """Scans nested depth + 1 deep, each over n steps, summing every element into a scalar."""
    body = h.make_graph([h.make_node("Add", ["s0", "x0"], ["o0"])], "b0", [vi("s0", []), vi("x0", [])],
                        [vi("o0", [])])
    for d in range(1, depth + 1):
        body = h.make_graph([h.make_node("Scan", ["s%d" % d, "x%d" % d], ["o%d" % d], num_scan_inputs=1,
                                         body=body)], "b%d" % d,
                            [vi("s%d" % d, []), vi("x%d" % d, [n] * d)], [vi("o%d" % d, [])])
    return save(name, [h.make_node("Scan", ["s", "X"], ["out"], num_scan_inputs=1, body=body)],
                [vi("s", []), vi("X", [n] * (depth + 1))], [vi("out", [])], opset=11, ir=7)


def test_scan():
    # 8^7 steps unrolled took minutes and gigabytes; a function per Scan is linear in the model
    m = nested_scans("nested_big", 6, 8)
    rc, _, err = run("import", m, timeout=60, mem_mb=2048)
    check("scan.nested_import", rc == 0, "rc %d: %s" % (rc, err[:300]))
    m = nested_scans("nested_small", 3, 4)
    rc, got, err = run_values("nested_small", m, {"s": np.array(1, np.float32),
                                                 "X": np.ones([4] * 4, np.float32)})
    check("scan.nested_run", rc == 0 and got[0] == 257, "%s %s" % (got, err[:300]))
    rng = np.random.default_rng(0)
    # reversed input, output along axis 1 and reversed, an outer value read by the body
    body = h.make_graph([h.make_node("Add", ["s_in", "x"], ["t"]), h.make_node("Mul", ["t", "w"], ["s_out"]),
                         h.make_node("Identity", ["s_out"], ["y"])], "b",
                        [vi("s_in", [3]), vi("x", [3])], [vi("s_out", [3]), vi("y", [3])])
    m = save("scan_dirs", [h.make_node("Scan", ["s0", "xs"], ["sf", "ys"], num_scan_inputs=1, body=body,
                                       scan_input_directions=[1], scan_output_axes=[1],
                                       scan_output_directions=[1])],
             [vi("s0", [3]), vi("xs", [5, 3]), vi("w", [3])], [vi("sf", [3]), vi("ys", [3, 5])], opset=11, ir=7)
    same_as_ort("scan.dirs", m, {"s0": rng.random(3, np.float32), "xs": rng.random((5, 3), np.float32),
                                 "w": rng.random(3, np.float32)})
    # two scan inputs along different axes, a length known only at run time, negative output axis
    body = h.make_graph([h.make_node("Add", ["a", "b"], ["c"]), h.make_node("Add", ["s_in", "c"], ["s_out"]),
                         h.make_node("Mul", ["a", "b"], ["d"])], "b",
                        [vi("s_in", [2]), vi("a", [2]), vi("b", [2])], [vi("s_out", [2]), vi("c", [2]), vi("d", [2])])
    m = save("scan_axes", [h.make_node("Scan", ["s0", "A", "B"], ["sf", "cs", "ds"], num_scan_inputs=2, body=body,
                                       scan_input_axes=[1, 0], scan_output_axes=[-1, 0])],
             [vi("s0", [2]), vi("A", [2, "n"]), vi("B", ["n", 2])],
             [vi("sf", [2]), vi("cs", [2, "n"]), vi("ds", ["n", 2])], opset=11, ir=7)
    for n in (7, 1):
        same_as_ort("scan.axes_%d" % n, m, {"s0": rng.random(2, np.float32), "A": rng.random((2, n), np.float32),
                                            "B": rng.random((n, 2), np.float32)})
    s0 = rng.random(2, np.float32)  # no steps (onnxruntime 1.x divides by zero here)
    same_as_ort("scan.axes_0", m, {"s0": s0, "A": np.zeros((2, 0), np.float32), "B": np.zeros((0, 2), np.float32)},
                want=[s0, np.zeros((2, 0), np.float32), np.zeros((0, 2), np.float32)])
    # a Scan inside a Scan's body, the inner body reading a value of the main graph
    inner = h.make_graph([h.make_node("Add", ["is_in", "e"], ["t"]), h.make_node("Add", ["t", "bias"], ["is_out"]),
                          h.make_node("Identity", ["is_out"], ["iy"])], "ib",
                         [vi("is_in", []), vi("e", [])], [vi("is_out", []), vi("iy", [])])
    outer = h.make_graph([h.make_node("Scan", ["os_in", "row"], ["inner_s", "inner_y"], num_scan_inputs=1,
                                      body=inner), h.make_node("Identity", ["inner_s"], ["os_out"])], "ob",
                         [vi("os_in", []), vi("row", [4])], [vi("os_out", []), vi("inner_y", [4])])
    m = save("scan_nested", [h.make_node("Scan", ["z", "M"], ["zf", "Y"], num_scan_inputs=1, body=outer)],
             [vi("z", []), vi("M", [3, 4]), vi("bias", [])], [vi("zf", []), vi("Y", [3, 4])], opset=11, ir=7)
    same_as_ort("scan.nested", m, {"z": np.array(0.5, np.float32), "M": rng.random((3, 4), np.float32),
                                   "bias": np.array(0.25, np.float32)})
    # Scan-8: a batch axis, reversed direction
    body = h.make_graph([h.make_node("Add", ["s_in", "x"], ["s_out"]), h.make_node("Identity", ["s_out"], ["y"])],
                        "b", [vi("s_in", [2]), vi("x", [2])], [vi("s_out", [2]), vi("y", [2])])
    m = save("scan8", [h.make_node("Scan", ["", "s0", "xs"], ["sf", "ys"], num_scan_inputs=1, body=body,
                                   directions=[1])],
             [vi("s0", [2, 2]), vi("xs", [2, 3, 2])], [vi("sf", [2, 2]), vi("ys", [2, 3, 2])], opset=8, ir=7)
    same_as_ort("scan.scan8", m, {"s0": rng.random((2, 2), np.float32), "xs": rng.random((2, 3, 2), np.float32)})


# ==== Loop and run-time sequences ===============================================================

def test_loop():
    e = 1024
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Cast", ["iter"], ["itf"], to=T.FLOAT),
                         h.make_node("Add", ["x_in", "one"], ["x_out"]),
                         h.make_node("Mul", ["x_in", "itf"], ["row"])], "body",
                        [vi("iter", [], T.INT64), vi("cond_in", [], T.BOOL), vi("x_in", [e])],
                        [vi("cond_out", [], T.BOOL), vi("x_out", [e]), vi("row", [e])],
                        [nh.from_array(np.array(1, np.float32), "one")])
    m = save("loop", [h.make_node("Loop", ["M", "cond", "x0"], ["xf", "ys"], name="loop", body=body)],
             [vi("M", [], T.INT64), vi("cond", [], T.BOOL), vi("x0", [e])], [vi("xf", [e]), vi("ys", [None, e])])
    x0 = np.arange(e, dtype=np.float32)
    for n in (1, 3, 100):
        same_as_ort("loop.rows_%d" % n, m, {"M": np.array(n, np.int64), "cond": np.array(True), "x0": x0})
    n = 10000
    rc, got, err = run_values("loop_10000", m, {"M": np.array(n, np.int64), "cond": np.array(True), "x0": x0},
                              timeout=60)
    i = np.arange(n, dtype=np.float32)[:, None]
    ok = rc == 0 and got[1].shape == (n, e) and np.array_equal(got[1], (x0[None, :] + i) * i)
    check("loop.rows_10000", ok, "rc %d: %s" % (rc, err[:300]))
    # ConcatFromSequence of a list known only at run time (a split length given as an input)
    for new_axis in (0, 1):
        m = save("concat_seq_%d" % new_axis,
                 [h.make_node("SplitToSequence", ["x", "k"], ["s"], axis=0, keepdims=1),
                  h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=new_axis)],
                 [vi("x", [12, 3]), vi("k", [], T.INT64)], [vi("y", None)])
        same_as_ort("loop.concat_from_sequence_%d" % new_axis, m,
                    {"x": np.arange(36, dtype=np.float32).reshape(12, 3), "k": np.array(1 if new_axis else 5, np.int64)})


# ==== rly info ==================================================================================

def test_info():
    m = save("no_nodes", [], [vi("x", [2])], [vi("x", [2])])
    rc, out, err = run("info", m)
    check("info.no_nodes", rc == 0 and "nodes: 0" in out, "rc %d: %s" % (rc, err[:300]))


# ==== peak RSS on misaligned weights ============================================================

def misaligned_model(name, total_mb, n):
    """n float32 initializers of total_mb MB in all, each raw_data at an offset not a multiple of 4
    (a leading 1-dim moves a tensor's bytes, and only the later tensors', by one byte)."""
    per = total_mb * (1 << 20) // 4 // n
    rng = np.random.default_rng(1)
    ws = [rng.random(per, dtype=np.float32) for _ in range(n)]

    def build(pads):
        inits = [nh.from_array(w.reshape([1] * pads[i] + [per]), "w%d" % i) for i, w in enumerate(ws)]
        nodes = [h.make_node("Gather", ["w%d" % i, "idx"], ["y%d" % i], axis=-1) for i in range(n)]
        g = h.make_graph(nodes, "g", [vi("idx", [1], T.INT64)], [vi("y%d" % i, None) for i in range(n)], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
        m.ir_version = 8
        return m.SerializeToString()
    pads = [0] * n
    for i in range(n):
        while True:
            b = build(pads)
            if b.find(ws[i][:16].tobytes()) % 4 != 0:
                break
            pads[i] += 1
    p = path(name + ".onnx")
    with open(p, "wb") as f:
        f.write(b)
    return p


def peak_rss(*args):
    """(rc, peak RSS in bytes) of rly ARGS, by GNU time: a child forked from this process would
    count this process's memory (the kernel keeps the forked image's peak across exec)."""
    p = subprocess.run(["/usr/bin/time", "-f", "RSS %M", RLY] + list(args), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    kb = [int(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("RSS ")]
    return p.returncode, (kb[-1] * 1024 if kb else 0)


def test_rss():
    if not PLAIN:
        print("rss: skipped (sanitized build: ASan's shadow memory and quarantine inflate RSS)")
        return
    if not os.access("/usr/bin/time", os.X_OK):
        print("rss: skipped (no /usr/bin/time to measure with)")
        return
    m = misaligned_model("misaligned", 64, 4)
    size = os.path.getsize(m)
    idx = npy("idx", np.array([3], np.int64))
    for what, args, limit in [("info", ["info", m], 1.2), ("run", ["run", m, "--input", "idx=" + idx], 1.2),
                              ("import_o", ["import", m, "-o", path("misaligned.rly")], 1.5)]:
        rc, rss = peak_rss(*args)
        ratio = rss / size
        print("rss: rly %-9s peak %6.1f MB for a %.1f MB file: %.2fx (limit %.1fx)"
              % (what, rss / 2**20, size / 2**20, ratio, limit))
        check("rss." + what, rc == 0 and ratio <= limit, "rc %d, %.2fx the file size" % (rc, ratio))


for t in (test_names, test_index, test_bounds, test_scan, test_loop, test_info, test_rss):
    t()
print("%d passed, %d failed" % (n_pass, n_fail))
subprocess.run(["rm", "-rf", TMP])
sys.exit(1 if n_fail else 0)

"""test_lang.py - the language through the interpreter: closures, higher-order functions, the
prelude's list and tree functions, reference cells, recursion (mutual, let-bound, deep), tuples,
match with nested patterns, polymorphism, if; results compared as printed text or as arrays."""
import numpy as np
import pytest

from harness import RlyError, run_relay, run_text

HDR = '#[version = "0.0.5"]\n'


def prog(body):
    return HDR + body


def printed(text, *extra, **kw):
    return run_text(text, *extra, **kw).strip()


# ---- closures and higher-order functions -------------------------------------------------------

CASES = [
    # (name, program, uses prelude, expected printed result)
    ("closure_captures", """
def @main() {
  let %x = 10;
  let %add_x = fn (%y: int32) { add(%x, %y) };
  let %x2 = 100;
  (%add_x(1), %add_x(%x2))
}""", False, "(11, 110)"),
    ("closure_returned", """
def @adder(%n: int32) -> fn (int32) -> int32 { fn (%m: int32) { add(%n, %m) } }
def @main() { let %a = @adder(5); let %b = @adder(7); (%a(1), %b(1), @adder(3)(3)) }""",
     False, "(6, 8, 6)"),
    ("higher_order_compose", """
def @main() {
  let %inc = fn (%x: int32) { add(%x, 1) };
  let %dbl = fn (%x: int32) { multiply(%x, 2) };
  (@compose(%inc, %dbl)(5), @compose(%dbl, %inc)(5))
}""", True, "(11, 12)"),
    ("closure_in_closure", """
def @main() {
  let %a = 1;
  let %f = fn (%b: int32) { fn (%c: int32) { add(add(%a, %b), %c) } };
  let %g = %f(10);
  %g(100)
}""", False, "111"),
    ("partial_application_by_closure", """
def @main() {
  let %mul = fn (%a: int32, %b: int32) { multiply(%a, %b) };
  let %triple = fn (%x: int32) { %mul(3, %x) };
  @map(%triple, Cons(1, Cons(2, Cons(3, Nil))))
}""", True, "Cons(3, Cons(6, Cons(9, Nil)))"),
    ("flip", """
def @main() { @flip(fn (%a: int32, %b: int32) { subtract(%a, %b) })(1, 10) }""", True, "9"),
    ("identity_polymorphic", """
def @main() { (@id(1), @id(2.5f), @id((1, 2)), @id(Cons(1, Nil))) }""", True,
     "(1, 2.5f, (1, 2), Cons(1, Nil))"),
    # ---- the prelude on lists ----
    ("map", """
def @main() { @map(fn (%x: int32) { multiply(%x, %x) }, Cons(1, Cons(2, Cons(3, Nil)))) }""",
     True, "Cons(1, Cons(4, Cons(9, Nil)))"),
    ("foldl", """
def @main() { @foldl(fn (%acc: int32, %x: int32) { subtract(%acc, %x) }, 100, Cons(1, Cons(2, Cons(3, Nil)))) }""",
     True, "94"),
    ("foldr", """
def @main() { @foldr(fn (%x: int32, %acc: int32) { subtract(%x, %acc) }, 0, Cons(1, Cons(2, Cons(3, Nil)))) }""",
     True, "2"),
    ("filter", """
def @main() { @filter(fn (%x: int32) { greater(%x, 2) }, Cons(1, Cons(5, Cons(2, Cons(7, Nil))))) }""",
     True, "Cons(5, Cons(7, Nil))"),
    ("zip", """
def @main() { @zip(Cons(1, Cons(2, Nil)), Cons(True, Cons(False, Nil))) }""", True,
     "Cons((1, True), Cons((2, False), Nil))"),
    ("rev", """
def @main() { @rev(Cons(1, Cons(2, Cons(3, Nil)))) }""", True, "Cons(3, Cons(2, Cons(1, Nil)))"),
    ("length_nth_hd_tl", """
def @main() {
  let %l = Cons(4, Cons(5, Cons(6, Nil)));
  (@length(%l), @nth(%l, 2), @hd(%l), @tl(%l))
}""", True, "(3, 6, 4, Cons(5, Cons(6, Nil)))"),
    ("concat_sum_update", """
def @main() {
  let %l = @concat(Cons(1, Cons(2, Nil)), Cons(3, Nil));
  (@sum(%l), @update(%l, 1, 20))
}""", True, "(6, Cons(1, Cons(20, Cons(3, Nil))))"),
    ("iterate", """
def @main() { @iterate(fn (%x: int32) { multiply(%x, 2) }, 10)(1) }""", True, "1024"),
    ("unfoldr", """
def @main() {
  @unfoldr(fn (%n: int32) { if (equal(%n, 0)) { None } else { Some((subtract(%n, 1), %n)) } }, 3)
}""", True, "Cons(3, Cons(2, Cons(1, Nil)))"),
    ("map_accuml", """
def @main() {
  @map_accuml(fn (%acc: int32, %x: int32) { (add(%acc, %x), multiply(%acc, %x)) }, 0, Cons(1, Cons(2, Cons(3, Nil))))
}""", True, "(6, Cons(0, Cons(2, Cons(9, Nil))))"),
    # ---- trees ----
    ("tmap_size", """
def @main() {
  let %t = Rose(1, Cons(Rose(2, Nil), Cons(Rose(3, Cons(Rose(4, Nil), Nil)), Nil)));
  (@tmap(fn (%x: int32) { multiply(%x, 10) }, %t), @size(%t))
}""", True, "(Rose(10, Cons(Rose(20, Nil), Cons(Rose(30, Cons(Rose(40, Nil), Nil)), Nil))), 4)"),
    ("nat", """
def @main() { (@nat_to_int32(@nat_add(@int32_to_nat(3), @int32_to_nat(4))), @nat_to_int32(@nat_double(@int32_to_nat(5)))) }""",
     True, "(7, 10)"),
    # ---- references ----
    ("counter_closure", """
def @counter() -> fn () -> int32 {
  let %r = ref(0);
  fn () -> int32 { ref_write(%r, add(ref_read(%r), 1)); ref_read(%r) }
}
def @main() {
  let %c = @counter();
  let %d = @counter();
  let %a = %c();
  let %b = %c();
  let %e = %d();
  (%a, %b, %c(), %e)
}""", False, "(1, 2, 3, 1)"),
    ("ref_of_tuple", """
def @main() {
  let %r = ref((1, 2));
  ref_write(%r, (ref_read(%r).1, ref_read(%r).0));
  ref_read(%r)
}""", False, "(2, 1)"),
    ("ref_holding_closure_cycle", """
def @main() {
  let %r = ref(fn (%x: int32) -> int32 { %x });
  let %f = fn (%x: int32) -> int32 { if (equal(%x, 0)) { 0 } else { add(1, ref_read(%r)(subtract(%x, 1))) } };
  ref_write(%r, %f);
  %f(10)
}""", False, "10"),
    # ---- recursion ----
    ("mutual_recursion", """
def @is_even(%n: int32) -> bool { if (equal(%n, 0)) { True } else { @is_odd(subtract(%n, 1)) } }
def @is_odd(%n: int32) -> bool { if (equal(%n, 0)) { False } else { @is_even(subtract(%n, 1)) } }
def @main() { (@is_even(10), @is_odd(7), @is_even(100001)) }""", False, "(True, True, False)"),
    ("let_recursion", """
def @main() {
  let %fact = fn (%n: int64) -> int64 { if (less_equal(%n, 1i64)) { 1i64 } else { multiply(%n, %fact(subtract(%n, 1i64))) } };
  %fact(20i64)
}""", False, "2432902008176640000i64"),
    ("deep_recursion", """
def @count(%n: int32) -> int32 { if (equal(%n, 0)) { 0 } else { add(1, @count(subtract(%n, 1))) } }
def @main() { @count(1000000) }""", False, "1000000"),
    ("fib", """
def @fib(%n: int32) -> int32 { if (less(%n, 2)) { %n } else { add(@fib(subtract(%n, 1)), @fib(subtract(%n, 2))) } }
def @main() { @fib(20) }""", False, "6765"),
    # ---- match ----
    ("nested_patterns", """
def @f(%l: List[(int32, Option[int32])]) -> int32 {
  match (%l) {
    Cons((%a, Some(%b)), Cons(_, _)) => add(%a, %b),
    Cons((%a, None), _) => %a,
    Cons((_, Some(%b)), Nil) => %b,
    Nil => -1,
  }
}
def @main() {
  (@f(Cons((1, Some(2)), Cons((0, None), Nil))), @f(Cons((5, None), Nil)), @f(Cons((5, Some(9)), Nil)), @f(Nil))
}""", True, "(3, 5, 9, -1)"),
    ("match_tuple_pattern", """
def @main() { match ((1, (2, 3))) { (%a, (_, %c)) => add(%a, %c) } }""", False, "4"),
    # ---- tuples, if, shared nodes ----
    ("tuple_get_item", """
def @main() { let %t = (1, (2.5f, True)); (%t.1.0, %t.1.1, %t.0) }""", False, "(2.5f, True, 1)"),
    ("if_on_data", """
def @main(%x: Tensor[(), float32]) { if (greater(%x, 0f)) { multiply(%x, 2f) } else { negative(%x) } }""",
     False, "2f"),
]


@pytest.mark.parametrize("name,text,prelude,want", CASES, ids=[c[0] for c in CASES])
def test_program(name, text, prelude, want):
    extra = ["--prelude"] if prelude else []
    if "%x: Tensor[(), float32]" in text:
        extra += ["--fill", "ones"]
    assert printed(prog(text), *extra) == want


def test_tensor_program_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((3, 8)).astype(np.float32)
    text = prog("""
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(3, 8), float32]) {
  let %h = nn.dense(%x, %w);
  let %m = fn (%t: Tensor[(4, 3), float32]) { maximum(%t, 0f) };
  (%m(%h), sum(%h))
}""")
    out = run_relay(text, {"x": x, "w": w})
    h = x @ w.T
    np.testing.assert_allclose(out[0], np.maximum(h, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], h.sum(), rtol=1e-4, atol=1e-4)


def test_shared_node_evaluated_once():
    # %0 is a graph-form shared node: a reference write inside it must happen once.
    text = prog("""
def @main() {
  let %r = ref(0);
  %0 = ref_write(%r, add(ref_read(%r), 1));
  let %a = (%0, %0);
  ref_read(%r)
}""")
    assert printed(text) == "1"


def test_output_flattening():
    # ADT and tuple outputs flatten depth-first into output_0, output_1, ...
    text = prog("""
def @main() { (Cons(1, Cons(2, Nil)), (3f, Some(4i64))) }""")
    out = run_text_outputs(text)
    assert [o.item() for o in out] == [1, 2, 3.0, 4]
    assert [o.dtype for o in out] == [np.int32, np.int32, np.float32, np.int64]


def run_text_outputs(text):
    import os
    import tempfile
    from harness import RLY
    import subprocess
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "p.rly")
        open(src, "w").write(text)
        p = subprocess.run([RLY, "run", "--prelude", src, "--output", os.path.join(d, "o.npz")],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        with np.load(os.path.join(d, "o.npz")) as z:
            return [z["output_%d" % i] for i in range(len(z.files))]


def test_runtime_error_located():
    text = prog("""
def @main() {
  match? (Cons(1, Nil)) {
    Nil => 0,
  }
}""")
    with pytest.raises(RlyError) as e:
        printed(text, "--prelude")
    assert "prog.rly:4:3: error: no clause of this match accepts the value" in e.value.stderr


def test_any_dims_inconsistent_at_run_time():
    text = prog("""
def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?, 3), float32]) {
  add(%x, %y)
}""")
    x = np.ones((2, 3), np.float32)
    out = run_relay(text, {"x": x, "y": x})
    np.testing.assert_array_equal(out[0], 2 * x)
    with pytest.raises(RlyError) as e:
        run_relay(text, {"x": x, "y": np.ones((4, 3), np.float32)})
    assert "prog.rly:4:3: error: add: shapes (2, 3) and (4, 3) are not broadcastable" in e.value.stderr


def test_symbolic_dims_bind_consistently():
    text = prog("""
def @main(%x: Tensor[(n, 3), float32], %y: Tensor[(n, 3), float32]) {
  subtract(%x, %y)
}""")
    with pytest.raises(RlyError) as e:
        run_relay(text, {"x": np.ones((2, 3), np.float32), "y": np.ones((4, 3), np.float32)})
    assert "input y: dimension 0 is 4 but n is 2 in an earlier input" in e.value.stderr


def test_wrong_input_dtype_lists_expected():
    text = prog("""
def @main(%x: Tensor[(2), float32]) { %x }""")
    with pytest.raises(RlyError) as e:
        run_relay(text, {"x": np.ones((2,), np.float64)})
    assert "input x: dtype float64, expected float32; @main expects x: Tensor[(2), float32]" \
        in e.value.stderr

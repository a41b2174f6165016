"""test_builder_ops.py - the builder makes every operator of the table: for each operator, the
relation cases of tests/types/rel/*.txt that succeed (`op(arg types, attrs) -> result`, static
or `?` shapes) are rebuilt through rly.op.<name>(rly.var of each argument type, **attributes)
and the type the builder infers must be the case's result; every operator must have one."""
import ast
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "RLY_LIBRARY" not in os.environ and os.environ.get("RLY_BIN"):
    os.environ["RLY_LIBRARY"] = os.path.join(os.path.dirname(os.environ["RLY_BIN"]), "librly.so")
import rly  # noqa: E402


def split_top(s):
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def attr_value(text):
    t = re.sub(r"(?<=[0-9.])f(64|32|16)?\b", "", text)  # 1e-05f -> 1e-05
    t = re.sub(r"(?<=\d)i64\b", "", t)
    return ast.literal_eval(t)


def norm(t):
    return re.sub(r",\)", ")", t.replace(" ", ""))


# operators whose relation cases all use symbolic dims
EXTRA = [("greater", "Tensor[(2, 1), float16], Tensor[(1, 3), float16]", "Tensor[(2, 3), bool]"),
         ("maximum", "Tensor[(2, 1), float32], Tensor[(3,), float32]", "Tensor[(2, 3), float32]")]


def cases():
    yield from EXTRA
    line_re = re.compile(r"^([a-z_][a-z0-9_.]*)\((.*)\) -> (.+)$")
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "types", "rel", "*.txt"))):
        for line in open(path):
            m = line_re.match(line.strip())
            if m:
                yield m.group(1), m.group(2), m.group(3)


def build_case(name, args_text, want):
    fn = rly.op
    for part in name.split("."):
        fn = getattr(fn, part)
    args, attrs = [], {}
    for i, a in enumerate(split_top(args_text)):
        k = re.match(r"^([a-z_][a-z0-9_]*)=(.*)$", a)
        if k:
            attrs[k.group(1)] = attr_value(k.group(2))
        else:
            if re.search(r"\b[a-z]\b(?![a-z0-9_\[])", a.replace("float", "").replace("int", "")):
                return None  # symbolic dims: not in the text format
            args.append(rly.var("a%d" % i, type_annotation=a))
    return fn(*args, **attrs)


def test_every_operator_is_built():
    done, tried, mismatched = set(), 0, []
    for name, args_text, want in cases():
        if name in done:
            continue
        try:
            e = build_case(name, args_text, want)
        except (rly.RlyError, TypeError, ValueError, SyntaxError):
            continue
        if e is None:
            continue
        tried += 1
        if e.type is not None and norm(e.type) == norm(want):
            done.add(name)
        else:
            mismatched.append((name, args_text, want, e.type))
    missing = sorted(set(rly.op.names) - done)
    print("built %d of %d operators from %d cases" % (len(done), len(rly.op.names), tried))
    assert not missing, "operators never built: %s (mismatches: %s)" % (missing, mismatched[:5])

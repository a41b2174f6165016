import rly
from rly.adt import Cons, Nil


@rly.script
def f(xs: "List[float32]") -> "float32":
    match xs:
        case Cons(h, t):
            return h * 2.0 + f(t)
        case Nil():
            return 0.0

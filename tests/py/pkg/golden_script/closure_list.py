import rly


@rly.script
def f(x: rly.Tensor[(2,), "float32"]):
    def scale(v: rly.Tensor[(2,), "float32"]):
        return v * 3.0
    acc = rly.op.zeros_like(x)
    for item in [x, scale(x)]:
        acc = acc + item
    return (lambda v: rly.op.exp(v))(acc)

import rly


@rly.script
def f(x: rly.Tensor[(2, 3), "float32"], w: rly.Tensor[(2, 3), "float32"]):
    return x @ w

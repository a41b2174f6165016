import rly


@rly.script
def f(x: rly.Tensor[(2, 2), "float32"], n: rly.Tensor[(), "int32"]):
    i = 0
    while i < n:
        x = x * 2.0 + 1.0
        i = i + 1
    return x

import rly


@rly.script
def f(x: rly.Tensor[(2,), "float32"], n: rly.Tensor[(), "int32"]):
    for i in range(n):
        return x
    return x

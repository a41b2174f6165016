import rly


@rly.script
def f(n: rly.Tensor[(), "int32"]) -> "int32":
    if n <= 1:
        return 1
    return n * f(n - 1)

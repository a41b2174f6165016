import rly


@rly.script
def f(x: rly.Tensor[(3,), "float32"], s: rly.Tensor[(), "float32"]):
    y = x
    if s > 0.0:
        y = rly.op.nn.relu(x) * s
    else:
        y = -x
    return y, rly.op.sum(y)

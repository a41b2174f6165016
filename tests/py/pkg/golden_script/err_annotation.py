import rly


@rly.script
def f(x: int):
    return x

"""A solver that fails with a non-project exception, for the harness's test."""


def solve(inst, opts):
    raise OverflowError("int too large to convert")

"""The bound attached after a solver keeps to the command's end (issue 39): its
per-instance work (seconds at 4,096 GPUs) is not started when it would not finish,
and stops between its steps once the time is up; nothing partial is kept. Budgets
are faked, so no test here depends on how fast the machine is."""
from __future__ import annotations

import pytest

from geotrain_opt.bounds import cuts, shape_bounds
from geotrain_opt.io.generate import generate
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.problem.tiers import Stopped


class FakeUntil:
    """A stop() that turns true after ``calls`` calls and says ``left`` seconds remain."""

    def __init__(self, left: float, calls: int = 10**9) -> None:
        self._left, self.calls = left, calls

    def __call__(self) -> bool:
        self.calls -= 1
        return self.calls < 0

    def left(self) -> float:
        return self._left


@pytest.fixture(scope="module")
def big():
    return instance_from_dict(generate("geo", 64, 0))


def test_not_started_when_it_would_not_finish(big, monkeypatch):
    def never(*_a, **_k):
        raise AssertionError("ShapeBounds was started with no time left")
    monkeypatch.setattr("geotrain_opt.bounds.ShapeBounds", never)
    out = shape_bounds(big, stop=FakeUntil(left=-1.0))
    assert out and all(b.by == "not computed" and b.value == 0.0 for b in out.values())
    assert "shape_bounds" not in big._cache


@pytest.mark.parametrize("calls", [0, 3])
def test_stops_between_its_steps_and_keeps_nothing(big, calls):
    """stop() turns true after ``calls`` checks inside the per-instance work."""
    inst = instance_from_dict(generate("geo", 64, 0))
    with pytest.raises(Stopped):
        cuts.ShapeBounds(inst, FakeUntil(left=1e9, calls=calls))
    out = shape_bounds(inst, stop=FakeUntil(left=1e9, calls=calls))
    assert all(b.by == "not computed" for b in out.values())
    assert "shape_bounds" not in inst._cache


def test_computed_when_the_time_suffices(big):
    out = shape_bounds(big, stop=FakeUntil(left=1e9))
    assert all(b.by != "not computed" for b in out.values()) and min(b.value for b in out.values()) > 0


def test_the_instance_bound_takes_cheap_shapes_first_and_equals_the_least_full_bound():
    """instance_bound without an exact solver's shape bounds: shapes in increasing
    order of their memory-and-compute bound, the full bound only until that cheap one
    reaches the least full one. Cross-check: the very least over every shape's full
    bound, and no cheap bound above its full one."""
    from geotrain_opt.bounds import instance_bound
    for family, n in (("geo", 64), ("memory-tight", 12), ("mixed-power", 10)):
        inst = instance_from_dict(generate(family, n, 1))
        fast, by = instance_bound(inst)
        sb = cuts.ShapeBounds(inst)
        full = shape_bounds(instance_from_dict(generate(family, n, 1)))
        assert fast == pytest.approx(min(b.value for b in full.values()), rel=1e-12), family
        assert all(sb.cheap(*s).value <= b.value * (1 + 1e-12) for s, b in full.items())
        assert sum(by.values()) == len(full)


def test_an_instance_bound_cut_short_keeps_the_cheap_bounds_not_zero():
    """stop() true as soon as every shape has its cheap bound: no shape gets its full
    bound, and the bound is the least cheap one (valid: each is a lower bound of its
    shape), not the trivial 0; true one check earlier (a shape without even its cheap
    bound): the trivial 0, said so."""
    from geotrain_opt.bounds import instance_bound
    inst = instance_from_dict(generate("geo", 64, 0))
    from geotrain_opt.construct.pieces import feasible_shapes
    counter = FakeUntil(left=1e9)
    cuts.ShapeBounds(inst, counter)
    # the stop() calls of the per-instance work, then one per shape's cheap bound
    checks = 10**9 - counter.calls + len(feasible_shapes(inst))
    value, by = instance_bound(instance_from_dict(generate("geo", 64, 0)), FakeUntil(left=1e9, calls=checks))
    sb = cuts.ShapeBounds(inst)
    least_cheap = min(sb.cheap(*s).value for s in feasible_shapes(inst))
    assert value == pytest.approx(least_cheap, rel=1e-12) and value > 0
    assert by.get("compute only (time)", 0) > 0 and "merge tier" not in by
    value, by = instance_bound(instance_from_dict(generate("geo", 64, 0)), FakeUntil(left=1e9, calls=checks - 1))
    assert value == 0.0 and by == {"not computed": len(feasible_shapes(inst))}


def test_the_cut_tables_match_every_cut_enumerated():
    """The min-max cut (``_min_max_partition``) and the least peak memory, each one
    table per stage, against every cut of the layers enumerated by hand."""
    import itertools
    import numpy as np
    from geotrain_opt.cost import stagecost as sc
    rng = np.random.default_rng(5)
    for L, P in ((1, 1), (4, 2), (6, 3), (7, 4), (8, 8)):
        values, extra = rng.uniform(0, 9, L), rng.uniform(0, 3, P)
        brute = min(max(sum(values[a:b]) + extra[j] for j, (a, b) in enumerate(zip((0,) + c, c + (L,))))
                    for c in itertools.combinations(range(1, L), P - 1))
        assert cuts._min_max_partition(values, P, extra) == pytest.approx(brute, rel=1e-12)
    inst = instance_from_dict(generate("memory-tight", 8, 2))
    sb, a = cuts.ShapeBounds(inst), inst.arrays
    for D, P, q in ((1, 2, 1), (2, 3, 4), (3, 4, 2)):
        brute = min(max(sc.stage_memory_of(a, P, j, lo, hi, q, D) for j, (lo, hi) in enumerate(zip((0,) + c, c + (a.L,))))
                    for c in itertools.combinations(range(1, a.L), P - 1))
        assert sb._least_peak_memory(D, P, q) == pytest.approx(brute, rel=1e-12)

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from geotrain_opt import instance_from_dict, load_instance

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
TINY = INSTANCES / "tiny-4gpu-2region.yaml"


@pytest.fixture
def tiny():
    return load_instance(TINY)


@pytest.fixture
def tiny_dict():
    return yaml.safe_load(TINY.read_text())


def variant(base: dict, **changes):
    """Instance from a copy of ``base`` with dotted-path changes, e.g. options__schedule='gpipe'."""
    d = copy.deepcopy(base)
    for path, value in changes.items():
        keys = path.split("__")
        node = d
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return instance_from_dict(d)


def reference_and_batch(inst, plan, *fields: str, rel: float = 1e-12):
    """The reference evaluation of ``plan``, after checking the batched evaluator
    gives the same value of each of ``fields`` (time_s, energy_j, cost_usd, ...)."""
    from geotrain_opt import evaluate
    from geotrain_opt.cost.evaluator import BatchEvaluator
    ev = evaluate(inst, plan)
    b = BatchEvaluator(inst).evaluate_plans([plan])[0]
    for f in fields:
        assert getattr(b, f)[0] == pytest.approx(getattr(ev, f), rel=rel), f
    return ev

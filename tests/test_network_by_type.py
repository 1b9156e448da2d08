"""Issue 40: the links inside a node by GPU type (A100 and H100 NVLink differ), ahead of
the one ``intra_node`` tier."""
from __future__ import annotations

import pytest

import geotrain_opt as gt
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem import units


def _inst(by_type, extra_devices=()):
    return gt.instance_from_dict({
        "name": "by-type",
        "model": {"layers": 4, "hidden": 64, "heads": 8, "seq_len": 16, "vocab": 128, "global_batch": 8},
        "devices": [{"count": 2, "type": "A100-SXM4-80GB", "region": "r", "node": "a", "id_prefix": "a"},
                    {"count": 2, "type": "H100-SXM5-80GB", "region": "r", "node": "h", "id_prefix": "h"},
                    *extra_devices],
        "network": {"intra_node": {"latency_ms": 0.01, "bandwidth_gbps": 2400},
                    "intra_region": {"latency_ms": 0.1, "bandwidth_gbps": 100},
                    "intra_node_by_type": by_type},
        "options": {"tensor_parallel": [1, 2]}})


def test_each_type_gets_its_own_link_inside_a_node():
    inst = _inst([{"type": "H100-SXM5-80GB", "latency_ms": 0.005, "bandwidth_gbps": 7200}])
    a, i = inst, inst.index
    assert a.beta[i["h0"], i["h1"]] == units.gbps_to_bytes_per_s(7200) and a.alpha[i["h0"], i["h1"]] == 5e-6
    assert a.beta[i["a0"], i["a1"]] == units.gbps_to_bytes_per_s(2400)        # unlisted: the intra_node tier
    assert a.beta[i["a0"], i["h0"]] == units.gbps_to_bytes_per_s(100)         # other nodes: the region tier
    # a tensor-parallel pair of H100s communicates over its own link (model.md §14)
    plan = gt.Plan.make([[("h0", "h1")]], [0, 4], [2])
    assert gt.evaluate(inst, plan).time_s < gt.evaluate(_inst([]), plan).time_s


def test_a_node_of_two_types_takes_the_slower_entry():
    mixed = {"count": 2, "type": "A100-SXM4-80GB", "region": "r", "node": "h", "id_prefix": "x"}
    inst = _inst([{"type": "H100-SXM5-80GB", "latency_ms": 0.005, "bandwidth_gbps": 7200},
                  {"type": "A100-SXM4-80GB", "latency_ms": 0.008, "bandwidth_gbps": 4800}], [mixed])
    i, a = inst.index, inst
    assert a.beta[i["h0"], i["x0"]] == units.gbps_to_bytes_per_s(4800) and a.alpha[i["h0"], i["x0"]] == 8e-6


@pytest.mark.parametrize("entry, field", [
    ([{"type": "T4", "latency_ms": 0.1, "bandwidth_gbps": 10}], "intra_node_by_type[0].type"),
    ([{"type": "H100-SXM5-80GB", "latency_ms": 0.1}], "intra_node_by_type[0].bandwidth_gbps"),
    ({"type": "H100-SXM5-80GB"}, "intra_node_by_type"),
])
def test_bad_entries_name_the_field(entry, field):
    with pytest.raises(InstanceError, match=field.replace("[", r"\[").replace("]", r"\]")):
        _inst(entry)

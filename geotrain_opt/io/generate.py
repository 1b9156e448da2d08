"""Seeded instance generator: the same (family, GPUs, seed) gives the same bytes.

Families:
* ``tiny``: 2-6 GPUs, 2-12 layers, small enough for brute force (the ground truth
  of the exact-solver tests); mixed invented GPU types, 1-3 regions, some
  memory-tight, some with a free batch split, GPipe or 1F1B, all three objectives.
* ``small``: 4-16 GPUs from the catalog in 2-4 regions, for the exact solvers.
* ``geo``: 16-4,096 catalog GPUs over 3-12 world regions; latency from
  great-circle distance, bandwidth from a window-limited TCP model.
* ``mixed-power``: 4-64 GPUs of one speed but three power classes and regions of
  different PUE, energy objective: the energy objective decides, not speed.
* ``memory-tight``: 4-64 GPUs of 16, 24 and 80 GiB and a 6.7B-parameter model that
  fits only on some subsets (long pipelines or the large-memory GPUs).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import yaml

from geotrain_opt.errors import GeoTrainError
from geotrain_opt.problem.regions import CITIES, great_circle_km

FAMILIES = ("tiny", "small", "geo", "mixed-power", "memory-tight", "nodes", "regions")
FIBRE_KM_PER_MS = 200.0 / 1.5   # light in fibre ~200 km/ms, routes ~1.5x the great circle
TCP_WINDOW_BYTES = 2.5e6        # single-stream rate x RTT ~ 2.3-2.7 MB
STREAMS = 8                     # parallel streams a trainer opens per link


def wan_link(a: tuple[float, float], b: tuple[float, float]) -> dict[str, float]:
    lat_ms = 2.0 + great_circle_km(a, b) / FIBRE_KM_PER_MS
    rtt_s = 2 * lat_ms / 1e3
    gbps = min(10.0, STREAMS * TCP_WINDOW_BYTES * 8 / rtt_s / 1e9)
    return {"latency_ms": round(lat_ms, 2), "bandwidth_gbps": round(gbps, 3)}


def _r(x: float, d: int = 3) -> float:
    return float(round(float(x), d))


def tiny(n: int, seed: int) -> dict[str, Any]:
    from geotrain_opt.problem.instance import instance_from_dict
    from geotrain_opt.construct.pieces import plan_count
    rng = np.random.default_rng(seed)
    n_regions = int(rng.integers(1, 4))
    regions = [f"r{i}" for i in range(n_regions)]
    n_types = int(rng.integers(1, 4))
    tight = bool(rng.random() < 0.3)
    types = {}
    for t in range(n_types):
        busy = _r(rng.uniform(100, 500), 0)
        types[f"t{t}"] = {"peak_tflops": _r(rng.uniform(30, 400), 1), "efficiency": _r(rng.uniform(0.3, 0.6), 2),
                          "memory_gib": _r(rng.uniform(0.15, 0.6) if tight else rng.uniform(4, 40), 3),
                          "busy_w": busy, "wait_w": _r(busy * rng.uniform(0.1, 0.4), 0)}
    devices = []
    for g in range(n):
        region = regions[int(rng.integers(n_regions))]
        devices.append({"id": f"g{g}", "type": f"t{int(rng.integers(n_types))}", "region": region,
                        "node": f"{region}-n{int(rng.integers(2))}"})
    inter = []
    for i in range(n_regions):
        for j in range(i + 1, n_regions):
            link = {"a": regions[i], "b": regions[j], "latency_ms": _r(rng.uniform(5, 150), 1),
                    "bandwidth_gbps": _r(rng.uniform(0.2, 2.0), 2)}
            used = {dev["region"] for dev in devices}
            if regions[i] in used and regions[j] in used:
                inter.append(link)
    regions = [r for r in regions if r in {dev["region"] for dev in devices}]
    split = "free" if rng.random() < 0.3 else "uniform"
    M = int(rng.choice([2, 3, 4, 6]) if split == "free" else rng.choice([2, 4, 6, 8]))
    mb = int(rng.choice([1, 2]))
    d: dict[str, Any] = {
        "name": f"tiny-{n}-s{seed}",
        "model": {"layers": int(rng.integers(2, 13)), "hidden": int(rng.choice([256, 512, 768])), "heads": 8,
                  "seq_len": int(rng.choice([256, 512])), "vocab": int(rng.choice([1000, 4000, 8000])),
                  "global_batch": M * mb, "micro_batch": mb,
                  "recompute": "full" if rng.random() < 0.2 else "none"},
        "gpu_types": types, "devices": devices,
        "network": {"intra_node": {"latency_ms": 0.01, "bandwidth_gbps": _r(rng.uniform(200, 2400), 0)},
                    "intra_region": {"latency_ms": _r(rng.uniform(0.05, 1.0), 3), "bandwidth_gbps": _r(rng.uniform(5, 100), 1)},
                    "inter_region": inter},
        "energy": {"net_j_per_byte": float(rng.choice([0.0, 1e-8, 1e-7])),
                   "pue": {r: _r(rng.uniform(1.0, 1.6), 2) for r in regions}},
        "options": {"schedule": "gpipe" if rng.random() < 0.3 else "1f1b", "batch_split": split},
        "objective": {"kind": str(rng.choice(["time", "time", "energy", "weighted"])), "lambda": _r(rng.uniform(0.2, 0.8), 2),
                      "time_ref_s": 0.1, "energy_ref_j": 50.0},
    }
    # keep brute force affordable: fewer layers until the plan count is small
    while True:
        inst = instance_from_dict(d)
        if plan_count(inst) <= 60_000 or d["model"]["layers"] <= 2:
            return d
        d["model"]["layers"] -= 1


def small(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    cities = [CITIES[i] for i in rng.choice(len(CITIES), size=int(rng.integers(2, 5)), replace=False)]
    catalog = ["A100-SXM4-40GB", "V100-SXM2-32GB", "T4", "A10", "L4", "RTX-3090", "A40"]
    devices = []
    left = n
    for ci, (city, _la, _lo) in enumerate(cities):
        cnt = left if ci == len(cities) - 1 else int(rng.integers(1, max(2, left - (len(cities) - ci - 1)) + 1))
        cnt = min(cnt, left - (len(cities) - ci - 1))
        left -= cnt
        typ = catalog[int(rng.integers(len(catalog)))]
        devices.append({"count": cnt, "type": typ, "region": city, "id_prefix": f"{city[:3]}-",
                        "node": f"{city[:3]}-n", "gpus_per_node": int(rng.choice([1, 2, 4]))})
    inter = [{"a": a[0], "b": b[0], **wan_link(a[1:], b[1:])}
             for i, a in enumerate(cities) for b in cities[i + 1:]]
    preset = str(rng.choice(["gpt2-medium", "gpt2-large", "gpt3-xl"]))
    return {"name": f"small-{n}-s{seed}",
            "model": {"preset": preset, "global_batch": 8, "micro_batch": 1},
            "devices": devices,
            "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
                        "intra_region": {"latency_ms": 0.1, "bandwidth_gbps": 25}, "inter_region": inter},
            "energy": {"net_j_per_byte": 0.0}, "options": {"batch_split": "uniform"},
            "objective": {"kind": "time"}}


def geo(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    k = int(min(len(CITIES), max(3, min(12, n // 8))))
    cities = [CITIES[i] for i in rng.choice(len(CITIES), size=k, replace=False)]
    catalog = ["H100-SXM5-80GB", "A100-SXM4-80GB", "A100-SXM4-40GB", "V100-SXM2-32GB", "A40", "L40S", "T4", "RTX-4090"]
    shares = rng.dirichlet(np.ones(k))
    counts = np.maximum(1, np.floor(shares * n)).astype(int)
    counts[0] += n - counts.sum()
    while counts.min() < 1:
        i = int(counts.argmin())
        j = int(counts.argmax())
        counts[i] += 1
        counts[j] -= 1
    devices = []
    for (city, _la, _lo), cnt in zip(cities, counts):
        typ = catalog[int(rng.integers(len(catalog)))]
        devices.append({"count": int(cnt), "type": typ, "region": city, "id_prefix": f"{city}-",
                        "node": f"{city}-n", "gpus_per_node": 8})
    inter = [{"a": a[0], "b": b[0], **wan_link(a[1:], b[1:])}
             for i, a in enumerate(cities) for b in cities[i + 1:]]
    return {"name": f"geo-{n}-s{seed}",
            "model": {"preset": "gpt3-xl", "global_batch": 512, "micro_batch": 2},
            "devices": devices,
            "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
                        "intra_region": {"latency_ms": 0.2, "bandwidth_gbps": 25}, "inter_region": inter},
            "energy": {"net_j_per_byte": 2.0e-7},
            "options": {"batch_split": "free"}, "objective": {"kind": "time"}}


def _regions_and_links(rng: np.random.Generator, k: int) -> tuple[list, list]:
    cities = [CITIES[i] for i in rng.choice(len(CITIES), size=k, replace=False)]
    inter = [{"a": a[0], "b": b[0], **wan_link(a[1:], b[1:])} for i, a in enumerate(cities) for b in cities[i + 1:]]
    return cities, inter


def _spread(rng: np.random.Generator, n: int, k: int) -> list[int]:
    counts = [1] * k
    for _ in range(n - k):
        counts[int(rng.integers(k))] += 1
    return counts


def mixed_power(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    k = int(min(n, rng.integers(2, 4)))
    cities, inter = _regions_and_links(rng, k)
    classes = {"a100-eco": 250, "a100-std": 400, "a100-hot": 550}
    types = {name: {"peak_tflops": 312, "efficiency": 0.45, "memory_gib": 80, "busy_w": w,
                    "wait_w": round(w * 0.2), "source": "A100 SXM figures, busy power varied"}
             for name, w in classes.items()}
    devices = []
    for (city, _la, _lo), cnt in zip(cities, _spread(rng, n, k)):
        devices.append({"count": cnt, "type": str(rng.choice(list(classes))), "region": city,
                        "id_prefix": f"{city}-", "node": f"{city}-n", "gpus_per_node": 4})
    return {"name": f"mixed-power-{n}-s{seed}",
            "model": {"preset": "gpt2-large", "global_batch": 16, "micro_batch": 2},
            "gpu_types": types, "devices": devices,
            "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
                        "intra_region": {"latency_ms": 0.1, "bandwidth_gbps": 100}, "inter_region": inter},
            "energy": {"net_j_per_byte": 2.0e-7, "pue": {c[0]: _r(rng.uniform(1.05, 1.6), 2) for c in cities}},
            "objective": {"kind": "energy"}}


def memory_tight(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    k = int(min(n, rng.integers(1, 4)))
    cities, inter = _regions_and_links(rng, k)
    devices = []
    for (city, _la, _lo), cnt in zip(cities, _spread(rng, n, k)):
        typ = str(rng.choice(["T4", "A10", "A100-SXM4-80GB"], p=[0.45, 0.4, 0.15]))
        devices.append({"count": cnt, "type": typ, "region": city, "id_prefix": f"{city}-",
                        "node": f"{city}-n", "gpus_per_node": 2})
    d = {"name": f"memory-tight-{n}-s{seed}",
         "model": {"preset": "gpt3-6.7b", "global_batch": 8, "micro_batch": 1, "recompute": "full"},
         "devices": devices,
         "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 600},
                     "intra_region": {"latency_ms": 0.2, "bandwidth_gbps": 25},
                     **({"inter_region": inter} if inter else {})},
         "options": {"memory_headroom": 0.9}, "objective": {"kind": "time"}}
    # tight, not impossible: if no subset fits, the largest group becomes 80 GB A100s
    from geotrain_opt.construct.pieces import smallest_feasible_plan
    from geotrain_opt.problem.instance import instance_from_dict
    if smallest_feasible_plan(instance_from_dict(d)) is None:
        max(devices, key=lambda g: g["count"])["type"] = "A100-SXM4-80GB"
    return d


def nodes(n: int, seed: int) -> dict[str, Any]:
    """Two to three nodes of 1-3 devices (at most ``n``) behind slow networks, in one
    to three regions, or (every fourth seed) single-GPU machines in 2-3 regions, or
    (every eighth) two regions of two small nodes each: the
    sites of the joint-cut and split-site bounds and up to three link tiers, small
    enough for brute force on every shape (tests/test_classes_bounds.py,
    benchmarks/bound_validity.py --nodes)."""
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.choice([1, 2, 3], size=int(rng.integers(2, 4)))]
    while sum(sizes) > n:
        sizes.pop()
    if sum(sizes) < 4:
        sizes = [2, 2] if seed % 2 else [3, 1]
    types = {"t0": {"peak_tflops": 100.0, "efficiency": 0.5, "memory_gib": 40.0, "busy_w": 300.0, "wait_w": 60.0},
             "t1": {"peak_tflops": 60.0, "efficiency": 0.5, "memory_gib": 40.0, "busy_w": 200.0, "wait_w": 50.0}}
    # one to three regions (nodes dealt round-robin): a third link tier between regions
    n_regions = min(len(sizes), 1 + seed % 3)
    devices = [{"id": f"g{k}-{i}", "type": "t0" if (seed + k) % 3 else "t1", "region": f"r{k % n_regions}",
                "node": f"n{k}"} for k, size in enumerate(sizes) for i in range(size)]
    layers = int(rng.integers(3, 7))
    inter = [{"a": f"r{i}", "b": f"r{j}", "latency_ms": float(rng.choice([0.0, 5.0, 40.0])),
              "bandwidth_gbps": float(rng.choice([0.5, 1.0, 2.0]))}
             for i in range(n_regions) for j in range(i + 1, n_regions)]
    d = {"name": f"nodes-{seed}",
         "model": {"layers": layers, "hidden": 1024, "heads": 8, "seq_len": 512, "vocab": 8000,
                   "global_batch": int(rng.choice([4, 6, 12])), "micro_batch": 1, "recompute": "full"},
         "gpu_types": types, "devices": devices,
         "network": {"intra_node": {"latency_ms": 0.0, "bandwidth_gbps": 800.0},
                     "intra_region": {"latency_ms": float(rng.choice([0.0, 2.0])),
                                      "bandwidth_gbps": float(rng.choice([1.0, 5.0, 25.0]))},
                     **({"inter_region": inter} if inter else {})},
         "energy": {"net_j_per_byte": 0.0},
         "options": {"schedule": ("gpipe", "1f1b")[seed % 2], "batch_split": ("uniform", "free")[(seed // 2) % 2],
                     "exposed_comm": (0.0, 0.5, 1.0)[seed % 3], "accumulation_steps": 1 + seed % 2},
         "objective": {"kind": "time"}}
    if seed % 8 == 1:
        # two regions of two nodes each (1-2 GPUs of mixed types): at the region
        # tier two components form at once, each from nodes too small for a replica
        r2 = np.random.default_rng((seed, 2))
        per_node = [[2, 1], [1, 1], [2, 2], [1, 2]][(seed // 8) % 4], [[2, 1], [1, 2], [1, 1]][(seed // 8) % 3]
        d["devices"] = [{"id": f"g{r}{k}-{i}", "type": str(r2.choice(["t0", "t1"])), "region": f"r{r}",
                         "node": f"n{r}{k}"} for r, sizes_r in enumerate(per_node)
                        for k, size in enumerate(sizes_r) for i in range(size)]
        d["network"] = {"intra_node": {"latency_ms": 0.0, "bandwidth_gbps": 800.0},
                        "intra_region": {"latency_ms": float(r2.choice([0.0, 2.0])),
                                         "bandwidth_gbps": float(r2.choice([2.0, 5.0, 10.0]))},
                        "inter_region": [{"a": "r0", "b": "r1", "latency_ms": float(r2.choice([0.0, 10.0, 40.0])),
                                          "bandwidth_gbps": float(r2.choice([0.5, 1.0, 1.5]))}]}
    if seed % 4 == 3:
        # DT-FM's Case 4 in small: single-GPU machines, 2-3 per region, where a ring
        # inside a region is not free (a few Gbit/s) and the WAN is slower still
        r2 = np.random.default_rng((seed, 1))
        k, per = ((3, 2), (2, 3), (2, 2))[(seed // 4) % 3]
        per = min(per, n // k)
        d["devices"] = [{"id": f"g{r}-{i}", "type": "t0" if r2.random() < 0.7 else "t1", "region": f"r{r}",
                         "node": f"n{r}-{i}"} for r in range(k) for i in range(per)]
        d["network"] = {"intra_node": {"latency_ms": 0.0, "bandwidth_gbps": 800.0},
                        "intra_region": {"latency_ms": float(r2.choice([0.0, 2.0])),
                                         "bandwidth_gbps": float(r2.choice([2.0, 5.0, 10.0]))},
                        "inter_region": [{"a": f"r{i}", "b": f"r{j}", "latency_ms": float(r2.choice([0.0, 10.0, 40.0])),
                                          "bandwidth_gbps": float(r2.choice([0.5, 1.0, 1.5]))}
                                         for i in range(k) for j in range(i + 1, k)]}
    return d


def regions(n: int, seed: int) -> dict[str, Any]:
    """DT-FM's Cases 4 and 5 in small: three or four regions of the same number of
    single-GPU machines (at most ``n`` in all), one GPU type but for an occasional
    slower one, a ring inside a region at a few Gbit/s and every pair of regions
    with its own WAN link. Plans that take every device fill every region, so the
    site-order and whole-site bounds decide (formulations/proofs.md §8); small
    enough for brute force on every shape (benchmarks/bound_validity.py --regions)."""
    rng = np.random.default_rng((seed, 3))
    k = 3 + seed % 2
    per = max(1, min(2 + (seed // 2) % 2, n // k))
    d = nodes(n, seed)
    d["name"] = f"regions-{seed}"
    d["devices"] = [{"id": f"g{r}-{i}", "type": "t1" if rng.random() < 0.15 else "t0", "region": f"r{r}",
                     "node": f"n{r}-{i}"} for r in range(k) for i in range(per)]
    d["network"] = {"intra_node": {"latency_ms": 0.0, "bandwidth_gbps": 800.0},
                    "intra_region": {"latency_ms": float(rng.choice([0.0, 2.0, 5.0])),
                                     "bandwidth_gbps": float(rng.choice([2.0, 5.0]))},
                    "inter_region": [{"a": f"r{i}", "b": f"r{j}", "latency_ms": float(rng.choice([0.0, 10.0, 40.0, 70.0])),
                                      "bandwidth_gbps": float(rng.choice([0.5, 0.8, 1.0, 1.1, 1.25, 1.5]))}
                                     for i in range(k) for j in range(i + 1, k)]}
    return d


def generate(family: str, n: int, seed: int) -> dict[str, Any]:
    ranges = {"tiny": (2, 6), "small": (4, 16), "geo": (16, 4096), "mixed-power": (4, 64), "memory-tight": (4, 64),
              "nodes": (4, 9), "regions": (4, 12)}
    if family not in ranges:
        raise GeoTrainError(f"generate: unknown family {family!r} (known: {', '.join(FAMILIES)})")
    lo, hi = ranges[family]
    if not lo <= n <= hi:
        raise GeoTrainError(f"generate: --gpus for family {family} must be in {lo}..{hi}, got {n}")
    return {"tiny": tiny, "small": small, "geo": geo, "mixed-power": mixed_power,
            "memory-tight": memory_tight, "nodes": nodes, "regions": regions}[family](n, seed)


def to_yaml(d: dict[str, Any]) -> str:
    return yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=120)

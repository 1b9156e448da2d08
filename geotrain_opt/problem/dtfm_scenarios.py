"""DT-FM's evaluation scenarios (Yuan et al., "Decentralized Training of Foundation
Models in Heterogeneous Environments", NeurIPS 2022) as instances of this project.

Networks are the matrices of DT-FM's scheduler (DS3Lab/DT-FM
``scheduler/heuristic_evolutionary_solver/config.py`` and
``scheduler/generate_sim_com_matrices.py``: one-way delay in ms, bandwidth in
Gbit/s as the scheduler's formula uses it); the workload is the one of its
measured runs (DS3Lab/Decentralized_FM_alpha ``results/NeurIPS2022_submission.md``,
``scripts/local_scripts/gpt3_xl_pp8_dp8.sh``): GPT-3 XL with d_model 2048 and
16 heads, sequence 2048, fp16, GPipe, micro-batch 1, full recomputation,
8 stages x 8 replicas, 64 micro-batches per pipeline flush and replica.

``instances/real/make.py`` writes the bundled ``dtfm-*`` files from here,
``benchmarks/fidelity_dtfm.py`` builds the measured runs from here, and the
``dtfm`` baseline's tests read DT-FM's published optima on them.
"""
from __future__ import annotations

from typing import Any

GPU = "V100-SXM2-16GB"          # AWS p3.2xlarge / 8xlarge / 16xlarge
MICRO_PER_FLUSH = 64             # launch arguments "2 3 64": 64 micro-batches per flush and replica

# world-wide table (DT-FM generate_sim_com_matrices.py, delay_bandwidth_dict): (ms, Gbit/s)
CITY_LINKS: dict[tuple[str, str], tuple[float, float]] = {
    ("oregon", "virginia"): (67, 0.79), ("oregon", "ohio"): (49, 1.10), ("oregon", "tokyo"): (96, 0.523),
    ("oregon", "seoul"): (124, 0.46), ("oregon", "london"): (136, 0.42), ("oregon", "frankfurt"): (143, 0.404),
    ("oregon", "ireland"): (124, 0.482), ("virginia", "ohio"): (11, 1.12), ("virginia", "tokyo"): (143, 0.524),
    ("virginia", "seoul"): (172, 0.50), ("virginia", "london"): (76, 1.16), ("virginia", "frankfurt"): (90, 1.02),
    ("virginia", "ireland"): (67, 1.05), ("ohio", "tokyo"): (130, 0.694), ("ohio", "seoul"): (159, 0.529),
    ("ohio", "london"): (86, 1.05), ("ohio", "frankfurt"): (99, 0.799), ("ohio", "ireland"): (77, 1.14),
    ("tokyo", "seoul"): (34, 1.10), ("tokyo", "london"): (210, 0.366), ("tokyo", "frankfurt"): (223, 0.36),
    ("tokyo", "ireland"): (199, 0.465), ("seoul", "london"): (238, 0.342), ("seoul", "frankfurt"): (235, 0.358),
    ("seoul", "ireland"): (228, 0.335), ("london", "frankfurt"): (14, 1.14), ("london", "ireland"): (12, 1.09),
    ("frankfurt", "ireland"): (24, 1.08),
    # in the same table, unused by DT-FM's cases
    ("singapore", "oregon"): (163, 0.341), ("singapore", "virginia"): (230, 0.364), ("singapore", "ohio"): (197, 0.452),
    ("singapore", "tokyo"): (73, 1.01), ("singapore", "seoul"): (74, 1.14), ("singapore", "london"): (169, 0.500),
    ("singapore", "frankfurt"): (155, 0.535), ("singapore", "ireland"): (179, 0.492), ("singapore", "sydney"): (92, 0.816),
    ("sydney", "oregon"): (139, 0.36), ("sydney", "virginia"): (197, 0.383), ("sydney", "ohio"): (185, 0.484),
    ("sydney", "tokyo"): (100, 0.761), ("sydney", "seoul"): (148, 0.58), ("sydney", "london"): (262, 0.326),
    ("sydney", "frankfurt"): (265, 0.328), ("sydney", "ireland"): (254, 0.344),
}
WORLD = ["oregon", "virginia", "ohio", "tokyo", "seoul", "london", "frankfurt", "ireland"]
# regional case (simulate_3_regional_geo_distributed): its own Oregon-Virginia 1.15 Gbit/s
REGIONAL = ["virginia", "oregon", "california", "ohio"]
REGIONAL_LINKS = {("virginia", "oregon"): (67, 1.15), ("virginia", "california"): (59, 1.05),
                  ("virginia", "ohio"): (11, 1.12), ("oregon", "california"): (12, 1.25),
                  ("oregon", "ohio"): (49, 1.10), ("california", "ohio"): (52, 1.02)}
# Case 5-2: city index of GPU i, numpy legacy RandomState(2022).randint(0, 8, 64) over WORLD
UNBALANCED = "5450110702005113336603036065022361205775175540222345124605542505"

CASES = ("1", "2", "3", "4", "5", "5-2")
TITLES = {"1": "on-demand data centre", "2": "spot data centre", "3": "two universities",
          "4": "regional geo-distributed", "5": "world-wide geo-distributed",
          "5-2": "unbalanced world-wide geo-distributed"}


def workload(layers: int = 24, batch: int = 1024) -> dict[str, Any]:
    """The model section of DT-FM's measured runs."""
    return {"preset": "gpt3-xl", "layers": layers, "heads": 16, "global_batch": batch, "micro_batch": 1,
            "recompute": "full"}


def run_options(batch: int, replicas: int = 8) -> dict[str, Any]:
    """GPipe with 64 micro-batches per flush and replica, as launched."""
    return {"schedule": "gpipe", "batch_split": "uniform",
            "accumulation_steps": max(1, batch // replicas // MICRO_PER_FLUSH)}


def _links(regions: list[str], table: dict[tuple[str, str], tuple[float, float]]) -> list[dict[str, Any]]:
    out = []
    for i, a in enumerate(regions):
        for b in regions[i + 1:]:
            lat, bw = table[(a, b)] if (a, b) in table else table[(b, a)]
            out.append({"a": a, "b": b, "latency_ms": lat, "bandwidth_gbps": bw})
    return out


def scenario(case: str, layers: int = 24, batch: int = 1024, tc: bool = False) -> dict[str, Any]:
    """Instance dict of DT-FM case ``case`` (1-5, 5-2; DT-FM's own numbering 1-5).

    ``tc=True`` uses the intra-site delay of the ``tc netem`` scripts of the real
    runs (10 ms in Cases 4 and 5) instead of the scheduler's 5 ms."""
    case = str(case)
    intra_ms = 10.0 if tc else 5.0
    if case == "1":      # 8 x p3.16xlarge; 3.125 Gbit/s between instances = a 25 Gbit/s NIC over 8 GPUs
        devices = [{"count": 8, "type": GPU, "region": "us-east", "node": f"i{n}", "id_prefix": f"i{n}-",
                    "nic_gbps": 25} for n in range(8)]
        network = {"intra_node": {"latency_ms": 0, "bandwidth_gbps": 100},
                   "intra_region": {"latency_ms": 0, "bandwidth_gbps": 25}}
    elif case == "2":    # 8 x p3.8xlarge (quads) + 32 x p3.2xlarge; 1.25 Gbit/s outside a quad
        devices = [{"count": 4, "type": GPU, "region": "us-east", "node": f"q{n}", "id_prefix": f"q{n}-"}
                   for n in range(8)]
        devices.append({"count": 32, "type": GPU, "region": "us-east", "id_prefix": "s", "node": "s",
                        "gpus_per_node": 1})
        network = {"intra_node": {"latency_ms": 0, "bandwidth_gbps": 100},
                   "intra_region": {"latency_ms": 0, "bandwidth_gbps": 1.25}}
    elif case == "3":    # two universities, 32 GPUs each, every GPU shaped on its own
        devices = [{"count": 32, "type": GPU, "region": site, "id_prefix": f"{site}-", "node": f"{site}-n",
                    "gpus_per_node": 1} for site in ("ohio", "virginia")]
        network = {"intra_region": {"latency_ms": 1, "bandwidth_gbps": 5},
                   "inter_region": [{"a": "ohio", "b": "virginia", "latency_ms": 11, "bandwidth_gbps": 1.12}]}
    elif case == "4":
        devices = [{"count": 16, "type": GPU, "region": r, "id_prefix": f"{r}-", "node": f"{r}-n",
                    "gpus_per_node": 1} for r in REGIONAL]
        network = {"intra_region": {"latency_ms": intra_ms, "bandwidth_gbps": 2},
                   "inter_region": _links(REGIONAL, REGIONAL_LINKS)}
    elif case == "5":
        devices = [{"count": 8, "type": GPU, "region": r, "id_prefix": f"{r}-", "node": f"{r}-n",
                    "gpus_per_node": 1} for r in WORLD]
        network = {"intra_region": {"latency_ms": intra_ms, "bandwidth_gbps": 2},
                   "inter_region": _links(WORLD, CITY_LINKS)}
    elif case == "5-2":  # DT-FM's generator uses 10 ms inside a city here
        devices = [{"id": f"gpu{i}-{WORLD[int(c)]}", "type": GPU, "region": WORLD[int(c)], "node": f"gpu{i}"}
                   for i, c in enumerate(UNBALANCED)]
        network = {"intra_region": {"latency_ms": 10, "bandwidth_gbps": 2},
                   "inter_region": _links(WORLD, CITY_LINKS)}
    else:
        raise ValueError(f"unknown DT-FM case {case!r} (known: {', '.join(CASES)})")
    return {"name": f"dtfm-case{case}-L{layers}-B{batch}", "model": workload(layers, batch), "devices": devices,
            "network": network, "options": run_options(batch)}


def layout_grid(ids: list[str], layout: str, D: int = 8, P: int = 8) -> list[list[str]]:
    """DT-FM's two classic layouts over devices listed site by site.

    ``strided``: pipeline k = devices kP .. kP+P-1 (each pipeline inside one site,
    DT-FM's scheduler optimum); ``blocked``: stage group j = devices jD .. jD+D-1
    (each data-parallel group inside one site, pipelines across sites: Megatron's
    default placement)."""
    if layout == "strided":
        return [[ids[P * k + j] for j in range(P)] for k in range(D)]
    if layout == "blocked":
        return [[ids[D * j + k] for j in range(P)] for k in range(D)]
    raise ValueError(f"unknown layout {layout!r} (strided or blocked)")


def equal_cuts(layers: int, P: int) -> list[int]:
    return [layers * j // P for j in range(P + 1)]

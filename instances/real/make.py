"""Writes the real-world instances of this folder (run from the repository root:
``python instances/real/make.py``). Every figure is cited in the file it lands in;
pairs the sources do not cover are estimated with the window-limited great-circle
model of geotrain_opt/io/generate.py and marked "derived".
"""
from __future__ import annotations

from pathlib import Path

import yaml

from geotrain_opt.problem import dtfm_scenarios as dtfm
from geotrain_opt.io.generate import CITIES, wan_link

HERE = Path(__file__).resolve().parent
GEO = {name: (lat, lon) for name, lat, lon in CITIES}

# DT-FM's AWS measurements (DS3Lab/DT-FM scheduler/generate_sim_com_matrices.py), one-way delay ms,
# bandwidth Gbps; California from its regional case
DTFM = dict(dtfm.CITY_LINKS)
DTFM.update({k: v for k, v in dtfm.REGIONAL_LINKS.items() if "california" in k})


def links(regions: list[str], table: dict, overrides: dict | None = None) -> tuple[list, list[str]]:
    out, derived = [], []
    for i, a in enumerate(regions):
        for b in regions[i + 1:]:
            v = (overrides or {}).get((a, b)) or (overrides or {}).get((b, a)) or table.get((a, b)) or table.get((b, a))
            if v is None:
                w = wan_link(GEO[a], GEO[b])
                out.append({"a": a, "b": b, **w})
                derived.append(f"{a}-{b}")
            else:
                out.append({"a": a, "b": b, "latency_ms": v[0], "bandwidth_gbps": v[1]})
    return out, derived


def write(name: str, header: str, data: dict) -> None:
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110)
    lines = "".join(f"# {l}\n" if l else "#\n" for l in header.strip().splitlines())
    (HERE / f"{name}.yaml").write_text(lines + body)


DTFM_NOTE = """Network: the matrices of DT-FM's scheduler (Yuan et al., NeurIPS'22; DS3Lab/DT-FM
scheduler/heuristic_evolutionary_solver/config.py), delay ms and bandwidth Gbit/s as its
formula reads them. Workload as DT-FM's measured runs: GPT-3 XL (d 2048, 16 heads, seq 2048,
fp16), batch 1024, micro-batch 1, full recomputation, GPipe, 2 accumulation steps (64
micro-batches per flush and replica at 8 replicas). GPUs: V100 16 GB (AWS p3)."""
DTFM_FILES = {"1": "dtfm-1-datacenter-ondemand", "2": "dtfm-2-datacenter-spot", "3": "dtfm-3-multi-datacenter",
              "4": "dtfm-4-regional-geo", "5": "dtfm-5-worldwide-geo", "5-2": "dtfm-5b-worldwide-unbalanced"}
DTFM_HEADERS = {
    "1": """DT-FM Case 1, on-demand data centre: 8 x p3.16xlarge, 8 V100 each.
Within an instance 0 ms / 100 Gbit/s (DT-FM's table; NVLink is faster in reality). Between
instances 3.125 Gbit/s per GPU = a 25 Gbit/s NIC shared by 8 GPUs (nic_gbps: 25), 0 ms.""",
    "2": """DT-FM Case 2, spot data centre: 8 x p3.8xlarge (4 V100 each) and 32 x p3.2xlarge.
Within a quad 0 ms / 100 Gbit/s, every other pair 0 ms / 1.25 Gbit/s (DT-FM's table).""",
    "3": """DT-FM Case 3, two universities: 32 V100 at site A (Ohio), 32 at site B (Virginia),
every GPU its own machine. 1 ms / 5 Gbit/s inside a site, 11 ms / 1.12 Gbit/s between.""",
    "4": """DT-FM Case 4, regional geo-distributed: 64 single-V100 machines, 16 in each of four US
regions. 5 ms / 2 Gbit/s inside a region (the scheduler's value; the tc scripts of the real
runs used 10 ms); between regions DT-FM's regional table (its own Oregon-Virginia 1.15).""",
    "5": """DT-FM Case 5, world-wide geo-distributed: 64 single-V100 machines, 8 in each of eight
cities. 5 ms / 2 Gbit/s inside a city (the scheduler's value; the tc scripts used 10 ms);
all 28 city pairs from DT-FM's table. Network energy 6.8e-6 J/B = 0.0019 kWh/GB, the 2025
extrapolation of Aslan et al.""",
    "5-2": """DT-FM Case 5-2, unbalanced world-wide (Decentralized_FM_alpha generate_sim_com_matrices.py):
city of GPU i drawn by numpy RandomState(2022).randint(0, 8, 64): London 13, Oregon 13,
Ohio 9, Virginia 7, Tokyo 7, Frankfurt 6, Seoul 5, Ireland 4. 10 ms / 2 Gbit/s inside a
city (its generator's value), DT-FM's city table between. No published result exists.""",
}


def dtfm_instances() -> None:
    for case, name in DTFM_FILES.items():
        data = dtfm.scenario(case)
        data["name"] = name
        data["energy"] = {"net_j_per_byte": 6.8e-6 if case.startswith("5") else 0.0}
        data["objective"] = {"kind": "time"}
        write(name, DTFM_HEADERS[case] + "\n" + DTFM_NOTE, data)


def vldb() -> None:
    # Erben, Mayer, Jacobsen, VLDB'24; medians of the iperf/ping logs.
    # RTT -> one-way latency RTT/2; single-stream TCP bandwidth.
    conts = {"us": ("us", 0.325, 6.85), "eu": ("eu", 0.325, 6.85), "asia": ("asia", 0.325, 6.85),
             "australia": ("australia", 0.325, 6.85)}
    pairs = [("us", "eu", 103, 0.215), ("us", "asia", 157, 0.135), ("us", "australia", 176, 0.1165),
             ("asia", "australia", 131.5, 0.162), ("eu", "asia", 253, 0.076), ("eu", "australia", 272, 0.069)]
    write("vldb-t4-intercontinental", """Cross-continent T4 training as measured in "How Can We Train Deep Learning
Models Across Clouds and Continents?" (Erben, Mayer, Jacobsen, VLDB'24): GCP T4 VMs,
2 per continent (US, EU, Asia, Australia). Same zone: RTT 0.6-0.7 ms, 6.8-6.9 Gbit/s;
US-EU 103 ms / 209-222 Mb/s; US-Asia 157 / 132-139; US-Australia 176 / 116-117;
Asia-Australia 131-132 / 161-163; EU-Asia 253 / 76; EU-Australia 272 / 69 (medians
of the cirquit/hivemind-multi-cloud logs). One-way latency = RTT / 2.
Model: GPT-2 medium, batch 64 of 1024 tokens, micro-batch 4 (fits a 16 GB T4).
Network energy 6.8e-6 J/B = 0.0019 kWh/GB.""", {
        "name": "vldb-t4-intercontinental", "model": {"preset": "gpt2-medium", "global_batch": 64, "micro_batch": 4},
        "devices": [{"count": 2, "type": "T4", "region": c, "id_prefix": f"{c}-", "node": f"{c}-vm", "gpus_per_node": 1}
                    for c in conts],
        "network": {"intra_region": {"latency_ms": 0.325, "bandwidth_gbps": 6.85},
                    "inter_region": [{"a": a, "b": b, "latency_ms": r / 2, "bandwidth_gbps": w} for a, b, r, w in pairs]},
        "energy": {"net_j_per_byte": 6.8e-6}, "objective": {"kind": "time"}})
    write("vldb-t4-a10-crosscloud", """Cross-cloud training in one country, after Erben et al. (VLDB'24): T4 VMs on
GCP (us), AWS (aws-us), Azure (azure-us) and A10 nodes on LambdaLabs (lambda-us).
Within a provider: GCP 0.65 ms RTT / 6.85 Gbit/s, AWS 0.2 / 4.8, Azure 1.6 / 7.6,
LambdaLabs 0.3 / 3.3 (intra-region tier uses GCP's; pairs list the others).
AWS-GCP 15 ms RTT / 1.65 Gbit/s; Azure-GCP 50.5 / 0.46. AWS-Azure and
every LambdaLabs link are not in the sources: derived as 50 ms RTT / 0.46 Gbit/s
(the Azure-GCP figure, the slower of the two measured cross-cloud paths).
One-way latency = RTT / 2. Model: GPT-2 medium, batch 64, micro-batch 4.
Network energy 6.8e-6 J/B = 0.0019 kWh/GB.""", {
        "name": "vldb-t4-a10-crosscloud", "model": {"preset": "gpt2-medium", "global_batch": 64, "micro_batch": 4},
        "devices": [{"count": 3, "type": "T4", "region": "gcp-us", "id_prefix": "gcp-", "node": "gcp-vm", "gpus_per_node": 1},
                    {"count": 3, "type": "T4", "region": "aws-us", "id_prefix": "aws-", "node": "aws-vm", "gpus_per_node": 1},
                    {"count": 2, "type": "T4", "region": "azure-us", "id_prefix": "az-", "node": "az-vm", "gpus_per_node": 1},
                    {"count": 2, "type": "A10", "region": "lambda-us", "id_prefix": "lam-", "node": "lam-vm", "gpus_per_node": 1}],
        "network": {"intra_region": {"latency_ms": 0.325, "bandwidth_gbps": 6.85},
                    "inter_region": [
                        {"a": "aws-us", "b": "gcp-us", "latency_ms": 7.5, "bandwidth_gbps": 1.65},
                        {"a": "azure-us", "b": "gcp-us", "latency_ms": 25.25, "bandwidth_gbps": 0.46},
                        {"a": "aws-us", "b": "azure-us", "latency_ms": 25, "bandwidth_gbps": 0.46},
                        {"a": "lambda-us", "b": "gcp-us", "latency_ms": 25, "bandwidth_gbps": 0.46},
                        {"a": "lambda-us", "b": "aws-us", "latency_ms": 25, "bandwidth_gbps": 0.46},
                        {"a": "lambda-us", "b": "azure-us", "latency_ms": 25, "bandwidth_gbps": 0.46}],
                    "pairs": ([{"a": f"aws-{i}", "b": f"aws-{j}", "latency_ms": 0.1, "bandwidth_gbps": 4.8}
                               for i in range(3) for j in range(i + 1, 3)]
                              + [{"a": "az-0", "b": "az-1", "latency_ms": 0.8, "bandwidth_gbps": 7.6},
                                 {"a": "lam-0", "b": "lam-1", "latency_ms": 0.15, "bandwidth_gbps": 3.3}])},
        "energy": {"net_j_per_byte": 6.8e-6}, "objective": {"kind": "time"}})


def mixed() -> None:
    regions = ["virginia", "ohio", "oregon"]
    inter, derived = links(regions, DTFM)
    write("mixed-gen-3region-16", f"""Mixed-generation pool in three AWS regions: 4 A100-40GB (Virginia, one node),
4 V100-32GB (Ohio, one node), 4 T4 and 4 RTX-3090 (Oregon, single-GPU machines).
GPU figures: catalog. Links: DT-FM AWS measurements;
NVLink inside the A100/V100 nodes, 25 Gbps between machines of a region.
Model: GPT-2 XL (1.5B), batch 64, micro-batch 1. Derived links: {', '.join(derived) or 'none'}.
Network energy 6.8e-6 J/B = 0.0019 kWh/GB.""", {
        "name": "mixed-gen-3region-16", "model": {"preset": "gpt2-xl", "global_batch": 64, "micro_batch": 1},
        "devices": [{"count": 4, "type": "A100-SXM4-40GB", "region": "virginia", "id_prefix": "va-a100-", "node": "va-n0"},
                    {"count": 4, "type": "V100-SXM2-32GB", "region": "ohio", "id_prefix": "oh-v100-", "node": "oh-n0"},
                    {"count": 4, "type": "T4", "region": "oregon", "id_prefix": "or-t4-", "node": "or-t4-", "gpus_per_node": 1},
                    {"count": 4, "type": "RTX-3090", "region": "oregon", "id_prefix": "or-3090-", "node": "or-3090-", "gpus_per_node": 1}],
        "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
                    "intra_region": {"latency_ms": 0.1, "bandwidth_gbps": 25}, "inter_region": inter},
        "energy": {"net_j_per_byte": 6.8e-6, "pue": {"virginia": 1.1, "ohio": 1.1, "oregon": 1.1}},
        "objective": {"kind": "time"}})
    regions = ["virginia", "oregon", "london", "frankfurt", "tokyo"]
    inter, derived = links(regions, DTFM)
    write("mixed-gen-5region-40", f"""Mixed-generation pool across five regions on three continents: 8 A100-80GB
(Virginia), 8 V100-32GB (Oregon), 8 A100-40GB (London), 8 RTX-4090 (Frankfurt, single-GPU
machines), 8 T4 (Tokyo, single-GPU machines). GPU figures: catalog.
Links: DT-FM AWS measurements; derived (great-circle + window model):
{', '.join(derived) or 'none'}. PUE 1.1 (hyperscale) except Tokyo 1.56
(2024 survey average). Model: GPT-3 2.7B, batch 128, micro-batch 1.
Network energy 6.8e-6 J/B = 0.0019 kWh/GB.""", {
        "name": "mixed-gen-5region-40", "model": {"preset": "gpt3-2.7b", "global_batch": 128, "micro_batch": 1},
        "devices": [{"count": 8, "type": "A100-SXM4-80GB", "region": "virginia", "id_prefix": "va-", "node": "va-n"},
                    {"count": 8, "type": "V100-SXM2-32GB", "region": "oregon", "id_prefix": "or-", "node": "or-n"},
                    {"count": 8, "type": "A100-SXM4-40GB", "region": "london", "id_prefix": "lo-", "node": "lo-n"},
                    {"count": 8, "type": "RTX-4090", "region": "frankfurt", "id_prefix": "fr-", "node": "fr-", "gpus_per_node": 1},
                    {"count": 8, "type": "T4", "region": "tokyo", "id_prefix": "tk-", "node": "tk-", "gpus_per_node": 1}],
        "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
                    "intra_region": {"latency_ms": 0.1, "bandwidth_gbps": 25}, "inter_region": inter},
        "energy": {"net_j_per_byte": 6.8e-6, "pue": {"virginia": 1.1, "oregon": 1.1, "london": 1.1,
                                                     "frankfurt": 1.1, "tokyo": 1.56}},
        "objective": {"kind": "time"}})


if __name__ == "__main__":
    dtfm_instances()
    vldb()
    mixed()

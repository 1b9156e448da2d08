"""Writes the real-world instances of this folder (run from the repository root:
``python instances/real/make.py``). Every figure is cited in the file it lands in;
pairs the sources do not cover are estimated with the window-limited great-circle
model of geotrain_opt/generate.py and marked "derived".
"""
from __future__ import annotations

from pathlib import Path

import yaml

from geotrain_opt.generate import CITIES, wan_link

HERE = Path(__file__).resolve().parent
GEO = {name: (lat, lon) for name, lat, lon in CITIES}

# DT-FM (Yuan et al., NeurIPS'22), DS3Lab/DT-FM scheduler/generate_sim_com_matrices.py,
# one-way delay ms, bandwidth Gbps
DTFM = {
    ("virginia", "ohio"): (11, 1.12), ("london", "frankfurt"): (14, 1.14), ("london", "ireland"): (12, 1.09),
    ("frankfurt", "ireland"): (24, 1.08), ("tokyo", "seoul"): (34, 1.10), ("oregon", "ohio"): (49, 1.10),
    ("oregon", "virginia"): (67, 0.79), ("virginia", "ireland"): (67, 1.05), ("virginia", "london"): (76, 1.16),
    ("virginia", "frankfurt"): (90, 1.02), ("tokyo", "singapore"): (73, 1.01), ("seoul", "singapore"): (74, 1.14),
    ("oregon", "tokyo"): (96, 0.523), ("singapore", "sydney"): (92, 0.816), ("oregon", "london"): (136, 0.42),
    ("virginia", "tokyo"): (143, 0.524), ("oregon", "singapore"): (163, 0.341), ("singapore", "london"): (169, 0.500),
    ("virginia", "singapore"): (230, 0.364), ("tokyo", "frankfurt"): (223, 0.36), ("seoul", "london"): (238, 0.342),
    ("sydney", "frankfurt"): (265, 0.328), ("oregon", "california"): (12, 1.25), ("virginia", "california"): (59, 1.05),
}


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


GPT3XL = {"preset": "gpt3-xl", "global_batch": 1024, "micro_batch": 1}
DTFM_NOTE = """Model: GPT-3 XL (1.3B; Brown et al. 2020), batch 1024 sequences of 2048, micro-batch 1,
as in DT-FM's evaluation. 64 V100 GPUs (catalog V100-SXM2-32GB).
Inter-region delay/bandwidth: DT-FM's AWS measurements.
Network energy, where set: 6.8e-6 J per byte = 0.0019 kWh/GB, the 2025 extrapolation
of Aslan et al.."""


def dtfm() -> None:
    dc = {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
          "intra_region": {"latency_ms": 0.1, "bandwidth_gbps": 25}}
    write("dtfm-1-datacenter-ondemand", f"""DT-FM scenario 1, data center on demand: 8 AWS p3.16xlarge, 8 V100 each.
{DTFM_NOTE}
NVLink 2 within a node: 300 GB/s = 2400 Gbit/s; between nodes
25 Gbps (p3.16xlarge).""", {
        "name": "dtfm-1-datacenter-ondemand", "model": GPT3XL,
        "devices": [{"count": 64, "type": "V100-SXM2-32GB", "region": "virginia", "id_prefix": "v-",
                     "node": "p3.16x-", "gpus_per_node": 8}],
        "network": dc, "energy": {"net_j_per_byte": 0.0}, "objective": {"kind": "time"}})
    write("dtfm-2-datacenter-spot", f"""DT-FM scenario 2, data center spot: 4 x p3.8xlarge (4 V100 each) and
48 x p3.2xlarge (1 V100 each) in one region.
{DTFM_NOTE}
Between instances: DT-FM's simulation value for nodes of one region, 10 ms / 2 Gbps
(FACTS §4.1, "their simulation assumptions"); NVLink inside a p3.8xlarge.""", {
        "name": "dtfm-2-datacenter-spot", "model": GPT3XL,
        "devices": [{"count": 16, "type": "V100-SXM2-32GB", "region": "virginia", "id_prefix": "p38-",
                     "node": "p3.8x-", "gpus_per_node": 4},
                    {"count": 48, "type": "V100-SXM2-32GB", "region": "virginia", "id_prefix": "p32-",
                     "node": "p3.2x-", "gpus_per_node": 1}],
        "network": {"intra_node": {"latency_ms": 0.005, "bandwidth_gbps": 2400},
                    "intra_region": {"latency_ms": 10, "bandwidth_gbps": 2}},
        "energy": {"net_j_per_byte": 0.0}, "objective": {"kind": "time"}})
    inter, _ = links(["virginia", "ohio"], DTFM)
    write("dtfm-3-multi-datacenter", f"""DT-FM scenario 3, multiple data centers: 32 V100 in Ohio and 32 in Virginia
(4 p3.16xlarge each).
{DTFM_NOTE}
Virginia-Ohio 11 ms / 1.12 Gbps; within a region 25 Gbps between nodes.""", {
        "name": "dtfm-3-multi-datacenter", "model": GPT3XL,
        "devices": [{"count": 32, "type": "V100-SXM2-32GB", "region": r, "id_prefix": f"{r[:3]}-",
                     "node": f"{r[:3]}-n", "gpus_per_node": 8} for r in ("ohio", "virginia")],
        "network": dict(dc, inter_region=inter), "energy": {"net_j_per_byte": 0.0}, "objective": {"kind": "time"}})
    regional = ["oregon", "california", "ohio", "virginia"]
    inter, derived = links(regional, DTFM, overrides={("oregon", "virginia"): (67, 1.15)})
    write("dtfm-4-regional-geo", f"""DT-FM scenario 4, regional geo-distributed: 64 single-V100 machines in four
North-American regions (16 each).
{DTFM_NOTE}
Oregon-Virginia uses the 1.15 Gbps of DT-FM's regional scenario. Within a region:
DT-FM's simulation value 10 ms / 2 Gbps. Derived (great-circle latency, window-limited
bandwidth, not in the sources): {', '.join(derived) or 'none'}.""", {
        "name": "dtfm-4-regional-geo", "model": GPT3XL,
        "devices": [{"count": 16, "type": "V100-SXM2-32GB", "region": r, "id_prefix": f"{r[:3]}-",
                     "node": f"{r[:3]}-n", "gpus_per_node": 1} for r in regional],
        "network": {"intra_region": {"latency_ms": 10, "bandwidth_gbps": 2}, "inter_region": inter},
        "energy": {"net_j_per_byte": 0.0}, "objective": {"kind": "time"}})
    world = ["oregon", "virginia", "ohio", "tokyo", "seoul", "london", "frankfurt", "ireland"]
    inter, derived = links(world, DTFM)
    write("dtfm-5-worldwide-geo", f"""DT-FM scenario 5, world-wide geo-distributed: 64 single-V100 machines in eight
regions on three continents (8 each).
{DTFM_NOTE}
Within a region: 10 ms / 2 Gbps (DT-FM simulation). Derived pairs (not in the
sources; great-circle latency + 2 ms, 8 TCP streams of a 2.5 MB window
"derived observation"): {', '.join(derived)}.""", {
        "name": "dtfm-5-worldwide-geo", "model": GPT3XL,
        "devices": [{"count": 8, "type": "V100-SXM2-32GB", "region": r, "id_prefix": f"{r[:3]}-",
                     "node": f"{r[:3]}-n", "gpus_per_node": 1} for r in world],
        "network": {"intra_region": {"latency_ms": 10, "bandwidth_gbps": 2}, "inter_region": inter},
        "energy": {"net_j_per_byte": 6.8e-6}, "objective": {"kind": "time"}})


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
    dtfm()
    vldb()
    mixed()

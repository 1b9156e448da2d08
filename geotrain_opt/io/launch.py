"""What starts a run: one shell script, run on every node of the plan with the node's
name (``bash launch.sh use-n0``), that starts one process per GPU with its rank.

Why not ``torchrun --node-rank``: torchrun numbers a node's processes consecutively,
but Megatron-LM's rank order (tensor rank fastest, then replica, then stage; the rank
map of :mod:`geotrain_opt.io.export_plan`) puts a node's GPUs at ranks far apart
whenever a node holds more than one stage. So the script sets what torchrun would
(RANK, LOCAL_RANK = the GPU's number on the node, WORLD_SIZE, MASTER_ADDR/PORT) for
each process itself; Megatron-LM then picks ``cuda:LOCAL_RANK`` and builds its groups
from RANK, exactly the plan's.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from geotrain_opt.errors import InstanceError, PlanError
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan

DEFAULT_ENTRY = {"megatron": "pretrain_gpt.py", "torch": "train.py"}
DEFAULT_PORT = 29500
# a host name, IPv4 or IPv6 address: nothing a shell would read as syntax
_ADDRESS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-\[\]%]{0,252}$")


def load_hosts(path: str | Path) -> dict[str, str]:
    """A hosts file: a YAML or JSON mapping from node name to address."""
    from geotrain_opt.common.inputs import read_text_file
    from geotrain_opt.problem.instance.loading import parse_text
    try:
        data = parse_text(read_text_file(path, 1 << 24), str(path))
    except ValueError as e:
        raise InstanceError("--hosts", str(e)) from None
    except InstanceError as e:
        raise InstanceError("--hosts", f"{e.field}: {e.message}") from None
    if not isinstance(data, dict) or not data:
        raise InstanceError("--hosts", "expected a mapping from node name to address (node: 10.0.0.1)")
    out = {}
    for node, addr in data.items():
        if not isinstance(addr, str) or not _ADDRESS.match(addr):
            raise InstanceError(f"--hosts.{str(node)[:40]}", f"expected a host name or IP address, got {addr!r:.60}")
        out[str(node)] = addr
    return out


def check_hosts(ranks: list[dict[str, Any]], hosts: dict[str, str] | None) -> None:
    missing = sorted({r["node"] for r in ranks} - set(hosts or {}))
    if missing:
        raise PlanError("--hosts", f"no address for node(s) {', '.join(missing[:5])}"
                                   f"{' …' if len(missing) > 5 else ''} (a hosts file maps each node the plan uses)")


def launch_script(inst: Instance, plan: Plan, framework: str, m: dict[str, Any],
                  entry: str | None = None, port: int = DEFAULT_PORT) -> str:
    """The launch script of ``plan`` for ``framework`` ("megatron" or "torch"), from its
    rank map ``m`` (with the hosts' addresses; Megatron-LM's export for "megatron")."""
    if framework not in DEFAULT_ENTRY:
        raise PlanError("--to", f"unknown launcher {framework!r} (launch-megatron, launch-torch)")
    # torch: the entry reads its stage, replica and layers from the GEOTRAIN_* variables
    args = m.get("args", [])
    entry = entry or DEFAULT_ENTRY[framework]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for r in m["ranks"]:
        by_node.setdefault(r["node"], []).append(r)
    lines = [
        "#!/usr/bin/env bash",
        f"# geotrain-opt launch ({framework}): instance {inst.name}, {plan.replicas} replica(s) x {plan.stages} "
        f"stage(s) x tensor-parallel {plan.tp}, world size {m['world_size']}",
        "# Run on every node at once: bash THIS_FILE NODE   (nodes: " + ", ".join(by_node) + ")",
        "# Each process gets RANK in Megatron-LM's tp-dp-pp order and LOCAL_RANK = its GPU on the node.",
        "set -euo pipefail",
        f"export MASTER_ADDR={m['ranks'][0]['env']['MASTER_ADDR']} MASTER_PORT={int(port)} "
        f"WORLD_SIZE={m['world_size']}",
        f"ENTRY=${{GEOTRAIN_ENTRY:-{shlex.quote(entry)}}} PYTHON=${{PYTHON:-python}}",
        "ARGS=(" + " ".join(shlex.quote(a) for a in args) + ")",
        'case "${1:-}" in',
    ]
    keep = ("RANK", "LOCAL_RANK", "GEOTRAIN_REPLICA", "GEOTRAIN_STAGE", "GEOTRAIN_TENSOR_RANK",
            "GEOTRAIN_LAYERS", "GEOTRAIN_MICRO_BATCHES", "GEOTRAIN_MESH")
    for node, ranks in by_node.items():
        lines.append(f"  {shlex.quote(node)})  # {ranks[0]['host']}, {len(ranks)} GPU(s)")
        for r in sorted(ranks, key=lambda r: r["local_rank"]):
            env = " ".join(f"{k}={shlex.quote(r['env'][k])}" for k in keep)
            lines.append(f'    {env} "$PYTHON" "$ENTRY" "${{ARGS[@]}}" &   # {r["device"]}')
        lines.append("    ;;")
    lines += ['  *) echo "usage: $0 NODE (one of: ' + " ".join(by_node) + ')" >&2; exit 2;;', "esac",
              "status=0",      # every process's exit status, not only the last one's
              'for pid in $(jobs -p); do wait "$pid" || status=$?; done', "exit $status", ""]
    return "\n".join(lines)

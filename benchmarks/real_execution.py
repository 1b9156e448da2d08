"""Run a plan for real and compare measured, simulated and analytic iteration time
(not a test; needs root, iproute2, ethtool and the optional torch extra:
``pip install torch==2.13.0``).

    python benchmarks/real_execution.py INSTANCE PLAN [--steps 6] [--schedule gpipe|1f1b]

PLAN is a plan or result file, or what ``geotrain-opt export-plan INSTANCE RESULT
--to torch-pipelining`` writes: its rank map (rank r = replica r // P, stage r % P),
layer ranges and schedule class are what this script runs.

What runs: one process per grid slot, each in its own network namespace, on gloo.
A tiny stand-in model is split at the plan's cuts; every layer does a small real
computation and then sleeps up to its target time (the layer's FLOP / the device's
speed, split forward/backward like the simulator), so device speeds are emulated.
Stages exchange activations and gradients of exactly A bytes with
``torch.distributed.pipelining`` (ScheduleGPipe or Schedule1F1B); after the
pipeline, each stage's replicas all-reduce grad_bytes * N_j bytes over gloo.

The network: every rank's veth ends in a router namespace where a user-space L2
bridge (netem is not in this kernel) delays each frame by the instance's one-way
latency of its (source, destination) pair; HTB classes on the router ports cap
each pair at the instance's bandwidth. Addresses are 10.77.0.x inside namespaces
this script creates and removes.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------ network lab
def sh(cmd: str, check: bool = True) -> None:
    subprocess.run(cmd, shell=True, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def net_up(n: int, alpha, beta) -> subprocess.Popen:
    net_down(n)
    sh("ip netns add gtr")
    for r in range(n):
        sh(f"ip netns add gt{r}")
        sh(f"ip link add vr{r} type veth peer name eth0 netns gt{r}")
        sh(f"ip link set vr{r} netns gtr")
        sh(f"ip -n gt{r} addr add 10.77.0.{r + 1}/24 dev eth0")
        sh(f"ip -n gt{r} link set eth0 up && ip -n gt{r} link set lo up && ip -n gtr link set vr{r} up")
        # frames re-injected by the bridge must carry real checksums
        sh(f"ip netns exec gt{r} ethtool -K eth0 tx off rx off")
        # keep TCP's window between messages (a WAN trainer's long-lived connections
        # would): the default re-runs slow start after every idle gap
        sh(f"ip netns exec gt{r} sysctl -qw net.ipv4.tcp_slow_start_after_idle=0")
        sh(f"ip -n gt{r} route change 10.77.0.0/24 dev eth0 initcwnd 64 initrwnd 64")
        sh(f"ip netns exec gtr ethtool -K vr{r} tx off rx off")
    for d in range(n):                     # bandwidth per (source, destination) pair
        sh(f"ip netns exec gtr tc qdisc add dev vr{d} root handle 1: htb default 999 r2q 1000")
        for s in range(n):
            if s == d:
                continue
            rate = max(1, int(beta[s][d] * 8 / 1000))        # kbit/s
            sh(f"ip netns exec gtr tc class add dev vr{d} parent 1: classid 1:{s + 10} htb rate {rate}kbit "
               f"burst {max(15000, rate // 8 // 50)}")
            sh(f"ip netns exec gtr tc filter add dev vr{d} protocol ip parent 1: prio 1 u32 "
               f"match ip src 10.77.0.{s + 1}/32 flowid 1:{s + 10}")
    cfg = Path("/tmp/geotrain-netlab.json")
    cfg.write_text(json.dumps({"ports": [f"vr{r}" for r in range(n)], "delay_s": alpha}))
    bridge = subprocess.Popen(["ip", "netns", "exec", "gtr", sys.executable, __file__, "--bridge", str(cfg)])
    time.sleep(0.5)
    return bridge


def net_down(n: int) -> None:
    for r in range(n):
        sh(f"ip netns del gt{r}", check=False)
    sh("ip netns del gtr", check=False)


def bridge_main(cfg_path: str) -> None:
    """L2 bridge with a one-way delay per (source port, destination port)."""
    cfg = json.loads(Path(cfg_path).read_text())
    delay = cfg["delay_s"]
    socks = []
    for ifname in cfg["ports"]:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((ifname, 0))
        s.setblocking(False)
        socks.append(s)
    port_of = {s.fileno(): i for i, s in enumerate(socks)}
    mac_port: dict[bytes, int] = {}
    heap: list = []
    seq = 0
    while True:
        timeout = max(0.0, heap[0][0] - time.monotonic()) if heap else 0.5
        ready, _, _ = select.select(socks, [], [], timeout)
        now = time.monotonic()
        for s in ready:
            src = port_of[s.fileno()]
            while True:
                try:
                    frame, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == socket.PACKET_OUTGOING:
                    continue
                mac_port[frame[6:12]] = src
                dst = mac_port.get(frame[0:6])
                for d in ([dst] if dst is not None and dst != src else [p for p in range(len(socks)) if p != src]):
                    heapq.heappush(heap, (now + delay[src][d], seq, d, frame))
                    seq += 1
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, d, frame = heapq.heappop(heap)
            try:
                socks[d].send(frame)
            except OSError:
                pass


# ------------------------------------------------------------------ worker
def worker_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    spec = json.loads(Path(args.spec).read_text())
    rank, D, P = args.rank, spec["D"], spec["P"]
    k, j = divmod(rank, P)
    dist.init_process_group("gloo", rank=rank, world_size=D * P)
    pp_groups = [dist.new_group([kk * P + jj for jj in range(P)]) for kk in range(D)]
    dp_groups = [dist.new_group([kk * P + jj for kk in range(D)]) for jj in range(P)]
    fwd_s, bwd_s = spec["fwd_s"][k][j], spec["bwd_s"][k][j]      # per layer (incl. head) per micro-batch
    shape = spec["shape"]

    class Sleep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, f, b):
            ctx.b = b
            t = time.perf_counter()
            y = x * w                                    # the real (small) computation
            left = f - (time.perf_counter() - t)
            if left > 0:
                time.sleep(left)
            return y

        @staticmethod
        def backward(ctx, g):
            t = time.perf_counter()
            out = g * 1.0
            left = ctx.b - (time.perf_counter() - t)
            if left > 0:
                time.sleep(left)
            return out, g.sum(dim=tuple(range(g.dim() - 1))), None, None

    class Layer(torch.nn.Module):
        def __init__(self, f, b):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(shape[-1]))
            self.f, self.b = f, b

        def forward(self, x):
            return Sleep.apply(x, self.w, self.f, self.b)

    stage_mod = torch.nn.Sequential(*[Layer(f, b) for f, b in zip(fwd_s, bwd_s)])
    stage = PipelineStage(stage_mod, j, P, torch.device("cpu"), group=pp_groups[k])
    m = spec["micro_batches"][k]
    sched_cls = ScheduleGPipe if spec["schedule"] == "gpipe" else Schedule1F1B
    schedule = sched_cls(stage, n_microbatches=m, loss_fn=lambda out, tgt: out.float().mean())
    grad = torch.zeros(max(1, int(spec["grad_bytes"][j] / 4)))  # the stage's gradients, as bytes
    times = []
    for it in range(args.steps):
        dist.barrier()
        t = time.perf_counter()
        x = torch.randn(m * shape[0], *shape[1:])
        if j == 0:
            schedule.step(x)
        elif j == P - 1:
            schedule.step(target=torch.zeros(m * shape[0]))
        else:
            schedule.step()
        if D > 1:
            dist.all_reduce(grad, group=dp_groups[j])
        took = torch.tensor([time.perf_counter() - t])
        dist.all_reduce(took, op=dist.ReduceOp.MAX)
        times.append(float(took))
    if rank == 0:
        print(json.dumps({"iteration_s": times}), flush=True)
    dist.destroy_process_group()


# ------------------------------------------------------------------ orchestration
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("instance", nargs="?")
    ap.add_argument("plan", nargs="?")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--schedule", choices=("gpipe", "1f1b"))
    ap.add_argument("--bridge")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--spec")
    args = ap.parse_args()
    if args.bridge:
        return bridge_main(args.bridge)
    if args.worker:
        return worker_main(args)

    from geotrain_opt import evaluate, load_instance
    from geotrain_opt.io.export_plan import load_plan_or_export
    from geotrain_opt.cost import stagecost as sc
    from geotrain_opt.cost.simulate import simulate
    inst = load_instance(args.instance)
    plan, export = load_plan_or_export(args.plan)
    if export is not None and not args.schedule:
        args.schedule = "gpipe" if export.get("schedule_class") == "ScheduleGPipe" else "1f1b"
    if args.schedule:
        inst = inst.with_options(schedule=args.schedule)
    a = inst.arrays
    grid = plan.grid_indices(inst.index)
    D, P = plan.replicas, plan.stages
    rf = 1.0 / (3 + (1 if inst.model.recompute == "full" else 0))
    fwd = [[[] for _ in range(P)] for _ in range(D)]
    bwd = [[[] for _ in range(P)] for _ in range(D)]
    for k in range(D):
        for j in range(P):
            g = grid[k][j]
            for layer in range(plan.cuts[j], plan.cuts[j + 1]):
                w = a.w_prefix[layer + 1] - a.w_prefix[layer]
                fwd[k][j].append(w * rf / a.speed[g])
                bwd[k][j].append(w * (1 - rf) / a.speed[g])
            if j == P - 1:
                fwd[k][j].append(a.head_work / 3 / a.speed[g])
                bwd[k][j].append(2 * a.head_work / 3 / a.speed[g])
    floats = int(a.A / 4)                     # fp32 messages of A bytes
    spec = {"D": D, "P": P, "schedule": inst.options.schedule, "micro_batches": list(plan.micro_batches),
            "fwd_s": fwd, "bwd_s": bwd, "shape": [1, max(1, floats // 1000), 1000],
            "grad_bytes": [a.grad_bytes * float(sc.stage_params(a, plan.cuts[j], plan.cuts[j + 1], j == 0, j == P - 1))
                           for j in range(P)]}
    spec_path = Path("/tmp/geotrain-real-spec.json")
    spec_path.write_text(json.dumps(spec))
    n = D * P
    ranks = [int(grid[r // P][r % P]) for r in range(n)]
    alpha = [[float(a.alpha[ranks[s], ranks[d]]) if s != d else 0.0 for d in range(n)] for s in range(n)]
    beta = [[float(1.0 / a.inv_beta[ranks[s], ranks[d]]) if s != d else 1e12 for d in range(n)] for s in range(n)]
    bridge = net_up(n, alpha, beta)
    procs = []
    try:
        env = dict(os.environ, MASTER_ADDR="10.77.0.1", MASTER_PORT="29511", GLOO_SOCKET_IFNAME="eth0",
                   WORLD_SIZE=str(n), PYTHONPATH=str(ROOT))
        for r in range(n):
            procs.append(subprocess.Popen(["ip", "netns", "exec", f"gt{r}", sys.executable, __file__, "--worker",
                                           "--rank", str(r), "--spec", str(spec_path), "--steps", str(args.steps)],
                                          env=env, stdout=subprocess.PIPE, text=True))
        out = procs[0].communicate(timeout=600)[0]
        for p in procs[1:]:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        bridge.kill()
        net_down(n)
    times = json.loads(out.strip().splitlines()[-1])["iteration_s"][2:]   # first two warm up
    measured = statistics.median(times)
    ev = evaluate(inst, plan)
    sim = simulate(inst, plan)
    rv = simulate(inst, plan, rendezvous=True)
    print(f"| {inst.name} | {D}x{P} | {inst.options.schedule} | {measured:.4f} | {sim.time_s:.4f} | "
          f"{rv.time_s:.4f} | {ev.time_s:.4f} | {(rv.time_s / measured - 1):+.1%} | {(ev.time_s / measured - 1):+.1%} |")


if __name__ == "__main__":
    main()

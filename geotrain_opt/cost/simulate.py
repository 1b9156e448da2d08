"""Discrete-event simulation of one training iteration of a plan.

Executes the schedule operation by operation: every forward and backward of every
micro-batch on every stage (1F1B or GPipe order), every activation and gradient
transfer on a link resource (serialisation A/beta, then latency alpha), and the
data-parallel ring all-reduce step by step (2(D-1) steps of S/D bytes). It measures
what the analytic model of formulations/model.md §3 estimates in closed form, so the two can be
compared (benchmarks/model_fidelity.py, formulations/simulator.md).

Options:
* shared WAN capacity (``capacity_gbps``, formulations/model.md §3.2) is always
  simulated: every transfer from region r to r' also holds that pair's capacity
  resource for bytes / C(r->r'), in order of readiness;
* ``shared_links``: transfers between two regions share one link per direction
  and region pair (capacity = that pair's bandwidth) instead of one per device pair,
  and node NICs (``nic_gbps``) are shared resources per node and direction instead
  of the static share nic/n of the analytic model;
* ``rendezvous``: a send starts only once the receiver has posted its receive and
  that notice has reached the sender (one more latency), as blocking P2P does.

Forward and backward split a stage's per-micro-batch time like the FLOP: forward
F/(3F) of the layers' work (F/(4F) with full recomputation, whose backward redoes
the forward) and one third of the LM head's. Exposed communication (``exposed_comm``
kappa; ``host_stack_gbps`` gamma): each forward and each backward of stage j also
holds the stage for e_{j-1} + e_j, e = kappa o + A/gamma [the hop leaves the node], the part
of its four transfers that does not overlap compute (counted as waiting, not busy, in
the energy). Gradient accumulation runs a
replica's micro-batches in S_k flushes, one after the other on every stage.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from geotrain_opt.cost import stagecost as sc
from geotrain_opt.problem.plan import split_micro_batches
from geotrain_opt.cost.evaluator import check_plan, evaluate, resolve
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan


@dataclass
class SimResult:
    time_s: float
    pipeline_s: float
    allreduce_s: float
    energy_j: float
    busy_s: dict[str, float]
    wait_s: dict[str, float]
    replica_end_s: list[float]
    ops: list[tuple] = field(default_factory=list)   # (device, kind, micro-batch, start, end)


def flushed_order(P: int, j: int, m: int, steps: int, schedule: str) -> list[tuple[str, int]]:
    """Stage j's operations over S_k = min(steps, m) flushes, one after the other."""
    S = max(1, min(steps, m))
    out: list[tuple[str, int]] = []
    first = 0
    for size in split_micro_batches(m, S):
        out += [(kind, first + i) for kind, i in stage_order(P, j, size, schedule)]
        first += size
    return out


def stage_order(P: int, j: int, m: int, schedule: str) -> list[tuple[str, int]]:
    """The order in which stage j runs its operations."""
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in reversed(range(m))]
    warm = min(P - j - 1, m)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < m:
        if f < m:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


class _Links:
    """Link resources: FIFO per directed device pair, or per directed region pair."""

    def __init__(self, inst: Instance, shared: bool) -> None:
        self.inst, self.shared = inst, shared
        self.free_at: dict[tuple, float] = {}
        nodes: dict[str, int] = {}
        self.node = [nodes.setdefault(d.node, len(nodes)) for d in inst.devices]
        self.nic = [d.nic_bps for d in inst.devices]

    def raw_inv_beta(self, u: int, v: int) -> float:
        """s/byte of the link u -> v itself, without the NIC share (per pair: an n x n
        array costs a second at 4,096 GPUs)."""
        b = float(self.inst.beta[u, v])
        return 0.0 if np.isinf(b) else 1.0 / b

    def keys(self, u: int, v: int) -> list[tuple[tuple, float]]:
        """The resources a transfer u -> v occupies, with seconds per byte on each."""
        a = self.inst.arrays
        ru, rv = int(a.region[u]), int(a.region[v])
        cap = [(("capacity", ru, rv), float(a.inv_cap[ru, rv]))] if a.inv_cap[ru, rv] > 0 else []
        if not self.shared:
            return [(("pair", u, v), float(a.inv_beta[u, v]))] + cap    # static NIC share included
        if ru != rv:
            out = [(("region", ru, rv), self.raw_inv_beta(u, v))]
        else:
            out = [(("pair", u, v), self.raw_inv_beta(u, v))]
        if self.node[u] != self.node[v]:
            if self.nic[u]:
                out.append((("nic-out", self.node[u]), 1.0 / self.nic[u]))
            if self.nic[v]:
                out.append((("nic-in", self.node[v]), 1.0 / self.nic[v]))
        return out + cap

    def transfer(self, u: int, v: int, ready: float, nbytes: float) -> float:
        """Start no earlier than ``ready`` and once every resource is free; returns the
        arrival time. A resource is held for the message's bytes at its own rate: a
        region pair's shared capacity for A/C, the device pair's link for A/beta
        (formulations/simulator.md)."""
        a = self.inst.arrays
        ks = self.keys(u, v)
        start = max([ready] + [self.free_at.get(k, 0.0) for k, _ in ks])
        for k, spb in ks:
            self.free_at[k] = start + nbytes * spb
        return start + max(nbytes * spb for _, spb in ks) + a.alpha[u, v]


def _rings(a, plan: Plan, grid, stage_end: list[list[float]], links: _Links,
           ops_log: list | None) -> tuple[float, float]:
    """Every stage's ring all-reduce (2(D-1) steps of N_j/D bytes per edge), the steps
    in order of readiness across stages (a step of the stage whose previous step ended
    first goes first: shared capacity is FIFO). Returns (longest ring, last end)."""
    D, P, c = plan.replicas, plan.stages, plan.cuts
    if D == 1:
        return 0.0, 0.0
    nbytes = [a.ring_bytes * float(sc.stage_params(a, c[j], c[j + 1], j == 0, j == P - 1)) / D for j in range(P)]
    t0 = [max(stage_end[k][j] for k in range(D)) for j in range(P)]
    heap = [(t0[j], j, 0) for j in range(P)]
    heapq.heapify(heap)
    longest = end = 0.0
    while heap:
        t, j, step = heapq.heappop(heap)
        t = max(links.transfer(int(grid[k][j]), int(grid[(k + 1) % D][j]), t, nbytes[j]) for k in range(D))
        if step + 1 < 2 * (D - 1):
            heapq.heappush(heap, (t, j, step + 1))
            continue
        if ops_log is not None:
            ops_log += [(plan.grid[k][j], "AR", -1, t0[j], t) for k in range(D)]
        longest, end = max(longest, t - t0[j]), max(end, t)
    return longest, end


class SimulationStopped(Exception):
    """``stop()`` said so before the simulation ended."""


def simulate(inst: Instance, plan: Plan, shared_links: bool = False, rendezvous: bool = False,
             record: bool = False, stop: Callable[[], bool] | None = None) -> SimResult:
    """``stop`` (polled every 1,024 transfers): raise :class:`SimulationStopped` once it
    says so (a whole command's deadline)."""
    check_plan(inst, plan)
    inst, plan = resolve(inst, plan)          # its micro-batch size and recomputation (§11), TP groups (§14)
    a = inst.arrays
    m = inst.model
    # §10: each device at its clock: speed and busy power of that level
    level = {g: dict(d.levels) for g, d in zip(inst.ids, inst.devices)}
    f_of = {g: plan.clock(g) for g in plan.devices}
    grid = plan.grid_indices(inst.index)
    D, P, c = plan.replicas, plan.stages, plan.cuts
    rf = m.layer_forward_flop() / m.layer_work_flop()      # the forward share of a layer's work
    fwd, bwd = [], []
    for j in range(P):
        layers = float(sc.stage_work(a, c[j], c[j + 1], False))
        head = a.head_work if j == P - 1 else 0.0
        fwd.append(layers * rf + head / 3)
        bwd.append(layers * (1 - rf) + 2 * head / 3)
    # exposed communication of each slot per forward (and per backward)
    exposed = [[(float(sc.exposed(a, grid[k][j - 1], grid[k][j])) if j else 0.0)
                + (float(sc.exposed(a, grid[k][j], grid[k][j + 1])) if j < P - 1 else 0.0)
                for j in range(P)] for k in range(D)]
    links = _Links(inst, shared_links)
    schedule = inst.options.schedule
    ops_log: list[tuple] = []
    busy = {g: 0.0 for g in plan.devices}
    stage_end = [[0.0] * P for _ in range(D)]

    # A stage runs its next operation once it is idle and the operation's input has
    # arrived. Transfers wait in a heap by ready time and are put on their link in
    # that order: every operation that can run is run before the next transfer is
    # delivered, so deliveries come in non-decreasing ready time and FIFO holds.
    orders = [[flushed_order(P, j, plan.micro_batches[k], a.steps, schedule) for j in range(P)] for k in range(D)]
    pos = [[0] * P for _ in range(D)]
    idle_at = [[0.0] * P for _ in range(D)]
    arrived: dict[tuple, float] = {}      # (k, j, kind, i) -> input at stage j
    posted: dict[tuple, float] = {}       # rendezvous: receive posted at
    parked: dict[tuple, tuple] = {}       # rendezvous: transfers whose receive is not posted yet
    pending: list[tuple] = []             # (ready, seq, k, j_from, j_to, kind, i)
    seq = 0

    def push(ready: float, k: int, jf: int, jt: int, kind: str, i: int) -> None:
        nonlocal seq
        heapq.heappush(pending, (ready, seq, k, jf, jt, kind, i))
        seq += 1

    def try_start(k: int, j: int) -> bool:
        if pos[k][j] >= len(orders[k][j]):
            return False
        kind, i = orders[k][j][pos[k][j]]
        need = None if (kind == "F" and j == 0) or (kind == "B" and j == P - 1) else (k, j, kind, i)
        if need is not None and need not in arrived:
            if rendezvous and need not in posted:
                posted[need] = idle_at[k][j]
                if need in parked:
                    push(*parked.pop(need))
            return False
        g = int(grid[k][j])
        start = max(idle_at[k][j], arrived[need] if need else 0.0)
        compute = (fwd[j] if kind == "F" else bwd[j]) / (a.speed[g] * f_of[plan.grid[k][j]])
        end = start + compute + exposed[k][j]
        idle_at[k][j] = stage_end[k][j] = end
        busy[plan.grid[k][j]] += compute
        pos[k][j] += 1
        if record:
            ops_log.append((plan.grid[k][j], kind, i, start, end))
        if kind == "F" and j < P - 1:
            push(end, k, j, j + 1, "F", i)
        if kind == "B" and j > 0:
            push(end, k, j, j - 1, "B", i)
        return True

    for k in range(D):
        for j in range(P):
            while try_start(k, j):
                pass
    popped = 0
    while pending:
        popped += 1
        if stop is not None and popped % 1024 == 0 and stop():
            raise SimulationStopped
        ready, _s, k, jf, jt, kind, i = heapq.heappop(pending)
        u, v = int(grid[k][jf]), int(grid[k][jt])
        key = (k, jt, kind, i)
        if rendezvous:
            if key not in posted:
                parked[key] = (ready, k, jf, jt, kind, i)
                continue
            # the receiver's "ready" notice travels back before the data goes out
            ready = max(ready, posted[key] + a.alpha[v, u])
        arrived[key] = links.transfer(u, v, ready, a.A)
        # only the receiving stage can start anything new: every other stage was
        # blocked before and its inputs did not change
        while try_start(k, jt):
            pass
    if parked or any(pos[k][j] < len(orders[k][j]) for k in range(D) for j in range(P)):
        raise RuntimeError("simulation deadlocked")   # a bug, not a user error

    pipe_end = [max(stage_end[k]) for k in range(D)]
    pipeline = max(pipe_end)
    # ring all-reduce of each stage, step by step, after the last backward of the stage
    allreduce, ar_end = _rings(a, plan, grid, stage_end, links, ops_log if record else None)
    ar_end = max(ar_end, pipeline)
    T = ar_end
    energy = 0.0
    wait = {}
    for g_id, b in busy.items():
        g = inst.index[g_id]
        wait[g_id] = T - b
        p_busy = level[g_id][f_of[g_id]] * inst.pue_region.get(inst.devices[g].region, 1.0)
        energy += p_busy * b + a.p_wait[g] * (T - b)
    energy += evaluate(inst, plan).network_j          # same bytes cross regions
    return SimResult(T, pipeline, allreduce, energy, busy, wait, pipe_end, ops_log)


# The model-vs-simulator guard: plans with at most this many operations are simulated
# after a solve (a third of a second at the limit on the 2-core development machine:
# 180,000-255,000 operations/s on greedy plans of 28-256 GPUs since only the receiving
# stage is retried; 58,000/s before), stopped at the command's deadline, and a
# difference beyond SIM_WARN_RTOL is reported.
SIM_MAX_OPS = 60_000
SIM_WARN_RTOL = 0.10


def simulation_check(inst: Instance, plan: Plan, analytic_s: float, max_ops: int = SIM_MAX_OPS,
                     stop: Callable[[], bool] | None = None) -> dict | None:
    """The plan's simulated iteration time against the analytic one (None: too many
    operations to simulate cheaply, or ``stop()`` said so first): ``{"time_s",
    "analytic_s", "error", "warning"}``, ``error`` = simulated / analytic - 1,
    ``warning`` when it passes SIM_WARN_RTOL."""
    ops = 2 * plan.stages * sum(plan.micro_batches) + 2 * max(plan.replicas - 1, 0) * plan.replicas * plan.stages
    if ops > max_ops or analytic_s <= 0:
        return None
    try:
        sim = simulate(inst, plan, stop=stop).time_s
    except SimulationStopped:
        return None
    err = sim / analytic_s - 1.0
    out = {"time_s": sim, "analytic_s": analytic_s, "error": err, "operations": ops}
    if abs(err) > SIM_WARN_RTOL:
        out["warning"] = (f"the simulator times this plan at {sim:.6g} s, {err:+.1%} from the cost model's "
                          f"{analytic_s:.6g} s: the model misses part of this schedule (formulations/simulator.md)")
    return out


"""Discrete-event simulation of one training iteration of a plan.

Executes the schedule operation by operation: every forward and backward of every
micro-batch on every stage (1F1B or GPipe order), every activation and gradient
transfer on a link resource (serialisation A/beta, then latency alpha), and the
data-parallel ring all-reduce step by step (2(D-1) steps of S/D bytes). It measures
what the analytic model of PROBLEM.md §3 estimates in closed form, so the two can be
compared (benchmarks/model_fidelity.py, formulations/simulator.md).

Options:
* ``shared_links``: transfers between two regions share one link per direction
  and region pair (capacity = that pair's bandwidth) instead of one per device pair;
* ``rendezvous``: a send starts only once the receiver has posted its receive and
  that notice has reached the sender (one more latency), as blocking P2P does.

Forward and backward split a stage's per-micro-batch time like the FLOP: forward
F/(3F) of the layers' work (F/(4F) with full recomputation, whose backward redoes
the forward) and one third of the LM head's.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from .evaluator import evaluate
from .instance import Instance
from .plan import Plan


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

    def key(self, u: int, v: int) -> tuple:
        a = self.inst.arrays
        if self.shared and a.region[u] != a.region[v]:
            return ("region", int(a.region[u]), int(a.region[v]))
        return ("pair", u, v)

    def transfer(self, u: int, v: int, ready: float, nbytes: float) -> float:
        """Start no earlier than ``ready``; returns the arrival time."""
        a = self.inst.arrays
        k = self.key(u, v)
        start = max(ready, self.free_at.get(k, 0.0))
        busy = nbytes * a.inv_beta[u, v]
        self.free_at[k] = start + busy
        return start + busy + a.alpha[u, v]


def simulate(inst: Instance, plan: Plan, shared_links: bool = False, rendezvous: bool = False,
             record: bool = False) -> SimResult:
    a = inst.arrays
    m = inst.model
    grid = plan.grid_indices(inst.index)
    D, P, c = plan.replicas, plan.stages, plan.cuts
    rf = 1.0 / (3 + (1 if m.recompute == "full" else 0))
    fwd, bwd = [], []
    for j in range(P):
        layers = a.w_prefix[c[j + 1]] - a.w_prefix[c[j]]
        head = a.head_work if j == P - 1 else 0.0
        fwd.append(layers * rf + head / 3)
        bwd.append(layers * (1 - rf) + 2 * head / 3)
    links = _Links(inst, shared_links)
    schedule = inst.options.schedule
    ops_log: list[tuple] = []
    busy = {g: 0.0 for g in plan.devices}
    stage_end = [[0.0] * P for _ in range(D)]

    # A stage runs its next operation once it is idle and the operation's input has
    # arrived. Transfers wait in a heap by ready time and are put on their link in
    # that order: every operation that can run is run before the next transfer is
    # delivered, so deliveries come in non-decreasing ready time and FIFO holds.
    orders = [[stage_order(P, j, plan.micro_batches[k], schedule) for j in range(P)] for k in range(D)]
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
        end = start + (fwd[j] if kind == "F" else bwd[j]) / a.speed[g]
        idle_at[k][j] = stage_end[k][j] = end
        busy[plan.grid[k][j]] += end - start
        pos[k][j] += 1
        if record:
            ops_log.append((plan.grid[k][j], kind, i, start, end))
        if kind == "F" and j < P - 1:
            push(end, k, j, j + 1, "F", i)
        if kind == "B" and j > 0:
            push(end, k, j, j - 1, "B", i)
        return True

    while True:
        for k in range(D):
            for j in range(P):
                while try_start(k, j):
                    pass
        if not pending:
            break
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
    if parked or any(pos[k][j] < len(orders[k][j]) for k in range(D) for j in range(P)):
        raise RuntimeError("simulation deadlocked")   # a bug, not a user error

    pipe_end = [max(stage_end[k]) for k in range(D)]
    pipeline = max(pipe_end)
    # ring all-reduce of each stage, step by step, after the last backward of the stage
    ar_end = pipeline
    allreduce = 0.0
    if D > 1:
        for j in range(P):
            nbytes = a.grad_bytes * (ev_stage_params(inst, plan, j)) / D
            t = max(stage_end[k][j] for k in range(D))
            t0 = t
            for _step in range(2 * (D - 1)):
                arrivals = [links.transfer(int(grid[k][j]), int(grid[(k + 1) % D][j]), t, nbytes) for k in range(D)]
                t = max(arrivals)
            allreduce = max(allreduce, t - t0)
            ar_end = max(ar_end, t)
    T = ar_end
    energy = 0.0
    wait = {}
    for g_id, b in busy.items():
        g = inst.index[g_id]
        wait[g_id] = T - b
        energy += a.p_busy[g] * b + a.p_wait[g] * (T - b)
    energy += evaluate(inst, plan).network_j          # same bytes cross regions
    return SimResult(T, pipeline, allreduce, energy, busy, wait, pipe_end, ops_log)


def ev_stage_params(inst: Instance, plan: Plan, j: int) -> float:
    a = inst.arrays
    c, P = plan.cuts, plan.stages
    return float(a.par_prefix[c[j + 1]] - a.par_prefix[c[j]] + (a.emb_params if j == 0 else 0.0)
                 + (a.head_params if j == P - 1 else 0.0))

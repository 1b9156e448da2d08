"""The cost model of formulations/model.md §3, twice: a literal reference and a batched path.

``evaluate`` follows formulations/model.md term by term in plain Python so that a reader
can check it against the text; ``BatchEvaluator`` computes the same numbers for
many plans of one (D, P) shape at once with numpy and is what solvers call in
their hot loops. A property test keeps the two equal.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost import stagecost as sc
from geotrain_opt.cost.window import window_time
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.problem.tolerances import LIMIT_RTOL
from geotrain_opt.cost.plan_checks import check_plan, plan_errors, plan_instance, resolve

__all__ = ["BatchEvaluator", "BatchResult", "Evaluation", "check_plan", "evaluate", "plan_errors", "plan_instance",
           "resolve"]


@dataclass
class Evaluation:
    feasible: bool
    violations: list[str]
    time_s: float
    energy_j: float
    pipeline_s: float                 # max_k T_k
    allreduce_s: float                # max_j R_j (or the shared WAN floor, §3.2); T <= pipeline + allreduce
    busy_j: float
    wait_j: float
    network_j: float
    memory_bytes: dict[str, float]
    replica_times_s: list[float] = field(default_factory=list)
    stage_allreduce_s: list[float] = field(default_factory=list)
    cross_region_bytes: float = 0.0
    within_limits: bool = True        # ε-constraints and max_devices of the objective
    limit_violations: list[str] = field(default_factory=list)
    cost_usd: float | None = None     # §9: when the instance prices GPU hours or egress
    carbon_g: float | None = None     # §9: when a region has a carbon intensity
    stage_sync_start_s: list[float] = field(default_factory=list)   # s_j: stage j's ring starts (§3.3)

    @property
    def acceptable(self) -> bool:
        return self.feasible and self.within_limits

    def to_dict(self) -> dict[str, Any]:
        return {
            "feasible": self.feasible, "violations": list(self.violations),
            "time_s": self.time_s, "energy_j": self.energy_j,
            "pipeline_s": self.pipeline_s, "allreduce_s": self.allreduce_s,
            "busy_j": self.busy_j, "wait_j": self.wait_j, "network_j": self.network_j,
            "memory_bytes": dict(self.memory_bytes),
            "replica_times_s": list(self.replica_times_s),
            "stage_allreduce_s": list(self.stage_allreduce_s),
            "stage_sync_start_s": list(self.stage_sync_start_s),
            "cross_region_bytes": self.cross_region_bytes,
            "within_limits": self.within_limits, "limit_violations": list(self.limit_violations),
        } | ({"cost_usd": self.cost_usd} if self.cost_usd is not None else {}) \
          | ({"carbon_g": self.carbon_g} if self.carbon_g is not None else {})


def evaluate(inst: Instance, plan: Plan) -> Evaluation:
    """Evaluate one plan exactly as formulations/model.md §3 states it, one term per
    helper below, in the order of the text."""
    inst = plan_instance(inst, plan)
    violations = check_plan(inst, plan, costable=True)
    inst, plan = resolve(inst, plan)          # tensor-parallel groups as devices (§14)
    x = _Terms(inst, plan)
    Tk = x.pipelines()
    R = x.rings()
    pipeline = max(Tk)
    wan = x.wan_sync()
    allreduce = max(R + [wan])
    starts = x.sync_starts(Tk)
    T = max([pipeline] + [s + r for s, r in zip(starts, R)] + [starts[-1] + wan])
    busy, wait, network, cross = x.energy(T)
    E = busy + wait + network
    cost, carbon = x.priced(T)
    memory = x.memory(violations)
    if inst.physical is not None:             # per GPU: each of a group's t GPUs holds 1/t (§14)
        names = {d.id: [inst.physical.ids[i] for i in grp] for d, grp in zip(inst.devices, inst.groups)}
        memory = {d: b / len(names[g]) for g, b in memory.items() for d in names[g]}
    gpus = sum(len(inst.groups[g]) if inst.groups else 1 for row in x.g_idx for g in row)
    limits = limit_violations(inst, T, E, gpus, cost, carbon)
    return Evaluation(not violations, violations, T, E, pipeline, allreduce, busy, wait, network,
                      memory, Tk, R, cross, not limits, limits, cost, carbon, starts)


class _Terms:
    """The terms of one plan's cost (model.md §3, §9, §10), written as the text
    states them: a reader checks each method against its paragraph."""

    def __init__(self, inst: Instance, plan: Plan) -> None:
        self.inst, self.plan = inst, plan
        a = self.a = inst.arrays
        P, D = self.P, self.D = plan.stages, plan.replicas
        g_idx = self.g_idx = plan.grid_indices(inst.index)
        c = plan.cuts
        self.mk = mk = plan.micro_batches
        # -- per-stage work W_j, parameters N_j, activations act_j (logits apart)
        W, N, act = [], [], []
        for j in range(P):
            lo, hi = c[j], c[j + 1]
            W.append(float(a.w_prefix[hi] - a.w_prefix[lo]) + (a.head_work if j == P - 1 else 0.0))
            N.append(float(a.par_prefix[hi] - a.par_prefix[lo]) + (a.emb_params if j == 0 else 0.0)
                     + (a.head_params if j == P - 1 else 0.0))
            act.append(float(a.act_prefix[hi] - a.act_prefix[lo]))
        self.N, self.act = N, act
        # §10: a device at clock f computes at f * speed and draws that clock's busy power
        if plan.clocks:
            level = {g: dict(inst.devices[g].levels) for row in g_idx for g in row}
            f_of = [[plan.clock(plan.grid[k][j]) for j in range(P)] for k in range(D)]
            self.p_busy = [[level[g_idx[k][j]][f_of[k][j]] * inst.pue_region.get(inst.devices[g_idx[k][j]].region, 1.0)
                            for j in range(P)] for k in range(D)]
        else:
            f_of = [[1.0] * P for _ in range(D)]
            self.p_busy = [[a.p_busy[g_idx[k][j]] for j in range(P)] for k in range(D)]
        self.t = [[W[j] / (f_of[k][j] * a.speed[g_idx[k][j]]) for j in range(P)] for k in range(D)]
        # the forward's part of t: the layers' forward share and a third of the LM head
        Wf = [float(a.w_prefix[c[j + 1]] - a.w_prefix[c[j]]) * a.fwd_share + (a.head_work / 3 if j == P - 1 else 0.0)
              for j in range(P)]
        self.f = [[Wf[j] / (f_of[k][j] * a.speed[g_idx[k][j]]) for j in range(P)] for k in range(D)]
        steps = inst.options.accumulation_steps
        # flushes S_k = min(S, m_k) of at most q_k = ceil(m_k / S_k) micro-batches
        self.Sk = [min(steps, mk[k]) if mk[k] >= 1 else 1 for k in range(D)]
        self.qk = [-(-mk[k] // self.Sk[k]) for k in range(D)]

    def pipelines(self) -> list[float]:
        """T_k of every replica (beta is the effective bandwidth: NIC shares included)."""
        a, g_idx, t, P, mk, Sk = self.a, self.g_idx, self.t, self.P, self.mk, self.Sk
        opts, dev = self.inst.options, self.inst.devices
        A, kappa, mu = a.A, opts.exposed_comm, a.A * opts.stack_s_per_byte
        Tk = []
        self.drain: list[list[float]] = []
        for k in range(self.D):
            links = [(g_idx[k][j], g_idx[k][j + 1]) for j in range(P - 1)]
            occ = [A * a.inv_beta[u, v] for u, v in links]
            x = [a.alpha[u, v] + o for (u, v), o in zip(links, occ)]
            # exposed time of a message: kappa of its transfer, A / gamma if it leaves the node
            # (over the parallel streams of two tensor-parallel groups, §14)
            streams = self.inst.streams
            e = [0.0] + [kappa * o + (mu / (1.0 if streams is None else streams[u, v]) if dev[u].node != dev[v].node else 0.0)
                         for (u, v), o in zip(links, occ)] + [0.0]     # e_{k,-1} = e_{k,P-1} = 0
            row = [t[k][j] + 2.0 * (e[j] + e[j + 1]) for j in range(P)]
            # the drain from stage j's last backward to stage 0's: d_kj = sum_{i<j} b_ki + x_ki,
            # b_ki = the backward part of t_ki with its two messages' exposed time (§3.3)
            d = [0.0]
            for i in range(P - 1):
                d.append(d[-1] + t[k][i] - self.f[k][i] + e[i] + e[i + 1] + x[i])
            self.drain.append(d)
            link = max(max(occ, default=0.0), self.wan_period(k))
            if a.gpipe:     # all forwards, then all backwards: each phase has its own bottleneck
                f = [self.f[k][j] + e[j] + e[j + 1] for j in range(P)]
                tau = max(max(f), link) + max(max(r - v for r, v in zip(row, f)), link)
            else:
                tau = max(max(row), link)
            fill = sum(row) + 2.0 * sum(x)      # the first micro-batch's way, exposed time included
            T_k = Sk[k] * fill + (mk[k] - Sk[k]) * tau
            if not a.gpipe and mk[k] >= 1:
                # a drained stage's micro-batches: its backward with its two messages, or its link's occupancy
                tail = [max(t[k][j] - self.f[k][j] + e[j] + e[j + 1], occ[j] if j < P - 1 else 0.0) for j in range(P)]
                T_k = max(T_k, window_time(row, x, tau, fill, mk[k], Sk[k], tail))
            Tk.append(T_k)
        return Tk

    def sync_starts(self, Tk: list[float]) -> list[float]:
        """s_j (§3.3): stage j's ring starts once every replica's stage j has run its
        last backward, max_k (T_k - d_kj); T = max(max_k T_k, max_j s_j + R_j, s_{P-1} +
        the shared WAN floor): the rings overlap the drain of the stages before."""
        return [max(T_k - d[j] for T_k, d in zip(Tk, self.drain)) for j in range(self.P)]

    def wan_period(self, k: int) -> float:
        """§3.2: a region pair {r, r'} with a shared capacity carries one message each
        way per period for every hop of the plan between r and r', so replica k, if one
        of its hops is between them, has tau_k >= n_{rr'} A / min(C(r->r'), C(r'->r))."""
        a, g = self.a, self.g_idx
        if not a.shared_wan:
            return 0.0
        n = self._wan_hops = getattr(self, "_wan_hops", None) or Counter(   # the plan's hops per pair, once
            tuple(sorted((int(a.region[g[kk][j]]), int(a.region[g[kk][j + 1]]))))
            for kk in range(self.D) for j in range(self.P - 1))
        mine = {tuple(sorted((int(a.region[g[k][j]]), int(a.region[g[k][j + 1]])))) for j in range(self.P - 1)}
        return max((n[p] * a.A * max(a.inv_cap[p], a.inv_cap[p[::-1]]) for p in mine), default=0.0)

    def wan_sync(self) -> float:
        """§3.2: every stage's ring runs at once, so the ring edges from region r to r'
        share C(r->r'): the sync takes at least their bytes over C(r->r'), plus the least
        latency from r to r' that the last byte still travels."""
        a, g, D = self.a, self.g_idx, self.D
        if D == 1 or not a.shared_wan:
            return 0.0
        load: dict[tuple[int, int], float] = {}
        for j in range(self.P):
            for k in range(D):
                r1, r2 = int(a.region[g[k][j]]), int(a.region[g[(k + 1) % D][j]])
                if a.inv_cap[r1, r2] > 0:
                    load[r1, r2] = load.get((r1, r2), 0.0) + 2.0 * (D - 1) / D * a.ring_bytes * self.N[j]
        return max((b * a.inv_cap[r] + a.cap_alpha[r] for r, b in load.items()), default=0.0)

    def rings(self) -> list[float]:
        """R_j of every stage's data-parallel ring."""
        a, g_idx, D = self.a, self.g_idx, self.D
        R = []
        for j in range(self.P):
            if D == 1:
                R.append(0.0)
                continue
            edges = [(g_idx[k][j], g_idx[(k + 1) % D][j]) for k in range(D)]
            inv_bmin = max(a.inv_beta[u, v] for u, v in edges)
            amax = max(a.alpha[u, v] for u, v in edges)
            R.append(2.0 * (D - 1) / D * a.ring_bytes * self.N[j] * inv_bmin + 2.0 * (D - 1) * amax)
        return R

    def energy(self, T: float) -> tuple[float, float, float, float]:
        """(busy, waiting, network energy, bytes crossing regions)."""
        a, g_idx, D, P, mk, t, N = self.a, self.g_idx, self.D, self.P, self.mk, self.t, self.N
        busy = wait = 0.0
        for k in range(D):
            for j in range(P):
                g = g_idx[k][j]
                U = mk[k] * t[k][j]
                busy += self.p_busy[k][j] * U
                wait += a.p_wait[g] * (T - U)
        cross = 0.0
        for k in range(D):
            for j in range(P - 1):
                if a.cross[g_idx[k][j], g_idx[k][j + 1]]:
                    cross += 2.0 * mk[k] * a.A
        for j in range(P):
            if D > 1:
                for k in range(D):
                    if a.cross[g_idx[k][j], g_idx[(k + 1) % D][j]]:
                        cross += 2.0 * (D - 1) / D * a.ring_bytes * N[j]
        return busy, wait, a.net_j_per_byte * cross, cross

    def priced(self, T: float) -> tuple[float | None, float | None]:
        """§9: dollars (GPU hours of every selected device, egress per byte leaving a
        region) and grams of CO2 (each device's energy at its region's intensity, the
        network's at the mean of its two regions); bytes per direction as for X above."""
        inst, a, g_idx, D, P, mk, t = self.inst, self.a, self.g_idx, self.D, self.P, self.mk, self.t
        sent = []                                  # (u, v, bytes) per directed transfer
        listed = inst.priced or inst.carbon_priced
        for k in range(D if listed else 0):
            for j in range(P - 1):
                u, v = g_idx[k][j], g_idx[k][j + 1]
                sent += [(u, v, mk[k] * a.A), (v, u, mk[k] * a.A)]
        if D > 1 and listed:
            for j in range(P):
                for k in range(D):
                    sent.append((g_idx[k][j], g_idx[(k + 1) % D][j], 2.0 * (D - 1) / D * a.ring_bytes * self.N[j]))
        cost = carbon = None
        if inst.priced:
            price = sum(inst.devices[g].price_per_hour for row in g_idx for g in row)
            egress = inst.egress_usd_per_byte
            cost = T / 3600.0 * price + (sum(egress[u, v] * b for u, v, b in sent) if egress is not None else 0.0)
        if inst.carbon_priced:
            ci = [inst.carbon_region.get(d.region, 0.0) / 3.6e6 for d in inst.devices]     # g per J
            carbon = 0.0
            for k in range(D):
                for j in range(P):
                    g = g_idx[k][j]
                    U = mk[k] * t[k][j]
                    carbon += (self.p_busy[k][j] * U + a.p_wait[g] * (T - U)) * ci[g]
            carbon += sum(a.net_j_per_byte * b * (ci[u] + ci[v]) / 2.0 for u, v, b in sent if a.cross[u, v])
        return cost, carbon

    def memory(self, violations: list[str]) -> dict[str, float]:
        """State, activations of the micro-batches in flight, logits on the last stage;
        a device over its usable memory is a violation."""
        a, plan, P = self.a, self.plan, self.P
        memory: dict[str, float] = {}
        for k in range(self.D):
            for j in range(P):
                g = self.g_idx[k][j]
                inflight = self.qk[k] if a.gpipe else min(P - j, self.qk[k])
                # §15: ZeRO divides part of the state over the stage's D replicas
                state = a.state_bytes - a.sharded_bytes + a.sharded_bytes / self.D if a.sharded_bytes else a.state_bytes
                mem = state * self.N[j] + self.act[j] * a.act_scale[g] * inflight     # §14: groups without SP
                if j == P - 1:
                    mem += a.logits * (inflight if self.inst.model.recompute != "full" else 1)
                memory[plan.grid[k][j]] = mem
                if mem > a.mem_cap[g]:
                    violations.append(f"memory: {plan.grid[k][j]} (replica {k}, stage {j}) needs "
                                      f"{mem / 2**30:.3f} GiB > usable {a.mem_cap[g] / 2**30:.3f} GiB")
        return memory


def clock_levels(inst: Instance, plan: Plan) -> np.ndarray:
    """(D, P) clock level of each slot's device (0: full clock), for the batched evaluator."""
    out = np.zeros((plan.replicas, plan.stages), dtype=np.int64)
    if plan.clocks:
        for k, row in enumerate(plan.grid):
            for j, g in enumerate(row):
                f = plan.clock(g)
                if f != 1.0:
                    out[k, j] = [lv[0] for lv in inst.devices[inst.index[g]].levels].index(f)
    return out


def limit_violations(inst: Instance, T: float, E: float, n_devices: int, cost: float | None = None,
                     carbon: float | None = None) -> list[str]:
    """The ε-limits (and the device cap) a plan of these costs breaks, one line each."""
    obj, opt = inst.objective, inst.options
    out = []
    value = {"time": T, "energy": E, "cost": cost, "carbon": carbon}
    for m, cap in objmod.limits(obj):
        v = value[m.name]
        if (v or 0.0) > cap * (1 + LIMIT_RTOL):
            out.append(f"{m.limit}: {m.symbol} = {v:.6g} {m.unit} > {cap:g} {m.unit}")
    if opt.max_devices is not None and n_devices > opt.max_devices:
        out.append(f"max_devices: {n_devices} devices > {opt.max_devices}")
    return out


# --------------------------------------------------------------------- batched
@dataclass
class BatchResult:
    """Arrays over the batch (first axis = plan)."""

    time_s: np.ndarray
    energy_j: np.ndarray
    feasible: np.ndarray       # grid/cuts/split valid and memory fits
    pipeline_s: np.ndarray
    allreduce_s: np.ndarray
    busy_j: np.ndarray
    wait_j: np.ndarray
    network_j: np.ndarray
    memory: np.ndarray         # (n, D, P) bytes
    within_limits: np.ndarray
    cost_usd: np.ndarray | None = None      # §9, when the instance prices them
    carbon_g: np.ndarray | None = None

    @property
    def acceptable(self) -> np.ndarray:
        return self.feasible & self.within_limits


class BatchEvaluator:
    """Evaluate many plans of one instance and one (D, P) shape with numpy.

    ``grid`` is ``(n, D, P)`` device indices, ``cuts`` ``(n, P+1)``, ``mb`` ``(n, D)``.
    """

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.a = inst.arrays
        self.plans = 0

    def __call__(self, grid: np.ndarray, cuts: np.ndarray, mb: np.ndarray,
                 clk: np.ndarray | None = None) -> BatchResult:
        """``clk``: (n, D, P) clock level of each slot's device (0: full clock; §10)."""
        a = self.a
        grid = np.asarray(grid, dtype=np.int64)
        cuts = np.asarray(cuts, dtype=np.int64)
        mb = np.asarray(mb, dtype=np.int64)
        n, D, P = grid.shape
        self.plans += n
        lo, hi = cuts[:, :-1], cuts[:, 1:]
        first = np.arange(P) == 0
        last = np.arange(P) == P - 1
        W = sc.stage_work(a, lo, hi, last)
        N = sc.stage_params(a, lo, hi, first, last)
        act = sc.stage_act(a, lo, hi)

        if clk is None or not a.has_clocks:
            speed, pb = a.speed[grid], a.p_busy[grid]
        else:
            clk = np.asarray(clk, dtype=np.int64)
            speed, pb = a.speed[grid] * a.clock_frac[grid, clk], a.clock_busy[grid, clk]
        t = W[:, None, :] / speed                                # (n, D, P)
        fwd = sc.stage_forward(a, lo, hi, last)[:, None, :] / speed if a.gpipe else None
        mbf = mb.astype(float)
        u, v = grid[:, :, :-1], grid[:, :, 1:]
        occ, lat, ex = sc.occupancy(a, u, v), a.alpha[u, v], sc.exposed(a, u, v)     # (n, D, P-1)
        Tk = sc.replica_time(a, t, occ, lat, mbf, ex, sc.wan_periods(a, grid), fwd)
        cross_pipe = (a.cross[u, v] * (2.0 * a.A) * mbf[:, :, None]).sum(axis=(1, 2))
        if D > 1:
            nxt = np.roll(grid, -1, axis=1)
            gradb = 2.0 * (D - 1) / D * a.ring_bytes * N        # (n, P)
            R = sc.ring_time(a, D, N, a.inv_beta[grid, nxt].max(axis=1), a.alpha[grid, nxt].max(axis=1))
            cross_ring = (a.cross[grid, nxt].sum(axis=1) * gradb).sum(axis=1)
        else:
            R = np.zeros((n, P))
            cross_ring = np.zeros(n)
        pipeline = Tk.max(axis=1)
        wan = sc.wan_sync(a, grid, N)
        allreduce = np.maximum(R.max(axis=1), wan)
        T = sc.iteration_time(Tk, sc.drains(a, t, occ, lat, ex), R, wan) if D > 1 else pipeline
        U = mbf[:, :, None] * t
        pw = a.p_wait[grid]
        busy = (pb * U).sum(axis=(1, 2))
        wait = (pw * (T[:, None, None] - U)).sum(axis=(1, 2))
        network = a.net_j_per_byte * (cross_pipe + cross_ring)
        E = busy + wait + network
        priced = {}
        if self.inst.priced or self.inst.carbon_priced:
            from geotrain_opt.cost.tariffs import charge, tariffs
            ring_bytes = gradb if D > 1 else None
            for name, tf in tariffs(self.inst).items():
                if self.inst.priced if name == "cost_usd" else self.inst.carbon_priced:
                    priced[name] = charge(tf, grid, U, T, mbf, a.A, ring_bytes, pb)

        _S, q = sc.flushes(a, np.maximum(mb, 1))
        infl = sc.inflight(a, P, np.arange(P)[None, None, :], q[:, :, None])
        infl = np.broadcast_to(infl, (n, D, P))
        mem = sc.stage_memory(a, N[:, None, :], act[:, None, :], last[None, None, :], infl, D, a.act_scale[grid])
        ok = (mem <= a.mem_cap[grid]).all(axis=(1, 2))
        ok &= (np.diff(cuts, axis=1) > 0).all(axis=1) & (cuts[:, 0] == 0) & (cuts[:, -1] == a.L)
        ok &= (mb >= 1).all(axis=1) & (mb.sum(axis=1) == a.M)
        if a.uniform:
            ok &= (mb == mb[:, :1]).all(axis=1)
        flat = np.sort(grid.reshape(n, D * P), axis=1)
        ok &= (np.diff(flat, axis=1) != 0).all(axis=1)
        return BatchResult(T, E, ok, pipeline, allreduce, busy, wait, network, mem,
                           self._limits(T, E, D * P * self.inst.tp, priced), priced.get("cost_usd"), priced.get("carbon_g"))

    def _limits(self, T: np.ndarray, E: np.ndarray, n_dev: int, priced: dict[str, np.ndarray]) -> np.ndarray:
        obj, opt = self.inst.objective, self.inst.options
        ok = np.ones(T.shape, dtype=bool)
        value = {"time_s": T, "energy_j": E, **priced}
        for m, cap in objmod.limits(obj):
            ok &= value.get(m.field, np.zeros_like(T)) <= cap * (1 + LIMIT_RTOL)
        if opt.max_devices is not None and n_dev > opt.max_devices:
            ok[:] = False
        return ok

    def evaluate_plans(self, plans: list[Plan]) -> list[BatchResult | None]:
        """Convenience: group plans by shape; returns one single-row result per plan."""
        out: list[Any] = [None] * len(plans)
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(plans):
            groups.setdefault((p.replicas, p.stages, p.micro_batch, p.recompute), []).append(i)
        for (_D, _P, b, r), members in groups.items():
            inst = plan_instance(self.inst, plans[members[0]])
            ev = self if inst is self.inst else BatchEvaluator(inst)
            grid = np.stack([plans[i].grid_indices(self.inst.index) for i in members])
            cuts = np.array([plans[i].cuts for i in members])
            mb = np.array([plans[i].micro_batches for i in members])
            clk = np.stack([clock_levels(self.inst, plans[i]) for i in members])
            res = ev(grid, cuts, mb, clk)
            for row, i in enumerate(members):
                out[i] = BatchResult(*(None if getattr(res, f) is None else np.asarray(getattr(res, f))[row:row + 1]
                                       for f in res.__dataclass_fields__))
        return out

"""Human summaries of an instance, an evaluation and a solver result."""
from __future__ import annotations

from collections import Counter
from typing import Any

from geotrain_opt.problem import units
from geotrain_opt.construct.pieces import smallest_feasible_plan
from geotrain_opt.cost.evaluator import Evaluation
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import slot_label


def _fmt_bytes(b: float) -> str:
    return f"{b / units.GIB:,.2f} GiB"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _stack(inst: Instance) -> str:
    """The hosts' network stack (model.md §3): its rate and a message's exposed time."""
    nu = inst.options.stack_s_per_byte
    if nu <= 0:
        return "not modelled"
    return f"{units.s_per_byte_to_gbps(nu):g} Gbit/s ({inst.arrays.mu * 1e3:.3g} ms per message between nodes)"


def _nic_lines(inst: Instance) -> list[str]:
    """Node NICs and the static per-GPU share they impose (formulations/model.md)."""
    nodes: dict[str, list] = {}
    for d in inst.devices:
        if d.nic_bps:
            nodes.setdefault(d.node, []).append(d)
    if not nodes:
        return []
    size = Counter(d.node for d in inst.devices)
    shares = Counter((d[0].nic_bps / units.GBIT_PER_S, size[n]) for n, d in nodes.items())
    parts = [f"{cnt} node(s) of {size} GPU(s) with a {nic:g} Gbit/s NIC ({nic / size:g} Gbit/s per GPU)"
             for (nic, size), cnt in sorted(shares.items())]
    return ["NICs: " + "; ".join(parts)]


def _lever_lines(inst: Instance) -> list[str]:
    """The decisions beyond the grid a plan may take (model.md §10, §11)."""
    out = []
    clocks = {}
    for d in inst.devices:
        if d.clocks:
            clocks.setdefault(d.type, d.levels)
    if clocks:
        out.append("clocks: " + "; ".join(f"{t} " + ", ".join(f"{f:g} ({p:g} W)" for f, p in lv)
                                          for t, lv in sorted(clocks.items())))
    curves = {d.type: d for d in inst.devices if d.half_tokens}
    if curves:
        n = inst.model.seq_len
        out.append("efficiency curves (model.md §1): " + "; ".join(
            f"{t} {d.efficiency:g} x n/(n + {d.half_tokens:g}), {d.efficiency_at(n * inst.model.micro_batch):.3g} "
            f"at micro-batch {inst.model.micro_batch}" for t, d in sorted(curves.items())))
    if inst.has_choices:
        m = inst.model
        out.append(f"choices: micro-batch size {', '.join(map(str, sorted({b for b, _ in m.choices()})))}; "
                   f"recompute {', '.join(sorted({r for _, r in m.choices()}))} ({len(m.choices())} combinations)")
    if inst.options.tensor_parallel != (1,):
        out.append("tensor parallelism (model.md §14): degrees " + ", ".join(map(str, inst.options.tensor_parallel))
                   + " searched, groups of GPUs of one type on one node")
    return out


def architecture(m: Any) -> str:
    """The model's architecture in words (model.md §1.1)."""
    attn = "multi-head attention" if m.query_groups == m.heads else f"grouped-query attention ({m.query_groups} KV heads)"
    return (f"{m.activation} MLP of width {m.ffn_hidden}, {attn} ({m.attention}), {m.norm}, {m.position} positions, "
            f"{'tied' if m.tied_embeddings else 'untied'} embeddings")


def describe_instance(inst: Instance) -> str:
    m = inst.model
    a = inst.arrays
    out = [f"instance {inst.name}: {inst.n} devices in {len(inst.regions)} regions",
           f"model: {m.preset or 'custom'}, {m.layers} layers, hidden {m.hidden}, heads {m.heads}, "
           f"seq {m.seq_len}, vocab {m.vocab}, {m.total_params() / 1e9:.3f} B parameters; "
           f"batch {m.global_batch} = {m.num_micro_batches} micro-batches of {m.micro_batch}, "
           f"recompute {m.recompute}",
           f"architecture: {architecture(m)}",
           f"options: schedule {inst.options.schedule}, batch split {inst.options.batch_split}, "
           f"memory headroom {inst.options.memory_headroom:g}, exposed comm (kappa) {inst.options.exposed_comm:g}, "
           f"host network stack {_stack(inst)}, "
           f"accumulation steps {inst.options.accumulation_steps}, objective {inst.objective.kind}"
           + (f", ZeRO stage {inst.options.zero_stage} (model.md §15)" if inst.options.zero_stage else "")]
    nics = _nic_lines(inst)
    out += nics + _lever_lines(inst) + [""]
    groups = Counter((d.region, d.type) for d in inst.devices)
    rows = []
    priced, carbon = inst.priced, inst.carbon_priced
    for (region, typ), cnt in sorted(groups.items()):
        devs = [d for d in inst.devices if d.region == region and d.type == typ]
        rows.append([region, typ, str(cnt), f"{sum(a.speed[inst.index[d.id]] for d in devs) / 1e12:,.1f}",
                     _fmt_bytes(sum(d.mem_bytes for d in devs))]
                    + ([f"{sum(d.price_per_hour for d in devs):,.2f}"] if priced else [])
                    + ([f"{inst.carbon_region.get(region, 0.0):g}"] if carbon else []))
    rows.append(["total", "", str(inst.n), f"{a.speed.sum() / 1e12:,.1f}",
                 _fmt_bytes(sum(d.mem_bytes for d in inst.devices))]
                + ([f"{sum(d.price_per_hour for d in inst.devices):,.2f}"] if priced else [])
                + ([""] if carbon else []))
    out.append(table(rows, ["region", "type", "count", "TFLOP/s achievable", "memory"]
                     + (["USD/h"] if priced else []) + (["g CO2/kWh"] if carbon else [])))
    out.append("")
    regs = inst.regions
    if len(regs) > 1:
        link_rows = []
        first = {r: next(i for i, d in enumerate(inst.devices) if d.region == r) for r in regs}
        for i, r1 in enumerate(regs):
            for r2 in regs[i + 1:]:
                u, v = first[r1], first[r2]
                eg = inst.egress_usd_per_byte
                cap = [inst.wan_capacity.get(p) for p in ((r1, r2), (r2, r1))]
                link_rows.append([f"{r1} - {r2}", f"{inst.alpha[u, v] * 1e3:g}",
                                  f"{inst.beta[u, v] / units.GBIT_PER_S:g}"]
                                 + ([f"{eg[u, v] * 1e9:g} / {eg[v, u] * 1e9:g}"] if eg is not None else [])
                                 + ([" / ".join(f"{c / units.GBIT_PER_S:g}" if c else "-" for c in cap)]
                                    if inst.wan_capacity else []))
        out.append(table(link_rows, ["regions", "latency ms", "bandwidth Gbit/s"]
                         + (["egress USD/GB (->/<-)"] if inst.egress_usd_per_byte is not None else [])
                         + (["shared capacity Gbit/s (->/<-)"] if inst.wan_capacity else [])))
        out.append("")
    need = a.state_bytes * a.par_prefix[-1] + a.state_bytes * (a.emb_params + a.head_params)
    out.append(f"training state of the whole model: {_fmt_bytes(need)} "
               f"(usable memory in total: {_fmt_bytes(a.mem_cap.sum())})")
    out += _fits(inst)
    return "\n".join(out)


def _fits(inst: Instance) -> list[str]:
    """The fewest GPUs the memory-aware greedy check fits the model on, at each
    tensor-parallel degree the instance offers (model.md §14)."""
    from geotrain_opt.decisions.tensor import at_degrees, ungroup
    # one line per degree (each GPU type at its own degree too would be many more)
    cases = [c for c in at_degrees(inst) if isinstance(c[0], int)] if inst.options.tensor_parallel != (1,) \
        else [(1, inst)]
    out = []
    for t, at in sorted(cases, key=lambda c: c[1].n, reverse=True):
        plan = ungroup(at, smallest_feasible_plan(at))
        tp = f" at tensor-parallel degree {t}" if len(cases) > 1 or t > 1 else ""
        if plan is None:
            out.append(f"fits{tp}: no plan found by the memory-aware greedy check (the model may not fit)")
            continue
        nodes = len({inst.devices[inst.index[g]].node for g in plan.devices})
        out.append(f"fits{tp}: yes, on as few as {len(plan.devices)} GPUs on {nodes} node(s) "
                   f"(D={plan.replicas} x P={plan.stages}, cuts {list(plan.cuts)}, "
                   f"devices {', '.join(map(slot_label, (g for row in plan.grid for g in row)))})")
    if all(line.startswith(("fits: no", "fits at")) and ": no plan" in line for line in out):
        from geotrain_opt.io.diagnose import why_nothing_fits
        out += why_nothing_fits(inst)
    return out


def _split_of(ev: Evaluation) -> str:
    """The pipeline and what of the all-reduce comes after it (the rest overlaps the drain, model.md §3.3)."""
    if ev.allreduce_s <= 0.0:
        return f"pipeline {ev.pipeline_s:.6g} s, no all-reduce"
    after = ev.time_s - ev.pipeline_s
    if after >= ev.allreduce_s * (1 - 1e-9):
        return f"pipeline {ev.pipeline_s:.6g} s + all-reduce {ev.allreduce_s:.6g} s"
    return (f"pipeline {ev.pipeline_s:.6g} s, then {after:.6g} s of the all-reduce's "
            f"{ev.allreduce_s:.6g} s: the rest overlaps the drain")


def describe_evaluation(inst: Instance, ev: Evaluation) -> str:
    out = [f"feasible: {'yes' if ev.feasible else 'NO'}"
           + ("" if ev.within_limits else "   (objective limits violated)"),
           f"iteration time T  = {ev.time_s:.6g} s  ({_split_of(ev)})",
           f"energy E          = {ev.energy_j:.6g} J  (busy {ev.busy_j:.6g} + wait {ev.wait_j:.6g} + network {ev.network_j:.6g})",
           f"cross-region data = {ev.cross_region_bytes / 1e9:.6g} GB per iteration"]
    if ev.cost_usd is not None:
        out.append(f"cost C            = {ev.cost_usd:.6g} USD per iteration (GPU hours and egress)")
    if ev.carbon_g is not None:
        out.append(f"carbon Q          = {ev.carbon_g:.6g} g CO2 per iteration")
    rows = [[g, _fmt_bytes(b), _fmt_bytes(inst.arrays.mem_cap[inst.index[g]])] for g, b in ev.memory_bytes.items()]
    out.append(table(rows, ["device", "memory", "usable"]))
    for v in ev.violations + ev.limit_violations:
        out.append(f"violation: {v}")
    return "\n".join(out)



def describe_dict(inst: Instance) -> dict:
    """What `describe` prints, as data (``describe --json``)."""
    from dataclasses import asdict
    m = inst.model
    a = inst.arrays
    groups = Counter((d.region, d.type) for d in inst.devices)
    plan = smallest_feasible_plan(inst)
    model = {k: v for k, v in asdict(m).items() if k != "layer_scale"}
    return {
        "name": inst.name, "devices": inst.n, "regions": inst.regions,
        "model": dict(model, parameters=m.total_params(), micro_batches=m.num_micro_batches),
        "options": asdict(inst.options), "objective": asdict(inst.objective),
        "groups": [{"region": r, "type": t, "count": c,
                    "achievable_tflops": float(sum(a.speed[g] for g, d in enumerate(inst.devices) if d.region == r and d.type == t)) / 1e12}
                   for (r, t), c in sorted(groups.items())],
        "price_usd_per_hour": {d.id: d.price_per_hour for d in inst.devices} if inst.priced else None,
        "carbon_g_per_kwh": dict(inst.carbon_region) if inst.carbon_priced else None,
        "clocks": {d.type: [list(lv) for lv in d.levels] for d in inst.devices if d.clocks} or None,
        "choices": [{"micro_batch": b, "recompute": r} for b, r in inst.model.choices()] if inst.has_choices else None,
        "model_state_bytes": float(a.state_bytes * a.par_prefix[-1] + a.state_bytes * (a.emb_params + a.head_params)),
        "usable_memory_bytes": float(a.mem_cap.sum()),
        "smallest_plan": plan.to_dict() if plan is not None else None,
    }

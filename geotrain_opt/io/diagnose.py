"""Why no plan fits, and what would make one fit (formulations/model.md §1, §3, §14,
§15): printed by ``solve`` and ``describe`` when there is no plan.

The smallest stage any plan has is one layer with the embeddings (or the LM head)
and, under 1F1B, that many micro-batches in flight as there are stages; the whole
model must sit on the pipeline's devices. Both are compared with the devices'
usable memory, term by term, and each lever the instance does not use yet is
costed: recomputation, fused attention, a smaller micro-batch, tensor parallelism,
ZeRO.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from geotrain_opt.cost import stagecost as sc
from geotrain_opt.problem import units
from geotrain_opt.problem.instance import tensor

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance


def _gib(x: float) -> str:
    return f"{x / units.GIB:.2f} GiB"


def smallest_stage(inst: "Instance") -> tuple[float, dict[str, float]]:
    """Memory of the lightest first stage (embeddings + one layer, one micro-batch in
    flight, a two-stage pipeline) by term, without ZeRO's sharing (one replica)."""
    a = inst.arrays
    L = a.L
    P = 2 if L > 1 else 1
    N = float(sc.stage_params(a, 0, 1, True, P == 1))
    terms = {"training state": a.state_bytes * N, "activations": float(a.act_prefix[1])}
    if P == 1:
        terms["logits"] = a.logits
    return sum(terms.values()), terms


def longest_pipeline(inst: "Instance") -> tuple[int, int, float, dict[str, float]]:
    """(P, layers, memory, its terms) of stage 0 of the longest pipeline one replica can
    have (every device, at most one layer each): ceil(L / P) layers and, under 1F1B, P
    micro-batches in flight."""
    a = inst.arrays
    P = max(1, min(inst.n, a.L, inst.slot_limit or inst.n))
    k = -(-a.L // P)
    _S, q = sc.flushes(a, a.M)
    infl = int(sc.inflight(a, P, 0, int(q)))
    N = float(sc.stage_params(a, 0, k, True, P == 1))
    terms = {"training state": a.state_bytes * N, f"activations of {infl} micro-batch(es) in flight":
             float(a.act_prefix[k]) * infl}
    return P, k, sum(terms.values()), terms


def why_nothing_fits(inst: "Instance") -> list[str]:
    """Lines saying which memory term is too large and by how much, and the levers that
    would shrink it."""
    a = inst.arrays
    cap = float(a.mem_cap.max())
    need, terms = smallest_stage(inst)
    if need > cap:
        out = [f"no stage fits: the smallest (embeddings + one layer, one micro-batch) needs {_gib(need)}: "
               + ", ".join(f"{k} {_gib(v)}" for k, v in terms.items()) + f"; the largest device offers {_gib(cap)}"]
    else:
        P, k, need, terms = longest_pipeline(inst)
        out = [f"the longest pipeline ({P} stages) puts {k} layer(s) on its first stage, which then needs "
               f"{_gib(need)}: " + ", ".join(f"{n} {_gib(v)}" for n, v in terms.items())
               + f"; the largest device offers {_gib(cap)}"]
    whole = a.state_bytes * float(a.par_prefix[-1] + a.emb_params + a.head_params)
    out.append(f"the whole model's training state is {_gib(whole)}; all devices offer {_gib(float(a.mem_cap.sum()))}")
    out += [f"- {s}" for s in _levers(inst)]
    return out


def _levers(inst: "Instance") -> list[str]:
    m, o = inst.model, inst.options
    out = []
    most = tensor.largest_group(inst)
    if tensor.degrees(inst) == (1,) and most > 1:
        out.append(f"options.tensor_parallel: auto splits every term of a stage over up to {most} GPUs of a node "
                   f"(model.md §14)")
    if o.zero_stage == 0:
        opt = m.state_bytes - m.precision_bytes - m.grad_bytes
        out.append(f"options.zero_stage: 1 divides {opt:g} of the {m.state_bytes:g} bytes of state per parameter "
                   f"over a stage's replicas (§15)")
    if m.recompute != "full":
        a = inst.arrays
        out.append(f"model.recompute: full keeps 2 s b h = {_gib(2 * a.A / m.precision_bytes)} per layer and "
                   f"micro-batch instead of {_gib(float(a.act_prefix[1]))} (a third more compute)")
    if m.attention != "flash" and m.recompute == "none":
        out.append("model.attention: flash drops the attention scores from the activations (§1)")
    if m.micro_batch > 1:
        out.append(f"a smaller model.micro_batch (now {m.micro_batch}) shrinks activations in proportion")
    out.append("more devices, or devices with more memory, lengthen the pipeline")
    return out

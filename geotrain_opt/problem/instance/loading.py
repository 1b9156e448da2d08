"""Reading an instance: file to text (YAML or JSON, duplicate keys rejected), text
to a validated :class:`Instance`, every problem a one-line :class:`InstanceError`
naming the field."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from geotrain_opt.problem import units
from geotrain_opt.problem.catalog import GPU_CATALOG, GpuType, default_clocks
from geotrain_opt.common.inputs import read_text_file
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance.network import _read_network, read_capacity, read_egress
from geotrain_opt.problem.instance.model_reader import _read_model
from geotrain_opt.problem.instance.records import Device, Instance, Objective, Options
from geotrain_opt.problem.instance.fields import (_DEVICE, _GPU, _TOP, BATCH_SPLITS, LIMITS, MAX_DEVICES, OBJECTIVES,
                                                  SCHEDULES, _Reader)


def load_instance(path: str | Path) -> Instance:
    """Read a YAML or JSON instance file; every problem is an :class:`InstanceError`."""
    return load_instance_data(path)[0]


def load_instance_data(path: str | Path) -> tuple[Instance, Any]:
    """The instance of a file and the document it was read from (read once: the
    file may be a pipe)."""
    p = Path(path)
    try:
        text = read_text_file(p)
    except ValueError as e:
        raise InstanceError("<file>", str(e), source=str(path)) from None
    try:
        data = parse_text(text, str(path))
        inst = instance_from_dict(data, default_name=p.stem)
    except InstanceError as e:     # name the file: a suite run reads many
        raise InstanceError(e.field, e.message, source=str(path)) from None
    except RecursionError:
        raise InstanceError("<file>", "nested too deeply", source=str(path)) from None
    inst.source = str(path)
    return inst, data


def _no_duplicates(pairs: list[tuple[Any, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise InstanceError(str(k), "duplicate key (given twice in one mapping)")
        out[k] = v
    return out


def _yaml_loader():
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader that rejects a key given twice (PyYAML keeps the last one) and
        aliases (``*name``): nine levels of them expand a few lines into gigabytes."""

        def compose_node(self, parent, index):  # noqa: ANN001
            if self.check_event(yaml.events.AliasEvent):
                event = self.peek_event()
                raise InstanceError("<file>", f"YAML aliases are not supported (*{str(event.anchor)[:40]} at line "
                                              f"{event.start_mark.line + 1}): write the value out")
            return super().compose_node(parent, index)

    def mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        pairs = [(loader.construct_object(k, deep=deep), loader.construct_object(v, deep=deep))
                 for k, v in node.value]
        try:
            return _no_duplicates(pairs)
        except InstanceError as e:
            raise InstanceError(e.field, f"{e.message} at line {node.start_mark.line + 1}") from None
        except TypeError:          # an unhashable key such as a list
            raise InstanceError("<file>", f"a mapping key must be a scalar (line {node.start_mark.line + 1})") from None

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def parse_text(text: str, where: str = "<text>") -> Any:
    try:
        return _parse(text, where)
    except RecursionError:
        raise InstanceError("<file>", "nested too deeply") from None


def _parse(text: str, where: str) -> Any:
    if where.endswith(".json"):
        try:
            return json.loads(text, object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as e:
            raise InstanceError("<file>", f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    import yaml
    try:
        return yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InstanceError("<file>", f"malformed YAML{at}: {problem}") from None


def instance_from_dict(data: Any, default_name: str = "instance") -> Instance:
    if data is None:
        raise InstanceError("<root>", "the file is empty")
    top = _Reader(data, "")
    top.unknown_keys(_TOP)
    model = _read_model(_Reader(top.req("model"), "model"))
    catalog = _read_gpu_types(top.get("gpu_types", {}))
    devices = _read_devices(top.req("devices"), catalog)
    options = _read_options(_Reader(top.get("options", {}), "options"), len(devices))
    objective = _read_objective(_Reader(top.get("objective", {}), "objective"))
    net_r = _Reader(top.req("network"), "network")
    alpha, beta = _read_network(net_r, devices)
    egress = read_egress(net_r, devices)
    capacity = read_capacity(net_r)
    energy = _Reader(top.get("energy", {}), "energy")
    energy.unknown_keys({"net_j_per_byte", "pue", "carbon_g_per_kwh"})
    net_j = energy.number("net_j_per_byte", 0.0, nonneg=True)
    known_regions = {d.region for d in devices}
    pue = _by_region(energy, "pue", known_regions, positive=True, maximum=LIMITS["pue"])
    for r, v in pue.items():
        if v < 1.0:
            raise InstanceError(f"energy.pue.{r}", f"PUE must be >= 1, got {v}")
    # intensities by region: under energy (beside pue) or as a top-level table of their
    # own (formulations/model.md §9); one place only
    if top.has("carbon_g_per_kwh"):
        if energy.has("carbon_g_per_kwh"):
            raise InstanceError("carbon_g_per_kwh", "given twice (also as energy.carbon_g_per_kwh): keep one")
        carbon = _by_region(_Reader(data, ""), "carbon_g_per_kwh", known_regions, nonneg=True)
    else:
        carbon = _by_region(energy, "carbon_g_per_kwh", known_regions, nonneg=True)
    for key in ("description", "source"):     # read by no one, checked as the schema does
        top.text(key, "", MAX_TEXT, one_line=False)
    inst = Instance(name=top.text("name", default_name, MAX_NAME), model=model, devices=devices,
                    alpha=alpha, beta=beta, net_j_per_byte=net_j, pue_region=pue,
                    options=options, objective=objective, egress_usd_per_byte=egress, carbon_region=carbon,
                    wan_capacity=capacity)
    inst = _resolve_degrees(inst)
    _check_zero(inst)
    inst.check_priced()
    _check_fits_somewhere(inst)
    return inst


def _by_region(energy: _Reader, key: str, known: set[str], **limits: Any) -> dict[str, float]:
    """``energy.<key>``: a number per region of the instance (pue, carbon_g_per_kwh)."""
    raw = energy.get(key, {})
    rr = _Reader(raw, energy.sub(key))
    out: dict[str, float] = {}
    for r in raw:
        if str(r) not in known:
            raise InstanceError(f"{energy.sub(key)}.{r}", "unknown region (no device is in it)")
        out[str(r)] = rr.number(r, **({"maximum": LIMITS.get(key)} | limits))
    return out


def _read_gpu_spec(r: _Reader, base: GpuType | None, name: str) -> GpuType:
    def val(key: str, *, default: float | None) -> float:
        return r.number(key, default, positive=True)
    spec = GpuType(
        name=name,
        peak_tflops=val("peak_tflops", default=base.peak_tflops if base else None),
        efficiency=val("efficiency", default=base.efficiency if base else None),
        memory_gib=val("memory_gib", default=base.memory_gib if base else None),
        busy_w=val("busy_w", default=base.busy_w if base else None),
        wait_w=r.number("wait_w", base.wait_w if base else None, nonneg=True),
        source=r.text("source", base.source if base else "instance file", MAX_TEXT, one_line=False),
        price_per_hour=r.number("price_per_hour", base.price_per_hour if base else 0.0, nonneg=True),
        clocks=base.clocks if base else (),
        half_tokens=r.number("half_tokens", base.half_tokens if base else 0.0, nonneg=True),
    )
    if r.has("clocks"):
        spec = replace(spec, clocks=_read_clocks(r, spec))
    if spec.efficiency > 1:
        raise InstanceError(r.sub("efficiency"), f"must be in (0, 1], got {spec.efficiency}")
    # a denormal speed (efficiency 1e-320) made every stage time overflow to inf (issue 39)
    for key, floor in (("efficiency", MIN_EFFICIENCY), ("peak_tflops", MIN_PEAK_TFLOPS)):
        if getattr(spec, key) < floor:
            raise InstanceError(r.sub(key), f"must be at least {floor:g}, got {getattr(spec, key)!r}")
    if spec.wait_w > spec.busy_w:
        # The exact formulations rely on busy >= wait (energy grows with busy time).
        raise InstanceError(r.sub("wait_w"), f"wait power {spec.wait_w} W exceeds busy power {spec.busy_w} W")
    return spec


MIN_CLOCK_FRACTION = 0.01
MIN_EFFICIENCY = 1e-6        # of the peak; with MIN_PEAK_TFLOPS a speed of at least 1 FLOP/s
MIN_PEAK_TFLOPS = 1e-6
MAX_NAME, MAX_TEXT = 200, 20_000     # an instance's name, a description or source (characters)


def _read_clocks(r: _Reader, spec: GpuType) -> tuple[tuple[float, float], ...]:
    """``clocks: [{fraction: f, busy_w: P}, ...]``: lower clocks, fastest first. Clock 1
    is the type's own (peak, busy_w): listing it is allowed only with that power."""
    raw = r.get("clocks")
    path = r.sub("clocks")
    if raw == "default":
        # the catalog's modelled table (catalog.default_clocks), at this type's own powers
        return default_clocks(spec.busy_w, spec.wait_w)
    if not isinstance(raw, list):
        raise InstanceError(path, "expected a list of {fraction, busy_w} or 'default'")
    out: dict[float, float] = {}
    for i, e in enumerate(raw):
        er = _Reader(e, f"{path}[{i}]")
        er.unknown_keys({"fraction", "busy_w"})
        f = er.number("fraction", required=True, positive=True, maximum=1.0)
        if f < MIN_CLOCK_FRACTION:      # a slower clock would stretch a stage past any limit
            raise InstanceError(er.sub("fraction"), f"must be at least {MIN_CLOCK_FRACTION:g}, got {f!r}")
        p = er.number("busy_w", spec.busy_w if f == 1.0 else None, positive=True, maximum=LIMITS["busy_w"])
        if f in out:
            raise InstanceError(er.sub("fraction"), f"clock {f:g} listed twice")
        if f == 1.0 and p != spec.busy_w:
            raise InstanceError(er.sub("busy_w"), f"clock 1 is the type's own: busy_w {spec.busy_w:g} W, got {p:g}")
        if p < spec.wait_w:
            # the exact formulations rely on busy >= wait at every clock
            raise InstanceError(er.sub("busy_w"), f"busy power {p:g} W at clock {f:g} is below wait power {spec.wait_w:g} W")
        out[f] = p
    out.pop(1.0, None)
    return tuple(sorted(out.items(), reverse=True))


def _read_gpu_types(raw: Any) -> dict[str, GpuType]:
    catalog = dict(GPU_CATALOG)
    types = _Reader(raw, "gpu_types")
    for name, spec in raw.items():
        sr = _Reader(spec, types.sub(str(name)))
        sr.unknown_keys(_GPU)
        catalog[str(name)] = _read_gpu_spec(sr, GPU_CATALOG.get(str(name)), str(name))
    return catalog


def _read_devices(raw: Any, catalog: dict[str, GpuType]) -> list[Device]:
    if not isinstance(raw, list) or not raw:
        raise InstanceError("devices", "expected a non-empty list of devices")
    out: list[Device] = []
    seen: set[str] = set()
    node_nic: dict[str, tuple[float | None, str]] = {}
    for i, entry in enumerate(raw):
        r = _Reader(entry, f"devices[{i}]")
        r.unknown_keys(_DEVICE)
        tname = r.string("type")
        if tname not in catalog:
            raise InstanceError(r.sub("type"), f"unknown GPU type {tname!r} (add it under gpu_types or use one of: {', '.join(GPU_CATALOG)})")
        spec = _read_gpu_spec(r, catalog[tname], tname)
        region = r.string("region")
        if r.has("count"):
            count = r.integer("count")
            if len(out) + count > MAX_DEVICES:
                raise InstanceError(r.sub("count"), f"more than {MAX_DEVICES} devices in all "
                                    f"({len(out)} before this entry, {count} here)")
            prefix = r.string("id_prefix", f"{region}-")
            gpn = r.integer("gpus_per_node", 0, minimum=0)
            node = r.string("node", f"{prefix}node")
            ids = [f"{prefix}{k}" for k in range(count)]
            nodes = [f"{node}{k // gpn}" if gpn else node for k in range(count)]
        else:
            if r.has("id_prefix") or r.has("gpus_per_node"):
                raise InstanceError(r.sub("id_prefix" if r.has("id_prefix") else "gpus_per_node"),
                                    "only allowed together with count")
            ids = [r.string("id")]
            nodes = [r.string("node", f"{ids[0]}-node")]
            if len(out) >= MAX_DEVICES:
                raise InstanceError(r.sub("id"), f"more than {MAX_DEVICES} devices in all")
        nic = units.gbps_to_bytes_per_s(r.number("nic_gbps", positive=True)) if r.has("nic_gbps") else None
        for did, node in zip(ids, nodes):
            if did in seen:
                raise InstanceError(r.sub("id"), f"duplicate device id {did!r}")
            seen.add(did)
            if node in node_nic and node_nic[node][0] != nic:
                raise InstanceError(r.sub("nic_gbps"), f"devices of node {node!r} disagree on nic_gbps "
                                    f"({_gbps(node_nic[node][0])} at {node_nic[node][1]}, {_gbps(nic)} here)")
            node_nic.setdefault(node, (nic, did))
            out.append(Device(did, tname, units.tflops_to_flops(spec.peak_tflops), spec.efficiency,
                              units.gib_to_bytes(spec.memory_gib), spec.busy_w, spec.wait_w, region, node, nic,
                              spec.price_per_hour, spec.clocks, spec.half_tokens))
    return out


def _gbps(bps: float | None) -> str:
    return "none" if bps is None else f"{bps / units.GBIT_PER_S:g}"



def _read_options(r: _Reader, n: int) -> Options:
    r.unknown_keys({"memory_headroom", "schedule", "batch_split", "max_devices", "exposed_comm",
                    "accumulation_steps", "host_stack_gbps", "tensor_parallel", "zero_stage",
                    "sequence_parallel"})
    head = r.number("memory_headroom", 0.9, positive=True)
    if head > 1:
        raise InstanceError(r.sub("memory_headroom"), f"must be in (0, 1], got {head}")
    maxd = r.integer("max_devices", 0, minimum=1) if r.has("max_devices") else None
    kappa = r.number("exposed_comm", 0.25, nonneg=True)
    if kappa > 1:
        raise InstanceError(r.sub("exposed_comm"), f"must be in [0, 1], got {kappa}")
    steps = r.integer("accumulation_steps", 1, minimum=1)
    stack = 1.0 / units.gbps_to_bytes_per_s(r.number("host_stack_gbps", positive=True)) if r.has("host_stack_gbps") else 0.0
    return Options(head, r.choice("schedule", SCHEDULES, "1f1b"),
                   r.choice("batch_split", BATCH_SPLITS, "uniform"), maxd, kappa, steps, stack,
                   _read_degrees(r), _read_zero(r), r.flag("sequence_parallel", True))


def _read_zero(r: _Reader) -> int:
    """``options.zero_stage`` (§15): 0, 1 or 2."""
    z = r.integer("zero_stage", 0, minimum=0)
    if z == 3:
        raise InstanceError(r.sub("zero_stage"), "ZeRO-3 is not modelled: it gathers every stage's parameters "
                                                 "for each micro-batch, and with pipelines DeepSpeed and "
                                                 "Megatron-LM refuse it (use 1 or 2)")
    if z > 3:
        raise InstanceError(r.sub("zero_stage"), f"must be 0, 1 or 2, got {z}")
    return z


def _read_degrees(r: _Reader) -> tuple[int, ...]:
    """``options.tensor_parallel`` (§14): a list of distinct positive degrees, or
    "auto" (every power of two up to the most GPUs of one type on a node, set once the
    devices are known: -1 here)."""
    raw = r.get("tensor_parallel", [1])
    if raw == "auto":
        return (-1,)
    if not isinstance(raw, list) or not raw or len(raw) > 16 or not all(
            isinstance(t, int) and not isinstance(t, bool) and 1 <= t <= 1024 for t in raw):
        raise InstanceError(r.sub("tensor_parallel"), f"expected \"auto\" or a list of degrees 1..1024, got {raw!r:.80}")
    if len(set(raw)) != len(raw):
        raise InstanceError(r.sub("tensor_parallel"), f"degrees repeated in {raw}")
    return tuple(sorted(raw))


def _check_zero(inst: Instance) -> None:
    """ZeRO shards the optimizer state (the training state less the weights and
    gradients) and, at stage 2, the gradients: state_bytes must cover both (§15)."""
    m = inst.model
    if inst.options.zero_stage and m.state_bytes < m.precision_bytes + m.grad_bytes:
        raise InstanceError("options.zero_stage", f"model.state_bytes {m.state_bytes:g} must be at least "
                                                  f"precision_bytes + grad_bytes = {m.precision_bytes + m.grad_bytes:g} "
                                                  f"(the weights and gradients it holds)")


def _resolve_degrees(inst: Instance) -> Instance:
    """The degrees the solvers search, checked against the devices (each needs a node
    with that many GPUs of one type) and the model (each splits the heads and the
    key/value heads evenly, as Megatron-LM asserts)."""
    import math
    from geotrain_opt.problem.instance import tensor
    most = tensor.largest_group(inst)
    split = math.gcd(inst.model.heads, inst.model.query_groups)
    have = inst.options.tensor_parallel
    if have == (-1,):
        have = tuple(1 << i for i in range(most.bit_length()) if split % (1 << i) == 0)
    elif have[-1] > most:
        raise InstanceError("options.tensor_parallel", f"degree {have[-1]} needs a node with {have[-1]} GPUs "
                                                       f"of one type; the most any node has is {most}")
    for t in have:
        if split % t:
            raise InstanceError("options.tensor_parallel", f"degree {t} does not divide the model's "
                                                           f"{inst.model.heads} heads and {inst.model.query_groups} "
                                                           f"key/value heads evenly")
    return replace(inst, options=replace(inst.options, tensor_parallel=have))


def _read_objective(r: _Reader) -> Objective:
    r.unknown_keys({"kind", "lambda", "time_ref_s", "energy_ref_j", "max_time_s", "max_energy_j",
                    "max_cost_usd", "max_carbon_g"})
    lam = r.number("lambda", 0.5)
    if not 0 <= lam <= 1:
        raise InstanceError(r.sub("lambda"), f"must be in [0, 1], got {lam}")
    return Objective(
        kind=r.choice("kind", OBJECTIVES, "time"), lam=lam,
        time_ref_s=r.number("time_ref_s", 1.0, positive=True),
        energy_ref_j=r.number("energy_ref_j", 1000.0, positive=True),
        max_time_s=r.number("max_time_s", positive=True) if r.has("max_time_s") else None,
        max_energy_j=r.number("max_energy_j", positive=True) if r.has("max_energy_j") else None,
        max_cost_usd=r.number("max_cost_usd", positive=True) if r.has("max_cost_usd") else None,
        max_carbon_g=r.number("max_carbon_g", positive=True) if r.has("max_carbon_g") else None,
    )


def _check_fits_somewhere(inst: Instance) -> None:
    """Reject instances that no plan can satisfy: the embedding or head stage alone
    (one layer, one micro-batch in flight) exceeds the largest usable memory, at
    every micro-batch size and recomputation a plan may choose (§11)."""
    _at_some_choice(inst, _check_fits)


def _at_some_choice(inst: Instance, check) -> None:
    """Pass if ``check`` passes at one (micro_batch, recompute) choice; else its
    error at the model's own choice."""
    from geotrain_opt.problem.instance import tensor
    errors = []
    for t in tensor.degrees(inst):
        at = tensor.at_degree(inst, t)
        for b, r in inst.model.choices():
            try:
                return check(at.variant(b, r))
            except InstanceError as e:
                errors.append(e)
    raise errors[0]


def _check_fits(inst: Instance) -> None:
    from geotrain_opt.cost.stagecost import stage_memory_of
    a = inst.arrays
    cap = float(a.mem_cap.max())
    L = a.L
    D = min(inst.n, a.M)            # ZeRO (§15): the most replicas share the state the most
    eta = float(a.act_scale.min())  # §14: the least activation scale (groups without sequence parallelism)
    first = stage_memory_of(a, 2, 0, 0, 1, 1, D, eta) if L > 1 else stage_memory_of(a, 1, 0, 0, 1, 1, D, eta)
    last = stage_memory_of(a, 2, 1, L - 1, L, 1, D, eta) if L > 1 else first
    worst, what = (first, "the first stage (embeddings + one layer)") if first > last else (last, "the last stage (one layer + LM head)")
    if worst > cap:
        raise InstanceError("model", f"fits on no subset of devices: {what} needs {worst / units.GIB:.2f} GiB "
                                     f"but the largest device offers {cap / units.GIB:.2f} GiB usable")


def check_whole_model_fits(inst: Instance) -> None:
    """``validate``'s stronger test: the whole model (state + one micro-batch of
    activations per layer) against the memory of the most devices one replica can
    use, at most min(n, L, max_devices) stages. Loading does not apply it: such an
    instance is well-formed, and the solvers prove it infeasible. Any choice of
    micro-batch size and recomputation (§11) that fits is enough."""
    _at_some_choice(inst, _check_whole)


def _check_whole(inst: Instance) -> None:
    a = inst.arrays
    L = a.L
    k = min(inst.n, L, inst.options.max_devices or inst.n)
    from geotrain_opt.cost.stagecost import state_per_param
    total = (state_per_param(a, min(inst.n, a.M)) * float(a.par_prefix[-1] + a.emb_params + a.head_params)
             + float(a.act_prefix[-1]) * float(a.act_scale.min()) + a.logits)
    room = float(np.sort(a.mem_cap)[::-1][:k].sum())
    if total > room:
        raise InstanceError("model", f"fits on no subset of devices: one replica needs at least "
                                     f"{total / units.GIB:.2f} GiB but the {k} largest devices a pipeline can use "
                                     f"offer {room / units.GIB:.2f} GiB usable")

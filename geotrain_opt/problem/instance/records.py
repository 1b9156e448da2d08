"""The instance as data: the model, the devices, the options, the objective, and
the :class:`Instance` that holds them (with its SI arrays computed on first use)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from geotrain_opt.problem.instance.arrays import InstanceArrays


@dataclass(frozen=True)
class Model:
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn_hidden: int
    global_batch: int
    micro_batch: int
    precision_bytes: int = 2
    recompute: str = "none"
    state_bytes: float = 16.0
    grad_bytes: float = 2.0
    preset: str | None = None
    # per-layer multipliers on work, parameters, activations (default all 1)
    layer_scale: tuple[tuple[float, float, float], ...] = ()
    # §11: the micro-batch sizes and recomputation modes a plan may choose (besides the above)
    micro_batch_options: tuple[int, ...] = ()
    recompute_options: tuple[str, ...] = ()
    # model.md §1: "flash" keeps no attention scores (fused attention), "standard" keeps them
    attention: str = "standard"
    # model.md §1.1, the architecture: "gelu" is any two-matrix MLP, "swiglu" a gated one
    # (three matrices of width ffn_hidden); kv_heads < heads is grouped-query attention
    # (0 = heads); "rope" positions have no embedding table. norm and tied_embeddings
    # change no cost (§8) but the model an export describes.
    activation: str = "gelu"
    kv_heads: int = 0
    norm: str = "layernorm"
    position: str = "learned"
    tied_embeddings: bool = False

    def choices(self) -> list[tuple[int, str]]:
        """Every (micro_batch, recompute) a plan may take; the model's own first."""
        bs = [self.micro_batch] + [b for b in self.micro_batch_options if b != self.micro_batch]
        rs = [self.recompute] + [r for r in self.recompute_options if r != self.recompute]
        return [(b, r) for b in bs for r in rs]

    @property
    def num_micro_batches(self) -> int:
        return self.global_batch // self.micro_batch

    # Per-layer quantities of formulations/model.md §1 (one micro-batch).
    @property
    def query_groups(self) -> int:
        """Key/value heads: the heads (multi-head attention) unless grouped."""
        return self.kv_heads or self.heads

    def layer_matrix_params(self) -> float:
        """The weights every token multiplies: Q and the output projection (h x h
        each), K and V (h x h·g/a each, g key/value heads of a) and the MLP's two or,
        gated, three h x f matrices."""
        h, f = self.hidden, self.ffn_hidden
        mlp = 3.0 if self.activation == "swiglu" else 2.0
        return 2.0 * h * h + 2.0 * h * h * self.query_groups / self.heads + mlp * h * f

    def layer_forward_flop(self) -> float:
        b, s, h = self.micro_batch, self.seq_len, self.hidden
        return b * s * (2.0 * self.layer_matrix_params() + 4.0 * s * h)

    def layer_work_flop(self) -> float:
        """Forward, backward (twice the forward) and what recomputation repeats: the
        whole forward (full) or the attention core, QK^T and scores x V (selective)."""
        extra = {"none": 0.0, "full": self.layer_forward_flop(),
                 "selective": 4.0 * self.micro_batch * self.seq_len ** 2 * self.hidden}[self.recompute]
        return 3.0 * self.layer_forward_flop() + extra

    def layer_params(self) -> float:
        h, f = self.hidden, self.ffn_hidden
        return self.layer_matrix_params() + f + 9.0 * h

    def layer_act_bytes(self) -> float:
        b, s, h, a = self.micro_batch, self.seq_len, self.hidden, self.heads
        if self.recompute == "full":
            return 2.0 * s * b * h
        if self.attention == "flash" or self.recompute == "selective":
            # no softmax input/output or dropout mask of the scores: fused attention
            # never stores them, selective recomputation recomputes them
            return 34.0 * s * b * h
        return s * b * h * (34.0 + 5.0 * a * s / h)

    def replicated_act_share(self) -> float:
        """rho (§14): the share of a layer's stored activations that tensor parallelism
        without sequence parallelism leaves whole on every GPU of a group: the two
        LayerNorms' inputs and outputs and the two dropout masks, 10 s b h of the
        34 s b h (+ 5 a s^2 b) of Korthikanti et al. 2022 (Table 2); under full
        recomputation the one stored input, 2 s b h, all of it."""
        b, s, h = self.micro_batch, self.seq_len, self.hidden
        if self.recompute == "full":
            return 1.0
        return 10.0 * s * b * h / self.layer_act_bytes()

    def boundary_bytes(self) -> float:
        return float(self.micro_batch * self.seq_len * self.hidden * self.precision_bytes)

    def embedding_params(self) -> float:
        positions = self.seq_len * self.hidden if self.position == "learned" else 0
        return float(self.vocab * self.hidden + positions)

    def head_params(self) -> float:
        return float(self.vocab * self.hidden)

    def head_work_flop(self) -> float:
        return 3.0 * 2.0 * self.micro_batch * self.seq_len * self.hidden * self.vocab

    def logits_bytes(self) -> float:
        return 4.0 * self.micro_batch * self.seq_len * self.vocab

    def total_params(self) -> float:
        return self.layers * self.layer_params() + self.embedding_params() + self.head_params()


@dataclass(frozen=True)
class Device:
    id: str
    type: str
    peak_flops: float
    efficiency: float
    mem_bytes: float
    busy_w: float
    wait_w: float
    region: str
    node: str
    nic_bps: float | None = None     # the node's NIC, bytes/s, shared by its devices
    price_per_hour: float = 0.0      # USD per hour (formulations/model.md §9)
    # clock levels (fraction, busy W), level 0 = (1.0, busy_w), then lower clocks (§10)
    clocks: tuple[tuple[float, float], ...] = ()
    half_tokens: float = 0.0         # §1: tokens per micro-batch at half the efficiency; 0: constant
    # §14: a tensor-parallel group's activation bytes per the model's (1 + (t - 1) rho
    # without sequence parallelism, rho the replicated share; 1 otherwise)
    act_scale: float = 1.0

    @property
    def levels(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, self.busy_w),) + self.clocks

    def efficiency_at(self, tokens: float) -> float:
        """Achieved fraction of peak on micro-batches of ``tokens`` tokens (model.md §1):
        GEMM throughput rises with the rows a kernel gets and saturates at ``efficiency``."""
        return self.efficiency * tokens / (tokens + self.half_tokens) if self.half_tokens else self.efficiency

    def speed_at(self, tokens: float) -> float:
        """FLOP/s on micro-batches of ``tokens`` tokens (sigma_g of model.md §1)."""
        return self.peak_flops * self.efficiency_at(tokens)


@dataclass(frozen=True)
class Options:
    memory_headroom: float = 0.9
    schedule: str = "1f1b"
    batch_split: str = "uniform"
    max_devices: int | None = None
    exposed_comm: float = 0.25       # kappa: exposed fraction of a stage's P2P communication (model.md §3)
    accumulation_steps: int = 1      # S: pipeline flushes per iteration
    stack_s_per_byte: float = 0.0    # 1/gamma: the hosts' network stack, exposed on messages between nodes
    # §14: the tensor-parallel degrees the solvers search (1: none); a plan may give any
    tensor_parallel: tuple[int, ...] = (1,)
    # §15: ZeRO stage of the data-parallel group (0: none, 1: optimizer state, 2: and gradients)
    zero_stage: int = 0
    # §14: tensor-parallel groups split the activations that sit outside their GEMMs too
    # (Megatron-LM's --sequence-parallel); false: those are held whole by every member
    sequence_parallel: bool = True


@dataclass(frozen=True)
class Objective:
    kind: str = "time"
    lam: float = 0.5
    time_ref_s: float = 1.0
    energy_ref_j: float = 1000.0
    max_time_s: float | None = None
    max_energy_j: float | None = None
    max_cost_usd: float | None = None      # ε-limits on the priced metrics (formulations/model.md §9)
    max_carbon_g: float | None = None


@dataclass
class Instance:
    name: str
    model: Model
    devices: list[Device]
    alpha: np.ndarray            # (n, n) one-way latency, s; diagonal 0
    beta: np.ndarray             # (n, n) bandwidth, bytes/s; diagonal inf
    net_j_per_byte: float
    pue_region: dict[str, float]
    options: Options
    objective: Objective
    source: str = ""
    # prices and carbon (formulations/model.md §9): USD per byte sent u -> v across
    # regions ((n, n), None: no egress priced) and grams of CO2 per kWh by region
    egress_usd_per_byte: np.ndarray | None = None
    carbon_region: dict[str, float] = field(default_factory=dict)
    # shared WAN capacity (formulations/model.md §3.2): bytes/s of all the plan's traffic
    # from region a to region b, by (a, b); empty: every device pair has its own link
    wan_capacity: dict[tuple[str, str], float] = field(default_factory=dict)
    # §14: an instance whose devices are tensor-parallel groups of ``physical``'s GPUs
    # (``groups``: their members' rows there, all of ``tp`` GPUs); None for GPUs
    physical: "Instance | None" = field(default=None, repr=False)
    groups: tuple[tuple[int, ...], ...] = ()
    tp: int = 1                  # the largest group's size (its GPUs per slot where all are alike)
    # (n, n) parallel streams between two devices (a group pair: the smaller group's size); None: 1
    streams: "np.ndarray | None" = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------- derived arrays
    @property
    def n(self) -> int:
        return len(self.devices)

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.devices]

    @property
    def index(self) -> dict[str, int]:
        """Device id -> row of every per-device array."""
        idx = self._cache.get("index")
        if idx is None:
            idx = self._cache["index"] = {d.id: i for i, d in enumerate(self.devices)}
        return idx

    @property
    def regions(self) -> list[str]:
        seen: dict[str, None] = {}
        for d in self.devices:
            seen.setdefault(d.region, None)
        return list(seen)

    @property
    def arrays(self) -> "InstanceArrays":
        arr = self._cache.get("arrays")
        if arr is None:
            from geotrain_opt.problem.instance.arrays import InstanceArrays
            arr = self._cache["arrays"] = InstanceArrays.build(self)
        return arr

    def with_options(self, **changes: Any) -> "Instance":
        """A copy with some options/objective fields replaced (e.g. a solver's ε)."""
        opt = {k: v for k, v in changes.items() if k in Options.__dataclass_fields__}
        obj = {k: v for k, v in changes.items() if k in Objective.__dataclass_fields__}
        unknown = set(changes) - set(opt) - set(obj)
        if unknown:
            raise ValueError(f"unknown option(s): {sorted(unknown)}")
        out = replace(self, options=replace(self.options, **opt), objective=replace(self.objective, **obj),
                      _cache={})
        out.check_priced()
        return out

    def check_priced(self) -> None:
        """An objective or limit on dollars or grams needs the instance to price them."""
        from geotrain_opt.errors import InstanceError
        o = self.objective
        if (o.kind == "cost" or o.max_cost_usd is not None) and not self.priced:
            raise InstanceError("objective.kind" if o.kind == "cost" else "objective.max_cost_usd",
                                "cost needs prices: price_per_hour of a GPU type or device, or "
                                "egress_usd_per_gb of an inter_region link")
        if (o.kind == "carbon" or o.max_carbon_g is not None) and not self.carbon_priced:
            raise InstanceError("objective.kind" if o.kind == "carbon" else "objective.max_carbon_g",
                                "carbon needs energy.carbon_g_per_kwh of at least one region")

    @property
    def slot_limit(self) -> int | None:
        """``max_devices`` in slots: GPUs over the group size (one degree per instance)."""
        m = self.options.max_devices
        return None if m is None else m // self.tp

    def variant(self, micro_batch: int | None = None, recompute: str | None = None) -> "Instance":
        """The instance with the model's micro-batch size and recomputation fixed to a
        plan's choice (§11), without choices of its own; itself for the model's own."""
        b = self.model.micro_batch if micro_batch is None else micro_batch
        r = self.model.recompute if recompute is None else recompute
        if self.physical is not None and self.has_choices:
            # a group's speed depends on the micro-batch: rebuilt from its GPUs at (b, r)
            from geotrain_opt.problem.instance.tensor import group_instance
            cache = self._cache.setdefault("variants", {})
            if (b, r) not in cache:
                phys = replace(self.physical, objective=self.objective)
                cache[(b, r)] = group_instance(phys.variant(b, r), list(self.groups))
            return cache[(b, r)]
        if (b, r) == (self.model.micro_batch, self.model.recompute) and not (
                self.model.micro_batch_options or self.model.recompute_options):
            return self
        cache = self._cache.setdefault("variants", {})
        if (b, r) not in cache:
            if (b, r) not in self.model.choices():
                from geotrain_opt.errors import PlanError
                field = "micro_batch" if b not in [c[0] for c in self.model.choices()] else "recompute"
                have = sorted({c[0] for c in self.model.choices()}) if field == "micro_batch" else \
                    sorted({c[1] for c in self.model.choices()})
                raise PlanError(field, f"{b if field == 'micro_batch' else r!r} is not one of the model's "
                                       f"choices ({', '.join(map(str, have))})")
            model = replace(self.model, micro_batch=b, recompute=r, micro_batch_options=(), recompute_options=())
            cache[(b, r)] = replace(self, model=model, _cache={})
        return cache[(b, r)]

    @property
    def has_choices(self) -> bool:
        """True when plans choose the micro-batch size or recomputation (§11)."""
        return bool(self.model.micro_batch_options or self.model.recompute_options) and len(self.model.choices()) > 1

    @property
    def priced(self) -> bool:
        """True when the instance prices GPU hours or egress (cost is then reported)."""
        got = self._cache.get("priced")
        if got is None:     # asked by every evaluation: once per instance
            got = self._cache["priced"] = self.physical.priced if self.physical is not None else any(d.price_per_hour > 0 for d in self.devices) or (
                self.egress_usd_per_byte is not None and bool((self.egress_usd_per_byte > 0).any()))
        return got

    @property
    def carbon_priced(self) -> bool:
        """True when some region has a carbon intensity (carbon is then reported)."""
        return any(v > 0 for v in self.carbon_region.values())     # one entry per region: cheap

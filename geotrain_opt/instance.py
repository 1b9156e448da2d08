"""Instances: loading (YAML/JSON), validation with field-named errors, SI arrays.

Everything a solver needs is precomputed once in :class:`Instance` as numpy
arrays (device speeds, alpha/beta matrices, per-layer prefix sums), because the
evaluator that reads them is the hot loop of every solver.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import units
from .catalog import GPU_CATALOG, MODEL_PRESETS, GpuType
from .errors import InstanceError

SCHEDULES = ("1f1b", "gpipe")
BATCH_SPLITS = ("uniform", "free")
OBJECTIVES = ("time", "energy", "weighted")


# Largest accepted values (formulations/model.md §8, "ranges"): far above any real
# system, low enough that nothing downstream overflows, allocates terabytes or hangs.
INT_MAX = 10**9
MAX_DEVICES = 16_384          # the network is n x n float arrays, several of them
LIMITS: dict[str, float] = {
    "layers": 100_000, "hidden": 1_000_000, "heads": 100_000, "seq_len": 10_000_000,
    "vocab": 100_000_000, "ffn_hidden": 10_000_000, "global_batch": 100_000_000, "micro_batch": 1_000_000,
    "precision_bytes": 8, "state_bytes": 64, "grad_bytes": 64, "count": MAX_DEVICES,
    "gpus_per_node": MAX_DEVICES, "max_devices": MAX_DEVICES, "accumulation_steps": 100_000_000,
    "peak_tflops": 100_000, "memory_gib": 100_000, "busy_w": 100_000, "wait_w": 100_000,
    "latency_ms": 1e6, "bandwidth_gbps": 1e12, "nic_gbps": 1e12,  # 1e12: "no network cost" in idealised tests
    "net_j_per_byte": 1.0, "pue": 10.0,
    "work_scale": 1e3, "params_scale": 1e3, "act_scale": 1e3,
    "time_ref_s": 1e12, "energy_ref_j": 1e18, "max_time_s": 1e12, "max_energy_j": 1e18,
}


# --------------------------------------------------------------------- readers
class _Reader:
    """Typed access to a mapping that names the offending field on error."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise InstanceError(path or "<root>", f"expected a mapping, got {type(data).__name__}")
        self.data = data
        self.path = path

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        if key in self.data and self.data[key] is None:
            # YAML reads an empty value as null: say so rather than silently use the default
            raise InstanceError(self.sub(key), "is null (empty); give a value or omit the field for its default")
        return key in self.data

    def get(self, key: str, default: Any = None) -> Any:
        return self.data[key] if self.has(key) else default

    def req(self, key: str) -> Any:
        if not self.has(key):
            raise InstanceError(self.sub(key), "missing required field")
        return self.data[key]

    def number(self, key: str, default: float | None = None, *, positive: bool = False,
               nonneg: bool = False, required: bool = False, maximum: float | None = None) -> float:
        if not self.has(key):
            if required or default is None:
                raise InstanceError(self.sub(key), "missing required field")
            return default
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InstanceError(self.sub(key), f"expected a finite number, got {v!r}")
        if positive and v <= 0:
            raise InstanceError(self.sub(key), f"must be positive, got {v!r}")
        if nonneg and v < 0:
            raise InstanceError(self.sub(key), f"must not be negative, got {v!r}")
        top = maximum if maximum is not None else LIMITS.get(key)
        if top is not None and v > top:
            raise InstanceError(self.sub(key), f"must be at most {top:g}, got {v!r}")
        return float(v)

    def integer(self, key: str, default: int | None = None, *, minimum: int | None = 1,
                maximum: int | None = None) -> int:
        if not self.has(key):
            if default is None:
                raise InstanceError(self.sub(key), "missing required field")
            return default
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise InstanceError(self.sub(key), f"expected an integer, got {v!r}")
        if minimum is not None and v < minimum:
            raise InstanceError(self.sub(key), f"must be >= {minimum}, got {v}")
        # bounded before anything is allocated from it
        top = maximum if maximum is not None else LIMITS.get(key, INT_MAX)
        if v > top:
            raise InstanceError(self.sub(key), f"must be at most {top:g}, got {v}")
        return v

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        v = self.get(key, default)
        if v not in options:
            raise InstanceError(self.sub(key), f"must be one of {', '.join(options)}, got {v!r}")
        return v

    def string(self, key: str, default: str | None = None) -> str:
        if not self.has(key):
            if default is None:
                raise InstanceError(self.sub(key), "missing required field")
            return default
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise InstanceError(self.sub(key), f"expected a string, got {v!r}")
        if str(v).strip() == "":
            raise InstanceError(self.sub(key), "must not be empty")
        return str(v)

    def unknown_keys(self, allowed: set[str]) -> None:
        for k in self.data:
            if k not in allowed:
                raise InstanceError(self.sub(str(k)), f"unknown field (allowed: {', '.join(sorted(allowed))})")


# ----------------------------------------------------------------------- model
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

    @property
    def num_micro_batches(self) -> int:
        return self.global_batch // self.micro_batch

    # Per-layer quantities of formulations/model.md §1 (one micro-batch).
    def layer_forward_flop(self) -> float:
        b, s, h, f = self.micro_batch, self.seq_len, self.hidden, self.ffn_hidden
        return b * s * (8.0 * h * h + 4.0 * h * f + 4.0 * s * h)

    def layer_work_flop(self) -> float:
        return (3 + (1 if self.recompute == "full" else 0)) * self.layer_forward_flop()

    def layer_params(self) -> float:
        h, f = self.hidden, self.ffn_hidden
        return 4.0 * h * h + 2.0 * h * f + f + 9.0 * h

    def layer_act_bytes(self) -> float:
        b, s, h, a = self.micro_batch, self.seq_len, self.hidden, self.heads
        if self.recompute == "full":
            return 2.0 * s * b * h
        return s * b * h * (34.0 + 5.0 * a * s / h)

    def boundary_bytes(self) -> float:
        return float(self.micro_batch * self.seq_len * self.hidden * self.precision_bytes)

    def embedding_params(self) -> float:
        return float(self.vocab * self.hidden + self.seq_len * self.hidden)

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

    @property
    def speed(self) -> float:
        return self.peak_flops * self.efficiency


@dataclass(frozen=True)
class Options:
    memory_headroom: float = 0.9
    schedule: str = "1f1b"
    batch_split: str = "uniform"
    max_devices: int | None = None
    exposed_comm: float = 0.5        # kappa: exposed fraction of a stage's P2P communication
    accumulation_steps: int = 1      # S: pipeline flushes per iteration


@dataclass(frozen=True)
class Objective:
    kind: str = "time"
    lam: float = 0.5
    time_ref_s: float = 1.0
    energy_ref_j: float = 1000.0
    max_time_s: float | None = None
    max_energy_j: float | None = None


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
            arr = self._cache["arrays"] = InstanceArrays.build(self)
        return arr

    def with_options(self, **changes: Any) -> "Instance":
        """A copy with some options/objective fields replaced (e.g. a solver's ε)."""
        opt = {k: v for k, v in changes.items() if k in Options.__dataclass_fields__}
        obj = {k: v for k, v in changes.items() if k in Objective.__dataclass_fields__}
        unknown = set(changes) - set(opt) - set(obj)
        if unknown:
            raise ValueError(f"unknown option(s): {sorted(unknown)}")
        from dataclasses import replace
        return Instance(self.name, self.model, self.devices, self.alpha, self.beta,
                        self.net_j_per_byte, self.pue_region, replace(self.options, **opt),
                        replace(self.objective, **obj), self.source)


@dataclass(frozen=True)
class InstanceArrays:
    """Per-instance constants in SI units, shaped for vectorised evaluation."""

    speed: np.ndarray        # (n,) FLOP/s
    mem_cap: np.ndarray      # (n,) usable bytes = headroom * mem
    p_busy: np.ndarray       # (n,) W, times PUE
    p_wait: np.ndarray       # (n,) W, times PUE
    region: np.ndarray       # (n,) int region index
    alpha: np.ndarray        # (n, n)
    inv_beta: np.ndarray     # (n, n) s/byte of the effective bandwidth (NIC share included), diagonal 0
    cross: np.ndarray        # (n, n) 1.0 where regions differ
    w_prefix: np.ndarray     # (L+1,) cumulative work per micro-batch
    par_prefix: np.ndarray   # (L+1,) cumulative parameters
    act_prefix: np.ndarray   # (L+1,) cumulative activation bytes per micro-batch
    head_work: float
    emb_params: float
    head_params: float
    logits: float
    A: float                 # stage-boundary message, bytes
    state_bytes: float
    grad_bytes: float
    M: int
    L: int
    gpipe: bool
    uniform: bool
    net_j_per_byte: float
    kappa: float             # exposed pipeline communication
    steps: int               # accumulation steps S
    logits_per_inflight: bool  # recompute none: logits of every in-flight micro-batch are kept

    @staticmethod
    def build(inst: Instance) -> "InstanceArrays":
        m = inst.model
        L = m.layers
        scale = np.ones((L, 3))
        for i, row in enumerate(m.layer_scale):
            scale[i] = row
        w = m.layer_work_flop() * scale[:, 0]
        par = m.layer_params() * scale[:, 1]
        act = m.layer_act_bytes() * scale[:, 2]
        pre = lambda v: np.concatenate([[0.0], np.cumsum(v)])  # noqa: E731
        pue = np.array([inst.pue_region.get(d.region, 1.0) for d in inst.devices])
        regions = {r: i for i, r in enumerate(inst.regions)}
        reg = np.array([regions[d.region] for d in inst.devices], dtype=np.int64)
        with np.errstate(divide="ignore"):
            inv_beta = np.where(np.isinf(inst.beta), 0.0, 1.0 / inst.beta)
        inv_beta = np.maximum(inv_beta, nic_inv_share(inst))
        np.fill_diagonal(inv_beta, 0.0)
        arrs = InstanceArrays(
            speed=np.array([d.speed for d in inst.devices]),
            mem_cap=np.array([d.mem_bytes for d in inst.devices]) * inst.options.memory_headroom,
            p_busy=np.array([d.busy_w for d in inst.devices]) * pue,
            p_wait=np.array([d.wait_w for d in inst.devices]) * pue,
            region=reg,
            alpha=inst.alpha.copy(),
            inv_beta=inv_beta,
            cross=(reg[:, None] != reg[None, :]).astype(float),
            w_prefix=pre(w), par_prefix=pre(par), act_prefix=pre(act),
            head_work=m.head_work_flop(), emb_params=m.embedding_params(),
            head_params=m.head_params(), logits=m.logits_bytes(), A=m.boundary_bytes(),
            state_bytes=m.state_bytes, grad_bytes=m.grad_bytes, M=m.num_micro_batches, L=L,
            gpipe=inst.options.schedule == "gpipe", uniform=inst.options.batch_split == "uniform",
            net_j_per_byte=inst.net_j_per_byte,
            kappa=inst.options.exposed_comm, steps=inst.options.accumulation_steps,
            logits_per_inflight=m.recompute == "none",
        )
        for a in (arrs.speed, arrs.mem_cap, arrs.p_busy, arrs.p_wait, arrs.alpha, arrs.inv_beta,
                  arrs.cross, arrs.w_prefix, arrs.par_prefix, arrs.act_prefix):
            a.setflags(write=False)
        return arrs


def nic_inv_share(inst: Instance) -> np.ndarray:
    """(n, n) seconds per byte that the node NICs impose on a cross-node pair:
    max(n(u)/nic(u), n(v)/nic(v)), 0 within a node or where no NIC is given
    (beta_eff = min(beta, nic(u)/n(u), nic(v)/n(v)), formulations/model.md)."""
    nodes: dict[str, int] = {}
    node_of = np.array([nodes.setdefault(d.node, len(nodes)) for d in inst.devices], dtype=np.int64)
    size = np.bincount(node_of)
    nic = np.array([d.nic_bps if d.nic_bps else np.inf for d in inst.devices])
    share = size[node_of] / nic                          # s/byte of one device's NIC share
    out = np.maximum(share[:, None], share[None, :])
    out[node_of[:, None] == node_of[None, :]] = 0.0
    return out


# --------------------------------------------------------------------- loading
def load_instance(path: str | Path) -> Instance:
    """Read a YAML or JSON instance file; every problem is an :class:`InstanceError`."""
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
    return inst


def read_text_file(p: Path, limit_bytes: int = 1 << 30) -> str:
    """The file as UTF-8 text; ValueError with a one-line reason otherwise."""
    try:
        if p.stat().st_size > limit_bytes:
            raise ValueError(f"{p} is larger than {limit_bytes >> 20} MiB")
        raw = p.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text (byte {e.start})") from None


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
        """SafeLoader that rejects a key given twice (PyYAML keeps the last one)."""

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


_TOP = {"name", "description", "source", "model", "gpu_types", "devices", "network", "energy",
        "options", "objective"}
_MODEL = {"preset", "layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "global_batch",
          "micro_batch", "precision_bytes", "recompute", "state_bytes", "grad_bytes", "layer_overrides"}
_GPU = {"peak_tflops", "efficiency", "memory_gib", "busy_w", "wait_w", "source"}
_DEVICE = {"id", "type", "region", "node", "count", "id_prefix", "gpus_per_node", "nic_gbps"} | (_GPU - {"source"})
_LINK = {"latency_ms", "bandwidth_gbps"}


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
    alpha, beta = _read_network(_Reader(top.req("network"), "network"), devices)
    energy = _Reader(top.get("energy", {}), "energy")
    energy.unknown_keys({"net_j_per_byte", "pue"})
    net_j = energy.number("net_j_per_byte", 0.0, nonneg=True)
    pue_raw = energy.get("pue", {})
    pue_r = _Reader(pue_raw, "energy.pue")
    known_regions = {d.region for d in devices}
    pue: dict[str, float] = {}
    for r in pue_raw:
        if str(r) not in known_regions:
            raise InstanceError(f"energy.pue.{r}", "unknown region (no device is in it)")
        v = pue_r.number(r, positive=True, maximum=LIMITS["pue"])
        if v < 1.0:
            raise InstanceError(f"energy.pue.{r}", f"PUE must be >= 1, got {v}")
        pue[str(r)] = v
    inst = Instance(name=str(top.get("name", default_name)), model=model, devices=devices,
                    alpha=alpha, beta=beta, net_j_per_byte=net_j, pue_region=pue,
                    options=options, objective=objective)
    _check_fits_somewhere(inst)
    return inst


def _read_model(r: _Reader) -> Model:
    r.unknown_keys(_MODEL)
    base: dict[str, Any] = {}
    if r.has("preset"):
        name = r.string("preset")
        if name not in MODEL_PRESETS:
            raise InstanceError("model.preset", f"unknown preset {name!r} (known: {', '.join(MODEL_PRESETS)})")
        p = MODEL_PRESETS[name]
        base = dict(layers=p.layers, hidden=p.hidden, heads=p.heads, seq_len=p.seq_len,
                    vocab=p.vocab, ffn_hidden=p.ffn_hidden)
    def pick(key: str, default: int | None = None) -> int:  # noqa: E306
        if r.has(key):
            return r.integer(key)
        if base.get(key) is not None:
            return int(base[key])
        return r.integer(key, default)
    layers = pick("layers")
    hidden = pick("hidden")
    heads = pick("heads")
    seq_len = pick("seq_len")
    vocab = pick("vocab")
    ffn = pick("ffn_hidden", 4 * hidden)
    gb = r.integer("global_batch")
    mb = r.integer("micro_batch", 1)
    if gb % mb:
        raise InstanceError("model.global_batch", f"global batch {gb} is not a multiple of micro_batch {mb}")
    prec = r.integer("precision_bytes", 2)
    recompute = r.choice("recompute", ("none", "full"), "none")
    state = r.number("state_bytes", 16.0, positive=True)
    grad = r.number("grad_bytes", 2.0, positive=True)
    scale: list[tuple[float, float, float]] = []
    overrides = r.get("layer_overrides", [])
    if overrides:
        if not isinstance(overrides, list):
            raise InstanceError("model.layer_overrides", "expected a list")
        rows = [[1.0, 1.0, 1.0] for _ in range(layers)]
        for i, o in enumerate(overrides):
            orr = _Reader(o, f"model.layer_overrides[{i}]")
            orr.unknown_keys({"layer", "work_scale", "params_scale", "act_scale"})
            li = orr.integer("layer", minimum=0)
            if li >= layers:
                raise InstanceError(orr.sub("layer"), f"layer {li} out of range 0..{layers - 1}")
            rows[li] = [orr.number("work_scale", 1.0, positive=True),
                        orr.number("params_scale", 1.0, positive=True),
                        orr.number("act_scale", 1.0, positive=True)]
        scale = [tuple(x) for x in rows]
    return Model(layers, hidden, heads, seq_len, vocab, ffn, gb, mb, prec, recompute, state, grad,
                 preset=r.get("preset"), layer_scale=tuple(scale))


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
        source=str(r.get("source", base.source if base else "instance file")),
    )
    if spec.efficiency > 1:
        raise InstanceError(r.sub("efficiency"), f"must be in (0, 1], got {spec.efficiency}")
    if spec.wait_w > spec.busy_w:
        # The exact formulations rely on busy >= wait (energy grows with busy time).
        raise InstanceError(r.sub("wait_w"), f"wait power {spec.wait_w} W exceeds busy power {spec.busy_w} W")
    return spec


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
                              units.gib_to_bytes(spec.memory_gib), spec.busy_w, spec.wait_w, region, node, nic))
    return out


def _gbps(bps: float | None) -> str:
    return "none" if bps is None else f"{bps / units.GBIT_PER_S:g}"



def _read_options(r: _Reader, n: int) -> Options:
    r.unknown_keys({"memory_headroom", "schedule", "batch_split", "max_devices", "exposed_comm",
                    "accumulation_steps"})
    head = r.number("memory_headroom", 0.9, positive=True)
    if head > 1:
        raise InstanceError(r.sub("memory_headroom"), f"must be in (0, 1], got {head}")
    maxd = r.integer("max_devices", 0, minimum=1) if r.has("max_devices") else None
    kappa = r.number("exposed_comm", 0.5, nonneg=True)
    if kappa > 1:
        raise InstanceError(r.sub("exposed_comm"), f"must be in [0, 1], got {kappa}")
    steps = r.integer("accumulation_steps", 1, minimum=1)
    return Options(head, r.choice("schedule", SCHEDULES, "1f1b"),
                   r.choice("batch_split", BATCH_SPLITS, "uniform"), maxd, kappa, steps)


def _read_objective(r: _Reader) -> Objective:
    r.unknown_keys({"kind", "lambda", "time_ref_s", "energy_ref_j", "max_time_s", "max_energy_j"})
    lam = r.number("lambda", 0.5)
    if not 0 <= lam <= 1:
        raise InstanceError(r.sub("lambda"), f"must be in [0, 1], got {lam}")
    return Objective(
        kind=r.choice("kind", OBJECTIVES, "time"), lam=lam,
        time_ref_s=r.number("time_ref_s", 1.0, positive=True),
        energy_ref_j=r.number("energy_ref_j", 1000.0, positive=True),
        max_time_s=r.number("max_time_s", positive=True) if r.has("max_time_s") else None,
        max_energy_j=r.number("max_energy_j", positive=True) if r.has("max_energy_j") else None,
    )


def _read_link(raw: Any, path: str, extra: set[str] = frozenset()) -> tuple[Any, float, float]:
    r = _Reader(raw, path)
    r.unknown_keys(_LINK | set(extra))
    lat = r.number("latency_ms", required=True, nonneg=True)
    bw = r.number("bandwidth_gbps", required=True, positive=True)
    return r, units.ms_to_s(lat), units.gbps_to_bytes_per_s(bw)


def _read_network(r: _Reader, devices: list[Device]) -> tuple[np.ndarray, np.ndarray]:
    r.unknown_keys({"intra_node", "intra_region", "inter_region", "pairs", "matrix"})
    n = len(devices)
    alpha = np.full((n, n), np.nan)
    beta = np.full((n, n), np.nan)
    idx = {d.id: i for i, d in enumerate(devices)}
    regions = {d.region for d in devices}

    def directed(entries: Any, path: str, names: set[str], what: str) -> dict[tuple[str, str], tuple[float, float]]:
        # {a, b} covers both directions unless {b, a} is listed too (formulations/model.md §1).
        if not isinstance(entries, list):
            raise InstanceError(path, "expected a list of {a, b, latency_ms, bandwidth_gbps}")
        explicit: dict[tuple[str, str], tuple[float, float]] = {}
        for i, e in enumerate(entries):
            er, lat, bw = _read_link(e, f"{path}[{i}]", {"a", "b"})
            a, b = er.string("a"), er.string("b")
            for key, v in (("a", a), ("b", b)):
                if v not in names:
                    raise InstanceError(er.sub(key), f"unknown {what} {v!r}")
            if a == b:
                raise InstanceError(er.sub("b"), f"a link needs two different {what}s, got {a!r} twice")
            if (a, b) in explicit:
                raise InstanceError(er.sub("b"), f"duplicate link {a!r} -> {b!r}")
            explicit[(a, b)] = (lat, bw)
        out = dict(explicit)
        for (a, b), v in explicit.items():
            out.setdefault((b, a), v)
        return out

    inter = directed(r.get("inter_region", []), r.sub("inter_region"), regions, "region")
    pairs = directed(r.get("pairs", []), r.sub("pairs"), set(idx), "device")
    tiers = {}
    for key in ("intra_node", "intra_region"):
        if r.has(key):
            _, lat, bw = _read_link(r.get(key), r.sub(key))
            tiers[key] = (lat, bw)
    if r.has("matrix"):
        mr = _Reader(r.get("matrix"), r.sub("matrix"))
        mr.unknown_keys({"order", "latency_ms", "bandwidth_gbps"})
        order = mr.req("order")
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(idx):
            raise InstanceError(mr.sub("order"), "must list every device id exactly once")
        for key in ("latency_ms", "bandwidth_gbps"):
            mat = mr.req(key)
            try:
                arr = np.array(mat, dtype=float)
            except (TypeError, ValueError):
                raise InstanceError(mr.sub(key), "expected a square matrix of numbers") from None
            if arr.shape != (n, n):
                raise InstanceError(mr.sub(key), f"expected a {n}x{n} matrix, got shape {arr.shape}")
            off = ~np.eye(n, dtype=bool)
            if not np.isfinite(arr[off]).all():
                raise InstanceError(mr.sub(key), "entries must be finite numbers")
            if (arr[off] > LIMITS[key]).any():
                raise InstanceError(mr.sub(key), f"entries must be at most {LIMITS[key]:g}")
            if key == "latency_ms" and (arr[off] < 0).any():
                raise InstanceError(mr.sub(key), "latencies must not be negative")
            if key == "bandwidth_gbps" and (arr[off] <= 0).any():
                raise InstanceError(mr.sub(key), "bandwidths must be positive")
            perm = np.array([idx[str(o)] for o in order], dtype=np.int64)
            target = alpha if key == "latency_ms" else beta
            conv = units.ms_to_s if key == "latency_ms" else units.gbps_to_bytes_per_s
            target[np.ix_(perm, perm)] = np.where(off, conv(arr), np.nan)
    # tiers fill what the matrix left open (vectorised: instances reach thousands of devices)
    node_of = _codes([d.node for d in devices])
    reg_names = sorted(regions)
    reg_of = _codes([d.region for d in devices], reg_names)
    same_node = node_of[:, None] == node_of[None, :]
    same_reg = reg_of[:, None] == reg_of[None, :]
    open_ = np.isnan(alpha)
    np.fill_diagonal(open_, False)
    for a_id, b_id in pairs:
        open_[idx[a_id], idx[b_id]] = False
    if "intra_node" in tiers:
        m = open_ & same_node
        alpha[m], beta[m] = tiers["intra_node"]
        open_ &= ~same_node
    m = open_ & same_reg
    if m.any():
        if "intra_region" not in tiers:
            i, j = map(int, np.argwhere(m)[0])
            u, v = devices[i], devices[j]
            detail = (f"devices {u.id!r} and {v.id!r} share region {u.region!r} but not a node"
                      if "intra_node" in tiers else f"needed for {u.id!r} -> {v.id!r} in region {u.region!r}")
            raise InstanceError(r.sub("intra_region"), f"missing: {detail}")
        alpha[m], beta[m] = tiers["intra_region"]
    m = open_ & ~same_reg
    if m.any():
        R = len(reg_names)
        ra, rb = np.full((R, R), np.nan), np.full((R, R), np.nan)
        pos = {name: i for i, name in enumerate(reg_names)}
        for (x, y), (lat, bw) in inter.items():
            ra[pos[x], pos[y]], rb[pos[x], pos[y]] = lat, bw
        la = ra[reg_of[:, None], reg_of[None, :]]
        lb = rb[reg_of[:, None], reg_of[None, :]]
        missing = m & np.isnan(la)
        if missing.any():
            i, j = map(int, np.argwhere(missing)[0])
            raise InstanceError(r.sub("inter_region"),
                                f"no entry for regions {devices[i].region!r} -> {devices[j].region!r}")
        alpha[m], beta[m] = la[m], lb[m]
    for (a_id, b_id), (lat, bw) in pairs.items():      # device pairs override everything
        alpha[idx[a_id], idx[b_id]], beta[idx[a_id], idx[b_id]] = lat, bw
    np.fill_diagonal(alpha, 0.0)
    np.fill_diagonal(beta, np.inf)
    return alpha, beta


def _codes(names: list[str], order: list[str] | None = None) -> np.ndarray:
    pos = {n: i for i, n in enumerate(order)} if order is not None else {}
    if order is None:
        for n in names:
            pos.setdefault(n, len(pos))
    return np.array([pos[n] for n in names], dtype=np.int64)


def _check_fits_somewhere(inst: Instance) -> None:
    """Reject instances that no plan can satisfy: the embedding or head stage alone
    (one layer, one micro-batch in flight) exceeds the largest usable memory."""
    from .stagecost import stage_memory_of
    a = inst.arrays
    cap = float(a.mem_cap.max())
    L = a.L
    first = stage_memory_of(a, 2, 0, 0, 1, 1) if L > 1 else stage_memory_of(a, 1, 0, 0, 1, 1)
    last = stage_memory_of(a, 2, 1, L - 1, L, 1) if L > 1 else first
    worst, what = (first, "the first stage (embeddings + one layer)") if first > last else (last, "the last stage (one layer + LM head)")
    if worst > cap:
        raise InstanceError("model", f"fits on no subset of devices: {what} needs {worst / units.GIB:.2f} GiB "
                                     f"but the largest device offers {cap / units.GIB:.2f} GiB usable")


def check_whole_model_fits(inst: Instance) -> None:
    """``validate``'s stronger test: the whole model (state + one micro-batch of
    activations per layer) against the memory of the most devices one replica can
    use, at most min(n, L, max_devices) stages. Loading does not apply it: such an
    instance is well-formed, and the solvers prove it infeasible."""
    a = inst.arrays
    L = a.L
    k = min(inst.n, L, inst.options.max_devices or inst.n)
    total = (a.state_bytes * float(a.par_prefix[-1] + a.emb_params + a.head_params)
             + float(a.act_prefix[-1]) + a.logits)
    room = float(np.sort(a.mem_cap)[::-1][:k].sum())
    if total > room:
        raise InstanceError("model", f"fits on no subset of devices: one replica needs at least "
                                     f"{total / units.GIB:.2f} GiB but the {k} largest devices a pipeline can use "
                                     f"offer {room / units.GIB:.2f} GiB usable")

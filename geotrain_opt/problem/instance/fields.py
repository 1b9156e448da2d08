"""The instance schema as the reader enforces it: the fields each section
allows, the accepted ranges, and typed access that names the offending field."""
from __future__ import annotations

import math
from typing import Any

from geotrain_opt.errors import InstanceError

SCHEDULES = ("1f1b", "gpipe")
BATCH_SPLITS = ("uniform", "free")
OBJECTIVES = ("time", "energy", "weighted", "cost", "carbon")
RECOMPUTE = ("none", "full", "selective")
ACTIVATIONS = ("gelu", "swiglu")         # model.md §1.1: two MLP matrices, or three (gated)
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope")


# Largest accepted values (formulations/model.md §8, "ranges"): far above any real
# system, low enough that nothing downstream overflows, allocates terabytes or hangs.
INT_MAX = 10**9
MAX_DEVICES = 16_384          # the network is n x n float arrays, several of them
LIMITS: dict[str, float] = {
    "layers": 100_000, "hidden": 1_000_000, "heads": 100_000, "seq_len": 10_000_000,
    "vocab": 100_000_000, "kv_heads": 100_000, "ffn_hidden": 10_000_000, "global_batch": 100_000_000, "micro_batch": 1_000_000,
    "precision_bytes": 8, "state_bytes": 64, "grad_bytes": 64, "count": MAX_DEVICES,
    "gpus_per_node": MAX_DEVICES, "max_devices": MAX_DEVICES, "accumulation_steps": 100_000_000,
    "peak_tflops": 100_000, "memory_gib": 100_000, "busy_w": 100_000, "wait_w": 100_000,
    "latency_ms": 1e6, "bandwidth_gbps": 1e12, "nic_gbps": 1e12,  # 1e12: "no network cost" in idealised tests
    "net_j_per_byte": 1.0, "pue": 10.0,
    "work_scale": 1e3, "params_scale": 1e3, "act_scale": 1e3,
    "time_ref_s": 1e12, "energy_ref_j": 1e18, "max_time_s": 1e12, "max_energy_j": 1e18,
    "price_per_hour": 1e6, "egress_usd_per_gb": 1e6, "carbon_g_per_kwh": 1e5,
    "max_cost_usd": 1e15, "max_carbon_g": 1e18,
    "half_tokens": 1e12, "host_stack_gbps": 1e12, "capacity_gbps": 1e12,
}


_TOP = {"name", "description", "source", "model", "gpu_types", "devices", "network", "energy",
        "options", "objective", "carbon_g_per_kwh"}
_MODEL = {"preset", "layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "global_batch",
          "micro_batch", "precision_bytes", "recompute", "state_bytes", "grad_bytes", "layer_overrides",
          "micro_batch_options", "recompute_options", "attention", "activation", "kv_heads", "norm",
          "position", "tied_embeddings"}
_GPU = {"peak_tflops", "efficiency", "memory_gib", "busy_w", "wait_w", "source", "price_per_hour", "clocks", "half_tokens"}
_DEVICE = {"id", "type", "region", "node", "count", "id_prefix", "gpus_per_node", "nic_gbps"} | (_GPU - {"source"})
_LINK = {"latency_ms", "bandwidth_gbps"}


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

    def flag(self, key: str, default: bool) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise InstanceError(self.sub(key), f"expected true or false, got {v!r:.40}")
        return v

    def string(self, key: str, default: str | None = None) -> str:
        if not self.has(key):
            if default is None:
                raise InstanceError(self.sub(key), "missing required field")
            return default
        v = self.data[key]
        if not isinstance(v, str):     # the schema's rule too: write a number as "0"
            raise InstanceError(self.sub(key), f"expected a string, got {v!r}")
        if str(v).strip() == "":
            raise InstanceError(self.sub(key), "must not be empty")
        if not str(v).isprintable():    # a NUL or a newline in an id breaks every file written from it
            raise InstanceError(self.sub(key), f"must be printable text, got {str(v)[:40]!r}")
        return str(v)

    def text(self, key: str, default: str, max_len: int, one_line: bool = True) -> str:
        """Free text (a name, a description): a string of at most ``max_len``
        characters, printable (line breaks allowed unless ``one_line``)."""
        if not self.has(key):
            return default
        v = self.data[key]
        if not isinstance(v, str):
            raise InstanceError(self.sub(key), f"expected a string, got {type(v).__name__}")
        if len(v) > max_len:
            raise InstanceError(self.sub(key), f"longer than {max_len} characters ({len(v)})")
        if not (v if one_line else v.replace("\n", " ").replace("\t", " ")).isprintable():
            raise InstanceError(self.sub(key), "must be printable text")
        return v

    def unknown_keys(self, allowed: set[str]) -> None:
        for k in self.data:
            if k not in allowed:
                raise InstanceError(self.sub(str(k)), f"unknown field (allowed: {', '.join(sorted(allowed))})")

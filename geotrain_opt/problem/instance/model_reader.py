"""The instance's ``model`` section: a preset or the shape, the architecture (model.md
§1.1), the per-layer overrides and the choices of §11."""
from __future__ import annotations

from typing import Any

from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.catalog import MODEL_PRESETS
from geotrain_opt.problem.instance.fields import (_MODEL, ACTIVATIONS, LIMITS, NORMS, POSITIONS, RECOMPUTE,
                                                  _Reader)
from geotrain_opt.problem.instance.records import Model


def _read_model(r: _Reader) -> Model:
    r.unknown_keys(_MODEL)
    base: dict[str, Any] = {}
    if r.has("preset"):
        name = r.string("preset")
        if name not in MODEL_PRESETS:
            raise InstanceError("model.preset", f"unknown preset {name!r} (known: {', '.join(MODEL_PRESETS)})")
        base = MODEL_PRESETS[name].fields()
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
    recompute = r.choice("recompute", RECOMPUTE, "none")
    attention = r.choice("attention", ("standard", "flash"), "standard")
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
    mb_opts: list[int] = []
    raw = r.get("micro_batch_options", [])
    if not isinstance(raw, list):
        raise InstanceError("model.micro_batch_options", "expected a list of micro-batch sizes")
    for i, b in enumerate(raw):
        if isinstance(b, bool) or not isinstance(b, int) or b < 1 or b > LIMITS["micro_batch"]:
            raise InstanceError(f"model.micro_batch_options[{i}]", f"expected a positive integer, got {b!r}")
        if gb % b:
            raise InstanceError(f"model.micro_batch_options[{i}]", f"{b} does not divide global_batch {gb}")
        if b in mb_opts:
            raise InstanceError(f"model.micro_batch_options[{i}]", f"{b} listed twice")
        mb_opts.append(b)
    rc_opts: list[str] = []
    raw = r.get("recompute_options", [])
    if not isinstance(raw, list):
        raise InstanceError("model.recompute_options", f"expected a list of {', '.join(RECOMPUTE)}")
    for i, v in enumerate(raw):
        if v not in RECOMPUTE:
            raise InstanceError(f"model.recompute_options[{i}]", f"must be one of {', '.join(RECOMPUTE)}, got {v!r}")
        if v in rc_opts:
            raise InstanceError(f"model.recompute_options[{i}]", f"{v} listed twice")
        rc_opts.append(v)
    return Model(layers, hidden, heads, seq_len, vocab, ffn, gb, mb, prec, recompute, state, grad,
                 preset=r.get("preset"), layer_scale=tuple(scale), micro_batch_options=tuple(mb_opts),
                 recompute_options=tuple(rc_opts), attention=attention, **_read_architecture(r, base, heads))


def _read_architecture(r: _Reader, base: dict[str, Any], heads: int) -> dict[str, Any]:
    """model.md §1.1: activation, key/value heads, norm, positions, tied embeddings;
    a preset's values unless the instance names its own."""
    kv = r.integer("kv_heads", int(base.get("kv_heads") or heads))
    if heads % kv:
        raise InstanceError(r.sub("kv_heads"), f"{kv} key/value heads do not divide the {heads} heads")
    return {"activation": r.choice("activation", ACTIVATIONS, base.get("activation", "gelu")),
            "kv_heads": kv, "norm": r.choice("norm", NORMS, base.get("norm", "layernorm")),
            "position": r.choice("position", POSITIONS, base.get("position", "learned")),
            "tied_embeddings": r.flag("tied_embeddings", bool(base.get("tied_embeddings", False)))}

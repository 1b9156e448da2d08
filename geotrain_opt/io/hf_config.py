"""A model from a Hugging Face ``config.json``: the fields of an instance's ``model``
section (model.md §1.1), read from the file users already have, no network needed.

Supported: the decoder-only families whose layers the cost model describes —
Llama-like (llama, mistral, qwen2, qwen3: gated SwiGLU MLP, RMSNorm, RoPE, grouped-query
attention), GPT-2, GPT-NeoX (rotary, LayerNorm, GeLU) and OPT. Anything the model cannot
price (mixtures of experts, a head width other than hidden / heads, a gated MLP with
another activation) is refused with the field that says so, never approximated.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geotrain_opt.common.inputs import read_text_file
from geotrain_opt.errors import InstanceError

LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3")
# family -> (activation, norm, position, tied embeddings when the config does not say)
FAMILIES: dict[str, tuple[str, str, str, bool]] = {
    **{f: ("swiglu", "rmsnorm", "rope", False) for f in LLAMA_LIKE},
    "gpt2": ("gelu", "layernorm", "learned", True),
    "gpt_neox": ("gelu", "layernorm", "rope", False),
    "opt": ("gelu", "layernorm", "learned", True),
}
# the same quantity under each family's key names
_KEYS = {
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "heads": ("num_attention_heads", "n_head"),
    "vocab": ("vocab_size",),
    "seq_len": ("max_position_embeddings", "n_positions", "n_ctx"),
}


def _int(cfg: dict[str, Any], what: str, default: int | None = None) -> int:
    for k in _KEYS.get(what, (what,)):
        v = cfg.get(k)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InstanceError(f"config.{k}", f"expected a positive integer, got {v!r:.40}")
            return v
    if default is None:
        raise InstanceError(f"config.{_KEYS.get(what, (what,))[0]}", "missing (needed for the model's shape)")
    return default


def model_from_hf(cfg: Any, *, global_batch: int, micro_batch: int = 1,
                  seq_len: int | None = None) -> dict[str, Any]:
    """The ``model`` fields of an instance for the Hugging Face config ``cfg``."""
    if not isinstance(cfg, dict):
        raise InstanceError("config", f"expected a JSON object, got {type(cfg).__name__}")
    family = cfg.get("model_type")
    if family not in FAMILIES:
        raise InstanceError("config.model_type", f"{family!r:.40} is not a supported family "
                                                 f"(one of {', '.join(FAMILIES)})")
    for k in ("num_local_experts", "num_experts", "n_routed_experts"):
        if cfg.get(k):
            raise InstanceError(f"config.{k}", "mixtures of experts are not modelled (model.md §8)")
    activation, norm, position, tied = FAMILIES[family]
    act = str(cfg.get("hidden_act", cfg.get("activation_function", "")))
    if activation == "swiglu" and act not in ("silu", "swish"):
        raise InstanceError("config.hidden_act", f"a gated MLP with {act!r:.20} is not SwiGLU; not modelled")
    h, heads = _int(cfg, "hidden"), _int(cfg, "heads")
    if h % heads or cfg.get("head_dim", h // heads) != h // heads:
        raise InstanceError("config.head_dim", f"heads of width {cfg.get('head_dim')} x {heads} != hidden {h}: "
                                               f"not modelled")
    kv = _int(cfg, "num_key_value_heads", heads)
    ffn = cfg.get("intermediate_size") or cfg.get("n_inner") or cfg.get("ffn_dim") or 4 * h
    if family == "opt" and cfg.get("word_embed_proj_dim", h) != h:
        raise InstanceError("config.word_embed_proj_dim", "a projected embedding is not modelled")
    dtype = str(cfg.get("torch_dtype", "bfloat16"))
    out = {"layers": _int(cfg, "layers"), "hidden": h, "heads": heads, "kv_heads": kv,
           "seq_len": seq_len or _int(cfg, "seq_len"), "vocab": _int(cfg, "vocab"), "ffn_hidden": int(ffn),
           "activation": activation, "norm": norm, "position": position,
           "tied_embeddings": bool(cfg.get("tie_word_embeddings", tied)),
           "attention": "flash", "precision_bytes": 4 if dtype == "float32" else 2,
           "global_batch": global_batch, "micro_batch": micro_batch}
    if global_batch % micro_batch:
        raise InstanceError("--global-batch", f"{global_batch} is not a multiple of --micro-batch {micro_batch}")
    return out


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """A ``config.json``, parsed (bounded read, one-line errors)."""
    try:
        return json.loads(read_text_file(path))
    except json.JSONDecodeError as e:
        raise InstanceError("config", f"{path}: not JSON ({e.msg}, line {e.lineno})") from None

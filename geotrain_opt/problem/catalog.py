"""Built-in GPU catalog and model presets.

Each entry names the public source of its figures. Conventions:

* ``peak_tflops`` is the *dense* FP16/BF16 tensor rate with FP32 accumulation
  (sparse figures are twice that and are never used).
* ``memory_gib``: the vendors' "GB" label taken as GiB (HBM capacities are
  binary); the small difference is covered by ``memory_headroom``.
* ``busy_w`` is the board power (TDP): "Peak per-GPU power in LLM
  training iterations reaches or exceeds TDP" (Patel et al., ASPLOS'24).
* ``wait_w`` is the power of a GPU that holds a context and spins on a
  transfer. Measured for A100 (85 W) and A40 (70 W) in ml-energy/kareus; for
  the others it is *bare idle + CUDA-context tax* (arXiv 2605.23918) and marked
  "estimate".
* ``efficiency`` (achievable fraction of peak, i.e. MFU) is a planning default,
  not a measurement: 0.45 for NVLink-class data-centre parts, 0.40 for older or
  PCIe parts, 0.35 for GDDR parts whose memory bandwidth limits training. Every
  instance may override it per type or per device.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuType:
    name: str
    peak_tflops: float
    efficiency: float
    memory_gib: float
    busy_w: float
    wait_w: float
    source: str = ""
    price_per_hour: float = 0.0      # USD per GPU-hour; 0: not priced (no catalog default: prices are the user's)
    # lower clocks (fraction of the listed speed, board power while computing at it),
    # as the instance lists them; the listed speed and busy_w are always clock 1
    clocks: tuple[tuple[float, float], ...] = ()
    # tokens per micro-batch at which the achieved efficiency is half of ``efficiency``
    # (model.md §1: eff(n) = efficiency * n / (n + half_tokens)); 0: constant
    half_tokens: float = 0.0


def _g(name, peak, eff, mem, busy, wait, source):
    return GpuType(name, peak, eff, mem, busy, wait, source)


# Default lower clocks (``clocks: default``, formulations/model.md §10): the listed
# speed times these fractions. Not measured per GPU: board power at clock f is
# modelled as P_wait + (P_busy - P_wait) * f**3, i.e. the part above the
# blocked-in-NCCL floor is CMOS dynamic power C V^2 f with the voltage scaling with
# the clock across the DVFS range (the textbook relation; Afzal et al.,
# arXiv 2607.00819, measure this nonlinear rise on A40/A100/H100/H200 and find that
# lowering the clock beats power capping), and the floor is the catalog's measured
# or estimated ``wait_w`` (ml-energy/kareus for A40/A100). Fractions stop at 0.7: the
# lowest application clocks of data-centre parts sit near half the boost clock
# (A100: 765 MHz base, 1,410 MHz boost), and below the voltage floor power falls
# only linearly, so the cube would overstate the saving there.
DEFAULT_CLOCK_FRACTIONS = (0.85, 0.7)
DEFAULT_CLOCK_EXPONENT = 3.0
DEFAULT_CLOCK_SOURCE = ("modelled: P(f) = wait_w + (busy_w - wait_w) f^3 at f = 0.85, 0.7 "
                        "(dynamic power ~ V^2 f, V ~ f; Afzal et al. arXiv 2607.00819); replace with a profile")


def default_clocks(busy_w: float, wait_w: float) -> tuple[tuple[float, float], ...]:
    """The default lower clocks of a GPU with these powers: (fraction, busy W), fastest first."""
    return tuple((f, round(wait_w + (busy_w - wait_w) * f ** DEFAULT_CLOCK_EXPONENT, 1))
                 for f in DEFAULT_CLOCK_FRACTIONS)


GPU_CATALOG: dict[str, GpuType] = {g.name: g for g in [
    _g("V100-SXM2-32GB", 125.0, 0.40, 32, 300, 53,
       "125 TF: NVIDIA CUDA 9 tensor-core blog; 300 W; 53 W at P0 idle with memory held (GLM-130B #32)"),
    _g("V100-SXM2-16GB", 125.0, 0.40, 16, 300, 53,
       "as V100-SXM2-32GB with 16 GB HBM2 (AWS p3.2xlarge/8xlarge/16xlarge): NVIDIA V100 datasheet"),
    _g("V100-PCIe-16GB", 112.0, 0.40, 16, 250, 50,
       "112 TF, 250 W: heise/io-tech V100 PCIe; wait 50 W estimate (V100 SXM2 anecdote scaled)"),
    _g("A100-SXM4-40GB", 312.0, 0.45, 40, 400, 85,
       "312 TF, 400 W: NVIDIA datasheet via glennklockwood; 85 W blocked on P2P: ml-energy/kareus"),
    _g("A100-SXM4-80GB", 312.0, 0.45, 80, 400, 85,
       "312 TF, 400 W: NVIDIA datasheet; wait as A100-40GB (kareus)"),
    _g("H100-SXM5-80GB", 989.0, 0.45, 80, 700, 145,
       "989 TF dense (1,979 sparse / 2), 700 W: NVIDIA datasheet copy; ~140-145 W at P0 (gpu-burn #114)"),
    _g("H200-SXM-141GB", 989.0, 0.45, 141, 700, 145,
       "same die/compute as H100 SXM, 141 GB, up to 700 W (aiwiki H200); wait as H100 (estimate)"),
    _g("L4", 121.0, 0.35, 24, 72, 20,
       "121 TF dense, 72 W: L4/L40S comparison (grokipedia); wait 20 W estimate"),
    _g("L40S", 362.0, 0.35, 48, 350, 100,
       "362 TF dense, 350 W: L40S datasheet (mullet.se); wait = ~35 W idle + 66 W context tax (2605.23918), estimate"),
    _g("T4", 65.0, 0.35, 16, 70, 20,
       "65 TF FP16 mixed, 70 W (networkoutlet, sysrqmts); wait 20 W estimate"),
    _g("A10", 125.0, 0.35, 24, 150, 40,
       "125 TF dense, 150 W (baseten, sysrqmts); wait 40 W estimate"),
    _g("A40", 149.7, 0.40, 48, 300, 70,
       "149.7 TF dense, 300 W (datasheet via ecer); 70 W blocked on P2P: kareus/Perseus"),
    _g("RTX-3090", 71.0, 0.35, 24, 350, 50,
       "~71 TF with FP32 accumulate (GA102 whitepaper, unverified), 350 W; wait 50 W (consumer Ampere idle 20-50 W)"),
    _g("RTX-4090", 165.2, 0.35, 24, 450, 50,
       "165.2 TF with FP32 accumulate, 450 W (waredb); wait 50 W estimate"),
    _g("MI250X-GCD", 191.5, 0.35, 64, 280, 70,
       "one GCD = half of MI250X: 383/2 TF, 64 GB, 560/2 W (AMD table via zexron, yobitel); wait estimate"),
    _g("MI300X", 1307.0, 0.35, 192, 750, 150,
       "~1,307 TF dense, 192 GB, 750 W (jaredwatkins MI300 page); wait estimate"),
]}


@dataclass(frozen=True)
class ModelPreset:
    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn_hidden: int | None = None   # None -> 4*hidden
    source: str = ""
    # the architecture (model.md §1.1): what an export must say to train this model
    activation: str = "gelu"
    kv_heads: int = 0               # 0: as many as heads
    norm: str = "layernorm"
    position: str = "learned"
    tied_embeddings: bool = True

    def fields(self) -> dict[str, Any]:
        """The instance's ``model`` fields this preset stands for (kv_heads 0: as many
        as the heads, also when an instance overrides them)."""
        return {"layers": self.layers, "hidden": self.hidden, "heads": self.heads, "seq_len": self.seq_len,
                "vocab": self.vocab, "ffn_hidden": self.ffn_hidden or 4 * self.hidden,
                "activation": self.activation, "kv_heads": self.kv_heads, "norm": self.norm,
                "position": self.position, "tied_embeddings": self.tied_embeddings}


_LLAMA = dict(activation="swiglu", norm="rmsnorm", position="rope", tied_embeddings=False)

# GPT-2 and GPT-3 tie the output head to the token embedding and learn positions;
# Llama-2 is SwiGLU, RMSNorm, RoPE, untied, and grouped-query attention at 70B (8 KV heads).
MODEL_PRESETS: dict[str, ModelPreset] = {m.name: m for m in [
    ModelPreset("gpt2-small", 12, 768, 12, 1024, 50257, source="Radford et al. 2019"),
    ModelPreset("gpt2-medium", 24, 1024, 16, 1024, 50257, source="Radford et al. 2019"),
    ModelPreset("gpt2-large", 36, 1280, 20, 1024, 50257, source="Radford et al. 2019"),
    ModelPreset("gpt2-xl", 48, 1600, 25, 1024, 50257, source="Radford et al. 2019"),
    ModelPreset("gpt3-xl", 24, 2048, 24, 2048, 50257, source="Brown et al. 2020, Table 2.1 (1.3B)"),
    # ReLU is a two-matrix MLP ("gelu" in model.md §1.1); its 512-wide embedding projection is left out
    ModelPreset("opt-350m", 24, 1024, 16, 2048, 50272, source="Zhang et al. 2022 (OPT), Table 1; Sailor's "
                "scenarios (Strati et al., SOSP'25)"),
    ModelPreset("gpt3-2.7b", 32, 2560, 32, 2048, 50257, source="Brown et al. 2020, Table 2.1"),
    ModelPreset("gpt3-6.7b", 32, 4096, 32, 2048, 50257, source="Brown et al. 2020, Table 2.1"),
    ModelPreset("gpt3-13b", 40, 5140, 40, 2048, 50257, source="Brown et al. 2020, Table 2.1"),
    ModelPreset("llama2-7b", 32, 4096, 32, 4096, 32000, 11008, **_LLAMA,
                source="Touvron et al. 2023; Hugging Face meta-llama/Llama-2-7b-hf config.json"),
    ModelPreset("llama2-13b", 40, 5120, 40, 4096, 32000, 13824, **_LLAMA,
                source="Touvron et al. 2023; Hugging Face meta-llama/Llama-2-13b-hf config.json"),
    ModelPreset("llama2-70b", 80, 8192, 64, 4096, 32000, 28672, kv_heads=8, **_LLAMA,
                source="Touvron et al. 2023; Hugging Face meta-llama/Llama-2-70b-hf config.json (8 KV heads)"),
]}

"""The one place where people's units (ms, Gbit/s, GiB, TFLOP/s) become SI."""
from __future__ import annotations

MS = 1e-3                 # seconds per millisecond
GBIT_PER_S = 1e9 / 8.0    # bytes/s per Gbit/s
GIB = float(2**30)        # bytes per GiB
TFLOPS = 1e12             # FLOP/s per TFLOP/s


def ms_to_s(x: float) -> float:
    return x * MS


def gbps_to_bytes_per_s(x: float) -> float:
    return x * GBIT_PER_S


def s_per_byte_to_gbps(x: float) -> float:
    """The rate, in Gbit/s, of something that takes x seconds per byte."""
    return 1.0 / (x * GBIT_PER_S)


def gib_to_bytes(x: float) -> float:
    return x * GIB


def tflops_to_flops(x: float) -> float:
    return x * TFLOPS

"""The iteration time T in the exact model: the rings overlap the drain
(formulations/model.md §3.3, exact.md §3.10).

Stage j's ring starts once every replica's stage j has run its last backward, at
PT_k - d_kj, d_kj = sum_{i<j} ((1 - phi) t_ki + e_{k,i-1} + e_ki + lk_ki): the drain
from stage j down to stage 0 (phi the layers' forward share; stages i < P-1 carry no
LM head). So

    T >= PT_k                                  every replica,
    T >= PT_k - d_kj + Rb_j + Ra_j             every replica and stage (D > 1),
    T >= PT_k - d_{k,P-1} + wsync              the shared WAN floor (§3.9), from the
                                               first ring's start on.

The drain's variables have negative coefficients here, and every PT_k row holds each
of them with a larger one (t once per flush, e and lk twice), so raising one never
lowers a row: a minimiser still sets them to their values. CP-SAT pays for the
rounding of a negative coefficient in the row itself (``CpSatBackend.ge``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.solvers.exact.rows import _Model


def drain(m: "_Model", k: int, j: int) -> list:
    """Terms of d_kj: each stage i < j's backward with half its row's exposed time, and the hop down."""
    back = 1.0 - m.a.fwd_share
    out: list = []
    for i in range(j):
        row = m.stage_row(k, i)
        out += [(back * row[0][0], row[0][1])] + [(c / 2.0, v) for c, v in row[1:]]
        out.append((1.0, m.lk[k, i]))
    return out


def state(m: "_Model") -> None:
    """T over the replicas' PT_k, each stage's ring after its drain, and the WAN floor."""
    be, T = m.be, m.T
    wan = getattr(m, "wan_sync", None)
    for k in m.K:
        be.ge(T, [(1.0, m.PT[k])])
        if m.D == 1:
            continue
        for j in m.J:
            Rb, Ra = m.ring[j]
            minus = [(-c, v) for c, v in drain(m, k, j)]
            be.ge(T, [(1.0, m.PT[k]), (1.0, Rb), (1.0, Ra)] + minus)
            if wan is not None and j == m.P - 1:
                be.ge(T, [(1.0, m.PT[k]), (1.0, wan)] + minus)

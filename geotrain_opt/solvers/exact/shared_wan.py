"""Shared WAN capacity in the exact model (formulations/model.md §3.2, exact.md §3.9).

Stated only when the instance gives a region pair a ``capacity_gbps``, after the
pipeline links and the rings and before the makespan, so every other model keeps
its variables and their order. Two families, both linear in 0/1 indicators:

* pipelines: z[p, k, j] = 1 when hop j of replica k joins the two regions of pair
  p (either way); every replica with such a hop has tau_k >= A n_p / C_p (GPipe:
  each of its two phases' periods), with n_p = sum z[p, ., .] the pair's messages
  per period each way;
* rings: c[d, j, k] = 1 when ring edge k -> k+1 of stage j goes from region r to
  r' (d = (r, r')); v[d, j, k] >= 2 (D-1)/D grad_bytes N_j / C_d when c, and the
  sync wsync >= sum v[d, ., .] + (least latency r -> r') [some edge uses d], which
  starts once the last stage is done (T >= PT_k - d_{k,P-1} + wsync, sync.py).

Every indicator is pushed up by its definition row (z >= [in r at j] + [in r' at
j+1] - 1) and only ever raises a cost, so a minimiser sets it exactly.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.solvers.exact.rows import _Model


def state(m: "_Model") -> None:
    """The rows of both families on model ``m`` (nothing without a capacity)."""
    if not m.a.shared_wan:
        return
    region = [int(m.a.region[members[0]]) for members in m.unit_members]   # a unit lies in one region
    _pipelines(m, region)
    if m.D > 1:
        _rings(m, region)


def _in(m: "_Model", region: list[int], k: int, j: int, r: int) -> list:
    """Terms of [slot (k, j) is held in region r]."""
    return [(1.0, m.x[u, k, j]) for u in m.U if region[u] == r]


def _pipelines(m: "_Model", region: list[int]) -> None:
    a, be, P = m.a, m.be, m.P
    R = a.inv_cap.shape[0]
    for r1 in range(R):
        for r2 in range(r1 + 1, R):
            per_msg = a.A * max(a.inv_cap[r1, r2], a.inv_cap[r2, r1])
            if per_msg <= 0 or P < 2:
                continue
            z = {}
            for k in m.K:
                for j in range(P - 1):
                    m.tick()
                    z[k, j] = zz = be.boolean(f"wz_{r1}_{r2}_{k}_{j}")
                    for ra, rb in ((r1, r2), (r2, r1)):       # the hop r1 -> r2 or r2 -> r1
                        be.le(_in(m, region, k, j, ra) + _in(m, region, k, j + 1, rb) + [(-1.0, zz)], 1, 1.0)
            load = [(per_msg, zz) for zz in z.values()]
            for (k, _j), zz in z.items():       # GPipe: each phase carries the pair's messages one way
                for tau in (m.tau_phase[k] if a.gpipe else [m.tau[k]]):
                    be.ge(tau, load, 0.0, (zz,))


def _rings(m: "_Model", region: list[int]) -> None:
    a, be, D = m.a, m.be, m.D
    R = a.inv_cap.shape[0]
    m.wan_sync = be.real("wsync", m.R_ub, m.spec.t_unit)     # the makespan adds it after the drain (sync.py)
    for r1 in range(R):
        for r2 in range(R):
            if a.inv_cap[r1, r2] <= 0:
                continue
            used = be.boolean(f"wu_{r1}_{r2}")
            s = m.cring * a.inv_cap[r1, r2]                   # seconds per parameter of one edge
            v_terms = []
            for j in m.J:
                for k in m.K:
                    m.tick()
                    c = be.boolean(f"wc_{r1}_{r2}_{j}_{k}")
                    be.le(_in(m, region, k, j, r1) + _in(m, region, (k + 1) % D, j, r2) + [(-1.0, c)], 1, 1.0)
                    be.le([(1.0, c), (-1.0, used)], 0, 1.0)
                    v = be.real(f"wv_{r1}_{r2}_{j}_{k}", m.R_ub, m.spec.t_unit)
                    be.ge(v, [(c_ * s, var) for c_, var in m.Npar[j]], m.N_c[j] * s, (c,))
                    v_terms.append((1.0, v))
            be.ge(m.wan_sync, v_terms + [(float(a.cap_alpha[r1, r2]), used)])

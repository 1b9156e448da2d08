"""GPipe's period in the exact model (formulations/model.md §3, exact.md §3.2).

Under GPipe a flush runs all its forwards, then all its backwards, so each phase
streams at its own bottleneck: tau_k = tau_F + tau_B with
tau_F >= f_kj + e_{k,j-1} + e_kj and tau_F >= o_kj (forwards), and the same for
the backwards b_kj = t_kj - f_kj. f_kj is the stage's forward share of its work on
its unit: the layers' forward share and a third of the LM head. Stated right after
the pipeline links; 1F1B models have none of these rows or variables."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.solvers.exact.rows import _Model


def state(m: "_Model") -> None:
    """tau_k >= tau_F + tau_B, each phase's period over the stages and links of replica k."""
    if not m.a.gpipe:
        return
    a, be, t_unit = m.a, m.be, m.spec.t_unit
    m.tau_phase = {}
    for k in m.K:
        taus = []
        for phase, share, head in (("F", a.fwd_share, 1.0 / 3.0), ("B", 1.0 - a.fwd_share, 2.0 / 3.0)):
            tp = be.real(f"tau{phase}_{k}", m.tau_ub, t_unit)
            for j in m.J:
                tj = be.real(f"t{phase}_{k}_{j}", m.t_ub, t_unit)
                for u in m.U:
                    m.tick()
                    s = 1.0 / m.speed[u]
                    be.ge(tj, [(c * share * s, v) for c, v in m.W[j]], m.W_c[j] * head * s, (m.x[u, k, j],))
                # one operation holds the stage for its compute and half of the row's exposed time
                exposed = [(c / 2.0, v) for c, v in m.stage_row(k, j)[1:]]
                be.ge(tp, [(1.0, tj)] + exposed)
            for j in range(m.P - 1):
                be.ge(tp, [(1.0, m.oc[k, j])])
            taus.append(tp)
        m.tau_phase[k] = taus
        be.ge(m.tau[k], [(1.0, v) for v in taus])

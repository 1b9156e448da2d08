"""1F1B's window and blocks in the exact model (formulations/model.md §3.1, exact.md §3.2).

Stage j holds at most W = P - j micro-batches of a flush, so past its window it waits
for round trips (one row per stage), and every block j..l inside the pipeline closes
a cycle B(i, j) -> F(i + W, j) -> ... -> B(i + w, j) while stage j still has
forwards to run (two rows per block: its cycles then its drain, or its cycles then a
round trip); the rows the reference ``cost/window.py`` takes the maximum of, term by term."""
from __future__ import annotations

from typing import TYPE_CHECKING

from geotrain_opt.solvers.exact.spec import scaled as _scaled

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.solvers.exact.rows import _Model


def window_rows(model: "_Model", k: int, fill: list, m: int, S: int) -> list[list]:
    """1F1B's window (formulations/model.md §3.1), one row per stage j whose window
    W = P - j is smaller than a flush: over the flushes (``extra`` of base + 1
    micro-batches, the rest of base), (floor((q-1)/W) + 1) round trips from j to the
    last stage and back, ((q-1) mod W) periods and the way to j and back; a flush the
    window does not bind counts as in the fill-and-period row."""
    P, lk, tau = model.P, model.lk, model.tau
    row = lambda l: model.stage_row(k, l)  # noqa: E731  (stage l's row, as in tau)

    base, extra = divmod(m, S)
    rows = []
    for j in range(P):
        W = P - j
        if W >= base + (1 if extra else 0):
            continue                  # no flush holds more than the window: the fill row covers it
        around = [r for l in range(j, P) for r in row(l)] + [(2.0, lk[k, l]) for l in range(j, P - 1)]
        before = [r for l in range(j) for r in row(l)] + [(2.0, lk[k, l]) for l in range(j)]
        terms: list = []
        for q, count in ((base + 1, extra), (base, S - extra)):
            if count == 0:
                continue
            if W < q:
                terms += _scaled(around, float(count * ((q - 1) // W + 1))) + _scaled(before, float(count))
                if (q - 1) % W:
                    terms.append((float(count * ((q - 1) % W)), tau[k]))
            else:
                terms += _scaled(fill, float(count)) + [(float(count * (q - 1)), tau[k])]
        rows.append(terms)
    # blocks j..l inside the pipeline (l < P - 1): B(i, j) -> F(i + W, j) -> ... ->
    # B(i + w, j), one cycle each while i + W < q, then the block's drain per micro-batch
    flushes = [(q, count) for q, count in ((base + 1, extra), (base, S - extra)) if count]
    for j in range(P - 2):
        W = P - j
        if W >= base + (1 if extra else 0):
            continue                  # stage j never runs out of its window: no cycle closes
        around = [r for l in range(j, P) for r in row(l)] + [(2.0, lk[k, l]) for l in range(j, P - 1)]
        for l in range(j + 1, P - 1):
            w = l - j + 1
            cycle = [r for i in range(j, l + 1) for r in row(i)] + [(2.0, lk[k, i]) for i in range(j, l)]
            cycles: list = []
            then_round: list = []         # the cycles while a round trip can still start, then it
            for q, count in flushes:
                cycles += _scaled(fill, float(count))
                then_round += _scaled(fill, float(count))
                if q > W:
                    loops = (q - 1 - W) // w + 1
                    cycles += _scaled(cycle, float(count * loops))
                    if q - 1 - loops * w:
                        cycles.append((float(count * (q - 1 - loops * w)), block_drain(model, k, j, l)))
                    then_round += _scaled(cycle, float(count * (loops - 1))) + _scaled(around, float(count))
                    if q - 1 - (loops - 1) * w - W:
                        then_round.append((float(count * (q - 1 - (loops - 1) * w - W)), block_drain(model, k, j, P - 2)))
            rows += [cycles, then_round]
    return rows


def tail_rate(model: "_Model", k: int, j: int):
    """A drained stage's rate (§3.1, j < P - 1, no LM head): tl_kj >= its backward
    (1 - phi) t_kj with its two messages' exposed time, and >= its link's occupancy."""
    key = (k, j)
    if key not in model.tails:
        be = model.be
        model.tails[key] = v = be.real(f"tl_{k}_{j}", model.tau_ub, model.spec.t_unit)
        row = model.stage_row(k, j)
        be.ge(v, [((1.0 - model.a.fwd_share) * row[0][0], row[0][1])] + [(c / 2.0, u) for c, u in row[1:]])
        be.ge(v, [(1.0, model.oc[k, j])])
    return model.tails[key]


def block_drain(model: "_Model", k: int, j: int, l: int):
    """The slowest drained stage of block j..l: dr_kjl >= tl_ks for j <= s <= l, as a
    chain dr_kjl >= dr_kj(l-1), dr_kjl >= tl_kl (a minimiser sets it to their maximum)."""
    key = (k, j, l)
    if key not in model.tails:
        if l == j:
            return tail_rate(model, k, j)
        be = model.be
        model.tails[key] = v = be.real(f"dr_{k}_{j}_{l}", model.tau_ub, model.spec.t_unit)
        be.ge(v, [(1.0, block_drain(model, k, j, l - 1))])
        be.ge(v, [(1.0, tail_rate(model, k, l))])
    return model.tails[key]

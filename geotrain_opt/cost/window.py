"""1F1B's window and blocks for one replica, the reference (formulations/model.md
§3.1; the batched evaluator's is ``stagecost.window_time``, the exact model's rows
``solvers/exact/window.py``)."""
from __future__ import annotations


def window_time(row: list[float], x: list[float], tau: float, fill: float, m: int, S: int,
                tail: list[float]) -> float:
    """1F1B's window (§3.1): stage j holds at most W = P - j micro-batches of a
    flush, so of q > W micro-batches every W wait for one round trip from stage j
    to the last stage and back, L_j = sum_{l>=j} row_l + 2 sum_{l>=j} x_l: a flush
    takes at least (floor((q-1)/W) + 1) L_j + ((q-1) mod W) tau_k + the way to stage
    j and back. The largest over the stages, summed over the flushes (m = S base +
    extra: ``extra`` flushes of base + 1). And every block of stages j..l inside
    the pipeline, w = l - j + 1 of them, closes a cycle B(i, j) -> F(i + W, j) -> ...
    -> B(i + w, j) of weight sum_{j..l} row + 2 sum_{j..l-1} x while stage j has
    forwards left (i + W < q); the flush's last micro-batches then leave at the
    block's slowest ``tail`` (a stage's backward with its messages, or its link down);
    or the cycles end with one round trip from j (the last that can still start),
    after which the last micro-batches leave at the slowest tail below the last stage."""
    P = len(row)
    base, extra = divmod(m, S)
    flushes = [(q, count) for q, count in ((base + 1, extra), (base, S - extra)) if count]
    hop = [2.0 * v for v in x] + [0.0]              # 2 x_l, none after the last stage
    # way[i] = sum_{l<i} (row_l + 2 x_l): the way from stage 0 to stage i and back
    way = [0.0]
    for l in range(P):
        way.append(way[-1] + row[l] + hop[l])
    worst = 0.0
    for j in range(P):
        W = P - j
        around, before = way[P] - way[j], way[j]      # round trip from j; the way to j
        total = 0.0
        for q, count in flushes:
            if W < q:
                total += count * (((q - 1) // W + 1) * around + ((q - 1) % W) * tau + before)
            else:
                total += count * (fill + (q - 1) * tau)
        worst = max(worst, total)
        drain = tail[j]
        # after a round trip from j every stage below the last has been passed
        drain_all = max(tail[j:P - 1], default=0.0)
        for l in range(j + 1, P - 1):           # blocks inside the pipeline, two stages or more
            drain = max(drain, tail[l])             # the slowest drained stage of the block
            cycle = way[l + 1] - way[j] - hop[l]    # sum_{j..l} row + 2 sum_{j..l-1} x
            w = l - j + 1
            total = then_round = 0.0
            for q, count in flushes:
                if q > W:       # B(i, j) -> F(i + W, j) -> ... -> B(i + w, j) while i + W < q
                    loops = (q - 1 - W) // w + 1
                    total += count * (fill + loops * cycle + (q - 1 - loops * w) * drain)
                    # or the cycles while a round trip can still start, then that round trip
                    then_round += count * (fill + (loops - 1) * cycle + around + (q - 1 - (loops - 1) * w - W) * drain_all)
                else:
                    total += count * fill
                    then_round += count * fill
            worst = max(worst, total, then_round)
    return worst

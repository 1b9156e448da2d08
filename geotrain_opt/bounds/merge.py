"""The merge tier's cases (formulations/proofs.md §8): the plan's D P devices lie in
one component of the least tier t that holds them all and span two components of
tier t-1, so some replica or ring (or every one) crosses between those "sites". Each
case names who crosses and how often, and bounds the plan with one cut for the
period and the rings. A mixin of the per-shape bound (shape.py): it reads that
shape's constants and its replica and ring terms."""
from __future__ import annotations

import itertools
import math

import numpy as np

from geotrain_opt.bounds.knobs import INF, ISOLATED_SETS, LOWER_SITES, LOWER_SITES_MAX, SITE_ORDERS, SITE_WORK
from geotrain_opt.problem.tiers import _fewest_segments, _Inside, _Tiers, merged_components


class MergeCases:
    """The merge tier's cases of one shape."""

    def site_orders(self, mt: _Inside, y: int, desc: np.ndarray, floor: float) -> float:
        """Every ring inside a component of tier y (a site) that holds at most one
        ring: the P rings lie in P different sites, ring j in site sigma(j), and
        every replica's stage j in ring j, so every replica's link j joins
        sites sigma(j) and sigma(j+1) and is no better than their fastest link.
        The least over the orders sigma (at most SITE_ORDERS) of the joint cut
        with those links; ``floor`` as soon as an order shows nothing above it."""
        sizes, ib, hp, al = self.sb.site_links(mt, y)
        cap = sizes // self.D
        if self.P < 2 or cap.max() > 1:
            return floor
        held = np.nonzero(cap == 1)[0]
        if len(held) < self.P or math.perm(len(held), self.P) > SITE_ORDERS:
            return floor
        best = INF
        for sigma in itertools.permutations(held.tolist(), self.P):
            exact = [(self.A * float(ib[u, v]), float(hp[u, v])) for u, v in zip(sigma[:-1], sigma[1:])]
            best = min(best, self.with_ring(desc, self.cring * self.b1, self.ring_lat1, exact=exact))
            if best <= floor:
                return floor
        return best

    def split_sites(self, mt: _Tiers, t: int, desc: np.ndarray, z: float, occ_z: float, hop_z: float,
                    k_max: int, ring_big: float, floor: float) -> float:
        """The mixed case of the merge tier (some replica and some ring cross
        between the components, "sites", of tier t-1), split further. A ring
        inside a site holds one device of every replica. (a) Some replica is
        whole, in site C: every whole ring is in C too, and with k whole replicas
        C holds k P + r (D - k) devices for r whole rings, so r <= r1; the other
        rings cross. (b) No replica is whole: every replica has a slow link, and
        r whole rings spread over c sites make every replica cross c - 1 times.
        Each sub-case: one cut for the period and the crossing rings' heaviest
        stage, the whole rings' stages free (formulations/proofs.md §8). Returns
        ``floor`` as soon as a sub-case shows it cannot do better than that."""
        coef, lat = self.cring * z, ring_big - self.cring * self.N_big * z
        sizes = np.sort(mt.sizes[t - 1])[::-1]
        # some ring crosses: r < P whole rings. If the plan takes every device of C and
        # every site holds a multiple of D devices, P-1 whole rings leave D devices
        # whose count per site is a multiple of D: one site, a whole ring: r < P-1
        r_top = self.P - 2 if (len(mt.members) == self.D * self.P and not (sizes % self.D).any()) else self.P - 1
        # the D P devices are pieces of replicas inside sites; with the fewest pieces
        # the sites allow, D replicas cross (pieces - D) times in all, so one replica
        # crosses at least the average (whatever the case)
        n_some = min(self.P - 1, max(1, -(-(_fewest_segments(sizes, self.D * self.P, self.P) - self.D) // self.D)))
        some = INF
        if k_max >= 1:
            big = int(sizes[0])
            r1 = max((big - k * self.P) // (self.D - k) for k in range(1, k_max + 1))
            r1 = min(r_top, max(0, r1))       # some ring crosses
            some = max(self.with_ring(desc, coef, lat, r1), self.with_ring(desc, coef, lat, r1, occ_z, hop_z, n_some, "some"))
            if some <= floor:
                return floor
        hold = np.cumsum(sizes // self.D)
        one_ring = bool(sizes[0] < 2 * self.D)        # no site holds two whole rings
        none = INF
        room = np.cumsum(sizes)
        seen = -1
        for c in range(0, len(hold) + 1):       # in this case some ring crosses: r < P
            r = 0 if c == 0 else min(r_top, int(hold[c - 1]))
            if r == seen:         # more sites for as many rings only cost more crossings
                continue
            seen = r
            cross = max(1, c - 1)
            if c >= 1:
                # the fewest whole rings that need c sites leave too little room there
                # for any replica to stay inside them: each also leaves them, c crossings
                r_lo = (int(hold[c - 2]) if c >= 2 else 0) + 1
                if int(room[c - 1]) - r_lo * self.D < self.P - r_lo:
                    cross = c
            case = self.with_ring(desc, coef, lat, r, occ_z, hop_z, min(self.P - 1, cross))
            if n_some > cross and case < none:
                case = max(case, self.with_ring(desc, coef, lat, r, occ_z, hop_z, n_some, "some"))
            if r >= 1 and one_ring and case < none and math.comb(self.P, r) <= ISOLATED_SETS:
                # each whole ring fills its own site but for `spare` devices: a replica
                # with none of them has every neighbour of its whole-ring stages elsewhere
                spare = int((sizes[:r] - self.D).sum())
                if spare < self.D:
                    which = "every" if spare == 0 else "some"
                    case = max(case, self.with_ring(desc, coef, lat, r, occ_z, hop_z, which=which, isolated=True))
                    if case < none:
                        case = max(case, self.whole_sites(mt, t - 1, r, which, desc, coef, lat, case))
            none = min(none, case)
            if none <= floor:
                return floor
            if r >= r_top:
                break
        return min(some, none)

    def whole_sites(self, mt: _Inside, y: int, r: int, which: str, desc: np.ndarray, coef: float, lat: float,
                    floor: float) -> float:
        """The full-sites case with the whole rings' sites named: whole ring e
        (stage e of the positions E) fills site sigma(e), so the replica's link
        beside it leads to another site that no whole ring fills, or to
        sigma(e+1) when stage e+1 is whole too; each such link is no better than
        the fastest between those sites. With no spare device (``every``), each
        crossing ring spans two or more of the other sites, so the replicas'
        patterns (the site of each crossing stage) cover two sites per crossing
        stage: the plan is no faster than the least, over such sets of patterns,
        of their slowest one. The least over E and sigma (within SITE_WORK joint
        cuts); ``floor`` as soon as one shows nothing above it."""
        sizes, ib, hp, al = self.sb.site_links(mt, y)
        held = np.nonzero(sizes >= self.D)[0].tolist()
        work = math.comb(self.P, r) * math.perm(len(held), r) * (1 + (len(sizes) - r) ** (self.P - r))
        if len(held) < r or work > SITE_WORK:
            return floor

        def links(site: dict[int, int]) -> list[tuple[float, float]]:
            out = []
            for i in range(self.P - 1):
                u, v = site.get(i), site.get(i + 1)
                if u is None or v is None:
                    out.append((0.0, self.hop))
                else:
                    out.append((self.A * float(ib[u, v]), float(hp[u, v])))
            return out

        best = INF
        for ex in itertools.combinations(range(self.P), r):
            crossing = [j for j in range(self.P) if j not in ex]
            for sigma in itertools.permutations(held, r):
                others = [u for u in range(len(sizes)) if u not in sigma]
                if not others:
                    continue                # the crossing rings have no site left
                site = dict(zip(ex, sigma))
                # with no spare device, a crossing ring spans two of the other sites: it has
                # a link between two of them
                coef_x, lat_x = coef, lat
                if which == "every" and len(others) >= 2 and not self.ringless:
                    pairs = list(itertools.combinations(others, 2))
                    coef_x = max(coef, self.cring * float(min(ib[u, v] for u, v in pairs)))
                    lat_x = max(lat, 2.0 * (self.D - 1) * float(min(al[u, v] for u, v in pairs)))
                # beside a whole stage, the best of the other sites
                exact = links(site)
                for i in range(self.P - 1):
                    u, v = site.get(i), site.get(i + 1)
                    if (u is None) != (v is None):
                        w = u if u is not None else v
                        exact[i] = (self.A * float(ib[w, others].min()), float(hp[w, others].min()))
                val = self.with_ring(desc, coef_x, lat_x, ex, which=which, exact=exact)
                if which == "every" and len(others) >= 2 and val < best:
                    cost = []
                    for pat in itertools.product(others, repeat=len(crossing)):
                        exact_p = links(site | dict(zip(crossing, pat)))
                        if all(math.isfinite(h) for _o, h in exact_p):     # else two stages on one device
                            cost.append((self.with_ring(desc, coef_x, lat_x, ex, which="some", exact=exact_p), pat))
                    cost.sort()
                    seen: list[set[int]] = [set() for _ in crossing]
                    for c_pat, pat in cost:
                        for s_j, u in zip(seen, pat):
                            s_j.add(u)
                        if all(len(s_j) >= 2 for s_j in seen):
                            val = max(val, c_pat)
                            break
                best = min(best, val)
                if best <= floor:
                    return floor
        return best

    def rings_inside(self, mt: _Tiers, kind: str, t: int, desc: np.ndarray, base: float, occ_z: float,
                     hop_z: float) -> float:
        """Every ring inside one component of tier t-1, split by the least tier y
        whose components hold every ring: the rings lie in at least c_y of them
        (the fewest that hold P disjoint D-sets), so each replica, with a device in
        every ring, crosses c_y - 1 times between them, over links no faster than
        tier y+1 (components change only at the tiers); above the first tier that
        holds a ring, some ring has a link of tier y (every ring but the h that
        fit inside components of tier y-1). And the plan spans two components of
        tier t-1, so each replica also crosses tier t once."""
        lv = mt.levels
        one = max(base, self.replicas(occ_z, hop_z, desc, 1))
        y0 = mt.first_fit(self.D)
        out = INF
        for y in range(y0, t):
            hold_y = np.cumsum(np.sort(mt.sizes[y] // self.D)[::-1])
            c_y = int(np.searchsorted(hold_y, self.P)) + 1
            if c_y > len(hold_y):
                continue
            rep = one
            if c_y >= 2:
                occ_y, hop_y, _big, _small = self.penalties(kind, float(lv[y + 1]))
                rep = max(rep, self.replicas(occ_y, hop_y, desc, min(self.P - 1, c_y - 1)))
            ring = self.R0 if y == y0 else max(self.R0, self.penalties(kind, float(lv[y]))[3])
            val = rep + ring
            if kind == "bandwidth" and val < out:
                # one cut for the period (its slow links in the rows) and the rings,
                # each at least as slow as the first tier that holds a ring
                occ_n, hop_n = (occ_y, hop_y) if c_y >= 2 else (occ_z, hop_z)
                n_cross = min(self.P - 1, max(1, c_y - 1))
                val = max(val, self.with_ring(desc, self.cring * self.b1, self.ring_lat1, 0, occ_n, hop_n, n_cross))
                if y > y0 and val < out:
                    # at most h rings fit inside components of tier y-1; every other
                    # ring has a link of tier y (and one cut places it)
                    h = min(self.P - 1, int((mt.sizes[y - 1] // self.D).sum()))
                    z_y = float(lv[y])
                    lat_y = self.penalties(kind, z_y)[2] - self.cring * self.N_big * z_y
                    val = max(val, self.with_ring(desc, self.cring * z_y, lat_y, h, occ_n, hop_n, n_cross))
                if val < out:
                    val = self.site_orders(mt, y, desc, val)
            out = min(out, val)
        return out

    def merge(self, kind: str) -> float:
        mt = self.tiers if kind == "bandwidth" else self.sb.hop_tiers
        todo = []
        for t in range(mt.first_fit(self.D * self.P), len(mt.levels)):
            for view in ([None] if t == 0 else merged_components(self.sb.inst, mt, t)):
                if view is None or len(view.members) >= self.D * self.P:
                    desc = self.sb._profile(kind, mt, t, self.D * self.P) if view is None else view.desc[: self.D * self.P]
                    todo.append((max(self.work(desc), self.replicas(0.0, 0.0, desc)), t, view, desc))
        # the least optimistic values first: the others are then mostly cut short
        todo.sort(key=lambda x: (x[0], x[1]))
        T_merge = INF
        for base, t, view, desc in todo:
            if base + self.R0 >= T_merge:
                break
            v = self.merge_in(kind, t, view, desc, base, T_merge)
            if view is not None and self.D * self.P > 1:
                # the plan spans two components of every lower tier s inside C too: the
                # same cases with those as sites, their links no faster than tier s+1
                # (more crossings over faster links); only where C's components change
                for s in range(min(t - 2, LOWER_SITES - 1), -1, -1):
                    if v >= T_merge:
                        break
                    if LOWER_SITES_MAX >= len(view.sizes[s]) > len(view.sizes[s + 1]):
                        v = max(v, self.merge_in(kind, s + 1, view, desc, base, T_merge))
            T_merge = min(T_merge, v)
        return T_merge

    def merge_in(self, kind: str, t: int, mt: "_Inside | None", desc: np.ndarray, base: float, T_merge: float) -> float:
        """The plans whose merge tier is t, inside the component ``mt`` of tier t
        (None: t = 0, every component), whose D P speeds are at most ``desc``
        (``base``: their work and replica bound)."""
        if self.D * self.P == 1:
            return base
        lv_k = (self.tiers if kind == "bandwidth" else self.sb.hop_tiers).levels
        z = float(lv_k[t])
        occ_z, hop_z, ring_big, ring_small = self.penalties(kind, z)
        ring_one = max(self.R0, ring_small) if self.D > 1 else self.R0
        ring_all = max(self.R0, ring_big) if self.D > 1 else self.R0
        rep_one = max(base, self.replica(self.m_light, float(desc[0]), float(desc[:self.P].sum()), occ_z, hop_z)) if self.P > 1 else base
        rep_all = max(base, self.replicas(occ_z, hop_z, desc)) if self.P > 1 else base
        if t == 0:                      # every link is at least as slow as the lowest tier
            cases = [rep_all + ring_all]
        elif self.P == 1:
            cases = [base + ring_all]
        elif self.D == 1:
            cases = [rep_all]
        else:
            # every ring inside one component of tier t-1: the rings need c of them
            # (largest first), and every replica, visiting every ring, crosses c-1 times
            hold = np.cumsum(np.sort(mt.sizes[t - 1] // self.D)[::-1])
            c = int(np.searchsorted(hold, self.P)) + 1
            n_cross = min(self.P - 1, max(1, c - 1))
            rep_cross = (max(base, self.replicas(occ_z, hop_z, desc, n_cross)) + self.R0 if c <= len(hold) else INF)
            if mt.t > t and rep_cross < T_merge:
                # likewise every replica visits every site that holds a ring: one of its
                # links crosses C's own tier
                o_c, h_c, _b, _s = self.penalties(kind, float(lv_k[mt.t]))
                rep_cross = max(rep_cross, max(base, self.replicas(o_c, h_c, desc, 1)) + self.R0)
            if rep_cross < T_merge:
                # the busiest replica runs at most the rings' speed slots
                u = self.sb._ring_slots(mt, t - 1, self.D, self.P)
                S, fill, tau_rest = self.replica_parts(self.m, float(u[0]), float(u.sum()), occ_z, hop_z, n_cross)
                rep_cross = max(rep_cross, self.sb._slot_replica(u, self.lead(S), self.m - S, fill - self.W / float(u[0]), tau_rest,
                                                                 self.lead_comm(S)) + self.c_tail / float(u[0]) + self.R0)
            if rep_cross < T_merge:
                rep_cross = max(rep_cross, self.rings_inside(mt, kind, t, desc, base, occ_z, hop_z))
            # every replica inside one component of tier t-1: not if they cannot hold
            # D disjoint P-sets
            every_ring = INF
            if int((mt.sizes[t - 1] // self.P).sum()) >= self.D:
                # every ring visits every site that holds a replica, and those hold every
                # device of the plan: they span two components below C's own tier, and
                # so does every ring (below, sites of a lower tier than C's)
                z_r = float(lv_k[mt.t])
                _o, _h, ring_r, _s = self.penalties(kind, z_r)
                every_ring = base + max(self.R0, ring_r)
                if kind == "bandwidth" and every_ring < T_merge:
                    # one cut sets both the replicas' period and the rings' heaviest stage
                    every_ring = max(every_ring, self.with_ring(desc, self.cring * z_r, ring_r - self.cring * self.N_big * z_r))
            cases = [rep_cross, every_ring]
            mixed = rep_one + ring_one
            big = int(mt.largest[t - 1])
            if self.P > big or self.D > big:
                # no component of tier t-1 holds a whole replica (ring): every one crosses,
                # a replica as often as the fewest pieces its P devices split into
                n_rep = max(1, int(np.searchsorted(np.cumsum(np.sort(mt.sizes[t - 1])[::-1]), self.P)))
                forced = ((max(base, self.replicas(occ_z, hop_z, desc, min(self.P - 1, n_rep))) if self.P > big else rep_one)
                          + (ring_all if self.D > big else ring_one))
                if kind == "bandwidth" and self.P > big and self.D > big and forced < T_merge:
                    forced = max(forced, self.with_ring(desc, self.cring * z, ring_big - self.cring * self.N_big * z, 0, occ_z, hop_z,
                                                   min(self.P - 1, n_rep)))
                mixed = max(mixed, forced)
            if kind == "bandwidth" and mixed < min(min(cases), T_merge):
                # some replica is split but not every one: the whole ones all lie in
                # one component of tier t-1 (two of them elsewhere would split every
                # ring), so at most k_max of them; each split one pays its slow hop
                k_max = min(self.D - 1, int(mt.largest[t - 1]) // self.P)
                f_s = self.W / float(desc[0]) + 2.0 * (self.P - 2) * self.hop + 2.0 * hop_z
                mixed = max(rep_one, self.split_work(desc, k_max, f_s, occ_z)) + ring_one
                if mixed < min(min(cases), T_merge):
                    mixed = self.split_sites(mt, t, desc, z, occ_z, hop_z, k_max, ring_big, mixed)
            cases.append(mixed)
        return min(cases)

"""The bounds' named knobs: how much search each relaxation may spend on one shape
(more finds stronger bounds on large instances, at the cost of time)."""

INF = float("inf")
# the joint cut bound tries at most this many placements of a replica's slow links
# in its stage rows (as many links as that allows; the rest count in the cut-free
# period terms and the fill only)
SLOW_PLACES = 40
ISOLATED_SETS = 256      # placements of the whole rings' stages tried by the full-sites bound
SITE_ORDERS = 120        # orders of the sites that hold one ring each tried by the site-order bound
# joint cuts the whole-sites bound may try: placements of the whole rings times the
# sites of a replica's crossing stages
SITE_WORK = 1000
# the merge tier's cases are also taken with the components of the lowest tiers as
# sites (typically nodes and regions; each costs about one more pass)
LOWER_SITES, LOWER_SITES_MAX = 2, 10     # (at most this many sites)

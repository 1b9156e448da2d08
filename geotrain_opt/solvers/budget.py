"""How a solver shares its time limit among its phases, named once. Each share is a
fraction of the whole limit (or of a shape's slice), so a run of any length keeps
the same proportions; the values are the measured configuration of
formulations/campaigns.md §6 and of the memetic seeding."""

# ---- the exact driver (solvers/exact/driver.py)
# the shapes' bounds: past this share, shapes not reached keep the trivial bound 0
BOUNDS_SHARE = 0.25
# constructive plans per shape (warm start, units, the order of the shapes)
CONSTRUCTIVE_SHARE = 0.2
# polished constructive plans (cuts hill-climbed, layouts by site), over all choices
POLISH_SHARE = 0.1
# of an open shape's slice, the class-grid relaxation (CP-SAT only, proofs.md §9); the
# shape's own model gets the rest
GRID_SHARE = 0.75

# ---- the memetic seeding (solvers/search/memetic/run.py)
# each solver named in ``seed_solvers`` runs on this share (and at least half a second)
SEED_SOLVER_SHARE = 0.1
# past this share no ring-per-site seed is started
SITE_SHARE = 0.4

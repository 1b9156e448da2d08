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

# ---- a whole command or API call (cli/commands.py, api.py): what a solver leaves of
# the time limit for the bound attached after it and for its own overshoot (the last
# model or generation it started; exact solvers at 64 GPUs run up to 2 s past their
# limit, benchmarks/results/time_limits.md)
BOUND_RESERVE = 0.15


def whole_limit(time_limit_s: float, started: float) -> tuple[float, float]:
    """(the solver's own limit, the end of the whole call as a ``time.perf_counter()``
    instant) for a call that began at ``started`` with ``time_limit_s`` in all
    (issue 39): what loading took comes off the solver's limit, and the solver leaves
    BOUND_RESERVE of the rest to the bound."""
    import time
    until = started + time_limit_s
    left = until - time.perf_counter()
    return max(0.05, left * (1.0 - BOUND_RESERVE)), until

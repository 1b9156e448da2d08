"""Numerical tolerances, named once: every comparison of two computed costs that
must not be decided by float noise uses one of these (the values are those the
differential campaigns validated; formulations/exact.md §5, §7).

Budget shares of a time limit (how much of it a phase may spend) are solver
matters and live in ``solvers/budget.py``."""

# A cost within this (relative) of an ε-limit meets it (the evaluators; the exact
# models state the limit LIMIT_MARGIN inside it, so their plans meet it here).
LIMIT_RTOL = 1e-12
# ε-limits are stated this much (relative) inside their value in the exact models
LIMIT_MARGIN = 1e-6
# Lexicographic tie-breaks compare primary values within this: two methods' float
# noise does not decide a tie.
TIE_RTOL = 1e-9
# A bound within this of the incumbent closes a shape; a cutoff admits plans this
# far above the incumbent (the integer model's rounding of a plan equal to it).
PROOF_RTOL = 1e-9
# The tie-break refines the shapes whose best plan lies within this of the optimum.
OPTIMUM_RTOL = 1e-6
# A local move (cuts, ring order, site sequence) must gain more than this to be taken.
IMPROVE_RTOL = 1e-12
# Guards a division by a quantity that may be zero (no link, no speed).
TINY = 1e-300

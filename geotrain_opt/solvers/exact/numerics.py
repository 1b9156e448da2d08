"""The exact models' numerical limits, named once (formulations/exact.md §5).

Shared by the CP-SAT back end and the class-grid relaxation, which must agree on
how far an integer row may reach."""
from geotrain_opt.problem.tolerances import PROOF_RTOL

# Integer-model limits: every row's activity stays below 2^ACTIVITY_BITS and no row
# is multiplied by more than 2^SCALE_BITS. CP-SAT proved wrong optima on models whose
# activities reached 2^46; at 2^40 the differential campaign found none.
ACTIVITY_BITS = 40
SCALE_BITS = 20
# A shape is closed when the model's bound is within this of the best true value.
CLOSE_RTOL = PROOF_RTOL

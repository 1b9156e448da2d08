"""Baselines, each a solver with the common interface evaluated on the project's
cost model: rule-based layouts (``rules``: Megatron-style uniform, proportional,
greedy) and DT-FM's own scheduler (``dtfm``)."""

"""Exact solvers: one formulation (``formulation``: ``spec``, ``rows``, ``classes``,
``readback``) stated on two back ends (``cpsat``, ``milp``), the driver that
enumerates shapes and proves (``driver``), the class-grid relaxation
(``class_grid``, ``ring_orders``) and brute force (``bruteforce``)."""

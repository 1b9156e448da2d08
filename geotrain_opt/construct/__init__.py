"""Constructive plans: the pieces every solver and baseline shares (``pieces``:
feasible shapes, splits, the smallest plan), constructive heuristics and cut
polishing (``heuristics``) and the layouts by site (``site_layouts``)."""

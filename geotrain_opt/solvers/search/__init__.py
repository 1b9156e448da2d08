"""Searches over genomes (a permutation of the devices plus shape, cuts, split and
the decisions' genes): the batched fitness every one shares (``fitness``), the
memetic algorithm (``memetic/``), and the random search, simulated annealing and
plain GA it is measured against."""

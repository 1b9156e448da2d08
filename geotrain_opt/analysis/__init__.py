"""What is done with solvers' results: the verifier and certification, Pareto
fronts and their indicators, the benchmark harness and its reports."""

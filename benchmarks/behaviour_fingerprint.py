"""Fingerprint every solver's behaviour on fixed, time-independent budgets (generations,
evaluations, proofs), to show a refactoring changes no result:

    git stash; python benchmarks/behaviour_fingerprint.py /tmp/before.json; git stash pop
    python benchmarks/behaviour_fingerprint.py /tmp/after.json --compare /tmp/before.json

Each run's status, plan, T, E, evaluation count, generations and Pareto front must be equal
(and the exported models byte for byte: ``export-model`` on a shape before and after).
Run from the repository root."""
import json, sys
from geotrain_opt import load_instance, solvers
from geotrain_opt.solvers import SolveOptions

RUNS = [
    ("instances/demo-8gpu.yaml", "memetic", {"generations": 15}),
    ("instances/demo-8gpu.yaml", "memetic", {"generations": 12, "pareto": True}),
    ("instances/real/mixed-gen-3region-16.yaml", "memetic", {"generations": 10, "islands": 3, "migration_interval": 4}),
    ("instances/real/mixed-gen-3region-16.yaml", "memetic", {"generations": 6, "islands": 2, "migration_interval": 3, "island_backend": "processes"}),
    ("instances/real/dtfm-4-regional-geo.yaml", "memetic", {"generations": 6, "population": 20}),
    ("instances/real/dtfm-4-regional-geo.yaml", "memetic", {"max_evaluations": 3000, "seeding": False, "mutations": ["swap", "cut"], "crossover": "stages"}),
    ("instances/demo-8gpu.yaml", "plain-ga", {"generations": 10}),
    ("instances/real/dtfm-4-regional-geo.yaml", "memetic", {"generations": 4, "population": 80, "ls_rate": 0.0, "parallel": True}),
    ("instances/real/vldb-t4-a10-crosscloud.yaml", "memetic", {"generations": 20, "pareto": True, "islands": 2, "migration_interval": 5}),
    ("instances/demo-8gpu.yaml", "random-search", {"max_evaluations": 3000}),
    ("instances/demo-8gpu.yaml", "simulated-annealing", {"max_evaluations": 3000}),
    ("instances/real/dtfm-4-regional-geo.yaml", "dtfm", {"population": 20, "offspring": 10, "shape": [8, 8]}),
    ("instances/tiny-4gpu-2region.yaml", "bruteforce", {"pareto": True}),
    ("instances/demo-8gpu.yaml", "cpsat", {}),
    ("instances/demo-8gpu.yaml", "milp", {}),
    ("instances/tiny-4gpu-2region.yaml", "cpsat", {"exact_model": "devices"}),
    ("instances/demo-8gpu.yaml", "greedy", {}),
    # the planning levers: clocks (§10), micro-batch and recomputation choices (§11), prices
    ("instances/demo-8gpu-levers.yaml", "memetic", {"generations": 8}),
    ("instances/demo-8gpu-levers.yaml", "memetic", {"generations": 6, "pareto": True}),
    ("instances/demo-8gpu-levers.yaml", "memetic", {"generations": 4, "choice_search": "separate"}),
    ("instances/demo-8gpu-levers.yaml", "random-search", {"max_evaluations": 2000}),
    ("instances/demo-8gpu-levers.yaml", "simulated-annealing", {"max_evaluations": 2000}),
    ("instances/demo-8gpu-levers.yaml", "dtfm", {"population": 10, "offspring": 5}),
    ("instances/demo-8gpu-levers.yaml", "greedy", {}),
    ("instances/demo-8gpu-levers.yaml", "cpsat", {}),
]
def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--compare", help="an earlier fingerprint: exit 1 on any difference")
    args = ap.parse_args()
    out = []
    for path, name, extra in RUNS:
        inst = load_instance(path)
        r = solvers.get(name)(inst, SolveOptions(time_limit_s=300, seed=3, extra=extra))
        row = {"run": f"{path}:{name}:{json.dumps(extra, sort_keys=True)}", "status": str(r.status),
               "plan": r.plan.to_dict() if r.plan else None,
               "T": r.evaluation.time_s if r.evaluation else None, "E": r.evaluation.energy_j if r.evaluation else None,
               "evals": r.stats.get("evaluations"), "gens": r.stats.get("generations"),
               "front": [(p.evaluation.time_s, p.evaluation.energy_j) for p in (r.pareto or [])]}
        print(row["run"], row["T"], row["evals"], r.wall_s, file=sys.stderr)
        out.append(row)
    json.dump(out, open(args.out, "w"), indent=1, default=str)
    if args.compare:
        old = {r["run"]: r for r in json.load(open(args.compare))}
        bad = 0
        for r in json.loads(json.dumps(out, default=str)):
            diff = [k for k in r if k in old.get(r["run"], {}) and old[r["run"]][k] != r[k]]
            if r["run"] not in old:
                print("new   ", r["run"])
            else:
                print("same  " if not diff else f"DIFFERS in {diff}", r["run"])
                bad += bool(diff)
        sys.exit(1 if bad else 0)

if __name__ == '__main__':
    main()

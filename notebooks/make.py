"""Writes the four teaching notebooks (run from the repository root: python notebooks/make.py).
Edit the cells here, not in the .ipynb files, so the notebooks stay reviewable."""
import nbformat as nbf
from pathlib import Path

def nb(cells):
    n = nbf.v4.new_notebook()
    n.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    n.cells = [nbf.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else nbf.v4.new_code_cell(c) for c in cells]
    return n

ROOT = "from pathlib import Path\nROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / 'instances').is_dir())"

nb1 = nb([
"md:# 1. The problem\n\nA plan says which GPUs train the model, how the layers are cut into pipeline stages, how many data-parallel replicas run and how the micro-batches are split. It is judged on iteration time `T` and energy `E` (see `formulations/model.md`). This notebook uses the 4-GPU, 2-region instance whose costs `tests/test_evaluator_hand.py` works out by hand.",
ROOT + "\nfrom geotrain_opt import load_instance, Plan, evaluate\nfrom geotrain_opt.describe import describe_instance\ninst = load_instance(ROOT / 'instances' / 'tiny-4gpu-2region.yaml')\nprint(describe_instance(inst))",
"md:## Evaluating a plan by hand\nTwo stages, `e0` (east) then `w0` (west), two layers each, 4 micro-batches. Per micro-batch a layer costs `w = 3·b·s·(24h² + 4sh)` FLOP; the last stage also runs the LM head.",
"m = inst.model; a = inst.arrays\nw = 3 * m.micro_batch * m.seq_len * (24 * m.hidden**2 + 4 * m.seq_len * m.hidden)\nt0 = 2 * w / a.speed[inst.index['e0']]\nt1 = (2 * w + a.head_work) / a.speed[inst.index['w0']]\nx = a.alpha[0, 2] + a.A * a.inv_beta[0, 2]          # latency + transfer of one activation\ntau = max(t0, t1, a.A * a.inv_beta[0, 2])\nT_hand = t0 + t1 + 2 * x + (4 - 1) * tau\nplan = Plan.make([['e0', 'w0']], [0, 2, 4], [4])\nev = evaluate(inst, plan)\nprint(f'by hand {T_hand:.6f} s, evaluator {ev.time_s:.6f} s')\nassert abs(T_hand - ev.time_s) < 1e-12",
"md:## Fewer, better-placed GPUs\nUsing all four GPUs puts a 10 ms WAN hop in every pipeline; two data-parallel replicas on the two GPUs that share a node avoid it, and the released GPUs cost no energy.",
"plans = {\n  'all 4 GPUs, 2x2 across regions': Plan.make([['e0', 'w0'], ['e1', 'w1']], [0, 1, 4], [2, 2]),\n  'all 4 GPUs, 1x4 pipeline': Plan.make([['e0', 'e1', 'w0', 'w1']], [0, 1, 2, 3, 4], [4]),\n  '2 GPUs on one node, 2 replicas': Plan.make([['e0'], ['e1']], [0, 4], [2, 2]),\n}\nfor name, p in plans.items():\n    e = evaluate(inst, p)\n    print(f'{name:34s} T = {e.time_s*1e3:7.2f} ms  E = {e.energy_j:6.2f} J  feasible={e.feasible}')",
])

nb2 = nb([
"md:# 2. Exact formulations\n\n`formulations/exact.md` states the model; `geotrain_opt/solvers/formulation.py::build` writes it once for two back ends. Here we build the model of one shape (D, P) step by step on the 8-GPU demo, solve it with CP-SAT and with the MILP, and read status and bound.",
ROOT + "\nimport time\nfrom geotrain_opt import load_instance, Plan, evaluate\nfrom geotrain_opt.solvers import formulation, cpsat, milp, SolveOptions, get\ninst = load_instance(ROOT / 'instances' / 'demo-8gpu.yaml')",
"md:## One shape, two back ends\n`t_unit`/`e_unit`: CP-SAT counts time and energy in integer units (see §5 of exact.md).",
"units = dict(t_unit=0.2 * 2**-30, e_unit=300 * 2**-30, cutoff=None)\nfor backend in (cpsat, milp):\n    t = time.perf_counter()\n    out = backend.run_shape(inst, 2, 2, units, 60, SolveOptions(), None)\n    print(f'{backend.__name__.split(\".\")[-1]:6s} status={out.status} bound={out.bound:.6f} s '\n          f'plan T={evaluate(inst, out.plan).time_s:.6f} s  ({time.perf_counter()-t:.2f} s)')",
"md:## What the model looks like\nVariables and constraints of the CP-SAT model for the shape (2, 2):",
"be = cpsat.CpSatBackend()\nshape = formulation.build(inst, 2, 2, be, t_unit=units['t_unit'], e_unit=units['e_unit'])\nproto = be.m.proto\nprint(len(proto.variables), 'variables,', len(proto.constraints), 'constraints')\nprint('interchangeable device classes:', [[inst.ids[g] for g in c] for c in formulation.interchangeable_classes(inst)])",
"md:## The effect of symmetry breaking\nThe demo has pairs of identical GPUs on one node; without the class rules the solver must also refute every relabelling.",
"from ortools.sat.python import cp_model\nfor sym in (True, False):\n    be = cpsat.CpSatBackend()\n    sh = formulation.build(inst, 2, 2, be, t_unit=units['t_unit'], e_unit=units['e_unit'], symmetry=sym)\n    s = cp_model.CpSolver(); s.parameters.num_workers = 1; s.parameters.auto_detect_greater_than_at_least_one_of = False\n    s.parameters.max_time_in_seconds = 60\n    st = s.solve(be.m)\n    print(f'symmetry breaking={sym}: {s.status_name(st)}, {s.num_branches} branches, {s.wall_time:.2f} s')",
"md:## The whole instance\nAll shapes, with the incumbent as cutoff (what `geotrain-opt solve` does):",
"for name in ('cpsat', 'milp', 'bruteforce'):\n    try:\n        r = get(name)(inst, SolveOptions(time_limit_s=60))\n        print(name, r.status, f'T={r.evaluation.time_s:.6f}', f'gap={r.gap}')\n    except Exception as e:\n        print(name, 'refused:', e)",
])

nb3 = nb([
"md:# 3. The memetic algorithm\n\nGenome = a permutation of all devices plus (D, P), cuts and split (`solvers/memetic/encoding.py`). Operators live in a DEAP toolbox by name.",
ROOT + "\nimport numpy as np\nfrom geotrain_opt import load_instance, Plan\nfrom geotrain_opt.solvers.memetic.encoding import Genome, Fitness\nfrom geotrain_opt.solvers.memetic.operators import MUTATIONS, CROSSOVERS\nfrom geotrain_opt.solvers.memetic.local_search import LOCAL_SEARCHES\ninst = load_instance(ROOT / 'instances' / 'demo-8gpu.yaml')\nfit = Fitness(inst)\nplan = Plan.make([['va-0', 'oh-0', 'or-0'], ['va-1', 'oh-1', 'or-1']], [0, 8, 16, 24], [4, 4])\ng = Genome.from_plan(inst, plan); fit([g])\nprint('grid', g.grid.tolist(), 'cuts', g.cuts.tolist(), 'T =', round(g.te[0], 4))",
"md:## Each operator on this plan",
"for name, op in MUTATIONS.items():\n    rng = np.random.default_rng(1)\n    c = op(inst, g.copy(), rng); c.invalidate(); fit([c])\n    print(f'{name:8s} D x P = {c.D} x {c.P}, cuts {c.cuts.tolist()}, T = {c.te[0]:.4f}, feasible {c.feasible}')\nother = Genome.from_plan(inst, Plan.make([['va-2', 'va-3'], ['va-0', 'va-1']], [0, 12, 24], [4, 4])); fit([other])\nfor name, cx in CROSSOVERS.items():\n    c = cx(inst, g, other, np.random.default_rng(0)); fit([c])\n    print(f'crossover {name}: grid {[[inst.ids[d] for d in row] for row in c.grid]}, T = {c.te[0]:.4f}')",
"md:## Local search\nEach neighbourhood on its own, starting from the same plan:",
"for name, ls in LOCAL_SEARCHES.items():\n    c = g.copy(); fit([c]); before = c.te[0]\n    ls(fit, c, np.random.default_rng(0))\n    print(f'{name:7s} T {before:.4f} -> {c.te[0]:.4f} s')",
"md:## Convergence against the proven optimum",
"import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfrom geotrain_opt.solvers import get, SolveOptions\nopt = get('cpsat')(inst, SolveOptions()).evaluation.time_s\nfor ls_rate in (0.25, 0.0):\n    r = get('memetic')(inst, SolveOptions(seed=0, extra={'generations': 40, 'ls_rate': ls_rate, 'seeding': False}))\n    h = r.stats['history']\n    plt.plot([x[4] for x in h], [x[2] for x in h], label=f'ls_rate={ls_rate}')\nplt.axhline(opt, color='k', ls='--', label='CP-SAT optimum')\nplt.xscale('log'); plt.xlabel('plan evaluations'); plt.ylabel('best T (s)'); plt.legend()\nprint('optimum', opt)",
])

nb4 = nb([
"md:# 4. Time-energy Pareto fronts\n\nThe exact front by an ε-constraint walk (each point optimal for its ε) and the memetic NSGA-II front, on one generated tiny instance.",
ROOT + "\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfrom geotrain_opt import load_instance\nfrom geotrain_opt.pareto import pareto_front\nfrom geotrain_opt.solvers import SolveOptions\ninst = load_instance(ROOT / 'instances' / 'tiny' / 'tiny-4-s2.yaml')",
"exact = pareto_front(inst, 'cpsat', SolveOptions(time_limit_s=60), points=50)\nheur = pareto_front(inst, 'memetic', SolveOptions(time_limit_s=10, seed=0))\nfor name, res in (('exact (CP-SAT)', exact), ('memetic NSGA-II', heur)):\n    pts = sorted((r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto)\n    plt.step([p[0] for p in pts], [p[1] for p in pts], where='post', marker='o', label=f'{name}: {len(pts)} points')\n    print(name, res.status, [(round(t, 5), round(e, 3)) for t, e in pts])\nplt.xlabel('T (s)'); plt.ylabel('E (J)'); plt.legend()",
"md:Every exact point is optimal for its energy limit; the memetic front can only lie on or above it.",
"ex = [(r.evaluation.time_s, r.evaluation.energy_j) for r in exact.pareto]\nfor r in heur.pareto:\n    t, e = r.evaluation.time_s, r.evaluation.energy_j\n    assert any(a <= t * (1 + 1e-9) and b <= e * (1 + 1e-9) for a, b in ex)\nprint('memetic front dominated by or equal to the exact front: ok')",
])

for name, n in (("01_problem", nb1), ("02_exact_formulations", nb2), ("03_memetic", nb3), ("04_pareto", nb4)):
    nbf.write(n, f"notebooks/{name}.ipynb")

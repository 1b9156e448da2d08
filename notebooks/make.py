"""Writes and executes the five teaching notebooks (from the repository root:
``python notebooks/make.py``), so that they are stored with their outputs and
figures. Edit the cells here, not in the .ipynb files, so the notebooks stay
reviewable. They use the public interface only (``import geotrain_opt as gt``)."""
import nbformat as nbf
from nbclient import NotebookClient
from pathlib import Path

HERE = Path(__file__).resolve().parent


def nb(cells):
    n = nbf.v4.new_notebook()
    n.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    n.cells = [nbf.v4.new_markdown_cell(c[3:].strip("\n")) if c.startswith("md:") else nbf.v4.new_code_cell(c.strip("\n"))
               for c in cells]
    return n


SETUP = """
%matplotlib inline
from pathlib import Path
import matplotlib.pyplot as plt
import geotrain_opt as gt
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / 'instances').is_dir())
"""

nb1 = nb([
"""md:
# 1. The problem

A **plan** says which GPUs train the model, how its $L$ layers are cut into $P$
pipeline stages, how many data-parallel replicas $D$ run, which device holds each
(replica, stage) slot, and how the $M$ micro-batches of an iteration are split
over the replicas. It is judged on the iteration time $T$ and the energy $E$ of
one iteration (`formulations/model.md` states the model in full).

This notebook uses the 4-GPU, 2-region instance whose costs
`tests/test_evaluator_hand.py` works out by hand.
""",
SETUP + """
from geotrain_opt.io.describe import describe_instance
inst = gt.load_instance(ROOT / 'instances' / 'tiny-4gpu-2region.yaml')
print(describe_instance(inst))
""",
r"""md:
## The cost of one replica's pipeline

Stage $j$ of replica $k$ holds layers $c_j \dots c_{j+1}-1$ and runs on device
$G[k][j]$ of speed $\sigma$ (FLOP/s). Per micro-batch it computes for
$t_{kj} = W_j/\sigma_{G[k][j]}$; a hop to the next stage costs
$x_{kj} = \alpha(u,v) + A/\beta(u,v)$ (latency plus the activation of $A$ bytes over
the link). With $m_k$ micro-batches and one flush,

$$T_k = \sum_j t_{kj} + 2\sum_{j<P-1} x_{kj} + (m_k - 1)\,\tau_k,\qquad
\tau_k = \max\Big(\max_j t_{kj},\ \max_{j<P-1} A/\beta\Big)$$

(this instance sets $\kappa = 0$: no exposed communication). A Transformer layer
costs $w = 3\,b\,s\,(8h^2 + 4hf + 4sh)$ FLOP per micro-batch (forward + backward,
$f$ = FFN width), the LM head $3 \cdot 2\,b\,s\,h\,V$ on the last stage; the
activation crossing a cut is $A = b\,s\,h \cdot 2$ bytes. The east-west link of
the instance file has $\alpha$ = 10 ms and 8 Gbit/s = $10^9$ B/s.
""",
"""
m = inst.model
speed = {d.id: d.peak_flops * d.efficiency_at(m.micro_batch * m.seq_len)   # peak x efficiency, FLOP/s
         for d in inst.devices}
w, head = m.layer_work_flop(), m.head_work_flop()
A = m.micro_batch * m.seq_len * m.hidden * m.precision_bytes
t0 = 2 * w / speed['e0']                                  # layers 0-1 on e0
t1 = (2 * w + head) / speed['w0']                         # layers 2-3 and the head on w0
x = 10e-3 + A / 1e9                                       # one hop east -> west
tau = max(t0, t1, A / 1e9)
T_v2 = t0 + t1 + 2 * x + (4 - 1) * tau                    # fill + three periods (cost model v2)
# 1F1B: stage 0 holds at most 2 of the 4 micro-batches, so each pair waits one round trip
L0 = t0 + t1 + 2 * x
T_hand = max(T_v2, 2 * L0 + 1 * tau)                      # model.md §3.1 (v3)
ev = gt.evaluate(inst, gt.Plan.make([['e0', 'w0']], [0, 2, 4], [4]))
print(f't0 = {t0*1e3:.3f} ms, t1 = {t1*1e3:.3f} ms, hop {x*1e3:.3f} ms; by hand T = {T_hand*1e3:.4f} ms, '
      f'evaluator T = {ev.time_s*1e3:.4f} ms, E = {ev.energy_j:.3f} J')
assert abs(T_hand - ev.time_s) <= 1e-12
""",
r"""md:
## Fewer, better-placed GPUs

Using all four GPUs puts a 10 ms WAN hop into every pipeline; two data-parallel
replicas on the two GPUs that share a node avoid it, and the GPUs left out cost
no energy. Energy: busy power while computing, waiting power for the rest of the
iteration, both times the region's PUE, plus the network:
$E = \sum_g \pi_g\,(P^{busy}_g U_g + P^{wait}_g (T - U_g)) + e_{net} X$.
""",
"""
plans = {
    '4 GPUs, 2 x 2 across regions': gt.Plan.make([['e0', 'w0'], ['e1', 'w1']], [0, 1, 4], [2, 2]),
    '4 GPUs, 1 x 4 pipeline': gt.Plan.make([['e0', 'e1', 'w0', 'w1']], [0, 1, 2, 3, 4], [4]),
    '2 GPUs of one node, 2 x 1': gt.Plan.make([['e0'], ['e1']], [0, 4], [2, 2]),
}
evs = {name: gt.evaluate(inst, p) for name, p in plans.items()}
fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 2.6))
a1.barh(list(evs), [e.time_s * 1e3 for e in evs.values()]); a1.set_xlabel('T (ms)')
a2.barh(list(evs), [e.energy_j for e in evs.values()]); a2.set_xlabel('E (J)'); a2.set_yticks([])
plt.tight_layout()
best = gt.solve(inst, 'cpsat', time_limit=30)
print('proven optimum:', best.status, f'T = {best.evaluation.time_s*1e3:.3f} ms', best.plan.grid)
""",
])

nb2 = nb([
r"""md:
# 2. The exact formulation

`formulations/exact.md` states the model that CP-SAT and the MILP solve; one
builder (`geotrain_opt/solvers/exact/formulation.py`) writes it for both back ends.
For each shape $(D, P)$ that can hold the model, the variables are

| variable | domain | meaning |
|---|---|---|
| $x_{gkj}$ | $\{0,1\}$ | device $g$ holds replica $k$, stage $j$ |
| $\nu_j$ | $\{1..L-P+1\}$ | layers of stage $j$ |
| $\mu_{kv}$ | $\{0,1\}$ | replica $k$ runs $v$ micro-batches (free split only) |
| $t_{kj}, \lambda_{kj}, o_{kj}, \tau_k$ | $\ge 0$ | stage time, link time, link occupancy, bottleneck |
| $T$ | $\ge 0$ | iteration time |

and the core constraints are

$$\sum_g x_{gkj} = 1\ \ \forall k,j, \qquad \sum_{k,j} x_{gkj} \le 1\ \ \forall g, \qquad \sum_j \nu_j = L,$$
$$t_{kj} \ge W_j/\sigma_g \ \text{ if } x_{gkj}, \qquad \tau_k \ge t_{kj} + 2\kappa(o_{k,j-1} + o_{kj}), \qquad
T \ge T_k + \bar R,$$
$$\text{state\_bytes}\cdot N_j + \text{act}_j\cdot\text{inflight}_{kj} \le \bar m_g \ \text{ if } x_{gkj}.$$

"If" is an enforced constraint in CP-SAT and a big-M row in the MILP. The
objective is $\min T$ (or $E$, or a weighted sum, with ε-limits).
""",
SETUP + """
from geotrain_opt.io.export_model import export_model
inst = gt.load_instance(ROOT / 'instances' / 'demo-8gpu.yaml')
print(inst.n, 'GPUs in', len(inst.regions), 'regions;', inst.model.layers, 'layers')
""",
"""md:
## How big is the model of each shape?

`export_model` builds one shape's model and writes it for other solvers (MPS and LP
for the MILP, a proto for CP-SAT); here we only read its size.
""",
"""
import tempfile
rows = []
with tempfile.TemporaryDirectory() as tmp:
    for D, P in [(1, 2), (2, 2), (2, 4), (4, 2), (1, 8)]:
        info = export_model(inst, D, P, 'mps', Path(tmp) / 'm.mps')
        rows.append((f'{D}x{P}', info['variables'], info['constraints']))
for r in rows:
    print(f'shape {r[0]:4s}: {r[1]:5d} variables, {r[2]:6d} constraints')
plt.figure(figsize=(5, 2.5))
plt.bar([r[0] for r in rows], [r[1] for r in rows], label='variables')
plt.bar([r[0] for r in rows], [r[2] for r in rows], alpha=0.4, label='constraints')
plt.yscale('log'); plt.xlabel('shape D x P'); plt.legend()
""",
"""md:
## Solving: every shape, the incumbent as cutoff

`solve` enumerates the shapes around the model, most promising first; a shape's
optimum becomes the cutoff that prunes the rest. Both engines must agree, and
brute force (every plan) checks them where it can.
""",
"""
results = {name: gt.solve(inst, name, time_limit=60) for name in ('cpsat', 'milp')}
for name, r in results.items():
    print(f'{name:6s} {r.status:8s} T = {r.evaluation.time_s:.6f} s  bound {r.best_bound:.6f}  '
          f'{r.wall_s:.2f} s, {len(r.stats["shape_log"])} shapes')
assert abs(results['cpsat'].objective_value - results['milp'].objective_value) <= 1e-6 * results['milp'].objective_value
log = results['cpsat'].stats['shape_log']
# each shape's lower bound (before any model is built) against the optimum: a shape whose
# bound lies above the incumbent is closed without a model; only the others are solved
T = results['cpsat'].objective_value
shapes = [s for s in log if s.get('bound') is not None]
plt.figure(figsize=(6, 2.8))
plt.bar([f"{s['D']}x{s['P']}" for s in shapes], [s['bound'] for s in shapes],
        color=['tab:green' if s['status'] == 'optimal' else 'tab:gray' for s in shapes])
plt.axhline(T, color='k', ls='--', label=f'optimum {T:.4f} s')
plt.ylabel('lower bound on T (s)'); plt.xticks(rotation=90); plt.legend(fontsize=7)
plt.xlabel('shape (green: solved to its optimum; grey: closed by its bound)')
print('closed without a model:', sum(s['status'] == 'closed' for s in log), 'of', len(log), 'shapes;',
      'by', sorted({s.get('by') for s in log if s['status'] == 'closed'}))
""",
"""md:
## The optimal plan

The proven plan, the verifier's cross-check, and its simulated timeline.
""",
"""
best = results['cpsat']
print(best.plan.grid, 'cuts', list(best.plan.cuts), 'micro-batches', list(best.plan.micro_batches))
v = gt.verify(inst, ['cpsat', 'milp', 'memetic'], time_limit=30, options={'memetic': {'generations': 30}})[0]
print('verifier:', 'consistent' if v.ok else v.inconsistencies, '; optimum', v.optimum)
from geotrain_opt.cost.simulate import simulate
sim = simulate(inst, best.plan, record=True)
fig, ax = plt.subplots(figsize=(9, 2))
row = {g: r for r, g in enumerate(best.plan.devices)}
for dev, kind, _i, s, e in sim.ops:
    ax.broken_barh([(s, e - s)], (row[dev] - 0.4, 0.8), color={'F': 'tab:blue', 'B': 'tab:orange', 'AR': 'tab:green'}[kind])
ax.set_yticks(range(len(row)), list(row)); ax.invert_yaxis(); ax.set_xlabel('time (s): forward, backward, all-reduce')
""",
])

nb3 = nb([
"""md:
# 3. The memetic algorithm

For clusters too large for a proof: a DEAP genetic algorithm whose genome is a
device permutation plus $(D, P)$, cuts and split, with structured seeds
(fastest-first, region-compact, node-mixed), crossover and mutation operators
registered in a toolbox by name, and local search on the cuts and the placement.
Every plan it reports is re-evaluated by the same cost model.
""",
SETUP + """
# issue 37's 7B cluster: 28 GPUs on three continents, memory-tight (Llama-2-7B, 512 micro-batches)
inst = gt.load_instance(ROOT / 'instances' / 'llama7b-3region-28.yaml')
opt = gt.solve(inst, 'cpsat', time_limit=60, workers=1)
print(opt.status, 'optimum T =', round(opt.evaluation.time_s, 4), 's, plan', opt.plan.replicas, 'x', opt.plan.stages)
""",
"""md:
## Convergence, with and without seeding and local search

The same seed, 40 generations on a memory-tight geo cluster, where most random plans
do not fit; `ls_rate` is the share of offspring improved by local search,
`seeding=False` starts from random genomes only.
""",
"""
plt.figure(figsize=(6, 3))
for label, opts in (('memetic (default)', {}), ('no local search', {'ls_rate': 0.0}),
                    ('no seeding', {'seeding': False}),
                    ('no seeding, no local search', {'ls_rate': 0.0, 'seeding': False})):
    r = gt.solve(inst, 'memetic', time_limit=60, seed=0, generations=40, **opts)
    if r.plan is None:
        print(f'{label}: no plan that fits in 40 generations')
        continue
    h = r.stats['history']
    print(f'{label}: T = {r.evaluation.time_s:.4f} s ({r.evaluation.time_s / opt.evaluation.time_s - 1:+.1%})')
    plt.plot([x[4] for x in h], [x[2] for x in h], label=f'{label}: {r.evaluation.time_s:.2f} s')
plt.axhline(opt.evaluation.time_s, color='k', ls='--', label='CP-SAT optimum')
plt.xscale('log'); plt.xlabel('plan evaluations'); plt.ylabel('best T (s)'); plt.legend(fontsize=7)
""",
"""md:
## Every seed

A heuristic is judged on its worst seed, not its best.
""",
"""
vals = [gt.solve(inst, 'memetic', time_limit=60, seed=s, generations=30).evaluation.time_s for s in range(3)]
print('seeds 0-2:', [round(float(v), 6) for v in vals], '; worst gap to the optimum', f'{max(vals)/opt.evaluation.time_s - 1:.3%}')
""",
])

nb4 = nb([
r"""md:
# 4. Time-energy Pareto fronts

Minimise $(T, E)$ jointly. The exact front comes from an ε-constraint walk:
start from the fastest plan, then repeatedly solve
$\min T \ \text{s.t.}\ E \le (1-10^{-5})\,E_{prev}$, so every point is optimal
for its ε and the walk visits every non-dominated $(T, E)$ value. The memetic
solver's NSGA-II front can only lie on or above it.
""",
SETUP + """
inst = gt.load_instance(ROOT / 'instances' / 'tiny' / 'tiny-4-s2.yaml')
exact = gt.pareto(inst, 'cpsat', points=50, time_limit=60)
heur = gt.pareto(inst, 'memetic', time_limit=10, seed=0)
plt.figure(figsize=(6, 3.5))
for name, res, style in (('exact (CP-SAT), proven', exact, dict(marker='o')),
                         ('memetic NSGA-II', heur, dict(marker='s', mfc='none', ms=10))):
    pts = sorted((r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto)
    plt.step([p[0] for p in pts], [p[1] for p in pts], where='post', label=f'{name}: {len(pts)} points', **style)
plt.xlabel('T (s)'); plt.ylabel('E (J)'); plt.legend()
""",
"""
ex = [(r.evaluation.time_s, r.evaluation.energy_j) for r in exact.pareto]
for r in heur.pareto:
    t, e = r.evaluation.time_s, r.evaluation.energy_j
    assert any(a <= t * (1 + 1e-9) and b <= e * (1 + 1e-9) for a, b in ex)
print('every memetic point is dominated by or equal to an exact point')
""",
])

nb5 = nb([
r"""md:
# 5. Planning levers: clocks, micro-batch size, recomputation, price, carbon

Besides the devices, the cuts, $D \times P$ and the split, a plan may choose a
**clock** $f_g$ for each device (it computes at $f_g\sigma_g$ and draws
$P^{busy}_g(f_g)$ while busy), the **micro-batch size** $b$ (so $M = B/b$) and
**recomputation**, and be judged on **dollars** and **grams of CO2** besides time and energy:

$$C = T\sum_{g\in S}\text{price}_g + \sum_{u\to v}\text{bytes}(u\to v)\,\text{egress}(r_u, r_v),\qquad
Q = \sum_{g\in S} c_{r_g} E_g + \sum_{u\to v,\ r_u\ne r_v} e_{net}\,\text{bytes}(u\to v)\,\frac{c_{r_u}+c_{r_v}}{2}$$

($E_g$: device $g$'s term of $E$). Both have the shape of $E$ — a rate per busy
second, a rate per waiting second, a rate per byte — so every solver, and both
exact models, handle them (`formulations/model.md` §9–§11, `formulations/exact.md` §3.8).
The numbers below are the 4-GPU instance of notebook 1 with illustrative clocks,
prices and intensities; everything is proven by brute force and checked by CP-SAT.
""",
SETUP + """
import copy, yaml
d = yaml.safe_load((ROOT / 'instances' / 'tiny-4gpu-2region.yaml').read_text())
d['gpu_types']['fast'].update(clocks=[{'fraction': 0.75, 'busy_w': 190}, {'fraction': 0.5, 'busy_w': 120}],
                              price_per_hour=3.6)
d['gpu_types']['slow'].update(clocks=[{'fraction': 0.5, 'busy_w': 90}], price_per_hour=1.8)
d['network']['inter_region'][0]['egress_usd_per_gb'] = 0.09
d['energy']['carbon_g_per_kwh'] = {'east': 400, 'west': 120}
d['model'].update(micro_batch_options=[1, 2], recompute_options=['none', 'full'])
levers = gt.instance_from_dict(d)
plain = gt.instance_from_dict(yaml.safe_load((ROOT / 'instances' / 'tiny-4gpu-2region.yaml').read_text()))
""",
"""md:
## The time-energy front with and without the levers

Brute force enumerates every plan, every clock of every slot and every $(b, r)$:
each front is exact.
""",
"""
fronts = {name: gt.pareto(inst, 'bruteforce', time_limit=120) for name, inst in (('full clock, b = 1', plain), ('with the levers', levers))}
plt.figure(figsize=(6, 3.5))
for name, res in fronts.items():
    pts = sorted((r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto)
    plt.step([p[0] for p in pts], [p[1] for p in pts], where='post', marker='o', label=f'{name}: {len(pts)} points')
plt.xlabel('T (s)'); plt.ylabel('E (J)'); plt.legend()
from geotrain_opt.analysis.indicators import hypervolume, reference_point
pts = {name: [(r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto] for name, res in fronts.items()}
ref = reference_point(*pts.values())        # one reference point for both, so the areas compare
for name, p in pts.items():
    print(f"{name}: hypervolume {hypervolume(p, ref):.4g} (reference {ref[0]:.3g} s, {ref[1]:.3g} J)")
""",
"""md:
## One optimum per objective

The fastest plan, the most frugal, the cheapest and the cleanest differ; CP-SAT
proves the same values brute force finds.
""",
"""
rows = []
for kind in ('time', 'energy', 'cost', 'carbon'):
    inst = levers.with_options(kind=kind)
    best = gt.solve(inst, 'bruteforce', time_limit=120)
    proof = gt.solve(inst, 'cpsat', time_limit=60)
    assert proof.status == 'optimal' and abs(proof.objective_value - best.objective_value) <= 1e-6 * best.objective_value
    ev, p = best.evaluation, best.plan
    rows.append((kind, ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g, p.grid, dict(p.clocks), p.micro_batch, p.recompute))
print(f"{'objective':9} {'T (s)':>8} {'E (J)':>8} {'USD':>10} {'g CO2':>9}  plan")
for kind, T, E, C, Q, grid, clocks, b, r in rows:
    print(f"{kind:9} {T:8.4f} {E:8.3f} {C:10.3e} {Q:9.3e}  {grid} clocks {clocks} b {b or 1} recompute {r or 'none'}")
""",
"""md:
## How the solvers search $b$ and recomputation

A choice of $(b, r)$ changes $M$ and every coefficient, so it is searched next to the
plan, not inside one formula. CP-SAT and the MILP enumerate $(c, D, P)$ as they
enumerate $(D, P)$: one incumbent's cutoff closes the shapes of every choice, and
`stats['choices']` says which choice holds the best plan a model found (None: it
fits nowhere, or the cutoff closed all its shapes). The memetic genome carries a
choice gene with its own mutation and local-search move
(`benchmarks/choice_levers.py` compares both with one solve per choice).
""",
"""
proof = gt.solve(levers.with_options(kind='time'), 'cpsat', time_limit=60)
for c in proof.stats['choices']:
    print(f"b = {c['micro_batch']}, recompute {c['recompute']:4}: best T found {c['objective_value']}")
heur = gt.solve(levers.with_options(kind='time'), 'memetic', time_limit=30, seed=0, generations=30)
print(f"memetic: T {heur.objective_value:.4f} at b = {heur.plan.micro_batch or 1}, "
      f"recompute {heur.plan.recompute or 'none'}; CP-SAT's proven T {proof.objective_value:.4f}")
""",
])

if __name__ == "__main__":
    for name, n in (("01_problem", nb1), ("02_exact_formulations", nb2), ("03_memetic", nb3), ("04_pareto", nb4),
                    ("05_energy_levers", nb5)):
        NotebookClient(n, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
        nbf.write(n, HERE / f"{name}.ipynb")
        print("wrote", HERE / f"{name}.ipynb")

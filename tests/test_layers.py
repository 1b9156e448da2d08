"""The package's shape (docs/developers.md): layers in folders, imports only
downward, no cycle, no giant function or module, and the decisions declared once
and read by the generic code."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import geotrain_opt
from geotrain_opt import decisions
from geotrain_opt.decisions.base import Decision

PKG = Path(geotrain_opt.__file__).resolve().parent
# the layers, lowest first: a module may import from its own layer and those below
LAYERS = ["common", "problem", "cost", "construct", "decisions", "bounds", "solvers", "solvers.exact",
          "solvers.search", "solvers.baselines", "io", "analysis", "cli", "face"]
# upward imports that are allowed, each lazy and for a stated reason
ALLOWED_UP = {
    # the loader refuses a model that fits on no device at all: the stage memory is cost arithmetic
    ("geotrain_opt.problem.instance.loading", "geotrain_opt.cost.stagecost"),
    # the memetic option checks name the operator tables (read on first use, never importing DEAP early)
    ("geotrain_opt.solvers.options", "geotrain_opt.solvers.search.memetic.local_search"),
    ("geotrain_opt.solvers.options", "geotrain_opt.solvers.search.memetic.operators"),
    # ``geotrain-opt --version`` prints the package's version
    ("geotrain_opt.cli.parser", "geotrain_opt"),
}
MAX_FUNCTION_LINES = 120
MAX_MODULE_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = ["geotrain_opt", *p.relative_to(PKG).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _layer(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1 or parts[1] in ("api", "errors"):
        return "face" if parts[1:] != ["errors"] else "common"
    if parts[1] == "solvers" and len(parts) >= 3 and parts[2] in ("exact", "search", "baselines"):
        return f"solvers.{parts[2]}"
    return parts[1]


def _imports(mods: dict[str, Path]) -> list[tuple[str, str, bool]]:
    """(importer, imported module, lazy) for every import of a package module,
    those under ``if TYPE_CHECKING`` left out (they never run)."""
    out = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(k) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test)
                       for k in ast.walk(n)}
        top = {id(n) for n in tree.body}
        for n in ast.walk(tree):
            if id(n) in typing_only:
                continue
            names = []
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("geotrain_opt"):
                names = [f"{n.module}.{a.name}" for a in n.names]
            elif isinstance(n, ast.Import):
                names = [a.name for a in n.names if a.name.startswith("geotrain_opt")]
            for name in names:
                while name not in mods:
                    name = name.rpartition(".")[0]
                if name != mod:
                    out.append((mod, name, id(n) not in top))
    return out


def test_top_level_is_the_face_and_the_layers():
    files = sorted(p.name for p in PKG.iterdir() if p.is_file())
    assert files == ["__init__.py", "api.py", "errors.py", "py.typed"]
    folders = sorted(p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted({layer.split(".")[0] for layer in LAYERS if layer != "face"})


def test_imports_go_down_the_layers():
    mods = _modules()
    rank = {name: i for i, name in enumerate(LAYERS)}
    up = sorted({(a, b) for a, b, _lazy in _imports(mods)
                 if rank[_layer(b)] > rank[_layer(a)] and not (_layer(a) == "face")} - ALLOWED_UP)
    assert up == [], "imports from a higher layer: " + "; ".join(f"{a} -> {b}" for a, b in up)


def test_no_import_cycle():
    """Lazy imports count: a cycle that only works because one side imports late
    is still a knot. Importing a package runs its __init__, so a module's import of
    its own ancestor package is not a cycle."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for a, b, _lazy in _imports(mods):
        if not a.startswith(b + "."):
            graph[a].add(b)
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:         # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))
    for m in sorted(graph):
        if m not in index:
            visit(m)
    assert cycles == []


def test_no_giant_function_or_module():
    long_fns, long_mods = [], []
    for mod, path in _modules().items():
        src = path.read_text()
        if src.count("\n") + 1 > MAX_MODULE_LINES:
            long_mods.append(mod)
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES:
                long_fns.append(f"{mod}.{n.name} ({n.end_lineno - n.lineno + 1} lines)")
    assert long_mods == [] and long_fns == []


def test_every_decision_is_registered_where_the_generic_code_reads():
    from geotrain_opt.solvers.search.memetic.local_search import LOCAL_SEARCHES
    from geotrain_opt.solvers.search.memetic.operators import MUTATIONS
    assert [type(d).__name__ for d in decisions.DECISIONS] == ["Clocks", "Choices"]
    for d in decisions.DECISIONS:
        assert isinstance(d, Decision) and d.gene and d.name
        for name, fn in d.mutations.items():
            assert MUTATIONS[name] is fn
        for name, fn in d.moves.items():
            assert LOCAL_SEARCHES[name] is fn
    assert len({d.gene for d in decisions.DECISIONS}) == len(decisions.DECISIONS)


def test_a_new_decision_reaches_the_genome_and_the_fitness(monkeypatch):
    """A decision added to the registry alone is carried by the genome (copied,
    signed, written to the plan, read back) and its arrays reach the batched fitness:
    the generic code names no decision."""
    from dataclasses import replace

    from geotrain_opt import load_instance
    from geotrain_opt.solvers.search import fitness as fitness_mod
    from geotrain_opt.solvers.search.fitness import Fitness
    from geotrain_opt.solvers.search.memetic.encoding import Genome

    seen = {}

    class Tag(Decision):
        """A do-nothing decision: a label carried through, recorded in the plan's name."""
        name, gene, default = "tag", "tag", "none"

        def copy(self, value):
            return str(value)

        def signature(self, g):
            return (("tag", g.genes["tag"]),) if g.genes["tag"] != "none" else ()

        def from_plan(self, inst, plan):
            return plan.recompute or "none"         # any field will do for the test

        def to_plan(self, inst, g, plan):
            return replace(plan, recompute=None if g.genes["tag"] == "none" else g.genes["tag"])

        def arrays(self, genomes, grids):
            seen["tags"] = [g.genes["tag"] for g in genomes]
            return {}

    extended = (*decisions.DECISIONS, Tag())
    for module in ("geotrain_opt.decisions", "geotrain_opt.solvers.search.memetic.encoding"):
        monkeypatch.setattr(f"{module}.DECISIONS", extended)
    monkeypatch.setattr(fitness_mod, "DECISIONS", extended)
    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "tiny-4gpu-2region.yaml")
    g = Genome(1, 2, np.arange(inst.n, dtype=np.int64), np.array([0, 2, inst.model.layers]), np.array(
        [inst.model.num_micro_batches]))
    assert g.genes["tag"] == "none"
    h = g.copy()
    h.genes["tag"] = "x"
    assert g.genes["tag"] == "none" and h.signature() != g.signature() and h.signature()[-1] == ("tag", "x")
    assert h.to_plan(inst).recompute == "x" and Genome.from_plan(inst, h.to_plan(inst)).genes["tag"] == "x"
    Fitness(inst)([g, h])
    assert seen["tags"] == ["none", "x"] and g.key is not None and h.key is not None


def test_clock_and_choice_genes_round_trip_through_plans():
    """Both built-in decisions through the registry: a plan's clocks and choice
    become genes and come back as the same plan."""
    from dataclasses import replace

    from geotrain_opt import load_instance
    from geotrain_opt.solvers.search.memetic.encoding import Genome
    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "demo-8gpu-levers.yaml")
    plan = Genome.from_plan(inst, replace(
        geotrain_opt.Plan.make([["va-0", "va-1"]], [0, 12, 24], [16], {"va-1": 0.7}), micro_batch=2)).to_plan(inst)
    assert plan.clocks == (("va-1", 0.7),) and plan.micro_batch == 2 and plan.recompute is None
    g = Genome.from_plan(inst, plan)
    choices = inst.model.choices()
    assert choices[g.genes["ch"]] == (2, "none") and int(g.genes["clk"][inst.index["va-1"]]) == 3
    assert g.instance(inst).model.micro_batch == 2

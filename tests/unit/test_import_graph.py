"""The static import graph of pal-slurm's packages: no import cycles, and the runtime never
needs the lab tooling.

The graph is built from the source, not from what Python happens to import: every `import` and
`from ... import` statement, at module level, inside functions and under `if TYPE_CHECKING:`,
is an edge from its module to the module it names (`from pkg import name` names `pkg.name` where
that is a module, else `pkg`, the package's `__init__`, so a re-export counts). A cycle is a
strongly connected component of more than one module: a function-level import that hides one
still ties the two modules' loading order and their meaning together.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pal_slurm", "pal_lab")
RUNTIME, LAB = PACKAGES

# Cycles still in the code, each as the set of modules of its component. This list must only
# shrink: a cycle found that lies within none of these fails the test, and once the modules of
# one are untangled its line is deleted.
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (its file, whether it is a package's __init__)."""
    out: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def imported_names(name: str, path: Path, is_package: bool, known: set[str]) -> list[tuple[str, ast.stmt]]:
    """(imported module name, its statement) for every import statement of one module."""
    base = name if is_package else name.rpartition(".")[0]
    out: list[tuple[str, ast.stmt]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                source = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            out += [(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source, node)
                    for alias in node.names]
    return out


def owning_module(target: str, known: set[str]) -> str | None:
    """The module of ours a dotted name lies in (`pal_slurm.x.y` -> `pal_slurm.x` when y is a
    name in it); None for anything outside our packages."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, is_package) in mods.items():
        for target, _ in imported_names(name, path, is_package, known):
            owner = owning_module(target, known)
            if owner is not None and owner != name:
                graph[name].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def one_cycle(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """A shortest path around the component from its first module back to it (for the message)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return paths[node] + [start]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return sorted(component)


def test_the_graph_sees_imports_inside_functions_and_type_checking_blocks(tmp_path, monkeypatch):
    """The parser itself: a cycle hidden in a function body or under TYPE_CHECKING is found."""
    pkg = tmp_path / "pal_slurm"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pal_slurm.sub.b import B\n")  # a re-export
    (pkg / "sub" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pal_slurm.sub.a import f\nB = 1\n")
    (pkg / "c.py").write_text("from pal_slurm.sub import B\n")
    (pkg / "sub" / "d.py").write_text("import pal_slurm.c\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("pal_slurm",))
    graph = import_graph()
    assert graph["pal_slurm.sub.a"] == {"pal_slurm.sub.b"}
    assert graph["pal_slurm.sub.b"] == {"pal_slurm.sub.a"}
    assert graph["pal_slurm.c"] == {"pal_slurm.sub"}
    assert graph["pal_slurm.sub.d"] == {"pal_slurm.c"}
    assert cycles(graph) == [frozenset({"pal_slurm.sub.a", "pal_slurm.sub.b"})]
    # d -> c -> sub (__init__) -> b: no way back to d, so no cycle, until the package imports d
    (pkg / "sub" / "__init__.py").write_text("from pal_slurm.sub.b import B\nfrom pal_slurm.sub import d\n")
    assert frozenset({"pal_slurm.sub", "pal_slurm.c", "pal_slurm.sub.d"}) in cycles(import_graph())


def test_no_import_cycles_but_the_known_ones():
    graph = import_graph()
    found = cycles(graph)
    new = [c for c in found if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, "import cycles:\n" + "\n".join(" -> ".join(one_cycle(graph, c)) for c in new)


def test_the_runtime_imports_the_lab_package_only_inside_palctl_replay():
    """Compute nodes, pald, the prolog/epilog load no lab code: no runtime module imports
    pal_lab at module level, and only the replay command imports it at all (when run)."""
    mods = modules()
    known = set(mods)
    users: dict[str, list[int]] = {}
    for name, (path, is_package) in mods.items():
        if not name.startswith(RUNTIME + "."):
            continue
        tree = ast.parse(path.read_text(), str(path))
        top_level = {id(n) for n in tree.body}
        for target, stmt in imported_names(name, path, is_package, known):
            if target == LAB or target.startswith(LAB + "."):
                users.setdefault(name, []).append(stmt.lineno)
                assert id(stmt) not in top_level, f"{name}:{stmt.lineno} imports {target} at module level"
    assert set(users) == {"pal_slurm.cli.commands.replay"}, users


def test_the_runtime_works_without_the_lab_package():
    """With pal_lab unimportable, every runtime module loads and palctl works; `palctl
    replay` alone stops, with a message that says what is missing (not a traceback)."""
    script = """
import importlib, pkgutil, sys
sys.modules["pal_lab"] = None  # as on a host without the lab package
import pal_slurm
for info in pkgutil.walk_packages(pal_slurm.__path__, "pal_slurm."):
    if ".migrations" in info.name or info.name.endswith("__main__"):
        continue  # alembic's env script and `python -m` entry points run on import
    importlib.import_module(info.name)
from click.testing import CliRunner
from pal_slurm.cli.main import cli
ok = CliRunner().invoke(cli, ["--help"])
assert ok.exit_code == 0, ok.output
r = CliRunner().invoke(cli, ["replay", "--trace", "workload-1", "--arms", "stock"])
print(r.exit_code)
print(r.output)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    code, _, output = done.stdout.partition("\n")
    assert code == "1"
    assert "needs the lab tooling (the pal_lab package)" in output and "Traceback" not in output


def test_the_intake_imports_no_daemon_simulator_or_policy_module():
    """The intake is the edge every reader of Slurm's job goes through: it builds on the model
    and Slurm's own vocabulary, never on what uses it."""
    graph = import_graph()
    intake = {m for m in graph if m == f"{RUNTIME}.intake" or m.startswith(f"{RUNTIME}.intake.")}
    assert len(intake) > 5
    upward = tuple(f"{RUNTIME}.{p}" for p in ("daemon", "sim", "policy"))
    wrong = {m: sorted(t for t in graph[m] if t.startswith(upward)) for m in intake}
    assert not any(wrong.values()), wrong

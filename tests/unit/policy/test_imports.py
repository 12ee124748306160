"""No module of the model or the policies imports one that imports it back, directly or through
others, at any level (module level, under TYPE_CHECKING, inside a function)."""

import ast
from pathlib import Path

import pal_slurm

ROOT = Path(pal_slurm.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ["pal_slurm", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known}


def _cycle_through(start: str, edges: dict[str, set[str]]) -> list[str] | None:
    stack, seen = [(start, [start])], set()
    while stack:
        mod, path = stack.pop()
        for nxt in edges[mod]:
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_no_import_cycle_in_the_model_or_the_policies():
    known = _modules()
    edges = {m: _imports(p, known) for m, p in known.items()}
    mine = [m for m in known if m.startswith(("pal_slurm.model", "pal_slurm.policy"))]
    assert len(mine) > 20
    cycles = {m: c for m in mine if (c := _cycle_through(m, edges)) is not None}
    assert cycles == {}

"""Marking nodes whose GPUs drifted: the `scontrol` calls, built in one place.

`palctl rank` (with `[drift] action`) and `palctl rankings --changed --action` use them. The
actions are deliberately few and reversible by an admin with one command:

- `comment`: `scontrol update NodeName=X Comment="..."`: shows in `scontrol show node` and
  `sinfo -O comment`, changes nothing about scheduling;
- `drain`: `scontrol update NodeName=X State=DRAIN Reason="..."`: running jobs finish, no new
  job starts there until `scontrol update NodeName=X State=RESUME`.

Building the argv is pure (so `--dry-run` prints exactly what would run); running it goes
through the one Slurm command runner.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

from pal_slurm.ranking.drift import Drift
from pal_slurm.slurm.runner import Runner

ACTIONS = ("none", "comment", "drain")
MAX_TEXT = 200  # Slurm keeps reasons short; a long one is cut, never refused


def node_texts(drifts: Iterable[Drift]) -> dict[str, str]:
    """One line per node naming its drifted GPUs: 'pal drift: GPU 2 class A +12.0%; ...'."""
    per_node: dict[str, list[str]] = defaultdict(list)
    for d in drifts:
        per_node[d.node].append(f"GPU {d.slot} class {d.perf_class} {d.change:+.1%}")
    return {node: ("pal drift: " + "; ".join(items))[:MAX_TEXT] for node, items in sorted(per_node.items())}


def mark_commands(drifts: Iterable[Drift], action: str) -> list[list[str]]:
    """The scontrol argv lists for `action` over the nodes of `drifts` (none: no command)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown drift action {action!r} (known: {', '.join(ACTIONS)})")
    if action == "none":
        return []
    out = []
    for node, text in node_texts(drifts).items():
        clean = text.replace('"', "'")
        if action == "comment":
            out.append(["scontrol", "update", f"NodeName={node}", f"Comment={clean}"])
        else:
            out.append(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={clean}"])
    return out


def run_commands(runner: Runner, commands: Sequence[Sequence[str]]) -> list[tuple[str, str | None]]:
    """Run each command; (node, error or None) per command. One failure does not stop the rest."""
    results: list[tuple[str, str | None]] = []
    for argv in commands:
        node = argv[2].split("=", 1)[1]
        try:
            runner.run(argv)
            results.append((node, None))
        except Exception as exc:  # noqa: BLE001 - reported per node by the caller
            results.append((node, str(exc)))
    return results

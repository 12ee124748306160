"""Why a job got its GPUs: a decision from the store, read against the ranking it used. Pure.

pald records every answer (place / defer / pass) with the job's class and the ranking version
it placed by. This module turns one job's decisions plus that ranking snapshot into the lines
`palctl explain` prints: the class, where the job went, each chosen GPU's score, bin and
slowdown factor, how the chosen GPUs compare with the class's bins, and the locality (nodes
spanned). What was free at decision time is not recorded, so "better GPUs existed" is stated
as a fact about the ranking, not as a missed opportunity.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from pal_slurm.store.records import DecisionRecord, RankingSnapshot


def _fmt_nodes(nodes) -> str:
    return " ".join(f"{n}:{','.join(str(s) for s in slots)}" for n, slots in sorted(nodes.items())) or "-"


def explain_lines(decisions: Sequence[DecisionRecord], ranking: RankingSnapshot | None) -> list[str]:
    """Newest decision first in `decisions`; `ranking` the snapshot it names (None: unknown)."""
    if not decisions:
        return []
    d = decisions[0]
    kind = getattr(d.kind, "value", d.kind)
    when = d.created_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    lines = [f"job {d.job_id}: {kind} at {when}" + (f" ({d.reason})" if d.reason else "")]
    lines.append(f"  class: {d.perf_class or 'none (the job passes through pal-slurm)'}")
    if d.ranking_version is not None:
        lines.append(f"  ranking: v{d.ranking_version}" + ("" if ranking else " (no longer in the store)"))
    if d.nodes:
        gpus = sum(len(s) for s in d.nodes.values())
        spanned = len(d.nodes)
        lines.append(f"  placed on: {_fmt_nodes(d.nodes)}")
        lines.append(
            f"  locality: {gpus} GPU(s) on {spanned} node(s)"
            + (" (cross-node: the locality penalty applied)" if spanned > 1 else " (one node: no locality penalty)")
        )
    if ranking is not None and d.perf_class:
        entries = {(e.node, e.slot): e for e in ranking.entries if e.perf_class == d.perf_class}
        if not entries:
            lines.append(f"  ranking v{ranking.version} has no class {d.perf_class}: every GPU counted as 1.0")
        else:
            bins = Counter(e.bin for e in entries.values())
            sf_of = {e.bin: e.sf for e in entries.values()}
            summary = ", ".join(f"bin {b}: {bins[b]} GPU(s) sf {sf_of[b]:.3f}" for b in sorted(bins))
            lines.append(f"  class {d.perf_class} bins: {summary}")
            chosen = []
            for node, slots in sorted(d.nodes.items()):
                for s in slots:
                    e = entries.get((node, s))
                    if e is None:
                        lines.append(f"    {node}:{s}  not ranked (counted as 1.0)")
                        continue
                    chosen.append(e)
                    flags = f"  [{','.join(e.flags)}]" if e.flags else ""
                    lines.append(f"    {node}:{s}  score {e.score:.3f}  bin {e.bin}  sf {e.sf:.3f}{flags}")
            if chosen:
                worst = max(chosen, key=lambda e: e.sf)
                lines.append(
                    f"  the job runs at the pace of its slowest GPU: sf {worst.sf:.3f} ({worst.node}:{worst.slot})"
                )
                better = sum(n for b, n in bins.items() if sf_of[b] < worst.sf)
                if better:
                    lines.append(
                        f"  {better} GPU(s) rank in faster bins; they were busy or held when pald placed the job"
                        " (free GPUs at decision time are not recorded)"
                    )
                else:
                    lines.append("  no GPU of this class ranks in a faster bin")
    if len(decisions) > 1:
        lines.append(f"  earlier decisions for this job ({len(decisions) - 1}):")
        for old in decisions[1:]:
            okind = getattr(old.kind, "value", old.kind)
            lines.append(f"    {old.created_at:%Y-%m-%d %H:%M:%S} {okind} {_fmt_nodes(old.nodes)} {old.reason}".rstrip())
    return lines

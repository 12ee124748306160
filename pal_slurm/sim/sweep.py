"""A sweep split into single runs and merged back: the pure half of `palctl simulate --array`.

A grid of (trace, seed, policy) runs is independent cell by cell: `run_grid` builds a fresh
simulator for each, so running the cells one at a time (one Slurm array element each) and
putting their results back in the grid's order gives exactly the serial results. This module
names the cells in that order, writes a run's result as JSON without losing anything a report
reads (every job's outcome, the utilisation series, the simulator's extras), and merges the
elements' documents back into the list of results `run_grid` returns. No I/O here: the sweep's
folder is `sim.sweep_dir`, Slurm is `slurm.batch`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from pal_slurm.sim.metrics import JobOutcome, RunResult

ELEMENT_FORMAT = 1  # the element document's layout; a merge refuses another


class SweepError(ValueError):
    """Element documents that do not make up the sweep (missing, foreign, or of another sweep)."""


@dataclass(frozen=True)
class Cell:
    """One run of a grid: the trace (its index among the sweep's traces, and its name), the
    seed index and the policy."""

    trace: int
    trace_name: str
    seed: int
    policy: str

    def label(self) -> str:
        return f"trace {self.trace} ({self.trace_name}), seed {self.seed}, {self.policy}"

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def grid_cells(trace_names: Sequence[str], seeds: int, policies: Sequence[str]) -> list[Cell]:
    """Every cell in `run_grid`'s order (trace, then seed, then policy): element i is cell i."""
    return [Cell(t, name, s, p) for t, name in enumerate(trace_names) for s in range(seeds) for p in policies]


def result_to_json(run: RunResult) -> dict[str, Any]:
    """A run's result as JSON, every field kept (floats round-trip exactly through json)."""
    return {"trace": run.trace, "policy": run.policy, "seed": run.seed, "mode": run.mode,
            "num_gpus": run.num_gpus, "jobs": [asdict(j) for j in run.jobs], "busy_gpu_s": run.busy_gpu_s,
            "util_series": [list(p) for p in run.util_series], "extra": run.extra}


def result_from_json(doc: Mapping[str, Any]) -> RunResult:
    """The inverse of `result_to_json`."""
    try:
        jobs = [JobOutcome(**{**j, "gpus": tuple(j.get("gpus", ()))}) for j in doc["jobs"]]
        return RunResult(trace=doc["trace"], policy=doc["policy"], seed=doc["seed"], mode=doc["mode"],
                         num_gpus=doc["num_gpus"], jobs=jobs, busy_gpu_s=doc["busy_gpu_s"],
                         util_series=[(t, b) for t, b in doc["util_series"]], extra=dict(doc["extra"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise SweepError(f"not a run result: {exc}") from None


def element_document(index: int, cell: Cell, run: RunResult, elapsed_s: float) -> dict[str, Any]:
    """What element `index` writes: its cell (so a merge can check it ran the right one) and its result."""
    return {"format": ELEMENT_FORMAT, "element": index, "cell": cell.as_json(), "elapsed_s": elapsed_s,
            "result": result_to_json(run)}


def merge_elements(cells: Sequence[Cell], docs: Mapping[int, Mapping[str, Any]]) -> list[RunResult]:
    """The results of every cell in grid order, from the element documents by element index;
    SweepError naming the elements missing, or one that ran another cell than this sweep's."""
    missing = [i for i in range(len(cells)) if i not in docs]
    if missing:
        raise SweepError(f"{len(missing)} of {len(cells)} element(s) have no result: {_indices(missing)}")
    extra = sorted(set(docs) - set(range(len(cells))))
    if extra:
        raise SweepError(f"element(s) {_indices(extra)} are not in this sweep of {len(cells)}")
    out = []
    for i, cell in enumerate(cells):
        doc = docs[i]
        if doc.get("format") != ELEMENT_FORMAT or doc.get("element") != i:
            raise SweepError(f"element {i}: not an element document of this format ({ELEMENT_FORMAT})")
        if doc.get("cell") != cell.as_json():
            raise SweepError(f"element {i} ran {doc.get('cell')}, this sweep's element {i} is {cell.as_json()}")
        out.append(result_from_json(doc["result"]))
    return out


def elapsed(docs: Mapping[int, Mapping[str, Any]]) -> float:
    """Seconds the elements ran, all together (a merged report's `elapsed_s`)."""
    return float(sum(float(d.get("elapsed_s", 0.0)) for d in docs.values()))


def _indices(ids: Sequence[int], shown: int = 20) -> str:
    text = ", ".join(str(i) for i in ids[:shown])
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


# ---- progress ---------------------------------------------------------------------------
# Slurm states of an element that has not ended (squeue's job_state)
WAITING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED",
                            "CONFIGURING", "RESIZING"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"})


@dataclass(frozen=True)
class SweepProgress:
    """Where each element stands: done (its result written), failed (with why), running, pending."""

    elements: int
    done: tuple[int, ...]
    failed: tuple[tuple[int, str], ...]  # (element, its error)
    running: tuple[int, ...]
    pending: tuple[int, ...]

    @property
    def complete(self) -> bool:
        return len(self.done) == self.elements


def tally(elements: int, done: set[int], errors: Mapping[int, str],
          slurm_states: Mapping[int, str] | None) -> SweepProgress:
    """Each element's standing from what its folder holds (a result, an error it wrote) and,
    when Slurm could be asked (`slurm_states`: element -> squeue state; None when not), what
    Slurm says of the others. An element Slurm ended (failed, timed out, cancelled, or gone from
    its queue) without writing anything is failed: nothing else will write its result."""
    failed: list[tuple[int, str]] = []
    running: list[int] = []
    pending: list[int] = []
    for i in range(elements):
        if i in done:
            continue
        if i in errors:
            failed.append((i, errors[i]))
            continue
        state = None if slurm_states is None else slurm_states.get(i)
        if slurm_states is None or state in WAITING_STATES:
            pending.append(i)
        elif state in RUNNING_STATES:
            running.append(i)
        elif state is None:
            failed.append((i, "not in Slurm's queue and no result written"))
        else:
            failed.append((i, f"Slurm ended it {state} and it wrote no result"))
    return SweepProgress(elements, tuple(sorted(done & set(range(elements)))), tuple(failed), tuple(running),
                         tuple(pending))

"""Acts on held jobs: pin them to nodes and exact GPU slots, hold and release them.

The deferred-placement path of pald (and the demo) is: the hook holds a PAL job (priority 0),
pald chooses nodes and slots, then `place_held_job` rewrites the job's request and releases it.
Slurm facts this relies on (tested on lab clusters of 22.05 and, in Debian roots, 24.11 and
26.05: tests/integration/test_slurm_adapter.py; `scontrol show job` text of each in
tests/unit/slurm/data/<release>/):

- `scontrol update jobid=X Gres=gpu:s2:1,gpu:s3:1` sets TresPerNode (per-slot types bind exact
  GPUs), but is REJECTED ("Invalid GRES specification (with and without type identification)")
  while the job still carries an untyped request such as gres:gpu:2. Clearing first with
  `TresPerNode=` (empty) and then setting the typed request works. 24.11 refuses that clear
  for a job with --cpus-per-gpu/--mem-per-gpu ("Invalid generic resource (gres)
  specification": those need a GPU request) but takes the typed request in one update.
- 24.11 does not start a job with --cpus-per-gpu bound to two per-slot types on a node (it
  stays pending, Reason=Resources, on an idle node): such a job gets its nodes only
  (`JobSnapshot.stalls_on_slots`; the hook does the same at submit).
- `NodeList=` (ReqNodeList) means "at least these nodes", so the node count is pinned as well
  (`NumNodes=n-n`), or Slurm may add nodes.
- The reverse is not possible: once a job carried a typed request, 22.05 refuses an untyped one
  even after clearing. So the node update (the step most likely to fail: unknown node) runs
  first and changes nothing when it fails; the GRES rewrite comes last.
- Each update is its own RPC; the job stays held throughout, so the scheduler never sees a
  half-rewritten request, and a failed placement leaves it held.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from pal_slurm.slurm.errors import SlurmError
from pal_slurm.intake.gres import slash_spelled, unprefixed
from pal_slurm.intake.tres import canonical_tres
from pal_slurm.slurm.gres import gres_update_spec
from pal_slurm.intake.hostlist import compress, expand
from pal_slurm.slurm.runner import Runner


JobRef = int | str  # a job id, ``A_I`` for element I of array A, ``A_[1,3-5]`` for several (readers.JobInfo)
_REF = re.compile(r"\d+(?:_\d+|_\[\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*\])?")


def job_ref(job: JobRef) -> str:
    """The scontrol name of a job or array element; anything else is refused (it is put on a
    command line)."""
    text = str(job) if isinstance(job, int) and not isinstance(job, bool) else job
    if not isinstance(text, str) or not _REF.fullmatch(text):
        raise SlurmError(f"not a job id or array element: {job!r}")
    return text


def normalize_gres_spec(spec: str) -> str:
    """``gres:gpu:s2:1,gres:gpu:s3:1`` (or ``gres/``) or ``gpu:s2:1,gpu:s3:1`` -> the scontrol form
    (no prefix)."""
    records = [r.strip() for r in spec.split(",") if r.strip()]
    if not records:
        raise SlurmError("empty GRES specification")
    out = []
    for record in records:
        record = unprefixed(record)
        if not re.fullmatch(r"[A-Za-z][\w.-]*(:[\w.-]+)?(:\d+)?", record):
            raise SlurmError(f"bad GRES record {record!r} in {spec!r}")
        out.append(record)
    return ",".join(out)


@dataclass(frozen=True)
class JobSnapshot:
    """The few fields of `scontrol -o show job` the actuator needs."""

    job_id: int
    state: str
    priority: int
    tres_per_node: str  # "" when the job requests no GRES
    req_nodes: str = ""  # ReqNodeList hostlist, "" when none
    num_nodes: str = ""  # NumNodes as shown: "1", "2-2"
    cpus_per_tres: str = ""  # CpusPerTres (--cpus-per-gpu), "gres:gpu:4"; "" when none
    slash_tres: bool = False  # Slurm spelled its TRES "gres/gpu" (23.11 and later)

    def stalls_on_slots(self, spec: str) -> bool:
        """Whether binding this job to the slot types of `spec` would leave it pending for
        ever: Slurm 24.11 (found on 24.11.5 in the Debian 13 root) does not start a job with
        --cpus-per-gpu bound to two per-slot GPU types on a node (Reason=Resources on an idle
        node; one slot type, or the untyped request, starts; 22.05 starts all). Such a job is
        pinned to its nodes only there, and Slurm picks its GPUs on them."""
        return self.slash_tres and "gpu" in self.cpus_per_tres and "," in spec

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.priority == 0


def _field(line: str, key: str) -> str | None:
    m = re.search(rf"(?:^|\s){key}=(\S*)", line)
    return m.group(1) if m else None


def parse_show_job(text: str) -> JobSnapshot:
    """Parse one-line `scontrol -o show job X` output."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    job_id = _field(line, "JobId")
    state = _field(line, "JobState")
    priority = _field(line, "Priority")
    if job_id is None or state is None or priority is None or not job_id.isdigit():
        raise SlurmError(f"unexpected `scontrol show job` output: {line[:200]!r}")
    raw_tres = [_field(line, key) or "" for key in ("TresPerNode", "CpusPerTres")]
    req = _field(line, "ReqNodeList") or ""
    return JobSnapshot(
        int(job_id),
        state,
        int(priority) if priority.isdigit() else 0,
        canonical_tres(raw_tres[0]),  # 23.02+ writes gres/gpu:1
        "" if req == "(null)" else req,
        _field(line, "NumNodes") or "",
        canonical_tres(raw_tres[1]),
        any(slash_spelled(t) for t in raw_tres),
    )


class SlurmActuator:
    """Every change pal-slurm makes to Slurm jobs goes through here (and the runner)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def show(self, job_id: JobRef) -> JobSnapshot:
        return parse_show_job(self.runner.run(["scontrol", "-o", "show", "job", job_ref(job_id)]))

    def hold(self, job_id: JobRef) -> None:
        """Hold a pending job. Run as an Operator, SlurmUser or root (as pald is) this is an
        *admin* hold (Reason=JobHeldAdmin) that the job's user cannot `scontrol release`; it
        also turns a user hold (JobHeldUser, priority 0 set at submit) into one. Slurm 22.05,
        lab-tested in tests/integration/test_faults.py (root) and
        tests/integration/test_pald_unprivileged.py (AdminLevel=Administrator)."""
        self.runner.run(["scontrol", "hold", job_ref(job_id)])

    def hold_many(self, job_ids: Iterable[JobRef], chunk: int = 200) -> None:
        """`hold` for many jobs, one scontrol per `chunk` ids (`scontrol hold 1,2,3`). Slurm
        holds every valid id and exits non-zero if any failed (a job gone meanwhile)."""
        ids = [job_ref(j) for j in job_ids]
        failures = []
        for i in range(0, len(ids), chunk):
            try:
                self.runner.run(["scontrol", "hold", ",".join(ids[i:i + chunk])])
            except SlurmError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    def set_admin_comment(self, job_id: JobRef, text: str) -> None:
        """Replace the job's admin_comment (pald's tags; the caller keeps what was there)."""
        if "\n" in text:
            raise SlurmError(f"job {job_id}: admin_comment must be one line")
        self._update(job_id, f"AdminComment={text}")

    def release(self, job_id: JobRef) -> None:
        self.runner.run(["scontrol", "release", job_ref(job_id)])

    def unpin(self, job_id: JobRef) -> None:
        """Drop a pending job's node pin (`NodeList=`, empty: ReqNodeList cleared), so Slurm
        may run it on any node that has what it asks for. Its GPU request stays as it is (a
        per-slot typed one cannot become untyped again on 22.05; every node of a slot-typed
        site has the same slot types)."""
        self._update(job_id, "NodeList=")

    def _update(self, job_id: JobRef, *fields: str) -> None:
        self.runner.run(["scontrol", "update", f"jobid={job_ref(job_id)}", *fields])

    def _set_gres(self, job_id: JobRef, current: str, spec: str) -> None:
        """Replace the job's per-node GPU request with `spec`: clear, then set (22.05 refuses
        a typed request over an untyped one). 23.02+ refuses the clear when the job has
        --cpus-per-gpu/--mem-per-gpu (they would name no GPU request), and replaces the
        request in one update instead: a refused clear goes straight to the set, whose
        error (if it fails too) is the one raised."""
        if current and current != "gres:":
            try:
                self._update(job_id, "TresPerNode=")
            except SlurmError:
                pass
        self._update(job_id, f"Gres={spec}")

    def place_held_job(
        self,
        job_id: JobRef,
        nodes: Sequence[str] | str,
        gres_spec: str | None,
        release: bool = True,
        partition: str | None = None,
    ) -> None:
        """Pin a pending job to exactly `nodes` with `gres_spec` per node, then release it.
        `partition`: narrow a job that asked for several partitions to the one holding `nodes`
        (Slurm leaves such a job pending for ever when its pinned nodes are outside its first
        partition).

        `nodes` is a list of names or a hostlist; `gres_spec` is per node, with or without the
        ``gres:`` prefixes (``gpu:s2:1,gpu:s3:1``), or None to keep the job's GPU request
        (nodes only). A pending job that is not held is held first, so the scheduler cannot
        start it half-updated. Raises SlurmError if the job is
        not pending or a command fails; the job is then left as it was (held if it was held),
        with its previous nodes and GPU request put back where Slurm allows it.
        """
        names = expand(nodes) if isinstance(nodes, str) else list(nodes)
        if not names:
            raise SlurmError(f"job {job_id}: no nodes to place it on")
        spec = None if gres_spec is None else normalize_gres_spec(gres_spec)
        before = self.show(job_id)
        if spec is not None and before.stalls_on_slots(spec):
            spec = None
        if before.state != "PENDING":
            raise SlurmError(f"job {job_id} is {before.state}, not PENDING: cannot place it")
        held_here = not before.held
        if held_here:
            self.hold(job_id)
        count = len(names)
        try:
            where = [f"Partition={partition}"] if partition else []
            self._update(job_id, *where, f"NodeList={compress(names)}", f"NumNodes={count}-{count}")
            try:
                if spec is not None:
                    self._set_gres(job_id, before.tres_per_node, spec)
            except SlurmError:
                self._restore(job_id, before)
                raise
        except SlurmError:
            if held_here:  # it was not held when we came: give it back to the scheduler
                self._quietly(self.release, job_id)
            raise
        if release:
            self.release(job_id)

    def place_on_slots(
        self, job_id: JobRef, nodes: Sequence[str] | str, slots: Iterable[int], release: bool = True
    ) -> None:
        """`place_held_job` with the per-slot typed GRES of `slots` (same slots on each node)."""
        self.place_held_job(job_id, nodes, gres_update_spec(slots), release=release)

    def place_nodes(self, job_id: JobRef, nodes: Sequence[str] | str, release: bool = True,
                    partition: str | None = None) -> None:
        """Pin a pending job to exactly `nodes` (node count fixed too), keeping its GPU request.

        For jobs that ask for GPUs per job (`--gpus=N`): Slurm then picks the slots on them.
        """
        self.place_held_job(job_id, nodes, None, release=release, partition=partition)

    def _restore(self, job_id: JobRef, before: JobSnapshot) -> None:
        """Best effort: put back the nodes and GPU request the job had before."""
        steps = [
            ["TresPerNode="],
            [f"NodeList={before.req_nodes}"] + ([f"NumNodes={before.num_nodes}"] if before.num_nodes else []),
        ]
        if before.tres_per_node and before.tres_per_node != "gres:":
            steps.append([f"Gres={normalize_gres_spec(before.tres_per_node)}"])
        for fields in steps:
            self._quietly(self._update, job_id, *fields)

    @staticmethod
    def _quietly(action: Callable[..., object], *args: object) -> None:
        try:
            action(*args)
        except SlurmError:
            pass  # the original error is the one worth reporting


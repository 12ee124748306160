"""Why pald leaves a job to Slurm as it reads it: input it does not read, and job shapes it
passes or defers on purpose. Pure.

Input: a hostile or mistaken submission must cost pald no more than a normal one, so every
parser of user text has caps; a field over one (`input-too-large:<field>`) or malformed
(`bad-input:<field>`) makes the job pass to Slurm untouched.

Shapes: pald binds a job to whole nodes and per-node GPU slots. Some requests say something
that binding would change or break: GPUs per task or per socket, tasks per GPU, an array with
a throttle (`--array=1-8%2`: Slurm, not pald, decides which elements may run), a
heterogeneous job's components, a job that cannot start yet (dependency, later --begin, the
user's own --hold: pinning it would hold GPUs for a job that is not running, and pald's
deferral would release a hold that is the user's). (A GPU model request is placed, on nodes
of that model: see policy/eligibility. An array without a throttle is deferred: pald's cycle
places its elements one by one, daemon/service.py.)

Each reason lands in the job's admin_comment (`pal:pass=<reason>`); docs/users.md has the
table for users.
"""

from __future__ import annotations

from dataclasses import dataclass

from pal_slurm.slurm.errors import SlurmError

TOO_LARGE = "input-too-large"
BAD_INPUT = "bad-input"


# Slurm's pending reasons (squeue's %r) for a job its QOS, association or partition limits
# keep waiting: on a pin or not, it cannot start until the limit clears.
_LIMIT_PREFIXES = ("QOSMax", "QOSGrp", "QOSMin", "AssocMax", "AssocGrp")
_LIMIT_REASONS = frozenset({"QOSJobLimit", "QOSUsageThreshold", "PartitionNodeLimit", "PartitionTimeLimit",
                            "JobArrayTaskLimit", "AccountNotAllowed", "QOSNotAllowed"})


def held_by_limit(reason: str) -> bool:
    """Whether Slurm keeps a pending job waiting for a limit (`QOSMaxJobsPerUserLimit`,
    `AssocGrpGRES`, `PartitionTimeLimit`, ...) rather than for room."""
    return reason.startswith(_LIMIT_PREFIXES) or reason in _LIMIT_REASONS


# Slurm's pending reason for a job whose request (a PAL pin among it) it can never satisfy:
# under topology/block a pin beside the user's own --segment, which Slurm 24.11 shows neither
# the hook nor squeue (docs/decisions/block-topology.md).
REFUSED_PIN_REASONS = frozenset({"BadConstraints"})


def refuses_pin(reason: str) -> bool:
    """Whether Slurm keeps a pending job waiting for ever on its request as it stands: a PAL
    pin on it is dropped, and Slurm places the job as its user asked."""
    return reason in REFUSED_PIN_REASONS


def refused_input(reason: str) -> bool:
    """Whether a pass reason says pald did not read one of the job's fields."""
    return reason.startswith((f"{TOO_LARGE}:", f"{BAD_INPUT}:"))


class RefusedInput(SlurmError):
    """A field of the job pald does not read: over a cap (`input-too-large:<field>`) or
    malformed (`bad-input:<field>`). `reason` is the pass token, `detail` one short line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class JobTraits:
    """The parts of a job's request that decide whether PAL places it at all."""

    array: bool = False  # --array (deferred: pald's cycle places each element)
    array_throttled: bool = False  # --array=...%N
    het_job: bool = False  # a component of a heterogeneous job
    gpus_per_task: bool = False  # --gpus-per-task
    gpus_per_socket: bool = False  # --gpus-per-socket
    ntasks_per_gpu: bool = False  # --ntasks-per-gpu
    dependency: bool = False  # --dependency
    begins_later: bool = False  # --begin in the future
    user_hold: bool = False  # --hold


# (trait, admin_comment reason, what the user sees) in the order they are checked.
PASSED_SHAPES: tuple[tuple[str, str, str], ...] = (
    ("user_hold", "user_hold", "held by you: runs where Slurm puts it once you release it"),
    ("array_throttled", "array_throttle", "each element runs where Slurm puts it, as many at once as you allowed"),
    ("het_job", "hetjob", "each component runs where Slurm puts it"),
    ("dependency", "dependency", "waits for its dependency, then runs where Slurm puts it"),
    ("begins_later", "begin", "starts at its --begin time where Slurm puts it"),
    ("gpus_per_task", "gpus_per_task", "Slurm binds GPUs to tasks"),
    ("gpus_per_socket", "gpus_per_socket", "Slurm binds GPUs to sockets"),
    ("ntasks_per_gpu", "ntasks_per_gpu", "Slurm binds tasks to GPUs"),
)


# (trait, defer reason): shapes pald always defers to its cycle (never places at submit)
DEFERRED_SHAPES: tuple[tuple[str, str], ...] = (
    ("array", "array"),  # one record for every element: the cycle places each as it may start
)


def defer_reason(traits: JobTraits) -> str | None:
    """The reason pald defers this job to its cycle whatever its mode, or None."""
    return next((reason for trait, reason in DEFERRED_SHAPES if getattr(traits, trait)), None)


def pass_reason(traits: JobTraits) -> str | None:
    """The reason PAL leaves this job to Slurm, or None when PAL may place it."""
    for trait, reason, _ in PASSED_SHAPES:
        if getattr(traits, trait):
            return reason
    return None

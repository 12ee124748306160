"""The start rule the caller names: the engine answers with the GPUs its scheduler really starts
a launch on, in the cycle and on the submit path alike."""

from typing import Collection, Sequence

from pal_slurm.engine import AS_PLANNED, Engine, EngineSettings
from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.ranking import Ranking

VIEW = ClusterView.uniform(2, 4)
RANKING = Ranking.uniform(VIEW.size)


class HighestFree:
    """A scheduler that starts every launch on the highest free GPUs, as many as planned."""

    changes_launches = True

    def start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView,
              free: Collection[int]) -> Sequence[int]:
        return tuple(sorted(free)[-len(gpus):])


def job(jid: str, n: int, submit: float = 0.0) -> JobRequest:
    return JobRequest(job_id=jid, num_gpus=n, submit_time=submit, waiting_since=submit)


def test_a_rule_that_moves_a_launch_moves_it_in_the_cycle_and_on_the_submit_path():
    eng = Engine(EngineSettings(placement="pal"), start_rule=HighestFree())
    plan = eng.decide([job("a", 2), job("b", 2, 1.0)], VIEW, RANKING, 2.0)
    assert plan.launch == {"a": (6, 7), "b": (4, 5)}  # b planned again on what a really left
    assert eng.place_new(job("a", 2), VIEW, RANKING, 2.0) == (6, 7)


def test_as_planned_changes_nothing():
    gpus = (3, 1)
    assert AS_PLANNED.start(job("a", 2), gpus, VIEW, {0}) is gpus
    plain = Engine(EngineSettings(placement="pal")).decide([job("a", 2), job("b", 2, 1.0)], VIEW, RANKING, 2.0)
    assert plain.launch["a"] != (6, 7)


class Recording:
    """A scheduler that moves the first launch to the highest free GPUs and records the free
    GPUs each call was given (copied: the caller may change the collection afterwards)."""

    changes_launches = True

    def __init__(self) -> None:
        self.given: list[tuple[str, frozenset[int]]] = []

    def start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView,
              free: Collection[int]) -> Sequence[int]:
        self.given.append((str(job.job_id), frozenset(free)))
        return tuple(sorted(free)[-len(gpus):]) if len(self.given) == 1 else gpus


def test_each_start_is_given_the_gpus_the_launches_before_it_left_free():
    rule = Recording()
    plan = Engine(EngineSettings(placement="pal"), start_rule=rule).decide(
        [job("a", 2), job("b", 2, 1.0), job("c", 1, 2.0)], VIEW, RANKING, 3.0)
    assert plan.launch["a"] == (6, 7)  # moved: b and c planned again on what it left
    a, b = set(plan.launch["a"]), set(plan.launch["b"])
    assert rule.given == [("a", frozenset(VIEW.free)), ("b", frozenset(set(VIEW.free) - a)),
                          ("c", frozenset(set(VIEW.free) - a - b))]

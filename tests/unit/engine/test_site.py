"""The submit path's decision in one call (pal_slurm.engine.site.decide), and a release's
check (release_on): place, defer or pass from an Intake and the service's facts."""

from __future__ import annotations

from pal_slurm.daemon.protocol import JobFields
from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.engine.site import Facts, decide
from pal_slurm.engine.reservations import Reservations
from pal_slurm.engine.where import Released, Where, release_on
from pal_slurm.intake.job import Intake, from_hook
from pal_slurm.model import ClusterView, DecisionKind
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.policy.shapes import ShapeIndex
from pal_slurm.ranking import Ranking

VIEW = ClusterView.from_layout([("gpu01", 4), ("gpu02", 4)])


def facts(view: ClusterView = VIEW) -> Facts:
    return Facts(view, None, Reservations(), ShapeIndex(view), Ranking.uniform(view.size, version=0), {}, ())


def job(gpn: int, mode: str | None = None) -> Intake:
    got = from_hook(JobFields(uid=1, comment="pal:class=resnet", gpus_per_node=gpn), CommentSpec("resnet", mode=mode),
                    "req:k", 0.0, AppClassMap({}, default="A"))
    assert isinstance(got, Intake)
    return got


def ask(got: Intake, mode: str = "auto", held: bool = False, crowded: bool = False, view: ClusterView = VIEW):
    return decide(Engine(EngineSettings(running_jobs_move=False)), Where(), facts(view), got, mode, 0.0, held, None,
                  crowded)


def test_a_job_that_fits_is_placed_on_one_node_with_its_exact_slots():
    d = ask(job(2))
    assert d.decision is DecisionKind.PLACE and d.choice is not None and len(d.choice.nodes) == 1
    assert len(d.gpus) == 2 and d.gres is not None and d.gres.count("gpu:s") == 2


def test_size_mode_and_a_crowded_user_in_the_order_the_answer_is_built():
    assert ask(job(8)).reason == "too_many_gpus_per_node"
    assert (ask(job(1), mode="defer").decision, ask(job(1), mode="defer").queue) == (DecisionKind.DEFER, True)
    queued = ask(job(1), held=True)  # older jobs held, not all known: it waits with them
    assert queued.reason == "queued" and queued.queued is not None
    full = VIEW.with_free(frozenset())
    assert ask(job(1), view=full).reason == "no_room" and ask(job(1), mode="now", view=full).decision is DecisionKind.PASS
    crowded = ask(job(1), crowded=True)
    assert crowded.decision is DecisionKind.DEFER and crowded.reason == "user_in_flight" and not crowded.queue


def test_a_release_on_nodes_without_site_facts_binds_its_slots():
    got = release_on(VIEW, None, VIEW.free, job(2).request, (4, 5), job(2).restrictions, {})
    assert isinstance(got, Released) and got.gpus == (4, 5) and not got.slurm_picks
    assert got.gres_spec is not None and "s0" in got.gres_spec

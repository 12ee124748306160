"""One call per source (pal_slurm.intake.job): the hook's request or squeue's record -> an
Intake or a Pass, the same job read the same way from either, never an exception."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pal_slurm.daemon.protocol import JobFields
from pal_slurm.intake.job import (
    Intake,
    Pass,
    SubmitRules,
    from_hook,
    from_queue,
    held_shape,
    partitions_of,
    submit_shape,
)
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.comment_grammar import DEFAULT_ON_CLASS, CommentSpec
from pal_slurm.model.modes import DefaultOn
from pal_slurm.model.site_rules import SiteRules
from pal_slurm.model.shape import JobShape, ShapeError
from pal_slurm.slurm.readers import JobInfo

CLASSES = AppClassMap({"resnet": "B"}, default="A")
SPEC = CommentSpec("resnet")


def hook(**fields) -> JobFields:
    return JobFields(**{"uid": 1000, "comment": "pal:class=resnet", **fields})


def queued(job_id: int = 7, **fields) -> JobInfo:
    base = JobInfo(job_id=job_id, name="j", state="PENDING", reason="JobHeldUser", user_id=1000,
                   comment="pal:class=resnet", admin_comment="pal:defer", nodes=(), required_nodes=(),
                   node_count=1, tres_per_node="gres:gpu:2", gpu_slots={}, priority=0, submit_time=0,
                   start_time=0, time_limit_s=3600.0)
    return replace(base, **fields)


def intake(got: Intake | Pass) -> Intake:
    assert isinstance(got, Intake), got
    return got


def test_a_hook_request_reads_shape_class_limit_and_restrictions():
    got = intake(from_hook(hook(gpus_per_node=2, min_nodes=2, time_limit=90, partition="a,b", exc_nodes="n[1-3]"),
                           SPEC, "req:1", 100.0, CLASSES))
    assert got.key == "req:1" and got.shape == JobShape.on_nodes(2, 2) and got.gpus == 4
    assert got.perf_class == "B" and got.warning is None and got.time_limit_s == 5400.0
    assert got.restrictions.partitions == ("a", "b") and "n2" in got.restrictions.exclude
    assert got.restrictions.nodes == 2 and got.deferred is None and got.net == "medium"


def test_the_same_job_reads_alike_from_the_hook_and_from_the_queue():
    at_submit = intake(from_hook(hook(tres_per_node="gres:gpu:2", time_limit=60, partition="gpu"),
                                 SPEC, "req:1", 0.0, CLASSES))
    held = intake(from_queue(queued(partition="gpu"), CLASSES))
    assert held.key == 7
    assert (at_submit.shape, at_submit.perf_class, at_submit.time_limit_s) == (held.shape, held.perf_class,
                                                                               held.time_limit_s)
    assert at_submit.restrictions.partitions == held.restrictions.partitions
    assert at_submit.restrictions.time_limit_min == held.restrictions.time_limit_min == 60


@pytest.mark.parametrize("fields, reason", [
    (dict(gpus_per_node=1, priority=0), "user_hold"),
    (dict(gpus_per_node=1, array_inx="1-8%2"), "array_throttle"),
    (dict(gpus_per_node=1, tres_per_task="gres/gpu:1"), "gpus_per_task"),
    (dict(), "no_gpus"),
    (dict(tres_per_node="gres:gpu:a:b:c:2"), "no_gpus"),  # a GPU count that cannot be read
    (dict(gpus_per_node=1, exc_nodes="n[1-"), "bad-input:exclude"),
    (dict(gpus_per_node=1, req_nodes="n[" + "1," * 40_000 + "]"), "input-too-large:nodelist"),
    (dict(tres_per_node="gpu:a100:1," * 2000), "input-too-large:gres"),
])
def test_what_pald_does_not_place_is_a_pass_with_its_reason(fields, reason):
    got = from_hook(hook(**fields), SPEC, "req:1", 0.0, CLASSES)
    assert isinstance(got, Pass) and got.reason == reason and got.perf_class == "B"


def test_refused_input_tells_the_user_in_one_short_line():
    got = from_hook(hook(gpus_per_node=1, exc_nodes="n[" + "1," * 40_000 + "]"), SPEC, "k", 0.0, CLASSES)
    assert isinstance(got, Pass) and got.reason == "input-too-large:exclude"
    assert got.warning is not None and got.warning.startswith("PAL leaves this job to Slurm:")
    assert len(got.warning) <= 200


def test_huge_numbers_read_without_an_exception():
    huge = 2**53
    got = intake(from_hook(hook(gpus_per_node=huge, min_nodes=huge, num_tasks=huge, cpus_per_task=huge,
                                min_mem_per_cpu=huge, time_limit=huge), SPEC, "k", 0.0, CLASSES))
    assert got.gpus == huge * huge and got.restrictions.memory_per_node_mb >= huge
    assert got.time_limit_s == huge * 60.0


def test_an_unknown_class_or_sensitivity_is_placed_as_the_default_with_a_warning():
    got = intake(from_hook(hook(gpus_per_node=1), CommentSpec("nosuchapp", net="sideways"), "k", 0.0, CLASSES))
    assert got.perf_class == "A" and got.net == "sideways"
    assert got.warning is not None and "unknown class 'nosuchapp'" in got.warning and "sideways" in got.warning


def test_an_array_is_deferred_and_a_job_without_a_spec_reads_as_unknown():
    assert intake(from_hook(hook(gpus_per_node=1, array_inx="1-4"), SPEC, "k", 0.0, CLASSES)).deferred == "array"
    got = intake(from_hook(hook(gpus_per_node=1), None, "k", 0.0, CLASSES))
    assert got.spec is None and got.perf_class == "A" and got.warning is not None


@pytest.mark.parametrize("fields, reason, perf_class", [
    (dict(unreadable="bad json"), "unreadable_record", "?"),
    (dict(comment="pal:class="), "bad_comment:", "?"),
    (dict(tres_per_node="", tres_per_job=""), "no_gpus", "B"),
    (dict(tres_per_node="gres:gpu:s0:x:y:1"), "no_gpus", "B"),
])
def test_a_held_record_pald_cannot_place_is_a_pass(fields, reason, perf_class):
    got = from_queue(queued(**fields), CLASSES)
    assert isinstance(got, Pass) and got.reason.startswith(reason) and got.perf_class == perf_class


def test_submit_and_held_shapes_come_from_one_parser():
    assert submit_shape(hook(gpus_per_node=2, min_nodes=3), None) == JobShape.on_nodes(3, 2)
    assert submit_shape(hook(gpus_per_job=8, min_nodes=2), None) == JobShape.on_nodes(2, 4)
    assert submit_shape(hook(gpus_per_job=7, min_nodes=2), None) == JobShape.anywhere(7)
    assert submit_shape(hook(tres_per_job="gres:gpu:4"), None) == JobShape.anywhere(4)
    assert submit_shape(hook(), CommentSpec("x", gpus=3)) == JobShape.anywhere(3)
    with pytest.raises(ShapeError):
        submit_shape(hook(), CommentSpec("x"))
    # the same jobs as squeue shows them once held
    assert held_shape(queued(tres_per_node="gres:gpu:2", node_count=3), None) == JobShape.on_nodes(3, 2)
    assert held_shape(queued(tres_per_node="", tres_per_job="gres:gpu:4"), None) == JobShape.anywhere(4)
    assert held_shape(queued(tres_per_node="", tres_per_job="gres:gpu:8", node_count=2), None) == JobShape.on_nodes(2, 4)


def test_a_running_job_reads_its_class_and_sensitivity_from_its_comment():
    from pal_slurm.intake.job import running_class

    assert running_class("pal:class=resnet,net=HIGH", CLASSES) == ("resnet", "B", "high")
    assert running_class("pal:class=", CLASSES) == ("", "A", "medium")  # a bad comment: no spec
    assert running_class("just a comment", CLASSES) == ("", "A", "medium")
    assert running_class("x" * 5000, CLASSES) == ("", "A", "medium")  # long user text: read, not kept


def test_the_engines_job_is_built_by_the_intake():
    at_submit = intake(from_hook(hook(gpus_per_node=2, time_limit=10), CommentSpec("resnet", net="high"),
                                 "req:9", 50.0, CLASSES)).request
    assert (at_submit.job_id, at_submit.num_gpus, at_submit.perf_class, at_submit.app) == ("req:9", 2, "B", "resnet")
    assert at_submit.submit_time == at_submit.waiting_since == 50.0 and at_submit.remaining_time == 600.0
    assert at_submit.net_sensitivity == "high" and at_submit.shape == JobShape.on_nodes(1, 2)
    held = intake(from_queue(queued(submit_time=40, time_limit_s=None), CLASSES)).request
    assert held.job_id == 7 and held.submit_time == 40.0 and held.remaining_time == 0.0


def test_a_held_job_gets_its_class_and_net_by_the_sites_rules():
    """A default-on partition's job pald holds: planned with the class its rule gave at submit;
    with rules_override the rules win over a user's class= and net= too."""
    from pal_slurm.model.site_rules import SiteRules
    from pal_slurm.slurm.readers import JobPlacementRequest

    site = SiteRules.parse("name:bert*=C; account:vision=D", "name:bert*=high", False, "*")
    bert = queued(comment="", name="bert-large")
    vision = queued(comment="", name="x", placement_request=JobPlacementRequest(account="vision"))
    assert intake(from_queue(bert, CLASSES, site)).perf_class == "C"
    assert intake(from_queue(vision, CLASSES, site)).perf_class == "D"
    assert intake(from_queue(queued(comment="", name="x"), CLASSES, site)).perf_class == "A"  # no rule: default
    assert intake(from_queue(bert, CLASSES)).perf_class == "A"  # no rules given
    spec_job = queued(name="bert-large", comment="pal:class=resnet,net=low")
    mine = intake(from_queue(spec_job, CLASSES, site))
    assert mine.perf_class == "B" and mine.spec.net == "low"  # the user's spec stands
    ruled = intake(from_queue(spec_job, CLASSES, SiteRules.parse("name:bert*=C", "name:bert*=high", True, "*")))
    assert ruled.perf_class == "C" and ruled.spec.net == "high"  # the site's rules win


# ---- at submit with pald's rules: the partitions, the spec's check, the site's rules --------
RULES = SubmitRules(default_on=DefaultOn(frozenset({"open"})), site=SiteRules.parse("", "", False, "account:vip"))


def test_the_partitions_are_the_jobs_list_else_slurms_default():
    assert partitions_of(hook(partition="a,b"), "dflt") == ("a", "b")
    assert partitions_of(hook(), "dflt") == ("dflt",)
    assert partitions_of(hook(), None) == ()


def test_a_spec_that_is_not_the_raw_comment_is_refused_before_anything_else():
    got = from_hook(hook(gpus_per_node=1, comment="pal:class=bert"), SPEC, "k", 0.0, CLASSES, ("gpu",), RULES)
    assert isinstance(got, Pass) and got.refused_spec
    assert got.reason == "bad_comment:mismatch" and got.warning and got.warning.startswith("pald ignored the pal: spec")
    # without pald's rules the spec is taken as sent
    assert intake(from_hook(hook(gpus_per_node=1, comment="pal:class=bert"), SPEC, "k", 0.0, CLASSES)).perf_class == "B"


def test_a_job_with_no_spec_is_pals_only_in_a_default_on_partition():
    bare = CommentSpec(DEFAULT_ON_CLASS)
    got = from_hook(hook(gpus_per_node=1, comment=""), bare, "k", 0.0, CLASSES, ("gpu",), RULES)
    assert isinstance(got, Pass) and got.refused_spec and got.reason == "bad_comment:not_default_on"
    on = intake(from_hook(hook(gpus_per_node=1, comment=""), bare, "k", 0.0, CLASSES, ("open",), RULES))
    assert on.perf_class == "A" and on.spec is not None and on.spec.perf_class == "A"  # the default class


def test_a_mode_now_the_site_does_not_allow_is_dropped_with_a_notice():
    asked = CommentSpec("resnet", mode="now")
    comment = "pal:class=resnet,mode=now"
    got = intake(from_hook(hook(gpus_per_node=1, comment=comment), asked, "k", 0.0, CLASSES, ("gpu",), RULES))
    assert got.spec is not None and got.spec.mode is None
    assert got.notice is not None and "mode=now is not allowed" in got.notice
    vip = intake(from_hook(hook(gpus_per_node=1, comment=comment, account="vip"), asked, "k", 0.0, CLASSES, ("gpu",),
                           RULES))
    assert vip.spec is not None and vip.spec.mode == "now" and vip.notice is None

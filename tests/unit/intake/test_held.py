"""A cycle's held records read in one call (intake/held.py): PAL's own marks told apart from
what the user asked, and what the cycle plans with."""

from __future__ import annotations

from dataclasses import replace

from pal_slurm.intake.held import HeldReader, bound_slots, placement_record, read_held
from pal_slurm.intake.job import Intake, Pass, from_queue
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.class_rules import parse_class_rules
from pal_slurm.model.site_rules import SiteRules
from pal_slurm.slurm.readers import JobInfo

PLACED = "pal:placed=gpu02;rank=v1;req=ab"


def queued(job_id: int = 7, **fields) -> JobInfo:
    base = JobInfo(job_id=job_id, name="j", state="PENDING", reason="JobHeldUser", user_id=1000,
                   comment="pal:class=resnet", admin_comment="pal:defer;req=x", nodes=(), required_nodes=(),
                   node_count=1, tres_per_node="gres:gpu:2", gpu_slots={}, priority=0, submit_time=0,
                   start_time=0, time_limit_s=3600.0)
    return replace(base, **fields)


def test_the_old_pin_is_dropped_unless_the_user_gave_the_nodelist() -> None:
    job = queued(admin_comment=f"{PLACED} pal:defer;requeued=1", required_nodes=("gpu02",))
    assert placement_record(job).required_nodes == ()
    own = replace(job, admin_comment=f"{PLACED};nodelist=own pal:defer;requeued=1")
    assert placement_record(own).required_nodes == ("gpu02",)
    placed = replace(job, admin_comment=PLACED)  # not deferred: as it is
    assert placement_record(placed).required_nodes == ("gpu02",)
    died = queued(required_nodes=("gpu01",))  # pinned, then pald died before the release
    assert placement_record(died).required_nodes == ()


def test_bound_slots_reads_pals_slot_types_only() -> None:
    assert bound_slots(queued(tres_per_node="gres:gpu:s0:1,gpu:s1:1")) == (0, 1)
    assert bound_slots(queued(tres_per_node="gres/gpu:s3:1")) == (3,)  # 24.11's spelling
    for untyped in ("gres:gpu:2", "gres:gpu:a100:1", "", "gres:gpu:s0:1,gpu:2"):
        assert bound_slots(queued(tres_per_node=untyped)) is None, untyped


def test_read_held_gives_the_cycle_each_job_read_once() -> None:
    waits = queued(1, eligible_time=100, partition="a,b")  # in Slurm's requeue delay
    pinned = queued(2, admin_comment=f"{PLACED} pal:defer;requeued=1", required_nodes=("gpu02",),
                    tres_per_node="gres:gpu:s0:1,gpu:s1:1")
    array = queued(3, array_job_id=3, array_tasks="1-3")
    bad = queued(4, array_job_id=4, array_tasks="1-x", admin_comment="pal:defer;req=y")
    reads = read_held([waits, pinned, array, bad], 50.0, AppClassMap())
    first, second, third, fourth = reads.jobs
    assert first.read is None and first.partitions == ("a", "b")
    assert isinstance(second.read, Intake)  # judged without pald's own pin
    assert second.read == from_queue(replace(pinned, required_nodes=()), AppClassMap())
    assert second.slots == (0, 1) and second.elements == (2,)
    assert third.elements == ("3_1", "3_2", "3_3")
    assert fourth.elements is None
    assert reads.comments["3_2"] == "pal:defer;req=x" and reads.comments[4] == "pal:defer;req=y"
    unreadable = read_held([queued(5, unreadable="x", eligible_time=100)], 50.0, AppClassMap()).jobs[0]
    assert isinstance(unreadable.read, Pass) and unreadable.read.reason == "unreadable_record"


def test_a_kept_reading_is_what_reading_the_record_again_gives() -> None:
    """HeldReader keeps each record's reading for the next read: over reads where records
    stay, change, become eligible, leave and come back, and the class map or the site's rules
    change, every reading is what read_held gives, and an unchanged record is not read again."""
    reader = HeldReader()
    classes, rules = AppClassMap(), SiteRules()
    jobs = [queued(1), queued(2, eligible_time=100), queued(3, comment="pal:class=bert,net=high"),
            queued(4, unreadable="x")]
    reads = []
    for now, change in ((50.0, None), (60.0, None), (150.0, "eligible"), (160.0, "comment"), (170.0, "gone"),
                        (180.0, "back"), (190.0, "classes"), (200.0, "rules")):
        if change == "comment":
            jobs[0] = replace(jobs[0], comment="pal:class=vgg19", tres_per_node="gres:gpu:4")
        elif change == "gone":
            gone = jobs.pop(2)
        elif change == "back":
            jobs.append(gone)
        elif change == "classes":
            classes = AppClassMap({"resnet": "D"})
        elif change == "rules":
            rules = SiteRules(nets=parse_class_rules("name:j=low"), override=True)
        copies = [replace(j) for j in jobs]  # each read's records are new objects, as squeue's are
        got = reader.read(copies, now, classes, rules)
        assert got == read_held(copies, now, classes, rules), change
        assert all(h.job is j for h, j in zip(got.jobs, copies))
        reads.append(got)
    assert reads[1].jobs[0].read is reads[0].jobs[0].read  # kept, not read again
    assert reads[2].jobs[1].read is not None  # its requeue delay passed: read now
    assert reads[-1].jobs[0].read.request.net_sensitivity == "low"
